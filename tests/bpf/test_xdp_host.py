"""ebpf/xdp_host.bpf.c through BPF_PROG_TEST_RUN.

Invariants protected (docs/wire-format.md, ebpf/README.md "xdp_host, in order",
the counter comments of include/hpccd/kern_user.h):

- every shared vector (tests/vectors/wire.json) gets its documented verdict:
  malformed -> XDP_DROP counted in its class; PROBE to a local address ->
  XDP_TX of the right PROBE_RESP (addresses and ports swapped, type 5,
  COLLECT cleared, hops/nHop/pathID/OVERFLOW kept, ts echoed, tag verifying,
  IPv4 and L4 checksums right, same length); TCP-side PROBE_RESP -> its
  telemetry stored in hpccd_telem, then XDP_DROP; other valid hpccd packets
  -> XDP_PASS (no AF_XDP socket is bound in a test run); non-hpccd ->
  XDP_PASS, byte for byte unchanged;
- malformed, truncated and oversize frames (every vector cut at every byte,
  field corruptions of every class, a seeded random-mutation corpus) are
  never read out of bounds (the verifier) and get the verdict that the
  reference classifier hpccd.core.wire.classify and the documented rules give;
- every frame is counted in exactly one slot of hpccd_xdp_cnt: the per-CPU
  deltas over a batch equal, slot by slot, the packets and bytes sent;
- frames that are passed or dropped leave the program unchanged;
- the load-time settings (port, probe DSCP, HPCCD_CFG_* flags) and the two
  run-time maps (hpccd_addrs, hpccd_tag_key) switch the documented branches;
- PROBEs are answered per source address within a token bucket (rate,
  burst), the excess dropped and counted, other sources unaffected.

The expected verdicts come from the documentation, written twice: once per
vector from its JSON fields (vector_expectation), once as an oracle over
frame bytes (expect) built on hpccd.core.wire.classify.  Counter slot numbers are
parsed from the C headers, so renumbering them cannot leave the test behind.

Nothing is attached or pinned: the objects are loaded with the project's
loader (hpccd.bpf.loader), run with BPF_PROG_TEST_RUN and closed in teardown.
Not reachable here: XDP_REDIRECT to a bound AF_XDP socket (needs a real
socket on a real queue), and frames shorter than 14 bytes (the kernel
refuses them as test input).
"""
from __future__ import annotations

import collections
import dataclasses
import json
import os
import pathlib
import random
import socket
import struct
import time
from types import SimpleNamespace
from typing import Callable, NamedTuple

import pytest

pytestmark = pytest.mark.bpf

if os.geteuid() != 0:
    pytest.skip("loading BPF programs needs root (CAP_BPF, CAP_NET_ADMIN, CAP_PERFMON)",
                allow_module_level=True)

from scapy.layers.inet import ICMP, IP, TCP, UDP  # noqa: E402
from scapy.layers.inet6 import IPv6  # noqa: E402
from scapy.layers.l2 import ARP, Dot1Q, Ether  # noqa: E402
from scapy.packet import Raw  # noqa: E402

from hpccd._bpf import ffi as abi, lib as abi_lib  # noqa: E402
from hpccd.bpf import loader as bpf  # noqa: E402  (after the root check: bpf needs libbpf)
from hpccd.core import wire  # noqa: E402
from hpccd.core.checksum import internet_checksum  # noqa: E402
from hpccd.core.siphash import siphash24  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
OBJ = ROOT / "build" / "ebpf" / "xdp_host.bpf.o"
PROG = "hpccd_xdp_host"

DOC = json.loads((ROOT / "tests" / "vectors" / "wire.json").read_text())
VECTORS = DOC["vectors"]
VALID = [v for v in VECTORS if v["error"] == 0]
KEY = bytes.fromhex(DOC["tag_key_hex"])
PORT = DOC["udp_port"]
DSCP = DOC["probe_dscp"]
# The receivers of the vectors (DATA and PROBE go one way, the answers the
# other): this host owns both addresses, so every valid vector is local.
LOCAL = tuple(sorted({v["fields"]["ip"]["dst"] for v in VALID}))
FOREIGN = "203.0.113.9"

XDP_ABORTED, XDP_DROP, XDP_PASS, XDP_TX, XDP_REDIRECT = range(5)   # UAPI enum xdp_action
VERDICT = {XDP_ABORTED: "ABORTED", XDP_DROP: "DROP", XDP_PASS: "PASS", XDP_TX: "TX",
           XDP_REDIRECT: "REDIRECT"}
MIN_FRAME = 14            # BPF_PROG_TEST_RUN refuses XDP input shorter than ETH_HLEN


# ---- constants from the C headers (through hpccd._bpf, whose cdef they are) --------

def c_enum(name: str) -> dict[str, int]:
    """The members of `enum name` with their values, as the C compiler sees them."""
    return dict(abi.typeof(f"enum {name}").relements)


WIRE_ERR = c_enum("hpccd_wire_err")
_XDP_CNT = c_enum("hpccd_xdp_counter")
# C.PASS_NOT_IPV4, C.DROP_MALFORMED, ..., C.COUNTERS: slots of hpccd_xdp_cnt
C = SimpleNamespace(**{k.removeprefix("HPCCD_XDP_"): v for k, v in _XDP_CNT.items()})
SLOT_NAME = {v: k.removeprefix("HPCCD_XDP_") for k, v in _XDP_CNT.items()
             if k not in ("HPCCD_XDP_COUNTERS", "HPCCD_XDP_DROP_MALFORMED_LAST")}
for _e in range(1, WIRE_ERR["HPCCD_E_MAX"]):
    SLOT_NAME[C.DROP_MALFORMED + _e] = "DROP_MALFORMED+" + wire.WireErr(_e).name
CFG_REFLECT = abi_lib.HPCCD_CFG_REFLECT_PROBES
CFG_TCP_SIDE = abi_lib.HPCCD_CFG_TCP_SIDE
CFG_DEFAULT = CFG_REFLECT | CFG_TCP_SIDE
REFLECT_TTL = abi_lib.HPCCD_REFLECT_TTL
MAX_HOPS = abi.typeof("struct hpccd_tcp_telem").fields[0][1].type.length   # hops[]

# struct hpccd_counter; struct hpccd_tcp_telem (hops[8] raw, rx_ns, probe_seq,
# responses, ts_echo, flow_id, path_id, nhop, room, int_flags, pad[3])
COUNTER_FMT = "<QQ"
TELEM_FMT = f"<{MAX_HOPS * 8}sQQQIIHBBB3x"


class Telem(NamedTuple):
    hops: bytes
    rx_ns: int
    probe_seq: int
    responses: int
    ts_echo: int
    flow_id: int
    path_id: int
    nhop: int
    room: int
    int_flags: int


# ---- frame helpers ------------------------------------------------------------------

class Cfg(NamedTuple):
    """Load-time settings and run-time map contents of one xdp_host object."""
    addrs: tuple[str, ...] = LOCAL
    key: bytes = KEY
    flags: int = CFG_DEFAULT
    port: int = PORT
    dscp: int = DSCP
    probe_rate: int = 100000          # HPCCD_PROBE_RATE_DEFAULT
    probe_burst: int = 256            # HPCCD_PROBE_BURST_DEFAULT


DEFAULT = Cfg()


def ip_offset(frame: bytes) -> int:
    return 18 if frame[12:14] == b"\x81\x00" else 14


def u16(b: bytes, off: int) -> int:
    return struct.unpack_from("!H", b, off)[0]


def hpccd_offsets(frame: bytes, cfg: Cfg = DEFAULT):
    """(l4 kind, l4 offset, INT offset, hpccd header offset, region end) of an hpccd frame."""
    kind, l4, start, end = wire.l4_region(frame, cfg.port, cfg.dscp)
    h = start + 4 + 8 * (frame[start + 1] & 0xF) if start + 1 < len(frame) else None
    return kind, l4, start, h, end


def flow_key(saddr: str, daddr: str, sport: int, dport: int, proto: int) -> bytes:
    """struct hpccd_flow_key, network byte order."""
    return (socket.inet_aton(saddr) + socket.inet_aton(daddr)
            + struct.pack("!HHB3x", sport, dport, proto))


def spec_tag(frame: bytes, cfg: Cfg = DEFAULT):
    """(tag the spec computes, tag the frame carries) of a well-formed PROBE_RESP
    or NOTIFY, from bytes (docs/wire-format.md "Integrity tag"): SipHash-2-4
    over the reversed 5-tuple and everything from the INT header to the tag."""
    _, l4, start, h, _ = hpccd_offsets(frame, cfg)
    ip = ip_offset(frame)
    tag_at = h + 32 + u16(frame, h + 2) - 8
    prefix = (frame[ip + 16:ip + 20] + frame[ip + 12:ip + 16] + frame[l4 + 2:l4 + 4]
              + frame[l4:l4 + 2] + bytes([frame[ip + 9], 0, 0, 0]))
    return (siphash24(cfg.key, prefix + frame[start:tag_at]).to_bytes(8, "big"),
            frame[tag_at:tag_at + 8])


