"""Tearing a lab down: its half-built interfaces, orphaned TCP connections
and namespaces removed, and a wait until the kernel has freed them; by a
Lab object (Lab.down) or by name from any process (down)."""
from __future__ import annotations

import contextlib
import os
import socket as _socket
import struct
import time
from typing import Any, Iterable

from .names import NETNS_DIR, STATE_DIR, LabError, netns_name, state_path
from .namespaces import gone, in_netns, netns_inode, nsid, nsid_alive, pids_in_netns
from .state import load_state
from .topology import Topology, TopologyError

# How long down() waits for the kernel to free a removed namespace: at
# once normally, but the last sockets of a namespace are freed after an RCU
# grace period, which a saturated machine can stretch to seconds.
ALIVE_WAIT_S = 10.0

_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY, _SOCK_DESTROY = 20, 21
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_NLM_F_REQUEST, _NLM_F_ACK, _NLM_F_DUMP = 0x1, 0x4, 0x300
_NLMSG_HDR = struct.Struct("=IHHII")
_DIAG_REQ = struct.Struct("=BBBBI")          # struct inet_diag_req_v2, then the 48-byte id
_DIAG_ID_LEN = 48                            # struct inet_diag_sockid
_DIAG_MSG_TAIL = struct.Struct("=IIIII")     # expires, rqueue, wqueue, uid, inode


def abort_orphans(ns: str) -> int:
    """Abort (SOCK_DESTROY, as ``ss -K`` does) every TCP socket in
    namespace `ns` that no process owns any more (inode 0: an orphan still
    closing, a SYN_RECV or TIME_WAIT entry).  An orphan whose peer cannot
    be reached (a broken path, a switch program dropping everything) holds
    the namespace, its veths and their tc programs for minutes while TCP
    retries; nothing of a lab that is going away needs it.  Sockets that a
    process holds are left alone: down() reports them.  Raw sock_diag
    netlink: pyroute2 0.9 lists sockets but cannot destroy them.  Returns
    how many were aborted."""
    with in_netns(ns):
        sk = _socket.socket(_socket.AF_NETLINK, _socket.SOCK_RAW, _NETLINK_SOCK_DIAG)
    n = 0
    with sk:
        sk.settimeout(5)
        for family in (_socket.AF_INET, _socket.AF_INET6):
            ids = []
            req = _DIAG_REQ.pack(family, _socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF) \
                + bytes(_DIAG_ID_LEN)
            sk.send(_NLMSG_HDR.pack(_NLMSG_HDR.size + len(req), _SOCK_DIAG_BY_FAMILY,
                                    _NLM_F_REQUEST | _NLM_F_DUMP, 1, 0) + req)
            done = False
            while not done:
                data = sk.recv(1 << 16)
                off = 0
                while off + _NLMSG_HDR.size <= len(data):
                    length, kind = _NLMSG_HDR.unpack_from(data, off)[:2]
                    body = off + _NLMSG_HDR.size
                    if kind in (_NLMSG_DONE, _NLMSG_ERROR):
                        done = True
                        break
                    if kind == _SOCK_DIAG_BY_FAMILY:
                        sockid = data[body + 4:body + 4 + _DIAG_ID_LEN]
                        inode = _DIAG_MSG_TAIL.unpack_from(data, body + 4 + _DIAG_ID_LEN)[4]
                        if inode == 0:
                            ids.append(sockid)
                    off += (length + 3) & ~3
            for sockid in ids:
                req = _DIAG_REQ.pack(family, _socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF) + sockid
                sk.send(_NLMSG_HDR.pack(_NLMSG_HDR.size + len(req), _SOCK_DESTROY,
                                        _NLM_F_REQUEST | _NLM_F_ACK, 2, 0) + req)
                ack = sk.recv(4096)
                err = struct.unpack_from("=i", ack, _NLMSG_HDR.size)[0]
                if err == 0:
                    n += 1          # gone meanwhile (ENOENT), a TIME_WAIT (EOPNOTSUPP): fine
    return n


