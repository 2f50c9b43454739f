// SPDX-License-Identifier: BSD-2-Clause
/*
 * The receiver half: the flow table and its limits, in-order delivery to
 * the sink, ACK / NACK (DCTCP.CE machine, INT echo, the Rx-HPCC window of
 * rx_hpcc.c, the feedback trailer and its tag), and PROBE answers when XDP
 * did not answer them.
 */
#include "tp.h"

#include <unistd.h>

static uint32_t rx_sack_blocks(const struct hpccd_tp *t, struct tp_rx *r,
			       struct hpccd_sack_block *body);
static int rx_deliver(struct hpccd_tp *t, struct tp_rx *r, const uint8_t *p, uint32_t n);

/* The unfinished receiver flows of each source address (rx_peer_max),
 * counted as flows start and finish, so that admission costs the same with
 * 10 flows or 10,000: linear probing from the address's keyed place
 * (tp_saddr_mix) in 2 * rx_flows entries, an entry per source with
 * unfinished flows, gone when its last one ends (backward-shift deletion,
 * peer_drop: no tombstones, so a lookup stops at the first empty entry).
 * Each unfinished flow holds a slot of t->rxt, so at most rx_flows
 * entries are used: the table is at most half full and, under a key no
 * peer knows, its runs stay short (the longest seen with the flow table
 * full of spoofed sources: docs/security.md "Limits").  An entry is put
 * at most TP_RX_PROBE_MAX - 1 places past its own or not at all: a lookup
 * reads at most that many entries (8 bytes each: 16 lines), whatever the
 * sources. */
_Static_assert(2 * HPCCD_TP_FLOWS_MIN >= TP_RX_PROBE_MAX,
	       "the smallest table of peers holds a whole probe");
static uint32_t peer_home(const struct hpccd_tp *t, uint32_t saddr)
{
	return (uint32_t)(tp_saddr_mix(t, saddr) >> 32) & t->peer_mask;
}

/* The entry of saddr, or NULL; *room: the empty entry where saddr would
 * go (the first within the bound), NULL if none. */
static struct tp_peer *peer_find(const struct hpccd_tp *t, uint32_t saddr,
				 struct tp_peer **room)
{
	uint32_t h = peer_home(t, saddr), i;

	*room = NULL;
	for (i = 0; i < TP_RX_PROBE_MAX; i++) {
		struct tp_peer *p = &t->peers[(h + i) & t->peer_mask];

		if (p->saddr == saddr)
			return p;
		if (!p->saddr) {
			*room = p;
			break;
		}
	}
	return NULL;
}

/* p's source has no unfinished flow left: empty p, and move back into
 * the hole each later entry of the run that may sit there (its place at
 * or before the hole), so that no lookup meets an empty entry before its
 * own (Knuth's Algorithm R, TAOCP vol. 3, 6.4).  An entry only ever moves
 * nearer its place: every entry stays within the bound, and no empty
 * entry becomes used (an insert that found room still finds it).  An
 * entry more than the bound past the hole cannot move into it. */
static void peer_drop(struct hpccd_tp *t, struct tp_peer *p)
{
	uint32_t hole = (uint32_t)(p - t->peers), j = hole, d;

	for (d = 1; d < TP_RX_PROBE_MAX; d++) {
		struct tp_peer *q;

		j = (j + 1) & t->peer_mask;
		q = &t->peers[j];
		if (!q->saddr)
			break;
		if (((j - peer_home(t, q->saddr)) & t->peer_mask) >= d) {
			t->peers[hole] = *q;     /* the hole is at or past its place */
			hole = j;
			d = 0;                   /* distances from the new hole */
		}
	}
	t->peers[hole].saddr = 0;
	t->peers[hole].live = 0;
}

/* A receiver flow of `saddr` starts (+1) or ends unfinished or done (-1).
 * A start takes an entry for a new source; 0: none within the bound, the
 * flow must not be admitted (rx_admit checked there was one before). */
static int rx_live_add(struct hpccd_tp *t, uint32_t saddr, int d)
{
	struct tp_peer *room, *p = peer_find(t, saddr, &room);

	if (d > 0) {
		if (!p && !room)
			return 0;
		if (!p) {
			p = room;
			p->saddr = saddr;
		}
		p->live++;
		t->rx_live++;
		return 1;
	}
	if (t->rx_live)
		t->rx_live--;
	if (p && p->live && !--p->live)
		peer_drop(t, p);
	return 1;
}

