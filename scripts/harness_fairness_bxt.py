#!/usr/bin/env python3
"""Issue 15 section 4: does HPCC's fairness depend on B x T?  Runs
scripts/harness_fairness.py (the lab's fairness experiment on the engine's
own code, a simulated clock: load-free) over a list of settings and prints
one table row per setting: B x T in frames, the least phase's Jain index
(whole phase and second half) per seed, how long the slowest join took to
bring Jain(W) to 0.98 for good (in T), and the rates of the four-flow phase.

  --grid bxt   the link's B x T from 17 to 433 frames (1, 2, 5, 10, 25 Gbit/s
               at the lab's T = 210 us; 1 Gbit/s at T = 420, 1000, 2000 us with
               the delay scaled), INT at the dequeue, an ACK every 1 and 4
  --grid eta   the lab's 17 frames with eta 0.95 / 0.9 / 0.85 / 0.8, maxStage
               0 / 5, an ACK every 1 and 4 (W_AI follows eta by the rule of
               thumb, W_init (1 - eta) / N)

    .venv/bin/python scripts/harness_fairness_bxt.py --grid bxt [--seeds 1,2,3]
"""
from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent


def tick_ns(gbps: int) -> int:
    """A step of about a fifth of a frame's time on the wire (12 us at 1 Gbit/s),
    1 us at most: the port's queue and the paced sends are resolved finer
    than a frame."""
    return min(1000, {1: 1000, 2: 500, 5: 250, 10: 250}.get(gbps, 100))


def bxt_grid() -> list[list[str]]:
    out = []
    for ack in (1, 4):
        for gbps, T, delay in ((1, 210, 80), (2, 210, 80), (1, 420, 160), (5, 210, 80),
                               (1, 1000, 380), (10, 210, 80), (1, 2000, 760),
                               (25, 210, 80)):
            # a join needs about 700 W^c updates, one a T ([HPCC] rule of thumb):
            # phases long enough for that at the larger T
            step = max(1000, int(T * 2.5))
            out.append([f"--gbps={gbps}", f"--T-us={T}", f"--delay-us={delay}",
                        f"--ack-every={ack}", f"--step-ms={step}", f"--tick-ns={tick_ns(gbps)}",
                        "--int-at=deq"])
    return out


def eta_grid() -> list[list[str]]:
    out = []
    for ack in (1, 4):
        for eta in (0.95, 0.9, 0.85, 0.8):
            for ms in (5, 0):
                out.append(["--gbps=1", "--T-us=210", "--delay-us=80", f"--ack-every={ack}",
                            f"--eta={eta}", f"--max-stage={ms}", "--int-at=deq"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grid", choices=("bxt", "eta"), default="bxt")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--only", help="run the rows whose arguments contain this text")
    a, extra = ap.parse_known_args()
    grid = bxt_grid() if a.grid == "bxt" else eta_grid()
    if a.only:
        grid = [g for g in grid if a.only in " ".join(g)]
    print("B x T frames  Gbit/s  T us  eta   maxStage  ACK every  W_AI B  least phase Jain "
          "whole / 2nd half (per seed)  slowest join to Jain(W) 0.98 (T)  4 flows Mbit/s (seed 1)",
          flush=True)
    for g in grid:
        r = subprocess.run([sys.executable, str(HERE / "harness_fairness.py"), *g, *extra,
                            f"--seeds={a.seeds}", "--json"], capture_output=True, text=True)
        if r.returncode:
            raise SystemExit(f"{' '.join(g)}: {r.stderr.strip()}")
        d = json.loads(r.stdout.strip().splitlines()[-2])
        slow = []
        for ps in d["phases"]:
            joins = [p for k, p in enumerate(ps) if p["flows"] >= 2 and k < len(ps) // 2 + 1]
            c = [p["converged_T"] for p in joins]
            slow.append("never" if any(x is None for x in c) else f"{max(c):.0f}")
        four = next(p for p in d["phases"][0] if p["flows"] == max(q["flows"] for q in
                                                                 d["phases"][0]))
        print(f"{d['bxt_frames']:12.1f}  {d['gbps']:6}  {d['T_us']:4}  {d['eta']:<4}  "
              f"{5 if d['max_stage'] is None else d['max_stage']:8}  {d['ack_every']:9}  "
              f"{d['w_ai']:6.1f}  "
              + " ".join(f"{x:.3f}" for x in d["least_whole"]) + " / "
              + " ".join(f"{x:.3f}" for x in d["least_second_half"]) + "  "
              + " ".join(slow) + "  " + "/".join(str(x) for x in four["rates_mbps"]),
              flush=True)


if __name__ == "__main__":
    main()
