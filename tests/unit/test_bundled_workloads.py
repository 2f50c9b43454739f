"""The published flow-size distributions bundled with the package
(hpccd/workloads/*.cdf, docs/experiments.md "fct"): each loads through the
ordinary loader with its points checked, keeps its source in its header,
is package data of an installed package, is what the default ``fct`` run
uses without any environment variable or flag, and has the mean flow size
computed by hand from its points."""
from __future__ import annotations

import fnmatch
import os
import tomllib

import pytest

from hpccd.experiment import fct, workload

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
NAMES = ("websearch", "fb_hadoop", "ali_storage", "google_rpc")


def _bundled(name: str) -> str:
    return os.path.join(workload.bundled_dir(), f"{name}.cdf")


def test_the_named_workloads_are_the_bundled_files():
    assert workload.PUBLISHED == NAMES
    assert sorted(p for p in os.listdir(workload.bundled_dir()) if p.endswith(".cdf")) == \
        sorted(f"{n}.cdf" for n in NAMES)


@pytest.mark.parametrize("name,points", [("websearch", 12), ("fb_hadoop", 20),
                                         ("ali_storage", 9), ("google_rpc", 843)])
def test_each_loads_monotone_from_zero_to_100_percent(name, points):
    # point counts: the lines of each file that are not comments (grep -vc '^#')
    c = workload.load_cdf(_bundled(name), name)
    assert c.unit == "percent" and len(c.sizes) == points
    assert c.sizes[0] == 0 and c.probs[0] == 0            # every file starts at "0 0"
    assert c.probs[-1] == 1.0                               # ... and ends at 100 %
    assert all(b >= a for a, b in zip(c.sizes, c.sizes[1:]))
    assert all(b >= a for a, b in zip(c.probs, c.probs[1:]))
    assert c.cdf(c.sizes[-1]) == 1.0 and c.quantile(0.0) == 0


@pytest.mark.parametrize("name,words", [
    ("websearch", ("Alizadeh et al.", "Data Center TCP (DCTCP)", "SIGCOMM 2010",
                   "HPCC", "section 5.1", "WebSearch_distribution.txt")),
    ("fb_hadoop", ("Roy et al.", "Inside the Social Network's (Datacenter) Network",
                   "SIGCOMM 2015", "HPCC", "section 5.1", "FbHdp_distribution.txt")),
    ("ali_storage", ("Alibaba", "2019", "AliStorage2019.txt")),
    ("google_rpc", ("Google", "RPC", "GoogleRPC2008.txt")),
])
def test_each_keeps_its_source_in_its_header(name, words):
    head = " ".join(workload.source_lines(_bundled(name)))
    for w in words:
        assert w in head, (name, w, head)
    assert "seed" not in head and "shared" not in head      # no pointer outside the repository


def test_installed_package_data_covers_them():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        globs = tomllib.load(f)["tool"]["setuptools"]["package-data"]["hpccd"]
    for n in NAMES:
        assert any(fnmatch.fnmatch(f"workloads/{n}.cdf", g) for g in globs), globs


# Means by hand: E[size] of a piecewise-linear CDF is the sum over segments of
# (share of the segment) x (mean of its two sizes) (docs/experiments.md "fct").
def test_websearch_mean_by_hand():
    # 0-10K 15%: 5000 x .15 = 750;     10K-20K 5%: 15000 x .05 = 750
    # 20K-30K 10%: 2500;               30K-50K 10%: 40000 x .10 = 4000
    # 50K-80K 13%: 65000 x .13 = 8450; 80K-200K 7%: 140000 x .07 = 9800
    # 200K-1M 10%: 60000;              1M-2M 10%: 150000
    # 2M-5M 10%: 350000;               5M-10M 7%: 7.5M x .07 = 525000
    # 10M-30M 3%: 20M x .03 = 600000   -> sum 1 711 250 bytes
    c = workload.load_cdf(_bundled("websearch"))
    assert c.mean() == pytest.approx(1_711_250)


def test_fb_hadoop_mean_by_hand():
    # 0-100 1%: 0.5; 100-200 1%: 1.5; 200-300 3%: 7.5; 300-350 10%: 32.5;
    # 350-400 5%: 18.75; 400-500, 500-600, 600-700 10% each: 45 + 55 + 65;
    # 700-1000 10%: 85; 1K-2K 7%: 105; 2K-7K 3%: 135; 7K-30K 2%: 370;
    # 30K-50K 10%: 4000; 50K-80K 5%: 3250; 80K-120K 3%: 3000;
    # 120K-300K 5%: 10500; 300K-1M 2.5%: 16250; 1M-2M 1.5%: 22500;
    # 2M-10M 1%: 60000   -> sum 120 420.75 bytes
    c = workload.load_cdf(_bundled("fb_hadoop"))
    assert c.mean() == pytest.approx(120_420.75)


def test_ali_storage_mean_by_hand():
    # 0-4K 22.93%: 2000 x .2293 = 458.6;   4K-8K 46.28%: 6000 x .4628 = 2776.8
    # 8K-16K 11.40%: 12000 x .114 = 1368;   16K-32K 9.86%: 24000 x .0986 = 2366.4
    # 32K-64K 3.06%: 48000 x .0306 = 1468.8; 64K-128K 3.24%: 96000 x .0324 = 3110.4
    # 128K-256K 0.76%: 192000 x .0076 = 1459.2
    # 256K-2M 2.47%: 1128000 x .0247 = 27861.6   -> sum 40 869.8 bytes
    c = workload.load_cdf(_bundled("ali_storage"))
    assert c.mean() == pytest.approx(40_869.8)


def test_google_rpc_mean_by_hand():
    # 843 points, too many to list here: the same sum, taken with awk over the
    # file, independently of the loader:
    #   awk '!/^#/ && NF==2 { if (n++) m += ($2-pp)/100*(ps+$1)/2; else m += $2/100*$1;
    #        ps=$1; pp=$2 } END { printf "%.6f", m }' google_rpc.cdf   -> 2891.621250
    c = workload.load_cdf(_bundled("google_rpc"))
    assert c.mean() == pytest.approx(2891.62125, rel=1e-9)


def test_the_default_fct_run_finds_them_without_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(workload.ENV_DIR, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))               # a fresh machine: nothing in ~
    cdfs, bad = workload.load_workloads(fct.DEFAULTS["cdf"], fct.DEFAULTS["cdf_dir"])
    assert not bad
    assert [(c.name, c.path) for c in cdfs] == [("websearch", _bundled("websearch")),
                                                ("fb_hadoop", _bundled("fb_hadoop"))]

    class Reached(Exception):
        pass

    seen = []

    def lab_factory(topo):          # fct.run builds its lab only once its workloads loaded
        seen.append(topo)
        raise Reached

    with pytest.raises(Reached):
        fct.run(lab_factory, [], {}, str(tmp_path / "out"))
    assert len(seen) == 1 and len(seen[0].hosts) == 2 * fct.DEFAULTS["senders"]
