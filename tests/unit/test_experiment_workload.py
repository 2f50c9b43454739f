"""The fct experiment's workloads (hpccd.experiment.workload) and its
arithmetic (hpccd.experiment.fct), without a lab: CDF files read and
refused with the file and line named; percent and fractions; the HPCC
simulator's two-column files and three-column files load unchanged; the
sampler draws the CDF it was given (sample mean and CDF points against the
analytic ones, fixed seeds); Poisson arrivals with the mean gap that makes
the load; named workloads found in the folders the docs name, or a missing
one reported with its source; size buckets; the ideal FCT."""
from __future__ import annotations

import math
import os
import random
import statistics
import subprocess
import sys

import pytest

from hpccd.experiment import fct, workload
from hpccd.experiment.common import UsageError
from hpccd.experiment.workload import CdfError, WorkloadMissing, parse_cdf

DATA = os.path.join(os.path.dirname(__file__), "..", "data")
TEST_CDF = os.path.join(DATA, "bimodal_test.cdf")


def test_the_test_distribution_loads_in_percent_with_its_hand_computed_mean():
    c = workload.load_cdf(TEST_CDF)
    assert c.name == "bimodal_test" and c.unit == "percent"
    assert c.sizes == (1000, 4000, 8000, 100000, 200000, 400000)
    assert c.probs == (0, 0.5, 0.7, 0.7, 0.85, 1.0)
    assert c.mean() == pytest.approx(69_950)             # the file's comment
    assert c.cdf(2500) == pytest.approx(0.25)
    assert c.cdf(50_000) == pytest.approx(0.7)           # nothing between 8 KB and 100 KB
    assert c.cdf(999) == 0 and c.cdf(400_000) == 1
    assert c.quantile(0.25) == pytest.approx(2500)


def test_capped_mean_and_tail_by_hand():
    c = workload.load_cdf(TEST_CDF)
    # cap 300 KB: the 200-400 KB segment (15%) is uniform, half below the cap
    # (mean 250 KB), half at the cap: 0.075 x 250000 + 0.075 x 300000
    want = 0.5 * 2500 + 0.2 * 6000 + 0.15 * 150000 + 0.075 * 250000 + 0.075 * 300000
    assert c.mean(300_000) == pytest.approx(want)
    assert 1 - c.cdf(300_000) == pytest.approx(0.075)
    assert c.mean(1_000_000) == pytest.approx(c.mean())
    assert c.mean(500) == pytest.approx(500)              # every flow above the cap


def test_fractions_comments_and_the_three_column_layout():
    text = """
    # fractions, with comments and blank lines

    100 0.0      # first point
    200 0.5
    300 1.0
    """
    c = parse_cdf(text, "f.cdf")
    assert c.unit == "fraction" and c.probs == (0, 0.5, 1.0) and c.mean() == pytest.approx(200)
    three = parse_cdf("100 1 0\n200 1 0.5\n300 1 1\n", "three.cdf")
    assert three.sizes == c.sizes and three.probs == c.probs


def test_hpcc_simulator_layout_loads_unchanged():
    # The layout of the HPCC authors' traffic_gen/*_distribution.txt: size in
    # bytes, one space, cumulative percent, the first point at 0 (these
    # numbers are made up, not theirs).
    text = "0 0\n1000 30\n10000 60\n100000 90\n1000000 100\n"
    c = parse_cdf(text, "X_distribution.txt")
    assert c.unit == "percent" and c.name == "X_distribution"
    assert c.probs == (0, 0.3, 0.6, 0.9, 1.0)
    assert c.mean() == pytest.approx(0.3 * 500 + 0.3 * 5500 + 0.3 * 55000 + 0.1 * 550000)


@pytest.mark.parametrize("text, line, words", [
    ("100 0\n300 50\n200 100\n", 3, "sizes must not decrease"),
    ("100 0\n200 60\n300 50\n400 100\n", 3, "must not decrease"),
    ("100 0\n200 abc\n300 100\n", 2, "not numbers"),
    ("100 0\n200\n300 100\n", 2, "1 columns"),
    ("100 0\n200 1 2 50\n300 100\n", 2, "4 columns"),
    ("100 0\n200 50\n300 90\n", 3, "ends at 1.0 (fractions) or 100 (percent)"),
    ("100 0\n200 0.5\n300 0.9\n", 3, "ends at 1.0"),
    ("-5 0\n300 100\n", 1, "byte count >= 0"),
    ("100 -1\n300 100\n", 1, "not >= 0"),
    ("100 0\n# a comment\n\n200 nan\n", 4, "not >= 0"),
])
def test_bad_files_are_refused_with_file_and_line(text, line, words):
    with pytest.raises(CdfError) as e:
        parse_cdf(text, "bad.cdf")
    assert f"bad.cdf:{line}:" in str(e.value), str(e.value)
    assert words in str(e.value)


