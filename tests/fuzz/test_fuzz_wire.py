"""Property-based fuzzing (hypothesis) of the Python decode paths: hpccd.core.wire and
hpccd.core.decode, against the C parser of include/hpccd/parse.h (hpccd._cc).

Inputs: arbitrary bytes; Ethernet/IPv4/UDP or TCP frames with arbitrary
header fields and an arbitrary hpccd region (so that the fuzzing reaches the
hpccd checks, not only "not IPv4"); the frames of tests/vectors/wire.json
mutated (bytes flipped, cut, inserted, deleted); and packets built field by
field with the scapy layers.

Invariants protected:
  - wire.classify() and wire.l4_region() never raise; the class is the C
    parser's for every frame (both follow docs/wire-format.md "Malformed
    packets"; -1 in Python is HPCCD_WIRE_NOT_HPCCD in C);
  - wire.decode(), decode.describe() (with and without a tag key) and
    decode.render() never raise on any frame; describe's verdict is the
    class, and for a valid packet its fields (addresses, ports, INT header,
    every hop, the hpccd header, NOTIFY body, tag, payload) are what the C
    parser decodes;
  - decode(encode(x)) == x: a packet built from drawn fields with the scapy
    layers is valid in Python and in C and decodes to the same fields; its
    tag (set_tag) verifies in Python and in C, and a flipped bit of the
    tagged bytes makes it fail in both;
  - decode.frames_from_hex() yields bytes or raises decode.InputError, the
    error it documents, and nothing else;
  - hpccd.core.cc.hop_unpack()/hop_pack() are inverse on every 8-byte word.
"""
from __future__ import annotations

import json
import os
import pathlib
import struct

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from hpccd.core import cc, decode, wire  # noqa: E402
from hpccd._cc import ffi, lib  # noqa: E402

VECTORS = pathlib.Path(__file__).resolve().parents[1] / "vectors" / "wire.json"
_DOC = json.loads(VECTORS.read_text())
VEC = [bytes.fromhex(v["hex"]) for v in _DOC["vectors"]]
KEY = bytes.fromhex(_DOC["tag_key_hex"])
PORT, DSCP = _DOC["udp_port"], _DOC["probe_dscp"]

