"""The experiment runner: the HPCC paper's micro-benchmarks ([HPCC]
section 5.2) in the lab, every algorithm side by side on the same links in
one run (docs/experiments.md).  ``hpccctl experiment NAME --algos ...``."""
from __future__ import annotations

from . import fairness, fct, incast, longshort, mice, recovery, txrate
from .results import Experiment, check

# Every experiment implements results.Experiment (NAME, COLUMNS, run).
EXPERIMENTS: dict[str, Experiment] = {
    m.NAME: check(m) for m in (incast, longshort, mice, fairness, txrate, fct, recovery)}

__all__ = ["EXPERIMENTS"]
