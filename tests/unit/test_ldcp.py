"""LDCP ([LDCP]) through hpccd.core.cc: every expected value below is worked out
by hand from [LDCP]'s equations, with the arithmetic next to it.

[LDCP] = the LDCP Internet-Draft, PFC-Free Low Delay Control Protocol (docs/references.md):
  section 2.2  per-ACK window adjustment, Eq (1) (per-packet ACK) and Eq (2)
               (delayed ACK acknowledging n packets) for cw >= 1; below one
               packet: ECE=0 cw += gamma, ECE=1 cw = max(gamma, eta*cw), eta =
               1/2, gamma also the minimum window; timer RTT/cw,
  section 2.3  zero-RTT fast start with IW = BDP, first-RTT packets
               ECN-incapable,
  section 3.1  the last first-RTT packet (IW-th, or the message's last) is
               ECN-capable; transitions: loss -> cw = packets acknowledged
               before the loss; full IW acknowledged -> cw = IW (= BDP).

Binding defaults (include/hpccd/cc.h): alpha = 1, beta = 1/2, gamma = 1/8,
eta = 1/2, 100 Gbit/s, rtt 13000 ns, mtu 1000 B.  Values that are dyadic
fractions are compared exactly; others with pytest.approx.
"""
from __future__ import annotations

import random

import pytest

from hpccd.core.cc import Ldcp, ParamError


def stable(iw: int = 4, **params) -> Ldcp:
    """A flow past fast start with cw = IW: a full IW acknowledged (3.1 cond. 2)."""
    f = Ldcp(iw_pkts=iw, **params)
    f.on_ack(iw)
    assert f.stage == "stable" and f.cw == iw
    return f


# ------------------------------------------------------------ Eq (1), Eq (2), cw >= 1

def test_eq1_unmarked_ack_adds_alpha_over_cw():
    f = stable(4)
    f.on_ack(1, ece=False)
    assert f.cw == 4.25                      # Eq (1): 4 + 1/4
    f.on_ack(1, ece=False)
    assert f.cw == pytest.approx(4.25 + 1 / 4.25)   # 4.25 + 0.235294... = 4.485294...


def test_eq1_marked_ack_subtracts_beta():
    f = stable(4)
    f.on_ack(1, ece=True)
    assert f.cw == 3.5                       # Eq (1): 4 - 1/2
    f.on_ack(1, ece=True)
    assert f.cw == 3.0                       # 3.5 - 1/2


def test_eq1_uses_configured_alpha_and_beta():
    f = stable(4, alpha=0.5, beta=0.25)
    f.on_ack(1)
    assert f.cw == 4.125                     # 4 + 0.5/4
    f.on_ack(1, ece=True)
    assert f.cw == 3.875                     # 4.125 - 0.25


def test_eq2_delayed_ack_of_n_packets_scales_by_n_with_cw_before_the_ack():
    f = stable(4)
    f.on_ack(2, ece=False)
    # Eq (2): cw + n*alpha/cw = 4 + 2*1/4 = 4.5 (not 4 + 1/4 + 1/4.25 = 4.485)
    assert f.cw == 4.5
    f.on_ack(3, ece=True)
    assert f.cw == 3.0                       # Eq (2): 4.5 - 3 * 1/2
    f.on_ack(4, ece=False)
    assert f.cw == pytest.approx(3 + 4 / 3)  # 3 + 4*1/3 = 4.3333...


def test_cw_exactly_one_still_follows_eq1():
    f = stable(1)
    f.on_ack(1, ece=False)
    assert f.cw == 2.0                       # cw >= 1: Eq (1): 1 + 1/1 (not 1 + gamma)


# ----------------------------------------------------------------- cw < 1 (2.2 end)

def test_below_one_packet_marked_halves_with_eta_and_floors_at_gamma():
    f = stable(1)
    f.on_ack(1, ece=True)
    assert f.cw == 0.5                       # cw = 1 >= 1: Eq (1): 1 - 1/2
    f.on_ack(1, ece=True)
    assert f.cw == 0.25                      # cw < 1: max(1/8, 1/2 * 0.5)
    f.on_ack(1, ece=True)
    assert f.cw == 0.125                     # max(1/8, 1/2 * 0.25 = 0.125)
    f.on_ack(1, ece=True)
    assert f.cw == 0.125                     # max(1/8, 1/2 * 0.125 = 0.0625) = gamma


def test_below_one_packet_unmarked_adds_gamma_until_one_then_eq1():
    f = stable(1)
    for _ in range(3):
        f.on_ack(1, ece=True)                # 1 -> 0.5 -> 0.25 -> 0.125 (above)
    got = []
    for _ in range(8):
        f.on_ack(1, ece=False)
        got.append(f.cw)
    # cw < 1: cw += gamma = 1/8, seven times: 0.25 ... 1.0; then cw = 1 >= 1:
    # Eq (1): 1 + 1/1 = 2
    assert got == [0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0, 2.0]


