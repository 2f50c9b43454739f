"""``hpccctl experiment NAME --algos a,b,...`` (argument parsing here,
registered in hpccd.cli.main)."""
from __future__ import annotations

import argparse
import secrets
import sys

from ..cli.errors import not_root
from . import EXPERIMENTS, kernel_cc
from .algos import ALGOS, AlgoError, parse_algos
from .common import UsageError
from .kernel_cc import TRAIN_MODES
from .native import DEFAULT_N, set_given
from .reps import run_reps
from .sweep import parse_sweeps, run_sweep

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
    ep.add_argument("--reps", type=int, default=1, metavar="N",
                    help="run the experiment N times, each in a lab of its own, and report "
                         "every figure's median and spread (default 1)")
    ep.add_argument("--sweep", action="append", metavar="PARAM=V1,V2,...",
                    help="HPCC's sensitivity: run once per value of PARAM (w_ai_bytes, eta, "
                         "max_stage, T_ns), the others at the lab's settings; repeatable, "
                         "one plot per parameter ([HPCC] Figure 14)")
    hg = ep.add_argument_group("HPCC's parameters (hpcc, rx-hpcc, hpcc-probe, tcp-hpcc, the "
                               "ablation's variants; [HPCC] section 3.3)")
    hg.add_argument("--eta", type=float, help="target utilisation (default 0.95)")
    hg.add_argument("--max-stage", type=int, metavar="N", help="maxStage (default 5)")
    hg.add_argument("--T-us", type=float, metavar="US",
                    help="T in microseconds (default: measured, slightly above the lab's RTT "
                         "under the experiment's own load, [HPCC] section 5.1)")
    hg.add_argument("--w-ai", type=float, metavar="BYTES",
                    help="W_AI in bytes (default: W_init (1 - eta) / N)")
    hg.add_argument("--n", type=int, metavar="N",
                    help="N of the W_AI rule of thumb, the expected maximum number of "
                         f"concurrent flows on a link (default {DEFAULT_N}, [HPCC] section 5.1)")
    hg.add_argument("--tcp-trains", choices=TRAIN_MODES, default="eighth",
                    help="tcp-hpcc's senders' GSO trains: an eighth of B x T (default), or "
                         "from there as the daemon's tcp_side.trains_from_pacer decides (the "
                         "pacer's lateness and the queue the probes find)")
    ep.add_argument("--ack-every", type=int, metavar="M",
                    help="native flows' receivers acknowledge every M packets (default 4, the "
                         "lab's; [HPCC] section 3.1 acknowledges every packet)")
    ep.add_argument("--senders", type=int, help="incast senders (default 7); fct: sender hosts "
                                                "and receiver hosts (default 4 each)")
    ep.add_argument("--size", type=int, help="bytes per incast flow (default 500000)")
    ep.add_argument("--rate-mbps", type=int, help="link rate (default 1000)")
    ep.add_argument("--observe", type=float, help="seconds recorded after the event (default 1)")
    ep.add_argument("--duration", type=float,
                    help="fct: seconds of arrivals per run (default 5); mice, "
                         "txrate-vs-rxrate: seconds measured")
    fg = ep.add_argument_group("fct (flow completion times under load)")
    fg.add_argument("--cdf", action="append", metavar="WORKLOAD",
                    help="flow-size CDF: websearch, fb_hadoop, ali_storage, google_rpc "
                         "(bundled, published distributions; files NAME.cdf) or a file path; "
                         "repeatable or comma-separated (default websearch,fb_hadoop)")
    fg.add_argument("--cdf-dir", help="folder of the NAME.cdf files, in place of the bundled "
                                      "ones (default $HPCCD_CDF_DIR, else the bundled "
                                      "folder)")
    fg.add_argument("--workload-duration", action="append", metavar="NAME=SECONDS",
                    help="seconds of arrivals per run for one workload, in place of "
                         "--duration (repeatable): websearch=30 gives its small buckets "
                         "enough flows")
    fg.add_argument("--loads", help="average loads of the bottleneck, shares of its rate "
                                    "(default 0.3,0.5)")
    fg.add_argument("--max-size", type=int, metavar="BYTES",
                    help="cap flow sizes at BYTES (larger flows are sent as BYTES; reported "
                         "in the summary; default no cap)")
    fg.add_argument("--seed", type=int, help="seed of the arrivals, sizes and endpoints "
                                             "(default 1)")
    fg.add_argument("--buckets", metavar="BYTES,...",
                    help="upper edges of the size buckets (default "
                         "3000,12000,48000,192000,1000000)")
    fg.add_argument("--incast-load", type=float, metavar="SHARE",
                    help="incasts on top of the background load, this share of the link rate "
                         "([HPCC] section 5.3 uses 0.02; default 0, none)")
    fg.add_argument("--incast-size", type=int, metavar="BYTES",
                    help="bytes per incast flow (default 500000)")
    fg.add_argument("--incast-flows", type=int, metavar="N",
                    help="flows per incast, all toward one receiver (default two per sender "
                         "host)")
    gg = ep.add_argument_group("gbn-vs-sr (go-back-N against selective repeat)")
    gg.add_argument("--losses", metavar="P,...",
                    help="random loss probabilities on the bottleneck link, each way "
                         "(default 0,0.001,0.01); --senders: the flows (default 2), --size: "
                         "bytes each (default 4000000)")
    ep.set_defaults(func=main)


