"""The congestion-control algorithms, one row each: the one place their names are written.

The configuration, replay, the demo, the flow table and its metrics, ``hpccctl send``, the
transport engine, the daemon's transport component and the experiments all read this table.
Adding an algorithm is one core file (fastpath/cc/, with its class in hpccd.core.cc), one
row here and one section of docs/algorithms.md; tests/unit/test_algorithms.py checks the
rows against the C enum and the core's classes.
"""
from __future__ import annotations

from typing import Any, NamedTuple

from .._cc import lib
from . import cc

__all__ = ["Algorithm", "ALGORITHMS", "NAMES", "make_flow"]


class Algorithm(NamedTuple):
    name: str           # in the configuration, traces, hpccctl, metric labels
    enum: int           # enum hpccd_algo (include/hpccd/cc.h): the engine's flow config
    flow_class: type    # the core's Python face (hpccd.core.cc)
    table: str          # the configuration's parameter table it reads ([hpcc], [dctcp], ...)
    needs_ecn: bool     # reacts to CE marks: the switch must mark for it
    int_feedback: str   # "sender" (INT echoed to the sender, or probes), "receiver" (the
                        # receiver runs the window on the data's INT) or "" (no INT)
    rate_based: bool    # paced by a rate alone, no window (the HPCC paper's baselines)


ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in (
    Algorithm("hpcc", lib.HPCCD_ALGO_HPCC, cc.Hpcc, "hpcc", False, "sender", False),
    # Rx-HPCC runs the same ComputeWind, so it reads HPCC's parameters.
    Algorithm("rx-hpcc", lib.HPCCD_ALGO_RXHPCC, cc.RxHpcc, "hpcc", False, "receiver", False),
    Algorithm("dctcp", lib.HPCCD_ALGO_DCTCP, cc.Dctcp, "dctcp", True, "", False),
    Algorithm("ldcp", lib.HPCCD_ALGO_LDCP, cc.Ldcp, "ldcp", True, "", False),
    Algorithm("dcqcn", lib.HPCCD_ALGO_DCQCN, cc.Dcqcn, "dcqcn", True, "", True),
    Algorithm("timely", lib.HPCCD_ALGO_TIMELY, cc.Timely, "timely", False, "", True),
)}
NAMES: tuple[str, ...] = tuple(ALGORITHMS)


def make_flow(algo: str, **params: Any) -> Any:
    """A flow of the core for algorithm `algo` with `params` (the names of its
    parameter table); ParamError for an unknown algorithm, key or value."""
    try:
        row = ALGORITHMS[algo]
    except KeyError:
        raise cc.ParamError("algo", f"unknown algorithm {algo!r} (known: "
                                    + ", ".join(NAMES) + ")") from None
    return row.flow_class(**params)
