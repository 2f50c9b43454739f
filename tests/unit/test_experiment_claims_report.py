"""The reproduce report (results_report.write_report, claims.evaluate) from
a fixed reproduce folder: every stage's summary written by hand with the
figures the claims read (a sweep's rows as reps' aggregates), and a failed stage.

Invariants protected: the report's markdown and claims.json are the same,
byte for byte, as the ones in tests/unit/claims_report/ (written by the
code before the claims read typed rows); a summary row with a key its row
type does not have makes its stage unreadable, with one line naming the
file and the key, and the stage's claims not run for that reason."""
from __future__ import annotations

import json
import os


from hpccd.experiment import results_report
from hpccd.experiment.reps import aggregate
from hpccd.experiment.results import Summary

HERE = os.path.join(os.path.dirname(__file__), "claims_report")


def _incast(algo, q_p99_bdp, drain, q_max, bound=True, verdict="link-bound, as intended"):
    return {"algo": algo, "cpu_busy": 0.4, "queue_bound": bound, "verdict": verdict,
            "q_p99": q_p99_bdp * 3000, "q_p99_bdp": q_p99_bdp, "bdp_bytes": 3000,
            "q_p50": 10.0, "q_max": q_max, "drain_peak_rtts": drain,
            "drain_rtts": None if drain is None else drain + 100,
            "drain_s": None if drain is None else (drain + 100) * 25e-6, "peak_s": 2.5e-3,
            "base_rtt_s": 25e-6, "link_bps": 10**9, "backlog_longest_rtts": 7.0,
            "fct_max_s": 0.04, "fct_p50_s": 0.02, "utilisation": 0.93,
            "long_before_bps": 9e8, "long_during_bps": 2e8, "long_after_bps": 8.8e8}


def _ls(algo, rec, w_low, srtt_T, verdict):
    return {"algo": algo, "cpu_busy": 0.5, "queue_bound": True, "verdict": verdict,
            "line_bps": 10**9, "base_rtt_s": 25e-6, "long_before_bps": 8.1e8,
            "recovery_s": rec, "recovery_rtts": None if rec is None else rec / 25e-6,
            "recovery_own_rtts": 4.0, "w_low": w_low, "w_back_rtts": 9.0,
            "w_back_updates": 5, "srtt_T": srtt_T}


def _mice(algo, q50, q99, p50, p99, bound=True):
    return {"algo": algo, "cpu_busy": 0.7, "queue_bound": bound, "verdict": f"{algo} verdict",
            "link_bps": 10**9, "idle_p50_us": 30.0, "rtt_p50_us": p50, "rtt_p99_us": p99,
            "p99_over_idle": p99 / 30.0, "q_p50": q50, "q_p99": q99, "mice": 200}


def _buckets(p50s, p95s, p99s, ns):
    return [{"bucket": f"<={3 * 4 ** i}K", "n": n, "flows": n, "p50": a, "p95": b, "p99": c,
             "min": 1.0, "below_1": 0} for i, (a, b, c, n) in enumerate(zip(p50s, p95s, p99s, ns))]


def _fct(algo, wl, load, scale, ns=(5, 40, 60, 30)):
    return {"algo": algo, "workload": wl, "load": load, "run": f"{algo} {wl} {load:.0%}",
            "cpu_busy": 0.6, "queue_bound": True, "verdict": f"{algo} fct verdict",
            "q_p50": 900.0 * scale, "q_p95": 9000.0 * scale, "q_p99": 20000.0 * scale,
            "q_max": 50000.0 * scale,
            "buckets": _buckets([1.2 * scale, 1.5, 2.0, 3.0 * scale],
                                [2.0 * scale, 3.0 * scale, 4.0, 5.0],
                                [3.0 * scale, 6.0 * scale, 8.0, 9.0], ns)}