def csum_residual(data: bytes) -> int:
    """One's complement sum of 16-bit words (0xffff when a checksum over
    `data`, checksum field included, verifies); 0 and 0xffff are the same
    number (-0 and +0) and are both returned as 0xffff."""
    return (~internet_checksum(data) & 0xFFFF) or 0xFFFF


def partial_csum(frame: bytes, ip: int, l4_len: int) -> int:
    """The CHECKSUM_PARTIAL value a kernel socket leaves in the L4 checksum
    field: the folded (not complemented) IPv4 pseudo-header sum."""
    s = (sum(struct.unpack_from("!4H", frame, ip + 12)) + frame[ip + 9] + l4_len)
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def residuals(frame: bytes, cfg: Cfg = DEFAULT) -> tuple[int, int]:
    """Checksum residuals of the IPv4 header and of the L4 (pseudo-header
    included) of an hpccd UDP or TCP-side frame."""
    kind, l4, _, _, _ = hpccd_offsets(frame, cfg)
    ip = ip_offset(frame)
    ihl = (frame[ip] & 0xF) * 4
    tot = u16(frame, ip + 2)
    if kind == "udp":
        l4_len = u16(frame, l4 + 4)
        proto = 17
    else:
        l4_len = tot - ihl
        proto = 6
    seg = frame[l4:min(l4 + l4_len, len(frame))]
    pseudo = frame[ip + 12:ip + 20] + struct.pack("!BBH", 0, proto, l4_len)
    return csum_residual(frame[ip:ip + ihl]), csum_residual(pseudo + seg)


def scapy_checksums_ok(frame: bytes) -> tuple[bool, bool]:
    """Whether the IPv4 and the L4 checksum equal what scapy recomputes."""
    p = Ether(frame)
    l4 = p[UDP] if UDP in p else p[TCP]
    ip_c, l4_c = p[IP].chksum, l4.chksum
    del p[IP].chksum
    del l4.chksum
    q = Ether(bytes(p))
    return q[IP].chksum == ip_c, (q[UDP] if UDP in q else q[TCP]).chksum == l4_c


def probe_resp_of(probe: bytes, cfg: Cfg = DEFAULT) -> bytes:
    """The PROBE_RESP the reflector must write over `probe`, checksum fields
    left as in the probe (they are checked separately): MACs, addresses and
    ports swapped, TTL HPCCD_REFLECT_TTL, CE -> ECT(0) with DSCP kept,
    COLLECT cleared, type PROBE_RESP, tag over the response written into the
    slot.  Everything else (hops, nHop, room, pathID, OVERFLOW, flow_id, seq,
    ack, ts, aux, flags, len, IP id/DF/options, TCP seq/window/options) kept."""
    kind, l4, start, h, _ = hpccd_offsets(probe, cfg)
    ip = ip_offset(probe)
    b = bytearray(probe)
    b[0:6], b[6:12] = probe[6:12], probe[0:6]
    b[ip + 12:ip + 16], b[ip + 16:ip + 20] = probe[ip + 16:ip + 20], probe[ip + 12:ip + 16]
    if probe[ip + 1] & 3 == 3:
        b[ip + 1] = (probe[ip + 1] & ~3) | 2
    b[ip + 8] = REFLECT_TTL
    b[l4:l4 + 2], b[l4 + 2:l4 + 4] = probe[l4 + 2:l4 + 4], probe[l4:l4 + 2]
    b[start + 2] &= ~(wire.INT_F_COLLECT << 4) & 0xFF      # flags are the high nibble
    b[h] = wire.WIRE_VERSION << 4 | wire.T_PROBE_RESP
    tag, _ = spec_tag(bytes(b), cfg)
    tag_at = h + 32
    b[tag_at:tag_at + 8] = tag
    return bytes(b)


def mask_checksums(frame: bytes, cfg: Cfg = DEFAULT) -> bytes:
    kind, l4, _, _, _ = hpccd_offsets(frame, cfg)
    ip = ip_offset(frame)
    b = bytearray(frame)
    b[ip + 10:ip + 12] = b"\0\0"
    c = l4 + (6 if kind == "udp" else 16)
    b[c:c + 2] = b"\0\0"
    return bytes(b)


def check_probe_resp(probe: bytes, out: bytes, cfg: Cfg = DEFAULT) -> None:
    """`out` is the PROBE_RESP of `probe` (docs/wire-format.md, xdp_host.bpf.c (c))."""
    assert len(out) == len(probe)
    want, got = mask_checksums(probe_resp_of(probe, cfg), cfg), mask_checksums(out, cfg)
    assert got == want, ("PROBE_RESP differs from the expected one at bytes "
                         f"{[i for i in range(len(out)) if got[i] != want[i]]}")
    computed, carried = spec_tag(out, cfg)
    assert carried == computed
    kind, l4, _, _, _ = hpccd_offsets(out, cfg)
    if (cfg.port, cfg.dscp) == (wire.bound_port(), wire.PROBE_DSCP_DEFAULT):
        # the same facts through the scapy layers, for readable failures
        p, q = wire.decode(probe), wire.decode(out)
        assert (q.src, q.dst) == (p.dst, p.src)
        assert (q[IP].src, q[IP].dst) == (p[IP].dst, p[IP].src)
        pl4, ql4 = (p[UDP], q[UDP]) if kind == "udp" else (p[TCP], q[TCP])
        assert (ql4.sport, ql4.dport) == (pl4.dport, pl4.sport)
        pi, qi, ph, qh = p[wire.HpccdInt], q[wire.HpccdInt], p[wire.Hpccd], q[wire.Hpccd]
        assert qh.type == wire.T_PROBE_RESP and qh.len == 8
        assert int(qi.flags) == int(pi.flags) & ~wire.INT_F_COLLECT
        assert (qi.nhop, qi.room, qi.path_id) == (pi.nhop, pi.room, pi.path_id)
        assert bytes(qi)[4:4 + 8 * qi.room] == bytes(pi)[4:4 + 8 * pi.room]
        assert (qh.flow_id, qh.seq, qh.ack, qh.ts, qh.aux, int(qh.flags)) == \
            (ph.flow_id, ph.seq, ph.ack, ph.ts, ph.aux, int(ph.flags))
        assert wire.verify_tag(cfg.key, out)
    # checksums (xdp_host.bpf.c header comment): the IPv4 header checksum is
    # updated incrementally, so it keeps whatever residual the probe had; the
    # L4 checksum is recomputed in full only when the probe's field held
    # exactly the folded pseudo-header sum (CHECKSUM_PARTIAL from a local
    # kernel socket) and the announced L4 length is the parsed one; otherwise
    # it is patched, keeping the probe's residual (a wrong checksum stays
    # wrong, a zero UDP checksum stays zero)
    csum = l4 + (6 if kind == "udp" else 16)
    ip = ip_offset(probe)
    announced = (u16(probe, l4 + 4) if kind == "udp"
                 else u16(probe, ip + 2) - (probe[ip] & 0xF) * 4)
    assert residuals(out, cfg)[0] == residuals(probe, cfg)[0]
    if kind == "udp" and probe[csum:csum + 2] == b"\0\0":
        assert out[csum:csum + 2] == b"\0\0", "a zero UDP checksum must stay zero"
    elif (announced == hpccd_offsets(probe, cfg)[4] - l4
          and u16(probe, csum) == partial_csum(probe, ip, announced)):
        assert residuals(out, cfg)[1] == 0xFFFF, f"{kind.upper()} partial checksum not completed"
    else:
        assert residuals(out, cfg) == residuals(probe, cfg)
    ip_ok, l4_ok = scapy_checksums_ok(probe)
    out_ip_ok, out_l4_ok = scapy_checksums_ok(out)
    if ip_ok:
        assert out_ip_ok, "IPv4 checksum of the PROBE_RESP is wrong"
    if l4_ok and out[csum:csum + 2] != b"\0\0":
        assert out_l4_ok, f"{kind.upper()} checksum of the PROBE_RESP is wrong"


def telem_of(frame: bytes) -> tuple[bytes, Telem]:
    """The hpccd_telem key and value (rx_ns and responses zero) that a
    verified TCP-side PROBE_RESP must produce."""
    p = wire.decode(frame)
    i, h = p[wire.HpccdInt], p[wire.Hpccd]
    key = flow_key(p[IP].dst, p[IP].src, p[TCP].dport, p[TCP].sport, 6)
    hops = b"".join(bytes(x) for x in i.hops[:i.nhop]).ljust(MAX_HOPS * 8, b"\0")
    return key, Telem(hops, 0, h.seq, 0, h.ts, h.flow_id, i.path_id, i.nhop, i.room,
                      int(i.flags))


# ---- the program under test ---------------------------------------------------------

