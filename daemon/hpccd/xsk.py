"""AF_XDP socket of the native transport: thin wrapper of ``hpccd._xsk``
(cffi_build/xsk/xsk_rx.c, contract in include/hpccd/xsk.h).

Python only creates, starts, stops, reads and destroys the socket; the
frames are received by a native RX thread that waits in poll() (never on
the per-packet path, never spinning)::

    with bpf.in_netns(ns):                      # the interface's namespace
        sock = XskSocket("eth0", queue_id=0)    # UMEM + socket, bound
    xsks_map.update(0, sock.fd)                 # xdp_host steers queue 0 to it
    sock.start()
    ...
    sock.stats(), sock.recent()
    sock.close()                                # stops, unbinds, frees

The socket is bound in the calling thread's network namespace (enter it
with :func:`hpccd.bpf.in_netns`); the RX thread needs no namespace.  The
XDP program is the loader's business: the socket never loads one.

Errors: a failing call raises :class:`XskError` (an ``OSError`` with the
kernel's or the library's errno) whose message names the interface and
queue and what failed; return codes become exceptions in :func:`_check`
and nowhere else.  The C calls release the GIL (cffi does), and one lock
per socket serialises the calls on it, so that ``close()`` from one thread
cannot free what ``stats()`` reads in another.
"""
from __future__ import annotations

import errno
import os
import threading
from typing import Any

from ._xsk import ffi, lib

__all__ = ["XskError", "XskSocket", "MODES", "TYPE_NAMES"]

# mode -> bind flags: copy forces copy mode, zerocopy forces zero-copy
# (EOPNOTSUPP where the driver cannot, e.g. veth), auto lets the kernel
# take zero-copy when it can.
MODES = {"copy": lib.HPCCD_XSK_F_COPY, "zerocopy": lib.HPCCD_XSK_F_ZEROCOPY, "auto": 0}
# enum hpccd_type (include/hpccd/wire.h)
TYPE_NAMES = {1: "DATA", 2: "ACK", 3: "NACK", 4: "PROBE", 5: "PROBE_RESP", 6: "NOTIFY"}
NOT_HPCCD = -2                       # HPCCD_WIRE_NOT_HPCCD, a summary's "cls"
_RECENT_MAX = 1 << 16


class XskError(OSError):
    """An AF_XDP socket call failed.  ``errno`` is the kernel's (or -errno
    of the C library); ``what`` says what failed on which interface/queue."""

    def __init__(self, err: int, what: str):
        super().__init__(err, f"{what}: {os.strerror(err)}")
        self.what = what

    def __str__(self) -> str:
        return self.strerror


def _check(rc: int, what: str) -> int:
    """The one place where a negative errno becomes an exception."""
    if rc < 0:
        raise XskError(-rc, what)
    return rc


def _cstr(p) -> str:
    return ffi.string(p).decode(errors="replace") if p != ffi.NULL else ""


