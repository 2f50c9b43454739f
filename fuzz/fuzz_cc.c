// SPDX-License-Identifier: BSD-2-Clause
/*
 * libFuzzer harness: the congestion-control core (include/hpccd/cc.h) -
 * HPCC, Rx-HPCC, DCTCP (sender and receiver), LDCP, DCQCN (reaction and
 * notification points, switch marking) and TIMELY - driven by event
 * sequences decoded from the input.
 *
 * Input: byte 0 picks the algorithm (bit 2 clear: low 2 bits, HPCC,
 * Rx-HPCC, DCTCP, LDCP; bit 2 set: bit 0, DCQCN or TIMELY) and the
 * parameter domain (bit 7); then the parameters; then events until the
 * input ends (at most MAX_EVENTS).  Every field comes from fuzz_rd (zeroes
 * past the end).
 *
 * Two parameter domains:
 *  - "lab" (bit 7 clear): every parameter in a physical range (T from 1 ns
 *    to 1 s, rates 1 Mbit/s to 1.6 Tbit/s, MTU up to 64 KiB, ...), events
 *    as a transport produces them (time and counters move forward by steps
 *    below 2^32, sometimes backwards, as after a switch restart).  Here the
 *    documented invariants are checked after every event:
 *      HPCC/Rx-HPCC: W and W^c in [w_min, w_max] (docs/algorithms.md
 *        "Window bounds"), U finite and >= 0 (no NaN at tau = 0), the rate
 *        W x 8e9 / T finite and > 0, inc_stage <= maxStage, W^c = W after
 *        a sender update, a bad hop count refused with the state untouched;
 *      DCTCP: alpha in [0, SCF], cwnd >= 1 SMSS, a congestion cut at most
 *        cwnd x alpha / 2 and never below min(cwnd, 2 SMSS), SND.UNA the
 *        highest ACK; the receiver's CE machine sends 0..2 ACKs, two only
 *        around a CE change and with different ECE, and never holds m
 *        packets unacknowledged;
 *      LDCP: cw finite and >= gamma, cw = IW throughout fast start, no way
 *        back to fast start, the sub-packet timer RTT / cw only below one
 *        packet, exactly one ECN-capable packet in the first RTT;
 *      DCQCN: min_rate <= RC <= RT <= line rate, alpha in [0, 1], the
 *        rates never fall without a CNP, the counters start over at a
 *        CNP, no timer armed before the first CNP and none in the past
 *        after one; the NP sends at most one CNP per N, at once for a
 *        mark outside the window, and holds a mark inside it until
 *        last + N; the marking probability in [0, 1] and non-decreasing
 *        in the queue, Kmin <= Kmax for every bandwidth;
 *      TIMELY: min_rate <= rate <= line rate, rtt_diff finite, the rate
 *        moves in the direction Algorithm 1's branch says (up below
 *        T_low and for a gradient <= 0, down above T_high and for a
 *        positive one), the HAI streak counts negative gradients.
 *  - "raw" (bit 7 set): parameters are raw bit patterns (NaN, infinities,
 *    denormals, 2^64 - 1) and event fields raw 64-bit values.  init must
 *    accept them or refuse them with -EINVAL and a reason; what it accepts
 *    must run without a sanitizer report (and in bounded time: DCQCN's
 *    timer catch-up over any gap), with HPCC's window still in
 *    [w_min, w_max], DCTCP's alpha in [0, SCF], DCQCN's and TIMELY's
 *    rates within their bounds.
 *
 * In both domains the batch entry points (hpccd_*_run, which the replay
 * tool and the Python API use) run the same events on a second state and
 * must give the same outputs bit for bit and the same final state (the
 * "same events, same bits" promise of cc.h).
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hpccd/cc.h"

#include "fuzz_common.h"

#define MAX_EVENTS 512

static double frac16(struct fuzz_rd *r)          /* (0, 1] */
{
	return ((double)fuzz_u16(r) + 1) / 65536.0;
}

static double open_frac16(struct fuzz_rd *r)     /* (0, 1) */
{
	return ((double)(fuzz_u16(r) % 65535) + 1) / 65536.0;
}

static uint64_t lab_rate(struct fuzz_rd *r)      /* 1 Mbit/s .. 1.6 Tbit/s */
{
	return 1000000ULL * (1 + fuzz_u32(r) % 1600000);
}

/* ---- HPCC and Rx-HPCC ------------------------------------------------------ */

static int same_double(double a, double b)
{
	return memcmp(&a, &b, sizeof(a)) == 0;
}