class Xdp:
    """xdp_host loaded with `cfg`; run() is one BPF_PROG_TEST_RUN."""

    def __init__(self, cfg: Cfg = DEFAULT):
        if not OBJ.exists():
            pytest.skip(f"{OBJ.relative_to(ROOT)} is not built (make bpf)")
        self.cfg = cfg
        self.obj = bpf.BpfObject.open(OBJ, rodata={"hpccd_cfg_udp_port": cfg.port,
                                                   "hpccd_cfg_probe_dscp": cfg.dscp,
                                                   "hpccd_cfg_flags": cfg.flags,
                                                   "hpccd_cfg_probe_rate": cfg.probe_rate,
                                                   "hpccd_cfg_probe_burst": cfg.probe_burst})
        try:
            self.obj.load()
            self.prog = self.obj.program(PROG)
            self.cnt = self.obj.map("hpccd_xdp_cnt")
            self.telem = self.obj.map("hpccd_telem")
            if any(cfg.key):
                self.obj.map("hpccd_tag_key").update(0, cfg.key)
            for a in cfg.addrs:
                self.obj.map("hpccd_addrs").update(socket.inet_aton(a), 1)
        except BaseException:
            self.obj.close()
            raise

    def close(self) -> None:
        self.obj.close()

    def run(self, frame: bytes) -> tuple[int, bytes]:
        ret, out, _ = self.prog.test_run(frame)
        return ret, out

    def counters(self) -> list[tuple[int, int]]:
        """(packets, bytes) per slot, summed over the CPUs."""
        out = [(0, 0)] * self.cnt.max_entries
        for k, per_cpu in self.cnt.lookup_batch():
            vals = [struct.unpack(COUNTER_FMT, v) for v in per_cpu]
            out[int.from_bytes(k, "little")] = (sum(v[0] for v in vals),
                                                sum(v[1] for v in vals))
        return out

    def telem_entries(self) -> dict[bytes, Telem]:
        return {k: Telem(*struct.unpack(TELEM_FMT, v)) for k, v in self.telem.lookup_batch()}

    def clear_telem(self) -> None:
        for k in list(self.telem.keys()):
            self.telem.delete(k)


def expect(frame: bytes, cfg: Cfg = DEFAULT) -> tuple[int, int]:
    """(verdict, counter slot) the documentation gives `frame`: the oracle.

    Malformedness from hpccd.core.wire.classify; the rest from docs/wire-format.md
    and the order of ebpf/README.md "xdp_host, in order"; which PASS slot a
    non-hpccd frame lands in from the slot comments of hpccd/kern_user.h."""
    err = wire.classify(frame, cfg.port, cfg.dscp)
    if err == wire.NOT_HPCCD:
        return XDP_PASS, not_hpccd_slot(frame, cfg)
    kind, l4, start, h, _ = hpccd_offsets(frame, cfg)
    tcp = kind == "tcp"
    if tcp and not cfg.flags & CFG_TCP_SIDE:
        return XDP_PASS, C.PASS_OTHER              # TCP-side recognition off
    if err:
        return XDP_DROP, C.DROP_MALFORMED + err    # whatever the destination
    ip = ip_offset(frame)
    if socket.inet_ntoa(frame[ip + 16:ip + 20]) not in cfg.addrs:
        return XDP_PASS, C.PASS_NOT_LOCAL
    typ, ln, keyed = frame[h] & 0xF, u16(frame, h + 2), any(cfg.key)
    if typ == wire.T_PROBE:
        if not cfg.flags & CFG_REFLECT:
            return (XDP_DROP, C.DROP_TCP_PROBE_OFF) if tcp else (XDP_PASS, C.PASS_NO_XSK)
        if ln != wire.TAG_BYTES:
            return XDP_DROP, C.DROP_TAG_SLOT
        if not keyed:
            return XDP_DROP, C.DROP_NO_KEY
        return XDP_TX, C.TX_PROBE_RESP_TCP if tcp else C.TX_PROBE_RESP_UDP
    if tcp:
        if typ != wire.T_PROBE_RESP:
            return XDP_DROP, C.DROP_TCP_TYPE
        if ln != wire.TAG_BYTES:
            return XDP_DROP, C.DROP_TAG_SLOT
        if not keyed:
            return XDP_DROP, C.DROP_NO_KEY
        computed, carried = spec_tag(frame, cfg)
        return XDP_DROP, C.TCP_RESP_STORED if computed == carried else C.DROP_TCP_RESP_TAG
    return XDP_PASS, C.PASS_NO_XSK                 # for AF_XDP; none bound in a test run


def not_hpccd_slot(frame: bytes, cfg: Cfg = DEFAULT) -> int:
    """The PASS slot of a frame that is not hpccd's (hpccd/kern_user.h):
    NOT_IPV4 (not IPv4 over Ethernet with at most one 802.1Q tag), BAD_HDR
    (IPv4/UDP/TCP header truncated or invalid, non-first fragment, UDP
    length < 8), OTHER (other protocols and ports, TCP that is not a
    TCP-side probe: not the probe DSCP, a flag set, no INT magic)."""
    n = len(frame)
    if n < 14:
        return C.PASS_NOT_IPV4
    ethertype, ip = u16(frame, 12), 14
    if ethertype == 0x8100:
        if n < 18:
            return C.PASS_NOT_IPV4
        ethertype, ip = u16(frame, 16), 18
    if ethertype != 0x0800:
        return C.PASS_NOT_IPV4
    if ip + 20 > n:
        return C.PASS_BAD_HDR
    vihl, tos, tot, _, frag, _, proto = struct.unpack_from("!BBHHHBB", frame, ip)
    ihl = (vihl & 0xF) * 4
    if vihl >> 4 != 4 or ihl < 20 or ip + ihl > n or tot < ihl or frag & 0x1FFF:
        return C.PASS_BAD_HDR
    l4, end = ip + ihl, min(ip + tot, n)
    if proto == 17:
        if l4 + 8 > end or u16(frame, l4 + 4) < 8:
            return C.PASS_BAD_HDR
        return C.PASS_OTHER
    if proto == 6 and cfg.flags & CFG_TCP_SIDE and tos >> 2 == cfg.dscp:
        if l4 + 20 > end or frame[l4 + 12] >> 4 < 5 or l4 + (frame[l4 + 12] >> 4) * 4 > end:
            return C.PASS_BAD_HDR
    return C.PASS_OTHER


def vector_expectation(v: dict) -> tuple[int, int]:
    """The documented verdict of a shared vector, from its JSON fields."""
    if v["error"]:
        return XDP_DROP, C.DROP_MALFORMED + v["error"]
    f = v["fields"]
    typ, tcp = f["hdr"]["type"], v["l4"] == "tcp"
    assert f["ip"]["dst"] in LOCAL
    if typ == wire.T_PROBE:
        return XDP_TX, C.TX_PROBE_RESP_TCP if tcp else C.TX_PROBE_RESP_UDP
    if tcp:
        assert typ == wire.T_PROBE_RESP and f["tag_valid"], "no such TCP-side vector"
        return XDP_DROP, C.TCP_RESP_STORED
    return XDP_PASS, C.PASS_NO_XSK


def describe(slot: int) -> str:
    return SLOT_NAME.get(slot, str(slot))


def run_batch(x: Xdp, cases: list[tuple[str, bytes, tuple[int, int]]]) -> None:
    """Run every (description, frame, (verdict, slot)); check each verdict,
    that passed and dropped frames come out unchanged and TX frames are the
    right PROBE_RESP, and that the counter deltas over the batch equal,
    slot by slot, the packets and bytes sent to each slot."""
    want = [[0, 0] for _ in range(C.COUNTERS)]
    failures = []
    before = x.counters()
    for desc, frame, (verdict, slot) in cases:
        want[slot][0] += 1
        want[slot][1] += len(frame)
        ret, out = x.run(frame)
        if ret != verdict:
            failures.append(f"{desc}: verdict {VERDICT.get(ret, ret)}, "
                            f"expected {VERDICT[verdict]} ({describe(slot)})")
        elif verdict == XDP_TX:
            try:
                check_probe_resp(frame, out, x.cfg)
            except AssertionError as e:
                failures.append(f"{desc}: bad PROBE_RESP: {e}")
        elif out != frame:
            failures.append(f"{desc}: {VERDICT[ret]} frame modified")
        if len(failures) >= 20:
            break
    after = x.counters()
    assert not failures, f"{len(failures)}+ of {len(cases)} frames wrong:\n" + "\n".join(failures)
    got = [[a - b for a, b in zip(after[i], before[i])] for i in range(C.COUNTERS)]
    if got != want:
        diff = {describe(i): {"got": got[i], "want": want[i]}
                for i in range(C.COUNTERS) if got[i] != want[i]}
        culprit = _first_miscounted(x, cases)
        pytest.fail(f"counter deltas (packets, bytes) differ: {diff}\nfirst culprit: {culprit}")


def _first_miscounted(x: Xdp, cases) -> str:
    for desc, frame, (_, slot) in cases:
        before = x.counters()
        x.run(frame)
        after = x.counters()
        moved = {describe(i): (after[i][0] - before[i][0], after[i][1] - before[i][1])
                 for i in range(C.COUNTERS) if after[i] != before[i]}
        if moved != {describe(slot): (1, len(frame))}:
            return f"{desc} ({frame.hex()}): counted {moved}, expected {describe(slot)}"
    return "none when run one by one"


def run_one(x: Xdp, frame: bytes) -> tuple[int, bytes, dict[str, tuple[int, int]]]:
    """One test run and the counter slots it moved, by name."""
    before = x.counters()
    ret, out = x.run(frame)
    after = x.counters()
    moved = {describe(i): (after[i][0] - before[i][0], after[i][1] - before[i][1])
             for i in range(C.COUNTERS) if after[i] != before[i]}
    return ret, out, moved


