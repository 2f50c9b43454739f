"""TCP-side deployment of HPCC++ ([HPCC++2022] section 7.2).

docs/architecture.md ("Kernel TCP flows") places it among the other paths.

Kernel TCP flows of unmodified applications (``iperf3 -C hpcc``) get their
window from HPCC: this module probes each active flow once per RTT with a
TCP-side probe (its own 5-tuple, DSCP 45, no TCP flag, INT padding:
docs/wire-format.md), reads the responses that the host's XDP program
(ebpf/xdp_host.bpf.c) verified and stored in ``hpccd_telem``, runs the HPCC
core of hpccd.cc on their INT (the same C code as the native transport, [HPCC]
Algorithm 1), and writes W and R = W / T into ``hpccd_tcp_win``, where
the struct_ops congestion control "hpcc" (ebpf/tcp_hpcc.bpf.c) applies them
on every ACK.  It also registers "dctcp" (ebpf/tcp_dctcp.bpf.c, [DCTCP]).

Pieces:

- :class:`TcpCc` registers the two struct_ops congestion controls.  They
  are host-wide (every network namespace sees one "hpcc"), so one process
  at a time may own them: :meth:`TcpCc.start` takes an exclusive ``flock``
  on :data:`LOCK_FILE` (released by the kernel when the owner dies), and
  only then unregisters what a dead owner left registered (struct_ops maps
  named ``hpccd_tcp_hpcc`` / ``hpccd_tcp_dctcp``, found by hpccd.bpf's
  clean-up), so a live owner's registration is never torn down.
  :meth:`TcpCc.stop` unregisters and releases the lock: nothing is left.
- :class:`TcpSide` is the probe loop: :meth:`start`, :meth:`step` (one
  pass, never blocks), :meth:`stop`, and :meth:`run` / :meth:`start_thread`
  to step in a thread of its own until stopped.
- :data:`COMPONENT` plugs it into the daemon (hpccd.component).

Per flow (key: struct hpccd_flow_key, the tc tracker's), in :meth:`step`:

1. A flow is *active* while the tracker (``hpccd_tcp_flows``) has seen its
   data within ``idle_s`` and no FIN/RST, and the "hpcc" congestion control
   runs it (an entry in ``hpccd_tcp_cst``, written by the CC at init and on
   every ACK, deleted at release).  Flows of other congestion controls are
   not probed: nothing would apply their W.
2. Probe per RTT only while data is in flight ([HPCC++2022] section 6.2.1):
   the next probe leaves when the response to the last one has arrived
   and bytes are in flight (the CC's snd_nxt != snd_una as of the last ACK,
   or the tracker's snd_nxt, updated per segment sent, beyond the CC's
   snd_una), or when the last one timed out (``timeout`` = 3 x the larger of srtt and the probe RTT, within
   [probe_timeout_min_s, probe_timeout_max_s]); timed-out probes are counted
   as lost.  The effective interval is max(RTT, the step period): Python
   is not on the per-packet path, and a probe costs one sendto().
3. A response (``responses`` grew and ``probe_seq`` is the outstanding
   probe's number) goes to ``Hpcc.new_ack_wire`` with seq = snd_nxt = the
   probe number: every response is the first feedback of a new RTT, so it
   updates the reference window W^c (Algorithm 1 lines 22-24), once per
   RTT as [HPCC++2020] asks.  Its local time is the XDP reception time.
4. The new W goes to ``hpccd_tcp_win`` with the telemetry's time: the CC
   treats a W older than ``stale_ns`` as stale and falls back to Reno (see
   ebpf/tcp_hpcc.bpf.c and docs/tcp-side.md for why).
5. A flow that ended (CC state gone, FIN/RST, idle) has its window and
   telemetry entries deleted.

The daemon's heartbeat (``hpccd_tcp_cfg.heartbeat_ns``) is refreshed at most
every ``heartbeat_s``; the CC falls back when it is older than ``stale_ns``.

Probes are sent from a raw IPv4 socket (IPPROTO_RAW) opened in the
daemon's network namespace, so they leave through the same routing, tc
tracker (which recognises and skips them), and queues as the flow.
"""
from __future__ import annotations

