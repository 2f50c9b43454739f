/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Maps and load-time settings of the hpccd BPF programs.  Kernel-only:
 * included once by each ebpf/x.bpf.c, after vmlinux.h and bpf_helpers.h.
 * The key and value types are in hpccd/kern_user.h, shared with userspace.
 *
 * Each program says which maps it uses by defining HPCCD_MAPS_XDP and/or
 * HPCCD_MAPS_TC before the include, because libbpf creates every map an
 * object defines, used or not: the tc object should not carry an XSKMAP.
 * The maps are not pinned here (no `pinning` attribute): the loader decides
 * where they live, and `bpftool prog loadall` in the tests leaves nothing
 * behind under /sys/fs/bpf.
 *
 * Map names have at most 15 characters, the kernel's limit (BPF_OBJ_NAME_LEN),
 * so `bpftool map show name X` finds them by the name used here.
 *
 * Sizes are #ifndef-overridable (-DHPCCD_TCP_FLOWS_MAX=...) for builds
 * that need bigger tables; counter arrays are sized by their enum.
 *
 * Load-time settings are `const volatile` rodata: the loader writes them
 * between open and load, the verifier then sees constants and prunes the
 * branches they turn off.  Things that change at run time (addresses, the
 * tag key) are in maps instead.
 */
#ifndef HPCCD_MAPS_BPF_H
#define HPCCD_MAPS_BPF_H

#include "hpccd/kern_user.h"

#ifndef HPCCD_TCP_FLOWS_MAX
#define HPCCD_TCP_FLOWS_MAX 16384  /* kernel TCP flows tracked at once (LRU) */
#endif
#ifndef HPCCD_TCP_TELEM_MAX
#define HPCCD_TCP_TELEM_MAX 4096   /* TCP-side flows being probed at once */
#endif
#ifndef HPCCD_TCP_RESP_RB_BYTES
#define HPCCD_TCP_RESP_RB_BYTES (1 << 18) /* PROBE_RESP records: 1,900 of 136 bytes */
#endif
#ifndef HPCCD_TCP_WAKE_RB_BYTES
#define HPCCD_TCP_WAKE_RB_BYTES (1 << 16) /* wake records: 1,300 of 40 bytes */
#endif
#ifndef HPCCD_LOCAL_ADDRS_MAX
#define HPCCD_LOCAL_ADDRS_MAX 16   /* IPv4 addresses of this host */
#endif
#ifndef HPCCD_SW_DEP_ENTRIES
#define HPCCD_SW_DEP_ENTRIES 16384 /* lab switch: records waiting for departure (LRU) */
#endif
#ifndef HPCCD_PROBE_SOURCES_MAX
#define HPCCD_PROBE_SOURCES_MAX 8192 /* probe sources rate-limited at once (LRU) */
#endif

/* ---- load-time settings (rodata) ---------------------------------------- */

/* DSCP of TCP-side probes and responses (docs/wire-format.md). */
const volatile __u8 hpccd_cfg_probe_dscp = HPCCD_PROBE_DSCP_DEFAULT;

#ifdef HPCCD_MAPS_XDP
/* UDP port of the native transport, host order. */
const volatile __u16 hpccd_cfg_udp_port = HPCCD_UDP_PORT_DEFAULT;
/* HPCCD_CFG_* bits (hpccd/kern_user.h). */
const volatile __u32 hpccd_cfg_flags = HPCCD_CFG_DEFAULT;
/* PROBEs answered per source: per second (0: no limit), burst. */
const volatile __u32 hpccd_cfg_probe_rate = HPCCD_PROBE_RATE_DEFAULT;
const volatile __u32 hpccd_cfg_probe_burst = HPCCD_PROBE_BURST_DEFAULT;
#endif

/* ---- maps of the host XDP program --------------------------------------- */

#ifdef HPCCD_MAPS_XDP
/* AF_XDP sockets by rx queue index: the daemon's fast path binds one per queue. */
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, HPCCD_XSKS_MAX);
	__type(key, __u32);
	__type(value, __u32);
} hpccd_xsks SEC(".maps");

