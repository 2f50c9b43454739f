/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * AF_XDP socket of the native transport (ARCHITECTURE.md, path 1): one
 * UMEM and one XDP socket bound to one rx queue of one interface, with a
 * native RX thread that the daemon starts and stops.  This is the RX half;
 * the reliable transport (a later change) plugs its receiver in as another
 * handler and adds the TX ring.
 *
 * Who may include this: the C fast path (cffi_build/xsk/) and the cffi
 * cdef (cffi_build/build_xsk.py feeds it through `cc -E -P
 * -DHPCCD_CFFI_CDEF`).  Userspace only: not BPF, which sees the socket
 * only as an entry of the XSKMAP hpccd_xsks (ebpf/hpccd_maps.bpf.h), keyed
 * by rx queue index.  libxdp's types never appear here: struct hpccd_xsk
 * is opaque.
 *
 * The XDP program is not ours to load: xdp_host (ebpf/xdp_host.bpf.c) is
 * attached by the loader, and the socket is created with
 * XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD.  The caller inserts
 * hpccd_xsk__fd() into hpccd_xsks at key queue_id; closing the socket
 * (hpccd_xsk__destroy) removes it from the map (the kernel does that).
 *
 * Threads.  hpccd_xsk__start() starts one RX thread that owns the RX and
 * fill rings until hpccd_xsk__stop() joins it.  It waits in poll() on the
 * socket and on an eventfd that stop() writes (so stop is immediate), with
 * a timeout as a backstop; it never spins.  Frames are taken in batches of
 * up to HPCCD_XSK_BATCH, handed to the handler, and their buffers go back
 * to the fill ring at once.  Everything else (stats, recent, info) may be
 * called from any thread at any time; create/start/stop/destroy of one
 * socket must not race each other (the Python wrapper serialises them).
 *
 * Errors: every function that can fail returns 0 (or a count) or a
 * negative errno.  hpccd_xsk__create() writes what failed, naming the
 * interface and queue, into the caller's buffer; the other calls into the
 * socket's own buffer, read with hpccd_xsk__error().  The messages do not
 * repeat strerror(-rc): the caller adds it.
 */
#ifndef HPCCD_XSK_H
#define HPCCD_XSK_H

#ifndef HPCCD_CFFI_CDEF
#include <stddef.h>
#include <stdint.h>
#endif

/* Flags of hpccd_xsk__create().  The three bind flags have the values of
 * linux/if_xdp.h (checked below). */
enum {
	HPCCD_XSK_F_COPY = 2,          /* XDP_COPY: force copy mode */
	HPCCD_XSK_F_ZEROCOPY = 4,      /* XDP_ZEROCOPY: force zero-copy (fails
					* where the driver cannot); neither flag:
					* zero-copy if possible, else copy */
	HPCCD_XSK_F_NEED_WAKEUP = 8,   /* XDP_USE_NEED_WAKEUP: the kernel asks
					* to be woken instead of polling the
					* fill ring (fewer syscalls in zero-copy) */
	HPCCD_XSK_F_HUGEPAGES = 256,   /* try a MAP_HUGETLB UMEM first; plain
					* pages when none are reserved */
};

/* What the RX thread does with each batch of frames. */
enum hpccd_xsk_handler {
	/* Parse each frame with the shared parser (hpccd_wire_parse_frame),
	 * count it in struct hpccd_xsk_stats and record its summary in the
	 * ring of recent frames.  A real sink: the transport's receiver
	 * replaces it. */
	HPCCD_XSK_RX_SINK = 1,
};

enum {
	HPCCD_XSK_N_TYPES = 7,         /* enum hpccd_type 1..HPCCD_T_MAX, [0] unused */
	HPCCD_XSK_N_CLASSES = 11,      /* enum hpccd_wire_err 1..10, [0] unused */
	HPCCD_XSK_ERR_MAX = 256,       /* bytes of an error message, NUL included */
};

