"""Loader for hpccd's BPF programs: libbpf through cffi (cffi_build/bpf_shim.c).

Open, set load-time constants, load, attach and detach XDP and tc programs,
read and write maps, register struct_ops, pin, and clean up after a crash.
No bpf() syscall is made here and nothing is shelled out: XDP and tc go
through libbpf's netlink calls, listing tc filters (which libbpf cannot do)
through pyroute2.

Errors: every failing call raises :class:`BpfError` (an ``OSError`` with the
kernel's errno) saying what failed on which object, program, map or
interface; a failed load carries libbpf's messages, the verifier log among
them, in the message and in ``.log``.  Return codes become exceptions in
:func:`_check` and nowhere else.

Ownership of attachments.  An XDP program, tc filter or struct_ops map is
*ours* when the kernel's name of it starts with ``name_prefix``
(``"hpccd_"``): BPF programs' C function names and struct_ops variables
must carry it, and the kernel keeps only 15 characters of a name.
Attaching is idempotent: attaching the program that is already there does
nothing; one of ours in the way is replaced (atomically with
XDP_FLAGS_REPLACE / the tc replace flag when in the same place;
``replace=False`` makes that EEXIST); a foreign program in the way is never
replaced unless ``force=True`` (EBUSY otherwise), so the daemon cannot
silently knock out somebody else's program.  Detaching removes the program
in every XDP mode (or the tc filter at the given handle and priority) and is
a no-op when nothing is there.  :func:`cleanup_stale` removes what a dead
process left: our XDP programs and tc filters on the given interfaces,
everything pinned under ``/sys/fs/bpf/hpccd``, and our registered struct_ops
maps.  libbpf 1.1 registers struct_ops without a kernel link (by writing the
map's one element), so a registration outlives the process that made it and
unpinning does not end it; and a struct_ops map, once unregistered, cannot
be registered again: open and load the object anew.

Network namespaces: libbpf's netlink operations (XDP, tc) and interface
names act in the *calling thread's* network namespace; use
:func:`in_netns` to run them inside a named one.  BPF objects, maps, ids
and pins are not per namespace.

Load-time constants (``rodata``) are ``const volatile`` globals of the BPF
program.  They are found by name in the object's BTF (any ``.rodata*``
section) and written into the section's initial image before load, the way
a bpftool skeleton does, but without generating one per object.  An int is
written in host byte order with the variable's size; bytes and cffi structs
must have exactly that size.
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import mmap
import os
import socket
import struct
import sys
from typing import Any, Iterator, Mapping, NamedTuple

from .._bpf import ffi, lib

__all__ = [
    "BpfError", "BpfObject", "Program", "Map", "Link",
    "xdp_attach", "xdp_detach", "xdp_query", "XdpState",
    "tc_attach", "tc_detach", "tc_query", "tc_list", "tc_remove_clsact", "TcFilter",
    "cleanup_stale", "ensure_bpffs", "unpin_tree", "in_netns", "set_libbpf_stderr_level",
    "object_path", "NAME_PREFIX", "BPFFS", "PIN_DIR", "OBJ_DIR",
]

NAME_PREFIX = "hpccd_"
BPFFS = "/sys/fs/bpf"
PIN_DIR = BPFFS + "/hpccd"
LOG_SIZE = 1 << 20            # bytes of libbpf messages kept per load (the tail)
# Where `make bpf` puts the objects (ebpf/x.bpf.c -> build/ebpf/x.bpf.o);
# in an installed package (pip install ., setup.py) they are package data of
# hpccd.bpf, this folder; HPCCD_BPF_DIR overrides both (a test's own build).
SOURCE_OBJ_DIR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
    "build", "ebpf")
PACKAGE_OBJ_DIR = os.path.dirname(os.path.abspath(__file__))
OBJ_DIR = os.environ.get("HPCCD_BPF_DIR") or (
    PACKAGE_OBJ_DIR if any(n.endswith(".bpf.o") for n in os.listdir(PACKAGE_OBJ_DIR))
    and not os.path.isdir(SOURCE_OBJ_DIR) else SOURCE_OBJ_DIR)

_XDP_MODES = {"native": lib.HPCCD_BPF_XDP_DRV_MODE, "drv": lib.HPCCD_BPF_XDP_DRV_MODE,
              "skb": lib.HPCCD_BPF_XDP_SKB_MODE, "generic": lib.HPCCD_BPF_XDP_SKB_MODE}
_XDP_MODE_NAMES = {lib.HPCCD_BPF_XDP_DRV_MODE: "native", lib.HPCCD_BPF_XDP_SKB_MODE: "skb",
                   lib.HPCCD_BPF_XDP_HW_MODE: "hw"}
_TC_DIRS = {"ingress": lib.HPCCD_BPF_TC_INGRESS, "egress": lib.HPCCD_BPF_TC_EGRESS}
# clsact's parents, TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_{INGRESS,EGRESS})
_TC_PARENTS = {"ingress": 0xFFFFFFF2, "egress": 0xFFFFFFF3}
_UPDATE_FLAGS = {"any": lib.HPCCD_BPF_ANY, "noexist": lib.HPCCD_BPF_NOEXIST,
                 "exist": lib.HPCCD_BPF_EXIST}
_ENOTSUPP = 524               # the kernel's internal "not supported" (batch ops)
_CLONE_NEWNET = 0x40000000

lib.hpccd_bpf_set_stderr_level(lib.HPCCD_BPF_LOG_WARN)


class BpfError(OSError):
    """A libbpf or kernel call failed.  ``errno`` is the kernel's; ``what``
    names the operation and its object; ``log`` holds libbpf's messages
    (the verifier log for a failed load), or ``""``."""

    def __init__(self, err: int, what: str, log: str = ""):
        msg = f"{what}: {os.strerror(err)}"
        if log:
            msg += "\n--- libbpf log ---\n" + log.rstrip("\n")
        super().__init__(err, msg)
        self.what = what
        self.log = log

    def __str__(self) -> str:
        return self.strerror


def _check(rc: int, what: str, log: str = "") -> int:
    """The one place where a negative errno becomes an exception."""
    if rc < 0:
        raise BpfError(-rc, what, log)
    return rc


def set_libbpf_stderr_level(level: int) -> None:
    """Which libbpf messages outside a load go to stderr: -1 none, 0 warn, 1 info, 2 debug."""
    lib.hpccd_bpf_set_stderr_level(level)


class _Log:
    """A buffer that collects libbpf's messages during one call."""

    def __init__(self, size: int = LOG_SIZE, level: int = lib.HPCCD_BPF_LOG_INFO):
        self._buf = ffi.new("char[]", size)
        self.c = ffi.new("struct hpccd_bpf_log *",
                         {"buf": self._buf, "size": size, "level": level})

    def text(self) -> str:
        s = ffi.string(self._buf, self.c.len).decode(errors="replace")
        if self.c.dropped:
            s = f"[... {self.c.dropped} earlier bytes dropped ...]\n" + s
        return s