def remove(lab: str, namespaces: Iterable[str], temps: Iterable[str], state_file: str,
            errors: list[str]) -> dict[str, Any]:
    """Delete the root-namespace interfaces named in `temps` and the
    `namespaces` that exist, wait (up to ALIVE_WAIT_S) until the kernel has
    really freed those namespaces, then remove `state_file` if nothing
    failed.  Appends failures to `errors`.  A namespace that stays alive
    because processes are in it is reported in ``["held"]`` (pid lists):
    its interfaces live until they exit; one alive without any process in
    it (an open fd or socket holds it) is an error."""
    from pyroute2 import IPRoute, netns

    report: dict[str, Any] = {"name": lab, "namespaces": [], "temp_ifnames": [], "held": {},
                              "aborted": 0}
    before = len(errors)
    with IPRoute() as ipr:
        for t in temps:
            try:
                for idx in ipr.link_lookup(ifname=t):
                    ipr.link("del", index=idx)
                    report["temp_ifnames"].append(t)
            except Exception as e:
                if not gone(e):
                    errors.append(f"deleting interface {t}: {e!r}")
        ids: dict[str, tuple[int, int | None]] = {}
        for name in namespaces:
            ino = netns_inode(name)
            if ino is None:
                continue
            try:
                ids[name] = (ino, nsid(ipr, name))
            except Exception as e:
                ids[name] = (ino, None)
                errors.append(f"namespace id of {name}: {e!r}")
            try:
                report["aborted"] += abort_orphans(name)
            except Exception as e:
                errors.append(f"aborting orphaned TCP connections in {name}: {e!r}")
            try:
                netns.remove(name)
                report["namespaces"].append(name)
            except Exception as e:
                if not gone(e) or os.path.exists(f"{NETNS_DIR}/{name}"):
                    errors.append(f"removing namespace {name}: {e!r}")
        deadline = time.monotonic() + ALIVE_WAIT_S
        alive = [n for n, (_, i) in ids.items() if i is not None]
        while alive:
            alive = [n for n in alive if nsid_alive(ipr, ids[n][1])]
            if not alive or time.monotonic() > deadline:
                break
            time.sleep(0.02)
    for name in alive:
        holders = pids_in_netns(ids[name][0])
        if holders:
            report["held"][name] = holders
        else:
            errors.append(f"namespace {name} is removed from {NETNS_DIR} but still alive "
                          f"after {ALIVE_WAIT_S:.0f} s with no process in it: an open file "
                          f"descriptor or socket of a process outside holds it (and its "
                          f"veths)")
    left = [n for n in namespaces if os.path.exists(f"{NETNS_DIR}/{n}")]
    if left:
        errors.append(f"namespaces still there: {left}")
    try:
        report["pins"] = remove_pins_of(lab)
    except Exception as e:
        errors.append(f"removing the INT switch pins of lab {lab}: {e!r}")
    if len(errors) == before:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(state_file)
    return report


def remove_pins_of(lab: str) -> list[str]:
    """Unpin the INT switch maps of `lab` (hpccd.lab.int_switch), if any."""
    from .int_switch import pin_dir, remove_pins

    return remove_pins(lab) if os.path.isdir(pin_dir(lab)) else []


def down(what: str, state_dir: str = STATE_DIR,
         topology: Topology | str | None = None) -> dict[str, Any]:
    """Tear down a lab from any process: by lab name (its state file).
    Without a state file of that name: the namespaces ``<what>-<node>``
    of `topology` (a Topology, file or bundled name), or, without
    `topology`, those of the topology `what` names (a file or bundled
    name, under its own [lab] name).  Processes still inside are reported
    in ``["held"]``, not killed."""
    errors: list[str] = []
    if os.path.exists(state_path(what, state_dir)):
        st = load_state(what, state_dir)
        report = remove(st["name"], st["namespaces"], st.get("temp_ifnames", []),
                         state_path(what, state_dir), errors)
    else:
        try:
            topo = topology if isinstance(topology, Topology) else Topology.load(topology or what)
        except TopologyError as e:
            raise LabError(f"no lab {what!r} (no state file {state_path(what, state_dir)}) "
                           f"and no topology to find its namespaces: {e}") from None
        name = what if topology is not None else topo.name
        report = remove(name, [netns_name(name, n) for n in topo.nodes], [],
                         state_path(name, state_dir), errors)
    if errors:
        raise LabError(f"lab {what}: down: " + "; ".join(errors))
    return report
