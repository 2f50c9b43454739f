/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The packet writers of hpccd, beside the parser (parse.h): every header
 * hpccd puts on the wire is written here, field by field through the
 * structs of wire.h and of the Linux UAPI, never by byte offset.  Users:
 * the AF_XDP engine's frames (fastpath/transport/frame.c), the TCP-side
 * probe (fastpath/tcpside/probe.c), and the probe reflector, which is
 * written once here (hpccd__reflect_probe) and run by xdp_host in the
 * kernel and by the engine (hpccd_wire_reflect_probe, fastpath/cc/wire.c)
 * when the program leaves probes to it.
 *
 * Who may include this: what may include parse.h (BPF C after vmlinux.h,
 * <bpf/bpf_helpers.h> and <bpf/bpf_endian.h>; userspace C).  Not the cffi
 * cdef: everything here is static inline.  The rules of parse.h hold: no
 * libc (__builtin_memcpy of constant sizes only), no calls, every function
 * __always_inline, loops with a constant bound.
 *
 * Alignment: as for the parser, the writers store through the structs, so
 * userspace places a frame 2 bytes past a multiple of 4 (NET_IP_ALIGN) and
 * an IPv4 packet without Ethernet at a multiple of 4: every field from the
 * IPv4 header on is then naturally aligned.
 *
 * Byte order: arguments named *_be are network order, as they stand in a
 * packet (addresses, ports); every other number is host order and is
 * written big-endian.
 *
 * Checksums: the arithmetic shared by BPF and userspace (RFC 1624
 * incremental update, pseudo-header, fold, final write) is parse.h's.  The
 * sum of a run of bytes has one home per place code runs: in userspace
 * hpccd_csum_partial() (include/hpccd/csum.h, vectorised with AVX2 where
 * the CPU has it), in BPF the kernel's bpf_csum_diff() helper.  Two must
 * exist: a BPF program can call neither a function of another object nor
 * vector code, and userspace has no BPF helpers.  The writers below leave
 * checksum fields at 0 for the caller to fill once the packet is whole.
 */
#ifndef HPCCD_BUILD_H
#define HPCCD_BUILD_H

#include "parse.h"

#define HPCCD_ETH_ALEN       6
#define HPCCD_ETH_HLEN       14
#define HPCCD_IP4_HLEN       20        /* hpccd writes no IPv4 options */
#define HPCCD_UDP_HLEN       8
#define HPCCD_TCP_HLEN       20        /* and no TCP options (probes) */
#define HPCCD_IP_DF          0x4000    /* senders never fragment (wire-format.md) */
#define HPCCD_IP_TTL         64
#define HPCCD_IP_ECN_MASK    0x03
#define HPCCD_IP_ECN_ECT0    0x02
#define HPCCD_IP_ECN_CE      0x03

/* ---- the writers' offsets are the structs' ------------------------------- */

/* The engine computes frame offsets from the lengths above
 * (HPCCD_ETH_HLEN + HPCCD_IP4_HLEN + HPCCD_UDP_HLEN is where the INT header
 * starts), and docs/wire-format.md draws the fields at these offsets, which
 * the Python twin (daemon/hpccd/core/wire.py) packs: the structs must agree
 * with both. */
#define hpccd__off(t, m) __builtin_offsetof(t, m)
_Static_assert(sizeof(struct ethhdr) == HPCCD_ETH_HLEN, "Ethernet header is 14 bytes");
_Static_assert(hpccd__off(struct ethhdr, h_source) == HPCCD_ETH_ALEN, "source MAC at 6");
_Static_assert(hpccd__off(struct ethhdr, h_proto) == 12, "EtherType at 12");
_Static_assert(sizeof(struct iphdr) == HPCCD_IP4_HLEN, "IPv4 header is 20 bytes");
_Static_assert(hpccd__off(struct iphdr, tos) == 1 && hpccd__off(struct iphdr, tot_len) == 2 &&
	       hpccd__off(struct iphdr, id) == 4 && hpccd__off(struct iphdr, frag_off) == 6 &&
	       hpccd__off(struct iphdr, ttl) == 8 && hpccd__off(struct iphdr, protocol) == 9 &&
	       hpccd__off(struct iphdr, check) == 10 && hpccd__off(struct iphdr, saddr) == 12 &&
	       hpccd__off(struct iphdr, daddr) == 16, "IPv4 field offsets (RFC 791)");
