/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The native hpccd transport over AF_XDP (docs/architecture.md, "A packet";
 * docs/transport.md): one engine per interface queue, with its own UMEM
 * and AF_XDP socket (fill, completion, RX and TX rings) and one native
 * thread that the daemon starts and stops.  The thread is both ends of
 * every flow of that queue:
 *
 *   sender    scheduler (window W, pacing at R, round robin among flows)
 *             -> DATA frames built in the UMEM -> TX ring;
 *             ACK / NACK / NOTIFY from the RX ring -> the flow's algorithm
 *             (include/hpccd/cc.h, unchanged) -> new W and R;
 *             cumulative ACK, go-back-N on NACK, RTO with backoff.
 *   receiver  DATA -> in-order delivery to a sink (CRC-32 verify-and-
 *             discard, or a file descriptor), ACK per packet or every m
 *             with the DCTCP.CE machine, INT echoed in ACKs, Rx-HPCC
 *             NOTIFY once per T, NACK on a gap.
 *
 * Who may include this: the C fast path (fastpath/transport/transport.c) and
 * the cffi cdef (cffi_build/build_transport.py preprocesses it with
 * -DHPCCD_CFFI_CDEF).  Userspace only.  struct hpccd_tp is opaque.
 *
 * Threads.  hpccd_tp__start() starts the engine thread; hpccd_tp__stop()
 * joins it.  The thread holds the engine lock while it works on a batch
 * and releases it before it sleeps in ppoll() (socket, an eventfd for
 * stop and new flows, and a timeout = the next pacing, RTO or delayed-ACK
 * deadline): it never spins.  Every other call takes the same lock, so a
 * flow opened from Python is seen whole by the thread, and a snapshot is
 * consistent.  With HPCCD_TP_F_RUN_IN_CALLER the application's thread
 * runs the same loop while it waits (hpccd_tp__run, run.c) and the engine
 * thread serves what no caller waits for.
 *
 * Errors: negative errno; hpccd_tp__create() writes what failed, naming
 * the interface and queue, into the caller's buffer; the other calls into
 * the engine's own buffer (hpccd_tp__error()), naming the flow.
 */
#ifndef HPCCD_TRANSPORT_H
#define HPCCD_TRANSPORT_H

#ifndef HPCCD_CFFI_CDEF
#include <stddef.h>
#include <stdint.h>
#endif

#include "cc.h"

enum {
	/* sender and receiver flows per engine: cfg.max_flows and
	 * cfg.rx_flows, powers of two from HPCCD_TP_FLOWS_MIN to _MAX */
	HPCCD_TP_FLOWS_MIN = 64,
	HPCCD_TP_FLOWS_DEFAULT = 16384,
	HPCCD_TP_FLOWS_MAX = 65536,
	HPCCD_TP_ERR_MAX = 256,
	HPCCD_TP_N_TYPES = 8,           /* enum hpccd_type 1..7, [0] unused */
	HPCCD_TP_N_CLASSES = 11,        /* enum hpccd_wire_err 1..10, [0] unused */
	/* UMEM frame sizes: HPCCD_TP_FRAME_MIN or HPCCD_TP_FRAME_MAX (aligned
	 * chunk mode takes 2048 bytes up to a page; this kernel refuses larger
	 * chunks, also from huge pages).  A frame is 2 bytes into its chunk
	 * (NET_IP_ALIGN: headers from IPv4 on are 4-byte aligned, so the
	 * parser reads them in place); the kernel writes a received frame past
	 * its XDP headroom (256 bytes), so a chunk holds a frame of chunk - 258
	 * bytes: MTU 1776 in 2048-byte frames, 3824 in 4096 (the default:
	 * docs/transport.md "Frame size"). */
	HPCCD_TP_FRAME_MIN = 2048,
	HPCCD_TP_FRAME_MAX = 4096,
	HPCCD_TP_RX_HEADROOM = 256,     /* XDP_PACKET_HEADROOM */
};