static void hpcc_check(const struct hpccd_hpcc *s, int lab)
{
	FUZZ_CHECK(s->W >= s->w_min && s->W <= s->w_max);
	FUZZ_CHECK(s->Wc >= s->w_min && s->Wc <= s->w_max);
	if (!lab)
		return;
	FUZZ_CHECK(isfinite(s->U) && s->U >= 0);
	FUZZ_CHECK(isfinite(hpccd_hpcc_rate_bps(s)) && hpccd_hpcc_rate_bps(s) > 0);
	FUZZ_CHECK(s->inc_stage <= s->max_stage);
	FUZZ_CHECK(s->n_hops <= HPCCD_INT_MAX_HOPS);
}

static void fuzz_hpcc(struct fuzz_rd *r, uint32_t mode, int lab)
{
	static struct hpccd_hpcc_event ev[MAX_EVENTS];
	static struct hpccd_hpcc_out out[MAX_EVENTS];
	struct hpccd_hpcc_params p;
	struct hpccd_hpcc a, b;
	uint64_t ts[HPCCD_INT_MAX_HOPS] = {0}, tx[HPCCD_INT_MAX_HOPS] = {0};
	uint64_t seq = 0, now = 0;
	const char *why = NULL;
	size_t n = 0, i;
	int rc, want_rc = 0;

	hpccd_hpcc_params_default(&p);
	if (lab) {
		uint8_t opt = fuzz_u8(r);

		p.T_ns = 1 + fuzz_u32(r) % 1000000000;
		p.eta = frac16(r);
		p.max_stage = fuzz_u8(r);
		p.N_flows = 1 + fuzz_u16(r);
		p.line_rate_bps = lab_rate(r);
		p.mtu_bytes = 1 + fuzz_u16(r);
		p.u_init = fuzz_u16(r) / 4096.0;
		p.w_ai_bytes = opt & 1 ? fuzz_u32(r) : 0;
		p.w_init_bytes = opt & 2 ? 1.0 + fuzz_u32(r) : 0;
		p.w_min_bytes = opt & 4 ? 1.0 + fuzz_u32(r) : 0;
		p.w_max_bytes = opt & 8 ? 1.0 + fuzz_u32(r) : 0;
	} else {
		p.T_ns = fuzz_raw_double(r);
		p.eta = fuzz_raw_double(r);
		p.max_stage = fuzz_u32(r);
		p.N_flows = fuzz_u32(r);
		p.w_ai_bytes = fuzz_raw_double(r);
		p.line_rate_bps = fuzz_u64(r);
		p.mtu_bytes = fuzz_u32(r);
		p.w_init_bytes = fuzz_raw_double(r);
		p.w_min_bytes = fuzz_raw_double(r);
		p.w_max_bytes = fuzz_raw_double(r);
		p.u_init = fuzz_raw_double(r);
	}
	rc = hpccd_hpcc_init(&a, &p, mode, &why);
	if (rc) {
		FUZZ_CHECK(rc == -EINVAL && why != NULL && *why);
		return;
	}
	FUZZ_CHECK(hpccd_hpcc_init(&b, &p, mode, NULL) == 0);
	hpcc_check(&a, lab);

	while (r->n && n < MAX_EVENTS) {
		struct hpccd_hpcc_event *e = &ev[n];
		struct hpccd_hpcc before;
		uint8_t k = fuzz_u8(r), f = fuzz_u8(r);
		uint32_t h;

		memset(e, 0, sizeof(*e));
		e->n_hops = k & 0xf;                 /* 9..15: refused */
		e->path_id_valid = (k >> 4) & 1;
		e->path_id = (k >> 5) & 3;           /* few ids: they repeat */
		if (lab) {
			seq += fuzz_u16(r);
			e->seq = seq;
			e->snd_nxt = seq + fuzz_u32(r);
			now += f & 1 ? fuzz_u32(r) : fuzz_u16(r);
			e->now_ns = now;
			e->active_flows = f & 2 ? fuzz_u16(r) : 0;
		} else {
			e->seq = fuzz_u64(r);
			e->snd_nxt = fuzz_u64(r);
			e->now_ns = fuzz_u64(r);
			e->active_flows = fuzz_u16(r);
		}
		for (h = 0; h < e->n_hops && h < HPCCD_INT_MAX_HOPS; h++) {
			struct hpccd_int_rec *x = &e->hops[h];
			uint8_t hk = fuzz_u8(r);

			if (lab) {
				/* forward steps; bit 0: a backward jump (restart) */
				if (hk & 1)
					ts[h] -= ts[h] < 100000 ? ts[h] : 100000;
				else
					ts[h] += hk & 2 ? fuzz_u32(r) : fuzz_u16(r);
				if (hk & 4)
					tx[h] = fuzz_u16(r);
				else
					tx[h] += hk & 8 ? fuzz_u32(r) : fuzz_u16(r);
				x->ts_ns = ts[h];
				x->tx_bytes = tx[h];
				x->qlen_bytes = hk & 16 ? fuzz_u32(r) : fuzz_u16(r);
				x->bw_bps = (uint64_t)hpccd_int_speed_mbps(fuzz_u8(r) % 32) * 1000000;
			} else {
				x->ts_ns = fuzz_u64(r);
				x->tx_bytes = fuzz_u64(r);
				x->qlen_bytes = fuzz_u64(r);
				x->bw_bps = fuzz_u64(r);
			}
		}
		before = a;
		if (mode == HPCCD_ALGO_RXHPCC) {
			if (e->active_flows)
				hpccd_hpcc_set_active_flows(&a, e->active_flows);
			rc = hpccd_hpcc_new_int(&a, e->now_ns, e->path_id, e->path_id_valid,
						e->hops, e->n_hops);
		} else {
			rc = hpccd_hpcc_new_ack(&a, e->seq, e->snd_nxt, e->path_id,
						e->path_id_valid, e->hops, e->n_hops);
		}
		n++;
		if (e->n_hops > HPCCD_INT_MAX_HOPS) {
			FUZZ_CHECK(rc == -E2BIG);
			if (mode == HPCCD_ALGO_HPCC)
				FUZZ_CHECK(memcmp(&before, &a, sizeof(a)) == 0);
			want_rc = -E2BIG;
			break;                       /* the batch stops here too */
		}
		FUZZ_CHECK(rc == 0 || rc == 1);
		if (rc == 1 && mode == HPCCD_ALGO_HPCC)
			FUZZ_CHECK(same_double(a.Wc, a.W));
		if (mode == HPCCD_ALGO_RXHPCC)
			FUZZ_CHECK(a.n_notify == before.n_notify + (uint64_t)rc);
		out[n - 1].W_bytes = a.W;
		out[n - 1].Wc_bytes = a.Wc;
		out[n - 1].U = a.U;
		out[n - 1].flag = (uint32_t)rc;
		hpcc_check(&a, lab);
	}

	/* The batch entry point on the same events: the same bits. */
	{
		struct hpccd_hpcc_out *o = calloc(n ? n : 1, sizeof(*o));

		FUZZ_CHECK(o != NULL);
		rc = hpccd_hpcc_run(&b, ev, o, n);
		FUZZ_CHECK(rc == want_rc);
		for (i = 0; i < n - (want_rc ? 1 : 0); i++) {
			FUZZ_CHECK(same_double(o[i].W_bytes, out[i].W_bytes));
			FUZZ_CHECK(same_double(o[i].Wc_bytes, out[i].Wc_bytes));
			FUZZ_CHECK(same_double(o[i].U, out[i].U));
			FUZZ_CHECK(o[i].flag == out[i].flag);
		}
		FUZZ_CHECK(memcmp(&a, &b, sizeof(a)) == 0);
		free(o);
	}
}

