"""HPCC ([HPCC] Algorithm 1) and Rx-HPCC ([HPCC++2020] section 6.2, [HPCC++2022]
section 6.3.2) through the Python binding, with every expected value worked
out by hand from the equations.

Round numbers used throughout unless a test says otherwise:
  T = 10000 ns, B = 100 Gbit/s = 1e11 / 8e9 = 12.5 bytes/ns, so B x T = 125000 B;
  W_init = B_NIC x T = 125000 B (section 3.2), eta = 0.95, W_AI = 80 B,
  maxStage = 5, mtu = 1000 B (w_min), w_max = W_init unless raised.
"Line N" cites Algorithm 1 of [HPCC] (lines 1-27) or NewINT of [HPCC++2020]
section 6.2 (lines 28-34).  Units as docs/replay.md: u' =
min(qlen, L.qlen) / (B T) + txRate / B with txRate = delta tx / delta ts.
"""
from __future__ import annotations

import math

import pytest

from hpccd.core import cc
from hpccd._cc import ffi, lib
from hpccd.core.cc import CCError, Hpcc, ParamError, RxHpcc

GBPS = 1_000_000_000
B100 = 100 * GBPS
T = 10_000
BT = 125_000            # B x T in bytes at 100 Gbit/s
W_INIT = 125_000.0
ETA = 0.95
W_AI = 80.0
TS_WRAP = 1 << 24       # TS field: ns modulo 2^24
TX_WRAP = 1 << 20       # txBytes field: 128 B units modulo 2^20
HALF_TS = 1 << 23       # unwrap horizon set by the ts field (half its range)


def hop(ts: int, q: int = 0, tx: int = 0, bw: int = B100) -> dict:
    return {"ts_ns": ts, "qlen_bytes": q, "tx_bytes": tx, "bw_bps": bw}


def hpcc(**kw) -> Hpcc:
    params = dict(T_ns=T, eta=ETA, w_ai_bytes=W_AI, line_rate_bps=B100, mtu_bytes=1000)
    params.update(kw)
    return Hpcc(**params)


def rxhpcc(**kw) -> RxHpcc:
    params = dict(T_ns=T, eta=ETA, w_ai_bytes=W_AI, line_rate_bps=B100, mtu_bytes=1000)
    params.update(kw)
    return RxHpcc(**params)


def approx(x: float):
    return pytest.approx(x, rel=1e-12, abs=1e-12)


def state(f: Hpcc) -> tuple:
    return (f.W, f.Wc, f.U, f.inc_stage)


# ---------------------------------------------------------------------------
# First ACK
# ---------------------------------------------------------------------------

def test_first_ack_only_records_L_and_sets_last_update_seq():
    f = hpcc(u_init=0.25)
    # A huge queue and counter values: nothing to take a delta against, so
    # W, Wc, U and incStage keep their initial values (docs/replay.md).
    updated = f.new_ack(1000, 50_000, [hop(1_000_000, q=500_000, tx=7_000_000)])
    assert updated is False
    assert state(f) == (W_INIT, W_INIT, 0.25, 0)
    assert f.last_update_seq == 50_000          # lastUpdateSeq = snd_nxt
    # L was recorded: the next ACK measures against it.  Line 4: txRate =
    # 62500 / 10000 = 6.25 B/ns -> 6.25 / 12.5 = 0.5; line 5: min(500000,
    # 500000) / 125000 = 4 -> u' = 4.5; tau = 10000 = T -> line 9: U = 4.5.
    # seq 51000 > 50000 (line 22), U >= eta (line 12) -> line 13:
    # W = 125000 / (4.5 / 0.95) + 80 = 26388.888... + 80 = 26468.888...
    assert f.new_ack(51_000, 90_000, [hop(1_010_000, q=500_000, tx=7_062_500)]) is True
    assert f.U == approx(4.5)
    assert f.W == approx(125_000 * 0.95 / 4.5 + 80)
    assert f.Wc == f.W                           # line 15: Wc = W
    assert f.last_update_seq == 90_000           # line 24


# ---------------------------------------------------------------------------
# MeasureInflight (lines 1-10)
# ---------------------------------------------------------------------------

def test_single_hop_at_line_rate_no_queue_gives_U_1():
    f = hpcc()
    f.new_ack(1000, 10_000, [hop(1_000_000, 0, 0)])
    # line 4: txRate = 125000 B / 10000 ns = 12.5 B/ns = B -> txRate/B = 1;
    # line 5: min(0, 0)/(B T) = 0 -> u' = 1; tau = T; line 9: U = 0 x 0 + 1 x 1 = 1.
    f.new_ack(11_000, 20_000, [hop(1_010_000, 0, 125_000)])
    assert f.U == approx(1.0)
    # line 12: U = 1 >= eta -> line 13: W = 125000 / (1/0.95) + 80 = 118750 + 80
    assert f.W == approx(118_830.0)


def test_queue_term_is_qlen_over_BT_plus_txrate_over_B():
    f = hpcc()
    f.new_ack(1000, 10_000, [hop(1_000_000, 25_000, 0)])
    # line 5: min(25000, 25000) / (12.5 x 10000) = 0.2;
    # line 4: 62500 / 10000 = 6.25 B/ns -> 6.25 / 12.5 = 0.5;  u' = 0.7, tau = T:
    # line 9: U = 0.7
    f.new_ack(11_000, 20_000, [hop(1_010_000, 25_000, 62_500)])
    assert f.U == approx(0.7)