_Static_assert(sizeof(struct udphdr) == HPCCD_UDP_HLEN && hpccd__off(struct udphdr, dest) == 2 &&
	       hpccd__off(struct udphdr, len) == 4 && hpccd__off(struct udphdr, check) == 6,
	       "UDP field offsets (RFC 768)");
_Static_assert(sizeof(struct tcphdr) == HPCCD_TCP_HLEN && hpccd__off(struct tcphdr, dest) == 2 &&
	       hpccd__off(struct tcphdr, seq) == 4 && hpccd__off(struct tcphdr, ack_seq) == 8 &&
	       hpccd__off(struct tcphdr, window) == 14 && hpccd__off(struct tcphdr, check) == 16 &&
	       hpccd__off(struct tcphdr, urg_ptr) == 18, "TCP field offsets (RFC 9293)");
_Static_assert(hpccd__off(struct hpccd_int_hdr, nhop_room) == 1 &&
	       hpccd__off(struct hpccd_int_hdr, path_flags) == 2, "INT header (wire-format.md)");
_Static_assert(hpccd__off(struct hpccd_hdr, flags) == 1 && hpccd__off(struct hpccd_hdr, len) == 2 &&
	       hpccd__off(struct hpccd_hdr, flow_id) == 4 && hpccd__off(struct hpccd_hdr, seq_hi) == 8 &&
	       hpccd__off(struct hpccd_hdr, seq_lo) == 12 && hpccd__off(struct hpccd_hdr, ack_hi) == 16 &&
	       hpccd__off(struct hpccd_hdr, ack_lo) == 20 && hpccd__off(struct hpccd_hdr, ts) == 24 &&
	       hpccd__off(struct hpccd_hdr, aux) == 28, "hpccd header (wire-format.md)");
_Static_assert(hpccd__off(struct hpccd_rxwin, u_q16) == 4 && hpccd__off(struct hpccd_rxwin, n_flows) == 8 &&
	       hpccd__off(struct hpccd_rxwin, reserved) == 10 && hpccd__off(struct hpccd_rxwin, t_ns) == 12,
	       "window block (wire-format.md)");
_Static_assert(hpccd__off(struct hpccd_fb_trailer, fb_flags) == 4 &&
	       hpccd__off(struct hpccd_fb_trailer, tag_hi) == 8 &&
	       hpccd__off(struct hpccd_fb_trailer, tag_lo) == 12, "feedback trailer (wire-format.md)");
_Static_assert(hpccd__off(struct hpccd_sack_block, start_lo) == 4 &&
	       hpccd__off(struct hpccd_sack_block, end_hi) == 8 &&
	       hpccd__off(struct hpccd_sack_block, end_lo) == 12 &&
	       sizeof(struct hpccd_sack_block) == HPCCD_SACK_BLOCK_BYTES, "SACK block (wire-format.md)");
_Static_assert(sizeof(struct hpccd_int_hop_wire) == HPCCD_INT_HOP_BYTES, "hop record is 8 bytes");
_Static_assert(hpccd__off(struct hpccd_tag, lo) == 4, "tag: hi, lo");

/* ---- Ethernet, IPv4, UDP, TCP -------------------------------------------- */

/* Ethernet to dmac from smac, EtherType IPv4, no VLAN tag. */
static __always_inline void hpccd__put_eth(struct ethhdr *eth, const __u8 *dmac, const __u8 *smac)
{
	__builtin_memcpy(eth->h_dest, dmac, HPCCD_ETH_ALEN);
	__builtin_memcpy(eth->h_source, smac, HPCCD_ETH_ALEN);
	eth->h_proto = HPCCD_HTONS(HPCCD_ETH_P_IP);
}

/* IPv4 without options: version 4, IHL 5, tos (DSCP << 2 | ECN), DF, TTL
 * 64, proto, the addresses (network order).  Total length, id and the
 * header checksum are 0: hpccd__put_ip4_len() and the caller's checksum
 * fill them once the packet's length is known (a kernel raw socket with
 * IP_HDRINCL fills id and checksum itself). */
