// SPDX-License-Identifier: BSD-2-Clause
/*
 * The calls of include/hpccd/transport.h: create, start, stop, flows,
 * snapshots, destroy.  Every call but create takes the engine lock.
 */
#include "tp.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

static int __attribute__((format(printf, 5, 0)))
tp__vfail(char *buf, size_t size, const char *where, int rc, const char *fmt, va_list ap)
{
	int n;

	if (!buf || !size)
		return rc;
	n = snprintf(buf, size, "%s: ", where);
	if (n >= 0 && (size_t)n < size)
		vsnprintf(buf + n, size - (size_t)n, fmt, ap);
	return rc;
}

static int __attribute__((format(printf, 6, 7)))
create_fail(char *buf, size_t size, const char *ifname, uint32_t q, int rc, const char *fmt, ...)
{
	char where[IF_NAMESIZE + 32];
	va_list ap;

	snprintf(where, sizeof(where), "%s queue %u", ifname ? ifname : "(null)", q);
	va_start(ap, fmt);
	tp__vfail(buf, size, where, rc, fmt, ap);
	va_end(ap);
	return rc;
}

int tp__fail(struct hpccd_tp *t, int rc, const char *fmt, ...)
{
	char where[IF_NAMESIZE + 32];
	va_list ap;

	snprintf(where, sizeof(where), "%s queue %u", t->ifname, t->queue_id);
	va_start(ap, fmt);
	tp__vfail(t->err, sizeof(t->err), where, rc, fmt, ap);
	va_end(ap);
	return rc;
}

const char *hpccd_tp__error(const struct hpccd_tp *t)
{
	return t ? t->err : "no engine";
}

void hpccd_tp_config_default(struct hpccd_tp_config *c)
{
	memset(c, 0, sizeof(*c));
	c->rx_frames = 4096;
	c->tx_frames = 4096;
	c->frame_size = HPCCD_TP_FRAME_MAX;      /* docs/transport.md "Frame size" */
	c->flags = HPCCD_TP_F_COPY | HPCCD_TP_F_NEED_WAKEUP;
	c->udp_port = HPCCD_UDP_PORT_DEFAULT;
	c->probe_dscp = HPCCD_PROBE_DSCP_DEFAULT;
	c->sink = HPCCD_TP_SINK_VERIFY;
	c->sink_fd = -1;
	c->ack_every = 1;
	c->delack_ns = 100000;
	c->nack_gap_ns = 200000;
	c->sndbuf_bytes = 16u << 20;
	c->coalesce_ns = 20000;
	c->rx_idle_ns = 30000000000ull;
	c->rx_peer_max = UINT32_MAX;             /* state init: rx_flows / 4 */
	c->max_flows = HPCCD_TP_FLOWS_DEFAULT;
	c->cpu = -1;
	c->rx_flows = HPCCD_TP_FLOWS_DEFAULT;
	c->rx_window = UINT32_MAX;               /* create(): 3/4 of the RX ring */
	hpccd_hpcc_params_default(&c->rx_hpcc);
	c->cnp_ns = 50000;                       /* DCQCN's N (cnp.c) */
}

void hpccd_tp_flow_cfg_default(struct hpccd_tp_flow_cfg *c)
{
	memset(c, 0, sizeof(*c));
	c->algo = HPCCD_ALGO_HPCC;
	c->src = HPCCD_TP_SRC_PATTERN;
	c->mtu = 1500;
	c->int_mode = HPCCD_TP_INT_EVERY;
	c->int_every = 1;
	c->int_room = HPCCD_INT_DEFAULT_HOPS;
	c->line_rate_bps = 1000000000ull;
	c->burst_ns = 40000;
	c->rto_min_ns = 5000000;
	c->rto_max_ns = 200000000;
	c->timeout_ns = 10000000000ull;
	c->ecn = 1;
	c->probe_timeout_ns = 1000000;
	hpccd_hpcc_params_default(&c->hpcc);
	hpccd_dctcp_params_default(&c->dctcp);
	hpccd_ldcp_params_default(&c->ldcp);
	hpccd_dcqcn_params_default(&c->dcqcn);
	hpccd_timely_params_default(&c->timely);
}

static uint32_t pow2_floor(uint32_t v)
{
	uint32_t p = 1;

	while (p <= v / 2)
		p <<= 1;
	return p;
}

/* A flow table: zeroed, in 2 MB pages where the kernel gives them
 * (transparent huge pages asked for with madvise: the default of
 * Debian's kernels is "madvise").  With 10,000 flows the tables span
 * tens of MB, 8,000 and more 4 KB pages, more than the TLB holds: each
 * packet of a flow not seen for 10,000 packets paid page walks besides
 * its cache misses (docs/transport.md "Flows").  The table starts `skew`
 * bytes past the boundary: 2 MB-aligned tables (and the UMEM's 4 KB-aligned
 * frames) would put flow 0's lines of each in the same first-level cache
 * sets (callgrind: 0.6 -> 2.0 misses a packet with one flow, unskewed).
 * NULL if out of memory. */
