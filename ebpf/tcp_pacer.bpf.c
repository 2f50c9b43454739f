// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * tcp_pacer: how late the kernel's TCP pacing timer fires on this host
 * (issue 19; docs/tcp-side.md, "The pacer's lateness and the trains").
 *
 * Without an fq qdisc a paced TCP flow is paced by TCP itself
 * (tcp_needs_internal_pacing): after each skb it arms tp->pacing_timer, an
 * hrtimer in soft mode, for the next skb's departure time, and
 * tcp_pace_kick sends it when the timer fires.  The timer fires late
 * (the hardware timer's interrupt, then the softirq), and the kernel makes
 * up at most half a slot of that lateness (tcp_update_skb_after_send), so
 * a flow whose skb slot (its size over the pacing rate) is shorter than
 * twice the lateness loses the difference at every skb.  How late is a
 * property of the host (measured: 10-75 us on a two-vCPU VM), so it is
 * measured here rather than assumed: the lateness of every expiry of a
 * timer whose callback is tcp_pace_kick, `now` (the timer base's clock,
 * CLOCK_MONOTONIC) minus the time it was set to expire, into a histogram
 * of HPCCD_PACER_BUCKET_NS buckets.  hpccd.tcp_side.pacer reads it and
 * hpccd.tcp_side.trains sizes the trains from it.
 *
 * The tracepoint fires at every hrtimer expiry of the machine (the ticks
 * too); all but the pacing timers' cost one compare.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "hpccd/kern_user.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* tcp_pace_kick's address (/proc/kallsyms), set by the loader. */
const volatile __u64 pace_fn = 0;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hpccd_pacer_hist);
} hpccd_pacer_late SEC(".maps");

SEC("tp_btf/hrtimer_expire_entry")
int BPF_PROG(hpccd_pacer_expire, struct hrtimer *t, ktime_t *now)
{
	struct hpccd_pacer_hist *h;
	__u32 zero = 0, b;
	__s64 at = 0, late;

	if (!pace_fn || (__u64)t->function != pace_fn)
		return 0;
	if (bpf_probe_read_kernel(&at, sizeof(at), now))
		return 0;
	h = bpf_map_lookup_elem(&hpccd_pacer_late, &zero);
	if (!h)
		return 0;
	late = at - t->node.expires;
	if (late < 0)
		late = 0;             /* expired early: within the base's resolution */
	b = (__u64)late / HPCCD_PACER_BUCKET_NS;
	if (b >= HPCCD_PACER_BUCKETS)
		b = HPCCD_PACER_BUCKETS - 1;
	h->n++;
	h->sum_ns += (__u64)late;
	h->bucket[b & (HPCCD_PACER_BUCKETS - 1)]++;
	return 0;
}
