/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Structures and constants shared by the struct_ops TCP congestion controls
 * of ebpf/ (tcp_hpcc.bpf.c "hpcc", tcp_dctcp.bpf.c "dctcp") and their
 * userspace (daemon/hpccd/tcp_side/engine.py, the tests).  The same rules as
 * hpccd/kern_user.h: fixed-width types, explicit padding, host byte order
 * except where a name says otherwise; no maps (they live in the one
 * program that uses them), no functions.
 *
 * Who may include this: the two struct_ops programs (after vmlinux.h), C
 * userspace (it pulls linux/types.h) and the cffi cdef of the loader's
 * module hpccd._bpf (with HPCCD_CFFI_CDEF defined).  Python reads the values
 * with `struct` formats that hpccd.bpf.abi.check_format holds to this
 * header's layouts, through hpccd._bpf, when the module is imported.
 *
 * Flows are keyed by struct hpccd_flow_key (hpccd/kern_user.h), the key of
 * tc_tracker's hpccd_tcp_flows: the 5-tuple as the local sender sees it, in
 * network order, proto 6.  The congestion control builds it from the
 * socket (skc_rcv_saddr, skc_daddr, skc_num, skc_dport), so the daemon
 * joins tracker, telemetry, window and state maps on one key.
 */
#ifndef HPCCD_TCP_CC_H
#define HPCCD_TCP_CC_H

#if !defined(HPCCD_CFFI_CDEF) && !defined(__bpf__)
#include <linux/types.h>
#endif

/* tcp_congestion_ops.name of the two programs (TCP_CA_NAME_MAX = 16). */
#define HPCCD_TCP_HPCC_NAME   "hpcc"
#define HPCCD_TCP_DCTCP_NAME  "dctcp"

/* ==== hpcc ================================================================ */

/* Value of the hash hpccd_tcp_win (key: struct hpccd_flow_key): the window
 * the daemon computed for one flow with the HPCC core ([HPCC] Algorithm
 * 1, fed by TCP-side probes, [HPCC++2022] section 7.2).  Written whole by the
 * daemon with one map update per new W; read by the congestion control on
 * every ACK. */
struct hpccd_tcp_win {
	__u64 cwnd_bytes;     /* the window to apply, bytes: W plus the hosts' share of
			       * the flow's RTT at rate R (fastpath/tcpside/engine.c,
			       * cwnd_for); the CC turns it into segments of mss_cache */
	__u64 pacing_bps;     /* R = W / T, BYTES per second (sk_pacing_rate's unit) */
	__u64 updated_ns;     /* CLOCK_MONOTONIC (bpf_ktime_get_ns) of the telemetry
			       * this W was computed from: its age decides "stale" */
	__u64 seq;            /* probe number of that telemetry (observability) */
	__u64 w_bytes;        /* HPCC's W itself: applied instead of cwnd_bytes once the
			       * entry is older than HPCCD_TCP_FRESH_SRTTS srtt (a starved
			       * engine leaves its flows the window of the network only) */
};

/* An hpccd_tcp_win entry is fresh for this many srtt of the flow (at least
 * HPCCD_TCP_FRESH_MIN_NS): then cwnd_bytes applies, afterwards w_bytes. */
#define HPCCD_TCP_FRESH_SRTTS  4
#define HPCCD_TCP_FRESH_MIN_NS 500000ULL

/* Value of the one-entry array hpccd_tcp_cfg: the daemon's settings and its
 * heartbeat.  All zero (never written) means "no daemon": every flow runs
 * the fallback. */
struct hpccd_tcp_cc_cfg {
	__u64 w_init_bytes;   /* W_init = B_NIC x T ([HPCC] section 3.2): the window of a
			       * flow before its first telemetry, while the daemon is alive */
	__u64 rate_init_bps;  /* pacing of such a flow, BYTES per second (B_NIC / 8) */
	__u64 stale_ns;       /* a W older than this, or a heartbeat older than this,
			       * is not applied: the fallback runs instead */
	__u64 heartbeat_ns;   /* CLOCK_MONOTONIC of the daemon's last heartbeat */
	__u64 idle_ns;        /* CLOCK_MONOTONIC since which the probe engine has no flow
			       * and sleeps without a heartbeat until a new flow's first
			       * segment wakes it (tc_tracker's wake record); 0 while it
			       * probes flows.  A flow younger than stale_ns then counts the
			       * daemon alive (tcp_hpcc.bpf.c, daemon_alive) */
};

