"""How late the kernel's TCP pacing timer fires on this host
(ebpf/tcp_pacer.bpf.c; docs/tcp-side.md, "The pacer's lateness and the
trains").

A paced kernel TCP flow (TCP's internal pacing: this kernel has no fq
qdisc) sends one skb each time its pacing timer fires, and makes up at most
half a slot of the timer's lateness (tcp_update_skb_after_send).  So a
flow whose skbs are shorter on the wire than twice that lateness loses the
rest at every skb, whatever rate it is given: the lateness, measured here,
is what hpccd.tcp_side.trains sizes a flow's trains from.

    with PacerMeter() as m:
        before = m.read()
        ...                                  # paced flows run
        late = m.read() - before             # the expiries in between
        late.quantile_ns(0.75), late.mean_ns

The timers are the host's, whatever namespace a flow is in: one meter per
process serves every user (acquire() / release(): a lab's experiment runs a
TcpSide per sending host, and each program on the tracepoint costs every
hrtimer expiry of the machine a call).
"""
from __future__ import annotations

import dataclasses
import struct
import threading

from .._bpf import lib as _abi
from ..bpf import loader as bpf
from ..bpf.abi import check_format

OBJECT = "tcp_pacer"
PROG = "hpccd_pacer_expire"            # tp_btf/hrtimer_expire_entry
MAP = "hpccd_pacer_late"
PACE_FN = "tcp_pace_kick"              # the pacing timer's callback (net/ipv4/tcp_output.c)
BUCKET_NS = _abi.HPCCD_PACER_BUCKET_NS
BUCKETS = _abi.HPCCD_PACER_BUCKETS
HIST_FMT = check_format(f"=QQ{BUCKETS * 8}s", "hpccd_pacer_hist")
_BUCKETS = struct.Struct(f"={BUCKETS}Q")


class PacerError(RuntimeError):
    """The pacer's lateness cannot be measured here (no symbol, no BTF,
    the program refused); says which and why."""


def kernel_symbol(name: str, path: str = "/proc/kallsyms") -> int:
    """The address of the kernel text symbol `name`."""
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3 and parts[2] == name and parts[1] in "tT":
                    addr = int(parts[0], 16)
                    if not addr:
                        raise PacerError(f"{path}: {name} reads as 0: kernel.kptr_restrict "
                                         f"hides addresses from this process")
                    return addr
    except OSError as e:
        raise PacerError(f"{path}: {e}") from e
    raise PacerError(f"{path}: no symbol {name} (a kernel without TCP pacing?)")


@dataclasses.dataclass(frozen=True)
class Lateness:
    """Pacing-timer expiries by lateness: `n` of them, `sum_ns` summed,
    `buckets[i]` the ones i to i + 1 BUCKET_NS late (the last: that late or
    later)."""
    n: int
    sum_ns: int
    buckets: tuple[int, ...]

    def __add__(self, other: "Lateness") -> "Lateness":
        return Lateness(self.n + other.n, self.sum_ns + other.sum_ns,
                        tuple(a + b for a, b in zip(self.buckets, other.buckets)))

    @staticmethod
    def sum(items) -> "Lateness":
        total = EMPTY
        for x in items:
            total = total + x
        return total

    def __sub__(self, other: "Lateness") -> "Lateness":
        return Lateness(self.n - other.n, self.sum_ns - other.sum_ns,
                        tuple(a - b for a, b in zip(self.buckets, other.buckets)))

    @property
    def mean_ns(self) -> float:
        return self.sum_ns / self.n if self.n else float("nan")

    def quantile_ns(self, q: float) -> float:
        """The upper edge of the bucket the q-quantile falls in (an upper
        bound, by at most BUCKET_NS); nan without expiries."""
        if not 0 <= q <= 1:
            raise ValueError(f"quantile {q} not within [0, 1]")
        if not self.n:
            return float("nan")
        want, seen = q * self.n, 0
        for i, c in enumerate(self.buckets):
            seen += c
            if seen >= want and c:
                return float((i + 1) * BUCKET_NS)
        return float(len(self.buckets) * BUCKET_NS)

    def summary(self) -> dict:
        """n, mean and p50 / p75 / p90 / p99 in microseconds."""
        us = lambda v: round(v / 1e3, 1)                       # noqa: E731
        return {"n": self.n, "mean_us": us(self.mean_ns),
                **{f"p{int(q * 100)}_us": us(self.quantile_ns(q))
                   for q in (0.5, 0.75, 0.9, 0.99)}}


