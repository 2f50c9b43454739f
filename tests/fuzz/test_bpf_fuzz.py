"""Random and mutated packets, and every truncation, through BPF_PROG_TEST_RUN for
the programs whose suites in tests/bpf/ run fixed cases only: the software
INT switch (ebpf/int_switch.bpf.c) and the TCP flow tracker
(ebpf/tc_tracker.bpf.c).  (xdp_host.bpf.c has its own truncation, corruption
and seeded-mutation suites in tests/bpf/test_xdp_host.py; the struct_ops
congestion controls take no packets.)

Inputs, from a fixed seed (SEED) so that a failure names a reproducible frame:
the frames of tests/vectors/wire.json and TCP segments of several flows with
drawn flags, sequence numbers, payloads, options, DSCP and 802.1Q tags;
random mutations of them (bits, bytes, cuts, IPv4 total length, IHL, UDP
length, TCP data offset, hop count); frames of random bytes behind Ethernet
and IPv4 headers; and every cut of every vector and of a few segments.

Each frame's expected verdict, output and counter slot come from a model
written here from the program's header comment and the parser it includes
(include/hpccd/parse.h, mirrored by hpccd.core.wire.l4_region/classify):

- int_switch (INT only on the port, as a lab switch without ECN): TC_ACT_OK;
  the frame leaves unchanged, except an hpccd packet or TCP-side probe with
  COLLECT and room left, which gets exactly the record at nHop (B of the
  port, the run's TS, txBytes and qLen 0: lo has no queue), nHop + 1 and
  pathID ^ switch id, and one that is full, which gets OVERFLOW; an L4
  checksum that was right stays right, a zero UDP checksum stays zero;
  counters: FORWARDED once with the frame's length, plus exactly the event
  slot of the model (INT_STAMPED, INT_FULL, INT_NO_COLLECT, INT_MALFORMED,
  NOT_IPV4, TRUNC for headers cut by the frame end, or none);
- tc_tracker: TC_ACT_OK, the frame unchanged, exactly one slot moved by
  (1, length) and it is the model's (NOT_TCP, TRUNC, PROBE, PURE_ACK,
  NEW_FLOW, TRACKED, UNTRACKED_END), and the flow table holds what a Python
  twin of the tracker holds: bytes, retransmitted bytes, packets, snd_nxt in
  sequence arithmetic and the OR of the flags, for every flow touched;
- over each whole batch the counter deltas add up, slot by slot, to the
  frames sent and their lengths.
"""
from __future__ import annotations

import collections
import importlib.util
import os
import pathlib
import random
import struct
import sys
import time

import pytest

pytestmark = pytest.mark.bpf

if os.geteuid() != 0:
    pytest.skip("loading BPF programs needs root (CAP_BPF, CAP_NET_ADMIN, CAP_PERFMON)",
                allow_module_level=True)

from hpccd.bpf import loader as bpf  # noqa: E402
from hpccd.core import wire  # noqa: E402
from hpccd.core.checksum import internet_checksum  # noqa: E402
from int_stamp import csum_field, expected_int, hop_fields, stamp_model  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
SEED = 0x66757A7A            # "fuzz"
N_RANDOM = int(os.environ.get("HPCCD_BPF_FUZZ_FRAMES", "5000"))


