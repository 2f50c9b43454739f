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
  (see :func:`_netns_held`).

A process is alive while ``/proc/<pid>/stat`` exists with the recorded
start time and it is not a zombie; a SIGKILLed daemon therefore stops
owning anything as soon as the kernel has reaped it or its parent has.

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


def start_time(pid: int) -> int | None:
    """Start time of `pid` (clock ticks after boot), None if there is no
    such process or it is a zombie (dead, not yet reaped)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode(errors="replace")
    except OSError:
        return None
    rest = raw[raw.rfind(")") + 2:].split()        # after "pid (comm) "
    if not rest or rest[0] in ("Z", "X"):
        return None
    return int(rest[19])                             # field 22 of stat(5)


def alive(pid: int, start: int | None) -> bool:
    st = start_time(pid) if pid > 0 else None
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
    scan of the host's namespaces is in doubt (:func:`_netns_held`)."""
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
    held = _netns_held({o.netns for _, o in candidates})
    if held is None:
        return []
    out = []
    for p, o in candidates:
        if o.netns not in held:
            p.unlink(missing_ok=True)
            out.append(o)
    return out


# ---- which network namespaces exist ---------------------------------------------------
#
# A namespace exists while anything holds it: a task in it (threads may be in
# another one than their process: hpccd.bpf.loader.in_netns), an nsfs bind
# mount (``ip netns add`` mounts /run/netns/<name>), an open file of it.  The
# kernel has no list of them: /proc is scanned for the three.

# The inode of the initial PID namespace (PROC_PID_INIT_INO, include/linux/proc_ns.h):
# only from there does /proc list every task of the host.
_PROC_PID_INIT_INO = 0xEFFFFFFC
_GONE = (errno.ENOENT, errno.ESRCH)        # the task or the file went away during the scan
_NOT_NSFS = ("socket:[", "pipe:[", "anon_inode:")    # what most open files are


class _Doubt(Exception):
    """The scan cannot tell which namespaces exist."""


def _ns_inode(link: str, kind: str = "net") -> int | None:
    """``net:[4026531840]`` -> 4026531840; None for anything else."""
    head, sep, rest = link.partition(":[")
    if head != kind or not sep or not rest.endswith("]") or not rest[:-1].isdigit():
        return None
    return int(rest[:-1])


def _link(path: str) -> str | None:
    """readlink; None if what it names went away meanwhile."""
    try:
        return os.readlink(path)
    except OSError as e:
        if e.errno in _GONE:
            return None
        raise


def _unescape(field: str) -> str:
    """A path of mountinfo, whose spaces, tabs, newlines and backslashes are octal escapes."""
    return (field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n")
            .replace("\\134", "\\"))


