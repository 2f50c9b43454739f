/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * hpccd congestion-control core: HPCC (sender, [HPCC] Algorithm 1),
 * Rx-HPCC (receiver, [HPCC++2020] section 6.2 / [HPCC++2022] section 6.3.2),
 * DCTCP ([DCTCP] section 3), LDCP ([LDCP] section 2), and the HPCC
 * paper's two RDMA baselines ([HPCC] section 5.1): DCQCN (Zhu et al.,
 * SIGCOMM 2015, section 3.1) and TIMELY (Mittal et al., SIGCOMM 2015,
 * section 4, Algorithm 1).
 *
 * Who may include this: the C fast path, the benchmark and the cffi cdef
 * (cffi_build/build_cc.py feeds it through `cc -E -P -DHPCCD_CFFI_CDEF`).
 * Not BPF.
 *
 * Rules of the core: pure state machines, no I/O, no allocation, one
 * struct per flow, every entry point O(hops).  Functions return 0 or a
 * negative errno; the `why` out-parameter of the init functions names the
 * parameter at fault (a static string).
 *
 * Numeric type: windows, U and rates are IEEE-754 binary64 (`double`).
 * The core is compiled with -ffp-contract=off and without -ffast-math
 * (fastpath/cc/numeric.cflags, read by every build of the core), so
 * the same event sequence gives the same bits on every x86-64/aarch64
 * build (no FMA contraction, no reassociation).  Byte sequence numbers and
 * DCTCP state are exact integers.
 */
#ifndef HPCCD_CC_H
#define HPCCD_CC_H

#ifndef HPCCD_CFFI_CDEF
#include <stddef.h>
#include <stdint.h>
#endif

#include "int_hop.h"

enum hpccd_algo {
	HPCCD_ALGO_HPCC = 1,     /* sender-based HPCC, NewAck per ACK */
	HPCCD_ALGO_RXHPCC = 2,   /* receiver-based HPCC, NewINT per packet */
	HPCCD_ALGO_DCTCP = 3,
	HPCCD_ALGO_LDCP = 4,
	HPCCD_ALGO_DCQCN = 5,    /* rate-based, CNPs from the receiver */
	HPCCD_ALGO_TIMELY = 6,   /* rate-based, RTT samples */
};

enum {
	HPCCD_CC_MAX_HOPS = HPCCD_INT_MAX_HOPS,
	HPCCD_CC_SPEED_CODES = HPCCD_SPEED_CODES,
};

/* ------------------------------------------------------------------ */
/* INT decoding ([HPCC] section 4.1)                                 */
/* ------------------------------------------------------------------ */

/* Speed of code `code` in Mbit/s, 0 for unknown codes. */
uint32_t hpccd_int_speed_mbps(uint32_t code);
/* Code whose speed is exactly `bps`, or 0 (HPCCD_SPEED_UNKNOWN). */
uint32_t hpccd_int_speed_code(uint64_t bps);

/* Fields of one wire hop, not yet unwrapped. */
struct hpccd_int_fields {
	uint32_t speed_code;
	uint32_t ts;        /* ns mod 2^24 */
	uint32_t tx_units;  /* 128 B units mod 2^20 */
	uint32_t qlen_units;/* 80 B units, saturated at 2^15-1 */
};

void hpccd_int_hop_unpack(const struct hpccd_int_hop_wire *w,
			  struct hpccd_int_fields *f);
/* Encoder used by tests, the lab switch's userspace twin and fuzzers:
 * rejects (-ERANGE) a field that does not fit, never truncates silently. */
int hpccd_int_hop_pack(const struct hpccd_int_fields *f,
		       struct hpccd_int_hop_wire *w);

/* ------------------------------------------------------------------ */
/* HPCC and Rx-HPCC                                                    */
/* ------------------------------------------------------------------ */

/* Parameters (names as in [HPCC] section 3.3 / Algorithm 1).  A zero in
 * a field marked "derived" asks for the derived default. */