def test_min_qlen_filters_a_queue_spike_seen_once():
    f = hpcc()
    f.new_ack(1000, 10_000, [hop(1_000_000, 0, 0)])
    # Spike of 100000 B in this ACK only: line 5 uses min(100000, L.qlen = 0) = 0,
    # so u' = 0 + 12.5/12.5 = 1 (it would be 0.8 + 1 = 1.8 without the min).
    f.new_ack(2000, 10_000, [hop(1_010_000, 100_000, 125_000)])
    assert f.U == approx(1.0)
    # Spike gone: min(0, L.qlen = 100000) = 0 -> u' = 1 again, U = 1.
    f.new_ack(3000, 10_000, [hop(1_020_000, 0, 250_000)])
    assert f.U == approx(1.0)
    # A queue seen in two consecutive ACKs does count: min(50000, 0) = 0 first ...
    f.new_ack(4000, 10_000, [hop(1_030_000, 50_000, 375_000)])
    assert f.U == approx(1.0)
    # ... then min(50000, 50000) / 125000 = 0.4 -> u' = 1.4, tau = T -> U = 1.4.
    f.new_ack(5000, 10_000, [hop(1_040_000, 50_000, 500_000)])
    assert f.U == approx(1.4)


@pytest.mark.parametrize("rotate", [0, 1, 2])
def test_max_over_hops_takes_most_loaded_hop_and_its_tau(rotate):
    B40 = 40 * GBPS
    first = [hop(1_000_000, 0, 0), hop(2_000_000, 25_000, 0), hop(3_000_000, 0, 0, B40)]
    second = [
        # hop A: 62500 / 10000 = 6.25 B/ns / 12.5 = 0.5
        hop(1_010_000, 0, 62_500),
        # hop B: min(25000, 25000) / 125000 = 0.2; 62500 / 5000 = 12.5 B/ns -> 1.0;
        #        u' = 1.2 over ts delta 5000 ns  <- the most loaded hop
        hop(2_005_000, 25_000, 62_500),
        # hop C: B = 40e9 / 8e9 = 5 B/ns; 40000 / 10000 = 4 B/ns -> 0.8
        hop(3_010_000, 0, 40_000, B40),
    ]
    first = first[rotate:] + first[:rotate]
    second = second[rotate:] + second[:rotate]
    f = hpcc()
    f.new_ack(1000, 10_000, first)
    f.new_ack(11_000, 20_000, second)
    # lines 6-7: u = 1.2, tau = 5000 (hop B's delta, not T); line 8: tau <= T;
    # line 9: U = (1 - 5000/10000) x 0 + (5000/10000) x 1.2 = 0.6
    assert f.U == approx(0.6)


def test_tau_is_clamped_to_T():
    f = hpcc(u_init=0.5)
    f.new_ack(1000, 10_000, [hop(1_000_000, 0, 0)])
    # ts delta 40000 ns, 500000 B -> 12.5 B/ns -> u' = 1, tau = 40000;
    # line 8: tau = min(40000, 10000) = T -> line 9: U = 0 x 0.5 + 1 x 1 = 1
    # (without the clamp: (1 - 4) x 0.5 + 4 x 1 = 2.5).
    f.new_ack(11_000, 20_000, [hop(1_040_000, 0, 500_000)])
    assert f.U == approx(1.0)


def test_ewma_with_tau_a_quarter_of_T():
    f = hpcc(u_init=0.4)
    f.new_ack(1000, 10_000, [hop(1_000_000, 0, 0)])
    # tau = 2500 = T/4; 25000 B / 2500 ns = 10 B/ns -> u' = 10 / 12.5 = 0.8;
    # line 9: U = 0.75 x 0.4 + 0.25 x 0.8 = 0.3 + 0.2 = 0.5
    f.new_ack(2000, 10_000, [hop(1_002_500, 0, 25_000)])
    assert f.U == approx(0.5)
    # again: U = 0.75 x 0.5 + 0.25 x 0.8 = 0.375 + 0.2 = 0.575
    f.new_ack(3000, 10_000, [hop(1_005_000, 0, 50_000)])
    assert f.U == approx(0.575)


# ---------------------------------------------------------------------------
# Fast reaction without overreaction (section 3.2, Figure 5, lines 11-27)
# ---------------------------------------------------------------------------

def test_figure5_two_acks_seeing_the_same_queue_do_not_halve_twice():
    f = hpcc()                                   # W(0) = Wc = 125000
    f.new_ack(1000, 200_000, [hop(1_000_000, 112_500, 0)])   # records, lastUpdateSeq = 200000
    # ACK of P1 (seq 2000 <= lastUpdateSeq: line 26, no Wc update):
    # line 5: min(112500, 112500) / 125000 = 0.9, txRate 125000/10000 = B -> 1;
    # u' = 1.9, tau = T -> U = 1.9; line 13: W(1) = Wc / (1.9/0.95) + 80 = 125000/2 + 80
    assert f.new_ack(2000, 201_000, [hop(1_010_000, 112_500, 125_000)]) is False
    assert f.U == approx(1.9)
    assert f.W == approx(62_580.0)
    assert f.Wc == W_INIT
    # ACK of P2 reports the same queue: U = 1.9 again.  W(2) is computed from
    # the SAME Wc: 125000/2 + 80 = 62580, not W(1)/2 + 80 = 31370 (the
    # overreaction of Figure 5).
    assert f.new_ack(3000, 202_000, [hop(1_020_000, 112_500, 250_000)]) is False
    assert f.U == approx(1.9)
    assert f.W == approx(62_580.0)
    assert f.Wc == W_INIT
    assert f.inc_stage == 0
    # ACK of Q, the first packet sent after the adjustment (seq > lastUpdateSeq,
    # line 22): Wc = W = 125000/2 + 80 = 62580 (lines 13-15), lastUpdateSeq = snd_nxt.
    assert f.new_ack(200_001, 300_000, [hop(1_030_000, 112_500, 375_000)]) is True
    assert f.W == approx(62_580.0)
    assert f.Wc == f.W
    assert f.last_update_seq == 300_000