/* Engine flags; the bind flags have XDP's values (checked below). */
enum {
	HPCCD_TP_F_COPY = 2,            /* XDP_COPY */
	HPCCD_TP_F_ZEROCOPY = 4,        /* XDP_ZEROCOPY */
	HPCCD_TP_F_NEED_WAKEUP = 8,     /* XDP_USE_NEED_WAKEUP */
	HPCCD_TP_F_NO_CSUM_CHECK = 256, /* receiver: do not verify UDP checksums */
	HPCCD_TP_F_NO_ECHO = 512,       /* receiver: no INT echo in ACKs */
	HPCCD_TP_F_NO_RXWIN = 1024,     /* receiver: no Rx-HPCC windows (its flows
					 * get the ACKs of the other algorithms) */
	HPCCD_TP_F_RAW = 2048,          /* receiver: count and recycle frames, parse
					 * nothing (the benchmark's raw ceiling) */
	HPCCD_TP_F_ECHO = 4096,         /* receiver: answer each completed flow with
					 * as many bytes (hpccd_tp__set_echo) */
	HPCCD_TP_F_BUSY_POLL = 8192,    /* the thread never sleeps: it polls the rings
					 * (lowest latency; one core at 100 %); with
					 * HPCCD_TP_F_RUN_IN_CALLER the caller polls
					 * while it waits and the thread sleeps */
	HPCCD_TP_F_NO_SG = 16384,       /* do not bind with XDP_USE_SG: no packet
					 * larger than one frame (multi-buffer is
					 * tried, and left when the driver refuses) */
	HPCCD_TP_F_CSUM_OFFLOAD = 32768, /* sender: leave DATA's UDP checksum to the
					 * device (AF_XDP TX metadata, Linux 6.8+;
					 * summed here when the kernel refuses it) */
	HPCCD_TP_F_RUN_IN_CALLER = 65536, /* callers run the loop: hpccd_tp__run(),
					 * and hpccd_tp__flow_open() sends at once
					 * (docs/transport.md "Run to completion") */
};

/* Where a receiver puts the bytes of its flows. */
enum hpccd_tp_sink {
	HPCCD_TP_SINK_VERIFY = 1,       /* CRC-32 (zlib's) of the in-order stream, discard */
	HPCCD_TP_SINK_FD = 2,           /* also write() the in-order stream to sink_fd */
	HPCCD_TP_SINK_COUNT = 3,        /* count the in-order bytes, check nothing (no
					 * CRC-32): an application that takes the
					 * bytes as they come, as iperf3's server;
					 * the flow's crc32 stays 0 */
};

/* Which data packets carry an INT padding (room > 0). */
enum hpccd_tp_int_mode {
	HPCCD_TP_INT_EVERY = 0,         /* every data packet */
	HPCCD_TP_INT_NTH = 1,           /* packets whose index % int_every == 0 */
	HPCCD_TP_INT_NONE = 2,          /* none, and no probes */
	HPCCD_TP_INT_PROBE = 3,         /* probe mode ([HPCC++2022] section 6.2.1): data
					 * packets carry none (room 0); one PROBE
					 * with int_room records per RTT while data
					 * is in flight; its PROBE_RESP feeds HPCC */
};

/* How a sender repairs losses. */
enum hpccd_tp_recovery {
	HPCCD_TP_SR = 0,                /* selective repeat: the receiver keeps
					 * out-of-order data and reports it in SACK
					 * blocks; the sender resends the holes only */
	HPCCD_TP_GBN = 1,               /* go-back-N ([HPCC] section 4.2's NIC): the
					 * receiver drops out-of-order data and NACKs;
					 * the sender resends from the NACKed byte */
};

/* Where a sender's bytes come from. */
enum hpccd_tp_src {
	HPCCD_TP_SRC_PATTERN = 1,       /* generated: hpccd_tp_pattern_fill(seed, ...) */
	HPCCD_TP_SRC_BUFFER = 2,        /* the caller's buffer, kept alive by the caller */
	HPCCD_TP_SRC_REPEAT = 3,        /* the caller's buffer of buf_len bytes, sent
					 * again and again: byte o is buf[o % buf_len]
					 * (an application that writes one buffer in a
					 * loop, as iperf3's client; the engine copies
					 * it into the UMEM as kernel TCP copies from
					 * user memory) */
};

enum hpccd_tp_state {
	HPCCD_TP_FREE = 0,
	HPCCD_TP_RUNNING = 1,
	HPCCD_TP_DONE = 2,              /* every byte acknowledged */
	HPCCD_TP_FAILED = 3,            /* err says why (-ETIMEDOUT: no progress;
					 * -ECONNRESET: the receiver lost the flow's
					 * state, e.g. its engine restarted) */
};