def _cstr(p) -> str:
    return ffi.string(p).decode(errors="replace") if p != ffi.NULL else ""


def _as_bytes(value: Any, size: int, what: str) -> bytes | Any:
    """An int (host byte order, `size` bytes), bytes-like or cffi cdata as a
    buffer of exactly `size` bytes."""
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, int):
        try:
            return value.to_bytes(size, sys.byteorder, signed=value < 0)
        except OverflowError:
            _check(-errno.ERANGE, f"{what}: {value} does not fit in {size} bytes")
    if isinstance(value, ffi.CData):
        value = ffi.buffer(value)
    n = memoryview(value).nbytes
    if n != size:
        _check(-errno.EINVAL, f"{what}: {n} bytes given, {size} expected")
    return value


def _ifindex(iface: str | int) -> int:
    if isinstance(iface, int):
        return iface
    try:
        return socket.if_nametoindex(iface)
    except OSError as e:
        _check(-(e.errno or errno.ENODEV), f"interface {iface!r}")
        raise


def _ifdesc(ifindex: int) -> str:
    try:
        return f"{socket.if_indextoname(ifindex)} (ifindex {ifindex})"
    except OSError:
        return f"ifindex {ifindex}"


# ---- programs ----------------------------------------------------------------

class _FdHandle:
    """A kernel object held by fd; closes it (when it owns it) once."""

    _fd: int = -1
    _owns: bool = False

    def close(self) -> None:
        if self._owns and self._fd >= 0:
            os.close(self._fd)
        self._fd = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


class Program(_FdHandle):
    """A loaded BPF program: one of a :class:`BpfObject`'s (valid while the
    object is open), or one found by id or pin (then it owns its fd; close
    it or use it as a context manager)."""

    def __init__(self, fd: int, name: str, owns_fd: bool = False,
                 owner: "BpfObject | None" = None):
        self._fd = fd
        self._owns = owns_fd
        self._owner = owner
        self._name = name
        self._info = None

    @classmethod
    def from_id(cls, prog_id: int) -> "Program":
        fd = _check(lib.hpccd_bpf_prog_fd_by_id(prog_id), f"BPF program id {prog_id}")
        p = cls(fd, "", owns_fd=True)
        p._name = p.kernel_name
        return p

    @classmethod
    def from_pinned(cls, path: str) -> "Program":
        fd = _check(lib.hpccd_bpf_obj_get(os.fsencode(path)), f"pinned BPF program {path}")
        p = cls(fd, "", owns_fd=True)
        p._name = p.kernel_name
        return p

    def _get_info(self):
        if self._info is None:
            info = ffi.new("struct hpccd_bpf_prog_info *")
            _check(lib.hpccd_bpf_prog_info(self.fd, info), f"info of program {self._name}")
            self._info = info
        return self._info

    @property
    def fd(self) -> int:
        # An object's fds die with it (and their numbers get reused).
        if self._fd < 0 or (self._owner is not None and self._owner.closed):
            _check(-errno.EBADF, f"program {self._name}: closed")
        return self._fd

    name = property(lambda self: self._name, doc="libbpf's name (the C function's)")
    id = property(lambda self: self._get_info().id, doc="the kernel's program id")
    type = property(lambda self: self._get_info().type, doc="BPF_PROG_TYPE_*")
    kernel_name = property(lambda self: _cstr(self._get_info().name),
                           doc="the name as the kernel keeps it (15 characters)")

    def test_run(self, data: bytes, repeat: int = 1,
                 out_size: int | None = None) -> tuple[int, bytes, int]:
        """BPF_PROG_TEST_RUN: (return value, output packet, mean duration in ns)."""
        din = ffi.from_buffer("char[]", data)
        size = out_size or len(data) + 512
        for _ in range(2):
            out = bytearray(size)
            n = ffi.new("uint32_t *", size)
            retval = ffi.new("uint32_t *")
            dur = ffi.new("uint32_t *")
            rc = lib.hpccd_bpf_prog_test_run(self.fd, din, len(data), ffi.from_buffer(out),
                                             n, repeat, retval, dur)
            if rc == -errno.ENOSPC and out_size is None and n[0] > size:
                size = n[0]
                continue
            break
        _check(rc, f"test run of program {self._name} ({len(data)} bytes in)")
        return retval[0], bytes(out[:n[0]]), dur[0]

    def map_ids(self) -> list[int]:
        """Ids of the maps the program uses (open one with Map.from_id)."""
        n = 16
        while True:
            ids = ffi.new("uint32_t[]", n)
            got = _check(lib.hpccd_bpf_prog_map_ids(self.fd, ids, n),
                         f"map ids of program {self._name}")
            if got <= n:
                return list(ids[0:got])
            n = got

    def pin(self, path: str) -> None:
        _check(lib.hpccd_bpf_obj_pin(self.fd, os.fsencode(path)),
               f"pin program {self._name} at {path}")

    def __repr__(self) -> str:
        return f"<Program {self._name} fd={self._fd}>"


# ---- maps --------------------------------------------------------------------

