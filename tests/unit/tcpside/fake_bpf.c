// SPDX-License-Identifier: BSD-2-Clause
/*
 * The libbpf calls of the TCP-side probe engine (fastpath/tcpside/engine.c)
 * without a kernel, for tests/unit/test_tcpside_util_anchor.py: the engine's
 * own sources are compiled unchanged beside this file instead of -lbpf
 * (tests/unit/tcpside/tcpside_build.py), so the records a test pushes go
 * through the engine's ring callback, on_resp() and hpccd_tcpp_flows() as
 * the kernel's would.  No root, no BPF.
 *
 *   - rings: one queue; ring_buffer__consume() hands each pushed record
 *     (fake_bpf_push) to the callback, as libbpf does a ring's samples;
 *   - maps: a lookup in the map whose fd is FAKE_BPF_CST_FD (tcp_hpcc's
 *     hpccd_tcp_cst) finds, for any flow, a state with data in flight (so
 *     a woken flow is run by "hpcc" and each response is followed by the
 *     next probe); every other lookup finds nothing; updates and deletes
 *     succeed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "hpccd/tcp_cc.h"
#include "fake_bpf.h"

#define FAKE_RECORD_MAX 256
#define FAKE_QUEUE 64

struct ring_buffer {
	ring_buffer_sample_fn cb;
	void *ctx;
	int efd;                       /* what the engine's epoll waits on */
};

static struct {
	uint8_t data[FAKE_RECORD_MAX];
	size_t size;
} queue[FAKE_QUEUE];
static unsigned int queued;

int fake_bpf_push(const void *rec, size_t size)
{
	if (size > FAKE_RECORD_MAX || queued == FAKE_QUEUE)
		return -ENOSPC;
	memcpy(queue[queued].data, rec, size);
	queue[queued++].size = size;
	return 0;
}

struct ring_buffer *ring_buffer__new(int map_fd, ring_buffer_sample_fn sample_cb, void *ctx,
				     const struct ring_buffer_opts *opts)
{
	struct ring_buffer *rb = calloc(1, sizeof(*rb));

	if (!rb) {
		errno = ENOMEM;
		return NULL;
	}
	rb->cb = sample_cb;
	rb->ctx = ctx;
	rb->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (rb->efd < 0) {
		free(rb);
		return NULL;
	}
	queued = 0;
	return rb;
}

int ring_buffer__add(struct ring_buffer *rb, int map_fd, ring_buffer_sample_fn sample_cb,
		     void *ctx)
{
	return 0;                      /* one queue: the engine gives both rings one callback */
}

int ring_buffer__consume(struct ring_buffer *rb)
{
	unsigned int i, n = queued;

	queued = 0;
	for (i = 0; i < n; i++)
		rb->cb(rb->ctx, queue[i].data, queue[i].size);
	return (int)n;
}

int ring_buffer__epoll_fd(const struct ring_buffer *rb)
{
	return rb->efd;
}

void ring_buffer__free(struct ring_buffer *rb)
{
	if (!rb)
		return;
	close(rb->efd);
	free(rb);
}

int bpf_map_lookup_elem(int fd, const void *key, void *value)
{
	if (fd == FAKE_BPF_CST_FD) {
		struct hpccd_tcp_cc_state st = {
			.snd_una = 1, .snd_nxt = 1 + 64 * 1448, .packets_out = 64,
			.srtt_us = 100, .mss = 1448, .cwnd = 64,
		};

		memcpy(value, &st, sizeof(st));
		return 0;
	}
	errno = ENOENT;
	return -ENOENT;
}

int bpf_map_update_elem(int fd, const void *key, const void *value, __u64 flags)
{
	return 0;
}

int bpf_map_delete_elem(int fd, const void *key)
{
	return 0;
}
