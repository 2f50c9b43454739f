"""HPCC's parameters in the experiments (issue 15 section 4): N of the W_AI
rule of thumb is the paper's expected maximum of concurrent flows unless
--n gives it, --eta / --max-stage / --T-us / --w-ai reach every HPCC flow's
parameters, bad values are refused naming the option, and T is set from
the measured loaded RTT: MARGIN x it, rounded up, unless given."""
from __future__ import annotations

import argparse

import pytest

from hpccd.core import cc
from hpccd.experiment import cli, loaded_rtt, native
from hpccd.experiment.common import UsageError


@pytest.fixture(autouse=True)
def _clean():
    native.set_given({}, None)
    native.HPCC_OVERRIDES.clear()
    yield
    native.set_given({}, None)
    native.HPCC_OVERRIDES.clear()


def _args(*argv: str) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    cli.add_parser(ap.add_subparsers())
    return ap.parse_args(["experiment", "incast", *argv])


def test_default_n_is_the_papers_not_the_flows_started():
    p = native.hpcc_params()
    assert p == {"T_ns": native.T_NS, "N_flows": native.DEFAULT_N} and native.DEFAULT_N == 100
    # W_AI = W_init (1 - eta) / N: 1 Gbit/s x 300 us x 0.05 / 100 = 18.75 bytes
    assert cc.Hpcc(**p, line_rate_bps=10**9).w_ai == pytest.approx(18.75)
    line = native.hpcc_line(p, 10**9, 8)
    assert "N = 100" in line and "18.8 bytes" in line and "at most 8 flows" in line


def test_command_line_values_reach_the_flows_and_are_printed():
    cli._set_hpcc(_args("--eta", "0.9", "--max-stage", "3", "--T-us", "120", "--n", "8"))
    eng = native.Engines(lab=None)
    assert eng.hpcc == {"T_ns": 120_000, "N_flows": 8, "eta": 0.9, "max_stage": 3}
    assert native.given_T_ns() == 120_000
    f = cc.Hpcc(**eng.hpcc, line_rate_bps=10**9)
    assert f.w_ai == pytest.approx(10**9 / 8 * 120e-6 * 0.1 / 8)
    line = native.hpcc_line(eng.hpcc, 10**9)
    assert "eta 0.9" in line and "maxStage 3" in line and "T = 120 us" in line
    assert "N = 8 (--n" in line


def test_w_ai_given_replaces_the_rule_of_thumb():
    cli._set_hpcc(_args("--w-ai", "200"))
    p = native.hpcc_params()
    assert p["w_ai_bytes"] == 200 and "N_flows" not in p
    assert "W_AI = 200 bytes (given)" in native.hpcc_line(p, 10**9)


@pytest.mark.parametrize("argv, option", [
    (("--eta", "1.5"), "--eta"), (("--eta", "0"), "--eta"), (("--max-stage", "-1"), "--max-stage"),
    (("--T-us", "0"), "--T-us"), (("--n", "0"), "--n"), (("--w-ai", "-3"), "--w-ai"),
    (("--w-ai", "10", "--n", "4"), "--n and --w-ai"), (("--ack-every", "0"), "--ack-every"),
])
def test_bad_values_are_refused_naming_the_option(argv, option):
    with pytest.raises(UsageError, match=option):
        cli._set_hpcc(_args(*argv))
    assert native.HPCC_GIVEN == {} and native.GIVEN_N == []


def test_a_sweep_point_overrides_the_command_line():
    cli._set_hpcc(_args("--T-us", "120"))
    native.HPCC_OVERRIDES["T_ns"] = 500_000
    assert native.given_T_ns() == 500_000 and native.hpcc_params()["T_ns"] == 500_000


def test_T_is_the_margin_over_the_loaded_rtt_rounded_up():
    assert loaded_rtt.MARGIN == 1.2
    assert loaded_rtt.T_from_rtt(247e-6) == 300_000       # 296.4 us -> 300 us
    assert loaded_rtt.T_from_rtt(250e-6) == 300_000       # exactly 300 us stays
    assert loaded_rtt.T_from_rtt(251e-6) == 310_000
    lr = loaded_rtt.LoadedRtt(247e-6, [231.0, 247.0], 337.0, 0.0, 2, 300_000)
    text = lr.line(300_000, "why")
    assert "T = 300 us (why)" in text and ": 247 us" in text and "231, 247 us" in text


