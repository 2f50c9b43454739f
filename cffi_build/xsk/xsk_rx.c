// SPDX-License-Identifier: BSD-2-Clause
/*
 * hpccd AF_XDP socket, RX side (include/hpccd/xsk.h has the contract).
 *
 * One UMEM, one socket, one RX thread:
 *
 *   kernel: xdp_host -> bpf_redirect_map(hpccd_xsks, rx_queue) -> RX ring
 *   RX thread: peek <= HPCCD_XSK_BATCH descriptors -> handler -> release
 *              -> buffers back onto the free stack -> fill ring
 *
 * Buffer accounting.  Every UMEM frame is in exactly one place: the free
 * stack (userspace), the fill ring, or the RX ring (kernel), or in the
 * handler's hands during one batch.  The fill ring is topped up from the
 * free stack after every batch and never blocks: with umem_frames >=
 * fill_size + rx_size (the default: 4096 frames, rings of 2048) the kernel
 * always has the whole fill ring to write into; with fewer frames it drops
 * (counted by the kernel as rx_fill_ring_empty) rather than stall us.
 *
 * Alignment.  The UMEM frame headroom is HPCCD_XSK_HEADROOM (2) bytes.
 * The kernel writes a received frame at chunk + headroom +
 * XDP_PACKET_HEADROOM (256), so the Ethernet header starts 2 bytes past a
 * multiple of 4 (NET_IP_ALIGN, as for skbs) and everything from the IPv4
 * header on is 4-byte aligned: the shared parser then reads headers in
 * place instead of copying the frame (cffi_build/cc/wire.c, wire__align).
 * stats.unaligned counts the frames where that did not hold.
 *
 * Waiting.  The RX thread waits in poll() on the socket (POLLIN when the
 * RX ring is not empty) and on an eventfd that hpccd_xsk__stop() writes,
 * with a timeout of HPCCD_XSK_POLL_MS as a backstop; on a timeout it reads
 * SO_ERROR, so that an interface that went away (its namespace deleted)
 * ends the thread with -ENETDOWN instead of leaving it to wake forever.  A
 * lab host has two cores shared by every emulated host: no busy polling.
 * need_wakeup: poll() itself wakes the driver when the fill ring asks for
 * it; after a refill done without poll() (frames kept arriving) the
 * thread kicks it with a non-blocking recvfrom(), as the kernel's
 * xdpsock sample does.
 *
 * Locking.  The rings, the free stack and the handler state belong to the
 * RX thread while it runs, to the control calls otherwise.  Counters and
 * the ring of recent summaries are written by the RX thread once per
 * batch under x->lock (an uncontended mutex per batch, not per frame), so
 * that readers on other threads get consistent snapshots.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <net/if.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <linux/if_xdp.h>
#include <xdp/xsk.h>

#include "hpccd/wire_api.h"
#include "hpccd/xsk.h"

#ifndef SOL_XDP
#define SOL_XDP 283
#endif

#ifndef HPCCD_XSK_BATCH
#define HPCCD_XSK_BATCH 64          /* descriptors taken per RX ring peek */
#endif
#ifndef HPCCD_XSK_RECENT
#define HPCCD_XSK_RECENT 256        /* summaries kept; a power of two */
#endif
#ifndef HPCCD_XSK_POLL_MS
#define HPCCD_XSK_POLL_MS 200       /* poll() backstop; stop() does not wait for it */
#endif
#define HPCCD_XSK_RING_MAX 2048     /* fill and RX ring entries (libxdp's default) */
#define HPCCD_XSK_HEADROOM 2        /* NET_IP_ALIGN for frames in the UMEM (above) */
#define HPCCD_XSK_HUGE (2UL << 20)  /* huge page size the UMEM is rounded up to */
#define HPCCD_XSK_FRAME_MIN 2048    /* aligned chunk mode: 2048 <= chunk <= page */