def _load(name: str):
    """A module of tests/bpf/ (its program wrapper and helpers), by path."""
    spec = importlib.util.spec_from_file_location(f"_bpf_fuzz_{name}",
                                                  ROOT / "tests" / "bpf" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod          # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


SW = _load("test_int_switch")
TC = _load("test_tc_tracker")
DOC = SW.DOC
PORT, DSCP = DOC["udp_port"], DOC["probe_dscp"]
VEC = [bytes.fromhex(v["hex"]) for v in DOC["vectors"]]
MIN_IPV4 = 14 + 20           # an skb test run refuses shorter IPv4 frames


def u16(b, off: int) -> int:
    return struct.unpack_from("!H", b, off)[0]


# ---- generators -------------------------------------------------------------------------

def tcp_segment(rng: random.Random, sport: int, seq: int) -> bytes:
    flags = rng.choice((0x18, 0x18, 0x10, 0x02, 0x12, 0x11, 0x19, 0x04, 0x14, 0x00, 0xC0, 0x1FF))
    n = rng.choice((0, 0, 1, 10, 100, 1000))
    tos = rng.choice((0, 0, DSCP << 2, DSCP << 2 | 2, 46 << 2))
    payload = bytes(rng.randrange(256) for _ in range(n))
    if rng.random() < 0.2:
        payload = VEC[19][54:][:n or 40]                  # an INT magic after the header
    opts = bytes(4 * rng.choice((0, 0, 0, 1, 3)))
    doff = 5 + len(opts) // 4
    tcp = struct.pack("!HHIIBBHHH", sport, 5201, seq & 0xFFFFFFFF, 1,
                      doff << 4 | flags >> 8, flags & 0xFF, 1000, 0, 0) + opts
    tot = 20 + len(tcp) + len(payload)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, tos, tot, 0, 0x4000, 64, 6, 0,
                     bytes([192, 0, 2, 1]), bytes([198, 51, 100, 2]))
    eth = bytes(6) + bytes([2, 0, 0, 0, 0, 1])
    eth += struct.pack("!HHH", 0x8100, 7, 0x0800) if rng.random() < 0.1 else b"\x08\x00"
    return eth + ip + tcp + payload + (bytes(6) if rng.random() < 0.1 else b"")


def mutate(rng: random.Random, frame: bytes) -> bytes:
    b = bytearray(frame)
    ip = 18 if len(b) >= 14 and u16(b, 12) == 0x8100 else 14
    l4 = ip + 4 * (b[ip] & 0xF) if len(b) > ip else ip + 20
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(9)
        if op == 0 and b:
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        elif op == 1 and b:
            b[rng.randrange(len(b))] = rng.randrange(256)
        elif op == 2:
            del b[rng.randrange(min(len(b), ip + 21), len(b) + 1):]
        elif op == 3 and len(b) >= ip + 4:                     # IPv4 total length
            struct.pack_into("!H", b, ip + 2, max(0, u16(b, ip + 2) + rng.randint(-40, 40)))
        elif op == 4 and len(b) > ip:                          # IHL
            b[ip] = 0x40 | rng.choice((0, 4, 5, 6, 15))
        elif op == 5 and len(b) >= l4 + 6:                     # UDP length / TCP seq
            struct.pack_into("!H", b, l4 + 4, max(0, u16(b, l4 + 4) + rng.randint(-12, 12)))
        elif op == 6 and len(b) > l4 + 12:                     # TCP data offset
            b[l4 + 12] = rng.randrange(16) << 4 | b[l4 + 12] & 0xF
        elif op == 7:
            region = wire.l4_region(bytes(b), PORT, DSCP)
            if region and region[2] + 2 <= len(b):             # nHop/room
                b[region[2] + 1] = rng.randrange(256)
        else:
            b += bytes(rng.randrange(256) for _ in range(rng.randint(1, 30)))
    return bytes(b)


def random_frame(rng: random.Random) -> bytes:
    """Ethernet and an IPv4 header with drawn fields, then random bytes."""
    proto = rng.choice((6, 17, 17, 1, 0))
    body = bytes(rng.randrange(256) for _ in range(rng.randint(0, 120)))
    if proto == 17 and len(body) >= 4 and rng.random() < 0.7:
        body = struct.pack("!H", rng.choice((40000, PORT))) + struct.pack(
            "!H", PORT) + body[4:]
    tot = 20 + len(body) + rng.choice((0, 0, 0, -5, 5))
    tos = rng.choice((0, DSCP << 2, rng.randrange(256)))
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, tos, max(0, tot), 0, 0, 64, proto, 0,
                     bytes(4), bytes(4))
    return bytes(12) + rng.choice((b"\x08\x00", b"\x08\x00", b"\x86\xdd", b"\x81\x00")) + ip + body


def fit(frame: bytes) -> bytes:
    """What a test run takes: at least Ethernet + 20 bytes."""
    return frame + bytes(max(0, MIN_IPV4 - len(frame)))


