"""``incast``: N senders start together toward the receiver of a long flow
([HPCC] section 5.2, Figure 9c/9d: seven senders in the paper's testbed).

Set-up (embedded topology, :func:`topology`): N + 1 senders and one
receiver on one switch, every link at the same rate (default 1 Gbit/s),
so the switch port toward the receiver is the only bottleneck; DCTCP
threshold marking at K on that switch.  Per algorithm, in one lab:

1. the long flow (sender ``l1``) runs alone for ``warmup`` seconds;
2. at t0 the N incast senders (``h1``..``hN``) each send ``size`` bytes,
   started on one barrier;
3. recording goes on for ``observe`` seconds after t0.

Reported per algorithm: the bottleneck queue over [t0, t0 + observe]
(p50, p99, max, p99 in BDPs of the idle base RTT); its drain, in base RTTs:
from the queue's peak until it is back at the drained level (its
pre-incast p95 plus one host GSO train and two full frames), the time from
t0 to that moment, when the peak came, and the longest stretch the queue
stayed above that level (one backlog's life, the peak's or another's); the
incast flows' completion times, and the long flow's throughput before,
during and after the incast -- with the check that the emulated queue, not
the CPU, was the bottleneck.

Which drain figure is [HPCC] Figure 9d's ("HPCC quickly reacts after just
one round trip, so the queue drains quickly", section 5.2): the one from
the peak.  In the paper the peak is the incast's start, so from t0 and from
the peak differ by the queue's rise; in the lab the hosts cannot offer
seven times the line rate at once and the largest backlog may come tens of
milliseconds into the incast (docs/experiments.md "What holds the incast's
queue"), so the time from t0 counts the wait for that backlog, not its
drain.
"""
from __future__ import annotations

import dataclasses
import math
import threading
import time
from typing import Any

from ..lab.queues import htb_burst_bytes
from . import kernel_cc, measure
from .algos import Algo
from .native import send_time
from .common import open_flow, open_sink, run_in_lab, star, verdict_lines
from .report import Results, pyplot, table
from .results import Row, Summary, derived, kb, mbps, ms, private

NAME = "incast"
PORT = 5201
DEFAULTS = {"senders": 7, "size": 500_000, "rate_mbps": 1000, "buffer_bytes": 1_000_000,
            "k_bytes": 30_000, "warmup": 1.0, "observe": 1.0}


def topology(senders: int, rate_mbps: int, buffer_bytes: int, k_bytes: int) -> str:
    """The embedded incast topology (docs/experiments.md)."""
    hosts = ["l1"] + [f"h{i}" for i in range(1, senders + 1)] + ["r1"]
    return star("xincast", "10.120.0.0/16", 0x0E1, hosts, rate_mbps, buffer_bytes, k_bytes)


def _drain_time(grid: list[tuple[int, int]], t0: int,
                pre_level: float) -> tuple[float, float, float]:
    """(seconds from t0, seconds from the queue's peak) until, after that
    peak, the backlog (a measure.queue_over_time grid) is back at
    `pre_level` (inf if never), and the seconds from t0 to the peak."""
    after = [(t, b) for t, b in grid if t >= t0]
    if not after:
        return math.nan, math.nan, math.nan
    peak = max(range(len(after)), key=lambda i: after[i][1])
    at = (after[peak][0] - t0) / 1e9
    for t, b in after[peak:]:
        if b <= pre_level:
            return (t - t0) / 1e9, (t - after[peak][0]) / 1e9, at
    return math.inf, math.inf, at


def _longest_backlog(grid: list[tuple[int, int]], t0: int, level: float) -> float:
    """Seconds of the longest run of the backlog grid (a
    measure.queue_over_time grid, from t0 on) above `level`: how long one
    backlog lasted at most; a run still open at the grid's end counts up to
    it."""
    longest, start = 0, None
    for t, b in grid:
        if t < t0:
            continue
        if b > level:
            if start is None:
                start = t
            longest = max(longest, t - start)
        else:
            if start is not None:
                longest = max(longest, t - start)
            start = None
    return longest / 1e9


