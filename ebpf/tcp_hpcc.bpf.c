// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * tcp_hpcc: the struct_ops TCP congestion control "hpcc" of the TCP-side
 * deployment of HPCC++ ([HPCC++2022] section 7.2; docs/architecture.md,
 * "Kernel TCP flows").
 *
 * The algorithm does not run here.  hpccd probes each kernel TCP flow once
 * per RTT while it has data in flight ([HPCC++2022] section 6.2.1), feeds the
 * INT of the responses to the HPCC core ([HPCC] Algorithm 1, the same C
 * code as the native transport) and writes the resulting window W and
 * pacing rate R = W / T into hpccd_tcp_win, keyed by the flow as tc_tracker
 * keys it.  This program enforces them: on every ACK (cong_control) it sets
 * snd_cwnd to W in segments and sk_pacing_rate to R, with the kernel's own
 * TCP pacing turned on (SK_PACING_NEEDED: there is no fq qdisc here).
 * cong_control replaces the kernel's cong_avoid, PRR reduction and pacing
 * update, so nothing else moves cwnd while a W applies.
 *
 * Modes, decided per ACK (counters: one MODE slot per ACK, in hpccd_tcpc_cnt):
 *  - HPCC: the flow has an entry whose telemetry is younger than stale_ns
 *    and the daemon is alive (daemon_alive: its heartbeat is younger than
 *    stale_ns, or its probe engine has no flow and sleeps and this flow is
 *    younger than stale_ns).
 *    cwnd = ceil(cwnd_bytes / a segment's bytes on the wire): W plus what
 *    the hosts' stacks hold of the flow at rate R (the engine's cwnd_for;
 *    pacing holds the rate to R = W / T, paced as R x mss / a segment's
 *    bytes on the wire: HPCC counts the wire's bytes, the kernel's pacer a
 *    segment's payload; set_window), or W alone once the entry is older
 *    than HPCCD_TCP_FRESH_SRTTS srtt (counted in W_ONLY); at least 2
 *    segments so that a receiver that delays ACKs still answers without
 *    its timer; the pacing rate keeps the rate of a W below 2 segments.
 *  - WINIT: no entry yet, daemon alive, and the socket took this CC less
 *    than stale_ns ago: W_init = B_NIC x T at the line rate B_NIC, from
 *    hpccd_tcp_cfg.  HPCC lets flows start at line rate ([HPCC++2022] section
 *    5, "allowing flows starting at line-rate"; [HPCC] section 3.2 sets
 *    W_init = B_NIC x T); the first probe response arrives one RTT after
 *    the flow is seen.
 *  - FALLBACK: no configuration, the daemon not alive (daemon_alive), a
 *    W older than stale_ns (no telemetry: probes lost or not answered), or
 *    still no W after stale_ns.  Then there is no congestion
 *    signal but loss, and the flow behaves like standard Reno (RFC 5681
 *    AIMD: the tcp_reno_cong_avoid kfunc, halving on loss, the kernel's
 *    RTO loss window), starting from its current window in congestion
 *    avoidance (ssthresh = cwnd when entering), paced like the kernel paces
 *    Reno (1.2 x cwnd / srtt, 2 x in slow start).  Why not keep the last W:
 *    a frozen W bounds the queue a flow can build only while the path stays
 *    as it was, and a daemon that is gone never notices a change; Reno is
 *    what every unmodified host on the same network does, so a flow that
 *    lost its telemetry is never more aggressive than its neighbours.  Why
 *    stale_ns before falling back: a W is a bound on inflight bytes, so
 *    applying it a little longer is safe, while a fallback at every late
 *    probe (a loaded 2-core lab host schedules the daemon late by
 *    milliseconds) would throw away HPCC's state.
 *    When fresh telemetry comes back (daemon restarted), HPCC resumes.
 *
 * Loss while in HPCC mode: HPCC's window comes from the network's state,
 * not from loss ([HPCC] section 3), so ssthresh() keeps cwnd and the next
 * ACK sets W again; the kernel still retransmits (and after an RTO starts
 * from its loss window until that ACK).  Losses are counted (HPCCD_TCPC_LOSS).
 *
 * The daemon learns from hpccd_tcp_cst what only the socket knows: snd_una
 * and snd_nxt (data in flight: probe or not), srtt (probe timeout), mss,
 * and the mode and cwnd applied.  Written at init and on every ACK, deleted
 * at release.
 *
 * Not ECN-capable (no TCP_CONG_NEEDS_ECN): HPCC needs no marks, and its
 * probes carry the flow's ECN bits (docs/wire-format.md).
 *
 * Concurrency: every hook runs under the socket lock; the private state
 * needs no atomics.  hpccd_tcp_win is read while the daemon may replace the
 * entry: a hash map update swaps the whole value (RCU), so one lookup sees
 * one W whole.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_endian.h>

#include "hpccd/build.h"      /* header lengths (and parse.h) */
#include "hpccd/kern_user.h"
#include "hpccd/tcp_cc.h"
#include "hpccd_maps.bpf.h"
#include "hpccd_tcp_sock.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#ifndef HPCCD_TCP_WIN_MAX
#define HPCCD_TCP_WIN_MAX 16384         /* flows with a daemon-written window */
#endif
#ifndef HPCCD_TCP_CST_MAX
#define HPCCD_TCP_CST_MAX 16384         /* flows running "hpcc" (LRU) */
#endif

#define HPCCD_MIN_CWND    2             /* segments; see the header comment */
#define HPCCD_USEC_PER_S  1000000ULL

/* W and R per flow, written by the daemon (struct hpccd_tcp_win). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HPCCD_TCP_WIN_MAX);
	__type(key, struct hpccd_flow_key);
	__type(value, struct hpccd_tcp_win);
} hpccd_tcp_win SEC(".maps");

/* W_init, R_init, stale_ns and the daemon's heartbeat; entry 0. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hpccd_tcp_cc_cfg);
} hpccd_tcp_cfg SEC(".maps");

/* The socket's view of each flow running "hpcc", for the daemon. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, HPCCD_TCP_CST_MAX);
	__type(key, struct hpccd_flow_key);
	__type(value, struct hpccd_tcp_cc_state);
} hpccd_tcp_cst SEC(".maps");

/* Per-CPU counters, one slot per enum hpccd_tcp_hpcc_counter. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HPCCD_TCPC_COUNTERS);
	__type(key, __u32);
	__type(value, struct hpccd_counter);
} hpccd_tcpc_cnt SEC(".maps");

extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;

/* Private state in icsk_ca_priv. */
struct hpcc_ca {
	__u64 init_ns;
	__u32 mode;           /* enum hpccd_tcp_cc_mode */
	__u32 loss_cwnd;      /* cwnd before the last fallback halving (undo) */
	/* The flow's key, taken once the connection exists: at release the
	 * local port may be gone already (tcp_set_state(TCP_CLOSE) unhashes
	 * the socket and clears inet_num before the CC is released). */
	struct hpccd_flow_key key;
};

static __always_inline struct hpcc_ca *ca_of(struct sock *sk)
{
	return (struct hpcc_ca *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

static __always_inline void count(__u32 slot, __u64 bytes)
{
	hpccd__count(&hpccd_tcpc_cnt, slot, bytes);
}

/* The flow's key into *k (on the stack: the verifier does not let a
 * pointer into the socket be a map key); taken from the socket once. */
static __always_inline struct hpccd_flow_key *key_of(struct sock *sk, struct hpcc_ca *ca,
						     struct hpccd_flow_key *k)
{
	if (!ca->key.proto)
		hpccd__sock_flow_key(sk, &ca->key);
	__builtin_memcpy(k, &ca->key, sizeof(*k));
	return k;
}

/* a - b > limit for CLOCK_MONOTONIC values, b possibly "after" a. */
static __always_inline int older_than(__u64 now, __u64 t, __u64 limit)
{
	return (__s64)(now - t) > (__s64)limit;
}

/* Whether the daemon counts as alive for this flow: its heartbeat is
 * younger than stale_ns; or its probe engine said it has no flow and
 * sleeps (idle_ns) and this flow is younger than stale_ns: the flow's first
 * segment with payload wakes the engine (tc_tracker's wake record), which
 * then writes the heartbeat again, so an engine without flows need not
 * wake to keep flows that do not exist alive.  A daemon killed while idle
 * leaves idle_ns set: its new flows run W_init (a window the daemon would
 * have given them too) for stale_ns, then the fallback; a daemon that
 * stops cleanly zeroes the configuration. */
static __always_inline int daemon_alive(const struct hpcc_ca *ca,
					const struct hpccd_tcp_cc_cfg *cfg, __u64 now)
{
	if (!cfg || !cfg->stale_ns || !cfg->heartbeat_ns)
		return 0;
	if (!older_than(now, cfg->heartbeat_ns, cfg->stale_ns))
		return 1;
	return cfg->idle_ns && !older_than(now, ca->init_ns, cfg->stale_ns);
}

/* The mode for this ACK, and the counter slot that says why. */
static __always_inline __u32 decide(const struct hpcc_ca *ca,
				    const struct hpccd_tcp_cc_cfg *cfg,
				    const struct hpccd_tcp_win *w, __u64 now, __u32 *slot)
{
	if (!daemon_alive(ca, cfg, now)) {
		*slot = HPCCD_TCPC_FB_NO_DAEMON;
		return HPCCD_TCP_MODE_FALLBACK;
	}
	if (w) {
		if (!older_than(now, w->updated_ns, cfg->stale_ns) && w->cwnd_bytes) {
			*slot = HPCCD_TCPC_USED_HPCC;
			return HPCCD_TCP_MODE_HPCC;
		}
		*slot = HPCCD_TCPC_FB_STALE;
		return HPCCD_TCP_MODE_FALLBACK;
	}
	if (ca->mode != HPCCD_TCP_MODE_FALLBACK && cfg->w_init_bytes &&
	    !older_than(now, ca->init_ns, cfg->stale_ns)) {
		*slot = HPCCD_TCPC_USED_WINIT;
		return HPCCD_TCP_MODE_WINIT;
	}
	*slot = HPCCD_TCPC_FB_NO_ENTRY;
	return HPCCD_TCP_MODE_FALLBACK;
}

/* Bytes a full segment of the flow takes on the wire: its payload (mss),
 * its TCP header with options, its IPv4 header (the TCP side's flows are
 * IPv4: hpccd__sock_flow_key) and the Ethernet header, the bytes the
 * bottleneck's counters (the INT's txBytes) and HPCC's B count. */
static __always_inline __u32 seg_wire(struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	__u32 mss = tp->mss_cache ? tp->mss_cache : 536;

	return mss + tp->tcp_header_len + HPCCD_IP4_HLEN + HPCCD_ETH_HLEN;
}

/* HPCC's W and R count bytes on the wire (the INT's byte counters and the
 * links' B do); the kernel counts payload: cwnd in segments of mss, and its
 * pacer paces an skb's len in the write queue, before any header is pushed
 * (tcp_update_skb_after_send).  So W becomes ceil(W / wire bytes of a
 * segment) segments and R is paced as R x mss / those bytes: written as
 * they were, a flow paced at the link's rate sent 1514 / 1448 = 1.046 of
 * it on the wire and queued whenever its timer fired on time. */
static __always_inline void set_window(struct sock *sk, __u64 bytes, __u64 rate)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	__u32 mss = tp->mss_cache ? tp->mss_cache : 536, wire = seg_wire(sk);
	__u64 segs = (bytes + wire - 1) / wire;

	if (segs < HPCCD_MIN_CWND)
		segs = HPCCD_MIN_CWND;
	if (segs > tp->snd_cwnd_clamp)
		segs = tp->snd_cwnd_clamp;
	tp->snd_cwnd = (__u32)segs;
	rate = rate * mss / wire;
	if (!rate || rate > sk->sk_max_pacing_rate)
		rate = sk->sk_max_pacing_rate;
	sk->sk_pacing_rate = rate;
}

/* Reno's pacing as the kernel computes it for a CC without cong_control:
 * 2 x cwnd / srtt in slow start, 1.2 x in congestion avoidance. */
static __always_inline void reno_pacing(struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	__u32 cwnd = tp->snd_cwnd, srtt8 = tp->srtt_us;
	__u64 rate;

	if (!srtt8)
		return;                          /* no RTT sample yet: leave it */
	if (tp->packets_out > cwnd)
		cwnd = tp->packets_out;
	/* mss x cwnd / (srtt_us / 8) bytes per us, x 1e6, x ratio / 100 */
	rate = (__u64)tp->mss_cache * cwnd * HPCCD_USEC_PER_S * 8 / srtt8;
	rate = rate * (tp->snd_cwnd < tp->snd_ssthresh / 2 ? 200 : 120) / 100;
	if (rate > sk->sk_max_pacing_rate)
		rate = sk->sk_max_pacing_rate;
	sk->sk_pacing_rate = rate;
}

static __always_inline void publish(struct sock *sk, struct hpcc_ca *ca, __u64 now, int ack)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct hpccd_tcp_cc_state *st, init = {};
	struct hpccd_flow_key kbuf, *key = key_of(sk, ca, &kbuf);

	st = bpf_map_lookup_elem(&hpccd_tcp_cst, key);
	if (!st) {
		init.init_ns = ca->init_ns;
		if (bpf_map_update_elem(&hpccd_tcp_cst, key, &init, BPF_ANY)) {
			count(HPCCD_TCPC_STATE_FAIL, 0);
			return;
		}
		st = bpf_map_lookup_elem(&hpccd_tcp_cst, key);
		if (!st)
			return;
	}
	if (ack) {
		st->last_ack_ns = now;
		st->acks += 1;
	}
	st->snd_una = tp->snd_una;
	st->snd_nxt = tp->snd_nxt;
	st->packets_out = tp->packets_out;
	st->srtt_us = tp->srtt_us >> 3;
	st->mss = tp->mss_cache;
	st->seg_wire = seg_wire(sk);
	st->cwnd = tp->snd_cwnd;
	st->ssthresh = tp->snd_ssthresh;
	st->mode = ca->mode;
}

/* Decide and apply; returns the mode.  `acked`: segments newly acked (0 at init). */
static __always_inline __u32 apply(struct sock *sk, __u32 ack, __u32 acked, __u64 acked_bytes)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct hpcc_ca *ca = ca_of(sk);
	struct hpccd_tcp_cc_cfg *cfg;
	struct hpccd_tcp_win *w;
	struct hpccd_flow_key kbuf;
	__u64 now = bpf_ktime_get_ns();
	__u32 zero = 0, slot = HPCCD_TCPC_FB_NO_DAEMON, mode, state;

	cfg = bpf_map_lookup_elem(&hpccd_tcp_cfg, &zero);
	w = bpf_map_lookup_elem(&hpccd_tcp_win, key_of(sk, ca, &kbuf));
	mode = decide(ca, cfg, w, now, &slot);
	count(slot, acked_bytes);

	if (mode == HPCCD_TCP_MODE_FALLBACK && ca->mode != HPCCD_TCP_MODE_FALLBACK) {
		/* Congestion avoidance from the window the flow has now. */
		tp->snd_ssthresh = tp->snd_cwnd > HPCCD_MIN_CWND ? tp->snd_cwnd : HPCCD_MIN_CWND;
		count(HPCCD_TCPC_ENTER_FALLBACK, 0);
	} else if (mode != HPCCD_TCP_MODE_FALLBACK && ca->mode == HPCCD_TCP_MODE_FALLBACK) {
		count(HPCCD_TCPC_LEAVE_FALLBACK, 0);
	}
	ca->mode = mode;

	if (mode == HPCCD_TCP_MODE_HPCC && w) {
		__u64 bytes = w->cwnd_bytes, fresh = (__u64)(tp->srtt_us >> 3) * 1000 *
						      HPCCD_TCP_FRESH_SRTTS;

		/* The hosts' share beyond W only while the engine keeps the
		 * entry fresh: a starved engine cannot lower R when the
		 * bottleneck fills, and W alone bounds the queue then. */
		if (fresh < HPCCD_TCP_FRESH_MIN_NS)
			fresh = HPCCD_TCP_FRESH_MIN_NS;
		if (w->w_bytes && w->w_bytes < bytes && older_than(now, w->updated_ns, fresh)) {
			bytes = w->w_bytes;
			count(HPCCD_TCPC_W_ONLY, acked_bytes);
		}
		set_window(sk, bytes, w->pacing_bps);
	} else if (mode == HPCCD_TCP_MODE_WINIT && cfg) {
		set_window(sk, cfg->w_init_bytes, cfg->rate_init_bps);
	} else {
		state = ((struct inet_connection_sock *)sk)->icsk_ca_state;
		if (state == TCP_CA_CWR || state == TCP_CA_Recovery) {
			/* A reduction is due (ssthresh() halved): take it at once,
			 * Reno's multiplicative decrease without PRR's pacing of it. */
			if (tp->snd_cwnd > tp->snd_ssthresh)
				tp->snd_cwnd = tp->snd_ssthresh;
		} else if (acked) {
			tcp_reno_cong_avoid(sk, ack, acked);
		}
		if (tp->snd_cwnd < 1)
			tp->snd_cwnd = 1;
		reno_pacing(sk);
	}
	publish(sk, ca, now, acked_bytes || acked);
	return mode;
}

