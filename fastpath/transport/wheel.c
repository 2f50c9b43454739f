// SPDX-License-Identifier: BSD-2-Clause
/*
 * Timing wheels of the transport engine (in the manner of Carousel: time
 * slots of a fixed width in a ring, a flow filed in the slot of its
 * deadline, so that finding and taking what is due costs the same with 1
 * flow or 10,000).  Two per engine: pacing (send times, 1 us slots) and
 * timers (retransmission and probe timeouts, 64 us slots).  A flow is in
 * at most one slot of each wheel; nodes are indices into the engine's
 * per-flow node arrays, so a slot is an intrusive doubly linked list and
 * a flow leaves its slot in O(1) when it finishes.  A deadline past the
 * wheel's horizon is filed in the last slot and filed again when that
 * slot comes round.  A bitmap of non-empty slots finds the next deadline
 * in at most nslots / 64 word reads.
 */
#include "tp.h"

#include <stdlib.h>

/* node0: flow 0's node (zeroed), flow i's stride bytes further (the
 * engine's per-flow struct tp_snode) */
int wheel_init(struct tp_wheel *w, uint32_t shift, uint32_t nslots, void *node0, size_t stride)
{
	uint32_t i;

	w->shift = shift;
	w->nslots = nslots;
	w->cur = 0;
	w->count = 0;
	w->head = malloc(sizeof(*w->head) * nslots);
	w->bits = calloc(nslots / 64, sizeof(*w->bits));
	w->node0 = node0;
	w->stride = stride;
	if (!w->head || !w->bits)
		return -ENOMEM;
	for (i = 0; i < nslots; i++)
		w->head[i] = -1;
	return 0;
}

void wheel_free(struct tp_wheel *w)
{
	free(w->head);
	free(w->bits);
	w->head = NULL;
	w->bits = NULL;
}

/* Start the wheel at `now`: slots before it are in the past. */
void wheel_start(struct tp_wheel *w, uint64_t now)
{
	w->cur = now >> w->shift;
}

/* Node n (filed) out of its slot.  Inlined in its three callers: with
 * thousands of flows every packet takes its flow out of both wheels and
 * files it again (callgrind at 10,000 flows: the wheels' and the ready
 * list's 310 instructions a packet, 275 with it inlined; docs/transport.md
 * "Flows"). */
static inline __attribute__((always_inline)) void wheel_unlink(struct tp_wheel *w,
								struct tp_wnode *n)
{
	if (n->prev >= 0)
		wnode(w, n->prev)->next = n->next;
	else
		w->head[n->slot] = n->next;
	if (n->next >= 0)
		wnode(w, n->next)->prev = n->prev;
	if (w->head[n->slot] < 0)
		w->bits[n->slot / 64] &= ~(1ull << (n->slot % 64));
	n->on = 0;
	w->count--;
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
	uint32_t slot;

	if (n->on)
		wheel_unlink(w, n);
	if (tick < w->cur)
		tick = w->cur;                      /* due: the current slot */
	if (tick >= w->cur + w->nslots)
		tick = w->cur + w->nslots - 1;      /* past the horizon: filed again */
	slot = (uint32_t)(tick & (w->nslots - 1));
	n->slot = slot;
	n->at = at;
	n->prev = -1;
	n->next = w->head[slot];
	if (n->next >= 0)
		wnode(w, n->next)->prev = i;
	w->head[slot] = i;
	w->bits[slot / 64] |= 1ull << (slot % 64);
	n->on = 1;
	w->count++;
}

/* wheel_dist past slot's own word: the other words, then its low bits. */
static __attribute__((noinline)) uint64_t wheel_dist_far(const struct tp_wheel *w, uint32_t slot)
{
	uint32_t nw = w->nslots / 64, k = slot / 64, b = slot % 64, steps;

	for (steps = 1; steps <= nw; steps++) {
		uint64_t word;

		k = (k + 1) % nw;
		word = w->bits[k];
		if (steps == nw)                /* back at the first word: its low bits */
			word &= b ? (1ull << b) - 1 : ~0ull;
		if (word) {
			uint32_t next = k * 64 + (uint32_t)__builtin_ctzll(word);

			return (uint64_t)((next - slot) & (w->nslots - 1));
		}
	}
	return w->nslots;
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
	return wheel_dist_far(w, slot);
}

/* Take one flow filed in a slot whose time has come (at or before `now`;
 * its own time may be later within the slot, or past the horizon: the
 * caller looks at node[i].at), or -1.  The wheel turns as it goes, never
 * past now's slot, skipping empty slots by their bits. */
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
		int32_t i = w->head[slot];
		uint64_t d;

		if (i >= 0) {
			struct tp_wnode *n;

			*tail = i;                      /* the slot's chain after the last */
			w->head[slot] = -1;
			w->bits[slot / 64] &= ~(1ull << (slot % 64));
			do {
				n = wnode(w, i);
				n->on = 0;
				w->count--;
			} while ((i = n->next) >= 0);
			tail = &n->next;
			continue;                       /* the slot, empty: on to the next */
		}
		d = wheel_dist(w, slot);
		if (cur + d > end)
			break;
		cur += d;
	}
	w->cur = end;                           /* as wheel_pop: now's slot */
	return first;
}

/* The time of the earliest non-empty slot (its start), or NO_DEADLINE. */
uint64_t wheel_next(const struct tp_wheel *w)
{
	uint64_t d;

	if (!w->count)
		return NO_DEADLINE;
	d = wheel_dist(w, (uint32_t)(w->cur & (w->nslots - 1)));
	return d >= w->nslots ? NO_DEADLINE : (w->cur + d) << w->shift;
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
