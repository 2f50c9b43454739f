/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * hpccd_bpf: the small C face of libbpf that the Python loader
 * (daemon/hpccd/bpf/loader.py) binds with cffi.
 *
 * Who may include this: cffi_build/bpf_shim.c and the cffi cdef
 * (cffi_build/build_bpf.py feeds it through `cc -E -P -DHPCCD_CFFI_CDEF`,
 * which drops the includes and the static asserts).  Not BPF.
 *
 * Why a shim instead of declaring libbpf itself in the cdef: libbpf takes
 * most of its arguments in size-tagged opts structs filled with macros
 * (LIBBPF_OPTS), returns some errors as NULL + errno and others as -errno,
 * and grows its structs between releases.  Here every entry point takes
 * plain scalars or hpccd-owned structs and returns 0 (or a non-negative
 * value) on success and a negative errno on failure, so the cdef stays
 * small and does not change when libbpf does.
 *
 * libbpf's messages (the verifier log among them) go to the caller's
 * struct hpccd_bpf_log for the duration of the calls that take one; other
 * messages go to stderr up to the level set with hpccd_bpf_set_stderr_level.
 * Capture is per thread, so loads on different threads do not mix logs.
 *
 * AF_XDP sockets (libxdp xsk) are not here: the transport's C fast path
 * calls them directly.  An XSKMAP entry is set from Python with
 * hpccd_bpf_map_update (key: queue id, value: the xsk socket fd).
 */
#ifndef HPCCD_BPF_SHIM_H
#define HPCCD_BPF_SHIM_H

#ifndef HPCCD_CFFI_CDEF
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#endif

struct bpf_object;
struct bpf_program;
struct bpf_map;
struct bpf_link;

/* Values of the kernel's uapi constants the Python side needs (checked
 * against <linux/if_link.h>, <linux/bpf.h> and <bpf/libbpf.h> in the shim). */
enum hpccd_bpf_const {
	HPCCD_BPF_XDP_UPDATE_IF_NOEXIST = 1,   /* XDP_FLAGS_UPDATE_IF_NOEXIST */
	HPCCD_BPF_XDP_SKB_MODE = 2,            /* XDP_FLAGS_SKB_MODE */
	HPCCD_BPF_XDP_DRV_MODE = 4,            /* XDP_FLAGS_DRV_MODE */
	HPCCD_BPF_XDP_HW_MODE = 8,             /* XDP_FLAGS_HW_MODE */
	HPCCD_BPF_XDP_REPLACE = 16,            /* XDP_FLAGS_REPLACE */
	HPCCD_BPF_TC_INGRESS = 1,              /* BPF_TC_INGRESS */
	HPCCD_BPF_TC_EGRESS = 2,               /* BPF_TC_EGRESS */
	HPCCD_BPF_ANY = 0,                     /* BPF_ANY */
	HPCCD_BPF_NOEXIST = 1,                 /* BPF_NOEXIST */
	HPCCD_BPF_EXIST = 2,                   /* BPF_EXIST */
	HPCCD_BPF_OBJ_NAME_LEN = 16,           /* BPF_OBJ_NAME_LEN */
	HPCCD_BPF_PROG_TYPE_SCHED_CLS = 3,     /* BPF_PROG_TYPE_SCHED_CLS */
	HPCCD_BPF_PROG_TYPE_XDP = 6,           /* BPF_PROG_TYPE_XDP */
	HPCCD_BPF_PROG_TYPE_STRUCT_OPS = 27,   /* BPF_PROG_TYPE_STRUCT_OPS */
	HPCCD_BPF_MAP_TYPE_STRUCT_OPS = 26,    /* BPF_MAP_TYPE_STRUCT_OPS */
	HPCCD_BPF_LOG_WARN = 0,                /* LIBBPF_WARN */
	HPCCD_BPF_LOG_INFO = 1,                /* LIBBPF_INFO */
	HPCCD_BPF_LOG_DEBUG = 2,               /* LIBBPF_DEBUG */
};

/* ---- libbpf messages ------------------------------------------------------ */

/* A caller-owned buffer that collects libbpf's messages during one call.
 * When the messages overflow it, the oldest bytes are dropped (the
 * verifier states its verdict at the end of its log); `dropped` counts
 * them.  buf is always NUL-terminated. */
struct hpccd_bpf_log {
	char *buf;
	uint32_t size;       /* bytes at buf, >= 2 */
	uint32_t len;        /* bytes collected, excluding the NUL */
	uint64_t dropped;    /* bytes dropped from the front */
	int level;           /* collect messages up to this HPCCD_BPF_LOG_* level */
};

