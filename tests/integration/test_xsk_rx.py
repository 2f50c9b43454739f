"""AF_XDP RX path: xdp_host steers hpccd packets to the socket of
hpccd.xsk (cffi_build/xsk/xsk_rx.c), whose native RX thread parses and
counts them; everything else stays on the kernel's path.

Invariants protected:
- the socket receives exactly the well-formed hpccd transport packets sent
  to this host (DATA to the port, ACK and NOTIFY from it), each once, with
  the type, flow_id, seq and ack it was sent with;
- malformed hpccd packets never reach the socket: xdp_host drops them and
  counts each in the slot of its class;
- ordinary UDP reaches an ordinary socket and pings are answered: the
  kernel path is untouched;
- the parser reads frames in place (the UMEM headroom puts them at
  NET_IP_ALIGN: no frame is copied for alignment);
- stop() returns at once (< 1 s), the idle RX thread sleeps in poll()
  instead of spinning, and frames that arrive while it is stopped wait in
  the RX ring for the next start();
- creation errors say which interface and queue failed; an interface that
  disappears under a running socket ends its thread with ENETDOWN instead
  of leaving it to wake forever.

Setup (all torn down whatever happens, in reverse order): the shared
netns_pair (tests/conftest.py), xdp_host built by `make bpf` attached in
native mode to B's veth with B's address in hpccd_addrs, an XSK socket in
copy mode on B's veth rx queue 0 (veth has one rx queue in use) put into
hpccd_xsks at key 0.  Traffic is sent from ordinary sockets in A, so that
A's kernel builds every header.

veth and XDP_REDIRECT to an AF_XDP socket: only the receiving side needs an
XDP program.  With xdp_host attached natively to vb, veth_xmit() on va
hands each skb to vb's NAPI queue, where the program runs on it as an
xdp_buff and the redirect copies it into the UMEM (copy mode).  What needs
an XDP program on the *peer* is XDP_REDIRECT or XDP_TX *into* a veth
(ndo_xdp_xmit), which this path does not do; A has no program here.
"""
from __future__ import annotations

import contextlib
import errno
import os
import pathlib
import socket
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.integration

if os.geteuid() != 0:
    pytest.skip("AF_XDP sockets, XDP and namespaces need root", allow_module_level=True)

from scapy.layers.inet import ICMP  # noqa: E402
from scapy.packet import Raw  # noqa: E402

from hpccd import bpf, wire  # noqa: E402
from hpccd.xsk import XskError, XskSocket  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
XDP_HOST = ROOT / "build" / "ebpf" / "xdp_host.bpf.o"
PORT = wire.UDP_PORT_DEFAULT
PEER_PORT = 40000        # the data sender's port (A); feedback goes to it
OTHER_PORT = 40001       # an ordinary UDP service in B
RX_THREAD = "hpccd-xsk-rx"


# ---- counter slots of xdp_host, from the shared header ---------------------------

@pytest.fixture(scope="module")
def slot():
    """enum hpccd_xdp_counter of ebpf/hpccd_kern_user.h, read from the header
    itself (preprocessed as the cffi builders do) so that the test follows
    the program when slots are added."""
    from cffi import FFI

    src = subprocess.run(
        [os.environ.get("CC", "cc"), "-E", "-P", "-DHPCCD_CFFI_CDEF", f"-I{ROOT / 'include'}",
         f"-I{ROOT / 'ebpf'}", "-x", "c", "-"],
        input='#include "hpccd_kern_user.h"\n', check=True, capture_output=True,
        text=True).stdout
    ffi = FFI()
    ffi.cdef("typedef uint8_t __u8; typedef uint16_t __u16; typedef uint32_t __u32;"
             "typedef uint64_t __u64; typedef uint16_t __be16; typedef uint32_t __be32;\n" + src)
    return ffi.dlopen(None)


def xdp_packets(obj) -> list[int]:
    """Packets per slot of hpccd_xdp_cnt, summed over the CPUs."""
    m = obj.map("hpccd_xdp_cnt")
    out = []
    for i in range(m.max_entries):
        out.append(sum(int.from_bytes(v[:8], sys.byteorder) for v in m.lookup(i)))
    return out


# ---- fixtures ------------------------------------------------------------------------

