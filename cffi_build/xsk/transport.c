// SPDX-License-Identifier: BSD-2-Clause
/*
 * hpccd native transport over AF_XDP (include/hpccd/transport.h has the
 * contract, docs/transport.md the design and the measured figures).
 *
 * One engine = one UMEM + one AF_XDP socket (fill, completion, RX, TX
 * rings) + one thread.  The UMEM is split: frames [0, rx_frames) circulate
 * between the free stack and the fill/RX rings, frames
 * [rx_frames, rx_frames + tx_frames) between the TX free stack and the
 * TX/completion rings.  Every frame is in exactly one of those places.
 *
 * The thread, per loop (seed 004 section 4.2 and seed 000 section 6.3:
 * scheduler, TX pipe, RX pipe):
 *   1. RX pipe: up to RX_ROUNDS batches of the RX ring through the shared
 *      parser (hpccd_wire_parse_frame); DATA to the receiver half, ACK /
 *      NACK / NOTIFY to the sender half; frames back to the fill ring;
 *   2. completions: TX frames back to the TX free stack;
 *   3. timers: retransmission timeouts, delayed ACKs;
 *   4. scheduler: round robin over the flows, one packet per flow per
 *      pass, each flow only while its bytes in flight < W and its next
 *      send time has come (pacing at R, seed 004 line 182: R = W / T);
 *      the credit a flow may bank is burst_ns of its rate;
 *   5. TX: descriptors submitted in one go, a sendto() kick once the
 *      lock is released (copy mode transmits inside the syscall,
 *      TX_BUDGET descriptors at a time);
 *   6. sleep in ppoll() on the socket and an eventfd until the earliest
 *      deadline, unless there is more work at once.  Never spins: the
 *      loop goes round without sleeping only after it did work.
 *
 * Byte order: the wire is big-endian; headers are written field by field
 * with htons/htonl into the frame through memcpy (frames are not
 * naturally aligned for every field).  Checksums are ones' complement
 * sums of native 16-bit words, which are byte-order independent (RFC
 * 1071 section 2(B)): the folded sum is stored as computed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
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
#include <sys/prctl.h>
#include <sys/socket.h>
#include <linux/if_xdp.h>
#include <xdp/xsk.h>
#include <zlib.h>

#include "hpccd/wire_api.h"
#include "hpccd/transport.h"

#ifndef SOL_XDP
#define SOL_XDP 283
#endif

#define RX_BATCH 64             /* descriptors per RX ring peek */
#define RX_ROUNDS 4             /* RX batches per loop before the scheduler runs */
#define TX_BATCH 64             /* descriptors submitted per flush */
#define TX_PER_LOOP 128         /* data packets the scheduler sends per loop */
#define ACK_RESERVE 64          /* TX frames data may not take: feedback needs them */
#define KICK_MAX 64             /* sendto() calls per flush while the kernel says EAGAIN */
#define HEADROOM 2              /* NET_IP_ALIGN: see the frame sizes in transport.h */
#define POLL_BACKSTOP_NS 200000000ull
#define STARVED_SLEEP_NS 20000ull   /* no TX frame: completions come without a wakeup */
#define WAKE_EARLY_MAX_NS 50000ull  /* bound of the timer latency the thread makes up for */
#define RING_MAX 4096
#define ETH_HLEN_ 14
#define IP_HLEN 20
#define UDP_HLEN 8
#define L2L4 (ETH_HLEN_ + IP_HLEN + UDP_HLEN)
#define SLOT_MASK (HPCCD_TP_MAX_FLOWS - 1)
#define NO_DEADLINE UINT64_MAX

/* ---- state ---------------------------------------------------------------- */

struct tp_flow {
	struct hpccd_tp_flow_cfg c;
	uint32_t state, flow_id;
	int32_t err;
	uint32_t mss, room, hdr_max;     /* hdr_max: frame bytes besides payload, room full */
	uint64_t msg_pkts;
	uint64_t snd_una, snd_nxt, snd_max;
	uint64_t next_send_ns, start_ns, end_ns, last_progress_ns;
	uint64_t rto_deadline;
	uint32_t backoff, notify_seq;
	uint64_t srtt, rttvar, min_rtt;
	uint64_t goback_seq, goback_ns;
	/* probe mode (seed 002 section 6.2.1): number of the last PROBE sent,
	 * whether it is outstanding, when it is lost */
	uint64_t probe_seq, probe_deadline;
	int probe_out;
	uint64_t wnd_block_ns;           /* since when the window holds it back; 0: not */
	double W, rate_bps;              /* HPCC W in wire bytes; pacing rate (wire bits/s) */
	double wire_per_payload;
	union {
		struct hpccd_hpcc hpcc;
		struct hpccd_dctcp dctcp;
		struct hpccd_ldcp ldcp;
	} cc;
	struct hpccd_tp_flow_stats st;   /* counters part */
	int active_idx;
};

struct tp_rx {
	uint8_t used;                    /* 0 empty, 1 used, 2 tombstone */
	uint8_t done;
	uint8_t have_echo;
	uint8_t delack_armed;
	uint32_t saddr, daddr, flow_id;
	uint16_t sport, dport;
	uint8_t mac_local[6], mac_peer[6];
	uint64_t rcv_nxt, fin_end;       /* fin_end: UINT64_MAX until the FIN is seen */
	uint32_t crc, unacked;
	int32_t err;
	uint32_t last_ts, notify_seq;
	uint64_t delack_deadline;
	uint64_t nack_for, nack_ns, ooo_since_gap;
	uint8_t echo[HPCCD_INT_HDR_BYTES + HPCCD_INT_MAX_HOPS * HPCCD_INT_HOP_BYTES];
	uint32_t echo_len;
	struct hpccd_dctcp_rx dc;
	struct hpccd_hpcc rxh;
	struct hpccd_tp_rx_stats st;
};

struct txd {
	uint64_t addr;
	uint32_t len;
};

struct hpccd_tp {
	struct xsk_umem *umem;
	struct xsk_socket *sock;
	void *area;
	size_t area_len;
	int fd, efd;
	uint32_t zerocopy, ifindex, queue_id;
	char ifname[IF_NAMESIZE];
	struct hpccd_tp_config cfg;

	struct xsk_ring_prod fq, tx;
	struct xsk_ring_cons cq, rx;
	uint64_t *rx_free, *tx_free;
	uint32_t n_rx_free, n_tx_free, ring;
	struct txd txq[TX_BATCH];
	uint32_t n_txq;
	int starved;
	uint16_t ip_id;

	pthread_t thread;
	int started, stop_flag;
	char err[HPCCD_TP_ERR_MAX];

	pthread_mutex_t lock;            /* everything below, and the flows */
	struct hpccd_tp_stats st;
	struct tp_flow *flows;           /* [HPCCD_TP_MAX_FLOWS] */
	int active[HPCCD_TP_MAX_FLOWS];
	uint32_t n_active, rr, id_gen;
	struct tp_rx *rxt;               /* [HPCCD_TP_RX_FLOWS] */
	uint32_t rx_live;                /* receiver flows not done (Rx-HPCC's N) */
	uint64_t delack_min;
	/* how late ppoll()'s timer wakes the thread (a moving mean, at most
	 * WAKE_EARLY_MAX_NS): the thread asks to wake that much before a send
	 * time and may send that much early, so that packets leave at their
	 * send times on average instead of always one timer latency late */
	uint64_t wake_late_ns;
};

/* ---- errors --------------------------------------------------------------- */

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

static int __attribute__((format(printf, 3, 4)))
tp__fail(struct hpccd_tp *t, int rc, const char *fmt, ...)
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

/* ---- helpers -------------------------------------------------------------- */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void put16(uint8_t *p, uint16_t host)
{
	uint16_t v = htons(host);

	memcpy(p, &v, 2);
}

static inline void put32(uint8_t *p, uint32_t host)
{
	uint32_t v = htonl(host);

	memcpy(p, &v, 4);
}

static inline uint64_t add_carry(uint64_t s, uint64_t v)
{
	s += v;
	return s + (s < v);
}

/* Ones' complement sum of p[0..len) as native 16-bit words, unfolded. */
static uint64_t csum_partial(const uint8_t *p, size_t len, uint64_t sum)
{
	uint64_t v;

	while (len >= 32) {
		uint64_t a, b, c, d;

		memcpy(&a, p, 8);
		memcpy(&b, p + 8, 8);
		memcpy(&c, p + 16, 8);
		memcpy(&d, p + 24, 8);
		sum = add_carry(sum, a);
		sum = add_carry(sum, b);
		sum = add_carry(sum, c);
		sum = add_carry(sum, d);
		p += 32;
		len -= 32;
	}
	while (len >= 8) {
		memcpy(&v, p, 8);
		sum = add_carry(sum, v);
		p += 8;
		len -= 8;
	}
	if (len) {
		v = 0;
		memcpy(&v, p, len);     /* zero padding at the end, in memory order */
		sum = add_carry(sum, v);
	}
	return sum;
}

static uint16_t csum_fold(uint64_t s)
{
	s = (s & 0xffffffffu) + (s >> 32);
	s = (s & 0xffffffffu) + (s >> 32);
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (uint16_t)s;
}

/* UDP checksum of the frame's UDP datagram (IPv4 header at l3), with the
 * pseudo-header; `udp_len` host order. */
static uint64_t udp_sum(const uint8_t *l3, uint32_t udp_len)
{
	uint8_t ph[12];

	memcpy(ph, l3 + 12, 8);          /* saddr, daddr as on the wire */
	ph[8] = 0;
	ph[9] = IPPROTO_UDP;
	put16(ph + 10, (uint16_t)udp_len);
	return csum_partial(l3 + IP_HLEN, udp_len, csum_partial(ph, sizeof(ph), 0));
}

static void fill_l3_csums(uint8_t *frame, uint32_t frame_len)
{
	uint8_t *ip = frame + ETH_HLEN_;
	uint32_t udp_len = frame_len - ETH_HLEN_ - IP_HLEN;
	uint16_t c;

	memset(ip + 10, 0, 2);
	c = (uint16_t)~csum_fold(csum_partial(ip, IP_HLEN, 0));
	memcpy(ip + 10, &c, 2);
	memset(ip + IP_HLEN + 6, 0, 2);
	c = (uint16_t)~csum_fold(udp_sum(ip, udp_len));
	if (c == 0)
		c = 0xffff;              /* RFC 768: a computed 0 is sent as all ones */
	memcpy(ip + IP_HLEN + 6, &c, 2);
}

