// SPDX-License-Identifier: BSD-2-Clause
/*
 * DCQCN in the engine (Zhu et al., SIGCOMM 2015, section 3.1; the baseline
 * of [HPCC] section 5.1): the reaction point of the core
 * (fastpath/cc/dcqcn.c) paces the flow at its current rate RC.  CNPs
 * from the receiver (cnp.c) cut it (Eq. (1)); the alpha and rate increase
 * timers and the byte counter run on the flow's own sends (on_sent: the
 * timers fire late by at most one packet gap, when the flow sends next).
 * DCQCN bounds no bytes in flight ([HPCC] section 5.1: "neither of them
 * limits inflight bytes"): W is unlimited, the receiver's window alone
 * applies; c.rate_win makes it "DCQCN+win" (W = HPCC's W_init).  Every
 * data packet is ECT(0): the switch marks them (the thresholds of
 * docs/experiments.md "DCQCN and TIMELY in the lab").
 */
#include "tp.h"

static int dcqcn_init(struct tp_flow *fl, const char **why)
{
	/* start rate and ceiling: the NIC's line rate (section 3.1: no slow start) */
	fl->c.dcqcn.line_rate_bps = fl->hc.line_rate_bps;
	return hpccd_dcqcn_init(&fl->cc.dcqcn, &fl->c.dcqcn, why);
}

static void dcqcn_sync(struct tp_flow *fl)
{
	fl->W = tp_rate_w(fl);
	fl->rate_bps = cap_rate(fl, fl->cc.dcqcn.RC);
}

/* ACKs and NACKs carry nothing DCQCN reads (its signal is the CNP). */
static int dcqcn_on_feedback(struct tp_flow *fl, const struct tp_fb *fb, uint64_t now)
{
	return 0;
}

static int dcqcn_on_cnp(struct tp_flow *fl, uint64_t now)
{
	hpccd_dcqcn_on_cnp(&fl->cc.dcqcn, now);
	return 1;
}

static void dcqcn_on_sent(struct tp_flow *fl, uint32_t wire_bytes, uint64_t now)
{
	hpccd_dcqcn_on_tx(&fl->cc.dcqcn, wire_bytes, now);
	fl->rate_bps = cap_rate(fl, fl->cc.dcqcn.RC);
}

static int dcqcn_pkt_ect(const struct tp_flow *fl, uint64_t idx, int retx)
{
	return 1;
}

static double dcqcn_signal(const struct tp_flow *fl)
{
	return fl->cc.dcqcn.alpha;
}

const struct tp_cc_ops tp_cc_dcqcn = {
	.name = "dcqcn",
	.init = dcqcn_init,
	.sync = dcqcn_sync,
	.on_feedback = dcqcn_on_feedback,
	.on_cnp = dcqcn_on_cnp,
	.on_sent = dcqcn_on_sent,
	.pkt_ect = dcqcn_pkt_ect,
	.signal = dcqcn_signal,
};
