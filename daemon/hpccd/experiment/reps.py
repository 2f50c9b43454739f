"""``hpccctl experiment NAME --reps N``: the experiment run N times, each in
a lab of its own (so single events such as an incast happen N times), and
every figure of its summary reported as the median and the spread (least
and greatest) over the runs; a yes/no figure (link-bound) as in how many
runs it held.

Each run writes its own results folder as usual; the repetition writes one
more, ``<root>/NAME-reps-<stamp>/``, with ``reps.json`` (per row: every
numeric figure as {median, min, max, n, values}, and the folders of the
runs), ``reps.txt`` (the experiment's own columns, each cell
"median [min-max]") and ``reps.png`` (per column, the median with the
spread as an error bar).  A row is identified by its algorithm (or txrate's
variant), and fct's by workload and load too; fct's size buckets are rows
of their own.  Params are the same for every run (fct: the same seed, so
the same schedule: the spread is the lab's run-to-run noise; give --seed to
vary it).  A progress line after each run estimates the time left from the
runs so far.  An interrupted repetition (Ctrl-C) keeps the runs that
finished: they are aggregated and written before the interrupt goes on (the
run in progress removes its lab, as any interrupted experiment does).
"""
from __future__ import annotations

import json
import statistics
import time
from typing import Any, Callable, Sequence

from .report import Results, _clean, progress, pyplot, table
from .results import Experiment, Summary

__all__ = ["run_reps", "aggregate", "ID_KEYS"]

# What names a row of a summary's "results" (whichever of them it has).
ID_KEYS = ("algo", "variant", "workload", "load")
# fct's nested rows, and the key that names each of them.
NESTED = {"buckets": "bucket"}


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v


def _row_id(r: dict[str, Any], keys: Sequence[str]) -> tuple:
    return tuple((k, r[k]) for k in keys if k in r)


def _stats(values: list[float]) -> dict[str, Any]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values), "values": values}


def _agg_rows(rows_per_run: Sequence[Sequence[dict[str, Any]]],
              keys: Sequence[str] = ID_KEYS) -> list[dict[str, Any]]:
    """Rows with the same identity across runs -> one row: its identity, and
    per numeric field the statistics of the runs that have it (None,
    NaN and missing values are left out); nested row lists (NESTED) the
    same way, by their own key."""
    order: list[tuple] = []
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for rows in rows_per_run:
        for r in rows:
            k = _row_id(r, keys)
            if k not in groups:
                order.append(k)
                groups[k] = []
            groups[k].append(r)
    out = []
    for k in order:
        rs = groups[k]
        a: dict[str, Any] = dict(k)
        a["runs"] = len(rs)
        fields = list(dict.fromkeys(f for r in rs for f in r))
        for f in fields:
            if f in a:
                continue
            if f in NESTED:
                a[f] = _agg_rows([r.get(f) or [] for r in rs], (NESTED[f],))
                continue
            flags = [r[f] for r in rs if isinstance(r.get(f), bool)]
            if flags:                       # e.g. link-bound: in how many runs
                a[f] = f"{sum(flags)}/{len(flags)}"
                continue
            vals = [r[f] for r in rs if _is_num(r.get(f))]
            if vals:
                a[f] = _stats([float(v) for v in vals])
        out.append(a)
    return out


def aggregate(summaries: Sequence[Summary]) -> list[dict[str, Any]]:
    """The "results" of several runs' summaries, aggregated per row."""
    return _agg_rows([s.results for s in summaries])


def _cell(v: Any) -> Any:
    if isinstance(v, dict) and "median" in v:
        def f(x: float) -> str:
            return f"{x:.3g}" if abs(x) < 1000 else f"{x:.0f}"
        if v["min"] == v["max"]:
            return f(v["median"])
        return f"{f(v['median'])} [{f(v['min'])}-{f(v['max'])}]"
    return v


def _columns(mod: Experiment) -> list[tuple[str, str]]:
    return list(mod.COLUMNS)


