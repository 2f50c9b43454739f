"""ebpf/int_switch.bpf.c (the software INT switch) through BPF_PROG_TEST_RUN.

Invariants protected (the header comment of int_switch.bpf.c, struct
hpccd_sw_port and enum hpccd_sw_counter in include/hpccd/kern_user.h,
docs/wire-format.md "INT header" and "Checksums"):

- stamping: an hpccd packet (UDP to or from the hpccd port) or a TCP-side
  probe (probe DSCP, no TCP flag, INT magic) with COLLECT set and
  nHop < room gets exactly one hop record, at index nHop, carrying the
  port's configured speed code, TS = CLOCK_MONOTONIC mod 2^24 at the run,
  txBytes = the queue's transmitted bytes / 128 mod 2^20 and qLen = its
  backlog / 80; nHop + 1, pathID ^= switch id; nothing else changes but
  the L4 checksum, which stays correct (a zero UDP checksum stays zero);
- a full room (nHop == room) sets OVERFLOW (once), is counted and passes;
  COLLECT clear, malformed hpccd packets and packets that are not hpccd's
  leave byte for byte unchanged;
- WRED/ECN ([LDCP] section 2.1) on the queue the packet finds:
  kmin = kmax = 0 marks every ECN-capable packet CE with a correct IPv4
  checksum; q < kmin never marks; kmin <= q < kmax marks with probability
  (q - kmin) / (kmax - kmin) x pmax; ECN-incapable packets are never marked;
- LDCP fast start ([LDCP] section 2.3): an ECN-incapable packet of the
  configured class is dropped (TC_ACT_SHOT) when q >= K, others pass;
- counters: every packet in exactly one verdict slot of its port with its
  length, events in their slots; unconfigured interfaces count under port 0;
- the queue sampler emits at most one record per port per interval, with
  the qdisc's backlog and transmitted bytes.

In a test run skb->dev is the loopback device of the calling thread's
network namespace.  Most tests run in the host namespace, where lo has no
queue (noqueue: backlog 0, nothing transmitted): there q = 0, so the
thresholds 0 and "large" test every branch of the marking and drop code
without a test hook.  The tests that need a real backlog run in a fresh
namespace whose lo gets an HTB root (8 kbit/s) with a bfifo leaf and a
standing queue of UDP datagrams: the program must then read exactly the
backlog and byte counters that netlink reports for that qdisc.  One more
gets a pfifo_fast root, whose statistics are per CPU and cannot be read:
the hop must then say "speed unknown" (B = 0).

The expected output of every vector is computed here from the wire format
(hpccd.core.wire.l4_region / classify and the hop layout), and checksums are
verified with scapy.  Nothing is attached or pinned.
"""
from __future__ import annotations

import contextlib
import json
import os
import pathlib
import socket
import struct
import time
from typing import NamedTuple

import pytest

pytestmark = pytest.mark.bpf

if os.geteuid() != 0:
    pytest.skip("loading BPF programs needs root (CAP_BPF, CAP_NET_ADMIN, CAP_PERFMON)",
                allow_module_level=True)

from scapy.layers.inet import IP, TCP, UDP  # noqa: E402
from scapy.layers.inet6 import IPv6  # noqa: E402
from scapy.layers.l2 import ARP, Ether  # noqa: E402
from scapy.packet import Raw  # noqa: E402

from hpccd._bpf import ffi as abi, lib as abi_lib  # noqa: E402
from hpccd.bpf import loader as bpf  # noqa: E402
from hpccd.core import wire  # noqa: E402  (after the root check: it needs libbpf)
from hpccd.lab.int_switch import QueueSample  # noqa: E402
from int_stamp import (DSCP, PORT_UDP, csum_field, expected_int, hop_fields,  # noqa: E402
                       int_region, l4_checksum_ok, stamp_model)

ROOT = pathlib.Path(__file__).resolve().parents[2]
OBJ = ROOT / "build" / "ebpf" / "int_switch.bpf.o"
PROG = "hpccd_int_sw"
DOC = json.loads((ROOT / "tests" / "vectors" / "wire.json").read_text())
VECTORS = {v["name"]: v for v in DOC["vectors"]}
TC_ACT_OK, TC_ACT_SHOT = 0, 2
LO = 1                               # ifindex of lo in every namespace

def c_enum(name: str) -> dict[str, int]:
    """Members of a C enum of include/hpccd/kern_user.h, through hpccd._bpf."""
    return dict(abi.typeof(f"enum {name}").relements)


def c_define(name: str) -> int:
    return getattr(abi_lib, name)


SLOT = {k.removeprefix("HPCCD_SW_"): v for k, v in c_enum("hpccd_sw_counter").items()}
N_SLOTS = SLOT.pop("COUNTERS")
SLOT_NAME = {v: k for k, v in SLOT.items()}
PORTS_MAX = c_define("HPCCD_SW_PORTS_MAX")
F = {n: c_define("HPCCD_SW_F_" + n) for n in ("INT", "ECN", "FS_HPCCD", "FS_DSCP", "FS_ALL",
                                              "SAMPLE", "RX_BYTES")}