static uint64_t splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

void hpccd_tp_pattern_fill(uint64_t seed, uint64_t offset, uint8_t *buf, size_t len)
{
	uint64_t k = offset / 8, w;
	uint32_t skip = (uint32_t)(offset % 8);
	uint8_t b[8];

	while (len) {
		size_t n;

		w = splitmix64(seed + k);
		if (!skip && len >= 8) {
			/* little-endian bytes of w (x86-64, aarch64 LE) */
			b[0] = (uint8_t)w; b[1] = (uint8_t)(w >> 8); b[2] = (uint8_t)(w >> 16);
			b[3] = (uint8_t)(w >> 24); b[4] = (uint8_t)(w >> 32); b[5] = (uint8_t)(w >> 40);
			b[6] = (uint8_t)(w >> 48); b[7] = (uint8_t)(w >> 56);
			memcpy(buf, b, 8);
			buf += 8;
			len -= 8;
			k++;
			continue;
		}
		for (n = 0; n < 8; n++)
			b[n] = (uint8_t)(w >> (8 * n));
		n = 8 - skip;
		if (n > len)
			n = len;
		memcpy(buf, b + skip, n);
		buf += n;
		len -= n;
		skip = 0;
		k++;
	}
}

uint32_t hpccd_tp_crc32(uint32_t crc, const uint8_t *buf, size_t len)
{
	while (len) {
		uInt n = len > (1u << 30) ? (1u << 30) : (uInt)len;

		crc = (uint32_t)crc32(crc, buf, n);
		buf += n;
		len -= n;
	}
	return crc;
}

uint32_t hpccd_tp_pattern_crc32(uint64_t seed, uint64_t len)
{
	uint8_t chunk[65536];
	uint64_t off = 0;
	uint32_t crc = (uint32_t)crc32(0, NULL, 0);

	while (off < len) {
		size_t n = len - off > sizeof(chunk) ? sizeof(chunk) : (size_t)(len - off);

		hpccd_tp_pattern_fill(seed, off, chunk, n);
		crc = (uint32_t)crc32(crc, chunk, (uInt)n);
		off += n;
	}
	return crc;
}

/* ---- defaults ------------------------------------------------------------- */

void hpccd_tp_config_default(struct hpccd_tp_config *c)
{
	memset(c, 0, sizeof(*c));
	c->rx_frames = 4096;
	c->tx_frames = 4096;
	c->frame_size = 2048;
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
	c->rx_peer_max = HPCCD_TP_RX_FLOWS / 4;
	hpccd_hpcc_params_default(&c->rx_hpcc);
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
}

/* ---- frames --------------------------------------------------------------- */

static void rx_refill(struct hpccd_tp *t)
{
	uint32_t n, idx, i;

	if (!t->n_rx_free)
		return;
	n = xsk_prod_nb_free(&t->fq, t->n_rx_free);
	if (n > t->n_rx_free)
		n = t->n_rx_free;
	if (!n || xsk_ring_prod__reserve(&t->fq, n, &idx) != n)
		return;
	for (i = 0; i < n; i++)
		*xsk_ring_prod__fill_addr(&t->fq, idx + i) = t->rx_free[--t->n_rx_free];
	xsk_ring_prod__submit(&t->fq, n);
}

static void reap_completions(struct hpccd_tp *t)
{
	const uint64_t mask = ~(uint64_t)(t->cfg.frame_size - 1);
	uint32_t idx, n, i;

	n = xsk_ring_cons__peek(&t->cq, t->ring, &idx);
	if (!n)
		return;
	for (i = 0; i < n; i++)
		t->tx_free[t->n_tx_free++] = *xsk_ring_cons__comp_addr(&t->cq, idx + i) & mask;
	xsk_ring_cons__release(&t->cq, n);
	t->st.completions += n;
}

/* Tell the kernel the TX ring has descriptors.  `locked`: the caller holds
 * t->lock; otherwise it is taken only for what it guards (the completions'
 * frames and the counters): only the thread touches the rings.  In copy
 * mode the kernel transmits -- and the lab forwards -- inside sendto(),
 * which API callers (stats, flow_open) should not wait for, so the loop
 * kicks its last batch after unlocking (tp__main). */
static void tx_kick(struct hpccd_tp *t, int locked)
{
	uint64_t kicks = 0, again = 0;
	int i;

	if (t->zerocopy && !xsk_ring_prod__needs_wakeup(&t->tx))
		return;
	for (i = 0; i < KICK_MAX; i++) {
		ssize_t r = sendto(t->fd, NULL, 0, MSG_DONTWAIT, NULL, 0);

		kicks++;
		if (r >= 0)
			break;
		if (errno != EAGAIN && errno != EBUSY && errno != ENOBUFS)
			break;       /* ENETDOWN and friends: the poll backstop notices */
		again++;
		/* Copy mode sends a budget of descriptors per call and says
		 * EAGAIN while more wait; a full completion ring says so too. */
		if (!locked)
			pthread_mutex_lock(&t->lock);
		reap_completions(t);
		if (!locked)
			pthread_mutex_unlock(&t->lock);
		if (__atomic_load_n(t->tx.consumer, __ATOMIC_ACQUIRE) == t->tx.cached_prod)
			break;
	}
	if (!locked)
		pthread_mutex_lock(&t->lock);
	t->st.kicks += kicks;
	t->st.kick_again += again;
	if (!locked)
		pthread_mutex_unlock(&t->lock);
}

/* Put the queued descriptors on the TX ring (t->lock held); returns
 * whether any were put there, so that the caller kicks. */
static int tx_submit(struct hpccd_tp *t)
{
	uint32_t idx = 0, i;

	if (!t->n_txq)
		return 0;
	while (xsk_ring_prod__reserve(&t->tx, t->n_txq, &idx) != t->n_txq) {
		/* the ring is full: let the kernel take some */
		tx_kick(t, 1);
		reap_completions(t);
		if (xsk_prod_nb_free(&t->tx, t->n_txq) < t->n_txq) {
			/* cannot happen with ring >= tx_frames; drop rather than spin */
			for (i = 0; i < t->n_txq; i++)
				t->tx_free[t->n_tx_free++] = t->txq[i].addr - HEADROOM;
			t->st.tx_no_frame += t->n_txq;
			t->n_txq = 0;
			return 0;
		}
	}
	for (i = 0; i < t->n_txq; i++) {
		struct xdp_desc *d = xsk_ring_prod__tx_desc(&t->tx, idx + i);

		d->addr = t->txq[i].addr;
		d->len = t->txq[i].len;
		d->options = 0;
		t->st.tx_frames++;
		t->st.tx_bytes += t->txq[i].len;
	}
	xsk_ring_prod__submit(&t->tx, t->n_txq);
	t->n_txq = 0;
	return 1;
}

static void tx_flush(struct hpccd_tp *t)
{
	if (tx_submit(t))
		tx_kick(t, 1);
}

/* A TX frame to build into (its UMEM address in *addr), or NULL. */
static uint8_t *tx_get(struct hpccd_tp *t, uint64_t *addr)
{
	if (!t->n_tx_free)
		reap_completions(t);
	if (!t->n_tx_free) {
		t->st.tx_no_frame++;
		t->starved = 1;
		return NULL;
	}
	*addr = t->tx_free[--t->n_tx_free] + HEADROOM;
	return xsk_umem__get_data(t->area, *addr);
}

static void tx_put(struct hpccd_tp *t, uint64_t addr, uint32_t len)
{
	t->txq[t->n_txq].addr = addr;
	t->txq[t->n_txq].len = len;
	if (++t->n_txq == TX_BATCH)
		tx_flush(t);
}

/* Ethernet + IPv4 + UDP; lengths, id and checksums filled later. */
static void put_l2l4(uint8_t *f, const uint8_t *dmac, const uint8_t *smac, uint32_t saddr,
		     uint32_t daddr, uint16_t sport, uint16_t dport, uint8_t tos)
{
	memcpy(f, dmac, 6);
	memcpy(f + 6, smac, 6);
	f[12] = 0x08;
	f[13] = 0x00;
	f[14] = 0x45;
	f[15] = tos;
	put16(f + 18, 0);
	put16(f + 20, 0x4000);           /* DF: senders never fragment (wire-format.md) */
	f[22] = 64;
	f[23] = IPPROTO_UDP;
	put32(f + 26, saddr);
	put32(f + 30, daddr);
	put16(f + 34, sport);
	put16(f + 36, dport);
}

static void finish_frame(struct hpccd_tp *t, uint8_t *f, uint32_t len)
{
	put16(f + 16, (uint16_t)(len - ETH_HLEN_));
	put16(f + 18, t->ip_id++);
	put16(f + 38, (uint16_t)(len - ETH_HLEN_ - IP_HLEN));
	fill_l3_csums(f, len);
}

/* INT header: nHop 0, `room` records reserved (zeroed), COLLECT iff room. */
static uint32_t put_int(uint8_t *p, uint32_t room)
{
	p[0] = (uint8_t)(HPCCD_INT_MAGIC << 4 | HPCCD_WIRE_VERSION);
	p[1] = (uint8_t)room;
	put16(p + 2, room ? (uint16_t)(HPCCD_INT_F_COLLECT << 12) : 0);
	memset(p + HPCCD_INT_HDR_BYTES, 0, room * HPCCD_INT_HOP_BYTES);
	return HPCCD_INT_HDR_BYTES + room * HPCCD_INT_HOP_BYTES;
}

static void put_hdr(uint8_t *p, uint32_t type, uint32_t flags, uint32_t len, uint32_t flow_id,
		    uint64_t seq, uint64_t ack, uint32_t ts, uint32_t aux)
{
	p[0] = (uint8_t)(HPCCD_WIRE_VERSION << 4 | type);
	p[1] = (uint8_t)flags;
	put16(p + 2, (uint16_t)len);
	put32(p + 4, flow_id);
	put32(p + 8, (uint32_t)(seq >> 32));
	put32(p + 12, (uint32_t)seq);
	put32(p + 16, (uint32_t)(ack >> 32));
	put32(p + 20, (uint32_t)ack);
	put32(p + 24, ts);
	put32(p + 28, aux);
}

/* ---- sender ---------------------------------------------------------------- */

static uint64_t flow_rto(const struct tp_flow *fl)
{
	uint64_t rto = fl->srtt ? fl->srtt + 4 * fl->rttvar : fl->c.rto_min_ns;

	if (rto < fl->c.rto_min_ns)
		rto = fl->c.rto_min_ns;
	rto <<= fl->backoff < 20 ? fl->backoff : 20;
	return rto > fl->c.rto_max_ns ? fl->c.rto_max_ns : rto;
}

