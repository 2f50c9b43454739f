"""scapy layers for the hpccd wire format (docs/wire-format.md, include/hpccd/wire.h).

The C headers are the definition; these layers follow docs/wire-format.md
field for field, and tests/vectors/wire.json checks them (and the C parser,
the BPF programs and the P4 program) against the same packets.

Layers, outermost first::

    UDP (sport or dport = the hpccd port) -> HpccdInt -> Hpccd -> body
    TCP-side probe (DSCP 45, no TCP flag)  -> HpccdInt -> Hpccd -> HpccdTag

where the body is Raw for DATA, HpccdTag for PROBE and PROBE_RESP,
HpccdNotify then HpccdTag for NOTIFY, and HpccdFeedback (SACK blocks, the
Rx-HPCC window, the trailer with its tag) for ACK and NACK, and (the trailer
alone) for CNP.  A TCP probe cannot be bound by port
(it carries the measured flow's own ports), so :func:`decode` dissects it.

Besides the layers:

* :func:`classify` is a byte-level reference parser: the ``enum
  hpccd_wire_err`` code of a frame, checked in the order of the spec, over
  the L4 payload region the spec defines.  It does not use scapy, so it
  reads like the C and BPF parsers it must agree with.
* :func:`tag_input`, :func:`compute_tag`, :func:`verify_tag` and
  :func:`set_tag`: the SipHash-2-4 integrity tag of NOTIFY, PROBE_RESP, ACK,
  NACK and CNP.
"""
from __future__ import annotations

import enum
import socket
import struct
from typing import Optional

from scapy.fields import (BitEnumField, BitField, BitFieldLenField, ConditionalField,
                          FlagsField, IntField, LenField, LongField, PacketListField,
                          ShortField, StrField, XBitField, XIntField, XLongField)
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Padding, Raw, bind_bottom_up, bind_layers, split_bottom_up, \
    split_layers

from .siphash import siphash24

__all__ = [
    "UDP_PORT_DEFAULT", "PROBE_DSCP_DEFAULT", "WIRE_VERSION", "INT_MAGIC", "INT_MAX_HOPS",
    "INT_DEFAULT_HOPS", "INT_F_COLLECT", "INT_F_OVERFLOW", "TYPES", "T_DATA", "T_ACK",
    "T_NACK", "T_PROBE", "T_PROBE_RESP", "T_NOTIFY", "T_CNP", "T_MAX", "AUX_CNP", "AUX_UNIT",
    "F_ECE", "F_CWR", "F_FIRST_RTT",
    "F_FIN", "F_RETX", "F_INT_ECHO", "F_SYN", "F_SACK", "SACK_BLOCK_BYTES", "SACK_MAX_BLOCKS", "SPEED_MBPS", "WireErr", "ERR_TEXT",
    "NOT_HPCCD", "HpccdHop", "HpccdInt", "Hpccd", "HpccdNotify", "HpccdTag", "HpccdFeedback",
    "FB_TRAILER_BYTES", "RXWIN_BYTES", "FB_F_WINDOW", "DATA_O_RXWIN",
    "bind_port", "bound_port", "int_header", "is_tcp_probe", "decode", "l4_region",
    "classify", "int_hops_bytes", "tag_input", "tagged_message", "compute_tag",
    "verify_tag", "set_tag", "packet_fields",
]

# ---- constants (include/hpccd/wire.h, include/hpccd/int_hop.h) ---------------

UDP_PORT_DEFAULT = 18471          # HPCCD_UDP_PORT_DEFAULT
PROBE_DSCP_DEFAULT = 45           # HPCCD_PROBE_DSCP_DEFAULT
WIRE_VERSION = 1                  # HPCCD_WIRE_VERSION
INT_MAGIC = 0xC                   # HPCCD_INT_MAGIC
INT_MAX_HOPS = 8                  # HPCCD_INT_MAX_HOPS
INT_DEFAULT_HOPS = 5              # HPCCD_INT_DEFAULT_HOPS
INT_HDR_BYTES = 4                 # HPCCD_INT_HDR_BYTES
INT_HOP_BYTES = 8                 # HPCCD_INT_HOP_BYTES
HDR_BYTES = 32                    # HPCCD_HDR_BYTES
NOTIFY_BYTES = 24                 # HPCCD_NOTIFY_BYTES
TAG_BYTES = 8                     # HPCCD_TAG_BYTES
TAG_INPUT_BYTES = 16              # HPCCD_TAG_INPUT_BYTES
FB_TRAILER_BYTES = 16             # HPCCD_FB_TRAILER_BYTES
RXWIN_BYTES = 16                  # HPCCD_RXWIN_BYTES
FB_BODY_MAX = 4 * 16 + 16 + 16    # HPCCD_FB_BODY_MAX
FB_F_WINDOW = 0x1                 # HPCCD_FB_F_WINDOW
DATA_O_RXWIN = 0x1                # HPCCD_DATA_O_RXWIN (DATA's ack field)
INT_TX_UNIT = 128                 # HPCCD_INT_TX_UNIT, bytes
INT_QLEN_UNIT = 80                # HPCCD_INT_QLEN_UNIT, bytes
INT_QLEN_MAX = 0x7FFF             # HPCCD_INT_QLEN_MAX (saturating gauge)

