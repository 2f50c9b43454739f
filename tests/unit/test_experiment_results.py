"""The experiments' types (hpccd.experiment.results): every experiment
implements the protocol; a typed row's JSON is its fields less the private
samples and the optional figures it lacks, plus its derived figures, under
the names summary.json readers (reps, claims, docs/results.md) know; a
summary written by Results.summary reads back the same, and its rows read
back typed (Summary.rows, load_row) equal the rows written, nested rows
included; a row of an older summary that lacks a field still loads with
the figure as None (and its derived figures None); a key the row type does
not have is refused in one line naming the file and the key."""
from __future__ import annotations

import dataclasses
import json
import math
import os
import types

import pytest

from hpccd.experiment import EXPERIMENTS, fairness, incast, longshort
from hpccd.experiment.report import Results, table
from hpccd.experiment.results import Experiment, RowError, Summary, check, load_row


def _incast_row(**kw) -> incast.IncastRow:
    f = dict(algo="cubic", t0_ns=1, link_bps=10**9, base_rtt_s=1e-4, bdp_bytes=12500.0,
             q_p50=0.0, q_p99=1500.0, q_max=3000.0, q_p99_bdp=0.12, drain_s=math.inf,
             drain_rtts=math.inf, drain_peak_rtts=1.0, peak_s=0.002, backlog_longest_rtts=3.0,
             fct_max_s=0.01, fct_p50_s=0.005,
             long_before_bps=9e8, long_during_bps=1e8, long_after_bps=9e8, utilisation=0.9,
             cpu_busy=0.5, queue_bound=True, verdict="link-bound", samples=["raw"],
             long_points=[(0, 0)])
    f.update(kw)
    return incast.IncastRow(**f)


def test_every_experiment_implements_the_protocol():
    for name, mod in EXPERIMENTS.items():
        assert isinstance(mod, Experiment), name
        assert mod.NAME == name and mod.COLUMNS and callable(mod.run)
    with pytest.raises(TypeError, match="lacks COLUMNS"):
        check(types.SimpleNamespace(NAME="x", run=lambda *a: None))


def test_incast_row_json_keys_are_the_summarys():
    kernel = _incast_row().as_dict()
    assert set(kernel) == {
        "algo", "t0_ns", "link_bps", "base_rtt_s", "bdp_bytes", "q_p50", "q_p99", "q_max",
        "q_p99_bdp", "drain_s", "drain_rtts", "drain_peak_rtts", "peak_s",
        "backlog_longest_rtts", "peak_ms", "fct_max_s", "fct_p50_s",
        "long_before_bps", "long_during_bps", "long_after_bps", "utilisation", "cpu_busy",
        "queue_bound", "verdict", "q_p50_kb", "q_p99_kb", "q_max_kb", "fct_max_ms",
        "long_during_mbps", "long_after_mbps"}
    assert (kernel["q_max_kb"], kernel["fct_max_ms"], kernel["long_during_mbps"],
            kernel["peak_ms"]) == (3.0, 10.0, 100.0, 2.0)
    native = _incast_row(algo="hpcc").send_time(
        {"wnd_limited": 0.25, "pace_lost": 0.0, "timer_late_us": 12.0}).as_dict()
    assert (native["wnd_limited"], native["pace_lost"], native["timer_late_us"]) == \
        (0.25, 0.0, 12.0)


def test_table_reads_typed_rows_and_leaves_missing_figures_empty():
    rows = [_incast_row(), _incast_row(algo="hpcc").send_time({"wnd_limited": 0.5})]
    lines = table(rows, [("algo", "algo"), ("q_max_kb", "q max KB"),
                         ("drain_rtts", "drain RTTs"), ("wnd_limited", "wnd")]).splitlines()
    assert lines[2].split() == ["cubic", "3", "never"]            # no send-time figure
    assert lines[3].split() == ["hpcc", "3", "never", "0.5"]


