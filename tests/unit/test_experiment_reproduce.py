"""hpccctl reproduce (hpccd.experiment.reproduce, claims) without a lab:
stand-in experiment modules whose run() writes the summary.json a real one
writes, with known figures.

Invariants protected: every stage runs in order, each in its own results
folder under the run's folder, and the manifest (reproduce.json) is
rewritten after each with the folder, the seconds and the load averages; a
progress line per stage gives the stages done and the time left, scaled by
how the finished stages compared with their estimates; a stage that fails
is recorded with its error and the rest still runs (exit 1); a SIGTERM in
the middle of a stage stops the run there, keeps the finished stages,
writes the report from them and exits 128 + 15; a forked child of the run
gets the signal's default action, not the run's handler; the report's
verdicts follow the claims' thresholds from the figures (met, missed with
the row's own bottleneck verdict and the load average as the reason, not
run with the reason); the lab's figure quotes the summary's numbers; plots
are copied beside the report; --from rewrites a report from a folder and
refuses one that is not a run's with a clear message."""
from __future__ import annotations

import json
import os
import signal

import pytest

import hpccd.experiment as experiment
from hpccd.experiment import claims, reproduce
from hpccd.experiment.report import Results
from hpccd.experiment.reproduce import Stage


def _incast_row(algo, q_p99_bdp, drain_rtts, q_max, util=0.9, verdict="link-bound, as intended"):
    # drain_rtts: from the queue's peak (what the claim judges); the peak
    # came 100 RTTs into the incast, so from t0 it is 100 more
    return {"algo": algo, "q_p99": q_p99_bdp * 3000, "q_p99_bdp": q_p99_bdp, "bdp_bytes": 3000,
            "q_max": q_max, "drain_peak_rtts": drain_rtts, "drain_rtts": drain_rtts + 100,
            "drain_s": (drain_rtts + 100) * 25e-6, "peak_s": 100 * 25e-6,
            "base_rtt_s": 25e-6, "link_bps": 10**9, "backlog_longest_rtts": drain_rtts,
            "fct_max_s": 0.04, "utilisation": util, "long_during_bps": 2e8,
            "verdict": verdict}


class FakeExp:
    """An experiment module: NAME, run() writing summary.json (and a plot)."""

    def __init__(self, name, rows, action=None):
        self.NAME = name
        self.rows = rows
        self.action = action                # called inside run(): raise, signal, ...
        self.calls = []

    def run(self, lab_factory, algos, params, out):
        self.calls.append(([a.name for a in algos], dict(params)))
        if self.action:
            self.action()
        res = Results(out, self.NAME)
        res.summary(f"summary of {self.NAME}", {"experiment": self.NAME, "params": params,
                                                "results": self.rows, "skipped": {}})
        with open(res.path(f"{self.NAME}.png"), "wb") as f:
            f.write(b"\x89PNG fake")
        return "text", res.dir


@pytest.fixture
def fake_exps(monkeypatch):
    def install(**mods):
        for name, mod in mods.items():
            monkeypatch.setitem(experiment.EXPERIMENTS, name, mod)
    return install


class Clock:
    def __init__(self, steps):
        self.t = 0.0
        self.steps = iter(steps)

    def __call__(self):
        self.t += next(self.steps, 0.0)
        return self.t


