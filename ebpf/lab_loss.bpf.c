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
 * Modes (hpccd_loss_cfg.mode; issue 9's fault tests, tests/integration/
 * test_faults.py):
 *
 *   0 random   each IPv4 packet dropped with probability p32 / 2^32;
 *   1 burst    Gilbert-Elliott: a two-state chain (good, bad), one step
 *              per IPv4 packet; in good drop with p32, go bad with
 *              p_enter32; in bad drop with p_bad32, go good with p_exit32.
 *              Mean burst length 1 / p_exit, loss in the long run about
 *              p_enter / (p_enter + p_exit) x p_bad.  The state is one
 *              array slot shared by the CPUs (a lost race between two
 *              CPUs only blurs a burst edge);
 *   2 reorder  on tc egress of a port with an HTB root: with probability
 *              p32, or while the Gilbert chain of mode 1 is in its bad
 *              state when p_enter32 is set (runs of packets), the packet's
 *              skb->priority becomes `classid` (a slow HTB class beside the
 *              link's 1:1; HTB looks at skb->priority before its filters),
 *              so the packets behind it overtake it.  Nothing is dropped,
 *              and every packet gets TC_ACT_UNSPEC: the next filter of the
 *              hook (the lab's INT switch, at the same priority, added
 *              before this one) still runs.
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
#define TC_ACT_UNSPEC_ (-1)
#define ETH_P_IP_ 0x0800

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct hpccd_loss_cfg {
	__u32 p32;             /* drop probability x 2^32 (0: none; 0xffffffff: ~all);
				* reorder mode: probability of the slow class */
	__u32 mode;            /* 0 random, 1 burst (Gilbert-Elliott), 2 reorder */
};

/* parameters of modes 1 and 2 */
struct hpccd_loss_ext {
	__u32 p_enter32;       /* burst: good -> bad per packet, x 2^32 */
	__u32 p_exit32;        /* burst: bad -> good per packet, x 2^32 */
	__u32 p_bad32;         /* burst: drop probability in bad, x 2^32 */
	__u32 classid;         /* reorder: the slow HTB class (major:minor) */
};

struct hpccd_loss_cnt {
	__u64 packets;
	__u64 bytes;
};

enum {
	HPCCD_LOSS_SEEN = 0,
	HPCCD_LOSS_DROPPED = 1,
	HPCCD_LOSS_REORDERED = 2,   /* reorder mode: sent to the slow class */
	HPCCD_LOSS_BURSTS = 3,      /* burst mode: good -> bad transitions */
	HPCCD_LOSS_SLOTS = 4,
};

/* the loss rate, written by the test */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hpccd_loss_cfg);
} hpccd_loss_cfg SEC(".maps");

/* modes 1 and 2, written by the test */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hpccd_loss_ext);
} hpccd_loss_ext SEC(".maps");

/* burst mode: 1 while in the bad state */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} hpccd_loss_state SEC(".maps");

/* IPv4 packets seen, dropped, reordered; bursts; per CPU */
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
	if (!cfg)
		return TC_ACT_OK_;
	if (cfg->mode == 2) {
		struct hpccd_loss_ext *x = bpf_map_lookup_elem(&hpccd_loss_ext, &zero);
		__u32 *bad = bpf_map_lookup_elem(&hpccd_loss_state, &zero);
		int slow;

		if (!x || !bad)
			return TC_ACT_UNSPEC_;
		if (x->p_enter32) {
			/* runs of packets (the Gilbert chain of mode 1): a lone
			 * packet would find the slow class's bucket full and
			 * leave at once; a run waits behind its own head */
			if (*bad) {
				if (bpf_get_prandom_u32() < x->p_exit32)
					*bad = 0;
			} else if (bpf_get_prandom_u32() < x->p_enter32) {
				*bad = 1;
				count(HPCCD_LOSS_BURSTS, 0);
			}
			slow = *bad;
		} else {
			slow = cfg->p32 && bpf_get_prandom_u32() < cfg->p32;
		}
		if (!slow)
			return TC_ACT_UNSPEC_;   /* no match: the default class */
		skb->priority = x->classid;  /* HTB takes a class id here first */
		count(HPCCD_LOSS_REORDERED, skb->len);
		return TC_ACT_UNSPEC_;
	}
	if (cfg->mode == 1) {
		struct hpccd_loss_ext *x = bpf_map_lookup_elem(&hpccd_loss_ext, &zero);
		__u32 *bad = bpf_map_lookup_elem(&hpccd_loss_state, &zero);
		__u32 p;

		if (!x || !bad)
			return TC_ACT_OK_;
		if (*bad) {
			p = x->p_bad32;
			if (bpf_get_prandom_u32() < x->p_exit32)
				*bad = 0;
		} else {
			p = cfg->p32;
			if (bpf_get_prandom_u32() < x->p_enter32) {
				*bad = 1;
				count(HPCCD_LOSS_BURSTS, 0);
			}
		}
		if (p && bpf_get_prandom_u32() < p) {
			count(HPCCD_LOSS_DROPPED, skb->len);
			return TC_ACT_SHOT_;
		}
		return TC_ACT_OK_;
	}
	if (!cfg->p32)
		return TC_ACT_OK_;
	if (bpf_get_prandom_u32() < cfg->p32) {
		count(HPCCD_LOSS_DROPPED, skb->len);
		return TC_ACT_SHOT_;
	}
	return TC_ACT_OK_;
}
