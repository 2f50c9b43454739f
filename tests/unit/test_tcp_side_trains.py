"""hpccd.tcp_side.trains.segs_for: the train cap of tcp-hpcc's senders from
the bottleneck's B x T (docs/tcp-side.md, "Trains").  The cap itself acts
on real interfaces: tests/integration/test_tcp_cc_lab.py."""
import math
import types

import pytest

from hpccd.tcp_side import trains


def test_segs_for_is_an_eighth_of_b_x_t_in_segments():
    # 1 Gbit/s x 640 us = 80,000 B; an eighth 10,000 B = 6 segments of 1448
    assert trains.segs_for(1e9, 640_000) == 6
    assert trains.segs_for(1e9, 480_000) == 5
    # 100 Gbit/s x 12 us = 150,000 B; an eighth 18,750 B = 12 segments
    assert trains.segs_for(100e9, 12_000) == 12
    # the lab's 1 Gbit/s x 125 us = 15.6 KB: an eighth is one segment,
    # floored at TRAIN_MIN_SEGS (1-segment trains made the senders CPU-bound)
    assert trains.segs_for(1e9, 125_000) == trains.TRAIN_MIN_SEGS == 2
    assert trains.segs_for(1e9, 125_000, mss=500) == 3
    assert trains.segs_for(1e15, 1e9) == 65535                  # the kernel's limit


@pytest.mark.parametrize("args", [(0, 125_000), (1e9, 0), (-1, 1), (1e9, 1e5, 0),
                                  (1e9, 1e5, 1448, -1)])
def test_segs_for_refuses_nonsense(args):
    with pytest.raises(ValueError):
        trains.segs_for(*args)


def test_pacer_segs_makes_the_slot_twice_the_lateness():
    # a train of S bytes at B lasts S / B; the kernel makes up half of it:
    # 20 us at 1 Gbit/s wants 5,000 B on the wire, 4 segments of 1448
    assert trains.pacer_segs(1e9, 20_000) == 4
    assert trains.pacer_segs(1e9, 17_376) == 3          # exactly 3 x 1448 x 8 / 2 ns
    assert trains.pacer_segs(1e9, 17_377) == 4
    assert trains.pacer_segs(1e9, 0) == 0
    # a slower flow's slots are longer: the same lateness wants fewer
    assert trains.pacer_segs(250e6, 20_000) == 1
    with pytest.raises(ValueError):
        trains.pacer_segs(1e9, -1)


def test_segs_for_lengthens_trains_for_a_late_pacer_up_to_half_of_b_x_t():
    # the lab: 1 Gbit/s, T 125 us (B x T 15,625 B): an eighth is 2 segments
    assert trains.segs_for(1e9, 125_000, pacer_late_ns=0) == 2
    # a pacer 10 us late wants 2 segments: nothing changes
    assert trains.segs_for(1e9, 125_000, pacer_late_ns=10_000) == 2
    # 20 us late (this VM's median-to-p75): 4
    assert trains.segs_for(1e9, 125_000, pacer_late_ns=20_000) == 4
    # 60 us would want 11, but a train past half of B x T (5 segments here)
    # moves U by more than half with every train: 5
    assert trains.pacer_segs(1e9, 60_000) == 11
    assert trains.segs_for(1e9, 125_000, pacer_late_ns=60_000) == 5
    # where B x T is large the noise rule's eighth already covers it
    assert trains.segs_for(1e9, 640_000, pacer_late_ns=20_000) == 6


def test_bdp_segs_keeps_a_whole_trains_queue_within_one_bdp():
    # the frames behind a train's first wait: 1 + BDP // (1448 + 66)
    # 1 Gbit/s x 26 us = 3,250 B: two frames wait, 3 segments
    assert trains.bdp_segs(1e9, 26_000) == 3
    # 42 us: 5,250 B, three frames: 4
    assert trains.bdp_segs(1e9, 42_000) == 4
    # a BDP under one frame still sends one segment at a time
    assert trains.bdp_segs(1e9, 10_000) == 1
    # exactly two frames of BDP: 3; a byte less: 2
    assert trains.bdp_segs(8e9, 2 * 1514) == 3
    assert trains.bdp_segs(8e9, 2 * 1514 - 1) == 2
    for args in ((0, 1), (1e9, 0), (1e9, 1, 0)):
        with pytest.raises(ValueError):
            trains.bdp_segs(*args)


