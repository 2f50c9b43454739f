// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * xdp_host: the one XDP program of a host interface (without a dispatcher
 * an interface runs one XDP program, so classifier, probe reflector and
 * TCP-side response parser are one program).  In order:
 *
 *  (a) parse (include/hpccd/parse.h).  Not IPv4, or IPv4 that is neither
 *      UDP with the hpccd port as source or destination nor a TCP-side
 *      probe/response (probe DSCP + no TCP flag + INT magic): XDP_PASS
 *      untouched.
 *  (b) hpccd packets that are malformed (enum hpccd_wire_err != 0):
 *      counted per class and XDP_DROP (docs/wire-format.md "Malformed
 *      packets": they cannot belong to any hpccd flow).
 *  (c) PROBE (UDP or TCP-side) to this host: within its source's rate
 *      (hpccd_probe_rl), rewritten in place into its PROBE_RESP and XDP_TX,
 *      without waking userspace ([HPCC++2022] section 6.2.1: the receiver
 *      reflects); over it, dropped and counted.
 *  (d) TCP-side PROBE_RESP to this host: tag verified, telemetry written to
 *      hpccd_telem for the daemon, XDP_DROP (the kernel TCP stack must
 *      never see probes or responses: [HPCC++2022] section 7.2).
 *  (e) every other valid hpccd packet to this host (DATA, ACK, NACK,
 *      NOTIFY, PROBE_RESP of native flows): redirected to the AF_XDP socket
 *      of its rx queue.
 *
 * Every frame is counted in exactly one slot of hpccd_xdp_cnt.
 *
 * Decisions (also in the report of the change that added this file):
 *
 *  - "The hpccd port" means source OR destination port, as in the scapy
 *    reference (daemon/hpccd/core/wire.py l4_region): a PROBE_RESP is the PROBE
 *    with its ports swapped, so it travels FROM the port to the prober's
 *    port, and must still be recognised at the prober.
 *  - Only packets to an address of this host (hpccd_addrs) are answered,
 *    consumed or steered; the others pass to the kernel, which forwards or
 *    drops them.  An empty hpccd_addrs map therefore makes the program a
 *    pure classifier that passes every valid hpccd packet: fail-open to the
 *    kernel rather than answering for somebody else.  Malformed packets are
 *    dropped whatever their destination (spec).
 *  - AF_XDP fallback: bpf_redirect_map(..., XDP_PASS).  Since kernel 5.3
 *    the low bits of the flags are the action returned when the XSKMAP slot
 *    of the queue is empty, so with no socket bound the packet goes to the
 *    kernel stack instead of vanishing: the daemon may run without AF_XDP
 *    (generic-mode debugging, tcpdump sees the traffic), and the count in
 *    HPCCD_XDP_PASS_NO_XSK says it happened.  The price is that the stack,
 *    with no UDP socket on the port, answers ICMP port unreachable.
 *  - The PROBE_RESP is a new packet of this host: IPv4 TTL is reset to
 *    HPCCD_REFLECT_TTL (the probe's TTL was spent on the forward path; a
 *    reflected TTL would die on a long path back), and a CE mark of the
 *    forward path becomes ECT(0), so the response does not carry
 *    congestion of the forward path onto the reverse one.  DSCP is kept
 *    (TCP-side responses must carry the probe DSCP, [HPCC++2022] section 7.2),
 *    as are IP id, DF and any IP options.  TCP seq (the probe number) and
 *    the rest of the TCP header are kept; only the ports are swapped.
 *  - The L4 (UDP or TCP) checksum of the PROBE_RESP is patched
 *    incrementally (RFC 1624; swapping addresses or ports leaves a one's
 *    complement sum unchanged), except when the probe's field is
 *    CHECKSUM_PARTIAL: a probe sent by a kernel socket over a veth (the
 *    prober in a neighbouring namespace) carries only the folded
 *    pseudo-header sum, the rest being left to the "device".  XDP does not
 *    see that state and XDP_TX loses it, so a patched partial value reached
 *    the prober as a wrong checksum and its kernel dropped the response
 *    (Udp InCsumErrors; tests/integration/test_host_xdp.py).  Such a field
 *    is recognised by its value (exactly the folded pseudo-header sum) and
 *    the checksum is then recomputed in full over the segment (L4 header,
 *    INT header, hops, hpccd header, tag: at most 168 bytes, summed with
 *    bpf_csum_diff() in constant-size pieces, sum_segment()).  Recomputing
 *    every probe would also "repair" one corrupted on the way and answer
 *    it with a valid checksum (and a tag over the damaged bytes), so any
 *    other value is patched and a wrong checksum stays wrong.  A zero UDP
 *    checksum ("none") stays zero, and a probe whose announced L4 length is
 *    not the length it was parsed with is always patched: its checksum
 *    covers bytes the frame does not carry.  The IPv4 header
 *    checksum stays incremental (TOS and TTL change): Linux computes it in
 *    software (ip_send_check()), it is never left partial.
 *  - The tag of a TCP-side PROBE_RESP is verified here, before the
 *    telemetry is stored: the map holds hop words only, not the whole
 *    tagged message, so userspace could not verify it afterwards.
 *  - TCP-side PROBE_RESP telemetry is stored with BPF_ANY: the tag already
 *    proves that the response is ours, so no pre-registration is needed;
 *    the daemon deletes the entry when it stops probing the flow.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "hpccd/build.h"   /* and parse.h */

#define HPCCD_MAPS_XDP
#include "hpccd_maps.bpf.h"


char LICENSE[] SEC("license") = "Dual BSD/GPL";

static __always_inline int verdict(__u32 idx, __u64 bytes, int action)
{
	hpccd__count(&hpccd_xdp_cnt, idx, bytes);
	return action;
}

static __always_inline int is_hpccd_port(const struct udphdr *uh)
{
	__be16 port = bpf_htons(hpccd_cfg_udp_port);

	return uh->dest == port || uh->source == port;
}

/* The tag key, or -1 when it is not configured (all zero). */
static __always_inline int tag_key(__u64 *k0, __u64 *k1)
{
	__u32 zero = 0;
	struct hpccd_tag_key *k = bpf_map_lookup_elem(&hpccd_tag_key, &zero);

	if (!k)
		return -1;
	*k0 = hpccd_siphash__le64(k->key);
	*k1 = hpccd_siphash__le64(k->key + 8);
	if (!*k0 && !*k1)
		return -1;
	return 0;
}

/* One piece of sum_segment(): the sz bytes at *p when n has the bit sz
 * (a constant power of two), then *p moves past them. */
static __always_inline int sum_piece(void **p, __u32 n, __u32 sz, void *end, __s64 *sum)
{
	if (!(n & sz))
		return 0;
	if (*p + sz > end)
		return -1;
	*sum = bpf_csum_diff(NULL, 0, *p, sz, (__wsum)*sum);
	if (*sum < 0)
		return -1;
	*p += sz;
	return 0;
}

/* The one's complement sum (bpf_csum_diff()'s, host-order loads: see
 * hpccd__csum_from_mem()) of the n bytes at p, n a multiple of 4 below
 * 256, or -1 when they are not in the frame (never at run time: the
 * parser checked them).  One helper call per set bit of n, each with a
 * constant size behind its own `p + size > end` check: a size known to
 * the verifier only as a range would need the packet range of p proven
 * for the range's maximum, which a variable-length check does not give. */
static __always_inline __s64 sum_segment(void *p, __u32 n, void *end)
{
	__s64 sum = 0;

	if (n & 3 || n > 255)
		return -1;
	if (sum_piece(&p, n, 128, end, &sum) || sum_piece(&p, n, 64, end, &sum) ||
	    sum_piece(&p, n, 32, end, &sum) || sum_piece(&p, n, 16, end, &sum) ||
	    sum_piece(&p, n, 8, end, &sum) || sum_piece(&p, n, 4, end, &sum))
		return -1;
	return sum;
}

/* (c) Rewrite the PROBE at v into its PROBE_RESP, in place, with the one
 * reflector of include/hpccd/build.h (the engine runs the same one when
 * probes are left to it), and return the counter slot of the verdict; on a
 * slot other than the two TX_* ones the caller drops the packet.  l4: the
 * UDP header, or the TCP header when tcp is set.  A CHECKSUM_PARTIAL L4
 * checksum (see the header comment) is recomputed here, with the kernel's
 * bpf_csum_diff() (sum_segment). */
static __always_inline __u32 reflect(struct ethhdr *eth, struct iphdr *iph, void *l4, int tcp,
				     struct hpccd_view *v, void *end)
{
	struct hpccd_reflect_csum rc;
	__u64 k0, k1;
	__s64 seg;
	int r;

	if (!v->tag)
		return HPCCD_XDP_DROP_TAG_SLOT;
	if (tag_key(&k0, &k1))
		return HPCCD_XDP_DROP_NO_KEY;
	r = hpccd__reflect_probe(eth, iph, l4, tcp, v, end, k0, k1, &rc);
	if (r == HPCCD_REFLECT_BAD)
		return HPCCD_XDP_DROP_TAG_SLOT;   /* cannot happen: parsed above */
	if (r == HPCCD_REFLECT_RESUM) {
		seg = sum_segment(l4, rc.l4_len, end);
		if (seg < 0)
			return HPCCD_XDP_DROP_TAG_SLOT;   /* cannot happen: parsed above */
		hpccd__csum_put(rc.csum, hpccd__csum_pseudo4(iph, rc.l4_len) +
						 hpccd__csum_from_mem((__u32)seg),
				rc.kind);
	}
	return tcp ? HPCCD_XDP_TX_PROBE_RESP_TCP : HPCCD_XDP_TX_PROBE_RESP_UDP;
}

/* (c) Whether a PROBE from saddr may be answered: GCRA over the source's
 * theoretical arrival time tat (hpccd/kern_user.h HPCCD_PROBE_RATE_DEFAULT):
 * answered when tat + one interval is at most `burst` intervals past now,
 * which moves tat one interval on (so `burst` probes at once, then one per
 * interval).  Two CPUs updating one source at once may
 * each let one probe through: the bound holds within a few probes. */
static __always_inline int probe_allowed(__be32 saddr)
{
	__u64 now, tat, iv, *v;

	if (!hpccd_cfg_probe_rate)
		return 1;
	iv = 1000000000ull / hpccd_cfg_probe_rate;
	now = bpf_ktime_get_ns();
	v = bpf_map_lookup_elem(&hpccd_probe_rl, &saddr);
	if (!v) {
		tat = now + iv;
		bpf_map_update_elem(&hpccd_probe_rl, &saddr, &tat, BPF_ANY);
		return 1;
	}
	tat = *v > now ? *v : now;
	if (tat + iv - now > (__u64)hpccd_cfg_probe_burst * iv)
		return 0;        /* answering it would take the source past its burst */
	*v = tat + iv;
	return 1;
}

/* (d) Verify a TCP-side PROBE_RESP and store its telemetry; returns the
 * counter slot (the packet is dropped whatever the outcome). */
static __always_inline __u32 store_telem(struct iphdr *iph, struct tcphdr *th,
					 struct hpccd_view *v, void *end)
{
	struct hpccd_tcp_telem val, *old;
	struct hpccd_tcp_resp *rec;
	struct hpccd_flow_key key;
	struct hpccd_tag_input ti;
	struct hpccd_int_hop_wire *hop;
	struct hpccd_hdr *h = v->hdr;
	__u64 k0, k1, t;
	__u32 i;

	if (!v->tag)
		return HPCCD_XDP_DROP_TAG_SLOT;
	if (tag_key(&k0, &k1))
		return HPCCD_XDP_DROP_NO_KEY;
	if ((void *)(iph + 1) > end || (void *)(th + 1) > end || !h || (void *)(h + 1) > end ||
	    (void *)(v->tag + 1) > end)
		return HPCCD_XDP_DROP_TAG_SLOT;
	hpccd__tag_input(&ti, iph, th->source, th->dest, HPCCD_T_PROBE_RESP);
	if (hpccd__tag(v, &ti, k0, k1, end, &t) || t != hpccd__tag_get(v))
		return HPCCD_XDP_DROP_TCP_RESP_TAG;

	/* The tag prefix is the flow as the prober (this host) sees it: the
	 * same bytes as the tracker's key (struct hpccd_flow_key). */
	__builtin_memcpy(&key, &ti, sizeof(key));

	__builtin_memset(&val, 0, sizeof(val));
	for (i = 0; i < HPCCD_INT_MAX_HOPS; i++) {
		if (i >= v->nhop)
			break;
		hop = hpccd__hop(v, i, end);
		if (!hop)
			break;
		val.hops[i].hi_be = hop->hi_be;
		val.hops[i].lo_be = hop->lo_be;
	}
	val.rx_ns = bpf_ktime_get_ns();
	val.probe_seq = (__u64)bpf_ntohl(h->seq_hi) << 32 | bpf_ntohl(h->seq_lo);
	val.ts_echo = bpf_ntohl(h->ts);
	val.flow_id = bpf_ntohl(h->flow_id);
	val.path_id = v->path_id;
	val.nhop = v->nhop;
	val.room = v->room;
	val.int_flags = v->int_flags;
	old = bpf_map_lookup_elem(&hpccd_telem, &key);
	val.responses = old ? old->responses + 1 : 1;
	/* One update of the whole value: a hash map swaps in a new element,
	 * so a reader sees the old or the new response, never a mix. */
	if (bpf_map_update_elem(&hpccd_telem, &key, &val, BPF_ANY))
		return HPCCD_XDP_DROP_TCP_RESP_FULL;
	/* Wake the probe engine with the response itself (a full ring loses
	 * the record, not the telemetry: the engine times the probe out and
	 * reads the map then). */
	rec = bpf_ringbuf_reserve(&hpccd_telem_rb, sizeof(*rec), 0);
	if (rec) {
		__builtin_memcpy(&rec->key, &key, sizeof(key));
		__builtin_memcpy(&rec->t, &val, sizeof(val));
		bpf_ringbuf_submit(rec, 0);
	}
	return HPCCD_XDP_TCP_RESP_STORED;
}

/* The lab's hook (docs/lab.md "The last hop into a host"), reached by each
 * valid hpccd packet to this host that carries records with COLLECT set,
 * before it is answered, consumed or steered.  Without the lab, a tail call
 * into the empty slot HPCCD_LAB_HOOK_PROG of hpccd_lab_hook, which falls
 * through (one per-CPU array read and one failed tail call: the benchmark
 * scripts/bench_xdp_hook.py measures it).  The lab puts its program
 * (ebpf/int_depart_xdp.bpf.c) in that slot and this program in slot
 * HPCCD_LAB_HOOK_BACK: the lab's program rewrites the last hop's record,
 * sets hpccd_lab_in and tail-calls this program again, which finds the
 * flag, clears it and carries on.  A tail call, not an extension
 * (freplace) of a global function: this machine's kernel refuses every
 * program that attaches to another BPF program or a kernel function
 * through a trampoline (freplace, fentry: EPERM), and a tail call leaves
 * xdp_host's instructions as they are. */
static __always_inline void lab_hook(struct xdp_md *ctx)
{
	__u32 zero = 0;
	__u32 *back = bpf_map_lookup_elem(&hpccd_lab_in, &zero);

	if (!back)
		return;
	if (*back) {           /* back from the lab's program: done */
		*back = 0;
		return;
	}
	bpf_tail_call(ctx, &hpccd_lab_hook, HPCCD_LAB_HOOK_PROG);
}

/* xdp.frags: the program takes multi-buffer frames (a device whose MTU is
 * larger than a page, in native mode; multi-buffer skbs in generic mode
 * without linearising them).  Every header it reads is in the linear part
 * (data..data_end); a DATA payload may go on in the fragments, whose
 * length the parser counts (hpccd_cursor.beyond), and the AF_XDP socket
 * receives the frame in pieces (XDP_USE_SG, docs/transport.md). */
#ifdef HPCCD_XDP_NO_FRAGS      /* only scripts/bench_latency.py's A/B: a linear-only program */
SEC("xdp")
#else
SEC("xdp.frags")
#endif
int hpccd_xdp_host(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	/* Frame length (linear part and fragments) for the byte counters and
	 * the parser. */
	__u64 bytes = bpf_xdp_get_buff_len(ctx);
	struct hpccd_cursor c = hpccd__cursor(data, end, bytes);
	struct ethhdr *eth = NULL;
	struct iphdr *iph = NULL;
	struct udphdr *uh = NULL;
	struct tcphdr *th = NULL;
	struct hpccd_view v;
	void *l4 = NULL, *l4_end = NULL;
	int proto, err, act, tcp = 0;
	__u32 slot;
	__be32 daddr;

	/* (a) Is it hpccd's? */
	if (hpccd__parse_eth(&c, &eth) != HPCCD_ETH_P_IP)
		return verdict(HPCCD_XDP_PASS_NOT_IPV4, bytes, XDP_PASS);
	proto = hpccd__parse_ip4(&c, &iph, &l4_end);
	if (proto < 0)
		return verdict(HPCCD_XDP_PASS_BAD_HDR, bytes, XDP_PASS);

	if (proto == HPCCD_IPPROTO_UDP) {
		if (hpccd__parse_udp(&c, &l4_end, &uh) < 0)
			return verdict(HPCCD_XDP_PASS_BAD_HDR, bytes, XDP_PASS);
		if (!is_hpccd_port(uh))
			return verdict(HPCCD_XDP_PASS_OTHER, bytes, XDP_PASS);
		l4 = uh;
	} else if (proto == HPCCD_IPPROTO_TCP && (hpccd_cfg_flags & HPCCD_CFG_TCP_SIDE)) {
		__u8 *p;

		/* TCP-side probe or response: probe DSCP, no TCP flag (AE
		 * included), at least one byte after the TCP header, with the
		 * INT magic in it (docs/wire-format.md "TCP-side probe"). */
		if (hpccd__ip4_dscp(iph) != hpccd_cfg_probe_dscp)
			return verdict(HPCCD_XDP_PASS_OTHER, bytes, XDP_PASS);
		if (hpccd__parse_tcp(&c, l4_end, &th) < 0)
			return verdict(HPCCD_XDP_PASS_BAD_HDR, bytes, XDP_PASS);
		if (hpccd__tcp_flags(th))
			return verdict(HPCCD_XDP_PASS_OTHER, bytes, XDP_PASS);
		p = (__u8 *)c.pos;
		if ((void *)(p + 1) > l4_end || (void *)(p + 1) > end ||
		    (*p >> 4) != HPCCD_INT_MAGIC)
			return verdict(HPCCD_XDP_PASS_OTHER, bytes, XDP_PASS);
		l4 = th;
		tcp = 1;
	} else {
		return verdict(HPCCD_XDP_PASS_OTHER, bytes, XDP_PASS);
	}

	/* (b) Malformed: counted per class, dropped. */
	err = hpccd__parse(&c, l4_end, &v);
	if (err != HPCCD_E_OK) {
		if (err < 0 || err >= HPCCD_E_MAX)
			err = 0;   /* keeps the slot in range for the verifier */
		return verdict(HPCCD_XDP_DROP_MALFORMED + err, bytes, XDP_DROP);
	}

	/* Only this host's packets are answered, consumed or steered. */
	daddr = iph->daddr;
	if (!bpf_map_lookup_elem(&hpccd_addrs, &daddr))
		return verdict(HPCCD_XDP_PASS_NOT_LOCAL, bytes, XDP_PASS);

#ifndef HPCCD_NO_LAB_HOOK      /* defined only by the hook's benchmark */
	if (v.int_hdr && (v.int_flags & HPCCD_INT_F_COLLECT) && v.nhop)
		lab_hook(ctx);
#endif

	/* (c) PROBE: answered here.  TCP-side probes never reach the stack,
	 * answered or not; native ones go to userspace when XDP does not
	 * answer them. */
	if (v.type == HPCCD_T_PROBE) {
		/* whoever answers it (here, or the engine), within the rate
		 * of its source only: no reflection at a spoofed victim */
		if (!probe_allowed(iph->saddr))
			return verdict(HPCCD_XDP_DROP_PROBE_RATE, bytes, XDP_DROP);
		if (!(hpccd_cfg_flags & HPCCD_CFG_REFLECT_PROBES)) {
			if (tcp)
				return verdict(HPCCD_XDP_DROP_TCP_PROBE_OFF, bytes, XDP_DROP);
			goto to_xsk;
		}
		slot = reflect(eth, iph, l4, tcp, &v, end);
		act = slot == HPCCD_XDP_TX_PROBE_RESP_UDP || slot == HPCCD_XDP_TX_PROBE_RESP_TCP
			      ? XDP_TX
			      : XDP_DROP;
		return verdict(slot, bytes, act);
	}
	/* (d) TCP-side PROBE_RESP: telemetry to the map; nothing else is valid
	 * on the TCP side, and none of it may reach the stack. */
	if (tcp) {
		if (v.type == HPCCD_T_PROBE_RESP)
			return verdict(store_telem(iph, l4, &v, end), bytes, XDP_DROP);
		return verdict(HPCCD_XDP_DROP_TCP_TYPE, bytes, XDP_DROP);
	}

to_xsk:
	/* (e) To the fast path's AF_XDP socket of this rx queue; XDP_PASS when
	 * none is bound (see the header comment). */
	act = bpf_redirect_map(&hpccd_xsks, ctx->rx_queue_index, XDP_PASS);
	slot = act == XDP_REDIRECT ? HPCCD_XDP_REDIRECT_XSK : HPCCD_XDP_PASS_NO_XSK;
	return verdict(slot, bytes, act);
}