/* What held the flow back as this ACK came (issue 19: is a flow that
 * leaves the link idle window-, pacing- or host-limited?), one slot at
 * most: its whole cwnd was in flight before the ACK (packets_out has
 * already lost the segments it acks); else its next send is due later
 * than now (TCP's internal pacing: tcp_wstamp_ns, the departure time of
 * its next skb, in CLOCK_MONOTONIC as bpf_ktime_get_ns()); else the
 * kernel's rate sample says the application left it idle; else TCP small
 * queues throttled it (TSQ_THROTTLED: its skbs below not yet freed); else
 * its pacing timer is armed though the time it waits for has passed (a
 * late timer).  None of them: it could have sent and had not (the ACK
 * itself, or the sender's thread, will send). */
static __always_inline void limited_by(struct sock *sk, const struct rate_sample *rs,
				       __u32 in_flight, __u32 cwnd, __u64 bytes)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;

	if (in_flight >= cwnd)
		count(HPCCD_TCPC_LIM_CWND, bytes);
	else if ((__s64)(tp->tcp_wstamp_ns - bpf_ktime_get_ns()) > 0)
		count(HPCCD_TCPC_LIM_PACING, bytes);
	else if (rs->is_app_limited)
		count(HPCCD_TCPC_LIM_APP, bytes);
	else if (sk->sk_tsq_flags & 1)          /* 1 << TSQ_THROTTLED */
		count(HPCCD_TCPC_LIM_TSQ, bytes);
	else if (tp->pacing_timer.state & 1)    /* HRTIMER_STATE_ENQUEUED */
		count(HPCCD_TCPC_LIM_TIMER, bytes);
}

