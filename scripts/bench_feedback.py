#!/usr/bin/env python3
"""Benchmark: feedback packets per data packet, Rx-HPCC against sender-based
HPCC side by side, with the bottleneck's utilisation and queue, and the cost
of the feedback integrity tag per ACK (issue 15 sections 2 and 3).

The engine's own protocol code (fastpath/transport/, rings.c aside) runs in the
harness of tests/unit/engine/: two engines on a simulated clock, joined by a
link behind a switch port of --gbps that stamps each DATA's INT hop when it
leaves the port's queue ([HPCC] section 4.1).  --flows flows of --bytes start
together, once with sender HPCC (the INT echoed in an ACK per packet, m = 1)
and once with Rx-HPCC (the receiver's W in one ACK per T), same seed, same
port, same T.  The simulated clock makes the figures independent of the
machine's load; they are the protocol's, not the host's CPU's.

--lab runs the same comparison with real packets instead: one flow of each
algorithm through the bundled dumbbell's 1 Gbit/s bottleneck (software INT
switch, real queue; root), interleaved --reps times, an ACK per packet for
sender HPCC (the paper's NIC), and reports the feedback per data packet the
sender received, the bottleneck's utilisation and queue over the flow's steady
state and the machine's CPU (figures of the shared two cores as much as of
the algorithms: say what else ran).

With valgrind installed, the instructions the tag costs per ACK are counted
with callgrind over one transfer: hpccd_wire_tag_span as the receiver's
send_feedback and the sender's on_feedback call it, against the whole of
those two.

    .venv/bin/python scripts/bench_feedback.py [--flows 4] [--bytes 2000000]
    sudo .venv/bin/python scripts/bench_feedback.py --lab [--reps 3]
"""
from __future__ import annotations

import argparse
import json
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "unit" / "engine"))

import harness_build  # noqa: E402
from bench_report import machine_line, median, table  # noqa: E402


def run(exe: pathlib.Path, *args: str) -> dict:
    r = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=600)
    if r.returncode:
        raise SystemExit(f"harness {' '.join(args)}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def tag_cost(exe: pathlib.Path, tmp: pathlib.Path, *args: str) -> dict | None:
    """Instructions per ACK of the tag (hpccd_wire_tag_span, as called by the
    receiver's send_feedback and the sender's on_feedback) and of those two
    functions, one harness run (`args`) under callgrind; None without valgrind."""
    if not shutil.which("valgrind") or not shutil.which("callgrind_annotate"):
        return None
    out = tmp / "callgrind.out"
    r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", str(exe),
                        *args], capture_output=True, text=True, timeout=600)
    if r.returncode:
        raise SystemExit(f"callgrind: {r.stderr[-2000:]}")
    acks = json.loads(r.stdout)["acks"]
    ann = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--tree=caller", str(out)],
                         capture_output=True, text=True).stdout
    incl: dict[str, int] = {}
    by_caller: dict[tuple[str, str], int] = {}
    callers: list[tuple[str, int]] = []
    for line in ann.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+([<*])\s+\S*:(\w+)\s", line)
        if not m:
            callers = []
            continue
        cost, kind, fn = int(m.group(1).replace(",", "")), m.group(2), m.group(3)
        if kind == "<":
            callers.append((fn, cost))
        else:
            incl.setdefault(fn, cost)
            for c, v in callers:
                by_caller[(fn, c)] = v
            callers = []
    need = [("hpccd_wire_tag_span", "send_feedback"), ("hpccd_wire_tag_span", "on_feedback")]
    if not all(k in by_caller for k in need) or not all(
            f in incl for f in ("send_feedback", "on_feedback")):
        return {"error": "callgrind did not show hpccd_wire_tag_span under send_feedback and "
                         "on_feedback"}
    return {"acks": acks, "tag_rx": by_caller[need[0]] / acks,
            "tag_tx": by_caller[need[1]] / acks, "send_feedback": incl["send_feedback"] / acks,
            "on_feedback": incl["on_feedback"] / acks}