def test_acks_after_a_wc_update_compute_from_wc_not_from_w():
    # Algorithm 1 as written: the ACK beyond lastUpdateSeq updates Wc (line 15);
    # the ACKs that follow within that RTT (seq <= lastUpdateSeq) all compute
    # W from that one Wc (line 26) and never compound among themselves.
    f = hpcc()
    f.new_ack(1000, 100_000, [hop(1_000_000, 112_500, 0)])
    # seq 100001 > 100000: U = 1.9 (as above), W = 125000 / 2 + 80 = 62580 = Wc
    assert f.new_ack(100_001, 300_000, [hop(1_010_000, 112_500, 125_000)]) is True
    assert (f.W, f.Wc) == (approx(62_580.0), approx(62_580.0))
    # same queue, seq <= 300000: W = 62580 / 2 + 80 = 31370, Wc kept
    assert f.new_ack(101_000, 301_000, [hop(1_020_000, 112_500, 250_000)]) is False
    assert f.W == approx(31_370.0)
    assert f.Wc == approx(62_580.0)
    # and again: still 62580 / 2 + 80 = 31370 (from W it would be 15765)
    assert f.new_ack(102_000, 302_000, [hop(1_030_000, 112_500, 375_000)]) is False
    assert f.W == approx(31_370.0)
    assert f.last_update_seq == 300_000


# ---------------------------------------------------------------------------
# ComputeWind: incStage / maxStage (lines 11-20)
# ---------------------------------------------------------------------------

def test_five_additive_increases_then_one_multiplicative_step():
    f = hpcc(w_max_bytes=1_000_000, max_stage=5)     # room above W_init
    ts, tx, snd = 1_000_000, 0, 10_000
    f.new_ack(1000, snd, [hop(ts, 0, tx)])

    def ack(update: bool) -> bool:
        # every ACK: 62500 B over 10000 ns = 6.25 B/ns -> u' = 0.5, tau = T -> U = 0.5
        nonlocal ts, tx, snd
        ts, tx = ts + T, tx + 62_500
        seq = snd + 1 if update else snd         # > or <= lastUpdateSeq (line 22)
        snd += 10_000
        return f.new_ack(seq, snd, [hop(ts, 0, tx)])

    wc = W_INIT
    for k in range(1, 6):
        # U = 0.5 < eta and incStage = k-1 < 5: line 17: W = Wc + 80;
        # line 19: incStage++, Wc = W
        assert ack(update=True) is True
        wc += 80
        assert f.U == approx(0.5)
        assert (f.W, f.Wc, f.inc_stage) == (approx(wc), approx(wc), k)
        if k == 4:
            # a non-updating ACK (line 26): W = Wc + 80 = 125320 + 80, but
            # Wc and incStage stay
            assert ack(update=False) is False
            assert (f.W, f.Wc, f.inc_stage) == (approx(125_400.0), approx(125_320.0), 4)
    assert f.W == approx(125_400.0)
    # incStage = 5 >= maxStage (line 12) although U = 0.5 < eta: line 13:
    # W = 125400 / (0.5/0.95) + 80 = 125400 x 1.9 + 80 = 238260 + 80 = 238340.
    # A non-updating ACK computes it without touching Wc and incStage ...
    assert ack(update=False) is False
    assert (f.W, f.Wc, f.inc_stage) == (approx(238_340.0), approx(125_400.0), 5)
    # ... the sixth updating ACK commits it and resets incStage (line 15).
    assert ack(update=True) is True
    assert f.U == approx(0.5)
    assert f.W == approx(238_340.0)
    assert f.Wc == approx(238_340.0)
    assert f.inc_stage == 0
    # and the next one is additive again: W = 238340 + 80, incStage 1
    assert ack(update=True) is True
    assert (f.W, f.inc_stage) == (approx(238_420.0), 1)


# ---------------------------------------------------------------------------
# Clamping and degenerate inputs (docs/algorithms.md)
# ---------------------------------------------------------------------------

def test_w_clamped_to_w_min_and_wc_takes_the_clamped_value():
    f = hpcc()                                   # w_min = mtu = 1000
    G1 = 1 * GBPS                                # B = 0.125 B/ns, B T = 1250 B
    f.new_ack(1000, 10_000, [hop(1_000_000, 1_250_000, 0, G1)])
    # min(1250000, 1250000) / 1250 = 1000; 1250 B / 10000 ns = 0.125 B/ns -> 1;
    # u' = 1001, U = 1001; line 13: W = 125000 / (1001/0.95) + 80 = 118.63 + 80
    # = 198.63 < w_min -> 1000; Wc takes the clamped W.
    f.new_ack(11_000, 20_000, [hop(1_010_000, 1_250_000, 1250, G1)])
    assert f.U == approx(1001.0)
    assert (f.W, f.Wc) == (1000.0, 1000.0)


def test_w_clamped_to_w_max_in_additive_increase():
    f = hpcc()                                   # w_max = W_init = 125000
    f.new_ack(1000, 10_000, [hop(1_000_000, 0, 0)])
    # U = 0.5 < eta: line 17: W = 125000 + 80 = 125080 > w_max -> 125000
    f.new_ack(11_000, 20_000, [hop(1_010_000, 0, 62_500)])
    assert (f.W, f.Wc, f.inc_stage) == (W_INIT, W_INIT, 1)


