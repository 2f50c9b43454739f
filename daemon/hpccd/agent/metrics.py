"""Prometheus exporter of the daemon (docs/metrics.md lists every metric).

One custom collector, :class:`HpccdCollector`, computes everything at
scrape time from the daemon's state: the flow table (hpccd.agent.flows), the BPF
programs' counter maps of every attached interface, the attachments as the
kernel reports them, and the daemon's own bookkeeping.  Nothing is pushed
into client_python metric objects from the fast path, so there is one
source of truth per number and a scrape costs a few map reads.

Conventions: one prefix (``hpccd_``), base units in the name (``_bytes``,
``_seconds``, ``_ratio``), ``_total`` on counters.  Labels are bounded:
``algorithm`` (4 values), ``peer`` (the ``[[peers]]`` names of the
configuration and ``default``), ``interface`` (configured interfaces),
``slot``/``cause`` (fixed vocabularies), ``path_id``/``hop`` (at most
``metrics.int_hop_series`` pairs).  Per-flow series (``flow_id``) exist only
for the opt-in top-K (``metrics.top_flows``, at most 50).  Label sets of the
per-group counters are all emitted from the start (zero), so rates work from
the first scrape.

:data:`METRICS` is the specification: name as exposed, type, labels, help.
The collector emits nothing else (a test checks it), docs/metrics.md and the
Grafana dashboard are checked against it.
"""
from __future__ import annotations

import bisect
import contextlib
import os
import socket
import logging
from typing import Any, Iterator, NamedTuple

from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                    HistogramMetricFamily)
from prometheus_client.registry import Collector, CollectorRegistry

from .. import __version__
from ..bpf import loader as bpf, counters as bpf_counters

__all__ = ["Metric", "METRICS", "HpccdCollector", "make_registry", "serve", "exposed_names"]

log = logging.getLogger("hpccd.agent.metrics")

G = ("algorithm", "peer")


class Metric(NamedTuple):
    name: str              # as exposed (counters with _total; histograms without suffix)
    type: str              # counter | gauge | histogram
    labels: tuple[str, ...]
    help: str


