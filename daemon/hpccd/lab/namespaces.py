"""Named network namespaces (/run/netns): entering one, finding what holds
one, telling when the kernel has really freed one, interface look-up,
processes started in one and stopped again, and the one home of "two
namespaces joined by a veth" (veth_pair) that the tests' netns_pair fixture
and the benchmarks build on."""
from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import signal
import subprocess
from typing import Iterator

from .names import NETNS_DIR, LabError
from .queues import add_fifo_root


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


def remove_netns(name: str) -> None:
    """Remove named namespace `name`; one that is gone already is fine."""
    from pyroute2 import netns

    try:
        netns.remove(name)
    except Exception as e:                  # pyroute2 wraps some errors
        if not gone(e) and os.path.exists(f"{NETNS_DIR}/{name}"):
            raise


# ---- processes in a namespace -----------------------------------------------------------

def popen_in(name: str, argv: list[str], **kw) -> subprocess.Popen:
    """Start `argv` in namespace `name` (``ip netns exec``: it also mounts the
    namespace's /sys), in a session of its own so that a Ctrl-C of the
    caller does not reach it; stop it with stop_processes()."""
    kw.setdefault("stdin", subprocess.DEVNULL)
    return subprocess.Popen(["ip", "netns", "exec", name, *argv], start_new_session=True, **kw)


def stop_processes(procs: list[subprocess.Popen], grace_s: float = 5.0) -> None:
    """Stop the processes of `procs` (each started by popen_in, so the
    leader of its own process group): SIGTERM to the group of each still
    running, then SIGKILL to those not gone after `grace_s`; their pipes
    closed, `procs` emptied."""
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=grace_s)
        for f in (p.stdin, p.stdout, p.stderr):
            if f is not None:
                f.close()
    procs.clear()


# ---- two namespaces joined by a veth ----------------------------------------------------

@dataclasses.dataclass
class VethPair:
    """Two namespaces joined by a veth: a (va, ip_a) <-> b (vb, ip_b)."""

    a: str
    b: str
    va: str
    vb: str
    ip_a: str
    ip_b: str
    prefixlen: int = 24
    ifindex_a: int = 0
    ifindex_b: int = 0
    mac_a: str = ""
    mac_b: str = ""
    procs: list = dataclasses.field(default_factory=list, repr=False)

    def side(self, ns: str) -> tuple[str, str, str]:
        """(namespace, veth, address) of side "a"/"b" or of a namespace name."""
        if ns in ("a", self.a):
            return self.a, self.va, self.ip_a
        if ns in ("b", self.b):
            return self.b, self.vb, self.ip_b
        raise ValueError(f"{ns!r} is not a side of {self.a}/{self.b}")

    def pids_inside(self, ns: str) -> list[int]:
        """Processes with a task in namespace `ns` ("a", "b" or a name)."""
        ino = netns_inode(self.side(ns)[0])
        return pids_in_netns(ino) if ino else []

    def popen(self, ns: str, argv: list[str], **kw) -> subprocess.Popen:
        """Start `argv` inside namespace `ns` ("a", "b" or a name) (popen_in);
        stopped when the pair goes, if still running."""
        p = popen_in(self.side(ns)[0], argv, **kw)
        self.procs.append(p)
        return p

    def stop_procs(self) -> None:
        stop_processes(self.procs)


def pair_names(prefix: str, tag: str) -> tuple[str, str, str, str]:
    """(a, b, va, vb) of a pair: namespaces ``<prefix>-<tag>-a`` / ``-b``,
    veth ends ``<prefix><tag>a`` / ``b`` (at most 15 characters: a 6-letter
    prefix and a 6-digit tag fit).  The tests' pairs are ``hpccdt``, the
    benchmarks' ``hpccdb``: a test session's leak check tells them apart."""
    va = f"{prefix}{tag}a"
    if len(va) > 15:
        raise ValueError(f"veth name {va!r}: longer than the kernel's 15 characters")
    return f"{prefix}-{tag}-a", f"{prefix}-{tag}-b", va, f"{prefix}{tag}b"


@contextlib.contextmanager
def veth_pair(a: str, b: str, va: str, vb: str, ip_a: str, ip_b: str, prefixlen: int = 24,
              queues: int = 1) -> Iterator[VethPair]:
    """Create namespaces `a` and `b` joined by a veth (`va` in a, `vb` in b;
    `queues` TX and RX queues each end), `ip_a`/`ip_b` on its ends, both
    ends and loopback up, each end with a pfifo root of 1,000 packets
    instead of veth's noqueue (queues.add_fifo_root: a NIC's driver queue;
    without it a veth drops what its peer's native XDP ring cannot take at
    once, instead of making the sender wait).  On exit, whatever happened
    (also when the set-up failed half-way): stop the pair's processes,
    remove the namespaces made, and check that they are gone and that no
    process still holds them; LabError after all of it was attempted if
    anything is left."""
    from pyroute2 import NetNS, netns

    p = VethPair(a=a, b=b, va=va, vb=vb, ip_a=ip_a, ip_b=ip_b, prefixlen=prefixlen)
    inodes: dict[str, int | None] = {}
    try:
        for name in (a, b):
            netns.create(name)
            inodes[name] = netns_inode(name)
        with NetNS(a, flags=0) as ns:
            q = {"num_tx_queues": queues, "num_rx_queues": queues} if queues > 1 else {}
            ns.link("add", ifname=va, kind="veth", peer={"ifname": vb, "net_ns_fd": b, **q}, **q)
        for name, ifname, ip in ((a, va, ip_a), (b, vb, ip_b)):
            with NetNS(name, flags=0) as ns:
                idx = lookup(ns, ifname, name)
                mac = ns.get_links(idx)[0].get_attr("IFLA_ADDRESS")
                ns.addr("add", index=idx, address=ip, prefixlen=prefixlen)
                add_fifo_root(ns, idx)
                ns.link("set", index=idx, state="up")
                ns.link("set", index=lookup(ns, "lo", name), state="up")
                if name == a:
                    p.ifindex_a, p.mac_a = idx, mac
                else:
                    p.ifindex_b, p.mac_b = idx, mac
        yield p
    finally:
        problems = []
        try:
            p.stop_procs()
        except Exception as e:                          # keep cleaning up
            problems.append(f"stopping processes: {e!r}")
        for name in inodes:
            try:
                remove_netns(name)
            except Exception as e:
                problems.append(f"removing {name}: {e!r}")
        left = [n for n in inodes if os.path.exists(f"{NETNS_DIR}/{n}")]
        if left:
            problems.append(f"still listed after removal: {left}")
        for name, ino in inodes.items():
            holders = pids_in_netns(ino) if ino else []
            if holders:
                problems.append(f"{name} removed from {NETNS_DIR} but still held by "
                                f"pids {holders} (a process started in it was not stopped)")
        if problems:
            raise LabError("namespace pair teardown: " + "; ".join(problems))