def corpus(rng: random.Random, bases: list[bytes], cut: list[bytes]) -> list[bytes]:
    """The bases, every truncation of those in `cut`, N_RANDOM mutated or
    random frames."""
    out = list(bases)
    for base in cut:
        out += [fit(base[:n]) for n in range(MIN_IPV4, len(base))]
    for _ in range(N_RANDOM):
        k = rng.random()
        if k < 0.6:
            out.append(fit(mutate(rng, rng.choice(bases))))
        elif k < 0.8:
            out.append(fit(random_frame(rng)))
        else:
            out.append(fit(rng.choice(bases)))
    return out


def refusable(frame: bytes) -> bool:
    """A frame the kernel may refuse as skb test input: shorter than
    Ethernet + the fixed IPv4 (IPv6) header, or behind an 802.1Q tag."""
    et = u16(frame, 12)
    return len(frame) < MIN_IPV4 or et == 0x8100 or (et == 0x86DD and len(frame) < 14 + 40)


def run_or_refused(prog, frame: bytes):
    """(ret, out) or None when the kernel refuses the frame as test input."""
    try:
        ret, out, _ = prog.test_run(frame)
    except bpf.BpfError:
        return None
    return ret, out


# ---- the INT switch -------------------------------------------------------------------------

def l4_csum_state(frame: bytes) -> str | None:
    """"zero" (UDP without checksum), "ok", "bad", or None when the frame
    does not hold the whole segment the checksum covers."""
    r = wire.l4_region(frame, PORT, DSCP)
    kind, l4, _, end = r
    ip = 18 if u16(frame, 12) == 0x8100 else 14
    seg = u16(frame, l4 + 4) if kind == "udp" else u16(frame, ip + 2) - (l4 - ip)
    if l4 + seg > len(frame) or l4 + seg != end:
        return None
    c = l4 + (6 if kind == "udp" else 16)
    if kind == "udp" and frame[c:c + 2] == b"\0\0":
        return "zero"
    pseudo = frame[ip + 12:ip + 20] + struct.pack("!BBH", 0, frame[ip + 9], seg)
    return "ok" if internet_checksum(pseudo + frame[l4:l4 + seg]) == 0 else "bad"


def sw_model(frame: bytes) -> str | None:
    """The INT event slot of int_switch.bpf.c classify()/stamp() for a frame
    that is entirely linear (a test run): see the module docstring."""
    n = len(frame)
    if n < 14:
        return "TRUNC"
    et, ip = u16(frame, 12), 14
    if et == 0x8100:
        if n < 18:
            return "TRUNC"
        et, ip = u16(frame, 16), 18
    if et != 0x0800:
        return "NOT_IPV4"
    if ip + 20 > n:
        return "TRUNC"
    ihl = (frame[ip] & 0xF) * 4
    tot = u16(frame, ip + 2)
    if frame[ip] >> 4 != 4 or ihl < 20 or ip + ihl > n or tot < ihl or u16(frame, ip + 6) & 0x1FFF:
        return None
    l4, ip_end = ip + ihl, min(ip + tot, n)
    proto = frame[ip + 9]
    if proto == 17:
        if l4 + 8 > n:
            return "TRUNC"
        if l4 + 8 > ip_end or u16(frame, l4 + 4) < 8 or PORT not in (u16(frame, l4),
                                                                     u16(frame, l4 + 2)):
            return None
    elif proto == 6:
        if frame[ip + 1] >> 2 != DSCP:
            return None
        doff = (frame[l4 + 12] >> 4) * 4 if l4 + 12 < n else 0
        if l4 + 20 > n or l4 + 20 > ip_end or doff < 20 or l4 + doff > n or l4 + doff > ip_end:
            return "TRUNC"
        if (frame[l4 + 12] & 1) or frame[l4 + 13]:
            return None
        if l4 + doff + 1 > n:
            return "TRUNC"
        if l4 + doff + 1 > ip_end or frame[l4 + doff] >> 4 != wire.INT_MAGIC:
            return None
    else:
        return None
    return {"stamped": "INT_STAMPED", "full": "INT_FULL", "no_collect": "INT_NO_COLLECT",
            "malformed": "INT_MALFORMED"}[expected_int(frame)]


