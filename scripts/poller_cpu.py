#!/usr/bin/env python3
"""The CPU the experiment's own Python pollers take: runs `hpccctl ARGS` in
this process with the queue recorders' QueueSampler.read and the native
sinks' NativeSink._take timed (calls, thread CPU seconds, wall seconds,
queue samples parsed), printed at the end (docs/lab.md "Where the lab's
CPU goes").

    sudo .venv/bin/python scripts/poller_cpu.py experiment fairness --algos hpcc --out /tmp/r
"""
from __future__ import annotations

import collections
import sys
import threading
import time

from hpccd.experiment import native
from hpccd.lab import int_switch

TOTALS: dict[str, list] = collections.defaultdict(lambda: [0, 0.0, 0.0, 0])
_LOCK = threading.Lock()


def timed(cls, name: str, label: str, count: bool = False) -> None:
    """Wrap cls.name so that its calls add to TOTALS[label]."""
    f = getattr(cls, name)

    def g(self, *a, **k):
        t0, c0 = time.perf_counter(), time.thread_time()
        r = f(self, *a, **k)
        t1, c1 = time.perf_counter(), time.thread_time()
        with _LOCK:
            e = TOTALS[label]
            e[0] += 1
            e[1] += c1 - c0
            e[2] += t1 - t0
            if count and r is not None:
                e[3] += len(r)
        return r
    setattr(cls, name, g)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    timed(int_switch.QueueSampler, "read", "queue recorders (QueueSampler.read)", count=True)
    timed(native.NativeSink, "_take", "native sinks (NativeSink._take)")
    from hpccd.cli.main import main as hpccctl
    sys.argv = ["hpccctl"] + argv
    try:
        rc = hpccctl()
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else 1
    for label, (n, cpu, wall, items) in TOTALS.items():
        extra = f", {items} queue samples" if items else ""
        print(f"[poller_cpu] {label}: {n} calls, {cpu:.2f} CPU s ({wall:.2f} s wall){extra}",
              file=sys.stderr)
    return rc or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
