"""The daemon's control socket: a Unix stream socket speaking JSON lines.

Protocol (one request per connection, UTF-8):

    -> {"cmd": "status"}                          one JSON object, one line
    <- {"ok": true, "result": {...}}              one JSON object, one line
    <- {"ok": false, "error": "why"}

Commands: ``status``, ``flows``, ``flow`` (``{"id": N}``), ``set``
(``{"param": "hpcc.eta", "value": "0.9"}``), ``probes``; with the transport
component, ``send`` (``{"peer": "10.0.0.2", "bytes": N, "algo": "hpcc"}``,
algo optional: the peer's policy) and ``transfer`` (``{"id": N}``).  What each returns
is documented in docs/configuration.md ("Control socket"); ``hpccctl``
(hpccd.agent.control_client) is the client.

The server runs in the daemon's main loop (a selector), never blocks on a
client: each connection has a read buffer (a request may be at most
:data:`MAX_REQUEST` bytes) and a write buffer, and is closed after its
answer or after :data:`CLIENT_TIMEOUT_S` without progress.  The socket file
is created mode 0660 in a directory made 0750; a socket that still answers
means another daemon runs there, and start-up is refused rather than
stealing it; a dead one (connection refused) is replaced.
"""
from __future__ import annotations

import errno
import json
import logging
import os
import selectors
import socket
import stat
import time
from typing import Any, Callable

__all__ = ["ControlServer", "ControlError", "MAX_REQUEST", "COMMANDS", "request"]

log = logging.getLogger("hpccd.agent.control")

MAX_REQUEST = 64 << 10
CLIENT_TIMEOUT_S = 5.0
COMMANDS = ("status", "flows", "flow", "set", "probes", "send", "transfer")


class ControlError(Exception):
    """A request the daemon refuses; the message goes back to the client."""


Handler = Callable[[str, dict], Any]


class _Conn:
    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.inbuf = bytearray()
        self.outbuf = b""
        self.deadline = time.monotonic() + CLIENT_TIMEOUT_S


