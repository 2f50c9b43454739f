// SPDX-License-Identifier: BSD-2-Clause
/*
 * The transport engine's protocol without a socket (tests/unit/
 * test_engine_protocol.py builds and runs this): two engines, A (sender)
 * and B (receiver), made with the engine's own tp__state_init() over a
 * malloc'd UMEM, joined by a simulated link, driven tick by tick on a
 * simulated clock through the engine's own functions (the receive path
 * rx_frame, the timers, the scheduler).  Only the ring layer is fake
 * (fake_rings.c).  The link is a queue per direction with a one-way
 * delay, random loss, optional reordering (a frame held back behind the
 * next), and in front of each engine an RX ring of the size the engine
 * was made for, which B empties `budget` frames per tick (a receiver
 * slower than its sender: the ring overflows unless the sender keeps
 * within the receive window).
 *
 *   harness SCENARIO SEED [key=value ...]
 *
 * Scenarios: transfer (one flow A -> B; loss, reorder, recovery, algo,
 * bytes, window, budget, frames, rate_gbps, drop=I,J,...: those frames
 * A -> B lost, ce=P: ECN-capable frames A -> B CE-marked with probability
 * P, ce_list=I,J,...: those frames CE-marked, delay_us: one-way delay,
 * win=1: DCQCN/TIMELY "+win"; tamper=forge|replay|truncate with tamper_every=K: every K-th
 * ACK / NACK B -> A (tamper_cnp=1: every K-th CNP instead) is forged (one
 * bit of its ack flipped, tag kept), delivered twice, or cut before its
 * trailer), restart (B loses its state
 * mid-flow), admit (A opens `flows` flows; B admits rx_peer_max of them),
 * bneck (`flows` flows of `algo` A -> B with INT on every DATA through a
 * switch port of bneck_gbps and buf_kb in front of the link, which stamps
 * the INT hop as each frame leaves its queue: feedback frames per DATA
 * frame, the port's utilisation and queue), fairness (`flows` HPCC flows
 * joining the port one a step_us and leaving in reverse order, the lab's
 * fairness experiment: per bin_us each flow's bytes acknowledged, W, U and
 * W^c updates; tests/unit/engine/fairness_trace.py reads it), longshort,
 * rxtable (B's receiver table under `senders` honest peers and a hostile
 * one: rxtable() below), peertable (B's table of peers under a sender
 * spoofing many addresses: peertable() below);
 * N=, w_ai=: HPCC's W_AI; eta=, max_stage=: its eta and maxStage;
 * qlen_scale=K: the port stamps K x its queue (one frame weighs in U as at
 * a K times smaller B x T);
 * tick_ns=: the clock's step below 1 us; int_noq=1: the port stamps qLen 0; int_at=deq:
 * qLen as the queue behind the frame when its transmission began (else
 * when it ended); late_us=L: both engines wake at random gaps of mean L
 * instead of every tick (software timers); linger_us=L: the simulation
 * goes on L after A's flows ended, and cnp_at_us lists when B sent its
 * CNPs; hs_at=V: the flow's 32-bit per-packet counters start at V;
 * start_ns=S: the simulated clock starts at S (default the real clock's
 * now: a run is then one of the phases a real engine may start at).
 * Prints one JSON object with
 * what happened.
 */
#include "tp.h"

#include <stdio.h>
#include <stdlib.h>
#include <math.h>

/* The simulated clock's step: each engine takes a turn per tick (tick_us;
 * scale: a coarser tick is an engine that sleeps between batches, as its
 * coalesce_ns makes it) */
static uint64_t tick_ns = 1000;
#define MAX_LINK (1u << 16)

struct pkt {
	uint64_t due;
	uint64_t arr;                    /* bneck: when it came into the port's queue */
	uint32_t len;
	uint8_t *bytes;
};

struct link {                    /* one direction */
	struct pkt q[MAX_LINK];
	uint32_t head, n;
	double loss;
	double reorder;
	uint64_t delay_ns;
	uint64_t sent, lost, reordered;
	struct pkt held;         /* reordering: a frame waiting for the next */
};

struct rxring {                  /* the receiving engine's RX ring */
	struct pkt q[MAX_LINK];
	uint32_t head, n;
	uint32_t frames, cap;            /* descriptors: a multi-buffer packet takes one a piece */
	uint32_t one;                    /* bytes a piece: the frame's room after the headroom */
	uint64_t credit;                 /* descriptors the engine may take (budget a tick) */
	uint64_t dropped;
};

static struct hpccd_tp *A, *B;
/* fake_rings.c: with fake_tx_deferred, submitted frames wait for
 * fake_tx_complete() (the simulated kernel's TX, apart from the engine's
 * turn); otherwise they go onto the link at once */
extern int fake_tx_deferred;
void fake_tx_complete(struct hpccd_tp *t);
static struct link ab, ba;
static uint32_t flow_int_mode = HPCCD_TP_INT_NONE;
static double T_ns = 50000;

/* bneck: a switch port in front of the A -> B link, FIFO at bn.bps with
 * bn.buf bytes of buffer; the INT hop of a frame is stamped when it leaves
 * the queue ([HPCC] section 4.1: ts, txBytes, qLen at departure). */
static struct {
	struct pkt q[MAX_LINK];
	uint32_t head, n;
	uint64_t bps, buf, bytes, free_at, tx_bytes, drops;
	uint64_t first_ns, last_ns, departed;
	uint32_t *qs;                    /* queue bytes at each departure */
	uint64_t nqs;
	uint64_t rx_bytes;               /* bytes that arrived at the queue (admitted) */
	int at_deq;                      /* int_at=deq: qLen is the queue behind the
					  * packet when its transmission began (a
					  * switch's dequeue), not when it ended */
	int noq;                         /* int_noq=1: qLen always stamped 0 (which of
					  * U's two terms a behaviour comes from) */
	uint32_t qscale;                 /* qlen_scale=K: qLen stamped K x the queue (a
					  * frame queued weighs in U as at a B x T K
					  * times smaller, the rest unchanged) */
	int rxrate;                      /* rxrate=1: the hop's txBytes carries rx_bytes
					  * ([HPCC] section 3.4's "rxRate", as the lab's
					  * HPCCD_SW_F_RX_BYTES) */
	uint64_t bin_ns, bin_end, bin_tx, nbins;   /* the port's use per bin */
	double use_sum, use_sq;
	uint64_t trace_ns;               /* qtrace_us: (time, queue) every this long */
	uint64_t trace_next, ntrace;
	uint32_t trace[2048][2];         /* us from the first departure, queue bytes */
} bn;

/* tamper: what happens to every tamper_every-th ACK / NACK B -> A (or CNP,
 * tamper_cnp) */
enum { T_NONE, T_FORGE, T_REPLAY, T_TRUNC };
static int tamper, tamper_cnp;
static uint64_t tamper_every, fb_seen, tampered;
static struct rxring ring_a, ring_b;
static uint64_t sim_now;
static uint64_t line_rate_bps = 10000000000ull;
static uint32_t max_rx_live;
static uint64_t rng = 1;

static double rnd(void)
{
	rng = splitmix64(rng);
	return (double)(rng >> 11) / 9007199254740992.0;
}

/* drop=I,J,...: the I-th, J-th ... frame sent A -> B is lost (from 0) */
static uint64_t drop_list[64];
static uint32_t n_drop;

static int listed(uint64_t i)
{
	uint32_t k;

	for (k = 0; k < n_drop; k++)
		if (drop_list[k] == i)
			return 1;
	return 0;
}

/* ce=P, ce_list=I,J,...: CE marks on ECN-capable frames A -> B, as a
 * switch's ECN marking would set them (the IP checksum refreshed) */
static double ce_prob;
static uint64_t ce_list[64];
static uint32_t n_ce_list;
static uint64_t ce_marked;

static void parse_list(const char *d, uint64_t *out, uint32_t *n)
{
	char *end;

	while (*d && *n < 64) {
		out[(*n)++] = strtoull(d, &end, 10);
		d = *end == ',' ? end + 1 : end;
		if (end == d && *d)
			break;
	}
}

/* A big-endian 16-bit field at p: the harness tampers with frames the
 * engine wrote (lengths of a cut packet, a switch's pathID). */
static void put16(uint8_t *p, uint16_t host)
{
	uint16_t v = htons(host);

	memcpy(p, &v, 2);
}

static void maybe_mark(uint8_t *frame, uint32_t len, uint64_t i)
{
	uint8_t *tos = frame + ETH_HLEN_ + 1;
	uint32_t k;
	int mark = ce_prob > 0 && rnd() < ce_prob;

	for (k = 0; k < n_ce_list && !mark; k++)
		mark = ce_list[k] == i;
	if (!mark || !(*tos & 3) || (*tos & 3) == 3)
		return;
	*tos |= 3;
	fill_l3_csums(frame, len);
	ce_marked++;
}

static void link_push(struct link *l, const uint8_t *frame, uint32_t len)
{
	struct pkt p;

	l->sent++;
	if (rnd() < l->loss || (l == &ab && listed(l->sent - 1))) {
		l->lost++;
		return;
	}
	if (l->n == MAX_LINK) {
		fprintf(stderr, "harness: link queue full\n");
		exit(3);
	}
	p.due = sim_now + l->delay_ns;
	p.len = len;
	p.bytes = malloc(len);
	memcpy(p.bytes, frame, len);
	if (l == &ab)
		maybe_mark(p.bytes, len, l->sent - 1);
	if (!l->held.bytes && rnd() < l->reorder) {
		l->held = p;             /* goes out behind the next frame */
		l->reordered++;
		return;
	}
	l->q[(l->head + l->n++) % MAX_LINK] = p;
	if (l->held.bytes) {
		l->held.due = p.due;
		l->q[(l->head + l->n++) % MAX_LINK] = l->held;
		l->held.bytes = NULL;
	}
}

static uint32_t hdr_off_of(const uint8_t *f)
{
	return L2L4 + HPCCD_INT_HDR_BYTES + (f[L2L4 + 1] & 0xf) * HPCCD_INT_HOP_BYTES;
}

/* A frame B -> A, perhaps tampered with (the copy is changed, never B's). */
static void tamper_push(const uint8_t *frame, uint32_t len)
{
	uint8_t f[4096];
	uint32_t h = hdr_off_of(frame), type = h < len ? frame[h] & 0xf : 0;
	int mine = tamper_cnp ? type == HPCCD_T_CNP : type == HPCCD_T_ACK || type == HPCCD_T_NACK;

	if (!tamper || !mine || ++fb_seen % tamper_every || len > sizeof(f)) {
		link_push(&ba, frame, len);
		return;
	}
	tampered++;
	memcpy(f, frame, len);
	switch (tamper) {
	case T_FORGE:                    /* ack one byte further, checksums fixed */
		f[h + 23] ^= 1;
		fill_l3_csums(f, len);
		link_push(&ba, f, len);
		break;
	case T_REPLAY:                   /* the genuine one, then its copy */
		link_push(&ba, frame, len);
		link_push(&ba, frame, len);
		break;
	case T_TRUNC:                    /* cut before the trailer, lengths fixed */
		len -= HPCCD_FB_TRAILER_BYTES;
		put16(f + h + 2, (uint16_t)(len - h - HPCCD_HDR_BYTES));
		put16(f + 16, (uint16_t)(len - ETH_HLEN_));
		put16(f + 38, (uint16_t)(len - ETH_HLEN_ - IP_HLEN));
		fill_l3_csums(f, len);
		link_push(&ba, f, len);
		break;
	}
}