def test_segs_for_with_the_base_rtt_takes_the_longest_train_within_one_bdp():
    # the lab (1 Gbit/s, T 125 us, base RTT 26 us): an eighth of B x T is
    # one segment, the queue allows 3: 3 (measured: 0.89-0.95 of the link
    # at queue p99 0-1.3 BDP, against 0.71-0.89 in the 2 of the eighth)
    assert trains.segs_for(1e9, 125_000, base_rtt_ns=26_000) == 3
    # a slower base RTT allows 4; half of B x T (5) still bounds it
    assert trains.segs_for(1e9, 125_000, base_rtt_ns=42_000) == 4
    assert trains.segs_for(1e9, 80_000, base_rtt_ns=42_000) == 3       # half of 10 KB
    # with the pacer's lateness measured, it asks for what it needs (20 us:
    # 4), and the queue bound takes it back to 3
    assert trains.segs_for(1e9, 125_000, pacer_late_ns=20_000) == 4
    assert trains.segs_for(1e9, 125_000, pacer_late_ns=20_000, base_rtt_ns=26_000) == 3
    # ... or keeps what it needs below the bound (10 us: 2)
    assert trains.segs_for(1e9, 125_000, pacer_late_ns=10_000, base_rtt_ns=42_000) == 2
    # the eighth of a large B x T is bounded too (6 -> 3) ...
    assert trains.segs_for(1e9, 640_000, base_rtt_ns=26_000) == 3
    # ... but never below TRAIN_MIN_SEGS
    assert trains.segs_for(1e9, 125_000, base_rtt_ns=5_000) == trains.TRAIN_MIN_SEGS
    # 100 Gbit/s, T 12 us, base RTT 10 us: 83 segments of BDP, half of
    # B x T 51: 51
    assert trains.segs_for(100e9, 12_000, base_rtt_ns=10_000) == 51
    with pytest.raises(ValueError):
        trains.segs_for(1e9, 125_000, base_rtt_ns=-1)


def test_segs_from_pacer_bounds_by_the_least_base_rtt():
    late = types.SimpleNamespace(n=trains.RETRAIN_EXPIRIES, quantile_ns=lambda q: 20_000)
    assert trains.segs_from_pacer(late, [(1e9, 125_000)]) == 4
    assert trains.segs_from_pacer(late, [(1e9, 125_000)], base_rtt_ns=26_000) == 3


def test_train_cap_checks_its_arguments_before_touching_anything():
    with pytest.raises(ValueError):
        trains.TrainCap("eth0", 65536)
    with pytest.raises(ValueError):
        trains.TrainCap("", 2)
    cap = trains.TrainCap(None, 0)             # 0: nothing to do, no interface needed
    cap.apply()
    cap.restore()
    assert not cap.active


class FakeIPRoute:
    """pyroute2's IPRoute as gso_max_segs and set_gso_max_segs use it: one
    interface "eth0"; `fail`: the OSError its calls raise."""

    def __init__(self, segs=64, fail=None):
        self.segs, self.fail, self.closed = segs, fail, False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.closed = True

    def link_lookup(self, ifname):
        if self.fail:
            raise self.fail
        return [7] if ifname == "eth0" else []

    def get_links(self, idx):
        assert idx == 7
        attrs = {"IFLA_GSO_MAX_SEGS": self.segs}
        return [types.SimpleNamespace(get_attr=attrs.get)]

    def link(self, cmd, index, gso_max_segs):
        assert (cmd, index) == ("set", 7)
        self.segs = gso_max_segs


def test_gso_max_segs_read_and_set_with_their_errors(monkeypatch, tmp_path):
    ipr = FakeIPRoute()
    monkeypatch.setattr(trains, "_ipr", lambda: ipr)
    monkeypatch.setattr(trains, "ROUTE_FLUSH", (str(tmp_path / "flush"),))
    assert trains.gso_max_segs("eth0") == 64 and ipr.closed
    trains.set_gso_max_segs("eth0", 8)
    assert ipr.segs == 8 and trains.gso_max_segs("eth0") == 8
    with pytest.raises(trains.TrainCapError, match="^eth9: no such interface$"):
        trains.gso_max_segs("eth9")
    with pytest.raises(trains.TrainCapError, match="^eth9: no such interface$"):
        trains.set_gso_max_segs("eth9", 8)
    ipr.segs = None
    with pytest.raises(trains.TrainCapError,
                       match="^eth0: the kernel reports no gso_max_segs$"):
        trains.gso_max_segs("eth0")
    ipr.fail = PermissionError(1, "Operation not permitted")
    with pytest.raises(trains.TrainCapError, match=r"^eth0: reading gso_max_segs: \[Errno 1\] "
                                                   r"Operation not permitted$"):
        trains.gso_max_segs("eth0")
    with pytest.raises(trains.TrainCapError, match=r"^eth0: setting gso_max_segs 8: \[Errno 1\] "
                                                   r"Operation not permitted$"):
        trains.set_gso_max_segs("eth0", 8)


