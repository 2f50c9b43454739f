"""Request/response over one TCP connection: the mice of the ``mice``
experiment, run as its own process in a lab host's namespace so that its
timings are not stretched by the runner's other threads (the GIL hands
over only every few milliseconds).

    python -m hpccd.experiment.rr server PORT [--size N] [--cc ALGO]
    python -m hpccd.experiment.rr client ADDR PORT --size N --count K
                                         --interval-us U [--cc ALGO]

The server answers every `size`-byte request with `size` bytes.  The
client sends a request every `interval` (or as soon as the previous answer
is in, if later), `count` of them or for `seconds`, times each from the send until the last byte of the
answer, and prints one JSON line: {"rtt_us": [...], "sent_ns": [...],
"cc": ...} (send times on CLOCK_MONOTONIC, like the queue samples).  Both set
TCP_NODELAY: a mouse is one segment each way, not merged or delayed.
"""
from __future__ import annotations

import argparse
import json
import socket
import sys
import time


def _recv_exact(s: socket.socket, n: int, buf: bytearray) -> bool:
    mv = memoryview(buf)
    got = 0
    while got < n:
        k = s.recv_into(mv[got:n])
        if k == 0:
            return False
        got += k
    return True


def server(port: int, size: int, cc: str | None = None) -> int:
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if cc:          # accepted connections inherit it (DCTCP's receiver half lives there)
        ls.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    ls.bind(("0.0.0.0", port))
    ls.listen(8)
    print("ready", flush=True)
    buf = bytearray(size)
    answer = bytes(size)
    while True:
        c, _ = ls.accept()
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with c:
            while _recv_exact(c, size, buf):
                c.sendall(answer)


def client(addr: str, port: int, size: int, count: int, interval_us: int, cc: str | None,
           seconds: float | None = None) -> int:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if cc:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.connect((addr, port))
    req = bytes(size)
    buf = bytearray(size)
    rtts, sent = [], []
    nxt = time.monotonic_ns()
    end = nxt + int(seconds * 1e9) if seconds else None
    for _ in range(count):
        if end is not None and time.monotonic_ns() >= end:
            break
        now = time.monotonic_ns()
        if now < nxt:
            time.sleep((nxt - now) / 1e9)
        t0 = time.monotonic_ns()
        s.sendall(req)
        if not _recv_exact(s, size, buf):
            print(json.dumps({"error": "server closed the connection", "rtt_us": rtts}))
            return 1
        rtts.append((time.monotonic_ns() - t0) / 1e3)
        sent.append(t0)
        nxt = t0 + interval_us * 1000
    s.close()
    print(json.dumps({"rtt_us": rtts, "sent_ns": sent, "cc": cc}))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hpccd.experiment.rr")
    sub = p.add_subparsers(dest="role", required=True)
    sv = sub.add_parser("server")
    sv.add_argument("port", type=int)
    sv.add_argument("--size", type=int, default=1000)
    sv.add_argument("--cc")
    cl = sub.add_parser("client")
    cl.add_argument("addr")
    cl.add_argument("port", type=int)
    cl.add_argument("--size", type=int, default=1000)
    cl.add_argument("--count", type=int, default=1000)
    cl.add_argument("--interval-us", type=int, default=1000)
    cl.add_argument("--cc")
    cl.add_argument("--seconds", type=float, help="stop after this long, even before --count")
    a = p.parse_args(argv)
    if a.role == "server":
        return server(a.port, a.size, a.cc)
    return client(a.addr, a.port, a.size, a.count, a.interval_us, a.cc, a.seconds)


if __name__ == "__main__":
    sys.exit(main())