@pytest.fixture(scope="module")
def xdp():
    """xdp_host with the vectors' port, DSCP and tag key, owning both vector addresses."""
    x = Xdp()
    try:
        yield x
    finally:
        x.close()


@pytest.fixture
def make_xdp():
    """Loads xdp_host with other settings; closes every object in teardown."""
    made: list[Xdp] = []

    def make(**kw) -> Xdp:
        made.append(Xdp(Cfg(**kw)))
        return made[-1]
    try:
        yield make
    finally:
        for x in made:
            x.close()


VEC = {v["name"]: bytes.fromhex(v["hex"]) for v in VECTORS}


def by_name(vs):
    return pytest.mark.parametrize("v", vs, ids=[v["name"] for v in vs])


# ---- layout ------------------------------------------------------------------------

def test_counter_layout_matches_header(xdp):
    """The slots parsed from the header are the map's, one per wire error class."""
    assert {e.c_name: int(e) for e in wire.WireErr} == \
        {k: v for k, v in WIRE_ERR.items() if k != "HPCCD_E_MAX"}
    assert xdp.cnt.max_entries == C.COUNTERS
    assert xdp.cnt.percpu and xdp.cnt.value_size == struct.calcsize(COUNTER_FMT)
    assert C.DROP_MALFORMED_LAST - C.DROP_MALFORMED == max(wire.WireErr)
    assert sorted(SLOT_NAME) == list(range(C.COUNTERS)), "a slot without a name"
    assert xdp.telem.value_size == struct.calcsize(TELEM_FMT)
    assert xdp.telem.key_size == 16


def test_configuration_takes_the_queues_the_xskmap_holds(xdp):
    """The configuration's queue limit is the size of the loaded program's XSKMAP
    (HPCCD_XSKS_MAX of include/hpccd/kern_user.h, read through hpccd._cc): a
    configured queue always has a slot for its AF_XDP socket."""
    from hpccd.agent import config

    assert xdp.obj.map("hpccd_xsks").max_entries == config.XSKS_MAX
    base = '[[interfaces]]\nname = "eth0"\nqueues = [%d]\n'
    assert config.loads(base % (config.XSKS_MAX - 1), "hpccd.toml").interfaces[0].queues == \
        (config.XSKS_MAX - 1,)
    with pytest.raises(config.ConfigError, match="out of range"):
        config.loads(base % config.XSKS_MAX, "hpccd.toml")


# ---- the shared vectors --------------------------------------------------------------

@by_name(VECTORS)
def test_vector(xdp, v):
    frame = VEC[v["name"]]
    verdict, slot = vector_expectation(v)
    assert expect(frame) == (verdict, slot), "the oracle disagrees with the vector's fields"
    xdp.clear_telem()
    t0 = time.monotonic_ns()
    ret, out, moved = run_one(xdp, frame)
    t1 = time.monotonic_ns()
    assert VERDICT.get(ret, ret) == VERDICT[verdict], v["description"]
    assert moved == {describe(slot): (1, len(frame))}
    if verdict == XDP_TX:
        check_probe_resp(frame, out)
    else:
        assert out == frame
    entries = xdp.telem_entries()
    if slot == C.TCP_RESP_STORED:
        key, want = telem_of(frame)
        assert list(entries) == [key]
        got = entries[key]
        assert t0 <= got.rx_ns <= t1
        assert got._replace(rx_ns=0) == want._replace(responses=1)
        f = v["fields"]
        assert (got.probe_seq, got.ts_echo, got.flow_id) == \
            (f["hdr"]["seq"], f["hdr"]["ts"], f["hdr"]["flow_id"])
        assert (got.nhop, got.room, got.path_id, got.int_flags) == \
            (f["int"]["nhop"], f["int"]["room"], f["int"]["path_id"], f["int"]["flags"])
    else:
        assert entries == {}


def test_vectors_as_one_batch(xdp):
    run_batch(xdp, [(v["name"], VEC[v["name"]], vector_expectation(v)) for v in VECTORS])


# ---- TCP-side PROBE_RESP: telemetry -------------------------------------------------------

def test_tcp_probe_resp_counts_responses(xdp):
    frame = VEC["tcp_probe_resp"]
    key, want = telem_of(frame)
    xdp.clear_telem()
    stamps = []
    for n in (1, 2, 3):
        t0 = time.monotonic_ns()
        ret, out, moved = run_one(xdp, frame)
        assert (ret, moved) == (XDP_DROP, {"TCP_RESP_STORED": (1, len(frame))})
        got = xdp.telem_entries()[key]
        assert got._replace(rx_ns=0) == want._replace(responses=n)
        assert t0 <= got.rx_ns <= time.monotonic_ns()
        stamps.append(got.rx_ns)
    assert stamps == sorted(stamps)
    xdp.clear_telem()


def _tcp_resp(nhop: int, room: int, int_flags: int, unused: bytes) -> bytes:
    """A TCP-side PROBE_RESP like the vector's, with `nhop` of `room` hop
    records stamped (distinct words), `unused` (8 bytes) in the other
    slots, the given INT flags, a correct tag and correct checksums."""
    base = VEC["tcp_probe_resp"]
    _, l4, start, h, end = hpccd_offsets(base)
    hops = b"".join(struct.pack("!II", 0x70000000 | i << 20 | i, 0x1111 * (i + 1))
                    for i in range(nhop)) + unused * (room - nhop)
    path_id = u16(base, start + 2) & 0x0FFF
    payload = (bytes([wire.INT_MAGIC << 4 | 1, nhop << 4 | room])
               + struct.pack("!H", int_flags << 12 | path_id) + hops + base[h:h + 32] + bytes(8))
    p = Ether(base[:l4 + 20])
    p[TCP].remove_payload()
    p = Ether(bytes(p / Raw(payload)))
    p[IP].len = len(bytes(p[IP]))
    b = bytearray(bytes(p))
    tag, _ = spec_tag(bytes(b))
    b[-8:] = tag
    return _rechecksum(Ether(bytes(b)))


TCP_RESPS = [(0, 0, 0x0, b"\0" * 8), (0, 5, 0x0, b"\xab" * 8), (2, 5, 0x0, b"\xab" * 8),
             (5, 5, 0x4, b""), (3, 8, 0x0, b"\xff" * 8), (8, 8, 0x4, b"")]


@pytest.mark.parametrize("nhop,room,int_flags,unused", TCP_RESPS,
                         ids=[f"nhop{n}_room{r}_flags{f:x}" for n, r, f, _ in TCP_RESPS])
def test_tcp_probe_resp_telemetry(xdp, nhop, room, int_flags, unused):
    """Only the nHop stamped records reach the map (unused slots, whatever
    they hold, are stored as zero), up to the 8 of a full room; OVERFLOW
    and pathID are carried."""
    frame = _tcp_resp(nhop, room, int_flags, unused)
    assert wire.classify(frame) == 0 and wire.verify_tag(KEY, frame)
    assert scapy_checksums_ok(frame) == (True, True)
    xdp.clear_telem()
    ret, out, moved = run_one(xdp, frame)
    assert (ret, moved) == (XDP_DROP, {"TCP_RESP_STORED": (1, len(frame))})
    key, want = telem_of(frame)
    got = xdp.telem_entries()[key]
    assert got._replace(rx_ns=0) == want._replace(responses=1)
    assert got.hops[8 * nhop:] == bytes(8 * (MAX_HOPS - nhop))
    start = hpccd_offsets(frame)[2]
    assert got.hops[:8 * nhop] == frame[start + 4:start + 4 + 8 * nhop]
    assert (got.nhop, got.room, got.int_flags) == (nhop, room, int_flags)
    xdp.clear_telem()


def test_tcp_probe_resp_bad_tag_not_stored(xdp):
    xdp.clear_telem()
    for i in (-1, -8):                  # last and first byte of the tag
        frame = bytearray(VEC["tcp_probe_resp"])
        frame[i] ^= 0x01
        ret, out, moved = run_one(xdp, bytes(frame))
        assert (ret, moved) == (XDP_DROP, {"DROP_TCP_RESP_TAG": (1, len(frame))})
        assert out == frame
    # a hop word changed after tagging: tag no longer covers it
    frame = bytearray(VEC["tcp_probe_resp"])
    frame[14 + 20 + 20 + 4] ^= 0x80
    assert wire.classify(bytes(frame)) == 0
    ret, _, moved = run_one(xdp, bytes(frame))
    assert (ret, moved) == (XDP_DROP, {"DROP_TCP_RESP_TAG": (1, len(frame))})
    assert xdp.telem_entries() == {}


