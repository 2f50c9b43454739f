#!/usr/bin/env python3
"""Where the lab's CPU went in a `perf record -a -g` of an experiment: the
samples split by component (docs/lab.md "Where the lab's CPU goes").

    perf record -a -g -e cpu-clock -F 999 -o exp.perf -- \\
        .venv/bin/hpccctl experiment fairness --algos hpcc --out /tmp/r
    python3 scripts/perf_lab_split.py exp.perf [--pid PID]

Each sample goes to one component, decided from its call chain read from
the leaf up:
  - a task that is neither the experiment's process (`--pid`: its
    threads; by default every process named hpccctl) nor ksoftirqd nor the
    idle task: "other processes", their BPF programs and the softirq work
    that ran in their context included (on a shared machine that is
    mostly their own traffic);
  - a BPF program on the chain (its innermost one, helpers it called
    included): "bpf <name>" (hpccd_int_sw, hpccd_int_deq, xdp_host, ...);
  - softirq work (handle_softirqs on the chain): "softirq: <part>", the
    part named by the first frame from the leaf that matches one of
    SOFTIRQ_PARTS;
  - else "engines" for the threads named hpccd-tp, "experiment (Python)"
    for the others, user or kernel (the kernel's part named as
    SYSCALL_PARTS says).
Figures are CPU seconds (samples / frequency) and shares of all samples.
The lab's softirq work that ran in another task's context is counted as
that task's: the lab's figures are a lower bound.
"""
from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys

SOFTIRQ_PARTS = [
    ("qdisc (HTB + bfifo)", re.compile(r"^(htb_|bfifo|qdisc_|__qdisc_run|sch_direct_xmit|"
                                       r"pfifo|__dev_xmit_skb)")),
    ("AF_XDP receive (copy)", re.compile(r"^(xsk_|__xsk_|xp_)")),
    ("generic XDP", re.compile(r"^(do_xdp_generic|bpf_prog_run_generic_xdp|"
                               r"netif_receive_generic_xdp|generic_xdp)")),
    ("RPS steering", re.compile(r"^(get_rps_cpu|enqueue_to_backlog|rps_|__smp_call|"
                                r"generic_smp_call|smp_call_function|call_function)")),
    ("IP forwarding", re.compile(r"^(ip_forward|ip_route_input|fib_|ip_rcv|ip_finish|"
                                 r"ip_output|ip_sublist|neigh_)")),
    ("UDP/socket delivery", re.compile(r"^(udp|__udp|sock_def_readable|skb_copy_datagram)")),
    ("veth", re.compile(r"^(veth_|__netif_receive|netif_receive|process_backlog|"
                        r"__napi_poll|napi_|netif_rx|dev_hard_start_xmit|"
                        r"__dev_queue_xmit|validate_xmit)")),
]
SYSCALL_PARTS = [
    ("sendto / AF_XDP transmit", re.compile(r"^(__sys_sendto|__x64_sys_sendto|xsk_|__xsk_)")),
    ("poll / sleep / switch", re.compile(r"^(do_sys_poll|__x64_sys_ppoll|schedule|"
                                         r"finish_task_switch|hrtimer_|do_nanosleep|"
                                         r"pv_native_safe_halt)")),
    ("futex (locks)", re.compile(r"^(futex_|__x64_sys_futex|do_futex)")),
    ("page faults / zeroing", re.compile(r"^(clear_page|exc_page_fault|do_anonymous_page|"
                                         r"handle_mm_fault|__handle_mm_fault)")),
    ("bpf() syscall (load, verifier, maps)", re.compile(r"^(__sys_bpf|bpf_check|do_check)")),
]
BPF = re.compile(r"^bpf_prog_[0-9a-f]+_(\w+)")
KERNEL = "[kernel.kallsyms]"


def samples(path: str):
    """(comm, pid, tid, time s, [(sym, dso) leaf first]) per sample of
    `perf script`."""
    p = subprocess.Popen(["perf", "script", "-i", path, "-F", "comm,pid,tid,time,ip,sym,dso"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         errors="replace")
    head, frames = None, []
    for line in p.stdout:
        line = line.rstrip("\n")
        if not line.strip():
            if head:
                yield head + (frames,)
            head, frames = None, []
        elif not line.startswith(("\t", " ")) or head is None:
            m = re.match(r"^(.*?)\s+(\d+)/(\d+)\s+([0-9.]+):\s*$", line.strip())
            if m:
                head = (m.group(1), int(m.group(2)), int(m.group(3)), float(m.group(4)))
        else:
            m = re.match(r"^\s*[0-9a-f]+\s+(.*?)\s+\((.*)\)\s*$", line)
            if m:
                sym = re.sub(r"\+0x[0-9a-f]+$", "", m.group(1))
                frames.append((sym, m.group(2)))
    if head:
        yield head + (frames,)
    p.wait()


def first(frames, parts, default):
    for sym, _ in frames:
        for name, rx in parts:
            if rx.match(sym):
                return name
    return default


def component(comm: str, pid: int, frames, ours) -> str:
    if not ours(comm, pid) and not comm.startswith(("ksoftirqd/", "swapper")):
        return "other processes"
    for sym, _ in frames:
        m = BPF.match(sym)
        if m:
            return f"bpf {m.group(1)}"
    if any(s in ("handle_softirqs", "net_rx_action", "__do_softirq") for s, _ in frames):
        return "softirq: " + first(frames, SOFTIRQ_PARTS, "other")
    if not ours(comm, pid):
        return "other processes"
    who = "engines (hpccd-tp)" if comm == "hpccd-tp" else "experiment (Python)"
    if not frames or frames[0][1] != KERNEL:
        return f"{who}: user"
    return f"{who}: kernel, " + first(frames, SYSCALL_PARTS, "other")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", help="perf.data of `perf record -a -g`")
    ap.add_argument("--pid", type=int, action="append",
                    help="the experiment's process (default: every process named hpccctl)")
    ap.add_argument("--freq", type=float, default=999, help="the -F of the recording (999)")
    ap.add_argument("--traffic", action="store_true",
                    help="only from the first to the last sample of the experiment's engine "
                         "threads (hpccd-tp): the traffic, without the labs' building")
    a = ap.parse_args(argv)
    pids: set[int] = set(a.pid or [])
    hpccctl: set[int] = set()

    def ours(comm: str, pid: int) -> bool:
        if pids:
            return pid in pids
        return pid in hpccctl

    counts: collections.Counter[str] = collections.Counter()
    total = 0
    every = list(samples(a.data))
    for comm, pid, _, _, _ in every:
        if comm == "hpccctl" and not pids:
            hpccctl.add(pid)
    t_from, t_to = -1.0, float("inf")
    if a.traffic:
        eng = [t for comm, pid, _, t, _ in every if comm == "hpccd-tp" and ours(comm, pid)]
        if not eng:
            print(f"perf_lab_split: {a.data}: no sample of an engine thread", file=sys.stderr)
            return 1
        t_from, t_to = min(eng), max(eng)
        print(f"the engines' span: {t_to - t_from:.1f} s")
    for comm, pid, _, t, frames in every:
        if t_from <= t <= t_to:
            counts[component(comm, pid, frames, ours)] += 1
            total += 1
    if not total:
        print(f"perf_lab_split: {a.data}: no samples", file=sys.stderr)
        return 1
    print(f"{'component':58s} {'CPU s':>7s} {'share':>6s}")
    for name, n in sorted(counts.items(), key=lambda kv: -kv[1]):
        print(f"{name:58s} {n / a.freq:7.2f} {n / total:6.1%}")
    print(f"{'all samples':58s} {total / a.freq:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
