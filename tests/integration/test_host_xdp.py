"""xdp_host and tc_tracker on real interfaces: two namespaces joined by a
veth (tests/conftest.py's netns_pair), programs attached in native mode.

Invariants protected:
- a UDP PROBE to a host is answered by its XDP program alone: the
  PROBE_RESP arrives at the prober with a tag that verifies, and no process
  (and not even the IPv4 layer) of the answering host saw the probe;
- a TCP-side PROBE (DSCP 45, no TCP flag, the 5-tuple of a live kernel TCP
  connection) is answered the same way and never reaches the answering
  host's TCP stack; the connection keeps working; the prober's XDP program
  verifies the response's tag and stores its telemetry;
- with every program attached, ping and a kernel TCP transfer work, the
  transfer byte-exact, and the tracker's entry of that flow agrees with it
  (payload bytes, snd_nxt = ISN + SYN + bytes + FIN);
- malformed packets to the hpccd port are dropped by the receiver's XDP
  program and counted in the slot of their class; a well-formed packet
  sent after them still gets through.

How "the stack never saw it" is observed: the answering namespace's
/proc/net/snmp (per namespace).  ``Ip InReceives`` counts every IPv4 packet
that reached the IPv4 layer and ``Tcp InSegs`` every segment tcp_v4_rcv()
got, before any validation.  A namespace of its own carries no other IPv4
traffic, so between two reads with no legitimate traffic in flight they
must not move.  TCP's error counters (``InErrs``, "bad segments") are no
use for this: a segment without ACK on an established connection is
dropped by tcp_rcv_established() without counting an error, so they would
not move even if the probe did reach TCP.  The TCP-side test first sends a
probe while no XDP program is on the answering side, to show that InSegs
does move when the stack sees one (the observable is not blind).

Why the prober's veth carries an XDP program too: a veth forwards frames
sent with XDP_TX to its peer only when the peer has NAPI enabled, which
is the case when the peer has an XDP program (or GRO) on it; otherwise
the response is silently dropped (see test_reflection_needs_napi_on_the_peer).
Here, as on a real host, both ends run xdp_host.

Every frame is sent from namespace a on the test's own veth, to addresses of
the pair only.  The frames are built with the scapy layers of hpccd.core.wire.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import pathlib
import secrets
import shutil
import socket
import struct
import subprocess
import threading
import time

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.bpf]

if os.geteuid() != 0:
    pytest.skip("attaching XDP/tc programs and building namespaces need root",
                allow_module_level=True)

from scapy.layers.inet import ICMP, IP, TCP, UDP  # noqa: E402
from scapy.layers.l2 import Ether  # noqa: E402
from scapy.packet import Raw  # noqa: E402

from hpccd._bpf import ffi as abi  # noqa: E402
from hpccd.bpf import loader as bpf  # noqa: E402
from hpccd.core import wire  # noqa: E402
from hpccd.core.wire import Hpccd, HpccdInt, HpccdTag  # noqa: E402
from packet_io import WAIT_S, capture, packet_socket, sock_in  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILT = ROOT / "build" / "ebpf"
PORT = wire.UDP_PORT_DEFAULT
DSCP = wire.PROBE_DSCP_DEFAULT


# ---- constants of the BPF side (include/hpccd/kern_user.h, through hpccd._bpf) ----

def _enum(name: str) -> dict[str, int]:
    """The values of `enum name` of the kernel/user ABI, as the C compiler sees them."""
    return dict(abi.typeof(f"enum {name}").relements)


XDP_CNT = _enum("hpccd_xdp_counter")
TC_CNT = _enum("hpccd_tc_counter")
MALFORMED = XDP_CNT["HPCCD_XDP_DROP_MALFORMED"]


def _slot_names(enum: dict[str, int], count: str) -> dict[int, str]:
    """Slot index -> name; the malformed slots by their class (MALFORMED_LEN ...)."""
    names = {i: n for n, i in enum.items() if n != count}
    for e in wire.WireErr:
        if e:
            names[MALFORMED + e] = f"MALFORMED_{e.name}"
    names[MALFORMED] = "MALFORMED_SLOT0"            # unused; named so a count there shows
    return dict(sorted(names.items()))


XDP_SLOTS = _slot_names(XDP_CNT, "HPCCD_XDP_COUNTERS")
TC_SLOTS = {i: n for n, i in TC_CNT.items() if n != "HPCCD_TC_COUNTERS"}


# ---- programs --------------------------------------------------------------------

@pytest.fixture(scope="session")
def built() -> pathlib.Path:
    """`make bpf` (a no-op when up to date); the directory of the objects."""
    for tool in ("clang", "bpftool", "make"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (scripts/run.sh setup installs it)")
    res = subprocess.run(["make", "-C", str(ROOT), "-s", "bpf"], capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, f"make bpf failed:\n{res.stdout}{res.stderr}"
    return BUILT


def _sum_slot(m: bpf.Map, idx: int) -> int:
    """Packets of one slot of a per-CPU counter array (struct hpccd_counter)."""
    return sum(struct.unpack_from("=Q", v)[0] for v in m.lookup(idx))


class XdpHost:
    """xdp_host as one namespace's host would run it: its own object (so its
    own maps), the tag key, the namespace's local addresses, attached in
    native mode to its veth."""

    def __init__(self, path: pathlib.Path, ns: str, ifname: str, key: bytes,
                 addrs: tuple[str, ...], mode: str = "native"):
        self.ns, self.ifname = ns, ifname
        self.obj = bpf.BpfObject.open(path)
        try:
            self.obj.load()
            self.obj.map("hpccd_tag_key").update(0, key)
            self.set_addrs(addrs)
            with bpf.in_netns(ns):
                bpf.xdp_attach(ifname, self.obj.program("hpccd_xdp_host"), mode=mode)
        except BaseException:
            self.obj.close()
            raise

    def set_addrs(self, addrs) -> None:
        m = self.obj.map("hpccd_addrs")
        for k in list(m.keys()):
            m.delete(k)
        for a in addrs:
            m.update(socket.inet_aton(a), 1)

    def counters(self) -> dict[str, int]:
        """Packets per slot of hpccd_xdp_cnt, by slot name."""
        m = self.obj.map("hpccd_xdp_cnt")
        assert m.max_entries == XDP_CNT["HPCCD_XDP_COUNTERS"]
        return {name: _sum_slot(m, idx) for idx, name in XDP_SLOTS.items()}

    def telem(self, key: bytes) -> dict | None:
        raw = self.obj.map("hpccd_telem").lookup(key)
        if raw is None:
            return None
        hops = raw[:wire.INT_MAX_HOPS * 8]
        rx_ns, probe_seq, responses, ts_echo, flow_id, path_id, nhop, room, int_flags = \
            struct.unpack_from("=QQQIIHBBB", raw, len(hops))
        return {"probe_seq": probe_seq, "responses": responses, "ts_echo": ts_echo,
                "flow_id": flow_id, "path_id": path_id, "nhop": nhop, "room": room,
                "int_flags": int_flags, "hops": hops, "rx_ns": rx_ns}

    def close(self) -> None:
        try:
            with contextlib.suppress(bpf.BpfError):     # namespace or veth already gone
                with bpf.in_netns(self.ns):
                    bpf.xdp_detach(self.ifname)
        finally:
            self.obj.close()


class TcTracker:
    def __init__(self, path: pathlib.Path, ns: str, ifname: str):
        self.ns, self.ifname = ns, ifname
        self.obj = bpf.BpfObject.open(path)
        try:
            self.obj.load()
            with bpf.in_netns(ns):
                bpf.tc_attach(ifname, self.obj.program("hpccd_tc_tracker"), "egress")
        except BaseException:
            self.obj.close()
            raise

    def flow(self, key: bytes) -> dict | None:
        raw = self.obj.map("hpccd_tcp_flows").lookup(key)
        if raw is None:
            return None
        b, retx, pkts, first, last, snd_nxt, flags = struct.unpack_from("=QQQQQIB", raw)
        return {"bytes": b, "retx_bytes": retx, "packets": pkts, "snd_nxt": snd_nxt,
                "tcp_flags": flags}

    def counters(self) -> dict[str, int]:
        m = self.obj.map("hpccd_tc_cnt")
        return {name: _sum_slot(m, idx) for idx, name in TC_SLOTS.items()}

    def close(self) -> None:
        try:
            with contextlib.suppress(bpf.BpfError):
                with bpf.in_netns(self.ns):
                    bpf.tc_detach(self.ifname, "egress")
                    bpf.tc_remove_clsact(self.ifname)
        finally:
            self.obj.close()


class Lab:
    """The pair plus the programs a test attached; detached and closed in
    teardown, before the namespaces go."""

    def __init__(self, pair, built: pathlib.Path, mode: str = "native"):
        self.mode = mode
        self.pair = pair
        self.built = built
        self.key = secrets.token_bytes(16)
        self._stack = contextlib.ExitStack()

    def xdp_host(self, side: str, local: bool = True) -> XdpHost:
        ns, ifname, ip = self.pair.side(side)
        h = XdpHost(self.built / "xdp_host.bpf.o", ns, ifname, self.key,
                    (ip,) if local else (), self.mode)
        self._stack.callback(h.close)
        return h

    def tc_tracker(self, side: str) -> TcTracker:
        ns, ifname, _ = self.pair.side(side)
        t = TcTracker(self.built / "tc_tracker.bpf.o", ns, ifname)
        self._stack.callback(t.close)
        return t

    def close(self) -> None:
        self._stack.close()


@pytest.fixture
def lab(request, netns_pair, built):
    """Native XDP by default; tests parametrised with indirect=True also run
    in generic (skb) mode, the mode hpccd uses on veth (ebpf/README.md)."""
    lab = Lab(netns_pair, built, getattr(request, "param", "native"))
    try:
        yield lab
    finally:
        lab.close()


# ---- namespace-side helpers ------------------------------------------------------

def snmp(ns: str) -> dict[tuple[str, str], int]:
    """/proc/net/snmp of namespace `ns`, as {(group, counter): value}."""
    with bpf.in_netns(ns):
        with open("/proc/thread-self/net/snmp") as f:
            lines = f.read().splitlines()
    out = {}
    for head, vals in zip(lines[::2], lines[1::2]):
        group, names = head.split(":")
        for n, v in zip(names.split(), vals.split(":")[1].split()):
            out[(group, n)] = int(v)
    return out


def wait_for(cond, what: str, timeout: float = WAIT_S):
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def flow_key(saddr: str, daddr: str, sport: int, dport: int, proto: int) -> bytes:
    """struct hpccd_flow_key: the flow as its local sender sees it, network order."""
    return struct.pack("!4s4sHHB3x", socket.inet_aton(saddr), socket.inet_aton(daddr),
                       sport, dport, proto)


def probe_body(flow_id: int, seq: int, ts: int) -> HpccdInt:
    """INT header (room 5, COLLECT), PROBE header, zeroed tag slot."""
    return (wire.int_header(room=wire.INT_DEFAULT_HOPS, flags=wire.INT_F_COLLECT)
            / Hpccd(type=wire.T_PROBE, flow_id=flow_id, seq=seq, ts=ts) / HpccdTag(tag=0))


def delta(after: dict, before: dict) -> dict:
    """Counters that moved, except PASS_NOT_IPV4: ARP and the IPv6 a fresh
    interface sends (DAD, router solicitations, MLD) land there at any time."""
    return {k: after[k] - before.get(k, 0) for k in after
            if after[k] != before.get(k, 0) and k != "HPCCD_XDP_PASS_NOT_IPV4"}


def check_probe_resp(key: bytes, pkt, flow_id: int, seq: int, ts: int) -> None:
    i, h = pkt[HpccdInt], pkt[Hpccd]
    assert h.type == wire.T_PROBE_RESP and h.len == wire.TAG_BYTES
    assert (h.flow_id, h.seq, h.ts, int(h.flags)) == (flow_id, seq, ts, 0)
    assert (i.room, i.nhop, i.path_id) == (wire.INT_DEFAULT_HOPS, 0, 0)
    assert not int(i.flags) & wire.INT_F_COLLECT          # cleared for the way back
    assert wire.verify_tag(key, pkt)
    assert not wire.verify_tag(bytes(16), pkt)           # and the key matters


# ---- tests -----------------------------------------------------------------------

def _udp_probe(p, sport: int, payload: bytes) -> bytes:
    """A UDP PROBE from a:sport to b's hpccd port, as a frame with its UDP
    checksum filled in (docs/wire-format.md: senders fill it)."""
    return bytes(Ether(src=p.mac_a, dst=p.mac_b) / IP(src=p.ip_a, dst=p.ip_b, flags="DF")
                 / UDP(sport=sport, dport=PORT) / Raw(payload))


def _as_resp(p, sport: int, data: bytes):
    """What a's UDP socket received, dissected with the addresses it came with."""
    return IP(bytes(IP(src=p.ip_b, dst=p.ip_a) / UDP(sport=PORT, dport=sport) / Raw(data)))


