"""cffi out-of-line API-mode builder for the AF_XDP socket (``hpccd._xsk``).

The cdef is read from the header the C code includes (include/hpccd/xsk.h),
run through the C preprocessor with HPCCD_CFFI_CDEF defined so that the
includes and static asserts drop out; libxdp's own declarations never enter
the cdef (struct hpccd_xsk is opaque).  The module compiles
cffi_build/xsk/xsk_rx.c with the shared wire parser (cffi_build/cc/wire.c
and the hop decoder it calls, cffi_build/cc/int_decode.c) and links with
-lxdp -lbpf.  Run directly (``python cffi_build/build_xsk.py``) it compiles
``hpccd._xsk`` and places it in daemon/hpccd/.
"""
from __future__ import annotations

import sys

from cffi import FFI

from cffi_common import CFLAGS, HERE, INCLUDE, build_and_install, cdef_source, includes

SOURCES = [str(HERE / "xsk" / "xsk_rx.c"),
           str(HERE / "cc" / "wire.c"),          # hpccd_wire_parse_frame
           str(HERE / "cc" / "int_decode.c")]    # hpccd_int_hop_unpack, which wire.c calls
HEADERS = ["hpccd/xsk.h"]

ffibuilder = FFI()
ffibuilder.cdef(cdef_source(HEADERS, [INCLUDE], kernel_types=False))
ffibuilder.set_source(
    "hpccd._xsk", includes(HEADERS),
    sources=SOURCES, include_dirs=[str(INCLUDE)],
    extra_compile_args=CFLAGS, libraries=["xdp", "bpf", "pthread"])


if __name__ == "__main__":
    sys.exit(build_and_install(ffibuilder))