def _mountinfo(path: str) -> list[tuple[str, str, str, str]] | None:
    """(root, mount point, fstype, super options) of each line of a
    mountinfo file; None if its task went away meanwhile."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        if e.errno in _GONE or e.errno == errno.EINVAL:    # EINVAL: a zombie's
            return None
        raise
    out = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields, rfields = left.split(" "), right.split(" ")
        if not sep or len(fields) < 6 or len(rfields) < 3:
            raise _Doubt(f"{path}: cannot parse {line!r}")
        out.append((fields[3], _unescape(fields[4]), rfields[0], rfields[2]))
    return out


def _nsfs_mounts(path: str, own: bool) -> set[int]:
    """The network namespaces the nsfs mounts of a mountinfo file hold."""
    out: set[int] = set()
    for root, point, fstype, _ in _mountinfo(path) or []:
        if fstype != "nsfs":
            continue
        ino = _ns_inode(root)
        if ino is not None:
            out.add(ino)
        elif _ns_inode(root, root.partition(":[")[0]) is not None:
            continue                         # a namespace of another kind
        elif own:                            # a root field this code does not know
            try:
                out.add(os.stat(point).st_ino)
            except FileNotFoundError:
                continue                     # unmounted meanwhile
        else:
            raise _Doubt(f"{path}: nsfs mount {point} of root {root!r}")
    return out


def _proc_restricted() -> str | None:
    """What hides tasks in the /proc the scan reads, or None.  hidepid
    (systemd's ProtectProc=) hides the tasks the caller may not ptrace,
    without an error: a scan would miss what they hold."""
    if os.stat("/proc/self/ns/pid").st_ino != _PROC_PID_INIT_INO:
        return "a PID namespace other than the host's: /proc lists only its tasks"
    opts = None
    for _, point, fstype, superopts in _mountinfo("/proc/self/mountinfo") or []:
        if point == "/proc" and fstype == "proc":
            opts = superopts                 # the last one is on top
    for o in (opts or "").split(","):
        if o.startswith("hidepid=") and o.partition("=")[2] not in ("0", "off"):
            return f"/proc is mounted with {o}"
    return None


def _netns_held(wanted: set[int]) -> set[int] | None:
    """The network namespaces of `wanted` (inodes) that exist, None when
    the scan is in doubt: /proc does not show every task, a /proc file
    that should be readable is not, something is not understood.  Tasks
    exiting during the scan are skipped.  A task whose namespace links may
    not be read (another user's, or one with capabilities the caller lacks)
    is placed by the inode of its ``/proc/<tid>/net/dev``, which differs
    per namespace; one that no readable task shares makes the scan doubt.
    An open file is a namespace's when its link reads ``net:[<inode>]``
    (opened in /proc/<pid>/ns) or the file it names is on nsfs (opened
    through a bind mount, the link names that path).  Not seen (limits):
    the open files of tasks we may not inspect, sockets (a socket holds its
    namespace), bind mounts in a mount namespace no task is in.  A record
    pruned wrongly by these is a dead owner's: only its "is gone" log line
    at the next claim is lost, what it left is found by name
    (hpccd.bpf.loader.cleanup_stale)."""
    try:
        return _scan(wanted)
    except (_Doubt, OSError, ValueError) as e:
        log.debug("network namespaces: scan in doubt, nothing pruned: %s", e)
        return None


def _scan(wanted: set[int]) -> set[int]:
    why = _proc_restricted()
    if why:
        raise _Doubt(why)
    held: set[int] = set()
    in_ns: dict[int, str] = {}               # namespace -> a task in it
    opaque: dict[int, str] = {}              # net/dev inode -> a task we may not inspect
    mnt_seen: set[int] = set()
    pids = [n for n in os.listdir("/proc") if n.isdigit()]
    if str(os.getpid()) not in pids:
        raise _Doubt("/proc does not list this process")
    held |= _nsfs_mounts("/proc/self/mountinfo", own=True)
    own_mnt = _ns_inode(os.readlink("/proc/self/ns/mnt"), "mnt")
    if own_mnt is None:
        raise _Doubt("/proc/self/ns/mnt")
    mnt_seen.add(own_mnt)
    nsfs_dev = os.stat("/proc/self/ns/net").st_dev
    for pid in pids:
        if wanted <= held:
            return held
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError as e:
            if e.errno in _GONE:
                continue
            raise
        for tid in tids:
            t = f"/proc/{pid}/task/{tid}"
            try:
                link = _link(f"{t}/ns/net")
            except PermissionError:
                try:
                    opaque.setdefault(os.stat(f"{t}/net/dev").st_ino, t)
                except FileNotFoundError:
                    if os.path.lexists(t):
                        raise _Doubt(f"{t}/net/dev is missing") from None
                    continue
            else:
                if link is None:
                    continue                 # exited (or a zombie: it holds nothing)
                ino = _ns_inode(link)
                if ino is None:
                    raise _Doubt(f"{t}/ns/net -> {link!r}")
                held.add(ino)
                in_ns.setdefault(ino, t)
            # Its mount namespace's bind mounts, once per mount namespace.
            try:
                mnt = _link(f"{t}/ns/mnt")
            except PermissionError:
                mnt = "unknown"              # read its mountinfo every time
            if mnt is None:
                continue
            m = _ns_inode(mnt, "mnt")
            if m is not None and m in mnt_seen:
                continue
            try:
                held |= _nsfs_mounts(f"{t}/mountinfo", own=False)
            except PermissionError:
                raise _Doubt(f"{t}/mountinfo may not be read") from None
            if m is not None:
                mnt_seen.add(m)
        # Open files of a namespace (shared by the process's threads).
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError as e:
            if e.errno in _GONE or isinstance(e, PermissionError):
                continue                     # gone, or a task we may not inspect
            raise
        for fd in fds:
            f = f"/proc/{pid}/fd/{fd}"
            try:
                link = _link(f)
                if link is None or link.startswith(_NOT_NSFS):
                    continue
                ino = _ns_inode(link)
                if ino is None:
                    # Opened through a bind mount, the link names that path
                    # ("/" once it is unmounted): the file itself tells.
                    st = os.stat(f)
                    if st.st_dev == nsfs_dev:
                        ino = st.st_ino
            except PermissionError:
                continue
            except OSError as e:
                if e.errno in _GONE:
                    continue
                raise
            if ino is not None:
                held.add(ino)
    # Tasks we may not inspect: each must be in a namespace a readable task is in.
    if opaque:
        known = set()
        for ino, t in in_ns.items():
            try:
                dev = os.stat(f"{t}/net/dev").st_ino
                if _link(f"{t}/ns/net") == f"net:[{ino}]":     # still the same task
                    known.add(dev)
            except OSError as e:
                if e.errno not in _GONE:
                    raise
        unplaced = set(opaque) - known
        if unplaced:
            raise _Doubt(f"{len(unplaced)} task(s) we may not inspect (e.g. "
                         f"{opaque[min(unplaced)]}) in a namespace no readable task is in")
    return held