@pytest.mark.parametrize("lab", ["native", "skb"], indirect=True)
def test_udp_probe_answered_by_xdp_alone(lab):
    p = lab.pair
    b = lab.xdp_host("b")
    a = lab.xdp_host("a")
    flow_id, seq, ts = 0x1234, 7, 0xDEADBEEF
    payload = bytes(probe_body(flow_id, seq, ts))

    u = sock_in(p.a, socket.AF_INET, socket.SOCK_DGRAM)
    tx = packet_socket(p.a, p.va)
    cap = packet_socket(p.a, p.va)
    with u, tx, cap:
        u.bind((p.ip_a, 0))              # the prober's socket, on the probe's source port
        u.settimeout(WAIT_S)
        sport = u.getsockname()[1]
        assert p.pids_inside("b") == [], "a process runs in namespace b"
        b0, a0, s0 = b.counters(), a.counters(), snmp(p.b)

        tx.send(_udp_probe(p, sport, payload))
        data, src = u.recvfrom(2048)     # through a's stack: the UDP checksum is right
        frame = capture(cap, lambda f: UDP in Ether(f) and Ether(f)[UDP].dport == sport)

    assert src == (p.ip_b, PORT)
    check_probe_resp(lab.key, _as_resp(p, sport, data), flow_id, seq, ts)
    # The frame on the wire: a new packet of b (fresh TTL), tag over these bytes.
    f = wire.decode(frame)
    assert (f[Ether].src, f[Ether].dst) == (p.mac_b, p.mac_a)
    assert (f[IP].src, f[IP].dst, f[IP].ttl) == (p.ip_b, p.ip_a, 64)
    assert bytes(f[UDP].payload) == data
    assert wire.verify_tag(lab.key, frame)

    assert delta(b.counters(), b0) == {"HPCCD_XDP_TX_PROBE_RESP_UDP": 1}
    # b's IPv4 layer saw nothing: the probe ended in XDP.
    assert snmp(p.b)[("Ip", "InReceives")] == s0[("Ip", "InReceives")]
    assert p.pids_inside("b") == []
    # At a, no AF_XDP socket is bound: the response went to the stack (fallback).
    assert delta(a.counters(), a0) == {"HPCCD_XDP_PASS_NO_XSK": 1}