def _text(mod: Experiment, n_done: int, n_asked: int, agg: list[dict[str, Any]], folders: list[str]) -> str:
    cols = _columns(mod)
    ids = [c for c in cols if c[0] in ID_KEYS]
    extra = [(k, k) for k in ID_KEYS if any(k in r for r in agg) and k not in dict(cols)]
    cols = extra + ids + [c for c in cols if c[0] not in ID_KEYS]
    rows = [{k: _cell(v) for k, v in r.items()} for r in agg]
    head = (f"== {mod.NAME}: {n_done} runs (of {n_asked} asked); median [least-greatest] "
            f"over the runs ==")
    text = head + "\n" + table(rows, cols)
    if hasattr(mod, "BUCKET_COLUMNS"):
        brows = [{**{k: r[k] for k in ID_KEYS if k in r}, **{k: _cell(v) for k, v in b.items()}}
                 for r in agg for b in r.get("buckets") or []]
        if brows:
            text += "\n" + table(brows, [c for c in mod.BUCKET_COLUMNS])
    text += "\nruns: " + ", ".join(folders)
    return text


def _hpcc_runs(summaries: Sequence[Summary]) -> str:
    """Each run measured its own loaded RTT and set T from it
    (loaded_rtt.py): both per run, and N."""
    ps = [s.params for s in summaries]
    if not any("T_us" in p for p in ps):
        return ""
    return ("\nper run: loaded RTT " + ", ".join(f"{p.get('loaded_rtt_us', float('nan')):.0f}"
                                           for p in ps)
            + " us; T " + ", ".join(f"{p.get('T_us', float('nan')):g}" for p in ps)
            + f" us; HPCC's N {ps[0].get('hpcc_N')}")


def _plot(mod: Experiment, agg: list[dict[str, Any]], res: Results) -> None:
    cols = [c for c in _columns(mod) if c[0] not in ID_KEYS and
            any(isinstance(r.get(c[0]), dict) for r in agg)]
    if not cols or not agg:
        return
    plt = pyplot()
    fig, axes = plt.subplots(len(cols), 1, figsize=(7, 2.2 * len(cols)), squeeze=False)
    names = [" ".join(str(v) for k, v in r.items() if k in ID_KEYS) for r in agg]
    for ax, (key, head) in zip(axes[:, 0], cols):
        med, lo, hi = [], [], []
        for r in agg:
            s = r.get(key)
            m = s["median"] if isinstance(s, dict) else float("nan")
            med.append(m)
            lo.append(m - s["min"] if isinstance(s, dict) else 0)
            hi.append(s["max"] - m if isinstance(s, dict) else 0)
        ax.bar(range(len(agg)), med, yerr=[lo, hi], capsize=4, color="#4c72b0")
        ax.set_xticks(range(len(agg)))
        ax.set_xticklabels(names, fontsize=8)
        ax.set_ylabel(head, fontsize=8)
    fig.suptitle(f"{mod.NAME}: median over the runs, bars from the least to the greatest")
    res.figure("reps.png", fig)


def run_reps(mod: Experiment, lab_factory: Callable, algos, params: dict[str, Any], out: str, n: int,
             clock: Callable[[], float] = time.monotonic) -> tuple[str, str]:
    """Run `mod` `n` times; aggregate and write (module docstring)."""
    if n < 1:
        raise ValueError(f"--reps {n}: at least one run")
    summaries, folders = [], []
    t0 = clock()
    interrupted: BaseException | None = None
    for i in range(n):
        progress(mod.NAME, f"run {i + 1} of {n}")
        try:
            _, folder = mod.run(lab_factory, algos, params, out)
        except KeyboardInterrupt as e:
            interrupted = e
            progress(mod.NAME, f"interrupted in run {i + 1}: keeping the {i} finished")
            break
        folders.append(folder)
        summaries.append(Summary.load(folder))
        spent = clock() - t0
        left = spent / (i + 1) * (n - i - 1)
        progress(mod.NAME, f"run {i + 1} of {n} done in {spent / (i + 1):.0f} s on average; "
                           f"about {left:.0f} s left")
    if not summaries:
        if interrupted is not None:
            raise interrupted
        raise RuntimeError("no run finished")
    agg = aggregate(summaries)
    res = Results(out, f"{mod.NAME}-reps")
    text = _text(mod, len(summaries), n, agg, folders) + _hpcc_runs(summaries)
    with open(res.path("reps.txt"), "w") as f:
        f.write(text + "\n")
    with open(res.path("reps.json"), "w") as f:
        json.dump(_clean({"experiment": mod.NAME, "runs": len(summaries), "asked": n,
                          "params": summaries[0].params, "folders": folders,
                          "results": agg}), f, indent=1, default=str)
        f.write("\n")
    _plot(mod, agg, res)
    if interrupted is not None:
        print(text)
        print(f"results in {res.dir}")
        raise interrupted
    return text, res.dir
