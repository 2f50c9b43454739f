// SPDX-License-Identifier: BSD-2-Clause
/*
 * hpccd_bpf: libbpf behind plain-argument, -errno-returning functions for
 * the cffi module hpccd._bpf (see bpf_shim.h for the contract).
 *
 * libbpf >= 1.0 semantics are assumed: low-level calls return -errno,
 * pointer-returning calls return NULL and set errno.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <pthread.h>
#include <linux/bpf.h>
#include <linux/if_link.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "bpf_shim.h"

/* Our enum mirrors uapi constants of several enum types: compare as int. */
#define SAME(a, b) ((int)(a) == (int)(b))
_Static_assert(SAME(HPCCD_BPF_XDP_UPDATE_IF_NOEXIST, XDP_FLAGS_UPDATE_IF_NOEXIST), "xdp flag");
_Static_assert(SAME(HPCCD_BPF_XDP_SKB_MODE, XDP_FLAGS_SKB_MODE), "xdp flag");
_Static_assert(SAME(HPCCD_BPF_XDP_DRV_MODE, XDP_FLAGS_DRV_MODE), "xdp flag");
_Static_assert(SAME(HPCCD_BPF_XDP_HW_MODE, XDP_FLAGS_HW_MODE), "xdp flag");
_Static_assert(SAME(HPCCD_BPF_XDP_REPLACE, XDP_FLAGS_REPLACE), "xdp flag");
_Static_assert(SAME(HPCCD_BPF_TC_INGRESS, BPF_TC_INGRESS), "tc attach point");
_Static_assert(SAME(HPCCD_BPF_TC_EGRESS, BPF_TC_EGRESS), "tc attach point");
_Static_assert(SAME(HPCCD_BPF_ANY, BPF_ANY) && SAME(HPCCD_BPF_NOEXIST, BPF_NOEXIST) &&
	       SAME(HPCCD_BPF_EXIST, BPF_EXIST), "map update flags");
_Static_assert(SAME(HPCCD_BPF_OBJ_NAME_LEN, BPF_OBJ_NAME_LEN), "name length");
_Static_assert(SAME(HPCCD_BPF_PROG_TYPE_SCHED_CLS, BPF_PROG_TYPE_SCHED_CLS), "prog type");
_Static_assert(SAME(HPCCD_BPF_PROG_TYPE_XDP, BPF_PROG_TYPE_XDP), "prog type");
_Static_assert(SAME(HPCCD_BPF_PROG_TYPE_STRUCT_OPS, BPF_PROG_TYPE_STRUCT_OPS), "prog type");
_Static_assert(SAME(HPCCD_BPF_MAP_TYPE_STRUCT_OPS, BPF_MAP_TYPE_STRUCT_OPS), "map type");
_Static_assert(SAME(HPCCD_BPF_LOG_WARN, LIBBPF_WARN) && SAME(HPCCD_BPF_LOG_INFO, LIBBPF_INFO) &&
	       SAME(HPCCD_BPF_LOG_DEBUG, LIBBPF_DEBUG), "print levels");

/* ---- libbpf messages ------------------------------------------------------ */

/* libbpf has one process-wide print hook; the capture target is per thread
 * because cffi releases the GIL around these calls. */
static __thread struct hpccd_bpf_log *tl_log;
static int stderr_level = LIBBPF_WARN;
static pthread_once_t print_once = PTHREAD_ONCE_INIT;

static void log_put(struct hpccd_bpf_log *log, const char *s, size_t n)
{
	size_t room = log->size - 1;

	if (n >= room) {                       /* keep the tail of this message */
		log->dropped += log->len + (n - room);
		memcpy(log->buf, s + (n - room), room);
		log->len = room;
	} else {
		if (log->len + n > room) {     /* drop the oldest bytes */
			size_t drop = log->len + n - room;

			memmove(log->buf, log->buf + drop, log->len - drop);
			log->len -= drop;
			log->dropped += drop;
		}
		memcpy(log->buf + log->len, s, n);
		log->len += n;
	}
	log->buf[log->len] = '\0';
}

static int print_hook(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	struct hpccd_bpf_log *log = tl_log;

	if (log) {
		char small[512], *s = small;
		va_list aq;
		int n;

		if ((int)level > log->level)
			return 0;
		va_copy(aq, ap);
		n = vsnprintf(small, sizeof(small), fmt, aq);
		va_end(aq);
		if (n < 0)
			return 0;
		if ((size_t)n >= sizeof(small)) {  /* the verifier log arrives in one piece */
			s = malloc((size_t)n + 1);
			if (!s)
				return 0;
			vsnprintf(s, (size_t)n + 1, fmt, ap);
		}
		log_put(log, s, (size_t)n);
		if (s != small)
			free(s);
		return n;
	}
	if ((int)level > __atomic_load_n(&stderr_level, __ATOMIC_RELAXED))
		return 0;
	return vfprintf(stderr, fmt, ap);
}

