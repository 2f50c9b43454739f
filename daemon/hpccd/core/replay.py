"""Replay of feedback traces through one algorithm (format: docs/replay.md).

A trace is JSON Lines: a first line ``{"params": {...}}`` naming the algorithm
and its parameters, then one event per line.  The whole trace is read and
checked before anything runs, so a bad trace produces no output lines, only a
message naming the line and the key at fault (exit status 2).  The events then
go to the C core in one batch per trace, and one JSON object per event is
written, in order.

Extensions to the exchange format, all optional and backwards compatible:
``path_id`` is accepted on rx-hpcc events as on hpcc events, and rx-hpcc
events may carry ``active_flows`` (the receiver's count of concurrent flows N,
[HPCC++2022] section 6.3.2).  Two more algorithms, the HPCC paper's RDMA
baselines: ``dcqcn`` (events ``{"now_ns", "tx_bytes"?, "cnp"?}``: the
sender's clock, bytes sent since the previous event, a CNP received) and
``timely`` (events ``{"rtt_ns"}``: one RTT sample per completion event).
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import IO, Any, Callable, Iterable, Mapping

from . import algorithms, cc



class TraceError(ValueError):
    """A trace line is malformed; carries the 1-based line number."""

    def __init__(self, line: int, message: str):
        super().__init__(f"line {line}: {message}")
        self.line = line


def _uint(line: int, where: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TraceError(line, f"{where} must be a non-negative integer, got {v!r}")
    if v < 0 or v >= 1 << 64:
        raise TraceError(line, f"{where} out of range: {v}")
    return v


def _flag(line: int, where: str, v: Any) -> bool:
    if v in (0, 1) or isinstance(v, bool):
        return bool(v)
    raise TraceError(line, f"{where} must be 0, 1, true or false, got {v!r}")


def _check_keys(line: int, obj: Mapping[str, Any], required: Iterable[str],
                optional: Iterable[str], what: str) -> None:
    allowed = set(required) | set(optional)
    for k in obj:
        if k not in allowed:
            raise TraceError(line, f"unknown key {k!r} in {what} (allowed: "
                                   + ", ".join(sorted(allowed)) + ")")
    for k in required:
        if k not in obj:
            raise TraceError(line, f"missing key {k!r} in {what}")


HOP_KEYS = ("ts_ns", "qlen_bytes", "tx_bytes", "bw_bps")


def _hops(line: int, v: Any) -> list[dict[str, int]]:
    if not isinstance(v, list):
        raise TraceError(line, f"'hops' must be a list, got {type(v).__name__}")
    if len(v) > cc.MAX_HOPS:
        raise TraceError(line, f"'hops' has {len(v)} records, at most {cc.MAX_HOPS}")
    out = []
    for i, h in enumerate(v):
        if not isinstance(h, dict):
            raise TraceError(line, f"hops[{i}] must be an object")
        _check_keys(line, h, HOP_KEYS, (), f"hops[{i}]")
        out.append({k: _uint(line, f"hops[{i}].{k}", h[k]) for k in HOP_KEYS})
    return out


def _ev_hpcc(line: int, e: Mapping[str, Any]) -> dict[str, Any]:
    _check_keys(line, e, ("seq", "snd_nxt", "hops"), ("path_id",), "hpcc event")
    ev = {"seq": _uint(line, "seq", e["seq"]), "snd_nxt": _uint(line, "snd_nxt", e["snd_nxt"]),
          "hops": _hops(line, e["hops"])}
    if "path_id" in e:
        ev["path_id"] = _uint(line, "path_id", e["path_id"])
        if ev["path_id"] >= 1 << 32:
            raise TraceError(line, "path_id must fit in 32 bits")
    return ev


def _ev_rxhpcc(line: int, e: Mapping[str, Any]) -> dict[str, Any]:
    _check_keys(line, e, ("now_ns", "hops"), ("path_id", "active_flows"), "rx-hpcc event")
    ev = {"now_ns": _uint(line, "now_ns", e["now_ns"]), "hops": _hops(line, e["hops"])}
    if "path_id" in e:
        ev["path_id"] = _uint(line, "path_id", e["path_id"])
        if ev["path_id"] >= 1 << 32:
            raise TraceError(line, "path_id must fit in 32 bits")
    if "active_flows" in e:
        ev["active_flows"] = _uint(line, "active_flows", e["active_flows"])
        if ev["active_flows"] >= 1 << 16:
            raise TraceError(line, "active_flows must be below 65536")
    return ev


def _ev_dctcp(line: int, e: Mapping[str, Any]) -> dict[str, Any]:
    _check_keys(line, e, ("ack", "snd_nxt"), ("ece", "loss"), "dctcp event")
    ev = {"ack": _uint(line, "ack", e["ack"]), "snd_nxt": _uint(line, "snd_nxt", e["snd_nxt"]),
          "ece": _flag(line, "ece", e.get("ece", 0))}
    if "loss" in e:
        if e["loss"] not in ("fast", "rto"):
            raise TraceError(line, f"loss must be \"fast\" or \"rto\", got {e['loss']!r}")
        ev["loss"] = e["loss"]
    return ev


def _ev_ldcp(line: int, e: Mapping[str, Any]) -> dict[str, Any]:
    _check_keys(line, e, ("acked_pkts",), ("ece", "loss", "now_ns"), "ldcp event")
    ev = {"acked_pkts": _uint(line, "acked_pkts", e["acked_pkts"]),
          "ece": _flag(line, "ece", e.get("ece", 0)),
          "loss": _flag(line, "loss", e.get("loss", False))}
    if ev["acked_pkts"] >= 1 << 32:
        raise TraceError(line, "acked_pkts must fit in 32 bits")
    if "now_ns" in e:
        ev["now_ns"] = _uint(line, "now_ns", e["now_ns"])
    return ev


def _ev_dcqcn(line: int, e: Mapping[str, Any]) -> dict[str, Any]:
    _check_keys(line, e, ("now_ns",), ("tx_bytes", "cnp"), "dcqcn event")
    return {"now_ns": _uint(line, "now_ns", e["now_ns"]),
            "tx_bytes": _uint(line, "tx_bytes", e.get("tx_bytes", 0)),
            "cnp": _flag(line, "cnp", e.get("cnp", 0))}


def _ev_timely(line: int, e: Mapping[str, Any]) -> dict[str, Any]:
    _check_keys(line, e, ("rtt_ns",), (), "timely event")
    return {"rtt_ns": _uint(line, "rtt_ns", e["rtt_ns"])}


EVENT_PARSERS: dict[str, Callable[[int, Mapping[str, Any]], dict[str, Any]]] = {
    "hpcc": _ev_hpcc, "rx-hpcc": _ev_rxhpcc, "dctcp": _ev_dctcp, "ldcp": _ev_ldcp,
    "dcqcn": _ev_dcqcn, "timely": _ev_timely,
}


@dataclass
class Trace:
    algo: str
    params: dict[str, Any]
    events: list[dict[str, Any]]


def _json(line: int, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise TraceError(line, f"not valid JSON: {e.msg} at column {e.colno}") from None


def parse(lines: Iterable[str]) -> Trace:
    """Read and check a whole trace; raise TraceError at the first fault."""
    it = iter(enumerate(lines, start=1))
    header = None
    for no, text in it:
        if text.strip():
            header = (no, text)
            break
    if header is None:
        raise TraceError(1, "empty trace: the first line must be {\"params\": {...}}")
    no, text = header
    obj = _json(no, text)
    if not isinstance(obj, dict) or set(obj) != {"params"} or not isinstance(obj["params"], dict):
        raise TraceError(no, "the first line must be an object with exactly one key, "
                             "\"params\", holding an object")
    params = dict(obj["params"])
    algo = params.pop("algo", None)
    if algo is None:
        raise TraceError(no, "missing key 'algo' in params")
    if algo not in algorithms.ALGORITHMS:
        raise TraceError(no, f"unknown algorithm {algo!r} in key 'algo' (known: "
                             + ", ".join(algorithms.NAMES) + ")")
    try:
        algorithms.make_flow(algo, **params)     # validates every key and value
    except cc.ParamError as e:
        raise TraceError(no, str(e)) from None

    parse_event = EVENT_PARSERS[algo]
    events = []
    for no, text in it:
        if not text.strip():
            continue
        e = _json(no, text)
        if not isinstance(e, dict):
            raise TraceError(no, "an event must be a JSON object")
        events.append(parse_event(no, e))
    return Trace(algo, params, events)


def run(trace: Trace) -> list[dict[str, Any]]:
    """Run the events through a fresh flow of the trace's algorithm (one C call)."""
    flow = algorithms.make_flow(trace.algo, **trace.params)
    if not trace.events:
        return []
    return flow.run(flow.events(trace.events))


def replay(src: IO[str], dst: IO[str], err: IO[str]) -> int:
    """The ``hpccctl replay`` command: 0 on success, 2 on a bad trace."""
    try:
        trace = parse(src)
    except TraceError as e:
        print(f"hpccctl replay: {e}", file=err)
        return 2
    for out in run(trace):
        dst.write(json.dumps(out, allow_nan=False) + "\n")
    dst.flush()
    return 0


def open_trace(path: str) -> IO[str]:
    return sys.stdin if path == "-" else open(path, encoding="utf-8")