def test_summary_written_and_read_back(tmp_path):
    phase = fairness.Phase(flows=2, active=["flow1", "flow2"], rates_bps=[4e8, 5e8],
                           sum_bps=9e8, jain=0.99)
    row = fairness.FairnessRow(algo="hpcc", t0_ns=0, line_bps=10**9, phases=[phase],
                               jain_min=0.99, jain_median=0.99, utilisation=0.9, util_min=0.9,
                               q_p95_kb=1.0, q_p99_kb=2.0, cpu_busy=0.4, queue_bound=False,
                               verdict="CPU-bound", rates=[[(0, 1.0)]])
    res = Results(str(tmp_path), "fairness")
    res.summary("text", Summary("fairness", {"flows": 2}, [row], {"dcqcn": "no NIC"},
                                extra={"note": 1}))
    doc = json.load(open(os.path.join(res.dir, "summary.json")))
    assert doc["experiment"] == "fairness" and doc["skipped"] == {"dcqcn": "no NIC"}
    assert doc["note"] == 1
    (r,) = doc["results"]
    assert "rates" not in r and "wnd_limited" not in r
    assert r["phases"] == [{"flows": 2, "active": ["flow1", "flow2"],
                            "rates_bps": [4e8, 5e8], "sum_bps": 9e8, "jain": 0.99,
                            "jain_whole": None}]       # not given: nan, written as null
    back = Summary.load(res.dir)
    assert (back.experiment, back.params, back.results, back.skipped, back.extra) == \
        ("fairness", {"flows": 2}, doc["results"], {"dcqcn": "no NIC"}, {"note": 1})
    # infinities (a drain that never happened) are written as null, as before
    ls = longshort.LongShortRow(algo="cubic", t0_ns=0, t_end_ns=1, line_bps=10**9,
                                base_rtt_s=1e-4, short_fct_s=0.01, long_before_bps=9e8,
                                long_during_bps=5e8, recovery_s=math.inf,
                                recovery_rtts=math.inf, recovery_own_rtts=3.0,
                                w_low=math.nan, w_back_rtts=math.nan, w_back_updates=math.nan,
                                srtt_T=math.nan,
                                cpu_busy=0.5, queue_bound=True, verdict="ok")
    res2 = Results(str(tmp_path), "long-short")
    res2.summary("t", Summary("long-short", {}, [ls], {}))
    (r2,) = Summary.load(res2.dir).results
    assert r2["recovery_s"] is None and r2["recovery_ms"] is None and r2["short_fct_ms"] == 10.0
    # a kernel flow has no window to read: null, not a figure
    assert r2["w_low"] is None and r2["w_back_rtts"] is None and r2["recovery_own_rtts"] == 3.0
    # a summary without "skipped" (txrate's) stays without
    res3 = Results(str(tmp_path), "txrate")
    res3.summary("t", Summary("txrate", {}, []))
    assert "skipped" not in json.load(open(os.path.join(res3.dir, "summary.json")))


def test_fct_row_json_nests_buckets_and_incasts_as_before():
    from hpccd.experiment import fct

    b = fct.Bucket(bucket="<=3K", n=9, flows=10, p50=1.5, p95=3.0, p99=4.0, min=0.9,
                   below_1=1)
    row = fct.FctRow(
        algo="hpcc", workload="websearch", load=0.3, run="hpcc websearch 30%", t0_ns=0,
        link_bps=10**9, flows=10, done=9, failed=1, rx_checked=9, errors=["flow 3: reset"],
        offered_load=0.3, port_load=0.31, lag_p50_s=1e-4, lag_p99_s=2e-3, base_rtt_s=5e-5,
        base_idle_s=6e-5, base_from_run=True, idle_fct_p50_s=7e-5, udp_rtt_s=4e-5,
        bucket_bytes=12500, q_p50=0.0, q_p95=1000.0, q_p99=2000.0, q_max=3000.0, below_1=1,
        slowdown_min=0.9, capped=0, buckets=[b], cpu_busy=0.7, queue_bound=True,
        verdict="link-bound", flow_records=[{"flow": 0}], samples=[], grid=[])
    d = row.as_dict()
    assert d["buckets"] == [{"bucket": "<=3K", "n": 9, "flows": 10, "p50": 1.5, "p95": 3.0,
                             "p99": 4.0, "min": 0.9, "below_1": 1}]
    assert d["incast"] is None                    # written as null, as before
    assert "flow_records" not in d and "grid" not in d
    assert (d["offered_pct"], d["port_pct"], d["lag_p99_ms"], d["q_p95_kb"]) == \
        (30.0, 31.0, 2.0, 1.0)
    assert d["base_rtt_us"] == pytest.approx(50.0) and d["idle_min_us"] == pytest.approx(60.0)
    inc = fct.IncastStats(events=2, flows_each=8, size=500_000, flows=16, done=16,
                          fct_p50_s=0.01, fct_max_s=0.02, slowdown_p95=3.0)
    row.incast = inc
    assert row.as_dict()["incast"]["flows_each"] == 8


