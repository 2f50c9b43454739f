// SPDX-License-Identifier: BSD-2-Clause
/*
 * The sender half's output: window and pacing, round robin among the
 * flows, DATA and PROBE frames ([HPCC] section 4.2: scheduler and TX pipe).
 */
#include "tp.h"


uint64_t flow_rto(const struct tp_flow *fl)
{
	uint64_t rto = fl->srtt ? fl->srtt + 4 * (uint64_t)fl->rttvar : fl->hc.rto_min_ns;

	if (rto < fl->hc.rto_min_ns)
		rto = fl->hc.rto_min_ns;
	rto <<= fl->backoff < 20 ? fl->backoff : 20;
	return rto > fl->hc.rto_max_ns ? fl->hc.rto_max_ns : rto;
}

double cap_rate(const struct tp_flow *fl, double r)
{
	double line = (double)fl->hc.line_rate_bps;

	if (!(r > 0))
		return line;
	return r < line ? r : line;
}

/* Payload bytes the window lets be in flight (at least one packet). */
/* Payload bytes that may be in flight from snd_una: the algorithm's W
 * ([HPCC] section 4.2: the window bounds the bytes in flight) and the
 * receiver's window, whichever is smaller; at least one packet. */
uint64_t flow_allowed(const struct tp_flow *fl)
{
	double a = fl->W / fl->wire_per_payload;

	if (fl->rto_probe)
		return fl->mss;                 /* the one packet after a timeout */
	if (fl->rwnd_end) {
		double r = fl->rwnd_end > fl->snd_una ? (double)(fl->rwnd_end - fl->snd_una) : 0;

		if (r < a)
			a = r;
	}
	return a < fl->mss ? fl->mss : (uint64_t)a;
}

/* Selective repeat: the first byte of a hole the receiver reported (its
 * SACK blocks: held past the cumulative ACK) not yet resent in this
 * recovery, and how many bytes the hole has there; 0 if none.  Each hole
 * is resent once; a resent packet lost again is the timeout's. */
static uint64_t flow_hole(const struct tp_flow *fl, uint32_t *room)
{
	uint64_t c = fl->rtx_next > fl->snd_una ? fl->rtx_next : fl->snd_una;
	uint32_t i;

	for (i = 0; i < fl->sack_n; i++) {
		if (c < fl->sack[i].start) {
			uint64_t n = fl->sack[i].start - c;

			*room = n < fl->mss ? (uint32_t)n : fl->mss;
			return c;
		}
		if (c < fl->sack[i].end)
			c = fl->sack[i].end;
	}
	return 0;
}

/* What the flow sends next, if anything: a hole to repair (selective
 * repeat; not held back by the window, which the lost packet no longer
 * occupies), else new or go-back-N data while its bytes in flight are
 * below what flow_allowed() lets be.  *seq, *room: where and at most how
 * many payload bytes. */
int flow_next(const struct tp_flow *fl, uint64_t *seq, uint32_t *room)
{
	uint64_t h;

	if (fl->state != HPCCD_TP_RUNNING)
		return 0;
	if (fl->sack_n && !fl->rto_probe && (h = flow_hole(fl, room)) != 0) {
		*seq = h;
		return 1;
	}
	if (fl->snd_nxt >= fl->hc.bytes || fl->snd_nxt - fl->snd_una >= flow_allowed(fl))
		return 0;
	*seq = fl->snd_nxt;
	*room = fl->mss;
	return 1;
}

int flow_wants_to_send(const struct tp_flow *fl)
{
	uint64_t seq;
	uint32_t room;

	return flow_next(fl, &seq, &room);
}

void flow_finish(struct hpccd_tp *t, struct tp_flow *fl, uint32_t state, int err, uint64_t now)
{
	if (fl->state == HPCCD_TP_RUNNING && t->n_running)
		t->n_running--;
	fl->state = state;
	fl->err = err;
	fl->end_ns = now;
	t->fin_gen++;                        /* what a caller may wait for (run.c) */
	sched_forget(t, fl);
	if (fl->auto_close) {                /* an echo reply: nobody reads it */
		fl->state = HPCCD_TP_FREE;
		t->free_slot[t->n_free++] = flow_slot(t, fl);
	}
}

