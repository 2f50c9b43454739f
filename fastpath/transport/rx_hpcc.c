// SPDX-License-Identifier: BSD-2-Clause
/*
 * Rx-HPCC at the receiver ([HPCC++2020] section 6.2, [HPCC++2022] section
 * 6.3.2): for the flows whose DATA ask for it (HPCCD_DATA_O_RXWIN), the
 * receiver runs NewINT on the INT of every data packet, and "feeds back the
 * calculated window in the ACK packet once every RTT": the ACK that carries
 * W leaves when NewINT commits (once per T, line 31), and no other ACK is
 * sent in between but those reliability needs (a gap, a duplicate, the last
 * byte, the delayed ACK at most T after the last one).  N, which adapts
 * W_AI when the last hop is the bottleneck, is the number of unfinished
 * Rx-HPCC flows whose DATA arrive from the same neighbour (the last hop).
 * Flows of other algorithms get no window and are not counted.
 */
#include "tp.h"

/* The slot of r's last hop: its neighbour's MAC (r->mac_peer). */
static struct tp_rxw_hop *rxw_hop_of(struct hpccd_tp *t, const struct tp_rx *r)
{
	uint32_t i;

	for (i = 0; i < RXW_HOPS; i++) {
		struct tp_rxw_hop *h = &t->rxw_hops[i];

		if (h->used && !memcmp(h->mac, r->mac_peer, 6))
			return h;
		if (!h->used) {
			memcpy(h->mac, r->mac_peer, 6);
			h->used = 1;
			return h;
		}
	}
	return &t->rxw_hops[RXW_HOPS - 1];   /* more neighbours: shared */
}

/* r's DATA asked for Rx-HPCC: it gets windows and counts in its hop's N. */
void rxw_join(struct hpccd_tp *t, struct tp_rx *r)
{
	struct tp_rxw_hop *h = rxw_hop_of(t, r);

	r->rxwin = 1;
	r->rxw_hop = (uint8_t)(h - t->rxw_hops + 1);
	h->live++;
}

/* r is done or forgotten: it no longer counts in N. */
void rxw_leave(struct hpccd_tp *t, struct tp_rx *r)
{
	if (r->rxw_hop) {
		struct tp_rxw_hop *h = &t->rxw_hops[r->rxw_hop - 1];

		if (h->live)
			h->live--;
		r->rxw_hop = 0;
	}
}

/* N of r's last hop (at least 1: r itself). */
static uint32_t rxw_n(const struct hpccd_tp *t, const struct tp_rx *r)
{
	uint32_t n = r->rxw_hop ? t->rxw_hops[r->rxw_hop - 1].live : 0;

	return n ? n : 1;
}

/* NewINT ([HPCC++2020] section 6.2, lines 28-34) on a data packet's INT (ih:
 * its INT header), with W_AI from N.  Returns 1 when the window should be
 * sent now: NewINT committed (T passed since its last update, line 31) and
 * no ACK left in the last T/2 (the delayed ACK may have just carried W). */
int rxw_on_int(struct hpccd_tp *t, struct tp_rx *r, const struct hpccd_wire_info *wi,
	       const uint8_t *ih, uint64_t now)
{
	hpccd_hpcc_set_active_flows(&r->rxh, rxw_n(t, r));
	if (hpccd_hpcc_new_int_wire(&r->rxh, now, wi->int_path_id,
				    (const void *)(ih + HPCCD_INT_HDR_BYTES), wi->int_nhop) != 1)
		return 0;
	return now - r->rxw_ack_ns >= (uint64_t)(r->rxh.T / 2);
}

/* When r's delayed ACK is due: T after the last ACK, not before now. */
uint64_t rxw_ack_due(const struct tp_rx *r, uint64_t now)
{
	uint64_t due = r->rxw_ack_ns + (uint64_t)r->rxh.T;

	return due > now ? due : now;
}

/* The window block (docs/wire-format.md, struct hpccd_rxwin) at b. */
void rxw_put(const struct hpccd_tp *t, const struct tp_rx *r, uint8_t *b)
{
	const struct hpccd_hpcc *h = &r->rxh;
	double u = h->U * 65536.0;
	uint32_t n = rxw_n(t, r);

	hpccd__put_rxwin((struct hpccd_rxwin *)b, h->W > 4e9 ? 0xffffffffu : (uint32_t)h->W,
			 u > 4294967295.0 ? 0xffffffffu : (uint32_t)u,
			 n > 0xffff ? 0xffff : (uint16_t)n, (uint32_t)h->T);
}