INT_F_COLLECT = 0x8               # HPCCD_INT_F_COLLECT
INT_F_OVERFLOW = 0x4              # HPCCD_INT_F_OVERFLOW

T_DATA, T_ACK, T_NACK, T_PROBE, T_PROBE_RESP, T_NOTIFY, T_CNP = 1, 2, 3, 4, 5, 6, 7  # hpccd_type
T_MAX = T_CNP                                                               # HPCCD_T_MAX
TYPES = {T_DATA: "DATA", T_ACK: "ACK", T_NACK: "NACK", T_PROBE: "PROBE",
         T_PROBE_RESP: "PROBE_RESP", T_NOTIFY: "NOTIFY", T_CNP: "CNP"}

F_ECE, F_CWR, F_FIRST_RTT, F_FIN, F_RETX, F_INT_ECHO, F_SYN, F_SACK = (
    0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80)                        # HPCCD_F_*
AUX_CNP, AUX_UNIT = 0x80000000, 0x7FFFFFFF       # HPCCD_AUX_*: DATA aux, CNPs wanted | unit
SACK_BLOCK_BYTES, SACK_MAX_BLOCKS = 16, 4                                   # HPCCD_SACK_*

# Port speed codes (B) in Mbit/s, index = code; 0 = unknown.  The same table
# as fastpath/cc/int_decode.c (tests/unit/test_wire_scapy.py checks it
# against the C one).
SPEED_MBPS = (
    0, 10, 20, 25, 40, 50, 100, 200,
    250, 300, 400, 500, 600, 800, 1000, 1500,
    2000, 2500, 3000, 4000, 5000, 8000, 10000, 20000,
    25000, 40000, 50000, 100000, 200000, 400000, 800000, 1600000,
)


class WireErr(enum.IntEnum):
    """enum hpccd_wire_err: why a packet to the hpccd port is malformed."""

    OK = 0
    INT_TRUNC = 1
    MAGIC = 2
    INT_VERSION = 3
    ROOM = 4
    NHOP = 5
    HOPS_TRUNC = 6
    HDR_TRUNC = 7
    VERSION = 8
    TYPE = 9
    LEN = 10

    @property
    def c_name(self) -> str:
        return "HPCCD_E_" + self.name


# The fault column of docs/wire-format.md, "Malformed packets".
ERR_TEXT = {
    WireErr.OK: "valid",
    WireErr.INT_TRUNC: "INT header truncated",
    WireErr.MAGIC: "INT magic is not 0xC",
    WireErr.INT_VERSION: "INT version is not 1",
    WireErr.ROOM: "room > 8",
    WireErr.NHOP: "nHop > room",
    WireErr.HOPS_TRUNC: "hop records truncated (fewer than room x 8 bytes follow)",
    WireErr.HDR_TRUNC: "hpccd header truncated",
    WireErr.VERSION: "hpccd version is not 1",
    WireErr.TYPE: "type not in 1..7",
    WireErr.LEN: "len differs from the bytes that follow the hpccd header",
}

# classify() of a frame that is not an hpccd packet at all (not IPv4, not to
# or from the hpccd port, not a TCP-side probe): it passes to the kernel.
NOT_HPCCD = -1


# ---- layers -------------------------------------------------------------------

