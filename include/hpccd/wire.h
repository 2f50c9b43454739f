/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * hpccd wire format: every structure hpccd puts on the wire after the L4
 * header, defined once.  docs/wire-format.md draws them; the scapy layers
 * (daemon/hpccd/core/wire.py) and the P4 headers (switch_p4/) follow the same
 * document, and tests/vectors/ checks all of them against each other.
 *
 * Who may include this: the BPF programs (after vmlinux.h), the C fast
 * path, and the cffi cdef.  No maps, no functions.
 *
 * Byte order: every multi-byte field is big-endian (network order) on the
 * wire; the __be* types say so.  64-bit quantities are split into two
 * __be32 halves so that every structure needs only 4-byte alignment: after
 * Ethernet (14), IPv4 (20) and UDP (8) the INT header starts 2 bytes past
 * an 8-byte boundary, and BPF must not rely on unaligned 8-byte loads.
 *
 * Packet layout (native transport over UDP, and TCP-side probes):
 *
 *   Ethernet | IPv4 | UDP (dport = HPCCD_UDP_PORT) | INT header | room x hop
 *            | hpccd header | body (payload, NOTIFY, tag, ...)
 *   Ethernet | IPv4 (DSCP = probe DSCP) | TCP (no flags) | INT header
 *            | room x hop | hpccd header (PROBE/PROBE_RESP) | tag
 *
 * The INT padding sits right after the L4 header, as in [HPCC] section
 * 4.1 (after UDP, before the transport header), so that a switch finds it
 * at a fixed offset without parsing the transport.
 */
#ifndef HPCCD_WIRE_H
#define HPCCD_WIRE_H

#include "int_hop.h"

#define HPCCD_UDP_PORT_DEFAULT   18471  /* configurable; unassigned by IANA */
#define HPCCD_PROBE_DSCP_DEFAULT 45     /* TCP-side probes ([HPCC++2022] section 7.2) */
#define HPCCD_WIRE_VERSION       1

/* ---- INT header (4 bytes), then `room` hop records of 8 bytes ----------- */

#define HPCCD_INT_MAGIC          0xC      /* high nibble of byte 0 */

/* flags (high 4 bits of path_flags) */
#define HPCCD_INT_F_COLLECT      0x8      /* switches stamp hops (DATA, PROBE) */
#define HPCCD_INT_F_OVERFLOW     0x4      /* a switch found the room full */
#define HPCCD_INT_F_MASK         0xc
#define HPCCD_INT_PATH_MASK      0x0fff   /* 12-bit pathID ([HPCC] section 4.1) */

struct hpccd_int_hdr {
	__u8 magic_ver;     /* HPCCD_INT_MAGIC << 4 | HPCCD_WIRE_VERSION */
	__u8 nhop_room;     /* nHop << 4 | room; nHop <= room <= HPCCD_INT_MAX_HOPS */
	__be16 path_flags;  /* flags << 12 | pathID (XOR of 12-bit switch ids) */
};

/* ---- hpccd transport header (32 bytes) ------------------------------------ */

enum hpccd_type {
	HPCCD_T_DATA = 1,
	HPCCD_T_ACK = 2,
	HPCCD_T_NACK = 3,
	HPCCD_T_PROBE = 4,
	HPCCD_T_PROBE_RESP = 5,
	HPCCD_T_NOTIFY = 6,
	HPCCD_T_CNP = 7,    /* DCQCN congestion notification (docs/wire-format.md) */
	HPCCD_T_MAX = 7,
};

/* flags */
#define HPCCD_F_ECE        0x01  /* ECN-Echo ([DCTCP] section 3.2) */
#define HPCCD_F_CWR        0x02  /* congestion window reduced (RFC 3168) */
#define HPCCD_F_FIRST_RTT  0x04  /* LDCP fast-start packet ([LDCP] section 2.3) */
#define HPCCD_F_FIN        0x08  /* last byte of the flow */
#define HPCCD_F_RETX       0x10  /* retransmission */
#define HPCCD_F_INT_ECHO   0x20  /* the INT padding echoes the data packet's */
#define HPCCD_F_SYN        0x40  /* first packet of a flow */
#define HPCCD_F_SACK       0x80  /* DATA: the sender repeats selectively (keep
				  * out-of-order data, report it); ACK/NACK:
				  * the body holds SACK blocks */
#define HPCCD_F_MASK       0xff

/* SACK blocks (ACK / NACK with HPCCD_F_SACK): the body is 1..4 blocks of
 * two big-endian 64-bit byte sequence numbers, [start, end) of data the
 * receiver holds beyond the cumulative ACK, in ascending order, the
 * lowest first (docs/wire-format.md). */