def test_below_one_packet_marked_uses_eta_times_cw():
    f = stable(1)
    f.on_ack(1, ece=True)                    # 0.5
    f.on_ack(1, ece=False)                   # 0.5 + 1/8 = 0.625
    f.on_ack(1, ece=False)                   # 0.75
    f.on_ack(1, ece=True)
    assert f.cw == 0.375                     # max(1/8, 1/2 * 0.75)


def test_below_one_packet_gamma_parameter_is_step_and_floor():
    f = stable(1, gamma=0.25)
    f.on_ack(1, ece=True)                    # Eq (1): 1 - 1/2 = 0.5
    f.on_ack(1, ece=True)                    # max(1/4, 0.25) = 0.25
    f.on_ack(1, ece=True)                    # max(1/4, 0.125) = 0.25
    assert f.cw == 0.25
    f.on_ack(1, ece=False)
    assert f.cw == 0.5                       # 0.25 + 1/4


def test_cw_never_below_gamma_under_many_marked_acks_from_large_cw_with_beta_one():
    f = stable(20, beta=1.0)
    seen = []
    for _ in range(19):
        f.on_ack(1, ece=True)
        seen.append(f.cw)
    # Eq (1) with beta = 1: 20 - 1 per ACK -> 19, 18, ..., 1
    assert seen == [float(x) for x in range(19, 0, -1)]
    f.on_ack(1, ece=True)
    # cw = 1 >= 1: 1 - 1 = 0 < gamma: [LDCP]'s floor (gamma "is also the
    # minimum window size", 2.2) -> 1/8
    assert f.cw == 0.125
    rng = random.Random(3)
    for _ in range(2000):
        f.on_ack(rng.randint(1, 8), ece=True)
        assert f.cw >= 0.125
    assert f.cw == 0.125


def test_delayed_marked_ack_larger_than_cw_floors_at_gamma():
    f = stable(3, beta=1.0, gamma=1 / 16)
    f.on_ack(5, ece=True)
    # Eq (2): 3 - 5 * 1 = -2 < gamma -> 1/16
    assert f.cw == 1 / 16


def test_cw_never_below_gamma_under_random_mixed_acks_and_losses():
    rng = random.Random(2021)
    for gamma in (0.25, 0.125, 0.0625):
        f = stable(50, beta=1.0, gamma=gamma)
        for _ in range(3000):
            f.on_ack(rng.randint(1, 6), ece=rng.random() < 0.8,
                     loss=rng.random() < 0.02)
            assert f.cw >= gamma


# ------------------------------------------------------------------- timer (2.2 end)

def test_timer_interval_is_rtt_over_cw_below_one_packet_else_zero():
    f = stable(1)
    assert f.tx_interval_ns(13000) == 0      # cw = 1 >= 1: ACK-clocked, no timer
    f.on_ack(1, ece=True)                    # cw 0.5
    assert f.tx_interval_ns(13000) == 26000  # 13000 / 0.5
    assert f.tx_interval_ns(10000) == 20000  # 10000 / 0.5
    f.on_ack(1, ece=True)                    # cw 0.25
    assert f.tx_interval_ns(13000) == 52000  # 13000 / 0.25
    f.on_ack(1, ece=True)                    # cw 0.125
    assert f.tx_interval_ns(13000) == 104000  # 13000 / 0.125
    assert f.tx_interval_ns() == 104000      # rtt 0 -> configured rtt_ns 13000
    for _ in range(7):
        f.on_ack(1)                          # 0.125 + 7/8 = 1.0
    assert f.cw == 1.0
    assert f.tx_interval_ns(13000) == 0


def test_timer_uses_configured_rtt_when_none_given():
    f = stable(1, rtt_ns=20000)
    f.on_ack(1, ece=True)                    # cw 0.5
    assert f.tx_interval_ns() == 40000       # 20000 / 0.5


def test_next_tx_armed_from_now_plus_rtt_over_cw_only_below_one_packet():
    f = Ldcp(iw_pkts=1, rtt_ns=20000)
    f.on_ack(1, now_ns=1000)                 # full IW: stable, cw 1
    assert f.next_tx_ns == 0                 # cw >= 1: no timer
    f.on_ack(1, ece=True, now_ns=5000)       # cw 0.5
    assert f.next_tx_ns == 45000             # 5000 + 20000 / 0.5
    f.on_ack(1, ece=False, now_ns=50000)     # cw 0.625
    assert f.next_tx_ns == 82000             # 50000 + 20000 / 0.625 = 50000 + 32000
    for t in (60000, 70000, 80000):          # 0.75, 0.875, 1.0
        f.on_ack(1, now_ns=t)
    assert f.cw == 1.0
    assert f.next_tx_ns == 0


