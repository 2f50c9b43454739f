/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Userspace face of the shared parser (include/hpccd/parse.h) and of the
 * integrity tag, exported through cffi as hpccd._cc: whole Ethernet frames
 * in, plain decoded structs out.  The implementation (fastpath/cc/wire.c)
 * runs the very parser the BPF programs include, so that the tests of
 * tests/vectors/ check the BPF classification too.
 *
 * Who may include this: the C fast path, tests and the cffi cdef
 * (cffi_build/build_cc.py preprocesses it with -DHPCCD_CFFI_CDEF).  Not
 * BPF (BPF includes parse.h directly).
 *
 * Return convention: the parse functions return the class of
 * docs/wire-format.md "Malformed packets" (enum hpccd_wire_err: 0 valid,
 * 1..10 the first fault) for packets that are hpccd's, and
 * HPCCD_WIRE_NOT_HPCCD (-ENOENT) for frames that are not hpccd packets at
 * all: not IPv4 (after at most one 802.1Q tag), a broken or truncated
 * Ethernet/IPv4/UDP/TCP header, a non-first IPv4 fragment, UDP with
 * neither port the hpccd port (data and probes go to it, feedback comes
 * from it), TCP that is not a TCP-side probe (probe DSCP, no TCP flag, at
 * least one byte after the TCP header with the INT magic in it).
 * Other negative values are errno (-EINVAL: NULL argument).
 *
 * All decoded fields are host order.
 */
#ifndef HPCCD_WIRE_API_H
#define HPCCD_WIRE_API_H

#ifndef HPCCD_CFFI_CDEF
#include <stddef.h>
#include <stdint.h>
#endif

#include "cc.h"      /* struct hpccd_int_fields */
#include "wire.h"

enum {
	HPCCD_WIRE_NOT_HPCCD = -2,   /* -ENOENT: not an hpccd packet at all */
};

/* Everything hpccd_wire_parse_frame() decodes.  Which parts are valid
 * depends on the class returned (the parser stops at the first fault):
 *   outer headers      whenever the class is >= 0;
 *   INT header         class 0 or >= 2 (int_off != 0);
 *   hops[0..room)      class 0 or >= 7 (the hop region is complete);
 *   hpccd header       class 0 or >= 8 (hdr_off != 0);
 *   payload_len        class 0 or 10;
 *   notify, tag        class 0 and has_notify / has_tag. */
struct hpccd_wire_info {
	/* outer headers */
	uint32_t saddr;          /* IPv4 source, host order */
	uint32_t daddr;
	uint16_t sport;          /* UDP/TCP ports, host order */
	uint16_t dport;
	uint8_t l4;              /* 17 (UDP) or 6 (TCP, a TCP-side probe) */
	uint8_t dscp;
	uint8_t ecn;             /* IPv4 ECN field (0 not-ECT, 2 ECT(0), ...) */
	uint8_t vlan;            /* 1 when an 802.1Q tag was skipped */
	uint32_t int_off;        /* offsets in the frame; 0 = not reached */
	uint32_t hdr_off;
	uint32_t body_off;
	uint32_t l4_end_off;     /* end of the L4 payload: the UDP length /
				  * IPv4 total length, cut at the frame end */
	/* INT header */
	uint8_t int_magic;
	uint8_t int_ver;
	uint8_t int_nhop;
	uint8_t int_room;
	uint8_t int_flags;       /* HPCCD_INT_F_* nibble */
	uint8_t pad0;
	uint16_t int_path_id;
	/* all int_room hop records as on the wire, unpacked
	 * (hpccd_int_hop_unpack); the first int_nhop are stamped */
	struct hpccd_int_fields hops[HPCCD_INT_MAX_HOPS];
	/* hpccd header */
	uint8_t hdr_ver;
	uint8_t hdr_type;
	uint8_t hdr_flags;
	uint8_t pad1;
	uint16_t hdr_len;
	uint16_t pad2;
	uint32_t flow_id;
	uint64_t seq;            /* seq_hi << 32 | seq_lo */
	uint64_t ack;
	uint32_t ts;
	uint32_t aux;
	/* Class 0: the payload, i.e. the bytes after the hpccd header other
	 * than the NOTIFY body, the tag (slot), the feedback trailer and the
	 * window block (ACK / NACK: the SACK blocks), at body_off.  Class 10:
	 * all the bytes after the header, what len disagreed with. */
	uint32_t payload_len;
	/* NOTIFY body (type NOTIFY with len 32) */
	uint8_t has_notify;
	/* tag (PROBE_RESP, NOTIFY) or zeroed tag slot (PROBE), when len is
	 * exactly the table's (8; 32 for NOTIFY) */
	uint8_t has_tag;
	uint16_t n_flows;
	uint16_t reserved;
	uint16_t pad3;
	uint32_t w_bytes;
	uint32_t rate_kbps;
	uint32_t u_q16;
	uint32_t notify_seq;
	uint32_t t_ns;
	uint32_t tag_off;        /* offset of the tag in the frame, 0 if none */
	uint64_t tag;            /* as carried (big-endian on the wire) */
	/* ACK / NACK feedback trailer (16 <= len <= 96; CNP: len 16; has_tag too), and its
	 * Rx-HPCC window block (HPCCD_FB_F_WINDOW): w_bytes, u_q16, n_flows,
	 * t_ns above hold the block's fields */
	uint8_t has_trailer;
	uint8_t has_rxwin;
	uint16_t pad4;
	uint32_t fb_seq;
	uint32_t fb_flags;
};

