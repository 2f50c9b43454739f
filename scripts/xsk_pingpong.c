// SPDX-License-Identifier: BSD-2-Clause
/*
 * The floor of AF_XDP request/response on a veth: one frame back and forth
 * between two AF_XDP sockets and nothing else (no flow, no feedback, no
 * congestion control, no checksum), the mechanism's own latency, printed by
 * scripts/bench_latency.py beside kernel UDP's and the transport's.
 *
 *   xsk_pingpong server IFNAME COUNT [busy]
 *        answer COUNT frames: each received frame goes back with its MAC
 *        addresses swapped
 *   xsk_pingpong client IFNAME COUNT SIZE DSTMAC [busy]
 *        send a SIZE-byte frame (Ethernet + IPv4 + UDP + payload) to
 *        DSTMAC, wait for its echo, print each RTT in ns
 *
 * Each side binds one socket to queue 0 of IFNAME in copy mode with
 * libxdp's default program (generic XDP: every frame of the queue to the
 * socket), as the engine does in the benchmark.  It waits as the engine's
 * default does, in poll(2) on the socket (interrupt-driven); with `busy`
 * it spins on the rings instead.
 */
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <xdp/xsk.h>

#define FRAMES 64
#define FRAME 4096
#define HALF (FRAMES / 2)       /* frames 0..HALF-1 receive, the rest send */

struct side {
	struct xsk_umem *umem;
	struct xsk_socket *xsk;
	struct xsk_ring_prod fq, tx;
	struct xsk_ring_cons cq, rx;
	uint8_t *area;
	uint64_t tx_free[HALF];
	int n_tx_free, busy;
};

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static int die(const char *what, int err)
{
	fprintf(stderr, "xsk_pingpong: %s: %s\n", what, strerror(err < 0 ? -err : err));
	return 1;
}

