"""A test's Python child process killed with SIGKILL once it says it is
ready: what a crashed daemon leaves behind (attachments, pins, struct_ops
registrations) for the next owner to find.

Used by tests/bpf/test_loader.py and tests/bpf/test_tcp_cc.py (``from
child_process import killed_when_ready``; tests/ is on the path, as for
conftest).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys


def killed_when_ready(code: str, *args: str) -> None:
    """Run ``python -c code *args``, wait for its first line of output,
    which must be "ready" (else the assertion shows its stderr), then kill
    it with SIGKILL and reap it, whatever happened; asserts it died of the
    SIGKILL."""
    child = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline()
        assert line.strip() == "ready", child.stderr.read() if child.poll() is not None else line
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        child.stdout.close()
        child.stderr.close()
    assert child.returncode == -signal.SIGKILL