/* ---- DCTCP ----------------------------------------------------------------- */

static void fuzz_dctcp_rx(struct fuzz_rd *r)
{
	struct hpccd_dctcp_rx rx;
	struct hpccd_ack_req out[2];
	uint32_t m = fuzz_u8(r), k, nacks, prev_ce;
	uint64_t seq = 0;

	if (hpccd_dctcp_rx_init(&rx, m) < 0) {
		FUZZ_CHECK(m == 0);
		return;
	}
	while (r->n) {
		uint8_t b = fuzz_u8(r);

		if (b == 0xff) {                     /* the delayed-ACK timer */
			uint32_t pend = rx.pending;

			nacks = hpccd_dctcp_rx_flush(&rx, out);
			FUZZ_CHECK(nacks == (pend ? 1u : 0u) && rx.pending == 0);
			if (nacks)
				FUZZ_CHECK(out[0].ack_seq == seq && out[0].ece == rx.ce);
			continue;
		}
		prev_ce = rx.ce;
		seq += 1 + (b >> 1);
		nacks = hpccd_dctcp_rx_on_packet(&rx, b & 1, seq, out);
		FUZZ_CHECK(nacks <= 2);
		FUZZ_CHECK(rx.pending < rx.m);
		FUZZ_CHECK(rx.ce == (b & 1u));
		if ((b & 1u) != prev_ce) {
			FUZZ_CHECK(nacks >= 1);
			FUZZ_CHECK(out[nacks - 1].ece == (b & 1u) && out[nacks - 1].ack_seq == seq);
			if (nacks == 2)
				FUZZ_CHECK(out[0].ece == prev_ce && out[0].ack_seq < seq);
		} else {
			FUZZ_CHECK(nacks <= 1);
			for (k = 0; k < nacks; k++)
				FUZZ_CHECK(out[k].ece == rx.ce && out[k].ack_seq == seq);
		}
	}
}

