#!/usr/bin/env python3
"""Generate tests/vectors/wire.json: the shared wire-format test vectors.

Every parser of the hpccd wire format (the C fast path, the BPF programs
through BPF_PROG_TEST_RUN, the scapy layers, the P4 program and the lab
switch) must decode these frames alike: the fields of the valid ones, and
the ``enum hpccd_wire_err`` class of the malformed ones (docs/wire-format.md,
"Malformed packets").

The hpccd bytes (INT header, hop records, transport header, NOTIFY body,
tag) are packed here with ``struct`` straight from the C structs of
include/hpccd/wire.h, not with the scapy layers of hpccd.core.wire, so that the
tests compare two independent encoders.  scapy builds only Ethernet, IPv4,
UDP and TCP (and their checksums).  The tag is SipHash-2-4 (hpccd.core.siphash,
checked against the paper's reference values by the unit tests).

Deterministic: no clock, no randomness; the same bytes on every run.

    python3 tests/vectors/make_vectors.py            # rewrite tests/vectors/wire.json
    python3 tests/vectors/make_vectors.py -o FILE    # write elsewhere (- for stdout)

Every frame is a complete Ethernet frame (no FCS) with addresses from the
documentation ranges (RFC 7042 MACs, RFC 5737 IPv4): bytes in a file, no
traffic is ever sent.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import socket
import struct
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "daemon"))

from hpccd.core.siphash import siphash24  # noqa: E402
from scapy.layers.inet import IP, TCP, UDP  # noqa: E402
from scapy.layers.l2 import Ether  # noqa: E402
from scapy.packet import Raw  # noqa: E402

FORMAT = 1
TAG_KEY = bytes(range(16))
UDP_PORT = 18471          # HPCCD_UDP_PORT_DEFAULT
PROBE_DSCP = 45           # HPCCD_PROBE_DSCP_DEFAULT

# Hosts: A sends data, B receives it.
MAC_A, MAC_B = "00:00:5e:00:53:01", "00:00:5e:00:53:02"
IP_A, IP_B = "192.0.2.1", "198.51.100.2"
SPORT_A = 49153           # the data sender's (ephemeral) port: ECMP entropy per flow
TCP_A, TCP_B = 43210, 5201   # the kernel TCP flow a TCP-side probe measures

NOT_ECT, ECT1, ECT0, CE = 0, 1, 2, 3

# enum hpccd_type, INT flags, hpccd flags (include/hpccd/wire.h)
DATA, ACK, NACK, PROBE, PROBE_RESP, NOTIFY, CNP = 1, 2, 3, 4, 5, 6, 7
COLLECT, OVERFLOW = 0x8, 0x4
ECE, CWR, FIRST_RTT, FIN, RETX, INT_ECHO, SYN, SACK = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80

# Speed codes (fastpath/cc/int_decode.c): the lab's port speeds.
B_100M, B_1G, B_10G, B_40G, B_100G = 6, 14, 22, 25, 27
INT_QLEN_MAX = 0x7FFF     # qLen saturates here (a gauge, never wraps)

# 12-bit switch ids of the lab path s1..s8, XORed into pathID when they stamp.
SW = [0x101, 0x202, 0x0F3, 0xABC, 0x555, 0x7E1, 0x018, 0xC3C]


# ---- hpccd structures, packed from the C structs -------------------------------

def hop(speed_code: int, ts: int, tx_units: int, qlen_units: int) -> dict:
    return {"speed_code": speed_code, "ts": ts, "tx_units": tx_units,
            "qlen_units": qlen_units}


ZERO_HOP = hop(0, 0, 0, 0)


def pack_hop(h: dict) -> bytes:
    """struct hpccd_int_hop_wire: one 64-bit word as two __be32 halves."""
    w = (h["speed_code"] << 59) | (h["ts"] << 35) | (h["tx_units"] << 15) | h["qlen_units"]
    return struct.pack("!II", w >> 32, w & 0xFFFFFFFF)


def pack_int(f: dict) -> bytes:
    """struct hpccd_int_hdr, then every hop record present."""
    return struct.pack("!BBH", f["magic"] << 4 | f["ver"], f["nhop"] << 4 | f["room"],
                       f["flags"] << 12 | f["path_id"]) + b"".join(map(pack_hop, f["hops"]))


def pack_hdr(f: dict) -> bytes:
    """struct hpccd_hdr: seq and ack as __be32 high and low halves."""
    return struct.pack("!BBHIIIIIII", f["ver"] << 4 | f["type"], f["flags"], f["len"],
                       f["flow_id"], f["seq"] >> 32, f["seq"] & 0xFFFFFFFF,
                       f["ack"] >> 32, f["ack"] & 0xFFFFFFFF, f["ts"], f["aux"])


def pack_notify(f: dict) -> bytes:
    """struct hpccd_notify."""
    return struct.pack("!IIIHHII", f["w_bytes"], f["rate_kbps"], f["u_q16"], f["n_flows"],
                       f["reserved"], f["notify_seq"], f["t_ns"])


def pack_feedback_head(f: dict) -> bytes:
    """struct hpccd_rxwin (when fb_flags has FB_F_WINDOW), then the first 8 bytes of
    struct hpccd_fb_trailer (fb_seq, fb_flags): everything the tag covers."""
    w = f["window"]
    win = struct.pack("!IIHHI", w["w_bytes"], w["u_q16"], w["n_flows"], w["reserved"],
                      w["t_ns"]) if w else b""
    return win + struct.pack("!II", f["fb_seq"], f["fb_flags"])


def tag_prefix(saddr: str, daddr: str, sport: int, dport: int, proto: int) -> bytes:
    """struct hpccd_tag_input: the flow as its data (or probe) sender sees it."""
    return struct.pack("!4s4sHHB3x", socket.inet_aton(saddr), socket.inet_aton(daddr),
                       sport, dport, proto)


def int_fields(nhop=0, room=5, flags=COLLECT, hops=(), path_id=None, magic=0xC, ver=1) -> dict:
    """INT fields; ``hops`` are the stamped records, the rest of ``room`` is zeroed."""
    hops = list(hops)
    assert len(hops) == nhop <= room
    if path_id is None:
        path_id = 0
        for sw in SW[:nhop]:
            path_id ^= sw
    return {"magic": magic, "ver": ver, "nhop": nhop, "room": room, "flags": flags,
            "path_id": path_id, "hops": hops + [dict(ZERO_HOP)] * (room - nhop)}


def hdr_fields(type_, flags=0, len_=0, flow_id=0, seq=0, ack=0, ts=0, aux=0, ver=1) -> dict:
    return {"ver": ver, "type": type_, "flags": flags, "len": len_, "flow_id": flow_id,
            "seq": seq, "ack": ack, "ts": ts, "aux": aux}


def payload_bytes(n: int, seed: int = 0) -> bytes:
    """A deterministic DATA payload."""
    return bytes((seed + 7 * i + (i >> 8)) & 0xFF for i in range(n))


# ---- Ethernet / IPv4 / L4 ---------------------------------------------------------

ETH_MIN = 60              # the Ethernet minimum without FCS


def eth_pad(frame: bytes) -> bytes:
    """Zero padding up to the Ethernet minimum, as a NIC adds it: after the IP total
    length, so never part of the L4 payload.  A frame that arrives in XDP or at a
    switch is never shorter."""
    return frame + bytes(max(0, ETH_MIN - len(frame)))


def frame_udp(payload: bytes, *, to_b: bool = True, sport: int | None = None,
              dport: int | None = None, ecn: int = ECT0, dscp: int = 0) -> bytes:
    """Ethernet | IPv4 | UDP | payload, A -> B (data direction) or B -> A (answers)."""
    if to_b:
        src_mac, dst_mac, src, dst = MAC_A, MAC_B, IP_A, IP_B
        sport, dport = sport or SPORT_A, dport or UDP_PORT
    else:
        src_mac, dst_mac, src, dst = MAC_B, MAC_A, IP_B, IP_A
        sport, dport = sport or UDP_PORT, dport or SPORT_A
    pkt = (Ether(src=src_mac, dst=dst_mac)
           / IP(src=src, dst=dst, tos=dscp << 2 | ecn, id=0, flags="DF", ttl=64)
           / UDP(sport=sport, dport=dport) / Raw(payload))
    return eth_pad(bytes(pkt))


def frame_tcp(payload: bytes, *, to_b: bool = True, tcp_seq: int = 0, ecn: int = ECT0,
              dscp: int = PROBE_DSCP, flags: int = 0) -> bytes:
    """Ethernet | IPv4 (probe DSCP) | TCP (no flag, window 0, ACK number 0) | payload."""
    if to_b:
        src_mac, dst_mac, src, dst, sport, dport = MAC_A, MAC_B, IP_A, IP_B, TCP_A, TCP_B
    else:
        src_mac, dst_mac, src, dst, sport, dport = MAC_B, MAC_A, IP_B, IP_A, TCP_B, TCP_A
    pkt = (Ether(src=src_mac, dst=dst_mac)
           / IP(src=src, dst=dst, tos=dscp << 2 | ecn, id=0, flags="DF", ttl=64)
           / TCP(sport=sport, dport=dport, seq=tcp_seq, ack=0, flags=flags, window=0)
           / Raw(payload))
    return eth_pad(bytes(pkt))


def frame_udp_short(announced: bytes, beyond: bytes) -> bytes:
    """UDP whose length announces only ``announced``; ``beyond`` follows inside the IP
    total length (the UDP length, not the IP length, bounds the hpccd bytes)."""
    pkt = (Ether(src=MAC_A, dst=MAC_B)
           / IP(src=IP_A, dst=IP_B, tos=ECT0, id=0, flags="DF", ttl=64,
                len=20 + 8 + len(announced) + len(beyond))
           / UDP(sport=SPORT_A, dport=UDP_PORT) / Raw(announced))
    return bytes(pkt) + beyond


def ip_info(frame: bytes) -> dict:
    """The IPv4/L4 facts a parser needs besides the hpccd bytes (tag prefix, ECN)."""
    p = Ether(frame)
    l4 = p[UDP] if UDP in p else p[TCP]
    return {"src": p[IP].src, "dst": p[IP].dst, "dscp": p[IP].tos >> 2, "ecn": p[IP].tos & 3,
            "proto": p[IP].proto, "sport": l4.sport, "dport": l4.dport}


# ---- vectors ------------------------------------------------------------------------

VECTORS: list[dict] = []


def valid(name: str, description: str, *, intf: dict, hdr: dict, l4: str = "udp",
          to_b: bool = True, notify: dict | None = None, payload: bytes = b"",
          tag: str | None = None, ecn: int = ECT0, tcp_seq: int = 0, trailer: bytes = b"",
          tag_flow: tuple | None = None, feedback: dict | None = None) -> None:
    """A well-formed packet.  ``tag``: None (no tag), "slot" (PROBE's zeroed slot),
    "valid", or "corrupt" (one bit of a valid tag flipped).  ``tag_flow``: compute
    the tag for another flow's 5-tuple (so it must not verify on this one).
    ``feedback``: an ACK / NACK trailer (fb_seq, fb_flags, window or None) after the
    payload (its SACK blocks); its tag is ``tag``.  ``trailer``: Ethernet padding."""
    fb_head = pack_feedback_head(feedback) if feedback else b""
    body_len = len(payload) + (24 if notify else 0) + len(fb_head) + (8 if tag else 0)
    assert hdr["len"] is None
    hdr = dict(hdr, len=body_len)
    head = (pack_int(intf) + pack_hdr(hdr) + (pack_notify(notify) if notify else b"") +
            payload + fb_head)
    tag_bytes = b""
    proto = 17 if l4 == "udp" else 6
    if tag == "slot":
        tag_bytes = bytes(8)
    elif tag in ("valid", "corrupt"):
        if l4 == "udp":
            flow = (IP_A, IP_B, SPORT_A, UDP_PORT, proto)
        else:
            flow = (IP_A, IP_B, TCP_A, TCP_B, proto)
        if tag_flow is not None:
            flow = tag_flow
        tag_bytes = siphash24(TAG_KEY, tag_prefix(*flow) + head).to_bytes(8, "big")
        if tag == "corrupt":
            tag_bytes = tag_bytes[:7] + bytes([tag_bytes[7] ^ 0x01])
    l4_payload = head + tag_bytes
    if l4 == "udp":
        frame = frame_udp(l4_payload, to_b=to_b, ecn=ecn)
    else:
        frame = frame_tcp(l4_payload, to_b=to_b, tcp_seq=tcp_seq, ecn=ecn)
    frame += trailer
    tag_valid = None
    if tag in ("valid", "corrupt"):
        tag_valid = tag == "valid" and tag_flow is None
    VECTORS.append({
        "name": name, "description": description, "hex": frame.hex(), "l4": l4, "error": 0,
        "fields": {
            "ip": ip_info(frame),
            "int": intf, "hdr": hdr, "notify": notify, "feedback": feedback,
            "tag_hex": tag_bytes.hex() if tag else None,
            "tag_valid": tag_valid,
            "payload_len": len(payload),
            "payload_hex": payload.hex(),
        },
    })


def malformed(name: str, description: str, error: int, frame: bytes, l4: str = "udp") -> None:
    VECTORS.append({"name": name, "description": description, "hex": frame.hex(), "l4": l4,
                    "error": error, "fields": None})


def data_packet(nhop=0, room=5, hops=(), payload_n=64, **hdr_kw) -> bytes:
    """The hpccd bytes of an ordinary DATA packet (for the malformed ones to spoil)."""
    pl = payload_bytes(payload_n)
    hdr = hdr_fields(DATA, len_=len(pl), flow_id=0x0A0B0C0D, seq=0x1_0000_0000, ts=0x12345678)
    hdr.update(hdr_kw)
    return pack_int(int_fields(nhop, room, hops=hops)) + pack_hdr(hdr) + pl


def build() -> list[dict]:
    VECTORS.clear()
    flow = 0x00C0FFEE
    seq0 = 0x1_FFFF_FFC0          # the 64-bit sequence crosses 2^32 in this flow

    hop_1g = hop(B_1G, 0x00A1B2, 0x00400, 0x0010)
    hop_100m = hop(B_100M, 0x000123, 0x00042, INT_QLEN_MAX)
    hop_10g = hop(B_10G, 0x7FFFFF, 0xFFFFF, 0x00FA)
    hops5 = [
        hop(B_1G, 0xFFFFF0, 0xFFFF0, 0x0000),        # TS 16 ns before its wrap
        hop(B_100M, 0xFFFFFF, 0x00042, INT_QLEN_MAX),  # TS at its wrap value, qLen saturated
        hop(B_10G, 0x000003, 0xFFFFF, 0x00FA),       # txBytes at its wrap value
        hop(B_100G, 0x800000, 0x80000, 0x0001),      # top bits of TS and txBytes
        hop(B_40G, 0x000000, 0x00000, INT_QLEN_MAX),
    ]

    # ---- DATA, INT room 5, 0/1/2/5 hops stamped ----
    valid("data_room5_nhop0",
          "DATA as the sender emits it: COLLECT, room 5 zeroed, nHop 0, pathID 0; "
          "SYN; the 64-bit seq has a non-zero high half",
          intf=int_fields(0, 5),
          hdr=hdr_fields(DATA, SYN, None, flow, seq0, 0, 0xDEADBEEF, 0),
          payload=payload_bytes(64))
    valid("data_room5_nhop1",
          "one hop stamped at a 1 Gbit/s port (B = 14): record at index 0, pathID = s1",
          intf=int_fields(1, 5, hops=[hop_1g]),
          hdr=hdr_fields(DATA, 0, None, flow, seq0 + 64, 0, 0xDEADC0DE, 0),
          payload=payload_bytes(100, 1))
    valid("data_room5_nhop2",
          "two hops (100 Mbit/s with qLen saturated at 0x7fff, then 10 Gbit/s with "
          "txBytes at 0xfffff) in stamping order; CWR and RETX",
          intf=int_fields(2, 5, hops=[hop_100m, hop_10g]),
          hdr=hdr_fields(DATA, CWR | RETX, None, flow, seq0 + 164, 0, 0xFFFFFFFF, 0),
          payload=payload_bytes(200, 2))
    valid("data_room5_nhop5",
          "room full: five hops, lab speeds 1G/100M/10G/100G/40G, TS and txBytes at and "
          "near their wrap values, qLen saturated; pathID = s1^s2^s3^s4^s5; FIN",
          intf=int_fields(5, 5, hops=hops5),
          hdr=hdr_fields(DATA, FIN, None, flow, 0xFFFFFFFF_FFFFFF00, 0, 0x00000001, 0),
          payload=payload_bytes(256, 3))
    valid("data_room8_nhop3",
          "room 8 is the largest a sender may reserve and is valid; 3 of 8 stamped",
          intf=int_fields(3, 8, hops=[hop_1g, hop_10g, hop(B_100G, 0x10, 0x20, 0x30)]),
          hdr=hdr_fields(DATA, 0, None, flow + 1, 0, 0, 0x1000, 0),
          payload=payload_bytes(32, 4))
    valid("data_room0_probe_mode",
          "probe mode: room 0, COLLECT clear, the hpccd header right after the INT header",
          intf=int_fields(0, 0, flags=0),
          hdr=hdr_fields(DATA, 0, None, flow + 2, 4096, 0, 0x2000, 0),
          payload=payload_bytes(1000, 5))
    valid("data_overflow",
          "a switch found the room full: nHop == room == 2, COLLECT|OVERFLOW, the records "
          "of the first two hops unchanged; still valid",
          intf=int_fields(2, 2, flags=COLLECT | OVERFLOW, hops=[hop_1g, hop_100m]),
          hdr=hdr_fields(DATA, 0, None, flow + 3, 8192, 0, 0x3000, 0),
          payload=payload_bytes(48, 6))
    valid("data_hop_speed_unknown",
          "speed code 0 (unknown) is well formed on the wire: the parser accepts it, the "
          "algorithm ignores and counts the hop",
          intf=int_fields(1, 5, hops=[hop(0, 0x123456, 0x54321, 0x0042)]),
          hdr=hdr_fields(DATA, 0, None, flow + 4, 0, 0, 0x4000, 0),
          payload=payload_bytes(16, 7))

    # ---- LDCP ([LDCP]): first RTT not-ECT, stable ECT(0) ----
    valid("ldcp_first_rtt",
          "LDCP fast start: FIRST_RTT (and SYN) set and the IP ECN field not-ECT (00); "
          "parsers must leave the ECN bits as they are",
          intf=int_fields(0, 5),
          hdr=hdr_fields(DATA, FIRST_RTT | SYN, None, 0x1D1D0001, 0, 0, 0x5000, 0),
          payload=payload_bytes(1024, 8), ecn=NOT_ECT)
    valid("ldcp_stable",
          "LDCP after the first RTT: no FIRST_RTT, IP ECN ECT(0) (10)",
          intf=int_fields(0, 5),
          hdr=hdr_fields(DATA, 0, None, 0x1D1D0001, 1024 * 12, 0, 0x6000, 0),
          payload=payload_bytes(1024, 9), ecn=ECT0)

    # ---- answers ----
    def fb(seq, window=None):
        return {"fb_seq": seq, "fb_flags": 1 if window else 0, "window": window}

    # One ACK echoing three hops, with its true tag and with a forged one.
    ack_echo = dict(intf=int_fields(3, 5, flags=0, hops=[hop_1g, hop_100m, hop_10g]), to_b=False,
                    hdr=hdr_fields(ACK, INT_ECHO, None, flow, 0x2_0000_0000, seq0 + 164,
                                   0xDEADC0DE, 2),
                    feedback=fb(1))
    valid("ack_int_echo",
          "ACK echoing a DATA packet's padding: INT_ECHO, COLLECT cleared so the return "
          "path does not stamp, nHop/room/pathID/hops as the data packet carried them; "
          "len 16 = the trailer (fb_seq, fb_flags 0, tag over the reversed 5-tuple); aux = "
          "packets acknowledged",
          **ack_echo, tag="valid")
    valid("ack_ece_no_int",
          "ACK that echoes no telemetry (room 0) with ECE for DCTCP; the trailer",
          intf=int_fields(0, 0, flags=0), to_b=False,
          hdr=hdr_fields(ACK, ECE, None, flow, 0, seq0 + 64, 0xDEADBEEF, 1),
          feedback=fb(0xFFFFFFFF), tag="valid")
    valid("ack_forged",
          "ACK whose tag has one bit flipped (a forgery, or corrupted on the way): well "
          "formed (error 0), the tag does not verify: dropped and counted, never applied",
          **ack_echo, tag="corrupt")
    valid("ack_rxwin_sack",
          "Rx-HPCC ACK: two SACK blocks (payload), then the window block (FB_F_WINDOW: W, "
          "U x 65536, N, T), then the trailer; parsed from its end",
          intf=int_fields(0, 0, flags=0), to_b=False,
          hdr=hdr_fields(ACK, SACK, None, flow, seq0 + 9000, seq0 + 1000, 0x0BADF00D, 1),
          payload=struct.pack("!QQQQ", seq0 + 2000, seq0 + 3000, seq0 + 4000, seq0 + 5000),
          feedback=fb(77, {"w_bytes": 150_000, "u_q16": 0xF333, "n_flows": 4,
                           "reserved": 0, "t_ns": 13_000}), tag="valid")
    valid("ack_no_trailer",
          "ACK of len 0, without the trailer (cut, or an older sender): well formed, but "
          "it carries no tag, so a sender never applies it (counted as a bad tag)",
          intf=int_fields(0, 0, flags=0), to_b=False,
          hdr=hdr_fields(ACK, 0, None, flow, 0, seq0 + 64, 0xDEADBEEF, 1))
    valid("ack_odd_len_no_trailer",
          "ACK of len 18 (two bytes, then what would be a trailer): a feedback body is "
          "whole 4-byte words (its blocks are 16 bytes), so this one has no trailer: well "
          "formed, never applied (counted as a bad tag); the trailer is never misaligned",
          intf=int_fields(0, 0, flags=0), to_b=False,
          hdr=hdr_fields(ACK, 0, None, flow, 0, seq0 + 64, 0xDEADBEEF, 1),
          payload=b"\x00\x00" + struct.pack("!IIQ", 9, 0, 0))
    valid("nack",
          "NACK: ack = the byte to go back to, aux = packets received beyond the gap; "
          "the trailer",
          intf=int_fields(0, 0, flags=0), to_b=False,
          hdr=hdr_fields(NACK, 0, None, flow, 0, seq0 + 64, 0xFFFFFFFF, 3),
          feedback=fb(5), tag="valid")
    valid("nack_eth_padding_valid",
          "Ethernet padding beyond the IP total length is not part of the L4 payload: a "
          "NACK followed by 18 bytes of padding is valid (len 16 still matches)",
          intf=int_fields(0, 0, flags=0), to_b=False,
          hdr=hdr_fields(NACK, 0, None, flow, 0, seq0, 0x7000, 1),
          feedback=fb(6), tag="valid", trailer=bytes(18))

    valid("cnp",
          "CNP (DCQCN notification point): room 0, ack = next byte expected, ts echo of "
          "the CE-marked DATA, aux = CE-marked packets since the last CNP; len 16 = the "
          "trailer (fb_seq in the receiver flow's sequence of ACK / NACK / CNP, fb_flags "
          "0, tag over the reversed 5-tuple)",
          intf=int_fields(0, 0, flags=0), to_b=False,
          hdr=hdr_fields(CNP, 0, None, flow, 0, seq0 + 64, 0xCAFEF00D, 3),
          feedback=fb(9), tag="valid")
    valid("cnp_forged",
          "CNP whose tag has one bit flipped (forged, or corrupted on the way): well "
          "formed (error 0), the tag does not verify: dropped and counted, the rate not cut",
          intf=int_fields(0, 0, flags=0), to_b=False,
          hdr=hdr_fields(CNP, 0, None, flow, 0, seq0 + 64, 0xCAFEF00D, 3),
          feedback=fb(9), tag="corrupt")
    valid("cnp_no_trailer",
          "CNP of len 0, without the trailer (cut, or an older receiver): well formed, but "
          "it carries no tag, so a sender never applies it (counted as a bad tag)",
          intf=int_fields(0, 0, flags=0), to_b=False,
          hdr=hdr_fields(CNP, 0, None, flow, 0, seq0 + 64, 0xCAFEF00D, 3))
    valid("cnp_long_no_trailer",
          "CNP of len 32 (a window block before a trailer, as an ACK may carry): a CNP's "
          "trailer is its whole body, exactly 16 bytes, so this one has none: well "
          "formed, never applied (counted as a bad tag)",
          intf=int_fields(0, 0, flags=0), to_b=False,
          hdr=hdr_fields(CNP, 0, None, flow, 0, seq0 + 64, 0xCAFEF00D, 3),
          payload=struct.pack("!IIHHI", 150_000, 0xF333, 4, 0, 13_000) +
          struct.pack("!IIQ", 9, 1, 0))
    valid("data_cnp_wanted",
          "DATA of a DCQCN sender: aux bit 31 (CNPs wanted) with the SACK payload size 64",
          intf=int_fields(0, 5), hdr=hdr_fields(DATA, SACK, None, flow, seq0, 0, 0x1234,
                                                  0x80000000 | 64),
          payload=bytes(range(64)))

    # ---- probes and their answers over UDP ----
    valid("probe_udp",
          "PROBE over UDP: COLLECT, room 5, seq = probe number, len 8 = the zeroed tag slot",
          intf=int_fields(0, 5),
          hdr=hdr_fields(PROBE, 0, None, flow, 7, 0, 0x11223344, 0), tag="slot")
    probe_resp_int = int_fields(2, 5, flags=0, hops=[hop_1g, hop_10g])
    probe_resp_hdr = hdr_fields(PROBE_RESP, 0, None, flow, 7, 0, 0x11223344, 0)
    valid("probe_resp_udp",
          "PROBE_RESP: addresses and ports swapped, COLLECT cleared, the probe's two "
          "stamped hops kept, ts echoed, tag valid over the reversed (sender's) 5-tuple",
          intf=probe_resp_int, hdr=probe_resp_hdr, to_b=False, tag="valid")
    valid("probe_resp_udp_bad_tag",
          "PROBE_RESP whose tag has one bit flipped: well formed (error 0) but the tag "
          "does not verify, so it is dropped and counted, never applied",
          intf=probe_resp_int, hdr=probe_resp_hdr, to_b=False, tag="corrupt")

    # ---- NOTIFY (Rx-HPCC) ----
    w, t_ns = 150_000, 13_000
    notify = {"w_bytes": w, "rate_kbps": w * 8 * 1_000_000 // t_ns,   # W / T: bit/ns x 1e6
              "u_q16": 0x0000F333, "n_flows": 7, "reserved": 0, "notify_seq": 42,
              "t_ns": t_ns}
    notify_hdr = hdr_fields(NOTIFY, 0, None, flow, 0, seq0 + 164, 0xDEADC0DE, 0)
    valid("notify",
          "NOTIFY: room 0, len 32 = 24-byte body + tag, ack and ts echo, tag valid",
          intf=int_fields(0, 0, flags=0), hdr=notify_hdr, notify=notify, to_b=False,
          tag="valid")
    valid("notify_tag_other_flow",
          "NOTIFY whose tag was computed for another flow (sender port 49154): the prefix "
          "binds the tag to the 5-tuple, so it does not verify here; still error 0",
          intf=int_fields(0, 0, flags=0), hdr=notify_hdr, notify=notify, to_b=False,
          tag="valid", tag_flow=(IP_A, IP_B, SPORT_A + 1, UDP_PORT, 17))

    # ---- TCP-side probe and its answer ----
    valid("tcp_probe",
          "TCP-side probe: the TCP flow's 5-tuple, DSCP 45 with the flow's ECN (ECT(0)), "
          "TCP with no flag, seq = probe number, window 0, correct TCP checksum; then "
          "INT (COLLECT, room 5), PROBE, zeroed tag slot",
          l4="tcp", tcp_seq=1001, intf=int_fields(0, 5),
          hdr=hdr_fields(PROBE, 0, None, 0x7C700001, 1001, 0, 0x55667788, 0), tag="slot")
    valid("tcp_probe_resp",
          "PROBE_RESP to a TCP-side probe: addresses and ports swapped, still DSCP 45 and "
          "no TCP flag, COLLECT cleared, three stamped hops kept, tag over the probe "
          "sender's 5-tuple with proto 6",
          l4="tcp", tcp_seq=1001, to_b=False,
          intf=int_fields(3, 5, flags=0, hops=[hop_10g, hop_1g, hop_100m]),
          hdr=hdr_fields(PROBE_RESP, 0, None, 0x7C700001, 1001, 0, 0x55667788, 0),
          tag="valid")

    # ---- malformed, in the order of the checks ----
    E = dict(INT_TRUNC=1, MAGIC=2, INT_VERSION=3, ROOM=4, NHOP=5, HOPS_TRUNC=6,
             HDR_TRUNC=7, VERSION=8, TYPE=9, LEN=10)
    good = data_packet()                         # room 5: INT 4 + hops 40 + hdr 32 + 64
    good_frame = frame_udp(good)
    l4_off = 14 + 20 + 8

    malformed("err_int_trunc_empty", "UDP to the port with no payload: INT header truncated",
              E["INT_TRUNC"], frame_udp(b""))
    malformed("err_int_trunc_3", "3 bytes (a plausible INT header start, 0xc1): truncated",
              E["INT_TRUNC"], frame_udp(good[:3]))
    malformed("err_int_trunc_frame_cut",
              "the UDP length announces a whole packet but the frame ends 2 bytes into the "
              "INT header: the region is cut at the frame end (44 bytes, below the Ethernet "
              "minimum: for parsers fed from memory, not for a wire)",
              E["INT_TRUNC"], good_frame[:l4_off + 2])
    malformed("err_int_trunc_udp_len",
              "the UDP length announces 2 bytes although a whole DATA packet follows inside "
              "the IP total length: the UDP length bounds the region",
              E["INT_TRUNC"], frame_udp_short(good[:2], good[2:]))

    malformed("err_magic", "INT magic 0xD instead of 0xC", E["MAGIC"],
              frame_udp(bytes([0xD1]) + good[1:]))
    malformed("err_magic_zero", "an all-zero datagram to the port: magic 0",
              E["MAGIC"], frame_udp(bytes(80)))
    malformed("err_magic_before_version", "magic 0x5 and version 2: the magic is checked first",
              E["MAGIC"], frame_udp(bytes([0x52]) + good[1:]))

    malformed("err_int_version_2", "INT version 2", E["INT_VERSION"],
              frame_udp(bytes([0xC2]) + good[1:]))
    malformed("err_int_version_before_room",
              "INT version 0 and room 9: the version is checked before the room",
              E["INT_VERSION"], frame_udp(bytes([0xC0, 0x09]) + good[2:]))

    room9 = pack_int(int_fields(0, 9, hops=[])) + pack_hdr(hdr_fields(DATA, len_=0))
    malformed("err_room_9", "room 9 (> 8) with 9 zeroed records and a header present",
              E["ROOM"], frame_udp(room9))
    malformed("err_room_before_nhop", "room 15 and nHop 15: room > 8 is reported, not nHop",
              E["ROOM"], frame_udp(bytes([0xC1, 0xFF]) + good[2:]))

    malformed("err_nhop_gt_room", "nHop 6 with room 5", E["NHOP"],
              frame_udp(bytes([0xC1, 0x65]) + good[2:]))
    malformed("err_nhop_before_hops_trunc",
              "nHop 3, room 2 and only one record present: nHop > room is reported first",
              E["NHOP"], frame_udp(bytes([0xC1, 0x32, 0x80, 0x00]) + pack_hop(hop_1g)))

    malformed("err_hops_trunc", "room 5 but only 3 records follow, nothing else",
              E["HOPS_TRUNC"], frame_udp(good[:4 + 3 * 8]))
    malformed("err_hops_trunc_frame_cut",
              "UDP length right, frame cut one byte before the end of the fifth record",
              E["HOPS_TRUNC"], good_frame[:l4_off + 4 + 5 * 8 - 1])
    tcp_good = (pack_int(int_fields(0, 5)) +
                pack_hdr(hdr_fields(PROBE, len_=8, flow_id=0x7C700001, seq=1002)) + bytes(8))
    malformed("err_hops_trunc_tcp_probe",
              "TCP-side probe (DSCP 45, no flag, magic) whose IP total length covers only "
              "2 of its 5 records",
              E["HOPS_TRUNC"], frame_tcp(tcp_good[:4 + 2 * 8], tcp_seq=1002), l4="tcp")

    malformed("err_hdr_trunc_31", "room 5, all records, a 31-byte hpccd header",
              E["HDR_TRUNC"], frame_udp(good[:4 + 40 + 31]))
    malformed("err_hdr_trunc_room0", "room 0 and nothing after the INT header",
              E["HDR_TRUNC"], frame_udp(pack_int(int_fields(0, 0, flags=0))))

    hdr_at = 4 + 40
    malformed("err_version_2", "hpccd header version 2", E["VERSION"],
              frame_udp(good[:hdr_at] + bytes([0x21]) + good[hdr_at + 1:]))
    malformed("err_version_before_type", "hpccd version 0 and type 0: version reported",
              E["VERSION"], frame_udp(good[:hdr_at] + bytes([0x00]) + good[hdr_at + 1:]))

    for t in (0, 8, 15):
        malformed(f"err_type_{t}", f"hpccd type {t}, not in 1..7", E["TYPE"],
                  frame_udp(good[:hdr_at] + bytes([0x10 | t]) + good[hdr_at + 1:]))

    def with_len(pkt: bytes, n: int) -> bytes:
        return pkt[:hdr_at + 2] + struct.pack("!H", n) + pkt[hdr_at + 4:]

    malformed("err_len_plus_1", "DATA len one more than the payload", E["LEN"],
              frame_udp(with_len(good, 65)))
    malformed("err_len_minus_1", "DATA len one less than the payload", E["LEN"],
              frame_udp(with_len(good, 63)))
    malformed("err_len_padding_not_counted",
              "DATA len 6 more than the UDP payload holds, the frame carries 6 bytes of "
              "Ethernet padding after the IP total length: padding does not count",
              E["LEN"], frame_udp(with_len(good, 70)) + bytes(6))
    longer = bytearray(frame_udp(with_len(good, 64 + 8)))
    struct.pack_into("!H", longer, 14 + 20 + 4, 8 + len(good) + 8)   # UDP length + 8
    malformed("err_len_udp_len_beyond_ip",
              "the UDP length announces 8 bytes more than the IP total length holds and 8 "
              "bytes of Ethernet padding follow, len counting them: the region never "
              "extends past the IP total length (checksum not recomputed)",
              E["LEN"], bytes(longer) + bytes(8))
    malformed("err_len_frame_cut",
              "len and UDP length agree but the frame ends 10 bytes early: the region is "
              "cut at the frame end, so len no longer matches",
              E["LEN"], good_frame[:-10])
    malformed("err_len_ack_trailing",
              "ACK with len 0 followed by 4 more bytes inside the UDP length",
              E["LEN"], frame_udp(pack_int(int_fields(0, 0, flags=0)) +
                                  pack_hdr(hdr_fields(ACK, len_=0)) + b"\x00\x01\x02\x03",
                                  to_b=False))
    malformed("err_len_tcp_probe",
              "TCP-side probe with len 0 while its 8-byte tag slot follows",
              E["LEN"], frame_tcp(with_len(tcp_good, 0), tcp_seq=1002), l4="tcp")
    return list(VECTORS)


def document() -> dict:
    return {
        "format": FORMAT,
        "about": "hpccd wire-format test vectors; generated by tests/vectors/make_vectors.py "
                 "from docs/wire-format.md and include/hpccd/wire.h. hex: a complete Ethernet "
                 "frame without FCS. error: enum hpccd_wire_err (0 = valid). fields (valid "
                 "vectors only): ip = IPv4/L4 facts (ecn: 0 not-ECT, 2 ECT(0)); int.hops = "
                 "all room records as on the wire, the first nhop stamped, each the state of a "
                 "switch's egress port when the packet left its queue ([HPCC] section 4.1: "
                 "TS the departure time, txBytes the bytes sent with the packet, qLen the "
                 "bytes left behind it); hdr.seq/ack = the "
                 "64-bit values of the hi/lo halves; payload_len/payload_hex = DATA payload "
                 "(bytes after the header other than NOTIFY body, window block, trailer "
                 "and tag: an ACK's or NACK's SACK blocks); feedback = the ACK / NACK "
                 "trailer (fb_seq, fb_flags, window block or null; null without a "
                 "trailer); tag_hex = the 8 "
                 "tag bytes (PROBE: zeroed slot), tag_valid = whether it verifies under "
                 "tag_key_hex (null when the type carries no tag). Every frame is at least 60 "
                 "bytes (short ones zero-padded after the IP total length, as a NIC pads "
                 "them) except err_int_trunc_frame_cut, a capture cut short that cannot be "
                 "sent on a wire as it is.",
        "tag_key_hex": TAG_KEY.hex(),
        "udp_port": UDP_PORT,
        "probe_dscp": PROBE_DSCP,
        "vectors": build(),
    }


def render() -> str:
    return json.dumps(document(), indent=1) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default=str(HERE / "wire.json"),
                    help="output file, - for standard output (default: %(default)s)")
    args = ap.parse_args(argv)
    text = render()
    if args.output == "-":
        sys.stdout.write(text)
    else:
        pathlib.Path(args.output).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
