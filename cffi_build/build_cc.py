"""cffi out-of-line API-mode builder for the congestion-control core.

The cdef is read from the same headers the C code includes
(include/hpccd/cc.h, include/hpccd/wire_api.h), run through the C
preprocessor with HPCCD_CFFI_CDEF defined so that includes and static
asserts drop out and array sizes become numbers.  Run directly (``python cffi_build/build_cc.py``)
it compiles ``hpccd._cc`` and places it in daemon/hpccd/.
"""
from __future__ import annotations

import sys

from cffi import FFI

from cffi_common import (CFLAGS, CFLAGS_NUMERIC, FASTPATH, INCLUDE, build_and_install,
                         cdef_source, constant_defines, includes)

SOURCES = sorted(str(p) for p in (FASTPATH / "cc").glob("*.c"))
# The headers whose declarations make up the module, in include order.
HEADERS = ["hpccd/cc.h", "hpccd/wire_api.h"]
# Files whose HPCCD_* macros become lib constants (the wire's defaults, for the
# configuration, which should not need libbpf to know them).
DEFINE_FILES = [INCLUDE / "hpccd" / "wire.h"]

ffibuilder = FFI()
ffibuilder.cdef(cdef_source(HEADERS, [INCLUDE]) + constant_defines(DEFINE_FILES))
ffibuilder.set_source(
    "hpccd._cc", includes(HEADERS),
    sources=SOURCES, include_dirs=[str(INCLUDE)],
    extra_compile_args=CFLAGS + CFLAGS_NUMERIC, libraries=["m"])


if __name__ == "__main__":
    sys.exit(build_and_install(ffibuilder))