struct hpccd_tp_config {
	uint32_t flags;                 /* HPCCD_TP_F_* */
	uint32_t rx_frames;             /* UMEM frames for fill + RX; default 4096 */
	uint32_t tx_frames;             /* UMEM frames for TX; default 4096 */
	uint32_t frame_size;            /* HPCCD_TP_FRAME_MIN or _MAX; default 4096 (MTU up to 3824) */
	uint16_t udp_port;              /* default HPCCD_UDP_PORT_DEFAULT */
	uint8_t probe_dscp;             /* default HPCCD_PROBE_DSCP_DEFAULT */
	uint8_t pad0;
	uint32_t local_addr;            /* IPv4 of this host, host order (ACK source) */
	uint8_t tag_key[16];            /* SipHash key of the tags of ACK, NACK and
					 * PROBE_RESP (wire-format.md) */
	/* receiver */
	uint32_t sink;                  /* enum hpccd_tp_sink; default VERIFY */
	int32_t sink_fd;                /* HPCCD_TP_SINK_FD */
	uint32_t ack_every;             /* m of the DCTCP.CE machine; default 1 */
	uint32_t pad1;
	uint64_t delack_ns;             /* delayed-ACK flush; default 100000 */
	uint64_t nack_gap_ns;           /* at most one NACK per gap per this; default 200000 */
	struct hpccd_hpcc_params rx_hpcc; /* Rx-HPCC at the receiver (T, eta, B_NIC ...) */
	uint64_t sndbuf_bytes;          /* SO_SNDBUF of the socket (copy mode skbs); default 16 MiB */
	uint64_t coalesce_ns;           /* after a batch of frames, sleep this long before
					 * looking again instead of waking per frame
					 * (interrupt moderation); 0: off; default 20000 */
	/* receiver limits (docs/security.md "Limits"): */
	uint64_t rx_idle_ns;            /* a receiver flow not done and without DATA for
					 * this long may be recycled when the table is
					 * full (its sender died); default 30 s */
	uint32_t rx_peer_max;           /* receiver flows not done per source address;
					 * DATA of a new flow beyond it is dropped and
					 * counted (rx_peer_full); default 256 */
	/* receiver flow control: the receive window, in frames, that the live
	 * receiver flows share (each advertises rx_window / live flows, at
	 * least 2, times its payload size, in its ACKs and NACKs); it keeps
	 * a fast sender from overrunning this engine's RX ring and UMEM.
	 * UINT32_MAX (the default): 3/4 of the RX ring; more than the ring:
	 * the ring; 0: no window advertised (the sender's W alone). */
	uint32_t rx_window;
	/* sender flows open at once and receiver flows kept (powers of two,
	 * HPCCD_TP_FLOWS_MIN to _MAX; default HPCCD_TP_FLOWS_DEFAULT each);
	 * the scheduler's cost per packet does not grow with them */
	uint32_t max_flows;
	uint32_t rx_flows;
	int32_t cpu;                    /* the CPU the engine's thread runs on; -1: any */
	uint32_t pad3;
	/* receiver: DCQCN's notification point for flows whose DATA ask for
	 * it (HPCCD_AUX_CNP): at most one CNP per flow per cnp_ns while
	 * CE-marked DATA arrive; default 50000 (DCQCN's N) */
	uint64_t cnp_ns;
};