static __always_inline void hpccd__put_ip4(struct iphdr *iph, __u8 tos, __u8 proto, __be32 saddr_be,
					   __be32 daddr_be)
{
	/* version/IHL by a byte, not the bitfields (parse.h, "Byte order") */
	*(__u8 *)iph = 4 << 4 | HPCCD_IP4_HLEN / 4;
	iph->tos = tos;
	iph->tot_len = 0;
	iph->id = 0;
	iph->frag_off = HPCCD_HTONS(HPCCD_IP_DF);
	iph->ttl = HPCCD_IP_TTL;
	iph->protocol = proto;
	iph->check = 0;
	iph->saddr = saddr_be;
	iph->daddr = daddr_be;
}

static __always_inline void hpccd__put_ip4_len(struct iphdr *iph, __u16 tot_len, __u16 id)
{
	iph->tot_len = HPCCD_HTONS(tot_len);
	iph->id = HPCCD_HTONS(id);
}

/* UDP header: the ports (network order); length and checksum 0, filled by
 * hpccd__put_udp_len() and the caller once the datagram is whole. */
static __always_inline void hpccd__put_udp(struct udphdr *uh, __be16 sport_be, __be16 dport_be)
{
	uh->source = sport_be;
	uh->dest = dport_be;
	uh->len = 0;
	uh->check = 0;
}

static __always_inline void hpccd__put_udp_len(struct udphdr *uh, __u16 len)
{
	uh->len = HPCCD_HTONS(len);
}

/* The TCP header of a TCP-side probe (docs/wire-format.md "TCP-side
 * probe"): the flow's ports (network order), seq = the probe number's low
 * 32 bits, ack 0, data offset 5, no flag, window 0, checksum 0 (the
 * caller's, over the whole segment). */
static __always_inline void hpccd__put_tcp_probe(struct tcphdr *th, __be16 sport_be, __be16 dport_be,
						 __u32 seq)
{
	th->source = sport_be;
	th->dest = dport_be;
	th->seq = HPCCD_HTONL(seq);
	th->ack_seq = 0;
	/* data offset and flags by bytes, not the bitfields */
	((__u8 *)th)[HPCCD_TCP_FLAGS_OFF - 1] = (HPCCD_TCP_HLEN / 4) << 4;
	((__u8 *)th)[HPCCD_TCP_FLAGS_OFF] = 0;
	th->window = 0;
	th->check = 0;
	th->urg_ptr = 0;
}

/* ---- INT header, hpccd header, bodies ------------------------------------- */

/* One INT hop word ([HPCC] section 4.1; its layout in int_hop.h) from an
 * egress port's state: its speed code (HPCCD_SPEED_*), a time in ns, the
 * bytes it has sent and its backlog in bytes.  TS and txBytes wrap, qLen
 * saturates at HPCCD_INT_QLEN_MAX.  The lab switch's stamp at enqueue and
 * both departure rewrites compose it here; hpccd_int_hop_pack() (C) is the
 * range-checked twin for fields already in units. */
static __always_inline __u64 hpccd__int_hop_word(__u64 speed_code, __u64 ts_ns, __u64 tx_bytes,
						 __u64 backlog_bytes)
{
	__u64 ql = backlog_bytes / HPCCD_INT_QLEN_UNIT;

	if (ql > HPCCD_INT_QLEN_MAX)
		ql = HPCCD_INT_QLEN_MAX;
	return (speed_code & HPCCD_INT_SPEED_MASK) << HPCCD_INT_SPEED_SHIFT |
	       (ts_ns & HPCCD_INT_TS_MASK) << HPCCD_INT_TS_SHIFT |
	       ((tx_bytes / HPCCD_INT_TX_UNIT) & HPCCD_INT_TX_MASK) << HPCCD_INT_TX_SHIFT |
	       ql << HPCCD_INT_QLEN_SHIFT;
}

/* INT header with nHop 0, pathID 0 and `room` empty (zeroed) hop records;
 * COLLECT when `collect` is set (the engine's DATA and PROBEs ask for it
 * iff they have room; a TCP-side probe always does, so that a switch
 * finding no room says so with OVERFLOW).  room <= HPCCD_INT_MAX_HOPS (the
 * caller's).  Returns the bytes written. */
