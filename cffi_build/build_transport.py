"""cffi out-of-line API-mode builder for the native transport (``hpccd._transport``).

The cdef is read from include/hpccd/transport.h (preprocessed with
HPCCD_CFFI_CDEF, as cffi_common does for every module); libxdp's types never
enter it (struct hpccd_tp is opaque).  The module compiles the engine
(fastpath/transport/*.c, internal header tp.h) with the shared wire parser and tag
(fastpath/cc/wire.c, int_decode.c) and the congestion-control core it
drives (fastpath/cc/hpcc.c, dctcp.c, ldcp.c, with the core's numeric
flags), and links with -lxdp -lbpf -lisal (ISA-L: the
receiver's CRC-32).  Run directly it compiles
``hpccd._transport`` and places it in daemon/hpccd/.
"""
from __future__ import annotations

import sys

from cffi import FFI

from cffi_common import (CFLAGS, CFLAGS_NUMERIC, FASTPATH, INCLUDE, build_and_install,
                         cdef_source, includes)

# The engine: every C file of fastpath/transport/ (one concern each, tp.h).
ENGINE_SOURCES = sorted(str(p) for p in (FASTPATH / "transport").glob("*.c"))
# ... with the whole core (fastpath/cc/: the parser, the tag, hop
# unpacking, every algorithm), whose declarations the cdef includes
# through transport.h -> cc.h.
CORE_SOURCES = sorted(str(p) for p in (FASTPATH / "cc").glob("*.c"))
SOURCES = [*ENGINE_SOURCES, *CORE_SOURCES]
HEADERS = ["hpccd/transport.h"]

ffibuilder = FFI()
ffibuilder.cdef(cdef_source(HEADERS, [INCLUDE]))
ffibuilder.set_source(
    "hpccd._transport", includes(HEADERS),
    sources=SOURCES, include_dirs=[str(INCLUDE), str(FASTPATH / "transport")],
    extra_compile_args=CFLAGS + CFLAGS_NUMERIC, libraries=["xdp", "bpf", "isal", "pthread", "m"])


if __name__ == "__main__":
    sys.exit(build_and_install(ffibuilder))
