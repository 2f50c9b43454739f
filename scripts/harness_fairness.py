#!/usr/bin/env python3
"""The lab's fairness experiment without the lab's CPUs (issue 15 section 4):
--flows HPCC flows join one switch port one every --step-ms and leave in
reverse order, as `hpccctl experiment fairness` runs them ([HPCC] section 5.2,
Figure 9g/9h), on the engine's own code (scheduler, pacing, feedback, the C
core) in the harness of tests/unit/engine/, on a simulated clock.

Defaults are the lab's (docs/results.md's fairness run): a 1 Gbit/s port,
T = 210 us (1.2 x a loaded RTT of 169 us), a one-way delay of 80 us (an RTT
of about 175 us), an ACK every 4 packets, INT on every packet, N = 100
(W_AI = W_init (1 - eta) / N, 13 bytes).  Per phase it prints Jain's index
of the flows' rates in 10 ms bins over the whole phase and over its second
half (what the lab reports), the least bin, and when Jain's index of the
windows reached 0.98 for good after the phase began, in T and in the
newest flow's W^c updates, beside the rule of thumb's prediction
(fairness_trace.predicted_updates).

--int-noq has the switch stamp qLen 0 (U from txRate alone: which of U's
terms a behaviour comes from); --int-at deq stamps the queue behind a packet
when its transmission began (a switch's dequeue) instead of when it ended.
--late-us L makes both engines wake at random gaps of mean L instead of
every microsecond (the lab's timer lateness: 10-50 us measured), the one
host effect the harness can add; --n / --w-ai change W_AI, --eta and
--max-stage the other two parameters; --gbps and --T-us the B x T (a
--tick-ns of about a fifth of a frame's time on the wire above 2 Gbit/s);
--qlen-scale K has the port stamp K x its queue, so that a queued frame
weighs in U as at a K times smaller B x T and nothing else changes
(docs/experiments.md "Fairness and B x T"; scripts/harness_fairness_bxt.py
runs the tables).

    .venv/bin/python scripts/harness_fairness.py [--flows 4] [--step-ms 1000] [--seeds 1,2,3]
    .venv/bin/python scripts/harness_fairness.py --late-us 25
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

FRAME = 1514          # a full frame on the wire at MTU 1500: the unit of a collision
ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "unit" / "engine"))

import fairness_trace  # noqa: E402
import harness_build  # noqa: E402


def run(exe: pathlib.Path, seed: int, a: argparse.Namespace) -> dict:
    args = [str(exe), "fairness", str(seed), f"flows={a.flows}", f"rate_gbps={a.gbps}",
            f"bneck_gbps={a.gbps}", f"T_us={a.T_us}", f"delay_us={a.delay_us}",
            f"ack_every={a.ack_every}", f"N={a.n}", f"step_us={a.step_ms * 1000}",
            f"bin_us={a.bin_us}", f"late_us={a.late_us}", f"int_noq={int(a.int_noq)}",
            f"int_at={a.int_at}", f"eta={a.eta}", f"buf_kb={buf_kb(a)}",
            f"tick_ns={a.tick_ns}", f"qlen_scale={a.qlen_scale}"]
    if a.w_ai:
        args.append(f"w_ai={a.w_ai}")
    if a.max_stage is not None:
        args.append(f"max_stage={a.max_stage}")
    r = subprocess.run(args, capture_output=True, text=True, timeout=3600)
    if r.returncode:
        raise SystemExit(f"harness {' '.join(args[1:])}: exit {r.returncode} {r.stderr.strip()}")
    return json.loads(r.stdout)


def bxt_frames(a: argparse.Namespace) -> float:
    """B x T in full frames of the wire (1,514 bytes): one frame's share of U is 1 / this."""
    return a.gbps * 1e9 / 8 * a.T_us * 1e-6 / FRAME


