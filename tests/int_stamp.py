"""What an INT switch must do to a frame, from the wire format: which event
a frame makes (stamped, full, no_collect, malformed, none), the frame with
the switch's record, and where the record and the L4 checksum lie.  The
model both switches are held to: the software switch (tests/bpf/
test_int_switch.py, ebpf/int_switch.bpf.c) and the P4 switch (tests/
integration/test_p4_bmv2.py, switch_p4/hpccd.p4).

``from int_stamp import ...``; tests/ is on the path, as for conftest.
The hpccd port and probe DSCP are those of the shared vectors
(tests/vectors/wire.json).
"""
from __future__ import annotations

import json
import pathlib
import struct

from scapy.layers.inet import IP, in4_chksum
from scapy.layers.l2 import Ether

from hpccd.core import wire

DOC = json.loads((pathlib.Path(__file__).resolve().parent / "vectors" / "wire.json").read_text())
PORT_UDP = DOC["udp_port"]
DSCP = DOC["probe_dscp"]


def int_region(frame: bytes):
    """(kind, l4 offset, INT offset) of an hpccd packet or TCP-side probe, or None."""
    r = wire.l4_region(frame, PORT_UDP, DSCP)
    return None if r is None else (r[0], r[1], r[2])


def expected_int(frame: bytes) -> str:
    """Which INT event a frame must produce: stamped, full, no_collect,
    malformed, or none (not an hpccd packet)."""
    r = int_region(frame)
    if r is None:
        return "none"
    if wire.classify(frame, PORT_UDP, DSCP) != 0:
        return "malformed"
    off = r[2]
    nhop, room = frame[off + 1] >> 4, frame[off + 1] & 0xF
    if not (frame[off + 2] >> 4) & wire.INT_F_COLLECT:
        return "no_collect"
    return "full" if nhop == room else "stamped"


def hop_word(b: int, ts: int, tx: int, q: int) -> bytes:
    """One hop record: speed code B, TS (ns mod 2^24), txBytes and qLen units."""
    return struct.pack("!Q", b << 59 | ts << 35 | tx << 15 | q)


def hop_fields(frame: bytes, i: int) -> tuple[int, int, int, int]:
    """(B, TS, txBytes units, qLen units) of record i."""
    _, _, off = int_region(frame)
    w = struct.unpack_from("!Q", frame, off + 4 + 8 * i)[0]
    return w >> 59, (w >> 35) & 0xFFFFFF, (w >> 15) & 0xFFFFF, w & 0x7FFF


def int_hdr(frame: bytes) -> tuple[int, int, int, int]:
    """(nHop, room, flags, pathID) of the INT header."""
    _, _, off = int_region(frame)
    pf = struct.unpack_from("!H", frame, off + 2)[0]
    return frame[off + 1] >> 4, frame[off + 1] & 0xF, pf >> 12, pf & 0xFFF


def csum_field(frame: bytes) -> int:
    """Offset of the L4 checksum field (UDP or TCP)."""
    kind, l4, _ = int_region(frame)
    return l4 + (6 if kind == "udp" else 16)


def stamp_model(frame: bytes, speed: int, ts: int, tx: int, q: int, switch_id: int) -> bytes:
    """The frame with this switch's stamp (or OVERFLOW), checksum field as in the input."""
    ev = expected_int(frame)
    f = bytearray(frame)
    _, _, off = int_region(frame)
    nhop, room = f[off + 1] >> 4, f[off + 1] & 0xF
    pf = struct.unpack_from("!H", f, off + 2)[0]
    if ev == "stamped":
        hop = off + 4 + 8 * nhop
        f[hop:hop + 8] = hop_word(speed, ts, tx, q)
        f[off + 1] = (nhop + 1) << 4 | room
        pf = (pf & 0xF000) | ((pf ^ switch_id) & 0xFFF)
    elif ev == "full":
        pf |= wire.INT_F_OVERFLOW << 12
    struct.pack_into("!H", f, off + 2, pf)
    return bytes(f)


def l4_checksum_ok(frame: bytes) -> bool:
    """scapy: the L4 checksum over pseudo-header and segment (IPv4 total
    length) verifies; a zero UDP checksum means "none" and passes."""
    p = Ether(frame)
    ip = p[IP]
    seg = bytes(ip)[ip.ihl * 4:ip.len]
    if ip.proto == 17 and seg[6:8] == b"\0\0":
        return True
    return in4_chksum(ip.proto, ip, seg) == 0
