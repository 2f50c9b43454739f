// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * int_depart_xdp: the lab switch's departure stamp on the last hop into a
 * host that runs xdp_host (docs/lab.md "The last hop into a host").
 *
 * The lab switch (int_switch.bpf.c) writes each hop record at enqueue and
 * rewrites it with the port's state at the dequeue on tc ingress of the
 * link's far end.  A host running hpccd has xdp_host on its eth0, which
 * runs before tc ingress and takes hpccd packets to AF_XDP (or answers
 * PROBEs with XDP_TX): tc ingress never sees them.  So, on a port whose far
 * end is a host (flag HPCCD_SW_F_DEPART_XDP), the tracepoint qdisc_dequeue
 * also files the departure by the record's own word (hpccd_sw_depw, key:
 * the hop word written at enqueue and the port number), and this program,
 * which the lab puts into xdp_host's hook (the prog array hpccd_lab_hook,
 * slot HPCCD_LAB_HOOK_PROG: xdp_host tail-calls it for each valid hpccd
 * packet to the host that carries records with COLLECT set), finds it from
 * the packet's last record and rewrites that record as int_sw_depart
 * would, then sets hpccd_lab_in and tail-calls xdp_host again (slot
 * HPCCD_LAB_HOOK_BACK), which carries on with the packet:
 *
 *  - only the last record (index nHop - 1: the host's last hop), only if
 *    an entry of this host's switch port has its word (the record still
 *    holds the word written at enqueue) and the entry's index is that
 *    record's (else HPCCD_SW_INT_DEP_MISMATCH, nothing changed);
 *  - an entry without a dequeue seen: the record stays
 *    (HPCCD_SW_INT_DEP_NO_DEQ);
 *  - else TS = the dequeue time, txBytes = bytes sent with it / 128, qLen
 *    = bytes left behind / 80, B as written (HPCCD_SW_INT_DEPARTED); the
 *    L4 checksum patched incrementally, except a zero UDP checksum and a
 *    CHECKSUM_PARTIAL field (recognised by holding exactly the folded
 *    pseudo-header sum, as xdp_host's reflect() does: XDP does not see the
 *    skb's state), which are left alone as int_sw_depart leaves them.
 *
 * Counted in the switch's hpccd_sw_cnt under the port's number.  The lab
 * loads this object once per host with the switch's hpccd_sw_cnt,
 * hpccd_sw_depw and hpccd_sw_dep and the host's xdp_host's hpccd_lab_hook
 * and hpccd_lab_in (the loader reuses them: this object creates no map of
 * its own).  The entry is deleted whenever it is found, and with it the
 * same packet's entry by sk_buff (struct hpccd_sw_depw_val): the packet
 * will not reach tc ingress under it, and a later packet given that
 * address must not find it there.
 *
 * Why by word and not by sk_buff: XDP gets an xdp_buff; in generic mode
 * the sk_buff is not reachable from it, and native XDP on a veth may have
 * converted the packet into a frame of its own.  The word (B, TS mod 2^24
 * ns, txBytes, qLen) with the port number is unique in practice: two
 * packets of one port would need the same enqueue nanosecond modulo 16.7
 * ms with the same byte counts.
 *
 * Never drops and never changes the packet's length; its verdict is
 * xdp_host's (XDP_PASS only when xdp_host is not in its slot, i.e. while
 * the lab takes the hook down).  A tail call rather than an extension
 * (freplace) of a function of xdp_host: this machine's kernel refuses
 * programs attached through a trampoline (freplace, fentry: EPERM).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "hpccd/build.h"   /* and parse.h */

#define HPCCD_MAPS_SW_DEPART
#include "hpccd_maps.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* The number of the switch port whose far end is this host (set by the
 * lab before load). */
const volatile __u16 hpccd_cfg_lab_port = 0;

static __always_inline void count(__u32 c, __u64 bytes)
{
	__u32 port = hpccd_cfg_lab_port < HPCCD_SW_PORTS_MAX ? hpccd_cfg_lab_port : 0;

	hpccd__count(&hpccd_sw_cnt, port * HPCCD_SW_COUNTERS + c, bytes);
}

