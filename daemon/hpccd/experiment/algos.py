"""The algorithms an experiment compares, by the names of
``hpccctl experiment --algos``.

Kernel TCP (flows of kernel_tcp, congestion control set per socket):
``cubic``, ``bbr``, and hpccd's BPF struct_ops ``tcp-dctcp`` and
``tcp-hpcc`` (registered by the daemon, docs/tcp-side.md).  Native hpccd
transport flows (AF_XDP, docs/transport.md): ``hpcc`` (INT on every
packet, sender-side Algorithm 1), ``hpcc-probe`` (a probe per RTT, [HPCC++2022]
section 6.2.1), ``rx-hpcc`` (receiver-computed window in one ACK per T),
``dctcp``, ``ldcp``; the ablation of [HPCC] section 5.4 (Figure 13):
``hpcc-rtt`` (the reference window off: W changes once per RTT only) and
``hpcc-ack`` (W^c updated on every ACK); and the HPCC paper's rate-based baselines ``dcqcn``
(CNPs from the receiver, the switch marking as [HPCC] section 5.1 sets it)
and ``timely`` (RTT gradient), with the lab parameters of baselines.py,
and their "+win" versions of [HPCC] section 5.1, ``dcqcn-win`` and
``timely-win`` (bytes in flight bounded by HPCC's W_init = B x T).
"""
from __future__ import annotations

from typing import NamedTuple

from ..core import algorithms

__all__ = ["Algo", "ALGOS", "parse_algos", "AlgoError"]


class Algo(NamedTuple):
    name: str           # as on the command line
    kind: str           # "kernel" or "native"
    cc: str             # TCP_CONGESTION name (kernel) or this row's name (native)
    needs_ecn: bool     # marks at the switch matter to it
    # Native flows (Transport.open_flow): the engine's algorithm (hpccd.core.algorithms),
    # where the flow's INT goes, HPCC's reaction ([HPCC] section 5.4, Figure 13; the core's
    # research switch, include/hpccd/cc.h) and "+win" ([HPCC] section 5.1: a sending window,
    # HPCC's W_init = B x T, on a rate-based algorithm).
    engine: str | None = None
    int_mode: str = "every"
    reaction: int = 0
    rate_win: bool = False


def _kernel(name: str, cc: str, needs_ecn: bool) -> Algo:
    return Algo(name, "kernel", cc, needs_ecn)


def _native(name: str, engine: str, **variant) -> Algo:
    row = algorithms.ALGORITHMS[engine]
    # The rate-based baselines carry no INT ([HPCC] section 5.1 counts INT overhead for
    # HPCC only); the others INT on every packet unless the variant says otherwise.
    variant.setdefault("int_mode", "none" if row.rate_based else "every")
    return Algo(name, "native", name, row.needs_ecn, engine, **variant)


ALGOS: dict[str, Algo] = {a.name: a for a in (
    _kernel("cubic", "cubic", False),
    _kernel("bbr", "bbr", False),
    _kernel("tcp-dctcp", "dctcp", True),
    _kernel("tcp-hpcc", "hpcc", False),
    # Every algorithm of the core under its own name, then the variants.
    *(_native(name, name) for name in algorithms.NAMES),
    _native("hpcc-rtt", "hpcc", reaction=1),
    _native("hpcc-ack", "hpcc", reaction=2),
    _native("hpcc-probe", "hpcc", int_mode="probe"),
    _native("dcqcn-win", "dcqcn", rate_win=True),
    _native("timely-win", "timely", rate_win=True),
)}


class AlgoError(ValueError):
    pass


def parse_algos(text: str) -> list[Algo]:
    """"hpcc,cubic" -> [Algo, ...]; unknown or repeated names refused."""
    out: list[Algo] = []
    for name in (t.strip() for t in text.split(",")):
        if not name:
            continue
        if name not in ALGOS:
            raise AlgoError(f"unknown algorithm {name!r}; known: {', '.join(ALGOS)}")
        if any(a.name == name for a in out):
            raise AlgoError(f"algorithm {name!r} given twice")
        out.append(ALGOS[name])
    if not out:
        raise AlgoError("no algorithm given")
    return out