def test_reflection_needs_napi_on_the_peer(lab):
    """A veth delivers XDP_TX frames to its peer only when the peer has NAPI
    (an XDP program, or GRO).  Without a program on a's veth b answers, but
    the answer is lost; this is why the other tests run xdp_host on both
    ends (as real hosts do).  Kept as a test so that a kernel that changes
    this shows up here rather than as a puzzling timeout elsewhere."""
    p = lab.pair
    b = lab.xdp_host("b")
    u = sock_in(p.a, socket.AF_INET, socket.SOCK_DGRAM)
    tx = packet_socket(p.a, p.va)
    with u, tx:
        u.bind((p.ip_a, 0))
        sport = u.getsockname()[1]
        u.settimeout(1.0)
        b0 = b.counters()
        tx.send(_udp_probe(p, sport, bytes(probe_body(1, 1, 1))))
        wait_for(lambda: delta(b.counters(), b0), "b's XDP verdict")
        assert delta(b.counters(), b0) == {"HPCCD_XDP_TX_PROBE_RESP_UDP": 1}
        with pytest.raises(socket.timeout):
            u.recv(2048)
        lab.xdp_host("a")                   # now a's veth has NAPI
        u.settimeout(WAIT_S)
        tx.send(_udp_probe(p, sport, bytes(probe_body(1, 2, 1))))
        check_probe_resp(lab.key, _as_resp(p, sport, u.recv(2048)), 1, 2, 1)