/* A DATA frame of fl at seq with at most `room` payload bytes. */
/* TX frames a packet of `len` bytes takes. */
static inline uint32_t tx_frames_for(const struct hpccd_tp *t, uint32_t len)
{
	uint32_t cap = t->cfg.frame_size - TX_HEADROOM;

	return len <= cap ? 1 : (len + cap - 1) / cap;
}

/* HPCCD_TP_SRC_REPEAT: n bytes from stream offset seq of buf repeated,
 * one memcpy per run up to the buffer's end. */
static void repeat_put(const struct tp_flow *fl, uint64_t seq, uint8_t *p, uint32_t n)
{
	uint64_t at = seq % fl->c.buf_len;          /* cold: REPEAT flows only */

	while (n) {
		uint64_t run = fl->c.buf_len - at < n ? fl->c.buf_len - at : n;

		memcpy(p, fl->hc.buf + at, run);
		p += run;
		n -= (uint32_t)run;
		at = 0;
	}
}

/* `n` bytes of the flow's stream from `seq` into p. */
static inline void payload_put(const struct tp_flow *fl, uint64_t seq, uint8_t *p, uint32_t n)
{
	if (fl->hc.src == HPCCD_TP_SRC_BUFFER)
		memcpy(p, fl->hc.buf + seq, n);
	else if (fl->hc.src == HPCCD_TP_SRC_REPEAT)
		repeat_put(fl, seq, p, n);
	else
		hpccd_tp_pattern_fill(fl->hc.seed, seq, p, n);
}

/* A DATA packet larger than a frame as a multi-buffer packet: f (at addr)
 * has its `off` header bytes; the payload fills f and as many more TX
 * frames as it needs, queued with XDP_PKT_CONTD on all but the last.
 * The caller checked that the frames are free. */
static int send_pieces(struct hpccd_tp *t, struct tp_flow *fl, uint64_t seq, uint8_t *f,
		       uint64_t addr, uint32_t off, uint32_t plen)
{
	const uint32_t cap = t->cfg.frame_size - TX_HEADROOM;   /* even */
	uint8_t *rest[MB_FRAGS];
	uint32_t rest_len[MB_FRAGS];
	uint64_t rest_addr[MB_FRAGS];
	uint32_t n = 0, first = cap - off, done, i;

	if (!t->sg || tx_frames_for(t, off + plen) > MB_FRAGS)
		return -EMSGSIZE;        /* flow_check() refuses such an MTU */
	payload_put(fl, seq, f + off, first);
	for (done = first; done < plen; done += rest_len[n++]) {
		rest[n] = tx_get(t, &rest_addr[n]);
		if (!rest[n]) {           /* cannot happen: the caller counted them */
			while (n--)
				t->tx_free[t->n_tx_free++] = rest_addr[n] - TX_HEADROOM;
			t->tx_free[t->n_tx_free++] = addr - TX_HEADROOM;
			return -ENOBUFS;
		}
		rest_len[n] = plen - done < cap ? plen - done : cap;
		payload_put(fl, seq + done, rest[n], rest_len[n]);
	}
	if (t->st.tx_csum_offload) {
		finish_frame_offload(t, f, off + plen);
		tx_put_opts(t, addr, cap, XDP_PKT_CONTD | XDP_TX_METADATA_);
	} else {
		finish_frame_pieces(t, f, cap, rest, rest_len, n, off + plen);
		tx_put_frag(t, addr, cap, 1);
	}
	for (i = 0; i < n; i++)
		tx_put_frag(t, rest_addr[i], rest_len[i], i + 1 < n);
	t->st.tx_mb_pkts++;
	return 0;
}