/* DATA aux: bit 31 says that the sender reacts to CNPs (DCQCN): the
 * receiver is its notification point; bits 0..30 are the SACK payload
 * size (with HPCCD_F_SACK) or 0. */
#define HPCCD_AUX_CNP      0x80000000u
#define HPCCD_AUX_UNIT     0x7fffffffu

#define HPCCD_SACK_BLOCK_BYTES 16
#define HPCCD_SACK_MAX_BLOCKS  4

struct hpccd_sack_block {
	__be32 start_hi;    /* first byte held */
	__be32 start_lo;
	__be32 end_hi;      /* one past the last byte held */
	__be32 end_lo;
};

struct hpccd_hdr {
	__u8 ver_type;      /* HPCCD_WIRE_VERSION << 4 | type */
	__u8 flags;
	__be16 len;         /* bytes after this header: payload or body incl. tag */
	__be32 flow_id;
	__be32 seq_hi;      /* DATA: byte sequence of the first payload byte; */
	__be32 seq_lo;      /*   PROBE/PROBE_RESP: probe number; ACK/NACK: the
			     *   receive window's right edge (0: none) */
	__be32 ack_hi;      /* ACK/NACK/NOTIFY: cumulative ACK, next byte expected; */
	__be32 ack_lo;      /*   DATA: options (HPCCD_DATA_O_*) in ack_lo, ack_hi 0 */
	__be32 ts;          /* DATA/PROBE: sender clock, ns mod 2^32;
			     * ACK/NACK/PROBE_RESP/NOTIFY: echo of the ts being answered */
	__be32 aux;         /* ACK: packets acknowledged (n of [LDCP] Eq. 2);
			     * NACK: packets received beyond the gap;
			     * DATA: HPCCD_AUX_CNP | SACK payload size;
			     * CNP: CE-marked packets since the last CNP;
			     * others: 0 */
};

/* DATA options (ack_lo of a DATA packet; other bits zero, ignored) */
#define HPCCD_DATA_O_RXWIN 0x1   /* the flow runs Rx-HPCC: its receiver computes
				  * W and carries it in the ACKs ([HPCC++2020]
				  * section 6.2); without it, no window block */

/* ---- bodies after the transport header ----------------------------------- */

#define HPCCD_FB_F_WINDOW 0x1    /* an Rx-HPCC window block precedes the trailer */

/* Rx-HPCC window block of an ACK / NACK ([HPCC++2020] section 6.2: "feedback
 * the calculated window in the ACK packet once every RTT"): present in the
 * ACKs of flows whose DATA carry HPCCD_DATA_O_RXWIN, never in others'. */
struct hpccd_rxwin {
	__be32 w_bytes;     /* W computed at the receiver (NewINT) */
	__be32 u_q16;       /* U x 65536, saturated at 2^32 - 1 */
	__be16 n_flows;     /* N: Rx-HPCC flows sharing the receiver's last hop */
	__be16 reserved;
	__be32 t_ns;        /* T the receiver used, ns */
};

/* NOTIFY (Rx-HPCC, [HPCC++2022] section 6.3.2): the receiver's window, 24 bytes
 * plus a tag. */
struct hpccd_notify {
	__be32 w_bytes;     /* W computed at the receiver */
	__be32 rate_kbps;   /* R = W / T in kbit/s */
	__be32 u_q16;       /* U x 65536, saturated at 2^32 - 1 */
	__be16 n_flows;     /* receiver-measured concurrent flows N */
	__be16 reserved;
	__be32 notify_seq;  /* per-flow counter, for replay protection */
	__be32 t_ns;        /* T the receiver used, ns */
};

/* PROBE carries a zeroed tag slot (len = 8) so that the reflector writes
 * the tag of its PROBE_RESP in place and never grows the packet.  The
 * PROBE_RESP is a new packet of the reflecting host: its IPv4 TTL is reset
 * to this (the probe's was spent on the forward path; include/hpccd/build.h
 * hpccd__reflect_probe). */
#define HPCCD_REFLECT_TTL        64

/* Integrity tag ([HPCC++2022] section 9.1, [HPCC++2020] section 9): SipHash-2-4
 * with a 128-bit key from configuration, over the flow's 5-tuple (struct
 * hpccd_tag_input, below) followed by every byte from the INT header to the
 * byte before the tag.  Carried last in NOTIFY and PROBE_RESP, and as the
 * last 8 bytes of the feedback trailer of ACK, NACK and CNP. */
struct hpccd_tag {
	__be32 hi;
	__be32 lo;
};

