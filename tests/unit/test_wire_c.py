"""The C parser of include/hpccd/parse.h (the one the BPF programs include),
through hpccd_wire_parse_frame() of hpccd._cc, against tests/vectors/wire.json.

Invariants protected:
  - every vector gets the class of docs/wire-format.md "Malformed packets"
    (first fault in the spec's order) and, when valid, every decoded field;
  - the integrity tag verifies exactly where the vector says it does;
  - no truncation of a valid frame is ever taken for valid (except cuts in
    Ethernet padding, which is not part of the packet), and each cut gets
    the class of the part it falls in; cuts inside Ethernet/IPv4/L4 headers
    are "not an hpccd packet" (HPCCD_WIRE_NOT_HPCCD = -ENOENT);
  - SipHash-2-4 in C gives the paper's reference values.
"""
from __future__ import annotations

import errno
import json
import pathlib
import random
import struct

import pytest

from hpccd._cc import ffi, lib
from hpccd.core.checksum import internet_checksum

VECTORS = pathlib.Path(__file__).resolve().parents[1] / "vectors" / "wire.json"

NOT_HPCCD = lib.HPCCD_WIRE_NOT_HPCCD
UDP, TCP = 17, 6
SIP_KEY = bytes(range(16))


def _load() -> dict:
    if not VECTORS.exists():
        pytest.skip(f"{VECTORS} not present")
    return json.loads(VECTORS.read_text())


def _vectors() -> list:
    if not VECTORS.exists():
        return []
    return json.loads(VECTORS.read_text())["vectors"]


def parse(frame: bytes, port: int = 18471, dscp: int = 45):
    """Exact-size copy of the frame (so an overread would leave the buffer),
    parsed; returns (class, info)."""
    buf = ffi.new("uint8_t[]", max(len(frame), 1))
    ffi.memmove(buf, frame, len(frame))
    info = ffi.new("struct hpccd_wire_info *")
    rc = lib.hpccd_wire_parse_frame(buf, len(frame), port, dscp, info)
    return rc, info


def verify(key: bytes, frame: bytes, port: int = 18471, dscp: int = 45) -> int:
    return lib.hpccd_wire_tag_verify(key, frame, len(frame), port, dscp)


def _dotted(addr: int) -> str:
    return ".".join(str(addr >> s & 0xFF) for s in (24, 16, 8, 0))


def ids(vs):
    return [v["name"] for v in vs]


# ---- SipHash self-check -------------------------------------------------------


def test_siphash_reference_values_of_the_paper():
    # SipHash paper, Appendix A: key 00..0f; message "" and 00..0e.
    assert lib.hpccd_wire_siphash24(SIP_KEY, b"", 0) == 0x726FDB47DD0E0E31
    msg = bytes(range(15))
    assert lib.hpccd_wire_siphash24(SIP_KEY, msg, 15) == 0xA129CA6149BE45E5


def test_siphash_c_matches_the_python_twin():
    twin = pytest.importorskip("hpccd.core.siphash")
    rnd = random.Random(4)
    for n in list(range(40)) + [127, 128, 129]:
        key = rnd.randbytes(16)
        msg = rnd.randbytes(n)
        assert lib.hpccd_wire_siphash24(key, msg, n) == twin.siphash24(key, msg), n


# ---- the vectors ---------------------------------------------------------------


def _expected_rc(v: dict) -> int:
    e = v["error"]
    return NOT_HPCCD if e is None or e < 0 else e


