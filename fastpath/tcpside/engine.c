// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * The TCP-side probe engine (include/hpccd/tcp_probe.h has the contract;
 * docs/tcp-side.md, "The probe engine", the why).
 *
 * Per flow (key: struct hpccd_flow_key, as tc_tracker, xdp_host and the
 * "hpcc" struct_ops CC key it), in order of events:
 *
 *  wake record (tc: a segment with payload of a parked flow, or the first
 *  one of a new flow): a flow the "hpcc" CC runs (an entry in
 *  hpccd_tcp_cst) gets a state here if it has none, and a probe leaves
 *  unless one is outstanding.  Other CCs' flows are left alone (the tracker
 *  never wakes for them again: nothing parks them).
 *
 *  response record (xdp_host, tag verified): an answer to the outstanding
 *  probe goes to hpccd_hpcc_new_ack_wire with seq = snd_nxt = the probe
 *  number (every response is the first feedback of a new RTT, so W^c is
 *  updated once per RTT, [HPCC] Algorithm 1 lines 22-24); W and R = W / T
 *  go into hpccd_tcp_win with the telemetry's time.  An answer to a probe
 *  already declared lost is counted, not fed (older INT than the next).
 *  Then next(): data in flight (the CC's snd_nxt != snd_una as of its last
 *  ACK, or the tracker's snd_nxt, per segment sent, beyond the CC's
 *  snd_una) -> the next probe now; else park: an entry in hpccd_tcp_park,
 *  then the tracker read once more (a segment that left between the first
 *  read and the park would not have woken us): in flight now -> unpark and
 *  probe if the delete was ours, else the tracker's wake record is on its
 *  way.
 *
 *  timeout (3 x max(srtt, probe RTT) within [min, max]): the probe is
 *  lost unless hpccd_telem holds its answer (the ring was full), then
 *  next().
 *
 * T per flow (t_from_rtt): [HPCC] section 5.1 sets T "slightly greater than
 * the maximum RTT"; here the flow's first probe RTT and the kernel's srtt of
 * the flow bound it, and T = t_rtt_factor x max(the configured T, the least
 * srtt seen, the least probe RTT seen) is fixed at the first response (W_init
 * = B x T and the U of every later response depend on it).  Printed by
 * hpccctl flows / the metrics (T_ns per flow).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/types.h>

#include "hpccd/tcp_probe.h"
#include "hpccd/kern_user.h"
#include "hpccd/tcp_cc.h"
#include "hpccd/wake_late.h"

#define PROBE_MAX 160                  /* bytes: 20 + 20 + 4 + 64 + 32 + 8 */
#define SEND_BATCH 32                  /* probes per sendmmsg() */
#define SEQ_AHEAD_MAX 0x80000000u
#define CAND_BACKOFF_MIN_NS 1000000ull
#define CAND_BACKOFF_MAX_NS 1000000000ull

const uint64_t hpccd_tcpp_late_bounds_us[HPCCD_TCPP_LATE_BUCKETS - 1] = {
	5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000};

struct flow {
	struct hpccd_flow_key key;
	uint32_t used;
	uint32_t li;                   /* its index in the engine's list of keys (live) */
	uint32_t flow_id;
	/* Candidate: woken, but not (yet) run by "hpcc" (iperf3 -C sets the
	 * CC after connect(), so the first segment may leave under the default
	 * CC): looked at again after backoff_ns, doubling up to 1 s. */
	int cand;
	uint64_t backoff_ns;
	struct hpccd_hpcc hpcc;
	double T_ns;                   /* T of the flow (follow_T) */
	uint64_t n_T;                  /* times T was set */
	uint64_t probe_seq;            /* last probe sent */
	uint64_t probe_sent_ns;
	uint64_t probe_due_ns;         /* when the last probe was due (its schedule, next()) */
	uint64_t gap_due_ns;           /* pending: when the next one is due (deadline_ns: its
					* timer, lead_for() earlier) */
	uint64_t deadline_ns;
	int outstanding;
	int pending;                   /* in flight, next probe due at deadline_ns (gap) */
	int parked;
	int chained;                   /* the last probe followed a response, no park */
	uint64_t responses_seen;
	uint64_t probes_sent, probes_answered, probes_lost, late_responses;
	uint64_t probe_rtt_ns, probe_rtt_min_ns, last_rtt_ns;
	uint64_t chain_rtt_ns, chain_interval_ns;
	uint32_t srtt_us, rtt_min_us, snd_una;
	uint64_t last_update_ns;
	uint64_t cwnd_bytes;           /* the last cwnd written (cwnd_for) */
	uint64_t qdelay_ns;            /* queueing delay of the last INT, all hops */
	uint64_t host_ns;              /* srtt - probe RTT, smoothed: the hosts' share */
	uint64_t host_n;               /* its samples (cwnd_for) */
	uint16_t path_id;
	uint8_t nhop, nhop_prev;
	/* its part of a path group (grp_join): the path it joined with, the W
	 * it counts there */
	uint8_t in_grp;
	uint16_t grp_path;
	double grp_w, grp_r;           /* its W and pacing rate (bits/s) counted there */
	double grp_u;                  /* the rate it uses, counted there (path_rate_wc):
					* min(grp_r, deliv_bps), grp_r while unmeasured */
	/* its delivery rate (path_rate_wc, deliv_sample): the CC's snd_una at
	 * the ACK time that opened the window being measured */
	uint32_t dv_una;
	uint64_t dv_t;
	double deliv_bps;              /* over the last window, bits/s; 0: none yet */
	uint64_t park_ns;              /* when it was parked last */
	/* the interval since its last response (host_limited): the CC's
	 * snd_una and the engine's clock when it was read then */
	uint32_t al_una;
	uint64_t al_ns;
	double al_rate;                /* the pacing rate written then, bits/s */
	/* the pacer's loss (pace_feedback): bits acked and bits al_rate
	 * allowed, per interval, smoothed by 1/4; summed; the gain */
	double pl_acked, pl_want, pl_acked_sum, pl_want_sum, pl_gain;
	int pl_new;                    /* an interval was added since the last feedback */
	uint8_t hops[64];
	/* the records the hops' utilisation is taken from (util_anchor): a
	 * response between HPCCD_INT_UTIL_SPAN_NS and two spans and a probe
	 * interval before the last one (hops_prev, at prev_ns; not the latest
	 * such: the previous span's start), and the one the next span starts
	 * at (hops_a, at a_ns), on the engine's clock */
	uint8_t hops_prev[64];
	uint8_t hops_a[64];
	uint8_t nhop_a;
	uint64_t prev_ns, a_ns;
};

/* The flows of this host to one destination over one path (same daddr,
 * same path_id: the same switches and the same last hop) cross the same
 * links, so the same slowest link: their W summed (flows probed within a
 * sweep) caps their pacing rates together (pace_bps). */
struct grp {
	uint32_t daddr;
	uint16_t path_id;
	uint16_t used;
	uint32_t n;                    /* flows counted */
	double sum_w;                  /* their W */
	double sum_r;                  /* the pacing rates last written for them, bits/s */
	double sum_u;                  /* the rates they use (path_rate_wc: grp_u), bits/s */
};

struct hpccd_tcpp {
	struct hpccd_tcpp_config c;
	pthread_mutex_t mu;
	int epfd, evfd;
	struct ring_buffer *rb;
	struct flow *ft;               /* open addressing, linear probing */
	uint32_t cap, n;
	/* the keys of the n flows, dense: the timers and the sweep walk these,
	 * not the table's cap slots (8,192 of 912 bytes by default: 10-60 us a
	 * walk, measured, at every gap's end) */
	struct hpccd_flow_key *live;
	struct grp *grp;               /* path groups: open addressing, cap slots, rebuilt
					* by the sweep (no deletion) */
	uint32_t n_grp;
	uint32_t n_cand;               /* of n, candidates (not probed, see struct flow) */
	uint32_t next_flow_id;
	uint64_t now;
	uint64_t last_heartbeat, last_sweep, check_at;
	/* How late a timed wait returns (wake_lead): the moving mean of the
	 * waits that ended by their timeout (include/hpccd/wake_late.h); the
	 * flows' gap timers are armed that much early (lead_for). */
	uint64_t lead_ns;
	int idle;                      /* the configuration last written says idle_ns */
	uint64_t rate_init_Bps;
	double w_init;
	struct hpccd_tcpp_stats st;
	/* Probes built during one wake, sent by one sendmmsg() before the
	 * engine sleeps again (flush) */
	uint32_t tx_n;
	uint64_t tx_since[SEND_BATCH];     /* when each became allowed (lateness), 0: unknown */
	uint8_t tx_pkt[SEND_BATCH][PROBE_MAX];
	struct sockaddr_in tx_to[SEND_BATCH];
	struct iovec tx_iov[SEND_BATCH];
	struct mmsghdr tx_msg[SEND_BATCH];
	int stop;
	int err;                       /* first error of a ring callback */
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- flow table ---------------------------------------------------------- */

static uint32_t key_hash(const struct hpccd_flow_key *k)
{
	uint64_t a, b;

	memcpy(&a, k, 8);
	memcpy(&b, (const char *)k + 8, 8);
	a ^= b * 0x9E3779B97F4A7C15ull;
	a ^= a >> 29;
	a *= 0xBF58476D1CE4E5B9ull;
	return (uint32_t)(a ^ a >> 32);
}

static struct flow *ft_find(struct hpccd_tcpp *e, const struct hpccd_flow_key *k)
{
	uint32_t m = e->cap - 1, i = key_hash(k) & m;

