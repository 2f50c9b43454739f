"""The experiment runner end to end (hpccd.experiment): a small incast
with kernel TCP in a lab of its own, results written and consistent.

Invariants protected: every incast flow's bytes arrive and its completion
time is no shorter than the bottleneck can carry; the queue the INT
switch's sampler recorded really built up (cubic fills it: three 200 KB
bursts into one 1 Gbit/s port) and drained; the long flow gets the link
back afterwards; the results folder has the CSV, plot and summary the docs
promise, and the summary's figures are the CSV's; an algorithm the kernel
does not have is skipped with its reason, not a crash."""
from __future__ import annotations

import csv
import json
import math
import os

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.bpf]

if os.geteuid() != 0:
    pytest.skip("network namespaces need root", allow_module_level=True)

from hpccd.experiment import incast  # noqa: E402
from hpccd.experiment.algos import parse_algos  # noqa: E402


def test_small_incast_with_cubic(tmp_path):
    from conftest import lab_ctx

    params = {"senders": 3, "size": 200_000, "warmup": 0.5, "observe": 0.6}
    text, folder = incast.run(lab_ctx, parse_algos("cubic,hpcc,hpcc-probe"),
                              params, str(tmp_path))
    files = set(os.listdir(folder))
    assert {"summary.txt", "summary.json", "incast.png", "queue_cubic.csv",
            "long_flow_cubic.csv", "queue_hpcc.csv"} <= files
    doc = json.load(open(os.path.join(folder, "summary.json")))
    r, h, hp = doc["results"]
    assert (r["algo"], h["algo"], hp["algo"]) == ("cubic", "hpcc", "hpcc-probe")
    assert not doc.get("skipped")
    # native HPCC flows over AF_XDP, INT in every packet and in probes once
    # per RTT: every incast flow delivered, no faster than the link allows
    for x in (h, hp):
        assert 3 * 200_000 * 8 / x["link_bps"] <= x["fct_max_s"] < 2.0, x["fct_max_s"]
        assert x["long_before_bps"] > 0
    line_s = 3 * 200_000 * 8 / r["link_bps"]
    assert line_s <= r["fct_max_s"] < 0.5, r["fct_max_s"]
    # four senders at line rate into one port: a queue builds (how much
    # depends on how fast two shared cores push the bursts out)
    assert r["q_max"] > 3 * 1514, r["q_max"]
    # cubic's long flow may keep the queue it grew (drain "never", null)
    assert r["drain_s"] is None or 0 < r["drain_s"] < 0.6
    assert r["long_after_bps"] > 0.5 * r["link_bps"]
    with open(os.path.join(folder, "queue_cubic.csv")) as f:
        rows = list(csv.DictReader(f))
    assert max(int(x["backlog_bytes"]) for x in rows
               if 0 <= float(x["t_ms"]) <= 600) == r["q_max"]
    tx = [int(x["tx_bytes"]) for x in rows]
    assert tx == sorted(tx)                       # the port's byte counter only grows
    assert "cubic" in text and "hpcc-probe" in text and "skipped" not in text
    # T from the lab's RTT under this experiment's load (issue 15 section 4):
    # four capped HPCC flows, the bottleneck left empty, T = 1.2 x the RTT
    # rounded up; N the paper's 100, not the 4 flows started; where the
    # native flows' sending time went
    from hpccd.experiment import loaded_rtt
    p = doc["params"]
    assert p["loaded_rtt_us"] > 0 and p["loaded_rtt_q_p99_bytes"] < 3 * 1514, p
    assert p["T_us"] * 1000 == loaded_rtt.T_from_rtt(p["loaded_rtt_us"] / 1e6), p
    assert p["hpcc_N"] == 100 and p["flows_started"] == 4, p
    assert f"T = {p['T_us']:g} us (1.2 x the loaded RTT" in text
    assert "N = 100" in text and "at most 4 flows" in text
    # W_AI's floor where the bottleneck's B x T is under 80 frames
    # (docs/experiments.md "Fairness and B x T"), with the rule's value beside it
    assert ("W_AI = 160 bytes, the floor at a B x T under 80 frames" in text) == \
        (p["bxt_frames"] < 80), (p["bxt_frames"], text)
    for x in (h, hp):
        assert 0 <= x["wnd_limited"] < 1 and 0 <= x["pace_lost"] < 1, x
        assert x["timer_late_us"] >= 0, x
    assert "wnd_limited" not in r                 # kernel TCP has no such counters


