"""DCTCP ([DCTCP]) through hpccd.core.cc: every expected value below is worked out
by hand from [DCTCP]'s equations, with the arithmetic next to it.

[DCTCP] = the DCTCP Internet-Draft that became RFC 8257 (docs/references.md):
  section 3.2  receiver DCTCP.CE state machine (Figure 1),
  section 3.3  sender estimator, steps 1-9, "once per window of data",
  section 3.4  loss handling ("same way as conventional TCP", RTO -> 1 SMSS),
  section 4    scaled integer alpha, SCF = 65536, SHF = 4 (g = 1/16), clamp.

Defaults of the binding (include/hpccd/cc.h): mss = mtu_bytes = 1000,
cwnd = 10 * mss = 10000, ssthresh unlimited, alpha = SCF, WindowEnd =
SND.UNA = 0, g = 1/16.  Sequence numbers are relative (start at 0).
"""
from __future__ import annotations

import random

import pytest

from hpccd.core.cc import CCError, Dctcp, DctcpReceiver, ParamError

SCF = 65536           # [DCTCP] section 4: scaling factor
MSS = 1000


def windows_unmarked(d: Dctcp, first: int, count: int) -> list[int]:
    """Close `count` observation windows, each with one unmarked ACK.

    ACK k acknowledges up to k*1000 and reports SND.NXT = k*1000, so the
    next ACK is always beyond WindowEnd (step 4) and ends a window."""
    out = []
    for k in range(first, first + count):
        d.on_ack(k * 1000, k * 1000, ece=False)
        out.append(d.alpha_scaled)
    return out


def windows_marked(d: Dctcp, first: int, count: int) -> list[int]:
    out = []
    for k in range(first, first + count):
        d.on_ack(k * 1000, k * 1000, ece=True)
        out.append(d.alpha_scaled)
    return out


# ---------------------------------------------------------------- alpha (section 4)

def test_alpha_starts_at_one_scaled_as_scf():
    d = Dctcp()
    # [DCTCP] section 3.3: DCTCP.Alpha initialised to 1; section 4: scaled by SCF = 65536
    assert d.alpha_scaled == 65536
    assert d.alpha == 1.0
    # [DCTCP] section 3.3: WindowEnd initialised to SND.UNA (= 0)
    assert d.window_end == 0


def test_alpha_fully_marked_window_from_one_stays_exactly_scf():
    d = Dctcp()
    d.on_ack(1000, 10000, ece=True)
    # [DCTCP] section 4: ScaledM = 65536 * 1000 / 1000 = 65536
    #   (65536 >> 4) = 4096 != 0, so no reset to 0
    #   Alpha += (65536 >> 4) - (65536 >> 4) = 4096 - 4096 = 0  -> 65536
    assert d.alpha_scaled == 65536


def test_alpha_unmarked_window_decreases_by_alpha_shifted_by_shf():
    d = Dctcp()
    d.on_ack(1000, 10000, ece=False)
    # [DCTCP] section 4: ScaledM = 65536 * 0 / 1000 = 0
    #   Alpha += (0 >> 4) - (65536 >> 4) = 0 - 4096  -> 61440
    assert d.alpha_scaled == 61440
    d.on_ack(11000, 20000, ece=False)
    # Alpha += 0 - (61440 >> 4) = -3840  -> 57600
    assert d.alpha_scaled == 57600