@dataclasses.dataclass(kw_only=True)
class IncastRow(Row):
    """One algorithm's incast: the bottleneck queue over [t0, t0 + observe]
    (bytes, time-weighted), its drain time, the incast flows' completion
    times and the long flow's rate before, during and after."""

    t0_ns: int                          # the incast's start
    link_bps: int                       # the bottleneck's rate
    base_rtt_s: float                   # idle UDP round trip
    bdp_bytes: float
    q_p50: float
    q_p99: float
    q_max: float
    q_p99_bdp: float
    drain_s: float                      # from t0 until drained; inf: never
    drain_rtts: float
    drain_peak_rtts: float              # from the queue's peak until drained
    peak_s: float                       # from t0 to the queue's peak
    backlog_longest_rtts: float         # the longest stretch above the drained level
    fct_max_s: float                    # incast flows' completion times
    fct_p50_s: float
    long_before_bps: float
    long_during_bps: float
    long_after_bps: float
    utilisation: float                  # of the bottleneck link
    samples: list = private()           # the queue sampler's, for the plot and CSV
    long_points: list = private()       # the long flow's (time, bytes) delivered

    q_p50_kb = derived("q_p50", kb)
    q_p99_kb = derived("q_p99", kb)
    q_max_kb = derived("q_max", kb)
    fct_max_ms = derived("fct_max_s", ms)
    peak_ms = derived("peak_s", ms)
    long_during_mbps = derived("long_during_bps", mbps)
    long_after_mbps = derived("long_after_bps", mbps)


