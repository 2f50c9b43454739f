#!/usr/bin/env python3
"""Benchmark: TCP-side HPCC (issue 19) -- the probe engine's CPU idle and per
probed flow, and unmodified `iperf3 -C <cc>` through the lab's 1 Gbit/s
bottleneck side by side with cubic, bbr and dctcp.

The lab is tests/integration/test_tcp_cc_lab.py's (one definition):
h1 ==(2 Gbit/s)== s1 --(1 Gbit/s, 500 KB bfifo)--> h2, the software INT
switch on s1, xdp_host on both hosts, tc_tracker on h1, hpccd's struct_ops
"hpcc" and "dctcp" registered, and a TcpSide (the daemon's tcp_side
component without the rest of the daemon) probing h1's flows.

Printed:
- with --daemon-idle, only: the real hpccd (test_daemon_lab.py's lab and
  configuration), idle, its whole process's CPU per second and wakeups per
  second, and each thread's (main, hpccd-tp, hpccd-tcp-side, hpccd-metrics),
  with the transport component alone and with transport + tcp_side; then
  (--daemon-flows, 1 and 4 by default) the transport + tcp_side daemon's
  CPU per flow-second while `iperf3 -C hpcc -P n` sends --seconds through
  the lab, and its probes per flow-second;
- idle: CPU of this whole process (TcpSide's engine thread and everything
  else; the main thread sleeps) per idle second, with no TCP flow at all;
- per cc and flow count (--flows 1,2,4), median of --reps runs, interleaved:
  link utilisation (bytes the bottleneck port sent, from the INT switch's
  queue samples, which carry the port's tx byte counter, over the run after
  --warmup), queue p50 / p99 (KB and in BDPs of the idle base RTT), Jain's
  index of the streams' goodputs, retransmits; for hpcc also the engine
  thread's CPU per second and per flow, its CPU per probe and the part of
  it inside sendmmsg(), probes per call and wakeups per probe, probes per
  (kernel) RTT, the mean lateness of a probe after the event that allowed
  it, the CC's ACKs in each mode (the Reno fallback among them), the
  per-flow T the engine chose ([HPCC] section 5.1) and the medians of W,
  cwnd, srtt and the INT's queueing delay; HPCC's N is the run's flows;
- hpcc-w: hpcc with cwnd_rtt_gain = 0 (cwnd = W, R up to the line rate:
  the window before), interleaved with hpcc in the same run;
- the trains: hpcc and hpcc-w run with TcpSide's gso_max_segs (--gso-segs;
  by default hpccd.tcp_side.trains.segs_for with the idle base RTT: the
  longest train whose queue stays within one BDP, 3 segments here; h1's
  eth0 capped while they run), hpcc-nocap is
  hpcc with the interface left at the lab's cap (8 segments); every row
  prints the mean skb h1 sent (its eth0's tx bytes per packet: one GSO
  train per packet on veth) and the other ccs run with the lab's cap;
- hpcc-h4: hpcc with host_cap_t = 4 (the hosts' share of the RTT counted
  up to 4 T in cwnd instead of T), interleaved in the same run;
- hpcc-p15: hpcc with path_rate_gain = 1.5 (R up to 1.5 x the path's slowest
  link instead of 1 x);
- hpcc-ns: hpcc with path_rate_shared off (each flow's R up to the path's
  slowest link on its own, not the host's flows on that path together);
- hpcc-wc: hpcc with path_rate_work_conserving (a flow of such a group
  gets its W's part of the path's rate, or what the others' delivery rates
  leave of it if more: a part one flow leaves unused is lent to the others);
- hpcc-g05: hpcc with probe_gap_rtt = 0.5 (the next probe half an srtt
  after the last instead of one);
- hpcc-al: hpcc with app_limited_hold (an increase of W computed from a
  response whose interval the flow did not use its window in, fewer bytes
  acked than W per srtt, is not applied); every hpcc row prints the share
  of such intervals ("limited") and of W's increases computed from them;
- hpcc-t1: hpcc with trains of one segment (h1's gso_max_segs 1: the
  train rule's eighth of B x T divided among four flows, below its floor
  of 2);
- hpcc-s12: hpcc with solo_rate_gain = 1.25 (a flow alone on its path
  paced up to 1.25 x the link's rate instead of at most the link's: the
  kernel's pacer loses what its timer is late);
- hpcc-sg15, hpcc-sg2: the same with 1.5 and 2 x the link (2: the host
  link's own rate in the lab, R = W / T as HPCC writes it, unbounded by
  the bottleneck);
- hpcc-p12: hpcc with path_rate_gain = 1.25; hpcc-s3p12: that and
  3-segment trains;
- hpcc-pg: hpcc with pace_gain_max = 1.5 (the pacing rate written is the
  rate HPCC wants x a gain per flow that follows the pacer's measured loss,
  up to 1.5, lowered when the path's queue builds); hpcc-pg2: up to 2;
  hpcc-pg115: up to 1.15 (what four flows lost on the idle machine, 0.087
  of the link, made up; an srtt's overshoot at 1.15 x the link is about a
  BDP);
  every hpcc row prints each flow's pacer ratio (bits acked over the bits
  the rate HPCC wanted allowed, from its responses after the warm-up) and
  the median gain written;
- hpcc-s2, hpcc-s3, hpcc-s4: hpcc with trains of two, three and four
  segments (2: the rule before the queue bound; h1's
  gso_max_segs: the kernel's internal pacing sends one skb per timer
  firing, so a train's size is what a late pacing timer can make up);
- hpcc-s4n0: hpcc-s4 with the probe engine's thread at nice 0 instead of
  -10 (TcpSide's nice: a thread that wakes thousands of times a second at
  -10 preempts the sender at once);
- hpcc-s4sg11: hpcc-s4 with solo_rate_gain 1.1 (a flow alone on its path
  paced up to 1.1 x the link: what the pacer loses, asked for);
- hpcc-auto: hpcc with trains from the rule with the pacer's lateness
  (hpccd.tcp_side.trains.segs_for, pacer_late_ns: the PACER_LATE_Q
  quantile of the pacing timers' lateness measured over the hpcc rows run
  before it; put it after them in --ccs);
- pacedP-sN (e.g. paced120-s3): the control without HPCC, what the
  kernel's pacer itself delivers on this host: one cubic flow capped at P %
  of the bottleneck's rate, split evenly among the run's streams (iperf3
  --fq-rate, each stream's SO_MAX_PACING_RATE: the
  kernel's internal pacing, no fq here) in trains of N segments (h1's
  gso_max_segs); cubic's own rate (1.2 x cwnd / srtt) is above the cap
  while the queue is empty, so the cap is the rate written; its row adds
  what hpccd.tcp_side.trains.paced_share predicts from the run's timer
  lateness and mean skb ("model util"); an hpcc row adds the same for the
  rate HPCC's flows asked for after the warm-up (its share of the link
  printed as "asked") in trains of the row's cap;
- every row prints its pacing timers' lateness (p50 / p90 and expiries;
  hpccd.tcp_side.pacer: every flow of the host whose pacing timer fired;
  on this kernel cubic's flows fire it too);
- the senders (--procs): by default one `iperf3 -P N` client sends the N
  flows (iperf3 3.12 serves every stream of a client from one thread: a
  stall of that thread idles every flow at once); with --procs every
  (cc, N > 1) also runs as N `iperf3` clients of one stream each, N
  processes as N applications would be, interleaved, both rows printed
  (the "sender" column: -P or procs);
- --pcap DIR: the hpcc rows' trains as h1's eth0 sent them (tcpdump),
  replayed into a queue at the bottleneck's rate by
  scripts/queue_makeup.py: the queue each train found and, where it was
  one BDP or more, how many trains and distinct flows it held;
- the load average before and after: the two cores are shared.

    sudo .venv/bin/python scripts/bench_tcp_side.py --reps 5
    sudo .venv/bin/python scripts/bench_tcp_side.py --idle-only
    sudo .venv/bin/python scripts/bench_tcp_side.py --daemon-idle --idle-s 20
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import re
import signal
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
nan = float("nan")
# The rows of the table and the kernel CC each runs under.
KERNEL_CC = {"cubic": "cubic", "bbr": "bbr", "dctcp": "dctcp", "hpcc": "hpcc", "hpcc-w": "hpcc",
             "hpcc-nocap": "hpcc", "hpcc-h4": "hpcc", "hpcc-p15": "hpcc", "hpcc-ns": "hpcc",
             "hpcc-g05": "hpcc", "hpcc-wc": "hpcc", "hpcc-al": "hpcc",
             "hpcc-t1": "hpcc", "hpcc-s3": "hpcc", "hpcc-s4": "hpcc", "hpcc-p12": "hpcc",
             "hpcc-s3p12": "hpcc", "hpcc-s12": "hpcc", "hpcc-pg": "hpcc",
             "hpcc-pg2": "hpcc", "hpcc-pg115": "hpcc", "hpcc-sg15": "hpcc",
             "hpcc-sg2": "hpcc", "hpcc-auto": "hpcc", "hpcc-s2": "hpcc",
             "hpcc-s4n0": "hpcc", "hpcc-s4sg11": "hpcc"}
# pacedP-sN: cubic capped at P % of the link in trains of N segments
FIXED_ROW = re.compile(r"paced(\d+)-s(\d+)$")


def fixed_row(cc: str) -> tuple[float, int] | None:
    """(share of the link, segments) of a pacedP-sN row, else None."""
    m = FIXED_ROW.match(cc)
    return (int(m.group(1)) / 100, int(m.group(2))) if m else None


HPCC_ROWS = ("hpcc", "hpcc-w", "hpcc-nocap", "hpcc-h4", "hpcc-p15", "hpcc-ns", "hpcc-g05",
             "hpcc-wc", "hpcc-al", "hpcc-t1", "hpcc-s3", "hpcc-s4", "hpcc-p12", "hpcc-s3p12",
             "hpcc-s12", "hpcc-pg", "hpcc-pg2", "hpcc-pg115", "hpcc-sg15", "hpcc-sg2", "hpcc-auto",
             "hpcc-s2", "hpcc-s4n0", "hpcc-s4sg11")
sys.path[:0] = [str(ROOT / "daemon"), str(ROOT / "tests"), str(ROOT / "tests" / "integration")]

from bench_report import loadavg, machine_line as _machine_line, median, table  # noqa: E402
from hpccd.experiment.measure import jain  # noqa: E402


def machine_line() -> str:
    """bench_report's line, and how late a timed wait returns on this host
    before anything runs: the floor under the pacer's and the probe
    engine's lateness (hpccd.tcp_side.pacer.wake_floor)."""
    from hpccd.tcp_side.pacer import wake_floor
    w = wake_floor()
    return (f"{_machine_line()}; a thread's timed wait (30 us, slack 1 us) returns "
            f"p50 {w['p50_us']:.0f} / p90 {w['p90_us']:.0f} / p99 {w['p99_us']:.0f} us late")


