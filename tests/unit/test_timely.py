"""TIMELY (R. Mittal et al., "TIMELY: RTT-based Congestion Control for the
Datacenter", SIGCOMM 2015, section 4, Algorithm 1) through hpccd.core.cc: every
expected value is worked out by hand from Algorithm 1, with the arithmetic
next to it.

  new_rtt_diff = new_rtt - prev_rtt; prev_rtt = new_rtt
  rtt_diff = (1 - alpha) rtt_diff + alpha new_rtt_diff
  normalized_gradient = rtt_diff / minRTT
  new_rtt < T_low:   rate += delta
  new_rtt > T_high:  rate *= 1 - beta (1 - T_high / new_rtt)
  gradient <= 0:     rate += N delta, N = 5 after five negative gradients (HAI)
  else:              rate *= 1 - beta gradient

Defaults (the TIMELY paper's, as the HPCC paper's section 5.1 uses them):
alpha = 0.875, beta = 0.8, delta = 10 Mbit/s, T_low = 50 us, T_high = 500 us,
HAI N = 5 after 5; minRTT 13 us; line 100 Gbit/s; floor 1 Mbit/s.  The tests
start at 5 Gbit/s on a 10 Gbit/s line.  RTTs are whole microseconds and
alpha, 1 - alpha are 7/8 and 1/8, so rtt_diff is exact; rates that only add
delta are exact integers.
"""
from __future__ import annotations

import pytest

from hpccd.core.algorithms import make_flow
from hpccd.core.cc import ParamError, Timely

LINE = 10_000_000_000


def flow(**kw) -> Timely:
    return Timely(line_rate_bps=LINE, init_rate_bps=5e9, **kw)


def test_below_t_low_adds_delta_and_the_first_sample_has_no_gradient():
    t = flow()
    t.on_rtt(20_000)
    # first sample: new_rtt_diff = 0, rtt_diff = 0, gradient 0; 20 us < T_low = 50 us
    assert (t.rate_bps, t.rtt_diff, t.gradient) == (5.01e9, 0.0, 0.0)   # 5e9 + 1e7
    t.on_rtt(40_000)
    # still below T_low, whatever the gradient (rtt_diff = 7/8 x 20000 = 17500)
    assert (t.rate_bps, t.rtt_diff) == (5.02e9, 17_500.0)
    assert t.counters()["n_low"] == 2


def test_above_t_high_cuts_in_proportion():
    t = flow()
    t.on_rtt(1_000_000)
    # 1 - 0.8 (1 - 500000 / 1000000) = 1 - 0.4 = 0.6: 5e9 x 0.6 = 3e9
    assert t.rate_bps == pytest.approx(3e9, rel=1e-15)
    t.on_rtt(2_000_000)
    # 1 - 0.8 (1 - 1/4) = 0.4: 3e9 x 0.4 = 1.2e9 (the gradient is not used above T_high)
    assert t.rate_bps == pytest.approx(1.2e9, rel=1e-15)
    assert t.counters()["n_high"] == 2


def test_gradient_between_the_thresholds():
    t = flow()
    t.on_rtt(100_000)
    # first sample: gradient 0 <= 0: rate + 1 x delta = 5.01e9
    assert t.rate_bps == 5.01e9
    t.on_rtt(113_000)
    # new_rtt_diff = 13000; rtt_diff = 1/8 x 0 + 7/8 x 13000 = 11375;
    # gradient = 11375 / 13000 = 0.875 > 0: rate x (1 - 0.8 x 0.875) = 5.01e9 x 0.3 = 1.503e9
    assert (t.rtt_diff, t.gradient) == (11_375.0, 0.875)
    assert t.rate_bps == pytest.approx(1.503e9, rel=1e-15)
    t.on_rtt(100_000)
    # new_rtt_diff = -13000; rtt_diff = 11375/8 - 7/8 x 13000 = 1421.875 - 11375 = -9953.125;
    # gradient = -9953.125 / 13000 = -0.765625: rate + delta = 1.513e9
    assert (t.rtt_diff, t.gradient) == (-9953.125, -0.765625)
    assert t.rate_bps == pytest.approx(1.513e9, rel=1e-15)
    assert t.neg_streak == 1 and not t.hai