/* Receiver flow (saddr, flow_id), or NULL; create: else a new one in the
 * first free slot (tombstone or empty) of its home's run, NULL if the
 * rx_probe_max slots from its home are all used.  Every flow sits within
 * rx_probe_max slots of its home (inserts go no further: TP_RX_PROBE_MAX), so
 * the lookup stops there, at an empty slot, or at the flow; tombstones
 * (rx_unuse) keep the flows past them reachable. */
static struct tp_rx *rx_lookup(struct hpccd_tp *t, uint32_t saddr, uint32_t flow_id, int create)
{
	uint32_t h = tp_rx_home(t, saddr, flow_id), i;
	struct tp_rx *tomb = NULL;

	for (i = 0; i < t->rx_probe_max; i++) {
		struct tp_rx *r = &t->rxt[(h + i) & t->rx_mask];

		if (r->used == 1 && r->saddr == saddr && r->flow_id == flow_id)
			return r;
		if (r->used == 2 && !tomb)
			tomb = r;
		if (r->used == 0) {
			if (!tomb)
				tomb = r;
			break;
		}
	}
	if (!create || !tomb || !rx_live_add(t, saddr, 1))
		return NULL;
	{
		uint8_t listed = tomb->delack_listed;   /* its place in t->delack */

		memset(tomb, 0, sizeof(*tomb));
		tomb->delack_listed = listed;
	}
	tomb->used = 1;
	tomb->used_at = t->n_rx_used;
	t->rx_used[t->n_rx_used++] = (int32_t)(tomb - t->rxt);
	tomb->saddr = saddr;
	tomb->flow_id = flow_id;
	tomb->fin_end = UINT64_MAX;
	tomb->nack_for = UINT64_MAX;
	tomb->crc = 0;                   /* CRC-32 of nothing */
	hpccd_dctcp_rx_init(&tomb->dc, t->cfg.ack_every);
	hpccd_hpcc_init(&tomb->rxh, &t->cfg.rx_hpcc, HPCCD_ALGO_RXHPCC, NULL); /* checked at create */
	return tomb;
}

/* A used slot of the rx_probe_max from `home` to recycle for a new
 * flow: the done flow finished longest ago, else the unfinished flow
 * without DATA for rx_idle_ns longest (its sender died or gave up); NULL:
 * none.  *done: the victim is done. */
static struct tp_rx *rx_victim(struct hpccd_tp *t, uint32_t home, uint64_t now, int *done)
{
	struct tp_rx *victim = NULL;
	uint32_t i;

	*done = 0;
	for (i = 0; i < t->rx_probe_max; i++) {
		struct tp_rx *c = &t->rxt[(home + i) & t->rx_mask];

		if (c->used != 1)
			continue;
		if (c->done) {
			if (!*done || c->hs.last_ns < victim->hs.last_ns)
				victim = c;
			*done = 1;
		} else if (!*done && now - c->hs.last_ns >= t->cfg.rx_idle_ns &&
			   (!victim || c->hs.last_ns < victim->hs.last_ns)) {
			victim = c;
		}
	}
	return victim;
}

/* Limits of the receiver table (docs/security.md "Limits").  DATA of a
 * flow the table does not hold: admitted unless its source already has
 * rx_peer_max flows not done (a flood of new flows from one peer then
 * costs that peer only: counted in rx_peer_full), or is new and finds no
 * room in the peer table within its bound (rx_peer_table_full: a flow
 * whose source could not be counted is never admitted).  When the
 * rx_probe_max slots from its home are all used (a full table, or a
 * run that a peer filled with flows of ids equal modulo the table's
 * size), one of them is recycled (rx_victim: rx_recycled, rx_expired; a
 * long-running receiver that nobody reaps must keep accepting flows);
 * otherwise the flow is refused, counted in rx_table_full if the table is
 * full, else in rx_probe_full, and the flows in the table keep being
 * served.  All of it reads at most rx_probe_max slots (a flow refused
 * at a full table once scanned all rx_flows, for each of its packets). */
static struct tp_rx *rx_admit(struct hpccd_tp *t, uint32_t saddr, uint32_t flow_id,
			      uint64_t now)
{
	struct tp_rx *r, *victim;
	struct tp_peer *room, *p = peer_find(t, saddr, &room);
	int done_victim;

	if (t->cfg.rx_peer_max && p && p->live >= t->cfg.rx_peer_max) {
		t->st.rx_peer_full++;
		return NULL;
	}
	/* nothing changes the peer table before the first insert below, and
	 * a victim's peer_drop only empties entries: the room found stays */
	if (!p && !room) {
		t->st.rx_peer_table_full++;
		return NULL;
	}
	r = rx_lookup(t, saddr, flow_id, 1);
	if (r)
		return r;
	victim = rx_victim(t, tp_rx_home(t, saddr, flow_id), now, &done_victim);
	if (!victim) {
		if (t->n_rx_used == t->cfg.rx_flows)
			t->st.rx_table_full++;
		else
			t->st.rx_probe_full++;
		return NULL;
	}
	if (done_victim)
		t->st.rx_recycled++;
	else
		t->st.rx_expired++;
	rx_forget(t, victim);    /* a tombstone within the run: the insert below
				  * takes it (or a free slot before it) */
	r = rx_lookup(t, saddr, flow_id, 1);
	/* it fails only for the peer: the victim was saddr's last flow, its
	 * entry went, and the entries moved back into it left no room */
	if (!r)
		t->st.rx_peer_table_full++;
	return r;
}