/* Per-CPU counters of xdp_host, one slot per enum hpccd_xdp_counter. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HPCCD_XDP_COUNTERS);
	__type(key, __u32);
	__type(value, struct hpccd_counter);
} hpccd_xdp_cnt SEC(".maps");

/* Last PROBE_RESP telemetry per TCP-side flow, keyed as its sender (this host) sees it. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HPCCD_TCP_TELEM_MAX);
	__type(key, struct hpccd_flow_key);
	__type(value, struct hpccd_tcp_telem);
} hpccd_telem SEC(".maps");

/* Every PROBE_RESP stored in hpccd_telem, with its key (struct
 * hpccd_tcp_resp), for the probe engine that sleeps on it. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, HPCCD_TCP_RESP_RB_BYTES);
} hpccd_telem_rb SEC(".maps");

/* SipHash-2-4 key of the integrity tag, entry 0; all zero = not configured. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hpccd_tag_key);
} hpccd_tag_key SEC(".maps");

/* Probe rate limit: per source address (network order), the GCRA's
 * theoretical arrival time of its next probe (ns, bpf_ktime_get_ns). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, HPCCD_PROBE_SOURCES_MAX);
	__type(key, __be32);
	__type(value, __u64);
} hpccd_probe_rl SEC(".maps");

/* IPv4 addresses of this host (network order); the value is unused (write 1). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HPCCD_LOCAL_ADDRS_MAX);
	__type(key, __be32);
	__type(value, struct hpccd_local_addr);
} hpccd_addrs SEC(".maps");
#endif /* HPCCD_MAPS_XDP */

#if defined(HPCCD_MAPS_XDP) || defined(HPCCD_MAPS_SW_DEPART)
/* The lab's hook (xdp_host.bpf.c lab_hook(), docs/lab.md "The last hop
 * into a host"): empty unless the lab fills it; slot HPCCD_LAB_HOOK_PROG
 * the lab's program, HPCCD_LAB_HOOK_BACK xdp_host itself. */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, HPCCD_LAB_HOOK_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} hpccd_lab_hook SEC(".maps");

/* Per CPU: 1 while a packet goes from the lab's program back into xdp_host. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} hpccd_lab_in SEC(".maps");
#endif

/* ---- maps of the tc egress tracker --------------------------------------- */

#ifdef HPCCD_MAPS_TC
/* Kernel TCP flows this host sends on; LRU so idle flows age out without a sweeper. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, HPCCD_TCP_FLOWS_MAX);
	__type(key, struct hpccd_flow_key);
	__type(value, struct hpccd_tcp_flow);
} hpccd_tcp_flows SEC(".maps");

/* Flows the probe engine parked (no data in flight, no probe out): the
 * next segment with payload deletes the entry and writes a wake record.
 * The tracker parks a flow itself when it creates its entry. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, HPCCD_TCP_FLOWS_MAX);
	__type(key, struct hpccd_flow_key);
	__type(value, __u32);
} hpccd_tcp_park SEC(".maps");

/* Wake records (struct hpccd_tcp_wake) for the probe engine. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, HPCCD_TCP_WAKE_RB_BYTES);
} hpccd_tcp_wake SEC(".maps");

/* Per-CPU counters of tc_tracker, one slot per enum hpccd_tc_counter. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HPCCD_TC_COUNTERS);
	__type(key, __u32);
	__type(value, struct hpccd_counter);
} hpccd_tc_cnt SEC(".maps");
#endif /* HPCCD_MAPS_TC */

/* ==== maps and settings of the software INT switch (int_switch.bpf.c) ==== */

#ifdef HPCCD_MAPS_SWITCH
#ifndef HPCCD_SW_QSAMP_BYTES
#define HPCCD_SW_QSAMP_BYTES (1 << 22)  /* queue-sample ring: 74k records, ~7 s of one busy port */
#endif

#ifndef HPCCD_MAPS_XDP
/* UDP port of the native transport, host order (as in the XDP group). */
const volatile __u16 hpccd_cfg_udp_port = HPCCD_UDP_PORT_DEFAULT;
#endif
/* Queue sampler interval per port, ns; 0 turns the sampler off. */
const volatile __u64 hpccd_cfg_sample_ns = 100000;
/* The switch's network namespace (its inode number): the dequeue
 * tracepoint fires for every qdisc of the machine and a lab loads one
 * object per switch, so each takes only its own; 0: every namespace. */