struct hpccd_hpcc_params {
	double T_ns;            /* base RTT T; default 13000 ([HPCC] section 5.1) */
	double eta;             /* target utilisation; default 0.95 */
	uint32_t max_stage;     /* maxStage; default 5 */
	uint32_t N_flows;       /* N for the W_AI rule of thumb; default 100 */
	double w_ai_bytes;      /* derived: W_init (1 - eta) / N (section 3.3) */
	uint64_t line_rate_bps; /* B_NIC; default 100 Gbit/s */
	uint32_t mtu_bytes;     /* default 1000 ([HPCC] section 5.1) */
	double w_init_bytes;    /* derived: B_NIC x T (section 3.2) */
	double w_min_bytes;     /* derived: mtu_bytes */
	double w_max_bytes;     /* derived: w_init_bytes */
	double u_init;          /* initial U of the EWMA; default 0 */
	/* Research switch ([HPCC] section 5.4, Figure 13): how NewAck reacts.
	 * HPCCD_HPCC_REACT_HPCC (0, the default): Algorithm 1, per ACK against
	 * the reference window W^c updated once per RTT.  _PER_RTT: the
	 * reference window mechanism off, W changes once per RTT only (line
	 * 26 measures U but leaves W at W^c).  _PER_ACK: every ACK updates W^c
	 * (line 23 on every ACK).  Sender-based NewAck only. */
	uint32_t reaction;
	uint32_t pad0;
};

enum hpccd_hpcc_reaction {
	HPCCD_HPCC_REACT_HPCC = 0,
	HPCCD_HPCC_REACT_PER_RTT = 1,
	HPCCD_HPCC_REACT_PER_ACK = 2,
};

struct hpccd_hpcc {
	/* configuration (hot copies) */
	double T, inv_T, eta, w_ai, w_ai_cfg, w_init, w_min, w_max;
	uint32_t max_stage;
	uint32_t mode;             /* HPCCD_ALGO_HPCC or HPCCD_ALGO_RXHPCC */
	/* Algorithm 1 state */
	double W, Wc, U;
	uint32_t inc_stage;
	uint32_t path_id;
	uint64_t last_update_seq;  /* NewAck, line 22 */
	uint64_t last_update_time; /* NewINT, line 29 */
	uint64_t last_rx_local_ns; /* local time of the last record (unwrap guard) */
	uint64_t unwrap_horizon_ns;/* how long L stays unwrappable; follows L's speeds */
	uint32_t n_hops;           /* hops in L; 0 = no record yet */
	uint32_t bottleneck_hop;   /* hop that gave max u' at the last update */
	uint32_t active_flows;     /* Rx-HPCC: receiver-measured N, 0 = unknown */
	uint32_t have_L;           /* L holds a record (first ACK seen on this path) */
	uint32_t reaction;         /* enum hpccd_hpcc_reaction (research switch) */
	struct hpccd_int_rec L[HPCCD_INT_MAX_HOPS];
	double L_inv_B[HPCCD_INT_MAX_HOPS]; /* 1/B in ns per byte, cached per hop */
	/* counters */
	uint64_t n_events, n_wc_updates, n_path_resets, n_stale_resets;
	uint64_t n_bad_hops, n_notify;
};

void hpccd_hpcc_params_default(struct hpccd_hpcc_params *p);
int hpccd_hpcc_init(struct hpccd_hpcc *s, const struct hpccd_hpcc_params *p,
		    uint32_t mode, const char **why);

/* NewAck (Algorithm 1 lines 21-27) with decoded hops.  `path_id_valid` = 0
 * means the caller has no path id (the trace format's optional field).
 * Returns 1 when W^c was updated, 0 when not, negative errno on bad input. */
int hpccd_hpcc_new_ack(struct hpccd_hpcc *s, uint64_t seq, uint64_t snd_nxt,
		       uint32_t path_id, int path_id_valid,
		       const struct hpccd_int_rec *hops, uint32_t n_hops);