static void print_install(void)
{
	libbpf_set_print(print_hook);
}

void hpccd_bpf_set_stderr_level(int level)
{
	pthread_once(&print_once, print_install);
	__atomic_store_n(&stderr_level, level, __ATOMIC_RELAXED);
}

static void capture_begin(struct hpccd_bpf_log *log)
{
	pthread_once(&print_once, print_install);
	if (log && log->buf && log->size >= 2) {
		log->len = 0;
		log->dropped = 0;
		log->buf[0] = '\0';
		tl_log = log;
	}
}

static void capture_end(void)
{
	tl_log = NULL;
}

/* ---- objects ------------------------------------------------------------- */

int hpccd_bpf_object_open(const char *path, const char *pin_root,
			  struct bpf_object **out, struct hpccd_bpf_log *log)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .pin_root_path = pin_root);
	struct bpf_object *obj;
	int err = 0;

	capture_begin(log);
	obj = bpf_object__open_file(path, &opts);
	if (!obj)
		err = errno ? -errno : -EINVAL;
	capture_end();
	*out = obj;
	return err;
}

int hpccd_bpf_object_load(struct bpf_object *obj, struct hpccd_bpf_log *log)
{
	int err;

	capture_begin(log);
	err = bpf_object__load(obj);
	capture_end();
	return err;
}

void hpccd_bpf_object_close(struct bpf_object *obj)
{
	bpf_object__close(obj);
}

const char *hpccd_bpf_object_name(const struct bpf_object *obj)
{
	return bpf_object__name(obj);
}

/*
 * Load-time settings.  The variable is looked up by name among the
 * DATASEC types of the object's BTF whose section name starts with
 * ".rodata" (clang emits one per section, with each variable's offset and
 * size); the matching internal map has that section name as its real name.
 * The new value goes through bpf_map__set_initial_value(), which refuses
 * (-EBUSY) once the object is loaded.
 */
static int rodata_find(struct bpf_object *obj, const char *var,
		       struct bpf_map **map, __u32 *off, __u32 *size)
{
	struct btf *btf = bpf_object__btf(obj);
	__u32 id, n, i;

	if (!btf)
		return -ENOENT;
	n = btf__type_cnt(btf);
	for (id = 1; id < n; id++) {
		const struct btf_type *t = btf__type_by_id(btf, id);
		const struct btf_var_secinfo *vs;
		const char *sec;

		if (!btf_is_datasec(t))
			continue;
		sec = btf__name_by_offset(btf, t->name_off);
		if (!sec || strncmp(sec, ".rodata", 7) != 0)
			continue;
		vs = btf_var_secinfos(t);
		for (i = 0; i < btf_vlen(t); i++, vs++) {
			const struct btf_type *v = btf__type_by_id(btf, vs->type);
			const char *name = v ? btf__name_by_offset(btf, v->name_off) : NULL;

			if (!name || strcmp(name, var) != 0)
				continue;
			*map = bpf_object__find_map_by_name(obj, sec);
			if (!*map)
				return -ENOENT;
			*off = vs->offset;
			*size = vs->size;
			return 0;
		}
	}
	return -ENOENT;
}

int hpccd_bpf_rodata_size(struct bpf_object *obj, const char *var)
{
	struct bpf_map *map;
	__u32 off, size;
	int err = rodata_find(obj, var, &map, &off, &size);

	return err ? err : (int)size;
}

int hpccd_bpf_rodata_set(struct bpf_object *obj, const char *var,
			 const void *value, size_t size)
{
	struct bpf_map *map;
	const void *cur;
	size_t total;
	__u32 off, vsize;
	char *copy;
	int err;

	err = rodata_find(obj, var, &map, &off, &vsize);
	if (err)
		return err;
	if (size != vsize)
		return -EINVAL;
	cur = bpf_map__initial_value(map, &total);
	if (!cur || (size_t)off + size > total)
		return -ENOENT;
	copy = malloc(total);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, cur, total);
	memcpy(copy + off, value, size);
	err = bpf_map__set_initial_value(map, copy, total);
	free(copy);
	return err;
}

struct bpf_program *hpccd_bpf_object_program(const struct bpf_object *obj, const char *name)
{
	return bpf_object__find_program_by_name(obj, name);
}

