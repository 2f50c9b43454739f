// SPDX-License-Identifier: BSD-2-Clause
/*
 * LDCP in the engine ([LDCP]): cw from the core (fastpath/cc/ldcp.c)
 * per ACK with n = the packets it acknowledges, windows below one packet
 * paced by the RTT / cw interval (section 2.2), first-RTT packets
 * ECN-incapable but the IW-th (section 3.1).
 */
#include "tp.h"

static int ldcp_init(struct tp_flow *fl, const char **why)
{
	fl->c.ldcp.mtu_bytes = fl->mss;
	return hpccd_ldcp_init(&fl->cc.ldcp, &fl->c.ldcp, why);
}

static void ldcp_sync(struct tp_flow *fl)
{
	uint64_t iv = hpccd_ldcp_tx_interval_ns(&fl->cc.ldcp, fl->srtt);

	fl->W = fl->cc.ldcp.cw * fl->mss * fl->wire_per_payload;
	/* cw < 1: one packet every RTT / cw ([LDCP] section 2.2) */
	fl->rate_bps = iv ? cap_rate(fl, (fl->mss + fl->hdr_max) * 8e9 / (double)iv)
			  : (double)fl->hc.line_rate_bps;
}

static int ldcp_on_feedback(struct tp_flow *fl, const struct tp_fb *fb, uint64_t now)
{
	if (fb->type == HPCCD_T_ACK && fb->wi->aux) {
		hpccd_ldcp_on_ack(&fl->cc.ldcp, fb->wi->aux, fb->ece, 0, now);
		return 1;
	}
	if (fb->loss) {
		uint32_t n = (uint32_t)((fb->acked + fl->mss - 1) / fl->mss);

		hpccd_ldcp_on_ack(&fl->cc.ldcp, n, fb->ece, 1, now);
		return 1;
	}
	return 0;
}

static void ldcp_on_timeout(struct tp_flow *fl, uint64_t now)
{
	hpccd_ldcp_on_ack(&fl->cc.ldcp, 0, 0, 1, now);
}

/* [LDCP] section 3.1: first-RTT packets ECN-incapable but the IW-th (or
 * the message's last); retransmissions are stable (ECT) */
static int ldcp_pkt_ect(const struct tp_flow *fl, uint64_t idx, int retx)
{
	return retx || hpccd_ldcp_pkt_ect(&fl->cc.ldcp, idx, fl->msg_pkts);
}

static uint32_t ldcp_pkt_flags(const struct tp_flow *fl, uint64_t idx, int retx)
{
	return !retx && idx < (uint64_t)fl->cc.ldcp.iw ? HPCCD_F_FIRST_RTT : 0;
}

static double ldcp_signal(const struct tp_flow *fl)
{
	return fl->cc.ldcp.cw;
}

const struct tp_cc_ops tp_cc_ldcp = {
	.name = "ldcp",
	.init = ldcp_init,
	.sync = ldcp_sync,
	.on_feedback = ldcp_on_feedback,
	.on_timeout = ldcp_on_timeout,
	.pkt_ect = ldcp_pkt_ect,
	.pkt_flags = ldcp_pkt_flags,
	.signal = ldcp_signal,
};
