"""hpccctl: the command-line tool of hpccd.

Subcommands so far:
  replay TRACE   run a feedback trace through one algorithm (docs/replay.md)
  demo           the main job: incast and mice in the lab (--replay: the INT trace replay)
  decode HEX     print hpccd packets field by field (hex frames or --pcap FILE)
  lab up|down|status   the netns lab of a topology file (docs/lab.md)
  send PEER | recv     a transfer over the native AF_XDP transport (docs/transport.md)
  experiment NAME      a micro-benchmark in the lab, algorithms side by side (docs/experiments.md)
  reproduce            the HPCC paper's evaluation, every experiment, and its report (docs/results.md)
  status | flows | flow ID | set PARAM VALUE | probes   the running daemon
                       (hpccd.agent.control_client)
"""
from __future__ import annotations

import argparse
import sys

from .. import __version__


def _cmd_replay(args: argparse.Namespace) -> int:
    from ..core import replay

    try:
        src = replay.open_trace(args.trace)
    except OSError as e:
        print(f"hpccctl replay: cannot open {args.trace}: {e.strerror}", file=sys.stderr)
        return 2
    with src:
        return replay.replay(src, sys.stdout, sys.stderr)


def _cmd_demo(args: argparse.Namespace) -> int:
    if args.replay or args.trace or args.json:
        from . import demo
        return demo.main(args.trace, as_json=args.json)
    from ..experiment import demo as lab_demo
    return lab_demo.main(args.out, args.algos)


def _cmd_decode(args: argparse.Namespace) -> int:
    from ..core import decode

    return decode.run(args.hex, args.pcap, args.key, args.port, args.dscp, args.json)


