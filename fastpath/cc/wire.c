// SPDX-License-Identifier: BSD-2-Clause
/*
 * Userspace wire API (include/hpccd/wire_api.h): the shared parser of
 * include/hpccd/parse.h run over a whole frame, its result copied into a
 * plain struct, the integrity tag, and the shared writers of
 * include/hpccd/build.h that rewrite a parsed frame in place (the switch's
 * departure stamp, the probe reflector).  The hpccd classification itself
 * is hpccd__parse(), the same inline code the BPF programs run.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ACK and NACK tags run longer than the BPF programs' (parse.h) */
#define HPCCD_TAG_MAX_WORDS 24
#include "hpccd/build.h"
#include "hpccd/csum.h"
#include "hpccd/wire_api.h"

/* One frame, parsed as far as the shared parser goes. */
struct wire_parsed {
	struct hpccd_cursor c;
	struct ethhdr *eth;
	struct iphdr *iph;
	__be16 sport, dport;   /* network order, as in the packet */
	void *l4_end;
	struct hpccd_view v;
	int l4;
	int vlan;
	int rc;                /* class, or HPCCD_WIRE_NOT_HPCCD */
};

/* Classification of the outer headers (wire_api.h "Return convention"),
 * then hpccd__parse().  The parser never writes: casting away const is
 * safe here (BPF callers hand it writable packet memory). */
static int wire__parse(const void *frame, size_t len, uint16_t udp_port, uint8_t probe_dscp,
		       struct wire_parsed *p)
{
	struct udphdr *uh;
	struct tcphdr *th;
	int proto, port;

	memset(p, 0, sizeof(*p));
	p->c.pos = (void *)frame;
	p->c.end = (char *)frame + len;

	proto = hpccd__parse_eth(&p->c, &p->eth);
	if (proto != HPCCD_ETH_P_IP)
		goto not_hpccd;
	p->vlan = (char *)p->c.pos - (char *)p->eth > (long)sizeof(struct ethhdr);
	p->l4 = hpccd__parse_ip4(&p->c, &p->iph, &p->l4_end);
	switch (p->l4) {
	case HPCCD_IPPROTO_UDP:
		/* Either port: data and probes go to the hpccd port, ACKs,
		 * NOTIFYs and responses come back from it. */
		port = hpccd__parse_udp(&p->c, &p->l4_end, &uh);
		if (port < 0 || (port != udp_port && ntohs(uh->source) != udp_port))
			goto not_hpccd;
		p->sport = uh->source;
		p->dport = uh->dest;
		break;
	case HPCCD_IPPROTO_TCP:
		/* TCP-side probe: DSCP, no TCP flag, then the INT magic
		 * (docs/wire-format.md "TCP-side probe").  Without one byte
		 * after the TCP header there is no magic to see: not a probe. */
		if (hpccd__ip4_dscp(p->iph) != probe_dscp)
			goto not_hpccd;
		if (hpccd__parse_tcp(&p->c, p->l4_end, &th) < 0)
			goto not_hpccd;
		if (hpccd__tcp_flags(th) != 0)
			goto not_hpccd;
		if ((char *)p->c.pos + 1 > (char *)p->l4_end ||
		    (*(__u8 *)p->c.pos >> 4) != HPCCD_INT_MAGIC)
			goto not_hpccd;
		p->sport = th->source;
		p->dport = th->dest;
		break;
	default:
		goto not_hpccd;
	}
	p->rc = hpccd__parse(&p->c, p->l4_end, &p->v);
	return p->rc;

not_hpccd:
	p->rc = HPCCD_WIRE_NOT_HPCCD;
	return p->rc;
}

/* The frame at an address 2 bytes past a multiple of 4 (NET_IP_ALIGN),
 * so that the IPv4 header and everything after it (IPv4, UDP, TCP and
 * the hpccd structures are multiples of 4 bytes long) is 4-byte aligned
 * and the parser's struct accesses are aligned C.  A frame that is not
 * placed so is copied into an exact-size buffer (*copy, to free): buffers
 * from Python are 8- or 16-byte aligned.  NULL when out of memory. */
