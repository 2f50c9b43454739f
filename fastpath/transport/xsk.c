// SPDX-License-Identifier: BSD-2-Clause
/*
 * The engine's AF_XDP socket and UMEM, set up with the kernel's own calls
 * (Documentation/networking/af_xdp.rst): socket(AF_XDP), XDP_UMEM_REG, the
 * four ring sizes, XDP_MMAP_OFFSETS and mmap of the rings, bind.  The rings
 * are then read and written with libxdp's inline ring helpers (<xdp/xsk.h>),
 * whose struct layout this file fills in.
 *
 * Why not libxdp's xsk_umem__create()/xsk_socket__create(): the libxdp of
 * Debian 12 (1.3) registers the UMEM with a struct that has no
 * tx_metadata_len, so the engine could not ask the kernel for checksum
 * offload through AF_XDP TX metadata (Linux 6.8+,
 * Documentation/networking/xsk-tx-metadata.rst; docs/transport.md
 * "Checksum offload").  The UMEM is registered with TX_META_LEN bytes of
 * metadata before every TX frame when the kernel takes it; a kernel that
 * refuses is asked again without, and the engine sums its checksums
 * itself (t->tx_md = 0).
 */
#include "tp.h"

#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef AF_XDP
#define AF_XDP 44
#endif
#ifndef XDP_UMEM_TX_METADATA_LEN
#define XDP_UMEM_TX_METADATA_LEN (1 << 2)   /* Linux 6.11: tx_metadata_len is valid */
#endif

/* struct xdp_umem_reg of Linux 6.8+ (Debian 12's <linux/if_xdp.h> stops
 * before tx_metadata_len; the kernel reads as many bytes as it is given). */
struct umem_reg_v3 {
	uint64_t addr;
	uint64_t len;
	uint32_t chunk_size;
	uint32_t headroom;
	uint32_t flags;
	uint32_t tx_metadata_len;
};

static int reg_umem(struct hpccd_tp *t, uint32_t md_len, uint32_t flags)
{
	struct umem_reg_v3 mr = {
		.addr = (uintptr_t)t->area,
		.len = t->area_len,
		.chunk_size = t->cfg.frame_size,
		.headroom = HEADROOM,
		.flags = flags,
		.tx_metadata_len = md_len,
	};

	return setsockopt(t->fd, SOL_XDP, XDP_UMEM_REG, &mr, sizeof(mr)) ? -errno : 0;
}

/* One ring of `size` entries of `esz` bytes at mmap offset `pgoff`. */
static int map_ring(struct hpccd_tp *t, const struct xdp_ring_offset *o, uint32_t size,
		    size_t esz, uint64_t pgoff, int producer, struct xsk_ring_prod *r,
		    void **map, size_t *map_len)
{
	*map_len = o->desc + (size_t)size * esz;
	*map = mmap(NULL, *map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, t->fd,
		    (off_t)pgoff);
	if (*map == MAP_FAILED) {
		*map = NULL;
		return -errno;
	}
	r->mask = size - 1;
	r->size = size;
	r->producer = (uint32_t *)((uint8_t *)*map + o->producer);
	r->consumer = (uint32_t *)((uint8_t *)*map + o->consumer);
	r->ring = (uint8_t *)*map + o->desc;
	r->flags = (uint32_t *)((uint8_t *)*map + o->flags);
	r->cached_prod = *r->producer;
	/* a producer sees `size` free entries ahead of the consumer */
	r->cached_cons = *r->consumer + (producer ? size : 0);
	return 0;
}

