"""What the cffi builders share: paths, flags, the cdef from a header, the install step.

Every module's cdef is read from the header its C code includes, run through
the C preprocessor with HPCCD_CFFI_CDEF defined so that includes and static
asserts drop out and array sizes become numbers.  The kernel's type names used
by the shared wire headers are declared first.
"""
from __future__ import annotations

import fcntl
import os
import pathlib
import re
import shutil
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent
INCLUDE = ROOT / "include"
HERE = ROOT / "cffi_build"
FASTPATH = ROOT / "fastpath"
EBPF = ROOT / "ebpf"

CFLAGS = ["-O2", "-std=gnu11", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Werror"]
# The congestion-control core also needs: the same events give the same bits
# on every build (include/hpccd/cc.h, "Numeric type").  Written once, in
# fastpath/cc/numeric.cflags, which the Makefiles and scripts read too.
NUMERIC_CFLAGS_FILE = FASTPATH / "cc" / "numeric.cflags"


def numeric_cflags(path: pathlib.Path = NUMERIC_CFLAGS_FILE) -> list[str]:
    """The flags of `path`: its words, lines starting with # left out."""
    return [w for line in path.read_text().splitlines()
            if not line.lstrip().startswith("#") for w in line.split()]


CFLAGS_NUMERIC = numeric_cflags()

CORE_LIBRARY = ROOT / "build" / "core" / "libhpccd_core.a"


def core_library() -> str:
    """The congestion-control core and the wire's C side (fastpath/cc/*.c),
    compiled once with CFLAGS and the numeric flags (position-independent)
    into build/core/libhpccd_core.a, which hpccd._cc, hpccd._transport,
    hpccd._tcpside and the engine's test harness link: one build of the
    core with one set of flags.  Rebuilt when a source, a shared header,
    the flags file or this file is newer; concurrent builders (make -j)
    wait for one another on a lock and the archive is renamed into place
    whole.  Returns its path."""
    srcs = sorted((FASTPATH / "cc").glob("*.c"))
    deps = [*srcs, *(INCLUDE / "hpccd").glob("*.h"), NUMERIC_CFLAGS_FILE, pathlib.Path(__file__)]

    def fresh() -> bool:
        return (CORE_LIBRARY.exists() and
                CORE_LIBRARY.stat().st_mtime >= max(d.stat().st_mtime for d in deps))

    if fresh():
        return str(CORE_LIBRARY)
    out = CORE_LIBRARY.parent
    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if fresh():
            return str(CORE_LIBRARY)
        tmp = out / f".build.{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            cc = os.environ.get("CC", "cc")
            objs = []
            for src in srcs:
                obj = tmp / f"{src.stem}.o"
                subprocess.run([cc, *CFLAGS, *CFLAGS_NUMERIC, "-fPIC", f"-I{INCLUDE}", "-c",
                                str(src), "-o", str(obj)], check=True)
                objs.append(str(obj))
            subprocess.run([os.environ.get("AR", "ar"), "rcs", str(tmp / "lib.a"), *objs],
                           check=True)
            os.replace(tmp / "lib.a", CORE_LIBRARY)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return str(CORE_LIBRARY)


# As linux/types.h has them (asm-generic/int-ll64.h: __u64 is unsigned long
# long, not uint64_t's unsigned long): the compiler holds an array of __u64
# in a shared struct to the same type in the cdef and in the header.
KERNEL_TYPES = """
typedef uint8_t __u8; typedef uint16_t __u16; typedef uint32_t __u32;
typedef unsigned long long __u64; typedef uint16_t __be16; typedef uint32_t __be32;
"""


def includes(headers: list[str]) -> str:
    """`#include "h"` lines for set_source and the preprocessor."""
    return "".join(f'#include "{h}"\n' for h in headers)


def cdef_source(headers: list[str], include_dirs: list[pathlib.Path],
                kernel_types: bool = True) -> str:
    cc = os.environ.get("CC", "cc")
    text = subprocess.run(
        [cc, "-E", "-P", "-DHPCCD_CFFI_CDEF", *(f"-I{d}" for d in include_dirs),
         "-x", "c", "-"],
        input=includes(headers), check=True, capture_output=True, text=True).stdout
    return (KERNEL_TYPES if kernel_types else "") + text


_DEFINE = re.compile(r"^#define[ \t]+(HPCCD_[A-Z0-9_]+)[ \t]+[^ \t\n]", re.M)


def constant_defines(headers: list[pathlib.Path]) -> str:
    """cdef lines ``#define NAME ...`` for every object-like HPCCD_* macro
    with a value in `headers` (header guards have none; function-like
    macros are not matched).  In API mode cffi takes each value from the
    compiler, so Python reads ``lib.NAME`` exactly as C sees it and the
    header stays the one place the number is written."""
    names: list[str] = []
    for h in headers:
        for m in _DEFINE.finditer(h.read_text()):
            if m.group(1) not in names:
                names.append(m.group(1))
    return "".join(f"#define {n} ...\n" for n in names)


def build_and_install(ffibuilder) -> int:
    """Compile in build/cffi and copy the module into daemon/hpccd/."""
    build = ROOT / "build" / "cffi"
    build.mkdir(parents=True, exist_ok=True)
    so = pathlib.Path(ffibuilder.compile(tmpdir=str(build), verbose=False))
    dest = ROOT / "daemon" / "hpccd" / so.name
    # Copy beside the destination, then rename over it: a process that has
    # the old module loaded keeps its (unlinked) file instead of seeing its
    # mapped code rewritten under it.
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    shutil.copy2(so, tmp)
    os.replace(tmp, dest)
    print(f"built {dest.relative_to(ROOT)}")
    return 0
