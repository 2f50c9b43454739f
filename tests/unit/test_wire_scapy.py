"""The scapy twin of the wire format (hpccd.core.wire) against the shared vectors,
the C hop packer and speed table, and the SipHash reference values.

tests/vectors/wire.json is packed by tests/vectors/make_vectors.py with
``struct`` from the C structs, not with these layers: agreement here means
two independent encoders agree on every byte.
"""
from __future__ import annotations

import json
import pathlib
import struct
import subprocess
import sys

import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from hpccd.core import cc, wire
from hpccd.core.checksum import internet_checksum
from hpccd.core.siphash import siphash24
from hpccd.core.wire import Hpccd, HpccdHop, HpccdInt, HpccdNotify, HpccdTag

ROOT = pathlib.Path(__file__).resolve().parents[2]
VECTORS_DIR = ROOT / "tests" / "vectors"
DOC = json.loads((VECTORS_DIR / "wire.json").read_text())
KEY = bytes.fromhex(DOC["tag_key_hex"])
VECTORS = DOC["vectors"]
VALID = [v for v in VECTORS if v["error"] == 0]
TAGGED = [v for v in VALID if v["fields"]["tag_valid"] is not None]


def by_name(vs):
    return pytest.mark.parametrize("v", vs, ids=[v["name"] for v in vs])


# ---- SipHash-2-4 ---------------------------------------------------------------------

@pytest.mark.parametrize("msg,expect", [
    (b"", 0x726FDB47DD0E0E31),                   # SipHash paper, Appendix A / vectors.h [0]
    (bytes(range(15)), 0xA129CA6149BE45E5),      # the paper's worked example
    (bytes(range(8)), 0x93F5F5799A932462),       # vectors.h [8]: one full block, no tail
    (bytes(range(63)), 0x958A324CEB064572),      # vectors.h [63]: 7 blocks and a 7-byte tail
])
def test_siphash_reference_values(msg, expect):
    assert siphash24(bytes(range(16)), msg) == expect


def test_siphash_rejects_bad_key():
    with pytest.raises(ValueError):
        siphash24(bytes(15), b"")


# ---- the vector file itself ---------------------------------------------------------------

def test_vector_file_header():
    assert DOC["format"] == 1
    assert DOC["udp_port"] == wire.UDP_PORT_DEFAULT
    assert DOC["probe_dscp"] == wire.PROBE_DSCP_DEFAULT
    assert len({v["name"] for v in VECTORS}) == len(VECTORS)
    for v in VECTORS:
        assert v["description"] and v["l4"] in ("udp", "tcp")
        assert (v["fields"] is None) == (v["error"] != 0)
        # sendable as is: the Ethernet minimum, but for the one capture cut short
        assert len(v["hex"]) // 2 >= 60 or v["name"] == "err_int_trunc_frame_cut"


def test_every_error_class_is_covered():
    assert {v["error"] for v in VECTORS} == set(range(0, 11))


def test_vector_file_is_regenerated_identically(tmp_path):
    """The committed JSON is exactly what make_vectors.py writes (deterministic)."""
    out = tmp_path / "wire.json"
    subprocess.run([sys.executable, str(VECTORS_DIR / "make_vectors.py"), "-o", str(out)],
                   check=True, cwd=tmp_path)
    assert out.read_text() == (VECTORS_DIR / "wire.json").read_text()


@by_name(VALID)
def test_valid_vectors_have_correct_checksums(v):
    """IPv4 and L4 checksums verify (computed here, not by scapy); UDP's is not zero."""
    f = bytes.fromhex(v["hex"])
    ihl = (f[14] & 0xF) * 4
    tot = struct.unpack_from("!H", f, 16)[0]
    assert internet_checksum(f[14:14 + ihl]) == 0
    seg = f[14 + ihl:14 + tot]
    proto = f[14 + 9]
    pseudo = f[26:34] + struct.pack("!BBH", 0, proto, len(seg))
    assert internet_checksum(pseudo + seg) == 0
    if v["l4"] == "udp":
        assert proto == 17 and struct.unpack_from("!H", seg, 6)[0] != 0
    else:
        assert proto == 6


