// SPDX-License-Identifier: BSD-2-Clause
/*
 * libFuzzer harness: one Ethernet frame (the whole input) through the
 * shared packet parser of include/hpccd/parse.h, the code the BPF
 * programs include, by way of its userspace face (include/hpccd/
 * wire_api.h, fastpath/cc/wire.c): classification, decoded fields, the
 * integrity tag, and the INT switch's in-place hop stamp with its
 * incremental checksum update.
 *
 * Oracles, each a FUZZ_CHECK (trap) besides ASan/UBSan:
 *  - the class equals that of ref_classify() below, an independent
 *    byte-level reading of docs/wire-format.md "Malformed packets" (the
 *    same spec hpccd.core.wire.classify follows in Python);
 *  - every decoded field equals the bytes it comes from, every offset lies
 *    inside the L4 payload region, and the parts wire_api.h declares valid
 *    for the class are filled;
 *  - the frame parsed in place (2 bytes past a 4-byte boundary, the
 *    placement BPF and AF_XDP give) and parsed from an unaligned buffer
 *    (wire.c copies it) decode identically;
 *  - hpccd_wire_tag() returns the documented code for the class and, for
 *    PROBE_RESP, NOTIFY, ACK and NACK, the SipHash-2-4 of the 16-byte prefix and the
 *    bytes from the INT header to the tag computed here in one call of
 *    hpccd_wire_siphash24() (parse.h feeds it word by word, as BPF must);
 *    hpccd_wire_tag_verify() says whether the carried tag is that one, and
 *    hpccd_wire_tag_span() over the prefix and span gives the same tag;
 *  - hpccd_wire_reflect_probe() (build.h's reflector) turns a valid PROBE
 *    into its valid, tagged PROBE_RESP, keeping right checksums right,
 *    and refuses anything else without touching it;
 *  - hpccd__stamp_hop() on a valid packet with a correct L4 checksum
 *    writes exactly the record at nHop (or sets OVERFLOW once, or leaves
 *    the packet alone without COLLECT), the packet stays valid, and the
 *    incrementally updated checksum is still correct (a zero UDP checksum
 *    stays zero).
 *
 * Every buffer handed to the parser is exactly the frame's size, so a
 * read one byte past the frame is an ASan report.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hpccd/build.h"   /* and parse.h */
#include "hpccd/wire_api.h"

#include "fuzz_common.h"

#define PORT 18471   /* tests/vectors/wire.json udp_port */
#define DSCP 45      /* tests/vectors/wire.json probe_dscp */

/* tests/vectors/wire.json tag_key_hex, so that the seeds' valid tags
 * verify and the fuzzer starts from both outcomes. */
