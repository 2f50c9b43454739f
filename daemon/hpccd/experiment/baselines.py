"""DCQCN and TIMELY, the HPCC paper's rate-based baselines ([HPCC] section
5.1), in the lab: their parameters scaled from the networks their papers
were tuned for to the lab's, and the switch marking DCQCN needs.

[HPCC] section 5.1 ran DCQCN with "the parameters suggested by a major NIC
vendor" and TIMELY with "the parameters suggested in [31]" (the TIMELY
paper); neither list is in [HPCC], so the core's defaults are the DCQCN and
TIMELY papers' own (docs/algorithms.md gives each value's source).  Those
were set for microsecond round trips at 10-40 Gbit/s; the lab's links are
1 Gbit/s and its round trips software's (HPCC's T is 300 us here, not the
paper's 13 us, docs/transport.md "Lab settings").  So, as HPCC's T was:

- times (DCQCN's K, T and the CNP interval N; TIMELY's T_low and T_high)
  are multiplied by TIME_SCALE = lab T / [HPCC]'s T (300 / 13);
- rate steps and the byte counter by the lab's line rate over the NIC rate
  of the algorithm's paper (DCQCN: 40 Gbit/s; TIMELY: 10 Gbit/s);
- TIMELY's minRTT is the lab's T (the RTT the lab's flows see unloaded is
  below it);
- the ECN thresholds of DCQCN are [HPCC] section 5.1's, scaled with the
  port's bandwidth: K_min = 100 KB x Bw / 25 Gbit/s, K_max = 400 KB x Bw /
  25 Gbit/s, P_max 1 % (the DCQCN paper's; [HPCC] gives none).  They hold
  on every switch port while DCQCN runs (:func:`marking`), and the
  topology's marking (DCTCP's K) comes back after.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

from ..core import cc
from .algos import Algo

__all__ = ["TIME_SCALE", "dcqcn_params", "timely_params", "cnp_ns", "dcqcn_ecn", "marking",
           "params_line"]

PAPER_T_NS = 13_000                 # [HPCC] section 5.1, simulations
LAB_T_NS = 300_000                  # native.T_NS (not imported: native imports us)
TIME_SCALE = LAB_T_NS / PAPER_T_NS
DCQCN_PAPER_BPS = 40e9              # the DCQCN paper's NICs
TIMELY_PAPER_BPS = 10e9             # the TIMELY paper's NICs


def _defaults(struct: str, fill) -> dict[str, Any]:
    from .._cc import ffi

    p = ffi.new(f"struct {struct} *")
    fill(p)
    return {k: getattr(p, k) for k, _ in ffi.typeof(p[0]).fields}


def dcqcn_params(line_bps: int) -> dict[str, Any]:
    """DCQCN's reaction point parameters for a flow of a `line_bps` NIC in
    the lab: the core's defaults (the DCQCN paper's) scaled (module docstring)."""
    from .._cc import lib

    d = _defaults("hpccd_dcqcn_params", lib.hpccd_dcqcn_params_default)
    r = line_bps / DCQCN_PAPER_BPS
    return {"K_ns": round(d["K_ns"] * TIME_SCALE), "T_ns": round(d["T_ns"] * TIME_SCALE),
            "B_bytes": max(1, round(d["B_bytes"] * r)), "R_AI_bps": d["R_AI_bps"] * r,
            "min_rate_bps": line_bps / 1000}


def cnp_ns() -> int:
    """The notification point's interval N (DCQCN's 50 us) in the lab."""
    return round(50_000 * TIME_SCALE)


def timely_params(line_bps: int) -> dict[str, Any]:
    """TIMELY's parameters for a flow of a `line_bps` NIC in the lab: the
    core's defaults (the TIMELY paper's) scaled (module docstring)."""
    from .._cc import lib

    d = _defaults("hpccd_timely_params", lib.hpccd_timely_params_default)
    r = line_bps / TIMELY_PAPER_BPS
    return {"delta_bps": d["delta_bps"] * r, "T_low_ns": round(d["T_low_ns"] * TIME_SCALE),
            "T_high_ns": round(d["T_high_ns"] * TIME_SCALE), "min_rtt_ns": LAB_T_NS,
            "min_rate_bps": line_bps / 1000}


def dcqcn_ecn(rate_bps: int):
    """The topology.Ecn of a DCQCN port of `rate_bps` ([HPCC] section 5.1)."""
    from ..lab.topology import Ecn

    e = cc.dcqcn_ecn_for_rate(rate_bps)
    return Ecn(e["kmin_bytes"], e["kmax_bytes"], e["pmax"])


@contextlib.contextmanager
def marking(lab, algo: Algo) -> Iterator[None]:
    """Every switch port marks as DCQCN's would while `algo` (if DCQCN) runs."""
    sw = getattr(lab, "int_switch", None)
    if algo.cc not in ("dcqcn", "dcqcn-win") or sw is None:
        yield
        return
    ports = list(sw.ports.items())
    try:
        for (name, number), sp in ports:
            sw.configure(name, number, ecn=dcqcn_ecn(sp.port.rate_bps))
        yield
    finally:
        for (name, number), _ in ports:
            sw.configure(name, number)          # the topology's marking again


def params_line(line_bps: int) -> str:
    """The summary's line on the baselines' lab parameters."""
    d, t, e = dcqcn_params(line_bps), timely_params(line_bps), dcqcn_ecn(line_bps)
    return (f"\nDCQCN at {line_bps / 1e9:g} Gbit/s: K = T = {d['K_ns'] / 1000:.0f} us, "
            f"N = {cnp_ns() / 1000:.0f} us, "
            f"B = {d['B_bytes']} bytes, R_AI = {d['R_AI_bps'] / 1e6:g} Mbit/s, marking "
            f"K_min {e.kmin_bytes} B, K_max {e.kmax_bytes} B, P_max {e.pmax:g}; TIMELY at "
            f"{line_bps / 1e9:g} Gbit/s: "
            f"T_low {t['T_low_ns'] / 1000:.0f} us, T_high {t['T_high_ns'] / 1000:.0f} us, "
            f"delta {t['delta_bps'] / 1e6:g} Mbit/s, minRTT {t['min_rtt_ns'] / 1000:.0f} us "
            f"(the papers' values scaled to the lab: docs/experiments.md)")
