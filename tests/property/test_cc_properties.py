"""Properties of the congestion-control core over random traces (hypothesis).

HPCC / Rx-HPCC: random hop counts (1-5, constant per trace), random port
speeds, monotone ts/tx counters with zero increments allowed, random queue
lengths, random seq/snd_nxt (or now_ns) progressions, occasional path_id
changes, random parameters.  After every event, with the state before the
event written Wc0, inc0, lastUpdateSeq0 ([HPCC] Algorithm 1):

  * every output is finite; w_min <= W <= w_max and w_min <= Wc <= w_max;
    U >= 0;
  * U is line 9's EWMA of the max u' over hops (lines 3-8) with the trace
    format's rules (a hop whose ts did not advance contributes nothing; with
    no u' > 0, tau is the first hop's ts delta);
  * ComputeWind (lines 11-20) from Wc0, never from the previous W: in the MI
    branch (U >= eta or inc0 >= maxStage) W = clamp(Wc0 / (U/eta) + W_AI),
    w_max when U = 0; otherwise W = clamp(Wc0 + W_AI);
  * W never grows past the reference window when the path is at or above
    target: U >= eta implies W <= Wc0 + W_AI.  (W itself may exceed the
    previous W -- a fast-react W computed from a higher U earlier in the RTT
    -- so "W_after <= W_before" is NOT an invariant; Wc0 / (U/eta) <= Wc0
    because eta/U <= 1, and the clamp cannot lift it above Wc0 + W_AI
    because w_min <= Wc0.  The floating-point version holds exactly: U/eta
    rounds to >= 1 when U >= eta, and rounding is monotone.)
  * Wc changes only on the ACK beyond lastUpdateSeq0 (lines 22-24), then
    Wc = W, incStage is 0 (MI) or inc0 + 1 (AI), lastUpdateSeq = snd_nxt;
    Rx-HPCC: only when now > lastUpdateTime + T (line 29, strictly);
  * the first event of a path only records (W, Wc, U, incStage unchanged);
  * the parameters left out take the derived defaults (W_init = B_NIC x T,
    w_min = mtu, w_max = W_init, W_AI = W_init (1 - eta) / N).

HPCC over the wire: the INT hop words (ts mod 2^24, txBytes mod 2^20 in
128 B, qLen in 80 B) through new_ack_wire() give bit for bit what new_ack()
gives on the unwrapped records, and a local gap at or beyond the unwrap
horizon starts over like a path change.

DCTCP: alpha in [0, 1], cwnd >= 1 MSS (= 1 MSS right after a timeout).
LDCP: gamma <= cw, cw finite, fast start never re-entered.
DCQCN (Zhu et al., SIGCOMM 2015, section 3.1): min_rate <= RC <= RT <= line
rate, alpha in [0, 1]; every CNP is Eq. (1) exactly on the state it finds;
the rates never fall between CNPs; RC and RT equal, bit for bit, those of
a model below that fires every timer expiry and byte-counter period one at
a time (the core catches up on many at once and skips the ones past its
fixed point); the notification point sends CNPs at least N apart, at once
for a mark outside the window, and never without a mark.
TIMELY (Mittal et al., SIGCOMM 2015, Algorithm 1): rate, rtt_diff and
gradient equal, bit for bit, a model of Algorithm 1 below; the rate stays
in [min_rate, line rate].
All six: replaying the same trace on fresh flows gives bit-identical
outputs, and the batch API gives exactly what the per-event calls gave.
"""
from __future__ import annotations

import math
import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpccd.core.cc import (Dcqcn, DcqcnNotificationPoint, Dctcp, Hpcc, Ldcp, RxHpcc, Timely,
                           hop_pack, speed_mbps)