struct hpccd_tp_flow_cfg {
	uint32_t algo;                  /* enum hpccd_algo */
	uint32_t src;                   /* enum hpccd_tp_src */
	uint32_t saddr, daddr;          /* IPv4, host order */
	uint16_t sport, dport;          /* dport: the peer's hpccd port */
	uint8_t smac[6], dmac[6];       /* dmac: the next hop's */
	uint64_t bytes;                 /* flow size, >= 1 */
	const uint8_t *buf;             /* HPCCD_TP_SRC_BUFFER: bytes of the flow */
	uint64_t seed;                  /* HPCCD_TP_SRC_PATTERN */
	uint32_t mtu;                   /* IPv4 MTU; default 1500 */
	uint32_t int_mode;              /* enum hpccd_tp_int_mode */
	uint32_t int_every;             /* HPCCD_TP_INT_NTH: N */
	uint32_t int_room;              /* hop records reserved (probe mode: in
					 * the probes); default 5 */
	uint64_t line_rate_bps;         /* the NIC's rate: ceiling of every pacing rate */
	uint64_t burst_ns;              /* pacing credit kept at most (a flow with
					 * a longer packet time: plus under one, so
					 * that a late one keeps its phase);
					 * default 40000 */
	uint64_t rto_min_ns;            /* default 5 ms (lab RTTs are software: scheduling stalls) */
	uint64_t rto_max_ns;            /* default 200 ms */
	uint64_t timeout_ns;            /* no progress for this long fails the flow; 10 s */
	uint32_t ecn;                   /* 1: data packets ECT(0) (LDCP: first RTT aside) */
	uint32_t recovery;              /* enum hpccd_tp_recovery; default selective repeat */
	struct hpccd_hpcc_params hpcc;  /* HPCC, Rx-HPCC */
	struct hpccd_dctcp_params dctcp;
	struct hpccd_ldcp_params ldcp;
	uint64_t probe_timeout_ns;      /* HPCCD_TP_INT_PROBE: a probe unanswered this
					 * long is lost and the next one leaves;
					 * default 1 ms */
	struct hpccd_dcqcn_params dcqcn;  /* DCQCN (rate-based, CNPs) */
	struct hpccd_timely_params timely; /* TIMELY (rate-based, RTT samples) */
	/* DCQCN and TIMELY: 1 = "+win" ([HPCC] section 5.1, "DCQCN+win",
	 * "TIMELY+win"): bytes in flight bounded by a sending window "same as
	 * we use for HPCC", W = line_rate_bps x hpcc.T_ns (HPCC's W_init);
	 * 0 = none (the papers' algorithms) */
	uint32_t rate_win;
	uint32_t pad4;
	uint64_t buf_len;               /* HPCCD_TP_SRC_REPEAT: bytes of buf (>= 1) */
};

struct hpccd_tp_flow_stats {
	uint32_t flow_id;
	uint32_t state;                 /* enum hpccd_tp_state */
	uint32_t algo;
	int32_t err;
	uint64_t bytes;                 /* flow size */
	uint64_t snd_una, snd_nxt, snd_max;
	uint64_t start_ns, end_ns, fct_ns;  /* CLOCK_MONOTONIC; fct = end - start */
	uint64_t pkts, wire_bytes;      /* every DATA frame sent, frame bytes */
	uint64_t retx_pkts, retx_bytes; /* of which retransmissions */
	uint64_t int_pkts;              /* of which with an INT padding */
	uint64_t ect_pkts;              /* of which ECN-capable */
	uint64_t acks, nacks;           /* feedback received (tag verified) */
	uint64_t rx_windows;            /* Rx-HPCC: receiver windows applied */
	uint64_t ece_acks, int_acks;    /* ACKs with ECE; with INT echo */
	uint64_t cc_updates;            /* HPCC: W^c updates; others: reactions */
	uint64_t go_backs, rtos;        /* go-back-N on NACK; timeouts */
	uint64_t rtos_spurious;         /* timeouts whose first ACK acknowledged beyond
					 * the one packet resent: the data had arrived */
	uint64_t rtos_repeated;         /* timeouts while the last one's packet was
					 * still unacknowledged */
	uint64_t recoveries;            /* selective repeat: loss recoveries begun
					 * (NACK with SACK blocks, once per window) */
	/* feedback dropped, never applied ([HPCC++2022] section 9.1): ACK,
	 * NACK or CNP without its trailer (truncated) or whose tag did not verify
	 * (forged, corrupted, another key); whose fb_seq was not above the
	 * newest taken (replayed, or reordered behind newer feedback) */
	uint64_t bad_tags, fb_replayed;
	uint64_t srtt_ns, min_rtt_ns, rto_ns;
	/* probe mode: probes sent; answered (the outstanding one's response,
	 * tag verified); lost (timed out); late (a response to a probe
	 * already counted lost: not applied); bad tags (never applied).
	 * sent = answered + lost + (1 if one is outstanding). */
	uint64_t probes_sent, probes_answered, probes_lost, probes_late, probe_bad_tags;
	uint64_t probe_srtt_ns, probe_min_rtt_ns, probe_rtt_sum_ns; /* of answered probes */
	/* where the sending time went (as TCP_INFO's busy/rwnd_limited): time
	 * the pacing allowed a packet but the window W did not; pacing time
	 * lost because the engine came later than burst_ns after a packet's
	 * send time (the CPU, not the algorithm, held the flow back) */
	uint64_t wnd_limited_ns, pace_lost_ns;
	double window_bytes;            /* W (wire bytes; DCTCP/LDCP: cwnd converted) */
	double rate_bps;                /* pacing rate now */
	double U;                       /* HPCC: U; DCTCP: alpha; LDCP: cw in packets;
					 * DCQCN: alpha; TIMELY: normalised gradient */
	uint32_t mss;                   /* payload bytes per packet */
	uint32_t hdr_bytes;             /* frame bytes around the payload, INT room included */
	uint64_t cnps;                  /* CNPs received, tag and fb_seq checked
					 * (DCQCN; others ignore them) */
	/* HPCC: the last INT the core took (INT-echo ACK or probe response):
	 * its path and hops, decoded, counters unwrapped (the core's L); 0 hops:
	 * none yet, or another algorithm.  The daemon's hpccd_int_hop_* metrics. */
	uint32_t int_path_id, int_nhops;
	struct hpccd_int_rec int_hops[HPCCD_INT_MAX_HOPS];
};