/* Install the message hook (idempotent) and set which levels go to stderr
 * outside a capture: -1 none, 0 warnings, 1 info, 2 debug. */
void hpccd_bpf_set_stderr_level(int level);

/* ---- objects ------------------------------------------------------------- */

/* Open an ELF object; pin_root (may be NULL) is where maps declared with
 * LIBBPF_PIN_BY_NAME are pinned (libbpf's default: /sys/fs/bpf). */
int hpccd_bpf_object_open(const char *path, const char *pin_root,
			  struct bpf_object **out, struct hpccd_bpf_log *log);
int hpccd_bpf_object_load(struct bpf_object *obj, struct hpccd_bpf_log *log);
void hpccd_bpf_object_close(struct bpf_object *obj);
const char *hpccd_bpf_object_name(const struct bpf_object *obj);

/* `const volatile` load-time settings: size of the named variable in any
 * .rodata* section (or -ENOENT), and its value before load (-EINVAL if the
 * size differs, -EBUSY once loaded).  Found by name in the object's BTF. */
int hpccd_bpf_rodata_size(struct bpf_object *obj, const char *var);
int hpccd_bpf_rodata_set(struct bpf_object *obj, const char *var,
			 const void *value, size_t size);

/* Iteration starts with prev == NULL and ends at NULL. */
struct bpf_program *hpccd_bpf_object_program(const struct bpf_object *obj,
					     const char *name);
struct bpf_program *hpccd_bpf_object_next_program(const struct bpf_object *obj,
						  struct bpf_program *prev);
const char *hpccd_bpf_program_name(const struct bpf_program *prog);
int hpccd_bpf_program_fd(const struct bpf_program *prog);
int hpccd_bpf_program_type(const struct bpf_program *prog);

struct bpf_map *hpccd_bpf_object_map(const struct bpf_object *obj, const char *name);
struct bpf_map *hpccd_bpf_object_next_map(const struct bpf_object *obj,
					  const struct bpf_map *prev);
const char *hpccd_bpf_map_name(const struct bpf_map *map);
int hpccd_bpf_map_fd(const struct bpf_map *map);

/* ---- kernel objects by fd and id ----------------------------------------- */

struct hpccd_bpf_prog_info {
	uint32_t id;
	uint32_t type;                   /* BPF_PROG_TYPE_* */
	char name[16];                   /* as the kernel keeps it: <= 15 chars */
	uint8_t tag[8];
};

struct hpccd_bpf_map_info {
	uint32_t id;
	uint32_t type;                   /* BPF_MAP_TYPE_* */
	uint32_t key_size;
	uint32_t value_size;
	uint32_t max_entries;
	uint32_t map_flags;
	uint32_t percpu;                 /* 1: a value is one slot per possible CPU */
	uint32_t value_stride;           /* bytes per CPU slot (value_size rounded to 8) */
	uint32_t ncpus;                  /* possible CPUs (slots) for per-CPU maps, else 1 */
	char name[16];
};

int hpccd_bpf_prog_info(int fd, struct hpccd_bpf_prog_info *out);
/* Ids of the maps program fd uses, at most max of them into ids: their
 * number (which may exceed max), or -errno. */
int hpccd_bpf_prog_map_ids(int fd, uint32_t *ids, uint32_t max);
int hpccd_bpf_map_info(int fd, struct hpccd_bpf_map_info *out);
int hpccd_bpf_prog_fd_by_id(uint32_t id);              /* new fd, or -errno */
int hpccd_bpf_map_fd_by_id(uint32_t id);               /* new fd, or -errno */
int hpccd_bpf_map_next_id(uint32_t start, uint32_t *next);   /* -ENOENT at the end */
int hpccd_bpf_num_possible_cpus(void);

/* ---- maps ---------------------------------------------------------------- */

int hpccd_bpf_map_lookup(int fd, const void *key, void *value);
int hpccd_bpf_map_update(int fd, const void *key, const void *value, uint64_t flags);
int hpccd_bpf_map_delete(int fd, const void *key);
int hpccd_bpf_map_next_key(int fd, const void *key, void *next_key);
/* *count in: room in keys/values, out: entries handled.  Lookup returns
 * -ENOENT together with the last entries when the map is exhausted. */
int hpccd_bpf_map_lookup_batch(int fd, void *in_batch, void *out_batch,
			       void *keys, void *values, uint32_t *count,
			       uint64_t elem_flags);
int hpccd_bpf_map_update_batch(int fd, const void *keys, const void *values,
			       uint32_t *count, uint64_t elem_flags);
