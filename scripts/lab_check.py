#!/usr/bin/env python3
"""Can this machine sustain a lab's link rates?  (docs/lab.md, "Defaults")

    sudo python3 scripts/lab_check.py [--topology dumbbell,incast,tree]
                                      [--offloads trains] [--seconds 5] [--rounds 1]

A benchmark, not a test: it prints figures and fails only when it cannot
produce them.  Needs root and iperf3.

For each topology (bundled name or file) and offload mode it brings the lab
up (under the name ``hpccdc-<random>`` so it never meets a lab of the same
file), then runs kernel TCP (iperf3, cubic) in two workloads:

  single   one flow over the longest path (dumbbell h1->r1 across the
           bottleneck, incast h1->r1, tree h1->h3: 3 switch hops);
  busy     every host busy at once: dumbbell h1->r1, h2->r2, h3->r1 and
           r1->h1, r2->h2 back; incast h1..h7->r1 (and r1->h1); tree
           h1->h3, h2->h4, h3->h1, h4->h2, h5->h1.

After one second of warm-up it measures for --seconds: each flow's goodput
(iperf3's receiver figure), every switch port's utilisation (bytes its
qdisc sent, over the interval, over its rate: the ports at 95 %+ are the
bottlenecks doing their job), drops, the mean and peak backlog of every
switch port polled every 5 ms (on a port that is no bottleneck, such as
incast's s1:p8 under the single flow, these show the trains the offload
mode lets through: docs/lab.md, "Offloads"), and the CPU use of the whole
machine (/proc/stat: busy share of all cores, and the softirq share,
which is where forwarding runs; other work on the machine counts too).  The
verdict per run: "queue-bound" when the busiest port is at >= 95 % of its
rate, else "CPU-bound?".

Everything it set up is removed on exit, also on Ctrl-C (the Lab context
manager).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import secrets
import subprocess
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "daemon"))

from hpccd.lab import queues  # noqa: E402
from hpccd.lab.netns import Lab  # noqa: E402
from hpccd.lab.topology import Topology  # noqa: E402

WORKLOADS = {
    "dumbbell": {"single": [("h1", "r1")],
                 "busy": [("h1", "r1"), ("h2", "r2"), ("h3", "r1"), ("r1", "h1"),
                          ("r2", "h2")]},
    "incast": {"single": [("h1", "r1")],
               "busy": [(f"h{i}", "r1") for i in range(1, 8)] + [("r1", "h1")]},
    "tree": {"single": [("h1", "h3")],
             "busy": [("h1", "h3"), ("h2", "h4"), ("h3", "h1"), ("h4", "h2"), ("h5", "h1")]},
}
BASE_PORT = 15201


def cpu_times() -> tuple[int, int, int]:
    """(busy, softirq, total) jiffies over all CPUs."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
    total = sum(v[:8])
    return total - idle - iowait, softirq, total


class PortCounters:
    """Reads every switch port's queue counters through netlink sockets
    opened once (opening one costs a fork, slow on a busy machine), each
    reading with its own timestamp, so that a slow read does not skew a
    port's rate."""

    def __init__(self, lab: Lab):
        from pyroute2 import NetNS

        self.handles = {s: NetNS(lab.netns(s), flags=0) for s in lab.topology.switches}
        self.ports = [(s, i.ifname, i.peer, self.handles[s].link_lookup(ifname=i.ifname)[0])
                      for s in self.handles for i in lab.ifaces if i.node == s]

    def read(self) -> dict[tuple[str, str], dict]:
        out = {}
        for s, ifname, peer, idx in self.ports:
            q = queues.read_queue(self.handles[s], idx)
            out[(s, ifname)] = {"t": time.monotonic(), "bytes": q["bytes"], "drops": q["drops"],
                                "peer": peer, "rate_bps": q["rate_bps"]}
        return out

    def close(self) -> None:
        for h in self.handles.values():
            h.close()


class BacklogPoller(threading.Thread):
    """Peak and mean backlog per switch port, polled every POLL_S."""

    POLL_S = 0.005

    def __init__(self, lab: Lab):
        super().__init__(daemon=True)
        self.lab, self.peak, self.stop = lab, {}, threading.Event()
        self.sum: dict = {}
        self.n = 0

    def run(self) -> None:
        from pyroute2 import NetNS

        handles = {s: NetNS(self.lab.netns(s), flags=0) for s in self.lab.topology.switches}
        try:
            idx = {(s, i.ifname): handles[s].link_lookup(ifname=i.ifname)[0]
                   for s in handles for i in self.lab.ifaces if i.node == s}
            while not self.stop.wait(self.POLL_S):
                self.n += 1
                for (s, ifn), ix in idx.items():
                    for q in handles[s].get_qdiscs(ix):
                        if q["parent"] == 0xFFFFFFFF:
                            b = queues.qdisc_stats(q)["backlog"]
                            self.peak[(s, ifn)] = max(self.peak.get((s, ifn), 0), b)
                            self.sum[(s, ifn)] = self.sum.get((s, ifn), 0) + b
        finally:
            for h in handles.values():
                h.close()


