// SPDX-License-Identifier: BSD-2-Clause
/*
 * The raw ceiling of AF_XDP on an interface (docs/transport.md
 * "Benchmark"): the same UMEM, rings, frame size and thread as the
 * transport, and nothing else.  A sender engine puts one prebuilt DATA
 * frame, copied once into every TX frame, on the TX ring as fast as the
 * ring and the kernel take them (a packet larger than a frame: as many
 * frames, multi-buffer, as the transport sends it); a receiver engine (HPCCD_TP_F_RAW) counts
 * and recycles frames without parsing them.  What the transport does per
 * packet (building, checksums, the parser, delivery, ACKs, pacing) is
 * measured against this.
 */
#include "tp.h"

#include <stdio.h>

/* Up to TX_PER_LOOP of the frames still to send onto the TX queue. */
uint32_t raw_schedule(struct hpccd_tp *t)
{
	uint32_t sent = 0;

	const uint32_t cap = t->cfg.frame_size - TX_HEADROOM;
	const uint32_t pieces = (t->raw_len + cap - 1) / cap;

	while (t->raw_left && sent < TX_PER_LOOP) {
		uint32_t i, left = t->raw_len;

		if (t->n_tx_free < pieces)
			reap_completions(t);
		if (t->n_tx_free < pieces) {
			t->starved = 1;
			break;
		}
		for (i = 0; i < pieces; i++, left -= cap)
			tx_put_frag(t, t->tx_free[--t->n_tx_free] + TX_HEADROOM,
				    left < cap ? left : cap, i + 1 < pieces);
		t->raw_left--;
		sent++;
	}
	return sent;
}

int hpccd_tp__raw_send(struct hpccd_tp *t, const struct hpccd_tp_flow_cfg *c, uint64_t frames)
{
	/* the frame 2 bytes past a multiple of 4, as in the UMEM (HEADROOM):
	 * the writers store through the header structs */
	uint8_t buf[HEADROOM + HPCCD_TP_FRAME_MAX] __attribute__((aligned(4)));
	uint8_t *tmpl = buf + HEADROOM;
	const uint32_t cap = t ? t->cfg.frame_size - TX_HEADROOM : 0;
	uint32_t off = L2L4, len, plen, i;

	if (!t || !c)
		return -EINVAL;
	len = c->mtu + ETH_HLEN_;
	if (c->mtu < 128 || c->mtu > hpccd_tp__mtu_max(t))
		return -EINVAL;
	memset(tmpl, 0, HPCCD_TP_FRAME_MAX);
	put_l2l4(tmpl, c->dmac, c->smac, c->saddr, c->daddr, c->sport, c->dport, 0);
	off += put_int(tmpl + off, 0);
	plen = len - off - HPCCD_HDR_BYTES;
	put_hdr(tmpl + off, HPCCD_T_DATA, 0, plen, 0, 0, 0, 0, 0);
	finish_frame(t, tmpl, len < cap ? len : cap);
	if (len > cap) {
		/* multi-buffer: every frame holds the template's first piece,
		 * whatever its place in a packet (frames come back in any
		 * order); the lengths are the packet's, no UDP checksum */
		struct iphdr *ip = (struct iphdr *)(tmpl + ETH_HLEN_);
		struct udphdr *uh = (struct udphdr *)(tmpl + ETH_HLEN_ + IP_HLEN);

		hpccd__put_ip4_len(ip, (uint16_t)(len - ETH_HLEN_), ntohs(ip->id));
		hpccd__put_udp_len(uh, (uint16_t)(len - ETH_HLEN_ - IP_HLEN));
		fill_l3_csums(tmpl, cap);
		uh->check = 0;
		len = cap;               /* bytes of the template each frame holds */
	}
	pthread_mutex_lock(&t->lock);
	if (t->raw_left) {
		pthread_mutex_unlock(&t->lock);
		return tp__fail(t, -EBUSY, "a raw send is running");
	}
	/* every free TX frame holds the template from now on */
	for (i = 0; i < t->n_tx_free; i++)
		memcpy(xsk_umem__get_data(t->area, t->tx_free[i] + TX_HEADROOM), tmpl, len);
	t->raw_len = c->mtu + ETH_HLEN_;
	t->raw_left = frames;
	pthread_mutex_unlock(&t->lock);
	tp__wake(t);
	return 0;
}

int hpccd_tp__raw_left(struct hpccd_tp *t, uint64_t *left)
{
	if (!t || !left)
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	*left = t->raw_left;
	pthread_mutex_unlock(&t->lock);
	return 0;
}
