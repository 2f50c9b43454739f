"""The libbpf loader (daemon/hpccd/bpf/loader.py, cffi_build/bpf_shim.c).

Invariants protected:
- every object `make bpf` built opens and loads through the loader, and its
  attachable programs and struct_ops maps carry the name prefix by which
  crash clean-up recognises them;
- load-time settings reach the program (rodata written before load);
- a verifier rejection raises BpfError carrying the verifier's log;
- maps read and write the same bytes singly and in batches, per-CPU values
  come back one slot per CPU;
- XDP and tc attach is idempotent, detach leaves nothing, a foreign program
  is not replaced without force;
- what a SIGKILLed process left attached, pinned or registered is found and
  removed by cleanup_stale.

Test programs are compiled here from small C sources into tmp_path (test
input, not shipped code).  Every network namespace is created by a fixture
and removed in its teardown whatever happens; traffic goes only between the
two namespaces of the test.
"""
from __future__ import annotations

import ctypes
import errno
import os
import pathlib
import secrets
import shutil
import socket
import subprocess
import sys
from typing import NamedTuple

import pytest

pytestmark = pytest.mark.bpf

if os.geteuid() != 0:
    pytest.skip("loading BPF programs needs root (CAP_BPF, CAP_NET_ADMIN)",
                allow_module_level=True)

# After the root check: the module itself needs libbpf.
from hpccd.bpf import loader as bpf  # noqa: E402
from hpccd.lab import int_switch  # noqa: E402
from child_process import killed_when_ready  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILT = ROOT / "build" / "ebpf"
BUILT_OBJS = sorted(BUILT.glob("*.bpf.o"))
PREFIX = "hpccdt_"          # test programs' prefix: never matches the daemon's "hpccd_"

# ---- test input: BPF C sources --------------------------------------------

COMMON = """
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#define TC_ACT_OK 0
char LICENSE[] SEC("license") = "GPL";
"""

LOADER_T = COMMON + """
const volatile __u32 verdict = XDP_PASS;   /* load-time setting */
const volatile __u64 big = 7;

/* per-CPU packet counters: 0 hpccdt_xdp, 1 hpccdt_tc, 2 hpccdt_xdp2 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} hpccdt_count SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} hpccdt_hash SEC(".maps");

/* a map type without batch operations (the loader falls back to one by one) */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
} hpccdt_devmap SEC(".maps");

static __always_inline void bump(__u32 k)
{
	__u64 *v = bpf_map_lookup_elem(&hpccdt_count, &k);

	if (v)
		*v += 1;
}

SEC("xdp") int hpccdt_xdp(struct xdp_md *ctx) { bump(0); return verdict; }
SEC("xdp") int hpccdt_xdp2(struct xdp_md *ctx) { bump(2); return XDP_PASS; }
SEC("xdp") int other_xdp(struct xdp_md *ctx) { return XDP_PASS; }
SEC("tc") int hpccdt_tc(struct __sk_buff *skb) { bump(1); return TC_ACT_OK; }
SEC("tc") int other_tc(struct __sk_buff *skb) { return TC_ACT_OK; }
"""

BAD = COMMON + """
SEC("xdp") int hpccdt_bad(struct xdp_md *ctx)
{
	/* reads the packet without a bounds check: the verifier refuses */
	unsigned char *p = (unsigned char *)(long)ctx->data;

	return p[100];
}
"""

CC = COMMON + """
SEC("struct_ops/hpccdt_ssthresh")
__u32 BPF_PROG(hpccdt_ssthresh, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;

	return tp->snd_cwnd > 4 ? tp->snd_cwnd / 2 : 2;
}

SEC("struct_ops/hpccdt_cong_avoid")
void BPF_PROG(hpccdt_cong_avoid, struct sock *sk, __u32 ack, __u32 acked) { }

SEC("struct_ops/hpccdt_undo_cwnd")
__u32 BPF_PROG(hpccdt_undo_cwnd, struct sock *sk)
{
	return ((struct tcp_sock *)sk)->snd_cwnd;
}

/* OPS: the struct_ops map's name, unique per test like CC_NAME, so that
 * clean-up by name never touches another test run's registration */
SEC(".struct_ops")
struct tcp_congestion_ops OPS = {
	.ssthresh = (void *)hpccdt_ssthresh,
	.cong_avoid = (void *)hpccdt_cong_avoid,
	.undo_cwnd = (void *)hpccdt_undo_cwnd,
	.name = CC_NAME,
};
"""


