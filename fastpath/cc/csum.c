// SPDX-License-Identifier: BSD-2-Clause
/*
 * The Internet checksum's byte sum in userspace C (include/hpccd/csum.h):
 * the one copy the engine, the TCP-side probe and the wire API use.
 */
#include <stdint.h>
#include <string.h>

#include "hpccd/csum.h"

static inline uint64_t add_carry(uint64_t s, uint64_t v)
{
	s += v;
	return s + (s < v);
}

/* The sum of the native 32-bit words (2^16 = 1 modulo 2^16 - 1, so any
 * grouping of the words folds to the same sum; RFC 1071 section 2),
 * without a carry per word, which the compiler vectorises (AVX2 where the
 * CPU has it, chosen at load time).  20 GB/s against 5.4-9.8 for a
 * 64-bit sum with end-around carry per word, which took 13 % of a 61 KB-MTU
 * transfer's CPU (docs/transport.md "Where a packet's time goes").  The
 * 64-bit accumulator holds 2^32 words: len below 16 GB. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
__attribute__((optimize("tree-vectorize"), target_clones("avx2", "default")))
#endif
uint64_t hpccd_csum_partial(const void *buf, size_t len, uint64_t sum)
{
	const uint8_t *p = buf;
	uint64_t acc = 0, v;
	size_t n = len / 4, i;

	for (i = 0; i < n; i++) {
		uint32_t w;

		memcpy(&w, p + 4 * i, 4);
		acc += w;
	}
	p += 4 * n;
	len -= 4 * n;
	if (len) {
		v = 0;
		memcpy(&v, p, len);     /* zero padding at the end, in memory order */
		acc += v;
	}
	return add_carry(sum, acc);
}