# HPCCD_FUZZ_EXAMPLES scales a run up (docs/fuzzing.md: the long run).
FUZZ = settings(max_examples=int(os.environ.get("HPCCD_FUZZ_EXAMPLES", 400)), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(autouse=True, scope="module")
def _bound_port():
    """The scapy bindings follow the vectors' port (the default one)."""
    old = wire.bound_port()
    if old != PORT:
        wire.bind_port(PORT)
    yield
    if old is not None and old != PORT:
        wire.bind_port(old)


# ---- the C parser -----------------------------------------------------------------------

def c_parse(frame: bytes):
    """Exact-size copy (an overread would leave the buffer), parsed."""
    buf = ffi.new("uint8_t[]", max(len(frame), 1))
    ffi.memmove(buf, frame, len(frame))
    info = ffi.new("struct hpccd_wire_info *")
    return lib.hpccd_wire_parse_frame(buf, len(frame), PORT, DSCP, info), info


def c_verify(frame: bytes) -> int:
    return lib.hpccd_wire_tag_verify(KEY, frame, len(frame), PORT, DSCP)


def as_c_class(py: int) -> int:
    return lib.HPCCD_WIRE_NOT_HPCCD if py == wire.NOT_HPCCD else py


# ---- strategies -------------------------------------------------------------------------

@st.composite
def mutated_vectors(draw) -> bytes:
    b = bytearray(draw(st.sampled_from(VEC)))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(("flip", "set", "cut", "insert", "delete")))
        if op == "cut":
            del b[draw(st.integers(0, len(b))):]
        elif not b:
            b += draw(st.binary(min_size=1, max_size=8))
        elif op == "flip":
            i = draw(st.integers(0, len(b) - 1))
            b[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            b[draw(st.integers(0, len(b) - 1))] = draw(st.sampled_from((0, 0xFF, 0xC1, 1, 8)))
        elif op == "insert":
            i = draw(st.integers(0, len(b)))
            b[i:i] = draw(st.binary(min_size=1, max_size=16))
        else:
            i = draw(st.integers(0, len(b) - 1))
            del b[i:i + draw(st.integers(1, 16))]
    return bytes(b)


@st.composite
def outer_frames(draw) -> bytes:
    """Ethernet (maybe 802.1Q) / IPv4 / UDP or TCP with drawn fields, then an
    hpccd-looking region: an INT header and hop records and an hpccd header
    whose fields are drawn, often near their valid values."""
    vlan = draw(st.booleans())
    udp = draw(st.booleans())
    ihl = draw(st.sampled_from((5,) * 6 + (6, 4, 15)))
    region = bytearray()
    magic_ver = draw(st.sampled_from((0xC1,) * 6 + (0xC2, 0x01)))
    room = draw(st.integers(0, 9))
    nhop = draw(st.integers(0, room + 1))
    region += bytes([magic_ver, (nhop & 0xF) << 4 | room]) + draw(st.binary(min_size=2,
                                                                          max_size=2))
    region += draw(st.binary(min_size=8 * room, max_size=8 * room))
    typ = draw(st.integers(0, 7))
    body = draw(st.sampled_from((b"", bytes(8), bytes(32), bytes(24), b"x" * 17)))
    hlen = len(body) + draw(st.sampled_from((0, 0, 0, 1, -1)))
    region += struct.pack("!BBH", 0x10 | typ, draw(st.integers(0, 255)), hlen & 0xFFFF)
    region += draw(st.binary(min_size=28, max_size=28)) + body
    region = region[:len(region) - draw(st.sampled_from((0,) * 6 + (1, 5, 40)))]
    opts = bytes(4 * max(0, ihl - 5))
    if udp:
        sport, dport = draw(st.sampled_from(((40000, PORT), (PORT, 40000)) * 3 + ((1, 2),)))
        ulen = 8 + len(region) + draw(st.sampled_from((0,) * 6 + (1, -1, -9)))
        l4 = struct.pack("!HHHH", sport, dport, ulen & 0xFFFF, draw(st.integers(0, 0xFFFF)))
        proto, tos = 17, draw(st.integers(0, 255))
    else:
        flags = draw(st.sampled_from((0,) * 6 + (0x10, 0x02, 0x100)))
        doff = draw(st.sampled_from((5,) * 5 + (6, 4)))
        l4 = struct.pack("!HHIIBBHHH", 40000, 5201, draw(st.integers(0, 2**32 - 1)), 0,
                         doff << 4 | flags >> 8, flags & 0xFF, 0, 0, 0) + bytes(4 * max(0, doff - 5))
        proto, tos = 6, draw(st.sampled_from((DSCP << 2,) * 4 + (DSCP << 2 | 2, 0)))
    tot = ihl * 4 + len(l4) + len(region) + draw(st.sampled_from((0,) * 6 + (3, -3)))
    frag = draw(st.sampled_from((0x4000,) * 6 + (0x2000, 0x0001)))
    ip = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, tos, tot & 0xFFFF, 0, frag, 64, proto, 0,
                     bytes([192, 0, 2, 1]), bytes([198, 51, 100, 2]))[:20] + opts
    eth = bytes(6) + bytes([2, 0, 0, 0, 0, 1])
    eth += struct.pack("!HHH", 0x8100, 7, 0x0800) if vlan else struct.pack("!H", 0x0800)
    pad = draw(st.sampled_from((b"", b"", bytes(6))))
    return eth + ip + l4 + bytes(region) + pad


frames = st.one_of(st.binary(max_size=200), mutated_vectors(), outer_frames())


# ---- classification ---------------------------------------------------------------------

@FUZZ
@given(frames)
def test_classify_agrees_with_the_c_parser(frame):
    py = wire.classify(frame, PORT, DSCP)
    assert py == wire.NOT_HPCCD or 0 <= py <= 10
    rc, info = c_parse(frame)
    assert rc == as_c_class(py), f"frame {frame.hex()}"
    region = wire.l4_region(frame, PORT, DSCP)
    assert (region is None) == (py == wire.NOT_HPCCD)
    if region is not None:
        kind, l4, start, end = region
        assert kind in ("udp", "tcp") and l4 < start <= end <= len(frame)
        assert info.l4_end_off == end


# ---- decode / describe / render -----------------------------------------------------------

