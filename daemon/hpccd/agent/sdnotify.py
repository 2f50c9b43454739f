"""systemd's readiness protocol (sd_notify(3)) in a few lines, no dependency.

The service manager passes ``NOTIFY_SOCKET``: a path of an AF_UNIX datagram
socket, or an abstract one written with a leading ``@`` (replaced by a NUL
byte).  A message is newline-separated ``KEY=VALUE`` lines: ``READY=1``,
``STATUS=...``, ``RELOADING=1``, ``STOPPING=1``, ``WATCHDOG=1`` ...  With
``WATCHDOG_USEC`` set (``WatchdogSec=``), the service must send
``WATCHDOG=1`` more often than that; ``WATCHDOG_PID``, when set, says which
process the watchdog is meant for.

Without ``NOTIFY_SOCKET`` (not started by systemd) every call is a no-op
returning False.  A failing send is reported (False, and the error logged
once), never raised: the daemon must not die because its supervisor went
away.
"""
from __future__ import annotations

import logging
import os
import socket
import time

__all__ = ["Notifier", "watchdog_interval"]

log = logging.getLogger("hpccd.agent.sdnotify")


def _address(value: str) -> str | bytes | None:
    if not value:
        return None
    if value[0] == "@":
        return b"\0" + value[1:].encode()          # abstract namespace
    if value[0] == "/":
        return value
    return None                                     # vsock and others: not supported


def watchdog_interval(env: dict[str, str] | None = None) -> float | None:
    """Seconds between WATCHDOG=1 messages (half of WATCHDOG_USEC, as
    sd_watchdog_enabled(3) advises), or None when no watchdog is asked for
    this process."""
    env = os.environ if env is None else env
    usec = env.get("WATCHDOG_USEC", "")
    pid = env.get("WATCHDOG_PID", "")
    if not usec.isdigit() or int(usec) == 0:
        return None
    if pid and (not pid.isdigit() or int(pid) != os.getpid()):
        return None
    return int(usec) / 2e6


class Notifier:
    """One datagram socket to NOTIFY_SOCKET (taken from the environment at
    construction; ``unset_env`` removes it so child processes do not
    inherit it, like sd_notify's unset_environment)."""

    def __init__(self, env: dict[str, str] | None = None, unset_env: bool = True):
        env = os.environ if env is None else env
        self.address = _address(env.get("NOTIFY_SOCKET", ""))
        self.watchdog = watchdog_interval(env)
        if unset_env and env is os.environ:
            for k in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
                os.environ.pop(k, None)
        self._sock: socket.socket | None = None
        self._warned = False
        self.last_watchdog = 0.0

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def send(self, **fields: str | int) -> bool:
        """Send KEY=VALUE lines, e.g. ``send(READY=1, STATUS="attached")``."""
        if self.address is None:
            return False
        msg = "\n".join(f"{k}={str(v).replace(chr(10), ' ')}" for k, v in fields.items())
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            self._sock.sendto(msg.encode(), self.address)
            return True
        except OSError as e:
            if not self._warned:
                log.warning("sd_notify to %r failed: %s", self.address, e)
                self._warned = True
            return False

    def ready(self, status: str) -> bool:
        return self.send(READY=1, STATUS=status)

    def status(self, status: str) -> bool:
        return self.send(STATUS=status)

    def reloading(self) -> bool:
        # MONOTONIC_USEC: Type=notify-reload (systemd 253+) wants it; older ignore it.
        return self.send(RELOADING=1, MONOTONIC_USEC=time.clock_gettime_ns(
            time.CLOCK_MONOTONIC) // 1000)

    def stopping(self, status: str = "stopping") -> bool:
        return self.send(STOPPING=1, STATUS=status)

    def watchdog_due(self, now: float) -> float | None:
        """Seconds until the next WATCHDOG=1 is due (<= 0: now), or None."""
        if self.watchdog is None or self.address is None:
            return None
        return self.last_watchdog + self.watchdog - now

    def ping_watchdog(self, now: float) -> bool:
        self.last_watchdog = now
        return self.send(WATCHDOG=1)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