struct hpccd_tp_rx_stats {
	uint32_t saddr;                 /* data sender, host order */
	uint32_t flow_id;
	uint16_t sport;
	uint8_t done;                   /* the FIN's byte was delivered */
	uint8_t pad0;
	int32_t err;                    /* sink write error */
	uint32_t crc32;                 /* of the bytes delivered in order */
	uint64_t bytes;                 /* delivered in order (= rcv_nxt) */
	uint64_t pkts, dup_pkts, ooo_pkts, ce_pkts, int_pkts;
	uint64_t held_pkts;             /* out-of-order packets kept (selective repeat) */
	uint64_t acks_sent, nacks_sent;
	uint64_t windows_sent;          /* of which carried an Rx-HPCC window */
	uint64_t first_ns, last_ns;     /* first DATA; the FIN's delivery (or last DATA) */
	uint64_t cnps_sent;             /* DCQCN notification point (HPCCD_AUX_CNP) */
	/* the last INT of the flow's data the receiver's core took (NewINT),
	 * as in hpccd_tp_flow_stats; 0 hops: none (no INT) */
	uint32_t int_path_id, int_nhops;
	struct hpccd_int_rec int_hops[HPCCD_INT_MAX_HOPS];
};

struct hpccd_tp_stats {
	uint64_t rx_frames, rx_bytes, tx_frames, tx_bytes;
	uint64_t by_type[HPCCD_TP_N_TYPES];     /* well-formed received, by type */
	uint64_t by_class[HPCCD_TP_N_CLASSES];  /* malformed received, by class */
	uint64_t not_hpccd;             /* frames that are no hpccd packet */
	uint64_t bad_csum;              /* DATA with a wrong UDP checksum (dropped) */
	uint64_t bad_body;              /* NOTIFY of the wrong length, unexpected types */
	uint64_t unknown_flow;          /* feedback for no open flow */
	uint64_t rx_table_full;         /* DATA of a new flow with no room */
	uint64_t tx_no_frame;           /* a frame was wanted and none was free */
	uint64_t ack_dropped;           /* feedback not sent for want of a frame */
	uint64_t completions;
	uint64_t probes_answered;       /* PROBEs this engine answered (XDP did not) */
	uint64_t probes_no_key;         /* PROBEs not answered: no tag key configured */
	uint64_t kicks, kick_again;     /* sendto() kicks; of which EAGAIN */
	uint64_t polls, poll_timeouts, wakeups;
	uint64_t loops;
	uint64_t timer_late_ns;         /* how late ppoll()'s timer wakes the thread
					 * (moving mean): it wakes that much early
					 * for a send time */
	uint64_t k_rx_dropped, k_rx_invalid_descs, k_tx_invalid_descs;
	uint64_t k_rx_ring_full, k_rx_fill_ring_empty, k_tx_ring_empty;
	uint32_t running;
	int32_t thread_err;
	uint32_t zerocopy;
	uint32_t tx_free;               /* TX frames free now */
	uint32_t pad_lim;
	/* limits (docs/security.md "Limits") */
	uint64_t flows_refused;         /* hpccd_tp__flow_open refused: every slot in use */
	uint64_t rx_recycled;           /* done receiver flows forgotten to make room */
	uint64_t rx_expired;            /* idle unfinished receiver flows forgotten to make room */
	uint64_t rx_peer_full;          /* DATA of a new flow refused: its peer is at rx_peer_max */
	uint64_t rx_probe_full;         /* DATA of a new flow refused: the receiver table's
					 * TP_RX_PROBE_MAX slots from its home hold
					 * unfinished flows (docs/security.md "Limits") */
	uint64_t rx_peer_table_full;    /* DATA of a new flow refused: its source address has
					 * no entry in the peer table and no free one within
					 * TP_RX_PROBE_MAX of its place (docs/security.md
					 * "Limits"); never admitted uncounted */
	uint64_t rx_live;               /* receiver flows not done now */
	uint64_t rx_used;               /* receiver table slots in use now */
	uint64_t rx_hold_full;          /* out-of-order DATA not kept: past the flow's
					 * hold slots or the engine's half of the RX
					 * frames (dropped; the sender resends it) */
	uint64_t rx_held;               /* RX frames held out of order now */
	uint64_t flows_running;         /* sender flows running now */
	uint64_t echo_replies, echo_failed;  /* HPCCD_TP_F_ECHO: replies opened; not opened */
	uint64_t rx_mb_pkts;            /* multi-buffer packets received (XDP_USE_SG) */
	uint64_t rx_mb_bad;             /* of more than 16 pieces or 64 KB: dropped */
	uint64_t tx_mb_pkts;            /* multi-buffer packets sent */
	uint32_t sg;                    /* bound with XDP_USE_SG: packets over one frame */
	uint32_t tx_csum_offload;       /* HPCCD_TP_F_CSUM_OFFLOAD asked and the kernel
					 * took the UMEM's TX metadata: DATA leave with
					 * the pseudo-header sum for the device to complete */
	uint64_t rx_done;               /* receiver flows completed so far */
	uint64_t run_loops, run_polls;  /* HPCCD_TP_F_RUN_IN_CALLER: loop passes run in
					 * callers' threads (hpccd_tp__run, and the
					 * pass of hpccd_tp__flow_open); their waits in
					 * ppoll() */
	uint64_t csum_unverified;       /* DATA whose UDP checksum field held exactly
					 * the pseudo-header sum: offloaded by their
					 * sender and completed by no one on the path
					 * (a veth), taken unchecked (docs/transport.md
					 * "Checksum offload") */
};