class HpccdHop(Packet):
    """One INT hop record (8 bytes), include/hpccd/int_hop.h::

        struct hpccd_int_hop_wire {
                __be32 hi_be;     /* bits 63..32 of the hop word */
                __be32 lo_be;     /* bits 31..0 */
        };

    The two halves are one 64-bit big-endian word, most significant bit
    first: B (speed code, 5) | TS (ns mod 2^24, 24) | txBytes (128 B units
    mod 2^20, 20) | qLen (80 B units, saturating, 15).
    """

    name = "hpccd INT hop"
    fields_desc = [
        BitField("speed_code", 0, 5),    # B: index into SPEED_MBPS, 0 = unknown
        BitField("ts", 0, 24),           # TS: egress time, ns mod 2^24
        BitField("tx_units", 0, 20),     # txBytes: 128-byte units mod 2^20
        BitField("qlen_units", 0, 15),   # qLen: 80-byte units, saturates at 0x7fff
    ]

    def extract_padding(self, s):
        return b"", s                    # a hop is exactly 8 bytes; the rest is the next hop

    @property
    def bw_mbps(self) -> int:
        return SPEED_MBPS[self.speed_code]

    @property
    def bw_bps(self) -> int:
        """Port speed in bit/s; 0 for an unknown code (the hop is ignored)."""
        return SPEED_MBPS[self.speed_code] * 1_000_000

    @property
    def ts_ns(self) -> int:
        return self.ts

    @property
    def tx_bytes(self) -> int:
        """txBytes in bytes, still modulo 2^20 x 128 (128 MiB)."""
        return self.tx_units * INT_TX_UNIT

    @property
    def qlen_bytes(self) -> int:
        return self.qlen_units * INT_QLEN_UNIT

    def mysummary(self):
        return self.sprintf("hop B=%speed_code% TS=%ts% tx=%tx_units% q=%qlen_units%")


class HpccdInt(Packet):
    """INT header (4 bytes) and the ``room`` hop records after it, include/hpccd/wire.h::

        struct hpccd_int_hdr {
                __u8 magic_ver;     /* HPCCD_INT_MAGIC << 4 | HPCCD_WIRE_VERSION */
                __u8 nhop_room;     /* nHop << 4 | room; nHop <= room <= HPCCD_INT_MAX_HOPS */
                __be16 path_flags;  /* flags << 12 | pathID (XOR of 12-bit switch ids) */
        };

    ``hops`` holds all ``room`` records as they sit in the packet; the first
    ``nhop`` were stamped by switches, the others are the sender's zeroes.
    ``room`` left at None is filled with ``len(hops)`` (see :func:`int_header`
    to reserve zeroed records).
    """

    name = "hpccd INT"
    fields_desc = [
        XBitField("magic", INT_MAGIC, 4),
        BitField("ver", WIRE_VERSION, 4),
        BitField("nhop", 0, 4),
        BitFieldLenField("room", None, 4, count_of="hops"),
        FlagsField("flags", 0, 4, {INT_F_COLLECT: "COLLECT", INT_F_OVERFLOW: "OVERFLOW"}),
        XBitField("path_id", 0, 12),
        PacketListField("hops", [], HpccdHop, count_from=lambda pkt: pkt.room),
    ]

    def stamped(self) -> list:
        """The hop records switches wrote (the first nHop of them)."""
        return list(self.hops[:self.nhop])

    def mysummary(self):
        return self.sprintf("INT nHop=%nhop%/%room% flags=%flags% pathID=%path_id%")


class Hpccd(Packet):
    """hpccd transport header (32 bytes), include/hpccd/wire.h::

        struct hpccd_hdr {
                __u8 ver_type;      /* HPCCD_WIRE_VERSION << 4 | type */
                __u8 flags;
                __be16 len;         /* bytes after this header: payload or body incl. tag */
                __be32 flow_id;
                __be32 seq_hi;      /* DATA: byte sequence of the first payload byte; */
                __be32 seq_lo;      /*   PROBE/PROBE_RESP: probe number */
                __be32 ack_hi;      /* ACK/NACK/NOTIFY: cumulative ACK, next byte expected */
                __be32 ack_lo;
                __be32 ts;          /* DATA/PROBE: sender clock, ns mod 2^32; answers: echo */
                __be32 aux;         /* ACK: packets acknowledged; NACK: beyond the gap */
        };

    seq and ack are each one 64-bit big-endian field here: two big-endian
    32-bit halves, high half first, are exactly that.  ``len`` left at None
    is filled with the length of the payload.
    """

    name = "hpccd"
    fields_desc = [
        BitField("ver", WIRE_VERSION, 4),
        BitEnumField("type", T_DATA, 4, TYPES),
        FlagsField("flags", 0, 8, {F_ECE: "ECE", F_CWR: "CWR", F_FIRST_RTT: "FIRST_RTT",
                                   F_FIN: "FIN", F_RETX: "RETX", F_INT_ECHO: "INT_ECHO",
                                   F_SYN: "SYN", F_SACK: "SACK"}),
        LenField("len", None),
        XIntField("flow_id", 0),
        LongField("seq", 0),
        LongField("ack", 0),
        IntField("ts", 0),
        IntField("aux", 0),
    ]

    def extract_padding(self, s):
        return s[:self.len], s[self.len:]   # `len` counts the bytes after the header exactly

    def mysummary(self):
        return self.sprintf("hpccd %type% flow=%flow_id% seq=%seq% ack=%ack% len=%len%")


