"""sd_notify (hpccd.agent.sdnotify) against real AF_UNIX datagram sockets.

Invariants protected: messages reach a path socket and an abstract
('@'-prefixed) one, as KEY=VALUE lines; no NOTIFY_SOCKET is a silent no-op;
the environment is unset so children do not inherit it; the watchdog
interval is half of WATCHDOG_USEC and only for the process WATCHDOG_PID
names; a vanished supervisor does not raise.
"""
from __future__ import annotations

import os
import secrets
import socket

from hpccd.agent import sdnotify


def _recv(s: socket.socket) -> dict[str, str]:
    s.settimeout(2)
    data = s.recv(4096).decode()
    return dict(line.split("=", 1) for line in data.split("\n"))


def test_path_socket(tmp_path):
    path = str(tmp_path / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.bind(path)
        n = sdnotify.Notifier({"NOTIFY_SOCKET": path})
        assert n.enabled and n.watchdog is None
        assert n.ready("attached on eth0")
        assert _recv(s) == {"READY": "1", "STATUS": "attached on eth0"}
        assert n.stopping()
        assert _recv(s)["STOPPING"] == "1"
        assert n.reloading()
        m = _recv(s)
        assert m["RELOADING"] == "1" and int(m["MONOTONIC_USEC"]) > 0
        assert n.status("two\nlines")                      # a newline would start a new field
        assert _recv(s) == {"STATUS": "two lines"}
        n.close()


def test_abstract_socket():
    name = "hpccd-test-" + secrets.token_hex(4)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.bind(b"\0" + name.encode())
        n = sdnotify.Notifier({"NOTIFY_SOCKET": "@" + name})
        assert n.send(WATCHDOG=1)
        assert _recv(s) == {"WATCHDOG": "1"}
        n.close()


def test_no_socket_and_gone_socket(tmp_path):
    n = sdnotify.Notifier({})
    assert not n.enabled and not n.ready("x")
    n = sdnotify.Notifier({"NOTIFY_SOCKET": str(tmp_path / "nobody")})
    assert n.enabled and not n.ready("x")                  # ENOENT: reported, not raised
    assert not sdnotify.Notifier({"NOTIFY_SOCKET": "vsock:2:1"}).enabled


def test_environment_is_unset(monkeypatch, tmp_path):
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "n"))
    monkeypatch.setenv("WATCHDOG_USEC", "4000000")
    n = sdnotify.Notifier()
    assert n.watchdog == 2.0
    assert "NOTIFY_SOCKET" not in os.environ and "WATCHDOG_USEC" not in os.environ


def test_watchdog_interval():
    me = str(os.getpid())
    assert sdnotify.watchdog_interval({"WATCHDOG_USEC": "3000000"}) == 1.5
    assert sdnotify.watchdog_interval({"WATCHDOG_USEC": "3000000", "WATCHDOG_PID": me}) == 1.5
    assert sdnotify.watchdog_interval({"WATCHDOG_USEC": "3000000", "WATCHDOG_PID": "1"}) is None
    assert sdnotify.watchdog_interval({"WATCHDOG_USEC": "0"}) is None
    assert sdnotify.watchdog_interval({}) is None
    n = sdnotify.Notifier({"NOTIFY_SOCKET": "/nonexistent", "WATCHDOG_USEC": "1000000"})
    assert n.watchdog_due(100.0) <= 0
    n.ping_watchdog(100.0)
    assert n.watchdog_due(100.0) == 0.5
