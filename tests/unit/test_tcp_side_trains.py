"""hpccd.tcp_side.trains.segs_for: the train cap of tcp-hpcc's senders from
the bottleneck's B x T (docs/tcp-side.md, "Trains").  The cap itself acts
on real interfaces: tests/integration/test_tcp_cc_lab.py."""
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


@pytest.mark.parametrize("args", [(0, 125_000), (1e9, 0), (-1, 1), (1e9, 1e5, 0)])
def test_segs_for_refuses_nonsense(args):
    with pytest.raises(ValueError):
        trains.segs_for(*args)


def test_train_cap_checks_its_arguments_before_touching_anything():
    with pytest.raises(ValueError):
        trains.TrainCap("eth0", 65536)
    with pytest.raises(ValueError):
        trains.TrainCap("", 2)
    cap = trains.TrainCap(None, 0)             # 0: nothing to do, no interface needed
    cap.apply()
    cap.restore()
    assert not cap.active