def test_hai_after_five_negative_gradients_and_a_rise_ends_it():
    t = flow()
    rates, hai = [], []
    for rtt in (200_000, 190_000, 180_000, 170_000, 160_000, 150_000, 140_000):
        t.on_rtt(rtt)
        rates.append(t.rate_bps)
        hai.append(t.hai)
    # sample 1: gradient 0 (not negative): + delta             -> 5.01e9, streak 0
    # samples 2..5: new_rtt_diff = -10000, rtt_diff < 0, streak 1..4: + delta each
    #                                                           -> 5.02e9 .. 5.05e9
    # samples 6, 7: streak 5, 6 >= 5: HAI, + 5 x delta = 5e7   -> 5.10e9, 5.15e9
    assert rates == [5.01e9, 5.02e9, 5.03e9, 5.04e9, 5.05e9, 5.10e9, 5.15e9]
    assert hai == [False] * 5 + [True] * 2
    # rtt_diff, 1/8 of the last plus 7/8 of -10000 = -8750:
    #   0, -8750, -9843.75, -9980.46875, -9997.55859375, -9999.69482421875,
    #   -9999.96185302734375
    assert t.rtt_diff == -9999.96185302734375
    assert t.neg_streak == 6
    t.on_rtt(200_000)
    # new_rtt_diff = +60000: rtt_diff = -9999.96185302734375 / 8 + 52500
    #   = 51250.00476837158203125; gradient = that / 13000 = 3.94...;
    # 1 - 0.8 x 3.94 < 0: the rate hits the 1 Mbit/s floor; the streak ends
    assert t.rtt_diff == 51250.00476837158203125
    assert t.rate_bps == 1e6
    assert t.neg_streak == 0 and not t.hai
    c = t.counters()
    assert (c["n_increase"], c["n_hai"], c["n_decrease"]) == (5, 2, 1)


def test_rate_never_exceeds_the_line():
    t = Timely(line_rate_bps=LINE)               # starts at line rate (derived)
    assert t.rate_bps == 1e10
    t.on_rtt(10_000)
    assert t.rate_bps == 1e10                    # 1e10 + 1e7, held at the line


def test_hai_settings_are_parameters():
    t = flow(hai_N=3, hai_after=2)
    for rtt in (200_000, 190_000, 180_000, 170_000):
        t.on_rtt(rtt)
    # + delta (gradient 0), + delta (streak 1), + 3 delta (streak 2), + 3 delta (streak 3)
    assert t.rate_bps == 5e9 + 8 * 1e7


def test_the_batch_gives_the_bits_of_single_calls():
    rtts = [30_000, 60_000, 90_000, 80_000, 70_000, 600_000, 65_000, 64_000, 63_000,
            62_000, 61_000, 60_000, 59_000]
    a = flow()
    out = a.run(a.events({"rtt_ns": r} for r in rtts))
    b = flow()
    for r, o in zip(rtts, out):
        b.on_rtt(r)
        assert o == {"rate_bps": b.rate_bps, "rtt_diff_ns": b.rtt_diff,
                     "gradient": b.gradient, "hai": b.hai}
    assert make_flow("timely").rate_bps == 1e11


@pytest.mark.parametrize("key,value", [
    ("alpha", 0.0), ("alpha", 1.5), ("beta", 0.0), ("beta", 2.0), ("delta_bps", 0.0),
    ("T_low_ns", 500_000), ("min_rtt_ns", 0), ("hai_N", 0), ("hai_after", 0),
    ("line_rate_bps", 0), ("min_rate_bps", 0.0), ("init_rate_bps", 2e11),
])
def test_bad_parameters_are_refused_by_name(key, value):
    with pytest.raises(ParamError) as e:
        Timely(**{key: value})
    assert e.value.key == key, str(e.value)
    with pytest.raises(ParamError):
        Timely(T_low=1)                          # unknown