static double cap_rate(const struct tp_flow *fl, double r)
{
	double line = (double)fl->c.line_rate_bps;

	if (!(r > 0))
		return line;
	return r < line ? r : line;
}

/* W and R from the flow's algorithm (the core is the only place they are
 * computed; this only converts units). */
static void flow_sync_cc(struct tp_flow *fl)
{
	switch (fl->c.algo) {
	case HPCCD_ALGO_HPCC:
		fl->W = fl->cc.hpcc.W;
		fl->rate_bps = cap_rate(fl, hpccd_hpcc_rate_bps(&fl->cc.hpcc));
		break;
	case HPCCD_ALGO_RXHPCC:
		/* W is the receiver's (NOTIFY), R = W / T (seed 004 line 182) */
		fl->rate_bps = cap_rate(fl, fl->W * 8e9 / fl->cc.hpcc.T);
		break;
	case HPCCD_ALGO_DCTCP:
		/* window-based: paced at the NIC's rate, limited by cwnd */
		fl->W = (double)fl->cc.dctcp.cwnd * fl->wire_per_payload;
		fl->rate_bps = (double)fl->c.line_rate_bps;
		break;
	case HPCCD_ALGO_LDCP: {
		uint64_t iv = hpccd_ldcp_tx_interval_ns(&fl->cc.ldcp, fl->srtt);

		fl->W = fl->cc.ldcp.cw * fl->mss * fl->wire_per_payload;
		/* cw < 1: one packet every RTT / cw (seed 003 section 2.2) */
		fl->rate_bps = iv ? cap_rate(fl, (fl->mss + fl->hdr_max) * 8e9 / (double)iv)
				  : (double)fl->c.line_rate_bps;
		break;
	}
	}
}

/* Payload bytes the window lets be in flight (at least one packet). */
static uint64_t flow_allowed(const struct tp_flow *fl)
{
	double a = fl->W / fl->wire_per_payload;

	return a < fl->mss ? fl->mss : (uint64_t)a;
}

static int flow_wants_to_send(const struct tp_flow *fl)
{
	return fl->state == HPCCD_TP_RUNNING && fl->snd_nxt < fl->c.bytes &&
	       fl->snd_nxt - fl->snd_una < flow_allowed(fl);
}

static void flow_finish(struct hpccd_tp *t, struct tp_flow *fl, uint32_t state, int err,
			uint64_t now)
{
	int i = fl->active_idx;

	fl->state = state;
	fl->err = err;
	fl->end_ns = now;
	if (i >= 0) {
		t->active[i] = t->active[--t->n_active];
		t->flows[t->active[i]].active_idx = i;
		fl->active_idx = -1;
	}
}

static int send_data(struct hpccd_tp *t, struct tp_flow *fl, uint64_t now)
{
	uint64_t addr, seq = fl->snd_nxt, idx;
	uint32_t plen, room = 0, flags = 0, off, len;
	int retx, ect;
	uint8_t *f, *p;

	if (t->n_tx_free <= ACK_RESERVE)
		reap_completions(t);
	if (t->n_tx_free <= ACK_RESERVE) {
		t->st.tx_no_frame++;
		t->starved = 1;
		return -ENOBUFS;
	}
	f = tx_get(t, &addr);
	if (!f)
		return -ENOBUFS;
	plen = fl->c.bytes - seq < fl->mss ? (uint32_t)(fl->c.bytes - seq) : fl->mss;
	idx = seq / fl->mss;
	retx = seq < fl->snd_max;
	switch (fl->c.int_mode) {
	case HPCCD_TP_INT_EVERY:
		room = fl->room;
		break;
	case HPCCD_TP_INT_NTH:
		room = idx % fl->c.int_every == 0 ? fl->room : 0;
		break;
	}
	if (fl->c.algo == HPCCD_ALGO_DCTCP)
		ect = 1;
	else if (fl->c.algo == HPCCD_ALGO_LDCP)
		/* seed 003 section 3.1: first-RTT packets ECN-incapable but the
		 * IW-th (or the message's last); retransmissions are stable */
		ect = retx || hpccd_ldcp_pkt_ect(&fl->cc.ldcp, idx, fl->msg_pkts);
	else
		ect = fl->c.ecn != 0;
	if (seq == 0)
		flags |= HPCCD_F_SYN;
	if (seq + plen == fl->c.bytes)
		flags |= HPCCD_F_FIN;
	if (retx)
		flags |= HPCCD_F_RETX;
	if (fl->c.algo == HPCCD_ALGO_LDCP && !retx && idx < (uint64_t)fl->cc.ldcp.iw)
		flags |= HPCCD_F_FIRST_RTT;

	put_l2l4(f, fl->c.dmac, fl->c.smac, fl->c.saddr, fl->c.daddr, fl->c.sport, fl->c.dport,
		 ect ? 0x02 : 0x00);
	off = L2L4;
	off += put_int(f + off, room);
	put_hdr(f + off, HPCCD_T_DATA, flags, plen, fl->flow_id, seq, 0, (uint32_t)now, 0);
	off += HPCCD_HDR_BYTES;
	p = f + off;
	if (fl->c.src == HPCCD_TP_SRC_BUFFER)
		memcpy(p, fl->c.buf + seq, plen);
	else
		hpccd_tp_pattern_fill(fl->c.seed, seq, p, plen);
	len = off + plen;
	finish_frame(t, f, len);
	tx_put(t, addr, len);

	fl->snd_nxt = seq + plen;
	if (fl->snd_nxt > fl->snd_max)
		fl->snd_max = fl->snd_nxt;
	fl->st.pkts++;
	fl->st.wire_bytes += len;
	fl->st.retx_pkts += retx;
	fl->st.retx_bytes += retx ? plen : 0;
	fl->st.int_pkts += room != 0;
	fl->st.ect_pkts += ect;
	if (fl->rto_deadline == NO_DEADLINE)
		fl->rto_deadline = now + flow_rto(fl);
	/* pacing: next send time from the rate, with at most burst_ns of
	 * banked credit (seed 004 section 4.2: credit-based pacing) */
	{
		uint64_t base = fl->next_send_ns;

		if (base + fl->c.burst_ns < now) {
			fl->st.pace_lost_ns += now - fl->c.burst_ns - base;
			base = now - fl->c.burst_ns;
		}
		fl->next_send_ns = base + (uint64_t)((double)len * 8e9 / fl->rate_bps);
	}
	return 0;
}

/* Probe mode (seed 002 section 6.2.1, "Probe packet"): a PROBE with the
 * flow's 5-tuple and ECN codepoint (so switches route and queue it with the
 * data, seed 000 section 6.1), `int_room` empty hop records with COLLECT,
 * the probe number as seq, the clock as ts, a zeroed tag slot that the
 * receiver's xdp_host fills when it reflects it (docs/wire-format.md).
 * Feedback-class: it takes a TX frame like an ACK, outside the window and
 * the pacing (126 bytes once per RTT). */
static int send_probe(struct hpccd_tp *t, struct tp_flow *fl, uint64_t now)
{
	uint64_t addr;
	uint32_t off = L2L4;
	uint8_t *f = tx_get(t, &addr);

	if (!f)
		return -ENOBUFS;
	put_l2l4(f, fl->c.dmac, fl->c.smac, fl->c.saddr, fl->c.daddr, fl->c.sport, fl->c.dport,
		 fl->c.ecn ? 0x02 : 0x00);
	off += put_int(f + off, fl->c.int_room);
	put_hdr(f + off, HPCCD_T_PROBE, 0, HPCCD_TAG_BYTES, fl->flow_id, ++fl->probe_seq, 0,
		(uint32_t)now, 0);
	off += HPCCD_HDR_BYTES;
	memset(f + off, 0, HPCCD_TAG_BYTES);
	off += HPCCD_TAG_BYTES;
	finish_frame(t, f, off);
	tx_put(t, addr, off);
	fl->probe_out = 1;
	fl->probe_deadline = now + fl->c.probe_timeout_ns;
	fl->st.probes_sent++;
	return 0;
}

/* One probe per RTT per flow, only while the flow has data in flight: the
 * next leaves once the last one was answered (on_probe_resp) or timed out
 * (flow_timers), both of which run before this in the same loop. */
static void schedule_probes(struct hpccd_tp *t, uint64_t now)
{
	uint32_t i;

	for (i = 0; i < t->n_active; i++) {
		struct tp_flow *fl = &t->flows[t->active[i]];

		if (fl->c.int_mode != HPCCD_TP_INT_PROBE || fl->probe_out ||
		    fl->state != HPCCD_TP_RUNNING || fl->snd_nxt <= fl->snd_una)
			continue;
		if (send_probe(t, fl, now) < 0)
			return;
	}
}

/* The window, not the pacing, holds a running flow back from `now`: its
 * send time has come but its bytes in flight reached W. */
static void flow_note_window(struct tp_flow *fl, uint64_t now)
{
	if (!fl->wnd_block_ns && fl->state == HPCCD_TP_RUNNING && fl->snd_nxt < fl->c.bytes)
		fl->wnd_block_ns = now > fl->next_send_ns ? fl->next_send_ns : now;
}

/* The window opened again: the blocked time is the window's.  The pacing
 * restarts from now: credit banked while the window was closed would go
 * out as a burst at line rate, which is the queue the pacing is there to
 * avoid (seed 004 section 4.2: the window bounds in-flight bytes, the
 * rate spaces them). */
static void flow_window_opened(struct tp_flow *fl, uint64_t now)
{
	fl->st.wnd_limited_ns += now - fl->wnd_block_ns;
	fl->wnd_block_ns = 0;
	if (fl->next_send_ns < now)
		fl->next_send_ns = now;
}

/* Round robin over the active flows, one packet per flow per pass. */
static uint32_t schedule(struct hpccd_tp *t, uint64_t now, int *more)
{
	uint32_t sent = 0, pass_sent, i, n;
	uint64_t due = now + t->wake_late_ns;   /* the first pass may be early */

	*more = 0;
	do {
		pass_sent = 0;
		n = t->n_active;
		for (i = 0; i < n && sent < TX_PER_LOOP; i++) {
			struct tp_flow *fl = &t->flows[t->active[(t->rr + i) % n]];

			if (fl->next_send_ns > due)
				continue;
			if (!flow_wants_to_send(fl)) {
				flow_note_window(fl, now);
				continue;
			}
			if (fl->wnd_block_ns)
				flow_window_opened(fl, now);
			if (send_data(t, fl, now) < 0)
				return sent;
			sent++;
			pass_sent++;
		}
		if (n)
			t->rr = (t->rr + 1) % n;
		due = now;                          /* later passes: only what is due */
	} while (pass_sent && sent < TX_PER_LOOP);
	*more = sent >= TX_PER_LOOP;
	return sent;
}

