// SPDX-License-Identifier: BSD-2-Clause
/*
 * HPCC, sender ([HPCC] section 3.2, Algorithm 1, lines 1-27) and
 * Rx-HPCC, receiver ([HPCC++2020] section 6.2 / [HPCC++2022] section 6.3.2,
 * NewINT lines 28-34).  Both share MeasureInflight and ComputeWind.
 *
 * Units: qlen and txBytes in bytes, ts in ns, B in bytes per ns
 * (bw_bps / 8e9), T in ns; U is dimensionless; windows in bytes.
 *
 * Deviations from the listing, each forced by a case the listing leaves
 * undefined (docs/algorithms.md discusses them):
 *  - a hop whose ts did not advance (or whose speed is unknown)
 *    contributes nothing to u, instead of dividing by zero;
 *  - when no hop gives u' > 0, tau is the first hop's ts delta, so U
 *    decays toward 0 on an idle path instead of freezing;
 *  - W is clamped to [w_min, w_max] each time it is computed and W^c takes
 *    the clamped W; U = 0 in the MI branch (line 13) gives w_max;
 *  - a change of pathID or of the hop count resets L (section 4.1: "throws
 *    away the existing status records of the flow").
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "hpccd/cc.h"

#define BITS_PER_BYTE_NS 8e9 /* bit/s -> bytes/ns: B = bw_bps / 8e9 */

void hpccd_hpcc_params_default(struct hpccd_hpcc_params *p)
{
	memset(p, 0, sizeof(*p));
	p->T_ns = 13000;              /* [HPCC] section 5.1 (simulations) */
	p->eta = 0.95;                /* [HPCC] section 3.3 */
	p->max_stage = 5;             /* [HPCC] section 3.3 */
	p->N_flows = 100;             /* [HPCC] section 5.1, footnote 4 */
	p->line_rate_bps = 100000000000ULL;
	p->mtu_bytes = 1000;          /* [HPCC] section 5.1: 1 KB packets */
	p->u_init = 0;
}

static int finite_pos(double x)
{
	return isfinite(x) && x > 0;
}

int hpccd_hpcc_init(struct hpccd_hpcc *s, const struct hpccd_hpcc_params *p,
		    uint32_t mode, const char **why)
{
	const char *bad = NULL;
	double w_init, w_min, w_max, w_ai;

	if (mode != HPCCD_ALGO_HPCC && mode != HPCCD_ALGO_RXHPCC)
		bad = "mode must be HPCCD_ALGO_HPCC or HPCCD_ALGO_RXHPCC";
	else if (!finite_pos(p->T_ns))
		bad = "T_ns must be a positive number";
	else if (!(p->eta > 0 && p->eta <= 1))
		bad = "eta must be in (0, 1]";
	else if (p->N_flows == 0)
		bad = "N_flows must be at least 1";
	else if (p->line_rate_bps == 0)
		bad = "line_rate_bps must be positive";
	else if (p->mtu_bytes == 0)
		bad = "mtu_bytes must be positive";
	else if (!(isfinite(p->u_init) && p->u_init >= 0))
		bad = "u_init must be a finite number >= 0";
	else if (p->w_init_bytes != 0 && !finite_pos(p->w_init_bytes))
		bad = "w_init_bytes must be positive";
	else if (p->w_min_bytes != 0 && !finite_pos(p->w_min_bytes))
		bad = "w_min_bytes must be positive";
	else if (p->w_max_bytes != 0 && !finite_pos(p->w_max_bytes))
		bad = "w_max_bytes must be positive";
	else if (!(isfinite(p->w_ai_bytes) && p->w_ai_bytes >= 0))
		bad = "w_ai_bytes must be a finite number >= 0";
	else if (p->reaction > HPCCD_HPCC_REACT_PER_ACK)
		bad = "reaction must be 0 (HPCC), 1 (per RTT) or 2 (per ACK)";
	if (bad)
		goto fail;

	/* W_init = B_NIC x T ([HPCC] section 3.2), bytes. */
	w_init = p->w_init_bytes != 0 ? p->w_init_bytes
				      : (double)p->line_rate_bps * p->T_ns / BITS_PER_BYTE_NS;
	w_min = p->w_min_bytes != 0 ? p->w_min_bytes : (double)p->mtu_bytes;
	w_max = p->w_max_bytes != 0 ? p->w_max_bytes : w_init;
	/* W_AI = W_init (1 - eta) / N ([HPCC] section 3.3, rule of thumb). */
	w_ai = p->w_ai_bytes != 0 ? p->w_ai_bytes
				  : w_init * (1 - p->eta) / (double)p->N_flows;
	if (w_min > w_max) {
		bad = "w_min_bytes must not exceed w_max_bytes";
		goto fail;
	}

	memset(s, 0, sizeof(*s));
	s->mode = mode;
	s->T = p->T_ns;
	s->inv_T = 1.0 / p->T_ns;
	s->eta = p->eta;
	s->max_stage = p->max_stage;
	s->w_init = w_init;
	s->w_min = w_min;
	s->w_max = w_max;
	s->w_ai = s->w_ai_cfg = w_ai;
	s->W = fmin(fmax(w_init, w_min), w_max);
	s->Wc = s->W;
	s->U = p->u_init;
	s->reaction = p->reaction;
	return 0;
fail:
	if (why)
		*why = bad;
	return -EINVAL;
}