class Map(_FdHandle):
    """A BPF map by fd.  Keys and values are given as bytes-like objects,
    cffi structs or ints (host byte order, the key's or value's size) and
    come back as bytes; a per-CPU map's value comes back as a list with one
    bytes object per possible CPU, and is given as such a list or as the
    concatenation of the 8-byte aligned slots."""

    def __init__(self, fd: int, name: str, owns_fd: bool = False,
                 owner: "BpfObject | None" = None):
        self._fd, self._owns = -1, False        # the caller closes fd if this fails
        info = ffi.new("struct hpccd_bpf_map_info *")
        _check(lib.hpccd_bpf_map_info(fd, info), f"info of map {name or fd}")
        self._fd = fd
        self._owns = owns_fd
        self._owner = owner
        self._info = info
        self.name = name or _cstr(info.name)

    @classmethod
    def from_pinned(cls, path: str) -> "Map":
        fd = _check(lib.hpccd_bpf_obj_get(os.fsencode(path)), f"pinned BPF map {path}")
        try:
            return cls(fd, "", owns_fd=True)
        except BaseException:
            os.close(fd)
            raise

    @classmethod
    def from_id(cls, map_id: int) -> "Map":
        fd = _check(lib.hpccd_bpf_map_fd_by_id(map_id), f"BPF map id {map_id}")
        try:
            return cls(fd, "", owns_fd=True)
        except BaseException:
            os.close(fd)
            raise

    @property
    def fd(self) -> int:
        if self._fd < 0 or (self._owner is not None and self._owner.closed):
            _check(-errno.EBADF, f"map {self.name}: closed")
        return self._fd

    id = property(lambda self: self._info.id)
    type = property(lambda self: self._info.type, doc="BPF_MAP_TYPE_*")
    key_size = property(lambda self: self._info.key_size)
    value_size = property(lambda self: self._info.value_size)
    max_entries = property(lambda self: self._info.max_entries)
    percpu = property(lambda self: bool(self._info.percpu))
    ncpus = property(lambda self: self._info.ncpus)

    @property
    def _value_bytes(self) -> int:
        return self._info.value_stride * self._info.ncpus

    def _key_buf(self, key: Any):
        return _as_bytes(key, self.key_size, f"map {self.name}: key")

    def _key(self, key: Any):
        return ffi.from_buffer("char[]", self._key_buf(key))

    def _value_in(self, value: Any):
        return ffi.from_buffer("char[]", self._value_buf(value))

    def _value_buf(self, value: Any):
        if self.percpu and isinstance(value, (list, tuple)):
            stride = self._info.value_stride
            if len(value) != self.ncpus:
                _check(-errno.EINVAL, f"map {self.name}: {len(value)} per-CPU values "
                                      f"given, {self.ncpus} CPUs")
            buf = bytearray(stride * self.ncpus)
            for i, v in enumerate(value):
                b = _as_bytes(v, self.value_size, f"map {self.name}: value of CPU {i}")
                buf[i * stride:i * stride + self.value_size] = b
            value = buf
        return _as_bytes(value, self._value_bytes, f"map {self.name}: value")

    def _value_out(self, raw: memoryview | bytes) -> bytes | list[bytes]:
        if not self.percpu:
            return bytes(raw)
        stride, size = self._info.value_stride, self.value_size
        return [bytes(raw[i * stride:i * stride + size]) for i in range(self.ncpus)]

    def lookup(self, key: Any) -> bytes | list[bytes] | None:
        """The value at `key`, or None if there is none."""
        out = bytearray(self._value_bytes)
        rc = lib.hpccd_bpf_map_lookup(self.fd, self._key(key), ffi.from_buffer(out))
        if rc == -errno.ENOENT:
            return None
        _check(rc, f"lookup in map {self.name}")
        return self._value_out(out)

    def update(self, key: Any, value: Any, flags: str = "any") -> None:
        """Set `key` to `value`; flags "any", "noexist" (EEXIST if present)
        or "exist" (ENOENT if absent)."""
        _check(lib.hpccd_bpf_map_update(self.fd, self._key(key), self._value_in(value),
                                        _UPDATE_FLAGS[flags]),
               f"update of map {self.name}")

    def delete(self, key: Any) -> bool:
        """Delete `key`; False if it was not there."""
        rc = lib.hpccd_bpf_map_delete(self.fd, self._key(key))
        if rc == -errno.ENOENT:
            return False
        _check(rc, f"delete in map {self.name}")
        return True

    def keys(self) -> Iterator[bytes]:
        """Keys one at a time (BPF_MAP_GET_NEXT_KEY); for maps without batches."""
        cur = ffi.NULL
        nxt = bytearray(self.key_size)
        while True:
            rc = lib.hpccd_bpf_map_next_key(self.fd, cur, ffi.from_buffer(nxt))
            if rc == -errno.ENOENT:
                return
            _check(rc, f"next key in map {self.name}")
            key = bytes(nxt)
            yield key
            cur = ffi.from_buffer("char[]", key)

    def lookup_batch(self, batch: int = 256) -> Iterator[tuple[bytes, bytes | list[bytes]]]:
        """Every (key, value) in batches of up to `batch` entries per system
        call; falls back to one entry at a time for map types without batch
        support.  A map changing meanwhile may show an entry twice or not at all."""
        ksz, vsz = self.key_size, self._value_bytes
        token_size = max(ksz, 8)     # hash maps use a u32 bucket, arrays a key
        tok_in, tok_out = bytearray(token_size), bytearray(token_size)
        first = True
        while True:
            keys, vals = bytearray(ksz * batch), bytearray(vsz * batch)
            count = ffi.new("uint32_t *", batch)
            rc = lib.hpccd_bpf_map_lookup_batch(
                self.fd, ffi.NULL if first else ffi.from_buffer(tok_in),
                ffi.from_buffer(tok_out), ffi.from_buffer(keys), ffi.from_buffer(vals),
                count, 0)
            if rc == -errno.ENOSPC and count[0] == 0:
                batch *= 2           # one hash bucket holds more than `batch`
                continue
            if first and rc in (-errno.EINVAL, -errno.EOPNOTSUPP, -_ENOTSUPP):
                yield from self._lookup_one_by_one()
                return
            if rc < 0 and rc != -errno.ENOENT:
                _check(rc, f"batch lookup in map {self.name}")
            kv, vv = memoryview(keys), memoryview(vals)
            for i in range(count[0]):
                yield bytes(kv[i * ksz:(i + 1) * ksz]), self._value_out(vv[i * vsz:(i + 1) * vsz])
            if rc == -errno.ENOENT:
                return
            tok_in, tok_out = tok_out, tok_in
            first = False

    def _lookup_one_by_one(self) -> Iterator[tuple[bytes, bytes | list[bytes]]]:
        for key in list(self.keys()):
            value = self.lookup(key)
            if value is not None:
                yield key, value

    def items(self) -> Iterator[tuple[bytes, bytes | list[bytes]]]:
        return self.lookup_batch()

    def update_batch(self, items: Mapping[Any, Any] | list[tuple[Any, Any]],
                     flags: str = "any") -> int:
        """Set many entries in one system call; returns how many were set."""
        pairs = list(items.items()) if isinstance(items, Mapping) else list(items)
        if not pairs:
            return 0
        ksz, vsz = self.key_size, self._value_bytes
        keys, vals = bytearray(ksz * len(pairs)), bytearray(vsz * len(pairs))
        for i, (k, v) in enumerate(pairs):
            keys[i * ksz:(i + 1) * ksz] = self._key_buf(k)
            vals[i * vsz:(i + 1) * vsz] = self._value_buf(v)
        count = ffi.new("uint32_t *", len(pairs))
        rc = lib.hpccd_bpf_map_update_batch(self.fd, ffi.from_buffer(keys),
                                            ffi.from_buffer(vals), count,
                                            _UPDATE_FLAGS[flags])
        _check(rc, f"batch update of map {self.name} ({count[0]} of {len(pairs)} set)")
        return count[0]

    def pin(self, path: str) -> None:
        _check(lib.hpccd_bpf_obj_pin(self.fd, os.fsencode(path)),
               f"pin map {self.name} at {path}")

    def __repr__(self) -> str:
        return f"<Map {self.name} fd={self._fd} id={self.id}>"


