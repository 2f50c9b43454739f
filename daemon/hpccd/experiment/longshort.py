"""``long-short``: a long flow at line rate; a short flow joins on the same
bottleneck and leaves; how fast does the long flow get its rate back?
([HPCC] section 5.2, Figure 9a/9b: a 1 MB short flow.)

Embedded topology (common.dumbbell): ``l1`` -> ``r1`` (long) and ``x1``
-> ``r2`` (short) share the s1 -> s2 link, the bottleneck; each receiver
has a port of s2 to itself, so s2's queue sampler gives each flow's
throughput from that port's byte counter at 100 us grain, and the short
flow's end as the moment its port sent its last byte -- switch clocks, not
the runner's threads.  Per algorithm: the long flow alone for ``warmup``
seconds, then the short flow of ``size`` bytes; recording goes on for
``after`` seconds past the short flow's end.

Reported: the long flow's rate before the short flow, while it ran, and
the recovery time: from the short flow's last byte until the long flow's
rate, averaged over the next 5 ms, is >= 90% of the line rate again (in
ms and in base RTTs; issue 8: HPCC within 3 RTTs).  Beside it, two figures
that tell the algorithm from the hosts (docs/experiments.md "What holds the
long flow back"): the recovery to 90 % of the long flow's own rate before
the short flow (its ceiling on these hosts, when that is below the line
rate), and, for a native flow, its window W read from the engine
(native.WindowRecorder, every 0.2 ms from the short flow's start): W's
least while the short flow ran against its median before, and the time
and the W^c updates from the short flow's end until W is back at 90 % of
that median ([HPCC] Algorithm 1: after U fell below eta, maxStage
additive updates, one per round trip, come before the multiplicative
one).
"""
from __future__ import annotations

import dataclasses
import math
import statistics
import time
from typing import Any

from . import kernel_cc, measure
from .algos import Algo
from .native import WindowRecorder, send_time
from .common import dumbbell, open_flow, open_sink, run_in_lab, verdict_lines, with_defaults
from .report import Results, pyplot, table
from .results import Row, Summary, derived, mbps, ms, private

NAME = "long-short"
PORT = 5201
BIN_NS = 500_000
HOLD_NS = 5_000_000
BEFORE_NS = 500_000_000      # the long flow's rate before: over this long (spans a 200 ms RTO)
W_POLL_S = 0.002             # the long flow's W read this often before the short flow,
W_POLL_FAST_S = 0.0002       # and this often from its start on
DEFAULTS = {"size": 1_000_000, "rate_mbps": 1000, "buffer_bytes": 1_000_000,
            "k_bytes": 30_000, "warmup": 1.0, "after": 0.5}


def topology(p: dict[str, Any]) -> str:
    return dumbbell("xls", "10.122.0.0/16", ["l1", "x1"], ["r1", "r2"], p["rate_mbps"],
                    p["buffer_bytes"], p["k_bytes"])