/* Classifies and decodes one Ethernet frame (frame[0..len)).  udp_port:
 * the hpccd UDP destination port; probe_dscp: the DSCP of TCP-side probes.
 * Returns 0..10 (enum hpccd_wire_err), HPCCD_WIRE_NOT_HPCCD, or -EINVAL.
 * `out` is zeroed first, then filled as far as the parser got. */
int hpccd_wire_parse_frame(const void *frame, size_t len, uint16_t udp_port,
			   uint8_t probe_dscp, struct hpccd_wire_info *out);

/* The integrity tag the frame should carry: SipHash-2-4 under key (16
 * bytes; k0, k1 little-endian) over the 16-byte prefix (the 5-tuple as the
 * data/probe sender sees it: a PROBE_RESP's, NOTIFY's, ACK's or NACK's own addresses and
 * ports reversed) and the bytes from the INT header to the tag.  Returns
 * 0 with *tag set; HPCCD_WIRE_NOT_HPCCD; -EBADMSG when the frame is
 * malformed (class != 0); -ENODATA when it carries no tag (not PROBE_RESP,
 * NOTIFY, ACK or NACK, or len is not the table's: ACK / NACK below 16); -EINVAL for a NULL argument. */
int hpccd_wire_tag(const uint8_t *key, const void *frame, size_t len, uint16_t udp_port,
		   uint8_t probe_dscp, uint64_t *tag);

/* The same tag from parts the caller already knows, for the transport
 * engine's feedback path (no second parse of the frame): the prefix `ti`
 * (struct hpccd_tag_input, network order: the data sender's view) and the
 * n bytes from the INT header to the tag at int_hdr.  Returns 0 with *tag
 * set; -EINVAL for a NULL argument or n beyond the longest tagged packet
 * (188 bytes: an ACK with an echo of 8 hops, 4 SACK blocks and a window). */
int hpccd_wire_tag_span(const uint8_t *key, const struct hpccd_tag_input *ti,
			const void *int_hdr, size_t n, uint64_t *tag);

/* 1 when the tag carried by the frame is the one hpccd_wire_tag()
 * computes, 0 when it is not; the negative values of hpccd_wire_tag(). */
int hpccd_wire_tag_verify(const uint8_t *key, const void *frame, size_t len,
			  uint16_t udp_port, uint8_t probe_dscp);

/* The departure stamp of the lab switch (hpccd__restamp_hop() of
 * include/hpccd/parse.h, which int_sw_depart runs): in a valid hpccd
 * frame, record idx (< nHop), if it is old_word, becomes new_word (hop
 * words, host order), with the L4 checksum patched incrementally (a UDP
 * checksum of 0 stays 0).  Returns 0 when rewritten, 1 when the record is
 * not old_word (frame untouched), 2 when idx >= nHop, the frame's class
 * (> 0) when it is malformed, HPCCD_WIRE_NOT_HPCCD, or -EINVAL/-ENOMEM. */
int hpccd_wire_restamp(void *frame, size_t len, uint16_t udp_port, uint8_t probe_dscp,
		       unsigned int idx, uint64_t old_word, uint64_t new_word);

/* The probe reflector (hpccd__reflect_probe() of include/hpccd/build.h,
 * which xdp_host runs): in a valid PROBE (UDP or TCP-side) with its tag
 * slot, rewrites frame[0..len) in place into its PROBE_RESP, tagged under
 * key (16 bytes), its L4 checksum patched, or recomputed when the probe's
 * was CHECKSUM_PARTIAL.  Returns 0 when rewritten; -ENODATA when the frame
 * is valid but not a PROBE with a tag slot; the frame's class (> 0) when it
 * is malformed; HPCCD_WIRE_NOT_HPCCD; -EINVAL/-ENOMEM; the frame is then
 * untouched (-EBADMSG, a frame the parser passed and the tag could not
 * cover, cannot happen). */
int hpccd_wire_reflect_probe(const uint8_t *key, void *frame, size_t len, uint16_t udp_port,
			     uint8_t probe_dscp);

/* SipHash-2-4 of msg[0..len) under the 16-byte key (include/hpccd/
 * siphash.h), exported for the reference-vector self-check. */
uint64_t hpccd_wire_siphash24(const uint8_t *key, const void *msg, size_t len);

#ifndef HPCCD_CFFI_CDEF
#include <errno.h>
_Static_assert(HPCCD_WIRE_NOT_HPCCD == -ENOENT, "not-hpccd is -ENOENT");
#endif

#endif /* HPCCD_WIRE_API_H */
