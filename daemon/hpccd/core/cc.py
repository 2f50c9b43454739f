"""Python face of the C congestion-control core (fastpath/cc, include/hpccd/cc.h).

One class per algorithm, one C struct per flow.  Parameters are given by the
names of the specifications (and of the replay trace format); unknown names
and bad values raise :class:`ParamError` naming the parameter.  Events go to
C in arrays: build them with ``*_events()`` and pass the array to ``run()``,
which makes one C call for the whole batch (the GIL is released by cffi).

Return codes of the C core become exceptions here and nowhere else.
"""
from __future__ import annotations

import math
import os
from typing import Any, Iterable, Mapping, Sequence

from .._cc import ffi, lib

__all__ = ["ParamError", "CCError", "Hpcc", "RxHpcc", "Dctcp", "Ldcp", "Dcqcn",
           "DcqcnNotificationPoint", "Timely", "dcqcn_ecn_for_rate", "dcqcn_mark_prob",
           "MAX_HOPS", "dctcp_g_shift"]

MAX_HOPS = lib.HPCCD_CC_MAX_HOPS


class ParamError(ValueError):
    """A parameter is unknown or has a value the algorithm refuses."""

    def __init__(self, key: str, message: str):
        super().__init__(f"parameter {key!r}: {message}")
        self.key = key


class CCError(RuntimeError):
    """The C core refused an event batch."""


def _check(rc: int, what: str) -> int:
    if rc < 0:
        raise CCError(f"{what}: {os.strerror(-rc)}")
    return rc


def _why(why) -> str:
    return ffi.string(why[0]).decode() if why[0] != ffi.NULL else "invalid"


