"""systemd/hpccd.service: what the daemon's lifecycle relies on.

Invariants protected: `systemd-analyze verify` accepts the unit without a
single warning; Type=notify with NotifyAccess=main and a watchdog;
Restart=on-failure but not for a refused configuration (exit 2) or a missing
interface (exit 3);
ExecStopPost cleans up; the capability set is exactly the one documented
(and exercised by tests/integration/test_daemon.py); the runtime directories
hold the control socket and the TCP CC lock (writable under ProtectSystem=strict) and
are preserved at stop.
"""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import pytest

from hpccd.agent.config import DEFAULT_CONTROL_SOCKET
from hpccd.agent.main import EXIT_CONFIG, EXIT_NO_INTERFACE
from hpccd.tcp_side.engine import LOCK_FILE

ROOT = pathlib.Path(__file__).resolve().parents[2]
UNIT = ROOT / "systemd" / "hpccd.service"
CAPS = {"CAP_BPF", "CAP_PERFMON", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_SYS_ADMIN"}


def unit_settings() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "[")):
            continue
        k, _, v = line.partition("=")
        out.setdefault(k, []).append(v)
    return out


def unit_capabilities() -> set[str]:
    return set(unit_settings()["CapabilityBoundingSet"][0].split())


def test_lifecycle_settings():
    s = unit_settings()
    assert s["Type"] == ["notify"] and s["NotifyAccess"] == ["main"]
    assert s["WatchdogSec"] and s["Restart"] == ["on-failure"]
    assert s["RestartPreventExitStatus"][0].split() == [str(EXIT_CONFIG), str(EXIT_NO_INTERFACE)]
    assert "--cleanup" in s["ExecStopPost"][0]
    assert s["ExecReload"] == ["/bin/kill -HUP $MAINPID"]
    assert unit_capabilities() == CAPS
    assert s["AmbientCapabilities"] == [""]
    assert s["NoNewPrivileges"] == ["yes"] and s["ProtectSystem"] == ["strict"]
    assert "bpf" in s["SystemCallFilter"][0].split()
    assert "AF_XDP" in s["RestrictAddressFamilies"][0].split()
    rd = s["RuntimeDirectory"][0].split()
    # the control socket's folder, and the one of the TCP CC lock (tcp_side.LOCK_FILE),
    # which must outlive the service: another daemon may hold the lock, the lab's files
    # are there
    assert rd == ["hpccd-daemon", os.path.basename(os.path.dirname(LOCK_FILE))]
    assert os.path.dirname(DEFAULT_CONTROL_SOCKET) == "/run/hpccd-daemon"
    assert s["RuntimeDirectoryPreserve"] == ["yes"]
    assert s["LimitMEMLOCK"] == ["infinity"]      # UMEM without CAP_IPC_LOCK


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze is not installed (apt package systemd)")
def test_systemd_analyze_verify(tmp_path):
    hpccd = shutil.which("hpccd") or str(ROOT / ".venv" / "bin" / "hpccd")
    assert pathlib.Path(hpccd).exists(), "the hpccd entry point is not installed"
    # The unit names /usr/bin/hpccd (a package's path); verify checks that
    # ExecStart exists, so point it at this checkout's entry point.
    unit = tmp_path / "hpccd.service"
    unit.write_text(UNIT.read_text().replace("/usr/bin/hpccd", hpccd))
    res = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout + res.stderr == "", "warnings:\n" + res.stdout + res.stderr
    # and the check is not blind: a typo is reported
    bad = tmp_path / "bad.service"
    bad.write_text(unit.read_text().replace("WatchdogSec=", "WachdogSec="))
    res = subprocess.run(["systemd-analyze", "verify", "--man=no", str(bad)],
                         capture_output=True, text=True, timeout=60)
    assert "WachdogSec" in res.stdout + res.stderr
