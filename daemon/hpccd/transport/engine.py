"""The native hpccd transport over AF_XDP: thin wrapper of ``hpccd._transport``
(fastpath/transport/transport.c, contract in include/hpccd/transport.h, design and
figures in docs/transport.md).

One :class:`Transport` per interface queue of a host: it loads and attaches
xdp_host (which steers hpccd packets to the engine's AF_XDP socket), creates
the engine (UMEM, RX/TX rings) and starts its native thread.  Python opens
flows and reads their state; it is never on the per-packet path::

    with Transport("eth0", netns="lab-h1") as tp:            # the sender host
        flow = tp.open_flow("10.111.0.18", nbytes=100_000_000, algo="hpcc",
                            hpcc={"T_ns": 200_000}, line_rate_bps=2_000_000_000)
        res = flow.wait(timeout=30)                         # FlowResult: fct_s, ...

    with Transport("eth0", netns="lab-r1") as rx:           # the receiver host
        rx.wait_rx(1, timeout=30)                            # [RxFlow(crc32=..., ...)]

The receiver side is always on: DATA of any sender creates a receiver flow
that delivers the byte stream in order to the engine's sink (CRC-32 and
discard, or a file).  Errors raise :class:`TransportError` (an ``OSError``)
whose message names the interface and queue, or the flow; negative return
codes become exceptions in :func:`_check` only.
"""
from __future__ import annotations

import dataclasses
import errno
import ipaddress
import mmap
import os
import pathlib
import random
import socket
import threading
import time
import warnings
from typing import Any, Iterator, Mapping

from .._bpf import lib as abi         # the kernel/user ABI (include/hpccd/kern_user.h)
from .._cc import ffi as _cc_ffi, lib as _cc_lib
from .._transport import ffi, lib
from ..core import algorithms

__all__ = ["Transport", "Engines", "Flow", "FlowResult", "RxFlow", "TransportError", "ALGOS",
           "pattern_bytes", "pattern_crc32", "crc32", "repeat_crc32", "engine_cpu",
           "engine_cpu_ns", "engine_cpu_s", "XDP_HOST"]

# enum hpccd_algo by name (hpccd.core.algorithms; the same header as the engine's).
ALGOS = {a.name: a.enum for a in algorithms.ALGORITHMS.values()}
ALGO_NAMES = {v: k for k, v in ALGOS.items()}
STATES = {0: "free", 1: "running", 2: "done", 3: "failed"}
DRIVES = ("thread", "caller")         # who runs the engine's loop (docs/transport.md)
_NO_RX = (1 << 64) - 1                # hpccd_tp__run: receiver flows not waited for
MODES = {"copy": lib.HPCCD_TP_F_COPY, "zerocopy": lib.HPCCD_TP_F_ZEROCOPY, "auto": 0}
ROOT = pathlib.Path(__file__).resolve().parents[3]
XDP_HOST = ROOT / "build" / "ebpf" / "xdp_host.bpf.o"
INT_MODES = ("every", "none", "probe")    # or N: every Nth data packet
RECOVERY = {"sr": lib.HPCCD_TP_SR, "gbn": lib.HPCCD_TP_GBN}   # enum hpccd_tp_recovery
# The eight hpccd types and ten malformed classes of the stats arrays.
# enum hpccd_type (include/hpccd/wire.h) by value: the stats' by_type names.
TYPE_NAMES = dict(sorted((v, k.removeprefix("HPCCD_T_"))
                         for k, v in _cc_ffi.typeof("enum hpccd_type").relements.items()
                         if k != "HPCCD_T_MAX"))
# struct hpccd_tp_config's tag_key (the SipHash key of include/hpccd/wire.h)
TAG_KEY_BYTES = ffi.sizeof(ffi.new("struct hpccd_tp_config *").tag_key)


class TransportError(OSError):
    """A transport call failed; ``what`` names the interface/queue or flow."""

    def __init__(self, err: int, what: str):
        super().__init__(err, f"{what}: {os.strerror(err)}")
        self.what = what

    def __str__(self) -> str:
        return self.strerror


def _check(rc: int, what: str) -> int:
    """The one place where a negative errno becomes an exception."""
    if rc < 0:
        raise TransportError(-rc, what)
    return rc


def _cstr(p) -> str:
    return ffi.string(p).decode(errors="replace") if p != ffi.NULL else ""


#: The receiver flows rx_flows() first makes room for (grown as needed).
RX_LIST_ROOM = 64


def _struct_dict(obj) -> dict[str, Any]:
    out = {}
    for name, f in ffi.typeof(obj).fields:
        if name.startswith("pad"):
            continue
        v = getattr(obj, name)
        if name == "int_hops":          # the last INT's hops (struct hpccd_int_rec), in use
            v = [{"ts_ns": h.ts_ns, "tx_bytes": h.tx_bytes, "qlen_bytes": h.qlen_bytes,
                  "bw_bps": h.bw_bps} for h in v[0:obj.int_nhops]]
        elif f.type.kind == "array":
            v = list(v)
        out[name] = v
    return out


def _apply(cstruct, values: Mapping[str, Any] | None, what: str) -> None:
    for k, v in (values or {}).items():
        if not hasattr(cstruct, k):
            raise ValueError(f"{what}: unknown parameter {k!r}")
        setattr(cstruct, k, v)


