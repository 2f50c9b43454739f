/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * What the libFuzzer harnesses of fuzz/ share: an invariant check that
 * traps (libFuzzer reports the input and stops, under
 * -fno-sanitize-recover=all like every sanitizer finding), and a reader
 * that turns the fuzzer's bytes into typed values.
 *
 * Who may include this: the harnesses in fuzz/ only.
 *
 * The reader never fails: past the end of the input it yields zeroes, so
 * every prefix of an input is itself a meaningful input (libFuzzer's
 * mutations cut and splice inputs freely).  Multi-byte values are
 * little-endian in the input: an arbitrary choice, the input is ours.
 */
#ifndef HPCCD_FUZZ_COMMON_H
#define HPCCD_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* An invariant of the code under test does not hold: say which (to
 * stderr, before libFuzzer's report) and trap.  Not assert(): a check
 * that -DNDEBUG would compile out is no check. */
#define FUZZ_CHECK(cond)                                                        \
	do {                                                                    \
		if (!(cond)) {                                                  \
			fprintf(stderr, "%s:%d: invariant violated: %s\n",      \
				__FILE__, __LINE__, #cond);                     \
			__builtin_trap();                                       \
		}                                                               \
	} while (0)

struct fuzz_rd {
	const uint8_t *p;
	size_t n;
};

static inline uint8_t fuzz_u8(struct fuzz_rd *r)
{
	uint8_t v;

	if (!r->n)
		return 0;
	v = *r->p++;
	r->n--;
	return v;
}

static inline uint64_t fuzz_uN(struct fuzz_rd *r, unsigned bytes)
{
	uint64_t v = 0;
	unsigned i;

	for (i = 0; i < bytes; i++)
		v |= (uint64_t)fuzz_u8(r) << (8 * i);
	return v;
}

static inline uint16_t fuzz_u16(struct fuzz_rd *r) { return (uint16_t)fuzz_uN(r, 2); }
static inline uint32_t fuzz_u32(struct fuzz_rd *r) { return (uint32_t)fuzz_uN(r, 4); }
static inline uint64_t fuzz_u64(struct fuzz_rd *r) { return fuzz_uN(r, 8); }

static inline double fuzz_raw_double(struct fuzz_rd *r)
{
	uint64_t b = fuzz_u64(r);
	double d;

	memcpy(&d, &b, sizeof(d));
	return d;
}

static inline void fuzz_bytes(struct fuzz_rd *r, void *dst, size_t n)
{
	size_t k = n < r->n ? n : r->n;

	memcpy(dst, r->p, k);
	memset((uint8_t *)dst + k, 0, n - k);
	r->p += k;
	r->n -= k;
}

#endif /* HPCCD_FUZZ_COMMON_H */
