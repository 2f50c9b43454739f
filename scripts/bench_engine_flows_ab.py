#!/usr/bin/env python3
"""Two builds of the engine's protocol harness timed alternately
(scripts/bench_engine_flows.sh with BASE=: it builds them and calls this).

Run by run, at each flow count, the base build and this tree's build run
the harness's `scale` scenario once each, the first of the two changing
every run, so that the machine's other load (docs/transport.md "Flows":
timings on the shared 2-core machine swing with it more than the change
being measured) weighs on both alike.  Prints, for each build, the median
and least ns per data packet at each flow count and their ratios to the
same build's one flow (the first count given).

    scripts/bench_engine_flows_ab.py REPS TICK_US BASE_EXE THIS_EXE FLOWS...
"""
import json
import os
import statistics
import subprocess
import sys


def one_run(exe: str, rep: int, flows: int, tick_us: str) -> float:
    """ns per data packet of the engines' turns in one run of `scale`."""
    out = subprocess.run([exe, "scale", str(rep), f"flows={flows}", "ms=20", "rx_peer_max=0",
                          f"tick_us={tick_us}"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"bench_engine_flows_ab: {exe} scale flows={flows} failed "
                 f"(exit {out.returncode}): {out.stderr.strip()}")
    return float(json.loads(out.stdout)["ns_per_pkt"])


def main() -> None:
    if len(sys.argv) < 6:
        sys.exit(__doc__)
    reps, tick_us, base, this = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    flows = [int(n) for n in sys.argv[5:]]
    builds = {"base": base, "this": this}
    ns = {b: {n: [] for n in flows} for b in builds}
    print(f"engine CPU per data packet (both engines), 20 ms simulated, tick {tick_us} us, "
          f"{reps} runs each, base and this tree alternated run by run")
    print(f"machine: {os.cpu_count()} cores, load average {open('/proc/loadavg').read().split()[:3]}")
    for rep in range(1, reps + 1):
        for n in flows:
            order = list(builds) if rep % 2 else list(builds)[::-1]
            for b in order:
                ns[b][n].append(one_run(builds[b], rep, n, tick_us))
    for b in builds:
        med1, least1 = statistics.median(ns[b][flows[0]]), min(ns[b][flows[0]])
        for n in flows:
            med, least = statistics.median(ns[b][n]), min(ns[b][n])
            print(f"{b:>4} {n:>6} flows: median {med:6.0f} ns {med / med1:.2f}x one flow; "
                  f"least {least:6.0f} ns {least / least1:.2f}x")
    print(f"load average after: {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
