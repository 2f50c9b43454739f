// SPDX-License-Identifier: BSD-2-Clause
/*
 * DCTCP ([DCTCP]): sender congestion estimator and window reduction
 * (section 3.3, in the scaled integer form of section 4), loss handling
 * (section 3.4) over NewReno-style growth (RFC 5681, as section 4 suggests
 * "additional actions on top of ... NewReno"), and the receiver's
 * DCTCP.CE ACK state machine (section 3.2).
 *
 * All state is integer: alpha is scaled by SCF = 2^16 ([DCTCP]'s
 * example), g = 2^-SHF.
 */
#include <errno.h>
#include <string.h>

#include "hpccd/cc.h"

void hpccd_dctcp_params_default(struct hpccd_dctcp_params *p)
{
	memset(p, 0, sizeof(*p));
	p->g_shift = 4;            /* g = 1/16, [DCTCP] section 4 */
	p->mtu_bytes = 1000;
	p->alpha_reset_on_loss = 0;
}

int hpccd_dctcp_init(struct hpccd_dctcp *s, const struct hpccd_dctcp_params *p,
		     const char **why)
{
	const char *bad = NULL;

	if (p->g_shift < 1 || p->g_shift > 15)
		bad = "g must be 2^-k with 1 <= k <= 15 (scaled form of [DCTCP] section 4)";
	else if (p->mtu_bytes == 0)
		bad = "mtu_bytes must be positive";
	else if (p->init_cwnd_bytes != 0 && p->init_cwnd_bytes < p->mtu_bytes)
		bad = "init_cwnd_bytes must be at least one mtu_bytes";
	if (bad) {
		if (why)
			*why = bad;
		return -EINVAL;
	}
	memset(s, 0, sizeof(*s));
	s->shf = p->g_shift;
	s->mss = p->mtu_bytes;
	s->alpha = HPCCD_DCTCP_SCF;   /* DCTCP.Alpha initialised to 1 (section 3.3) */
	s->alpha_reset_on_loss = p->alpha_reset_on_loss;
	s->cwnd = p->init_cwnd_bytes ? p->init_cwnd_bytes : 10ULL * p->mtu_bytes;
	s->ssthresh = p->ssthresh_bytes ? p->ssthresh_bytes : UINT64_MAX;
	/* WindowEnd initialised to SND.UNA (section 3.3); SND.UNA = 0. */
	return 0;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

/* RFC 5681 growth: slow start below ssthresh (at most one SMSS per ACK),
 * byte-counted congestion avoidance (one SMSS per cwnd acknowledged). */
static void grow(struct hpccd_dctcp *s, uint64_t acked)
{
	if (s->cwnd < s->ssthresh) {
		s->cwnd += acked < s->mss ? acked : s->mss;
		return;
	}
	s->ca_acc += acked;
	if (s->ca_acc >= s->cwnd) {
		s->ca_acc -= s->cwnd;
		s->cwnd += s->mss;
	}
}

/* Section 4: ScaledM = SCF x BytesMarked / BytesAcked;
 * if (Alpha >> SHF) == 0 then Alpha = 0;
 * Alpha += (ScaledM >> SHF) - (Alpha >> SHF); clamp at SCF. */
static void update_alpha(struct hpccd_dctcp *s)
{
	/* nothing marked: ScaledM is 0 without the division (BytesMarked
	 * grows only with BytesAcked, so a nonzero one has a nonzero
	 * divisor); a window of one packet, as each of thousands of flows
	 * has, runs this on every ACK (docs/transport.md "Flows") */
	uint64_t scaled_m = s->bytes_marked ?
		((uint64_t)HPCCD_DCTCP_SCF * s->bytes_marked) / s->bytes_acked : 0;
	int64_t a = s->alpha;

	if ((a >> s->shf) == 0)
		a = 0;
	a += (int64_t)(scaled_m >> s->shf) - (a >> s->shf);
	if (a > (int64_t)HPCCD_DCTCP_SCF)
		a = HPCCD_DCTCP_SCF;
	if (a < 0)
		a = 0;
	s->alpha = (uint32_t)a;
}

static void react_to_loss(struct hpccd_dctcp *s, int loss, uint64_t snd_nxt)
{
	uint64_t flight = snd_nxt > s->snd_una ? snd_nxt - s->snd_una : 0;
	uint64_t half = max_u64(flight / 2, 2ULL * s->mss); /* RFC 5681 eq. (4) */

	if (loss == HPCCD_LOSS_RTO) {
		/* Section 3.4: on a timeout cwnd is the loss window (1 SMSS),
		 * regardless of earlier reductions in this window. */
		s->ssthresh = half;
		s->cwnd = s->mss;
		s->after_rto = 1;
		s->n_rtos++;
	} else if (s->snd_una >= s->reduce_end) {
		/* Section 3.4: as conventional TCP, once per window of data
		 * across all loss signals (and ECN reductions). */
		s->ssthresh = half;
		s->cwnd = half;
		s->after_rto = 0;
		s->n_fast_losses++;
	} else {
		return;
	}
	s->ca_acc = 0;
	s->reduce_end = snd_nxt;
	if (s->alpha_reset_on_loss)
		s->alpha = HPCCD_DCTCP_SCF;   /* section 4: MAY reset on loss */
}

void hpccd_dctcp_on_ack(struct hpccd_dctcp *s, uint64_t ack, uint64_t snd_nxt,
			int ece, int loss)
{
	/* step 1: BytesAcked = SEG.ACK - SND.UNA (only acceptable ACKs move) */
	uint64_t acked = ack > s->snd_una ? ack - s->snd_una : 0;

	s->bytes_acked += acked;                  /* step 2 */
	if (ece)
		s->bytes_marked += acked;         /* step 3 */
	s->snd_una += acked;
	if (s->after_rto && s->snd_una >= s->reduce_end)
		s->after_rto = 0;
	/* Growth pauses while an ECE or fast-loss cut is being absorbed (the
	 * window of data outstanding at the cut); after a timeout cwnd = 1 MSS
	 * < ssthresh and slow start resumes at once (RFC 5681 section 3.1). */
	if (acked && !ece && (s->snd_una >= s->reduce_end || s->after_rto))
		grow(s, acked);

	if (ack > s->window_end) {                /* step 4 */
		int congested = s->bytes_marked != 0;

		update_alpha(s);                  /* steps 5-6 */
		s->window_end = snd_nxt;          /* step 7 */
		s->bytes_acked = 0;               /* step 8 */
		s->bytes_marked = 0;
		/* step 9: cwnd = cwnd (1 - alpha/2), only for a window that
		 * saw congestion and at most once per window of data (section
		 * 3.3, last paragraph, as RFC 3168). */
		if (congested && s->snd_una >= s->reduce_end) {
			uint64_t cut = (s->cwnd * s->alpha) >> (HPCCD_DCTCP_SCF_SHIFT + 1);

			/* Floor of 2 SMSS, but a cut never raises cwnd (it may
			 * be 1 SMSS after a timeout). */
			s->cwnd = max_u64(s->cwnd - cut,
					  s->cwnd < 2ULL * s->mss ? s->cwnd : 2ULL * s->mss);
			s->ssthresh = s->cwnd;
			s->ca_acc = 0;
			s->reduce_end = snd_nxt;
			s->n_ece_reductions++;
		}
	}
	if (loss != HPCCD_LOSS_NONE)
		react_to_loss(s, loss, snd_nxt);
}

int hpccd_dctcp_run(struct hpccd_dctcp *s, const struct hpccd_dctcp_event *ev,
		    struct hpccd_dctcp_out *out, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (ev[i].loss > HPCCD_LOSS_RTO)
			return -EINVAL;
		hpccd_dctcp_on_ack(s, ev[i].ack, ev[i].snd_nxt, ev[i].ece != 0,
				   (int)ev[i].loss);
		out[i].cwnd_bytes = s->cwnd;
		out[i].alpha = (double)s->alpha / HPCCD_DCTCP_SCF;
	}
	return 0;
}