	for (;; i = (i + 1) & m) {
		if (!e->ft[i].used)
			return NULL;
		if (!memcmp(&e->ft[i].key, k, sizeof(*k)))
			return &e->ft[i];
	}
}

/* Deletion with backward shift: no tombstones.  The key list loses the
 * flow's key, the last key taking its place. */
static void ft_del(struct hpccd_tcpp *e, struct flow *f)
{
	uint32_t m = e->cap - 1, i = (uint32_t)(f - e->ft), j = i, h, last = e->n - 1;

	if (f->li != last) {
		struct flow *g = ft_find(e, &e->live[last]);

		e->live[f->li] = e->live[last];
		if (g)
			g->li = f->li;
	}
	e->ft[i].used = 0;
	e->n--;
	for (;;) {
		j = (j + 1) & m;
		if (!e->ft[j].used)
			return;
		h = key_hash(&e->ft[j].key) & m;
		if (i <= j ? (i < h && h <= j) : (i < h || h <= j))
			continue;
		e->ft[i] = e->ft[j];
		e->ft[j].used = 0;
		i = j;
	}
}

/* ---- path groups ------------------------------------------------------- */

static struct grp *grp_find(struct hpccd_tcpp *e, uint32_t daddr, uint16_t path_id, int add)
{
	uint32_t m = e->cap - 1, i = (daddr * 0x9E3779B1u ^ path_id * 0x85EBCA77u) & m;

	for (;; i = (i + 1) & m) {
		struct grp *g = &e->grp[i];

		if (!g->used) {
			if (!add || e->n_grp + 1 > e->cap / 2)
				return NULL;           /* full until the sweep rebuilds */
			g->used = 1;
			g->daddr = daddr;
			g->path_id = path_id;
			g->n = 0;
			g->sum_w = 0;
			g->sum_r = 0;
			g->sum_u = 0;
			e->n_grp++;
			return g;
		}
		if (g->daddr == daddr && g->path_id == path_id)
			return g;
	}
}

/* The flow stops counting in its group (ended, or on another path; a flow
 * parked for longer than a sweep is left out by the sweep's rebuild). */
static void grp_leave(struct hpccd_tcpp *e, struct flow *f)
{
	struct grp *g;

	if (!f->in_grp)
		return;
	f->in_grp = 0;
	g = grp_find(e, f->key.daddr, f->grp_path, 0);
	if (!g)
		return;
	g->sum_w -= f->grp_w;
	g->sum_r -= f->grp_r;
	g->sum_u -= f->grp_u;
	if (--g->n == 0 || g->sum_w < 0)
		g->sum_w = 0;
	if (!g->n || g->sum_r < 0)
		g->sum_r = 0;
	if (!g->n || g->sum_u < 0)
		g->sum_u = 0;
}

/* The flow counts W in the group of its path (joining it first). */
static struct grp *grp_join(struct hpccd_tcpp *e, struct flow *f, double W)
{
	struct grp *g;

