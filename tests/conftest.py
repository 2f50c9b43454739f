"""Fixtures shared by every test directory: the namespace pair, and the
session-end check that no test namespace is left behind.

"Two network namespaces joined by a veth" for every test that needs one
(tests/bpf, tests/integration ...), built by its one home,
hpccd.lab.namespaces.veth_pair, under names of this session:

    def test_x(netns_pair):
        netns_pair.a, netns_pair.b        namespace names (hpccdt-...-a / -b)
        netns_pair.va, netns_pair.vb      the veth ends, va in a, vb in b
        netns_pair.ip_a, netns_pair.ip_b  10.x addresses, /24, in a and b only
        netns_pair.ifindex_a / _b, mac_a / _b
        netns_pair.popen(ns, argv)        a process inside ns, killed in teardown
        netns_pair.pids_inside(ns)        processes with a task in ns
        netns_pair.side("a" | "b" | name) (namespace, veth, address)

Outside a test (a script, a session fixture) ``netns_pair_ctx()`` gives the
same pair as a context manager.  The transport tests' shared steps are here
too: ``transport_engines`` (engines closed whatever happens), ``set_mtu``
(both ends of a pair) and ``transfer`` (one flow, waited for, checked
byte-exact).

Rules kept here, so that tests do not have to (see also the project's test
rules): namespaces are named ``hpccdt-`` plus a random suffix; they are
created with pyroute2 (no ip/tc commands for netlink), removed in teardown
whatever happened, and teardown checks that they are gone and that no
process still holds them.  Addresses are private (10.x) and exist only
inside the namespaces created here, so test traffic never leaves them.

At the end of the session (the teardown of an autouse session fixture, so a
leak shows as an error in the counts, and a pytest_sessionfinish backstop
for sessions where that fixture never ran) any ``hpccdt-`` namespace that
appeared during the session and is still there fails the run loudly.
Namespaces of this session are recognised by a per-session token in their
names and are removed after being reported; others (a test that made its
own, or another session on the same machine) are reported, after a grace
period for a concurrently running test to finish, and left alone.
Namespaces that were already there when the session started are only
warned about.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import sys
import time
import warnings
from typing import Iterator

import pytest

from hpccd.lab.names import NETNS_DIR
from hpccd.lab.namespaces import VethPair, pair_names, remove_netns, veth_pair

NS_PREFIX = "hpccdt-"
# Names of this session's namespaces start with NS_PREFIX + SESSION_TOKEN:
# 4 hex digits per session and 2 per pair keep the veth names within the
# kernel's 15 characters ("hpccdt" + 6 + "a").
SESSION_TOKEN = secrets.token_hex(2)
_serial = itertools.count(secrets.randbelow(256))
# Every namespace this session created (whether or not it is gone since).
_created: set[str] = set()
# hpccdt- namespaces present when the session started.
_at_start: set[str] = set()
# Set once the end-of-session check has run; the namespaces it reported.
_checked = False
_reported: set[str] = set()
# Seconds to wait for a foreign hpccdt- namespace (possibly another
# session's test in progress) to go away before reporting it.
FOREIGN_GRACE_S = 15.0


def list_test_netns() -> set[str]:
    """Names of the hpccdt- namespaces in /run/netns (no netlink needed)."""
    try:
        return {n for n in os.listdir(NETNS_DIR) if n.startswith(NS_PREFIX)}
    except FileNotFoundError:
        return set()


# The pair itself (hpccd.lab.namespaces.veth_pair): here only the names of
# this session, so that the leak check below knows them.
NetnsPair = VethPair


@contextlib.contextmanager
def netns_pair_ctx(ip_a: str = "10.199.0.1", ip_b: str = "10.199.0.2",
                   prefixlen: int = 24, queues: int = 1) -> Iterator[NetnsPair]:
    """Build a namespace pair of this session (hpccd.lab.namespaces.veth_pair);
    on exit (whatever happened) stop its processes, remove both namespaces
    and check that they are gone and that no process is left inside them.
    A failed check raises after all the clean-up was attempted.  queues: TX
    and RX queues of each veth end."""
    existing = list_test_netns()
    for _ in range(256):                  # skip names a leaked pair still holds
        tag = f"{SESSION_TOKEN}{next(_serial) % 256:02x}"
        if f"{NS_PREFIX}{tag}-a" not in existing and f"{NS_PREFIX}{tag}-b" not in existing:
            break
    a, b, va, vb = pair_names(NS_PREFIX.rstrip("-"), tag)
    _created.update((a, b))
    with veth_pair(a, b, va, vb, ip_a, ip_b, prefixlen, queues) as p:
        yield p


@pytest.fixture
def netns_pair() -> Iterator[NetnsPair]:
    """Two fresh namespaces joined by a veth (see NetnsPair); removed
    whatever the test did.  Needs root."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    with netns_pair_ctx() as p:
        yield p