#define TP_HUGE (2u << 20)
static void *tp_table_alloc(size_t len, size_t skew)
{
	size_t n = (len + skew + TP_HUGE - 1) & ~(size_t)(TP_HUGE - 1);
	char *m = mmap(NULL, n + TP_HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	char *p;

	if (m == MAP_FAILED)
		return NULL;
	/* on a 2 MB boundary (the kernel maps huge pages only there): the
	 * slack before and after goes back */
	p = (char *)(((uintptr_t)m + TP_HUGE - 1) & ~(uintptr_t)(TP_HUGE - 1));
	if (p > m)
		munmap(m, (size_t)(p - m));
	munmap(p + n, (size_t)(m + TP_HUGE - p));
	(void)madvise(p, n, MADV_HUGEPAGE);   /* a hint: 4 KB pages without it */
	/* every page now, not at a packet's first touch in the engine's
	 * thread (a 2 MB fault may compact memory: milliseconds) */
	memset(p, 0, n);
	return p + skew;
}

static void tp_table_free(void *p, size_t len, size_t skew)
{
	if (p)
		munmap((char *)p - skew, (len + skew + TP_HUGE - 1) & ~(size_t)(TP_HUGE - 1));
}

/* The tables' skews: odd numbers of lines, clear of the frames' headers
 * (lines 0-3 of a page) and of each other's first flow. */
#define SKEW_FLOWS (9 * 64)
#define SKEW_SNODE (23 * 64)
#define SKEW_RXT (41 * 64)

static void rx_home_keys(struct hpccd_tp *t, uint64_t seed);

/* The engine's state from t->cfg, socket aside: flow tables, the free
 * stacks of the UMEM's frames (RX frames first, then TX), the ring size,
 * the receive window and the hold slots.  Also what the protocol tests
 * build their engines with (tests/unit/engine/).  -ENOMEM, or 0. */
int tp__state_init(struct hpccd_tp *t)
{
	const struct hpccd_tp_config *c = &t->cfg;
	uint32_t frames = c->rx_frames + c->tx_frames, i;
	struct timespec ts;

	/* the flow tables in 2 MB pages where the kernel gives them
	 * (tp_table_alloc) */
	t->flows = tp_table_alloc((size_t)c->max_flows * sizeof(*t->flows), SKEW_FLOWS);
	t->rxt = tp_table_alloc((size_t)c->rx_flows * sizeof(*t->rxt), SKEW_RXT);
	t->rx_free = malloc(sizeof(uint64_t) * c->rx_frames);
	t->tx_free = malloc(sizeof(uint64_t) * c->tx_frames);
	t->refile = malloc(sizeof(int32_t) * c->max_flows);
	t->free_slot = malloc(sizeof(int32_t) * c->max_flows);
	t->delack = malloc(sizeof(int32_t) * c->rx_flows);
	t->rx_used = malloc(sizeof(int32_t) * c->rx_flows);
	t->peers = calloc(2 * (size_t)c->rx_flows, sizeof(*t->peers));
	t->snode = tp_table_alloc((size_t)c->max_flows * sizeof(*t->snode), SKEW_SNODE);
	if ( !t->flows || !t->rxt || !t->rx_free || !t->tx_free || !t->refile || !t->delack ||
	    !t->rx_used ||
	    !t->free_slot || !t->peers ||
	    !t->snode ||
	    wheel_init(&t->pace, PACE_SHIFT, PACE_SLOTS, PACE_FAR_SHIFT, PACE_FAR_SLOTS,
		       &t->snode[0].pace, sizeof(*t->snode)) ||
	    wheel_init(&t->timer, TIMER_SHIFT, TIMER_SLOTS, 0, 0, &t->snode[0].timer,
		       sizeof(*t->snode)))
		return -ENOMEM;
	list_init(&t->ready, &t->snode[0].ready, sizeof(*t->snode));
	wheel_start(&t->pace, now_ns());
	wheel_start(&t->timer, now_ns());
	t->slot_mask = c->max_flows - 1;
	for (i = 0; i < c->max_flows; i++)               /* slot 0 first */
		t->free_slot[i] = (int32_t)(c->max_flows - 1 - i);
	t->n_free = c->max_flows;
	t->rx_mask = c->rx_flows - 1;
	t->rx_probe_max = c->rx_flows < TP_RX_PROBE_MAX ? c->rx_flows : TP_RX_PROBE_MAX;
	t->peer_mask = 2 * c->rx_flows - 1;      /* at least TP_RX_PROBE_MAX entries: receiver.c */
	t->delack_min = NO_DEADLINE;
	t->ring = pow2_floor(c->rx_frames < RING_MAX ? c->rx_frames : RING_MAX);
	if (pow2_floor(c->tx_frames) < t->ring)
		t->ring = pow2_floor(c->tx_frames);
	if (t->cfg.rx_window > t->ring)
		t->cfg.rx_window = t->cfg.rx_window == UINT32_MAX ? t->ring / 4 * 3 : t->ring;
	if (t->cfg.rx_peer_max == UINT32_MAX)
		t->cfg.rx_peer_max = c->rx_flows / 4;
	/* hold slots per receiver flow: the whole window's packets */
	t->hold_cap = pow2_floor(t->cfg.rx_window ? t->cfg.rx_window : t->ring);
	if (t->hold_cap < t->cfg.rx_window)
		t->hold_cap <<= 1;
	if (t->hold_cap < 64)
		t->hold_cap = 64;
	for (i = 0; i < c->rx_frames; i++)
		t->rx_free[i] = (uint64_t)(c->rx_frames - 1 - i) * c->frame_size;
	t->n_rx_free = c->rx_frames;
	for (i = 0; i < c->tx_frames; i++)
		t->tx_free[i] = (uint64_t)(frames - 1 - i) * c->frame_size;
	t->n_tx_free = c->tx_frames;
	clock_gettime(CLOCK_REALTIME, &ts);
	t->id_gen = (uint32_t)splitmix64((uint64_t)ts.tv_nsec ^ (uint64_t)getpid() << 32 ^
					 (uint64_t)(uintptr_t)t);
	rx_home_keys(t, splitmix64((uint64_t)t->id_gen << 32 ^ (uint64_t)ts.tv_sec));
	return 0;
}

/* tp_rx_home()'s keys (tp.h).  The multiplier is odd (a permutation of
 * the slots) and spreads: slots s and s + k of a sender land at least
 * rx_flows / (16 k) apart for every k up to 64, as the golden ratio's
 * multiples do (the three-gap theorem: then one sender's homes are evenly
 * spread, and another sender's flows probe past them a slot or two).  A
 * random multiplier close to a fraction of small denominator (1, 3,
 * rx_flows / 2 + 1...) would put a sender's flows in long runs, which the
 * flows of other senders landing in them would probe to the end. */
static void rx_home_keys(struct hpccd_tp *t, uint64_t seed)
{
	uint32_t size = t->rx_mask + 1, tries, k;

	t->rx_key = (uint32_t)(seed >> 32);
	for (tries = 0; tries < 64; tries++) {
		uint32_t m = (uint32_t)(seed = splitmix64(seed)) | 1;

		for (k = 1; k <= 64 && k < size / 2; k++) {
			uint32_t r = (k * m) & t->rx_mask;
			uint32_t d = r < size - r ? r : size - r;

			if ((uint64_t)d * 16 * k < size)
				break;
		}
		if (k > 64 || k >= size / 2) {
			t->rx_mul = m;
			return;
		}
	}
	t->rx_mul = 0x9e3779b9u;                 /* odd: the golden ratio's */
}

void tp__state_free(struct hpccd_tp *t)
{
	if (t->rxt) {
		uint32_t i;

		for (i = 0; i < t->cfg.rx_flows; i++)
			rx_release(t, &t->rxt[i]);
	}
	tp_table_free(t->flows, (size_t)t->cfg.max_flows * sizeof(*t->flows), SKEW_FLOWS);
	tp_table_free(t->rxt, (size_t)t->cfg.rx_flows * sizeof(*t->rxt), SKEW_RXT);
	free(t->rx_free);
	free(t->tx_free);
	free(t->refile);
	free(t->free_slot);
	free(t->delack);
	free(t->rx_used);
	free(t->peers);
	tp_table_free(t->snode, (size_t)t->cfg.max_flows * sizeof(*t->snode), SKEW_SNODE);
	wheel_free(&t->pace);
	wheel_free(&t->timer);
}

int hpccd_tp__create(const char *ifname, uint32_t queue_id, const struct hpccd_tp_config *cfg,
		     struct hpccd_tp **out, char *err, size_t err_size)
{
	struct xdp_options opts;
	struct hpccd_tp_config c;
	struct hpccd_hpcc probe;
	struct hpccd_tp *t;
	const char *why = NULL;
	uint32_t frames;
	socklen_t optlen;
	int rc, sb;

	if (err && err_size)
		err[0] = '\0';
	if (out)
		*out = NULL;
	if (!ifname || !out)
		return create_fail(err, err_size, ifname, queue_id, -EINVAL, "NULL argument");
	if (cfg)
		c = *cfg;
	else
		hpccd_tp_config_default(&c);
	if (strlen(ifname) >= IF_NAMESIZE)
		return create_fail(err, err_size, ifname, queue_id, -EINVAL, "interface name too long");
	if (c.frame_size != HPCCD_TP_FRAME_MIN && c.frame_size != HPCCD_TP_FRAME_MAX)
		return create_fail(err, err_size, ifname, queue_id, -EINVAL, "frame size %u: %d or %d",
				   c.frame_size, HPCCD_TP_FRAME_MIN, HPCCD_TP_FRAME_MAX);
	if (c.rx_frames < 64 || c.tx_frames < 2 * ACK_RESERVE || c.rx_frames > (1u << 20) ||
	    c.tx_frames > (1u << 20))
		return create_fail(err, err_size, ifname, queue_id, -EINVAL,
				   "%u RX / %u TX frames: 64 / %u to 2^20 each", c.rx_frames,
				   c.tx_frames, 2 * ACK_RESERVE);
	if ((c.flags & HPCCD_TP_F_COPY) && (c.flags & HPCCD_TP_F_ZEROCOPY))
		return create_fail(err, err_size, ifname, queue_id, -EINVAL,
				   "copy and zero-copy both forced");
	if (c.max_flows < HPCCD_TP_FLOWS_MIN || c.max_flows > HPCCD_TP_FLOWS_MAX ||
	    (c.max_flows & (c.max_flows - 1)) || c.rx_flows < HPCCD_TP_FLOWS_MIN ||
	    c.rx_flows > HPCCD_TP_FLOWS_MAX || (c.rx_flows & (c.rx_flows - 1)))
		return create_fail(err, err_size, ifname, queue_id, -EINVAL,
				   "%u sender / %u receiver flows: powers of two from %d to %d",
				   c.max_flows, c.rx_flows, HPCCD_TP_FLOWS_MIN, HPCCD_TP_FLOWS_MAX);
	if (c.cpu < -1 || c.cpu >= CPU_SETSIZE)
		return create_fail(err, err_size, ifname, queue_id, -EINVAL, "CPU %d: -1 (any) or "
				   "a CPU number", c.cpu);
	if (!c.ack_every || !c.udp_port || c.probe_dscp > 63)
		return create_fail(err, err_size, ifname, queue_id, -EINVAL,
				   "ack_every %u, udp port %u, dscp %u", c.ack_every, c.udp_port,
				   c.probe_dscp);
	if (c.sink != HPCCD_TP_SINK_VERIFY && c.sink != HPCCD_TP_SINK_COUNT &&
	    !(c.sink == HPCCD_TP_SINK_FD && c.sink_fd >= 0))
		return create_fail(err, err_size, ifname, queue_id, -EINVAL,
				   "sink %u (fd %d)", c.sink, c.sink_fd);
	if (hpccd_hpcc_init(&probe, &c.rx_hpcc, HPCCD_ALGO_RXHPCC, &why))
		return create_fail(err, err_size, ifname, queue_id, -EINVAL,
				   "receiver Rx-HPCC parameters: %s", why);

	t = calloc(1, sizeof(*t));
	if (!t)
		return create_fail(err, err_size, ifname, queue_id, -ENOMEM, "out of memory");
	pthread_mutex_init(&t->lock, NULL);
	memcpy(t->ifname, ifname, strlen(ifname) + 1);
	t->queue_id = queue_id;
	t->cfg = c;
	t->fd = -1;
	t->efd = -1;
	t->epfd = t->tfd = t->cefd = -1;
	t->ifindex = if_nametoindex(ifname);
	if (!t->ifindex) {
		rc = create_fail(err, err_size, ifname, queue_id, -ENODEV,
				 "no such interface in this network namespace");
		goto free_t;
	}
	frames = c.rx_frames + c.tx_frames;
	if (tp__state_init(t)) {
		rc = create_fail(err, err_size, ifname, queue_id, -ENOMEM, "out of memory");
		goto free_t;
	}
	t->area_len = (size_t)frames * c.frame_size;
	t->area = mmap(NULL, t->area_len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (t->area == MAP_FAILED) {
		t->area = NULL;
		rc = create_fail(err, err_size, ifname, queue_id, -errno,
				 "mmap of a %zu-byte UMEM", t->area_len);
		goto free_t;
	}
	{
		const char *what = "";
		uint16_t bind = (uint16_t)(c.flags & (HPCCD_TP_F_COPY | HPCCD_TP_F_ZEROCOPY |
						      HPCCD_TP_F_NEED_WAKEUP));

		if (!(c.flags & HPCCD_TP_F_NO_SG))
			bind |= XDP_USE_SG;
		/* the completion ring never full: > frames in flight; every TX
		 * frame fits in the TX ring */
		rc = xsk_open(t, queue_id, t->ring, pow2_floor(c.tx_frames) * 2, t->ring,
			      pow2_floor(c.tx_frames), bind, !!(c.flags & HPCCD_TP_F_CSUM_OFFLOAD),
			      &what);
		if (rc) {
			create_fail(err, err_size, ifname, queue_id, rc,
				    "AF_XDP socket (%s, %u frames, %s mode)", what, frames,
				    (c.flags & HPCCD_TP_F_ZEROCOPY) ? "zero-copy" :
				    (c.flags & HPCCD_TP_F_COPY) ? "copy" : "any");
			goto unmap;
		}
	}
	t->st.sg = (uint32_t)t->sg;
	/* Copy mode: each frame in flight is an skb charged to the socket's
	 * send buffer until it is freed, possibly at the far end of the lab;
	 * the default 208 KB would cap the bytes in flight. */
	sb = c.sndbuf_bytes > (1u << 30) ? (1 << 30) : (int)c.sndbuf_bytes;
	if (sb > 0)
		setsockopt(t->fd, SOL_SOCKET, SO_SNDBUFFORCE, &sb, sizeof(sb));
	t->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (t->efd < 0) {
		rc = create_fail(err, err_size, ifname, queue_id, -errno, "eventfd");
		goto del_sock;
	}
	if (c.flags & HPCCD_TP_F_RUN_IN_CALLER) {
		const char *what = "";

		rc = tp__rtc_open(t, &what);
		if (rc) {
			create_fail(err, err_size, ifname, queue_id, rc,
				    "run to completion: %s", what);
			tp__rtc_close(t);
			close(t->efd);
			goto del_sock;
		}
	}
	memset(&opts, 0, sizeof(opts));
	optlen = sizeof(opts);
	if (getsockopt(t->fd, SOL_XDP, XDP_OPTIONS, &opts, &optlen) == 0)
		t->zerocopy = !!(opts.flags & XDP_OPTIONS_ZEROCOPY);
	/* Copy mode only: the kernel builds a CHECKSUM_PARTIAL skb, which a
	 * device without checksum offload gets completed in software
	 * (validate_xmit_skb); a zero-copy driver honours the request only if
	 * it implements it (netdev xsk-features tx-checksum), not checked here. */
	t->st.tx_csum_offload = (uint32_t)(t->tx_md && (c.flags & HPCCD_TP_F_CSUM_OFFLOAD) &&
					   !t->zerocopy);
	rx_refill(t);
	*out = t;
	return 0;

del_sock:
	xsk_close(t);
unmap:
	munmap(t->area, t->area_len);
free_t:
	tp__state_free(t);
	pthread_mutex_destroy(&t->lock);
	free(t);
	return rc;
}

/* The largest IPv4 MTU whose frames the peer's engine, with frames of this
 * size, can receive: the kernel writes them past its XDP headroom. */
static uint32_t tp_mtu_max(const struct hpccd_tp *t)
{
	uint32_t one = t->cfg.frame_size - HEADROOM - HPCCD_TP_RX_HEADROOM;

	/* multi-buffer: MB_FRAGS pieces of a frame each, at most MB_BYTES */
	if (t->sg)
		return MB_FRAGS * one < MB_BYTES ? MB_FRAGS * one - ETH_HLEN_ : MB_BYTES - ETH_HLEN_;
	return one - ETH_HLEN_;
}

uint32_t hpccd_tp__mtu_max(const struct hpccd_tp *t)
{
	uint32_t m = tp_mtu_max(t);

	return m < 65535 ? m : 65535;
}

int hpccd_tp__fd(const struct hpccd_tp *t)
{
	return t ? t->fd : -EINVAL;
}

void tp__wake(struct hpccd_tp *t)
{
	const uint64_t one = 1;
	ssize_t w = write(t->efd, &one, sizeof(one));

	(void)w;
}

int hpccd_tp__start(struct hpccd_tp *t)
{
	sigset_t all, old;
	uint64_t drain;
	int rc;

	if (!t)
		return -EINVAL;
	if (t->started)
		return tp__fail(t, -EBUSY, "engine thread already started");
	while (read(t->efd, &drain, sizeof(drain)) > 0)
		;
	__atomic_store_n(&t->stop_flag, 0, __ATOMIC_RELEASE);
	pthread_mutex_lock(&t->lock);
	t->st.running = 1;
	t->st.thread_err = 0;
	pthread_mutex_unlock(&t->lock);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&t->thread, NULL, tp__main, t);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		pthread_mutex_lock(&t->lock);
		t->st.running = 0;
		pthread_mutex_unlock(&t->lock);
		return tp__fail(t, -rc, "cannot start the engine thread");
	}
	pthread_setname_np(t->thread, "hpccd-tp");
	t->started = 1;
	if (t->cfg.cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(t->cfg.cpu, &set);
		rc = pthread_setaffinity_np(t->thread, sizeof(set), &set);
		if (rc) {
			hpccd_tp__stop(t);
			return tp__fail(t, -rc, "cannot place the engine thread on CPU %d",
					t->cfg.cpu);
		}
	}
	return 0;
}