def test_empty_and_all_zero_files_are_refused(tmp_path):
    with pytest.raises(CdfError, match="no points"):
        parse_cdf("# nothing\n\n", "empty.cdf")
    with pytest.raises(CdfError, match="mean size 0"):
        parse_cdf("0 0\n0 100\n", "zero.cdf")
    with pytest.raises(CdfError, match="cannot read"):
        workload.load_cdf(str(tmp_path / "absent.cdf"))
    (tmp_path / "bin.cdf").write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(CdfError, match="not a text file"):
        workload.load_cdf(str(tmp_path / "bin.cdf"))


def test_sampler_draws_the_cdf_it_was_given():
    c = workload.load_cdf(TEST_CDF)
    rng = random.Random(7)
    xs = [c.sample(rng) for _ in range(200_000)]
    assert statistics.fmean(xs) == pytest.approx(c.mean(), rel=0.02)
    for x, p in ((1000, 0.0), (4000, 0.5), (8000, 0.7), (100_000, 0.7), (200_000, 0.85)):
        share = sum(1 for v in xs if v <= x) / len(xs)
        assert share == pytest.approx(p, abs=0.005), (x, share, p)
    assert min(xs) >= 1000 and max(xs) <= 400_000
    assert all(isinstance(v, int) for v in xs[:100])
    capped = [c.sample(rng, cap=300_000) for _ in range(100_000)]
    assert max(capped) == 300_000
    assert statistics.fmean(capped) == pytest.approx(c.mean(300_000), rel=0.02)


def test_a_first_point_above_zero_is_a_point_mass():
    c = parse_cdf("500 40\n1500 100\n", "mass.cdf")
    assert c.mean() == pytest.approx(0.4 * 500 + 0.6 * 1000)
    rng = random.Random(3)
    xs = [c.sample(rng) for _ in range(50_000)]
    assert sum(1 for v in xs if v == 500) / len(xs) == pytest.approx(0.4, abs=0.01)
    assert statistics.fmean(xs) == pytest.approx(c.mean(), rel=0.01)


def test_poisson_arrivals_have_the_gap_that_makes_the_load():
    c = workload.load_cdf(TEST_CDF)
    rate = 1_000_000_000
    plan = workload.schedule(c, 0.3, rate, 60.0, ["h1", "h2"], ["r1", "r2", "r3"], seed=1)
    gap = c.mean() * 8 / (0.3 * rate)
    gaps = [b.t_s - a.t_s for a, b in zip(plan, plan[1:])]
    assert statistics.fmean(gaps) == pytest.approx(gap, rel=0.03)
    # exponential: standard deviation = mean, and P(gap > mean) = 1/e
    assert statistics.pstdev(gaps) / statistics.fmean(gaps) == pytest.approx(1.0, abs=0.05)
    assert sum(1 for g in gaps if g > gap) / len(gaps) == pytest.approx(math.exp(-1), abs=0.02)
    offered = sum(f.size for f in plan) * 8 / (60.0 * rate)
    assert offered == pytest.approx(0.3, rel=0.05)
    assert [f.idx for f in plan] == list(range(len(plan)))
    assert all(0 <= f.t_s < 60.0 for f in plan)
    assert {f.src for f in plan} == {"h1", "h2"} and {f.dst for f in plan} == {"r1", "r2", "r3"}
    # the same seed gives the same flows (every algorithm the same), another seed others
    assert workload.schedule(c, 0.3, rate, 60.0, ["h1", "h2"], ["r1", "r2", "r3"], 1) == plan
    other = workload.schedule(c, 0.3, rate, 60.0, ["h1", "h2"], ["r1", "r2", "r3"], 2)
    assert other[:10] != plan[:10]
    # a cap keeps the load: the gaps follow the capped mean
    capped = workload.schedule(c, 0.5, rate, 60.0, ["h1"], ["r1"], 1, cap=150_000)
    assert max(f.size for f in capped) == 150_000
    assert sum(f.size for f in capped) * 8 / (60.0 * rate) == pytest.approx(0.5, rel=0.05)
    with pytest.raises(ValueError):
        workload.schedule(c, 1.2, rate, 1.0, ["h1"], ["r1"], 1)


