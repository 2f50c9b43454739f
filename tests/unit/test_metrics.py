"""The Prometheus exporter (hpccd.agent.metrics), the flow table it reads
(hpccd.agent.flows), docs/metrics.md and the Grafana dashboard.

Invariants protected:
- the collector emits exactly the metrics of its METRICS table, with the
  declared types and labels, and docs/metrics.md lists exactly those;
- names follow the conventions (hpccd_ prefix, _total on counters and only
  on them, a base unit where a unit applies);
- label cardinality: per (algorithm, peer) groups only, no flow id outside
  the opt-in top-K, which is bounded by its setting;
- counters of a group never go backwards when flows finish;
- every expression of grafana/hpccd-dashboard.json names only metrics the
  exporter defines, and the dashboard has what Grafana needs to load it.
"""
from __future__ import annotations

import collections
import json
import pathlib
import re
import time
import types

import pytest
from prometheus_client.parser import text_string_to_metric_families

from hpccd.core import cc
from hpccd.agent import config, metrics
from hpccd.agent.flows import FlowLimitError, FlowTable

ROOT = pathlib.Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "grafana" / "hpccd-dashboard.json"
DOC = ROOT / "docs" / "metrics.md"

CFG = config.loads("""\
[[interfaces]]
name = "eth0"
[metrics]
top_flows = 2
[[peers]]
name = "rack2"
prefix = "10.0.2.0/24"
algorithm = "dctcp"
dctcp_endpoint = true
""")


def _state(cfg=CFG, flows=None):
    if flows is None:
        flows = FlowTable(cfg.max_flows, cfg.peer_names, config.ALGORITHMS,
                          cfg.int_hop_series)
    return types.SimpleNamespace(
        config=cfg, flows=flows, interfaces={}, components={}, started_wall=time.time(),
        reloads=collections.Counter(ok=1), last_reload=(time.time(), True),
        control_requests=collections.Counter({("status", "ok"): 3}))


def _add(ft: FlowTable, cfg, daddr: str, kind="native", **kw):
    pol = cfg.policy(daddr)
    return ft.add(kind=kind, role="sender", saddr="10.0.0.1", sport=40000, daddr=daddr,
                  dport=18471, proto=17, peer=pol.peer, algorithm=pol.algorithm,
                  component="test", **kw)


def _scrape(state) -> dict[str, list]:
    reg = metrics.make_registry(state, process=False)
    text = metrics.scrape_text(reg)
    out: dict[str, list] = collections.defaultdict(list)
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[s.name].append((s.labels, s.value))
    return out


def test_metric_names_follow_the_conventions():
    units = ("_bytes", "_seconds", "_ratio", "_packets", "_bytes_per_second")
    for m in metrics.METRICS:
        assert m.name.startswith("hpccd_"), m.name
        assert re.fullmatch(r"[a-z_]+", m.name), m.name
        assert (m.type == "counter") == m.name.endswith("_total"), m.name
        base = m.name[:-len("_total")] if m.type == "counter" else m.name
        if any(w in base for w in ("window", "queue", "inflight", "rate_bytes")):
            assert base.endswith(units), f"{m.name}: no base unit"
        if "rtt" in base or "completion" in base or "time" in base:
            assert base.endswith("_seconds"), m.name
        assert "flow_id" not in m.labels or m.name.startswith("hpccd_top_flow_"), m.name
    assert len({m.name for m in metrics.METRICS}) == len(metrics.METRICS)