def test_long_short_and_fairness_read_rates_off_the_switch(tmp_path):
    from conftest import lab_ctx

    from hpccd.experiment import fairness, longshort

    text, folder = longshort.run(lab_ctx, parse_algos("hpcc,cubic"),
                                 {"size": 300_000, "warmup": 0.5, "after": 0.3}, str(tmp_path))
    h, r = json.load(open(os.path.join(folder, "summary.json")))["results"]
    # the native flow's window, read from its engine: its least while the
    # short flow ran over its level before, and when it was back (None:
    # never); a kernel flow has none.  Whether W falls is the hosts' doing
    # here: when they hold the long flow below the link (CPU-bound, 67-74 %
    # of it), the two flows together may not fill it, U stays below eta and
    # W grows (1.04 in one CI run; docs/experiments.md: W low 0.78-1 under
    # load); the harness tests Algorithm 1's reaction without the hosts
    assert h["algo"] == "hpcc" and 0 < h["w_low"] < math.inf, h
    assert h["w_back_rtts"] is None or h["w_back_rtts"] >= 0, h
    assert h["w_back_updates"] is None or h["w_back_updates"] >= 0, h
    assert h["recovery_own_rtts"] is None or h["recovery_own_rtts"] >= 0, h
    assert r["w_low"] is None and r["w_back_rtts"] is None, r
    assert "W back RTTs" in text and "to own rate RTTs" in text
    line = r["line_bps"]
    # alone: a good part of the link (cubic on the two shared cores; the
    # lab switch's departure stamp costs CPU per packet: 0.495 of the link
    # in one CI run)
    assert 0.4 * line < r["long_before_bps"] < 1.05 * line
    assert r["short_fct_s"] >= 300_000 * 8 / line       # no faster than the whole link
    assert r["recovery_s"] is None or r["recovery_s"] >= 0
    assert {"long-short.png", "rates_cubic.csv"} <= set(os.listdir(folder))

    text, folder = fairness.run(lab_ctx, parse_algos("cubic"),
                                {"flows": 2, "step": 0.6}, str(tmp_path))
    (r,) = json.load(open(os.path.join(folder, "summary.json")))["results"]
    assert [ph["flows"] for ph in r["phases"]] == [1, 2, 1]
    for ph in r["phases"]:
        # together no more than the bottleneck carries, and every active flow gets some
        assert ph["sum_bps"] < 1.05 * r["line_bps"], ph
        assert all(x > 0.05 * r["line_bps"] for x in ph["rates_bps"]), ph
    assert 0.5 <= r["phases"][1]["jain"] <= 1.0
    # the same over the whole phase, the join's convergence included (issue 15)
    assert 0.5 <= r["phases"][1]["jain_whole"] <= 1.0
    assert r["jain_min_whole"] == r["phases"][1]["jain_whole"], r
    assert "over whole phases (joins included)" in text
    assert {"fairness.png", "rates_cubic.csv"} <= set(os.listdir(folder))


def test_tcp_hpcc_rows_say_their_senders_trains(tmp_path):
    """tcp-hpcc in an experiment: the senders' GSO trains are capped at
    trains.segs_for of the bottleneck's B x T (an eighth, at least 2; not
    the one-host rule within one BDP of the base RTT, docs/tcp-side.md),
    said in the summary and its params; the long flow runs under hpccd's
    CC, and a native row after it gets its engines back.  The tcp-hpcc row
    says how much of the link HPCC's rates asked for and how much of that
    its flows sent (its engines' totals), and how late the kernel's pacing
    timers were (kernel_cc.PaceLog); the native row has its own send time."""
    from conftest import lab_ctx

    from hpccd.experiment import longshort
    from hpccd.tcp_side import trains

    text, folder = longshort.run(lab_ctx, parse_algos("tcp-hpcc,hpcc"),
                                 {"size": 300_000, "warmup": 0.5, "after": 0.3}, str(tmp_path))
    doc = json.load(open(os.path.join(folder, "summary.json")))
    k, h = doc["results"]
    assert (k["algo"], h["algo"]) == ("tcp-hpcc", "hpcc") and not doc.get("skipped"), doc
    t = doc["params"]["tcp_hpcc_trains"]
    assert t["bottleneck_bps"] == k["line_bps"] and t["T_us"] == doc["params"]["T_us"], t
    assert t["segs"] == trains.segs_for(t["bottleneck_bps"], t["T_us"] * 1e3) >= 2, t
    assert f"tcp-hpcc: the senders' GSO trains at most {t['segs']} segments" in text
    assert 0.2 * k["line_bps"] < k["long_before_bps"] < 1.05 * k["line_bps"], k
    assert 0 < h["long_before_bps"] < 1.05 * h["line_bps"], h
    # the long flow ran all along: HPCC asked for a real share of the link
    # (each flow up to the link's rate on its own), and sent part of it
    assert 0.2 < k["asked"] <= 2.5, k
    assert 0 <= k["pace_lost"] < 1 and k["timer_late_us"] > 0, k
    (kv,) = [ln for ln in text.splitlines() if ln.startswith("tcp-hpcc: ")
             and "utilised" in ln]
    assert f"the algorithm's rates asked for {k['asked']:.0%} of it" in kv, kv
    assert f"its flows sent {1 - k['pace_lost']:.0%} of that" in kv, kv
    assert "late pacing timer" in kv and "us late on average" in kv, kv
    assert h.get("asked") is None and 0 <= h["pace_lost"] <= 1, h