# ---- ring buffers ----------------------------------------------------------------

class RingBuffer:
    """Consumer of a BPF_MAP_TYPE_RINGBUF map through mmap, in Python: the
    kernel's layout is a consumer-position page (read-write), a producer-
    position page, and the data area mapped twice so that a record never
    wraps; each record has an 8-byte header whose length word carries BUSY
    (bit 31: still being written) and DISCARD (bit 30).  For readers that
    poll at their own pace (the experiment runner, tests); records are
    returned as bytes, oldest first."""

    BUSY, DISCARD = 1 << 31, 1 << 30

    def __init__(self, m: "Map"):
        self.size = m.max_entries
        pg = mmap.PAGESIZE
        self._pg = pg
        self._cons = mmap.mmap(m.fd, pg, mmap.MAP_SHARED,
                               mmap.PROT_READ | mmap.PROT_WRITE, offset=0)
        self._prod = mmap.mmap(m.fd, pg + 2 * self.size, mmap.MAP_SHARED,
                               mmap.PROT_READ, offset=pg)

    def close(self) -> None:
        self._cons.close()
        self._prod.close()

    def __enter__(self) -> "RingBuffer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def read(self) -> list[bytes]:
        """Every complete record not read yet; advances the consumer."""
        out = []
        cons = struct.unpack_from("<Q", self._cons, 0)[0]
        prod = struct.unpack_from("<Q", self._prod, 0)[0]
        while cons < prod:
            off = self._pg + (cons & (self.size - 1))
            hlen = struct.unpack_from("<I", self._prod, off)[0]
            if hlen & self.BUSY:
                break
            n = hlen & ~(self.BUSY | self.DISCARD)
            if not hlen & self.DISCARD:
                out.append(bytes(self._prod[off + 8:off + 8 + n]))
            cons += (n + 8 + 7) & ~7
            struct.pack_into("<Q", self._cons, 0, cons)
        return out


# ---- links: struct_ops maps, tracing programs ---------------------------------

class Link:
    """A registered struct_ops map (libbpf 1.1: a user-space link whose fd
    is the map's), or an attached tracing program (tp_btf, fentry: a kernel
    link).  destroy() unregisters (detaches) unless disconnect() was called;
    pin() keeps the registration (attachment) alive and undoable after the
    process is gone: unpinning the last reference detaches."""

    def __init__(self, ptr, name: str):
        self._ptr = ptr
        self.name = name

    @property
    def fd(self) -> int:
        return lib.hpccd_bpf_link_fd(self._live())

    def _live(self):
        if self._ptr is None:
            _check(-errno.EBADF, f"struct_ops {self.name}: link already destroyed")
        return self._ptr

    def pin(self, path: str) -> None:
        _check(lib.hpccd_bpf_link_pin(self._live(), os.fsencode(path)),
               f"pin struct_ops {self.name} at {path}")

    def unpin(self) -> None:
        _check(lib.hpccd_bpf_link_unpin(self._live()), f"unpin struct_ops {self.name}")

    def disconnect(self) -> None:
        lib.hpccd_bpf_link_disconnect(self._live())

    def destroy(self) -> None:
        if self._ptr is None:
            return
        ptr, self._ptr = self._ptr, None
        rc = lib.hpccd_bpf_link_destroy(ptr)
        if rc != -errno.ENOENT:       # already unregistered (e.g. by cleanup_stale)
            _check(rc, f"unregister struct_ops {self.name}")


# ---- objects -----------------------------------------------------------------

