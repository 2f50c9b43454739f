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