def _lab_factory(topo):
    from ..lab.netns import Lab
    return Lab(topo, name=f"x{topo.name[1:6]}{secrets.token_hex(2)}")


def _workload_durations(items: list[str]) -> dict[str, float]:
    """--workload-duration NAME=SECONDS (repeatable) -> {name: seconds}."""
    out: dict[str, float] = {}
    for item in items:
        name, eq, secs = item.partition("=")
        try:
            value = float(secs)
        except ValueError:
            value = float("nan")
        if not eq or not name.strip() or not value > 0:
            raise UsageError(f"--workload-duration {item}: NAME=SECONDS with SECONDS > 0, "
                             f"e.g. websearch=30")
        out[name.strip()] = value
    return out


def _set_hpcc(args: argparse.Namespace) -> None:
    """--eta, --max-stage, --T-us, --w-ai, --n into native's given parameters,
    checked by the core (the message names the option); UsageError."""
    from ..core import cc

    opts = {"eta": ("--eta", args.eta), "max_stage": ("--max-stage", args.max_stage),
            "T_ns": ("--T-us", None if args.T_us is None else args.T_us * 1000),
            "w_ai_bytes": ("--w-ai", args.w_ai)}
    given = {k: v for k, (_, v) in opts.items() if v is not None}
    if args.n is not None and args.w_ai is not None:
        raise UsageError("--n and --w-ai: give one (N only sets W_AI)")
    if args.n is not None and not 1 <= args.n <= 1_000_000:
        raise UsageError(f"--n {args.n}: the expected number of concurrent flows, 1 or more")
    if args.T_us is not None and not args.T_us > 0:
        raise UsageError(f"--T-us {args.T_us:g}: microseconds, > 0")
    ack = getattr(args, "ack_every", None)
    if ack is not None and not 1 <= ack <= 64:
        raise UsageError(f"--ack-every {ack}: packets per ACK, 1 to 64")
    try:
        cc.Hpcc(**given, **({"N_flows": args.n} if args.n else {}))
    except cc.ParamError as e:
        name = "--n" if e.key == "N_flows" else opts.get(e.key, (e.key,))[0]
        raise UsageError(f"{name}: {e}") from None
    set_given(given, args.n, ack)
    kernel_cc.TRAINS = getattr(args, "tcp_trains", None) or "eighth"


def main(args: argparse.Namespace) -> int:
    if not_root("hpccctl experiment", "network namespaces"):
        return 2
    try:
        algos = parse_algos(args.algos)
    except AlgoError as e:
        print(f"hpccctl experiment: --algos: {e}", file=sys.stderr)
        return 2
    try:
        _set_hpcc(args)
    except UsageError as e:
        print(f"hpccctl experiment: {e}", file=sys.stderr)
        return 2
    mod = EXPERIMENTS[args.name]
    params = {"senders": args.senders, "size": args.size, "rate_mbps": args.rate_mbps,
              "observe": args.observe, "duration": args.duration, "cdf": args.cdf,
              "cdf_dir": args.cdf_dir, "loads": args.loads, "max_size": args.max_size,
              "seed": args.seed, "buckets": args.buckets, "incast_load": args.incast_load,
              "incast_size": args.incast_size, "incast_flows": args.incast_flows,
              "losses": args.losses}
    if args.workload_duration:
        try:
            params["durations"] = _workload_durations(args.workload_duration)
        except UsageError as e:
            print(f"hpccctl experiment: {e}", file=sys.stderr)
            return 2
    if args.reps < 1:
        print(f"hpccctl experiment: --reps {args.reps}: at least 1", file=sys.stderr)
        return 2
    try:
        sweeps = parse_sweeps(args.sweep)
        if sweeps:
            text, folder = run_sweep(mod, _lab_factory, algos, params, args.out, sweeps,
                                     args.reps)
        elif args.reps > 1:
            text, folder = run_reps(mod, _lab_factory, algos, params, args.out, args.reps)
        else:
            text, folder = mod.run(_lab_factory, algos, params, args.out)
    except UsageError as e:
        print(f"hpccctl experiment {args.name}: {e}", file=sys.stderr)
        return 2
    print(text)
    print(f"results in {folder}")
    return 0