METRICS: tuple[Metric, ...] = (
    # -- the daemon --
    Metric("hpccd_build_info", "gauge", ("version",), "Always 1; the daemon's version."),
    Metric("hpccd_start_time_seconds", "gauge", (), "Unix time the daemon started."),
    Metric("hpccd_config_reloads_total", "counter", ("result",),
           "Configuration reloads (SIGHUP, an accepted hpccctl set), by result: ok or error."),
    Metric("hpccd_config_last_reload_successful", "gauge", (),
           "1 if the last reload was applied, 0 if it was refused (the old configuration runs)."),
    Metric("hpccd_config_last_reload_timestamp_seconds", "gauge", (),
           "Unix time of the last reload attempt (the start when none)."),
    Metric("hpccd_component_up", "gauge", ("component",),
           "1 while a flow-manager component is started and healthy."),
    Metric("hpccd_engine_flows", "gauge", ("interface", "queue", "role"),
           "Native flows on each transport engine (one per rx queue): sender flows "
           "running, receiver flows not yet done."),
    Metric("hpccd_program_attached", "gauge", ("interface", "program"),
           "1 if the kernel reports the daemon's program attached (xdp_host, tc_tracker)."),
    Metric("hpccd_control_requests_total", "counter", ("command", "result"),
           "Requests on the control socket, by command and result (ok, error)."),
    Metric("hpccd_collector_errors_total", "counter", ("source",),
           "Scrape-time reads that failed (a BPF map, the kernel's attachment state)."),
    # -- flows, per algorithm and peer --
    Metric("hpccd_flows", "gauge", ("algorithm", "peer", "kind"),
           "Active flows; kind native (AF_XDP transport) or tcp (kernel TCP, TCP-side)."),
    Metric("hpccd_flows_started_total", "counter", G, "Flows started."),
    Metric("hpccd_flows_completed_total", "counter", G,
           "Flows that completed (their age is a flow completion time)."),
    Metric("hpccd_flows_aborted_total", "counter", G, "Flows that ended without completing."),
    Metric("hpccd_flows_refused_total", "counter", (),
           "Flows refused because limits.max_flows was reached."),
    Metric("hpccd_window_bytes", "gauge", G,
           "Sum of the active flows' windows: W (HPCC, Rx-HPCC), cwnd (DCTCP)."),
    Metric("hpccd_window_max_bytes", "gauge", G, "Largest window of an active flow."),
    Metric("hpccd_inflight_bytes", "gauge", G, "Sum of the active flows' bytes in flight."),
    Metric("hpccd_pacing_rate_bytes_per_second", "gauge", G,
           "Sum of the active flows' pacing rates (HPCC: R = W / T)."),
    Metric("hpccd_utilization_ratio", "gauge", G,
           "Mean of the active HPCC flows' U (normalised inflight of the most loaded hop)."),
    Metric("hpccd_alpha_ratio", "gauge", G, "Mean of the active DCTCP flows' alpha."),
    Metric("hpccd_cw_packets", "gauge", G, "Sum of the active LDCP flows' cw (packets)."),
    Metric("hpccd_rtt_seconds", "histogram", G, "Round-trip time samples of the flows."),
    Metric("hpccd_probe_rtt_seconds", "histogram", G,
           "Probe round-trip times (probe to PROBE_RESP, [HPCC++2022] section 6.2.1)."),
    Metric("hpccd_flow_completion_seconds", "histogram", G, "Flow completion times."),
    Metric("hpccd_sent_bytes_total", "counter", G,
           "Frame bytes sent (headers, INT room and retransmissions included): the flows' wire bytes."),
    Metric("hpccd_sent_payload_bytes_total", "counter", G,
           "Payload bytes sent, first transmissions only (the highest byte sent)."),
    Metric("hpccd_acked_bytes_total", "counter", G, "Payload bytes acknowledged."),
    Metric("hpccd_retransmitted_packets_total", "counter", G, "Packets retransmitted."),
    Metric("hpccd_retransmitted_bytes_total", "counter", G, "Frame bytes retransmitted."),
    Metric("hpccd_probes_sent_total", "counter", G, "Probes sent (one per RTT while data is in flight)."),
    Metric("hpccd_probes_answered_total", "counter", G, "Probes whose response arrived."),
    Metric("hpccd_probes_lost_total", "counter", G,
           "Probes without a response within probes.timeout_us."),
    Metric("hpccd_notify_sent_total", "counter", G, "ACKs/NACKs sent with an Rx-HPCC window (receiver)."),
    Metric("hpccd_notify_received_total", "counter", G,
           "Rx-HPCC windows applied from ACKs/NACKs (sender; tag verified)."),
    Metric("hpccd_drops_total", "counter", ("layer", "cause"),
           "Packets dropped, by layer (xdp, transport, tcp_side) and cause."),
    # -- INT, per path and hop --
    Metric("hpccd_int_hop_queue_bytes", "gauge", ("path_id", "hop"),
           "Queue length of the last INT record seen for a (pathID, hop)."),
    Metric("hpccd_int_hop_utilization_ratio", "gauge", ("path_id", "hop"),
           "Transmit rate over link speed of a (pathID, hop), over at least 1 ms of the "
           "hop's clock between INT records."),
    # -- BPF programs --
    Metric("hpccd_bpf_xdp_packets_total", "counter", ("interface", "slot", "verdict"),
           "Frames seen by xdp_host, by counter slot (every frame in exactly one)."),
    Metric("hpccd_bpf_xdp_bytes_total", "counter", ("interface", "slot", "verdict"),
           "Frame bytes seen by xdp_host, by counter slot."),
    Metric("hpccd_bpf_tc_packets_total", "counter", ("interface", "slot"),
           "Packets seen by tc_tracker on egress, by counter slot."),
    Metric("hpccd_bpf_tc_bytes_total", "counter", ("interface", "slot"),
           "Bytes seen by tc_tracker on egress, by counter slot."),
    Metric("hpccd_tcp_tracked_flows", "gauge", ("interface",),
           "Entries of the tc tracker's kernel TCP flow table (LRU)."),
    # -- TCP side: the probe engine and the struct_ops "hpcc" CC --
    Metric("hpccd_tcp_probe_lateness_seconds", "histogram", (),
           "From the event that allowed a TCP-side probe (response received, data of a "
           "parked flow sent) to the probe's send."),
    Metric("hpccd_tcp_pacer_lateness_seconds", "histogram", (),
           "How late the kernel's TCP pacing timer fired (every paced TCP flow of the host; "
           "a train shorter on the wire than twice this loses the rest)."),
    Metric("hpccd_tcp_probe_chain_rtt_seconds_total", "counter", (),
           "Sum of the kernel srtt over probes that followed a response: over "
           "hpccd_tcp_probe_chain_interval_seconds_total, probes per RTT."),
    Metric("hpccd_tcp_probe_chain_interval_seconds_total", "counter", (),
           "Sum of the intervals between probes that followed a response."),
    Metric("hpccd_tcp_probes_per_round_trip_ratio", "gauge", (),
           "Probes per kernel RTT while data was in flight, since the start."),
    Metric("hpccd_tcp_probe_engine_wakeups_total", "counter", (),
           "Times the TCP-side probe engine woke (ring records, timers)."),
    Metric("hpccd_tcp_probe_engine_expired_waits_total", "counter", (),
           "The probe engine's waits that ended by their timeout."),
    Metric("hpccd_tcp_probe_engine_wait_lateness_seconds_total", "counter", (),
           "How late those waits returned, summed."),
    Metric("hpccd_tcp_probe_engine_wake_lead_seconds", "gauge", (),
           "How much earlier than due the probe engine arms its probe-gap timers."),
    Metric("hpccd_tcp_pacing_rate_shared_total", "counter", (),
           "Windows whose pacing rate the flows of one path shared (tcp_side.path_rate_shared)."),
    Metric("hpccd_tcp_pacing_rate_lent_total", "counter", (),
           "Windows whose pacing rate went above the flow's part of its path's rate, lent by "
           "the path's other flows (tcp_side.path_rate_work_conserving)."),
    Metric("hpccd_tcp_pacing_asked_bits_total", "counter", (),
           "Bits the pacing rates the probe engine wrote for the hpcc CC's flows allowed, "
           "over the intervals between their responses (what HPCC asked for)."),
    Metric("hpccd_tcp_pacing_acked_bits_total", "counter", (),
           "Bits those flows had acked over the same intervals: over the asked bits, what "
           "the kernel's pacer and the hosts sent of HPCC's rates."),
    Metric("hpccd_tcp_pacing_gain_updates_total", "counter", ("by",),
           "Responses that moved a flow's pacing gain (tcp_side.pace_gain_max): by loss, "
           "towards what the pacer lost of HPCC's rate; by queue, halved by a queue on the "
           "path."),
    Metric("hpccd_tcp_cc_acks_total", "counter", ("mode",),
           "ACKs the struct_ops hpcc CC handled, by mode (hpcc, winit, and the Reno "
           "fallback's fb_stale, fb_no_entry, fb_no_daemon)."),
    Metric("hpccd_tcp_cc_fallbacks_total", "counter", (),
           "Times a flow of the hpcc CC entered the Reno fallback."),
    Metric("hpccd_tcp_cc_limited_acks_total", "counter", ("by",),
           "HPCC-mode ACKs of the hpcc CC by what held the flow back as they came (cwnd: its "
           "whole cwnd in flight; pacing: next send due later; app; tsq; timer: its pacing "
           "timer armed past its due time); the rest of hpcc's ACKs: none of them."),
    # -- opt-in top-K per flow --
    Metric("hpccd_top_flow_window_bytes", "gauge", ("flow_id", "algorithm", "peer"),
           "Window of the metrics.top_flows fastest flows (absent unless configured)."),
    Metric("hpccd_top_flow_pacing_rate_bytes_per_second", "gauge", ("flow_id", "algorithm", "peer"),
           "Pacing rate of the metrics.top_flows fastest flows."),
    Metric("hpccd_top_flow_rtt_seconds", "gauge", ("flow_id", "algorithm", "peer"),
           "Last RTT sample of the metrics.top_flows fastest flows."),
)

# Families the TCP side's probe engine exports: present only while a
# tcp_side component runs (docs/metrics.md says so in their rows).
TCP_SIDE_ONLY = frozenset({
    "hpccd_tcp_probe_lateness_seconds", "hpccd_tcp_probe_chain_rtt_seconds_total",
    "hpccd_tcp_probe_chain_interval_seconds_total", "hpccd_tcp_probes_per_round_trip_ratio",
    "hpccd_tcp_probe_engine_wakeups_total", "hpccd_tcp_probe_engine_expired_waits_total",
    "hpccd_tcp_probe_engine_wait_lateness_seconds_total",
    "hpccd_tcp_probe_engine_wake_lead_seconds", "hpccd_tcp_cc_acks_total",
    "hpccd_tcp_cc_fallbacks_total", "hpccd_tcp_pacing_rate_shared_total",
    "hpccd_tcp_pacing_rate_lent_total", "hpccd_tcp_cc_limited_acks_total",
    "hpccd_tcp_pacing_gain_updates_total", "hpccd_tcp_pacer_lateness_seconds",
    "hpccd_tcp_pacing_asked_bits_total", "hpccd_tcp_pacing_acked_bits_total"})

_BY_NAME = {m.name: m for m in METRICS}

# hpccd_tcp_pacer_lateness_seconds' bounds: the pacer's 1 us buckets
# (hpccd.tcp_side.pacer) gathered where a train's size changes at 1 Gbit/s
# and beyond; the last, 127 us, is where the program's own span ends.
PACER_BUCKETS = (5e-6, 10e-6, 15e-6, 20e-6, 30e-6, 40e-6, 50e-6, 75e-6, 100e-6, 127e-6)