/* A frame A -> B into the switch port's queue (dropped when full). */
static void bneck_push(const uint8_t *frame, uint32_t len)
{
	struct pkt p;
	uint64_t start = bn.free_at > sim_now ? bn.free_at : sim_now;

	if (bn.bytes + len > bn.buf || bn.n == MAX_LINK) {
		bn.drops++;
		ab.sent++;
		ab.lost++;
		return;
	}
	p.len = len;
	p.bytes = malloc(len);
	memcpy(p.bytes, frame, len);
	bn.free_at = start + (uint64_t)len * 8 * 1000000000ull / bn.bps;
	p.due = bn.free_at;
	p.arr = sim_now;
	bn.q[(bn.head + bn.n++) % MAX_LINK] = p;
	bn.bytes += len;
	bn.rx_bytes += len;
}

/* Frames whose transmission ended leave the port: their INT hop is
 * stamped (the queue left behind, the departure time, the bytes sent),
 * then they travel the link. */
static void bneck_depart(void)
{
	/* the port's use per bin_ns, from its first departure on */
	if (bn.bin_ns && bn.departed) {
		if (!bn.bin_end)
			bn.bin_end = bn.first_ns + bn.bin_ns;
		while (sim_now >= bn.bin_end && A->n_running) {
			double u = (double)bn.bin_tx * 8e9 / (double)bn.bps / (double)bn.bin_ns;

			bn.use_sum += u;
			bn.use_sq += u * u;
			bn.nbins++;
			bn.bin_tx = 0;
			bn.bin_end += bn.bin_ns;
		}
	}
	while (bn.n && bn.q[bn.head].due <= sim_now) {
		struct pkt p = bn.q[bn.head];
		uint8_t *ih = p.bytes + L2L4;
		uint32_t nhop = ih[1] >> 4, room = ih[1] & 0xf;

		bn.head = (bn.head + 1) % MAX_LINK;
		bn.n--;
		bn.bytes -= p.len;
		bn.tx_bytes += p.len;
		bn.bin_tx += p.len;
		if (!bn.departed++)
			bn.first_ns = p.due;
		bn.last_ns = p.due;
		bn.qs[bn.nqs++ % (1u << 22)] = (uint32_t)bn.bytes;
		if (bn.trace_ns && p.due >= bn.trace_next && bn.ntrace < 2048) {
			bn.trace[bn.ntrace][0] = (uint32_t)((p.due - bn.first_ns) / 1000);
			bn.trace[bn.ntrace++][1] = (uint32_t)bn.bytes;
			bn.trace_next = p.due + bn.trace_ns;
		}
		if (((ih[2] >> 4) & HPCCD_INT_F_COLLECT) && nhop < room) {
			uint64_t q = bn.bytes;
			struct hpccd_int_fields fl;

			if (bn.at_deq) {
				uint64_t start = p.due - (uint64_t)p.len * 8 * 1000000000ull / bn.bps;
				uint32_t k;

				for (k = 0, q = 0; k < bn.n; k++) {
					const struct pkt *b = &bn.q[(bn.head + k) % MAX_LINK];

					if (b->arr > start)
						break;
					q += b->len;
				}
			}
			q *= bn.qscale;
			fl = (struct hpccd_int_fields){
				.speed_code = hpccd_int_speed_code(bn.bps),
				.ts = (uint32_t)(p.due & HPCCD_INT_TS_MASK),
				.tx_units = (uint32_t)(((bn.rxrate ? bn.rx_bytes : bn.tx_bytes) /
							HPCCD_INT_TX_UNIT) & HPCCD_INT_TX_MASK),
				.qlen_units = bn.noq ? 0 :
					      q / HPCCD_INT_QLEN_UNIT > HPCCD_INT_QLEN_MAX ?
					      (uint32_t)HPCCD_INT_QLEN_MAX :
					      (uint32_t)(q / HPCCD_INT_QLEN_UNIT),
			};

			hpccd_int_hop_pack(&fl, (struct hpccd_int_hop_wire *)(ih + 4 + 8 * nhop));
			ih[1] = (uint8_t)((nhop + 1) << 4 | room);
			put16(ih + 2, (uint16_t)((ih[2] << 8 | ih[3]) ^ 1));   /* switch id 1 */
			fill_l3_csums(p.bytes, p.len);
		}
		p.due = sim_now + ab.delay_ns;
		ab.sent++;
		ab.q[(ab.head + ab.n++) % MAX_LINK] = p;
	}
}

void fake_link_put(struct hpccd_tp *t, const uint8_t *frame, uint32_t len)
{
	if (t == A && bn.bps)
		bneck_push(frame, len);
	else if (t == A)
		link_push(&ab, frame, len);
	else
		tamper_push(frame, len);
}

/* Due frames from the link into the receiver's RX ring (dropped when full,
 * as the kernel drops when the ring or the fill ring has no room). */
static uint32_t pieces_of(const struct rxring *r, uint32_t len)
{
	return (len + r->one - 1) / r->one;
}

static void link_deliver(struct link *l, struct rxring *r)
{
	while (l->n && l->q[l->head].due <= sim_now) {
		struct pkt p = l->q[l->head];

		l->head = (l->head + 1) % MAX_LINK;
		l->n--;
		if (r->frames + pieces_of(r, p.len) > r->cap) {
			r->dropped++;
			free(p.bytes);
			continue;
		}
		r->frames += pieces_of(r, p.len);
		r->q[(r->head + r->n++) % MAX_LINK] = p;
	}
}

/* The simulated kernel's receive: descriptors of the RX ring, within the
 * turn's credit and at most `max` of them, each copied into a free UMEM
 * frame (the fill ring's) and described in d[]: a packet, or as the
 * kernel splits a multi-buffer packet, a frame's room after the XDP
 * headroom a piece, XDP_PKT_CONTD on all but the last.  Returns how many. */
static __attribute__((noinline)) uint32_t kernel_rx(struct hpccd_tp *t, struct rxring *r,
						     struct xdp_desc *d, uint32_t max)
{
	uint32_t k = 0;

	while (r->n && pieces_of(r, r->q[r->head].len) <= r->credit &&
	       k + pieces_of(r, r->q[r->head].len) <= max) {
		struct pkt p = r->q[r->head];
		uint32_t pieces = pieces_of(r, p.len), off, n;

		r->credit -= pieces;
		r->head = (r->head + 1) % MAX_LINK;
		r->n--;
		r->frames -= pieces;
		if (t->n_rx_free < pieces || (pieces > 1 && !t->sg)) {
			r->dropped++;            /* fill ring empty, or too large */
			free(p.bytes);
			continue;
		}
		for (off = 0; off < p.len; off += n) {
			uint64_t chunk = t->rx_free[--t->n_rx_free];

			n = p.len - off < r->one ? p.len - off : r->one;
			memcpy((uint8_t *)t->area + chunk + HEADROOM, p.bytes + off, n);
			d[k].addr = chunk + HEADROOM;
			d[k].len = n;
			d[k++].options = off + n < p.len ? XDP_PKT_CONTD : 0;
		}
		free(p.bytes);
	}
	return k;
}

/* budget descriptors a tick; a packet of more pieces waits for the ticks
 * it takes (never more than one packet's worth banked) */
static void rx_credit(struct rxring *r, uint32_t budget)
{
	r->credit += budget;
	if (r->credit > (uint64_t)budget + MB_FRAGS)
		r->credit = (uint64_t)budget + MB_FRAGS;
}

/* The engine takes up to `budget` descriptors of its RX ring, in batches
 * of RX_BATCH through rx_descs, as rx_pipe does. */
static void engine_rx(struct hpccd_tp *t, struct rxring *r, uint32_t budget)
{
	struct xdp_desc d[RX_BATCH];
	uint32_t n;

	rx_credit(r, budget);
	while ((n = kernel_rx(t, r, d, RX_BATCH)) != 0)
		rx_descs(t, d, n, sim_now);
}

/* One turn of an engine's loop (tp__main without the rings and the wait). */
static void engine_turn(struct hpccd_tp *t, struct rxring *r, uint32_t budget)
{
	int more;

	engine_rx(t, r, budget);
	flow_timers(t, sim_now);
	rx_timers(t, sim_now);
	schedule(t, sim_now, &more);
	tx_submit(t);
}

static struct hpccd_tp *engine(uint32_t addr, struct hpccd_tp_config *c)
{
	struct hpccd_tp *t = calloc(1, sizeof(*t));

	t->cfg = *c;
	t->cfg.local_addr = addr;
	pthread_mutex_init(&t->lock, NULL);
	snprintf(t->ifname, sizeof(t->ifname), "fake%u", addr & 0xff);
	t->area_len = (size_t)(c->rx_frames + c->tx_frames) * c->frame_size;
	t->area = aligned_alloc(4096, t->area_len);
	if (!t->area || tp__state_init(t)) {
		fprintf(stderr, "harness: out of memory\n");
		exit(3);
	}
	wheel_start(&t->pace, sim_now);         /* on the simulated clock */
	wheel_start(&t->timer, sim_now);
	return t;
}

static void engine_free(struct hpccd_tp *t)
{
	tp__state_free(t);
	free(t->area);
	free(t);
}

static const char *arg(int argc, char **argv, const char *key, const char *dflt)
{
	size_t n = strlen(key);
	int i;

	for (i = 3; i < argc; i++)
		if (!strncmp(argv[i], key, n) && argv[i][n] == '=')
			return argv[i] + n + 1;
	return dflt;
}

#define ADDR_A 0x0a000001u
#define ADDR_B 0x0a000002u

static uint32_t flow_mtu = 1500;
static uint32_t flow_N = 100;    /* N: HPCC's W_AI = W_init (1 - eta) / N ([HPCC] 3.3) */
static double flow_w_ai;         /* w_ai: W_AI in bytes instead */
static double flow_eta;          /* eta: HPCC's eta (0: the core's default, 0.95) */
static uint32_t flow_max_stage = UINT32_MAX;   /* max_stage: maxStage (else the default) */
static uint32_t rate_win;        /* win=1: DCQCN+win, TIMELY+win */

static uint32_t open_flow(uint64_t bytes, uint32_t algo, uint32_t recovery, uint64_t seed,
			  uint16_t sport)
{
	struct hpccd_tp_flow_cfg c;
	uint32_t id;
	int rc;

	hpccd_tp_flow_cfg_default(&c);
	c.algo = algo;
	c.recovery = recovery;
	c.bytes = bytes;
	c.seed = seed;
	c.saddr = ADDR_A;
	c.daddr = ADDR_B;
	c.sport = sport;
	c.dport = A->cfg.udp_port;
	c.int_mode = flow_int_mode;
	c.line_rate_bps = line_rate_bps;
	c.hpcc.line_rate_bps = c.line_rate_bps;
	c.hpcc.T_ns = T_ns;
	c.hpcc.N_flows = flow_N;
	if (flow_w_ai > 0)
		c.hpcc.w_ai_bytes = flow_w_ai;
	if (flow_eta > 0)
		c.hpcc.eta = flow_eta;
	if (flow_max_stage != UINT32_MAX)
		c.hpcc.max_stage = flow_max_stage;
	c.ldcp.line_rate_bps = c.line_rate_bps;
	c.ldcp.rtt_ns = 50000;
	c.rto_min_ns = 1000000;
	c.timeout_ns = 2000000000ull;
	c.mtu = flow_mtu;
	c.rate_win = rate_win;
	rc = hpccd_tp__flow_open(A, &c, &id);
	if (rc) {
		fprintf(stderr, "harness: flow_open: %s\n", hpccd_tp__error(A));
		exit(3);
	}
	/* flow_open stamps the real clock, which runs ahead of the simulated
	 * one by the real time the harness has taken so far (more when its
	 * process waits for a CPU): the flow starts now, in simulated time,
	 * so flows opened together start together */
	{
		struct tp_flow *fl = &A->flows[id & A->slot_mask];

		fl->start_ns = fl->last_progress_ns = fl->next_send_ns = sim_now;
		sched_wake(A, fl, sim_now);
	}
	return id;
}