@pytest.mark.parametrize("v", _vectors(), ids=ids(_vectors()))
def test_vector_class_and_fields(v):
    doc = _load()
    frame = bytes.fromhex(v["hex"])
    rc, info = parse(frame, doc["udp_port"], doc["probe_dscp"])
    assert rc == _expected_rc(v), v["description"]
    if rc >= 0:
        assert info.l4 == {"udp": UDP, "tcp": TCP}[v["l4"]]
    f = v.get("fields")
    if not f:
        return
    ip = f["ip"]
    assert (_dotted(info.saddr), _dotted(info.daddr), info.dscp, info.ecn, info.l4,
            info.sport, info.dport) == (ip["src"], ip["dst"], ip["dscp"], ip["ecn"],
                                        ip["proto"], ip["sport"], ip["dport"])
    i = f["int"]
    assert (info.int_magic, info.int_ver, info.int_nhop, info.int_room, info.int_flags,
            info.int_path_id) == (i["magic"], i["ver"], i["nhop"], i["room"], i["flags"],
                                  i["path_id"])
    assert len(i["hops"]) <= lib.HPCCD_CC_MAX_HOPS
    for k, hop in enumerate(i["hops"]):
        h = info.hops[k]
        assert (h.speed_code, h.ts, h.tx_units, h.qlen_units) == (
            hop["speed_code"], hop["ts"], hop["tx_units"], hop["qlen_units"]), f"hop {k}"
    h = f["hdr"]
    assert (info.hdr_ver, info.hdr_type, info.hdr_flags, info.hdr_len, info.flow_id,
            info.seq, info.ack, info.ts, info.aux) == (
        h["ver"], h["type"], h["flags"], h["len"], h["flow_id"], h["seq"], h["ack"],
        h["ts"], h["aux"])
    n = f.get("notify")
    assert bool(info.has_notify) == (n is not None)
    if n is not None:
        assert (info.w_bytes, info.rate_kbps, info.u_q16, info.n_flows, info.reserved,
                info.notify_seq, info.t_ns) == (
            n["w_bytes"], n["rate_kbps"], n["u_q16"], n["n_flows"], n["reserved"],
            n["notify_seq"], n["t_ns"])
    fb = f.get("feedback")
    assert bool(info.has_trailer) == (fb is not None)
    if fb is not None:
        assert (info.fb_seq, info.fb_flags) == (fb["fb_seq"], fb["fb_flags"])
        w = fb["window"]
        assert bool(info.has_rxwin) == (w is not None)
        if w is not None:
            assert (info.w_bytes, info.u_q16, info.n_flows, info.reserved, info.t_ns) == (
                w["w_bytes"], w["u_q16"], w["n_flows"], w["reserved"], w["t_ns"])
    tag = f.get("tag_hex")
    assert bool(info.has_tag) == (tag is not None)
    if tag is not None:
        assert info.tag == int(tag, 16)
        assert frame[info.tag_off:info.tag_off + 8] == bytes.fromhex(tag)
    assert info.payload_len == f["payload_len"]
    if "payload_hex" in f:
        assert frame[info.body_off:info.body_off + info.payload_len].hex() == f["payload_hex"]


@pytest.mark.parametrize("v", [v for v in _vectors() if v.get("fields")
                               and v["fields"].get("tag_valid") is not None]
                         or [None], ids=lambda v: v["name"] if v else "none")
def test_vector_tag_verifies_as_stated(v):
    doc = _load()
    if v is None:
        pytest.skip("no vector with a tag")
    key = bytes.fromhex(doc["tag_key_hex"])
    frame = bytes.fromhex(v["hex"])
    want = 1 if v["fields"]["tag_valid"] else 0
    assert verify(key, frame, doc["udp_port"], doc["probe_dscp"]) == want
    # The tag hpccd_wire_tag() computes is what a valid frame carries.
    out = ffi.new("uint64_t *")
    assert lib.hpccd_wire_tag(key, frame, len(frame), doc["udp_port"], doc["probe_dscp"],
                              out) == 0
    assert (out[0] == int(v["fields"]["tag_hex"], 16)) == bool(want)
    # Any other key does not verify it.
    other = bytes(b ^ 0x5A for b in key)
    assert verify(other, frame, doc["udp_port"], doc["probe_dscp"]) == 0


def test_vectors_without_tag_do_not_verify():
    doc = _load()
    key = bytes.fromhex(doc["tag_key_hex"])
    for v in doc["vectors"]:
        f = v.get("fields")
        if f and f.get("tag_valid") is None:
            rc = verify(key, bytes.fromhex(v["hex"]), doc["udp_port"], doc["probe_dscp"])
            assert rc < 0, v["name"]


def _valid():
    return [v for v in _vectors() if v["error"] == 0]


