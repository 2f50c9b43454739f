"""The experiment runner: the HPCC paper's micro-benchmarks ([HPCC]
section 5.2) in the lab, every algorithm side by side on the same links in
one run (docs/experiments.md).  ``hpccctl experiment NAME --algos ...``."""
from __future__ import annotations

from . import fairness, fct, incast, longshort, mice, recovery, txrate
from .results import Experiment, check

# Every experiment implements results.Experiment (NAME, COLUMNS, ROW, run).
EXPERIMENTS: dict[str, Experiment] = {
    m.NAME: check(m) for m in (incast, longshort, mice, fairness, txrate, fct, recovery)}

# The type of each experiment's rows (results.Experiment.ROW), by name: what
# a summary.json written by it is read back as (claims.Stages).  Kept apart
# from EXPERIMENTS, which stand-in experiments replace in the tests, since a
# summary on disk was written by the real one.
ROWS: dict[str, type] = {name: m.ROW for name, m in EXPERIMENTS.items()}

__all__ = ["EXPERIMENTS", "ROWS"]