def test_multiplicative_step_clamped_and_U_zero_gives_w_max():
    f = hpcc(w_max_bytes=500_000, max_stage=0)   # incStage 0 >= 0: always line 13
    f.new_ack(1000, 10_000, [hop(1_000_000, 0, 0)])
    # U = 0.5: W = 125000 / (0.5/0.95) + 80 = 237500 + 80 = 237580 (below w_max)
    f.new_ack(11_000, 20_000, [hop(1_010_000, 0, 62_500)])
    assert f.W == approx(237_580.0)
    # U = 0.05: 237580 x 19 + 80 = 4514100 -> w_max = 500000.  tx 6250/10000/12.5 = 0.05,
    # tau = T -> U = 0.05
    f.new_ack(21_000, 30_000, [hop(1_020_000, 0, 62_500 + 6_250)])
    assert f.U == approx(0.05)
    assert (f.W, f.Wc) == (500_000.0, 500_000.0)
    g = hpcc(w_max_bytes=500_000, max_stage=0)
    g.new_ack(1000, 10_000, [hop(1_000_000, 0, 0)])
    # idle path: u = 0, tau = first hop's delta = T -> U = 0; line 13 divides by
    # U/eta = 0: the trace format gives w_max, finite.
    g.new_ack(11_000, 20_000, [hop(1_010_000, 0, 0)])
    assert g.U == 0.0
    assert (g.W, g.Wc) == (500_000.0, 500_000.0)


def test_no_nan_when_ts_did_not_advance():
    f = hpcc(u_init=0.6)
    f.new_ack(1000, 10_000, [hop(1_000_000, 50_000, 0)])
    # same ts, tx advanced: delta ts = 0 would divide by zero in line 4; the hop
    # contributes nothing, tau = first hop's delta = 0 -> U = (1 - 0) x 0.6 = 0.6.
    f.new_ack(11_000, 20_000, [hop(1_000_000, 50_000, 99_999)])
    assert f.U == 0.6
    assert all(math.isfinite(x) for x in (f.W, f.Wc, f.U, f.rate_bps))
    # U = 0.6 < eta: line 17: W = 125000 + 80 -> clamped to w_max 125000
    assert f.W == W_INIT
    # two hops, the first one stuck, the second at line rate over T:
    g = hpcc()
    g.new_ack(1000, 10_000, [hop(1_000_000), hop(2_000_000)])
    g.new_ack(11_000, 20_000, [hop(1_000_000, 0, 5000), hop(2_010_000, 0, 125_000)])
    # hop 1: u' = 125000/10000/12.5 = 1, tau = 10000 -> U = 1
    assert g.U == approx(1.0)


def test_idle_path_U_decays_with_the_first_hops_ts_delta():
    f = hpcc(u_init=0.8)
    f.new_ack(1000, 10_000, [hop(1_000_000), hop(2_000_000)])
    # no tx, no queue anywhere: u = 0; tau = first hop's delta 2500 (the second
    # hop's would be 10000 and give U = 0): U = (1 - 0.25) x 0.8 + 0.25 x 0 = 0.6
    f.new_ack(2000, 10_000, [hop(1_002_500), hop(2_010_000)])
    assert f.U == approx(0.6)
    # again: U = 0.75 x 0.6 = 0.45
    f.new_ack(3000, 10_000, [hop(1_005_000), hop(2_020_000)])
    assert f.U == approx(0.45)


def test_five_hops_with_unsteady_hops_among_steady_ones():
    # The C core takes steady hops on an unrolled fast path and hands over to
    # the general loop at the first hop that is not steady (docs/benchmarks.md);
    # the values must be those of lines 3-9 whichever hop that is.
    B40 = 40 * GBPS     # B = 5 B/ns
    f = hpcc()
    f.new_ack(1000, 10_000, [hop(1_000_000, 0, 0), hop(2_000_000, 25_000, 0),
                             hop(3_000_000, 0, 0), hop(4_000_000, 50_000, 0),
                             hop(5_000_000, 0, 0)])
    f.new_ack(11_000, 20_000, [
        hop(1_010_000, 0, 62_500),         # 6.25 B/ns / 12.5 = 0.5
        hop(2_010_000, 25_000, 0),         # 25000 / 125000 = 0.2
        hop(3_000_000, 0, 10),             # ts did not advance: nothing
        hop(4_005_000, 50_000, 62_500),    # 0.4 + 12.5 / 12.5 = 1.4 over 5000 ns
        hop(5_010_000, 0, 40_000, B40),    # B changed: 4 B/ns / 5 = 0.8
    ])
    # lines 6-9: u = 1.4, tau = 5000: U = 0.5 x 0 + 0.5 x 1.4
    assert f.U == approx(0.7)
    assert f._s.bottleneck_hop == 3
    # all steady now (hop 4 at 40G), hop 0 the most loaded:
    f.new_ack(21_000, 30_000, [
        hop(1_020_000, 0, 187_500),        # 12.5 / 12.5 = 1.0
        hop(2_020_000, 25_000, 0),         # 0.2
        hop(3_010_000, 0, 20),             # 10 B over 10000 ns: 0.00008
        hop(4_015_000, 0, 162_500),        # min(0, 50000) = 0; 10 / 12.5 = 0.8
        hop(5_020_000, 0, 85_000, B40),    # 4.5 / 5 = 0.9
    ])
    assert f.U == approx(1.0)              # tau = T
    assert f._s.bottleneck_hop == 0
    assert f.W == approx(125_000 * 0.95 + 80)   # line 13, W^c = 125000
    # hop 0 of unknown speed: counted, contributes nothing, but still gives
    # the idle-path tau; the last hop is the most loaded.
    f.new_ack(31_000, 40_000, [
        hop(1_030_000, 0, 312_500, bw=0),
        hop(2_030_000, 25_000, 0),         # 0.2
        hop(3_020_000, 0, 30),             # 0.00008
        hop(4_025_000, 0, 262_500),        # 0.8
        hop(5_030_000, 0, 130_000, B40),   # 4.5 / 5 = 0.9
    ])
    assert f.U == approx(0.9)              # tau = T: U = u
    assert f._s.bottleneck_hop == 4
    assert f.counters()["n_bad_hops"] == 1
    assert f.counters()["n_path_resets"] == 0