struct hpccd_tp;

void hpccd_tp_config_default(struct hpccd_tp_config *c);
void hpccd_tp_flow_cfg_default(struct hpccd_tp_flow_cfg *c);

/* UMEM + socket with RX and TX rings on ifname's queue queue_id, in the
 * calling thread's network namespace. */
int hpccd_tp__create(const char *ifname, uint32_t queue_id, const struct hpccd_tp_config *cfg,
		     struct hpccd_tp **out, char *err, size_t err_size);
int hpccd_tp__fd(const struct hpccd_tp *t);
/* The largest flow MTU this engine's frames carry (and its peers', when
 * they have the same frame size, receive). */
uint32_t hpccd_tp__mtu_max(const struct hpccd_tp *t);
int hpccd_tp__start(struct hpccd_tp *t);
int hpccd_tp__stop(struct hpccd_tp *t);
/* Open a sender flow; *flow_id identifies it from then on.  It starts at
 * once when the thread runs. */
/* Run to completion (HPCCD_TP_F_RUN_IN_CALLER, docs/transport.md): the
 * calling thread runs the engine's loop -- the thread's own passes, its
 * wait in ppoll() on the socket -- until the sender flow *flow_id (if
 * flow_id is not NULL) is no longer running, or the engine has completed
 * more receiver flows than *rx_done (UINT64_MAX: not waited for), or
 * timeout_ns passed (-ETIMEDOUT).  *rx_done is set to the count on
 * return.  While a caller is inside, the engine's thread leaves the
 * socket to it and keeps only its timer and eventfd; when none is, the
 * thread serves everything.  One caller at a time: -EBUSY for a second
 * one; -ESHUTDOWN once the engine is stopped; the engine must be started. */
int hpccd_tp__run(struct hpccd_tp *t, const uint32_t *flow_id, uint64_t *rx_done,
		  uint64_t timeout_ns);
/* A request: hpccd_tp__run that first takes the socket, then opens flow c
 * (*flow_id set) and sends it from the same pass, so that nothing runs
 * between the request's send and the wait for its answer.  Waits for the
 * flow itself when rx_done is NULL or *rx_done is UINT64_MAX.  The open's
 * errors as hpccd_tp__flow_open's. */
int hpccd_tp__request(struct hpccd_tp *t, const struct hpccd_tp_flow_cfg *c, uint32_t *flow_id,
		      uint64_t *rx_done, uint64_t timeout_ns);