DEFAULT_CCS = "cubic,bbr,dctcp,hpcc,hpcc-w,hpcc-nocap"


def thread_cpu_s(tid: int) -> float:
    """CPU time of one thread of this process, seconds: the scheduler's
    run time in ns (/proc/.../schedstat), not utime + stime, whose tick
    sampling aliases with a thread that wakes on a timer."""
    with open(f"/proc/self/task/{tid}/schedstat") as f:
        return int(f.read().split()[0]) / 1e9


def process_cpu_s() -> float:
    """CPU time of every thread of this process, seconds (schedstat)."""
    return sum(thread_cpu_s(int(t)) for t in os.listdir("/proc/self/task"))


def daemon_threads(pid: int) -> dict[int, tuple[str, int, int]]:
    """tid -> (name, run time ns, voluntary context switches) of every thread
    of process `pid`: the scheduler's run time (schedstat) and the times the
    thread went to sleep, so its wakeups.  The main thread is "main"; the
    others by their kernel name (hpccd-tp, hpccd-tcp-side, hpccd-metrics)."""
    out = {}
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                ns = int(f.read().split()[0])
            with open(f"/proc/{pid}/task/{t}/status") as f:
                st = dict(ln.split(":", 1) for ln in f.read().splitlines() if ":" in ln)
        except OSError:
            continue                                   # the thread ended meanwhile
        name = "main" if int(t) == pid else st["Name"].strip()
        out[int(t)] = (name, ns, int(st["voluntary_ctxt_switches"]))
    return out


def daemon_cost(pid: int, during) -> tuple[float, dict, float]:
    """Process `pid`'s CPU (cores) while `during()` runs, per thread name
    {name: (cores, wakeups a second)}, and the seconds it ran."""
    a, w0 = daemon_threads(pid), time.monotonic()
    during()
    b, w1 = daemon_threads(pid), time.monotonic()
    el = w1 - w0
    per: dict[str, list[float]] = {}
    for tid, (name, ns, vol) in b.items():
        _, ns0, vol0 = a.get(tid, (name, 0, 0))
        v = per.setdefault(name, [0.0, 0.0])
        v[0] += (ns - ns0) / 1e9 / el
        v[1] += (vol - vol0) / el
    return sum(v[0] for v in per.values()), per, el


def print_threads(per: dict) -> None:
    for name, (cores, wakeups) in sorted(per.items(), key=lambda kv: -kv[1][0]):
        print(f"    {name:15s} {cores:7.3%} of a core, {wakeups:6.1f} wakeups/s", flush=True)


def daemon_idle(seconds: float, flows: list[int], flow_s: float) -> int:
    """The real hpccd in test_daemon_lab.py's lab (one definition of its
    configuration): idle, its CPU per second (whole process and per thread)
    with components [transport] and [transport, tcp_side], no flow at all;
    then, with `flows`, the [transport, tcp_side] daemon's CPU per flow-second
    while `iperf3 -C hpcc -P n` sends h1 -> h2 for `flow_s` seconds (h2's
    daemon, [transport], answers the probes)."""
    import shutil
    import tempfile

    import test_daemon_lab as dl
    from conftest import lab_ctx
    from hpccd.lab.topology import Topology
    from lab_hpccd import start_when_free

    d = pathlib.Path(tempfile.mkdtemp(prefix="hpccd-bench-"))
    (d / "tag.key").write_text(os.urandom(16).hex() + "\n")
    (d / "tag.key").chmod(0o600)                 # owner-only: hpccd warns of a key others read
    print(machine_line())
    try:
        with lab_ctx(Topology.loads(dl.TOPOLOGY)) as lab:
            lab.int_switch.configure(*dl.BOTTLENECK, ecn=None)
            for n, comps in enumerate((["transport"], ["transport", "tcp_side"])):
                # tcp_side's struct_ops are host-wide: a daemon of another
                # build (another engineer's tests) may hold them for a while
                dm = start_when_free(lambda: dl.Daemon(lab, d, "h1", comps, n), "another build",
                                     timeout=600)
                peer = None
                try:
                    time.sleep(2.0)                      # past start-up
                    cores, per, el = daemon_cost(dm.proc.pid, lambda: time.sleep(seconds))
                    wk = sum(v[1] for v in per.values())
                    print(f"hpccd {'+'.join(comps)}, idle {el:.1f} s: {cores:.3%} of a core, "
                          f"{wk:.1f} wakeups/s (load average {loadavg()})", flush=True)
                    print_threads(per)
                    if "tcp_side" in comps and flows:
                        peer = dl.Daemon(lab, d, "h2", ["transport"], n + 10)
                        peer.wait_ready()
                        for nf in flows:
                            daemon_flows(lab, dm, nf, flow_s)
                finally:
                    dm.stop()
                    if peer is not None:
                        peer.stop()
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return 0


