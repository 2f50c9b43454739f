"""Kernel TCP flows of the ``fct`` experiment, each run as a process of its
own in a lab host's namespace with one event loop: the runner's threads
would stretch the timings of hundreds of short flows a second by the GIL's
milliseconds (hpccd.experiment.rr runs the mice apart for the same reason).

    python -m hpccd.experiment.flowgen sink PORT [--cc ALGO]
    python -m hpccd.experiment.flowgen send PORT [--cc ALGO] [--lead-ms L]
                                        [--drain-s D]

The sink accepts on PORT, counts each connection's bytes until the
sender's FIN, then answers with the count (8 bytes, network order) and
closes; it prints "ready" once it listens.  The sender reads one line of
JSON from stdin, ``[[id, offset_ns, size, addr], ...]``, prints "ready",
and waits for a second line, the start t0 in CLOCK_MONOTONIC nanoseconds
(which every namespace shares): flow `id` arrives at t0 + offset_ns.
Starting every sender on one t0 after all are ready keeps their interpreter
start-up out of the schedule.  Per flow it opens a new connection `lead`
before its arrival (the handshake is not part of a flow's completion time,
as no handshake precedes the paper's RDMA flows), sends `size` bytes from
its arrival on, shuts its half down, and waits for the sink's count.  A flow's completion time is
from the first send() to the count's arrival: the last byte delivered and
its acknowledgement back, the same span as the native engine's FCT (open
to the last byte acknowledged).  It gives up on what is not done `drain`
seconds after the last arrival and prints one JSON line: ``{"flows":
[[id, start_ns, end_ns, count, error], ...]}`` (end_ns and count null and
error set for a flow that did not complete).

Both ends set TCP_NODELAY (a flow's last partial segment leaves at once
instead of waiting for an ACK under Nagle) and the congestion control
ALGO per socket (the listening socket's is inherited: DCTCP's receiver
half lives there).
"""
from __future__ import annotations

import argparse
import errno
import heapq
import json
import selectors
import socket
import struct
import sys
import time

CHUNK = 256 * 1024
COUNT = struct.Struct("!Q")
LEAD_MS = 20.0
# The sender waits in select(2), whose timeout has microseconds (epoll's has
# milliseconds: arrivals up to 1 ms late); its descriptors must stay below
# FD_SETSIZE, so at most this many connections are open at once (more wait
# for a slot and start late, the lag reported).
MAX_LIVE = 800


def _cc(s: socket.socket, cc: str | None) -> None:
    if cc:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())


def sink(port: int, cc: str | None) -> int:
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    _cc(ls, cc)
    ls.bind(("0.0.0.0", port))
    ls.listen(1024)
    ls.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(ls, selectors.EVENT_READ, None)
    buf = bytearray(CHUNK)
    counts: dict[socket.socket, int] = {}
    print("ready", flush=True)
    while True:
        for key, _ in sel.select():
            s = key.fileobj
            if s is ls:
                while True:
                    try:
                        c, _ = ls.accept()
                    except (BlockingIOError, InterruptedError):
                        break
                    c.setblocking(False)
                    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    counts[c] = 0
                    sel.register(c, selectors.EVENT_READ, None)
                continue
            try:
                n = s.recv_into(buf)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                n = -1
            if n > 0:
                counts[s] += n
                continue
            sel.unregister(s)
            total = counts.pop(s)
            if n == 0:                       # the sender's FIN: all its bytes are here
                try:
                    s.send(COUNT.pack(total))    # 8 bytes into an empty send buffer
                except OSError:
                    pass
            s.close()


class _Flow:
    __slots__ = ("id", "t", "size", "addr", "sock", "state", "left", "start", "end", "reply",
                 "error")

    def __init__(self, fid: int, t: int, size: int, addr: str):
        self.id, self.t, self.size, self.addr = fid, t, size, addr
        self.sock: socket.socket | None = None
        self.state = "pending"
        self.left = size
        self.start = self.end = None
        self.reply = b""
        self.error: str | None = None

    def __lt__(self, other: "_Flow") -> bool:
        return (self.t, self.id) < (other.t, other.id)


