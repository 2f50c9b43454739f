"""cffi out-of-line API-mode builder for the native transport (``hpccd._transport``).

The cdef is read from include/hpccd/transport.h (preprocessed with
HPCCD_CFFI_CDEF, as cffi_common does for every module); libxdp's types never
enter it (struct hpccd_tp is opaque).  The module compiles the engine
(fastpath/transport/*.c, internal header tp.h) and links the one build of
fastpath/cc/ (cffi_common.core_library: the shared wire parser, tag and
checksum, the congestion-control core it drives, with the core's numeric
flags), -lxdp -lbpf -lisal (ISA-L: the
receiver's CRC-32).  Run directly it compiles
``hpccd._transport`` and places it in daemon/hpccd/.
"""
from __future__ import annotations

import sys

from cffi import FFI

from cffi_common import (CFLAGS, CFLAGS_NUMERIC, FASTPATH, INCLUDE, build_and_install,
                         cdef_source, core_library, includes)

# The engine: every C file of fastpath/transport/ (one concern each, tp.h).
ENGINE_SOURCES = sorted(str(p) for p in (FASTPATH / "transport").glob("*.c"))
# ... with the whole core (fastpath/cc/: the parser, the tag, the checksum,
# hop unpacking, every algorithm), its one build, whose declarations the
# cdef includes through transport.h -> cc.h.
CORE = core_library()
HEADERS = ["hpccd/transport.h"]

ffibuilder = FFI()
ffibuilder.cdef(cdef_source(HEADERS, [INCLUDE]))
ffibuilder.set_source(
    "hpccd._transport", includes(HEADERS),
    sources=ENGINE_SOURCES, include_dirs=[str(INCLUDE), str(FASTPATH / "transport")],
    extra_objects=[CORE],
    extra_compile_args=CFLAGS + CFLAGS_NUMERIC, libraries=["xdp", "bpf", "isal", "pthread", "m"])


if __name__ == "__main__":
    sys.exit(build_and_install(ffibuilder))
