// SPDX-License-Identifier: BSD-2-Clause
/*
 * Timing wheels of the transport engine (in the manner of Carousel: time
 * slots of a fixed width in a ring, a flow filed in the slot of its
 * deadline, so that finding and taking what is due costs the same with 1
 * flow or 10,000).  Two per engine: pacing (send times, 1 us slots) and
 * timers (retransmission and probe timeouts, 64 us slots).  A flow is in
 * at most one slot of each wheel; nodes are indices into the engine's
 * per-flow node arrays, so a slot is an intrusive doubly linked list and
 * a flow leaves its slot in O(1) when it finishes.  A bitmap of non-empty
 * slots finds the next deadline in at most nslots / 64 word reads.
 *
 * A deadline past the wheel's horizon: with a far level (the pacing
 * wheel's, 1 ms slots 4.4 s ahead), filed there and moved into the near
 * slots once, when their horizon covers its far slot, as a hierarchical
 * timer wheel cascades; past the far horizon, or without a far level (the
 * timer wheel), in the last slot, and filed again when that slot comes
 * round.  Without the far level, 10,000 flows sharing 250 Mbit/s (a packet
 * a flow every 480 ms) were each filed again every 16.8 ms, 28 times a
 * packet: the real engine's user time a packet grew by half from 1 to
 * 10,000 flows (docs/transport.md "Flows").
 */
#include "tp.h"

#include <stdlib.h>
#include <string.h>

/* node0: flow 0's node (zeroed), flow i's stride bytes further (the
 * engine's per-flow struct tp_snode) */
int wheel_init(struct tp_wheel *w, uint32_t shift, uint32_t nslots, uint32_t fshift,
	       uint32_t fnslots, void *node0, size_t stride)
{
	uint32_t i;

	memset(w, 0, sizeof(*w));
	w->shift = shift;
	w->nslots = nslots;
	w->fshift = fshift;
	w->fnslots = fnslots;
	w->head = malloc(sizeof(*w->head) * nslots);
	w->bits = calloc(nslots / 64, sizeof(*w->bits));
	w->node0 = node0;
	w->stride = stride;
	if (!w->head || !w->bits)
		return -ENOMEM;
	for (i = 0; i < nslots; i++)
		w->head[i] = -1;
	if (fnslots) {
		/* a far slot no wider than the near horizon: moved whole */
		if (fshift > shift + (uint32_t)__builtin_ctz(nslots))
			return -EINVAL;
		w->fhead = malloc(sizeof(*w->fhead) * fnslots);
		w->fbits = calloc(fnslots / 64, sizeof(*w->fbits));
		if (!w->fhead || !w->fbits)
			return -ENOMEM;
		for (i = 0; i < fnslots; i++)
			w->fhead[i] = -1;
	}
	return 0;
}

void wheel_free(struct tp_wheel *w)
{
	free(w->head);
	free(w->bits);
	free(w->fhead);
	free(w->fbits);
	w->head = w->fhead = NULL;
	w->bits = w->fbits = NULL;
}

/* The first time past the near slots' horizon (ns). */
static inline uint64_t wheel_horizon(const struct tp_wheel *w)
{
	return (w->cur + w->nslots) << w->shift;
}

/* Start the wheel at `now`: slots before it are in the past. */
void wheel_start(struct tp_wheel *w, uint64_t now)
{
	w->cur = now >> w->shift;
	w->fcur = wheel_horizon(w) >> w->fshift;
}

/* Node n (filed) out of its slot.  Inlined in its three callers: with
 * thousands of flows every packet takes its flow out of both wheels and
 * files it again (callgrind at 10,000 flows: the wheels' and the ready
 * list's 310 instructions a packet, 275 with it inlined; docs/transport.md
 * "Flows"). */
static inline __attribute__((always_inline)) void wheel_unlink(struct tp_wheel *w,
								struct tp_wnode *n)
{
	int far = n->on == WHEEL_FAR;
	int32_t *head = far ? w->fhead : w->head;
	uint64_t *bits = far ? w->fbits : w->bits;

	if (n->prev >= 0)
		wnode(w, n->prev)->next = n->next;
	else
		head[n->slot] = n->next;
	if (n->next >= 0)
		wnode(w, n->next)->prev = n->prev;
	if (head[n->slot] < 0)
		bits[n->slot / 64] &= ~(1ull << (n->slot % 64));
	n->on = 0;
	if (far)
		w->fcount--;
	else
		w->count--;
}

/* Node n of flow i at the head of slot `slot` of one level's lists. */
static inline __attribute__((always_inline)) void slot_push(struct tp_wheel *w, int32_t *head,
							     uint64_t *bits, uint32_t slot,
							     int32_t i, struct tp_wnode *n)
{
	n->slot = slot;
	n->prev = -1;
	n->next = head[slot];
	if (n->next >= 0)
		wnode(w, n->next)->prev = i;
	head[slot] = i;
	bits[slot / 64] |= 1ull << (slot % 64);
}