static void flow_rtt_sample(struct tp_flow *fl, uint32_t ts_echo, uint64_t now)
{
	uint64_t r = (uint32_t)((uint32_t)now - ts_echo);
	uint64_t d;

	if (r > 4000000000ull)
		return;
	if (!fl->min_rtt || r < fl->min_rtt)
		fl->min_rtt = r;
	if (!fl->srtt) {
		fl->srtt = r;
		fl->rttvar = r / 2;
		return;
	}
	/* RFC 6298 section 2.3 gains, 1/8 and 1/4 */
	d = r > fl->srtt ? r - fl->srtt : fl->srtt - r;
	fl->rttvar = (3 * fl->rttvar + d) / 4;
	fl->srtt = (7 * fl->srtt + r) / 8;
}

static struct tp_flow *flow_by_id(struct hpccd_tp *t, uint32_t flow_id)
{
	struct tp_flow *fl = &t->flows[flow_id & SLOT_MASK];

	return fl->state != HPCCD_TP_FREE && fl->flow_id == flow_id ? fl : NULL;
}

static void on_feedback(struct hpccd_tp *t, const uint8_t *f, uint32_t len,
			const struct hpccd_wire_info *wi, uint64_t now)
{
	struct tp_flow *fl = flow_by_id(t, wi->flow_id);
	uint64_t ack = wi->ack, acked = 0;
	int ece = !!(wi->hdr_flags & HPCCD_F_ECE), loss = 0;

	if (!fl || wi->saddr != fl->c.daddr || wi->dport != fl->c.sport) {
		t->st.unknown_flow++;
		return;
	}
	if (fl->state != HPCCD_TP_RUNNING)
		return;                  /* late feedback of a finished flow */
	if (ack > fl->snd_max) {
		t->st.bad_body++;        /* acknowledges what was never sent */
		return;
	}
	if (wi->hdr_type == HPCCD_T_NACK && ack < fl->snd_una) {
		/* The receiver's restart (docs/security.md "Faults"): a live
		 * receiver's rcv_nxt never goes back, so a NACK below snd_una
		 * answering a DATA sent *after* snd_una last advanced (its
		 * echoed ts, widened to 64 bits through the RTT) comes from a
		 * receiver that lost the flow's state.  Its stream cannot be
		 * completed (the bytes before were delivered to the old one):
		 * the flow fails at once with ECONNRESET, as TCP's does on a
		 * RST.  A stale NACK reordered behind newer ACKs echoes an
		 * older DATA and is ignored below, as before. */
		uint64_t sent = now - (uint32_t)((uint32_t)now - wi->ts);

		if (sent > fl->last_progress_ns) {
			flow_finish(t, fl, HPCCD_TP_FAILED, -ECONNRESET, now);
			return;
		}
	}
	if (wi->hdr_type == HPCCD_T_NOTIFY) {
		if (!wi->has_notify ||
		    hpccd_wire_tag_verify(t->cfg.tag_key, f, len, t->cfg.udp_port,
					  t->cfg.probe_dscp) != 1) {
			fl->st.bad_tags++;   /* wire-format.md: never applied */
			return;
		}
		if (wi->notify_seq <= fl->notify_seq && fl->st.notifies) {
			fl->st.stale_notifies++;
			return;
		}
		fl->notify_seq = wi->notify_seq;
		fl->st.notifies++;
	} else {
		flow_rtt_sample(fl, wi->ts, now);
	}
	if (ack > fl->snd_una) {
		acked = ack - fl->snd_una;
		fl->snd_una = ack;
		fl->backoff = 0;
		fl->last_progress_ns = now;
		fl->rto_deadline = fl->snd_una < fl->snd_max ? now + flow_rto(fl) : NO_DEADLINE;
		if (fl->snd_nxt < fl->snd_una)
			fl->snd_nxt = fl->snd_una;
	}
	switch (wi->hdr_type) {
	case HPCCD_T_ACK:
		fl->st.acks++;
		fl->st.ece_acks += ece;
		break;
	case HPCCD_T_NACK:
		fl->st.nacks++;
		/* go-back-N (seed 004 section 4.2, line 334): resend from the
		 * first byte the receiver misses; once per gap per RTT, so that
		 * the NACKs of one loss do not rewind again and again */
		/* a stale NACK (below what is acknowledged) rewinds nothing */
		if (ack == fl->snd_una && ack < fl->snd_nxt &&
		    (ack != fl->goback_seq ||
		     now - fl->goback_ns > (fl->srtt > 100000 ? fl->srtt : 100000))) {
			fl->snd_nxt = ack;
			fl->goback_seq = ack;
			fl->goback_ns = now;
			fl->st.go_backs++;
			loss = 1;
		}
		break;
	}

	switch (fl->c.algo) {
	case HPCCD_ALGO_HPCC:
		if (wi->hdr_type == HPCCD_T_ACK && (wi->hdr_flags & HPCCD_F_INT_ECHO) &&
		    wi->int_nhop) {
			const struct hpccd_int_hop_wire *h =
				(const void *)(f + wi->int_off + HPCCD_INT_HDR_BYTES);

			fl->st.int_acks++;
			/* NewAck (seed 004 Algorithm 1 line 21) */
			if (hpccd_hpcc_new_ack_wire(&fl->cc.hpcc, now, ack, fl->snd_max,
						    wi->int_path_id, h, wi->int_nhop) == 1)
				fl->st.cc_updates++;
		}
		break;
	case HPCCD_ALGO_RXHPCC:
		if (wi->hdr_type == HPCCD_T_NOTIFY) {
			/* the receiver's W (seed 002 section 6.3.2), clamped to
			 * what this sender allows */
			double w = (double)wi->w_bytes;

			fl->W = fmin(fmax(w, fl->cc.hpcc.w_min), fl->cc.hpcc.w_max);
			fl->st.cc_updates++;
		}
		break;
	case HPCCD_ALGO_DCTCP:
		if (wi->hdr_type != HPCCD_T_NOTIFY) {
			hpccd_dctcp_on_ack(&fl->cc.dctcp, ack, fl->snd_max, ece,
					   loss ? HPCCD_LOSS_FAST : HPCCD_LOSS_NONE);
			fl->st.cc_updates++;
		}
		break;
	case HPCCD_ALGO_LDCP:
		if (wi->hdr_type == HPCCD_T_ACK && wi->aux) {
			hpccd_ldcp_on_ack(&fl->cc.ldcp, wi->aux, ece, 0, now);
			fl->st.cc_updates++;
		} else if (loss) {
			uint32_t n = (uint32_t)((acked + fl->mss - 1) / fl->mss);

			hpccd_ldcp_on_ack(&fl->cc.ldcp, n, ece, 1, now);
			fl->st.cc_updates++;
		}
		break;
	}
	flow_sync_cc(fl);
	if (fl->snd_una >= fl->c.bytes)
		flow_finish(t, fl, HPCCD_TP_DONE, 0, now);
}

static void flow_timers(struct hpccd_tp *t, uint64_t now)
{
	uint32_t i;

	for (i = 0; i < t->n_active; i++) {
		struct tp_flow *fl = &t->flows[t->active[i]];

		if (fl->probe_out && fl->probe_deadline <= now) {
			/* lost: counted; schedule_probes sends the next */
			fl->probe_out = 0;
			fl->st.probes_lost++;
		}
		if (fl->rto_deadline > now)
			continue;
		if (fl->snd_una >= fl->snd_max) {
			fl->rto_deadline = NO_DEADLINE;
			continue;
		}
		fl->st.rtos++;
		if (now - fl->last_progress_ns >= fl->c.timeout_ns) {
			flow_finish(t, fl, HPCCD_TP_FAILED, -ETIMEDOUT, now);
			i--;             /* the slot now holds another flow */
			continue;
		}
		fl->backoff++;
		/* go back to the first unacknowledged byte */
		fl->snd_nxt = fl->snd_una;
		fl->goback_seq = fl->snd_una;
		fl->goback_ns = now;
		fl->next_send_ns = now;
		if (fl->c.algo == HPCCD_ALGO_DCTCP)
			hpccd_dctcp_on_ack(&fl->cc.dctcp, fl->snd_una, fl->snd_max, 0,
					   HPCCD_LOSS_RTO);
		else if (fl->c.algo == HPCCD_ALGO_LDCP)
			hpccd_ldcp_on_ack(&fl->cc.ldcp, 0, 0, 1, now);
		flow_sync_cc(fl);
		fl->rto_deadline = now + flow_rto(fl);
	}
}

/* ---- receiver --------------------------------------------------------------- */

static uint32_t rx_hash(uint32_t saddr, uint32_t flow_id)
{
	uint64_t h = splitmix64(((uint64_t)saddr << 32) | flow_id);

	return (uint32_t)h & (HPCCD_TP_RX_FLOWS - 1);
}

static struct tp_rx *rx_lookup(struct hpccd_tp *t, uint32_t saddr, uint32_t flow_id, int create)
{
	uint32_t h = rx_hash(saddr, flow_id), i;
	struct tp_rx *tomb = NULL;

	for (i = 0; i < HPCCD_TP_RX_FLOWS; i++) {
		struct tp_rx *r = &t->rxt[(h + i) & (HPCCD_TP_RX_FLOWS - 1)];

		if (r->used == 1 && r->saddr == saddr && r->flow_id == flow_id)
			return r;
		if (r->used == 2 && !tomb)
			tomb = r;
		if (r->used == 0) {
			if (!tomb)
				tomb = r;
			break;
		}
	}
	if (!create || !tomb)
		return NULL;
	memset(tomb, 0, sizeof(*tomb));
	tomb->used = 1;
	tomb->saddr = saddr;
	tomb->flow_id = flow_id;
	tomb->fin_end = UINT64_MAX;
	tomb->nack_for = UINT64_MAX;
	tomb->crc = (uint32_t)crc32(0, NULL, 0);
	hpccd_dctcp_rx_init(&tomb->dc, t->cfg.ack_every);
	hpccd_hpcc_init(&tomb->rxh, &t->cfg.rx_hpcc, HPCCD_ALGO_RXHPCC, NULL); /* checked at create */
	t->rx_live++;
	return tomb;
}

