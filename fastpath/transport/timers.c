// SPDX-License-Identifier: BSD-2-Clause
/*
 * Timers of the transport engine: retransmission and probe timeouts, the
 * earliest deadline, and how late the kernel's timer wakes the thread.
 */
#include "tp.h"
#include "hpccd/wake_late.h"


/* The timers of one flow whose earliest deadline has come. */
static void flow_timer(struct hpccd_tp *t, struct tp_flow *fl, uint64_t now)
{
	if (fl->probe_mode) {
		if (fl->probe_out && fl->probe_deadline <= now) {
			/* lost: counted; the next one leaves now */
			fl->probe_out = 0;
			fl->st.probes_lost++;
		}
		if (fl->probe_retry && fl->probe_retry <= now)
			fl->probe_retry = 0;
		maybe_probe(t, fl, now);
	}
	if (fl->rto_deadline > now)
		return;
	if (fl->snd_una >= fl->snd_max) {
		fl->rto_deadline = NO_DEADLINE;
		return;
	}
	fl->st.rtos++;
	if (now - fl->last_progress_ns >= fl->c.timeout_ns) {
		flow_finish(t, fl, HPCCD_TP_FAILED, -ETIMEDOUT, now);
		return;
	}
	fl->backoff++;
	/* Go back to the first unacknowledged byte, one packet only
	 * until an ACK comes (rto_probe): if the data was not lost but
	 * its ACKs were late (a thread held off its CPU for longer
	 * than the RTO), that ACK acknowledges beyond the resent
	 * packet and the timeout cost one packet, not a window of
	 * them (the idea of F-RTO, RFC 5682: a spurious timeout shows
	 * in the first ACK after it: RFC 3522's Eifel detection, by the
	 * timestamp the ACK echoes, feedback.c). */
	if (fl->rto_probe)
		fl->st.rtos_repeated++;
	fl->rto_probe_end = fl->snd_una + fl->mss;
	fl->rto_probe = 1;
	fl->rto_ts = (uint32_t)now;
	fl->rto_holes = fl->sack_n != 0;
	fl->sack_n = 0;              /* the receiver reports them again */
	fl->rtx_next = fl->snd_una;  /* and every hole is resent again */
	fl->snd_nxt = fl->snd_una;
	fl->goback_seq = fl->snd_una;
	fl->goback_ns = now;
	fl->next_send_ns = now;
	if (fl->ops->on_timeout)
		fl->ops->on_timeout(fl, now);
	fl->ops->sync(fl);
	fl->rto_deadline = now + flow_rto(fl);
	sched_wake(t, fl, now);
}

/* Every flow whose timer slot has come: due ones handled, the others
 * (their deadline moved later since they were filed) filed again. */
void flow_timers(struct hpccd_tp *t, uint64_t now)
{
	uint32_t nre = 0, k;
	int32_t i;

	while ((i = wheel_pop(&t->timer, now)) >= 0) {
		struct tp_flow *fl = &t->flows[i];

		if (fl->state != HPCCD_TP_RUNNING)
			continue;
		if (flow_deadline_of(fl) > now) {
			t->refile[nre++] = i;
			continue;
		}
		flow_timer(t, fl, now);
		if (fl->state == HPCCD_TP_RUNNING)
			t->refile[nre++] = i;
	}
	for (k = 0; k < nre; k++)
		timer_arm(t, &t->flows[t->refile[k]]);
}

/* The earliest deadline of the engine, and when the thread should wake
 * for it: send times t->wake_late_ns early (see struct hpccd_tp). */
uint64_t next_wake(struct hpccd_tp *t)
{
	uint64_t d = t->delack_min, w = wheel_next(&t->timer), send;

	if (w < d)
		d = w;
	send = t->ready.n ? 0 : wheel_next(&t->pace);
	if (send != NO_DEADLINE) {
		send = send > t->wake_late_ns ? send - t->wake_late_ns : 0;
		if (send < d)
			d = send;
	}
	return d;
}

/* A timed wait that asked to wake at `want` woke at `now`: its lateness
 * into the moving mean (include/hpccd/wake_late.h), made up for up to
 * WAKE_EARLY_MAX_NS. */
void note_wake(struct hpccd_tp *t, uint64_t want, uint64_t now)
{
	uint64_t est = hpccd_wake_late_mean(t->wake_late_ns, want, now);

	if (est > WAKE_EARLY_MAX_NS)
		est = WAKE_EARLY_MAX_NS;
	/* written by the thread only; hpccd_tp__stats() reads it */
	__atomic_store_n(&t->wake_late_ns, est, __ATOMIC_RELAXED);
}
