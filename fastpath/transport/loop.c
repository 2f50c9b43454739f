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

static uint32_t rx_pipe(struct hpccd_tp *t, uint64_t now)
{
	uint32_t total = 0, round, idx, n, i;

	for (round = 0; round < RX_ROUNDS; round++) {
		n = xsk_ring_cons__peek(&t->rx, RX_BATCH, &idx);
		if (!n)
			break;
		for (i = 0; i < n; i++) {
			const struct xdp_desc *d = xsk_ring_cons__rx_desc(&t->rx, idx + i);

			rx_desc(t, d->addr, d->len, d->options, now);
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

void *tp__main(void *arg)
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
		if (t->raw_left)
			more = raw_schedule(t) >= TX_PER_LOOP;
		else
			schedule(t, now, &more);
		kick = tx_submit(t);
		dl = next_wake(t);
		pthread_mutex_unlock(&t->lock);
		if (kick)
			tx_kick(t, 0);

		now = now_ns();
		if (more)
			continue;            /* the scheduler stopped at its per-loop cap */
		if (t->cfg.flags & HPCCD_TP_F_BUSY_POLL) {
			/* busy polling: look at the rings again at once; a few
			 * pauses let API callers take the lock in between */
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