static uint32_t algo_of(const char *s)
{
	if (!strcmp(s, "hpcc"))
		return HPCCD_ALGO_HPCC;
	if (!strcmp(s, "rx-hpcc"))
		return HPCCD_ALGO_RXHPCC;
	if (!strcmp(s, "ldcp"))
		return HPCCD_ALGO_LDCP;
	if (!strcmp(s, "dcqcn"))
		return HPCCD_ALGO_DCQCN;
	if (!strcmp(s, "timely"))
		return HPCCD_ALGO_TIMELY;
	return HPCCD_ALGO_DCTCP;
}

static uint64_t stall_ns, stall_at, stall_from;
/* linger_us: the link and both engines go on this long after A's flows
 * ended (timers of B's that outlive them, a held CNP); the CNPs B sent,
 * at what simulated time (cnp_at, from the transfer's open) */
static uint64_t linger_ns, t_open;
static uint64_t cnp_at[8];
static uint32_t n_cnp_at;

static void track_cnps(void)
{
	uint64_t sent = 0;
	uint32_t i;

	for (i = 0; i < B->cfg.rx_flows; i++)
		if (B->rxt[i].used == 1)
			sent += B->rxt[i].st.cnps_sent;
	while (n_cnp_at < sent && n_cnp_at < 8)
		cnp_at[n_cnp_at++] = sim_now - t_open;
}
/* The transfer's flow: its pacing rate's least and its value after the
 * algorithm's first reaction (cc_updates 0 -> 1). */
static struct tp_flow *track;
static double rate_min = -1, rate_first = -1;

static void track_rate(void)
{
	if (!track || track->state != HPCCD_TP_RUNNING)
		return;
	if (rate_min < 0 || track->rate_bps < rate_min)
		rate_min = track->rate_bps;
	if (rate_first < 0 && TP_HS(track, cc_updates))
		rate_first = track->rate_bps;
}

/* late_us=L: the engines' wake-ups as software timers give them (the lab's
 * ppoll() came 10-50 us late, docs/experiments.md "Where the sending time
 * went"): after each turn an engine's next turn comes after a random gap,
 * uniform in [0, 2 L] (mean L), instead of on the next microsecond; what
 * arrives meanwhile waits in its RX ring, what is due waits in its flows.
 * 0 (the default): every tick. */
static uint64_t late_ns, next_turn_a, next_turn_b;

static int turn_due(uint64_t *next)
{
	if (!late_ns)
		return 1;
	if (sim_now < *next)
		return 0;
	*next = sim_now + (uint64_t)(rnd() * 2.0 * (double)late_ns);
	return 1;
}

/* Runs until every flow of A is done or failed, or `limit_ns` passed. */
static void run(uint64_t limit_ns, uint32_t budget_b, int (*hook)(void))
{
	uint64_t end = sim_now + limit_ns, linger_until = 0;

	while (sim_now < end) {
		if (bn.bps)
			bneck_depart();
		track_rate();
		link_deliver(&ab, &ring_b);
		link_deliver(&ba, &ring_a);
		if (turn_due(&next_turn_a))
			engine_turn(A, &ring_a, UINT32_MAX);
		/* stall: B's thread held off its CPU for stall_ns once A has
		 * sent stall_at bytes (its ring keeps what comes meanwhile) */
		if (stall_ns && !stall_from && A->st.tx_bytes >= stall_at)
			stall_from = sim_now;
		if ((!stall_from || sim_now >= stall_from + stall_ns) && turn_due(&next_turn_b))
			engine_turn(B, &ring_b, budget_b);
		if (hook && hook())
			hook = NULL;
		if (B->rx_live > max_rx_live)
			max_rx_live = B->rx_live;
		if (linger_ns)
			track_cnps();
		if (!A->n_running) {
			if (!linger_ns)
				return;
			if (!linger_until)
				linger_until = sim_now + linger_ns;
			if (sim_now >= linger_until)
				return;
		}
		sim_now += tick_ns;
	}
}

/* Flow i of `nflows` DCTCP flows A -> B that share rate_gbps (each paced
 * at line_rate_bps / nflows; rto_min_ns 0: the default), started on the
 * simulated clock, as open_flow() does (opening 10,000 flows takes real
 * time, much more under valgrind: flows stamped with the real clock
 * started at times that varied from run to run), one packet time of the
 * aggregate rate after flow i - 1: the packets of the N flows come evenly
 * spaced, as with one flow, not in bursts of N.  Exits on a refusal. */
static struct tp_flow *open_share(uint32_t i, uint32_t nflows, uint64_t rto_min_ns)
{
	struct hpccd_tp_flow_cfg c;
	struct tp_flow *fl;
	uint32_t id;

	hpccd_tp_flow_cfg_default(&c);
	c.algo = HPCCD_ALGO_DCTCP;
	c.bytes = 1ull << 40;
	c.seed = i;
	c.saddr = ADDR_A;
	c.daddr = ADDR_B;
	c.sport = (uint16_t)(1024 + i);
	c.dport = A->cfg.udp_port;
	c.int_mode = HPCCD_TP_INT_NONE;
	c.line_rate_bps = line_rate_bps / nflows;
	if (rto_min_ns)
		c.rto_min_ns = rto_min_ns;
	if (hpccd_tp__flow_open(A, &c, &id)) {
		fprintf(stderr, "harness: flow_open %u: %s\n", i, hpccd_tp__error(A));
		exit(3);
	}
	fl = &A->flows[id & A->slot_mask];
	fl->start_ns = fl->last_progress_ns = fl->next_send_ns =
		sim_now + (uint64_t)((double)i * (fl->hdr_max + fl->mss) * 8e9 /
				     (double)line_rate_bps);
	sched_wake(A, fl, sim_now);
	return fl;
}

/* scale: the engines' CPU time per data packet with `flows` flows open at
 * once, each paced at rate_gbps / flows (the aggregate stays the same),
 * for `ms` of simulated time: the cost of the scheduler and the timers as
 * the flows grow (issue 14: within 10 % from 1 to 10,000). */
/* The turns scale() times: a function of its own, so that valgrind
 * counts exactly them (callgrind --toggle-collect=timed_turns,
 * scripts/bench_engine_flows.sh with CACHEGRIND=1). */
static struct xdp_desc scale_d[2][RX_BATCH * RX_ROUNDS];
static uint32_t scale_n[2];

/* The engine's part of a turn: the descriptors the simulated kernel
 * filled (kernel_rx) in batches, timers, the scheduler, the TX queue
 * handed to the (deferred) simulated kernel. */
static void engine_part(struct hpccd_tp *t, const struct xdp_desc *d, uint32_t n)
{
	uint32_t o;
	int more;

	for (o = 0; o < n; o += RX_BATCH)
		rx_descs(t, d + o, n - o < RX_BATCH ? n - o : RX_BATCH, sim_now);
	flow_timers(t, sim_now);
	rx_timers(t, sim_now);
	schedule(t, sim_now, &more);
	tx_submit(t);
}

static __attribute__((noinline)) void timed_turns(void)
{
	engine_part(A, scale_d[0], scale_n[0]);
	engine_part(B, scale_d[1], scale_n[1]);
}

/* The simulated kernel's part of a turn, apart from the engines' (scale):
 * the frames due into the RX UMEM before it (as much as rx_pipe takes in
 * a loop), the frames submitted onto the link after it. */
static __attribute__((noinline)) void kernel_in(void)
{
	rx_credit(&ring_a, UINT32_MAX);
	rx_credit(&ring_b, UINT32_MAX);
	scale_n[0] = kernel_rx(A, &ring_a, scale_d[0], RX_BATCH * RX_ROUNDS);
	scale_n[1] = kernel_rx(B, &ring_b, scale_d[1], RX_BATCH * RX_ROUNDS);
}

static __attribute__((noinline)) void kernel_out(void)
{
	fake_tx_complete(A);
	fake_tx_complete(B);
}

static uint64_t thread_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void scale(uint32_t nflows, uint64_t ms)
{
	uint64_t cpu = 0, kcpu = 0, end, pkts = 0, pkts0 = 0, retx = 0, retx0 = 0;
	uint64_t fa0, fb0, rx_used = 0, rx_probes = 0;
	uint32_t i;

	for (i = 0; i < nflows; i++)
		open_share(i, nflows, 1000000);
	/* warm-up: every flow has something acknowledged, so every
	 * receiver flow exists (the first packets of 10,000 flows at once
	 * overflow the receiver's ring, and come again) */
	for (end = sim_now + 2000000000ull; sim_now < end;) {
		uint32_t acked = 0;

		run(1000000ull, UINT32_MAX, NULL);
		for (i = 0; i < A->cfg.max_flows; i++)
			acked += A->flows[i].state == HPCCD_TP_RUNNING && A->flows[i].snd_una > 0;
		if (acked == nflows)
			break;
	}
	run(ms * 1000000ull, UINT32_MAX, NULL);
	for (i = 0; i < A->cfg.max_flows; i++) {
		pkts0 += TP_HS(&A->flows[i], pkts);
		retx0 += A->flows[i].st.retx_pkts;
	}
	fa0 = A->st.tx_frames;
	fb0 = B->st.tx_frames;
	end = sim_now + ms * 1000000ull;
	/* timed: the engines' own work only; the simulated kernel's copies
	 * (into the RX UMEM, off the TX frames) apart, in kernel_ns_per_pkt */
	fake_tx_deferred = 1;
	while (sim_now < end) {
		uint64_t k0, a, b, k1;

		if (bn.bps)
			bneck_depart();
		link_deliver(&ab, &ring_b);
		link_deliver(&ba, &ring_a);
		k0 = thread_ns();
		kernel_in();
		a = thread_ns();
		timed_turns();
		b = thread_ns();
		kernel_out();
		k1 = thread_ns();
		cpu += b - a;
		kcpu += (a - k0) + (k1 - b);
		sim_now += tick_ns;
	}
	fake_tx_deferred = 0;
	for (i = 0; i < A->cfg.max_flows; i++) {
		pkts += TP_HS(&A->flows[i], pkts);
		retx += A->flows[i].st.retx_pkts;
	}
	/* the receiver's flows away from their home slot (tp_rx_home): each
	 * costs its lookups a probed slot or more */
	for (i = 0; i < B->cfg.rx_flows; i++) {
		const struct tp_rx *r = &B->rxt[i];

		if (r->used != 1)
			continue;
		rx_used++;
		rx_probes += (i - tp_rx_home(B, r->saddr, r->flow_id)) & B->rx_mask;
	}
	printf("{\"flows\": %u, \"pkts\": %llu, \"retx\": %llu, \"frames_a\": %llu, "
	       "\"frames_b\": %llu, \"cpu_ns\": %llu, \"ns_per_pkt\": %.1f, "
	       "\"kernel_ns_per_pkt\": %.1f, \"ticks\": %llu, \"tick_ns\": %llu, "
	       /* the state a packet's flow touches (both engines): the sender
	        * flow's hot lines, its nodes, the receiver flow's hot lines;
	        * and the whole of each */
	       "\"hot_bytes_per_flow\": %zu, \"sender_bytes\": %zu, \"receiver_bytes\": %zu, "
	       "\"rx_used\": %llu, \"rx_probes\": %llu}\n",
	       nflows,
	       (unsigned long long)(pkts - pkts0), (unsigned long long)(retx - retx0),
	       (unsigned long long)(A->st.tx_frames - fa0), (unsigned long long)(B->st.tx_frames - fb0),
	       (unsigned long long)cpu,
	       (double)cpu / (double)(pkts - pkts0), (double)kcpu / (double)(pkts - pkts0),
	       (unsigned long long)(ms * 1000000ull / tick_ns), (unsigned long long)tick_ns,
	       (size_t)TP_FLOW_HOT_LINES * 64 + sizeof(struct tp_snode) + (size_t)TP_RX_HOT_LINES * 64,
	       sizeof(struct tp_flow), sizeof(struct tp_rx),
	       (unsigned long long)rx_used, (unsigned long long)rx_probes);
}