static const void *wire__align(const void *frame, size_t len, void **copy)
{
	char *b;

	*copy = NULL;
	if (((uintptr_t)frame & 3) == 2)
		return frame;
	b = malloc(len + 2);
	if (!b)
		return NULL;
	memcpy(b + 2, frame, len);
	*copy = b;
	return b + 2;
}

static uint32_t wire__off(const void *frame, const void *ptr)
{
	return ptr ? (uint32_t)((const char *)ptr - (const char *)frame) : 0;
}

/* Copies what the parser reached into *out (wire_api.h says which parts
 * are valid for which class). */
static void wire__fill(const void *frame, const struct wire_parsed *p, int rc,
		       struct hpccd_wire_info *out)
{
	const struct hpccd_view *v = &p->v;
	uint32_t i;

	out->saddr = ntohl(p->iph->saddr);
	out->daddr = ntohl(p->iph->daddr);
	out->sport = ntohs(p->sport);
	out->dport = ntohs(p->dport);
	out->l4 = (uint8_t)p->l4;
	out->dscp = hpccd__ip4_dscp(p->iph);
	out->ecn = p->iph->tos & 0x3;
	out->vlan = (uint8_t)p->vlan;
	out->l4_end_off = wire__off(frame, p->l4_end);

	if (!v->int_hdr)
		return;
	out->int_off = wire__off(frame, v->int_hdr);
	out->int_magic = v->int_hdr->magic_ver >> 4;
	out->int_ver = v->int_hdr->magic_ver & 0xf;
	out->int_nhop = v->nhop;
	out->int_room = v->room;
	out->int_flags = v->int_flags;
	out->int_path_id = v->path_id;

	/* Hop records: whole region in the L4 payload from class 7 on. */
	if (rc != HPCCD_E_OK && rc < HPCCD_E_HDR_TRUNC)
		return;
	for (i = 0; i < v->room && i < HPCCD_INT_MAX_HOPS; i++)
		hpccd_int_hop_unpack(&v->hop[i], &out->hops[i]);

	if (!v->hdr)
		return;
	out->hdr_off = wire__off(frame, v->hdr);
	out->hdr_ver = v->hdr->ver_type >> 4;
	out->hdr_type = v->type;
	out->hdr_flags = v->flags;
	out->hdr_len = v->len;
	out->flow_id = ntohl(v->hdr->flow_id);
	out->seq = (uint64_t)ntohl(v->hdr->seq_hi) << 32 | ntohl(v->hdr->seq_lo);
	out->ack = (uint64_t)ntohl(v->hdr->ack_hi) << 32 | ntohl(v->hdr->ack_lo);
	out->ts = ntohl(v->hdr->ts);
	out->aux = ntohl(v->hdr->aux);

	if (rc != HPCCD_E_OK && rc != HPCCD_E_LEN)
		return;
	out->body_off = wire__off(frame, v->body);
	out->payload_len = v->body_len;
	if (rc != HPCCD_E_OK)
		return;
	if (v->notify)
		out->payload_len -= HPCCD_NOTIFY_BYTES;
	if (v->trailer)
		out->payload_len -= HPCCD_FB_TRAILER_BYTES;
	else if (v->tag)
		out->payload_len -= HPCCD_TAG_BYTES;
	if (v->rxwin)
		out->payload_len -= HPCCD_RXWIN_BYTES;

	if (v->notify) {
		out->has_notify = 1;
		out->w_bytes = ntohl(v->notify->w_bytes);
		out->rate_kbps = ntohl(v->notify->rate_kbps);
		out->u_q16 = ntohl(v->notify->u_q16);
		out->n_flows = ntohs(v->notify->n_flows);
		out->reserved = ntohs(v->notify->reserved);
		out->notify_seq = ntohl(v->notify->notify_seq);
		out->t_ns = ntohl(v->notify->t_ns);
	}
	if (v->tag) {
		out->has_tag = 1;
		out->tag_off = wire__off(frame, v->tag);
		out->tag = hpccd__tag_get(v);
	}
	if (v->trailer) {
		out->has_trailer = 1;
		out->fb_seq = ntohl(v->trailer->fb_seq);
		out->fb_flags = ntohl(v->trailer->fb_flags);
	}
	if (v->rxwin) {
		out->has_rxwin = 1;
		out->w_bytes = ntohl(v->rxwin->w_bytes);
		out->u_q16 = ntohl(v->rxwin->u_q16);
		out->n_flows = ntohs(v->rxwin->n_flows);
		out->reserved = ntohs(v->rxwin->reserved);
		out->t_ns = ntohl(v->rxwin->t_ns);
	}
	return;
}

