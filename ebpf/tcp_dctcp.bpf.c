// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * tcp_dctcp: DCTCP ([DCTCP], draft-ietf-tcpm-dctcp-05, which became RFC
 * 8257) as a BPF struct_ops TCP congestion control named "dctcp": this
 * kernel has no tcp_dctcp module.  Registered by hpccd (hpccd.tcp_side.engine);
 * applications select it with TCP_CONGESTION ("iperf3 -C dctcp").
 *
 * Written from [DCTCP]; the kernel's tcp_dctcp.c was read for how the
 * hooks are called, not copied.  Where [DCTCP] leaves a choice, the choice
 * and its reason are below.
 *
 * Sender ([DCTCP] sections 3.3 and 4):
 *  - DCTCP.Alpha starts at 1 (section 3.3) and is kept as an integer scaled
 *    by SCF = 2^16 with g = 2^-4 = 1/16 (section 4), updated with shifts
 *    exactly as section 4 gives it in place of steps 5 and 6: ScaledM = SCF x BytesMarked /
 *    BytesAcked; if (Alpha >> 4) == 0 then Alpha = 0; Alpha += (ScaledM >> 4)
 *    - (Alpha >> 4); clamp to SCF.  The "reach zero" rule (section 4) comes
 *    from the first step.
 *  - BytesAcked = SEG.ACK - SND.UNA (section 3.3, step 1) per ACK in in_ack_event
 *    (byte counting, as [DCTCP] says, rather than the kernel module's
 *    packet counts); ECE adds the same to BytesMarked (step 3).  The
 *    window ends when an ACK passes WindowEnd (step 4: "less than or
 *    equal ... stop"), and WindowEnd becomes SND.NXT (step 7).
 *  - The cut cwnd = cwnd (1 - Alpha / 2) (step 9) is what ssthresh()
 *    returns when the kernel enters CWR on an ECE: the kernel then brings
 *    cwnd down to it over the next round trip (PRR) and does not react to
 *    another ECE until the window of data sent before the reduction is
 *    acknowledged, which is "not more than once for every window of data"
 *    and the CWR bit "as per RFC 3168" (both at the end of section 3.3).  Alpha itself
 *    is updated once per observation window whether or not ECE came.
 *  - Loss (section 3.4): a conventional TCP's reaction.
 *    Entering fast recovery from Open/Disorder halves (ssthresh = cwnd/2,
 *    Reno) instead of the alpha cut; entering recovery while a CWR
 *    reduction runs does not cut again ("only reduce the cwnd once per
 *    window of data across all loss signals", section 3.4).  A timeout
 *    (CA_EVENT_LOSS) halves ssthresh and the kernel sets cwnd to the loss
 *    window (section 3.4).  Alpha is not reset on loss (the MAY of section 4
 *    is not taken).  Growth is Reno's (tcp_reno_cong_avoid kfunc): DCTCP is
 *    "additional actions on top of ... NewReno" (section 4).
 *
 * Receiver (section 3.2): the DCTCP.CE state machine on the
 * hooks the kernel's ACK path gives a congestion control.  With
 * TCP_CONG_NEEDS_ECN the kernel reports every ECN-capable data segment as
 * CA_EVENT_ECN_IS_CE or CA_EVENT_ECN_NO_CE.  On a change of DCTCP.CE:
 *  - if a delayed ACK is pending (ICSK_ACK_TIMER), it is sent now with the
 *    OLD state's ECE and the old rcv_nxt (bpf_tcp_send_ack): the "two ACKs"
 *    of section 3.2, so the sender's alpha is not skewed by one ACK that
 *    covers segments of both states;
 *  - then an immediate ACK is requested (ICSK_ACK_NOW: steps 1 and 2 of
 *    section 3.2).
 * ECE on every outgoing ACK is TCP_ECN_DEMAND_CWR, which is set exactly
 * while DCTCP.CE is true (section 3.2: "ECE MUST be set if and only if
 * DCTCP.CE is true"), instead of RFC 3168's latch until CWR.  The kernel
 * processes a CWR of the same segment first (section 3.2), clearing the
 * latch, before reporting the segment's CE.
 *
 * ECN negotiation: .flags = TCP_CONG_NEEDS_ECN makes the kernel request ECN
 * in the SYN (and set ECT on it, section 3.5) whatever net.ipv4.tcp_ecn
 * says, and set ECT(0) on every data segment.  The passive side agrees to
 * ECN for an ECT-marked SYN only when its LISTENING socket runs a CC that
 * needs ECN (the kernel's tcp_ecn_create_request refuses ECT SYNs
 * otherwise): the receiver must run dctcp on its listener (its namespace's
 * net.ipv4.tcp_congestion_control, or TCP_CONGESTION before listen()),
 * which is [DCTCP]'s "both endpoints must support DCTCP" (section 5).
 * TCP_CONG_NON_RESTRICTED lets a network namespace make it its default
 * (only the initial namespace may default to a restricted CC) and lets
 * unprivileged applications select it, like reno.  A connection whose peer did
 * not agree to ECN (no TCP_ECN_OK at init) switches itself to "reno" with
 * bpf_setsockopt(TCP_CONGESTION): the kernel then clears ECT again, so the
 * segments are not marked by a network that the peer cannot echo (DCTCP
 * must only run between DCTCP endpoints, section 5); counted in
 * HPCCD_TCPD_NO_ECN.
 *
 * Observability: per-CPU counters (hpccd_dctcp_cnt) and, per flow, the
 * state copied out at every window end and every 64th CE change
 * (hpccd_dctcp_st, LRU: it outlives the connection, so the final alpha
 * can still be read).
 *
 * Concurrency: every hook runs under the socket's lock (process context
 * or softirq with the socket owned), so the private state needs no atomics;
 * counters are per CPU.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_endian.h>

#include "hpccd/kern_user.h"
#include "hpccd/tcp_cc.h"
#include "hpccd_maps.bpf.h"
#include "hpccd_tcp_sock.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* vmlinux.h has the kernel's enums but not its #defines. */
#define HPCCD_TCP_CONG_NON_RESTRICTED 0x1  /* include/net/tcp.h, BIT(0) */
#define HPCCD_TCP_CONG_NEEDS_ECN  0x2   /* include/net/tcp.h, BIT(1) */
#define HPCCD_TCP_ECN_OK          0x1   /* tcp_sock.ecn_flags: ECN negotiated */
#define HPCCD_TCP_ECN_DEMAND_CWR  0x4   /* tcp_sock.ecn_flags: send ECE */
#define HPCCD_SOL_TCP             6
#define HPCCD_TCP_CONGESTION      13
#define HPCCD_TCPF_LISTEN_CLOSE   ((1 << 10) | (1 << 7))   /* TCPF_LISTEN | TCPF_CLOSE */

#ifndef HPCCD_DCTCP_ST_MAX
#define HPCCD_DCTCP_ST_MAX 16384        /* flows whose DCTCP state is kept (LRU) */
#endif

/* Per-CPU counters, one slot per enum hpccd_tcp_dctcp_counter. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HPCCD_TCPD_COUNTERS);
	__type(key, __u32);
	__type(value, struct hpccd_counter);
} hpccd_dctcp_cnt SEC(".maps");

/* DCTCP state per flow (metrics, tests); LRU: no sweeper needed. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, HPCCD_DCTCP_ST_MAX);
	__type(key, struct hpccd_flow_key);
	__type(value, struct hpccd_tcp_dctcp_state);
} hpccd_dctcp_st SEC(".maps");

extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;

/* Private state in icsk_ca_priv (104 bytes available). */
struct dctcp_ca {
	__u32 alpha;          /* DCTCP.Alpha x SCF */
	__u32 window_end;     /* DCTCP.WindowEnd (sequence number) */
	__u32 prior_snd_una;  /* SND.UNA before this ACK */
	__u32 bytes_acked;    /* DCTCP.BytesAcked of the current window */
	__u32 bytes_marked;   /* DCTCP.BytesMarked of the current window */
	__u32 prior_rcv_nxt;  /* receiver: rcv_nxt before the last data segment */
	__u32 ce_state;       /* receiver: DCTCP.CE */
	__u32 loss_cwnd;      /* cwnd before the last reduction, for undo */
	__u32 reductions;
	__u32 inited;         /* init ran (the SYN's ACK comes before it) */
	__u64 windows;
	__u64 total_acked;
	__u64 total_marked;
	__u64 ce_changes;
};

_Static_assert(sizeof(struct dctcp_ca) <= 13 * sizeof(__u64), "fits icsk_ca_priv");

static __always_inline struct dctcp_ca *ca_of(struct sock *sk)
{
	return (struct dctcp_ca *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

static __always_inline void count(__u32 slot, __u64 bytes)
{
	hpccd__count(&hpccd_dctcp_cnt, slot, bytes);
}

/* Copy the flow's state out for userspace (window ends and CE changes
 * only: a hash update per ACK would cost more than the algorithm). */
static __always_inline void publish(struct sock *sk, struct dctcp_ca *ca)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct hpccd_tcp_dctcp_state st = {};
	struct hpccd_flow_key key;

	hpccd__sock_flow_key(sk, &key);
	st.windows = ca->windows;
	st.bytes_acked = ca->total_acked;
	st.bytes_marked = ca->total_marked;
	st.ce_changes = ca->ce_changes;
	st.alpha = ca->alpha;
	st.cwnd = tp->snd_cwnd;
	st.ssthresh = tp->snd_ssthresh;
	st.ce_state = ca->ce_state;
	st.reductions = ca->reductions;
	st.ecn_ok = !!(tp->ecn_flags & HPCCD_TCP_ECN_OK);
	bpf_map_update_elem(&hpccd_dctcp_st, &key, &st, BPF_ANY);
}

SEC("struct_ops/hpccd_dc_init")
void BPF_PROG(hpccd_dc_init, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct dctcp_ca *ca = ca_of(sk);
	static const char reno[] = "reno";

	/* An established connection without ECN cannot run DCTCP (see the
	 * header comment): hand it to reno, which also clears ECT.  A socket
	 * still listening or closed has not negotiated yet. */
	if (!(tp->ecn_flags & HPCCD_TCP_ECN_OK) &&
	    !((1 << sk->__sk_common.skc_state) & HPCCD_TCPF_LISTEN_CLOSE)) {
		count(HPCCD_TCPD_NO_ECN, 0);
		bpf_setsockopt(sk, HPCCD_SOL_TCP, HPCCD_TCP_CONGESTION, (void *)reno, sizeof(reno));
		return;
	}
	__builtin_memset(ca, 0, sizeof(*ca));
	ca->alpha = HPCCD_TCP_DCTCP_SCF;            /* "initialized to 1", section 3.3 */
	ca->prior_snd_una = tp->snd_una;
	ca->window_end = tp->snd_una;               /* "initialized to SND.UNA", 3.3 */
	ca->prior_rcv_nxt = tp->rcv_nxt;
	ca->inited = 1;
	count(HPCCD_TCPD_INIT, 0);
}

/* Section 3.3 steps 1-8 (and section 4's scaled update) on every ACK. */
SEC("struct_ops/hpccd_dc_ack")
void BPF_PROG(hpccd_dc_ack, struct sock *sk, __u32 flags)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct dctcp_ca *ca = ca_of(sk);
	__u32 una = tp->snd_una, acked, a;
	__u64 m;

	/* The ACK of the SYN is processed before the kernel initialises the
	 * CC: no window is open yet. */
	if (!ca->inited)
		return;
	acked = una - ca->prior_snd_una;             /* step 1: SEG.ACK - SND.UNA */
	if ((__s32)acked < 0)
		acked = 0;
	ca->prior_snd_una = una;
	ca->bytes_acked += acked;                    /* step 2 */
	ca->total_acked += acked;
	count(HPCCD_TCPD_ACK, acked);
	if (flags & CA_ACK_ECE) {                    /* step 3 */
		ca->bytes_marked += acked;
		ca->total_marked += acked;
		count(HPCCD_TCPD_ACK_ECE, acked);
	}
	if ((__s32)(una - ca->window_end) <= 0)      /* step 4: ack <= WindowEnd */
		return;

	/* steps 5-6, scaled (section 4): ScaledM, then the shifted EWMA */
	m = ca->bytes_acked ?
		((__u64)ca->bytes_marked << HPCCD_TCP_DCTCP_SCF_SHIFT) / ca->bytes_acked : 0;
	a = ca->alpha;
	if ((a >> HPCCD_TCP_DCTCP_G_SHIFT) == 0)
		a = 0;
	a = a + (__u32)(m >> HPCCD_TCP_DCTCP_G_SHIFT) - (a >> HPCCD_TCP_DCTCP_G_SHIFT);
	if (a > HPCCD_TCP_DCTCP_SCF)                 /* clamp, section 4 */
		a = HPCCD_TCP_DCTCP_SCF;
	ca->alpha = a;
	ca->window_end = tp->snd_nxt;                /* step 7 */
	ca->bytes_acked = 0;                         /* step 8 */
	ca->bytes_marked = 0;
	ca->windows++;
	count(HPCCD_TCPD_WINDOW, 0);
	publish(sk, ca);
}

/* Step 9: called by the kernel when it starts a reduction (ECE -> CWR, or
 * loss).  Loss-specific halving is applied in set_state / cwnd_event. */
SEC("struct_ops/hpccd_dc_ssth")
__u32 BPF_PROG(hpccd_dc_ssth, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct dctcp_ca *ca = ca_of(sk);
	__u32 cwnd = tp->snd_cwnd, cut;

	ca->loss_cwnd = cwnd;
	ca->reductions++;
	count(HPCCD_TCPD_ECN_REDUCTION, 0);
	/* cwnd x (1 - alpha / 2) = cwnd - cwnd x alpha / 2^(16 + 1) */
	cut = (__u32)(((__u64)cwnd * ca->alpha) >> (HPCCD_TCP_DCTCP_SCF_SHIFT + 1));
	return cwnd - cut > 2 ? cwnd - cut : 2;
}

static __always_inline void react_to_loss(struct sock *sk, __u32 slot)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct dctcp_ca *ca = ca_of(sk);
	__u32 cwnd = tp->snd_cwnd;

	ca->loss_cwnd = cwnd;
	tp->snd_ssthresh = cwnd >> 1 > 2 ? cwnd >> 1 : 2;   /* RFC 5681 halving */
	count(slot, 0);
}

SEC("struct_ops/hpccd_dc_state")
void BPF_PROG(hpccd_dc_state, struct sock *sk, __u8 new_state)
{
	__u8 old = ((struct inet_connection_sock *)sk)->icsk_ca_state;

	/* Fast recovery entered from Open/Disorder: the kernel has just asked
	 * ssthresh() (alpha cut); a loss is answered like conventional TCP
	 * instead.  From CWR the window was already cut: once per window. */
	if (new_state == TCP_CA_Recovery && old < TCP_CA_CWR)
		react_to_loss(sk, HPCCD_TCPD_LOSS_RECOVERY);
}

SEC("struct_ops/hpccd_dc_event")
void BPF_PROG(hpccd_dc_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct inet_connection_sock *icsk = (struct inet_connection_sock *)sk;
	struct dctcp_ca *ca = ca_of(sk);
	__u32 ce;

	if (ev == CA_EVENT_LOSS) {                   /* RTO, section 3.4 */
		react_to_loss(sk, HPCCD_TCPD_LOSS_RTO);
		return;
	}
	if (ev != CA_EVENT_ECN_IS_CE && ev != CA_EVENT_ECN_NO_CE)
		return;

	ce = ev == CA_EVENT_ECN_IS_CE;
	if (ce != ca->ce_state) {
		/* Section 3.2: a delayed ACK for segments of the old state goes
		 * first, with the old state's ECE ("two ACKs"), then the new
		 * state is acknowledged at once (steps 1 and 2). */
		if (icsk->icsk_ack.pending & ICSK_ACK_TIMER) {
			if (ca->ce_state)
				tp->ecn_flags |= HPCCD_TCP_ECN_DEMAND_CWR;
			else
				tp->ecn_flags &= ~HPCCD_TCP_ECN_DEMAND_CWR;
			bpf_tcp_send_ack(tp, ca->prior_rcv_nxt);
			count(HPCCD_TCPD_CE_FLUSH, 0);
		}
		icsk->icsk_ack.pending |= ICSK_ACK_NOW;
		ca->ce_changes++;
		count(HPCCD_TCPD_CE_CHANGE, 0);
	}
	ca->prior_rcv_nxt = tp->rcv_nxt;
	ca->ce_state = ce;
	/* ECE if and only if DCTCP.CE (section 3.2). */
	if (ce)
		tp->ecn_flags |= HPCCD_TCP_ECN_DEMAND_CWR;
	else
		tp->ecn_flags &= ~HPCCD_TCP_ECN_DEMAND_CWR;
	if (ca->ce_changes && (ca->ce_changes & 63) == 1)
		publish(sk, ca);      /* the receiver has no window ends: sample */
}

SEC("struct_ops/hpccd_dc_avoid")
void BPF_PROG(hpccd_dc_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops/hpccd_dc_undo")
__u32 BPF_PROG(hpccd_dc_undo, struct sock *sk)
{
	return hpccd__undo_cwnd(sk, ca_of(sk)->loss_cwnd);
}

/* The struct_ops map's name carries hpccd_ (bpf.cleanup_stale finds it by
 * that after a crash); the congestion control's name is "dctcp". */
SEC(".struct_ops")
struct tcp_congestion_ops hpccd_tcp_dctcp = {
	.init = (void *)hpccd_dc_init,
	.in_ack_event = (void *)hpccd_dc_ack,
	.ssthresh = (void *)hpccd_dc_ssth,
	.set_state = (void *)hpccd_dc_state,
	.cwnd_event = (void *)hpccd_dc_event,
	.cong_avoid = (void *)hpccd_dc_avoid,
	.undo_cwnd = (void *)hpccd_dc_undo,
	.flags = HPCCD_TCP_CONG_NEEDS_ECN | HPCCD_TCP_CONG_NON_RESTRICTED,
	.name = HPCCD_TCP_DCTCP_NAME,
};