def test_tcp_probe_round_trip(xdp):
    """The response this program writes to a TCP-side probe is accepted by
    the same program at the prober and its telemetry is the probe's."""
    xdp.clear_telem()
    probe = VEC["tcp_probe"]
    ret, resp = xdp.run(probe)
    assert ret == XDP_TX
    ret, _, moved = run_one(xdp, resp)
    assert (ret, moved) == (XDP_DROP, {"TCP_RESP_STORED": (1, len(resp))})
    key, want = telem_of(resp)
    p = wire.decode(probe)
    assert key == flow_key(p[IP].src, p[IP].dst, p[TCP].sport, p[TCP].dport, 6)
    got = xdp.telem_entries()[key]
    assert got._replace(rx_ns=0) == want._replace(responses=1)
    nhop = p[wire.HpccdInt].nhop
    assert got.hops == bytes(p[wire.HpccdInt])[4:4 + 8 * nhop].ljust(MAX_HOPS * 8, b"\0")
    xdp.clear_telem()


def test_tcp_probe_resp_telemetry_map_full(make_xdp):
    x = make_xdp()
    frame = VEC["tcp_probe_resp"]
    key, _ = telem_of(frame)
    filler = {struct.pack("!I", i).rjust(16, b"\xee"): bytes(x.telem.value_size)
              for i in range(x.telem.max_entries)}
    assert x.telem.update_batch(filler) == x.telem.max_entries
    ret, out, moved = run_one(x, frame)
    assert (ret, moved) == (XDP_DROP, {"DROP_TCP_RESP_FULL": (1, len(frame))})
    assert x.telem.lookup(key) is None
    # with room for one more it is stored; the map is then full again, and
    # the next response still replaces the flow's existing entry
    x.telem.delete(next(iter(filler)))
    assert run_one(x, frame)[2] == {"TCP_RESP_STORED": (1, len(frame))}
    assert len(list(x.telem.keys())) == x.telem.max_entries
    assert run_one(x, frame)[2] == {"TCP_RESP_STORED": (1, len(frame))}
    assert Telem(*struct.unpack(TELEM_FMT, x.telem.lookup(key))).responses == 2


# ---- probe reflection: edge cases -----------------------------------------------------------

def _probe(base: str = "probe_udp", **ip_kw) -> Ether:
    p = Ether(VEC[base])
    for k, val in ip_kw.items():
        setattr(p[IP], k, val)
    del p[IP].chksum
    return p


def _rechecksum(p: Ether) -> bytes:
    del p[IP].chksum
    if UDP in p:
        del p[UDP].chksum
    if TCP in p:
        del p[TCP].chksum
    return bytes(p)


def _vlan(frame: bytes, vid: int = 5) -> bytes:
    p = Ether(frame)
    return bytes(Ether(src=p.src, dst=p.dst) / Dot1Q(vlan=vid) / p[IP])


def _tcp_probe_with_options() -> bytes:
    p = Ether(VEC["tcp_probe"])
    payload = bytes(p[TCP].payload)
    p[TCP].remove_payload()
    p[TCP].options = [("NOP", None), ("NOP", None), ("Timestamp", (1, 2))]
    p[TCP].dataofs = None
    p = p / Raw(payload)
    del p[IP].len
    del p[IP].chksum
    return _rechecksum(Ether(bytes(p)))


def _stamped(base: str, flags: int) -> bytes:
    b = bytearray(VEC[base])
    _, _, start, _, _ = hpccd_offsets(bytes(b))
    b[start + 2] = (b[start + 2] & 0x0F) | flags << 4
    return _rechecksum(Ether(bytes(b)))


def _zero_udp_csum(frame: bytes) -> bytes:
    p = Ether(frame)
    p[UDP].chksum = 0
    return bytes(p)


def _ports(frame: bytes, sport: int, dport: int) -> bytes:
    p = Ether(frame)
    p[UDP].sport, p[UDP].dport = sport, dport
    return _rechecksum(p)


def _ip_options(frame: bytes) -> bytes:
    """The frame with a 4-byte IPv4 option (NOP NOP NOP EOL) inserted."""
    ip = ip_offset(frame)
    b = bytearray(frame[:ip + 20] + b"\x01\x01\x01\x00" + frame[ip + 20:])
    b[ip] = 0x46
    struct.pack_into("!H", b, ip + 2, u16(frame, ip + 2) + 4)
    p = Ether(bytes(b))
    del p[IP].chksum
    return _rechecksum(p)


REFLECT_CASES = [
    ("UDP probe, CE-marked: CE becomes ECT(0)", lambda: _rechecksum(_probe(tos=0x03))),
    ("UDP probe, DSCP 10 and CE: DSCP kept", lambda: _rechecksum(_probe(tos=10 << 2 | 3))),
    ("UDP probe, not-ECT, TTL already 64", lambda: _rechecksum(_probe(tos=0, ttl=64))),
    ("UDP probe, TTL 1", lambda: _rechecksum(_probe(ttl=1))),
    ("UDP probe, TTL 255", lambda: _rechecksum(_probe(ttl=255))),
    ("UDP probe, zero UDP checksum stays zero", lambda: _zero_udp_csum(VEC["probe_udp"])),
    ("UDP probe from the hpccd port to another", lambda: _ports(VEC["probe_udp"], PORT, 40000)),
    ("UDP probe from the hpccd port to the hpccd port",
     lambda: _ports(VEC["probe_udp"], PORT, PORT)),
    ("UDP probe in an 802.1Q tag", lambda: _vlan(VEC["probe_udp"])),
    ("UDP probe with IPv4 options (IHL 6)", lambda: _ip_options(VEC["probe_udp"])),
    ("UDP probe with COLLECT|OVERFLOW: OVERFLOW kept", lambda: _stamped("probe_udp", 0xC)),
    ("UDP probe with COLLECT clear", lambda: _stamped("probe_udp", 0x0)),
    ("UDP probe with Ethernet padding", lambda: VEC["probe_udp"] + bytes(10)),
    ("TCP probe, CE-marked", lambda: _rechecksum(_probe("tcp_probe", tos=DSCP << 2 | 3))),
    ("TCP probe, TTL 3", lambda: _rechecksum(_probe("tcp_probe", ttl=3))),
    ("TCP probe with TCP options (doff 8)", _tcp_probe_with_options),
    ("TCP probe in an 802.1Q tag", lambda: _vlan(VEC["tcp_probe"])),
    ("TCP probe with IPv4 options (IHL 6)", lambda: _ip_options(VEC["tcp_probe"])),
]


@pytest.mark.parametrize("make", [c[1] for c in REFLECT_CASES], ids=[c[0] for c in REFLECT_CASES])
def test_reflect(xdp, make):
    frame = make()
    verdict, slot = expect(frame)
    assert verdict == XDP_TX
    assert scapy_checksums_ok(frame)[0]
    ret, out, moved = run_one(xdp, frame)
    assert ret == XDP_TX
    assert moved == {describe(slot): (1, len(frame))}
    check_probe_resp(frame, out)
    assert scapy_checksums_ok(out)[0]
    if UDP not in Ether(frame) or Ether(frame)[UDP].chksum:
        assert scapy_checksums_ok(out) == (True, True)


# ---- one reflector: the engine's PROBE_RESP is xdp_host's, byte for byte ------------------

def _partial(frame: bytes) -> bytes:
    """The probe with its L4 checksum CHECKSUM_PARTIAL (the folded pseudo-header
    sum), as a kernel socket hands it over a veth."""
    kind, l4, _, _, end = hpccd_offsets(frame)
    b = bytearray(frame)
    struct.pack_into("!H", b, l4 + (6 if kind == "udp" else 16),
                     partial_csum(frame, ip_offset(frame), end - l4))
    return bytes(b)


def _bad_l4_csum(frame: bytes) -> bytes:
    kind, l4, _, _, _ = hpccd_offsets(frame)
    b = bytearray(frame)
    b[l4 + (6 if kind == "udp" else 16)] ^= 0x5A
    return bytes(b)


ONE_REFLECTOR_CASES = REFLECT_CASES + [
    ("UDP probe, CHECKSUM_PARTIAL: recomputed", lambda: _partial(VEC["probe_udp"])),
    ("TCP probe, CHECKSUM_PARTIAL: recomputed", lambda: _partial(VEC["tcp_probe"])),
    ("UDP probe, wrong UDP checksum stays wrong", lambda: _bad_l4_csum(VEC["probe_udp"])),
    ("TCP probe, wrong TCP checksum stays wrong", lambda: _bad_l4_csum(VEC["tcp_probe"])),
]


@pytest.mark.parametrize("make", [c[1] for c in ONE_REFLECTOR_CASES],
                         ids=[c[0] for c in ONE_REFLECTOR_CASES])
def test_engine_reflector_writes_what_xdp_host_writes(xdp, make):
    """hpccd_wire_reflect_probe (what the engine answers with when xdp_host leaves
    probes to it, fastpath/cc/wire.c) and xdp_host write the same PROBE_RESP:
    both run include/hpccd/build.h hpccd__reflect_probe, the checksum of a
    CHECKSUM_PARTIAL probe summed by the kernel's helper in one and by the
    userspace checksum (include/hpccd/csum.h) in the other."""
    from hpccd._cc import ffi as cffi, lib as clib

    frame = make()
    ret, out, _ = run_one(xdp, frame)
    assert ret == XDP_TX
    check_probe_resp(frame, out)
    buf = cffi.new("uint8_t[]", len(frame))
    cffi.memmove(buf, frame, len(frame))
    assert clib.hpccd_wire_reflect_probe(KEY, buf, len(frame), PORT, DSCP) == 0
    mine = cffi.buffer(buf, len(frame))[:]
    assert mine == out, f"differs at bytes {[i for i in range(len(out)) if mine[i] != out[i]]}"


