"""Where an experiment's results go and how they look: a results folder
with CSV files, PNG plots (matplotlib, no display needed) and a summary
table (printed, and written as summary.txt and summary.json)."""
from __future__ import annotations

import csv
import datetime
import json
import math
import os
import sys
from typing import Any, Sequence

__all__ = ["Results", "table", "progress"]


def progress(exp: str, msg: str) -> None:
    """One line of progress on stderr (stdout carries the summary)."""
    t = datetime.datetime.now().strftime("%H:%M:%S")
    print(f"[{t} {exp}] {msg}", file=sys.stderr, flush=True)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "-"
        if math.isinf(v):
            return "never"
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"
    return str(v)


def table(rows: Sequence[Any], columns: Sequence[tuple[str, str]]) -> str:
    """A plain-text table of `rows` (results.Row, or dicts read from JSON)
    with `columns` [(key, header)]."""
    from .results import value

    cells = [[h for _, h in columns]] + [[_fmt(value(r, k)) for k, _ in columns] for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(columns))]
    lines = ["  ".join(c[i].rjust(widths[i]) if i else c[i].ljust(widths[i])
                       for i in range(len(columns))) for c in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


class Results:
    """The folder of one run: ``<root>/<experiment>-<YYYYmmdd-HHMMSS>``."""

    def __init__(self, root: str, experiment: str):
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        self.dir = os.path.join(root, f"{experiment}-{stamp}")
        n = 1
        while os.path.exists(self.dir):
            n += 1
            self.dir = os.path.join(root, f"{experiment}-{stamp}-{n}")
        os.makedirs(self.dir)
        self.files: list[str] = []

    def path(self, name: str) -> str:
        p = os.path.join(self.dir, name)
        self.files.append(p)
        return p

    def csv(self, name: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
        p = self.path(name)
        with open(p, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(header)
            w.writerows(rows)
        return p

    def summary(self, text: str, data: "Summary | dict[str, Any]") -> None:
        """summary.txt (`text`) and summary.json (`data`, a results.Summary)."""
        from .results import Summary

        if isinstance(data, Summary):
            data = data.to_json()
        with open(self.path("summary.txt"), "w") as f:
            f.write(text + "\n")
        with open(self.path("summary.json"), "w") as f:
            json.dump(_clean(data), f, indent=1, default=str)
            f.write("\n")

    def figure(self, name: str, fig) -> str:
        p = self.path(name)
        fig.savefig(p, dpi=110, bbox_inches="tight")
        import matplotlib.pyplot as plt
        plt.close(fig)
        return p


def _clean(o: Any) -> Any:
    """NaN and infinities as null (JSON has neither); private keys ("_x") out."""
    if isinstance(o, float) and (math.isnan(o) or math.isinf(o)):
        return None
    if isinstance(o, dict):
        return {k: _clean(v) for k, v in o.items() if not str(k).startswith("_")}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    return o


def pyplot():
    """matplotlib.pyplot on the Agg backend (no display on a lab host)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt
