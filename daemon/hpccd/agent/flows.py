"""The daemon's flow table: what the flow managers know, for the control
socket and the metrics exporter to read.

The flow-manager components (hpccd.agent.component: the AF_XDP transport's native
flows, the TCP-side deployment's kernel TCP flows) own their flows' real
state in the fast path; they publish it here in batches (``update``) and
report events (``observe_rtt``, ``finish``, ``drop``).  Readers get copies
(``snapshot``, ``groups``), taken under one lock, so a scrape never sees
half of an update.

Label cardinality is bounded by construction: aggregates are kept per
(algorithm, peer), where ``peer`` is the name of a ``[[peers]]`` entry of
the configuration or ``"default"``; the INT hop table keeps at most
``int_hop_series`` (pathID, hop) keys, least recently seen evicted; per-flow
series exist only for the opt-in top-K.  Counters of a group include the
flows that ended (their last values are folded into the group when they
finish), so they only go up, as Prometheus counters must, as long as the
components report per-flow totals that only go up.
"""
from __future__ import annotations

import bisect
import collections
import dataclasses
import itertools
import threading
import time
from typing import Any, Iterable, Mapping

from .._cc import lib as _cc_lib
from ..core import algorithms as algorithms_mod, cc

__all__ = ["Flow", "FlowTable", "FlowLimitError", "Histogram", "GROUP_COUNTERS",
           "RTT_BUCKETS", "FCT_BUCKETS", "KINDS", "ROLES"]

KINDS = ("native", "tcp")
ROLES = ("sender", "receiver")
# Seconds.  The lab's base RTT is tens to hundreds of microseconds
# (docs/architecture.md); a WAN peer's is milliseconds.
RTT_BUCKETS = (10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3,
               25e-3, 50e-3, 100e-3, 250e-3, 1.0)
FCT_BUCKETS = (100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3,
               250e-3, 500e-3, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# Per-flow totals the components report; per group they become counters.
# bytes_sent and retx_bytes are frame bytes (what went on the wire); payload_sent
# and bytes_acked are payload bytes.
GROUP_COUNTERS = ("bytes_sent", "payload_sent", "bytes_acked", "retx_packets", "retx_bytes",
                  "probes_sent", "probes_answered", "probes_lost", "notify_sent",
                  "notify_received")
# INT hop words wrap (include/hpccd/int_hop.h): ts modulo 2^24 ns, txBytes
# modulo 2^20 units of 128 bytes.
_TS_MOD = 1 << _cc_lib.HPCCD_INT_TS_BITS
_TX_MOD = (1 << _cc_lib.HPCCD_INT_TX_BITS) * _cc_lib.HPCCD_INT_TX_UNIT
# A hop's utilisation is taken over at least this much of its clock
# (include/hpccd/int_hop.h says why).
UTIL_SPAN_NS = _cc_lib.HPCCD_INT_UTIL_SPAN_NS


class FlowLimitError(RuntimeError):
    """The table holds ``limits.max_flows`` flows already."""


@dataclasses.dataclass
class Flow:
    """One flow as the daemon shows it.  Addresses as the local end sees
    them: ``saddr``/``sport`` are this host's."""

    id: int
    kind: str                     # "native" (AF_XDP transport) or "tcp" (kernel TCP)
    role: str                     # "sender" or "receiver"
    saddr: str
    sport: int
    daddr: str
    dport: int
    proto: int                    # 6 or 17
    peer: str                     # metrics label: [[peers]] name or "default"
    algorithm: str
    component: str
    started: float                # time.monotonic()
    started_wall: float           # time.time()
    updated: float = 0.0
    engine: str = ""              # native flows: the engine's interface/queue ("eth0/1")
    window_bytes: float = 0.0     # W (HPCC, Rx-HPCC), cwnd (DCTCP); LDCP: cw_pkts
    rate_bps: float = 0.0         # pacing rate, bits per second
    inflight_bytes: int = 0
    U: float | None = None        # HPCC's normalised inflight estimate
    alpha: float | None = None    # DCTCP's alpha
    cw_pkts: float | None = None  # LDCP's cw
    rtt_s: float | None = None    # last RTT sample
    probe_rtt_s: float | None = None
    bytes_sent: int = 0           # frame bytes sent, retransmissions included
    payload_sent: int = 0         # payload bytes sent, first transmissions only
    bytes_acked: int = 0
    retx_packets: int = 0
    retx_bytes: int = 0
    probes_sent: int = 0
    probes_answered: int = 0
    probes_lost: int = 0
    notify_sent: int = 0
    notify_received: int = 0
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    _SETTABLE = frozenset(("window_bytes", "rate_bps", "inflight_bytes", "U", "alpha",
                           "cw_pkts", "rtt_s", "probe_rtt_s", "extra", "engine",
                           *GROUP_COUNTERS))

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["age_s"] = time.monotonic() - self.started
        return d


class Histogram:
    """Cumulative bucket counts, sum and count of observations (the
    Prometheus histogram's data, kept here so that one lock covers it)."""

    def __init__(self, buckets: Iterable[float]):
        self.bounds = tuple(buckets)
        self.counts = [0] * (len(self.bounds) + 1)      # last: +Inf
        self.sum = 0.0
        self.count = 0

    def observe(self, v: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, v)] += 1
        self.sum += v
        self.count += 1

    def cumulative(self) -> list[tuple[str, int]]:
        out, acc = [], 0
        for b, c in zip((*map(_le, self.bounds), "+Inf"), self.counts):
            acc += c
            out.append((b, acc))
        return out

    def copy(self) -> "Histogram":
        h = Histogram(self.bounds)
        h.counts, h.sum, h.count = list(self.counts), self.sum, self.count
        return h