int xsk_open(struct hpccd_tp *t, uint32_t queue_id, uint32_t fill_size,
	     uint32_t comp_size, uint32_t rx_size, uint32_t tx_size, uint16_t bind_flags,
	     int want_md, const char **what)
{
	struct xdp_mmap_offsets off;
	struct sockaddr_xdp sxdp;
	socklen_t optlen = sizeof(off);
	int rc;

	t->fd = socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0);
	if (t->fd < 0) {
		*what = "socket(AF_XDP)";
		return -errno;
	}
	t->tx_md = 0;
	rc = -EINVAL;
	if (want_md) {
		/* with the flag (Linux 6.11+), then without it (6.8-6.10) */
		rc = reg_umem(t, TX_META_LEN, XDP_UMEM_TX_METADATA_LEN);
		if (rc)
			rc = reg_umem(t, TX_META_LEN, 0);
		t->tx_md = !rc;
	}
	if (rc)
		rc = reg_umem(t, 0, 0);
	if (rc) {
		*what = "XDP_UMEM_REG";
		goto fail;
	}
	if (setsockopt(t->fd, SOL_XDP, XDP_UMEM_FILL_RING, &fill_size, sizeof(fill_size)) ||
	    setsockopt(t->fd, SOL_XDP, XDP_UMEM_COMPLETION_RING, &comp_size, sizeof(comp_size)) ||
	    setsockopt(t->fd, SOL_XDP, XDP_RX_RING, &rx_size, sizeof(rx_size)) ||
	    setsockopt(t->fd, SOL_XDP, XDP_TX_RING, &tx_size, sizeof(tx_size))) {
		rc = -errno;
		*what = "ring sizes";
		goto fail;
	}
	if (getsockopt(t->fd, SOL_XDP, XDP_MMAP_OFFSETS, &off, &optlen)) {
		rc = -errno;
		*what = "XDP_MMAP_OFFSETS";
		goto fail;
	}
	*what = "mmap of the rings";
	if ((rc = map_ring(t, &off.fr, fill_size, sizeof(uint64_t), XDP_UMEM_PGOFF_FILL_RING, 1,
			   &t->fq, &t->ring_map[0], &t->ring_len[0])) ||
	    (rc = map_ring(t, &off.cr, comp_size, sizeof(uint64_t),
			   XDP_UMEM_PGOFF_COMPLETION_RING, 0, (struct xsk_ring_prod *)&t->cq,
			   &t->ring_map[1], &t->ring_len[1])) ||
	    (rc = map_ring(t, &off.rx, rx_size, sizeof(struct xdp_desc), XDP_PGOFF_RX_RING, 0,
			   (struct xsk_ring_prod *)&t->rx, &t->ring_map[2], &t->ring_len[2])) ||
	    (rc = map_ring(t, &off.tx, tx_size, sizeof(struct xdp_desc), XDP_PGOFF_TX_RING, 1,
			   &t->tx, &t->ring_map[3], &t->ring_len[3])))
		goto fail;
	memset(&sxdp, 0, sizeof(sxdp));
	sxdp.sxdp_family = AF_XDP;
	sxdp.sxdp_ifindex = t->ifindex;
	sxdp.sxdp_queue_id = queue_id;
	/* multi-buffer where the kernel and the driver take it: every kernel
	 * from 6.6 in copy mode; otherwise bound without */
	rc = -EINVAL;
	if (bind_flags & XDP_USE_SG) {
		sxdp.sxdp_flags = bind_flags;
		rc = bind(t->fd, (struct sockaddr *)&sxdp, sizeof(sxdp)) ? -errno : 0;
	}
	t->sg = !rc;
	if (rc) {
		sxdp.sxdp_flags = bind_flags & (uint16_t)~XDP_USE_SG;
		rc = bind(t->fd, (struct sockaddr *)&sxdp, sizeof(sxdp)) ? -errno : 0;
	}
	if (rc) {
		*what = "bind";
		goto fail;
	}
	return 0;
fail:
	xsk_close(t);
	return rc;
}

void xsk_close(struct hpccd_tp *t)
{
	int i;

	for (i = 0; i < 4; i++) {
		if (t->ring_map[i])
			munmap(t->ring_map[i], t->ring_len[i]);
		t->ring_map[i] = NULL;
	}
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
}
