/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Structures and constants shared by the BPF programs of ebpf/ and their
 * userspace (the libbpf loader, the daemon, the cffi cdef): map keys and
 * values, counter layouts and counter indices, configuration bits.
 *
 * Who may include this: the BPF programs (after vmlinux.h), C userspace
 * (after nothing: it pulls linux/types.h), and the cffi cdef (with
 * HPCCD_CFFI_CDEF defined, where the __u and __be types are typedefs).
 * Fixed-width types only, every struct padded explicitly so that its
 * layout is the same on both sides; no maps (those are kernel-only, in
 * hpccd_maps.bpf.h) and no functions.
 *
 * Byte order: fields named *_be or typed __be* hold network order, exactly
 * as in the packet; everything else is host order.  Map keys that name a
 * flow are in network order so that BPF copies them from the packet
 * without swapping and userspace builds them with inet_aton()/htons().
 */
#ifndef HPCCD_KERN_USER_H
#define HPCCD_KERN_USER_H

#if !defined(HPCCD_CFFI_CDEF) && !defined(__bpf__)
#include <linux/types.h>
#endif

#include "hpccd/wire.h"      /* HPCCD_E_MAX, struct hpccd_int_hop_wire */

/* ---- flow key --------------------------------------------------------- */

/* An IPv4 5-tuple as the LOCAL SENDER of the flow sees it: saddr is this
 * host, sport its port.  The tc tracker sees egress segments in this
 * orientation; the XDP program reverses the addresses of an incoming
 * PROBE_RESP to get the same key, so that userspace joins the tracker and
 * the telemetry map on one key.  Same layout as struct hpccd_tag_input of
 * wire.h (the tag prefix of the same flow), network byte order. */
struct hpccd_flow_key {
	__be32 saddr;
	__be32 daddr;
	__be16 sport;
	__be16 dport;
	__u8 proto;         /* IPPROTO_TCP (6) or IPPROTO_UDP (17) */
	__u8 pad[3];        /* zero: hashed as part of the key */
};

/* ---- tc tracker: one entry per kernel TCP flow this host sends on ------- */

/* Value of the LRU hash hpccd_tcp_flows (key: struct hpccd_flow_key).
 * Written by tc_tracker.bpf.c on egress; read in batches by the daemon,
 * which decides from it which TCP flows have data in flight and probes
 * those ([HPCC++2022] section 6.2.1: probes only while data is in flight). */
struct hpccd_tcp_flow {
	__u64 bytes;        /* TCP payload bytes sent, retransmissions included */
	__u64 retx_bytes;   /* of which below snd_nxt: retransmitted */
	__u64 packets;      /* segments on the wire (a GSO packet counts gso_segs) */
	__u64 first_ns;     /* bpf_ktime_get_ns() (CLOCK_MONOTONIC) at creation */
	__u64 last_ns;      /* CLOCK_MONOTONIC of the last segment with payload,
			     * SYN, FIN or RST (not of pure ACKs) */
	__u32 snd_nxt;      /* highest seq + payload (+1 for SYN, +1 for FIN) seen,
			     * host order, compared in TCP sequence arithmetic */
	__u8 tcp_flags;     /* OR of the TCP flag bytes seen (FIN 0x01, SYN 0x02,
			     * RST 0x04 ...): tells the daemon the flow ended */
	__u8 pad[3];
};

/* ---- XDP: telemetry of TCP-side flows, from PROBE_RESP ----------------- */

/* Value of the hash hpccd_telem (key: struct hpccd_flow_key, the
 * probed flow as this host, its sender, sees it).  The XDP program writes
 * the whole value from each PROBE_RESP whose tag verified, in one
 * bpf_map_update_elem, so a reader never sees half of two responses; the
 * daemon reads it in batches and tells a new response from an old one by
 * `responses` (or probe_seq). */
struct hpccd_tcp_telem {
	struct hpccd_int_hop_wire hops[HPCCD_INT_MAX_HOPS];
	                    /* raw hop words as in the packet (network order);
			     * only the first nhop are meaningful, rest zero */
	__u64 rx_ns;        /* bpf_ktime_get_ns() at reception (CLOCK_MONOTONIC) */
	__u64 probe_seq;    /* probe number (hpccd header seq), host order */
	__u64 responses;    /* responses stored for this key so far */
	__u32 ts_echo;      /* the PROBE's ts echoed back, host order: RTT sample */
	__u32 flow_id;      /* hpccd header flow_id, host order */
	__u16 path_id;      /* 12-bit pathID, host order */
	__u8 nhop;          /* hop records written by switches */
	__u8 room;          /* hop records the prober reserved */
	__u8 int_flags;     /* INT flags nibble (HPCCD_INT_F_OVERFLOW ...) */
	__u8 pad[3];
};

