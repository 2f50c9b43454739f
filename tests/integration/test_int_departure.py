"""The lab switch's hop record is the egress port's state when the packet
leaves the queue ([HPCC] section 4.1: "when the packet is emitted").

A chain built by the lab builder (hpccd.lab.netns), its slow port the queue:

    h1 ==(1 Gbit/s)== s1 --(10 Mbit/s, HTB + bfifo)--> h2

h1 sends a burst of hpccd DATA packets (room 5, COLLECT, ECT(0)) of
exactly FRAME bytes on the wire from a raw socket, much faster than the 10
Mbit/s port drains them; h2 receives them on a UDP socket with their TOS
byte and the kernel's receive timestamp.  Nothing else crosses s1:p2, so
the queue holds only the burst.  FRAME is a multiple of both INT units (80
and 128 bytes), so the records are exact, not rounded.

Invariants protected (the queue is FIFO and loses nothing here):
- qLen is the backlog the packet left behind it: a whole number m_k of
  the LATER packets of the burst (m_k <= n - 1 - k; m_(k+1) >= m_k - 1,
  the ones behind k are still behind k + 1 when it leaves, except k + 1
  itself), and the burst really queues (some m_k >= 4);
- txBytes counts the packet itself: consecutive records differ by exactly
  FRAME / 128 units, and bytes sent plus bytes left behind is the same
  for every record of a burst that arrived before the first departure;
- TS is the departure: the kernel's receive timestamp on h2 follows it by
  the hand-over to the next node (its median bounded: RX_LAG_MAX_NS), while
  packets that waited behind others left one transmission time
  (FRAME x 8 / rate) after the one before, so TS is far from the time
  the packet was sent into the queue;
- marking is still decided on arrival: a packet is CE exactly when the
  queue it found (derived from the departure records: the earlier packets
  j still queued when k arrived, i.e. m_j >= k - j) is at least K
  (DCTCP threshold on s1);
- every record was rewritten at departure: int_departed equals
  int_stamped, nothing counted as not dequeued or mismatched (on a burst
  whose every dequeue the kernel reported: departed_burst sends it again
  when its tracepoint missed one, the gap docs/lab.md "Known limits"
  measures);
- with departure off (flag DEPART clear) the same burst gets the
  enqueue record: qLen = the packets AHEAD of it (m = the arrival queue)
  and TS the arrival; the departure counters do not move.

The measured hand-over (TS to the receive timestamp on h2) is printed
(pytest -s): docs/lab.md "Where the record is stamped" quotes it.
"""
from __future__ import annotations

import contextlib
import os
import socket
import statistics
import struct
import time

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.bpf]

if os.geteuid() != 0:
    pytest.skip("building namespaces and attaching tc programs need root",
                allow_module_level=True)

lab_mod = pytest.importorskip("hpccd.lab.netns",
                              reason="the lab builder (hpccd.lab.netns) is not there")

from scapy.layers.inet import IP, UDP  # noqa: E402
from scapy.packet import Raw  # noqa: E402

from hpccd.bpf import loader as bpf  # noqa: E402
from hpccd.core import wire  # noqa: E402
from hpccd.experiment.common import line  # noqa: E402
from hpccd.lab.int_switch import DEPART_HANDLE, DEPART_PRIO, DEPART_PROG  # noqa: E402
from hpccd.lab.names import HOST_IFNAME  # noqa: E402
from hpccd.lab.topology import Ecn, Topology  # noqa: E402
from hpccd._bpf import lib  # noqa: E402

from conftest import lab_ctx  # noqa: E402

RATE_BPS = 10_000_000
FRAME = 640                          # wire bytes incl. Ethernet: 8 x 80 and 5 x 128
TX_S = FRAME * 8 / RATE_BPS          # one transmission: 512 us
N = 24
K = 4 * FRAME                        # DCTCP threshold on s1:p2
ECT0, CE = 2, 3
IP_RECVTOS = 13
IP_TOS = 1
SO_TIMESTAMPNS = 35
# From the dequeue to the receive timestamp on h2: veth hands the packet to
# h2's backlog in the same softirq; the bound is for a busy shared machine.
RX_LAG_MAX_NS = 2_000_000