def test_rows_read_back_typed(tmp_path):
    from hpccd.experiment import fct

    row = _incast_row()
    res = Results(str(tmp_path), "incast")
    res.summary("t", Summary("incast", {}, [row], {}))
    (back,) = Summary.load(res.dir).rows(incast.IncastRow)
    # private samples aside, and the infinities summary.json holds as null
    # come back as None (the claims read a null time as "never")
    assert isinstance(back, incast.IncastRow)
    assert back == dataclasses.replace(row, drain_s=None, drain_rtts=None)
    assert back.samples is None and back.q_max_kb == 3.0
    # nested rows: an FctRow's buckets and incasts
    b = fct.Bucket(bucket="<=3K", n=9, flows=10, p50=1.5, p95=3.0, p99=4.0, min=0.9,
                   below_1=1)
    inc = fct.IncastStats(events=2, flows_each=8, size=500_000, flows=16, done=16,
                          fct_p50_s=0.01, fct_max_s=0.02, slowdown_p95=3.0)
    doc = {"algo": "hpcc", "workload": "websearch", "load": 0.3, "q_p95": 1000.0,
           "buckets": [dataclasses.asdict(b)], "incast": dataclasses.asdict(inc),
           "q_p95_kb": 1.0}
    r = load_row(fct.FctRow, doc, "x/summary.json")
    assert r.buckets == [b] and r.incast == inc and r.q_p95_kb == 1.0
    # an older summary without a figure: None, as not measured; its derived too
    r = load_row(incast.IncastRow, {"algo": "hpcc", "q_p99": 10.0}, "old/summary.json")
    assert r.q_p99_kb == 0.01 and r.q_max is None and r.q_max_kb is None
    # a key the row type lacks: one line naming the file and the key
    with pytest.raises(RowError) as e:
        load_row(incast.IncastRow, {"algo": "hpcc", "q_p98": 1.0}, "old/summary.json")
    assert str(e.value) == "old/summary.json: key 'q_p98' is not a field of IncastRow"
    with pytest.raises(RowError, match="^x/summary.json: buckets: key 'p98' is not a field "
                                       "of Bucket$"):
        load_row(fct.FctRow, {"buckets": [{"p98": 1}]}, "x/summary.json")
    # a summary's rows name the file they were loaded from
    doc = json.load(open(os.path.join(res.dir, "summary.json")))
    doc["results"][0]["q_p98"] = 1.0
    with open(os.path.join(res.dir, "summary.json"), "w") as f:
        json.dump(doc, f)
    with pytest.raises(RowError, match=f"^{os.path.join(res.dir, 'summary.json')}: key 'q_p98' "
                                       f"is not a field of IncastRow$"):
        Summary.load(res.dir).rows(incast.IncastRow)
    # every experiment says its row type, and it is a dataclass
    for mod in EXPERIMENTS.values():
        assert dataclasses.is_dataclass(mod.ROW), mod.NAME


def test_fairness_says_whether_its_b_x_t_lets_hpcc_converge():
    """The fairness summary's line on the bottleneck's B x T in frames, which the
    HPCC row's verdict cites (docs/experiments.md "Fairness and B x T"): under
    fairness.CONVERGES_FROM_FRAMES it says so, and that at 17-35 frames the newest
    flow kept the link; without an HPCC row or a B x T, nothing."""
    phase = fairness.Phase(flows=2, active=["flow1", "flow2"], rates_bps=[4e8, 5e8],
                           sum_bps=9e8, jain=0.99)

    def row(algo):
        return fairness.FairnessRow(algo=algo, t0_ns=0, line_bps=10**9, phases=[phase],
                                    jain_min=0.5, jain_median=0.6, utilisation=0.9,
                                    util_min=0.9, q_p95_kb=1.0, q_p99_kb=2.0, cpu_busy=0.4,
                                    queue_bound=False, verdict="CPU-bound", rates=[[(0, 1.0)]])

    small = fairness.bxt_note([row("cubic"), row("hpcc")], {"bxt_frames": 17.3})
    assert "B x T 17.3 frames, under the 80" in small and "0.058 of U" in small, small
    assert "at 17-35 frames the newest flow kept the link" in small
    big = fairness.bxt_note([row("hpcc")], {"bxt_frames": 173.4})
    assert "B x T 173.4 frames: at 80 or more HPCC converged" in big, big
    assert "unless W_AI was raised to its floor" in small
    assert fairness.bxt_note([row("cubic")], {"bxt_frames": 17.3}) == ""
    assert fairness.bxt_note([row("hpcc")], {}) == ""
