/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * How late a thread's timed waits return, as a moving mean: the engines arm
 * their timers that much early (the transport's pacing deadlines,
 * fastpath/transport/timers.c next_wake; the TCP-side probe gaps,
 * fastpath/tcpside/engine.c lead_for).  On the idle two-vCPU VM a timed
 * wait returns 21-38 us late at p50, 35-47 us on average under the lab's
 * load (docs/tcp-side.md, "The timer's floor"); each engine bounds what it
 * makes up for.
 */
#ifndef HPCCD_WAKE_LATE_H
#define HPCCD_WAKE_LATE_H

#include <stdint.h>

/* A wait that returned later than this was the thread's preemption, not
 * the timer's latency: not a sample. */
#define HPCCD_WAKE_PREEMPTED_NS 1000000ull

/* The mean `est` after a wait that asked to return at `want` returned at
 * `now` (gain 1/8). */
static inline uint64_t hpccd_wake_late_mean(uint64_t est, uint64_t want, uint64_t now)
{
	int64_t late = (int64_t)(now - want), e = (int64_t)est;

	if (late < 0 || late > (int64_t)HPCCD_WAKE_PREEMPTED_NS)
		return est;
	e += (late - e) / 8;
	return e < 0 ? 0 : (uint64_t)e;
}

#endif /* HPCCD_WAKE_LATE_H */