struct bpf_program *hpccd_bpf_object_next_program(const struct bpf_object *obj,
						  struct bpf_program *prev)
{
	return bpf_object__next_program(obj, prev);
}

const char *hpccd_bpf_program_name(const struct bpf_program *prog)
{
	return bpf_program__name(prog);
}

int hpccd_bpf_program_fd(const struct bpf_program *prog)
{
	return bpf_program__fd(prog);
}

int hpccd_bpf_program_type(const struct bpf_program *prog)
{
	return (int)bpf_program__type(prog);
}

struct bpf_map *hpccd_bpf_object_map(const struct bpf_object *obj, const char *name)
{
	return bpf_object__find_map_by_name(obj, name);
}

struct bpf_map *hpccd_bpf_object_next_map(const struct bpf_object *obj,
					  const struct bpf_map *prev)
{
	return bpf_object__next_map(obj, prev);
}

const char *hpccd_bpf_map_name(const struct bpf_map *map)
{
	return bpf_map__name(map);
}

int hpccd_bpf_map_fd(const struct bpf_map *map)
{
	return bpf_map__fd(map);
}

/* ---- kernel objects by fd and id ----------------------------------------- */

/* libbpf 1.1 has no bpf_prog_get_info_by_fd(); the generic call is the same. */
int hpccd_bpf_prog_info(int fd, struct hpccd_bpf_prog_info *out)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);
	int err;

	memset(&info, 0, sizeof(info));
	err = bpf_obj_get_info_by_fd(fd, &info, &len);
	if (err)
		return err;
	memset(out, 0, sizeof(*out));
	out->id = info.id;
	out->type = info.type;
	memcpy(out->name, info.name, sizeof(out->name) - 1);
	memcpy(out->tag, info.tag, sizeof(out->tag));
	return 0;
}

int hpccd_bpf_prog_map_ids(int fd, uint32_t *ids, uint32_t max)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);
	int err;

	memset(&info, 0, sizeof(info));
	info.nr_map_ids = max;
	info.map_ids = (__u64)(unsigned long)ids;
	err = bpf_obj_get_info_by_fd(fd, &info, &len);
	if (err)
		return err;
	return (int)info.nr_map_ids;
}

static int map_is_percpu(__u32 type)
{
	switch (type) {
	case BPF_MAP_TYPE_PERCPU_HASH:
	case BPF_MAP_TYPE_PERCPU_ARRAY:
	case BPF_MAP_TYPE_LRU_PERCPU_HASH:
	case BPF_MAP_TYPE_PERCPU_CGROUP_STORAGE:
		return 1;
	default:
		return 0;
	}
}

int hpccd_bpf_map_info(int fd, struct hpccd_bpf_map_info *out)
{
	struct bpf_map_info info;
	__u32 len = sizeof(info);
	int err, ncpus;

	memset(&info, 0, sizeof(info));
	err = bpf_obj_get_info_by_fd(fd, &info, &len);
	if (err)
		return err;
	memset(out, 0, sizeof(*out));
	out->id = info.id;
	out->type = info.type;
	out->key_size = info.key_size;
	out->value_size = info.value_size;
	out->max_entries = info.max_entries;
	out->map_flags = info.map_flags;
	memcpy(out->name, info.name, sizeof(out->name) - 1);
	out->percpu = map_is_percpu(info.type);
	if (out->percpu) {
		/* the kernel copies each CPU's value into an 8-byte aligned slot */
		ncpus = libbpf_num_possible_cpus();
		if (ncpus < 0)
			return ncpus;
		out->ncpus = (__u32)ncpus;
		out->value_stride = (info.value_size + 7) & ~7u;
	} else {
		out->ncpus = 1;
		out->value_stride = info.value_size;
	}
	return 0;
}

int hpccd_bpf_prog_fd_by_id(uint32_t id)
{
	return bpf_prog_get_fd_by_id(id);
}

int hpccd_bpf_map_fd_by_id(uint32_t id)
{
	return bpf_map_get_fd_by_id(id);
}

int hpccd_bpf_map_next_id(uint32_t start, uint32_t *next)
{
	return bpf_map_get_next_id(start, next);
}

int hpccd_bpf_num_possible_cpus(void)
{
	return libbpf_num_possible_cpus();
}

/* ---- maps ---------------------------------------------------------------- */

int hpccd_bpf_map_lookup(int fd, const void *key, void *value)
{
	return bpf_map_lookup_elem(fd, key, value);
}

