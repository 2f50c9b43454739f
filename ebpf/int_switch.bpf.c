// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * int_switch: the lab's software INT switch (docs/architecture.md, "The lab and the
 * experiments").  A tc clsact EGRESS program, attached to every
 * port of a switch namespace, does (a)-(e); the hop record it writes is
 * rewritten with the port's state at the packet's departure by two more
 * programs of this object, (f) below:
 *
 *  (a) read the port's queue: the live backlog (bytes, packets), the bytes
 *      and packets it has transmitted and its drops, from the port's root
 *      qdisc (skb->dev->qdisc through bpf_cast_to_kern_ctx, CO-RE reads);
 *  (b) LDCP fast start ([LDCP] section 2.3, Eq. 3): an ECN-incapable
 *      packet of the configured class is dropped (TC_ACT_SHOT) when
 *      q >= K (fast_start_k_bytes);
 *  (c) WRED/ECN ([LDCP] section 2.1) on the instantaneous queue q of an
 *      ECN-capable packet: q < K_min no mark; K_min <= q < K_max mark with
 *      p = (q - K_min) / (K_max - K_min) x P_max; q >= K_max mark.
 *      K_min = K_max = K is DCTCP's threshold marking ([DCTCP] section
 *      3.1).  A mark sets CE (ECT(0) and ECT(1) -> CE) and updates the IPv4
 *      header checksum;
 *  (d) INT (docs/wire-format.md "INT header"): into an hpccd packet (UDP
 *      to or from the hpccd port) and into a TCP-side probe (probe DSCP,
 *      no TCP flag, INT magic), with COLLECT set, write the hop record in
 *      place at index nHop (B = the port's speed code, TS = now mod 2^24
 *      ns, txBytes = transmitted bytes / 128 mod 2^20, qLen = backlog / 80
 *      saturated at 0x7fff), nHop + 1, pathID ^= switch id; a full room
 *      sets OVERFLOW, is counted and passes; the L4 checksum is updated
 *      incrementally (include/hpccd/parse.h, hpccd__stamp_hop);
 *  (e) count (per port, per CPU), and at most once per sample interval
 *      per port put a queue sample (time, port, backlog, tx bytes, drops)
 *      into the ring buffer hpccd_sw_qsamp for the experiment runner;
 *  (f) departure (port flag HPCCD_SW_F_DEPART, the lab's default): the
 *      record written in (d) is remembered by sk_buff address
 *      (hpccd_sw_dep); hpccd_int_deq, on the tracepoint qdisc_dequeue,
 *      adds the port's state when the packet leaves the queue; and
 *      int_sw_depart, on tc INGRESS of the link's far end (the next
 *      node's interface), rewrites the record with it: TS = the dequeue
 *      time, txBytes = the bytes sent with the packet, qLen = the bytes
 *      left queued behind it ([HPCC] section 4.1: the port's state
 *      "when the packet is emitted").  See "Stamping at departure" below.
 *
 * The hop record has no switch-id or port field ([HPCC] section 4.1: B,
 * TS, txBytes, qLen): the switch id goes into pathID only, and the port is
 * implied by the position of the record on the path.  The port number is
 * in the counters and the queue samples.
 *
 * Forwarding is the kernel's: the switch namespace routes (static /32
 * routes, docs/topology.md; TTL decrement, ARP and the choice of port are
 * the kernel's, as the P4 program's ingress table does them) and this
 * program runs on the chosen egress port, in __dev_queue_xmit before the
 * root qdisc's enqueue.  Nothing here redirects: bpf_redirect_neigh() would
 * redo the same route and neighbour lookups for no gain, and a redirect
 * from an egress hook would have to enter the other port's queue anyway.
 *
 * The queue is the port's own root qdisc, a real one: an HTB class at the
 * link rate with a byte-limited bfifo leaf of buffer_bytes
 * (docs/topology.md "Ports"); TBF works alike.  The bfifo drops what does
 * not fit (buffer-limit drops, [LDCP] section 2.1 "q larger than
 * buf_max").
 *
 * Decisions:
 *
 *  - Stamping at departure, in two steps.  [HPCC] section 4.1 records
 *    the egress port "when the packet is emitted": the queue it leaves
 *    behind, the bytes sent so far, the time it leaves.  tc egress runs
 *    before the qdisc's enqueue and is the last point on the sending side
 *    where a BPF program may write the packet: nothing writable runs at
 *    dequeue (this kernel has no BPF qdisc, and a struct_ops qdisc would
 *    replace HTB, the real queue; a tracing program may read but not
 *    write).  What is observable after the queue: the tracepoint
 *    qdisc_dequeue, inside dequeue_skb() with the root qdisc's lock held,
 *    right after the dequeue -- the exact backlog left behind and bytes
 *    sent, read-only; and, writable, the far end's ingress: veth hands the
 *    dequeued sk_buff itself (the same object) to its peer, whose tc
 *    ingress sees it microseconds later (measured in the lab: 4-5 us
 *    median from the dequeue to the receive timestamp on the next node,
 *    tests/integration/test_int_departure.py).  Reading the qdisc there
 *    instead would see the queue some packets later (a dequeue may take up
 *    to 9 at once, and the port keeps sending meanwhile); taking the values
 *    at the dequeue and writing them at the far end gives the dequeue's
 *    own.  So (d) writes the record at enqueue as before (nHop, pathID and
 *    the checksum are settled there, and a packet whose far end runs no
 *    program keeps a valid record of its arrival), and (f) replaces its
 *    four fields when the packet has left.  The far end rewrites only a
 *    record that is still exactly the word written at enqueue, so a stale
 *    entry (its packet dropped by the bfifo, its address reused) changes
 *    nothing.  Marking and fast start stay decisions on the queue the
 *    packet finds on arrival, as a switch's WRED does.
 *  - The last hop into a host that runs xdp_host: its XDP takes hpccd
 *    packets (to AF_XDP, or a PROBE answered with XDP_TX) before tc
 *    ingress, and XDP cannot reach the sk_buff.  On such a port (flag
 *    HPCCD_SW_F_DEPART_XDP, set by the lab when the far end is a host) the
 *    record is also filed by its word and the port at enqueue, the
 *    tracepoint adds the departure to that entry (hpccd_sw_depw), and the
 *    lab's program in xdp_host's hook
 *    (int_depart_xdp.bpf.c) rewrites the record there by the same rules.
 *    A record that program rewrote and XDP then passed to the stack is
 *    recognised here (it is the entry's departure word) and neither
 *    rewritten nor counted again.  Without the hook filled the enqueue
 *    record stays; the counters tell: per port, INT_STAMPED minus
 *    INT_DEPARTED, INT_DEP_NO_DEQ and INT_DEP_MISMATCH are the records no
 *    far end saw (dropped in the queue, or taken by an XDP program whose
 *    hook is empty).
 *  - HPCC-rxRate ports (HPCCD_SW_F_RX_BYTES) keep the enqueue record: their
 *    txBytes field is the bytes that ARRIVED, counted at arrival.
 *  - txBytes is the qdisc's bstats.bytes: for HTB (and TBF) the ROOT
 *    qdisc updates it at DEQUEUE (qdisc_bstats_update in htb_dequeue), so
 *    it counts bytes that really left the queue toward the link, at the
 *    link rate when the queue is busy: exactly the "total bytes sent so
 *    far" of the egress port, [HPCC] section 4.1.  (Bytes are qdisc_pkt_len:
 *    a GSO packet counts the headers of every segment, as on the wire,
 *    without Ethernet FCS, preamble and gap.)  The backlog is
 *    qstats.backlog of the root, which HTB increments at enqueue and
 *    decrements at dequeue: the bytes in the queue now, which is the sum
 *    of its classes' queues (one class per port in the lab).
 *  - Per-CPU qdisc statistics.  A qdisc with TCQ_F_CPUSTATS (lockless ones:
 *    pfifo_fast ...) keeps qlen/backlog/bytes in per-CPU counters
 *    (cpu_qstats/cpu_bstats, non-NULL exactly then) and its shared fields
 *    stay 0.  They cannot be summed here: this kernel's BTF has no
 *    __percpu type tags, so bpf_per_cpu_ptr() refuses the pointers.  HTB
 *    and TBF do not use per-CPU stats.  On such a port the hop is still
 *    written (nHop, pathID: the path stays visible) but with B = 0
 *    ("unknown", docs/wire-format.md: the receiver ignores and counts the
 *    hop) and zero qLen/txBytes, and the packet is counted in
 *    HPCCD_SW_NO_QSTATS; marking and fast start see q = 0.  A noqueue
 *    port (no qdisc: the loopback of BPF_PROG_TEST_RUN) has a real backlog
 *    of 0 and is stamped normally.  An mq root keeps no live stats of its
 *    own (they are summed at dump time), so q and txBytes read 0 there:
 *    switch ports need a single root qdisc (HTB/TBF), as the lab builds.
 *  - q for marking and fast start is the same backlog, without this
 *    packet (what an arriving packet sees: DCTCP's "queue occupancy upon
 *    arrival"; K_min = K_max = 0 therefore marks every ECN-capable packet,
 *    and fast_start_k = 0 drops every ECN-incapable packet of the class).
 *    The probability uses bpf_get_prandom_u32(): mark when
 *    rand < (q - K_min) x pmax_u32 / (K_max - K_min), pmax_u32 = P_max x
 *    2^32 (P_max = 1 stored as 2^32 - 1: a 2^-32 shortfall, only below
 *    K_max).
 *  - A packet that is already CE and reaches a mark decision counts as
 *    marked (HPCCD_SW_ECN_MARKED, the switch's "marking events"); it is
 *    not rewritten.  ECN-incapable packets are never marked, ECN-capable
 *    ones never dropped here.
 *  - Fast-start class (struct hpccd_sw_port.flags): hpccd native packets
 *    (HPCCD_SW_F_FS_HPCCD), packets with DSCP fs_dscp (HPCCD_SW_F_FS_DSCP:
 *    [LDCP]'s "queue exclusively used by LDCP flows"), or every IPv4
 *    packet (HPCCD_SW_F_FS_ALL); none set = fast start off.  A plain
 *    kernel TCP flow without ECN is ECN-incapable: with FS_ALL it would be
 *    dropped at every queue above K, which is why the class is configured.
 *  - Buffer-limit drops are the bfifo's: this program does not drop for
 *    the buffer, it counts what it sees (q + this packet > buffer_bytes:
 *    HPCCD_SW_BUFFER_DROP_SEEN).  That count is an estimate (another CPU
 *    may enqueue or the qdisc dequeue between the read and the enqueue);
 *    the AUTHORITATIVE buffer-drop count is the qdisc's own drop counter
 *    (HTB root qstats.drops, which counts its classes' enqueue drops), which
 *    the status reader gets via netlink and which every queue sample
 *    carries (hpccd_sw_sample.drops).  Likewise the authoritative
 *    transmitted bytes/packets are the qdisc's bstats; this program's
 *    HPCCD_SW_FORWARDED counts what was handed to the queue.
 *  - Checksums: a UDP checksum of zero stays zero, a non-zero one and the
 *    TCP checksum of a probe are updated incrementally, EXCEPT when the
 *    skb is CHECKSUM_PARTIAL (a packet of a local kernel socket, forwarded
 *    over veth with its checksum still to be completed by the "device"):
 *    then the checksum field holds the pseudo-header seed and the final
 *    sum is computed over the bytes as they are when it is completed, so
 *    patching it would break it; the field is left alone.
 *  - GSO: one decision per skb (a super-packet is marked or dropped as a
 *    whole: every segment carries the CE that was set in its header
 *    template); counters count segments (gso_segs) and qdisc_pkt_len bytes
 *    (__sk_buff wire_len), as the qdisc's bstats do.  A GSO hpccd packet
 *    is not stamped (a padding per segment cannot be written into the
 *    super-packet): HPCCD_SW_INT_GSO.
 *  - Headers outside the linear data: an hpccd candidate is made fully
 *    linear (bpf_skb_pull_data, at most one MTU; the length check of the
 *    parser needs the end of the packet) and parsed again; other packets
 *    only as far as IPv4 + L4 headers.  A failed pull: HPCCD_SW_TRUNC,
 *    forwarded untouched.
 *  - Malformed hpccd packets are forwarded untouched and counted
 *    (HPCCD_SW_INT_MALFORMED): a switch does not judge the transport;
 *    the receiving host's XDP drops them.
 *  - The queue sampler samples on packet arrival, at most once per
 *    hpccd_cfg_sample_ns (default 100 us: about 8 full-size packets at 1
 *    Gbit/s, 80 at 10 Gbit/s; fine enough to see a queue build in one RTT
 *    of the lab, coarse enough that one busy port costs 10k records/s,
 *    560 KB/s with the ring's 8-byte headers) per port, guarded by a per-port spin lock (at most one
 *    sample per interval even with several CPUs).  A queue that drains
 *    without arrivals is not sampled until the next arrival (its
 *    drain is then seen in the tx_bytes delta).  A full ring buffer loses
 *    the sample, counted in HPCCD_SW_SAMPLE_LOST.
 *  - Configuration is per port, keyed by ifindex (hpccd_sw_ports).  An
 *    ifindex is unique only within a namespace: load one object per switch
 *    namespace.  Interfaces without configuration forward untouched and
 *    are counted under port 0.
 *
 * Counters (hpccd_sw_cnt): slot port * HPCCD_SW_COUNTERS + c.  Every packet
 * is in exactly one verdict slot (HPCCD_SW_FORWARDED, HPCCD_SW_DROP_FAST_START)
 * and in any number of event slots.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>

#include "hpccd/build.h"   /* and parse.h */

#define HPCCD_MAPS_SWITCH
#include "hpccd_maps.bpf.h"

#define HPCCD_TC_ACT_OK        0        /* linux/pkt_cls.h: vmlinux.h has no macros */
#define HPCCD_TC_ACT_SHOT      2
#define HPCCD_TC_ACT_UNSPEC    (-1)     /* the next filter of the hook runs */
#define HPCCD_CHECKSUM_PARTIAL 3        /* linux/skbuff.h */
/* Ethernet + 802.1Q + IPv4 with options + TCP with options: what a packet
 * that is not an hpccd candidate needs in the linear data. */
#define HPCCD_SW_PULL_HDRS     (14 + 4 + 60 + 60)
/* Longest packet made linear for stamping: an IPv4 packet's most (the
 * transport's multi-buffer packets reach 61,394 bytes; 9,216 left them
 * unstamped); hpccd packets are at most one MTU (the sender never
 * fragments). */
#define HPCCD_SW_PULL_MAX      65535

char LICENSE[] SEC("license") = "Dual BSD/GPL";

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;

/* The port's queue as read at this packet's arrival. */
struct qview {
	__u64 tx_bytes;     /* root qdisc bstats.bytes (dequeued) */
	__u64 tx_packets;
	__u32 backlog;      /* bytes in the queue, this packet not included */
	__u32 qlen;         /* packets in the queue */
	__u32 drops;        /* root qdisc qstats.drops */
	__u32 percpu;       /* 1: the qdisc keeps per-CPU stats, values above are 0 */
};

/* What classify() found. */
struct pkt {
	struct iphdr *iph;  /* NULL: not IPv4 (or a bad IPv4 header) */
	void *l4;           /* UDP or TCP header of an hpccd candidate */
	void *int_pos;      /* first byte after the L4 header (the INT header) */
	void *l4_end;
	int kind;           /* PKT_* */
};

enum {
	PKT_OTHER = 0,      /* IPv4, not hpccd's */
	PKT_HPCCD_UDP,      /* UDP to or from the hpccd port */
	PKT_TCP_PROBE,      /* TCP-side probe or response: DSCP, no flag, INT magic */
	PKT_NOT_IPV4,
	PKT_NOT_LINEAR,     /* headers not in the linear data */
};

static __always_inline void count(__u32 port, __u32 c, __u64 packets, __u64 bytes)
{
	__u32 idx = port * HPCCD_SW_COUNTERS + c;
	struct hpccd_counter *v = bpf_map_lookup_elem(&hpccd_sw_cnt, &idx);

	if (v) {
		v->packets += packets;
		v->bytes += bytes;
	}
}

/* (a) The root qdisc of the egress device: see the header comment for
 * which fields, and why the per-CPU variant is not summed.  The loads go
 * through BTF pointers (CO-RE relocated, fault-safe: a missing qdisc reads
 * as zeros). */
static __always_inline void read_queue(struct __sk_buff *skb, struct qview *qv)
{
	struct sk_buff *kskb = bpf_cast_to_kern_ctx(skb);
	struct net_device *dev = kskb->dev;
	struct Qdisc *q = dev->qdisc;

	if (q->cpu_qstats || q->cpu_bstats) {
		qv->percpu = 1;
		return;
	}
	qv->backlog = q->qstats.backlog;
	qv->qlen = q->q.qlen;
	qv->drops = q->qstats.drops;
	qv->tx_bytes = (__u64)q->bstats.bytes.v.a.a.counter;
	qv->tx_packets = (__u64)q->bstats.packets.v.a.a.counter;
}

static __always_inline int checksum_partial(struct __sk_buff *skb)
{
	struct sk_buff *kskb = bpf_cast_to_kern_ctx(skb);

	return BPF_CORE_READ_BITFIELD(kskb, ip_summed) == HPCCD_CHECKSUM_PARTIAL;
}

/* Part of the packet is in page fragments (skb->data_len != 0). */
static __always_inline int nonlinear(struct __sk_buff *skb)
{
	struct sk_buff *kskb = bpf_cast_to_kern_ctx(skb);

	return kskb->data_len != 0;
}

static __always_inline int is_hpccd_port(const struct udphdr *uh)
{
	__be16 port = bpf_htons(hpccd_cfg_udp_port);

	return uh->dest == port || uh->source == port;
}

/* Parse Ethernet / IPv4 / L4 from the linear data.  Returns PKT_* and
 * fills *p (p->iph for every IPv4 packet whose header is in the frame). */
static __always_inline int classify(struct __sk_buff *skb, struct pkt *p)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct hpccd_cursor c = { .pos = data, .end = end };
	struct ethhdr *eth;
	struct iphdr *iph;
	struct udphdr *uh;
	struct tcphdr *th;
	void *l4_end;
	__u8 *b;
	int proto;

	p->iph = NULL;
	p->l4 = NULL;
	p->int_pos = NULL;
	p->l4_end = NULL;
	p->kind = PKT_OTHER;
	proto = hpccd__parse_eth(&c, &eth);
	if (proto < 0)
		return p->kind = PKT_NOT_LINEAR;
	if (proto != HPCCD_ETH_P_IP)
		return p->kind = PKT_NOT_IPV4;
	proto = hpccd__parse_ip4(&c, &iph, &l4_end);
	if (proto < 0) {
		/* Not in the linear data, or not a (first-fragment) IPv4
		 * header: told apart by the caller through the pull. */
		if ((void *)((struct iphdr *)c.pos + 1) > end)
			return p->kind = PKT_NOT_LINEAR;
		/* a fragment or a bad header: still IPv4 for ECN/fast start
		 * when the fixed header is sane */
		iph = (struct iphdr *)c.pos;
		if ((*(__u8 *)iph >> 4) == 4 && (*(__u8 *)iph & 0xf) >= 5)
			p->iph = iph;
		return p->kind = PKT_OTHER;
	}
	p->iph = iph;
	if (proto == HPCCD_IPPROTO_UDP) {
		if (hpccd__parse_udp(&c, &l4_end, &uh) < 0) {
			if ((void *)((struct udphdr *)c.pos + 1) > end)
				return p->kind = PKT_NOT_LINEAR;
			return PKT_OTHER;
		}
		if (!is_hpccd_port(uh))
			return PKT_OTHER;
		p->l4 = uh;
		p->kind = PKT_HPCCD_UDP;
	} else if (proto == HPCCD_IPPROTO_TCP) {
		if (hpccd__ip4_dscp(iph) != hpccd_cfg_probe_dscp)
			return PKT_OTHER;
		if (hpccd__parse_tcp(&c, l4_end, &th) < 0)
			return p->kind = PKT_NOT_LINEAR;   /* or truncated: the pull decides */
		if (hpccd__tcp_flags(th))
			return PKT_OTHER;
		b = (__u8 *)c.pos;
		if ((void *)(b + 1) > end)
			return p->kind = PKT_NOT_LINEAR;
		if ((void *)(b + 1) > l4_end || (*b >> 4) != HPCCD_INT_MAGIC)
			return PKT_OTHER;
		p->l4 = th;
		p->kind = PKT_TCP_PROBE;
	} else {
		return PKT_OTHER;
	}
	p->int_pos = c.pos;
	p->l4_end = l4_end;
	return p->kind;
}

/* (c) The WRED/ECN decision of [LDCP] section 2.1 on queue q (bytes). */
static __always_inline int wred_mark(const struct hpccd_sw_port *pc, __u32 q)
{
	__u32 kmin = pc->kmin_bytes, kmax = pc->kmax_bytes;
	__u64 thr;

	if (q >= kmax)
		return 1;
	if (q < kmin)
		return 0;
	/* kmin <= q < kmax, hence kmax - kmin >= 1 */
	thr = (__u64)(q - kmin) * pc->pmax_u32 / (__u64)(kmax - kmin);
	return (__u64)bpf_get_prandom_u32() < thr;
}

/* Sets CE on an ECN-capable packet (ECT(0), ECT(1)), updating the IPv4
 * header checksum (always present, never offloaded: CSUM_TCP semantics). */
static __always_inline void set_ce(struct iphdr *iph, void *end)
{
	__u8 tos, vihl, ntos;
	__u32 d;

	if ((void *)(iph + 1) > end)
		return;
	tos = iph->tos;
	if ((tos & HPCCD_IP_ECN_MASK) == HPCCD_IP_ECN_CE)
		return;
	vihl = *(__u8 *)iph;
	ntos = tos | HPCCD_IP_ECN_CE;
	d = hpccd__csum_diff16(0, (__u16)(vihl << 8 | tos), (__u16)(vihl << 8 | ntos));
	iph->tos = ntos;
	hpccd__csum_apply(&iph->check, d, HPCCD_CSUM_TCP);
}

/* (d) Stamp one hop into the hpccd packet p; returns the event counter
 * slot.  l4 is the UDP or the TCP header (one pointer and a flag, not two
 * pointers of which one is NULL: see reflect() in xdp_host.bpf.c). */
static __always_inline __u32 stamp(struct pkt *p, void *end, const struct hpccd_sw_port *pc,
				   const struct qview *qv, int partial, __u64 *word, __u32 *idx)
{
	struct hpccd_cursor c = { .pos = p->int_pos, .end = end };
	struct hpccd_view v;
	__u64 w;
	__be16 *csum = NULL;
	int kind = HPCCD_CSUM_NONE, r;

	if (!p->int_pos || !p->l4_end)
		return HPCCD_SW_INT_MALFORMED;
	if (hpccd__parse(&c, p->l4_end, &v) != HPCCD_E_OK)
		return HPCCD_SW_INT_MALFORMED;
	if (!v.int_hdr)
		return HPCCD_SW_INT_MALFORMED;

	if (!partial) {
		if (p->kind == PKT_TCP_PROBE) {
			struct tcphdr *th = p->l4;

			if ((void *)(th + 1) > end)
				return HPCCD_SW_INT_MALFORMED;
			csum = &th->check;
			kind = HPCCD_CSUM_TCP;
		} else {
			struct udphdr *uh = p->l4;

			if ((void *)(uh + 1) > end)
				return HPCCD_SW_INT_MALFORMED;
			csum = &uh->check;
			kind = HPCCD_CSUM_UDP;
		}
	}

	/* The hop word (include/hpccd/int_hop.h); a per-CPU queue has no
	 * port-wide state to say: speed unknown, the hop ignored. */
	if (qv->percpu)
		w = hpccd__int_hop_word(HPCCD_SPEED_UNKNOWN, bpf_ktime_get_ns(), 0, 0);
	else
		w = hpccd__int_hop_word(pc->speed_code, bpf_ktime_get_ns(), qv->tx_bytes, qv->backlog);
	*word = w;
	*idx = v.int_hdr->nhop_room >> 4;

	r = hpccd__stamp_hop(v.int_hdr, end, pc->switch_id & HPCCD_INT_PATH_MASK,
			     bpf_htonl((__u32)(w >> 32)), bpf_htonl((__u32)w), csum, kind);
	if (r == HPCCD_STAMP_WRITTEN)
		return HPCCD_SW_INT_STAMPED;
	if (r == HPCCD_STAMP_OVERFLOW)
		return HPCCD_SW_INT_FULL;
	if (r == HPCCD_STAMP_SKIP)
		return HPCCD_SW_INT_NO_COLLECT;
	return HPCCD_SW_INT_MALFORMED;
}

/* (e) At most one sample per port per hpccd_cfg_sample_ns. */
static __always_inline void sample(__u32 port, __u32 ifindex, const struct qview *qv)
{
	struct hpccd_sw_state *st;
	struct hpccd_sw_sample *s;
	__u64 now = bpf_ktime_get_ns();
	int due = 0;

	st = bpf_map_lookup_elem(&hpccd_sw_state, &port);
	if (!st)
		return;
	/* Unlocked test first: the common case (not due) takes no lock.
	 * Signed: `now` is read before the lock, so another CPU may have
	 * taken a later sample meanwhile (now < last_sample_ns); unsigned,
	 * that difference wrapped and the older sample went out after the
	 * newer one (seen once the lab spread a port's arrivals over both
	 * CPUs). */
	if ((__s64)(now - st->last_sample_ns) < (__s64)hpccd_cfg_sample_ns)
		return;
	bpf_spin_lock(&st->lock);
	if ((__s64)(now - st->last_sample_ns) >= (__s64)hpccd_cfg_sample_ns) {
		st->last_sample_ns = now;
		due = 1;
	}
	bpf_spin_unlock(&st->lock);
	if (!due)
		return;

	s = bpf_ringbuf_reserve(&hpccd_sw_qsamp, sizeof(*s), 0);
	if (!s) {
		count(port, HPCCD_SW_SAMPLE_LOST, 1, 0);
		return;
	}
	s->ts_ns = now;
	s->tx_bytes = qv->tx_bytes;
	s->tx_packets = qv->tx_packets;
	s->backlog_bytes = qv->backlog;
	s->qlen = qv->qlen;
	s->drops = qv->drops;
	s->ifindex = ifindex;
	s->port = port;
	s->flags = qv->percpu ? HPCCD_SW_SAMPLE_F_NO_QSTATS : 0;
	s->pad = 0;
	bpf_ringbuf_submit(s, 0);
	count(port, HPCCD_SW_SAMPLED, 1, 0);
}

/* ---- departure (HPCCD_SW_F_DEPART): see "Stamping at departure" above ---- */

static __always_inline __u64 skb_key(void *kskb)
{
	return (__u64)(unsigned long)kskb;
}

/* tc egress: the record just written at enqueue waits for its departure.
 * On a port whose far end is a host (DEPART_XDP) it is filed by its word
 * too, without a dequeue yet: should the tracepoint never see the packet
 * leave (a rare packet of a busy machine does not show at the tracepoint,
 * cause not found: docs/lab.md), the host's hook finds the entry and counts
 * HPCCD_SW_INT_DEP_NO_DEQ, as tc ingress does, instead of nothing. */
static __always_inline void depart_expect(struct __sk_buff *skb, __u64 word, __u32 idx,
					  __u32 ifindex, __u32 port, __u32 flags)
{
	struct hpccd_sw_dep d = {};
	__u64 key = skb_key(bpf_cast_to_kern_ctx(skb));

	d.hop = word;
	d.ifindex = ifindex;
	d.port = (__u16)port;
	d.idx = (__u8)idx;
	d.flags = (flags & HPCCD_SW_F_DEPART_XDP) ? HPCCD_SW_DEP_F_WORD : 0;
	bpf_map_update_elem(&hpccd_sw_dep, &key, &d, BPF_ANY);
	if (d.flags & HPCCD_SW_DEP_F_WORD) {
		struct hpccd_sw_depw_key wk = { .hop = word, .port = (__u32)port };
		struct hpccd_sw_depw_val wv = { .dep = d, .skb = key };

		bpf_map_update_elem(&hpccd_sw_depw, &wk, &wv, BPF_ANY);
	}
}

/* Longest chain one dequeue_skb() returns: the packet and up to 8 more
 * (try_bulk_dequeue_skb_slow(), net/sched/sch_generic.c). */
#define HPCCD_SW_DEQ_CHAIN 9

/* The dequeue: dequeue_skb() (net/sched/sch_generic.c) fires qdisc_dequeue
 * for the root qdisc q with its lock held, right after q's dequeue removed
 * the packets: q's backlog is then the bytes left behind them and its
 * bstats.bytes the bytes sent with them (HTB and TBF update both in their
 * dequeue, the same fields (a) reads).  On a device with more than one
 * transmit queue (veth has one per CPU) a root that cannot bulk-dequeue by
 * bytes takes up to 8 more packets in the same call when they are there,
 * linked by skb->next (`packets` of them): the k-th of the chain leaves
 * the bytes of the ones after it behind too, and had not yet sent them.
 * Only packets with an entry (stamped by this switch on this port) are
 * written; a dequeue in another network namespace costs one compare
 * (hpccd_cfg_netns_ino), every other one of the switch's a failed lookup
 * per packet. */
SEC("tp_btf/qdisc_dequeue")
int BPF_PROG(hpccd_int_deq, struct Qdisc *q, const struct netdev_queue *txq, int packets,
	     struct sk_buff *skb)
{
	struct sk_buff *chain[HPCCD_SW_DEQ_CHAIN];
	__u32 len[HPCCD_SW_DEQ_CHAIN];
	struct hpccd_sw_dep *d;
	struct sk_buff *s = skb;
	__u64 key, now, tx, after = 0;
	__u32 backlog, ifindex;
	int i, n = 0;

	if (!skb)
		return 0;
	/* another namespace's dequeue (another switch's, a host's): no
	 * lookup; each switch's own program takes it (hpccd_cfg_netns_ino) */
	if (hpccd_cfg_netns_ino && q->dev_queue->dev->nd_net.net->ns.inum != hpccd_cfg_netns_ino)
		return 0;
	now = bpf_ktime_get_ns();
	ifindex = q->dev_queue->dev->ifindex;
	backlog = q->qstats.backlog;
	tx = (__u64)q->bstats.bytes.v.a.a.counter;
	for (i = 0; i < HPCCD_SW_DEQ_CHAIN; i++) {
		if (!s)
			break;
		chain[i] = s;
		/* qdisc_pkt_len(): the first word of skb->cb (struct qdisc_skb_cb) */
		len[i] = 0;
		bpf_probe_read_kernel(&len[i], sizeof(len[i]), &s->cb[0]);
		s = s->next;
		n = i + 1;
	}
	for (i = HPCCD_SW_DEQ_CHAIN - 1; i >= 0; i--) {
		if (i >= n)
			continue;
		key = skb_key(chain[i]);
		d = bpf_map_lookup_elem(&hpccd_sw_dep, &key);
		if (d && d->ifindex == ifindex) {   /* else: a stale entry of another packet */
			d->backlog = backlog + (__u32)after;
			d->tx_bytes = tx - after;
			d->deq_ns = now;
			if (d->flags & HPCCD_SW_DEP_F_WORD) {
				/* the far end is a host whose XDP may take it */
				struct hpccd_sw_depw_key wk = { .hop = d->hop, .port = d->port };
				struct hpccd_sw_depw_val wv = { .dep = *d, .skb = key };

				bpf_map_update_elem(&hpccd_sw_depw, &wk, &wv, BPF_ANY);
			}
		}
		after += len[i];
	}
	return 0;
}

/* The far end of the link: tc INGRESS of the peer interface (a host's eth0
 * or the next switch's port), the first programmable point after the
 * queue.  A packet with a departure entry of this switch, whose record at
 * the entry's index is still the word written at enqueue, gets that record
 * rewritten: B as written, TS = the dequeue time mod 2^24 ns, txBytes =
 * bytes sent with it / 128 mod 2^20, qLen = bytes left behind / 80
 * saturated (HPCCD_SW_INT_DEPARTED); without a dequeue seen it keeps the
 * enqueue record (HPCCD_SW_INT_DEP_NO_DEQ).  An entry whose record is not
 * there (HPCCD_SW_INT_DEP_MISMATCH) is a stale one: its packet never left
 * (the bfifo dropped it) and another packet, possibly of another port or
 * direction, now has its sk_buff address.  The entry is deleted in every
 * case.  Never drops, never redirects, and lets the hook's next filter run
 * (TC_ACT_UNSPEC): a test's lab_loss at priority 2 still sees the packet. */
SEC("tc")
int int_sw_depart(struct __sk_buff *skb)
{
	struct hpccd_cursor c;
	struct hpccd_sw_dep d, *e;
	struct hpccd_view v;
	struct pkt p;
	__be16 *csum = NULL;
	__u64 key, w = 0, bytes = skb->len;
	__u32 port, want;
	void *end;
	int kind, ck = HPCCD_CSUM_NONE, r, parsed;

	key = skb_key(bpf_cast_to_kern_ctx(skb));
	e = bpf_map_lookup_elem(&hpccd_sw_dep, &key);
	if (!e)
		return HPCCD_TC_ACT_UNSPEC;
	d = *e;
	bpf_map_delete_elem(&hpccd_sw_dep, &key);
	port = d.port < HPCCD_SW_PORTS_MAX ? d.port : 0;

	kind = classify(skb, &p);
	if (kind == PKT_NOT_LINEAR) {
		want = skb->len < HPCCD_SW_PULL_HDRS ? skb->len : HPCCD_SW_PULL_HDRS;
		kind = bpf_skb_pull_data(skb, want) == 0 ? classify(skb, &p) : PKT_NOT_LINEAR;
	}
	/* Only an hpccd packet is made linear whole (its record is rewritten
	 * and its checksum mended); a 64 KB TCP super-packet is not copied. */
	if ((kind == PKT_HPCCD_UDP || kind == PKT_TCP_PROBE) && nonlinear(skb)) {
		want = skb->len < HPCCD_SW_PULL_MAX ? skb->len : HPCCD_SW_PULL_MAX;
		kind = bpf_skb_pull_data(skb, want) == 0 ? classify(skb, &p) : PKT_NOT_LINEAR;
	}
	end = (void *)(long)skb->data_end;
	r = -1;
	if ((kind == PKT_HPCCD_UDP || kind == PKT_TCP_PROBE) && p.int_pos && p.l4_end) {
		c.pos = p.int_pos;
		c.end = end;
		c.beyond = 0;
		/* Only a packet still collecting: an entry whose packet an
		 * XDP program took before this hook (a host's xdp_host) stays
		 * behind, and the same sk_buff may come back as the answer
		 * (a PROBE_RESP reflected with XDP_TX carries the records as
		 * they were, so the stale entry's record matches): rewriting
		 * it would break the answer's tag.  Answers have COLLECT
		 * cleared; such an entry is not counted (its record was
		 * taken before this hook, by XDP, and counted there if the
		 * lab's hook rewrote it). */
		parsed = hpccd__parse(&c, p.l4_end, &v) == HPCCD_E_OK && v.int_hdr;
		if (parsed && !(v.int_flags & HPCCD_INT_F_COLLECT))
			return HPCCD_TC_ACT_UNSPEC;
		if (parsed) {
			if (!checksum_partial(skb)) {
				if (kind == PKT_TCP_PROBE) {
					struct tcphdr *th = p.l4;

					if ((void *)(th + 1) > end)
						goto out;
					csum = &th->check;
					ck = HPCCD_CSUM_TCP;
				} else {
					struct udphdr *uh = p.l4;

					if ((void *)(uh + 1) > end)
						goto out;
					csum = &uh->check;
					ck = HPCCD_CSUM_UDP;
				}
			}
			w = hpccd__int_hop_word(d.hop >> HPCCD_INT_SPEED_SHIFT, d.deq_ns,
						d.tx_bytes, d.backlog);
			if (!d.deq_ns)
				w = d.hop;      /* only the check that the record is ours */
			r = hpccd__restamp_hop(v.int_hdr, end, d.idx,
					       bpf_htonl((__u32)(d.hop >> 32)), bpf_htonl((__u32)d.hop),
					       bpf_htonl((__u32)(w >> 32)), bpf_htonl((__u32)w),
					       csum, ck);
		}
	}
out:
	/* Already rewritten by the lab's program in the host's xdp_host hook
	 * (int_depart_xdp.bpf.c), which then passed the packet on: counted
	 * there. */
	if (r == 1 && d.deq_ns && (d.flags & HPCCD_SW_DEP_F_WORD) &&
	    hpccd__restamp_hop(v.int_hdr, end, d.idx, bpf_htonl((__u32)(w >> 32)),
			       bpf_htonl((__u32)w), bpf_htonl((__u32)(w >> 32)),
			       bpf_htonl((__u32)w), NULL, HPCCD_CSUM_NONE) == 0)
		return HPCCD_TC_ACT_UNSPEC;
	if (r != 0)
		count(port, HPCCD_SW_INT_DEP_MISMATCH, 1, bytes);
	else
		count(port, d.deq_ns ? HPCCD_SW_INT_DEPARTED : HPCCD_SW_INT_DEP_NO_DEQ, 1, bytes);
	return HPCCD_TC_ACT_UNSPEC;
}

SEC("tc")
int hpccd_int_sw(struct __sk_buff *skb)
{
	const struct hpccd_sw_port *pc;
	struct qview qv = {};
	struct pkt p;
	__u32 ifindex = skb->ifindex, port, flags, q, segs, want, ev, idx = 0;
	__u64 bytes, word = 0;
	void *end;
	__u8 ecn;
	int kind, fs_class, candidate, no_int = 0;

	/* Each ctx field read once into a register: clang would otherwise
	 * select between the two field addresses and load through a modified
	 * ctx pointer, which the verifier refuses. */
	bytes = skb->wire_len;
	hpccd__barrier_var(bytes);
	if (!bytes)
		bytes = skb->len;
	segs = skb->gso_segs > 1 ? skb->gso_segs : 1;

	pc = bpf_map_lookup_elem(&hpccd_sw_ports, &ifindex);
	if (!pc) {
		count(0, HPCCD_SW_FORWARDED, segs, bytes);
		return HPCCD_TC_ACT_OK;
	}
	port = pc->port;
	if (port == 0 || port >= HPCCD_SW_PORTS_MAX)
		port = 0;
	flags = pc->flags;

	read_queue(skb, &qv);
	q = qv.backlog;
	if (flags & HPCCD_SW_F_RX_BYTES) {
		/* HPCC-rxRate ([HPCC] section 3.4, Figure 6): the hop reports
		 * the bytes that arrived at this queue, this packet excluded, in
		 * place of those it transmitted.  The add is atomic across CPUs
		 * (XADD); the read after it may see another CPU's add too, which
		 * only moves a byte count that is read as a rate anyway. */
		struct hpccd_sw_state *st = bpf_map_lookup_elem(&hpccd_sw_state, &port);

		if (st) {
			__sync_fetch_and_add(&st->rx_bytes, bytes);
			qv.tx_bytes = st->rx_bytes - bytes;
		}
	}

	kind = classify(skb, &p);
	candidate = (kind == PKT_HPCCD_UDP || kind == PKT_TCP_PROBE) && (flags & HPCCD_SW_F_INT);
	if (kind == PKT_NOT_LINEAR || (candidate && nonlinear(skb))) {
		/* Headers (or, for a candidate, its end) beyond the linear
		 * data: pull and parse again (see the header comment). */
		want = kind == PKT_NOT_LINEAR ? HPCCD_SW_PULL_HDRS : HPCCD_SW_PULL_MAX;
		if (want > skb->len)
			want = skb->len;
		if (bpf_skb_pull_data(skb, want) == 0)
			kind = classify(skb, &p);
		else
			kind = PKT_NOT_LINEAR;
		if (kind == PKT_NOT_LINEAR || (candidate && nonlinear(skb))) {
			count(port, HPCCD_SW_TRUNC, segs, bytes);
			no_int = 1;
		}
	}
	end = (void *)(long)skb->data_end;

	if (kind == PKT_NOT_IPV4 || kind == PKT_NOT_LINEAR || !p.iph) {
		if (kind == PKT_NOT_IPV4)
			count(port, HPCCD_SW_NOT_IPV4, segs, bytes);
		goto forward;
	}
	if ((void *)(p.iph + 1) > end)
		goto forward;
	ecn = p.iph->tos & HPCCD_IP_ECN_MASK;

	/* (b) LDCP fast start: ECN-incapable packets of the class, q >= K. */
	if (!ecn && (flags & HPCCD_SW_F_FS_MASK)) {
		fs_class = (flags & HPCCD_SW_F_FS_ALL) ||
			   ((flags & HPCCD_SW_F_FS_HPCCD) && kind == PKT_HPCCD_UDP) ||
			   ((flags & HPCCD_SW_F_FS_DSCP) && hpccd__ip4_dscp(p.iph) == pc->fs_dscp);
		if (fs_class && q >= pc->fast_start_k_bytes) {
			count(port, HPCCD_SW_DROP_FAST_START, segs, bytes);
			if ((flags & HPCCD_SW_F_SAMPLE) && hpccd_cfg_sample_ns)
				sample(port, ifindex, &qv);
			return HPCCD_TC_ACT_SHOT;
		}
	}

	/* (c) WRED/ECN on ECN-capable packets. */
	if (ecn && (flags & HPCCD_SW_F_ECN) && wred_mark(pc, q)) {
		set_ce(p.iph, end);
		count(port, HPCCD_SW_ECN_MARKED, segs, bytes);
	}

	/* (d) INT. */
	if ((kind == PKT_HPCCD_UDP || kind == PKT_TCP_PROBE) && (flags & HPCCD_SW_F_INT) &&
	    !no_int) {
		if (skb->gso_segs > 1 || skb->gso_size)
			ev = HPCCD_SW_INT_GSO;
		else
			ev = stamp(&p, end, pc, &qv, checksum_partial(skb), &word, &idx);
		count(port, ev, segs, bytes);
		if (ev == HPCCD_SW_INT_STAMPED && qv.percpu)
			count(port, HPCCD_SW_NO_QSTATS, segs, bytes);
		if (ev == HPCCD_SW_INT_STAMPED && !qv.percpu && (flags & HPCCD_SW_F_DEPART) &&
		    !(flags & HPCCD_SW_F_RX_BYTES))
			depart_expect(skb, word, idx, ifindex, port, flags);
	}

forward:
	/* What the bfifo will do with it (an estimate; see the header). */
	if (pc->buffer_bytes && (__u64)q + bytes > pc->buffer_bytes)
		count(port, HPCCD_SW_BUFFER_DROP_SEEN, segs, bytes);
	count(port, HPCCD_SW_FORWARDED, segs, bytes);
	if ((flags & HPCCD_SW_F_SAMPLE) && hpccd_cfg_sample_ns)
		sample(port, ifindex, &qv);
	return HPCCD_TC_ACT_OK;
}
