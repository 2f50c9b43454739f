"""cffi out-of-line API-mode builder for the libbpf bindings (``hpccd._bpf``).

The cdef is read from the shim's own header (cffi_build/bpf_shim.h), run
through the C preprocessor with HPCCD_CFFI_CDEF defined so that includes
and static asserts drop out.  Everything the Python loader calls is an
``hpccd_bpf_*`` function of cffi_build/bpf_shim.c, which wraps libbpf's
opts structs and error conventions; libbpf's own declarations never enter
the cdef.  Links with -lbpf only: AF_XDP sockets (libxdp) belong to the
transport's C fast path.

The module also carries the kernel/user ABI of the BPF programs it loads:
the structs, enums and HPCCD_* constants of include/hpccd/kern_user.h (and
the wire header it includes) and the structs and enums of include/hpccd/tcp_cc.h
(its string macros cannot be cffi constants), so that Python reads map values and counter
slots with ``ffi``/``lib`` of this module, laid out and numbered by the
same compiler that built the shim, instead of restating them.  Run
directly (``python cffi_build/build_bpf.py``) it compiles ``hpccd._bpf``
and places it in daemon/hpccd/.
"""
from __future__ import annotations

import sys

from cffi import FFI

from cffi_common import (CFLAGS, HERE, INCLUDE, build_and_install, cdef_source,
                         constant_defines, includes)

SOURCES = [str(HERE / "bpf_shim.c")]
HEADERS = ["bpf_shim.h", "hpccd/kern_user.h", "hpccd/tcp_cc.h"]
# Files whose HPCCD_* macros become lib constants.
DEFINE_FILES = [INCLUDE / "hpccd" / "kern_user.h", INCLUDE / "hpccd" / "wire.h"]

ffibuilder = FFI()
ffibuilder.cdef(cdef_source(HEADERS, [HERE, INCLUDE])
                + constant_defines(DEFINE_FILES))
ffibuilder.set_source(
    "hpccd._bpf", includes(HEADERS),
    sources=SOURCES, include_dirs=[str(HERE), str(INCLUDE)],
    extra_compile_args=CFLAGS, libraries=["bpf", "pthread"])


if __name__ == "__main__":
    sys.exit(build_and_install(ffibuilder))