/* Feedback trailer: last 16 bytes of every ACK and NACK, and the whole
 * body of a CNP ([HPCC++2022] section 9.1: feedback that can change a
 * window, a rate or trigger a retransmission is integrity checked).  The
 * body of an ACK / NACK is
 *   SACK blocks (16 each, HPCCD_F_SACK) | window (16, HPCCD_FB_F_WINDOW)
 *   | trailer (16)
 * and is parsed from its end: the trailer says whether a window block
 * precedes it, the rest are the SACK blocks. */
struct hpccd_fb_trailer {
	__be32 fb_seq;      /* per receiver flow, +1 per ACK, NACK or CNP sent:
			     * the sender takes only increasing ones (replay) */
	__be32 fb_flags;    /* HPCCD_FB_F_*; other bits zero, ignored */
	__be32 tag_hi;      /* the tag (struct hpccd_tag) over everything */
	__be32 tag_lo;      /*   before it, the prefix reversed */
};

/* The 5-tuple prefix of the tagged message, as the SENDER of the data (or
 * probe) sees its flow: the tag of a PROBE_RESP, NOTIFY, ACK, NACK or CNP is computed over
 * the reverse of its own IP/L4 addresses, so both ends hash the same bytes. */
struct hpccd_tag_input {
	__be32 saddr;       /* data sender */
	__be32 daddr;       /* data receiver */
	__be16 sport;
	__be16 dport;
	__u8 proto;         /* IPPROTO_UDP or IPPROTO_TCP */
	__u8 pad[3];        /* zero */
};

/* Why a packet to the hpccd port is malformed.  Every parser (C, BPF,
 * scapy, P4) checks in this order and reports the first that applies, so
 * that they classify the test vectors identically:
 *   1 INT header truncated, 2 magic, 3 INT version, 4 room > MAX_HOPS,
 *   5 nHop > room, 6 hop records truncated, 7 hpccd header truncated,
 *   8 hpccd version, 9 type, 10 len disagrees with the L4 length. */
enum hpccd_wire_err {
	HPCCD_E_OK = 0,
	HPCCD_E_INT_TRUNC = 1,
	HPCCD_E_MAGIC = 2,
	HPCCD_E_INT_VERSION = 3,
	HPCCD_E_ROOM = 4,
	HPCCD_E_NHOP = 5,
	HPCCD_E_HOPS_TRUNC = 6,
	HPCCD_E_HDR_TRUNC = 7,
	HPCCD_E_VERSION = 8,
	HPCCD_E_TYPE = 9,
	HPCCD_E_LEN = 10,
	HPCCD_E_MAX = 11,
};

#define HPCCD_INT_HDR_BYTES     4
#define HPCCD_HDR_BYTES         32
#define HPCCD_NOTIFY_BYTES      24
#define HPCCD_TAG_BYTES         8
#define HPCCD_TAG_INPUT_BYTES   16
#define HPCCD_FB_TRAILER_BYTES  16
#define HPCCD_RXWIN_BYTES       16
/* Longest ACK / NACK body with a trailer: 4 SACK blocks, window, trailer.
 * A longer body has no trailer (hpccd never sends one: never applied). */
#define HPCCD_FB_BODY_MAX       (HPCCD_SACK_MAX_BLOCKS * HPCCD_SACK_BLOCK_BYTES + \
				 HPCCD_RXWIN_BYTES + HPCCD_FB_TRAILER_BYTES)

#ifndef HPCCD_CFFI_CDEF
_Static_assert(sizeof(struct hpccd_int_hdr) == HPCCD_INT_HDR_BYTES, "INT header is 4 bytes");
_Static_assert(sizeof(struct hpccd_hdr) == HPCCD_HDR_BYTES, "transport header is 32 bytes");
_Static_assert(sizeof(struct hpccd_notify) == HPCCD_NOTIFY_BYTES, "NOTIFY body is 24 bytes");
_Static_assert(sizeof(struct hpccd_tag) == HPCCD_TAG_BYTES, "tag is 8 bytes");
_Static_assert(sizeof(struct hpccd_tag_input) == HPCCD_TAG_INPUT_BYTES, "tag input is 16 bytes");
_Static_assert(sizeof(struct hpccd_fb_trailer) == HPCCD_FB_TRAILER_BYTES, "trailer is 16 bytes");
_Static_assert(sizeof(struct hpccd_rxwin) == HPCCD_RXWIN_BYTES, "window block is 16 bytes");
_Static_assert(sizeof(struct hpccd_sack_block) == HPCCD_SACK_BLOCK_BYTES, "SACK block is 16 bytes");
_Static_assert(HPCCD_INT_MAX_HOPS <= 15, "room and nHop are 4-bit fields");
#endif

#endif /* HPCCD_WIRE_H */
