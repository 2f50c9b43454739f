// SPDX-License-Identifier: BSD-2-Clause
/*
 * Run to completion (HPCCD_TP_F_RUN_IN_CALLER; docs/transport.md "Run to
 * completion"): the application's thread runs the engine's loop itself
 * while it waits for its flow, as eRPC's application thread runs its
 * event loop.  A request then leaves from the thread that opened it
 * (hpccd_tp__flow_open runs one pass) and its reply wakes that thread,
 * which sleeps in ppoll() on the socket: two wake-ups per round trip, no
 * hand-off to the engine's thread.  With HPCCD_TP_F_BUSY_POLL the caller
 * polls the rings instead of sleeping, and nothing is woken at all.
 *
 * The engine's thread stays, for everything no caller is there for: it
 * waits in epoll on the socket, its eventfd and a timerfd.  While a caller
 * is inside hpccd_tp__run the socket is out of the thread's set (one
 * epoll_ctl, no wake-up), so only the caller wakes for frames; when it
 * leaves, the socket goes back (epoll wakes the thread if frames wait).
 * The timerfd always holds the earliest deadline any pass saw: a caller's
 * pass that makes an earlier one (a new flow's pacing or RTO) moves it
 * without waking the thread.  Whoever runs a pass, it is the same pass
 * (tp__loop_once) under the engine lock: both may run at once.
 */
#include "tp.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

static int epoll_set(struct hpccd_tp *t, int op, int fd, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data = { .fd = fd } };

	return epoll_ctl(t->epfd, op, fd, &ev);
}

int tp__rtc_open(struct hpccd_tp *t, const char **what)
{
	t->tfd_at = NO_DEADLINE;
	t->epfd = epoll_create1(EPOLL_CLOEXEC);
	t->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	t->cefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (t->epfd < 0 || t->tfd < 0 || t->cefd < 0) {
		*what = "epoll, timerfd or eventfd";
		return -errno;
	}
	if (epoll_set(t, EPOLL_CTL_ADD, t->fd, EPOLLIN) ||
	    epoll_set(t, EPOLL_CTL_ADD, t->efd, EPOLLIN) ||
	    epoll_set(t, EPOLL_CTL_ADD, t->tfd, EPOLLIN)) {
		*what = "epoll_ctl";
		return -errno;
	}
	return 0;
}

void tp__rtc_close(struct hpccd_tp *t)
{
	if (t->epfd >= 0)
		close(t->epfd);
	if (t->tfd >= 0)
		close(t->tfd);
	if (t->cefd >= 0)
		close(t->cefd);
	t->epfd = t->tfd = t->cefd = -1;
}

void tp__wake_caller(struct hpccd_tp *t)
{
	const uint64_t one = 1;
	ssize_t w;

	if (t->cefd < 0)
		return;
	w = write(t->cefd, &one, sizeof(one));
	(void)w;
}

/* The thread's timer at `at` unless it is set earlier already (t->lock
 * held).  The thread clears tfd_at when the timer fired. */
static void tfd_arm(struct hpccd_tp *t, uint64_t at)
{
	struct itimerspec its = { { 0, 0 }, { 0, 0 } };

	if (at >= t->tfd_at || at == NO_DEADLINE)
		return;
	if (!at)
		at = 1;                  /* 0 would disarm it */
	its.it_value.tv_sec = (time_t)(at / 1000000000ull);
	its.it_value.tv_nsec = (long)(at % 1000000000ull);
	if (timerfd_settime(t->tfd, TFD_TIMER_ABSTIME, &its, NULL) == 0)
		t->tfd_at = at;
}

/* The thread's wait in this mode (tp__main): as its ppoll() would return
 * (pfd[0] the socket, pfd[1] the eventfd; 0 for the timer), until `dl`. */