/* NewINT ([HPCC++2020] section 6.2, lines 28-34) with decoded hops.  Returns 1 when a
 * notification carrying W must be sent, 0 when not, negative errno. */
int hpccd_hpcc_new_int(struct hpccd_hpcc *s, uint64_t now_ns,
		       uint32_t path_id, int path_id_valid,
		       const struct hpccd_int_rec *hops, uint32_t n_hops);

/* Decode raw wire hops for this flow: unwrap each narrow counter against
 * the flow's last record L (modular difference), convert units.  When the
 * local time since the last record exceeds the unambiguous range of any
 * counter, or there is no record, the values are taken as a fresh start.
 * Returns the number of usable hops written to `out`. */
uint32_t hpccd_hpcc_decode_hops(const struct hpccd_hpcc *s, uint64_t now_ns,
				const struct hpccd_int_hop_wire *w,
				uint32_t n_hops, struct hpccd_int_rec *out);

/* Decode and update in one call, as the AF_XDP data path uses them. */
int hpccd_hpcc_new_ack_wire(struct hpccd_hpcc *s, uint64_t now_ns,
			    uint64_t seq, uint64_t snd_nxt, uint32_t path_id,
			    const struct hpccd_int_hop_wire *w, uint32_t n_hops);
int hpccd_hpcc_new_int_wire(struct hpccd_hpcc *s, uint64_t now_ns,
			    uint32_t path_id, const struct hpccd_int_hop_wire *w,
			    uint32_t n_hops);

/* Pacing rate R = W / T (Algorithm 1 line 27), in bit/s. */
double hpccd_hpcc_rate_bps(const struct hpccd_hpcc *s);
/* Rx-HPCC: the receiver's current count of concurrent flows N ([HPCC++2022]
 * section 6.3.2); W_AI adapts to W_init (1 - eta) / N while the last hop
 * is the bottleneck.  0 restores the configured W_AI. */
void hpccd_hpcc_set_active_flows(struct hpccd_hpcc *s, uint32_t n);

/* Batch interface (one call per array of events, for the replay tool and
 * the Python API).  An event carries what either NewAck or NewINT needs. */
struct hpccd_hpcc_event {
	uint64_t seq;
	uint64_t snd_nxt;
	uint64_t now_ns;
	uint32_t path_id;
	uint8_t path_id_valid;
	uint8_t n_hops;
	uint16_t active_flows;     /* Rx-HPCC: 0 = unchanged */
	struct hpccd_int_rec hops[HPCCD_INT_MAX_HOPS];
};

struct hpccd_hpcc_out {
	double W_bytes, Wc_bytes, U, rate_bps;
	uint32_t inc_stage;
	uint32_t flag;             /* HPCC: W^c updated; Rx-HPCC: notify */
};

int hpccd_hpcc_run(struct hpccd_hpcc *s, const struct hpccd_hpcc_event *ev,
		   struct hpccd_hpcc_out *out, size_t n);

/* ------------------------------------------------------------------ */
/* DCTCP ([DCTCP])                                                    */
/* ------------------------------------------------------------------ */

enum hpccd_loss {
	HPCCD_LOSS_NONE = 0,
	HPCCD_LOSS_FAST = 1,       /* inferred by dup-ACK/NACK: conventional halving */
	HPCCD_LOSS_RTO = 2,        /* retransmission timeout: loss window */
};

struct hpccd_dctcp_params {
	uint32_t g_shift;          /* g = 2^-g_shift; default 4 (g = 1/16, section 4) */
	uint32_t mtu_bytes;        /* SMSS; default 1000 */
	uint64_t init_cwnd_bytes;  /* derived: 10 x mtu_bytes */
	uint64_t ssthresh_bytes;   /* initial ssthresh; derived: unlimited */
	uint32_t alpha_reset_on_loss; /* section 4 "MAY": reset alpha on loss; default 0 */
};

#define HPCCD_DCTCP_SCF_SHIFT 16
#define HPCCD_DCTCP_SCF (1u << HPCCD_DCTCP_SCF_SHIFT)  /* [DCTCP] section 4: SCF = 65536 */
enum { HPCCD_CC_DCTCP_SCF = HPCCD_DCTCP_SCF };