# ---- the lab (hpccd.lab.netns, docs/lab.md) -------------------------------------------------

def new_lab_name() -> str:
    """A lab name of this session, ``hpccdt-<session><nn>``: its namespaces
    (``hpccdt-<session><nn>-<node>``) fall under the end-of-session leak
    check, and two labs of the same topology file never meet."""
    existing = list_test_netns()
    for _ in range(256):
        name = f"{NS_PREFIX}{SESSION_TOKEN}{next(_serial) % 256:02x}"
        if not any(n.startswith(name + "-") for n in existing):
            return name
    raise RuntimeError("no free lab name")


@contextlib.contextmanager
def lab_ctx(topology, **kw):
    """A Lab of `topology` (Topology, file or bundled name; `kw` go to
    Lab()) that is up, under a name of new_lab_name().  On exit, whatever
    happened (also when up() itself failed): Lab.down(), then the checks
    that every namespace of the lab is gone and freed by the kernel (no
    process, fd or socket holds it, so its veths and tc programs are gone
    too), that no half-built veth is left in the root namespace, and that
    the state file is gone.  A failed check raises after all the clean-up
    was attempted."""
    import socket

    from hpccd.lab.netns import Lab

    lab = Lab(topology, name=new_lab_name(), **kw)
    _created.update(lab.namespaces)
    try:
        lab.up()
        yield lab
    finally:
        problems = []
        try:
            report = lab.down()
            if report["held"]:
                problems.append(f"processes still in removed namespaces: {report['held']}")
        except Exception as e:
            problems.append(f"down: {e}")
        left = list_test_netns() & set(lab.namespaces)
        if left:
            problems.append(f"namespaces still listed: {sorted(left)}")
        temps = []
        for i in lab.ifaces:
            with contextlib.suppress(OSError):
                socket.if_nametoindex(i.temp)
                temps.append(i.temp)
        if temps:
            problems.append(f"half-built veths left in the root namespace: {temps}")
        if os.path.exists(lab.state_file):
            problems.append(f"state file left: {lab.state_file}")
        from hpccd.lab.int_switch import PIN_ROOT, pin_dir
        if os.path.exists(pin_dir(lab.name)):
            problems.append(f"INT switch pins left: {pin_dir(lab.name)}")
        elif os.path.isdir(PIN_ROOT) and not os.listdir(PIN_ROOT):
            problems.append(f"empty pin folder left: {PIN_ROOT}")
        if problems:
            raise RuntimeError(f"lab {lab.name} teardown: " + "; ".join(problems))


@contextlib.contextmanager
def transport_engines(lab, **defaults):
    """A factory ``make(host, **kw)`` of hpccd.transport.engine engines on eth0 of
    `lab`'s hosts (or, when `lab` is a NetnsPair, on the veth end of side
    `host`: "a" or "b"), `defaults` filling what `kw` leaves out; every
    engine made is closed on exit (XDP detached, socket closed), whatever
    happened -- before the lab goes: an open AF_XDP socket would keep its
    namespace."""
    from hpccd.transport.engine import Transport

    made = []

    def make(host: str, **kw):
        for k, v in defaults.items():
            kw.setdefault(k, v)
        if isinstance(lab, NetnsPair):
            ns, ifname, _ = lab.side(host)
        else:
            ns, ifname = lab.netns(host), "eth0"
        tp = Transport(ifname, netns=ns, **kw)
        made.append(tp)
        return tp

    try:
        yield make
    finally:
        for tp in made:
            tp.close()


def set_mtu(pair: NetnsPair, mtu: int) -> None:
    """Both veth ends of `pair` at `mtu` (the jumbo and multi-buffer tests)."""
    import subprocess

    for ns, dev in ((pair.a, pair.va), (pair.b, pair.vb)):
        subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "set", dev, "mtu", str(mtu)],
                       check=True)


HPCCCTL_MODULE = [sys.executable, "-m", "hpccd.cli.main"]