SEC("struct_ops/hpccd_hc_init")
void BPF_PROG(hpccd_hc_init, struct sock *sk)
{
	struct hpcc_ca *ca = ca_of(sk);

	__builtin_memset(ca, 0, sizeof(*ca));
	ca->init_ns = bpf_ktime_get_ns();
	/* TCP's internal pacing (tcp_needs_internal_pacing): without an fq
	 * qdisc nobody else enforces sk_pacing_rate. */
	if (sk->sk_pacing_status == SK_PACING_NONE)
		sk->sk_pacing_status = SK_PACING_NEEDED;
	count(HPCCD_TCPC_INIT, 0);
	/* Listening and closed sockets have no flow yet: the first ACK decides. */
	if ((1 << sk->__sk_common.skc_state) & ((1 << 10) | (1 << 7)))
		return;
	apply(sk, 0, 0, 0);
}

SEC("struct_ops/hpccd_hc_ctrl")
void BPF_PROG(hpccd_hc_ctrl, struct sock *sk, __u32 ack, int flag,
	      const struct rate_sample *rs)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	__u32 acked = rs->acked_sacked;

	/* The ACK of our SYN is processed before the kernel initialises the
	 * CC (tcp_finish_connect -> tcp_init_transfer -> init): nothing of
	 * ours is set up yet, leave that ACK to the kernel's defaults. */
	__u32 in_flight = tp->packets_out + acked, cwnd = tp->snd_cwnd;
	__u64 bytes = (__u64)acked * tp->mss_cache;

	if (!ca_of(sk)->init_ns)
		return;
	if (apply(sk, ack, acked, bytes) == HPCCD_TCP_MODE_HPCC && acked)
		limited_by(sk, rs, in_flight, cwnd, bytes);
}