def recovery(rates: list[tuple[int, float]], t_end: int, line_bps: float,
             hold_ns: int = HOLD_NS) -> float:
    """Seconds from `t_end` until the rate averaged over the next
    `hold_ns` is >= 90% of `line_bps`; inf if it never is (rates: [(bin
    start ns, bit/s)] of equal bins)."""
    if len(rates) < 2:
        return math.nan
    step = rates[1][0] - rates[0][0]
    k = max(1, hold_ns // step)
    after = [(t, r) for t, r in rates if t >= t_end]
    for i in range(len(after) - k + 1):
        if sum(r for _, r in after[i:i + k]) / k >= 0.9 * line_bps:
            return (after[i][0] - t_end) / 1e9
    return math.inf


def window_back(points: list[tuple], t_start: int, t_first: int,
                t_end: int) -> tuple[float, float, float]:
    """From the long flow's window samples [(ns, W, W^c updates so far, ...)]
    (WindowRecorder): (W's least while the short flow ran, [t_first,
    t_end], over its median in the BEFORE_NS before `t_start`; seconds from
    `t_end` until W is >= 90 % of that median again, 0 if it is at t_end;
    the W^c updates meanwhile).  inf: never back; nan: no samples (a kernel
    flow)."""
    before = [p[1] for p in points if t_start - BEFORE_NS <= p[0] < t_start]
    if not before:
        return math.nan, math.nan, math.nan
    w0 = statistics.median(before)
    low = min((p[1] for p in points if t_first <= p[0] <= t_end), default=w0) / w0
    upto = [p for p in points if p[0] <= t_end]
    if not upto:
        return low, math.nan, math.nan
    w_end, n_end = upto[-1][1], upto[-1][2]
    if w_end >= 0.9 * w0:
        return low, 0.0, 0
    for t, w, n, *_ in points:
        if t > t_end and w >= 0.9 * w0:
            return low, (t - t_end) / 1e9, n - n_end
    return low, math.inf, math.inf


def srtt_over_T(points: list[tuple], t_start: int, T_ns: float) -> float:
    """The long flow's median smoothed RTT over the BEFORE_NS before the
    short flow, in units of HPCC's T (window samples: (ns, W, updates,
    srtt ns)); nan without samples.  Above 1 the window cap W_init = B x T
    ([HPCC] section 3.2) is below the flow's bandwidth-delay product at its
    own RTT: alone it can deliver at most 1 / this of the line rate."""
    v = [p[3] for p in points if t_start - BEFORE_NS <= p[0] < t_start and len(p) > 3 and p[3]]
    return statistics.median(v) / T_ns if v and T_ns else math.nan


@dataclasses.dataclass(kw_only=True)
class LongShortRow(Row):
    """One algorithm's long-short run: the short flow's completion time and
    how long the long flow took to get the link back after it."""

    t0_ns: int                          # the short flow's start
    t_end_ns: int                       # its last byte through s2
    line_bps: int                       # the bottleneck's rate
    base_rtt_s: float
    short_fct_s: float
    long_before_bps: float
    long_during_bps: float
    recovery_s: float                   # until >= 90% of line rate again; inf: never
    recovery_rtts: float
    recovery_own_rtts: float            # until >= 90% of its own rate before
    w_low: float                        # W's least during the short flow / W before
    w_back_rtts: float                  # until W >= 90% of W before; nan: kernel flow
    w_back_updates: float               # W^c updates meanwhile
    srtt_T: float                       # its median srtt alone / T (> 1: the cap B x T binds)
    rates: list = private()             # the long flow's [(bin start ns, bit/s)] at s2
    short_rates: list = private()       # the short flow's, same bins

    long_before_mbps = derived("long_before_bps", mbps)
    long_during_mbps = derived("long_during_bps", mbps)
    short_fct_ms = derived("short_fct_s", ms)
    recovery_ms = derived("recovery_s", ms)


def run_one(lab, algo: Algo, p: dict[str, Any], rtt: float) -> LongShortRow:
    topo = lab.topology
    s2 = topo.switches["s2"]
    p_long, p_short = s2.port_to("r1"), s2.port_to("r2")
    p_bottleneck = topo.switches["s1"].port_to("s2")
    line = topo.switches["s1"].port(p_bottleneck).rate_bps
    sink_l = open_sink(lab, algo, "r1", PORT)
    sink_s = open_sink(lab, algo, "r2", PORT)
    flows = []
    wrec = None
    try:
        rec = measure.QueueRecorder(lab, "s2", (p_long, p_short)).start()
        rec_b = measure.QueueRecorder(lab, "s1", p_bottleneck).start()
        cpu = measure.CpuMeter().start()
        long = open_flow(lab, algo, "l1", "r1", PORT, sink_l, "long").start()
        flows.append(long)
        wrec = WindowRecorder(long, W_POLL_S).start()
        short = open_flow(lab, algo, "x1", "r2", PORT, sink_s, "short")
        flows.append(short)
        time.sleep(p["warmup"])
        wrec.poll_s = W_POLL_FAST_S
        t_start = time.monotonic_ns()
        short.start(p["size"])
        short.join(timeout=30)
        c = sink_s.conn(short)
        for _ in range(300):
            if c.total >= p["size"]:
                break
            time.sleep(0.01)
        time.sleep(p["after"])
        wpts = wrec.stop()
        long.stop()
        long.join()
        busy = cpu.stop()
        samples = rec.stop()
        bottleneck = rec_b.stop()
    finally:
        if wrec is not None:
            wrec.stop()
        for f in flows:
            f.close()
        sink_l.close()
        sink_s.close()
    sl = [s for s in samples if s.port == p_long]
    ss = [s for s in samples if s.port == p_short]
    if not ss:
        raise RuntimeError(f"{algo.name}: no sample of s2's port toward r2: the short flow "
                           f"never crossed it")
    final = ss[-1].tx_bytes
    t_end = next(s.ts_ns for s in ss if s.tx_bytes >= final)
    t_first = next(s.ts_ns for s in ss if s.ts_ns >= t_start)
    rates = measure.port_rate(sl, t_start - BEFORE_NS, t_end + int(p["after"] * 1e9), BIN_NS)
    rec_s = recovery(rates, t_end, line)

    kp = kernel_cc.pacing(lab, algo, t_first, t_end, line)
    verdict = measure.bottleneck_verdict(bottleneck, line, busy, t_first, t_end,
                                         busiest_cpu=cpu.busiest, paced=kp)

    def avg(a: int, b: int) -> float:
        v = [r for t, r in rates if a <= t < b]
        return sum(v) / len(v) if v else math.nan
    before = avg(t_start - BEFORE_NS, t_start)
    rec_own = recovery(rates, t_end, before) if before > 0 else math.nan
    w_low, w_back_s, w_back_n = window_back(wpts, t_start, t_first, t_end)
    return LongShortRow(
        algo=algo.name, t0_ns=t_start, t_end_ns=t_end, line_bps=line,
        base_rtt_s=rtt, short_fct_s=(t_end - t_first) / 1e9,
        long_before_bps=before,
        long_during_bps=avg(t_first, t_end),
        recovery_s=rec_s, recovery_rtts=rec_s / rtt, recovery_own_rtts=rec_own / rtt,
        w_low=w_low, w_back_rtts=w_back_s / rtt, w_back_updates=w_back_n,
        srtt_T=srtt_over_T(wpts, t_start, p.get("T_us", math.nan) * 1000), cpu_busy=busy,
        queue_bound=verdict.queue_bound, verdict=verdict.text,
        rates=rates, short_rates=measure.port_rate(ss, t_start - BEFORE_NS,
                                                   t_end + int(p["after"] * 1e9), BIN_NS),
    ).send_time({**send_time(flows, lab.native), **kernel_cc.row_figures(kp)})


ROW = LongShortRow        # what Summary.rows reads its summary's rows back as

COLUMNS = [("algo", "algo"), ("long_before_mbps", "long before Mbit/s"),
           ("long_during_mbps", "long during Mbit/s"), ("short_fct_ms", "short FCT ms"),
           ("recovery_ms", "recovery ms"), ("recovery_rtts", "recovery RTTs"),
           ("recovery_own_rtts", "to own rate RTTs"), ("w_low", "W low"),
           ("w_back_rtts", "W back RTTs"), ("w_back_updates", "W^c updates"),
           ("srtt_T", "srtt / T"),
           ("wnd_limited", "wnd-limited"), ("pace_lost", "pace lost"),
           ("timer_late_us", "timer late us"), ("cpu_busy", "CPU busy"), ("queue_bound", "link-bound")]


def report(res: Results, rows: list[LongShortRow], skipped: dict[str, str],
           p: dict[str, Any]) -> str:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4))
    for r in rows:
        rates, short, t_end = r.rates, r.short_rates, r.t_end_ns
        res.csv(f"rates_{r.algo}.csv", ["t_ms_from_short_end", "long_bps", "short_bps"],
                [((t - t_end) / 1e6, a, b) for (t, a), (_, b) in zip(rates, short)])
        line, = ax.plot([(t - t_end) / 1e6 for t, _ in rates], [b / 1e6 for _, b in rates],
                        label=f"{r.algo} long", lw=1)
        ax.plot([(t - t_end) / 1e6 for t, _ in short], [b / 1e6 for _, b in short],
                ls=":", color=line.get_color(), lw=1, label=f"{r.algo} short")
    ax.axvline(0, color="grey", lw=0.5)
    ax.set_xlabel("ms from the short flow's last byte")
    ax.set_ylabel(f"Mbit/s ({BIN_NS // 1000} us bins, s2's ports)")
    ax.set_title(f"long flow + {p['size'] // 1000} KB short flow, {p['rate_mbps']} Mbit/s")
    ax.legend(fontsize=8)
    res.figure("long-short.png", fig)
    text = table(rows, COLUMNS)
    if rows:
        text += f"\nbase RTT {rows[0].base_rtt_s * 1e6:.0f} us; recovery: long flow >= 90% " \
                f"of line rate averaged over the next {HOLD_NS // 1_000_000} ms; to own rate: " \
                f">= 90% of its rate before the short flow, the same way; W low: its window's " \
                f"least while the short flow ran over its median before; W back: until W " \
                f">= 90% of that median (read every {W_POLL_FAST_S * 1e3:g} ms), W^c updates " \
                f"meanwhile; srtt / T: the long flow's median srtt alone over HPCC's T (above 1 " \
                f"its window cap B x T is below its own bandwidth-delay product)"
    text += verdict_lines(rows, skipped, hpcc_text=p["hpcc_text"])
    res.summary(text, Summary(NAME, p, rows, skipped))
    return text


def run(lab_factory, algos: list[Algo], params: dict[str, Any], out: str) -> tuple[str, str]:
    p = with_defaults(DEFAULTS, params)
    from ..lab.topology import Topology
    topo = Topology.loads(topology(p), "<long-short experiment>")
    res = Results(out, NAME)
    rows, skipped = run_in_lab(
        NAME, lab_factory, topo, algos, p, [("l1", "r1"), ("x1", "r2")], "s1", "s2",
        lambda lab, a, rtt: run_one(lab, a, p, rtt), f"long flow, then a {p['size']} B short flow",
        lambda r: f"long flow recovered in {r.recovery_ms:.2f} ms")
    return report(res, rows, skipped, p), res.dir
