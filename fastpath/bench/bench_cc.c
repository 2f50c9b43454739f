// SPDX-License-Identifier: BSD-2-Clause
/*
 * Benchmark of the HPCC per-ACK update (hpccd_hpcc_new_ack, Algorithm 1
 * lines 21-27) over many flows with 5-hop INT records.  Not a test: it
 * asserts nothing about speed; scripts/bench_cc.sh runs it natively and
 * under callgrind and prints the table of docs/benchmarks.md.
 *
 *   bench_cc FLOWS UPDATES [MODE]
 *
 *   FLOWS    number of struct hpccd_hpcc, each on its own 5-hop path
 *   UPDATES  number of measured ACKs, spread over the flows in a
 *            pseudo-random but deterministic order (xorshift64*)
 *   MODE     "decoded" (default): hpccd_hpcc_new_ack with decoded hops;
 *            "wire": hpccd_hpcc_new_ack_wire with packed 8-byte wire hops
 *            (decode + update)
 *
 * Every flow is first warmed up with WARMUP_ACKS ACKs (one more for a
 * random half of them): the first only records L ([HPCC] Algorithm 1
 * has nothing to take a delta against), the others bring the EWMA U from
 * u_init = 0 to its steady state (each ACK moves it by tau/T ~ 1/9), so
 * that 10 flows with many ACKs each and 100k flows with a couple each run
 * the same mix of code paths (the odd ACK count evens out which half of
 * the seq alternation below a flow starts in).  Then the
 * statistics are zeroed (CALLGRIND_ZERO_STATS, a no-op outside valgrind),
 * so that `valgrind --tool=callgrind --toggle-collect=<entry point>`
 * counts the UPDATES measured calls and nothing else.
 *
 * Events are generated in chunks of CHUNK ACKs; a chunk is fully built
 * before the timed loop over it runs, so the wall clock (CLOCK_MONOTONIC,
 * summed over the timed loops) covers only the calls into the core and
 * the loop that feeds them.  Printed twice: the mean over all updates
 * (ns_per_update) and the median over the chunks of the per-chunk mean
 * (ns_per_update_median), which a preemption or another process on a
 * shared machine moves much less: it spoils a few chunks, not the median.
 *
 * Traffic model (per flow, per hop, deterministic from SEED):
 *  - all hops at 100 Gbit/s (speed code 27);
 *  - the switch timestamp advances 1000-2000 ns per ACK of the flow, with
 *    +-50 ns of per-hop jitter;
 *  - txBytes advances at a per-hop fraction of the line rate (one hop per
 *    flow is the bottleneck, at 88-94 %, the others at 30-80 %), +-10 %
 *    per ACK, and is reported in whole 128-byte units as the switch would;
 *  - qLen is a random walk in 80-byte units (up to 8 KB at the bottleneck,
 *    1.6 KB elsewhere), so that u' averages about eta = 0.95 at the
 *    bottleneck: U straddles eta and both ComputeWind branches
 *    (multiplicative decrease and additive increase) run;
 *  - seq/snd_nxt alternate so that every other ACK of a flow passes the
 *    line-22 test (ack.seq > lastUpdateSeq): both updateWc = true and
 *    updateWc = false are exercised, half each;
 *  - each flow has its own path (no counters shared between flows) and,
 *    in wire mode, its own receiver clock, advancing with its ACKs: no
 *    record ever gets older than the unwrap horizon, so the measured calls
 *    are all steady-state updates (the program prints the reset counters,
 *    which stay 0).
 * The decoded records are exactly representable on the wire, so both
 * modes see the same deltas and must end with the same windows: the
 * printed checksum is the same for "decoded" and "wire".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hpccd/cc.h"

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define HAVE_CALLGRIND_H 1
#endif
#endif
#ifndef HAVE_CALLGRIND_H
#define HAVE_CALLGRIND_H 0
#define CALLGRIND_ZERO_STATS do { } while (0)
#endif

#define HOPS       HPCCD_INT_DEFAULT_HOPS   /* 5 */
#define CHUNK      2048                     /* ACKs generated per timed loop */
#define SEED       0x9e3779b97f4a7c15ULL
#define BW_BPS     100000000000ULL          /* 100 Gbit/s */
#define MSS        1000                     /* bytes per ACKed packet */
#define WARMUP_ACKS 48                      /* per flow, before measuring */