int send_data(struct hpccd_tp *t, struct tp_flow *fl, uint64_t seq, uint32_t room_b, uint64_t now)
{
	uint64_t addr, idx;
	uint32_t plen, room = 0, flags = 0, off, len;
	int retx, ect;
	uint8_t *f, *p;

	{
		/* the frames this packet takes (more than one: multi-buffer) */
		uint32_t need = ACK_RESERVE + tx_frames_for(t, fl->hdr_max + room_b);

		if (t->n_tx_free < need)
			reap_completions(t);
		if (t->n_tx_free < need) {
			t->st.tx_no_frame++;
			t->starved = 1;
			return -ENOBUFS;
		}
	}
	f = tx_get(t, &addr);
	if (!f)
		return -ENOBUFS;
	plen = fl->hc.bytes - seq < room_b ? (uint32_t)(fl->hc.bytes - seq) : room_b;
	idx = seq / fl->mss;
	retx = seq < fl->snd_max;
	switch (fl->hc.int_mode) {
	case HPCCD_TP_INT_EVERY:
		room = fl->room;
		break;
	case HPCCD_TP_INT_NTH:
		room = idx % fl->hc.int_every == 0 ? fl->room : 0;
		break;
	}
	ect = fl->ops->pkt_ect(fl, idx, retx);
	if (seq == 0)
		flags |= HPCCD_F_SYN;
	if (seq + plen == fl->hc.bytes)
		flags |= HPCCD_F_FIN;
	if (retx)
		flags |= HPCCD_F_RETX;
	if (fl->ops->pkt_flags)
		flags |= fl->ops->pkt_flags(fl, idx, retx);
	if (fl->hc.recovery == HPCCD_TP_SR)
		flags |= HPCCD_F_SACK;        /* and aux = the payload size */

	put_l2l4(f, fl->hc.dmac, fl->hc.smac, fl->hc.saddr, fl->hc.daddr, fl->hc.sport, fl->hc.dport,
		 ect ? 0x02 : 0x00);
	off = L2L4;
	off += put_int(f + off, room);
	/* ack: the options (Rx-HPCC's window, rx_hpcc.c); aux: the SACK unit,
	 * and whether the receiver sends CNPs (cnp.c) */
	put_hdr(f + off, HPCCD_T_DATA, flags, plen, fl->flow_id, seq, fl->ops->data_opts,
		(uint32_t)now, (fl->hc.recovery == HPCCD_TP_SR ? fl->mss : 0) |
		(fl->ops->on_cnp ? HPCCD_AUX_CNP : 0));
	off += HPCCD_HDR_BYTES;
	p = f + off;
	len = off + plen;
	if (len <= t->cfg.frame_size - TX_HEADROOM) {
		payload_put(fl, seq, p, plen);
		if (t->st.tx_csum_offload) {
			finish_frame_offload(t, f, len);
			tx_put_opts(t, addr, len, XDP_TX_METADATA_);
		} else {
			finish_frame(t, f, len);
			tx_put(t, addr, len);
		}
	} else if (send_pieces(t, fl, seq, f, addr, off, plen) < 0) {
		return -ENOBUFS;
	}

	if (seq == fl->snd_nxt)
		fl->snd_nxt = seq + plen;
	else
		fl->rtx_next = seq + plen;   /* a hole repaired (selective repeat) */
	if (fl->snd_nxt > fl->snd_max)
		fl->snd_max = fl->snd_nxt;
	TP_HS_ADD(fl, pkts, 1);
	TP_HS_ADD(fl, wire_bytes, len);
	if (retx) {                          /* st: a cold line, not touched otherwise */
		fl->st.retx_pkts++;
		fl->st.retx_bytes += plen;
	}
	TP_HS_ADD(fl, int_pkts, room != 0);
	TP_HS_ADD(fl, ect_pkts, ect != 0);
	if (fl->rto_deadline == NO_DEADLINE) {
		fl->rto_deadline = now + flow_rto(fl);
		timer_arm(t, fl);
	}
	if (fl->ops->on_sent)
		fl->ops->on_sent(fl, len, now);
	/* pacing: next send time from the rate, with at most burst_ns of
	 * banked credit ([HPCC] section 4.2: credit-based pacing) */
	{
		uint64_t base = fl->next_send_ns;
		uint64_t gap = (uint64_t)((double)len * 8e9 / fl->rate_bps);

		if (base + fl->hc.burst_ns < now) {
			/* the engine came later than the credit covers.  A
			 * flow whose packet time is longer than the credit
			 * loses the whole packet times beyond it and keeps the
			 * rest of one, so that it keeps its phase: slow flows
			 * rebased to one late "now" went on sending together,
			 * in bursts of all of them.  A faster one (its credit
			 * holds several packets anyway) starts again from the
			 * credit, at most burst_ns of it. */
			uint64_t lost = now - fl->hc.burst_ns - base;

			if (gap > fl->hc.burst_ns)
				lost = lost / gap * gap;
			fl->st.pace_lost_ns += lost;
			base += lost;
		}
		fl->next_send_ns = base + gap;
	}
	return 0;
}