VERDICTS = ("FORWARDED", "DROP_FAST_START")

PORT_FMT = "<QIIIIIHHBB6x"           # struct hpccd_sw_port
SAMPLE_FMT = "<QQQIIIIHH4x"          # struct hpccd_sw_sample
SWITCH_ID, SPEED = 0xA5C, 14         # 12-bit id; code 14 = 1000 Mbit/s
PMAX_ONE = 0xFFFFFFFF


# struct hpccd_sw_sample as the lab reads it (hpccd.lab.int_switch: one definition)
Sample = QueueSample


def port_cfg(port: int = 1, flags: int = F["INT"], kmin: int = 0, kmax: int = 0,
             pmax: int = PMAX_ONE, fs_k: int = 0, buffer: int = 0, switch_id: int = SWITCH_ID,
             speed: int = SPEED, fs_dscp: int = 0) -> bytes:
    return struct.pack(PORT_FMT, buffer, kmin, kmax, pmax, fs_k, flags, port, switch_id,
                       speed, fs_dscp)


# ---- ring buffer reader ---------------------------------------------------------------

class Ring(bpf.RingBuffer):
    """The queue sampler's ring buffer (hpccd.bpf.loader.RingBuffer), decoded."""

    def samples(self) -> list[Sample]:
        return [Sample(*struct.unpack(SAMPLE_FMT, r)) for r in self.read()]


# ---- the program under test -------------------------------------------------------------