/* Record of the ring buffer hpccd_telem_rb (xdp_host.bpf.c): every TCP-side
 * PROBE_RESP stored in hpccd_telem is also handed to the daemon's probe
 * engine with its key, so that the engine sleeps until a response arrives
 * instead of polling the map (docs/tcp-side.md, "The probe engine"). */
struct hpccd_tcp_resp {
	struct hpccd_flow_key key;
	struct hpccd_tcp_telem t;
};

/* Record of the ring buffer hpccd_tcp_wake (tc_tracker.bpf.c): a segment
 * with payload left for a flow the probe engine had parked (no data in
 * flight, no probe outstanding), or for a flow whose entry this segment
 * created.  One record per park: the tracker deletes the flow's
 * hpccd_tcp_park entry and writes the record only if the delete was its. */
struct hpccd_tcp_wake {
	struct hpccd_flow_key key;
	__u64 ns;           /* bpf_ktime_get_ns() when the segment left */
	__u32 snd_nxt;      /* the tracker's snd_nxt after that segment, host order */
	__u32 pad;
};

/* ---- tag key ------------------------------------------------------------ */

/* Value of the one-entry array hpccd_tag_key: the 128-bit SipHash-2-4 key
 * of the integrity tag (docs/wire-format.md "Integrity tag"), bytes as in
 * the configuration, k0 = bytes 0..7 and k1 = bytes 8..15 read little-
 * endian (the SipHash reference convention).  An all-zero key means "not
 * configured": the XDP program then neither answers probes nor accepts
 * responses (counted), rather than signing with a key everybody knows. */
struct hpccd_tag_key {
	__u8 key[16];
};

/* ---- local addresses ----------------------------------------------------- */

/* Value of the hash hpccd_addrs (key: __be32 IPv4 address of this
 * host).  Only packets to one of these are answered, consumed or steered
 * by the XDP program; others (being forwarded through this host, seen in
 * promiscuous mode) pass to the kernel.  The value is unused but for a
 * future per-address flag: userspace writes 1. */
struct hpccd_local_addr {
	__u32 flags;
};

/* ---- load-time configuration (rodata) ----------------------------------- */

/* Bits of the xdp_host rodata `hpccd_cfg_flags`. */
#define HPCCD_CFG_REFLECT_PROBES  0x1  /* answer PROBEs in XDP (UDP and TCP-side);
					* without it UDP PROBEs go to the AF_XDP
					* socket and TCP-side PROBEs are dropped */
#define HPCCD_CFG_TCP_SIDE        0x2  /* recognise TCP-side probes/responses;
					* without it they pass to the kernel */
#define HPCCD_CFG_DEFAULT         (HPCCD_CFG_REFLECT_PROBES | HPCCD_CFG_TCP_SIDE)

/* Size of the XSKMAP hpccd_xsks (ebpf/hpccd_maps.bpf.h): rx queues of one
 * interface that can have an AF_XDP socket; the configuration refuses a
 * queue beyond it. */
#ifndef HPCCD_XSKS_MAX
#define HPCCD_XSKS_MAX 64
#endif

/* PROBEs answered per source address (xdp_host.bpf.c (c)): a host that
 * answers any source could be made to reflect traffic at a spoofed victim,
 * so each source gets a token bucket (GCRA: one theoretical arrival time
 * per source in an LRU map): `rate` probes per second, bursts of `burst`;
 * the excess is dropped and counted (HPCCD_XDP_DROP_PROBE_RATE).  A sender
 * probes once per RTT per flow ([HPCC++2022] section 6.2.1): 100,000 per
 * second is 10 flows at a 100 us RTT.  rate 0: no limit. */
#define HPCCD_PROBE_RATE_DEFAULT  100000
#define HPCCD_PROBE_BURST_DEFAULT 256

/* ---- counters ----------------------------------------------------------- */