static const uint8_t KEY[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

static unsigned be16(const uint8_t *p) { return (unsigned)p[0] << 8 | p[1]; }
static uint32_t be32(const uint8_t *p) { return (uint32_t)be16(p) << 16 | be16(p + 2); }
static uint64_t be64(const uint8_t *p) { return (uint64_t)be32(p) << 32 | be32(p + 4); }

/* ---- the reference classifier ------------------------------------------- */

struct ref {
	int cls;              /* HPCCD_WIRE_NOT_HPCCD or enum hpccd_wire_err */
	size_t ip, l4, start, end; /* offsets: IPv4 and L4 header, INT header, region end */
	int proto;
	int vlan;
};

/* docs/wire-format.md, "Outer headers", "TCP-side probe" and "Malformed
 * packets", read byte by byte with offsets (no structs, no pointers into
 * the frame): a second implementation to hold parse.h to. */
static void ref_classify(const uint8_t *f, size_t n, struct ref *r)
{
	size_t ip = 14, ihl, l4, ip_end, start, end, hdr, room, nhop;
	unsigned et, tot, type;

	memset(r, 0, sizeof(*r));
	r->cls = HPCCD_WIRE_NOT_HPCCD;
	if (n < 14)
		return;
	et = be16(f + 12);
	if (et == 0x8100) {
		if (n < 18)
			return;
		et = be16(f + 16);
		ip = 18;
		r->vlan = 1;
	}
	if (et != 0x0800 || ip + 20 > n)
		return;
	ihl = (size_t)(f[ip] & 0xf) * 4;
	tot = be16(f + ip + 2);
	if (f[ip] >> 4 != 4 || ihl < 20 || ip + ihl > n || tot < ihl ||
	    (be16(f + ip + 6) & 0x1fff))
		return;
	l4 = ip + ihl;
	ip_end = ip + tot < n ? ip + tot : n;
	r->proto = f[ip + 9];
	if (r->proto == 17) {
		unsigned ulen;

		if (l4 + 8 > ip_end)
			return;
		ulen = be16(f + l4 + 4);
		if (ulen < 8 || (be16(f + l4) != PORT && be16(f + l4 + 2) != PORT))
			return;
		start = l4 + 8;
		end = l4 + ulen < ip_end ? l4 + ulen : ip_end;
	} else if (r->proto == 6) {
		size_t doff;

		if (l4 + 20 > ip_end || f[ip + 1] >> 2 != DSCP)
			return;
		doff = (size_t)(f[l4 + 12] >> 4) * 4;
		if (doff < 20 || l4 + doff > ip_end)
			return;
		if ((f[l4 + 12] & 1) || f[l4 + 13])
			return;
		start = l4 + doff;
		if (start >= ip_end || f[start] >> 4 != 0xC)
			return;
		end = ip_end;
	} else {
		return;
	}
	r->ip = ip;
	r->l4 = l4;
	r->start = start;
	r->end = end;

	n = end - start;
	f += start;
	if (n < 4) { r->cls = 1; return; }
	if (f[0] >> 4 != 0xC) { r->cls = 2; return; }
	if ((f[0] & 0xf) != 1) { r->cls = 3; return; }
	nhop = f[1] >> 4;
	room = f[1] & 0xf;
	if (room > 8) { r->cls = 4; return; }
	if (nhop > room) { r->cls = 5; return; }
	hdr = 4 + 8 * room;
	if (n < hdr) { r->cls = 6; return; }
	if (n < hdr + 32) { r->cls = 7; return; }
	if (f[hdr] >> 4 != 1) { r->cls = 8; return; }
	type = f[hdr] & 0xf;
	if (type < 1 || type > 7) { r->cls = 9; return; }
	if (be16(f + hdr + 2) != n - hdr - 32) { r->cls = 10; return; }
	r->cls = 0;
}

/* ---- checks of one parse --------------------------------------------------- */

static void check_info(const uint8_t *f, size_t n, int rc, const struct ref *r,
		       const struct hpccd_wire_info *in)
{
	const uint8_t *ih, *h;
	size_t hdr, i;
	unsigned room;

	FUZZ_CHECK(rc == r->cls);
	if (rc < 0)
		return;
	/* outer headers */
	FUZZ_CHECK(in->saddr == be32(f + r->ip + 12));
	FUZZ_CHECK(in->daddr == be32(f + r->ip + 16));
	FUZZ_CHECK(in->sport == be16(f + r->l4));
	FUZZ_CHECK(in->dport == be16(f + r->l4 + 2));
	FUZZ_CHECK(in->l4 == r->proto);
	FUZZ_CHECK(in->dscp == f[r->ip + 1] >> 2);
	FUZZ_CHECK(in->ecn == (f[r->ip + 1] & 3));
	FUZZ_CHECK(in->vlan == r->vlan);
	FUZZ_CHECK(in->l4_end_off == r->end && r->end <= n);
	if (rc == HPCCD_E_INT_TRUNC) {
		FUZZ_CHECK(in->int_off == 0 && in->hdr_off == 0 && in->body_off == 0);
		return;
	}
	/* INT header: class 0 or >= 2 */
	ih = f + r->start;
	room = ih[1] & 0xf;
	FUZZ_CHECK(in->int_off == r->start);
	FUZZ_CHECK(in->int_magic == ih[0] >> 4 && in->int_ver == (ih[0] & 0xf));
	FUZZ_CHECK(in->int_nhop == ih[1] >> 4 && in->int_room == room);
	FUZZ_CHECK(in->int_flags == ih[2] >> 4);
	FUZZ_CHECK(in->int_path_id == (be16(ih + 2) & 0xfff));
	if (rc != HPCCD_E_OK && rc < HPCCD_E_HDR_TRUNC) {
		FUZZ_CHECK(in->hdr_off == 0);
		return;
	}
	/* hops: class 0 or >= 7 */
	FUZZ_CHECK(room <= HPCCD_INT_MAX_HOPS);
	for (i = 0; i < HPCCD_INT_MAX_HOPS; i++) {
		const struct hpccd_int_fields *hf = &in->hops[i];
		uint64_t w = i < room ? be64(ih + 4 + 8 * i) : 0;

		FUZZ_CHECK(hf->speed_code == (w >> 59));
		FUZZ_CHECK(hf->ts == ((w >> 35) & 0xffffff));
		FUZZ_CHECK(hf->tx_units == ((w >> 15) & 0xfffff));
		FUZZ_CHECK(hf->qlen_units == (w & 0x7fff));
	}
	if (rc == HPCCD_E_HDR_TRUNC) {
		FUZZ_CHECK(in->hdr_off == 0);
		return;
	}
	/* hpccd header: class 0 or >= 8 */
	hdr = r->start + 4 + 8 * room;
	h = f + hdr;
	FUZZ_CHECK(in->hdr_off == hdr && hdr + 32 <= r->end);
	FUZZ_CHECK(in->hdr_ver == h[0] >> 4 && in->hdr_type == (h[0] & 0xf));
	FUZZ_CHECK(in->hdr_flags == h[1] && in->hdr_len == be16(h + 2));
	FUZZ_CHECK(in->flow_id == be32(h + 4));
	FUZZ_CHECK(in->seq == be64(h + 8) && in->ack == be64(h + 16));
	FUZZ_CHECK(in->ts == be32(h + 24) && in->aux == be32(h + 28));
	if (rc != HPCCD_E_OK && rc != HPCCD_E_LEN) {
		FUZZ_CHECK(in->body_off == 0 && !in->has_tag && !in->has_notify);
		return;
	}
	FUZZ_CHECK(in->body_off == hdr + 32);
	if (rc == HPCCD_E_LEN) {
		FUZZ_CHECK(in->payload_len == r->end - in->body_off);
		FUZZ_CHECK(in->payload_len != in->hdr_len);
		FUZZ_CHECK(!in->has_tag && !in->has_notify && in->tag_off == 0);
		return;
	}
	/* valid */
	FUZZ_CHECK(in->body_off + in->hdr_len == r->end);
	FUZZ_CHECK(in->has_notify == (in->hdr_type == HPCCD_T_NOTIFY && in->hdr_len == 32));
	FUZZ_CHECK(in->has_trailer == (((in->hdr_type == HPCCD_T_ACK ||
					 in->hdr_type == HPCCD_T_NACK) &&
					in->hdr_len >= 16 && in->hdr_len <= 96 &&
					in->hdr_len % 4 == 0) ||
				       (in->hdr_type == HPCCD_T_CNP && in->hdr_len == 16)));
	FUZZ_CHECK(in->has_tag == (in->has_notify || in->has_trailer ||
				   ((in->hdr_type == HPCCD_T_PROBE ||
				     in->hdr_type == HPCCD_T_PROBE_RESP) && in->hdr_len == 8)));
	if (in->has_trailer) {
		const uint8_t *t = f + r->end - 16;

		FUZZ_CHECK(in->fb_seq == be32(t) && in->fb_flags == be32(t + 4));
		FUZZ_CHECK(in->has_rxwin == ((in->fb_flags & 1) && in->hdr_len >= 32));
		if (in->has_rxwin)
			FUZZ_CHECK(in->w_bytes == be32(t - 16) && in->u_q16 == be32(t - 12) &&
				   in->n_flows == be16(t - 8) && in->t_ns == be32(t - 4));
		FUZZ_CHECK(in->payload_len == in->hdr_len - 16u - (in->has_rxwin ? 16u : 0u));
	} else {
		FUZZ_CHECK(!in->has_rxwin);
		FUZZ_CHECK(in->payload_len == in->hdr_len - (in->has_notify ? 24u : 0u) -
						  (in->has_tag ? 8u : 0u));
	}
	if (in->has_notify) {
		const uint8_t *b = f + in->body_off;

		FUZZ_CHECK(in->w_bytes == be32(b) && in->rate_kbps == be32(b + 4));
		FUZZ_CHECK(in->u_q16 == be32(b + 8) && in->n_flows == be16(b + 12));
		FUZZ_CHECK(in->reserved == be16(b + 14) && in->notify_seq == be32(b + 16));
		FUZZ_CHECK(in->t_ns == be32(b + 20));
	}
	if (in->has_tag) {
		FUZZ_CHECK(in->tag_off == r->end - 8);
		FUZZ_CHECK(in->tag == be64(f + in->tag_off));
	} else {
		FUZZ_CHECK(in->tag_off == 0 && in->tag == 0);
	}
}

/* The types that travel from the data receiver to the data sender: their
 * tag prefix is the reverse of their own 5-tuple. */
static int answer_type(uint32_t type)
{
	return type == HPCCD_T_PROBE_RESP || type == HPCCD_T_NOTIFY || type == HPCCD_T_ACK ||
	       type == HPCCD_T_NACK || type == HPCCD_T_CNP;
}

/* The tag as docs/wire-format.md "Integrity tag" defines it, in one call. */
static uint64_t ref_tag(const uint8_t *f, const struct hpccd_wire_info *in)
{
	uint8_t msg[16 + 4 + 64 + 32 + 88];
	size_t body = in->tag_off - in->int_off;
	int answer = answer_type(in->hdr_type);
	uint32_t sa = answer ? in->daddr : in->saddr, da = answer ? in->saddr : in->daddr;
	uint16_t sp = answer ? in->dport : in->sport, dp = answer ? in->sport : in->dport;

	FUZZ_CHECK(body <= sizeof(msg) - 16);
	memset(msg, 0, 16);
	msg[0] = sa >> 24; msg[1] = sa >> 16; msg[2] = sa >> 8; msg[3] = (uint8_t)sa;
	msg[4] = da >> 24; msg[5] = da >> 16; msg[6] = da >> 8; msg[7] = (uint8_t)da;
	msg[8] = sp >> 8; msg[9] = (uint8_t)sp;
	msg[10] = dp >> 8; msg[11] = (uint8_t)dp;
	msg[12] = in->l4;
	memcpy(msg + 16, f + in->int_off, body);
	return hpccd_wire_siphash24(KEY, msg, 16 + body);
}

/* parse.h's prefix of a packet of type `type` (hpccd__tag_input): the
 * packet's own 5-tuple for DATA and PROBE, reversed for the answers that
 * carry a tag (PROBE_RESP, NOTIFY, ACK, NACK, CNP). */
static void check_tag_input(const uint8_t *f, const struct ref *r,
			    const struct hpccd_wire_info *in)
{
	struct hpccd_tag_input ti;
	int rev = answer_type(in->hdr_type);

	memset(&ti, 0xa5, sizeof(ti));
	hpccd__tag_input(&ti, (const struct iphdr *)(f + r->ip), htons(in->sport),
			 htons(in->dport), in->hdr_type);
	FUZZ_CHECK(ntohl(ti.saddr) == (rev ? in->daddr : in->saddr));
	FUZZ_CHECK(ntohl(ti.daddr) == (rev ? in->saddr : in->daddr));
	FUZZ_CHECK(ntohs(ti.sport) == (rev ? in->dport : in->sport));
	FUZZ_CHECK(ntohs(ti.dport) == (rev ? in->sport : in->dport));
	FUZZ_CHECK(ti.proto == in->l4 && !ti.pad[0] && !ti.pad[1] && !ti.pad[2]);
}

static void check_tag(const uint8_t *f, size_t n, int rc, const struct hpccd_wire_info *in)
{
	uint64_t t = 0;
	int trc = hpccd_wire_tag(KEY, f, n, PORT, DSCP, &t);
	int vrc = hpccd_wire_tag_verify(KEY, f, n, PORT, DSCP);

	if (rc < 0)
		FUZZ_CHECK(trc == HPCCD_WIRE_NOT_HPCCD);
	else if (rc > 0)
		FUZZ_CHECK(trc == -EBADMSG);
	else if (!in->has_tag || in->hdr_type == HPCCD_T_PROBE)
		FUZZ_CHECK(trc == -ENODATA);
	else
		FUZZ_CHECK(trc == 0 && t == ref_tag(f, in));
	if (trc == 0) {
		/* the engine's way to the same tag: prefix and span it knows */
		int answer = answer_type(in->hdr_type);
		struct hpccd_tag_input ti;
		uint64_t s2 = 0;

		memset(&ti, 0, sizeof(ti));
		ti.saddr = htonl(answer ? in->daddr : in->saddr);
		ti.daddr = htonl(answer ? in->saddr : in->daddr);
		ti.sport = htons(answer ? in->dport : in->sport);
		ti.dport = htons(answer ? in->sport : in->dport);
		ti.proto = in->l4;
		FUZZ_CHECK(hpccd_wire_tag_span(KEY, &ti, f + in->int_off, in->tag_off - in->int_off,
					       &s2) == 0 && s2 == t);
	}
	if (trc < 0) {
		FUZZ_CHECK(vrc == trc);
		return;
	}
	FUZZ_CHECK(vrc == (t == in->tag));
	/* The reflector's write (build.h hpccd__put_tag), then it verifies. */
	{
		uint8_t *g = malloc(n + 2);
		struct hpccd_view v;

		FUZZ_CHECK(g != NULL);
		memcpy(g + 2, f, n);
		memset(&v, 0, sizeof(v));
		v.tag = (struct hpccd_tag *)(g + 2 + in->tag_off);
		hpccd__put_tag(v.tag, t, 0);
		FUZZ_CHECK(hpccd__tag_get(&v) == t && be64(g + 2 + in->tag_off) == t);
		FUZZ_CHECK(hpccd_wire_tag_verify(KEY, g + 2, n, PORT, DSCP) == 1);
		free(g);
	}
}

/* ---- the switch's stamp --------------------------------------------------- */

/* RFC 1071 sum of n bytes as big-endian 16-bit words (odd tail padded). */
static uint32_t sum16(const uint8_t *p, size_t n, uint32_t acc)
{
	size_t i;

	for (i = 0; i + 1 < n; i += 2)
		acc += be16(p + i);
	if (n & 1)
		acc += (uint32_t)p[n - 1] << 8;
	return acc;
}

/* The same bytes summed as host-order (little-endian) 16-bit loads, the
 * way bpf_csum_diff() and csum_partial() sum them. */
static uint32_t sum16_mem(const uint8_t *p, size_t n)
{
	uint32_t acc = 0;
	size_t i;

	for (i = 0; i + 1 < n; i += 2)
		acc += (uint32_t)(p[i] | p[i + 1] << 8);
	if (n & 1)
		acc += p[n - 1];
	return acc;
}

static uint16_t fold(uint32_t s)
{
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)s;
}