class HpccdNotify(Packet):
    """NOTIFY body (24 bytes, then the tag), include/hpccd/wire.h::

        struct hpccd_notify {
                __be32 w_bytes;     /* W computed at the receiver */
                __be32 rate_kbps;   /* R = W / T in kbit/s */
                __be32 u_q16;       /* U x 65536, saturated at 2^32 - 1 */
                __be16 n_flows;     /* receiver-measured concurrent flows N */
                __be16 reserved;
                __be32 notify_seq;  /* per-flow counter, for replay protection */
                __be32 t_ns;        /* T the receiver used, ns */
        };
    """

    name = "hpccd NOTIFY"
    fields_desc = [
        IntField("w_bytes", 0),
        IntField("rate_kbps", 0),
        IntField("u_q16", 0),
        ShortField("n_flows", 0),
        ShortField("reserved", 0),
        IntField("notify_seq", 0),
        IntField("t_ns", 0),
    ]


class HpccdTag(Packet):
    """Integrity tag (8 bytes), last in PROBE (zeroed slot), PROBE_RESP and NOTIFY::

        struct hpccd_tag {
                __be32 hi;
                __be32 lo;
        };

    The SipHash-2-4 output, big-endian: hi then lo is one 64-bit field here.
    """

    name = "hpccd tag"
    fields_desc = [XLongField("tag", 0)]

    def extract_padding(self, s):
        return b"", s                    # the tag is the last thing hpccd puts in a packet


class HpccdFeedback(Packet):
    """Body of an ACK or NACK, parsed from its end (docs/wire-format.md "Feedback
    trailer"): the SACK blocks, the Rx-HPCC window block when the trailer's
    FB_F_WINDOW says so, then the trailer; the body of a CNP, the trailer alone
    (exactly 16 bytes: no SACK blocks, no window block), include/hpccd/wire.h::

        struct hpccd_rxwin {            /* only with HPCCD_FB_F_WINDOW */
                __be32 w_bytes;  __be32 u_q16;  __be16 n_flows;  __be16 reserved;
                __be32 t_ns;
        };
        struct hpccd_fb_trailer {
                __be32 fb_seq;  __be32 fb_flags;  __be32 tag_hi;  __be32 tag_lo;
        };

    ``fb_seq`` None: no trailer (a body shorter than it or longer than
    FB_BODY_MAX, or not whole 4-byte words; of a CNP, any body but 16 bytes; all
    ``sack``: never applied by a
    sender, counted as a bad tag).  ``w_bytes`` None: no window
    block (built or dissected; the C parser takes one when FB_F_WINDOW is set
    and 16 bytes precede the trailer).
    """

    name = "hpccd ACK/NACK body"
    fields_desc = [
        StrField("sack", b""),
        ConditionalField(IntField("w_bytes", None), lambda p: _has_win(p)),
        ConditionalField(IntField("u_q16", 0), lambda p: _has_win(p)),
        ConditionalField(ShortField("n_flows", 0), lambda p: _has_win(p)),
        ConditionalField(ShortField("reserved", 0), lambda p: _has_win(p)),
        ConditionalField(IntField("t_ns", 0), lambda p: _has_win(p)),
        ConditionalField(IntField("fb_seq", 0), lambda p: _has_trailer(p)),
        ConditionalField(IntField("fb_flags", 0), lambda p: _has_trailer(p)),
        ConditionalField(XLongField("tag", 0), lambda p: _has_trailer(p)),
    ]

    def do_dissect(self, s):
        n = len(s)
        cnp = isinstance(self.underlayer, Hpccd) and self.underlayer.type == T_CNP
        if (n != FB_TRAILER_BYTES) if cnp else (not FB_TRAILER_BYTES <= n <= FB_BODY_MAX
                                                 or n % 4):
            self.fields.update(sack=s, fb_seq=None, w_bytes=None)
            return b""
        end = n - FB_TRAILER_BYTES
        seq, flags, tag = struct.unpack("!IIQ", s[end:])
        self.fields.update(fb_seq=seq, fb_flags=flags, tag=tag, w_bytes=None)
        if not cnp and flags & FB_F_WINDOW and end >= RXWIN_BYTES:
            end -= RXWIN_BYTES
            w, u, nf, r, t = struct.unpack("!IIHHI", s[end:end + RXWIN_BYTES])
            self.fields.update(w_bytes=w, u_q16=u, n_flows=nf, reserved=r, t_ns=t)
        self.fields["sack"] = s[:end]
        return b""

    def extract_padding(self, s):
        return b"", s

    def has_trailer(self) -> bool:
        return _has_trailer(self)

    def window(self) -> Optional[dict]:
        """The window block's fields, or None."""
        if not _has_win(self):
            return None
        return {k: self.getfieldval(k) for k in ("w_bytes", "u_q16", "n_flows", "reserved",
                                                 "t_ns")}