import contextlib
import dataclasses
import errno
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

from . import bpf, cc
from .checksum import internet_checksum

__all__ = ["TcpCc", "TcpSide", "TcpSideError", "FlowKey", "flow_key", "probe_packet",
           "HPCC_COUNTERS", "DCTCP_COUNTERS", "LOCK_FILE", "CC_NAMES", "WIN_FMT", "CFG_FMT",
           "CST_FMT", "DCTCP_ST_FMT", "TCP_FLOW_FMT", "TELEM_FMT", "default_obj_dir"]

log = logging.getLogger("hpccd.tcp_side")

# ---- layouts (ebpf/hpccd_tcp_cc.h, ebpf/hpccd_kern_user.h) ---------------------
# tests/bpf/test_tcp_cc.py checks these against the headers' static asserts.

KEY_FMT = "=4s4sHHB3x"                # struct hpccd_flow_key (network order fields)
WIN_FMT = "=QQQQ"                     # struct hpccd_tcp_win
CFG_FMT = "=QQQQ"                     # struct hpccd_tcp_cc_cfg
CST_FMT = "=QQQIIIIIIII"              # struct hpccd_tcp_cc_state
DCTCP_ST_FMT = "=QQQQIIIIII"          # struct hpccd_tcp_dctcp_state
TCP_FLOW_FMT = "=QQQQQIB3x"           # struct hpccd_tcp_flow (tc_tracker)
TELEM_HOPS = 8                        # HPCCD_INT_MAX_HOPS
TELEM_FMT = f"={TELEM_HOPS * 8}sQQQIIHBBB3x"   # struct hpccd_tcp_telem
COUNTER_FMT = "=QQ"                   # struct hpccd_counter

# Counter slots, in the order of the enums of ebpf/hpccd_tcp_cc.h.
HPCC_COUNTERS = ("used_hpcc", "used_winit", "fb_stale", "fb_no_entry", "fb_no_daemon",
                 "init", "release", "enter_fallback", "leave_fallback", "loss", "state_fail")
DCTCP_COUNTERS = ("init", "no_ecn", "ack", "ack_ece", "window", "ecn_reduction",
                  "loss_recovery", "loss_rto", "ce_change", "ce_flush")
MODES = {0: "none", 1: "hpcc", 2: "winit", 3: "fallback"}   # enum hpccd_tcp_cc_mode

# The two congestion controls: object file, struct_ops map, congestion control name.
CC_NAMES = {"hpcc": ("tcp_hpcc.bpf.o", "hpccd_tcp_hpcc"),
            "dctcp": ("tcp_dctcp.bpf.o", "hpccd_tcp_dctcp")}
LOCK_FILE = "/run/hpccd/tcp_cc.lock"

PROBE_DSCP_DEFAULT = 45
INT_ROOM_DEFAULT = 5
_TCP_FIN, _TCP_RST = 0x01, 0x04
_IPPROTO_TCP = 6


class TcpSideError(RuntimeError):
    pass


def default_obj_dir() -> pathlib.Path:
    """Where the loader finds compiled objects (hpccd.bpf.OBJ_DIR), else
    build/ebpf of the source tree this package is in."""
    d = getattr(bpf, "OBJ_DIR", None)
    if d:
        return pathlib.Path(d)
    return pathlib.Path(__file__).resolve().parents[2] / "build" / "ebpf"


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
                       socket.htons(sport), socket.htons(dport), _IPPROTO_TCP)


# ---- probes ----------------------------------------------------------------------------