class BpfObject:
    """A BPF ELF object: ``BpfObject.open(path, rodata)`` -> ``.load()`` ->
    ``.program(name)`` / ``.map(name)``; closing it (or leaving its ``with``
    block) unregisters its struct_ops links and frees programs and maps that
    nothing else holds (XDP/tc attachments and pins keep theirs)."""

    def __init__(self, ptr, path: str):
        self._ptr = ptr
        self.path = str(path)
        self.loaded = False
        self._links: list[Link] = []

    @classmethod
    def open(cls, path: str | os.PathLike, rodata: Mapping[str, Any] | None = None,
             pin_root: str | None = None) -> "BpfObject":
        """Open the ELF object; set `rodata` (name -> int, bytes or cffi
        struct) before load.  `pin_root`: where maps declared with
        LIBBPF_PIN_BY_NAME are pinned (libbpf's default /sys/fs/bpf)."""
        path = os.fspath(path)
        log = _Log()
        out = ffi.new("struct bpf_object **")
        rc = lib.hpccd_bpf_object_open(os.fsencode(path),
                                       os.fsencode(pin_root) if pin_root else ffi.NULL,
                                       out, log.c)
        _check(rc, f"open BPF object {path}", log.text())
        obj = cls(out[0], path)
        try:
            if rodata:
                obj.set_rodata(rodata)
        except BaseException:
            obj.close()
            raise
        return obj

    closed = property(lambda self: self._ptr is None)

    def _live(self):
        if self._ptr is None:
            _check(-errno.EBADF, f"BPF object {self.path}: closed")
        return self._ptr

    def rodata_size(self, name: str) -> int:
        return _check(lib.hpccd_bpf_rodata_size(self._live(), name.encode()),
                      f"{self.path}: const volatile variable {name!r}")

    def set_rodata(self, values: Mapping[str, Any]) -> None:
        for name, value in values.items():
            what = f"{self.path}: const volatile variable {name!r}"
            if self.loaded:
                _check(-errno.EBUSY, f"{what}: the object is loaded already")
            size = self.rodata_size(name)
            buf = ffi.from_buffer("char[]", _as_bytes(value, size, what))
            _check(lib.hpccd_bpf_rodata_set(self._live(), name.encode(), buf, size), what)

    def load(self) -> "BpfObject":
        """Load every program and create every map; a verifier rejection
        raises BpfError carrying the verifier log."""
        log = _Log()
        rc = lib.hpccd_bpf_object_load(self._live(), log.c)
        _check(rc, f"load BPF object {self.path}", log.text())
        self.loaded = True
        return self

    def program_names(self) -> list[str]:
        names, p = [], ffi.NULL
        while True:
            p = lib.hpccd_bpf_object_next_program(self._live(), p)
            if p == ffi.NULL:
                return names
            names.append(_cstr(lib.hpccd_bpf_program_name(p)))

    def map_names(self) -> list[str]:
        names, m = [], ffi.NULL
        while True:
            m = lib.hpccd_bpf_object_next_map(self._live(), m)
            if m == ffi.NULL:
                return names
            names.append(_cstr(lib.hpccd_bpf_map_name(m)))

    def program(self, name: str) -> Program:
        p = lib.hpccd_bpf_object_program(self._live(), name.encode())
        if p == ffi.NULL:
            _check(-errno.ENOENT, f"{self.path}: no program {name!r} "
                                  f"(has {', '.join(self.program_names()) or 'none'})")
        fd = lib.hpccd_bpf_program_fd(p)
        _check(fd if self.loaded else -errno.EBADF, f"{self.path}: program {name!r} not loaded")
        return Program(fd, name, owner=self)

    def _map_ptr(self, name: str):
        m = lib.hpccd_bpf_object_map(self._live(), name.encode())
        if m == ffi.NULL:
            _check(-errno.ENOENT, f"{self.path}: no map {name!r} "
                                  f"(has {', '.join(self.map_names()) or 'none'})")
        return m

    def map(self, name: str) -> Map:
        m = self._map_ptr(name)
        fd = lib.hpccd_bpf_map_fd(m)
        _check(fd if self.loaded else -errno.EBADF, f"{self.path}: map {name!r} not created")
        return Map(fd, name, owner=self)

    def attach_struct_ops(self, map_name: str) -> Link:
        """Register the struct_ops map `map_name` (e.g. a TCP congestion control)."""
        m = self._map_ptr(map_name)
        log = _Log(size=64 << 10)
        out = ffi.new("struct bpf_link **")
        rc = lib.hpccd_bpf_struct_ops_attach(m, out, log.c)
        _check(rc, f"{self.path}: register struct_ops {map_name!r}", log.text())
        link = Link(out[0], map_name)
        self._links.append(link)
        return link

    def attach_program(self, name: str) -> Link:
        """Attach program `name` where its section says (tp_btf/..., fentry/...);
        the attachment lasts while the link (or a pin of it) does."""
        self.program(name)                      # ENOENT / not loaded, with the names
        p = lib.hpccd_bpf_object_program(self._live(), name.encode())
        log = _Log(size=64 << 10)
        out = ffi.new("struct bpf_link **")
        rc = lib.hpccd_bpf_program_attach(p, out, log.c)
        _check(rc, f"{self.path}: attach program {name!r}", log.text())
        link = Link(out[0], name)
        self._links.append(link)
        return link

    def reuse_map(self, name: str, m: "Map") -> None:
        """Before load: map `name` of this object is the existing map `m`
        (another object's, or a pinned one) instead of a new one."""
        what = f"{self.path}: map {name!r} as the existing map {m.name!r}"
        if self.loaded:
            _check(-errno.EBUSY, f"{what}: the object is loaded already")
        _check(lib.hpccd_bpf_map_reuse_fd(self._map_ptr(name), m.fd), what)

    def close(self) -> None:
        if self._ptr is None:
            return
        try:
            for link in self._links:
                link.destroy()
        finally:
            self._links.clear()
            ptr, self._ptr = self._ptr, None
            lib.hpccd_bpf_object_close(ptr)

    def __enter__(self) -> "BpfObject":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<BpfObject {self.path}{' loaded' if self.loaded else ''}>"


# ---- ownership -----------------------------------------------------------------

def _prog_name(prog_id: int) -> str | None:
    """The kernel's name of program `prog_id`, or None if it is gone."""
    fd = lib.hpccd_bpf_prog_fd_by_id(prog_id)
    if fd == -errno.ENOENT:
        return None
    _check(fd, f"BPF program id {prog_id}")
    try:
        info = ffi.new("struct hpccd_bpf_prog_info *")
        _check(lib.hpccd_bpf_prog_info(fd, info), f"info of BPF program id {prog_id}")
        return _cstr(info.name)
    finally:
        os.close(fd)


def _refuse_foreign(prog_id: int, name: str | None, prefix: str, force: bool, where: str) -> None:
    if force or name is None or name.startswith(prefix):
        return
    _check(-errno.EBUSY, f"{where}: foreign program {name!r} (id {prog_id}) is attached; "
                         f"not replacing it without force=True")


# ---- XDP ---------------------------------------------------------------------