def test_alpha_half_marked_window_moves_one_sixteenth_towards_one_half():
    d = Dctcp()
    # Window 1 ends at the first ACK (1000 > WindowEnd = 0); fully marked so
    # alpha stays 65536 (see above).  WindowEnd = SND.NXT = 4000.
    d.on_ack(1000, 4000, ece=True)
    assert d.alpha_scaled == 65536
    assert d.window_end == 4000
    # Window 2: four ACKs of 1000 bytes, the first two marked.
    d.on_ack(2000, 4000, ece=True)
    d.on_ack(3000, 4000, ece=True)
    d.on_ack(4000, 4000, ece=False)       # 4000 <= WindowEnd: step 4 stops
    assert d.alpha_scaled == 65536
    d.on_ack(5000, 8000, ece=False)       # 5000 > 4000: window ends
    # [DCTCP] section 3.3 steps 1-3: BytesAcked = 4 * 1000 = 4000, BytesMarked = 2000
    # [DCTCP] section 4: ScaledM = 65536 * 2000 / 4000 = 32768
    #   Alpha += (32768 >> 4) - (65536 >> 4) = 2048 - 4096 = -2048 -> 63488
    assert d.alpha_scaled == 63488
    assert d.alpha == 63488 / 65536


def test_alpha_uses_the_configured_gain_shift():
    d = Dctcp(g=1 / 8)            # SHF = 3
    d.on_ack(1000, 10000, ece=False)
    # [DCTCP] section 4 with SHF = 3: Alpha += 0 - (65536 >> 3) = -8192  -> 57344
    assert d.alpha_scaled == 57344


def test_alpha_reaches_exactly_zero_after_140_unmarked_windows_and_stays_zero():
    d = Dctcp()
    seq = windows_unmarked(d, 1, 150)
    # [DCTCP] section 4 with no marks: a' = a - (a >> 4), and a' = 0 once (a >> 4) == 0.
    # First steps:  65536 - 4096 = 61440;  61440 - 3840 = 57600;
    #               57600 - 3600 = 54000;  54000 - 3375 = 50625;
    #               50625 - 3164 = 47461.
    assert seq[:5] == [61440, 57600, 54000, 50625, 47461]
    # Iterating a -= a >> 4 (arithmetic on [DCTCP] recurrence, not on the
    # code) takes alpha to 45 after 116 windows; from there
    #   45 -2 -> 43 -2 -> 41 ... -> 33 -2 -> 31  (a >> 4 == 2 while a >= 32)
    #   31 -1 -> 30 ... 16 -1 -> 15               (a >> 4 == 1 while a >= 16)
    #   15: (15 >> 4) == 0 -> Alpha = 0, then += 0 - 0       -> 0
    # i.e. windows 116..140:
    assert seq[115:140] == [45, 43, 41, 39, 37, 35, 33, 31, 30, 29, 28, 27, 26, 25,
                            24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 0]
    # Once 0: (0 >> 4) == 0 -> 0; += (0 >> 4) - 0 = 0.  Stays exactly 0.
    assert seq[140:] == [0] * 10
    assert d.alpha == 0.0


def test_alpha_clamped_never_exceeds_scf_and_returns_exactly_to_scf():
    d = Dctcp()
    # From alpha = SCF, fully marked windows: 65536 + 4096 - 4096 = 65536, each time.
    assert windows_marked(d, 1, 20) == [65536] * 20
    windows_unmarked(d, 21, 140)                    # 140 windows -> 0 (see above)
    assert d.alpha_scaled == 0
    up = windows_marked(d, 161, 200)
    # from 0: (0 >> 4) == 0 -> 0; += 4096 - 0                 -> 4096
    #         4096 + 4096 - (4096 >> 4 = 256)                  -> 7936
    assert up[:2] == [4096, 7936]
    # With d = SCF - a: a + 4096 - ((SCF - d) >> 4) = a + ceil(d / 16), so
    # d' = d - ceil(d/16): d shrinks by >= 1 and never goes negative (no
    # overshoot; the clamp holds).  d < 16 after at most 129 windows
    # (65536 (15/16)^k < 16 <=> k > ln 4096 / ln(16/15) = 128.9), then at most
    # 15 windows of -1: exactly SCF after at most 144 windows.
    assert all(a <= SCF for a in up)
    assert all(x <= y for x, y in zip(up, up[1:]))
    assert up[144:] == [SCF] * (200 - 144)
    assert d.alpha == 1.0


# --------------------------------------------------- observation window (section 3.3)