int hpccd_tp__stop(struct hpccd_tp *t)
{
	int err;

	if (!t)
		return -EINVAL;
	if (!t->started)
		return 0;
	__atomic_store_n(&t->stop_flag, 1, __ATOMIC_RELEASE);
	tp__wake(t);
	tp__wake_caller(t);          /* a caller inside hpccd_tp__run returns */
	pthread_join(t->thread, NULL);
	t->started = 0;
	pthread_mutex_lock(&t->lock);
	err = t->st.thread_err;
	pthread_mutex_unlock(&t->lock);
	if (err)
		return tp__fail(t, err, "the engine thread had stopped on an error");
	return 0;
}

/* "flow to A.B.C.D port P" into buf, for an error message only: formatted
 * when a check fails, not for every flow (the echo responder opens one per
 * request). */
static const char *flow_who(const struct hpccd_tp_flow_cfg *c, char *buf, size_t size)
{
	snprintf(buf, size, "flow to %u.%u.%u.%u port %u", c->daddr >> 24,
		 (c->daddr >> 16) & 255, (c->daddr >> 8) & 255, c->daddr & 255, c->dport);
	return buf;
}
#define WHO flow_who(c, who, sizeof(who))

/* Is c a flow this engine can run?  0, or the error (written to t->err,
 * naming the flow); *ops_out, *room_out, *hdr_out for flow_open_locked. */
