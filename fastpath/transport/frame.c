// SPDX-License-Identifier: BSD-2-Clause
/*
 * The engine's frames: Ethernet + IPv4 + UDP, the INT header with empty
 * records and the hpccd header, written by the shared writers of
 * include/hpccd/build.h into a UMEM frame (2 bytes past a multiple of 4:
 * HEADROOM), and their IPv4 and UDP checksums, summed by the one
 * checksum of userspace C (include/hpccd/csum.h).
 */
#include "tp.h"

static inline struct iphdr *frame_ip(uint8_t *f)
{
	return (struct iphdr *)(f + ETH_HLEN_);
}

static inline struct udphdr *frame_udp(uint8_t *f)
{
	return (struct udphdr *)(f + ETH_HLEN_ + IP_HLEN);
}

/* The IPv4 header checksum of the frame's (option-less) header. */
static void ip4_csum(struct iphdr *ip)
{
	ip->check = 0;
	hpccd_csum_store(&ip->check, hpccd_csum_partial(ip, IP_HLEN, 0), 0);
}

/* The pseudo-header sum of the frame's UDP datagram of udp_len bytes. */
static uint64_t udp_pseudo(const struct iphdr *ip, uint32_t udp_len)
{
	return hpccd_csum_pseudo4(ip->saddr, ip->daddr, IPPROTO_UDP, (uint16_t)udp_len);
}

void fill_l3_csums(uint8_t *frame, uint32_t frame_len)
{
	struct iphdr *ip = frame_ip(frame);
	struct udphdr *uh = frame_udp(frame);
	uint32_t udp_len = frame_len - ETH_HLEN_ - IP_HLEN;

	ip4_csum(ip);
	uh->check = 0;
	hpccd_csum_store(&uh->check, hpccd_csum_partial(uh, udp_len, udp_pseudo(ip, udp_len)), 1);
}

/* Ethernet + IPv4 + UDP; lengths, id and checksums filled later. */
void put_l2l4(uint8_t *f, const uint8_t *dmac, const uint8_t *smac, uint32_t saddr,
	      uint32_t daddr, uint16_t sport, uint16_t dport, uint8_t tos)
{
	hpccd__put_eth((struct ethhdr *)f, dmac, smac);
	hpccd__put_ip4(frame_ip(f), tos, IPPROTO_UDP, htonl(saddr), htonl(daddr));
	hpccd__put_udp(frame_udp(f), htons(sport), htons(dport));
}

/* The lengths of a frame of len bytes, its IPv4 id the engine's next. */
static void put_lengths(struct hpccd_tp *t, uint8_t *f, uint32_t len)
{
	hpccd__put_ip4_len(frame_ip(f), (uint16_t)(len - ETH_HLEN_), t->ip_id++);
	hpccd__put_udp_len(frame_udp(f), (uint16_t)(len - ETH_HLEN_ - IP_HLEN));
}

void finish_frame(struct hpccd_tp *t, uint8_t *f, uint32_t len)
{
	put_lengths(t, f, len);
	fill_l3_csums(f, len);
}

/* finish_frame for a packet of `len` bytes in pieces (multi-buffer): f
 * holds its first `len0` bytes, rest[i] the next rest_len[i].  Every piece
 * but the last has an even length, so that the UDP checksum sums them one
 * after the other (the UDP header starts at an even offset). */
void finish_frame_pieces(struct hpccd_tp *t, uint8_t *f, uint32_t len0, uint8_t *const *rest,
			 const uint32_t *rest_len, uint32_t n_rest, uint32_t len)
{
	struct iphdr *ip = frame_ip(f);
	struct udphdr *uh = frame_udp(f);
	uint32_t udp_len = len - ETH_HLEN_ - IP_HLEN, i;
	uint64_t sum;

	put_lengths(t, f, len);
	ip4_csum(ip);
	uh->check = 0;
	sum = hpccd_csum_partial(uh, len0 - ETH_HLEN_ - IP_HLEN, udp_pseudo(ip, udp_len));
	for (i = 0; i < n_rest; i++)
		sum = hpccd_csum_partial(rest[i], rest_len[i], sum);
	hpccd_csum_store(&uh->check, sum, 1);
}

/* finish_frame for a DATA packet of `len` bytes (in one frame or in
 * pieces) whose UDP checksum the device completes (HPCCD_TP_F_CSUM_OFFLOAD,
 * docs/transport.md "Checksum offload"): the field holds the folded
 * pseudo-header sum, as a kernel socket leaves it for checksum offload,
 * and the TX metadata in front of the frame asks the kernel to finish it
 * (its descriptor carries XDP_TX_METADATA_): the skb leaves
 * CHECKSUM_PARTIAL, csum_start at the UDP header, csum_offset at its
 * check field.  The IPv4 header's checksum is summed here (20 bytes). */
void finish_frame_offload(struct hpccd_tp *t, uint8_t *f, uint32_t len)
{
	struct iphdr *ip = frame_ip(f);
	struct udphdr *uh = frame_udp(f);
	uint32_t udp_len = len - ETH_HLEN_ - IP_HLEN;
	struct tp_tx_meta *m = (struct tp_tx_meta *)(void *)(f - TX_META_LEN);

	put_lengths(t, f, len);
	ip4_csum(ip);
	hpccd_csum_store_partial(&uh->check, udp_pseudo(ip, udp_len));
	m->flags = XDP_TXMD_FLAGS_CHECKSUM_;
	m->csum_start = ETH_HLEN_ + IP_HLEN;
	m->csum_offset = offsetof(struct udphdr, check);
	m->pad = 0;
	m->launch_time = 0;
}