class ControlServer:
    def __init__(self, path: str, handler: Handler, sel: selectors.BaseSelector):
        self.path = path
        self.handler = handler
        self.sel = sel
        self.sock: socket.socket | None = None
        self._ino: tuple[int, int] | None = None
        self._conns: dict[int, _Conn] = {}

    def open(self) -> None:
        try:
            self._open()
        except OSError as e:
            raise ControlError(f"control socket {self.path}: {e.strerror or e}") from e

    def _open(self) -> None:
        d = os.path.dirname(self.path)
        os.makedirs(d, mode=0o750, exist_ok=True)
        if os.path.exists(self.path):
            if not stat.S_ISSOCK(os.lstat(self.path).st_mode):
                raise ControlError(f"{self.path} exists and is not a socket; not replacing it")
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
            try:
                probe.settimeout(1.0)
                probe.connect(self.path)
            except OSError as e:
                if e.errno not in (errno.ECONNREFUSED, errno.ENOENT):
                    raise
                os.unlink(self.path)                # left by a dead daemon
            else:
                raise ControlError(f"another daemon answers on {self.path}")
            finally:
                probe.close()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            old = os.umask(0o117)                   # the socket is born 0660
            try:
                s.bind(self.path)
            finally:
                os.umask(old)
            s.listen(16)
            s.setblocking(False)
        except BaseException:
            s.close()
            raise
        st = os.stat(self.path)
        self._ino = (st.st_dev, st.st_ino)
        self.sock = s
        self.sel.register(s, selectors.EVENT_READ, self._accept)

    def _accept(self, mask: int) -> None:
        assert self.sock is not None
        while True:
            try:
                c, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            c.setblocking(False)
            conn = _Conn(c)
            self._conns[c.fileno()] = conn
            self.sel.register(c, selectors.EVENT_READ, lambda m, conn=conn: self._io(conn, m))

    def _io(self, conn: _Conn, mask: int) -> None:
        try:
            if mask & selectors.EVENT_READ and not conn.outbuf:
                data = conn.sock.recv(65536)
                if not data:
                    self._close(conn)
                    return
                conn.inbuf += data
                if b"\n" not in conn.inbuf and len(conn.inbuf) <= MAX_REQUEST:
                    return
                line = bytes(conn.inbuf.split(b"\n", 1)[0])
                reply = self._answer(line) if len(line) <= MAX_REQUEST else \
                    {"ok": False, "error": f"request longer than {MAX_REQUEST} bytes"}
                conn.outbuf = (json.dumps(reply, default=_json_default) + "\n").encode()
                self.sel.modify(conn.sock, selectors.EVENT_WRITE,
                                lambda m, conn=conn: self._io(conn, m))
            if mask & selectors.EVENT_WRITE and conn.outbuf:
                n = conn.sock.send(conn.outbuf)
                conn.outbuf = conn.outbuf[n:]
                conn.deadline = time.monotonic() + CLIENT_TIMEOUT_S
                if not conn.outbuf:
                    self._close(conn)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as e:
            log.debug("control client: %s", e)
            self._close(conn)

    def _answer(self, line: bytes) -> dict[str, Any]:
        try:
            req = json.loads(line)
        except (ValueError, UnicodeDecodeError) as e:
            return {"ok": False, "error": f"not a JSON request: {e}"}
        try:
            if not isinstance(req, dict) or not isinstance(req.get("cmd"), str):
                raise ControlError('a request is a JSON object with "cmd"')
            args = req.get("args", {})
            if not isinstance(args, dict):
                raise ControlError('"args" must be a JSON object')
            if req["cmd"] not in COMMANDS:
                raise ControlError(f"unknown command {req['cmd']!r} "
                                   f"(known: {', '.join(COMMANDS)})")
            return {"ok": True, "result": self.handler(req["cmd"], args)}
        except ControlError as e:
            return {"ok": False, "error": str(e)}
        except Exception as e:                      # a bug must not kill the daemon
            log.exception("control request %r failed", line[:200])
            return {"ok": False, "error": f"internal error: {e!r}"}

    def expire(self, now: float) -> None:
        """Close connections that made no progress for CLIENT_TIMEOUT_S."""
        for conn in list(self._conns.values()):
            if now > conn.deadline:
                self._close(conn)

    def _close(self, conn: _Conn) -> None:
        fd = conn.sock.fileno()
        if fd >= 0:
            self._conns.pop(fd, None)
            try:
                self.sel.unregister(conn.sock)
            except (KeyError, ValueError):
                pass
        conn.sock.close()

    def close(self) -> None:
        for conn in list(self._conns.values()):
            self._close(conn)
        if self.sock is not None:
            try:
                self.sel.unregister(self.sock)
            except (KeyError, ValueError):
                pass
            self.sock.close()
            self.sock = None
        # Remove the file only if it is still the one we bound.
        try:
            st = os.stat(self.path)
            if self._ino == (st.st_dev, st.st_ino):
                os.unlink(self.path)
        except FileNotFoundError:
            pass


def _json_default(o: Any) -> Any:
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    if isinstance(o, bytes):
        return o.hex()
    return str(o)


def request(path: str, cmd: str, args: dict | None = None, timeout: float = 5.0) -> Any:
    """One request to the daemon at `path`; the result, or ControlError with
    the daemon's message (or why it could not be reached)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    s.settimeout(timeout)
    try:
        try:
            s.connect(path)
        except OSError as e:
            if e.errno in (errno.EACCES, errno.EPERM):
                raise ControlError(
                    f"cannot reach the daemon at {path}: {e.strerror} (the control socket "
                    f"is for root and the daemon's group: run as root)") from None
            raise ControlError(f"cannot reach the daemon at {path}: {e.strerror} "
                               f"(is hpccd running? --socket or daemon.control_socket)") from None
        buf = bytearray()
        try:
            s.sendall((json.dumps({"cmd": cmd, "args": args or {}}) + "\n").encode())
            while True:
                data = s.recv(65536)
                if not data:
                    break
                buf += data
        except OSError as e:         # the daemon died or hung mid-request
            why = e.strerror or type(e).__name__
            raise ControlError(f"the daemon at {path} went away during {cmd!r}: {why}") from None
    finally:
        s.close()
    try:
        reply = json.loads(buf)
    except ValueError:
        raise ControlError(f"malformed answer from the daemon: {bytes(buf[:200])!r}") from None
    if not reply.get("ok"):
        raise ControlError(reply.get("error", "error"))
    return reply.get("result")
