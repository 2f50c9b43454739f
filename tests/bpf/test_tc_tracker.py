"""ebpf/tc_tracker.bpf.c through BPF_PROG_TEST_RUN.

Invariants protected (the header comment of tc_tracker.bpf.c, struct
hpccd_tcp_flow and enum hpccd_tc_counter in include/hpccd/kern_user.h):

- per kernel TCP flow (key: the 5-tuple as this host, the sender, sees it)
  the entry holds the payload bytes sent, the part of them below the
  snd_nxt already seen (retransmitted), the segments on the wire (a GSO
  packet counts gso_segs), snd_nxt = highest seq + payload (+1 for SYN and
  for FIN) in TCP sequence arithmetic (wrap past 2^32 included), the OR of
  the flag bytes, first_ns at creation and last_ns at every tracked segment;
- entries are created by a segment with payload or SYN only; pure ACKs are
  never tracked (no entry, no update), FIN/RST of an unknown flow create
  nothing; hpccd's own TCP-side probes (probe DSCP, no TCP flag) are not
  counted; UDP, non-IPv4 and non-first fragments are not tracked;
- the payload is the IPv4 total length less the IP and TCP headers
  (options included, Ethernet padding excluded);
- every packet leaves unchanged with TC_ACT_OK and is counted in exactly one
  slot of hpccd_tc_cnt with its skb->len.

Each scenario is data: a list of steps (description, frame, counter slot,
expected entry afterwards), run in order on a flow of its own.  Counter
slots are parsed from the C header.  Nothing is attached or pinned.

Limits of BPF_PROG_TEST_RUN: an skb test run refuses IPv4 frames shorter
than Ethernet + 20 bytes, so the tracker's own check of a truncated IPv4
header cannot be reached here; and gso_segs comes in through ctx_in, which
hpccd.bpf.loader.Program.test_run does not take: the GSO steps run through
`bpftool prog run id N ... ctx_in` (skipped without bpftool).
"""
from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import shutil
import socket
import struct
import subprocess
import tempfile
import time
from typing import NamedTuple

import pytest

pytestmark = pytest.mark.bpf

if os.geteuid() != 0:
    pytest.skip("loading BPF programs needs root (CAP_BPF, CAP_NET_ADMIN, CAP_PERFMON)",
                allow_module_level=True)

from scapy.layers.inet import ICMP, IP, TCP, UDP  # noqa: E402
from scapy.layers.inet6 import IPv6  # noqa: E402
from scapy.layers.l2 import ARP, Dot1Q, Ether  # noqa: E402
from scapy.packet import Raw  # noqa: E402

from hpccd._bpf import ffi as abi  # noqa: E402  (after the root check: it needs libbpf)
from hpccd.bpf import loader as bpf  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
OBJ = ROOT / "build" / "ebpf" / "tc_tracker.bpf.o"
PROG = "hpccd_tc_tracker"
DOC = json.loads((ROOT / "tests" / "vectors" / "wire.json").read_text())
DSCP = DOC["probe_dscp"]
TCP_PROBE = bytes.fromhex(next(v["hex"] for v in DOC["vectors"] if v["name"] == "tcp_probe"))
TCP_PROBE_RESP = bytes.fromhex(next(v["hex"] for v in DOC["vectors"]
                                    if v["name"] == "tcp_probe_resp"))
TC_ACT_OK = 0                    # linux/pkt_cls.h

# struct __sk_buff (UAPI, fixed layout): what BPF_PROG_TEST_RUN takes as ctx_in
SKB_SIZE, SKB_GSO_SEGS, SKB_GSO_SIZE = 192, 164, 176


# enum hpccd_tc_counter of include/hpccd/kern_user.h, through hpccd._bpf
_TC_CNT = dict(abi.typeof("enum hpccd_tc_counter").relements)
SLOT = {k.removeprefix("HPCCD_TC_"): v for k, v in _TC_CNT.items()}   # "NEW_FLOW" -> 4
N_SLOTS = SLOT.pop("COUNTERS")
SLOT_NAME = {v: k for k, v in SLOT.items()}

FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10
FLOW_FMT = "<QQQQQIB3x"          # struct hpccd_tcp_flow


class Flow(NamedTuple):
    bytes: int
    retx_bytes: int
    packets: int
    snd_nxt: int
    tcp_flags: int
    first_ns: int = 0
    last_ns: int = 0


def flow_key(saddr: str, daddr: str, sport: int, dport: int, proto: int = 6) -> bytes:
    """struct hpccd_flow_key, network byte order."""
    return (socket.inet_aton(saddr) + socket.inet_aton(daddr)
            + struct.pack("!HHB3x", sport, dport, proto))


SRC, DST, DPORT = "192.0.2.1", "198.51.100.2", 5201
E = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")


def seg(sport: int, seq: int, n: int = 0, flags: str = "PA", tos: int = 0,
        payload: bytes | None = None, ip_kw: dict | None = None, **tcp_kw) -> bytes:
    """An egress TCP segment of flow (SRC, sport) -> (DST, DPORT)."""
    data = payload if payload is not None else bytes((i * 7) & 0xFF for i in range(n))
    p = E / IP(src=SRC, dst=DST, tos=tos, **(ip_kw or {})) / TCP(
        sport=sport, dport=DPORT, seq=seq, ack=1, flags=flags, **tcp_kw)
    return bytes(p / Raw(data) if data else p)


# ---- the program under test ----------------------------------------------------------

class Tc:
    def __init__(self):
        if not OBJ.exists():
            pytest.skip(f"{OBJ.relative_to(ROOT)} is not built (make bpf)")
        self.obj = bpf.BpfObject.open(OBJ, rodata={"hpccd_cfg_probe_dscp": DSCP})
        try:
            self.obj.load()
            self.prog = self.obj.program(PROG)
            self.cnt = self.obj.map("hpccd_tc_cnt")
            self.flows = self.obj.map("hpccd_tcp_flows")
        except BaseException:
            self.obj.close()
            raise

    def close(self) -> None:
        self.obj.close()

    def run(self, frame: bytes, gso_segs: int = 0, gso_size: int = 0) -> tuple[int, bytes]:
        if gso_segs:
            return run_with_gso(self.prog, frame, gso_segs, gso_size)
        ret, out, _ = self.prog.test_run(frame)
        return ret, out

    def counters(self) -> list[tuple[int, int]]:
        out = [(0, 0)] * self.cnt.max_entries
        for k, per_cpu in self.cnt.lookup_batch():
            vals = [struct.unpack("<QQ", v) for v in per_cpu]
            out[int.from_bytes(k, "little")] = (sum(v[0] for v in vals),
                                                sum(v[1] for v in vals))
        return out

    def flow(self, key: bytes) -> Flow | None:
        raw = self.flows.lookup(key)
        if raw is None:
            return None
        b, r, p, first, last, nxt, fl = struct.unpack(FLOW_FMT, raw)
        return Flow(b, r, p, nxt, fl, first, last)

    def run_counted(self, frame: bytes, **kw) -> tuple[int, bytes, dict[str, tuple[int, int]]]:
        before = self.counters()
        ret, out = self.run(frame, **kw)
        after = self.counters()
        moved = {SLOT_NAME[i]: (after[i][0] - before[i][0], after[i][1] - before[i][1])
                 for i in range(N_SLOTS) if after[i] != before[i]}
        return ret, out, moved