def test_collector_emits_exactly_the_declared_metrics():
    ft = FlowTable(CFG.max_flows, CFG.peer_names, config.ALGORITHMS, 8)
    state = _state(flows=ft)
    h = cc.Hpcc(T_ns=20000, line_rate_bps=1_000_000_000)
    f1 = _add(ft, CFG, "10.0.1.5")
    ft.update_from(f1.id, h, bytes_sent=1000, probes_sent=3, probes_lost=1)
    f2 = _add(ft, CFG, "10.0.2.9", kind="tcp")
    ft.update_from(f2.id, cc.Dctcp(), bytes_sent=5000)
    ldcp_cfg = config.set_value(CFG, "algorithm.default", "ldcp")
    f3 = _add(ft, ldcp_cfg, "10.0.3.1")
    ft.update_from(f3.id, cc.Ldcp())
    ft.observe_rtt(f1.id, rtt_s=80e-6, probe_rtt_s=90e-6)
    ft.observe_hop(0x123, 0, cc.hop_pack(cc.speed_code(1_000_000_000), 1_001_000, 910, 7),
                   cc.hop_pack(cc.speed_code(1_000_000_000), 1000, 10, 5))
    ft.drop("transport", "feedback_tag", 2)
    got = _scrape(state)
    declared = metrics.exposed_names()
    assert set(got) - declared == set(), "samples the METRICS table does not declare"
    missing = {m.name for m in metrics.METRICS} - {n.removesuffix("_bucket").removesuffix(
        "_sum").removesuffix("_count") for n in got}
    # BPF series need an attached interface (tests/integration/test_daemon.py)
    assert missing == {"hpccd_program_attached", "hpccd_bpf_xdp_packets_total",
                       "hpccd_bpf_xdp_bytes_total", "hpccd_bpf_tc_packets_total",
                       "hpccd_bpf_tc_bytes_total", "hpccd_tcp_tracked_flows",
                       "hpccd_component_up",
                       # per engine: needs a transport component (test_daemon.py)
                       "hpccd_engine_flows",
                       # the TCP-side probe engine: needs a tcp_side component (below)
                       "hpccd_tcp_probe_lateness_seconds",
                       "hpccd_tcp_pacer_lateness_seconds",
                       "hpccd_tcp_probe_chain_rtt_seconds_total",
                       "hpccd_tcp_probe_chain_interval_seconds_total",
                       "hpccd_tcp_probes_per_round_trip_ratio",
                       "hpccd_tcp_probe_engine_wakeups_total",
                       "hpccd_tcp_probe_engine_expired_waits_total",
                       "hpccd_tcp_probe_engine_wait_lateness_seconds_total",
                       "hpccd_tcp_probe_engine_wake_lead_seconds", "hpccd_tcp_cc_acks_total",
                       "hpccd_tcp_cc_fallbacks_total", "hpccd_tcp_pacing_rate_shared_total",
                       "hpccd_tcp_pacing_rate_lent_total",
                       "hpccd_tcp_cc_limited_acks_total",
                       "hpccd_tcp_pacing_gain_updates_total",
                       "hpccd_tcp_pacing_asked_bits_total", "hpccd_tcp_pacing_acked_bits_total"}
    by = {m.name: m for m in metrics.METRICS}
    for name, samples in got.items():
        base = next((n for n in (name, name[:-7], name[:-4], name[:-6]) if n in by), None)
        for labels, _ in samples:
            assert set(labels) - {"le"} == set(by[base].labels), (name, labels)

    def val(name, **lb):
        return [v for l, v in got[name] if all(l.get(k) == x for k, x in lb.items())]

    assert val("hpccd_flows", algorithm="hpcc", peer="default", kind="native") == [1]
    assert val("hpccd_flows", algorithm="dctcp", peer="rack2", kind="tcp") == [1]
    assert val("hpccd_window_bytes", algorithm="hpcc", peer="default") == [pytest.approx(h.W)]
    assert val("hpccd_pacing_rate_bytes_per_second", algorithm="hpcc", peer="default") == \
        [pytest.approx(h.rate_bps / 8)]
    assert val("hpccd_alpha_ratio", algorithm="dctcp", peer="rack2") == [1.0]
    assert val("hpccd_cw_packets", algorithm="ldcp", peer="default") == [pytest.approx(
        cc.Ldcp().cw)]
    assert val("hpccd_probes_lost_total", algorithm="hpcc", peer="default") == [1]
    assert val("hpccd_rtt_seconds_count", algorithm="hpcc", peer="default") == [1]
    assert val("hpccd_rtt_seconds_bucket", algorithm="hpcc", peer="default", le="0.0001") == [1]
    assert val("hpccd_rtt_seconds_bucket", algorithm="hpcc", peer="default", le="5e-05") == [0]
    assert val("hpccd_drops_total", layer="transport", cause="feedback_tag") == [2]
    assert val("hpccd_drops_total", layer="xdp", cause="malformed_magic") == [0]
    assert val("hpccd_int_hop_queue_bytes", path_id="0x123", hop="0") == [7 * 80]
    # 900 x 128 bytes in 1 ms at 1 Gbit/s: 0.92
    assert val("hpccd_int_hop_utilization_ratio", path_id="0x123", hop="0") == \
        [pytest.approx(900 * 128 * 8 / 1_000_000)]
    assert val("hpccd_control_requests_total", command="status", result="ok") == [3]
    # every (algorithm, peer) label set of the counters is there from the start
    assert len(got["hpccd_flows_started_total"]) == len(config.ALGORITHMS) * 2


