"""What every experiment needs: flows of any algorithm between lab hosts,
and the idle base RTT."""
from __future__ import annotations

from .algos import Algo
from .kernel_tcp import AlgoUnavailable, TcpFlow, TcpSink, check_available

__all__ = ["Skip", "open_flow", "open_sink", "base_rtt"]


class Skip(Exception):
    """This algorithm cannot run here; the experiment says why and goes on."""


def open_sink(lab, algo: Algo, node: str, port: int):
    """The receiving side of `algo`'s flows in `node`."""
    if algo.kind == "kernel":
        try:
            check_available(algo.cc)
        except AlgoUnavailable as e:
            raise Skip(str(e)) from None
        return TcpSink(lab, node, port)
    raise Skip(f"native hpccd transport flows ({algo.name}) are not wired into the "
               f"experiment runner yet (docs/experiments.md)")


def open_flow(lab, algo: Algo, src: str, dst: str, port: int, sink, name: str):
    """A connected flow of `algo` from `src` to `sink` (open_sink) on `dst`."""
    if algo.kind == "kernel":
        try:
            return TcpFlow(lab, src, dst, port, algo.cc, name)
        except AlgoUnavailable as e:
            raise Skip(str(e)) from None
    raise Skip(f"native hpccd transport flows ({algo.name}) are not wired in yet")


def base_rtt(lab, src: str, dst: str, n: int = 20) -> float:
    """The idle round-trip time between two hosts: the least of `n` UDP
    round trips (Lab.probe), seconds."""
    return min(lab.probe(src, dst)[0] for _ in range(n))
