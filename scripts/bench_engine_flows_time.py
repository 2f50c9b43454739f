#!/usr/bin/env python3
"""The times of scripts/bench_engine_flows.sh: the engine's protocol harness
run again and again, every flow count in every round (and, with a second
build, both builds), which goes first changing from round to round.

Timings on the 2-core VM swing with its other load and the hypervisor's by
more than the figure measured (docs/transport.md "Flows": one flow's median
went from 587 to 734 ns between two sittings of 41 runs a minute apart), so
each round runs the flow counts back to back and the ratio to one flow is
also taken within each round (a run at N flows against the same build's run
at the first count in that round) and its median printed: the machine's
drift from round to round cancels in it.  Prints, per build and count, the
median and least ns per data packet, their ratios to the first count's,
that paired ratio and the simulated kernel's median.

    scripts/bench_engine_flows_time.py REPS TICK_US THIS_EXE [BASE_EXE] -- FLOWS...
"""
import json
import os
import statistics
import subprocess
import sys


# RATE (scripts/bench_engine_flows.sh): the flows' aggregate rate, Gbit/s; the
# simulated time grows as it falls, so that a run holds as many packets
RATE = int(os.environ.get("RATE", "10"))
MS = max(20, 200 // RATE)


def one_run(exe: str, rep: int, flows: int, tick_us: str) -> dict:
    """One run of `scale`: its JSON (ns_per_pkt, kernel_ns_per_pkt, ...)."""
    out = subprocess.run([exe, "scale", str(rep), f"flows={flows}", f"ms={MS}",
                          "rx_peer_max=0", f"tick_us={tick_us}", f"rate_gbps={RATE}"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"bench_engine_flows: {exe} scale flows={flows} failed "
                 f"(exit {out.returncode}): {out.stderr.strip()}")
    return json.loads(out.stdout)


def main() -> None:
    args = sys.argv[1:]
    if "--" not in args or len(args) < 5:
        sys.exit(__doc__)
    cut = args.index("--")
    head, flows = args[:cut], [int(n) for n in args[cut + 1:]]
    if len(head) not in (3, 4) or not flows:
        sys.exit(__doc__)
    reps, tick_us = int(head[0]), head[1]
    builds = {"this": head[2]} | ({"base": head[3]} if len(head) == 4 else {})
    runs = {b: {n: [] for n in flows} for b in builds}
    how = ", this tree and base alternated" if len(builds) == 2 else ""
    print(f"engine CPU per data packet (both engines: sender and receiver), {MS} ms simulated, "
          f"{RATE} Gbit/s in all, tick {tick_us} us, {reps} rounds of every count{how}")
    print(f"machine: {os.cpu_count()} cores, load average "
          f"{' '.join(open('/proc/loadavg').read().split()[:3])}")
    for rep in range(1, reps + 1):
        order = [(b, n) for n in flows for b in builds]
        for b, n in (order if rep % 2 else order[::-1]):
            runs[b][n].append(one_run(builds[b], rep, n, tick_us))
    o = runs["this"][flows[0]][-1]
    print(f"state a packet's flow touches: {o['hot_bytes_per_flow']} B a flow (of sender "
          f"{o['sender_bytes']} B + receiver {o['receiver_bytes']} B), "
          f"{o['hot_bytes_per_flow'] * 10000 / 1e6:.1f} MB at 10,000 flows")
    for b in builds:
        first = [r["ns_per_pkt"] for r in runs[b][flows[0]]]
        for n in flows:
            ns = [r["ns_per_pkt"] for r in runs[b][n]]
            paired = statistics.median(x / y for x, y in zip(ns, first))
            kern = statistics.median(r["kernel_ns_per_pkt"] for r in runs[b][n])
            tag = f"{b:>4} " if len(builds) == 2 else ""
            print(f"{tag}{n:>6} flows: median {statistics.median(ns):5.0f} ns "
                  f"({statistics.median(ns) / statistics.median(first):.2f}x), least "
                  f"{min(ns):5.0f} ns ({min(ns) / min(first):.2f}x), within a round "
                  f"{paired:.2f}x one flow; simulated kernel {kern:.0f} ns")
    print(f"load average after: {' '.join(open('/proc/loadavg').read().split()[:3])}")


if __name__ == "__main__":
    main()