def test_acks_at_or_below_window_end_do_not_update_alpha_first_beyond_does():
    d = Dctcp()
    d.on_ack(1000, 10000, ece=False)
    # first ACK: 1000 > WindowEnd 0: alpha 65536 - 4096 = 61440; step 7: WindowEnd = 10000
    assert (d.alpha_scaled, d.window_end) == (61440, 10000)
    d.on_ack(5000, 12000, ece=True)       # 5000 < 10000: step 4 stops
    assert (d.alpha_scaled, d.window_end) == (61440, 10000)
    d.on_ack(10000, 14000, ece=True)      # 10000 == 10000: "less than or equal" stops
    assert (d.alpha_scaled, d.window_end) == (61440, 10000)
    d.on_ack(11000, 16000, ece=False)     # 11000 > 10000: window ends
    # steps 1-3 over the window: BytesAcked = 4000 + 5000 + 1000 = 10000,
    #   BytesMarked = 4000 + 5000 = 9000
    # [DCTCP] section 4: ScaledM = 65536 * 9000 / 10000 = 58982 (58982.4 truncated)
    #   Alpha += (58982 >> 4 = 3686) - (61440 >> 4 = 3840) = -154 -> 61286
    assert d.alpha_scaled == 61286
    # step 7: WindowEnd = SND.NXT reported with the ACK that ended the window
    assert d.window_end == 16000
    d.on_ack(12000, 18000, ece=False)     # inside the new window: unchanged
    assert (d.alpha_scaled, d.window_end) == (61286, 16000)


def test_byte_counters_reset_at_window_end():
    d = Dctcp()
    d.on_ack(1000, 2000, ece=True)        # window 1: 1000/1000 marked -> 65536, WindowEnd 2000
    d.on_ack(3000, 4000, ece=False)       # window 2: 2000 bytes, 0 marked
    # step 8 reset: window 2 must not see window 1's marked bytes.
    # ScaledM = 0; Alpha = 65536 - 4096 = 61440 (with stale counters it would be
    # 65536*1000/3000 = 21845 -> 65536 + 1365 - 4096 = 62805)
    assert d.alpha_scaled == 61440


# --------------------------------------------------------- window reduction (3.3 step 9)

def test_ece_window_cuts_cwnd_by_alpha_over_two_in_integers():
    d = Dctcp(ssthresh_bytes=1)           # congestion avoidance from the start
    d.on_ack(1000, 2000, ece=False)
    # CA byte counting: 1000 < cwnd 10000, no growth; alpha 61440; no ECE -> no cut
    assert (d.cwnd, d.alpha_scaled) == (10000, 61440)
    d.on_ack(3000, 4000, ece=True)
    # [DCTCP] section 4: ScaledM = 65536 * 2000 / 2000 = 65536
    #   Alpha = 61440 + 4096 - 3840 = 61696
    # step 9: cwnd * (1 - alpha/2); cut = (cwnd * alpha) >> 17
    #   = 10000 * 61696 >> 17 = 616960000 / 131072 = 4707.03 -> 4707
    #   cwnd = 10000 - 4707 = 5293   (float: 10000 * (1 - 0.94140625/2) = 5292.97)
    assert d.alpha_scaled == 61696
    assert d.cwnd == 5293
    assert d.ssthresh == 5293
    assert d.counters()["n_ece_reductions"] == 1


def test_cwnd_halves_when_alpha_is_one():
    d = Dctcp()
    d.on_ack(1000, 10000, ece=True)
    # alpha 65536; cut = 10000 * 65536 >> 17 = 5000; cwnd = 5000 (no growth on ECE ACK)
    assert d.cwnd == 5000