/* phases: `flows` DCTCP flows, each paced at rate_gbps / flows and started
 * one packet time of the aggregate after the one before (their send times
 * spread evenly over a flow's packet time), run for `ms` with A's turns
 * coming late (late_us: random gaps of mean L, as a software timer wakes a
 * thread) and B taking a turn every tick.  A flow that comes later than its
 * pacing credit (burst_ns) loses whole packet times and keeps its phase:
 * flows rebased to the same late "now" would send together for ever after,
 * the engine's aggregate in bursts of all of them.  Prints how many
 * distinct send phases (the next send time modulo the flow's packet time,
 * to the microsecond) the flows keep at the end, the most data frames one
 * turn of A sent in the second half, and the pacing time lost. */
static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int phases(uint32_t nflows, uint64_t ms)
{
	uint64_t end, half, most = 0, period = 0, lost = 0, pkts = 0, *ph;
	uint32_t i, running = 0, nphase;

	ph = calloc(nflows, sizeof(*ph));
	if (!ph)
		return 3;
	for (i = 0; i < nflows; i++) {
		const struct tp_flow *fl = open_share(i, nflows, 0);

		/* a flow's packet time: nflows of the aggregate's */
		period = (uint64_t)((double)(fl->hdr_max + fl->mss) * 8e9 / (double)line_rate_bps) *
			 nflows;
	}
	end = sim_now + ms * 1000000ull;
	half = sim_now + ms * 500000ull;
	while (sim_now < end) {
		link_deliver(&ab, &ring_b);
		link_deliver(&ba, &ring_a);
		if (turn_due(&next_turn_a)) {
			uint64_t f0 = A->st.tx_frames;

			engine_turn(A, &ring_a, UINT32_MAX);
			if (sim_now >= half && A->st.tx_frames - f0 > most)
				most = A->st.tx_frames - f0;
		}
		engine_turn(B, &ring_b, UINT32_MAX);
		sim_now += tick_ns;
	}
	for (i = 0; i < A->cfg.max_flows; i++) {
		const struct tp_flow *fl = &A->flows[i];

		if (fl->state != HPCCD_TP_RUNNING)
			continue;
		ph[running++] = fl->next_send_ns % period / 1000;
		lost += fl->st.pace_lost_ns;
		pkts += TP_HS(fl, pkts);
	}
	qsort(ph, running, sizeof(*ph), cmp_u64);
	for (i = 1, nphase = running ? 1 : 0; i < running; i++)
		nphase += ph[i] != ph[i - 1];
	printf("{\"flows\": %u, \"running\": %u, \"period_ns\": %llu, \"phases\": %u, "
	       "\"most_per_turn\": %llu, \"pace_lost_ns\": %llu, \"pkts\": %llu}\n",
	       nflows, running, (unsigned long long)period, nphase,
	       (unsigned long long)most, (unsigned long long)lost, (unsigned long long)pkts);
	free(ph);
	return 0;
}

/* wheel: the pacing wheel (wheel.c, both levels) against its definition.
 * `flows` nodes filed at random times up to span_ms ahead (past the far
 * level's 4.4 s too), the clock moved on in random steps of up to step_us,
 * each step's due flows taken as schedule() takes them (a node filed for
 * later than its slot is filed again, as schedule() does), now and then a
 * node taken out (wheel_del) or filed at another time.  Every node must be
 * taken once, at the first take whose slot reaches its time (never before
 * it, never a take late), and wheel_next() never later than the earliest
 * time filed; then the wheel stays empty for 10 s and it all runs again
 * with every node filed anew.  Prints the counts of what broke that (all 0
 * when right) and how many times nodes were filed again. */
static int wheel_check(uint32_t nflows, uint64_t span_ms, uint64_t step_us)
{
	struct tp_wheel w;
	struct tp_wnode *nd = calloc(nflows, sizeof(*nd));
	uint64_t *at = calloc(nflows, sizeof(*at)), prev, slot_ns = 1ull << PACE_SHIFT;
	uint8_t *st = calloc(nflows, 1);       /* 0 filed, 1 taken, 2 taken out */
	uint64_t taken = 0, early = 0, late = 0, twice = 0, next_late = 0, refiled = 0;
	uint64_t removed = 0, moved = 0, steps = 0;
	uint32_t i, left = nflows, rounds = 0;

	if (!nd || !at || !st || wheel_init(&w, PACE_SHIFT, PACE_SLOTS, PACE_FAR_SHIFT,
					   PACE_FAR_SLOTS, nd, sizeof(*nd)))
		return 3;
	wheel_start(&w, sim_now);
	for (i = 0; i < nflows; i++) {
		at[i] = sim_now + (uint64_t)(rnd() * (double)span_ms * 1e6);
		wheel_add(&w, (int32_t)i, at[i]);
	}
	prev = sim_now;
again:
	while (left) {
		uint64_t first = NO_DEADLINE, nx;
		int32_t k, next;

		for (i = 0; i < nflows; i++)
			if (!st[i] && at[i] < first)
				first = at[i];
		nx = wheel_next(&w);
		next_late += nx > first;
		/* the engine sleeps until wheel_next (or less): never past it */
		sim_now += 1 + (uint64_t)(rnd() * (double)step_us * 1000.0);
		if (nx > prev && sim_now > nx + slot_ns && rnd() < 0.5)
			sim_now = nx;
		steps++;
		if (rnd() < 0.05) {             /* one node out, or filed elsewhere */
			i = (uint32_t)(rnd() * nflows);
			if (!st[i] && rnd() < 0.5) {
				wheel_del(&w, (int32_t)i);
				st[i] = 2;
				left--;
				removed++;
			} else if (!st[i]) {
				at[i] = sim_now + (uint64_t)(rnd() * (double)span_ms * 1e6);
				wheel_add(&w, (int32_t)i, at[i]);
				moved++;
			}
		}
		for (k = wheel_take(&w, sim_now); k >= 0; k = next) {
			next = nd[k].next;
			if (st[k]) {
				twice++;
				continue;
			}
			if (nd[k].at > sim_now + slot_ns) {   /* later in the slot or past a horizon */
				refiled++;
				wheel_add(&w, k, nd[k].at);
				continue;
			}
			early += at[k] >> PACE_SHIFT > sim_now >> PACE_SHIFT;
			late += at[k] >> PACE_SHIFT <= prev >> PACE_SHIFT;
			st[k] = 1;
			taken++;
			left--;
		}
		prev = sim_now;
	}
	if (!rounds++) {
		/* the wheel empty for 10 s (past the far level's 4.4 s), then
		 * every node filed again from there */
		sim_now += 10000000000ull;
		for (i = 0; i < nflows; i++) {
			at[i] = sim_now + (uint64_t)(rnd() * (double)span_ms * 1e6);
			st[i] = 0;
			wheel_add(&w, (int32_t)i, at[i]);
		}
		left = nflows;
		prev = sim_now;
		goto again;
	}
	for (i = 0; i < nflows; i++)
		if (nd[i].on)
			twice++;                /* still filed after it was taken or taken out */
	printf("{\"flows\": %u, \"taken\": %llu, \"removed\": %llu, \"moved\": %llu, "
	       "\"steps\": %llu, \"early\": %llu, \"late\": %llu, \"twice\": %llu, "
	       "\"next_late\": %llu, \"refiled\": %llu, \"count\": %u, \"fcount\": %u}\n",
	       nflows, (unsigned long long)taken, (unsigned long long)removed,
	       (unsigned long long)moved, (unsigned long long)steps, (unsigned long long)early,
	       (unsigned long long)late, (unsigned long long)twice,
	       (unsigned long long)next_late, (unsigned long long)refiled, w.count, w.fcount);
	wheel_free(&w);
	free(nd);
	free(at);
	free(st);
	return 0;
}

/* rxtable: the receiver's flow table (receiver.c) under honest senders and
 * a hostile one, B alone: DATA frames made here as a sender makes them
 * (outgoing.c's headers, frame.c's lengths and checksums) go through B's
 * own receive path.  `senders` honest peers with `flows` flows in all,
 * each peer with its own id_gen and slots 0, 1, ... (api.c's flow ids: a
 * sender of up to 16,384 flows); then `hostile` unfinished flows of
 * another peer whose ids are equal modulo the table's size (one home
 * whatever the engine's keys); then every honest flow's second packet;
 * then the hostile flows the table took end (FIN), reap=1: B reaps them;
 * then `hostile` more flows of the hostile peer at the same home.  Prints
 * the flows' distances from their homes (tp_rx_home: a lookup reads
 * distance + 1 slots) and B's refusals after each step. */
#define RXT_PLEN 100
#define RXT_HOSTILE 0x0a0000feu
#define RXT_HIST 64

static void rxt_drain(void);

static void rxt_data(uint32_t saddr, uint32_t flow_id, uint64_t seq, uint32_t flags)
{
	static const uint8_t mac[6] = {0x02, 0, 0, 0, 0, 0x01};
	uint8_t f[256];
	uint32_t off = L2L4;

	put_l2l4(f, mac, mac, saddr, ADDR_B, (uint16_t)(1024 + (flow_id & 0x3fff)),
		 B->cfg.udp_port, 0);
	off += put_int(f + off, 0);
	put_hdr(f + off, HPCCD_T_DATA, flags, RXT_PLEN, flow_id, seq, 0, (uint32_t)sim_now, 0);
	off += HPCCD_HDR_BYTES;
	memset(f + off, 'x', RXT_PLEN);
	finish_frame(A, f, off + RXT_PLEN);
	link_push(&ab, f, off + RXT_PLEN);
	/* what B's RX ring holds: it takes them before more come */
	if (ab.n >= B->ring / 2)
		rxt_drain();
}

/* Until every frame pushed is taken (B's ACKs to A, which knows no flow
 * of them: counted there as unknown_flow). */
static void rxt_drain(void)
{
	while (ab.n || ring_b.n || ba.n || ring_a.n) {
		link_deliver(&ab, &ring_b);
		link_deliver(&ba, &ring_a);
		engine_turn(B, &ring_b, UINT32_MAX);
		engine_turn(A, &ring_a, UINT32_MAX);
		sim_now += tick_ns;
	}
}

/* The used slots of B's table of the honest peers, the hostile one or
 * all: how many, their largest distance from home, the sum of distances,
 * and how many at each distance. */