int hpccd_tp__flow_open(struct hpccd_tp *t, const struct hpccd_tp_flow_cfg *c,
			uint32_t *flow_id);
int hpccd_tp__flow_stats(struct hpccd_tp *t, uint32_t flow_id, struct hpccd_tp_flow_stats *out);
/* Forget a flow (running or not): its buffer is no longer read after this. */
int hpccd_tp__flow_close(struct hpccd_tp *t, uint32_t flow_id);
/* The raw ceiling (fastpath/transport/raw.c): send `frames` copies of one
 * DATA frame of c->mtu bytes to c's peer as fast as the TX ring takes
 * them; hpccd_tp__raw_left() says how many are still to go. */
int hpccd_tp__raw_send(struct hpccd_tp *t, const struct hpccd_tp_flow_cfg *c, uint64_t frames);
int hpccd_tp__raw_left(struct hpccd_tp *t, uint64_t *left);
/* The settings of the echo responder's replies (HPCCD_TP_F_ECHO); the
 * addresses, size and bytes of each reply come from the flow it answers. */
int hpccd_tp__set_echo(struct hpccd_tp *t, const struct hpccd_tp_flow_cfg *c);
/* Receiver flows, up to max; returns how many were written. */
int hpccd_tp__rx_flows(struct hpccd_tp *t, struct hpccd_tp_rx_stats *out, uint32_t max);
/* Forget the receiver flows that are done. Returns how many. */
int hpccd_tp__rx_reap(struct hpccd_tp *t);
/* Forget every receiver flow, done or not: an unfinished one as if it had
 * expired (rx_idle_ns), so that it no longer takes a share of the receive
 * window or counts in Rx-HPCC's N -- between the runs of an experiment
 * whose senders closed their flows mid-stream.  A packet of such a flow
 * that comes later starts it again.  Returns how many were unfinished. */
int hpccd_tp__rx_reset(struct hpccd_tp *t);
/* The receiver's Rx-HPCC parameters (hpccd_tp_config's rx_hpcc, checked
 * as hpccd_tp__create checks them) for the receiver flows that start from
 * now on; the running ones keep theirs (the daemon's reload of [hpcc]). */
int hpccd_tp__set_rx_hpcc(struct hpccd_tp *t, const struct hpccd_hpcc_params *p);
/* Replace the integrity key of NOTIFY and PROBE_RESP tags (key rotation
 * without restart): feedback tagged with the old key is dropped and
 * counted from the next frame on. */
int hpccd_tp__set_tag_key(struct hpccd_tp *t, const uint8_t *key16);
int hpccd_tp__stats(struct hpccd_tp *t, struct hpccd_tp_stats *out);
const char *hpccd_tp__error(const struct hpccd_tp *t);
void hpccd_tp__destroy(struct hpccd_tp *t);

/* The generated byte stream of HPCCD_TP_SRC_PATTERN: byte o is byte o % 8
 * (little-endian) of splitmix64(seed + o / 8). */
void hpccd_tp_pattern_fill(uint64_t seed, uint64_t offset, uint8_t *buf, size_t len);
/* zlib's crc32 of the pattern's bytes [0, len). */
uint32_t hpccd_tp_pattern_crc32(uint64_t seed, uint64_t len);
/* zlib's crc32, for buffers (the receiver's checksum). */
uint32_t hpccd_tp_crc32(uint32_t crc, const uint8_t *buf, size_t len);

#ifndef HPCCD_CFFI_CDEF
#include <linux/if_xdp.h>
#include "wire.h"
_Static_assert(HPCCD_TP_F_COPY == XDP_COPY, "bind flag");
_Static_assert(HPCCD_TP_F_ZEROCOPY == XDP_ZEROCOPY, "bind flag");
_Static_assert(HPCCD_TP_F_NEED_WAKEUP == XDP_USE_NEED_WAKEUP, "bind flag");
_Static_assert((HPCCD_TP_FLOWS_DEFAULT & (HPCCD_TP_FLOWS_DEFAULT - 1)) == 0, "power of two");
_Static_assert((int)HPCCD_TP_N_TYPES == (int)HPCCD_T_MAX + 1, "one counter per type");
_Static_assert((int)HPCCD_TP_N_CLASSES == (int)HPCCD_E_MAX, "one counter per class");
#endif

#endif /* HPCCD_TRANSPORT_H */