/* Counters of one socket.  The RX thread updates them once per batch
 * under the socket's lock, so a snapshot is consistent: every frame taken
 * from the RX ring is in rx_frames and in exactly one of by_type[],
 * by_class[], not_hpccd, parse_err. */
struct hpccd_xsk_stats {
	uint64_t rx_frames;                        /* frames taken from the RX ring */
	uint64_t rx_bytes;                         /* their frame bytes (Ethernet on) */
	uint64_t by_type[HPCCD_XSK_N_TYPES];       /* well-formed hpccd packets, by type */
	uint64_t by_class[HPCCD_XSK_N_CLASSES];    /* malformed hpccd packets, by class
						    * (docs/wire-format.md "Malformed
						    * packets"); xdp_host drops these,
						    * so non-zero means it did not run */
	uint64_t not_hpccd;                        /* frames that are not hpccd packets */
	uint64_t parse_err;                        /* the parser failed (-ENOMEM) */
	uint64_t unaligned;                        /* frames not 2 bytes past a multiple
						    * of 4, which the parser had to copy
						    * (should stay 0: see the UMEM
						    * headroom in xsk_rx.c) */
	uint64_t batches;                          /* non-empty peeks of the RX ring */
	uint64_t polls;                            /* poll() calls of the RX thread */
	uint64_t poll_timeouts;                    /* of which returned on the timeout */
	uint64_t fill_kicks;                       /* need_wakeup kicks after a refill */
	/* the kernel's struct xdp_statistics, read at the call */
	uint64_t k_rx_dropped;
	uint64_t k_rx_invalid_descs;
	uint64_t k_tx_invalid_descs;
	uint64_t k_rx_ring_full;                   /* dropped: RX ring full */
	uint64_t k_rx_fill_ring_empty;             /* no buffer in the fill ring */
	uint64_t k_tx_ring_empty;
	uint32_t running;                          /* 1 while the RX thread runs */
	int32_t thread_err;                        /* why the RX thread stopped on its
						    * own (negative errno), else 0 */
};

/* Summary of one received frame, as the shared parser saw it. */
struct hpccd_xsk_rx_summary {
	uint64_t index;          /* frame number on this socket, from 0 */
	uint64_t rx_ns;          /* CLOCK_MONOTONIC when its batch was taken */
	uint64_t seq;            /* hpccd header fields (0 when not reached) */
	uint64_t ack;
	uint32_t flow_id;
	uint32_t len;            /* frame bytes */
	uint32_t payload_len;    /* bytes after the hpccd header (class 0: minus
				  * NOTIFY body and tag) */
	int16_t cls;             /* 0 valid, 1..10 malformed class,
				  * -2 not hpccd (HPCCD_WIRE_NOT_HPCCD),
				  * other negative: parser errno */
	uint8_t type;            /* hpccd type when the header was reached */
	uint8_t flags;           /* hpccd header flags */
};

/* What the socket is, as bound. */
struct hpccd_xsk_info {
	uint32_t ifindex;
	uint32_t queue_id;
	uint32_t frames;         /* UMEM frames */
	uint32_t frame_size;
	uint32_t headroom;       /* UMEM frame headroom (see xsk_rx.c) */
	uint32_t rx_size;        /* RX ring entries */
	uint32_t fill_size;      /* fill ring entries */
	uint32_t recent_cap;     /* summaries kept (HPCCD_XSK_RECENT) */
	uint32_t batch;          /* frames per RX batch (HPCCD_XSK_BATCH) */
	uint32_t poll_ms;        /* poll() timeout of the RX thread */
	uint32_t flags;          /* HPCCD_XSK_F_* asked for */
	uint32_t zerocopy;       /* 1 when bound in zero-copy mode (XDP_OPTIONS) */
	uint32_t hugepages;      /* 1 when the UMEM is on huge pages */
	uint16_t udp_port;       /* hpccd UDP port the parser uses */
	uint8_t probe_dscp;      /* TCP-side probe DSCP the parser uses */
	uint8_t pad;
	uint64_t umem_bytes;     /* bytes mapped for the UMEM */
};