def test_incast_events_on_top_of_the_load():
    """[HPCC] section 5.3's incasts scaled to the lab: each event's flows
    start together toward one receiver from the senders in turn; the events
    add up to their share of the link; numbered after the background's."""
    rate = 1_000_000_000
    senders, receivers = ["h1", "h2", "h3"], ["r1", "r2"]
    ev = workload.incast_schedule(0.02, rate, 400.0, senders, receivers, 5, 500_000, 1,
                                  first_idx=1000)
    flat = [f for e in ev for f in e]
    assert [f.idx for f in flat] == list(range(1000, 1000 + len(flat)))
    # 5 x 500 KB at 2 % of 1 Gbit/s: an event every 1 s, 400 on average
    assert 330 < len(ev) < 470
    assert sum(f.size for f in flat) * 8 / (400.0 * rate) == pytest.approx(0.02, rel=0.15)
    for e in ev:
        assert len(e) == 5 and len({f.t_s for f in e}) == 1 and len({f.dst for f in e}) == 1
        assert [f.src for f in e] == ["h1", "h2", "h3", "h1", "h2"]
        assert all(f.size == 500_000 for f in e)
    assert {e[0].dst for e in ev} == {"r1", "r2"}
    assert all(0 <= e[0].t_s < 400.0 for e in ev)
    assert workload.incast_schedule(0.02, rate, 400.0, senders, receivers, 5, 500_000, 1,
                                    first_idx=1000) == ev
    for bad in ((0.0, 5, 1), (1.0, 5, 1), (0.02, 0, 1), (0.02, 5, 0)):
        with pytest.raises(ValueError):
            workload.incast_schedule(bad[0], rate, 1.0, senders, receivers, bad[1], bad[2], 1)


def test_named_workloads_are_looked_for_where_the_docs_say(tmp_path):
    env: dict[str, str] = {}
    assert workload.cdf_dirs(None, env) == [workload.bundled_dir()]
    assert workload.cdf_dirs(None, {"HPCCD_CDF_DIR": "/x"}) == ["/x"]
    assert workload.cdf_dirs("/y", {"HPCCD_CDF_DIR": "/x"}) == ["/y"]
    d = tmp_path / "cdf"
    d.mkdir()
    (d / "websearch.cdf").write_text(open(TEST_CDF).read())
    cdfs, bad = workload.load_workloads(["websearch,fb_hadoop", str(TEST_CDF)], str(d))
    assert [c.name for c in cdfs] == ["websearch", "bimodal_test"]
    assert cdfs[0].path == str(d / "websearch.cdf")          # the folder given replaces the bundled
    (msg,) = bad.values()
    assert list(bad) == ["fb_hadoop"]
    assert str(d / "fb_hadoop.cdf") in msg                  # exactly which file is missing
    assert os.path.join(workload.bundled_dir(), "fb_hadoop.cdf") in msg   # and the bundled one
    assert "SIZE_BYTES CUMULATIVE" in msg                    # the format
    with pytest.raises(WorkloadMissing) as e:
        workload.resolve("WebSearch", [str(tmp_path / "a"), str(tmp_path / "b")])
    assert str(tmp_path / "a" / "websearch.cdf") in str(e.value)
    assert str(tmp_path / "b" / "websearch.cdf") in str(e.value)
    # found through the environment as well
    cdfs, bad = workload.load_workloads(["websearch"], None, {"HPCCD_CDF_DIR": str(d)})
    assert [c.name for c in cdfs] == ["websearch"] and not bad
    # a broken file costs its workload only, with its line
    (d / "fb_hadoop.cdf").write_text("100 0\n50 100\n")
    cdfs, bad = workload.load_workloads(["websearch", "fb_hadoop"], str(d))
    assert [c.name for c in cdfs] == ["websearch"]
    assert f"{d / 'fb_hadoop.cdf'}:2:" in bad["fb_hadoop"]
    cdfs, bad = workload.load_workloads([str(tmp_path / "nope.cdf")], str(d))
    assert not cdfs and "no such file" in bad[str(tmp_path / "nope.cdf")]