def hpccctl_pair(pair: NetnsPair, server: list[str], client: list[str], settle: float = 1.0):
    """`hpccctl SERVER...` in namespace b (its XDP program and engine up
    after `settle` seconds), then `hpccctl CLIENT...` in a to completion;
    the server is waited for (30 s) and killed if it is still there.  Both
    must exit 0 (their stderr in the failure); returns their last stdout
    lines as JSON: (client's, server's)."""
    import json
    import subprocess

    srv = pair.popen("b", [*HPCCCTL_MODULE, *server], stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(settle)
        sent = subprocess.run(["ip", "netns", "exec", pair.a, *HPCCCTL_MODULE, *client],
                              capture_output=True, text=True, timeout=120)
        out, err = srv.communicate(timeout=30)
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.communicate()
    assert sent.returncode == 0, sent.stderr
    assert srv.returncode == 0, err
    return json.loads(sent.stdout.splitlines()[-1]), json.loads(out.strip().splitlines()[-1])


def transfer(tx, rx, peer: str, nbytes: int, verify: bool = True, **kw):
    """One flow of `nbytes` from engine `tx` to engine `rx` (at address
    `peer`): DCTCP without INT, 20 s timeout unless `kw` (open_flow's
    parameters) says otherwise.  Waits for the sender (60 s) and the
    receiver (10 s), closes the flow whatever happened, and asserts it is
    done; with `verify`, that the receiver got every byte of the generated
    stream (its CRC-32).  Returns (sender's FlowResult, receiver's flow)."""
    from hpccd.transport.engine import pattern_crc32

    kw = {"algo": "dctcp", "int_mode": "none", "timeout_s": 20, **kw}
    flow = tx.open_flow(peer, nbytes, **kw)
    try:
        res = flow.wait(60)
        got = rx.wait_rx_flow(flow.flow_id, timeout=10.0)
    finally:
        flow.close()
    assert res.done, res
    if verify:
        assert got.bytes == nbytes and got.crc32 == pattern_crc32(flow.seed, nbytes), got
    return res, got


@pytest.fixture
def lab():
    """A factory: ``lab(topology, **Lab_kwargs)`` builds a lab (see
    lab_ctx) and returns the Lab, up; every lab made is torn down and
    checked at the end of the test, whatever the test did.  Needs root."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    with contextlib.ExitStack() as stack:
        yield lambda topology, **kw: stack.enter_context(lab_ctx(topology, **kw))


# ---- end-of-session check -----------------------------------------------------------

def _leak_report() -> tuple[list[str], list[str], list[str]]:
    """(ours, foreign, preexisting): hpccdt- namespaces still present."""
    now = list_test_netns()
    ours = sorted(n for n in now if n in _created or n.startswith(NS_PREFIX + SESSION_TOKEN))
    foreign = sorted(now - set(ours) - _at_start)
    if foreign:                              # maybe another session's test in progress
        deadline = time.monotonic() + FOREIGN_GRACE_S
        while foreign and time.monotonic() < deadline:
            time.sleep(0.5)
            foreign = sorted(set(foreign) & list_test_netns())
    pre = sorted((now & _at_start) - set(ours))
    return ours, foreign, pre


def _check_leaks() -> str | None:
    """Report (and remove this session's) leftover namespaces; the failure
    message, or None."""
    global _checked
    _checked = True
    ours, foreign, pre = _leak_report()
    _reported.update(ours, foreign)
    if pre:
        warnings.warn(f"hpccdt- namespaces already present when the session started "
                      f"(an earlier run left them?): {pre}")
    if not ours and not foreign:
        return None
    msg = ["LEAKED NETWORK NAMESPACES at the end of the test session:"]
    if ours:
        removed = []
        for name in ours:
            with contextlib.suppress(Exception):
                remove_netns(name)
                removed.append(name)
        msg.append(f"  created by this session and not removed by their test: {ours} "
                   f"(now removed: {removed})")
    if foreign:
        msg.append(f"  appeared during this session, not made by the netns_pair fixture "
                   f"(a test that built its own, or another session on this machine; "
                   f"left in place): {foreign}")
    return "\n".join(msg)


def pytest_sessionstart(session):
    _at_start.update(list_test_netns())


@pytest.fixture(scope="session", autouse=True)
def _no_leaked_netns():
    """Fails the session (as an error at the teardown of its last test) when
    hpccdt- namespaces are left over; see the module docstring."""
    yield
    msg = _check_leaks()
    if msg:
        pytest.fail(msg, pytrace=False)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    # Backstop: the session fixture did not run (collection error, no test
    # selected), or a namespace appeared after its teardown.
    unreported = list_test_netns() - _at_start - _reported
    msg = _check_leaks() if not _checked or unreported else None
    if msg:
        tr = session.config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None:
            tr.write_sep("!", "leaked network namespaces", red=True, bold=True)
            tr.write_line(msg, red=True)
        else:
            print(msg)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
