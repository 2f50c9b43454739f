"""Every BPF object of ebpf/ passes the verifier of the running kernel.

Invariant protected: what `make bpf` builds can be loaded, program by
program, on this kernel (bounds checks, loop bounds, helper use, stack size
are all the verifier's to judge, and only a real load judges them).

Loaded with `bpftool prog loadall OBJ DIR`, which runs libbpf's whole open
/ load sequence (maps created, rodata frozen, CO-RE relocated) and pins the
programs in DIR.  The pins are the only reference to the programs and their
maps, so removing DIR in teardown unloads everything, whatever the test did.
Nothing is attached to any interface.

A later change switches this to the project's libbpf loader; keep it small.
"""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import pytest

pytestmark = pytest.mark.bpf

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "ebpf").glob("*.bpf.c"))
BPFFS = pathlib.Path("/sys/fs/bpf")

# Program type each object must contain (objects not listed: any type).
EXPECTED_TYPES = {
    "xdp_host": {"xdp"},
    "tc_tracker": {"sched_cls"},
}


def _is_bpffs(path: pathlib.Path) -> bool:
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == str(path) and line.split()[2] == "bpf" for line in f)


def _run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=check)


@pytest.fixture(scope="module")
def built() -> pathlib.Path:
    if os.geteuid() != 0:
        pytest.skip("loading BPF programs needs root (CAP_BPF and CAP_NET_ADMIN)")
    if shutil.which("bpftool") is None:
        pytest.skip("bpftool is not installed (scripts/run.sh setup installs it)")
    res = _run("make", "-C", str(ROOT), "-s", "bpf", check=False)
    assert res.returncode == 0, f"make bpf failed:\n{res.stdout}{res.stderr}"
    return ROOT / "build" / "ebpf"


@pytest.fixture
def pin_dir():
    """A fresh directory on a bpffs, removed (and unmounted if we mounted it)
    whatever happens in the test."""
    mounted = None
    if _is_bpffs(BPFFS):
        d = pathlib.Path(tempfile.mkdtemp(prefix="hpccd-test-", dir=BPFFS))
    else:
        # No bpffs at the usual place: mount a private one rather than
        # changing /sys/fs/bpf for everybody else on the machine.
        mounted = pathlib.Path(tempfile.mkdtemp(prefix="hpccd-bpffs-"))
        _run("mount", "-t", "bpf", "bpf", str(mounted))
        d = mounted / "pins"
        d.mkdir()
    try:
        yield d
    finally:
        # Unpinning drops the last reference: programs and maps go away.
        shutil.rmtree(d, ignore_errors=True)
        if mounted is not None:
            _run("umount", str(mounted), check=False)
            shutil.rmtree(mounted, ignore_errors=True)


def test_there_are_bpf_sources():
    assert SOURCES, "ebpf/ holds no *.bpf.c"


@pytest.mark.parametrize("src", SOURCES, ids=[s.name.removesuffix(".bpf.c") for s in SOURCES])
def test_object_loads_through_the_verifier(built, pin_dir, src):
    name = src.name.removesuffix(".bpf.c")
    obj = built / f"{name}.bpf.o"
    assert obj.exists(), f"{obj} not built by make bpf"

    res = _run("bpftool", "prog", "loadall", str(obj), str(pin_dir), check=False)
    # libbpf prints the verifier log on stderr when a program is rejected.
    assert res.returncode == 0, f"{obj.name} rejected:\n{res.stderr[-8000:]}"

    pins = sorted(p for p in pin_dir.iterdir())
    assert pins, f"{obj.name}: loadall pinned no program"
    types = set()
    for pin in pins:
        info = json.loads(_run("bpftool", "-j", "prog", "show", "pinned", str(pin)).stdout)
        assert info.get("bytes_xlated", 0) > 0, f"{pin.name}: no instructions"
        types.add(info["type"])
    want = EXPECTED_TYPES.get(name)
    if want is not None:
        assert want <= types, f"{obj.name}: program types {types}, expected {want}"


# ---- the capabilities the verifier asks of a loader ------------------------------------

CAP_NET_ADMIN, CAP_SYS_ADMIN, CAP_PERFMON, CAP_BPF = 12, 21, 38, 39

LOAD_CHILD = """
import sys
sys.path.insert(0, sys.argv[1])
from hpccd.bpf import loader as bpf
print(next(l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff:")))
obj = bpf.BpfObject.open(sys.argv[2])
try:
    obj.load()
    print("loaded")
except bpf.BpfError as e:
    print("refused")
    print(e)
finally:
    obj.close()
"""


def _load_without(obj: pathlib.Path, caps: list[str]) -> tuple[int, str, str]:
    """Load `obj` in a child process whose capabilities are root's but
    `caps` (dropped from its bounding set by capsh before it execs Python):
    (its effective set, "loaded" or "refused", libbpf's messages)."""
    res = _run("capsh", f"--drop={','.join(caps)}", "--", "-c", 'exec "$0" -c "$1" "$2" "$3"',
               sys.executable, LOAD_CHILD, str(ROOT / "daemon"), str(obj))
    eff, verdict, *log = res.stdout.splitlines()
    return int(eff, 16), verdict, "\n".join(log)


@pytest.mark.skipif(shutil.which("capsh") is None, reason="capsh (libcap2-bin) is not installed")
def test_xdp_host_needs_cap_perfmon(built):
    """What ebpf/README.md "Privileges", docs/security.md and the unit file
    say: with CAP_BPF and CAP_NET_ADMIN but neither CAP_PERFMON nor
    CAP_SYS_ADMIN (which stands for it) the verifier refuses xdp_host --
    its parser adds variable offsets (IPv4 header length, INT room) to
    packet pointers and takes a length as a difference of packet pointers,
    both allowed only to a loader that may leak pointers (CAP_PERFMON);
    with CAP_PERFMON back, still without CAP_SYS_ADMIN, it loads.  The day
    the parser needs neither, this fails and the docs and the unit can
    drop CAP_PERFMON."""
    obj = built / "xdp_host.bpf.o"
    eff, verdict, log = _load_without(obj, ["cap_perfmon", "cap_sys_admin"])
    assert [eff >> c & 1 for c in (CAP_BPF, CAP_NET_ADMIN, CAP_PERFMON, CAP_SYS_ADMIN)] == \
        [1, 1, 0, 0], hex(eff)
    assert verdict == "refused" and "prohibited" in log, log
    eff, verdict, log = _load_without(obj, ["cap_sys_admin"])
    assert [eff >> c & 1 for c in (CAP_BPF, CAP_NET_ADMIN, CAP_PERFMON, CAP_SYS_ADMIN)] == \
        [1, 1, 1, 0], hex(eff)
    assert verdict == "loaded", log