def test_cwnd_cut_at_most_once_per_window_of_data():
    d = Dctcp(ssthresh_bytes=1)
    d.on_ack(1000, 2000, ece=False)       # alpha 61440, WindowEnd 2000
    d.on_ack(3000, 4000, ece=True)        # cut to 5293 (above); reduce_end = WindowEnd = 4000
    assert d.cwnd == 5293
    # A loss signal in the same window of data (SND.UNA 3500 < 4000) must
    # not reduce again ([DCTCP] section 3.4: "only reduce the cwnd once per window of
    # data across all loss signals").
    d.on_ack(3500, 30000, ece=True, loss="fast")
    assert d.cwnd == 5293
    assert d.counters()["n_fast_losses"] == 0
    # Next window (4500 > WindowEnd 4000): a new window of data, one cut allowed.
    d.on_ack(4500, 30000, ece=True)
    # BytesAcked = 500 + 1000 = 1500, all marked: ScaledM = 65536
    #   Alpha = 61696 + 4096 - (61696 >> 4 = 3856) = 61936
    # cut = 5293 * 61936 >> 17 = 327827248 / 131072 = 2501.1 -> 2501; cwnd = 2792
    assert d.alpha_scaled == 61936
    assert d.cwnd == 2792
    assert d.counters()["n_ece_reductions"] == 2


def test_marked_window_inside_a_loss_reduced_window_does_not_cut_again():
    d = Dctcp(ssthresh_bytes=1)
    d.on_ack(1000, 2000, ece=False)       # alpha 61440, WindowEnd 2000, cwnd 10000
    d.on_ack(1500, 20000, ece=False, loss="fast")
    # [DCTCP] section 3.4 / RFC 5681 eq (4): FlightSize = 20000 - 1500 = 18500;
    #   ssthresh = max(18500/2, 2*1000) = 9250; cwnd = 9250; window of data ends at 20000
    assert (d.cwnd, d.ssthresh) == (9250, 9250)
    d.on_ack(3000, 20000, ece=True)       # 3000 > WindowEnd 2000: window ends, marked
    # alpha is updated (estimator is independent of the reduction):
    #   BytesAcked = 500 + 1500 = 2000, BytesMarked = 1500
    #   ScaledM = 65536 * 1500 / 2000 = 49152
    #   Alpha = 61440 + (49152 >> 4 = 3072) - (61440 >> 4 = 3840) = 60672
    assert d.alpha_scaled == 60672
    # ... but SND.UNA 3000 is still inside the loss-reduced window (< 20000): no cut
    assert d.cwnd == 9250
    assert d.counters()["n_ece_reductions"] == 0
    d.on_ack(21000, 40000, ece=True)      # past 20000: new window of data, marked
    # BytesAcked = 18000, all marked: Alpha = 60672 + 4096 - (60672 >> 4 = 3792) = 60976
    # cut = 9250 * 60976 >> 17 = 564028000 / 131072 = 4303.2 -> 4303; cwnd = 4947
    assert d.alpha_scaled == 60976
    assert d.cwnd == 4947


def test_window_without_ece_does_not_cut_cwnd_even_with_alpha_above_zero():
    d = Dctcp(ssthresh_bytes=1)
    d.on_ack(1000, 2000, ece=False)
    d.on_ack(3000, 4000, ece=False)
    # alpha = 65536 - 4096 = 61440, then 61440 - 3840 = 57600 (> 0), but no
    # byte of either window was marked: cwnd is not reduced ([DCTCP] section 3.3: DCTCP
    # reacts to congestion indications).  CA byte counting: ca_acc = 1000 +
    # 2000 = 3000 < cwnd 10000, no growth either.
    assert d.alpha_scaled == 57600
    assert d.cwnd == 10000
    assert d.counters()["n_ece_reductions"] == 0


def test_cwnd_reduction_floors_at_two_segments():
    d = Dctcp(init_cwnd_bytes=3000, ssthresh_bytes=1)
    d.on_ack(1000, 2000, ece=True)
    # alpha 65536: cut = 3000 * 65536 >> 17 = 1500 -> 1500 < 2*mss, so cwnd = 2000
    assert d.cwnd == 2000


# ---------------------------------------------------------------- loss (section 3.4)