def run_with_gso(prog: bpf.Program, frame: bytes, gso_segs: int,
                 gso_size: int) -> tuple[int, bytes]:
    """BPF_PROG_TEST_RUN with a __sk_buff ctx_in carrying gso_segs/gso_size.
    hpccd.bpf.loader.Program.test_run takes no ctx, so this goes through bpftool,
    by program id (nothing pinned)."""
    if shutil.which("bpftool") is None:
        pytest.skip("bpftool is not installed and Program.test_run takes no ctx_in")
    ctx = bytearray(SKB_SIZE)
    struct.pack_into("<I", ctx, SKB_GSO_SEGS, gso_segs)
    struct.pack_into("<I", ctx, SKB_GSO_SIZE, gso_size)
    with tempfile.TemporaryDirectory() as d:
        din, dctx, dout = (os.path.join(d, n) for n in ("in", "ctx", "out"))
        with open(din, "wb") as f:
            f.write(frame)
        with open(dctx, "wb") as f:
            f.write(ctx)
        r = subprocess.run(["bpftool", "-j", "prog", "run", "id", str(prog.id),
                            "data_in", din, "data_out", dout, "ctx_in", dctx],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        with open(dout, "rb") as f:
            out = f.read()
    return json.loads(r.stdout)["retval"], out


@pytest.fixture(scope="module")
def tc():
    t = Tc()
    try:
        yield t
    finally:
        t.close()


def test_counter_layout_matches_header(tc):
    assert tc.cnt.max_entries == N_SLOTS
    assert tc.cnt.percpu and tc.cnt.value_size == 16
    assert sorted(SLOT.values()) == list(range(N_SLOTS))
    assert tc.flows.key_size == 16 and tc.flows.value_size == struct.calcsize(FLOW_FMT)


# ---- scenarios ---------------------------------------------------------------------------

@dataclasses.dataclass
class Step:
    desc: str
    frame: bytes
    slot: str
    flow: Flow | None          # the entry afterwards (ns fields not compared); None: none
    gso_segs: int = 0
    gso_size: int = 0


def _scenario_wrap(sport: int) -> list[Step]:
    s = lambda *a, **k: seg(sport, *a, **k)            # noqa: E731
    PA = PSH | ACK
    return [
        Step("SYN at 2^32 - 16", s(0xFFFFFFF0, 0, "S"), "NEW_FLOW",
             Flow(0, 0, 1, 0xFFFFFFF1, SYN)),
        Step("100 bytes across 2^32", s(0xFFFFFFF1, 100), "TRACKED",
             Flow(100, 0, 2, 0x55, SYN | PA)),
        Step("pure ACK: not tracked, entry untouched", s(0x55, 0, "A"), "PURE_ACK",
             Flow(100, 0, 2, 0x55, SYN | PA)),
        Step("100 bytes overlapping the last 50 sent", s(0x55 - 50, 100), "TRACKED",
             Flow(200, 50, 3, 0x87, SYN | PA)),
        Step("30 bytes entirely below snd_nxt", s(0x10, 30), "TRACKED",
             Flow(230, 80, 4, 0x87, SYN | PA)),
        Step("20 bytes from before the wrap", s(0xFFFFFFF5, 20), "TRACKED",
             Flow(250, 100, 5, 0x87, SYN | PA)),
        Step("10 bytes beyond a gap: snd_nxt jumps", s(0x87 + 100, 10), "TRACKED",
             Flow(260, 100, 6, 0xF5, SYN | PA)),
        Step("the gap filled: below snd_nxt, counted as retransmitted", s(0x87, 100),
             "TRACKED", Flow(360, 200, 7, 0xF5, SYN | PA)),
        Step("FIN: +1 in sequence space", s(0xF5, 0, "FA"), "TRACKED",
             Flow(360, 200, 8, 0xF6, SYN | PA | FIN)),
        Step("FIN retransmitted", s(0xF5, 0, "FA"), "TRACKED",
             Flow(360, 200, 9, 0xF6, SYN | PA | FIN)),
        Step("last ACK", s(0xF6, 0, "A"), "PURE_ACK", Flow(360, 200, 9, 0xF6, SYN | PA | FIN)),
    ]


def _scenario_overlap_at_wrap(sport: int) -> list[Step]:
    s = lambda *a, **k: seg(sport, *a, **k)            # noqa: E731
    PA = PSH | ACK
    return [
        Step("1000 bytes ending at 2^32 + 5 (no SYN seen)", s(0xFFFFFC1D, 1000), "NEW_FLOW",
             Flow(1000, 0, 1, 5, PA)),
        Step("20 bytes from 2^32 - 5: 10 of them retransmitted", s(0xFFFFFFFB, 20), "TRACKED",
             Flow(1020, 10, 2, 15, PA)),
        Step("an old segment 2^31 - 1 back is old", s((15 - 0x7FFFFFFF) % 2**32, 8),
             "TRACKED", Flow(1028, 18, 3, 15, PA)),
        Step("RST: flags only, no sequence space", s(15, 0, "R"), "TRACKED",
             Flow(1028, 18, 4, 15, PA | RST)),
    ]


def _scenario_unknown_ends(sport: int) -> list[Step]:
    s = lambda *a, **k: seg(sport, *a, **k)            # noqa: E731
    return [
        Step("FIN of a flow never seen", s(1000, 0, "FA"), "UNTRACKED_END", None),
        Step("RST of a flow never seen", s(1000, 0, "R"), "UNTRACKED_END", None),
        Step("RST|ACK of a flow never seen", s(1000, 0, "RA"), "UNTRACKED_END", None),
        Step("pure ACK of a flow never seen", s(1000, 0, "A"), "PURE_ACK", None),
        Step("ECE|CWR|URG|ACK, no payload: still a pure ACK", s(1000, 0, "AECU"),
             "PURE_ACK", None),
        Step("SYN|ACK at 2^32 - 1 creates it (snd_nxt wraps to 0)", s(0xFFFFFFFF, 0, "SA"),
             "NEW_FLOW", Flow(0, 0, 1, 0, SYN | ACK)),
        Step("1 byte", s(0, 1), "TRACKED", Flow(1, 0, 2, 1, SYN | ACK | PSH)),
    ]


def _scenario_probes(sport: int) -> list[Step]:
    s = lambda *a, **k: seg(sport, *a, **k)            # noqa: E731
    int_payload = TCP_PROBE[14 + 20 + 20:]
    PA = PSH | ACK
    return [
        Step("SYN", s(5000, 0, "S"), "NEW_FLOW", Flow(0, 0, 1, 5001, SYN)),
        Step("TCP-side probe of this flow: not counted",
             s(7, flags="", tos=DSCP << 2 | 2, payload=int_payload), "PROBE",
             Flow(0, 0, 1, 5001, SYN)),
        Step("probe with CE (ECN bits are the flow's)",
             s(8, flags="", tos=DSCP << 2 | 3, payload=int_payload), "PROBE",
             Flow(0, 0, 1, 5001, SYN)),
        Step("DSCP 45, no flag, no INT magic: still taken for a probe (tc_tracker.bpf.c "
             "tells probes by DSCP and flags only)",
             s(9, flags="", tos=DSCP << 2, payload=bytes(20)), "PROBE",
             Flow(0, 0, 1, 5001, SYN)),
        Step("DSCP 45 data segment with ACK: the application's, counted",
             s(5001, 100, tos=DSCP << 2), "TRACKED", Flow(100, 0, 2, 5101, SYN | PA)),
        Step("DSCP 46, no flag, payload: not a probe",
             s(5101, 50, flags="", tos=46 << 2), "TRACKED", Flow(150, 0, 3, 5151, SYN | PA)),
        Step("DSCP 45 with only AE set: not a probe (AE is a flag), counted",
             s(5151, 10, flags="N", tos=DSCP << 2), "TRACKED",
             Flow(160, 0, 4, 5161, SYN | PA)),
    ]


def _scenario_lengths(sport: int) -> list[Step]:
    s = lambda *a, **k: seg(sport, *a, **k)            # noqa: E731
    PA = PSH | ACK
    return [
        Step("2 bytes, padded to a 60-byte frame: padding is not payload",
             s(100, 2) + bytes(4), "NEW_FLOW", Flow(2, 0, 1, 102, PA)),
        Step("IPv4 options (IHL 6) and TCP options (doff 8), 100 bytes",
             s(102, 100, ip_kw={"options": [b"\x01\x01\x01\x00"]},
               options=[("NOP", None), ("NOP", None), ("Timestamp", (1, 2))]),
             "TRACKED", Flow(102, 0, 2, 202, PA)),
        Step("802.1Q-tagged segment, 50 bytes",
             bytes(Ether(src=E.src, dst=E.dst) / Dot1Q(vlan=7) / Ether(s(202, 50))[IP]),
             "TRACKED", Flow(152, 0, 3, 252, PA)),
        Step("IPv4 total length 10 bytes short of the frame: 40 of 50 counted",
             _ip_tot(s(252, 50), -10), "TRACKED", Flow(192, 0, 4, 292, PA)),
        Step("first fragment (MF) of a segment: its payload counted",
             _mf(s(292, 64)), "TRACKED", Flow(256, 0, 5, 356, PA)),
    ]


def _ip_tot(frame: bytes, delta: int) -> bytes:
    b = bytearray(frame)
    struct.pack_into("!H", b, 16, struct.unpack_from("!H", b, 16)[0] + delta)
    return bytes(b)


def _mf(frame: bytes) -> bytes:
    b = bytearray(frame)
    struct.pack_into("!H", b, 20, 0x2000)
    return bytes(b)


def _scenario_gso(sport: int) -> list[Step]:
    s = lambda *a, **k: seg(sport, *a, **k)            # noqa: E731
    PA = PSH | ACK
    return [
        Step("SYN", s(0, 0, "S"), "NEW_FLOW", Flow(0, 0, 1, 1, SYN)),
        Step("GSO super-packet, 4 x 500 bytes", s(1, 2000), "TRACKED",
             Flow(2000, 0, 5, 2001, SYN | PA), gso_segs=4, gso_size=500),
        Step("GSO retransmission of the last 2 x 500", s(1001, 1000), "TRACKED",
             Flow(3000, 1000, 7, 2001, SYN | PA), gso_segs=2, gso_size=500),
        Step("gso_segs 1: one segment", s(2001, 300), "TRACKED",
             Flow(3300, 1000, 8, 2301, SYN | PA), gso_segs=1, gso_size=300),
    ]


SCENARIOS = {
    "syn_data_wrap_retx_fin": (_scenario_wrap, 40001),
    "overlap_at_wrap_then_rst": (_scenario_overlap_at_wrap, 40002),
    "fin_rst_ack_of_unknown_flow": (_scenario_unknown_ends, 40003),
    "tcp_side_probes_not_counted": (_scenario_probes, 40004),
    "payload_from_ip_total_length": (_scenario_lengths, 40005),
    "gso": (_scenario_gso, 40006),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario(tc, name):
    make, sport = SCENARIOS[name]
    key = flow_key(SRC, DST, sport, DPORT)
    tc.flows.delete(key)
    first_ns = None
    prev = None
    try:
        for i, st in enumerate(make(sport)):
            where = f"step {i} ({st.desc})"
            t0 = time.monotonic_ns()
            ret, out, moved = tc.run_counted(st.frame, gso_segs=st.gso_segs,
                                             gso_size=st.gso_size)
            t1 = time.monotonic_ns()
            assert ret == TC_ACT_OK, where
            assert out == st.frame, f"{where}: packet modified"
            assert moved == {st.slot: (1, len(st.frame))}, where
            got = tc.flow(key)
            if st.flow is None:
                assert got is None, where
                continue
            assert got is not None, f"{where}: no entry"
            assert got[:5] == st.flow[:5], f"{where}: {got} != {st.flow}"
            if st.slot == "NEW_FLOW":
                assert t0 <= got.first_ns == got.last_ns <= t1, where
                first_ns = got.first_ns
            else:
                assert got.first_ns == first_ns, f"{where}: first_ns changed"
            if st.slot in ("NEW_FLOW", "TRACKED"):
                assert t0 <= got.last_ns <= t1, f"{where}: last_ns not updated"
            else:
                assert got.last_ns == prev.last_ns, f"{where}: last_ns updated"
            prev = got
    finally:
        tc.flows.delete(key)


# ---- not tracked ------------------------------------------------------------------------------

def _doff(frame: bytes, doff: int) -> bytes:
    b = bytearray(frame)
    b[14 + 20 + 12] = doff << 4
    return bytes(b)


def _ihl(frame: bytes, ihl: int) -> bytes:
    b = bytearray(frame)
    b[14] = 0x40 | ihl
    return bytes(b)


NOT_TRACKED = [
    ("the TCP-side probe vector", TCP_PROBE, "PROBE"),
    ("the TCP-side PROBE_RESP vector", TCP_PROBE_RESP, "PROBE"),
    ("UDP", bytes(E / IP(src=SRC, dst=DST) / UDP(sport=40100, dport=DPORT) / (b"y" * 10)),
     "NOT_TCP"),
    ("UDP to the hpccd port", bytes.fromhex(DOC["vectors"][0]["hex"]), "NOT_TCP"),
    ("ICMP", bytes(E / IP(src=SRC, dst=DST) / ICMP()), "NOT_TCP"),
    ("ARP", bytes(E / ARP()), "NOT_TCP"),
    ("IPv6 TCP", bytes(E / IPv6() / TCP(sport=40101, dport=DPORT, flags="S")), "NOT_TCP"),
    ("IPv4 non-first fragment of a TCP segment",
     bytes(E / IP(src=SRC, dst=DST, proto=6, frag=100) / (b"z" * 40)), "NOT_TCP"),
    # (an skb test run refuses IPv4 frames shorter than Ethernet + 20 bytes)
    ("IPv4 IHL 4", _ihl(seg(40102, 0, 0, "S"), 4), "NOT_TCP"),
    ("IPv4 IHL 15: header beyond the frame", _ihl(seg(40103, 0, 0, "S"), 15), "NOT_TCP"),
    ("IPv4 total length below the header", _ip_tot(seg(40104, 0, 0, "S"), -24), "NOT_TCP"),
    ("Ethernet header only (EtherType 0x88b5)", bytes(Ether(type=0x88B5)), "NOT_TCP"),
    ("TCP header cut by the frame end", seg(40105, 0, 0, "S")[:14 + 20 + 12], "TRUNC"),
    ("TCP header cut by the IPv4 total length", _ip_tot(seg(40106, 0, 0, "S"), -8), "TRUNC"),
    ("TCP data offset 4", _doff(seg(40107, 0, 10, "S"), 4), "TRUNC"),
    ("TCP data offset 15 beyond the segment", _doff(seg(40108, 0, 10, "S"), 15), "TRUNC"),
]


@pytest.mark.parametrize("desc,frame,slot", NOT_TRACKED, ids=[c[0] for c in NOT_TRACKED])
def test_not_tracked(tc, desc, frame, slot):
    before = {k for k, _ in tc.flows.lookup_batch()}
    ret, out, moved = tc.run_counted(frame)
    assert ret == TC_ACT_OK
    assert out == frame
    assert moved == {slot: (1, len(frame))}
    assert {k for k, _ in tc.flows.lookup_batch()} == before


def test_every_packet_counted_once(tc):
    """A batch of everything above: the counter deltas add up, slot by slot,
    to the packets and bytes sent."""
    frames: list[tuple[bytes, str, int, int]] = []
    gso_ok = shutil.which("bpftool") is not None
    for make, sport in SCENARIOS.values():
        tc.flows.delete(flow_key(SRC, DST, sport + 1000, DPORT))
        frames += [(st.frame, st.slot, st.gso_segs, st.gso_size) for st in make(sport + 1000)
                   if gso_ok or not st.gso_segs]
    frames += [(f, slot, 0, 0) for _, f, slot in NOT_TRACKED]
    want = [[0, 0] for _ in range(N_SLOTS)]
    before = tc.counters()
    try:
        for f, slot, segs, size in frames:
            want[SLOT[slot]][0] += 1
            want[SLOT[slot]][1] += len(f)
            assert tc.run(f, gso_segs=segs, gso_size=size)[0] == TC_ACT_OK
        after = tc.counters()
        got = [[a - b for a, b in zip(after[i], before[i])] for i in range(N_SLOTS)]
        assert got == want, {SLOT_NAME[i]: (got[i], want[i])
                             for i in range(N_SLOTS) if got[i] != want[i]}
    finally:
        for _, sport in SCENARIOS.values():
            tc.flows.delete(flow_key(SRC, DST, sport + 1000, DPORT))
