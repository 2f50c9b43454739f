"""``hpccctl experiment NAME --sweep PARAM=v1,v2,... [--sweep ...]``: HPCC's
sensitivity to its parameters ([HPCC] section 5.4, Figure 14: fairness and
queue against W_AI; section 3.3 and footnote 5 for eta and maxStage), one
command for the whole sweep.

For each swept parameter, one value at a time (the others at the lab's
settings), the experiment runs with that value in every HPCC flow's
parameters (native HPCC and its variants, Rx-HPCC, probe mode, tcp-hpcc:
``native.HPCC_OVERRIDES``); with ``--reps N`` each point is N runs (median
and spread, reps.py).  Algorithms that are not HPCC do not read these
parameters: they run at every point as a reference.  Sweepable:
``w_ai_bytes`` (W_AI; replaces the rule of thumb of N), ``eta``,
``max_stage``, ``T_ns``.

Writes ``<root>/NAME-sweep-<stamp>/``: ``sweep.json`` (per parameter, per
value, the aggregated rows and the runs' folders), ``sweep.txt`` (per
parameter a table, each cell "median [least-greatest]") and one plot per
parameter, ``sweep_<param>.png``: each of the experiment's figures against
the parameter's values, a line per algorithm, the spread as error bars.  A
progress line after each point estimates the time left; Ctrl-C keeps the
points that finished.
"""
from __future__ import annotations

import json
import os
import time
from typing import Any, Callable

from . import native
from .common import UsageError
from .report import Results, _clean, progress, pyplot, table
from .reps import ID_KEYS, _cell, _columns, aggregate, run_reps
from .results import Summary

__all__ = ["SWEEPABLE", "parse_sweeps", "run_sweep"]

# parameter -> (type, (low, high) allowed, what it is)
SWEEPABLE: dict[str, tuple[type, tuple[float, float], str]] = {
    "w_ai_bytes": (float, (1e-3, 1e9), "W_AI, bytes"),
    "eta": (float, (1e-3, 1.0), "eta, target utilisation"),
    "max_stage": (int, (0, 1000), "maxStage"),
    "T_ns": (float, (1e3, 1e9), "T, ns"),
}


def parse_sweeps(texts: list[str] | None) -> list[tuple[str, list[float]]]:
    """["w_ai_bytes=20,80", "eta=0.9,0.95"] -> [(name, values)]; UsageError
    on an unknown parameter, a value that is not a number in range, none, or
    a parameter given twice."""
    out: list[tuple[str, list[float]]] = []
    for t in texts or []:
        name, sep, vals = t.partition("=")
        name = name.strip()
        if not sep or name not in SWEEPABLE:
            raise UsageError(f"--sweep {t!r}: PARAM=v1,v2,... with PARAM one of "
                             f"{', '.join(SWEEPABLE)}")
        if any(n == name for n, _ in out):
            raise UsageError(f"--sweep: {name} given twice")
        typ, (lo, hi), what = SWEEPABLE[name]
        values: list[float] = []
        for v in (x.strip() for x in vals.split(",")):
            if not v:
                continue
            try:
                x = typ(v)
            except ValueError:
                kind = "an integer" if typ is int else "a number"
                raise UsageError(f"--sweep {name}: {v!r} is not {kind}") from None
            if not lo <= x <= hi:
                raise UsageError(f"--sweep {name}: {v} is outside [{lo:g}, {hi:g}] ({what})")
            values.append(x)
        if not values:
            raise UsageError(f"--sweep {name}: no value")
        out.append((name, values))
    return out


def _point(mod, lab_factory, algos, params, out, reps: int) -> tuple[list[dict], list[str]]:
    if reps > 1:
        _, folder = run_reps(mod, lab_factory, algos, params, out, reps)
        with open(os.path.join(folder, "reps.json")) as f:
            doc = json.load(f)
        return doc["results"], doc["folders"]
    _, folder = mod.run(lab_factory, algos, params, out)
    return aggregate([Summary.load(folder)]), [folder]


def _text(mod, points: list[dict[str, Any]], sweeps) -> str:
    cols = [c for c in _columns(mod) if c[0] not in ID_KEYS]
    text = f"== {mod.NAME}: HPCC parameter sweep; median [least-greatest] over the runs =="
    for name, _ in sweeps:
        rows = [{"value": p["value"], **{k: r[k] for k in ID_KEYS if k in r},
                 **{k: _cell(v) for k, v in r.items() if k not in ID_KEYS}}
                for p in points if p["param"] == name for r in p["results"]]
        if not rows:
            continue
        ids = [(k, k) for k in ID_KEYS if any(k in r for r in rows)]
        text += f"\n-- {name} ({SWEEPABLE[name][2]}) --\n"
        text += table(rows, [("value", name)] + ids + cols)
    return text


