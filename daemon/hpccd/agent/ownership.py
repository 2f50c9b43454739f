"""What belongs to which hpccd: owner records of the interfaces a daemon
attached its programs to.

Several daemons run on one host (one per network namespace in the lab,
docs/switch.md), and a daemon's start-up clean-up and ``hpccd --cleanup``
must remove only what a *dead* daemon left, never a live one's programs.
A daemon claims each configured interface before it attaches anything: a
record ``<RUN_DIR>/owners/net<netns inode>-if<ifindex>.json`` with its pid,
the start time of that pid (so a reused pid is not taken for the owner),
its control socket and, once attached, the ids of its XDP and tc programs.
Claims are made under an exclusive ``flock`` of ``<RUN_DIR>/owners/.lock``
so two daemons starting together cannot both win.

- :func:`claim` refuses (:class:`InterfaceOwnedError`) an interface whose
  record names a live process other than the caller, and returns the
  records of dead owners it replaced (their leftovers may be removed);
- :func:`owner` tells who owns an interface (None: nobody alive);
- :func:`record_programs` fills in the program ids after attaching;
- :func:`release` removes the caller's records (clean stop);
- :func:`prune` removes the records of dead owners whose network namespace
  is gone (nothing holds it: no task is in it, no ``nsfs`` bind mount such
  as ``/run/netns/<name>`` and no open file refers to it).  Nothing else
  would: a claim replaces only records of its own namespace and
  ``hpccd --cleanup`` only those of interfaces that exist, so the records
  of deleted lab namespaces would pile up until reboot.  :func:`claim` and
  ``hpccd --cleanup`` call it.  It keeps a record whenever it is in doubt
  (see :func:`hpccd.agent.netns_scan.held`).

A process is alive while ``/proc/<pid>/stat`` exists with the recorded
start time and it is not a zombie; a SIGKILLed daemon therefore stops
owning anything as soon as the kernel has reaped it or its parent has.
One that /proc hides from the caller (hidepid) while its pid exists counts
as alive (:func:`alive`).

The host-wide struct_ops of the TCP side are shared differently, by a
shared ``flock`` (hpccd.tcp_side.engine.TcpCc).
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
import time
from typing import Iterator

from . import netns_scan

__all__ = ["RUN_DIR", "Owner", "InterfaceOwnedError", "claim", "owner", "record_programs",
           "release", "prune", "alive", "start_time", "netns_id"]

log = logging.getLogger(__name__)

# Writable under the unit's sandbox: RuntimeDirectory=hpccd (systemd/hpccd.service).
RUN_DIR = "/run/hpccd"
LOCK_WAIT_S = 10.0


class InterfaceOwnedError(RuntimeError):
    """Another live hpccd owns a configured interface."""


@dataclasses.dataclass
class Owner:
    pid: int
    start: int                          # /proc/<pid>/stat field 22 (clock ticks since boot)
    netns: int                          # inode of the owner's network namespace
    ifindex: int
    name: str
    control_socket: str = ""
    xdp_prog_id: int | None = None
    tc_prog_id: int | None = None
    since: float = 0.0                  # wall time of the claim

    def describe(self) -> str:
        return (f"hpccd pid {self.pid} (control socket {self.control_socket or 'unknown'}, "
                f"since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(self.since))})")


def _owners_dir(run_dir: str | None) -> pathlib.Path:
    return pathlib.Path(run_dir or RUN_DIR) / "owners"


def _read_start(pid: int) -> int | None:
    """Start time of `pid` from /proc/<pid>/stat, None for a zombie (dead,
    not yet reaped); OSError where /proc shows no such process."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        raw = f.read().decode(errors="replace")
    rest = raw[raw.rfind(")") + 2:].split()        # after "pid (comm) "
    if not rest or rest[0] in ("Z", "X"):
        return None
    return int(rest[19])                             # field 22 of stat(5)


def start_time(pid: int) -> int | None:
    """Start time of `pid` (clock ticks after boot), None if /proc shows no
    such process or it is a zombie."""
    try:
        return _read_start(pid)
    except OSError:
        return None


def alive(pid: int, start: int | None) -> bool:
    """Whether `pid` is still the process that started at `start`.  A
    process this /proc does not show, though the pid exists (kill(pid, 0)
    finds it), is hidden from the caller, not gone: hidepid, which the
    unit's ProtectProc=invisible mounts, hides a process whose capabilities
    the caller lacks, such as an hpccd started by hand as root beside the
    unit's.  Its start time cannot be read, so it counts as alive: taking
    a live daemon's interface would remove its programs, while a pid reused
    by a hidden process only refuses the claim, naming the pid."""
    if pid <= 0:
        return False
    try:
        st = _read_start(pid)
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False                             # no such process: gone
        except PermissionError:
            return True                              # exists, not ours to signal
        return True
    return st is not None and st == start


def netns_id() -> int:
    """Inode of the calling thread's network namespace (a thread may have
    entered another one than the process's: hpccd.bpf.loader.in_netns)."""
    return os.stat("/proc/thread-self/ns/net").st_ino


def _path(d: pathlib.Path, netns: int, ifindex: int) -> pathlib.Path:
    return d / f"net{netns}-if{ifindex}.json"


def _read(p: pathlib.Path) -> Owner | None:
    try:
        o = Owner(**json.loads(p.read_text()))
        int(o.pid), int(o.start)
        return o
    except (OSError, ValueError, TypeError):
        return None                                  # unreadable: nobody's


