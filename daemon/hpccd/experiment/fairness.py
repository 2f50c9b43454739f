"""``fairness``: four flows join one bottleneck one by one and leave one by
one ([HPCC] section 5.2, Figure 9g/9h: one flow a second).

Embedded topology (common.dumbbell): ``f1``..``f4`` -> ``r1``..``r4``
over the s1 -> s2 link; each receiver has its own port of s2, whose
sampler's byte counter gives each flow's throughput (switch clock, 100 us
grain).  Flow i starts at (i - 1) x ``step`` and stops at
(2 x flows - i) x ``step`` seconds: 1, 2, 3, 4 flows, then 3, 2, 1.

Reported: per phase (number of flows active) each flow's mean rate, and
Jain's fairness index over the converged part of every phase with two or
more flows (the phase's second half, in ``bin_ms`` bins: the median of
the per-bin indices); issue 8: HPCC >= 0.98.
"""
from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

from . import measure
from .algos import Algo
from .kernel_cc import KernelCc
from .native import Engines, send_time
from . import loaded_rtt
from .common import (base_rtt, dumbbell, open_flow, open_sink, run_each, verdict_lines,
                     with_defaults)
from .report import Results, progress, pyplot, table
from .results import Row, Summary, private

NAME = "fairness"
PORT = 5201
DEFAULTS = {"flows": 4, "step": 1.0, "rate_mbps": 1000, "buffer_bytes": 1_000_000,
            "k_bytes": 30_000, "bin_ms": 10}


def topology(p: dict[str, Any]) -> str:
    n = p["flows"]
    return dumbbell("xfair", "10.123.0.0/16", [f"f{i}" for i in range(1, n + 1)],
                    [f"r{i}" for i in range(1, n + 1)], p["rate_mbps"], p["buffer_bytes"],
                    p["k_bytes"])


def phases(n: int, step_ns: int, t0: int) -> list[tuple[int, int, list[int]]]:
    """[(start, end, active flow indices)] of the join-then-leave schedule."""
    out = []
    for k in range(2 * n - 1):
        active = [i for i in range(n) if i <= k and k < 2 * n - 1 - i]
        out.append((t0 + k * step_ns, t0 + (k + 1) * step_ns, active))
    return out


@dataclasses.dataclass
class Phase:
    """One phase of the join-then-leave schedule: the flows active in it,
    each one's rate (over the phase's second half) and Jain's index."""

    flows: int
    active: list[str]                   # flow names
    rates_bps: list[float]
    sum_bps: float
    jain: float                         # median over the bins; nan with one flow


@dataclasses.dataclass(kw_only=True)
class FairnessRow(Row):
    """One algorithm's fairness run: every phase, and Jain's index and the
    bottleneck's use over them."""

    t0_ns: int
    line_bps: int                       # the bottleneck's rate
    phases: list[Phase]
    jain_min: float                     # over the phases of two flows or more
    jain_median: float
    utilisation: float                  # median phase's share of the link
    util_min: float                     # least phase's
    q_p95_kb: float                     # the bottleneck's queue, time-weighted
    q_p99_kb: float
    rates: list = private()             # per flow, [(bin start ns, bit/s)] at s2


def run_one(lab, algo: Algo, p: dict[str, Any]) -> FairnessRow:
    n, step_ns = p["flows"], int(p["step"] * 1e9)
    s2 = lab.topology.switches["s2"]
    ports = [s2.port_to(f"r{i}") for i in range(1, n + 1)]
    p_b = lab.topology.switches["s1"].port_to("s2")
    line = lab.topology.switches["s1"].port(p_b).rate_bps
    sinks = [open_sink(lab, algo, f"r{i}", PORT) for i in range(1, n + 1)]
    flows = []
    try:
        flows = [open_flow(lab, algo, f"f{i}", f"r{i}", PORT, sinks[i - 1], f"flow{i}")
                 for i in range(1, n + 1)]
        rec = measure.QueueRecorder(lab, "s2", None).start()
        rec_b = measure.QueueRecorder(lab, "s1", p_b).start()
        cpu = measure.CpuMeter().start()
        t0 = time.monotonic_ns()
        sched = phases(n, step_ns, t0)
        for k in range(2 * n - 1):
            _sleep_until(sched[k][0])
            if k < n:
                flows[k].start()
            else:
                leaving = 2 * n - 1 - k          # flow index that leaves now
                flows[leaving].stop()
        _sleep_until(sched[-1][1])
        flows[0].stop()
        for f in flows:
            f.join()
        busy = cpu.stop()
        samples = rec.stop()
        bottleneck = rec_b.stop()
    finally:
        for f in flows:
            f.close()
        for s in sinks:
            s.close()
    bin_ns = p["bin_ms"] * 1_000_000
    rates = [measure.port_rate([s for s in samples if s.port == pt], t0, sched[-1][1], bin_ns)
             for pt in ports]
    rows = []
    jains = []
    for start, end, active in sched:
        mid = (start + end) // 2
        per = []
        for i in active:
            v = [r for t, r in rates[i] if mid <= t < end - bin_ns]
            per.append(sum(v) / len(v) if v else math.nan)
        idx = []
        if len(active) >= 2:
            for b in range(len(rates[0])):
                t = rates[0][b][0]
                if mid <= t < end - bin_ns:
                    idx.append(measure.jain(rates[i][b][1] for i in active))
        j = measure.percentile([x for x in idx if not math.isnan(x)], 50) if idx else math.nan
        if len(active) >= 2:
            jains.append(j)
        rows.append(Phase(flows=len(active), active=[f"flow{i + 1}" for i in active],
                          rates_bps=per, sum_bps=sum(x for x in per if not math.isnan(x)),
                          jain=j))
    verdict = measure.bottleneck_verdict(bottleneck, line, busy, t0, sched[-1][1],
                                         busiest_cpu=cpu.busiest)
    # the bottleneck's queue over time ([HPCC] Figure 14b: its distribution)
    q = [b for _, b in measure.queue_over_time(bottleneck, line, t0, sched[-1][1])]
    return FairnessRow(
        algo=algo.name, t0_ns=t0, line_bps=line, phases=rows,
        jain_min=min(jains) if jains else math.nan,
        jain_median=measure.percentile(jains, 50),
        utilisation=measure.percentile([r.sum_bps / line for r in rows], 50),
        util_min=min(r.sum_bps / line for r in rows),
        q_p95_kb=measure.percentile(q, 95) / 1e3 if q else math.nan,
        q_p99_kb=measure.percentile(q, 99) / 1e3 if q else math.nan,
        cpu_busy=busy, queue_bound=verdict.queue_bound, verdict=verdict.text,
        rates=rates).send_time(send_time(flows, lab.native))