/* Longest local gap over which the flow's last record still unwraps the
 * narrow counters unambiguously: half the ts wrap (the other half is room
 * for one-way delay jitter), and the time the fastest hop needs to send
 * 2^20 x 128 bytes, after which txBytes may have wrapped more than once.
 * It depends only on the speeds in L, so it is cached and recomputed when
 * one of them changes. */
static uint64_t compute_horizon(const struct hpccd_hpcc *s)
{
	double h = (double)(HPCCD_INT_TS_MASK + 1) / 2;
	uint32_t i;

	for (i = 0; i < s->n_hops; i++) {
		double wrap;

		if (!s->L[i].bw_bps)
			continue;
		wrap = (double)((HPCCD_INT_TX_MASK + 1) * HPCCD_INT_TX_UNIT) *
		       BITS_PER_BYTE_NS / (double)s->L[i].bw_bps;
		if (wrap < h)
			h = wrap;
	}
	return (uint64_t)h;
}

/* The cached horizon; 0 marks it stale (a speed in L changed). */
static uint64_t horizon(const struct hpccd_hpcc *s)
{
	return s->unwrap_horizon_ns ? s->unwrap_horizon_ns : compute_horizon(s);
}

static void record_L(struct hpccd_hpcc *s, const struct hpccd_int_rec *hops,
		     uint32_t n, uint32_t path_id)
{
	uint32_t i;

	/* Algorithm 1 line 27: L = ack.L.  1/B is cached per hop so that a
	 * steady path costs one division per hop per ACK (txRate). */
	for (i = 0; i < n; i++) {
		if (hops[i].bw_bps != s->L[i].bw_bps || !s->have_L)
			s->L_inv_B[i] = hops[i].bw_bps ?
				BITS_PER_BYTE_NS / (double)hops[i].bw_bps : 0;
		s->L[i] = hops[i];
	}
	s->n_hops = n;
	s->path_id = path_id;
	s->have_L = 1;
	s->unwrap_horizon_ns = compute_horizon(s);
}

/* int64 -> double, the conversion of lines 4-5 (round to nearest, as a
 * cast).  On baseline x86-64 (SSE2 encodings) it is the cvtsi2sdq a cast
 * compiles to, written out: for a cast gcc also emits a pxor before each
 * one, to break the dependency on the upper half of the register that
 * cvtsi2sdq leaves untouched; 3 per hop, and the hop loop is counted in
 * instructions (docs/benchmarks.md).  The dependency costs no measurable
 * time on the benchmark.  With AVX (-march=x86-64-v3 and up) the compiler
 * needs no such pxor (vcvtsi2sdq takes a separate source register), so the
 * cast is used, as with -DHPCCD_CC_SCALAR and on every other architecture
 * (tests/unit/test_hpcc_diff.py builds both ways and compares each with
 * the reference implementation). */
#if defined(__x86_64__) && defined(__SSE2__) && !defined(__AVX__) && \
	!defined(HPCCD_CC_SCALAR)
static inline double i64_to_f64(int64_t x)
{
	double d;

	__asm__("cvtsi2sdq %1, %0" : "=x"(d) : "r"(x));
	return d;
}
#else
static inline double i64_to_f64(int64_t x)
{
	return (double)x;
}
#endif

