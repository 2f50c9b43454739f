// SPDX-License-Identifier: BSD-2-Clause
/*
 * DCQCN (Y. Zhu, H. Eran, D. Firestone, C. Guo, M. Lipshteyn, Y. Liron,
 * J. Padhye, S. Raindel, M. H. Yahia, M. Zhang, "Congestion Control for
 * Large-Scale RDMA Deployments", SIGCOMM 2015), section 3.1: the
 * congestion point's RED-like marking (CP), the notification point's CNP
 * generation (NP) and the reaction point's rate control (RP): the cut of
 * Eq. (1) on a CNP, alpha's decay of Eq. (2) by the alpha timer, and the
 * rate increase events of the timer and the byte counter through fast
 * recovery (Eq. (3)), additive increase (Eq. (4)) and hyper increase, as
 * the RP state machine of the paper's Figure 6 chooses between them.
 *
 * Pure state machines: time is passed in (now_ns), never read; timers are
 * expiry times that advance() fires.  Rates and alpha are binary64, times
 * and byte counts exact integers.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "hpccd/cc.h"

/* ---- switch side (CP) ---------------------------------------------------- */

void hpccd_dcqcn_ecn_for_rate(uint64_t bw_bps, struct hpccd_dcqcn_ecn *e)
{
	/* [HPCC] section 5.1: Kmin = 100 KB x Bw / 25 Gbit/s and
	 * Kmax = 400 KB x Bw / 25 Gbit/s, i.e. Bw / 250000 and Bw / 62500
	 * bytes.  Pmax is not in [HPCC]: 1 %, the DCQCN paper's. */
	e->kmin_bytes = bw_bps / 250000;
	e->kmax_bytes = bw_bps / 62500;
	e->pmax = 0.01;
}

double hpccd_dcqcn_mark_prob(const struct hpccd_dcqcn_ecn *e, uint64_t qlen_bytes)
{
	/* Section 3.1, CP: RED's marking curve (no drops: ECN only). */
	if (qlen_bytes <= e->kmin_bytes)
		return 0.0;
	if (qlen_bytes > e->kmax_bytes)
		return 1.0;
	return e->pmax * (double)(qlen_bytes - e->kmin_bytes) /
	       (double)(e->kmax_bytes - e->kmin_bytes);
}

/* ---- receiver side (NP) -------------------------------------------------- */

void hpccd_dcqcn_np_init(struct hpccd_dcqcn_np *np, uint64_t N_ns)
{
	memset(np, 0, sizeof(*np));
	np->N_ns = N_ns;
}

/* No CNP was sent for the flow in the last N (section 3.1, NP). */
static int np_window_over(const struct hpccd_dcqcn_np *np, uint64_t now_ns)
{
	return !np->sent ||
	       (now_ns >= np->last_cnp_ns && now_ns - np->last_cnp_ns >= np->N_ns);
}

static uint32_t np_send(struct hpccd_dcqcn_np *np, uint64_t now_ns)
{
	np->sent = 1;
	np->last_cnp_ns = now_ns;
	np->pending = 0;
	np->n_cnp++;
	return 1;
}

uint32_t hpccd_dcqcn_np_on_packet(struct hpccd_dcqcn_np *np, int ce, uint64_t now_ns)
{
	if (ce)
		np->n_ce++;
	if (!ce && !np->pending)
		return 0;
	/* "If a marked packet arrives for a flow, and no CNP has been sent
	 * for the flow in last N microseconds, a CNP is sent immediately";
	 * a mark held over from the last window goes out with any packet
	 * that arrives once that window is over. */
	if (np_window_over(np, now_ns))
		return np_send(np, now_ns);
	/* "at most one CNP packet every N microseconds for the flow, if any
	 * packet that arrives within that time window was marked" */
	np->pending = 1;
	return 0;
}

uint32_t hpccd_dcqcn_np_poll(struct hpccd_dcqcn_np *np, uint64_t now_ns)
{
	if (!np->pending || !np_window_over(np, now_ns))
		return 0;
	return np_send(np, now_ns);
}

uint64_t hpccd_dcqcn_np_next_ns(const struct hpccd_dcqcn_np *np)
{
	if (!np->pending)
		return 0;
	return np->N_ns > UINT64_MAX - np->last_cnp_ns ? UINT64_MAX :
	       np->last_cnp_ns + np->N_ns;
}

/* ---- sender side (RP) ---------------------------------------------------- */

/* At most this many fast recovery iterations: F bounds the work of one
 * timer catch-up in advance() (the paper uses F = 5). */
#define DCQCN_F_MAX 1000u
/* R_AI and R_HAI are at least line rate / 2^20: the climb from the floor
 * to line rate takes at most 2^20 additive or hyper steps (bounded work in
 * advance() and on_tx(); a smaller R_HAI, e.g. a denormal, left RT where
 * it was for ever and a long catch-up spun through every event). */
#define DCQCN_AI_STEPS_MAX 1048576.0