def _has_trailer(p) -> bool:
    return p.getfieldval("fb_seq") is not None


def _has_win(p) -> bool:
    """Whether a feedback body carries the window block: a trailer with FB_F_WINDOW and
    the block's fields (getfieldval: no field conversion, so no recursion)."""
    return (_has_trailer(p) and bool((p.getfieldval("fb_flags") or 0) & FB_F_WINDOW) and
            p.getfieldval("w_bytes") is not None)


# ---- bindings -------------------------------------------------------------------

_bound_port: Optional[int] = None


def bind_port(port: int = UDP_PORT_DEFAULT) -> None:
    """Dissect UDP to or from ``port`` as hpccd (and build UDP()/HpccdInt() with it)."""
    global _bound_port
    if not 0 < port < 65536:
        raise ValueError(f"UDP port out of range: {port}")
    if _bound_port is not None:
        split_bottom_up(UDP, HpccdInt, sport=_bound_port)
        split_layers(UDP, HpccdInt, dport=_bound_port)
    # Answers (ACK, NACK, PROBE_RESP, NOTIFY, CNP) come from the port: dissect only.
    bind_bottom_up(UDP, HpccdInt, sport=port)
    # Data and probes go to the port; building UDP()/HpccdInt() sets dport.
    bind_layers(UDP, HpccdInt, dport=port)
    _bound_port = port


def bound_port() -> Optional[int]:
    return _bound_port


bind_port(UDP_PORT_DEFAULT)
# The hpccd header follows the INT header (and its hop records) in every packet.
bind_layers(HpccdInt, Hpccd)
# NOTIFY: the Rx-HPCC body, then the tag.
bind_layers(Hpccd, HpccdNotify, type=T_NOTIFY)
# The NOTIFY body is followed by its tag.
bind_layers(HpccdNotify, HpccdTag)
# PROBE: the zeroed tag slot the reflector fills.
bind_layers(Hpccd, HpccdTag, type=T_PROBE)
# PROBE_RESP: the tag and nothing else.
bind_layers(Hpccd, HpccdTag, type=T_PROBE_RESP)
# ACK and NACK: SACK blocks, window, trailer (parsed from the end).
bind_layers(Hpccd, HpccdFeedback, type=T_ACK)
bind_layers(Hpccd, HpccdFeedback, type=T_NACK)
# CNP: the trailer (its whole body).
bind_layers(Hpccd, HpccdFeedback, type=T_CNP)
# DATA payload: Raw, scapy's default.


def int_header(room: int = INT_DEFAULT_HOPS, **fields) -> HpccdInt:
    """An INT header with ``room`` zeroed hop records reserved (sender's view)."""
    hops = fields.pop("hops", None)
    if hops is None:
        hops = [HpccdHop() for _ in range(room)]
    return HpccdInt(room=room, hops=list(hops), **fields)


# ---- TCP-side probes -----------------------------------------------------------------

def is_tcp_probe(pkt: Packet, dscp: int = PROBE_DSCP_DEFAULT) -> bool:
    """IPv4 with the probe DSCP, TCP with no flag set, payload starting with INT magic.

    The receiver's test of docs/wire-format.md, "TCP-side probe"; the ECN
    bits are the flow's and are not looked at.
    """
    if IP not in pkt or TCP not in pkt:
        return False
    ip, tcp = pkt[IP], pkt[TCP]
    if ip.tos >> 2 != dscp or int(tcp.flags) != 0:
        return False
    payload = bytes(tcp.payload)
    return len(payload) >= 1 and payload[0] >> 4 == INT_MAGIC