def test_tcp_hpcc_trains_from_the_queue(tmp_path, monkeypatch):
    """--tcp-trains queue: each tcp-hpcc sender's cap starts at the eighth of
    B x T and follows its pacer and the queue its probes find, as the
    daemon's trains_from_pacer (TcpSide.retrain at each poll): decisions
    were made while the flows ran, each within [2, half of B x T] of the T
    it was made for (the flows' own, from their RTTs), the cap in force at
    the end is the last one's, and the summary says so."""
    from conftest import lab_ctx

    from hpccd.experiment import kernel_cc, longshort

    monkeypatch.setattr(kernel_cc, "TRAINS", "queue")
    text, folder = longshort.run(lab_ctx, parse_algos("tcp-hpcc"),
                                 {"size": 300_000, "warmup": 0.5, "after": 0.3}, str(tmp_path))
    doc = json.load(open(os.path.join(folder, "summary.json")))
    t = doc["params"]["tcp_hpcc_trains"]
    assert t["mode"] == "queue" and t["decisions"] >= 1, t
    assert t["decided"], t
    for h, d in t["decided"].items():
        half = int(d["bottleneck_bps"] / 8 * d["T_us"] * 1e-6 / 2 // 1448)
        assert 2 <= d["segs"] <= max(2, half) and t["last"][h] == d["segs"], (h, d, t)
    assert f"--tcp-trains queue, {t['decisions']} decisions" in text, text


def test_the_main_job_lab_demo_runs_end_to_end(tmp_path):
    """README's first command (scripts/run.sh demo -> hpccctl demo): both
    tables, every algorithm measured (none skipped), the plots written."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "hpccd.cli.main", "demo", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout
    assert "== incast" in out and "== mice" in out
    for algo in ("hpcc", "tcp-dctcp", "cubic"):
        assert sum(1 for ln in out.splitlines() if ln.startswith(algo + " ")) == 2, (algo, out)
    assert "skipped" not in out, out
    pngs = sorted(p.name for p in tmp_path.glob("*/*.png"))
    assert pngs == ["incast.png", "mice.png"], pngs
    # where a native mouse's time went, from its sender engine's clock: its
    # round trip (DATA stamped -> ACK taken) and the hand-off before it, which
    # add up to its completion time (issue 15 section 4)
    (mice,) = [p for p in tmp_path.glob("mice-*/summary.json")]
    (h,) = [r for r in json.load(open(mice))["results"] if r["algo"] == "hpcc"]
    assert 0 < h["net_p50_us"] <= h["net_p99_us"], h
    assert 0 <= h["hand_p50_us"] <= h["hand_p99_us"], h
    assert h["net_p50_us"] + h["hand_p50_us"] <= 1.5 * h["rtt_p99_us"], h
    assert h["idle_net_p50_us"] > 0 and h["idle_hand_p50_us"] >= 0, h
    assert "where the hpcc mice's time went" in out


def test_txrate_vs_rxrate_runs_both_variants_and_restores_the_port(tmp_path):
    from conftest import lab_ctx

    from hpccd._bpf import ffi, lib
    from hpccd.experiment import txrate

    seen = {}

    def factory(topo):
        cm = lab_ctx(topo)

        class Wrap:
            def __enter__(self):
                self.lab = cm.__enter__()
                seen["lab"] = self.lab
                return self.lab

            def __exit__(self, *exc):
                sp = self.lab.int_switch.ports[("s1", 3)]
                raw = self.lab.int_switch.objs["s1"].map("hpccd_sw_ports").lookup(sp.ifindex)
                want = self.lab.int_switch.port_struct("s1", 3)
                seen["restored"] = raw == ffi.buffer(want)[:]
                seen["rx_bytes_off"] = not want.flags & lib.HPCCD_SW_F_RX_BYTES
                return cm.__exit__(*exc)
        return Wrap()

    text, folder = txrate.run(factory, None, {"duration": 0.8}, str(tmp_path))
    doc = json.load(open(os.path.join(folder, "summary.json")))
    assert [r["variant"] for r in doc["results"]] == ["txRate", "rxRate"]
    for r in doc["results"]:
        assert all(b > 0 for b in r["flow_bps"]), r      # both flows delivered data
        assert r["utilisation"] <= 1.05
    assert seen["rx_bytes_off"] and seen["restored"], \
        "the bottleneck port kept the rxBytes flag after the run"
    assert {"txrate-vs-rxrate.png", "queue_txRate.csv", "queue_rxRate.csv"} <= \
        set(os.listdir(folder))


def test_fct_under_poisson_load_hpcc_and_cubic(tmp_path):
    """fct with the tests' own bimodal CDF (tests/data, not a published
    workload) at 30% load for two seconds, native HPCC and kernel cubic:
    every flow completes byte-exact (native: the receiver's CRC-32 of the
    stream; kernel: the receiver's byte count), both algorithms get the same
    flows, the load offered is the target and the bottleneck port carried
    it, slowdowns are >= 1 but for rare noise (reported, not clamped), the
    files are written, the summary names the workload, the cap and a
    verdict per run, and a missing named workload is skipped with its file
    named while the rest runs."""
    import re

    from conftest import lab_ctx

    from hpccd.experiment import fct

    cdf = os.path.join(os.path.dirname(__file__), "..", "data", "bimodal_test.cdf")
    empty = tmp_path / "no-cdfs"
    empty.mkdir()
    params = {"cdf": [cdf, "fb_hadoop"], "cdf_dir": str(empty), "loads": "0.3",
              "duration": 2.0, "senders": 3, "max_size": 300_000, "idle_flows": 30}
    text, folder = fct.run(lab_ctx, parse_algos("hpcc,cubic"), params, str(tmp_path))
    doc = json.load(open(os.path.join(folder, "summary.json")))
    assert not doc["skipped"], doc["skipped"]
    assert list(doc["skipped_workloads"]) == ["fb_hadoop"]
    assert str(empty / "fb_hadoop.cdf") in doc["skipped_workloads"]["fb_hadoop"]
    rows = doc["results"]
    assert [(r["algo"], r["workload"], r["load"]) for r in rows] == [
        ("hpcc", "bimodal_test", 0.3), ("cubic", "bimodal_test", 0.3)]
    for r in rows:
        # about 1080 flows of 70 KB on average in 2 s at 30% of 1 Gbit/s
        assert 700 < r["flows"] < 1500, r["flows"]
        assert r["done"] == r["flows"] == r["rx_checked"], (r["algo"], r["errors"])
        assert r["offered_load"] == pytest.approx(0.3, rel=0.2)
        # the port's bytes are wire bytes (headers, INT): a little above
        assert 0.9 * r["offered_load"] < r["port_load"] < 1.3 * r["offered_load"], r
        by = {b["bucket"]: b for b in r["buckets"]}
        assert sum(b["n"] for b in r["buckets"]) == r["flows"]
        # the CDF has no flows in 12-48 KB or above 400 KB
        assert by["12KB-48KB"]["n"] == 0 and by[">=1MB"]["n"] == 0
        for name in ("<3KB", "3KB-12KB", "48KB-192KB", "192KB-1MB"):
            b = by[name]
            assert b["n"] > 50, (r["algo"], b)
            assert 1.0 <= b["p50"] <= b["p95"] <= b["p99"], (r["algo"], b)
            # the base is the least one-packet FCT, idle or in the run: a
            # multi-packet flow beats base + serialisation only by noise
            # (cubic's least 0.593 once at load 7; a timing or units error
            # would be far below)
            assert b["min"] >= 0.5, (r["algo"], b)
        assert r["below_1"] <= max(2, r["flows"] // 20), r["below_1"]
        # a flow of the run may set the base, but not far below the idle
        # flows (a timing error would): measured 0.55-1.0 of them
        assert 0.4 * r["base_idle_s"] <= r["base_rtt_s"] <= r["base_idle_s"], r
        assert r["q_p50"] <= r["q_p95"] <= r["q_p99"]
        assert r["capped"] > 0
    assert {"fct.png", "slowdown_buckets.csv", "fct_bimodal_test_30.csv",
            "queue_bimodal_test_30_hpcc.csv", "queue_bimodal_test_30_cubic.csv"} <= \
        set(os.listdir(folder))
    with open(os.path.join(folder, "fct_bimodal_test_30.csv")) as f:
        flows = list(csv.DictReader(f))
    per = {a: [(x["flow"], x["src"], x["dst"], x["size_bytes"]) for x in flows if x["algo"] == a]
           for a in ("hpcc", "cubic")}
    assert per["hpcc"] == per["cubic"] and len(per["hpcc"]) == rows[0]["flows"]
    for x in flows:
        assert x["done"] == "True" and x["checked_at_receiver"] == "True", x
        assert 1000 <= int(x["size_bytes"]) <= 300_000
        assert float(x["slowdown"]) == pytest.approx(float(x["fct_us"]) / float(x["ideal_us"]))
    assert "bimodal_test at 30% load" in text and "capped at 300000 bytes" in text
    for a in ("hpcc", "cubic"):
        assert re.search(rf"^{a} bimodal_test 30%: (link-bound|CPU-bound)", text, re.M), text
    assert "workload fb_hadoop: skipped" in text


def test_small_incast_with_the_baselines_and_the_ablation(tmp_path):
    """DCQCN, TIMELY ([HPCC] section 5.1) and HPCC's reaction variants
    ([HPCC] section 5.4) run as experiment algorithms: every incast flow
    delivered, and the summary names the baselines' lab parameters."""
    from conftest import lab_ctx

    params = {"senders": 3, "size": 200_000, "warmup": 0.5, "observe": 0.6}
    algos = parse_algos("dcqcn,timely,dcqcn-win,timely-win,hpcc-rtt,hpcc-ack")
    text, folder = incast.run(lab_ctx, algos, params, str(tmp_path))
    doc = json.load(open(os.path.join(folder, "summary.json")))
    assert [r["algo"] for r in doc["results"]] == ["dcqcn", "timely", "dcqcn-win", "timely-win",
                                                "hpcc-rtt", "hpcc-ack"]
    assert not doc.get("skipped")
    for x in doc["results"]:
        assert 3 * 200_000 * 8 / x["link_bps"] <= x["fct_max_s"] < 5.0, x
    assert "DCQCN at 1 Gbit/s" in text and "K_min 4000 B" in text


def test_gbn_vs_sr_under_loss(tmp_path):
    """gbn-vs-sr ([HPCC] Figure 12): native HPCC with each recovery, without
    and with 2 % random loss on the bottleneck link: every flow byte-exact
    (the experiment raises otherwise), the loss really dropped packets and
    each recovery repaired them its own way (go-back-N goes back, selective
    repeat resends about the holes only); kernel TCP is skipped with its
    reason, and the lab_loss programs are gone after each run."""
    from conftest import lab_ctx

    from hpccd.experiment import recovery

    labs = []

    def factory(topo):
        cm = lab_ctx(topo)

        class Wrap:
            def __enter__(self):
                self.lab = cm.__enter__()
                labs.append(self.lab)
                return self.lab

            def __exit__(self, *exc):
                # no tc ingress filter of lab_loss left on the bottleneck's ends
                for sw, peer in (("s2", "s1"), ("s1", "s2")):
                    port = next(pt.number for pt in self.lab.topology.switches[sw].ports
                                if pt.peer == peer)
                    r = self.lab.run(sw, ["tc", "filter", "show", "dev", f"p{port}",
                                          "ingress"])
                    assert "hpccd_lab_loss" not in r.stdout, r.stdout
                return cm.__exit__(*exc)
        return Wrap()

    text, folder = recovery.run(factory, parse_algos("hpcc,cubic"),
                                {"size": 1_000_000, "losses": "0,0.02"}, str(tmp_path))
    doc = json.load(open(os.path.join(folder, "summary.json")))
    assert "cubic" in doc["skipped"] and "SACK" in doc["skipped"]["cubic"]
    rows = {(r["recovery"], r["loss"]): r for r in doc["results"]}
    assert set(rows) == {("sr", 0.0), ("gbn", 0.0), ("sr", 0.02), ("gbn", 0.02)}
    for (rec, loss), r in rows.items():
        assert 0 < r["goodput_bps"] <= 1.05e9, r
        assert r["fct_max_s"] >= 1_000_000 * 8 / 1e9
        if loss:
            assert r["random_drops"] > 0, r
            assert r["retx_pkts"] >= 0.5 * r["random_drops"], r
    sr, gbn = rows[("sr", 0.02)], rows[("gbn", 0.02)]
    assert gbn["go_backs"] > 0 and sr["go_backs"] == 0
    assert sr["recoveries"] + sr["rtos"] > 0
    assert sr["retx_pkts"] <= 1.5 * sr["dropped"] + 5, sr
    assert "gbn-vs-sr.png" in os.listdir(folder) and "gbn_vs_sr.csv" in os.listdir(folder)
    assert "cubic: skipped" in text