@pytest.mark.parametrize("v", _valid(), ids=ids(_valid()))
def test_truncation_sweep(v):
    """Every cut of a valid frame: never valid unless the cut is in the
    Ethernet padding, and the class of the part the cut falls in (the
    headers still announce the full length, so l4_end is the cut)."""
    doc = _load()
    port, dscp = doc["udp_port"], doc["probe_dscp"]
    frame = bytes.fromhex(v["hex"])
    rc, full = parse(frame, port, dscp)
    assert rc == 0
    int_off, hdr_off, l4_end = full.int_off, full.hdr_off, full.l4_end_off
    for cut in range(len(frame)):
        rc, _ = parse(frame[:cut], port, dscp)
        if cut < int_off:
            want = NOT_HPCCD                 # inside Ethernet / IPv4 / L4 header
        elif cut == int_off:
            # UDP to the port: an hpccd packet with no INT header.  TCP: no
            # byte to see the magic in, so not a probe.
            want = lib.HPCCD_E_INT_TRUNC if full.l4 == UDP else NOT_HPCCD
        elif cut < int_off + 4:
            want = lib.HPCCD_E_INT_TRUNC
        elif cut < hdr_off:
            want = lib.HPCCD_E_HOPS_TRUNC
        elif cut < hdr_off + 32:
            want = lib.HPCCD_E_HDR_TRUNC
        elif cut < l4_end:
            want = lib.HPCCD_E_LEN
        else:
            want = 0                         # only Ethernet padding cut away
        assert rc == want, f"cut at {cut} of {len(frame)}"


@pytest.mark.parametrize("v", _valid(), ids=ids(_valid()))
def test_other_port_or_dscp_is_not_hpccd(v):
    doc = _load()
    frame = bytes.fromhex(v["hex"])
    if v["l4"] == "udp":
        assert parse(frame, doc["udp_port"] + 1, doc["probe_dscp"])[0] == NOT_HPCCD
        assert parse(frame, doc["udp_port"], (doc["probe_dscp"] + 1) & 63)[0] == 0
    else:
        assert parse(frame, doc["udp_port"], (doc["probe_dscp"] + 1) & 63)[0] == NOT_HPCCD


# ---- the parser's own cases, on frames built here ------------------------------


def _int_hdr(nhop=0, room=0, flags=0, path=0, magic=0xC, ver=1) -> bytes:
    return struct.pack("!BBH", magic << 4 | ver, nhop << 4 | room, flags << 12 | path)


def _hdr(typ, length, flags=0, flow_id=7, seq=0, ack=0, ts=0, aux=0, ver=1) -> bytes:
    return struct.pack("!BBHIIIIIII", ver << 4 | typ, flags, length, flow_id, seq >> 32,
                       seq & 0xFFFFFFFF, ack >> 32, ack & 0xFFFFFFFF, ts, aux)


def _ip(proto, payload_len, tos=0, options=b"", frag=0) -> bytes:
    ihl = 5 + len(options) // 4
    return struct.pack("!BBHHHBBH4s4s", 4 << 4 | ihl, tos, ihl * 4 + payload_len, 1, frag,
                       64, proto, 0, bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])) + options


def _eth(ethertype=0x0800, vlan=None) -> bytes:
    mac = b"\x02\x00\x00\x00\x00\x01\x02\x00\x00\x00\x00\x02"
    if vlan is not None:
        return mac + struct.pack("!HHH", 0x8100, vlan, ethertype)
    return mac + struct.pack("!H", ethertype)


def udp_frame(payload: bytes, dport=18471, pad=0, **ip) -> bytes:
    udp = struct.pack("!HHHH", 40001, dport, 8 + len(payload), 0) + payload
    return _eth(vlan=ip.pop("vlan", None)) + _ip(UDP, len(udp), **ip) + udp + bytes(pad)


def tcp_frame(payload: bytes, flags=0, tos=45 << 2, doff_byte=5 << 4) -> bytes:
    tcp = struct.pack("!HHIIBBHHH", 5201, 40000, 1, 0, doff_byte, flags, 0, 0, 0) + payload
    return _eth() + _ip(TCP, len(tcp), tos=tos) + tcp


ACK = _int_hdr() + _hdr(2, 0, ack=1 << 40, aux=3)


def test_built_ack_decodes():
    rc, info = parse(udp_frame(ACK))
    assert rc == 0
    assert (info.hdr_type, info.ack, info.aux, info.payload_len) == (2, 1 << 40, 3, 0)
    assert info.int_off == 14 + 20 + 8 and info.hdr_off == info.int_off + 4