struct hpccd_dctcp {
	/* what every ACK reads or writes first, then what a loss or a cut
	 * does (the transport engine keeps the first part in a flow's hot
	 * cache lines: fastpath/transport/tp.h) */
	uint32_t shf, mss;
	uint32_t alpha;            /* DCTCP.Alpha scaled by SCF, in [0, SCF] */
	uint32_t after_rto;        /* slow start after a timeout until reduce_end is acked */
	uint64_t cwnd, ssthresh;
	uint64_t snd_una;
	uint64_t window_end;       /* DCTCP.WindowEnd */
	uint64_t bytes_acked;      /* DCTCP.BytesAcked */
	uint64_t bytes_marked;     /* DCTCP.BytesMarked */
	uint64_t reduce_end;       /* no further reduction (nor growth after an ECE or
				    * fast-loss cut) until snd_una reaches this */
	uint64_t ca_acc;           /* congestion-avoidance byte counter */
	uint32_t alpha_reset_on_loss;
	uint32_t pad0;
	uint64_t n_ece_reductions, n_fast_losses, n_rtos;
};

void hpccd_dctcp_params_default(struct hpccd_dctcp_params *p);
int hpccd_dctcp_init(struct hpccd_dctcp *s, const struct hpccd_dctcp_params *p,
		     const char **why);
/* One acceptable ACK (section 3.3 steps 1-9), then the loss reaction of
 * section 3.4 if `loss` is not HPCCD_LOSS_NONE. */
void hpccd_dctcp_on_ack(struct hpccd_dctcp *s, uint64_t ack, uint64_t snd_nxt,
			int ece, int loss);

/* Receiver: the DCTCP.CE state machine of section 3.2 with delayed-ACK
 * factor m.  on_packet() says which ACKs to send now (0, 1 or 2: on a CE
 * change, one for the packets received in the old state, then one for
 * the new packet, as section 3.2 allows to keep alpha exact). */
struct hpccd_dctcp_rx {
	uint32_t m;                /* delayed ACK factor */
	uint32_t ce;               /* DCTCP.CE */
	uint32_t pending;          /* packets received and not yet acknowledged */
	uint32_t pad0;
	uint64_t last_ack_seq;     /* cumulative ACK point after the last packet */
};

struct hpccd_ack_req {
	uint64_t ack_seq;
	uint32_t ece;
	uint32_t pad0;
};

int hpccd_dctcp_rx_init(struct hpccd_dctcp_rx *r, uint32_t m);
uint32_t hpccd_dctcp_rx_on_packet(struct hpccd_dctcp_rx *r, int ce,
				  uint64_t ack_seq, struct hpccd_ack_req out[2]);
/* Delayed-ACK timer fired: acknowledge what is pending (0 or 1 ACK). */
uint32_t hpccd_dctcp_rx_flush(struct hpccd_dctcp_rx *r, struct hpccd_ack_req *out);

struct hpccd_dctcp_event {
	uint64_t ack;
	uint64_t snd_nxt;
	uint32_t ece;
	uint32_t loss;             /* enum hpccd_loss */
};

struct hpccd_dctcp_out {
	uint64_t cwnd_bytes;
	double alpha;              /* DCTCP.Alpha as a fraction */
};

int hpccd_dctcp_run(struct hpccd_dctcp *s, const struct hpccd_dctcp_event *ev,
		    struct hpccd_dctcp_out *out, size_t n);

/* ------------------------------------------------------------------ */
/* LDCP ([LDCP] section 2)                                           */
/* ------------------------------------------------------------------ */

enum hpccd_ldcp_stage {
	HPCCD_LDCP_FAST_START = 0, /* zero-RTT bandwidth acquisition, section 2.3 */
	HPCCD_LDCP_STABLE = 1,     /* per-ACK window adjustment, section 2.2 */
};