static __always_inline __u32 hpccd__put_int(struct hpccd_int_hdr *ih, __u32 room, int collect)
{
	struct hpccd_int_hop_wire *hop = (struct hpccd_int_hop_wire *)(ih + 1);
	__u32 i;

	ih->magic_ver = HPCCD_INT_MAGIC << 4 | HPCCD_WIRE_VERSION;
	ih->nhop_room = (__u8)(room & 0xf);
	ih->path_flags = collect ? HPCCD_HTONS(HPCCD_INT_F_COLLECT << 12) : 0;
	for (i = 0; i < HPCCD_INT_MAX_HOPS; i++) {
		if (i >= room)
			break;
		hop[i].hi_be = 0;
		hop[i].lo_be = 0;
	}
	return HPCCD_INT_HDR_BYTES + room * HPCCD_INT_HOP_BYTES;
}

/* Clears COLLECT of an INT header that is echoed or reflected, so that the
 * switches of the way back do not stamp into it (docs/wire-format.md "INT
 * header"); nHop, pathID, OVERFLOW and the records stay.  Returns the RFC
 * 1624 difference of the L4 checksum (parse.h hpccd__csum_diff16). */
static __always_inline __u32 hpccd__int_clear_collect(struct hpccd_int_hdr *ih, __u32 d)
{
	__u16 pf = HPCCD_NTOHS(ih->path_flags), npf = pf & ~(HPCCD_INT_F_COLLECT << 12);

	ih->path_flags = HPCCD_HTONS(npf);
	return hpccd__csum_diff16(d, pf, npf);
}

/* The 32-byte hpccd header (wire.h struct hpccd_hdr says what seq, ack, ts
 * and aux hold for each type). */
static __always_inline void hpccd__put_hdr(struct hpccd_hdr *h, __u32 type, __u32 flags, __u32 len,
					   __u32 flow_id, __u64 seq, __u64 ack, __u32 ts, __u32 aux)
{
	h->ver_type = (__u8)(HPCCD_WIRE_VERSION << 4 | type);
	h->flags = (__u8)flags;
	h->len = HPCCD_HTONS((__u16)len);
	h->flow_id = HPCCD_HTONL(flow_id);
	h->seq_hi = HPCCD_HTONL((__u32)(seq >> 32));
	h->seq_lo = HPCCD_HTONL((__u32)seq);
	h->ack_hi = HPCCD_HTONL((__u32)(ack >> 32));
	h->ack_lo = HPCCD_HTONL((__u32)ack);
	h->ts = HPCCD_HTONL(ts);
	h->aux = HPCCD_HTONL(aux);
}

/* One SACK block: [start, end) of the bytes held past the cumulative ACK. */
static __always_inline void hpccd__put_sack(struct hpccd_sack_block *b, __u64 start, __u64 end)
{
	b->start_hi = HPCCD_HTONL((__u32)(start >> 32));
	b->start_lo = HPCCD_HTONL((__u32)start);
	b->end_hi = HPCCD_HTONL((__u32)(end >> 32));
	b->end_lo = HPCCD_HTONL((__u32)end);
}

/* The Rx-HPCC window block of an ACK / NACK, values already saturated to
 * their fields by the caller; reserved 0. */
static __always_inline void hpccd__put_rxwin(struct hpccd_rxwin *w, __u32 w_bytes, __u32 u_q16,
					     __u16 n_flows, __u32 t_ns)
{
	w->w_bytes = HPCCD_HTONL(w_bytes);
	w->u_q16 = HPCCD_HTONL(u_q16);
	w->n_flows = HPCCD_HTONS(n_flows);
	w->reserved = 0;
	w->t_ns = HPCCD_HTONL(t_ns);
}

/* The feedback trailer's first half; the tag (hpccd__put_tag at
 * &tr->tag_hi) is computed over everything before it, fb_seq and fb_flags
 * included. */
static __always_inline void hpccd__put_fb_head(struct hpccd_fb_trailer *tr, __u32 fb_seq,
					       __u32 fb_flags)
{
	tr->fb_seq = HPCCD_HTONL(fb_seq);
	tr->fb_flags = HPCCD_HTONL(fb_flags);
}

/* Writes the tag big-endian; returns d plus the RFC 1624 difference of the
 * 8 bytes it replaced (for a caller that patches the L4 checksum). */
