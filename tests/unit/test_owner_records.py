"""Owner records (hpccd.agent.ownership): pruning the records nobody can
ever need, in a temporary run directory.

Invariants protected: a record whose owner is dead and whose network
namespace is gone is removed by ``prune`` and by any ``claim`` (which logs
the count and the namespaces at info level), and ``hpccd --cleanup``
reports it apart from the namespace's leftovers; a record is kept while its
owner lives, while it is of the caller's namespace, and while anything
holds its namespace: a task (a whole process, or one thread that entered
it), an nsfs bind mount (``/run/netns/<name>``), an open file; once the
last holder is gone it is pruned.  Nothing is pruned when the scan is in
doubt, and an unreadable record is left as it is.  Every test that expects
a record kept also holds one that must go, so a scan that prunes nothing
fails it as surely as one that prunes too much.
"""
from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import json
import logging
import os
import pathlib
import subprocess
import sys
import threading
import types
from typing import Iterator

import pytest

from hpccd.agent import netns_scan, ownership
from hpccd.agent.ownership import Owner

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")

# No namespace has an inode beyond 32 bits: nothing holds this one.
NOWHERE = 2**33 + 7
CLONE_NEWNET = 0x40000000


@pytest.fixture(scope="module")
def dead() -> tuple[int, int]:
    """(pid, start time) of a process that has been reaped."""
    p = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                         stdin=subprocess.PIPE)
    start = ownership.start_time(p.pid)
    p.communicate(b"")
    assert start is not None and not ownership.alive(p.pid, start)
    return p.pid, start


@pytest.fixture
def run_dir(tmp_path) -> str:
    (tmp_path / "owners").mkdir()
    return str(tmp_path)


def write(run_dir: str, pid: int, start: int, netns: int, ifindex: int = 7,
          name: str = "eth0") -> pathlib.Path:
    p = pathlib.Path(run_dir) / "owners" / f"net{netns}-if{ifindex}.json"
    p.write_text(json.dumps(dataclasses.asdict(
        Owner(pid, start, netns, ifindex, name, "/run/x.sock", 11, 12, 1.0))) + "\n")
    return p


def ids(owners: list[Owner]) -> list[tuple[int, int]]:
    return sorted((o.netns, o.ifindex) for o in owners)


@contextlib.contextmanager
def named_netns() -> Iterator[str]:
    """A named namespace of this session (the tests' rules: conftest),
    removed whatever happens."""
    from pyroute2 import netns

    from conftest import _created, new_lab_name
    from hpccd.lab.namespaces import remove_netns

    name = f"{new_lab_name()}-prune"
    _created.add(name)
    netns.create(name)
    try:
        yield name
    finally:
        remove_netns(name)


def inode(name: str) -> int:
    return os.stat(f"/run/netns/{name}").st_ino


def assert_held_then_pruned(run_dir, dead, ns: int, release) -> None:
    """A record of `ns` is kept (while a control record of nowhere goes),
    then, once `release()` let go of the namespace's last holder, pruned."""
    kept = write(run_dir, *dead, ns)
    gone = write(run_dir, *dead, NOWHERE)
    assert ids(ownership.prune(run_dir)) == [(NOWHERE, 7)]
    assert kept.exists() and not gone.exists()
    release()
    assert ids(ownership.prune(run_dir)) == [(ns, 7)]
    assert not kept.exists()
    assert ownership.prune(run_dir) == []


# ---- which records go ---------------------------------------------------------------

def test_dead_owner_of_a_gone_namespace_is_pruned(run_dir, dead):
    p = write(run_dir, *dead, NOWHERE, ifindex=3, name="veth9")
    (o,) = ownership.prune(run_dir)
    assert (o.pid, o.start, o.netns, o.ifindex, o.name) == (*dead, NOWHERE, 3, "veth9")
    assert not p.exists()
    assert ownership.prune(run_dir) == []


def test_a_claim_prunes_and_says_so(run_dir, dead, caplog):
    p1 = write(run_dir, *dead, NOWHERE, ifindex=3)
    p2 = write(run_dir, *dead, NOWHERE + 1, ifindex=4)
    caplog.set_level(logging.INFO, logger="hpccd.agent.ownership")
    # Another interface (lo) in another namespace (this one).
    assert ownership.claim([("lo", 1)], run_dir=run_dir) == []
    try:
        assert not p1.exists() and not p2.exists()
        mine = pathlib.Path(run_dir) / "owners" / f"net{ownership.netns_id()}-if1.json"
        assert json.loads(mine.read_text())["pid"] == os.getpid()
        (rec,) = [r for r in caplog.records if "pruned" in r.getMessage()]
        assert rec.levelno == logging.INFO
        assert rec.getMessage() == (f"pruned 2 owner record(s) of dead daemons whose network "
                                    f"namespace is gone: net:[{NOWHERE}], net:[{NOWHERE + 1}]")
    finally:
        ownership.release([1], run_dir=run_dir)