static void fuzz_dctcp(struct fuzz_rd *r, int lab)
{
	static struct hpccd_dctcp_event ev[MAX_EVENTS];
	static struct hpccd_dctcp_out out[MAX_EVENTS];
	struct hpccd_dctcp_params p;
	struct hpccd_dctcp a, b;
	const char *why = NULL;
	uint64_t ack = 0, nxt = 0, top = 0;
	size_t n = 0, i;
	int rc, want_rc = 0;

	hpccd_dctcp_params_default(&p);
	if (lab) {
		uint8_t opt = fuzz_u8(r);

		p.g_shift = 1 + fuzz_u8(r) % 15;
		p.mtu_bytes = 1 + fuzz_u16(r);
		p.init_cwnd_bytes = opt & 1 ? (uint64_t)p.mtu_bytes * (1 + fuzz_u8(r)) : 0;
		p.ssthresh_bytes = opt & 2 ? fuzz_u32(r) : 0;
		p.alpha_reset_on_loss = (opt >> 2) & 1;
		if (opt & 8) {                       /* the receiver's state machine instead */
			fuzz_dctcp_rx(r);
			return;
		}
	} else {
		p.g_shift = fuzz_u32(r);
		p.mtu_bytes = fuzz_u32(r);
		p.init_cwnd_bytes = fuzz_u64(r);
		p.ssthresh_bytes = fuzz_u64(r);
		p.alpha_reset_on_loss = fuzz_u32(r);
	}
	rc = hpccd_dctcp_init(&a, &p, &why);
	if (rc) {
		FUZZ_CHECK(rc == -EINVAL && why != NULL && *why);
		return;
	}
	FUZZ_CHECK(hpccd_dctcp_init(&b, &p, NULL) == 0);

	while (r->n && n < MAX_EVENTS) {
		struct hpccd_dctcp_event *e = &ev[n];
		uint64_t cwnd0 = a.cwnd, red0 = a.n_ece_reductions;
		uint8_t k = fuzz_u8(r);

		memset(e, 0, sizeof(*e));
		e->ece = k & 1;
		e->loss = (k >> 1) & 3;               /* 3: refused by the batch */
		if (lab) {
			/* forward by up to a window, or a stale (old) ACK */
			if (k & 8)
				ack -= ack < a.mss ? ack : a.mss;
			else
				ack += (uint64_t)fuzz_u8(r) * (a.mss / 4 + 1);
			nxt += (uint64_t)fuzz_u8(r) * a.mss;
			if (nxt < ack)
				nxt = ack;
			e->ack = ack;
			e->snd_nxt = nxt;
		} else {
			e->ack = fuzz_u64(r);
			e->snd_nxt = fuzz_u64(r);
		}
		n++;
		if (e->loss > HPCCD_LOSS_RTO) {
			want_rc = -EINVAL;
			break;
		}
		hpccd_dctcp_on_ack(&a, e->ack, e->snd_nxt, e->ece, (int)e->loss);
		if (e->ack > top)
			top = e->ack;
		out[n - 1].cwnd_bytes = a.cwnd;
		FUZZ_CHECK(a.alpha <= HPCCD_DCTCP_SCF);
		if (!lab)
			continue;
		FUZZ_CHECK(a.snd_una == top);
		FUZZ_CHECK(a.cwnd >= a.mss);
		if (a.n_ece_reductions != red0 && e->loss == HPCCD_LOSS_NONE) {
			/* cwnd before the cut is cwnd0, or cwnd0 + at most one
			 * SMSS of growth earlier in the same call. */
			unsigned __int128 hi = (unsigned __int128)(cwnd0 + a.mss) *
					       (2 * HPCCD_DCTCP_SCF - a.alpha);
			FUZZ_CHECK(a.cwnd <= cwnd0 + a.mss);
			FUZZ_CHECK(a.cwnd <= 2ULL * a.mss ||
				   (unsigned __int128)a.cwnd * 2 * HPCCD_DCTCP_SCF <=
					   hi + 2 * HPCCD_DCTCP_SCF);
			FUZZ_CHECK(a.cwnd >= (cwnd0 < 2ULL * a.mss ? cwnd0 : 2ULL * a.mss));
		}
	}

	{
		struct hpccd_dctcp_out *o = calloc(n ? n : 1, sizeof(*o));

		FUZZ_CHECK(o != NULL);
		rc = hpccd_dctcp_run(&b, ev, o, n);
		FUZZ_CHECK(rc == want_rc);
		for (i = 0; i < n - (want_rc ? 1 : 0); i++)
			FUZZ_CHECK(o[i].cwnd_bytes == out[i].cwnd_bytes);
		FUZZ_CHECK(memcmp(&a, &b, sizeof(a)) == 0);
		free(o);
	}
}

