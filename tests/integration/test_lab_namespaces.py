"""The one home of "two namespaces joined by a veth" (hpccd.lab.namespaces.veth_pair,
what the tests' netns_pair fixture and the benchmarks build on) and of the
processes started in a namespace (popen_in, stop_processes): real namespaces
made here, real UDP across the veth, and their removal checked whatever
happens -- after a clean exit, after a failure half-way through the set-up,
and with a process left inside.
"""
from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import time

import pytest

pytestmark = pytest.mark.integration

if os.geteuid() != 0:
    pytest.skip("network namespaces need root", allow_module_level=True)

from pyroute2 import NetNS  # noqa: E402

from conftest import NS_PREFIX, SESSION_TOKEN, _created  # noqa: E402
from hpccd.lab import namespaces  # noqa: E402
from hpccd.lab.names import NETNS_DIR, LabError  # noqa: E402
from hpccd.lab.namespaces import (in_netns, netns_inode, pair_names,  # noqa: E402
                                  pids_in_netns, popen_in, stop_processes, veth_pair)

IP_A, IP_B = "10.197.0.1", "10.197.0.2"


def _names() -> tuple[str, str, str, str]:
    a, b, va, vb = pair_names(NS_PREFIX.rstrip("-"), f"{SESSION_TOKEN}{secrets.token_hex(1)}")
    _created.update((a, b))                         # under the session's leak check
    return a, b, va, vb


def _exists(name: str) -> bool:
    return os.path.exists(f"{NETNS_DIR}/{name}")


def test_pair_carries_udp_and_is_removed_on_exit():
    a, b, va, vb = _names()
    with veth_pair(a, b, va, vb, IP_A, IP_B, queues=2) as p:
        assert _exists(a) and _exists(b)
        assert p.side("a") == (a, va, IP_A) and p.side(b) == (b, vb, IP_B)
        with pytest.raises(ValueError):
            p.side("c")
        assert p.ifindex_a > 0 and p.ifindex_b > 0 and p.mac_a != p.mac_b
        for ns, ifname, idx in ((a, va, p.ifindex_a), (b, vb, p.ifindex_b)):
            with NetNS(ns, flags=0) as n:
                link = n.get_links(idx)[0]
            assert link.get_attr("IFLA_IFNAME") == ifname
            assert link.get_attr("IFLA_OPERSTATE") in ("UP", "UNKNOWN")
            assert (link.get_attr("IFLA_NUM_TX_QUEUES"), link.get_attr("IFLA_NUM_RX_QUEUES")) \
                == (2, 2)
        with in_netns(b):
            rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        with in_netns(a):
            tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        with rx, tx:
            rx.bind((IP_B, 0))
            rx.settimeout(3)
            tx.bind((IP_A, 0))
            tx.sendto(b"across the veth", rx.getsockname())
            data, frm = rx.recvfrom(64)
            assert data == b"across the veth" and frm == tx.getsockname()
        inodes = [netns_inode(a), netns_inode(b)]
    assert not _exists(a) and not _exists(b)
    assert all(pids_in_netns(i) == [] for i in inodes)


def test_processes_are_stopped_with_the_pair():
    a, b, va, vb = _names()
    with veth_pair(a, b, va, vb, IP_A, IP_B) as p:
        # a process that ignores SIGTERM: only the SIGKILL after the grace time stops it
        stubborn = p.popen("b", ["sh", "-c", "trap '' TERM; sleep 60"])
        plain = p.popen(a, ["sleep", "60"], stdout=subprocess.PIPE)
        # both inside once `ip netns exec` has entered its namespace (one
        # may come well after the other on a loaded machine)
        deadline = time.monotonic() + 5
        while ((stubborn.pid not in p.pids_inside("b") or plain.pid not in p.pids_inside(a))
               and time.monotonic() < deadline):
            time.sleep(0.05)
        assert stubborn.pid in p.pids_inside("b")
        assert plain.pid in p.pids_inside("a")
        time.sleep(0.2)                 # the trap is set before sleep starts
    assert stubborn.returncode == -signal.SIGKILL
    assert plain.returncode == -signal.SIGTERM and plain.stdout.closed
    assert p.procs == []
    assert not _exists(a) and not _exists(b)


def test_a_failure_half_way_leaves_nothing():
    """The veth cannot be made (its name is too long for the kernel): both
    namespaces made before it are removed, and the error is the kernel's."""
    a, b, va, _ = _names()
    with pytest.raises(Exception) as err:
        with veth_pair(a, b, va, "x" * 20, IP_A, IP_B):
            pytest.fail("the pair should not have been built")
    assert not isinstance(err.value, LabError), err.value
    assert not _exists(a) and not _exists(b)


def test_a_namespace_still_held_is_reported_after_clean_up():
    """A process started in the namespace by other means, which the pair
    does not know about, holds it after its name is gone: LabError names
    the pids, and the namespaces' names are removed all the same."""
    a, b, va, vb = _names()
    outside: list[subprocess.Popen] = []
    try:
        with pytest.raises(LabError, match="still held by pids"):
            with veth_pair(a, b, va, vb, IP_A, IP_B):
                outside.append(popen_in(b, ["sleep", "60"]))
                deadline = time.monotonic() + 5
                while not pids_in_netns(netns_inode(b)) and time.monotonic() < deadline:
                    time.sleep(0.05)
        assert not _exists(a) and not _exists(b)
    finally:
        stop_processes(outside)
    assert outside == []


def test_pair_names_fit_the_kernel():
    assert pair_names("hpccdb", "0a1b2c") == ("hpccdb-0a1b2c-a", "hpccdb-0a1b2c-b",
                                              "hpccdb0a1b2ca", "hpccdb0a1b2cb")
    with pytest.raises(ValueError, match="15 characters"):
        pair_names("hpccdbench", "0a1b2c")


def test_remove_netns_of_a_missing_namespace_is_fine():
    a, _, _, _ = _names()
    assert not _exists(a)
    namespaces.remove_netns(a)
