// SPDX-License-Identifier: BSD-2-Clause
/*
 * INT hop record: pack/unpack of the 8-byte wire word and the port-speed
 * table (include/hpccd/int_hop.h has the layout and the reasons for it).
 */
#include <errno.h>
#include <arpa/inet.h>

#include "hpccd/cc.h"

/* Port speed codes (B), Mbit/s.  Code 0 is "unknown".  Every common
 * Ethernet speed from 10 Mbit/s to 1.6 Tbit/s and the rates the lab's
 * shapers use are exact; the scapy layer (hpccd.core.wire) and the P4 program
 * carry the same table and tests/vectors checks all of them. */
static const uint32_t speed_mbps[HPCCD_SPEED_CODES] = {
	0,       10,      20,      25,      40,      50,      100,     200,
	250,     300,     400,     500,     600,     800,     1000,    1500,
	2000,    2500,    3000,    4000,    5000,    8000,    10000,   20000,
	25000,   40000,   50000,   100000,  200000,  400000,  800000,  1600000,
};

uint32_t hpccd_int_speed_mbps(uint32_t code)
{
	return code < HPCCD_SPEED_CODES ? speed_mbps[code] : 0;
}

uint32_t hpccd_int_speed_code(uint64_t bps)
{
	uint32_t c;

	if (bps % 1000000ULL)
		return HPCCD_SPEED_UNKNOWN;
	for (c = 1; c < HPCCD_SPEED_CODES; c++)
		if ((uint64_t)speed_mbps[c] * 1000000ULL == bps)
			return c;
	return HPCCD_SPEED_UNKNOWN;
}

/* Byte order: the hop word is big-endian on the wire (network order),
 * split into two 32-bit halves; ntohl() each half, then shift. */
void hpccd_int_hop_unpack(const struct hpccd_int_hop_wire *w,
			  struct hpccd_int_fields *f)
{
	uint64_t v = ((uint64_t)ntohl(w->hi_be) << 32) | ntohl(w->lo_be);

	f->speed_code = (uint32_t)((v >> HPCCD_INT_SPEED_SHIFT) & HPCCD_INT_SPEED_MASK);
	f->ts = (uint32_t)((v >> HPCCD_INT_TS_SHIFT) & HPCCD_INT_TS_MASK);
	f->tx_units = (uint32_t)((v >> HPCCD_INT_TX_SHIFT) & HPCCD_INT_TX_MASK);
	f->qlen_units = (uint32_t)((v >> HPCCD_INT_QLEN_SHIFT) & HPCCD_INT_QLEN_MAX);
}

int hpccd_int_hop_pack(const struct hpccd_int_fields *f,
		       struct hpccd_int_hop_wire *w)
{
	uint64_t v;

	if (f->speed_code > HPCCD_INT_SPEED_MASK || f->ts > HPCCD_INT_TS_MASK ||
	    f->tx_units > HPCCD_INT_TX_MASK || f->qlen_units > HPCCD_INT_QLEN_MAX)
		return -ERANGE;
	v = ((uint64_t)f->speed_code << HPCCD_INT_SPEED_SHIFT) |
	    ((uint64_t)f->ts << HPCCD_INT_TS_SHIFT) |
	    ((uint64_t)f->tx_units << HPCCD_INT_TX_SHIFT) |
	    ((uint64_t)f->qlen_units << HPCCD_INT_QLEN_SHIFT);
	w->hi_be = htonl((uint32_t)(v >> 32));
	w->lo_be = htonl((uint32_t)v);
	return 0;
}