def daemon_flows(lab, dm, n: int, seconds: float) -> None:
    """`iperf3 -C hpcc -P n` h1 -> h2 under daemon `dm`: its CPU per
    flow-second (whole process and per thread), the probes its TCP side
    sent per flow-second."""
    port = 5301 + n
    srv = lab.popen("h2", ["iperf3", "-s", "-1", "-p", str(port)], stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    p0 = dm.request("status")["components"]["tcp_side"]["probes_sent"]

    def run() -> None:
        cli = lab.popen("h1", ["iperf3", "-c", lab.address("h2"), "-p", str(port), "-C", "hpcc",
                               "-t", str(seconds), "-P", str(n), "-J"],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = cli.communicate(timeout=seconds + 60)
        if cli.returncode != 0:
            raise RuntimeError(f"iperf3 -C hpcc -P {n}: {err.strip() or out[-500:]}")
        run.mbps = json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e6

    cores, per, el = daemon_cost(dm.proc.pid, run)
    srv.wait(timeout=10)
    probes = dm.request("status")["components"]["tcp_side"]["probes_sent"] - p0
    print(f"hpccd transport+tcp_side, {n} iperf3 -C hpcc flow(s), {el:.1f} s, "
          f"{run.mbps:.0f} Mbit/s: {cores:.2%} of a core, {cores / n:.4f} CPU-s per "
          f"flow-second, {probes / el / n:.0f} probes per flow-second "
          f"(load average {loadavg()})", flush=True)
    print_threads(per)


# --daemon's rows: the h1 daemon's [tcp_side] table for each (None: the
# "hpcc" row's, the train rule's cap; cubic, bbr and dctcp run under it too)
DAEMON_ROWS = {"cubic": None, "bbr": None, "dctcp": None, "hpcc": None,
               "hpcc-s2": {"gso_max_segs": 2}, "hpcc-s3": {"gso_max_segs": 3},
               "hpcc-s4": {"gso_max_segs": 4}, "hpcc-nocap": {"gso_max_segs": 0},
               "hpcc-auto": {"trains_from_pacer": True}}
# where h1's daemon serves its metrics (in h1's namespace)
DAEMON_METRICS = "127.0.0.1:9479"


def daemon_pair(a) -> int:
    """--daemon: issue 19's pair under the running hpccd.  The lab of the
    in-process rows (test_tcp_cc_lab.py's CHAIN); h2 runs hpccd
    [transport] (its XDP answers the probes), h1 hpccd [transport,
    tcp_side] started for each flow count with HPCC's N = the flows, T the
    in-process rows' (1.5 x the idle ICMP RTT, at least 100 us; each flow's T
    from its RTTs, tcp_side.t_from_rtt) and tcp_side.gso_max_segs the train
    rule's (trains.segs_for with the idle base RTT) unless the row says
    otherwise (DAEMON_ROWS): what an operator writes in hpccd.toml.  The cap
    is the interface's, so cubic, bbr and dctcp run with it as they would
    beside this daemon.  Per run as the in-process rows (utilisation from the
    switch's counters, queue p50 / p99, Jain, retransmissions, mean skb) and
    the daemon's own: its whole process's CPU, probes per RTT and their
    lateness (its status), the T it chose per flow."""
    import shutil
    import tempfile

    import test_tcp_cc_lab as tl
    from conftest import lab_ctx
    from hpccd.lab.topology import Topology
    from hpccd.tcp_side import trains
    from lab_hpccd import LabHpccd, daemon_toml, start_when_free
    tl.LINK_BPS = 1_000_000_000
    ccs = a.ccs.split(",") if a.ccs != DEFAULT_CCS else ["cubic", "bbr", "dctcp", "hpcc"]
    bad = [c for c in ccs if c not in DAEMON_ROWS]
    if bad:
        print(f"bench_tcp_side --daemon: no such row {bad}; rows: {', '.join(DAEMON_ROWS)}",
              file=sys.stderr)
        return 2
    nflows = [int(x) for x in a.flows.split(",")]
    d = pathlib.Path(tempfile.mkdtemp(prefix="hpccd-bench-"))
    (d / "tag.key").write_text(os.urandom(16).hex() + "\n")
    (d / "tag.key").chmod(0o600)                 # owner-only: hpccd warns of a key others read
    print(machine_line())
    try:
        with lab_ctx(Topology.loads(tl.CHAIN)) as lab:
            base = tl.base_rtt_ns(lab)
            lab_segs = trains.gso_max_segs("eth0", lab.netns("h1"))
            T = int(a.T_us * 1e3) or max(base * 3 // 2, 100_000)
            bdp = tl.LINK_BPS / 8 * base / 1e9
            rule = (trains.segs_for(tl.LINK_BPS, T, base_rtt_ns=base) if a.gso_segs is None
                    else a.gso_segs)
            print(f"base RTT (ICMP, idle) {base / 1e3:.0f} us, BDP {bdp / 1e3:.1f} KB, hpccd's "
                  f"hpcc.T_ns {T / 1e3:.0f} us (per-flow T from RTTs), tcp_side.gso_max_segs "
                  f"{rule} (the lab's {lab_segs})"
                  + (" (trains.segs_for: within one BDP)" if a.gso_segs is None else ""),
                  flush=True)

            def daemon(host: str, comps: list[str], name: str, n: int = 1,
                       ts: dict | None = None) -> LabHpccd:
                ts = {"gso_max_segs": rule, **(ts or {})}
                rest = (f"[hpcc]\nT_ns = {T}\nline_rate_bps = 2000000000\nmtu_bytes = 1500\n"
                        f"eta = 0.95\nmax_stage = 5\nN_flows = {n}\n")
                if "tcp_side" in comps:
                    rest += "[tcp_side]\n" + "".join(
                        f"{k} = {json.dumps(v)}\n" for k, v in ts.items())
                toml = daemon_toml(control_socket=d / f"{name}.sock",
                                   metrics_address=DAEMON_METRICS, components=comps,
                                   key_file=d / "tag.key", rest=rest)
                return start_when_free(
                    lambda: LabHpccd(lab, host, d, name, toml, d / f"{name}.sock"),
                    "another build", timeout=600)

            peer = daemon("h2", ["transport"], "h2")
            res: dict[tuple[str, int], list[dict]] = {}
            try:
                groups: dict[str, list[str]] = {}      # one daemon per distinct [tcp_side]
                for cc in ccs:
                    groups.setdefault(json.dumps(DAEMON_ROWS[cc]), []).append(cc)
                for rep in range(a.reps):
                    for n in nflows:
                        for key, rows in groups.items():
                            dm = daemon("h1", ["transport", "tcp_side"], f"h1-{rep}-{n}", n,
                                        json.loads(key))
                            try:
                                time.sleep(1.0)                    # past start-up
                                for cc in rows:
                                    r = run_daemon(lab, tl, dm, cc, n, a.seconds, a.warmup)
                                    res.setdefault((cc, n), []).append(r)
                                    print(f"rep {rep + 1} {cc:>10} x{n}: util {r['util']:.3f}, "
                                          f"q p50 {r['q50'] / 1e3:.1f} KB p99 "
                                          f"{r['q99'] / 1e3:.1f} KB ({r['q99'] / bdp:.2f} BDP), "
                                          f"Jain {r['jain']:.3f}, retx {r['retx']}, mean skb "
                                          f"{r['skb_KB']:.1f} KB, hpccd {r['cores']:.1%} of a "
                                          f"core" + (f", HPCC asked for {r['asked']:.2f} of "
                                                     f"the link and the flows sent "
                                                     f"{r['sent_of_asked']:.0%} of it"
                                                     f", {r['probes_per_rtt']:.2f} probes per "
                                                     f"RTT, late {r['late_us']:.0f} us, the "
                                                     f"engine's timed waits "
                                                     f"{r['wait_late_us']:.0f} us late (lead "
                                                     f"{r['lead_us']:.0f} us), T "
                                                     f"{r['T_us']} us, the kernel's least "
                                                     f"RTT {r['rtt_min_us']:.0f} us, trains "
                                                     f"{r['trains']}; ACKs in HPCC mode "
                                                     f"{r['hpcc_acks']:.1%}, in the fallback "
                                                     f"{r['fallback_acks']:.2%}; held by "
                                                     + ", ".join(f"{k} {v:.0%}" for k, v in
                                                                 sorted(r["held"].items()))
                                                     + f"; pacer late > 10 / 20 us "
                                                     f"{r['pacer_over_10us']:.0%} / "
                                                     f"{r['pacer_over_20us']:.0%}"
                                                     if r["hpcc"] else ""),
                                          flush=True)
                            finally:
                                rc = dm.stop()
                                dm.close()
                                if rc not in (0, -signal.SIGTERM):
                                    print(f"hpccd in h1 exited {rc}: {dm.log()[-2000:]}",
                                          file=sys.stderr)
            finally:
                peer.stop()                      # SIGTERM: it releases what it owns
                peer.close()
            print(f"\nmedians of {a.reps}, under the running hpccd (load average after: "
                  f"{loadavg()})")
            out = []
            for (cc, n), rs in res.items():
                h = rs[0]["hpcc"]
                out.append([cc, n, f"{median(rs, 'util'):.3f}", f"{median(rs, 'q50') / 1e3:.1f}",
                            f"{median(rs, 'q99') / 1e3:.1f}", f"{median(rs, 'q99') / bdp:.2f}",
                            f"{median(rs, 'jain'):.3f}", f"{median(rs, 'retx'):.0f}",
                            f"{median(rs, 'skb_KB'):.1f}", f"{median(rs, 'cores'):.1%}",
                            f"{median(rs, 'probes_per_rtt'):.2f}" if h else "",
                            f"{median(rs, 'late_us'):.0f}" if h else "",
                            f"{median(rs, 'fallback_acks'):.2%}" if h else "",
                            "/".join(f"{statistics.median(r['held'].get(k, 0) for r in rs):.0%}"
                                     for k in ("cwnd", "pacing", "app", "tsq", "timer"))
                            if h else "",
                            f"{median(rs, 'pacer_over_20us'):.0%}" if h else "",
                            f"{median(rs, 'asked'):.2f} / {median(rs, 'sent_of_asked'):.0%}"
                            if h else "",
                            " ".join(f"{r['util']:.3f}@{r['q99'] / bdp:.2f}" for r in rs)])
            print(table(["cc", "flows", "util", "q50 KB", "q99 KB", "q99 BDP", "Jain", "retx",
                         "skb KB", "hpccd CPU", "probes/RTT", "late us", "fallback ACKs",
                         "held cwnd/pacing/app/tsq/timer", "pacer > 20 us",
                         "asked / sent of it", "runs: util@q99 BDP"], out))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return 0


def daemon_counters(lab, dm) -> dict[str, float]:
    """From h1's hpccd's Prometheus endpoint: the hpcc CC's ACKs by mode
    ("mode:hpcc", "mode:fb_stale", ...), its HPCC-mode ACKs by what held the
    flow back ("by:cwnd", ...) and the pacing timers' lateness histogram
    ("le:<bound>" cumulative, "late_n")."""
    import urllib.request

    from hpccd.bpf import loader as bpf
    from lab_hpccd import samples
    with bpf.in_netns(lab.netns(dm.host)):
        with urllib.request.urlopen(f"http://{DAEMON_METRICS}/metrics", timeout=20) as r:
            m = samples(r.read().decode())
    out: dict[str, float] = {}
    for lb, v in m.get("hpccd_tcp_cc_acks_total", []):
        out[f"mode:{lb['mode']}"] = v
    for lb, v in m.get("hpccd_tcp_cc_limited_acks_total", []):
        out[f"by:{lb['by']}"] = v
    for lb, v in m.get("hpccd_tcp_pacer_lateness_seconds_bucket", []):
        out[f"le:{lb['le']}"] = v
    for _, v in m.get("hpccd_tcp_pacer_lateness_seconds_count", []):
        out["late_n"] = v
    return out


def why_fmt(c0: dict, c1: dict) -> dict:
    """What the hpcc CC did over a run (daemon_counters before and after):
    the share of its ACKs in HPCC mode and in the Reno fallback, what held
    its HPCC-mode ACKs back, and the pacer's lateness: the share of
    expiries later than 10 and 20 us."""
    d = {k: c1.get(k, 0) - c0.get(k, 0) for k in c1}
    acks = sum(v for k, v in d.items() if k.startswith("mode:"))
    hp = d.get("mode:hpcc", 0)
    fb = sum(v for k, v in d.items() if k.startswith("mode:fb_"))
    held = {k[3:]: v / hp for k, v in d.items() if k.startswith("by:") and hp}
    n = d.get("late_n", 0)
    late = {us: 1 - d.get(f"le:{us * 1e-6:g}", 0) / n if n else nan for us in (10, 20)}
    return {"hpcc_acks": hp / acks if acks else nan, "fallback_acks": fb / acks if acks else nan,
            "held": held, "pacer_over_10us": late[10], "pacer_over_20us": late[20]}


def run_daemon(lab, tl, dm, cc: str, flows: int, seconds: float, warmup: float) -> dict:
    """`iperf3 -C <cc> -P flows` h1 -> h2 under the running daemon `dm`:
    lab_figures() over the run after `warmup`, h1's mean skb, the daemon's
    CPU (cores) and, for hpcc, its probes per RTT, their mean lateness and
    the T it chose per flow (from its status every 0.5 s)."""
    from hpccd.agent.control import request
    tl._port += 1
    port = tl._port
    kcc = KERNEL_CC.get(cc, "hpcc")
    hpcc = kcc == "hpcc"
    # dctcp: the receiver's listener takes h2's default CC when it is made,
    # and must be dctcp to echo ECN as DCTCP does
    ctx = tl.default_cc(lab, "dctcp") if cc == "dctcp" else contextlib.nullcontext()
    tl.set_marking(lab, cc == "dctcp")
    seen_T: dict[str, float] = {}
    seen_rtt: dict[str, float] = {}              # the kernel's least RTT of each flow
    with ctx:
        srv = lab.popen("h2", ["iperf3", "-s", "-1", "-p", str(port)],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3)
        sampler = lab.int_switch.sampler(tl.BOTTLENECK[0])
        sampler.read()
        st0 = request(dm.sock, "status", {})["components"]["tcp_side"]
        m0 = daemon_counters(lab, dm) if hpcc else {}
        tx0, th0 = tx_counts(lab), daemon_threads(dm.proc.pid)
        t_start = time.monotonic_ns()
        w0 = time.monotonic()
        cli = lab.popen("h1", ["iperf3", "-c", lab.address("h2"), "-p", str(port), "-C", kcc,
                               "-t", str(seconds), "-P", str(flows), "-J"],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        samples, last = [], 0.0
        while cli.poll() is None:
            time.sleep(0.05)
            samples += [s for s in sampler.read() if s.port == tl.BOTTLENECK[1]]
            if hpcc and time.monotonic() - last > 0.5:
                last = time.monotonic()
                for f in request(dm.sock, "status", {})["components"]["tcp_side"]["per_flow"]:
                    if f["probes_answered"]:
                        seen_T[f["flow"]] = f["T_us"]
                        seen_rtt[f["flow"]] = f["rtt_min_us"]
        out, err = cli.communicate(timeout=30)
    samples += [s for s in sampler.read() if s.port == tl.BOTTLENECK[1]]
    th1, tx1, el = daemon_threads(dm.proc.pid), tx_counts(lab), time.monotonic() - w0
    st1 = request(dm.sock, "status", {})["components"]["tcp_side"]
    why = why_fmt(m0, daemon_counters(lab, dm)) if hpcc else {}
    srv.wait(timeout=10)
    if cli.returncode != 0:
        raise RuntimeError(f"iperf3 -C {kcc}: {err.strip() or out[-500:]}")
    res = json.loads(out)
    if res["end"].get("sender_tcp_congestion", kcc) != kcc:
        raise RuntimeError(f"iperf3 -C {kcc} ran {res['end']['sender_tcp_congestion']}")
    win = [s for s in samples if t_start + warmup * 1e9 <= s.ts_ns <= t_start + seconds * 1e9]
    if len(win) < 100:
        raise RuntimeError(f"{cc}: only {len(win)} queue samples")
    cpu = sum(ns - th0.get(tid, (name, 0, 0))[1] for tid, (name, ns, _) in th1.items()) / 1e9
    dd = {k: st1[k] - st0[k] for k in ("probes_sent", "chain_rtt_ns", "chain_interval_ns",
                                       "late_sum_ns", "late_n", "wake_late_sum_ns",
                                       "wake_late_n", "pace_acked_bits", "pace_want_bits")}
    return {"cc": cc, "flows": flows, "hpcc": hpcc, **lab_figures(tl, win, [res]),
            "skb_KB": ((tx1[0] - tx0[0]) / (tx1[1] - tx0[1]) / 1e3 if tx1[1] > tx0[1] else nan),
            "cores": cpu / el,
            "probes_per_rtt": (dd["chain_rtt_ns"] / dd["chain_interval_ns"]
                               if dd["chain_interval_ns"] else nan),
            "late_us": dd["late_sum_ns"] / dd["late_n"] / 1e3 if dd["late_n"] else nan,
            # how late the engine's timed waits returned, and the lead its gap
            # timers took at the end (tcp_side.wake_lead)
            "wait_late_us": (dd["wake_late_sum_ns"] / dd["wake_late_n"] / 1e3
                             if dd["wake_late_n"] else nan),
            "lead_us": st1["wake_lead_ns"] / 1e3,
            # what HPCC's written rates allowed over the run, per the link's
            # bits, and the share of it the flows had acked (the kernel's
            # pacer and the hosts: hpccd_tcp_pacing_asked/acked_bits_total)
            "asked": dd["pace_want_bits"] / (tl.LINK_BPS * el),
            "sent_of_asked": (dd["pace_acked_bits"] / dd["pace_want_bits"]
                              if dd["pace_want_bits"] else nan),
            "T_us": sorted(round(t) for t in seen_T.values()),
            "rtt_min_us": min(seen_rtt.values(), default=nan), **why,
            # with trains_from_pacer: the cap at the end, and the last decision's
            # base RTT (us) and queue (frames, at trains.QUEUE_Q)
            "trains": (None if "trains" not in st1 else
                       f"{st1['trains'].get('cap')} (base RTT "
                       f"{st1['trains'].get('base_rtt_us', nan):.0f} us, queue p99 "
                       f"{st1['trains'].get('queue_frames')} frames)")}


def idle(side, seconds: float) -> dict:
    tid = side._thread.native_id
    s0, p0, t0, w0 = side.stats, process_cpu_s(), thread_cpu_s(tid), time.monotonic()
    time.sleep(seconds)
    s1, p1, t1, w1 = side.stats, process_cpu_s(), thread_cpu_s(tid), time.monotonic()
    el = w1 - w0
    return {"process_cpu_per_s": (p1 - p0) / el, "engine_cpu_per_s": (t1 - t0) / el,
            "wakeups_per_s": (s1["wakeups"] - s0["wakeups"]) / el, "seconds": el}


def run(lab, tl, side, cc: str, flows: int, seconds: float, warmup: float,
        trace: list | None = None, procs: bool = False, pcap: str | None = None,
        meter=None, fq_rate_bps: int = 0) -> dict:
    """`flows` iperf3 streams h1 -> h2 with `cc`, measured: one client
    `iperf3 -P flows`, or with `procs` `flows` clients of one stream each
    (each its own process and thread, on a port of its own).
    `trace`: a list to append the run's time series to (every 5 ms, each
    flow's W, U, R, cwnd, srtt, host share, probes sent and answered; the
    bottleneck's queue samples; the kernel's pacing rate and cwnd per
    socket from `ss -tin` every 50 ms).  `pcap`: a file to write h1's
    eth0's data segments to (tcpdump) for queue_makeup.py.  `meter`: a
    hpccd.tcp_side.pacer.PacerMeter, the pacing timers' lateness over the
    run ("pacer").  `fq_rate_bps`: each stream's pacing rate capped there
    (iperf3 --fq-rate)."""
    ports = list(range(tl._port + 1, tl._port + 1 + (flows if procs else 1)))
    tl._port = ports[-1]
    port = ports[0]
    srvs = [lab.popen("h2", ["iperf3", "-s", "-1", "-p", str(p)], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL) for p in ports]
    dump = None
    if pcap:
        dump = lab.popen("h1", ["tcpdump", "-i", "eth0", "-s", "96", "-w", pcap, "-Q", "out",
                                "tcp", "and", "dst", "host", lab.address("h2")],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3 if dump is None else 1.0)
    sampler = lab.int_switch.sampler(tl.BOTTLENECK[0])
    sampler.read()
    tid = side._thread.native_id
    tx0 = tx_counts(lab)
    s0, c0, cpu0 = side.stats, side.counters()["hpcc"], thread_cpu_s(tid)
    lat0 = meter.read() if meter else None
    seen_T: dict[bytes, float] = {}
    seen_w: list[tuple[float, int, int, int, float]] = []   # W, cwnd, srtt, queue delay, W/T
    kcc = "cubic" if fixed_row(cc) else KERNEL_CC[cc]
    fq = ["--fq-rate", str(int(fq_rate_bps))] if fq_rate_bps else []
    clis = [lab.popen("h1", ["iperf3", "-c", lab.address("h2"), "-p", str(p), "-C", kcc,
                             "-t", str(seconds), "-P", str(1 if procs else flows), "-J", *fq],
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for p in ports]
    samples, t_start = [], time.monotonic_ns()
    fl_ts: list[tuple] = []
    ss_ts: list[tuple] = []
    last_ss = 0
    # the pacer's loss per flow from the warm-up on: (acked, wanted) bits at
    # its first sample after the warm-up and at its last; its gains written
    pl0: dict[bytes, tuple[float, float]] = {}
    pl1: dict[bytes, tuple[float, float]] = {}
    pgain: dict[bytes, list[float]] = {}
    while any(c.poll() is None for c in clis):
        time.sleep(0.005 if trace is not None else 0.05)
        samples += [s for s in sampler.read() if s.port == tl.BOTTLENECK[1]]
        now = time.monotonic_ns()
        for k, v in side.flows.items():
            if v.probes_answered:
                seen_T[k] = v.T_ns
                seen_w.append((v.W, v.cwnd_bytes, v.srtt_us, v.qdelay_ns, v.rate_bps))
                if now - t_start >= warmup * 1e9:
                    pl0.setdefault(k, (v.pace_acked_bits, v.pace_want_bits))
                    pl1[k] = (v.pace_acked_bits, v.pace_want_bits)
                    pgain.setdefault(k, []).append(v.pace_gain)
                if trace is not None:
                    fl_ts.append((now - t_start, v.flow_id, v.W, v.U, v.rate_bps, v.cwnd_bytes,
                                  v.srtt_us, v.host_ns, v.probes_sent, v.probes_answered,
                                  v.last_update_ns, v.delivery_bps))
        if trace is not None and now - last_ss > 50_000_000:
            last_ss = now
            r = lab.run("h1", ["ss", "-tinH", "state", "established", "dport", ">=", f":{port}",
                               "and", "dport", "<=", f":{ports[-1]}"])
            ss_ts.append((now - t_start, r.stdout))
    outs = [c.communicate(timeout=30) for c in clis]
    samples += [s for s in sampler.read() if s.port == tl.BOTTLENECK[1]]
    cpu1, s1, c1 = thread_cpu_s(tid), side.stats, side.counters()["hpcc"]
    pacer = meter.read() - lat0 if meter else None
    tx1 = tx_counts(lab)
    if dump is not None:
        dump.terminate()
        dump.wait(timeout=10)
    for v in srvs:
        v.wait(timeout=10)
    for c, (_, err) in zip(clis, outs):
        if c.returncode != 0:
            raise RuntimeError(f"iperf3 -C {cc}: {err.strip()}")
    res = [json.loads(o) for o, _ in outs]
    t_from = t_start + warmup * 1e9
    t_to = t_start + seconds * 1e9                  # iperf3's end, not its teardown
    win = [s for s in samples if t_from <= s.ts_ns <= t_to]
    if len(win) < 100:
        raise RuntimeError(f"{cc}: only {len(win)} queue samples")
    if trace is not None:
        trace.append({"cc": cc, "flows": flows, "t_start": t_start, "flow_ts": fl_ts,
                      "ss": ss_ts, "queue": [(s.ts_ns - t_start, s.backlog_bytes, s.tx_bytes)
                                             for s in samples],
                      "late_hist": [b - a for a, b in zip(s0["late_hist"], s1["late_hist"])]})
    lf = lab_figures(tl, win, res)
    d = {k: s1[k] - s0[k] for k in ("probes_sent", "probes_answered", "probes_lost",
                                     "late_sum_ns", "late_n", "chain_rtt_ns",
                                     "chain_interval_ns", "parks", "wakeups", "send_calls",
                                     "send_ns", "rate_shared", "rate_lent", "rate_claimed",
                                     "chain_n", "wake_records", "windows_written",
                                     "al_intervals", "al_below_w", "al_limited", "al_raised",
                                     "al_held")}
    from hpccd.tcp_side.engine import HPCC_COUNTERS
    modes = {k: c1[k][0] - c0[k][0] for k in (*HPCC_COUNTERS[:5], "w_only")}
    # what held the flows back, per HPCC-mode ACK (the CC's limited_by):
    # the whole cwnd in flight, the next send paced later, the application;
    # the rest ("host"): it could have sent and had not
    lim = {k: c1[k][0] - c0[k][0] for k in ("lim_cwnd", "lim_pacing", "lim_app",
                                              "lim_tsq", "lim_timer")}
    lim = ({k[4:]: v / modes["used_hpcc"] for k, v in lim.items()} if modes["used_hpcc"]
           else {k[4:]: nan for k in lim})
    lim["none"] = 1 - sum(lim.values())
    pace = sorted((pl1[k][0] - pl0[k][0]) / (pl1[k][1] - pl0[k][1]) for k in pl1
                  if pl1[k][1] > pl0[k][1])
    # what HPCC's written rates asked for after the warm-up, as a share of
    # the link (bits on the wire; the window the samples span)
    asked = (sum(pl1[k][1] - pl0[k][1] for k in pl1) / (seconds - warmup) / tl.LINK_BPS
             if seconds > warmup else nan)
    return {"cc": cc, "flows": flows, "pacer": pacer,
            # per flow: bits acked over the bits the rate HPCC wanted allowed
            # (the pacer's loss is 1 - this), and the median gain written
            "pace_ratio": pace, "asked": asked, "pace_gain": sorted(statistics.median(g) for g in pgain.values()),
            "skb_KB": ((tx1[0] - tx0[0]) / (tx1[1] - tx0[1]) / 1e3 if tx1[1] > tx0[1] else nan),
            **lf, "sender": "procs" if procs else "-P",
            # the responses whose interval the flow left its window unused in
            # (fewer bytes acked than W per srtt), and W's increases computed
            # from them, per window written (held with app_limited_hold)
            "al_limited": (d["al_limited"] / d["al_intervals"] if d["al_intervals"] else nan),
            "al_below_w": (d["al_below_w"] / d["al_intervals"] if d["al_intervals"] else nan),
            "al_raised": (d["al_raised"] / d["windows_written"] if d["windows_written"]
                          else nan),
            "al_held": d["al_held"],
            "engine_cpu_per_s": (cpu1 - cpu0) / seconds,
            "probes_per_s": d["probes_sent"] / seconds, "probes_lost": d["probes_lost"],
            "rate_shared": d["rate_shared"], "rate_lent": d["rate_lent"],
            "rate_claimed": d["rate_claimed"],
            # what each probe followed: its response (a chain), a park then the
            # flow's next segment (a wake record), or neither (lost, the sweep)
            "chained": d["chain_n"] / d["probes_sent"] if d["probes_sent"] else nan,
            "parks_per_probe": d["parks"] / d["probes_sent"] if d["probes_sent"] else nan,
            "late_hist": [b - a for a, b in zip(s0["late_hist"], s1["late_hist"])],
            # the engine's CPU per probe, of which inside sendmmsg() (on veth the
            # probe's whole way through the lab runs in the call), probes per call
            "us_per_probe": (cpu1 - cpu0) / d["probes_sent"] * 1e6 if d["probes_sent"] else nan,
            "send_us_per_probe": d["send_ns"] / d["probes_sent"] / 1e3 if d["probes_sent"] else nan,
            "probes_per_call": d["probes_sent"] / d["send_calls"] if d["send_calls"] else nan,
            "wakeups_per_probe": d["wakeups"] / d["probes_sent"] if d["probes_sent"] else nan,
            "probes_per_rtt": (d["chain_rtt_ns"] / d["chain_interval_ns"]
                               if d["chain_interval_ns"] else float("nan")),
            "late_us": d["late_sum_ns"] / d["late_n"] / 1e3 if d["late_n"] else float("nan"),
            "modes": modes, "lim": lim, "T_us": sorted(round(t / 1e3) for t in seen_T.values()),
            "W_KB": med_of(seen_w, 0) / 1e3, "cwnd_KB": med_of(seen_w, 1) / 1e3,
            "srtt_us": med_of(seen_w, 2),
            # the samples (every 50 ms) whose W / T was below the bottleneck's rate
            "r_below_link": (sum(w[4] < tl.LINK_BPS for w in seen_w) / len(seen_w) if seen_w
                             else nan), "qdelay_us": med_of(seen_w, 3) / 1e3}


def lab_figures(tl, win: list, res: list[dict]) -> dict:
    """What a run did at the bottleneck and at the receivers: link
    utilisation (the port's tx byte counter over the queue samples `win`,
    the run after its warm-up), queue p50 / p99 (bytes), Jain's index of the
    streams' goodputs, their sum and the senders' retransmissions (`res`:
    the iperf3 clients' JSON)."""
    util = ((win[-1].tx_bytes - win[0].tx_bytes) * 8 / ((win[-1].ts_ns - win[0].ts_ns) / 1e9)
            / tl.LINK_BPS)
    q = sorted(s.backlog_bytes for s in win)
    rates = [st["receiver"]["bits_per_second"] for r in res for st in r["end"]["streams"]]
    return {"util": util, "q50": q[len(q) // 2], "q99": q[min(len(q) - 1, int(0.99 * len(q)))],
            "jain": jain(rates), "goodput_mbps": sum(rates) / 1e6,
            "retx": sum(r["end"]["sum_sent"].get("retransmits", 0) for r in res)}


def tx_counts(lab) -> tuple[int, int]:
    """h1's eth0: bytes and packets sent (veth counts a GSO train as one)."""
    r = lab.run("h1", ["cat", "/sys/class/net/eth0/statistics/tx_bytes",
                       "/sys/class/net/eth0/statistics/tx_packets"])
    b, p = r.stdout.split()
    return int(b), int(p)


def late_fmt(late) -> str:
    """The pacing timers' lateness of a run: p50 / p90 in us (expiries)."""
    if late is None:
        return "-"
    if not late.n:
        return "none"
    return f"{late.quantile_ns(0.5) / 1e3:.0f}/{late.quantile_ns(0.9) / 1e3:.0f} ({late.n})"


def med_of(rows: list[tuple], i: int) -> float:
    return statistics.median(r[i] for r in rows) if rows else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--flows", default="1,2,4")
    ap.add_argument("--ccs", default=DEFAULT_CCS,
                    help="hpcc-w: hpcc with tcp_side.cwnd_rtt_gain = 0 (cwnd = W, R up to the "
                         "line rate: the window before issue 19's second part)")
    ap.add_argument("--idle-s", type=float, default=10.0)
    ap.add_argument("--idle-only", action="store_true")
    ap.add_argument("--daemon-idle", action="store_true",
                    help="only the real hpccd's CPU (per thread too), idle, without and with "
                         "tcp_side, then per flow-second with --daemon-flows")
    ap.add_argument("--daemon", action="store_true",
                    help="issue 19's pair under the running hpccd: cubic, bbr, dctcp and hpcc "
                         "(--ccs from " + ", ".join(DAEMON_ROWS) + ") with the daemons "
                         "started in h1 and h2, the train rule in h1's hpccd.toml")
    ap.add_argument("--daemon-flows", default="1,4",
                    help="with --daemon-idle: iperf3 -C hpcc -P n for each n under the daemon "
                         "(its CPU per flow-second; empty: none)")
    ap.add_argument("--T-us", type=float, default=0.0,
                    help="configured T (default: 1.5 x the idle ICMP RTT, at least 100 us); "
                         "each flow's T is then fixed from its RTTs (--no-t-from-rtt: not)")
    ap.add_argument("--no-t-from-rtt", action="store_true")
    ap.add_argument("--host-cap-t", type=float, default=None,
                    help="TcpSide's host_cap_t for the hpcc rows (default its own; hpcc-h4: 4)")
    ap.add_argument("--path-rate-gain", type=float, default=None,
                    help="path_rate_gain of every hpcc row (the flows' written rates "
                         "together at most this x the link: below 1 the host has room, "
                         "and what the flows deliver against it is the pacer's loss)")
    ap.add_argument("--gso-segs", type=int, default=None,
                    help="TcpSide's gso_max_segs for the hpcc and hpcc-w rows (h1's trains; "
                         "0: the lab's; default: trains.segs_for with the idle base RTT, the "
                         "longest train whose queue stays within one BDP); hpcc-nocap: always "
                         "the lab's; hpcc-s2, -s3, -s4: 2, 3, 4")
    ap.add_argument("--hpcc-N", type=int, default=0,
                    help="HPCC's N (W_AI = W_init (1 - eta) / N); default: the run's flows")
    ap.add_argument("--cwnd-rtt-gain", type=float, default=None,
                    help="TcpSide's cwnd_rtt_gain (default its own; 0: cwnd = W, the rate "
                         "not paced ahead of it)")
    ap.add_argument("--procs", action="store_true",
                    help="every cc with N > 1 flows also as N iperf3 clients of one stream "
                         "each (N processes), interleaved with the one `iperf3 -P N`")
    ap.add_argument("--pcap", default=None, metavar="DIR",
                    help="record the hpcc rows' trains on h1's eth0 into DIR and print what "
                         "the modelled bottleneck queue was made of (scripts/queue_makeup.py)")
    ap.add_argument("--trace", default=None,
                    help="write the hpcc rows' time series (per flow W, U, R, cwnd, srtt every "
                         "5 ms, the queue samples, `ss -tin` every 50 ms) to this JSON file")
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("bench_tcp_side: needs root (namespaces, XDP, tc, struct_ops)", file=sys.stderr)
        return 2
    if a.daemon:
        return daemon_pair(a)
    if a.daemon_idle:
        return daemon_idle(a.idle_s, [int(x) for x in a.daemon_flows.split(",") if x],
                           a.seconds)
    import test_tcp_cc_lab as tl                    # the lab and its helpers, one definition
    from conftest import lab_ctx
    from hpccd.tcp_side import engine as ts
    from hpccd.tcp_side import trains
    from hpccd.lab.topology import Topology
    tl.LINK_BPS = 1_000_000_000                     # the CHAIN topology's bottleneck
    # A full segment's payload, and the bytes on the wire per payload byte
    # (trains.SEG_WIRE_OVERHEAD: Ethernet, IPv4, TCP with timestamps); h1's
    # eth0 counts a GSO train as one packet with those headers once
    mss = 1448
    wire_per_payload = (mss + trains.SEG_WIRE_OVERHEAD) / mss

    print(machine_line())
    from hpccd.tcp_side import pacer as pc
    try:
        meter = pc.acquire()        # the process's meter: the TcpSides share it
    except pc.PacerError as e:
        print(f"the pacer's lateness is not measured: {e}")
        meter = None
    paced = pc.EMPTY                # the pacing timers of the hpcc rows so far

    def auto_segs(T_ns: float) -> int:
        """hpcc-auto's trains: trains.segs_for with the lateness of the
        pacing timers of the hpcc rows run so far (none yet: without)."""
        late = paced.quantile_ns(trains.PACER_LATE_Q) if paced.n >= 100 else 0.0
        segs = trains.segs_for(tl.LINK_BPS, T_ns, pacer_late_ns=late)
        print(f"hpcc-auto: trains of {segs} segments (the pacer's p"
              f"{trains.PACER_LATE_Q * 100:.0f} {late / 1e3:.0f} us over {paced.n} "
              f"expiries, T {T_ns / 1e3:.0f} us)", flush=True)
        return segs

    cc_obj = ts.TcpCc(tl.BUILT)
    try:
        cc_obj.start(wait_s=tl.LOCK_WAIT_S)
    except ts.TcpSideError as e:
        print(f"bench_tcp_side: {e}", file=sys.stderr)
        return 2
    try:
        with lab_ctx(Topology.loads(tl.CHAIN)) as lab:
            progs = tl.HostProgs(lab)
            try:
                base = tl.base_rtt_ns(lab)
                lab_segs = trains.gso_max_segs("eth0", lab.netns("h1"))
                T = a.T_us * 1e3 or max(base * 3 // 2, 100_000)
                bdp = tl.LINK_BPS / 8 * base / 1e9
                gso = (trains.segs_for(tl.LINK_BPS, T, base_rtt_ns=base)
                       if a.gso_segs is None else a.gso_segs)
                gain = ({} if a.cwnd_rtt_gain is None
                        else {"cwnd_rtt_gain": a.cwnd_rtt_gain})

                def make_side(n: int, cc: str = "hpcc"):
                    """A TcpSide whose N is `n` flows ([HPCC] section 3.3: W_AI =
                    W_init (1 - eta) / N, N the flows on the bottleneck, as the
                    experiments set it), or --hpcc-N."""
                    params = {"T_ns": float(T), "line_rate_bps": 2_000_000_000,
                              "mtu_bytes": 1500, "eta": 0.95, "max_stage": 5,
                              "N_flows": a.hpcc_N or n}
                    g = {"cwnd_rtt_gain": 0.0} if cc == "hpcc-w" else dict(gain)
                    if a.path_rate_gain is not None:
                        g["path_rate_gain"] = a.path_rate_gain
                    if cc == "hpcc-h4":
                        g["host_cap_t"] = 4.0
                    elif cc == "hpcc-p15":
                        g["path_rate_gain"] = 1.5
                    elif cc in ("hpcc-p12", "hpcc-s3p12"):
                        g["path_rate_gain"] = 1.25
                    elif cc == "hpcc-s12":
                        g["solo_rate_gain"] = 1.25
                    elif cc == "hpcc-sg15":
                        g["solo_rate_gain"] = 1.5
                    elif cc == "hpcc-sg2":
                        g["solo_rate_gain"] = 2.0
                    elif cc == "hpcc-pg":
                        g["pace_gain_max"] = 1.5
                    elif cc == "hpcc-pg115":
                        g["pace_gain_max"] = 1.15
                    elif cc == "hpcc-pg2":
                        g["pace_gain_max"] = 2.0
                    elif cc == "hpcc-ns":
                        g["path_rate_shared"] = False
                    elif cc == "hpcc-wc":
                        g["path_rate_work_conserving"] = True
                    elif cc == "hpcc-g05":
                        g["probe_gap_rtt"] = 0.5
                    elif cc == "hpcc-al":
                        g["app_limited_hold"] = True
                    elif cc == "hpcc-s4n0":
                        g["nice"] = 0
                    elif cc == "hpcc-s4sg11":
                        g["solo_rate_gain"] = 1.1
                    elif a.host_cap_t is not None:
                        g["host_cap_t"] = a.host_cap_t
                    segs = {"hpcc-nocap": 0, "hpcc-t1": 1, "hpcc-s2": 2, "hpcc-s3": 3,
                            "hpcc-s3p12": 3, "hpcc-s4": 4, "hpcc-s4n0": 4, "hpcc-s4sg11": 4}.get(cc, gso)
                    if cc == "hpcc-auto":
                        segs = auto_segs(T)
                    sd = ts.TcpSide(progs.tc, progs.xdp["h1"], hpcc_params=params,
                                    netns=lab.netns("h1"), tcp_cc=cc_obj,
                                    t_from_rtt=not a.no_t_from_rtt, gso_max_segs=segs,
                                    gso_dev="eth0", **g)
                    sd.start()
                    sd.start_thread()
                    sd.bench_n, sd.bench_cc = n, cc
                    sd.bench_segs = segs or lab_segs
                    return sd

                side = make_side(1)
                try:
                    time.sleep(0.5)
                    r = idle(side, a.idle_s)
                    print(f"idle ({r['seconds']:.1f} s, no TCP flow): process CPU "
                          f"{r['process_cpu_per_s']:.2%} of a core, engine thread "
                          f"{r['engine_cpu_per_s']:.2%}, engine wakeups {r['wakeups_per_s']:.0f}/s")
                    if a.idle_only:
                        return 0
                    print(f"base RTT (ICMP, idle) {base / 1e3:.0f} us, BDP {bdp / 1e3:.1f} KB, "
                          f"configured T {T / 1e3:.0f} us, per-flow T from RTTs: "
                          f"{not a.no_t_from_rtt}, HPCC N: {a.hpcc_N or 'the flows'}, "
                          f"cwnd_rtt_gain {side.cwnd_rtt_gain}, host_cap_t {side.host_cap_t}, "
                          f"path_rate_gain {side.path_rate_gain}, solo_rate_gain "
                          f"{side.solo_rate_gain}, h1's gso_max_segs: the lab's "
                          f"{lab_segs}, hpcc's and hpcc-w's {gso or lab_segs}"
                          + (" (trains.segs_for: within one BDP)" if a.gso_segs is None
                             else ""))
                    ccs = a.ccs.split(",")
                    bad = [c for c in ccs if c not in KERNEL_CC and not fixed_row(c)]
                    if bad:
                        print(f"bench_tcp_side: no such row {bad}; rows: "
                              f"{', '.join(KERNEL_CC)}, pacedP-sN", file=sys.stderr)
                        return 2
                    nflows = [int(x) for x in a.flows.split(",")]
                    res: dict[tuple[str, int, str], list[dict]] = {}
                    if a.pcap:
                        os.makedirs(a.pcap, exist_ok=True)
                        import queue_makeup
                    traces: list[dict] = []
                    for rep in range(a.reps):
                        for n, cc, procs in [(n, cc, p) for n in nflows for cc in ccs
                                             for p in ((False, True) if a.procs and n > 1
                                                       else (False,))]:
                                want = cc if cc in HPCC_ROWS else "hpcc"
                                if (side.bench_n, side.bench_cc) != (n, want):
                                    side.stop()
                                    side = make_side(n, want)
                                tl.set_marking(lab, cc == "dctcp")
                                if cc not in HPCC_ROWS:
                                    side.trains.restore()       # the lab's trains
                                fx, cap = fixed_row(cc), None
                                if fx:
                                    cap = trains.TrainCap("eth0", fx[1], lab.netns("h1"))
                                    cap.apply()
                                try:
                                    tr = traces if a.trace and cc in HPCC_ROWS else None
                                    snd = "procs" if procs else "P"
                                    pcf = (os.path.join(a.pcap, f"{cc}-x{n}-{snd}-{rep + 1}.pcap")
                                           if a.pcap and cc in HPCC_ROWS else None)
                                    if cc == "dctcp":
                                        with tl.default_cc(lab, "dctcp"):
                                            r = run(lab, tl, side, cc, n, a.seconds, a.warmup,
                                                    procs=procs, meter=meter)
                                    else:
                                        r = run(lab, tl, side, cc, n, a.seconds, a.warmup, tr,
                                                procs=procs, pcap=pcf, meter=meter,
                                                fq_rate_bps=int(fx[0] * tl.LINK_BPS / n)
                                                if fx else 0)
                                finally:
                                    if cap:
                                        cap.restore()
                                    side.trains.apply()
                                # what the pacer's model allows the row: the
                                # share of its rate its trains keep, of the
                                # link.  The kernel paces an skb's payload (its
                                # len in the write queue), the link carries
                                # the headers too: wire_per_payload x that
                                r["model"] = (min(1.0, fx[0] * wire_per_payload * trains.paced_share(
                                    fx[0] * tl.LINK_BPS / n,
                                    r["skb_KB"] * 1e3 - trains.SEG_WIRE_OVERHEAD,
                                    r["pacer"]))
                                    if fx and r["pacer"] and r["skb_KB"] > 1 else nan)
                                if cc in HPCC_ROWS and r["pacer"] and r["asked"] > 0:
                                    # the same for HPCC's rows: the rate its flows
                                    # asked for, each its share, in trains of the
                                    # side's cap (the mean skb counts the probes)
                                    r["model"] = min(1.0, r["asked"] * trains.paced_share(
                                        r["asked"] * tl.LINK_BPS / n / wire_per_payload,
                                        side.bench_segs * mss, r["pacer"]))
                                res.setdefault((cc, n, r["sender"]), []).append(r)
                                if cc in HPCC_ROWS and r["pacer"]:
                                    paced = paced + r["pacer"]
                                extra = ""
                                if cc in HPCC_ROWS:
                                    extra = (f" | engine {r['engine_cpu_per_s']:.1%} CPU, "
                                             f"{r['probes_per_s']:.0f} probes/s, "
                                             f"{r['us_per_probe']:.0f} us CPU/probe (sendmmsg "
                                             f"{r['send_us_per_probe']:.0f} us, "
                                             f"{r['probes_per_call']:.2f} probes/call, "
                                             f"{r['wakeups_per_probe']:.2f} wakeups/probe), "
                                             f"{r['probes_per_rtt']:.2f} per RTT, late "
                                             f"{r['late_us']:.0f} us, lost {r['probes_lost']}, "
                                             f"chained {r['chained']:.0%}, parks/probe "
                                             f"{r['parks_per_probe']:.2f}, below W "
                                             f"{r['al_below_w']:.0%}, limited "
                                             f"{r['al_limited']:.0%} of intervals, W raised "
                                             f"from them {r['al_raised']:.0%} of windows, held "
                                             f"{r['al_held']}, "
                                             f"rate shared {r['rate_shared']} lent "
                                             f"{r['rate_lent']} claimed "
                                             f"{r['rate_claimed']}, late hist "
                                             f"{r['late_hist']}, "
                                             f"T {r['T_us']} us, median W "
                                             f"{r['W_KB']:.1f} KB (W/T below the link in "
                                             f"{r['r_below_link']:.0%} of samples) cwnd {r['cwnd_KB']:.1f} KB "
                                             f"srtt {r['srtt_us']:.0f} us queue delay "
                                             f"{r['qdelay_us']:.0f} us, modes {r['modes']}, "
                                             "pacer ratio per flow " + "/".join(
                                                 f"{x:.3f}" for x in r["pace_ratio"]) +
                                             " gain " + "/".join(
                                                 f"{x:.2f}" for x in r["pace_gain"]) + ", "
                                             "limited by (of HPCC ACKs) " + ", ".join(
                                                 f"{k} {v:.0%}" for k, v in r["lim"].items()))
                                if fx:
                                    extra = f" | model util {r['model']:.3f}"
                                elif cc in HPCC_ROWS:
                                    extra = (f" | asked {r['asked']:.3f} of the link, model util "
                                             f"{r['model']:.3f}") + extra
                                print(f"rep {rep + 1} {cc:>6} x{n} {r['sender']:>5}: "
                                      f"util {r['util']:.3f}, "
                                      f"mean skb {r['skb_KB']:.1f} KB, "
                                      f"q p50 {r['q50'] / 1e3:.1f} KB p99 {r['q99'] / 1e3:.1f} KB "
                                      f"({r['q99'] / bdp:.2f} BDP), Jain {r['jain']:.3f}, "
                                      f"retx {r['retx']}, pacer late {late_fmt(r['pacer'])}"
                                      f"{extra}", flush=True)
                                if pcf and os.path.exists(pcf):
                                    try:
                                        m = queue_makeup.makeup(
                                            queue_makeup.trains(pcf), tl.LINK_BPS, bdp)
                                        print(f"    queue made of: {queue_makeup.fmt(m, bdp)}",
                                              flush=True)
                                    except (OSError, ValueError) as e:
                                        print(f"    queue made of: {pcf}: {e}", flush=True)
                    if a.trace:
                        pathlib.Path(a.trace).write_text(json.dumps(
                            {"bdp": bdp, "link_bps": tl.LINK_BPS, "runs": traces}))
                    print(f"\nmedians of {a.reps} (load average after: {loadavg()})")
                    out = []
                    for (cc, n, snd), rs in res.items():
                        def med(k):
                            return median(rs, k)
                        h = cc in HPCC_ROWS
                        out.append([cc, n, snd, f"{med('util'):.3f}", f"{med('q50') / 1e3:.1f}",
                                    f"{med('q99') / 1e3:.1f}", f"{med('q99') / bdp:.2f}",
                                    f"{med('jain'):.3f}", f"{med('skb_KB'):.1f}",
                                    f"{med('engine_cpu_per_s') / n:.1%}" if h else "",
                                    f"{med('probes_per_rtt'):.2f}" if h else "",
                                    f"{med('us_per_probe'):.0f}" if h else "",
                                    f"{med('send_us_per_probe'):.0f}" if h else "",
                                    f"{med('al_below_w'):.0%}" if h else "",
                                    f"{med('al_limited'):.0%}" if h else "",
                                    f"{med('al_raised'):.0%}" if h else "",
                                    "/".join(f"{statistics.median(x['lim'][k] for x in rs):.0%}"
                                             for k in ("cwnd", "pacing", "app", "tsq", "timer",
                                                       "none"))
                                    if h else "",
                                    f"{statistics.median(x for r in rs for x in r['pace_ratio']):.3f}"
                                    if h and any(r["pace_ratio"] for r in rs) else "",
                                    f"{statistics.median(x for r in rs for x in r['pace_gain']):.2f}"
                                    if h and any(r["pace_gain"] for r in rs) else "",
                                    late_fmt(pc.Lateness.sum(r["pacer"] for r in rs
                                                             if r["pacer"])),
                                    f"{med('model'):.3f}" if fixed_row(cc) or h else ""])
                    print(table(["cc", "flows", "sender", "util", "q50 KB", "q99 KB", "q99 BDP",
                                 "Jain",
                                 "skb KB", "engine CPU/flow", "probes/RTT", "us/probe",
                                 "send us", "below W", "limited", "raised from limited",
                                 "held by cwnd/pacing/app/tsq/timer/none",
                                 "acked/wanted", "pace gain",
                                 "pacer late p50/p90 us (n)", "model util"], out))
                finally:
                    side.stop()
            finally:
                progs.close()
    finally:
        cc_obj.stop()
        if meter:
            pc.release(meter)
    return 0


if __name__ == "__main__":
    sys.exit(main())