void hpccd_dcqcn_params_default(struct hpccd_dcqcn_params *p)
{
	memset(p, 0, sizeof(*p));
	/* The DCQCN paper's values (section 3.1 and its evaluation):
	 * g = 1/256, K = 55 us, N = 50 us (hpccd_dcqcn_np_init), a rate
	 * increase every T = 55 us or every B = 10 MB, F = 5, R_AI = 40 Mbit/s.
	 * [HPCC] section 5.1 ran "the parameters suggested by a major NIC
	 * vendor", which it does not list (its Figure 2 gives that vendor's
	 * timers, T_i = 300 us and T_d = 4 us: set T_ns and N_ns to them). */
	p->g = 1.0 / 256;
	p->K_ns = 55000;
	p->T_ns = 55000;
	p->B_bytes = 10000000;
	p->F = 5;
	p->R_AI_bps = 40e6;
	p->R_HAI_bps = 0;          /* derived: 10 x R_AI */
	p->line_rate_bps = 100000000000ULL;
	p->min_rate_bps = 1e6;
	p->alpha_init = 1.0;       /* section 3.1: "The initial value of alpha is 1" */
}

int hpccd_dcqcn_init(struct hpccd_dcqcn *s, const struct hpccd_dcqcn_params *p,
		     const char **why)
{
	const char *bad = NULL;
	double line = (double)p->line_rate_bps;

	if (!(p->g > 0 && p->g <= 1))
		bad = "g must be in (0, 1] (DCQCN section 3.1, Eq. (1))";
	else if (p->K_ns == 0)
		bad = "K_ns must be positive (the alpha timer)";
	else if (p->T_ns == 0)
		bad = "T_ns must be positive (the rate increase timer)";
	else if (p->B_bytes == 0)
		bad = "B_bytes must be positive (the byte counter)";
	else if (p->F == 0 || p->F > DCQCN_F_MAX)
		bad = "F must be in [1, 1000] (fast recovery iterations; the paper's is 5)";
	else if (p->line_rate_bps == 0)
		bad = "line_rate_bps must be positive";
	else if (!(isfinite(p->R_AI_bps) && p->R_AI_bps >= line / DCQCN_AI_STEPS_MAX))
		bad = "R_AI_bps must be finite and at least line_rate_bps / 2^20";
	else if (p->R_HAI_bps != 0 &&
		 !(isfinite(p->R_HAI_bps) && p->R_HAI_bps >= line / DCQCN_AI_STEPS_MAX))
		bad = "R_HAI_bps must be finite and at least line_rate_bps / 2^20 (0: 10 x R_AI_bps)";
	else if (!(isfinite(p->min_rate_bps) && p->min_rate_bps > 0 && p->min_rate_bps <= line))
		bad = "min_rate_bps must be in (0, line_rate_bps]";
	else if (!(p->alpha_init >= 0 && p->alpha_init <= 1))
		bad = "alpha_init must be in [0, 1]";
	if (bad) {
		if (why)
			*why = bad;
		return -EINVAL;
	}
	memset(s, 0, sizeof(*s));
	s->g = p->g;
	s->K = p->K_ns;
	s->T = p->T_ns;
	s->B = p->B_bytes;
	s->F = p->F;
	s->R_AI = p->R_AI_bps;
	s->R_HAI = p->R_HAI_bps != 0 ? p->R_HAI_bps : 10 * p->R_AI_bps;
	s->line_rate = line;
	s->min_rate = p->min_rate_bps;
	s->alpha = p->alpha_init;
	/* A flow starts at line rate (section 3.1: no slow start); RT too. */
	s->RC = line;
	s->RT = line;
	s->stage = HPCCD_DCQCN_LINE_RATE;
	return 0;
}

static uint32_t sat_inc32(uint32_t x)
{
	return x == UINT32_MAX ? x : x + 1;
}

static uint32_t sat_add32(uint32_t x, uint64_t n)
{
	return n >= (uint64_t)(UINT32_MAX - x) ? UINT32_MAX : x + (uint32_t)n;
}

static uint64_t sat_add64(uint64_t a, uint64_t b)
{
	return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}

/* Expiries of a periodic timer due at or before now; moves *next past
 * now.  *next != 0 and *next <= now. */
static uint64_t expiries(uint64_t *next, uint64_t period, uint64_t now)
{
	uint64_t late = now - *next;
	uint64_t n = late / period + 1;

	*next = sat_add64(now - late % period, period);
	return n;
}

/* x^n by binary powering: exact IEEE multiplications, so the same n gives
 * the same bits everywhere (no libm pow). */
static double pow_n(double x, uint64_t n)
{
	double r = 1.0;

	while (n) {
		if (n & 1)
			r *= x;
		x *= x;
		n >>= 1;
	}
	return r;
}

/* One rate increase event (Figure 6), with T and BC counting the timer's
 * and the byte counter's iterations since the last CNP including this
 * one.  Returns 1 at the fixed point: RT at line rate and RC unmoved, so
 * that every further event leaves the rates as they are. */
