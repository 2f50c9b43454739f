"""The report of ``hpccctl reproduce`` (reproduce.py) in markdown: the
claims of [HPCC] section 5 with the lab's figures and verdicts (claims.py),
the runs with their load averages, and each stage's summary with its plots,
copied to ``results/<stage>/`` beside the report.

write_report() reads files only (the run's reproduce.json and the stages'
folders), so ``hpccctl reproduce --from DIR`` writes a report again without
a lab.
"""
from __future__ import annotations

import glob
import json
import os
import shutil
from typing import Any

from .claims import Stages, evaluate

__all__ = ["write_report", "ReportError"]


class ReportError(ValueError):
    """The folder is not a reproduce run's (no readable reproduce.json)."""


def _read(folder: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]], dict[str, str]]:
    """The manifest, each finished stage's summary (or sweep or reps)
    document and the file it came from, by stage key."""
    path = os.path.join(folder, "reproduce.json")
    try:
        with open(path) as f:
            manifest = json.load(f)
    except (OSError, ValueError) as e:
        raise ReportError(f"{path}: {e}") from None
    docs, paths = {}, {}
    for st in manifest.get("stages", []):
        if st.get("status") != "done" or not st.get("folder"):
            continue
        for name in ("summary.json", "sweep.json", "reps.json"):
            p = os.path.join(st["folder"], name)
            if os.path.exists(p):
                try:
                    with open(p) as f:
                        docs[st["key"]] = json.load(f)
                    paths[st["key"]] = p
                except (OSError, ValueError) as e:
                    st["status"], st["error"] = "unreadable", f"{p}: {e}"
                break
    return manifest, docs, paths


def _summary_text(folder: str) -> str:
    for name in ("summary.txt", "sweep.txt", "reps.txt"):
        p = os.path.join(folder, name)
        if os.path.exists(p):
            with open(p) as f:
                return f.read().rstrip("\n")
    return ""


def _cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def write_report(folder: str, path: str) -> str:
    """The report of the reproduce run in `folder` at `path` (markdown), its
    plots copied to results/<stage>/ beside it; returns `path`."""
    manifest, docs, paths = _read(folder)
    st = Stages(manifest, docs, paths)
    rows = evaluate(st)
    base = os.path.dirname(os.path.abspath(path))
    mode = "--quick: short phases, few flows, not the paper's figures" if manifest.get("quick") \
        else "full"
    met = sum(1 for r in rows if r["verdict"].startswith("met"))
    ran = sum(1 for r in rows if not r["verdict"].startswith(("not run", "not measured")))
    lines = [
        "# Results: the HPCC paper's evaluation in the lab", "",
        f"Written by `hpccctl reproduce` ({mode}), started {manifest.get('started')} on "
        f"{manifest.get('host')} (Linux {manifest.get('kernel')}, {manifest.get('cpus')} CPUs), "
        f"{manifest.get('seconds', '?')} s; algorithms {manifest.get('algos')}. "
        "What each experiment does and what each column means: [experiments.md](experiments.md)"
        "; the claims' thresholds and how the verdicts are made: `daemon/hpccd/experiment/"
        "claims.py`. Every lab host and switch shares the machine's CPUs: each stage gives its "
        "load average (`uptime`), and each figure's row says whether the link or the CPU was "
        "the bottleneck.", ""]
    if manifest.get("interrupted"):
        lines += [f"**Interrupted** in stage `{manifest['interrupted']}`: the stages before it "
                  "are reported, the rest did not run.", ""]
    weak = sum(1 for r in rows if r["verdict"].startswith("met, but"))
    lines += [f"## The claims of [HPCC] section 5: {met} of {ran} measured claims met "
              f"({weak} of them on runs that were not link-bound), {len(rows) - ran} not "
              f"measured", "",
              "| where | claim | paper | lab | verdict |", "|---|---|---|---|---|"]
    lines += [f"| {_cell(r['where'])} | {_cell(r['claim'])} | {_cell(r['paper'])} | "
              f"{_cell(r['lab'])} | {_cell(r['verdict'])} |" for r in rows]
    lines += ["", "## The runs", "", "| stage | what | algorithms | status | seconds | "
              "load average before -> after |", "|---|---|---|---|---|---|"]
    for e in manifest.get("stages", []):
        la = " -> ".join(" ".join(f"{x:.2f}" for x in e[k]) for k in ("load_before",
                                                                     "load_after") if e.get(k))
        status = e["status"] + (f": {e['error']}" if e.get("error") else "")
        lines.append(f"| {e['key']} | {_cell(e['what'])} | {e.get('algos')} | {_cell(status)} "
                     f"| {e.get('seconds')} | {la} |")
    for e in manifest.get("stages", []):
        if e.get("status") != "done":
            continue
        lines += ["", f"## {e['key']}: {e['what']}", ""]
        # the package's files by its name, not by where this copy is installed
        pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        text = _summary_text(e["folder"]).replace(pkg + os.sep, "hpccd/")
        if text:
            lines += ["    " + ln for ln in text.splitlines()]
        dest = os.path.join(base, "results", e["key"])
        pngs = sorted(glob.glob(os.path.join(e["folder"], "*.png")) +
                      glob.glob(os.path.join(e["folder"], "*.svg")))
        if pngs:
            os.makedirs(dest, exist_ok=True)
        for p in pngs:
            shutil.copy2(p, os.path.join(dest, os.path.basename(p)))
            rel = os.path.relpath(os.path.join(dest, os.path.basename(p)), base)
            lines += ["", f"![{e['key']}: {os.path.basename(p)}]({rel})"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(folder, "claims.json"), "w") as f:
        json.dump(rows, f, indent=1)
        f.write("\n")
    return path
