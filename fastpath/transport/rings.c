// SPDX-License-Identifier: BSD-2-Clause
/*
 * The UMEM's rings: frames to the fill ring, completions back to the TX
 * free stack, descriptors onto the TX ring and the sendto() kick.
 */
#include "tp.h"

#include <sys/socket.h>

void rx_refill(struct hpccd_tp *t)
{
	uint32_t n, idx, i;

	if (!t->n_rx_free)
		return;
	n = xsk_prod_nb_free(&t->fq, t->n_rx_free);
	if (n > t->n_rx_free)
		n = t->n_rx_free;
	if (!n || xsk_ring_prod__reserve(&t->fq, n, &idx) != n)
		return;
	for (i = 0; i < n; i++)
		*xsk_ring_prod__fill_addr(&t->fq, idx + i) = t->rx_free[--t->n_rx_free];
	xsk_ring_prod__submit(&t->fq, n);
}

void reap_completions(struct hpccd_tp *t)
{
	const uint64_t mask = ~(uint64_t)(t->cfg.frame_size - 1);
	uint32_t idx, n, i;

	n = xsk_ring_cons__peek(&t->cq, t->ring, &idx);
	if (!n)
		return;
	for (i = 0; i < n; i++)
		t->tx_free[t->n_tx_free++] = *xsk_ring_cons__comp_addr(&t->cq, idx + i) & mask;
	xsk_ring_cons__release(&t->cq, n);
	t->st.completions += n;
}

/* Tell the kernel the TX ring has descriptors.  `locked`: the caller holds
 * t->lock; otherwise it is taken only for what it guards (the completions'
 * frames and the counters): only the thread touches the rings.  In copy
 * mode the kernel transmits -- and the lab forwards -- inside sendto(),
 * which API callers (stats, flow_open) should not wait for, so the loop
 * kicks its last batch after unlocking (tp__main). */
void tx_kick(struct hpccd_tp *t, int locked)
{
	uint64_t kicks = 0, again = 0;
	int i;

	if (t->zerocopy && !xsk_ring_prod__needs_wakeup(&t->tx))
		return;
	for (i = 0; i < KICK_MAX; i++) {
		ssize_t r = sendto(t->fd, NULL, 0, MSG_DONTWAIT, NULL, 0);

		kicks++;
		if (r >= 0)
			break;
		if (errno != EAGAIN && errno != EBUSY && errno != ENOBUFS)
			break;       /* ENETDOWN and friends: the poll backstop notices */
		again++;
		/* Copy mode sends a budget of descriptors per call and says
		 * EAGAIN while more wait; a full completion ring says so too. */
		if (!locked)
			pthread_mutex_lock(&t->lock);
		reap_completions(t);
		if (!locked)
			pthread_mutex_unlock(&t->lock);
		if (__atomic_load_n(t->tx.consumer, __ATOMIC_ACQUIRE) == t->tx.cached_prod)
			break;
	}
	if (!locked)
		pthread_mutex_lock(&t->lock);
	t->st.kicks += kicks;
	t->st.kick_again += again;
	if (!locked)
		pthread_mutex_unlock(&t->lock);
}

/* Put the queued descriptors on the TX ring (t->lock held); returns
 * whether any were put there, so that the caller kicks. */
int tx_submit(struct hpccd_tp *t)
{
	uint32_t idx = 0, i;

	if (!t->n_txq)
		return 0;
	while (xsk_ring_prod__reserve(&t->tx, t->n_txq, &idx) != t->n_txq) {
		/* the ring is full: let the kernel take some */
		tx_kick(t, 1);
		reap_completions(t);
		if (xsk_prod_nb_free(&t->tx, t->n_txq) < t->n_txq) {
			/* cannot happen with ring >= tx_frames; drop rather than spin */
			for (i = 0; i < t->n_txq; i++)
				t->tx_free[t->n_tx_free++] = t->txq[i].addr - TX_HEADROOM;
			t->st.tx_no_frame += t->n_txq;
			t->n_txq = 0;
			return 0;
		}
	}
	for (i = 0; i < t->n_txq; i++) {
		struct xdp_desc *d = xsk_ring_prod__tx_desc(&t->tx, idx + i);

		d->addr = t->txq[i].addr;
		d->len = t->txq[i].len;
		d->options = t->txq[i].options;
		t->st.tx_frames++;
		t->st.tx_bytes += t->txq[i].len;
	}
	xsk_ring_prod__submit(&t->tx, t->n_txq);
	t->n_txq = 0;
	return 1;
}

void tx_flush(struct hpccd_tp *t)
{
	if (tx_submit(t))
		tx_kick(t, 1);
}
