"""cffi out-of-line API-mode builder for the congestion-control core.

The cdef is read from the same headers the C code includes
(include/hpccd/cc.h, include/hpccd/wire_api.h), run through the C
preprocessor with HPCCD_CFFI_CDEF defined so that includes and static
asserts drop out and array sizes become numbers.  Run directly (``python cffi_build/build_cc.py``)
it compiles ``hpccd._cc`` and places it in daemon/hpccd/.
"""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

from cffi import FFI

ROOT = pathlib.Path(__file__).resolve().parent.parent
INCLUDE = ROOT / "include"
SOURCES = sorted(str(p) for p in (ROOT / "cffi_build" / "cc").glob("*.c"))
# -ffp-contract=off and no -ffast-math: the same events give the same bits
# on every build (include/hpccd/cc.h, "Numeric type").
CFLAGS = ["-O2", "-std=gnu11", "-ffp-contract=off", "-fno-fast-math",
          "-Wall", "-Wextra", "-Wno-unused-parameter", "-Werror"]


# The headers whose declarations make up the module, in include order.
HEADERS = ["hpccd/cc.h", "hpccd/wire_api.h"]
INCLUDES = "".join(f'#include "{h}"\n' for h in HEADERS)


def cdef_source() -> str:
    cc = os.environ.get("CC", "cc")
    return subprocess.run(
        [cc, "-E", "-P", "-DHPCCD_CFFI_CDEF", f"-I{INCLUDE}", "-x", "c", "-"],
        input=INCLUDES, check=True, capture_output=True, text=True).stdout


# The kernel's type names used by the shared wire headers.
KERNEL_TYPES = """
typedef uint8_t __u8; typedef uint16_t __u16; typedef uint32_t __u32;
typedef uint64_t __u64; typedef uint16_t __be16; typedef uint32_t __be32;
"""

ffibuilder = FFI()
ffibuilder.cdef(KERNEL_TYPES + cdef_source())
ffibuilder.set_source(
    "hpccd._cc", INCLUDES,
    sources=SOURCES, include_dirs=[str(INCLUDE)],
    extra_compile_args=CFLAGS, libraries=["m"])


def main() -> int:
    build = ROOT / "build" / "cffi"
    build.mkdir(parents=True, exist_ok=True)
    so = pathlib.Path(ffibuilder.compile(tmpdir=str(build), verbose=False))
    dest = ROOT / "daemon" / "hpccd" / so.name
    shutil.copy2(so, dest)
    print(f"built {dest.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
