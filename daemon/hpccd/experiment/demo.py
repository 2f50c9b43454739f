"""The main job: the lab demo (README's first command, issue 8).

Two of the HPCC paper's micro-benchmarks in the lab, each in a lab of its
own with its embedded topology, HPCC (native AF_XDP flows) against kernel
TCP cubic and DCTCP (hpccd's struct_ops) on the same links in the same run:

- incast: 7 senders of 500 KB each into the receiver of a long flow;
- mice: 1 KB request/response mice through a link two elephants saturate.

Short phases so that the whole demo takes under two minutes on the
two-core lab machine; ``hpccctl experiment`` runs the full-length ones.
Prints both summary tables and where the plots are.
"""
from __future__ import annotations

import os
import sys
import time

from . import incast, mice
from .algos import parse_algos
from .report import progress

ALGOS = "hpcc,tcp-dctcp,cubic"
INCAST = {"warmup": 0.6, "observe": 0.6}
MICE = {"warmup": 0.6, "duration": 1.2, "idle_count": 300}


def main(out: str = "results", algos: str = ALGOS) -> int:
    if os.geteuid() != 0:
        print("hpccctl demo: the lab demo needs root (network namespaces, BPF); "
              "`hpccctl demo --replay` runs the replay demo without", file=sys.stderr)
        return 2
    from .cli import _lab_factory

    chosen = parse_algos(algos)
    t0 = time.monotonic()
    progress("demo", f"incast and mice, {', '.join(a.name for a in chosen)} side by side")
    text_i, dir_i = incast.run(_lab_factory, chosen, dict(INCAST), out)
    text_m, dir_m = mice.run(_lab_factory, chosen, dict(MICE), out)
    print("== incast: 7 x 500 KB into the receiver of a long flow, 1 Gbit/s ==")
    print(text_i)
    print()
    print("== mice: 1 KB request/response through a link saturated by two elephants ==")
    print(text_m)
    print()
    print(f"plots and CSV: {dir_i}/incast.png, {dir_m}/mice.png "
          f"({time.monotonic() - t0:.0f} s; docs/experiments.md explains every column)")
    return 0
