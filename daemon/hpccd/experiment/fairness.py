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
the per-bin indices); issue 8: HPCC >= 0.98.  Beside it the same over the
whole phase (``jain_whole``, ``jain_min_whole``): the join's convergence
included, as [HPCC] Figure 9g/9h plot it.
"""
from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

from . import kernel_cc, measure
from .algos import Algo
from .native import CONVERGES_FROM_FRAMES, send_time
from .common import dumbbell, open_flow, open_sink, run_in_lab, verdict_lines, with_defaults
from .report import Results, pyplot, table
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
    jain: float                         # median over the second half's bins; nan with one flow
    # the same over the whole phase, the convergence after a join included
    # ([HPCC] Figure 9g/9h plot the whole of each phase)
    jain_whole: float = math.nan


@dataclasses.dataclass(kw_only=True)
class FairnessRow(Row):
    """One algorithm's fairness run: every phase, and Jain's index and the
    bottleneck's use over them."""

    t0_ns: int
    line_bps: int                       # the bottleneck's rate
    phases: list[Phase]
    jain_min: float                     # over the phases of two flows or more
    jain_median: float
    jain_min_whole: float = math.nan    # jain_min over whole phases (Phase.jain_whole)
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
        rec = measure.QueueRecorder(lab, "s2", ports).start()
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
    jains, jains_whole = [], []
    for start, end, active in sched:
        mid = (start + end) // 2
        per = []
        for i in active:
            v = [r for t, r in rates[i] if mid <= t < end - bin_ns]
            per.append(sum(v) / len(v) if v else math.nan)
        idx, idx_whole = [], []
        if len(active) >= 2:
            for b in range(len(rates[0])):
                t = rates[0][b][0]
                if start <= t < end - bin_ns:
                    x = measure.jain(rates[i][b][1] for i in active)
                    idx_whole.append(x)
                    if t >= mid:
                        idx.append(x)

        def med(xs):
            xs = [x for x in xs if not math.isnan(x)]
            return measure.percentile(xs, 50) if xs else math.nan
        j, jw = med(idx), med(idx_whole)
        if len(active) >= 2:
            jains.append(j)
            jains_whole.append(jw)
        rows.append(Phase(flows=len(active), active=[f"flow{i + 1}" for i in active],
                          rates_bps=per, sum_bps=sum(x for x in per if not math.isnan(x)),
                          jain=j, jain_whole=jw))
    kp = kernel_cc.pacing(lab, algo, t0, sched[-1][1], line)
    verdict = measure.bottleneck_verdict(bottleneck, line, busy, t0, sched[-1][1],
                                         busiest_cpu=cpu.busiest, paced=kp)
    # the bottleneck's queue over time ([HPCC] Figure 14b: its distribution)
    q = [b for _, b in measure.queue_over_time(bottleneck, line, t0, sched[-1][1])]
    return FairnessRow(
        algo=algo.name, t0_ns=t0, line_bps=line, phases=rows,
        jain_min=min(jains) if jains else math.nan,
        jain_median=measure.percentile(jains, 50),
        jain_min_whole=min(jains_whole) if jains_whole else math.nan,
        utilisation=measure.percentile([r.sum_bps / line for r in rows], 50),
        util_min=min(r.sum_bps / line for r in rows),
        q_p95_kb=measure.percentile(q, 95) / 1e3 if q else math.nan,
        q_p99_kb=measure.percentile(q, 99) / 1e3 if q else math.nan,
        cpu_busy=busy, queue_bound=verdict.queue_bound, verdict=verdict.text,
        rates=rates).send_time({**send_time(flows, lab.native), **kernel_cc.row_figures(kp)})


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
            + (f" (Jain {ph.jain:.3f}, whole phase {ph.jain_whole:.3f})" if ph.flows > 1
               else "")
            for ph in r.phases)
        if not math.isnan(r.jain_min_whole):
            text += (f"\n{r.algo}: least phase's Jain {r.jain_min:.3f} over the phases' second "
                     f"halves, {r.jain_min_whole:.3f} over whole phases (joins included)")
        text += f"\n{r.algo}: {r.verdict}"
    text += bxt_note(rows, p)
    text += verdict_lines([], skipped, hpcc_text=p["hpcc_text"])
    res.summary(text, Summary(NAME, p, rows, skipped))
    return text


def bxt_note(rows: list[FairnessRow], p: dict[str, Any]) -> str:
    """The line that says whether the bottleneck's B x T lets HPCC converge at
    all, for the HPCC rows' verdicts to cite (empty without HPCC rows, or
    without the experiment's B x T)."""
    fr = p.get("bxt_frames")
    if not fr or not any(r.algo.startswith(("hpcc", "rx-hpcc", "tcp-hpcc")) for r in rows):
        return ""
    if fr >= CONVERGES_FROM_FRAMES:
        return (f"\nB x T {fr:g} frames: at {CONVERGES_FROM_FRAMES} or more HPCC converged "
                f"to Jain >= 0.98 with the rule of thumb's W_AI on the engine's code without "
                f"the hosts' CPUs")
    return (f"\nB x T {fr:g} frames, under the {CONVERGES_FROM_FRAMES} from which HPCC "
            f"converged to Jain >= 0.98 on the engine's code without the hosts' CPUs (a "
            f"queued frame is {1 / fr:.3f} of U here; at 17-35 frames the newest flow kept "
            f"the link, CPU or not, unless W_AI was raised to its floor: docs/experiments.md "
            f"\"Fairness and B x T\")")


def run(lab_factory, algos: list[Algo], params: dict[str, Any], out: str) -> tuple[str, str]:
    p = with_defaults(DEFAULTS, params)
    from ..lab.topology import Topology
    topo = Topology.loads(topology(p), "<fairness experiment>")
    res = Results(out, NAME)
    n = p["flows"]
    rows, skipped = run_in_lab(
        NAME, lab_factory, topo, algos, p, [(f"f{i}", f"r{i}") for i in range(1, n + 1)],
        "s1", "s2", lambda lab, a, rtt: run_one(lab, a, p),
        f"{n} flows joining and leaving every {p['step']:g} s",
        lambda r: f"Jain min {r.jain_min:.3f}")
    return report(res, rows, skipped, p), res.dir