/* ---- LDCP ------------------------------------------------------------------ */

static void fuzz_ldcp(struct fuzz_rd *r, int lab)
{
	static struct hpccd_ldcp_event ev[MAX_EVENTS];
	static struct hpccd_ldcp_out out[MAX_EVENTS];
	struct hpccd_ldcp_params p;
	struct hpccd_ldcp a, b;
	const char *why = NULL;
	uint64_t now = 0, first, k;
	size_t n = 0, i;
	int rc;

	hpccd_ldcp_params_default(&p);
	if (lab) {
		uint8_t opt = fuzz_u8(r);

		p.alpha = frac16(r);
		p.beta = frac16(r);
		p.gamma = open_frac16(r);
		p.eta = open_frac16(r);
		p.iw_pkts = opt & 1 ? 1 + fuzz_u16(r) : 0;
		p.line_rate_bps = lab_rate(r);
		p.rtt_ns = 1 + fuzz_u32(r) % 1000000000;
		p.mtu_bytes = 1 + fuzz_u16(r);
	} else {
		p.alpha = fuzz_raw_double(r);
		p.beta = fuzz_raw_double(r);
		p.gamma = fuzz_raw_double(r);
		p.eta = fuzz_raw_double(r);
		p.iw_pkts = fuzz_raw_double(r);
		p.line_rate_bps = fuzz_u64(r);
		p.rtt_ns = fuzz_u64(r);
		p.mtu_bytes = fuzz_u32(r);
	}
	rc = hpccd_ldcp_init(&a, &p, &why);
	if (rc) {
		FUZZ_CHECK(rc == -EINVAL && why != NULL && *why);
		return;
	}
	FUZZ_CHECK(hpccd_ldcp_init(&b, &p, NULL) == 0);
	FUZZ_CHECK(a.iw >= 1 && a.cw == a.iw && a.stage == HPCCD_LDCP_FAST_START);

	/* First-RTT marking (section 3.1): of the first min(IW, message)
	 * packets only the last is ECN-capable; later ones all are. */
	{
		uint64_t msg = fuzz_u16(r);

		first = (uint64_t)a.iw;
		if (msg && msg < first)
			first = msg;
		FUZZ_CHECK(hpccd_ldcp_pkt_ect(&a, first - 1, msg) == 1);
		if (first >= 2)
			FUZZ_CHECK(hpccd_ldcp_pkt_ect(&a, first - 2, msg) == 0);
		FUZZ_CHECK(hpccd_ldcp_pkt_ect(&a, first, msg) == 1);
		k = fuzz_u64(r);
		FUZZ_CHECK(hpccd_ldcp_pkt_ect(&a, k, msg) == (k >= first - 1));
	}

	while (r->n && n < MAX_EVENTS) {
		struct hpccd_ldcp_event *e = &ev[n];
		uint32_t stage0 = a.stage;
		uint8_t f = fuzz_u8(r);

		memset(e, 0, sizeof(*e));
		e->ece = f & 1;
		e->loss = (f >> 1) & 1;
		if (lab) {
			e->acked_pkts = f & 4 ? fuzz_u8(r) : 1;
			now += f & 8 ? fuzz_u32(r) : 0;   /* 0: no clock */
			e->now_ns = f & 8 ? now : 0;
		} else {
			e->acked_pkts = fuzz_u32(r) % 4096;  /* the cw < 1 loop is per packet */
			e->now_ns = fuzz_u64(r);
		}
		hpccd_ldcp_on_ack(&a, e->acked_pkts, e->ece, e->loss, e->now_ns);
		out[n].cw_pkts = a.cw;
		out[n].stage = a.stage;
		n++;
		(void)hpccd_ldcp_tx_interval_ns(&a, fuzz_u32(r));
		if (!lab)
			continue;
		FUZZ_CHECK(isfinite(a.cw) && a.cw >= a.gamma);
		FUZZ_CHECK(a.stage == HPCCD_LDCP_FAST_START || a.stage == HPCCD_LDCP_STABLE);
		FUZZ_CHECK(!(stage0 == HPCCD_LDCP_STABLE && a.stage != HPCCD_LDCP_STABLE));
		if (a.stage == HPCCD_LDCP_FAST_START)
			FUZZ_CHECK(a.cw == a.iw);
		if (a.cw >= 1) {
			FUZZ_CHECK(hpccd_ldcp_tx_interval_ns(&a, 0) == 0);
			FUZZ_CHECK(e->now_ns == 0 || a.next_tx_ns == 0);
		} else {
			FUZZ_CHECK(hpccd_ldcp_tx_interval_ns(&a, 0) >= a.rtt_ns);
			if (e->now_ns)
				FUZZ_CHECK(a.next_tx_ns >= e->now_ns + a.rtt_ns);
		}
	}

	{
		struct hpccd_ldcp_out *o = calloc(n ? n : 1, sizeof(*o));

		FUZZ_CHECK(o != NULL);
		FUZZ_CHECK(hpccd_ldcp_run(&b, ev, o, n) == 0);
		for (i = 0; i < n; i++)
			FUZZ_CHECK(same_double(o[i].cw_pkts, out[i].cw_pkts) &&
				   o[i].stage == out[i].stage);
		FUZZ_CHECK(memcmp(&a, &b, sizeof(a)) == 0);
		free(o);
	}
}

