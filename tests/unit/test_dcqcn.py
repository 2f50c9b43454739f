"""DCQCN (Y. Zhu et al., "Congestion Control for Large-Scale RDMA
Deployments", SIGCOMM 2015, section 3.1) through hpccd.core.cc: every expected
value is worked out by hand from the paper's equations, with the arithmetic
next to it.

  Eq. (1)  on a CNP: RT = RC, RC = RC (1 - alpha/2), alpha = (1 - g) alpha + g
  Eq. (2)  alpha timer, every K without a CNP: alpha = (1 - g) alpha
  Eq. (3)  fast recovery (first F increase events): RC = (RT + RC) / 2
  Eq. (4)  additive increase: RT = RT + R_AI, RC = (RT + RC) / 2
  hyper    both timer and byte counter past F: RT = RT + i R_HAI,
           i = min(T, BC) - F, RC = (RT + RC) / 2   (Figure 6)
  NP       a CNP at most once per N per flow, when CE-marked packets arrive
  CP       RED marking, thresholds of the HPCC paper's section 5.1

Defaults (include/hpccd/cc.h): g = 1/256, K = T = 55 us, B = 10^7 bytes,
F = 5, R_AI = 40 Mbit/s, R_HAI = 10 R_AI, line rate 100 Gbit/s, floor
1 Mbit/s, alpha = 1.  Most tests use a 10 Gbit/s line so the numbers stay
readable; every rate below is an integer or a short binary fraction, so the
binary64 arithmetic is exact and the comparisons are exact.
"""
from __future__ import annotations

import pytest

from hpccd.core.algorithms import make_flow
from hpccd.core.cc import (Dcqcn, DcqcnNotificationPoint, ParamError, dcqcn_ecn_for_rate,
                           dcqcn_mark_prob)

G = 1 / 256
LINE = 10_000_000_000


def two_cuts() -> Dcqcn:
    """Line 10 Gbit/s, CNPs at 0 and 1000 ns (no timer due between them):
    CNP 1: RT = 1e10, RC = 1e10 (1 - 1/2) = 5e9, alpha = (255/256) 1 + 1/256 = 1
    CNP 2: RT = 5e9,  RC = 5e9 (1 - 1/2) = 2.5e9, alpha = 1
    timers restart at the second CNP: first expiries at 1000 + 55000 = 56000."""
    d = Dcqcn(line_rate_bps=LINE)
    d.on_cnp(0)
    d.on_cnp(1000)
    assert (d.rate_bps, d.target_bps, d.alpha) == (2.5e9, 5e9, 1.0)
    assert d.next_timer_ns == 56_000
    return d


def test_a_flow_starts_at_line_rate_and_nothing_runs_before_its_first_cnp():
    d = Dcqcn()
    # section 3.1: no slow start, the flow starts at line rate; alpha = 1
    assert (d.rate_bps, d.target_bps, d.alpha, d.stage) == (1e11, 1e11, 1.0, "line_rate")
    assert d.R_HAI == 400e6                     # derived: 10 x R_AI = 10 x 40 Mbit/s
    assert d.next_timer_ns == 0                 # no timer armed
    d.advance(10**9)
    d.on_tx(10**8, 10**9)                       # 10 byte counter periods: not counting yet
    assert (d.rate_bps, d.target_bps, d.alpha, d.bc_count) == (1e11, 1e11, 1.0, 0)


def test_cnp_cuts_by_eq1():
    d = Dcqcn()
    d.on_cnp(1000)
    # RT = RC = 1e11; RC = 1e11 (1 - 1/2) = 5e10; alpha = (255/256) 1 + 1/256 = 1
    assert (d.rate_bps, d.target_bps, d.alpha, d.stage) == (5e10, 1e11, 1.0, "fast_recovery")
    d = Dcqcn(alpha_init=0.5)
    d.on_cnp(1000)
    # RC = 1e11 (1 - 0.25) = 7.5e10; alpha = 0.5 x 255/256 + 1/256 = 128.5/256 = 0.501953125
    assert (d.rate_bps, d.target_bps, d.alpha) == (7.5e10, 1e11, 0.501953125)
    assert d.counters()["n_cnp"] == 1