@pytest.mark.parametrize("lab", ["native", "skb"], indirect=True)
def test_udp_probe_from_kernel_socket_with_checksum_offload(lab):
    p = lab.pair
    lab.xdp_host("b")
    lab.xdp_host("a")
    u = sock_in(p.a, socket.AF_INET, socket.SOCK_DGRAM)
    with u:
        u.bind((p.ip_a, 0))
        sport = u.getsockname()[1]
        u.connect((p.ip_b, PORT))
        u.settimeout(2.0)
        s0 = snmp(p.a)
        u.send(bytes(probe_body(5, 5, 5)))
        try:
            data = u.recv(2048)
        except socket.timeout:
            data = None
        csum_errors = snmp(p.a)[("Udp", "InCsumErrors")] - s0[("Udp", "InCsumErrors")]
    assert csum_errors == 0
    assert data is not None
    check_probe_resp(lab.key, _as_resp(p, sport, data), 5, 5, 5)


def _tcp_probe(p, sport: int, dport: int, seq: int, flow_id: int, ts: int) -> bytes:
    """A TCP-side PROBE on the flow a:sport -> b:dport, as a frame from a to b."""
    return bytes(Ether(src=p.mac_a, dst=p.mac_b)
                 / IP(src=p.ip_a, dst=p.ip_b, tos=DSCP << 2, flags="DF", ttl=64)
                 / TCP(sport=sport, dport=dport, flags=0, seq=seq, ack=0, window=0)
                 / probe_body(flow_id, seq, ts))