def decode(frame: bytes, dscp: int = PROBE_DSCP_DEFAULT) -> Packet:
    """Dissect an Ethernet frame, TCP-side probes included (their TCP payload as HpccdInt).

    A frame shorter than an Ethernet header comes back as Raw: scapy's Ether
    raises struct.error on it (found by tests/fuzz/test_fuzz_wire.py)."""
    frame = bytes(frame)
    if len(frame) < 14:
        return Raw(frame)
    pkt = Ether(frame)
    if not is_tcp_probe(pkt, dscp):
        return pkt
    region = l4_region(frame, dscp=dscp)
    if region is None or region[0] != "tcp":
        return pkt
    _, _, start, end = region
    if end - start < INT_HDR_BYTES:
        return pkt             # the magic and less: HpccdInt(...) would raise struct.error
    tcp = pkt[TCP]
    tcp.remove_payload()
    tcp.add_payload(HpccdInt(frame[start:end]))
    if end < len(frame):
        pkt.lastlayer().add_payload(Padding(frame[end:]))
    return pkt


# ---- classification (reference byte parser) ---------------------------------------------

_ETH_P_IP = 0x0800
_ETH_P_8021Q = 0x8100
_IPPROTO_TCP = 6
_IPPROTO_UDP = 17


def l4_region(frame: bytes, port: Optional[int] = None,
              dscp: int = PROBE_DSCP_DEFAULT) -> Optional[tuple[str, int, int, int]]:
    """Where the hpccd bytes of a frame are: ``(l4, l4_offset, start, end)`` or None.

    ``l4`` is "udp" or "tcp"; ``start`` is the first byte after the L4 header
    (the INT header), ``end`` the end of the L4 payload as the headers
    announce it (UDP length; for TCP, IPv4 total length less the IP and TCP
    headers), never past the IPv4 total length (Ethernet padding is not part
    of it) and cut at the end of the frame.

    None for a frame that is not an hpccd packet: not IPv4 over Ethernet
    (one 802.1Q tag allowed), IPv4 total length below its header, a non-first
    fragment, L4 header not complete within the IP payload and the frame, a
    UDP length below 8, UDP with neither port the hpccd port, TCP that is not
    a probe (DSCP, no flag, and at least the byte with the INT magic).
    These are the outer checks of include/hpccd/parse.h, in Python.
    """
    port = _bound_port if port is None else port
    n = len(frame)
    if n < 14:
        return None
    ip = 14
    ethertype = struct.unpack_from("!H", frame, 12)[0]
    if ethertype == _ETH_P_8021Q:
        if n < 18:
            return None
        ethertype = struct.unpack_from("!H", frame, 16)[0]
        ip = 18
    if ethertype != _ETH_P_IP or ip + 20 > n:
        return None
    vihl, tos, tot_len, _id, frag, _ttl, proto = struct.unpack_from("!BBHHHBB", frame, ip)
    ihl = (vihl & 0xF) * 4
    if vihl >> 4 != 4 or ihl < 20 or ip + ihl > n or tot_len < ihl or frag & 0x1FFF:
        return None
    l4 = ip + ihl
    ip_end = min(ip + tot_len, n)
    if proto == _IPPROTO_UDP:
        if l4 + 8 > ip_end:
            return None
        sport, dport, ulen = struct.unpack_from("!HHH", frame, l4)
        if ulen < 8 or port not in (sport, dport):
            return None
        return "udp", l4, l4 + 8, min(l4 + ulen, ip_end)
    if proto == _IPPROTO_TCP:
        if l4 + 20 > ip_end or tos >> 2 != dscp:
            return None
        doff = (frame[l4 + 12] >> 4) * 4
        flags = ((frame[l4 + 12] & 0x1) << 8) | frame[l4 + 13]    # AE/NS + the 8 classic ones
        start = l4 + doff
        if doff < 20 or start > ip_end or flags:
            return None
        if start >= ip_end or frame[start] >> 4 != INT_MAGIC:
            return None        # the receiver tells probes apart by the magic
        return "tcp", l4, start, ip_end
    return None


