"""Names of the BPF programs' counter slots, and reading them.

``hpccd_xdp_cnt`` and ``hpccd_tc_cnt`` are per-CPU arrays of ``struct
hpccd_counter {u64 packets; u64 bytes;}``, one slot per verdict or drop
cause (``enum hpccd_xdp_counter`` / ``enum hpccd_tc_counter`` of
include/hpccd/kern_user.h).  Every packet is counted in exactly one slot.  The
tables below give each slot a label value (the enum name without its
prefix, lower case; the malformed slots by their class of
docs/wire-format.md) and its verdict; tests/unit/test_bpf_counters.py checks
them against the header, so a slot added there without a name here fails.
"""
from __future__ import annotations

import struct
import sys
from typing import NamedTuple

from ..core.wire import WireErr
from .abi import check_format

__all__ = ["Slot", "XDP_SLOTS", "TC_SLOTS", "read", "XDP_COUNTERS", "TC_COUNTERS"]


class Slot(NamedTuple):
    index: int
    name: str          # label value
    verdict: str       # what the program did with the packet
    drop: bool         # a drop (counted in hpccd_drops_total too)


def _xdp_slots() -> tuple[Slot, ...]:
    out = [Slot(0, "pass_not_ipv4", "pass", False),
           Slot(1, "pass_bad_hdr", "pass", False),
           Slot(2, "pass_other", "pass", False),
           Slot(3, "pass_not_local", "pass", False),
           Slot(4, "pass_no_xsk", "pass", False),
           Slot(5, "malformed_unused", "drop", True)]      # slot + 0: no class 0
    base = 5
    for e in WireErr:
        if e:
            out.append(Slot(base + e, f"malformed_{e.name.lower()}", "drop", True))
    n = base + len(WireErr)
    for i, name in enumerate(("drop_tag_slot", "drop_no_key", "drop_tcp_type",
                              "drop_tcp_probe_off", "drop_tcp_resp_tag", "drop_tcp_resp_full",
                              "drop_probe_rate")):
        out.append(Slot(n + i, name, "drop", True))
    n += 7
    out += [Slot(n, "tx_probe_resp_udp", "tx", False),
            Slot(n + 1, "tx_probe_resp_tcp", "tx", False),
            Slot(n + 2, "tcp_resp_stored", "drop", False),   # consumed: telemetry stored
            Slot(n + 3, "redirect_xsk", "redirect", False)]
    return tuple(out)


XDP_SLOTS = _xdp_slots()
XDP_COUNTERS = len(XDP_SLOTS)                 # HPCCD_XDP_COUNTERS
TC_SLOTS = tuple(Slot(i, n, "ok", False) for i, n in enumerate(
    ("not_tcp", "trunc", "probe", "pure_ack", "new_flow", "tracked", "untracked_end",
     "map_fail")))
TC_COUNTERS = len(TC_SLOTS)                   # HPCCD_TC_COUNTERS

_COUNTER = struct.Struct(check_format("=QQ", "hpccd_counter"))


def read(m) -> list[tuple[int, int]]:
    """(packets, bytes) of every slot of a per-CPU counter map (hpccd.bpf.loader.Map),
    summed over the CPUs, in slot order."""
    out = []
    for _, per_cpu in sorted(m.lookup_batch(), key=lambda kv: int.from_bytes(kv[0], sys.byteorder)):
        p = b = 0
        for v in per_cpu:
            vp, vb = _COUNTER.unpack_from(v)
            p += vp
            b += vb
        out.append((p, b))
    return out
