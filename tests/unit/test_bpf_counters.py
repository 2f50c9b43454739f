"""Counter slot names of hpccd.bpf.counters against include/hpccd/kern_user.h (read through
the loader's cffi module, hpccd._bpf, whose cdef is that header).

Invariant protected: every slot of enum hpccd_xdp_counter / enum
hpccd_tc_counter has exactly one label value, in slot order, and the
malformed slots follow enum hpccd_wire_err; a slot added to the header
without a name in the exporter fails here.
"""
from __future__ import annotations

from hpccd._bpf import ffi as abi
from hpccd.bpf import counters as bpf_counters
from hpccd.core import wire


def _enum(name: str) -> dict[str, int]:
    return dict(abi.typeof(f"enum {name}").relements)


def test_xdp_slots_match_the_header():
    e = _enum("hpccd_xdp_counter")
    assert bpf_counters.XDP_COUNTERS == e["HPCCD_XDP_COUNTERS"]
    assert [s.index for s in bpf_counters.XDP_SLOTS] == list(range(e["HPCCD_XDP_COUNTERS"]))
    names = {s.index: s.name for s in bpf_counters.XDP_SLOTS}
    for ident, idx in e.items():
        if ident in ("HPCCD_XDP_COUNTERS", "HPCCD_XDP_DROP_MALFORMED",
                     "HPCCD_XDP_DROP_MALFORMED_LAST"):
            continue
        assert names[idx] == ident.removeprefix("HPCCD_XDP_").lower(), ident
    base = e["HPCCD_XDP_DROP_MALFORMED"]
    for err in wire.WireErr:
        if err:
            assert names[base + err] == f"malformed_{err.name.lower()}"
    assert len(set(names.values())) == len(names)
    verdicts = {s.name: s.verdict for s in bpf_counters.XDP_SLOTS}
    assert verdicts["redirect_xsk"] == "redirect" and verdicts["tx_probe_resp_tcp"] == "tx"
    assert {s.name for s in bpf_counters.XDP_SLOTS if s.drop} >= {"drop_tcp_resp_tag",
                                                                 "drop_no_key"}
    assert not any(s.drop for s in bpf_counters.XDP_SLOTS if s.verdict != "drop")


def test_tc_slots_match_the_header():
    e = _enum("hpccd_tc_counter")
    assert bpf_counters.TC_COUNTERS == e.pop("HPCCD_TC_COUNTERS")
    assert abi.sizeof("struct hpccd_counter") == bpf_counters._COUNTER.size
    assert {s.index: s.name for s in bpf_counters.TC_SLOTS} == \
        {i: n.removeprefix("HPCCD_TC_").lower() for n, i in e.items()}