def test_stages_run_in_order_with_progress_and_a_report(tmp_path, fake_exps, capsys):
    inc = FakeExp("incast", [_incast_row("hpcc", 0.5, 2.0, 4000),
                             _incast_row("dcqcn", 9.0, 300, 120_000)])
    mice = FakeExp("mice", [{"algo": "hpcc", "link_bps": 1e9, "idle_p50_us": 22.0,
                             "q_p50": 0, "q_p99": 1500, "rtt_p50_us": 100, "rtt_p99_us": 400,
                             "p99_over_idle": 400 / 22, "verdict": "CPU-bound: the hosts could "
                                                                  "not fill the link (x)"}])
    fake_exps(incast=inc, mice=mice)
    stages = [Stage("incast", "incast", "the incast", {"senders": 3}, cost=(10, 10)),
              Stage("mice", "mice", "the mice", {"warmup": 0.1}, algos="hpcc", cost=(10, 10))]
    # estimates 10 + 10 x 3 algorithms = 40 s and 10 + 10 = 20 s; the first
    # stage takes 60 s: the second's estimate is scaled by 60 / 40
    clock = Clock([0, 0, 0, 60, 0, 0, 1, 0])
    report = str(tmp_path / "doc" / "results.md")
    status, folder, path = reproduce.run(stages, "hpcc,dcqcn,dctcp", str(tmp_path), lambda t: t,
                                         report, clock=clock, in_process=True)
    assert status == 0 and path == report
    assert inc.calls == [(["hpcc", "dcqcn", "dctcp"], {"senders": 3})]
    assert mice.calls == [(["hpcc"], {"warmup": 0.1})]
    err = capsys.readouterr().err
    assert "run 1 of 2: incast (the incast); 0 done in 0 s, about 60 s left" in err
    assert "run 2 of 2: mice (the mice); 1 done in 60 s, about 30 s left" in err
    man = json.load(open(os.path.join(folder, "reproduce.json")))
    assert [(s["key"], s["status"]) for s in man["stages"]] == [("incast", "done"),
                                                                 ("mice", "done")]
    for s in man["stages"]:
        assert os.path.dirname(s["folder"]) == folder
        assert len(s["load_before"]) == 3 and len(s["load_after"]) == 3
    text = open(report).read()
    lines = {ln.split(" | ")[1]: ln for ln in text.splitlines() if ln.startswith("| [HPCC]")}
    # incast: p99 0.5 BDP <= 1: met; drained in 2 RTTs <= 3: met; 4 KB < 120 KB: met
    q = lines["incast: HPCC absorbs an incast into a long flow with a near-zero queue"]
    assert "= 0.5 BDP" in q and q.endswith("| met |")
    assert lines[next(k for k in lines if k.startswith("incast resolved"))].endswith("| met |")
    assert "DCQCN 120 KB" in lines["DCQCN's queue builds up far higher than HPCC's in the "
                                   "incast"]
    # mice: 1.5 KB queue <= 1 BDP (2.75 KB): met; p99 18.2x the idle p50: missed,
    # with the row's verdict, the near-empty queue and the load as the reason
    lat = lines["HPCC's mice see base-RTT latency"]
    assert "missed by 12.1x the bound because the queue p99 was 1.5 KB, so the time is the " \
           "hosts' scheduling" in lat
    assert "hpcc: CPU-bound: the hosts could not fill the link (x); load average" in lat
    assert lines["HPCC keeps a near-zero queue with mice beside two elephants"].endswith("met |")
    # claims whose stage did not run, or whose algorithm is missing
    assert "not run: stage fct not run" in lines["HPCC and DCQCN have similar median slowdowns"]
    assert "not run: no dcqcn row in stage mice (not in --algos)" in \
        lines[next(k for k in lines if k.startswith("DCQCN keeps a standing queue"))]
    assert "## The claims of [HPCC] section 5: 4 of 5 measured claims met (0 of them on runs " \
           "that were not link-bound)" in text
    assert os.path.exists(tmp_path / "doc" / "results" / "incast" / "incast.png")
    assert "![incast: incast.png](results/incast/incast.png)" in text
    assert "    summary of mice" in text
    # the report again from the folder alone
    again = tmp_path / "again.md"
    assert reproduce.main(_args(from_dir=folder, report=str(again))) == 0
    assert again.read_text().split("## The runs")[0] == text.split("## The runs")[0]


def _args(**kw):
    import argparse
    base = {"from_dir": None, "report": None, "quick": True, "algos": None, "only": None,
            "out": "results"}
    return argparse.Namespace(**{**base, **kw})


