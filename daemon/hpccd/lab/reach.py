"""Reaching one lab host from another: a UDP round trip between two sockets
of this process (probe) and an ICMP echo as ping(8) sends it (ping); Lab.probe
and Lab.ping are these."""
from __future__ import annotations

import secrets
import socket as _socket
import struct
import time
from typing import Any, Callable

from ..core.checksum import internet_checksum
from .names import LabError

_IP_RECVTTL = getattr(_socket, "IP_RECVTTL", 12)
_IP_TTL_CMSG = _socket.IP_TTL


def recv_ttl(s: _socket.socket, token: bytes, until: float) -> tuple[int, Any] | None:
    """Wait until `until` for datagram `token` on `s`: (its IP TTL, sender)."""
    while True:
        left = until - time.monotonic()
        if left <= 0:
            return None
        s.settimeout(left)
        try:
            data, anc, _, frm = s.recvmsg(64, _socket.CMSG_SPACE(4))
        except TimeoutError:
            return None
        if data != token:
            continue
        for level, kind, val in anc:
            if level == _socket.IPPROTO_IP and kind == _IP_TTL_CMSG:
                return struct.unpack("i", val[:4])[0], frm
        raise LabError("a datagram came without its IP_TTL control message")


RESEND_S = 0.5                  # probe() and ping() send again this often until answered


def _resend_until(send: Callable[[], None], wait: Callable[[float, float], Any],
                 timeout: float, failure: Callable[[int], str]) -> Any:
    """send() now and every RESEND_S after, until wait(until, deadline)
    (which waits at most until `until`, or for a reply to an answer until
    `deadline`, both time.monotonic()) returns something other than None,
    which is returned.  When `timeout` passes first: LabError(failure(number
    of sends))."""
    deadline = time.monotonic() + timeout
    next_send, sends = time.monotonic(), 0
    while True:
        now = time.monotonic()
        if now >= deadline:
            raise LabError(failure(sends))
        if now >= next_send:
            send()
            sends += 1
            next_send = time.monotonic() + RESEND_S
        got = wait(min(next_send, deadline), deadline)
        if got is not None:
            return got


def probe(lab, src: str, dst: str, timeout: float = 3.0) -> tuple[float, int, int]:
    """A UDP round trip from host `src` to host `dst` and back, between
    two sockets of this process (one made in each namespace), resent
    every 0.5 s until it completes or `timeout` passes.  Returns
    (round-trip seconds, switch hops there, switch hops back), the hops
    from the TTL each datagram arrived with (both sent with TTL 64).
    Unlike ping() it needs nothing of the kernel's shared ICMP sockets
    (docs/lab.md, "Known limits").  Raises LabError on timeout."""
    a, b = lab.address(src), lab.address(dst)
    tx = lab.socket(src, _socket.AF_INET, _socket.SOCK_DGRAM)
    rx = lab.socket(dst, _socket.AF_INET, _socket.SOCK_DGRAM)
    try:
        for s, addr in ((tx, a), (rx, b)):
            s.setsockopt(_socket.IPPROTO_IP, _socket.IP_TTL, 64)
            s.setsockopt(_socket.IPPROTO_IP, _IP_RECVTTL, 1)
            s.bind((addr, 0))
        token = secrets.token_bytes(16)
        sent_at = 0.0

        def send() -> None:
            nonlocal sent_at
            sent_at = time.monotonic()
            tx.sendto(token, rx.getsockname())

        def wait(until: float, deadline: float) -> tuple[float, int, int] | None:
            got = recv_ttl(rx, token, until)
            if got is None:
                return None
            there, frm = got
            rx.sendto(token, frm)
            back = recv_ttl(tx, token, deadline)
            if back is None:
                return None
            return time.monotonic() - sent_at, 64 - there, 64 - back[0]

        return _resend_until(send, wait, timeout,
                            lambda n: f"lab {lab.name}: no UDP round trip {src} ({a}) -> "
                                      f"{dst} ({b}) within {timeout} s")
    finally:
        lab._forget(tx)
        lab._forget(rx)


def ping(lab, src: str, dst: str, timeout: float = 3.0) -> tuple[float, int]:
    """ICMP echo from host `src` to host (or address) `dst`, as ping(8)
    does it: a request every 0.5 s until a reply comes or `timeout`
    passes.  Returns (round-trip seconds of the answered request, TTL of
    the reply).  The reply leaves `dst` with TTL 64 and loses one per
    switch hop, so ``64 - ttl`` is the hop count of the way back.
    Raises LabError when no reply comes in time.  The kernel answers
    with the ICMP socket of the CPU that took the request, one per CPU
    for all namespaces of the machine: ICMP stuck in a queue anywhere
    can starve it (docs/lab.md, "Known limits"); probe() does not
    depend on it."""
    addr = lab.address(dst) if dst in lab.topology.hosts else dst
    s = lab.socket(src, _socket.AF_INET, _socket.SOCK_RAW, _socket.IPPROTO_ICMP)
    try:
        ident = secrets.randbits(16)
        body = secrets.token_bytes(16)
        sent: dict[int, float] = {}

        def send() -> None:
            seq = len(sent) + 1
            hdr = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
            pkt = struct.pack("!BBHHH", 8, 0, internet_checksum(hdr + body), ident, seq) + body
            sent[seq] = time.monotonic()
            s.sendto(pkt, (addr, 0))

        def wait(until: float, deadline: float) -> tuple[float, int] | None:
            s.settimeout(max(0.001, until - time.monotonic()))
            try:
                data, (frm, _) = s.recvfrom(2048)
            except TimeoutError:
                return None
            t = time.monotonic()
            ihl = (data[0] & 0x0F) * 4
            if frm != addr or len(data) < ihl + 8 or data[ihl] != 0:
                return None
            r_ident, r_seq = struct.unpack_from("!HH", data, ihl + 4)
            if r_ident == ident and r_seq in sent and data[ihl + 8:] == body:
                return t - sent[r_seq], data[8]
            return None

        return _resend_until(send, wait, timeout,
                            lambda n: f"lab {lab.name}: no echo reply from {dst} ({addr}) "
                                      f"to {src} within {timeout} s ({n} requests)")
    finally:
        lab._forget(s)