# ---- classification ---------------------------------------------------------------------

@by_name(VECTORS)
def test_classify_matches_vector(v):
    assert wire.classify(bytes.fromhex(v["hex"])) == v["error"]


def test_classify_not_hpccd():
    """Traffic that is not hpccd's is not classified at all (it passes to the kernel)."""
    a, b = "192.0.2.1", "198.51.100.2"
    other_port = Ether() / IP(src=a, dst=b) / UDP(sport=1234, dport=4321) / Raw(b"\xc1" * 40)
    tcp_ack = (Ether() / IP(src=a, dst=b, tos=45 << 2) / TCP(flags="A")
               / Raw(bytes.fromhex(VALID[0]["hex"])[42:]))
    tcp_dscp0 = Ether() / IP(src=a, dst=b) / TCP(flags=0) / Raw(b"\xc1" * 80)
    tcp_no_magic = Ether() / IP(src=a, dst=b, tos=45 << 2) / TCP(flags=0) / Raw(b"\x01" * 80)
    fragment = (Ether() / IP(src=a, dst=b, frag=100) / UDP(dport=wire.UDP_PORT_DEFAULT)
                / Raw(b"\xc1" * 40))
    for p in (other_port, tcp_ack, tcp_dscp0, tcp_no_magic, fragment):
        assert wire.classify(bytes(p)) == wire.NOT_HPCCD, p.summary()
    assert wire.classify(b"\x00" * 10) == wire.NOT_HPCCD


def test_classify_outer_header_edges():
    """One 802.1Q tag is looked through; a UDP length below 8 or an IPv4 total length
    below the IP header makes the frame not hpccd's (include/hpccd/parse.h alike)."""
    v = [v for v in VALID if v["name"] == "data_room5_nhop1"][0]
    frame = bytes.fromhex(v["hex"])
    tagged = frame[:12] + bytes.fromhex("81000064") + frame[12:]
    assert wire.classify(tagged) == wire.WireErr.OK
    assert wire.packet_fields(wire.decode(tagged), KEY) == v["fields"]
    short_udp = bytearray(frame)
    struct.pack_into("!H", short_udp, 38, 7)
    assert wire.classify(bytes(short_udp)) == wire.NOT_HPCCD
    short_ip = bytearray(frame)
    struct.pack_into("!H", short_ip, 16, 19)
    assert wire.classify(bytes(short_ip)) == wire.NOT_HPCCD


def test_classify_error_names_follow_the_c_enum():
    assert [e.c_name for e in wire.WireErr] == [
        "HPCCD_E_OK", "HPCCD_E_INT_TRUNC", "HPCCD_E_MAGIC", "HPCCD_E_INT_VERSION",
        "HPCCD_E_ROOM", "HPCCD_E_NHOP", "HPCCD_E_HOPS_TRUNC", "HPCCD_E_HDR_TRUNC",
        "HPCCD_E_VERSION", "HPCCD_E_TYPE", "HPCCD_E_LEN"]


# ---- dissection and building ------------------------------------------------------------

@by_name(VALID)
def test_valid_vector_dissects_to_its_fields(v):
    pkt = wire.decode(bytes.fromhex(v["hex"]))
    assert wire.packet_fields(pkt, KEY) == v["fields"]


@by_name(VECTORS)
def test_dissection_keeps_every_byte(v):
    frame = bytes.fromhex(v["hex"])
    assert bytes(wire.decode(frame)) == frame


def _hpccd_from_fields(f: dict):
    i = f["int"]
    layers = HpccdInt(magic=i["magic"], ver=i["ver"], nhop=i["nhop"], room=i["room"],
                      flags=i["flags"], path_id=i["path_id"],
                      hops=[HpccdHop(**h) for h in i["hops"]]) / Hpccd(**f["hdr"])
    if f["notify"] is not None:
        layers /= HpccdNotify(**f["notify"])
    if f["hdr"]["type"] in (wire.T_ACK, wire.T_NACK, wire.T_CNP):
        fb = f.get("feedback")
        if fb is None:           # no trailer: the body is all SACK bytes
            body = wire.HpccdFeedback(sack=bytes.fromhex(f["payload_hex"]), fb_seq=None)
        else:
            body = wire.HpccdFeedback(sack=bytes.fromhex(f["payload_hex"]), fb_seq=fb["fb_seq"],
                                      fb_flags=fb["fb_flags"], tag=int(f["tag_hex"], 16),
                                      **(fb["window"] or {}))
        return layers / body
    if f["payload_len"]:
        layers /= Raw(bytes.fromhex(f["payload_hex"]))
    if f["tag_hex"] is not None:
        layers /= HpccdTag(tag=int(f["tag_hex"], 16))
    return layers