EMPTY = Lateness(0, 0, (0,) * BUCKETS)


class PacerMeter:
    """The lateness of every pacing-timer expiry of the host (all network
    namespaces: the timers are the CPU's) while it is open.  The program
    is attached by a link this process holds: it goes with the process,
    whatever ends it."""

    def __init__(self) -> None:
        fn = kernel_symbol(PACE_FN)
        try:
            self._obj = bpf.BpfObject.open(bpf.object_path(OBJECT), rodata={"pace_fn": fn})
        except bpf.BpfError as e:
            raise PacerError(f"the pacer's lateness: {e}") from e
        try:
            self._obj.load()
            self._obj.attach_program(PROG)
            self._map = self._obj.map(MAP)
        except bpf.BpfError as e:
            self._obj.close()
            raise PacerError(f"the pacer's lateness: {e}") from e

    def read(self) -> Lateness:
        """Every expiry since the meter opened, summed over the CPUs."""
        if self._obj is None:
            raise PacerError("the pacer's lateness: the meter is closed")
        n = s = 0
        b = [0] * BUCKETS
        for raw in self._map.lookup(0) or []:
            cn, cs, cb = struct.unpack(HIST_FMT, raw)
            n += cn
            s += cs
            for i, c in enumerate(_BUCKETS.unpack(cb)):
                b[i] += c
        return Lateness(n, s, tuple(b))

    def close(self) -> None:
        if self._obj is not None:
            self._obj.close()
            self._obj = None

    def __enter__(self) -> "PacerMeter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_PR_SET_TIMERSLACK = 29
_TIMER_ABSTIME = 1


def wake_floor(n: int = 2000, gap_ns: int = 30_000) -> dict:
    """How late a timer wakes a thread on this host: `n` absolute sleeps
    of `gap_ns` each (CLOCK_MONOTONIC, the thread's timer slack at 1 us as
    the probe engine's), each one's wake-up minus its deadline; n and
    p50 / p90 / p99 / max in microseconds.  Measured on an idle machine it
    is the floor under the pacing timer's lateness (PacerMeter) and the
    probe engine's: on the two-vCPU VM the timer interrupt's delivery to
    the nested guest (a real-time thread 13-35 us late, also with the idle
    loop polling), which no setting of a flow changes (docs/tcp-side.md,
    "The timer's floor")."""
    import ctypes
    import time

    if n < 1 or gap_ns < 1:
        raise ValueError(f"wake_floor: n {n} and gap_ns {gap_ns} must be positive")
    libc = ctypes.CDLL(None, use_errno=True)

    class _Ts(ctypes.Structure):
        _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]

    late: list[int] = []
    err: list[str] = []

    def run() -> None:
        libc.prctl(_PR_SET_TIMERSLACK, ctypes.c_ulong(1000), 0, 0, 0)
        for _ in range(n):
            due = time.monotonic_ns() + gap_ns
            ts = _Ts(due // 1_000_000_000, due % 1_000_000_000)
            rc = libc.clock_nanosleep(time.CLOCK_MONOTONIC, _TIMER_ABSTIME,
                                      ctypes.byref(ts), None)
            now = time.monotonic_ns()
            if rc not in (0, 4):                        # 4: EINTR, measured all the same
                err.append(f"clock_nanosleep: {rc}")
                return
            late.append(max(0, now - due))

    t = threading.Thread(target=run, name="hpccd-wake-floor")
    t.start()
    t.join()
    if err:
        raise OSError(err[0])
    late.sort()
    q = lambda p: round(late[min(len(late) - 1, int(p * len(late)))] / 1e3, 1)  # noqa: E731
    return {"n": len(late), "p50_us": q(0.5), "p90_us": q(0.9), "p99_us": q(0.99),
            "max_us": round(late[-1] / 1e3, 1)}


_shared: PacerMeter | None = None
_users = 0
_shared_lock = threading.Lock()


def acquire() -> PacerMeter:
    """The process's meter, opened by its first user; PacerError as
    PacerMeter().  Each acquire() needs its release()."""
    global _shared, _users
    with _shared_lock:
        if _shared is None:
            _shared = PacerMeter()
        _users += 1
        return _shared


def release(m: PacerMeter) -> None:
    """One user less of acquire()'s meter `m`; the last one closes it."""
    global _shared, _users
    with _shared_lock:
        if m is not _shared or _users <= 0:
            raise ValueError("release() of a meter acquire() did not give")
        _users -= 1
        if not _users:
            _shared.close()
            _shared = None
