"""hpccd.experiment.measure and the incast experiment's arithmetic on
synthetic samples with hand-computed answers."""
from __future__ import annotations

import math

import pytest

from hpccd.experiment import algos, incast, measure
from hpccd.lab.int_switch import QueueSample


def qs(ts_ns: int, backlog: int, tx: int = 0) -> QueueSample:
    return QueueSample(ts_ns, tx, 0, backlog, 0, 0, 1, 2, 0)


def test_percentile_interpolates_and_is_nan_on_nothing():
    assert measure.percentile([1, 2, 3, 4], 50) == 2.5
    assert measure.percentile([5], 99) == 5
    assert measure.percentile(list(range(101)), 99) == 99
    assert math.isnan(measure.percentile([], 50))


def test_jain():
    assert measure.jain([1, 1, 1, 1]) == 1.0
    assert measure.jain([1, 0, 0, 0]) == 0.25
    assert measure.jain([2, 1]) == pytest.approx(9 / 10)


def test_rate_series_bins_cumulative_bytes():
    pts = [(0, 0), (5_000_000, 1000), (10_000_000, 3000), (25_000_000, 3000)]
    # 10 ms bins: bin 0 ends at 1000 bytes, bin 1 at 3000, bin 2 has nothing (3000)
    assert measure.rate_series(pts, 10_000_000) == [
        (0.0, 1000 * 8 / 0.01), (0.01, 2000 * 8 / 0.01), (0.02, 0.0)]


def test_verdict_wants_a_busy_link_and_line_rate_while_backlogged():
    link = 1_000_000_000
    # 2 ms backlogged, 250 000 bytes sent = 1 Gbit/s exactly
    full = [qs(0, 50_000, 0), qs(1_000_000, 50_000, 125_000), qs(2_000_000, 40_000, 250_000)]
    v = measure.bottleneck_verdict(full, link, 0.5, 0, 2_000_000)
    assert v.queue_bound and v.tx_ratio == pytest.approx(1.0)
    assert v.utilisation == pytest.approx(1.0) and "link-bound" in v.text
    # same backlog, half the bytes: the emulated port itself was starved
    starved = [qs(0, 50_000, 0), qs(1_000_000, 50_000, 62_500), qs(2_000_000, 40_000, 125_000)]
    v = measure.bottleneck_verdict(starved, link, 0.99, 0, 2_000_000)
    assert not v.queue_bound and v.tx_ratio == pytest.approx(0.5)
    assert "could not send at line rate" in v.text
    # never backlogged, 96% utilised: link-bound (an empty queue at full use)
    lean = [qs(0, 0, 0), qs(5_000_000, 0, 600_000)]
    v = measure.bottleneck_verdict(lean, link, 0.5, 0, 5_000_000)
    assert v.queue_bound and math.isnan(v.tx_ratio) and v.utilisation == pytest.approx(0.96)
    # never backlogged, half used: CPU-bound with busy CPUs, the algorithm's doing without
    half = [qs(0, 0, 0), qs(5_000_000, 0, 312_500)]
    v = measure.bottleneck_verdict(half, link, 0.97, 0, 5_000_000)
    assert not v.queue_bound and "hosts could not fill" in v.text
    v = measure.bottleneck_verdict(half, link, 0.4, 0, 5_000_000)
    assert not v.queue_bound and "algorithm left the link idle" in v.text
    # ... unless one core was saturated: a single-threaded sender is bound by it
    v = measure.bottleneck_verdict(half, link, 0.5, 0, 5_000_000, busiest_cpu=0.97)
    assert not v.queue_bound and "hosts could not fill" in v.text and "busiest core 97%" in v.text