def _le(b: float) -> str:
    return repr(float(b))


@dataclasses.dataclass
class _Group:
    rtt: Histogram
    probe_rtt: Histogram
    fct: Histogram
    started: int = 0
    completed: int = 0
    aborted: int = 0
    ended: dict[str, int] = dataclasses.field(
        default_factory=lambda: dict.fromkeys(GROUP_COUNTERS, 0))


@dataclasses.dataclass
class _Hop:
    qlen_bytes: int                 # of the last record
    speed_bps: int
    utilization: float | None       # of the last span measured
    seen: float                     # monotonic s the last record was seen


class FlowTable:
    """Thread-safe table of flows, per-group aggregates and event counts."""

    def __init__(self, max_flows: int = 4096, peers: Iterable[str] = ("default",),
                 algorithms: Iterable[str] = algorithms_mod.NAMES,
                 int_hop_series: int = 64):
        self._lock = threading.Lock()
        self._flows: dict[int, Flow] = {}
        self._ids = itertools.count(1)
        self._groups: dict[tuple[str, str], _Group] = {}
        self._drops: collections.Counter[tuple[str, str]] = collections.Counter()
        self._hops: collections.OrderedDict[tuple[int, int], _Hop] = collections.OrderedDict()
        # flow id -> hop -> (ts_ns, tx_bytes) of the record its next utilisation
        # span starts at (observe_hop_rec)
        self._hop_prev: dict[int, dict[int, tuple[int, int]]] = {}
        self.refused = 0
        self.configure(max_flows, peers, algorithms, int_hop_series)

    def configure(self, max_flows: int, peers: Iterable[str], algorithms: Iterable[str],
                  int_hop_series: int) -> None:
        """Limits and label values (at start and on reload).  Groups of
        labels no longer configured stay while they have data, so counters
        never go backwards within a process."""
        with self._lock:
            self.max_flows = max_flows
            self.int_hop_series = int_hop_series
            for a in algorithms:
                for p in peers:
                    self._group(a, p)
            while len(self._hops) > int_hop_series:
                self._hops.popitem(last=False)

    def _group(self, algorithm: str, peer: str) -> _Group:
        g = self._groups.get((algorithm, peer))
        if g is None:
            g = self._groups[(algorithm, peer)] = _Group(
                Histogram(RTT_BUCKETS), Histogram(RTT_BUCKETS), Histogram(FCT_BUCKETS))
        return g

    # ---- writers (the components) ----

    def add(self, *, kind: str, role: str, saddr: str, sport: int, daddr: str, dport: int,
            proto: int, peer: str, algorithm: str, component: str,
            **fields: Any) -> Flow:
        """A new flow; raises FlowLimitError when the table is full."""
        if kind not in KINDS or role not in ROLES:
            raise ValueError(f"kind {kind!r} / role {role!r}: expected one of {KINDS} / {ROLES}")
        now = time.monotonic()
        with self._lock:
            if len(self._flows) >= self.max_flows:
                self.refused += 1
                raise FlowLimitError(f"{len(self._flows)} flows: limits.max_flows reached")
            f = Flow(next(self._ids), kind, role, saddr, sport, daddr, dport, proto, peer,
                     algorithm, component, now, time.time(), now)
            self._set(f, fields)
            self._flows[f.id] = f
            self._group(algorithm, peer).started += 1
            return dataclasses.replace(f)

    def update(self, flow_id: int, **fields: Any) -> None:
        """Set a flow's published state (see Flow; counters are per-flow totals)."""
        with self._lock:
            f = self._flows.get(flow_id)
            if f is None:
                raise KeyError(flow_id)
            self._set(f, fields)
            f.updated = time.monotonic()

    def update_from(self, flow_id: int, state: Any, **fields: Any) -> None:
        """update() from a congestion-control object of hpccd.core.cc: its window,
        rate, U, alpha or cw, whichever the algorithm has."""
        d: dict[str, Any] = {}
        if isinstance(state, cc.Hpcc):
            d.update(window_bytes=state.W, U=state.U)
            if not isinstance(state, cc.RxHpcc):
                d["rate_bps"] = state.rate_bps
        elif isinstance(state, cc.Dctcp):
            d.update(window_bytes=state.cwnd, alpha=state.alpha)
        elif isinstance(state, cc.Ldcp):
            d.update(cw_pkts=state.cw)
        d.update(fields)
        self.update(flow_id, **d)

    @staticmethod
    def _set(f: Flow, fields: Mapping[str, Any]) -> None:
        for k, v in fields.items():
            if k not in Flow._SETTABLE:
                raise AttributeError(f"flow field {k!r} cannot be set (settable: "
                                     f"{', '.join(sorted(Flow._SETTABLE))})")
            setattr(f, k, v)

    def observe_rtt(self, flow_id: int, rtt_s: float | None = None,
                    probe_rtt_s: float | None = None) -> None:
        with self._lock:
            f = self._flows.get(flow_id)
            if f is None:
                raise KeyError(flow_id)
            g = self._group(f.algorithm, f.peer)
            if rtt_s is not None:
                f.rtt_s = rtt_s
                g.rtt.observe(rtt_s)
            if probe_rtt_s is not None:
                f.probe_rtt_s = probe_rtt_s
                g.probe_rtt.observe(probe_rtt_s)

    def finish(self, flow_id: int, completed: bool = True, fct_s: float | None = None,
               **fields: Any) -> Flow:
        """Remove a flow.  `completed`: it delivered everything (its age, or
        `fct_s` when the fast path timed it, is a flow completion time);
        False: aborted (reset, timed out, daemon stopping).  Its counters
        stay in its group."""
        with self._lock:
            f = self._flows.pop(flow_id)
            self._hop_prev.pop(flow_id, None)
            self._set(f, fields)
            g = self._group(f.algorithm, f.peer)
            for k in GROUP_COUNTERS:
                g.ended[k] += getattr(f, k)
            if completed:
                g.completed += 1
                g.fct.observe(time.monotonic() - f.started if fct_s is None else fct_s)
            else:
                g.aborted += 1
            return f

    def drop(self, layer: str, cause: str, n: int = 1) -> None:
        """Count `n` packets a component dropped (e.g. ("transport",
        "feedback_tag"): an ACK or NACK whose tag did not verify).  Causes are a
        fixed vocabulary of the component: label values."""
        with self._lock:
            self._drops[(layer, cause)] += n

    def observe_hop(self, path_id: int, hop: int, raw: bytes,
                    prev: bytes | None = None) -> None:
        """An INT hop record as it sat in a packet (8 bytes, docs/wire-format.md):
        its queue; with `prev`, the same hop's record of an earlier response
        of the same flow, the link's utilisation over the pair, the narrow
        counters unwrapped by modular difference (the producer keeps the
        pair at least UTIL_SPAN_NS and less than half a ts wrap apart:
        tcp_side's engine, util_anchor).  Without a pair, or a pair not in
        order, the hop keeps its last figure."""
        f = cc.hop_unpack(raw)
        speed = cc.speed_mbps(f["speed_code"]) * 1_000_000
        key = (path_id, hop)
        with self._lock:
            if self.int_hop_series <= 0:
                return
            old = self._hops.pop(key, None)
            util = old.utilization if old is not None and old.speed_bps == speed else None
            if prev is not None and speed:
                p = cc.hop_unpack(prev)
                dt = (f["ts"] - p["ts"]) % _TS_MOD
                if p["speed_code"] == f["speed_code"] and 0 < dt < _TS_MOD // 2:
                    util = ((f["tx_units"] - p["tx_units"]) * 128 % _TX_MOD) * 8e9 / dt / speed
            self._hops[key] = _Hop(f["qlen_units"] * 80, speed, util, time.monotonic())
            while len(self._hops) > self.int_hop_series:
                self._hops.popitem(last=False)

    def observe_hop_rec(self, flow_id: int, path_id: int, hop: int, ts_ns: int,
                        tx_bytes: int, qlen_bytes: int, bw_bps: int) -> None:
        """An INT hop as a flow's HPCC core holds it (the native engines:
        decoded, the narrow counters unwrapped per flow, struct
        hpccd_int_rec): its queue, and the link's utilisation over at least
        UTIL_SPAN_NS since the same flow's record its span started at (the
        engines are read every poll, so the modular difference of observe_hop
        would be ambiguous after a ts wrap, 16.7 ms; the unwrapped counters
        are not).  Counters behind that record (the core started the path
        again) start a new span without a figure."""
        now = time.monotonic()
        key = (path_id, hop)
        with self._lock:
            if self.int_hop_series <= 0 or flow_id not in self._flows:
                return
            prev = self._hop_prev.setdefault(flow_id, {}).get(hop)
            old = self._hops.pop(key, None)
            util, anchor = None, (ts_ns, tx_bytes)
            if prev is not None and bw_bps:
                if ts_ns - prev[0] >= UTIL_SPAN_NS and tx_bytes >= prev[1]:
                    util = (tx_bytes - prev[1]) * 8e9 / (ts_ns - prev[0]) / bw_bps
                elif prev[0] <= ts_ns and prev[1] <= tx_bytes:
                    anchor = prev                   # too soon: the span goes on
                    util = old.utilization if old is not None else None
            self._hop_prev[flow_id][hop] = anchor
            self._hops[key] = _Hop(qlen_bytes, bw_bps, util, now)
            while len(self._hops) > self.int_hop_series:
                self._hops.popitem(last=False)

    # ---- readers (control socket, metrics) ----

    def get(self, flow_id: int) -> Flow | None:
        with self._lock:
            f = self._flows.get(flow_id)
            return dataclasses.replace(f, extra=dict(f.extra)) if f else None

    def snapshot(self) -> list[Flow]:
        with self._lock:
            return [dataclasses.replace(f, extra=dict(f.extra)) for f in self._flows.values()]

    def __len__(self) -> int:
        with self._lock:
            return len(self._flows)

    def groups(self) -> dict[tuple[str, str], dict[str, Any]]:
        """Per (algorithm, peer): live aggregates and counters, copied."""
        with self._lock:
            out: dict[tuple[str, str], dict[str, Any]] = {}
            for key, g in self._groups.items():
                out[key] = {"flows": collections.Counter(), "window_bytes": 0.0,
                            "window_max_bytes": 0.0, "rate_bps": 0.0, "inflight_bytes": 0,
                            "U": [], "alpha": [], "cw_pkts": 0.0,
                            "counters": dict(g.ended), "started": g.started,
                            "completed": g.completed, "aborted": g.aborted,
                            "rtt": g.rtt.copy(), "probe_rtt": g.probe_rtt.copy(),
                            "fct": g.fct.copy()}
            for f in self._flows.values():
                a = out[(f.algorithm, f.peer)]
                a["flows"][f.kind] += 1
                a["window_bytes"] += f.window_bytes
                a["window_max_bytes"] = max(a["window_max_bytes"], f.window_bytes)
                a["rate_bps"] += f.rate_bps
                a["inflight_bytes"] += f.inflight_bytes
                if f.U is not None:
                    a["U"].append(f.U)
                if f.alpha is not None:
                    a["alpha"].append(f.alpha)
                if f.cw_pkts is not None:
                    a["cw_pkts"] += f.cw_pkts
                for k in GROUP_COUNTERS:
                    a["counters"][k] += getattr(f, k)
            return out

    def drops(self) -> dict[tuple[str, str], int]:
        with self._lock:
            return dict(self._drops)

    def hops(self) -> dict[tuple[int, int], dict[str, Any]]:
        with self._lock:
            return {k: {"qlen_bytes": h.qlen_bytes, "speed_bps": h.speed_bps,
                        "utilization": h.utilization, "age_s": time.monotonic() - h.seen}
                    for k, h in self._hops.items()}

    def top(self, k: int) -> list[Flow]:
        """The `k` flows with the highest pacing rate (then window)."""
        if k <= 0:
            return []
        with self._lock:
            fl = sorted(self._flows.values(), key=lambda f: (f.rate_bps, f.window_bytes, -f.id),
                        reverse=True)[:k]
            return [dataclasses.replace(f, extra=dict(f.extra)) for f in fl]