def probe_packet(key: FlowKey, probe_seq: int, flow_id: int, ts: int,
                 dscp: int = PROBE_DSCP_DEFAULT, ecn: int = 0,
                 room: int = INT_ROOM_DEFAULT) -> bytes:
    """A TCP-side PROBE of `key`'s flow as an IPv4 packet (docs/wire-format.md,
    "TCP-side probe"): DSCP `dscp` with the flow's ECN bits, DF; TCP with the
    flow's ports, no flag, seq = probe number, ack 0, window 0, correct
    checksum; INT header (COLLECT, `room` empty hops), hpccd header of type
    PROBE (len 8, seq = probe number, ts = `ts`), zeroed tag slot.  The IPv4
    checksum and id are left to the kernel (raw socket, IP_HDRINCL)."""
    body = struct.pack("!BBH", 0xC0 | 1, room & 0xF, 0x8 << 12) + bytes(8 * room)
    body += struct.pack("!BBHIIIIIII", (1 << 4) | 4, 0, 8, flow_id & 0xFFFFFFFF,
                        probe_seq >> 32, probe_seq & 0xFFFFFFFF, 0, 0, ts & 0xFFFFFFFF, 0)
    body += bytes(8)                                          # tag slot
    src, dst = socket.inet_aton(key.saddr), socket.inet_aton(key.daddr)
    tcp = struct.pack("!HHIIBBHHH", key.sport, key.dport, probe_seq & 0xFFFFFFFF, 0,
                      5 << 4, 0, 0, 0, 0)
    pseudo = src + dst + struct.pack("!BBH", 0, _IPPROTO_TCP, len(tcp) + len(body))
    csum = internet_checksum(pseudo + tcp + body)
    tcp = tcp[:16] + struct.pack("!H", csum) + tcp[18:]
    total = 20 + len(tcp) + len(body)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, (dscp << 2) | (ecn & 3), total, 0, 0x4000, 64,
                     _IPPROTO_TCP, 0, src, dst)
    return ip + tcp + body


# ---- counters ----------------------------------------------------------------------------

def read_counters(m: bpf.Map, names: Iterable[str]) -> dict[str, tuple[int, int]]:
    """(packets, bytes) per slot of a per-CPU struct hpccd_counter array."""
    out = {}
    for i, name in enumerate(names):
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
        from . import ownership

        owners = [o for o in st.get("owners", []) if isinstance(o, dict)
                  and o.get("token") != self._token
                  and ownership.alive(int(o.get("pid", 0)), o.get("start"))]
        if present:
            me = os.getpid()
            owners.append({"pid": me, "start": ownership.start_time(me), "token": self._token})
        st["owners"] = owners

    def others(self) -> list[int]:
        """Pids of the other live owners (from tcp_cc.json)."""
        from . import ownership

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
class FlowState:
    key: FlowKey
    raw_key: bytes
    hpcc: cc.Hpcc
    flow_id: int
    first_ns: int
    probe_seq: int = 0               # number of the last probe sent (0: none yet)
    probe_sent_ns: int = 0
    outstanding: bool = False
    responses_seen: int = 0          # hpccd_telem.responses already consumed
    probes_sent: int = 0
    probes_answered: int = 0
    probes_lost: int = 0
    late_responses: int = 0          # answers to a probe already declared lost
    overflows: int = 0
    probe_rtt_ns: float = 0.0        # EWMA of probe RTT samples
    last_rtt_ns: int = 0
    srtt_us: int = 0
    mss: int = 0
    in_flight: bool = False
    snd_una: int = 0
    last_w: float = 0.0
    last_update_ns: int = 0
    windows_written: int = 0
    ecn: int = 0