struct hpccd_ldcp_params {
	double alpha;              /* additive step per RTT (packets); default 1 */
	double beta;               /* decrease per marked ACK (packets); default 0.5 */
	double gamma;              /* sub-packet step and floor; default 1/8 */
	double eta;                /* sub-packet decrease factor; default 1/2 */
	double iw_pkts;            /* derived: BDP = line_rate x rtt / (8 x mtu); whole packets (rounded up) */
	uint64_t line_rate_bps;    /* for the derived IW; default 100 Gbit/s */
	uint64_t rtt_ns;           /* base RTT for IW and the sub-packet timer; default 13000 */
	uint32_t mtu_bytes;        /* default 1000 */
};

struct hpccd_ldcp {
	double alpha, beta, gamma, eta, iw;
	double cw;                 /* congestion window in packets */
	uint32_t stage;            /* enum hpccd_ldcp_stage */
	uint32_t mtu;
	uint64_t rtt_ns;
	uint64_t fs_acked;         /* packets acknowledged in fast start */
	uint64_t last_ack_ns;
	uint64_t next_tx_ns;       /* cw < 1: next transmission time (RTT/cw timer) */
	uint64_t n_marked, n_unmarked, n_losses;
};

void hpccd_ldcp_params_default(struct hpccd_ldcp_params *p);
int hpccd_ldcp_init(struct hpccd_ldcp *s, const struct hpccd_ldcp_params *p,
		    const char **why);
/* An ACK acknowledging n packets (n = 1 with per-packet ACKs), ECE as
 * echoed; `loss` reports a loss detected with this ACK; now_ns may be 0
 * when the caller has no clock (the sub-packet timer is then not armed). */
void hpccd_ldcp_on_ack(struct hpccd_ldcp *s, uint32_t n, int ece, int loss,
		       uint64_t now_ns);
/* Interval of the sub-packet timer, RTT/cw, or 0 while cw >= 1. */
uint64_t hpccd_ldcp_tx_interval_ns(const struct hpccd_ldcp *s, uint64_t rtt_ns);
/* Whether packet `idx` (0-based, of a message of `msg_pkts` packets) goes
 * out ECN-capable: first-RTT packets are ECN-incapable except the last one
 * (the IW-th, or the message's last if shorter), section 3.1. */
int hpccd_ldcp_pkt_ect(const struct hpccd_ldcp *s, uint64_t idx, uint64_t msg_pkts);

struct hpccd_ldcp_event {
	uint32_t acked_pkts;
	uint32_t ece;
	uint32_t loss;
	uint32_t pad0;
	uint64_t now_ns;
};

struct hpccd_ldcp_out {
	double cw_pkts;
	uint32_t stage;
	uint32_t pad0;
};

int hpccd_ldcp_run(struct hpccd_ldcp *s, const struct hpccd_ldcp_event *ev,
		   struct hpccd_ldcp_out *out, size_t n);

/* ------------------------------------------------------------------ */
/* DCQCN (Y. Zhu et al., "Congestion Control for Large-Scale RDMA      */
/* Deployments", SIGCOMM 2015, section 3.1)                            */
/* ------------------------------------------------------------------ */

/* Switch side (CP): RED-like marking of the egress queue, with the
 * thresholds scaled with the link bandwidth as [HPCC] section 5.1 does:
 * Kmin = 100 KB x Bw / 25 Gbit/s, Kmax = 400 KB x Bw / 25 Gbit/s. */
struct hpccd_dcqcn_ecn {
	uint64_t kmin_bytes;
	uint64_t kmax_bytes;
	double pmax;               /* marking probability at Kmax; default 0.01 */
};

/* The thresholds for a link of `bw_bps` (KB = 1000 bytes), pmax 0.01. */
void hpccd_dcqcn_ecn_for_rate(uint64_t bw_bps, struct hpccd_dcqcn_ecn *e);
/* Marking probability of a packet that finds `qlen_bytes` queued:
 * 0 up to Kmin, linear to pmax at Kmax, 1 above Kmax. */