def test_fast_loss_halves_flight_once_per_window():
    d = Dctcp()
    d.on_ack(1000, 9000, ece=False, loss="fast")
    # slow start first: cwnd 10000 + min(1000, 1000) = 11000; alpha 61440, no ECE no cut
    # loss: FlightSize = 9000 - 1000 = 8000; ssthresh = max(4000, 2000) = 4000; cwnd = 4000
    assert (d.cwnd, d.ssthresh) == (4000, 4000)
    assert d.counters()["n_fast_losses"] == 1
    d.on_ack(2000, 12000, ece=False, loss="fast")
    # SND.UNA 2000 < 9000 (SND.NXT at the reduction): same window of data,
    # neither reduced again nor grown.
    assert (d.cwnd, d.ssthresh) == (4000, 4000)
    assert d.counters()["n_fast_losses"] == 1
    d.on_ack(10000, 16000, ece=False, loss="fast")
    # new window of data (10000 >= 9000): FlightSize = 16000 - 10000 = 6000;
    #   ssthresh = max(3000, 2000) = 3000; cwnd = 3000
    assert (d.cwnd, d.ssthresh) == (3000, 3000)
    assert d.counters()["n_fast_losses"] == 2


def test_fast_loss_ssthresh_floors_at_two_segments():
    d = Dctcp()
    d.on_ack(1000, 2000, ece=False, loss="fast")
    # FlightSize = 2000 - 1000 = 1000; ssthresh = max(500, 2 * 1000) = 2000
    assert (d.cwnd, d.ssthresh) == (2000, 2000)


def test_ece_then_loss_in_same_window_reduces_once():
    d = Dctcp()
    d.on_ack(1000, 10000, ece=True)       # cut: 10000 -> 5000, reduce until 10000
    assert d.cwnd == 5000
    d.on_ack(2000, 12000, ece=False, loss="fast")   # 2000 < 10000: no second reduction
    assert d.cwnd == 5000
    assert d.counters() == {"n_ece_reductions": 1, "n_fast_losses": 0, "n_rtos": 0}


def test_rto_sets_cwnd_to_one_segment_regardless_of_earlier_reduction():
    d = Dctcp()
    d.on_ack(1000, 9000, ece=False, loss="fast")    # cwnd 4000 (above)
    d.on_ack(2000, 12000, ece=False, loss="rto")
    # [DCTCP] section 3.4: on timeout cwnd = loss window = 1 SMSS "regardless of previous
    # cwnd reductions in a given window of data" -> 1000
    # RFC 5681 eq (4): ssthresh = max((12000 - 2000)/2, 2000) = 5000
    assert (d.cwnd, d.ssthresh) == (1000, 5000)
    assert d.counters()["n_rtos"] == 1


def test_rto_after_ece_cut_still_sets_one_segment():
    d = Dctcp()
    d.on_ack(1000, 10000, ece=True)       # cwnd 5000, reduce until 10000
    d.on_ack(1000, 10000, ece=False, loss="rto")
    assert d.cwnd == 1000


def test_after_rto_sender_slow_starts_from_one_segment():
    d = Dctcp()
    d.on_ack(0, 10000, ece=False, loss="rto")
    # FlightSize 10000: ssthresh = 5000, cwnd = 1000
    assert (d.cwnd, d.ssthresh) == (1000, 5000)
    d.on_ack(1000, 10000, ece=False)
    # [DCTCP] section 3.4 "same way as conventional TCP"; RFC 5681 3.1: cwnd (1000) <
    # ssthresh (5000) -> slow start, cwnd += min(1000, SMSS) = 2000
    assert d.cwnd == 2000


def test_alpha_reset_on_loss_option_sets_alpha_to_one():
    d = Dctcp(alpha_reset_on_loss=1)
    d.on_ack(1000, 9000, ece=False, loss="fast")
    # window ended first (alpha 61440), then the loss resets it ([DCTCP] section 4, "MAY")
    assert d.alpha_scaled == 65536
    d2 = Dctcp()
    d2.on_ack(1000, 9000, ece=False, loss="fast")
    assert d2.alpha_scaled == 61440       # default: no reset