class XdpState(NamedTuple):
    native: int | None
    skb: int | None
    hw: int | None


def _nl_log() -> _Log:
    """Room for the kernel's extended ack of one netlink request."""
    return _Log(size=4096, level=lib.HPCCD_BPF_LOG_WARN)


def _xdp_state(ifindex: int) -> XdpState:
    st = ffi.new("struct hpccd_bpf_xdp_state *")
    log = _nl_log()
    _check(lib.hpccd_bpf_xdp_query(ifindex, st, log.c), f"xdp query on {_ifdesc(ifindex)}",
           log.text())
    return XdpState(st.drv_prog_id or None, st.skb_prog_id or None, st.hw_prog_id or None)


def _xdp_by_mode(state: XdpState) -> dict[int, int | None]:
    return {lib.HPCCD_BPF_XDP_DRV_MODE: state.native, lib.HPCCD_BPF_XDP_SKB_MODE: state.skb,
            lib.HPCCD_BPF_XDP_HW_MODE: state.hw}


def _xdp_mode(mode: str) -> int:
    if mode not in _XDP_MODES:
        _check(-errno.EINVAL, f"xdp mode {mode!r} (one of {', '.join(_XDP_MODES)})")
    return _XDP_MODES[mode]


def xdp_query(iface: str | int, mode: str | None = None) -> int | None:
    """Id of the XDP program on `iface` (in `mode`, or in any mode), or None."""
    state = _xdp_state(_ifindex(iface))
    if mode is not None:
        return _xdp_by_mode(state)[_xdp_mode(mode)]
    return state.native or state.skb or state.hw


def _xdp_swap(ifindex: int, prog_fd: int, flags: int, old_id: int | None, what: str) -> None:
    """Attach `prog_fd` (or detach, with -1) in the mode of `flags`.  With
    `old_id` the kernel swaps only if that program is still the one attached
    (XDP_FLAGS_REPLACE), else only if none is (XDP_FLAGS_UPDATE_IF_NOEXIST)."""
    old_fd = -1
    if old_id is not None:
        old_fd = _check(lib.hpccd_bpf_prog_fd_by_id(old_id), f"{what}: program id {old_id}")
    elif prog_fd >= 0:
        flags |= lib.HPCCD_BPF_XDP_UPDATE_IF_NOEXIST
    try:
        log = _nl_log()
        rc = (lib.hpccd_bpf_xdp_attach(ifindex, prog_fd, flags, old_fd, log.c) if prog_fd >= 0
              else lib.hpccd_bpf_xdp_detach(ifindex, flags, old_fd, log.c))
        _check(rc, what, log.text())
    finally:
        if old_fd >= 0:
            os.close(old_fd)


def xdp_attach(iface: str | int, prog: Program, mode: str = "native", replace: bool = True,
               force: bool = False, name_prefix: str = NAME_PREFIX) -> None:
    """Attach `prog` to `iface` in `mode` ("native"/"drv" or "skb"/"generic").

    Idempotent: nothing happens when `prog` is already there in that mode.
    Our program (kernel name starts with `name_prefix`) in the way is
    replaced: atomically in the same mode, by detach-then-attach from the
    other mode (the kernel allows one of native and skb at a time).  With
    `replace=False` a different program in the way raises EEXIST; a foreign
    one raises EBUSY unless `force`."""
    ifindex = _ifindex(iface)
    flag = _xdp_mode(mode)
    where = f"xdp attach of {prog.name} (id {prog.id}) to {_ifdesc(ifindex)} in {mode} mode"
    by_mode = _xdp_by_mode(_xdp_state(ifindex))
    cur = by_mode.pop(flag)
    for other_flag, other_id in by_mode.items():
        if other_id is None:
            continue
        if other_id != prog.id:
            _refuse_foreign(other_id, _prog_name(other_id), name_prefix, force, where)
            if not replace:
                _check(-errno.EEXIST, f"{where}: program id {other_id} is attached in "
                                      f"{_XDP_MODE_NAMES[other_flag]} mode (replace=False)")
        _xdp_swap(ifindex, -1, other_flag, other_id,
                  f"{where}: detach id {other_id} from {_XDP_MODE_NAMES[other_flag]} mode")
    if cur == prog.id:
        return
    if cur is not None:
        _refuse_foreign(cur, _prog_name(cur), name_prefix, force, where)
        if not replace:
            _check(-errno.EEXIST, f"{where}: program id {cur} is attached (replace=False)")
    _xdp_swap(ifindex, prog.fd, flag, cur, where)


def native_xdp_drops(iface: str | int) -> str | None:
    """What goes wrong with native XDP on `iface`, or None.  A veth sends
    into its peer's XDP ring when the peer runs native XDP; when that ring
    is full, a veth with a qdisc stops its queue and the sender waits
    (AF_XDP's sendto() says EAGAIN and keeps the descriptor), a veth whose
    root qdisc is noqueue (veth's default) drops the frame, counted only
    in its TX "dropped" -- a transport flow's retransmissions are the only
    other trace.  Native XDP on a veth is what both ends of a transport
    pair run, so `iface`'s own qdisc is checked (docs/transport.md "Native
    XDP on a veth needs a qdisc").  Current namespace."""
    from pyroute2 import IPRoute

    ifindex = _ifindex(iface)
    with IPRoute() as ipr:
        info = ipr.get_links(ifindex)[0].get_attr("IFLA_LINKINFO")
        if not info or info.get_attr("IFLA_INFO_KIND") != "veth":
            return None
        roots = [q.get_attr("TCA_KIND") for q in ipr.get_qdiscs(index=ifindex)
                 if q.get("parent") == 0xFFFFFFFF]               # TC_H_ROOT
    if roots and roots[0] != "noqueue":
        return None
    return (f"{_ifdesc(ifindex)} is a veth without a qdisc (noqueue): with native XDP at "
            f"its peer it drops what the peer's ring cannot take at once, and flows "
            f"retransmit it; give both ends one (tc qdisc replace dev IFACE root pfifo), "
            f"or use skb mode")


