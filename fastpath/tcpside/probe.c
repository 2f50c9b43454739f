// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * The TCP-side PROBE as bytes (include/hpccd/tcp_probe.h,
 * hpccd_tcpp_probe_build; docs/wire-format.md, "TCP-side probe"), written
 * by the shared writers of include/hpccd/build.h and summed by the one
 * userspace checksum (include/hpccd/csum.h).  daemon/hpccd/tcp_side's
 * probe_packet calls this, and tests/bpf/test_tcp_cc.py decodes its output
 * with the scapy layers of daemon/hpccd/core/wire.py and the shared parser.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "hpccd/build.h"
#include "hpccd/csum.h"
#include "hpccd/tcp_probe.h"

int hpccd_tcpp_probe_build(uint8_t *buf, size_t len, const uint8_t *key, uint64_t probe_seq,
			   uint32_t flow_id, uint32_t ts, uint8_t dscp, uint8_t ecn,
			   uint8_t room)
{
	/* key: saddr[4] daddr[4] sport[2] dport[2] (network order) proto pad[3] */
	size_t l4 = HPCCD_TCP_HLEN + HPCCD_INT_HDR_BYTES + HPCCD_INT_HOP_BYTES * (size_t)room +
		    HPCCD_HDR_BYTES + HPCCD_TAG_BYTES;
	size_t total = HPCCD_IP4_HLEN + l4;
	/* the writers store through the structs: build 4-byte aligned (an
	 * IPv4 packet without Ethernet), then copy */
	uint32_t pkt[(HPCCD_IP4_HLEN + HPCCD_TCP_HLEN + HPCCD_INT_HDR_BYTES +
		      HPCCD_INT_MAX_HOPS * HPCCD_INT_HOP_BYTES + HPCCD_HDR_BYTES + HPCCD_TAG_BYTES) / 4];
	struct iphdr *ip = (struct iphdr *)pkt;
	struct tcphdr *th = (struct tcphdr *)(ip + 1);
	struct hpccd_int_hdr *ih = (struct hpccd_int_hdr *)(th + 1);
	struct hpccd_hdr *h;
	__be32 saddr, daddr;
	__be16 sport, dport;

	if (room > HPCCD_INT_MAX_HOPS)
		return -EINVAL;
	if (len < total)
		return -ENOSPC;
	memcpy(&saddr, key, 4);
	memcpy(&daddr, key + 4, 4);
	memcpy(&sport, key + 8, 2);
	memcpy(&dport, key + 10, 2);
	/* IPv4: DSCP | ECN, DF, TTL 64, TCP; id and checksum 0 (IP_HDRINCL:
	 * the kernel fills them) */
	hpccd__put_ip4(ip, (uint8_t)(dscp << 2 | (ecn & HPCCD_IP_ECN_MASK)), IPPROTO_TCP, saddr, daddr);
	hpccd__put_ip4_len(ip, (uint16_t)total, 0);
	hpccd__put_tcp_probe(th, sport, dport, (uint32_t)probe_seq);
	h = (struct hpccd_hdr *)((uint8_t *)ih + hpccd__put_int(ih, room, 1));
	hpccd__put_hdr(h, HPCCD_T_PROBE, 0, HPCCD_TAG_BYTES, flow_id, probe_seq, 0, ts, 0);
	memset(h + 1, 0, HPCCD_TAG_BYTES);      /* the tag slot the reflector fills */
	hpccd_csum_store(&th->check,
			 hpccd_csum_partial(th, l4, hpccd_csum_pseudo4(saddr, daddr, IPPROTO_TCP,
								       (uint16_t)l4)), 0);
	memcpy(buf, pkt, total);
	return (int)total;
}