int hpccd_bpf_map_delete_batch(int fd, const void *keys, uint32_t *count);

/* ---- programs ------------------------------------------------------------ */

/* BPF_PROG_TEST_RUN.  *size_out in: room at data_out, out: bytes written. */
int hpccd_bpf_prog_test_run(int fd, const void *data_in, uint32_t size_in,
			    void *data_out, uint32_t *size_out, int repeat,
			    uint32_t *retval, uint32_t *duration_ns);

/* ---- pinning ------------------------------------------------------------- */

int hpccd_bpf_obj_pin(int fd, const char *path);
int hpccd_bpf_obj_get(const char *path);                 /* new fd, or -errno */

/* ---- XDP and tc (netlink) -----------------------------------------------
 *
 * These act in the calling thread's network namespace.  libbpf reports the
 * kernel's extended ack ("Exclusivity flag on, cannot modify") as a
 * warning: `log` (may be NULL) collects it instead of stderr. */

struct hpccd_bpf_xdp_state {
	uint32_t prog_id;                /* the one program, if only one mode is used */
	uint32_t drv_prog_id;
	uint32_t skb_prog_id;
	uint32_t hw_prog_id;
	uint32_t attach_mode;            /* XDP_ATTACHED_* */
};

/* old_prog_fd >= 0 adds XDP_FLAGS_REPLACE: the kernel swaps only if that
 * program is the one attached (-EEXIST otherwise). */
int hpccd_bpf_xdp_attach(int ifindex, int prog_fd, uint32_t flags, int old_prog_fd,
			 struct hpccd_bpf_log *log);
int hpccd_bpf_xdp_detach(int ifindex, uint32_t flags, int old_prog_fd,
			 struct hpccd_bpf_log *log);
int hpccd_bpf_xdp_query(int ifindex, struct hpccd_bpf_xdp_state *out,
			struct hpccd_bpf_log *log);

/* tc: direct-action BPF filters on the clsact qdisc; direction is
 * HPCCD_BPF_TC_INGRESS or HPCCD_BPF_TC_EGRESS.
 * hook_create returns 1 if it created clsact, 0 if it existed already;
 * hook_destroy removes clsact and every filter on it (0 if none was there). */
int hpccd_bpf_tc_hook_create(int ifindex, struct hpccd_bpf_log *log);
int hpccd_bpf_tc_hook_destroy(int ifindex, struct hpccd_bpf_log *log);
/* replace == 0 fails with -EEXIST if (handle, priority) is taken. */
int hpccd_bpf_tc_attach(int ifindex, int direction, uint32_t handle, uint32_t priority,
			int prog_fd, int replace, uint32_t *prog_id,
			struct hpccd_bpf_log *log);
int hpccd_bpf_tc_detach(int ifindex, int direction, uint32_t handle, uint32_t priority,
			struct hpccd_bpf_log *log);
/* -ENOENT when no filter has that (handle, priority), or there is no clsact. */
int hpccd_bpf_tc_query(int ifindex, int direction, uint32_t handle, uint32_t priority,
		       uint32_t *prog_id, struct hpccd_bpf_log *log);

/* ---- struct_ops ----------------------------------------------------------- */

/* Attach a loaded program where its section name says (tp_btf/..., fentry/...):
 * bpf_program__attach(). */
int hpccd_bpf_program_attach(const struct bpf_program *prog, struct bpf_link **out,
			     struct hpccd_bpf_log *log);
/* Before load: use the existing map fd instead of creating the map
 * (bpf_map__reuse_fd): two objects share it. */
int hpccd_bpf_map_reuse_fd(struct bpf_map *map, int fd);
/* Register a loaded struct_ops map (e.g. a TCP congestion control). */
int hpccd_bpf_struct_ops_attach(const struct bpf_map *map, struct bpf_link **out,
				struct hpccd_bpf_log *log);
int hpccd_bpf_link_fd(const struct bpf_link *link);
int hpccd_bpf_link_pin(struct bpf_link *link, const char *path);
int hpccd_bpf_link_unpin(struct bpf_link *link);
/* Keep the attachment when the link is destroyed (the process lets go). */
void hpccd_bpf_link_disconnect(struct bpf_link *link);
/* Detaches (unless disconnected) and frees the link. */
int hpccd_bpf_link_destroy(struct bpf_link *link);
/* Unregister a struct_ops map given by fd (e.g. found by id after a crash). */
int hpccd_bpf_struct_ops_unregister(int map_fd);

#endif /* HPCCD_BPF_SHIM_H */
