// SPDX-License-Identifier: BSD-2-Clause
/*
 * LDCP ([LDCP] section 2): per-ACK window adjustment (PAWA, section
 * 2.2, Eqs. (1) and (2)), windows below one packet ticked out by a timer
 * of RTT/cw (section 2.2, last paragraph), and zero-RTT fast start with
 * IW = BDP and ECN-incapable first-RTT packets (section 2.3; transitions
 * and the ECN-capable last packet from section 3.1).
 *
 * cw is in packets, as a double (it is fractional by design).
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "hpccd/cc.h"

void hpccd_ldcp_params_default(struct hpccd_ldcp_params *p)
{
	memset(p, 0, sizeof(*p));
	/* [LDCP] bounds alpha and beta to (0, 1] but gives no defaults:
	 * alpha = 1 packet per RTT is TCP's additive increase; beta = 1/2
	 * makes a fully marked round halve cw, DCTCP's largest cut. */
	p->alpha = 1.0;
	p->beta = 0.5;
	p->gamma = 0.125;          /* seed: typical 1/4, 1/8, 1/16 */
	p->eta = 0.5;              /* seed: "We choose eta = 1/2" */
	p->line_rate_bps = 100000000000ULL;
	p->rtt_ns = 13000;
	p->mtu_bytes = 1000;
}

int hpccd_ldcp_init(struct hpccd_ldcp *s, const struct hpccd_ldcp_params *p,
		    const char **why)
{
	const char *bad = NULL;
	double iw;

	if (!(p->alpha > 0 && p->alpha <= 1))
		bad = "alpha must be in (0, 1] ([LDCP] section 2.2)";
	else if (!(p->beta > 0 && p->beta <= 1))
		bad = "beta must be in (0, 1] ([LDCP] section 2.2)";
	else if (!(p->gamma > 0 && p->gamma < 1))
		bad = "gamma must be in (0, 1)";
	else if (!(p->eta > 0 && p->eta < 1))
		bad = "eta must be in (0, 1)";
	else if (p->mtu_bytes == 0)
		bad = "mtu_bytes must be positive";
	else if (p->rtt_ns == 0)
		bad = "rtt_ns must be positive";
	else if (p->iw_pkts != 0 && !(isfinite(p->iw_pkts) && p->iw_pkts >= 1))
		bad = "iw_pkts must be at least 1";
	else if (p->iw_pkts == 0 && p->line_rate_bps == 0)
		bad = "line_rate_bps must be positive to derive iw_pkts";
	if (bad) {
		if (why)
			*why = bad;
		return -EINVAL;
	}
	/* Section 2.3: IW = BDP, in whole packets (a fractional IW would make
	 * the last first-RTT packet and the end of fast start disagree). */
	iw = ceil(p->iw_pkts != 0 ? p->iw_pkts :
		  (double)p->line_rate_bps * (double)p->rtt_ns /
		  (8e9 * (double)p->mtu_bytes));
	if (iw < 1)
		iw = 1;
	/* pkt_ect() converts IW to an integer: beyond 2^53 packets it is no
	 * window, beyond 2^64 the conversion is undefined (fuzz/fuzz_cc.c). */
	if (!(iw <= 9007199254740992.0)) {
		if (why)
			*why = "iw_pkts (or the BDP it is derived from) must be at most 2^53 packets";
		return -EINVAL;
	}
	memset(s, 0, sizeof(*s));
	s->alpha = p->alpha;
	s->beta = p->beta;
	s->gamma = p->gamma;
	s->eta = p->eta;
	s->iw = iw;
	s->cw = iw;
	s->stage = HPCCD_LDCP_FAST_START;
	s->mtu = p->mtu_bytes;
	s->rtt_ns = p->rtt_ns;
	return 0;
}

/* One ACK in the stable stage acknowledging n packets. */
static void pawa(struct hpccd_ldcp *s, uint32_t n, int ece)
{
	while (n) {
		if (s->cw >= 1) {
			/* Eq. (2) (Eq. (1) for n = 1), cw >= 1:
			 * ECE = 0: cw += n alpha / cw; ECE = 1: cw -= n beta.
			 * gamma is also the minimum window. */
			if (!ece)
				s->cw += (double)n * s->alpha / s->cw;
			else
				s->cw = fmax(s->gamma, s->cw - (double)n * s->beta);
			return;
		}
		/* cw < 1, per packet: ECE = 0: cw += gamma;
		 * ECE = 1: cw = max(gamma, eta cw). */
		if (!ece)
			s->cw += s->gamma;
		else
			s->cw = fmax(s->gamma, s->eta * s->cw);
		n--;
	}
}

void hpccd_ldcp_on_ack(struct hpccd_ldcp *s, uint32_t n, int ece, int loss,
		       uint64_t now_ns)
{
	if (ece)
		s->n_marked += n;
	else
		s->n_unmarked += n;
	if (s->stage == HPCCD_LDCP_FAST_START) {
		/* cw stays IW during fast start (section 2.3); it ends on
		 * loss with cw = packets acknowledged before the loss, or
		 * when a full IW is acknowledged with cw = IW (section 3.1). */
		s->fs_acked += n;
		if (loss) {
			s->cw = fmax(s->gamma, (double)s->fs_acked);
			s->stage = HPCCD_LDCP_STABLE;
			s->n_losses++;
		} else if ((double)s->fs_acked >= s->iw) {
			s->cw = s->iw;
			s->stage = HPCCD_LDCP_STABLE;
		}
	} else if (loss) {
		/* [LDCP] is silent on stable-stage loss (WRED drops only
		 * first-RTT packets; a stable packet is lost only on buffer
		 * overflow): react as conventional TCP, halve. */
		s->cw = fmax(s->gamma, s->cw / 2);
		s->n_losses++;
	} else {
		pawa(s, n, ece);
	}
	if (now_ns) {
		s->last_ack_ns = now_ns;
		/* cw < 1: the next packet is ticked out RTT/cw later. */
		s->next_tx_ns = s->cw < 1 ? now_ns + hpccd_ldcp_tx_interval_ns(s, 0) : 0;
	}
}

uint64_t hpccd_ldcp_tx_interval_ns(const struct hpccd_ldcp *s, uint64_t rtt_ns)
{
	double t;

	if (s->cw >= 1)
		return 0;
	t = (double)(rtt_ns ? rtt_ns : s->rtt_ns) / s->cw;
	/* Saturated: RTT / gamma may exceed 2^64 ns, and converting such a
	 * double to uint64_t is undefined (fuzz/fuzz_cc.c). */
	return t < 18446744073709551616.0 ? (uint64_t)t : UINT64_MAX;
}

int hpccd_ldcp_pkt_ect(const struct hpccd_ldcp *s, uint64_t idx, uint64_t msg_pkts)
{
	uint64_t first_rtt = (uint64_t)s->iw;

	if (msg_pkts && msg_pkts < first_rtt)
		first_rtt = msg_pkts;
	if (idx >= first_rtt)
		return 1;                   /* stable-stage packets: ECN-capable */
	return idx == first_rtt - 1;        /* the last first-RTT packet */
}

int hpccd_ldcp_run(struct hpccd_ldcp *s, const struct hpccd_ldcp_event *ev,
		   struct hpccd_ldcp_out *out, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		hpccd_ldcp_on_ack(s, ev[i].acked_pkts, ev[i].ece != 0,
				  ev[i].loss != 0, ev[i].now_ns);
		out[i].cw_pkts = s->cw;
		out[i].stage = s->stage;
	}
	return 0;
}
