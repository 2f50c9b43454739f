"""The receive side of the native transport (hpccd.transport.engine,
fastpath/transport/transport.c) on one veth, with traffic from ordinary sockets:
what reaches the engine, what stays on the kernel's path, and the life of
its thread.

Invariants protected:
- the engine receives exactly the well-formed hpccd packets sent to its host
  (DATA to the hpccd port, ACK and NOTIFY from it), each once, counted per
  type (stats by_type; rx_frames and rx_bytes are theirs and nothing else's),
  while malformed hpccd packets, ordinary UDP and pings are sent in the same
  batches: no malformed packet and no other frame reaches its socket
  (by_class and not_hpccd stay 0); xdp_host redirects exactly the valid
  ones, drops the malformed ones and passes the rest to the kernel, which
  delivers the UDP and answers the pings;
- stop() returns at once (< 1 s) and ends the thread; frames that arrive
  while it is stopped wait in the RX ring and are delivered, in order, after
  the next start(); a second start() is EBUSY and names the interface and
  queue; stop() and close() twice are harmless; a closed engine says EBADF;
- creation errors name the interface and queue (another namespace's
  interface, an rx queue the device does not have, zero-copy on veth, a
  frame size the engine does not take, an unknown mode), and a failed
  creation leaves no XDP program attached;
- an interface that disappears under a running engine ends its thread with
  ENETDOWN (within the thread's poll backstop) instead of leaving it to
  wake forever; stop() reports that once.

Covered elsewhere, not repeated here: the idle thread sleeps
(test_transport.py::test_idle_engine_sleeps), xdp_host counts malformed
packets per class (test_host_xdp.py::test_malformed_dropped_and_counted_by_class).

Setup (torn down whatever happens): the shared netns_pair
(tests/conftest.py) and engines from its transport_engines factory on B's
veth (xdp_host in generic mode with B's address in hpccd_addrs, an AF_XDP
socket in copy mode on rx queue 0, the only one a veth has).  Traffic comes
from ordinary sockets in A, so that A's kernel builds every header.
"""
from __future__ import annotations

import contextlib
import errno
import os
import socket
import time
import zlib

import pytest

pytestmark = pytest.mark.integration

if os.geteuid() != 0:
    pytest.skip("AF_XDP sockets, XDP and namespaces need root", allow_module_level=True)

from scapy.layers.inet import ICMP  # noqa: E402
from scapy.packet import Raw  # noqa: E402

from hpccd.bpf import loader as bpf  # noqa: E402
from hpccd.core import wire  # noqa: E402
from hpccd.bpf.counters import XDP_SLOTS  # noqa: E402
from hpccd.transport.engine import XDP_HOST, TransportError  # noqa: E402

from conftest import transport_engines  # noqa: E402

PORT = wire.UDP_PORT_DEFAULT
PEER_PORT = 40000        # the data sender's port (A); feedback goes to it
OTHER_PORT = 40001       # an ordinary UDP service in B
THREAD = "hpccd-tp"
SLOT = {s.name: s.index for s in XDP_SLOTS}


@pytest.fixture
def engines(netns_pair):
    """Factory of engines on the pair's veth ends ("b": B's), all closed at
    the end (before the pair goes)."""
    if not XDP_HOST.exists():
        pytest.skip("no build/ebpf/xdp_host.bpf.o (make bpf)")
    with transport_engines(netns_pair) as make:
        yield make


@pytest.fixture
def sockets(netns_pair):
    """Ordinary sockets: in A a data sender, a feedback sender (bound to the
    hpccd port, as a receiver's engine sends from), an ordinary sender and a
    raw ICMP socket; in B an ordinary UDP server."""
    p = netns_pair
    made = {}
    try:
        with bpf.in_netns(p.a):
            for name, port in (("data", PEER_PORT), ("feedback", PORT), ("plain", 0)):
                s = made[name] = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                s.bind((p.ip_a, port))
            made["icmp"] = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
            made["icmp"].settimeout(0.2)
        with bpf.in_netns(p.b):
            s = made["server"] = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((p.ip_b, OTHER_PORT))
            s.settimeout(0.2)
        yield made
    finally:
        for s in made.values():
            s.close()


