// SPDX-License-Identifier: BSD-2-Clause
/*
 * The sender half's input: ACK / NACK and PROBE_RESP, their tags verified
 * -> the reliability state (cumulative ACK, go-back-N, RTT, restart
 * detection) and the flow's algorithm (struct tp_cc_ops).
 */
#include "tp.h"


static void flow_rtt_sample(struct tp_flow *fl, uint32_t ts_echo, uint64_t now)
{
	uint64_t r = (uint32_t)((uint32_t)now - ts_echo);
	uint64_t d;

	if (r > 4000000000ull)
		return;
	if (!fl->min_rtt || r < fl->min_rtt)
		fl->min_rtt = r;
	if (!fl->srtt) {
		fl->srtt = r;
		fl->rttvar = r / 2;
		return;
	}
	/* RFC 6298 section 2.3 gains, 1/8 and 1/4 */
	d = r > fl->srtt ? r - fl->srtt : fl->srtt - r;
	fl->rttvar = (3 * fl->rttvar + d) / 4;
	fl->srtt = (7 * fl->srtt + r) / 8;
}

struct tp_flow *flow_by_id(struct hpccd_tp *t, uint32_t flow_id)
{
	struct tp_flow *fl = &t->flows[flow_id & t->slot_mask];

	return fl->state != HPCCD_TP_FREE && fl->flow_id == flow_id ? fl : NULL;
}

/* Selective repeat: the SACK blocks of an ACK or NACK (HPCCD_F_SACK; none
 * without it) become the flow's picture of what the receiver holds.
 * Blocks must be whole multiples of 16 bytes, at most four, ascending,
 * past the ACK and within what was sent; otherwise the body is bad
 * (counted) and none are taken. */
static void sack_update(struct hpccd_tp *t, struct tp_flow *fl, const uint8_t *f,
			const struct hpccd_wire_info *wi)
{
	uint32_t n = 0, i, nb = wi->payload_len / HPCCD_SACK_BLOCK_BYTES;
	uint64_t prev = wi->ack;

	if (wi->hdr_flags & HPCCD_F_SACK) {
		if (wi->payload_len % HPCCD_SACK_BLOCK_BYTES || !nb || nb > HPCCD_SACK_MAX_BLOCKS) {
			t->st.bad_body++;
			nb = 0;
		}
		for (i = 0; i < nb; i++) {
			const uint8_t *b = f + wi->body_off + HPCCD_SACK_BLOCK_BYTES * i;
			uint32_t w[4];
			uint64_t s, e;

			memcpy(w, b, sizeof(w));
			s = (uint64_t)ntohl(w[0]) << 32 | ntohl(w[1]);
			e = (uint64_t)ntohl(w[2]) << 32 | ntohl(w[3]);
			if (s <= prev || e <= s || e > fl->snd_max) {
				t->st.bad_body++;
				n = 0;
				break;
			}
			fl->sack[n].start = s;
			fl->sack[n].end = e;
			n++;
			prev = e;
		}
	}
	fl->sack_n = n;
}

/* [HPCC++2022] section 9.1: an ACK or NACK changes the window and may
 * trigger a retransmission, a CNP cuts a rate (cnp.c), so none is applied
 * unless its trailer is
 * there and its tag verifies under the engine's key (forged, corrupted or
 * truncated ones are counted in bad_tags).  Returns 1 if it verifies. */
int fb_authentic(struct hpccd_tp *t, struct tp_flow *fl, const uint8_t *f,
		 const struct hpccd_wire_info *wi)
{
	/* the prefix: the flow as its data sender (this host) sees it; the
	 * span: the parser's offsets (rx_frame parsed the frame already) */
	struct hpccd_tag_input ti = {
		.saddr = htonl(wi->daddr), .daddr = htonl(wi->saddr),
		.sport = htons(wi->dport), .dport = htons(wi->sport), .proto = wi->l4,
	};
	uint64_t tag;

	if (!wi->has_trailer ||
	    hpccd_wire_tag_span(t->cfg.tag_key, &ti, f + wi->int_off, wi->tag_off - wi->int_off,
				&tag) || tag != wi->tag) {
		fl->st.bad_tags++;
		return 0;
	}
	return 1;
}

/* Replay: a receiver flow numbers its ACKs, NACKs and CNPs in one sequence
 * (fb_seq, from 1); one not above the newest taken is a copy or older than
 * what was applied, and is dropped (fb_replayed).  Serial arithmetic:
 * fb_seq may wrap. */
