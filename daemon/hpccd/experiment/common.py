"""What every experiment needs: flows of any algorithm between lab hosts,
and the idle base RTT."""
from __future__ import annotations

from typing import Any

from . import baselines
from .algos import Algo
from .kernel_tcp import AlgoUnavailable, TcpFlow, TcpSink, check_available
from .native import NativeFlow, NativeSink
from .report import progress

__all__ = ["Skip", "UsageError", "parse_shares", "open_flow", "open_sink", "native_engines", "base_rtt",
           "dumbbell", "star", "run_each", "run_in_lab", "verdict_lines",
           "with_defaults"]


class Skip(Exception):
    """This algorithm cannot run here; the experiment says why and goes on."""


class UsageError(ValueError):
    """The experiment's parameters cannot be used (found before any lab is
    built); ``hpccctl experiment`` prints the message and exits 2."""


def parse_shares(text: str | float, option: str, ok, bounds: str, what: str) -> list[float]:
    """"0.3,0.5" -> [0.3, 0.5], each number once, in the order given; a
    number that is not one, or for which ok(x) is false, is refused naming
    `option` and `bounds` ("no <what> (<bounds>)")."""
    out: list[float] = []
    for item in str(text).split(","):
        if not item.strip():
            continue
        try:
            x = float(item)
        except ValueError:
            raise UsageError(f"{option} {text!r}: {item.strip()!r} is not a number") from None
        if not ok(x):
            raise UsageError(f"{option} {text!r}: {item.strip()} is no {what} ({bounds})")
        if x not in out:
            out.append(x)
    if not out:
        raise UsageError(f"{option}: no {what} given")
    return out