static int flow_check(struct hpccd_tp *t, const struct hpccd_tp_flow_cfg *c,
		      const struct tp_cc_ops **ops_out, uint32_t *room_out, uint32_t *hdr_out)
{
	const struct tp_cc_ops *ops;
	uint32_t room, hdr;
	char who[96];

	ops = tp_cc_ops_of(c->algo);
	if (!ops)
		return tp__fail(t, -EINVAL, "%s: unknown algorithm %u", WHO, c->algo);
	if (!c->bytes)
		return tp__fail(t, -EINVAL, "%s: a flow carries at least one byte", WHO);
	if (c->src != HPCCD_TP_SRC_PATTERN && !(c->src == HPCCD_TP_SRC_BUFFER && c->buf) &&
	    !(c->src == HPCCD_TP_SRC_REPEAT && c->buf && c->buf_len))
		return tp__fail(t, -EINVAL, "%s: source %u without a buffer", WHO, c->src);
	if (c->int_room > HPCCD_INT_MAX_HOPS || c->int_mode > HPCCD_TP_INT_PROBE ||
	    (c->int_mode == HPCCD_TP_INT_NTH && !c->int_every) ||
	    (c->int_mode == HPCCD_TP_INT_PROBE && (!c->int_room || !c->probe_timeout_ns)))
		return tp__fail(t, -EINVAL, "%s: INT mode %u every %u room %u probe timeout %llu ns",
				WHO, c->int_mode, c->int_every, c->int_room,
				(unsigned long long)c->probe_timeout_ns);
	/* Probe responses feed sender-based HPCC only (Rx-HPCC reads the INT
	 * of data packets at the receiver; DCTCP and LDCP read none). */
	if (c->int_mode == HPCCD_TP_INT_PROBE && !ops->on_probe_resp)
		return tp__fail(t, -EINVAL, "%s: probe mode drives HPCC only, not %s",
				WHO, ops->name);
	room = c->int_mode == HPCCD_TP_INT_NONE || c->int_mode == HPCCD_TP_INT_PROBE ? 0
										   : c->int_room;
	hdr = L2L4 + HPCCD_INT_HDR_BYTES + room * HPCCD_INT_HOP_BYTES + HPCCD_HDR_BYTES;
	if (c->mtu < hdr - ETH_HLEN_ + 64 || c->mtu > tp_mtu_max(t) || c->mtu > 65535)
		return tp__fail(t, -EINVAL, "%s: MTU %u: from %u to %u with room %u (%u-byte frames)",
				WHO, c->mtu, hdr - ETH_HLEN_ + 64,
				tp_mtu_max(t) < 65535 ? tp_mtu_max(t) : 65535, room,
				t->cfg.frame_size);
	if (c->recovery != HPCCD_TP_SR && c->recovery != HPCCD_TP_GBN)
		return tp__fail(t, -EINVAL, "%s: recovery %u: selective repeat (%d) or go-back-N (%d)",
				WHO, c->recovery, HPCCD_TP_SR, HPCCD_TP_GBN);
	if (c->rate_win > 1 ||
	    (c->rate_win && c->algo != HPCCD_ALGO_DCQCN && c->algo != HPCCD_ALGO_TIMELY) ||
	    (c->rate_win && !(c->hpcc.T_ns > 0 && c->hpcc.T_ns < 1e12)))
		return tp__fail(t, -EINVAL, "%s: rate_win %u: 0, or 1 for DCQCN and TIMELY with "
				"hpcc.T_ns set (W = line rate x T, [HPCC] section 5.1)",
				WHO, c->rate_win);
	if (!c->line_rate_bps || !c->rto_min_ns || c->rto_max_ns < c->rto_min_ns ||
	    !c->timeout_ns)
		return tp__fail(t, -EINVAL, "%s: line rate, RTO bounds and timeout must be set",
				WHO);

	*ops_out = ops;
	*room_out = room;
	*hdr_out = hdr;
	return 0;
}

