"""hpccd.tcp_side.trains.segs_for: the train cap of tcp-hpcc's senders from
the bottleneck's B x T (docs/tcp-side.md, "Trains").  The cap itself acts
on real interfaces: tests/integration/test_tcp_cc_lab.py."""
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


def test_gso_max_segs_read_and_set_with_their_errors(monkeypatch):
    ipr = FakeIPRoute()
    monkeypatch.setattr(trains, "_ipr", lambda: ipr)
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