_Static_assert((HPCCD_XSK_RECENT & (HPCCD_XSK_RECENT - 1)) == 0, "recent ring: power of two");
_Static_assert(HPCCD_XSK_BATCH > 0 && HPCCD_XSK_BATCH <= HPCCD_XSK_RING_MAX, "batch size");

#define XSK_FLAGS_KNOWN (HPCCD_XSK_F_COPY | HPCCD_XSK_F_ZEROCOPY | HPCCD_XSK_F_NEED_WAKEUP | \
			 HPCCD_XSK_F_HUGEPAGES)
#define XSK_BIND_FLAGS (HPCCD_XSK_F_COPY | HPCCD_XSK_F_ZEROCOPY | HPCCD_XSK_F_NEED_WAKEUP)

/* One received frame, as handed to a handler. */
struct xsk_frame {
	const void *data;
	uint64_t addr;              /* the descriptor's address in the UMEM */
	uint32_t len;
};

struct hpccd_xsk {
	/* set by create, read-only afterwards */
	struct xsk_umem *umem;
	struct xsk_socket *sock;
	void *area;                 /* UMEM memory */
	size_t area_len;            /* bytes mapped (rounded up for huge pages) */
	int fd;
	int stop_efd;               /* eventfd: stop() -> RX thread */
	struct hpccd_xsk_info info;
	char ifname[IF_NAMESIZE];

	/* the RX thread's while it runs, the control calls' otherwise */
	struct xsk_ring_prod fq;
	struct xsk_ring_cons cq;    /* unused until the transport sends */
	struct xsk_ring_cons rx;
	uint64_t *free_addrs;       /* stack of frame addresses owned by userspace */
	uint32_t n_free;
	int handler;
	uint16_t udp_port;
	uint8_t probe_dscp;

	/* control calls only */
	pthread_t thread;
	int started;                /* a thread exists that stop() must join */
	int stop_flag;              /* atomic: stop() -> RX thread */
	char err[HPCCD_XSK_ERR_MAX];

	/* under lock */
	pthread_mutex_t lock;
	struct hpccd_xsk_stats st;  /* k_* are not kept: read at the call */
	uint64_t n_recorded;        /* summaries ever recorded (next index) */
	struct hpccd_xsk_rx_summary recent[HPCCD_XSK_RECENT];
};

/* ---- errors -------------------------------------------------------------- */

static int xsk__vfail(char *buf, size_t size, const char *ifname, uint32_t queue_id, int rc,
		      const char *fmt, va_list ap)
{
	int n;

	if (!buf || !size)
		return rc;
	n = snprintf(buf, size, "%s queue %u: ", ifname ? ifname : "(no interface)", queue_id);
	if (n >= 0 && (size_t)n < size)
		vsnprintf(buf + n, size - (size_t)n, fmt, ap);
	return rc;
}

/* Writes "IFNAME queue Q: what" into buf and returns rc (negative errno). */
static int __attribute__((format(printf, 6, 7)))
xsk__create_fail(char *buf, size_t size, const char *ifname, uint32_t queue_id, int rc,
		 const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	xsk__vfail(buf, size, ifname, queue_id, rc, fmt, ap);
	va_end(ap);
	return rc;
}

static int __attribute__((format(printf, 3, 4)))
xsk__fail(struct hpccd_xsk *x, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	xsk__vfail(x->err, sizeof(x->err), x->ifname, x->info.queue_id, rc, fmt, ap);
	va_end(ap);
	return rc;
}

const char *hpccd_xsk__error(const struct hpccd_xsk *x)
{
	return x ? x->err : "no socket";
}

/* ---- helpers ------------------------------------------------------------- */

static uint64_t xsk__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint32_t xsk__pow2_floor(uint32_t v)
{
	uint32_t p = 1;

	while (p <= v / 2)
		p <<= 1;
	return p;
}

/* UMEM memory: huge pages when asked and available, else plain pages.
 * MAP_POPULATE: the kernel pins the pages at XDP_UMEM_REG anyway; faulting
 * them in now keeps the first packets from paying for it. */