/* The receive window's right edge that r advertises (seq of its ACKs and
 * NACKs): its share of the engine's rx_window frames, at least 2, in
 * payloads of its largest size.  In flight toward this engine there are
 * then at most rx_window frames of its flows, which the RX ring holds
 * even when the thread takes none for a while: a fast sender is paced by
 * what the receiver can take, not by drops.  0: none (rx_window 0). */
static uint64_t rx_window_end(const struct hpccd_tp *t, const struct tp_rx *r)
{
	uint32_t live = t->rx_live ? t->rx_live : 1, frames, one, pieces;

	if (!t->cfg.rx_window || !r->mss)
		return 0;
	frames = t->cfg.rx_window / live;
	if (frames < 2)
		frames = 2;
	/* a multi-buffer packet takes a frame (an RX descriptor) per piece:
	 * the window is in frames, so in payload per piece (256 bytes are
	 * more than any packet's headers) */
	one = t->cfg.frame_size - HEADROOM - HPCCD_TP_RX_HEADROOM;
	pieces = (r->mss + 256 + one - 1) / one;
	return r->rcv_nxt + (uint64_t)frames * r->mss / pieces;
}

/* The feedback trailer of an ACK / NACK / CNP whose body ends at `off` (its
 * 16 bytes already counted in the header's len): fb_seq, flags, and the
 * tag ([HPCC++2022] section 9.1) over everything from the INT header
 * before it, under the engine's key, with the flow as its data sender
 * sees it for prefix (the frame is ours: no need to parse it again).
 * finish_frame() then sums the frame once.  Returns the end. */
uint32_t put_fb_trailer(struct hpccd_tp *t, struct tp_rx *r, uint8_t *f, uint32_t off,
			uint32_t fb_flags)
{
	struct hpccd_tag_input ti = {
		.saddr = htonl(r->saddr), .daddr = htonl(r->daddr),
		.sport = htons(r->sport), .dport = htons(r->dport), .proto = IPPROTO_UDP,
	};
	struct hpccd_fb_trailer *tr = (struct hpccd_fb_trailer *)(f + off);
	uint64_t tag = 0;

	hpccd__put_fb_head(tr, ++r->fb_seq, fb_flags);
	if (hpccd_wire_tag_span(t->cfg.tag_key, &ti, f + L2L4,
				off + hpccd__off(struct hpccd_fb_trailer, tag_hi) - L2L4, &tag))
		t->st.bad_body++;        /* cannot happen: within the longest ACK */
	hpccd__put_tag((struct hpccd_tag *)&tr->tag_hi, tag, 0);
	return off + HPCCD_FB_TRAILER_BYTES;
}

/* Feedback frame of receiver flow r: ACK or NACK, with the INT echo when
 * asked, the SACK blocks of what it holds, the Rx-HPCC window when its
 * sender asked for one, and the trailer (docs/wire-format.md). */