/* MeasureInflight, Algorithm 1 lines 1-10.  It also does line 27 of
 * NewAck (and the same step of NewINT), L = ack.L, hop by hop after the
 * hop's last read of L.  That is the same as record_L() afterwards: both
 * callers record these hops right after ComputeWind, which does not read
 * L, and only when the path was not reset, i.e. n_hops, path_id and have_L
 * already hold what record_L() would store.  Fusing saves a second pass
 * over the hops (docs/benchmarks.md); always_inline lets each caller get
 * a copy specialised for its branch.  The callers guarantee
 * 1 <= n <= HPCCD_INT_MAX_HOPS.
 *
 * The loop over the hops (line 3) exists twice, with the same results:
 *  - a fast path for a hop in the steady state: B unchanged and known, ts
 *    advanced, txBytes not gone back, min(qLen) < 2^63.  For such a hop the
 *    general loop below does exactly the fast path's operations (the same
 *    conversions, the same division, the same products and sums in the
 *    same order), so the bits are the same.  It is unrolled: hop 0 first
 *    (it also gives the idle-path tau), then hops 1 .. n-1 by a jump into
 *    a straight run of up to 7 hops, each addressed from the end of the
 *    arrays with constant offsets (no loop counter, no index arithmetic);
 *  - the general loop, the code of before, for every case.  The first hop
 *    that does not qualify for the fast path hands over to it, with u, tau
 *    and the bottleneck of the hops before; all the fast path's tests come
 *    before its first store, so that hop is still untouched. */
