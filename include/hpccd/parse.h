/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The packet parser of hpccd, written once: the BPF programs (XDP
 * classifier, probe reflector, software INT switch) and the C fast path
 * (fastpath/cc/wire.c) include this same text, so that they classify
 * every packet alike (docs/wire-format.md "Malformed packets").  Also the
 * switch's in-place hop stamp, incremental checksum updates (RFC 1624),
 * the arithmetic of a full L4 checksum (pseudo-header, byte order, final
 * write) and the integrity tag over a parsed packet.
 *
 * Who may include this: BPF C (after vmlinux.h, <bpf/bpf_helpers.h> and
 * <bpf/bpf_endian.h>) and userspace C (it pulls the Linux UAPI headers).
 * Not the cffi cdef: everything here is static inline.
 *
 * Rules that keep it BPF-safe:
 *  - no libc, no BPF helpers, no calls: every function is __always_inline;
 *  - every memory access is preceded by a check of the form
 *    `ptr + constant > end` against the frame end (the cursor's `end`, i.e.
 *    xdp_md->data_end in BPF), which is what the verifier turns into a
 *    packet range.  The L4 end announced by the headers (l4_end) is
 *    checked as well, for the meaning (truncation), but it is a packet
 *    pointer, not data_end, and gives the verifier nothing;
 *  - variable offsets come from masked fields (ihl & 0xf, room & 0xf) so
 *    that the verifier always knows their bounds;
 *  - loops have a constant bound (HPCCD_INT_MAX_HOPS, HPCCD_TAG_MAX_WORDS).
 *
 * Cursor contract, the same for every parser here: every hpccd__parse_<hdr>() starts at
 * c->pos, checks bounds, moves c->pos past its header on success and
 * returns the next header's type (host order) or -1; on -1 the cursor is
 * left where it was.  hpccd__parse() is the exception: it returns an
 * enum hpccd_wire_err (0 = OK), because the first fault it finds is part
 * of the specification.
 *
 * Byte order, on purpose: packet fields stay in network order in the
 * packet; every multi-byte value is read with HPCCD_NTOHS/HPCCD_NTOHL
 * (bpf_ntohs/bpf_ntohl in BPF, ntohs/ntohl in userspace) and every
 * nibble-packed byte is split with shifts, never with C bitfields (whose
 * order the compiler chooses).  Returned types, ports and decoded fields
 * are host order.
 *
 * Alignment: headers are read in place through their structs.  BPF on
 * x86-64/arm64 may load unaligned packet data; userspace C should place
 * the frame 2 bytes past a multiple of 4 (NET_IP_ALIGN) so that all from
 * the IPv4 header on is 4-byte aligned, as fastpath/cc/wire.c does.
 *
 * Use (error handling shortened; wire.c and the XDP programs do it all):
 *
 *	struct hpccd_cursor c = { data, data_end, 0 };
 *	if (hpccd__parse_eth(&c, &eth) != HPCCD_ETH_P_IP) pass;
 *	if (hpccd__parse_ip4(&c, &iph, &l4_end) != HPCCD_IPPROTO_UDP) pass;
 *	if (hpccd__parse_udp(&c, &l4_end, &uh) < 0) pass;
 *	if (neither port is the hpccd port) pass;
 *	err = hpccd__parse(&c, l4_end, &v);    (0, or count and drop)
 */
#ifndef HPCCD_PARSE_H
#define HPCCD_PARSE_H

#if defined(__bpf__)
/* vmlinux.h gives struct ethhdr/iphdr/udphdr/tcphdr and the __u/__be
 * types; <bpf/bpf_endian.h> gives the byte-order macros. */
#ifndef bpf_ntohs
#error "include <bpf/bpf_endian.h> before hpccd/parse.h"
#endif
#define HPCCD_NTOHS(x) bpf_ntohs(x)
#define HPCCD_NTOHL(x) bpf_ntohl(x)
#define HPCCD_HTONS(x) bpf_htons(x)
#define HPCCD_HTONL(x) bpf_htonl(x)
#ifndef NULL
#define NULL ((void *)0)
#endif
#else
#include <stddef.h>
#include <arpa/inet.h>        /* ntohs, ntohl, htons, htonl */
#include <linux/types.h>
#include <linux/if_ether.h>   /* struct ethhdr */
#include <linux/ip.h>         /* struct iphdr */
#include <linux/udp.h>        /* struct udphdr */
#include <linux/tcp.h>        /* struct tcphdr */
#define HPCCD_NTOHS(x) ntohs(x)
#define HPCCD_NTOHL(x) ntohl(x)
#define HPCCD_HTONS(x) htons(x)
#define HPCCD_HTONL(x) htonl(x)
#endif

#ifndef __always_inline
#define __always_inline inline __attribute__((__always_inline__))
#endif

/* Hides v's value from the optimiser.  In a loop that reads the packet
 * with one bounds check per step, clang otherwise folds the checks into a
 * precomputed trip count (pointer arithmetic on data_end, which the
 * verifier refuses); after the barrier the check stays a plain
 * `ptr + const > end`.  Harmless (no instruction) in userspace too. */