def run_one(lab, algo: Algo, p: dict[str, Any], rtt: float) -> IncastRow:
    topo = lab.topology
    sw = topo.switches["s1"]
    port = sw.port_to("r1")
    link_bps = sw.port(port).rate_bps
    sink = open_sink(lab, algo, "r1", PORT)
    flows = []
    try:
        rec = measure.QueueRecorder(lab, "s1", port).start()
        cpu = measure.CpuMeter().start()
        long = open_flow(lab, algo, "l1", "r1", PORT, sink, "long").start()
        flows.append(long)
        senders = [open_flow(lab, algo, f"h{i}", "r1", PORT, sink, f"incast{i}")
                   for i in range(1, p["senders"] + 1)]
        flows += senders
        time.sleep(p["warmup"])
        barrier = threading.Barrier(len(senders) + 1)
        for f in senders:
            f.start(p["size"], barrier)
        barrier.wait()
        t0 = time.monotonic_ns()
        time.sleep(p["observe"])
        long.stop()
        for f in flows:
            f.join()
        busy = cpu.stop()
        samples = rec.stop()
    finally:
        for f in flows:
            f.close()
        sink.close()

    # time-weighted (measure.queue_over_time): what the queue was, not what
    # arriving packets saw
    t_end = t0 + int(p["observe"] * 1e9)
    pre = [b for _, b in measure.queue_over_time(samples, link_bps, t0 - int(0.5e9), t0)]
    grid = measure.queue_over_time(samples, link_bps, t0, t_end)
    q = [b for _, b in grid]
    # Drained: back at the pre-incast p95 plus one host train (the lab's
    # hosts send GSO trains of half an HTB bucket, docs/lab.md "Offloads")
    # and two frames: a queue that only ever holds the train in flight.
    mtu = sw.port(port).mtu
    pre_level = ((measure.percentile(pre, 95) if pre else 0)
                 + htb_burst_bytes(sw.port(port).rate_mbps, mtu) // 2 + 2 * (mtu + 14))
    drain, drain_peak, peak_at = _drain_time(grid, t0, pre_level)
    longest = _longest_backlog(grid, t0, pre_level)
    bdp = link_bps / 8 * rtt
    fcts = []
    for f in senders:
        c = sink.conn(f)
        done = next((t for t, b in c.points if b >= p["size"]), None)
        fcts.append((done - t0) / 1e9 if done else math.inf)
    lc = sink.conn(long)
    before = measure.delivered_rate(lc.points, t0 - int(0.5e9), t0)
    t_incast_end = t0 + int(max(fcts) * 1e9) if all(map(math.isfinite, fcts)) else None
    during_rate = measure.delivered_rate(lc.points, t0, t_incast_end) if t_incast_end else math.nan
    after_rate = measure.delivered_rate(lc.points, t_incast_end, t0 + int(p["observe"] * 1e9)) \
        if t_incast_end else math.nan
    kp = kernel_cc.pacing(lab, algo, t0 - int(0.5e9), t_end, link_bps)
    verdict = measure.bottleneck_verdict(samples, link_bps, busy, t0 - int(0.5e9), t_end,
                                         busiest_cpu=cpu.busiest, paced=kp)
    return IncastRow(
        algo=algo.name, t0_ns=t0, link_bps=link_bps, base_rtt_s=rtt, bdp_bytes=bdp,
        q_p50=measure.percentile(q, 50), q_p99=measure.percentile(q, 99),
        q_max=max((s.backlog_bytes for s in samples if t0 <= s.ts_ns <= t_end),
                  default=math.nan),
        q_p99_bdp=measure.percentile(q, 99) / bdp if q else math.nan,
        drain_s=drain, drain_rtts=drain / rtt, drain_peak_rtts=drain_peak / rtt,
        peak_s=peak_at,
        backlog_longest_rtts=longest / rtt,
        fct_max_s=max(fcts), fct_p50_s=measure.percentile(fcts, 50),
        long_before_bps=before, long_during_bps=during_rate, long_after_bps=after_rate,
        utilisation=verdict.utilisation, cpu_busy=busy,
        queue_bound=verdict.queue_bound, verdict=verdict.text,
        samples=samples, long_points=lc.points).send_time(
            {**send_time(flows, lab.native), **kernel_cc.row_figures(kp)})


ROW = IncastRow           # what Summary.rows reads its summary's rows back as

COLUMNS = [("algo", "algo"), ("q_p50_kb", "q p50 KB"), ("q_p99_kb", "q p99 KB"),
           ("q_max_kb", "q max KB"), ("q_p99_bdp", "q p99 BDP"),
           ("drain_peak_rtts", "drain RTTs from peak"), ("peak_ms", "peak at ms"),
           ("drain_rtts", "drained from t0 RTTs"), ("backlog_longest_rtts", "longest backlog RTTs"),
           ("fct_max_ms", "incast FCT max ms"), ("long_during_mbps", "long during Mbit/s"),
           ("long_after_mbps", "long after Mbit/s"), ("wnd_limited", "wnd-limited"), ("pace_lost", "pace lost"),
           ("timer_late_us", "timer late us"), ("cpu_busy", "CPU busy"), ("queue_bound", "link-bound")]


def report(res: Results, rows: list[IncastRow], skipped: dict[str, str],
           p: dict[str, Any]) -> str:
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True)
    for r in rows:
        t0, qs, pts = r.t0_ns, r.samples, r.long_points
        res.csv(f"queue_{r.algo}.csv", ["t_ms", "backlog_bytes", "tx_bytes", "drops"],
                [((s.ts_ns - t0) / 1e6, s.backlog_bytes, s.tx_bytes, s.drops) for s in qs])
        g = measure.queue_over_time(qs, r.link_bps, t0 - int(0.2e9),
                                    t0 + int(p["observe"] * 1e9), step_ns=50_000)
        ax1.plot([(t - t0) / 1e6 for t, _ in g], [b / 1e3 for _, b in g], label=r.algo, lw=1)
        series = measure.rate_series(pts, 20_000_000)
        start = (pts[0][0] - t0) / 1e6 if pts else 0
        res.csv(f"long_flow_{r.algo}.csv", ["t_ms", "bits_per_s"],
                [(start + t * 1e3, bps) for t, bps in series])
        ax2.plot([start + t * 1e3 for t, _ in series], [bps / 1e6 for _, bps in series],
                 label=r.algo, lw=1)
    ax1.set_ylabel("bottleneck queue (KB)")
    ax1.axvline(0, color="grey", lw=0.5)
    ax1.legend()
    ax1.set_title(f"{p['senders']}-to-1 incast of {p['size'] // 1000} KB each "
                  f"into a long flow, {p['rate_mbps']} Mbit/s")
    ax2.set_ylabel("long flow (Mbit/s, 20 ms bins)")
    ax2.set_xlabel("ms from the incast start")
    ax2.set_xlim(-200, p["observe"] * 1e3)
    res.figure("incast.png", fig)
    text = table(rows, COLUMNS)
    if rows:
        r0 = rows[0]
        text += (f"\nbase RTT {r0.base_rtt_s * 1e6:.0f} us (idle UDP round trip), "
                 f"BDP {r0.bdp_bytes / 1e3:.1f} KB at {r0.link_bps / 1e9:g} Gbit/s")
    text += verdict_lines(rows, skipped, hpcc_text=p["hpcc_text"])
    res.summary(text, Summary(NAME, p, rows, skipped))
    return text


def run(lab_factory, algos: list[Algo], params: dict[str, Any], out: str) -> tuple[str, str]:
    """Run `algos` one after the other in one lab; returns (summary text,
    results folder)."""
    p = {**DEFAULTS, **{k: v for k, v in params.items() if v is not None}}
    from ..lab.topology import Topology
    topo = Topology.loads(topology(p["senders"], p["rate_mbps"], p["buffer_bytes"],
                                   p["k_bytes"]), "<incast experiment>")
    res = Results(out, NAME)
    senders = ["l1"] + [f"h{i}" for i in range(1, p["senders"] + 1)]
    rows, skipped = run_in_lab(
        NAME, lab_factory, topo, algos, p, [(s, "r1") for s in senders], "s1", "r1",
        lambda lab, a, rtt: run_one(lab, a, p, rtt),
        f"long flow for {p['warmup']} s, then {p['senders']} x {p['size']} B",
        lambda r: f"q p99 {r.q_p99 / 1e3:.0f} KB, drained {r.drain_peak_rtts:.1f} RTTs "
                  f"after its peak ({r.peak_s * 1e3:.1f} ms into the incast)",
        lab_note=f" ({len(topo.hosts)} hosts)")
    return report(res, rows, skipped, p), res.dir