/* Probe mode ([HPCC++2022] section 6.2.1, "Probe packet"): a PROBE with the
 * flow's 5-tuple and ECN codepoint (so switches route and queue it with the
 * data, [HPCC++2020] section 6.1), `int_room` empty hop records with COLLECT,
 * the probe number as seq, the clock as ts, a zeroed tag slot that the
 * receiver's xdp_host fills when it reflects it (docs/wire-format.md).
 * Feedback-class: it takes a TX frame like an ACK, outside the window and
 * the pacing (126 bytes once per RTT). */
int send_probe(struct hpccd_tp *t, struct tp_flow *fl, uint64_t now)
{
	uint64_t addr;
	uint32_t off = L2L4;
	uint8_t *f = tx_get(t, &addr);

	if (!f)
		return -ENOBUFS;
	put_l2l4(f, fl->hc.dmac, fl->hc.smac, fl->hc.saddr, fl->hc.daddr, fl->hc.sport, fl->hc.dport,
		 fl->hc.ecn ? 0x02 : 0x00);
	off += put_int(f + off, fl->c.int_room);
	put_hdr(f + off, HPCCD_T_PROBE, 0, HPCCD_TAG_BYTES, fl->flow_id, ++fl->probe_seq, 0,
		(uint32_t)now, 0);
	off += HPCCD_HDR_BYTES;
	memset(f + off, 0, HPCCD_TAG_BYTES);
	off += HPCCD_TAG_BYTES;
	finish_frame(t, f, off);
	tx_put(t, addr, off);
	fl->probe_out = 1;
	fl->probe_deadline = now + fl->c.probe_timeout_ns;
	fl->st.probes_sent++;
	return 0;
}

/* The window, not the pacing, holds a running flow back from `now`: its
 * send time has come but its bytes in flight reached W. */
void flow_note_window(struct tp_flow *fl, uint64_t now)
{
	if (!fl->wnd_blocked && fl->state == HPCCD_TP_RUNNING && fl->snd_nxt < fl->hc.bytes) {
		fl->wnd_block_ns = now > fl->next_send_ns ? fl->next_send_ns : now;
		/* a block from time 0 is not one (0 said "not blocked" before
		 * the flag: the same decisions) */
		fl->wnd_blocked = fl->wnd_block_ns != 0;
	}
}

/* The window opened again: the blocked time is the window's.  The pacing
 * restarts from now: credit banked while the window was closed would go
 * out as a burst at line rate, which is the queue the pacing is there to
 * avoid ([HPCC] section 4.2: the window bounds in-flight bytes, the
 * rate spaces them). */
void flow_window_opened(struct tp_flow *fl, uint64_t now)
{
	fl->wnd_limited_ns += now - fl->wnd_block_ns;
	fl->wnd_blocked = 0;
	if (fl->next_send_ns < now)
		fl->next_send_ns = now;
}