# ---------------------------------------------------------------------------
# Path changes (section 4.1: "throws away the existing status records")
# ---------------------------------------------------------------------------

def test_path_id_change_resets_the_records():
    f = hpcc(w_max_bytes=1_000_000)
    f.new_ack(1000, 10_000, [hop(1_000_000)], path_id=7)
    # U = 0.5 -> line 17: W = Wc = 125080, incStage 1
    assert f.new_ack(11_000, 20_000, [hop(1_010_000, 0, 62_500)], path_id=7) is True
    before = state(f)
    assert before == (approx(125_080.0), approx(125_080.0), approx(0.5), 1)
    # new path: only records, even with seq > lastUpdateSeq and a heavy queue
    assert f.new_ack(21_000, 30_000, [hop(5_000_000, 400_000, 9_999_999)], path_id=9) is False
    assert state(f) == before
    assert f.last_update_seq == 30_000
    assert f.counters()["n_path_resets"] == 1
    # next ACK measures against the record of path 9: q 400000/125000 = 3.2,
    # tx 125000/10000/12.5 = 1 -> U = 4.2 (tau = T);
    # line 13: W = 125080 / (4.2/0.95) + 80 = 28291.9047... + 80
    assert f.new_ack(31_000, 40_000, [hop(5_010_000, 400_000, 10_124_999)], path_id=9) is True
    assert f.U == approx(4.2)
    assert f.W == approx(125_080 * 0.95 / 4.2 + 80)
    # an ACK without a path id does not reset
    f.new_ack(41_000, 50_000, [hop(5_020_000, 400_000, 10_249_999)])
    assert f.counters()["n_path_resets"] == 1


def test_hop_count_change_resets_the_records():
    f = hpcc(u_init=0.3)
    f.new_ack(1000, 10_000, [hop(1_000_000)])
    assert f.new_ack(11_000, 20_000, [hop(1_010_000, 0, 125_000), hop(7_000_000, 90_000, 0)]) is False
    assert state(f) == (W_INIT, W_INIT, 0.3, 0)
    assert f.last_update_seq == 20_000
    assert f.counters()["n_path_resets"] == 1
    # measured against the 2-hop record: hop 2 min(90000, 90000)/125000 = 0.72,
    # tx 62500/10000/12.5 = 0.5 -> 1.22 > hop 1's 1.0; tau = T -> U = 1.22
    f.new_ack(21_000, 30_000, [hop(1_020_000, 0, 250_000), hop(7_010_000, 90_000, 62_500)])
    assert f.U == approx(1.22)


# ---------------------------------------------------------------------------
# INT hop wire word (include/hpccd/int_hop.h, [HPCC] section 4.1)
# ---------------------------------------------------------------------------

def test_hop_pack_layout_and_round_trip():
    # all fields at their maxima fill the 64 bits: 5 + 24 + 20 + 15
    maxima = dict(speed_code=31, ts=TS_WRAP - 1, tx_units=TX_WRAP - 1, qlen_units=(1 << 15) - 1)
    raw = cc.hop_pack(**maxima)
    assert raw == b"\xff" * 8
    assert cc.hop_unpack(raw) == maxima
    assert cc.hop_pack(0, 0, 0, 0) == b"\x00" * 8
    # each field's least significant bit, big-endian word:
    # B at bit 59 -> byte 0 = 0x08; TS at bit 35 -> byte 3 = 0x08;
    # txBytes at bit 15 -> byte 6 = 0x80; qLen at bit 0 -> byte 7 = 0x01
    assert cc.hop_pack(1, 0, 0, 0) == bytes([0x08, 0, 0, 0, 0, 0, 0, 0])
    assert cc.hop_pack(0, 1, 0, 0) == bytes([0, 0, 0, 0x08, 0, 0, 0, 0])
    assert cc.hop_pack(0, 0, 1, 0) == bytes([0, 0, 0, 0, 0, 0, 0x80, 0])
    assert cc.hop_pack(0, 0, 0, 1) == bytes([0, 0, 0, 0, 0, 0, 0, 0x01])
    fields = dict(speed_code=27, ts=0x123456, tx_units=0xABCDE, qlen_units=0x1234)
    word = (27 << 59) | (0x123456 << 35) | (0xABCDE << 15) | 0x1234
    assert cc.hop_pack(**fields) == word.to_bytes(8, "big")
    assert cc.hop_unpack(word.to_bytes(8, "big")) == fields


@pytest.mark.parametrize("field,value", [("speed_code", 32), ("ts", TS_WRAP),
                                         ("tx_units", TX_WRAP), ("qlen_units", 1 << 15)])
def test_hop_pack_refuses_out_of_range_fields(field, value):
    fields = dict(speed_code=27, ts=0, tx_units=0, qlen_units=0)
    fields[field] = value
    with pytest.raises(CCError):
        cc.hop_pack(**fields)
    fields[field] = value - 1
    cc.hop_pack(**fields)                        # one less fits