struct hpccd_xsk;

/* Create the UMEM (umem_frames x frame_size bytes, mmap'd) and the socket
 * bound to ifname's rx queue queue_id in the calling thread's network
 * namespace.  frame_size: a power of two from 2048 to the page size
 * (aligned chunk mode); umem_frames >= 2.  flags: HPCCD_XSK_F_*.  The
 * parser uses HPCCD_UDP_PORT_DEFAULT and HPCCD_PROBE_DSCP_DEFAULT until
 * hpccd_xsk__set_wire().  On failure *out is NULL and err (err_size
 * bytes, may be NULL) says what failed. */
int hpccd_xsk__create(const char *ifname, uint32_t queue_id, uint32_t umem_frames,
		      uint32_t frame_size, uint32_t flags, struct hpccd_xsk **out,
		      char *err, size_t err_size);

/* The parser's UDP port and TCP-side probe DSCP.  -EBUSY while running. */
int hpccd_xsk__set_wire(struct hpccd_xsk *x, uint16_t udp_port, uint8_t probe_dscp);

/* The socket's fd, for the XSKMAP (and for nothing else: the RX thread
 * owns the rings). */
int hpccd_xsk__fd(const struct hpccd_xsk *x);

/* Start the RX thread with `handler` (enum hpccd_xsk_handler).  -EBUSY if
 * it runs already, -EINVAL for an unknown handler. */
int hpccd_xsk__start(struct hpccd_xsk *x, int handler);

/* Stop and join the RX thread; returns at once when it does not run.
 * Returns 0, or the error that had stopped the thread on its own. */
int hpccd_xsk__stop(struct hpccd_xsk *x);

/* Snapshot of the counters (and the kernel's, read now). */
int hpccd_xsk__stats(struct hpccd_xsk *x, struct hpccd_xsk_stats *out);

/* The most recent min(max, kept) summaries, oldest first; returns how
 * many were written. */
int hpccd_xsk__recent(struct hpccd_xsk *x, struct hpccd_xsk_rx_summary *out, uint32_t max);

/* Forget the summaries and zero the counters (not the kernel's). */
int hpccd_xsk__reset(struct hpccd_xsk *x);

int hpccd_xsk__info(const struct hpccd_xsk *x, struct hpccd_xsk_info *out);

/* The message of the last failed call on x ("" when none). */
const char *hpccd_xsk__error(const struct hpccd_xsk *x);

/* Stop the RX thread, close the socket (the kernel removes it from the
 * XSKMAP), delete the UMEM and unmap its memory.  NULL is fine. */
void hpccd_xsk__destroy(struct hpccd_xsk *x);

#ifndef HPCCD_CFFI_CDEF
#include <linux/if_xdp.h>
#include "wire.h"
_Static_assert(HPCCD_XSK_F_COPY == XDP_COPY, "bind flag");
_Static_assert(HPCCD_XSK_F_ZEROCOPY == XDP_ZEROCOPY, "bind flag");
_Static_assert(HPCCD_XSK_F_NEED_WAKEUP == XDP_USE_NEED_WAKEUP, "bind flag");
_Static_assert((HPCCD_XSK_F_HUGEPAGES & (XDP_COPY | XDP_ZEROCOPY | XDP_USE_NEED_WAKEUP |
					 XDP_SHARED_UMEM)) == 0, "not a bind flag");
_Static_assert((int)HPCCD_XSK_N_TYPES == (int)HPCCD_T_MAX + 1, "one counter per hpccd type");
_Static_assert((int)HPCCD_XSK_N_CLASSES == (int)HPCCD_E_MAX, "one counter per malformed class");
_Static_assert(sizeof(struct hpccd_xsk_rx_summary) == 48, "summary layout");
#endif

#endif /* HPCCD_XSK_H */