	if (f->in_grp && f->grp_path != f->path_id)
		grp_leave(e, f);
	g = grp_find(e, f->key.daddr, f->path_id, !f->in_grp);
	if (!g)
		return NULL;
	if (!f->in_grp) {
		f->in_grp = 1;
		f->grp_path = f->path_id;
		f->grp_w = 0;
		f->grp_r = 0;
		f->grp_u = 0;
		g->n++;
	}
	g->sum_w += W - f->grp_w;
	f->grp_w = W;
	return g;
}

/* The sweep's: every group anew from the flows that count (no stale
 * groups left, no drift of the sums).  A parked flow keeps its part while
 * its window is younger than a sweep: a paced flow's pipe empties between
 * its trains (parked until its next segment), and its rate, still in its
 * window entry, applies again when it resumes. */
static void grp_rebuild(struct hpccd_tcpp *e)
{
	uint32_t i;

	memset(e->grp, 0, (size_t)e->cap * sizeof(*e->grp));
	e->n_grp = 0;
	for (i = 0; i < e->n; i++) {
		struct flow *f = ft_find(e, &e->live[i]);

		if (f && f->in_grp) {
			double r = f->grp_r, u = f->grp_u;
			struct grp *g;

			f->in_grp = 0;
			if (f->parked && f->last_update_ns + e->c.sweep_ns < e->now)
				continue;
			g = grp_join(e, f, f->grp_w);
			if (g) {
				g->sum_r += r;
				f->grp_r = r;
				g->sum_u += u;
				f->grp_u = u;
			}
		}
	}
}

/* The rate the flow counts as used in its group (path_rate_wc). */
static void grp_use(struct hpccd_tcpp *e, struct flow *f, double u)
{
	struct grp *g;

	if (!f->in_grp)
		return;
	g = grp_find(e, f->key.daddr, f->grp_path, 0);
	if (!g)
		return;
	g->sum_u += u - f->grp_u;
	f->grp_u = u;
}

/* The flow's delivery rate (path_rate_wc): the bytes the CC's snd_una
 * moved over a window of ACK time (the CC's last_ack_ns, the same clock)
 * of at least DELIV_WIN_SRTTS x the flow's srtt and DELIV_WIN_T x its T,
 * closed at the first response after that.  Over one srtt the bytes are
 * a few ACKs (two segments each, or GRO's aggregates) and a sample would
 * be off by one ACK, 10-20 %; over four, a few percent.  The window spans
 * the flow's parks: a flow that waits for its application between writes
 * (iperf3 -b, or one thread serving several streams) delivers less than
 * its written rate, and that is the part the others may use.  A flow
 * parked for longer than CLAIM_WINS windows claims its written rate when
 * it resumes (grp_claim). */
#define DELIV_WIN_SRTTS 4
#define DELIV_WIN_T 4
#define CLAIM_WINS 4
static uint64_t deliv_win_ns(const struct flow *f)
{
	uint64_t win = (uint64_t)f->srtt_us * 1000 * DELIV_WIN_SRTTS;

	return (double)win < DELIV_WIN_T * f->T_ns ? (uint64_t)(DELIV_WIN_T * f->T_ns) : win;
}

/* Bytes on the wire of `payload` bytes a flow's snd_una moved by: HPCC's
 * rates and W count the wire's bytes (the CC paces R x mss / seg_wire of
 * payload, tcp_hpcc.bpf.c set_window), snd_una the payload.  Full
 * segments assumed: a bulk flow's are. */
static double wire_bytes(const struct hpccd_tcp_cc_state *st, double payload)
{
	return st->mss && st->seg_wire > st->mss ? payload * st->seg_wire / st->mss : payload;
}

static void deliv_sample(struct flow *f, const struct hpccd_tcp_cc_state *st)
{
	uint64_t t = st->last_ack_ns;

	if (f->dv_t && t >= f->dv_t) {
		if (t - f->dv_t < deliv_win_ns(f))
			return;
		f->deliv_bps = wire_bytes(st, (double)(uint32_t)(st->snd_una - f->dv_una)) *
			       8e9 / (double)(t - f->dv_t);
	}
	f->dv_t = t;
	f->dv_una = st->snd_una;
}

/* A flow parked for longer than CLAIM_WINS delivery windows resumes
 * (path_rate_wc): its demand changed, the rate it delivered before says
 * nothing about the next one.  (An application that writes every ms,
 * iperf3 -b, parks for about a window: claiming after every park longer
 * than one window, 235 claims a second, took back what it lent, and the
 * greedy flow beside it was paced at 0.64 of the link, 0.72 with this
 * rule; tests/integration/test_tcp_cc_lab.py.)  It resumes at the rate
 * the kernel still has for it, grp_r.  It counts that as used
 * at once, so the others' next windows leave it room (the sum of the
 * written rates passes the link's until their next responses, one probe
 * interval), and gives back what it does not use when its next delivery
 * window closes.  A shorter park stays in the window (deliv_sample). */
static void grp_claim(struct hpccd_tcpp *e, struct flow *f)
{
	if (!f->parked || e->now < f->park_ns + CLAIM_WINS * deliv_win_ns(f))
		return;
	f->deliv_bps = 0;
	f->dv_t = 0;
	grp_use(e, f, f->grp_r);
	e->st.rate_claimed++;
}

/* ---- maps --------------------------------------------------------------- */

static int cst_of(struct hpccd_tcpp *e, const struct hpccd_flow_key *k,
		  struct hpccd_tcp_cc_state *st)
{
	return bpf_map_lookup_elem(e->c.cst_fd, k, st) ? -errno : 0;
}

static void forget(struct hpccd_tcpp *e, struct flow *f)
{
	bpf_map_delete_elem(e->c.win_fd, &f->key);
	bpf_map_delete_elem(e->c.telem_fd, &f->key);
	bpf_map_delete_elem(e->c.park_fd, &f->key);
}

static void end_flow(struct hpccd_tcpp *e, struct flow *f)
{
	grp_leave(e, f);
	forget(e, f);
	ft_del(e, f);
	e->st.flows_ended++;
}

/* No flow to probe (candidates are not probed): nothing the heartbeat
 * would keep alive. */
static int no_flows(const struct hpccd_tcpp *e)
{
	return e->n == e->n_cand;
}

/* The configuration and the heartbeat; with no flow, idle_ns says the
 * engine sleeps until a new flow's first segment wakes it. */
static void heartbeat(struct hpccd_tcpp *e)
{
	int idle = no_flows(e);
	struct hpccd_tcp_cc_cfg cfg = {
		.w_init_bytes = (uint64_t)e->w_init,
		.rate_init_bps = e->rate_init_Bps,
		.stale_ns = e->c.stale_ns,
		.heartbeat_ns = e->now,
		.idle_ns = idle ? e->now : 0,
	};
	uint32_t zero = 0;

	if (!bpf_map_update_elem(e->c.cfg_fd, &zero, &cfg, BPF_ANY)) {
		e->last_heartbeat = e->now;
		e->idle = idle;
		e->st.heartbeats++;
		e->st.idle_marks += idle;
	}
}

/* ---- probes ------------------------------------------------------------- */

static uint64_t timeout_ns(const struct hpccd_tcpp *e, const struct flow *f)
{
	uint64_t base = (uint64_t)f->srtt_us * 1000, t;

	if (f->probe_rtt_ns > base)
		base = f->probe_rtt_ns;
	t = 3 * base;
	if (t < e->c.timeout_min_ns)
		t = e->c.timeout_min_ns;
	if (t > e->c.timeout_max_ns)
		t = e->c.timeout_max_ns;
	return t;
}

static void count_late(struct hpccd_tcpp *e, uint64_t late)
{
	uint32_t b = 0;

	while (b < HPCCD_TCPP_LATE_BUCKETS - 1 && late > hpccd_tcpp_late_bounds_us[b] * 1000)
		b++;
	e->st.late_hist[b]++;
	e->st.late_sum_ns += late;
	e->st.late_n++;
	if (late > e->st.late_max_ns)
		e->st.late_max_ns = late;
}

/* Send the probes built since the last flush, with one sendmmsg() (a
 * message the kernel refuses is counted in send_errors, the rest still
 * go): one syscall per wake however many flows probe in it. */
static void flush(struct hpccd_tcpp *e)
{
	uint32_t i = 0, n = e->tx_n;
	uint64_t t0, now;
	int r;

	if (!n)
		return;
	t0 = mono_ns();
	while (i < n) {
		r = sendmmsg(e->c.sock_fd, &e->tx_msg[i], n - i, MSG_DONTWAIT);
		e->st.send_calls++;
		if (r <= 0) {                          /* message i refused: skip it */
			e->st.send_errors++;
			i++;
			continue;
		}
		e->st.probes_sent += (uint64_t)r;
		i += (uint32_t)r;
	}
	now = mono_ns();
	e->st.send_ns += now - t0;
	for (i = 0; i < n; i++)                        /* early (wake_lead): on time */
		if (e->tx_since[i])
			count_late(e, now > e->tx_since[i] ? now - e->tx_since[i] : 0);
	e->tx_n = 0;
}

/* Build the next probe into the batch; `since`: when it became allowed
 * (0: unknown).  It leaves at the wake's flush (or now, the batch full). */
static void send_probe(struct hpccd_tcpp *e, struct flow *f, uint64_t since)
{
	uint32_t k = e->tx_n;
	uint64_t seq = f->probe_seq + 1, now = mono_ns();
	int len = hpccd_tcpp_probe_build(e->tx_pkt[k], PROBE_MAX, (const uint8_t *)&f->key, seq,
					 f->flow_id, (uint32_t)now, e->c.probe_dscp, 0,
					 e->c.room);

	if (len < 0)
		return;
	memset(&e->tx_to[k], 0, sizeof(e->tx_to[k]));
	e->tx_to[k].sin_family = AF_INET;
	e->tx_to[k].sin_addr.s_addr = f->key.daddr;
	e->tx_iov[k].iov_base = e->tx_pkt[k];
	e->tx_iov[k].iov_len = (size_t)len;
	memset(&e->tx_msg[k], 0, sizeof(e->tx_msg[k]));
	e->tx_msg[k].msg_hdr.msg_name = &e->tx_to[k];
	e->tx_msg[k].msg_hdr.msg_namelen = sizeof(e->tx_to[k]);
	e->tx_msg[k].msg_hdr.msg_iov = &e->tx_iov[k];
	e->tx_msg[k].msg_hdr.msg_iovlen = 1;
	e->tx_since[k] = since;
	if (f->chained && f->srtt_us && now > f->probe_sent_ns) {
		uint64_t iv = now - f->probe_sent_ns, rtt = (uint64_t)f->srtt_us * 1000;

		f->chain_rtt_ns += rtt;
		f->chain_interval_ns += iv;
		e->st.chain_rtt_ns += rtt;
		e->st.chain_interval_ns += iv;
		e->st.chain_n++;
	}
	/* Whether or not the kernel takes it: a probe that did not leave
	 * times out and is counted lost, and the next one follows. */
	f->probe_seq = seq;
	f->probe_sent_ns = now;
	f->probe_due_ns = now;                         /* next() sets the schedule's own */
	f->outstanding = 1;
	f->pending = 0;
	f->parked = 0;
	f->probes_sent++;
	f->deadline_ns = now + timeout_ns(e, f);
	if (f->deadline_ns < e->check_at)
		e->check_at = f->deadline_ns;
	if (++e->tx_n == SEND_BATCH)
		flush(e);
}

/* In flight: the CC's view as of its last ACK, or the tracker's snd_nxt
 * (per segment sent) beyond the CC's snd_una (more than a FIN). */
static int tracker_ahead(struct hpccd_tcpp *e, struct flow *f)
{
	struct hpccd_tcp_flow tr;
	uint32_t ahead;

	if (bpf_map_lookup_elem(e->c.tracker_fd, &f->key, &tr))
		return 0;
	ahead = tr.snd_nxt - f->snd_una;
	return ahead > 1 && ahead < SEQ_AHEAD_MAX;
}

static void apply_cst(struct flow *f, const struct hpccd_tcp_cc_state *st)
{
	f->snd_una = st->snd_una;
	f->srtt_us = st->srtt_us;
	if (st->srtt_us && (!f->rtt_min_us || st->srtt_us < f->rtt_min_us))
		f->rtt_min_us = st->srtt_us;
}

/* How much earlier than its schedule a flow's next probe is armed
 * (wake_lead): the engine's timed waits return lead_ns late on average
 * (the timer interrupt's delivery to the guest and the thread's wake-up:
 * 35-47 us on the two-vCPU VM under the lab's load, docs/tcp-side.md
 * "The timer's floor"), and a probe due
 * one srtt after the last, armed for that time, left an srtt plus that
 * lateness after it (0.53-0.65 probes per RTT).  At most half the gap. */
static uint64_t lead_for(const struct hpccd_tcpp *e, uint64_t gap)
{
	if (!e->c.wake_lead)
		return 0;
	return e->lead_ns < gap / 2 ? e->lead_ns : gap / 2;
}

/* After a response or a timeout: probe again now, or park.  `pre`: the
 * CC's state as the caller just read it (NULL: read it here).
 * `gap_over`: the flow's gap timer ended (its probe leaves now, if the
 * flow still has data in flight). */
static void next(struct hpccd_tcpp *e, struct flow *f, uint64_t since,
		 const struct hpccd_tcp_cc_state *pre, int gap_over)
{
	struct hpccd_tcp_cc_state st;
	uint32_t one = 1;

	if (pre)
		st = *pre;
	else if (cst_of(e, &f->key, &st)) {            /* released: the flow ended */
		end_flow(e, f);
		return;
	}
	apply_cst(f, &st);
	if (st.snd_una != st.snd_nxt || tracker_ahead(e, f)) {
		/* probe_gap_rtt x the flow's srtt after the last probe was due,
		 * not after it left: once per RTT of the flow (on a host stack
		 * several times the probe's own), and a late probe does not push
		 * the next ones back (counted from the send, the interval was an
		 * srtt plus the lateness: 0.4-0.5 probes per RTT measured).  A
		 * debt of more than one gap is dropped, and probes stay at least
		 * half a gap apart.  The timer is armed lead_for() early, so that
		 * the probe leaves about when it is due; never sooner than half a
		 * gap after the last one. */
		uint64_t gap = (uint64_t)((double)f->srtt_us * 1000 * e->c.probe_gap_rtt);
		uint64_t due = f->probe_due_ns + gap, go;

		if (gap_over) {
			due = f->gap_due_ns;
		} else {
			if (due + gap < e->now)
				due = e->now - gap;
			if (due < f->probe_sent_ns + gap / 2)
				due = f->probe_sent_ns + gap / 2;
			go = due - lead_for(e, gap);
			if (go < f->probe_sent_ns + gap / 2)
				go = f->probe_sent_ns + gap / 2;
			if (go > e->now) {
				f->pending = 1;
				f->gap_due_ns = due;
				f->deadline_ns = go;
				if (go < e->check_at)
					e->check_at = go;
				return;
			}
		}
		send_probe(e, f, since && since < due ? due : since);
		f->probe_due_ns = due;
		return;
	}
	f->chained = 0;
	if (bpf_map_update_elem(e->c.park_fd, &f->key, &one, BPF_ANY))
		return;                                /* park map full: the sweep looks */
	f->parked = 1;
	f->park_ns = e->now;
	e->st.parks++;
	if (tracker_ahead(e, f) && !bpf_map_delete_elem(e->c.park_fd, &f->key))
		send_probe(e, f, 0);
}

static struct flow *new_flow(struct hpccd_tcpp *e, const struct hpccd_flow_key *k)
{
	uint32_t m = e->cap - 1, i = key_hash(k) & m;
	struct flow *f;
	const char *why = NULL;

