"""What the benchmarks (scripts/bench_*.py) share to print their figures: the
machine they ran on and how busy it was, medians of repeated runs, and one
table format (docs/benchmarks.md quotes them).

    from bench_report import machine_cpu, busy_share, machine_line, median, table

    m0 = machine_cpu(); ...; m1 = machine_cpu()
    print(machine_line())                       # kernel, CPUs, model, load average
    print(table(["algo", "util"], [["hpcc", f"{median(rs, 'util'):.3f}"]]))

A benchmark is run as a script from scripts/, so this module is importable
as ``bench_report`` beside it.  Percentiles and Jain's index are the
experiments' (hpccd.experiment.measure.percentile, .jain).
"""
from __future__ import annotations

import os
import statistics
from typing import Any, Iterable, Mapping, Sequence


def machine_cpu() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs together from /proc/stat; busy is
    everything but idle and iowait."""
    with open("/proc/stat") as f:
        a = [int(x) for x in f.readline().split()[1:]]
    return sum(a) - a[3] - a[4], sum(a)


def busy_share(m0: tuple[int, int], m1: tuple[int, int]) -> float:
    """Share of the machine's CPU time spent busy between two machine_cpu()."""
    return (m1[0] - m0[0]) / max(1, m1[1] - m0[1])


def machine_s(m0: tuple[int, int], m1: tuple[int, int]) -> float:
    """CPU-seconds the whole machine was busy between two machine_cpu()
    readings: every thread and every softirq, wherever it ran."""
    return (m1[0] - m0[0]) / os.sysconf("SC_CLK_TCK")


def loadavg() -> str:
    """The 1, 5 and 15 minute load averages, as /proc/loadavg has them."""
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def machine_line() -> str:
    """Where the figures come from: kernel, CPUs and their model, load now."""
    return (f"kernel {os.uname().release}, {os.cpu_count()} CPUs ({cpu_model()}), "
            f"load average {loadavg()}")


def median(rows: Iterable[Mapping[str, Any]], key: str) -> float:
    """Median of field `key` over repeated runs."""
    return statistics.median(r[key] for r in rows)


def table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A Markdown table: the first column left-aligned, the others (figures)
    right-aligned, each as wide as its widest cell.  Cells are printed with
    str(); format the figures before."""
    cells = [[str(h) for h in header]] + [[str(c) for c in r] for r in rows]
    n = len(header)
    if any(len(r) != n for r in cells):
        raise ValueError(f"table: every row needs {n} cells")
    widths = [max(len(r[i]) for r in cells) for i in range(n)]

    def line(r: Sequence[str]) -> str:
        return "| " + " | ".join(r[i].ljust(widths[i]) if i == 0 else r[i].rjust(widths[i])
                                 for i in range(n)) + " |"

    rule = "|" + "|".join(("-" * (w + 2)) if i == 0 else ("-" * (w + 1) + ":")
                          for i, w in enumerate(widths)) + "|"
    return "\n".join([line(cells[0]), rule] + [line(r) for r in cells[1:]])
