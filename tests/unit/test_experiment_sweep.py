"""hpccctl experiment --sweep PARAM=v1,v2 (hpccd.experiment.sweep) without a
lab: a stand-in experiment whose figures depend on the HPCC parameters its
runs were given (read from native.hpcc_params, as the real experiments'
engines do).

Invariants protected: each point runs with exactly its value in HPCC's
parameters (W_AI given replaces the rule of thumb's N) and the others at the
lab's settings; nothing is left overridden after a point, a failure or an
interrupt; one plot per swept parameter; each figure against the values;
with --reps each point is N runs (median and spread); bad --sweep arguments
are usage errors; an interrupted sweep keeps the finished points.
"""
from __future__ import annotations

import json
import os

import pytest

from hpccd.experiment import native, sweep
from hpccd.experiment.common import UsageError
from hpccd.experiment.report import Results


class FakeExp:
    NAME = "fake"
    COLUMNS = [("algo", "algo"), ("q", "q p95 KB"), ("jain", "Jain")]

    def __init__(self, interrupt_at=None):
        self.seen = []
        self.interrupt_at = interrupt_at

    def run(self, lab_factory, algos, params, out):
        p = native.hpcc_params(4)
        self.seen.append(p)
        if len(self.seen) - 1 == self.interrupt_at:
            raise KeyboardInterrupt
        w_ai = p.get("w_ai_bytes", 50.0)
        rows = [{"algo": "hpcc", "q": w_ai / 10 + p.get("eta", 0.95), "jain": 1 - 1 / w_ai},
                {"algo": "cubic", "q": 100.0, "jain": 0.5}]
        res = Results(out, self.NAME)
        res.summary("t", {"experiment": self.NAME, "results": rows})
        return "t", res.dir


def test_parse_sweeps():
    assert sweep.parse_sweeps(["w_ai_bytes=25,80,300", "max_stage=0,5"]) == \
        [("w_ai_bytes", [25.0, 80.0, 300.0]), ("max_stage", [0, 5])]
    assert sweep.parse_sweeps(None) == []
    for bad, msg in (["alpha=1"], "PARAM=v1"), (["eta"], "PARAM=v1"), \
            (["eta=0.9,x"], "not a number"), (["max_stage=1.5"], "not an integer"), \
            (["eta=1.5"], "outside"), (["eta="], "no value"), \
            (["eta=0.9", "eta=0.95"], "twice"):
        with pytest.raises(UsageError, match=msg):
            sweep.parse_sweeps(bad)


def test_each_point_runs_with_its_value_and_one_plot_per_parameter(tmp_path):
    exp = FakeExp()
    text, folder = sweep.run_sweep(exp, None, [], {}, str(tmp_path),
                                   [("w_ai_bytes", [20.0, 80.0]), ("eta", [0.9])])
    assert [p.get("w_ai_bytes") for p in exp.seen] == [20.0, 80.0, None]
    assert all("N_flows" not in p for p in exp.seen[:2]) and exp.seen[2]["N_flows"] == 4
    assert exp.seen[2]["eta"] == 0.9 and exp.seen[0]["T_ns"] == native.T_NS
    assert native.HPCC_OVERRIDES == {}
    assert native.hpcc_params(4) == {"T_ns": native.T_NS, "N_flows": 4}
    doc = json.load(open(os.path.join(folder, "sweep.json")))
    pts = [(p["param"], p["value"], p["results"][0]["q"]["median"]) for p in doc["points"]]
    assert pts == [("w_ai_bytes", 20.0, 2.95), ("w_ai_bytes", 80.0, 8.95), ("eta", 0.9, 5.9)]
    assert {"sweep_w_ai_bytes.png", "sweep_eta.png"} <= set(os.listdir(folder))
    assert "-- w_ai_bytes (W_AI, bytes) --" in text and "-- eta" in text


def test_reps_per_point(tmp_path):
    exp = FakeExp()
    _, folder = sweep.run_sweep(exp, None, [], {}, str(tmp_path), [("max_stage", [0, 5])],
                                reps=2)
    assert [p.get("max_stage") for p in exp.seen] == [0, 0, 5, 5]
    doc = json.load(open(os.path.join(folder, "sweep.json")))
    assert all(len(p["folders"]) == 2 and p["results"][0]["q"]["n"] == 2
               for p in doc["points"])


def test_interrupted_sweep_keeps_finished_points_and_clears_the_override(tmp_path, capsys):
    with pytest.raises(KeyboardInterrupt):
        sweep.run_sweep(FakeExp(interrupt_at=1), None, [], {}, str(tmp_path),
                        [("w_ai_bytes", [20.0, 80.0, 300.0])])
    assert native.HPCC_OVERRIDES == {}
    out = capsys.readouterr().out
    folder = out.strip().splitlines()[-1].split("results in ")[1]
    doc = json.load(open(os.path.join(folder, "sweep.json")))
    assert [p["value"] for p in doc["points"]] == [20.0]
