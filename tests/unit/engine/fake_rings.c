// SPDX-License-Identifier: BSD-2-Clause
/*
 * The engine's ring layer (fastpath/transport/rings.c) without a socket, for
 * the protocol tests of tests/unit/test_engine_protocol.py: the same
 * functions over the same free stacks, but what the engine submits for
 * transmission goes to fake_link_put() (harness.c), and completions are
 * immediate; a multi-buffer packet's frames go onto the link as one.  No
 * root, no kernel.
 */
#include "tp.h"

void fake_link_put(struct hpccd_tp *t, const uint8_t *frame, uint32_t len);

void rx_refill(struct hpccd_tp *t)
{
	(void)t;                 /* the harness takes RX frames from rx_free */
}

void reap_completions(struct hpccd_tp *t)
{
	(void)t;                 /* tx_submit gives frames back at once */
}

void tx_kick(struct hpccd_tp *t, int locked)
{
	(void)t;
	(void)locked;
}

int tx_submit(struct hpccd_tp *t)
{
	static uint8_t pkt[MB_BYTES];    /* a multi-buffer packet, put together */
	uint32_t i, len = 0;

	for (i = 0; i < t->n_txq; i++) {
		const uint8_t *f = xsk_umem__get_data(t->area, t->txq[i].addr);

		if (len || (t->txq[i].options & XDP_PKT_CONTD)) {
			memcpy(pkt + len, f, t->txq[i].len);   /* the engine keeps < MB_BYTES */
			len += t->txq[i].len;
			if (!(t->txq[i].options & XDP_PKT_CONTD)) {
				fake_link_put(t, pkt, len);
				len = 0;
			}
		} else {
			fake_link_put(t, f, t->txq[i].len);
		}
		t->st.tx_frames++;
		t->st.tx_bytes += t->txq[i].len;
		t->tx_free[t->n_tx_free++] = t->txq[i].addr - TX_HEADROOM;
	}
	i = t->n_txq;
	t->n_txq = 0;
	return i != 0;
}

void tx_flush(struct hpccd_tp *t)
{
	tx_submit(t);
}