@by_name(VALID)
def test_valid_vector_rebuilds_byte_for_byte(v):
    """Layers built from the fields, behind the vector's own L2-L4 headers with the L4
    checksum recomputed by scapy, reproduce the frame."""
    frame = bytes.fromhex(v["hex"])
    pkt = Ether(frame)
    l4 = pkt[UDP] if v["l4"] == "udp" else pkt[TCP]
    l4.remove_payload()
    l4.chksum = None
    trailer = frame[14 + pkt[IP].len:]
    assert bytes(pkt / _hpccd_from_fields(v["fields"])) + trailer == frame


@by_name(VALID)
def test_lengths_fill_themselves(v):
    """room and len left at None are filled from the hops and the payload."""
    f = v["fields"]
    built = _hpccd_from_fields(f)
    built[HpccdInt].room = None
    built[Hpccd].len = None
    assert bytes(built) == bytes(_hpccd_from_fields(f))


def test_default_packet_is_valid():
    """What the layers build by default is a well-formed DATA packet to the port."""
    p = (Ether() / IP(src="192.0.2.1", dst="198.51.100.2") / UDP(sport=49153)
         / wire.int_header(flags="COLLECT") / Hpccd(seq=1 << 40) / Raw(b"x" * 100))
    frame = bytes(p)
    assert wire.classify(frame) == wire.WireErr.OK
    d = Ether(frame)
    assert d[UDP].dport == wire.UDP_PORT_DEFAULT
    assert d[HpccdInt].room == 5 and d[HpccdInt].nhop == 0 and len(d[HpccdInt].hops) == 5
    assert d[Hpccd].len == 100 and d[Hpccd].seq == 1 << 40
    assert struct.unpack_from("!II", frame, 42 + 44 + 8) == (1 << 8, 0)   # seq hi, lo


def test_answers_dissect_by_source_port():
    ack = [v for v in VALID if v["name"] == "ack_int_echo"][0]
    pkt = Ether(bytes.fromhex(ack["hex"]))
    assert pkt[UDP].sport == wire.UDP_PORT_DEFAULT != pkt[UDP].dport
    assert Hpccd in pkt and pkt[Hpccd].type == wire.T_ACK


def test_bind_port_moves_the_binding():
    frame = bytes.fromhex(VALID[0]["hex"])
    moved = bytearray(frame)
    struct.pack_into("!H", moved, 36, 20000)      # UDP dport
    try:
        wire.bind_port(20000)
        assert HpccdInt in Ether(bytes(moved)) and HpccdInt not in Ether(frame)
        assert wire.classify(bytes(moved)) == 0
        assert wire.classify(frame) == wire.NOT_HPCCD
    finally:
        wire.bind_port(wire.UDP_PORT_DEFAULT)
    assert HpccdInt in Ether(frame) and HpccdInt not in Ether(bytes(moved))


# ---- TCP-side probes ----------------------------------------------------------------------

@by_name([v for v in VECTORS if v["l4"] == "tcp"])
def test_tcp_probe_recognised(v):
    frame = bytes.fromhex(v["hex"])
    assert wire.is_tcp_probe(Ether(frame))
    assert not wire.is_tcp_probe(Ether(frame), dscp=46)
    pkt = wire.decode(frame)
    if v["error"] == 0:
        assert HpccdInt in pkt and pkt[Hpccd].type in (wire.T_PROBE, wire.T_PROBE_RESP)


def test_udp_vectors_are_not_tcp_probes():
    for v in VECTORS:
        if v["l4"] == "udp":
            assert not wire.is_tcp_probe(Ether(bytes.fromhex(v["hex"])))