static __always_inline __u32 hpccd__put_tag(struct hpccd_tag *tg, __u64 tag, __u32 d)
{
	d = hpccd__csum_diff32(d, HPCCD_NTOHL(tg->hi), (__u32)(tag >> 32));
	d = hpccd__csum_diff32(d, HPCCD_NTOHL(tg->lo), (__u32)tag);
	tg->hi = HPCCD_HTONL((__u32)(tag >> 32));
	tg->lo = HPCCD_HTONL((__u32)tag);
	return d;
}

/* ---- the probe reflector --------------------------------------------------- */

enum hpccd_reflect {
	HPCCD_REFLECT_DONE = 0,    /* the PROBE_RESP is complete, checksums patched */
	HPCCD_REFLECT_RESUM = 1,   /* complete but for the L4 checksum, which was
				    * CHECKSUM_PARTIAL: the field is 0, and the
				    * caller writes hpccd__csum_put(csum,
				    * hpccd__csum_pseudo4(iph, l4_len) + the sum of
				    * the l4_len bytes at l4, kind) */
	HPCCD_REFLECT_BAD = -1,    /* a header not in the frame: untouched (never
				    * after a successful hpccd__parse(); the checks
				    * are the verifier's) */
};

/* Where the reflector leaves the L4 checksum to its caller. */
struct hpccd_reflect_csum {
	__be16 *csum;      /* the UDP or TCP checksum field */
	__u32 l4_len;      /* the segment's length, header included */
	int kind;          /* HPCCD_CSUM_UDP or HPCCD_CSUM_TCP */
};

/* Rewrites the PROBE that hpccd__parse() found at v into its PROBE_RESP, in
 * place ([HPCC++2022] section 6.2.1: the receiver reflects the probe; the
 * packet never grows: the tag goes into the slot the prober left).  l4:
 * the UDP header, or the TCP header when tcp is set (one pointer and a
 * flag, not two pointers of which one is NULL: clang merges inlined copies
 * and the verifier then follows a NULL it cannot rule out).  k0, k1: the
 * tag key.  docs/wire-format.md "Probes" and the header of
 * ebpf/xdp_host.bpf.c give the reasons for each rule:
 *  - L2 back to whoever handed the probe over: MACs swapped;
 *  - IPv4: addresses swapped, TTL reset to HPCCD_REFLECT_TTL (wire.h), a CE mark of
 *    the forward path becomes ECT(0); DSCP, id, DF and options kept; the
 *    header checksum patched (RFC 1624);
 *  - L4: ports swapped, the rest (TCP seq: the probe number) kept;
 *  - INT: COLLECT cleared, hops, nHop, pathID and OVERFLOW kept;
 *  - hpccd header: type PROBE_RESP, all else kept; the tag over the
 *    response as it now stands, prefix = the 5-tuple as the prober sees it;
 *  - L4 checksum: patched with the difference of every word changed,
 *    unless the probe's field is CHECKSUM_PARTIAL (a probe a kernel socket
 *    sent over a veth: it holds exactly the folded pseudo-header sum and
 *    the rest is left to the "device"), which is recomputed over the
 *    segment by the caller (HPCCD_REFLECT_RESUM).  A patched wrong
 *    checksum stays wrong; a zero UDP checksum stays zero; a probe whose
 *    announced L4 length is not the parsed one is always patched.
 * The caller has checked that v is a PROBE with its tag slot (v->tag). */