def test_vlan_tag_and_ip_options_are_skipped():
    rc, info = parse(udp_frame(ACK, vlan=5, options=b"\x01\x01\x01\x00"))
    assert rc == 0 and info.vlan == 1
    assert info.int_off == 18 + 24 + 8


def test_ethernet_padding_is_not_payload():
    # len = 0 and 6 bytes of padding after the IP total length: still valid.
    assert parse(udp_frame(ACK, pad=6))[0] == 0


def test_udp_length_below_8_is_not_a_datagram():
    frame = bytearray(udp_frame(ACK))
    struct.pack_into("!H", frame, 14 + 20 + 4, 7)
    assert parse(bytes(frame))[0] == NOT_HPCCD


def test_feedback_from_the_port_is_hpccd():
    frame = bytearray(udp_frame(ACK, dport=40000))
    struct.pack_into("!H", frame, 14 + 20, 18471)                # sport = the port
    rc, info = parse(bytes(frame))
    assert rc == 0 and (info.sport, info.dport) == (18471, 40000)


def test_udp_length_shorter_than_ip_payload_counts():
    frame = bytearray(udp_frame(ACK + b"\0" * 4))
    struct.pack_into("!H", frame, 14 + 20 + 4, 8 + len(ACK))   # UDP length excludes 4
    assert parse(bytes(frame))[0] == 0


def test_probe_body_length_mismatch_is_len_fault():
    assert parse(udp_frame(_int_hdr() + _hdr(4, 8)))[0] == lib.HPCCD_E_LEN


def test_fault_order_first_applies():
    # magic and room both wrong: magic (2) is reported.
    assert parse(udp_frame(_int_hdr(room=9, magic=0xB) + _hdr(2, 0)))[0] == lib.HPCCD_E_MAGIC
    # room 9 and nHop > room: room (4) first.
    assert parse(udp_frame(_int_hdr(nhop=10, room=9) + _hdr(2, 0)))[0] == lib.HPCCD_E_ROOM
    # bad hpccd version and bad type: version (8) first.
    assert parse(udp_frame(_int_hdr() + _hdr(0, 0, ver=2)))[0] == lib.HPCCD_E_VERSION
    assert parse(udp_frame(_int_hdr() + _hdr(8, 0)))[0] == lib.HPCCD_E_TYPE


@pytest.mark.parametrize("frame", [
    udp_frame(ACK, dport=18472),
    udp_frame(ACK, frag=100),                      # non-first fragment
    _eth(0x86DD) + bytes(60),                      # IPv6
    tcp_frame(_int_hdr() + _hdr(4, 8) + bytes(8), flags=0x10),   # ACK flag set
    tcp_frame(_int_hdr() + _hdr(4, 8) + bytes(8), doff_byte=0x51),  # AE (NS) flag set
    tcp_frame(_int_hdr() + _hdr(4, 8) + bytes(8), tos=0),        # DSCP 0
    tcp_frame(_int_hdr(magic=0xB) + _hdr(4, 8) + bytes(8)),      # no INT magic
    b"",
], ids=["other-port", "fragment", "ipv6", "tcp-ack", "tcp-ae", "tcp-dscp0", "tcp-no-magic", "empty"])
def test_not_hpccd(frame):
    assert parse(frame)[0] == NOT_HPCCD == -errno.ENOENT


def test_tcp_probe_and_response_tag_roundtrip():
    key = bytes(range(16, 32))
    # A PROBE_RESP: the tag covers its reversed 5-tuple.  Compute it with
    # hpccd_wire_tag(), write it, and it verifies; flip one bit: it does not.
    resp = bytearray(tcp_frame(_int_hdr(room=1, nhop=1) + bytes(8) + _hdr(5, 8, seq=9)
                               + bytes(8)))
    out = ffi.new("uint64_t *")
    assert lib.hpccd_wire_tag(key, bytes(resp), len(resp), 18471, 45, out) == 0
    resp[-8:] = out[0].to_bytes(8, "big")
    assert verify(key, bytes(resp)) == 1
    resp[14 + 20 + 20 + 5] ^= 1                    # one bit of the hop record
    assert verify(key, bytes(resp)) == 0
    # The prefix is the probe sender's view: swapping the packet's addresses
    # changes the tag.
    resp[14 + 20 + 20 + 5] ^= 1
    swapped = bytearray(resp)
    swapped[26:30], swapped[30:34] = resp[30:34], resp[26:30]
    assert verify(key, bytes(swapped)) == 0