/* The copy of c's per-packet fields in the flow's hot lines (struct
 * tp_flow's hc: a packet reads them there, never c). */
static void flow_hot_cfg(struct tp_flow *fl, const struct hpccd_tp_flow_cfg *c)
{
	struct tp_flow_hc *h = &fl->hc;

	h->saddr = c->saddr;
	h->daddr = c->daddr;
	h->sport = c->sport;
	h->dport = c->dport;
	memcpy(h->smac, c->smac, sizeof(h->smac));
	memcpy(h->dmac, c->dmac, sizeof(h->dmac));
	h->src = (uint8_t)c->src;
	h->int_mode = (uint8_t)c->int_mode;
	h->recovery = (uint8_t)c->recovery;
	h->ecn = c->ecn != 0;
	fl->probe_mode = c->int_mode == HPCCD_TP_INT_PROBE;
	h->int_every = c->int_every;
	h->bytes = c->bytes;
	h->line_rate_bps = c->line_rate_bps;
	h->burst_ns = c->burst_ns;
	h->rto_min_ns = c->rto_min_ns;
	h->rto_max_ns = c->rto_max_ns;
	if (c->src == HPCCD_TP_SRC_PATTERN)
		h->seed = c->seed;
	else
		h->buf = c->buf;
}

/* Open a checked flow (t->lock held). */
static int flow_open_locked(struct hpccd_tp *t, const struct hpccd_tp_flow_cfg *c,
			    const struct tp_cc_ops *ops, uint32_t room, uint32_t hdr,
			    uint32_t *flow_id, struct tp_flow **out)
{
	struct tp_flow *fl = NULL;
	const char *why = NULL;
	uint32_t slot = 0;
	uint64_t now;
	int rc = 0;
	char who[96];

	if (t->n_free) {
		slot = (uint32_t)t->free_slot[--t->n_free];
		fl = &t->flows[slot];
	}
	if (!fl) {
		t->st.flows_refused++;   /* docs/security.md "Limits" */
		rc = tp__fail(t, -ENOSPC, "%s: all %u flow slots are in use (close finished flows)",
			      WHO, t->cfg.max_flows);
		goto out;
	}
	memset(fl, 0, sizeof(*fl));
	fl->c = *c;
	flow_hot_cfg(fl, c);
	fl->room = room;
	fl->hdr_max = hdr;
	fl->mss = c->mtu + ETH_HLEN_ - hdr;
	fl->msg_pkts = (c->bytes + fl->mss - 1) / fl->mss;
	fl->wire_per_payload = (double)(fl->mss + hdr) / fl->mss;
	fl->ops = ops;
	rc = ops->init(fl, &why);
	if (rc) {
		t->free_slot[t->n_free++] = (int32_t)slot;
		rc = tp__fail(t, rc, "%s: algorithm parameters: %s", WHO, why ? why : "invalid");
		goto out;
	}
	t->id_gen += t->cfg.max_flows;
	fl->flow_id = (t->id_gen & ~t->slot_mask) | slot;
	now = now_ns();
	fl->start_ns = now;
	fl->last_progress_ns = now;
	fl->next_send_ns = now;
	fl->rto_deadline = NO_DEADLINE;
	fl->goback_seq = UINT64_MAX;
	fl->state = HPCCD_TP_RUNNING;
	ops->sync(fl);
	t->n_running++;
	sched_wake(t, fl, now);
	*flow_id = fl->flow_id;
	if (out)
		*out = fl;
out:
	return rc;
}