/* What the CC did on one ACK (struct hpccd_tcp_cc_state.mode). */
enum hpccd_tcp_cc_mode {
	HPCCD_TCP_MODE_NONE = 0,        /* not decided yet */
	HPCCD_TCP_MODE_HPCC = 1,        /* cwnd and pacing from a fresh hpccd_tcp_win entry */
	HPCCD_TCP_MODE_WINIT = 2,       /* no entry yet, daemon alive, flow younger than
					 * stale_ns: W_init at line rate (start at line rate) */
	HPCCD_TCP_MODE_FALLBACK = 3,    /* Reno (RFC 5681 AIMD) from the current window */
};

/* Value of the LRU hash hpccd_tcp_cst (key: struct hpccd_flow_key): the
 * kernel's view of a flow that runs "hpcc", written by the CC at init and
 * on every ACK, deleted at release.  The daemon probes a flow only while
 * snd_nxt != snd_una (data in flight, [HPCC++2022] section 6.2.1) and times its
 * probes with srtt. */
struct hpccd_tcp_cc_state {
	__u64 init_ns;        /* CLOCK_MONOTONIC when the CC took the socket */
	__u64 last_ack_ns;    /* CLOCK_MONOTONIC of the last ACK processed */
	__u64 acks;           /* ACKs processed (cong_control calls) */
	__u32 snd_una;        /* host order, TCP sequence space */
	__u32 snd_nxt;
	__u32 packets_out;
	__u32 srtt_us;        /* smoothed RTT, microseconds (tp->srtt_us >> 3) */
	__u32 mss;            /* tp->mss_cache */
	__u32 cwnd;           /* segments, as set by the CC */
	__u32 ssthresh;
	__u32 mode;           /* enum hpccd_tcp_cc_mode of the last ACK */
	__u32 seg_wire;       /* bytes a full segment takes on the wire: mss, TCP
			       * header with options, IP and Ethernet headers */
	__u32 pad;
};

/* Slots of the per-CPU counter array hpccd_tcpc_cnt (struct hpccd_counter
 * of hpccd/kern_user.h; `bytes` holds acked bytes where noted).  Every
 * cong_control call (one per ACK) is in exactly one MODE slot. */
enum hpccd_tcp_hpcc_counter {
	/* mode of each ACK (bytes: bytes newly acked) */
	HPCCD_TCPC_USED_HPCC = 0,       /* fresh W applied */
	HPCCD_TCPC_USED_WINIT,          /* W_init applied (no telemetry yet) */
	HPCCD_TCPC_FB_STALE,            /* fallback: the flow's W is older than stale_ns */
	HPCCD_TCPC_FB_NO_ENTRY,         /* fallback: no W after stale_ns of the flow's life */
	HPCCD_TCPC_FB_NO_DAEMON,        /* fallback: no config, or heartbeat older than stale_ns
					 * and not an idle engine's young flow */
	/* events */
	HPCCD_TCPC_INIT,                /* sockets that took the CC */
	HPCCD_TCPC_RELEASE,             /* sockets that left it */
	HPCCD_TCPC_ENTER_FALLBACK,      /* mode changed to FALLBACK */
	HPCCD_TCPC_LEAVE_FALLBACK,      /* mode changed from FALLBACK to HPCC */
	HPCCD_TCPC_LOSS,                /* ssthresh() calls (loss or ECE episodes) */
	HPCCD_TCPC_STATE_FAIL,          /* hpccd_tcp_cst entry could not be created */
	HPCCD_TCPC_W_ONLY,              /* HPCC mode, entry no longer fresh: W without the
					 * hosts' share (bytes: acked) */
	/* what held an HPCC-mode ACK's flow back as the ACK came (bytes:
	 * acked; at most one each, in this order; none of them: its host) */
	HPCCD_TCPC_LIM_CWND,            /* its whole cwnd in flight (window-limited) */
	HPCCD_TCPC_LIM_PACING,          /* its next send due later (pacing-limited) */
	HPCCD_TCPC_LIM_APP,             /* the kernel's rate sample app-limited */
	HPCCD_TCPC_LIM_TSQ,             /* TCP small queues: its skbs not yet freed below */
	HPCCD_TCPC_LIM_TIMER,           /* its pacing timer armed, its due time passed */
	HPCCD_TCPC_COUNTERS,            /* number of slots */
};