def test_a_failed_stage_is_recorded_and_the_rest_runs(tmp_path, fake_exps, capsys):
    def boom():
        raise RuntimeError("engine would not start")
    fake_exps(incast=FakeExp("incast", [], boom), mice=FakeExp("mice", []))
    stages = [Stage("incast", "incast", "i", {}), Stage("mice", "mice", "m", {})]
    status, folder, path = reproduce.run(stages, "hpcc", str(tmp_path), lambda t: t,
                                         in_process=True)
    assert status == 1
    man = json.load(open(os.path.join(folder, "reproduce.json")))
    assert [(s["key"], s["status"], s.get("error")) for s in man["stages"]] == [
        ("incast", "failed", "engine would not start"), ("mice", "done", None)]
    assert "incast failed: engine would not start; the rest goes on" in capsys.readouterr().err
    text = open(path).read()
    assert "not run: stage incast failed: engine would not start" in text


def test_sigterm_stops_at_the_stage_and_keeps_the_finished(tmp_path, fake_exps, capsys):
    """A real SIGTERM to this process in the middle of the second stage."""
    seen = {}

    def term():
        os.kill(os.getpid(), signal.SIGTERM)
        seen["after"] = True                # not reached: the handler raised
    inc = FakeExp("incast", [_incast_row("hpcc", 0.2, 1.0, 3000)])
    fake_exps(incast=inc, mice=FakeExp("mice", [], term), fairness=FakeExp("fairness", []))
    stages = [Stage("incast", "incast", "i", {}), Stage("mice", "mice", "m", {}),
              Stage("fairness", "fairness", "f", {})]
    before = signal.getsignal(signal.SIGTERM)
    status, folder, path = reproduce.run(stages, "hpcc", str(tmp_path), lambda t: t,
                                         in_process=True)
    assert status == 128 + signal.SIGTERM
    assert "after" not in seen
    assert signal.getsignal(signal.SIGTERM) is before          # handlers restored
    man = json.load(open(os.path.join(folder, "reproduce.json")))
    assert [(s["key"], s["status"]) for s in man["stages"]] == [("incast", "done"),
                                                                 ("mice", "interrupted")]
    assert man["interrupted"] == "mice"
    assert "interrupted in mice" in capsys.readouterr().err
    text = open(path).read()
    assert "**Interrupted** in stage `mice`" in text
    assert "HPCC queue p99 0.6 KB = 0.2 BDP" in text
    assert "not run: stage mice interrupted" in text


def test_each_stage_runs_in_a_child_that_the_signal_is_passed_to(tmp_path, fake_exps,
                                                                   capsys):
    """Without in_process: a stage's child process SIGTERMs the run (as a
    user would) and goes on; the run passes SIGINT on to the child, whose
    stage unwinds (KeyboardInterrupt), and the run keeps the stage before
    and exits 143; the child's labs file gives the labs it made."""
    import time

    def term_then_wait():
        with open(os.path.join(tmp_path, "child.pid"), "w") as f:
            f.write(str(os.getpid()))
        os.kill(os.getppid(), signal.SIGTERM)
        time.sleep(30)                      # interrupted by the SIGINT passed on
        raise AssertionError("the child was not interrupted")

    def factory(topo):
        class Lab:
            name = "xfake1234"
        return Lab()

    inc = FakeExp("incast", [_incast_row("hpcc", 0.2, 1.0, 3000)])
    fake_exps(incast=inc, mice=FakeExp("mice", [], term_then_wait))
    stages = [Stage("incast", "incast", "i", {}), Stage("mice", "mice", "m", {})]
    t = time.monotonic()
    status, folder, path = reproduce.run(stages, "hpcc", str(tmp_path), factory)
    assert time.monotonic() - t < 20
    assert status == 128 + signal.SIGTERM
    child = int(open(os.path.join(tmp_path, "child.pid")).read())
    assert child != os.getpid()
    man = json.load(open(os.path.join(folder, "reproduce.json")))
    assert [(s["key"], s["status"]) for s in man["stages"]] == [("incast", "done"),
                                                                 ("mice", "interrupted")]
    assert inc.calls == []                  # ran in the child, not here
    assert os.path.exists(os.path.join(man["stages"][0]["folder"], "summary.json"))
    err = capsys.readouterr().err
    assert "signal 15: stopping the stage in progress" in err
    assert "HPCC queue p99 0.6 KB = 0.2 BDP" in open(path).read()


