// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * The TCP-side PROBE as bytes (include/hpccd/tcp_probe.h,
 * hpccd_tcpp_probe_build; docs/wire-format.md, "TCP-side probe").  The
 * one builder of it: daemon/hpccd/tcp_side.probe_packet calls this, and
 * tests/bpf/test_tcp_cc.py decodes its output with the scapy layers of
 * daemon/hpccd/core/wire.py and the shared parser.
 */
#include <errno.h>
#include <string.h>

#include "hpccd/tcp_probe.h"

static void put16(uint8_t *p, uint16_t v) { p[0] = v >> 8; p[1] = (uint8_t)v; }
static void put32(uint8_t *p, uint32_t v) { put16(p, v >> 16); put16(p + 2, (uint16_t)v); }

static uint32_t sum16(const uint8_t *p, size_t n, uint32_t s)
{
	size_t i;

	for (i = 0; i + 1 < n; i += 2)
		s += (uint32_t)p[i] << 8 | p[i + 1];
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	return s;
}

static uint16_t fold(uint32_t s)
{
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

int hpccd_tcpp_probe_build(uint8_t *buf, size_t len, const uint8_t *key, uint64_t probe_seq,
			   uint32_t flow_id, uint32_t ts, uint8_t dscp, uint8_t ecn,
			   uint8_t room)
{
	/* key: saddr[4] daddr[4] sport[2] dport[2] (network order) proto pad[3] */
	size_t body = 4 + 8 * (size_t)room + 32 + 8, l4 = 20 + body, total = 20 + l4;
	uint8_t *ip = buf, *tcp = buf + 20, *b = buf + 40;
	uint32_t s;

	if (room > 8)
		return -EINVAL;
	if (len < total)
		return -ENOSPC;
	memset(buf, 0, total);
	/* IPv4: no options, DSCP | ECN, DF, TTL 64, TCP; id and checksum 0 */
	ip[0] = 0x45;
	ip[1] = (uint8_t)(dscp << 2 | (ecn & 3));
	put16(ip + 2, (uint16_t)total);
	put16(ip + 6, 0x4000);
	ip[8] = 64;
	ip[9] = 6;
	memcpy(ip + 12, key, 8);
	/* TCP: ports, seq = probe number (low 32 bits), data offset 5, no flag */
	memcpy(tcp, key + 8, 4);
	put32(tcp + 4, (uint32_t)probe_seq);
	tcp[12] = 5 << 4;
	/* INT header: version 1 with the COLLECT bits of byte 0, room, flags */
	b[0] = 0xC0 | 1;
	b[1] = room & 0xF;
	put16(b + 2, 0x8 << 12);
	b += 4 + 8 * (size_t)room;
	/* hpccd header: version 1, type PROBE (4), len 8, flow id, seq, ts */
	b[0] = 1 << 4 | 4;
	put16(b + 2, 8);
	put32(b + 4, flow_id);
	put32(b + 8, (uint32_t)(probe_seq >> 32));
	put32(b + 12, (uint32_t)probe_seq);
	put32(b + 24, ts);
	/* then the 8-byte tag slot, zero */
	s = sum16(ip + 12, 8, 0) + 6 + (uint32_t)l4;          /* pseudo-header */
	s = sum16(tcp, l4, s);
	put16(tcp + 16, fold(s));
	return (int)total;
}