def test_tcp_side_probe_engine_metrics():
    """A tcp_side component's probe_metrics(): the lateness histogram from the
    engine's buckets, probes per RTT as a ratio of two counters, the CC's ACKs
    by mode and its fallbacks."""
    from hpccd.tcp_side import engine as tcp_side
    n = len(tcp_side.LATENESS_BUCKETS) + 1
    hist = [0] * n
    hist[0], hist[3], hist[-1] = 5, 2, 1                     # <= 5 us, <= 50 us, > 10 ms
    stats = {k: 0 for k in tcp_side.STATS}
    stats.update(late_hist=hist, late_sum_ns=25_000_000, late_n=8, chain_rtt_ns=3_000_000_000,
                 chain_interval_ns=1_000_000_000, wakeups=77, rate_shared=9,
                 rate_lent=4, pace_fed=21, pace_lowered=6, wake_late_n=40,
                 wake_late_sum_ns=1_200_000, wake_lead_ns=31_000,
                 pace_want_bits=8_000_000_000, pace_acked_bits=6_100_000_000)
    counters = {k: (0, 0) for k in tcp_side.HPCC_COUNTERS}
    counters.update(used_hpcc=(900, 0), fb_no_daemon=(12, 0), enter_fallback=(2, 0),
                    lim_cwnd=(31, 0), lim_timer=(550, 0))
    from hpccd.tcp_side.pacer import BUCKETS, Lateness
    pb = [0] * BUCKETS
    pb[4], pb[19], pb[20], pb[BUCKETS - 1] = 3, 2, 4, 1     # [4,5) [19,20) [20,21) >= 127 us
    late = Lateness(10, 420_000, tuple(pb))
    comp = types.SimpleNamespace(healthy=lambda: True,
                                 probe_metrics=lambda: {"stats": stats, "cc": counters,
                                                        "pacer": late})
    state = _state()
    state.components = {"tcp_side": comp}
    got = _scrape(state)

    def val(name, **lb):
        return [v for l, v in got[name] if all(l.get(k) == x for k, x in lb.items())]

    assert val("hpccd_tcp_probe_lateness_seconds_bucket", le="5e-06") == [5]
    assert val("hpccd_tcp_probe_lateness_seconds_bucket", le="5e-05") == [7]
    assert val("hpccd_tcp_probe_lateness_seconds_bucket", le="0.01") == [7]
    assert val("hpccd_tcp_probe_lateness_seconds_bucket", le="+Inf") == [8]
    assert val("hpccd_tcp_probe_lateness_seconds_count") == [8]
    assert val("hpccd_tcp_probe_lateness_seconds_sum") == [pytest.approx(0.025)]
    # the pacer's 1 us buckets under the first bound at or past their end
    assert val("hpccd_tcp_pacer_lateness_seconds_bucket", le="5e-06") == [3]
    assert val("hpccd_tcp_pacer_lateness_seconds_bucket", le="1.5e-05") == [3]
    assert val("hpccd_tcp_pacer_lateness_seconds_bucket", le="2e-05") == [5]
    assert val("hpccd_tcp_pacer_lateness_seconds_bucket", le="3e-05") == [9]
    assert val("hpccd_tcp_pacer_lateness_seconds_bucket", le="0.000127") == [9]
    assert val("hpccd_tcp_pacer_lateness_seconds_bucket", le="+Inf") == [10]
    assert val("hpccd_tcp_pacer_lateness_seconds_count") == [10]
    assert val("hpccd_tcp_pacer_lateness_seconds_sum") == [pytest.approx(420e-6)]
    assert val("hpccd_tcp_probes_per_round_trip_ratio") == [pytest.approx(3.0)]
    assert val("hpccd_tcp_probe_chain_rtt_seconds_total") == [pytest.approx(3.0)]
    assert val("hpccd_tcp_probe_engine_wakeups_total") == [77]
    assert val("hpccd_tcp_probe_engine_expired_waits_total") == [40]
    assert val("hpccd_tcp_probe_engine_wait_lateness_seconds_total") == [pytest.approx(1.2e-3)]
    assert val("hpccd_tcp_probe_engine_wake_lead_seconds") == [pytest.approx(31e-6)]
    assert val("hpccd_tcp_pacing_rate_shared_total") == [9]
    assert val("hpccd_tcp_pacing_rate_lent_total") == [4]
    assert val("hpccd_tcp_pacing_asked_bits_total") == [8_000_000_000]
    assert val("hpccd_tcp_pacing_acked_bits_total") == [6_100_000_000]
    assert val("hpccd_tcp_pacing_gain_updates_total", by="loss") == [21]
    assert val("hpccd_tcp_pacing_gain_updates_total", by="queue") == [6]
    assert val("hpccd_tcp_cc_acks_total", mode="hpcc") == [900]
    assert val("hpccd_tcp_cc_acks_total", mode="fb_no_daemon") == [12]
    assert val("hpccd_tcp_cc_acks_total", mode="winit") == [0]
    assert val("hpccd_tcp_cc_fallbacks_total") == [2]
    assert val("hpccd_tcp_cc_limited_acks_total", by="timer") == [550]
    assert val("hpccd_tcp_cc_limited_acks_total", by="cwnd") == [31]
    assert val("hpccd_tcp_cc_limited_acks_total", by="tsq") == [0]