def _write(p: pathlib.Path, o: Owner) -> None:
    tmp = p.with_name(f".{p.name}.{os.getpid()}")
    tmp.write_text(json.dumps(dataclasses.asdict(o)) + "\n")
    os.replace(tmp, p)


@contextlib.contextmanager
def _locked(d: pathlib.Path, wait_s: float = LOCK_WAIT_S) -> Iterator[None]:
    try:
        d.mkdir(parents=True, exist_ok=True, mode=0o750)
        fd = os.open(d / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o640)
    except OSError as e:
        raise OSError(e.errno, f"owner records {d}: {e.strerror} (systemd/hpccd.service "
                               f"makes /run/hpccd the daemon's RuntimeDirectory)") from None
    try:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise OSError(errno.EAGAIN, f"{d / '.lock'} stays locked") from None
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)


def owner(ifindex: int, netns: int | None = None, run_dir: str | None = None) -> Owner | None:
    """The live owner of `ifindex` in `netns` (default: the caller's), or None."""
    d = _owners_dir(run_dir)
    o = _read(_path(d, netns if netns is not None else netns_id(), ifindex))
    return o if o is not None and alive(o.pid, o.start) else None


def claim(ifaces: list[tuple[str, int]], control_socket: str = "",
          run_dir: str | None = None) -> list[Owner]:
    """Claim every (name, ifindex) of the calling thread's namespace for
    this process, all or none.  Raises InterfaceOwnedError naming the live
    owner; returns the records of dead owners that were replaced.  Prunes
    first (:func:`prune`, logged at info level)."""
    d = _owners_dir(run_dir)
    ns, me = netns_id(), os.getpid()
    my_start = start_time(me)
    with _locked(d):
        try:
            pruned = _prune_locked(d)
        except OSError as e:                         # housekeeping: never fails a start
            log.warning("owner records %s: not pruned: %s", d, e)
            pruned = []
        if pruned:
            log.info("pruned %d owner record(s) of dead daemons whose network namespace is "
                     "gone: %s", len(pruned), ", ".join(sorted({f"net:[{o.netns}]"
                                                                for o in pruned})))
        stale = []
        for name, ifindex in ifaces:
            o = _read(_path(d, ns, ifindex))
            if o is None or o.pid == me:
                continue
            if alive(o.pid, o.start):
                raise InterfaceOwnedError(
                    f"{name} (ifindex {ifindex}) in this network namespace is owned by "
                    f"{o.describe()}: one hpccd per interface; stop that daemon first "
                    f"(systemctl stop hpccd, or SIGTERM {o.pid}) or configure another "
                    f"interface")
            stale.append(o)
        now = time.time()
        for name, ifindex in ifaces:
            _write(_path(d, ns, ifindex), Owner(me, my_start, ns, ifindex, name,
                                                control_socket, since=now))
    return stale


def record_programs(ifindex: int, xdp_prog_id: int | None, tc_prog_id: int | None,
                    run_dir: str | None = None) -> None:
    """Write the ids of the programs this process attached to its record."""
    d = _owners_dir(run_dir)
    p = _path(d, netns_id(), ifindex)
    with _locked(d):
        o = _read(p)
        if o is None or o.pid != os.getpid():
            return
        o.xdp_prog_id, o.tc_prog_id = xdp_prog_id, tc_prog_id
        _write(p, o)


def release(ifindexes: list[int], netns: int | None = None,
            run_dir: str | None = None, dead_only: bool = False) -> list[int]:
    """Remove the records of `ifindexes` that are this process's (or, with
    `dead_only`, whose owner is dead).  Returns the ifindexes released."""
    d = _owners_dir(run_dir)
    if not d.is_dir():
        return []
    ns = netns if netns is not None else netns_id()
    out = []
    with _locked(d):
        for ifindex in ifindexes:
            p = _path(d, ns, ifindex)
            o = _read(p)
            if o is None:
                if p.exists():
                    p.unlink(missing_ok=True)        # unreadable: nobody's
                continue
            mine = o.pid == os.getpid() and not dead_only
            if mine or (dead_only and not alive(o.pid, o.start)):
                p.unlink(missing_ok=True)
                out.append(ifindex)
    return out


def prune(run_dir: str | None = None) -> list[Owner]:
    """Remove the records whose owner is dead and whose network namespace
    no longer exists; returns them.  Never a live owner's record, nor one
    of the caller's namespace (a claim or ``hpccd --cleanup`` there handles
    those), nor an unreadable one (nobody's already); nothing when the
    scan of the host's namespaces is in doubt (:func:`hpccd.agent.netns_scan.held`)."""
    d = _owners_dir(run_dir)
    if not d.is_dir():
        return []
    with _locked(d):
        return _prune_locked(d)


def _prune_locked(d: pathlib.Path) -> list[Owner]:
    """:func:`prune` with the lock of `d` held (claim holds it already)."""
    here = {netns_id(), os.stat("/proc/self/ns/net").st_ino}
    candidates = []
    for p in sorted(d.glob("net*-if*.json")):
        o = _read(p)
        if (o is None                                # unreadable: nobody's, left as it is
                or not all(type(v) is int for v in (o.pid, o.start, o.netns, o.ifindex))
                or p.name != _path(d, o.netns, o.ifindex).name    # not where it belongs
                or o.netns in here                   # this namespace exists
                or alive(o.pid, o.start)):
            continue
        candidates.append((p, o))
    if not candidates:
        return []
    held = netns_scan.held({o.netns for _, o in candidates})
    if held is None:
        return []
    out = []
    for p, o in candidates:
        if o.netns not in held:
            p.unlink(missing_ok=True)
            out.append(o)
    return out
