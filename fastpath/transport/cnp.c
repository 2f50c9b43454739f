// SPDX-License-Identifier: BSD-2-Clause
/*
 * DCQCN's notification point and its congestion notification packets
 * (Zhu et al., SIGCOMM 2015, section 3.1 "NP"; [HPCC] section 5.1 runs
 * DCQCN as a baseline).  The receiver is the notification point of every
 * flow whose DATA ask for it (HPCCD_AUX_CNP in aux: the sender's
 * algorithm has an on_cnp hook): "if a marked packet arrives for a flow,
 * and no CNP has been sent for the flow in last N microseconds, a CNP is
 * sent immediately" (the core's hpccd_dcqcn_np_*, fastpath/cc/dcqcn.c,
 * with N = cfg.cnp_ns).  A mark that arrives within N of the last CNP is
 * held: "at most one CNP packet every N microseconds for the flow, if any
 * packet that arrives within that time window was marked".  Its CNP
 * leaves when the window is over: with the flow's first packet after it,
 * or by the receiver's timer at the window's end (rx_cnp_timer, from
 * rx_timers: the flow is on the same list as the delayed ACKs) when no
 * packet comes -- a sender that a CNP would slow may be one whose packets
 * stopped arriving for a while.
 * A CNP cuts the sender's rate, so it is integrity checked as ACKs and
 * NACKs are ([HPCC++2022] section 9.1): its body is the feedback trailer
 * (fb_seq in the receiver flow's one sequence of ACK / NACK / CNP, the
 * SipHash tag under the engine's rotating key), and the sender applies
 * none whose tag does not verify (bad_tags: forged, corrupted, cut) or
 * whose fb_seq is not new (fb_replayed).  The sender half then hands it to
 * the flow's algorithm; others count it.  docs/wire-format.md "CNP" has
 * the packet.
 */
#include "tp.h"

/* A CNP of receiver flow r, echoing DATA timestamp `ts`. */
static void cnp_send(struct hpccd_tp *t, struct tp_rx *r, uint32_t ts)
{
	uint64_t addr;
	uint32_t off = L2L4;
	uint8_t *f;

	f = tx_get(t, &addr);
	if (!f) {
		t->st.ack_dropped++;     /* feedback without a TX frame */
		return;
	}
	put_l2l4(f, r->mac_peer, r->mac_local, r->daddr, r->saddr, r->dport, r->sport, 0);
	off += put_int(f + off, 0);
	put_hdr(f + off, HPCCD_T_CNP, 0, HPCCD_FB_TRAILER_BYTES, r->flow_id, 0, r->rcv_nxt, ts,
		r->np_ce);
	off = put_fb_trailer(t, r, f, off + HPCCD_HDR_BYTES, 0);
	finish_frame(t, f, off);
	tx_put(t, addr, off);
	r->np_ce = 0;
	r->st.cnps_sent++;
}

/* DATA of receiver flow r arrived (`ce`: CE-marked); r's addresses are set. */
void rx_cnp(struct hpccd_tp *t, struct tp_rx *r, const struct hpccd_wire_info *wi, int ce,
	    uint64_t now)
{
	if (!(wi->aux & HPCCD_AUX_CNP))
		return;
	if (!r->np.N_ns)
		hpccd_dcqcn_np_init(&r->np, t->cfg.cnp_ns ? t->cfg.cnp_ns : 50000);
	r->np_ce += ce;
	if (hpccd_dcqcn_np_on_packet(&r->np, ce, now))
		cnp_send(t, r, wi->ts);
	else if (r->np.pending)
		rx_timer_list(t, r, hpccd_dcqcn_np_next_ns(&r->np));   /* the window's end */
}

/* The notification point's timer (rx_timers): the CNP of a mark held in
 * the last window, once the window is over, whether packets came or not. */
void rx_cnp_timer(struct hpccd_tp *t, struct tp_rx *r, uint64_t now)
{
	if (r->np.pending && hpccd_dcqcn_np_poll(&r->np, now))
		cnp_send(t, r, r->last_ts);
}

/* When rx_timers must look at r next for its CNP; NO_DEADLINE: never. */
uint64_t rx_cnp_due(const struct tp_rx *r)
{
	return r->np.pending ? hpccd_dcqcn_np_next_ns(&r->np) : NO_DEADLINE;
}

/* A CNP for one of our flows (frame f): authentic and new, then the
 * algorithm's on_cnp, if it has one. */
void on_cnp(struct hpccd_tp *t, const uint8_t *f, const struct hpccd_wire_info *wi,
	    uint64_t now)
{
	struct tp_flow *fl = flow_by_id(t, wi->flow_id);

	if (!fl || wi->saddr != fl->hc.daddr || wi->dport != fl->hc.sport) {
		t->st.unknown_flow++;
		return;
	}
	if (fl->state != HPCCD_TP_RUNNING)
		return;                  /* late: the flow finished */
	if (!fb_authentic(t, fl, f, wi) || !fb_fresh(fl, wi))
		return;                  /* counted: bad_tags, fb_replayed */
	fl->st.cnps++;
	if (!fl->ops->on_cnp)
		return;                  /* counted, not applied */
	TP_HS_ADD(fl, cc_updates, fl->ops->on_cnp(fl, now) != 0);
	fl->ops->sync(fl);
	sched_wake(t, fl, now);
}