/* Sum of pseudo-header and segment (checksum field included): 0xffff when
 * the checksum is right. */
static uint16_t l4_sum(const uint8_t *f, const struct ref *r, size_t seg)
{
	uint32_t s = sum16(f + r->ip + 12, 8, 0) + (uint32_t)r->proto + (uint32_t)seg;

	return fold(sum16(f + r->l4, seg, s));
}

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	while (n--)
		h = (h ^ *p++) * 0x100000001b3ULL;
	return h;
}

static void check_stamp(uint8_t *f, size_t n, const struct ref *r)
{
	struct hpccd_wire_info a, b;
	uint8_t *ck = f + r->l4 + (r->proto == 17 ? 6 : 16);
	uint8_t *before = malloc(n);
	size_t seg, i;
	uint64_t h = fnv1a(f, n);
	uint16_t id = h & 0xfff, c0;
	uint32_t hi = (uint32_t)(h >> 12), lo = (uint32_t)(h >> 44) ^ (uint32_t)h;
	unsigned nhop, room, pf;
	int kind = r->proto == 17 ? HPCCD_CSUM_UDP : HPCCD_CSUM_TCP;
	int csum_ok, st, rc;

	FUZZ_CHECK(before != NULL);
	/* The segment the checksum covers (UDP length / IPv4 total length);
	 * when the frame cuts it short there is no checksum to keep right. */
	seg = r->proto == 17 ? be16(f + r->l4 + 4) : be16(f + r->ip + 2) - (r->l4 - r->ip);
	csum_ok = r->l4 + seg <= n && r->l4 + seg == r->end;
	c0 = (uint16_t)be16(ck);
	if (csum_ok && !(kind == HPCCD_CSUM_UDP && c0 == 0)) {
		/* Make the checksum right first, as a sender would have. */
		uint16_t c;

		uint32_t acc;

		ck[0] = ck[1] = 0;
		c = (uint16_t)~l4_sum(f, r, seg);
		if (kind == HPCCD_CSUM_UDP && c == 0)
			c = 0xffff;
		/* parse.h's full checksum (the reflector's) gives the same:
		 * pseudo-header, a memory-order sum of the segment, the write. */
		FUZZ_CHECK(hpccd__csum_from_mem(sum16_mem(f + r->l4, seg)) ==
			   fold(sum16(f + r->l4, seg, 0)));
		acc = hpccd__csum_pseudo4((const struct iphdr *)(f + r->ip), (__u16)seg) +
		      hpccd__csum_from_mem(sum16_mem(f + r->l4, seg));
		hpccd__csum_put((__be16 *)ck, acc, kind);
		FUZZ_CHECK(be16(ck) == c);
		FUZZ_CHECK(l4_sum(f, r, seg) == 0xffff);
	}
	c0 = (uint16_t)be16(ck);
	memcpy(before, f, n);
	nhop = f[r->start + 1] >> 4;
	room = f[r->start + 1] & 0xf;
	pf = be16(f + r->start + 2);
	/* hpccd__hop(): record i for i < room, never past room or the frame. */
	{
		struct hpccd_view v;

		memset(&v, 0, sizeof(v));
		v.hop = (struct hpccd_int_hop_wire *)(f + r->start + 4);
		v.room = (__u8)room;
		for (i = 0; i <= HPCCD_INT_MAX_HOPS + 1; i++)
			FUZZ_CHECK(hpccd__hop(&v, (__u32)i, f + n) ==
				   (i < room ? v.hop + i : NULL));
	}

	st = hpccd__stamp_hop((struct hpccd_int_hdr *)(f + r->start), f + n, id,
			      htonl(hi), htonl(lo), (__be16 *)ck, kind);

	rc = hpccd_wire_parse_frame(before, n, PORT, DSCP, &a);
	FUZZ_CHECK(rc == 0);
	rc = hpccd_wire_parse_frame(f, n, PORT, DSCP, &b);
	FUZZ_CHECK(rc == 0);
	if (!((pf >> 12) & HPCCD_INT_F_COLLECT)) {
		FUZZ_CHECK(st == HPCCD_STAMP_SKIP);
		FUZZ_CHECK(memcmp(before, f, n) == 0);
		goto out;
	}
	if (nhop == room) {
		FUZZ_CHECK(st == HPCCD_STAMP_OVERFLOW);
		FUZZ_CHECK(b.int_flags == (a.int_flags | HPCCD_INT_F_OVERFLOW));
		FUZZ_CHECK(b.int_nhop == a.int_nhop && b.int_path_id == a.int_path_id);
	} else {
		FUZZ_CHECK(st == HPCCD_STAMP_WRITTEN);
		FUZZ_CHECK(b.int_nhop == a.int_nhop + 1 && b.int_room == a.int_room);
		FUZZ_CHECK(b.int_flags == a.int_flags);
		FUZZ_CHECK(b.int_path_id == (a.int_path_id ^ id));
		FUZZ_CHECK(be32(f + r->start + 4 + 8 * nhop) == hi);
		FUZZ_CHECK(be32(f + r->start + 8 + 8 * nhop) == lo);
	}
	/* Nothing else moved: outside the INT header, the written record
	 * and the checksum field every byte is as before. */
	for (i = 0; i < n; i++) {
		if (i >= r->start && i < r->start + 4)
			continue;
		if (st == HPCCD_STAMP_WRITTEN && i >= r->start + 4 + 8 * nhop &&
		    i < r->start + 12 + 8 * nhop)
			continue;
		if (f + i == ck || f + i == ck + 1)
			continue;
		FUZZ_CHECK(f[i] == before[i]);
	}
	if (kind == HPCCD_CSUM_UDP && c0 == 0)
		FUZZ_CHECK(be16(ck) == 0);          /* "no checksum" stays so */
	else if (csum_ok)
		FUZZ_CHECK(l4_sum(f, r, seg) == 0xffff);
	if (kind == HPCCD_CSUM_UDP)
		FUZZ_CHECK(c0 == 0 || be16(ck) != 0);
out:
	free(before);
}