def test_top_k_is_opt_in_and_bounded():
    cfg0 = config.loads('[[interfaces]]\nname = "eth0"\n')
    ft = FlowTable(100, cfg0.peer_names, config.ALGORITHMS, 8)
    for i in range(10):
        f = _add(ft, cfg0, f"10.0.0.{i + 2}")
        ft.update(f.id, rate_bps=1e6 * (i + 1), window_bytes=1000)
    assert "hpccd_top_flow_window_bytes" not in _scrape(_state(cfg0, ft))
    cfg3 = config.set_value(cfg0, "metrics.top_flows", "3")
    got = _scrape(_state(cfg3, ft))
    ids = sorted(int(l["flow_id"]) for l, _ in got["hpccd_top_flow_window_bytes"])
    assert ids == [8, 9, 10]                  # the three fastest
    # no other metric carries a per-flow label
    assert all("flow_id" not in l for n, s in got.items() if "top_flow" not in n for l, _ in s)


def test_group_counters_survive_the_flows_that_end():
    ft = FlowTable(10, ("default",), config.ALGORITHMS, 8)
    st = _state(flows=ft)
    f = _add(ft, CFG, "10.0.9.9")
    ft.update(f.id, bytes_sent=100, retx_packets=1)
    assert _sent(st) == 100
    ft.update(f.id, bytes_sent=300, payload_sent=240, retx_packets=2)
    assert _sent(st) == 300
    assert _sent(st, "hpccd_sent_payload_bytes_total") == 240   # wire and payload apart
    ft.finish(f.id)
    assert _sent(st) == 300
    g = _scrape(st)
    assert [v for l, v in g["hpccd_flow_completion_seconds_count"]
            if l["algorithm"] == "hpcc" and l["peer"] == "default"] == [1]
    f = _add(ft, CFG, "10.0.9.9")
    ft.update(f.id, bytes_sent=50)
    ft.finish(f.id, completed=False)
    assert _sent(st) == 350
    g = _scrape(st)
    assert [v for l, v in g["hpccd_flows_aborted_total"]
            if l["algorithm"] == "hpcc" and l["peer"] == "default"] == [1]