static void send_feedback(struct hpccd_tp *t, struct tp_rx *r, uint32_t type, uint64_t ack,
			  int ece, uint32_t aux, int echo, uint64_t now)
{
	uint64_t addr;
	uint32_t off = L2L4, flags = ece ? HPCCD_F_ECE : 0, blen = 0, fbf = 0;
	uint8_t *f = tx_get(t, &addr);

	if (!f) {
		t->st.ack_dropped++;
		return;
	}
	put_l2l4(f, r->mac_peer, r->mac_local, r->daddr, r->saddr, r->dport, r->sport, 0);
	if (echo && r->have_echo) {
		/* Echo: nHop, pathID, OVERFLOW and the records as received,
		 * COLLECT cleared so that the return path does not stamp. */
		memcpy(f + off, r->echo, r->echo_len);
		hpccd__int_clear_collect((struct hpccd_int_hdr *)(f + off), 0);
		off += r->echo_len;
		flags |= HPCCD_F_INT_ECHO;
		r->have_echo = 0;
	} else {
		off += put_int(f + off, 0);
	}
	if (r->hold_n) {
		/* selective repeat: what is held past the cumulative ACK */
		blen = HPCCD_SACK_BLOCK_BYTES * rx_sack_blocks(t, r,
				(struct hpccd_sack_block *)(f + off + HPCCD_HDR_BYTES));
		if (blen)
			flags |= HPCCD_F_SACK;
	}
	if (r->rxwin) {
		rxw_put(t, r, f + off + HPCCD_HDR_BYTES + blen);
		blen += HPCCD_RXWIN_BYTES;
		fbf |= HPCCD_FB_F_WINDOW;
	}
	put_hdr(f + off, type, flags, blen + HPCCD_FB_TRAILER_BYTES, r->flow_id,
		rx_window_end(t, r), ack, r->last_ts, aux);
	off = put_fb_trailer(t, r, f, off + HPCCD_HDR_BYTES + blen, fbf);
	finish_frame(t, f, off);
	if (type == HPCCD_T_NACK)
		r->st.nacks_sent++;
	else
		r->hs.acks_sent++;
	if (r->rxwin) {
		r->st.windows_sent++;
		r->rxw_ack_ns = now;
	}
	tx_put(t, addr, off);
}

static void rx_ack_now(struct hpccd_tp *t, struct tp_rx *r, uint64_t now)
{
	struct hpccd_ack_req q;

	if (r->rxwin) {
		/* Rx-HPCC: no DCTCP.CE machine, one ACK for what is pending */
		if (r->unacked)
			send_feedback(t, r, HPCCD_T_ACK, r->rcv_nxt, 0, r->unacked, 0, now);
		r->unacked = 0;
	} else if (hpccd_dctcp_rx_flush(&r->dc, &q)) {
		send_feedback(t, r, HPCCD_T_ACK, q.ack_seq, q.ece, r->unacked,
			      !(t->cfg.flags & HPCCD_TP_F_NO_ECHO), now);
		r->unacked = 0;
	}
	r->delack_armed = 0;
}

/* Bytes [off, off + n) of the packet being received, as runs of memory:
 * in f's frame, or, for a multi-buffer packet (t->pc, loop.c), across its
 * pieces (f is the first).  Returns how many runs (at most MB_FRAGS). */
static uint32_t pkt_runs(const struct hpccd_tp *t, const uint8_t *f, uint32_t off, uint32_t n,
			 const uint8_t **rp, uint32_t *rl)
{
	uint32_t k = 0, i, at = 0;

	if (!t->pc.n) {
		rp[0] = f + off;
		rl[0] = n;
		return 1;
	}
	for (i = 0; i < t->pc.n && n; i++) {
		uint32_t len = t->pc.len[i];

		if (off < at + len) {
			uint32_t s = off - at, m = n < len - s ? n : len - s;

			rp[k] = t->pc.p[i] + s;
			rl[k++] = m;
			off += m;
			n -= m;
		}
		at += len;
	}
	return k;
}

/* Ones' complement sum of the packet's bytes [off, off + n), unfolded:
 * a run that starts at an odd offset from `off` sums byte-swapped (RFC
 * 1071 section 2(B)). */
static uint64_t pkt_csum(const struct hpccd_tp *t, const uint8_t *f, uint32_t off, uint32_t n,
			 uint64_t sum)
{
	const uint8_t *rp[MB_FRAGS];
	uint32_t rl[MB_FRAGS], k = pkt_runs(t, f, off, n, rp, rl), i, odd = 0;

	for (i = 0; i < k; i++) {
		uint64_t s = hpccd_csum_partial(rp[i], rl[i], 0);

		if (odd) {
			uint16_t v = hpccd_csum_fold64(s);

			s = (uint16_t)(v >> 8 | v << 8);
		}
		sum += s;
		sum += sum < s;                  /* end-around carry */
		odd ^= rl[i] & 1;
	}
	return sum;
}

static int rx_deliver(struct hpccd_tp *t, struct tp_rx *r, const uint8_t *p, uint32_t n);

/* The packet's payload bytes [off, off + n) to the flow's stream. */
static void pkt_deliver(struct hpccd_tp *t, struct tp_rx *r, const uint8_t *f, uint32_t off,
			uint32_t n)
{
	const uint8_t *rp[MB_FRAGS];
	uint32_t rl[MB_FRAGS], k, i;

	if (t->cfg.sink == HPCCD_TP_SINK_COUNT)
		return;                  /* counted by the caller, not read */
	k = pkt_runs(t, f, off, n, rp, rl);
	for (i = 0; i < k; i++)
		rx_deliver(t, r, rp[i], rl[i]);
}