def test_tag_prefix_is_reversed_for_responses_only():
    """Tag of a NOTIFY by hand: the prefix names the flow as the data
    sender sees it (saddr = the NOTIFY's daddr)."""
    twin = pytest.importorskip("hpccd.core.siphash")
    key = bytes(range(16))
    body = struct.pack("!IIIHHII", 100000, 2000, 65536, 3, 0, 17, 13000)
    payload = _int_hdr() + _hdr(6, 32, ack=5) + body + bytes(8)
    frame = udp_frame(payload)
    prefix = bytes([10, 0, 0, 2, 10, 0, 0, 1]) + struct.pack("!HHB3x", 18471, 40001, UDP)
    want = twin.siphash24(key, prefix + payload[:-8])
    out = ffi.new("uint64_t *")
    assert lib.hpccd_wire_tag(key, frame, len(frame), 18471, 45, out) == 0
    assert out[0] == want
    rc, info = parse(frame)
    assert rc == 0 and info.has_notify and info.has_tag
    assert (info.w_bytes, info.n_flows, info.notify_seq, info.t_ns) == (100000, 3, 17, 13000)


def test_tag_refusals():
    key = bytes(16)
    out = ffi.new("uint64_t *")
    f = udp_frame(ACK)
    assert lib.hpccd_wire_tag(key, f, len(f), 18471, 45, out) == -errno.ENODATA
    f = udp_frame(_int_hdr() + _hdr(4, 8) + bytes(8))              # PROBE: slot only
    assert lib.hpccd_wire_tag(key, f, len(f), 18471, 45, out) == -errno.ENODATA
    f = udp_frame(_int_hdr() + _hdr(5, 8))                          # len fault
    assert lib.hpccd_wire_tag(key, f, len(f), 18471, 45, out) == -errno.EBADMSG
    f = udp_frame(ACK, dport=1)
    assert lib.hpccd_wire_tag(key, f, len(f), 18471, 45, out) == NOT_HPCCD


def test_c_and_python_classifiers_agree_on_mutated_vectors():
    """Every parser classifies alike (docs/wire-format.md): the C parser and
    the Python reference classifier (hpccd.core.wire.classify) on random byte
    mutations and cuts of every vector, the outer headers included."""
    wire = pytest.importorskip("hpccd.core.wire")
    doc = _load()
    port, dscp = doc["udp_port"], doc["probe_dscp"]
    rnd = random.Random(2024)
    for v in doc["vectors"]:
        base = bytes.fromhex(v["hex"])
        for _ in range(300):
            f = bytearray(base)
            for _ in range(rnd.randint(1, 3)):
                # half the mutations in the first 80 bytes: outer headers, INT
                k = rnd.randrange(len(f) if rnd.random() < 0.5 else min(len(f), 80))
                f[k] = rnd.randrange(256) if rnd.random() < 0.7 else f[k] ^ 1 << rnd.randrange(8)
            if rnd.random() < 0.2:
                del f[rnd.randrange(len(f) + 1):]
            f = bytes(f)
            c = parse(f, port, dscp)[0]
            py = int(wire.classify(f, port, dscp))
            assert (NOT_HPCCD if py == wire.NOT_HPCCD else py) == c, (v["name"], f.hex())


# ---- the lab switch's departure stamp (hpccd__restamp_hop) ----------------------------

def _l4_checksum_ok(frame: bytes) -> bool:
    from scapy.layers.inet import IP, in4_chksum
    from scapy.layers.l2 import Ether

    ip = Ether(frame)[IP]
    seg = bytes(ip)[ip.ihl * 4:ip.len]
    if ip.proto == UDP and seg[6:8] == b"\0\0":
        return True
    return in4_chksum(ip.proto, ip, seg) == 0