def _sent(st, name: str = "hpccd_sent_bytes_total") -> float:
    g = _scrape(st)
    return next(v for l, v in g[name]
                if l["algorithm"] == "hpcc" and l["peer"] == "default")


def test_native_int_records_fill_the_hop_series():
    """observe_hop_rec (the native engines' last INT, counters unwrapped per
    flow): queue at once, utilisation over at least UTIL_SPAN_NS from the
    same flow's record the span started at, unchanged when the record is
    the same or too soon, none across a path reset; the anchors go with the
    flow."""
    ft = FlowTable(10, ("default",), config.ALGORITHMS, 8)
    st = _state(flows=ft)
    f = _add(ft, CFG, "10.0.9.9")
    bw = 10_000_000_000
    ft.observe_hop_rec(f.id, 0x2A, 1, 1_000_000, 50_000, 12_000, bw)
    g = _scrape(st)
    assert g["hpccd_int_hop_queue_bytes"] == [({"path_id": "0x02a", "hop": "1"}, 12000)]
    assert "hpccd_int_hop_utilization_ratio" not in g
    # past a 2^24 ns ts wrap at 8 Gbit/s of 10: unwrapped
    t2 = 1_000_000 + (1 << 24) + 100_000
    ft.observe_hop_rec(f.id, 0x2A, 1, t2, 50_000 + ((1 << 24) + 100_000), 3_000, bw)
    ft.observe_hop_rec(f.id, 0x2A, 1, 2 * t2, 0, 3_000, bw)          # reset: no figure
    g = _scrape(st)
    assert "hpccd_int_hop_utilization_ratio" not in g
    ft.observe_hop_rec(f.id, 0x2A, 1, 2 * t2 + 1_000_000, 1_000_000, 3_000, bw)
    ft.observe_hop_rec(f.id, 0x2A, 1, 2 * t2 + 1_000_000, 1_000_000, 3_000, bw)  # same record
    g = _scrape(st)
    assert g["hpccd_int_hop_queue_bytes"] == [({"path_id": "0x02a", "hop": "1"}, 3000)]
    (lb, u), = g["hpccd_int_hop_utilization_ratio"]
    assert u == pytest.approx(0.8)
    # 20 us later, 50 KB more (a burst at 20 Gbit/s): too soon, the figure
    # stays; 1 ms after the span's start it covers the burst: (50 KB + 1 MB) / 1 ms
    ft.observe_hop_rec(f.id, 0x2A, 1, 2 * t2 + 1_020_000, 1_050_000, 2_000, bw)
    (lb, u), = _scrape(st)["hpccd_int_hop_utilization_ratio"]
    assert u == pytest.approx(0.8)
    ft.observe_hop_rec(f.id, 0x2A, 1, 2 * t2 + 2_000_000, 2_050_000, 2_000, bw)
    (lb, u), = _scrape(st)["hpccd_int_hop_utilization_ratio"]
    assert u == pytest.approx(1_050_000 * 8 / 1e-3 / bw)
    ft.finish(f.id)
    assert f.id not in ft._hop_prev
    ft.observe_hop_rec(f.id, 0x2A, 2, 1, 1, 1, bw)                    # ended: ignored
    assert ("0x02a", "2") not in {(l["path_id"], l["hop"])
                                  for l, _ in _scrape(st)["hpccd_int_hop_queue_bytes"]}


