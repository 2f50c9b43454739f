"""Several hpccd processes on one host: each cleans up only what it owns.

Lab: h1, h2, h3 on one software INT switch (no traffic is needed: what is
checked is who attached and registered what).  Each daemon runs the
``tcp_side`` component, so all of them share the host-wide struct_ops
``hpcc`` and ``dctcp``, and attaches xdp_host and tc_tracker to its eth0.

Invariants protected:
- three daemons in three namespaces, stopped in every order, each by SIGTERM
  or SIGKILL: after each stop every live daemon still has its own XDP
  program and tc filter attached (its ``status`` says so and the kernel's
  program ids are its), ``hpcc`` and ``dctcp`` stay registered exactly
  once while one daemon lives; ``hpccd --cleanup`` of a SIGKILLed daemon
  removes its programs and nothing of the others'; at the end no hpccd_*
  program is attached, nothing hpccd_tcp_* is registered, no owner record
  is left;
- a second daemon in the same namespace on the same interface (another
  control socket) is refused with exit status 2 and a message naming the
  owner, and touches nothing: the first stays ready with its programs;
  ``hpccd --cleanup`` with the second one's configuration leaves them too;
  after the first is SIGKILLed the second starts, takes the interface and
  removes the dead one's programs (exactly one XDP program, the new one).
"""
from __future__ import annotations

import itertools
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import tempfile

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.bpf]

if os.geteuid() != 0:
    pytest.skip("namespaces, XDP, tc and struct_ops need root", allow_module_level=True)

from hpccd.bpf import loader as bpf  # noqa: E402
from hpccd.agent import ownership  # noqa: E402
from hpccd.experiment.common import star  # noqa: E402
from hpccd.lab.topology import Topology  # noqa: E402
from lab_hpccd import BUILT, HPCCD, LabHpccd, daemon_toml, start_when_free  # noqa: E402

HOSTS = ("h1", "h2", "h3")
TOPOLOGY = star("olab", "10.123.0.0/16", 0x0B1, list(HOSTS), 1000, 1_000_000)


def available() -> list[str]:
    with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
        return f.read().split()


def registered() -> list[str]:
    out = subprocess.run(["bpftool", "-j", "map", "show"], capture_output=True, text=True,
                         timeout=30)
    return sorted(m["name"] for m in json.loads(out.stdout or "[]")
                  if m.get("type") == "struct_ops" and m.get("name", "").startswith("hpccd_tcp_"))


class Hpccd(LabHpccd):
    def __init__(self, lab, d: pathlib.Path, host: str, tag: str):
        sock = d / f"{host}-{tag}.sock"
        super().__init__(lab, host, d, f"{host}-{tag}",
                         daemon_toml(control_socket=sock, metrics_address="",
                                     components=["tcp_side"]), sock)


def start(lab, d, host, tag) -> Hpccd:
    """Start and wait; another engineer's test may hold the struct_ops
    exclusively for a while (an older TcpCc): retry then."""
    def make() -> Hpccd:
        h = Hpccd(lab, d, host, tag)
        lab.procs.append(h)
        return h
    return start_when_free(make, "exclusively")


def attached(lab, host: str) -> tuple[int | None, int | None]:
    with bpf.in_netns(lab.netns(host)):
        return (bpf.xdp_query("eth0"), bpf.tc_query("eth0", "egress", 1, 1))


def hpccd_progs(lab, host: str) -> list[str]:
    """Names of the hpccd_* programs attached to eth0 of `host` (XDP, tc)."""
    with bpf.in_netns(lab.netns(host)):
        out = []
        xid = bpf.xdp_query("eth0")
        if xid is not None:
            out.append(bpf._prog_name(xid))
        out += [f.name for f in bpf.tc_list("eth0") if f.name.startswith("hpccd_")]
        return [n for n in out if n and n.startswith("hpccd_")]


def cleanup_cmd(lab, h: Hpccd) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", lab.netns(h.host), HPCCD, "--cleanup",
                           "--config", str(h.cfg)], capture_output=True, text=True, timeout=60)


def assert_live_intact(lab, live: list[Hpccd]) -> None:
    for h in live:
        st = h.status()
        assert st is not None, (h.host, h.log())
        (itf,) = st["interfaces"]
        assert itf["xdp_attached"] and itf["tc_attached"], (h.host, itf)
        assert attached(lab, h.host) == (itf["xdp_prog_id"], itf["tc_prog_id"])
        assert st["components"]["tcp_side"]["healthy"], st["components"]
    if live:
        assert "hpcc" in available() and "dctcp" in available()
        assert registered() == ["hpccd_tcp_dctcp", "hpccd_tcp_hpcc"]


def my_records(lab) -> list[str]:
    """The ownership records of the lab's hosts' interfaces.  Not every
    record of their namespaces: a namespace's id is its inode, which the
    kernel gives again after a namespace is gone, and a daemon killed with
    SIGKILL leaves the records of its (since deleted) interfaces behind."""
    d = pathlib.Path(ownership.RUN_DIR) / "owners"
    names = set()
    for h in HOSTS:
        with bpf.in_netns(lab.netns(h)):
            ns = ownership.netns_id()
            names |= {f"net{ns}-if{i}.json" for i, _ in socket.if_nameindex()}
    return sorted(p.name for p in d.glob("net*.json") if p.name in names)