/* One slot of a per-CPU counter array; userspace sums the CPUs. */
struct hpccd_counter {
	__u64 packets;
	__u64 bytes;        /* frame bytes (XDP: data_end - data; tc: skb->len) */
};

/* Slots of hpccd_xdp_cnt: one per verdict and per drop cause of
 * xdp_host.bpf.c.  Every frame is counted in exactly one slot. */
enum hpccd_xdp_counter {
	/* XDP_PASS, untouched: not hpccd's */
	HPCCD_XDP_PASS_NOT_IPV4 = 0,    /* not IPv4 over Ethernet (ARP, IPv6 ...) */
	HPCCD_XDP_PASS_BAD_HDR,         /* IPv4/UDP/TCP header truncated or invalid,
					 * or an IPv4 fragment other than the first */
	HPCCD_XDP_PASS_OTHER,           /* IPv4 but not hpccd: other protocols and
					 * ports, TCP that is not a TCP-side probe */
	/* XDP_PASS of hpccd packets */
	HPCCD_XDP_PASS_NOT_LOCAL,       /* well formed, not addressed to this host */
	HPCCD_XDP_PASS_NO_XSK,          /* for the AF_XDP socket, none bound to the
					 * rx queue: fallback to the stack */
	/* XDP_DROP: malformed hpccd packets, one slot per enum hpccd_wire_err:
	 * slot HPCCD_XDP_DROP_MALFORMED + e for e in 1..10 (slot + 0 unused) */
	HPCCD_XDP_DROP_MALFORMED,
	HPCCD_XDP_DROP_MALFORMED_LAST = HPCCD_XDP_DROP_MALFORMED + HPCCD_E_MAX - 1,
	/* XDP_DROP: well formed but unusable */
	HPCCD_XDP_DROP_TAG_SLOT,        /* PROBE, or TCP-side PROBE_RESP, whose len
					 * is not the 8-byte tag (slot) */
	HPCCD_XDP_DROP_NO_KEY,          /* tag key not configured (all zero) */
	HPCCD_XDP_DROP_TCP_TYPE,        /* TCP-side packet neither PROBE nor PROBE_RESP */
	HPCCD_XDP_DROP_TCP_PROBE_OFF,   /* TCP-side PROBE, reflection disabled */
	HPCCD_XDP_DROP_TCP_RESP_TAG,    /* TCP-side PROBE_RESP, tag did not verify */
	HPCCD_XDP_DROP_TCP_RESP_FULL,   /* TCP-side PROBE_RESP, telemetry map full */
	HPCCD_XDP_DROP_PROBE_RATE,      /* PROBE over its source's rate (not answered) */
	/* verdicts of the hpccd path */
	HPCCD_XDP_TX_PROBE_RESP_UDP,    /* native PROBE answered in place, XDP_TX */
	HPCCD_XDP_TX_PROBE_RESP_TCP,    /* TCP-side PROBE answered in place, XDP_TX */
	HPCCD_XDP_TCP_RESP_STORED,      /* TCP-side PROBE_RESP stored in hpccd_telem,
					 * then XDP_DROP (the TCP stack must not see it) */
	HPCCD_XDP_REDIRECT_XSK,         /* redirected to the AF_XDP socket */
	HPCCD_XDP_COUNTERS,             /* number of slots */
};

/* Slots of hpccd_tc_cnt (tc_tracker.bpf.c, egress).  Every packet
 * is counted in exactly one slot; the verdict is always TC_ACT_OK. */
enum hpccd_tc_counter {
	HPCCD_TC_NOT_TCP = 0,           /* not IPv4 TCP, or an IPv4 fragment */
	HPCCD_TC_TRUNC,                 /* headers not in the linear data even after
					 * bpf_skb_pull_data: not tracked */
	HPCCD_TC_PROBE,                 /* hpccd's own TCP-side probe: not counted */
	HPCCD_TC_PURE_ACK,              /* no payload, no SYN/FIN/RST: not tracked */
	HPCCD_TC_NEW_FLOW,              /* tracked, and created the flow's entry */
	HPCCD_TC_TRACKED,               /* tracked in an existing entry */
	HPCCD_TC_UNTRACKED_END,         /* FIN/RST of a flow with no entry: ignored */
	HPCCD_TC_MAP_FAIL,              /* entry could not be created */
	HPCCD_TC_COUNTERS,              /* number of slots */
};