def test_setting_the_cap_flushes_the_routes_for_the_running_flows(monkeypatch, tmp_path):
    """A socket reads the device's cap when it sets its route up: each
    change flushes the namespace's cached routes (IPv4 and IPv6) so that the
    running flows read it again; no IPv6 is no error, a refused flush is one
    that says the cap was set and the running flows keep theirs."""
    ipr = FakeIPRoute()
    monkeypatch.setattr(trains, "_ipr", lambda: ipr)
    v4, v6 = tmp_path / "ipv4-flush", tmp_path / "no-ipv6" / "flush"
    monkeypatch.setattr(trains, "ROUTE_FLUSH", (str(v4), str(v6)))
    trains.set_gso_max_segs("eth0", 4)
    assert ipr.segs == 4 and v4.read_text() == "1\n" and not v6.exists()
    v4.unlink()
    v4.mkdir()                                       # writing it fails: IsADirectoryError
    with pytest.raises(trains.TrainCapError, match=r"^eth0: gso_max_segs 2 set, but the routes "
                                                   r"were not flushed, so running flows keep "
                                                   r"their cap: "):
        trains.set_gso_max_segs("eth0", 2)
    assert ipr.segs == 2


def test_queue_frames_is_the_quantile_bucket_of_enough_responses():
    hist = [0] * 32
    hist[0], hist[3] = 990, 10                       # 1 % of the responses at 3-4 frames
    assert trains.queue_frames(hist) == 0            # p99: the 990th of 1,000
    hist[0] = 980
    assert trains.queue_frames(hist) == 3
    assert trains.queue_frames(hist, 0.5) == 0
    hist[31] = 100                                   # 31 frames or more
    assert trains.queue_frames(hist) == 31
    few = [0] * 32
    few[0] = trains.QUEUE_MIN_RESPONSES - 1
    assert trains.queue_frames(few) is None


def test_segs_from_pacer_follows_the_queue_between_the_bdp_bound_and_the_pacer():
    """With the flows' queue (largest per response, in frames) and the
    trains in force: one segment longer while its p99 beyond the train in
    service (the trains in force, in frames: a probe finds its own flow's
    last train ahead of it) is within one BDP, one shorter while over,
    never below the computed bound (the whole train waiting) nor above
    what the pacer asks for."""
    late = types.SimpleNamespace(n=trains.RETRAIN_EXPIRIES, quantile_ns=lambda q: 25_000)
    path = [(1e9, 125_000)]
    base = 28_000                      # BDP 3,500 B, 2.3 frames: the bound is 3 segments
    assert trains.bdp_segs(1e9, base) == 3
    # the pacer's p75 of 25 us wants 5 (6,250 B), half of B x T (15.6 KB) allows 5
    assert trains.segs_for(1e9, 125_000, pacer_late_ns=25_000) == 5

    def q(frames: int, n: int = 1000) -> list[int]:
        h = [0] * 32
        h[frames] = n
        return h

    def decide(queue, current):
        return trains.segs_from_pacer(late, path, base_rtt_ns=base, queue=queue,
                                      current=current)
    assert decide(q(0), 3) == 4 and decide(q(0), 4) == 5 and decide(q(0), 5) == 5
    assert decide(q(4), 4) == 5                      # the own train only: nothing beyond
    assert decide(q(5), 4) == 5                      # up to 2 frames beyond: within 3,500 B
    assert decide(q(6), 4) == 4                      # 2-3 frames beyond: neither within nor over
    assert decide(q(8), 5) == 4 and decide(q(7), 4) == 3 and decide(q(6), 3) == 3
    assert decide(q(7), 5) == 5                      # 2-3 beyond the 5 in service: stays
    assert decide(q(31), 5) == 4
    # without enough responses, the queue, the trains in force or the base
    # RTT: the computed bound, as before
    assert decide(q(0, trains.QUEUE_MIN_RESPONSES - 1), 4) == 3
    assert decide(None, 4) == 3 and decide(q(0), 0) == 3
    assert trains.segs_from_pacer(late, path, queue=q(0), current=4) == 5
    # a prompt pacer (5 us: 2 segments, the floor) asks for no more: 2, whatever the queue
    prompt = types.SimpleNamespace(n=trains.RETRAIN_EXPIRIES, quantile_ns=lambda q: 5_000)
    assert trains.segs_from_pacer(prompt, path, base_rtt_ns=base, queue=q(0), current=3) == 2


