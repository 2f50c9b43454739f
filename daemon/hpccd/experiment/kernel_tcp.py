"""Kernel TCP flows between lab hosts, driven from this process.

Each flow is a TCP socket made inside its sender's namespace
(Lab.socket) with its congestion control set per socket (TCP_CONGESTION:
cubic, bbr, or a BPF struct_ops one such as dctcp or hpcc when
registered), so that several algorithms run on the same links in one run
without changing any namespace's default.  Flows are connected first and
started together on a barrier (an incast starts within tens of
microseconds, where separate iperf3 processes would start milliseconds
apart).  The receiving side (TcpSink) accepts in the receiver's namespace
and records, per connection, (time, bytes so far) as data arrives, so
throughput over time and completion times are read off the receiver, on
the same clock as the queue samples (CLOCK_MONOTONIC).
"""
from __future__ import annotations

import socket
import threading
import time

__all__ = ["available", "check_available", "TcpSink", "TcpFlow", "AlgoUnavailable"]

_AVAILABLE = "/proc/sys/net/ipv4/tcp_available_congestion_control"
CHUNK = 256 * 1024


class AlgoUnavailable(RuntimeError):
    pass


def available() -> list[str]:
    """Congestion controls the kernel has now (built in, modules loaded,
    struct_ops registered)."""
    with open(_AVAILABLE) as f:
        return f.read().split()


def check_available(algo: str) -> None:
    have = available()
    if algo not in have:
        hint = (" (a BPF struct_ops of hpccd: the daemon registers it, see "
                "docs/tcp-side.md)" if algo in ("hpcc", "dctcp") else "")
        raise AlgoUnavailable(f"kernel TCP congestion control {algo!r} is not available "
                              f"here{hint}; the kernel has: {' '.join(have)}")


class _Conn:
    def __init__(self, sock: socket.socket, peer: tuple[str, int]):
        self.sock = sock
        self.peer = peer
        self.points: list[tuple[int, int]] = []     # (t_ns, bytes so far)
        self.total = 0
        self.closed_ns: int | None = None


class TcpSink:
    """A listening socket on `port` in `node`'s namespace; every
    connection is read to its end in its own thread.  ``conns`` maps the
    peer's (address, port) to what arrived."""

    def __init__(self, lab, node: str, port: int, algo: str | None = None):
        self.lab, self.node, self.port = lab, node, port
        self.ls = lab.socket(node, socket.AF_INET, socket.SOCK_STREAM)
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if algo:
            # accepted connections inherit it: a DCTCP receiver's CE state
            # machine lives in its congestion control ([DCTCP] section 3.2)
            self.ls.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, algo.encode())
        self.ls.bind(("0.0.0.0", port))
        self.ls.listen(256)
        self.conns: dict[tuple[str, int], _Conn] = {}
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._acceptor = threading.Thread(target=self._accept, daemon=True, name="sink-accept")
        self._acceptor.start()

    def _accept(self) -> None:
        while True:
            try:
                s, peer = self.ls.accept()
            except OSError:
                return
            self.lab.track(s)                    # closed by the lab's down() at the latest
            c = _Conn(s, peer)
            with self._lock:
                self.conns[peer] = c
            t = threading.Thread(target=self._read, args=(c,), daemon=True, name="sink-read")
            self._threads.append(t)
            t.start()

    @staticmethod
    def _read(c: _Conn) -> None:
        buf = bytearray(CHUNK)
        mv = memoryview(buf)
        while True:
            try:
                n = c.sock.recv_into(mv)
            except OSError:
                n = 0
            if n == 0:
                c.closed_ns = time.monotonic_ns()
                return
            c.total += n
            c.points.append((time.monotonic_ns(), c.total))

    def conn(self, flow: "TcpFlow") -> _Conn:
        """What arrived of `flow` (its connection, found by its local port)."""
        key = flow.local
        for _ in range(200):
            with self._lock:
                if key in self.conns:
                    return self.conns[key]
            time.sleep(0.005)
        raise RuntimeError(f"sink {self.node}:{self.port} never accepted flow {flow.name} "
                           f"from {key}")

    def close(self) -> None:
        """Stop accepting (shutdown wakes the accept() blocked in the other
        thread; a bare close() would not, and the socket would live on)
        and wait for the readers, which end when their peers close."""
        try:
            self.ls.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.ls.close()
        self._acceptor.join(timeout=5)
        for t in self._threads:
            t.join(timeout=5)
        with self._lock:
            for c in self.conns.values():
                c.sock.close()


class TcpFlow:
    """A TCP connection from `src` to `dst`:`port` with congestion control
    `algo`.  send(n) sends n bytes (from a thread with start()); stream()
    sends until stop()."""

    def __init__(self, lab, src: str, dst: str, port: int, algo: str, name: str = ""):
        self.name = name or f"{src}->{dst}"
        self.algo = algo
        self.sock = lab.socket(src, socket.AF_INET, socket.SOCK_STREAM)
        try:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, algo.encode())
        except OSError as e:
            raise AlgoUnavailable(f"flow {self.name}: TCP_CONGESTION {algo!r}: {e}") from None
        self.sock.connect((lab.address(dst), port))
        self.local = (lab.address(src), self.sock.getsockname()[1])
        self.start_ns: int | None = None
        self.sent_ns: int | None = None          # when the last byte was handed to the kernel
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _send(self, nbytes: int | None, barrier: threading.Barrier | None) -> None:
        data = memoryview(bytes(CHUNK))
        try:
            if barrier is not None:
                barrier.wait()
            self.start_ns = time.monotonic_ns()
            left = nbytes
            while not self._stop.is_set() and (left is None or left > 0):
                k = CHUNK if left is None else min(CHUNK, left)
                self.sock.sendall(data[:k])
                if left is not None:
                    left -= k
            self.sent_ns = time.monotonic_ns()
            self.sock.shutdown(socket.SHUT_WR)
        except BaseException as e:               # reported by join()
            self.error = e

    def start(self, nbytes: int | None = None,
              barrier: threading.Barrier | None = None) -> "TcpFlow":
        """Send `nbytes` (None: until stop()) in a thread, after `barrier`."""
        self._thread = threading.Thread(target=self._send, args=(nbytes, barrier),
                                        daemon=True, name=f"flow-{self.name}")
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout: float = 30) -> None:
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise RuntimeError(f"flow {self.name} ({self.algo}) still sending after "
                                   f"{timeout} s")
        if self.error is not None:
            raise RuntimeError(f"flow {self.name} ({self.algo}): {self.error!r}")

    def close(self) -> None:
        self.sock.close()
