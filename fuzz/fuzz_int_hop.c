// SPDX-License-Identifier: BSD-2-Clause
/*
 * libFuzzer harness: the INT hop decoder.  The 8-byte hop word
 * (fastpath/cc/int_decode.c: unpack, pack, the speed table) and the
 * unwrapping of its narrow counters against a flow's last record
 * (fastpath/cc/hpcc.c: hpccd_hpcc_decode_hops, and the wire entry points
 * hpccd_hpcc_new_ack_wire / new_int_wire that the AF_XDP path calls with
 * the hop records of every packet).
 *
 * Input: a mode byte (bit 0: sender HPCC or Rx-HPCC), then records of
 *   u8 n_hops (0..8 used, larger values too: the decoder must cap them)
 *   u32 local time step in ns (bit 31 set: step << 8, to reach the stale
 *       horizon of 0.67..8.4 ms and beyond)
 *   u16 seq step (x 1000 bytes), u16 pathID
 *   n_hops x 8 bytes of hop words as on the wire
 * until the input ends.
 *
 * Oracles (FUZZ_CHECK): unpack(pack(x)) == x and pack(unpack(w)) == w;
 * pack refuses exactly the fields that do not fit; the speed table maps
 * codes and rates both ways; decode_hops converts units exactly and, when
 * the last record is certainly still unwrappable (same hop count, less than
 * 0.67 ms since it, the shortest horizon any speed gives), unwraps each
 * counter to the least value >= the last one with the same low bits; when
 * it is certainly stale (>= 8.39 ms) or absent, takes the raw values; the
 * window stays in [w_min, w_max] and U finite and >= 0 after every update.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <arpa/inet.h>

#include "hpccd/cc.h"

#include "fuzz_common.h"

#define MIN_HORIZON_NS 671088ULL     /* 2^27 B at 1.6 Tbit/s */
#define MAX_HORIZON_NS (1ULL << 23)  /* half the 24-bit ns wrap */

static void check_word(const struct hpccd_int_hop_wire *w)
{
	struct hpccd_int_fields f;
	struct hpccd_int_hop_wire back;
	uint64_t v = (uint64_t)ntohl(w->hi_be) << 32 | ntohl(w->lo_be);

	hpccd_int_hop_unpack(w, &f);
	FUZZ_CHECK(f.speed_code == v >> 59);
	FUZZ_CHECK(f.ts == ((v >> 35) & HPCCD_INT_TS_MASK));
	FUZZ_CHECK(f.tx_units == ((v >> 15) & HPCCD_INT_TX_MASK));
	FUZZ_CHECK(f.qlen_units == (v & HPCCD_INT_QLEN_MAX));
	FUZZ_CHECK(hpccd_int_hop_pack(&f, &back) == 0);
	FUZZ_CHECK(memcmp(&back, w, sizeof(back)) == 0);
}

static void check_fields(const struct hpccd_int_fields *f)
{
	struct hpccd_int_hop_wire w;
	struct hpccd_int_fields g;
	int fits = f->speed_code <= HPCCD_INT_SPEED_MASK && f->ts <= HPCCD_INT_TS_MASK &&
		   f->tx_units <= HPCCD_INT_TX_MASK && f->qlen_units <= HPCCD_INT_QLEN_MAX;
	int rc;

	memset(&w, 0xa5, sizeof(w));
	rc = hpccd_int_hop_pack(f, &w);
	if (!fits) {
		FUZZ_CHECK(rc == -ERANGE);
		return;
	}
	FUZZ_CHECK(rc == 0);
	hpccd_int_hop_unpack(&w, &g);
	FUZZ_CHECK(memcmp(&g, f, sizeof(g)) == 0);
}

static void check_speed(uint32_t code, uint64_t bps)
{
	uint32_t mbps = hpccd_int_speed_mbps(code), c;

	if (code == 0 || code >= HPCCD_SPEED_CODES)
		FUZZ_CHECK(mbps == 0);
	else
		FUZZ_CHECK(mbps > 0 && hpccd_int_speed_code((uint64_t)mbps * 1000000) == code);
	c = hpccd_int_speed_code(bps);
	FUZZ_CHECK(c < HPCCD_SPEED_CODES);
	if (c)
		FUZZ_CHECK((uint64_t)hpccd_int_speed_mbps(c) * 1000000 == bps);
}