const volatile __u32 hpccd_cfg_netns_ino = 0;

/* Per-port sampler state (kernel-only): the lock makes "at most one sample
 * per interval" hold across CPUs without cmpxchg (not in clang's default
 * BPF ISA). */
struct hpccd_sw_state {
	struct bpf_spin_lock lock;
	__u32 pad;
	__u64 last_sample_ns;
	__u64 rx_bytes;           /* bytes that arrived at the queue while
				   * HPCCD_SW_F_RX_BYTES is set (atomic adds) */
};

/* Port configuration by ifindex (struct hpccd_sw_port); unconfigured ports forward untouched. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HPCCD_SW_PORTS_MAX);
	__type(key, __u32);
	__type(value, struct hpccd_sw_port);
} hpccd_sw_ports SEC(".maps");

/* Sampler state by port number. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HPCCD_SW_PORTS_MAX);
	__type(key, __u32);
	__type(value, struct hpccd_sw_state);
} hpccd_sw_state SEC(".maps");

#endif /* HPCCD_MAPS_SWITCH */

/* The switch's maps that the lab's program in a host's xdp_host hook
 * (int_depart_xdp.bpf.c, HPCCD_MAPS_SW_DEPART) shares with the switch of
 * that host's last hop (the loader reuses the switch's maps). */
#if defined(HPCCD_MAPS_SWITCH) || defined(HPCCD_MAPS_SW_DEPART)
#if defined(HPCCD_MAPS_SW_DEPART) && !defined(HPCCD_MAPS_XDP) && !defined(HPCCD_MAPS_SWITCH)
/* UDP port of the native transport, host order (as in the XDP group). */
const volatile __u16 hpccd_cfg_udp_port = HPCCD_UDP_PORT_DEFAULT;
#endif
/* Per-CPU counters, slot port * HPCCD_SW_COUNTERS + enum hpccd_sw_counter. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HPCCD_SW_PORTS_MAX * HPCCD_SW_COUNTERS);
	__type(key, __u32);
	__type(value, struct hpccd_counter);
} hpccd_sw_cnt SEC(".maps");

/* Records waiting for their packet's departure (struct hpccd_sw_dep), by
 * the kernel address of the packet's sk_buff (the same object from the
 * switch's tc egress to the far end's tc ingress).  LRU: an entry whose
 * packet never reaches the far end (dropped by the bfifo, taken by an XDP
 * program before tc ingress) is evicted by newer ones.  Only stamped
 * packets (hpccd packets with COLLECT, TCP-side probes) have one: 16384 is
 * more than the lab's buffers (1 MB a port) hold of them at once. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, HPCCD_SW_DEP_ENTRIES);
	__type(key, __u64);
	__type(value, struct hpccd_sw_dep);
} hpccd_sw_dep SEC(".maps");

/* Departures of records on ports whose far end is a host
 * (HPCCD_SW_F_DEPART_XDP), by hop word and port (struct
 * hpccd_sw_depw_key): filed by the tracepoint qdisc_dequeue, taken by the
 * lab's program in the host's xdp_host hook.  LRU for the same reason as
 * hpccd_sw_dep (an entry whose packet the host's tc ingress consumed
 * instead, or that the bfifo dropped, ages out). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, HPCCD_SW_DEP_ENTRIES);
	__type(key, struct hpccd_sw_depw_key);
	__type(value, struct hpccd_sw_depw_val);
} hpccd_sw_depw SEC(".maps");
#endif

#ifdef HPCCD_MAPS_SWITCH

/* Queue samples (struct hpccd_sw_sample) for the experiment runner. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, HPCCD_SW_QSAMP_BYTES);
} hpccd_sw_qsamp SEC(".maps");
#endif /* HPCCD_MAPS_SWITCH */

/* Count one frame of `bytes` in slot `idx` of a per-CPU counter array.
 * Per-CPU: XDP and tc run with preemption (migration) disabled, so the
 * plain += cannot race with another writer of the same slot. */
static __always_inline void hpccd__count(void *map, __u32 idx, __u64 bytes)
{
	struct hpccd_counter *c = bpf_map_lookup_elem(map, &idx);

	if (c) {
		c->packets += 1;
		c->bytes += bytes;
	}
}

#endif /* HPCCD_MAPS_BPF_H */