# ---- helpers ---------------------------------------------------------------------------

def _threads() -> set[int]:
    """Our engine threads (by name)."""
    tids = set()
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError), open(f"/proc/self/task/{tid}/comm") as f:
            if f.read().strip() == THREAD:
                tids.add(int(tid))
    return tids


def _wait(cond, timeout: float = 5.0, step: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(step)
    return cond()


def _hpccd(type_: int, flow_id: int, seq: int = 0, ack: int = 0, payload: bytes = b"",
           **hdr) -> bytes:
    """UDP payload of an hpccd packet: INT header with 5 empty hops, header, body."""
    h = wire.int_header() / wire.Hpccd(type=type_, flow_id=flow_id, seq=seq, ack=ack, **hdr)
    if type_ == wire.T_NOTIFY:
        h = h / wire.HpccdNotify(w_bytes=15000, rate_kbps=1000, notify_seq=seq) / wire.HpccdTag()
    elif payload:
        h = h / Raw(payload)
    return bytes(h)


def _valid_packets() -> list[tuple[str, bytes, int]]:
    """(sender, payload, type): 10 DATA to the port, 10 ACK and 10 NOTIFY from it."""
    out = []
    for i in range(10):
        seq = 1000 * i
        out.append(("data", _hpccd(wire.T_DATA, 0x100 + i % 3, seq=seq, payload=bytes(100 + i)),
                    wire.T_DATA))
        out.append(("feedback", _hpccd(wire.T_ACK, 0x200 + i % 2, seq=i, ack=seq + 100, aux=1),
                    wire.T_ACK))
        out.append(("feedback", _hpccd(wire.T_NOTIFY, 0x300, seq=i, ack=seq), wire.T_NOTIFY))
    return out


def _malformed_packets() -> list[tuple[str, bytes]]:
    """Malformed hpccd packets, one or more of every class, as (sender, payload)."""
    good = _hpccd(wire.T_DATA, 9, seq=1, payload=b"x" * 20)
    hdr_at = wire.INT_HDR_BYTES + 5 * wire.INT_HOP_BYTES
    return [
        ("data", b"\xc1"),                                                        # INT_TRUNC
        ("data", bytes(wire.int_header(magic=0xB) / wire.Hpccd(flow_id=9))),      # MAGIC
        ("data", bytes(wire.int_header(ver=2) / wire.Hpccd(flow_id=9))),          # INT_VERSION
        ("data", bytes(wire.int_header(room=9) / wire.Hpccd(flow_id=9))),         # ROOM
        ("data", bytes(wire.int_header(room=2, nhop=3) / wire.Hpccd(flow_id=9))),  # NHOP
        ("data", good[:wire.INT_HDR_BYTES + 12]),                                 # HOPS_TRUNC
        ("data", good[:hdr_at + 10]),                                             # HDR_TRUNC
        ("data", _hpccd(wire.T_DATA, 9, ver=2)),                                  # VERSION
        ("feedback", _hpccd(wire.T_MAX + 1, 9)),                                  # TYPE
        ("data", bytes(wire.int_header() / wire.Hpccd(flow_id=9, len=50) / Raw(b"y" * 10))),
        ("feedback", bytes(wire.int_header() / wire.Hpccd(type=wire.T_ACK, flow_id=9, len=4))),
    ]


def _echo(ident: int, seq: int) -> bytes:
    return bytes(ICMP(type=8, id=ident, seq=seq) / b"hpccd-transport-rx-test")


def _send(p, sockets, who: str, payload: bytes) -> None:
    """DATA to B's hpccd port; feedback (from A's hpccd port) to B's data port."""
    sockets[who].sendto(payload, (p.ip_b, PORT) if who == "data" else (p.ip_b, PEER_PORT))


# ---- what reaches the engine -------------------------------------------------------------

def test_engine_gets_exactly_the_valid_hpccd_packets(netns_pair, engines, sockets):
    p = netns_pair
    valid, malformed = _valid_packets(), _malformed_packets()
    n_plain, n_ping, ident = 20, 5, os.getpid() & 0xFFFF
    rx = engines("b")
    st0, x0 = rx.stats(), rx.xdp_counters()
    assert st0["running"] and st0["rx_frames"] == 0

    # Interleaved, so that each kind meets the others in the same batches.
    for i in range(max(len(valid), len(malformed), n_plain)):
        if i < len(valid):
            _send(p, sockets, *valid[i][:2])
        if i < len(malformed):
            _send(p, sockets, *malformed[i])
        if i < n_plain:
            sockets["plain"].sendto(b"plain %d" % i, (p.ip_b, OTHER_PORT))
        if i < n_ping:
            sockets["icmp"].sendto(_echo(ident, i), (p.ip_b, 0))

    # The engine: exactly the valid packets, each counted once by type.
    assert _wait(lambda: rx.stats()["rx_frames"] >= len(valid)), rx.stats()
    time.sleep(0.3)                           # anything extra would show now
    st = rx.stats()
    want_types = {name: 0 for name in st["by_type"]}
    for _, _, t in valid:
        want_types[wire.TYPES[t]] += 1
    assert st["rx_frames"] == len(valid), st
    assert st["by_type"] == want_types
    assert sum(st["by_class"].values()) == 0 and st["not_hpccd"] == 0
    assert st["rx_bytes"] == sum(14 + 20 + 8 + len(payload) for _, payload, _ in valid)
    assert st["k_rx_dropped"] == st["k_rx_ring_full"] == st["k_rx_fill_ring_empty"] == 0
    assert st["unknown_flow"] >= 20           # ACK / NOTIFY for flows it never opened

    # xdp_host: redirected exactly those (a socket is bound: nothing passed
    # for want of one), dropped every malformed one.
    d = [a - b for a, b in zip(rx.xdp_counters(), x0)]
    assert d[SLOT["redirect_xsk"]] == len(valid)
    assert d[SLOT["pass_no_xsk"]] == 0
    assert sum(d[s.index] for s in XDP_SLOTS if s.name.startswith("malformed_")) \
        == len(malformed)

    # The kernel path: ordinary UDP delivered, pings answered.
    got_plain = []
    with contextlib.suppress(socket.timeout):
        while len(got_plain) < n_plain:
            got_plain.append(sockets["server"].recv(100))
    assert sorted(got_plain) == sorted(b"plain %d" % i for i in range(n_plain))
    replies = set()
    deadline = time.monotonic() + 3
    while len(replies) < n_ping and time.monotonic() < deadline:
        with contextlib.suppress(socket.timeout):
            data = sockets["icmp"].recv(1500)
            icmp = ICMP(data[(data[0] & 0xF) * 4:])
            if icmp.type == 0 and icmp.id == ident:
                replies.add(icmp.seq)
    assert replies == set(range(n_ping))
    assert d[SLOT["pass_other"]] >= n_plain + n_ping
    assert rx.stats()["rx_frames"] == len(valid)   # and still nothing else


# ---- the thread ---------------------------------------------------------------------------

def test_stop_is_prompt_and_frames_wait_in_the_ring(netns_pair, engines, sockets):
    p = netns_pair
    before = _threads()
    # A's kernel leaves the UDP checksum to veth's offload (the pseudo-header
    # sum only) and the copy into the UMEM does not finish it: the engine
    # takes such DATA unverified and counts them (docs/transport.md
    # "Checksum offload").
    rx = engines("b")
    (tid,) = _threads() - before
    t0 = time.monotonic()
    rx.stop()                                              # the eventfd wakes the poll
    assert time.monotonic() - t0 < 1.0
    assert tid not in _threads() and not rx.stats()["running"]
    rx.stop()                                              # twice: fine

    for i in range(3):
        _send(p, sockets, "data", _hpccd(wire.T_DATA, 42, seq=i, payload=b"z"))
    time.sleep(0.3)
    assert rx.stats()["rx_frames"] == 0                    # nobody took them
    rx.start()
    assert rx.stats()["running"] and len(_threads() - before) == 1
    assert _wait(lambda: rx.stats()["by_type"]["DATA"] == 3), rx.stats()
    assert (rx.stats()["csum_unverified"], rx.stats()["bad_csum"]) == (3, 0)
    # all three, in order: the flow's in-order stream is their three bytes
    (f,) = [f for f in rx.rx_flows() if f.flow_id == 42]
    assert (f.saddr, f.sport, f.bytes, f.crc32) == (p.ip_a, PEER_PORT, 3, zlib.crc32(b"zzz"))
    assert (f.stats["pkts"], f.stats["ooo_pkts"], f.stats["dup_pkts"]) == (3, 0, 0)

    with pytest.raises(TransportError) as e:
        rx.start()                                         # already running
    assert e.value.errno == errno.EBUSY and f"{p.vb} queue 0" in str(e.value)
    assert rx.stats()["running"]
    rx.close()
    rx.close()                                             # twice: fine
    assert _threads() == before
    with pytest.raises(TransportError) as e:
        rx.stats()
    assert e.value.errno == errno.EBADF and f"{p.vb} queue 0" in str(e.value)


def test_interface_gone_ends_the_thread(netns_pair, engines):
    from pyroute2 import NetNS

    p = netns_pair
    before = _threads()
    rx = engines("b")
    assert rx.stats()["running"]
    with NetNS(p.b) as ns:
        ns.link("del", index=ns.link_lookup(ifname=p.vb)[0])
    # the kernel unbinds the socket with ENETDOWN; the thread sees it at its
    # next poll backstop (200 ms) and ends
    assert _wait(lambda: not rx.stats()["running"], timeout=3), rx.stats()
    assert rx.stats()["thread_err"] == -errno.ENETDOWN
    assert _threads() == before
    with pytest.raises(TransportError) as e:
        rx.stop()
    assert e.value.errno == errno.ENETDOWN and f"{p.vb} queue 0" in str(e.value)
    rx.stop()                                              # reported once; now stopped


# ---- errors -------------------------------------------------------------------------------

def test_create_errors_name_interface_and_queue(netns_pair, engines):
    from hpccd.transport.engine import Transport

    p = netns_pair
    cases = [    # (engine arguments, errno or None, words of the message)
        ({"queue_id": 7}, errno.EINVAL, [f"{p.vb} queue 7"]),            # veth: one rx queue
        ({"mode": "zerocopy"}, None, [f"{p.vb} queue 0", "zero-copy"]),  # veth: no zero-copy
        ({"config": {"frame_size": 3000}}, errno.EINVAL,
         [f"{p.vb} queue 0", "frame size 3000: 2048 or 4096"]),
        ({"mode": "fast"}, errno.EINVAL, [f"{p.vb} queue 0", "mode 'fast'"]),
    ]
    for kw, err, words in cases:
        with pytest.raises(TransportError) as e:
            engines("b", **kw)
        assert err is None or e.value.errno == err, (kw, e.value)
        assert all(w in str(e.value) for w in words), (kw, e.value)
    with pytest.raises(TransportError) as e:
        Transport(p.va, netns=p.b)                              # A's end: not in B
    assert e.value.errno == errno.ENODEV and f"{p.va} queue 0" in str(e.value)
    with bpf.in_netns(p.b):
        assert bpf.xdp_query(p.vb) is None                      # the failures left nothing
    # and a good one, small, after all that: nothing held the queue
    rx = engines("b", config={"frame_size": 2048, "rx_frames": 64, "tx_frames": 128})
    assert rx.stats()["running"]
    with bpf.in_netns(p.b):
        assert bpf.xdp_query(p.vb) is not None