def _is_resp_to(p, sport: int):
    def match(frame: bytes) -> bool:
        e = Ether(frame)
        return (TCP in e and e[IP].src == p.ip_b and e[TCP].dport == sport
                and wire.is_tcp_probe(e))
    return match


def _pin_to_one_cpu():
    """Keep the sending thread on one CPU, so that frames it sends are
    queued in order (one backlog) whatever the scheduler does."""
    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(old)})
    return old


@pytest.mark.parametrize("lab", ["native", "skb"], indirect=True)
def test_tcp_side_probe_answered_and_never_reaches_tcp(lab):
    p = lab.pair
    a = lab.xdp_host("a", local=False)     # a passes responses on: captured below
    ls = sock_in(p.b, socket.AF_INET, socket.SOCK_STREAM)
    cs = sock_in(p.a, socket.AF_INET, socket.SOCK_STREAM)
    tx = packet_socket(p.a, p.va)
    cap = packet_socket(p.a, p.va)
    ss = None
    try:
        ls.bind((p.ip_b, 0))
        ls.listen(1)
        dport = ls.getsockname()[1]
        cs.settimeout(WAIT_S)
        cs.connect((p.ip_b, dport))
        ls.settimeout(WAIT_S)
        ss, _ = ls.accept()                 # b's stack has the handshake's final ACK
        ss.settimeout(WAIT_S)
        sport = cs.getsockname()[1]
        key = flow_key(p.ip_a, p.ip_b, sport, dport, socket.IPPROTO_TCP)

        # Control: without xdp_host on b a probe does reach b's TCP, and
        # InSegs shows it (the observable below is not blind).
        s0 = snmp(p.b)
        tx.send(_tcp_probe(p, sport, dport, 1, 77, 1000))
        wait_for(lambda: snmp(p.b)[("Tcp", "InSegs")] > s0[("Tcp", "InSegs")],
                 "the probe at b's TCP")
        assert snmp(p.b)[("Tcp", "InSegs")] - s0[("Tcp", "InSegs")] == 1

        # With xdp_host on b: answered in XDP, b's IPv4 and TCP see nothing.
        b = lab.xdp_host("b")
        s0, b0 = snmp(p.b), b.counters()
        tx.send(_tcp_probe(p, sport, dport, 2, 77, 2000))
        frame = capture(cap, _is_resp_to(p, sport))
        s1 = snmp(p.b)
        assert delta(b.counters(), b0) == {"HPCCD_XDP_TX_PROBE_RESP_TCP": 1}
        for c in (("Ip", "InReceives"), ("Tcp", "InSegs"), ("Tcp", "InErrs")):
            assert s1[c] == s0[c], c

        resp = wire.decode(frame)
        check_probe_resp(lab.key, resp, 77, 2, 2000)
        assert resp[IP].tos >> 2 == DSCP and resp[IP].ttl == 64
        t = resp[TCP]
        assert (t.sport, t.dport, int(t.flags), t.seq, t.ack, t.window) == \
            (dport, sport, 0, 2, 0, 0)
        # correct IPv4 and TCP checksums (scapy recomputes them when deleted)
        again = resp.copy()
        del again[IP].chksum, again[TCP].chksum
        again = Ether(bytes(again))
        assert (again[IP].chksum, again[TCP].chksum) == (resp[IP].chksum, resp[TCP].chksum)

        # The prober's own XDP program verifies the tag and stores the telemetry.
        a.set_addrs((p.ip_a,))
        a0 = a.counters()
        tx.send(_tcp_probe(p, sport, dport, 3, 77, 3000))
        tel = wait_for(lambda: a.telem(key), "telemetry in a's hpccd_telem")
        assert (tel["responses"], tel["probe_seq"], tel["ts_echo"], tel["flow_id"]) == \
            (1, 3, 3000, 77)
        assert (tel["room"], tel["nhop"], tel["path_id"]) == (wire.INT_DEFAULT_HOPS, 0, 0)
        assert not tel["int_flags"] & wire.INT_F_COLLECT
        assert delta(a.counters(), a0) == {"HPCCD_XDP_TCP_RESP_STORED": 1}
        assert snmp(p.b)[("Tcp", "InSegs")] == s0[("Tcp", "InSegs")]

        # The connection is untouched: data both ways, in order.
        msg = secrets.token_bytes(100_000)
        cs.sendall(msg)
        got = b""
        while len(got) < len(msg):
            got += ss.recv(65536)
        assert got == msg
        ss.sendall(b"pong")
        assert cs.recv(16) == b"pong"
    finally:
        for s in (tx, cap, cs, ls, ss):
            if s is not None:
                s.close()