def test_buckets_and_loads():
    edges = workload.parse_buckets(None)
    assert workload.bucket_labels(edges) == ["<3KB", "3KB-12KB", "12KB-48KB", "48KB-192KB",
                                             "192KB-1MB", ">=1MB"]
    assert [workload.bucket_of(n, edges) for n in (1, 2999, 3000, 11_999, 999_999, 1_000_000,
                                                   30_000_000)] == [0, 0, 1, 1, 4, 5, 5]
    assert workload.parse_buckets("1500, 10000") == (1500, 10000)
    assert workload.bucket_labels((1500, 10000)) == ["<1500B", "1500B-10KB", ">=10KB"]
    for bad in ("10000,1500", "0,5", "a,b", ""):
        with pytest.raises(ValueError):
            workload.parse_buckets(bad)
    assert fct.parse_loads("0.3,0.5") == [0.3, 0.5]
    assert fct.parse_loads(0.3) == [0.3]
    for bad in ("30", "0", "x", ","):
        with pytest.raises(UsageError):
            fct.parse_loads(bad)


def test_ideal_fct_by_hand():
    # kernel TCP at MTU 1500: 1448-byte segments with 66 header bytes each
    assert fct.wire_bytes(1448, "kernel", 1500) == 1448 + 66
    assert fct.wire_bytes(1449, "kernel", 1500) == 1449 + 2 * 66
    # native without INT: 1436 payload bytes, 78 header bytes a frame
    assert fct.wire_bytes(100_000, "native", 1500) == 100_000 + 70 * 78
    # 100 us base; 12 500-byte bucket; 1 Gbit/s
    base, R, b = 100e-6, 1_000_000_000, 12_500
    assert fct.ideal_s(5000, "kernel", 1500, base, R, b) == base      # within the bucket
    w = fct.wire_bytes(200_000, "kernel", 1500)
    assert fct.ideal_s(200_000, "kernel", 1500, base, R, b) == pytest.approx(
        base + (w - b) * 8 / R)


@pytest.mark.skipif(os.geteuid() != 0, reason="hpccctl experiment needs root")
def test_cli_says_which_file_is_missing_and_builds_no_lab(tmp_path):
    r = subprocess.run([sys.executable, "-m", "hpccd.cli.main", "experiment", "fct", "--algos",
                        "cubic", "--cdf-dir", str(tmp_path), "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert str(tmp_path / "websearch.cdf") in r.stderr
    assert str(tmp_path / "fb_hadoop.cdf") in r.stderr
    assert not (tmp_path / "out").exists()
    r = subprocess.run([sys.executable, "-m", "hpccd.cli.main", "experiment", "fct",
                        "--loads", "50", "--cdf", TEST_CDF, "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "0 < load < 1" in r.stderr, r.stderr


def test_a_workload_runs_its_own_duration_else_the_common_one():
    p = {"duration": 5.0, "durations": {"websearch": 30.0}}
    assert fct.duration_of(p, "websearch") == 30.0
    assert fct.duration_of(p, "fb_hadoop") == 5.0
    assert fct.duration_of({"duration": 2.5, "durations": None}, "websearch") == 2.5


def test_reproduce_runs_websearch_long_enough_for_its_smallest_bucket():
    """The full set's fct stage gives WebSearch's bucket under 3 KB the
    flows a percentile needs (claims.MIN_FLOWS) at both loads, with the
    bundled distribution and the stage's seed; 5 s would give 1 and 3."""
    from hpccd.experiment import claims, reproduce

    stage = next(s for s in reproduce.FULL if s.key == "fct")
    p = dict(fct.DEFAULTS, **stage.params)
    cdfs, bad = workload.load_workloads(["websearch"], None)
    assert not bad and fct.duration_of(p, "websearch") > p["duration"]
    edges = workload.parse_buckets(p["buckets"])
    hosts = [f"h{i}" for i in range(1, p["senders"] + 1)]
    for load in fct.parse_loads(p["loads"]):
        for dur, enough in ((fct.duration_of(p, "websearch"), True), (p["duration"], False)):
            plan = workload.schedule(cdfs[0], load, p["rate_mbps"] * 1e6, dur, hosts,
                                     [h.replace("h", "r") for h in hosts], p["seed"], None)
            small = sum(workload.bucket_of(f.size, edges) == 0 for f in plan)
            assert (small >= claims.MIN_FLOWS) == enough, (load, dur, small)