@pytest.fixture
def xdp_b(netns_pair):
    """xdp_host attached natively to B's veth, B's address in hpccd_addrs."""
    if not XDP_HOST.exists():
        pytest.skip("no build/ebpf/xdp_host.bpf.o (make bpf)")
    p = netns_pair
    obj = bpf.BpfObject.open(XDP_HOST)
    try:
        obj.load()
        obj.map("hpccd_addrs").update(socket.inet_aton(p.ip_b), 1)
        with bpf.in_netns(p.b):
            bpf.xdp_attach(p.vb, obj.program("hpccd_xdp_host"), mode="native")
        try:
            yield obj
        finally:
            with bpf.in_netns(p.b):
                bpf.xdp_detach(p.vb)
    finally:
        obj.close()


@pytest.fixture
def xsk_b(netns_pair, xdp_b):
    """An XSK socket on B's veth queue 0 (copy mode), in hpccd_xsks; closed
    whatever happens (closing takes it out of the XSKMAP)."""
    with bpf.in_netns(netns_pair.b):
        sock = XskSocket(netns_pair.vb, queue_id=0, mode="copy")
    try:
        xdp_b.map("hpccd_xsks").update(0, sock.fd)
        yield sock
    finally:
        sock.close()


@pytest.fixture
def sockets(netns_pair):
    """Ordinary sockets: in A a data sender, a feedback sender (bound to the
    hpccd port, as a receiver's fast path would send from), an ordinary
    sender and a raw ICMP socket; in B an ordinary UDP server."""
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

def _rx_threads() -> list[int]:
    tids = []
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError), open(f"/proc/self/task/{tid}/comm") as f:
            if f.read().strip() == RX_THREAD:
                tids.append(int(tid))
    return tids