#define hpccd__barrier_var(v) __asm__ __volatile__("" : "+r"(v))

#include "wire.h"
#include "siphash.h"

/* Numbers from the UAPI headers, spelled here because vmlinux.h carries
 * only types (BTF has no macros). */
#define HPCCD_ETH_P_IP        0x0800
#define HPCCD_ETH_P_8021Q     0x8100
#define HPCCD_IPPROTO_TCP     6
#define HPCCD_IPPROTO_UDP     17
#define HPCCD_IP_OFFSET_MASK  0x1fff  /* fragment offset, host order */
#define HPCCD_TCP_FLAGS_OFF   13      /* CWR ECE URG ACK PSH RST SYN FIN */

/* One 802.1Q tag (linux/if_vlan.h is not UAPI). */
struct hpccd_vlan_hdr {
	__be16 tci;
	__be16 encap_proto;
};

struct hpccd_cursor {
	void *pos;      /* next byte to parse */
	void *end;      /* end of the bytes in hand: xdp_md->data_end in BPF */
	/* Bytes of the frame after `end`, not in hand: a multi-buffer XDP
	 * frame's fragments (bpf_xdp_get_buff_len() minus the linear part),
	 * or the pieces of an AF_XDP multi-buffer packet after the first.
	 * Only lengths are judged against them (hpccd__parse_ip4: where the
	 * L4 payload ends); every header must be in hand.  0: all is. */
	__u32 beyond;
};

/* A cursor over a frame of frame_len bytes (linear part and fragments:
 * bpf_xdp_get_buff_len() in XDP) whose bytes data..end are in hand. */
static __always_inline struct hpccd_cursor hpccd__cursor(void *data, void *end, __u64 frame_len)
{
	long linear = (long)end - (long)data;
	struct hpccd_cursor c = { .pos = data, .end = end,
				  .beyond = frame_len > (__u64)linear ? (__u32)(frame_len - linear) : 0 };

	return c;
}

/* ---- Ethernet, IPv4, UDP, TCP ------------------------------------------- */

/* Ethernet with no VLAN tag or one 802.1Q tag.  Returns the EtherType of
 * the next header (host order) or -1 when the frame is too short. */
static __always_inline int hpccd__parse_eth(struct hpccd_cursor *c, struct ethhdr **ethp)
{
	struct ethhdr *eth = (struct ethhdr *)c->pos;
	struct hpccd_vlan_hdr *vh;
	void *pos = (void *)(eth + 1);
	__u16 proto;

	if (pos > c->end)
		return -1;
	proto = HPCCD_NTOHS(eth->h_proto);
	if (proto == HPCCD_ETH_P_8021Q) {
		vh = (struct hpccd_vlan_hdr *)pos;
		if ((void *)(vh + 1) > c->end)
			return -1;
		proto = HPCCD_NTOHS(vh->encap_proto);
		pos = (void *)(vh + 1);
	}
	c->pos = pos;
	*ethp = eth;
	return proto;
}

/* IPv4: version 4, ihl >= 5, the whole header (options too) in the frame,
 * tot_len >= the header.  Returns the protocol or -1.  *l4_end is where
 * the IP payload ends: min(IP start + tot_len, frame end), so Ethernet
 * padding is never taken for payload (the frame end counts c->beyond: a
 * multi-buffer frame's payload ends in its fragments).  A fragment other than the first
 * has no L4 header: -1 (the kernel reassembles it; not ours). */
static __always_inline int hpccd__parse_ip4(struct hpccd_cursor *c, struct iphdr **iphp,
					    void **l4_end)
{
	struct iphdr *iph = (struct iphdr *)c->pos;
	__u32 hlen, tot;
	__u8 vihl;
	void *e;

	if ((void *)(iph + 1) > c->end)
		return -1;
	/* version/ihl by shifts: the bitfield order of struct iphdr is the
	 * compiler's, the wire's is version in the high nibble. */
	vihl = *(__u8 *)iph;
	if ((vihl >> 4) != 4)
		return -1;
	hlen = (__u32)(vihl & 0xf) * 4;          /* 0..60: bounded for the verifier */
	if (hlen < sizeof(struct iphdr))
		return -1;
	if (c->pos + hlen > c->end)
		return -1;
	tot = HPCCD_NTOHS(iph->tot_len);
	if (tot < hlen)
		return -1;
	if (HPCCD_NTOHS(iph->frag_off) & HPCCD_IP_OFFSET_MASK)
		return -1;
	if (c->beyond) {
		/* the frame goes on past `end` (fragments): the payload may
		 * end there, but not past the frame's last byte.  In scalars,
		 * so that the pointer below gets a bounded offset. */
		long in_hand = (long)((char *)c->end - (char *)c->pos);

		if (in_hand < 0)
			return -1;               /* cannot happen: checked above */
		if ((long)tot > in_hand + (long)c->beyond)
			tot = (__u32)(in_hand + (long)c->beyond);
		tot &= 0xffff;                   /* bounds for the verifier */
		e = c->pos + tot;
	} else {
		e = c->pos + tot;                /* tot <= 65535 */
		if (e > c->end)
			e = c->end;
	}
	c->pos += hlen;
	*iphp = iph;
	*l4_end = e;
	return iph->protocol;
}

