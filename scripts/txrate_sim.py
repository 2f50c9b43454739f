#!/usr/bin/env python3
"""[HPCC] section 3.4, Figure 6 on the engine's own code: the queue of a
2-to-1 congestion with HPCC computing U from txRate and from rxRate, in the
engine's protocol harness (tests/unit/engine/harness.c: the transport
engine's C code, a simulated 10 Gbit/s switch port that stamps INT at
departure, a simulated clock; no CPU in the way).  The lab's
``hpccctl experiment txrate-vs-rxrate`` runs the same comparison on real
packets, where two shared cores cannot fill the link and the queue, which
is where rxRate differs from txRate, stays empty (docs/experiments.md).

    .venv/bin/python scripts/txrate_sim.py [--seeds 1,2,3] [--out docs/results/txrate-sim]

Prints, per seed and variant, the start's queue peak, when it drained
(below 2 KB), the highest queue in the 300 us after that (the
oscillation), the port's use and the queue's standard deviation; writes
txrate-sim.png (the queue over the first 400 us, the first seed) and
txrate-sim.csv.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]


def build(where: pathlib.Path) -> pathlib.Path:
    sys.path.insert(0, str(ROOT / "tests" / "unit" / "engine"))
    try:
        import harness_build
    finally:
        sys.path.pop(0)
    return harness_build.build(where / "harness")


def one(exe: pathlib.Path, seed: int, rxrate: int) -> dict:
    r = subprocess.run([str(exe), "bneck", str(seed), "flows=2", "algo=hpcc",
                        "bytes=5000000", "bneck_gbps=10", "T_us=30", f"rxrate={rxrate}",
                        "use_bin_us=30", "qtrace_us=2"], capture_output=True, text=True,
                       timeout=300)
    if r.returncode:
        raise SystemExit(f"harness failed: {r.stderr[-500:]}")
    d = json.loads(r.stdout)
    tr = d["qtrace"]
    peak = max(range(len(tr)), key=lambda i: tr[i][1])
    drained = next((i for i in range(peak, len(tr)) if tr[i][1] < 2000), len(tr) - 1)
    d["peak_kb"] = tr[peak][1] / 1e3
    d["drained_us"] = tr[drained][0]
    d["second_kb"] = max((q for t, q in tr[drained:] if t < tr[drained][0] + 300),
                         default=0) / 1e3
    return d


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--out", default=str(ROOT / "docs" / "results" / "txrate-sim"))
    args = ap.parse_args()
    seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        exe = build(pathlib.Path(tmp))
        runs = {(s, rx): one(exe, s, rx) for s in seeds for rx in (0, 1)}
    print(f"{'seed':>4}  {'HPCC with':<9}  {'peak KB':>7}  {'drained us':>10}  "
          f"{'then max KB':>11}  {'port use':>8}  {'use sd':>6}  {'q sd KB':>7}")
    for (s, rx), d in runs.items():
        print(f"{s:>4}  {'rxRate' if rx else 'txRate':<9}  {d['peak_kb']:7.1f}  "
              f"{d['drained_us']:10d}  {d['second_kb']:11.2f}  {d['util']:8.3f}  "
              f"{d['use_sd']:6.3f}  {d['q_sd_kb']:7.2f}")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "txrate-sim.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["seed", "variant", "t_us", "queue_bytes"])
        for (s, rx), d in runs.items():
            w.writerows([s, "rxRate" if rx else "txRate", t, q] for t, q in d["qtrace"])
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 3.6))
    for rx, color in ((0, "C0"), (1, "C1")):
        tr = [(t, q) for t, q in runs[(seeds[0], rx)]["qtrace"] if t <= 400]
        ax.plot([t for t, _ in tr], [q / 1e3 for _, q in tr], color=color, lw=1.2,
                label=f"HPCC with {'rxRate' if rx else 'txRate'}")
    ax.set_xlabel("us from the first departure")
    ax.set_ylabel("queue (KB)")
    ax.set_title("2-to-1 at 10 Gbit/s, T = 30 us: the engine's code in the protocol "
                 f"harness (seed {seeds[0]})", fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "txrate-sim.png"), dpi=110)
    print(f"written: {args.out}/txrate-sim.png, txrate-sim.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
