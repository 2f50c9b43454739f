"""Reads the harness's ``fairness`` trace (tests/unit/engine/harness.c):
flows joining one a step and leaving in reverse order through one switch
port, as the lab's experiment/fairness.py runs them ([HPCC] section 5.2,
Figure 9g/9h), on the engine's own code and a simulated clock.

Per phase (the flows active) it gives Jain's index of the flows' rates
per ``rate_bin_ns`` (the lab's 10 ms bins) over the whole phase and over
its second half (what the lab's experiment reports), and how long after
the phase's start Jain's index of the windows W first reached 0.98 and
stayed there to the phase's end (``converged_ns``; None: never).  Also
the rule of thumb's prediction for it (``predicted_updates``).

The one reader of the trace: the protocol tests and
scripts/harness_fairness.py use it.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

TARGET = 0.98          # issue 15: Jain >= 0.98 in every phase of two or more flows


def jain(xs) -> float:
    xs = list(xs)
    s2 = sum(x * x for x in xs)
    return (sum(xs) ** 2) / (len(xs) * s2) if xs and s2 > 0 else math.nan


@dataclass
class PhaseFairness:
    flows: int
    joined: bool                   # the phase began with a join (else a leave)
    start_ns: int
    end_ns: int
    rates_bps: list[float]         # each active flow's over the phase's second half
    jain_whole: float              # median over the phase's rate bins
    jain_second_half: float        # median over the second half's bins (the lab's)
    jain_min_bin: float            # least bin of the whole phase
    converged_ns: int | None       # Jain(W) >= TARGET from then to the phase's end
    updates_to_converge: float | None   # W^c updates of the newest flow meanwhile


def phases(res: dict) -> list[tuple[int, int, list[int]]]:
    """[(start ns, end ns, active flow indices)] of the trace's schedule."""
    n = len(res["bins"][0][1])
    step = res["step_ns"]
    return [(k * step, (k + 1) * step, [i for i in range(n) if i <= k < 2 * n - 1 - i])
            for k in range(2 * n - 1)]


def analyse(res: dict, rate_bin_ns: int = 10_000_000) -> list[PhaseFairness]:
    bins = res["bins"]
    bin_ns = res["bin_ns"]
    per = max(1, rate_bin_ns // bin_ns)
    out = []
    for start, end, active in phases(res):
        rows = [b for b in bins if start < b[0] <= end]
        # rates per rate bin: bytes acknowledged over `per` trace bins
        rate_bins = []
        for j in range(0, len(rows) - per + 1, per):
            a, b = rows[j], rows[j + per - 1]
            prev = rows[j - 1] if j else None
            if prev is None:
                continue                     # the join's own bin has no base
            t = b[0] - prev[0]
            rate_bins.append((prev[0], [(b[1][i] - prev[1][i]) * 8e9 / t for i in active]))
        mid = (start + end) // 2
        whole = [jain(r) for _, r in rate_bins]
        second = [jain(r) for t, r in rate_bins if t >= mid]
        half = [r for t, r in rate_bins if t >= mid]
        rates = [statistics.fmean(r[i] for r in half) for i in range(len(active))] if half \
            else [math.nan] * len(active)
        conv, upd = None, None
        if len(active) >= 2:
            ok_from = None
            for b in rows:
                if jain(b[2][i] for i in active) >= TARGET:
                    ok_from = b[0] if ok_from is None else ok_from
                else:
                    ok_from = None
            if ok_from is not None:
                conv = ok_from - start
                newest = max(active)
                first = next(b for b in rows)
                at = next(b for b in rows if b[0] == ok_from)
                upd = at[4][newest] - first[4][newest]
        k = phases(res).index((start, end, active))
        out.append(PhaseFairness(
            flows=len(active), joined=k < len(res["bins"][0][1]), start_ns=start, end_ns=end,
            rates_bps=rates,
            jain_whole=statistics.median(whole) if len(active) >= 2 and whole else math.nan,
            jain_second_half=statistics.median(second) if len(active) >= 2 and second
            else math.nan,
            jain_min_bin=min(whole) if len(active) >= 2 and whole else math.nan,
            converged_ns=conv, updates_to_converge=upd))
    return out


def predicted_updates(n: int, eta: float, N: int) -> float:
    """W^c updates [HPCC] Algorithm 1 needs to bring n flows to Jain TARGET
    after the n-th joins, by the rule of thumb's arithmetic.

    Before the join n - 1 flows share eta B T evenly; the new flow starts at
    W_init = B T ([HPCC] section 3.2).  One multiplicative decrease by
    eta / U (U = (1 + eta) B T / (B T)) keeps their ratio r = (n - 1) / eta.
    From then on each update adds W_AI = B T (1 - eta) / N to every flow
    and the multiplicative part takes the sum back to eta B T, so every
    flow's distance from the mean shrinks by the factor
    f = 1 - n W_AI / (eta B T) = 1 - n (1 - eta) / (eta N) per update.
    Jain = 1 / (1 + mean(x^2)) with x the flows' relative distances from
    the mean."""
    r = (n - 1) / eta
    m = (n - 1 + r) / n
    x2 = (((r / m) - 1) ** 2 + (n - 1) * ((1 / m) - 1) ** 2) / n
    want = 1 / TARGET - 1
    if x2 <= want:
        return 0.0
    f = 1 - n * (1 - eta) / (eta * N)
    return math.log(math.sqrt(want / x2)) / math.log(f)