	if (e->n + 1 > e->cap / 2) {                   /* keep probing chains short */
		e->st.flows_refused++;
		return NULL;
	}
	while (e->ft[i].used)
		i = (i + 1) & m;
	f = &e->ft[i];
	memset(f, 0, sizeof(*f));
	if (hpccd_hpcc_init(&f->hpcc, &e->c.hpcc, HPCCD_ALGO_HPCC, &why))
		return NULL;
	f->key = *k;
	f->used = 1;
	f->li = e->n;
	e->live[e->n] = *k;
	f->T_ns = e->c.hpcc.T_ns;
	f->flow_id = e->next_flow_id++;
	if (!e->next_flow_id)
		e->next_flow_id = 1;
	e->n++;
	return f;
}

/* T of the flow from what the kernel and the probes measure ([HPCC]
 * section 5.1: T "slightly greater than the maximum RTT" of the network):
 * T = t_rtt_factor x max(the configured T, the least probe RTT of the flow,
 * the least srtt the kernel had for it), set when that moves by more than
 * 1/8 (the minima only fall, so T settles after the first RTTs).  The
 * core's T-derived values (1/T, W_init, W_max = B_NIC x T, W_AI) are set
 * anew with it.
 *
 * Not the flow's srtt under load: on a host stack (delayed and coalesced
 * ACKs, GRO, softirq scheduling) it is several times the probes' RTT even
 * with every queue empty, but it also holds the flow's own queueing, and a
 * T that follows it (an EWMA of srtt taken at responses whose INT found
 * the queues empty, or cwnd = R x srtt) fed back through the queue into
 * a larger T and W: measured, the bottleneck's 500 KB buffer filled and
 * emptied in turn (docs/tcp-side.md, "Utilisation"). */
static void set_T(struct hpccd_tcpp *e, struct flow *f, double T)
{
	const struct hpccd_hpcc_params *p = &e->c.hpcc;
	struct hpccd_hpcc *s = &f->hpcc;

	f->T_ns = T;
	f->n_T++;
	s->T = T;
	s->inv_T = 1.0 / T;
	if (!p->w_init_bytes)
		s->w_init = (double)p->line_rate_bps * T / 8e9;
	if (!p->w_max_bytes)
		s->w_max = s->w_init;
	if (!p->w_ai_bytes)
		s->w_ai = s->w_ai_cfg = s->w_init * (1 - p->eta) / (double)p->N_flows;
}

static void follow_T(struct hpccd_tcpp *e, struct flow *f)
{
	double T = e->c.hpcc.T_ns;

	if (!e->c.t_from_rtt)
		return;
	if ((double)f->probe_rtt_min_ns > T)
		T = (double)f->probe_rtt_min_ns;
	if ((double)f->rtt_min_us * 1000 > T)
		T = (double)f->rtt_min_us * 1000;
	T *= e->c.t_rtt_factor;
	if (T > f->T_ns * 9 / 8 || T < f->T_ns * 7 / 8)
		set_T(e, f, T);
}

/* The pacing rate, bits/s: R = W / T ([HPCC] Algorithm 1 line 27), at most
 * the slowest link of the path the INT describes (cwnd_rtt_gain > 0) and,
 * with path_rate_shared, the flows of the group `g` (this host's flows to
 * the same destination over the same path, grp_join) at most that
 * link together, each its W's part of their sum W_g: R <= B W / W_g.  In
 * HPCC's equilibrium W_g = eta B T and this does not bind (W / T < B W /
 * W_g); it binds when the flows' W together overshoot B x T: every flow
 * that read U near 0 (a host stall, a probe between two trains) jumps to
 * W_max = B_NIC x T at once, and their next probes come an srtt of the
 * flow later, several T on a host stack.  Measured: two flows each paced
 * at the 1 Gbit/s bottleneck's rate at the same time (ss -tin), the queue
 * at several BDP (docs/tcp-side.md, "Issue 19: two and four flows").  W_max
 * = B_NIC x T lets R reach the NIC's rate; for a native flow the NIC's
 * scheduler then only sends what its window allows, but a kernel TCP flow
 * whose host stalled (the probe saw the link idle: U near 0, W to W_max)
 * comes back with a window of a host RTT and would send it at B_NIC into
 * the slower bottleneck.  No flow gains from a rate above its path's
 * slowest link, if its pacer keeps the rate it is given; the kernel's
 * internal pacing does not: it sends one skb per firing of its timer and
 * makes up at most half a slot of the timer's lateness (tcp_output.c,
 * tcp_update_skb_after_send), so a flow paced at exactly the link's rate
 * in 2-segment trains (a slot of 23 us at 1 Gbit/s) falls below it by what
 * its timer is late.  Measured (docs/tcp-side.md, "Issue 19: one flow and
 * the kernel's pacer"): 23-82 % of one flow's ACKs found its pacing timer
 * armed past its due time.  So a flow alone in its group (g->n == 1, with
 * path_rate_shared) gets solo_rate_gain x the link, above which HPCC's
 * own loop (U against eta) holds it: its W / T binds as soon as the
 * link's queue grows (1 by default: 1.25 has not shown a steady gain on
 * the loaded machine yet).  Flows sharing a group keep path_rate_gain:
 * four flows at 1.25 x the link together queued 4.6-6.9 BDP at p99 for
 * no gain. */
static double pace_bps(struct hpccd_tcpp *e, const struct flow *f, const struct grp *g)
{
	const struct hpccd_hpcc *s = &f->hpcc;
	double r = hpccd_hpcc_rate_bps(s), b, bmin = 0;
	double gain = g && g->n <= 1 ? e->c.solo_rate_gain : e->c.path_rate_gain;
	uint32_t i;

	if (e->c.cwnd_rtt_gain <= 0)
		return r;
	for (i = 0; i < s->n_hops && i < HPCCD_INT_MAX_HOPS; i++) {
		b = (double)s->L[i].bw_bps * gain;
		if (b > 0 && (!bmin || b < bmin))
			bmin = b;
	}
	if (bmin && bmin < r)
		r = bmin;
	if (bmin && g && g->n > 1 && g->sum_w > s->W && s->W > 0 && e->c.path_rate_wc) {
		/* work-conserving: its share, or what the others' use (their
		 * delivery rates, at most their written rates; deliv_sample)
		 * leaves of the link if that is more.  A flow that resumes
		 * after a park longer than its delivery window claims its
		 * written rate (grp_claim), and the others' rates make room at
		 * their next responses: the sum of the written rates passes
		 * the link's for one probe interval of theirs, by what the
		 * resuming flow had left unused. */
		double share = bmin * s->W / g->sum_w, room = bmin - (g->sum_u - f->grp_u);
		uint32_t j;

		/* lent only while this response's INT finds every queue of the
		 * path below two MTUs (one 2-segment train): lending on the
		 * delivery rates alone, which lag a window, let two and four
		 * flows queue 6-28 BDP at p99, as much as without the share */
		for (j = 0; j < s->n_hops && j < HPCCD_INT_MAX_HOPS; j++)
			if (s->L[j].qlen_bytes > 2 * (double)e->c.hpcc.mtu_bytes)
				room = share;
		b = room > share ? room : share;
		if (b < r) {
			r = b;
			e->st.rate_shared++;
		}
		if (r > share)
			e->st.rate_lent++;
	} else if (bmin && g && g->n > 1 && g->sum_w > s->W && s->W > 0) {
		/* its share, and no more than the others' rates as last written
		 * leave of the link (theirs are lowered at their own responses,
		 * an srtt of theirs later): not below a quarter of the share */
		double share = bmin * s->W / g->sum_w, room = bmin - (g->sum_r - f->grp_r);

		b = room < share ? (room > share / 4 ? room : share / 4) : share;
		if (b < r) {
			r = b;
			e->st.rate_shared++;
		}
	}
	return r;
}

/* The cwnd, in bytes, the "hpcc" CC gets with a W ([HPCC] section 3.2: a
 * window limits the bytes in flight, and packets are paced at R = W / T).
 * HPCC's W is what the network holds over one RTT T; a kernel TCP flow
 * also holds bytes in its hosts' stacks (delayed and coalesced ACKs, GRO,
 * softirq and application scheduling), which on a host stack add several
 * T to its srtt even with every queue empty: cwnd = W capped the flow at
 * W / srtt, below R (measured: 0.67 of the link, docs/tcp-side.md,
 * "Utilisation").  So cwnd = W + R x the hosts' share of the RTT x
 * cwnd_rtt_gain, and pacing enforces R.  The hosts' share is the kernel's
 * srtt less the probe RTT (both smoothed by 1/8): the probe takes the
 * same path and queues but is reflected in XDP, so the difference holds
 * no network queue, and a queue cannot widen its own window (what made
 * cwnd = R x srtt oscillate last time); smoothed again by 1/8 per
 * response.  (Its least over 50-100 ms instead was measured: near 0 in
 * the lab, where the probe's own way through the software switch costs
 * about what the data's does, so cwnd fell back to W and one flow to 0.6
 * of the link; what cwnd must cover is the hosts' usual delay, jitter
 * included, as a queue covers it for cubic.)  A host starved for long is
 * bounded by the CC: an entry not refreshed for 4 srtt applies W alone.
 * The network part stays W, whose sum over the flows HPCC keeps at eta of
 * the bottleneck. */
static uint64_t cwnd_for(const struct hpccd_tcpp *e, struct flow *f, double rate_Bps)
{
	const struct hpccd_hpcc *s = &f->hpcc;
	double W = s->W, q_ns = 0, h;
	uint64_t host;
	uint32_t i;

	for (i = 0; i < s->n_hops && i < HPCCD_INT_MAX_HOPS; i++)
		if (s->L[i].bw_bps)
			q_ns += (double)s->L[i].qlen_bytes * 8e9 / (double)s->L[i].bw_bps;
	f->qdelay_ns = (uint64_t)q_ns;
	h = (double)f->srtt_us * 1000 - (double)f->probe_rtt_ns;
	host = h > 0 ? (uint64_t)h : 0;
	f->host_ns = f->host_n++ ? (7 * f->host_ns + host) / 8 : host;
	if (e->c.cwnd_rtt_gain <= 0 || !f->host_ns)
		return (uint64_t)W;
	/* at most host_cap_t x T of it: a longer host delay is a host that does
	 * not keep up (measured with four flows at load 6-9 and the lab's
	 * 8-segment trains, no cap: srtt 1 ms, a window of 8-11 W each, and
	 * the bottleneck's buffer full when they were scheduled; a cap of T
	 * instead left a loaded host's flows window-limited, docs/tcp-side.md) */
	h = (double)f->host_ns < e->c.host_cap_t * f->T_ns ? (double)f->host_ns
							    : e->c.host_cap_t * f->T_ns;
	return (uint64_t)(W + rate_Bps * h / 1e9 * e->c.cwnd_rtt_gain);
}

/* Whether the flow left its window unused over the interval since its last
 * response: it delivered (the bytes the CC's snd_una moved in it, counted
 * on the wire as HPCC's rates are: wire_bytes, over its time) less than
 * AL_USE of the pacing rate written for it then, which is at most W / T
 * and at most its part of the path's rate (pace_bps).
 * Its application (nothing written) or its host (the sender, or the ACKs,
 * not scheduled; a host delay beyond what cwnd covers) held it back, not
 * the network: the network holding it back queues, and U above eta
 * lowers W whatever this says.  The INT of such an interval reads the
 * link idle, U low, so HPCC raises W ([HPCC] Algorithm 1 line 13),
 * whoever left the link idle.  TCP does not widen a cwnd the flow did not
 * use (RFC 7661); with app_limited_hold the engine does the same with W
 * (on_resp): the core's update is Algorithm 1 unchanged, the engine does
 * not apply an increase computed from such an interval.  (Not W per
 * srtt: with the path's rate shared each flow is paced below that, and an
 * srtt inflated by a queue scales the bytes counted with it.)  Counted
 * for every measured interval: al_intervals, al_below_w (fewer bytes than
 * W per srtt, whatever the rate allowed) and al_limited (the rule's). */
#define AL_USE 0.75
/* pace_feedback: intervals below this share of R are the host's or the
 * application's, not the pacer's */
#define PL_USE 0.5
static int host_limited(struct hpccd_tcpp *e, struct flow *f,
			const struct hpccd_tcp_cc_state *st, double W)
{
	int lim = 0;

	if (f->al_ns && e->now > f->al_ns && st->srtt_us) {
		double dt = (double)(e->now - f->al_ns);
		double acked = wire_bytes(st, (double)(uint32_t)(st->snd_una - f->al_una));

		lim = f->al_rate > 0 && acked * 8e9 / dt < AL_USE * f->al_rate;
		if (f->al_rate > 0) {          /* the pacer's loss (pace_feedback) */
			double want = f->al_rate * dt / 1e9;

			f->pl_acked_sum += acked * 8;
			f->pl_want_sum += want;
			e->st.pace_acked_bits += (uint64_t)(acked * 8);
			e->st.pace_want_bits += (uint64_t)want;
			if (acked * 8e9 / dt >= PL_USE * f->al_rate) {
				f->pl_acked = f->pl_want > 0 ? (3 * f->pl_acked + acked * 8) / 4
							     : acked * 8;
				f->pl_want = f->pl_want > 0 ? (3 * f->pl_want + want) / 4 : want;
				f->pl_new = 1;
			}
		}
		e->st.al_intervals++;
		e->st.al_below_w += (uint64_t)(acked * st->srtt_us * 1000.0 < W * dt);
		e->st.al_limited += (uint64_t)lim;
	}
	f->al_una = st->snd_una;
	f->al_ns = e->now;
	return lim;
}

/* The gain of the flow's pacing rate (pace_gain_max > 1): the rate written
 * is R x g, R the rate HPCC wants (pace_bps), so that the rate the flow
 * achieves is R.  The kernel's internal pacer (no fq qdisc on this kernel)
 * sends one skb per firing of its hrtimer and makes up at most half a
 * slot of the timer's lateness (tcp_output.c, tcp_update_skb_after_send),
 * so a flow paced at R delivers less than R: measured, about a fixed time
 * per skb (15-45 us in 27 of 40 runs at load 4-8, up to 233 us), not a
 * fixed share of R (docs/tcp-side.md, "Issue 19: four flows and the
 * pacer's loss").  A feedback per flow, at each response: m = bits acked /
 * bits R allowed over its last intervals that delivered at least PL_USE
 * of R (smoothed by 1/4, host_limited: below that the host or the
 * application held the flow, not the pacer, and a larger rate would only
 * be a burst when it resumes).  g moves half way towards g / m, within
 * [1, pace_gain_max]; it is raised only while HPCC's U is below eta (once
 * the link is as busy as HPCC wants it there is nothing to make up) and
 * while no queue of the path holds more than two MTUs (a train of two
 * segments); a larger queue halves what g has above 1 (the network, not
 * the pacer, is the limit then, and HPCC's U lowers W).  cwnd is not
 * widened by g (cwnd_for takes R), so the window still bounds what is in
 * flight.  Off by default: at load 7-8 it queued 2.8-6.2 BDP at p99 for
 * no gain (the lateness changes faster than g follows it). */
static void pace_feedback(struct hpccd_tcpp *e, struct flow *f)
{
	const struct hpccd_hpcc *s = &f->hpcc;
	double m, g = f->pl_gain > 0 ? f->pl_gain : 1;
	uint32_t i;

	if (e->c.pace_gain_max <= 1) {
		f->pl_gain = 1;
		return;
	}
	for (i = 0; i < s->n_hops && i < HPCCD_INT_MAX_HOPS; i++)
		if (s->L[i].qlen_bytes > 2 * (double)e->c.hpcc.mtu_bytes) {
			f->pl_gain = 1 + (g - 1) / 2;
			e->st.pace_lowered++;
			return;
		}
	if (!f->pl_new || !(f->pl_want > 0) || !(f->pl_acked > 0)) {
		f->pl_gain = g;
		return;
	}
	f->pl_new = 0;
	m = f->pl_acked / f->pl_want;
	if (m < 1 && s->U >= s->eta) {
		/* the link already as busy as HPCC wants it: nothing to make up */
		f->pl_gain = g;
		return;
	}
	g *= 1 + (1 / m - 1) / 2;
	f->pl_gain = g < 1 ? 1 : g > e->c.pace_gain_max ? e->c.pace_gain_max : g;
	e->st.pace_fed++;
}

/* The records the daemon takes the hops' utilisation from (the flow's
 * hops_prev and hops, published by hpccd_tcpp_flows): a response's hops are
 * kept as the next span's start (hops_a) once HPCCD_INT_UTIL_SPAN_NS has
 * passed since the one before, which then becomes hops_prev; so hops_prev
 * is always at least a span before the last response and at most two spans
 * and a probe interval.  A new path, or a start older than half a ts wrap
 * (the records' modular difference would be ambiguous), starts afresh
 * without a pair.  Called before the response's hops become the flow's. */
static void util_anchor(struct flow *f, const struct hpccd_tcp_telem *t, uint32_t n)
{
	const uint64_t half_wrap = 1ULL << (HPCCD_INT_TS_BITS - 1);

	if (!f->nhop_a || f->path_id != t->path_id || t->rx_ns - f->a_ns >= half_wrap) {
		f->nhop_prev = 0;
	} else if (t->rx_ns - f->a_ns >= HPCCD_INT_UTIL_SPAN_NS) {
		memcpy(f->hops_prev, f->hops_a, sizeof(f->hops_prev));
		f->nhop_prev = f->nhop_a;
		f->prev_ns = f->a_ns;
	} else {
		if (f->nhop_prev && t->rx_ns - f->prev_ns >= half_wrap)
			f->nhop_prev = 0;
		return;
	}
	memcpy(f->hops_a, t->hops, 8 * n);
	f->nhop_a = (uint8_t)n;
	f->a_ns = t->rx_ns;
}

/* The largest queue of the INT HPCC's update has just read for a flow
 * (s->L), counted in the queue histogram by frames of mtu_bytes + 14 (the
 * Ethernet header).  The train rule reads it over a window: a train lands
 * in the bottleneck's queue whole, so this is where trains that are too
 * long show (trains.segs_from_pacer). */
static void qlen_note(struct hpccd_tcpp *e, const struct hpccd_hpcc *s)
{
	uint64_t q = 0, frame = (uint64_t)e->c.hpcc.mtu_bytes + 14, k;
	uint32_t i;

	for (i = 0; i < s->n_hops && i < HPCCD_INT_MAX_HOPS; i++)
		if (s->L[i].qlen_bytes > q)
			q = s->L[i].qlen_bytes;
	k = q / frame;
	e->st.qlen_hist[k < HPCCD_TCPP_QLEN_BUCKETS ? k : HPCCD_TCPP_QLEN_BUCKETS - 1]++;
}

/* ---- events ------------------------------------------------------------- */

static void on_resp(struct hpccd_tcpp *e, const struct hpccd_tcp_resp *r)
{
	struct flow *f = ft_find(e, &r->key);
	const struct hpccd_tcp_telem *t = &r->t;
	struct hpccd_tcp_cc_state st;
	struct hpccd_tcp_win w;
	uint64_t rtt;
	int have_st, lim;
	double W0, Wc0;
	uint32_t stage0;

	e->st.resp_records++;
	if (!f) {
		e->st.unknown_records++;
		return;
	}
	if (t->responses <= f->responses_seen)
		return;                                /* already read from the map */
	f->responses_seen = t->responses;
	if (!f->outstanding || t->probe_seq != f->probe_seq) {
		f->late_responses++;
		e->st.late_responses++;
		return;
	}
	f->outstanding = 0;
	f->probes_answered++;
	e->st.probes_answered++;
	/* the CC's view now: the delivery rate's window, then next() */
	have_st = !cst_of(e, &f->key, &st);
	if (have_st && e->c.path_rate_wc)
		deliv_sample(f, &st);
	rtt = (uint32_t)((uint32_t)t->rx_ns - t->ts_echo);
	f->last_rtt_ns = rtt;
	f->probe_rtt_ns = f->probe_rtt_ns ? (7 * f->probe_rtt_ns + rtt) / 8 : rtt;
	if (!f->probe_rtt_min_ns || rtt < f->probe_rtt_min_ns)
		f->probe_rtt_min_ns = rtt;
	if (t->nhop) {
		uint32_t n = t->nhop < HPCCD_INT_MAX_HOPS ? t->nhop : HPCCD_INT_MAX_HOPS;

		follow_T(e, f);
		util_anchor(f, t, n);
		f->path_id = t->path_id;
		f->nhop = (uint8_t)n;
		memcpy(f->hops, t->hops, 8 * n);
		lim = have_st && host_limited(e, f, &st, f->hpcc.W);
		W0 = f->hpcc.W;
		Wc0 = f->hpcc.Wc;
		stage0 = f->hpcc.inc_stage;
		if (hpccd_hpcc_new_ack_wire(&f->hpcc, t->rx_ns, t->probe_seq, t->probe_seq,
					    t->path_id, t->hops, n) >= 0) {
			struct grp *g;
			double r;

			qlen_note(e, &f->hpcc);
			if (lim && f->hpcc.W > W0) {
				/* raised from an interval the flow did not use its
				 * window in: U and L (the measurement) stay, W, W^c
				 * and the stage are those before (app_limited_hold) */
				e->st.al_raised++;
				if (e->c.app_limited_hold) {
					f->hpcc.W = W0;
					f->hpcc.Wc = Wc0;
					f->hpcc.inc_stage = stage0;
					e->st.al_held++;
				}
			}
			g = e->c.path_rate_shared ? grp_join(e, f, f->hpcc.W) : NULL;
			r = pace_bps(e, f, g);
			f->al_rate = r;

			if (g) {                       /* what the group's flows hold now */
				g->sum_r += r - f->grp_r;
				f->grp_r = r;
				grp_use(e, f, f->deliv_bps > 0 && f->deliv_bps < r ? f->deliv_bps
										    : r);
			}
			pace_feedback(e, f);
			w.pacing_bps = (uint64_t)(r * f->pl_gain / 8);
			w.cwnd_bytes = f->cwnd_bytes = cwnd_for(e, f, r / 8);
			w.updated_ns = t->rx_ns;
			w.seq = t->probe_seq;
			w.w_bytes = (uint64_t)f->hpcc.W;
			if (!bpf_map_update_elem(e->c.win_fd, &f->key, &w, BPF_ANY)) {
				f->last_update_ns = t->rx_ns;
				e->st.windows_written++;
			}
		}
	}
	f->chained = 1;
	next(e, f, t->rx_ns, have_st ? &st : NULL, 0);
}

/* A flow the "hpcc" CC runs starts being probed: its state from
 * hpccd_tcp_cst, the responses an earlier flow of this 5-tuple left in
 * hpccd_telem not taken for its own. */
static void promote(struct hpccd_tcpp *e, struct flow *f, const struct hpccd_tcp_cc_state *st)
{
	struct hpccd_tcp_telem old;

	f->cand = 0;
	e->n_cand--;
	e->st.flows_started++;
	if (!bpf_map_lookup_elem(e->c.telem_fd, &f->key, &old))
		f->responses_seen = old.responses;
	apply_cst(f, st);
}

static void on_wake(struct hpccd_tcpp *e, const struct hpccd_tcp_wake *w)
{
	struct flow *f = ft_find(e, &w->key);
	struct hpccd_tcp_cc_state st;
	int hpcc = !cst_of(e, &w->key, &st);

	e->st.wake_records++;
	if (f && (f->cand || f->pending))
		return;                                /* its timer looks again */
	if (!f) {
		f = new_flow(e, &w->key);
		if (!f)
			return;
		if (!hpcc) {
			f->cand = 1;
			e->n_cand++;
			f->backoff_ns = CAND_BACKOFF_MIN_NS;
			f->deadline_ns = e->now + f->backoff_ns;
			if (f->deadline_ns < e->check_at)
				e->check_at = f->deadline_ns;
			return;
		}
		promote(e, f, &st);
	} else if (hpcc) {
		apply_cst(f, &st);
	}
	if (f->parked && e->c.path_rate_wc)
		grp_claim(e, f);
	f->parked = 0;
	if (!f->outstanding) {
		f->chained = 0;
		send_probe(e, f, w->ns);
	}
}

/* A candidate's time came: "hpcc" now -> probed from here (or parked);
 * else again later, or given up after CAND_BACKOFF_MAX_NS. */
static void candidate(struct hpccd_tcpp *e, struct flow *f)
{
	struct hpccd_tcp_cc_state st;

	if (!cst_of(e, &f->key, &st)) {
		promote(e, f, &st);
		next(e, f, 0, NULL, 0);
		return;
	}
	f->backoff_ns *= 2;
	if (f->backoff_ns > CAND_BACKOFF_MAX_NS) {
		e->st.not_hpcc++;
		e->n_cand--;
		ft_del(e, f);
		return;
	}
	f->deadline_ns = e->now + f->backoff_ns;
}

static int ring_cb(void *ctx, void *data, size_t size)
{
	struct hpccd_tcpp *e = ctx;

	if (size == sizeof(struct hpccd_tcp_resp))
		on_resp(e, data);
	else if (size == sizeof(struct hpccd_tcp_wake))
		on_wake(e, data);
	else
		e->st.unknown_records++;
	return 0;
}

/* ---- timers ------------------------------------------------------------- */

static void timeouts(struct hpccd_tcpp *e)
{
	uint64_t next_check = UINT64_MAX;
	struct hpccd_tcp_resp r;
	uint32_t i;

	/* downwards: a flow that ends gives its place in the list to the last
	 * key, already looked at */
	for (i = e->n; i-- > 0;) {
		struct flow *f = ft_find(e, &e->live[i]);

		if (!f || (!f->outstanding && !f->cand && !f->pending))
			continue;
		/* a gap that ends within 1/16 of the flow's srtt ends now: its
		 * probe leaves with this wake's batch instead of a wake of its own */
		if (f->deadline_ns > e->now +
				     (f->pending ? (uint64_t)f->srtt_us * 1000 / 16 : 0)) {
			if (f->deadline_ns < next_check)
				next_check = f->deadline_ns;
			continue;
		}
		if (f->cand) {
			candidate(e, f);
			if (f->used && f->cand && f->deadline_ns < next_check)
				next_check = f->deadline_ns;
			continue;
		}
		if (f->pending) {                      /* the gap is over */
			f->pending = 0;
			next(e, f, f->deadline_ns, NULL, 1);
			if (f->used && (f->outstanding || f->pending) && f->deadline_ns < next_check)
				next_check = f->deadline_ns;
			continue;
		}
		/* The ring may have been full: the map has the last answer. */
		memcpy(&r.key, &f->key, sizeof(r.key));
		if (!bpf_map_lookup_elem(e->c.telem_fd, &f->key, &r.t) &&
		    r.t.responses > f->responses_seen && r.t.probe_seq == f->probe_seq) {
			on_resp(e, &r);
			e->st.resp_records--;          /* not a ring record */
		} else {
			f->outstanding = 0;
			f->chained = 0;
			f->probes_lost++;
			e->st.probes_lost++;
			next(e, f, 0, NULL, 0);
		}
		if (f->used && (f->outstanding || f->cand || f->pending) &&
		    f->deadline_ns < next_check)
			next_check = f->deadline_ns;
	}
	e->check_at = next_check;
}

static void sweep(struct hpccd_tcpp *e)
{
	struct hpccd_tcp_cc_state st;
	uint32_t i;

	e->last_sweep = e->now;
	e->st.sweeps++;
	for (i = e->n; i-- > 0;) {                     /* downwards, as timeouts() */
		struct flow *f = ft_find(e, &e->live[i]);

		if (!f || f->cand)
			continue;
		if (cst_of(e, &f->key, &st)) {
			end_flow(e, f);
			continue;
		}
		apply_cst(f, &st);
		if (f->parked && (st.snd_una != st.snd_nxt || tracker_ahead(e, f)) &&
		    !bpf_map_delete_elem(e->c.park_fd, &f->key)) {
			e->st.wakes_missed++;
			if (e->c.path_rate_wc)
				grp_claim(e, f);
			f->chained = 0;
			send_probe(e, f, 0);
		}
	}
	grp_rebuild(e);
}

/* When the heartbeat is due: every heartbeat_ns while there are flows;
 * at once when the first flow comes or the last one goes (the idle mark
 * changes); never while idle and marked so.  An idle engine wrote one
 * configuration with idle_ns and sleeps: the CC counts the daemon alive
 * for a flow younger than stale_ns (that flow's first segment with
 * payload wakes the engine through tc_tracker's wake record, and the
 * heartbeat resumes in that wake), so the heartbeat need not run for flows
 * that do not exist (it was every stale_ns / 4 before: 40 wakeups a
 * second, the idle daemon's largest cost; docs/tcp-side.md, "Issue 19: an
 * idle daemon"). */
static uint64_t hb_due(const struct hpccd_tcpp *e)
{
	if (no_flows(e) != e->idle)
		return 0;
	return e->idle ? UINT64_MAX : e->last_heartbeat + e->c.heartbeat_ns;
}

static uint64_t next_timer(struct hpccd_tcpp *e)
{
	uint64_t t = hb_due(e);

	if (!no_flows(e) && e->last_sweep + e->c.sweep_ns < t)
		t = e->last_sweep + e->c.sweep_ns;
	if (e->check_at < t)
		t = e->check_at;
	return t;
}

static void timers(struct hpccd_tcpp *e)
{
	if (e->now >= hb_due(e))
		heartbeat(e);
	if (e->now >= e->check_at)
		timeouts(e);
	if (!no_flows(e) && e->now >= e->last_sweep + e->c.sweep_ns)
		sweep(e);
	if (no_flows(e))
		e->last_sweep = e->now;                /* first sweep sweep_ns after a flow */
}

/* ---- API ---------------------------------------------------------------- */

int hpccd_tcpp_new(const struct hpccd_tcpp_config *c, struct hpccd_tcpp **out)
{
	struct hpccd_tcpp *e;
	struct epoll_event ev = { .events = EPOLLIN };
	struct hpccd_hpcc probe;
	const char *why = NULL;
	uint32_t cap = 16;
	int err;

	*out = NULL;
	if (!c->heartbeat_ns || !c->sweep_ns || !c->stale_ns || c->room > 8 ||
	    !c->max_flows || c->max_flows > (1u << 20) ||
	    c->timeout_min_ns > c->timeout_max_ns || (c->t_from_rtt && c->t_rtt_factor < 1.0) ||
	    !(c->probe_gap_rtt >= 0 && c->probe_gap_rtt <= 16) ||
	    !(c->cwnd_rtt_gain >= 0 && c->cwnd_rtt_gain <= 16) ||
	    !(c->host_cap_t >= 0 && c->host_cap_t <= 64) ||
	    !(c->path_rate_gain >= 0.1 && c->path_rate_gain <= 4) ||
	    !(c->solo_rate_gain >= 0.1 && c->solo_rate_gain <= 4) ||
	    !(c->pace_gain_max >= 1 && c->pace_gain_max <= 4) ||
	    c->path_rate_wc > 1 || (c->path_rate_wc && !c->path_rate_shared) ||
	    c->app_limited_hold > 1)
		return -EINVAL;
	if (hpccd_hpcc_init(&probe, &c->hpcc, HPCCD_ALGO_HPCC, &why))
		return -EINVAL;
	while (cap < 2 * c->max_flows)
		cap <<= 1;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->c = *c;
	e->cap = cap;
	e->w_init = probe.w_init;
	e->rate_init_Bps = c->hpcc.line_rate_bps / 8;
	e->next_flow_id = 1;
	e->check_at = UINT64_MAX;
	e->epfd = e->evfd = -1;
	pthread_mutex_init(&e->mu, NULL);
	e->ft = calloc(cap, sizeof(*e->ft));
	e->grp = calloc(cap, sizeof(*e->grp));
	e->live = calloc(cap, sizeof(*e->live));
	if (!e->ft || !e->grp || !e->live) {
		err = -ENOMEM;
		goto fail;
	}
	e->rb = ring_buffer__new(c->resp_rb_fd, ring_cb, e, NULL);
	if (!e->rb) {
		err = -errno;
		goto fail;
	}
	if (ring_buffer__add(e->rb, c->wake_rb_fd, ring_cb, e)) {
		err = -errno;
		goto fail;
	}
	e->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	e->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (e->evfd < 0 || e->epfd < 0) {
		err = -errno;
		goto fail;
	}
	ev.data.u32 = 0;
	if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, ring_buffer__epoll_fd(e->rb), &ev)) {
		err = -errno;
		goto fail;
	}
	ev.data.u32 = 1;
	if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->evfd, &ev)) {
		err = -errno;
		goto fail;
	}
	e->now = mono_ns();
	heartbeat(e);
	e->last_sweep = e->now;
	*out = e;
	return 0;