enum { RXT_ALL, RXT_HONEST, RXT_BAD };
struct rxt_part {
	uint32_t n, max_d;
	uint64_t sum_d;
	uint32_t hist[RXT_HIST];
};

static struct rxt_part rxt_scan(int who)
{
	struct rxt_part p;
	uint32_t i;

	memset(&p, 0, sizeof(p));
	for (i = 0; i < B->cfg.rx_flows; i++) {
		const struct tp_rx *r = &B->rxt[i];
		uint32_t d;

		if (r->used != 1 || (who == RXT_HONEST && r->saddr == RXT_HOSTILE) ||
		    (who == RXT_BAD && r->saddr != RXT_HOSTILE))
			continue;
		d = (i - tp_rx_home(B, r->saddr, r->flow_id)) & B->rx_mask;
		p.n++;
		p.sum_d += d;
		if (d > p.max_d)
			p.max_d = d;
		p.hist[d < RXT_HIST ? d : RXT_HIST - 1]++;
	}
	return p;
}

static void rxt_print(const char *name, const struct rxt_part *p, int hist)
{
	uint32_t i, top = RXT_HIST;

	printf("\"%s\": {\"n\": %u, \"max_d\": %u, \"mean_d\": %.4f", name, p->n, p->max_d,
	       p->n ? (double)p->sum_d / p->n : 0.0);
	if (hist) {
		while (top > 1 && !p->hist[top - 1])
			top--;
		printf(", \"hist\": [");
		for (i = 0; i < top; i++)
			printf("%s%u", i ? ", " : "", p->hist[i]);
		printf("]");
	}
	printf("}, ");
}

static void rxt_refusals(const char *name)
{
	printf("\"%s\": {\"rx_probe_full\": %llu, \"rx_peer_full\": %llu, \"rx_table_full\": %llu, "
	       "\"rx_recycled\": %llu, \"rx_used\": %u}, ", name,
	       (unsigned long long)B->st.rx_probe_full, (unsigned long long)B->st.rx_peer_full,
	       (unsigned long long)B->st.rx_table_full, (unsigned long long)B->st.rx_recycled,
	       B->n_rx_used);
}

/* A packet at seq of each honest flow: sender s's flow k in slot k, its
 * id_gen's high bits above (api.c), every sender's id_gen its own. */
static void rxt_honest(uint32_t senders, uint32_t per, uint64_t seed, uint64_t seq,
		       uint32_t flags)
{
	uint32_t s, k;

	for (s = 0; s < senders; s++) {
		uint32_t gen = (uint32_t)splitmix64(seed + s);

		for (k = 0; k < per; k++) {
			gen += 16384;
			rxt_data(ADDR_A + 0x100 + s, (gen & ~16383u) | k, seq, flags);
		}
	}
	rxt_drain();
}

/* The hostile peer's flows from..to - 1, unfinished: ids equal modulo the
 * table's size (one home whatever B's keys). */
static void rxt_hostile(uint32_t hbase, uint32_t from, uint32_t to)
{
	uint32_t k;

	for (k = from; k < to; k++)
		rxt_data(RXT_HOSTILE, hbase + k * B->cfg.rx_flows, 0, HPCCD_F_SYN);
	rxt_drain();
}

static int rxtable(uint32_t senders, uint32_t nflows, uint32_t hostile, int reap, uint64_t seed)
{
	uint32_t per = senders ? nflows / senders : 0, k, found = 0, nh = 0, *hids;
	uint32_t hbase = (uint32_t)splitmix64(seed ^ 0x5eed);
	struct rxt_part honest, bad, all;

	if (!senders || per > 16384) {
		fprintf(stderr, "harness: rxtable: senders >= 1, flows / senders <= 16384\n");
		return 2;
	}
	hids = calloc(hostile + 1, sizeof(*hids));
	if (!hids) {
		fprintf(stderr, "harness: out of memory\n");
		return 3;
	}
	rxt_honest(senders, per, seed, 0, HPCCD_F_SYN);
	printf("{\"flows\": %u, \"senders\": %u, \"hostile\": %u, \"probe_max\": %u, ",
	       per * senders, senders, hostile, B->rx_probe_max);
	honest = rxt_scan(RXT_HONEST);
	rxt_print("honest", &honest, 1);
	rxt_refusals("after_honest");
	rxt_hostile(hbase, 0, hostile);
	bad = rxt_scan(RXT_BAD);
	rxt_print("hostile", &bad, 0);
	all = rxt_scan(RXT_ALL);
	rxt_print("all", &all, 0);
	rxt_refusals("after_hostile");
	/* every honest flow's second packet: found (delivered in order)? */
	rxt_honest(senders, per, seed, RXT_PLEN, 0);
	for (k = 0; k < B->cfg.rx_flows; k++)
		found += B->rxt[k].used == 1 && B->rxt[k].saddr != RXT_HOSTILE &&
			 B->rxt[k].rcv_nxt == 2 * RXT_PLEN;
	honest = rxt_scan(RXT_HONEST);
	printf("\"honest_found\": %u, ", found);
	rxt_print("honest_after", &honest, 0);
	/* the hostile flows the table took end */
	for (k = 0; k < B->cfg.rx_flows; k++)
		if (B->rxt[k].used == 1 && B->rxt[k].saddr == RXT_HOSTILE)
			hids[nh++] = B->rxt[k].flow_id;
	for (k = 0; k < nh; k++)
		rxt_data(RXT_HOSTILE, hids[k], RXT_PLEN, HPCCD_F_FIN);
	rxt_drain();
	printf("\"hostile_done\": %llu, \"reaped\": %d, ", (unsigned long long)B->st.rx_done,
	       reap ? hpccd_tp__rx_reap(B) : 0);
	rxt_refusals("after_end");
	/* as many new ones at the same home: the slots the first took */
	rxt_hostile(hbase, hostile, 2 * hostile);
	for (k = 0, nh = 0; k < B->cfg.rx_flows; k++)
		nh += B->rxt[k].used == 1 && B->rxt[k].saddr == RXT_HOSTILE && !B->rxt[k].done;
	all = rxt_scan(RXT_ALL);
	printf("\"hostile2\": %u, ", nh);
	rxt_print("all2", &all, 0);
	rxt_refusals("after_hostile2");
	printf("\"ring_drops\": %llu}\n", (unsigned long long)ring_b.dropped);
	free(hids);
	return 0;
}

/* peertable: B's table of peers (receiver.c peer_find) under a sender
 * that spoofs source addresses, B alone, DATA made as rxtable makes it.
 * `senders` honest peers with `per` flows each, and a greedy honest one
 * that opens 10 more than rx_peer_max; then `aimed` spoofed addresses, a
 * flow each, that all share one place in the peer table (found here with
 * B's key: the worst a spoofer could do, were the key known); their flows
 * end (FIN) and as many more addresses at that place come; they end too;
 * then `spoof` random addresses, a flow each (more than the flow table
 * holds); rx_idle_ns later, while the honest flows send, `spoof` / 10 new
 * ones (expiring idle spoofed flows).  After each step, pt_check: every
 * unfinished flow counted in its source's entry, within the bound of the
 * entry's place. */
#define PT_AIMED 0x0b000000u             /* 11/8: the aimed addresses */
#define PT_SPOOF 0x0c000000u             /* 12/8: the random ones */
#define PT_GREEDY (ADDR_A + 0x80)

static uint32_t pt_place(uint32_t saddr)
{
	return (uint32_t)(tp_saddr_mix(B, saddr) >> 32) & B->peer_mask;
}

/* The peer table against the flow table: every unfinished flow's source
 * has an entry at most TP_RX_PROBE_MAX - 1 past its place, whose live is
 * its number of unfinished flows; no entry without one; rx_live their
 * sum.  Prints the entries, their largest distance and the errors. */
static void pt_check(const char *name)
{
	uint32_t n = B->peer_mask + 1, i, j, bad = 0, entries = 0, max_d = 0, *cnt;
	uint64_t sum = 0;

	cnt = calloc(n, sizeof(*cnt));
	if (!cnt) {
		fprintf(stderr, "harness: out of memory\n");
		exit(3);
	}
	for (i = 0; i < B->cfg.rx_flows; i++) {
		const struct tp_rx *r = &B->rxt[i];

		if (r->used != 1 || r->done)
			continue;
		for (j = 0; j < TP_RX_PROBE_MAX; j++)
			if (B->peers[(pt_place(r->saddr) + j) & B->peer_mask].saddr == r->saddr)
				break;
		if (j == TP_RX_PROBE_MAX)
			bad++;                   /* admitted uncounted */
		else
			cnt[(pt_place(r->saddr) + j) & B->peer_mask]++;
	}
	for (i = 0; i < n; i++) {
		const struct tp_peer *p = &B->peers[i];
		uint32_t d;

		if (!p->saddr) {
			bad += p->live != 0;
			continue;
		}
		entries++;
		sum += p->live;
		bad += !cnt[i] || p->live != cnt[i];
		d = (i - pt_place(p->saddr)) & B->peer_mask;
		if (d > max_d)
			max_d = d;
	}
	bad += sum != B->rx_live;
	printf("\"%s\": {\"entries\": %u, \"max_d\": %u, \"errors\": %u, \"rx_live\": %u, "
	       "\"rx_peer_table_full\": %llu, \"rx_peer_full\": %llu, \"rx_probe_full\": %llu, "
	       "\"rx_table_full\": %llu, \"rx_used\": %u}, ", name, entries, max_d, bad,
	       B->rx_live, (unsigned long long)B->st.rx_peer_table_full,
	       (unsigned long long)B->st.rx_peer_full, (unsigned long long)B->st.rx_probe_full,
	       (unsigned long long)B->st.rx_table_full, B->n_rx_used);
	free(cnt);
}

/* The unfinished flows of the honest peers (all but the spoofed ranges). */
static uint32_t pt_honest_live(void)
{
	uint32_t i, n = 0;

	for (i = 0; i < B->cfg.rx_flows; i++)
		n += B->rxt[i].used == 1 && !B->rxt[i].done && B->rxt[i].saddr >> 24 != PT_AIMED >> 24 &&
		     B->rxt[i].saddr >> 24 != PT_SPOOF >> 24;
	return n;
}

/* The next `n` addresses at `place` from *next on, a SYN flow (id 7) of
 * each; their addresses into out[]. */
static void pt_aimed(uint32_t place, uint32_t *next, uint32_t n, uint32_t *out)
{
	uint32_t k;

	for (k = 0; k < n; (*next)++) {
		if (pt_place(*next) != place)
			continue;
		out[k++] = *next;
		rxt_data(*next, 7, 0, HPCCD_F_SYN);
	}
	rxt_drain();
}

/* FIN of the unfinished flows of the aimed addresses (only those B took:
 * a FIN of one it refused would be a new flow). */
static void pt_end(uint32_t *a, const char *name)
{
	uint32_t k, n = 0;

	for (k = 0; k < B->cfg.rx_flows; k++)
		if (B->rxt[k].used == 1 && !B->rxt[k].done && B->rxt[k].saddr >> 24 == PT_AIMED >> 24)
			a[n++] = B->rxt[k].saddr;
	for (k = 0; k < n; k++)
		rxt_data(a[k], 7, RXT_PLEN, HPCCD_F_FIN);
	rxt_drain();
	printf("\"%s\": %u, ", name, n);
}