int fb_fresh(struct tp_flow *fl, const struct hpccd_wire_info *wi)
{
	if ((int32_t)(wi->fb_seq - fl->fb_seq) <= 0) {
		fl->st.fb_replayed++;
		return 0;
	}
	fl->fb_seq = wi->fb_seq;
	return 1;
}

void on_feedback(struct hpccd_tp *t, const uint8_t *f, uint32_t len,
			const struct hpccd_wire_info *wi, uint64_t now)
{
	struct tp_flow *fl = flow_by_id(t, wi->flow_id);
	uint64_t ack = wi->ack, acked = 0;
	int ece = !!(wi->hdr_flags & HPCCD_F_ECE), loss = 0;

	if (!fl || wi->saddr != fl->hc.daddr || wi->dport != fl->hc.sport) {
		t->st.unknown_flow++;
		return;
	}
	if (wi->hdr_type == HPCCD_T_NOTIFY) {
		t->st.bad_body++;        /* windows travel in ACKs: never sent */
		return;
	}
	if (fl->state != HPCCD_TP_RUNNING)
		return;                  /* late feedback of a finished flow */
	if (!fb_authentic(t, fl, f, wi))
		return;
	if (ack > fl->snd_max) {
		t->st.bad_body++;        /* acknowledges what was never sent */
		return;
	}
	if (wi->hdr_type == HPCCD_T_NACK && ack < fl->snd_una) {
		/* The receiver's restart (docs/security.md "Faults"): a live
		 * receiver's rcv_nxt never goes back, so a NACK below snd_una
		 * answering a DATA sent *after* snd_una last advanced (its
		 * echoed ts, widened to 64 bits through the RTT) comes from a
		 * receiver that lost the flow's state.  Its stream cannot be
		 * completed (the bytes before were delivered to the old one):
		 * the flow fails at once with ECONNRESET, as TCP's does on a
		 * RST.  A stale NACK reordered behind newer ACKs echoes an
		 * older DATA and is ignored below, as before.  The check
		 * comes before the replay check: the new receiver numbers
		 * its feedback from 1 again (a replay of an old NACK echoes
		 * an old ts, and cannot pass it). */
		uint64_t sent = now - (uint32_t)((uint32_t)now - wi->ts);

		if (sent > fl->last_progress_ns) {
			flow_finish(t, fl, HPCCD_TP_FAILED, -ECONNRESET, now);
			return;
		}
	}
	if (!fb_fresh(fl, wi))
		return;
	flow_rtt_sample(fl, wi->ts, now);
	if (fl->hc.recovery == HPCCD_TP_SR && ack >= fl->snd_una)
		sack_update(t, fl, f, wi);
	if (ack > fl->snd_una && fl->rto_probe) {
		/* The first ACK after a timeout.  Beyond the one resent packet,
		 * or echoing the clock of a packet sent before the timeout
		 * (RFC 3522, Eifel: the ACK answers the original, not the
		 * retransmission), while nothing was known lost: the data sent
		 * before the timeout is arriving, the timeout was spurious, and
		 * sending carries on after what was sent then (a real loss
		 * among it is NACKed by the receiver, or times out again).
		 * Otherwise:
		 * go-back-N carries on from the ACK; selective repeat from the
		 * end of what the receiver holds (it keeps all that arrives, so
		 * what it does not report past its blocks was lost), the holes
		 * before repaired from its blocks. */
		if ((ack > fl->rto_probe_end || (int32_t)(wi->ts - fl->rto_ts) < 0) &&
		    !fl->rto_holes) {
			fl->st.rtos_spurious++;
			fl->snd_nxt = fl->snd_max;
		} else if (fl->hc.recovery == HPCCD_TP_SR) {
			uint64_t e = fl->sack_n ? fl->sack[fl->sack_n - 1].end : ack;

			fl->snd_nxt = e > ack ? e : ack;
		}
		fl->rto_probe = 0;
	}
	if (ack > fl->snd_una) {
		acked = ack - fl->snd_una;
		fl->snd_una = ack;
		fl->backoff = 0;
		fl->last_progress_ns = now;
		fl->rto_deadline = fl->snd_una < fl->snd_max ? now + flow_rto(fl) : NO_DEADLINE;
		if (flow_deadline_of(fl) == NO_DEADLINE)
			timer_disarm(t, fl);
		if (fl->snd_nxt < fl->snd_una)
			fl->snd_nxt = fl->snd_una;
	}
	/* the receiver's window (seq of ACK and NACK; 0: none), from feedback
	 * that is not older than what is acknowledged */
	if (ack >= fl->snd_una)
		fl->rwnd_end = wi->seq;
	switch (wi->hdr_type) {
	case HPCCD_T_ACK:
		TP_HS_ADD(fl, acks, 1);
		if (ece)                     /* st: a cold line, not touched otherwise */
			fl->st.ece_acks++;
		break;
	case HPCCD_T_NACK:
		fl->st.nacks++;
		if (fl->hc.recovery == HPCCD_TP_SR) {
			/* selective repeat: the blocks say what to resend
			 * (flow_next); the algorithm hears of the loss once
			 * per window of data, as TCP's fast recovery */
			if (fl->sack_n && fl->snd_una >= fl->rec_end) {
				fl->rec_end = fl->snd_max;
				fl->st.recoveries++;
				loss = 1;
			}
			break;
		}
		/* go-back-N ([HPCC] section 4.2): resend from the
		 * first byte the receiver misses; once per gap per RTT, so that
		 * the NACKs of one loss do not rewind again and again */
		/* a stale NACK (below what is acknowledged) rewinds nothing */
		if (ack == fl->snd_una && ack < fl->snd_nxt &&
		    (ack != fl->goback_seq ||
		     now - fl->goback_ns > (fl->srtt > 100000 ? fl->srtt : 100000))) {
			fl->snd_nxt = ack;
			fl->goback_seq = ack;
			fl->goback_ns = now;
			fl->st.go_backs++;
			loss = 1;
		}
		break;
	}

	{
		struct tp_fb fb = { .type = wi->hdr_type, .ack = ack, .acked = acked, .ece = ece,
				    .loss = loss, .f = f, .len = len, .wi = wi };

		TP_HS_ADD(fl, cc_updates, fl->ops->on_feedback(fl, &fb, now) != 0);
	}
	fl->ops->sync(fl);
	if (fl->snd_una >= fl->hc.bytes)
		flow_finish(t, fl, HPCCD_TP_DONE, 0, now);
	else
		sched_wake(t, fl, now);          /* the window may have opened */
}