/* A checked flow, opened; nobody told (run.c opens its request so). */
int tp__flow_open_quiet(struct hpccd_tp *t, const struct hpccd_tp_flow_cfg *c,
			uint32_t *flow_id)
{
	const struct tp_cc_ops *ops;
	uint32_t room, hdr;
	int rc;

	rc = flow_check(t, c, &ops, &room, &hdr);
	if (rc)
		return rc;
	pthread_mutex_lock(&t->lock);
	rc = flow_open_locked(t, c, ops, room, hdr, flow_id, NULL);
	pthread_mutex_unlock(&t->lock);
	return rc;
}

int hpccd_tp__flow_open(struct hpccd_tp *t, const struct hpccd_tp_flow_cfg *c,
			uint32_t *flow_id)
{
	int rc;

	if (!t || !c || !flow_id)
		return -EINVAL;
	rc = tp__flow_open_quiet(t, c, flow_id);
	if (rc)
		return rc;
	/* run to completion: its first packets leave from this thread, and
	 * the engine's thread is not woken for it (run.c) */
	if ((t->cfg.flags & HPCCD_TP_F_RUN_IN_CALLER) && t->started)
		tp__rtc_pass(t);
	else
		tp__wake(t);
	return 0;
}

/* The echo responder (HPCCD_TP_F_ECHO; the latency benchmark): each
 * receiver flow that completes is answered with a flow of as many
 * generated bytes back to its sender, with the template's settings; the
 * reply's slot frees itself when it is done. */
