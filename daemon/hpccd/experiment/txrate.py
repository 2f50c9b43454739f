"""``txrate-vs-rxrate``: HPCC computing its link load from the queue's
transmit rate (Algorithm 1) against HPCC-rxRate, which uses the rate at
which bytes arrive at the queue ([HPCC] section 3.4, Figure 6: "using
rxRate has oscillation before it finally converges ... using txRate
gracefully converges").

A 2-to-1 congestion scenario: ``h1`` and ``h2`` start one native HPCC flow
each toward ``r1`` at the same moment, through switch ``s1`` whose port
toward ``r1`` is the bottleneck.  The senders are unchanged between the two
runs; only the switch's INT differs: in the rxRate run the port's hop
records carry the bytes that *arrived* at the queue in the txBytes field
(int_switch's HPCCD_SW_F_RX_BYTES), so Algorithm 1 line 4 computes rxRate.

Reported per variant: the queue over time (time-weighted p50, p99, max),
its standard deviation after the first ``settle`` seconds (oscillation),
how often it crosses its own mean (swings), and the bottleneck's
utilisation, with the link-or-CPU verdict; and what an overreaction does
to the link: its use per millisecond (from the bottleneck port's byte
counter, stamped by the switch: the lab's most exact clock), its standard
deviation while the flows converge (from 2 ms to ``settle``: the paper's
rxRate "has oscillation before it finally converges") and after; each
flow's rate in 20 ms bins (from the receiver's byte counts, read every
2 ms by a thread: coarse) and their coefficient of variation after
``settle``.  The plot: queue and link use over the first 100 ms, each
flow's rate over the whole run.  ``--algos`` does not apply:
this experiment is about HPCC alone.
"""
from __future__ import annotations

import dataclasses
import math
import statistics
import time
from typing import Any

from . import loaded_rtt, measure
from .common import base_rtt, star, with_defaults
from .native import Engines, NativeFlow, NativeSink
from .report import Results, progress, pyplot, table
from .results import Record, Summary, derived, kb, private

NAME = "txrate-vs-rxrate"
DEFAULTS = {"rate_mbps": 1000, "buffer_bytes": 1_000_000, "duration": 2.0, "settle": 0.2}


def topology(p: dict[str, Any]) -> str:
    return star("xtxrx", "10.124.0.0/16", 0x0E4, ["h1", "h2", "r1"], p["rate_mbps"],
                p["buffer_bytes"])


def _swings(values: list[float]) -> int:
    """How many times the series crosses its mean."""
    if not values:
        return 0
    m = statistics.fmean(values)
    above = [v > m for v in values]
    return sum(1 for a, b in zip(above, above[1:]) if a != b)


@dataclasses.dataclass(kw_only=True)
class TxRateRow(Record):
    """HPCC's run with one variant of the utilisation estimate ([HPCC]
    section 3.4: txRate or rxRate): the queue two flows build into one
    port, the link's use and the flows' rates."""

    variant: str                        # "txRate" or "rxRate"
    t0_ns: int
    link_bps: int
    q_p50: float
    q_p99: float
    q_max: float
    q_sd_settled: float                 # the queue's standard deviation once settled
    swings_per_s: float                 # crossings of its mean, per second, settled
    flow_bps: list[float]               # each flow's rate, settled
    utilisation: float
    cpu_busy: float
    use_sd_early: float                 # the link's use, 1 ms bins: sd while converging
    q_busy: float                       # share of the time the queue held more than a frame
    use_sd_settled: float
    rate_cv: float                      # the flows' rates' coefficient of variation, mean
    queue_bound: bool
    verdict: str
    grid: list = private()              # the queue, time-weighted
    use: list = private()               # the link's use, 1 ms bins
    rates: list = private()             # each flow's rate, RATE_BIN_NS bins

    q_p50_kb = derived("q_p50", kb)
    q_p99_kb = derived("q_p99", kb)
    q_max_kb = derived("q_max", kb)
    q_sd_kb = derived("q_sd_settled", kb)


