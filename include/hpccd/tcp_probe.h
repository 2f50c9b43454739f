/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The TCP-side probe engine ([HPCC++2022] section 7.2; docs/tcp-side.md,
 * "The probe engine"): the per-RTT part of daemon/hpccd/tcp_side/engine.py, in C.
 *
 * One engine serves the kernel TCP flows of one host (one network
 * namespace, one tc tracker, one XDP program).  It sleeps in epoll on two
 * BPF ring buffers and wakes only for:
 *   - a PROBE_RESP that xdp_host verified (hpccd_telem_rb): the response
 *     is fed to the HPCC core ([HPCC] Algorithm 1, fastpath/cc/hpcc.c),
 *     the new W and R = W / T go into hpccd_tcp_win, and the next probe
 *     leaves at once if the flow has data in flight ([HPCC++2022] section
 *     6.2.1: one probe per RTT while data is in flight), else the flow is
 *     parked;
 *   - a segment with payload of a parked flow (hpccd_tcp_wake, written by
 *     tc_tracker when it deletes the flow's hpccd_tcp_park entry): the
 *     first probe of the new burst leaves;
 *   - its timers while it has flows: the daemon's heartbeat in
 *     hpccd_tcp_cfg, the timeout of the earliest outstanding probe, and a
 *     sweep of its flows (ended sockets, parked flows whose wake record a
 *     full ring lost) every sweep_ns.
 * With no flow it does not wake at all: it writes hpccd_tcp_cfg once with
 * idle_ns set (the CC counts the daemon alive for a flow younger than
 * stale_ns, whose first segment wakes the engine) and sleeps until a record
 * comes; the heartbeat resumes at that wake.
 *
 * Threads: hpccd_tcpp_run() in one thread (it releases nothing but its own
 * mutex while waiting); hpccd_tcpp_stop(), _stats(), _flows() from any
 * other.  Everything returns 0 or a negative errno.
 */
#ifndef HPCCD_TCP_PROBE_H
#define HPCCD_TCP_PROBE_H

#ifndef HPCCD_CFFI_CDEF
#include <stddef.h>
#include <stdint.h>
#endif

#include "cc.h"

/* Buckets of the lateness histogram, microseconds (upper bounds; the last
 * bucket is everything above the previous bound). */
#define HPCCD_TCPP_LATE_BUCKETS 12
extern const uint64_t hpccd_tcpp_late_bounds_us[HPCCD_TCPP_LATE_BUCKETS - 1];

/* Buckets of the queue histogram: bucket k counts the responses whose
 * INT's largest queue was at least k and less than k + 1 frames of
 * mtu_bytes + 14 (the last: that many frames or more). */
#define HPCCD_TCPP_QLEN_BUCKETS 32

struct hpccd_tcpp_config {
	/* maps and rings, by fd (the caller keeps them open) */
	int tracker_fd;           /* tc_tracker: hpccd_tcp_flows */
	int park_fd;              /* tc_tracker: hpccd_tcp_park */
	int wake_rb_fd;           /* tc_tracker: hpccd_tcp_wake (ring) */
	int telem_fd;             /* xdp_host: hpccd_telem */
	int resp_rb_fd;           /* xdp_host: hpccd_telem_rb (ring) */
	int win_fd;               /* tcp_hpcc: hpccd_tcp_win */
	int cfg_fd;               /* tcp_hpcc: hpccd_tcp_cfg */
	int cst_fd;               /* tcp_hpcc: hpccd_tcp_cst */
	int sock_fd;              /* raw IPv4 socket (IPPROTO_RAW) in the flows' namespace */
	struct hpccd_hpcc_params hpcc;  /* every flow's HPCC parameters */
	uint64_t stale_ns;        /* written to hpccd_tcp_cfg (the CC's fallback age) */
	uint64_t heartbeat_ns;    /* period of the heartbeat while there are flows */
	uint64_t timeout_min_ns;  /* probe timeout: 3 x max(srtt, probe RTT) in [min, max] */
	uint64_t timeout_max_ns;
	uint64_t sweep_ns;        /* period of the sweep while there are flows */
	uint32_t max_flows;       /* flows at once (rounded up to a power of 2) */
	uint32_t t_from_rtt;      /* 1: T of a flow follows its measured RTTs (engine.c) */
	double t_rtt_factor;      /* T = factor x the flow's RTT bound, when t_from_rtt */
	double probe_gap_rtt;     /* next probe >= this x the flow's srtt after the last
				   * (1: once per RTT of the flow; 0: at each response) */
	double cwnd_rtt_gain;     /* cwnd = W + R x min(srtt - probe RTT, T) x this, the rate
				   * R = W / T enforced by pacing (engine.c, cwnd_for);
				   * 0: cwnd = W, R not capped at the path's slowest link */
	double host_cap_t;        /* the hosts' share in that cwnd counts at most this x the
				   * flow's T (0..64; 1: the cap measured safe with 8-segment
				   * trains on a loaded host, docs/tcp-side.md) */
	double path_rate_gain;    /* R at most this x the slowest link of the path (0.1..4;
				   * 1: the link's rate) */
	double solo_rate_gain;    /* a flow alone in its path group (path_rate_shared):
				   * R at most this x that link instead (0.1..4): the
				   * kernel's pacer loses what its timer is late */
	double pace_gain_max;     /* 1..4; above 1: the pacing rate written is the rate
				   * HPCC wants (R) x a gain of the flow's own, raised
				   * while it delivers less than R with the path's queues
				   * empty, lowered when it delivers more or a queue
				   * builds (engine.c, pace_feedback); 1: R as it is */
	uint8_t probe_dscp;
	uint8_t room;             /* INT hop records reserved in a probe */
	uint8_t path_rate_shared; /* 1: the flows of this host to one destination over one
				   * path share that cap: sum of their R at most it, each
				   * in proportion to its W (engine.c, pace_bps) */
	uint8_t path_rate_wc;     /* 1 (with path_rate_shared): work-conserving, a flow gets
				   * its W's part, or what the others' delivery rates leave
				   * of the link if more (engine.c, pace_bps, deliv_sample) */
	uint8_t app_limited_hold; /* 1: an increase of W computed from a response whose
				   * interval the flow did not use its window in (its
				   * application or host limited it) is not applied
				   * (engine.c, host_limited; RFC 7661's rule for cwnd) */
	uint8_t wake_lead;        /* 1: a flow's probe-gap timer is armed as much earlier
				   * than the probe is due as the engine's timed waits
				   * return late (measured, at most half the gap), so that
				   * the probe leaves when due (engine.c, lead_for) */
	uint8_t pad[2];
};

struct hpccd_tcpp_stats {
	uint64_t probes_sent, probes_answered, probes_lost, late_responses, send_errors;
	uint64_t windows_written, flows_started, flows_ended, flows_refused;
	uint64_t not_hpcc;        /* woken flows never run by "hpcc" (given up after 1 s) */
	uint64_t wakeups;         /* returns from epoll_wait */
	uint64_t resp_records, wake_records, unknown_records;
	uint64_t parks, wakes_missed; /* parked flows found in flight by the sweep */
	uint64_t heartbeats, sweeps;
	uint64_t idle_marks;       /* of the heartbeats, those that said idle (no flow) */
	/* lateness: from the event that allowed a probe (response received in
	 * XDP, or segment of a parked flow seen by tc) to the probe's sendto() */
	uint64_t late_hist[HPCCD_TCPP_LATE_BUCKETS];
	uint64_t late_sum_ns, late_n, late_max_ns;
	/* probes per RTT: while a flow's probes follow one another (no park),
	 * the sum of srtt over the sum of the intervals between them */
	uint64_t chain_rtt_ns, chain_interval_ns, chain_n;
	/* probes leave in batches, one sendmmsg() per wake: the calls, and
	 * the time spent in them (on veth, the packet's whole way through the
	 * lab runs inside the call) */
	uint64_t send_calls, send_ns;
	/* windows whose pacing rate their path group's share capped below
	 * their own cap (path_rate_shared, engine.c pace_bps) */
	uint64_t rate_shared;
	/* windows whose pacing rate went above their W's part because the
	 * group's other flows delivered less than theirs (path_rate_wc) */
	uint64_t rate_lent;
	/* flows that resumed after a park longer than their delivery window
	 * and claimed their written rate back (engine.c, grp_claim) */
	uint64_t rate_claimed;
	/* responses with a previous one of the flow (an interval measured);
	 * of which the flow delivered fewer bytes than W per srtt over the
	 * interval; of which at less than 3/4 of the pacing rate written
	 * for it (its application or host, not the network, left its window
	 * unused); of those, the ones HPCC's update raised W from, and of
	 * these the ones not applied (app_limited_hold; engine.c, host_limited) */
	uint64_t al_intervals, al_below_w, al_limited, al_raised, al_held;
	/* responses whose pacing gain the pacer's measured loss moved
	 * (pace_gain_max), and those a queue of the path lowered it at */
	uint64_t pace_fed, pace_lowered;
	/* over those intervals, every flow's: bits acked, and bits the pacing
	 * rate written for it (before any gain) allowed; their ratio is what
	 * its flows delivered of what HPCC asked, the kernel pacer's and the
	 * hosts' loss is 1 - that (the flows' pace_acked_bits/pace_want_bits,
	 * summed over the engine's life, ended flows included) */
	uint64_t pace_acked_bits, pace_want_bits;
	/* the engine's timed waits that returned by their timeout: how late,
	 * summed, and how many; the lead its probe-gap timers are armed with
	 * now (wake_lead; 0 without) */
	uint64_t wake_late_sum_ns, wake_late_n, wake_lead_ns;
	/* responses by the largest queue of their path, in frames (the train
	 * rule's measure of what the flows' trains queue: trains.segs_from_pacer) */
	uint64_t qlen_hist[HPCCD_TCPP_QLEN_BUCKETS];
	uint32_t flows;           /* flows known now */
	uint32_t pad;
};

struct hpccd_tcpp_flow_info {
	uint8_t key[16];          /* struct hpccd_flow_key */
	uint32_t flow_id;
	uint32_t parked;
	double W, U, rate_bps, T_ns;
	double W_max;             /* the window's cap, B_NIC x T */
	uint64_t T_changes;       /* times T was set (engine.c, follow_T) */
	uint64_t probes_sent, probes_answered, probes_lost, late_responses;
	uint64_t probe_rtt_ns;    /* EWMA (1/8) of probe RTT samples */
	uint64_t probe_rtt_min_ns;
	uint64_t last_rtt_ns;
	uint64_t chain_rtt_ns, chain_interval_ns;
	uint64_t probe_sent_ns;   /* CLOCK_MONOTONIC: its last probe left (was built) */
	uint64_t probe_due_ns;    /* when that probe was due by its schedule (engine.c,
				   * next(): wake_lead sends it up to a lead earlier) */
	uint32_t srtt_us;         /* the kernel's, from hpccd_tcp_cst */
	uint32_t rtt_min_us;      /* the least srtt seen (T follows it, engine.c follow_T) */
	uint64_t last_update_ns;  /* CLOCK_MONOTONIC of the last W written */
	uint64_t cwnd_bytes;      /* the cwnd written with it (engine.c, cwnd_for) */
	uint64_t qdelay_ns;       /* queueing delay of the last response's INT, all hops */
	uint64_t host_ns;         /* the kernel's srtt less the probe RTT, smoothed by 1/8
				   * per response: the hosts' share of the RTT */
	double deliv_bps;         /* its delivery rate, bits/s: the CC's snd_una over the
				   * last window of ACK time (path_rate_wc); 0: none yet */
	/* the pacer's loss (engine.c, pace_feedback): bits acked and bits the
	 * rate HPCC wanted (R before the gain) allowed over the intervals
	 * between its responses, summed since the flow started; the gain the
	 * last pacing rate was written with (1 without pace_gain_max) */
	double pace_acked_bits, pace_want_bits, pace_gain;
	uint16_t path_id;
	uint8_t nhop;
	uint8_t nhop_prev;        /* hops of hops_prev (same path), 0: none */
	uint8_t pad[4];
	uint8_t hops[64];         /* the last response's hop records, wire order */
	uint8_t hops_prev[64];    /* a response at least HPCCD_INT_UTIL_SPAN_NS before
				   * the last, at most two spans and a probe interval
				   * (the previous span's start; utilisation from the pair) */
};

struct hpccd_tcpp;

int hpccd_tcpp_new(const struct hpccd_tcpp_config *c, struct hpccd_tcpp **out);
/* Serve events until hpccd_tcpp_stop() or `timeout_ns` (< 0: no limit;
 * 0: what is pending now, then return).  Returns 0, or a negative errno
 * of a failure that stops the engine (the caller may call again).  With
 * no limit it sets the calling thread's timer slack to 1 us. */
int hpccd_tcpp_run(struct hpccd_tcpp *e, int64_t timeout_ns);
int hpccd_tcpp_stop(struct hpccd_tcpp *e);
int hpccd_tcpp_stats(struct hpccd_tcpp *e, struct hpccd_tcpp_stats *out);
/* Up to n flows into out; returns how many. */
int hpccd_tcpp_flows(struct hpccd_tcpp *e, struct hpccd_tcpp_flow_info *out, uint32_t n);
/* Deletes the window, telemetry and park entries of its flows; frees. */
void hpccd_tcpp_free(struct hpccd_tcpp *e);

/* The TCP-side PROBE (docs/wire-format.md, "TCP-side probe") of the flow
 * `key` (struct hpccd_flow_key, 16 bytes) as an IPv4 packet into buf:
 * DSCP `dscp` and ECN `ecn`, DF, TTL 64, id and IP checksum 0 (the kernel
 * fills them: IP_HDRINCL); TCP with the flow's ports, no flag, seq = the
 * probe number's low 32 bits, ack 0, window 0, correct checksum; INT
 * header (COLLECT, `room` empty hop records); hpccd header PROBE (len 8,
 * seq = probe number, ts), a zero tag slot.  Returns the length, or
 * -EINVAL (room > 8) / -ENOSPC (buf too small). */
int hpccd_tcpp_probe_build(uint8_t *buf, size_t len, const uint8_t *key, uint64_t probe_seq,
			   uint32_t flow_id, uint32_t ts, uint8_t dscp, uint8_t ecn,
			   uint8_t room);

#endif /* HPCCD_TCP_PROBE_H */
