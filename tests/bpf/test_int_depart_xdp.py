"""The lab's departure stamp in xdp_host's hook (ebpf/int_depart_xdp.bpf.c,
docs/lab.md "The last hop into a host"), through BPF_PROG_TEST_RUN of the
real xdp_host with the real lab program in its hook, sharing the maps of a
real int_switch object, as hpccd.lab.int_switch.IntSwitch.hook_host() puts
them together.

Invariants protected:
- a packet whose last record is the word an entry of this host's switch
  port was filed under (by the dequeue) gets that record rewritten: B as
  written, TS = the dequeue time mod 2^24, txBytes = bytes sent / 128, qLen
  = bytes left behind / 80 (saturated); the other records, nHop, pathID
  and the rest of the packet untouched; the UDP (and TCP-side probe)
  checksum still valid; counted int_departed under the port; the entry
  deleted, and the same packet's entry by sk_buff with it (a second copy of
  the packet is left alone);
- xdp_host's verdict is unchanged by the hook (the packet comes back into
  xdp_host and is steered as before: PASS_NO_XSK here, counted once);
- an entry without a dequeue: record kept, int_dep_no_deq; an entry of
  another index: record kept, int_dep_mismatch; an entry of another port,
  or none: nothing changed, nothing counted; a zero UDP checksum stays
  zero; a CHECKSUM_PARTIAL field (the folded pseudo-header sum) is left
  alone;
- without the hook filled (the daemon's own xdp_host, no lab), the packet
  comes out byte for byte as it went in, with the same verdict.
"""
from __future__ import annotations

import os
import socket
import struct
import sys

import pytest

pytestmark = pytest.mark.bpf

if os.geteuid() != 0:
    pytest.skip("loading BPF programs needs root", allow_module_level=True)

from scapy.layers.inet import IP, TCP, UDP  # noqa: E402
from scapy.layers.l2 import Ether  # noqa: E402
from scapy.packet import Raw  # noqa: E402

from hpccd._bpf import ffi, lib  # noqa: E402
from hpccd.bpf import loader as bpf  # noqa: E402
from hpccd.core import wire  # noqa: E402
from hpccd.lab import int_switch  # noqa: E402

PORT = 3                       # the switch port whose far end is this host
DST = "10.77.0.2"
SRC = "10.77.0.1"
XDP_PASS = 2


def _built(name: str):
    p = bpf.object_path(name)
    if not os.path.exists(p):
        pytest.skip(f"{p} is not built (make bpf)")
    return p


class Rig:
    """xdp_host (this host: DST) + int_switch's maps + the lab's program in
    the hook, as IntSwitch.hook_host() assembles them."""

    def __init__(self):
        self.sw = bpf.BpfObject.open(_built("int_switch")).load()
        self.x = bpf.BpfObject.open(_built("xdp_host")).load()
        self.x.map("hpccd_addrs").update(socket.inet_aton(DST), 1)
        self.prog = self.x.program("hpccd_xdp_host")
        self.hook = None

    def fill(self):
        self.hook = int_switch._Hook.make(
            self.prog.id, {n: self.sw.map(n) for n in int_switch.HOOK_SW_MAPS}, PORT, "test")

    def empty(self):
        if self.hook is not None:
            self.hook.close()
            self.hook = None

    def close(self):
        self.empty()
        self.x.close()
        self.sw.close()

    def file(self, word: int, idx: int, *, port: int = PORT, deq_ns: int = 0,
             tx_bytes: int = 0, backlog: int = 0, skb: int = 0xFFFF888000001000) -> None:
        """A departure as the tracepoint files it."""
        v = ffi.new("struct hpccd_sw_depw_val *")
        d = ffi.addressof(v, "dep")
        d.hop, d.deq_ns, d.tx_bytes, d.backlog = word, deq_ns, tx_bytes, backlog
        d.port, d.idx, d.flags, d.ifindex = port, idx, lib.HPCCD_SW_DEP_F_WORD, 7
        v.skb = skb
        k = ffi.new("struct hpccd_sw_depw_key *")
        k.hop, k.port = word, port
        self.sw.map("hpccd_sw_depw").update(ffi.buffer(k)[:], ffi.buffer(v)[:])
        # the same packet's entry by sk_buff, as tc egress made it
        self.sw.map("hpccd_sw_dep").update(skb, ffi.buffer(ffi.addressof(v, "dep"))[:])

    def pending(self) -> int:
        """Departures filed by word, not yet taken."""
        return sum(1 for _ in self.sw.map("hpccd_sw_depw").keys())

    def waiting(self) -> int:
        return sum(1 for _ in self.sw.map("hpccd_sw_dep").keys())

    def counters(self) -> dict[str, int]:
        return {k: v[0] for k, v in int_switch._sum_counters(self.sw.map("hpccd_sw_cnt"),
                                                             PORT).items()}

    def xdp(self) -> list[int]:
        m = self.x.map("hpccd_xdp_cnt")
        return [sum(int.from_bytes(v[:8], sys.byteorder) for v in m.lookup(i))
                for i in range(m.max_entries)]

    def run(self, frame: bytes) -> tuple[int, bytes]:
        rc, out, _ = self.prog.test_run(frame)
        return rc, out