def test_probe_int_records_give_utilisation_from_their_pair():
    """observe_hop (TCP-side probe responses, 24-bit ts and 20-bit txBytes
    words): the queue of the record; the utilisation of the pair given (a
    record and the same hop's of a response at least UTIL_SPAN_NS before),
    measured across the ts and txBytes wraps; without a pair, or with one
    out of order or of another speed, the last figure stays."""
    ft = FlowTable(10, ("default",), config.ALGORITHMS, 8)
    sc = cc.speed_code(1_000_000_000)
    ts0 = (1 << 24) - 300_000                           # 0.3 ms before the wrap
    tx0 = (1 << 20) - 100                               # 100 units before the wrap

    def hop():
        return ft.hops()[(7, 0)]

    def rec(ts, tx, q=0, speed=sc):
        return cc.hop_pack(speed, ts % (1 << 24), tx % (1 << 20), q)

    ft.observe_hop(7, 0, rec(ts0, tx0, 3))
    assert hop()["utilization"] is None and hop()["qlen_bytes"] == 240
    ft.observe_hop(7, 0, rec(ts0 + 1_000_000, tx0 + 900), rec(ts0, tx0))
    assert hop()["utilization"] == pytest.approx(900 * 128 * 8 / 1_000_000)
    for bad in (rec(ts0 + 1_100_000, tx0),                       # after the record
                rec(ts0, tx0, speed=cc.speed_code(10_000_000_000))):
        ft.observe_hop(7, 0, rec(ts0 + 1_000_000, tx0 + 900), bad)
    ft.observe_hop(7, 0, rec(ts0 + 1_200_000, tx0 + 1000, 5))   # no pair
    assert hop()["utilization"] == pytest.approx(900 * 128 * 8 / 1_000_000)
    assert hop()["qlen_bytes"] == 400
    ft.observe_hop(7, 0, rec(ts0 + 3_000_000, tx0 + 1500), rec(ts0 + 1_000_000, tx0 + 900))
    assert hop()["utilization"] == pytest.approx(600 * 128 * 8 / 2_000_000)


def test_flow_table_limits_and_fields():
    ft = FlowTable(2, ("default",), config.ALGORITHMS, 2)
    a = _add(ft, CFG, "10.9.0.1")
    _add(ft, CFG, "10.9.0.2")
    with pytest.raises(FlowLimitError):
        _add(ft, CFG, "10.9.0.3")
    assert ft.refused == 1 and len(ft) == 2
    with pytest.raises(AttributeError):
        ft.update(a.id, peer="other")             # labels are fixed at start
    with pytest.raises(KeyError):
        ft.update(999, rate_bps=1)
    with pytest.raises(ValueError):
        ft.add(kind="quic", role="sender", saddr="", sport=0, daddr="", dport=0, proto=17,
               peer="default", algorithm="hpcc", component="t")
    for p in range(5):                            # at most int_hop_series (pathID, hop) keys
        ft.observe_hop(p, 0, bytes(8))
    assert sorted(ft.hops()) == [(3, 0), (4, 0)]


def test_docs_list_every_metric():
    doc = DOC.read_text()
    rows = re.findall(r"^\| `(hpccd_[a-z_]+)` \| (counter|gauge|histogram) \|", doc, flags=re.M)
    assert sorted(rows) == sorted((m.name, m.type) for m in metrics.METRICS)


# ---- the dashboard ----

_PROMQL_WORDS = {"sum", "max", "min", "avg", "count", "by", "without", "rate", "irate",
                 "increase", "histogram_quantile", "clamp_min", "label_values", "le",
                 "instance", "algorithm", "peer", "interface", "slot", "layer", "cause",
                 "path_id", "hop", "mode", "and", "or", "unless", "on", "ignoring"}


def _exprs(dash: dict) -> list[str]:
    out = []

    def walk(panels):
        for p in panels:
            for t in p.get("targets", []):
                out.append(t["expr"])
            walk(p.get("panels", []))

    walk(dash["panels"])
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            out.append(v["query"]["query"] if isinstance(v["query"], dict) else v["query"])
    return out