class Switch:
    def __init__(self, sample_ns: int = 100_000):
        if not OBJ.exists():
            pytest.skip(f"{OBJ.relative_to(ROOT)} is not built (make bpf)")
        self.obj = bpf.BpfObject.open(OBJ, rodata={"hpccd_cfg_probe_dscp": DSCP,
                                                   "hpccd_cfg_udp_port": PORT_UDP,
                                                   "hpccd_cfg_sample_ns": sample_ns})
        try:
            self.obj.load()
            self.prog = self.obj.program(PROG)
            self.ports = self.obj.map("hpccd_sw_ports")
            self.cnt = self.obj.map("hpccd_sw_cnt")
            self.ring = Ring(self.obj.map("hpccd_sw_qsamp"))
        except BaseException:
            self.obj.close()
            raise

    def close(self) -> None:
        self.ring.close()
        self.obj.close()

    def configure(self, ifindex: int = LO, **kw) -> None:
        self.ports.update(ifindex, port_cfg(**kw))

    def counters(self) -> dict[tuple[int, str], tuple[int, int]]:
        out = {}
        for k, per_cpu in self.cnt.lookup_batch():
            idx = int.from_bytes(k, "little")
            vals = [struct.unpack("<QQ", v) for v in per_cpu]
            tot = (sum(v[0] for v in vals), sum(v[1] for v in vals))
            if tot != (0, 0):
                out[(idx // N_SLOTS, SLOT_NAME[idx % N_SLOTS])] = tot
        return out

    def run(self, frame: bytes, repeat: int = 1) -> tuple[int, bytes, dict, int, int]:
        """(verdict, output, counter deltas {(port, slot): (packets, bytes)},
        CLOCK_MONOTONIC before and after)."""
        before = self.counters()
        t0 = time.monotonic_ns()
        ret, out, _ = self.prog.test_run(frame, repeat=repeat)
        t1 = time.monotonic_ns()
        after = self.counters()
        moved = {k: (v[0] - before.get(k, (0, 0))[0], v[1] - before.get(k, (0, 0))[1])
                 for k, v in after.items() if v != before.get(k, (0, 0))}
        return ret, out, moved, t0, t1


@pytest.fixture(scope="module")
def sw():
    s = Switch()
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def cfg(sw):
    """Configure lo (ifindex 1) for one test, INT only by default; removed after."""
    def set_(**kw):
        sw.configure(**kw)
    yield set_
    sw.ports.delete(LO)


# ---- the expected behaviour, from the wire format ---------------------------------------

def ip_checksum_ok(frame: bytes) -> bool:
    p = Ether(frame)
    want = p[IP].chksum
    del p[IP].chksum
    return IP(bytes(p[IP]))[IP].chksum == want


def ts_of(out: bytes) -> tuple[int, int]:
    """(TS, index) of the record the switch wrote (index = input nHop)."""
    _, _, off = int_region(out)
    i = (out[off + 1] >> 4) - 1
    w = struct.unpack_from("!Q", out, off + 4 + 8 * i)[0]
    return (w >> 35) & 0xFFFFFF, i


def ts_between(ts: int, t0: int, t1: int) -> bool:
    """ts (ns mod 2^24) was taken in [t0, t1] (CLOCK_MONOTONIC)."""
    return (ts - t0) % (1 << 24) <= (t1 - t0)


def check_stamp(frame: bytes, out: bytes, t0: int, t1: int, tx: int = 0, q: int = 0,
                speed: int = SPEED, switch_id: int = SWITCH_ID) -> None:
    """out is frame stamped by this switch: one record, nothing else but the checksum."""
    ts, i = ts_of(out)
    assert ts_between(ts, t0, t1), f"TS {ts} not within the run ({t0 % (1 << 24)}..)"
    assert hop_fields(out, i) == (speed, ts, tx, q)
    want = stamp_model(frame, speed, ts, tx, q, switch_id)
    c = csum_field(frame)
    mask = lambda b: b[:c] + b[c + 2:]               # noqa: E731
    assert mask(out) == mask(want)
    assert l4_checksum_ok(out), "L4 checksum broken by the stamp"
    if out[c:c + 2] == b"\0\0":
        assert frame[c:c + 2] == b"\0\0", "a non-zero UDP checksum became zero"


def by_kind(kind: str) -> list[dict]:
    return [v for v in DOC["vectors"] if expected_int(bytes.fromhex(v["hex"])) == kind]


# ---- layout --------------------------------------------------------------------------------

def test_layout_matches_header(sw):
    assert sw.ports.key_size == 4 and sw.ports.value_size == struct.calcsize(PORT_FMT) == 40
    assert sw.cnt.percpu and sw.cnt.value_size == 16
    assert sw.cnt.max_entries == PORTS_MAX * N_SLOTS
    assert struct.calcsize(SAMPLE_FMT) == 48
    assert sorted(SLOT.values()) == list(range(N_SLOTS))
    assert set(VERDICTS) <= set(SLOT)


def test_every_vector_kind_is_covered():
    kinds = {expected_int(bytes.fromhex(v["hex"])) for v in DOC["vectors"]}
    assert kinds == {"stamped", "full", "no_collect", "malformed"}


# ---- INT stamping on the shared vectors ------------------------------------------------------

@pytest.mark.parametrize("v", by_kind("stamped"), ids=lambda v: v["name"])
def test_vector_stamped(sw, cfg, v):
    """COLLECT, nHop < room: one record at nHop with this port's B, TS of the
    run, qLen 0 and txBytes 0 (lo has no queue), nHop + 1, pathID ^ id,
    checksum still right, counted."""
    cfg()
    frame = bytes.fromhex(v["hex"])
    ret, out, moved, t0, t1 = sw.run(frame)
    assert ret == TC_ACT_OK and len(out) == len(frame)
    check_stamp(frame, out, t0, t1)
    assert moved == {(1, "FORWARDED"): (1, len(frame)), (1, "INT_STAMPED"): (1, len(frame))}


def test_rx_bytes_mode_stamps_the_bytes_that_arrived(sw, cfg):
    """HPCCD_SW_F_RX_BYTES ([HPCC] section 3.4's HPCC-rxRate): the hop's
    txBytes field counts every byte that arrived at the port before this
    packet, stamped or not, in 128-byte units; without the flag it is the
    queue's transmitted bytes (none on lo)."""
    frame = bytes.fromhex(by_kind("stamped")[0]["hex"])
    other = udp(0, payload=300)                    # not hpccd: counted, not stamped
    cfg(port=41, flags=F["INT"] | F["RX_BYTES"])   # a port no other test uses: starts at 0
    arrived = 0
    for k in range(12):
        ret, out, _, t0, t1 = sw.run(frame)
        assert ret == TC_ACT_OK
        check_stamp(frame, out, t0, t1, tx=(arrived // 128) % (1 << 20))
        arrived += len(frame)
        if k % 3 == 0:
            assert sw.run(other)[0] == TC_ACT_OK
            arrived += len(other)
    cfg(port=41, flags=F["INT"])
    ret, out, _, t0, t1 = sw.run(frame)
    check_stamp(frame, out, t0, t1, tx=0)


@pytest.mark.parametrize("v", by_kind("full"), ids=lambda v: v["name"])
def test_vector_full_room(sw, cfg, v):
    """nHop == room: OVERFLOW set (once), no record written, passed, counted."""
    cfg()
    frame = bytes.fromhex(v["hex"])
    ret, out, moved, _, _ = sw.run(frame)
    assert ret == TC_ACT_OK
    want = stamp_model(frame, SPEED, 0, 0, 0, SWITCH_ID)
    c = csum_field(frame)
    assert out[:c] + out[c + 2:] == want[:c] + want[c + 2:]
    assert (out[int_region(out)[2] + 2] >> 4) & wire.INT_F_OVERFLOW
    assert l4_checksum_ok(out)
    if frame == want:                       # OVERFLOW already set: byte for byte
        assert out == frame
    assert moved == {(1, "FORWARDED"): (1, len(frame)), (1, "INT_FULL"): (1, len(frame))}


@pytest.mark.parametrize("v", by_kind("no_collect") + by_kind("malformed"),
                         ids=lambda v: v["name"])
def test_vector_untouched(sw, cfg, v):
    """COLLECT clear (answers, echoes) and malformed hpccd packets pass unchanged."""
    cfg()
    frame = bytes.fromhex(v["hex"])
    try:
        ret, out, moved, _, _ = sw.run(frame)
    except bpf.BpfError as e:
        pytest.skip(f"the kernel refuses this frame as test input: {e}")
    assert ret == TC_ACT_OK and out == frame
    ev = "INT_NO_COLLECT" if expected_int(frame) == "no_collect" else "INT_MALFORMED"
    assert moved == {(1, "FORWARDED"): (1, len(frame)), (1, ev): (1, len(frame))}


def test_zero_udp_checksum_stays_zero(sw, cfg):
    cfg()
    f = bytearray(bytes.fromhex(VECTORS["data_room5_nhop0"]["hex"]))
    f[csum_field(bytes(f)):csum_field(bytes(f)) + 2] = b"\0\0"
    ret, out, _, t0, t1 = sw.run(bytes(f))
    assert ret == TC_ACT_OK
    assert out[csum_field(out):csum_field(out) + 2] == b"\0\0"
    check_stamp(bytes(f), out, t0, t1)


def test_checksum_ffff_edge(sw, cfg):
    """Stamps whose incremental update passes through the 0x0000/0xffff
    boundary still verify: try many flow ids (each a different checksum)."""
    cfg()
    base = Ether(bytes.fromhex(VECTORS["probe_udp"]["hex"]))
    for fid in range(0, 4096, 37):
        p = base.copy()
        p[wire.Hpccd].flow_id = fid
        del p[UDP].chksum
        frame = bytes(p)
        ret, out, _, t0, t1 = sw.run(frame)
        check_stamp(frame, out, t0, t1)


def test_path_of_several_switches(sw, cfg):
    """Five switches in a row fill room 5 in order, pathID = XOR of their
    ids; the sixth sets OVERFLOW."""
    frame = bytes.fromhex(VECTORS["data_room5_nhop0"]["hex"])
    ids = [0x001, 0x0A1, 0x0B2, 0xFFF, 0x123]
    for n, sid in enumerate(ids):
        cfg(switch_id=sid, speed=n + 1)
        ret, out, _, t0, t1 = sw.run(frame)
        check_stamp(frame, out, t0, t1, speed=n + 1, switch_id=sid)
        frame = out
    d = wire.decode(frame)
    assert d[wire.HpccdInt].nhop == 5
    assert d[wire.HpccdInt].path_id == 0x001 ^ 0x0A1 ^ 0x0B2 ^ 0xFFF ^ 0x123
    cfg()
    ret, out, moved, _, _ = sw.run(frame)
    assert wire.decode(out)[wire.HpccdInt].flags & wire.INT_F_OVERFLOW
    assert moved[(1, "INT_FULL")] == (1, len(frame))


def test_int_disabled_leaves_hpccd_untouched(sw, cfg):
    cfg(flags=0)
    frame = bytes.fromhex(VECTORS["data_room5_nhop0"]["hex"])
    ret, out, moved, _, _ = sw.run(frame)
    assert ret == TC_ACT_OK and out == frame
    assert moved == {(1, "FORWARDED"): (1, len(frame))}


# ---- packets that are not hpccd's ------------------------------------------------------------

E = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
SRC, DST = "192.0.2.1", "198.51.100.2"
INT_BYTES = bytes(wire.int_header(flags=wire.INT_F_COLLECT)) + bytes(
    wire.Hpccd(type=wire.T_PROBE, len=8)) + bytes(8)

OTHERS = [
    ("ARP", bytes(E / ARP(psrc=SRC, pdst=DST)), "NOT_IPV4"),
    ("IPv6 UDP to the hpccd port", bytes(E / IPv6() / UDP(dport=PORT_UDP) / Raw(INT_BYTES)),
     "NOT_IPV4"),
    ("UDP to another port", bytes(E / IP(src=SRC, dst=DST) / UDP(sport=1, dport=2) /
                                  Raw(INT_BYTES)), None),
    ("TCP data segment with the probe DSCP", bytes(E / IP(src=SRC, dst=DST, tos=DSCP << 2) /
                                                   TCP(flags="PA") / Raw(INT_BYTES)), None),
    ("TCP without flags, other DSCP", bytes(E / IP(src=SRC, dst=DST, tos=0) / TCP(flags=0) /
                                            Raw(INT_BYTES)), None),
    ("TCP probe marks but no INT magic", bytes(E / IP(src=SRC, dst=DST, tos=DSCP << 2) /
                                               TCP(flags=0) / Raw(b"\x10" + INT_BYTES[1:])),
     None),
    ("non-first IPv4 fragment to the hpccd port",
     bytes(E / IP(src=SRC, dst=DST, frag=10, proto=17) / Raw(b"\0" * 64)), None),
]


@pytest.mark.parametrize("desc,frame,slot", OTHERS, ids=[o[0] for o in OTHERS])
def test_not_hpccd_untouched(sw, cfg, desc, frame, slot):
    cfg(flags=F["INT"] | F["ECN"], kmin=1 << 30, kmax=1 << 30)
    ret, out, moved, _, _ = sw.run(frame)
    assert ret == TC_ACT_OK and out == frame
    want = {(1, "FORWARDED"): (1, len(frame))}
    if slot:
        want[(1, slot)] = (1, len(frame))
    assert moved == want


def test_unconfigured_interface_counts_under_port_0(sw):
    frame = bytes.fromhex(VECTORS["data_room5_nhop0"]["hex"])
    assert sw.ports.lookup(LO) is None
    ret, out, moved, _, _ = sw.run(frame)
    assert ret == TC_ACT_OK and out == frame
    assert moved == {(0, "FORWARDED"): (1, len(frame))}


def test_port_number_out_of_range_counts_under_port_0(sw, cfg):
    cfg(port=PORTS_MAX)
    frame = bytes.fromhex(VECTORS["data_room5_nhop0"]["hex"])
    _, _, moved, _, _ = sw.run(frame)
    assert set(moved) == {(0, "FORWARDED"), (0, "INT_STAMPED")}


# ---- WRED/ECN and fast start with an empty queue (q = 0) ---------------------------------------

def udp(tos: int, dport: int = 9, payload: int = 100) -> bytes:
    return bytes(E / IP(src=SRC, dst=DST, tos=tos) / UDP(sport=4000, dport=dport) /
                 Raw(bytes(payload)))


ECT0, ECT1, CE, NOT_ECT = 2, 1, 3, 0


@pytest.mark.parametrize("ecn", [ECT0, ECT1, CE])
def test_threshold_zero_marks_every_ecn_capable_packet(sw, cfg, ecn):
    """kmin = kmax = 0: q = 0 >= K_max, every ECN-capable packet is marked CE
    (an already-CE packet counts as marked and is not rewritten)."""
    cfg(flags=F["ECN"], kmin=0, kmax=0)
    frame = udp(0x28 | ecn)
    ret, out, moved, _, _ = sw.run(frame)
    assert ret == TC_ACT_OK
    assert Ether(out)[IP].tos == 0x28 | CE
    assert ip_checksum_ok(out) and l4_checksum_ok(out)
    assert out[:15] + out[16:24] + out[26:] == frame[:15] + frame[16:24] + frame[26:]
    assert moved == {(1, "FORWARDED"): (1, len(frame)), (1, "ECN_MARKED"): (1, len(frame))}


def test_ecn_incapable_never_marked(sw, cfg):
    cfg(flags=F["ECN"], kmin=0, kmax=0)
    frame = udp(0x28)
    ret, out, moved, _, _ = sw.run(frame)
    assert ret == TC_ACT_OK and out == frame
    assert moved == {(1, "FORWARDED"): (1, len(frame))}


def test_ecn_disabled_never_marks(sw, cfg):
    cfg(flags=F["INT"], kmin=0, kmax=0)
    frame = udp(ECT0)
    ret, out, _, _, _ = sw.run(frame)
    assert out == frame


@pytest.mark.parametrize("kmin,kmax", [(1, 1), (1, 1 << 30), (0, 1 << 30)])
def test_below_or_at_kmin_with_empty_queue_never_marks(sw, cfg, kmin, kmax):
    """q = 0 < K_min: p = 0; q = K_min = 0 < K_max: p = 0 x P_max = 0."""
    cfg(flags=F["ECN"], kmin=kmin, kmax=kmax)
    frame = udp(ECT0)
    ret, out, moved, _, _ = sw.run(frame, repeat=2000)
    assert out == frame
    assert moved == {(1, "FORWARDED"): (2000, 2000 * len(frame))}


def test_marking_and_stamping_together(sw, cfg):
    """A DATA packet at a marking port is both marked and stamped; both
    checksums verify."""
    cfg(flags=F["ECN"] | F["INT"], kmin=0, kmax=0)
    frame = bytes.fromhex(VECTORS["data_room5_nhop0"]["hex"])
    ret, out, moved, t0, t1 = sw.run(frame)
    assert Ether(out)[IP].tos & 3 == CE
    assert ip_checksum_ok(out) and l4_checksum_ok(out)
    ts, i = ts_of(out)
    assert ts_between(ts, t0, t1)
    assert set(moved) == {(1, "FORWARDED"), (1, "ECN_MARKED"), (1, "INT_STAMPED")}


LDCP_FIRST = bytes.fromhex(VECTORS["ldcp_first_rtt"]["hex"])     # ECN-incapable hpccd DATA
LDCP_STABLE = bytes.fromhex(VECTORS["ldcp_stable"]["hex"])       # ECT(0)

FAST_START = [
    # (description, flags, fs_dscp, frame, dropped?)
    ("hpccd class: ECN-incapable hpccd DATA dropped", F["FS_HPCCD"], 0, LDCP_FIRST, True),
    ("hpccd class: ECN-capable hpccd DATA passes", F["FS_HPCCD"], 0, LDCP_STABLE, False),
    ("hpccd class: ECN-incapable other UDP passes", F["FS_HPCCD"], 0, udp(0), False),
    ("DSCP class: matching DSCP dropped", F["FS_DSCP"], 10, udp(10 << 2), True),
    ("DSCP class: other DSCP passes", F["FS_DSCP"], 10, udp(11 << 2), False),
    ("DSCP class: matching but ECT(1) passes", F["FS_DSCP"], 10, udp(10 << 2 | ECT1), False),
    ("all class: ECN-incapable UDP dropped", F["FS_ALL"], 0, udp(0), True),
    ("all class: ECN-incapable TCP dropped", F["FS_ALL"], 0,
     bytes(E / IP(src=SRC, dst=DST) / TCP(flags="PA") / Raw(b"x")), True),
    ("all class: CE passes", F["FS_ALL"], 0, udp(CE), False),
    ("all class: ARP passes", F["FS_ALL"], 0, bytes(E / ARP()), False),
    ("no class: nothing dropped", 0, 0, udp(0), False),
]


@pytest.mark.parametrize("desc,flags,dscp,frame,dropped", FAST_START,
                         ids=[f[0] for f in FAST_START])
def test_fast_start_drop_at_k_zero(sw, cfg, desc, flags, dscp, frame, dropped):
    """fast_start_k = 0: q = 0 >= K, so every ECN-incapable packet of the
    class is dropped (TC_ACT_SHOT) and counted; others are forwarded."""
    cfg(flags=flags | F["INT"], fs_k=0, fs_dscp=dscp)
    ret, out, moved, _, _ = sw.run(frame)
    verdicts = {k for k in moved if k[1] in VERDICTS}
    if dropped:
        assert ret == TC_ACT_SHOT
        assert moved == {(1, "DROP_FAST_START"): (1, len(frame))}
    else:
        assert ret == TC_ACT_OK
        assert verdicts == {(1, "FORWARDED")}


def test_fast_start_above_k_passes(sw, cfg):
    cfg(flags=F["FS_ALL"], fs_k=1)
    ret, _, moved, _, _ = sw.run(udp(0))
    assert ret == TC_ACT_OK and (1, "DROP_FAST_START") not in moved


def test_buffer_drop_seen_is_counted_not_dropped(sw, cfg):
    """q + packet > buffer: counted (the bfifo drops it), forwarded here."""
    frame = udp(0)
    cfg(buffer=len(frame) - 1)
    ret, out, moved, _, _ = sw.run(frame)
    assert ret == TC_ACT_OK and out == frame
    assert moved == {(1, "FORWARDED"): (1, len(frame)),
                     (1, "BUFFER_DROP_SEEN"): (1, len(frame))}
    cfg(buffer=len(frame))
    _, _, moved, _, _ = sw.run(frame)
    assert (1, "BUFFER_DROP_SEEN") not in moved


# ---- the queue sampler ----------------------------------------------------------------------

def test_sampler_at_most_once_per_interval(sw, cfg):
    sw.ring.read()                           # drop earlier samples
    cfg(flags=F["SAMPLE"], port=7)
    frame = udp(0)
    t0 = time.monotonic_ns()
    n = 20000
    _, _, moved, _, _ = sw.run(frame, repeat=n)
    t1 = time.monotonic_ns()
    got = sw.ring.samples()
    assert got, "no sample"
    assert all(s.port == 7 and s.ifindex == LO and s.backlog_bytes == 0 and s.flags == 0
               for s in got)
    assert all(t0 <= s.ts_ns <= t1 for s in got)
    gaps = [b.ts_ns - a.ts_ns for a, b in zip(got, got[1:])]
    assert all(g >= 100_000 for g in gaps), min(gaps)
    assert len(got) <= (t1 - t0) // 100_000 + 1
    assert moved[(7, "SAMPLED")][0] == len(got)
    assert moved[(7, "FORWARDED")] == (n, n * len(frame))


def test_sampler_off_without_flag(sw, cfg):
    sw.ring.read()
    cfg(flags=F["INT"])
    sw.run(udp(0), repeat=100)
    assert sw.ring.read() == []


# ---- with a real queue: HTB + bfifo on lo of a fresh namespace -----------------------------------

def _register_bfifo() -> None:
    """pyroute2 0.9 encodes bfifo's options (struct tc_fifo_qopt, a limit)
    only under the name pfifo: alias it."""
    from pyroute2.netlink.rtnl.tcmsg import plugins, sched_pfifo
    plugins.setdefault("bfifo", sched_pfifo)


class QStats(NamedTuple):
    backlog: int
    qlen: int
    drops: int
    bytes: int
    packets: int


def root_stats(ns_name: str, ifindex: int = LO) -> QStats:
    from pyroute2 import NetNS

    with NetNS(ns_name, flags=0) as ns:
        for q in ns.get_qdiscs(index=ifindex):
            if q["parent"] == 0xFFFFFFFF:
                s2 = q.get_attr("TCA_STATS2")
                qs, bs = s2.get_attr("TCA_STATS_QUEUE"), s2.get_attr("TCA_STATS_BASIC")
                return QStats(qs["backlog"], qs["qlen"], qs["drops"], bs["bytes"], bs["packets"])
    raise AssertionError("no root qdisc")


@contextlib.contextmanager
def standing_queue(ns_name: str, datagrams: int = 40, size: int = 1000):
    """lo of `ns_name` up with HTB at 8 kbit/s (1 KB/s: the queue is all but
    frozen for the duration of a test; tests that set thresholds from the
    backlog use at_backlog(), which retries if a packet left meanwhile)
    over a bfifo, filled with UDP
    datagrams of `size` bytes; yields nothing, the namespace is the test's."""
    from pyroute2 import NetNS

    _register_bfifo()
    with NetNS(ns_name, flags=0) as ns:
        ns.link("set", index=LO, state="up")
        ns.tc("add", "htb", LO, 0x10000, default=0x10)
        ns.tc("add-class", "htb", LO, 0x10010, parent=0x10000, rate="8kbit", ceil="8kbit",
              burst=1600, prio=1)
        ns.tc("add", "bfifo", LO, 0x20000, parent=0x10010, limit=1_000_000)
    with bpf.in_netns(ns_name):
        rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            rx.bind(("127.0.0.1", 9999))
            for _ in range(datagrams):
                tx.sendto(bytes(size), ("127.0.0.1", 9999))
        finally:
            tx.close()
    try:
        yield
    finally:
        # Drop what is still queued before the socket goes: delivered to a
        # closed port later, each datagram would make an ICMP port
        # unreachable that waits behind the same 8 kbit/s queue, holding the
        # send buffer of the kernel's ICMP socket, which is one per CPU for
        # all namespaces: echo replies of every other lab would starve
        # until this namespace's asynchronous cleanup (docs/lab.md).
        try:
            with NetNS(ns_name, flags=0) as ns:
                ns.tc("del", "htb", LO, 0x10000)
        finally:
            rx.close()


def run_in(sw: Switch, ns_name: str, frame: bytes, repeat: int = 1):
    """A test run with skb->dev = lo of ns_name; the qdisc stats read just
    before and after (equal when nothing was dequeued meanwhile)."""
    for _ in range(20):
        before = root_stats(ns_name)
        with bpf.in_netns(ns_name):
            res = sw.run(frame, repeat)
        after = root_stats(ns_name)
        if before == after:
            return res, before
    raise AssertionError("the queue kept moving")


def at_backlog(sw: Switch, ns_name: str, configure, frame: bytes, repeat: int = 1):
    """Configure from the backlog q, then run: retried until the run saw the
    same q (on a loaded machine the 8 kbit/s queue may release a packet
    between reading q and the run).  Returns (run result, stats, q)."""
    for _ in range(20):
        q = root_stats(ns_name).backlog
        configure(q)
        res, st = run_in(sw, ns_name, frame, repeat)
        if st.backlog == q:
            return res, st, q
    raise AssertionError("the queue kept moving")


def test_real_backlog_and_tx_bytes_are_stamped(sw, cfg, netns_pair):
    """The record carries exactly the HTB root's backlog / 80 and
    bstats.bytes / 128 of lo, as netlink reports them."""
    cfg()
    ns = netns_pair.a
    with standing_queue(ns):
        frame = bytes.fromhex(VECTORS["probe_udp"]["hex"])
        (ret, out, moved, t0, t1), st = run_in(sw, ns, frame)
        assert st.backlog > 10_000 and st.bytes > 0
        check_stamp(frame, out, t0, t1, tx=(st.bytes // 128) % (1 << 20),
                    q=min(st.backlog // 80, 0x7FFF))
        tcp = bytes.fromhex(VECTORS["tcp_probe"]["hex"])
        (ret, out, moved, t0, t1), st = run_in(sw, ns, tcp)
        check_stamp(tcp, out, t0, t1, tx=(st.bytes // 128) % (1 << 20),
                    q=min(st.backlog // 80, 0x7FFF))


def test_real_backlog_sampled(sw, cfg, netns_pair):
    sw.ring.read()
    cfg(flags=F["SAMPLE"], port=3)
    ns = netns_pair.a
    with standing_queue(ns):
        _, st = run_in(sw, ns, udp(0))
        s = sw.ring.samples()
        assert len(s) == 1
        assert (s[0].backlog_bytes, s[0].qlen, s[0].drops, s[0].tx_bytes, s[0].tx_packets) == \
            (st.backlog, st.qlen, st.drops, st.bytes, st.packets)
        assert s[0].port == 3 and s[0].ifindex == LO


def test_thresholds_on_a_real_queue(sw, cfg, netns_pair):
    """K_min/K_max/fast-start K on either side of the real backlog q."""
    ns = netns_pair.a
    with standing_queue(ns):
        frame = udp(ECT0)
        (_, out, _, _, _), st, q = at_backlog(                  # q < K: no mark
            sw, ns, lambda q: cfg(flags=F["ECN"], kmin=q + 1, kmax=q + 1), frame)
        assert q > 0 and out == frame
        (_, out, _, _, _), _, _ = at_backlog(                   # q >= K: mark
            sw, ns, lambda q: cfg(flags=F["ECN"], kmin=q, kmax=q), frame)
        assert Ether(out)[IP].tos & 3 == CE
        (ret, _, _, _, _), _, _ = at_backlog(                   # q < K: forwarded
            sw, ns, lambda q: cfg(flags=F["FS_ALL"], fs_k=q + 1), udp(0))
        assert ret == TC_ACT_OK
        (ret, _, _, _, _), _, _ = at_backlog(                   # q >= K: dropped
            sw, ns, lambda q: cfg(flags=F["FS_ALL"], fs_k=q), udp(0))
        assert ret == TC_ACT_SHOT
        (_, _, moved, _, _), _, _ = at_backlog(                 # would not fit: seen
            sw, ns, lambda q: cfg(buffer=q + len(frame) - 1), frame)
        assert (1, "BUFFER_DROP_SEEN") in moved


@pytest.mark.parametrize("frac,pmax", [(0.5, 1.0), (0.25, 1.0), (0.5, 0.4), (0.9, 0.1)])
def test_marking_probability_on_a_real_queue(sw, cfg, netns_pair, frac, pmax):
    """K_min <= q < K_max: the fraction of mark decisions over N runs is
    (q - K_min) / (K_max - K_min) x P_max within 5 standard deviations.
    (A run repeats on the same packet, which is CE after its first mark;
    a CE packet still gets a decision and counts as marked.)"""
    ns = netns_pair.a
    n = 20000
    with standing_queue(ns):
        def configure(q):
            kmin = q // 2
            kmax = kmin + round((q - kmin) / frac)
            cfg(flags=F["ECN"], kmin=kmin, kmax=kmax, pmax=min(round(pmax * 2 ** 32), PMAX_ONE))
            return kmin, kmax

        (_, _, moved, _, _), st, q = at_backlog(sw, ns, configure, udp(ECT0), repeat=n)
        kmin, kmax = configure(q)          # the thresholds that run used
        p = (q - kmin) / (kmax - kmin) * pmax
        marked = moved.get((1, "ECN_MARKED"), (0, 0))[0]
        sd = (p * (1 - p) / n) ** 0.5
        assert abs(marked / n - p) <= 5 * sd, (marked / n, p)


def test_per_cpu_qdisc_stats_give_an_unknown_hop(sw, cfg, netns_pair):
    """A root qdisc with per-CPU statistics (pfifo_fast) cannot be read: the
    hop is written with B = 0 ("unknown", ignored and counted by the
    receiver) and zero qLen/txBytes, nHop and pathID still move, and the
    sample says so."""
    from pyroute2 import NetNS

    sw.ring.read()
    cfg(flags=F["INT"] | F["SAMPLE"])
    ns = netns_pair.a
    with NetNS(ns, flags=0) as n:
        n.link("set", index=LO, state="up")
        n.tc("add", "pfifo_fast", LO, 0x10000)
        assert [q.get_attr("TCA_KIND") for q in n.get_qdiscs(index=LO)
                if q["parent"] == 0xFFFFFFFF] == ["pfifo_fast"]
    frame = bytes.fromhex(VECTORS["data_room5_nhop0"]["hex"])
    with bpf.in_netns(ns):
        ret, out, moved, t0, t1 = sw.run(frame)
    assert ret == TC_ACT_OK
    check_stamp(frame, out, t0, t1, speed=0)
    assert moved[(1, "NO_QSTATS")] == (1, len(frame))
    s = sw.ring.samples()
    assert len(s) == 1 and s[0].flags == c_define("HPCCD_SW_SAMPLE_F_NO_QSTATS")