def send(port: int, cc: str | None, plan: list, lead_ns: int, deadline_ns: int | None) -> int:
    sel = selectors.SelectSelector()
    data = memoryview(bytes(CHUNK))
    pending = sorted(_Flow(int(i), int(t), int(n), a) for i, t, n, a in plan)
    nxt = 0                                  # pending[nxt:] not yet connecting
    ready: list[_Flow] = []                  # connected, waiting for their arrival (heap)
    live = 0                                 # flows with a socket

    def fail(f: _Flow, why: str) -> None:
        nonlocal live
        f.error, f.state = why, "failed"
        if f.sock is not None:
            try:
                sel.unregister(f.sock)
            except (KeyError, ValueError):
                pass
            f.sock.close()
            live -= 1

    def begin(f: _Flow) -> None:
        f.state = "sending"
        f.start = time.monotonic_ns()
        sel.register(f.sock, selectors.EVENT_WRITE, f)
        push(f)

    def push(f: _Flow) -> None:
        while f.left > 0:
            try:
                k = f.sock.send(data[:min(CHUNK, f.left)])
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                fail(f, f"send: {e}")
                return
            f.left -= k
        f.sock.shutdown(socket.SHUT_WR)
        f.state = "reply"
        sel.modify(f.sock, selectors.EVENT_READ, f)

    while nxt < len(pending) or live:
        now = time.monotonic_ns()
        if deadline_ns is not None and now >= deadline_ns:
            break
        while nxt < len(pending) and pending[nxt].t - lead_ns <= now and live < MAX_LIVE:
            f = pending[nxt]
            nxt += 1
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            f.sock = s
            live += 1
            try:
                _cc(s, cc)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                s.setblocking(False)
                rc = s.connect_ex((f.addr, port))
            except OSError as e:
                fail(f, f"socket: {e}")
                continue
            if rc not in (0, errno.EINPROGRESS):
                fail(f, f"connect: {errno.errorcode.get(rc, rc)}")
                continue
            f.state = "connecting"
            sel.register(s, selectors.EVENT_WRITE, f)
        while ready and ready[0].t <= now:
            begin(heapq.heappop(ready))
        wake = [ready[0].t] if ready else []
        if nxt < len(pending) and live < MAX_LIVE:
            wake.append(pending[nxt].t - lead_ns)
        timeout = max(0.0, (min(wake) - time.monotonic_ns()) / 1e9) if wake else 0.05
        for key, _ in sel.select(min(timeout, 0.05)):
            f = key.data
            if f.state == "connecting":
                err = f.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    fail(f, f"connect: {errno.errorcode.get(err, err)}")
                    continue
                sel.unregister(f.sock)
                f.state = "connected"
                if f.t <= time.monotonic_ns():
                    begin(f)                 # connected late: starts now (the lag is reported)
                else:
                    heapq.heappush(ready, f)
            elif f.state == "sending":
                push(f)
            elif f.state == "reply":
                try:
                    got = f.sock.recv(COUNT.size - len(f.reply))
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError as e:
                    fail(f, f"recv: {e}")
                    continue
                if not got:
                    fail(f, "the sink closed without a count")
                    continue
                f.reply += got
                if len(f.reply) == COUNT.size:
                    f.end = time.monotonic_ns()
                    f.state = "done"
                    sel.unregister(f.sock)
                    f.sock.close()
                    live -= 1
    out = []
    for f in pending:
        if f.state == "done":
            out.append([f.id, f.start, f.end, COUNT.unpack(f.reply)[0], None])
        else:
            out.append([f.id, f.start, None, None,
                        f.error or f"not done by the deadline ({f.state}, "
                                   f"{f.size - f.left} of {f.size} bytes sent)"])
    print(json.dumps({"flows": out}), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hpccd.experiment.flowgen")
    sub = p.add_subparsers(dest="role", required=True)
    sk = sub.add_parser("sink")
    sk.add_argument("port", type=int)
    sk.add_argument("--cc")
    sd = sub.add_parser("send")
    sd.add_argument("port", type=int)
    sd.add_argument("--cc")
    sd.add_argument("--lead-ms", type=float, default=LEAD_MS,
                    help="connect this long before a flow's arrival")
    sd.add_argument("--drain-s", type=float, default=10.0,
                    help="give up on what is not done this long after the last arrival")
    a = p.parse_args(argv)
    if a.role == "sink":
        return sink(a.port, a.cc)
    plan = json.loads(sys.stdin.readline())
    print("ready", flush=True)
    line = sys.stdin.readline()
    if not line.strip():
        return 1                               # the runner gave up before the start
    t0 = int(line)
    plan = [(i, t0 + int(off), n, addr) for i, off, n, addr in plan]
    last = max((t for _, t, _, _ in plan), default=t0)
    return send(a.port, a.cc, plan, int(a.lead_ms * 1e6), last + int(a.drain_s * 1e9))


if __name__ == "__main__":
    sys.exit(main())