/* ---- DCQCN ------------------------------------------------------------------ */

static void dcqcn_check(const struct hpccd_dcqcn *s)
{
	FUZZ_CHECK(s->RC >= s->min_rate && s->RC <= s->RT && s->RT <= s->line_rate);
	FUZZ_CHECK(s->alpha >= 0 && s->alpha <= 1);
	FUZZ_CHECK((s->stage == HPCCD_DCQCN_LINE_RATE) == (s->n_cnp == 0));
	if (s->n_cnp == 0)
		FUZZ_CHECK(hpccd_dcqcn_next_timer_ns(s) == 0 && s->RC == s->line_rate);
	else
		FUZZ_CHECK(s->next_alpha_ns > s->now_ns || s->next_alpha_ns == UINT64_MAX);
}

static void fuzz_dcqcn(struct fuzz_rd *r, int lab)
{
	static struct hpccd_dcqcn_event ev[MAX_EVENTS];
	static struct hpccd_dcqcn_out out[MAX_EVENTS];
	struct hpccd_dcqcn_params p;
	struct hpccd_dcqcn a, b;
	struct hpccd_dcqcn_np np;
	struct hpccd_dcqcn_ecn e;
	const char *why = NULL;
	uint64_t now = 0, q;
	size_t n = 0, i;
	int rc;

	hpccd_dcqcn_params_default(&p);
	if (lab) {
		uint8_t opt = fuzz_u8(r);

		p.g = frac16(r);
		p.K_ns = 1 + fuzz_u32(r) % 1000000000;
		p.T_ns = 1 + fuzz_u32(r) % 1000000000;
		p.B_bytes = 1 + fuzz_u32(r);
		p.F = 1 + fuzz_u16(r) % 1000;
		p.line_rate_bps = lab_rate(r);
		p.R_AI_bps = (double)p.line_rate_bps / 1048576.0 * (1 + fuzz_u16(r));
		p.R_HAI_bps = opt & 1 ? (double)p.line_rate_bps / 1048576.0 * (1 + fuzz_u16(r)) : 0;
		p.min_rate_bps = fmin((double)p.line_rate_bps, 1.0 + fuzz_u32(r));
		p.alpha_init = fuzz_u16(r) / 65535.0;
	} else {
		p.g = fuzz_raw_double(r);
		p.K_ns = fuzz_u64(r);
		p.T_ns = fuzz_u64(r);
		p.B_bytes = fuzz_u64(r);
		p.F = fuzz_u32(r);
		p.R_AI_bps = fuzz_raw_double(r);
		p.R_HAI_bps = fuzz_raw_double(r);
		p.line_rate_bps = fuzz_u64(r);
		p.min_rate_bps = fuzz_raw_double(r);
		p.alpha_init = fuzz_raw_double(r);
	}
	/* The switch side, for the bandwidth at hand: Kmin <= Kmax, the
	 * marking probability in [0, 1] and non-decreasing in the queue. */
	hpccd_dcqcn_ecn_for_rate(p.line_rate_bps, &e);
	FUZZ_CHECK(e.kmin_bytes <= e.kmax_bytes);
	q = lab ? fuzz_u32(r) : fuzz_u64(r);
	{
		double p0 = hpccd_dcqcn_mark_prob(&e, q);
		double p1 = hpccd_dcqcn_mark_prob(&e, q == UINT64_MAX ? q : q + 1);

		FUZZ_CHECK(p0 >= 0 && p0 <= 1 && p0 <= p1);
		FUZZ_CHECK((q <= e.kmin_bytes) == (p0 == 0) || e.kmin_bytes == e.kmax_bytes);
	}

	rc = hpccd_dcqcn_init(&a, &p, &why);
	if (rc) {
		FUZZ_CHECK(rc == -EINVAL && why != NULL && *why);
		return;
	}
	FUZZ_CHECK(hpccd_dcqcn_init(&b, &p, NULL) == 0);
	dcqcn_check(&a);
	hpccd_dcqcn_np_init(&np, lab ? fuzz_u32(r) % 1000000000 : fuzz_u64(r));

	while (r->n && n < MAX_EVENTS) {
		struct hpccd_dcqcn_event *x = &ev[n];
		double rc0 = a.RC, rt0 = a.RT;
		uint64_t last0 = np.last_cnp_ns;
		uint32_t sent0 = np.sent, cnp;
		uint8_t f = fuzz_u8(r);

		memset(x, 0, sizeof(*x));
		if (lab) {
			now += f & 1 ? fuzz_u32(r) : fuzz_u16(r);
			x->tx_bytes = f & 2 ? fuzz_u32(r) : fuzz_u16(r);
		} else {
			now = fuzz_u64(r);
			x->tx_bytes = fuzz_u64(r);
		}
		x->now_ns = now;
		x->cnp = (f >> 2) & 1;
		hpccd_dcqcn_on_tx(&a, x->tx_bytes, x->now_ns);
		if (x->cnp)
			hpccd_dcqcn_on_cnp(&a, x->now_ns);
		out[n].rate_bps = a.RC;
		out[n].target_bps = a.RT;
		out[n].alpha = a.alpha;
		out[n].stage = a.stage;
		n++;
		dcqcn_check(&a);
		if (x->cnp) {
			FUZZ_CHECK(a.t_count == 0 && a.bc_count == 0 && a.bytes == 0);
			FUZZ_CHECK(a.stage == HPCCD_DCQCN_FAST_RECOVERY);
		} else {
			FUZZ_CHECK(a.RC >= rc0 && a.RT >= rt0);   /* no cut without a CNP */
		}

		/* The notification point, on the same clock (f bit 3: CE). */
		if (f & 16) {
			cnp = hpccd_dcqcn_np_poll(&np, now);
			FUZZ_CHECK(cnp == 0 || (sent0 && now >= last0 && now - last0 >= np.N_ns));
		} else {
			int ce = (f >> 3) & 1;
			int over = !sent0 || (now >= last0 && now - last0 >= np.N_ns);

			cnp = hpccd_dcqcn_np_on_packet(&np, ce, now);
			if (ce)
				FUZZ_CHECK(cnp == (uint32_t)over);   /* at once, or held */
			FUZZ_CHECK(cnp == 0 || over);              /* at most one per N */
		}
		if (cnp)
			FUZZ_CHECK(np.last_cnp_ns == now && !np.pending);
		if (np.pending)
			FUZZ_CHECK(hpccd_dcqcn_np_next_ns(&np) >= np.last_cnp_ns);
		else
			FUZZ_CHECK(hpccd_dcqcn_np_next_ns(&np) == 0);
	}

	{
		struct hpccd_dcqcn_out *o = calloc(n ? n : 1, sizeof(*o));

		FUZZ_CHECK(o != NULL);
		FUZZ_CHECK(hpccd_dcqcn_run(&b, ev, o, n) == 0);
		for (i = 0; i < n; i++)
			FUZZ_CHECK(same_double(o[i].rate_bps, out[i].rate_bps) &&
				   same_double(o[i].target_bps, out[i].target_bps) &&
				   same_double(o[i].alpha, out[i].alpha) &&
				   o[i].stage == out[i].stage);
		FUZZ_CHECK(memcmp(&a, &b, sizeof(a)) == 0);
		free(o);
	}
}