def _pacer_hist(late):
    """A hpccd.tcp_side.pacer.Lateness as the exporter's Histogram: each 1 us
    bucket [i, i + 1) us counted under the first bound at or past its end
    (the program's last bucket, 127 us and later, under +Inf)."""
    from .flows import Histogram
    from ..tcp_side.pacer import BUCKET_NS
    h = Histogram(PACER_BUCKETS)
    last = len(late.buckets) - 1
    for i, c in enumerate(late.buckets):
        j = (len(PACER_BUCKETS) if i == last
             else bisect.bisect_left(PACER_BUCKETS, (i + 1) * BUCKET_NS / 1e9 - 1e-12))
        h.counts[j] += c
    h.sum, h.count = late.sum_ns / 1e9, late.n
    return h


def exposed_names() -> set[str]:
    """Every sample name the exporter can expose (histogram and counter
    suffixes included)."""
    out = set()
    for m in METRICS:
        if m.type == "histogram":
            out.update(m.name + s for s in ("_bucket", "_sum", "_count"))
        else:
            out.add(m.name)
    return out


class _Families:
    """Metric families built from METRICS, filled by name."""

    def __init__(self):
        self.f: dict[str, Any] = {}
        for m in METRICS:
            if m.type == "counter":
                fam = CounterMetricFamily(m.name[:-len("_total")], m.help, labels=m.labels)
            elif m.type == "gauge":
                fam = GaugeMetricFamily(m.name, m.help, labels=m.labels)
            else:
                fam = HistogramMetricFamily(m.name, m.help, labels=m.labels)
            self.f[m.name] = fam

    def add(self, name: str, labels: tuple, value: float) -> None:
        self.f[name].add_metric([str(x) for x in labels], value)

    def hist(self, name: str, labels: tuple, h) -> None:
        self.f[name].add_metric([str(x) for x in labels], h.cumulative(), h.sum)