#ifndef HPCCD_CFFI_CDEF
_Static_assert(sizeof(struct hpccd_flow_key) == 16, "flow key is 16 bytes, no holes");
_Static_assert(sizeof(struct hpccd_tcp_flow) == 48, "tracker entry layout");
_Static_assert(sizeof(struct hpccd_tcp_telem) ==
		       HPCCD_INT_MAX_HOPS * HPCCD_INT_HOP_BYTES + 40,
	       "telemetry entry layout");
_Static_assert(sizeof(struct hpccd_tcp_resp) == sizeof(struct hpccd_tcp_telem) + 16,
	       "telemetry record layout");
_Static_assert(sizeof(struct hpccd_tcp_wake) == 32, "wake record layout");
_Static_assert(sizeof(struct hpccd_tag_key) == 16, "SipHash key is 128 bits");
_Static_assert(sizeof(struct hpccd_counter) == 16, "counter slot layout");
#endif

/* ==== software INT switch (int_switch.bpf.c) ============================= */
/* Everything of the switch is in this section; hpccd_maps.bpf.h has its
 * maps under HPCCD_MAPS_SWITCH. */

/* Port numbers are 1..HPCCD_SW_PORTS_MAX-1 (docs/topology.md numbers a
 * switch's ports from 1); counter slot group 0 counts packets on
 * interfaces without a configuration. */
#define HPCCD_SW_PORTS_MAX        64

/* Bits of struct hpccd_sw_port.flags. */
#define HPCCD_SW_F_INT            0x01  /* stamp INT into hpccd packets and TCP-side probes */
#define HPCCD_SW_F_ECN            0x02  /* WRED/ECN marking of ECN-capable packets */
#define HPCCD_SW_F_FS_HPCCD       0x04  /* fast-start class: hpccd native (UDP, hpccd port) */
#define HPCCD_SW_F_FS_DSCP        0x08  /* fast-start class: DSCP == fs_dscp */
#define HPCCD_SW_F_FS_ALL         0x10  /* fast-start class: every IPv4 packet */
#define HPCCD_SW_F_SAMPLE         0x20  /* queue samples of this port into hpccd_sw_qsamp */
#define HPCCD_SW_F_RX_BYTES       0x40  /* experiment only: the hop's txBytes field carries
					 * the bytes that ARRIVED at the queue, so senders
					 * compute rxRate where Algorithm 1 wants txRate
					 * ([HPCC] section 3.4, Figure 6: HPCC-rxRate) */
#define HPCCD_SW_F_DEPART         0x80  /* the record is rewritten with the port's state
					 * when the packet leaves the queue ([HPCC]
					 * section 4.1): tracepoint qdisc_dequeue +
					 * tc ingress of the link's far end (int_sw_depart) */
#define HPCCD_SW_F_DEPART_XDP     0x100 /* with DEPART, on a port whose far end is a host:
					 * the departure state is also kept by hop word
					 * (hpccd_sw_depw), for the lab's hook in the
					 * host's xdp_host (int_sw_dep_xdp), which takes
					 * hpccd packets before tc ingress sees them */
#define HPCCD_SW_F_FS_MASK        (HPCCD_SW_F_FS_HPCCD | HPCCD_SW_F_FS_DSCP | HPCCD_SW_F_FS_ALL)

/* Value of the hash hpccd_sw_ports (key: __u32 ifindex of the port, in the
 * switch's namespace).  Written by the lab builder, read per packet.
 * WRED/ECN model of [LDCP] section 2.1 on the instantaneous queue q:
 * q < kmin no mark, kmin <= q < kmax mark with probability
 * (q - kmin) / (kmax - kmin) x pmax, q >= kmax mark; kmin = kmax = K is
 * DCTCP's threshold marking.  ECN-incapable packets of the fast-start class
 * are dropped when q >= fast_start_k_bytes ([LDCP] section 2.3). */
struct hpccd_sw_port {
	__u64 buffer_bytes;       /* the port's bfifo limit (buf_max), for the
				   * buffer-drop estimate; 0: not checked */
	__u32 kmin_bytes;
	__u32 kmax_bytes;
	__u32 pmax_u32;           /* P_max x 2^32, P_max = 1 as 0xffffffff */
	__u32 fast_start_k_bytes; /* K of LDCP's first-RTT drop */
	__u32 flags;              /* HPCCD_SW_F_* */
	__u16 port;               /* port number, 1..HPCCD_SW_PORTS_MAX-1 */
	__u16 switch_id;          /* 12-bit switch id, XORed into pathID */
	__u8 speed_code;          /* B of the hop record (int_hop.h, wire-format.md) */
	__u8 fs_dscp;             /* DSCP of the fast-start class (HPCCD_SW_F_FS_DSCP) */
	__u8 pad[6];
};