/* ---- TIMELY ----------------------------------------------------------------- */

static void fuzz_timely(struct fuzz_rd *r, int lab)
{
	static struct hpccd_timely_event ev[MAX_EVENTS];
	static struct hpccd_timely_out out[MAX_EVENTS];
	struct hpccd_timely_params p;
	struct hpccd_timely a, b;
	const char *why = NULL;
	size_t n = 0, i;
	int rc;

	hpccd_timely_params_default(&p);
	if (lab) {
		uint8_t opt = fuzz_u8(r);

		p.alpha = frac16(r);
		p.beta = frac16(r);
		p.delta_bps = 1.0 + fuzz_u32(r);
		p.T_low_ns = fuzz_u32(r) % 1000000000;
		p.T_high_ns = p.T_low_ns + 1 + fuzz_u32(r) % 1000000000;
		p.min_rtt_ns = 1 + fuzz_u32(r) % 1000000000;
		p.hai_N = 1 + fuzz_u8(r) % 16;
		p.hai_after = 1 + fuzz_u8(r) % 16;
		p.line_rate_bps = lab_rate(r);
		p.min_rate_bps = fmin((double)p.line_rate_bps, 1.0 + fuzz_u32(r));
		p.init_rate_bps = opt & 1 ? fmax(p.min_rate_bps,
						 fmin((double)p.line_rate_bps, 1.0 + fuzz_u64(r) % 1600000000000ULL)) : 0;
	} else {
		p.alpha = fuzz_raw_double(r);
		p.beta = fuzz_raw_double(r);
		p.delta_bps = fuzz_raw_double(r);
		p.T_low_ns = fuzz_u64(r);
		p.T_high_ns = fuzz_u64(r);
		p.min_rtt_ns = fuzz_u64(r);
		p.hai_N = fuzz_u32(r);
		p.hai_after = fuzz_u32(r);
		p.line_rate_bps = fuzz_u64(r);
		p.min_rate_bps = fuzz_raw_double(r);
		p.init_rate_bps = fuzz_raw_double(r);
	}
	rc = hpccd_timely_init(&a, &p, &why);
	if (rc) {
		FUZZ_CHECK(rc == -EINVAL && why != NULL && *why);
		return;
	}
	FUZZ_CHECK(hpccd_timely_init(&b, &p, NULL) == 0);

	while (r->n && n < MAX_EVENTS) {
		double rate0 = a.rate, rtt;
		uint32_t streak0 = a.neg_streak;
		uint8_t f = fuzz_u8(r);

		ev[n].rtt_ns = lab ? (f & 1 ? fuzz_u32(r) : fuzz_u16(r) * (uint64_t)(f >> 1)) :
				     fuzz_u64(r);
		rtt = (double)ev[n].rtt_ns;
		hpccd_timely_on_rtt(&a, ev[n].rtt_ns);
		out[n].rate_bps = a.rate;
		out[n].rtt_diff_ns = a.rtt_diff;
		out[n].gradient = a.gradient;
		out[n].hai = a.hai;
		n++;
		FUZZ_CHECK(isfinite(a.rate) && a.rate >= a.min_rate && a.rate <= a.line_rate);
		FUZZ_CHECK(isfinite(a.rtt_diff));
		FUZZ_CHECK(a.neg_streak == (a.gradient < 0 ?
			   (streak0 == UINT32_MAX ? streak0 : streak0 + 1) : 0));
		/* The direction of Algorithm 1's branch (bounds can only hold
		 * the rate where it was). */
		if (rtt < a.T_low || (rtt <= a.T_high && a.gradient <= 0))
			FUZZ_CHECK(a.rate >= fmin(rate0, a.line_rate));
		else
			FUZZ_CHECK(a.rate <= fmax(rate0, a.min_rate));
		FUZZ_CHECK(!a.hai || a.neg_streak >= a.hai_after);
	}

	{
		struct hpccd_timely_out *o = calloc(n ? n : 1, sizeof(*o));

		FUZZ_CHECK(o != NULL);
		FUZZ_CHECK(hpccd_timely_run(&b, ev, o, n) == 0);
		for (i = 0; i < n; i++)
			FUZZ_CHECK(same_double(o[i].rate_bps, out[i].rate_bps) &&
				   same_double(o[i].rtt_diff_ns, out[i].rtt_diff_ns) &&
				   same_double(o[i].gradient, out[i].gradient) &&
				   o[i].hai == out[i].hai);
		FUZZ_CHECK(memcmp(&a, &b, sizeof(a)) == 0);
		free(o);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_rd r = {data, size};
	uint8_t sel = fuzz_u8(&r);
	int lab = !(sel & 0x80);

	if (sel & 4) {
		if (sel & 1)
			fuzz_timely(&r, lab);
		else
			fuzz_dcqcn(&r, lab);
		return 0;
	}
	switch (sel & 3) {
	case 0:
		fuzz_hpcc(&r, HPCCD_ALGO_HPCC, lab);
		break;
	case 1:
		fuzz_hpcc(&r, HPCCD_ALGO_RXHPCC, lab);
		break;
	case 2:
		fuzz_dctcp(&r, lab);
		break;
	default:
		fuzz_ldcp(&r, lab);
		break;
	}
	return 0;
}
