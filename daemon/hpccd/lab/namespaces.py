"""Named network namespaces (/run/netns): entering one, finding what holds
one, telling when the kernel has really freed one, and interface look-up."""
from __future__ import annotations

import contextlib
import errno
import os
from typing import Iterator

from .names import NETNS_DIR, LabError


def lookup(ipr, ifname: str, where: str) -> int:
    found = ipr.link_lookup(ifname=ifname)
    if not found:
        raise LabError(f"no interface {ifname!r} in {where}")
    return found[0]


@contextlib.contextmanager
def in_netns(name: str) -> Iterator[None]:
    from ..bpf.loader import in_netns

    with in_netns(name):
        yield


def netns_inode(name: str) -> int | None:
    """Inode of named namespace `name` (/run/netns), None when it is not there."""
    try:
        return os.stat(f"{NETNS_DIR}/{name}").st_ino
    except FileNotFoundError:
        return None


def pids_in_netns(inode: int) -> list[int]:
    """Tasks (pid of their thread group) whose network namespace has `inode`:
    what still holds a namespace after its name was removed."""
    found = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                if os.stat(f"/proc/{pid}/task/{tid}/ns/net").st_ino == inode:
                    found.add(int(pid))
                    break
            except OSError:
                continue
    return sorted(found)


def nsid(ipr, name: str) -> int | None:
    """The root namespace's id for namespace `name` (assigned now if it
    has none), or None if `name` is gone.  An id lives exactly as long as
    the namespace does, whatever holds it (a process, a mount, an open fd
    or socket), so it tells when a removed namespace, and its veths, are
    really gone."""
    try:
        fd = os.open(f"{NETNS_DIR}/{name}", os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        nsid = ipr.get_netnsid(fd=fd)["nsid"]
        if nsid is None or nsid >= 0x80000000:          # NETNSA_NSID_NOT_ASSIGNED
            ipr.set_netnsid(fd=fd)
            nsid = ipr.get_netnsid(fd=fd)["nsid"]
        return nsid
    finally:
        os.close(fd)


def nsid_alive(ipr, nsid: int) -> bool:
    try:
        return ipr.get_netnsid(nsid=nsid) is not None
    except Exception as e:
        if gone(e):
            return False
        raise


def gone(e: BaseException) -> bool:
    """Whether netlink error `e` says the object is not there (any more)."""
    code = getattr(e, "code", None) or getattr(e, "errno", None)
    return code in (errno.ENOENT, errno.ENODEV)