static void check_decode(const struct hpccd_hpcc *s, uint64_t now,
			 const struct hpccd_int_hop_wire *w, uint32_t n)
{
	struct hpccd_int_rec out[HPCCD_INT_MAX_HOPS];
	uint32_t got, i, cap = n < HPCCD_INT_MAX_HOPS ? n : HPCCD_INT_MAX_HOPS;
	uint64_t age = now - s->last_rx_local_ns;
	int fresh = !s->have_L || n != s->n_hops || age >= MAX_HORIZON_NS;
	int unwrapped = s->have_L && n == s->n_hops && age < MIN_HORIZON_NS;

	memset(out, 0x5a, sizeof(out));
	got = hpccd_hpcc_decode_hops(s, now, w, n, out);
	FUZZ_CHECK(got == cap);
	for (i = 0; i < got; i++) {
		struct hpccd_int_fields f;
		const struct hpccd_int_rec *l = &s->L[i];

		hpccd_int_hop_unpack(&w[i], &f);
		FUZZ_CHECK(out[i].bw_bps == (uint64_t)hpccd_int_speed_mbps(f.speed_code) * 1000000);
		FUZZ_CHECK(out[i].qlen_bytes == (uint64_t)f.qlen_units * HPCCD_INT_QLEN_UNIT);
		FUZZ_CHECK(out[i].tx_bytes % HPCCD_INT_TX_UNIT == 0);
		FUZZ_CHECK((out[i].ts_ns & HPCCD_INT_TS_MASK) == f.ts);
		FUZZ_CHECK(((out[i].tx_bytes / HPCCD_INT_TX_UNIT) & HPCCD_INT_TX_MASK) == f.tx_units);
		if (fresh) {
			FUZZ_CHECK(out[i].ts_ns == f.ts);
			FUZZ_CHECK(out[i].tx_bytes == (uint64_t)f.tx_units * HPCCD_INT_TX_UNIT);
		}
		if (unwrapped) {
			FUZZ_CHECK(out[i].ts_ns >= l->ts_ns);
			FUZZ_CHECK(out[i].ts_ns - l->ts_ns <= HPCCD_INT_TS_MASK);
			FUZZ_CHECK(out[i].tx_bytes >= l->tx_bytes);
			FUZZ_CHECK(out[i].tx_bytes - l->tx_bytes <=
				   HPCCD_INT_TX_MASK * HPCCD_INT_TX_UNIT);
		}
	}
}

static void check_state(const struct hpccd_hpcc *s)
{
	FUZZ_CHECK(s->W >= s->w_min && s->W <= s->w_max);
	FUZZ_CHECK(s->Wc >= s->w_min && s->Wc <= s->w_max);
	FUZZ_CHECK(isfinite(s->U) && s->U >= 0);
	FUZZ_CHECK(s->inc_stage <= s->max_stage);
	FUZZ_CHECK(s->n_hops <= HPCCD_INT_MAX_HOPS);
	FUZZ_CHECK(isfinite(hpccd_hpcc_rate_bps(s)) && hpccd_hpcc_rate_bps(s) > 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_rd r = {data, size};
	struct hpccd_hpcc_params p;
	struct hpccd_hpcc s;
	uint32_t mode = (fuzz_u8(&r) & 1) ? HPCCD_ALGO_RXHPCC : HPCCD_ALGO_HPCC;
	uint64_t now = 1000000, seq = 0;
	const char *why = NULL;
	int events = 0;

	hpccd_hpcc_params_default(&p);
	/* Lab speeds: T of tens of microseconds, 1 Gbit/s NIC. */
	p.T_ns = 50000;
	p.line_rate_bps = 1000000000ULL;
	FUZZ_CHECK(hpccd_hpcc_init(&s, &p, mode, &why) == 0);

	while (r.n && events++ < 256) {
		struct hpccd_int_hop_wire w[16];
		struct hpccd_int_fields f;
		uint32_t n = fuzz_u8(&r), step = fuzz_u32(&r), i;
		uint32_t path_id = fuzz_u16(&r) & 0xfff;
		uint64_t snd_nxt;
		int rc;

		n %= 16;                       /* 9..15: the decoder caps, the core refuses */
		now += step & 0x80000000u ? (uint64_t)(step & 0x7fffffff) << 8 : step;
		seq += 1000ULL * fuzz_u16(&r);
		snd_nxt = seq + 100000;
		fuzz_bytes(&r, w, n * sizeof(w[0]));
		for (i = 0; i < n; i++) {
			check_word(&w[i]);
			/* the same bytes as fields, most of them too wide */
			f.speed_code = ntohl(w[i].hi_be) >> 24;
			f.ts = ntohl(w[i].hi_be) & 0x1ffffff;
			f.tx_units = ntohl(w[i].lo_be) >> 11;
			f.qlen_units = ntohl(w[i].lo_be) & 0xffff;
			check_fields(&f);
			check_speed(ntohl(w[i].hi_be) >> 26, (uint64_t)ntohl(w[i].lo_be) * 1000000);
		}
		check_decode(&s, now, w, n);
		if (mode == HPCCD_ALGO_RXHPCC)
			rc = hpccd_hpcc_new_int_wire(&s, now, path_id, w, n);
		else
			rc = hpccd_hpcc_new_ack_wire(&s, now, seq, snd_nxt, path_id, w, n);
		if (n > HPCCD_INT_MAX_HOPS)
			FUZZ_CHECK(rc == -E2BIG);
		else
			FUZZ_CHECK(rc == 0 || rc == 1);
		check_state(&s);
	}
	return 0;
}
