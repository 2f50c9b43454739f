// SPDX-License-Identifier: BSD-2-Clause
/*
 * TIMELY in the engine (Mittal et al., SIGCOMM 2015, Algorithm 1; the
 * baseline of [HPCC] section 5.1): the rate of the core
 * (fastpath/cc/timely.c) from one RTT sample per ACK that acknowledges
 * new data (a completion event), the same sample the engine's RTT
 * estimator takes (feedback.c: now minus the echoed DATA ts).  TIMELY
 * bounds no bytes in flight ([HPCC] section 5.1): W is unlimited, the
 * receiver's window alone applies; c.rate_win makes it "TIMELY+win" (W =
 * HPCC's W_init).  Data packets are ECT(0) only if the
 * flow asks (c.ecn): TIMELY reads no marks.
 */
#include "tp.h"

static int timely_init(struct tp_flow *fl, const char **why)
{
	fl->c.timely.line_rate_bps = fl->hc.line_rate_bps;   /* start rate and ceiling */
	return hpccd_timely_init(&fl->cc.timely, &fl->c.timely, why);
}

static void timely_sync(struct tp_flow *fl)
{
	fl->W = tp_rate_w(fl);
	fl->rate_bps = cap_rate(fl, fl->cc.timely.rate);
}

static int timely_on_feedback(struct tp_flow *fl, const struct tp_fb *fb, uint64_t now)
{
	uint64_t r;

	if (fb->type != HPCCD_T_ACK || !fb->acked)
		return 0;
	r = (uint32_t)((uint32_t)now - fb->wi->ts);
	if (r > 4000000000ull)
		return 0;                /* as the engine's estimator: not a sample */
	hpccd_timely_on_rtt(&fl->cc.timely, r);
	return 1;
}

static int timely_pkt_ect(const struct tp_flow *fl, uint64_t idx, int retx)
{
	return fl->hc.ecn != 0;
}

static double timely_signal(const struct tp_flow *fl)
{
	return fl->cc.timely.gradient;
}

const struct tp_cc_ops tp_cc_timely = {
	.name = "timely",
	.init = timely_init,
	.sync = timely_sync,
	.on_feedback = timely_on_feedback,
	.pkt_ect = timely_pkt_ect,
	.signal = timely_signal,
};