class HpccdCollector(Collector):
    """Reads ``state`` at scrape time.  ``state`` is the daemon (or a test's
    stand-in) with: ``config`` (hpccd.agent.config.Config), ``flows``
    (hpccd.agent.flows.FlowTable), ``interfaces`` (name -> AttachedInterface),
    ``components`` (name -> Component), ``started_wall``, ``reloads`` (dict
    result -> count), ``last_reload`` ((unix time, ok)), ``control_requests``
    (Counter of (command, result))."""

    def __init__(self, state: Any):
        self.state = state
        self._errors: dict[str, int] = {"bpf_map": 0, "attachment": 0}

    def describe(self) -> Iterator[Any]:
        return iter(_Families().f.values())

    def collect(self) -> Iterator[Any]:
        s = self.state
        fam = _Families()
        fam.add("hpccd_build_info", (__version__,), 1)
        fam.add("hpccd_start_time_seconds", (), s.started_wall)
        for result in ("ok", "error"):
            fam.add("hpccd_config_reloads_total", (result,), s.reloads.get(result, 0))
        when, ok = s.last_reload
        fam.add("hpccd_config_last_reload_successful", (), 1 if ok else 0)
        fam.add("hpccd_config_last_reload_timestamp_seconds", (), when)
        for name, comp in s.components.items():
            try:
                up = comp.healthy()
            except Exception:                      # a component's bug is not the exporter's
                up = False
            fam.add("hpccd_component_up", (name,), 1 if up else 0)
            if hasattr(comp, "engines_info"):
                try:
                    for itf, q, senders, receivers in comp.engines_info():
                        fam.add("hpccd_engine_flows", (itf, str(q), "sender"), senders)
                        fam.add("hpccd_engine_flows", (itf, str(q), "receiver"), receivers)
                except Exception:
                    self._errors["engines"] = self._errors.get("engines", 0) + 1
            if hasattr(comp, "probe_metrics"):
                try:
                    self._tcp_probe(fam, comp.probe_metrics())
                except Exception:
                    self._errors["tcp_side"] = self._errors.get("tcp_side", 0) + 1
        for (cmd, result), n in sorted(s.control_requests.items()):
            fam.add("hpccd_control_requests_total", (cmd, result), n)

        drops = self._flows(fam, s)
        self._bpf(fam, s, drops)
        for src, n in self._errors.items():
            fam.add("hpccd_collector_errors_total", (src,), n)
        return iter(fam.f.values())

    @staticmethod
    def _tcp_probe(fam: _Families, m: dict | None) -> None:
        # every family here is in TCP_SIDE_ONLY: absent while no TCP side runs
        """The TCP-side probe engine's figures (tcp_side.TcpSideComponent.probe_metrics)."""
        if not m:
            return
        st = m["stats"]
        from .flows import Histogram
        from ..tcp_side.engine import LATENESS_BUCKETS
        h = Histogram(LATENESS_BUCKETS)
        h.counts, h.sum, h.count = list(st["late_hist"]), st["late_sum_ns"] / 1e9, st["late_n"]
        fam.hist("hpccd_tcp_probe_lateness_seconds", (), h)
        if m.get("pacer") is not None:
            fam.hist("hpccd_tcp_pacer_lateness_seconds", (), _pacer_hist(m["pacer"]))
        fam.add("hpccd_tcp_probe_chain_rtt_seconds_total", (), st["chain_rtt_ns"] / 1e9)
        fam.add("hpccd_tcp_probe_chain_interval_seconds_total", (), st["chain_interval_ns"] / 1e9)
        if st["chain_interval_ns"]:
            fam.add("hpccd_tcp_probes_per_round_trip_ratio", (),
                    st["chain_rtt_ns"] / st["chain_interval_ns"])
        fam.add("hpccd_tcp_probe_engine_wakeups_total", (), st["wakeups"])
        fam.add("hpccd_tcp_probe_engine_expired_waits_total", (), st["wake_late_n"])
        fam.add("hpccd_tcp_probe_engine_wait_lateness_seconds_total", (),
                st["wake_late_sum_ns"] / 1e9)
        fam.add("hpccd_tcp_probe_engine_wake_lead_seconds", (), st["wake_lead_ns"] / 1e9)
        fam.add("hpccd_tcp_pacing_rate_shared_total", (), st["rate_shared"])
        fam.add("hpccd_tcp_pacing_rate_lent_total", (), st["rate_lent"])
        fam.add("hpccd_tcp_pacing_asked_bits_total", (), st["pace_want_bits"])
        fam.add("hpccd_tcp_pacing_acked_bits_total", (), st["pace_acked_bits"])
        fam.add("hpccd_tcp_pacing_gain_updates_total", ("loss",), st["pace_fed"])
        fam.add("hpccd_tcp_pacing_gain_updates_total", ("queue",), st["pace_lowered"])
        modes = {"used_hpcc": "hpcc", "used_winit": "winit", "fb_stale": "fb_stale",
                 "fb_no_entry": "fb_no_entry", "fb_no_daemon": "fb_no_daemon"}
        for slot, mode in modes.items():
            fam.add("hpccd_tcp_cc_acks_total", (mode,), m["cc"].get(slot, (0, 0))[0])
        fam.add("hpccd_tcp_cc_fallbacks_total", (), m["cc"].get("enter_fallback", (0, 0))[0])
        for by in ("cwnd", "pacing", "app", "tsq", "timer"):
            fam.add("hpccd_tcp_cc_limited_acks_total", (by,),
                    m["cc"].get("lim_" + by, (0, 0))[0])

    def _flows(self, fam: _Families, s: Any) -> dict[tuple[str, str], int]:
        groups = s.flows.groups()
        for (algo, peer), g in sorted(groups.items()):
            lb = (algo, peer)
            for kind in ("native", "tcp"):
                fam.add("hpccd_flows", (algo, peer, kind), g["flows"][kind])
            fam.add("hpccd_flows_started_total", lb, g["started"])
            fam.add("hpccd_flows_completed_total", lb, g["completed"])
            fam.add("hpccd_flows_aborted_total", lb, g["aborted"])
            fam.add("hpccd_window_bytes", lb, g["window_bytes"])
            fam.add("hpccd_window_max_bytes", lb, g["window_max_bytes"])
            fam.add("hpccd_inflight_bytes", lb, g["inflight_bytes"])
            fam.add("hpccd_pacing_rate_bytes_per_second", lb, g["rate_bps"] / 8)
            if g["U"]:
                fam.add("hpccd_utilization_ratio", lb, sum(g["U"]) / len(g["U"]))
            if g["alpha"]:
                fam.add("hpccd_alpha_ratio", lb, sum(g["alpha"]) / len(g["alpha"]))
            if algo == "ldcp":
                fam.add("hpccd_cw_packets", lb, g["cw_pkts"])
            fam.hist("hpccd_rtt_seconds", lb, g["rtt"])
            fam.hist("hpccd_probe_rtt_seconds", lb, g["probe_rtt"])
            fam.hist("hpccd_flow_completion_seconds", lb, g["fct"])
            c = g["counters"]
            fam.add("hpccd_sent_bytes_total", lb, c["bytes_sent"])
            fam.add("hpccd_sent_payload_bytes_total", lb, c["payload_sent"])
            fam.add("hpccd_acked_bytes_total", lb, c["bytes_acked"])
            fam.add("hpccd_retransmitted_packets_total", lb, c["retx_packets"])
            fam.add("hpccd_retransmitted_bytes_total", lb, c["retx_bytes"])
            fam.add("hpccd_probes_sent_total", lb, c["probes_sent"])
            fam.add("hpccd_probes_answered_total", lb, c["probes_answered"])
            fam.add("hpccd_probes_lost_total", lb, c["probes_lost"])
            fam.add("hpccd_notify_sent_total", lb, c["notify_sent"])
            fam.add("hpccd_notify_received_total", lb, c["notify_received"])
        fam.add("hpccd_flows_refused_total", (), s.flows.refused)
        for (path_id, hop), h in sorted(s.flows.hops().items()):
            lb = (f"0x{path_id:03x}", hop)
            fam.add("hpccd_int_hop_queue_bytes", lb, h["qlen_bytes"])
            if h["utilization"] is not None:
                fam.add("hpccd_int_hop_utilization_ratio", lb, h["utilization"])
        for f in s.flows.top(s.config.top_flows):
            lb = (f.id, f.algorithm, f.peer)
            fam.add("hpccd_top_flow_window_bytes", lb, f.window_bytes)
            fam.add("hpccd_top_flow_pacing_rate_bytes_per_second", lb, f.rate_bps / 8)
            if f.rtt_s is not None:
                fam.add("hpccd_top_flow_rtt_seconds", lb, f.rtt_s)
        drops = dict(s.flows.drops())
        for slot in bpf_counters.XDP_SLOTS:            # zero from the start
            if slot.drop:
                drops.setdefault(("xdp", slot.name), 0)
        return drops

    def _bpf(self, fam: _Families, s: Any, drops: dict[tuple[str, str], int]) -> None:
        for name, itf in sorted(s.interfaces.items()):
            try:
                with _netns(s):
                    xdp_id = bpf.xdp_query(itf.ifindex)
                    tc_id = bpf.tc_query(itf.ifindex, "egress") if itf.tc is not None else None
                xdp_ok = xdp_id is not None and xdp_id == itf.xdp.program("hpccd_xdp_host").id
                tc_ok = (tc_id is not None and itf.tc is not None
                         and tc_id == itf.tc.program("hpccd_tc_tracker").id)
                fam.add("hpccd_program_attached", (name, "xdp_host"), int(xdp_ok))
                if itf.tc is not None:
                    fam.add("hpccd_program_attached", (name, "tc_tracker"), int(tc_ok))
            except (OSError, ValueError) as e:
                self._errors["attachment"] += 1
                log.warning("metrics: attachment state of %s: %s", name, e)
            try:
                for slot, (p, b) in zip(bpf_counters.XDP_SLOTS,
                                        bpf_counters.read(itf.xdp.map("hpccd_xdp_cnt"))):
                    fam.add("hpccd_bpf_xdp_packets_total", (name, slot.name, slot.verdict), p)
                    fam.add("hpccd_bpf_xdp_bytes_total", (name, slot.name, slot.verdict), b)
                    if slot.drop:
                        drops[("xdp", slot.name)] = drops.get(("xdp", slot.name), 0) + p
                if itf.tc is not None:
                    for slot, (p, b) in zip(bpf_counters.TC_SLOTS,
                                            bpf_counters.read(itf.tc.map("hpccd_tc_cnt"))):
                        fam.add("hpccd_bpf_tc_packets_total", (name, slot.name), p)
                        fam.add("hpccd_bpf_tc_bytes_total", (name, slot.name), b)
                    n = sum(1 for _ in itf.tc.map("hpccd_tcp_flows").keys())
                    fam.add("hpccd_tcp_tracked_flows", (name,), n)
            except OSError as e:
                self._errors["bpf_map"] += 1
                log.warning("metrics: counters of %s: %s", name, e)
        for (layer, cause), n in sorted(drops.items()):
            fam.add("hpccd_drops_total", (layer, cause), n)