# ------------------------------------------------------------------ growth (RFC 5681)

def test_slow_start_adds_at_most_one_segment_per_ack():
    d = Dctcp()                                      # ssthresh unlimited
    d.on_ack(1000, 100000, ece=False)
    assert d.cwnd == 11000                           # 10000 + min(1000, 1000)
    d.on_ack(3500, 100000, ece=False)
    assert d.cwnd == 12000                           # 11000 + min(2500, 1000)
    d.on_ack(3800, 100000, ece=False)
    assert d.cwnd == 12300                           # 12000 + min(300, 1000)


def test_congestion_avoidance_adds_one_segment_per_cwnd_acknowledged():
    d = Dctcp(ssthresh_bytes=5000)                   # cwnd 10000 >= ssthresh: CA
    for k in range(1, 10):
        d.on_ack(k * 1000, 1_000_000, ece=False)
    # 9 * 1000 = 9000 bytes counted < cwnd 10000: unchanged
    assert d.cwnd == 10000
    d.on_ack(10000, 1_000_000, ece=False)
    # 10000 >= 10000: cwnd += 1 SMSS -> 11000, counter 10000 - 10000 = 0
    assert d.cwnd == 11000
    for k in range(11, 21):
        d.on_ack(k * 1000, 1_000_000, ece=False)
    # 10 * 1000 = 10000 < 11000: unchanged
    assert d.cwnd == 11000
    d.on_ack(21000, 1_000_000, ece=False)
    assert d.cwnd == 12000                           # 11000 bytes counted


def test_slow_start_stops_at_ssthresh():
    d = Dctcp(ssthresh_bytes=11500)
    d.on_ack(1000, 100000, ece=False)               # 10000 < 11500: SS -> 11000
    d.on_ack(2000, 100000, ece=False)               # 11000 < 11500: SS -> 12000
    d.on_ack(3000, 100000, ece=False)               # 12000 >= 11500: CA, 1000 < 12000
    assert d.cwnd == 12000


# ------------------------------------------------------------------------ parameters

@pytest.mark.parametrize("g", [0.1, 0.3, 0.0, 1.0, -0.5, 2 ** -16])
def test_gain_must_be_a_power_of_two_in_scaled_range(g):
    with pytest.raises(ParamError) as ei:
        Dctcp(g=g)
    assert ei.value.key == "g"


@pytest.mark.parametrize("g,shf", [(0.5, 1), (1 / 16, 4), (2 ** -15, 15)])
def test_gain_power_of_two_accepted(g, shf):
    d = Dctcp(g=g)
    d.on_ack(1000, 2000, ece=False)
    # Alpha = 65536 - (65536 >> SHF)
    assert d.alpha_scaled == 65536 - (65536 >> shf)


def test_unknown_or_bad_dctcp_parameter_raises_param_error_naming_it():
    with pytest.raises(ParamError) as ei:
        Dctcp(gain=0.5)
    assert ei.value.key == "gain"
    with pytest.raises(ParamError) as ei:
        Dctcp(mtu_bytes=0)
    assert ei.value.key == "mtu_bytes"
    with pytest.raises(ParamError) as ei:
        Dctcp(init_cwnd_bytes=500)                   # below one mtu_bytes
    assert ei.value.key == "init_cwnd_bytes"


# ---------------------------------------------------------- receiver (section 3.2)

def test_receiver_m2_acks_every_second_packet_with_ece_equal_state():
    r = DctcpReceiver(m=2)
    assert r.ce is False                             # DCTCP.CE initialised false
    assert r.on_packet(False, 1000) == []
    assert r.on_packet(False, 2000) == [(2000, False)]   # 1 ACK per m = 2 packets
    assert r.on_packet(False, 3000) == []
    assert r.on_packet(False, 4000) == [(4000, False)]


