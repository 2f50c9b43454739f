"""cffi out-of-line API-mode builder for the TCP-side probe engine (``hpccd._tcpside``).

The cdef is read from include/hpccd/tcp_probe.h (preprocessed with
HPCCD_CFFI_CDEF, as cffi_common does for every module; it includes cc.h for
struct hpccd_hpcc_params).  The module compiles the engine
(fastpath/tcpside/*.c) and links the one build of the congestion-control
core it drives (fastpath/cc/*.c, cffi_common.core_library) and -lbpf
(map calls, ring buffers).  The engine reads the kernel/user structures of
include/hpccd/kern_user.h and include/hpccd/tcp_cc.h.  Run directly it compiles
``hpccd._tcpside`` and places it in daemon/hpccd/.
"""
from __future__ import annotations

import sys

from cffi import FFI

from cffi_common import (CFLAGS, CFLAGS_NUMERIC, FASTPATH, INCLUDE, build_and_install,
                         cdef_source, core_library, includes)

ENGINE_SOURCES = sorted(str(p) for p in (FASTPATH / "tcpside").glob("*.c"))
HEADERS = ["hpccd/tcp_probe.h"]

ffibuilder = FFI()
ffibuilder.cdef(cdef_source(HEADERS, [INCLUDE]))
ffibuilder.set_source(
    "hpccd._tcpside", includes(HEADERS),
    sources=ENGINE_SOURCES, include_dirs=[str(INCLUDE)], extra_objects=[core_library()],
    extra_compile_args=CFLAGS + CFLAGS_NUMERIC, libraries=["bpf", "pthread", "m"])


if __name__ == "__main__":
    sys.exit(build_and_install(ffibuilder))