def test_dashboard_refers_only_to_exported_metrics():
    dash = json.loads(DASHBOARD.read_text())
    exprs = _exprs(dash)
    assert len(exprs) >= 20
    names = metrics.exposed_names()
    used = set()
    for e in exprs:
        stripped = re.sub(r'"[^"]*"', '""', e)                 # label values
        stripped = re.sub(r"\[[^\]]*\]", "", stripped)         # ranges
        stripped = re.sub(r"\$\w+", "", stripped)
        for tok in re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", stripped):
            if tok in _PROMQL_WORDS:
                continue
            assert tok in names, f"dashboard expression uses {tok!r}, not exported: {e}"
            used.add(tok)
    # the panels the issue asks for
    for needed in ("hpccd_utilization_ratio", "hpccd_int_hop_queue_bytes", "hpccd_window_bytes",
                   "hpccd_flow_completion_seconds_bucket",
                   # the TCP side's probe engine (issue 19): every one of its families
                   *(n + "_bucket" if metrics._BY_NAME[n].type == "histogram" else n
                     for n in metrics.TCP_SIDE_ONLY)):
        assert needed in used


def test_dashboard_loads_as_is():
    dash = json.loads(DASHBOARD.read_text())
    assert dash["uid"] and dash["title"] and isinstance(dash["schemaVersion"], int)
    assert "__inputs" not in dash            # no import-time substitution needed
    ds_vars = [v for v in dash["templating"]["list"] if v["type"] == "datasource"]
    assert ds_vars and ds_vars[0]["query"] == "prometheus"
    ids = set()
    for p in dash["panels"]:
        assert p["id"] not in ids
        ids.add(p["id"])
        assert {"h", "w", "x", "y"} <= set(p["gridPos"])
        if p["type"] != "row":
            assert p["datasource"]["uid"] == "${datasource}"
            assert p["targets"]


def _yaml(path: pathlib.Path):
    """`path` parsed by Debian's python3-yaml (not a dependency of the .venv)."""
    import subprocess

    r = subprocess.run(["/usr/bin/python3", "-c", "import json, sys, yaml; "
                        "print(json.dumps(yaml.safe_load(open(sys.argv[1]))))", str(path)],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0 and "No module named 'yaml'" in r.stderr:
        pytest.skip("python3-yaml is not installed")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_grafana_provisioning_fits_the_dashboard():
    """The provisioning files beside the dashboard: a Prometheus data source of
    the type the dashboard's datasource variable lists, and a file provider
    whose folder is where docs/metrics.md says to put the dashboard."""
    prov = DASHBOARD.parent / "provisioning"
    ds = _yaml(prov / "datasources" / "hpccd.yaml")
    assert ds["apiVersion"] == 1
    (src,) = ds["datasources"]
    dash = json.loads(DASHBOARD.read_text())
    (var,) = [v for v in dash["templating"]["list"] if v["type"] == "datasource"]
    assert src["type"] == var["query"] == "prometheus"
    assert src["uid"] and src["url"].startswith("http") and src["access"] == "proxy"
    dp = _yaml(prov / "dashboards" / "hpccd.yaml")
    (p,) = dp["providers"]
    assert dp["apiVersion"] == 1 and p["type"] == "file"
    docs = (ROOT / "docs" / "metrics.md").read_text()
    assert p["options"]["path"] in docs
    assert "grafana/provisioning/datasources/hpccd.yaml" in docs


def test_transport_drop_causes_are_engine_counters():
    """hpccd_drops_total{layer="transport"} reads the engine counters of
    ENGINE_DROPS from Transport.stats() (struct hpccd_tp_stats) each poll:
    each one a field there (a missing one would stop the component's poll),
    the receiver's refusals of new flows among them, each cause listed in
    docs/metrics.md."""
    from hpccd.transport import component, engine
    fields = {name for name, _ in engine.ffi.typeof("struct hpccd_tp_stats").fields}
    assert set(component.ENGINE_DROPS) <= fields
    assert {"rx_table_full", "rx_peer_full", "rx_probe_full",
            "rx_peer_table_full"} <= set(component.ENGINE_DROPS)
    doc = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text()
    for cause in component.DROP_CAUSES:
        assert f"`{cause}`" in doc, cause