fail:
	hpccd_tcpp_free(e);
	return err;
}

/* A timed wait that asked to return at `want` returned at `now`: into the
 * wait-lateness counters, and into lead_ns (include/hpccd/wake_late.h: the
 * moving mean, a preempted wait left out). */
static void wake_late(struct hpccd_tcpp *e, uint64_t want, uint64_t now)
{
	e->st.wake_late_sum_ns += now > want ? now - want : 0;
	e->st.wake_late_n++;
	e->lead_ns = hpccd_wake_late_mean(e->lead_ns, want, now);
	e->st.wake_lead_ns = e->c.wake_lead ? e->lead_ns : 0;
}

int hpccd_tcpp_run(struct hpccd_tcpp *e, int64_t timeout_ns)
{
	struct epoll_event evs[2];
	uint64_t end, t, buf, wait;
	struct timespec ts;
	int n, i, rc = 0;

	/* The thread that serves the engine without a limit wakes at each
	 * probe gap's end (one srtt, 100-700 us in the lab): its timers with
	 * 1 us of slack, not the default 50 us (a thread's own setting).  It
	 * is named for top -H and the idle benchmark's per-thread figures, as
	 * the transport names its hpccd-tp. */
	if (timeout_ns < 0) {
		prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
		prctl(PR_SET_NAME, "hpccd-tcp-side", 0, 0, 0);
	}
	pthread_mutex_lock(&e->mu);
	e->now = mono_ns();
	end = timeout_ns < 0 ? UINT64_MAX : e->now + (uint64_t)timeout_ns;
	for (;;) {
		e->now = mono_ns();
		if (ring_buffer__consume(e->rb) < 0) {
			rc = -errno ? -errno : -EIO;
			break;
		}
		e->now = mono_ns();
		timers(e);
		flush(e);                              /* this wake's probes, one syscall */
		/* the wait is relative: from now, not from before the flush (on
		 * veth the probes' whole way through the lab runs inside it, 25 us
		 * and more, and every wait after a send ended that much late) */
		e->now = mono_ns();
		if (e->stop || e->now >= end)
			break;
		t = next_timer(e);
		if (end < t)
			t = end;
		/* nanoseconds (epoll_pwait2): a probe due in 300 us must not
		 * wait for epoll_wait's next millisecond */
		wait = t <= e->now ? 0 : t - e->now;
		if (wait > 60000000000ull)
			wait = 60000000000ull;
		ts.tv_sec = (time_t)(wait / 1000000000ull);
		ts.tv_nsec = (long)(wait % 1000000000ull);
		pthread_mutex_unlock(&e->mu);
		n = epoll_pwait2(e->epfd, evs, 2, &ts, NULL);
		pthread_mutex_lock(&e->mu);
		if (n < 0 && errno != EINTR) {
			rc = -errno;
			break;
		}
		e->st.wakeups++;
		if (n == 0 && wait)
			wake_late(e, e->now + wait, mono_ns());
		for (i = 0; i < n; i++)
			if (evs[i].data.u32 == 1 && read(e->evfd, &buf, sizeof(buf)) == sizeof(buf))
				e->stop = 1;
	}
	pthread_mutex_unlock(&e->mu);
	return rc;
}