@pytest.fixture
def rig():
    r = Rig()
    try:
        yield r
    finally:
        r.close()


def word(b: int, ts: int, tx: int, q: int) -> int:
    return b << 59 | ts << 35 | tx << 15 | q


def hop_of(w: int) -> wire.HpccdHop:
    return wire.HpccdHop(struct.pack("!Q", w))


def frame(words: list[int], *, csum: int | None = None, probe_tcp: bool = False,
          payload: int = 200) -> bytes:
    """A DATA (or TCP-side PROBE) to DST with the records `words` stamped."""
    hops = [hop_of(w) for w in words] + [wire.HpccdHop() for _ in range(5 - len(words))]
    ih = wire.int_header(room=5, flags=wire.INT_F_COLLECT, nhop=len(words), hops=hops,
                         path_id=0x0A1)
    if probe_tcp:
        p = (Ether() / IP(src=SRC, dst=DST, tos=wire.PROBE_DSCP_DEFAULT << 2)
             / TCP(sport=40000, dport=5201, flags=0, seq=1) / ih
             / wire.Hpccd(type=wire.T_PROBE, flow_id=9, seq=1) / wire.HpccdTag(tag=0))
    else:
        p = (Ether() / IP(src=SRC, dst=DST) / UDP(sport=40000, dport=wire.UDP_PORT_DEFAULT)
             / ih / wire.Hpccd(type=wire.T_DATA, flow_id=9, seq=0, len=payload)
             / Raw(b"\x33" * payload))
    b = bytearray(bytes(p))
    if csum is not None:
        struct.pack_into("!H", b, 14 + 20 + 6, csum)
    return bytes(b)


def l4_ok(b: bytes) -> bool:
    """The L4 checksum of frame b verifies (scapy recomputes it)."""
    p = Ether(b)
    l4 = p[UDP] if UDP in p else p[TCP]
    got = l4.chksum
    del l4.chksum
    return Ether(bytes(p))[type(l4)].chksum == got


def records(b: bytes) -> list[int]:
    i = wire.decode(b)[wire.HpccdInt]
    return [struct.unpack("!Q", bytes(h))[0] for h in i.hops[:i.nhop]]


def moved(before: dict, after: dict) -> dict:
    return {k: after[k] - before[k] for k in after if after[k] != before[k]}


W0 = word(17, 0x123456, 0x54321, 12)          # an earlier switch's record
W1 = word(17, 0xABCDEF, 0x0F0F0, 40)          # this host's last hop, at enqueue


def test_the_last_record_is_rewritten_with_the_departure(rig):
    rig.fill()
    f = frame([W0, W1])
    assert l4_ok(f)
    deq = (5 << 24) + 0x345678
    rig.file(W1, 1, deq_ns=deq, tx_bytes=1_000_000 * 128 + 640, backlog=17 * 80 + 79)
    c0, x0 = rig.counters(), rig.xdp()
    rc, out = rig.run(f)
    assert rc == XDP_PASS
    assert moved(c0, rig.counters()) == {"int_departed": 1}
    x = [b - a for a, b in zip(x0, rig.xdp())]
    assert x[lib.HPCCD_XDP_PASS_NO_XSK] == 1 and sum(x) == 1, x   # steered once, as before
    want = word(17, 0x345678, (1_000_000 + 5) % (1 << 20), 17)
    assert records(out) == [W0, want]
    assert l4_ok(out)
    # nothing else changed: the frame differs only in the record and the checksum
    diff = [i for i in range(len(f)) if f[i] != out[i]]
    rec = 14 + 20 + 8 + 4 + 8
    assert set(diff) <= set(range(rec, rec + 8)) | {14 + 20 + 6, 14 + 20 + 7}, diff
    assert rig.pending() == 0
    assert rig.waiting() == 0        # the entry by sk_buff went with it
    # a second copy of the same packet finds no entry: untouched, uncounted
    c1 = rig.counters()
    rc, again = rig.run(f)
    assert rc == XDP_PASS and again == f and rig.counters() == c1


