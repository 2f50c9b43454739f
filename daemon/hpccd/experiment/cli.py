"""``hpccctl experiment NAME --algos a,b,...`` (argument parsing here,
registered in hpccd.cli)."""
from __future__ import annotations

import argparse
import os
import secrets
import sys

from . import EXPERIMENTS
from .algos import ALGOS, AlgoError, parse_algos

DEFAULT_ALGOS = "hpcc,cubic,tcp-dctcp"


def add_parser(sub) -> None:
    ep = sub.add_parser("experiment", help="run a micro-benchmark in the lab, algorithms "
                                           "side by side (docs/experiments.md)",
                        description="Run one of the HPCC paper's micro-benchmarks in a lab "
                                    "of its own, every algorithm on the same links in one "
                                    "run; writes CSV, PNG plots and a summary. Needs root.")
    ep.add_argument("name", choices=sorted(EXPERIMENTS), metavar="NAME",
                    help=f"one of: {', '.join(sorted(EXPERIMENTS))}")
    ep.add_argument("--algos", default=DEFAULT_ALGOS,
                    help=f"comma-separated, of: {', '.join(ALGOS)} (default {DEFAULT_ALGOS})")
    ep.add_argument("--out", default="results", help="results root folder (default ./results)")
    ep.add_argument("--senders", type=int, help="incast senders (default 7)")
    ep.add_argument("--size", type=int, help="bytes per incast flow (default 500000)")
    ep.add_argument("--rate-mbps", type=int, help="link rate (default 1000)")
    ep.add_argument("--observe", type=float, help="seconds recorded after the event (default 1)")
    ep.set_defaults(func=main)


def _lab_factory(topo):
    from ..lab import Lab
    return Lab(topo, name=f"x{topo.name[1:6]}{secrets.token_hex(2)}")


def main(args: argparse.Namespace) -> int:
    if os.geteuid() != 0:
        print("hpccctl experiment: needs root (network namespaces)", file=sys.stderr)
        return 2
    try:
        algos = parse_algos(args.algos)
    except AlgoError as e:
        print(f"hpccctl experiment: --algos: {e}", file=sys.stderr)
        return 2
    mod = EXPERIMENTS[args.name]
    params = {"senders": args.senders, "size": args.size, "rate_mbps": args.rate_mbps,
              "observe": args.observe}
    text, folder = mod.run(_lab_factory, algos, params, args.out)
    print(text)
    print(f"results in {folder}")
    return 0
