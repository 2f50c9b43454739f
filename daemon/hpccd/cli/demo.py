"""The main job until the lab exists: one INT trace through every algorithm.

The bundled trace (hpccd/traces/incast_7to1_100g.jsonl, made by
hpccd.core.tracegen) records what the long flow's sender saw during a 7-to-1
incast at a 100 Gbit/s bottleneck.  The same congestion episode is replayed
through HPCC, Rx-HPCC, DCTCP and LDCP (for the last two as ECN marks at the
DCTCP threshold, see tracegen.derive), and the table shows each algorithm's
window before the incast, its smallest window during it, how long after the
incast started it first cut, and its window at the end.

Replay is open loop: the queue in the trace does not respond to the windows
computed here.  It shows how each algorithm reads the same feedback; closed-
loop comparisons on real queues are the lab's job.
"""
from __future__ import annotations

import json
import sys
from importlib import resources

from ..core import algorithms, replay, tracegen

BUNDLED = "incast_7to1_100g.jsonl"
# The window-based algorithms: their windows are what the summary compares.
ALGOS = tuple(a.name for a in algorithms.ALGORITHMS.values() if not a.rate_based)


def _load(path: str | None) -> tuple[str, list[dict]]:
    if path is None:
        text = resources.files("hpccd").joinpath("traces", BUNDLED).read_text("utf-8")
        name = BUNDLED
    else:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        name = path
    trace = replay.parse(text.splitlines())
    if trace.algo != "hpcc":
        raise replay.TraceError(1, f"the demo needs an hpcc INT trace, got {trace.algo!r}")
    return name, trace.events


def _window_bytes(out: dict) -> float:
    """The window in a replay output: HPCC's W, DCTCP's cwnd, LDCP's cw in packets."""
    if "W_bytes" in out:
        return out["W_bytes"]
    if "cwnd_bytes" in out:
        return float(out["cwnd_bytes"])
    return out["cw_pkts"] * tracegen.MTU


def summarise(events: list[dict]) -> list[dict]:
    """Per algorithm: window before the congestion, minimum, first cut, end."""
    times = [tracegen.event_time_ns(e) for e in events]
    bottleneck = [e["hops"][-1]["qlen_bytes"] for e in events]
    onset = next((i for i, q in enumerate(bottleneck) if q > 0), len(events))
    t_onset = times[onset] if onset < len(events) else times[-1]
    rows = []
    for algo in ALGOS:
        params, evs = tracegen.derive(algo, events)
        trace = replay.Trace(algo, {k: v for k, v in params.items() if k != "algo"}, evs)
        outs = replay.run(trace)
        w = [_window_bytes(o) for o in outs]
        before = w[onset - 1] if onset > 0 else w[0]
        after = w[onset:] or [before]
        cut = next((i for i in range(onset, len(w)) if w[i] < 0.9 * before), None)
        rows.append({
            "algo": algo,
            "before_bytes": before,
            "min_bytes": min(after),
            "first_cut_us": None if cut is None else (times[cut] - t_onset) / 1000,
            "end_bytes": w[-1],
        })
    return rows


def render(name: str, events: list[dict], rows: list[dict]) -> str:
    bdp = tracegen.LINE * tracegen.T_NS // 8_000_000_000
    peak = max(events, key=lambda e: e["hops"][-1]["qlen_bytes"])
    lines = [
        f"hpccd demo: {name}: {len(events)} ACKs of the long flow, "
        f"{tracegen.N_INCAST} senders join at {tracegen.INCAST_AT_NS / 1000:g} us",
        f"bottleneck {tracegen.LINE / 1e9:g} Gbit/s, T = {tracegen.T_NS / 1000:g} us, "
        f"BDP = {bdp} B; peak queue {peak['hops'][-1]['qlen_bytes']} B "
        f"({peak['hops'][-1]['qlen_bytes'] / bdp:.1f} BDP) at "
        f"{tracegen.event_time_ns(peak) / 1000:.1f} us; ECN threshold K = "
        f"{tracegen.ECN_K_BYTES} B",
        "open-loop replay: the same feedback through each algorithm; "
        "first cut = time from queue onset to a window below 90% of the one before",
        "",
        f"{'algorithm':<10} {'window before':>14} {'min window':>12} "
        f"{'first cut':>16} {'window at end':>14}",
    ]
    for r in rows:
        cut = "never" if r["first_cut_us"] is None else f"{r['first_cut_us']:.1f} us"
        lines.append(f"{r['algo']:<10} {r['before_bytes']:>12.0f} B {r['min_bytes']:>10.0f} B "
                     f"{cut:>16} {r['end_bytes']:>12.0f} B")
    return "\n".join(lines)


def main(trace_path: str | None = None, as_json: bool = False) -> int:
    try:
        name, events = _load(trace_path)
    except (OSError, replay.TraceError) as e:
        print(f"hpccctl demo: {e}", file=sys.stderr)
        return 2
    if not events:
        print("hpccctl demo: the trace has no events", file=sys.stderr)
        return 2
    rows = summarise(events)
    print(json.dumps(rows) if as_json else render(name, events, rows))
    return 0