def test_dead_owner_of_this_namespace_is_kept(run_dir, dead):
    here = ownership.netns_id()
    lo = write(run_dir, *dead, here, ifindex=1, name="lo")
    missing = write(run_dir, *dead, here, ifindex=999_999, name="gone0")
    gone = write(run_dir, *dead, NOWHERE)
    assert ids(ownership.prune(run_dir)) == [(NOWHERE, 7)]
    assert lo.exists() and missing.exists() and not gone.exists()
    # A claim of another interface of this namespace leaves them too.
    gone = write(run_dir, *dead, NOWHERE)
    assert ownership.claim([("lo", 1)], run_dir=run_dir) != []      # lo's: replaced
    try:
        assert missing.exists() and not gone.exists()
    finally:
        ownership.release([1], run_dir=run_dir)


def test_live_owner_is_kept_wherever_its_namespace(run_dir, dead):
    me = write(run_dir, os.getpid(), ownership.start_time(os.getpid()), NOWHERE + 1)
    child = subprocess.Popen(["sleep", "60"])
    try:
        other = write(run_dir, child.pid, ownership.start_time(child.pid), NOWHERE + 2)
        gone = write(run_dir, *dead, NOWHERE)
        assert ids(ownership.prune(run_dir)) == [(NOWHERE, 7)]
        assert me.exists() and other.exists() and not gone.exists()
    finally:
        child.kill()
        child.wait()
    # Dead now (reaped): its record goes.
    assert ids(ownership.prune(run_dir)) == [(NOWHERE + 2, 7)]
    assert me.exists()


def test_unreadable_and_misplaced_records_are_left_alone(run_dir, dead):
    d = pathlib.Path(run_dir) / "owners"
    junk = d / f"net{NOWHERE}-if1.json"
    junk.write_text("{not json")
    misplaced = d / f"net{NOWHERE}-if2.json"       # says it is of another namespace
    misplaced.write_text(json.dumps(dataclasses.asdict(Owner(*dead, NOWHERE + 9, 2, "x"))))
    gone = write(run_dir, *dead, NOWHERE)
    assert ids(ownership.prune(run_dir)) == [(NOWHERE, 7)]
    assert junk.exists() and misplaced.exists() and not gone.exists()


def test_nothing_is_pruned_in_doubt(run_dir, dead, monkeypatch):
    p = write(run_dir, *dead, NOWHERE)
    monkeypatch.setattr(netns_scan, "_proc_restricted", lambda: "/proc is mounted with hidepid=2")
    assert ownership.prune(run_dir) == []
    assert p.exists()

    def refused(path):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.undo()
    monkeypatch.setattr(netns_scan.os, "listdir", refused)
    assert ownership.prune(run_dir) == []
    assert p.exists()
    monkeypatch.undo()
    assert ids(ownership.prune(run_dir)) == [(NOWHERE, 7)]


def test_no_owner_records_folder_is_not_created(tmp_path):
    assert ownership.prune(str(tmp_path)) == []
    assert not (tmp_path / "owners").exists()


# ---- what holds a namespace ---------------------------------------------------------

@needs_root
def test_a_bind_mount_holds_a_namespace(run_dir, dead):
    with named_netns() as name:
        from hpccd.lab.namespaces import remove_netns

        assert_held_then_pruned(run_dir, dead, inode(name), lambda: remove_netns(name))


@needs_root
def test_an_open_file_holds_a_namespace(run_dir, dead):
    from hpccd.lab.namespaces import remove_netns

    fd = None
    try:
        with named_netns() as name:
            ns = inode(name)
            fd = os.open(f"/run/netns/{name}", os.O_RDONLY | os.O_CLOEXEC)
            remove_netns(name)
            assert not os.path.exists(f"/run/netns/{name}")

            def close():
                nonlocal fd
                os.close(fd)
                fd = None

            assert_held_then_pruned(run_dir, dead, ns, close)
    finally:
        if fd is not None:
            os.close(fd)


@needs_root
def test_a_process_in_it_holds_a_namespace(run_dir, dead):
    from hpccd.lab.namespaces import popen_in, remove_netns, stop_processes

    procs = []
    try:
        with named_netns() as name:
            ns = inode(name)
            procs.append(popen_in(name, ["sleep", "60"]))
            # ip netns exec's task is in the namespace once it runs sleep
            for _ in range(200):
                if os.path.exists(f"/proc/{procs[0].pid}/exe") and \
                        os.readlink(f"/proc/{procs[0].pid}/exe").endswith("sleep"):
                    break
                threading.Event().wait(0.01)
            assert os.stat(f"/proc/{procs[0].pid}/ns/net").st_ino == ns
            remove_netns(name)
            assert_held_then_pruned(run_dir, dead, ns, lambda: stop_processes(procs))
    finally:
        stop_processes(procs)