/* DSCP of an IPv4 header (the high 6 bits of TOS). */
static __always_inline __u8 hpccd__ip4_dscp(const struct iphdr *iph)
{
	return iph->tos >> 2;
}

/* UDP: the 8-byte header within *l4_end, UDP length >= 8 (else it is not
 * a UDP datagram the kernel would accept either: -1).  Narrows *l4_end to
 * the end the UDP length announces when that is shorter (the spec counts
 * "the bytes that follow" by the UDP length, cut at the end of the IP
 * payload and of the frame).  Returns the destination port (host order);
 * the port names the next header and the caller decides by it (for hpccd
 * either port: data goes to it, feedback comes from it: uh->source). */
static __always_inline int hpccd__parse_udp(struct hpccd_cursor *c, void **l4_end,
					    struct udphdr **udphp)
{
	struct udphdr *uh = (struct udphdr *)c->pos;
	__u32 ulen;
	void *e;

	if ((void *)(uh + 1) > c->end)           /* verifier */
		return -1;
	if ((void *)(uh + 1) > *l4_end)          /* announced by IPv4 */
		return -1;
	ulen = HPCCD_NTOHS(uh->len);
	if (ulen < sizeof(struct udphdr))
		return -1;
	e = c->pos + ulen;
	if (e < *l4_end)
		*l4_end = e;
	c->pos = (void *)(uh + 1);
	*udphp = uh;
	return HPCCD_NTOHS(uh->dest);
}

/* TCP: doff >= 5 and the whole header (options too) within l4_end; the L4
 * payload is the rest of the IP payload (TCP has no length of its own).
 * Returns the destination port (host order) or -1.  Probes are told
 * apart by DSCP, flags (hpccd__tcp_flags() == 0) and the INT magic: that
 * is the caller's decision, not the parser's. */
static __always_inline int hpccd__parse_tcp(struct hpccd_cursor *c, void *l4_end,
					    struct tcphdr **tcphp)
{
	struct tcphdr *th = (struct tcphdr *)c->pos;
	__u32 hlen;

	if ((void *)(th + 1) > c->end)
		return -1;
	if ((void *)(th + 1) > l4_end)
		return -1;
	/* doff is the high nibble of byte 12 (shift, not bitfield). */
	hlen = (__u32)(((__u8 *)th)[12] >> 4) * 4;   /* 0..60 */
	if (hlen < sizeof(struct tcphdr))
		return -1;
	if (c->pos + hlen > c->end)
		return -1;
	if (c->pos + hlen > l4_end)
		return -1;
	c->pos += hlen;
	*tcphp = th;
	return HPCCD_NTOHS(th->dest);
}

/* The 9 flag bits of a TCP header, host order: AE (formerly NS, the low
 * bit of byte 12) << 8 | byte 13 (CWR ECE URG ACK PSH RST SYN FIN); 0 for
 * a TCP-side probe ("no flag set").  The reserved bits of byte 12 are not
 * flags.  The caller has parsed the header. */
static __always_inline __u16 hpccd__tcp_flags(const struct tcphdr *th)
{
	const __u8 *b = (const __u8 *)th;

	return (__u16)((b[HPCCD_TCP_FLAGS_OFF - 1] & 0x1) << 8 | b[HPCCD_TCP_FLAGS_OFF]);
}

/* ---- hpccd: INT header, hop records, hpccd header ------------------------ */

/* What hpccd__parse() found.  Pointers point into the packet; the small
 * fields are decoded to host order.  Filled in the order of the checks:
 * on an error, the fields of the parts checked before it are valid
 * (int_hdr and the INT fields once the INT header is complete, hdr and
 * the header fields once the hpccd header is complete).
 *
 * For BPF callers: the verifier knows int_hdr for 4 bytes, hdr for 32,
 * and, on success, notify for 24 and tag for 8 (the parser checked them
 * against the frame end).  Hop records must be bounds-checked one by one
 * (see hpccd__hop()). */
struct hpccd_view {
	struct hpccd_int_hdr *int_hdr;
	struct hpccd_int_hop_wire *hop;  /* hop record 0 (room of them follow) */
	struct hpccd_hdr *hdr;
	void *body;                      /* first byte after the hpccd header */
	struct hpccd_notify *notify;     /* NOTIFY with len 32, else NULL */
	struct hpccd_tag *tag;           /* tag (PROBE_RESP, NOTIFY, ACK, NACK,
					  * CNP) or tag slot (PROBE) when len
					  * is exactly the table's (ACK / NACK:
					  * at least the trailer), else NULL */
	struct hpccd_fb_trailer *trailer; /* ACK / NACK with 16 <= len <= 96, CNP
					   * with len 16, else NULL */
	struct hpccd_rxwin *rxwin;       /* its window block (HPCCD_FB_F_WINDOW
					  * and len >= 32), else NULL */
	__u32 body_len;                  /* bytes after the header in the L4
					  * payload (== len when OK) */
	__u16 len;                       /* hpccd header len */
	__u16 path_id;                   /* 12-bit pathID */
	__u8 nhop;
	__u8 room;
	__u8 int_flags;                  /* HPCCD_INT_F_* nibble */
	__u8 type;                       /* enum hpccd_type */
	__u8 flags;                      /* HPCCD_F_* */
	__u8 pad[3];
};

