/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Socket helpers of the two struct_ops congestion controls (tcp_hpcc.bpf.c
 * "hpcc", tcp_dctcp.bpf.c "dctcp"): what both do to a TCP socket the same
 * way.  BPF only, after vmlinux.h; no maps.
 */
#ifndef HPCCD_TCP_SOCK_BPF_H
#define HPCCD_TCP_SOCK_BPF_H

/* The flow's key as tc_tracker keys hpccd_tcp_flows: the 5-tuple as the
 * local sender sees it, addresses and ports in network order, proto 6
 * (hpccd/tcp_cc.h).  On the stack: the verifier does not let a pointer
 * into the socket be a map key. */
static __always_inline void hpccd__sock_flow_key(const struct sock *sk, struct hpccd_flow_key *k)
{
	__builtin_memset(k, 0, sizeof(*k));
	k->saddr = sk->__sk_common.skc_rcv_saddr;
	k->daddr = sk->__sk_common.skc_daddr;
	k->sport = bpf_htons(sk->__sk_common.skc_num);
	k->dport = sk->__sk_common.skc_dport;
	k->proto = 6;                        /* IPPROTO_TCP */
}

/* undo_cwnd after a spurious loss: back to the window before the last
 * reduction (`loss_cwnd`, kept by the ssthresh hook), never below now. */
static __always_inline __u32 hpccd__undo_cwnd(const struct sock *sk, __u32 loss_cwnd)
{
	__u32 cwnd = ((const struct tcp_sock *)sk)->snd_cwnd;

	return cwnd > loss_cwnd ? cwnd : loss_cwnd;
}

#endif /* HPCCD_TCP_SOCK_BPF_H */