void wheel_del(struct tp_wheel *w, int32_t i)
{
	struct tp_wnode *n = wnode(w, i);

	if (n->on)
		wheel_unlink(w, n);
}

/* File flow i at time `at` (moved if it was filed elsewhere). */
void wheel_add(struct tp_wheel *w, int32_t i, uint64_t at)
{
	struct tp_wnode *n = wnode(w, i);
	uint64_t tick = at >> w->shift;

	if (n->on)
		wheel_unlink(w, n);
	n->at = at;
	if (tick >= w->cur + w->nslots && w->fnslots) {
		/* past the near horizon: the far level (its slot's end is
		 * past the horizon too, so it is at or after fcur) */
		uint64_t ft = at >> w->fshift;

		if (!w->fcount)                 /* empty: fcur may be behind the horizon */
			w->fcur = wheel_horizon(w) >> w->fshift;
		if (ft >= w->fcur + w->fnslots)
			ft = w->fcur + w->fnslots - 1;   /* past the far horizon: filed again */
		slot_push(w, w->fhead, w->fbits, (uint32_t)(ft & (w->fnslots - 1)), i, n);
		n->on = WHEEL_FAR;
		w->fcount++;
		return;
	}
	if (tick < w->cur)
		tick = w->cur;                      /* due: the current slot */
	if (tick >= w->cur + w->nslots)
		tick = w->cur + w->nslots - 1;      /* past the horizon: filed again */
	slot_push(w, w->head, w->bits, (uint32_t)(tick & (w->nslots - 1)), i, n);
	n->on = WHEEL_NEAR;
	w->count++;
}

/* bits_dist past slot's own word: the other words, then its low bits. */
static __attribute__((noinline)) uint64_t bits_dist_far(const uint64_t *bits, uint32_t nslots,
							uint32_t slot)
{
	uint32_t nw = nslots / 64, k = slot / 64, b = slot % 64, steps;

	for (steps = 1; steps <= nw; steps++) {
		uint64_t word;

		k = (k + 1) % nw;
		word = bits[k];
		if (steps == nw)                /* back at the first word: its low bits */
			word &= b ? (1ull << b) - 1 : ~0ull;
		if (word) {
			uint32_t next = k * 64 + (uint32_t)__builtin_ctzll(word);

			return (uint64_t)((next - slot) & (nslots - 1));
		}
	}
	return nslots;
}

/* Slots from `slot` (included) to the next non-empty one, cyclically;
 * nslots if none.  Inlined, its slot's own word: with thousands of flows
 * the pacing wheel's next flow is a slot or two on (wheel_take finds the
 * next slot once a flow). */
static inline __attribute__((always_inline)) uint64_t wheel_dist(const struct tp_wheel *w,
								 uint32_t slot)
{
	uint64_t word = w->bits[slot / 64] & (~0ull << (slot % 64));

	if (word)
		return (uint64_t)__builtin_ctzll(word) - slot % 64;
	return bits_dist_far(w->bits, w->nslots, slot);
}

/* The far level's next non-empty slot, in far ticks from fcur; fnslots if
 * none. */
static uint64_t far_dist(const struct tp_wheel *w)
{
	uint32_t slot = (uint32_t)(w->fcur & (w->fnslots - 1));
	uint64_t word = w->fbits[slot / 64] & (~0ull << (slot % 64));

	if (word)
		return (uint64_t)__builtin_ctzll(word) - slot % 64;
	return bits_dist_far(w->fbits, w->fnslots, slot);
}

/* The far slots the near horizon covers now (every deadline in them
 * before it) into the near slots, each flow at its own time; fcur then
 * at the first far slot it does not cover. */
static void wheel_cascade(struct tp_wheel *w)
{
	uint64_t hz = wheel_horizon(w), lim = hz >> w->fshift;   /* slots < lim: covered */

	while (w->fcount) {
		uint64_t d = far_dist(w);
		uint32_t slot;
		int32_t i;

		if (d >= w->fnslots || w->fcur + d >= lim)
			break;
		w->fcur += d;
		slot = (uint32_t)(w->fcur & (w->fnslots - 1));
		i = w->fhead[slot];
		w->fhead[slot] = -1;
		w->fbits[slot / 64] &= ~(1ull << (slot % 64));
		while (i >= 0) {
			struct tp_wnode *n = wnode(w, i);
			int32_t next = n->next;

			n->on = 0;
			w->fcount--;
			wheel_add(w, i, n->at);   /* near (or far again: past its horizon) */
			i = next;
		}
		w->fcur++;
	}
	if (w->fcur < lim)
		w->fcur = lim;
}

/* Take one flow filed in a slot whose time has come (at or before `now`;
 * its own time may be later within the slot, or past the horizon: the
 * caller looks at node[i].at), or -1.  The wheel turns as it goes, never
 * past now's slot, skipping empty slots by their bits.  For a wheel
 * without a far level (the timer wheel's): only wheel_take moves a far
 * level's slots into the near ones. */