/* Walks INT header, hop records and hpccd header from c->pos; l4_end is
 * the end of the L4 payload (hpccd__parse_ip4/_udp).  Checks the faults in
 * exactly the order of docs/wire-format.md "Malformed packets" and returns
 * the first (enum hpccd_wire_err), or HPCCD_E_OK with c->pos moved to the
 * body.  Every truncation is judged against l4_end (what the headers
 * announce, cut at the frame end); each check against l4_end is paired
 * with the same check against c->end for the verifier (never true at run
 * time, since l4_end <= c->end). */
static __always_inline int hpccd__parse(struct hpccd_cursor *c, void *l4_end,
					struct hpccd_view *v)
{
	struct hpccd_int_hdr *ih = (struct hpccd_int_hdr *)c->pos;
	struct hpccd_hdr *h;
	__u32 room, nhop, type;
	__u16 pf;
	__u8 b;
	void *body;
	long rest;

	v->int_hdr = NULL;
	v->hop = NULL;
	v->hdr = NULL;
	v->body = NULL;
	v->notify = NULL;
	v->tag = NULL;
	v->trailer = NULL;
	v->rxwin = NULL;

	/* 1: INT header truncated */
	if ((void *)(ih + 1) > l4_end)
		return HPCCD_E_INT_TRUNC;
	if ((void *)(ih + 1) > c->end)
		return HPCCD_E_INT_TRUNC;
	v->int_hdr = ih;
	b = ih->magic_ver;
	nhop = ih->nhop_room >> 4;
	room = ih->nhop_room & 0xf;              /* 0..15: bounded for the verifier */
	pf = HPCCD_NTOHS(ih->path_flags);
	v->nhop = nhop;
	v->room = room;
	v->int_flags = pf >> 12;
	v->path_id = pf & HPCCD_INT_PATH_MASK;
	/* 2: magic, 3: INT version */
	if ((b >> 4) != HPCCD_INT_MAGIC)
		return HPCCD_E_MAGIC;
	if ((b & 0xf) != HPCCD_WIRE_VERSION)
		return HPCCD_E_INT_VERSION;
	/* 4: room > 8, 5: nHop > room */
	if (room > HPCCD_INT_MAX_HOPS)
		return HPCCD_E_ROOM;
	if (nhop > room)
		return HPCCD_E_NHOP;
	/* 6: hop records truncated.  One check for the whole hop region: its
	 * end is also the start of the hpccd header. */
	h = (struct hpccd_hdr *)((void *)(ih + 1) + room * HPCCD_INT_HOP_BYTES);
	if ((void *)h > l4_end)
		return HPCCD_E_HOPS_TRUNC;
	if ((void *)h > c->end)
		return HPCCD_E_HOPS_TRUNC;
	v->hop = (struct hpccd_int_hop_wire *)(ih + 1);
	/* 7: hpccd header truncated */
	if ((void *)(h + 1) > l4_end)
		return HPCCD_E_HDR_TRUNC;
	if ((void *)(h + 1) > c->end)
		return HPCCD_E_HDR_TRUNC;
	v->hdr = h;
	b = h->ver_type;
	type = b & 0xf;
	v->type = type;
	v->flags = h->flags;
	v->len = HPCCD_NTOHS(h->len);
	/* 8: version, 9: type */
	if ((b >> 4) != HPCCD_WIRE_VERSION)
		return HPCCD_E_VERSION;
	if (type < HPCCD_T_DATA || type > HPCCD_T_MAX)
		return HPCCD_E_TYPE;
	/* 10: len against the bytes that follow the header */
	body = (void *)(h + 1);
	v->body = body;
	rest = (long)(l4_end - body);            /* >= 0: checked above */
	v->body_len = (__u32)rest;
	if (rest != (long)v->len)
		return HPCCD_E_LEN;