def test_receiver_ce_change_acks_pending_with_old_ece_then_new_with_new_ece():
    r = DctcpReceiver(m=2)
    assert r.on_packet(False, 1000) == []            # 1 pending in state CE=0
    # rule 1: CE set while DCTCP.CE false -> CE = true, immediate ACK.
    # Two ACKs (3.2 last paragraph): first the pending packet with the OLD ECE=0,
    # then the new packet with the NEW ECE=1.
    assert r.on_packet(True, 2000) == [(1000, False), (2000, True)]
    assert r.ce is True
    assert r.on_packet(True, 3000) == []
    assert r.on_packet(True, 4000) == [(4000, True)]     # m = 2 with ECE = 1
    assert r.on_packet(True, 5000) == []
    # rule 2: CE clear while DCTCP.CE true -> CE = false, immediate ACK(s)
    assert r.on_packet(False, 6000) == [(5000, True), (6000, False)]
    assert r.ce is False


def test_receiver_ce_change_with_nothing_pending_sends_one_immediate_ack():
    r = DctcpReceiver(m=2)
    assert r.on_packet(True, 1000) == [(1000, True)]
    assert r.on_packet(False, 2000) == [(2000, False)]
    assert r.on_packet(True, 3000) == [(3000, True)]


def test_receiver_flush_on_delayed_ack_timer_acks_pending_once():
    r = DctcpReceiver(m=2)
    assert r.flush() == []                            # nothing pending
    r.on_packet(True, 1000)                           # immediate (change), nothing pending
    assert r.on_packet(True, 2000) == []
    assert r.flush() == [(2000, True)]                # timer: ACK with ECE = DCTCP.CE
    assert r.flush() == []
    # the count restarts after a flush: next ACK after 2 more packets
    assert r.on_packet(True, 3000) == []
    assert r.on_packet(True, 4000) == [(4000, True)]


def test_receiver_m1_acks_every_packet_and_m3_every_third():
    r1 = DctcpReceiver(m=1)
    assert r1.on_packet(False, 1000) == [(1000, False)]
    assert r1.on_packet(True, 2000) == [(2000, True)]
    assert r1.on_packet(True, 3000) == [(3000, True)]
    r3 = DctcpReceiver(m=3)
    assert r3.on_packet(False, 1000) == []
    assert r3.on_packet(False, 2000) == []
    assert r3.on_packet(False, 3000) == [(3000, False)]
    assert r3.on_packet(False, 4000) == []
    assert r3.on_packet(False, 5000) == []
    assert r3.on_packet(True, 6000) == [(5000, False), (6000, True)]


def test_receiver_m0_refused():
    with pytest.raises(CCError):
        DctcpReceiver(m=0)


def test_receiver_two_ack_split_keeps_sender_marked_fraction_exact():
    d = Dctcp()
    d.on_ack(1000, 5000, ece=False)                   # alpha 61440, WindowEnd 5000
    r = DctcpReceiver(m=2)
    acks = []
    # packets ending at 2000..6000, CE on the 2nd and 3rd: 2 of 5 marked
    for seq, ce in [(2000, False), (3000, True), (4000, True), (5000, False), (6000, False)]:
        acks += r.on_packet(ce, seq)
    acks += r.flush()
    assert acks == [(2000, False), (3000, True), (4000, True), (5000, False), (6000, False)]
    for ack, ece in acks:
        d.on_ack(ack, 6000, ece)
    # window ends at ACK 6000 (> 5000): BytesAcked = 5000, BytesMarked = 2000
    #   ScaledM = 65536 * 2000 / 5000 = 26214 (26214.4 truncated)
    #   Alpha = 61440 + (26214 >> 4 = 1638) - (61440 >> 4 = 3840) = 59238
    assert d.alpha_scaled == 59238


# --------------------------------------------------------------------------- batches