def test_resume_runs_what_did_not_finish_and_redoes_what_is_asked(tmp_path, fake_exps,
                                                                   capsys):
    calls = []

    def count(name):
        return lambda: calls.append(name)
    rows = [_incast_row("hpcc", 0.2, 1.0, 3000)]

    def term():
        calls.append("mice")
        os.kill(os.getpid(), signal.SIGTERM)
    fake_exps(incast=FakeExp("incast", rows, count("incast")), mice=FakeExp("mice", [], term))
    stages = [Stage("incast", "incast", "i", {}), Stage("mice", "mice", "m", {}),
              Stage("fairness", "fairness", "f", {})]
    fake_exps(fairness=FakeExp("fairness", [], count("fairness")))
    status, folder, _ = reproduce.run(stages, "hpcc", str(tmp_path), lambda t: t,
                                      in_process=True)
    assert status == 143 and calls == ["incast", "mice"]
    # resumed: the interrupted and the unstarted stages run, the finished one is kept
    calls.clear()
    fake_exps(mice=FakeExp("mice", [], count("mice")))
    status, again, path = reproduce.run(stages, "hpcc", str(tmp_path), lambda t: t,
                                        in_process=True, resume=folder)
    assert status == 0 and again == folder and calls == ["mice", "fairness"]
    man = json.load(open(os.path.join(folder, "reproduce.json")))
    assert [(e["key"], e["status"]) for e in man["stages"]] == [
        ("incast", "done"), ("mice", "done"), ("fairness", "done")]
    assert man["interrupted"] is None and len(man["resumed"]) == 1
    assert "**Interrupted**" not in open(path).read()
    # redo: a finished stage again, in its place
    calls.clear()
    first = man["stages"][0]["folder"]
    reproduce.run(stages, "hpcc", str(tmp_path), lambda t: t, in_process=True, resume=folder,
                  redo=("incast",))
    man = json.load(open(os.path.join(folder, "reproduce.json")))
    assert calls == ["incast"] and man["stages"][0]["key"] == "incast"
    assert man["stages"][0]["folder"] != first
    with pytest.raises(reproduce.UsageError, match="not a reproduce run's manifest"):
        reproduce.run(stages, "hpcc", str(tmp_path), lambda t: t, in_process=True,
                      resume=str(tmp_path / "nothing"))


def test_a_forked_child_gets_the_default_action(tmp_path):
    """pyroute2's netns helpers are forked children, stopped by SIGTERM: the
    run's handler must not unwind the run's stack in them."""
    with reproduce._Signals():
        pid = os.fork()
        if pid == 0:
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                signal.pause()
            finally:
                os._exit(7)                  # reached only if the handler returned
        _, st = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(st) and os.WTERMSIG(st) == signal.SIGTERM