def _netns(s: Any):
    """The daemon's network namespace for netlink queries from this thread
    (threads inherit the process's namespace; a state may name another)."""
    ns = getattr(s, "netns", None)
    return bpf.in_netns(ns) if ns else contextlib.nullcontext()


def make_registry(state: Any, process: bool = True) -> CollectorRegistry:
    """A registry with the daemon's collector (and the standard process_*
    metrics of client_python's ProcessCollector)."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(HpccdCollector(state))
    if process:
        from prometheus_client import ProcessCollector

        ProcessCollector(registry=reg)
    return reg


def serve(address: str, registry: CollectorRegistry):
    """Start the HTTP exporter on HOST:PORT; returns (server, thread).
    ``server.shutdown(); server.server_close()`` stops it.

    Built here from client_python's WSGI app rather than with its
    ``start_http_server``, which returns the server only from 0.17 on:
    Debian 12's python3-prometheus-client is 0.16.  Every value is read
    when scraped (HpccdCollector); the thread sleeps until a connection
    comes or shutdown() writes to its pipe: socketserver's serve_forever
    woke twice a second to look for a shutdown (issue 19: an idle daemon's
    cost must not grow with time)."""
    import selectors
    import socketserver
    import threading
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    from prometheus_client import make_wsgi_app

    host, _, port = address.rpartition(":")
    host = host.strip("[]")

    class Server(socketserver.ThreadingMixIn, WSGIServer):
        daemon_threads = True
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        _wake: tuple[int, int] | None = None
        _thread: threading.Thread | None = None

        def serve_until_shutdown(self) -> None:
            _name_thread("hpccd-metrics")
            with selectors.DefaultSelector() as sel:
                sel.register(self, selectors.EVENT_READ)
                sel.register(self._wake[0], selectors.EVENT_READ)
                while True:
                    ready = [k.fileobj for k, _ in sel.select()]
                    if self._wake[0] in ready:
                        return
                    self._handle_request_noblock()

        def shutdown(self) -> None:
            if self._wake is not None and self._thread is not None:
                os.write(self._wake[1], b"x")
                self._thread.join()
                self._thread = None

        def server_close(self) -> None:
            super().server_close()
            wake, self._wake = self._wake, None
            for fd in wake or ():
                os.close(fd)

    class Quiet(WSGIRequestHandler):
        def log_message(self, format, *args):      # noqa: A002 (the base's name)
            pass

    server = make_server(host, int(port), make_wsgi_app(registry), Server,
                         handler_class=Quiet)
    server._wake = os.pipe2(os.O_CLOEXEC)
    thread = threading.Thread(target=server.serve_until_shutdown, name="hpccd-metrics",
                              daemon=True)
    server._thread = thread
    thread.start()
    return server, thread


def _name_thread(name: str) -> None:
    """The calling thread's name as the kernel shows it (/proc/PID/task/TID/comm,
    top -H, the idle benchmark's per-thread figures); Python names its threads
    for itself only."""
    with contextlib.suppress(OSError):
        with open("/proc/thread-self/comm", "w") as f:
            f.write(name[:15])


def scrape_text(registry: CollectorRegistry) -> str:
    """The exposition text of a registry (tests, hpccctl)."""
    from prometheus_client import generate_latest

    return generate_latest(registry).decode()