def classify(frame: bytes, port: Optional[int] = None,
             dscp: int = PROBE_DSCP_DEFAULT) -> int:
    """The ``enum hpccd_wire_err`` code of an Ethernet frame (0 = well formed).

    Checks in the order of docs/wire-format.md, "Malformed packets", and
    returns the first fault.  :data:`NOT_HPCCD` (-1) for a frame that is not
    an hpccd packet (see :func:`l4_region`).
    """
    frame = bytes(frame)
    region = l4_region(frame, port, dscp)
    if region is None:
        return NOT_HPCCD
    _, _, start, end = region
    b = frame[start:end]
    if len(b) < INT_HDR_BYTES:
        return WireErr.INT_TRUNC
    if b[0] >> 4 != INT_MAGIC:
        return WireErr.MAGIC
    if b[0] & 0xF != WIRE_VERSION:
        return WireErr.INT_VERSION
    nhop, room = b[1] >> 4, b[1] & 0xF
    if room > INT_MAX_HOPS:
        return WireErr.ROOM
    if nhop > room:
        return WireErr.NHOP
    hdr = INT_HDR_BYTES + room * INT_HOP_BYTES
    if len(b) < hdr:
        return WireErr.HOPS_TRUNC
    if len(b) < hdr + HDR_BYTES:
        return WireErr.HDR_TRUNC
    if b[hdr] >> 4 != WIRE_VERSION:
        return WireErr.VERSION
    if not T_DATA <= b[hdr] & 0xF <= T_MAX:
        return WireErr.TYPE
    if struct.unpack_from("!H", b, hdr + 2)[0] != len(b) - hdr - HDR_BYTES:
        return WireErr.LEN
    return WireErr.OK


# ---- INT helpers ----------------------------------------------------------------------

def int_hops_bytes(pkt: Packet, stamped_only: bool = True) -> bytes:
    """The hop records as they sit in the packet (8 bytes each), for cc.Hpcc.new_ack_wire.

    Only the nHop stamped ones unless ``stamped_only`` is False.
    """
    i = pkt[HpccdInt]
    hops = i.hops[:i.nhop] if stamped_only else i.hops
    return b"".join(bytes(h) for h in hops)


# ---- integrity tag --------------------------------------------------------------------

# Sent by the data receiver: their tag prefix is the reverse of their own addresses.
_ANSWER_TYPES = (T_ACK, T_NACK, T_PROBE_RESP, T_NOTIFY, T_CNP)
_TAGGED_TYPES = (T_PROBE_RESP, T_NOTIFY, T_ACK, T_NACK, T_CNP)


def _as_packet(pkt) -> Packet:
    return decode(pkt) if isinstance(pkt, (bytes, bytearray, memoryview)) else pkt


def tag_input(pkt) -> bytes:
    """The 16-byte prefix of the tagged message (struct hpccd_tag_input).

    The 5-tuple as the data (or probe) sender sees its flow: a packet's own
    addresses for DATA and PROBE, their reverse for the answers (ACK, NACK,
    PROBE_RESP, NOTIFY, CNP).  ``pkt`` is a scapy packet or frame bytes.
    """
    pkt = _as_packet(pkt)
    if IP not in pkt or Hpccd not in pkt:
        raise ValueError("not an hpccd packet over IPv4")
    ip = pkt[IP]
    l4 = pkt[UDP] if UDP in pkt else pkt[TCP] if TCP in pkt else None
    if l4 is None:
        raise ValueError("hpccd packet neither over UDP nor TCP")
    saddr, daddr, sport, dport = ip.src, ip.dst, l4.sport, l4.dport
    if pkt[Hpccd].type in _ANSWER_TYPES:
        saddr, daddr, sport, dport = daddr, saddr, dport, sport
    return struct.pack("!4s4sHHB3x", socket.inet_aton(saddr), socket.inet_aton(daddr), sport, dport,
                       _IPPROTO_UDP if isinstance(l4, UDP) else _IPPROTO_TCP)


def tagged_message(pkt) -> tuple[bytes, bytes]:
    """``(message, tag_bytes)``: the prefix plus every byte from the INT header to the
    tag, and the 8 bytes in the tag position (the last 8 of the ``len`` bytes)."""
    pkt = _as_packet(pkt)
    if HpccdInt not in pkt:
        raise ValueError("no INT header")
    i, h = pkt[HpccdInt], pkt[Hpccd]
    raw = bytes(i)
    body = h.len if h.len is not None else len(bytes(h.payload))   # None: being built
    off = INT_HDR_BYTES + i.room * INT_HOP_BYTES + HDR_BYTES + body - TAG_BYTES
    if body < TAG_BYTES or off + TAG_BYTES > len(raw):
        raise ValueError("packet too short to carry a tag")
    return tag_input(pkt) + raw[:off], raw[off:off + TAG_BYTES]