def _thread_cpu_s(tid: int) -> float:
    """utime + stime of one of our threads, seconds."""
    with open(f"/proc/self/task/{tid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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


def _valid_packets() -> list[tuple[str, bytes, tuple]]:
    """(sender, payload, expected (type, flow_id, seq, ack, payload_len)):
    10 DATA to the port, 10 ACK and 10 NOTIFY from it."""
    out = []
    for i in range(10):
        seq = 1000 * i
        out.append(("data", _hpccd(wire.T_DATA, 0x100 + i % 3, seq=seq, payload=bytes(100 + i)),
                    (wire.T_DATA, 0x100 + i % 3, seq, 0, 100 + i)))
        out.append(("feedback", _hpccd(wire.T_ACK, 0x200 + i % 2, seq=i, ack=seq + 100, aux=1),
                    (wire.T_ACK, 0x200 + i % 2, i, seq + 100, 0)))
        out.append(("feedback", _hpccd(wire.T_NOTIFY, 0x300, seq=i, ack=seq),
                    (wire.T_NOTIFY, 0x300, i, seq, 0)))
    return out


def _malformed_packets() -> list[tuple[str, bytes, wire.WireErr]]:
    """Malformed hpccd packets, one or more per class, as (sender, payload, class)."""
    good = _hpccd(wire.T_DATA, 9, seq=1, payload=b"x" * 20)
    hdr_at = wire.INT_HDR_BYTES + 5 * wire.INT_HOP_BYTES
    cases = [
        ("data", b"\xc1", wire.WireErr.INT_TRUNC),
        ("data", bytes(wire.int_header(magic=0xB) / wire.Hpccd(flow_id=9)), wire.WireErr.MAGIC),
        ("data", bytes(wire.int_header(ver=2) / wire.Hpccd(flow_id=9)), wire.WireErr.INT_VERSION),
        ("data", bytes(wire.int_header(room=9) / wire.Hpccd(flow_id=9)), wire.WireErr.ROOM),
        ("data", bytes(wire.int_header(room=2, nhop=3) / wire.Hpccd(flow_id=9)),
         wire.WireErr.NHOP),
        ("data", good[:wire.INT_HDR_BYTES + 12], wire.WireErr.HOPS_TRUNC),
        ("data", good[:hdr_at + 10], wire.WireErr.HDR_TRUNC),
        ("data", _hpccd(wire.T_DATA, 9, ver=2), wire.WireErr.VERSION),
        ("feedback", _hpccd(7, 9), wire.WireErr.TYPE),
        ("data", bytes(wire.int_header() / wire.Hpccd(flow_id=9, len=50) / Raw(b"y" * 10)),
         wire.WireErr.LEN),
        ("feedback", bytes(wire.int_header() / wire.Hpccd(type=wire.T_ACK, flow_id=9, len=4)),
         wire.WireErr.LEN),
    ]
    return cases


def _echo(ident: int, seq: int) -> bytes:
    return bytes(ICMP(type=8, id=ident, seq=seq) / b"hpccd-xsk-test")


# ---- the RX path -----------------------------------------------------------------------

def test_rx_gets_exactly_the_valid_hpccd_packets(netns_pair, xdp_b, xsk_b, sockets, slot):
    p = netns_pair
    valid, malformed = _valid_packets(), _malformed_packets()
    n_plain, n_ping, ident = 20, 5, os.getpid() & 0xFFFF
    info = xsk_b.info()
    assert info["queue_id"] == 0 and not info["zerocopy"] and info["udp_port"] == PORT
    before = xdp_packets(xdp_b)
    xsk_b.start()
    assert xsk_b.stats()["running"] and len(_rx_threads()) == 1

    # Interleaved, so that each kind meets the others in the same batches.
    dst = (p.ip_b, PEER_PORT)                 # feedback goes to the data sender's port
    for i in range(max(len(valid), len(malformed), n_plain)):
        if i < len(valid):
            who, payload, _ = valid[i]
            sockets[who].sendto(payload, (p.ip_b, PORT) if who == "data" else dst)
        if i < len(malformed):
            who, payload, _ = malformed[i]
            sockets[who].sendto(payload, (p.ip_b, PORT) if who == "data" else dst)
        if i < n_plain:
            sockets["plain"].sendto(b"plain %d" % i, (p.ip_b, OTHER_PORT))
        if i < n_ping:
            sockets["icmp"].sendto(_echo(ident, i), (p.ip_b, 0))

    # The socket: exactly the valid packets.
    assert _wait(lambda: xsk_b.stats()["rx_frames"] >= len(valid)), xsk_b.stats()
    time.sleep(0.3)                           # anything extra would show now
    st = xsk_b.stats()
    want_types = {name: 0 for name in wire.TYPES.values()}
    for _, _, (t, *_rest) in valid:
        want_types[wire.TYPES[t]] += 1
    assert st["rx_frames"] == len(valid), st
    assert st["by_type"] == want_types
    assert sum(st["by_class"].values()) == 0 and st["not_hpccd"] == 0 and st["parse_err"] == 0
    assert st["rx_bytes"] == sum(14 + 20 + 8 + len(payload) for _, payload, _ in valid)
    assert st["unaligned"] == 0, "frames not at NET_IP_ALIGN: the parser copied them"
    assert st["k_rx_dropped"] == st["k_rx_ring_full"] == st["k_rx_fill_ring_empty"] == 0
    recent = xsk_b.recent()
    assert [r["index"] for r in recent] == list(range(len(valid)))
    assert all(r["cls"] == 0 for r in recent)
    got = sorted((r["type"], r["flow_id"], r["seq"], r["ack"], r["payload_len"]) for r in recent)
    assert got == sorted(want for _, _, want in valid)

    # xdp_host: redirected exactly those, dropped every malformed one by class.
    after = xdp_packets(xdp_b)
    delta = [a - b for a, b in zip(after, before)]
    assert delta[slot.HPCCD_XDP_REDIRECT_XSK] == len(valid)
    assert delta[slot.HPCCD_XDP_PASS_NO_XSK] == 0
    for cls in wire.WireErr:
        if cls:
            want = sum(1 for *_, c in malformed if c == cls)
            assert delta[slot.HPCCD_XDP_DROP_MALFORMED + cls] == want, cls.name

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
    assert delta[slot.HPCCD_XDP_PASS_OTHER] >= n_plain + n_ping

    # Idle: the RX thread sleeps in poll().  Generous bounds: a spinning
    # thread would burn ~1 s of CPU here.
    (tid,) = _rx_threads()
    polls0, cpu0, proc0 = xsk_b.stats()["polls"], _thread_cpu_s(tid), time.process_time()
    time.sleep(1.0)
    cpu1, proc1, polls1 = _thread_cpu_s(tid), time.process_time(), xsk_b.stats()["polls"]
    assert cpu1 - cpu0 <= 0.05, f"RX thread used {cpu1 - cpu0:.3f} s of CPU in 1 s idle"
    assert proc1 - proc0 <= 0.25, f"process used {proc1 - proc0:.3f} s of CPU in 1 s idle"
    assert polls1 - polls0 <= 2 * 1000 // info["poll_ms"] + 2, "woke up more than its timeout"

    # stop() is immediate (the eventfd wakes the poll), the thread is gone.
    t0 = time.monotonic()
    xsk_b.stop()
    assert time.monotonic() - t0 < 1.0
    assert _rx_threads() == [] and not xsk_b.stats()["running"]


def test_frames_wait_in_the_ring_while_stopped(netns_pair, xdp_b, xsk_b, sockets):
    p = netns_pair
    xsk_b.start()
    xsk_b.stop()
    xsk_b.stop()                                            # twice: fine
    for i in range(3):
        sockets["data"].sendto(_hpccd(wire.T_DATA, 42, seq=i, payload=b"z"), (p.ip_b, PORT))
    time.sleep(0.3)
    assert xsk_b.stats()["rx_frames"] == 0                  # nobody took them
    xsk_b.start()
    assert _wait(lambda: xsk_b.stats()["rx_frames"] == 3), xsk_b.stats()
    assert [(r["flow_id"], r["seq"]) for r in xsk_b.recent()] == [(42, 0), (42, 1), (42, 2)]
    xsk_b.reset()
    assert xsk_b.stats()["rx_frames"] == 0 and xsk_b.recent() == []
    assert xsk_b.stats()["running"]
    with pytest.raises(XskError) as e:
        xsk_b.start()                                       # already running
    assert e.value.errno == errno.EBUSY and xsk_b.ifname in str(e.value)
    xsk_b.close()
    xsk_b.close()                                           # twice: fine
    with pytest.raises(XskError) as e:
        xsk_b.stats()
    assert e.value.errno == errno.EBADF


# ---- errors ------------------------------------------------------------------------------

def test_create_errors_name_interface_and_queue(netns_pair):
    p = netns_pair
    with bpf.in_netns(p.b):
        with pytest.raises(XskError) as e:
            XskSocket(p.vb, queue_id=0, mode="zerocopy")    # veth has no zero-copy
        assert f"{p.vb} queue 0" in str(e.value) and "zero-copy" in str(e.value)
        with pytest.raises(XskError) as e:
            XskSocket(p.vb, queue_id=7)                      # no such rx queue
        assert e.value.errno == errno.EINVAL and f"{p.vb} queue 7" in str(e.value)
        with pytest.raises(XskError) as e:
            XskSocket(p.va, queue_id=0)                      # A's end: not in this namespace
        assert e.value.errno == errno.ENODEV and f"{p.va} queue 0" in str(e.value)
        for kw in ({"frame_size": 3000}, {"frame_size": 1024}, {"frames": 1},
                   {"mode": "fast"}):
            with pytest.raises(XskError) as e:
                XskSocket(p.vb, **kw)
            assert e.value.errno == errno.EINVAL, kw
        # and a good one, with a small UMEM (rings shrink to fit) and huge
        # pages asked for (plain pages when none are reserved)
        with XskSocket(p.vb, frames=64, frame_size=2048, mode="auto", hugepages=True) as s:
            info = s.info()
            assert info["rx_size"] == info["fill_size"] == 64 and info["frame_size"] == 2048
            assert info["umem_bytes"] >= 64 * 2048


def test_interface_gone_ends_the_rx_thread(netns_pair):
    from pyroute2 import NetNS

    p = netns_pair
    with bpf.in_netns(p.b):
        sock = XskSocket(p.vb, queue_id=0)
    with sock:
        sock.start()
        with NetNS(p.b) as ns:
            ns.link("del", index=ns.link_lookup(ifname=p.vb)[0])
        assert _wait(lambda: not sock.stats()["running"], timeout=3), sock.stats()
        assert sock.stats()["thread_err"] == -errno.ENETDOWN
        with pytest.raises(XskError) as e:
            sock.stop()
        assert e.value.errno == errno.ENETDOWN and f"{p.vb} queue 0" in str(e.value)
        sock.stop()                                         # reported once; now stopped
    assert _rx_threads() == []