def _fct_incast(algo, p95s):
    return {"algo": algo, "workload": "fb_hadoop", "load": 0.3, "cpu_busy": 0.6,
            "queue_bound": True, "verdict": f"{algo} verdict",
            "buckets": _buckets([1, 1, 1, 1], p95s, [9, 9, 9, 9], [30, 30, 30, 30]),
            "incast": {"events": 12, "flows_each": 7, "size": 60000, "flows": 84, "done": 84,
                       "fct_p50_s": 0.001, "fct_max_s": 0.004, "slowdown_p95": 3.0}}


def _fair(jmin, jmed, q95, util, bound=True):
    return {"algo": "hpcc", "cpu_busy": 0.5, "queue_bound": bound, "verdict": "fair verdict",
            "jain_min": jmin, "jain_median": jmed, "q_p95_kb": q95, "q_p99_kb": q95 * 1.5,
            "utilisation": util, "util_min": util - 0.1, "line_bps": 10**9,
            "phases": [{"flows": 1, "active": ["flow1"], "rates_bps": [9e8], "sum_bps": 9e8,
                        "jain": None}]}


def _rec(algo, recovery, loss, goodput, dropped, retx):
    return {"algo": algo, "recovery": recovery, "loss": loss,
            "variant": f"{recovery} {loss:.0%}", "flows": 4, "goodput_bps": goodput,
            "dropped": dropped, "retx_pkts": retx, "cpu_busy": 0.5}


def _tx(variant, early, settled, q_sd, busy):
    return {"variant": variant, "use_sd_early": early, "use_sd_settled": settled,
            "q_sd_settled": q_sd, "q_busy": busy, "cpu_busy": 0.5, "queue_bound": True,
            "verdict": f"{variant} verdict", "q_sd_kb": q_sd / 1e3}


STAGES = {
    "incast": ({"loaded_rtt_us": 100.0, "T_us": 120.0},
               [_incast("hpcc", 0.8, 20.0, 12_500),
                _incast("dcqcn", 9.0, None, 120_000, verdict="CPU-bound: x")]),
    "long-short": ({}, [_ls("hpcc", None, 0.5, 2.0, "CPU-bound: y"),
                        _ls("dcqcn", 0.004, None, None, "link-bound")]),
    "mice": ({}, [_mice("hpcc", 200.0, 1500.0, 40.0, 60.0, bound=False),
                  _mice("dcqcn", 30000.0, 40000.0, 300.0, 500.0),
                  _mice("dctcp", 20000.0, 30000.0, 200.0, 100.0)]),
    "fairness": ({}, [_fair(0.97, 0.99, 3.0, 0.9)]),
    "fct": ({}, [_fct(a, wl, ld, sc) for wl in ("websearch", "fb_hadoop") for ld in (0.3, 0.5)
                 for a, sc in (("hpcc", 1.0), ("dcqcn", 2.5), ("dctcp", 1.1))]),
    "fct-incast": ({"buckets": "3000,12000,48000,1000000"},
                   [_fct_incast("hpcc", [2.0, 3.0, 4.0, 5.0]),
                    _fct_incast("dcqcn", [4.0, 2.5, 6.0, 7.0]),
                    _fct_incast("timely", [5.0, 5.0, 5.0, 5.0]),
                    _fct_incast("dctcp", [3.0, 4.0, 4.5, 6.0])]),
    "reaction": ({}, [_incast("hpcc", 0.5, 3.0, 9000),
                      _incast("hpcc-rtt", 2.0, 40.0, 90_000),
                      {**_incast("hpcc-ack", 0.2, 1.0, 3000), "utilisation": 0.4}]),
    "gbn-vs-sr": ({}, [_rec(a, r, ld, g * (0.95 if r == "gbn" else 1), d, x)
                       for a, g, d, x in (("hpcc", 8e8, 3, 10), ("dcqcn", 6e8, 40, 900))
                       for r in ("sr", "gbn") for ld in (0.0, 0.01)]),
    "txrate": ({}, [_tx("txRate", 0.2, 0.05, 400.0, 0.3), _tx("rxRate", 0.22, 0.06, 500.0,
                                                               0.45)]),
}