/* Limits of the receiver table (docs/security.md "Limits").  DATA of a
 * flow the table does not hold: admitted unless its source already has
 * rx_peer_max flows not done (a flood of new flows from one peer then
 * costs that peer only: counted in rx_peer_full).  When the table is full
 * a slot is recycled: the done flow finished longest ago (rx_recycled;
 * a long-running receiver that nobody reaps must keep accepting flows),
 * else an unfinished flow without DATA for rx_idle_ns (rx_expired: its
 * sender died or gave up); otherwise the flow is refused (rx_table_full)
 * and the flows in the table keep being served.  Both scans run only for
 * the first packet of a new flow. */
static struct tp_rx *rx_admit(struct hpccd_tp *t, uint32_t saddr, uint32_t flow_id,
			      uint64_t now)
{
	struct tp_rx *r, *victim = NULL;
	uint32_t i, peer_live = 0;
	int done_victim = 0;

	for (i = 0; i < HPCCD_TP_RX_FLOWS; i++) {
		r = &t->rxt[i];
		if (r->used == 1 && !r->done && r->saddr == saddr)
			peer_live++;
	}
	if (t->cfg.rx_peer_max && peer_live >= t->cfg.rx_peer_max) {
		t->st.rx_peer_full++;
		return NULL;
	}
	r = rx_lookup(t, saddr, flow_id, 1);
	if (r)
		return r;
	for (i = 0; i < HPCCD_TP_RX_FLOWS; i++) {
		struct tp_rx *c = &t->rxt[i];

		if (c->used != 1)
			continue;
		if (c->done) {
			if (!done_victim || c->st.last_ns < victim->st.last_ns)
				victim = c;
			done_victim = 1;
		} else if (!done_victim && now - c->st.last_ns >= t->cfg.rx_idle_ns &&
			   (!victim || c->st.last_ns < victim->st.last_ns)) {
			victim = c;
		}
	}
	if (!victim) {
		t->st.rx_table_full++;
		return NULL;
	}
	if (done_victim) {
		t->st.rx_recycled++;
	} else {
		t->st.rx_expired++;
		if (t->rx_live)
			t->rx_live--;
	}
	victim->used = 2;        /* a tombstone: the table has no empty slot, so
				  * rx_lookup finds it on any probe sequence */
	return rx_lookup(t, saddr, flow_id, 1);
}

/* Feedback frame of receiver flow r: ACK / NACK (with the INT echo when
 * asked), or NOTIFY with its body and tag. */
static void send_feedback(struct hpccd_tp *t, struct tp_rx *r, uint32_t type, uint64_t ack,
			  int ece, uint32_t aux, int echo, uint64_t now)
{
	uint64_t addr;
	uint32_t off = L2L4, flags = ece ? HPCCD_F_ECE : 0, blen = 0;
	uint8_t *f = tx_get(t, &addr);

	if (!f) {
		t->st.ack_dropped++;
		return;
	}
	put_l2l4(f, r->mac_peer, r->mac_local, r->daddr, r->saddr, r->dport, r->sport, 0);
	if (echo && r->have_echo) {
		/* Echo: nHop, pathID, OVERFLOW and the records as received,
		 * COLLECT cleared so that the return path does not stamp. */
		memcpy(f + off, r->echo, r->echo_len);
		f[off + 2] &= (uint8_t)~(HPCCD_INT_F_COLLECT << 4);
		off += r->echo_len;
		flags |= HPCCD_F_INT_ECHO;
		r->have_echo = 0;
	} else {
		off += put_int(f + off, 0);
	}
	if (type == HPCCD_T_NOTIFY)
		blen = HPCCD_NOTIFY_BYTES + HPCCD_TAG_BYTES;
	put_hdr(f + off, type, flags, blen, r->flow_id, 0, ack, r->last_ts, aux);
	off += HPCCD_HDR_BYTES;
	if (type == HPCCD_T_NOTIFY) {
		const struct hpccd_hpcc *h = &r->rxh;
		double u = h->U * 65536.0, kbps = hpccd_hpcc_rate_bps(h) / 1000.0;
		uint8_t *b = f + off;
		uint64_t tag;

		put32(b, h->W > 4e9 ? 0xffffffffu : (uint32_t)h->W);
		put32(b + 4, kbps > 4e9 ? 0xffffffffu : (uint32_t)kbps);
		put32(b + 8, u > 4294967295.0 ? 0xffffffffu : (uint32_t)u);
		put16(b + 12, t->rx_live > 0xffff ? 0xffff : (uint16_t)t->rx_live);
		put16(b + 14, 0);
		put32(b + 16, ++r->notify_seq);
		put32(b + 20, (uint32_t)h->T);
		memset(b + HPCCD_NOTIFY_BYTES, 0, HPCCD_TAG_BYTES);
		off += blen;
		finish_frame(t, f, off);
		if (hpccd_wire_tag(t->cfg.tag_key, f, off, t->cfg.udp_port, t->cfg.probe_dscp,
				   &tag) == 0) {
			put32(f + off - 8, (uint32_t)(tag >> 32));
			put32(f + off - 4, (uint32_t)tag);
		}
		fill_l3_csums(f, off);   /* the tag is part of the UDP sum */
		r->st.notifies_sent++;
	} else {
		finish_frame(t, f, off);
		if (type == HPCCD_T_NACK)
			r->st.nacks_sent++;
		else
			r->st.acks_sent++;
	}
	(void)now;
	tx_put(t, addr, off);
}

static void rx_ack_now(struct hpccd_tp *t, struct tp_rx *r, uint64_t now)
{
	struct hpccd_ack_req q;

	if (hpccd_dctcp_rx_flush(&r->dc, &q)) {
		send_feedback(t, r, HPCCD_T_ACK, q.ack_seq, q.ece, r->unacked,
			      !(t->cfg.flags & HPCCD_TP_F_NO_ECHO), now);
		r->unacked = 0;
	}
	r->delack_armed = 0;
}

static int rx_deliver(struct hpccd_tp *t, struct tp_rx *r, const uint8_t *p, uint32_t n)
{
	r->crc = (uint32_t)crc32(r->crc, p, n);
	if (t->cfg.sink == HPCCD_TP_SINK_FD && !r->err) {
		while (n) {
			ssize_t w = write(t->cfg.sink_fd, p, n);

			if (w < 0) {
				if (errno == EINTR)
					continue;
				r->err = -errno;
				return r->err;
			}
			p += w;
			n -= (uint32_t)w;
		}
	}
	return 0;
}

static void on_data(struct hpccd_tp *t, uint8_t *f, uint32_t len,
		    const struct hpccd_wire_info *wi, uint64_t now)
{
	struct hpccd_ack_req q[2];
	struct tp_rx *r;
	uint64_t seq = wi->seq;
	uint32_t plen = wi->payload_len, nq, i;
	int ce = wi->ecn == 3, echo = !(t->cfg.flags & HPCCD_TP_F_NO_ECHO);
	const uint8_t *udp = f + wi->int_off - UDP_HLEN;

	if (!(t->cfg.flags & HPCCD_TP_F_NO_CSUM_CHECK)) {
		uint32_t ulen = wi->l4_end_off - (wi->int_off - UDP_HLEN);
		uint8_t ph[12];
		uint16_t c;

		/* pseudo-header from the parsed addresses: IPv4 options, if
		 * any, do not move it */
		put32(ph, wi->saddr);
		put32(ph + 4, wi->daddr);
		ph[8] = 0;
		ph[9] = IPPROTO_UDP;
		put16(ph + 10, (uint16_t)ulen);
		memcpy(&c, udp + 6, 2);
		if (c && csum_fold(csum_partial(udp, ulen, csum_partial(ph, 12, 0))) != 0xffff) {
			t->st.bad_csum++;
			return;
		}
	}
	r = rx_lookup(t, wi->saddr, wi->flow_id, 0);
	if (!r)
		r = rx_admit(t, wi->saddr, wi->flow_id, now);
	if (!r)
		return;                  /* refused and counted */
	if (!r->st.pkts) {
		r->daddr = wi->daddr;
		r->sport = wi->sport;
		r->dport = wi->dport;
		r->st.first_ns = now;
	}
	memcpy(r->mac_peer, f + 6, 6);   /* answer the hop it came from */
	memcpy(r->mac_local, f, 6);
	r->st.pkts++;
	r->st.ce_pkts += ce;
	r->st.int_pkts += wi->int_nhop != 0;
	r->last_ts = wi->ts;
	if (wi->hdr_flags & HPCCD_F_FIN)
		r->fin_end = seq + plen;

	if (seq > r->rcv_nxt) {
		/* a gap: drop (go-back-N), NACK once per gap per nack_gap_ns */
		r->st.ooo_pkts++;
		r->ooo_since_gap++;
		if (r->nack_for != r->rcv_nxt || now - r->nack_ns >= t->cfg.nack_gap_ns) {
			r->nack_for = r->rcv_nxt;
			r->nack_ns = now;
			send_feedback(t, r, HPCCD_T_NACK, r->rcv_nxt, r->dc.ce,
				      (uint32_t)r->ooo_since_gap, 0, now);
		}
		return;
	}
	if (seq + plen <= r->rcv_nxt && !(plen == 0 && seq == r->rcv_nxt)) {
		/* a duplicate (a retransmission after a lost ACK, or go-back-N
		 * resending what arrived): acknowledge at once */
		r->st.dup_pkts++;
		if (r->unacked)
			rx_ack_now(t, r, now);
		else
			send_feedback(t, r, HPCCD_T_ACK, r->rcv_nxt, r->dc.ce, 0, 0, now);
		return;
	}
	/* in order (a packet straddling rcv_nxt delivers its new part) */
	{
		uint32_t skip = (uint32_t)(r->rcv_nxt - seq);

		rx_deliver(t, r, f + wi->body_off + skip, plen - skip);
		r->rcv_nxt = seq + plen;
		r->st.bytes = r->rcv_nxt;
		r->ooo_since_gap = 0;
		r->nack_for = UINT64_MAX;
	}
	if (wi->int_nhop && wi->int_room) {
		uint32_t n = HPCCD_INT_HDR_BYTES + wi->int_room * HPCCD_INT_HOP_BYTES;
		const uint8_t *ih = f + wi->int_off;

		if (echo) {
			memcpy(r->echo, ih, n);
			r->echo_len = n;
			r->have_echo = 1;
		}
		if (!(t->cfg.flags & HPCCD_TP_F_NO_NOTIFY)) {
			/* Rx-HPCC NewINT (seed 000 lines 28-34): a NOTIFY with
			 * W once per T */
			hpccd_hpcc_set_active_flows(&r->rxh, t->rx_live);
			if (hpccd_hpcc_new_int_wire(&r->rxh, now, wi->int_path_id,
						    (const void *)(ih + HPCCD_INT_HDR_BYTES),
						    wi->int_nhop) == 1)
				send_feedback(t, r, HPCCD_T_NOTIFY, r->rcv_nxt, 0, 0, 0, now);
		}
	}
	/* ACKs: the DCTCP.CE machine (seed 001 section 3.2) with factor m;
	 * a CE change acknowledges at once, in two ACKs when packets of the
	 * old state wait */
	r->unacked++;
	nq = hpccd_dctcp_rx_on_packet(&r->dc, ce, r->rcv_nxt, q);
	for (i = 0; i < nq; i++) {
		uint32_t n = nq == 2 ? (i == 0 ? r->unacked - 1 : 1) : r->unacked;

		send_feedback(t, r, HPCCD_T_ACK, q[i].ack_seq, q[i].ece, n, echo, now);
	}
	if (nq) {
		r->unacked = 0;
		r->delack_armed = 0;
	}
	if (!r->done && r->rcv_nxt >= r->fin_end) {
		r->done = 1;
		r->st.done = 1;
		r->st.last_ns = now;
		if (t->rx_live)
			t->rx_live--;
		rx_ack_now(t, r, now);   /* the last byte: no delay */
	} else {
		if (!r->done)
			r->st.last_ns = now;
		if (r->unacked && !r->delack_armed) {
			r->delack_armed = 1;
			r->delack_deadline = now + t->cfg.delack_ns;
			if (r->delack_deadline < t->delack_min)
				t->delack_min = r->delack_deadline;
		}
	}
}