def _cmd_lab(args: argparse.Namespace) -> int:
    from ..lab import cli as lab_cli

    if args.lab_cmd == "prometheus":
        from ..lab import metrics as lab_metrics

        return lab_metrics.cli(args)
    return lab_cli.cli(args)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hpccctl", description="Control and tools of hpccd.")
    p.add_argument("--version", action="version", version=f"hpccctl {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    r = sub.add_parser("replay", help="run a feedback trace through one algorithm",
                       description="Run a JSON Lines feedback trace (first line: params) "
                                   "through its algorithm and print one JSON object per "
                                   "event. '-' reads standard input. Exit status 2 on a "
                                   "malformed trace, with the line at fault on stderr.")
    r.add_argument("trace", help="trace file, or - for standard input")
    r.set_defaults(func=_cmd_replay)

    d = sub.add_parser("demo", help="the main job: incast and mice in the lab, HPCC against "
                                    "cubic and DCTCP (root)",
                       description="The main job: the incast and mice micro-benchmarks in "
                                   "labs of their own, HPCC (native flows) against kernel TCP "
                                   "cubic and DCTCP on the same links, under two minutes; "
                                   "prints the summary tables and writes plots (needs root). "
                                   "--replay: the bundled incast INT trace through HPCC, "
                                   "Rx-HPCC, DCTCP and LDCP instead (no root).")
    d.add_argument("--out", default="results", help="results root folder (default ./results)")
    d.add_argument("--algos", default="hpcc,tcp-dctcp,cubic",
                   help="algorithms of the lab demo (default hpcc,tcp-dctcp,cubic)")
    d.add_argument("--replay", action="store_true",
                   help="replay the bundled INT trace instead (no lab, no root)")
    d.add_argument("--trace", default=None,
                   help="with --replay: an INT trace of hpcc events instead of the bundled one")
    d.add_argument("--json", action="store_true", help="with --replay: the summary as JSON")
    d.set_defaults(func=_cmd_demo)

    x = sub.add_parser("decode", help="print hpccd packets field by field",
                       description="Decode Ethernet frames (hex arguments, or a pcap file) "
                                   "layer by layer with the names of docs/wire-format.md; "
                                   "name the malformed class of a malformed packet; verify "
                                   "tags with --key. Exit status 2 on unreadable input.")
    x.add_argument("hex", nargs="*", metavar="HEX", help="an Ethernet frame in hex")
    x.add_argument("--pcap", metavar="FILE", help="read the frames of a pcap/pcapng file")
    x.add_argument("--key", metavar="HEX", help="128-bit tag key (32 hex digits)")
    x.add_argument("--port", type=int, default=None,
                   help="hpccd UDP port (default 18471)")
    x.add_argument("--dscp", type=int, default=45, help="TCP-side probe DSCP (default 45)")
    x.add_argument("--json", action="store_true", help="one JSON object per packet")
    x.set_defaults(func=_cmd_decode)

    lab = sub.add_parser("lab", help="build, inspect and remove a netns lab",
                         description="The netns lab of a topology file (docs/lab.md, "
                                     "docs/topology.md). Needs root.")
    lsub = lab.add_subparsers(dest="lab_cmd", required=True, metavar="ACTION")
    lu = lsub.add_parser("up", help="build the lab of a topology file or bundled name")
    lu.add_argument("topology", metavar="FILE|NAME",
                    help="a topology file, or a bundled one: dumbbell, incast, tree")
    lu.add_argument("--name", help="lab name instead of the file's [lab] name")
    lu.add_argument("--no-int", action="store_true",
                    help="plain routers: no INT switch program on the switch ports")
    lu.add_argument("--offloads", choices=("trains", "frames", "on", "off"), default="trains",
                    help="segmentation/GRO offloads of the lab's veths (docs/lab.md; "
                         "default trains)")
    ld = lsub.add_parser("down", help="remove a lab (every namespace, veth and program)")
    ld.add_argument("name", nargs="?", metavar="NAME|FILE",
                    help="lab name (default: the only lab up), or a topology whose "
                         "namespaces to remove when its state file is lost")
    ld.add_argument("--topology", metavar="FILE|NAME",
                    help="without a state file: remove NAME-<node> for every node of "
                         "this topology")
    ls = lsub.add_parser("status", help="namespaces, links and per-port queue counters")
    ls.add_argument("name", nargs="?", metavar="NAME", help="lab name (default: every lab)")
    ls.add_argument("--json", action="store_true", help="print JSON")
    lp = lsub.add_parser("prometheus", help="give each host an address the root namespace "
                                            "reaches and print a prometheus.yml scraping "
                                            "their daemons",
                         description="Management links (mgmt0, 169.254.128.0/17) from the "
                                     "root namespace to every host of the lab, and the "
                                     "Prometheus configuration that scrapes the daemon of "
                                     "each host there (docs/lab.md, \"Metrics of a lab\").")
    lp.add_argument("name", metavar="NAME", help="lab name")
    lp.add_argument("--port", type=int, default=9477,
                    help="port of the daemons' exporters (default 9477)")
    lp.add_argument("--interval", default="5s", help="scrape interval (default 5s)")
    lp.add_argument("--out", metavar="FILE", help="write the configuration to FILE "
                                                  "instead of standard output")
    lab.set_defaults(func=_cmd_lab)
    # send PEER --bytes N --algo A, recv: the native transport (hpccd.transport.cli)
    from ..transport import cli as transfer_cli
    transfer_cli.add_parsers(sub)
    # experiment NAME --algos ...: micro-benchmarks in a lab (hpccd.experiment)
    from ..experiment import cli as experiment_cli
    experiment_cli.add_parser(sub)
    from ..experiment import reproduce
    reproduce.add_parser(sub)
    # status, flows, flow ID, set PARAM VALUE, probes: the running daemon (control socket)
    from ..agent import control_client
    control_client.add_parsers(sub)
    return p


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


def main(argv: list[str] | None = None) -> int:
    from .errors import run_main

    return run_main("hpccctl", _main, argv)


if __name__ == "__main__":
    sys.exit(main())