/* ---- receiver: DCTCP.CE state machine (section 3.2, Figure 1) ---- */

int hpccd_dctcp_rx_init(struct hpccd_dctcp_rx *r, uint32_t m)
{
	if (m == 0)
		return -EINVAL;
	memset(r, 0, sizeof(*r));
	r->m = m;
	return 0;
}

uint32_t hpccd_dctcp_rx_on_packet(struct hpccd_dctcp_rx *r, int ce,
				  uint64_t ack_seq, struct hpccd_ack_req out[2])
{
	uint32_t n = 0;

	ce = ce != 0;
	if ((uint32_t)ce != r->ce) {
		/* Rules 1 and 2: the state changes, ACK immediately.  First
		 * acknowledge what arrived in the old state with the old ECE,
		 * so the sender's BytesMarked stays exact. */
		if (r->pending) {
			out[n].ack_seq = r->last_ack_seq;
			out[n].ece = r->ce;
			n++;
		}
		r->ce = (uint32_t)ce;
		out[n].ack_seq = ack_seq;
		out[n].ece = r->ce;
		n++;
		r->pending = 0;
	} else if (++r->pending >= r->m) {
		/* Rule 3: one ACK every m packets, ECE = DCTCP.CE. */
		out[n].ack_seq = ack_seq;
		out[n].ece = r->ce;
		n++;
		r->pending = 0;
	}
	r->last_ack_seq = ack_seq;
	return n;
}

uint32_t hpccd_dctcp_rx_flush(struct hpccd_dctcp_rx *r, struct hpccd_ack_req *out)
{
	if (!r->pending)
		return 0;
	out->ack_seq = r->last_ack_seq;
	out->ece = r->ce;
	r->pending = 0;
	return 1;
}