# ---- frames that are not hpccd's, and well-formed ones that are not used ------------------

E = Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
ME, PEER = LOCAL[0], LOCAL[1]


def _udp_len(frame: bytes, ulen: int) -> bytes:
    b = bytearray(frame)
    struct.pack_into("!H", b, 14 + 20 + 4, ulen)
    return bytes(b)


def _ip_field(frame: bytes, off: int, fmt: str, value: int) -> bytes:
    b = bytearray(frame)
    struct.pack_into(fmt, b, 14 + off, value)
    return bytes(b)


def _set_type(base: str, typ: int, ln: int | None = None, extra: bytes = b"") -> bytes:
    """A valid vector with another hpccd type (and len, with `extra` bytes
    appended to the body), all lengths kept consistent."""
    frame = VEC[base]
    kind, l4, start, h, end = hpccd_offsets(frame)
    b = bytearray(frame[:end] + extra)
    b[h] = (b[h] & 0xF0) | typ
    if ln is not None:
        struct.pack_into("!H", b, h + 2, ln)
    ip = 14
    struct.pack_into("!H", b, ip + 2, len(b) - ip)
    if kind == "udp":
        struct.pack_into("!H", b, l4 + 4, len(b) - l4)
    return _rechecksum(Ether(bytes(b)))


def _first_fragment(frame: bytes, cut: int) -> bytes:
    """The first fragment of `frame`: MF set, the last `cut` bytes missing."""
    b = bytearray(frame[:len(frame) - cut])
    struct.pack_into("!HH", b, 14 + 2, u16(frame, 16) - cut, 0x2000)
    return bytes(b)


def _tcp_flags(p: Ether, flags: str) -> Ether:
    q = Ether(bytes(p))
    q[TCP].flags = flags
    return q


def _tcp_payload(p: Ether, payload: bytes) -> bytes:
    q = Ether(bytes(p))
    q[TCP].remove_payload()
    q = q / Raw(payload) if payload else q
    del q[IP].len
    del q[IP].chksum
    return _rechecksum(Ether(bytes(q)))


def _grow(base: str, size: int) -> bytes:
    """A valid DATA vector with its payload grown to make a `size`-byte frame."""
    frame = VEC[base]
    _, _, _, h, end = hpccd_offsets(frame)
    extra = size - end
    return _set_type(base, wire.T_DATA, u16(frame, h + 2) + extra, bytes(extra))


def _probe_len0(base: str) -> bytes:
    """A PROBE whose len is 0 and that carries no tag slot."""
    frame = VEC[base]
    kind, l4, start, h, end = hpccd_offsets(frame)
    b = bytearray(frame[:h + 32])
    struct.pack_into("!H", b, h + 2, 0)
    struct.pack_into("!H", b, 16, len(b) - 14)
    struct.pack_into("!H", b, l4 + 4, len(b) - l4)
    return _rechecksum(Ether(bytes(b)))


@dataclasses.dataclass
class Case:
    desc: str
    frame: bytes
    verdict: int
    slot: int


def _cases() -> list[Case]:
    tcp_probe = Ether(VEC["tcp_probe"])
    cases = [
        Case("ARP", bytes(E / ARP(pdst=ME)), XDP_PASS, C.PASS_NOT_IPV4),
        Case("IPv6 UDP to the hpccd port",
             bytes(E / IPv6() / UDP(dport=PORT) / VEC["probe_udp"][42:]), XDP_PASS,
             C.PASS_NOT_IPV4),
        Case("Ethernet header only", VEC["probe_udp"][:14], XDP_PASS, C.PASS_BAD_HDR),
        Case("802.1Q tag cut", bytes(E / Dot1Q(vlan=5))[:16], XDP_PASS, C.PASS_NOT_IPV4),
        Case("802.1Q ARP", bytes(E / Dot1Q(vlan=5) / ARP()), XDP_PASS, C.PASS_NOT_IPV4),
        Case("two 802.1Q tags (not parsed)", bytes(E / Dot1Q(vlan=5) / Dot1Q(vlan=6) / IP(
            dst=ME) / UDP(dport=PORT) / VEC["probe_udp"][42:]), XDP_PASS, C.PASS_NOT_IPV4),
        Case("IPv4 header cut at 19 bytes", VEC["probe_udp"][:14 + 19], XDP_PASS, C.PASS_BAD_HDR),
        Case("IPv4 version 6 in an IPv4 EtherType",
             _ip_field(VEC["probe_udp"], 0, "!B", 0x65), XDP_PASS, C.PASS_BAD_HDR),
        Case("IPv4 IHL 4", _ip_field(VEC["probe_udp"], 0, "!B", 0x44), XDP_PASS, C.PASS_BAD_HDR),
        Case("IPv4 IHL 15 beyond the frame", _ip_field(VEC["err_int_trunc_empty"], 0, "!B", 0x4F),
             XDP_PASS, C.PASS_BAD_HDR),
        Case("IPv4 total length 19 (< header)", _ip_field(VEC["probe_udp"], 2, "!H", 19),
             XDP_PASS, C.PASS_BAD_HDR),
        Case("IPv4 non-first fragment of a probe", _ip_field(VEC["probe_udp"], 6, "!H", 0x2001),
             XDP_PASS, C.PASS_BAD_HDR),
        Case("UDP header cut by the IPv4 total length",
             _ip_field(VEC["probe_udp"], 2, "!H", 27), XDP_PASS, C.PASS_BAD_HDR),
        Case("UDP header cut by the frame end", VEC["probe_udp"][:14 + 20 + 7], XDP_PASS,
             C.PASS_BAD_HDR),
        *[Case(f"UDP length {n} (< 8)", _udp_len(VEC["probe_udp"], n), XDP_PASS, C.PASS_BAD_HDR)
          for n in range(8)],
        Case("UDP to another port", bytes(E / IP(dst=ME) / UDP(sport=40000, dport=53) / (
            VEC["probe_udp"][42:])), XDP_PASS, C.PASS_OTHER),
        Case("UDP to the hpccd port - 1", _ports(VEC["probe_udp"], 49153, PORT - 1), XDP_PASS,
             C.PASS_OTHER),
        Case("ICMP echo", bytes(E / IP(dst=ME) / ICMP() / b"ping"), XDP_PASS, C.PASS_OTHER),
        Case("GRE (protocol 47)", bytes(E / IP(dst=ME, proto=47) / (b"\0" * 40)), XDP_PASS,
             C.PASS_OTHER),
        Case("TCP data segment", bytes(E / IP(dst=ME) / TCP(flags="PA") / (b"x" * 100)),
             XDP_PASS, C.PASS_OTHER),
        Case("TCP probe with DSCP 0", _rechecksum(_probe("tcp_probe", tos=0)), XDP_PASS,
             C.PASS_OTHER),
        Case("TCP probe with DSCP 46", _rechecksum(_probe("tcp_probe", tos=46 << 2)), XDP_PASS,
             C.PASS_OTHER),
        *[Case(f"TCP probe with flag {fl}", _rechecksum(_tcp_flags(tcp_probe, fl)), XDP_PASS,
               C.PASS_OTHER) for fl in ("F", "S", "R", "P", "A", "U", "E", "C", "N")],
        Case("TCP DSCP 45, no flag, payload without the INT magic",
             _tcp_payload(tcp_probe, b"\xd1" + bytes(83)), XDP_PASS, C.PASS_OTHER),
        Case("TCP DSCP 45, no flag, no payload", _tcp_payload(tcp_probe, b""), XDP_PASS,
             C.PASS_OTHER),
        Case("TCP DSCP 45, header cut", VEC["tcp_probe"][:14 + 20 + 19], XDP_PASS,
             C.PASS_BAD_HDR),
        Case("TCP DSCP 45, data offset 4", _ip_field(VEC["tcp_probe"], 20 + 12, "!B", 0x40),
             XDP_PASS, C.PASS_BAD_HDR),
        Case("TCP DSCP 45, data offset 15 beyond the IP payload",
             _ip_field(_tcp_payload(tcp_probe, b"\xc1" * 30), 20 + 12, "!B", 0xF0),
             XDP_PASS, C.PASS_BAD_HDR),
        Case("TCP DSCP 0, header cut (not a probe: not looked at)",
             _rechecksum(_probe("tcp_probe", tos=0))[:14 + 20 + 10], XDP_PASS, C.PASS_OTHER),
        # hpccd, but not for this host
        Case("UDP probe to a foreign address", _rechecksum(_probe(dst=FOREIGN)), XDP_PASS,
             C.PASS_NOT_LOCAL),
        Case("TCP probe to a foreign address", _rechecksum(_probe("tcp_probe", dst=FOREIGN)),
             XDP_PASS, C.PASS_NOT_LOCAL),
        Case("TCP PROBE_RESP to a foreign address",
             _rechecksum(_probe("tcp_probe_resp", dst=FOREIGN)), XDP_PASS, C.PASS_NOT_LOCAL),
        Case("DATA to a foreign address", _rechecksum(_probe("data_room5_nhop2", dst=FOREIGN)),
             XDP_PASS, C.PASS_NOT_LOCAL),
        Case("malformed (nHop > room) to a foreign address: dropped all the same",
             _ip_field(_rechecksum(_probe("err_nhop_gt_room", dst=FOREIGN)), 0, "!B", 0x45),
             XDP_DROP, C.DROP_MALFORMED + wire.WireErr.NHOP),
        # well formed, not acted on (docs/wire-format.md: PROBE/PROBE_RESP need len 8)
        Case("UDP PROBE with len 16", _set_type("probe_udp", wire.T_PROBE, 16, bytes(8)),
             XDP_DROP, C.DROP_TAG_SLOT),
        Case("UDP PROBE with len 0 and no tag slot", _probe_len0("probe_udp"), XDP_DROP,
             C.DROP_TAG_SLOT),
        Case("TCP PROBE with len 16", _set_type("tcp_probe", wire.T_PROBE, 16, bytes(8)),
             XDP_DROP, C.DROP_TAG_SLOT),
        Case("TCP PROBE_RESP with len 16",
             _set_type("tcp_probe_resp", wire.T_PROBE_RESP, 16, bytes(8)), XDP_DROP,
             C.DROP_TAG_SLOT),
        Case("UDP PROBE_RESP with len 16: for userspace",
             _set_type("probe_resp_udp", wire.T_PROBE_RESP, 16, bytes(8)), XDP_PASS,
             C.PASS_NO_XSK),
        Case("UDP NOTIFY with len 8: for userspace",
             _set_type("probe_resp_udp", wire.T_NOTIFY), XDP_PASS, C.PASS_NO_XSK),
        *[Case(f"TCP-side {wire.TYPES[t]}", _set_type("tcp_probe", t), XDP_DROP,
               C.DROP_TCP_TYPE) for t in (wire.T_DATA, wire.T_ACK, wire.T_NACK, wire.T_NOTIFY)],
        # fragments and oversize frames
        Case("first fragment of a probe (MF, 8 bytes short): len check fails",
             _first_fragment(VEC["probe_udp"], 8), XDP_DROP,
             C.DROP_MALFORMED + wire.WireErr.LEN),
        Case("probe with MF set and nothing missing", _first_fragment(VEC["probe_udp"], 0),
             XDP_TX, C.TX_PROBE_RESP_UDP),
        Case("DATA of 3300 bytes", _grow("data_room5_nhop2", 3300), XDP_PASS, C.PASS_NO_XSK),
        Case("DATA with 1000 bytes of trailing Ethernet padding",
             VEC["data_room5_nhop2"] + bytes(1000), XDP_PASS, C.PASS_NO_XSK),
        Case("PROBE whose UDP length runs past the IP payload (region cut at the IP end)",
             _udp_len(VEC["probe_udp"], u16(VEC["probe_udp"], 38) + 1), XDP_TX,
             C.TX_PROBE_RESP_UDP),
    ]
    return cases