double hpccd_dcqcn_mark_prob(const struct hpccd_dcqcn_ecn *e, uint64_t qlen_bytes);

/* Receiver side (NP): a CNP when a CE-marked packet arrives and none was
 * sent for the flow in the last N; a mark within N of the last CNP makes
 * one CNP when that window ends (at most one CNP per N per flow). */
struct hpccd_dcqcn_np {
	uint64_t N_ns;             /* CNP interval N; the DCQCN paper's 50 us */
	uint64_t last_cnp_ns;      /* when the last CNP was sent */
	uint32_t sent;             /* a CNP was sent (last_cnp_ns is valid) */
	uint32_t pending;          /* a CE mark arrived within N of the last CNP */
	uint64_t n_ce, n_cnp;
};

void hpccd_dcqcn_np_init(struct hpccd_dcqcn_np *np, uint64_t N_ns);
/* A data packet of the flow arrived at now_ns, CE-marked or not.  Returns
 * 1 when a CNP must be sent now, 0 when not. */
uint32_t hpccd_dcqcn_np_on_packet(struct hpccd_dcqcn_np *np, int ce, uint64_t now_ns);
/* Timer: 1 when the pending CNP is due at now_ns (and is now sent). */
uint32_t hpccd_dcqcn_np_poll(struct hpccd_dcqcn_np *np, uint64_t now_ns);
/* When the pending CNP is due, 0 when none is pending. */
uint64_t hpccd_dcqcn_np_next_ns(const struct hpccd_dcqcn_np *np);

/* Sender side (RP).  Rates in bit/s (binary64); times in ns. */
struct hpccd_dcqcn_params {
	double g;                  /* alpha gain; default 1/256 */
	uint64_t K_ns;             /* alpha timer: alpha decays after K without CNP; default 55000 */
	uint64_t T_ns;             /* rate increase timer period; default 55000 */
	uint64_t B_bytes;          /* byte counter period; default 10 MB (10^7 bytes) */
	uint32_t F;                /* fast recovery iterations; default 5 */
	uint32_t pad0;
	double R_AI_bps;           /* additive increase step; default 40 Mbit/s */
	double R_HAI_bps;          /* derived: hyper increase step 10 x R_AI */
	uint64_t line_rate_bps;    /* start rate and ceiling; default 100 Gbit/s */
	double min_rate_bps;       /* floor of RC; default 1 Mbit/s */
	double alpha_init;         /* default 1 (section 3.1) */
};

enum hpccd_dcqcn_stage {
	HPCCD_DCQCN_LINE_RATE = 0, /* no CNP yet: the flow sends at line rate */
	HPCCD_DCQCN_FAST_RECOVERY = 1,
	HPCCD_DCQCN_ADDITIVE = 2,
	HPCCD_DCQCN_HYPER = 3,
};

struct hpccd_dcqcn {
	double g, R_AI, R_HAI, line_rate, min_rate;
	uint64_t K, T, B;
	uint32_t F;
	uint32_t stage;            /* enum hpccd_dcqcn_stage of the last change */
	double RC, RT, alpha;      /* current rate, target rate, alpha */
	uint32_t t_count, bc_count;/* T and BC of Figure 6: timer and byte counter
				    * iterations since the last CNP (saturating) */
	uint64_t bytes;            /* bytes since the byte counter's last expiry */
	uint64_t next_alpha_ns;    /* alpha timer expiry; 0 = not armed */
	uint64_t next_rate_ns;     /* rate increase timer expiry; 0 = not armed */
	uint64_t now_ns;           /* latest time seen (time never goes back) */
	uint64_t n_cnp, n_alpha_decays, n_fast_recovery, n_additive, n_hyper;
};

void hpccd_dcqcn_params_default(struct hpccd_dcqcn_params *p);
int hpccd_dcqcn_init(struct hpccd_dcqcn *s, const struct hpccd_dcqcn_params *p,
		     const char **why);
