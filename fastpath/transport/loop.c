// SPDX-License-Identifier: BSD-2-Clause
/*
 * The engine's thread ([HPCC] section 4.2 and [HPCC++2020] section 7.2:
 * scheduler, TX pipe, RX pipe), per loop:
 *   1. RX pipe: up to RX_ROUNDS batches of the RX ring through the shared
 *      parser (hpccd_wire_parse_frame); DATA to the receiver half, ACK /
 *      NACK / NOTIFY to the sender half; frames back to the fill ring;
 *   2. completions: TX frames back to the TX free stack;
 *   3. timers: retransmission timeouts, delayed ACKs;
 *   4. scheduler: the flows whose send time has come, round robin
 *      (sched.c: a ready list and timing wheels, no scan of the flows);
 *   5. TX: descriptors submitted in one go, a sendto() kick once the
 *      lock is released (copy mode transmits inside the syscall);
 *   6. sleep in ppoll() on the socket and an eventfd until the earliest
 *      deadline, unless there is more work at once.  Never spins: the
 *      loop goes round without sleeping only after it did work.
 * Steps 1-5 are tp__loop_once, which a caller may also run in its own
 * thread (run to completion, run.c); then the thread waits in epoll
 * instead of ppoll(), so that a caller can take the socket from it.
 */
#include "tp.h"

#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

int rx_frame(struct hpccd_tp *t, uint8_t *f, uint32_t len, uint64_t now)
{
	struct hpccd_wire_info wi;
	int rc = hpccd_wire_parse_frame(f, len, t->cfg.udp_port, t->cfg.probe_dscp, &wi);

	t->st.rx_frames++;
	t->st.rx_bytes += len;
	if (rc == HPCCD_WIRE_NOT_HPCCD || rc < 0 || wi.l4 != IPPROTO_UDP) {
		t->st.not_hpccd++;
		return 0;
	}
	if (rc > 0) {
		t->st.by_class[rc < HPCCD_E_MAX ? rc : 0]++;
		return 0;
	}
	t->st.by_type[wi.hdr_type]++;
	if (t->pc.n && wi.hdr_type != HPCCD_T_DATA) {
		t->st.bad_body++;    /* feedback and probes are small: never in pieces */
		return 0;
	}
	switch (wi.hdr_type) {
	case HPCCD_T_DATA:
		if (wi.dport != t->cfg.udp_port)
			break;
		return on_data(t, f, len, &wi, now);
	case HPCCD_T_ACK:
	case HPCCD_T_NACK:
	case HPCCD_T_NOTIFY:
		if (wi.sport != t->cfg.udp_port)
			break;
		on_feedback(t, f, len, &wi, now);
		return 0;
	case HPCCD_T_PROBE:
		if (wi.dport != t->cfg.udp_port)
			break;
		answer_probe(t, f, &wi);
		return 0;
	case HPCCD_T_PROBE_RESP:
		if (wi.sport != t->cfg.udp_port)
			break;
		on_probe_resp(t, f, len, &wi, now);
		return 0;
	case HPCCD_T_CNP:
		if (wi.sport != t->cfg.udp_port)
			break;
		on_cnp(t, f, &wi, now);
		return 0;
	}
	t->st.bad_body++;    /* wrong direction */
	return 0;
}

/* One RX descriptor: a whole frame, or a piece of a multi-buffer packet
 * (XDP_PKT_CONTD on every piece but the last).  Pieces are noted as they
 * come (a packet may straddle two ring batches) and read in place when the
 * last one came: the parser sees the first piece (every header is in it)
 * with the packet's whole length, the receiver reads the payload across
 * the pieces (t->pc; what it holds out of order it copies); then their
 * frames go back.  A packet of more than MB_FRAGS pieces or MB_BYTES, or
 * whose first piece is too short for the headers, is dropped and counted
 * (rx_mb_bad). */