/* ==== dctcp =============================================================== */

/* DCTCP.Alpha is kept scaled by 2^HPCCD_TCP_DCTCP_SCF_SHIFT ([DCTCP]
 * section 4: SCF = 65536), g = 2^-HPCCD_TCP_DCTCP_G_SHIFT = 1/16. */
#define HPCCD_TCP_DCTCP_SCF_SHIFT 16
#define HPCCD_TCP_DCTCP_SCF       (1u << HPCCD_TCP_DCTCP_SCF_SHIFT)
#define HPCCD_TCP_DCTCP_G_SHIFT   4

/* Value of the LRU hash hpccd_dctcp_st (key: struct hpccd_flow_key): the
 * DCTCP state of a flow, copied out at the end of every observation window
 * and on every DCTCP.CE change, for metrics and tests. */
struct hpccd_tcp_dctcp_state {
	__u64 windows;        /* observation windows closed (alpha updates) */
	__u64 bytes_acked;    /* all bytes acked (sum of DCTCP.BytesAcked) */
	__u64 bytes_marked;   /* of which with ECE (sum of DCTCP.BytesMarked) */
	__u64 ce_changes;     /* receiver: DCTCP.CE transitions (immediate ACKs) */
	__u32 alpha;          /* DCTCP.Alpha x SCF, 0..SCF */
	__u32 cwnd;           /* segments, when copied */
	__u32 ssthresh;
	__u32 ce_state;       /* receiver: DCTCP.CE */
	__u32 reductions;     /* ssthresh() calls: ECE or loss episodes */
	__u32 ecn_ok;         /* 1: ECN negotiated on this connection */
};

/* Slots of the per-CPU counter array hpccd_dctcp_cnt. */
enum hpccd_tcp_dctcp_counter {
	HPCCD_TCPD_INIT = 0,            /* sockets that took the CC with ECN negotiated */
	HPCCD_TCPD_NO_ECN,              /* sockets without ECN: switched to reno */
	HPCCD_TCPD_ACK,                 /* ACKs processed (bytes: bytes acked) */
	HPCCD_TCPD_ACK_ECE,             /* of which with ECE (bytes: bytes marked) */
	HPCCD_TCPD_WINDOW,              /* observation windows closed */
	HPCCD_TCPD_ECN_REDUCTION,       /* ssthresh() = cwnd (1 - alpha / 2) */
	HPCCD_TCPD_LOSS_RECOVERY,       /* fast-recovery halving (section 3.4) */
	HPCCD_TCPD_LOSS_RTO,            /* timeout (section 3.4) */
	HPCCD_TCPD_CE_CHANGE,           /* receiver: DCTCP.CE changed, immediate ACK */
	HPCCD_TCPD_CE_FLUSH,            /* receiver: delayed ACK sent first in the old state */
	HPCCD_TCPD_COUNTERS,
};

#ifndef HPCCD_CFFI_CDEF
_Static_assert(sizeof(struct hpccd_tcp_win) == 40, "window entry layout");
_Static_assert(sizeof(struct hpccd_tcp_cc_cfg) == 40, "config layout");
_Static_assert(sizeof(struct hpccd_tcp_cc_state) == 64, "cc state layout");
_Static_assert(sizeof(struct hpccd_tcp_dctcp_state) == 56, "dctcp state layout");
#endif

#endif /* HPCCD_TCP_CC_H */