def run_one(lab, variant: str, p: dict[str, Any]) -> TxRateRow:
    from .._bpf import lib
    sw = lab.topology.switches["s1"]
    port = sw.port_to("r1")
    link = sw.port(port).rate_bps
    flags = lib.HPCCD_SW_F_INT | lib.HPCCD_SW_F_SAMPLE
    if variant == "rxRate":
        flags |= lib.HPCCD_SW_F_RX_BYTES
    lab.int_switch.configure("s1", port, flags=flags)
    sink = NativeSink(lab.native, "r1")
    flows = []
    try:
        flows = [NativeFlow(lab.native, h, "r1", "hpcc", h) for h in ("h1", "h2")]
        rec = measure.QueueRecorder(lab, "s1", port).start()
        cpu = measure.CpuMeter().start()
        t0 = time.monotonic_ns()
        for f in flows:
            f.start()
        time.sleep(p["duration"])
        t1 = time.monotonic_ns()
        for f in flows:
            f.stop()
            f.join()
        busy = cpu.stop()
        samples = rec.stop()
        rates = [measure.delivered_rate(sink.conn(f).points, t0 + int(p["settle"] * 1e9), t1)
                 for f in flows]
        points = [list(sink.conn(f).points) for f in flows]
    finally:
        for f in flows:
            f.close()
        sink.close()
        lab.int_switch.configure("s1", port)            # back to the topology's
    grid = measure.queue_over_time(samples, link, t0, t1, step_ns=50_000)
    q = [b for _, b in grid]
    settled = [b for t, b in grid if t >= t0 + p["settle"] * 1e9]
    verdict = measure.bottleneck_verdict(samples, link, busy, t0 + int(p["settle"] * 1e9), t1,
                                         busiest_cpu=cpu.busiest)
    t_set = t0 + int(p["settle"] * 1e9)
    use = [(t, bps / link) for t, bps in measure.port_rate(samples, t0, t1, 1_000_000)]
    early = [u for t, u in use if t0 + 2_000_000 <= t < t_set]
    late = [u for t, u in use if t >= t_set]
    cvs = []
    flow_rates = [[(t, b) for t, b in _rates(pts, t0) if t + RATE_BIN_NS <= t1] for pts in points]
    for fr in flow_rates:
        v = [bps for t, bps in fr if t >= t_set]
        if len(v) > 1 and statistics.fmean(v) > 0:
            cvs.append(statistics.pstdev(v) / statistics.fmean(v))
    return TxRateRow(
        variant=variant, t0_ns=t0, link_bps=link,
        q_p50=measure.percentile(q, 50), q_p99=measure.percentile(q, 99),
        q_max=max((s.backlog_bytes for s in samples), default=math.nan),
        q_sd_settled=statistics.pstdev(settled) if settled else math.nan,
        swings_per_s=_swings(settled) / max(1e-9, p["duration"] - p["settle"]),
        flow_bps=rates, utilisation=verdict.utilisation, cpu_busy=busy,
        use_sd_early=statistics.pstdev(early) if len(early) > 1 else math.nan,
        # rxRate differs from txRate only while the queue grows: how
        # often it held more than a frame
        q_busy=sum(1 for b in q if b > 1514) / len(q) if q else math.nan,
        use_sd_settled=statistics.pstdev(late) if len(late) > 1 else math.nan,
        rate_cv=statistics.fmean(cvs) if cvs else math.nan,
        queue_bound=verdict.queue_bound, verdict=verdict.text, grid=grid,
        use=use, rates=flow_rates)


RATE_BIN_NS = 20_000_000


def _rates(points: list[tuple[int, int]], t0: int) -> list[tuple[int, float]]:
    """A flow's delivered rate in RATE_BIN_NS bins, [(bin start ns, bit/s)],
    from (t, bytes so far) points, binned from `t0`."""
    if not points:
        return []
    out, i, prev = [], 0, 0
    t = t0
    end = points[-1][0]
    while t < end:
        upto = prev
        while i < len(points) and points[i][0] < t + RATE_BIN_NS:
            upto = points[i][1]
            i += 1
        out.append((t, (upto - prev) * 8e9 / RATE_BIN_NS))
        prev = upto
        t += RATE_BIN_NS
    return out


ROW = TxRateRow           # what Summary.rows reads its summary's rows back as

COLUMNS = [("variant", "HPCC with"), ("q_p50_kb", "q p50 KB"), ("q_p99_kb", "q p99 KB"),
           ("q_max_kb", "q max KB"), ("q_sd_kb", "q sd KB (settled)"),
           ("swings_per_s", "mean crossings/s"), ("utilisation", "link use"),
           ("use_sd_early", "use sd converging"), ("use_sd_settled", "use sd settled"),
           ("rate_cv", "flow rate CV"), ("q_busy", "queue > 1 frame"),
           ("queue_bound", "link-bound")]


