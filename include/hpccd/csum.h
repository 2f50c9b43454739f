/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The Internet checksum (RFC 1071) of userspace C, written once
 * (fastpath/cc/csum.c): the engine's frames and its receive check
 * (fastpath/transport/), the TCP-side probe (fastpath/tcpside/probe.c) and
 * the engine's probe reflection (fastpath/cc/wire.c) sum bytes with it.
 * BPF programs sum with the kernel's bpf_csum_diff() instead (they can
 * call no function of ours, and no vector code).  What code shared with BPF
 * does around a sum, incremental updates (RFC 1624), the pseudo-header and
 * the final write, is include/hpccd/parse.h's, over big-endian words
 * (include/hpccd/build.h, "Checksums"); the inline helpers below are the
 * same steps for this file's native sums, for the engine's per-packet path
 * (no byte swaps, no call for the 12-byte pseudo-header).
 *
 * Who may include this: userspace C, not BPF, not the cffi cdef.
 *
 * Byte order: the sum is over native 16-bit words (host-order loads of
 * the bytes), which is byte-order independent but for a swap (RFC 1071
 * section 2(B)): hpccd_csum_store() writes ~fold(sum) as it lies in
 * memory, and parse.h's hpccd__csum_from_mem() turns a folded sum into
 * parse.h's big-endian accumulator.
 */
#ifndef HPCCD_CSUM_H
#define HPCCD_CSUM_H

#include <arpa/inet.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Ones' complement sum of p[0..len) added to sum, unfolded (a 64-bit
 * accumulator; fold it with hpccd_csum_fold64).  An odd len sums the last
 * byte as if followed by a zero byte: to continue after an odd run, swap
 * the next run's folded sum (fastpath/transport/receiver.c pkt_csum). */
uint64_t hpccd_csum_partial(const void *p, size_t len, uint64_t sum);

/* Sum of the IPv4 pseudo-header (RFC 768, RFC 9293): the addresses as in
 * the packet (network order), zero, proto, the L4 length (host order).
 * Native words: an address is two of them, and the bytes {0, proto} and
 * the big-endian length load as htons() of the number. */
static inline uint64_t hpccd_csum_pseudo4(uint32_t saddr_be, uint32_t daddr_be, uint8_t proto,
					  uint16_t l4_len)
{
	return (uint64_t)saddr_be + daddr_be + htons(proto) + htons(l4_len);
}

/* 64-bit accumulator to 16 bits with end-around carry, in memory order. */
static inline uint16_t hpccd_csum_fold64(uint64_t s)
{
	s = (s & 0xffffffffu) + (s >> 32);
	s = (s & 0xffffffffu) + (s >> 32);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (uint16_t)s;
}

/* Writes the checksum of a complete sum (every word covered, the field
 * itself at 0) into field: ~fold(sum), as it lies in memory; with udp set
 * a computed 0 is sent as all ones (RFC 768: 0 means "no checksum"). */
static inline void hpccd_csum_store(void *field, uint64_t sum, int udp)
{
	uint16_t c = (uint16_t)~hpccd_csum_fold64(sum);

	if (udp && c == 0)
		c = 0xffff;
	memcpy(field, &c, 2);
}

/* CHECKSUM_PARTIAL, the native-word twin of parse.h's hpccd__csum_is_partial
 * (the BPF programs' rule): a field left for checksum offload holds exactly
 * the folded pseudo-header sum `pseudo` (hpccd_csum_pseudo4), not inverted.
 * The engine writes such a field when it offloads its checksum and takes one
 * unchecked on receipt (docs/transport.md "Checksum offload"). */
static inline void hpccd_csum_store_partial(void *field, uint64_t pseudo)
{
	uint16_t c = hpccd_csum_fold64(pseudo);

	memcpy(field, &c, 2);
}

static inline int hpccd_csum_is_partial(const void *field, uint64_t pseudo)
{
	uint16_t c;

	memcpy(&c, field, 2);
	return c == hpccd_csum_fold64(pseudo);
}

#endif /* HPCCD_CSUM_H */
