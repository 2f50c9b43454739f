"""The research switch of the HPCC core's NewAck ([HPCC] section 5.4, Figure
13: per-ACK against per-RTT reaction), differential-tested against the
normal path (Algorithm 1) on the same random INT sequences.

Why these properties: U, L, W^c and incStage depend only on the INT and on
W^c's own updates (lines 1-10, 12-19), never on W; the reaction switch only
decides what W is between updates.  So:

- per RTT (the reference window mechanism off): on every ACK, U, W^c,
  incStage, lastUpdateSeq, L and the return value equal the normal path's,
  and W equals W^c (it changes once per RTT only), where the normal path's W
  moves on every ACK (line 26) and differs from W^c;
- per ACK: identical to the normal path fed ACK numbers that always exceed
  lastUpdateSeq (every ACK takes line 23);
- the default is the normal path (reaction 0), and an unknown value is refused.
"""
from __future__ import annotations

import random

import pytest

from hpccd.core import cc

B = 100_000_000_000
T_NS = 13_000
HPCC, PER_RTT, PER_ACK = 0, 1, 2


def _trace(seed: int, n: int = 3000) -> list[dict]:
    """ACKs of a flow through 2-3 hops: a queue that builds and drains,
    ACK numbers advancing one MTU per ACK, snd_nxt a window ahead."""
    rnd = random.Random(seed)
    hops = rnd.choice([2, 3])
    ts = [0] * hops
    tx = [0] * hops
    q = [0] * hops
    seq, snd_nxt, out = 0, 150_000, []
    for i in range(n):
        for h in range(hops):
            dt = rnd.randint(50, 400)
            ts[h] += dt
            tx[h] += int(B / 8e9 * dt * rnd.uniform(0.7, 1.05))
            q[h] = max(0, q[h] + rnd.randint(-3000, 3500 if i < n // 2 else 2000))
        seq += 1000
        snd_nxt += rnd.choice([0, 1000, 2000])
        out.append({"seq": seq, "snd_nxt": max(snd_nxt, seq),
                    "hops": [{"ts_ns": ts[h], "qlen_bytes": q[h], "tx_bytes": tx[h],
                              "bw_bps": B} for h in range(hops)]})
    return out


def _state(f: cc.Hpcc) -> tuple:
    s = f._s
    return (f.U, f.Wc, f.inc_stage, f.last_update_seq,
            tuple((s.L[i].ts_ns, s.L[i].tx_bytes, s.L[i].qlen_bytes) for i in range(s.n_hops)))


@pytest.mark.parametrize("seed", range(6))
def test_per_rtt_equals_normal_but_w_moves_only_with_wc(seed):
    normal = cc.Hpcc(T_ns=T_NS, line_rate_bps=B)
    per_rtt = cc.Hpcc(T_ns=T_NS, line_rate_bps=B, reaction=PER_RTT)
    moved_between = 0
    updates = 0
    w_prev = per_rtt.W
    for e in _trace(seed):
        a = normal.new_ack(e["seq"], e["snd_nxt"], e["hops"])
        b = per_rtt.new_ack(e["seq"], e["snd_nxt"], e["hops"])
        assert a == b
        assert _state(normal) == _state(per_rtt)
        assert per_rtt.W == per_rtt.Wc
        if b:
            updates += 1
        else:
            assert per_rtt.W == w_prev          # no reaction between updates
            moved_between += normal.W != normal.Wc
        w_prev = per_rtt.W
    # the trace exercises both: updates once per RTT, and ACKs in between
    # on which the normal path reacts (W != W^c) and per-RTT does not
    assert 10 < updates < 3000 - 100
    assert moved_between > 100


@pytest.mark.parametrize("seed", range(6))
def test_per_ack_equals_normal_with_every_ack_a_new_rtt(seed):
    normal = cc.Hpcc(T_ns=T_NS, line_rate_bps=B)
    per_ack = cc.Hpcc(T_ns=T_NS, line_rate_bps=B, reaction=PER_ACK)
    for e in _trace(seed):
        a = normal.new_ack(normal.last_update_seq + 1, e["snd_nxt"], e["hops"])
        b = per_ack.new_ack(e["seq"], e["snd_nxt"], e["hops"])
        assert a == b
        assert _state(normal) == _state(per_ack) and normal.W == per_ack.W


def test_default_is_the_normal_path_and_unknown_values_are_refused():
    a = cc.Hpcc(T_ns=T_NS, line_rate_bps=B)
    b = cc.Hpcc(T_ns=T_NS, line_rate_bps=B, reaction=HPCC)
    for e in _trace(9, 500):
        assert a.new_ack(e["seq"], e["snd_nxt"], e["hops"]) == \
            b.new_ack(e["seq"], e["snd_nxt"], e["hops"])
        assert (a.W, _state(a)) == (b.W, _state(b))
    with pytest.raises(cc.ParamError, match="reaction"):
        cc.Hpcc(reaction=3)
