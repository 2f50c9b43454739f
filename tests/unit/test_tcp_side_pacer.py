"""hpccd.tcp_side.pacer.Lateness: the pacing timers' lateness histogram as
the daemon and the benchmarks read it (its quantiles are bucket edges, an
upper bound by at most one bucket).  The BPF program that fills it:
tests/bpf/test_tcp_pacer.py."""
import math

import pytest

from hpccd.tcp_side import pacer
from hpccd.tcp_side.pacer import Lateness


def hist(**at_us) -> Lateness:
    """A histogram with `count` expiries at each `us` microseconds late
    (keyword u<us>=count), their sum at each bucket's lower edge."""
    b = [0] * pacer.BUCKETS
    n = s = 0
    for k, c in at_us.items():
        us = int(k[1:])
        b[min(us, pacer.BUCKETS - 1)] += c
        n += c
        s += c * us * 1000
    return Lateness(n, s, tuple(b))


def test_quantiles_are_the_upper_edges_of_their_buckets():
    late = hist(u10=50, u20=25, u30=24, u200=1)
    assert late.n == 100
    assert late.quantile_ns(0.5) == 11_000          # the 50th expiry is in [10, 11) us
    assert late.quantile_ns(0.51) == 21_000
    assert late.quantile_ns(0.75) == 21_000
    assert late.quantile_ns(0.99) == 31_000
    # the last bucket holds everything from 127 us: its edge is the span's end
    assert late.quantile_ns(1.0) == pacer.BUCKETS * pacer.BUCKET_NS
    assert late.quantile_ns(0) == 11_000             # the first non-empty bucket
    assert late.mean_ns == pytest.approx((500 + 500 + 720 + 200) * 1000 / 100)
    s = late.summary()
    assert (s["n"], s["p50_us"], s["p75_us"], s["p90_us"]) == (100, 11.0, 21.0, 31.0)


def test_windows_are_differences_and_sums_of_readings():
    a, b = hist(u10=5), hist(u10=7, u40=3)
    d = b - a
    assert (d.n, d.sum_ns, d.buckets[10], d.buckets[40]) == (5, 140_000, 2, 3)
    assert d + a == b
    assert Lateness.sum([a, d]) == b
    assert Lateness.sum([]) == pacer.EMPTY


def test_no_expiries_no_figures():
    assert pacer.EMPTY.n == 0
    assert math.isnan(pacer.EMPTY.mean_ns) and math.isnan(pacer.EMPTY.quantile_ns(0.5))
    with pytest.raises(ValueError):
        hist(u1=1).quantile_ns(1.5)


def test_wake_floor_measures_every_wait():
    """wake_floor(): one lateness per timed wait, quantiles in order; a
    wait returns after its deadline, never before (CLOCK_MONOTONIC,
    TIMER_ABSTIME), so every figure is >= 0 and the mean over 200 waits is
    more than the clock's resolution."""
    w = pacer.wake_floor(200, 20_000)
    assert w["n"] == 200
    assert 0 <= w["p50_us"] <= w["p90_us"] <= w["p99_us"] <= w["max_us"]
    assert w["max_us"] > 0
    with pytest.raises(ValueError, match="must be positive"):
        pacer.wake_floor(0)