int hpccd_bpf_map_update(int fd, const void *key, const void *value, uint64_t flags)
{
	return bpf_map_update_elem(fd, key, value, flags);
}

int hpccd_bpf_map_delete(int fd, const void *key)
{
	return bpf_map_delete_elem(fd, key);
}

int hpccd_bpf_map_next_key(int fd, const void *key, void *next_key)
{
	return bpf_map_get_next_key(fd, key, next_key);
}

int hpccd_bpf_map_lookup_batch(int fd, void *in_batch, void *out_batch,
			       void *keys, void *values, uint32_t *count,
			       uint64_t elem_flags)
{
	LIBBPF_OPTS(bpf_map_batch_opts, opts, .elem_flags = elem_flags);

	return bpf_map_lookup_batch(fd, in_batch, out_batch, keys, values, count, &opts);
}

int hpccd_bpf_map_update_batch(int fd, const void *keys, const void *values,
			       uint32_t *count, uint64_t elem_flags)
{
	LIBBPF_OPTS(bpf_map_batch_opts, opts, .elem_flags = elem_flags);

	return bpf_map_update_batch(fd, keys, values, count, &opts);
}

int hpccd_bpf_map_delete_batch(int fd, const void *keys, uint32_t *count)
{
	LIBBPF_OPTS(bpf_map_batch_opts, opts);

	return bpf_map_delete_batch(fd, keys, count, &opts);
}

/* ---- programs ------------------------------------------------------------ */

int hpccd_bpf_prog_test_run(int fd, const void *data_in, uint32_t size_in,
			    void *data_out, uint32_t *size_out, int repeat,
			    uint32_t *retval, uint32_t *duration_ns)
{
	LIBBPF_OPTS(bpf_test_run_opts, opts,
		    .data_in = data_in,
		    .data_size_in = size_in,
		    .data_out = data_out,
		    .data_size_out = data_out ? *size_out : 0,
		    .repeat = repeat);
	int err;

	err = bpf_prog_test_run_opts(fd, &opts);
	/* -ENOSPC still reports the (truncated) output and its full size */
	if (size_out)
		*size_out = opts.data_size_out;
	if (retval)
		*retval = opts.retval;
	if (duration_ns)
		*duration_ns = opts.duration;
	return err;
}

/* ---- pinning ------------------------------------------------------------- */

int hpccd_bpf_obj_pin(int fd, const char *path)
{
	return bpf_obj_pin(fd, path);
}

int hpccd_bpf_obj_get(const char *path)
{
	return bpf_obj_get(path);
}

/* ---- XDP ----------------------------------------------------------------- */

int hpccd_bpf_xdp_attach(int ifindex, int prog_fd, uint32_t flags, int old_prog_fd,
			 struct hpccd_bpf_log *log)
{
	LIBBPF_OPTS(bpf_xdp_attach_opts, opts, .old_prog_fd = old_prog_fd);
	int err;

	if (old_prog_fd >= 0)
		flags |= XDP_FLAGS_REPLACE;
	else
		flags &= ~XDP_FLAGS_REPLACE;
	capture_begin(log);
	err = bpf_xdp_attach(ifindex, prog_fd, flags,
			     (flags & XDP_FLAGS_REPLACE) ? &opts : NULL);
	capture_end();
	return err;
}

int hpccd_bpf_xdp_detach(int ifindex, uint32_t flags, int old_prog_fd,
			 struct hpccd_bpf_log *log)
{
	/* libbpf's bpf_xdp_detach() is bpf_xdp_attach() with no program. */
	return hpccd_bpf_xdp_attach(ifindex, -1, flags, old_prog_fd, log);
}

int hpccd_bpf_xdp_query(int ifindex, struct hpccd_bpf_xdp_state *out,
			struct hpccd_bpf_log *log)
{
	LIBBPF_OPTS(bpf_xdp_query_opts, opts);
	int err;

	capture_begin(log);
	err = bpf_xdp_query(ifindex, 0, &opts);
	capture_end();
	if (err)
		return err;
	out->prog_id = opts.prog_id;
	out->drv_prog_id = opts.drv_prog_id;
	out->skb_prog_id = opts.skb_prog_id;
	out->hw_prog_id = opts.hw_prog_id;
	out->attach_mode = opts.attach_mode;
	return 0;
}

/* ---- tc clsact ----------------------------------------------------------- */

int hpccd_bpf_tc_hook_create(int ifindex, struct hpccd_bpf_log *log)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = BPF_TC_INGRESS);
	int err;

	/* Creating the hook for either direction creates the clsact qdisc;
	 * it being there already is success (state is idempotent). */
	capture_begin(log);
	err = bpf_tc_hook_create(&hook);
	capture_end();
	if (err == -EEXIST)
		return 0;
	return err ? err : 1;
}