/* Slots of hpccd_sw_cnt: slot port * HPCCD_SW_COUNTERS + c, per CPU.
 * packets counts segments (gso_segs), bytes qdisc_pkt_len (wire_len), as
 * the qdisc's own counters do.  Every packet is in exactly one VERDICT slot
 * and in any number of EVENT slots. */
enum hpccd_sw_counter {
	/* verdicts */
	HPCCD_SW_FORWARDED = 0,         /* TC_ACT_OK: handed to the port's queue */
	HPCCD_SW_DROP_FAST_START,       /* TC_ACT_SHOT: ECN-incapable, fast-start
					 * class, q >= fast_start_k_bytes */
	/* events */
	HPCCD_SW_NOT_IPV4,              /* not IPv4 (ARP, IPv6 ...): untouched */
	HPCCD_SW_TRUNC,                 /* headers not linear even after a pull */
	HPCCD_SW_INT_STAMPED,           /* hop record written */
	HPCCD_SW_INT_FULL,              /* nHop == room: OVERFLOW set, passed */
	HPCCD_SW_INT_NO_COLLECT,        /* hpccd packet without COLLECT: untouched */
	HPCCD_SW_INT_MALFORMED,         /* hpccd port/probe marks, fails the parser:
					 * untouched (the host drops it) */
	HPCCD_SW_INT_GSO,               /* GSO hpccd packet: not stamped */
	HPCCD_SW_NO_QSTATS,             /* stamped with B = 0: the qdisc keeps
					 * per-CPU stats that cannot be read */
	HPCCD_SW_ECN_MARKED,            /* mark decision: CE set (or already CE) */
	HPCCD_SW_BUFFER_DROP_SEEN,      /* q + packet > buffer_bytes: the bfifo will
					 * drop it (estimate; the qdisc's drop
					 * counter is authoritative) */
	HPCCD_SW_SAMPLED,               /* queue samples emitted (bytes 0) */
	HPCCD_SW_SAMPLE_LOST,           /* queue samples lost: ring buffer full */
	/* departure (HPCCD_SW_F_DEPART), counted at the link's far end */
	HPCCD_SW_INT_DEPARTED,          /* record rewritten with the departure state */
	HPCCD_SW_INT_DEP_NO_DEQ,        /* reached the far end without a dequeue
					 * seen: the enqueue record stays */
	HPCCD_SW_INT_DEP_MISMATCH,      /* the record at its index is not the one
					 * written at enqueue: a stale entry of a
					 * packet that never left, its sk_buff
					 * reused; left alone */
	HPCCD_SW_COUNTERS,              /* slots per port */
};

/* hpccd_sw_sample.flags */
#define HPCCD_SW_SAMPLE_F_NO_QSTATS 0x1 /* per-CPU qdisc stats: values are 0 */

/* One record of the ring buffer hpccd_sw_qsamp: the port's root qdisc as a
 * packet arriving at time ts_ns found it (at most one record per port per
 * sample interval, rodata hpccd_cfg_sample_ns). */
struct hpccd_sw_sample {
	__u64 ts_ns;              /* bpf_ktime_get_ns() (CLOCK_MONOTONIC) */
	__u64 tx_bytes;           /* qdisc bstats.bytes: bytes dequeued so far */
	__u64 tx_packets;         /* qdisc bstats.packets */
	__u32 backlog_bytes;      /* qdisc qstats.backlog, the arriving packet excluded */
	__u32 qlen;               /* packets in the queue */
	__u32 drops;              /* qdisc qstats.drops (buffer-limit drops) */
	__u32 ifindex;
	__u16 port;
	__u16 flags;              /* HPCCD_SW_SAMPLE_F_* */
	__u32 pad;
};