def umem_frames(umem_bytes: int, frame_bytes: int) -> dict[str, int]:
    """An engine's UMEM of `umem_bytes` as its config's RX and TX frames of
    `frame_bytes` (half each, TX the odd one): the daemon's
    limits.umem_bytes per queue, and hpccctl send / recv's --umem-bytes."""
    frames = umem_bytes // frame_bytes
    return {"rx_frames": frames // 2, "tx_frames": frames - frames // 2}


# ---- the generated byte stream and the receiver's checksum ------------------------

def pattern_bytes(seed: int, offset: int, n: int) -> bytes:
    """Bytes [offset, offset + n) of the generated stream of a flow with `seed`."""
    buf = ffi.new("uint8_t[]", max(n, 1))
    lib.hpccd_tp_pattern_fill(seed, offset, buf, n)
    return bytes(ffi.buffer(buf, n))


def _engine_task_files(name: str) -> Iterator[str]:
    """The text of /proc/self/task/TID/`name` of each of this process's
    engine threads (hpccd-tp); a thread that ends meanwhile is left out."""
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                if f.read().strip() != "hpccd-tp":
                    continue
            with open(f"/proc/self/task/{tid}/{name}") as f:
                yield f.read()
        except OSError:
            pass                            # a thread that just ended


def engine_cpu() -> tuple[float, float]:
    """(user, system) CPU seconds of this process's engine threads
    (hpccd-tp) so far, from /proc/self/task: user is the engines' own work
    (checksums, CRC, the stream), system the kernel's in their syscalls (the
    copies and the forwarding of copy mode); in clock ticks (10 ms)."""
    hz = os.sysconf("SC_CLK_TCK")
    user = sys_ = 0
    for text in _engine_task_files("stat"):
        fs = text.rsplit(")", 1)[1].split()
        user, sys_ = user + int(fs[11]), sys_ + int(fs[12])
    return user / hz, sys_ / hz


def engine_cpu_ns() -> int:
    """CPU nanoseconds (user + system) of this process's engine threads so
    far, from the scheduler's own count (/proc/self/task/TID/schedstat):
    finer than engine_cpu's clock ticks, not split."""
    return sum(int(text.split()[0]) for text in _engine_task_files("schedstat"))


def engine_cpu_s() -> float:
    """CPU seconds (user + system) of this process's engine threads so far
    (engine_cpu)."""
    return sum(engine_cpu())


def pattern_crc32(seed: int, n: int) -> int:
    """zlib.crc32 of the first n bytes of the generated stream of `seed`."""
    return lib.hpccd_tp_pattern_crc32(seed, n)


def crc32(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """zlib's CRC-32 (the receiver's checksum), same as :func:`zlib.crc32`."""
    return lib.hpccd_tp_crc32(crc, ffi.from_buffer(data), len(data))


def repeat_crc32(data: bytes | bytearray | memoryview, n: int) -> int:
    """zlib.crc32 of the first n bytes of `data` repeated (what a flow opened
    with ``repeat=data`` sends)."""
    buf, crc, size = ffi.from_buffer(data), 0, len(data)
    while n > 0:
        k = min(n, size)
        crc = lib.hpccd_tp_crc32(crc, buf, k)
        n -= k
    return crc


# ---- results --------------------------------------------------------------------------

@dataclasses.dataclass
class FlowResult:
    """A sender flow's state (struct hpccd_tp_flow_stats), with derived figures."""
    flow_id: int
    algo: str
    state: str
    err: int
    bytes: int
    fct_s: float | None
    goodput_bps: float | None
    stats: dict[str, Any]

    @property
    def done(self) -> bool:
        return self.state == "done"


@dataclasses.dataclass
class RxFlow:
    """A receiver flow (struct hpccd_tp_rx_stats)."""
    saddr: str
    flow_id: int
    sport: int
    done: bool
    bytes: int
    crc32: int
    err: int
    fct_s: float | None        # first DATA to the delivery of the FIN's byte
    stats: dict[str, Any]


class Flow:
    """One sender flow of a :class:`Transport`.  Keeps the source buffer
    alive until closed."""

    def __init__(self, tp: "Transport", flow_id: int, what: str, keep: Any, seed: int | None,
                 sport: int):
        self.tp, self.flow_id, self.what, self._keep, self.seed = tp, flow_id, what, keep, seed
        self.sport = sport
        self.closed = False

    def stats(self) -> FlowResult:
        s = ffi.new("struct hpccd_tp_flow_stats *")
        self.tp._call(lib.hpccd_tp__flow_stats, self.flow_id, s, what=self.what)
        d = _struct_dict(s[0])
        fct = s.fct_ns / 1e9 if s.state == lib.HPCCD_TP_DONE else None
        return FlowResult(s.flow_id, ALGO_NAMES.get(s.algo, str(s.algo)), STATES[s.state],
                          s.err, s.bytes, fct, s.bytes * 8 / fct if fct else None, d)

    def wait(self, timeout: float = 60.0, poll: float = 0.005) -> FlowResult:
        """Until the flow is done or failed (then raise), or timeout (raise)."""
        deadline = time.monotonic() + timeout
        while True:
            r = self.stats()
            if r.state == "done":
                return r
            if r.state == "failed":
                _check(r.err if r.err < 0 else -errno.EIO,
                       f"{self.what}: failed after {r.stats['snd_una']} of {r.bytes} bytes "
                       f"acknowledged ({r.stats['rtos']} timeouts){_failure_hint(r)}")
            if time.monotonic() >= deadline:
                _check(-errno.ETIMEDOUT, f"{self.what}: not done after {timeout} s "
                                         f"({r.stats['snd_una']} of {r.bytes} bytes "
                                         f"acknowledged)")
            if self.tp._drive(self.flow_id, None, deadline):
                continue
            time.sleep(poll)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if not self.tp.closed:
                self.tp._call(lib.hpccd_tp__flow_close, self.flow_id, what=self.what)
            self._keep = None

    def __enter__(self) -> "Flow":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Engines:
    """One engine per rx queue of an interface (one UMEM, socket and thread
    each), sharing one xdp_host: the first engine attaches it and the
    others are put in its socket map.  A flow lives on the engine that
    opened it, and its peer's answers come back to the same queue when the
    path keeps the queue (a multi-queue veth with native XDP: the veth
    hands a frame sent on TX queue q to the peer's RX queue q; a NIC with
    RSS or flow steering rules to the same effect).  ``pick()`` spreads
    flows: the engine with the fewest running flows.  ``cpus``: the CPU of
    each engine's thread, in the order of ``queues``."""

    def __init__(self, ifname: str, queues: list[int], *, netns: str | None = None,
                 cpus: list[int] | None = None, **kw):
        if not queues:
            raise ValueError(f"{ifname}: no queue")
        if cpus is not None and len(cpus) != len(queues):
            raise ValueError(f"{ifname}: {len(cpus)} CPUs for {len(queues)} queues")
        self.engines: list[Transport] = []
        try:
            for k, q in enumerate(queues):
                e = Transport(ifname, q, netns=netns, attach_xdp=k == 0,
                              cpu=cpus[k] if cpus else None, **kw)
                self.engines.append(e)
                if k:
                    self.engines[0]._obj.map("hpccd_xsks").update(q, e.fd)
        except BaseException:
            self.close()
            raise

    def pick(self) -> "Transport":
        return min(self.engines, key=lambda e: e.stats()["flows_running"])

    def open_flow(self, peer: str, nbytes: int | None = None, **kw) -> Flow:
        """open_flow on the engine pick() chooses."""
        return self.pick().open_flow(peer, nbytes, **kw)

    def close(self) -> None:
        for e in reversed(self.engines):        # the XDP program's owner last
            e.close()

    def __enter__(self) -> "Engines":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _failure_hint(r: FlowResult) -> str:
    """Why a flow failed, in words (docs/security.md "Faults")."""
    if r.err == -errno.ECONNRESET:
        return ": the receiver lost the flow's state (its engine restarted); reopen the flow"
    if r.err == -errno.ETIMEDOUT:
        s = r.stats
        if not (s["acks"] or s["nacks"] or s["rx_windows"]):
            return (": no answer from the receiver (no engine there, unreachable, or it "
                    "refused a new flow: its rx_table_full / rx_peer_full / rx_probe_full / "
                    "rx_peer_table_full counters)")
        return ": no progress within the flow's timeout (the path or the receiver went away)"
    return ""


# ---- the engine -------------------------------------------------------------------------

def _netns_ctx(netns: str | None):
    import contextlib

    if netns is None:
        return contextlib.nullcontext()
    from ..bpf import loader as bpf
    return bpf.in_netns(netns)


class Transport:
    """An engine on `ifname` queue `queue_id` (see the module docstring).

    netns: the interface's namespace (entered to create the socket and
    attach XDP; the engine thread needs none afterwards).  attach_xdp: load
    build/ebpf/xdp_host.bpf.o, put the interface's IPv4 address into
    hpccd_addrs, attach it in `xdp_mode` ("generic" on veth keeps kernel
    TCP's offloads, ebpf/README.md) and the socket into hpccd_xsks.
    sink: "verify" (CRC-32, discard), "count" (count the in-order bytes and
    check nothing, as iperf3's server: the flows' crc32 stays 0) or a file
    path the received streams are written to (in order of arrival, for a
    single flow: the file).
    ack_every: m of the receiver's DCTCP.CE ACK machine; echo: INT echoed
    in ACKs (sender-based HPCC); notify: Rx-HPCC windows in the ACKs of
    the flows that ask for them (once per T);
    csum_check: verify the UDP checksum of DATA.
    rx_hpcc: receiver Rx-HPCC parameters (struct hpccd_hpcc_params fields),
    tag_key: the 16-byte key of the ACK, NACK and PROBE_RESP tags (both ends must
    agree); when it is not all zero it also goes into xdp_host's
    hpccd_tag_key, so that the XDP program answers probes (probe mode:
    without a key it drops them, counted).  reflect: xdp_host answers
    probes in XDP (default); False leaves them to the engine.  raw: count and
    recycle received frames without parsing them (the raw ceiling, raw_send).
    cpu: the CPU the engine's thread runs on (default: any).  responder:
    answer every completed flow with as many bytes (set_echo; the latency
    benchmark's server).  busy_poll: the thread polls the rings without
    sleeping (lowest latency, one core busy); by default it sleeps in
    ppoll() between deadlines, with interrupt moderation (coalesce_ns).
    With drive="caller" it is the caller that polls, while it waits in
    run(), request() and the waits, and the thread sleeps as it does
    otherwise: one core spins while a request is outstanding, none
    between requests (docs/transport.md "Latency").
    sg: bind with XDP_USE_SG where the kernel and driver allow it, so that
    flows may have an MTU larger than a frame (multi-buffer packets of up
    to 16 frames); False keeps every packet in one frame.
    drive: who runs the engine's loop.  "thread" (default): the engine's
    thread does everything, Python only opens flows and reads state.
    "caller" (run to completion, docs/transport.md "Run to completion"):
    open_flow() sends the flow's first packets from the calling thread,
    and Flow.wait(), wait_rx(), wait_rx_flow() and run() run the loop in
    the calling thread (the GIL released) and sleep in ppoll() on the
    socket themselves (or poll it, with busy_poll), so a request/response
    takes two wake-ups, not four; the engine's thread serves whatever no
    caller is waiting for (it takes the socket back when the caller
    leaves, and its timer holds every deadline).  One thread drives at a time: a second waits as in
    "thread" mode.
    csum_offload: DATA leave with the UDP checksum for the device to
    complete (AF_XDP TX metadata, Linux 6.8+, copy mode;
    stats()["tx_csum_offload"] says whether the kernel took it; False sums
    it here: docs/transport.md "Checksum offload").
    Other engine settings go through ``config`` (struct hpccd_tp_config)."""

    def __init__(self, ifname: str = "eth0", queue_id: int = 0, *, netns: str | None = None,
                 attach_xdp: bool = True, xdp_mode: str = "generic", mode: str = "copy",
                 sink: str = "verify", ack_every: int = 1, tag_key: bytes = bytes(TAG_KEY_BYTES),
                 echo: bool = True, notify: bool = True, csum_check: bool = True,
                 reflect: bool = True, raw: bool = False, cpu: int | None = None,
                 responder: bool = False, busy_poll: bool = False, sg: bool = True,
                 csum_offload: bool = True, drive: str = "thread",
                 rx_hpcc: Mapping[str, Any] | None = None, cnp_ns: int | None = None,
                 config: Mapping[str, Any] | None = None, start: bool = True):
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)   # no caller inside run()
        self._runners = 0
        self._t = ffi.NULL
        self._obj = None
        self._attached = False
        self._sink_fd = -1
        self.ifname, self.queue_id, self.netns, self.xdp_mode = ifname, queue_id, netns, xdp_mode
        self.where = f"{ifname} queue {queue_id}" + (f" in {netns}" if netns else "")
        if mode not in MODES:
            _check(-errno.EINVAL, f"{self.where}: mode {mode!r}, one of {sorted(MODES)}")
        if drive not in DRIVES:
            _check(-errno.EINVAL, f"{self.where}: drive {drive!r}, one of {list(DRIVES)}")
        self.drive = drive
        if len(tag_key) != TAG_KEY_BYTES:
            _check(-errno.EINVAL, f"{self.where}: tag key of {len(tag_key)} bytes, "
                   f"{TAG_KEY_BYTES} needed")
        c = ffi.new("struct hpccd_tp_config *")
        lib.hpccd_tp_config_default(c)
        c.flags = (MODES[mode] | lib.HPCCD_TP_F_NEED_WAKEUP |
                   (0 if echo else lib.HPCCD_TP_F_NO_ECHO) |
                   (0 if notify else lib.HPCCD_TP_F_NO_RXWIN) |
                   (0 if csum_check else lib.HPCCD_TP_F_NO_CSUM_CHECK) |
                   (lib.HPCCD_TP_F_RAW if raw else 0) |
                   (lib.HPCCD_TP_F_ECHO if responder else 0) |
                   (lib.HPCCD_TP_F_BUSY_POLL if busy_poll else 0) |
                   (0 if sg else lib.HPCCD_TP_F_NO_SG) |
                   (lib.HPCCD_TP_F_CSUM_OFFLOAD if csum_offload else 0) |
                   (lib.HPCCD_TP_F_RUN_IN_CALLER if drive == "caller" else 0))
        c.ack_every = ack_every
        if cnp_ns is not None:              # DCQCN's N at this receiver (cnp.c)
            if not 0 < cnp_ns < 1 << 63:
                _check(-errno.EINVAL, f"{self.where}: cnp_ns {cnp_ns}: a positive interval")
            c.cnp_ns = cnp_ns
        if cpu is not None:
            c.cpu = cpu
        ffi.memmove(c.tag_key, tag_key, TAG_KEY_BYTES)
        _apply(c.rx_hpcc, rx_hpcc, f"{self.where}: rx_hpcc")
        try:
            with _netns_ctx(netns):
                (self.local_addr, self.local_mac, self.ifindex,
                 self.if_mtu) = _iface_info(ifname, self.where)
                c.local_addr = int(ipaddress.IPv4Address(self.local_addr))
                if sink == "count":
                    c.sink = lib.HPCCD_TP_SINK_COUNT
                elif sink != "verify":
                    self._sink_fd = os.open(sink, os.O_WRONLY | os.O_CREAT | os.O_TRUNC |
                                            os.O_CLOEXEC, 0o644)
                    c.sink, c.sink_fd = lib.HPCCD_TP_SINK_FD, self._sink_fd
                _apply(c[0], config, f"{self.where}: config")
                out = ffi.new("struct hpccd_tp **")
                err = ffi.new("char[]", lib.HPCCD_TP_ERR_MAX)
                # A socket closed a moment ago on this queue is released by
                # the kernel asynchronously (its XSKMAP reference goes with
                # the map, after an RCU grace period): EBUSY for a while.
                for _ in range(40):
                    rc = lib.hpccd_tp__create(os.fsencode(ifname), queue_id, c, out, err,
                                              lib.HPCCD_TP_ERR_MAX)
                    if rc != -errno.EBUSY:
                        break
                    time.sleep(0.05)
                _check(rc, _cstr(err) or f"{self.where}: create")
                self._t = out[0]
                if attach_xdp:
                    self._attach_xdp(c.udp_port, tag_key, reflect)
            self.udp_port = c.udp_port
            self.rx_flows_max = c.rx_flows
            self._rx_room = RX_LIST_ROOM
            if start:
                self.start()
        except BaseException:
            self.close()
            raise

    # -- plumbing --------------------------------------------------------------------

    def _attach_xdp(self, udp_port: int, tag_key: bytes, reflect: bool) -> None:
        from ..bpf import loader as bpf

        if not XDP_HOST.exists():
            _check(-errno.ENOENT, f"{self.where}: {XDP_HOST} is not built (make bpf)")
        rodata: dict[str, int] = {"hpccd_cfg_udp_port": udp_port}
        if not reflect:        # HPCCD_CFG_TCP_SIDE only (include/hpccd/kern_user.h)
            rodata["hpccd_cfg_flags"] = abi.HPCCD_CFG_TCP_SIDE
        self._obj = bpf.BpfObject.open(XDP_HOST, rodata=rodata)
        self._obj.load()
        if any(tag_key):       # all zero is "no key" to xdp_host
            self._obj.map("hpccd_tag_key").update(0, bytes(tag_key))
        self._obj.map("hpccd_addrs").update(socket.inet_aton(self.local_addr), 1)
        self._obj.map("hpccd_xsks").update(self.queue_id, self.fd)
        bpf.xdp_attach(self.ifname, self._obj.program("hpccd_xdp_host"), mode=self.xdp_mode)
        self._attached = True
        if self.xdp_mode in ("native", "drv") and (why := bpf.native_xdp_drops(self.ifindex)):
            warnings.warn(f"{self.where}: {why}", RuntimeWarning, stacklevel=3)

    def _live(self):
        if self._t == ffi.NULL:
            _check(-errno.EBADF, f"{self.where}: transport closed")
        return self._t

    def _call(self, fn, *args, what: str | None = None) -> int:
        with self._lock:
            t = self._live()
            rc = fn(t, *args)
            if rc < 0:
                _check(rc, _cstr(lib.hpccd_tp__error(t)) or f"{what or self.where}: "
                                                              f"{fn.__name__}")
            return rc

    # -- API ---------------------------------------------------------------------------

    @property
    def fd(self) -> int:
        return lib.hpccd_tp__fd(self._live())

    @property
    def closed(self) -> bool:
        return self._t == ffi.NULL

    @property
    def mtu_max(self) -> int:
        """The largest flow MTU this engine's UMEM frames carry."""
        return lib.hpccd_tp__mtu_max(self._live())

    @property
    def mtu_default(self) -> int:
        """A flow's MTU when open_flow is given none: the interface's, as far
        as the frames carry it (docs/transport.md "Frame size")."""
        return min(self.if_mtu, self.mtu_max)

    def start(self) -> None:
        self._call(lib.hpccd_tp__start)

    def stop(self) -> None:
        self._call(lib.hpccd_tp__stop)

    def run(self, flow: "Flow | int | None" = None, rx_done: int | None = None,
            timeout: float = 0.2) -> int:
        """drive="caller": run the engine's loop in this thread (GIL
        released) until `flow` (a Flow or its id) is no longer running, or
        the engine has completed more receiver flows than `rx_done`, or
        `timeout` seconds passed; returns the engine's count of completed
        receiver flows (stats()["rx_done"]).  TransportError EBUSY when
        another thread is inside, EINVAL on a "thread" engine."""
        with self._lock:
            t = self._live()
            self._runners += 1
        try:
            fid = ffi.NULL
            if flow is not None:
                fid = ffi.new("uint32_t *", flow.flow_id if isinstance(flow, Flow) else flow)
            cnt = ffi.new("uint64_t *", _NO_RX if rx_done is None else rx_done)
            rc = lib.hpccd_tp__run(t, fid, cnt, max(0, int(timeout * 1e9)))
            if rc < 0 and rc != -errno.ETIMEDOUT:
                why = {errno.EBUSY: "another thread is running the engine's loop",
                       errno.ESHUTDOWN: "the engine was stopped"}.get(-rc)
                _check(rc, f"{self.where}: run: {why}" if why
                       else _cstr(lib.hpccd_tp__error(t)) or f"{self.where}: run")
            return cnt[0]
        finally:
            with self._lock:
                self._runners -= 1
                if not self._runners:
                    self._idle.notify_all()

    def _drive(self, flow_id: int | None, rx_done: int | None, deadline: float) -> bool:
        """The waits' step in "caller" mode: run() until `deadline` at most
        (in slices, so that signals are seen); False when this engine is not
        driven by callers or another thread is driving (then the wait
        polls)."""
        if self.drive != "caller":
            return False
        try:
            self.run(flow_id, rx_done, min(0.2, max(0.0, deadline - time.monotonic())))
        except TransportError as e:
            if e.errno != errno.EBUSY:
                raise
            return False
        return True

    def next_hop_mac(self, peer: str, timeout: float = 2.0) -> bytes:
        with _netns_ctx(self.netns):
            return resolve_next_hop(peer, self.ifindex, timeout, self.where)

    def _flow_cfg(self, peer: str, nbytes: int | None = None, *, algo: str = "hpcc",
                  data: bytes | bytearray | memoryview | None = None,
                  repeat: bytes | bytearray | memoryview | None = None,
                  file: str | os.PathLike | None = None, seed: int | None = None,
                  int_mode: str | int = "every", int_room: int = 5, mtu: int | None = None,
                  line_rate_bps: int = 1_000_000_000, burst_ns: int | None = None,
                  rto_min_ns: int | None = None, timeout_s: float | None = None,
                  ecn: bool = True, probe_timeout_ns: int | None = None, recovery: str = "sr",
                  hpcc: Mapping[str, Any] | None = None,
                  dctcp: Mapping[str, Any] | None = None,
                  ldcp: Mapping[str, Any] | None = None,
                  dcqcn: Mapping[str, Any] | None = None,
                  timely: Mapping[str, Any] | None = None, rate_win: bool = False):
        """open_flow's struct hpccd_tp_flow_cfg, and what keeps its buffer alive."""
        if algo not in ALGOS:
            raise ValueError(f"flow to {peer}: algorithm {algo!r}, one of {sorted(ALGOS)}")
        if recovery not in RECOVERY:
            raise ValueError(f"flow to {peer}: recovery {recovery!r}, one of {sorted(RECOVERY)}")
        c = ffi.new("struct hpccd_tp_flow_cfg *")
        lib.hpccd_tp_flow_cfg_default(c)
        c.algo = ALGOS[algo]
        keep = None
        if file is not None:
            with open(file, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size == 0:
                    raise ValueError(f"flow to {peer}: {file} is empty")
                keep = mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ)
            data = keep
        if repeat is not None:
            if data is not None or file is not None:
                raise ValueError(f"flow to {peer}: repeat= with data= or file=: one source")
            if not nbytes or not len(repeat):
                raise ValueError(f"flow to {peer}: repeat= needs a non-empty buffer and "
                                 f"nbytes")
            buf = ffi.from_buffer(repeat)
            c.src, c.buf, c.buf_len, c.bytes = lib.HPCCD_TP_SRC_REPEAT, buf, len(repeat), nbytes
            keep = (repeat, buf)
        elif data is not None:
            if nbytes is not None and nbytes != len(data):
                raise ValueError(f"flow to {peer}: nbytes {nbytes} != len(data) {len(data)}")
            keep = keep if keep is not None else data
            buf = ffi.from_buffer(data)
            c.src, c.buf, c.bytes = lib.HPCCD_TP_SRC_BUFFER, buf, len(data)
            keep = (keep, buf)
        else:
            if not nbytes:
                raise ValueError(f"flow to {peer}: nothing to send (nbytes, data or file)")
            seed = random.getrandbits(63) if seed is None else seed
            c.src, c.seed, c.bytes = lib.HPCCD_TP_SRC_PATTERN, seed, nbytes
        if int_mode == "every":
            c.int_mode = lib.HPCCD_TP_INT_EVERY
        elif int_mode == "none":
            c.int_mode = lib.HPCCD_TP_INT_NONE
        elif int_mode == "probe":
            c.int_mode = lib.HPCCD_TP_INT_PROBE
        else:
            c.int_mode, c.int_every = lib.HPCCD_TP_INT_NTH, int(int_mode)
        if mtu is None:
            mtu = self.mtu_default
        c.int_room, c.mtu, c.line_rate_bps, c.ecn = int_room, mtu, line_rate_bps, int(ecn)
        c.recovery = RECOVERY[recovery]
        if burst_ns is not None:
            c.burst_ns = burst_ns
        if rto_min_ns is not None:
            c.rto_min_ns = rto_min_ns
        if probe_timeout_ns is not None:
            c.probe_timeout_ns = probe_timeout_ns
        if timeout_s is not None:
            c.timeout_ns = int(timeout_s * 1e9)
        c.hpcc.line_rate_bps = line_rate_bps
        c.hpcc.mtu_bytes = mtu + _cc_lib.HPCCD_ETH_HLEN   # w_min: one frame on the wire
        c.ldcp.line_rate_bps = line_rate_bps
        _apply(c.hpcc, hpcc, f"flow to {peer}: hpcc")
        c.ldcp.rtt_ns = int(c.hpcc.T_ns)
        _apply(c.dctcp, dctcp, f"flow to {peer}: dctcp")
        _apply(c.ldcp, ldcp, f"flow to {peer}: ldcp")
        # DCQCN and TIMELY start at and are capped by line_rate_bps (the
        # engine sets their line rate from it)
        _apply(c.dcqcn, dcqcn, f"flow to {peer}: dcqcn")
        _apply(c.timely, timely, f"flow to {peer}: timely")
        c.rate_win = int(rate_win)          # "+win": W = line rate x hpcc T_ns
        return c, keep

    def open_flow(self, peer: str, nbytes: int | None = None, *, sport: int | None = None,
                  dmac: bytes | None = None, **kw) -> Flow:
        """Open a flow to `peer` with `algo` (hpcc, rx-hpcc, dctcp, ldcp, dcqcn, timely) that
        sends `data`, the bytes of `file`, `nbytes` generated bytes (seed:
        the stream's, random by default), or `nbytes` bytes of `repeat` sent
        again and again (one application buffer written in a loop, as
        iperf3's client: the engine copies it into the UMEM; the receiver's
        CRC is repeat_crc32(repeat, nbytes)).  int_mode: "every", "none" or N
        (every Nth data packet carries the INT padding).  hpcc/dctcp/ldcp/dcqcn/timely:
        fields of the core's parameter structs (include/hpccd/cc.h); HPCC's
        B_NIC and LDCP's line rate default to line_rate_bps, LDCP's RTT to
        HPCC's T.  int_mode "probe" (HPCC only): data packets carry no INT
        and the engine sends one probe with int_room records per RTT while
        data is in flight ([HPCC++2022] section 6.2.1); a probe unanswered for
        probe_timeout_ns (default 1 ms) is lost, and the next one leaves.
        rate_win (DCQCN, TIMELY): "DCQCN+win" / "TIMELY+win" of [HPCC] section
        5.1, bytes in flight bounded by W = line_rate_bps x hpcc T_ns.
        recovery: "sr" (selective repeat: the receiver keeps out-of-order data
        and reports it in SACK blocks, the sender resends the holes only) or
        "gbn" (go-back-N, as the HPCC paper's NIC)."""
        c, keep, what = self._open_cfg(peer, nbytes, sport, dmac, kw)
        fid = ffi.new("uint32_t *")
        self._call(lib.hpccd_tp__flow_open, c, fid, what=what)
        return Flow(self, fid[0], f"{what} id {fid[0]:#x}", keep,
                    c.seed if c.src == lib.HPCCD_TP_SRC_PATTERN else None, c.sport)

    def _open_cfg(self, peer: str, nbytes: int | None, sport: int | None,
                  dmac: bytes | None, kw: dict):
        c, keep = self._flow_cfg(peer, nbytes, **kw)
        c.saddr = int(ipaddress.IPv4Address(self.local_addr))
        c.daddr = int(ipaddress.IPv4Address(peer))
        c.sport = sport or random.randint(32768, 60999)
        c.dport = self.udp_port
        ffi.memmove(c.smac, self.local_mac, 6)
        ffi.memmove(c.dmac, dmac or self.next_hop_mac(peer), 6)
        what = (f"{self.where}: flow to {peer}:{c.dport} from port {c.sport} "
                f"({kw.get('algo', 'hpcc')})")
        return c, keep, what

    def request(self, peer: str, nbytes: int | None = None, *, rx_done: int,
                timeout: float = 5.0, sport: int | None = None, dmac: bytes | None = None,
                **kw) -> tuple[Flow, int]:
        """drive="caller": a request/response in one call -- the flow opened
        (keywords as open_flow's) and sent from this thread after it took the
        engine's socket, then the loop run here until the engine has
        completed more receiver flows than `rx_done` (the answer) or `timeout`
        passed; nothing runs between the request's send and the wait.
        Returns (the request's Flow, the engine's completed receiver flows);
        the count unchanged means no answer in time."""
        c, keep, what = self._open_cfg(peer, nbytes, sport, dmac, kw)
        with self._lock:
            t = self._live()
            self._runners += 1
        try:
            fid = ffi.new("uint32_t *")
            cnt = ffi.new("uint64_t *", rx_done)
            rc = lib.hpccd_tp__request(t, c, fid, cnt, max(0, int(timeout * 1e9)))
            if rc < 0 and rc != -errno.ETIMEDOUT:
                why = {errno.EBUSY: "another thread is running the engine's loop",
                       errno.ESHUTDOWN: "the engine was stopped"}.get(-rc)
                _check(rc, f"{what}: request: {why}" if why
                       else _cstr(lib.hpccd_tp__error(t)) or f"{what}: request")
            return (Flow(self, fid[0], f"{what} id {fid[0]:#x}", keep,
                         c.seed if c.src == lib.HPCCD_TP_SRC_PATTERN else None, c.sport),
                    cnt[0])
        finally:
            with self._lock:
                self._runners -= 1
                if not self._runners:
                    self._idle.notify_all()

    def set_echo(self, **kw) -> None:
        """The settings of the echo responder's replies (``Transport(responder=True)``:
        each completed receiver flow is answered with as many generated
        bytes; the latency benchmark's server).  Keywords as open_flow's."""
        c, _ = self._flow_cfg("0.0.0.0", 1, **kw)
        self._call(lib.hpccd_tp__set_echo, c, what=f"{self.where}: echo settings")

    def raw_send(self, peer: str, frames: int, mtu: int | None = None,
                 timeout: float = 60.0) -> float:
        """The raw ceiling of AF_XDP (fastpath/transport/raw.c): send `frames`
        copies of one DATA frame of `mtu` bytes (default: as open_flow's) to
        `peer` as fast as the TX ring takes them, and return the seconds it
        took.  The receiving engine counts them when created with
        ``raw=True``; nothing else runs on either side."""
        c = ffi.new("struct hpccd_tp_flow_cfg *")
        lib.hpccd_tp_flow_cfg_default(c)
        c.mtu = self.mtu_default if mtu is None else mtu
        c.saddr = int(ipaddress.IPv4Address(self.local_addr))
        c.daddr = int(ipaddress.IPv4Address(peer))
        c.sport, c.dport = random.randint(32768, 60999), self.udp_port
        ffi.memmove(c.smac, self.local_mac, 6)
        ffi.memmove(c.dmac, self.next_hop_mac(peer), 6)
        t0 = time.monotonic()
        self._call(lib.hpccd_tp__raw_send, c, frames, what=f"{self.where}: raw send to {peer}")
        left = ffi.new("uint64_t *")
        while True:
            self._call(lib.hpccd_tp__raw_left, left)
            if not left[0]:
                return time.monotonic() - t0
            if time.monotonic() - t0 > timeout:
                _check(-errno.ETIMEDOUT, f"{self.where}: raw send: {left[0]} of {frames} "
                                         f"frames not sent in {timeout} s")
            time.sleep(0.001)

    def rx_flows(self) -> list[RxFlow]:
        # Room for as many flows as a listing has needed so far, grown
        # fourfold until they fit (a full buffer may have cut the list):
        # a buffer of the whole table (16384 entries, 6.4 MB zeroed)
        # per call was most of the lab's sinks' CPU (docs/lab.md "Where
        # the lab's CPU goes")
        room = self._rx_room
        while True:
            buf = ffi.new("struct hpccd_tp_rx_stats[]", room)
            n = self._call(lib.hpccd_tp__rx_flows, buf, room)
            if n < room or room >= self.rx_flows_max:
                break
            room = min(room * 4, self.rx_flows_max)
        self._rx_room = max(room, RX_LIST_ROOM)
        out = []
        for i in range(n):
            s = buf[i]
            fct = (s.last_ns - s.first_ns) / 1e9 if s.done else None
            out.append(RxFlow(str(ipaddress.IPv4Address(s.saddr)), s.flow_id, s.sport,
                              bool(s.done), s.bytes, s.crc32, s.err, fct, _struct_dict(s)))
        return out

    def wait_rx(self, count: int = 1, timeout: float = 60.0, poll: float = 0.01
                ) -> list[RxFlow]:
        """Until `count` receiver flows are done; returns the done ones."""
        deadline = time.monotonic() + timeout
        while True:
            seen = self.stats()["rx_done"] if self.drive == "caller" else 0
            done = [f for f in self.rx_flows() if f.done]
            if len(done) >= count:
                return done
            if time.monotonic() >= deadline:
                _check(-errno.ETIMEDOUT, f"{self.where}: {len(done)} of {count} received "
                                         f"flows done after {timeout} s")
            # until more are done than were when `done` was listed (or
            # sooner: the list is taken again)
            if self._drive(None, seen + count - len(done) - 1, deadline):
                continue
            time.sleep(poll)

    def wait_rx_flow(self, flow_id: int, timeout: float = 60.0, poll: float = 0.005) -> RxFlow:
        """Until the receiver flow `flow_id` (the sender's Flow.flow_id) is
        done; returns it (bytes, crc32, fct_s: what to check the transfer
        by)."""
        deadline = time.monotonic() + timeout
        while True:
            seen = self.stats()["rx_done"] if self.drive == "caller" else 0
            for f in self.rx_flows():
                if f.flow_id == flow_id and f.done:
                    return f
            if time.monotonic() >= deadline:
                _check(-errno.ETIMEDOUT, f"{self.where}: received flow {flow_id:#x} not done "
                                         f"after {timeout} s")
            if self._drive(None, seen, deadline):
                continue
            time.sleep(poll)

    def rx_reap(self) -> int:
        return self._call(lib.hpccd_tp__rx_reap)

    def rx_reset(self) -> int:
        """Forget every receiver flow, done or not (hpccd_tp__rx_reset): an
        unfinished one as if it had expired, so that it takes no share of
        the receive window (rx_window is divided among the unfinished
        flows) and does not count in Rx-HPCC's N.  For a receiver whose
        senders closed their flows mid-stream, before it serves others (an
        experiment's calibration flows).  Returns how many were unfinished."""
        return self._call(lib.hpccd_tp__rx_reset)

    def set_rx_hpcc(self, rx_hpcc: Mapping[str, Any]) -> None:
        """The receiver's Rx-HPCC parameters, as the constructor's `rx_hpcc`
        (the fields given, the core's defaults for the others), for the
        receiver flows that start from now on; the running ones keep
        theirs.  Checked as at creation: refused parameters change nothing
        (the daemon's reload of [hpcc])."""
        p = ffi.new("struct hpccd_hpcc_params *")
        lib.hpccd_hpcc_params_default(p)    # what hpccd_tp_config_default gives
        _apply(p[0], rx_hpcc, f"{self.where}: rx_hpcc")
        self._call(lib.hpccd_tp__set_rx_hpcc, p, what=f"{self.where}: rx_hpcc")

    def set_tag_key(self, key: bytes) -> None:
        """Rotate the 16-byte integrity key of NOTIFY / PROBE_RESP tags without
        a restart (the daemon's SIGHUP path); old-key feedback is dropped and
        counted from the next frame on.  The XDP program's key (hpccd_tag_key,
        which tags the PROBE_RESPs it reflects) is rotated with it when this
        engine attached xdp_host itself."""
        if len(key) != TAG_KEY_BYTES:
            _check(-errno.EINVAL, f"{self.where}: tag key of {len(key)} bytes, "
                   f"{TAG_KEY_BYTES} needed")
        self._call(lib.hpccd_tp__set_tag_key, ffi.from_buffer(key))
        if self._obj is not None:
            self._obj.map("hpccd_tag_key").update(0, bytes(key))

    def stats(self) -> dict[str, Any]:
        s = ffi.new("struct hpccd_tp_stats *")
        self._call(lib.hpccd_tp__stats, s)
        d = _struct_dict(s[0])
        d["by_type"] = {TYPE_NAMES[t]: s.by_type[t] for t in TYPE_NAMES}
        d["by_class"] = {c: s.by_class[c] for c in range(1, lib.HPCCD_TP_N_CLASSES)}
        return d

    def xdp_counters(self) -> list[int] | None:
        """Packets per slot of xdp_host's hpccd_xdp_cnt, summed over CPUs."""
        if self._obj is None:
            return None
        import sys
        m = self._obj.map("hpccd_xdp_cnt")
        return [sum(int.from_bytes(v[:8], sys.byteorder) for v in m.lookup(i))
                for i in range(m.max_entries)]

    def close(self) -> None:
        """Stop the thread, detach XDP, free everything.  Idempotent."""
        with self._lock:
            t, self._t = self._t, ffi.NULL
        if t != ffi.NULL:
            lib.hpccd_tp__stop(t)          # a caller inside run() returns
            with self._lock:
                while self._runners:
                    self._idle.wait()
        if self._obj is not None:
            try:       # the map's reference would keep the socket bound
                self._obj.map("hpccd_xsks").delete(self.queue_id)
            except OSError:
                pass
        if self._attached:
            from ..bpf import loader as bpf
            self._attached = False
            try:
                with _netns_ctx(self.netns):
                    bpf.xdp_detach(self.ifname)
            except OSError:
                pass            # the namespace (and the interface) went first
        if t != ffi.NULL:
            lib.hpccd_tp__destroy(t)
        if self._obj is not None:
            self._obj.close()
            self._obj = None
        if self._sink_fd >= 0:
            os.close(self._sink_fd)
            self._sink_fd = -1

    def __enter__(self) -> "Transport":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_lock", None) is not None:
            self.close()


# ---- interface and neighbour --------------------------------------------------------

def _iface_info(ifname: str, where: str) -> tuple[str, bytes, int, int]:
    """(IPv4 address, MAC, ifindex, MTU) of `ifname` in the current namespace."""
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        idx = ipr.link_lookup(ifname=ifname)
        if not idx:
            _check(-errno.ENODEV, f"{where}: no such interface")
        link = ipr.get_links(idx[0])[0]
        mac = bytes.fromhex(link.get_attr("IFLA_ADDRESS").replace(":", ""))
        mtu = link.get_attr("IFLA_MTU") or 1500
        addrs = [a.get_attr("IFA_ADDRESS") for a in ipr.get_addr(index=idx[0], family=2)]
    if not addrs:
        _check(-errno.EADDRNOTAVAIL, f"{where}: no IPv4 address")
    return addrs[0], mac, idx[0], mtu


def resolve_next_hop(peer: str, ifindex: int, timeout: float, where: str) -> bytes:
    """MAC of the next hop towards `peer` (the gateway, or the peer on-link),
    from the neighbour table, asking the kernel to resolve it (a datagram to
    the discard port) when it is not there yet.  Current namespace."""
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        routes = ipr.route("get", dst=peer)
        nh = routes[0].get_attr("RTA_GATEWAY") or peer if routes else peer
        deadline = time.monotonic() + timeout
        poked = False
        while True:
            for n in ipr.get_neighbours(ifindex=ifindex, family=2):
                ll = n.get_attr("NDA_LLADDR")
                if n.get_attr("NDA_DST") == nh and ll and n["state"] not in (0x20, 0x01):
                    return bytes.fromhex(ll.replace(":", ""))   # not FAILED/INCOMPLETE
            if time.monotonic() >= deadline:
                _check(-errno.EHOSTUNREACH, f"{where}: no neighbour entry for {nh} "
                                            f"(next hop to {peer})")
            if not poked:
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                    try:
                        s.sendto(b"hpccd-arp", (peer, 9))
                    except OSError:
                        pass
                poked = True
            time.sleep(0.02)