int hpccd_tcpp_stop(struct hpccd_tcpp *e)
{
	uint64_t one = 1;

	return write(e->evfd, &one, sizeof(one)) == sizeof(one) ? 0 : -errno;
}

int hpccd_tcpp_stats(struct hpccd_tcpp *e, struct hpccd_tcpp_stats *out)
{
	pthread_mutex_lock(&e->mu);
	*out = e->st;
	out->flows = e->n - e->n_cand;
	pthread_mutex_unlock(&e->mu);
	return 0;
}

int hpccd_tcpp_flows(struct hpccd_tcpp *e, struct hpccd_tcpp_flow_info *out, uint32_t n)
{
	uint32_t i, k = 0;

	pthread_mutex_lock(&e->mu);
	for (i = 0; i < e->cap && k < n; i++) {
		const struct flow *f = &e->ft[i];
		struct hpccd_tcpp_flow_info *o = &out[k];

		if (!f->used || f->cand)
			continue;
		memset(o, 0, sizeof(*o));
		memcpy(o->key, &f->key, 16);
		o->flow_id = f->flow_id;
		o->parked = (uint32_t)f->parked;
		o->W = f->hpcc.W;
		o->U = f->hpcc.U;
		o->rate_bps = hpccd_hpcc_rate_bps(&f->hpcc);
		o->T_ns = f->T_ns;
		o->W_max = f->hpcc.w_max;
		o->T_changes = f->n_T;
		o->probes_sent = f->probes_sent;
		o->probes_answered = f->probes_answered;
		o->probes_lost = f->probes_lost;
		o->late_responses = f->late_responses;
		o->probe_rtt_ns = f->probe_rtt_ns;
		o->probe_rtt_min_ns = f->probe_rtt_min_ns;
		o->last_rtt_ns = f->last_rtt_ns;
		o->chain_rtt_ns = f->chain_rtt_ns;
		o->chain_interval_ns = f->chain_interval_ns;
		o->probe_sent_ns = f->probe_sent_ns;
		o->probe_due_ns = f->probe_due_ns;
		o->srtt_us = f->srtt_us;
		o->rtt_min_us = f->rtt_min_us;
		o->last_update_ns = f->last_update_ns;
		o->cwnd_bytes = f->cwnd_bytes;
		o->qdelay_ns = f->qdelay_ns;
		o->host_ns = f->host_ns;
		o->deliv_bps = f->deliv_bps;
		o->pace_acked_bits = f->pl_acked_sum;
		o->pace_want_bits = f->pl_want_sum;
		o->pace_gain = f->pl_gain > 0 ? f->pl_gain : 1;
		o->path_id = f->path_id;
		o->nhop = f->nhop;
		memcpy(o->hops, f->hops, sizeof(o->hops));
		o->nhop_prev = f->nhop_prev;
		memcpy(o->hops_prev, f->hops_prev, sizeof(o->hops_prev));
		k++;
	}
	pthread_mutex_unlock(&e->mu);
	return (int)k;
}

void hpccd_tcpp_free(struct hpccd_tcpp *e)
{
	uint32_t i;

	if (!e)
		return;
	if (e->ft)
		for (i = 0; i < e->cap; i++)
			if (e->ft[i].used)
				forget(e, &e->ft[i]);
	ring_buffer__free(e->rb);
	if (e->epfd >= 0)
		close(e->epfd);
	if (e->evfd >= 0)
		close(e->evfd);
	pthread_mutex_destroy(&e->mu);
	free(e->ft);
	free(e->grp);
	free(e->live);
	free(e);
}
