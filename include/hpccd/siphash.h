/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast short-input PRF",
 * 2012), the MAC of the integrity tag (docs/wire-format.md "Integrity
 * tag", [HPCC++2022] section 9.1).
 *
 * Who may include this: the BPF programs (after vmlinux.h) and userspace C.
 * Not the cffi cdef: everything here is static inline.  No libc, no BPF
 * helpers, no loops without a constant bound in the part BPF uses.
 *
 * Interface: incremental, so that a BPF program can feed 8-byte words
 * straight from packet memory with one bounds check per word, and a
 * bounded number of words (the verifier must see the bound):
 *
 *	struct hpccd_siphash s;
 *	hpccd_siphash__init(&s, k0, k1);
 *	hpccd_siphash__absorb(&s, hpccd_siphash__le64(p));   (per 8 bytes)
 *	tag = hpccd_siphash__final(&s, tail, total_len);
 *
 * Byte order, on purpose: SipHash reads its message and its key as
 * little-endian 64-bit words (the paper's convention), whatever the host.
 * hpccd_siphash__le64() assembles such a word from bytes, one byte load at
 * a time, so it is right on any host and never makes an unaligned 8-byte
 * load (packet words here start 2 bytes past a 4-byte boundary).  The key
 * is 16 bytes: k0 = le64(key[0..7]), k1 = le64(key[8..15]).  The 64-bit
 * output is a number; the tag puts it on the wire big-endian.
 */
#ifndef HPCCD_SIPHASH_H
#define HPCCD_SIPHASH_H

#if !defined(__bpf__)
#include <stddef.h>
#include <linux/types.h>
#endif

#ifndef __always_inline
#define __always_inline inline __attribute__((__always_inline__))
#endif

struct hpccd_siphash {
	__u64 v0, v1, v2, v3;
};

static __always_inline __u64 hpccd_siphash__rotl(__u64 x, int b)
{
	return (x << b) | (x >> (64 - b));
}

/* One SipRound (paper, section 2, Figure 2). */
static __always_inline void hpccd_siphash__round(struct hpccd_siphash *s)
{
	s->v0 += s->v1;
	s->v1 = hpccd_siphash__rotl(s->v1, 13);
	s->v1 ^= s->v0;
	s->v0 = hpccd_siphash__rotl(s->v0, 32);
	s->v2 += s->v3;
	s->v3 = hpccd_siphash__rotl(s->v3, 16);
	s->v3 ^= s->v2;
	s->v0 += s->v3;
	s->v3 = hpccd_siphash__rotl(s->v3, 21);
	s->v3 ^= s->v0;
	s->v2 += s->v1;
	s->v1 = hpccd_siphash__rotl(s->v1, 17);
	s->v1 ^= s->v2;
	s->v2 = hpccd_siphash__rotl(s->v2, 32);
}

/* Initialisation: the four constants spell "somepseudorandomlygeneratedbytes". */
static __always_inline void hpccd_siphash__init(struct hpccd_siphash *s, __u64 k0, __u64 k1)
{
	s->v0 = k0 ^ 0x736f6d6570736575ULL;
	s->v1 = k1 ^ 0x646f72616e646f6dULL;
	s->v2 = k0 ^ 0x6c7967656e657261ULL;
	s->v3 = k1 ^ 0x7465646279746573ULL;
}

/* Compression of one message word m (already little-endian decoded):
 * c = 2 SipRounds. */
static __always_inline void hpccd_siphash__absorb(struct hpccd_siphash *s, __u64 m)
{
	s->v3 ^= m;
	hpccd_siphash__round(s);
	hpccd_siphash__round(s);
	s->v0 ^= m;
}

/* Finalisation: `tail` holds the last (total_len mod 8) message bytes as a
 * little-endian number (byte i at bits 8i..8i+7, the rest zero);
 * total_len is the whole message length in bytes (only its low 8 bits
 * count).  d = 4 SipRounds. */
static __always_inline __u64 hpccd_siphash__final(struct hpccd_siphash *s, __u64 tail,
						   __u64 total_len)
{
	__u64 b = (total_len & 0xff) << 56 | (tail & 0x00ffffffffffffffULL);

	hpccd_siphash__absorb(s, b);
	s->v2 ^= 0xff;
	hpccd_siphash__round(s);
	hpccd_siphash__round(s);
	hpccd_siphash__round(s);
	hpccd_siphash__round(s);
	return s->v0 ^ s->v1 ^ s->v2 ^ s->v3;
}

/* Eight bytes at p as a little-endian word.  Byte loads: see the header
 * comment (any host byte order, no unaligned wide load).  The caller has
 * checked p + 8 against the end of its buffer. */
static __always_inline __u64 hpccd_siphash__le64(const void *p)
{
	const __u8 *b = (const __u8 *)p;

	return (__u64)b[0] | (__u64)b[1] << 8 | (__u64)b[2] << 16 | (__u64)b[3] << 24 |
	       (__u64)b[4] << 32 | (__u64)b[5] << 40 | (__u64)b[6] << 48 |
	       (__u64)b[7] << 56;
}

#if !defined(__bpf__)
/* Userspace convenience: SipHash-2-4 of msg[0..len) under the 16-byte key.
 * Loops over len; BPF programs use the incremental interface above with a
 * constant bound instead. */
static inline __u64 hpccd_siphash24(const void *key16, const void *msg, size_t len)
{
	const __u8 *k = (const __u8 *)key16, *m = (const __u8 *)msg;
	struct hpccd_siphash s;
	size_t i, full = len & ~(size_t)7;
	__u64 tail = 0;

	hpccd_siphash__init(&s, hpccd_siphash__le64(k), hpccd_siphash__le64(k + 8));
	for (i = 0; i < full; i += 8)
		hpccd_siphash__absorb(&s, hpccd_siphash__le64(m + i));
	for (i = 0; i < (len & 7); i++)
		tail |= (__u64)m[full + i] << (8 * i);
	return hpccd_siphash__final(&s, tail, (__u64)len);
}
#endif

#endif /* HPCCD_SIPHASH_H */