CASES = _cases()


@pytest.mark.parametrize("case", CASES, ids=[c.desc for c in CASES])
def test_case(xdp, case):
    frame = case.frame
    assert len(frame) >= MIN_FRAME
    assert expect(frame) == (case.verdict, case.slot), "the oracle disagrees with the table"
    ret, out, moved = run_one(xdp, frame)
    assert VERDICT.get(ret, ret) == VERDICT[case.verdict]
    assert moved == {describe(case.slot): (1, len(frame))}
    if case.verdict == XDP_TX:
        check_probe_resp(frame, out)
    else:
        assert out == frame


def test_cases_as_one_batch(xdp):
    run_batch(xdp, [(c.desc, c.frame, (c.verdict, c.slot)) for c in CASES])


# ---- malformed corpus -------------------------------------------------------------------------

def _int_byte(frame: bytes, i: int, value: int) -> bytes:
    _, _, start, _, _ = hpccd_offsets(frame)
    b = bytearray(frame)
    b[start + i] = value
    return bytes(b)


def _hdr_byte(frame: bytes, value_of: Callable[[int], int]) -> bytes:
    _, _, _, h, _ = hpccd_offsets(frame)
    b = bytearray(frame)
    b[h] = value_of(b[h])
    return bytes(b)


def _hdr_len(frame: bytes, delta: int) -> bytes:
    _, _, _, h, _ = hpccd_offsets(frame)
    b = bytearray(frame)
    struct.pack_into("!H", b, h + 2, (u16(frame, h + 2) + delta) & 0xFFFF)
    return bytes(b)


def _nhop_room(frame: bytes, nhop: int | None = None, room: int | None = None) -> bytes:
    _, _, start, _, _ = hpccd_offsets(frame)
    b = frame[start + 1]
    nhop = b >> 4 if nhop is None else nhop
    room = b & 0xF if room is None else room
    return _int_byte(frame, 1, nhop << 4 | room)


def _ip_tot(frame: bytes, delta: int) -> bytes:
    ip = ip_offset(frame)
    b = bytearray(frame)
    struct.pack_into("!H", b, ip + 2, u16(frame, ip + 2) + delta)
    return bytes(b)


def _udp_len_delta(frame: bytes, delta: int) -> bytes:
    _, l4, _, _, _ = hpccd_offsets(frame)
    b = bytearray(frame)
    struct.pack_into("!H", b, l4 + 4, u16(frame, l4 + 4) + delta)
    return bytes(b)


def _room(frame: bytes) -> int:
    return frame[hpccd_offsets(frame)[2] + 1] & 0xF


def _one_short(v: dict) -> int:
    """The class of a vector whose L4 region ends one byte early: the len
    check fails, unless the body was empty and the cut is in the header."""
    return E_.LEN if v["fields"]["hdr"]["len"] else E_.HDR_TRUNC


E_ = wire.WireErr
NOT_HPCCD = wire.NOT_HPCCD

# (name, vectors it applies to, frames of a vector, expected class, or NOT_HPCCD)
CORRUPTIONS: list[tuple[str, Callable[[dict], bool], Callable[[bytes], list[bytes]],
                        Callable[[dict], int]]] = [
    ("nHop = room + 1", lambda v: True,
     lambda f: [_nhop_room(f, nhop=_room(f) + 1)], lambda v: E_.NHOP),
    ("nHop = 15", lambda v: True, lambda f: [_nhop_room(f, nhop=15)], lambda v: E_.NHOP),
    ("room 9..15", lambda v: True,
     lambda f: [_nhop_room(f, room=r) for r in range(9, 16)], lambda v: E_.ROOM),
    ("INT magic not 0xC", lambda v: True,
     lambda f: [_int_byte(f, 0, m << 4 | 1) for m in range(16) if m != wire.INT_MAGIC],
     # the magic is one of the three marks of a TCP-side probe
     lambda v: NOT_HPCCD if v["l4"] == "tcp" else E_.MAGIC),
    ("INT version not 1", lambda v: True,
     lambda f: [_int_byte(f, 0, wire.INT_MAGIC << 4 | n) for n in range(16) if n != 1],
     lambda v: E_.INT_VERSION),
    ("hpccd version not 1", lambda v: True,
     lambda f: [_hdr_byte(f, lambda b, n=n: n << 4 | b & 0xF) for n in range(16) if n != 1],
     lambda v: E_.VERSION),
    ("type not in 1..7", lambda v: True,
     lambda f: [_hdr_byte(f, lambda b, t=t: b & 0xF0 | t) for t in (0, 8, 9, 12, 15)],
     lambda v: E_.TYPE),
    ("len + 1", lambda v: True, lambda f: [_hdr_len(f, 1)], lambda v: E_.LEN),
    ("len - 1", lambda v: True, lambda f: [_hdr_len(f, -1)], lambda v: E_.LEN),
    ("UDP length - 1", lambda v: v["l4"] == "udp", lambda f: [_udp_len_delta(f, -1)],
     _one_short),
    ("UDP length 0..7", lambda v: v["l4"] == "udp",
     lambda f: [_udp_len(f, n) for n in range(8)], lambda v: NOT_HPCCD),
    ("IPv4 total length - 1", lambda v: True, lambda f: [_ip_tot(f, -1)], _one_short),
    ("last byte missing", lambda v: not v["name"].startswith("nack_eth_padding"),
     lambda f: [f[:-1]], _one_short),
]


def _corruption_cases(name, applies, make, want):
    out = []
    for v in VALID:
        if not applies(v):
            continue
        for i, f in enumerate(make(VEC[v["name"]])):
            out.append((f"{v['name']} #{i}", f, want(v)))
    return out


@pytest.mark.parametrize("corruption", CORRUPTIONS, ids=[c[0] for c in CORRUPTIONS])
def test_malformed_corpus(xdp, corruption):
    cases = _corruption_cases(*corruption)
    assert cases
    batch = []
    for desc, frame, want in cases:
        assert wire.classify(frame) == want, f"{desc}: the generator does not make {want!r}"
        batch.append((desc, frame, expect(frame)))
        assert batch[-1][2][0] == (XDP_PASS if want == NOT_HPCCD else XDP_DROP)
    run_batch(xdp, batch)
    xdp.clear_telem()