def lab_runs(reps: int, nbytes: int) -> None:
    """Hpcc and rx-hpcc, one flow each per repetition, through the dumbbell."""
    import statistics

    sys.path[:0] = [str(ROOT / "daemon"), str(ROOT / "tests"), str(ROOT / "tests" / "integration")]
    import test_transport as tt                      # its measurement, one definition
    from conftest import lab_ctx, transport_engines

    runs: dict[str, list[dict]] = {"hpcc": [], "rx-hpcc": []}
    with lab_ctx("dumbbell") as lab:
        lab.probe("h1", "r1")
        for i in range(reps):
            for algo in runs:
                with transport_engines(lab, ack_every=1,
                                       rx_hpcc={"T_ns": tt.T_NS, "line_rate_bps": tt.LINE}) as eng:
                    r = tt._run_hpcc_one_flow(lab, eng, nbytes, algo=algo)
                runs[algo].append(r)
                print(f"rep {i + 1} {algo:8s}: feedback/data {r['feedback'] / r['pkts']:.3f} "
                      f"({r['feedback']} for {r['pkts']}; windows {r['rx_windows']}), "
                      f"utilisation {r['util']:.4f}, queue p50/p99/max {r['q50']}/{r['q99']}/"
                      f"{r['qmax']} B, machine CPU {r['cpu_busy']:.0%}, srtt "
                      f"{r['srtt_us']:.0f} us", flush=True)
    print(f"\ndumbbell, 1 Gbit/s bottleneck, T = {tt.T_NS // 1000} us, {nbytes} bytes, "
          f"{reps} runs each (medians); {machine_line()}")
    print(table(["algo", "feedback/data", "utilisation", "queue p50 / p99 B", "machine CPU"],
                [[algo, f"{statistics.median(r['feedback'] / r['pkts'] for r in rs):.3f}",
                  f"{median(rs, 'util'):.4f}",
                  f"{median(rs, 'q50'):.0f} / {median(rs, 'q99'):.0f}",
                  f"{median(rs, 'cpu_busy'):.0%}"] for algo, rs in runs.items()]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--flows", type=int, default=4)
    ap.add_argument("--bytes", type=int, default=2_000_000)
    ap.add_argument("--gbps", type=int, default=10, help="the switch port's rate")
    ap.add_argument("--T-us", type=float, default=30.0, help="T of both algorithms")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--lab", action="store_true",
                    help="real packets through the bundled dumbbell instead (root)")
    ap.add_argument("--reps", type=int, default=3, help="--lab: repetitions")
    ap.add_argument("--lab-bytes", type=int, default=100_000_000, help="--lab: flow size")
    a = ap.parse_args(argv)
    if a.lab:
        lab_runs(a.reps, a.lab_bytes)
        return 0
    with tempfile.TemporaryDirectory() as d:
        tmp = pathlib.Path(d)
        exe = harness_build.build(tmp / "harness")
        print(f"{a.flows} flows x {a.bytes} B through a {a.gbps} Gbit/s port, T = {a.T_us} us, "
              "INT on every DATA (stamped at departure), simulated clock\n")
        cols = ("algo", "seed", "data", "feedback", "fb/data", "windows", "util", "q p50 KB",
                "q p99 KB", "q max KB", "ms")
        out = []
        for seed in a.seeds.split(","):
            for algo in ("hpcc", "rx-hpcc"):
                r = run(exe, "bneck", seed, f"algo={algo}", f"flows={a.flows}",
                        f"bytes={a.bytes}", f"bneck_gbps={a.gbps}", f"T_us={a.T_us}")
                if r["done_exact"] != a.flows:
                    raise SystemExit(f"{algo}: only {r['done_exact']} flows exact: {r}")
                out.append([algo, seed, r["data_frames"], r["feedback_frames"],
                            f"{r['fb_per_data']:.3f}", r["windows"], f"{r['util']:.3f}",
                            r["q_p50_kb"], r["q_p99_kb"], r["q_max_kb"], r["ms"]])
        print(table(cols, out))
        for what, args in (("ACK without INT echo (dctcp, 2 MB)",
                             ("transfer", "1", "bytes=2000000")),
                            ("ACK with the INT echo of a 5-hop room (hpcc, 2 MB)",
                             ("bneck", "1", "algo=hpcc", "flows=1", "bytes=2000000",
                              f"T_us={a.T_us}"))):
            c = tag_cost(exe, tmp, *args)
            if c is None:
                print("\n(valgrind not installed: no instruction counts)")
                break
            if "error" in c:
                print(f"\ntag cost: {c['error']}")
                continue
            print(f"\nintegrity tag, instructions per ACK, {what} (callgrind, {c['acks']} "
                  f"ACKs, m = 1):\n"
                  f"  receiver: the tag {c['tag_rx']:.0f} of send_feedback "
                  f"{c['send_feedback']:.0f}\n"
                  f"  sender:   the tag {c['tag_tx']:.0f} of on_feedback "
                  f"{c['on_feedback']:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