/* xorshift64* (Vigna), deterministic and cheap. */
static uint64_t rng_state = SEED;

static uint64_t rnd(void)
{
	uint64_t x = rng_state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	rng_state = x;
	return x * 0x2545f4914f6cdd1dULL;
}

/* Uniform in [lo, hi] (modulo bias is irrelevant here). */
static uint64_t rnd_in(uint64_t lo, uint64_t hi)
{
	return lo + rnd() % (hi - lo + 1);
}

/* Generator state of one flow: what its 5 switches would report. */
struct gen_hop {
	uint64_t ts;          /* switch egress clock, ns */
	uint64_t txb;         /* exact bytes sent by the egress port */
	uint32_t q;           /* queue, 80-byte units */
	uint32_t qmax;        /* random-walk bound, 80-byte units */
	uint32_t permille;    /* mean utilisation of the port, 1/1000 */
};

struct gen_flow {
	struct gen_hop h[HOPS];
	uint64_t now;         /* receiver-local clock (wire mode), ns */
	uint64_t k;           /* ACKs generated so far */
	uint32_t path_id;
};

struct ev_dec {
	uint32_t flow, path_id;
	uint64_t seq, snd_nxt;
	struct hpccd_int_rec hops[HOPS];
};

struct ev_wire {
	uint32_t flow, path_id;
	uint64_t seq, snd_nxt, now;
	struct hpccd_int_hop_wire w[HOPS];
};

static uint32_t speed_code_100g;

static void gen_init(struct gen_flow *g, uint32_t idx)
{
	uint32_t bneck = (uint32_t)rnd_in(0, HOPS - 1), i;

	memset(g, 0, sizeof(*g));
	g->path_id = idx * 2654435761u;
	g->now = rnd_in(1000000, 1000000000);
	for (i = 0; i < HOPS; i++) {
		struct gen_hop *h = &g->h[i];

		/* Arbitrary starting points, so that the wire counters start
		 * anywhere in their range and wrap during the run. */
		h->ts = rnd() >> 8;
		h->txb = (rnd() >> 8) & ~127ULL;
		if (i == bneck) {
			h->permille = (uint32_t)rnd_in(880, 940);
			h->qmax = 100;                       /* 8 KB */
		} else {
			h->permille = (uint32_t)rnd_in(300, 800);
			h->qmax = 20;                        /* 1.6 KB */
		}
		h->q = (uint32_t)rnd_in(0, h->qmax);
	}
}

/* Advance flow g by one ACK; fill decoded records and seq numbers. */
static void gen_ack(struct gen_flow *g, struct hpccd_int_rec *rec,
		    uint64_t *seq, uint64_t *snd_nxt)
{
	uint64_t dts = rnd_in(1000, 2000);
	uint32_t i;

	g->k++;
	g->now += dts + rnd_in(0, 20);
	for (i = 0; i < HOPS; i++) {
		struct gen_hop *h = &g->h[i];
		uint64_t d = dts + rnd_in(0, 100) - 50;
		/* bytes = d ns x 12.5 B/ns x permille/1000 x (0.9 .. 1.1) */
		uint64_t pm = h->permille * rnd_in(900, 1100) / 1000;
		int32_t step = (int32_t)rnd_in(0, 8) - 4;
		int64_t q = (int64_t)h->q + step;

		h->ts += d;
		h->txb += d * pm * 125 / 10000;
		h->q = (uint32_t)(q < 0 ? 0 : q > h->qmax ? h->qmax : q);

		rec[i].ts_ns = h->ts;
		rec[i].tx_bytes = h->txb / HPCCD_INT_TX_UNIT * HPCCD_INT_TX_UNIT;
		rec[i].qlen_bytes = (uint64_t)h->q * HPCCD_INT_QLEN_UNIT;
		rec[i].bw_bps = BW_BPS;
	}
	/* One packet in flight after each ACK: snd_nxt = seq + MSS.  Then
	 * ACK k+1 has seq = previous snd_nxt (not > lastUpdateSeq: line 26,
	 * no W^c update) and ACK k+2 passes line 22 (W^c update). */
	*seq = g->k * MSS;
	*snd_nxt = *seq + MSS;
}

