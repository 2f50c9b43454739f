"""cffi out-of-line API-mode builder for the congestion-control core.

The cdef is read from the same headers the C code includes
(include/hpccd/cc.h, include/hpccd/wire_api.h), run through the C
preprocessor with HPCCD_CFFI_CDEF defined so that includes and static
asserts drop out and array sizes become numbers.  The core itself is the
one build of fastpath/cc/ (cffi_common.core_library).  Run directly (``python cffi_build/build_cc.py``)
it compiles ``hpccd._cc`` and places it in daemon/hpccd/.
"""
from __future__ import annotations

import sys

from cffi import FFI

from cffi_common import (CFLAGS, INCLUDE, build_and_install, cdef_source, constant_defines,
                         core_library, includes)

# The headers whose declarations make up the module, in include order.
HEADERS = ["hpccd/cc.h", "hpccd/wire_api.h"]
# Files whose HPCCD_* macros become lib constants (the wire's defaults and the
# INT hop's field widths, for the configuration and the flow table, which should
# not need libbpf to know them).
DEFINE_FILES = [INCLUDE / "hpccd" / "wire.h", INCLUDE / "hpccd" / "int_hop.h"]
# Constants of other headers that Python checks values against or computes
# with, so that it needs neither libbpf (hpccd._bpf) nor libxdp
# (hpccd._transport) to know them: the XSKMAP's size (rx queues per
# interface), the engine's UMEM frame sizes, the Ethernet header the writers
# put before IPv4.
CONST_HEADERS = ["hpccd/kern_user.h", "hpccd/transport.h", "hpccd/build.h"]
CONSTS = ["HPCCD_XSKS_MAX", "HPCCD_TP_FRAME_MIN", "HPCCD_TP_FRAME_MAX", "HPCCD_ETH_HLEN"]

ffibuilder = FFI()
ffibuilder.cdef(cdef_source(HEADERS, [INCLUDE]) + constant_defines(DEFINE_FILES)
                + "".join(f"#define {n} ...\n" for n in CONSTS))
ffibuilder.set_source(
    "hpccd._cc", includes(HEADERS + CONST_HEADERS),
    include_dirs=[str(INCLUDE)], extra_objects=[core_library()],
    extra_compile_args=CFLAGS, libraries=["m"])


if __name__ == "__main__":
    sys.exit(build_and_install(ffibuilder))