void rx_desc(struct hpccd_tp *t, uint64_t addr, uint32_t len, uint32_t options, uint64_t now)
{
	const uint64_t mask = ~(uint64_t)(t->cfg.frame_size - 1);
	uint64_t chunk = xsk_umem__extract_addr(addr) & mask;
	uint8_t *p = xsk_umem__get_data(t->area, xsk_umem__add_offset_to_addr(addr));
	struct tp_pieces *pc = &t->pc;
	uint32_t i;

	if (t->cfg.flags & HPCCD_TP_F_RAW) {
		t->st.rx_frames += !(options & XDP_PKT_CONTD);   /* raw.c: count, nothing else */
		t->st.rx_bytes += len;
		t->rx_free[t->n_rx_free++] = chunk;
		return;
	}
	if (!(options & XDP_PKT_CONTD) && !t->mb_open) {
		if (!rx_frame(t, p, len, now))
			t->rx_free[t->n_rx_free++] = chunk;
		return;
	}
	/* The first piece is parsed in place with the packet's whole length:
	 * the parser reads only headers there, and copies nothing when the
	 * frame is where the kernel puts one (NET_IP_ALIGN, wire.c). */
	if (pc->n == MB_FRAGS || len > MB_BYTES - t->mb_len ||
	    (!t->mb_open && (len < MB_FIRST_MIN || ((uintptr_t)p & 3) != 2))) {
		t->mb_bad = 1;
		t->rx_free[t->n_rx_free++] = chunk;
	} else {
		pc->p[pc->n] = p;
		pc->len[pc->n] = len;
		t->mb_chunk[pc->n++] = chunk;
		t->mb_len += len;
	}
	t->mb_open = 1;
	if (options & XDP_PKT_CONTD)
		return;
	if (t->mb_bad) {
		t->st.rx_frames++;
		t->st.rx_bytes += t->mb_len;
		t->st.rx_mb_bad++;
	} else {
		t->st.rx_mb_pkts++;
		(void)rx_frame(t, (uint8_t *)pc->p[0], t->mb_len, now);
	}
	for (i = 0; i < pc->n; i++)
		t->rx_free[t->n_rx_free++] = t->mb_chunk[i];
	pc->n = 0;
	t->mb_len = t->mb_bad = t->mb_open = 0;
}

/* A hint before a batch is served: ask the memory for the state the
 * frame's packet will touch (an ACK / NACK: its sender flow; a DATA: its
 * receiver flow's home slot), so that with thousands of flows those
 * lines arrive while the frames before it are parsed and served instead
 * of one miss after another (docs/transport.md "Flows").  It peeks at the
 * engine's own frame layout (Ethernet without a VLAN tag, IPv4 without
 * options: the INT header at L2L4) through the structs of
 * include/hpccd/wire.h; the parser judges every frame when it is served,
 * and a frame that is not one of ours costs one useless prefetch.  Always
 * inlined, as tp_flow_prefetch (tp.h) says why. */
static inline __attribute__((always_inline)) void rx_prefetch(const struct hpccd_tp *t, const uint8_t *f, uint32_t len)
{
	const struct hpccd_int_hdr *ih = (const struct hpccd_int_hdr *)(f + L2L4);
	const struct hpccd_hdr *h;
	uint32_t off, type, flow_id, saddr;

	if (len < L2L4 + HPCCD_INT_HDR_BYTES)
		return;
	off = L2L4 + HPCCD_INT_HDR_BYTES + (ih->nhop_room & 0xf) * HPCCD_INT_HOP_BYTES;
	if (len < off + HPCCD_HDR_BYTES)
		return;
	h = (const struct hpccd_hdr *)(f + off);
	type = h->ver_type & 0xf;
	flow_id = ntohl(h->flow_id);
	if (type == HPCCD_T_ACK || type == HPCCD_T_NACK) {
		tp_flow_prefetch(t, (int32_t)(flow_id & t->slot_mask));
	} else if (type == HPCCD_T_DATA) {
		memcpy(&saddr, f + ETH_HLEN_ + 12, 4);      /* the IPv4 source */
		tp_rx_prefetch(&t->rxt[tp_rx_home(t, ntohl(saddr), flow_id)]);
	}
}

/* A batch of RX descriptors, as the RX ring gave them: every whole
 * frame's state prefetched first, then each served (rx_desc).  The
 * engine's loop (rx_pipe) and the protocol harness
 * (tests/unit/engine/harness.c) both take their frames through it. */
void rx_descs(struct hpccd_tp *t, const struct xdp_desc *d, uint32_t n, uint64_t now)
{
	uint32_t i;
	int open = t->mb_open;

	if (!(t->cfg.flags & HPCCD_TP_F_RAW)) {
		for (i = 0; i < n; i++) {
			/* whole frames only: a multi-buffer packet's pieces are
			 * gathered when served */
			if (!open && !(d[i].options & XDP_PKT_CONTD))
				rx_prefetch(t, xsk_umem__get_data(t->area,
						xsk_umem__add_offset_to_addr(d[i].addr)), d[i].len);
			open = !!(d[i].options & XDP_PKT_CONTD);
		}
	}
	for (i = 0; i < n; i++)
		rx_desc(t, d[i].addr, d[i].len, d[i].options, now);
}