def _plots(mod, points: list[dict[str, Any]], sweeps, res: Results) -> None:
    cols = [c for c in _columns(mod) if c[0] not in ID_KEYS]
    plt = pyplot()
    for name, _ in sweeps:
        mine = [p for p in points if p["param"] == name]
        cols_here = [c for c in cols if any(isinstance(r.get(c[0]), dict)
                                            for p in mine for r in p["results"])]
        if not mine or not cols_here:
            continue
        fig, axes = plt.subplots(len(cols_here), 1, figsize=(6, 2.3 * len(cols_here)),
                                 sharex=True, squeeze=False)
        series: dict[str, list[tuple[float, dict]]] = {}
        for p in mine:
            for r in p["results"]:
                label = " ".join(str(r[k]) for k in ID_KEYS if k in r)
                series.setdefault(label, []).append((p["value"], r))
        for ax, (key, head) in zip(axes[:, 0], cols_here):
            for label, pts in series.items():
                xs, med, lo, hi = [], [], [], []
                for x, r in sorted(pts, key=lambda t: t[0]):
                    s = r.get(key)
                    if not isinstance(s, dict):
                        continue
                    xs.append(x)
                    med.append(s["median"])
                    lo.append(s["median"] - s["min"])
                    hi.append(s["max"] - s["median"])
                if xs:
                    ax.errorbar(xs, med, yerr=[lo, hi], marker="o", capsize=3, label=label)
            ax.set_ylabel(head, fontsize=8)
            ax.legend(fontsize=7)
        ax = axes[-1, 0]
        ax.set_xlabel(f"{name} ({SWEEPABLE[name][2]})")
        if name == "w_ai_bytes":
            ax.set_xscale("log")
            ax.minorticks_off()
        values = sorted({p["value"] for p in mine})
        ax.set_xticks(values)
        ax.set_xticklabels([f"{v:g}" for v in values])
        fig.suptitle(f"{mod.NAME}: HPCC against {name} (median, bars least to greatest)")
        res.figure(f"sweep_{name}.png", fig)


def run_sweep(mod, lab_factory: Callable, algos, params: dict[str, Any], out: str,
              sweeps: list[tuple[str, list[float]]], reps: int = 1,
              clock: Callable[[], float] = time.monotonic) -> tuple[str, str]:
    """Run the sweep (module docstring); returns (text, folder)."""
    total = sum(len(v) for _, v in sweeps)
    if not total:
        raise UsageError("--sweep: nothing to sweep")
    points: list[dict[str, Any]] = []
    interrupted: BaseException | None = None
    t0 = clock()
    for name, values in sweeps:
        for v in values:
            progress(mod.NAME, f"sweep point {len(points) + 1} of {total}: {name} = {v:g}")
            native.HPCC_OVERRIDES.clear()
            native.HPCC_OVERRIDES[name] = v
            try:
                rows, folders = _point(mod, lab_factory, algos, params, out, reps)
            except KeyboardInterrupt as e:
                interrupted = e
                break
            finally:
                native.HPCC_OVERRIDES.clear()
            points.append({"param": name, "value": v, "folders": folders, "results": rows})
            spent = clock() - t0
            left = spent / len(points) * (total - len(points))
            progress(mod.NAME, f"sweep point {len(points)} of {total} done; about "
                               f"{left:.0f} s left")
        if interrupted is not None:
            progress(mod.NAME, f"interrupted: keeping the {len(points)} points that finished")
            break
    if not points:
        if interrupted is not None:
            raise interrupted
        raise RuntimeError("no sweep point finished")
    res = Results(out, f"{mod.NAME}-sweep")
    text = _text(mod, points, sweeps)
    with open(res.path("sweep.txt"), "w") as f:
        f.write(text + "\n")
    with open(res.path("sweep.json"), "w") as f:
        json.dump(_clean({"experiment": mod.NAME, "sweeps": [[n, v] for n, v in sweeps],
                          "reps": reps, "points": points}), f, indent=1, default=str)
        f.write("\n")
    _plots(mod, points, sweeps, res)
    if interrupted is not None:
        print(text)
        print(f"results in {res.dir}")
        raise interrupted
    return text, res.dir