def test_qlen_saturates_and_tcp_side_probe_checksum(rig):
    rig.fill()
    f = frame([W1], probe_tcp=True)
    rig.file(W1, 0, deq_ns=99, tx_bytes=0, backlog=0x7fff * 80 * 3)
    rig.x.map("hpccd_tag_key").update(0, bytes(range(16)))
    rc, out = rig.run(f)
    # the PROBE is answered (XDP_TX), carrying the departure record
    assert rc == 3, rc
    assert records(out) == [word(17, 99, 0, 0x7fff)]
    assert wire.decode(out)[wire.Hpccd].type == wire.T_PROBE_RESP
    assert l4_ok(out)
    assert rig.counters()["int_departed"] == 1


def test_no_dequeue_mismatch_and_foreign_entries_change_nothing(rig):
    rig.fill()
    f = frame([W0, W1])
    cases = [
        (dict(idx=1, deq_ns=0), {"int_dep_no_deq": 1}),            # no dequeue seen
        (dict(idx=0, deq_ns=1234), {"int_dep_mismatch": 1}),       # not at its index
        (dict(idx=1, deq_ns=1234, port=PORT + 1), {}),             # another port's
    ]
    for kw, want in cases:
        port = kw.pop("port", PORT)
        rig.file(W1, port=port, **kw)
        c0 = rig.counters()
        rc, out = rig.run(f)
        assert rc == XDP_PASS and out == f, kw
        assert moved(c0, rig.counters()) == want, kw
    # the earlier record's word is not looked up: only the last hop is ours
    rig.file(W0, 0, deq_ns=1234)
    c0 = rig.counters()
    rc, out = rig.run(f)
    assert out == f and rig.counters() == c0


def test_zero_and_partial_checksums_are_left_alone(rig):
    rig.fill()
    f = frame([W1], csum=0)
    rig.file(W1, 0, deq_ns=777, tx_bytes=128, backlog=160)
    rc, out = rig.run(f)
    assert records(out) == [word(17, 777, 1, 2)]
    assert struct.unpack_from("!H", out, 14 + 20 + 6)[0] == 0
    # CHECKSUM_PARTIAL: the field holds the folded pseudo-header sum only
    ip = IP(f[14:])
    l4_len = ip[UDP].len
    s = (sum(struct.unpack("!HH", socket.inet_aton(SRC))) +
         sum(struct.unpack("!HH", socket.inet_aton(DST))) + 17 + l4_len)
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    f = frame([W1], csum=s)
    rig.file(W1, 0, deq_ns=778, tx_bytes=128, backlog=160)
    rc, out = rig.run(f)
    assert records(out) == [word(17, 778, 1, 2)]
    assert struct.unpack_from("!H", out, 14 + 20 + 6)[0] == s


def test_without_the_lab_xdp_host_is_unchanged(rig):
    f = frame([W0, W1])
    rig.file(W1, 1, deq_ns=5555, tx_bytes=1280, backlog=800)
    c0, x0 = rig.counters(), rig.xdp()
    rc, out = rig.run(f)
    assert rc == XDP_PASS and out == f
    assert rig.counters() == c0 and rig.pending() == 1
    x = [b - a for a, b in zip(x0, rig.xdp())]
    assert x[lib.HPCCD_XDP_PASS_NO_XSK] == 1 and sum(x) == 1
    # filled, then emptied again: back to that
    rig.fill()
    rig.empty()
    rc, out = rig.run(f)
    assert rc == XDP_PASS and out == f and rig.pending() == 1


def test_a_program_without_the_hook_is_refused(rig):
    with bpf.BpfObject.open(_built("lab_loss")) as o:
        o.load()
        p = o.program(o.program_names()[0])
        with pytest.raises(ValueError, match="has no lab hook"):
            int_switch._Hook.make(p.id, {}, PORT, "h9:eth0")