class TcpSide:
    """Probe, compute and enforce HPCC windows for the kernel TCP flows of
    one host (see the module docstring).

    ``flows_map``: the tc tracker's ``hpccd_tcp_flows``; ``telem_map``: the
    host XDP program's ``hpccd_telem``.  ``hpcc_params``: keyword arguments
    of :class:`hpccd.cc.Hpcc` (T_ns, line_rate_bps, eta, ...): W_init = line
    rate x T is also the window before the first telemetry.  ``netns``:
    where probes are sent from (None: the calling thread's namespace).
    ``cc``: a started :class:`TcpCc` to use (e.g. shared by several hosts
    of a lab, since registrations are host-wide); by default TcpSide makes
    and owns one."""

    def __init__(self, flows_map: bpf.Map, telem_map: bpf.Map, *,
                 hpcc_params: Mapping[str, Any], netns: str | None = None,
                 cc_obj_dir: str | os.PathLike | None = None, tcp_cc: TcpCc | None = None,
                 probe_dscp: int = PROBE_DSCP_DEFAULT, room: int = INT_ROOM_DEFAULT,
                 stale_ns: int = 100_000_000, idle_s: float = 1.0,
                 probe_timeout_min_s: float = 0.001, probe_timeout_max_s: float = 0.2,
                 heartbeat_s: float = 0.01, scan_s: float = 0.005, lock_wait_s: float = 0.0):
        self.flows_map = flows_map
        self.telem_map = telem_map
        self.hpcc_params = dict(hpcc_params)
        cc.Hpcc(**self.hpcc_params)                  # refuse bad parameters now
        self.netns = netns
        self.cc_obj_dir = cc_obj_dir
        self._own_cc = tcp_cc is None
        self.tcp_cc = tcp_cc
        self.probe_dscp = probe_dscp
        self.room = room
        self.stale_ns = int(stale_ns)
        self.idle_ns = int(idle_s * 1e9)
        self.timeout_min_ns = int(probe_timeout_min_s * 1e9)
        self.timeout_max_ns = int(probe_timeout_max_s * 1e9)
        self.heartbeat_ns = int(heartbeat_s * 1e9)
        self.scan_ns = int(scan_s * 1e9)
        self.lock_wait_s = lock_wait_s
        self.flows: dict[bytes, FlowState] = {}
        # on_int(path_id, hop index, 8-byte hop record) for every hop of
        # every response fed to HPCC (the daemon's hpccd_int_hop_* metrics)
        self.on_int = None
        self.ended: list[FlowState] = []             # for the owner to collect (drain_ended)
        self.last_probe_rtt_us = 0.0                 # probe RTT EWMA of the last flow answered
        self.stats = {"probes_sent": 0, "probes_answered": 0, "probes_lost": 0,
                      "late_responses": 0, "send_errors": 0, "windows_written": 0,
                      "flows_started": 0, "flows_ended": 0, "steps": 0}
        self._sock: socket.socket | None = None
        self._win: bpf.Map | None = None
        self._cfg: bpf.Map | None = None
        self._cst: bpf.Map | None = None
        self._next_flow_id = 1
        self._last_heartbeat = 0
        self._last_scan = 0
        self._thread: threading.Thread | None = None
        self._stop_evt = threading.Event()
        self._lock = threading.Lock()                # step() vs stop() from another thread
        probe = cc.Hpcc(**self.hpcc_params)
        self.T_ns = probe.T
        self.w_init = probe.w_init

    # ---- lifecycle ----

    def start(self) -> "TcpSide":
        """Register the CCs (unless given), open the probe socket, write the
        configuration and the first heartbeat."""
        try:
            if self.tcp_cc is None:
                self.tcp_cc = TcpCc(self.cc_obj_dir)
            if not self.tcp_cc.started:
                self.tcp_cc.start(self.lock_wait_s)
            self._win = self.tcp_cc.map("hpcc", "hpccd_tcp_win")
            self._cfg = self.tcp_cc.map("hpcc", "hpccd_tcp_cfg")
            self._cst = self.tcp_cc.map("hpcc", "hpccd_tcp_cst")
            ctx = bpf.in_netns(self.netns) if self.netns else contextlib.nullcontext()
            with ctx:
                self._sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
            self._sock.setblocking(False)
            self._write_cfg(time.monotonic_ns())
        except BaseException:
            self.stop()
            raise
        return self

    def _write_cfg(self, now_ns: int) -> None:
        line = int(self.hpcc_params.get("line_rate_bps", 100_000_000_000))
        self._cfg.update(0, struct.pack(CFG_FMT, int(self.w_init), line // 8, self.stale_ns,
                                        now_ns))
        self._last_heartbeat = now_ns

    def stop(self) -> None:
        """Stop the thread, delete this host's windows, clear the heartbeat,
        unregister the CCs if owned, close the socket.  Idempotent."""
        self._stop_evt.set()
        t, self._thread = self._thread, None
        if t is not None and t is not threading.current_thread():
            t.join(timeout=10)
        with self._lock:
            for fs in list(self.flows.values()):
                self._forget(fs)
            self.flows.clear()
            # The heartbeat is host-wide: zeroed only when no other owner runs.
            if self._cfg is not None and not (self.tcp_cc and self.tcp_cc.others()):
                with contextlib.suppress(bpf.BpfError):
                    self._cfg.update(0, bytes(struct.calcsize(CFG_FMT)))
            self._win = self._cfg = self._cst = None
            if self._sock is not None:
                self._sock.close()
                self._sock = None
            if self._own_cc and self.tcp_cc is not None:
                self.tcp_cc.stop()

    def __enter__(self) -> "TcpSide":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- thread ----

    def run(self, period_s: float = 0.0005) -> None:
        """step() every `period_s` until stop()."""
        while not self._stop_evt.is_set():
            t0 = time.monotonic()
            try:
                self.step()
            except Exception:                                  # keep probing; say why
                log.exception("tcp_side step failed")
                self._stop_evt.wait(0.1)
            left = period_s - (time.monotonic() - t0)
            if left > 0:
                self._stop_evt.wait(left)

    def start_thread(self, period_s: float = 0.0005) -> threading.Thread:
        self._stop_evt.clear()
        self._thread = threading.Thread(target=self.run, args=(period_s,),
                                        name="hpccd-tcp-side", daemon=True)
        self._thread.start()
        return self._thread

    # ---- one pass ----

    def step(self, now_ns: int | None = None) -> None:
        with self._lock:
            if self._sock is None:
                return
            now = now_ns if now_ns is not None else time.monotonic_ns()
            self.stats["steps"] += 1
            if now - self._last_heartbeat >= self.heartbeat_ns:
                self._write_cfg(now)
            if now - self._last_scan >= self.scan_ns or not self.flows:
                self._scan(now)
                self._last_scan = now
            for fs in list(self.flows.values()):
                self._poll_flow(fs, now)

    def _scan(self, now: int) -> None:
        """Which flows are active: tracker entries with recent data and no
        FIN/RST that the "hpcc" CC runs (hpccd_tcp_cst)."""
        cst = dict(self._cst.lookup_batch())
        seen = set()
        for raw_key, raw in self.flows_map.lookup_batch():
            b, retx, pkts, first, last, snd_nxt, flags = struct.unpack(TCP_FLOW_FMT, raw)
            if raw_key not in cst:
                continue
            if flags & (_TCP_FIN | _TCP_RST) or now - last > self.idle_ns:
                continue
            seen.add(raw_key)
            if raw_key not in self.flows:
                self._new_flow(raw_key, first, now)
        for raw_key, fs in list(self.flows.items()):
            if raw_key not in seen:
                self._end_flow(fs)
        for raw_key in seen:
            self._apply_cst(self.flows[raw_key], cst[raw_key])

    def _new_flow(self, raw_key: bytes, first_ns: int, now: int) -> None:
        fs = FlowState(FlowKey.unpack(raw_key), raw_key, cc.Hpcc(**self.hpcc_params),
                       self._next_flow_id, first_ns)
        self._next_flow_id = (self._next_flow_id + 1) & 0xFFFFFFFF or 1
        # Telemetry of an earlier flow with this 5-tuple must not be taken
        # for this one's: start from what the map holds now.
        old = self.telem_map.lookup(raw_key)
        if old is not None:
            fs.responses_seen = struct.unpack(TELEM_FMT, old)[3]
        self.flows[raw_key] = fs
        self.stats["flows_started"] += 1

    def _apply_cst(self, fs: FlowState, raw: bytes) -> None:
        (_init, _last_ack, _acks, una, nxt, _pkts_out, srtt_us, mss, _cwnd, _ssth,
         _mode) = struct.unpack(CST_FMT, raw)
        fs.in_flight = una != nxt
        fs.snd_una = una
        fs.srtt_us = srtt_us
        fs.mss = mss

    def _timeout_ns(self, fs: FlowState) -> int:
        base = max(fs.srtt_us * 1000, fs.probe_rtt_ns)
        return int(min(max(3 * base, self.timeout_min_ns), self.timeout_max_ns))

    def _poll_flow(self, fs: FlowState, now: int) -> None:
        if fs.outstanding:
            raw = self.telem_map.lookup(fs.raw_key)
            if raw is not None:
                self._maybe_response(fs, raw)
            if fs.outstanding and now - fs.probe_sent_ns > self._timeout_ns(fs):
                fs.outstanding = False
                fs.probes_lost += 1
                self.stats["probes_lost"] += 1
        if not fs.outstanding:
            st = self._cst.lookup(fs.raw_key)
            if st is None:                         # released meanwhile
                return
            self._apply_cst(fs, st)
            if not fs.in_flight:
                # The CC's snd_nxt is as of the last ACK, which may have
                # acknowledged everything just before more data left: the
                # tracker's snd_nxt (egress, per segment) says whether any
                # byte beyond the CC's snd_una has been sent since.
                tr = self.flows_map.lookup(fs.raw_key)
                if tr is not None:
                    ahead = (struct.unpack(TCP_FLOW_FMT, tr)[5] - fs.snd_una) & 0xFFFFFFFF
                    fs.in_flight = 1 < ahead < 0x80000000     # more than a FIN
            if fs.in_flight:
                self._send_probe(fs, now)

    def _maybe_response(self, fs: FlowState, raw: bytes) -> None:
        (hops, rx_ns, probe_seq, responses, ts_echo, _flow_id, path_id, nhop, _room,
         int_flags) = struct.unpack(TELEM_FMT, raw)
        if responses == fs.responses_seen:
            return
        fs.responses_seen = responses
        if probe_seq != fs.probe_seq:
            # An answer to a probe already declared lost: its INT is older
            # than what the next response will bring; not fed.
            fs.late_responses += 1
            self.stats["late_responses"] += 1
            return
        fs.outstanding = False
        fs.probes_answered += 1
        self.stats["probes_answered"] += 1
        rtt = (rx_ns - ts_echo) & 0xFFFFFFFF
        fs.last_rtt_ns = rtt
        fs.probe_rtt_ns = rtt if not fs.probe_rtt_ns else 0.875 * fs.probe_rtt_ns + 0.125 * rtt
        self.last_probe_rtt_us = fs.probe_rtt_ns / 1e3
        if int_flags & 0x4:                        # HPCCD_INT_F_OVERFLOW
            fs.overflows += 1
        if nhop == 0:
            return                                 # no INT on the path: nothing to learn
        if self.on_int is not None:                # e.g. the daemon's per-hop metrics
            for i in range(min(nhop, 8)):
                self.on_int(path_id, i, hops[8 * i:8 * i + 8])
        # [HPCC] Algorithm 1 NewAck with seq = snd_nxt = probe number: see
        # the module docstring (one W^c update per response = per RTT).
        fs.hpcc.new_ack_wire(rx_ns, probe_seq, probe_seq, path_id, hops[:8 * nhop])
        W = fs.hpcc.W
        fs.last_w = W
        fs.last_update_ns = rx_ns
        self._win.update(fs.raw_key, struct.pack(WIN_FMT, int(W),
                                                 int(fs.hpcc.rate_bps / 8), rx_ns, probe_seq))
        fs.windows_written += 1
        self.stats["windows_written"] += 1

    def _send_probe(self, fs: FlowState, now: int) -> None:
        seq = fs.probe_seq + 1
        pkt = probe_packet(fs.key, seq, fs.flow_id, now, self.probe_dscp, fs.ecn, self.room)
        try:
            self._sock.sendto(pkt, (fs.key.daddr, 0))
        except OSError as e:
            if e.errno not in (errno.ENOBUFS, errno.EAGAIN, errno.EWOULDBLOCK):
                raise
            self.stats["send_errors"] += 1         # local queue full: try next step
            return
        fs.probe_seq = seq
        fs.probe_sent_ns = now
        fs.outstanding = True
        fs.probes_sent += 1
        self.stats["probes_sent"] += 1

    def _forget(self, fs: FlowState) -> None:
        for m in (self._win, self.telem_map):
            if m is not None:
                with contextlib.suppress(bpf.BpfError):
                    m.delete(fs.raw_key)

    def _end_flow(self, fs: FlowState) -> None:
        self._forget(fs)
        del self.flows[fs.raw_key]
        self.ended.append(fs)
        del self.ended[:-1000]
        self.stats["flows_ended"] += 1

    # ---- observability ----

    def drain_ended(self) -> list[FlowState]:
        with self._lock:
            out, self.ended = self.ended, []
        return out

    def counters(self) -> dict[str, dict[str, tuple[int, int]]]:
        """The CCs' per-CPU counters, summed: {"hpcc": {...}, "dctcp": {...}}."""
        out = {}
        if self.tcp_cc is not None and self.tcp_cc.started and "hpcc" in self.tcp_cc.names:
            out["hpcc"] = read_counters(self.tcp_cc.map("hpcc", "hpccd_tcpc_cnt"), HPCC_COUNTERS)
        if self.tcp_cc is not None and self.tcp_cc.started and "dctcp" in self.tcp_cc.names:
            out["dctcp"] = read_counters(self.tcp_cc.map("dctcp", "hpccd_dctcp_cnt"),
                                         DCTCP_COUNTERS)
        return out

    def status(self) -> dict[str, Any]:
        with self._lock:
            flows = [{"flow": str(fs.key), "W_bytes": fs.last_w, "U": fs.hpcc.U,
                      "probes_sent": fs.probes_sent, "probes_answered": fs.probes_answered,
                      "probes_lost": fs.probes_lost, "probe_rtt_us": fs.probe_rtt_ns / 1e3,
                      "srtt_us": fs.srtt_us} for fs in self.flows.values()]
            return {"flows": flows, **self.stats}


