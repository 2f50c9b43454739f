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

import os
import pathlib
import shutil
import subprocess
import sys

from cffi import FFI

ROOT = pathlib.Path(__file__).resolve().parent.parent
INCLUDE = ROOT / "include"
HERE = ROOT / "cffi_build"
SOURCES = [str(HERE / "xsk" / "xsk_rx.c"),
           str(HERE / "cc" / "wire.c"),          # hpccd_wire_parse_frame
           str(HERE / "cc" / "int_decode.c")]    # hpccd_int_hop_unpack, which wire.c calls
CFLAGS = ["-O2", "-std=gnu11", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Werror"]

HEADERS = ["hpccd/xsk.h"]
INCLUDES = "".join(f'#include "{h}"\n' for h in HEADERS)


def cdef_source() -> str:
    cc = os.environ.get("CC", "cc")
    return subprocess.run(
        [cc, "-E", "-P", "-DHPCCD_CFFI_CDEF", f"-I{INCLUDE}", "-x", "c", "-"],
        input=INCLUDES, check=True, capture_output=True, text=True).stdout


ffibuilder = FFI()
ffibuilder.cdef(cdef_source())
ffibuilder.set_source(
    "hpccd._xsk", INCLUDES,
    sources=SOURCES, include_dirs=[str(INCLUDE)],
    extra_compile_args=CFLAGS, libraries=["xdp", "bpf", "pthread"])


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
