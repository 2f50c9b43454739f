// SPDX-License-Identifier: BSD-2-Clause
/*
 * Frame writers and checksums of the transport engine: Ethernet + IPv4 + UDP,
 * the INT header with empty records, the hpccd header, IPv4 and UDP sums.
 */
#include "tp.h"

#include <stddef.h>

static inline uint64_t add_carry(uint64_t s, uint64_t v)
{
	s += v;
	return s + (s < v);
}

/* Ones' complement sum of p[0..len) as native 16-bit words, unfolded:
 * the sum of its native 32-bit words (2^16 = 1 modulo 2^16 - 1, so any
 * grouping of the words folds to the same sum; RFC 1071 section 2),
 * without a carry per word, which the compiler vectorises (AVX2 where the
 * CPU has it, chosen at load time).  20 GB/s against 5.4-9.8 for a
 * 64-bit sum with end-around carry per word, which took 13 % of a 61 KB-MTU
 * transfer's CPU (docs/transport.md "Where a packet's time goes").  The
 * 64-bit accumulator holds 2^32 words: len below 16 GB. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
__attribute__((optimize("tree-vectorize"), target_clones("avx2", "default")))
#endif
uint64_t csum_partial(const uint8_t *p, size_t len, uint64_t sum)
{
	uint64_t acc = 0, v;
	size_t n = len / 4, i;

	for (i = 0; i < n; i++) {
		uint32_t w;

		memcpy(&w, p + 4 * i, 4);
		acc += w;
	}
	p += 4 * n;
	len -= 4 * n;
	if (len) {
		v = 0;
		memcpy(&v, p, len);     /* zero padding at the end, in memory order */
		acc += v;
	}
	return add_carry(sum, acc);
}

uint16_t csum_fold(uint64_t s)
{
	s = (s & 0xffffffffu) + (s >> 32);
	s = (s & 0xffffffffu) + (s >> 32);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (uint16_t)s;
}

/* UDP checksum of the frame's UDP datagram (IPv4 header at l3), with the
 * pseudo-header; `udp_len` host order. */
static uint64_t udp_sum(const uint8_t *l3, uint32_t udp_len)
{
	uint8_t ph[12];

	memcpy(ph, l3 + 12, 8);          /* saddr, daddr as on the wire */
	ph[8] = 0;
	ph[9] = IPPROTO_UDP;
	put16(ph + 10, (uint16_t)udp_len);
	return csum_partial(l3 + IP_HLEN, udp_len, csum_partial(ph, sizeof(ph), 0));
}

void fill_l3_csums(uint8_t *frame, uint32_t frame_len)
{
	uint8_t *ip = frame + ETH_HLEN_;
	uint32_t udp_len = frame_len - ETH_HLEN_ - IP_HLEN;
	uint16_t c;

	memset(ip + 10, 0, 2);
	c = (uint16_t)~csum_fold(csum_partial(ip, IP_HLEN, 0));
	memcpy(ip + 10, &c, 2);
	memset(ip + IP_HLEN + 6, 0, 2);
	c = (uint16_t)~csum_fold(udp_sum(ip, udp_len));
	if (c == 0)
		c = 0xffff;              /* RFC 768: a computed 0 is sent as all ones */
	memcpy(ip + IP_HLEN + 6, &c, 2);
}

/* Ethernet + IPv4 + UDP; lengths, id and checksums filled later. */
void put_l2l4(uint8_t *f, const uint8_t *dmac, const uint8_t *smac, uint32_t saddr,
		     uint32_t daddr, uint16_t sport, uint16_t dport, uint8_t tos)
{
	memcpy(f, dmac, 6);
	memcpy(f + 6, smac, 6);
	f[12] = 0x08;
	f[13] = 0x00;
	f[14] = 0x45;
	f[15] = tos;
	put16(f + 18, 0);
	put16(f + 20, 0x4000);           /* DF: senders never fragment (wire-format.md) */
	f[22] = 64;
	f[23] = IPPROTO_UDP;
	put32(f + 26, saddr);
	put32(f + 30, daddr);
	put16(f + 34, sport);
	put16(f + 36, dport);
}

void finish_frame(struct hpccd_tp *t, uint8_t *f, uint32_t len)
{
	put16(f + 16, (uint16_t)(len - ETH_HLEN_));
	put16(f + 18, t->ip_id++);
	put16(f + 38, (uint16_t)(len - ETH_HLEN_ - IP_HLEN));
	fill_l3_csums(f, len);
}

/* finish_frame for a packet of `len` bytes in pieces (multi-buffer): f
 * holds its first `len0` bytes, rest[i] the next rest_len[i].  Every piece
 * but the last has an even length, so that the UDP checksum sums them one
 * after the other (the UDP header starts at an even offset). */
void finish_frame_pieces(struct hpccd_tp *t, uint8_t *f, uint32_t len0, uint8_t *const *rest,
			 const uint32_t *rest_len, uint32_t n_rest, uint32_t len)
{
	uint8_t *ip = f + ETH_HLEN_, ph[12];
	uint32_t udp_len = len - ETH_HLEN_ - IP_HLEN, i;
	uint64_t sum;
	uint16_t c;

	put16(f + 16, (uint16_t)(len - ETH_HLEN_));
	put16(f + 18, t->ip_id++);
	put16(f + 38, (uint16_t)udp_len);
	memset(ip + 10, 0, 2);
	c = (uint16_t)~csum_fold(csum_partial(ip, IP_HLEN, 0));
	memcpy(ip + 10, &c, 2);
	memset(ip + IP_HLEN + 6, 0, 2);
	memcpy(ph, ip + 12, 8);
	ph[8] = 0;
	ph[9] = IPPROTO_UDP;
	put16(ph + 10, (uint16_t)udp_len);
	sum = csum_partial(ip + IP_HLEN, len0 - ETH_HLEN_ - IP_HLEN, csum_partial(ph, 12, 0));
	for (i = 0; i < n_rest; i++)
		sum = csum_partial(rest[i], rest_len[i], sum);
	c = (uint16_t)~csum_fold(sum);
	if (c == 0)
		c = 0xffff;
	memcpy(ip + IP_HLEN + 6, &c, 2);
}

/* INT header: nHop 0, `room` records reserved (zeroed), COLLECT iff room. */
uint32_t put_int(uint8_t *p, uint32_t room)
{
	p[0] = (uint8_t)(HPCCD_INT_MAGIC << 4 | HPCCD_WIRE_VERSION);
	p[1] = (uint8_t)room;
	put16(p + 2, room ? (uint16_t)(HPCCD_INT_F_COLLECT << 12) : 0);
	memset(p + HPCCD_INT_HDR_BYTES, 0, room * HPCCD_INT_HOP_BYTES);
	return HPCCD_INT_HDR_BYTES + room * HPCCD_INT_HOP_BYTES;
}

void put_hdr(uint8_t *p, uint32_t type, uint32_t flags, uint32_t len, uint32_t flow_id,
		    uint64_t seq, uint64_t ack, uint32_t ts, uint32_t aux)
{
	p[0] = (uint8_t)(HPCCD_WIRE_VERSION << 4 | type);
	p[1] = (uint8_t)flags;
	put16(p + 2, (uint16_t)len);
	put32(p + 4, flow_id);
	put32(p + 8, (uint32_t)(seq >> 32));
	put32(p + 12, (uint32_t)seq);
	put32(p + 16, (uint32_t)(ack >> 32));
	put32(p + 20, (uint32_t)ack);
	put32(p + 24, ts);
	put32(p + 28, aux);
}