def _dctcp_trace():
    evs = [
        {"ack": 1000, "snd_nxt": 10000, "ece": False},
        {"ack": 4000, "snd_nxt": 12000, "ece": True},
        {"ack": 10000, "snd_nxt": 14000, "ece": True},
        {"ack": 11000, "snd_nxt": 16000, "ece": False},
        {"ack": 12000, "snd_nxt": 40000, "ece": False, "loss": "fast"},
        {"ack": 13000, "snd_nxt": 40000, "ece": True, "loss": "fast"},
        {"ack": 17000, "snd_nxt": 40000, "ece": True},
        {"ack": 20000, "snd_nxt": 40000, "ece": False, "loss": "rto"},
        {"ack": 41000, "snd_nxt": 60000, "ece": False},
    ]
    rng = random.Random(8257)
    ack, nxt = 41000, 60000
    for _ in range(400):
        ack += rng.choice([0, 500, 1000, 1000, 2000])
        nxt = max(nxt, ack) + rng.choice([0, 1000, 3000])
        evs.append({"ack": ack, "snd_nxt": nxt, "ece": rng.random() < 0.3,
                    "loss": rng.choice([None] * 30 + ["fast", "rto"])})
    return evs


def test_batch_run_equals_one_by_one_on_ack():
    evs = _dctcp_trace()
    batch = Dctcp(g=1 / 16)
    out = batch.run(Dctcp.events(evs))
    single = Dctcp(g=1 / 16)
    assert len(out) == len(evs)
    for i, e in enumerate(evs):
        single.on_ack(e["ack"], e["snd_nxt"], e["ece"], e.get("loss"))
        assert out[i] == {"cwnd_bytes": single.cwnd, "alpha": single.alpha}, i
    assert batch.counters() == single.counters()
    assert (batch.ssthresh, batch.window_end, batch.alpha_scaled) == \
        (single.ssthresh, single.window_end, single.alpha_scaled)


def test_batch_run_gives_hand_values():
    evs = _dctcp_trace()[:4]
    out = Dctcp().run(Dctcp.events(evs))
    # 1: SS 10000 + 1000 = 11000; alpha 61440; WindowEnd 10000
    # 2: ECE ACK inside the window: no growth, no update
    # 3: ack 10000 == WindowEnd: no update
    # 4: unmarked ACK of 1000 bytes first grows in slow start: 11000 + 1000 = 12000;
    #    then ack 11000 ends the window: BytesAcked 10000, marked 3000 + 6000 = 9000
    #    -> alpha 61286 (as computed above); cut = 12000 * 61286 >> 17
    #    = 735432000 / 131072 = 5610.9 -> 5610; cwnd = 12000 - 5610 = 6390
    assert [o["cwnd_bytes"] for o in out] == [11000, 11000, 11000, 6390]
    assert [o["alpha"] for o in out] == [61440 / SCF, 61440 / SCF, 61440 / SCF, 61286 / SCF]


def test_ece_cut_never_raises_cwnd_after_a_timeout():
    # [DCTCP] section 3.3: cwnd = cwnd (1 - alpha/2) never increases cwnd; the
    # 2-SMSS floor of a cut must not lift the 1-SMSS loss window of an RTO.
    d = Dctcp()
    d.on_ack(0, 10000, ece=False, loss="rto")     # cwnd 1000, reduce_end 10000
    assert d.cwnd == 1000
    d.on_ack(1000, 10000, ece=True)   # ack 1000 > WindowEnd 0: window ends, marked,
    assert d.cwnd == 1000             # but snd_una 1000 < reduce_end 10000: no cut
    d.on_ack(11000, 20000, ece=True)  # ack 11000 > WindowEnd 10000: window ends,
    # marked, snd_una >= reduce_end: cut = (1000 x alpha) >> 17 <= 500, floored at
    # min(cwnd, 2 SMSS) = 1000: cwnd stays 1000 (the old floor gave 2000)
    assert d.cwnd == 1000