def _restamp(frame: bytes, idx: int, old: int, new: int) -> tuple[int, bytes]:
    buf = ffi.new("uint8_t[]", frame)
    rc = lib.hpccd_wire_restamp(buf, len(frame), 18471, 45, idx, old, new)
    return rc, bytes(ffi.buffer(buf, len(frame)))


def _word(h) -> int:
    return h.speed_code << 59 | h.ts << 35 | h.tx_units << 15 | h.qlen_units


@pytest.mark.parametrize("v", [v for v in _vectors() if v.get("fields")
                               and v["fields"]["int"]["nhop"] > 0] or [None],
                         ids=lambda v: v["name"] if v else "none")
def test_departure_rewrites_exactly_the_record(v):
    """Every stamped record of every valid vector, rewritten as the lab
    switch's far end does: only its 8 bytes and the L4 checksum change, the
    checksum still verifies (a zero UDP checksum stays zero), the other
    records, nHop and pathID are kept; a record that is not the expected
    word, or an index at or past nHop, leaves the frame untouched."""
    if v is None:
        pytest.skip("no vector with a stamped record")
    frame = bytes.fromhex(v["hex"])
    rc, info = parse(frame)
    assert rc == 0 and _l4_checksum_ok(frame)
    nhop = info.int_nhop
    hops = [_word(info.hops[k]) for k in range(info.int_room)]
    csum_off = (14 + (4 if info.vlan else 0) + (frame[14 + (4 if info.vlan else 0)] & 0xF) * 4
                + (6 if info.l4 == UDP else 16))
    for i in range(nhop):
        # departure values: B kept, TS / txBytes / qLen new
        new = (hops[i] & (0x1F << 59)) | (0xABCDE1 << 35) | (0x12345 << 15) | 0x0456
        rc, out = _restamp(frame, i, hops[i], new)
        assert rc == 0, (v["name"], i)
        off = info.int_off + 4 + 8 * i
        assert out[off:off + 8] == struct.pack("!Q", new)
        changed = [k for k in range(len(frame)) if out[k] != frame[k]]
        assert all(off <= k < off + 8 or csum_off <= k < csum_off + 2 for k in changed), changed
        assert _l4_checksum_ok(out), (v["name"], i)
        if info.l4 == UDP and frame[csum_off:csum_off + 2] == b"\0\0":
            assert out[csum_off:csum_off + 2] == b"\0\0"
        rc2, info2 = parse(out)
        assert rc2 == 0 and (info2.int_nhop, info2.int_path_id, info2.int_flags) == (
            nhop, info.int_path_id, info.int_flags)
        assert [_word(info2.hops[k]) for k in range(info.int_room)] == \
            hops[:i] + [new] + hops[i + 1:]
        # not the record written at enqueue: untouched
        rc, out = _restamp(frame, i, hops[i] ^ 1, new)
        assert (rc, out) == (1, frame)
    rc, out = _restamp(frame, nhop, hops[nhop] if nhop < len(hops) else 0, 1)
    assert (rc, out) == (2, frame)


@pytest.mark.parametrize("v", [v for v in _vectors() if v.get("fields")
                               and v["fields"].get("tag_valid")],
                         ids=lambda v: v["name"])
def test_tag_span_is_the_frames_tag(v):
    """hpccd_wire_tag_span (the engine's feedback path: the prefix and the
    offsets it has, no second parse) gives the tag hpccd_wire_tag gives the
    whole frame, for every vector whose tag is valid; the prefix is the
    Python twin's (hpccd.core.wire.tag_input)."""
    from hpccd.core import wire

    doc = _load()
    key = bytes.fromhex(doc["tag_key_hex"])
    frame = bytes.fromhex(v["hex"])
    rc, info = parse(frame, doc["udp_port"], doc["probe_dscp"])
    assert rc == 0 and info.has_tag
    prefix = ffi.new("uint8_t[]", wire.tag_input(frame))
    ti = ffi.cast("struct hpccd_tag_input *", prefix)
    buf = ffi.from_buffer(frame)
    out = ffi.new("uint64_t *")
    n = info.tag_off - info.int_off
    assert lib.hpccd_wire_tag_span(key, ti, buf + info.int_off, n, out) == 0
    assert out[0] == int(v["fields"]["tag_hex"], 16)
    # beyond the longest tagged packet: refused, not read
    assert lib.hpccd_wire_tag_span(key, ti, buf + info.int_off, 24 * 8 + 1, out) == -errno.EINVAL


