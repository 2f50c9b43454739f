"""Bugs the fuzzers found (docs/fuzzing.md "Findings"), each pinned by a test that
needs no clang: the crashing input itself where there is one
(fuzz/regressions/<harness>/), replayed through the Python API.

Invariants protected:
  - LDCP refuses an initial window it cannot count (IW beyond 2^53 packets,
    given or derived from line rate x RTT / MTU) instead of converting it to
    an integer with undefined behaviour (fuzz_cc, regressions/fuzz_cc/
    ldcp-iw-1e28-pkt-ect-cast); the sub-packet timer RTT / cw saturates at
    2^64 - 1 ns instead of overflowing the conversion;
  - a parameter wider than its C field is a ParamError naming it, and so a
    ConfigError at its line, not an OverflowError out of cffi; a link rate
    beyond 2^64 bit/s is "not a speed of the INT table", not an
    OverflowError (test_fuzz_toml.py);
  - wire.decode() of a frame shorter than an Ethernet header returns it as
    Raw, and of a TCP-side probe with less than an INT header leaves the
    payload raw, instead of raising struct.error (test_fuzz_wire.py);
  - wire.packet_fields() (hpccctl decode) shows a NOTIFY body and a tag only
    when len is the table's, as the C parser does, and never raises on one
    of another len when given a key (test_fuzz_wire.py);
  - a TOML error about a table that a dotted header or key creates
    (``[[s.itches]]``, ``foo.bar = 1``) names that line (test_fuzz_toml.py).
"""
from __future__ import annotations

import json
import pathlib
import struct

import pytest

from hpccd.core import cc, decode, wire
from hpccd.lab import topology

ROOT = pathlib.Path(__file__).resolve().parents[2]
REGRESSIONS = ROOT / "fuzz" / "regressions"


# ---- fuzz_cc: LDCP's initial window and timer ---------------------------------------------

def _ldcp_raw_params(data: bytes) -> dict:
    """The "raw" parameter block of fuzz/fuzz_cc.c for LDCP (selector 0x83):
    alpha, beta, gamma, eta, iw_pkts (doubles), line_rate_bps, rtt_ns (u64),
    mtu_bytes (u32), little-endian."""
    assert data[0] & 0x83 == 0x83
    a, b, g, e, iw, rate, rtt, mtu = struct.unpack_from("<5dQQI", data, 1)
    return {"alpha": a, "beta": b, "gamma": g, "eta": e, "iw_pkts": iw,
            "line_rate_bps": rate, "rtt_ns": rtt, "mtu_bytes": mtu}


def test_ldcp_derived_iw_beyond_2_53_is_refused():
    p = _ldcp_raw_params((REGRESSIONS / "fuzz_cc" / "ldcp-iw-1e28-pkt-ect-cast").read_bytes())
    assert p["line_rate_bps"] * p["rtt_ns"] / (8e9 * p["mtu_bytes"]) > 2**64
    with pytest.raises(cc.ParamError) as e:
        cc.Ldcp(**p)
    assert e.value.key == "iw_pkts"


@pytest.mark.parametrize("iw", [1e28, 2.0**53 + 2**11, float(2**64)])
def test_ldcp_given_iw_beyond_2_53_is_refused(iw):
    with pytest.raises(cc.ParamError) as e:
        cc.Ldcp(iw_pkts=iw)
    assert e.value.key == "iw_pkts"


def test_ldcp_iw_of_2_53_is_still_a_window():
    f = cc.Ldcp(iw_pkts=2.0**53)
    assert f.iw == 2.0**53
    assert f.pkt_ect(2**53 - 1) and not f.pkt_ect(2**53 - 2) and f.pkt_ect(2**53)


def test_ldcp_sub_packet_timer_saturates():
    f = cc.Ldcp(iw_pkts=1, gamma=1e-300, rtt_ns=2**64 - 1)
    f.on_ack(1)                          # fast start ends: cw = IW = 1
    f.on_ack(1, ece=True)                # 1 - beta: below one packet
    f.on_ack(2000, ece=True)             # halved per packet down to the floor gamma
    assert f.cw == 1e-300 and f.stage == "stable"
    assert f.tx_interval_ns() == 2**64 - 1        # RTT / cw = inf ns: saturated
    assert f.tx_interval_ns(1000) == 2**64 - 1
    g = cc.Ldcp(iw_pkts=1, rtt_ns=1000)
    g.on_ack(1)
    g.on_ack(1, ece=True)
    assert g.cw == 0.5 and g.tx_interval_ns() == 2000   # the ordinary case is exact


# ---- OverflowError out of cffi ---------------------------------------------------------------

@pytest.mark.parametrize("cls, key, value", [
    (cc.Hpcc, "mtu_bytes", 2**40), (cc.Hpcc, "line_rate_bps", 2**64),
    (cc.Dctcp, "init_cwnd_bytes", 2**70), (cc.Ldcp, "rtt_ns", 10**20),
])
def test_parameter_wider_than_its_field_is_a_param_error(cls, key, value):
    with pytest.raises(cc.ParamError) as e:
        cls(**{key: value})
    assert e.value.key == key


def test_speed_code_of_an_impossible_rate_is_unknown():
    assert cc.speed_code(2**64) == 0 and cc.speed_code(-1) == 0
    assert cc.speed_code(10**9) == 14