int hpccd_tp__set_echo(struct hpccd_tp *t, const struct hpccd_tp_flow_cfg *c)
{
	const struct tp_cc_ops *ops;
	uint32_t room, hdr;
	int rc;

	if (!t || !c)
		return -EINVAL;
	rc = flow_check(t, c, &ops, &room, &hdr);
	if (rc)
		return rc;
	pthread_mutex_lock(&t->lock);
	t->echo_cfg = *c;
	t->echo_ops = ops;
	t->echo_room = room;
	t->echo_hdr = hdr;
	t->echo_set = 1;
	pthread_mutex_unlock(&t->lock);
	return 0;
}

void tp__echo_reply(struct hpccd_tp *t, const struct tp_rx *r)
{
	struct hpccd_tp_flow_cfg c = t->echo_cfg;
	struct tp_flow *fl;
	uint32_t id;

	if (!t->echo_set)
		return;
	c.saddr = r->daddr;
	c.daddr = r->saddr;
	c.sport = (uint16_t)(32768 + (r->flow_id & 0x3fff));
	c.dport = t->cfg.udp_port;
	memcpy(c.smac, r->mac_local, 6);
	memcpy(c.dmac, r->mac_peer, 6);
	c.bytes = r->rcv_nxt;
	c.src = HPCCD_TP_SRC_PATTERN;
	c.seed = r->flow_id;
	/* checked by hpccd_tp__set_echo: only the addresses, the length
	 * (> 0: the flow completed) and the seed differ */
	if (flow_open_locked(t, &c, t->echo_ops, t->echo_room, t->echo_hdr, &id, &fl)) {
		t->st.echo_failed++;
		return;
	}
	fl->auto_close = 1;
	t->st.echo_replies++;
}

/* The core's last INT (L), for the daemon's per-hop metrics. */
static void int_copy(const struct hpccd_hpcc *h, uint32_t *path_id, uint32_t *nhops,
		     struct hpccd_int_rec *hops)
{
	uint32_t n = h->have_L ? h->n_hops : 0;

	if (n > HPCCD_INT_MAX_HOPS)
		n = HPCCD_INT_MAX_HOPS;
	*path_id = h->path_id;
	*nhops = n;
	memcpy(hops, h->L, n * sizeof(*hops));
}

/* Sender flow flow_id with the engine's lock held, or NULL with the lock
 * released and *rc the recorded failure (-ENOENT). */
static struct tp_flow *flow_lock(struct hpccd_tp *t, uint32_t flow_id, int *rc)
{
	struct tp_flow *fl;

	pthread_mutex_lock(&t->lock);
	fl = flow_by_id(t, flow_id);
	if (!fl) {
		pthread_mutex_unlock(&t->lock);
		*rc = tp__fail(t, -ENOENT, "flow %#x: no such flow", flow_id);
	}
	return fl;
}

int hpccd_tp__flow_stats(struct hpccd_tp *t, uint32_t flow_id, struct hpccd_tp_flow_stats *o)
{
	struct tp_flow *fl;
	int rc;

	if (!t || !o)
		return -EINVAL;
	fl = flow_lock(t, flow_id, &rc);
	if (!fl)
		return rc;
	*o = fl->st;
	o->pkts = TP_HS(fl, pkts);           /* the per-packet counters (hot lines) */
	o->wire_bytes = TP_HS(fl, wire_bytes);
	o->int_pkts = TP_HS(fl, int_pkts);
	o->ect_pkts = TP_HS(fl, ect_pkts);
	o->acks = TP_HS(fl, acks);
	o->cc_updates = TP_HS(fl, cc_updates);
	o->int_acks = TP_HS(fl, int_acks);
	o->wnd_limited_ns = fl->wnd_limited_ns;
	o->flow_id = fl->flow_id;
	o->state = fl->state;
	o->algo = fl->c.algo;
	o->err = fl->err;
	o->bytes = fl->hc.bytes;
	o->snd_una = fl->snd_una;
	o->snd_nxt = fl->snd_nxt;
	o->snd_max = fl->snd_max;
	o->start_ns = fl->start_ns;
	o->end_ns = fl->end_ns;
	o->fct_ns = fl->state == HPCCD_TP_DONE ? fl->end_ns - fl->start_ns : 0;
	o->go_backs = fl->st.go_backs;
	o->srtt_ns = fl->srtt;
	o->min_rtt_ns = fl->min_rtt;
	o->rto_ns = flow_rto(fl);
	o->window_bytes = fl->W;
	o->rate_bps = fl->rate_bps;
	o->U = fl->ops->signal(fl);
	o->mss = fl->mss;
	o->hdr_bytes = fl->hdr_max;
	o->int_path_id = o->int_nhops = 0;
	if (fl->c.algo == HPCCD_ALGO_HPCC)      /* fl->cc is the algorithm's */
		int_copy(&fl->cc.hpcc, &o->int_path_id, &o->int_nhops, o->int_hops);
	pthread_mutex_unlock(&t->lock);
	return 0;
}