def test_segs_from_pacer_waits_for_expiries_and_takes_the_slowest_path():
    from hpccd.tcp_side.pacer import BUCKETS, EMPTY, Lateness
    b = [0] * BUCKETS
    b[20] = trains.RETRAIN_EXPIRIES                   # all 20-21 us late: p75 21 us
    late = Lateness(trains.RETRAIN_EXPIRIES, 0, tuple(b))
    few = Lateness(trains.RETRAIN_EXPIRIES - 1, 0, tuple(b))
    # 21 us at 1 Gbit/s wants 5,250 B: 4 segments; T 125 us allows 5
    assert trains.segs_from_pacer(late, [(1e9, 125_000)]) == 4
    # the slowest link and the least T of the flows: at 10 Gbit/s alone it
    # would be 37 segments (52,500 B), with a 1 Gbit/s path among them 4; the least T
    # (60 us: B x T 7,500 B, half 2 segments) caps it
    assert trains.segs_from_pacer(late, [(10e9, 125_000)]) == 37
    assert trains.segs_from_pacer(late, [(10e9, 125_000), (1e9, 125_000)]) == 4
    assert trains.segs_from_pacer(late, [(1e9, 125_000), (1e9, 60_000)]) == 2
    # no decision before RETRAIN_EXPIRIES, nor without a known path
    assert trains.segs_from_pacer(few, [(1e9, 125_000)]) is None
    assert trains.segs_from_pacer(EMPTY, [(1e9, 125_000)]) is None
    assert trains.segs_from_pacer(late, []) is None
    assert trains.segs_from_pacer(late, [(0, 125_000), (1e9, 0)]) is None


def test_retarget_moves_the_cap_within_the_value_found(monkeypatch):
    ipr = FakeIPRoute(segs=8)
    monkeypatch.setattr(trains, "_ipr", lambda: ipr)
    cap = trains.TrainCap("eth0", 2)
    cap.apply()
    assert ipr.segs == 2 and cap.found == 8
    assert cap.retarget(4) == 4 and ipr.segs == 4          # raised for later flows
    assert cap.retarget(3) == 3 and ipr.segs == 3          # and lowered
    assert cap.retarget(20) == 8 and ipr.segs == 8         # never above what was found
    ipr.segs = 6                                           # someone else set it: left alone
    assert cap.retarget(2) == 8 and ipr.segs == 6
    cap.restore()
    assert ipr.segs == 6 and not cap.active                # theirs, kept
    # not capped yet (gso_max_segs 0): the first decision caps
    ipr.segs = 8
    cap = trains.TrainCap("eth0", 0)
    cap.apply()
    assert not cap.active and ipr.segs == 8
    assert cap.retarget(4) == 4 and cap.active and cap.found == 8
    cap.restore()
    assert ipr.segs == 8
    with pytest.raises(ValueError):
        cap.retarget(0)


def test_paced_share_is_what_the_kernel_does_not_make_up_of_a_late_timer():
    from hpccd.tcp_side.pacer import BUCKET_NS, BUCKETS, EMPTY, Lateness
    assert BUCKET_NS == 1000

    def late_at(us: int, n: int = 1000) -> Lateness:
        b = [0] * BUCKETS
        b[us] = n
        return Lateness(n, int(n * (us + 0.5) * 1000), tuple(b))

    # 3,000 B at 1 Gbit/s: a 24 us slot; a timer 10.5 us late is within half
    # of it, made up whole
    assert trains.paced_share(1e9, 3000, late_at(10)) == pytest.approx(1.0)
    # 30.5 us late: 18.5 us beyond the half slot, 24 / 42.5 of the rate
    assert trains.paced_share(1e9, 3000, late_at(30)) == pytest.approx(24 / 42.5)
    # twice the rate halves the slot and loses more of it: the share drops
    # (12 / (12 + 24.5)), the rate delivered (2 x 0.329 = 0.658 Gbit/s)
    # rises above 0.565 but stays below the link's
    assert trains.paced_share(2e9, 3000, late_at(30)) == pytest.approx(12 / 36.5)
    # a mix: half on time, half 30.5 us late
    b = [0] * BUCKETS
    b[0], b[30] = 500, 500
    mix = Lateness(1000, 500 * 500 + 500 * 30500, tuple(b))
    assert trains.paced_share(1e9, 3000, mix) == pytest.approx(24 / (24 + 18.5 / 2))
    # the open last bucket counts at what the sum leaves for it: 200 us
    b = [0] * BUCKETS
    b[-1] = 10
    tail = Lateness(10, 10 * 200_000, tuple(b))
    assert trains.paced_share(1e9, 3000, tail) == pytest.approx(24 / (24 + 188))
    assert math.isnan(trains.paced_share(1e9, 3000, EMPTY))
    with pytest.raises(ValueError):
        trains.paced_share(0, 3000, tail)