	/* Body pointers, for types whose len is exactly the table's.  The
	 * checks against c->end cannot fail (len == rest); they give BPF
	 * callers the range to read notify/tag directly. */
	if (type == HPCCD_T_NOTIFY && v->len == HPCCD_NOTIFY_BYTES + HPCCD_TAG_BYTES) {
		if (body + HPCCD_NOTIFY_BYTES + HPCCD_TAG_BYTES > c->end)
			return HPCCD_E_LEN;
		v->notify = (struct hpccd_notify *)body;
		v->tag = (struct hpccd_tag *)(body + HPCCD_NOTIFY_BYTES);
	} else if ((type == HPCCD_T_PROBE || type == HPCCD_T_PROBE_RESP) &&
		   v->len == HPCCD_TAG_BYTES) {
		if (body + HPCCD_TAG_BYTES > c->end)
			return HPCCD_E_LEN;
		v->tag = (struct hpccd_tag *)body;
	} else if ((type == HPCCD_T_ACK || type == HPCCD_T_NACK) &&
		   v->len >= HPCCD_FB_TRAILER_BYTES && v->len <= HPCCD_FB_BODY_MAX &&
		   !(v->len & 3)) {
		/* The feedback trailer is the body's last 16 bytes, the
		 * window block the 16 before it when the trailer says so.
		 * A body that is not whole 4-byte words (its blocks are 16
		 * bytes each) has none: the trailer and its tag are always
		 * 4-byte aligned where the body is. */
		struct hpccd_fb_trailer *tr;
		__u32 toff = v->len - HPCCD_FB_TRAILER_BYTES;

		if (toff > HPCCD_FB_BODY_MAX)
			return HPCCD_E_LEN;      /* cannot happen: for the verifier */
		tr = (struct hpccd_fb_trailer *)(body + toff);
		if ((void *)(tr + 1) > c->end)
			return HPCCD_E_LEN;
		v->trailer = tr;
		v->tag = (struct hpccd_tag *)&tr->tag_hi;
		if ((HPCCD_NTOHL(tr->fb_flags) & HPCCD_FB_F_WINDOW) &&
		    toff >= HPCCD_RXWIN_BYTES)
			v->rxwin = (struct hpccd_rxwin *)((void *)tr - HPCCD_RXWIN_BYTES);
	} else if (type == HPCCD_T_CNP && v->len == HPCCD_FB_TRAILER_BYTES) {
		/* A CNP's body is its trailer alone, at a constant offset
		 * (no SACK blocks, no window block).  A branch of its own:
		 * with CNP in ACK / NACK's variable-offset branch above,
		 * clang computed xdp_host's PROBE tag pointer through that
		 * arithmetic, and after the SipHash call the verifier had
		 * lost its range ("invalid access to packet, off=74" in
		 * reflect(), tests/bpf/test_verifier.py). */
		struct hpccd_fb_trailer *tr = (struct hpccd_fb_trailer *)body;

		if ((void *)(tr + 1) > c->end)
			return HPCCD_E_LEN;
		v->trailer = tr;
		v->tag = (struct hpccd_tag *)&tr->tag_hi;
	}
	c->pos = body;
	return HPCCD_E_OK;
}

/* Hop record i of a parsed packet, or NULL when i >= room or it is not in
 * the frame (the check is the verifier's; hpccd__parse() already checked
 * the whole region).  i should be a loop counter with a constant bound. */
static __always_inline struct hpccd_int_hop_wire *
hpccd__hop(const struct hpccd_view *v, __u32 i, void *end)
{
	struct hpccd_int_hop_wire *hop;

	if (i >= v->room || i >= HPCCD_INT_MAX_HOPS)
		return NULL;
	hop = v->hop + i;
	if ((void *)(hop + 1) > end)
		return NULL;
	return hop;
}

/* ---- incremental checksum update (RFC 1624) ------------------------------ */

/* How the L4 checksum of the packet is to be updated. */
enum hpccd_csum_kind {
	HPCCD_CSUM_NONE = 0,   /* no checksum to update */
	HPCCD_CSUM_UDP = 1,    /* zero means "no checksum" and stays zero; a
				* computed zero is sent as 0xffff (RFC 768) */
	HPCCD_CSUM_TCP = 2,    /* always present */
};

/* Usage: accumulate the difference of every 16-bit word that changes,
 * then apply it once:
 *
 *	__u32 d = 0;
 *	d = hpccd__csum_diff16(d, old, new);   (or _diff32 for 4 bytes)
 *	hpccd__csum_apply(&udph->check, d, HPCCD_CSUM_UDP);
 *
 * Byte order, on purpose: `old`/`new` are the big-endian numbers the
 * packet bytes spell (NTOHS/NTOHL of the field, or b0 << 8 | b1), i.e.
 * 16-bit words as RFC 1071 sums them; the checksum field is read and
 * written through NTOHS/HTONS.  The words must start at an even offset
 * from the L4 header (true of every hpccd field: INT starts 8 (UDP) or
 * 4 * doff (TCP) bytes in).  Address swaps need no update: the
 * pseudo-header sum is symmetric. */
static __always_inline __u32 hpccd__csum_diff16(__u32 acc, __u16 from, __u16 to)
{
	/* RFC 1624 eqn 3: HC' = ~(~HC + ~m + m'); this adds ~m + m'. */
	return acc + (__u16)~from + to;
}

static __always_inline __u32 hpccd__csum_diff32(__u32 acc, __u32 from, __u32 to)
{
	acc = hpccd__csum_diff16(acc, from >> 16, to >> 16);
	return hpccd__csum_diff16(acc, from & 0xffff, to & 0xffff);
}

/* End-around carry: 32-bit one's complement accumulator to 16 bits. */
static __always_inline __u16 hpccd__csum_fold(__u32 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)sum;
}