int hpccd_wire_parse_frame(const void *frame, size_t len, uint16_t udp_port,
			   uint8_t probe_dscp, struct hpccd_wire_info *out)
{
	struct wire_parsed p;
	const void *base;
	void *copy;
	int rc;

	if (!frame || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	base = wire__align(frame, len, &copy);
	if (!base)
		return -ENOMEM;
	rc = wire__parse(base, len, udp_port, probe_dscp, &p);
	if (rc >= 0)
		wire__fill(base, &p, rc, out);
	free(copy);
	return rc;
}

/* A frame to rewrite in place, parsed where it can be written: at its own
 * address when it is placed as the parser wants it, else in a copy (*copy,
 * which wire__rewritten() copies back and frees).  Returns the class, or
 * -EINVAL / -ENOMEM. */
static int wire__parse_rw(void *frame, size_t len, uint16_t udp_port, uint8_t probe_dscp,
			  struct wire_parsed *p, void **copy)
{
	const void *base;

	*copy = NULL;
	if (!frame)
		return -EINVAL;
	base = wire__align(frame, len, copy);
	if (!base)
		return -ENOMEM;
	return wire__parse(base, len, udp_port, probe_dscp, p);
}

/* The end of a rewrite: the copy (if any) back into the frame when it was
 * written, then freed. */
static void wire__rewritten(void *frame, size_t len, void *copy, int written)
{
	if (written && copy)
		memcpy(frame, (char *)copy + 2, len);     /* wire__align's placement */
	free(copy);
}

/* The L4 header of a parsed frame. */
static void *wire__l4(const struct wire_parsed *p)
{
	return (char *)p->iph + (p->iph->ihl & 0xf) * 4;
}

int hpccd_wire_restamp(void *frame, size_t len, uint16_t udp_port, uint8_t probe_dscp,
		       unsigned int idx, uint64_t old_word, uint64_t new_word)
{
	struct wire_parsed p;
	__be16 *csum;
	void *copy;
	int rc, kind;

	rc = wire__parse_rw(frame, len, udp_port, probe_dscp, &p, &copy);
	if (rc != 0)
		goto out;
	if (p.l4 == HPCCD_IPPROTO_UDP) {
		csum = &((struct udphdr *)wire__l4(&p))->check;
		kind = HPCCD_CSUM_UDP;
	} else {
		csum = &((struct tcphdr *)wire__l4(&p))->check;
		kind = HPCCD_CSUM_TCP;
	}
	rc = hpccd__restamp_hop(p.v.int_hdr, p.c.end, idx,
				htonl((uint32_t)(old_word >> 32)), htonl((uint32_t)old_word),
				htonl((uint32_t)(new_word >> 32)), htonl((uint32_t)new_word),
				csum, kind);
	if (rc < 0)
		rc = 2;
out:
	wire__rewritten(frame, len, copy, rc == 0);
	return rc;
}

int hpccd_wire_reflect_probe(const uint8_t *key, void *frame, size_t len, uint16_t udp_port,
			     uint8_t probe_dscp)
{
	struct hpccd_reflect_csum rc_csum;
	struct wire_parsed p;
	void *copy = NULL, *l4;
	int rc = -EINVAL;

	if (!key)
		goto out;
	rc = wire__parse_rw(frame, len, udp_port, probe_dscp, &p, &copy);
	if (rc != 0)
		goto out;
	rc = -ENODATA;
	if (p.v.type != HPCCD_T_PROBE || !p.v.tag)
		goto out;
	l4 = wire__l4(&p);
	switch (hpccd__reflect_probe(p.eth, p.iph, l4, p.l4 == HPCCD_IPPROTO_TCP, &p.v, p.c.end,
				     hpccd_siphash__le64(key), hpccd_siphash__le64(key + 8),
				     &rc_csum)) {
	case HPCCD_REFLECT_RESUM:
		/* CHECKSUM_PARTIAL: the segment's sum, field at 0 (build.h) */
		hpccd_csum_store(rc_csum.csum,
				 hpccd_csum_partial(l4, rc_csum.l4_len,
						    hpccd_csum_pseudo4(p.iph->saddr, p.iph->daddr,
								       p.iph->protocol,
								       (uint16_t)rc_csum.l4_len)),
				 rc_csum.kind == HPCCD_CSUM_UDP);
		rc = 0;
		break;
	case HPCCD_REFLECT_DONE:
		rc = 0;
		break;
	default:
		rc = -EBADMSG;           /* cannot happen: parsed above */
		break;
	}
out:
	wire__rewritten(frame, len, copy, rc == 0);
	return rc;
}

/* Parses the frame and computes the tag it should carry; *carried gets
 * the tag it does carry. */
static int wire__tag(const uint8_t *key, const void *frame, size_t len, uint16_t udp_port,
		     uint8_t probe_dscp, uint64_t *tag, uint64_t *carried)
{
	struct hpccd_tag_input ti;
	struct wire_parsed p;
	const void *base;
	void *copy;
	__u64 t;
	int rc;

	if (!key || !frame || !tag)
		return -EINVAL;
	base = wire__align(frame, len, &copy);
	if (!base)
		return -ENOMEM;
	rc = wire__parse(base, len, udp_port, probe_dscp, &p);
	if (rc < 0)
		goto out;
	rc = -EBADMSG;
	if (p.rc != HPCCD_E_OK)
		goto out;
	/* A PROBE carries a zeroed slot, not a tag: nothing to compute. */
	rc = -ENODATA;
	if (!p.v.tag || p.v.type == HPCCD_T_PROBE)
		goto out;
	hpccd__tag_input(&ti, p.iph, p.sport, p.dport, p.v.type);
	if (hpccd__tag(&p.v, &ti, hpccd_siphash__le64(key), hpccd_siphash__le64(key + 8),
		       p.c.end, &t) < 0)
		goto out;
	*tag = t;
	if (carried)
		*carried = hpccd__tag_get(&p.v);
	rc = 0;
out:
	free(copy);
	return rc;
}

int hpccd_wire_tag(const uint8_t *key, const void *frame, size_t len, uint16_t udp_port,
		   uint8_t probe_dscp, uint64_t *tag)
{
	return wire__tag(key, frame, len, udp_port, probe_dscp, tag, NULL);
}

int hpccd_wire_tag_span(const uint8_t *key, const struct hpccd_tag_input *ti,
			const void *int_hdr, size_t n, uint64_t *tag)
{
	struct hpccd_view v;
	__u64 t;

	if (!key || !ti || !int_hdr || !tag || n > HPCCD_TAG_MAX_WORDS * 8)
		return -EINVAL;
	/* hpccd__tag() reads the view's INT header and tag pointers only */
	memset(&v, 0, sizeof(v));
	v.int_hdr = (struct hpccd_int_hdr *)int_hdr;
	v.tag = (struct hpccd_tag *)((uint8_t *)int_hdr + n);
	if (hpccd__tag(&v, ti, hpccd_siphash__le64(key), hpccd_siphash__le64(key + 8),
		       (uint8_t *)int_hdr + n, &t) < 0)
		return -EINVAL;
	*tag = t;
	return 0;
}

int hpccd_wire_tag_verify(const uint8_t *key, const void *frame, size_t len,
			  uint16_t udp_port, uint8_t probe_dscp)
{
	uint64_t want = 0, carried = 0;
	int rc;

	rc = wire__tag(key, frame, len, udp_port, probe_dscp, &want, &carried);
	if (rc < 0)
		return rc;
	return want == carried;
}

uint64_t hpccd_wire_siphash24(const uint8_t *key, const void *msg, size_t len)
{
	return hpccd_siphash24(key, msg, len);
}