@pytest.fixture(scope="module")
def sw():
    s = SW.Switch()
    try:
        s.configure()                 # lo: port 1, INT only, the test's switch id and speed
        yield s
    finally:
        s.ports.delete(SW.LO)
        s.close()


def test_int_switch_random_mutated_truncated(sw):
    rng = random.Random(SEED)
    frames = corpus(rng, VEC, VEC)
    want = collections.Counter()
    events = collections.Counter()
    before = sw.counters()
    ran = 0
    for i, f in enumerate(frames):
        ev = sw_model(f)
        t0 = time.monotonic_ns()
        r = run_or_refused(sw.prog, f)
        t1 = time.monotonic_ns()
        if r is None:
            assert refusable(f), f"refused: {f.hex()}"
            continue
        ran += 1
        ret, out = r
        where = f"frame #{i} {f.hex()} (model: {ev})"
        assert ret == SW.TC_ACT_OK, where
        assert len(out) == len(f), where
        want[(1, "FORWARDED")] += 1
        if ev:
            want[(1, ev)] += 1
            events[ev] += 1
        if ev in ("INT_STAMPED", "INT_FULL"):
            c = csum_field(f)
            if ev == "INT_STAMPED":
                ts, idx = SW.ts_of(out)
                assert SW.ts_between(ts, t0, t1), where
                assert hop_fields(out, idx) == (SW.SPEED, ts, 0, 0), where
                model = stamp_model(f, SW.SPEED, ts, 0, 0, SW.SWITCH_ID)
            else:
                model = stamp_model(f, SW.SPEED, 0, 0, 0, SW.SWITCH_ID)
            assert out[:c] + out[c + 2:] == model[:c] + model[c + 2:], where
            state = l4_csum_state(f)
            if state == "zero":
                assert out[c:c + 2] == b"\0\0", where
            elif state == "ok":
                assert l4_csum_state(out) == "ok", f"{where}: checksum broken by the stamp"
            if out[c:c + 2] == b"\0\0":
                assert f[c:c + 2] == b"\0\0", f"{where}: non-zero UDP checksum became zero"
        else:
            assert out == f, f"{where}: modified"
    after = sw.counters()
    got = collections.Counter()
    for k, (pk, _) in after.items():
        d = pk - before.get(k, (0, 0))[0]
        if d:
            got[k] = d
    assert got == want
    assert ran > 0.9 * len(frames)
    # the corpus must reach every INT event and the outer verdicts to mean much
    assert {"INT_STAMPED", "INT_FULL", "INT_NO_COLLECT", "INT_MALFORMED", "TRUNC",
            "NOT_IPV4"} <= set(events), events


# ---- the TCP flow tracker ----------------------------------------------------------------------

FIN, SYN, RST = 0x01, 0x02, 0x04
SPORTS = range(41000, 41012)


def tc_model(frame: bytes):
    """(slot, key, payload, seq, flags) as tc_tracker.bpf.c parse_seg() sees
    the frame; slot None for a segment that touches the flow table."""
    n = len(frame)
    if n < 14:
        return "NOT_TCP", None, 0, 0, 0
    et, ip = u16(frame, 12), 14
    if et == 0x8100:
        if n < 18:
            return "NOT_TCP", None, 0, 0, 0
        et, ip = u16(frame, 16), 18
    if et != 0x0800 or ip + 20 > n:
        return "NOT_TCP", None, 0, 0, 0
    ihl = (frame[ip] & 0xF) * 4
    tot = u16(frame, ip + 2)
    if (frame[ip] >> 4 != 4 or ihl < 20 or ip + ihl > n or tot < ihl
            or u16(frame, ip + 6) & 0x1FFF or frame[ip + 9] != 6):
        return "NOT_TCP", None, 0, 0, 0
    l4, l4_end = ip + ihl, min(ip + tot, n)
    if l4 + 20 > l4_end:
        return "TRUNC", None, 0, 0, 0
    doff = (frame[l4 + 12] >> 4) * 4
    if doff < 20 or l4 + doff > l4_end:
        return "TRUNC", None, 0, 0, 0
    if frame[ip + 1] >> 2 == DSCP and not (frame[l4 + 12] & 1) and not frame[l4 + 13]:
        return "PROBE", None, 0, 0, 0
    payload = max(0, tot - ihl - doff)
    flags = frame[l4 + 13]
    seq = struct.unpack_from("!I", frame, l4 + 4)[0]
    if not payload and not flags & (SYN | FIN | RST):
        return "PURE_ACK", None, 0, 0, 0
    key = frame[ip + 12:ip + 20] + frame[l4:l4 + 4] + b"\x06\0\0\0"
    return None, key, payload, seq, flags