/* hpccd__stamp_hop() on an INT header the parser refused or that the
 * frame cuts: -1 and nothing written when the header is not in the frame
 * or breaks room <= 8 / nHop <= room (the caller should have parsed it). */
/* The probe reflector (build.h hpccd__reflect_probe through
 * hpccd_wire_reflect_probe): a valid PROBE with its tag slot becomes a
 * valid PROBE_RESP of the same length, 5-tuple reversed, COLLECT cleared,
 * hops, nHop, pathID, flow, probe number and ts kept, a tag that verifies,
 * and checksums that were right stay right; anything else is refused and
 * left alone. */
static void check_reflect(const uint8_t *f, size_t n, const struct ref *r,
			  const struct hpccd_wire_info *in)
{
	uint8_t *buf = malloc(n + 2), *g;
	struct hpccd_wire_info out;
	size_t seg;
	int rc, csum_ok, ip_ok;

	FUZZ_CHECK(buf != NULL);
	g = buf + 2;
	memcpy(g, f, n);
	seg = r->proto == 17 ? be16(f + r->l4 + 4) : be16(f + r->ip + 2) - (r->l4 - r->ip);
	csum_ok = r->l4 + seg <= n && r->l4 + seg == r->end && l4_sum(f, r, seg) == 0xffff;
	ip_ok = fold(sum16(f + r->ip, (size_t)(f[r->ip] & 0xf) * 4, 0)) == 0xffff;
	rc = hpccd_wire_reflect_probe(KEY, g, n, PORT, DSCP);
	if (in->hdr_type != HPCCD_T_PROBE || !in->has_tag) {
		FUZZ_CHECK(rc == -ENODATA && memcmp(f, g, n) == 0);
		free(buf);
		return;
	}
	FUZZ_CHECK(rc == 0);
	FUZZ_CHECK(hpccd_wire_parse_frame(g, n, PORT, DSCP, &out) == HPCCD_E_OK);
	FUZZ_CHECK(out.hdr_type == HPCCD_T_PROBE_RESP && out.has_tag && out.hdr_len == in->hdr_len);
	FUZZ_CHECK(out.saddr == in->daddr && out.daddr == in->saddr && out.sport == in->dport &&
		   out.dport == in->sport && out.l4 == in->l4 && out.dscp == in->dscp);
	FUZZ_CHECK(out.ecn == (in->ecn == 3 ? 2 : in->ecn));
	FUZZ_CHECK(out.int_flags == (in->int_flags & ~HPCCD_INT_F_COLLECT));
	FUZZ_CHECK(out.int_nhop == in->int_nhop && out.int_room == in->int_room &&
		   out.int_path_id == in->int_path_id);
	FUZZ_CHECK(memcmp(g + r->start + 4, f + r->start + 4, 8 * (size_t)in->int_room) == 0);
	FUZZ_CHECK(out.flow_id == in->flow_id && out.seq == in->seq && out.ack == in->ack &&
		   out.ts == in->ts && out.aux == in->aux && out.hdr_flags == in->hdr_flags);
	FUZZ_CHECK(g[r->ip + 8] == HPCCD_REFLECT_TTL);
	FUZZ_CHECK(hpccd_wire_tag_verify(KEY, g, n, PORT, DSCP) == 1);
	if (ip_ok)
		FUZZ_CHECK(fold(sum16(g + r->ip, (size_t)(g[r->ip] & 0xf) * 4, 0)) == 0xffff);
	if (csum_ok && !(r->proto == 17 && be16(f + r->l4 + 6) == 0))
		FUZZ_CHECK(l4_sum(g, r, seg) == 0xffff);
	if (r->proto == 17 && be16(f + r->l4 + 6) == 0)
		FUZZ_CHECK(be16(g + r->l4 + 6) == 0);
	free(buf);
}

