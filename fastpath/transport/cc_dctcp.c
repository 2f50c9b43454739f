// SPDX-License-Identifier: BSD-2-Clause
/*
 * DCTCP in the engine ([DCTCP]): a window-based sender paced at the NIC's
 * rate, cwnd from the core's DCTCP (fastpath/cc/dctcp.c) on every ACK
 * and NACK, every data packet ECT(0).
 */
#include "tp.h"

static int dctcp_init(struct tp_flow *fl, const char **why)
{
	fl->c.dctcp.mtu_bytes = fl->mss;     /* SMSS = our payload size */
	return hpccd_dctcp_init(&fl->cc.dctcp, &fl->c.dctcp, why);
}

static void dctcp_sync(struct tp_flow *fl)
{
	fl->W = (double)fl->cc.dctcp.cwnd * fl->wire_per_payload;
	fl->rate_bps = (double)fl->hc.line_rate_bps;
}

static int dctcp_on_feedback(struct tp_flow *fl, const struct tp_fb *fb, uint64_t now)
{
	if (fb->type == HPCCD_T_NOTIFY)
		return 0;
	hpccd_dctcp_on_ack(&fl->cc.dctcp, fb->ack, fl->snd_max, fb->ece,
			   fb->loss ? HPCCD_LOSS_FAST : HPCCD_LOSS_NONE);
	return 1;
}

static void dctcp_on_timeout(struct tp_flow *fl, uint64_t now)
{
	hpccd_dctcp_on_ack(&fl->cc.dctcp, fl->snd_una, fl->snd_max, 0, HPCCD_LOSS_RTO);
}

static int dctcp_pkt_ect(const struct tp_flow *fl, uint64_t idx, int retx)
{
	return 1;
}

static double dctcp_signal(const struct tp_flow *fl)
{
	return (double)fl->cc.dctcp.alpha / HPCCD_DCTCP_SCF;
}

const struct tp_cc_ops tp_cc_dctcp = {
	.name = "dctcp",
	.init = dctcp_init,
	.sync = dctcp_sync,
	.on_feedback = dctcp_on_feedback,
	.on_timeout = dctcp_on_timeout,
	.pkt_ect = dctcp_pkt_ect,
	.signal = dctcp_signal,
};
