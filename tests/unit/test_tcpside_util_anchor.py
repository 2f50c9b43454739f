"""The pair of INT records the TCP-side probe engine publishes for the hop
utilisation gauge (util_anchor, fastpath/tcpside/engine.c), without root or a
kernel.

`hpccd_int_hop_utilization_ratio` (docs/metrics.md) is the bytes a hop sent
between two of its records at least HPCCD_INT_UTIL_SPAN_NS (1 ms) apart, over
their time and the hop's speed: over less, a shaped port's burst is measured,
not its link.  For TCP-side flows the engine keeps the older record of that
pair per flow (hops_prev, published with the last response's hops by
hpccd_tcpp_flows) and the daemon takes the figure from the pair
(TcpSide.publish_int -> FlowTable.observe_hop).  The lab test that exercises
it (tests/integration/test_tcp_cc_lab.py) reads a figure the old "last two
records" pair would usually give too; this test pins the spacing itself.

How: the engine's own sources, unchanged, are compiled with a fake libbpf
(tests/unit/tcpside/: a ring the test pushes records into, a hpccd_tcp_cst
that says every flow runs "hpcc" with data in flight).  A wake record starts
one flow; scripted PROBE_RESP records, with the rx_ns, path_id and hop records
the test chooses, go through the engine's ring callback and on_resp (which
calls util_anchor); the flow is read back with hpccd_tcpp_flows and the
daemon's own view of it (tcp_side.engine._view).

Invariants protected, at every response:
- a published pair is at least a span apart and less than two spans plus
  the longest interval between the responses in it (responses every 100 us:
  within [1 ms, 2.1 ms)), and less than half a ts wrap (2^23 ns, 8.4 ms:
  the records' modular difference stays unambiguous);
- hops_prev is an earlier response of the flow, all of its hops, on the same
  path, with no path change and no gap of half a wrap since;
- no pair until a span after the flow's first response, after a path
  change, or after a gap of half a wrap; then one at every response;
- the pair is dropped when its older record ages past half a wrap, even
  though the next span's anchor is younger;
- the daemon's figure for each hop is that pair's (bytes between the two
  records over their time and the hop's speed), across the ts and txBytes
  wraps; without a pair the hop keeps its last figure.
"""
from __future__ import annotations

import dataclasses
import shutil
import types

import pytest

from hpccd._cc import lib as cc_lib
from hpccd.agent import config
from hpccd.agent.flows import UTIL_SPAN_NS, FlowTable
from hpccd.core import cc
from hpccd.tcp_side import engine as tcp_engine
from tcpside import tcpside_build

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")

SPAN = UTIL_SPAN_NS                                  # HPCCD_INT_UTIL_SPAN_NS, 1 ms
TS_MOD = 1 << cc_lib.HPCCD_INT_TS_BITS               # the hop's ts wraps (16.8 ms)
HALF_WRAP = TS_MOD // 2
TX_MOD = 1 << cc_lib.HPCCD_INT_TX_BITS               # txBytes, in 128-byte units
SPEED = 1_000_000_000
US = 1000
KEY = tcp_engine.flow_key("10.0.0.1", "10.0.0.2", 40000, 5201)


@pytest.fixture(scope="module")
def fake(tmp_path_factory):
    """The engine's sources with fake_bpf.c for -lbpf, as a cffi module."""
    return tcpside_build.build(tmp_path_factory.mktemp("tcpside"))


@dataclasses.dataclass
class Resp:
    rx_ns: int
    path_id: int
    hops: list[bytes]
    tx: list[int]                                    # each hop's txBytes units, unwrapped


class Engine:
    """One engine with one flow; resp() feeds a PROBE_RESP and returns the
    flow as the daemon reads it."""

    def __init__(self, fake):
        self.ffi, self.lib = fake.ffi, fake.lib
        self.e = tcpside_build.engine(fake, probe_gap_rtt=0)   # the next probe at each response
        w = self.ffi.new("struct hpccd_tcp_wake *")
        self.ffi.memmove(self.ffi.addressof(w, "key"), KEY, 16)
        self._push(w, "struct hpccd_tcp_wake")       # the flow starts: probe 1 leaves
        self.seq = 1

    def _push(self, rec, ctype):
        assert self.lib.fake_bpf_push(rec, self.ffi.sizeof(ctype)) == 0
        assert self.lib.hpccd_tcpp_run(self.e, 0) == 0

    def resp(self, r: Resp) -> tcp_engine.FlowView:
        p = self.ffi.new("struct hpccd_tcp_resp *")
        self.ffi.memmove(self.ffi.addressof(p, "key"), KEY, 16)
        self.ffi.memmove(p.t.hops, b"".join(r.hops), 8 * len(r.hops))
        p.t.rx_ns = r.rx_ns
        p.t.probe_seq = p.t.responses = self.seq     # the answer to the outstanding probe
        p.t.ts_echo = (r.rx_ns - 20 * US) & 0xFFFFFFFF
        p.t.path_id, p.t.nhop, p.t.room = r.path_id, len(r.hops), 5
        self._push(p, "struct hpccd_tcp_resp")
        self.seq += 1
        out = self.ffi.new("struct hpccd_tcpp_flow_info[1]")
        assert self.lib.hpccd_tcpp_flows(self.e, out, 1) == 1
        v = tcp_engine._view(out[0])
        assert v.probes_answered == self.seq - 1 and v.last_update_ns == r.rx_ns, \
            "the response was not taken, or its window not written"
        return v

    def close(self):
        self.lib.hpccd_tcpp_free(self.e)