# ---- daemon component (hpccd.component) ------------------------------------------------------

try:
    from .component import Component as _Component
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
            self.side = TcpSide(ifc.tc_map("hpccd_tcp_flows"), ifc.xdp_map("hpccd_telem"),
                                hpcc_params=params, netns=self.ctx.netns,
                                cc_obj_dir=getattr(self.ctx, "bpf_dir", None),
                                probe_dscp=getattr(self.ctx.config, "probe_dscp",
                                                   PROBE_DSCP_DEFAULT))
            self.side.on_int = self.ctx.flows.observe_hop
            self.side.start()
            self.side.start_thread()

        def poll(self, now: float) -> None:
            """Publish the kernel TCP flows TcpSide runs (the daemon's flow
            table: hpccctl flows, the metrics): new ones added, their W, R,
            U, RTTs and probe counters updated, ended ones finished."""
            side = getattr(self, "side", None)
            if side is None:
                return
            from .flows import FlowLimitError

            ids = self.__dict__.setdefault("_ids", {})
            with side._lock:
                live = list(side.flows.items())
            for raw, fs in live:
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
                    fid, window_bytes=fs.last_w or float(side.w_init),
                    rate_bps=fs.hpcc.rate_bps, U=fs.hpcc.U,
                    rtt_s=fs.srtt_us / 1e6 if fs.srtt_us else None,
                    probe_rtt_s=fs.probe_rtt_ns / 1e9 if fs.probe_rtt_ns else None,
                    probes_sent=fs.probes_sent, probes_answered=fs.probes_answered,
                    probes_lost=fs.probes_lost)
            for fs in side.drain_ended():
                fid = ids.pop(fs.raw_key, None)
                if fid is not None:
                    self.ctx.flows.finish(fid, completed=True)

        def status(self) -> dict[str, Any]:
            return self.side.status() if getattr(self, "side", None) else {}

        def stop(self) -> None:
            side = getattr(self, "side", None)
            if side is not None:
                side.stop()

    COMPONENT = TcpSideComponent