def test_topology_rate_beyond_2_64_bps():
    text = (ROOT / "daemon" / "hpccd" / "topologies" / "dumbbell.toml").read_text()
    bad = text.replace("rate_mbps = 2000", "rate_mbps = 99999999999999999", 1)
    line = bad.splitlines().index("rate_mbps = 99999999999999999") + 1
    with pytest.raises(topology.TopologyError) as e:
        topology.Topology.loads(bad, "t.toml")
    assert e.value.key == "defaults.rate_mbps" and e.value.line == line


def test_config_parameter_beyond_its_field():
    config = pytest.importorskip("hpccd.agent.config")
    text = '[[interfaces]]\nname = "eth0"\n\n[hpcc]\nmtu_bytes = 1099511627776\n'
    with pytest.raises(config.ConfigError) as e:
        config.loads(text, "c.toml")
    assert e.value.key == "hpcc.mtu_bytes" and e.value.line == 5


# ---- wire.decode of a runt frame -------------------------------------------------------------

@pytest.mark.parametrize("n", [0, 1, 13])
def test_decode_runt_frame(n):
    frame = bytes(range(n))
    pkt = wire.decode(frame)
    assert bytes(pkt) == frame
    assert wire.classify(frame) == wire.NOT_HPCCD
    d = decode.describe(frame, 0, bytes(16))
    assert d["hpccd"] is False and decode.render(d).startswith(f"packet 0: {n} bytes")


# ---- line numbers of implicitly created tables -----------------------------------------------

def test_error_about_a_dotted_array_header_has_its_line():
    text = (ROOT / "daemon" / "hpccd" / "topologies" / "tree.toml").read_text()
    bad = text.replace("[[switches]]", "[[s.itches]]", 1)
    line = bad.splitlines().index("[[s.itches]]") + 1
    with pytest.raises(topology.TopologyError) as e:
        topology.Topology.loads(bad, "t.toml")
    assert e.value.key == "s" and e.value.line == line


def test_error_about_a_dotted_key_has_its_line():
    text = (ROOT / "daemon" / "hpccd" / "topologies" / "tree.toml").read_text()
    bad = "foo.bar = 1\n" + text
    with pytest.raises(topology.TopologyError) as e:
        topology.Topology.loads(bad, "t.toml")
    assert e.value.key == "foo" and e.value.line == 1


# ---- NOTIFY and tags only at the table's len ---------------------------------------------------

_VEC = {v["name"]: bytes.fromhex(v["hex"])
        for v in json.loads((ROOT / "tests" / "vectors" / "wire.json").read_text())
        ["vectors"]}


def _with_len(name: str, typ: int, hlen: int) -> bytes:
    """Vector `name` with the hpccd type and len changed and its L4 region
    cut or zero-extended to match, so that it stays valid (class 0)."""
    frame = bytearray(_VEC[name])
    kind, l4, start, end = wire.l4_region(bytes(frame))
    room = frame[start + 1] & 0xF
    hdr = start + 4 + 8 * room
    frame[hdr] = 0x10 | typ
    struct.pack_into("!H", frame, hdr + 2, hlen)
    new_end = hdr + 32 + hlen
    frame = frame[:new_end] + bytes(max(0, new_end - len(frame)))
    ip = 14
    struct.pack_into("!H", frame, ip + 2, new_end - ip)
    if kind == "udp":
        struct.pack_into("!H", frame, l4 + 4, new_end - l4)
    assert wire.classify(bytes(frame)) == 0
    return bytes(frame)


@pytest.mark.parametrize("name, typ, hlen", [
    ("notify", wire.T_NOTIFY, 24), ("notify", wire.T_NOTIFY, 40),
    ("probe_resp_udp", wire.T_PROBE_RESP, 7), ("probe_udp", wire.T_PROBE, 24),
    ("tcp_probe", wire.T_PROBE_RESP, 7), ("tcp_probe", wire.T_NOTIFY, 24),
])
def test_notify_and_tag_only_at_the_tables_len(name, typ, hlen):
    """What hpccd_wire_parse_frame says (has_notify, has_tag), and describe
    with a key does not raise (it did: verify_tag on a PROBE_RESP of len 7)."""
    frame = _with_len(name, typ, hlen)
    f = wire.packet_fields(wire.decode(frame), bytes(16))
    assert f["notify"] is None and f["tag_hex"] is None and f["tag_valid"] is None
    d = decode.describe(frame, 0, bytes(16))
    assert d["error"] == 0 and d["fields"]["tag_valid"] is None
    decode.render(d)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_tcp_probe_with_a_cut_int_header_decodes(n):
    """A TCP-side probe whose payload is the INT magic and less than the
    4-byte header: decode() kept raising struct.error out of HpccdInt."""
    frame = bytearray(_VEC["tcp_probe"])
    _, _, start, _ = wire.l4_region(bytes(frame))
    frame = frame[:start + n]
    struct.pack_into("!H", frame, 16, len(frame) - 14)
    frame = bytes(frame)
    assert wire.classify(frame) == wire.WireErr.INT_TRUNC
    assert bytes(wire.decode(frame)) == frame
    assert decode.describe(frame)["error"] == wire.WireErr.INT_TRUNC