int tp__rtc_sleep(struct hpccd_tp *t, struct pollfd *pfd, uint64_t dl)
{
	struct epoll_event ev[3];
	int n, i, rc = 0;

	pthread_mutex_lock(&t->lock);
	tfd_arm(t, dl);
	pthread_mutex_unlock(&t->lock);
	pfd[0].revents = pfd[1].revents = 0;
	n = epoll_wait(t->epfd, ev, 3, -1);
	if (n < 0)
		return -1;
	for (i = 0; i < n; i++) {
		if (ev[i].data.fd == t->fd) {
			pfd[0].revents = (short)ev[i].events;
			rc++;
		} else if (ev[i].data.fd == t->efd) {
			pfd[1].revents = POLLIN;
			rc++;
		} else {
			uint64_t x;
			ssize_t r = read(t->tfd, &x, sizeof(x));

			(void)r;
			pthread_mutex_lock(&t->lock);
			t->tfd_at = NO_DEADLINE;
			pthread_mutex_unlock(&t->lock);
		}
	}
	return rc;
}

/* After a caller's pass (hpccd_tp__flow_open's, or on leaving
 * hpccd_tp__run): the thread's timer at the engine's next deadline, now
 * if there is more to do at once. */
static void hand_back(struct hpccd_tp *t, uint64_t dl)
{
	pthread_mutex_lock(&t->lock);
	tfd_arm(t, dl);
	pthread_mutex_unlock(&t->lock);
}

/* One pass in the caller's thread (hpccd_tp__flow_open: a new flow's
 * first packets leave from the thread that opened it), the rest to the
 * thread's timer or to a caller inside hpccd_tp__run. */
void tp__rtc_pass(struct hpccd_tp *t)
{
	uint32_t got;
	int more, changed;
	uint64_t dl = tp__loop_once(t, &got, &more, &changed);

	pthread_mutex_lock(&t->lock);
	t->st.run_loops++;
	pthread_mutex_unlock(&t->lock);
	hand_back(t, more || got ? now_ns() : dl);
	if ((got || changed) && __atomic_load_n(&t->caller_in, __ATOMIC_ACQUIRE))
		tp__wake_caller(t);
}

/* What the caller waits for has happened (t->lock held). */
static int run_met(struct hpccd_tp *t, const uint32_t *flow_id, const uint64_t *rx_done)
{
	if (flow_id) {
		struct tp_flow *fl = flow_by_id(t, *flow_id);

		if (!fl || fl->state != HPCCD_TP_RUNNING)
			return 1;
	}
	return *rx_done != UINT64_MAX && t->st.rx_done > *rx_done;
}

static int run_loop(struct hpccd_tp *t, const uint32_t *flow_id, uint64_t *rx_done,
		    uint64_t timeout_ns, const struct hpccd_tp_flow_cfg *open, uint32_t *open_id);

int hpccd_tp__run(struct hpccd_tp *t, const uint32_t *flow_id, uint64_t *rx_done,
		  uint64_t timeout_ns)
{
	return run_loop(t, flow_id, rx_done, timeout_ns, NULL, NULL);
}

int hpccd_tp__request(struct hpccd_tp *t, const struct hpccd_tp_flow_cfg *c, uint32_t *flow_id,
		      uint64_t *rx_done, uint64_t timeout_ns)
{
	if (!c || !flow_id)
		return -EINVAL;
	return run_loop(t, flow_id, rx_done, timeout_ns, c, flow_id);
}

