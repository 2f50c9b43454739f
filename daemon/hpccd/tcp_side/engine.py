"""TCP-side deployment of HPCC++ ([HPCC++2022] section 7.2).

docs/architecture.md ("Kernel TCP flows") places it among the other paths.

Kernel TCP flows of unmodified applications (``iperf3 -C hpcc``) get their
window from HPCC: this module probes each active flow once per RTT with a
TCP-side probe (its own 5-tuple, DSCP 45, no TCP flag, INT padding:
docs/wire-format.md), reads the responses that the host's XDP program
(ebpf/xdp_host.bpf.c) verified and stored in ``hpccd_telem``, runs the HPCC
core of hpccd.core.cc on their INT (the same C code as the native transport, [HPCC]
Algorithm 1), and writes W and R = W / T into ``hpccd_tcp_win``, where
the struct_ops congestion control "hpcc" (ebpf/tcp_hpcc.bpf.c) applies them
on every ACK.  It also registers "dctcp" (ebpf/tcp_dctcp.bpf.c, [DCTCP]).

Pieces:

- :class:`TcpCc` registers the two struct_ops congestion controls.  They
  are host-wide (every network namespace sees one "hpcc"), so one process
  at a time may own them: :meth:`TcpCc.start` takes an exclusive ``flock``
  on :data:`LOCK_FILE` (released by the kernel when the owner dies), and
  only then unregisters what a dead owner left registered (struct_ops maps
  named ``hpccd_tcp_hpcc`` / ``hpccd_tcp_dctcp``, found by hpccd.bpf.loader's
  clean-up), so a live owner's registration is never torn down.
  :meth:`TcpCc.stop` unregisters and releases the lock: nothing is left.
- :class:`TcpSide` drives the probe engine (include/hpccd/tcp_probe.h,
  fastpath/tcpside/, module ``hpccd._tcpside``): :meth:`start`,
  :meth:`start_thread` (the engine's loop in a thread of its own, the GIL
  released), :meth:`step` (what is pending, in the caller's thread),
  :meth:`stop`; :attr:`flows` and :attr:`stats` are its snapshots.
- :data:`COMPONENT` plugs it into the daemon (hpccd.agent.component).

Per flow (key: struct hpccd_flow_key, the tc tracker's), the engine, woken
only by events (engine.c has the details; docs/tcp-side.md the why):

1. A segment with payload of a parked flow (a new flow starts parked) makes
   tc_tracker write a record into the ring ``hpccd_tcp_wake``; a flow the
   "hpcc" CC runs (an entry in ``hpccd_tcp_cst``) gets its first probe.
   Flows of other congestion controls are not probed: nothing would apply
   their W.
2. A response, verified by xdp_host, arrives as a record of the ring
   ``hpccd_telem_rb``; an answer to the outstanding probe goes to the HPCC
   core with seq = snd_nxt = the probe number (every response is the first
   feedback of a new RTT, so W^c is updated once per RTT), and W and R =
   W / T go into ``hpccd_tcp_win`` with the telemetry's time (the CC
   treats a W older than ``stale_ns`` as stale and falls back to Reno).
3. The next probe leaves if bytes are in flight ([HPCC++2022] section
   6.2.1; the CC's snd_nxt != snd_una as of its last ACK, or the tracker's
   snd_nxt beyond the CC's snd_una), not sooner than ``probe_gap_rtt`` x
   the flow's srtt after the last; else the flow is parked
   (``hpccd_tcp_park``) until 1. happens again.
4. A probe unanswered after 3 x max(srtt, probe RTT), within
   [probe_timeout_min_s, probe_timeout_max_s], is lost (counted), then 3.
5. A flow whose socket is gone has its window, telemetry and park entries
   deleted (the engine's sweep).

T per flow: ``t_rtt_factor`` x max(the configured T, the least probe RTT,
the least kernel srtt) ([HPCC] section 5.1).  The heartbeat
(``hpccd_tcp_cfg.heartbeat_ns``) is written by the engine every
``heartbeat_s`` while it has flows; without, the engine writes the
configuration once with ``idle_ns`` set and sleeps until a new flow's first
segment wakes it (the CC counts the daemon alive for a flow younger than
stale_ns meanwhile: ebpf/tcp_hpcc.bpf.c, daemon_alive).

Probes are sent from a raw IPv4 socket (IPPROTO_RAW) opened in the
daemon's network namespace, so they leave through the same routing, tc
tracker (which recognises and skips them), and queues as the flow.
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import pathlib
import socket
import struct
import threading
import time
from typing import Any, Iterable, Mapping

from .._bpf import lib as _abi
from .._cc import lib as _cc_lib
from ..bpf import loader as bpf
from ..bpf.abi import check_format
from ..core import cc
from .._tcpside import ffi as _tffi, lib as _tlib
from . import pacer as _pacer
from .pacer import Lateness, PacerError, PacerMeter
from .trains import (PACER_LATE_Q, RETRAIN_EXPIRIES, TrainCap, TrainCapError,
                     queue_frames, segs_from_pacer)

__all__ = ["TcpCc", "TcpSide", "TcpSideError", "FlowKey", "flow_key", "probe_packet",
           "HPCC_COUNTERS", "DCTCP_COUNTERS", "LOCK_FILE", "CC_NAMES", "WIN_FMT", "CFG_FMT",
           "CST_FMT", "DCTCP_ST_FMT", "TCP_FLOW_FMT", "TELEM_FMT", "default_obj_dir"]

log = logging.getLogger("hpccd.tcp_side.engine")

# ---- layouts (include/hpccd/tcp_cc.h, include/hpccd/kern_user.h) ---------------------
# struct formats, each held at import to the compiler's layout of the header's struct
# (hpccd.bpf.abi.check_format): the header stays the one definition.

KEY_FMT = check_format("=4s4sHHB3x", "hpccd_flow_key")          # network order fields
WIN_FMT = check_format("=QQQQQ", "hpccd_tcp_win")
CFG_FMT = check_format("=QQQQQ", "hpccd_tcp_cc_cfg")
CST_FMT = check_format("=QQQIIIIIIIII4x", "hpccd_tcp_cc_state")
DCTCP_ST_FMT = check_format("=QQQQIIIIII", "hpccd_tcp_dctcp_state")
TCP_FLOW_FMT = check_format("=QQQQQIB3x", "hpccd_tcp_flow")     # tc_tracker
TELEM_HOPS = cc.MAX_HOPS               # HPCCD_INT_MAX_HOPS
TELEM_FMT = check_format(f"={TELEM_HOPS * 8}sQQQIIHBBB3x", "hpccd_tcp_telem")
COUNTER_FMT = check_format("=QQ", "hpccd_counter")

# Counter slots, in the order of the enums of include/hpccd/tcp_cc.h.
# The maps TcpSide takes from the tracker's and the XDP program's objects.
TRACKER_MAPS = ("hpccd_tcp_flows", "hpccd_tcp_park", "hpccd_tcp_wake")
XDP_MAPS = ("hpccd_telem", "hpccd_telem_rb")

HPCC_COUNTERS = ("used_hpcc", "used_winit", "fb_stale", "fb_no_entry", "fb_no_daemon",
                 "init", "release", "enter_fallback", "leave_fallback", "loss", "state_fail",
                 "w_only", "lim_cwnd", "lim_pacing", "lim_app",
                 "lim_tsq", "lim_timer")
DCTCP_COUNTERS = ("init", "no_ecn", "ack", "ack_ece", "window", "ecn_reduction",
                  "loss_recovery", "loss_rto", "ce_change", "ce_flush")
MODES = {0: "none", 1: "hpcc", 2: "winit", 3: "fallback"}   # enum hpccd_tcp_cc_mode
# The shared maps whose layout a joining owner must share: value size, and
# entries where they are fixed (counter slots; 0: any).
_LAYOUTS = {"hpccd_tcp_win": (struct.calcsize(WIN_FMT), 0),
            "hpccd_tcp_cfg": (struct.calcsize(CFG_FMT), 0),
            "hpccd_tcp_cst": (struct.calcsize(CST_FMT), 0),
            "hpccd_tcpc_cnt": (struct.calcsize(COUNTER_FMT), len(HPCC_COUNTERS)),
            "hpccd_dctcp_st": (struct.calcsize(DCTCP_ST_FMT), 0),
            "hpccd_dctcp_cnt": (struct.calcsize(COUNTER_FMT), len(DCTCP_COUNTERS))}

# The two congestion controls: object file, struct_ops map, congestion control name.
CC_NAMES = {"hpcc": ("tcp_hpcc.bpf.o", "hpccd_tcp_hpcc"),
            "dctcp": ("tcp_dctcp.bpf.o", "hpccd_tcp_dctcp")}
LOCK_FILE = "/run/hpccd/tcp_cc.lock"

PROBE_DSCP_DEFAULT = _abi.HPCCD_PROBE_DSCP_DEFAULT      # include/hpccd/wire.h
# cwnd = W + R x min(srtt - probe RTT, T) x this, R = W / T paced (engine.c, cwnd_for)
CWND_RTT_GAIN_DEFAULT = 1.5
# ... with the hosts' share (srtt - probe RTT) counted at most this x the flow's T
HOST_CAP_T_DEFAULT = 1.0
# R at most this x the slowest link of the path the INT describes
PATH_RATE_GAIN_DEFAULT = 1.0
# ... for a flow alone in its path group (the kernel's pacer loses its timer's lateness;
# 1.25 measured at load 7-10 only, no steady gain there: docs/tcp-side.md)
SOLO_RATE_GAIN_DEFAULT = 1.0
# the pacing rate written at most this x the rate HPCC wants, following the pacer's
# measured loss per flow (engine.c, pace_feedback); 1: R as it is
PACE_GAIN_MAX_DEFAULT = 1.0
INT_ROOM_DEFAULT = _cc_lib.HPCCD_INT_DEFAULT_HOPS    # include/hpccd/int_hop.h


def _within(name: str, v: float, lo: float, hi: float, unit: str = "") -> float:
    """`v` as a float when lo <= v <= hi, else ValueError naming the option."""
    if not lo <= v <= hi:
        raise ValueError(f"{name} must be within [{lo}, {hi}]{unit}, got {v}")
    return float(v)


class TcpSideError(RuntimeError):
    pass


def default_obj_dir() -> pathlib.Path:
    """Where the loader finds compiled objects (hpccd.bpf.loader.OBJ_DIR), else
    build/ebpf of the source tree this package is in."""
    d = getattr(bpf, "OBJ_DIR", None)
    if d:
        return pathlib.Path(d)
    return pathlib.Path(__file__).resolve().parents[3] / "build" / "ebpf"


# ---- flow keys -----------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class FlowKey:
    """A kernel TCP flow as its local sender sees it."""

    saddr: str
    daddr: str
    sport: int
    dport: int

    def pack(self) -> bytes:
        return flow_key(self.saddr, self.daddr, self.sport, self.dport)

    @classmethod
    def unpack(cls, raw: bytes) -> "FlowKey":
        s, d, sp, dp, _ = struct.unpack(KEY_FMT, raw)
        return cls(socket.inet_ntoa(s), socket.inet_ntoa(d), socket.ntohs(sp), socket.ntohs(dp))

    def __str__(self) -> str:
        return f"{self.saddr}:{self.sport}->{self.daddr}:{self.dport}"


def flow_key(saddr: str, daddr: str, sport: int, dport: int) -> bytes:
    """struct hpccd_flow_key of a TCP flow, as the tracker and the CCs build it."""
    return struct.pack(KEY_FMT, socket.inet_aton(saddr), socket.inet_aton(daddr),
                       socket.htons(sport), socket.htons(dport), socket.IPPROTO_TCP)


# ---- probes ----------------------------------------------------------------------------

def probe_packet(key: FlowKey, probe_seq: int, flow_id: int, ts: int,
                 dscp: int = PROBE_DSCP_DEFAULT, ecn: int = 0,
                 room: int = INT_ROOM_DEFAULT) -> bytes:
    """A TCP-side PROBE of `key`'s flow as an IPv4 packet (docs/wire-format.md,
    "TCP-side probe"), built by the probe engine's builder
    (hpccd_tcpp_probe_build, include/hpccd/tcp_probe.h): DSCP `dscp` with
    the flow's ECN bits, DF; TCP with the flow's ports, no flag, seq = probe
    number, ack 0, window 0, correct checksum; INT header (COLLECT, `room`
    empty hops), hpccd header of type PROBE (len 8, seq = probe number, ts =
    `ts`), zeroed tag slot.  The IPv4 checksum and id are left to the
    kernel (raw socket, IP_HDRINCL)."""
    buf = _tffi.new("uint8_t[]", 256)
    n = _tlib.hpccd_tcpp_probe_build(buf, 256, key.pack(), probe_seq, flow_id & 0xFFFFFFFF,
                                     ts & 0xFFFFFFFF, dscp, ecn, room)
    if n < 0:
        raise ValueError(f"probe of {key}: {os.strerror(-n)} (room {room}, at most 8)")
    return bytes(_tffi.buffer(buf, n))


# ---- counters ----------------------------------------------------------------------------

def read_counters(m: bpf.Map, names: Iterable[str],
                  only: Iterable[str] | None = None) -> dict[str, tuple[int, int]]:
    """(packets, bytes) per slot of a per-CPU struct hpccd_counter array
    (slot i named names[i]); with `only`, just those slots."""
    out = {}
    want = None if only is None else set(only)
    for i, name in enumerate(names):
        if want is not None and name not in want:
            continue
        vals = [struct.unpack(COUNTER_FMT, v) for v in m.lookup(i)]
        out[name] = (sum(v[0] for v in vals), sum(v[1] for v in vals))
    return out


# ---- registration of the struct_ops congestion controls ------------------------------------

def _cc_available() -> list[str]:
    with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
        return f.read().split()


class TcpCc:
    """The struct_ops congestion controls "hpcc" and "dctcp", shared by every
    live owner on the host (see the module docstring).

    Reference counting by the kernel: every owner holds a *shared* ``flock``
    of :data:`LOCK_FILE` while it runs (the kernel drops it however the owner
    dies).  Joining and leaving happen under an exclusive ``flock`` of
    ``tcp_cc.registry.lock`` beside it.  The first owner (nobody holds the
    shared lock: an exclusive try succeeds) unregisters what dead owners
    left, registers both, and writes the ids of the registration's maps to
    ``tcp_cc.json``; a later owner opens those maps by id.  The last owner
    to leave (an exclusive try succeeds once its own shared lock is gone)
    unregisters; an earlier one leaves the registration in place, also when
    it is the process that registered (its links are disconnected first)."""

    def __init__(self, obj_dir: str | os.PathLike | None = None,
                 names: Iterable[str] = ("hpcc", "dctcp"), lock_file: str = LOCK_FILE):
        self.obj_dir = pathlib.Path(obj_dir) if obj_dir else default_obj_dir()
        self.names = tuple(names)
        for n in self.names:
            if n not in CC_NAMES:
                raise ValueError(f"unknown congestion control {n!r} (known: {', '.join(CC_NAMES)})")
        self.lock_file = lock_file
        d = os.path.dirname(lock_file)
        self.registry_lock = os.path.join(d, "tcp_cc.registry.lock")
        self.state_file = os.path.join(d, "tcp_cc.json")
        self.objs: dict[str, bpf.BpfObject] = {}
        self.links: dict[str, bpf.Link] = {}
        self._maps: dict[tuple[str, str], bpf.Map] = {}
        self._lock_fd = -1
        self.registered = False          # this owner registered them (and holds objs, links)
        self.removed_stale: list[str] = []
        self.unregistered = False        # the last stop() unregistered them
        self._token = f"{os.getpid()}-{id(self):x}-{time.monotonic_ns()}"

    @property
    def started(self) -> bool:
        return self._lock_fd >= 0

    # ---- locks and the state file ----

    def _open(self, path: str) -> int:
        try:
            os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise TcpSideError(f"lock of the TCP congestion controls {path}: {e.strerror} "
                               f"(systemd/hpccd.service gives the daemon /run/hpccd as a "
                               f"RuntimeDirectory)") from e

    @contextlib.contextmanager
    def _registry(self, wait_s: float):
        fd = self._open(self.registry_lock)
        try:
            deadline = time.monotonic() + max(wait_s, 10.0)
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise TcpSideError(f"{self.registry_lock} stays locked") from None
                    time.sleep(0.02)
            yield
        finally:
            os.close(fd)

    @staticmethod
    def _try(fd: int, how: int) -> bool:
        try:
            fcntl.flock(fd, how | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    def _read_state(self) -> dict:
        try:
            with open(self.state_file) as f:
                st = json.load(f)
            return st if isinstance(st, dict) else {}
        except (OSError, ValueError):
            return {}

    def _write_state(self, st: dict) -> None:
        tmp = f"{self.state_file}.{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(st, f)
        os.replace(tmp, self.state_file)

    def _set_owner(self, st: dict, present: bool) -> None:
        from ..agent import ownership

        owners = [o for o in st.get("owners", []) if isinstance(o, dict)
                  and o.get("token") != self._token
                  and ownership.alive(int(o.get("pid", 0)), o.get("start"))]
        if present:
            me = os.getpid()
            owners.append({"pid": me, "start": ownership.start_time(me), "token": self._token})
        st["owners"] = owners

    def others(self) -> list[int]:
        """Pids of the other live owners (from tcp_cc.json)."""
        from ..agent import ownership

        return [int(o["pid"]) for o in self._read_state().get("owners", [])
                if isinstance(o, dict) and o.get("token") != self._token
                and ownership.alive(int(o.get("pid", 0)), o.get("start"))]

    # ---- registration ----

    @staticmethod
    def _unregister_all() -> list[str]:
        removed = []
        for _, (_, map_name) in CC_NAMES.items():
            removed += bpf.cleanup_stale([], name_prefix=map_name, pin_dir=None)["struct_ops"]
        return removed

    @classmethod
    def cleanup_stale(cls, lock_file: str = LOCK_FILE) -> list[str]:
        """Unregister struct_ops left by dead owners, only if no live owner
        holds the shared lock; returns what it unregistered."""
        self = cls(lock_file=lock_file)
        with self._registry(0.0):
            fd = self._open(self.lock_file)
            try:
                if not self._try(fd, fcntl.LOCK_EX):
                    return []                # live owners share them: theirs
                removed = self._unregister_all()
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.state_file)
                return removed
            finally:
                os.close(fd)

    def start(self, wait_s: float = 0.0) -> "TcpCc":
        """Join the owners of the registration, or register (after removing
        stale registrations) when there is none.  `wait_s`: how long to wait
        for an exclusive owner (an older hpccd) to go.  On failure nothing is
        left registered by this call and no lock is held."""
        if self.started:
            return self
        deadline = time.monotonic() + wait_s
        while True:
            fd_wait = False
            with self._registry(wait_s):
                fd = self._open(self.lock_file)
                try:
                    if self._try(fd, fcntl.LOCK_EX):
                        self._register(fd)       # nobody else: register
                    elif self._try(fd, fcntl.LOCK_SH):
                        self._join()             # live owners: use their registration
                    elif time.monotonic() >= deadline:
                        raise TcpSideError(
                            f"another process holds the TCP congestion controls "
                            f"exclusively ({self.lock_file} is locked): an hpccd "
                            f"older than shared registration; stop it first")
                    else:
                        fd_wait = True           # an exclusive holder: wait below
                    if not fd_wait:
                        st = self._read_state()
                        self._set_owner(st, True)
                        self._write_state(st)
                        self._lock_fd, fd = fd, -1
                        return self
                except BaseException:
                    self._close_handles(unregister=self.registered)
                    raise
                finally:
                    if fd >= 0:
                        os.close(fd)
            time.sleep(0.05)                     # (continue above): outside the registry lock

    def _register(self, fd: int) -> None:
        self.removed_stale = self._unregister_all()
        for n in self.names:
            if n in _cc_available():
                raise TcpSideError(f"a congestion control named {n!r} is registered by "
                                   f"someone else (not a hpccd_ struct_ops map)")
        self.registered = True
        maps: dict[str, dict[str, int]] = {}
        for n in self.names:
            path, map_name = CC_NAMES[n]
            obj = bpf.BpfObject.open(self.obj_dir / path)
            self.objs[n] = obj
            obj.load()
            self.links[n] = obj.attach_struct_ops(map_name)
            maps[n] = {m: obj.map(m).id for m in obj.map_names() if "." not in m}
        self._write_state({"registrant": os.getpid(), "maps": maps, "owners": []})
        fcntl.flock(fd, fcntl.LOCK_SH)           # EX -> SH, under the registry lock

    def _join(self) -> None:
        # The objects are not loaded (the registration's programs run), but a
        # missing or broken one fails the start as it does for the registrant.
        for n in self.names:
            bpf.BpfObject.open(self.obj_dir / CC_NAMES[n][0]).close()
        st = self._read_state()
        maps = st.get("maps", {})
        there = _cc_available()
        for n in self.names:
            if n not in there or n not in maps:
                raise TcpSideError(f"live owners hold {self.lock_file} but {n!r} is not "
                                   f"registered as {self.state_file} says: unregistered by "
                                   f"hand? Stop every hpccd, then start again")
            for m, map_id in maps[n].items():
                try:
                    h = bpf.Map.from_id(int(map_id))
                except bpf.BpfError as e:
                    raise TcpSideError(f"the shared {n!r} registration: map {m} (id "
                                       f"{map_id}): {e}") from None
                if not m.startswith(h.name):     # kernel names are cut at 15 characters
                    h.close()
                    raise TcpSideError(f"the shared {n!r} registration: map id {map_id} is "
                                       f"{h.name!r}, not {m!r}")
                self._maps[(n, m)] = h
                want = _LAYOUTS.get(m)
                if want is not None and (h.value_size, h.max_entries if want[1] else 0) != \
                        (want[0], want[1]):
                    self._close_handles(unregister=False)
                    raise TcpSideError(
                        f"the registered {n!r} is another build of hpccd (its map {m} holds "
                        f"{h.max_entries} x {h.value_size} bytes, this one's "
                        f"{want[1] or h.max_entries} x {want[0]}): stop the daemons of the "
                        f"other build first (struct_ops congestion controls are host-wide)")

    def map(self, cc_name: str, map_name: str) -> bpf.Map:
        if cc_name in self.objs:
            return self.objs[cc_name].map(map_name)
        try:
            return self._maps[(cc_name, map_name)]
        except KeyError:
            raise TcpSideError(f"{cc_name}: no map {map_name!r} (not started?)") from None

    def _close_handles(self, unregister: bool) -> list[Exception]:
        errs: list[Exception] = []
        for link in list(self.links.values()):
            try:
                if unregister:
                    link.destroy()
                else:
                    link.disconnect()            # others still use the registration
            except bpf.BpfError as e:
                errs.append(e)
        self.links.clear()
        for obj in self.objs.values():
            obj.close()
        self.objs.clear()
        for h in self._maps.values():
            h.close()
        self._maps.clear()
        self.registered = False
        return errs

    def stop(self) -> None:
        """Leave: release the shared lock; the last owner unregisters.
        Idempotent."""
        if not self.started:
            self._close_handles(unregister=False)
            return
        errs: list[Exception] = []
        with self._registry(10.0):
            st = self._read_state()
            self._set_owner(st, False)
            os.close(self._lock_fd)              # our shared lock goes
            self._lock_fd = -1
            fd = self._open(self.lock_file)
            try:
                last = self._try(fd, fcntl.LOCK_EX)
                self.unregistered = last
                if last:
                    errs += self._close_handles(unregister=True)
                    if not errs:
                        self._unregister_all()   # registered by an owner that died
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(self.state_file)
                else:
                    errs += self._close_handles(unregister=False)
                    self._write_state(st)
            finally:
                os.close(fd)
        if errs:
            raise errs[0]

    def __enter__(self) -> "TcpCc":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# ---- the probe loop ----------------------------------------------------------------------------

@dataclasses.dataclass
class FlowView:
    """One flow as the probe engine last saw it (hpccd_tcpp_flows)."""

    key: FlowKey
    raw_key: bytes
    flow_id: int
    parked: bool
    W: float
    U: float
    rate_bps: float
    T_ns: float
    W_max: float                 # the window's cap, B_NIC x T
    T_changes: int
    probes_sent: int
    probes_answered: int
    probes_lost: int
    late_responses: int
    probe_rtt_ns: int            # EWMA (1/8) of the probe RTT samples
    probe_rtt_min_ns: int
    last_rtt_ns: int
    srtt_us: int                 # the kernel's smoothed RTT of the flow
    rtt_min_us: int              # the least srtt seen
    chain_rtt_ns: int            # probes per RTT = chain_rtt_ns / chain_interval_ns
    chain_interval_ns: int
    last_update_ns: int
    cwnd_bytes: int              # the cwnd written with W: W + R x host_ns x cwnd_rtt_gain
    qdelay_ns: int               # queueing delay of the last response's INT, all hops
    host_ns: int                 # the kernel's srtt less the probe RTT: the hosts' share
    delivery_bps: float          # delivery rate on the wire over its last window (work-
                                 # conserving: bits acked x wire bytes / mss of a segment), 0: none
    pace_acked_bits: float       # bits acked over the intervals between its responses
    pace_want_bits: float        # ... and bits the rate HPCC wanted allowed in them
    pace_gain: float             # the gain its last pacing rate was written with
    path_id: int
    hops: bytes                  # the last response's hop records (wire order)
    hops_prev: bytes             # a response >= 1 ms before, same path (b"" if none)

    @property
    def pace_ratio(self) -> float | None:
        """What the flow delivered over what the rate HPCC wanted for it
        allowed (the pacer's loss is 1 - this), since it started."""
        return self.pace_acked_bits / self.pace_want_bits if self.pace_want_bits > 0 else None

    @property
    def probes_per_rtt(self) -> float | None:
        return self.chain_rtt_ns / self.chain_interval_ns if self.chain_interval_ns else None


def _view(o) -> FlowView:
    raw = bytes(_tffi.buffer(o.key, 16))
    return FlowView(FlowKey.unpack(raw), raw, o.flow_id, bool(o.parked), o.W, o.U, o.rate_bps,
                    o.T_ns, o.W_max, o.T_changes, o.probes_sent, o.probes_answered,
                    o.probes_lost, o.late_responses,
                    o.probe_rtt_ns, o.probe_rtt_min_ns, o.last_rtt_ns, o.srtt_us, o.rtt_min_us,
                    o.chain_rtt_ns, o.chain_interval_ns, o.last_update_ns, o.cwnd_bytes,
                    o.qdelay_ns, o.host_ns, o.deliv_bps,
                    o.pace_acked_bits, o.pace_want_bits, o.pace_gain, o.path_id,
                    bytes(_tffi.buffer(o.hops, 8 * o.nhop)),
                    bytes(_tffi.buffer(o.hops_prev, 8 * o.nhop_prev)))


# Upper bounds of the engine's lateness histogram buckets, seconds (the C
# array hpccd_tcpp_late_bounds_us; the last bucket, +Inf, is implicit).
LATENESS_BUCKETS = tuple(b / 1e6 for b in _tlib.hpccd_tcpp_late_bounds_us)
STATS = ("probes_sent", "probes_answered", "probes_lost", "late_responses", "send_errors",
         "windows_written", "flows_started", "flows_ended", "flows_refused", "not_hpcc", "wakeups",
         "resp_records", "wake_records", "unknown_records", "parks", "wakes_missed",
         "heartbeats", "idle_marks", "sweeps", "late_sum_ns", "late_n", "late_max_ns", "chain_rtt_ns",
         "chain_interval_ns", "chain_n", "send_calls", "send_ns", "rate_shared", "rate_lent",
         "rate_claimed", "al_intervals", "al_below_w",
         "al_limited", "al_raised", "al_held", "pace_fed", "pace_lowered", "pace_acked_bits",
         "pace_want_bits", "wake_late_sum_ns",
         "wake_late_n", "wake_lead_ns", "flows")


class TcpSide:
    """Probe, compute and enforce HPCC windows for the kernel TCP flows of
    one host (see the module docstring): the probe engine in C
    (include/hpccd/tcp_probe.h, fastpath/tcpside/), woken by ring buffers,
    driven by a thread of its own (:meth:`start_thread`) or by :meth:`step`.

    ``tracker``: the tc tracker's object (maps ``hpccd_tcp_flows``,
    ``hpccd_tcp_park``, ``hpccd_tcp_wake``), or a mapping of those names to
    maps; ``xdp``: the host XDP program's object (``hpccd_telem``,
    ``hpccd_telem_rb``), or a mapping.  ``hpcc_params``: keyword arguments
    of :class:`hpccd.core.cc.Hpcc` (T_ns, line_rate_bps, eta, ...): W_init = line
    rate x T is also the window before the first telemetry.  ``t_from_rtt``:
    each flow's T is ``t_rtt_factor`` x the largest of the configured T,
    the flow's least kernel srtt and its least probe RTT, fixed at its first
    response ([HPCC] section 5.1: T slightly greater than the maximum RTT).
    ``netns``: where probes are sent from (None: the calling thread's
    namespace).  ``tcp_cc``: a started :class:`TcpCc` to use (e.g. shared by
    several hosts of a lab, since registrations are host-wide); by default
    TcpSide makes and owns one.  ``gso_max_segs`` (0: leave it): the
    largest GSO train of the flows leaving by ``gso_dev`` (in ``netns``),
    set from start() to stop() (hpccd.tcp_side.trains: the CC cannot
    lower it, and trains as large as the lab's make the INT's U swing).
    ``trains_from_pacer`` (needs ``gso_dev``): the cap set again from the
    kernel pacer's measured lateness and the flows' slowest link and T
    (retrain(), at each publish: trains.segs_from_pacer, within one BDP of
    the flows' least RTT), for the running flows too (trains.set_gso_max_segs
    flushes the routes); ``gso_max_segs`` is the cap until the first decision.
    ``host_cap_t``: the hosts' share of a flow's RTT counts in its cwnd at
    most this x its T (engine.c, cwnd_for).  ``path_rate_gain``: the pacing
    rate R at most this x the slowest link of the path (engine.c, pace_bps).
    ``solo_rate_gain``: the same for a flow alone in its path group (with
    ``path_rate_shared``): the kernel's internal pacing loses what its timer
    is late, so a flow paced at exactly the link's rate cannot fill it.
    ``path_rate_shared``: this host's flows to one destination over one path
    share that cap, each in proportion to its W (engine.c, pace_bps).
    ``path_rate_work_conserving`` (needs ``path_rate_shared``): a flow of such
    a group gets its W's part, or what the others' delivery rates leave of
    the link if that is more (engine.c, pace_bps, deliv_sample).
    ``app_limited_hold``: an increase of W that HPCC's update computes from
    a response whose interval the flow did not use its window in (it
    delivered less than 3/4 of its pacing rate: its application or host,
    not the network, left the link idle) is not applied (engine.c,
    host_limited; RFC 7661's rule for cwnd).  Such intervals are counted
    either way (``stats``: al_intervals, al_below_w, al_limited, al_raised,
    al_held).  ``pace_gain_max`` (1..4; 1: off): the pacing rate written is
    the rate HPCC wants x a gain of the flow's own that follows the pacer's
    measured loss (what it delivered against that rate), within [1,
    pace_gain_max], lowered when a queue of the path builds (engine.c,
    pace_feedback); cwnd is not widened by it.  ``wake_lead``: a flow's
    probe-gap timer is armed as much earlier than its probe is due as the
    engine's timed waits return late (measured, smoothed; at most half the
    gap), so that probes leave about once per ``probe_gap_rtt`` x srtt
    instead of that plus the timer's lateness (engine.c, lead_for;
    ``stats``: wake_late_sum_ns, wake_late_n, wake_lead_ns)."""

    def __init__(self, tracker: Any, xdp: Any, *,
                 hpcc_params: Mapping[str, Any], netns: str | None = None,
                 cc_obj_dir: str | os.PathLike | None = None, tcp_cc: TcpCc | None = None,
                 probe_dscp: int = PROBE_DSCP_DEFAULT, room: int = INT_ROOM_DEFAULT,
                 stale_ns: int = 100_000_000, t_from_rtt: bool = True,
                 t_rtt_factor: float = 1.25,
                 probe_timeout_min_s: float = 0.001, probe_timeout_max_s: float = 0.2,
                 heartbeat_s: float = 0.01, sweep_s: float = 0.1, max_flows: int = 4096,
                 probe_gap_rtt: float = 1.0, cwnd_rtt_gain: float = CWND_RTT_GAIN_DEFAULT,
                 nice: int = -10, lock_wait_s: float = 0.0,
                 gso_max_segs: int = 0, gso_dev: str | None = None,
                 host_cap_t: float = HOST_CAP_T_DEFAULT,
                 path_rate_gain: float = PATH_RATE_GAIN_DEFAULT,
                 solo_rate_gain: float = SOLO_RATE_GAIN_DEFAULT,
                 path_rate_shared: bool = True,
                 path_rate_work_conserving: bool = False,
                 app_limited_hold: bool = False,
                 pace_gain_max: float = PACE_GAIN_MAX_DEFAULT,
                 trains_from_pacer: bool = False, wake_lead: bool = True):
        def maps(src, names):
            get = src.get if isinstance(src, Mapping) else src.map
            return [get(n) for n in names]

        self.flows_map, self.park_map, self.wake_map = maps(
            tracker, ("hpccd_tcp_flows", "hpccd_tcp_park", "hpccd_tcp_wake"))
        self.telem_map, self.resp_map = maps(xdp, ("hpccd_telem", "hpccd_telem_rb"))
        self.hpcc_params = dict(hpcc_params)
        probe = cc.Hpcc(**self.hpcc_params)          # refuse bad parameters now
        self.T_ns = probe.T
        self.w_init = probe.w_init
        if t_rtt_factor < 1.0:
            raise ValueError(f"t_rtt_factor must be >= 1 ([HPCC] section 5.1: T slightly "
                             f"greater than the maximum RTT), got {t_rtt_factor}")
        self.netns = netns
        self.cc_obj_dir = cc_obj_dir
        self._own_cc = tcp_cc is None
        self.tcp_cc = tcp_cc
        self.probe_dscp = probe_dscp
        self.room = room
        self.stale_ns = int(stale_ns)
        self.t_from_rtt = bool(t_from_rtt)
        self.t_rtt_factor = float(t_rtt_factor)
        self.timeout_min_ns = int(probe_timeout_min_s * 1e9)
        self.timeout_max_ns = int(probe_timeout_max_s * 1e9)
        self.heartbeat_ns = int(heartbeat_s * 1e9)
        self.sweep_ns = int(sweep_s * 1e9)
        self.max_flows = int(max_flows)
        self.nice = int(nice)
        self.probe_gap_rtt = _within("probe_gap_rtt", probe_gap_rtt, 0, 16, " (RTTs)")
        self.cwnd_rtt_gain = _within("cwnd_rtt_gain", cwnd_rtt_gain, 0, 16)
        self.host_cap_t = _within("host_cap_t", host_cap_t, 0, 64, " (T)")
        self.path_rate_gain = _within("path_rate_gain", path_rate_gain, 0.1, 4)
        self.solo_rate_gain = _within("solo_rate_gain", solo_rate_gain, 0.1, 4)
        self.pace_gain_max = _within("pace_gain_max", pace_gain_max, 1, 4)
        self.path_rate_shared = bool(path_rate_shared)
        if path_rate_work_conserving and not path_rate_shared:
            raise ValueError("path_rate_work_conserving needs path_rate_shared: it lends the "
                             "part of a shared path rate a flow leaves unused")
        self.path_rate_work_conserving = bool(path_rate_work_conserving)
        self.app_limited_hold = bool(app_limited_hold)
        self.wake_lead = bool(wake_lead)
        self.lock_wait_s = lock_wait_s
        # the trains of the host's flows: gso_dev's gso_max_segs capped while
        # this runs (hpccd.tcp_side.trains; 0: the interface left alone)
        self.trains = TrainCap(gso_dev, gso_max_segs, netns)
        if trains_from_pacer and not gso_dev:
            raise ValueError("trains_from_pacer needs the interface the flows leave by "
                             "(gso_dev)")
        self.trains_from_pacer = bool(trains_from_pacer)
        self._train_from: Lateness | None = None     # the pacer's reading at the last decision
        self._train_q_from: list[int] | None = None   # the queue histogram's, then
        self.train_decision: dict[str, Any] = {}     # the last one, for status()
        # how late the kernel's pacing timers fire (hpccd.tcp_side.pacer):
        # what a kernel flow's trains must cover; None where it cannot be
        # measured (said once in the log)
        self.pacer: PacerMeter | None = None
        self._pacer_from: Lateness | None = None     # its reading at start()
        # on_int(path_id, hop index, 8-byte hop record, the same hop's record
        # of hops_prev or None): called by publish_int() for each flow
        # updated since (the daemon's hpccd_int_hop_* metrics)
        self.on_int = None
        self._int_seen: dict[bytes, int] = {}
        self._sock: socket.socket | None = None
        self._cfg: bpf.Map | None = None
        self._eng = None
        self._thread: threading.Thread | None = None
        self._stop_evt = threading.Event()
        self._lock = threading.Lock()                # start/stop vs the thread

    # ---- lifecycle ----

    def _config(self):
        c = _tffi.new("struct hpccd_tcpp_config *")
        _tlib.hpccd_hpcc_params_default(_tffi.addressof(c, "hpcc"))
        cc._fill(c.hpcc, cc.Hpcc.PARAMS, self.hpcc_params)      # checked in __init__
        c.tracker_fd, c.park_fd, c.wake_rb_fd = (self.flows_map.fd, self.park_map.fd,
                                                 self.wake_map.fd)
        c.telem_fd, c.resp_rb_fd = self.telem_map.fd, self.resp_map.fd
        c.win_fd = self.tcp_cc.map("hpcc", "hpccd_tcp_win").fd
        c.cfg_fd = self._cfg.fd
        c.cst_fd = self.tcp_cc.map("hpcc", "hpccd_tcp_cst").fd
        c.sock_fd = self._sock.fileno()
        c.stale_ns, c.heartbeat_ns, c.sweep_ns = self.stale_ns, self.heartbeat_ns, self.sweep_ns
        c.timeout_min_ns, c.timeout_max_ns = self.timeout_min_ns, self.timeout_max_ns
        c.max_flows = self.max_flows
        c.t_from_rtt, c.t_rtt_factor = int(self.t_from_rtt), self.t_rtt_factor
        c.probe_gap_rtt = self.probe_gap_rtt
        c.cwnd_rtt_gain = self.cwnd_rtt_gain
        c.host_cap_t = self.host_cap_t
        c.path_rate_gain = self.path_rate_gain
        c.solo_rate_gain = self.solo_rate_gain
        c.pace_gain_max = self.pace_gain_max
        c.path_rate_shared = int(self.path_rate_shared)
        c.path_rate_wc = int(self.path_rate_work_conserving)
        c.app_limited_hold = int(self.app_limited_hold)
        c.wake_lead = int(self.wake_lead)
        c.probe_dscp, c.room = self.probe_dscp, self.room
        return c

    def start(self) -> "TcpSide":
        """Register the CCs (unless given), open the probe socket, make the
        engine (which writes the configuration and the first heartbeat)."""
        try:
            if self.tcp_cc is None:
                self.tcp_cc = TcpCc(self.cc_obj_dir)
            if not self.tcp_cc.started:
                self.tcp_cc.start(self.lock_wait_s)
            self._cfg = self.tcp_cc.map("hpcc", "hpccd_tcp_cfg")
            ctx = bpf.in_netns(self.netns) if self.netns else contextlib.nullcontext()
            with ctx:
                self._sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
            self._sock.setblocking(False)
            try:
                self.pacer = _pacer.acquire()        # the process's, shared
                self._pacer_from = self.pacer.read()
            except PacerError as e:
                log.warning("tcp_side: the kernel pacer's lateness is not measured: %s", e)
            try:
                self.trains.apply()
            except (TrainCapError, bpf.BpfError) as e:
                raise TcpSideError(f"tcp_side.gso_max_segs: {e}") from e
            out = _tffi.new("struct hpccd_tcpp **")
            rc = _tlib.hpccd_tcpp_new(self._config(), out)
            if rc < 0:
                raise TcpSideError(f"probe engine: {os.strerror(-rc)}")
            self._eng = out[0]
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the thread, delete this host's windows, telemetry and park
        entries, clear the heartbeat, unregister the CCs if owned, close the
        socket.  Idempotent."""
        self._stop_evt.set()
        if self._eng is not None:
            _tlib.hpccd_tcpp_stop(self._eng)
        t, self._thread = self._thread, None
        if t is not None and t is not threading.current_thread():
            t.join(timeout=10)
        with self._lock:
            if self._eng is not None:
                _tlib.hpccd_tcpp_free(self._eng)
                self._eng = None
            # The heartbeat is host-wide: zeroed only when no other owner runs.
            # With others, idle_ns is set: this engine's last heartbeat may be
            # the last one written, and an idle owner writes none until a flow
            # of its own wakes it (the CC trusts it for a young flow).
            if self._cfg is not None:
                with contextlib.suppress(bpf.BpfError):
                    if not (self.tcp_cc and self.tcp_cc.others()):
                        self._cfg.update(0, bytes(struct.calcsize(CFG_FMT)))
                    elif (raw := self._cfg.lookup(0)) is not None:
                        *head, _ = struct.unpack(CFG_FMT, raw)
                        self._cfg.update(0, struct.pack(CFG_FMT, *head, time.monotonic_ns()))
            self._cfg = None
            if self._sock is not None:
                self._sock.close()
                self._sock = None
            with contextlib.suppress(bpf.BpfError):
                self.trains.restore()
            if self.pacer is not None:
                _pacer.release(self.pacer)
                self.pacer = None
            if self._own_cc and self.tcp_cc is not None:
                self.tcp_cc.stop()

    def __enter__(self) -> "TcpSide":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- running ----

    def run(self) -> None:
        """Serve the engine's events until stop(); a failing engine call is
        logged and retried after 100 ms.  The thread asks for nice
        ``self.nice`` (-10 by default): on a loaded host a probe engine that
        waits for a core delays every flow's next window, and past stale_ns
        the CC falls back to Reno; it sleeps whenever it has nothing to do."""
        if self.nice:
            try:
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self.nice)
            except OSError as e:
                log.info("tcp_side probe engine: nice %d refused (%s); runs at 0",
                         self.nice, e.strerror)
        while not self._stop_evt.is_set():
            eng = self._eng
            if eng is None:
                return
            rc = _tlib.hpccd_tcpp_run(eng, -1)            # the GIL is released inside
            if rc < 0 and not self._stop_evt.is_set():
                log.error("tcp_side probe engine: %s; again in 100 ms", os.strerror(-rc))
                self._stop_evt.wait(0.1)

    def start_thread(self) -> threading.Thread:
        self._stop_evt.clear()
        self._thread = threading.Thread(target=self.run, name="hpccd-tcp-side", daemon=True)
        self._thread.start()
        return self._thread

    def step(self, timeout_s: float = 0.0) -> None:
        """Serve what is pending (waiting up to `timeout_s` for more), in
        the calling thread; for tests and callers without a thread."""
        if self._eng is None:
            return
        rc = _tlib.hpccd_tcpp_run(self._eng, int(timeout_s * 1e9))
        if rc < 0:
            raise TcpSideError(f"probe engine: {os.strerror(-rc)}")

    # ---- observability ----

    def retrain(self, flows: Iterable[Any] | None = None) -> int | None:
        """With trains_from_pacer: the interface's train cap set again
        (trains.segs_from_pacer) from the pacing timers' lateness since the
        last decision and the slowest link and least T of `flows` (FlowView;
        default: the flows now); the running flows take it at their next
        send (trains.set_gso_max_segs).  Returns the new cap when it
        changed."""
        if not self.trains_from_pacer:
            return None
        now = self.pacer_lateness()
        if now is None:                      # not measured here, or stopped
            return None
        win = now - self._train_from if self._train_from is not None else now
        if win.n < RETRAIN_EXPIRIES:         # the flows' paths read only when it may decide
            return None
        paths, rtts = [], []
        for v in (self.flows.values() if flows is None else flows):
            codes = [cc.hop_unpack(v.hops[i:i + 8])["speed_code"]
                     for i in range(0, len(v.hops) - 7, 8)]
            bps = [cc.speed_mbps(c) * 1e6 for c in codes if c]
            if bps:
                paths.append((min(bps), float(v.T_ns)))
            # the path's base RTT as the flow's data sees it: the kernel's
            # least RTT of the flow (its probes' least RTT only without one:
            # reflected in XDP at the far host, they skip its stack, 9 us in
            # the lab where TCP's least is 20-50 and ICMP's 24-34)
            rtts.append((v.rtt_min_us * 1000, v.probe_rtt_min_ns))
        kernel = [k for k, _ in rtts if k > 0]
        probe = [p for _, p in rtts if p > 0]
        base = float(min(kernel or probe)) if kernel or probe else 0.0
        qh = self.stats["qlen_hist"]
        q0 = self._train_q_from or [0] * len(qh)
        queue = [b - a for a, b in zip(q0, qh)]
        segs = segs_from_pacer(win, paths, base_rtt_ns=base, queue=queue,
                               current=self.trains.segs)
        if segs is None:
            return None
        self._train_from, self._train_q_from = now, qh
        before = self.trains.segs
        try:
            cap = self.trains.retarget(segs)
        except (TrainCapError, bpf.BpfError) as e:
            log.warning("tcp_side: trains from the pacer: %s", e)
            return None
        self.train_decision = {"segs": cap, "wanted": segs,
                               "pacer_late_us": win.quantile_ns(PACER_LATE_Q) / 1e3,
                               "expiries": win.n, "bottleneck_bps": min(b for b, _ in paths),
                               "T_us": min(t for _, t in paths) / 1e3,
                               "base_rtt_us": base / 1e3, "responses": sum(queue),
                               # the responses' largest queue at QUEUE_Q, frames
                               # (None: too few responses to judge by)
                               "queue_frames": queue_frames(queue)}
        if cap == before:
            return None
        log.info("tcp_side: trains of %d segments for the flows (the pacer's p%.0f %.0f us "
                 "over %d expiries, slowest link %.0f Mbit/s, T %.0f us, base RTT %.0f us)",
                 cap, PACER_LATE_Q * 100, self.train_decision["pacer_late_us"], win.n,
                 self.train_decision["bottleneck_bps"] / 1e6, self.train_decision["T_us"],
                 base / 1e3)
        return cap

    def pacer_lateness(self) -> Lateness | None:
        """The kernel's pacing timers' lateness since start() (every paced
        TCP flow of the host), or None where it is not measured."""
        with self._lock:
            if self.pacer is None:
                return None
            return self.pacer.read() - self._pacer_from

    def pace_bits(self) -> tuple[int, int]:
        """The engine's pace_acked_bits and pace_want_bits (STATS), alone:
        what HPCC's written rates allowed its flows and what they had acked."""
        if self._eng is None:
            return 0, 0
        s = _tffi.new("struct hpccd_tcpp_stats *")
        _tlib.hpccd_tcpp_stats(self._eng, s)
        return s.pace_acked_bits, s.pace_want_bits

    @property
    def stats(self) -> dict[str, int]:
        if self._eng is None:
            return {k: 0 for k in STATS}
        s = _tffi.new("struct hpccd_tcpp_stats *")
        _tlib.hpccd_tcpp_stats(self._eng, s)
        out = {k: getattr(s, k) for k in STATS}
        out["late_hist"] = list(s.late_hist)
        out["qlen_hist"] = list(s.qlen_hist)
        return out

    @property
    def flows(self) -> dict[bytes, FlowView]:
        if self._eng is None:
            return {}
        st = _tffi.new("struct hpccd_tcpp_stats *")
        _tlib.hpccd_tcpp_stats(self._eng, st)
        if not st.flows:
            return {}
        n = min(self.max_flows, st.flows + 16)      # room for flows that start meanwhile
        buf = _tffi.new("struct hpccd_tcpp_flow_info[]", n)
        k = _tlib.hpccd_tcpp_flows(self._eng, buf, n)
        return {v.raw_key: v for v in (_view(buf[i]) for i in range(k))}

    @property
    def last_probe_rtt_us(self) -> float:
        """The probe RTT EWMA of the most recently updated flow."""
        fl = sorted(self.flows.values(), key=lambda v: v.last_update_ns)
        return fl[-1].probe_rtt_ns / 1e3 if fl else 0.0

    def publish_int(self, flows: Iterable[FlowView] | None = None) -> None:
        """on_int(...) for every hop of each flow's last response, with the
        same hop's record of hops_prev (a response at least
        HPCCD_INT_UTIL_SPAN_NS before it: the pair gives the hop's
        utilisation; None without one), when new since the previous call."""
        if self.on_int is None:
            return
        for v in (self.flows.values() if flows is None else flows):
            if v.hops and self._int_seen.get(v.raw_key) != v.last_update_ns:
                self._int_seen[v.raw_key] = v.last_update_ns
                for i in range(len(v.hops) // 8):
                    prev = v.hops_prev[8 * i:8 * i + 8]
                    self.on_int(v.path_id, i, v.hops[8 * i:8 * i + 8],
                                prev if len(prev) == 8 else None)

    def counters(self, only: Iterable[str] | None = None) -> dict[str, dict[str, tuple[int, int]]]:
        """The CCs' per-CPU counters, summed: {"hpcc": {...}, "dctcp": {...}};
        with `only`, just the slots of those names (read_counters)."""
        out = {}
        if self.tcp_cc is not None and self.tcp_cc.started and "hpcc" in self.tcp_cc.names:
            out["hpcc"] = read_counters(self.tcp_cc.map("hpcc", "hpccd_tcpc_cnt"), HPCC_COUNTERS,
                                        only)
        if self.tcp_cc is not None and self.tcp_cc.started and "dctcp" in self.tcp_cc.names:
            out["dctcp"] = read_counters(self.tcp_cc.map("dctcp", "hpccd_dctcp_cnt"),
                                         DCTCP_COUNTERS, only)
        return out

    def status(self) -> dict[str, Any]:
        """The engine's counters (STATS), each flow's state ("per_flow") and,
        with trains_from_pacer, the last train decision ("trains")."""
        flows = [{"flow": str(v.key), "W_bytes": v.W, "cwnd_bytes": v.cwnd_bytes, "U": v.U,
                  "rate_bps": v.rate_bps, "T_us": v.T_ns / 1e3,
                  "qdelay_us": v.qdelay_ns / 1e3, "host_us": v.host_ns / 1e3,
                  "delivery_bps": v.delivery_bps, "pace_ratio": v.pace_ratio,
                  "pace_gain": v.pace_gain,
                  "probes_sent": v.probes_sent, "probes_answered": v.probes_answered,
                  "probes_lost": v.probes_lost, "probe_rtt_us": v.probe_rtt_ns / 1e3,
                  "probe_rtt_min_us": v.probe_rtt_min_ns / 1e3, "srtt_us": v.srtt_us,
                  "rtt_min_us": v.rtt_min_us, "probes_per_rtt": v.probes_per_rtt,
                  "parked": v.parked} for v in self.flows.values()]
        st = self.stats
        st.pop("late_hist")
        st.pop("qlen_hist")
        out = {**st, "per_flow": flows}          # st's "flows" is their count
        if self.trains_from_pacer:
            out["trains"] = dict(self.train_decision, cap=self.trains.segs)
        return out


# ---- daemon component (hpccd.agent.component) ------------------------------------------

try:
    from ..agent.component import Component as _Component
except ImportError:            # the daemon core is not there: TcpSide stands alone
    _Component = None

if _Component is not None:
    class TcpSideComponent(_Component):
        """TcpSide in the daemon: the first interface with a tc tracker gives
        the flow and telemetry maps; HPCC parameters from the configuration's
        [hpcc] table; the probe loop runs in its own thread (probes per RTT
        cannot wait for the core's poll interval); poll() publishes."""

        name = "tcp_side"
        poll_interval = 0.1

        @classmethod
        def cleanup_stale(cls, cfg) -> list[str]:
            return TcpCc.cleanup_stale()        # only when no live daemon shares them

        def start(self) -> None:
            ifc = next((i for i in self.ctx.interfaces.values() if i.tc is not None), None)
            if ifc is None:
                raise TcpSideError("tcp_side needs an interface with tc_tracker = true")
            params = dict(getattr(self.ctx.config, "params", {}).get("hpcc", {}))
            opts = getattr(self.ctx.config, "tcp_side_opts", None)     # [tcp_side]
            self.side = TcpSide({n: ifc.tc_map(n) for n in TRACKER_MAPS},
                                {n: ifc.xdp_map(n) for n in XDP_MAPS},
                                hpcc_params=params, netns=self.ctx.netns,
                                cc_obj_dir=getattr(self.ctx, "bpf_dir", None),
                                probe_dscp=getattr(self.ctx.config, "probe_dscp",
                                                   PROBE_DSCP_DEFAULT),
                                gso_dev=ifc.name,
                                **(opts.kwargs() if opts is not None else {}))
            self.side.on_int = self.ctx.flows.observe_hop
            self.side.start()
            self.side.start_thread()

        def poll(self, now: float) -> float | None:
            """Publish the kernel TCP flows TcpSide runs (the daemon's flow
            table: hpccctl flows, the metrics): new ones added, their W, R,
            U, RTTs and probe counters updated, ended ones finished.  With
            no flow, polled less and less often, up to once a second
            (hpccd.agent.component.idle_backoff): a new flow appears in the table
            within that, while the engine probes it from its first segment."""
            side = getattr(self, "side", None)
            if side is None:
                return None
            from ..agent.component import idle_backoff
            from ..agent.flows import FlowLimitError

            ids = self.__dict__.setdefault("_ids", {})
            live = side.flows
            self._idle = idle_backoff(getattr(self, "_idle", None), self.poll_interval,
                                      bool(live or ids))
            side.publish_int(live.values())
            side.retrain(live.values())
            for raw, fs in live.items():
                fid = ids.get(raw)
                if fid is None:
                    k = fs.key
                    pol = self.ctx.config.policy(k.daddr)
                    try:
                        fid = ids[raw] = self.ctx.flows.add(
                            kind="tcp", role="sender", saddr=k.saddr, sport=k.sport,
                            daddr=k.daddr, dport=k.dport, proto=6, peer=pol.peer,
                            algorithm="hpcc", component=self.name).id
                    except FlowLimitError:
                        continue                 # counted by the table; the flow still runs
                self.ctx.flows.update(
                    fid, window_bytes=fs.W or float(side.w_init),
                    rate_bps=fs.rate_bps, U=fs.U,
                    rtt_s=fs.srtt_us / 1e6 if fs.srtt_us else None,
                    probe_rtt_s=fs.probe_rtt_ns / 1e9 if fs.probe_rtt_ns else None,
                    probes_sent=fs.probes_sent, probes_answered=fs.probes_answered,
                    probes_lost=fs.probes_lost)
            for raw in [r for r in ids if r not in live]:      # ended: the engine let go
                self.ctx.flows.finish(ids.pop(raw), completed=True)
            return self._idle

        def probe_metrics(self) -> dict[str, Any] | None:
            """The probe engine's figures for the metrics (hpccd.agent.metrics):
            its counters, the lateness histogram, and the CC's per-ACK mode
            counters (the Reno fallback among them)."""
            side = getattr(self, "side", None)
            if side is None:
                return None
            return {"stats": side.stats, "cc": side.counters().get("hpcc", {}),
                    "pacer": side.pacer_lateness()}

        def status(self) -> dict[str, Any]:
            return self.side.status() if getattr(self, "side", None) else {}

        def stop(self) -> None:
            side = getattr(self, "side", None)
            if side is not None:
                side.stop()

    COMPONENT = TcpSideComponent