/* Fire the alpha and rate increase timers due at or before now_ns. */
void hpccd_dcqcn_advance(struct hpccd_dcqcn *s, uint64_t now_ns);
/* A CNP arrived at now_ns: advance(now_ns), then Eq. (1). */
void hpccd_dcqcn_on_cnp(struct hpccd_dcqcn *s, uint64_t now_ns);
/* `bytes` were sent by now_ns: advance(now_ns), then the byte counter. */
void hpccd_dcqcn_on_tx(struct hpccd_dcqcn *s, uint64_t bytes, uint64_t now_ns);
/* The earliest armed timer, 0 when none is armed (before the first CNP). */
uint64_t hpccd_dcqcn_next_timer_ns(const struct hpccd_dcqcn *s);

struct hpccd_dcqcn_event {
	uint64_t now_ns;
	uint64_t tx_bytes;         /* sent since the previous event */
	uint32_t cnp;              /* a CNP arrived at now_ns */
	uint32_t pad0;
};

struct hpccd_dcqcn_out {
	double rate_bps, target_bps, alpha;
	uint32_t stage;
	uint32_t pad0;
};

/* Per event: advance(now), on_tx(tx_bytes), then on_cnp if cnp. */
int hpccd_dcqcn_run(struct hpccd_dcqcn *s, const struct hpccd_dcqcn_event *ev,
		    struct hpccd_dcqcn_out *out, size_t n);

/* ------------------------------------------------------------------ */
/* TIMELY (R. Mittal et al., "TIMELY: RTT-based Congestion Control for */
/* the Datacenter", SIGCOMM 2015, section 4, Algorithm 1)              */
/* ------------------------------------------------------------------ */

struct hpccd_timely_params {
	double alpha;              /* EWMA weight of a new RTT difference; default 0.875 */
	double beta;               /* multiplicative decrement factor; default 0.8 */
	double delta_bps;          /* additive increment step; default 10 Mbit/s */
	uint64_t T_low_ns;         /* default 50000 */
	uint64_t T_high_ns;        /* default 500000 */
	uint64_t min_rtt_ns;       /* minRTT normalising the gradient; default 13000 */
	uint32_t hai_N;            /* N of HAI mode; default 5 */
	uint32_t hai_after;        /* negative gradients in a row that enter HAI; default 5 */
	uint64_t line_rate_bps;    /* ceiling; default 100 Gbit/s */
	double init_rate_bps;      /* derived: line_rate_bps */
	double min_rate_bps;       /* floor; default 1 Mbit/s */
};

struct hpccd_timely {
	double alpha, beta, delta, T_low, T_high, min_rtt, line_rate, min_rate;
	uint32_t hai_N, hai_after;
	double rate;
	double prev_rtt;           /* ns */
	double rtt_diff;           /* EWMA of RTT differences, ns */
	double gradient;           /* normalised gradient of the last sample */
	uint32_t have_prev;        /* prev_rtt holds a sample */
	uint32_t neg_streak;       /* negative gradients in a row (saturating) */
	uint32_t hai;              /* the last sample added hai_N x delta (HAI mode) */
	uint32_t pad0;
	uint64_t n_samples, n_low, n_high, n_increase, n_hai, n_decrease;
};

void hpccd_timely_params_default(struct hpccd_timely_params *p);
int hpccd_timely_init(struct hpccd_timely *s, const struct hpccd_timely_params *p,
		      const char **why);
/* One RTT sample (a completion event): Algorithm 1. */
void hpccd_timely_on_rtt(struct hpccd_timely *s, uint64_t rtt_ns);

struct hpccd_timely_event {
	uint64_t rtt_ns;
};

struct hpccd_timely_out {
	double rate_bps, rtt_diff_ns, gradient;
	uint32_t hai;              /* the sample increased the rate by N x delta, N > 1 */
	uint32_t pad0;
};

int hpccd_timely_run(struct hpccd_timely *s, const struct hpccd_timely_event *ev,
		     struct hpccd_timely_out *out, size_t n);

#endif /* HPCCD_CC_H */