static void pack_hops(const struct hpccd_int_rec *rec,
		      struct hpccd_int_hop_wire *w)
{
	uint32_t i;

	for (i = 0; i < HOPS; i++) {
		struct hpccd_int_fields f = {
			.speed_code = speed_code_100g,
			.ts = (uint32_t)(rec[i].ts_ns & HPCCD_INT_TS_MASK),
			.tx_units = (uint32_t)((rec[i].tx_bytes / HPCCD_INT_TX_UNIT) &
					       HPCCD_INT_TX_MASK),
			.qlen_units = (uint32_t)(rec[i].qlen_bytes / HPCCD_INT_QLEN_UNIT),
		};

		if (hpccd_int_hop_pack(&f, &w[i]) != 0) {
			fprintf(stderr, "bench_cc: hop does not fit the wire record\n");
			exit(1);
		}
	}
}

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

static uint64_t mix(uint64_t h, double x)
{
	uint64_t b;

	memcpy(&b, &x, sizeof(b));
	h ^= b;
	h *= 0x100000001b3ULL;          /* FNV-1a prime, 64-bit */
	return h ^ (h >> 29);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 10);
	return errno == 0 && end != s && *end == '\0' && s[0] != '-';
}

static void usage(void)
{
	fprintf(stderr, "usage: bench_cc FLOWS UPDATES [decoded|wire]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct hpccd_hpcc_params p;
	struct hpccd_hpcc *fl;
	struct gen_flow *gen;
	struct ev_dec *ed;
	struct ev_wire *ew;
	uint64_t nflows, nupd, done, elapsed = 0, wc_ret = 0, ck = 0xcbf29ce484222325ULL;
	uint64_t n_chunks = 0;
	double *chunk_ns;
	uint64_t wc_updates = 0, path_resets = 0, stale_resets = 0, bad_hops = 0;
	double sumW = 0, sumU = 0;
	const char *why = NULL;
	int wire;
	uint64_t f;

	if (argc < 3 || argc > 4)
		usage();
	if (!parse_u64(argv[1], &nflows) || !parse_u64(argv[2], &nupd) ||
	    nflows == 0 || nflows > UINT32_MAX)
		usage();
	if (argc == 4 && strcmp(argv[3], "wire") == 0)
		wire = 1;
	else if (argc == 4 && strcmp(argv[3], "decoded") != 0)
		usage();
	else
		wire = 0;

	speed_code_100g = hpccd_int_speed_code(BW_BPS);
	if (speed_code_100g == HPCCD_SPEED_UNKNOWN) {
		fprintf(stderr, "bench_cc: no speed code for 100 Gbit/s\n");
		return 1;
	}

	fl = aligned_alloc(64, ((nflows * sizeof(*fl) + 63) / 64) * 64);
	gen = malloc(nflows * sizeof(*gen));
	ed = malloc(CHUNK * sizeof(*ed));
	ew = malloc(CHUNK * sizeof(*ew));
	chunk_ns = malloc((nupd / CHUNK + 1) * sizeof(*chunk_ns));
	if (!fl || !gen || !ed || !ew || !chunk_ns) {
		fprintf(stderr, "bench_cc: out of memory\n");
		return 1;
	}

	hpccd_hpcc_params_default(&p);
	for (f = 0; f < nflows; f++) {
		struct hpccd_int_rec rec[HOPS];
		struct hpccd_int_hop_wire w[HOPS];
		uint64_t seq, snd_nxt;
		uint32_t k, nwarm;
		int r;

		if (hpccd_hpcc_init(&fl[f], &p, HPCCD_ALGO_HPCC, &why) != 0) {
			fprintf(stderr, "bench_cc: init: %s\n", why);
			return 1;
		}
		gen_init(&gen[f], (uint32_t)f);
		/* Warm-up: the first ACK of a flow only records L, the next
		 * ones bring the EWMA U from u_init = 0 to its steady state.
		 * One more ACK for a random half of the flows, so that their
		 * first measured ACKs are half W^c updates, half not, even when
		 * each flow gets only a couple of them (100k flows). */
		nwarm = WARMUP_ACKS + (uint32_t)(rnd() & 1);
		for (k = 0; k < nwarm; k++) {
			gen_ack(&gen[f], rec, &seq, &snd_nxt);
			if (wire) {
				pack_hops(rec, w);
				r = hpccd_hpcc_new_ack_wire(&fl[f], gen[f].now, seq,
							    snd_nxt, gen[f].path_id,
							    w, HOPS);
			} else {
				r = hpccd_hpcc_new_ack(&fl[f], seq, snd_nxt,
						       gen[f].path_id, 1, rec, HOPS);
			}
			if (r < 0 || (k == 0 && r != 0)) {
				fprintf(stderr, "bench_cc: warm-up ACK returned %d\n", r);
				return 1;
			}
		}
	}

	/* From here on only the measured calls count under callgrind. */
	CALLGRIND_ZERO_STATS;

	for (done = 0; done < nupd;) {
		uint64_t n = nupd - done < CHUNK ? nupd - done : CHUNK, i, t0, dt, acc = 0;
		int bad = 0;

		/* Generate the chunk (not timed). */
		for (i = 0; i < n; i++) {
			uint32_t fi = (uint32_t)(rnd() % nflows);
			struct gen_flow *g = &gen[fi];

			if (wire) {
				struct hpccd_int_rec rec[HOPS];

				ew[i].flow = fi;
				ew[i].path_id = g->path_id;
				gen_ack(g, rec, &ew[i].seq, &ew[i].snd_nxt);
				ew[i].now = g->now;
				pack_hops(rec, ew[i].w);
			} else {
				ed[i].flow = fi;
				ed[i].path_id = g->path_id;
				gen_ack(g, ed[i].hops, &ed[i].seq, &ed[i].snd_nxt);
			}
		}

		/* Timed loop: only the calls into the core. */
		t0 = now_ns();
		if (wire) {
			for (i = 0; i < n; i++) {
				const struct ev_wire *e = &ew[i];
				int r = hpccd_hpcc_new_ack_wire(&fl[e->flow], e->now,
								e->seq, e->snd_nxt,
								e->path_id, e->w, HOPS);
				bad |= r < 0;
				acc += (uint64_t)r;
			}
		} else {
			for (i = 0; i < n; i++) {
				const struct ev_dec *e = &ed[i];
				int r = hpccd_hpcc_new_ack(&fl[e->flow], e->seq,
							   e->snd_nxt, e->path_id, 1,
							   e->hops, HOPS);
				bad |= r < 0;
				acc += (uint64_t)r;
			}
		}
		dt = now_ns() - t0;
		elapsed += dt;
		chunk_ns[n_chunks++] = (double)dt / (double)n;
		if (bad) {
			fprintf(stderr, "bench_cc: an update returned an error\n");
			return 1;
		}
		wc_ret += acc;
		done += n;
	}

	for (f = 0; f < nflows; f++) {
		const struct hpccd_hpcc *s = &fl[f];

		ck = mix(mix(mix(ck, s->W), s->Wc), s->U);
		sumW += s->W;
		sumU += s->U;
		wc_updates += s->n_wc_updates;
		path_resets += s->n_path_resets;
		stale_resets += s->n_stale_resets;
		bad_hops += s->n_bad_hops;
	}

	printf("mode=%s flows=%" PRIu64 " updates=%" PRIu64 " hops=%d callgrind_h=%d\n",
	       wire ? "wire" : "decoded", nflows, nupd, HOPS, HAVE_CALLGRIND_H);
	printf("ns_per_update=%.2f\n", nupd ? (double)elapsed / (double)nupd : 0.0);
	qsort(chunk_ns, n_chunks, sizeof(*chunk_ns), cmp_double);
	printf("ns_per_update_median=%.2f\n", n_chunks ? chunk_ns[n_chunks / 2] : 0.0);
	printf("wc_updates=%" PRIu64 " (returned %" PRIu64 ") path_resets=%" PRIu64
	       " stale_resets=%" PRIu64 " bad_hops=%" PRIu64 "\n",
	       wc_updates, wc_ret, path_resets, stale_resets, bad_hops);
	printf("mean_W_bytes=%.1f mean_U=%.4f\n", sumW / (double)nflows,
	       sumU / (double)nflows);
	printf("checksum=%016" PRIx64 "\n", ck);

	free(chunk_ns);
	free(ew);
	free(ed);
	free(gen);
	free(fl);
	return 0;
}
