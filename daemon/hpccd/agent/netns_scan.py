"""Which network namespaces exist: a namespace lives while anything holds
it, a task in it (threads may be in another one than their process:
hpccd.bpf.loader.in_netns), an nsfs bind mount (``ip netns add`` mounts
/run/netns/<name>), an open file of it.  The kernel has no list of them, so
:func:`held` scans /proc for the three, and says so when it cannot tell
(hpccd.agent.ownership.prune keeps every record then).
"""
from __future__ import annotations

import errno
import logging
import os

__all__ = ["held"]

log = logging.getLogger(__name__)

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


def held(wanted: set[int]) -> set[int] | None:
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