def test_a_kernel_pacer_that_sends_less_than_the_algorithm_asked_is_named():
    """tcp-hpcc (kernel_cc.KernelCc.pacing): the link half used with CPUs
    to spare is the pacer's when HPCC's rates asked for the link and a late
    pacing timer held more ACKs than the window; the algorithm's otherwise."""
    link = 1_000_000_000
    half = [qs(0, 0, 0), qs(5_000_000, 0, 312_500)]
    timer = {"asked": 0.97, "pace_lost": 0.21, "timer_late_us": 23.0,
             "held": {"cwnd": 0.04, "pacing": 0.30, "timer": 0.52}}
    v = measure.bottleneck_verdict(half, link, 0.4, 0, 5_000_000, paced=timer)
    assert not v.queue_bound and v.text.startswith("pacer-bound")
    assert "asked for 97% of it and its flows sent 79% of that" in v.text
    assert "late pacing timer 52%" in v.text and "23 us late on average" in v.text
    # the window held more than the timer: the algorithm's (its W at the hosts' RTT)
    window = dict(timer, held={"cwnd": 0.39, "pacing": 0.06, "timer": 0.29})
    v = measure.bottleneck_verdict(half, link, 0.4, 0, 5_000_000, paced=window)
    assert "algorithm left the link idle" in v.text and "window 39%" in v.text
    # the rates asked for less than the link: the algorithm's
    low = dict(timer, asked=0.6)
    v = measure.bottleneck_verdict(half, link, 0.4, 0, 5_000_000, paced=low)
    assert "algorithm left the link idle" in v.text and "asked for 60%" in v.text
    # busy CPUs still decide first; a full link is link-bound whatever was asked
    v = measure.bottleneck_verdict(half, link, 0.95, 0, 5_000_000, paced=timer)
    assert "hosts could not fill" in v.text
    lean = [qs(0, 0, 0), qs(5_000_000, 0, 600_000)]
    v = measure.bottleneck_verdict(lean, link, 0.5, 0, 5_000_000, paced=low)
    assert v.queue_bound and "link-bound" in v.text


def test_cpu_meter_reports_all_and_the_busiest_core():
    import time
    m = measure.CpuMeter().start()
    end = time.monotonic() + 0.3
    while time.monotonic() < end:           # keep one core busy
        pass
    m.stop()
    assert 0 <= m.busy <= m.busiest <= 1
    assert m.busiest > 0.5


def test_drain_time_counts_from_t0_and_from_the_peak_to_back_at_the_level():
    s = [(1000, 0), (2000, 90_000), (3000, 200_000), (4000, 50_000), (5000, 2000), (6000, 500)]
    assert incast._drain_time(s, 1000, 3000) == ((5000 - 1000) / 1e9, (5000 - 3000) / 1e9,
                                                 (3000 - 1000) / 1e9)
    assert incast._drain_time(s[:4], 1000, 3000) == (math.inf, math.inf, 2000 / 1e9)


def test_a_late_peak_is_waited_for_from_t0_but_drains_quickly_from_itself():
    # the lab's incast (docs/experiments.md "What holds the incast's queue"):
    # nothing queued at the start, small backlogs, the largest 30 ms in,
    # gone 0.4 ms later: from t0 that reads as 30.4 ms, from the peak 0.4 ms
    us = 1000
    grid = [(t * us, 0) for t in range(0, 30_000, 100)]
    grid[50] = (5000 * us, 20_000)                   # an earlier, smaller backlog
    grid[51] = (5100 * us, 15_000)
    grid += [(30_000 * us, 33_000), (30_100 * us, 30_000), (30_200 * us, 20_000),
             (30_300 * us, 12_000), (30_400 * us, 4_000), (30_500 * us, 0)]
    from_t0, from_peak, at = incast._drain_time(grid, 0, 9278)
    assert at == pytest.approx(30e-3)
    assert from_peak == pytest.approx(0.4e-3)
    assert from_t0 == pytest.approx(30.4e-3)
    # the longest stretch above the level: the late backlog's 0.4 ms
    # (the earlier one lasted 0.2 ms: 5.0 to 5.2 ms)
    assert incast._longest_backlog(grid, 0, 9278) == pytest.approx(0.4e-3)
    # before t0 nothing counts; a stretch still open at the end counts to it
    assert incast._longest_backlog(grid, 6000 * us, 9278) == pytest.approx(0.4e-3)
    assert incast._longest_backlog(grid[:-3], 0, 9278) == pytest.approx(0.2e-3)
    assert incast._longest_backlog([(0, 0), (100, 0)], 0, 9278) == 0


def test_window_back_counts_time_and_wc_updates_from_the_short_flows_end():
    from hpccd.experiment import longshort
    ms = 1_000_000
    # W 10,000 before (t < 100 ms), halved while the short flow runs
    # (110-150 ms), then back in AI steps and one MI: 6 W^c updates
    pts = [(t * ms, 10_000.0, t) for t in range(0, 100, 2)]
    pts += [(t * ms, 5_000.0, t) for t in range(110, 151, 2)]
    pts += [(151 * ms, 5_001.0, 152), (152 * ms, 5_002.0, 153), (153 * ms, 5_003.0, 154),
            (154 * ms, 5_004.0, 155), (155 * ms, 5_005.0, 156), (156 * ms, 9_500.0, 156)]
    low, back_s, updates = longshort.window_back(pts, 100 * ms, 110 * ms, 150 * ms)
    assert low == 0.5
    assert back_s == pytest.approx(6e-3) and updates == 6
    # W never below 90 % at the short flow's end: back at once
    flat = [(t * ms, 10_000.0 if t < 100 else 9_200.0, t) for t in range(0, 200, 2)]
    assert longshort.window_back(flat, 100 * ms, 110 * ms, 150 * ms) == (0.92, 0.0, 0)
    # never back; no samples at all (a kernel flow)
    assert longshort.window_back(pts[:-1], 100 * ms, 110 * ms, 150 * ms)[1:] == \
        (math.inf, math.inf)
    assert all(math.isnan(x) for x in longshort.window_back([], 100 * ms, 110 * ms, 150 * ms))


