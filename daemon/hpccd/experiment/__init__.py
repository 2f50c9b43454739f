"""The experiment runner: the HPCC paper's micro-benchmarks ([HPCC]
section 5.2) in the lab, every algorithm side by side on the same links in
one run (docs/experiments.md).  ``hpccctl experiment NAME --algos ...``."""
from __future__ import annotations

from . import fairness, fct, incast, longshort, mice, recovery, txrate

EXPERIMENTS = {m.NAME: m for m in (incast, longshort, mice, fairness, txrate, fct, recovery)}

__all__ = ["EXPERIMENTS"]