@needs_root
def test_one_thread_in_it_holds_a_namespace(run_dir, dead):
    """The daemon's threads enter namespaces (hpccd.bpf.loader.in_netns):
    a thread's namespace is not its process's."""
    from hpccd.lab.namespaces import remove_netns

    libc = ctypes.CDLL(None, use_errno=True)
    inside, leave = threading.Event(), threading.Event()
    failed: list[str] = []

    def visit(path: str) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                failed.append(os.strerror(ctypes.get_errno()))
                return
        finally:
            os.close(fd)                    # only the thread itself holds it now
        inside.set()
        leave.wait(60)                      # its namespace ends with the thread

    t = None
    try:
        with named_netns() as name:
            ns = inode(name)
            t = threading.Thread(target=visit, args=(f"/run/netns/{name}",), daemon=True)
            t.start()
            assert inside.wait(10), failed
            assert os.stat(f"/proc/self/task/{t.native_id}/ns/net").st_ino == ns
            assert ownership.netns_id() != ns
            remove_netns(name)

            def end_thread():
                leave.set()
                t.join(10)
                assert not t.is_alive()

            assert_held_then_pruned(run_dir, dead, ns, end_thread)
    finally:
        leave.set()
        if t is not None:
            t.join(10)


# ---- hpccd --cleanup ----------------------------------------------------------------

def test_cleanup_command_reports_pruned_records_apart(run_dir, dead, monkeypatch, capsys,
                                                      tmp_path):
    from hpccd.agent import main

    gone = write(run_dir, *dead, NOWHERE, ifindex=5, name="veth3")
    monkeypatch.setattr(ownership, "RUN_DIR", run_dir)
    cfg = types.SimpleNamespace(control_socket=str(tmp_path / "ctl.sock"), components=[])
    monkeypatch.setattr(main.config_mod, "load", lambda path: cfg)
    monkeypatch.setattr(main, "cleanup", lambda *a: {"xdp": [], "tc": [], "records": [],
                                                     "owned": []})
    assert main._cleanup_command(str(tmp_path / "hpccd.toml")) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["hpccd --cleanup: removed 0 leftover(s)",
                   f"hpccd --cleanup: pruned 1 owner record(s) of dead daemons whose network "
                   f"namespace is gone: ['net{NOWHERE}-if5 (veth3, pid {dead[0]})']"]
    assert not gone.exists()
    # Nothing to prune: the output is what it was.
    assert main._cleanup_command(str(tmp_path / "hpccd.toml")) == 0
    assert capsys.readouterr().out.splitlines() == ["hpccd --cleanup: removed 0 leftover(s)"]


# ---- owners /proc does not show --------------------------------------------------

def test_an_owner_hidden_from_proc_is_alive_while_its_pid_exists(run_dir, dead, monkeypatch):
    """hidepid (the unit's ProtectProc=invisible) hides a process whose
    capabilities the caller lacks: /proc/<pid>/stat is missing as for a
    dead one.  While kill(pid, 0) finds the pid the owner counts as alive
    (its interface is refused, its record kept); a pid that does not
    exist is gone, hidden or not."""
    child = subprocess.Popen(["sleep", "30"])
    try:
        start = ownership.start_time(child.pid)
        real = ownership._read_start
        hidden = {child.pid, dead[0]}

        def read_start(pid):
            if pid in hidden:
                raise FileNotFoundError(2, "No such file or directory", f"/proc/{pid}/stat")
            return real(pid)

        monkeypatch.setattr(ownership, "_read_start", read_start)
        assert ownership.start_time(child.pid) is None        # what /proc shows
        assert ownership.alive(child.pid, start)
        assert ownership.alive(child.pid, start + 1)           # its start unreadable
        assert not ownership.alive(*dead)                      # no such pid
        rec = write(run_dir, child.pid, start, ownership.netns_id(), ifindex=1, name="lo")
        with pytest.raises(ownership.InterfaceOwnedError, match=f"pid {child.pid}"):
            ownership.claim([("lo", 1)], run_dir=run_dir)
        assert rec.exists() and json.loads(rec.read_text())["pid"] == child.pid
        assert ownership.release([1], run_dir=run_dir, dead_only=True) == []
    finally:
        child.kill()
        child.wait()
    assert not ownership.alive(child.pid, start)               # reaped: gone
    assert ownership.release([1], run_dir=run_dir, dead_only=True) == [1]