/* Value of the LRU hash hpccd_sw_dep, keyed by the kernel address of the
 * packet's sk_buff (__u64): a hop record written at enqueue, waiting for
 * the packet's departure.  tc egress (int_switch: hpccd_int_sw) creates it,
 * the tracepoint qdisc_dequeue (hpccd_int_deq) fills in the port's state
 * at the dequeue, the tc ingress program of the link's far end
 * (int_sw_depart) rewrites the record with it and deletes the entry. */
struct hpccd_sw_dep {
	__u64 hop;                /* the hop word written at enqueue, host order */
	__u64 deq_ns;             /* bpf_ktime_get_ns() at the dequeue; 0: not seen */
	__u64 tx_bytes;           /* root qdisc bstats.bytes just after the dequeue:
				   * bytes sent, this packet included */
	__u32 backlog;            /* root qdisc backlog just after the dequeue: the
				   * bytes the packet leaves behind */
	__u32 ifindex;            /* the egress port, in the switch's namespace */
	__u16 port;               /* its port number (counter slots) */
	__u8 idx;                 /* index of the record among the hops */
	__u8 flags;               /* HPCCD_SW_DEP_F_* */
	__u8 pad[4];
};

/* hpccd_sw_dep.flags */
#define HPCCD_SW_DEP_F_WORD 0x1   /* the port has HPCCD_SW_F_DEPART_XDP: the
				   * dequeue also files the entry in hpccd_sw_depw */

/* Slots of xdp_host's prog array hpccd_lab_hook (the lab's hook, empty
 * without the lab): the lab's program, and xdp_host itself to go back to. */
#define HPCCD_LAB_HOOK_PROG  0
#define HPCCD_LAB_HOOK_BACK  1
#define HPCCD_LAB_HOOK_SLOTS 2

/* Key of the LRU hash hpccd_sw_depw (value: struct hpccd_sw_dep): the
 * departures of the records on a port whose far end is a host, by the hop
 * word written at enqueue and the port's number.  The host's XDP program
 * sees an xdp_buff, not the sk_buff (in native mode there may be none),
 * so the record itself is the key: the tracepoint qdisc_dequeue files the
 * entry, the lab's program in the hook of the host's xdp_host
 * (ebpf/int_depart_xdp.bpf.c) finds it from the packet's last record. */
struct hpccd_sw_depw_key {
	__u64 hop;                /* the hop word written at enqueue, host order */
	__u32 port;               /* the switch port's number */
	__u32 pad;
};

/* Value of hpccd_sw_depw: the departure, and the key of the same packet's
 * entry in hpccd_sw_dep (its sk_buff's address), which the lab's program
 * deletes once it has rewritten the record: XDP took the packet, tc
 * ingress will not consume that entry, and a later packet given the same
 * address (generic XDP may copy a packet into a new sk_buff) must not meet
 * it there. */
struct hpccd_sw_depw_val {
	struct hpccd_sw_dep dep;
	__u64 skb;                /* hpccd_sw_dep key of this packet */
};

#ifndef HPCCD_CFFI_CDEF
_Static_assert(sizeof(struct hpccd_sw_dep) == 40, "departure entry layout");
_Static_assert(sizeof(struct hpccd_sw_depw_key) == 16, "departure-by-word key layout");
_Static_assert(sizeof(struct hpccd_sw_depw_val) == 48, "departure-by-word value layout");
_Static_assert(sizeof(struct hpccd_sw_port) == 40, "switch port config layout");
_Static_assert(sizeof(struct hpccd_sw_sample) == 48, "queue sample layout");
#endif

/* ==== the kernel pacer's lateness (tcp_pacer.bpf.c) ===================== */

/* How late TCP's pacing timer fires: a histogram of buckets this wide, the
 * last one holding everything later (127 us and over), a power of two. */
#define HPCCD_PACER_BUCKET_NS 1000
#define HPCCD_PACER_BUCKETS   128

/* Value of hpccd_pacer_late (per CPU, one entry): expiries of a timer whose
 * callback is tcp_pace_kick, by lateness. */
struct hpccd_pacer_hist {
	__u64 n;                  /* expiries seen */
	__u64 sum_ns;             /* their lateness summed */
	__u64 bucket[HPCCD_PACER_BUCKETS];
};

#ifndef HPCCD_CFFI_CDEF
_Static_assert(sizeof(struct hpccd_pacer_hist) == 16 + 8 * 128, "pacer histogram layout");
#endif

#endif /* HPCCD_KERN_USER_H */
