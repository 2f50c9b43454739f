"""cffi out-of-line API-mode builder for the libbpf bindings (``hpccd._bpf``).

The cdef is read from the shim's own header (cffi_build/bpf_shim.h), run
through the C preprocessor with HPCCD_CFFI_CDEF defined so that includes
and static asserts drop out.  Everything the Python loader calls is an
``hpccd_bpf_*`` function of cffi_build/bpf_shim.c, which wraps libbpf's
opts structs and error conventions; libbpf's own declarations never enter
the cdef.  Links with -lbpf only: AF_XDP sockets (libxdp) belong to the
transport's C fast path.  Run directly (``python cffi_build/build_bpf.py``)
it compiles ``hpccd._bpf`` and places it in daemon/hpccd/.
"""
from __future__ import annotations

import sys

from cffi import FFI

from cffi_common import CFLAGS, HERE, build_and_install, cdef_source, includes

SOURCES = [str(HERE / "bpf_shim.c")]
HEADERS = ["bpf_shim.h"]

ffibuilder = FFI()
ffibuilder.cdef(cdef_source(HEADERS, [HERE], kernel_types=False))
ffibuilder.set_source(
    "hpccd._bpf", includes(HEADERS),
    sources=SOURCES, include_dirs=[str(HERE)],
    extra_compile_args=CFLAGS, libraries=["bpf", "pthread"])


if __name__ == "__main__":
    sys.exit(build_and_install(ffibuilder))