def _sleep_until(t_ns: int) -> None:
    d = (t_ns - time.monotonic_ns()) / 1e9
    if d > 0:
        time.sleep(d)


ROW = FairnessRow         # what Summary.rows reads its summary's rows back as

COLUMNS = [("algo", "algo"), ("jain_min", "Jain min (phases of >= 2)"),
           ("jain_median", "Jain median"), ("utilisation", "bottleneck use (median phase)"),
           ("util_min", "(least phase)"), ("q_p95_kb", "q p95 KB"), ("q_p99_kb", "q p99 KB"),
           ("wnd_limited", "wnd-limited"), ("pace_lost", "pace lost"),
           ("timer_late_us", "timer late us"), ("cpu_busy", "CPU busy"), ("queue_bound", "link-bound")]


def report(res: Results, rows: list[FairnessRow], skipped: dict[str, str],
           p: dict[str, Any]) -> str:
    plt = pyplot()
    fig, axes = plt.subplots(len(rows) or 1, 1, figsize=(8, 2.6 * max(1, len(rows))),
                             sharex=True, squeeze=False)
    for ax, r in zip(axes[:, 0], rows):
        rates, t0 = r.rates, r.t0_ns
        header = ["t_s"] + [f"flow{i + 1}_bps" for i in range(len(rates))]
        res.csv(f"rates_{r.algo}.csv", header,
                [[(rates[0][b][0] - t0) / 1e9] + [fr[b][1] for fr in rates]
                 for b in range(len(rates[0]))])
        for i, fr in enumerate(rates):
            ax.plot([(t - t0) / 1e9 for t, _ in fr], [b / 1e6 for _, b in fr],
                    label=f"flow{i + 1}", lw=0.8)
        ax.set_ylabel(f"{r.algo}\nMbit/s")
        ax.legend(fontsize=7, ncol=4, loc="upper right")
    axes[-1, 0].set_xlabel("s")
    fig.suptitle(f"{p['flows']} flows joining and leaving every {p['step']:g} s, "
                 f"{p['rate_mbps']} Mbit/s ({p['bin_ms']} ms bins)")
    res.figure("fairness.png", fig)
    text = table(rows, COLUMNS)
    for r in rows:
        text += f"\n{r.algo} per phase: " + "; ".join(
            f"{ph.flows} flow{'s' if ph.flows > 1 else ''}: "
            + "/".join(f"{x / 1e6:.0f}" for x in ph.rates_bps) + " Mbit/s"
            + (f" (Jain {ph.jain:.3f})" if ph.flows > 1 else "")
            for ph in r.phases)
        text += f"\n{r.algo}: {r.verdict}"
    text += verdict_lines([], skipped, hpcc_text=p["hpcc_text"])
    res.summary(text, Summary(NAME, p, rows, skipped))
    return text


def run(lab_factory, algos: list[Algo], params: dict[str, Any], out: str) -> tuple[str, str]:
    p = with_defaults(DEFAULTS, params)
    from ..lab.topology import Topology
    topo = Topology.loads(topology(p), "<fairness experiment>")
    res = Results(out, NAME)
    rows, skipped = [], {}
    with lab_factory(topo) as lab, Engines(lab), KernelCc(lab) as kcc:
        rtt = base_rtt(lab, "f1", "r1")
        progress(NAME, f"lab up; base RTT {rtt * 1e6:.0f} us")
        n = p["flows"]
        loaded_rtt.setup(NAME, lab, p, [(f"f{i}", f"r{i}") for i in range(1, n + 1)], "s1",
                         "s2", n)
        rows, skipped = run_each(
            NAME, algos, kcc, [f"f{i}" for i in range(1, n + 1)],
            [f"r{i}" for i in range(1, n + 1)], lambda a: run_one(lab, a, p),
            f"{n} flows joining and leaving every {p['step']:g} s",
            lambda r: f"Jain min {r.jain_min:.3f}")
    return report(res, rows, skipped, p), res.dir
