"""Packets in and out of a test's namespaces: sockets made inside a
namespace, AF_PACKET sockets on an interface, and waiting for the frame a
test expects.

Used by tests/integration/test_host_xdp.py, test_p4_bmv2.py and
test_tcp_cc_lab.py (``from packet_io import ...``; tests/ is on the path, as
for conftest).
"""
from __future__ import annotations

import contextlib
import socket
import time

from hpccd.bpf.loader import in_netns

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4          # sockaddr_ll.sll_pkttype of a frame this host sent
WAIT_S = 5.0                 # bound on waiting for a packet: a failure, not a measurement


def sock_in(ns: str, *args) -> socket.socket:
    """A socket of namespace `ns` (a socket stays in the namespace it was made in)."""
    with in_netns(ns):
        return socket.socket(*args)


def packet_socket(ns: str, ifname: str) -> socket.socket:
    """AF_PACKET on `ifname` of `ns`: sees every frame in and out (after
    XDP on the way in), timeout WAIT_S."""
    s = sock_in(ns, socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind((ifname, ETH_P_ALL))
    s.settimeout(WAIT_S)
    return s


def capture(s: socket.socket, match, timeout: float = WAIT_S, outgoing: bool = False) -> bytes:
    """The first incoming (or, with `outgoing`, outgoing) frame on packet
    socket `s` for which match(frame) holds; AssertionError after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError("expected frame not received")
        s.settimeout(left)
        try:
            frame, addr = s.recvfrom(65535)
        except socket.timeout:
            raise AssertionError("expected frame not received") from None
        if (addr[2] == PACKET_OUTGOING) == outgoing and match(frame):
            return frame


def drain(s: socket.socket) -> None:
    """Discard what socket `s` holds now."""
    s.settimeout(0)
    with contextlib.suppress(BlockingIOError, socket.timeout):
        while True:
            s.recv(65535)
