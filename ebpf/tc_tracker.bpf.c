// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * tc_tracker: tc clsact egress program of a host interface that watches
 * the kernel TCP flows this host sends on, for the TCP-side deployment of
 * HPCC++ ([HPCC++2022] section 7.2): the daemon probes a flow only while it
 * has data in flight ([HPCC++2022] section 6.2.1), and learns which flows
 * those are, and how much they sent, from hpccd_tcp_flows.
 *
 * It only observes: every packet leaves with TC_ACT_OK, unchanged (except
 * that a packet whose headers are not in the linear data is linearised
 * that far by bpf_skb_pull_data, which changes no byte on the wire).
 *
 * Per flow (struct hpccd_tcp_flow, key = the 5-tuple as this host, the
 * sender, sees it):
 *  - bytes: TCP payload bytes, retransmissions included; retx_bytes the
 *    part below the snd_nxt already seen;
 *  - snd_nxt: highest seq + payload (+1 for SYN, +1 for FIN), compared in
 *    TCP sequence arithmetic (RFC 9293 section 3.4, modulo 2^32), i.e.
 *    the kernel's SND.NXT.  SYN and FIN are counted, beyond the brief's
 *    "seq + payload", so that snd_nxt equals the cumulative ACK that
 *    acknowledges everything: the daemon can compare the two directly;
 *  - packets: segments on the wire, last_ns / first_ns (CLOCK_MONOTONIC).
 *
 * GSO/TSO: tc egress sees the super-packet before segmentation.  Its
 * skb->len is the whole super-packet (linear part and page frags), and the
 * stack has set the IPv4 total length to skb->len less the link header
 * (__ip_local_out), so the payload is the IPv4 total length less the IP
 * and TCP headers, whatever part of it is linear; the segment count on the
 * wire is skb->gso_segs (0 or 1 for a packet that is not GSO).  The
 * segments of one GSO packet carry consecutive sequence space from the
 * super-packet's seq, so seq + payload is right for snd_nxt too.  Not
 * handled: BIG TCP super-packets over 64 KB, whose total length is 0; the
 * shared parser rejects them (total length below the header) and they are
 * counted as HPCCD_TC_NOT_TCP.  IPv4 BIG TCP is off unless
 * gso_ipv4_max_size is raised on the device, and the lab does not.
 *
 * Not counted: hpccd's own TCP-side probes (probe DSCP and no TCP flag;
 * a real segment of an established connection always has ACK set, RFC
 * 9293 section 3.10.7.4), pure ACKs (no payload, no SYN/FIN/RST: a host
 * that only receives on a flow would otherwise fill the LRU with flows
 * it never sends data on).  Entries are created by a segment with payload
 * or SYN; FIN and RST update an existing entry only.
 *
 * Concurrency: segments of one TCP flow are sent under its socket lock,
 * so the read-modify-write of snd_nxt, last_ns and tcp_flags does not race
 * in practice; the byte and packet counters use atomic adds anyway, since
 * they are what the daemon differentiates into rates.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "hpccd/parse.h"

#define HPCCD_MAPS_TC
#include "hpccd_maps.bpf.h"

#define HPCCD_TC_ACT_OK  0             /* linux/pkt_cls.h: vmlinux.h has no macros */
#define HPCCD_EEXIST     17
#define HPCCD_TCP_FIN    0x01
#define HPCCD_TCP_SYN    0x02
#define HPCCD_TCP_RST    0x04
/* Ethernet + 802.1Q + IPv4 with options + TCP with options: the most
 * bpf_skb_pull_data must make linear to parse any header we look at. */
#define HPCCD_TC_PULL_LEN (14 + 4 + 60 + 60)

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct seg {
	struct hpccd_flow_key key;
	__u32 seq;          /* host order */
	__u32 payload;      /* TCP payload bytes of the (super-)packet */
	__u32 segs;         /* segments on the wire */
	__u8 flags;         /* TCP flag byte (CWR ECE URG ACK PSH RST SYN FIN) */
};

/* Parse Ethernet/IPv4/TCP from the linear data into *s.  Returns the
 * counter slot to charge when the packet is not to be tracked, or -1 when
 * *s is filled. */
static __always_inline int parse_seg(struct __sk_buff *skb, struct seg *s)
{
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	struct hpccd_cursor c = { .pos = data, .end = end };
	struct ethhdr *eth;
	struct iphdr *iph;
	struct tcphdr *th;
	void *l4_end;
	__u32 hdrs, tot;

	if (hpccd__parse_eth(&c, &eth) != HPCCD_ETH_P_IP)
		return HPCCD_TC_NOT_TCP;
	if (hpccd__parse_ip4(&c, &iph, &l4_end) != HPCCD_IPPROTO_TCP)
		return HPCCD_TC_NOT_TCP;   /* also a bad or truncated IPv4 header */
	if (hpccd__parse_tcp(&c, l4_end, &th) < 0)
		return HPCCD_TC_TRUNC;
	if (hpccd__ip4_dscp(iph) == hpccd_cfg_probe_dscp && hpccd__tcp_flags(th) == 0)
		return HPCCD_TC_PROBE;

	/* Payload: see the header comment on GSO. */
	/* IP + TCP header lengths from their fields (checked by the parser)
	 * rather than by subtracting packet pointers, which the verifier
	 * turns into an unknown scalar. */
	hdrs = (__u32)(*(__u8 *)iph & 0xf) * 4 + (__u32)(((__u8 *)th)[12] >> 4) * 4;
	tot = bpf_ntohs(iph->tot_len);                  /* >= hdrs: parser checked */
	s->payload = tot > hdrs ? tot - hdrs : 0;
	s->segs = skb->gso_segs > 1 ? skb->gso_segs : 1;
	s->seq = bpf_ntohl(th->seq);
	s->flags = (__u8)hpccd__tcp_flags(th);   /* low byte: AE is not needed */

	s->key.saddr = iph->saddr;
	s->key.daddr = iph->daddr;
	s->key.sport = th->source;
	s->key.dport = th->dest;
	s->key.proto = HPCCD_IPPROTO_TCP;
	s->key.pad[0] = 0;
	s->key.pad[1] = 0;
	s->key.pad[2] = 0;
	return -1;
}