static int rx_deliver(struct hpccd_tp *t, struct tp_rx *r, const uint8_t *p, uint32_t n)
{
	if (t->cfg.sink == HPCCD_TP_SINK_COUNT)
		return 0;
	r->crc = hpccd_tp_crc32(r->crc, p, n);
	if (t->cfg.sink == HPCCD_TP_SINK_FD && !r->err) {
		while (n) {
			ssize_t w = write(t->cfg.sink_fd, p, n);

			if (w < 0) {
				if (errno == EINTR)
					continue;
				r->err = -errno;
				return r->err;
			}
			p += w;
			n -= (uint32_t)w;
		}
	}
	return 0;
}

/* ---- selective repeat: out-of-order data kept in its UMEM frame ------- */

/* The slot of byte `seq` in r's hold table: packets of a selective-repeat
 * flow start at multiples of the sender's payload size (DATA aux), so
 * seq / unit names a packet. */
static struct tp_hold *hold_slot(const struct hpccd_tp *t, struct tp_rx *r, uint64_t seq)
{
	return &r->hold[(seq / r->unit) & (t->hold_cap - 1)];
}

/* Keep an out-of-order DATA frame of a selective-repeat flow: its UMEM
 * frame stays out of the fill ring until the gap before it is filled.
 * Bounded: hold_cap packets past rcv_nxt per flow, half the RX frames for
 * the engine (the receive window keeps senders well inside both); beyond,
 * the packet is dropped and counted, and comes again.  Returns 1 if kept. */
static int rx_hold(struct hpccd_tp *t, struct tp_rx *r, uint8_t *f,
		   const struct hpccd_wire_info *wi)
{
	const uint64_t mask = ~(uint64_t)(t->cfg.frame_size - 1);
	uint64_t seq = wi->seq;
	struct tp_hold *h;

	if ((seq - r->rcv_nxt) / r->unit >= t->hold_cap || t->rx_held >= t->cfg.rx_frames / 2) {
		t->st.rx_hold_full++;
		return 0;
	}
	if (!r->hold) {
		r->hold = calloc(t->hold_cap, sizeof(*r->hold));
		if (!r->hold) {
			t->st.rx_hold_full++;
			return 0;
		}
	}
	h = hold_slot(t, r, seq);
	if (h->len) {
		r->st.dup_pkts++;        /* held already (a retransmission) */
		return 0;
	}
	if (t->pc.n) {
		/* a multi-buffer packet (loop.c): its frames go back when it
		 * was read, its payload is copied; bounded as the frames are,
		 * by the bytes of half the RX frames */
		const uint8_t *rp[MB_FRAGS];
		uint32_t rl[MB_FRAGS], k, i, o = 0;

		if (t->rx_held_heap + wi->payload_len >
		    (uint64_t)t->cfg.rx_frames / 2 * t->cfg.frame_size ||
		    !(h->heap = malloc(wi->payload_len))) {
			t->st.rx_hold_full++;
			return 0;
		}
		k = pkt_runs(t, f, wi->body_off, wi->payload_len, rp, rl);
		for (i = 0; i < k; o += rl[i++])
			memcpy(h->heap + o, rp[i], rl[i]);
		t->rx_held_heap += wi->payload_len;
	} else {
		h->addr = (uint64_t)(f - (uint8_t *)t->area) + wi->body_off;
		h->chunk = (uint64_t)(f - (uint8_t *)t->area) & mask;
	}
	h->seq = seq;
	h->len = wi->payload_len;
	if (seq + h->len > r->hold_hi)
		r->hold_hi = seq + h->len;
	r->hold_n++;
	t->rx_held++;
	r->st.held_pkts++;
	return 1;
}

static void hold_free(struct hpccd_tp *t, struct tp_rx *r, struct tp_hold *h)
{
	if (h->heap) {
		t->rx_held_heap -= h->len;
		free(h->heap);
		h->heap = NULL;
	} else {
		t->rx_free[t->n_rx_free++] = h->chunk;
	}
	h->len = 0;
	r->hold_n--;
	t->rx_held--;
}

/* After an in-order packet: deliver the held packets that now follow
 * rcv_nxt, and give their frames back.  Returns how many. */
static uint32_t rx_drain(struct hpccd_tp *t, struct tp_rx *r)
{
	uint32_t n = 0;

	while (r->hold_n) {
		struct tp_hold *h = hold_slot(t, r, r->rcv_nxt);

		if (!h->len || h->seq > r->rcv_nxt || h->seq + h->len <= r->rcv_nxt)
			break;
		{
			uint32_t skip = (uint32_t)(r->rcv_nxt - h->seq);

			rx_deliver(t, r, (h->heap ? h->heap : (const uint8_t *)t->area + h->addr) +
				   skip, h->len - skip);
			r->rcv_nxt = h->seq + h->len;
		}
		hold_free(t, r, h);
		n++;
	}
	return n;
}

