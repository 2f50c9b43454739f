"""Builds the TCP-side probe engine with a fake libbpf as a cffi module, for
tests/unit/test_tcpside_util_anchor.py: the sources, core library and flags of
cffi_build/build_tcpside.py (hpccd._tcpside), with fake_bpf.c linked in place
of -lbpf; the cdef is the engine's header (include/hpccd/tcp_probe.h), the
ring records of include/hpccd/kern_user.h and fake_bpf.h."""
from __future__ import annotations

import importlib
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3]
HERE = pathlib.Path(__file__).resolve().parent
NAME = "_tcpside_fake_bpf"
FAKE_CDEF = """
#define FAKE_BPF_CST_FD ...
int fake_bpf_push(const void *rec, size_t size);
"""                                      # fake_bpf.h


def build(tmpdir: pathlib.Path):
    """Compiles the module in `tmpdir` and imports it; returns the module
    (ffi, lib).  Raises what cffi raises on a failed build."""
    sys.path.insert(0, str(ROOT / "cffi_build"))
    try:
        bt = importlib.import_module("build_tcpside")
        common = importlib.import_module("cffi_common")
    finally:
        sys.path.pop(0)
    from cffi import FFI

    headers = [*bt.HEADERS, "hpccd/kern_user.h"]
    ffi = FFI()
    ffi.cdef(common.cdef_source(headers, [common.INCLUDE]) + FAKE_CDEF)
    ffi.set_source(
        NAME, common.includes(headers) + '#include "fake_bpf.h"\n',
        sources=[*bt.ENGINE_SOURCES, str(HERE / "fake_bpf.c")],
        include_dirs=[str(common.INCLUDE), str(HERE)],
        extra_objects=[common.core_library()],
        extra_compile_args=common.CFLAGS + common.CFLAGS_NUMERIC,
        # the engine's libbpf calls bind to fake_bpf.c's, whatever else
        # the process has loaded
        extra_link_args=["-Wl,-Bsymbolic"], libraries=["pthread", "m"])
    ffi.compile(tmpdir=str(tmpdir), verbose=False)
    sys.path.insert(0, str(tmpdir))
    try:
        return importlib.import_module(NAME)
    finally:
        sys.path.pop(0)


def engine(mod, **config):
    """A probe engine of the module `mod` (build()) that the tests drive by
    hand: its maps are the fake's (any fd; hpccd_tcp_cst the fake's, every
    flow "hpcc" with data in flight and an srtt of 100 us), its probes
    refused by the kernel (no socket: counted, still outstanding), no
    heartbeat, sweep or probe timeout within a minute, up to 4 flows,
    HPCC's default parameters, room for 5 hops; `config` sets further
    fields of struct hpccd_tcpp_config.  Free it with hpccd_tcpp_free."""
    ffi, lib = mod.ffi, mod.lib
    c = ffi.new("struct hpccd_tcpp_config *")
    lib.hpccd_hpcc_params_default(ffi.addressof(c, "hpcc"))
    (c.tracker_fd, c.park_fd, c.wake_rb_fd, c.telem_fd, c.resp_rb_fd, c.win_fd,
     c.cfg_fd) = range(1001, 1008)
    c.cst_fd = lib.FAKE_BPF_CST_FD
    c.sock_fd = -1
    c.stale_ns = c.heartbeat_ns = c.sweep_ns = 60 * 10**9
    c.timeout_min_ns = c.timeout_max_ns = 60 * 10**9
    c.max_flows = 4
    c.path_rate_gain = c.solo_rate_gain = c.pace_gain_max = 1
    c.room = 5
    for k, v in config.items():
        setattr(c, k, v)
    pe = ffi.new("struct hpccd_tcpp **")
    rc = lib.hpccd_tcpp_new(c, pe)
    if rc:
        raise OSError(-rc, f"hpccd_tcpp_new: {rc}")
    return pe[0]