static uint32_t rx_pipe(struct hpccd_tp *t, uint64_t now)
{
	struct xdp_desc d[RX_BATCH];
	uint32_t total = 0, round, idx, n, i;

	for (round = 0; round < RX_ROUNDS; round++) {
		n = xsk_ring_cons__peek(&t->rx, RX_BATCH, &idx);
		if (!n)
			break;
		for (i = 0; i < n; i++)
			d[i] = *xsk_ring_cons__rx_desc(&t->rx, idx + i);
		rx_descs(t, d, n, now);
		xsk_ring_cons__release(&t->rx, n);
		rx_refill(t);
		total += n;
	}
	if (total && (t->cfg.flags & HPCCD_TP_F_NEED_WAKEUP) &&
	    xsk_ring_prod__needs_wakeup(&t->fq))
		recvfrom(t->fd, NULL, 0, MSG_DONTWAIT, NULL, NULL);
	return total;
}

/* Steps 1-5 once (see the top of this file); the thread's loop and a
 * caller running to completion (run.c) both go round with it. */
uint64_t tp__loop_once(struct hpccd_tp *t, uint32_t *got, int *more, int *changed)
{
	uint64_t now = now_ns(), dl, before;
	int kick;

	*more = 0;
	pthread_mutex_lock(&t->lock);
	before = t->fin_gen + t->st.rx_done;
	t->st.loops++;
	t->starved = 0;
	*got = rx_pipe(t, now);
	reap_completions(t);
	now = now_ns();
	flow_timers(t, now);
	rx_timers(t, now);
	if (t->raw_left)
		*more = raw_schedule(t) >= TX_PER_LOOP;
	else
		schedule(t, now, more);
	kick = tx_submit(t);
	dl = next_wake(t);
	*changed = t->fin_gen + t->st.rx_done != before;
	pthread_mutex_unlock(&t->lock);
	if (kick)
		tx_kick(t, 0);
	return dl;
}

void *tp__main(void *arg)
{
	struct hpccd_tp *t = arg;
	struct pollfd pfd[2] = {
		{ .fd = t->fd, .events = POLLIN },
		{ .fd = t->efd, .events = POLLIN },
	};
	uint64_t backstop = POLL_BACKSTOP_NS;
	int err = 0;

	/* Pacing deadlines are tens of microseconds apart: the default 50 us
	 * timer slack would add up to one packet time at 1 Gbit/s per wake. */
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
	while (!__atomic_load_n(&t->stop_flag, __ATOMIC_ACQUIRE)) {
		uint64_t now, dl;
		uint32_t got;
		int more, changed, rc;
		struct timespec ts;

		dl = tp__loop_once(t, &got, &more, &changed);
		if (got || more || changed)
			backstop = POLL_BACKSTOP_NS;
		/* a caller inside hpccd_tp__run waits on the socket the thread
		 * just read: it is told when what it may wait for happened */
		if ((got || changed) && __atomic_load_n(&t->caller_in, __ATOMIC_ACQUIRE))
			tp__wake_caller(t);
		now = now_ns();
		if (more)
			continue;            /* the scheduler stopped at its per-loop cap */
		if ((t->cfg.flags & HPCCD_TP_F_BUSY_POLL) &&
		    !(t->cfg.flags & HPCCD_TP_F_RUN_IN_CALLER)) {
			/* busy polling: look at the rings again at once; a few
			 * pauses let API callers take the lock in between.  With
			 * run to completion it is the caller that polls (run.c)
			 * and the thread waits as otherwise: one core spins, not
			 * two */
			int k;

			for (k = 0; k < 16; k++)
				cpu_relax();
			continue;
		}
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
		if (dl - now > backstop)
			dl = now + backstop;
		ts.tv_sec = (time_t)((dl - now) / 1000000000ull);
		ts.tv_nsec = (long)((dl - now) % 1000000000ull);
		if (t->cfg.flags & HPCCD_TP_F_RUN_IN_CALLER)
			rc = tp__rtc_sleep(t, pfd, dl);
		else
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
		if (rc == 0 && dl - now >= backstop) {
			int soerr = 0;
			socklen_t sl = sizeof(soerr);

			if (getsockopt(t->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr) {
				err = -soerr;    /* the interface went away */
				break;
			}
			/* nothing happened for a whole backstop: sleep longer */
			backstop = 2 * backstop < POLL_BACKSTOP_MAX_NS ? 2 * backstop
								 : POLL_BACKSTOP_MAX_NS;
		} else {
			backstop = POLL_BACKSTOP_NS;
		}
	}
	pthread_mutex_lock(&t->lock);
	t->st.running = 0;
	t->st.thread_err = err;
	pthread_mutex_unlock(&t->lock);
	return NULL;
}