def with_defaults(defaults: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """An experiment's parameters: `defaults`, overridden by the `params`
    given (not None) that it has."""
    return {**defaults, **{k: v for k, v in params.items() if v is not None and k in defaults}}


def open_sink(lab, algo: Algo, node: str, port: int):
    """The receiving side of `algo`'s flows in `node`."""
    if algo.kind == "kernel":
        try:
            check_available(algo.cc)
        except AlgoUnavailable as e:
            raise Skip(str(e)) from None
        return TcpSink(lab, node, port, algo.cc)
    return NativeSink(native_engines(lab, algo), node)


def native_engines(lab, algo: Algo):
    """The lab's transport engines (native.Engines) for a native `algo`;
    Skip when the runner cannot drive its flows."""
    if algo.engine is None:
        raise Skip(f"{algo.name}: probes per RTT are sent by the daemon, not by the transport "
                   f"engine the runner drives (docs/experiments.md)")
    eng = getattr(lab, "native", None)
    if eng is None:
        raise Skip(f"{algo.name}: native flows need the experiment's transport engines "
                   f"(native.Engines)")
    return eng


def open_flow(lab, algo: Algo, src: str, dst: str, port: int, sink, name: str):
    """A connected flow of `algo` from `src` to `sink` (open_sink) on `dst`."""
    if algo.kind == "kernel":
        try:
            return TcpFlow(lab, src, dst, port, algo.cc, name)
        except AlgoUnavailable as e:
            raise Skip(str(e)) from None
    return NativeFlow(native_engines(lab, algo), src, dst, algo.cc, name)


def base_rtt(lab, src: str, dst: str, n: int = 20) -> float:
    """The idle round-trip time between two hosts: the least of `n` UDP
    round trips (Lab.probe), seconds."""
    return min(lab.probe(src, dst)[0] for _ in range(n))


def _marking(k_bytes: int | None) -> list[str]:
    if k_bytes is None:
        return []
    return [f"ecn = {{ kmin_bytes = {k_bytes}, kmax_bytes = {k_bytes}, pmax = 1.0, "
            f"fast_start_k_bytes = {k_bytes} }}"]


def star(name: str, subnet: str, switch_id: int, hosts: list[str], rate_mbps: int,
         buffer_bytes: int, k_bytes: int | None = None) -> str:
    """`hosts` on one switch s1, every link at `rate_mbps`: the port toward
    the receiver is the only bottleneck; DCTCP threshold marking at K on s1
    if `k_bytes` is given."""
    lines = ["[lab]", f'name = "{name}"', f'subnet = "{subnet}"', "",
             "[defaults]", f"rate_mbps = {rate_mbps}", f"buffer_bytes = {buffer_bytes}", "",
             "[[switches]]", 'name = "s1"', f"id = {switch_id:#05x}", *_marking(k_bytes), ""]
    for h in hosts:
        lines += ["[[hosts]]", f'name = "{h}"']
    for h in hosts:
        lines += ["[[links]]", f'endpoints = ["{h}", "s1"]']
    return "\n".join(lines) + "\n"


def line(name: str, subnet: str, switch_id: int, rate_mbps: int, buffer_bytes: int,
         bottleneck_mbps: int, bottleneck_buffer_bytes: int | None = None,
         ecn: str = "") -> str:
    """h1 - s1 - h2, the links at `rate_mbps` but s1 -> h2, the bottleneck,
    at `bottleneck_mbps` (its buffer `bottleneck_buffer_bytes`, default the
    others'): one queue, at s1's port toward h2.  `ecn`: s1's ``ecn = {...}``
    line (docs/topology.md), none by default."""
    lines = ["[lab]", f'name = "{name}"', f'subnet = "{subnet}"', "",
             "[defaults]", f"rate_mbps = {rate_mbps}", f"buffer_bytes = {buffer_bytes}", "",
             "[[switches]]", 'name = "s1"', f"id = {switch_id:#05x}", *([ecn] if ecn else []),
             "",
             "[[hosts]]", 'name = "h1"', "[[hosts]]", 'name = "h2"', "",
             "[[links]]", 'endpoints = ["h1", "s1"]',
             "[[links]]", 'endpoints = ["s1", "h2"]', f"rate_mbps = {bottleneck_mbps}",
             *([f"buffer_bytes = {bottleneck_buffer_bytes}"] if bottleneck_buffer_bytes else [])]
    return "\n".join(lines) + "\n"


def run_each(exp: str, algos: list[Algo], kcc, senders: list[str], receivers: list[str],
             run_one, what: str, done) -> tuple[list, dict[str, str]]:
    """Run `run_one(algo)` for every algorithm in turn, inside its kernel
    session (kernel_cc.KernelCc), with progress lines; an algorithm that
    cannot run here is skipped with its reason.  Returns (rows, skipped)."""
    import time

    rows: list[dict] = []
    skipped: dict[str, str] = {}
    for a in algos:
        try:
            progress(exp, f"{a.name}: {what}")
            with kcc.session(a, senders, receivers), baselines.marking(kcc.lab, a):
                r = run_one(a)
        except Skip as e:
            skipped[a.name] = str(e)
            progress(exp, f"{a.name}: skipped: {e}")
            continue
        rows.append(r)
        progress(exp, f"{a.name}: {done(r)}")
        time.sleep(0.3)                      # let the queue empty between algorithms
    return rows, skipped


def run_in_lab(exp: str, lab_factory, topo, algos: list[Algo], p: dict[str, Any],
               pairs: list[tuple[str, str]], switch: str, peer: str, run_one, what: str,
               done, lab_note: str = "") -> tuple[list, dict[str, str]]:
    """A dumbbell-style experiment's whole run: the lab of `topo` up
    (lab_factory) with the native engines and the kernel's congestion
    controls; the idle base RTT of the first of `pairs` (sender, receiver);
    HPCC's T from the loaded RTT over `pairs`, the bottleneck the port of
    `switch` toward `peer` (loaded_rtt.setup, into `p`); then run_each of
    `algos` over the pairs' senders and receivers, each run
    run_one(lab, algo, base RTT).  `lab_note` goes into the "lab up"
    progress line.  Returns (rows, skipped)."""
    from . import loaded_rtt
    from .kernel_cc import KernelCc
    from .native import Engines

    senders = list(dict.fromkeys(s for s, _ in pairs))
    receivers = list(dict.fromkeys(r for _, r in pairs))
    with lab_factory(topo) as lab, Engines(lab), KernelCc(lab) as kcc:
        rtt = base_rtt(lab, *pairs[0])
        progress(exp, f"lab up{lab_note}; base RTT {rtt * 1e6:.0f} us")
        loaded_rtt.setup(exp, lab, p, pairs, switch, peer, len(pairs))
        out = run_each(exp, algos, kcc, senders, receivers, lambda a: run_one(lab, a, rtt),
                       what, done)
        kcc.note(p)
        return out


def verdict_lines(rows: list, skipped: dict[str, str], key: str = "algo",
                  hpcc_text: str = "") -> str:
    """The summary's tail: the HPCC parameters and how T was set
    (`hpcc_text`, loaded_rtt.setup), each row's bottleneck verdict, then
    the skipped.  `rows`: results.Row, or dicts."""
    from .results import value

    text = hpcc_text
    names = [value(r, key) for r in rows]
    if any(n in ("dcqcn", "timely", "dcqcn-win", "timely-win") for n in names):
        text += baselines.params_line(1_000_000_000)
    text += "".join(f"\n{n}: {value(r, 'verdict')}" for n, r in zip(names, rows))
    return text + "".join(f"\n{name}: skipped: {why}" for name, why in skipped.items())


def dumbbell(name: str, subnet: str, senders: list[str], receivers: list[str], rate_mbps: int,
             buffer_bytes: int, k_bytes: int | None, edge_mbps: int | None = None,
             mtu: int | None = None, bottleneck_buffer_bytes: int | None = None) -> str:
    """A dumbbell topology: `senders` on switch s1, `receivers` on s2, the
    s1 - s2 link at `rate_mbps` (the bottleneck) and the hosts' links at
    `edge_mbps` (default the same); DCTCP threshold marking at K on s1 (none
    when None); every link's MTU `mtu` (default the topology's, 1500); the
    bottleneck's buffer `bottleneck_buffer_bytes` (default the others').  Each receiver
    has a port of s2 to itself, so s2's sampler gives each receiver's
    throughput at fine grain."""
    edge = edge_mbps or rate_mbps
    lines = ["[lab]", f'name = "{name}"', f'subnet = "{subnet}"', "",
             "[defaults]", f"rate_mbps = {edge}", f"buffer_bytes = {buffer_bytes}",
             *([f"mtu = {mtu}"] if mtu else []), "",
             "[[switches]]", 'name = "s1"', "id = 0x0D1", *_marking(k_bytes), "",
             "[[switches]]", 'name = "s2"', "id = 0x0D2", ""]
    for h in senders + receivers:
        lines += ["[[hosts]]", f'name = "{h}"']
    for h in senders:
        lines += ["[[links]]", f'endpoints = ["{h}", "s1"]']
    lines += ["[[links]]", 'endpoints = ["s1", "s2"]', f"rate_mbps = {rate_mbps}",
              *([f"buffer_bytes = {bottleneck_buffer_bytes}"] if bottleneck_buffer_bytes else [])]
    for h in receivers:
        lines += ["[[links]]", f'endpoints = ["s2", "{h}"]']
    return "\n".join(lines) + "\n"