def test_verdict_thresholds_by_hand():
    def stages(**docs):
        man = {"stages": [{"key": k, "status": "done", "load_before": [1.0, 1, 1],
                           "load_after": [2.0, 1, 1]} for k in docs], "cpus": 2}
        return claims.Stages(man, {k: {"results": v} for k, v in docs.items()})
    by = {c.judge.__name__: c for c in claims.CLAIMS}
    # drain "never" (null in summary.json) is a miss, not "not measured"
    s = stages(incast=[{**_incast_row("hpcc", 0.1, 0, 100), "drain_rtts": None,
                        "drain_s": None, "drain_peak_rtts": None}])
    o = by["_incast_drain"].judge(s)
    assert o.verdict.startswith("missed by never reached because")
    assert "load average 1.0 -> 2.0 on 2 CPUs" in o.verdict
    # the drain is judged from the queue's peak, not from the incast's start:
    # a peak 100 RTTs in that is gone 2 RTTs later is met ([HPCC] Figure 9d)
    o = by["_incast_drain"].judge(stages(incast=[_incast_row("hpcc", 0.1, 2.0, 100)]))
    assert o.verdict == "met"
    assert "drained 2 base RTTs after its peak of 0.1 KB, 2.5 ms into the incast" in o.lab
    assert "(102 RTTs from the incast's start)" in o.lab
    # a miss says the floor any reactive sender has: one loaded round trip
    # (from the stage's params) plus the peak's transmission at line rate
    docs = {"incast": {"results": [_incast_row("hpcc", 0.1, 20.0, 12_500)],
                       "params": {"loaded_rtt_us": 100.0, "T_us": 120.0}}}
    o = by["_incast_drain"].judge(claims.Stages(
        {"stages": [{"key": "incast", "status": "done"}], "cpus": 2}, docs))
    assert "drained 20 base RTTs (4.17 T) after its peak of 12.5 KB" in o.lab
    assert o.verdict.startswith("missed by 6.67x the bound because a backlog lasts at least "
                                "one loaded round trip (100 us) plus its transmission at line "
                                "rate: 8 base RTTs for this peak")
    # long-short: a miss on the line rate says the long flow's own rate before
    # and how its window came back, measured
    ls = {"algo": "hpcc", "recovery_s": None, "recovery_rtts": None, "line_bps": 10**9,
          "long_before_bps": 4e8, "recovery_own_rtts": 12.0, "w_low": 0.5,
          "w_back_rtts": 14.0, "w_back_updates": 6, "srtt_T": 2.0, "verdict": "CPU-bound: x"}
    o = by["_ls_recovery"].judge(stages(**{"long-short": [ls]}))
    assert o.verdict.startswith(
        "missed by never reached because alone before the short flow the long flow ran at "
        "400 Mbit/s (40% of line rate), back at 90 % of that in 12 RTTs; its smoothed RTT "
        "alone was 2 T, so its window cap B x T let it deliver at most 50% of line rate; "
        "its window fell to "
        "0.5 of its level before and was back at 90 % 14 RTTs (6 W^c updates) after the short "
        "flow ended; hpcc: CPU-bound: x"), o.verdict
    # an RTT below T: the cap is not what held it
    o = by["_ls_recovery"].judge(stages(**{"long-short": [{**ls, "srtt_T": 0.8}]}))
    assert "its smoothed RTT alone was 0.8 T: the window cap B x T did not hold it back" \
        in o.verdict and "at most" not in o.verdict
    # no window read (w_low null): that part is left out, not made up
    o = by["_ls_recovery"].judge(stages(**{"long-short": [{**ls, "w_low": None,
                                                            "srtt_T": None}]}))
    assert "window" not in o.verdict and "12 RTTs; hpcc: CPU-bound" in o.verdict
    # exactly at the bound is met
    s = stages(incast=[_incast_row("hpcc", 1.0, 3.0, 100)])
    assert by["_incast_queue"].judge(s).verdict == "met"
    assert by["_incast_drain"].judge(s).verdict == "met"
    # fairness: 0.98 met, 0.97 missed by 0.01
    for jmin, want in ((0.98, "met"), (0.97, "missed by 0.01")):
        s = stages(fairness=[{"algo": "hpcc", "jain_min": jmin, "jain_median": 0.99,
                              "verdict": "v"}])
        assert by["_fairness"].judge(s).verdict.startswith(want)
    # a miss at a B x T under the frames HPCC converges from says so first,
    # and whether W_AI was the rule of thumb's (no convergence there without
    # the CPUs either) or its floor (converges: the hosts held it)
    def fair(frames, rule=None):
        p = {"bxt_frames": frames, **({"w_ai_floor_from": rule} if rule else {})}
        return claims.Stages({"stages": [{"key": "fairness", "status": "done"}], "cpus": 2},
                             {"fairness": {"results": [{"algo": "hpcc", "jain_min": 0.7,
                                                        "jain_median": 0.8, "verdict": "v"}],
                                           "params": p}})
    v = by["_fairness"].judge(fair(23.9)).verdict
    assert v.startswith("missed by 0.28 (Jain min below 0.98) because B x T was 23.9 frames "
                        "(a queued frame 0.042 of U), under the 80 from which HPCC converged "
                        "to Jain 0.98 with the rule of thumb's W_AI"), v
    assert v.endswith("; hpcc: v"), v
    v = by["_fairness"].judge(fair(23.9, 18.1)).verdict
    assert ("B x T was 23.9 frames (a queued frame 0.042 of U) and W_AI at its floor (the "
            "rule of thumb gave 18.1 bytes)") in v and "so the hosts held it; hpcc: v" in v, v
    assert "B x T" not in by["_fairness"].judge(fair(90.0)).verdict
    # fct: the smallest bucket with 20 flows of both, not one of a single flow
    def fct_row(algo, load, p99s, ns):
        return {"algo": algo, "workload": "websearch", "load": load, "verdict": "v",
                "buckets": [{"bucket": f"b{i}", "n": n, "p99": x}
                            for i, (x, n) in enumerate(zip(p99s, ns))]}
    s = stages(fct=[fct_row("hpcc", 0.3, [1.0, 9.0, 2.0], [1, 19, 30]),
                    fct_row("dcqcn", 0.3, [50.0, 3.0, 4.0], [1, 40, 30])])
    k = next(i for i, c in enumerate(claims.CLAIMS) if c.text.startswith("WebSearch"))
    o = claims.CLAIMS[k].judge(s)
    assert "30% (b2, 30 flows): HPCC 2, DCQCN 4" in o.lab and o.verdict == "met", o
    s = stages(fct=[fct_row("hpcc", 0.3, [1.0], [5]), fct_row("dcqcn", 0.3, [2.0], [5])])
    assert claims.evaluate(s)[k]["verdict"].startswith("not run: no size bucket with 20 flows")
    # txRate vs rxRate: the link use swings 1.25x as much while converging
    for sd, want in ((0.25, "met (rxRate's link use swings 1.25x"),
                     (0.24, "missed: rxRate's link use swings only 1.2x")):
        s = stages(txrate=[{"variant": "txRate", "use_sd_early": 0.2, "q_sd_kb": 0.4},
                           {"variant": "rxRate", "use_sd_early": sd, "q_sd_kb": 0.5,
                            "verdict": "v"}])
        assert by["_txrate"].judge(s).verdict.startswith(want)


def test_select_and_cli_errors(tmp_path, capsys):
    assert [s.key for s in reproduce.select(reproduce.QUICK, "mice,incast")] == ["incast",
                                                                                "mice"]
    with pytest.raises(reproduce.UsageError, match="stages are incast, long-short"):
        reproduce.select(reproduce.FULL, "incast,nope")
    assert reproduce.main(_args(from_dir=str(tmp_path))) == 2
    err = capsys.readouterr().err
    assert err.startswith("hpccctl reproduce --from: ") and "reproduce.json" in err
    assert "Traceback" not in err
    # every stage names an experiment that exists, algorithms that parse,
    # and the full set covers what the docs promise
    for st in reproduce.FULL + reproduce.QUICK:
        assert st.exp in experiment.EXPERIMENTS
        assert reproduce.estimate_s(st, 8) > 0
    assert {s.key for s in reproduce.FULL} == {s.key for s in reproduce.QUICK}
    assert {c.stage for c in claims.CLAIMS} <= {s.key for s in reproduce.FULL}