@pytest.fixture(scope="module")
def olab():
    for n in ("xdp_host", "tc_tracker", "tcp_hpcc", "tcp_dctcp", "int_switch"):
        if not (BUILT / f"{n}.bpf.o").exists():
            pytest.skip(f"build/ebpf/{n}.bpf.o is not built (make bpf)")
    from conftest import lab_ctx

    d = pathlib.Path(tempfile.mkdtemp(prefix="hpccd-own-"))
    try:
        with lab_ctx(Topology.loads(TOPOLOGY)) as lab:
            lab.d = d
            lab.procs = []
            try:
                yield lab
            finally:
                for h in lab.procs:
                    h.close()
                for h in lab.procs:
                    cleanup_cmd(lab, h)
    finally:
        shutil.rmtree(d, ignore_errors=True)


ORDERS = list(itertools.permutations(range(3)))
# Every order; the signals alternate so that each position sees both kinds.
SIGNALS = [(signal.SIGKILL, signal.SIGTERM, signal.SIGKILL),
           (signal.SIGTERM, signal.SIGKILL, signal.SIGKILL),
           (signal.SIGKILL, signal.SIGKILL, signal.SIGTERM),
           (signal.SIGTERM, signal.SIGTERM, signal.SIGKILL),
           (signal.SIGKILL, signal.SIGTERM, signal.SIGTERM),
           (signal.SIGTERM, signal.SIGKILL, signal.SIGTERM)]


@pytest.mark.parametrize("case", range(len(ORDERS)),
                         ids=["-".join(f"h{i + 1}{'K' if s == signal.SIGKILL else 'T'}"
                                       for i, s in zip(o, SIGNALS[k]))
                              for k, o in enumerate(ORDERS)])
def test_three_daemons_stopped_in_every_order(olab, case):
    lab = olab
    ds: list[Hpccd] = []
    try:
        for h in HOSTS:
            ds.append(start(lab, lab.d, h, f"c{case}"))
        stop_in_order(lab, ds, case)
    finally:                                 # a failed case leaves nothing to the next one
        for h in ds:
            if h.proc.poll() is None:
                h.stop(signal.SIGKILL)
                cleanup_cmd(lab, h)


def stop_in_order(lab, ds: list[Hpccd], case: int) -> None:
    assert_live_intact(lab, ds)
    live = list(ds)
    for i, sig in zip(ORDERS[case], SIGNALS[case]):
        h = ds[i]
        code = h.stop(sig)
        live.remove(h)
        assert code == (-signal.SIGKILL if sig == signal.SIGKILL else 0), h.log()
        if sig == signal.SIGKILL:
            assert hpccd_progs(lab, h.host), "a SIGKILLed daemon leaves its programs"
        else:
            assert hpccd_progs(lab, h.host) == []
        assert_live_intact(lab, live)
        r = cleanup_cmd(lab, h)
        assert r.returncode == 0, r.stderr
        assert hpccd_progs(lab, h.host) == []
        assert_live_intact(lab, live)             # the clean-up took nothing live
    assert not any(hpccd_progs(lab, h) for h in HOSTS)
    assert "hpcc" not in available() and "dctcp" not in available()
    assert registered() == []
    assert my_records(lab) == []


def test_second_daemon_on_an_owned_interface_is_refused(olab):
    lab = olab
    for h in lab.procs:                      # what an earlier failed test left
        if h.proc.poll() is None:
            h.stop(signal.SIGKILL)
            cleanup_cmd(lab, h)
    first = start(lab, lab.d, "h1", "first")
    ids = attached(lab, "h1")
    second = Hpccd(lab, lab.d, "h1", "second")
    lab.procs.append(second)
    assert second.proc.wait(60) == 2, second.log()
    log = second.log()
    assert "eth0" in log and f"owned by hpccd pid {first.proc.pid}" in log, log
    assert "Traceback" not in log
    assert attached(lab, "h1") == ids
    assert_live_intact(lab, [first])
    # hpccd --cleanup with the second's configuration: the interface is owned.
    r = cleanup_cmd(lab, second)
    assert r.returncode == 0, r.stderr
    assert f"hpccd pid {first.proc.pid}" in r.stderr and "left alone" in r.stderr
    assert attached(lab, "h1") == ids
    assert_live_intact(lab, [first])
    # The owner dies: the interface is free, its leftovers are removed at start.
    first.stop(signal.SIGKILL)
    third = start(lab, lab.d, "h1", "third")
    st = third.status()
    new = attached(lab, "h1")
    assert new == (st["interfaces"][0]["xdp_prog_id"], st["interfaces"][0]["tc_prog_id"])
    assert new[0] != ids[0] and new[1] != ids[1]
    # (the kernel keeps 15 characters of a name)
    assert hpccd_progs(lab, "h1") == ["hpccd_xdp_host", "hpccd_tc_tracker"[:15]]
    assert third.stop(signal.SIGTERM) == 0
    assert hpccd_progs(lab, "h1") == []
    assert registered() == []
    assert my_records(lab) == []