static inline __attribute__((always_inline)) double
measure_inflight(struct hpccd_hpcc *s, const struct hpccd_int_rec *ack,
		 uint32_t n)
{
	const struct hpccd_int_rec *a_end = ack + n;
	struct hpccd_int_rec *l_end = s->L + n;
	const double inv_T = s->inv_T;
	double u = 0, tau, up, dts;
	uint32_t i, best = n;
	uint64_t a_ts, a_tx, a_q, a_bw, l_ts, q, dtx;

	_Static_assert(HPCCD_INT_MAX_HOPS == 8, "the unrolled hops below");

/* Fast path of hop n - K (hop 0: K = n), lines 3-5 and its part of line
 * 27; hands over to the general loop at hop I = n - K when the hop is not
 * in the steady state.  Sets dts and up. */
#define FAST_HOP(K, I)							\
	a_bw = (a_end - (K))->bw_bps;					\
	if (__builtin_expect(a_bw != (l_end - (K))->bw_bps, 0)) {	\
		i = (I);		/* B changed */			\
		goto general;						\
	}								\
	if (__builtin_expect(a_bw == 0, 0)) {				\
		i = (I);		/* B unknown */			\
		goto general;						\
	}								\
	a_ts = (a_end - (K))->ts_ns;					\
	l_ts = (l_end - (K))->ts_ns;					\
	if (__builtin_expect(a_ts <= l_ts, 0)) {			\
		i = (I);		/* ts did not advance */	\
		goto general;						\
	}								\
	a_tx = (a_end - (K))->tx_bytes;					\
	if (__builtin_expect(__builtin_sub_overflow(a_tx,		\
			(l_end - (K))->tx_bytes, &dtx), 0)) {		\
		i = (I);		/* txBytes went back */		\
		goto general;						\
	}								\
	a_q = (a_end - (K))->qlen_bytes;				\
	q = a_q < (l_end - (K))->qlen_bytes ? a_q : (l_end - (K))->qlen_bytes; \
	if (__builtin_expect((int64_t)q < 0, 0)) {			\
		i = (I);		/* needs the unsigned conversion */ \
		goto general;						\
	}								\
	(l_end - (K))->ts_ns = a_ts;                      /* line 27 */	\
	(l_end - (K))->tx_bytes = a_tx;					\
	(l_end - (K))->qlen_bytes = a_q;				\
	dts = i64_to_f64((int64_t)(a_ts - l_ts));			\
	/* line 4: txRate = delta txBytes / delta ts (bytes/ns);	\
	 * line 5: u' = min(qLen, L.qLen)/(B T) + txRate/B,		\
	 * evaluated as (min(q)/T + txRate) x (1/B). */		\
	up = (i64_to_f64((int64_t)q) * inv_T +				\
	      i64_to_f64((int64_t)dtx) / dts) * s->L_inv_B[(size_t)n - (K)]

	FAST_HOP(n, 0);                                           /* line 3 */
	/* Idle-path rule: tau defaults to the first hop's ts delta. */
	tau = dts;
	if (up > 0) {                                             /* lines 6-7 */
		u = up;
		best = 0;
	}
#define FAST_HOP_K(K)							\
	FAST_HOP(K, n - (K));						\
	if (__builtin_expect(up > u, 0)) {                /* lines 6-7 */	\
		u = up;							\
		tau = dts;						\
		best = n - (K);						\
	}
	switch (n) {            /* into the run at hop 1 of n */
	case 8: FAST_HOP_K(7) /* fallthrough */
	case 7: FAST_HOP_K(6) /* fallthrough */
	case 6: FAST_HOP_K(5) /* fallthrough */
	case 5: FAST_HOP_K(4) /* fallthrough */
	case 4: FAST_HOP_K(3) /* fallthrough */
	case 3: FAST_HOP_K(2) /* fallthrough */
	case 2: FAST_HOP_K(1) /* fallthrough */
	default: break;         /* n = 1 */
	}
#undef FAST_HOP_K
#undef FAST_HOP
	goto done;

general:
	if (i == 0) {
		/* Idle-path rule: tau defaults to the first hop's ts delta. */
		tau = ack[0].ts_ns > s->L[0].ts_ns ?
			(double)(int64_t)(ack[0].ts_ns - s->L[0].ts_ns) : 0;
	}
	for (; i < n; i++) {                                      /* line 3 */
		struct hpccd_int_rec *l = &s->L[i];
		double tx_rate, inv_B;

		/* This hop of the ACK, read once: L[i] is written below. */
		a_ts = ack[i].ts_ns;
		a_tx = ack[i].tx_bytes;
		a_q = ack[i].qlen_bytes;
		a_bw = ack[i].bw_bps;
		/* 1/B of this ACK's hop: the cached one while B is unchanged,
		 * else computed once and cached with B for line 27 (the same
		 * expression as in record_L, so the same bits). */
		if (a_bw != l->bw_bps) {
			s->L_inv_B[i] = a_bw ? BITS_PER_BYTE_NS / (double)a_bw : 0;
			l->bw_bps = a_bw;
			s->unwrap_horizon_ns = 0;  /* recomputed when next needed */
		}
		inv_B = s->L_inv_B[i];
		if (a_ts <= l->ts_ns || a_bw == 0) {
			/* tau = 0 or unknown B: contributes nothing (no NaN). */
			if (a_bw == 0)
				s->n_bad_hops++;
			goto record;
		}
		dts = (double)(int64_t)(a_ts - l->ts_ns);
		/* line 4: txRate = delta txBytes / delta ts (bytes/ns).  A
		 * counter that went backwards (switch restart) gives 0, never
		 * a negative rate. */
		tx_rate = a_tx >= l->tx_bytes ?
			(double)(int64_t)(a_tx - l->tx_bytes) / dts : 0;
		/* line 5: u' = min(qLen, L.qLen)/(B T) + txRate/B,
		 * evaluated as (min(q)/T + txRate) x (1/B). */
		q = a_q < l->qlen_bytes ? a_q : l->qlen_bytes;
		up = ((double)q * s->inv_T + tx_rate) * inv_B;
		if (up > u) {                                     /* lines 6-7 */
			u = up;
			tau = dts;
			best = i;
		}
record:
		l->ts_ns = a_ts;                                  /* line 27 */
		l->tx_bytes = a_tx;
		l->qlen_bytes = a_q;
	}
done:
	/* line 8: if tau > T then tau = T.  Written as a min so that the
	 * compiler emits one minsd: the same value, tau never being NaN (it
	 * is 0 or a converted integer) and T > 0 (hpccd_hpcc_init). */
	tau = tau < s->T ? tau : s->T;
	/* line 9: U = (1 - tau/T) U + tau/T u */
	s->U = (1 - tau / s->T) * s->U + tau / s->T * u;
	s->bottleneck_hop = best;
	return s->U;
}

