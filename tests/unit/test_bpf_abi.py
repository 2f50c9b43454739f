"""hpccd.bpf.abi: struct formats held to the kernel/user headers' layouts.

Invariant protected: a Python struct format that reads a struct of include/hpccd/kern_user.h
or tcp_cc.h is accepted only when it matches the compiler's layout field by field (offset
and size of every field, total size), so a header change cannot be misread silently.
"""
from __future__ import annotations

import pytest

from hpccd.bpf.abi import c_layout, check_format, format_layout


def test_format_layout_reads_fields_and_skips_padding():
    assert format_layout("=4s4sHHB3x") == [(0, 4), (4, 4), (8, 2), (10, 2), (12, 1)]
    assert format_layout("<2QI4x") == [(0, 8), (8, 8), (16, 4)]
    with pytest.raises(ValueError, match="starts with"):
        format_layout("QQ")                  # native alignment: not a layout


def test_c_layout_is_the_compilers():
    # struct hpccd_flow_key: saddr, daddr, sport, dport, proto, pad[3] (left out)
    assert c_layout("hpccd_flow_key") == [(0, 4), (4, 4), (8, 2), (10, 2), (12, 1)]
    assert c_layout("hpccd_counter") == [(0, 8), (8, 8)]


def test_check_format_accepts_the_layout_and_refuses_others():
    assert check_format("=QQ", "hpccd_counter") == "=QQ"
    assert check_format("=4s4sHHB3x", "hpccd_flow_key") == "=4s4sHHB3x"
    for bad in ("=QI4x", "=QQQ", "=Q", "=4s4sHHB", "=4s4sHIx"):
        with pytest.raises(ImportError, match=r"struct hpccd_(counter|flow_key)"):
            check_format(bad, "hpccd_flow_key" if "4s" in bad else "hpccd_counter")
