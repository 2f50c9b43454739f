"""hpccctl replay: the trace format of docs/replay.md, exactly."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from importlib import resources

import pytest

from hpccd.core import replay, tracegen

TRACES = resources.files("hpccd").joinpath("traces")

HPCC_PARAMS = ('{"params": {"algo": "hpcc", "T_ns": 13000, "eta": 0.95, "max_stage": 5, '
               '"w_ai_bytes": 80, "line_rate_bps": 100000000000, "mtu_bytes": 1000}}')


def hop(ts: int, q: int, tx: int, bw: int = 100_000_000_000) -> dict:
    return {"ts_ns": ts, "qlen_bytes": q, "tx_bytes": tx, "bw_bps": bw}


def ev(seq: int, snd_nxt: int, *hops: dict, **extra) -> str:
    return json.dumps({"seq": seq, "snd_nxt": snd_nxt, "hops": list(hops), **extra})


def hpccctl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-m", "hpccd.cli.main", *args], input=stdin,
                          capture_output=True, text=True, env=env, timeout=120)


def test_hpcc_trace_gives_algorithm1_values_computed_by_hand():
    trace = "\n".join([
        HPCC_PARAMS,
        # first event only records L; W stays W_init = 1e11 * 13000e-9 / 8 = 162500
        ev(1000, 40000, hop(1_000_000, 0, 0)),
        # one T later at exactly line rate: txRate = 162500/13000 = 12.5 B/ns = B,
        # min(qlen) = min(20000, 0) = 0 -> u = 1, tau = T -> U = 1 >= eta:
        # W = Wc / (U/eta) + W_AI = 162500 * 0.95 + 80 = 154455; seq > lastUpdateSeq -> Wc = W
        ev(41000, 80000, hop(1_013_000, 20000, 162500)),
        # 1000 ns later, seq 42000 <= lastUpdateSeq 80000: Wc kept.  txRate = 12500/1000
        # = 12.5 -> 1; q = min(20000, 20000)/(12.5*13000) = 0.123077; u = 1.123077,
        # tau = 1000: U = (12/13)*1 + (1/13)*1.123077 = 1.0094675
        # W = 154455 / (1.0094675/0.95) + 80 = 145436.0976
        ev(42000, 81000, hop(1_014_000, 20000, 175000)),
    ])
    r = hpccctl("replay", "-", stdin=trace + "\n")
    assert r.returncode == 0, r.stderr
    out = [json.loads(x) for x in r.stdout.splitlines()]
    assert len(out) == 3
    assert out[0] == {"W_bytes": 162500.0, "Wc_bytes": 162500.0, "U": 0.0,
                      "rate_bps": 1e11, "inc_stage": 0}
    assert out[1]["W_bytes"] == pytest.approx(154455.0, rel=1e-12)
    assert out[1]["Wc_bytes"] == pytest.approx(154455.0, rel=1e-12)
    assert out[1]["U"] == pytest.approx(1.0, rel=1e-12)
    assert out[1]["rate_bps"] == pytest.approx(154455.0 * 8 / 13000 * 1e9, rel=1e-12)
    assert out[2]["U"] == pytest.approx(12 / 13 + (1 / 13) * (1 + 20000 / 162500), rel=1e-12)
    assert out[2]["W_bytes"] == pytest.approx(154455.0 / (out[2]["U"] / 0.95) + 80, rel=1e-12)
    assert out[2]["Wc_bytes"] == pytest.approx(154455.0, rel=1e-12)


@pytest.mark.parametrize("name", sorted(tracegen.BUNDLE))
def test_every_bundled_trace_replays_one_output_per_event(name):
    path = TRACES.joinpath(name)
    n_events = len(path.read_text("utf-8").splitlines()) - 1
    r = hpccctl("replay", str(path))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == n_events
    for line in lines:
        o = json.loads(line)
        for v in o.values():
            assert not isinstance(v, float) or v == v and abs(v) != float("inf")


def test_replay_is_bit_for_bit_deterministic():
    path = str(TRACES.joinpath("incast_7to1_100g.jsonl"))
    a, b = hpccctl("replay", path), hpccctl("replay", path)
    assert a.returncode == b.returncode == 0
    assert a.stdout == b.stdout and a.stdout


@pytest.mark.parametrize("trace, line, words", [
    ('{"params": {"algo": "cubic"}}', 1, ["unknown algorithm", "algo"]),
    ('{"params": {"T_ns": 13000}}', 1, ["missing key 'algo'"]),
    ('{"params": {"algo": "hpcc", "etta": 0.9}}', 1, ["etta", "unknown"]),
    ('{"params": {"algo": "hpcc", "eta": 1.5}}', 1, ["eta"]),
    ('{"params": {"algo": "dctcp", "g": 0.1}}', 1, ["'g'"]),
    ('{"params": {"algo": "ldcp", "gamma": 2}}', 1, ["gamma"]),
    ('{"algo": "hpcc"}', 1, ["params"]),
    ('{"params": {"algo": "hpcc"', 1, ["not valid JSON"]),
    ('', 1, ["empty trace"]),
    (HPCC_PARAMS + "\n" + ev(1, 2, hop(1, 0, 0)) + "\n" + '{"seq": 3, "snd_nxt": 4}', 3,
     ["missing key 'hops'"]),
    (HPCC_PARAMS + "\n" + ev(1, 2, hop(1, 0, 0)) + "\n" + ev(3, 4, hop(2, 0, 0), bogus=1), 3,
     ["unknown key 'bogus'"]),
    (HPCC_PARAMS + "\n\n" + ev(1, 2, {"ts_ns": 1, "qlen_bytes": 0, "tx_bytes": -5,
                                      "bw_bps": 1}), 3, ["tx_bytes"]),
    (HPCC_PARAMS + "\n" + ev(1, 2, *[hop(1, 0, 0)] * 9), 2, ["at most 8"]),
    ('{"params": {"algo": "dctcp"}}\n{"ack": 1, "snd_nxt": 2, "loss": "maybe"}', 2, ["loss"]),
    ('{"params": {"algo": "ldcp"}}\n{"acked_pkts": 1.5}', 2, ["acked_pkts"]),
])
def test_bad_trace_exits_2_naming_the_line_and_prints_nothing(trace, line, words):
    r = hpccctl("replay", "-", stdin=trace)
    assert r.returncode == 2
    assert r.stdout == ""                     # no output lines, not even the good events
    assert f"line {line}:" in r.stderr
    for w in words:
        assert w in r.stderr


def test_missing_file_is_a_clear_error():
    r = hpccctl("replay", "/nonexistent/trace.jsonl")
    assert r.returncode == 2 and r.stdout == ""
    assert "/nonexistent/trace.jsonl" in r.stderr


def test_blank_lines_are_not_events_and_line_numbers_count_them():
    trace = replay.parse([HPCC_PARAMS, "", ev(1, 2, hop(1, 0, 0)), "   ", ev(3, 4, hop(2, 0, 0))])
    assert len(trace.events) == 2
    with pytest.raises(replay.TraceError) as e:
        replay.parse([HPCC_PARAMS, "", "", "[1]"])
    assert e.value.line == 4


def test_rx_hpcc_dctcp_ldcp_outputs_have_the_documented_keys():
    cases = {
        "rx-hpcc": ('{"params": {"algo": "rx-hpcc"}}\n{"now_ns": 5, "hops": [%s]}'
                    % json.dumps(hop(5, 0, 0)), {"W_bytes", "Wc_bytes", "U", "notify"}),
        "dctcp": ('{"params": {"algo": "dctcp"}}\n{"ack": 1000, "snd_nxt": 5000, "ece": 1}',
                  {"cwnd_bytes", "alpha"}),
        "ldcp": ('{"params": {"algo": "ldcp"}}\n{"acked_pkts": 1, "ece": 0}',
                 {"cw_pkts", "stage"}),
    }
    for algo, (trace, keys) in cases.items():
        r = hpccctl("replay", "-", stdin=trace)
        assert r.returncode == 0, (algo, r.stderr)
        assert set(json.loads(r.stdout)) == keys, algo
    # integer byte counts stay integers
    r = hpccctl("replay", "-", stdin=cases["dctcp"][0])
    assert isinstance(json.loads(r.stdout)["cwnd_bytes"], int)


def test_bundled_traces_are_exactly_what_the_generator_makes(tmp_path: pathlib.Path):
    tracegen.write_bundle(str(tmp_path))
    for name in tracegen.BUNDLE:
        assert (tmp_path / name).read_bytes() == TRACES.joinpath(name).read_bytes(), name


def test_demo_shows_hpcc_reacting_within_one_rtt_and_before_ecn_schemes():
    r = hpccctl("demo", "--replay", "--json")
    assert r.returncode == 0, r.stderr
    rows = {row["algo"]: row for row in json.loads(r.stdout)}
    assert set(rows) == {"hpcc", "rx-hpcc", "dctcp", "ldcp"}
    # HPCC cuts within one T of the first queued byte ([HPCC] section 5.2, incast)
    assert rows["hpcc"]["first_cut_us"] is not None
    assert rows["hpcc"]["first_cut_us"] <= tracegen.T_NS / 1000
    # ECN schemes only learn once the queue passes K
    assert rows["dctcp"]["first_cut_us"] > rows["hpcc"]["first_cut_us"]
    assert rows["ldcp"]["first_cut_us"] > rows["hpcc"]["first_cut_us"]
    # HPCC recovers its window after the incast drains (long-short behaviour)
    assert rows["hpcc"]["end_bytes"] >= 0.9 * rows["hpcc"]["before_bytes"]
    text = hpccctl("demo", "--replay")
    assert text.returncode == 0 and "hpcc" in text.stdout and "ldcp" in text.stdout


def test_dcqcn_and_timely_traces_replay_with_hand_computed_values():
    # DCQCN (docs/algorithms.md "DCQCN"), line 10 Gbit/s: a CNP at 0 cuts by Eq. (1),
    # RC = 1e10 (1 - 1/2) = 5e9, RT = 1e10; 55 us later the rate timer's first
    # fast recovery step, Eq. (3): RC = (1e10 + 5e9)/2 = 7.5e9, and the alpha
    # timer's Eq. (2): alpha = 255/256 = 0.99609375
    trace = ('{"params": {"algo": "dcqcn", "line_rate_bps": 10000000000}}\n'
             '{"now_ns": 0, "cnp": 1}\n{"now_ns": 55000, "tx_bytes": 1000}\n')
    r = hpccctl("replay", "-", stdin=trace)
    assert r.returncode == 0, r.stderr
    assert [json.loads(x) for x in r.stdout.splitlines()] == [
        {"rate_bps": 5e9, "target_bps": 1e10, "alpha": 1.0, "stage": "fast_recovery"},
        {"rate_bps": 7.5e9, "target_bps": 1e10, "alpha": 0.99609375,
         "stage": "fast_recovery"}]
    # TIMELY: 20 us < T_low: rate + delta, held at the 10 Gbit/s line; then
    # 100 us after 20 us: rtt_diff = 7/8 x 80000 = 70000, gradient = 70000/13000 > 1/0.8
    # -> the rate falls to the 1 Mbit/s floor
    trace = ('{"params": {"algo": "timely", "line_rate_bps": 10000000000}}\n'
             '{"rtt_ns": 20000}\n{"rtt_ns": 100000}\n')
    r = hpccctl("replay", "-", stdin=trace)
    assert r.returncode == 0, r.stderr
    out = [json.loads(x) for x in r.stdout.splitlines()]
    assert out[0] == {"rate_bps": 1e10, "rtt_diff_ns": 0.0, "gradient": 0.0, "hai": False}
    assert out[1]["rtt_diff_ns"] == 70000.0 and out[1]["rate_bps"] == 1e6


@pytest.mark.parametrize("trace,line,words", [
    ('{"params": {"algo": "dcqcn"}}\n{"tx_bytes": 5}', 2, ["now_ns"]),
    ('{"params": {"algo": "dcqcn"}}\n{"now_ns": 1, "cnp": 2}', 2, ["cnp"]),
    ('{"params": {"algo": "dcqcn"}}\n{"now_ns": 1, "ce": 1}', 2, ["ce", "allowed"]),
    ('{"params": {"algo": "dcqcn", "F": 0}}', 1, ["F"]),
    ('{"params": {"algo": "timely"}}\n{"rtt_ns": -1}', 2, ["rtt_ns"]),
    ('{"params": {"algo": "timely", "T_low_ns": 600000}}', 1, ["T_low_ns"]),
])
def test_bad_dcqcn_and_timely_traces_name_the_line_and_key(trace, line, words):
    r = hpccctl("replay", "-", stdin=trace)
    assert r.returncode == 2 and r.stdout == ""
    assert f"line {line}:" in r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


def test_timely_view_of_the_bundled_incast_holds_line_rate_until_the_rtt_passes_t_low():
    lines = TRACES.joinpath("incast_7to1_100g.timely.jsonl").read_text("utf-8").splitlines()
    params = json.loads(lines[0])["params"]
    rtts = [json.loads(x)["rtt_ns"] for x in lines[1:]]
    # minRTT is the episode's least sample: 5 link crossings of 2 us + 80 ns + 20 ns
    # of serialisation of a 1000-byte packet at 100 and 400 Gbit/s = 10100 ns
    assert params["min_rtt_ns"] == min(rtts) == 10_100
    out = replay.run(replay.parse(lines))
    first = next(i for i, r in enumerate(rtts) if r >= 50_000)     # T_low = 50 us
    # below T_low every sample adds delta to a rate already at the line: 1e11
    assert all(o["rate_bps"] == 1e11 for o in out[:first])
    # the first sample past T_low comes with a rising RTT (a positive gradient):
    # Algorithm 1 cuts by beta x gradient
    assert out[first]["gradient"] > 0
    assert out[first]["rate_bps"] == pytest.approx(
        max(1e6, 1e11 * (1 - 0.8 * out[first]["gradient"])), rel=1e-12)
    assert max(rtts) < 500_000                   # never past T_high: no RTT-level cut