/* fmin(fmax(W, w_min), w_max) without two calls into libm (without
 * -ffast-math gcc does not inline fmin/fmax on x86-64).  The same bits for
 * every W the arithmetic can give (any number, +-0, +-inf, a quiet NaN),
 * because 0 < w_min <= w_max and neither is NaN (hpccd_hpcc_init derives
 * them from validated parameters): fmax(W, lo) is lo for a NaN W, as
 * `W > lo ? W : lo` is, and otherwise the larger value (equal values have
 * equal bits, lo being > 0); that is never NaN, so fmin(W, hi) is
 * `W < hi ? W : hi` likewise. */
static inline double clamp_w(const struct hpccd_hpcc *s, double W)
{
	W = W > s->w_min ? W : s->w_min;
	return W < s->w_max ? W : s->w_max;
}

/* ComputeWind, Algorithm 1 lines 11-20, with W clamped to [w_min, w_max].
 * Inlined so that the constant update_wc of each call site folds. */
static inline __attribute__((always_inline)) double
compute_wind(struct hpccd_hpcc *s, double U, int update_wc)
{
	double W;

	if (U >= s->eta || s->inc_stage >= s->max_stage) {       /* line 12 */
		/* line 13: W = W^c / (U/eta) + W_AI; U = 0 means no load
		 * at all: the MI step is unbounded, i.e. w_max. */
		W = U > 0 ? s->Wc / (U / s->eta) + s->w_ai : s->w_max;
		W = clamp_w(s, W);
		if (update_wc) {                                  /* lines 14-15 */
			s->inc_stage = 0;
			s->Wc = W;
			s->n_wc_updates++;
		}
	} else {
		W = s->Wc + s->w_ai;                              /* line 17 */
		W = clamp_w(s, W);
		if (update_wc) {                                  /* lines 18-19 */
			s->inc_stage++;
			s->Wc = W;
			s->n_wc_updates++;
		}
	}
	s->W = W;
	return W;
}

/* The first record of a flow, and the first after its path changed, only
 * records L (there is nothing to take a delta against). */
static int needs_reset(const struct hpccd_hpcc *s, uint32_t path_id,
		       int path_id_valid, uint32_t n_hops)
{
	return !s->have_L || n_hops != s->n_hops ||
	       (path_id_valid && path_id != s->path_id);
}

/* NewAck on the first record of a path: only L (line 27) and
 * lastUpdateSeq.  Out of line, so that nothing of the per-ACK path lives
 * across a call (which would cost callee-saved registers on every ACK). */
static __attribute__((noinline)) int
new_ack_reset(struct hpccd_hpcc *s, uint64_t snd_nxt, uint32_t path_id,
	      const struct hpccd_int_rec *hops, uint32_t n_hops)
{
	if (s->have_L)
		s->n_path_resets++;
	record_L(s, hops, n_hops, path_id);
	s->last_update_seq = snd_nxt;
	return 0;
}

int hpccd_hpcc_new_ack(struct hpccd_hpcc *s, uint64_t seq, uint64_t snd_nxt,
		       uint32_t path_id, int path_id_valid,
		       const struct hpccd_int_rec *hops, uint32_t n_hops)
{
	/* One test for both n_hops == 0 and n_hops > HPCCD_INT_MAX_HOPS. */
	if (__builtin_expect(n_hops - 1 >= HPCCD_INT_MAX_HOPS, 0)) {
		if (n_hops)
			return -E2BIG;
		s->n_events++;
		return 0;       /* no telemetry: nothing to react to */
	}
	s->n_events++;
	if (__builtin_expect(needs_reset(s, path_id, path_id_valid, n_hops), 0))
		return new_ack_reset(s, snd_nxt,
				     path_id_valid ? path_id : s->path_id,
				     hops, n_hops);
	if (seq > s->last_update_seq ||                           /* line 22 */
	    __builtin_expect(s->reaction == HPCCD_HPCC_REACT_PER_ACK, 0)) {
		/* line 24 before line 23: neither ComputeWind nor
		 * MeasureInflight reads lastUpdateSeq, and its store then
		 * needs no register kept for snd_nxt. */
		s->last_update_seq = snd_nxt;                     /* line 24 */
		compute_wind(s, measure_inflight(s, hops, n_hops), 1); /* 23 */
		return 1;
	}
	if (__builtin_expect(s->reaction == HPCCD_HPCC_REACT_PER_RTT, 0)) {
		/* the ablation of [HPCC] section 5.4 (Figure 13): no reaction
		 * between updates of W^c; U and L still follow every ACK */
		measure_inflight(s, hops, n_hops);
		return 0;
	}
	compute_wind(s, measure_inflight(s, hops, n_hops), 0);   /* line 26 */
	/* line 27, L = ack.L: done hop by hop in measure_inflight(). */
	return 0;
}

