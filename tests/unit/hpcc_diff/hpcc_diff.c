// SPDX-License-Identifier: BSD-2-Clause
/*
 * Differential check of the HPCC / Rx-HPCC core (tests/unit/test_hpcc_diff.py).
 *
 *   hpcc_diff SEED TRIALS
 *
 * Links the current fastpath/cc/hpcc.c against ref_hpcc.c (the frozen
 * pre-optimisation implementation, every hpccd_hpcc_* symbol renamed to
 * ref_hpccd_hpcc_* on the compiler's command line) and drives both with the
 * same random calls of every entry point: NewAck and NewINT with decoded
 * hops, both wire forms, hpccd_hpcc_run (both modes), decode_hops,
 * set_active_flows, rate_bps, and NewAck/NewINT with the hops aliasing the
 * flow's own record L.  After every call the return values, the outputs and
 * every byte of the two struct hpccd_hpcc must be equal (memcmp: doubles
 * compared bit for bit, NaN payloads and the sign of zero included).
 *
 * The traffic mixes a steady regime (every hop advancing, the per-ACK fast
 * path) with the rare cases, per hop: ts not advancing or going back,
 * txBytes going back, jumps of 2^52 .. 2^64 (deltas that are negative as
 * int64), queues at and above 2^63, bandwidth changes including to 0 and
 * to odd values; per event: pathID changes, no pathID, hop-count changes
 * (0 and > 8 included), seq going back; on the wire: counters wrapping,
 * qLen saturated at 2^15 - 1, unknown speed codes, gaps beyond the unwrap
 * horizon.  Parameters are random too (T from 5e-324 to 1e12, eta, W
 * bounds, maxStage 0, invalid ones), so init's refusals are compared.
 *
 * Prints "ok ..." with counters showing the rare paths were taken; exits
 * 1 on the first difference, with what differed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hpccd/cc.h"

/* The reference, renamed (see the compile flags in test_hpcc_diff.py). */
void ref_hpccd_hpcc_params_default(struct hpccd_hpcc_params *p);
int ref_hpccd_hpcc_init(struct hpccd_hpcc *s, const struct hpccd_hpcc_params *p,
			uint32_t mode, const char **why);
int ref_hpccd_hpcc_new_ack(struct hpccd_hpcc *s, uint64_t seq, uint64_t snd_nxt,
			   uint32_t path_id, int path_id_valid,
			   const struct hpccd_int_rec *hops, uint32_t n_hops);
int ref_hpccd_hpcc_new_int(struct hpccd_hpcc *s, uint64_t now_ns,
			   uint32_t path_id, int path_id_valid,
			   const struct hpccd_int_rec *hops, uint32_t n_hops);
uint32_t ref_hpccd_hpcc_decode_hops(const struct hpccd_hpcc *s, uint64_t now_ns,
				    const struct hpccd_int_hop_wire *w,
				    uint32_t n_hops, struct hpccd_int_rec *out);
int ref_hpccd_hpcc_new_ack_wire(struct hpccd_hpcc *s, uint64_t now_ns,
				uint64_t seq, uint64_t snd_nxt, uint32_t path_id,
				const struct hpccd_int_hop_wire *w, uint32_t n_hops);
int ref_hpccd_hpcc_new_int_wire(struct hpccd_hpcc *s, uint64_t now_ns,
				uint32_t path_id, const struct hpccd_int_hop_wire *w,
				uint32_t n_hops);
double ref_hpccd_hpcc_rate_bps(const struct hpccd_hpcc *s);
void ref_hpccd_hpcc_set_active_flows(struct hpccd_hpcc *s, uint32_t n);
int ref_hpccd_hpcc_run(struct hpccd_hpcc *s, const struct hpccd_hpcc_event *ev,
		       struct hpccd_hpcc_out *out, size_t n);

#define MAXH HPCCD_INT_MAX_HOPS

static uint64_t rs;