static __always_inline void hpccd__csum_apply(__be16 *csum, __u32 acc, int kind)
{
	__u16 hc, res;

	if (kind == HPCCD_CSUM_NONE)
		return;
	hc = HPCCD_NTOHS(*csum);
	if (kind == HPCCD_CSUM_UDP && hc == 0)
		return;                          /* no checksum: leave it zero */
	res = (__u16)~hpccd__csum_fold((__u32)(__u16)~hc + hpccd__csum_fold(acc));
	if (kind == HPCCD_CSUM_UDP && res == 0)
		res = 0xffff;
	*csum = HPCCD_HTONS(res);
}

/* ---- full L4 checksum (RFC 1071) ------------------------------------------- */

/* For a writer that recomputes an L4 checksum instead of patching it (the
 * probe reflector: an incremental update is only as right as the checksum
 * it starts from, and a probe from a local kernel socket may carry a
 * CHECKSUM_PARTIAL value, see ebpf/xdp_host.bpf.c).  Same accumulator and
 * byte-order convention as above (16-bit big-endian numbers in a 32-bit
 * sum, folded at the end):
 *
 *	acc = hpccd__csum_pseudo4(iph, l4_len);
 *	(checksum field set to 0)
 *	acc += the 16-bit words of the whole L4 segment, header included;
 *	hpccd__csum_put(&udph->check, acc, HPCCD_CSUM_UDP);
 *
 * The segment sum itself is the caller's, since it is a loop or a helper
 * call (BPF: bpf_csum_diff(), which this file does not call); a sum that
 * was taken over host-order loads of the bytes (bpf_csum_diff(), the
 * kernel's csum_partial()) enters through hpccd__csum_from_mem().  A UDP
 * checksum that was 0 ("none") must be left alone by the caller: the
 * write below never produces 0 for UDP. */

/* Sum of the IPv4 pseudo-header: source and destination address, zero,
 * protocol (iph->protocol), L4 length (l4_len: the UDP length, or the IP
 * total length minus the IP header for TCP).  Symmetric in the two
 * addresses.  The caller has bounds-checked the IPv4 header. */
static __always_inline __u32 hpccd__csum_pseudo4(const struct iphdr *iph, __u16 l4_len)
{
	__u32 s = HPCCD_NTOHL(iph->saddr), d = HPCCD_NTOHL(iph->daddr);

	return (s >> 16) + (s & 0xffff) + (d >> 16) + (d & 0xffff) + iph->protocol + l4_len;
}

/* Whether an L4 checksum field (csum_field, bounds-checked by the caller)
 * is CHECKSUM_PARTIAL: a kernel socket's segment sent over a veth carries
 * exactly the folded pseudo-header sum there and leaves the rest to the
 * "device", which XDP cannot tell from the skb (ebpf/xdp_host.bpf.c says
 * more).  Such a field is recomputed or left alone, never patched. */
static __always_inline int hpccd__csum_is_partial(const __u16 *csum_field, const struct iphdr *iph,
						  __u16 l4_len)
{
	return HPCCD_NTOHS(*csum_field) == hpccd__csum_fold(hpccd__csum_pseudo4(iph, l4_len));
}

/* A one's complement sum of host-order loads of packet bytes (the 32-bit
 * result of bpf_csum_diff() or csum_partial(), folded or not) as a term of
 * this file's accumulator: folded to 16 bits it is the big-endian sum with
 * its two bytes in memory order (RFC 1071 section 2(B): the sum does not
 * depend on byte order but for a swap), so NTOHS turns it into the number
 * the big-endian words sum to. */
static __always_inline __u32 hpccd__csum_from_mem(__u32 sum)
{
	return HPCCD_NTOHS(hpccd__csum_fold(sum));
}

/* Writes the checksum of a complete sum acc (pseudo-header and every word
 * of the segment with the checksum field at 0): its one's complement,
 * folded.  For HPCCD_CSUM_UDP a computed 0 is sent as 0xffff (RFC 768);
 * HPCCD_CSUM_NONE writes nothing. */
static __always_inline void hpccd__csum_put(__be16 *csum, __u32 acc, int kind)
{
	__u16 res;

	if (kind == HPCCD_CSUM_NONE)
		return;
	res = (__u16)~hpccd__csum_fold(acc);
	if (kind == HPCCD_CSUM_UDP && res == 0)
		res = 0xffff;
	*csum = HPCCD_HTONS(res);
}

/* ---- the switch's hop stamp ----------------------------------------------- */

enum hpccd_stamp {
	HPCCD_STAMP_WRITTEN = 0,    /* record written at nHop; nHop++, pathID ^= id */
	HPCCD_STAMP_OVERFLOW = 1,   /* nHop == room: OVERFLOW set (if not yet), no write */
	HPCCD_STAMP_SKIP = 2,       /* COLLECT clear: packet untouched */
};