static int peertable(uint32_t senders, uint32_t per, uint32_t aimed, uint32_t spoof,
		     uint64_t seed)
{
	uint32_t k, next = PT_AIMED, place = pt_place(PT_AIMED), *a;

	a = calloc(aimed + 1, sizeof(*a));
	if (!a || per > 16384) {
		fprintf(stderr, "harness: peertable: per <= 16384 (or out of memory)\n");
		return 2;
	}
	printf("{\"probe_max\": %u, \"peer_slots\": %u, \"rx_peer_max\": %u, ",
	       TP_RX_PROBE_MAX, B->peer_mask + 1, B->cfg.rx_peer_max);
	rxt_honest(senders, per, seed, 0, HPCCD_F_SYN);
	for (k = 0; k < B->cfg.rx_peer_max + 10; k++)
		rxt_data(PT_GREEDY, k, 0, HPCCD_F_SYN);
	rxt_drain();
	printf("\"honest_live\": %u, ", pt_honest_live());
	pt_check("honest");
	pt_aimed(place, &next, aimed, a);
	printf("\"aimed_live\": %u, ", B->rx_live - pt_honest_live());
	pt_check("aimed");
	rxt_honest(senders, per, seed, RXT_PLEN, 0);
	printf("\"honest_live_after\": %u, ", pt_honest_live());
	pt_end(a, "ended");
	pt_check("aimed_ended");
	pt_aimed(place, &next, aimed, a);
	printf("\"aimed2_live\": %u, ", B->rx_live - pt_honest_live());
	pt_check("aimed2");
	pt_end(a, "ended2");
	pt_check("aimed2_ended");
	for (k = 0; k < spoof; k++)
		rxt_data(PT_SPOOF + (uint32_t)splitmix64(seed ^ k) % 0xffffff, 7, 0, HPCCD_F_SYN);
	rxt_drain();
	printf("\"spoof_live\": %u, ", B->rx_live - pt_honest_live());
	pt_check("spoofed");
	/* rx_idle_ns later: the honest flows send (their third packet, the
	 * greedy one's taken flows their second), the spoofed ones do not, and
	 * `spoof` / 10 new addresses come: their flows expire idle spoofed ones
	 * (rx_expired), whose entries go (peer_drop from rx_admit) */
	sim_now += B->cfg.rx_idle_ns;
	rxt_honest(senders, per, seed, 2 * RXT_PLEN, 0);
	for (k = 0; k < B->cfg.rx_peer_max; k++)
		rxt_data(PT_GREEDY, k, RXT_PLEN, 0);
	for (k = 0; k < spoof / 10; k++)
		rxt_data(PT_SPOOF + (uint32_t)splitmix64(~seed ^ k) % 0xffffff, 9, 0, HPCCD_F_SYN);
	rxt_drain();
	printf("\"rx_expired\": %llu, ", (unsigned long long)B->st.rx_expired);
	pt_check("expired");
	for (k = 0, next = 0; k < B->cfg.rx_flows; k++)
		next += B->rxt[k].used == 1 && B->rxt[k].rcv_nxt == 3 * RXT_PLEN;
	printf("\"honest_found\": %u, \"honest_live_end\": %u, \"ring_drops\": %llu}\n", next,
	       pt_honest_live(), (unsigned long long)ring_b.dropped);
	free(a);
	return 0;
}

/* admit: each flow's size; long enough (160 us at 10 Gbit/s alone) that
 * the flows opened at once overlap at the receiver whatever the start's
 * alignment (20 KB flows sometimes ran eight at a time and none was
 * refused) */
#define ADMIT_BYTES 200000

static uint64_t restart_after;

/* B's engine restarts: its receiver flows are gone (as after a new
 * engine on the same queue). */
