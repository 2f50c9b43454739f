/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * hpccd INT hop record: the 8-byte per-switch record of the HPCC INT
 * padding ([HPCC] section 4.1, Figure 7), shared by the BPF programs,
 * the C fast path and (through its constants) the cffi cdef.
 *
 * Who may include this: everyone (BPF, C fast path, cffi).  It uses only
 * fixed-width types and defines no maps and no functions that need libc.
 *
 * Wire layout of one hop: a 64-bit big-endian word, most significant bit
 * first (docs/wire-format.md draws it):
 *
 *    63      59 58                      35 34              15 14            0
 *   +----------+--------------------------+------------------+---------------+
 *   | B (5)    | TS (24, ns)              | txBytes (20)     | qLen (15)     |
 *   +----------+--------------------------+------------------+---------------+
 *
 *   B        port speed code, see HPCCD_SPEED_* below; 0 = unknown (the hop
 *            is ignored by the algorithm and counted).
 *   TS       the time the packet left the egress queue, in nanoseconds,
 *            modulo 2^24 (wraps every 16.78 ms).
 *   txBytes  bytes transmitted by the egress port, this packet included, in
 *            128-byte units, modulo 2^20 (wraps every 128 MiB).
 *   qLen     egress queue length when the packet left it (the bytes behind
 *            it), in 80-byte units.  A gauge, not a counter: switches
 *            saturate it at HPCCD_INT_QLEN_MAX instead of wrapping.
 *
 *   All three are the port's state "when the packet is emitted" ([HPCC]
 *   section 4.1); docs/switch.md and docs/lab.md say how each switch takes
 *   them.
 *
 * The paper's reference simulator used a 3-bit speed enum of 25/50/100/200/
 * 400 Gbit/s only; lab links run at 100 Mbit/s .. 10 Gbit/s, so B here is a
 * 5-bit code over a table that represents every common port speed from
 * 10 Mbit/s to 1.6 Tbit/s exactly.  The bits for it come from qLen (15
 * instead of 17 bits: 2.6 MB before saturation, i.e. > 16 BDP at 100 Gbit/s
 * and T = 13 us, which is already "U far above eta").
 *
 * The word is carried as two big-endian 32-bit halves so that the record
 * needs only 4-byte alignment inside a packet.
 */
#ifndef HPCCD_INT_HOP_H
#define HPCCD_INT_HOP_H

/* Types: the kernel's fixed-width __u* and big-endian __be* names, so the
 * same text compiles in BPF (after vmlinux.h), in C (linux/types.h) and in
 * the cffi cdef (typedefs in cffi_build/build_cc.py). */
#if !defined(HPCCD_CFFI_CDEF) && !defined(__bpf__)
#include <linux/types.h>
#endif

#define HPCCD_INT_HOP_BYTES      8
#define HPCCD_INT_MAX_HOPS       8   /* largest room a sender may reserve */
#define HPCCD_INT_DEFAULT_HOPS   5   /* [HPCC] section 4.1: "no more than 5 hops" */

#define HPCCD_INT_SPEED_BITS     5
#define HPCCD_INT_TS_BITS        24
#define HPCCD_INT_TX_BITS        20
#define HPCCD_INT_QLEN_BITS      15

#define HPCCD_INT_SPEED_SHIFT    59
#define HPCCD_INT_TS_SHIFT       35
#define HPCCD_INT_TX_SHIFT       15
#define HPCCD_INT_QLEN_SHIFT     0

#define HPCCD_INT_TS_MASK        0xffffffULL      /* 2^24 - 1 */
#define HPCCD_INT_TX_MASK        0xfffffULL       /* 2^20 - 1 */
#define HPCCD_INT_QLEN_MAX       0x7fffULL        /* 2^15 - 1, saturating */
#define HPCCD_INT_SPEED_MASK     0x1fULL

#define HPCCD_INT_TX_UNIT        128   /* [HPCC] section 4.1: txBytes in 128 B */
#define HPCCD_INT_QLEN_UNIT      80    /* [HPCC] section 4.1: qLen in 80 B */

/* The least time between two records of a hop that the daemon's hop
 * utilisation (its metrics; not HPCC's U, which filters over T per ACK) is
 * taken over.  Two probes can be stamped microseconds apart and a shaped
 * port hands its queue to the link in bursts, so the bytes sent between two
 * close records are the burst's, not the link's rate (1.55 x the line rate
 * once in CI); over 1 ms the burst is a small part of what a 1 Gbit/s port
 * sends.  Kept below half a ts wrap (8.4 ms) for the modular difference. */
#define HPCCD_INT_UTIL_SPAN_NS   1000000

/* Speed codes (B).  Values are in Mbit/s; the table itself lives in
 * fastpath/cc/int_decode.c (hpccd_int_speed_mbps) and is mirrored by the
 * scapy layer and the P4 program, all checked against tests/vectors. */
#define HPCCD_SPEED_UNKNOWN      0
#define HPCCD_SPEED_CODES        32

/* One hop as it sits in the packet (network byte order). */
struct hpccd_int_hop_wire {
	__be32 hi_be;     /* bits 63..32 of the hop word */
	__be32 lo_be;     /* bits 31..0 */
};

/* One hop decoded into host units, with the narrow counters unwrapped
 * into 64-bit monotonic values relative to the previous record of the
 * same flow.  This is also the record type of the replay trace format. */
struct hpccd_int_rec {
	__u64 ts_ns;
	__u64 tx_bytes;
	__u64 qlen_bytes;
	__u64 bw_bps;
};

#ifndef HPCCD_CFFI_CDEF
_Static_assert(sizeof(struct hpccd_int_hop_wire) == HPCCD_INT_HOP_BYTES,
	       "INT hop record is 8 bytes on the wire ([HPCC] section 4.1)");
_Static_assert(HPCCD_INT_SPEED_BITS + HPCCD_INT_TS_BITS + HPCCD_INT_TX_BITS +
		       HPCCD_INT_QLEN_BITS == 64,
	       "INT hop fields fill exactly 64 bits");
#endif

#endif /* HPCCD_INT_HOP_H */