def _write(folder):
    stages = []
    for key, (params, rows) in STAGES.items():
        d = os.path.join(folder, key)
        os.makedirs(d)
        doc = {"experiment": key, "params": params, "results": rows, "skipped": {}}
        if key == "fct-incast":
            doc["buckets"] = ["<=3K", "<=12K", "<=48K", "<=1M"]
        with open(os.path.join(d, "summary.json"), "w") as f:
            json.dump(doc, f)
        with open(os.path.join(d, "summary.txt"), "w") as f:
            f.write(f"the summary of {key}\n")
        stages.append({"key": key, "what": f"what {key} does", "status": "done", "folder": d,
                       "algos": "hpcc,dcqcn", "seconds": 12.0, "load_before": [1.0, 1, 1],
                       "load_after": [1.5, 1, 1]})
    d = os.path.join(folder, "w-ai")
    os.makedirs(d)
    # a sweep point's rows are reps' aggregates, as sweep.py writes them
    pts = [{"param": "w_ai_bytes", "value": v,
            "results": aggregate([Summary("fairness", {}, [_fair(0.9, jm, q, u)])])}
           for v, jm, q, u in ((100.0, 0.95, 3.0, 0.9), (300.0, 0.97, 3.5, 0.92),
                               (3000.0, 0.9, 12.0, 0.95))]
    with open(os.path.join(d, "sweep.json"), "w") as f:
        json.dump({"experiment": "fairness", "sweeps": [["w_ai_bytes", [100, 300, 3000]]],
                   "reps": 1, "points": pts}, f)
    stages.append({"key": "w-ai", "what": "the W_AI sweep", "status": "done", "folder": d,
                   "algos": "hpcc", "seconds": 30.0})
    stages.insert(3, {"key": "fairness-x", "what": "a failed one", "status": "failed",
                      "error": "boom", "algos": "hpcc"})
    manifest = {"started": "2026-01-01T00:00:00", "host": "lab", "kernel": "6.8", "cpus": 2,
                "seconds": 99, "algos": "hpcc,dcqcn,dctcp,timely", "quick": True,
                "stages": stages}
    with open(os.path.join(folder, "reproduce.json"), "w") as f:
        json.dump(manifest, f)


def _golden(name):
    with open(os.path.join(HERE, name)) as f:
        return f.read()


def test_the_report_from_a_fixed_folder_is_unchanged(tmp_path):
    run = tmp_path / "run"
    _write(str(run))
    path = results_report.write_report(str(run), str(tmp_path / "results.md"))
    with open(path) as f:
        text = f.read().replace(str(run), "RUN")
    with open(run / "claims.json") as f:
        claims = f.read()
    assert text == _golden("results.md")
    assert claims == _golden("claims.json")


def test_a_row_with_a_key_its_type_lacks_makes_the_stage_unreadable(tmp_path):
    run = tmp_path / "run"
    _write(str(run))
    p = run / "incast" / "summary.json"
    doc = json.loads(p.read_text())
    doc["results"][0]["q_p98"] = 1.0              # e.g. a field since renamed
    p.write_text(json.dumps(doc))
    path = results_report.write_report(str(run), str(tmp_path / "results.md"))
    text = open(path).read()
    err = f"{p}: key 'q_p98' is not a field of IncastRow"
    assert f"| incast | what incast does | hpcc,dcqcn | unreadable: {err} |" in text
    rows = json.loads((run / "claims.json").read_text())
    incast = [r for r in rows if r["stage"] == "incast"]
    assert len(incast) == 3 and all(r["verdict"] == f"not run: stage incast unreadable: {err}"
                                    for r in incast)
    # the other stages are judged as before
    assert [r for r in rows if r["stage"] != "incast"] == \
        [r for r in json.loads(_golden("claims.json")) if r["stage"] != "incast"]
