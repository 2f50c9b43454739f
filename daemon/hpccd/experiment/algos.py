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

__all__ = ["Algo", "ALGOS", "parse_algos", "AlgoError"]


class Algo(NamedTuple):
    name: str           # as on the command line
    kind: str           # "kernel" or "native"
    cc: str             # TCP_CONGESTION name (kernel) or transport algorithm (native)
    needs_ecn: bool     # marks at the switch matter to it


ALGOS: dict[str, Algo] = {a.name: a for a in (
    Algo("cubic", "kernel", "cubic", False),
    Algo("bbr", "kernel", "bbr", False),
    Algo("tcp-dctcp", "kernel", "dctcp", True),
    Algo("tcp-hpcc", "kernel", "hpcc", False),
    Algo("hpcc", "native", "hpcc", False),
    Algo("hpcc-rtt", "native", "hpcc-rtt", False),
    Algo("hpcc-ack", "native", "hpcc-ack", False),
    Algo("hpcc-probe", "native", "hpcc-probe", False),
    Algo("rx-hpcc", "native", "rx-hpcc", False),
    Algo("dctcp", "native", "dctcp", True),
    Algo("ldcp", "native", "ldcp", True),
    Algo("dcqcn", "native", "dcqcn", True),
    Algo("timely", "native", "timely", False),
    Algo("dcqcn-win", "native", "dcqcn-win", True),
    Algo("timely-win", "native", "timely-win", False),
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