def run_workload(lab: Lab, flows: list[tuple[str, str]], seconds: float) -> dict:
    servers, clients = [], []
    for k, (src, dst) in enumerate(flows):
        servers.append(lab.popen(dst, ["iperf3", "-s", "-1", "-p", str(BASE_PORT + k)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    time.sleep(0.5)
    duration = seconds + 2
    for k, (src, dst) in enumerate(flows):
        clients.append(lab.popen(src, ["iperf3", "-c", lab.address(dst), "-p",
                                       str(BASE_PORT + k), "-t", str(duration), "-J"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    time.sleep(1.0)
    poller = BacklogPoller(lab)
    poller.start()
    counters = PortCounters(lab)
    try:
        b0, c0, t0 = counters.read(), cpu_times(), time.monotonic()
        time.sleep(seconds)
        b1, c1, t1 = counters.read(), cpu_times(), time.monotonic()
    finally:
        counters.close()
        poller.stop.set()
        poller.join()
    goodput = []
    for (src, dst), c in zip(flows, clients):
        out, err = c.communicate(timeout=duration + 30)
        try:
            j = json.loads(out)
            goodput.append(j["end"]["sum_received"]["bits_per_second"])
        except (ValueError, KeyError):
            raise SystemExit(f"iperf3 {src}->{dst} failed: {err or out[-500:]}")
    for s in servers:
        s.wait(timeout=10)
    dt = t1 - t0
    ports = {}
    for key, v in b1.items():
        sent = v["bytes"] - b0[key]["bytes"]
        dt = v["t"] - b0[key]["t"]
        ports[key] = {"util": sent * 8 / dt / v["rate_bps"], "mbps": sent * 8 / dt / 1e6,
                      "drops": v["drops"] - b0[key]["drops"], "peer": v["peer"],
                      "peak_backlog": poller.peak.get(key, 0),
                      "mean_backlog": poller.sum.get(key, 0) / max(1, poller.n)}
    busy = (c1[0] - c0[0]) / (c1[2] - c0[2])
    soft = (c1[1] - c0[1]) / (c1[2] - c0[2])
    return {"flows": flows, "goodput": goodput, "ports": ports, "cpu": busy, "softirq": soft,
            "seconds": t1 - t0}


def report(topo: str, mode: str, wl: str, r: dict) -> None:
    flows = ", ".join(f"{s}->{d} {g / 1e6:.0f}" for (s, d), g in zip(r["flows"], r["goodput"]))
    top = sorted(r["ports"].items(), key=lambda kv: -kv[1]["util"])
    best = top[0][1]["util"] if top else 0
    verdict = "queue-bound" if best >= 0.95 else "CPU-bound?"
    print(f"{topo:9s} {mode:6s} {wl:7s} goodput {sum(r['goodput']) / 1e6:6.0f} Mbit/s "
          f"[{flows}]  CPU {100 * r['cpu']:3.0f} % (softirq {100 * r['softirq']:3.0f} %)  "
          f"{verdict}")
    for (sw, ifn), p in top[:4]:
        if p["util"] < 0.05:
            break
        print(f"{'':27s}{sw}:{ifn}->{p['peer']:5s} {100 * p['util']:5.1f} % of rate "
              f"({p['mbps']:.0f} Mbit/s), drops {p['drops']}, backlog "
              f"mean {p['mean_backlog'] / 1000:.1f} KB, peak {p['peak_backlog'] / 1000:.1f} KB")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topology", default="dumbbell,incast,tree")
    ap.add_argument("--offloads", default="trains",
                    help="comma-separated offload modes: trains,frames,on,off")
    ap.add_argument("--workloads", default="single,busy")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--burst-us", type=int, default=None,
                    help="override HTB_BURST_US (the HTB bucket, microseconds at link rate)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("lab_check: needs root (network namespaces)", file=sys.stderr)
        return 2
    if args.burst_us is not None:
        queues.HTB_BURST_US = args.burst_us
    print(f"HTB bucket {queues.HTB_BURST_US} us at link rate; {os.cpu_count()} CPUs; "
          f"load average before: {os.getloadavg()[0]:.2f}")
    modes = args.offloads.split(",")
    for name in args.topology.split(","):
        topo = Topology.load(name)
        wls = WORKLOADS.get(topo.name, {"single": [next(topo.host_pairs())]})
        for rnd in range(args.rounds):
            # ABBA: a drift of the machine's speed favours no mode
            for mode in (modes if rnd % 2 == 0 else modes[::-1]):
                with Lab(topo, name=f"hpccdc-{secrets.token_hex(3)}",
                                offloads=mode) as lab:
                    for wl in args.workloads.split(","):
                        if wl in wls:
                            report(topo.name, mode, wl, run_workload(lab, wls[wl],
                                                                     args.seconds))
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