static uint64_t rnd(void)           /* splitmix64 */
{
	uint64_t z = (rs += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t below(uint64_t n) { return n ? rnd() % n : 0; }
static int chance(unsigned per_mille) { return below(1000) < per_mille; }

static double rnd_unit(void)        /* [0, 1) */
{
	return (double)(rnd() >> 11) * 0x1.0p-53;
}

/* A 64-bit value from the corners of the range. */
static uint64_t edge_u64(void)
{
	static const uint64_t v[] = {
		0, 1, 2, 3, 127, 128, 79, 80, 0x7fff, 0xffffff, 0x1000000,
		(1ULL << 52) - 1, 1ULL << 52, (1ULL << 52) + 1, (1ULL << 53) + 1,
		(1ULL << 53) + 3, (1ULL << 62) + 1, (1ULL << 63) - 1, 1ULL << 63,
		(1ULL << 63) + 1, (1ULL << 63) + 1025, UINT64_MAX - 1, UINT64_MAX,
	};
	uint64_t x = v[below(sizeof(v) / sizeof(v[0]))];

	return chance(300) ? x + below(2048) - 1024 : x;
}

static const uint64_t speeds[] = {
	100000000000ULL, 100000000000ULL, 100000000000ULL, 25000000000ULL,
	40000000000ULL, 400000000000ULL, 10000000000ULL, 1000000000ULL,
	100000000ULL, 1600000000000ULL, 10000000ULL,
};
#define NSPEEDS (sizeof(speeds) / sizeof(speeds[0]))

static uint64_t rnd_bw(void)
{
	if (chance(100))
		return 0;
	if (chance(100))
		return chance(500) ? edge_u64() : rnd() >> below(64);
	return speeds[below(NSPEEDS)];
}

static double rnd_T(void)
{
	static const double v[] = {
		1000, 9000, 10000, 13000, 50000, 1, 0.5, 3, 7e-5, 1e-300,
		4.9406564584124654e-324, 1e12, 123456.789, 1e300,
	};

	if (chance(300))
		return 1 + rnd_unit() * 1e6;
	return v[below(sizeof(v) / sizeof(v[0]))];
}

static void rnd_params(struct hpccd_hpcc_params *p)
{
	hpccd_hpcc_params_default(p);
	if (chance(150))
		return;
	p->T_ns = rnd_T();
	p->eta = chance(100) ? 1.0 : chance(50) ? 1e-300 : 0.5 + rnd_unit() * 0.5;
	p->max_stage = chance(100) ? 0 : (uint32_t)below(9);
	p->N_flows = chance(200) ? 1 : (uint32_t)below(500) + 1;
	p->line_rate_bps = chance(100) ? edge_u64() | 1 : speeds[below(NSPEEDS)];
	p->mtu_bytes = (uint32_t)below(9000) + 1;
	p->u_init = chance(500) ? 0 : chance(100) ? 1e300 : rnd_unit() * 3;
	if (chance(300))
		p->w_ai_bytes = chance(100) ? 1e-300 : rnd_unit() * 5000;
	if (chance(200))
		p->w_init_bytes = rnd_unit() * 1e7 + 1e-9;
	if (chance(200))
		p->w_min_bytes = rnd_unit() * 1e5 + 1e-9;
	if (chance(200))
		p->w_max_bytes = rnd_unit() * 1e7 + 1e-9;
	if (chance(30)) {                   /* invalid ones: compare refusals */
		switch (below(8)) {
		case 0: p->T_ns = chance(500) ? 0 : -1; break;
		case 1: p->T_ns = NAN; break;
		case 2: p->eta = 0; break;
		case 3: p->eta = 1.5; break;
		case 4: p->N_flows = 0; break;
		case 5: p->w_min_bytes = 1e9; p->w_max_bytes = 1; break;
		case 6: p->u_init = -1; break;
		default: p->w_ai_bytes = INFINITY; break;
		}
	}
}

/* What the switches of one path report, in 64-bit (decoded) form. */
struct gen {
	uint32_t n, path_id, regime;
	uint64_t seq, now;
	uint64_t ts[MAXH], tx[MAXH], q[MAXH], bw[MAXH];
	uint32_t code[MAXH];            /* wire: speed code per hop */
};

static void gen_path(struct gen *g)
{
	uint32_t i;

	g->n = chance(50) ? (uint32_t)below(MAXH) + 1 :
	       chance(500) ? HPCCD_INT_DEFAULT_HOPS : (uint32_t)below(5) + 1;
	g->path_id = (uint32_t)rnd();
	for (i = 0; i < MAXH; i++) {
		g->ts[i] = chance(100) ? edge_u64() : rnd() >> below(64);
		g->tx[i] = chance(100) ? edge_u64() : rnd() >> below(64);
		g->q[i] = below(100000);
		g->bw[i] = g->regime ? rnd_bw() : speeds[below(NSPEEDS)];
		g->code[i] = chance(50) ? (uint32_t)below(32) :
			     (uint32_t)(21 + below(11));
	}
}

/* Advance hop i by one event. */
static void step_hop(struct gen *g, uint32_t i)
{
	int chaos = g->regime != 0;

	if (!chaos || chance(600)) {    /* the ordinary case */
		uint64_t d = 1000 + below(2000);

		g->ts[i] += d;
		g->tx[i] += d * below(15);
		g->q[i] = below(10) ? below(200000) : 0;
		return;
	}
	switch (below(12)) {
	case 0: break;                                  /* nothing moved */
	case 1: g->ts[i] -= below(5000); break;          /* ts back */
	case 2: g->ts[i] += below(30000); g->tx[i] -= below(1000000); break;
	case 3: g->ts[i] += edge_u64(); break;           /* huge ts jump */
	case 4: g->tx[i] += edge_u64(); g->ts[i] += 1 + below(3); break;
	case 5: g->q[i] = edge_u64(); g->ts[i] += below(30000); break;
	case 6: g->q[i] = (1ULL << 63) + below(1ULL << 62); g->ts[i] += 1000; break;
	case 7: g->bw[i] = rnd_bw(); g->ts[i] += below(30000); break;
	case 8: g->ts[i] = edge_u64(); g->tx[i] = edge_u64(); break;
	case 9: g->ts[i] += 1; g->tx[i] += rnd(); break;
	case 10: g->q[i] = rnd(); g->tx[i] += below(1 << 20); g->ts[i] += 1 + below(100); break;
	default: g->ts[i] += below(30000); g->tx[i] += below(2000000);
		g->q[i] = below(3000000); break;
	}
}

static void step(struct gen *g, struct hpccd_int_rec *h)
{
	uint32_t i;

	for (i = 0; i < MAXH; i++) {
		step_hop(g, i);
		h[i].ts_ns = g->ts[i];
		h[i].tx_bytes = g->tx[i];
		h[i].qlen_bytes = g->q[i];
		h[i].bw_bps = g->bw[i];
	}
}

/* Wire hops from the generator's state, each field reduced to its width. */
static void to_wire(struct gen *g, struct hpccd_int_hop_wire *w)
{
	uint32_t i;

	for (i = 0; i < MAXH; i++) {
		struct hpccd_int_fields f;

		if (g->regime && chance(30))
			g->code[i] = (uint32_t)below(32);
		f.speed_code = g->code[i];
		f.ts = (uint32_t)(g->ts[i] & HPCCD_INT_TS_MASK);
		f.tx_units = (uint32_t)((g->tx[i] / HPCCD_INT_TX_UNIT) & HPCCD_INT_TX_MASK);
		f.qlen_units = g->q[i] / HPCCD_INT_QLEN_UNIT > HPCCD_INT_QLEN_MAX ?
			(uint32_t)HPCCD_INT_QLEN_MAX :              /* saturated */
			(uint32_t)(g->q[i] / HPCCD_INT_QLEN_UNIT);
		if (hpccd_int_hop_pack(&f, &w[i]) != 0) {
			fprintf(stderr, "hpcc_diff: pack refused a field\n");
			exit(2);
		}
	}
}

static uint32_t hop_count(struct gen *g)
{
	if (g->regime && chance(10))
		return chance(300) ? 0 : chance(300) ? MAXH + 1 + (uint32_t)below(3) :
		       (uint32_t)below(MAXH) + 1;
	return g->n;
}

static void next_path(struct gen *g, uint32_t *path_id, int *valid)
{
	if (chance(g->regime ? 40 : 3)) {
		g->path_id = chance(300) ? g->path_id + 1 : (uint32_t)rnd();
		if (chance(500))
			gen_path(g);
	}
	*path_id = g->path_id;
	*valid = !chance(g->regime ? 100 : 5);
	if (!*valid && chance(500))
		*path_id = (uint32_t)rnd();    /* ignored when not valid */
}

static void next_seq(struct gen *g, uint64_t *seq, uint64_t *snd_nxt)
{
	if (g->regime && chance(50))
		g->seq = chance(500) ? edge_u64() : g->seq - below(100000);
	else
		g->seq += below(3) * 1000;
	*seq = g->seq;
	*snd_nxt = g->seq + (chance(100) ? edge_u64() : below(200000));
}

static void next_now(struct gen *g, uint64_t T)
{
	uint64_t r = below(100);

	if (r < 60)
		g->now += 1000 + below(20000);
	else if (r < 75)
		g->now += T;                    /* exactly lastUpdateTime + T */
	else if (r < 85)
		g->now += 1 + below(3);
	else if (!g->regime)
		g->now += 500;
	else if (r < 92)
		g->now += (1ULL << 23) + below(1ULL << 23);   /* beyond horizons */
	else if (r < 97)
		g->now -= below(100000);
	else
		g->now = edge_u64();
}

static uint64_t n_calls, n_trials, n_refused;

static void fail(const char *what, uint64_t trial, uint64_t ev,
		 const struct hpccd_hpcc *a, const struct hpccd_hpcc *b)
{
	const unsigned char *x = (const void *)a, *y = (const void *)b;
	size_t i;

	fprintf(stderr, "hpcc_diff: MISMATCH in %s (trial %" PRIu64 ", event %" PRIu64 ")\n",
		what, trial, ev);
	if (a && b) {
		for (i = 0; i < sizeof(*a); i++)
			if (x[i] != y[i]) {
				fprintf(stderr, "  first differing byte at offset %zu\n", i);
				break;
			}
		fprintf(stderr, "  new: W=%a Wc=%a U=%a inc=%u n_bad=%" PRIu64 "\n",
			a->W, a->Wc, a->U, a->inc_stage, a->n_bad_hops);
		fprintf(stderr, "  ref: W=%a Wc=%a U=%a inc=%u n_bad=%" PRIu64 "\n",
			b->W, b->Wc, b->U, b->inc_stage, b->n_bad_hops);
	}
	exit(1);
}

#define CHECK(what, cond) do { if (!(cond)) fail(what, trial, ev, s, r); } while (0)
#define SAME_STATE(what) CHECK(what, memcmp(s, r, sizeof(*s)) == 0)

static void trial_run(uint64_t trial, uint32_t n_events,
		      struct hpccd_hpcc *s, struct hpccd_hpcc *r,
		      uint64_t *sum_bad, uint64_t *sum_resets, uint64_t *sum_stale,
		      uint64_t *sum_wc, uint64_t *sum_notify)
{
	struct hpccd_hpcc_params p;
	const char *why_s = NULL, *why_r = NULL;
	uint32_t mode = chance(500) ? HPCCD_ALGO_HPCC : HPCCD_ALGO_RXHPCC;
	int rc_s, rc_r;
	struct gen g;
	uint64_t ev = 0, T;

	rnd_params(&p);
	memset(&g, 0, sizeof(g));
	g.regime = chance(400) ? 0 : 1;
	g.now = rnd() >> 20;
	g.seq = rnd() >> 8;
	gen_path(&g);
	memset(s, 0xa5, sizeof(*s));
	memset(r, 0xa5, sizeof(*r));
	rc_s = hpccd_hpcc_init(s, &p, mode, &why_s);
	rc_r = ref_hpccd_hpcc_init(r, &p, mode, &why_r);
	CHECK("init return", rc_s == rc_r);
	if (rc_s != 0) {
		CHECK("init why", why_s && why_r && strcmp(why_s, why_r) == 0);
		n_refused++;
		return;
	}
	SAME_STATE("init");
	T = p.T_ns < 1e15 ? (uint64_t)p.T_ns : 0;

	for (ev = 0; ev < n_events; ev++) {
		struct hpccd_int_rec h[MAXH], out_s[MAXH], out_r[MAXH];
		struct hpccd_int_hop_wire w[MAXH];
		uint64_t seq, snd_nxt;
		uint32_t path_id, n = hop_count(&g), k;
		int valid, a, b;

		step(&g, h);
		next_path(&g, &path_id, &valid);
		next_seq(&g, &seq, &snd_nxt);
		next_now(&g, T);
		n_calls++;
		switch (below(g.regime ? 16 : 10)) {
		case 0: case 1: case 2: case 3: case 4:
			a = hpccd_hpcc_new_ack(s, seq, snd_nxt, path_id, valid, h, n);
			b = ref_hpccd_hpcc_new_ack(r, seq, snd_nxt, path_id, valid, h, n);
			CHECK("new_ack return", a == b);
			SAME_STATE("new_ack");
			break;
		case 5: case 6:
			if (chance(200)) {
				k = (uint32_t)below(1000);
				hpccd_hpcc_set_active_flows(s, k);
				ref_hpccd_hpcc_set_active_flows(r, k);
			}
			a = hpccd_hpcc_new_int(s, g.now, path_id, valid, h, n);
			b = ref_hpccd_hpcc_new_int(r, g.now, path_id, valid, h, n);
			CHECK("new_int return", a == b);
			SAME_STATE("new_int");
			break;
		case 7: case 8:
			to_wire(&g, w);
			a = hpccd_hpcc_new_ack_wire(s, g.now, seq, snd_nxt, path_id, w, n);
			b = ref_hpccd_hpcc_new_ack_wire(r, g.now, seq, snd_nxt, path_id, w, n);
			CHECK("new_ack_wire return", a == b);
			SAME_STATE("new_ack_wire");
			break;
		case 9:
			to_wire(&g, w);
			a = hpccd_hpcc_new_int_wire(s, g.now, path_id, w, n);
			b = ref_hpccd_hpcc_new_int_wire(r, g.now, path_id, w, n);
			CHECK("new_int_wire return", a == b);
			SAME_STATE("new_int_wire");
			break;
		case 10: case 11: {     /* the batch API, in the flow's mode */
			struct hpccd_hpcc_event e[6];
			struct hpccd_hpcc_out o_s[6], o_r[6];
			uint32_t m = 1 + (uint32_t)below(6), j;

			memset(e, 0, sizeof(e));
			memset(o_s, 0x5a, sizeof(o_s));
			memset(o_r, 0x5a, sizeof(o_r));
			for (j = 0; j < m; j++) {
				e[j].seq = seq;
				e[j].snd_nxt = snd_nxt;
				e[j].now_ns = g.now;
				e[j].path_id = path_id;
				e[j].path_id_valid = (uint8_t)valid;
				e[j].n_hops = (uint8_t)n;
				e[j].active_flows = chance(100) ? (uint16_t)below(500) : 0;
				memcpy(e[j].hops, h, sizeof(h));
				step(&g, h);
				next_seq(&g, &seq, &snd_nxt);
				next_now(&g, T);
			}
			a = hpccd_hpcc_run(s, e, o_s, m);
			b = ref_hpccd_hpcc_run(r, e, o_r, m);
			CHECK("run return", a == b);
			CHECK("run outputs", memcmp(o_s, o_r, sizeof(o_s)) == 0);
			SAME_STATE("run");
			break;
		}
		case 12: {              /* hops aliasing the flow's own L */
			uint32_t off = (uint32_t)below(3);
			uint32_t m = s->n_hops && chance(700) ? s->n_hops : (uint32_t)below(MAXH) + 1;

			if (m + off > MAXH)
				off = MAXH - m;
			if (chance(500)) {
				a = hpccd_hpcc_new_ack(s, seq, snd_nxt, path_id, valid, s->L + off, m);
				b = ref_hpccd_hpcc_new_ack(r, seq, snd_nxt, path_id, valid, r->L + off, m);
			} else {
				a = hpccd_hpcc_new_int(s, g.now, path_id, valid, s->L + off, m);
				b = ref_hpccd_hpcc_new_int(r, g.now, path_id, valid, r->L + off, m);
			}
			CHECK("aliased update return", a == b);
			SAME_STATE("aliased update");
			break;
		}
		case 13:
			to_wire(&g, w);
			memset(out_s, 0x33, sizeof(out_s));
			memset(out_r, 0x33, sizeof(out_r));
			a = (int)hpccd_hpcc_decode_hops(s, g.now, w, n, out_s);
			b = (int)ref_hpccd_hpcc_decode_hops(r, g.now, w, n, out_r);
			CHECK("decode_hops return", a == b);
			CHECK("decode_hops output", memcmp(out_s, out_r, sizeof(out_s)) == 0);
			SAME_STATE("decode_hops");
			break;
		case 14: {
			double x = hpccd_hpcc_rate_bps(s), y = ref_hpccd_hpcc_rate_bps(r);

			CHECK("rate_bps", memcmp(&x, &y, sizeof(x)) == 0);
			break;
		}
		default:
			k = chance(300) ? 0 : (uint32_t)below(400) + 1;
			hpccd_hpcc_set_active_flows(s, k);
			ref_hpccd_hpcc_set_active_flows(r, k);
			SAME_STATE("set_active_flows");
			break;
		}
	}
	*sum_bad += s->n_bad_hops;
	*sum_resets += s->n_path_resets;
	*sum_stale += s->n_stale_resets;
	*sum_wc += s->n_wc_updates;
	*sum_notify += s->n_notify;
}

int main(int argc, char **argv)
{
	struct hpccd_hpcc *s = aligned_alloc(64, 1024), *r = aligned_alloc(64, 1024);
	uint64_t seed, trials, t;
	uint64_t sum_bad = 0, sum_resets = 0, sum_stale = 0, sum_wc = 0, sum_notify = 0;

	if (argc != 3 || !s || !r) {
		fprintf(stderr, "usage: hpcc_diff SEED TRIALS\n");
		return 2;
	}
	seed = strtoull(argv[1], NULL, 0);
	trials = strtoull(argv[2], NULL, 0);
	rs = seed;
	for (t = 0; t < trials; t++) {
		n_trials++;
		trial_run(t, 1 + (uint32_t)below(chance(100) ? 2000 : 200), s, r,
			  &sum_bad, &sum_resets, &sum_stale, &sum_wc, &sum_notify);
	}
	printf("ok trials=%" PRIu64 " calls=%" PRIu64 " refused_params=%" PRIu64
	       " bad_hops=%" PRIu64 " path_resets=%" PRIu64 " stale_resets=%" PRIu64
	       " wc_updates=%" PRIu64 " notifies=%" PRIu64 "\n",
	       n_trials, n_calls, n_refused, sum_bad, sum_resets, sum_stale,
	       sum_wc, sum_notify);
	free(s);
	free(r);
	return 0;
}
