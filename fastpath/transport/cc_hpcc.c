// SPDX-License-Identifier: BSD-2-Clause
/*
 * Sender-based HPCC in the engine ([HPCC] Algorithm 1): W from the INT
 * echoed in ACKs (or carried back by probe responses in probe mode),
 * R = W / T ([HPCC] section 3.2).  The arithmetic is the core's
 * (fastpath/cc/hpcc.c); this file only feeds it and converts units.
 */
#include "tp.h"

static int hpcc_init(struct tp_flow *fl, const char **why)
{
	int rc = hpccd_hpcc_init(&fl->cc.hpcc, &fl->c.hpcc, fl->c.algo, why);

	fl->W = fl->cc.hpcc.W;
	return rc;
}

static void hpcc_sync(struct tp_flow *fl)
{
	fl->W = fl->cc.hpcc.W;
	fl->rate_bps = cap_rate(fl, hpccd_hpcc_rate_bps(&fl->cc.hpcc));
}

/* NewAck ([HPCC] Algorithm 1 line 21) for an ACK with the INT echo */
static int hpcc_on_feedback(struct tp_flow *fl, const struct tp_fb *fb, uint64_t now)
{
	const struct hpccd_wire_info *wi = fb->wi;

	if (fb->type != HPCCD_T_ACK || !(wi->hdr_flags & HPCCD_F_INT_ECHO) || !wi->int_nhop)
		return 0;
	TP_HS_ADD(fl, int_acks, 1);
	return hpccd_hpcc_new_ack_wire(&fl->cc.hpcc, now, fb->ack, fl->snd_max, wi->int_path_id,
				       (const void *)(fb->f + wi->int_off + HPCCD_INT_HDR_BYTES),
				       wi->int_nhop) == 1;
}

/* A probe response's INT goes to NewAck exactly as an INT-echo ACK's does,
 * with seq = snd_nxt = the probe number: every response starts a new RTT,
 * so each one updates W^c (lines 22-24), the once-per-RTT update [HPCC++2020]
 * section 6.1 asks for. */
static int hpcc_on_probe_resp(struct tp_flow *fl, const struct hpccd_wire_info *wi,
			      const uint8_t *f, uint64_t now)
{
	if (!wi->int_nhop)
		return 0;
	return hpccd_hpcc_new_ack_wire(&fl->cc.hpcc, now, wi->seq, wi->seq, wi->int_path_id,
				       (const void *)(f + wi->int_off + HPCCD_INT_HDR_BYTES),
				       wi->int_nhop) == 1;
}

static int hpcc_pkt_ect(const struct tp_flow *fl, uint64_t idx, int retx)
{
	return fl->hc.ecn != 0;
}

static double hpcc_signal(const struct tp_flow *fl)
{
	return fl->cc.hpcc.U;
}

const struct tp_cc_ops tp_cc_hpcc = {
	.name = "hpcc",
	.init = hpcc_init,
	.sync = hpcc_sync,
	.on_feedback = hpcc_on_feedback,
	.on_probe_resp = hpcc_on_probe_resp,
	.pkt_ect = hpcc_pkt_ect,
	.signal = hpcc_signal,
};

/* ---- Rx-HPCC ([HPCC++2020] section 6.2, [HPCC++2022] section 6.3.2) -------
 * W is the receiver's (rx_hpcc.c): its DATA ask for it (data_opts), and the
 * ACKs it sends once per T carry it.  The sender paces at R = W / T and
 * keeps at most W + R x T = 2 W unacknowledged: the receiver acknowledges
 * once per T, so up to R x T of what it received waits for the next ACK
 * besides the W in the network; a window of W alone would cap the flow at
 * W / (RTT + T), about half its rate. */

static void rxhpcc_sync(struct tp_flow *fl)
{
	/* R = W / T ([HPCC] section 3.2) */
	fl->rate_bps = cap_rate(fl, fl->cc.hpcc.W * 8e9 / fl->cc.hpcc.T);
	fl->W = 2 * fl->cc.hpcc.W;
}

/* The receiver's W from an ACK or NACK with a window block (its tag and
 * fb_seq already checked by feedback.c), clamped to what this sender
 * allows. */
static int rxhpcc_on_feedback(struct tp_flow *fl, const struct tp_fb *fb, uint64_t now)
{
	const struct hpccd_wire_info *wi = fb->wi;

	if (!wi->has_rxwin)
		return 0;
	fl->cc.hpcc.W = fmin(fmax((double)wi->w_bytes, fl->cc.hpcc.w_min), fl->cc.hpcc.w_max);
	fl->cc.hpcc.U = wi->u_q16 / 65536.0;
	fl->st.rx_windows++;
	return 1;
}

static int rxhpcc_init(struct tp_flow *fl, const char **why)
{
	int rc = hpcc_init(fl, why);

	rxhpcc_sync(fl);
	return rc;
}

const struct tp_cc_ops tp_cc_rxhpcc = {
	.name = "rx-hpcc",
	.data_opts = HPCCD_DATA_O_RXWIN,
	.init = rxhpcc_init,
	.sync = rxhpcc_sync,
	.on_feedback = rxhpcc_on_feedback,
	.pkt_ect = hpcc_pkt_ect,
	.signal = hpcc_signal,
};