def test_alpha_timer_decays_by_eq2_and_restarts_at_a_cnp():
    d = Dcqcn()
    d.on_cnp(0)                                   # alpha = 1, alpha timer at 55000
    d.advance(54_999)
    assert d.alpha == 1.0
    d.advance(55_000)
    assert d.alpha == 255 / 256                   # (1 - g) x 1 = 0.99609375
    d.advance(110_000)
    assert d.alpha == 65025 / 65536               # (255/256)^2
    d.on_cnp(150_000)                             # not due (next at 165000)
    # Eq. (1): alpha = (255/256)(65025/65536) + 1/256
    #        = 16581375/16777216 + 65536/16777216 = 16646911/16777216
    assert d.alpha == 16646911 / 16777216
    d.advance(204_999)                            # timer restarted: next at 205000
    assert d.alpha == 16646911 / 16777216
    d.advance(205_000)
    assert d.alpha == 16646911 / 16777216 * 255 / 256
    assert d.counters()["n_alpha_decays"] == 3


def test_fast_recovery_then_additive_increase_by_the_timer():
    d = two_cuts()
    rates = []
    for k in range(1, 8):                          # expiries at 1000 + k x 55000
        d.advance(1000 + k * 55_000)
        rates.append((d.rate_bps, d.target_bps, d.stage, d.t_count))
    # Eq. (3), T = 1..5 <= F: RC = (5e9 + RC) / 2, RT = 5e9
    #   (5e9 + 2.5e9)/2 = 3.75e9; (5e9 + 3.75e9)/2 = 4.375e9; 4.6875e9; 4.84375e9; 4.921875e9
    # Eq. (4), T = 6, 7 > F, BC = 0 <= F:
    #   RT = 5e9 + 4e7 = 5.04e9, RC = (5.04e9 + 4.921875e9)/2 = 4.9809375e9
    #   RT = 5.08e9,             RC = (5.08e9 + 4.9809375e9)/2 = 5.03046875e9
    assert rates == [(3.75e9, 5e9, "fast_recovery", 1), (4.375e9, 5e9, "fast_recovery", 2),
                     (4.6875e9, 5e9, "fast_recovery", 3), (4.84375e9, 5e9, "fast_recovery", 4),
                     (4.921875e9, 5e9, "fast_recovery", 5),
                     (4.9809375e9, 5.04e9, "additive", 6),
                     (5.03046875e9, 5.08e9, "additive", 7)]
    # the alpha timer ran alongside: 7 expiries at 56000 .. 386000, Eq. (2) each
    assert d.alpha == pytest.approx((255 / 256) ** 7, rel=1e-15)
    # one call that catches up on all seven expiries gives the same rates
    e = two_cuts()
    e.advance(1000 + 7 * 55_000)
    assert (e.rate_bps, e.target_bps, e.t_count) == (5.03046875e9, 5.08e9, 7)


def test_byte_counter_then_hyper_increase_when_both_are_past_f():
    d = Dcqcn(line_rate_bps=LINE, B_bytes=1000)
    d.on_cnp(0)
    d.on_cnp(1000)                                 # RT = 5e9, RC = 2.5e9 (two_cuts)
    d.on_tx(6500, 1000)                            # 6 byte counter periods, 500 bytes left
    # BC = 1..5 fast recovery: RC = 3.75e9, 4.375e9, 4.6875e9, 4.84375e9, 4.921875e9
    # BC = 6, T = 0: additive: RT = 5.04e9, RC = (5.04e9 + 4.921875e9)/2 = 4.9809375e9
    assert (d.rate_bps, d.target_bps, d.stage, d.bc_count) == (4.9809375e9, 5.04e9,
                                                              "additive", 6)
    d.on_tx(499, 1000)                             # 999 bytes: no period yet
    assert d.bc_count == 6
    seen = []
    for k in range(1, 8):
        d.advance(1000 + k * 55_000)
        seen.append((d.rate_bps, d.target_bps, d.stage))
    # T = 1..5: min(T, BC) = T <= F, max = 6 > F: additive, RT += 4e7:
    #   RT 5.08e9, RC (5.08e9 + 4.9809375e9)/2      = 5.03046875e9
    #   RT 5.12e9, RC (5.12e9 + 5.03046875e9)/2     = 5.075234375e9
    #   RT 5.16e9, RC (5.16e9 + 5.075234375e9)/2    = 5.1176171875e9
    #   RT 5.20e9, RC (5.20e9 + 5.1176171875e9)/2   = 5.15880859375e9
    #   RT 5.24e9, RC (5.24e9 + 5.15880859375e9)/2  = 5.199404296875e9
    # T = 6: min(6, 6) > F: hyper, i = 6 - 5 = 1: RT = 5.24e9 + 4e8 = 5.64e9,
    #   RC = (5.64e9 + 5.199404296875e9)/2 = 5.4197021484375e9
    # T = 7: min(7, 6) = 6 still: i = 1 again: RT = 6.04e9,
    #   RC = (6.04e9 + 5.4197021484375e9)/2 = 5.72985107421875e9
    assert seen == [(5.03046875e9, 5.08e9, "additive"),
                    (5.075234375e9, 5.12e9, "additive"),
                    (5.1176171875e9, 5.16e9, "additive"),
                    (5.15880859375e9, 5.2e9, "additive"),
                    (5.199404296875e9, 5.24e9, "additive"),
                    (5.4197021484375e9, 5.64e9, "hyper"),
                    (5.72985107421875e9, 6.04e9, "hyper")]
    d.on_tx(1, 386_000)                            # 500 + 499 + 1 = 1000: BC = 7
    # min(T, BC) = min(7, 7) = 7: i = 2: RT = 6.04e9 + 2 x 4e8 = 6.84e9,
    #   RC = (6.84e9 + 5.72985107421875e9)/2 = 6.284925537109375e9
    assert (d.rate_bps, d.target_bps, d.bc_count) == (6.284925537109375e9, 6.84e9, 7)
    c = d.counters()
    assert (c["n_fast_recovery"], c["n_additive"], c["n_hyper"]) == (5, 6, 3)


