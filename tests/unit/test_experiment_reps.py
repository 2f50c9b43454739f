"""hpccctl experiment --reps N (hpccd.experiment.reps) without a lab: a stand-in
experiment module whose run() writes summaries with known figures, as the
real ones do (a results folder with summary.json).

Invariants protected: every numeric figure of every row is reported as the
median, least and greatest over the runs (rows matched by algorithm, fct's
by workload and load, its size buckets by bucket); yes/no figures as a count;
a figure missing or NaN in a run is left out of that row's statistics, not
taken as 0; the table has the experiment's columns, each cell
"median [least-greatest]"; a progress line per run estimates the time left;
an interrupted repetition keeps and writes the runs that finished, then
re-raises the interrupt; N < 1 is refused.
"""
from __future__ import annotations

import json
import os

import pytest

from hpccd.experiment import reps
from hpccd.experiment.report import Results
from hpccd.experiment.results import Summary


class FakeExp:
    """An experiment module: NAME, COLUMNS, run()."""

    NAME = "fake"
    COLUMNS = [("algo", "algo"), ("q", "q KB"), ("fct", "FCT ms"), ("bound", "link-bound")]

    def __init__(self, figures, interrupt_at=None):
        self.figures = figures              # per run: {algo: {field: value}}
        self.calls = 0
        self.interrupt_at = interrupt_at

    def run(self, lab_factory, algos, params, out):
        i = self.calls
        self.calls += 1
        if i == self.interrupt_at:
            raise KeyboardInterrupt
        res = Results(out, self.NAME)
        rows = [{"algo": a, "verdict": "x", **f} for a, f in self.figures[i].items()]
        res.summary("table", {"experiment": self.NAME, "params": params, "results": rows})
        return "table", res.dir


RUNS = [{"hpcc": {"q": 1.0, "fct": 10.0, "bound": True},
         "dcqcn": {"q": 50.0, "fct": 30.0, "bound": False}},
        {"hpcc": {"q": 3.0, "fct": 12.0, "bound": True},
         "dcqcn": {"q": 70.0, "fct": float("nan"), "bound": True}},
        {"hpcc": {"q": 2.0, "fct": 11.0, "bound": False},
         "dcqcn": {"q": 60.0, "fct": 20.0, "bound": False}}]


def test_median_and_spread_of_every_figure(tmp_path, capsys):
    exp = FakeExp(RUNS)
    ticks = iter(range(0, 1000, 10))
    text, folder = reps.run_reps(exp, None, [], {"p": 1}, str(tmp_path), 3,
                                 clock=lambda: next(ticks))
    assert exp.calls == 3
    doc = json.load(open(os.path.join(folder, "reps.json")))
    h, d = doc["results"]
    assert (h["algo"], d["algo"], doc["runs"]) == ("hpcc", "dcqcn", 3)
    assert (h["q"]["median"], h["q"]["min"], h["q"]["max"]) == (2.0, 1.0, 3.0)
    assert h["fct"]["values"] == [10.0, 12.0, 11.0] and h["fct"]["median"] == 11.0
    # NaN in one run: left out, not a zero
    assert d["fct"]["n"] == 2 and d["fct"]["median"] == 25.0 and d["fct"]["min"] == 20.0
    assert h["bound"] == "2/3" and d["bound"] == "1/3"
    assert len(doc["folders"]) == 3 and all(os.path.isdir(f) for f in doc["folders"])
    assert "2 [1-3]" in text and "11 [10-12]" in text and "60 [50-70]" in text
    assert os.path.exists(os.path.join(folder, "reps.png"))
    err = capsys.readouterr().err
    assert "run 1 of 3 done" in err and "about 20 s left" in err and "about 0 s left" in err


def test_fct_rows_by_workload_and_load_and_buckets_by_bucket():
    run = {"results": [
        {"algo": "hpcc", "workload": "websearch", "load": 0.3, "flows": 10,
         "buckets": [{"bucket": "3K", "p99": 2.0}, {"bucket": "12K", "p99": 4.0}]},
        {"algo": "hpcc", "workload": "websearch", "load": 0.5, "flows": 20,
         "buckets": [{"bucket": "3K", "p99": 8.0}]}]}
    run2 = json.loads(json.dumps(run))
    run2["results"][0]["buckets"][0]["p99"] = 6.0
    agg = reps.aggregate([Summary.from_json(run), Summary.from_json(run2)])
    assert [(r["workload"], r["load"]) for r in agg] == [("websearch", 0.3), ("websearch", 0.5)]
    b = agg[0]["buckets"]
    assert [x["bucket"] for x in b] == ["3K", "12K"]
    assert (b[0]["p99"]["median"], b[0]["p99"]["min"], b[0]["p99"]["max"]) == (4.0, 2.0, 6.0)


def test_interrupted_repetition_keeps_the_finished_runs(tmp_path, capsys):
    exp = FakeExp(RUNS, interrupt_at=2)
    with pytest.raises(KeyboardInterrupt):
        reps.run_reps(exp, None, [], {}, str(tmp_path), 3)
    out = capsys.readouterr().out
    assert "2 runs (of 3 asked)" in out
    folder = out.strip().splitlines()[-1].split("results in ")[1]
    doc = json.load(open(os.path.join(folder, "reps.json")))
    assert doc["runs"] == 2 and doc["results"][0]["q"]["values"] == [1.0, 3.0]


def test_interrupt_before_any_run_finished_goes_on(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        reps.run_reps(FakeExp(RUNS, interrupt_at=0), None, [], {}, str(tmp_path), 3)
    assert os.listdir(tmp_path) == []


def test_reps_below_one_refused(tmp_path):
    with pytest.raises(ValueError, match="at least one"):
        reps.run_reps(FakeExp(RUNS), None, [], {}, str(tmp_path), 0)
