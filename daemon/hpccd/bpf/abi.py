"""The kernel/user ABI of the BPF programs, as Python reads it.

The structs, enums and constants are those of include/hpccd/kern_user.h and
include/hpccd/tcp_cc.h, compiled into the loader's cffi module hpccd._bpf
(``ffi``/``lib`` there).  Where a hot path decodes map values with a
``struct`` format instead (a cffi cast and an attribute read per field cost
several times more), :func:`check_format` holds the format to the compiler's
layout at import, field by field, so that the header stays the one
definition and a changed struct fails loudly instead of being misread.
"""
from __future__ import annotations

import re
import struct

from .._bpf import ffi

__all__ = ["format_layout", "c_layout", "check_format"]


def format_layout(fmt: str) -> list[tuple[int, int]]:
    """(offset, size) of each field of a `struct` format ("=" or "<": no
    alignment), padding left out; "Ns" is one field of N bytes."""
    if fmt[:1] not in "=<":
        raise ValueError(f"{fmt!r}: a layout format starts with '=' or '<' (no alignment)")
    out, off = [], 0
    for m in re.finditer(r"(\d*)([a-zA-Z?])", fmt[1:]):
        n, code = int(m.group(1) or 1), m.group(2)
        if code == "x":
            off += n
        elif code == "s":
            out.append((off, n))
            off += n
        else:
            size = struct.calcsize("=" + code)
            for _ in range(n):
                out.append((off, size))
                off += size
    return out


def c_layout(name: str) -> list[tuple[int, int]]:
    """(offset, size) of each field of `struct name` as the C compiler lays it
    out, the explicit pad fields left out; an array is one field."""
    t = ffi.typeof(f"struct {name}")
    return [(f.offset, ffi.sizeof(f.type)) for fname, f in t.fields
            if not fname.startswith("pad")]


def check_format(fmt: str, name: str) -> str:
    """`fmt` if it decodes `struct name` field for field (offsets, sizes and
    total size); ImportError naming both otherwise (called at import)."""
    if struct.calcsize(fmt) != ffi.sizeof(f"struct {name}") or \
            format_layout(fmt) != c_layout(name):
        raise ImportError(f"struct {name} (include/hpccd/) is {c_layout(name)}, "
                          f"{ffi.sizeof(f'struct {name}')} bytes; the format {fmt!r} reads "
                          f"{format_layout(fmt)}, {struct.calcsize(fmt)} bytes")
    return fmt