@by_name(VECTORS)
def test_truncated_at_every_byte(xdp, v):
    """Every cut from the Ethernet header (the shortest frame a test run
    takes) to one byte short of the vector: passed when the cut leaves no
    hpccd packet, dropped in the class classify gives when it leaves a
    malformed one, answered when only Ethernet padding was cut."""
    frame = VEC[v["name"]]
    cases = [(f"{v['name']}[:{n}]", frame[:n], expect(frame[:n]))
             for n in range(MIN_FRAME, len(frame))]
    kinds = collections.Counter(e[0] for _, _, e in cases)
    if v["error"] == 0 and v["name"] != "nack_eth_padding_valid":
        assert kinds[XDP_DROP] > 0 and kinds[XDP_PASS] > 0
    run_batch(xdp, cases)
    xdp.clear_telem()


# ---- seeded random mutations ------------------------------------------------------------------

SEED = 0x6870_6363   # "hpcc"
N_RANDOM = 600


def _mutate(rng: random.Random, frame: bytes) -> bytes:
    b = bytearray(frame)
    region = wire.l4_region(frame)
    start, end = (region[2], region[3]) if region else (0, len(b))
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(9)
        if op == 0 and b:                                   # flip a bit anywhere
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1 and b:                                 # any byte, any value
            b[rng.randrange(len(b))] = rng.randrange(256)
        elif op == 2 and start < min(end, len(b)):          # a byte of the hpccd part
            b[rng.randrange(start, min(end, len(b)))] = rng.randrange(256)
        elif op == 3 and start + 2 <= len(b):               # nHop/room
            b[start + 1] = rng.randrange(256)
        elif op == 4:                                       # cut anywhere
            del b[rng.randrange(MIN_FRAME, max(MIN_FRAME + 1, len(b))):]
        elif op == 5:                                       # append
            b += bytes(rng.randrange(256) for _ in range(rng.randint(1, 40)))
        elif op == 6 and len(b) >= 18:                      # IPv4 total length
            struct.pack_into("!H", b, 16, max(0, u16(b, 16) + rng.randint(-12, 12)))
        elif op == 7 and len(b) >= 40:                      # UDP length (or TCP seq)
            struct.pack_into("!H", b, 38, max(0, u16(b, 38) + rng.randint(-12, 12)))
        elif op == 8 and start + 40 <= len(b):              # hpccd len, the last hdr word
            h = start + 4 + 8 * (b[start + 1] & 0xF)
            if h + 4 <= len(b):
                struct.pack_into("!H", b, h + 2, (u16(b, h + 2) + rng.randint(-3, 3)) & 0xFFFF)
    if len(b) < MIN_FRAME:
        b += bytes(MIN_FRAME - len(b))
    return bytes(b)


def _random_corpus() -> list[tuple[str, bytes]]:
    rng = random.Random(SEED)
    bases = [VEC[v["name"]] for v in VALID]
    out = []
    for i in range(N_RANDOM):
        base = rng.choice(bases)
        out.append((f"random #{i}", _mutate(rng, base)))
    return out


def test_random_mutations(xdp):
    corpus = _random_corpus()
    batch = [(desc, f, expect(f)) for desc, f in corpus]
    # the corpus must reach every verdict and most malformed classes to mean much
    slots = collections.Counter(e[1] for _, _, e in batch)
    verdicts = collections.Counter(e[0] for _, _, e in batch)
    assert {XDP_PASS, XDP_DROP, XDP_TX} <= set(verdicts), verdicts
    reached = {s - C.DROP_MALFORMED for s in slots if C.DROP_MALFORMED < s <= C.DROP_MALFORMED_LAST}
    assert len(reached) >= 8, f"malformed classes reached: {sorted(reached)}"
    run_batch(xdp, batch)
    xdp.clear_telem()


# ---- settings: rodata and run-time maps ---------------------------------------------------------

def test_no_tag_key(make_xdp):
    x = make_xdp(key=bytes(16))
    cases = [(v["name"], VEC[v["name"]], expect(VEC[v["name"]], x.cfg)) for v in VECTORS]
    got = {d: e[1] for d, _, e in cases}
    assert got["probe_udp"] == got["tcp_probe"] == got["tcp_probe_resp"] == C.DROP_NO_KEY
    run_batch(x, cases)
    assert x.telem_entries() == {}


def _probe_from(src: str) -> bytes:
    """The probe_udp vector sent from `src` (IPv4 checksum recomputed)."""
    p = Ether(VEC["probe_udp"])
    p[IP].src = src
    del p[IP].chksum
    return bytes(p)


def test_probe_rate_per_source(make_xdp):
    """Probe reflection is limited per source address (issue 15 section 3):
    with 10 probes/s and bursts of 8, 40 probes of one source sent at once
    (well within one 100 ms interval) get 8 answers and 32 drops counted in
    DROP_PROBE_RATE, untouched; a second source is answered all the same;
    after 1.1 s the first one has 11 probes' worth of credit again, capped
    by the burst at 8."""
    x = make_xdp(probe_rate=10, probe_burst=8)
    a, b = VEC["probe_udp"], _probe_from("192.0.2.77")
    before = x.counters()
    rets = [x.run(a) for _ in range(40)]
    after = x.counters()
    tx = [r for r, _ in rets if r == XDP_TX]
    assert len(tx) == 8, [r for r, _ in rets]
    assert all(out == a for r, out in rets if r == XDP_DROP)      # dropped unchanged
    assert after[C.DROP_PROBE_RATE][0] - before[C.DROP_PROBE_RATE][0] == 32
    assert after[C.TX_PROBE_RESP_UDP][0] - before[C.TX_PROBE_RESP_UDP][0] == 8
    ret, out = x.run(b)
    assert ret == XDP_TX
    check_probe_resp(b, out, x.cfg)
    time.sleep(1.1)
    again = [x.run(a)[0] for _ in range(40)].count(XDP_TX)
    assert again == 8, again                       # the burst caps the credit


def test_no_local_addresses(make_xdp):
    """An empty hpccd_addrs: a pure classifier that passes every valid
    hpccd packet and still drops malformed ones."""
    x = make_xdp(addrs=())
    cases = [(v["name"], VEC[v["name"]], expect(VEC[v["name"]], x.cfg)) for v in VECTORS]
    for v, (_, _, e) in zip(VECTORS, cases):
        assert e == ((XDP_DROP, C.DROP_MALFORMED + v["error"]) if v["error"]
                     else (XDP_PASS, C.PASS_NOT_LOCAL))
    run_batch(x, cases)


def test_reflection_off(make_xdp):
    """Without HPCCD_CFG_REFLECT_PROBES UDP probes go to userspace (here:
    passed, no socket) and TCP-side probes are dropped; responses are still
    parsed."""
    x = make_xdp(flags=CFG_TCP_SIDE)
    cases = [(v["name"], VEC[v["name"]], expect(VEC[v["name"]], x.cfg)) for v in VECTORS]
    got = {d: e for d, _, e in cases}
    assert got["probe_udp"] == (XDP_PASS, C.PASS_NO_XSK)
    assert got["tcp_probe"] == (XDP_DROP, C.DROP_TCP_PROBE_OFF)
    assert got["tcp_probe_resp"] == (XDP_DROP, C.TCP_RESP_STORED)
    run_batch(x, cases)


def test_tcp_side_off(make_xdp):
    """Without HPCCD_CFG_TCP_SIDE TCP-side probes and responses, well formed
    or not, are ordinary TCP: passed to the kernel untouched."""
    x = make_xdp(flags=CFG_REFLECT)
    cases = [(v["name"], VEC[v["name"]], expect(VEC[v["name"]], x.cfg)) for v in VECTORS]
    for v, (_, _, e) in zip(VECTORS, cases):
        if v["l4"] == "tcp":
            assert e == (XDP_PASS, C.PASS_OTHER)
    run_batch(x, cases)
    assert x.telem_entries() == {}


def test_other_port_and_dscp(make_xdp):
    """The UDP port and probe DSCP are load-time settings: with others, the
    vectors are not hpccd's, and the same packets on the new port and DSCP are."""
    port, dscp = 4791, 46
    x = make_xdp(port=port, dscp=dscp)
    cases = [(v["name"], VEC[v["name"]], expect(VEC[v["name"]], x.cfg)) for v in VECTORS]
    assert all(e == (XDP_PASS, C.PASS_OTHER) for _, _, e in cases)
    # moved to the new port / DSCP (UDP checksum recomputed; TCP checksum does not cover TOS)
    moved = []
    for v in VALID:
        p = Ether(VEC[v["name"]])
        if UDP in p:
            p[UDP].sport = port if p[UDP].sport == PORT else p[UDP].sport
            p[UDP].dport = port if p[UDP].dport == PORT else p[UDP].dport
            if p[UDP].chksum:
                del p[UDP].chksum
        else:
            p[IP].tos = dscp << 2 | p[IP].tos & 3
            del p[IP].chksum
        f = bytes(p)
        moved.append((v["name"] + " moved", f, expect(f, x.cfg)))
        assert moved[-1][2] == vector_expectation(v)
    run_batch(x, cases + moved)
