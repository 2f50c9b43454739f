// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * lab_loss: random packet loss on a lab link, for the transport's
 * reliability tests (issue 5; docs/transport.md).  The kernel here has no
 * netem, so loss is a tc program: attached to tc ingress (or egress) of a
 * lab interface, it drops each IPv4 packet independently with probability
 * hpccd_loss_cfg[0].p32 / 2^32 (bpf_get_prandom_u32(): per-CPU, not
 * cryptographic, uniform enough for a loss rate), and lets everything else
 * (ARP above all: a lost ARP reply would stall the path for seconds, which
 * no random loss on a real link does) through untouched.
 *
 * Runtime settings are in a map, not rodata, so that a test can change the
 * loss rate (or turn it off, p32 = 0) while traffic flows.  Counters are a
 * per-CPU array of {packets, bytes} in two slots, seen and dropped, summed
 * by the reader; every IPv4 packet is in "seen", the dropped ones also in
 * "dropped".  One object per interface (or per namespace): the maps are
 * not keyed by interface.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define TC_ACT_OK_ 0           /* linux/pkt_cls.h: vmlinux.h has no macros */
#define TC_ACT_SHOT_ 2
#define ETH_P_IP_ 0x0800

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct hpccd_loss_cfg {
	__u32 p32;             /* drop probability x 2^32 (0: none; 0xffffffff: ~all) */
	__u32 pad;
};

struct hpccd_loss_cnt {
	__u64 packets;
	__u64 bytes;
};

enum { HPCCD_LOSS_SEEN = 0, HPCCD_LOSS_DROPPED = 1, HPCCD_LOSS_SLOTS = 2 };

/* the loss rate, written by the test */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hpccd_loss_cfg);
} hpccd_loss_cfg SEC(".maps");

/* IPv4 packets seen and dropped, per CPU */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HPCCD_LOSS_SLOTS);
	__type(key, __u32);
	__type(value, struct hpccd_loss_cnt);
} hpccd_loss_cnt SEC(".maps");

static __always_inline void count(__u32 slot, __u32 len)
{
	struct hpccd_loss_cnt *c = bpf_map_lookup_elem(&hpccd_loss_cnt, &slot);

	if (c) {
		c->packets++;        /* per-CPU slot: no other writer */
		c->bytes += len;
	}
}

SEC("tc")
int hpccd_lab_loss(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct hpccd_loss_cfg *cfg;

	if (skb->protocol != bpf_htons(ETH_P_IP_))
		return TC_ACT_OK_;
	count(HPCCD_LOSS_SEEN, skb->len);
	cfg = bpf_map_lookup_elem(&hpccd_loss_cfg, &zero);
	if (!cfg || !cfg->p32)
		return TC_ACT_OK_;
	if (bpf_get_prandom_u32() < cfg->p32) {
		count(HPCCD_LOSS_DROPPED, skb->len);
		return TC_ACT_SHOT_;
	}
	return TC_ACT_OK_;
}