class Script:
    """Responses of one flow: hop i of path p sends at a rate that changes
    from one interval to the next (so a figure tells which pair it came
    from); its record at rx has ts = rx mod 2^24 and qlen = the response's
    index plus 1000 a hop (so hop bytes tell which response they are)."""

    def __init__(self, t0: int):
        self.now = t0
        self.sent: list[Resp] = []
        self.tx: dict[tuple[int, int], int] = {}

    def next(self, after_ns: int, path_id: int, nhop: int) -> Resp:
        k = len(self.sent)
        dt = after_ns if self.sent else 0
        self.now += dt
        hops, tx = [], []
        for i in range(nhop):
            u = self.tx.get((path_id, i), TX_MOD - 3000)        # txBytes wraps early on
            share = 0.2 + 0.07 * ((7 * k + 3 * i) % 10)         # 0.2 .. 0.83 of the link
            u += int(share * SPEED / 8 * dt / 1e9 / 128)
            self.tx[(path_id, i)] = u
            tx.append(u)
            hops.append(cc.hop_pack(cc.speed_code(SPEED), self.now % TS_MOD, u % TX_MOD,
                                    k + 1000 * i))
        r = Resp(self.now, path_id, hops, tx)
        self.sent.append(r)
        return r


def test_util_anchor_pairs_and_the_daemons_figure(fake):
    eng = Engine(fake)
    sc = Script(t0=7 * TS_MOD - 2 * SPAN)           # the hops' ts wraps 2 ms in
    ft = FlowTable(10, ("default",), config.ALGORITHMS, 16)
    daemon = types.SimpleNamespace(on_int=ft.observe_hop, _int_seen={})
    figure: dict[tuple[int, int], float | None] = {}
    index = {}                                       # hop 0's record -> response

    def feed(after_ns: int, path_id: int, nhop: int = 2) -> int | None:
        """One response; the checks of every response; the age of the pair's
        older record (None: no pair)."""
        r = sc.next(after_ns, path_id, nhop)
        k = len(sc.sent) - 1
        index[r.hops[0]] = k
        v = eng.resp(r)
        assert v.path_id == path_id and v.hops == b"".join(r.hops)
        tcp_engine.TcpSide.publish_int(daemon, [v])
        hops = ft.hops()
        if not v.hops_prev:
            for i in range(nhop):                    # the last figure stays
                assert hops[(path_id, i)]["utilization"] == figure.get((path_id, i))
            return None
        j = index[v.hops_prev[:8]]
        p = sc.sent[j]
        assert j < k and v.hops_prev == b"".join(p.hops), "hops_prev is not one response"
        between = sc.sent[j:k + 1]
        assert {s.path_id for s in between} == {path_id}, "a pair across a path change"
        steps = [b.rx_ns - a.rx_ns for a, b in zip(between, between[1:])]
        assert max(steps) < HALF_WRAP, "a pair across a gap of half a wrap"
        gap = r.rx_ns - p.rx_ns
        assert SPAN <= gap < min(2 * SPAN + max(steps), HALF_WRAP)
        for i in range(nhop):
            want = (r.tx[i] - p.tx[i]) * 128 * 8e9 / gap / SPEED
            assert hops[(path_id, i)]["utilization"] == pytest.approx(want, rel=1e-9)
            figure[(path_id, i)] = want
        return gap

    try:
        # responses every 100 us for 5 ms, one path of two hops: none before
        # a span has passed, then one at each response, within [1, 2.1) ms
        # and never going back to an older record
        gaps = [feed(0 if n == 0 else 100 * US, 0x0A1) for n in range(51)]
        assert gaps[:10] == [None] * 10
        assert all(SPAN <= g < 2 * SPAN + 100 * US for g in gaps[10:])
        assert min(gaps[10:]) == SPAN and max(gaps[10:]) == 2 * SPAN - 100 * US
        firsts = [sc.sent[n].rx_ns - g for n, g in enumerate(gaps) if g]
        assert firsts == sorted(firsts)

        # a path of three hops: none for a span after the change, then pairs
        # of the new path only
        gaps = [feed(100 * US, 0x0B2, 3) for _ in range(21)]
        assert gaps[:10] == [None] * 10 and all(gaps[10:])

        # a gap of more than half a wrap: no pair across it, and again none
        # for a span after it
        gaps = [feed(HALF_WRAP + SPAN if n == 0 else 100 * US, 0x0B2, 3) for n in range(13)]
        assert gaps[:10] == [None] * 10 and all(gaps[10:])

        # the pair's older record ages past half a wrap: a fresh path, its
        # next response 8 ms later (under half a wrap: a pair, 8 ms apart),
        # 0.2 ms on the pair still holds (8.2 ms), 0.5 ms on it is dropped
        # (8.5 ms) though the anchor is only 0.5 ms old; a span after the
        # anchor, a pair again
        assert feed(100 * US, 0x0C3) is None
        assert feed(8 * SPAN, 0x0C3) == 8 * SPAN
        assert feed(200 * US, 0x0C3) == 8 * SPAN + 200 * US
        assert feed(300 * US, 0x0C3) is None
        assert feed(500 * US, 0x0C3) == SPAN
    finally:
        eng.close()