/* In-place stamp of one switch (docs/wire-format.md "INT header"): with
 * COLLECT set and nHop < room, write the record (hi_be, lo_be: the hop
 * word's halves, network order) at index nHop, increment nHop and XOR the
 * 12-bit switch_id into pathID; with nHop == room set OVERFLOW instead.
 * Never writes past room, never grows the packet.  The L4 checksum at
 * csum (UDP or TCP header field, already bounds-checked by the caller;
 * may be NULL with HPCCD_CSUM_NONE) is updated incrementally.  Returns an
 * enum hpccd_stamp, or -1 when the INT header is not in the frame or
 * breaks room <= 8 / nHop <= room (the caller should have parsed it). */
static __always_inline int hpccd__stamp_hop(struct hpccd_int_hdr *ih, void *end, __u16 switch_id,
					    __be32 hi_be, __be32 lo_be, __be16 *csum, int csum_kind)
{
	struct hpccd_int_hop_wire *hop;
	__u32 nhop, room, d = 0;
	__u16 pf, npf, w0, nw0;

	if ((void *)(ih + 1) > end)
		return -1;
	nhop = ih->nhop_room >> 4;
	room = ih->nhop_room & 0xf;
	if (room > HPCCD_INT_MAX_HOPS || nhop > room)
		return -1;
	pf = HPCCD_NTOHS(ih->path_flags);
	if (!((pf >> 12) & HPCCD_INT_F_COLLECT))
		return HPCCD_STAMP_SKIP;
	if (nhop == room) {
		if ((pf >> 12) & HPCCD_INT_F_OVERFLOW)
			return HPCCD_STAMP_OVERFLOW;
		npf = pf | (HPCCD_INT_F_OVERFLOW << 12);
		d = hpccd__csum_diff16(d, pf, npf);
		ih->path_flags = HPCCD_HTONS(npf);
		if (csum)
			hpccd__csum_apply(csum, d, csum_kind);
		return HPCCD_STAMP_OVERFLOW;
	}
	hop = (struct hpccd_int_hop_wire *)(ih + 1) + nhop;   /* nhop < room <= 8 */
	hpccd__barrier_var(hop);    /* as in hpccd__restamp_hop */
	if ((void *)(hop + 1) > end)
		return -1;
	d = hpccd__csum_diff32(d, HPCCD_NTOHL(hop->hi_be), HPCCD_NTOHL(hi_be));
	d = hpccd__csum_diff32(d, HPCCD_NTOHL(hop->lo_be), HPCCD_NTOHL(lo_be));
	hop->hi_be = hi_be;
	hop->lo_be = lo_be;
	/* Word 0 of the INT header is magic_ver << 8 | nhop_room. */
	w0 = (__u16)(ih->magic_ver << 8 | ih->nhop_room);
	nw0 = (__u16)(ih->magic_ver << 8 | ((nhop + 1) << 4) | room);
	d = hpccd__csum_diff16(d, w0, nw0);
	ih->nhop_room = (__u8)(((nhop + 1) << 4) | room);
	npf = (pf & 0xf000) | ((pf ^ switch_id) & HPCCD_INT_PATH_MASK);
	d = hpccd__csum_diff16(d, pf, npf);
	ih->path_flags = HPCCD_HTONS(npf);
	if (csum)
		hpccd__csum_apply(csum, d, csum_kind);
	return HPCCD_STAMP_WRITTEN;
}

/* In-place rewrite of record idx (< nHop) that a switch wrote earlier, when
 * it still holds exactly the word it wrote (old_hi, old_lo, network
 * order): the lab switch's departure stamp (ebpf/int_switch.bpf.c), which
 * replaces the values a record got at enqueue with the port's state when
 * the packet left the queue ([HPCC] section 4.1: "when the packet is
 * emitted").  nHop, pathID and flags stay.  The L4 checksum is updated
 * incrementally as in hpccd__stamp_hop.  Returns 0 when rewritten, 1 when
 * the record differs from (old_hi, old_lo) (not this switch's record:
 * untouched), -1 when the INT header or the record is not in the frame or
 * idx >= nHop. */
static __always_inline int hpccd__restamp_hop(struct hpccd_int_hdr *ih, void *end, __u32 idx,
					      __be32 old_hi, __be32 old_lo, __be32 hi_be,
					      __be32 lo_be, __be16 *csum, int csum_kind)
{
	struct hpccd_int_hop_wire *hop;
	__u32 d = 0;

	if ((void *)(ih + 1) > end)
		return -1;
	if (idx >= HPCCD_INT_MAX_HOPS || idx >= (__u32)(ih->nhop_room >> 4))
		return -1;
	hop = (struct hpccd_int_hop_wire *)(ih + 1) + idx;
	/* one register for the check and the accesses (the verifier does not
	 * carry a bounds check over to a recomputed packet pointer) */
	hpccd__barrier_var(hop);
	if ((void *)(hop + 1) > end)
		return -1;
	if (hop->hi_be != old_hi || hop->lo_be != old_lo)
		return 1;
	d = hpccd__csum_diff32(d, HPCCD_NTOHL(old_hi), HPCCD_NTOHL(hi_be));
	d = hpccd__csum_diff32(d, HPCCD_NTOHL(old_lo), HPCCD_NTOHL(lo_be));
	hop->hi_be = hi_be;
	hop->lo_be = lo_be;
	if (csum)
		hpccd__csum_apply(csum, d, csum_kind);
	return 0;
}

