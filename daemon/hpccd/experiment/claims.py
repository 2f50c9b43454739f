"""The report of ``hpccctl reproduce`` (reproduce.py): each claim of [HPCC]
section 5 (and 3.4's txRate) in a line, the paper's figure, the lab's
figure computed from the stages' summaries beside it, and a verdict.

A verdict is ``met``, ``missed by X`` with the measured reason (the HPCC
row's own bottleneck verdict -- CPU-bound or not, the link's use -- and the
stage's load average: on two shared cores the lab's figures are often the
hosts', and the report says so), or ``not run`` when its stage did not
finish (interrupted, failed, not selected) or lacks the row it needs (an
algorithm not in --algos).  The thresholds are the claims' own words made
numbers ("within a few RTTs": 3 base RTTs; "near-zero queue": at most one
BDP; "close to the base RTT": mice p99 at most 1.5 x the idle p50; "good
fairness": Jain >= 0.98), the same as issue 8's targets; comparisons
("lower than DCQCN's") need no threshold.

The claims read the summaries' rows typed, as the experiment that wrote
them defines them (its ROW; results.load_row), through Stages.

The markdown report around these lines is results_report.py.
"""
from __future__ import annotations

import math
import os
from typing import Any, Callable, NamedTuple

from . import ROWS
from .fct import Bucket, FctRow
from .mice import MiceRow
from .recovery import RecoveryRow
from .results import RowError, Summary, load_row

__all__ = ["CLAIMS", "Claim", "Stages", "evaluate"]


class Outcome(NamedTuple):
    lab: str            # the lab's figure, in words and numbers
    verdict: str        # "met", "missed by ...: because ...", "not run: ..."


class Claim(NamedTuple):
    where: str          # "[HPCC] section 5.2, Figure 9c/9d"
    text: str           # the claim, in a line
    paper: str          # the paper's own figure
    stage: str          # the reproduce stage it needs
    judge: Callable[["Stages"], Outcome]


class Missing(Exception):
    """A figure a claim needs is not in the results (its reason)."""


def _never(v: Any) -> float:
    """A time that is null in a summary.json: "never" (the summaries write
    infinity as null)."""
    return math.inf if v is None else _num(v)


def _num(v: Any) -> float:
    """A figure of a summary: a number, or the median of an aggregate."""
    if isinstance(v, dict) and "median" in v:
        v = v["median"]
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)):
        return math.nan
    return float(v)


def _name(r: Any) -> Any:
    """A row's name: its algorithm, or its variant (txrate's rows have no algorithm)."""
    algo = getattr(r, "algo", None)
    return algo if algo is not None else getattr(r, "variant", None)


class Stages:
    """The finished stages' summaries, by stage key: each stage's document
    (its params, skipped algorithms, ...) and its rows typed by the stage's
    experiment (results.load_row): a summary's "results", or a sweep's
    points (param, value, rows).  `paths`: the file each document was read
    from, named in the error that refuses a row with a key its type lacks
    (the stage is then "unreadable" with that one line, as a file that is
    not JSON is); a reps.json's or sweep.json's rows are reps' aggregates."""

    def __init__(self, manifest: dict[str, Any], docs: dict[str, dict[str, Any]],
                 paths: dict[str, str] | None = None):
        from .reproduce import FULL
        exps = {st.key: st.exp for st in FULL}
        self.manifest = manifest
        self.entries = {s["key"]: s for s in manifest.get("stages", [])}
        self.docs: dict[str, dict[str, Any]] = {}
        self.rows: dict[str, list[Any]] = {}
        self.points: dict[str, list[tuple[str, float, list[Any]]]] = {}
        for key, doc in docs.items():
            where = (paths or {}).get(key) or f"stage {key}'s summary.json"
            row, agg = ROWS[exps[key]], os.path.basename(where) in ("reps.json", "sweep.json")
            try:
                summary = Summary.from_json(doc)
                summary.source = where
                self.rows[key] = summary.rows(row, agg)
                self.points[key] = [(p.get("param"), p.get("value"),
                                     [load_row(row, r, where, True)
                                      for r in p.get("results") or []])
                                    for p in doc.get("points") or []]
            except RowError as e:
                entry = self.entries.setdefault(key, {"key": key})
                entry["status"], entry["error"] = "unreadable", str(e)
                continue
            self.docs[key] = doc
        self.used: list[tuple[str, Any]] = []     # rows a claim read

    def doc(self, key: str) -> dict[str, Any]:
        if key not in self.docs:
            e = self.entries.get(key)
            raise Missing(f"stage {key} " + (f"{e['status']}" + (f": {e['error']}"
                                                                 if e.get("error") else "")
                                             if e else "not run"))
        return self.docs[key]

    def results(self, key: str) -> list[Any]:
        """The typed rows of stage `key`'s summary (Missing when it did not finish)."""
        self.doc(key)
        return self.rows[key]

    def row(self, key: str, algo: str, **match) -> Any:
        for r in self.results(key):
            if _name(r) == algo and all(getattr(r, k, None) == v for k, v in match.items()):
                self.used.append((key, r))
                return r
        skipped = (self.doc(key).get("skipped") or {}).get(algo)
        more = "".join(f" {k}={v}" for k, v in match.items())
        raise Missing(f"no {algo}{more} row in stage {key}" +
                      (f" (skipped: {skipped})" if skipped else " (not in --algos)"))

    def load(self, key: str) -> str:
        e = self.entries.get(key) or {}
        la = e.get("load_before"), e.get("load_after")
        if not all(la):
            return ""
        return f"load average {la[0][0]:.1f} -> {la[1][0]:.1f} on {self.manifest.get('cpus')} CPUs"

    def why(self, key: str, row: Any) -> str:
        """The measured context of a miss: the row's bottleneck verdict, the load."""
        v = getattr(row, "verdict", None)
        if not v:
            return self.load(key)
        return f"{_name(row)}: {v}; {self.load(key)}".strip("; ")