int hpccd_bpf_tc_hook_destroy(int ifindex, struct hpccd_bpf_log *log)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex,
		    .attach_point = BPF_TC_INGRESS | BPF_TC_EGRESS);
	int err;

	capture_begin(log);
	err = bpf_tc_hook_destroy(&hook);
	capture_end();
	return (err == -ENOENT || err == -EINVAL) ? 0 : err;
}

int hpccd_bpf_tc_attach(int ifindex, int direction, uint32_t handle, uint32_t priority,
			int prog_fd, int replace, uint32_t *prog_id,
			struct hpccd_bpf_log *log)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex,
		    .attach_point = (enum bpf_tc_attach_point)direction);
	LIBBPF_OPTS(bpf_tc_opts, opts, .handle = handle, .priority = priority,
		    .prog_fd = prog_fd, .flags = replace ? BPF_TC_F_REPLACE : 0);
	int err;

	capture_begin(log);
	err = bpf_tc_attach(&hook, &opts);
	capture_end();
	if (!err && prog_id)
		*prog_id = opts.prog_id;
	return err;
}

int hpccd_bpf_tc_detach(int ifindex, int direction, uint32_t handle, uint32_t priority,
			struct hpccd_bpf_log *log)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex,
		    .attach_point = (enum bpf_tc_attach_point)direction);
	LIBBPF_OPTS(bpf_tc_opts, opts, .handle = handle, .priority = priority);
	int err;

	capture_begin(log);
	err = bpf_tc_detach(&hook, &opts);
	capture_end();
	return err;
}

int hpccd_bpf_tc_query(int ifindex, int direction, uint32_t handle, uint32_t priority,
		       uint32_t *prog_id, struct hpccd_bpf_log *log)
{
	LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex,
		    .attach_point = (enum bpf_tc_attach_point)direction);
	LIBBPF_OPTS(bpf_tc_opts, opts, .handle = handle, .priority = priority);
	int err;

	capture_begin(log);
	err = bpf_tc_query(&hook, &opts);
	capture_end();
	if (!err)
		*prog_id = opts.prog_id;
	/* no clsact at all reads as "nothing there", like no filter */
	return err == -EINVAL ? -ENOENT : err;
}

/* ---- struct_ops ----------------------------------------------------------- */

/* The two attach calls: libbpf's messages into log, the link into *out, and
 * the error libbpf left in errno when it returned NULL (-EINVAL if none). */
static int attach(const struct bpf_map *map, const struct bpf_program *prog,
		  struct bpf_link **out, struct hpccd_bpf_log *log)
{
	struct bpf_link *link;
	int err = 0;

	*out = NULL;
	if (!map && !prog)
		return -EINVAL;
	capture_begin(log);
	errno = 0;
	link = map ? bpf_map__attach_struct_ops(map) : bpf_program__attach(prog);
	if (!link)
		err = errno ? -errno : -EINVAL;
	capture_end();
	*out = link;
	return err;
}

int hpccd_bpf_struct_ops_attach(const struct bpf_map *map, struct bpf_link **out,
				struct hpccd_bpf_log *log)
{
	return attach(map, NULL, out, log);
}

int hpccd_bpf_program_attach(const struct bpf_program *prog, struct bpf_link **out,
			     struct hpccd_bpf_log *log)
{
	return attach(NULL, prog, out, log);
}

int hpccd_bpf_map_reuse_fd(struct bpf_map *map, int fd)
{
	return bpf_map__reuse_fd(map, fd);
}

int hpccd_bpf_link_fd(const struct bpf_link *link)
{
	return bpf_link__fd(link);
}

int hpccd_bpf_link_pin(struct bpf_link *link, const char *path)
{
	return bpf_link__pin(link, path);
}

int hpccd_bpf_link_unpin(struct bpf_link *link)
{
	return bpf_link__unpin(link);
}

void hpccd_bpf_link_disconnect(struct bpf_link *link)
{
	bpf_link__disconnect(link);
}

int hpccd_bpf_link_destroy(struct bpf_link *link)
{
	return bpf_link__destroy(link);
}

/* A struct_ops map is registered by writing its one element (key 0) and
 * unregistered by deleting it; libbpf 1.1's struct_ops "link" does the same. */
int hpccd_bpf_struct_ops_unregister(int map_fd)
{
	__u32 zero = 0;

	return bpf_map_delete_elem(map_fd, &zero);
}