/* ---- integrity tag --------------------------------------------------------- */

/* Longest tagged run after the prefix that BPF programs compute (PROBE_RESP,
 * NOTIFY): INT header + 8 hops + hpccd header + NOTIFY body = 4 + 64 + 32 +
 * 24 = 124 bytes, i.e. 15 words and a tail.  Userspace, which also tags ACKs
 * and NACKs (INT echo, 4 SACK blocks, window block, trailer head: 4 + 64 +
 * 32 + 64 + 16 + 8 = 188 bytes), defines it as 24 before including this. */
#ifndef HPCCD_TAG_MAX_WORDS
#define HPCCD_TAG_MAX_WORDS 16
#endif

/* The tag prefix (struct hpccd_tag_input) of a packet of type `type`:
 * the 5-tuple as the data (or probe) sender sees it, so the addresses and
 * ports of a PROBE_RESP, NOTIFY, ACK, NACK or CNP, which travel from receiver to sender,
 * are reversed.  sport/dport: the packet's own L4 ports, network order. */
static __always_inline void hpccd__tag_input(struct hpccd_tag_input *ti, const struct iphdr *iph,
					     __be16 sport, __be16 dport, __u32 type)
{
	if (type == HPCCD_T_PROBE_RESP || type == HPCCD_T_NOTIFY || type == HPCCD_T_ACK ||
	    type == HPCCD_T_NACK || type == HPCCD_T_CNP) {
		ti->saddr = iph->daddr;
		ti->daddr = iph->saddr;
		ti->sport = dport;
		ti->dport = sport;
	} else {
		ti->saddr = iph->saddr;
		ti->daddr = iph->daddr;
		ti->sport = sport;
		ti->dport = dport;
	}
	ti->proto = iph->protocol;
	ti->pad[0] = 0;
	ti->pad[1] = 0;
	ti->pad[2] = 0;
}

/* SipHash-2-4 (k0, k1) of the prefix followed by every byte from the INT
 * header to the byte before v->tag (docs/wire-format.md "Integrity tag").
 * v comes from a successful hpccd__parse(); end is the frame end.  Words
 * are read straight from the packet, one bounds check each, at most
 * HPCCD_TAG_MAX_WORDS.  Returns 0 with *out set, or -1 (no tag, or not in
 * the frame). */
static __always_inline int hpccd__tag(const struct hpccd_view *v, const struct hpccd_tag_input *ti,
				      __u64 k0, __u64 k1, void *end, __u64 *out)
{
	struct hpccd_siphash s;
	__u8 *p = (__u8 *)v->int_hdr, *q;
	__u64 n, nwords, ntail, toff;   /* 64-bit: no zero-extension for clang to redo */
	__u64 tail = 0;
	__u32 i;

	if (!v->tag || !p)
		return -1;
	n = (__u64)((__u8 *)v->tag - p);
	/* The barrier keeps clang from re-deriving n from the pointers after
	 * the check below, so the verifier's bound on n holds. */
	hpccd__barrier_var(n);
	if (n > HPCCD_TAG_MAX_WORDS * 8)
		return -1;
	/* Three values, each behind a barrier so that clang keeps them
	 * apart: the loop compares i with nwords only, so the verifier's
	 * refinement of nwords at each possible loop exit does not reach
	 * toff, the exits leave equal states and are pruned (otherwise the
	 * 16 exits x 8 tail lengths are all verified separately). */
	nwords = n >> 3;
	ntail = n & 7;
	toff = n & ~7ULL;
	hpccd__barrier_var(nwords);
	hpccd__barrier_var(ntail);
	hpccd__barrier_var(toff);

	hpccd_siphash__init(&s, k0, k1);
	hpccd_siphash__absorb(&s, hpccd_siphash__le64(ti));
	hpccd_siphash__absorb(&s, hpccd_siphash__le64((const __u8 *)ti + 8));
	for (i = 0; i < HPCCD_TAG_MAX_WORDS; i++) {
		if (i >= nwords)
			break;
		q = p + i * 8;
		hpccd__barrier_var(q);
		if ((void *)(q + 8) > end)
			return -1;
		hpccd_siphash__absorb(&s, hpccd_siphash__le64(q));
	}
	for (i = 0; i < 7; i++) {
		if (i >= ntail)
			break;
		q = p + toff + i;
		hpccd__barrier_var(q);
		if ((void *)(q + 1) > end)
			return -1;
		tail |= (__u64)q[0] << (8 * i);
	}
	*out = hpccd_siphash__final(&s, tail, HPCCD_TAG_INPUT_BYTES + n);
	return 0;
}

/* The tag carried at v->tag, as a number (big-endian on the wire). */
static __always_inline __u64 hpccd__tag_get(const struct hpccd_view *v)
{
	return (__u64)HPCCD_NTOHL(v->tag->hi) << 32 | HPCCD_NTOHL(v->tag->lo);
}

#endif /* HPCCD_PARSE_H */