# ------------------------------------------------------------ fast start (2.3, 3.1)

def test_fast_start_initial_window_is_bdp_in_whole_packets():
    f = Ldcp()
    # 2.3 IW = BDP: 100e9 b/s * 13000e-9 s / (8 * 1000 B) = 1.3e6 / 8000 = 162.5 -> 163
    assert (f.stage, f.iw, f.cw) == ("fast_start", 163, 163)
    g = Ldcp(line_rate_bps=25_000_000_000, rtt_ns=10000, mtu_bytes=1500)
    # 25e9 * 1e-5 / (8 * 1500) = 250000 / 12000 = 20.83 -> 21
    assert (g.iw, g.cw) == (21, 21)
    h = Ldcp(line_rate_bps=100_000_000_000, rtt_ns=8000, mtu_bytes=1000)
    # 100e9 * 8e-6 / 8000 = 800000 / 8000 = 100 exactly -> 100
    assert h.iw == 100


def test_fast_start_explicit_iw_overrides_bdp():
    f = Ldcp(iw_pkts=10)
    assert (f.stage, f.iw, f.cw) == ("fast_start", 10, 10)


def test_ecn_echo_and_unmarked_acks_in_fast_start_do_not_change_cw():
    f = Ldcp(iw_pkts=10)
    for _ in range(5):
        f.on_ack(1, ece=True)
    # 2.3: cw stays IW during the first RTT; no Eq (1) decrease (would be 10 - 5/2)
    assert (f.stage, f.cw) == ("fast_start", 10)
    for _ in range(4):
        f.on_ack(1, ece=False)
    # no Eq (1) increase either (9 packets < IW acknowledged)
    assert (f.stage, f.cw) == ("fast_start", 10)


def test_full_iw_acknowledged_moves_to_stable_with_cw_iw():
    f = Ldcp(iw_pkts=10)
    for _ in range(9):
        f.on_ack(1)
    assert (f.stage, f.cw) == ("fast_start", 10)      # 9 < IW = 10
    f.on_ack(1)
    assert (f.stage, f.cw) == ("stable", 10)           # 3.1 cond. 2: cw = IW (BDP)
    f.on_ack(1)
    assert f.cw == pytest.approx(10.1)                 # stable: Eq (1) 10 + 1/10


def test_full_iw_acknowledged_by_delayed_acks_sets_cw_iw_not_count():
    f = Ldcp(iw_pkts=10)
    f.on_ack(4)
    f.on_ack(4)
    assert (f.stage, f.cw) == ("fast_start", 10)      # 8 < 10
    f.on_ack(4)
    assert (f.stage, f.cw) == ("stable", 10)           # 12 >= 10: cw = IW = 10, not 12


def test_loss_in_fast_start_sets_cw_to_packets_acknowledged_before_loss():
    f = Ldcp(iw_pkts=10)
    for _ in range(3):
        f.on_ack(1)
    f.on_ack(0, loss=True)                             # dup-ACK/NACK, nothing new acked
    # 3.1 cond. 1: cw = packets accumulatively acknowledged before the loss = 3
    assert (f.stage, f.cw) == ("stable", 3)
    f.on_ack(1)
    assert f.cw == pytest.approx(3 + 1 / 3)            # stable: Eq (1)


def test_loss_in_fast_start_counts_packets_acked_by_the_loss_reporting_ack():
    f = Ldcp(iw_pkts=10)
    for _ in range(3):
        f.on_ack(1)
    # a NACK that cumulatively acknowledges 2 more packets before the hole:
    # 3 + 2 = 5 packets acknowledged in order before the loss
    f.on_ack(2, loss=True)
    assert (f.stage, f.cw) == ("stable", 5)


def test_loss_before_any_ack_in_fast_start_leaves_cw_at_gamma():
    f = Ldcp(iw_pkts=10)
    f.on_ack(0, loss=True)
    # 0 packets acknowledged; gamma is the minimum window (2.2) -> 1/8
    assert (f.stage, f.cw) == ("stable", 0.125)


def test_fast_start_counters():
    f = Ldcp(iw_pkts=10)
    f.on_ack(2, ece=True)
    f.on_ack(3)
    f.on_ack(0, loss=True)
    assert f.counters() == {"n_marked": 2, "n_unmarked": 3, "n_losses": 1}


# ------------------------------------------------------------ ECN capability (3.1)

def test_first_rtt_packets_ecn_incapable_except_the_iw_th_for_long_messages():
    f = Ldcp(iw_pkts=10)
    for msg in (0, 11, 1000):                 # 0 = length unknown / long
        assert [f.pkt_ect(i, msg) for i in range(9)] == [False] * 9
        assert f.pkt_ect(9, msg) is True       # the IW-th (10th) packet
        assert all(f.pkt_ect(i, msg) for i in range(10, 40))   # stable-stage packets