/* Rewrites the record, then goes back into xdp_host (see the header). */
static __always_inline void depart(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u64 bytes = bpf_xdp_get_buff_len(ctx);
	struct hpccd_cursor c = hpccd__cursor(data, end, bytes);
	struct hpccd_int_hop_wire *hop;
	struct hpccd_sw_depw_key key = {};
	struct hpccd_sw_depw_val *e;
	struct hpccd_sw_dep d, *sd;
	__u64 skb;
	struct hpccd_view v;
	struct ethhdr *eth;
	struct iphdr *iph;
	struct udphdr *uh;
	struct tcphdr *th;
	__be16 *csum = NULL;
	void *l4_end;
	__u64 w;
	__u32 idx, l4_len;
	int proto, kind = HPCCD_CSUM_NONE;
	__u8 *b;

	if (hpccd__parse_eth(&c, &eth) != HPCCD_ETH_P_IP)
		return;
	proto = hpccd__parse_ip4(&c, &iph, &l4_end);
	if (proto == HPCCD_IPPROTO_UDP) {
		if (hpccd__parse_udp(&c, &l4_end, &uh) < 0)
			return;
		if (uh->dest != bpf_htons(hpccd_cfg_udp_port) &&
		    uh->source != bpf_htons(hpccd_cfg_udp_port))
			return;
		if (uh->check) {
			csum = &uh->check;
			kind = HPCCD_CSUM_UDP;
		}
		l4_len = bpf_ntohs(uh->len);
	} else if (proto == HPCCD_IPPROTO_TCP) {
		if (hpccd__ip4_dscp(iph) != hpccd_cfg_probe_dscp)
			return;
		if (hpccd__parse_tcp(&c, l4_end, &th) < 0 || hpccd__tcp_flags(th))
			return;
		b = (__u8 *)c.pos;
		if ((void *)(b + 1) > end || (*b >> 4) != HPCCD_INT_MAGIC)
			return;
		csum = &th->check;
		kind = HPCCD_CSUM_TCP;
		l4_len = bpf_ntohs(iph->tot_len) - (__u32)(*(__u8 *)iph & 0xf) * 4;
	} else {
		return;
	}
	if (hpccd__parse(&c, l4_end, &v) != HPCCD_E_OK || !v.int_hdr || !v.nhop ||
	    !(v.int_flags & HPCCD_INT_F_COLLECT))
		return;
	idx = (__u32)v.nhop - 1;
	hop = hpccd__hop(&v, idx, end);
	if (!hop)
		return;
	key.hop = (__u64)bpf_ntohl(hop->hi_be) << 32 | bpf_ntohl(hop->lo_be);
	key.port = hpccd_cfg_lab_port;
	e = bpf_map_lookup_elem(&hpccd_sw_depw, &key);
	if (!e)
		return;       /* not a record of this host's switch port */
	d = e->dep;
	skb = e->skb;
	bpf_map_delete_elem(&hpccd_sw_depw, &key);
	/* The same packet's entry by sk_buff: tc ingress will not see the
	 * packet (or not under that address), so it goes now, unless a newer
	 * packet has the address already. */
	sd = bpf_map_lookup_elem(&hpccd_sw_dep, &skb);
	if (sd && sd->hop == d.hop && sd->port == d.port)
		bpf_map_delete_elem(&hpccd_sw_dep, &skb);
	if (d.idx != idx) {
		count(HPCCD_SW_INT_DEP_MISMATCH, bytes);
		return;
	}
	if (!d.deq_ns) {
		count(HPCCD_SW_INT_DEP_NO_DEQ, bytes);
		return;
	}
	/* A CHECKSUM_PARTIAL field holds the folded pseudo-header sum only:
	 * left alone (see the header comment). */
	if (csum && (void *)(iph + 1) <= end && (void *)(csum + 1) <= end &&
	    hpccd__csum_is_partial(csum, iph, l4_len)) {
		csum = NULL;
		kind = HPCCD_CSUM_NONE;
	}
	w = hpccd__int_hop_word(d.hop >> HPCCD_INT_SPEED_SHIFT, d.deq_ns, d.tx_bytes, d.backlog);
	if (hpccd__restamp_hop(v.int_hdr, end, idx, bpf_htonl((__u32)(d.hop >> 32)),
			       bpf_htonl((__u32)d.hop), bpf_htonl((__u32)(w >> 32)),
			       bpf_htonl((__u32)w), csum, kind) != 0) {
		count(HPCCD_SW_INT_DEP_MISMATCH, bytes);
		return;
	}
	count(HPCCD_SW_INT_DEPARTED, bytes);
}

SEC("xdp.frags")
int int_sw_dep_xdp(struct xdp_md *ctx)
{
	__u32 zero = 0, *back;

	depart(ctx);
	back = bpf_map_lookup_elem(&hpccd_lab_in, &zero);
	if (!back)
		return XDP_PASS;
	*back = 1;
	bpf_tail_call(ctx, &hpccd_lab_hook, HPCCD_LAB_HOOK_BACK);
	/* no xdp_host in its slot (the lab is taking the hook down) */
	*back = 0;
	return XDP_PASS;
}