static int increase(struct hpccd_dcqcn *s)
{
	uint32_t hi = s->t_count > s->bc_count ? s->t_count : s->bc_count;
	uint32_t lo = s->t_count > s->bc_count ? s->bc_count : s->t_count;
	double rc = s->RC, rt = s->RT;

	if (hi <= s->F) {
		/* Fast recovery, the first F iterations: Eq. (3),
		 * RC = (RT + RC) / 2, RT unchanged. */
		s->stage = HPCCD_DCQCN_FAST_RECOVERY;
		s->n_fast_recovery++;
	} else if (lo > s->F) {
		/* Hyper increase, both timer and byte counter past F:
		 * RT = RT + i R_HAI in its i-th iteration, i = min(T, BC) - F. */
		s->RT += (double)(lo - s->F) * s->R_HAI;
		s->stage = HPCCD_DCQCN_HYPER;
		s->n_hyper++;
	} else {
		/* Additive increase, one of the two past F: Eq. (4),
		 * RT = RT + R_AI. */
		s->RT += s->R_AI;
		s->stage = HPCCD_DCQCN_ADDITIVE;
		s->n_additive++;
	}
	if (s->RT > s->line_rate)
		s->RT = s->line_rate;
	s->RC = (s->RT + s->RC) / 2;       /* Eqs. (3) and (4): RC = (RT + RC) / 2 */
	return s->RT == s->line_rate && rt == s->RT && rc == s->RC;
}

void hpccd_dcqcn_advance(struct hpccd_dcqcn *s, uint64_t now_ns)
{
	uint64_t n;

	if (now_ns < s->now_ns)
		now_ns = s->now_ns;        /* time never goes back */
	s->now_ns = now_ns;
	if (s->next_alpha_ns && s->next_alpha_ns <= now_ns) {
		/* Eq. (2): alpha = (1 - g) alpha for every K without a CNP. */
		n = expiries(&s->next_alpha_ns, s->K, now_ns);
		s->alpha *= pow_n(1.0 - s->g, n);
		s->n_alpha_decays += n;
	}
	if (s->next_rate_ns && s->next_rate_ns <= now_ns) {
		n = expiries(&s->next_rate_ns, s->T, now_ns);
		while (n--) {
			s->t_count = sat_inc32(s->t_count);
			if (increase(s)) {
				s->t_count = sat_add32(s->t_count, n);
				break;
			}
		}
	}
}

void hpccd_dcqcn_on_cnp(struct hpccd_dcqcn *s, uint64_t now_ns)
{
	hpccd_dcqcn_advance(s, now_ns);
	/* Eq. (1): RT = RC, RC = RC (1 - alpha / 2), alpha = (1 - g) alpha + g. */
	s->RT = s->RC;
	s->RC = fmax(s->min_rate, s->RC * (1.0 - s->alpha / 2));
	s->alpha = (1.0 - s->g) * s->alpha + s->g;
	/* The timer, the byte counter and their iteration counts start over;
	 * "no feedback for K" is counted from this CNP. */
	s->t_count = 0;
	s->bc_count = 0;
	s->bytes = 0;
	s->next_alpha_ns = sat_add64(s->now_ns, s->K);
	s->next_rate_ns = sat_add64(s->now_ns, s->T);
	s->stage = HPCCD_DCQCN_FAST_RECOVERY;
	s->n_cnp++;
}

void hpccd_dcqcn_on_tx(struct hpccd_dcqcn *s, uint64_t bytes, uint64_t now_ns)
{
	uint64_t n, r;

	hpccd_dcqcn_advance(s, now_ns);
	if (s->stage == HPCCD_DCQCN_LINE_RATE)
		return;                    /* no CNP yet: nothing to recover */
	/* The byte counter: a rate increase event every B bytes sent. */
	n = bytes / s->B;
	r = bytes % s->B;
	if (r >= s->B - s->bytes) {
		s->bytes = r - (s->B - s->bytes);
		n++;
	} else {
		s->bytes += r;
	}
	while (n--) {
		s->bc_count = sat_inc32(s->bc_count);
		if (increase(s)) {
			s->bc_count = sat_add32(s->bc_count, n);
			break;
		}
	}
}

uint64_t hpccd_dcqcn_next_timer_ns(const struct hpccd_dcqcn *s)
{
	if (!s->next_alpha_ns)
		return s->next_rate_ns;
	if (!s->next_rate_ns)
		return s->next_alpha_ns;
	return s->next_alpha_ns < s->next_rate_ns ? s->next_alpha_ns : s->next_rate_ns;
}

int hpccd_dcqcn_run(struct hpccd_dcqcn *s, const struct hpccd_dcqcn_event *ev,
		    struct hpccd_dcqcn_out *out, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		hpccd_dcqcn_on_tx(s, ev[i].tx_bytes, ev[i].now_ns);
		if (ev[i].cnp)
			hpccd_dcqcn_on_cnp(s, ev[i].now_ns);
		out[i].rate_bps = s->RC;
		out[i].target_bps = s->RT;
		out[i].alpha = s->alpha;
		out[i].stage = s->stage;
	}
	return 0;
}
