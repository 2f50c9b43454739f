#!/usr/bin/env python3
"""Run the tests with busy loops beside them, as a loaded CI machine runs them.

The integration tests share two cores with every emulated host, and most
of the failures CI has found that a quiet run does not were a test's own
timing (a heartbeat gone stale before a send ended, a process not yet in
its namespace when the test looked).  This starts `--busy` processes that
spin, each one CPU's worth of load, runs pytest with the arguments given,
stops the loops (they die with this process, even when it is killed) and
prints what the load was:

    sudo .venv/bin/python scripts/test_under_load.py --busy 2 -- -q -ra tests/integration

Exit status: pytest's.
"""
from __future__ import annotations

import argparse
import ctypes
import multiprocessing
import os
import signal
import subprocess
import sys
import time

PR_SET_PDEATHSIG = 1


def spin() -> None:
    """One CPU's worth of load until killed, or until the parent goes."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    while True:
        pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--busy", type=int, default=1,
                    help="busy loops beside the tests, each one CPU's worth (default 1)")
    ap.add_argument("pytest_args", nargs=argparse.REMAINDER,
                    help="arguments of pytest, after --")
    a = ap.parse_args()
    if a.busy < 0:
        ap.error(f"--busy must be 0 or more, got {a.busy}")
    args = a.pytest_args[1:] if a.pytest_args[:1] == ["--"] else a.pytest_args
    loops = [multiprocessing.Process(target=spin, daemon=True) for _ in range(a.busy)]
    for p in loops:
        p.start()
    load0, t0 = os.getloadavg()[0], time.monotonic()
    try:
        rc = subprocess.call([sys.executable, "-m", "pytest", *args])
    except KeyboardInterrupt:
        rc = 130
    finally:
        for p in loops:
            p.kill()
            p.join()
    print(f"[test_under_load] {a.busy} busy loop(s) on {os.cpu_count()} CPUs; load average "
          f"{load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; "
          f"{time.monotonic() - t0:.0f} s; pytest exit status {rc}", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