TOPOLOGY = line("intdep", "10.118.0.0/16", 0x0D1, 1000, 1_000_000, RATE_BPS // 1_000_000)


@pytest.fixture(scope="module")
def chain():
    with lab_ctx(Topology.loads(TOPOLOGY), offloads="frames") as lb:
        lb.ping("h1", "h2")
        yield lb


def _frames(src: str, dst: str, n: int) -> list[bytes]:
    """n hpccd DATA packets, seq 0..n-1, FRAME bytes with the Ethernet header."""
    out = []
    for seq in range(n):
        p = (IP(src=src, dst=dst, tos=ECT0, flags="DF")
             / UDP(sport=40001, dport=wire.UDP_PORT_DEFAULT)
             / wire.int_header(room=5, flags=wire.INT_F_COLLECT)
             / wire.Hpccd(type=wire.T_DATA, flow_id=0xDE9A, seq=seq))
        pad = FRAME - 14 - len(p)
        p[wire.Hpccd].len = pad
        b = bytes(p / Raw(b"\x5a" * pad))
        assert len(b) + 14 == FRAME
        out.append(b)
    return out


def _mono_minus_real() -> int:
    """CLOCK_MONOTONIC - CLOCK_REALTIME in ns (the receive timestamps are
    realtime, the records' TS monotonic), from the tightest of 20 reads."""
    best = None
    for _ in range(20):
        a = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        r = time.clock_gettime_ns(time.CLOCK_REALTIME)
        b = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        if best is None or b - a < best[0]:
            best = (b - a, (a + b) // 2 - r)
    return best[1]


def send_receive(lab, frames: list[bytes], dst: str, rx_host: str, port: int,
                 tos: bool = False) -> tuple[list[int], list[tuple[bytes, int | None, int]]]:
    """Send `frames` (IPv4 packets) one after the other from h1's raw
    socket to `dst`, and receive as many datagrams on UDP `port` of
    `rx_host`: the send times, and per datagram in arrival order (payload,
    its TOS when `tos`, else None, the kernel's receive time), times in
    monotonic ns."""
    rx = lab.socket(rx_host, socket.AF_INET, socket.SOCK_DGRAM)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    if tos:
        rx.setsockopt(socket.IPPROTO_IP, IP_RECVTOS, 1)
    rx.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    rx.bind(("0.0.0.0", port))
    rx.settimeout(2.0)
    tx = lab.socket("h1", socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    time.sleep(0.05)                 # the port's queue and HTB bucket settle
    sent = []
    try:
        for f in frames:
            sent.append(time.monotonic_ns())
            tx.sendto(f, (dst, 0))
        got = []
        while len(got) < len(frames):
            data, anc, _, _ = rx.recvmsg(4096, 256)
            t = rt = None
            for lvl, typ, d in anc:
                if lvl == socket.IPPROTO_IP and typ == IP_TOS:
                    t = d[0]
                if lvl == socket.SOL_SOCKET and typ == SO_TIMESTAMPNS:
                    s, ns = struct.unpack("qq", d[:16])
                    rt = s * 1_000_000_000 + ns
            got.append((data, t, rt))
    finally:
        rx.close()
        tx.close()
    off = _mono_minus_real()
    return sent, [(data, t, rt + off) for data, t, rt in got]


def burst(lab, n: int = N) -> list[dict]:
    """Send the burst, return per packet (in order of seq): sent, received
    (monotonic ns), tos, and the record (speed, ts unwrapped, tx units,
    qlen units); asserts none was lost or reordered."""
    src, dst = lab.address("h1"), lab.address("h2")
    sent, got = send_receive(lab, _frames(src, dst, n), dst, "h2", wire.UDP_PORT_DEFAULT,
                             tos=True)
    out = []
    for data, tos, recv in got:
        p = wire.HpccdInt(data)
        h = p[wire.Hpccd]
        assert p.nhop == 1 and p.path_id == 0x0D1
        hop = p.hops[0]
        ts = recv - ((recv - hop.ts) % (1 << 24))     # the TS just before the receive
        out.append({"seq": h.seq, "sent": sent[h.seq], "recv": recv, "tos": tos,
                    "speed": hop.speed_code, "ts": ts, "tx": hop.tx_units,
                    "q": hop.qlen_units})
    assert [r["seq"] for r in out] == list(range(n)), "lost or reordered"
    return out


def departed_burst(lab, read=lambda: None, tries: int = 3):
    """A burst and its counter deltas of s1:p2, with `read()` before and
    after it; sent again (at most `tries` bursts) while the kernel reported
    no dequeue for some of its packets (int_dep_no_deq: their records keep
    the enqueue values).  That is the kernel's tracepoint gap docs/lab.md
    "Known limits" measures (none on a quiet machine; 3 of 24 packets once
    beside two busy loops), not the switch's stamping, whose invariants
    _check_departure asserts on a burst whose every dequeue was seen."""
    sw = lab.int_switch
    for _ in range(tries):
        c0, r0 = sw.counters("s1", 2), read()
        rs = burst(lab)
        c1, r1 = sw.counters("s1", 2), read()
        d = _delta(c0, c1)
        if d["int_dep_no_deq"] == 0:
            break
    return rs, d, r0, r1


def _whole(rs: list[dict]) -> list[int]:
    """qLen of each record as a whole number of FRAMEs (asserted exact)."""
    ms = []
    for r in rs:
        assert r["q"] * 80 % FRAME == 0, f"seq {r['seq']}: qLen {r['q']} x 80 is not whole frames"
        ms.append(r["q"] * 80 // FRAME)
    return ms


def _ahead(ms: list[int]) -> list[int]:
    """What each packet found queued ahead of it on arrival, from the
    departure records of a FIFO without losses: j < k was still queued
    when k arrived exactly when k is among the m_j packets behind j."""
    return [sum(ms[j] >= k - j for j in range(k)) for k in range(len(ms))]


def _check_departure(lab, rs: list[dict], d: dict) -> tuple[list[int], list[int]]:
    """The departure invariants of the module docstring on burst `rs` with
    counter deltas `d` of s1:p2; returns the lags (TS to the receive) and the
    busy departures' spacing, in ns."""
    ms = _whole(rs)
    n = len(rs)

    # every record rewritten at departure, none left at its enqueue values
    assert d["int_stamped"] == n and d["int_departed"] == n, d
    assert d["int_dep_no_deq"] == 0 and d["int_dep_mismatch"] == 0, d
    assert all(r["speed"] == lab.topology.switches["s1"].port(2).speed_code for r in rs)

    # qLen: the later packets left behind, never an earlier one
    assert max(ms) >= 4, f"the burst did not queue: {ms}"
    for k in range(n):
        assert ms[k] <= n - 1 - k, (k, ms)
        if k:
            assert ms[k] >= ms[k - 1] - 1, (k, ms)
    # txBytes: this packet included; sent + left behind is the burst so far
    for k in range(1, n):
        assert (rs[k]["tx"] - rs[k - 1]["tx"]) % (1 << 20) == FRAME // 128, (k, rs[k - 1], rs[k])

    # TS: the departure.  The receive follows it by the hand-over only
    # (lags are >= 0 by how TS is unwrapped): half of them at least within
    # RX_LAG_MAX_NS; a few may wait for h2's softirq on a loaded machine
    # (CI once saw one past 2 ms with XDP native), while records stamped at
    # arrival would lag by the wait behind the burst, 1.2 ms a packet ...
    lags = [r["recv"] - r["ts"] for r in rs]
    assert statistics.median(lags) <= RX_LAG_MAX_NS, lags
    # ... and a packet that waited behind another left one transmission
    # time after it (HTB at the link rate), not when it was sent
    busy = [(rs[k]["ts"] - rs[k - 1]["ts"]) for k in range(1, n) if ms[k - 1] > 0]
    assert len(busy) >= 4
    assert abs(statistics.median(busy) - TX_S * 1e9) <= 0.15 * TX_S * 1e9, busy
    assert sum(busy) >= 0.8 * len(busy) * TX_S * 1e9, busy
    waited = [rs[k]["ts"] - rs[k]["sent"] for k in range(n)]
    ahead = _ahead(ms)
    for k in range(n):
        # it waited for the ones ahead of it to be sent: at least all but
        # the first of them, each one transmission time
        assert waited[k] >= max(0, ahead[k] - 1) * TX_S * 1e9 * 0.8, (k, ahead[k], waited[k])

    # marking was decided on arrival, on the queue ahead
    for k, r in enumerate(rs):
        assert (r["tos"] & 3 == CE) == (ahead[k] * FRAME >= K), (k, ahead[k], r["tos"])
    assert any(a * FRAME >= K for a in ahead) and any(a * FRAME < K for a in ahead), ahead
    assert d["ecn_marked"] == sum(a * FRAME >= K for a in ahead), d
    return lags, busy


def test_the_record_is_the_port_at_departure(chain):
    sw = chain.int_switch
    sw.configure("s1", 2, ecn=Ecn(K, K, 1.0))
    rs, d, _, _ = departed_burst(chain)
    lags, busy = _check_departure(chain, rs, d)
    print(f"\nhand-over dequeue -> receive timestamp on h2: median "
          f"{statistics.median(lags) / 1000:.1f} us, max {max(lags) / 1000:.1f} us "
          f"({len(rs)} packets); busy departures {statistics.median(busy) / 1000:.1f} us apart "
          f"(transmission {TX_S * 1e6:.0f} us)")


def test_without_departure_the_record_is_the_arrival(chain):
    """Flag DEPART clear: the record stays as written at enqueue: the queue
    AHEAD of the packet and the time it arrived."""
    sw = chain.int_switch
    sw.configure("s1", 2, ecn=None, depart=False)
    try:
        c0 = sw.counters("s1", 2)
        rs = burst(chain)
        c1 = sw.counters("s1", 2)
    finally:
        sw.configure("s1", 2)
    d = {k: c1[k][0] - c0[k][0] for k in c1}
    assert d["int_stamped"] == len(rs) and d["int_departed"] == 0, d
    ms = _whole(rs)
    assert ms[0] == 0 and max(ms) >= 4, ms
    for k in range(len(rs)):
        assert ms[k] <= k, (k, ms)               # only earlier packets were ahead
    # TS is the arrival: before the departure by the wait for those ahead
    for k, r in enumerate(rs):
        assert r["sent"] <= r["ts"] <= r["recv"]
        assert r["recv"] - r["ts"] >= max(0, ms[k] - 1) * TX_S * 1e9 * 0.8, (k, ms[k], r)


# ---- the last hop into a host that runs xdp_host ----------------------------------------
# xdp_host takes hpccd packets before tc ingress (to AF_XDP, or answers a
# PROBE with XDP_TX): there the departure comes through its hook, which
# IntSwitch.hook_host() fills (docs/lab.md "The last hop into a host").

PROBE_SPORT = 40002
ATTEMPTS = 3
PROBE_FRAME = 14 + 20 + 8 + 4 + 5 * 8 + 32 + 8      # 126 bytes on the wire
PROBE_TX_S = PROBE_FRAME * 8 / RATE_BPS              # 100.8 us


def _xdp_counts(m) -> list[int]:
    import sys
    return [sum(int.from_bytes(v[:8], sys.byteorder) for v in m.lookup(i))
            for i in range(m.max_entries)]


@contextlib.contextmanager
def xdp_host_on(lab, host: str, mode: str = "skb"):
    """xdp_host on `host`'s eth0 as the daemon loads it (in `mode`: the
    daemon's "auto" is skb on a veth; the host's address in hpccd_addrs) but
    no AF_XDP socket: the hpccd packets it would steer go on to the kernel
    stack (HPCCD_XDP_PASS_NO_XSK), where the test's UDP socket receives them."""
    o = bpf.BpfObject.open(bpf.object_path("xdp_host")).load()
    try:
        o.map("hpccd_addrs").update(socket.inet_aton(lab.address(host)), 1)
        with bpf.in_netns(lab.netns(host)):
            bpf.xdp_attach(HOST_IFNAME, o.program("hpccd_xdp_host"), mode=mode)
        try:
            yield o
        finally:
            with bpf.in_netns(lab.netns(host)):
                bpf.xdp_detach(HOST_IFNAME)
    finally:
        o.close()


@contextlib.contextmanager
def without_tc_departure(lab, host: str):
    """int_sw_depart off `host`'s tc ingress: only XDP can rewrite a record."""
    with bpf.in_netns(lab.netns(host)):
        assert bpf.tc_detach(HOST_IFNAME, "ingress", DEPART_HANDLE, DEPART_PRIO)
    try:
        yield
    finally:
        with bpf.in_netns(lab.netns(host)):
            bpf.tc_attach(HOST_IFNAME, lab.int_switch.objs["s1"].program(DEPART_PROG),
                          "ingress", DEPART_HANDLE, DEPART_PRIO, name_prefix=DEPART_PROG)


def _forget_waiting(lab) -> None:
    """Remove s1's entries by sk_buff that no far end consumed (packets an
    unhooked xdp_host took, with tc's program off): a later packet given
    the same address would meet one at tc ingress and be counted as a
    mismatch, as a bfifo drop's entry is (docs/lab.md).  The next burst's
    counts are then its own."""
    m = lab.int_switch.objs["s1"].map("hpccd_sw_dep")
    for k in list(m.keys()):
        m.delete(k)


def _delta(c0, c1) -> dict[str, int]:
    return {k: c1[k][0] - c0[k][0] for k in c1}


def _settled(sw, switch: str, port: int, timeout: float = 3.0) -> dict:
    """The port's counters once nothing moves for 50 ms: a flow is done when
    its data is acknowledged, but a copy the sender sent again meanwhile
    (a timeout on the loaded machine) may still wait in the port's queue,
    stamped and not yet departed (1.2 ms a frame at 10 Mbit/s)."""
    c = sw.counters(switch, port)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(0.05)
        c2 = sw.counters(switch, port)
        if c2 == c:
            break
        c = c2
    return c


@pytest.mark.parametrize("mode", ["skb", "native"])
def test_the_last_hop_into_xdp_host_departs_through_its_hook(chain, mode):
    """The DATA burst into a host whose xdp_host (generic or native XDP:
    native on a veth hands the program a frame of its own, no sk_buff) has
    the lab's hook filled, with the tc departure program removed there: the
    same departure invariants as above, so the records were rewritten in
    XDP; then with both (the packets XDP passes on also reach tc ingress):
    counted once; then without the hook: the arrival records."""
    sw = chain.int_switch
    sw.configure("s1", 2, ecn=Ecn(K, K, 1.0))
    with xdp_host_on(chain, "h2", mode) as xo, contextlib.ExitStack() as undo:
        cnt = xo.map("hpccd_xdp_cnt")
        undo.callback(_forget_waiting, chain)
        undo.callback(sw.unhook_host, "h2")
        with without_tc_departure(chain, "h2"):
            sw.hook_host("h2")
            rs, d, x0, x1 = departed_burst(chain, lambda: _xdp_counts(cnt))
        lags, busy = _check_departure(chain, rs, d)
        x = [b - a for a, b in zip(x0, x1)]
        assert x[lib.HPCCD_XDP_PASS_NO_XSK] == len(rs), x       # all through xdp_host
        # tc's departure back beside the hook: each record rewritten once
        rs, d, _, _ = departed_burst(chain)
        _check_departure(chain, rs, d)
        # without the hook (xdp_host as the daemon runs it) and without tc's
        # program: the record stays the arrival one, as before
        sw.unhook_host("h2")
        with without_tc_departure(chain, "h2"):
            c0 = sw.counters("s1", 2)
            rs = burst(chain)
            c1 = sw.counters("s1", 2)
        d = _delta(c0, c1)
        assert d["int_stamped"] == len(rs) and d["int_departed"] == 0, d
        ms = _whole(rs)
        assert ms[0] == 0 and max(ms) >= 4 and all(m <= k for k, m in enumerate(ms)), ms
    print(f"\nlast hop through xdp_host's hook ({mode}): dequeue -> receive timestamp on h2 median "
          f"{statistics.median(lags) / 1000:.1f} us, max {max(lags) / 1000:.1f} us; busy "
          f"departures {statistics.median(busy) / 1000:.1f} us apart")


def probe_burst(lab, key: bytes, n: int = N) -> list[dict]:
    """n PROBEs from h1 to h2, answered by h2's xdp_host; per response (in
    order of seq): sent, received on h1 (monotonic ns), and the record of
    s1:p2 it carries back (ts unwrapped, qlen units).  Each response's tag
    verifies under `key` (the record was rewritten before it was signed)."""
    src, dst = lab.address("h1"), lab.address("h2")
    frames = [bytes(IP(src=src, dst=dst, flags="DF")
                    / UDP(sport=PROBE_SPORT, dport=wire.UDP_PORT_DEFAULT)
                    / wire.int_header(room=5, flags=wire.INT_F_COLLECT)
                    / wire.Hpccd(type=wire.T_PROBE, flow_id=0xDE9B, seq=seq)
                    / wire.HpccdTag(tag=0)) for seq in range(n)]
    assert len(frames[0]) + 14 == PROBE_FRAME
    sent, got = send_receive(lab, frames, dst, "h1", PROBE_SPORT)
    out = []
    for data, _, recv in got:
        p = (IP(src=dst, dst=src) / UDP(sport=wire.UDP_PORT_DEFAULT, dport=PROBE_SPORT)
             / wire.HpccdInt(data))
        h = p[wire.Hpccd]
        assert h.type == wire.T_PROBE_RESP and wire.verify_tag(key, p), p.summary()
        i = p[wire.HpccdInt]
        assert i.nhop == 1 and i.path_id == 0x0D1
        hop = i.hops[0]
        ts = recv - ((recv - hop.ts) % (1 << 24))
        q = hop.qlen_units
        m = -(-q * 80 // PROBE_FRAME)             # the whole probes that make qLen
        assert m * PROBE_FRAME // 80 == q, (h.seq, q)
        out.append({"seq": h.seq, "sent": sent[h.seq], "recv": recv, "ts": ts, "m": m,
                    "tx": hop.tx_units})
    assert sorted(r["seq"] for r in out) == list(range(n)), "lost"
    return sorted(out, key=lambda r: r["seq"])


def test_probes_answered_by_an_engine_carry_the_departure(chain):
    """A transport engine on h2 (its xdp_host answers PROBEs with XDP_TX,
    before tc ingress): with the hook filled the PROBE_RESPs carry the
    departure record of the last hop (qLen the probes behind, TS the
    departure); without it, as before, the arrival record (the probes
    ahead, the arrival time) and no departure counted."""
    from hpccd.transport.engine import Transport

    sw = chain.int_switch
    sw.configure("s1", 2, ecn=None)
    key = os.urandom(16)

    def queued_burst() -> tuple[list[dict], dict[str, int]]:
        # The probes queue only when Python sends them faster than the port
        # drains them (100.8 us each): on the shared machine a send loop is
        # sometimes slower (gaps of 100-400 us seen at load 4.4), so up to
        # ATTEMPTS bursts, the first that queued is checked.
        for _ in range(ATTEMPTS):
            c0 = sw.counters("s1", 2)
            rs = probe_burst(chain, key)
            c1 = sw.counters("s1", 2)
            if max(r["m"] for r in rs) >= 4:
                break
        return rs, _delta(c0, c1)

    with Transport(HOST_IFNAME, netns=chain.netns("h2"), tag_key=key) as tp:
        sw.hook_host("h2")
        rs, d = queued_burst()
        sw.unhook_host("h2")
        plain, dp = queued_burst()
        xc = tp.xdp_counters()
    n = len(rs)
    assert xc[lib.HPCCD_XDP_TX_PROBE_RESP_UDP] >= 2 * n, xc
    assert d["int_stamped"] == n and d["int_departed"] == n, d
    assert d["int_dep_no_deq"] == 0 and d["int_dep_mismatch"] == 0, d
    ms = [r["m"] for r in rs]
    assert max(ms) >= 4, (ms, [rs[k]["sent"] - rs[k - 1]["sent"] for k in range(1, n)])
    for k in range(n):
        assert ms[k] <= n - 1 - k, (k, ms)
        if k:
            assert ms[k] >= ms[k - 1] - 1, (k, ms)
    for k in range(1, n):
        diff = (rs[k]["tx"] - rs[k - 1]["tx"]) % (1 << 20)
        assert diff in (0, 1, 2), (k, diff)        # 126 bytes in 128-byte units
    lags = [r["recv"] - r["ts"] for r in rs]
    assert all(0 <= g <= RX_LAG_MAX_NS for g in lags), lags
    busy = [rs[k]["ts"] - rs[k - 1]["ts"] for k in range(1, n) if ms[k - 1] > 0]
    assert len(busy) >= 4
    assert abs(statistics.median(busy) - PROBE_TX_S * 1e9) <= 0.25 * PROBE_TX_S * 1e9, busy

    assert dp["int_stamped"] == n and dp["int_departed"] == 0, dp
    ahead = [r["m"] for r in plain]
    assert ahead[0] == 0 and max(ahead) >= 4, ahead
    assert all(m <= k for k, m in enumerate(ahead)), ahead
    for r in plain:
        assert r["sent"] <= r["ts"] <= r["recv"]
    print(f"\nPROBE_RESP through the hook: departure -> response on h1 median "
          f"{statistics.median(lags) / 1000:.1f} us, max {max(lags) / 1000:.1f} us; busy "
          f"departures {statistics.median(busy) / 1000:.1f} us apart "
          f"(transmission {PROBE_TX_S * 1e6:.1f} us)")


def test_an_experiments_native_flow_departs_on_its_last_hop(chain):
    """The experiments' engines (hpccd.experiment.native.Engines) fill the
    hook of each host's xdp_host when they attach it: an HPCC flow from h1
    to h2 through the 10 Mbit/s port gets every DATA record of s1:p2
    rewritten at departure in h2's XDP (none left at enqueue), and arrives
    whole (the engine verifies each DATA's UDP checksum, which the rewrite
    patched)."""
    from hpccd.experiment import native

    sw = chain.int_switch
    sw.configure("s1", 2, ecn=None)
    with native.Engines(chain) as engines:
        # T above this chain's RTT: 10 Mbit/s x 5 ms is a window of 6,250 bytes
        # (the lab's 300 us would make W_max smaller than W_min at 10 Mbit/s)
        engines.set_T(5_000_000)
        rx = engines.get("h2")
        tx = engines.get("h1")
        c0 = sw.counters("s1", 2)
        f = tx.open_flow(chain.address("h2"), 300_000,
                         **native.flow_kwargs("hpcc", engines.link_bps("h1"), engines.hpcc))
        r = f.wait(timeout=30)
        got = rx.wait_rx_flow(f.flow_id, timeout=10)
        c1 = _settled(sw, "s1", 2)
        rs = rx.stats()
    d = _delta(c0, c1)
    assert got.bytes == 300_000 and r.state == "done"
    assert d["int_stamped"] > 300_000 // 1500, d            # the DATA, and any probes
    # Every record is accounted for at h2: rewritten at departure, or kept
    # from the enqueue because the dequeue tracepoint did not see its packet
    # (1-10 of these 215 on the loaded machine, seen with a counter in the
    # tracepoint: no entry missing, no map update failed, no recursion miss
    # reported; cause not found, docs/lab.md).  A departure gone wrong would
    # leave most records at their enqueue.
    assert d["int_departed"] + d["int_dep_no_deq"] == d["int_stamped"], d
    assert d["int_dep_no_deq"] <= max(3, d["int_stamped"] // 10), d
    assert d["int_dep_mismatch"] == 0, d
    assert rs["bad_csum"] == 0, rs