def test_speed_table_round_trips_and_unknown_speeds():
    assert cc.speed_code(1_000_000_000) == 14
    assert cc.speed_mbps(14) == 1000
    assert cc.speed_code(100 * GBPS) == 27
    assert cc.speed_code(10 * GBPS) == 22
    assert cc.speed_code(25 * GBPS) == 24
    assert cc.speed_code(400 * GBPS) == 29
    speeds = [cc.speed_mbps(c) for c in range(1, 32)]
    assert speeds == sorted(set(speeds))         # distinct, increasing
    assert speeds[0] == 10 and speeds[-1] == 1_600_000
    for code in range(1, 32):
        assert cc.speed_code(cc.speed_mbps(code) * 1_000_000) == code
    assert cc.speed_mbps(0) == 0
    assert cc.speed_mbps(32) == 0
    assert cc.speed_code(123_000_000) == 0       # 123 Mbit/s not in the table
    assert cc.speed_code(1_000_000_001) == 0     # not a whole Mbit/s
    assert cc.speed_code(0) == 0


def test_decode_units_qlen_x80_tx_x128():
    f = hpcc()
    w = ffi.new("struct hpccd_int_hop_wire[]", 2)
    ffi.memmove(w, cc.hop_pack(22, 123_456, 1000, 32_767) + cc.hop_pack(0, 7, 1, 1), 16)
    out = ffi.new("struct hpccd_int_rec[]", 2)
    assert lib.hpccd_hpcc_decode_hops(f._s, 1_000_000, w, 2, out) == 2
    # code 22 = 10000 Mbit/s; 1000 x 128 = 128000 B; 32767 x 80 = 2621360 B (saturated gauge)
    assert (out[0].bw_bps, out[0].ts_ns, out[0].tx_bytes, out[0].qlen_bytes) == \
        (10 * GBPS, 123_456, 128_000, 2_621_360)
    assert (out[1].bw_bps, out[1].ts_ns, out[1].tx_bytes, out[1].qlen_bytes) == (0, 7, 128, 80)


def wire(*hops: tuple[int, int, int, int]) -> bytes:
    return b"".join(cc.hop_pack(*h) for h in hops)


# q = 250 units x 80 = 20000 B in both records: min/(B T) = 20000/125000 = 0.16;
# tx delta 1000 units x 128 = 128000 B over ts delta 10240 ns = 12.5 B/ns -> 1;
# tau = min(10240, 10000) = T -> U = 1.16;  W = 125000 / (1.16/0.95) + 80.
U_WIRE = 1.16
W_WIRE = 125_000 * 0.95 / 1.16 + 80


@pytest.mark.parametrize("ts0,tx0", [
    (1_000_000, 100),                   # no wrap (control)
    (TS_WRAP - 5000, 100),              # ts wraps between the two ACKs
    (1_000_000, TX_WRAP - 500),         # txBytes wraps between the two ACKs
    (TS_WRAP - 1, TX_WRAP - 1),         # both wrap
])
def test_wire_counters_unwrap_like_the_decoded_records(ts0, tx0):
    a = hpcc()
    now = 50_000_000
    ts1, tx1 = ts0 + 10_240, tx0 + 1000
    a.new_ack_wire(now, 1000, 10_000, 1, wire((27, ts0, tx0, 250)))
    assert a.new_ack_wire(now + 10_240, 11_000, 20_000, 1,
                          wire((27, ts1 % TS_WRAP, tx1 % TX_WRAP, 250))) is True
    b = hpcc()
    b.new_ack(1000, 10_000, [hop(ts0, 20_000, tx0 * 128)], path_id=1)
    b.new_ack(11_000, 20_000, [hop(ts1, 20_000, tx1 * 128)], path_id=1)
    assert b.U == approx(U_WIRE)
    assert a.U == b.U
    assert (a.W, a.Wc) == (b.W, b.Wc) == (approx(W_WIRE), approx(W_WIRE))
    assert a.counters()["n_stale_resets"] == 0


def test_wire_gap_beyond_unwrap_horizon_resets_instead_of_computing_a_rate():
    f = hpcc(u_init=0.2)
    now = 50_000_000
    f.new_ack_wire(now, 1000, 10_000, 1, wire((27, 1_000_000, 100, 250)))
    # 2^23 + 1 ns of local time later (the ts field is unambiguous only for
    # half its 2^24 ns range): start over, only record.
    gap = HALF_TS + 1
    assert f.new_ack_wire(now + gap, 11_000, 20_000, 1,
                          wire((27, (1_000_000 + gap) % TS_WRAP, 600, 250))) is False
    assert f.counters()["n_stale_resets"] == 1
    assert state(f) == (W_INIT, W_INIT, 0.2, 0)
    assert f.last_update_seq == 20_000
    # the next ACK measures against the fresh record: U_WIRE as above, from u_init 0.2
    # with tau = T: U = 0 x 0.2 + 1 x 1.16
    ts2 = (1_000_000 + gap + 10_240) % TS_WRAP
    assert f.new_ack_wire(now + gap + 10_240, 21_000, 30_000, 1, wire((27, ts2, 1600, 250))) is True
    assert f.U == approx(U_WIRE)
    assert f.counters()["n_stale_resets"] == 1


def test_wire_gap_just_inside_the_horizon_still_unwraps():
    f = hpcc()
    now = 50_000_000
    f.new_ack_wire(now, 1000, 10_000, 1, wire((27, 1_000_000, 100, 0)))
    gap = HALF_TS - 1
    # 1 000 000 units x 128 B over 8388607 ns = 15.2587... B/ns -> u' = 1.2207..., tau = T
    tx1 = 100 + 1_000_000
    assert f.new_ack_wire(now + gap, 11_000, 20_000, 1,
                          wire((27, (1_000_000 + gap) % TS_WRAP, tx1 % TX_WRAP, 0))) is True
    assert f.counters()["n_stale_resets"] == 0
    assert f.U == approx(1_000_000 * 128 / gap / 12.5)