static void check_stamp_refused(uint8_t *f, size_t n, const struct ref *r)
{
	uint8_t *before = malloc(n + 1);
	unsigned room, nhop;
	__be16 ck = htons(0x1234);
	int st;

	FUZZ_CHECK(before != NULL);
	memcpy(before, f, n);
	st = hpccd__stamp_hop((struct hpccd_int_hdr *)(f + r->start), f + n, 0x5a5,
			      htonl(1), htonl(2), &ck, HPCCD_CSUM_UDP);
	if (r->start + 4 > n) {
		FUZZ_CHECK(st == -1);
	} else {
		nhop = f[r->start + 1] >> 4;
		room = f[r->start + 1] & 0xf;
		if (room > HPCCD_INT_MAX_HOPS || nhop > room)
			FUZZ_CHECK(st == -1);
		else
			FUZZ_CHECK(st == -1 || st == HPCCD_STAMP_WRITTEN ||
				   st == HPCCD_STAMP_OVERFLOW || st == HPCCD_STAMP_SKIP);
	}
	if (st == -1)
		FUZZ_CHECK(memcmp(before, f, n) == 0 && ck == htons(0x1234));
	/* HPCCD_CSUM_NONE writes no checksum */
	hpccd__csum_apply(&ck, 0x1234, HPCCD_CSUM_NONE);
	hpccd__csum_put(&ck, 0x1234, HPCCD_CSUM_NONE);
	FUZZ_CHECK(st != -1 || ck == htons(0x1234));
	free(before);
}