def s32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >> 31 else x


def tc_twin(flows: dict, key: bytes, payload: int, seq: int, flags: int) -> str:
    """The tracker's update of its table, in Python."""
    nxt = (seq + payload + bool(flags & SYN) + bool(flags & FIN)) & 0xFFFFFFFF
    f = flows.get(key)
    if f is None:
        if not payload and not flags & SYN:
            return "UNTRACKED_END"
        flows[key] = [payload, 0, 1, nxt, flags]
        return "NEW_FLOW"
    f[0] += payload
    f[2] += 1
    ahead = (f[3] - seq) & 0xFFFFFFFF
    if s32(ahead) > 0 and payload:
        f[1] += min(ahead, payload)
    if s32(nxt - f[3]) > 0:
        f[3] = nxt
    f[4] |= flags
    return "TRACKED"


@pytest.fixture(scope="module")
def tc():
    t = TC.Tc()
    try:
        yield t
    finally:
        t.close()


def test_tc_tracker_random_mutated_truncated(tc):
    rng = random.Random(SEED + 1)
    seqs = {p: rng.randrange(1 << 32) for p in SPORTS}
    bases = []
    for _ in range(300):                   # flows of several segments, wraps included
        p = rng.choice(SPORTS)
        bases.append(tcp_segment(rng, p, seqs[p]))
        seqs[p] = (seqs[p] + rng.choice((0, 1, 100, 1000, -500, 1 << 31))) & 0xFFFFFFFF
    cut = [b for b in bases if len(b) < 200][:12] + [VEC[19], VEC[20]]   # + TCP probes
    frames = corpus(rng, bases + VEC, cut)
    flows: dict[bytes, list[int]] = {}
    touched: set[bytes] = set()

    def clear():
        for k, _ in list(tc.flows.lookup_batch()):
            if k[:8] == bytes([192, 0, 2, 1, 198, 51, 100, 2]) or k[:8] == bytes(8):
                tc.flows.delete(k)

    clear()
    want = [[0, 0] for _ in range(TC.N_SLOTS)]
    before = tc.counters()
    slots = collections.Counter()
    try:
        for i, f in enumerate(frames):
            slot, key, payload, seq, flags = tc_model(f)
            r = run_or_refused(tc.prog, f)
            if r is None:
                assert refusable(f), f"refused: {f.hex()}"
                continue
            if slot is None:
                slot = tc_twin(flows, key, payload, seq, flags)
                touched.add(key)
            slots[slot] += 1
            want[TC.SLOT[slot]][0] += 1
            want[TC.SLOT[slot]][1] += len(f)
            ret, out = r
            where = f"frame #{i} {f.hex()} (model: {slot})"
            assert ret == TC.TC_ACT_OK and out == f, where
            if key is not None:
                got = tc.flow(key)
                if key in flows:
                    assert got is not None and list(got[:5]) == flows[key], \
                        f"{where}: entry {got} != twin {flows[key]}"
                else:
                    assert got is None, where
        after = tc.counters()
        got = [[a - b for a, b in zip(after[i], before[i])] for i in range(TC.N_SLOTS)]
        assert got == want, {TC.SLOT_NAME[i]: (got[i], want[i])
                             for i in range(TC.N_SLOTS) if got[i] != want[i]}
        for key in touched:                 # the table holds exactly the twin's flows
            got = tc.flow(key)
            assert (got is None) == (key not in flows)
    finally:
        clear()
    assert {"NOT_TCP", "TRUNC", "PROBE", "PURE_ACK", "NEW_FLOW", "TRACKED",
            "UNTRACKED_END"} <= set(slots), slots