# ---- integrity tag ----------------------------------------------------------------------

@by_name(TAGGED)
def test_tag_valid_matches_verify_tag(v):
    assert wire.verify_tag(KEY, bytes.fromhex(v["hex"])) is v["fields"]["tag_valid"]


@by_name([v for v in TAGGED if v["fields"]["tag_valid"]])
def test_set_tag_writes_the_vector_tag(v):
    pkt = wire.decode(bytes.fromhex(v["hex"]))
    layer = pkt[wire.HpccdFeedback] if wire.HpccdFeedback in pkt else pkt[HpccdTag]
    layer.tag = 0
    wire.set_tag(KEY, pkt)
    assert f"{layer.tag:016x}" == v["fields"]["tag_hex"]
    assert not wire.verify_tag(bytes(16), pkt)


def test_tag_input_is_the_data_senders_view():
    def get(name):
        return wire.decode(bytes.fromhex([v for v in VECTORS if v["name"] == name][0]["hex"]))

    sender = bytes([192, 0, 2, 1]) + bytes([198, 51, 100, 2])
    assert wire.tag_input(get("probe_resp_udp")) == sender + struct.pack("!HHB3x", 49153,
                                                                          18471, 17)
    assert wire.tag_input(get("probe_udp")) == sender + struct.pack("!HHB3x", 49153, 18471, 17)
    assert wire.tag_input(get("notify")) == sender + struct.pack("!HHB3x", 49153, 18471, 17)
    assert wire.tag_input(get("tcp_probe_resp")) == sender + struct.pack("!HHB3x", 43210,
                                                                          5201, 6)
    assert wire.tag_input(get("tcp_probe")) == sender + struct.pack("!HHB3x", 43210, 5201, 6)


def test_untagged_types_refuse_verification():
    with pytest.raises(ValueError):
        wire.verify_tag(KEY, bytes.fromhex(VALID[0]["hex"]))


# ---- the hop record: scapy twin against the C one -----------------------------------------

def test_speed_table_equals_c():
    assert [cc.speed_mbps(c) for c in range(32)] == list(wire.SPEED_MBPS)
    for c in range(1, 32):
        assert cc.speed_code(wire.SPEED_MBPS[c] * 1_000_000) == c


@pytest.mark.parametrize("fields", [
    (0, 0, 0, 0),
    (14, 0xA1B2, 0x400, 0x10),
    (6, 0xFFFFFF, 0x42, 0x7FFF),
    (22, 0xFFFFF0, 0xFFFFF, 0xFA),
    (27, 0x800000, 0x80000, 1),
    (31, 0xFFFFFF, 0xFFFFF, 0x7FFF),
    (1, 1, 1, 1),
])
def test_hop_pack_equals_c(fields):
    code, ts, tx, q = fields
    h = HpccdHop(speed_code=code, ts=ts, tx_units=tx, qlen_units=q)
    raw = bytes(h)
    assert raw == cc.hop_pack(code, ts, tx, q)
    assert cc.hop_unpack(raw) == {"speed_code": code, "ts": ts, "tx_units": tx,
                                  "qlen_units": q}
    d = HpccdHop(raw)
    assert (d.speed_code, d.ts, d.tx_units, d.qlen_units) == fields
    assert d.bw_bps == cc.speed_mbps(code) * 1_000_000
    assert d.tx_bytes == tx * 128 and d.qlen_bytes == q * 80 and d.ts_ns == ts


def test_int_hops_bytes_feed_the_c_core():
    v = [v for v in VALID if v["name"] == "data_room5_nhop5"][0]
    pkt = wire.decode(bytes.fromhex(v["hex"]))
    raw = wire.int_hops_bytes(pkt)
    assert raw == b"".join(cc.hop_pack(**h) for h in v["fields"]["int"]["hops"][:5])
    assert len(wire.int_hops_bytes(pkt, stamped_only=False)) == 40
    flow = cc.Hpcc()
    flow.new_ack_wire(0, 0, 0, pkt[HpccdInt].path_id, raw)      # accepted by C