static void rx_timers(struct hpccd_tp *t, uint64_t now)
{
	uint64_t next = NO_DEADLINE;
	uint32_t i;

	if (t->delack_min > now)
		return;
	for (i = 0; i < HPCCD_TP_RX_FLOWS; i++) {
		struct tp_rx *r = &t->rxt[i];

		if (r->used != 1 || !r->delack_armed)
			continue;
		if (r->delack_deadline <= now)
			rx_ack_now(t, r, now);
		else if (r->delack_deadline < next)
			next = r->delack_deadline;
	}
	t->delack_min = next;
}

/* ---- probes ------------------------------------------------------------------ */

static int key_set(const uint8_t *key)
{
	uint32_t i;

	for (i = 0; i < 16; i++)
		if (key[i])
			return 1;
	return 0;
}

/* A PROBE_RESP for one of our flows (probe mode).  Its tag is verified
 * first (seed 002 section 9.1; never applied otherwise); only the response
 * to the outstanding probe counts: one to a probe already declared lost is
 * late, and is not applied either (its INT is older than a probe's RTT and
 * the next probe is already on its way).  The INT goes to NewAck (seed 004
 * Algorithm 1 line 21) exactly as an INT-echo ACK's does, with seq =
 * snd_nxt = the probe number: every response starts a new RTT, so each
 * one updates W^c (lines 22-24), which is the once-per-RTT update seed 000
 * section 6.1 asks for. */
static void on_probe_resp(struct hpccd_tp *t, const uint8_t *f, uint32_t len,
			  const struct hpccd_wire_info *wi, uint64_t now)
{
	struct tp_flow *fl = flow_by_id(t, wi->flow_id);
	uint64_t r;

	if (!fl || wi->saddr != fl->c.daddr || wi->dport != fl->c.sport ||
	    fl->c.int_mode != HPCCD_TP_INT_PROBE) {
		t->st.unknown_flow++;
		return;
	}
	if (!wi->has_tag || hpccd_wire_tag_verify(t->cfg.tag_key, f, len, t->cfg.udp_port,
						  t->cfg.probe_dscp) != 1) {
		fl->st.probe_bad_tags++;
		return;
	}
	if (fl->state != HPCCD_TP_RUNNING)
		return;                  /* the flow finished while it was out */
	if (!fl->probe_out || wi->seq != fl->probe_seq) {
		fl->st.probes_late++;
		return;
	}
	fl->probe_out = 0;
	fl->st.probes_answered++;
	r = (uint32_t)((uint32_t)now - wi->ts);
	fl->st.probe_rtt_sum_ns += r;
	if (!fl->st.probe_min_rtt_ns || r < fl->st.probe_min_rtt_ns)
		fl->st.probe_min_rtt_ns = r;
	/* RFC 6298 gain 1/8, as the data RTT */
	fl->st.probe_srtt_ns = fl->st.probe_srtt_ns ? (7 * fl->st.probe_srtt_ns + r) / 8 : r;
	if (fl->c.algo == HPCCD_ALGO_HPCC && wi->int_nhop) {
		const struct hpccd_int_hop_wire *h =
			(const void *)(f + wi->int_off + HPCCD_INT_HDR_BYTES);

		if (hpccd_hpcc_new_ack_wire(&fl->cc.hpcc, now, wi->seq, wi->seq, wi->int_path_id,
					    h, wi->int_nhop) == 1)
			fl->st.cc_updates++;
		flow_sync_cc(fl);
	}
}

/* A PROBE that reached the engine: xdp_host answers probes itself
 * (XDP_TX) unless it was loaded without HPCCD_CFG_REFLECT_PROBES; then the
 * engine answers, with the same response xdp_host writes
 * (docs/wire-format.md: addresses and ports swapped, TTL 64, CE -> ECT(0),
 * COLLECT cleared, hops, DSCP and IP id kept, type PROBE_RESP, the tag).
 * Like xdp_host it does not sign with the all-zero "no key". */
static void answer_probe(struct hpccd_tp *t, const uint8_t *p, const struct hpccd_wire_info *wi)
{
	uint32_t len = wi->l4_end_off;
	uint64_t addr, tag;
	uint8_t *f, tmp[6];

	if (!wi->has_tag || wi->int_off != L2L4 || len > t->cfg.frame_size - HEADROOM) {
		t->st.bad_body++;        /* a VLAN tag, IP options: not ours */
		return;
	}
	if (!key_set(t->cfg.tag_key)) {
		t->st.probes_no_key++;
		return;
	}
	f = tx_get(t, &addr);
	if (!f) {
		t->st.ack_dropped++;
		return;
	}
	memcpy(f, p, len);
	memcpy(tmp, f, 6);
	memcpy(f, f + 6, 6);
	memcpy(f + 6, tmp, 6);
	memcpy(tmp, f + 26, 4);          /* IPv4 addresses */
	memcpy(f + 26, f + 30, 4);
	memcpy(f + 30, tmp, 4);
	memcpy(tmp, f + 34, 2);          /* UDP ports */
	memcpy(f + 34, f + 36, 2);
	memcpy(f + 36, tmp, 2);
	if ((f[15] & 3) == 3)
		f[15] = (uint8_t)((f[15] & ~3) | 2);
	f[22] = 64;
	f[wi->int_off + 2] &= (uint8_t)~(HPCCD_INT_F_COLLECT << 4);
	f[wi->hdr_off] = (uint8_t)(HPCCD_WIRE_VERSION << 4 | HPCCD_T_PROBE_RESP);
	if (hpccd_wire_tag(t->cfg.tag_key, f, len, t->cfg.udp_port, t->cfg.probe_dscp,
			   &tag) != 0) {
		t->tx_free[t->n_tx_free++] = addr - HEADROOM;
		t->st.bad_body++;
		return;
	}
	put32(f + wi->tag_off, (uint32_t)(tag >> 32));
	put32(f + wi->tag_off + 4, (uint32_t)tag);
	fill_l3_csums(f, len);
	tx_put(t, addr, len);
	t->st.probes_answered++;
}

/* ---- RX pipe ------------------------------------------------------------------ */

static void rx_frame(struct hpccd_tp *t, uint8_t *f, uint32_t len, uint64_t now)
{
	struct hpccd_wire_info wi;
	int rc = hpccd_wire_parse_frame(f, len, t->cfg.udp_port, t->cfg.probe_dscp, &wi);

	t->st.rx_frames++;
	t->st.rx_bytes += len;
	if (rc == HPCCD_WIRE_NOT_HPCCD || rc < 0 || wi.l4 != IPPROTO_UDP) {
		t->st.not_hpccd++;
		return;
	}
	if (rc > 0) {
		t->st.by_class[rc < HPCCD_E_MAX ? rc : 0]++;
		return;
	}
	t->st.by_type[wi.hdr_type]++;
	switch (wi.hdr_type) {
	case HPCCD_T_DATA:
		if (wi.dport != t->cfg.udp_port)
			break;
		on_data(t, f, len, &wi, now);
		return;
	case HPCCD_T_ACK:
	case HPCCD_T_NACK:
	case HPCCD_T_NOTIFY:
		if (wi.sport != t->cfg.udp_port)
			break;
		on_feedback(t, f, len, &wi, now);
		return;
	case HPCCD_T_PROBE:
		if (wi.dport != t->cfg.udp_port)
			break;
		answer_probe(t, f, &wi);
		return;
	case HPCCD_T_PROBE_RESP:
		if (wi.sport != t->cfg.udp_port)
			break;
		on_probe_resp(t, f, len, &wi, now);
		return;
	}
	t->st.bad_body++;    /* wrong direction */
}