static int restart_hook(void)
{
	uint32_t i;

	for (i = 0; i < B->cfg.rx_flows; i++) {
		struct tp_rx *r = &B->rxt[i];

		if (r->used == 1 && r->rcv_nxt >= restart_after) {
			uint32_t k;

			for (k = 0; k < B->cfg.rx_flows; k++) {
				rx_release(B, &B->rxt[k]);
				memset(&B->rxt[k], 0, sizeof(B->rxt[k]));
			}
			B->rx_live = 0;
			memset(B->peers, 0, sizeof(*B->peers) * B->cfg.rx_flows);
			memset(B->rxw_hops, 0, sizeof(B->rxw_hops));
			return 1;
		}
	}
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* bneck: `nflows` flows of `bytes` each, started together, through the
 * switch port; feedback frames B -> A per DATA frame, the port's
 * utilisation while it was busy and its queue at departures. */
static uint32_t max_n;                   /* the largest N B's last hop counted */
static double w_ai_at_max_n, w_ai_want;  /* an Rx-HPCC flow's W_AI then; W_init (1-eta)/N */
static uint32_t rx_flows_want;           /* the Rx-HPCC flows bneck opened */
static int rxrate_flag;                  /* rxrate=1 (bn.rxrate) */
static uint64_t use_bin_ns;              /* use_bin_us: the port's use per bin, its sd */
static uint64_t qtrace_ns;               /* qtrace_us: the queue every this long */

static int n_hook(void)
{
	uint32_t i, n = B->rxw_hops[0].live;

	if (n > max_n)
		max_n = n;
	if (!n || n != rx_flows_want || w_ai_want)
		return 0;
	/* an Rx-HPCC flow that ran NewINT with this N since (its W_AI is set
	 * at each NewINT after the first) */
	for (i = 0; i < B->cfg.rx_flows; i++) {
		const struct tp_rx *r = &B->rxt[i];

		if (r->used == 1 && r->rxwin && r->rxh.active_flows == n && r->rxh.n_events > 2 &&
		    r->rxh.w_ai != r->rxh.w_ai_cfg) {
			w_ai_at_max_n = r->rxh.w_ai;
			w_ai_want = r->rxh.w_init * (1 - r->rxh.eta) / n;
			break;
		}
	}
	return 0;
}

/* The standard deviation of the queue at the first n departures, KB. */
static double q_sd_kb(uint32_t n)
{
	double sum = 0, sq = 0;
	uint32_t i;

	for (i = 0; i < n; i++) {
		sum += bn.qs[i];
		sq += (double)bn.qs[i] * bn.qs[i];
	}
	return n > 1 ? sqrt(fmax(0.0, sq / n - (sum / n) * (sum / n))) / 1e3 : 0.0;
}

static int bneck(uint32_t nflows, uint64_t bytes, uint32_t algo, uint32_t nflows2, uint32_t algo2,
		 uint64_t gbps, uint64_t buf_kb, uint64_t seed)
{
	uint64_t t0, data = 0, wins = 0, acks = 0, nacks = 0, exact = 0, qsum = 0, wins2 = 0;
	uint32_t ids[64], i, n;
	static struct hpccd_tp_rx_stats rs[64];
	struct hpccd_tp_flow_stats fs;
	double util;

	if (nflows + nflows2 > 64)
		return 2;
	bn.bps = gbps * 1000000000ull;
	bn.buf = buf_kb * 1000;
	bn.rxrate = rxrate_flag;
	bn.bin_ns = use_bin_ns;
	bn.trace_ns = qtrace_ns;
	bn.qs = malloc(sizeof(*bn.qs) << 22);
	flow_int_mode = HPCCD_TP_INT_EVERY;
	rx_flows_want = algo == HPCCD_ALGO_RXHPCC ? nflows : 0;
	for (i = 0; i < nflows + nflows2; i++)
		ids[i] = open_flow(bytes, i < nflows ? algo : algo2, HPCCD_TP_SR, seed + i,
				   (uint16_t)(40000 + i));
	t0 = sim_now;
	run(3000000000ull, UINT32_MAX, n_hook);
	for (i = 0; i < nflows + nflows2; i++) {
		hpccd_tp__flow_stats(A, ids[i], &fs);
		data += fs.pkts;
		acks += fs.acks;
		nacks += fs.nacks;
		wins += fs.rx_windows;
	}
	n = (uint32_t)hpccd_tp__rx_flows(B, rs, 64);
	for (i = 0; i < n; i++) {
		exact += rs[i].done && rs[i].bytes == bytes &&
			 rs[i].crc32 == hpccd_tp_pattern_crc32(seed + (rs[i].sport - 40000), bytes);
		if (rs[i].sport - 40000u >= nflows)
			wins2 += rs[i].windows_sent;   /* to flows of algo2 */
	}
	n = (uint32_t)(bn.nqs < (1u << 22) ? bn.nqs : (1u << 22));
	for (i = 0; i < n; i++)
		qsum += bn.qs[i];
	qsort(bn.qs, n, sizeof(*bn.qs), cmp_u32);
	util = bn.last_ns > bn.first_ns ?
	       (double)bn.tx_bytes * 8e9 / (double)bn.bps / (double)(bn.last_ns - bn.first_ns) : 0;
	printf("{\"algo\": \"%s\", \"flows\": %u, \"done_exact\": %llu, \"data_frames\": %llu, "
	       "\"feedback_frames\": %llu, \"fb_per_data\": %.4f, \"acks\": %llu, \"nacks\": %llu, "
	       "\"windows\": %llu, \"util\": %.4f, \"q_mean_kb\": %.2f, \"q_p50_kb\": %.2f, "
	       "\"q_p99_kb\": %.2f, \"q_max_kb\": %.2f, \"port_drops\": %llu, \"ms\": %.3f, "
	       "\"flows2\": %u, \"windows_to_flows2\": %llu, \"max_n\": %u, "
	       "\"w_ai_at_max_n\": %.3f, \"w_ai_want\": %.3f, \"use_bins\": %llu, "
	       "\"use_mean\": %.4f, \"use_sd\": %.4f, \"q_sd_kb\": %.3f, \"qtrace\": [",
	       tp_cc_ops_of(algo)->name, nflows, (unsigned long long)exact,
	       (unsigned long long)data, (unsigned long long)ba.sent,
	       data ? (double)ba.sent / (double)data : 0.0, (unsigned long long)acks,
	       (unsigned long long)nacks, (unsigned long long)wins, util,
	       n ? (double)qsum / n / 1e3 : 0.0, n ? bn.qs[n / 2] / 1e3 : 0.0,
	       n ? bn.qs[(uint64_t)n * 99 / 100] / 1e3 : 0.0, n ? bn.qs[n - 1] / 1e3 : 0.0,
	       (unsigned long long)bn.drops, (double)(sim_now - t0) / 1e6, nflows2,
	       (unsigned long long)wins2, max_n, w_ai_at_max_n, w_ai_want,
	       (unsigned long long)bn.nbins, bn.nbins ? bn.use_sum / bn.nbins : 0.0,
	       bn.nbins > 1 ? sqrt(fmax(0.0, bn.use_sq / bn.nbins -
				       (bn.use_sum / bn.nbins) * (bn.use_sum / bn.nbins))) : 0.0,
	       q_sd_kb(n));
	for (i = 0; i < bn.ntrace; i++)
		printf("%s[%u, %u]", i ? ", " : "", bn.trace[i][0], bn.trace[i][1]);
	printf("]}\n");
	return 0;
}

/* longshort ([HPCC] section 5.2, Figure 9a, without the lab's CPUs): a
 * long HPCC flow alone through the switch port for `start_us`, then a
 * short one of `bytes` joins from the same engine (its own pacing, as
 * from another host); every `step_us` a row [ns, long W, long U, long W^c
 * updates, long bytes acknowledged, port queue, short W, short bytes
 * acknowledged] (and [ns, "short"] when it joins), until `after_us` past
 * the short flow's last byte acknowledged.  Exit 4: the short flow failed;
 * 5: not done in 3 s. */
static int longshort(uint64_t bytes, uint64_t gbps, uint64_t buf_kb, uint64_t seed,
		     uint64_t start_ns, uint64_t step_ns, uint64_t after_ns)
{
	struct hpccd_tp_flow_stats fl, fs;
	uint64_t t0, t_end = 0, n = 0;
	uint32_t lid, sid = 0;
	const char *sep = "";

	bn.bps = gbps * 1000000000ull;
	bn.buf = buf_kb * 1000;
	bn.qs = malloc(sizeof(*bn.qs) << 22);
	flow_int_mode = HPCCD_TP_INT_EVERY;
	lid = open_flow(1ull << 40, HPCCD_ALGO_HPCC, HPCCD_TP_SR, seed, 40000);
	t0 = sim_now;
	printf("{\"trace\": [");
	for (;;) {
		if (n == (start_ns + step_ns - 1) / step_ns) {
			sid = open_flow(bytes, HPCCD_ALGO_HPCC, HPCCD_TP_SR, seed + 1, 40001);
			printf("%s[%llu, \"short\"]", sep, (unsigned long long)(sim_now - t0));
			sep = ", ";
		}
		run(step_ns, UINT32_MAX, NULL);
		n++;
		hpccd_tp__flow_stats(A, lid, &fl);
		memset(&fs, 0, sizeof(fs));
		if (sid)
			hpccd_tp__flow_stats(A, sid, &fs);
		printf("%s[%llu, %.1f, %.5f, %llu, %llu, %llu, %.1f, %llu]", sep,
		       (unsigned long long)(sim_now - t0), fl.window_bytes, fl.U,
		       (unsigned long long)fl.cc_updates, (unsigned long long)fl.snd_una,
		       (unsigned long long)bn.bytes, fs.window_bytes, (unsigned long long)fs.snd_una);
		sep = ", ";
		if (sid && !t_end) {
			if (fs.state == HPCCD_TP_DONE)
				t_end = fs.end_ns;
			else if (fs.state != HPCCD_TP_RUNNING)
				return 4;
		}
		if (t_end && sim_now >= t_end + after_ns)
			break;
		if (sim_now - t0 > 3000000000ull)
			return 5;
	}
	hpccd_tp__flow_stats(A, lid, &fl);
	printf("], \"t_end_ns\": %llu, \"T_ns\": %.0f, \"line_bps\": %llu, \"bneck_bps\": %llu, "
	       "\"min_rtt_ns\": %llu, \"delay_ns\": %llu, \"port_drops\": %llu}\n",
	       (unsigned long long)(t_end - t0),
	       T_ns, (unsigned long long)line_rate_bps, (unsigned long long)bn.bps,
	       (unsigned long long)fl.min_rtt_ns, (unsigned long long)ab.delay_ns,
	       (unsigned long long)bn.drops);
	return 0;
}

/* fairness ([HPCC] section 5.2, Figure 9g/9h, without the lab's CPUs; the
 * lab's experiment/fairness.py): `flows` HPCC flows from A through the
 * switch port, flow i opened at i x step_us and closed at (2 flows - 1 - i)
 * x step_us (1, 2, ... flows, then back to 1, as the lab's phases); every
 * bin_us a row [ns, [bytes acknowledged], [W], [U], [W^c updates]], one
 * entry per flow (0 before it opens and after it closes).  Jain's index per
 * bin and per phase is the reader's (tests/unit/engine/fairness_trace.py). */
static int fairness(uint32_t nflows, uint64_t gbps, uint64_t buf_kb, uint64_t seed,
		    uint64_t step_ns, uint64_t bin_ns)
{
	struct hpccd_tp_flow_stats fs;
	uint32_t ids[16], open[16] = {0}, i;
	uint64_t t0, k, nbins, wl[16] = {0}, pl[16] = {0};
	double w_ai_used = 0;
	const char *sep = "";

	if (nflows < 1 || nflows > 16 || !bin_ns || step_ns < bin_ns)
		return 2;
	bn.bps = gbps * 1000000000ull;
	bn.buf = buf_kb * 1000;
	bn.qs = malloc(sizeof(*bn.qs) << 22);
	flow_int_mode = HPCCD_TP_INT_EVERY;
	t0 = sim_now;
	nbins = (2 * nflows - 1) * step_ns / bin_ns;
	printf("{\"bins\": [");
	for (k = 0; k < nbins; k++) {
		uint64_t t = k * bin_ns;
		struct { double W, U; uint64_t una, upd; } row[16];

		for (i = 0; i < nflows; i++) {
			if (!open[i] && t >= i * step_ns && t < (2 * nflows - 1 - i) * step_ns) {
				ids[i] = open_flow(1ull << 40, HPCCD_ALGO_HPCC, HPCCD_TP_SR, seed + i,
						   (uint16_t)(40000 + i));
				open[i] = 1;
				w_ai_used = A->flows[ids[i] & A->slot_mask].cc.hpcc.w_ai;
			} else if (open[i] == 1 && t >= (2 * nflows - 1 - i) * step_ns) {
				hpccd_tp__flow_stats(A, ids[i], &fs);
				wl[i] = fs.wnd_limited_ns;
				pl[i] = fs.pace_lost_ns;
				hpccd_tp__flow_close(A, ids[i]);
				open[i] = 2;
			}
		}
		run(bin_ns, UINT32_MAX, NULL);
		for (i = 0; i < nflows; i++) {
			memset(&row[i], 0, sizeof(row[i]));
			if (open[i] != 1)
				continue;
			hpccd_tp__flow_stats(A, ids[i], &fs);
			row[i].W = fs.window_bytes;
			row[i].U = fs.U;
			row[i].una = fs.snd_una;
			row[i].upd = fs.cc_updates;
			wl[i] = fs.wnd_limited_ns;
			pl[i] = fs.pace_lost_ns;
		}
		printf("%s[%llu, [", sep, (unsigned long long)(sim_now - t0));
		for (i = 0; i < nflows; i++)
			printf("%s%llu", i ? ", " : "", (unsigned long long)row[i].una);
		printf("], [");
		for (i = 0; i < nflows; i++)
			printf("%s%.1f", i ? ", " : "", row[i].W);
		printf("], [");
		for (i = 0; i < nflows; i++)
			printf("%s%.4f", i ? ", " : "", row[i].U);
		printf("], [");
		for (i = 0; i < nflows; i++)
			printf("%s%llu", i ? ", " : "", (unsigned long long)row[i].upd);
		printf("]]");
		sep = ", ";
	}
	printf("], \"step_ns\": %llu, \"bin_ns\": %llu, \"T_ns\": %.0f, \"bneck_bps\": %llu, "
	       "\"delay_ns\": %llu, \"late_ns\": %llu, \"port_drops\": %llu, \"wnd_limited_ns\": [",
	       (unsigned long long)step_ns, (unsigned long long)bin_ns, T_ns,
	       (unsigned long long)bn.bps, (unsigned long long)ab.delay_ns,
	       (unsigned long long)late_ns, (unsigned long long)bn.drops);
	for (i = 0; i < nflows; i++)
		printf("%s%llu", i ? ", " : "", (unsigned long long)wl[i]);
	printf("], \"pace_lost_ns\": [");
	for (i = 0; i < nflows; i++)
		printf("%s%llu", i ? ", " : "", (unsigned long long)pl[i]);
	printf("], \"w_ai\": %.3f}\n", w_ai_used);
	return 0;
}

int main(int argc, char **argv)
{
	struct hpccd_tp_config c;
	struct hpccd_tp_flow_stats fs;
	static struct hpccd_tp_rx_stats rs[HPCCD_TP_FLOWS_MAX];
	const char *scenario;
	uint64_t bytes, seed;
	uint32_t id, budget, nflows, i;
	int n;

	if (argc < 3) {
		fprintf(stderr, "usage: harness transfer|restart|admit|rxtable|... SEED [key=value ...]\n");
		return 2;
	}
	scenario = argv[1];
	seed = strtoull(argv[2], NULL, 0);
	rng = seed;
	hpccd_tp_config_default(&c);
	c.rx_frames = (uint32_t)strtoul(arg(argc, argv, "frames", "4096"), NULL, 0);
	c.tx_frames = c.rx_frames;
	c.ack_every = (uint32_t)strtoul(arg(argc, argv, "ack_every", "1"), NULL, 0);
	c.cnp_ns = strtoull(arg(argc, argv, "cnp_us", "50"), NULL, 0) * 1000;   /* DCQCN's N */
	c.rx_peer_max = (uint32_t)strtoul(arg(argc, argv, "rx_peer_max", "4294967295"), NULL, 0);
	c.rx_flows = (uint32_t)strtoul(arg(argc, argv, "rx_flows", "16384"), NULL, 0);
	if (!strcmp(arg(argc, argv, "window", "on"), "off"))
		c.rx_window = 0;
	line_rate_bps = strtoull(arg(argc, argv, "rate_gbps", "10"), NULL, 0) * 1000000000ull;
	T_ns = atof(arg(argc, argv, "T_us", "50")) * 1000;
	c.rx_hpcc.T_ns = T_ns;                   /* the receiver's Rx-HPCC */
	c.rx_hpcc.line_rate_bps = line_rate_bps;
	c.rx_hpcc.N_flows = (uint32_t)strtoul(arg(argc, argv, "N", "100"), NULL, 0);
	flow_N = c.rx_hpcc.N_flows;
	flow_w_ai = atof(arg(argc, argv, "w_ai", "0"));
	flow_eta = atof(arg(argc, argv, "eta", "0"));
	flow_max_stage = (uint32_t)strtoul(arg(argc, argv, "max_stage", "4294967295"), NULL, 0);
	late_ns = strtoull(arg(argc, argv, "late_us", "0"), NULL, 0) * 1000;
	bn.noq = atoi(arg(argc, argv, "int_noq", "0"));
	bn.at_deq = !strcmp(arg(argc, argv, "int_at", "end"), "deq");
	bn.qscale = (uint32_t)strtoul(arg(argc, argv, "qlen_scale", "1"), NULL, 0) ?: 1;
	memset(c.tag_key, 0x5a, sizeof(c.tag_key));
	if (!strcmp(arg(argc, argv, "key", "same"), "other"))
		c.tag_key[0] ^= 1;       /* A's key below differs from B's */
	/* start_ns=: where the simulated clock starts (default the real
	 * clock's now, so runs differ in their phase against the clocks that
	 * wrap, as runs of the real engine do) */
	sim_now = strtoull(arg(argc, argv, "start_ns", "0"), NULL, 0) ?: now_ns();
	B = engine(ADDR_B, &c);
	memset(c.tag_key, 0x5a, sizeof(c.tag_key));
	A = engine(ADDR_A, &c);
	/* multi-buffer packets, as a socket bound with XDP_USE_SG takes them */
	A->sg = B->sg = strcmp(arg(argc, argv, "sg", "on"), "off") != 0;
	flow_mtu = (uint32_t)strtoul(arg(argc, argv, "mtu", "1500"), NULL, 0);
	stall_ns = strtoull(arg(argc, argv, "stall_us", "0"), NULL, 0) * 1000;
	stall_at = strtoull(arg(argc, argv, "stall_at", "1000000"), NULL, 0);
	linger_ns = strtoull(arg(argc, argv, "linger_us", "0"), NULL, 0) * 1000;
	rxrate_flag = atoi(arg(argc, argv, "rxrate", "0"));
	use_bin_ns = strtoull(arg(argc, argv, "use_bin_us", "0"), NULL, 0) * 1000;
	qtrace_ns = strtoull(arg(argc, argv, "qtrace_us", "0"), NULL, 0) * 1000;
	ab.loss = ba.loss = atof(arg(argc, argv, "loss", "0"));
	ab.reorder = atof(arg(argc, argv, "reorder", "0"));
	ring_a.cap = A->ring;            /* the RX rings the engines were sized for */
	ring_b.cap = B->ring;
	ring_a.one = ring_b.one = c.frame_size - HEADROOM - HPCCD_TP_RX_HEADROOM;
	/* piece=N: the receiver gets multi-buffer packets in pieces of N bytes
	 * (odd ones too: the checksum over pieces must not care) */
	ring_b.one = (uint32_t)strtoul(arg(argc, argv, "piece", "0"), NULL, 0) ?: ring_b.one;
	budget = (uint32_t)strtoul(arg(argc, argv, "budget", "4294967295"), NULL, 0);
	bytes = strtoull(arg(argc, argv, "bytes", "20000000"), NULL, 0);
	nflows = (uint32_t)strtoul(arg(argc, argv, "flows", "1"), NULL, 0);
	{
		const char *t = arg(argc, argv, "tamper", "none");

		tamper = !strcmp(t, "forge") ? T_FORGE : !strcmp(t, "replay") ? T_REPLAY :
			 !strcmp(t, "truncate") ? T_TRUNC : T_NONE;
		tamper_every = strtoull(arg(argc, argv, "tamper_every", "10"), NULL, 0);
		tamper_cnp = !!strtoul(arg(argc, argv, "tamper_cnp", "0"), NULL, 0);
		if (!tamper_every)
			tamper_every = 1;
	}
	parse_list(arg(argc, argv, "drop", ""), drop_list, &n_drop);
	parse_list(arg(argc, argv, "ce_list", ""), ce_list, &n_ce_list);
	ce_prob = atof(arg(argc, argv, "ce", "0"));
	rate_win = (uint32_t)strtoul(arg(argc, argv, "win", "0"), NULL, 0);
	ab.delay_ns = ba.delay_ns = strtoull(arg(argc, argv, "delay_us", "10"), NULL, 0) * 1000;
	tick_ns = strtoull(arg(argc, argv, "tick_us", "1"), NULL, 0) * 1000 ?: 1000;
	/* tick_ns: a tick finer than 1 us (a port of 10 Gbit/s and more sends a
	 * frame in about a microsecond or less) */
	tick_ns = strtoull(arg(argc, argv, "tick_ns", "0"), NULL, 0) ?: tick_ns;

	if (!strcmp(scenario, "scale")) {
		scale(nflows, strtoull(arg(argc, argv, "ms", "20"), NULL, 0));
		return 0;
	}
	if (!strcmp(scenario, "wheel"))
		return wheel_check(nflows, strtoull(arg(argc, argv, "span_ms", "10000"), NULL, 0),
				   strtoull(arg(argc, argv, "step_us", "2000"), NULL, 0));
	if (!strcmp(scenario, "phases"))
		return phases(nflows, strtoull(arg(argc, argv, "ms", "20"), NULL, 0));
	if (!strcmp(scenario, "bneck"))
		return bneck(nflows, bytes, algo_of(arg(argc, argv, "algo", "hpcc")),
			     (uint32_t)strtoul(arg(argc, argv, "flows2", "0"), NULL, 0),
			     algo_of(arg(argc, argv, "algo2", "hpcc")),
			     strtoull(arg(argc, argv, "bneck_gbps", "10"), NULL, 0),
			     strtoull(arg(argc, argv, "buf_kb", "1000"), NULL, 0), seed);
	if (!strcmp(scenario, "fairness"))
		return fairness(nflows, strtoull(arg(argc, argv, "bneck_gbps", "10"), NULL, 0),
				strtoull(arg(argc, argv, "buf_kb", "1000"), NULL, 0), seed,
				strtoull(arg(argc, argv, "step_us", "1000000"), NULL, 0) * 1000,
				strtoull(arg(argc, argv, "bin_us", "1000"), NULL, 0) * 1000);
	if (!strcmp(scenario, "longshort"))
		return longshort(bytes, strtoull(arg(argc, argv, "bneck_gbps", "10"), NULL, 0),
				 strtoull(arg(argc, argv, "buf_kb", "1000"), NULL, 0), seed,
				 strtoull(arg(argc, argv, "start_us", "2000"), NULL, 0) * 1000,
				 strtoull(arg(argc, argv, "step_us", "5"), NULL, 0) * 1000,
				 strtoull(arg(argc, argv, "after_us", "2000"), NULL, 0) * 1000);
	if (!strcmp(scenario, "rxtable"))
		return rxtable((uint32_t)strtoul(arg(argc, argv, "senders", "10"), NULL, 0),
			       nflows, (uint32_t)strtoul(arg(argc, argv, "hostile", "0"), NULL, 0),
			       atoi(arg(argc, argv, "reap", "0")), seed);
	if (!strcmp(scenario, "peertable"))
		return peertable((uint32_t)strtoul(arg(argc, argv, "senders", "10"), NULL, 0),
				 (uint32_t)strtoul(arg(argc, argv, "per", "10"), NULL, 0),
				 (uint32_t)strtoul(arg(argc, argv, "aimed", "300"), NULL, 0),
				 (uint32_t)strtoul(arg(argc, argv, "spoof", "0"), NULL, 0), seed);
	if (!strcmp(scenario, "admit")) {
		for (i = 0; i < nflows; i++)
			open_flow(ADMIT_BYTES, HPCCD_ALGO_DCTCP, HPCCD_TP_SR, seed + i,
				  (uint16_t)(40000 + i));
		run(500000000ull, budget, NULL);
		n = hpccd_tp__rx_flows(B, rs, B->cfg.rx_flows);
		for (i = 0, id = 0; i < (uint32_t)n; i++)
			id += rs[i].done && rs[i].bytes == ADMIT_BYTES &&
			      rs[i].crc32 == hpccd_tp_pattern_crc32(seed + (rs[i].sport - 40000),
								    ADMIT_BYTES);
		printf("{\"rx_flows\": %d, \"done_exact\": %u, \"rx_peer_full\": %llu, "
		       "\"max_rx_live\": %u}\n", n, id, (unsigned long long)B->st.rx_peer_full,
		       max_rx_live);
		return 0;
	}
	id = open_flow(bytes, algo_of(arg(argc, argv, "algo", "dctcp")),
		       strcmp(arg(argc, argv, "recovery", "sr"), "gbn") ? HPCCD_TP_SR : HPCCD_TP_GBN,
		       seed, 40000);
	track = &A->flows[id & A->slot_mask];
	t_open = sim_now;
	/* hs_at=V: the flow's 32-bit per-packet counters start at V (near
	 * 2^32: their carries into st, which 4 GB of traffic would take) */
	if (strcmp(arg(argc, argv, "hs_at", "none"), "none")) {
		uint32_t v = (uint32_t)strtoul(arg(argc, argv, "hs_at", "0"), NULL, 0);

		track->hs = (struct tp_flow_hs){ v, v, v, v, v, v, v };
	}
	if (!strcmp(scenario, "restart")) {
		restart_after = bytes / 2;
		run(3000000000ull, budget, restart_hook);
	} else {
		run(3000000000ull, budget, NULL);
	}
	hpccd_tp__flow_stats(A, id, &fs);
	n = hpccd_tp__rx_flows(B, rs, B->cfg.rx_flows);
	printf("{\"state\": %u, \"err\": %d, \"fct_us\": %.1f, \"pkts\": %llu, \"retx\": %llu, "
	       "\"go_backs\": %llu, \"recoveries\": %llu, \"rtos\": %llu, \"rtos_spurious\": %llu, "
	       "\"lost\": %llu, \"lost_ack\": %llu, \"reordered\": %llu, \"ring_drops\": %llu, "
	       "\"rx_hold_full\": %llu, \"rx_flows\": %d, \"rx_bytes\": %llu, \"rx_crc\": %u, "
	       "\"want_crc\": %u, \"held\": %llu, \"ooo\": %llu, \"rx_held_now\": %u, "
	       "\"rx_free\": %u, \"rx_frames\": %u, \"tx_mb_pkts\": %llu, \"rx_mb_pkts\": %llu, "
	       "\"rx_held_heap\": %llu, \"bad_csum\": %llu, \"rx_mb_bad\": %llu, "
	       "\"tampered\": %llu, \"bad_tags\": %llu, \"fb_replayed\": %llu, \"acks\": %llu, "
	       "\"nacks\": %llu, \"ce_marked\": %llu, \"cnps\": %llu, "
	       "\"cnps_sent\": %llu, \"cc_updates\": %llu, \"rate_min\": %.17g, "
	       "\"rate_first\": %.17g, \"rate_end\": %.17g, \"signal\": %.17g, "
	       "\"line_bps\": %llu, \"window_bytes\": %.17g, \"wnd_limited_us\": %.1f, "
	       "\"wire_bytes\": %llu, \"int_pkts\": %llu, \"ect_pkts\": %llu, "
	       "\"int_acks\": %llu, \"cnp_at_us\": [",
	       fs.state, fs.err, (double)(fs.end_ns - fs.start_ns) / 1e3,
	       (unsigned long long)fs.pkts, (unsigned long long)fs.retx_pkts,
	       (unsigned long long)fs.go_backs, (unsigned long long)fs.recoveries,
	       (unsigned long long)fs.rtos, (unsigned long long)fs.rtos_spurious,
	       (unsigned long long)ab.lost, (unsigned long long)ba.lost,
	       (unsigned long long)ab.reordered, (unsigned long long)ring_b.dropped,
	       (unsigned long long)B->st.rx_hold_full, n,
	       (unsigned long long)(n ? rs[0].bytes : 0), n ? rs[0].crc32 : 0,
	       hpccd_tp_pattern_crc32(seed, bytes),
	       (unsigned long long)(n ? rs[0].held_pkts : 0),
	       (unsigned long long)(n ? rs[0].ooo_pkts : 0), B->rx_held, B->n_rx_free,
	       c.rx_frames, (unsigned long long)A->st.tx_mb_pkts,
	       (unsigned long long)B->st.rx_mb_pkts, (unsigned long long)B->rx_held_heap,
	       (unsigned long long)B->st.bad_csum, (unsigned long long)B->st.rx_mb_bad,
	       (unsigned long long)tampered, (unsigned long long)fs.bad_tags,
	       (unsigned long long)fs.fb_replayed, (unsigned long long)fs.acks,
	       (unsigned long long)fs.nacks,
	       (unsigned long long)ce_marked, (unsigned long long)fs.cnps,
	       (unsigned long long)(n ? rs[0].cnps_sent : 0), (unsigned long long)fs.cc_updates,
	       rate_min, rate_first, fs.rate_bps, fs.U, (unsigned long long)line_rate_bps,
	       fs.window_bytes, (double)fs.wnd_limited_ns / 1e3,
	       (unsigned long long)fs.wire_bytes, (unsigned long long)fs.int_pkts,
	       (unsigned long long)fs.ect_pkts, (unsigned long long)fs.int_acks);
	for (i = 0; i < n_cnp_at; i++)
		printf("%s%.1f", i ? ", " : "", (double)cnp_at[i] / 1e3);
	printf("]}\n");
	engine_free(A);
	engine_free(B);
	return 0;
}