def test_wire_horizon_shrinks_with_a_fast_hop():
    # txBytes wraps after 2^20 x 128 B = 134217728 B; at 400 Gbit/s = 50 B/ns
    # that is 2684354.56 ns, shorter than 2^23 ns: a 3 ms gap resets on a
    # 400 Gbit/s path (code 29) but not on a 100 Gbit/s one (10.7 ms, code 27).
    for code, resets in ((29, 1), (27, 0)):
        f = hpcc()
        f.new_ack_wire(50_000_000, 1000, 10_000, 1, wire((code, 1_000_000, 0, 0)))
        f.new_ack_wire(53_000_000, 11_000, 20_000, 1, wire((code, 4_000_000, 1000, 0)))
        assert f.counters()["n_stale_resets"] == resets, code


def test_wire_acks_without_hops_do_not_extend_the_unwrap_horizon():
    f = hpcc()
    now = 50_000_000
    f.new_ack_wire(now, 1000, 10_000, 1, wire((27, 1_000_000, 0, 0)))
    for k in range(1, 5):                        # INT-less ACKs every 5 ms
        f.new_ack_wire(now + k * 5_000_000, 1000 + k, 10_000, 1, b"")
    # 20 ms after the last record (> 2^23 ns): must start over.  Unwrapped modulo
    # 2^24 the ts delta would read 20000000 - 16777216 = 3222784 ns.
    gap = 20_000_000
    f.new_ack_wire(now + gap, 11_000, 20_000, 1,
                   wire((27, (1_000_000 + gap) % TS_WRAP, 100_000, 0)))
    assert f.counters()["n_stale_resets"] == 1
    assert state(f) == (W_INIT, W_INIT, 0.0, 0)


# ---------------------------------------------------------------------------
# Rx-HPCC: NewINT ([HPCC++2020] section 6.2, lines 28-34) and N adaptation
# ([HPCC++2022] section 6.3.2)
# ---------------------------------------------------------------------------

def test_newint_notifies_only_strictly_after_T():
    f = rxhpcc(w_max_bytes=1_000_000)
    assert f.new_int(1_000_000, [hop(1_000_000)]) is False        # records, lastUpdateTime
    assert f.last_update_time == 1_000_000
    # now = lastUpdateTime + T exactly: line 29 is false -> line 34, Wc kept.
    # u' = 62500/10000/12.5 = 0.5, tau = T -> U = 0.5 < eta: W = Wc + 80 = 125080
    assert f.new_int(1_010_000, [hop(1_010_000, 0, 62_500)]) is False
    assert (f.W, f.Wc, f.inc_stage) == (approx(125_080.0), W_INIT, 0)
    assert f.last_update_time == 1_000_000
    # 1 ns later: line 29 true -> line 30 (Wc = W), line 32.  tau = 1 ns,
    # 12 B / 1 ns -> u' = 0.96: U = (1 - 1e-4) x 0.5 + 1e-4 x 0.96 = 0.500046
    assert f.new_int(1_010_001, [hop(1_010_001, 0, 62_512)]) is True
    assert f.U == approx(0.500046)
    assert (f.W, f.Wc, f.inc_stage) == (approx(125_080.0), approx(125_080.0), 1)
    assert f.last_update_time == 1_010_001
    # again exactly T later: no notification; U = 0.5 -> W = 125080 + 80, Wc kept
    assert f.new_int(1_020_001, [hop(1_020_001, 0, 125_012)]) is False
    assert (f.W, f.Wc) == (approx(125_160.0), approx(125_080.0))
    assert f.new_int(1_020_002, [hop(1_020_002, 0, 125_024)]) is True
    assert (f.W, f.Wc, f.inc_stage) == (approx(125_160.0), approx(125_160.0), 2)
    assert f.counters()["n_notify"] == 2


def _two_hop_rx(f: RxHpcc, last_hop_loaded: bool, q: int = 0) -> None:
    f.new_int(1_000_000, [hop(1_000_000, q, 0), hop(2_000_000, q, 0)])
    light, heavy = 62_500, 100_000    # over 10000 ns: 6.25 and 10 B/ns -> 0.5 and 0.8
    tx = (light, heavy) if last_hop_loaded else (heavy, light)
    assert f.new_int(1_010_001, [hop(1_010_000, q, tx[0]), hop(2_010_000, q, tx[1])]) is True


def test_rx_w_ai_adapts_to_N_when_the_last_hop_is_the_bottleneck():
    f = rxhpcc(w_max_bytes=1_000_000)
    f.set_active_flows(10)
    _two_hop_rx(f, last_hop_loaded=True)
    # U = 0.8 < eta (last hop, tau = T); W_AI = 125000 x (1 - 0.95) / 10 = 625;
    # line 17: W = 125000 + 625
    assert f.U == approx(0.8)
    assert f.w_ai == approx(625.0)
    assert (f.W, f.Wc) == (approx(125_625.0), approx(125_625.0))


def test_rx_w_ai_configured_when_another_hop_is_the_bottleneck():
    f = rxhpcc(w_max_bytes=1_000_000)
    f.set_active_flows(10)
    _two_hop_rx(f, last_hop_loaded=False)
    assert f.U == approx(0.8)
    assert f.w_ai == W_AI
    assert (f.W, f.Wc) == (approx(125_080.0), approx(125_080.0))