/* r (used 1) becomes a tombstone, out of t->rx_used: the last entry
 * of the list takes its place. */
void rx_unuse(struct hpccd_tp *t, struct tp_rx *r)
{
	uint32_t at = r->used_at;
	int32_t last = t->rx_used[--t->n_rx_used];

	t->rx_used[at] = last;
	t->rxt[last].used_at = at;
	r->used = 2;
}

/* Forget receiver flow r, done or not: an unfinished one no longer counts
 * as its source's, its last hop's (Rx-HPCC's N) or in the receive
 * window's share (rx_live); what it holds is freed; its slot becomes a
 * tombstone. */
void rx_forget(struct hpccd_tp *t, struct tp_rx *r)
{
	if (!r->done) {
		rx_live_add(t, r->saddr, -1);
		rxw_leave(t, r);
	}
	rx_release(t, r);
	rx_unuse(t, r);
}

/* Forget what r holds (the flow is done, recycled or reaped). */
void rx_release(struct hpccd_tp *t, struct tp_rx *r)
{
	uint32_t i;

	if (!r->hold)
		return;
	for (i = 0; i < t->hold_cap && r->hold_n; i++)
		if (r->hold[i].len)
			hold_free(t, r, &r->hold[i]);
	free(r->hold);
	r->hold = NULL;
	r->hold_n = 0;
}

/* Up to HPCCD_SACK_MAX_BLOCKS [start, end) ranges held past rcv_nxt, the
 * lowest first, into body (wire order); returns how many. */
static uint32_t rx_sack_blocks(const struct hpccd_tp *t, struct tp_rx *r,
			       struct hpccd_sack_block *body)
{
	uint64_t seq = r->rcv_nxt, start = 0, end = 0;
	uint32_t n = 0, k;

	for (k = 0; k < t->hold_cap && seq < r->hold_hi && n < HPCCD_SACK_MAX_BLOCKS; k++) {
		struct tp_hold *h = hold_slot(t, r, seq);
		int held = h->len && h->seq == seq;

		if (held && end == seq) {
			end = seq + h->len;              /* the block grows */
		} else if (held) {
			start = seq;
			end = seq + h->len;
		} else if (end > start) {
			hpccd__put_sack(&body[n++], start, end);
			start = end = 0;
		}
		seq = held ? seq + h->len : (seq / r->unit + 1) * r->unit;
	}
	if (end > start && n < HPCCD_SACK_MAX_BLOCKS) {
		hpccd__put_sack(&body[n++], start, end);
	}
	return n;
}