def test_repetitions_list_each_runs_loaded_rtt_and_T():
    from hpccd.experiment import reps
    from hpccd.experiment.results import Summary
    s = [Summary("incast", {"loaded_rtt_us": 247.2, "T_us": 300, "hpcc_N": 100}, []),
         Summary("incast", {"loaded_rtt_us": 691.0, "T_us": 830, "hpcc_N": 100}, [])]
    assert reps._hpcc_runs(s) == "\nper run: loaded RTT 247, 691 us; T 300, 830 us; HPCC's N 100"
    assert reps._hpcc_runs([Summary("incast", {}, [])]) == ""


def test_the_bottlenecks_b_x_t_in_frames_is_printed():
    """The summary says how many frames B x T holds and what one frame queued
    weighs in U against 1 - eta: below ~20 frames one frame is more than eta
    = 0.95 leaves and HPCC does not converge to fairness (docs/experiments.md
    "Fairness and B x T")."""
    p = {"T_ns": 210_000, "N_flows": 100}
    assert native.bxt_frames(210_000, 10**9) == pytest.approx(26_250 / 1514)
    line = native.hpcc_line(p, 10**9)
    assert "B x T = 26.2 KB = 17.3 frames of 1514 bytes" in line, line
    assert "one frame queued is 0.058 of U against 1 - eta = 0.05" in line, line
    assert "173.4 frames" in native.hpcc_line(p, 10 * 10**9)
    assert "B x T" not in native.hpcc_line(p)          # no line rate, no B x T


def test_ack_every_reaches_the_engines_and_is_printed():
    """--ack-every M: the native receivers' packets per ACK (the lab's 4 unless
    given; [HPCC] section 3.1's is 1, which its fairness needs at the lab's B x T)."""
    assert native.ack_every() == native.ACK_EVERY == 4
    assert "native receivers ACK every 4 packets" in native.hpcc_line(native.hpcc_params())
    cli._set_hpcc(_args("--ack-every", "1", "--w-ai", "80"))
    assert native.ack_every() == 1
    line = native.hpcc_line(native.hpcc_params(), 10**9)
    assert "ACK every 1 packet (--ack-every)" in line and "W_AI = 80 bytes (given)" in line


def test_w_ai_floor_at_a_small_b_x_t():
    """Under native.CONVERGES_FROM_FRAMES of B x T the experiments raise W_AI to
    its measured floor (docs/experiments.md "Fairness and B x T": at 17 frames
    160 bytes with an ACK every 4 converged, the rule of thumb's 13 did not; 80
    with an ACK per packet), printed with the rule's value; not at a larger B x T,
    nor when --n, --w-ai or a sweep sets W_AI."""
    p = native.hpcc_params(T_ns=210_000)
    out, rule = native.bxt_w_ai(p, 10**9)                 # 17.3 frames, ACK every 4
    assert out == {"T_ns": 210_000, "w_ai_bytes": 160.0} and rule == pytest.approx(13.125)
    line = native.hpcc_line(out, 10**9, 4, rule)
    assert "W_AI = 160 bytes, the floor at a B x T under 80 frames with an ACK every 4" in line
    assert "N = 100 gives 13.1" in line, line
    assert native.bxt_w_ai(p, 10 * 10**9) == (p, None)   # 173 frames: the rule of thumb
    cli._set_hpcc(_args("--ack-every", "1"))
    out, _ = native.bxt_w_ai(native.hpcc_params(T_ns=210_000), 10**9)
    assert out["w_ai_bytes"] == 80.0
    cli._set_hpcc(_args("--n", "100"))
    p = native.hpcc_params(T_ns=210_000)
    assert native.bxt_w_ai(p, 10**9) == (p, None)
    cli._set_hpcc(_args("--w-ai", "20"))
    p = native.hpcc_params(T_ns=210_000)
    assert native.bxt_w_ai(p, 10**9) == (p, None)
    native.set_given({}, None)
    native.HPCC_OVERRIDES["w_ai_bytes"] = 50
    p = native.hpcc_params(T_ns=210_000)
    assert native.bxt_w_ai(p, 10**9) == (p, None)
