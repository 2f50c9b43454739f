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

import os
import pathlib
import shutil
import subprocess
import sys

from cffi import FFI

ROOT = pathlib.Path(__file__).resolve().parent.parent
HERE = ROOT / "cffi_build"
HEADER = HERE / "bpf_shim.h"
SOURCES = [str(HERE / "bpf_shim.c")]
CFLAGS = ["-O2", "-std=gnu11", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Werror"]


def cdef_source() -> str:
    cc = os.environ.get("CC", "cc")
    return subprocess.run(
        [cc, "-E", "-P", "-DHPCCD_CFFI_CDEF", str(HEADER)],
        check=True, capture_output=True, text=True).stdout


ffibuilder = FFI()
ffibuilder.cdef(cdef_source())
ffibuilder.set_source(
    "hpccd._bpf", '#include "bpf_shim.h"\n',
    sources=SOURCES, include_dirs=[str(HERE)],
    extra_compile_args=CFLAGS, libraries=["bpf", "pthread"])


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