def test_srtt_over_T_is_the_long_flows_median_srtt_alone_in_units_of_T():
    from hpccd.experiment import longshort
    ms = 1_000_000
    # srtt 150-250 us alone (median 200), 900 us while the short flow ran
    pts = [(t * ms, 10_000.0, t, 150_000 + (t % 3) * 50_000) for t in range(600, 1000, 2)]
    pts += [(t * ms, 5_000.0, t, 900_000) for t in range(1000, 1100, 2)]
    assert longshort.srtt_over_T(pts, 1000 * ms, 100_000) == pytest.approx(2.0)
    # no samples (a kernel flow), no srtt yet, no T: nothing to say
    assert math.isnan(longshort.srtt_over_T([], 1000 * ms, 100_000))
    assert math.isnan(longshort.srtt_over_T([(999 * ms, 1.0, 0, 0)], 1000 * ms, 100_000))
    assert math.isnan(longshort.srtt_over_T(pts, 1000 * ms, 0))


def test_rate_between_two_instants():
    pts = [(0, 0), (1_000_000_000, 125_000_000), (2_000_000_000, 187_500_000)]
    assert measure.delivered_rate(pts, 1_000_000_000, 2_000_000_000) == pytest.approx(0.5e9)
    assert math.isnan(measure.delivered_rate(pts, 5, None))


def test_parse_algos_refuses_unknown_and_repeated():
    assert [a.name for a in algos.parse_algos("hpcc, cubic")] == ["hpcc", "cubic"]
    with pytest.raises(algos.AlgoError, match="unknown algorithm 'reno2'"):
        algos.parse_algos("cubic,reno2")
    with pytest.raises(algos.AlgoError, match="twice"):
        algos.parse_algos("cubic,cubic")
    with pytest.raises(algos.AlgoError, match="no algorithm"):
        algos.parse_algos(" , ")


def test_incast_topology_is_valid_and_has_one_bottleneck():
    from hpccd.lab.topology import Topology
    t = Topology.loads(incast.topology(7, 1000, 1_000_000, 30_000))
    assert len(t.hosts) == 9 and list(t.switches) == ["s1"]
    assert t.switches["s1"].ecn.kmin_bytes == 30_000
    assert all(len(t.path(h, "r1")) == 1 for h in t.hosts if h != "r1")


def test_queue_over_time_holds_a_sample_then_drains_at_the_link_rate():
    link = 1_000_000_000                     # 125 bytes per us
    s = [qs(0, 50_000), qs(1_000_000, 10_000)]
    grid = dict(measure.queue_over_time(s, link, 0, 1_000_000, sample_ns=100_000,
                                        step_ns=100_000))
    assert grid[0] == grid[100_000] == 50_000          # within the sample interval: as sampled
    assert grid[200_000] == 50_000 - 125 * 100         # 100 us of draining
    assert grid[500_000] == 0                          # drained after 400 us
    assert grid[1_000_000] == 10_000                   # the next sample
    assert measure.queue_over_time([], link, 0, 10) == []
    # before the first sample nothing is known to be queued
    assert dict(measure.queue_over_time([qs(500, 7)], link, 0, 1000, step_ns=500))[0] == 0


def test_port_rate_interpolates_the_byte_counter():
    s = [qs(0, 0, 0), qs(2_000_000, 0, 250_000), qs(4_000_000, 0, 250_000)]
    r = measure.port_rate(s, 0, 4_000_000, 1_000_000)
    assert [t for t, _ in r] == [0, 1_000_000, 2_000_000, 3_000_000]
    assert [round(b) for _, b in r] == [1_000_000_000, 1_000_000_000, 0, 0]


def test_txrate_experiment_topology_and_swings():
    from hpccd.experiment import txrate
    from hpccd.lab.topology import Topology
    t = Topology.loads(txrate.topology(dict(txrate.DEFAULTS)))
    assert sorted(t.hosts) == ["h1", "h2", "r1"] and t.switches["s1"].ecn is None
    assert txrate._swings([0, 10, 0, 10, 0]) == 4
    assert txrate._swings([5, 5, 5]) == 0
    assert txrate._swings([]) == 0