def test_a_cnp_restarts_the_stages():
    d = two_cuts()
    d.advance(1000 + 6 * 55_000)                   # into additive: RT 5.04e9, RC 4.9809375e9
    d.on_cnp(380_000)                              # before the 7th expiry (386000)
    # Eq. (1): RT = 4.9809375e9, RC = 4.9809375e9 (1 - alpha/2),
    # alpha before the cut: 6 decays of Eq. (2) from 1 (56000 .. 331000)
    a = (255 / 256) ** 6
    assert d.target_bps == 4.9809375e9
    assert d.rate_bps == pytest.approx(4.9809375e9 * (1 - a / 2), rel=1e-15)
    assert (d.t_count, d.bc_count, d.stage) == (0, 0, "fast_recovery")
    assert d.next_timer_ns == 435_000               # 380000 + 55000
    rc = d.rate_bps
    d.advance(435_000)                              # fast recovery again: Eq. (3)
    assert d.rate_bps == (4.9809375e9 + rc) / 2


def test_rates_stop_at_line_rate_and_a_long_idle_catches_up():
    d = Dcqcn(line_rate_bps=LINE)
    d.on_cnp(0)                                     # RT = 1e10, RC = 5e9
    d.advance(10**9)
    # floor(1e9 / 55000) = 18181 timer expiries.  RT = 1e10 already: additive
    # and hyper steps are clipped at the line; RC halves its distance to it
    # each time and lands on 1e10 exactly (the last half ulp rounds to even).
    assert (d.rate_bps, d.target_bps) == (1e10, 1e10)
    assert d.t_count == 18181
    assert d.alpha == pytest.approx((255 / 256) ** 18181, rel=1e-12)   # Eq. (2) x 18181
    assert d.next_timer_ns == 18182 * 55_000


def test_the_floor_holds_and_time_never_goes_back():
    d = Dcqcn(line_rate_bps=LINE, min_rate_bps=1e9)
    for t in range(4):
        d.on_cnp(t)
    # RC: 1e10 -> 5e9 -> 2.5e9 -> 1.25e9 -> 6.25e8, held at the 1e9 floor; RT = 1.25e9
    assert (d.rate_bps, d.target_bps) == (1e9, 1.25e9)
    d.advance(200_000)                 # 3 expiries (55003, 110003, 165003)
    before = (d.rate_bps, d.target_bps, d.alpha, d.t_count)
    d.advance(1000)                    # earlier than 200000: nothing happens
    assert (d.rate_bps, d.target_bps, d.alpha, d.t_count) == before
    d.on_cnp(5)                        # taken at 200000: timers from there
    assert d.next_timer_ns == 255_000