static int run_loop(struct hpccd_tp *t, const uint32_t *flow_id, uint64_t *rx_done,
		    uint64_t timeout_ns, const struct hpccd_tp_flow_cfg *open, uint32_t *open_id)
{
	struct pollfd pfd[2];
	uint64_t end, now, dl, no_rx = UINT64_MAX;
	int rc = -ETIMEDOUT;

	if (!t)
		return -EINVAL;
	if (!rx_done)
		rx_done = &no_rx;
	if (!(t->cfg.flags & HPCCD_TP_F_RUN_IN_CALLER))
		return tp__fail(t, -EINVAL, "the engine runs in its own thread only (made without "
				"run to completion: drive=\"caller\")");
	if (!t->started)
		return tp__fail(t, -EINVAL, "the engine is not started");
	if (__atomic_exchange_n(&t->caller_in, 1, __ATOMIC_ACQ_REL))
		return -EBUSY;
	/* the socket is this thread's now: the engine's thread is not woken
	 * for its frames */
	epoll_set(t, EPOLL_CTL_MOD, t->fd, 0);
	if (open) {
		/* the request: its first packets leave in the first pass below,
		 * its answer finds this thread waiting */
		rc = tp__flow_open_quiet(t, open, open_id);
		if (rc) {
			goto leave;
		}
		if (*rx_done != UINT64_MAX)
			flow_id = NULL;      /* the answer is what is waited for */
		rc = -ETIMEDOUT;
	}
	pfd[0] = (struct pollfd){ .fd = t->fd, .events = POLLIN };
	pfd[1] = (struct pollfd){ .fd = t->cefd, .events = POLLIN };
	now = now_ns();
	end = timeout_ns > NO_DEADLINE - now ? NO_DEADLINE : now + timeout_ns;
	for (;;) {
		uint32_t got;
		int more, changed, met, n;
		struct timespec ts;

		if (__atomic_load_n(&t->stop_flag, __ATOMIC_ACQUIRE)) {
			rc = -ESHUTDOWN;
			break;
		}
		dl = tp__loop_once(t, &got, &more, &changed);
		pthread_mutex_lock(&t->lock);
		t->st.run_loops++;
		met = run_met(t, flow_id, rx_done);
		pthread_mutex_unlock(&t->lock);
		if (met) {
			rc = 0;
			break;
		}
		now = now_ns();
		if (now >= end)
			break;
		if (more || got)
			continue;            /* work done; more may be waiting */
		if (t->cfg.flags & HPCCD_TP_F_BUSY_POLL) {
			/* busy polling: look at the rings again at once, no
			 * sleep and no wake-up between the request and its
			 * answer (this core at 100 % while the caller waits;
			 * the engine's thread sleeps meanwhile, see tp__main) */
			int k;

			for (k = 0; k < 16; k++)
				cpu_relax();
			continue;
		}
		if (t->starved && (dl == NO_DEADLINE || dl < now + STARVED_SLEEP_NS))
			dl = now + STARVED_SLEEP_NS;
		if (dl <= now)
			continue;
		if (dl > end)
			dl = end;
		if (dl - now > POLL_BACKSTOP_NS)
			dl = now + POLL_BACKSTOP_NS;
		ts.tv_sec = (time_t)((dl - now) / 1000000000ull);
		ts.tv_nsec = (long)((dl - now) % 1000000000ull);
		n = ppoll(pfd, 2, &ts, NULL);
		if (n == 0)
			note_wake(t, dl, now_ns());
		pthread_mutex_lock(&t->lock);
		t->st.run_polls++;
		pthread_mutex_unlock(&t->lock);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			break;
		}
		if (pfd[1].revents) {
			uint64_t v;
			ssize_t r = read(t->cefd, &v, sizeof(v));

			(void)r;
		}
		if (pfd[0].revents & (POLLERR | POLLHUP | POLLNVAL)) {
			rc = -EIO;
			break;
		}
	}
leave:
	/* the thread takes over: the socket back in its set (epoll wakes it
	 * if frames wait), its timer at the next deadline */
	epoll_set(t, EPOLL_CTL_MOD, t->fd, EPOLLIN);
	pthread_mutex_lock(&t->lock);
	tfd_arm(t, next_wake(t));
	*rx_done = t->st.rx_done;
	pthread_mutex_unlock(&t->lock);
	__atomic_store_n(&t->caller_in, 0, __ATOMIC_RELEASE);
	if (rc == -EIO)
		tp__fail(t, rc, "the socket reported an error while a caller ran the loop");
	return rc;
}