static uint32_t rx_pipe(struct hpccd_tp *t, uint64_t now)
{
	const uint64_t mask = ~(uint64_t)(t->cfg.frame_size - 1);
	uint32_t total = 0, round, idx, n, i;

	for (round = 0; round < RX_ROUNDS; round++) {
		n = xsk_ring_cons__peek(&t->rx, RX_BATCH, &idx);
		if (!n)
			break;
		for (i = 0; i < n; i++) {
			const struct xdp_desc *d = xsk_ring_cons__rx_desc(&t->rx, idx + i);
			uint64_t a = xsk_umem__add_offset_to_addr(d->addr);

			rx_frame(t, xsk_umem__get_data(t->area, a), d->len, now);
			t->rx_free[t->n_rx_free++] = xsk_umem__extract_addr(d->addr) & mask;
		}
		xsk_ring_cons__release(&t->rx, n);
		rx_refill(t);
		total += n;
	}
	if (total && (t->cfg.flags & HPCCD_TP_F_NEED_WAKEUP) &&
	    xsk_ring_prod__needs_wakeup(&t->fq))
		recvfrom(t->fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
	return total;
}

/* ---- the thread ----------------------------------------------------------------- */

/* The earliest deadline of the engine, and when the thread should wake
 * for it: send times t->wake_late_ns early (see struct hpccd_tp). */
static uint64_t next_wake(struct hpccd_tp *t)
{
	uint64_t d = t->delack_min, send = NO_DEADLINE;
	uint32_t i;

	for (i = 0; i < t->n_active; i++) {
		const struct tp_flow *fl = &t->flows[t->active[i]];

		if (fl->rto_deadline < d)
			d = fl->rto_deadline;
		if (fl->probe_out && fl->probe_deadline < d)
			d = fl->probe_deadline;
		if (flow_wants_to_send(fl) && fl->next_send_ns < send)
			send = fl->next_send_ns;
	}
	if (send != NO_DEADLINE) {
		send = send > t->wake_late_ns ? send - t->wake_late_ns : 0;
		if (send < d)
			d = send;
	}
	return d;
}

/* A timed wait that asked to wake at `want` woke at `now`: fold its
 * lateness into the moving mean (gain 1/8; a wake later than 1 ms is a
 * preemption, not the timer's latency, and is left out). */
static void note_wake(struct hpccd_tp *t, uint64_t want, uint64_t now)
{
	int64_t late = (int64_t)(now - want), est = (int64_t)t->wake_late_ns;

	if (late < 0 || late > 1000000)
		return;
	est += (late - est) / 8;
	if (est > (int64_t)WAKE_EARLY_MAX_NS)
		est = WAKE_EARLY_MAX_NS;
	/* written by the thread only; hpccd_tp__stats() reads it */
	__atomic_store_n(&t->wake_late_ns, est < 0 ? 0 : (uint64_t)est, __ATOMIC_RELAXED);
}

static void *tp__main(void *arg)
{
	struct hpccd_tp *t = arg;
	struct pollfd pfd[2] = {
		{ .fd = t->fd, .events = POLLIN },
		{ .fd = t->efd, .events = POLLIN },
	};
	int err = 0;

	/* Pacing deadlines are tens of microseconds apart: the default 50 us
	 * timer slack would add up to one packet time at 1 Gbit/s per wake. */
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
	while (!__atomic_load_n(&t->stop_flag, __ATOMIC_ACQUIRE)) {
		uint64_t now = now_ns(), dl;
		uint32_t got;
		int more = 0, rc, kick;
		struct timespec ts;

		pthread_mutex_lock(&t->lock);
		t->st.loops++;
		t->starved = 0;
		got = rx_pipe(t, now);
		reap_completions(t);
		now = now_ns();
		flow_timers(t, now);
		rx_timers(t, now);
		schedule(t, now, &more);
		schedule_probes(t, now);
		kick = tx_submit(t);
		dl = next_wake(t);
		pthread_mutex_unlock(&t->lock);
		if (kick)
			tx_kick(t, 0);

		now = now_ns();
		if (more)
			continue;            /* the scheduler stopped at its per-loop cap */
		if (got && t->cfg.coalesce_ns && dl > now) {
			/* Frames came: more are on their way.  Instead of one
			 * wakeup per frame, sleep coalesce_ns (at most until the
			 * next deadline) and take them as a batch -- interrupt
			 * moderation, as a NIC does.  Only the stop eventfd can
			 * cut it short. */
			uint64_t d = dl - now < t->cfg.coalesce_ns ? dl - now : t->cfg.coalesce_ns;

			ts.tv_sec = 0;
			ts.tv_nsec = (long)d;
			if (ppoll(&pfd[1], 1, &ts, NULL) == 0)
				note_wake(t, now + d, now_ns());
			continue;
		}
		if (got)
			continue;            /* work done; more may be waiting */
		if (t->starved && (dl == NO_DEADLINE || dl < now + STARVED_SLEEP_NS))
			dl = now + STARVED_SLEEP_NS;
		if (dl <= now)
			continue;            /* a deadline passed while we worked */
		if (dl - now > POLL_BACKSTOP_NS)
			dl = now + POLL_BACKSTOP_NS;
		ts.tv_sec = (time_t)((dl - now) / 1000000000ull);
		ts.tv_nsec = (long)((dl - now) % 1000000000ull);
		rc = ppoll(pfd, 2, &ts, NULL);
		if (rc == 0)
			note_wake(t, dl, now_ns());
		pthread_mutex_lock(&t->lock);
		t->st.polls++;
		t->st.poll_timeouts += rc == 0;
		pthread_mutex_unlock(&t->lock);
		if (rc < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			break;
		}
		if (pfd[1].revents) {
			uint64_t v;

			if (read(t->efd, &v, sizeof(v)) > 0) {
				pthread_mutex_lock(&t->lock);
				t->st.wakeups++;
				pthread_mutex_unlock(&t->lock);
			}
		}
		if (pfd[0].revents & (POLLERR | POLLHUP | POLLNVAL)) {
			err = (pfd[0].revents & POLLNVAL) ? -EBADF : -EIO;
			break;
		}
		if (rc == 0 && dl - now >= POLL_BACKSTOP_NS) {
			int soerr = 0;
			socklen_t sl = sizeof(soerr);

			if (getsockopt(t->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr) {
				err = -soerr;    /* the interface went away */
				break;
			}
		}
	}
	pthread_mutex_lock(&t->lock);
	t->st.running = 0;
	t->st.thread_err = err;
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

/* ---- API ------------------------------------------------------------------------- */

static uint32_t pow2_floor(uint32_t v)
{
	uint32_t p = 1;

	while (p <= v / 2)
		p <<= 1;
	return p;
}

int hpccd_tp__create(const char *ifname, uint32_t queue_id, const struct hpccd_tp_config *cfg,
		     struct hpccd_tp **out, char *err, size_t err_size)
{
	struct xsk_umem_config ucfg;
	struct xsk_socket_config scfg;
	struct xdp_options opts;
	struct hpccd_tp_config c;
	struct hpccd_hpcc probe;
	struct hpccd_tp *t;
	const char *why = NULL;
	uint32_t frames, i;
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
	if (!c.ack_every || !c.udp_port || c.probe_dscp > 63)
		return create_fail(err, err_size, ifname, queue_id, -EINVAL,
				   "ack_every %u, udp port %u, dscp %u", c.ack_every, c.udp_port,
				   c.probe_dscp);
	if (c.sink != HPCCD_TP_SINK_VERIFY && !(c.sink == HPCCD_TP_SINK_FD && c.sink_fd >= 0))
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
	t->delack_min = NO_DEADLINE;
	t->ifindex = if_nametoindex(ifname);
	if (!t->ifindex) {
		rc = create_fail(err, err_size, ifname, queue_id, -ENODEV,
				 "no such interface in this network namespace");
		goto free_t;
	}
	frames = c.rx_frames + c.tx_frames;
	t->flows = calloc(HPCCD_TP_MAX_FLOWS, sizeof(*t->flows));
	t->rxt = calloc(HPCCD_TP_RX_FLOWS, sizeof(*t->rxt));
	t->rx_free = malloc(sizeof(uint64_t) * c.rx_frames);
	t->tx_free = malloc(sizeof(uint64_t) * c.tx_frames);
	if (!t->flows || !t->rxt || !t->rx_free || !t->tx_free) {
		rc = create_fail(err, err_size, ifname, queue_id, -ENOMEM, "out of memory");
		goto free_t;
	}
	for (i = 0; i < HPCCD_TP_MAX_FLOWS; i++)
		t->flows[i].active_idx = -1;
	t->area_len = (size_t)frames * c.frame_size;
	t->area = mmap(NULL, t->area_len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (t->area == MAP_FAILED) {
		t->area = NULL;
		rc = create_fail(err, err_size, ifname, queue_id, -errno,
				 "mmap of a %zu-byte UMEM", t->area_len);
		goto free_t;
	}
	t->ring = pow2_floor(c.rx_frames < RING_MAX ? c.rx_frames : RING_MAX);
	if (pow2_floor(c.tx_frames) < t->ring)
		t->ring = pow2_floor(c.tx_frames);
	memset(&ucfg, 0, sizeof(ucfg));
	ucfg.fill_size = t->ring;
	ucfg.comp_size = pow2_floor(c.tx_frames) * 2;  /* never full: > frames in flight */
	ucfg.frame_size = c.frame_size;
	ucfg.frame_headroom = HEADROOM;
	rc = xsk_umem__create(&t->umem, t->area, t->area_len, &t->fq, &t->cq, &ucfg);
	if (rc) {
		t->umem = NULL;
		create_fail(err, err_size, ifname, queue_id, rc, "xsk_umem__create (%u frames)",
			    frames);
		goto unmap;
	}
	memset(&scfg, 0, sizeof(scfg));
	scfg.rx_size = t->ring;
	scfg.tx_size = pow2_floor(c.tx_frames);  /* every TX frame fits in the ring */
	scfg.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD;   /* xdp_host is the loader's */
	scfg.bind_flags = (uint16_t)(c.flags & (HPCCD_TP_F_COPY | HPCCD_TP_F_ZEROCOPY |
						 HPCCD_TP_F_NEED_WAKEUP));
	rc = xsk_socket__create(&t->sock, ifname, queue_id, t->umem, &t->rx, &t->tx, &scfg);
	if (rc) {
		t->sock = NULL;
		create_fail(err, err_size, ifname, queue_id, rc, "AF_XDP socket (bind, %s mode)",
			    (c.flags & HPCCD_TP_F_ZEROCOPY) ? "zero-copy" :
			    (c.flags & HPCCD_TP_F_COPY) ? "copy" : "any");
		goto del_umem;
	}
	t->fd = xsk_socket__fd(t->sock);
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
	memset(&opts, 0, sizeof(opts));
	optlen = sizeof(opts);
	if (getsockopt(t->fd, SOL_XDP, XDP_OPTIONS, &opts, &optlen) == 0)
		t->zerocopy = !!(opts.flags & XDP_OPTIONS_ZEROCOPY);
	for (i = 0; i < c.rx_frames; i++)
		t->rx_free[i] = (uint64_t)(c.rx_frames - 1 - i) * c.frame_size;
	t->n_rx_free = c.rx_frames;
	for (i = 0; i < c.tx_frames; i++)
		t->tx_free[i] = (uint64_t)(frames - 1 - i) * c.frame_size;
	t->n_tx_free = c.tx_frames;
	rx_refill(t);
	{
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		t->id_gen = (uint32_t)splitmix64((uint64_t)ts.tv_nsec ^ (uint64_t)getpid() << 32);
	}
	*out = t;
	return 0;

del_sock:
	xsk_socket__delete(t->sock);
del_umem:
	xsk_umem__delete(t->umem);
unmap:
	munmap(t->area, t->area_len);
free_t:
	free(t->flows);
	free(t->rxt);
	free(t->rx_free);
	free(t->tx_free);
	pthread_mutex_destroy(&t->lock);
	free(t);
	return rc;
}

int hpccd_tp__fd(const struct hpccd_tp *t)
{
	return t ? t->fd : -EINVAL;
}

static void tp__wake(struct hpccd_tp *t)
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
	pthread_join(t->thread, NULL);
	t->started = 0;
	pthread_mutex_lock(&t->lock);
	err = t->st.thread_err;
	pthread_mutex_unlock(&t->lock);
	if (err)
		return tp__fail(t, err, "the engine thread had stopped on an error");
	return 0;
}

int hpccd_tp__flow_open(struct hpccd_tp *t, const struct hpccd_tp_flow_cfg *c,
			uint32_t *flow_id)
{
	struct tp_flow *fl = NULL;
	const char *why = NULL;
	uint32_t i, room, hdr, slot = 0;
	uint64_t now;
	int rc = 0;
	char who[96];

	if (!t || !c || !flow_id)
		return -EINVAL;
	snprintf(who, sizeof(who), "flow to %u.%u.%u.%u port %u", c->daddr >> 24,
		 (c->daddr >> 16) & 255, (c->daddr >> 8) & 255, c->daddr & 255, c->dport);
	if (c->algo < HPCCD_ALGO_HPCC || c->algo > HPCCD_ALGO_LDCP)
		return tp__fail(t, -EINVAL, "%s: unknown algorithm %u", who, c->algo);
	if (!c->bytes)
		return tp__fail(t, -EINVAL, "%s: a flow carries at least one byte", who);
	if (c->src != HPCCD_TP_SRC_PATTERN && !(c->src == HPCCD_TP_SRC_BUFFER && c->buf))
		return tp__fail(t, -EINVAL, "%s: source %u without a buffer", who, c->src);
	if (c->int_room > HPCCD_INT_MAX_HOPS || c->int_mode > HPCCD_TP_INT_PROBE ||
	    (c->int_mode == HPCCD_TP_INT_NTH && !c->int_every) ||
	    (c->int_mode == HPCCD_TP_INT_PROBE && (!c->int_room || !c->probe_timeout_ns)))
		return tp__fail(t, -EINVAL, "%s: INT mode %u every %u room %u probe timeout %llu ns",
				who, c->int_mode, c->int_every, c->int_room,
				(unsigned long long)c->probe_timeout_ns);
	/* Probe responses feed sender-based HPCC only (Rx-HPCC reads the INT
	 * of data packets at the receiver; DCTCP and LDCP read none). */
	if (c->int_mode == HPCCD_TP_INT_PROBE && c->algo != HPCCD_ALGO_HPCC)
		return tp__fail(t, -EINVAL, "%s: probe mode drives HPCC only, not algorithm %u",
				who, c->algo);
	room = c->int_mode == HPCCD_TP_INT_NONE || c->int_mode == HPCCD_TP_INT_PROBE ? 0
										   : c->int_room;
	hdr = L2L4 + HPCCD_INT_HDR_BYTES + room * HPCCD_INT_HOP_BYTES + HPCCD_HDR_BYTES;
	if (c->mtu < hdr - ETH_HLEN_ + 64 || c->mtu + ETH_HLEN_ + HEADROOM > t->cfg.frame_size)
		return tp__fail(t, -EINVAL, "%s: MTU %u: from %u to %u with room %u", who, c->mtu,
				hdr - ETH_HLEN_ + 64, t->cfg.frame_size - ETH_HLEN_ - HEADROOM,
				room);
	if (!c->line_rate_bps || !c->rto_min_ns || c->rto_max_ns < c->rto_min_ns ||
	    !c->timeout_ns)
		return tp__fail(t, -EINVAL, "%s: line rate, RTO bounds and timeout must be set",
				who);

	pthread_mutex_lock(&t->lock);
	for (i = 0; i < HPCCD_TP_MAX_FLOWS; i++) {
		slot = (t->id_gen + i) & SLOT_MASK;
		if (t->flows[slot].state == HPCCD_TP_FREE) {
			fl = &t->flows[slot];
			break;
		}
	}
	if (!fl) {
		t->st.flows_refused++;   /* docs/security.md "Limits" */
		rc = tp__fail(t, -ENOSPC, "%s: all %d flow slots are in use (close finished flows)",
			      who, HPCCD_TP_MAX_FLOWS);
		goto out;
	}
	memset(fl, 0, sizeof(*fl));
	fl->c = *c;
	fl->room = room;
	fl->hdr_max = hdr;
	fl->mss = c->mtu + ETH_HLEN_ - hdr;
	fl->msg_pkts = (c->bytes + fl->mss - 1) / fl->mss;
	fl->wire_per_payload = (double)(fl->mss + hdr) / fl->mss;
	switch (c->algo) {
	case HPCCD_ALGO_HPCC:
	case HPCCD_ALGO_RXHPCC:
		rc = hpccd_hpcc_init(&fl->cc.hpcc, &c->hpcc, c->algo, &why);
		fl->W = fl->cc.hpcc.W;
		break;
	case HPCCD_ALGO_DCTCP:
		fl->c.dctcp.mtu_bytes = fl->mss;     /* SMSS = our payload size */
		rc = hpccd_dctcp_init(&fl->cc.dctcp, &fl->c.dctcp, &why);
		break;
	case HPCCD_ALGO_LDCP:
		fl->c.ldcp.mtu_bytes = fl->mss;
		rc = hpccd_ldcp_init(&fl->cc.ldcp, &fl->c.ldcp, &why);
		break;
	}
	if (rc) {
		rc = tp__fail(t, rc, "%s: algorithm parameters: %s", who, why ? why : "invalid");
		goto out;
	}
	t->id_gen += HPCCD_TP_MAX_FLOWS;
	fl->flow_id = (t->id_gen & ~(uint32_t)SLOT_MASK) | slot;
	now = now_ns();
	fl->start_ns = now;
	fl->last_progress_ns = now;
	fl->next_send_ns = now;
	fl->rto_deadline = NO_DEADLINE;
	fl->goback_seq = UINT64_MAX;
	fl->state = HPCCD_TP_RUNNING;
	flow_sync_cc(fl);
	fl->active_idx = (int)t->n_active;
	t->active[t->n_active++] = (int)slot;
	*flow_id = fl->flow_id;
out:
	pthread_mutex_unlock(&t->lock);
	if (!rc)
		tp__wake(t);
	return rc;
}

int hpccd_tp__flow_stats(struct hpccd_tp *t, uint32_t flow_id, struct hpccd_tp_flow_stats *o)
{
	struct tp_flow *fl;

	if (!t || !o)
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	fl = flow_by_id(t, flow_id);
	if (!fl) {
		pthread_mutex_unlock(&t->lock);
		return tp__fail(t, -ENOENT, "flow %#x: no such flow", flow_id);
	}
	*o = fl->st;
	o->flow_id = fl->flow_id;
	o->state = fl->state;
	o->algo = fl->c.algo;
	o->err = fl->err;
	o->bytes = fl->c.bytes;
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
	switch (fl->c.algo) {
	case HPCCD_ALGO_HPCC:
	case HPCCD_ALGO_RXHPCC:
		o->U = fl->cc.hpcc.U;
		break;
	case HPCCD_ALGO_DCTCP:
		o->U = (double)fl->cc.dctcp.alpha / HPCCD_DCTCP_SCF;
		break;
	case HPCCD_ALGO_LDCP:
		o->U = fl->cc.ldcp.cw;
		break;
	}
	o->mss = fl->mss;
	o->hdr_bytes = fl->hdr_max;
	pthread_mutex_unlock(&t->lock);
	return 0;
}

int hpccd_tp__flow_close(struct hpccd_tp *t, uint32_t flow_id)
{
	struct tp_flow *fl;

	if (!t)
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	fl = flow_by_id(t, flow_id);
	if (!fl) {
		pthread_mutex_unlock(&t->lock);
		return tp__fail(t, -ENOENT, "flow %#x: no such flow", flow_id);
	}
	if (fl->state == HPCCD_TP_RUNNING)
		flow_finish(t, fl, HPCCD_TP_FAILED, -ECANCELED, now_ns());
	fl->state = HPCCD_TP_FREE;
	pthread_mutex_unlock(&t->lock);
	return 0;
}

int hpccd_tp__rx_flows(struct hpccd_tp *t, struct hpccd_tp_rx_stats *out, uint32_t max)
{
	uint32_t i, n = 0;

	if (!t || (!out && max))
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	for (i = 0; i < HPCCD_TP_RX_FLOWS && n < max; i++) {
		struct tp_rx *r = &t->rxt[i];

		if (r->used != 1)
			continue;
		out[n] = r->st;
		out[n].saddr = r->saddr;
		out[n].flow_id = r->flow_id;
		out[n].sport = r->sport;
		out[n].crc32 = r->crc;
		out[n].err = r->err;
		n++;
	}
	pthread_mutex_unlock(&t->lock);
	return (int)n;
}

int hpccd_tp__rx_reap(struct hpccd_tp *t)
{
	uint32_t i;
	int n = 0;

	if (!t)
		return -EINVAL;
	pthread_mutex_lock(&t->lock);
	for (i = 0; i < HPCCD_TP_RX_FLOWS; i++) {
		if (t->rxt[i].used == 1 && t->rxt[i].done) {
			t->rxt[i].used = 2;
			n++;
		}
	}
	pthread_mutex_unlock(&t->lock);
	return n;
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
	out->timer_late_ns = __atomic_load_n(&t->wake_late_ns, __ATOMIC_RELAXED);
	{
		uint32_t i;

		for (i = 0; i < HPCCD_TP_RX_FLOWS; i++)
			out->rx_used += t->rxt[i].used == 1;
	}
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
	xsk_socket__delete(t->sock);
	xsk_umem__delete(t->umem);
	munmap(t->area, t->area_len);
	free(t->flows);
	free(t->rxt);
	free(t->rx_free);
	free(t->tx_free);
	pthread_mutex_destroy(&t->lock);
	free(t);
}
