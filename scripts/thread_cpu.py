#!/usr/bin/env python3
"""Where a command's CPU went, second by second: run it, read the run time of
every thread of it and of its children (/proc/PID/task/TID/schedstat) every
0.2 s, and print the CPU seconds by thread (grouped by name; the TCP-side
probe engines, which run at nice -10, as "engine(nice-10)") over the whole
run and per second beside the whole machine's busy share and softirq share
(/proc/stat): on a shared machine, whether the CPUs were busy with this
command or with something else.

    sudo .venv/bin/python scripts/thread_cpu.py .venv/bin/hpccctl experiment incast \\
        --algos tcp-hpcc,cubic
"""
from __future__ import annotations

import collections
import os
import subprocess
import sys
import time


def machine() -> list[int]:
    """The first line of /proc/stat: jiffies user, nice, system, idle, iowait,
    irq, softirq, steal, ..."""
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:]]


def threads(root: int) -> dict[tuple[int, int], tuple[int, int, str]]:
    """(pid, tid) -> (run time ns, nice, comm) of `root` and its children."""
    pids = [root]
    try:
        for t in os.listdir(f"/proc/{root}/task"):
            with open(f"/proc/{root}/task/{t}/children") as f:
                pids += [int(x) for x in f.read().split()]
    except OSError:
        pass
    out = {}
    for p in pids:
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tids:
            try:
                with open(f"/proc/{p}/task/{t}/schedstat") as f:
                    ns = int(f.read().split()[0])
                with open(f"/proc/{p}/task/{t}/stat") as f:
                    s = f.read()
                comm = s[s.index("(") + 1:s.rindex(")")]
                nice = int(s[s.rindex(")") + 2:].split()[16])
            except (OSError, ValueError, IndexError):
                continue                              # the thread ended meanwhile
            out[(p, int(t))] = (ns, nice, comm)
    return out


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    w0 = time.monotonic()
    s0 = machine()
    try:
        proc = subprocess.Popen(argv)
    except OSError as e:
        print(f"thread_cpu: {argv[0]}: {e.strerror}", file=sys.stderr)
        return 2
    last: dict = {}
    total: collections.Counter = collections.Counter()
    per_s: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    marks: dict[int, list[int]] = {}
    while proc.poll() is None:
        sec = int(time.monotonic() - w0)
        marks.setdefault(sec, machine())
        for k, (ns, nice, comm) in threads(proc.pid).items():
            d = ns - last.get(k, (0,))[0]
            if d > 0:
                cls = "engine(nice-10)" if nice == -10 else comm
                total[cls] += d
                per_s[sec][cls] += d
            last[k] = (ns,)
        time.sleep(0.2)
    el, d = time.monotonic() - w0, [b - a for a, b in zip(s0, machine())]
    hz = os.sysconf("SC_CLK_TCK")
    tot = sum(d[:8]) or 1
    print(f"\n[thread_cpu] {el:.1f} s; the machine: user {d[0] / hz:.1f} s, system "
          f"{d[2] / hz:.1f} s, softirq {d[6] / hz:.1f} s, idle {d[3] / hz:.1f} s "
          f"({(tot - d[3] - d[4] - d[1]) / tot:.0%} busy)")
    for k, v in total.most_common(8):
        print(f"[thread_cpu]   {k}: {v / 1e9:.1f} CPU s")
    secs = sorted(marks)
    for a, b in zip(secs, secs[1:]):
        m = [y - x for x, y in zip(marks[a], marks[b])]
        t = sum(m[:8]) or 1
        ours = ", ".join(f"{k} {v / 1e9 / (b - a):.0%}" for k, v in per_s[a].most_common(4))
        print(f"[thread_cpu] t={a:3d} s: machine {(t - m[3] - m[4] - m[1]) / t:.0%} busy, "
              f"softirq {m[6] / t:.0%}; this command's threads: {ours or '-'}")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