void hpccd_hpcc_set_active_flows(struct hpccd_hpcc *s, uint32_t n)
{
	s->active_flows = n;
	if (n == 0)
		s->w_ai = s->w_ai_cfg;
}

int hpccd_hpcc_new_int(struct hpccd_hpcc *s, uint64_t now_ns,
		       uint32_t path_id, int path_id_valid,
		       const struct hpccd_int_rec *hops, uint32_t n_hops)
{
	double U;
	int notify = 0;

	if (n_hops > HPCCD_INT_MAX_HOPS)
		return -E2BIG;
	s->n_events++;
	if (!path_id_valid)
		path_id = s->path_id;
	if (n_hops == 0)
		return 0;
	if (needs_reset(s, path_id, path_id_valid, n_hops)) {
		if (s->have_L)
			s->n_path_resets++;
		record_L(s, hops, n_hops, path_id);
		s->last_update_time = now_ns;
		return 0;
	}
	U = measure_inflight(s, hops, n_hops);
	/* [HPCC++2022] section 6.3.2: with the last hop as the congestion point
	 * the receiver knows N and uses W_AI = W_init (1 - eta) / N. */
	if (s->active_flows && s->bottleneck_hop == n_hops - 1)
		s->w_ai = s->w_init * (1 - s->eta) / (double)s->active_flows;
	else
		s->w_ai = s->w_ai_cfg;
	/* line 29: now > lastUpdateTime + T */
	if ((double)(int64_t)(now_ns - s->last_update_time) > s->T) {
		compute_wind(s, U, 1);                            /* line 30 */
		s->last_update_time = now_ns;                     /* line 32 */
		s->n_notify++;
		notify = 1;                                       /* line 31 */
	} else {
		compute_wind(s, U, 0);                            /* line 34 */
	}
	/* L = ack.L: done hop by hop in measure_inflight(). */
	return notify;
}

/* Decode n_hops wire records; `fresh` takes them as a new start, else each
 * narrow counter is unwrapped against the flow's last record L. */
static uint32_t decode_hops(const struct hpccd_hpcc *s, int fresh,
			    const struct hpccd_int_hop_wire *w, uint32_t n_hops,
			    struct hpccd_int_rec *out)
{
	uint32_t i;

	if (n_hops > HPCCD_INT_MAX_HOPS)
		n_hops = HPCCD_INT_MAX_HOPS;
	for (i = 0; i < n_hops; i++) {
		struct hpccd_int_fields f;
		const struct hpccd_int_rec *l = &s->L[i];

		hpccd_int_hop_unpack(&w[i], &f);
		out[i].bw_bps = (uint64_t)hpccd_int_speed_mbps(f.speed_code) * 1000000ULL;
		out[i].qlen_bytes = (uint64_t)f.qlen_units * HPCCD_INT_QLEN_UNIT;
		if (fresh) {
			out[i].ts_ns = f.ts;
			out[i].tx_bytes = (uint64_t)f.tx_units * HPCCD_INT_TX_UNIT;
			continue;
		}
		/* Modular difference against the last record: its low bits
		 * are the last raw value, so this undoes any single wrap. */
		out[i].ts_ns = l->ts_ns + ((f.ts - l->ts_ns) & HPCCD_INT_TS_MASK);
		out[i].tx_bytes = l->tx_bytes +
			(((f.tx_units - (l->tx_bytes / HPCCD_INT_TX_UNIT)) &
			  HPCCD_INT_TX_MASK) * HPCCD_INT_TX_UNIT);
	}
	return n_hops;
}