static int umem__map(struct hpccd_xsk *x, uint64_t size, int huge)
{
	const int prot = PROT_READ | PROT_WRITE;
	const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE;
	void *p;

	if (huge) {
		size_t len = (size + HPCCD_XSK_HUGE - 1) & ~(HPCCD_XSK_HUGE - 1);

		p = mmap(NULL, len, prot, flags | MAP_HUGETLB, -1, 0);
		if (p != MAP_FAILED) {
			x->area = p;
			x->area_len = len;
			x->info.hugepages = 1;
			return 0;
		}
	}
	p = mmap(NULL, size, prot, flags, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	x->area = p;
	x->area_len = size;
	return 0;
}

/* Top the fill ring up from the free stack; never waits. */
static void xsk__refill(struct hpccd_xsk *x)
{
	uint32_t n, idx, i;

	if (!x->n_free)
		return;
	n = xsk_prod_nb_free(&x->fq, x->n_free);
	if (n > x->n_free)
		n = x->n_free;
	if (!n || xsk_ring_prod__reserve(&x->fq, n, &idx) != n)
		return;
	for (i = 0; i < n; i++)
		*xsk_ring_prod__fill_addr(&x->fq, idx + i) = x->free_addrs[--x->n_free];
	xsk_ring_prod__submit(&x->fq, n);
}

/* ---- the sink handler ------------------------------------------------------ */

/* Parses the batch outside the lock, then counts and records it under the
 * lock in one go. */
static void sink__batch(struct hpccd_xsk *x, const struct xsk_frame *f, uint32_t n)
{
	struct hpccd_xsk_rx_summary sum[HPCCD_XSK_BATCH];
	struct hpccd_wire_info wi;
	uint64_t now = xsk__now_ns(), bytes = 0;
	uint32_t i, unaligned = 0;
	int rc;

	for (i = 0; i < n; i++) {
		struct hpccd_xsk_rx_summary *s = &sum[i];

		if (((uintptr_t)f[i].data & 3) != 2)
			unaligned++;
		rc = hpccd_wire_parse_frame(f[i].data, f[i].len, x->udp_port, x->probe_dscp, &wi);
		memset(s, 0, sizeof(*s));
		s->rx_ns = now;
		s->len = f[i].len;
		s->cls = (int16_t)rc;
		if (rc >= 0 && wi.hdr_off) {
			s->type = wi.hdr_type;
			s->flags = wi.hdr_flags;
			s->flow_id = wi.flow_id;
			s->seq = wi.seq;
			s->ack = wi.ack;
		}
		if (rc == HPCCD_E_OK || rc == HPCCD_E_LEN)
			s->payload_len = wi.payload_len;
		bytes += f[i].len;
	}

	pthread_mutex_lock(&x->lock);
	for (i = 0; i < n; i++) {
		struct hpccd_xsk_rx_summary *s = &sum[i];

		if (s->cls == HPCCD_E_OK)
			x->st.by_type[s->type]++;    /* 1..HPCCD_T_MAX: the parser checked it */
		else if (s->cls > 0 && s->cls < HPCCD_E_MAX)
			x->st.by_class[s->cls]++;
		else if (s->cls == HPCCD_WIRE_NOT_HPCCD)
			x->st.not_hpccd++;
		else
			x->st.parse_err++;
		s->index = x->n_recorded++;
		x->recent[s->index & (HPCCD_XSK_RECENT - 1)] = *s;
	}
	x->st.rx_frames += n;
	x->st.rx_bytes += bytes;
	x->st.unaligned += unaligned;
	x->st.batches++;
	pthread_mutex_unlock(&x->lock);
}

/* ---- the RX thread ---------------------------------------------------------- */

static void xsk__rx_batch(struct hpccd_xsk *x, uint32_t idx, uint32_t n)
{
	struct xsk_frame f[HPCCD_XSK_BATCH];
	const uint64_t chunk_mask = ~(uint64_t)(x->info.frame_size - 1);
	uint32_t i;

	for (i = 0; i < n; i++) {
		const struct xdp_desc *d = xsk_ring_cons__rx_desc(&x->rx, idx + i);

		f[i].addr = d->addr;
		f[i].len = d->len;
		f[i].data = xsk_umem__get_data(x->area, xsk_umem__add_offset_to_addr(d->addr));
	}
	switch (x->handler) {
	case HPCCD_XSK_RX_SINK:
		sink__batch(x, f, n);
		break;
	}
	/* The handler is done with the data: the frames go back (as chunk
	 * addresses, aligned mode) to the free stack, then to the fill ring. */
	for (i = 0; i < n; i++)
		x->free_addrs[x->n_free++] = xsk_umem__extract_addr(f[i].addr) & chunk_mask;
	xsk_ring_cons__release(&x->rx, n);
	xsk__refill(x);
}

static void xsk__account_poll(struct hpccd_xsk *x, int timed_out, int kicked)
{
	pthread_mutex_lock(&x->lock);
	x->st.polls += !kicked;
	x->st.poll_timeouts += timed_out;
	x->st.fill_kicks += kicked;
	pthread_mutex_unlock(&x->lock);
}

static void *xsk__rx_main(void *arg)
{
	struct hpccd_xsk *x = arg;
	struct pollfd pfd[2] = {
		{ .fd = x->fd, .events = POLLIN },
		{ .fd = x->stop_efd, .events = POLLIN },
	};
	int err = 0, rc, soerr;
	socklen_t len;
	uint32_t idx, n;

	while (!__atomic_load_n(&x->stop_flag, __ATOMIC_ACQUIRE)) {
		n = xsk_ring_cons__peek(&x->rx, HPCCD_XSK_BATCH, &idx);
		if (n) {
			xsk__rx_batch(x, idx, n);
			/* Busy: no poll() to wake the driver for the fill ring. */
			if ((x->info.flags & HPCCD_XSK_F_NEED_WAKEUP) &&
			    xsk_ring_prod__needs_wakeup(&x->fq)) {
				recvfrom(x->fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
				xsk__account_poll(x, 0, 1);
			}
			continue;
		}
		rc = poll(pfd, 2, HPCCD_XSK_POLL_MS);
		if (rc < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			break;
		}
		xsk__account_poll(x, rc == 0, 0);
		if (pfd[1].revents)
			break;
		if (pfd[0].revents & (POLLERR | POLLHUP | POLLNVAL)) {
			err = (pfd[0].revents & POLLNVAL) ? -EBADF : -EIO;
			break;
		}
		if (rc == 0) {
			/* An unbound socket (interface gone) never polls
			 * readable again; the kernel says so in sk_err. */
			soerr = 0;
			len = sizeof(soerr);
			if (getsockopt(x->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 && soerr) {
				err = -soerr;
				break;
			}
		}
	}

	pthread_mutex_lock(&x->lock);
	x->st.running = 0;
	x->st.thread_err = err;
	pthread_mutex_unlock(&x->lock);
	return NULL;
}

/* ---- API -------------------------------------------------------------------- */

int hpccd_xsk__create(const char *ifname, uint32_t queue_id, uint32_t umem_frames,
		      uint32_t frame_size, uint32_t flags, struct hpccd_xsk **out,
		      char *err, size_t err_size)
{
	struct xsk_umem_config ucfg;
	struct xsk_socket_config scfg;
	struct xdp_options opts;
	struct hpccd_xsk *x;
	uint64_t size, i;
	uint32_t ring, ifindex;
	socklen_t optlen;
	long page = sysconf(_SC_PAGESIZE);
	int rc;

	if (err && err_size)
		err[0] = '\0';
	if (out)
		*out = NULL;
	if (!ifname || !out)
		return xsk__create_fail(err, err_size, ifname, queue_id, -EINVAL, "NULL argument");
	if (strlen(ifname) >= IF_NAMESIZE)
		return xsk__create_fail(err, err_size, ifname, queue_id, -EINVAL,
					"interface name longer than %d bytes", IF_NAMESIZE - 1);
	if (frame_size < HPCCD_XSK_FRAME_MIN || (page > 0 && frame_size > (uint64_t)page) ||
	    (frame_size & (frame_size - 1)))
		return xsk__create_fail(err, err_size, ifname, queue_id, -EINVAL,
					"frame size %u: a power of two from %d to %ld needed",
					frame_size, HPCCD_XSK_FRAME_MIN, page);
	if (umem_frames < 2)
		return xsk__create_fail(err, err_size, ifname, queue_id, -EINVAL,
					"%u UMEM frames: at least 2 needed", umem_frames);
	if (flags & ~(uint32_t)XSK_FLAGS_KNOWN)
		return xsk__create_fail(err, err_size, ifname, queue_id, -EINVAL,
					"unknown flags 0x%x", flags & ~(uint32_t)XSK_FLAGS_KNOWN);
	if ((flags & HPCCD_XSK_F_COPY) && (flags & HPCCD_XSK_F_ZEROCOPY))
		return xsk__create_fail(err, err_size, ifname, queue_id, -EINVAL,
					"copy and zero-copy both forced");
	ifindex = if_nametoindex(ifname);
	if (!ifindex)
		return xsk__create_fail(err, err_size, ifname, queue_id, -(errno ? errno : ENODEV),
					"no such interface in this network namespace");
	size = (uint64_t)umem_frames * frame_size;

	x = calloc(1, sizeof(*x));
	if (!x)
		return xsk__create_fail(err, err_size, ifname, queue_id, -ENOMEM, "out of memory");
	pthread_mutex_init(&x->lock, NULL);
	memcpy(x->ifname, ifname, strlen(ifname) + 1);
	x->fd = -1;
	x->stop_efd = -1;
	x->udp_port = HPCCD_UDP_PORT_DEFAULT;
	x->probe_dscp = HPCCD_PROBE_DSCP_DEFAULT;
	ring = xsk__pow2_floor(umem_frames < HPCCD_XSK_RING_MAX ? umem_frames : HPCCD_XSK_RING_MAX);

	rc = umem__map(x, size, flags & HPCCD_XSK_F_HUGEPAGES);
	if (rc) {
		xsk__create_fail(err, err_size, ifname, queue_id, rc,
				 "mmap of a %llu-byte UMEM", (unsigned long long)size);
		goto free_x;
	}
	x->free_addrs = malloc(sizeof(*x->free_addrs) * umem_frames);
	if (!x->free_addrs) {
		rc = xsk__create_fail(err, err_size, ifname, queue_id, -ENOMEM, "out of memory");
		goto unmap;
	}

	memset(&ucfg, 0, sizeof(ucfg));
	ucfg.fill_size = ring;
	ucfg.comp_size = ring;
	ucfg.frame_size = frame_size;
	ucfg.frame_headroom = HPCCD_XSK_HEADROOM;
	ucfg.flags = 0;                          /* aligned chunks */
	rc = xsk_umem__create(&x->umem, x->area, size, &x->fq, &x->cq, &ucfg);
	if (rc) {
		x->umem = NULL;
		xsk__create_fail(err, err_size, ifname, queue_id, rc,
				 "xsk_umem__create (%u frames of %u bytes)", umem_frames, frame_size);
		goto free_addrs;
	}

	memset(&scfg, 0, sizeof(scfg));
	scfg.rx_size = ring;
	scfg.tx_size = 0;                        /* RX only, for now */
	scfg.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD; /* xdp_host is ours */
	scfg.xdp_flags = 0;
	scfg.bind_flags = (uint16_t)(flags & XSK_BIND_FLAGS);
	rc = xsk_socket__create(&x->sock, ifname, queue_id, x->umem, &x->rx, NULL, &scfg);
	if (rc) {
		x->sock = NULL;
		xsk__create_fail(err, err_size, ifname, queue_id, rc,
				 "AF_XDP socket (bind, %s mode)",
				 (flags & HPCCD_XSK_F_ZEROCOPY) ? "zero-copy" :
				 (flags & HPCCD_XSK_F_COPY) ? "copy" : "any");
		goto delete_umem;
	}
	x->fd = xsk_socket__fd(x->sock);

	x->stop_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (x->stop_efd < 0) {
		rc = xsk__create_fail(err, err_size, ifname, queue_id, -errno, "eventfd");
		goto delete_socket;
	}

	memset(&opts, 0, sizeof(opts));
	optlen = sizeof(opts);
	if (getsockopt(x->fd, SOL_XDP, XDP_OPTIONS, &opts, &optlen) == 0)
		x->info.zerocopy = !!(opts.flags & XDP_OPTIONS_ZEROCOPY);

	x->info.ifindex = ifindex;
	x->info.queue_id = queue_id;
	x->info.frames = umem_frames;
	x->info.frame_size = frame_size;
	x->info.headroom = HPCCD_XSK_HEADROOM;
	x->info.rx_size = ring;
	x->info.fill_size = ring;
	x->info.recent_cap = HPCCD_XSK_RECENT;
	x->info.batch = HPCCD_XSK_BATCH;
	x->info.poll_ms = HPCCD_XSK_POLL_MS;
	x->info.flags = flags;
	x->info.udp_port = x->udp_port;
	x->info.probe_dscp = x->probe_dscp;
	x->info.umem_bytes = x->area_len;

	/* Every frame starts on the free stack (the highest address on top,
	 * so the fill ring gets frame 0 first), then the fill ring takes
	 * what it holds. */
	for (i = 0; i < umem_frames; i++)
		x->free_addrs[i] = (umem_frames - 1 - i) * (uint64_t)frame_size;
	x->n_free = umem_frames;
	xsk__refill(x);

	*out = x;
	return 0;

delete_socket:
	xsk_socket__delete(x->sock);
delete_umem:
	xsk_umem__delete(x->umem);
free_addrs:
	free(x->free_addrs);
unmap:
	munmap(x->area, x->area_len);
free_x:
	pthread_mutex_destroy(&x->lock);
	free(x);
	return rc;
}

int hpccd_xsk__set_wire(struct hpccd_xsk *x, uint16_t udp_port, uint8_t probe_dscp)
{
	if (!x)
		return -EINVAL;
	if (x->started)
		return xsk__fail(x, -EBUSY, "parser settings: the RX thread is running");
	if (!udp_port || probe_dscp > 63)
		return xsk__fail(x, -EINVAL, "parser settings: port %u, DSCP %u",
				 udp_port, probe_dscp);
	x->udp_port = udp_port;
	x->probe_dscp = probe_dscp;
	x->info.udp_port = udp_port;
	x->info.probe_dscp = probe_dscp;
	return 0;
}

int hpccd_xsk__fd(const struct hpccd_xsk *x)
{
	return x ? x->fd : -EINVAL;
}

int hpccd_xsk__start(struct hpccd_xsk *x, int handler)
{
	sigset_t all, old;
	uint64_t drain;
	int rc;

	if (!x)
		return -EINVAL;
	if (x->started)
		return xsk__fail(x, -EBUSY, "RX thread already started (stop it first)");
	if (handler != HPCCD_XSK_RX_SINK)
		return xsk__fail(x, -EINVAL, "unknown RX handler %d", handler);

	/* A stop request of an earlier run must not end this one. */
	while (read(x->stop_efd, &drain, sizeof(drain)) > 0)
		;
	__atomic_store_n(&x->stop_flag, 0, __ATOMIC_RELEASE);
	x->handler = handler;
	pthread_mutex_lock(&x->lock);
	x->st.running = 1;
	x->st.thread_err = 0;
	pthread_mutex_unlock(&x->lock);

	/* The RX thread takes no signals: they belong to the daemon's main
	 * thread (Python runs its handlers there). */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&x->thread, NULL, xsk__rx_main, x);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		pthread_mutex_lock(&x->lock);
		x->st.running = 0;
		pthread_mutex_unlock(&x->lock);
		return xsk__fail(x, -rc, "cannot start the RX thread");
	}
	pthread_setname_np(x->thread, "hpccd-xsk-rx");
	x->started = 1;
	return 0;
}

int hpccd_xsk__stop(struct hpccd_xsk *x)
{
	const uint64_t one = 1;
	ssize_t w;
	int err;

	if (!x)
		return -EINVAL;
	if (!x->started)
		return 0;
	__atomic_store_n(&x->stop_flag, 1, __ATOMIC_RELEASE);
	/* Wakes the poll() at once; should the write fail (it cannot on a
	 * fresh eventfd), the flag and the poll timeout still end the thread. */
	w = write(x->stop_efd, &one, sizeof(one));
	(void)w;
	pthread_join(x->thread, NULL);
	x->started = 0;

	pthread_mutex_lock(&x->lock);
	err = x->st.thread_err;
	pthread_mutex_unlock(&x->lock);
	if (err)
		return xsk__fail(x, err, "the RX thread had stopped on an error");
	return 0;
}

int hpccd_xsk__stats(struct hpccd_xsk *x, struct hpccd_xsk_stats *out)
{
	struct xdp_statistics ks;
	socklen_t len = sizeof(ks);

	if (!x || !out)
		return -EINVAL;
	pthread_mutex_lock(&x->lock);
	*out = x->st;
	pthread_mutex_unlock(&x->lock);

	memset(&ks, 0, sizeof(ks));
	if (getsockopt(x->fd, SOL_XDP, XDP_STATISTICS, &ks, &len) < 0)
		return xsk__fail(x, -errno, "getsockopt(XDP_STATISTICS)");
	out->k_rx_dropped = ks.rx_dropped;
	out->k_rx_invalid_descs = ks.rx_invalid_descs;
	out->k_tx_invalid_descs = ks.tx_invalid_descs;
	out->k_rx_ring_full = ks.rx_ring_full;
	out->k_rx_fill_ring_empty = ks.rx_fill_ring_empty_descs;
	out->k_tx_ring_empty = ks.tx_ring_empty_descs;
	return 0;
}

int hpccd_xsk__recent(struct hpccd_xsk *x, struct hpccd_xsk_rx_summary *out, uint32_t max)
{
	uint64_t kept, start, j;
	uint32_t n;

	if (!x || (!out && max))
		return -EINVAL;
	pthread_mutex_lock(&x->lock);
	kept = x->n_recorded < HPCCD_XSK_RECENT ? x->n_recorded : HPCCD_XSK_RECENT;
	n = kept < max ? (uint32_t)kept : max;
	start = x->n_recorded - n;
	for (j = 0; j < n; j++)
		out[j] = x->recent[(start + j) & (HPCCD_XSK_RECENT - 1)];
	pthread_mutex_unlock(&x->lock);
	return (int)n;
}

int hpccd_xsk__reset(struct hpccd_xsk *x)
{
	uint32_t running;
	int32_t thread_err;

	if (!x)
		return -EINVAL;
	pthread_mutex_lock(&x->lock);
	running = x->st.running;
	thread_err = x->st.thread_err;
	memset(&x->st, 0, sizeof(x->st));
	x->st.running = running;
	x->st.thread_err = thread_err;
	x->n_recorded = 0;
	pthread_mutex_unlock(&x->lock);
	return 0;
}

int hpccd_xsk__info(const struct hpccd_xsk *x, struct hpccd_xsk_info *out)
{
	if (!x || !out)
		return -EINVAL;
	*out = x->info;
	return 0;
}

void hpccd_xsk__destroy(struct hpccd_xsk *x)
{
	if (!x)
		return;
	hpccd_xsk__stop(x);
	close(x->stop_efd);
	/* The socket first: the UMEM is busy while a socket uses it. */
	xsk_socket__delete(x->sock);
	xsk_umem__delete(x->umem);
	free(x->free_addrs);
	munmap(x->area, x->area_len);
	pthread_mutex_destroy(&x->lock);
	free(x);
}