int hpccd_tp__flow_close(struct hpccd_tp *t, uint32_t flow_id)
{
	struct tp_flow *fl;
	int rc;

	if (!t)
		return -EINVAL;
	fl = flow_lock(t, flow_id, &rc);
	if (!fl)
		return rc;
	if (fl->state == HPCCD_TP_RUNNING)
		flow_finish(t, fl, HPCCD_TP_FAILED, -ECANCELED, now_ns());
	fl->state = HPCCD_TP_FREE;
	t->free_slot[t->n_free++] = flow_slot(t, fl);
	pthread_mutex_unlock(&t->lock);
	return 0;
}

int hpccd_tp__rx_flows(struct hpccd_tp *t, struct hpccd_tp_rx_stats *out, uint32_t max)
{
	uint32_t i, n = 0;

	if (!t || (!out && max))
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	for (i = 0; i < t->n_rx_used && n < max; i++) {
		struct tp_rx *r = &t->rxt[t->rx_used[i]];

		out[n] = r->st;
		out[n].bytes = r->rcv_nxt;       /* delivered in order */
		out[n].pkts = r->hs.pkts;        /* the per-packet counters (hot line) */
		out[n].ce_pkts = r->ce_pkts;
		out[n].int_pkts = r->int_pkts;
		out[n].acks_sent = r->hs.acks_sent;
		out[n].last_ns = r->hs.last_ns;
		out[n].saddr = r->saddr;
		out[n].flow_id = r->flow_id;
		out[n].sport = r->sport;
		out[n].crc32 = r->crc;
		out[n].err = r->err;
		int_copy(&r->rxh, &out[n].int_path_id, &out[n].int_nhops, out[n].int_hops);
		n++;
	}
	pthread_mutex_unlock(&t->lock);
	return (int)n;
}

/* Forget the receiver flows that are done (rx_reap), or every one, an
 * unfinished one as if it had expired (rx_reset); how many went of the
 * kind asked for: done ones, or unfinished ones.  A done flow holds
 * nothing (released when it completed), so rx_forget only frees its slot. */
static int rx_sweep(struct hpccd_tp *t, int unfinished)
{
	uint32_t i;
	int n = 0;

	if (!t)
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	for (i = t->n_rx_used; i-- > 0; ) {      /* rx_unuse moves the last to i */
		struct tp_rx *r = &t->rxt[t->rx_used[i]];

		if (!r->done && !unfinished)
			continue;
		n += unfinished ? !r->done : 1;
		rx_forget(t, r);
	}
	pthread_mutex_unlock(&t->lock);
	return n;
}

int hpccd_tp__rx_reap(struct hpccd_tp *t)
{
	return rx_sweep(t, 0);
}

int hpccd_tp__rx_reset(struct hpccd_tp *t)
{
	return rx_sweep(t, 1);
}

/* The receiver's Rx-HPCC parameters for the receiver flows that start
 * from now on (rx_lookup copies them into each new flow), checked as
 * create checks them. */
int hpccd_tp__set_rx_hpcc(struct hpccd_tp *t, const struct hpccd_hpcc_params *p)
{
	struct hpccd_hpcc probe;
	const char *why = NULL;

	if (!t || !p)
		return -EINVAL;
	if (hpccd_hpcc_init(&probe, p, HPCCD_ALGO_RXHPCC, &why))
		return tp__fail(t, -EINVAL, "receiver Rx-HPCC parameters: %s", why);
	pthread_mutex_lock(&t->lock);   /* rx_lookup reads it under the lock */
	t->cfg.rx_hpcc = *p;
	pthread_mutex_unlock(&t->lock);
	return 0;
}

/* Key rotation without restart (docs/security.md): the thread reads the
 * key under the engine lock, so the next frame it handles is checked and
 * tagged with the new key; no grace period for the old one (a NOTIFY or
 * PROBE_RESP in flight during the rotation is dropped and counted, and
 * the next one, a T or an RTT later, carries on). */
int hpccd_tp__set_tag_key(struct hpccd_tp *t, const uint8_t *key16)
{
	if (!t || !key16)
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	memcpy(t->cfg.tag_key, key16, sizeof(t->cfg.tag_key));
	pthread_mutex_unlock(&t->lock);
	return 0;
}

int hpccd_tp__stats(struct hpccd_tp *t, struct hpccd_tp_stats *out)
{
	struct xdp_statistics ks;
	socklen_t len = sizeof(ks);

	if (!t || !out)
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	*out = t->st;
	out->tx_free = t->n_tx_free;
	out->rx_live = t->rx_live;
	out->rx_held = t->rx_held;
	out->flows_running = t->n_running;
	out->timer_late_ns = __atomic_load_n(&t->wake_late_ns, __ATOMIC_RELAXED);
	out->rx_used = t->n_rx_used;
	pthread_mutex_unlock(&t->lock);
	out->zerocopy = t->zerocopy;
	memset(&ks, 0, sizeof(ks));
	if (getsockopt(t->fd, SOL_XDP, XDP_STATISTICS, &ks, &len) < 0)
		return tp__fail(t, -errno, "getsockopt(XDP_STATISTICS)");
	out->k_rx_dropped = ks.rx_dropped;
	out->k_rx_invalid_descs = ks.rx_invalid_descs;
	out->k_tx_invalid_descs = ks.tx_invalid_descs;
	out->k_rx_ring_full = ks.rx_ring_full;
	out->k_rx_fill_ring_empty = ks.rx_fill_ring_empty_descs;
	out->k_tx_ring_empty = ks.tx_ring_empty_descs;
	return 0;
}

void hpccd_tp__destroy(struct hpccd_tp *t)
{
	if (!t)
		return;
	hpccd_tp__stop(t);
	close(t->efd);
	tp__rtc_close(t);
	xsk_close(t);
	munmap(t->area, t->area_len);
	tp__state_free(t);
	pthread_mutex_destroy(&t->lock);
	free(t);
}