/* ---- entry ------------------------------------------------------------------ */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hpccd_wire_info in_place, copied;
	struct ref r;
	uint8_t *buf = malloc(size + 2);
	uint8_t *f;
	int rc, rc2;

	FUZZ_CHECK(buf != NULL);
	/* 2 bytes past malloc's (16-byte) alignment: the placement the
	 * parser is used in place with; the buffer ends where the frame
	 * does. */
	f = buf + 2;
	memcpy(f, data, size);
	ref_classify(f, size, &r);

	rc = hpccd_wire_parse_frame(f, size, PORT, DSCP, &in_place);
	FUZZ_CHECK(rc == HPCCD_WIRE_NOT_HPCCD || (rc >= 0 && rc < HPCCD_E_MAX));
	check_info(f, size, rc, &r, &in_place);

	/* libFuzzer's own buffer is 8-byte aligned: wire.c copies it. */
	rc2 = hpccd_wire_parse_frame(data, size, PORT, DSCP, &copied);
	FUZZ_CHECK(rc2 == rc);
	if (rc >= 0)
		FUZZ_CHECK(memcmp(&in_place, &copied, sizeof(copied)) == 0);

	check_tag(f, size, rc, &in_place);
	if (rc == HPCCD_E_OK) {
		check_tag_input(f, &r, &in_place);
		check_reflect(f, size, &r, &in_place);
		check_stamp(f, size, &r);
	} else if (rc > 0 && rc < HPCCD_E_HOPS_TRUNC) {
		check_stamp_refused(f, size, &r);
	}
	free(buf);
	return 0;
}
