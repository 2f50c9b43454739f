// SPDX-License-Identifier: BSD-2-Clause
/*
 * TIMELY (R. Mittal, V. T. Lam, N. Dukkipati, E. Blem, H. Wassel,
 * M. Ghobadi, A. Vahdat, Y. Wang, D. Wetherall, D. Zats, "TIMELY:
 * RTT-based Congestion Control for the Datacenter", SIGCOMM 2015),
 * section 4, Algorithm 1: per RTT sample (completion event) the EWMA of
 * RTT differences, normalised by minRTT, drives the rate; below T_low the
 * rate grows by delta, above T_high it is cut in proportion to how far
 * the RTT is above T_high, and between the two a non-positive gradient
 * adds N x delta (N = 5 in HAI mode, after five negative gradients in a
 * row, else 1) while a positive one cuts by beta x gradient.
 *
 * Rates and RTTs are binary64 (bit/s and ns); the sample is an integer
 * of ns, as the transport measures it.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "hpccd/cc.h"

void hpccd_timely_params_default(struct hpccd_timely_params *p)
{
	memset(p, 0, sizeof(*p));
	/* [HPCC] section 5.1: "For TIMELY, we use the parameters suggested
	 * in [31]" (the TIMELY paper): alpha = 0.875, beta = 0.8,
	 * delta = 10 Mbit/s, T_low = 50 us, T_high = 500 us, HAI N = 5 after
	 * five negative gradients.  minRTT is the network's base RTT: 13 us,
	 * [HPCC]'s simulation T (section 5.1), as for HPCC and LDCP here. */
	p->alpha = 0.875;
	p->beta = 0.8;
	p->delta_bps = 10e6;
	p->T_low_ns = 50000;
	p->T_high_ns = 500000;
	p->min_rtt_ns = 13000;
	p->hai_N = 5;
	p->hai_after = 5;
	p->line_rate_bps = 100000000000ULL;
	p->init_rate_bps = 0;      /* derived: line rate */
	p->min_rate_bps = 1e6;
}

int hpccd_timely_init(struct hpccd_timely *s, const struct hpccd_timely_params *p,
		      const char **why)
{
	const char *bad = NULL;
	double line = (double)p->line_rate_bps;

	if (!(p->alpha > 0 && p->alpha <= 1))
		bad = "alpha must be in (0, 1] (the EWMA weight of Algorithm 1)";
	else if (!(p->beta > 0 && p->beta <= 1))
		bad = "beta must be in (0, 1] (the multiplicative decrement factor)";
	else if (!(isfinite(p->delta_bps) && p->delta_bps > 0))
		bad = "delta_bps must be positive and finite (the additive increment step)";
	else if (p->T_low_ns >= p->T_high_ns)
		bad = "T_low_ns must be below T_high_ns";
	else if (p->min_rtt_ns == 0)
		bad = "min_rtt_ns must be positive (it normalises the gradient)";
	else if (p->hai_N == 0)
		bad = "hai_N must be at least 1";
	else if (p->hai_after == 0)
		bad = "hai_after must be at least 1";
	else if (p->line_rate_bps == 0)
		bad = "line_rate_bps must be positive";
	else if (!(isfinite(p->min_rate_bps) && p->min_rate_bps > 0 && p->min_rate_bps <= line))
		bad = "min_rate_bps must be in (0, line_rate_bps]";
	else if (p->init_rate_bps != 0 &&
		 !(p->init_rate_bps >= p->min_rate_bps && p->init_rate_bps <= line))
		bad = "init_rate_bps must be in [min_rate_bps, line_rate_bps] (0: line rate)";
	if (bad) {
		if (why)
			*why = bad;
		return -EINVAL;
	}
	memset(s, 0, sizeof(*s));
	s->alpha = p->alpha;
	s->beta = p->beta;
	s->delta = p->delta_bps;
	s->T_low = (double)p->T_low_ns;
	s->T_high = (double)p->T_high_ns;
	s->min_rtt = (double)p->min_rtt_ns;
	s->hai_N = p->hai_N;
	s->hai_after = p->hai_after;
	s->line_rate = line;
	s->min_rate = p->min_rate_bps;
	s->rate = p->init_rate_bps != 0 ? p->init_rate_bps : line;
	return 0;
}

void hpccd_timely_on_rtt(struct hpccd_timely *s, uint64_t rtt_ns)
{
	double new_rtt = (double)rtt_ns;
	/* new_rtt_diff = new_rtt - prev_rtt; prev_rtt = new_rtt.  The first
	 * sample has no predecessor: its difference is 0. */
	double new_rtt_diff = s->have_prev ? new_rtt - s->prev_rtt : 0.0;
	double rate = s->rate;

	s->prev_rtt = new_rtt;
	s->have_prev = 1;
	/* rtt_diff = (1 - alpha) rtt_diff + alpha new_rtt_diff */
	s->rtt_diff = (1.0 - s->alpha) * s->rtt_diff + s->alpha * new_rtt_diff;
	/* normalized_gradient = rtt_diff / minRTT */
	s->gradient = s->rtt_diff / s->min_rtt;
	/* HAI mode: "N = 5 if gradient < 0 for five completion events",
	 * counted over every sample (the gradient is computed for each). */
	s->neg_streak = s->gradient < 0 ?
		(s->neg_streak == UINT32_MAX ? s->neg_streak : s->neg_streak + 1) : 0;
	s->hai = 0;
	s->n_samples++;

	if (new_rtt < s->T_low) {
		rate += s->delta;                          /* rate + delta */
		s->n_low++;
	} else if (new_rtt > s->T_high) {
		/* rate (1 - beta (1 - T_high / new_rtt)) */
		rate *= 1.0 - s->beta * (1.0 - s->T_high / new_rtt);
		s->n_high++;
	} else if (s->gradient <= 0) {
		/* rate + N delta */
		if (s->neg_streak >= s->hai_after) {
			rate += (double)s->hai_N * s->delta;
			s->hai = s->hai_N > 1;
			s->n_hai++;
		} else {
			rate += s->delta;
			s->n_increase++;
		}
	} else {
		/* rate (1 - beta normalized_gradient); a gradient above
		 * 1 / beta would make it negative: the floor holds it. */
		rate *= 1.0 - s->beta * s->gradient;
		s->n_decrease++;
	}
	/* Bounds the algorithm leaves implicit: no faster than the line, no
	 * slower than min_rate (a rate of 0 would never send a sample). */
	s->rate = fmin(s->line_rate, fmax(s->min_rate, rate));
}

int hpccd_timely_run(struct hpccd_timely *s, const struct hpccd_timely_event *ev,
		     struct hpccd_timely_out *out, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		hpccd_timely_on_rtt(s, ev[i].rtt_ns);
		out[i].rate_bps = s->rate;
		out[i].rtt_diff_ns = s->rtt_diff;
		out[i].gradient = s->gradient;
		out[i].hai = s->hai;
	}
	return 0;
}
