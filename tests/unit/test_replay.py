"""hpccctl replay: the trace format of docs/replay.md, exactly."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from importlib import resources

import pytest

from hpccd import replay, tracegen

TRACES = resources.files("hpccd").joinpath("traces")

HPCC_PARAMS = ('{"params": {"algo": "hpcc", "T_ns": 13000, "eta": 0.95, "max_stage": 5, '
               '"w_ai_bytes": 80, "line_rate_bps": 100000000000, "mtu_bytes": 1000}}')


def hop(ts: int, q: int, tx: int, bw: int = 100_000_000_000) -> dict:
    return {"ts_ns": ts, "qlen_bytes": q, "tx_bytes": tx, "bw_bps": bw}


def ev(seq: int, snd_nxt: int, *hops: dict, **extra) -> str:
    return json.dumps({"seq": seq, "snd_nxt": snd_nxt, "hops": list(hops), **extra})


def hpccctl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-m", "hpccd.cli", *args], input=stdin,
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
