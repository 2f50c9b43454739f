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

/* The simulated kernel's TX of n submitted descriptors: each packet onto
 * the link (a multi-buffer packet's frames as one), its frames completed. */
static void tx_out(struct hpccd_tp *t, const struct txd *q, uint32_t n)
{
	static uint8_t pkt[MB_BYTES];    /* a multi-buffer packet, put together */
	uint32_t i, len = 0;

	for (i = 0; i < n; i++) {
		const uint8_t *f = xsk_umem__get_data(t->area, q[i].addr);

		if (len || (q[i].options & XDP_PKT_CONTD)) {
			memcpy(pkt + len, f, q[i].len);   /* the engine keeps < MB_BYTES */
			len += q[i].len;
			if (!(q[i].options & XDP_PKT_CONTD)) {
				fake_link_put(t, pkt, len);
				len = 0;
			}
		} else {
			fake_link_put(t, f, q[i].len);
		}
		t->tx_free[t->n_tx_free++] = q[i].addr - TX_HEADROOM;
	}
}

/* Deferred TX (the harness's scale scenario times the engine apart from
 * the simulated kernel): what each engine submitted, until
 * fake_tx_complete(). */
int fake_tx_deferred;
#define PEND_MAX 8192
static struct {
	struct hpccd_tp *t;
	uint32_t n;
	struct txd q[PEND_MAX];
} pend[2];

static int pend_of(struct hpccd_tp *t)
{
	int k = pend[0].t == t || !pend[0].t ? 0 : 1;

	pend[k].t = t;
	return k;
}

void fake_tx_complete(struct hpccd_tp *t)
{
	int k = pend_of(t);

	tx_out(t, pend[k].q, pend[k].n);
	pend[k].n = 0;
}

int tx_submit(struct hpccd_tp *t)
{
	uint32_t i, n = t->n_txq;

	for (i = 0; i < n; i++) {
		t->st.tx_frames++;
		t->st.tx_bytes += t->txq[i].len;
	}
	if (fake_tx_deferred) {
		int k = pend_of(t);

		if (pend[k].n + n > PEND_MAX)
			fake_tx_complete(t);
		memcpy(pend[k].q + pend[k].n, t->txq, n * sizeof(*t->txq));
		pend[k].n += n;
	} else {
		tx_out(t, t->txq, n);
	}
	t->n_txq = 0;
	return n != 0;
}

void tx_flush(struct hpccd_tp *t)
{
	tx_submit(t);
}
