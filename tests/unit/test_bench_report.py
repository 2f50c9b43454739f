"""scripts/bench_report.py, the benchmarks' one table format and machine figures."""
from __future__ import annotations

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "scripts"))

import bench_report  # noqa: E402


def test_table_is_markdown_with_figures_right_aligned():
    out = bench_report.table(["algo", "util", "q p99 KB"],
                             [["hpcc", "0.950", 12], ["tcp-dctcp", "0.9", 1234.5]])
    assert out.splitlines() == [
        "| algo      |  util | q p99 KB |",
        "|-----------|------:|---------:|",
        "| hpcc      | 0.950 |       12 |",
        "| tcp-dctcp |   0.9 |   1234.5 |",
    ]


def test_table_refuses_a_row_of_the_wrong_width():
    with pytest.raises(ValueError, match="every row needs 2 cells"):
        bench_report.table(["a", "b"], [[1, 2], [3]])


def test_median_and_busy_share():
    assert bench_report.median([{"u": 3}, {"u": 1}, {"u": 2}], "u") == 2
    assert bench_report.busy_share((100, 1000), (150, 1100)) == 0.5
    assert bench_report.busy_share((5, 5), (5, 5)) == 0.0          # no time passed


def test_machine_figures_are_read_from_this_machine():
    busy, total = bench_report.machine_cpu()
    assert 0 <= busy <= total
    line = bench_report.machine_line()
    assert line.startswith(f"kernel {__import__('os').uname().release}, ")
    assert bench_report.loadavg() in line