def _fmt(x: float, unit: str = "", nd: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if isinstance(x, float) and math.isinf(x):
        return "never"
    s = f"{x:.{nd}g}" if abs(x) < 10 ** nd else f"{x:.0f}"
    return s + (f" {unit}" if unit else "")


def _at_most(x: float, bound: float, what: str, why: str) -> str:
    if math.isnan(x):
        return f"not measured: {what} missing"
    if x <= bound:
        return "met"
    by = "never reached" if math.isinf(x) else f"{x / bound:.3g}x the bound" if bound else \
        f"{_fmt(x)}"
    return f"missed by {by} because {why}"


def _less(a: float, b: float, a_name: str, b_name: str, why: str,
          fmt: Callable[[float], str] = _fmt) -> str:
    if math.isnan(a) or math.isnan(b):
        return f"not measured: {a_name if math.isnan(a) else b_name} missing"
    if a < b:
        return "met"
    return f"missed: {a_name} {fmt(a)} is not below {b_name} {fmt(b)} because {why}"


def _kb(x: float) -> str:
    return _fmt(x / 1e3, "KB")


def _ms(x: float) -> str:
    return _fmt(x * 1e3, "ms")


# ---- the claims -----------------------------------------------------------------------

RTTS_FEW = 3          # "within a few RTTs", "right after", "after just one round trip"
NEAR_ZERO_BDP = 1.0   # "near-zero queue": at most one BDP
MICE_X = 1.5          # "close to the base RTT": p99 at most 1.5 x the idle p50
JAIN_GOOD = 0.98      # "good fairness even in a short time scale" (10 ms bins)
FRAME = 1514          # one full frame: a queue that holds no more is empty


def _incast_queue(s: Stages) -> Outcome:
    r = s.row("incast", "hpcc")
    x = _num(r.q_p99_bdp)
    lab = (f"HPCC queue p99 {_fmt(_num(r.q_p99) / 1e3, 'KB')} = {_fmt(x)} BDP "
           f"(BDP {_fmt(_num(r.bdp_bytes) / 1e3, 'KB')}), max "
           f"{_fmt(_num(r.q_max) / 1e3, 'KB')}")
    return Outcome(lab, _at_most(x, NEAR_ZERO_BDP, "queue p99", s.why("incast", r)))


def _incast_drain(s: Stages) -> Outcome:
    """[HPCC] Figure 9d: the queue drains a round trip after HPCC sees it.
    Read from the queue's peak (the incast's start in the paper's figure): the
    lab's largest backlog may come tens of ms into the incast, and the time
    from the start until it drained counts that wait (incast.py)."""
    r = s.row("incast", "hpcc")
    p = s.doc("incast").get("params") or {}
    x = _never(r.drain_peak_rtts)
    rtt, link = _num(r.base_rtt_s), _num(r.link_bps)
    q_max, loaded = _num(r.q_max), _num(p.get("loaded_rtt_us")) * 1e-6
    T = _num(p.get("T_us")) * 1e-6
    peak_ms = _num(r.peak_s) * 1e3
    lab = f"HPCC's queue drained {_fmt(x)} base RTTs"
    if math.isfinite(x) and T > 0:
        lab += f" ({_fmt(x * rtt / T)} T)"
    lab += f" after its peak of {_fmt(q_max / 1e3, 'KB')}"
    if not math.isnan(peak_ms):
        lab += f", {_fmt(peak_ms, 'ms')} into the incast"
    lab += (f" ({_fmt(_never(r.drain_rtts))} RTTs from the incast's start); longest "
            f"backlog {_fmt(_num(r.backlog_longest_rtts))} RTTs; incast FCT max "
            f"{_fmt(_num(r.fct_max_s) * 1e3, 'ms')}")
    why = ""
    if loaded > 0 and rtt > 0 and link > 0 and not math.isnan(q_max):
        # no sender learns of a queue before one round trip of the lab's
        # loaded RTT, and none drains faster than the line rate
        floor = (loaded + q_max * 8 / link) / rtt
        why = (f"a backlog lasts at least one loaded round trip ({_fmt(loaded * 1e6, 'us')}) "
               f"plus its transmission at line rate: {_fmt(floor)} base RTTs for this peak; ")
    return Outcome(lab, _at_most(x, RTTS_FEW, "drain time", why + s.why("incast", r)))


def _incast_vs_dcqcn(s: Stages) -> Outcome:
    h, d = s.row("incast", "hpcc"), s.row("incast", "dcqcn")
    a, b = _num(h.q_max), _num(d.q_max)
    lab = f"queue max HPCC {_fmt(a / 1e3, 'KB')}, DCQCN {_fmt(b / 1e3, 'KB')}"
    return Outcome(lab, _less(a, b, "HPCC", "DCQCN", s.why("incast", d), _kb))


def _ls_recovery(s: Stages) -> Outcome:
    """[HPCC] Figure 9a: the long flow back at line rate right after the
    short flow.  A miss says what held it, measured (longshort.py): its
    own rate before the short flow (the hosts' ceiling when below 90 % of
    the line rate) and how long HPCC's window W took to come back."""
    r = s.row("long-short", "hpcc")
    x = _never(r.recovery_rtts)
    lab = (f"HPCC's long flow back at 90 % of line rate {_fmt(_never(r.recovery_s) * 1e3, 'ms')}"
           f" = {_fmt(x)} RTTs after the short flow ended")
    why = []
    before, line = _num(r.long_before_bps), _num(r.line_bps)
    if before > 0 and line > 0:
        why.append(f"alone before the short flow the long flow ran at "
                   f"{_fmt(before / 1e6, 'Mbit/s')} ({before / line:.0%} of line rate), back at "
                   f"90 % of that in {_fmt(_never(r.recovery_own_rtts))} RTTs")
    st = _num(r.srtt_T)
    if st > 1:
        why.append(f"its smoothed RTT alone was {_fmt(st)} T, so its window cap B x T let it "
                   f"deliver at most {1 / st:.0%} of line rate")
    elif st > 0:
        why.append(f"its smoothed RTT alone was {_fmt(st)} T: the window cap B x T did not "
                   f"hold it back")
    # w_low null: no window read (a kernel flow); w_back null: never back
    if not math.isnan(_num(r.w_low)):
        why.append(f"its window fell to {_fmt(_num(r.w_low))} of its level before and was "
                   f"back at 90 % {_fmt(_never(r.w_back_rtts))} RTTs "
                   f"({_fmt(_never(r.w_back_updates))} W^c updates) after the short flow "
                   f"ended")
    why.append(s.why("long-short", r))
    return Outcome(lab, _at_most(x, RTTS_FEW, "recovery", "; ".join(w for w in why if w)))


def _ls_vs_dcqcn(s: Stages) -> Outcome:
    h, d = s.row("long-short", "hpcc"), s.row("long-short", "dcqcn")
    a, b = _never(h.recovery_s), _never(d.recovery_s)
    lab = f"recovery HPCC {_fmt(a * 1e3, 'ms')}, DCQCN {_fmt(b * 1e3, 'ms')}"
    return Outcome(lab, _less(a, b, "HPCC", "DCQCN", s.why("long-short", h), _ms))


def _mice_bdp(r: MiceRow) -> float:
    return _num(r.link_bps) / 8 * _num(r.idle_p50_us) / 1e6


def _mice_queue(s: Stages) -> Outcome:
    r = s.row("mice", "hpcc")
    bdp = _mice_bdp(r)
    q = _num(r.q_p99)
    lab = (f"HPCC queue p50 {_fmt(_num(r.q_p50) / 1e3, 'KB')}, p99 {_fmt(q / 1e3, 'KB')}"
           f" = {_fmt(q / bdp)} BDP (BDP {_fmt(bdp / 1e3, 'KB')} at the idle mouse RTT)")
    return Outcome(lab, _at_most(q / bdp, NEAR_ZERO_BDP, "queue", s.why("mice", r)))


def _mice_latency(s: Stages) -> Outcome:
    r = s.row("mice", "hpcc")
    x = _num(r.p99_over_idle)
    lab = (f"HPCC mice p50 {_fmt(_num(r.rtt_p50_us), 'us')}, p99 "
           f"{_fmt(_num(r.rtt_p99_us), 'us')} = {_fmt(x)} x the idle p50 "
           f"{_fmt(_num(r.idle_p50_us), 'us')}")
    q = _num(r.q_p99)
    why = (f"the queue p99 was {_fmt(q / 1e3, 'KB')}, "
           + ("so the time is the hosts' scheduling of sender, switch and receiver on shared "
              "cores, not queueing; " if q <= NEAR_ZERO_BDP * _mice_bdp(r) else "")
           + s.why("mice", r))
    return Outcome(lab, _at_most(x, MICE_X, "mice RTT", why))


def _mice_dcqcn(s: Stages) -> Outcome:
    h, d = s.row("mice", "hpcc"), s.row("mice", "dcqcn")
    a, b = _num(h.q_p50), _num(d.q_p50)
    lab = (f"queue p50 HPCC {_fmt(a / 1e3, 'KB')}, DCQCN {_fmt(b / 1e3, 'KB')}; mice p50 "
           f"HPCC {_fmt(_num(h.rtt_p50_us), 'us')}, DCQCN "
           f"{_fmt(_num(d.rtt_p50_us), 'us')}")
    if not math.isnan(a) and not math.isnan(b) and b > a and b > FRAME:
        return Outcome(lab, "met")
    return Outcome(lab, f"missed: DCQCN's median queue {_fmt(b / 1e3, 'KB')} is no standing "
                        f"queue above HPCC's because {s.why('mice', d)}")


def _mice_dctcp(s: Stages) -> Outcome:
    h, d = s.row("mice", "hpcc"), s.row("mice", "dctcp")
    a, b = _num(h.rtt_p99_us), _num(d.rtt_p99_us)
    lab = f"mice p99 HPCC {_fmt(a, 'us')}, DCTCP {_fmt(b, 'us')}: {_fmt(b / a)}x"
    if b / a >= 2:
        return Outcome(lab, "met")
    return Outcome(lab, f"missed by {_fmt(2 / (b / a))}x (DCTCP/HPCC {_fmt(b / a)} < 2) because "
                        f"{s.why('mice', h)}")


def _fairness(s: Stages) -> Outcome:
    """[HPCC] Figure 9g/9h.  A miss says the run's bottleneck verdict and,
    when the bottleneck's B x T was under CONVERGES_FROM_FRAMES, whether the
    engine's code converges there without the hosts' CPUs: not with the rule
    of thumb's W_AI, yes with W_AI at its floor (native.bxt_w_ai; the
    summary's params say which ran)."""
    from .native import CONVERGES_FROM_FRAMES

    r = s.row("fairness", "hpcc")
    x = _num(r.jain_min)
    lab = f"HPCC Jain min {_fmt(x)}, median {_fmt(_num(r.jain_median))} (10 ms bins)"
    if x >= JAIN_GOOD:
        return Outcome(lab, "met")
    why = []
    p = s.doc("fairness").get("params") or {}
    fr, rule = _num(p.get("bxt_frames")), _num(p.get("w_ai_floor_from"))
    if 0 < fr < CONVERGES_FROM_FRAMES:
        share = f"B x T was {_fmt(fr)} frames (a queued frame {1 / fr:.3f} of U)"
        if rule > 0:
            why.append(f"{share} and W_AI at its floor (the rule of thumb gave "
                       f"{_fmt(rule, 'bytes')}), with which the engine's code converged to "
                       f"Jain {JAIN_GOOD} at 17-52 frames without the hosts' CPUs "
                       f"(docs/experiments.md \"Fairness and B x T\"), so the hosts held it")
        else:
            why.append(f"{share}, under the {CONVERGES_FROM_FRAMES} from which HPCC converged "
                       f"to Jain {JAIN_GOOD} with the rule of thumb's W_AI on the engine's code "
                       f"without the hosts' CPUs (docs/experiments.md \"Fairness and B x T\")")
    why.append(s.why("fairness", r))
    return Outcome(lab, f"missed by {_fmt(JAIN_GOOD - x)} (Jain min below {JAIN_GOOD}) because "
                        + "; ".join(w for w in why if w))


def _fct_rows(s: Stages, key: str, algo: str, workload: str) -> list[FctRow]:
    rows = [r for r in s.results(key) if r.algo == algo and r.workload == workload]
    if not rows:
        raise Missing(f"no {algo} {workload} rows in stage {key}")
    s.used += [(key, r) for r in rows]
    return sorted(rows, key=lambda r: r.load)


# the bucket of a row without buckets: no figures
_NO_BUCKET = Bucket(**{f: None for f in Bucket.__dataclass_fields__})


def _bucket(r: FctRow, i: int = 0) -> Bucket:
    """Bucket `i` of an FctRow."""
    return (r.buckets or [_NO_BUCKET])[i]


MIN_FLOWS = 20        # a bucket's percentile needs this many flows to say anything


def _short_bucket(h: FctRow, d: FctRow) -> int | None:
    """The smallest size bucket with MIN_FLOWS completed flows in both rows."""
    for i, (a, b) in enumerate(zip(h.buckets or [], d.buckets or [])):
        if _num(a.n) >= MIN_FLOWS and _num(b.n) >= MIN_FLOWS:
            return i
    return None


def _fct_short(s: Stages, workload: str, q: str) -> tuple[str, list[bool], str]:
    parts, ok, why = [], [], ""
    for h in _fct_rows(s, "fct", "hpcc", workload):
        d = s.row("fct", "dcqcn", workload=workload, load=h.load)
        i = _short_bucket(h, d)
        if i is None:
            parts.append(f"{h.load:.0%}: no bucket of {MIN_FLOWS} flows")
            continue
        a, b = _num(getattr(_bucket(h, i), q)), _num(getattr(_bucket(d, i), q))
        parts.append(f"{h.load:.0%} ({_bucket(h, i).bucket}, {_bucket(h, i).n} "
                     f"flows): HPCC {_fmt(a)}, DCQCN {_fmt(b)}")
        ok.append(a < b if q != "p50" else (0.67 <= a / b <= 1.5))
        if not ok[-1]:
            why = s.why("fct", h)
    if not ok:
        raise Missing(f"no size bucket with {MIN_FLOWS} flows of both in stage fct "
                      f"({'; '.join(parts)})")
    return "; ".join(parts), ok, why


def _fct_tail(workload: str) -> Callable[[Stages], Outcome]:
    def judge(s: Stages) -> Outcome:
        lab, ok, why = _fct_short(s, workload, "p99")
        lab = f"{workload} p99 slowdown of the smallest bucket of {MIN_FLOWS}+ flows: {lab}"
        if all(ok):
            return Outcome(lab, "met")
        return Outcome(lab, f"missed at {ok.count(False)} of {len(ok)} loads because {why}")
    return judge


def _fct_median(s: Stages) -> Outcome:
    lab, ok, why = _fct_short(s, "websearch", "p50")
    lab = f"websearch p50 slowdown of the smallest bucket of {MIN_FLOWS}+ flows: {lab}"
    if all(ok):
        return Outcome(lab, "met (within 1.5x of each other)")
    return Outcome(lab, f"missed at {ok.count(False)} of {len(ok)} loads (more than 1.5x apart) "
                        f"because {why}")


def _fct_queue(s: Stages) -> Outcome:
    parts, bad = [], []
    for h in _fct_rows(s, "fct", "hpcc", "websearch"):
        d = s.row("fct", "dcqcn", workload="websearch", load=h.load)
        p50, p99, dp99 = _num(h.q_p50), _num(h.q_p99), _num(d.q_p99)
        parts.append(f"{h.load:.0%}: HPCC p50 {_fmt(p50 / 1e3, 'KB')} p95 "
                     f"{_fmt(_num(h.q_p95) / 1e3, 'KB')} p99 {_fmt(p99 / 1e3, 'KB')}, "
                     f"DCQCN p99 {_fmt(dp99 / 1e3, 'KB')}")
        if not (p50 <= FRAME and p99 < dp99):
            bad.append(h)
    lab = "websearch queue " + "; ".join(parts)
    if not bad:
        return Outcome(lab, "met")
    return Outcome(lab, f"missed at {len(bad)} of {len(parts)} loads because "
                        f"{s.why('fct', bad[0])}")


SHORT_BYTES = 120_000       # [HPCC] 5.3: "flows shorter than 120KB"


def _short_buckets(doc: dict[str, Any]) -> list[int]:
    """Indices of the buckets wholly below 120 KB (the labels' edges)."""
    labels = doc.get("buckets") or []
    params = doc.get("params") or {}
    from .workload import parse_buckets
    edges = parse_buckets(params.get("buckets"))
    return [i for i, e in enumerate(edges) if e <= SHORT_BYTES and i < len(labels)]


def _fct_incast(s: Stages) -> Outcome:
    doc = s.doc("fct-incast")
    idx = _short_buckets(doc)
    h = s.row("fct-incast", "hpcc")
    others = [r for r in s.results("fct-incast") if r.algo != "hpcc"]
    if not others:
        raise Missing("no other algorithm in stage fct-incast")
    worse = []
    parts = []
    for i in idx:
        a = _num(_bucket(h, i).p95)
        best = min(others, key=lambda r: _num(_bucket(r, i).p95))
        b = _num(_bucket(best, i).p95)
        parts.append(f"{_bucket(h, i).bucket}: HPCC {_fmt(a)}, best other "
                     f"{best.algo} {_fmt(b)}")
        if not a <= b:
            worse.append(_bucket(h, i).bucket)
    inc = h.incast
    lab = ("p95 slowdown, " + "; ".join(parts) +
           (f"; {inc.events} incasts of {inc.flows_each} x "
            f"{_fmt(_num(inc.size) / 1e3, 'KB')}" if inc is not None else ""))
    if not worse:
        return Outcome(lab, "met")
    return Outcome(lab, f"missed in {len(worse)} of {len(idx)} buckets ({', '.join(worse)}) "
                        f"because {s.why('fct-incast', h)}")


def _dctcp_vs_rate(s: Stages) -> Outcome:
    doc = s.doc("fct-incast")
    idx = _short_buckets(doc)
    d = s.row("fct-incast", "dctcp")
    parts, worse = [], []
    for name in ("dcqcn", "timely"):
        r = s.row("fct-incast", name)
        a = max(_num(_bucket(d, i).p95) for i in idx)
        b = max(_num(_bucket(r, i).p95) for i in idx)
        parts.append(f"DCTCP {_fmt(a)} vs {name.upper()} {_fmt(b)}")
        if not a < b:
            worse.append(name)
    lab = "worst p95 slowdown below 120 KB: " + "; ".join(parts)
    if not worse:
        return Outcome(lab, "met")
    return Outcome(lab, f"missed against {', '.join(worse)} because {s.why('fct-incast', d)}")


def _long_flows(s: Stages) -> Outcome:
    parts, ratios = [], []
    for h in _fct_rows(s, "fct", "hpcc", "fb_hadoop"):
        d = s.row("fct", "dctcp", workload="fb_hadoop", load=h.load)
        i = max((j for j, b in enumerate(h.buckets or []) if _num(b.n) > 0),
                default=None)
        if i is None:
            continue
        a, b = _num(_bucket(h, i).p50), _num(_bucket(d, i).p50)
        ratios.append((h.load, a / b, h))
        parts.append(f"{h.load:.0%} ({_bucket(h, i).bucket}): HPCC {_fmt(a)}, DCTCP "
                     f"{_fmt(b)}, {_fmt(a / b)}x")
    if not ratios:
        raise Missing("no long flows in stage fct")
    lab = "fb_hadoop p50 slowdown of the largest bucket: " + "; ".join(parts)
    load, x, h = ratios[-1]
    if 1.0 <= x <= 1.5:
        return Outcome(lab, "met")
    return Outcome(lab, f"missed: {_fmt(x)}x at {load:.0%} (not in 1-1.5x) because "
                        f"{s.why('fct', h)}")


def _reaction_rtt(s: Stages) -> Outcome:
    h, r = s.row("reaction", "hpcc"), s.row("reaction", "hpcc-rtt")
    a, b = _num(h.q_p99), _num(r.q_p99)
    lab = (f"queue p99 HPCC {_fmt(a / 1e3, 'KB')}, per-RTT {_fmt(b / 1e3, 'KB')}; drained "
           f"{_fmt(_never(h.drain_peak_rtts))} and {_fmt(_never(r.drain_peak_rtts))}"
           f" RTTs after the peak")
    return Outcome(lab, _less(a, b, "HPCC", "per-RTT", s.why("reaction", r), _kb))


def _reaction_ack(s: Stages) -> Outcome:
    h, r = s.row("reaction", "hpcc"), s.row("reaction", "hpcc-ack")
    a, b = _num(r.utilisation), _num(h.utilisation)
    lab = (f"bottleneck use HPCC {_fmt(b)}, per-ACK {_fmt(a)}; long flow during the incast "
           f"{_fmt(_num(h.long_during_bps) / 1e6, 'Mbit/s')} and "
           f"{_fmt(_num(r.long_during_bps) / 1e6, 'Mbit/s')}")
    return Outcome(lab, _less(a, b, "per-ACK", "HPCC", s.why("reaction", r)))


def _sweep_points(s: Stages) -> list[tuple[float, Any]]:
    s.doc("w-ai")
    pts = [(value, r) for param, value, rows in s.points["w-ai"] if param == "w_ai_bytes"
           for r in rows if r.algo == "hpcc"]
    if len(pts) < 2:
        raise Missing("fewer than two W_AI points with HPCC")
    return sorted(pts, key=lambda t: t[0])


def _w_ai_bound(s: Stages) -> float:
    """W_init (1 - eta) / N of the sweep's fairness runs ([HPCC] section 3.3)."""
    from .fairness import DEFAULTS
    from .native import T_NS
    p = {**DEFAULTS, **(s.doc("w-ai").get("params") or {}),
         **(s.entries.get("w-ai", {}).get("params") or {})}
    return p["rate_mbps"] * 1e6 / 8 * T_NS / 1e9 * (1 - 0.95) / p["flows"]


def _w_ai_fair(s: Stages) -> Outcome:
    pts = _sweep_points(s)
    bound = _w_ai_bound(s)
    inside = [(w, r) for w, r in pts if w <= bound]
    lab = ("HPCC Jain median by W_AI: " + ", ".join(f"{w:g} B {_fmt(_num(r.jain_median))}"
                                                    for w, r in pts)
           + f" (bound {bound:.0f} B)")
    if len(inside) < 2:
        raise Missing(f"fewer than two W_AI values within the bound {bound:.0f} B")
    a, b = _num(inside[0][1].jain_median), _num(inside[-1][1].jain_median)
    if b >= a:
        return Outcome(lab, "met")
    return Outcome(lab, f"missed: Jain {_fmt(b)} at {inside[-1][0]:g} B below {_fmt(a)} at "
                        f"{inside[0][0]:g} B because {s.load('w-ai')}")


def _w_ai_queue(s: Stages) -> Outcome:
    pts = _sweep_points(s)
    bound = _w_ai_bound(s)
    inside = [_num(r.q_p95_kb) for w, r in pts if w <= bound]
    above = [(w, r) for w, r in pts if w > bound]
    lab = ("HPCC queue p95 by W_AI: " + ", ".join(f"{w:g} B {_fmt(_num(r.q_p95_kb), 'KB')}"
                                                 for w, r in pts)
           + f" (bound {bound:.0f} B)")
    if not inside or not above:
        raise Missing(f"W_AI values on both sides of the bound {bound:.0f} B needed")
    hi = max(_num(r.q_p95_kb) for _, r in above)
    if hi > max(inside):
        return Outcome(lab, "met")
    w, r = above[-1]
    return Outcome(lab, f"missed: no larger queue above the bound because "
                        f"{s.why('w-ai', r)} (link use {_fmt(_num(r.utilisation))})")


def _txrate(s: Stages) -> Outcome:
    t, r = s.row("txrate", "txRate"), s.row("txrate", "rxRate")
    a, b = _num(t.use_sd_early), _num(r.use_sd_early)
    qa, qb = (_num(x.q_sd_kb if x.q_sd_kb is not None else
                   _num(x.q_sd_settled) / 1e3) for x in (t, r))
    lab = (f"link use sd (1 ms bins) while converging: txRate {_fmt(a)}, rxRate {_fmt(b)}; "
           f"settled {_fmt(_num(t.use_sd_settled))} and "
           f"{_fmt(_num(r.use_sd_settled))}; queue sd settled {_fmt(qa, 'KB')} and "
           f"{_fmt(qb, 'KB')}")
    if math.isnan(a) or math.isnan(b):
        return Outcome(lab, "not measured: no link use while converging")
    if b >= 1.25 * a:
        return Outcome(lab, f"met (rxRate's link use swings {_fmt(b / a)}x txRate's while the "
                            f"flows converge; 1.25x asked)")
    busy = _num(r.q_busy)
    return Outcome(lab, f"missed: rxRate's link use swings only {_fmt(b / a)}x txRate's (1.25x "
                        f"asked) because rxRate differs from txRate only while the queue grows, "
                        f"and it held more than a frame {_fmt(busy * 100, nd=2)} % of the time; "
                        f"{s.why('txrate', r)} (the engine's code on a simulated port shows the "
                        f"oscillation: scripts/txrate_sim.py)")


def _recovery_rows(s: Stages, algo: str) -> dict[tuple[str, float], RecoveryRow]:
    rows = {(r.recovery, r.loss): r for r in s.results("gbn-vs-sr")
            if r.algo == algo}
    if not rows:
        raise Missing(f"no {algo} rows in stage gbn-vs-sr")
    return rows


def _gbn_ratio(rows, loss: float) -> float:
    """Goodput with go-back-N over goodput with selective repeat."""
    g, r = rows.get(("gbn", loss)), rows.get(("sr", loss))
    return _num(g.goodput_bps) / _num(r.goodput_bps) if g and r else math.nan


def _gbn_hpcc(s: Stages) -> Outcome:
    rows = _recovery_rows(s, "hpcc")
    losses = sorted({ld for _, ld in rows})
    parts = [f"{ld:.1%}: {_fmt(_gbn_ratio(rows, ld))} (drops {rows[('sr', ld)].dropped} / "
             f"{rows[('gbn', ld)].dropped}, retransmitted {rows[('sr', ld)].retx_pkts} / "
             f"{rows[('gbn', ld)].retx_pkts})" for ld in losses
             if ("sr", ld) in rows and ("gbn", ld) in rows]
    lab = "HPCC goodput GBN / SR, drops and retransmissions SR / GBN: " + "; ".join(parts)
    x = _gbn_ratio(rows, 0.0)
    if math.isnan(x):
        raise Missing("no HPCC run without random loss in stage gbn-vs-sr")
    if x >= 0.9:
        return Outcome(lab, "met (GBN within 10 % of SR with the bottleneck's own drops; "
                            "random loss is beyond the paper's claim)")
    return Outcome(lab, f"missed: GBN {_fmt(x)}x SR's goodput without random loss because "
                        f"{s.load('gbn-vs-sr')}")


def _gbn_dcqcn(s: Stages) -> Outcome:
    h, d = _recovery_rows(s, "hpcc"), _recovery_rows(s, "dcqcn")
    a, b = _gbn_ratio(h, 0.0), _gbn_ratio(d, 0.0)
    lab = (f"without random loss, GBN / SR goodput HPCC {_fmt(a)}, DCQCN {_fmt(b)}; bottleneck "
           f"drops HPCC {getattr(h.get(('gbn', 0.0)), 'dropped', None)}, DCQCN "
           f"{getattr(d.get(('gbn', 0.0)), 'dropped', None)} (GBN runs)")
    return Outcome(lab, _less(b, a, "DCQCN's GBN/SR", "HPCC's",
                              "DCQCN's queue did not overflow the bottleneck buffer here; "
                              + s.load("gbn-vs-sr")))


CLAIMS: tuple[Claim, ...] = (
    Claim("[HPCC] 5.2, Fig. 9c/9d", "incast: HPCC absorbs an incast into a long flow with a near-zero queue",
          "queue stays low (DCQCN builds 550 KB)", "incast", _incast_queue),
    Claim("[HPCC] 5.2, Fig. 9c/9d", "incast resolved within a few RTTs: HPCC reacts after one "
          "round trip and the queue drains quickly", "about one RTT", "incast", _incast_drain),
    Claim("[HPCC] 5.2, Fig. 9c/9d", "DCQCN's queue builds up far higher than HPCC's in the "
          "incast", "DCQCN 550 KB", "incast", _incast_vs_dcqcn),
    Claim("[HPCC] 5.2, Fig. 9a/9b", "long-short: HPCC recovers the long flow's rate right after "
          "the short flow ends", "at once", "long-short", _ls_recovery),
    Claim("[HPCC] 5.2, Fig. 9a/9b", "long-short: DCQCN recovers more slowly than HPCC",
          "DCQCN below line rate after 2 ms (> 350 RTTs)", "long-short", _ls_vs_dcqcn),
    Claim("[HPCC] 5.2, Fig. 9e/9f", "HPCC keeps a near-zero queue with mice beside two "
          "elephants", "near-zero", "mice", _mice_queue),
    Claim("[HPCC] 5.2, Fig. 9e/9f", "HPCC's mice see base-RTT latency", "close to the 5.4 us "
          "base RTT", "mice", _mice_latency),
    Claim("[HPCC] 5.2, Fig. 9e/9f", "DCQCN keeps a standing queue (around its marking "
          "threshold) where HPCC keeps none", "DCQCN > 35 us latency", "mice", _mice_dcqcn),
    Claim("[HPCC] 5.3, Fig. 11b/11d", "HPCC reduces DCTCP's latency by more than 2 times",
          "> 2x", "mice", _mice_dctcp),
    Claim("[HPCC] 5.2, Fig. 9g/9h", "HPCC is fair even at a short time scale (flows joining "
          "and leaving)", "good fairness", "fairness", _fairness),
    Claim("[HPCC] 5.2, Fig. 10a/10c", "WebSearch: HPCC's p99 slowdown of the shortest flows is "
          "far below DCQCN's", "< 3 KB: 2.38 vs 11.2 at 30 %, 2.70 vs 53.9 at 50 %", "fct",
          _fct_tail("websearch")),
    Claim("[HPCC] 5.2", "FB_Hadoop shows the same trend", "similar trends", "fct",
          _fct_tail("fb_hadoop")),
    Claim("[HPCC] 5.2, Fig. 10a/10c", "HPCC and DCQCN have similar median slowdowns",
          "similar", "fct", _fct_median),
    Claim("[HPCC] 5.2, Fig. 10b/10d", "HPCC's queue: median 0 and ultra-low at the tail, "
          "DCQCN's far higher", "p95/p99 19.7/22.9 KB vs 1.1/2.1 MB at 50 %", "fct", _fct_queue),
    Claim("[HPCC] 5.3, Fig. 11a", "FB_Hadoop 30 % + incast: HPCC's p95 slowdown of flows under "
          "120 KB is the lowest of all algorithms", "much lower than all others",
          "fct-incast", _fct_incast),
    Claim("[HPCC] 5.3, Fig. 11a", "DCTCP outperforms DCQCN and TIMELY (its window limits the "
          "bytes in flight)", "DCTCP better", "fct-incast", _dctcp_vs_rate),
    Claim("[HPCC] 5.3", "long flows are slower with HPCC (5 % headroom, INT bytes)",
          "1.24x at 50 % load", "fct", _long_flows),
    Claim("[HPCC] 5.3, Fig. 12", "with HPCC, go-back-N and selective repeat perform alike",
          "flow control choices do not affect the performance", "gbn-vs-sr", _gbn_hpcc),
    Claim("[HPCC] 5.3, Fig. 12", "a better flow control (selective repeat) helps DCQCN more than "
          "HPCC", "DCQCN improves with a better one", "gbn-vs-sr", _gbn_dcqcn),
    Claim("[HPCC] 5.4, Fig. 13", "per-RTT reaction lets the queue persist longer than HPCC's "
          "reaction", "long queue persists", "reaction", _reaction_rtt),
    Claim("[HPCC] 5.4, Fig. 13", "per-ACK reaction overreacts: the throughput drops",
          "throughput drops to almost 0 and oscillates", "reaction", _reaction_ack),
    Claim("[HPCC] 5.4, Fig. 14a", "within the W_AI bound, a higher W_AI is fairer",
          "better fairness", "w-ai", _w_ai_fair),
    Claim("[HPCC] 5.4, Fig. 14b", "a W_AI above the bound grows the queue", "13 KB p95 at "
          "300 B against 4 KB within 150 B", "w-ai", _w_ai_queue),
    Claim("[HPCC] 3.4, Fig. 6", "rxRate oscillates, txRate converges gracefully",
          "rxRate oscillates before converging", "txrate", _txrate),
)


def evaluate(stages: Stages) -> list[dict[str, str]]:
    """Every claim's row: where, claim, paper, lab, verdict."""
    out = []
    for c in CLAIMS:
        stages.used = []
        try:
            o = c.judge(stages)
            # a claim met on a run whose link was not the bottleneck was not
            # stressed (an empty queue on a link the hosts could not fill)
            weak = [(k, r) for k, r in stages.used if getattr(r, "queue_bound", None) is False]
            if o.verdict.startswith("met") and weak:
                k, r = weak[0]
                o = o._replace(verdict=o.verdict + f", but on a run that was not link-bound: "
                                                   f"{stages.why(k, r)}")
        except Missing as e:
            o = Outcome("-", f"not run: {e}")
        except (KeyError, TypeError, ZeroDivisionError, ValueError) as e:
            o = Outcome("-", f"not measured: {type(e).__name__} {e}")
        out.append({"where": c.where, "claim": c.text, "paper": c.paper, "stage": c.stage,
                    "lab": o.lab, "verdict": o.verdict})
    return out