int on_data(struct hpccd_tp *t, uint8_t *f, uint32_t len, const struct hpccd_wire_info *wi,
	    uint64_t now)
{
	struct hpccd_ack_req q[2];
	struct tp_rx *r;
	uint64_t seq = wi->seq;
	uint32_t plen = wi->payload_len, nq = 0, i, drained = 0;
	int ce = wi->ecn == 3, echo = !(t->cfg.flags & HPCCD_TP_F_NO_ECHO), kept, w_now = 0;
	const uint8_t *udp = f + wi->int_off - UDP_HLEN;

	if (!(t->cfg.flags & HPCCD_TP_F_NO_CSUM_CHECK)) {
		uint32_t ulen = wi->l4_end_off - (wi->int_off - UDP_HLEN);
		/* pseudo-header from the parsed addresses: IPv4 options, if
		 * any, do not move it */
		uint64_t ps = hpccd_csum_pseudo4(htonl(wi->saddr), htonl(wi->daddr), IPPROTO_UDP,
						 (uint16_t)ulen);
		const void *field = &((const struct udphdr *)udp)->check;
		uint16_t check;                 /* 0: sent without a checksum */

		memcpy(&check, field, 2);
		/* A field that holds exactly the folded pseudo-header sum was
		 * left for checksum offload and completed by no one on the
		 * way (a veth: the kernel trusts such a packet too); taken
		 * unchecked and counted.  On a path that completes it (a NIC)
		 * a damaged packet's field matches it by chance once in 65,536
		 * (docs/transport.md "Checksum offload"). */
		if (hpccd_csum_is_partial(field, ps)) {
			t->st.csum_unverified++;
		} else if (check &&
			   hpccd_csum_fold64(pkt_csum(t, f, wi->int_off - UDP_HLEN, ulen, ps)) !=
				   0xffff) {
			t->st.bad_csum++;
			return 0;
		}
	}
	r = rx_lookup(t, wi->saddr, wi->flow_id, 0);
	if (!r)
		r = rx_admit(t, wi->saddr, wi->flow_id, now);
	if (!r)
		return 0;                /* refused and counted */
	if (!r->hs.pkts) {
		r->daddr = wi->daddr;
		r->sport = wi->sport;
		r->dport = wi->dport;
		r->st.first_ns = now;
	}
	memcpy(r->mac_peer, f + 6, 6);   /* answer the hop it came from */
	memcpy(r->mac_local, f, 6);
	if (!r->rxwin && !r->done && (wi->ack & HPCCD_DATA_O_RXWIN) &&
	    !(t->cfg.flags & HPCCD_TP_F_NO_RXWIN))
		rxw_join(t, r);          /* an Rx-HPCC flow: windows in its ACKs */
	r->hs.pkts++;
	if (plen > r->mss)
		r->mss = plen;
	if (ce)                          /* line 2: those packets only */
		r->ce_pkts++;
	if (wi->int_nhop)
		r->int_pkts++;
	r->last_ts = wi->ts;
	if (wi->hdr_flags & HPCCD_F_FIN)
		r->fin_end = seq + plen;
	/* selective repeat: the sender's flag and its payload size (aux) */
	if ((wi->hdr_flags & HPCCD_F_SACK) && (wi->aux & HPCCD_AUX_UNIT) && !r->unit)
		r->unit = wi->aux & HPCCD_AUX_UNIT;
	rx_cnp(t, r, wi, ce, now);       /* DCQCN's notification point (cnp.c) */

	if (seq > r->rcv_nxt && r->unit) {
		/* a gap, selective repeat ([IRN]-style): keep the packet and
		 * NACK with the blocks held, at once */
		r->st.ooo_pkts++;
		kept = rx_hold(t, r, f, wi);
		send_feedback(t, r, HPCCD_T_NACK, r->rcv_nxt, r->dc.ce, 0, 0, now);
		return kept;
	}
	if (seq > r->rcv_nxt) {
		/* a gap: drop (go-back-N), NACK once per gap per nack_gap_ns */
		r->st.ooo_pkts++;
		r->gap = 1;
		r->ooo_since_gap++;
		if (r->nack_for != r->rcv_nxt || now - r->nack_ns >= t->cfg.nack_gap_ns) {
			r->nack_for = r->rcv_nxt;
			r->nack_ns = now;
			send_feedback(t, r, HPCCD_T_NACK, r->rcv_nxt, r->dc.ce,
				      (uint32_t)r->ooo_since_gap, 0, now);
		}
		return 0;
	}
	if (seq + plen <= r->rcv_nxt && !(plen == 0 && seq == r->rcv_nxt)) {
		/* a duplicate (a retransmission after a lost ACK, or go-back-N
		 * resending what arrived): acknowledge at once */
		r->st.dup_pkts++;
		if (r->unacked)
			rx_ack_now(t, r, now);
		else
			send_feedback(t, r, HPCCD_T_ACK, r->rcv_nxt, r->dc.ce, 0, 0, now);
		return 0;
	}
	/* in order (a packet straddling rcv_nxt delivers its new part) */
	{
		uint32_t skip = (uint32_t)(r->rcv_nxt - seq);

		pkt_deliver(t, r, f, wi->body_off + skip, plen - skip);
		r->rcv_nxt = seq + plen;
		if (r->gap) {            /* their (cold) line only after a gap */
			r->gap = 0;
			r->ooo_since_gap = 0;
			r->nack_for = UINT64_MAX;
		}
		if (r->hold_n)
			drained = rx_drain(t, r);
	}
	if (wi->int_nhop && wi->int_room) {
		uint32_t n = HPCCD_INT_HDR_BYTES + wi->int_room * HPCCD_INT_HOP_BYTES;
		const uint8_t *ih = f + wi->int_off;

		if (r->rxwin)
			w_now = rxw_on_int(t, r, wi, ih, now);   /* NewINT */
		else if (echo) {
			memcpy(r->echo, ih, n);
			r->echo_len = n;
			r->have_echo = 1;
		}
	}
	r->unacked += 1 + drained;
	if (r->rxwin) {
		/* Rx-HPCC ([HPCC++2020] section 6.2, line 31): the ACK that
		 * carries W leaves when NewINT commits, once per T; the
		 * delayed ACK below (at most T after the last one) covers
		 * packets without INT */
		if (w_now)
			rx_ack_now(t, r, now);   /* disarms the delayed ACK */
	} else {
		/* ACKs: the DCTCP.CE machine ([DCTCP] section 3.2) with factor
		 * m; a CE change acknowledges at once, in two ACKs when
		 * packets of the old state wait */
		nq = hpccd_dctcp_rx_on_packet(&r->dc, ce, r->rcv_nxt, q);
		for (i = 0; i < nq; i++) {
			uint32_t n = nq == 2 ? (i == 0 ? r->unacked - 1 : 1) : r->unacked;

			send_feedback(t, r, HPCCD_T_ACK, q[i].ack_seq, q[i].ece, n, echo, now);
		}
	}
	if (nq) {
		r->unacked = 0;
		r->delack_armed = 0;
	}
	if (!r->done && r->rcv_nxt >= r->fin_end) {
		rx_release(t, r);
		r->done = 1;
		r->st.done = 1;
		r->hs.last_ns = now;
		t->st.rx_done++;
		rx_live_add(t, r->saddr, -1);
		rxw_leave(t, r);
		rx_ack_now(t, r, now);   /* the last byte: no delay */
		if (t->cfg.flags & HPCCD_TP_F_ECHO)
			tp__echo_reply(t, r);
	} else {
		if (!r->done)
			r->hs.last_ns = now;
		if (r->unacked && !r->delack_armed) {
			r->delack_armed = 1;
			r->delack_deadline = r->rxwin ? rxw_ack_due(r, now) : now + t->cfg.delack_ns;
			rx_timer_list(t, r, r->delack_deadline);
		}
	}
	return 0;
}