def compute_tag(key16: bytes, pkt) -> bytes:
    """The 8-byte tag (SipHash-2-4 output, big-endian) the packet should carry."""
    msg, _ = tagged_message(pkt)
    return siphash24(key16, msg).to_bytes(8, "big")


def verify_tag(key16: bytes, pkt) -> bool:
    """Whether a PROBE_RESP, NOTIFY, ACK, NACK or CNP carries the right tag under
    ``key16``."""
    pkt = _as_packet(pkt)
    if Hpccd not in pkt or pkt[Hpccd].type not in _TAGGED_TYPES:
        raise ValueError("only PROBE_RESP, NOTIFY, ACK, NACK and CNP carry a tag")
    msg, tag = tagged_message(pkt)
    return siphash24(key16, msg).to_bytes(8, "big") == tag


def set_tag(key16: bytes, pkt: Packet) -> Packet:
    """Write the tag of a PROBE_RESP or NOTIFY being built into its HpccdTag layer (of an
    ACK, NACK or CNP, into its HpccdFeedback trailer)."""
    layer = pkt[HpccdFeedback] if HpccdFeedback in pkt else pkt[HpccdTag]
    layer.tag = int.from_bytes(compute_tag(key16, pkt), "big")
    return pkt


# ---- fields in the shape of tests/vectors/wire.json ------------------------------------

def packet_fields(pkt, key16: Optional[bytes] = None) -> dict:
    """The fields of a well-formed hpccd packet as tests/vectors/wire.json writes them.

    ``tag_valid`` is None unless ``key16`` is given and the type carries a tag.
    """
    pkt = _as_packet(pkt)
    if HpccdInt not in pkt or Hpccd not in pkt:
        raise ValueError("not a (well-formed) hpccd packet")
    ip = pkt[IP]
    l4 = pkt[UDP] if UDP in pkt else pkt[TCP]
    i, h = pkt[HpccdInt], pkt[Hpccd]
    # A NOTIFY body and a tag (slot) exist only when len is the table's
    # (docs/wire-format.md; struct hpccd_wire_info has_notify / has_tag):
    # the layers dissect one from other lengths too (tests/fuzz found a
    # PROBE_RESP of len 7 making verify_tag raise).
    has_notify = h.type == T_NOTIFY and h.len == NOTIFY_BYTES + TAG_BYTES
    fb = pkt[HpccdFeedback] if HpccdFeedback in pkt else None
    has_trailer = fb is not None and fb.has_trailer()
    has_tag = has_notify or has_trailer or (h.type in (T_PROBE, T_PROBE_RESP) and
                                            h.len == TAG_BYTES)
    notify = None
    if has_notify and HpccdNotify in pkt:
        n = pkt[HpccdNotify]
        notify = {f.name: n.getfieldval(f.name) for f in n.fields_desc}
    feedback = None
    if has_trailer:
        feedback = {"fb_seq": fb.fb_seq, "fb_flags": fb.fb_flags, "window": fb.window()}
    if has_trailer:
        tag_hex = f"{fb.tag:016x}"
    else:
        tag_hex = f"{pkt[HpccdTag].tag:016x}" if has_tag and HpccdTag in pkt else None
    tag_valid = None
    if key16 is not None and has_tag and h.type in _TAGGED_TYPES:
        tag_valid = verify_tag(key16, pkt)
    payload = h.payload
    if fb is not None:
        data = fb.sack                                          # the SACK blocks
    else:
        data = payload.load if type(payload) is Raw else b""  # Padding is not payload
    return {
        "ip": {"src": ip.src, "dst": ip.dst, "dscp": ip.tos >> 2, "ecn": ip.tos & 3,
               "proto": ip.proto, "sport": l4.sport, "dport": l4.dport},
        "int": {"magic": i.magic, "ver": i.ver, "nhop": i.nhop, "room": i.room,
                "flags": int(i.flags), "path_id": i.path_id,
                "hops": [{"speed_code": hp.speed_code, "ts": hp.ts, "tx_units": hp.tx_units,
                          "qlen_units": hp.qlen_units} for hp in i.hops]},
        "hdr": {"ver": h.ver, "type": h.type, "flags": int(h.flags), "len": h.len,
                "flow_id": h.flow_id, "seq": h.seq, "ack": h.ack, "ts": h.ts, "aux": h.aux},
        "notify": notify,
        "feedback": feedback,
        "tag_hex": tag_hex,
        "tag_valid": tag_valid,
        "payload_len": len(data),
        "payload_hex": data.hex(),
    }