static __always_inline int hpccd__reflect_probe(struct ethhdr *eth, struct iphdr *iph, void *l4,
						int tcp, const struct hpccd_view *v, void *end,
						__u64 k0, __u64 k1, struct hpccd_reflect_csum *rc)
{
	struct hpccd_int_hdr *ih = v->int_hdr;
	struct hpccd_hdr *h = v->hdr;
	struct hpccd_tag *tag = v->tag;
	/* source and dest are the first two words of a UDP and a TCP header */
	__be16 *ports = (__be16 *)l4;
	struct hpccd_tag_input ti;
	__u16 w_old, w_new;
	__u8 mac[HPCCD_ETH_ALEN], tos;
	__u32 d, announced;
	__be32 addr;
	__be16 port;
	__u64 t;

	/* Bounds for the verifier, which does not carry what hpccd__parse()
	 * proved through the view on the stack; never true at run time. */
	if ((void *)(eth + 1) > end || (void *)(iph + 1) > end || !ih || !h || !tag ||
	    (void *)(ih + 1) > end || (void *)(h + 1) > end || (void *)(tag + 1) > end)
		return HPCCD_REFLECT_BAD;
	/* L4 length: as parsed (header, INT header, room hop records, hpccd
	 * header, tag: the parser found len == 8 and nothing after it), from
	 * masked fields so that the verifier bounds it (<= 60 + 4 + 15 * 8 +
	 * 40 = 224; a multiple of 4); and as the headers announce it. */
	rc->l4_len = HPCCD_INT_HDR_BYTES + (v->room & 0xf) * HPCCD_INT_HOP_BYTES + HPCCD_HDR_BYTES +
		     HPCCD_TAG_BYTES;
	if (tcp) {
		if ((void *)((struct tcphdr *)l4 + 1) > end)
			return HPCCD_REFLECT_BAD;
		rc->csum = &((struct tcphdr *)l4)->check;
		rc->kind = HPCCD_CSUM_TCP;
		rc->l4_len += (__u32)(((__u8 *)l4)[12] >> 4) * 4;
		announced = HPCCD_NTOHS(iph->tot_len) - (__u32)(*(__u8 *)iph & 0xf) * 4;
	} else {
		if ((void *)((struct udphdr *)l4 + 1) > end)
			return HPCCD_REFLECT_BAD;
		rc->csum = &((struct udphdr *)l4)->check;
		rc->kind = HPCCD_CSUM_UDP;
		rc->l4_len += sizeof(struct udphdr);
		announced = HPCCD_NTOHS(((struct udphdr *)l4)->len);
	}

	__builtin_memcpy(mac, eth->h_dest, HPCCD_ETH_ALEN);
	__builtin_memcpy(eth->h_dest, eth->h_source, HPCCD_ETH_ALEN);
	__builtin_memcpy(eth->h_source, mac, HPCCD_ETH_ALEN);

	/* IPv4 header checksum words: byte 0-1 is version/ihl << 8 | tos,
	 * byte 8-9 is ttl << 8 | protocol; the address swap is neutral. */
	addr = iph->saddr;
	iph->saddr = iph->daddr;
	iph->daddr = addr;
	d = 0;
	tos = iph->tos;
	if ((tos & HPCCD_IP_ECN_MASK) == HPCCD_IP_ECN_CE) {
		__u8 vihl = *(__u8 *)iph;

		iph->tos = (tos & ~HPCCD_IP_ECN_MASK) | HPCCD_IP_ECN_ECT0;
		d = hpccd__csum_diff16(d, (__u16)(vihl << 8 | tos), (__u16)(vihl << 8 | iph->tos));
	}
	if (iph->ttl != HPCCD_REFLECT_TTL) {
		w_old = (__u16)(iph->ttl << 8 | iph->protocol);
		w_new = (__u16)(HPCCD_REFLECT_TTL << 8 | iph->protocol);
		d = hpccd__csum_diff16(d, w_old, w_new);
		iph->ttl = HPCCD_REFLECT_TTL;
	}
	/* The IPv4 header checksum is always present: CSUM_TCP semantics. */
	hpccd__csum_apply(&iph->check, d, HPCCD_CSUM_TCP);

	/* L4: ports swapped (checksum-neutral). */
	port = ports[0];
	ports[0] = ports[1];
	ports[1] = port;

	d = hpccd__int_clear_collect(ih, 0);
	w_old = (__u16)(h->ver_type << 8 | h->flags);
	h->ver_type = (HPCCD_WIRE_VERSION << 4) | HPCCD_T_PROBE_RESP;
	w_new = (__u16)(h->ver_type << 8 | h->flags);
	d = hpccd__csum_diff16(d, w_old, w_new);

	hpccd__tag_input(&ti, iph, ports[0], ports[1], HPCCD_T_PROBE_RESP);
	if (hpccd__tag(v, &ti, k0, k1, end, &t))
		return HPCCD_REFLECT_BAD;   /* cannot happen: tag checked above */
	d = hpccd__put_tag(tag, t, d);

	if (announced == rc->l4_len && (tcp || *rc->csum) &&
	    hpccd__csum_is_partial(rc->csum, iph, rc->l4_len)) {
		*rc->csum = 0;
		return HPCCD_REFLECT_RESUM;
	}
	hpccd__csum_apply(rc->csum, d, rc->kind);
	return HPCCD_REFLECT_DONE;
}

#endif /* HPCCD_BUILD_H */