class XskSocket:
    """One UMEM and one AF_XDP socket on ``ifname``'s rx queue ``queue_id``
    (see the module docstring).  A context manager; ``close()`` is
    idempotent and also stops the RX thread."""

    def __init__(self, ifname: str, queue_id: int = 0, frames: int = 4096,
                 frame_size: int = 4096, mode: str = "copy", need_wakeup: bool = True,
                 hugepages: bool = False, udp_port: int | None = None,
                 probe_dscp: int | None = None):
        self._lock = threading.Lock()
        self._x = ffi.NULL
        self.ifname, self.queue_id = ifname, queue_id
        where = f"{ifname} queue {queue_id}"
        if mode not in MODES:
            _check(-errno.EINVAL, f"{where}: mode {mode!r}, expected one of {sorted(MODES)}")
        flags = MODES[mode]
        if need_wakeup:
            flags |= lib.HPCCD_XSK_F_NEED_WAKEUP
        if hugepages:
            flags |= lib.HPCCD_XSK_F_HUGEPAGES
        out = ffi.new("struct hpccd_xsk **")
        err = ffi.new("char[]", lib.HPCCD_XSK_ERR_MAX)
        rc = lib.hpccd_xsk__create(os.fsencode(ifname), queue_id, frames, frame_size, flags,
                                   out, err, lib.HPCCD_XSK_ERR_MAX)
        _check(rc, _cstr(err) or f"{where}: create")
        self._x = out[0]
        if udp_port is not None or probe_dscp is not None:
            try:
                info = self.info()
                self._call(lib.hpccd_xsk__set_wire, udp_port or info["udp_port"],
                           info["probe_dscp"] if probe_dscp is None else probe_dscp)
            except BaseException:
                self.close()
                raise

    # -- plumbing ---------------------------------------------------------------

    def _live(self):
        if self._x == ffi.NULL:
            _check(-errno.EBADF, f"{self.ifname} queue {self.queue_id}: socket closed")
        return self._x

    def _call(self, fn, *args) -> int:
        """fn(x, *args) under the lock; a negative return raises with the
        socket's own message."""
        with self._lock:
            x = self._live()
            rc = fn(x, *args)
            if rc < 0:
                _check(rc, _cstr(lib.hpccd_xsk__error(x)) or
                       f"{self.ifname} queue {self.queue_id}: {fn.__name__}")
            return rc

    # -- API ----------------------------------------------------------------------

    @property
    def fd(self) -> int:
        """The socket's fd: the value to put into the XSKMAP hpccd_xsks at
        key queue_id."""
        with self._lock:
            return lib.hpccd_xsk__fd(self._live())

    def start(self) -> None:
        """Start the native RX thread (the sink handler: parse, count,
        remember the recent frames)."""
        self._call(lib.hpccd_xsk__start, lib.HPCCD_XSK_RX_SINK)

    def stop(self) -> None:
        """Stop and join the RX thread (at once: it is woken, not waited
        for).  Raises if the thread had stopped on an error of its own."""
        self._call(lib.hpccd_xsk__stop)

    def stats(self) -> dict[str, Any]:
        """Counters (include/hpccd/xsk.h struct hpccd_xsk_stats): by_type is
        keyed by type name, by_class by malformed class 1..10; k_* are the
        kernel's XDP_STATISTICS."""
        s = ffi.new("struct hpccd_xsk_stats *")
        self._call(lib.hpccd_xsk__stats, s)
        d = {name: getattr(s, name) for name, _ in ffi.typeof(s[0]).fields}
        d["by_type"] = {TYPE_NAMES[t]: s.by_type[t] for t in TYPE_NAMES}
        d["by_class"] = {c: s.by_class[c] for c in range(1, lib.HPCCD_XSK_N_CLASSES)}
        d["running"] = bool(s.running)
        return d

    def recent(self, n: int | None = None) -> list[dict[str, Any]]:
        """Summaries of the last n (default: all kept) received frames,
        oldest first: index, rx_ns, cls (0 valid, 1..10 malformed class,
        -2 not hpccd), type, flags, flow_id, seq, ack, len, payload_len."""
        if n is None:
            n = self.info()["recent_cap"]
        n = max(0, min(n, _RECENT_MAX))
        buf = ffi.new("struct hpccd_xsk_rx_summary[]", max(n, 1))
        got = self._call(lib.hpccd_xsk__recent, buf, n)
        fields = [name for name, _ in ffi.typeof("struct hpccd_xsk_rx_summary").fields]
        return [{f: getattr(buf[i], f) for f in fields} for i in range(got)]

    def reset(self) -> None:
        """Zero the counters and forget the recent frames (not the kernel's counters)."""
        self._call(lib.hpccd_xsk__reset)

    def info(self) -> dict[str, Any]:
        """What the socket is (struct hpccd_xsk_info): ifindex, ring sizes,
        zerocopy, hugepages, the parser's port and DSCP ..."""
        i = ffi.new("struct hpccd_xsk_info *")
        self._call(lib.hpccd_xsk__info, i)
        d = {name: getattr(i, name) for name, _ in ffi.typeof(i[0]).fields if name != "pad"}
        d["zerocopy"], d["hugepages"] = bool(i.zerocopy), bool(i.hugepages)
        return d

    def close(self) -> None:
        """Stop the RX thread, close the socket (which leaves the XSKMAP),
        free the UMEM.  Idempotent."""
        with self._lock:
            x, self._x = self._x, ffi.NULL
            if x != ffi.NULL:
                lib.hpccd_xsk__destroy(x)

    @property
    def closed(self) -> bool:
        return self._x == ffi.NULL

    def __enter__(self) -> "XskSocket":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_lock", None) is not None:
            self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"fd={lib.hpccd_xsk__fd(self._x)}"
        return f"<XskSocket {self.ifname} queue {self.queue_id} {state}>"