/* A PROBE_RESP for one of our flows (probe mode).  Its tag is verified
 * first ([HPCC++2022] section 9.1; never applied otherwise); only the response
 * to the outstanding probe counts: one to a probe already declared lost is
 * late, and is not applied either (its INT is older than a probe's RTT and
 * the next probe is already on its way).  The INT goes to NewAck ([HPCC]
 * Algorithm 1 line 21) exactly as an INT-echo ACK's does, with seq =
 * snd_nxt = the probe number: every response starts a new RTT, so each
 * one updates W^c (lines 22-24), which is the once-per-RTT update [HPCC++2020]
 * section 6.1 asks for. */
void on_probe_resp(struct hpccd_tp *t, const uint8_t *f, uint32_t len,
			  const struct hpccd_wire_info *wi, uint64_t now)
{
	struct tp_flow *fl = flow_by_id(t, wi->flow_id);
	uint64_t r;

	if (!fl || wi->saddr != fl->hc.daddr || wi->dport != fl->hc.sport ||
	    fl->hc.int_mode != HPCCD_TP_INT_PROBE || !fl->ops->on_probe_resp) {
		t->st.unknown_flow++;
		return;
	}
	if (!wi->has_tag || hpccd_wire_tag_verify(t->cfg.tag_key, f, len, t->cfg.udp_port,
						  t->cfg.probe_dscp) != 1) {
		fl->st.probe_bad_tags++;
		return;
	}
	if (fl->state != HPCCD_TP_RUNNING)
		return;                  /* the flow finished while it was out */
	if (!fl->probe_out || wi->seq != fl->probe_seq) {
		fl->st.probes_late++;
		return;
	}
	fl->probe_out = 0;
	fl->st.probes_answered++;
	r = (uint32_t)((uint32_t)now - wi->ts);
	fl->st.probe_rtt_sum_ns += r;
	if (!fl->st.probe_min_rtt_ns || r < fl->st.probe_min_rtt_ns)
		fl->st.probe_min_rtt_ns = r;
	/* RFC 6298 gain 1/8, as the data RTT */
	fl->st.probe_srtt_ns = fl->st.probe_srtt_ns ? (7 * fl->st.probe_srtt_ns + r) / 8 : r;
	if (fl->ops->on_probe_resp(fl, wi, f, now))
		TP_HS_ADD(fl, cc_updates, 1);
	fl->ops->sync(fl);
	maybe_probe(t, fl, now);                 /* the next RTT's */
	sched_wake(t, fl, now);
}