def xdp_detach(iface: str | int, mode: str | None = None,
               only_prefix: str | None = None) -> list[int]:
    """Remove the XDP program(s) from `iface` in `mode`, or in every mode;
    with `only_prefix`, only programs whose kernel name starts with it.
    Returns the ids removed; nothing attached is not an error."""
    ifindex = _ifindex(iface)
    want = None if mode is None else _xdp_mode(mode)
    removed = []
    for flag, prog_id in _xdp_by_mode(_xdp_state(ifindex)).items():
        if prog_id is None or (want is not None and flag != want):
            continue
        if only_prefix is not None:
            name = _prog_name(prog_id)
            if name is None or not name.startswith(only_prefix):
                continue
        try:
            _xdp_swap(ifindex, -1, flag, prog_id,
                      f"xdp detach of id {prog_id} from {_ifdesc(ifindex)} "
                      f"({_XDP_MODE_NAMES[flag]} mode)")
        except BpfError as e:
            if e.errno not in (errno.ENOENT, errno.EEXIST):   # gone or replaced meanwhile
                raise
            continue
        removed.append(prog_id)
    return removed


# ---- tc ------------------------------------------------------------------------

class TcFilter(NamedTuple):
    direction: str
    handle: int
    priority: int
    prog_id: int
    name: str        # the program's kernel name ("" if gone)


def _tc_args(direction: str, handle: int, priority: int) -> int:
    if direction not in _TC_DIRS:
        _check(-errno.EINVAL, f"tc direction {direction!r} (ingress or egress)")
    if not (0 < handle <= 0xFFFFFFFF and 0 < priority <= 0xFFFF):
        _check(-errno.EINVAL, f"tc handle {handle} / priority {priority}: "
                              "need 1..2^32-1 and 1..65535")
    return _TC_DIRS[direction]


def tc_query(iface: str | int, direction: str = "egress", handle: int = 1,
             priority: int = 1) -> int | None:
    """Id of the program in the tc filter (handle, priority), or None."""
    ifindex = _ifindex(iface)
    d = _tc_args(direction, handle, priority)
    pid = ffi.new("uint32_t *")
    log = _nl_log()
    rc = lib.hpccd_bpf_tc_query(ifindex, d, handle, priority, pid, log.c)
    if rc == -errno.ENOENT:
        return None
    _check(rc, f"tc query on {_ifdesc(ifindex)} {direction} handle {handle} prio {priority}",
           log.text())
    return pid[0]


def tc_attach(iface: str | int, prog: Program, direction: str = "egress", handle: int = 1,
              priority: int = 1, replace: bool = True, force: bool = False,
              name_prefix: str = NAME_PREFIX) -> None:
    """Attach `prog` as a direct-action tc filter on the clsact qdisc of
    `iface` (created if missing), at (handle, priority).

    Idempotent: nothing happens when `prog` is already there.  Our program
    at that place is replaced (EEXIST with `replace=False`); a foreign one
    raises EBUSY unless `force`."""
    ifindex = _ifindex(iface)
    d = _tc_args(direction, handle, priority)
    where = (f"tc attach of {prog.name} (id {prog.id}) to {_ifdesc(ifindex)} {direction} "
             f"handle {handle} prio {priority}")
    log = _nl_log()
    _check(lib.hpccd_bpf_tc_hook_create(ifindex, log.c), f"{where}: create clsact", log.text())
    cur = tc_query(ifindex, direction, handle, priority)
    if cur == prog.id:
        return
    if cur is not None:
        _refuse_foreign(cur, _prog_name(cur), name_prefix, force, where)
        if not replace:
            _check(-errno.EEXIST, f"{where}: program id {cur} is there (replace=False)")
    pid = ffi.new("uint32_t *")
    log = _nl_log()
    _check(lib.hpccd_bpf_tc_attach(ifindex, d, handle, priority, prog.fd,
                                   cur is not None, pid, log.c), where, log.text())


def tc_detach(iface: str | int, direction: str = "egress", handle: int = 1,
              priority: int = 1) -> bool:
    """Remove the tc filter (handle, priority); False if there was none.
    The clsact qdisc stays (other filters may share it): see tc_remove_clsact."""
    ifindex = _ifindex(iface)
    d = _tc_args(direction, handle, priority)
    log = _nl_log()
    rc = lib.hpccd_bpf_tc_detach(ifindex, d, handle, priority, log.c)
    if rc in (-errno.ENOENT, -errno.EINVAL):    # no such filter / no clsact at all
        return False
    _check(rc, f"tc detach from {_ifdesc(ifindex)} {direction} handle {handle} prio {priority}",
           log.text())
    return True


def _tc_dump(ifindex: int) -> list[tuple[str, int, int, str]]:
    """(direction, handle, priority, kind) of every filter on clsact, from a
    netlink dump through pyroute2 (libbpf cannot enumerate filters)."""
    from pyroute2 import IPRoute
    from pyroute2.netlink.exceptions import NetlinkError

    places = set()
    with IPRoute() as ipr:
        for direction, parent in _TC_PARENTS.items():
            try:
                msgs = ipr.get_filters(index=ifindex, parent=parent)
            except NetlinkError as e:
                if e.code in (errno.EINVAL, errno.ENOENT):    # no clsact
                    continue
                _check(-e.code, f"tc filter dump on {_ifdesc(ifindex)} {direction}")
            for m in msgs:
                # the first message of a chain has handle 0 and names no filter
                if m["handle"]:
                    places.add((direction, m["handle"], m["info"] >> 16,
                                m.get_attr("TCA_KIND") or ""))
    return sorted(places)


def tc_list(iface: str | int) -> list[TcFilter]:
    """Every BPF filter on the clsact qdisc of `iface`, in the calling
    thread's network namespace.  The places come from a pyroute2 dump, each
    program id from libbpf's tc query (pyroute2 0.9 does not decode
    TCA_BPF_ID)."""
    ifindex = _ifindex(iface)
    found = []
    for direction, handle, priority, kind in _tc_dump(ifindex):
        if kind != "bpf":
            continue
        prog_id = tc_query(ifindex, direction, handle, priority)
        if prog_id:
            found.append(TcFilter(direction, handle, priority, prog_id,
                                  _prog_name(prog_id) or ""))
    return found