int32_t wheel_pop(struct tp_wheel *w, uint64_t now)
{
	uint64_t end = now >> w->shift;

	if (w->cur > end)
		return -1;
	while (w->count) {
		uint32_t slot = (uint32_t)(w->cur & (w->nslots - 1));
		int32_t i = w->head[slot];
		uint64_t d;

		if (i >= 0) {
			wheel_unlink(w, wnode(w, i));
			return i;
		}
		d = wheel_dist(w, slot);
		if (w->cur + d > end)
			break;
		w->cur += d;
	}
	w->cur = end;                           /* now's slot: filed for now is due */
	return -1;
}

/* A near slot's chain appended at *tail, the slot emptied; returns the new
 * tail (the chain's last node's next). */
static inline __attribute__((always_inline)) int32_t *slot_take(struct tp_wheel *w,
								 uint32_t slot, int32_t *tail)
{
	int32_t i = w->head[slot];
	struct tp_wnode *n;

	*tail = i;                              /* the slot's chain after the last */
	w->head[slot] = -1;
	w->bits[slot / 64] &= ~(1ull << (slot % 64));
	do {
		n = wnode(w, i);
		n->on = 0;
		w->count--;
	} while ((i = n->next) >= 0);
	return &n->next;
}

/* Every flow filed in a slot whose time has come, at once: what
 * wheel_pop would return call after call, in its order (slot by slot,
 * each slot's head first), as one chain through the nodes' `next`, -1
 * if none; the wheel left where wheel_pop leaves it.  The nodes are out
 * of the wheel (`on` 0) and keep `next` until they are filed again: the
 * caller walks the chain before it files any of them.  For the pacing
 * wheel, whose every due flow is served (sched.c): with thousands of
 * flows a slot holds one flow, and wheel_pop took each with a call, the
 * unlink's fixes of its neighbours and a check of its slot's bit
 * (callgrind at 10,000 flows, tick 20 us: with wheel_dist, 112 -> 70
 * instructions a packet; docs/transport.md "Flows"). */
int32_t wheel_take(struct tp_wheel *w, uint64_t now)
{
	uint64_t end = now >> w->shift, cur = w->cur;
	uint32_t mask = w->nslots - 1;
	int32_t first = -1, *tail = &first;

	if (cur > end)
		return -1;
	while (w->count) {
		uint32_t slot = (uint32_t)(cur & mask);
		uint64_t d;

		if (w->head[slot] >= 0) {
			tail = slot_take(w, slot, tail);
			continue;                       /* the slot, empty: on to the next */
		}
		d = wheel_dist(w, slot);
		if (cur + d > end)
			break;
		cur += d;
	}
	w->cur = end;                           /* as wheel_pop: now's slot */
	if (w->fcount) {
		/* the far slots the horizon, moved on, covers: into the near
		 * slots; what is due of them (after a jump of the clock past
		 * most of the horizon) in now's slot, taken too */
		wheel_cascade(w);
		if (w->head[end & mask] >= 0)
			slot_take(w, (uint32_t)(end & mask), tail);
	}
	return first;
}

/* The time of the earliest non-empty slot (its start), or NO_DEADLINE; of
 * the far level's, the start of its first non-empty slot (by when a
 * wheel_take has moved it into the near slots). */
uint64_t wheel_next(const struct tp_wheel *w)
{
	uint64_t d, next = NO_DEADLINE;

	if (w->count) {
		d = wheel_dist(w, (uint32_t)(w->cur & (w->nslots - 1)));
		if (d < w->nslots)
			next = (w->cur + d) << w->shift;
	}
	if (w->fcount) {
		d = far_dist(w);
		if (d < w->fnslots && (w->fcur + d) << w->fshift < next)
			next = (w->fcur + d) << w->fshift;
	}
	return next;
}

/* ---- the ready list: a FIFO of flow slots with O(1) removal ------------ */

void list_init(struct tp_list *l, void *node0, size_t stride)
{
	l->head = l->tail = -1;
	l->n = 0;
	l->node0 = node0;
	l->stride = stride;
}

void list_push(struct tp_list *l, int32_t i)
{
	struct tp_lnode *n = lnode(l, i);

	if (n->on)
		return;
	n->on = 1;
	n->next = -1;
	n->prev = l->tail;
	if (l->tail >= 0)
		lnode(l, l->tail)->next = i;
	else
		l->head = i;
	l->tail = i;
	l->n++;
}

void list_del(struct tp_list *l, int32_t i)
{
	struct tp_lnode *n = lnode(l, i);

	if (!n->on)
		return;
	if (n->prev >= 0)
		lnode(l, n->prev)->next = n->next;
	else
		l->head = n->next;
	if (n->next >= 0)
		lnode(l, n->next)->prev = n->prev;
	else
		l->tail = n->prev;
	n->on = 0;
	l->n--;
}

int32_t list_pop(struct tp_list *l)
{
	int32_t i = l->head;

	if (i >= 0)
		list_del(l, i);
	return i;
}