SEC("struct_ops/hpccd_hc_ssth")
__u32 BPF_PROG(hpccd_hc_ssth, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct hpcc_ca *ca = ca_of(sk);
	__u32 cwnd = tp->snd_cwnd;

	count(HPCCD_TCPC_LOSS, 0);
	if (ca->mode == HPCCD_TCP_MODE_HPCC || ca->mode == HPCCD_TCP_MODE_WINIT)
		return cwnd > HPCCD_MIN_CWND ? cwnd : HPCCD_MIN_CWND;
	ca->loss_cwnd = cwnd;
	return cwnd >> 1 > HPCCD_MIN_CWND ? cwnd >> 1 : HPCCD_MIN_CWND;   /* Reno */
}

SEC("struct_ops/hpccd_hc_undo")
__u32 BPF_PROG(hpccd_hc_undo, struct sock *sk)
{
	return hpccd__undo_cwnd(sk, ca_of(sk)->loss_cwnd);
}

SEC("struct_ops/hpccd_hc_release")
void BPF_PROG(hpccd_hc_release, struct sock *sk)
{
	struct hpcc_ca *ca = ca_of(sk);
	struct hpccd_flow_key kbuf;

	if (ca->key.proto)              /* else it never had a flow (listener) */
		bpf_map_delete_elem(&hpccd_tcp_cst, key_of(sk, ca, &kbuf));
	count(HPCCD_TCPC_RELEASE, 0);
}

/* Map name with the hpccd_ prefix (crash clean-up finds it by that); the
 * congestion control's name is "hpcc". */
SEC(".struct_ops")
struct tcp_congestion_ops hpccd_tcp_hpcc = {
	.init = (void *)hpccd_hc_init,
	.cong_control = (void *)hpccd_hc_ctrl,
	.ssthresh = (void *)hpccd_hc_ssth,
	.undo_cwnd = (void *)hpccd_hc_undo,
	.release = (void *)hpccd_hc_release,
	/* TCP_CONG_NON_RESTRICTED (include/net/tcp.h BIT(0)): unprivileged
	 * applications may select it, and a namespace may default to it. */
	.flags = 0x1,
	.name = HPCCD_TCP_HPCC_NAME,
};