/* The record can no longer be unwrapped: too long since it was taken. */
static int record_is_stale(const struct hpccd_hpcc *s, uint64_t now_ns)
{
	return now_ns - s->last_rx_local_ns >= horizon(s);
}

uint32_t hpccd_hpcc_decode_hops(const struct hpccd_hpcc *s, uint64_t now_ns,
				const struct hpccd_int_hop_wire *w,
				uint32_t n_hops, struct hpccd_int_rec *out)
{
	int fresh = !s->have_L || n_hops != s->n_hops || record_is_stale(s, now_ns);

	return decode_hops(s, fresh, w, n_hops, out);
}

/* Shared by the two wire entry points: decode the hops of one packet for
 * this flow, starting over when the last record is too old to unwrap. */
static int decode_for_update(struct hpccd_hpcc *s, uint64_t now_ns,
			     uint32_t path_id, const struct hpccd_int_hop_wire *w,
			     uint32_t n_hops, struct hpccd_int_rec *hops)
{
	int fresh;

	if (n_hops > HPCCD_INT_MAX_HOPS)
		return -E2BIG;
	fresh = !s->have_L || n_hops != s->n_hops;
	if (!s->unwrap_horizon_ns)   /* never 0 once computed: >= 0.67 ms */
		s->unwrap_horizon_ns = compute_horizon(s);
	if (!fresh && record_is_stale(s, now_ns)) {
		/* Too long since the last record to trust the deltas: start
		 * over as on a new path, never compute a rate from them. */
		fresh = 1;
		if (path_id == s->path_id) {
			s->have_L = 0;
			s->n_stale_resets++;
		}
	}
	decode_hops(s, fresh, w, n_hops, hops);
	/* The horizon runs from the last record L, so only a packet that
	 * carries hop records (and so becomes L) restarts it. */
	if (n_hops)
		s->last_rx_local_ns = now_ns;
	return 0;
}

int hpccd_hpcc_new_ack_wire(struct hpccd_hpcc *s, uint64_t now_ns,
			    uint64_t seq, uint64_t snd_nxt, uint32_t path_id,
			    const struct hpccd_int_hop_wire *w, uint32_t n_hops)
{
	struct hpccd_int_rec hops[HPCCD_INT_MAX_HOPS];
	int r = decode_for_update(s, now_ns, path_id, w, n_hops, hops);

	return r < 0 ? r : hpccd_hpcc_new_ack(s, seq, snd_nxt, path_id, 1, hops, n_hops);
}

int hpccd_hpcc_new_int_wire(struct hpccd_hpcc *s, uint64_t now_ns,
			    uint32_t path_id, const struct hpccd_int_hop_wire *w,
			    uint32_t n_hops)
{
	struct hpccd_int_rec hops[HPCCD_INT_MAX_HOPS];
	int r = decode_for_update(s, now_ns, path_id, w, n_hops, hops);

	return r < 0 ? r : hpccd_hpcc_new_int(s, now_ns, path_id, 1, hops, n_hops);
}

double hpccd_hpcc_rate_bps(const struct hpccd_hpcc *s)
{
	return s->W * BITS_PER_BYTE_NS / s->T;   /* line 27: R = W / T */
}

int hpccd_hpcc_run(struct hpccd_hpcc *s, const struct hpccd_hpcc_event *ev,
		   struct hpccd_hpcc_out *out, size_t n)
{
	size_t i;
	int r;

	for (i = 0; i < n; i++) {
		const struct hpccd_hpcc_event *e = &ev[i];

		if (s->mode == HPCCD_ALGO_RXHPCC) {
			if (e->active_flows)
				hpccd_hpcc_set_active_flows(s, e->active_flows);
			r = hpccd_hpcc_new_int(s, e->now_ns, e->path_id,
					       e->path_id_valid, e->hops, e->n_hops);
		} else {
			r = hpccd_hpcc_new_ack(s, e->seq, e->snd_nxt, e->path_id,
					       e->path_id_valid, e->hops, e->n_hops);
		}
		if (r < 0)
			return r;
		out[i].W_bytes = s->W;
		out[i].Wc_bytes = s->Wc;
		out[i].U = s->U;
		out[i].rate_bps = hpccd_hpcc_rate_bps(s);
		out[i].inc_stage = s->inc_stage;
		out[i].flag = (uint32_t)r;
	}
	return 0;
}