def _ping(p, count: int = 3) -> int:
    """ICMP echo from a to b over a raw socket; the number of replies."""
    ident = secrets.randbelow(0xFFFF)
    s = sock_in(p.a, socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    got = 0
    with s:
        s.settimeout(WAIT_S)
        for seq in range(count):
            s.sendto(bytes(ICMP(type=8, id=ident, seq=seq) / Raw(b"hpccd")), (p.ip_b, 0))
            while True:
                reply = IP(s.recv(2048))
                if ICMP in reply and reply[ICMP].type == 0 and reply[ICMP].id == ident \
                        and reply[ICMP].seq == seq:
                    got += 1
                    break
    return got


TRANSFER = 50 * 1000 * 1000
TCP_SYN, TCP_FIN = 0x02, 0x01


@pytest.mark.parametrize("lab", ["native", "skb"], indirect=True)
def test_kernel_tcp_with_all_programs(lab):
    p = lab.pair
    xa, xb = lab.xdp_host("a"), lab.xdp_host("b")
    tc = lab.tc_tracker("a")
    assert _ping(p) == 3

    ls = sock_in(p.b, socket.AF_INET, socket.SOCK_STREAM)
    cs = sock_in(p.a, socket.AF_INET, socket.SOCK_STREAM)
    result = {}

    def receive(conn):
        h, n = hashlib.sha256(), 0
        try:
            with conn:
                while True:
                    chunk = conn.recv(1 << 20)
                    if not chunk:
                        break
                    h.update(chunk)
                    n += len(chunk)
        finally:
            result["n"], result["sha"] = n, h.hexdigest()

    with ls, cs:
        ls.bind((p.ip_b, 0))
        ls.listen(1)
        dport = ls.getsockname()[1]
        cs.bind((p.ip_a, 0))
        sport = cs.getsockname()[1]
        cs.settimeout(60)
        # The initial sequence number, from a's SYN on the wire.
        with packet_socket(p.a, p.va) as cap:
            cs.connect((p.ip_b, dport))
            syn = Ether(capture(cap, lambda f: TCP in Ether(f) and Ether(f)[TCP].sport == sport
                                and Ether(f)[TCP].flags == "S", outgoing=True))
        isn = syn[TCP].seq
        ls.settimeout(WAIT_S)
        conn, _ = ls.accept()
        conn.settimeout(60)
        rx = threading.Thread(target=receive, args=(conn,))
        rx.start()
        block = bytearray(secrets.token_bytes(1 << 20))
        h, sent, i = hashlib.sha256(), 0, 0
        try:
            while sent < TRANSFER:
                struct.pack_into("!Q", block, 0, i)          # every block different
                chunk = bytes(block[:min(len(block), TRANSFER - sent)])
                cs.sendall(chunk)
                h.update(chunk)
                sent += len(chunk)
                i += 1
            cs.shutdown(socket.SHUT_WR)                      # FIN
        finally:
            rx.join(90)
        assert not rx.is_alive()
    assert result == {"n": TRANSFER, "sha": h.hexdigest()}   # byte-exact

    # b read EOF, so a's FIN went out through the tracker already.
    f = tc.flow(flow_key(p.ip_a, p.ip_b, sport, dport, socket.IPPROTO_TCP))
    assert f is not None, "no tracker entry for the flow"
    assert f["bytes"] >= TRANSFER
    assert f["bytes"] - f["retx_bytes"] == TRANSFER          # new bytes: exactly the transfer
    assert f["snd_nxt"] == (isn + 1 + TRANSFER + 1) & 0xFFFFFFFF   # SYN + payload + FIN
    assert f["tcp_flags"] & (TCP_SYN | TCP_FIN) == TCP_SYN | TCP_FIN
    assert f["packets"] >= TRANSFER // 65536
    # b -> a carried only ACKs: no entry in that direction (a is not its sender).
    assert tc.flow(flow_key(p.ip_b, p.ip_a, dport, sport, socket.IPPROTO_TCP)) is None
    cnt = tc.counters()
    assert cnt["HPCCD_TC_NEW_FLOW"] == 1 and cnt["HPCCD_TC_MAP_FAIL"] == 0
    # TCP and ICMP were not hpccd's: passed at both ends, nothing dropped.
    for x in (xa, xb):
        c = x.counters()
        assert c["HPCCD_XDP_PASS_OTHER"] > 0
        assert not {k: v for k, v in c.items() if v and "DROP" in k}


# ---- malformed packets -------------------------------------------------------------

def _malformed_payloads() -> dict[int, bytes]:
    """One UDP payload per enum hpccd_wire_err class (1..10)."""
    good = bytes(wire.int_header(room=5) / Hpccd(type=wire.T_DATA, flow_id=9) / Raw(b"x" * 16))
    hdr = 4 + 5 * 8                                   # INT header + 5 hops
    def at(i: int, v: int) -> bytes:
        return good[:i] + bytes([v]) + good[i + 1:]
    return {
        wire.WireErr.INT_TRUNC: good[:3],
        wire.WireErr.MAGIC: at(0, 0xB1),
        wire.WireErr.INT_VERSION: at(0, 0xC2),
        wire.WireErr.ROOM: at(1, 0x09),
        wire.WireErr.NHOP: at(1, 0x65),
        wire.WireErr.HOPS_TRUNC: good[:4 + 2 * 8],
        wire.WireErr.HDR_TRUNC: good[:hdr + 20],
        wire.WireErr.VERSION: at(hdr, 0x20 | wire.T_DATA),
        wire.WireErr.TYPE: at(hdr, 0x10 | (wire.T_MAX + 1)),
        wire.WireErr.LEN: good[:-1],
    }


@pytest.mark.parametrize("lab", ["native", "skb"], indirect=True)
def test_malformed_dropped_and_counted_by_class(lab):
    p = lab.pair
    b = lab.xdp_host("b")
    lab.xdp_host("a")
    eth_ip = Ether(src=p.mac_a, dst=p.mac_b) / IP(src=p.ip_a, dst=p.ip_b, flags="DF")
    frames, want = [], {}
    for err, payload in _malformed_payloads().items():
        copies = int(err) % 3 + 1                     # 1..3 of each: counts are per class
        f = bytes(eth_ip / UDP(sport=40000 + err, dport=PORT) / Raw(payload))
        assert wire.classify(f) == err, f"test input for {err!r} misbuilt"
        frames += [f] * copies
        want[err] = copies
    # A TCP-side "probe" (DSCP 45, no TCP flag, INT magic) whose INT version
    # is wrong: malformed as well.
    f = bytes(Ether(src=p.mac_a, dst=p.mac_b)
              / IP(src=p.ip_a, dst=p.ip_b, tos=DSCP << 2, flags="DF")
              / TCP(sport=40100, dport=40101, flags=0)
              / Raw(_malformed_payloads()[wire.WireErr.INT_VERSION]))
    assert wire.classify(f) == wire.WireErr.INT_VERSION
    frames.append(f)
    want[wire.WireErr.INT_VERSION] += 1
    # A well-formed DATA packet last: it reaches b's socket (no AF_XDP socket
    # is bound, so xdp_host passes it on), and once it is there every frame
    # before it has been through b's XDP program.
    sentinel = bytes(wire.int_header(room=5) / Hpccd(type=wire.T_DATA, flow_id=1)
                     / Raw(b"sentinel"))
    frames.append(bytes(eth_ip / UDP(sport=40999, dport=PORT) / Raw(sentinel)))
    assert wire.classify(frames[-1]) == wire.WireErr.OK

    rx = sock_in(p.b, socket.AF_INET, socket.SOCK_DGRAM)   # would get anything passed
    tx = packet_socket(p.a, p.va)
    old_aff = _pin_to_one_cpu()
    try:
        rx.bind((p.ip_b, PORT))
        rx.settimeout(WAIT_S)
        c0, s0 = b.counters(), snmp(p.b)
        for f in frames:
            tx.send(f)
        data, src = rx.recvfrom(2048)
        assert (data, src) == (sentinel, (p.ip_a, 40999))
        rx.setblocking(False)
        with pytest.raises(BlockingIOError):              # nothing else was passed
            rx.recv(2048)
    finally:
        os.sched_setaffinity(0, old_aff)
        rx.close()
        tx.close()

    d = delta(b.counters(), c0)
    assert d.pop("HPCCD_XDP_PASS_NO_XSK") == 1                # the sentinel
    assert d == {f"MALFORMED_{wire.WireErr(e).name}": n for e, n in want.items()}
    # b's IPv4 layer got the sentinel and nothing else.
    assert snmp(p.b)[("Ip", "InReceives")] - s0[("Ip", "InReceives")] == 1