def test_the_batch_gives_the_bits_of_single_calls():
    evs = [{"now_ns": 0, "cnp": 1}, {"now_ns": 30_000, "tx_bytes": 25_000_000},
           {"now_ns": 200_000, "cnp": 1}, {"now_ns": 700_000, "tx_bytes": 3_000_000},
           {"now_ns": 5_000_000}]
    a = Dcqcn(line_rate_bps=LINE)
    out = a.run(a.events(evs))
    b = Dcqcn(line_rate_bps=LINE)
    for e, o in zip(evs, out):
        b.on_tx(e.get("tx_bytes", 0), e["now_ns"])
        if e.get("cnp"):
            b.on_cnp(e["now_ns"])
        assert o == {"rate_bps": b.rate_bps, "target_bps": b.target_bps, "alpha": b.alpha,
                     "stage": b.stage}
    # the second event's 25 MB are 2 byte counter periods of 10^7: BC = 2
    assert out[1]["stage"] == "fast_recovery"
    assert out[1]["rate_bps"] == 8.75e9              # 5e9 -> 7.5e9 -> 8.75e9 by Eq. (3)
    assert make_flow("dcqcn", line_rate_bps=LINE).rate_bps == 1e10


@pytest.mark.parametrize("key,value", [
    ("g", 0.0), ("g", 1.5), ("K_ns", 0), ("T_ns", 0), ("B_bytes", 0), ("F", 0), ("F", 1001),
    ("R_AI_bps", 95_000.0),          # below 1e11 / 2^20 = 95367.4 bit/s
    ("R_HAI_bps", -1.0), ("R_HAI_bps", 95_000.0), ("R_HAI_bps", 5e-324),
    ("min_rate_bps", 0.0), ("min_rate_bps", 2e11), ("alpha_init", 1.5),
    ("line_rate_bps", 0),
])
def test_bad_parameters_are_refused_by_name(key, value):
    with pytest.raises(ParamError) as e:
        Dcqcn(**{key: value})
    assert e.value.key == key, str(e.value)
    Dcqcn(R_AI_bps=95_368.0)         # just above the bound: accepted
    Dcqcn(R_HAI_bps=95_368.0)
    with pytest.raises(ParamError):
        Dcqcn(Kmin=1)                # unknown


# ---- notification point --------------------------------------------------------------

def test_np_sends_at_most_one_cnp_per_n():
    np_ = DcqcnNotificationPoint(N_ns=50_000)
    assert np_.on_packet(True, 0)               # first mark, no CNP before: at once
    assert not np_.on_packet(True, 10_000)      # within N of the CNP at 0: held
    assert np_.pending and np_.next_ns == 50_000
    assert not np_.poll(49_999)
    assert np_.poll(50_000)                     # the window ended with a mark in it
    assert not np_.pending and np_.next_ns == 0
    assert not np_.on_packet(True, 60_000)      # within N of 50000: held
    assert np_.on_packet(False, 100_000)        # window over, held mark: CNP now
    assert not np_.on_packet(False, 200_000)    # nothing marked: no CNP
    assert not np_.poll(300_000)
    assert np_.on_packet(True, 300_000)         # 200 us after the last CNP: at once
    assert (np_.n_ce, np_.n_cnp) == (4, 4)


def test_np_without_marks_never_sends_and_n_zero_sends_per_mark():
    np_ = DcqcnNotificationPoint()
    assert not any(np_.on_packet(False, t) for t in range(0, 10**6, 1000))
    np0 = DcqcnNotificationPoint(N_ns=0)
    assert all(np0.on_packet(True, 7) for _ in range(3))
    for bad in (-1, 2**64, 1.5):
        with pytest.raises(ParamError) as e:
            DcqcnNotificationPoint(N_ns=bad)
        assert e.value.key == "N_ns"


# ---- switch side ---------------------------------------------------------------------

def test_ecn_thresholds_scale_with_bandwidth_as_the_hpcc_paper_says():
    # HPCC paper section 5.1: Kmin = 100 KB x Bw/25G, Kmax = 400 KB x Bw/25G
    assert dcqcn_ecn_for_rate(25_000_000_000) == {"kmin_bytes": 100_000,
                                                  "kmax_bytes": 400_000, "pmax": 0.01}
    assert dcqcn_ecn_for_rate(100_000_000_000)["kmin_bytes"] == 400_000       # x 4
    assert dcqcn_ecn_for_rate(100_000_000_000)["kmax_bytes"] == 1_600_000
    with pytest.raises(ParamError):
        dcqcn_ecn_for_rate(2**64)
    e = dcqcn_ecn_for_rate(1_000_000_000)                                     # / 25
    assert (e["kmin_bytes"], e["kmax_bytes"]) == (4000, 16_000)
    # RED: 0 up to Kmin; 0.01 x (10000 - 4000) / (16000 - 4000) = 0.005; 0.01 at Kmax; 1 above
    assert [dcqcn_mark_prob(4000, 16_000, 0.01, q) for q in (0, 4000, 10_000, 16_000, 16_001)] \
        == [0.0, 0.0, 0.005, 0.01, 1.0]