/* Tell the probe engine (daemon/hpccd/tcp_side/engine.py, fastpath/tcpside/)
 * that a parked flow has data in flight again: a record in hpccd_tcp_wake
 * wakes it from its epoll.  A full ring loses the record; the engine's
 * sweep of parked flows (every 100 ms while it has flows) finds them. */
static __always_inline void wake(const struct hpccd_flow_key *k, __u64 now, __u32 snd_nxt)
{
	struct hpccd_tcp_wake w;

	__builtin_memcpy(&w.key, k, sizeof(w.key));
	w.ns = now;
	w.snd_nxt = snd_nxt;
	w.pad = 0;
	bpf_ringbuf_output(&hpccd_tcp_wake, &w, sizeof(w), 0);
}

SEC("tc")
int hpccd_tc_tracker(struct __sk_buff *skb)
{
	struct hpccd_tcp_flow *f, init;
	struct seg s;
	__u32 nxt, ahead, want, parked;
	__u64 now;
	int slot, err;

	__builtin_memset(&s, 0, sizeof(s));
	slot = parse_seg(skb, &s);
	if (slot >= 0) {
		/* Maybe the headers are not (all) in the linear data: pull
		 * them in and parse once more, but only when the linear part
		 * is shorter than the longest headers and the packet longer
		 * than it.  The local TCP stack builds its headers in the
		 * linear part, so this is rare and costs nothing otherwise. */
		want = skb->len < HPCCD_TC_PULL_LEN ? skb->len : HPCCD_TC_PULL_LEN;
		if ((void *)(long)skb->data + want > (void *)(long)skb->data_end &&
		    !bpf_skb_pull_data(skb, want))
			slot = parse_seg(skb, &s);
	}
	if (slot >= 0)
		goto count;

	if (!s.payload && !(s.flags & (HPCCD_TCP_SYN | HPCCD_TCP_FIN | HPCCD_TCP_RST))) {
		slot = HPCCD_TC_PURE_ACK;
		goto count;
	}

	nxt = s.seq + s.payload + !!(s.flags & HPCCD_TCP_SYN) + !!(s.flags & HPCCD_TCP_FIN);
	now = bpf_ktime_get_ns();
	f = bpf_map_lookup_elem(&hpccd_tcp_flows, &s.key);
	if (!f) {
		if (!s.payload && !(s.flags & HPCCD_TCP_SYN)) {
			slot = HPCCD_TC_UNTRACKED_END;   /* FIN/RST of a flow we never saw */
			goto count;
		}
		__builtin_memset(&init, 0, sizeof(init));
		init.bytes = s.payload;
		init.packets = s.segs;
		init.first_ns = now;
		init.last_ns = now;
		init.snd_nxt = nxt;
		init.tcp_flags = s.flags;
		err = bpf_map_update_elem(&hpccd_tcp_flows, &s.key, &init, BPF_NOEXIST);
		if (!err) {
			/* A new flow starts parked: its first segment with
			 * payload wakes the probe engine (wake()). */
			parked = 1;
			if (s.payload)
				wake(&s.key, now, nxt);
			else
				bpf_map_update_elem(&hpccd_tcp_park, &s.key, &parked, BPF_ANY);
			slot = HPCCD_TC_NEW_FLOW;
			goto count;
		}
		/* Created by another CPU in between: update that entry. */
		f = err == -HPCCD_EEXIST ? bpf_map_lookup_elem(&hpccd_tcp_flows, &s.key) : NULL;
		if (!f) {
			slot = HPCCD_TC_MAP_FAIL;
			goto count;
		}
	}

	__sync_fetch_and_add(&f->bytes, s.payload);
	__sync_fetch_and_add(&f->packets, s.segs);
	/* Bytes below the snd_nxt seen so far are retransmitted (TCP
	 * sequence arithmetic: the difference as a signed 32-bit number). */
	ahead = f->snd_nxt - s.seq;
	if ((__s32)ahead > 0 && s.payload)
		__sync_fetch_and_add(&f->retx_bytes, ahead < s.payload ? ahead : s.payload);
	if ((__s32)(nxt - f->snd_nxt) > 0)
		f->snd_nxt = nxt;
	f->tcp_flags |= s.flags;
	f->last_ns = now;
	/* Data for a parked flow: the one delete that succeeds wakes the
	 * probe engine, once per park. */
	if (s.payload && !bpf_map_delete_elem(&hpccd_tcp_park, &s.key))
		wake(&s.key, now, f->snd_nxt);
	slot = HPCCD_TC_TRACKED;

count:
	hpccd__count(&hpccd_tc_cnt, (__u32)slot, skb->len);
	return HPCCD_TC_ACT_OK;
}