def test_rx_w_ai_configured_without_N_and_restored_by_zero():
    f = rxhpcc(w_max_bytes=1_000_000)
    _two_hop_rx(f, last_hop_loaded=True)            # N unknown
    assert (f.w_ai, f.W) == (W_AI, approx(125_080.0))
    g = rxhpcc(w_max_bytes=1_000_000)
    g.set_active_flows(10)
    g.set_active_flows(0)
    _two_hop_rx(g, last_hop_loaded=True)
    assert (g.w_ai, g.W) == (W_AI, approx(125_080.0))


def test_rx_w_ai_from_N_in_the_multiplicative_step():
    f = rxhpcc()
    f.set_active_flows(10)
    # q = 112500 in both records at both hops: +0.9 each; last hop 0.8 + 0.9 = 1.7,
    # first 0.5 + 0.9 = 1.4 -> U = 1.7 >= eta;
    # line 13: W = 125000 / (1.7/0.95) + 625 = 69852.94... + 625
    _two_hop_rx(f, last_hop_loaded=True, q=112_500)
    assert f.U == approx(1.7)
    assert f.W == approx(125_000 * 0.95 / 1.7 + 625)


# ---------------------------------------------------------------------------
# Parameters (section 3.2, 3.3, 5.1; docs/algorithms.md)
# ---------------------------------------------------------------------------

def test_parameter_defaults():
    f = Hpcc()
    # T = 13000 ns, 100 Gbit/s: W_init = 1e11 x 13000 / 8e9 = 162500 B
    assert f.T == 13_000
    assert (f.w_init, f.w_min, f.w_max) == (162_500.0, 1000.0, 162_500.0)
    # W_AI = W_init (1 - eta) / N = 162500 x 0.05 / 100 = 81.25 (section 3.3)
    assert f.w_ai == approx(81.25)
    assert (f.W, f.Wc, f.U, f.inc_stage) == (162_500.0, 162_500.0, 0.0, 0)
    assert f._s.eta == 0.95 and f._s.max_stage == 5
    # R = W / T = 162500 B / 13000 ns = 12.5 B/ns = 1e11 bit/s (line 27)
    assert f.rate_bps == approx(1e11)
    # 25 Gbit/s, T = 10000: W_init = 25e9 x 1e4 / 8e9 = 31250; w_min = mtu 1500;
    # W_AI = 31250 x 0.05 / 50 = 31.25
    g = Hpcc(line_rate_bps=25 * GBPS, T_ns=10_000, mtu_bytes=1500, N_flows=50)
    assert (g.w_init, g.w_min, g.w_max) == (31_250.0, 1500.0, 31_250.0)
    assert g.w_ai == approx(31.25)
    # an explicit W_init drives w_max and W_AI: 50000 x 0.05 / 100 = 25
    h = Hpcc(w_init_bytes=50_000)
    assert (h.W, h.w_max) == (50_000.0, 50_000.0)
    assert h.w_ai == approx(25.0)
    assert RxHpcc().w_ai == approx(81.25)


@pytest.mark.parametrize("params,key", [
    ({"eta": 1.5}, "eta"),
    ({"eta": 0}, "eta"),
    ({"T_ns": 0}, "T_ns"),
    ({"T_ns": -5}, "T_ns"),
    ({"bogus": 1}, "bogus"),
    ({"mtu_bytes": 0}, "mtu_bytes"),
    ({"N_flows": 0}, "N_flows"),
    ({"w_min_bytes": 200_000}, "w_min_bytes"),    # above w_max = 162500
    ({"u_init": -0.1}, "u_init"),
    ({"T_ns": float("nan")}, "T_ns"),
])
@pytest.mark.parametrize("cls", [Hpcc, RxHpcc])
def test_bad_parameters_raise_param_error(cls, params, key):
    with pytest.raises(ParamError) as e:
        cls(**params)
    assert e.value.key == key


# ---------------------------------------------------------------------------
# Batch API
# ---------------------------------------------------------------------------

def _trace() -> list[dict]:
    evs = []
    tx = [0, 0]
    for k in range(12):
        tx[0] += 40_000 + 7_000 * (k % 3)
        tx[1] += 60_000
        evs.append({"seq": 1000 + 9000 * k, "snd_nxt": 20_000 + 9000 * k,
                    "now_ns": 1_000_000 + 6000 * k,
                    "path_id": 1 if k < 8 else 2, "active_flows": 4 if k == 3 else 0,
                    "hops": [hop(1_000_000 + 6000 * k, 1000 * (k % 4), tx[0]),
                             hop(2_000_000 + 6000 * k, 30_000, tx[1], 40 * GBPS)]})
    return evs


def test_batch_run_equals_one_by_one_new_ack():
    evs = _trace()
    batch = hpcc(w_max_bytes=400_000).run(Hpcc.events(evs))
    f = hpcc(w_max_bytes=400_000)
    for e, out in zip(evs, batch, strict=True):
        f.new_ack(e["seq"], e["snd_nxt"], e["hops"], path_id=e["path_id"])
        assert out == {"W_bytes": f.W, "Wc_bytes": f.Wc, "U": f.U,
                       "rate_bps": f.rate_bps, "inc_stage": f.inc_stage}
    assert f.counters()["n_path_resets"] == 1


def test_rx_batch_run_equals_one_by_one_new_int():
    evs = _trace()
    batch = rxhpcc(w_max_bytes=400_000).run(RxHpcc.events(evs))
    f = rxhpcc(w_max_bytes=400_000)
    for e, out in zip(evs, batch, strict=True):
        if e["active_flows"]:
            f.set_active_flows(e["active_flows"])
        notify = f.new_int(e["now_ns"], e["hops"], path_id=e["path_id"])
        assert out == {"W_bytes": f.W, "Wc_bytes": f.Wc, "U": f.U, "notify": notify}
    assert any(o["notify"] for o in batch) and not all(o["notify"] for o in batch)