/* Receiver flow r has a timer due at `deadline` (a delayed ACK, a held
 * CNP): on the list rx_timers walks, which wakes the thread by then. */
void rx_timer_list(struct hpccd_tp *t, struct tp_rx *r, uint64_t deadline)
{
	if (!r->delack_listed) {
		r->delack_listed = 1;
		t->delack[t->n_delack++] = (int32_t)(r - t->rxt);
	}
	if (deadline < t->delack_min)
		t->delack_min = deadline;
}

void rx_timers(struct hpccd_tp *t, uint64_t now)
{
	uint64_t next = NO_DEADLINE, due;
	uint32_t i;

	uint32_t k = 0;

	if (t->delack_min > now)
		return;
	/* the flows with a delayed ACK armed or a CNP held (cnp.c), not the
	 * whole table */
	for (i = 0; i < t->n_delack; i++) {
		struct tp_rx *r = &t->rxt[t->delack[i]];

		if (r->used == 1 && r->delack_armed && r->delack_deadline <= now)
			rx_ack_now(t, r, now);
		if (r->used == 1 && rx_cnp_due(r) <= now)
			rx_cnp_timer(t, r, now);
		due = rx_cnp_due(r);
		if (r->used != 1 || (!r->delack_armed && due == NO_DEADLINE)) {
			r->delack_listed = 0;
			continue;
		}
		if (r->delack_armed && r->delack_deadline < due)
			due = r->delack_deadline;
		if (due < next)
			next = due;
		t->delack[k++] = t->delack[i];
	}
	t->n_delack = k;
	t->delack_min = next;
}

static int key_set(const uint8_t *key)
{
	uint32_t i;

	for (i = 0; i < 16; i++)
		if (key[i])
			return 1;
	return 0;
}

/* A PROBE that reached the engine: xdp_host answers probes itself
 * (XDP_TX) unless it was loaded without HPCCD_CFG_REFLECT_PROBES; then the
 * engine answers with the same writer xdp_host runs
 * (hpccd_wire_reflect_probe: include/hpccd/build.h hpccd__reflect_probe).
 * Like xdp_host it does not sign with the all-zero "no key". */
void answer_probe(struct hpccd_tp *t, const uint8_t *p, const struct hpccd_wire_info *wi)
{
	uint32_t len = wi->l4_end_off;
	uint64_t addr;
	uint8_t *f;

	if (!wi->has_tag || wi->int_off != L2L4 || len > t->cfg.frame_size - TX_HEADROOM) {
		t->st.bad_body++;        /* a VLAN tag, IP options: not ours */
		return;
	}
	if (!key_set(t->cfg.tag_key)) {
		t->st.probes_no_key++;
		return;
	}
	f = tx_get(t, &addr);
	if (!f) {
		t->st.ack_dropped++;
		return;
	}
	memcpy(f, p, len);
	if (hpccd_wire_reflect_probe(t->cfg.tag_key, f, len, t->cfg.udp_port,
				     t->cfg.probe_dscp) != 0) {
		t->tx_free[t->n_tx_free++] = addr - TX_HEADROOM;
		t->st.bad_body++;
		return;
	}
	tx_put(t, addr, len);
	t->st.probes_answered++;
}
