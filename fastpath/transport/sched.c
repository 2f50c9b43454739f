// SPDX-License-Identifier: BSD-2-Clause
/*
 * Which flow sends next ([HPCC] section 4.2, the NIC's scheduler; the
 * structure is Carousel's: a timing wheel of send times instead of a scan
 * of every flow).  A running flow is in one of three places:
 *
 *   ready     its send time has come and it has something to send: the
 *             ready list, served round robin, one packet per turn;
 *   pacing    it has something to send but its send time is ahead: the
 *             pacing wheel, filed at that time;
 *   blocked   nothing to send now (its window is full, everything is
 *             sent, or it waits for the ACK after a timeout): in neither;
 *             sched_wake() looks again when feedback, a timer or the API
 *             changes it.
 *
 * Timers (RTO, probe timeouts) are in the timer wheel, filed lazily: a
 * deadline that moves later (every ACK moves the RTO) is not refiled; when
 * its slot comes, the flow is filed again at its real deadline.  Nothing
 * here looks at flows whose time has not come, so the cost per packet
 * does not grow with the number of flows (scripts/bench_engine_flows.sh).
 */
#include "tp.h"

/* The earliest timer of fl, or NO_DEADLINE. */
uint64_t flow_deadline_of(const struct tp_flow *fl)
{
	uint64_t d = fl->rto_deadline;

	if (!fl->probe_mode)
		return d;                /* the probe fields (cold) are not read */
	if (fl->probe_out && fl->probe_deadline < d)
		d = fl->probe_deadline;
	if (fl->probe_retry && fl->probe_retry < d)
		d = fl->probe_retry;
	return d;
}

void timer_arm(struct hpccd_tp *t, struct tp_flow *fl)
{
	int32_t i = flow_slot(t, fl);
	uint64_t d = flow_deadline_of(fl);
	const struct tp_wnode *n = &t->snode[i].timer;

	if (d != NO_DEADLINE && (!n->on || d < n->at))
		wheel_add(&t->timer, i, d);
}

/* fl has no deadline left (everything it sent is acknowledged): out of
 * the timer wheel now rather than when its slot comes.  The same result
 * (that slot's check would find nothing due and file nothing), but now
 * the flow's node and its neighbours' (flows filed just before and after
 * it, a few packets ago) are in the cache; a millisecond later, with
 * thousands of flows, they and the flow's first line no longer are
 * (docs/transport.md "Flows"). */
void timer_disarm(struct hpccd_tp *t, struct tp_flow *fl)
{
	wheel_del(&t->timer, flow_slot(t, fl));
}

/* Something that may let fl send happened: file it where it belongs. */
void sched_wake(struct hpccd_tp *t, struct tp_flow *fl, uint64_t now)
{
	int32_t i = flow_slot(t, fl);
	const struct tp_wnode *n = &t->snode[i].pace;

	if (fl->state != HPCCD_TP_RUNNING || t->snode[i].ready.on)
		return;
	if (!flow_wants_to_send(fl)) {
		if (fl->next_send_ns <= now)
			flow_note_window(fl, now);
		return;
	}
	if (n->on && n->at <= fl->next_send_ns)
		return;                          /* filed in time already */
	wheel_add(&t->pace, i, fl->next_send_ns);
}

/* fl is done, failed or closed: out of every list. */
void sched_forget(struct hpccd_tp *t, struct tp_flow *fl)
{
	int32_t i = flow_slot(t, fl);

	list_del(&t->ready, i);
	wheel_del(&t->pace, i);
	wheel_del(&t->timer, i);
}

/* Probe mode ([HPCC++2022] section 6.2.1): one probe per RTT while data is
 * in flight; the next leaves as soon as the last one was answered or timed
 * out.  Called where those change: a data packet sent, a response, a
 * timeout.  Without a TX frame it tries again STARVED_SLEEP_NS later. */
void maybe_probe(struct hpccd_tp *t, struct tp_flow *fl, uint64_t now)
{
	if (!fl->probe_mode || fl->probe_out ||
	    fl->state != HPCCD_TP_RUNNING || fl->snd_nxt <= fl->snd_una)
		return;
	fl->probe_retry = 0;
	if (send_probe(t, fl, now) < 0)
		fl->probe_retry = now + STARVED_SLEEP_NS;
	timer_arm(t, fl);
}

/* The flows filed first in the pacing wheel's next PACE_AHEAD slots (past
 * the one the wheel is at), prefetched: they are served at the next turn
 * or the one after, by when their lines have come (a turn's own prefetches,
 * as it pops its flows, come just before the flows are served: the first
 * ones wait for their lines, docs/transport.md "Flows").  Only each slot's
 * first flow: the others are behind a node a miss away; with 10,000 flows
 * sharing 10 Gbit/s a slot holds one flow or none. */
#define PACE_AHEAD 32                     /* 32.8 us: more than a turn of coalesce_ns */
static void pace_prefetch_ahead(struct hpccd_tp *t)
{
	const struct tp_wheel *w = &t->pace;
	uint32_t k;

	if (!w->count)
		return;
	for (k = 1; k <= PACE_AHEAD; k++) {
		int32_t i = w->head[(w->cur + k) & (w->nslots - 1)];

		if (i >= 0)
			tp_flow_prefetch(t, i);
	}
}

/* Serve the flows whose send time has come, round robin, one packet per
 * flow per turn, at most TX_PER_LOOP packets; *more when it stopped at
 * that cap.  The first packet of a wake may leave up to wake_late_ns
 * early (struct hpccd_tp). */
uint32_t schedule(struct hpccd_tp *t, uint64_t now, int *more)
{
	uint64_t due = now + t->wake_late_ns;
	uint32_t sent = 0;
	int32_t i;

	/* the due flows at once, chained through their pace nodes (nothing
	 * is filed in the pacing wheel until the chain is walked); each was
	 * filed for a time within a slot that has come (the far level keeps
	 * the later ones), and one whose send time is later still within it
	 * is filed again by the loop below */
	for (i = wheel_take(&t->pace, due); i >= 0; i = t->snode[i].pace.next) {
		tp_flow_prefetch(t, i);          /* served below: its lines on their way */
		list_push(&t->ready, i);
	}
	*more = 0;
	while (t->ready.n && sent < TX_PER_LOOP) {
		struct tp_flow *fl;
		uint64_t seq;
		uint32_t room;

		i = list_pop(&t->ready);
		fl = &t->flows[i];
		if (t->ready.head >= 0)
			tp_flow_prefetch(t, t->ready.head);   /* the next one's lines */
		if (fl->state != HPCCD_TP_RUNNING)
			continue;
		if (!flow_next(fl, &seq, &room)) {
			flow_note_window(fl, now);   /* blocked until sched_wake */
			continue;
		}
		if (fl->next_send_ns > due) {
			wheel_add(&t->pace, i, fl->next_send_ns);
			continue;
		}
		if (fl->wnd_blocked)
			flow_window_opened(fl, now);
		if (send_data(t, fl, seq, room, now) < 0) {
			list_push(&t->ready, i);     /* no TX frame: it keeps its turn */
			return sent;
		}
		sent++;
		maybe_probe(t, fl, now);
		/* its next packet: later in this loop if its credit allows it,
		 * else at its send time; blocked if it has nothing to send */
		if (!flow_wants_to_send(fl))
			flow_note_window(fl, now);
		else if (fl->next_send_ns <= now)
			list_push(&t->ready, i);
		else
			wheel_add(&t->pace, i, fl->next_send_ns);
	}
	*more = sent >= TX_PER_LOOP;
	pace_prefetch_ahead(t);
	return sent;
}
