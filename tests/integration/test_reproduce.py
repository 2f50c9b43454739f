"""hpccctl reproduce end to end: a small real run (--quick, a few stages,
real labs, real flows) writes the report, and a real SIGTERM in the middle
of a stage leaves no lab behind and keeps the finished stages.

Invariants protected: the command exits 0 and prints where the results and
the report are; the report has a line per claim of [HPCC] section 5, with
the lab's figure taken from the stage's summary.json and a verdict (met /
missed / not run for the stages not selected); the plots are copied beside
the report; fct with incasts on top of its load has the incasts' flows in
its results, every flow byte-exact; a progress line per stage gives the time
left.  Interrupted by SIGTERM: exit 143, the finished stage kept in the
manifest and the report, the interrupted one marked so, and every lab the
run made is gone: no namespace of it in /run/netns, no pin folder in
/sys/fs/bpf/hpccd-lab, no state file."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.bpf]

if os.geteuid() != 0:
    pytest.skip("network namespaces need root", allow_module_level=True)

from hpccd.lab.names import NETNS_DIR  # noqa: E402


def _cli(*args):
    return [sys.executable, "-m", "hpccd.cli.main", "reproduce", *args]


def _gone(labs):
    """What is left of `labs`: namespaces, BPF pin folders."""
    left = []
    if os.path.isdir(NETNS_DIR):
        left += [n for n in os.listdir(NETNS_DIR) if any(n.startswith(f"{lab}-") for lab in labs)]
    left += [p for lab in labs for p in (f"/sys/fs/bpf/hpccd-lab/{lab}",) if os.path.exists(p)]
    return left


def _manifest(out):
    runs = [d for d in os.listdir(out) if d.startswith("reproduce-")]
    assert len(runs) == 1, runs
    folder = os.path.join(out, runs[0])
    with open(os.path.join(folder, "reproduce.json")) as f:
        return folder, json.load(f)


def test_a_small_real_run_writes_the_report(tmp_path):
    out, doc = tmp_path / "out", tmp_path / "doc"
    doc.mkdir()
    report = doc / "results.md"
    r = subprocess.run(_cli("--quick", "--only", "incast,fct-incast", "--out", str(out),
                            "--report", str(report)),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"report {report}" in r.stdout
    assert "run 1 of 2: incast" in r.stderr and "run 2 of 2: fct-incast" in r.stderr
    assert "s left (load average" in r.stderr
    folder, man = _manifest(out)
    assert [(s["key"], s["status"]) for s in man["stages"]] == [("incast", "done"),
                                                                 ("fct-incast", "done")]
    assert not _gone(man["labs"]) and len(man["labs"]) == 2
    text = report.read_text()
    claims = [ln for ln in text.splitlines() if ln.startswith("| [HPCC]")]
    from hpccd.experiment.claims import CLAIMS
    assert len(claims) == len(CLAIMS)
    # the incast claims are measured, and quote the summary's figures
    with open(os.path.join(man["stages"][0]["folder"], "summary.json")) as f:
        inc = {x["algo"]: x for x in json.load(f)["results"]}
    line = next(ln for ln in claims if "near-zero queue" in ln and "incast" in ln)
    assert f"max {inc['hpcc']['q_max'] / 1e3:.3g} KB" in line
    verdict = line.rstrip(" |").rsplit(" | ", 1)[1]
    assert verdict.startswith(("met", "missed by ")), verdict
    line = next(ln for ln in claims if "DCQCN's queue builds up" in ln)
    assert f"DCQCN {inc['dcqcn']['q_max'] / 1e3:.3g} KB" in line
    # stages not selected: said, not guessed
    assert sum("not run: stage mice not run" in ln for ln in claims) == 4
    # fct with incasts on top: the incasts' flows ran, byte-exact like the rest
    with open(os.path.join(man["stages"][1]["folder"], "summary.json")) as f:
        fct = json.load(f)
    for row in fct["results"]:
        assert row["done"] == row["flows"], (row["algo"], row["errors"])
        assert row["incast"]["events"] >= 1
        assert row["incast"]["done"] == row["incast"]["flows"] == \
            row["incast"]["events"] * row["incast"]["flows_each"]
    line = next(ln for ln in claims if "120 KB is the lowest" in ln)
    assert "incasts of 4 x 100 KB" in line
    for png in ("incast/incast.png", "fct-incast/fct.png"):
        assert (doc / "results" / png).stat().st_size > 1000
        assert f"(results/{png})" in text


@pytest.mark.parametrize("delay", [0.5, 4.0])
def test_sigterm_leaves_no_lab_and_keeps_the_finished(tmp_path, delay):
    """SIGTERM while the second stage's lab is being built (0.5 s) and while
    its engines and flows run (4 s)."""
    out = tmp_path / "out"
    p = subprocess.Popen(_cli("--quick", "--only", "incast,mice,fairness", "--out", str(out)),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # wait until the second stage has made its lab (the run's labs.txt)
        deadline = time.monotonic() + 180
        labs: list = []
        while time.monotonic() < deadline and p.poll() is None and len(labs) < 2:
            time.sleep(0.2)
            runs = list(out.glob("reproduce-*/labs.txt")) if out.exists() else []
            labs = runs[0].read_text().split() if runs else []
        assert len(labs) == 2, "the second stage never started"
        time.sleep(delay)                      # building the lab, or engines and flows running
        p.send_signal(signal.SIGTERM)
        stdout, stderr = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    folder, man = _manifest(out)
    assert [(s["key"], s["status"]) for s in man["stages"]] == [("incast", "done"),
                                                                 ("mice", "interrupted")]
    assert man["labs"] == labs
    assert not _gone(man["labs"]), _gone(man["labs"])
    assert not any(os.path.exists(f"/run/hpccd/lab-{lab}.json") for lab in labs)
    assert os.path.exists(os.path.join(man["stages"][0]["folder"], "incast.png"))
    text = open(os.path.join(folder, "results.md")).read()
    assert "**Interrupted** in stage `mice`" in text
    assert "not run: stage mice interrupted" in text
    assert "![incast: incast.png](results/incast/incast.png)" in text