def tc_remove_clsact(iface: str | int, only_if_empty: bool = True) -> bool:
    """Remove the clsact qdisc of `iface` and every filter on it; with
    `only_if_empty`, only when no filter of any kind is left on it (checked
    just before, not atomically).  Returns whether it removed it."""
    ifindex = _ifindex(iface)
    if only_if_empty and _tc_dump(ifindex):
        return False
    log = _nl_log()
    _check(lib.hpccd_bpf_tc_hook_destroy(ifindex, log.c),
           f"remove clsact from {_ifdesc(ifindex)}", log.text())
    return True


# ---- bpffs, pins and crash clean-up -------------------------------------------

def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _mounts() -> list[tuple[str, str]]:
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            mnt = left.split()[4].encode().decode("unicode_escape")
            out.append((mnt, right.split()[0]))
    return out


def _fstype(path: str) -> str | None:
    """Filesystem type of the mount holding `path` (longest mount prefix)."""
    path = os.path.realpath(path)
    best, kind = "", None
    for mnt, fs in _mounts():
        if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
            best, kind = mnt, fs
    return kind


def ensure_bpffs(path: str = BPFFS) -> bool:
    """Mount bpffs at `path` unless one is there (mount(2), no shell).
    Returns True if it mounted one."""
    if any(mnt == path and fs == "bpf" for mnt, fs in _mounts()):
        return False
    os.makedirs(path, exist_ok=True)
    libc = _libc()
    rc = libc.mount(b"bpf", os.fsencode(path), b"bpf", 0, b"mode=0700")
    _check(-ctypes.get_errno() if rc else 0, f"mount bpffs at {path}")
    return True


def unpin_tree(pin_dir: str) -> list[str]:
    """Remove everything pinned under `pin_dir`, and the directory itself."""
    if not os.path.isdir(pin_dir):
        return []
    if _fstype(pin_dir) != "bpf":
        _check(-errno.EINVAL, f"unpin {pin_dir}: not on a bpffs, refusing to remove files")
    removed = []
    for root, dirs, files in os.walk(pin_dir, topdown=False):
        for f in files:
            p = os.path.join(root, f)
            os.unlink(p)
            removed.append(p)
        for d in dirs:
            os.rmdir(os.path.join(root, d))
    os.rmdir(pin_dir)
    return removed


def _stale_struct_ops(prefix: str) -> list[str]:
    """Unregister every struct_ops map whose name starts with `prefix`."""
    removed = []
    start = 0
    nxt = ffi.new("uint32_t *")
    while lib.hpccd_bpf_map_next_id(start, nxt) == 0:
        start = nxt[0]
        fd = lib.hpccd_bpf_map_fd_by_id(start)
        if fd == -errno.ENOENT:
            continue
        _check(fd, f"BPF map id {start}")
        try:
            info = ffi.new("struct hpccd_bpf_map_info *")
            _check(lib.hpccd_bpf_map_info(fd, info), f"info of BPF map id {start}")
            name = _cstr(info.name)
            if info.type != lib.HPCCD_BPF_MAP_TYPE_STRUCT_OPS or not name.startswith(prefix):
                continue
            rc = lib.hpccd_bpf_struct_ops_unregister(fd)
            # not registered, or no longer: EINPROGRESS is a map unregistered
            # already and kept until the sockets that run its CC let it go
            if rc not in (-errno.ENOENT, -errno.EINVAL, -errno.EINPROGRESS):
                _check(rc, f"unregister stale struct_ops {name} (map id {start})")
                removed.append(name)
        finally:
            os.close(fd)
    return removed


def cleanup_stale(ifaces: list[str | int], name_prefix: str = NAME_PREFIX,
                  pin_dir: str | None = PIN_DIR, struct_ops: bool = True) -> dict[str, list]:
    """Remove what a dead hpccd process left behind: XDP programs and tc
    filters named `name_prefix`* on `ifaces` (in the calling thread's
    network namespace), everything pinned under `pin_dir`, and (with
    `struct_ops`) registered struct_ops maps named `name_prefix`*, which are
    host-wide.  Call it at start-up, before attaching anything: it cannot
    tell a dead process's programs from a live one's.  Returns what it removed."""
    done: dict[str, list] = {"xdp": [], "tc": [], "pins": [], "struct_ops": []}
    for iface in ifaces:
        ifindex = _ifindex(iface)
        for prog_id in xdp_detach(ifindex, only_prefix=name_prefix):
            done["xdp"].append((ifindex, prog_id))
        for f in tc_list(ifindex):
            if f.name.startswith(name_prefix) and tc_detach(ifindex, f.direction, f.handle,
                                                            f.priority):
                done["tc"].append((ifindex, f))
    if pin_dir:
        done["pins"] = unpin_tree(pin_dir)
    if struct_ops:
        done["struct_ops"] = _stale_struct_ops(name_prefix)
    return done


def object_path(name: str) -> str:
    """Path of the compiled BPF object `name` ("int_switch" ->
    OBJ_DIR/int_switch.bpf.o); BpfError ENOENT naming the build step if it
    is not there."""
    path = os.path.join(OBJ_DIR, f"{name}.bpf.o")
    if not os.path.exists(path):
        _check(-errno.ENOENT, f"BPF object {path} (built by `make bpf`)")
    return path


# ---- network namespaces ---------------------------------------------------------

def _setns(fd: int, what: str) -> None:
    rc = _libc().setns(fd, _CLONE_NEWNET)
    _check(-ctypes.get_errno() if rc else 0, what)


@contextlib.contextmanager
def in_netns(name: str) -> Iterator[None]:
    """Run the block with the calling thread in network namespace `name`
    (/run/netns/NAME, or an absolute path), and return to the original
    namespace afterwards, also on exceptions.  libbpf's XDP and tc calls,
    interface names and sockets opened in the block act in that namespace;
    other threads are not affected."""
    path = name if name.startswith("/") else f"/run/netns/{name}"
    try:
        target = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        _check(-(e.errno or errno.ENOENT), f"network namespace {name!r}")
        raise
    try:
        orig = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        try:
            _setns(target, f"enter network namespace {name!r}")
            try:
                yield
            finally:
                _setns(orig, f"return from network namespace {name!r}")
        finally:
            os.close(orig)
    finally:
        os.close(target)
