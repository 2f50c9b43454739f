"""The probe engine's wake lead (tcp_side.wake_lead; fastpath/tcpside/
engine.c, lead_for and wake_late), without root or a kernel.

A flow's next probe is due probe_gap_rtt x its srtt after the last one was
due.  The engine sleeps until then in a timed epoll wait, and a timed wait
returns late: on the two-vCPU VM 25-50 us (docs/tcp-side.md "The timer's
floor"), so the probe left an srtt plus that after the last.  With
wake_lead the engine measures how late its own timed waits return and arms
a flow's gap timer that much early (at most half the gap), and the probe
leaves about when it is due; probes still stay half a gap apart.

How: the engine's own sources with the fake libbpf of tests/unit/tcpside/
(test_tcpside_util_anchor.py has the details; its hpccd_tcp_cst says every
flow runs "hpcc" with data in flight and an srtt of 100 us, so the gap is
100 us).  Timed waits with no flow seed the lead; then each response is fed
as soon as the previous probe left, and the engine is stepped without
waiting (hpccd_tcpp_run with timeout 0: no further samples) until the next
probe leaves; each probe's send and due times are read back per flow.

Invariants protected:
- every timed wait that ends by its timeout is one sample (wake_late_n), its
  lateness summed; the lead is their smoothed mean with wake_lead, 0 without;
- a probe never leaves before its due time less the lead (at most half the
  gap), nor sooner than half a gap after the previous one;
- without wake_lead no probe leaves before it is due; with it, most leave
  before (the engine is stepped continuously, so each leaves at its armed
  time, a lead before it is due).
"""
from __future__ import annotations

import shutil
import time

import pytest

from hpccd.core import cc
from hpccd.tcp_side import engine as tcp_engine
from tcpside import tcpside_build

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")

US = 1000
SRTT_US = 100                                        # fake_bpf.c's hpccd_tcp_cst
GAP = SRTT_US * US                                   # probe_gap_rtt 1
KEY = tcp_engine.flow_key("10.0.0.1", "10.0.0.2", 40000, 5201)
SEED_WAITS = 20
PROBES = 24


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    """The engine's sources with fake_bpf.c for -lbpf, as a cffi module."""
    return tcpside_build.build(tmp_path_factory.mktemp("tcpside_lead"))


class Engine:
    def __init__(self, fake, wake_lead: bool):
        self.ffi, self.lib = fake.ffi, fake.lib
        # a probe per srtt (100 us)
        self.e = tcpside_build.engine(fake, probe_gap_rtt=1.0, wake_lead=int(wake_lead))
        self.seq = 0

    def stats(self):
        s = self.ffi.new("struct hpccd_tcpp_stats *")
        assert self.lib.hpccd_tcpp_stats(self.e, s) == 0
        return s

    def flow(self):
        out = self.ffi.new("struct hpccd_tcpp_flow_info[1]")
        assert self.lib.hpccd_tcpp_flows(self.e, out, 1) == 1
        return out[0]

    def push(self, rec, ctype):
        assert self.lib.fake_bpf_push(rec, self.ffi.sizeof(ctype)) == 0

    def start_flow(self):
        w = self.ffi.new("struct hpccd_tcp_wake *")
        self.ffi.memmove(self.ffi.addressof(w, "key"), KEY, 16)
        self.push(w, "struct hpccd_tcp_wake")
        assert self.lib.hpccd_tcpp_run(self.e, 0) == 0
        self.seq = 1
        assert self.flow().probes_sent == 1

    def answer(self):
        """The response to the outstanding probe, received now."""
        now = time.monotonic_ns()
        p = self.ffi.new("struct hpccd_tcp_resp *")
        self.ffi.memmove(self.ffi.addressof(p, "key"), KEY, 16)
        hop = cc.hop_pack(cc.speed_code(1_000_000_000), now % (1 << 24), 1000, 0)
        self.ffi.memmove(p.t.hops, hop, 8)
        p.t.rx_ns = now
        p.t.probe_seq = p.t.responses = self.seq
        p.t.ts_echo = (now - 20 * US) & 0xFFFFFFFF
        p.t.path_id, p.t.nhop, p.t.room = 7, 1, 5
        self.push(p, "struct hpccd_tcp_resp")

    def step_until_probe(self, limit_ns: int = 50_000_000):
        """Steps the engine without waiting until its next probe leaves."""
        end = time.monotonic_ns() + limit_ns
        while self.flow().probes_sent == self.seq:
            assert self.lib.hpccd_tcpp_run(self.e, 0) == 0
            assert time.monotonic_ns() < end, "no probe within 50 ms"
        self.seq += 1
        f = self.flow()
        assert f.probes_answered == self.seq - 1
        return f.probe_sent_ns, f.probe_due_ns

    def close(self):
        self.lib.hpccd_tcpp_free(self.e)


def run(fake, wake_lead: bool):
    eng = Engine(fake, wake_lead)
    try:
        for _ in range(SEED_WAITS):                  # no flow: one timed wait each
            assert eng.lib.hpccd_tcpp_run(eng.e, 200 * US) == 0
        s = eng.stats()
        assert s.wake_late_n == SEED_WAITS
        lead = s.wake_lead_ns
        eng.start_flow()
        probes = []
        for _ in range(PROBES):
            eng.answer()
            probes.append(eng.step_until_probe())
        s = eng.stats()
        assert s.wake_late_n == SEED_WAITS and s.wake_lead_ns == lead   # stepping: no wait
        return lead, s.wake_late_sum_ns, probes
    finally:
        eng.close()


def test_probes_leave_when_due_with_the_engines_measured_lead(fake):
    lead, late_sum, probes = run(fake, wake_lead=True)
    assert late_sum > 0 and lead > 0, "timed waits returned exactly on time, 20 times"
    early = min(lead, GAP // 2)
    prev = None
    before_due = 0
    for sent, due in probes:
        assert sent >= due - early, "a probe left more than the lead before it was due"
        if prev is not None:
            assert sent - prev >= GAP // 2, "two probes less than half a gap apart"
        before_due += sent < due
        prev = sent
    assert before_due >= PROBES // 2, (
        f"only {before_due} of {PROBES} probes left before they were due (lead "
        f"{lead / 1e3:.1f} us): the gap timer was not armed early")


def test_without_the_lead_no_probe_leaves_before_it_is_due(fake):
    lead, late_sum, probes = run(fake, wake_lead=False)
    assert lead == 0 and late_sum > 0               # measured all the same
    prev = None
    for sent, due in probes:
        assert sent >= due
        if prev is not None:
            assert sent - prev >= GAP // 2
        prev = sent