def buf_kb(a: argparse.Namespace) -> int:
    """The port's buffer: 1 MB, or 8 B x T where that is more (a join at W_init = B x T
    on top of the others' eta B x T must not overflow it)."""
    return a.buf_kb or max(1000, int(8 * a.gbps * 1e9 / 8 * a.T_us * 1e-6 / 1000))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flows", type=int, default=4)
    ap.add_argument("--step-ms", type=int, default=1000)
    ap.add_argument("--T-us", type=int, default=210)
    ap.add_argument("--delay-us", type=int, default=80)
    ap.add_argument("--ack-every", type=int, default=4)
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--w-ai", type=float, default=0)
    ap.add_argument("--late-us", type=int, default=0)
    ap.add_argument("--bin-us", type=int, default=1000)
    ap.add_argument("--int-at", choices=("end", "deq"), default="end",
                    help="qLen: the queue behind the packet when its transmission ended "
                         "(end, the harness's default) or began (deq, a switch's dequeue)")
    ap.add_argument("--int-noq", action="store_true",
                    help="the switch stamps qLen 0: U from txRate alone (which term a "
                         "behaviour comes from)")
    ap.add_argument("--gbps", type=int, default=1, help="the hosts' and the port's rate")
    ap.add_argument("--eta", type=float, default=0.95)
    ap.add_argument("--max-stage", type=int, default=None, help="maxStage (default 5)")
    ap.add_argument("--buf-kb", type=int, default=0,
                    help="the port's buffer (default max(1 MB, 8 B x T))")
    ap.add_argument("--tick-ns", type=int, default=1000,
                    help="the simulated clock's step (below 1000 for 10 Gbit/s and more)")
    ap.add_argument("--qlen-scale", type=int, default=1,
                    help="the port stamps K x its queue: one frame weighs in U as at a B x T "
                         "K times smaller, nothing else changed")
    ap.add_argument("--json", action="store_true",
                    help="also print one JSON line of the per-phase figures")
    ap.add_argument("--seeds", default="1,2,3")
    a = ap.parse_args()
    seeds = [int(s) for s in a.seeds.split(",")]
    with tempfile.TemporaryDirectory() as d:
        exe = harness_build.build(pathlib.Path(d) / "harness")
        t = time.monotonic()
        with ThreadPoolExecutor(2) as ex:
            runs = list(ex.map(lambda s: run(exe, s, a), seeds))
        secs = time.monotonic() - t
    T = a.T_us * 1000
    print(f"harness fairness: {a.flows} flows, a join every {a.step_ms} ms then leaves, "
          f"{a.gbps} Gbit/s, T {a.T_us} us, B x T {bxt_frames(a):.1f} frames (one frame "
          f"{1 / bxt_frames(a):.4f} of U, 1 - eta {1 - a.eta:.2f}), eta {a.eta}, maxStage "
          f"{5 if a.max_stage is None else a.max_stage}, one-way delay {a.delay_us} us, "
          f"ACK every {a.ack_every}, buffer {buf_kb(a)} KB, tick {a.tick_ns} ns, "
          f"W_AI {runs[0]['w_ai']:.1f} bytes (N {a.n}), timer late mean {a.late_us} us"
          f"{', qLen stamped 0' if a.int_noq else ''}"
          f"{f', qLen stamped x {a.qlen_scale}' if a.qlen_scale != 1 else ''}, qLen at {a.int_at}; "
          f"seeds {a.seeds} ({secs:.0f} s)")
    print("phase  flows  Jain whole phase  Jain 2nd half (lab)  least 10 ms bin  "
          "converged ms (T, W^c updates)  predicted updates  rates 2nd half Mbit/s")
    per_seed = [fairness_trace.analyse(r) for r in runs]
    for k in range(len(per_seed[0])):
        ph = [p[k] for p in per_seed]
        if ph[0].flows < 2:
            print(f"{k + 1:5}  {ph[0].flows:5}  (one flow) rate "
                  + " / ".join(f"{p.rates_bps[0] / 1e6:.0f}" for p in ph))
            continue
        conv = ["never" if p.converged_ns is None else
                f"{p.converged_ns / 1e6:.0f} ({p.converged_ns / T:.0f} T, "
                f"{p.updates_to_converge})" for p in ph]
        pred = fairness_trace.predicted_updates(ph[0].flows, 0.95, a.n) if ph[0].joined \
            and not a.w_ai else float("nan")
        print(f"{k + 1:5}  {ph[0].flows:5}  "
              + " ".join(f"{p.jain_whole:.3f}" for p in ph) + "   "
              + " ".join(f"{p.jain_second_half:.3f}" for p in ph) + "   "
              + " ".join(f"{p.jain_min_bin:.3f}" for p in ph) + "   "
              + "; ".join(conv) + f"   {pred:.0f}   "
              + " | ".join("/".join(f"{x / 1e6:.0f}" for x in p.rates_bps) for p in ph))
    least = [min(p.jain_second_half for p in ps if p.flows >= 2) for ps in per_seed]
    util = [statistics.fmean(sum(p.rates_bps) for p in ps) / 1e9 for ps in per_seed]
    least_whole = [min(p.jain_whole for p in ps if p.flows >= 2) for ps in per_seed]
    if a.json:
        print(json.dumps({
            "gbps": a.gbps, "T_us": a.T_us, "bxt_frames": round(bxt_frames(a), 1),
            "eta": a.eta, "max_stage": a.max_stage, "ack_every": a.ack_every,
            "int_at": a.int_at, "int_noq": a.int_noq, "w_ai": runs[0]["w_ai"],
            "least_second_half": least, "least_whole": least_whole,
            "phases": [[{"flows": p.flows, "jain_whole": p.jain_whole,
                         "jain_second_half": p.jain_second_half,
                         "converged_T": None if p.converged_ns is None
                         else p.converged_ns / T,
                         "rates_mbps": [round(x / 1e6) for x in p.rates_bps]}
                        for p in ps] for ps in per_seed]}))
    print(f"least phase (2nd half): {' '.join(f'{x:.3f}' for x in least)}; "
          f"(whole phase): {' '.join(f'{x:.3f}' for x in least_whole)}; "
          f"mean phase utilisation {' '.join(f'{x:.3f}' for x in util)}; port drops "
          f"{[r['port_drops'] for r in runs]}")


if __name__ == "__main__":
    main()