def _as_int(key: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ParamError(key, f"must be an integer, got {v!r}")
    if isinstance(v, float):
        if not v.is_integer():
            raise ParamError(key, f"must be an integer, got {v!r}")
        v = int(v)
    if v < 0:
        raise ParamError(key, f"must not be negative, got {v}")
    return v


def _as_float(key: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ParamError(key, f"must be a number, got {v!r}")
    v = float(v)
    if not math.isfinite(v):
        raise ParamError(key, f"must be finite, got {v!r}")
    return v


def _fill(cstruct, spec: Mapping[str, type], params: Mapping[str, Any]) -> None:
    for key, value in params.items():
        kind = spec.get(key)
        if kind is None:
            raise ParamError(key, "unknown parameter (known: " + ", ".join(sorted(spec)) + ")")
        try:
            setattr(cstruct, key, _as_int(key, value) if kind is int else _as_float(key, value))
        except OverflowError:
            # cffi refuses an int wider than the C field (tests/fuzz found it
            # through the configuration file: mtu_bytes = 2^40).
            raise ParamError(key, f"{value} is out of range for this parameter") from None


def _hops_into(dst, key_ctx: str, hops: Sequence[Mapping[str, int]]) -> int:
    if len(hops) > MAX_HOPS:
        raise ParamError(key_ctx, f"{len(hops)} hops, at most {MAX_HOPS}")
    for i, h in enumerate(hops):
        r = dst[i]
        r.ts_ns = h["ts_ns"]
        r.tx_bytes = h["tx_bytes"]
        r.qlen_bytes = h["qlen_bytes"]
        r.bw_bps = h["bw_bps"]
    return len(hops)


class _Flow:
    algo: str = ""
    _struct: str = ""

    def __init__(self) -> None:
        self._s = ffi.new(f"struct {self._struct} *")

    def counters(self) -> dict[str, int]:
        return {name: getattr(self._s, name) for name in self._counter_names}

    _counter_names: tuple[str, ...] = ()


class Hpcc(_Flow):
    """Sender-based HPCC ([HPCC], Algorithm 1)."""

    algo = "hpcc"
    _struct = "hpccd_hpcc"
    _mode = lib.HPCCD_ALGO_HPCC
    PARAMS: dict[str, type] = {
        "T_ns": float, "eta": float, "max_stage": int, "N_flows": int,
        "w_ai_bytes": float, "line_rate_bps": int, "mtu_bytes": int,
        "w_init_bytes": float, "w_min_bytes": float, "w_max_bytes": float,
        "u_init": float, "reaction": int,
    }
    _counter_names = ("n_events", "n_wc_updates", "n_path_resets",
                      "n_stale_resets", "n_bad_hops", "n_notify")

    def __init__(self, **params: Any) -> None:
        super().__init__()
        p = ffi.new("struct hpccd_hpcc_params *")
        lib.hpccd_hpcc_params_default(p)
        _fill(p, self.PARAMS, params)
        why = ffi.new("const char **")
        if lib.hpccd_hpcc_init(self._s, p, self._mode, why) < 0:
            msg = _why(why)
            raise ParamError(msg.split()[0], msg)

    # -- state -------------------------------------------------------------
    W = property(lambda self: self._s.W)
    Wc = property(lambda self: self._s.Wc)
    U = property(lambda self: self._s.U)
    inc_stage = property(lambda self: self._s.inc_stage)
    w_ai = property(lambda self: self._s.w_ai)
    w_init = property(lambda self: self._s.w_init)
    w_min = property(lambda self: self._s.w_min)
    w_max = property(lambda self: self._s.w_max)
    T = property(lambda self: self._s.T)
    last_update_seq = property(lambda self: self._s.last_update_seq)

    @property
    def rate_bps(self) -> float:
        return lib.hpccd_hpcc_rate_bps(self._s)

    # -- one event (convenience for tests and interactive use) -------------
    def new_ack(self, seq: int, snd_nxt: int, hops: Sequence[Mapping[str, int]],
                path_id: int | None = None) -> bool:
        recs = ffi.new("struct hpccd_int_rec[]", max(1, len(hops)))
        n = _hops_into(recs, "hops", hops)
        rc = lib.hpccd_hpcc_new_ack(self._s, seq, snd_nxt, path_id or 0,
                                    path_id is not None, recs, n)
        return bool(_check(rc, "hpcc new_ack"))

    def new_ack_wire(self, now_ns: int, seq: int, snd_nxt: int, path_id: int,
                     wire_hops: bytes) -> bool:
        """NewAck from the hop records as they sit in the packet (8 bytes each)."""
        if len(wire_hops) % 8:
            raise ValueError(f"wire hops must be a multiple of 8 bytes, got {len(wire_hops)}")
        buf = ffi.from_buffer("struct hpccd_int_hop_wire[]", wire_hops)
        rc = lib.hpccd_hpcc_new_ack_wire(self._s, now_ns, seq, snd_nxt, path_id,
                                         buf, len(wire_hops) // 8)
        return bool(_check(rc, "hpcc new_ack_wire"))

    # -- batches -----------------------------------------------------------
    @staticmethod
    def events(evs: Iterable[Mapping[str, Any]]):
        """Build a C event array from dicts in the trace format's shape."""
        evs = list(evs)
        arr = ffi.new("struct hpccd_hpcc_event[]", len(evs))
        for i, e in enumerate(evs):
            c = arr[i]
            c.seq = e.get("seq", 0)
            c.snd_nxt = e.get("snd_nxt", 0)
            c.now_ns = e.get("now_ns", 0)
            if e.get("path_id") is not None:
                c.path_id = e["path_id"]
                c.path_id_valid = 1
            c.active_flows = e.get("active_flows", 0)
            c.n_hops = _hops_into(c.hops, f"event {i} hops", e["hops"])
        return arr

    def run(self, events) -> list[dict[str, Any]]:
        n = len(events)
        out = ffi.new("struct hpccd_hpcc_out[]", n)
        _check(lib.hpccd_hpcc_run(self._s, events, out, n), f"{self.algo} run")
        return [self._out(out[i]) for i in range(n)]

    def _out(self, o) -> dict[str, Any]:
        return {"W_bytes": o.W_bytes, "Wc_bytes": o.Wc_bytes, "U": o.U,
                "rate_bps": o.rate_bps, "inc_stage": o.inc_stage}


class RxHpcc(Hpcc):
    """Receiver-based HPCC ([HPCC++2020] section 6.2, [HPCC++2022] section 6.3.2)."""

    algo = "rx-hpcc"
    _mode = lib.HPCCD_ALGO_RXHPCC
    last_update_time = property(lambda self: self._s.last_update_time)

    def new_int(self, now_ns: int, hops: Sequence[Mapping[str, int]],
                path_id: int | None = None) -> bool:
        recs = ffi.new("struct hpccd_int_rec[]", max(1, len(hops)))
        n = _hops_into(recs, "hops", hops)
        rc = lib.hpccd_hpcc_new_int(self._s, now_ns, path_id or 0,
                                    path_id is not None, recs, n)
        return bool(_check(rc, "rx-hpcc new_int"))

    def set_active_flows(self, n: int) -> None:
        lib.hpccd_hpcc_set_active_flows(self._s, n)

    def _out(self, o) -> dict[str, Any]:
        return {"W_bytes": o.W_bytes, "Wc_bytes": o.Wc_bytes, "U": o.U,
                "notify": bool(o.flag)}


class Dctcp(_Flow):
    """DCTCP sender ([DCTCP] sections 3.3, 3.4 and 4)."""

    algo = "dctcp"
    _struct = "hpccd_dctcp"
    PARAMS: dict[str, type] = {"g": float, "mtu_bytes": int, "init_cwnd_bytes": int,
                               "ssthresh_bytes": int, "alpha_reset_on_loss": int}
    LOSS = {None: lib.HPCCD_LOSS_NONE, "fast": lib.HPCCD_LOSS_FAST, "rto": lib.HPCCD_LOSS_RTO}
    _counter_names = ("n_ece_reductions", "n_fast_losses", "n_rtos")

    def __init__(self, **params: Any) -> None:
        super().__init__()
        p = ffi.new("struct hpccd_dctcp_params *")
        lib.hpccd_dctcp_params_default(p)
        params = dict(params)
        if "g" in params:
            p.g_shift = dctcp_g_shift(params.pop("g"))
        _fill(p, self.PARAMS, params)
        why = ffi.new("const char **")
        if lib.hpccd_dctcp_init(self._s, p, why) < 0:
            msg = _why(why)
            raise ParamError(msg.split()[0], msg)

    cwnd = property(lambda self: self._s.cwnd)
    ssthresh = property(lambda self: self._s.ssthresh)
    alpha = property(lambda self: self._s.alpha / lib.HPCCD_CC_DCTCP_SCF)
    alpha_scaled = property(lambda self: self._s.alpha)
    window_end = property(lambda self: self._s.window_end)

    def on_ack(self, ack: int, snd_nxt: int, ece: bool, loss: str | None = None) -> None:
        lib.hpccd_dctcp_on_ack(self._s, ack, snd_nxt, bool(ece), self.LOSS[loss])

    @classmethod
    def events(cls, evs: Iterable[Mapping[str, Any]]):
        evs = list(evs)
        arr = ffi.new("struct hpccd_dctcp_event[]", len(evs))
        for i, e in enumerate(evs):
            arr[i].ack = e["ack"]
            arr[i].snd_nxt = e["snd_nxt"]
            arr[i].ece = 1 if e.get("ece") else 0
            arr[i].loss = cls.LOSS[e.get("loss")]
        return arr

    def run(self, events) -> list[dict[str, Any]]:
        n = len(events)
        out = ffi.new("struct hpccd_dctcp_out[]", n)
        _check(lib.hpccd_dctcp_run(self._s, events, out, n), "dctcp run")
        return [{"cwnd_bytes": out[i].cwnd_bytes, "alpha": out[i].alpha} for i in range(n)]


class DctcpReceiver:
    """The DCTCP.CE ACK state machine ([DCTCP] section 3.2)."""

    def __init__(self, m: int = 2) -> None:
        self._r = ffi.new("struct hpccd_dctcp_rx *")
        _check(lib.hpccd_dctcp_rx_init(self._r, m), "dctcp receiver: m must be >= 1")
        self._out = ffi.new("struct hpccd_ack_req[2]")

    ce = property(lambda self: bool(self._r.ce))

    def on_packet(self, ce: bool, ack_seq: int) -> list[tuple[int, bool]]:
        n = lib.hpccd_dctcp_rx_on_packet(self._r, bool(ce), ack_seq, self._out)
        return [(self._out[i].ack_seq, bool(self._out[i].ece)) for i in range(n)]

    def flush(self) -> list[tuple[int, bool]]:
        n = lib.hpccd_dctcp_rx_flush(self._r, self._out)
        return [(self._out[0].ack_seq, bool(self._out[0].ece))] if n else []


class Ldcp(_Flow):
    """LDCP sender ([LDCP] section 2)."""

    algo = "ldcp"
    _struct = "hpccd_ldcp"
    PARAMS: dict[str, type] = {"alpha": float, "beta": float, "gamma": float,
                               "eta": float, "iw_pkts": float, "mtu_bytes": int,
                               "line_rate_bps": int, "rtt_ns": int}
    STAGES = {lib.HPCCD_LDCP_FAST_START: "fast_start", lib.HPCCD_LDCP_STABLE: "stable"}
    _counter_names = ("n_marked", "n_unmarked", "n_losses")

    def __init__(self, **params: Any) -> None:
        super().__init__()
        p = ffi.new("struct hpccd_ldcp_params *")
        lib.hpccd_ldcp_params_default(p)
        _fill(p, self.PARAMS, params)
        why = ffi.new("const char **")
        if lib.hpccd_ldcp_init(self._s, p, why) < 0:
            msg = _why(why)
            raise ParamError(msg.split()[0], msg)

    cw = property(lambda self: self._s.cw)
    iw = property(lambda self: self._s.iw)
    stage = property(lambda self: self.STAGES[self._s.stage])
    next_tx_ns = property(lambda self: self._s.next_tx_ns)

    def on_ack(self, acked_pkts: int = 1, ece: bool = False, loss: bool = False,
               now_ns: int = 0) -> None:
        lib.hpccd_ldcp_on_ack(self._s, acked_pkts, bool(ece), bool(loss), now_ns)

    def tx_interval_ns(self, rtt_ns: int = 0) -> int:
        return lib.hpccd_ldcp_tx_interval_ns(self._s, rtt_ns)

    def pkt_ect(self, idx: int, msg_pkts: int = 0) -> bool:
        return bool(lib.hpccd_ldcp_pkt_ect(self._s, idx, msg_pkts))

    @staticmethod
    def events(evs: Iterable[Mapping[str, Any]]):
        evs = list(evs)
        arr = ffi.new("struct hpccd_ldcp_event[]", len(evs))
        for i, e in enumerate(evs):
            arr[i].acked_pkts = e["acked_pkts"]
            arr[i].ece = 1 if e.get("ece") else 0
            arr[i].loss = 1 if e.get("loss") else 0
            arr[i].now_ns = e.get("now_ns", 0)
        return arr

    def run(self, events) -> list[dict[str, Any]]:
        n = len(events)
        out = ffi.new("struct hpccd_ldcp_out[]", n)
        _check(lib.hpccd_ldcp_run(self._s, events, out, n), "ldcp run")
        return [{"cw_pkts": out[i].cw_pkts, "stage": self.STAGES[out[i].stage]}
                for i in range(n)]


class Dcqcn(_Flow):
    """DCQCN reaction point (Zhu et al., SIGCOMM 2015, section 3.1): rate
    control from CNPs, the alpha timer, and rate increase events of the
    timer and the byte counter.  Time is passed in (``now_ns``)."""

    algo = "dcqcn"
    _struct = "hpccd_dcqcn"
    PARAMS: dict[str, type] = {"g": float, "K_ns": int, "T_ns": int, "B_bytes": int,
                               "F": int, "R_AI_bps": float, "R_HAI_bps": float,
                               "line_rate_bps": int, "min_rate_bps": float,
                               "alpha_init": float}
    STAGES = {lib.HPCCD_DCQCN_LINE_RATE: "line_rate",
              lib.HPCCD_DCQCN_FAST_RECOVERY: "fast_recovery",
              lib.HPCCD_DCQCN_ADDITIVE: "additive", lib.HPCCD_DCQCN_HYPER: "hyper"}
    _counter_names = ("n_cnp", "n_alpha_decays", "n_fast_recovery", "n_additive", "n_hyper")

    def __init__(self, **params: Any) -> None:
        super().__init__()
        p = ffi.new("struct hpccd_dcqcn_params *")
        lib.hpccd_dcqcn_params_default(p)
        _fill(p, self.PARAMS, params)
        why = ffi.new("const char **")
        if lib.hpccd_dcqcn_init(self._s, p, why) < 0:
            msg = _why(why)
            raise ParamError(msg.split()[0], msg)

    rate_bps = property(lambda self: self._s.RC)          # current rate RC
    target_bps = property(lambda self: self._s.RT)        # target rate RT
    alpha = property(lambda self: self._s.alpha)
    stage = property(lambda self: self.STAGES[self._s.stage])
    t_count = property(lambda self: self._s.t_count)      # T of Figure 6
    bc_count = property(lambda self: self._s.bc_count)    # BC of Figure 6
    R_HAI = property(lambda self: self._s.R_HAI)

    @property
    def next_timer_ns(self) -> int:
        return lib.hpccd_dcqcn_next_timer_ns(self._s)

    def advance(self, now_ns: int) -> None:
        lib.hpccd_dcqcn_advance(self._s, now_ns)

    def on_cnp(self, now_ns: int) -> None:
        lib.hpccd_dcqcn_on_cnp(self._s, now_ns)

    def on_tx(self, nbytes: int, now_ns: int) -> None:
        lib.hpccd_dcqcn_on_tx(self._s, nbytes, now_ns)

    @staticmethod
    def events(evs: Iterable[Mapping[str, Any]]):
        evs = list(evs)
        arr = ffi.new("struct hpccd_dcqcn_event[]", len(evs))
        for i, e in enumerate(evs):
            arr[i].now_ns = e["now_ns"]
            arr[i].tx_bytes = e.get("tx_bytes", 0)
            arr[i].cnp = 1 if e.get("cnp") else 0
        return arr

    def run(self, events) -> list[dict[str, Any]]:
        n = len(events)
        out = ffi.new("struct hpccd_dcqcn_out[]", n)
        _check(lib.hpccd_dcqcn_run(self._s, events, out, n), "dcqcn run")
        return [{"rate_bps": out[i].rate_bps, "target_bps": out[i].target_bps,
                 "alpha": out[i].alpha, "stage": self.STAGES[out[i].stage]}
                for i in range(n)]


class DcqcnNotificationPoint:
    """DCQCN's receiver side (section 3.1, NP): at most one CNP per N per
    flow, sent when CE-marked packets arrive."""

    def __init__(self, N_ns: int = 50_000) -> None:
        self._np = ffi.new("struct hpccd_dcqcn_np *")
        N_ns = _as_int("N_ns", N_ns)
        if N_ns >= 1 << 64:
            raise ParamError("N_ns", f"{N_ns} is out of range for this parameter")
        lib.hpccd_dcqcn_np_init(self._np, N_ns)

    pending = property(lambda self: bool(self._np.pending))
    n_cnp = property(lambda self: self._np.n_cnp)
    n_ce = property(lambda self: self._np.n_ce)

    @property
    def next_ns(self) -> int:
        return lib.hpccd_dcqcn_np_next_ns(self._np)

    def on_packet(self, ce: bool, now_ns: int) -> bool:
        """True: send a CNP now."""
        return bool(lib.hpccd_dcqcn_np_on_packet(self._np, bool(ce), now_ns))

    def poll(self, now_ns: int) -> bool:
        """True: the pending CNP is due, send it now."""
        return bool(lib.hpccd_dcqcn_np_poll(self._np, now_ns))


def dcqcn_ecn_for_rate(bw_bps: int) -> dict[str, Any]:
    """The switch's marking thresholds for a link of `bw_bps` ([HPCC]
    section 5.1): {"kmin_bytes", "kmax_bytes", "pmax"}."""
    e = ffi.new("struct hpccd_dcqcn_ecn *")
    bw_bps = _as_int("bw_bps", bw_bps)
    if bw_bps >= 1 << 64:
        raise ParamError("bw_bps", f"{bw_bps} is out of range for this parameter")
    lib.hpccd_dcqcn_ecn_for_rate(bw_bps, e)
    return {"kmin_bytes": e.kmin_bytes, "kmax_bytes": e.kmax_bytes, "pmax": e.pmax}


def dcqcn_mark_prob(kmin_bytes: int, kmax_bytes: int, pmax: float, qlen_bytes: int) -> float:
    e = ffi.new("struct hpccd_dcqcn_ecn *", {"kmin_bytes": kmin_bytes,
                                            "kmax_bytes": kmax_bytes, "pmax": pmax})
    return lib.hpccd_dcqcn_mark_prob(e, qlen_bytes)


class Timely(_Flow):
    """TIMELY (Mittal et al., SIGCOMM 2015, section 4, Algorithm 1): the
    rate from RTT samples."""

    algo = "timely"
    _struct = "hpccd_timely"
    PARAMS: dict[str, type] = {"alpha": float, "beta": float, "delta_bps": float,
                               "T_low_ns": int, "T_high_ns": int, "min_rtt_ns": int,
                               "hai_N": int, "hai_after": int, "line_rate_bps": int,
                               "init_rate_bps": float, "min_rate_bps": float}
    _counter_names = ("n_samples", "n_low", "n_high", "n_increase", "n_hai", "n_decrease")

    def __init__(self, **params: Any) -> None:
        super().__init__()
        p = ffi.new("struct hpccd_timely_params *")
        lib.hpccd_timely_params_default(p)
        _fill(p, self.PARAMS, params)
        why = ffi.new("const char **")
        if lib.hpccd_timely_init(self._s, p, why) < 0:
            msg = _why(why)
            raise ParamError(msg.split()[0], msg)

    rate_bps = property(lambda self: self._s.rate)
    rtt_diff = property(lambda self: self._s.rtt_diff)
    gradient = property(lambda self: self._s.gradient)
    neg_streak = property(lambda self: self._s.neg_streak)
    hai = property(lambda self: bool(self._s.hai))

    def on_rtt(self, rtt_ns: int) -> None:
        lib.hpccd_timely_on_rtt(self._s, rtt_ns)

    @staticmethod
    def events(evs: Iterable[Mapping[str, Any]]):
        evs = list(evs)
        arr = ffi.new("struct hpccd_timely_event[]", len(evs))
        for i, e in enumerate(evs):
            arr[i].rtt_ns = e["rtt_ns"]
        return arr

    def run(self, events) -> list[dict[str, Any]]:
        n = len(events)
        out = ffi.new("struct hpccd_timely_out[]", n)
        _check(lib.hpccd_timely_run(self._s, events, out, n), "timely run")
        return [{"rate_bps": out[i].rate_bps, "rtt_diff_ns": out[i].rtt_diff_ns,
                 "gradient": out[i].gradient, "hai": bool(out[i].hai)} for i in range(n)]


def dctcp_g_shift(g: Any) -> int:
    """DCTCP's gain g = 2^-k as the core's shift k (struct hpccd_dctcp_params.g_shift):
    the one conversion, for the core's Python face and for the engine's flows alike."""
    g = _as_float("g", g)
    shift = -math.log2(g) if g > 0 else 0.0
    if not (shift.is_integer() and 1 <= shift <= 15):
        raise ParamError("g", f"must be 2^-k for 1 <= k <= 15 (scaled integer "
                              f"form, [DCTCP] section 4), got {g}")
    return int(shift)


# ---- INT hop wire word (include/hpccd/int_hop.h) ------------------------------

def speed_mbps(code: int) -> int:
    return lib.hpccd_int_speed_mbps(code)


def speed_code(bps: int) -> int:
    if not 0 <= bps < 1 << 64:
        return 0            # no such speed (and no uint64_t for cffi): unknown
    return lib.hpccd_int_speed_code(bps)


def hop_pack(speed_code: int, ts: int, tx_units: int, qlen_units: int) -> bytes:
    f = ffi.new("struct hpccd_int_fields *", {"speed_code": speed_code, "ts": ts,
                                              "tx_units": tx_units, "qlen_units": qlen_units})
    w = ffi.new("struct hpccd_int_hop_wire *")
    _check(lib.hpccd_int_hop_pack(f, w), "INT hop field out of range")
    return bytes(ffi.buffer(w))


def hop_unpack(raw: bytes) -> dict[str, int]:
    if len(raw) != 8:
        raise ValueError(f"an INT hop is 8 bytes, got {len(raw)}")
    w = ffi.from_buffer("struct hpccd_int_hop_wire[]", raw)
    f = ffi.new("struct hpccd_int_fields *")
    lib.hpccd_int_hop_unpack(w, f)
    return {"speed_code": f.speed_code, "ts": f.ts, "tx_units": f.tx_units,
            "qlen_units": f.qlen_units}