def report(res: Results, rows: list[TxRateRow], p: dict[str, Any], rtt: float) -> str:
    plt = pyplot()
    fig, (ax1, ax3, ax2) = plt.subplots(3, 1, figsize=(8, 9))
    for k, r in enumerate(rows):
        g, t0, use, flows = r.grid, r.t0_ns, r.use, r.rates
        res.csv(f"queue_{r.variant}.csv", ["t_ms", "backlog_bytes"],
                [((t - t0) / 1e6, b) for t, b in g])
        res.csv(f"link_use_{r.variant}.csv", ["t_ms", "use"],
                [((t - t0) / 1e6, u) for t, u in use])
        res.csv(f"flow_rates_{r.variant}.csv", ["t_ms"] + [f"flow{i + 1}_bps"
                                                              for i in range(len(flows))],
                [[(flows[0][j][0] - t0) / 1e6] + [f[j][1] if j < len(f) else "" for f in flows]
                 for j in range(len(flows[0]) if flows else 0)])
        color = f"C{k}"
        pts = [((t - t0) / 1e6, b / 1e3) for t, b in g if (t - t0) / 1e6 <= 100.0]
        ax1.plot([x for x, _ in pts], [y for _, y in pts], color=color,
                 label=f"HPCC with {r.variant}", lw=1)
        pts = [((t - t0) / 1e6, u) for t, u in use if (t - t0) / 1e6 <= 100.0]
        ax3.plot([x for x, _ in pts], [y for _, y in pts], color=color,
                 label=f"HPCC with {r.variant}", lw=1)
        for i, f in enumerate(flows):
            ax2.plot([(t - t0) / 1e6 for t, _ in f], [b / 1e6 for _, b in f], color=color,
                     ls="-" if i == 0 else "--", lw=1,
                     label=f"{r.variant} flow {i + 1}")
    ax1.set_title("2-to-1: queue at the bottleneck (first 100 ms)")
    ax1.set_ylabel("queue (KB)")
    ax3.set_title("the bottleneck's use, 1 ms bins (first 100 ms)")
    ax3.set_ylabel("share of the link")
    ax2.set_title(f"each flow's rate, 20 ms bins, whole run ({p['duration']:g} s)")
    ax2.set_ylabel("Mbit/s")
    for ax in (ax1, ax2, ax3):
        ax.legend(fontsize=7)
    ax2.set_xlabel("ms from the start of both flows")
    fig.tight_layout()
    res.figure("txrate-vs-rxrate.png", fig)
    text = table(rows, COLUMNS)
    text += f"\nbase RTT {rtt * 1e6:.0f} us; settled = after {p['settle']:g} s"
    text += p["hpcc_text"]
    for r in rows:
        text += (f"\n{r.variant}: flows " + " / ".join(f"{b / 1e6:.0f}" for b in r.flow_bps)
                 + f" Mbit/s; {r.verdict}")
    res.summary(text, Summary(NAME, p, rows))
    return text


def run(lab_factory, algos, params: dict[str, Any], out: str) -> tuple[str, str]:
    p = with_defaults(DEFAULTS, params)
    if params.get("observe") is not None:
        p["duration"] = params["observe"]
    from ..lab.topology import Topology
    topo = Topology.loads(topology(p), "<txrate-vs-rxrate experiment>")
    res = Results(out, NAME)
    rows = []
    with lab_factory(topo) as lab, Engines(lab):
        rtt = base_rtt(lab, "h1", "r1")
        progress(NAME, f"lab up; base RTT {rtt * 1e6:.0f} us")
        loaded_rtt.setup(NAME, lab, p, [("h1", "r1"), ("h2", "r1")], "s1", "r1", 2)
        for variant in ("txRate", "rxRate"):
            progress(NAME, f"HPCC with {variant}: two flows into one port for "
                           f"{p['duration']:g} s")
            r = run_one(lab, variant, p)
            rows.append(r)
            progress(NAME, f"{variant}: queue sd {r.q_sd_kb:.1f} KB, "
                           f"p99 {r.q_p99_kb:.1f} KB")
            time.sleep(0.3)
    return report(res, rows, p, rtt), res.dir