static int open_side(struct side *s, const char *ifname)
{
	struct xsk_umem_config ucfg = {
		.fill_size = FRAMES, .comp_size = FRAMES, .frame_size = FRAME,
		.frame_headroom = 0, .flags = 0,
	};
	struct xsk_socket_config scfg = {
		.rx_size = FRAMES, .tx_size = FRAMES,
		.xdp_flags = XDP_FLAGS_SKB_MODE,
		.bind_flags = XDP_COPY | XDP_USE_NEED_WAKEUP,
	};
	uint32_t idx, i;
	int rc;

	s->area = mmap(NULL, (size_t)FRAMES * FRAME, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (s->area == MAP_FAILED)
		return die("mmap", errno);
	rc = xsk_umem__create(&s->umem, s->area, (uint64_t)FRAMES * FRAME, &s->fq, &s->cq, &ucfg);
	if (rc)
		return die("xsk_umem__create", rc);
	rc = xsk_socket__create(&s->xsk, ifname, 0, s->umem, &s->rx, &s->tx, &scfg);
	if (rc)
		return die(ifname, rc);
	if (xsk_ring_prod__reserve(&s->fq, HALF, &idx) != HALF)
		return die("fill ring", ENOSPC);
	for (i = 0; i < HALF; i++)
		*xsk_ring_prod__fill_addr(&s->fq, idx + i) = (uint64_t)i * FRAME;
	xsk_ring_prod__submit(&s->fq, HALF);
	for (i = 0; i < HALF; i++)
		s->tx_free[s->n_tx_free++] = (uint64_t)(HALF + i) * FRAME;
	return 0;
}

/* Completed TX frames back to the free list. */
static void reap(struct side *s)
{
	uint32_t idx, n = xsk_ring_cons__peek(&s->cq, FRAMES, &idx), i;

	for (i = 0; i < n; i++)
		s->tx_free[s->n_tx_free++] = *xsk_ring_cons__comp_addr(&s->cq, idx + i);
	xsk_ring_cons__release(&s->cq, n);
}

static void send_frame(struct side *s, uint64_t addr, uint32_t len)
{
	uint32_t idx;

	while (xsk_ring_prod__reserve(&s->tx, 1, &idx) != 1)
		reap(s);
	xsk_ring_prod__tx_desc(&s->tx, idx)->addr = addr;
	xsk_ring_prod__tx_desc(&s->tx, idx)->len = len;
	xsk_ring_prod__submit(&s->tx, 1);
	sendto(xsk_socket__fd(s->xsk), NULL, 0, MSG_DONTWAIT, NULL, 0);
}

/* Wait for one received frame; its address and length. */
static int recv_frame(struct side *s, uint64_t *addr, uint32_t *len)
{
	struct pollfd p = { .fd = xsk_socket__fd(s->xsk), .events = POLLIN };
	unsigned long long give_up = s->busy ? now_ns() + 5000000000ull : 0;
	uint32_t idx, spins = 0;

	while (!xsk_ring_cons__peek(&s->rx, 1, &idx)) {
		if (!s->busy && poll(&p, 1, 5000) <= 0)
			return -ETIMEDOUT;
		/* polling: the same 5 s, read off the clock now and then */
		if (s->busy && !(++spins & 0xfff) && now_ns() > give_up)
			return -ETIMEDOUT;
	}
	*addr = xsk_ring_cons__rx_desc(&s->rx, idx)->addr;
	*len = xsk_ring_cons__rx_desc(&s->rx, idx)->len;
	xsk_ring_cons__release(&s->rx, 1);
	return 0;
}

static void refill(struct side *s, uint64_t addr)
{
	uint32_t idx;

	if (xsk_ring_prod__reserve(&s->fq, 1, &idx) == 1) {
		*xsk_ring_prod__fill_addr(&s->fq, idx) = addr & ~(uint64_t)(FRAME - 1);
		xsk_ring_prod__submit(&s->fq, 1);
	}
}

/* The server's echo is the received frame itself: once the kernel has
 * copied it out (copy mode: inside sendto(), whose completion follows at
 * once), the frame goes back to the fill ring. */
static int wait_sent(struct side *s)
{
	uint32_t idx, n = 0, i;
	int tries;

	for (tries = 0; tries < 1000 && !n; tries++) {
		n = xsk_ring_cons__peek(&s->cq, FRAMES, &idx);
		if (!n)
			sendto(xsk_socket__fd(s->xsk), NULL, 0, MSG_DONTWAIT, NULL, 0);
	}
	for (i = 0; i < n; i++)
		refill(s, *xsk_ring_cons__comp_addr(&s->cq, idx + i));
	xsk_ring_cons__release(&s->cq, n);
	return n ? 0 : -1;
}

/* The socket, the UMEM and libxdp's default program (detached with the
 * last socket of the interface) go; nothing is left on IFNAME. */
static void close_side(struct side *s)
{
	if (s->xsk)
		xsk_socket__delete(s->xsk);
	if (s->umem)
		xsk_umem__delete(s->umem);
}

static int parse_mac(const char *text, uint8_t mac[6])
{
	return sscanf(text, "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &mac[0], &mac[1], &mac[2],
		      &mac[3], &mac[4], &mac[5]) == 6 ? 0 : -1;
}

static int serve(struct side *s, long count)
{
	uint64_t addr;
	uint32_t len;
	long i;

	for (i = 0; i < count; i++) {
		uint8_t *p, tmp[6];

		if (recv_frame(s, &addr, &len))
			return die("server: no frame in 5 s", ETIMEDOUT);
		p = xsk_umem__get_data(s->area, addr);
		memcpy(tmp, p, 6);
		memcpy(p, p + 6, 6);
		memcpy(p + 6, tmp, 6);
		/* copy mode: the kernel copies the frame out in sendto(), so
		 * the received frame itself is sent back */
		send_frame(s, addr, len);
		if (wait_sent(s))
			return die("server: the echo was not sent", EIO);
	}
	return 0;
}

static int ask(struct side *s, const char *ifname, long count, long size, const uint8_t dst[6])
{
	static uint8_t frame[FRAME];
	char path[128], text[32];
	uint64_t addr;
	uint32_t len;
	FILE *f;
	long i;

	/* Ethernet, IPv4 (UDP, DF), UDP, payload: a well-formed frame, though
	 * nothing on the path reads more than the MAC addresses */
	memcpy(frame, dst, 6);
	snprintf(path, sizeof(path), "/sys/class/net/%s/address", ifname);
	f = fopen(path, "r");
	if (!f)
		return die(path, errno);
	if (!fgets(text, sizeof(text), f) || parse_mac(text, frame + 6)) {
		fclose(f);
		return die(path, EINVAL);
	}
	fclose(f);
	frame[12] = 0x08;
	frame[14] = 0x45;
	frame[16] = (uint8_t)((size - 14) >> 8);
	frame[17] = (uint8_t)(size - 14);
	frame[20] = 0x40;
	frame[22] = 64;
	frame[23] = 17;
	frame[38] = (uint8_t)((size - 34) >> 8);
	frame[39] = (uint8_t)(size - 34);
	for (i = 0; i < count; i++) {
		unsigned long long t0;
		uint64_t tx;

		reap(s);
		if (!s->n_tx_free)
			return die("client: no TX frame", ENOSPC);
		tx = s->tx_free[--s->n_tx_free];
		t0 = now_ns();
		memcpy(xsk_umem__get_data(s->area, tx), frame, (size_t)size);
		send_frame(s, tx, (uint32_t)size);
		if (recv_frame(s, &addr, &len))
			return die("client: no echo in 5 s", ETIMEDOUT);
		printf("%llu\n", now_ns() - t0);
		refill(s, addr);
	}
	return 0;
}

int main(int argc, char **argv)
{
	static struct side s;
	uint8_t dst[6];
	long count, size = 0;
	int server, rc;

	if (argc < 4 || (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
		fprintf(stderr, "usage: xsk_pingpong server IFNAME COUNT [busy]\n"
				"       xsk_pingpong client IFNAME COUNT SIZE DSTMAC [busy]\n");
		return 2;
	}
	server = !strcmp(argv[1], "server");
	count = atol(argv[3]);
	if (!server) {
		if (argc < 6 || parse_mac(argv[5], dst)) {
			fprintf(stderr, "xsk_pingpong: client needs SIZE and DSTMAC (aa:bb:cc:dd:ee:ff)\n");
			return 2;
		}
		size = atol(argv[4]);
		if (size < 60 || size > FRAME - 256) {
			fprintf(stderr, "xsk_pingpong: size %ld (60..%d)\n", size, FRAME - 256);
			return 2;
		}
	}
	s.busy = argc > (server ? 4 : 6) && !strcmp(argv[server ? 4 : 6], "busy");
	rc = open_side(&s, argv[2]);
	if (!rc)
		rc = server ? serve(&s, count) : ask(&s, argv[2], count, size, dst);
	close_side(&s);
	return rc;
}