def _check_fields_against_c(f: dict, info, frame: bytes) -> None:
    assert f["ip"]["sport"] == info.sport and f["ip"]["dport"] == info.dport
    assert f["ip"]["dscp"] == info.dscp and f["ip"]["ecn"] == info.ecn
    assert f["ip"]["proto"] == info.l4
    i = f["int"]
    assert (i["magic"], i["ver"], i["nhop"], i["room"], i["flags"], i["path_id"]) == (
        info.int_magic, info.int_ver, info.int_nhop, info.int_room, info.int_flags,
        info.int_path_id)
    assert len(i["hops"]) == info.int_room
    for k, h in enumerate(i["hops"]):
        c = info.hops[k]
        assert (h["speed_code"], h["ts"], h["tx_units"], h["qlen_units"]) == (
            c.speed_code, c.ts, c.tx_units, c.qlen_units)
    h = f["hdr"]
    assert (h["ver"], h["type"], h["flags"], h["len"], h["flow_id"], h["seq"], h["ack"],
            h["ts"], h["aux"]) == (info.hdr_ver, info.hdr_type, info.hdr_flags, info.hdr_len,
                                   info.flow_id, info.seq, info.ack, info.ts, info.aux)
    assert (f["notify"] is not None) == bool(info.has_notify)
    if info.has_notify:
        n = f["notify"]
        assert (n["w_bytes"], n["rate_kbps"], n["u_q16"], n["n_flows"], n["notify_seq"],
                n["t_ns"]) == (info.w_bytes, info.rate_kbps, info.u_q16, info.n_flows,
                               info.notify_seq, info.t_ns)
    assert (f["tag_hex"] is not None) == bool(info.has_tag)
    if info.has_tag:
        assert int(f["tag_hex"], 16) == info.tag
    if info.hdr_type == wire.T_DATA:
        assert f["payload_len"] == info.payload_len
        assert bytes.fromhex(f["payload_hex"]) == frame[info.body_off:
                                                        info.body_off + info.payload_len]


@FUZZ
@given(frames, st.booleans())
def test_decode_describe_render_never_raise(frame, with_key):
    pkt = wire.decode(frame, DSCP)
    bytes(pkt)
    d = decode.describe(frame, 0, KEY if with_key else None, PORT, DSCP)
    json.dumps(d)
    text = decode.render(d)
    assert text.startswith("packet 0:")
    py = wire.classify(frame, PORT, DSCP)
    assert d["hpccd"] == (py != wire.NOT_HPCCD)
    assert d["error"] == (None if py == wire.NOT_HPCCD else py)
    if py == 0:
        rc, info = c_parse(frame)
        assert rc == 0
        _check_fields_against_c(d["fields"], info, frame)
        if with_key and info.has_tag and info.hdr_type != wire.T_PROBE:
            assert d["fields"]["tag_valid"] == (c_verify(frame) == 1)


# ---- decode(encode(x)) ---------------------------------------------------------------------

hops = st.builds(dict, speed_code=st.integers(0, 31), ts=st.integers(0, 2**24 - 1),
                 tx_units=st.integers(0, 2**20 - 1), qlen_units=st.integers(0, 2**15 - 1))


@st.composite
def packets(draw):
    """(frame, expected fields) of a valid packet built with the scapy layers."""
    from scapy.layers.inet import IP, TCP, UDP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw

    tcp_probe = draw(st.integers(0, 5)) == 0
    typ = wire.T_PROBE if tcp_probe else draw(st.integers(1, 6))
    room = draw(st.integers(0, 8))
    hl = draw(st.lists(hops, min_size=room, max_size=room))
    nhop = draw(st.integers(0, room))
    int_fields = {"magic": 0xC, "ver": 1, "nhop": nhop, "room": room,
                  "flags": draw(st.integers(0, 15)), "path_id": draw(st.integers(0, 4095))}
    hdr = {"ver": 1, "type": typ, "flags": draw(st.integers(0, 255)),
           "flow_id": draw(st.integers(0, 2**32 - 1)), "seq": draw(st.integers(0, 2**64 - 1)),
           "ack": draw(st.integers(0, 2**64 - 1)), "ts": draw(st.integers(0, 2**32 - 1)),
           "aux": draw(st.integers(0, 2**32 - 1))}
    src, dst = draw(st.sampled_from((("192.0.2.1", "198.51.100.2"), ("10.0.0.7", "10.0.0.9"))))
    ecn = draw(st.integers(0, 3))
    if tcp_probe:
        l3 = IP(src=src, dst=dst, tos=DSCP << 2 | ecn) / TCP(sport=40000, dport=5201, flags=0,
                                                             seq=hdr["seq"] & 0xFFFFFFFF)
        dscp = DSCP
    else:
        dscp = draw(st.integers(0, 63))
        sport, dport = (40001, PORT) if typ in (wire.T_DATA, wire.T_PROBE) else (PORT, 40001)
        l3 = IP(src=src, dst=dst, tos=dscp << 2 | ecn) / UDP(sport=sport, dport=dport)
    hi = wire.HpccdInt(nhop=nhop, room=room, flags=int_fields["flags"],
                       path_id=int_fields["path_id"], hops=[wire.HpccdHop(**h) for h in hl])
    h = wire.Hpccd(type=typ, flags=hdr["flags"], flow_id=hdr["flow_id"], seq=hdr["seq"],
                   ack=hdr["ack"], ts=hdr["ts"], aux=hdr["aux"])
    notify, tag, payload = None, None, b""
    if typ in (wire.T_PROBE, wire.T_PROBE_RESP):
        tag = 0 if typ == wire.T_PROBE else draw(st.integers(0, 2**64 - 1))
        body = wire.HpccdTag(tag=tag)
    elif typ == wire.T_NOTIFY:
        notify = {"w_bytes": draw(st.integers(0, 2**32 - 1)),
                  "rate_kbps": draw(st.integers(0, 2**32 - 1)),
                  "u_q16": draw(st.integers(0, 2**32 - 1)), "n_flows": draw(st.integers(0, 65535)),
                  "reserved": 0, "notify_seq": draw(st.integers(0, 2**32 - 1)),
                  "t_ns": draw(st.integers(0, 2**32 - 1))}
        tag = draw(st.integers(0, 2**64 - 1))
        body = wire.HpccdNotify(**notify) / wire.HpccdTag(tag=tag)
    elif typ == wire.T_DATA:
        payload = draw(st.binary(max_size=64))
        body = Raw(payload) if payload else None
    else:
        body = None
    pkt = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / l3 / hi / h
    if body is not None:
        pkt = pkt / body
    frame = bytes(pkt)
    hdr["len"] = {wire.T_PROBE: 8, wire.T_PROBE_RESP: 8, wire.T_NOTIFY: 32}.get(typ, len(payload))
    expect = {"ip": {"src": src, "dst": dst, "dscp": dscp, "ecn": ecn,
                     "proto": 6 if tcp_probe else 17},
              "int": dict(int_fields, hops=hl), "hdr": hdr, "notify": notify,
              "tag_hex": None if tag is None else f"{tag:016x}", "payload_len": len(payload),
              "payload_hex": payload.hex()}
    return frame, expect