PROFILE = settings(max_examples=200, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

G = 1_000_000_000
SPEEDS = [10 * G, 25 * G, 40 * G, 100 * G, 400 * G]
T_CHOICES = [1000, 9000, 10_000, 13_000, 50_000]


def bits(x: float) -> bytes:
    return struct.pack("<d", x)


def same_bits(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, float) or isinstance(y, float):
            if bits(float(x)) != bits(float(y)):
                return False
        elif x != y:
            return False
    return True


# ---------------------------------------------------------------------------
# HPCC / Rx-HPCC strategies
# ---------------------------------------------------------------------------

@st.composite
def hpcc_params(draw) -> dict:
    line = draw(st.sampled_from(SPEEDS))
    T = draw(st.sampled_from(T_CHOICES))
    w_init = line * T / 8e9
    p = {
        "T_ns": T,
        "eta": draw(st.floats(0.5, 1.0)),
        "max_stage": draw(st.integers(0, 8)),
        "w_ai_bytes": draw(st.one_of(st.just(0), st.floats(1, 2000))),   # 0: derived
        "line_rate_bps": line,
        "mtu_bytes": draw(st.integers(64, min(9000, int(w_init)))),
        "u_init": draw(st.floats(0, 3)),
    }
    if draw(st.booleans()):
        p["w_max_bytes"] = draw(st.floats(w_init, 4 * w_init))
    if draw(st.booleans()):
        p["N_flows"] = draw(st.integers(1, 500))
    return p


@st.composite
def int_traces(draw, rx: bool) -> list[dict]:
    n = draw(st.integers(1, 5))
    bws = draw(st.lists(st.sampled_from(SPEEDS * 4 + [0]), min_size=n, max_size=n))
    ts = draw(st.lists(st.integers(0, 1 << 40), min_size=n, max_size=n))
    tx = draw(st.lists(st.integers(0, 1 << 40), min_size=n, max_size=n))
    hop_step = st.tuples(
        st.one_of(st.just(0), st.integers(1, 30_000)),           # ts increment (0 allowed)
        st.one_of(st.just(0), st.integers(0, 1_000_000)),        # tx increment
        st.one_of(st.just(0), st.integers(0, 3_000_000)),        # qlen
    )
    ev_step = st.tuples(
        st.lists(hop_step, min_size=n, max_size=n),
        # seq / now increment; the T values of hpcc_params() make Rx-HPCC
        # land exactly on now = lastUpdateTime + T (line 29 is strict)
        st.one_of(st.sampled_from(T_CHOICES), st.integers(0, 30_000)),
        st.integers(0, 200_000),                                  # snd_nxt - seq
        st.integers(0, 12),                                       # 0: path change
        st.sampled_from([None] * 8 + [0, 1, 7, 100, 300]),        # Rx: active flows
        st.booleans(),                                            # omit path_id
        st.sampled_from([False] * 3 + [True]),                    # ACK all sent: seq = snd_nxt
    )
    steps = draw(st.lists(ev_step, min_size=1, max_size=40))
    seq = draw(st.integers(0, 1 << 32))
    snd_nxt = seq
    now = draw(st.integers(0, 1 << 40))
    path = 1
    evs = []
    for hops_s, inc, infl, pchange, nflows, omit, ack_all in steps:
        hops = []
        for i, (dts, dtx, q) in enumerate(hops_s):
            ts[i] += dts
            tx[i] += dtx
            hops.append({"ts_ns": ts[i], "tx_bytes": tx[i], "qlen_bytes": q, "bw_bps": bws[i]})
        if pchange == 0:
            path += 1
        e = {"hops": hops, "path_id": None if omit and pchange else path}
        if rx:
            now += inc
            e["now_ns"] = now
            if nflows is not None:
                e["active_flows"] = nflows
        else:
            # ack_all lands seq exactly on a past snd_nxt, i.e. on
            # lastUpdateSeq (line 22 is strict)
            seq = snd_nxt if ack_all else seq + inc
            snd_nxt = max(snd_nxt, seq + infl)
            e["seq"] = seq
            e["snd_nxt"] = snd_nxt
        evs.append(e)
    return evs


# ---------------------------------------------------------------------------
# The checks
# ---------------------------------------------------------------------------

def measure_candidates(U0: float, T: float, prev: list[dict], cur: list[dict]):
    """MeasureInflight (lines 1-10) in the trace format's units, straight from
    the equations.  Returns [(hop index or None, U)], one per hop whose u' is
    the maximum up to rounding (exact ties pick the first hop; near-ties are
    accepted either way)."""
    tau0 = cur[0]["ts_ns"] - prev[0]["ts_ns"] if cur[0]["ts_ns"] > prev[0]["ts_ns"] else 0
    ups = []
    for i, (a, l) in enumerate(zip(cur, prev)):
        if a["ts_ns"] <= l["ts_ns"] or a["bw_bps"] == 0:
            continue                                        # contributes nothing
        dts = a["ts_ns"] - l["ts_ns"]
        B = a["bw_bps"] / 8e9                               # bytes per ns
        rate = (a["tx_bytes"] - l["tx_bytes"]) / dts        # line 4
        up = min(a["qlen_bytes"], l["qlen_bytes"]) / (B * T) + rate / B   # line 5
        ups.append((i, up, dts))
    umax = max((up for _, up, _ in ups), default=0.0)
    if umax <= 0:
        picks = [(None, 0.0, tau0)]                         # idle: first hop's delta
    else:
        picks = [(i, up, d) for i, up, d in ups if up >= umax * (1 - 1e-12)]
    out = []
    for i, up, d in picks:
        tau = min(d, T)                                     # line 8
        out.append((i, (1 - tau / T) * U0 + tau / T * up))  # line 9
    return out


def clamp(f: Hpcc, w: float) -> float:
    return min(max(w, f.w_min), f.w_max)


def snapshot(f: Hpcc) -> dict:
    d = {"W": f.W, "Wc": f.Wc, "U": f.U, "inc": f.inc_stage, "w_ai": f.w_ai}
    d["lus"] = f.last_update_seq
    if isinstance(f, RxHpcc):
        d["lut"] = f.last_update_time
    return d


def check_event(f: Hpcc, e: dict, b: dict, flag: bool, reset: bool, prev_hops) -> None:
    W, Wc, U = f.W, f.Wc, f.U
    eta, T = f._s.eta, f.T
    rx = isinstance(f, RxHpcc)
    assert all(math.isfinite(x) for x in (W, Wc, U, f.rate_bps)), (W, Wc, U)
    assert f.w_min <= W <= f.w_max
    assert f.w_min <= Wc <= f.w_max
    assert U >= 0
    if reset:
        # first event of the path: only record L
        assert flag is False
        assert (W, Wc, U, f.inc_stage) == (b["W"], b["Wc"], b["U"], b["inc"])
        if rx:
            assert f.last_update_time == e["now_ns"]
        else:
            assert f.last_update_seq == e["snd_nxt"]
        return

    # MeasureInflight
    cands = measure_candidates(b["U"], T, prev_hops, e["hops"])
    assert any(math.isclose(U, c, rel_tol=1e-9, abs_tol=1e-12) for _, c in cands), (U, cands)
    bneck = f._s.bottleneck_hop
    if cands[0][0] is not None:
        assert bneck in [i for i, _ in cands]               # the most loaded hop

    # W_AI (Rx-HPCC: [HPCC++2022] section 6.3.2)
    w_ai = f.w_ai
    if rx and f._s.active_flows and bneck == len(e["hops"]) - 1:
        assert w_ai == f.w_init * (1 - eta) / f._s.active_flows
    else:
        assert w_ai == f._s.w_ai_cfg

    # Which update (line 22 / line 29)
    if rx:
        assert flag == (e["now_ns"] - b["lut"] > T)
    else:
        assert flag == (e["seq"] > b["lus"])

    # ComputeWind from Wc0
    mi = U >= eta or b["inc"] >= f._s.max_stage
    if mi:
        expect = f.w_max if U == 0 else clamp(f, b["Wc"] / (U / eta) + w_ai)   # line 13
    else:
        expect = clamp(f, b["Wc"] + w_ai)                                       # line 17
    assert W == expect, (W, expect, mi)
    if U >= eta:
        assert W <= b["Wc"] + w_ai

    if flag:
        assert Wc == W                                      # lines 15 / 19
        assert f.inc_stage == (0 if mi else b["inc"] + 1)
        if rx:
            assert f.last_update_time == e["now_ns"]        # line 32
        else:
            assert f.last_update_seq == e["snd_nxt"]        # line 24
    else:
        assert Wc == b["Wc"]
        assert f.inc_stage == b["inc"]
        if rx:
            assert f.last_update_time == b["lut"]
        else:
            assert f.last_update_seq == b["lus"]


def check_derived_params(f: Hpcc, p: dict) -> None:
    """Section 3.2 / 3.3 and docs/algorithms.md: W_init = line rate x T / 8e9
    (bytes), w_min = mtu, w_max = W_init, W_AI = W_init (1 - eta) / N with
    N = 100, each unless given; W = Wc = W_init and U = u_init at the start."""
    w_init = p["line_rate_bps"] * p["T_ns"] / 8e9
    assert f.w_init == w_init
    assert f.w_min == p["mtu_bytes"]
    assert f.w_max == p.get("w_max_bytes", w_init)
    n = p.get("N_flows", 100)
    assert f._s.w_ai_cfg == (p["w_ai_bytes"] or w_init * (1 - p["eta"]) / n)
    assert (f.W, f.Wc, f.U, f.inc_stage) == (w_init, w_init, p["u_init"], 0)


def drive(f: Hpcc, evs: list[dict]) -> list[dict]:
    """Feed events one by one, checking every step; return the outputs."""
    rx = isinstance(f, RxHpcc)
    path = None
    prev_hops = None
    outs = []
    for k, e in enumerate(evs):
        b = snapshot(f)
        pid = e["path_id"]
        reset = k == 0 or (pid is not None and pid != path)
        if reset:
            path = pid if pid is not None else 0
        if rx:
            if e.get("active_flows") is not None:
                f.set_active_flows(e["active_flows"])
            flag = f.new_int(e["now_ns"], e["hops"], path_id=pid)
        else:
            flag = f.new_ack(e["seq"], e["snd_nxt"], e["hops"], path_id=pid)
        check_event(f, e, b, flag, reset, prev_hops)
        prev_hops = e["hops"]
        if rx:
            outs.append({"W_bytes": f.W, "Wc_bytes": f.Wc, "U": f.U, "notify": flag})
        else:
            outs.append({"W_bytes": f.W, "Wc_bytes": f.Wc, "U": f.U,
                         "rate_bps": f.rate_bps, "inc_stage": f.inc_stage})
    return outs


def batch_events(cls, evs: list[dict]):
    # the batch event's active_flows = 0 means "unchanged"; None is the same here
    return cls.events([{**e, "active_flows": e.get("active_flows") or 0} for e in evs])


# ---------------------------------------------------------------------------
# HPCC / Rx-HPCC properties
# ---------------------------------------------------------------------------

@PROFILE
@given(params=hpcc_params(), evs=int_traces(rx=False))
def test_hpcc_invariants_hold_on_random_traces(params, evs):
    f = Hpcc(**params)
    check_derived_params(f, params)
    drive(f, evs)


@PROFILE
@given(params=hpcc_params(), evs=int_traces(rx=True))
def test_rxhpcc_invariants_hold_on_random_traces(params, evs):
    f = RxHpcc(**params)
    check_derived_params(f, params)
    drive(f, evs)


@PROFILE
@given(params=hpcc_params(), evs=int_traces(rx=False))
def test_hpcc_replay_is_deterministic_and_batch_equals_per_event(params, evs):
    one = Hpcc(**params).run(Hpcc.events(evs))
    two = Hpcc(**params).run(Hpcc.events(evs))
    per_event = drive(Hpcc(**params), evs)
    assert len(one) == len(two) == len(per_event) == len(evs)
    for x, y, z in zip(one, two, per_event):
        assert same_bits(x, y)
        assert same_bits(x, z)


@PROFILE
@given(params=hpcc_params(), evs=int_traces(rx=True))
def test_rxhpcc_replay_is_deterministic_and_batch_equals_per_event(params, evs):
    # active_flows = 0 in a batch event means "unchanged", so that the
    # per-event run matches, 0 (restore the configured W_AI) is not sent here
    evs = [{**e, "active_flows": e.get("active_flows") or None} for e in evs]
    one = RxHpcc(**params).run(batch_events(RxHpcc, evs))
    two = RxHpcc(**params).run(batch_events(RxHpcc, evs))
    per_event = drive(RxHpcc(**params), evs)
    for x, y, z in zip(one, two, per_event, strict=True):
        assert same_bits(x, y)
        assert same_bits(x, z)


# ---------------------------------------------------------------------------
# HPCC over the INT wire word: decoding + unwrapping is transparent
# ---------------------------------------------------------------------------

TS_WRAP, TX_WRAP, Q_MAX = 1 << 24, 1 << 20, (1 << 15) - 1


def unwrap_horizon(bws: list[int]) -> int:
    """Longest local gap over which the last record still unwraps: half the
    2^24 ns ts range, and the time the fastest known hop takes to send the
    2^20 x 128 B txBytes range (include/hpccd/int_hop.h; hpcc.c)."""
    h = TS_WRAP / 2
    for bw in bws:
        if bw:
            h = min(h, float(TX_WRAP * 128) * 8e9 / bw)
    return int(h)


@st.composite
def wire_traces(draw):
    n = draw(st.integers(1, 5))
    codes = draw(st.lists(st.sampled_from(list(range(1, 32)) * 3 + [0]), min_size=n, max_size=n))
    bws = [speed_mbps(c) * 1_000_000 for c in codes]
    h = unwrap_horizon(bws)
    ts = draw(st.lists(st.integers(0, 1 << 40), min_size=n, max_size=n))      # switch clocks, ns
    tx = draw(st.lists(st.integers(0, 1 << 40), min_size=n, max_size=n))      # 128 B units
    hop_step = st.tuples(st.integers(-1000, 1000),                            # clock jitter
                         st.one_of(st.just(0), st.integers(0, TX_WRAP - 1)),  # tx units sent
                         st.one_of(st.just(0), st.integers(0, Q_MAX)))        # qlen units
    steps = draw(st.lists(st.tuples(
        st.one_of(st.integers(0, 20_000), st.sampled_from(["h-1", "h", "far"])),
        st.lists(hop_step, min_size=n, max_size=n),
        st.integers(0, 30_000), st.integers(0, 200_000),
    ), min_size=1, max_size=30))
    now = draw(st.integers(0, 1 << 50))
    seq = snd_nxt = 0
    evs = []
    for gap, hops_s, dseq, infl in steps:
        gap = {"h-1": h - 1, "h": h, "far": 3 * TS_WRAP + 12_345}.get(gap, gap)
        now += gap
        recs, raw = [], b""
        for i, (jit, dtx, q) in enumerate(hops_s):
            ts[i] += max(0, gap + jit)      # < 2^24 whenever gap < h <= 2^23
            tx[i] += dtx                    # < 2^20 units: one wrap at most
            recs.append({"ts_ns": ts[i], "tx_bytes": tx[i] * 128, "qlen_bytes": q * 80,
                         "bw_bps": bws[i]})
            raw += hop_pack(codes[i], ts[i] % TS_WRAP, tx[i] % TX_WRAP, q)
        seq += dseq
        snd_nxt = max(snd_nxt, seq + infl)
        evs.append({"now": now, "gap": gap, "seq": seq, "snd_nxt": snd_nxt,
                    "hops": recs, "wire": raw})
    return h, evs


@PROFILE
@given(params=hpcc_params(), trace=wire_traces())
def test_hpcc_wire_path_equals_decoded_records(params, trace):
    # new_ack_wire() on the packed words gives bit for bit what new_ack()
    # gives on the unwrapped records; a local gap >= the unwrap horizon
    # starts over exactly like a path change (the ACK only records).
    h, evs = trace
    wire, dec = Hpcc(**params), Hpcc(**params)
    path, stale = 1, 0
    for k, e in enumerate(evs):
        if k and e["gap"] >= h:
            path += 1
            stale += 1
        fw = wire.new_ack_wire(e["now"], e["seq"], e["snd_nxt"], 1, e["wire"])
        fd = dec.new_ack(e["seq"], e["snd_nxt"], e["hops"], path_id=path)
        assert fw == fd
        for x, y in zip((wire.W, wire.Wc, wire.U), (dec.W, dec.Wc, dec.U)):
            assert bits(x) == bits(y)
        assert (wire.inc_stage, wire.last_update_seq) == (dec.inc_stage, dec.last_update_seq)
    assert wire.counters()["n_stale_resets"] == stale
    assert wire.counters()["n_path_resets"] == 0


# ---------------------------------------------------------------------------
# DCTCP
# ---------------------------------------------------------------------------

@st.composite
def dctcp_cases(draw):
    mss = draw(st.integers(100, 9000))
    params = {"g": 2.0 ** -draw(st.integers(1, 15)), "mtu_bytes": mss,
              "alpha_reset_on_loss": draw(st.integers(0, 1))}
    if draw(st.booleans()):
        params["init_cwnd_bytes"] = draw(st.integers(mss, 100 * mss))
    steps = draw(st.lists(st.tuples(
        st.integers(0, 4 * mss),                               # ack advance (0: duplicate)
        st.integers(0, 20 * mss),                              # new data sent
        st.booleans(),                                         # ECE
        st.sampled_from([None] * 10 + ["fast", "rto"]),        # loss signal
    ), min_size=1, max_size=80))
    ack, snd_nxt = 0, draw(st.integers(0, 10 * mss))
    evs = []
    for dack, dsnd, ece, loss in steps:
        snd_nxt += dsnd
        ack = min(ack + dack, snd_nxt)
        e = {"ack": ack, "snd_nxt": snd_nxt, "ece": int(ece)}
        if loss:
            e["loss"] = loss
        evs.append(e)
    return params, evs


@PROFILE
@given(case=dctcp_cases())
def test_dctcp_alpha_in_unit_interval_and_cwnd_at_least_one_mss(case):
    params, evs = case
    f = Dctcp(**params)
    mss = params["mtu_bytes"]
    outs = []
    for e in evs:
        f.on_ack(e["ack"], e["snd_nxt"], e["ece"], e.get("loss"))
        assert 0.0 <= f.alpha <= 1.0
        assert 0 <= f.alpha_scaled <= 65536
        assert f.cwnd >= mss
        if e.get("loss") == "rto":
            # [DCTCP] section 3.4: at most the loss window (1 segment) on a timeout
            assert f.cwnd == mss
        outs.append({"cwnd_bytes": f.cwnd, "alpha": f.alpha})
    one = Dctcp(**params).run(Dctcp.events(evs))
    two = Dctcp(**params).run(Dctcp.events(evs))
    for x, y, z in zip(one, two, outs, strict=True):
        assert same_bits(x, y)
        assert same_bits(x, z)


# ---------------------------------------------------------------------------
# LDCP
# ---------------------------------------------------------------------------

@st.composite
def ldcp_cases(draw):
    params = {
        "alpha": draw(st.floats(0.01, 1.0)),
        "beta": draw(st.floats(0.01, 1.0)),
        "gamma": draw(st.floats(0.01, 0.99)),
        "eta": draw(st.floats(0.01, 0.99)),
        "mtu_bytes": draw(st.integers(64, 9000)),
        "rtt_ns": draw(st.integers(1000, 100_000)),
        "line_rate_bps": draw(st.sampled_from(SPEEDS)),
    }
    if draw(st.booleans()):
        params["iw_pkts"] = draw(st.floats(1, 300))
    steps = draw(st.lists(st.tuples(
        st.integers(0, 8),                                     # packets acknowledged
        st.booleans(),                                         # ECE
        st.sampled_from([False] * 12 + [True]),                # loss
        st.one_of(st.just(0), st.integers(1, 50_000)),         # clock advance (0: no clock)
    ), min_size=1, max_size=120))
    now = 1
    evs = []
    for n, ece, loss, dt in steps:
        now += dt
        evs.append({"acked_pkts": n, "ece": int(ece), "loss": loss,
                    "now_ns": now if dt else 0})
    return params, evs


@PROFILE
@given(case=ldcp_cases())
def test_ldcp_cw_at_least_gamma_and_finite(case):
    params, evs = case
    f = Ldcp(**params)
    gamma = params["gamma"]
    stable_seen = False
    outs = []
    for e in evs:
        f.on_ack(e["acked_pkts"], e["ece"], e["loss"], e["now_ns"])
        assert math.isfinite(f.cw)
        assert f.cw >= gamma
        if stable_seen:
            assert f.stage == "stable"                         # fast start only once
        stable_seen = f.stage == "stable"
        outs.append({"cw_pkts": f.cw, "stage": f.stage})
    one = Ldcp(**params).run(Ldcp.events(evs))
    two = Ldcp(**params).run(Ldcp.events(evs))
    for x, y, z in zip(one, two, outs, strict=True):
        assert same_bits(x, y)
        assert same_bits(x, z)


# ---------------------------------------------------------------------------
# DCQCN
# ---------------------------------------------------------------------------

class DcqcnRates:
    """RC and RT of the reaction point with every timer expiry and byte
    counter period fired one at a time (section 3.1, Figure 6); alpha is
    taken from the flow under test at each CNP (Eq. (2)'s decay is checked
    by tests/unit/test_dcqcn.py)."""

    def __init__(self, p: dict):
        self.p = p
        self.RC = self.RT = float(p["line_rate_bps"])
        self.t = self.bc = self.bytes = 0
        self.next_rate = None

    def _inc(self):
        F, hi, lo = self.p["F"], max(self.t, self.bc), min(self.t, self.bc)
        if hi <= F:
            pass                                             # fast recovery, Eq. (3)
        elif lo > F:
            self.RT += (lo - F) * self.p["R_AI_bps"] * 10    # hyper, R_HAI = 10 R_AI
        else:
            self.RT += self.p["R_AI_bps"]                    # additive, Eq. (4)
        self.RT = min(self.RT, float(self.p["line_rate_bps"]))
        self.RC = (self.RT + self.RC) / 2

    def advance(self, now):
        while self.next_rate is not None and self.next_rate <= now:
            self.t += 1
            self._inc()
            self.next_rate += self.p["T_ns"]

    def on_tx(self, n, now):
        self.advance(now)
        if self.next_rate is None:
            return
        self.bytes += n
        while self.bytes >= self.p["B_bytes"]:
            self.bytes -= self.p["B_bytes"]
            self.bc += 1
            self._inc()

    def on_cnp(self, now, alpha):
        self.advance(now)
        self.RT = self.RC
        self.RC = max(self.p["min_rate_bps"], self.RC * (1.0 - alpha / 2))
        self.t = self.bc = self.bytes = 0
        self.next_rate = now + self.p["T_ns"]


@st.composite
def dcqcn_cases(draw):
    params = {
        "line_rate_bps": draw(st.sampled_from(SPEEDS)),
        "g": draw(st.sampled_from([1 / 256, 1 / 16, 0.5, 1.0])),
        "K_ns": draw(st.integers(1000, 100_000)),
        "T_ns": draw(st.integers(1000, 100_000)),
        "B_bytes": draw(st.integers(1000, 10_000_000)),
        "F": draw(st.integers(1, 8)),
        "R_AI_bps": draw(st.sampled_from([5e6, 40e6, 1e9])),
        "min_rate_bps": draw(st.sampled_from([1e6, 1e8])),
    }
    steps = draw(st.lists(st.tuples(
        st.integers(0, 300_000),                                # clock advance
        st.integers(0, 5 * params["B_bytes"]),                  # bytes sent
        st.sampled_from([False] * 3 + [True]),                  # CNP
        st.booleans(),                                          # CE mark at the receiver
    ), min_size=1, max_size=80))
    return params, steps


@PROFILE
@given(case=dcqcn_cases())
def test_dcqcn_eq1_bounds_and_the_one_at_a_time_model(case):
    params, steps = case
    f = Dcqcn(**params)
    m = DcqcnRates(params)
    np_ = DcqcnNotificationPoint(50_000)
    line, floor = float(params["line_rate_bps"]), params["min_rate_bps"]
    now, evs, outs, cnps = 0, [], [], []
    for dt, tx, cnp, ce in steps:
        now += dt
        rc0, rt0 = f.rate_bps, f.target_bps
        f.on_tx(tx, now)
        m.on_tx(tx, now)
        if cnp:
            a = f.alpha
            pre = f.rate_bps
            f.on_cnp(now)
            m.on_cnp(now, a)
            # Eq. (1) on the state the CNP finds
            assert f.target_bps == pre
            assert f.rate_bps == max(floor, pre * (1.0 - a / 2))
            assert f.alpha == (1 - params["g"]) * a + params["g"]
        else:
            assert f.rate_bps >= rc0 and f.target_bps >= rt0
        assert (f.rate_bps, f.target_bps) == (m.RC, m.RT)
        assert floor <= f.rate_bps <= f.target_bps <= line
        assert 0.0 <= f.alpha <= 1.0
        evs.append({"now_ns": now, "tx_bytes": tx, "cnp": int(cnp)})
        outs.append({"rate_bps": f.rate_bps, "target_bps": f.target_bps, "alpha": f.alpha,
                     "stage": f.stage})
        # the notification point on the same clock
        was_pending = np_.pending
        sent = np_.on_packet(ce, now)
        if sent:
            assert ce or was_pending                            # never without a mark
            assert not cnps or now - cnps[-1] >= 50_000         # at most one per N
            cnps.append(now)
        elif ce:
            assert cnps and now - cnps[-1] < 50_000 and np_.pending   # held for the window
    one = Dcqcn(**params).run(Dcqcn.events(evs))
    two = Dcqcn(**params).run(Dcqcn.events(evs))
    for x, y, z in zip(one, two, outs, strict=True):
        assert same_bits(x, y)
        assert same_bits(x, z)


# ---------------------------------------------------------------------------
# TIMELY
# ---------------------------------------------------------------------------

def timely_model(p: dict, rtts: list[int]) -> list[tuple[float, float, float]]:
    """Algorithm 1 of the TIMELY paper, per sample: (rate, rtt_diff, gradient)."""
    rate, prev, diff, streak, out = p["init_rate_bps"], None, 0.0, 0, []
    for r in rtts:
        new = float(r)
        nd = 0.0 if prev is None else new - prev
        prev = new
        diff = (1.0 - p["alpha"]) * diff + p["alpha"] * nd
        g = diff / float(p["min_rtt_ns"])
        streak = streak + 1 if g < 0 else 0
        if new < p["T_low_ns"]:
            rate = rate + p["delta_bps"]
        elif new > p["T_high_ns"]:
            rate = rate * (1.0 - p["beta"] * (1.0 - p["T_high_ns"] / new))
        elif g <= 0:
            n = p["hai_N"] if streak >= p["hai_after"] else 1
            rate = rate + float(n) * p["delta_bps"]
        else:
            rate = rate * (1.0 - p["beta"] * g)
        rate = min(float(p["line_rate_bps"]), max(p["min_rate_bps"], rate))
        out.append((rate, diff, g))
    return out


@st.composite
def timely_cases(draw):
    line = draw(st.sampled_from(SPEEDS))
    t_low = draw(st.integers(1000, 100_000))
    params = {
        "alpha": draw(st.sampled_from([0.875, 0.5, 0.1, 1.0])),
        "beta": draw(st.sampled_from([0.8, 0.5, 0.1])),
        "delta_bps": draw(st.sampled_from([10e6, 1e8, 1e9])),
        "T_low_ns": t_low,
        "T_high_ns": t_low + draw(st.integers(1, 1_000_000)),
        "min_rtt_ns": draw(st.integers(1000, 50_000)),
        "hai_N": draw(st.integers(1, 8)),
        "hai_after": draw(st.integers(1, 8)),
        "line_rate_bps": line,
        "min_rate_bps": 1e6,
        "init_rate_bps": draw(st.floats(1e6, float(line))),
    }
    rtts = draw(st.lists(st.integers(0, 2_000_000), min_size=1, max_size=120))
    return params, rtts


@PROFILE
@given(case=timely_cases())
def test_timely_is_algorithm_1_bit_for_bit(case):
    params, rtts = case
    f = Timely(**params)
    outs = []
    for r, want in zip(rtts, timely_model(params, rtts), strict=True):
        f.on_rtt(r)
        assert (f.rate_bps, f.rtt_diff, f.gradient) == want
        assert params["min_rate_bps"] <= f.rate_bps <= params["line_rate_bps"]
        outs.append({"rate_bps": f.rate_bps, "rtt_diff_ns": f.rtt_diff, "gradient": f.gradient,
                     "hai": f.hai})
    one = Timely(**params).run(Timely.events({"rtt_ns": r} for r in rtts))
    two = Timely(**params).run(Timely.events({"rtt_ns": r} for r in rtts))
    for x, y, z in zip(one, two, outs, strict=True):
        assert same_bits(x, y)
        assert same_bits(x, z)