# ---- the probe reflector (include/hpccd/build.h through hpccd_wire_reflect_probe) --------


def _reflect(frame: bytes, key: bytes, port: int, dscp: int) -> tuple[int, bytes]:
    buf = ffi.new("uint8_t[]", max(len(frame), 1))
    ffi.memmove(buf, frame, len(frame))
    rc = lib.hpccd_wire_reflect_probe(key, buf, len(frame), port, dscp)
    return rc, ffi.buffer(buf, len(frame))[:]


@pytest.mark.parametrize("v", [v for v in _vectors() if v["error"] == 0
                               and v["fields"]["hdr"]["type"] == 4],
                         ids=lambda v: v["name"])
def test_reflected_probe_is_its_valid_tagged_response(v):
    """A PROBE vector becomes a valid PROBE_RESP of the same length with the
    5-tuple reversed, COLLECT cleared, the hops kept, a tag that verifies and
    checksums that sum right; the prober's values (flow, probe number, ts) stay."""
    doc = _load()
    key, port, dscp = bytes.fromhex(doc["tag_key_hex"]), doc["udp_port"], doc["probe_dscp"]
    frame = bytes.fromhex(v["hex"])
    rc0, probe = parse(frame, port, dscp)
    assert rc0 == 0
    rc, out = _reflect(frame, key, port, dscp)
    assert rc == 0 and len(out) == len(frame)
    rc1, resp = parse(out, port, dscp)
    assert rc1 == 0
    assert resp.hdr_type == 5 and resp.has_tag
    assert (resp.saddr, resp.daddr, resp.sport, resp.dport) == \
        (probe.daddr, probe.saddr, probe.dport, probe.sport)
    assert resp.int_flags == probe.int_flags & ~0x8
    assert (resp.int_nhop, resp.int_room, resp.int_path_id) == \
        (probe.int_nhop, probe.int_room, probe.int_path_id)
    assert (resp.flow_id, resp.seq, resp.ts) == (probe.flow_id, probe.seq, probe.ts)
    assert verify(key, out, port, dscp) == 1
    ip = 14 if out[12:14] != b"\x81\x00" else 18
    ihl = (out[ip] & 0xF) * 4
    assert internet_checksum(out[ip:ip + ihl]) == 0, "IPv4 header checksum"
    l4_len = struct.unpack_from("!H", out, ip + 2)[0] - ihl
    pseudo = out[ip + 12:ip + 20] + bytes([0, out[ip + 9]]) + struct.pack("!H", l4_len)
    seg = out[ip + ihl:ip + ihl + l4_len]
    if out[ip + 9] == TCP or seg[6:8] != b"\0\0":
        assert internet_checksum(pseudo + seg) == 0, "L4 checksum"


def test_reflector_refuses_what_is_not_a_probe_and_leaves_it_alone():
    doc = _load()
    key, port, dscp = bytes.fromhex(doc["tag_key_hex"]), doc["udp_port"], doc["probe_dscp"]
    by = {v["name"]: bytes.fromhex(v["hex"]) for v in doc["vectors"]}
    others = [v for v in doc["vectors"] if v["error"] == 0 and v["fields"]["hdr"]["type"] != 4]
    assert others
    for v in others:
        frame = by[v["name"]]
        assert _reflect(frame, key, port, dscp) == (-errno.ENODATA, frame), v["name"]
    bad = [v for v in doc["vectors"] if v["error"] > 0]
    assert bad
    for v in bad:
        frame = by[v["name"]]
        assert _reflect(frame, key, port, dscp) == (v["error"], frame), v["name"]
    probe = next(f for n, f in by.items() if n == "probe_udp")
    assert _reflect(probe[:-30], key, port, dscp)[1] == probe[:-30]
    assert _reflect(b"\0" * 60, key, port, dscp) == (NOT_HPCCD, b"\0" * 60)
    assert lib.hpccd_wire_reflect_probe(ffi.NULL, ffi.new("uint8_t[]", 60), 60, port,
                                        dscp) == -errno.EINVAL