@FUZZ
@given(packets())
def test_decode_of_encode_is_identity(case):
    frame, expect = case
    assert wire.classify(frame, PORT, DSCP) == 0
    f = wire.packet_fields(wire.decode(frame, DSCP))
    ip = {k: f["ip"][k] for k in expect["ip"]}
    assert ip == expect["ip"]
    for k in ("int", "hdr", "notify", "tag_hex", "payload_len", "payload_hex"):
        assert f[k] == expect[k], k
    rc, info = c_parse(frame)
    assert rc == 0
    _check_fields_against_c(f, info, frame)


@FUZZ
@given(packets(), st.data())
def test_tag_round_trip_and_forgery(case, data):
    frame, expect = case
    assume(expect["hdr"]["type"] in (wire.T_PROBE_RESP, wire.T_NOTIFY)
           and expect["ip"]["proto"] == 17)
    pkt = wire.set_tag(KEY, wire.decode(frame, DSCP))
    good = bytes(pkt)
    assert wire.verify_tag(KEY, good) and c_verify(good) == 1
    # One bit of the tagged bytes (prefix addresses/ports, INT header to the
    # tag, or the tag itself) flipped: both refuse it.
    region = wire.l4_region(good, PORT, DSCP)
    _, l4, start, end = region
    where = data.draw(st.sampled_from(("addr", "port", "body")))
    i = (data.draw(st.integers(l4 - 8, l4 - 1)) if where == "addr" else
         data.draw(st.integers(l4, l4 + 3)) if where == "port" else
         data.draw(st.integers(start, end - 1)))
    bad = bytearray(good)
    bad[i] ^= 1 << data.draw(st.integers(0, 7))
    bad = bytes(bad)
    if wire.classify(bad, PORT, DSCP) != 0 or \
            wire.decode(bad, DSCP).getlayer(wire.Hpccd).type not in (wire.T_PROBE_RESP,
                                                                       wire.T_NOTIFY):
        return                       # no longer a tagged packet: nothing to verify
    assert c_verify(bad) == 0
    assert wire.verify_tag(KEY, bad) is False


# ---- hex input, hop words -----------------------------------------------------------------

@FUZZ
@given(st.lists(st.text(max_size=40), max_size=4))
def test_frames_from_hex_only_input_error(items):
    try:
        out = list(decode.frames_from_hex(items))
    except decode.InputError:
        return
    assert all(isinstance(b, bytes) for b in out) and len(out) == len(items)


@FUZZ
@given(st.binary(min_size=8, max_size=8))
def test_hop_word_round_trip(raw):
    f = cc.hop_unpack(raw)
    assert cc.hop_pack(**f) == raw
    assert wire.HpccdHop(raw).fields == {k: f[k] for k in ("speed_code", "ts", "tx_units",
                                                           "qlen_units")}