@pytest.fixture(scope="session")
def bpf_cc(tmp_path_factory):
    """Compile a BPF C source (test input) against vmlinux.h; returns the .o path."""
    clang = shutil.which(os.environ.get("BPF_CLANG", "clang"))
    if clang is None:
        pytest.skip("clang is not installed (scripts/run.sh setup installs it)")
    d = tmp_path_factory.mktemp("bpfsrc")
    vmlinux = BUILT / "vmlinux.h"
    if not vmlinux.exists():
        vmlinux = d / "vmlinux.h"
        with open(vmlinux, "w") as f:
            subprocess.run(["bpftool", "btf", "dump", "file", "/sys/kernel/btf/vmlinux",
                            "format", "c"], stdout=f, check=True, timeout=120)
    else:
        shutil.copy(vmlinux, d / "vmlinux.h")

    def compile_(name: str, source: str, *defines: str) -> pathlib.Path:
        src = d / f"{name}.bpf.c"
        src.write_text(source)
        obj = d / f"{name}.bpf.o"
        res = subprocess.run([clang, "-O2", "-g", "-target", "bpf", "-D__TARGET_ARCH_x86",
                              f"-I{d}", *defines, "-c", str(src), "-o", str(obj)],
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        return obj

    return compile_


@pytest.fixture(scope="session")
def loader_t(bpf_cc) -> pathlib.Path:
    return bpf_cc("loader_t", LOADER_T)


@pytest.fixture
def obj(loader_t):
    with bpf.BpfObject.open(loader_t) as o:
        o.load()
        yield o


@pytest.fixture
def pin_dir():
    """A fresh directory on the host's bpffs, emptied and removed whatever happens."""
    bpf.ensure_bpffs()
    d = f"{bpf.BPFFS}/hpccdt-{secrets.token_hex(3)}"
    os.mkdir(d)
    try:
        yield d
    finally:
        bpf.unpin_tree(d)


# ---- namespaces ---------------------------------------------------------------

@pytest.fixture
def pair(netns_pair):
    """Two namespaces joined by a veth: tests/conftest.py's netns_pair
    (a: va, ip_a <-> b: vb, ip_b), removed whatever happens."""
    return netns_pair


def _nothing_attached(ifname: str) -> bool:
    return bpf.xdp_query(ifname) is None and bpf.tc_list(ifname) == []


# ---- objects built by `make bpf` ----------------------------------------------

@pytest.mark.skipif(not BUILT_OBJS, reason="no build/ebpf/*.bpf.o yet (make bpf)")
@pytest.mark.parametrize("path", BUILT_OBJS, ids=[p.name for p in BUILT_OBJS])
def test_built_object_loads_and_names_carry_prefix(path, pin_dir):
    """Every built object loads through the loader; its XDP/tc programs and
    struct_ops maps carry bpf.NAME_PREFIX, by which cleanup_stale finds them
    after a crash (the kernel keeps 15 characters of a name)."""
    with bpf.BpfObject.open(path, pin_root=pin_dir) as o:
        o.load()
        attachable = []
        for name in o.program_names():
            p = o.program(name)
            assert p.id > 0 and p.fd >= 0
            if p.type in (bpf.lib.HPCCD_BPF_PROG_TYPE_XDP, bpf.lib.HPCCD_BPF_PROG_TYPE_SCHED_CLS):
                attachable.append(p.kernel_name)
        for name in o.map_names():
            m = o.map(name)
            assert m.id > 0
            if m.type == bpf.lib.HPCCD_BPF_MAP_TYPE_STRUCT_OPS:
                attachable.append(m.name)
        # The lab's departure stamp runs on host interfaces, where a daemon
        # starting up removes programs with the prefix as its own stale
        # ones: it must NOT carry it (hpccd.lab.int_switch; the lab's down
        # removes it with the namespaces).
        # The lab's program for xdp_host's hook is never attached to an
        # interface (it lives in the prog array of a loaded xdp_host, which
        # holds it only while the lab does): nothing for cleanup_stale.
        lab_only = {"int_switch.bpf.o": {int_switch.DEPART_PROG},
                    "int_depart_xdp.bpf.o": {int_switch.HOOK_PROG}}.get(path.name, set())
        for n in lab_only:
            assert n in attachable and not n.startswith(bpf.NAME_PREFIX), (path.name, n)
        foreign = [n for n in attachable if not n.startswith(bpf.NAME_PREFIX)
                   and n not in lab_only]
        assert not foreign, (f"{path.name}: {foreign} do not start with "
                             f"{bpf.NAME_PREFIX!r}; cleanup_stale would not find them")


@pytest.mark.integration
@pytest.mark.skipif(not BUILT_OBJS, reason="no build/ebpf/*.bpf.o yet (make bpf)")
@pytest.mark.parametrize("path", BUILT_OBJS, ids=[p.name for p in BUILT_OBJS])
def test_built_programs_attach_and_detach(path, pair, pin_dir):
    with bpf.BpfObject.open(path, pin_root=pin_dir) as o:
        o.load()
        progs = [o.program(n) for n in o.program_names()]
        with bpf.in_netns(pair.a):
            for p in progs:
                if p.type == bpf.lib.HPCCD_BPF_PROG_TYPE_XDP:
                    bpf.xdp_attach(pair.va, p, force=True)
                    assert bpf.xdp_query(pair.va) == p.id
                    assert bpf.xdp_detach(pair.va) == [p.id]
                elif p.type == bpf.lib.HPCCD_BPF_PROG_TYPE_SCHED_CLS:
                    for direction in ("ingress", "egress"):
                        bpf.tc_attach(pair.va, p, direction, force=True)
                        assert bpf.tc_query(pair.va, direction) == p.id
                        assert bpf.tc_detach(pair.va, direction)
            assert _nothing_attached(pair.va)


# ---- open, rodata, load --------------------------------------------------------

def test_rodata_is_set_before_load(loader_t):
    """`verdict` decides the XDP program's return value; `big` is a u64."""
    with bpf.BpfObject.open(loader_t, rodata={"verdict": 1, "big": 2**40 + 3}) as o:
        assert o.rodata_size("verdict") == 4 and o.rodata_size("big") == 8
        o.load()
        retval, _, _ = o.program("hpccdt_xdp").test_run(bytes(64))
        assert retval == 1                                   # XDP_DROP, as set
        image = o.map(".rodata").lookup(0)
        assert int.from_bytes(image[8:16], sys.byteorder) == 2**40 + 3


def test_rodata_errors(loader_t):
    with bpf.BpfObject.open(loader_t) as o:
        with pytest.raises(bpf.BpfError) as e:
            o.set_rodata({"no_such_var": 1})
        assert e.value.errno == errno.ENOENT and "no_such_var" in str(e.value)
        with pytest.raises(bpf.BpfError) as e:
            o.set_rodata({"verdict": b"\x01\x02"})
        assert e.value.errno == errno.EINVAL and "2 bytes given, 4 expected" in str(e.value)
        with pytest.raises(bpf.BpfError) as e:
            o.set_rodata({"verdict": 2**32})
        assert e.value.errno == errno.ERANGE
        o.set_rodata({"verdict": bpf.ffi.new("uint32_t *", 2)})   # a cffi value of the right size
        o.load()
        with pytest.raises(bpf.BpfError) as e:
            o.set_rodata({"verdict": 1})
        assert e.value.errno == errno.EBUSY
        assert o.program("hpccdt_xdp").test_run(bytes(64))[0] == 2   # XDP_PASS


def test_verifier_rejection_carries_the_log(bpf_cc):
    bad = bpf_cc("bad", BAD)
    with bpf.BpfObject.open(bad) as o:
        with pytest.raises(bpf.BpfError) as e:
            o.load()
    err = e.value
    assert isinstance(err, OSError) and err.errno == errno.EACCES
    assert str(bad) in str(err)
    for text in (str(err), err.log):
        assert "BEGIN PROG LOAD LOG" in text
        assert "invalid access to packet" in text     # the verifier's own verdict
        assert "hpccdt_bad" in text


def test_open_errors(tmp_path, loader_t):
    with pytest.raises(bpf.BpfError) as e:
        bpf.BpfObject.open(tmp_path / "missing.bpf.o")
    assert e.value.errno == errno.ENOENT and "missing.bpf.o" in str(e.value)
    junk = tmp_path / "junk.bpf.o"
    junk.write_bytes(b"not an ELF file")
    with pytest.raises(bpf.BpfError):
        bpf.BpfObject.open(junk)
    with bpf.BpfObject.open(loader_t) as o:
        assert set(o.program_names()) == {"hpccdt_xdp", "hpccdt_xdp2", "other_xdp",
                                          "hpccdt_tc", "other_tc"}
        with pytest.raises(bpf.BpfError) as e:
            o.program("hpccdt_xdp")                       # not loaded yet
        assert e.value.errno == errno.EBADF
        o.load()
        with pytest.raises(bpf.BpfError) as e:
            o.program("nope")
        assert e.value.errno == errno.ENOENT and "hpccdt_xdp" in str(e.value)
        with pytest.raises(bpf.BpfError) as e:
            o.map("nope")
        assert e.value.errno == errno.ENOENT and "hpccdt_hash" in str(e.value)


def test_program_identity_and_test_run(obj):
    p = obj.program("hpccdt_xdp")
    assert p.name == "hpccdt_xdp" and p.kernel_name == "hpccdt_xdp"
    assert p.type == bpf.lib.HPCCD_BPF_PROG_TYPE_XDP and p.id > 0
    with bpf.Program.from_id(p.id) as again:
        assert again.id == p.id and again.name == "hpccdt_xdp"
    pkt = bytes(range(64))
    retval, out, duration = p.test_run(pkt, repeat=100)
    assert retval == 2 and out == pkt and duration >= 0      # XDP_PASS, unchanged
    tc = obj.program("hpccdt_tc")
    assert tc.type == bpf.lib.HPCCD_BPF_PROG_TYPE_SCHED_CLS
    assert tc.test_run(pkt)[0] == 0                           # TC_ACT_OK


# ---- maps ----------------------------------------------------------------------

def test_map_single_ops(obj):
    m = obj.map("hpccdt_hash")
    assert (m.key_size, m.value_size, m.max_entries, m.percpu) == (4, 8, 4096, False)
    assert m.lookup(1) is None
    m.update(1, 5)
    assert m.lookup(1) == (5).to_bytes(8, sys.byteorder)
    m.update(1, bpf.ffi.new("uint64_t *", 6), flags="exist")   # a cffi value
    assert m.lookup(1) == (6).to_bytes(8, sys.byteorder)
    with pytest.raises(bpf.BpfError) as e:
        m.update(1, 7, flags="noexist")
    assert e.value.errno == errno.EEXIST and "hpccdt_hash" in str(e.value)
    with pytest.raises(bpf.BpfError) as e:
        m.update(b"\x01", 7)
    assert e.value.errno == errno.EINVAL
    assert m.delete(1) is True and m.delete(1) is False


def test_map_batches(obj):
    m = obj.map("hpccdt_hash")
    want = {k: k * k + 1 for k in range(3000)}
    assert m.update_batch(want) == 3000
    got = {int.from_bytes(k, sys.byteorder): int.from_bytes(v, sys.byteorder)
           for k, v in m.lookup_batch(batch=64)}        # ~50 system calls
    assert got == want
    assert sorted(int.from_bytes(k, sys.byteorder) for k in m.keys()) == sorted(want)
    for k in want:
        m.delete(k)
    assert list(m.lookup_batch()) == []


def test_lookup_batch_falls_back_without_batch_support(obj):
    dm = obj.map("hpccdt_devmap")
    dm.update(2, 1)                                       # ifindex 1: lo
    keys, vals, count = bytearray(16), bytearray(16), bpf.ffi.new("uint32_t *", 4)
    rc = bpf.lib.hpccd_bpf_map_lookup_batch(dm.fd, bpf.ffi.NULL, bpf.ffi.from_buffer(keys),
                                            bpf.ffi.from_buffer(keys), bpf.ffi.from_buffer(vals),
                                            count, 0)
    assert rc < 0                                         # the kernel refuses batches here
    assert list(dm.lookup_batch()) == [((2).to_bytes(4, sys.byteorder),
                                        (1).to_bytes(4, sys.byteorder))]


def test_percpu_counters_sum_over_cpus(obj):
    counts = obj.map("hpccdt_count")
    assert counts.percpu and counts.ncpus == bpf.lib.hpccd_bpf_num_possible_cpus()
    obj.program("hpccdt_xdp").test_run(bytes(64), repeat=37)
    slots = counts.lookup(0)
    assert len(slots) == counts.ncpus
    assert sum(int.from_bytes(s, sys.byteorder) for s in slots) == 37
    counts.update(3, [i + 10 for i in range(counts.ncpus)])
    entries = dict(counts.lookup_batch())
    assert [int.from_bytes(s, sys.byteorder) for s in entries[(3).to_bytes(4, sys.byteorder)]] \
        == [i + 10 for i in range(counts.ncpus)]


# ---- bpffs and pins ------------------------------------------------------------

def test_ensure_bpffs_mounts_once(tmp_path):
    bpf.ensure_bpffs()
    assert bpf.ensure_bpffs() is False                 # already there
    where = str(tmp_path / "bpffs")
    assert bpf.ensure_bpffs(where) is True             # mount(2) through ctypes
    try:
        assert bpf._fstype(where) == "bpf"
        assert bpf.ensure_bpffs(where) is False
    finally:
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.umount2(os.fsencode(where), 0) == 0, os.strerror(ctypes.get_errno())


def test_pin_and_cleanup_unpins(obj, pin_dir, tmp_path):
    m = obj.map("hpccdt_hash")
    m.update(9, 99)
    os.mkdir(f"{pin_dir}/sub")
    m.pin(f"{pin_dir}/sub/hash")
    obj.program("hpccdt_xdp").pin(f"{pin_dir}/xdp")
    with bpf.Map.from_pinned(f"{pin_dir}/sub/hash") as again:
        assert again.id == m.id and again.lookup(9) == (99).to_bytes(8, sys.byteorder)
    with bpf.Program.from_pinned(f"{pin_dir}/xdp") as p:
        assert p.id == obj.program("hpccdt_xdp").id
    done = bpf.cleanup_stale([], name_prefix=PREFIX, pin_dir=pin_dir, struct_ops=False)
    assert sorted(done["pins"]) == [f"{pin_dir}/sub/hash", f"{pin_dir}/xdp"]
    assert not os.path.exists(pin_dir)
    os.mkdir(pin_dir)                                   # for the fixture's teardown
    # never removes files from a directory that is not on a bpffs
    (tmp_path / "keep").write_text("x")
    with pytest.raises(bpf.BpfError) as e:
        bpf.cleanup_stale([], pin_dir=str(tmp_path), struct_ops=False)
    assert e.value.errno == errno.EINVAL and (tmp_path / "keep").exists()


# ---- network namespaces ----------------------------------------------------------

def _netns_inode() -> int:
    return os.stat("/proc/thread-self/ns/net").st_ino


@pytest.mark.integration
def test_in_netns_enters_and_always_returns(pair):
    home = _netns_inode()
    with bpf.in_netns(pair.a):
        assert _netns_inode() == os.stat(f"/run/netns/{pair.a}").st_ino
        socket.if_nametoindex(pair.va)                 # only visible in there
    assert _netns_inode() == home
    with pytest.raises(RuntimeError):
        with bpf.in_netns(pair.b):
            raise RuntimeError("boom")
    assert _netns_inode() == home
    with pytest.raises(bpf.BpfError) as e:
        with bpf.in_netns("hpccdt-no-such-ns"):
            pass
    assert e.value.errno == errno.ENOENT
    assert _netns_inode() == home


def _send_udp(pair, n: int = 5) -> int:
    """n datagrams from b to a; returns how many a's socket received."""
    with bpf.in_netns(pair.a):
        rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with bpf.in_netns(pair.b):
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with rx, tx:
        rx.bind((pair.ip_a, 0))
        rx.settimeout(2.0)
        for i in range(n):
            tx.sendto(b"hpccd-test %d" % i, rx.getsockname())
        got = 0
        try:
            for _ in range(n):
                rx.recv(100)
                got += 1
        except socket.timeout:
            pass
        return got


def _count(obj, key: int) -> int:
    return sum(int.from_bytes(s, sys.byteorder) for s in obj.map("hpccdt_count").lookup(key))


@pytest.mark.integration
@pytest.mark.parametrize("mode", ["native", "skb"])
def test_xdp_attach_idempotent_detach_complete(obj, pair, mode):
    xdp, xdp2 = obj.program("hpccdt_xdp"), obj.program("hpccdt_xdp2")
    other = "skb" if mode == "native" else "native"

    def attach(iface, prog, **kw):
        bpf.xdp_attach(iface, prog, **{"mode": mode, "name_prefix": PREFIX, **kw})

    with bpf.in_netns(pair.a):
        assert bpf.xdp_query(pair.va) is None
        attach(pair.va, xdp)
        assert bpf.xdp_query(pair.va) == xdp.id
        assert bpf.xdp_query(pair.va, mode=mode) == xdp.id
        attach(pair.va, xdp)                                      # again: no-op
        assert bpf.xdp_query(pair.va) == xdp.id
        attach(socket.if_nametoindex(pair.va), xdp)               # by index: no-op
    assert _send_udp(pair) == 5                                   # XDP_PASS: delivered
    assert _count(obj, 0) >= 5

    with bpf.in_netns(pair.a):
        with pytest.raises(bpf.BpfError) as e:                    # ours, but not allowed
            attach(pair.va, xdp2, replace=False)
        assert e.value.errno == errno.EEXIST
        attach(pair.va, xdp2)                                     # ours: replaced
        assert bpf.xdp_query(pair.va) == xdp2.id
        attach(pair.va, xdp, mode=other)                          # moves to the other mode
        assert bpf.xdp_query(pair.va, mode=other) == xdp.id
        assert bpf.xdp_query(pair.va, mode=mode) is None
        assert bpf.xdp_detach(pair.va) == [xdp.id]
        assert bpf.xdp_detach(pair.va) == []                      # nothing there: fine
        assert bpf.xdp_query(pair.va) is None
    with bpf.in_netns(pair.b):                                    # the peer never had any
        assert bpf.xdp_query(pair.vb) is None


@pytest.mark.integration
def test_xdp_foreign_program_needs_force(obj, pair):
    ours, foreign = obj.program("hpccdt_xdp"), obj.program("other_xdp")
    with bpf.in_netns(pair.a):
        bpf.xdp_attach(pair.va, foreign, name_prefix=PREFIX)     # nothing in the way
        with pytest.raises(bpf.BpfError) as e:
            bpf.xdp_attach(pair.va, ours, name_prefix=PREFIX)
        assert e.value.errno == errno.EBUSY and "other_xdp" in str(e.value)
        assert bpf.xdp_query(pair.va) == foreign.id
        assert bpf.xdp_detach(pair.va, only_prefix=PREFIX) == []  # not ours: left alone
        bpf.xdp_attach(pair.va, ours, name_prefix=PREFIX, force=True)
        assert bpf.xdp_query(pair.va) == ours.id
        bpf.xdp_detach(pair.va)
        assert bpf.xdp_query(pair.va) is None


@pytest.mark.integration
def test_tc_attach_idempotent_detach_complete(obj, pair):
    tc, foreign = obj.program("hpccdt_tc"), obj.program("other_tc")
    with bpf.in_netns(pair.a):
        assert bpf.tc_list(pair.va) == []
        bpf.tc_attach(pair.va, tc, "egress", name_prefix=PREFIX)
        bpf.tc_attach(pair.va, tc, "ingress", handle=7, priority=3, name_prefix=PREFIX)
        bpf.tc_attach(pair.va, tc, "egress", name_prefix=PREFIX)              # no-op
        bpf.tc_attach(pair.va, tc, "ingress", handle=7, priority=3, name_prefix=PREFIX)
        assert bpf.tc_query(pair.va, "egress") == tc.id
        assert bpf.tc_query(pair.va, "ingress", 7, 3) == tc.id
        assert bpf.tc_query(pair.va, "ingress") is None
        assert bpf.tc_list(pair.va) == [
            bpf.TcFilter("egress", 1, 1, tc.id, "hpccdt_tc"),
            bpf.TcFilter("ingress", 7, 3, tc.id, "hpccdt_tc")]
    before = _count(obj, 1)
    assert _send_udp(pair) == 5
    assert _count(obj, 1) - before >= 5                 # ingress on a saw the datagrams

    with bpf.in_netns(pair.a):
        bpf.tc_attach(pair.va, foreign, "egress", 2, 2, name_prefix=PREFIX)
        with pytest.raises(bpf.BpfError) as e:
            bpf.tc_attach(pair.va, tc, "egress", 2, 2, name_prefix=PREFIX)
        assert e.value.errno == errno.EBUSY and "other_tc" in str(e.value)
        bpf.tc_attach(pair.va, tc, "egress", 2, 2, name_prefix=PREFIX, force=True)
        assert bpf.tc_query(pair.va, "egress", 2, 2) == tc.id
        assert bpf.tc_remove_clsact(pair.va) is False       # filters left: kept
        for args in (("egress", 1, 1), ("ingress", 7, 3), ("egress", 2, 2)):
            assert bpf.tc_detach(pair.va, *args) is True
            assert bpf.tc_detach(pair.va, *args) is False   # nothing there: fine
        assert bpf.tc_list(pair.va) == []
        assert bpf.tc_remove_clsact(pair.va) is True
        assert bpf.tc_query(pair.va, "egress") is None
        assert bpf.tc_detach(pair.va, "egress") is False    # not even clsact: fine
        assert _nothing_attached(pair.va)


# ---- crash clean-up ------------------------------------------------------------

CHILD = """
import os, sys, time
sys.path.insert(0, {daemon!r})
from hpccd.bpf import loader as bpf
obj_path, ns, ifname, pin_dir, cc_path, cc_name = sys.argv[1:7]
o = bpf.BpfObject.open(obj_path).load()
with bpf.in_netns(ns):
    bpf.xdp_attach(ifname, o.program("hpccdt_xdp"), name_prefix="hpccdt_")
    bpf.tc_attach(ifname, o.program("hpccdt_tc"), "egress", name_prefix="hpccdt_")
    bpf.tc_attach(ifname, o.program("hpccdt_tc"), "ingress", 5, 9, name_prefix="hpccdt_")
o.map("hpccdt_hash").pin(pin_dir + "/hash")
if cc_path != "-":
    cc = bpf.BpfObject.open(cc_path).load()
    cc.attach_struct_ops(cc_name).pin(pin_dir + "/cc")
print("ready", flush=True)
time.sleep(600)
"""


def _cc_available(name: str) -> bool:
    with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
        return name in f.read().split()


class CcObj(NamedTuple):
    name: str             # the congestion control's name, and the struct_ops map's
    path: pathlib.Path


@pytest.fixture
def cc_obj(bpf_cc):
    """A struct_ops TCP congestion control with a unique name (15 chars at
    most for both the kernel's map name and TCP_CA_NAME_MAX); unregistered
    in teardown whatever happens."""
    name = "hpccdt_" + secrets.token_hex(4)
    path = bpf_cc(name, CC, f'-DCC_NAME="{name}"', f"-DOPS={name}")
    try:
        yield CcObj(name, path)
    finally:
        if _cc_available(name):
            bpf.cleanup_stale([], name_prefix=name, pin_dir=None)


@pytest.mark.integration
def test_cleanup_after_sigkill(loader_t, cc_obj, pair, pin_dir):
    cc_name, cc_path = cc_obj
    killed_when_ready(CHILD.format(daemon=str(ROOT / "daemon")), str(loader_t), pair.a, pair.va,
                      pin_dir, str(cc_path), cc_name)

    # The dead process's attachments, pins and registration are all still there.
    with bpf.in_netns(pair.a):
        stale_xdp = bpf.xdp_query(pair.va)
        assert stale_xdp is not None
        assert [f.name for f in bpf.tc_list(pair.va)] == ["hpccdt_tc", "hpccdt_tc"]
    assert sorted(os.listdir(pin_dir)) == ["cc", "hash"]
    assert _cc_available(cc_name)

    # struct_ops are host-wide: clean up this test's by its unique name only,
    # the attachments (per namespace) by the prefix of the test programs.
    with bpf.in_netns(pair.a):
        done = bpf.cleanup_stale([pair.va], name_prefix=PREFIX, pin_dir=pin_dir,
                                 struct_ops=False)
        assert done["xdp"] == [(socket.if_nametoindex(pair.va), stale_xdp)]
        assert len(done["tc"]) == 2
        assert _nothing_attached(pair.va)
        again = bpf.cleanup_stale([pair.va], name_prefix=PREFIX, pin_dir=pin_dir,
                                  struct_ops=False)
        assert again == {"xdp": [], "tc": [], "pins": [], "struct_ops": []}
    assert sorted(os.path.basename(p) for p in done["pins"]) == ["cc", "hash"]
    assert _cc_available(cc_name)        # unpinning alone does not unregister (libbpf 1.1)
    done = bpf.cleanup_stale([], name_prefix=cc_name, pin_dir=None)
    assert done["struct_ops"] == [cc_name]
    assert not _cc_available(cc_name)
    os.mkdir(pin_dir)                                   # for the fixture's teardown


@pytest.mark.integration
def test_cleanup_leaves_foreign_programs(obj, pair):
    foreign = obj.program("other_xdp")
    tc = obj.program("other_tc")
    with bpf.in_netns(pair.a):
        bpf.xdp_attach(pair.va, foreign, force=True)
        bpf.tc_attach(pair.va, tc, "egress", force=True)
        done = bpf.cleanup_stale([pair.va], name_prefix=PREFIX, pin_dir=None, struct_ops=False)
        assert done["xdp"] == [] and done["tc"] == []
        assert bpf.xdp_query(pair.va) == foreign.id
        assert bpf.tc_query(pair.va, "egress") == tc.id
        bpf.xdp_detach(pair.va)
        bpf.tc_detach(pair.va, "egress")
        assert _nothing_attached(pair.va)


# ---- struct_ops ----------------------------------------------------------------

def test_struct_ops_register_pin_destroy(cc_obj, pin_dir):
    name, path = cc_obj
    with bpf.BpfObject.open(path) as o:
        o.load()
        link = o.attach_struct_ops(name)
        assert _cc_available(name)
        link.pin(f"{pin_dir}/cc")
        assert os.path.exists(f"{pin_dir}/cc")
        link.unpin()
        assert not os.path.exists(f"{pin_dir}/cc")
        link.destroy()
        assert not _cc_available(name)
        link.destroy()                                    # twice: fine
    # The kernel registers a (link-less) struct_ops map once: a new
    # registration needs a fresh object.  Closing the object unregisters.
    with bpf.BpfObject.open(path) as o:
        o.load()
        o.attach_struct_ops(name)
        assert _cc_available(name)
    assert not _cc_available(name)


def test_struct_ops_disconnected_outlives_object(cc_obj):
    name, path = cc_obj
    with bpf.BpfObject.open(path) as o:
        o.load()
        o.attach_struct_ops(name).disconnect()
    assert _cc_available(name)                            # the process let go of it
    done = bpf.cleanup_stale([], name_prefix=name, pin_dir=None)
    assert done["struct_ops"] == [name]
    assert not _cc_available(name)


def test_handles_die_with_their_object(loader_t):
    """A program's or map's fd number is reused once its object is closed:
    using the handle afterwards must fail, not act on whatever took the number."""
    o = bpf.BpfObject.open(loader_t).load()
    p, m = o.program("hpccdt_xdp"), o.map("hpccdt_hash")
    o.close()
    o.close()                                             # twice: fine
    for call in (lambda: p.test_run(bytes(64)), lambda: m.lookup(1),
                 lambda: m.update(1, 1), lambda: o.program("hpccdt_xdp")):
        with pytest.raises(bpf.BpfError) as e:
            call()
        assert e.value.errno == errno.EBADF