def test_short_message_last_packet_is_the_ecn_capable_one():
    f = Ldcp(iw_pkts=10)
    assert [f.pkt_ect(i, 4) for i in range(4)] == [False, False, False, True]
    assert [f.pkt_ect(i, 10) for i in range(10)] == [False] * 9 + [True]
    assert f.pkt_ect(0, 1) is True             # single-packet message: its last


def test_default_iw_marks_packet_162_ecn_capable():
    f = Ldcp()                                 # IW 163 (above)
    assert f.pkt_ect(161) is False
    assert f.pkt_ect(162) is True              # the 163rd = IW-th packet
    assert f.pkt_ect(0) is False


# ------------------------------------------------------------------------ parameters

@pytest.mark.parametrize("key,value", [
    ("alpha", 0), ("alpha", 1.5), ("alpha", -1),
    ("beta", 1.5), ("beta", 0),
    ("gamma", 1), ("gamma", 0),
    ("eta", 1), ("eta", 0),
    ("iw_pkts", 0.5),
    ("rtt_ns", 0),
    ("mtu_bytes", 0),
])
def test_out_of_range_parameter_raises_param_error_naming_it(key, value):
    with pytest.raises(ParamError) as ei:
        Ldcp(**{key: value})
    assert ei.value.key == key
    assert key in str(ei.value)


def test_unknown_parameter_raises_param_error_naming_it():
    with pytest.raises(ParamError) as ei:
        Ldcp(delta=0.5)
    assert ei.value.key == "delta"


def test_upper_bounds_of_alpha_and_beta_are_accepted():
    f = stable(4, alpha=1.0, beta=1.0)         # [LDCP] section 2.2: 0 < alpha, beta <= 1
    f.on_ack(1, ece=True)
    assert f.cw == 3.0                         # 4 - 1


# --------------------------------------------------------------------------- batches

def _ldcp_trace():
    rng = random.Random(3168)
    evs = [{"acked_pkts": 1, "ece": True, "now_ns": 1000},
           {"acked_pkts": 3, "now_ns": 2000},
           {"acked_pkts": 0, "loss": True, "now_ns": 3000}]
    t = 3000
    for _ in range(500):
        t += rng.choice([0, 100, 1000])
        evs.append({"acked_pkts": rng.randint(0, 4), "ece": rng.random() < 0.6,
                    "loss": rng.random() < 0.01, "now_ns": t})
    return evs


def test_batch_run_equals_one_by_one_on_ack():
    evs = _ldcp_trace()
    batch = Ldcp(iw_pkts=10, beta=0.75)
    out = batch.run(Ldcp.events(evs))
    single = Ldcp(iw_pkts=10, beta=0.75)
    assert len(out) == len(evs)
    for i, e in enumerate(evs):
        single.on_ack(e["acked_pkts"], e.get("ece", False), e.get("loss", False),
                      e["now_ns"])
        assert out[i] == {"cw_pkts": single.cw, "stage": single.stage}, i
    assert batch.counters() == single.counters()
    assert batch.next_tx_ns == single.next_tx_ns
    assert any(o["cw_pkts"] < 1 for o in out)     # the trace reaches the timer regime


def test_batch_run_gives_hand_values():
    out = Ldcp(iw_pkts=10).run(Ldcp.events(_ldcp_trace()[:3] + [
        {"acked_pkts": 1}, {"acked_pkts": 2, "ece": True}]))
    # 1: ECE in fast start: cw 10;  2: 4 acked < 10: cw 10
    # 3: loss: cw = 4 acknowledged, stable;  4: Eq (1) 4 + 1/4 = 4.25
    # 5: Eq (2) 4.25 - 2 * 1/2 = 3.25
    assert out == [{"cw_pkts": 10, "stage": "fast_start"},
                   {"cw_pkts": 10, "stage": "fast_start"},
                   {"cw_pkts": 4, "stage": "stable"},
                   {"cw_pkts": 4.25, "stage": "stable"},
                   {"cw_pkts": 3.25, "stage": "stable"}]


def test_fractional_iw_rounds_up_so_last_first_rtt_packet_and_stage_end_agree():
    # IW = BDP in whole packets ([LDCP] section 2.3): 10.5 -> 11.  The last
    # first-RTT packet (index 10) is ECN-capable (section 3.1) and fast start
    # ends exactly when those 11 packets are acknowledged.
    f = Ldcp(iw_pkts=10.5)
    assert f.iw == 11.0
    assert not f.pkt_ect(9) and f.pkt_ect(10)
    f.on_ack(10)
    assert f.stage == "fast_start"
    f.on_ack(1)
    assert (f.stage, f.cw) == ("stable", 11.0)
