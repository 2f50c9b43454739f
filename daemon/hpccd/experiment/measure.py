"""What an experiment measures while it runs: the bottleneck queue (from
the INT switch's queue sampler), the CPU, and the statistics over them.

QueueRecorder reads QueueSample records of one switch port in a thread
(the sampler's ring holds about 7 s of one busy port, 1 s of eight; it is
read every 250 ms: each read is Python work on the cores the lab's hosts
share, so it is done seldom).  CpuMeter reads /proc/stat at start and stop.  The figures an
experiment reports come from these, and the check "the emulated queue was
the bottleneck, not the CPU" (docs/experiments.md) too:
:func:`bottleneck_verdict`.
"""
from __future__ import annotations

import math
import threading
from typing import Callable, Iterable, Mapping, NamedTuple, Sequence

__all__ = ["QueueRecorder", "CpuMeter", "percentile", "jain", "bottleneck_verdict",
           "Verdict", "rate_series"]


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation; nan if empty."""
    if not values:
        return math.nan
    v = sorted(values)
    k = (len(v) - 1) * q / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def jain(xs: Iterable[float]) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 when all equal."""
    xs = list(xs)
    sq = sum(x * x for x in xs)
    return (sum(xs) ** 2) / (len(xs) * sq) if sq > 0 else math.nan


def delivered_rate(points: Sequence[tuple[int, int]], a: int, b: int | None) -> float:
    """Bits/s delivered in (a, b] (CLOCK_MONOTONIC ns) from (t, bytes so
    far) points; nan without an interval."""
    if b is None or b <= a:
        return math.nan
    at_a = [n for t, n in points if t <= a]
    at_b = [n for t, n in points if t <= b]
    return ((at_b[-1] if at_b else 0) - (at_a[-1] if at_a else 0)) * 8 / ((b - a) / 1e9)


def rate_series(points: Sequence[tuple[int, int]], bin_ns: int) -> list[tuple[float, float]]:
    """(t_ns, cumulative bytes) points -> [(bin start s, bit/s)] per bin of
    `bin_ns`, from the first point; a bin without points gets 0."""
    if len(points) < 2:
        return []
    t0 = points[0][0]
    nbins = (points[-1][0] - t0) // bin_ns + 1
    last = [None] * nbins
    for t, b in points:
        last[(t - t0) // bin_ns] = b
    out, prev = [], points[0][1]
    for i, b in enumerate(last):
        if b is None:
            b = prev
        out.append((i * bin_ns / 1e9, (b - prev) * 8 * 1e9 / bin_ns))
        prev = b
    return out


def queue_over_time(samples: Sequence, link_bps: int, t_from: int, t_to: int,
                    sample_ns: int = 100_000, step_ns: int = 100_000) -> list[tuple[int, int]]:
    """The port's backlog on a uniform time grid (t_ns, bytes) over
    [t_from, t_to], reconstructed from its queue samples.

    The sampler writes a record when a packet arrives and no record of the
    port is younger than `sample_ns`: samples are what *arriving packets*
    see, so their percentiles weigh busy moments more than idle ones (an
    emptied queue gets no samples until traffic returns).  Over time:
    within `sample_ns` after a sample the backlog is taken as sampled;
    after that, until the next sample, no packet arrived (one would have
    been sampled), so the queue only drained, at the link rate."""
    out: list[tuple[int, int]] = []
    if not samples:
        return out
    ts = [x.ts_ns for x in samples]
    import bisect
    bytes_per_ns = link_bps / 8e9
    t = t_from
    while t <= t_to:
        i = bisect.bisect_right(ts, t) - 1
        if i < 0:
            q = 0
        else:
            s0 = samples[i]
            quiet = t - s0.ts_ns - sample_ns
            q = s0.backlog_bytes if quiet <= 0 else max(0, int(s0.backlog_bytes
                                                                - quiet * bytes_per_ns))
        out.append((t, q))
        t += step_ns
    return out


def port_rate(samples: Sequence, t_from: int, t_to: int, step_ns: int) -> list[tuple[int, float]]:
    """Bits/s a port sent per `step_ns` bin over [t_from, t_to], from its
    samples' byte counter (tx_bytes, linearly interpolated between
    samples; flat before the first and after the last)."""
    import bisect
    if not samples:
        return []
    ts = [x.ts_ns for x in samples]

    def tx_at(t: int) -> float:
        i = bisect.bisect_right(ts, t) - 1
        if i < 0:
            return samples[0].tx_bytes
        if i + 1 >= len(samples):
            return samples[-1].tx_bytes
        a, b = samples[i], samples[i + 1]
        return a.tx_bytes + (b.tx_bytes - a.tx_bytes) * (t - a.ts_ns) / (b.ts_ns - a.ts_ns)

    out = []
    t = t_from
    prev = tx_at(t)
    while t + step_ns <= t_to:
        cur = tx_at(t + step_ns)
        out.append((t, (cur - prev) * 8e9 / step_ns))
        prev = cur
        t += step_ns
    return out


class QueueRecorder:
    """Queue samples of `port` of `switch` of a lab's INT switch, recorded
    from start() to stop() (QueueSample tuples, in order)."""

    def __init__(self, lab, switch: str, port: int | Iterable[int] | None,
                 period_s: float = 0.25):
        """`port`: one port, several (filter by QueueSample.port), or None:
        every port of `switch`.  Only the ports recorded are sampled while
        recorders run (IntSwitch.want_samples)."""
        self.int_switch = lab.int_switch
        self.switch = switch
        self.sampler = lab.int_switch.sampler(switch)
        self.ports = (None if port is None
                      else frozenset([port] if isinstance(port, int) else port))
        self.period_s = period_s
        self.samples: list = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._release: Callable[[], None] | None = None

    def _take(self) -> None:
        self.samples.extend(s for s in self.sampler.read()
                            if self.ports is None or s.port in self.ports)

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self._take()

    def start(self) -> "QueueRecorder":
        self._release = self.int_switch.want_samples(self.switch, self.ports)
        self.sampler.read()                       # drop what came before
        self._thread = threading.Thread(target=self._run, daemon=True, name="queue-recorder")
        self._thread.start()
        return self

    def stop(self) -> list:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._take()
        if self._release is not None:
            self._release()
        return self.samples


def _cpu_times() -> list[tuple[int, int]]:
    """(busy, total) jiffies of all CPUs together, then of each CPU, from
    /proc/stat.  Time of niced processes counts as idle: the lab runs at
    nice 0 and niced background work (a compile at nice 19) yields to it."""
    out = []
    with open("/proc/stat") as f:
        for line in f:
            if not line.startswith("cpu"):
                break
            fields = [int(x) for x in line.split()[1:]]
            user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
            busy = user + system + irq + softirq + steal    # guest time is in user already
            out.append((busy, busy + nice + idle + iowait))
    return out


class CpuMeter:
    """Share of CPU time spent busy between start and stop: ``busy`` over
    all CPUs (what stop() returns) and ``busiest``, the busiest single CPU
    (a single-threaded pipeline -- one transport engine and the lab's
    forwarding in its softirq -- is bound by one core while the other
    idles)."""

    def start(self) -> "CpuMeter":
        self._t0 = _cpu_times()
        return self

    def stop(self) -> float:
        t1 = _cpu_times()
        shares = [(b1 - b0) / (n1 - n0) if n1 > n0 else math.nan
                  for (b0, n0), (b1, n1) in zip(self._t0, t1)]
        self.busy = shares[0]
        self.busiest = max(shares[1:], default=self.busy)
        return self.busy


class Verdict(NamedTuple):
    queue_bound: bool        # the emulated link, not the hosts, limited the traffic
    utilisation: float       # bytes the port sent over the window / what the link could
    tx_ratio: float          # the same, only while the port had a backlog
    backlogged_s: float      # time with a backlog over which tx_ratio was measured
    cpu_busy: float          # share of all CPUs busy over the run
    busiest_cpu: float       # the busiest single CPU's share
    text: str


def _paced_facts(paced: Mapping) -> str:
    """KernelCc.pacing's figures as the verdict states them."""
    out = f"the algorithm's rates asked for {paced['asked']:.0%} of it"
    lost = paced.get("pace_lost", math.nan)
    if not math.isnan(lost):
        out += f" and its flows sent {1 - lost:.0%} of that"
    held = paced.get("held") or {}
    if held:
        names = {"cwnd": "window", "pacing": "pacing", "timer": "late pacing timer",
                 "app": "application", "tsq": "small queues"}
        out += (" (its ACKs held by " + ", ".join(f"{names.get(k, k)} {v:.0%}"
                                                   for k, v in held.items()) + ")")
    late = paced.get("timer_late_us", math.nan)
    if not math.isnan(late):
        out += f", the kernel's pacing timers {late:.0f} us late on average"
    return out


def bottleneck_verdict(samples: Sequence, link_bps: int, cpu_busy: float,
                       t_from: int, t_to: int, min_backlog: int = 3000,
                       busiest_cpu: float | None = None,
                       paced: Mapping | None = None) -> Verdict:
    """Was the emulated link the bottleneck over [t_from, t_to], or were
    the hosts (the two shared CPUs)?

    - Over the intervals between consecutive samples that both saw at least
      `min_backlog` bytes queued, the port must have sent at >= 95% of its
      link rate (a backlogged port that sends less is starved of CPU, the
      emulation itself is failing);
    - and the port must have been >= 90% utilised over the window: a link
      left idle with the CPUs >= 90% busy means the senders could not keep
      up; with CPUs to spare, the algorithm itself left it idle (a result,
      not a fault of the lab) -- unless `paced` (where the algorithm's rates
      are enforced by somebody else's pacer: tcp-hpcc's kernel pacer,
      kernel_cc.KernelCc.pacing) says its rates asked for >= 90% of the
      link and a late pacing timer held the flows back at more of their
      ACKs than their window did: then the hosts' pacing, not the
      algorithm, left it idle."""
    win = [x for x in samples if t_from <= x.ts_ns <= t_to]
    sent = dur = 0
    for a, b in zip(win, win[1:]):
        if a.backlog_bytes >= min_backlog and b.backlog_bytes >= min_backlog:
            sent += b.tx_bytes - a.tx_bytes
            dur += b.ts_ns - a.ts_ns
    ratio = sent * 8 * 1e9 / dur / link_bps if dur >= 1_000_000 else math.nan
    util = port_rate(samples, t_from, t_to, t_to - t_from)
    util_r = util[0][1] / link_bps if util else math.nan
    emulation_ok = math.isnan(ratio) or ratio >= 0.95
    busy_link = util_r >= 0.9
    parts = [f"link {util_r:.0%} utilised"]
    if not math.isnan(ratio):
        parts.append(f"{ratio:.0%} of line rate while backlogged ({dur / 1e9:.3f} s)")
    busiest = cpu_busy if busiest_cpu is None else busiest_cpu
    asked = (paced or {}).get("asked", math.nan)
    held = (paced or {}).get("held") or {}
    if not math.isnan(asked):
        parts.append(_paced_facts(paced))
    parts.append(f"CPU {cpu_busy:.0%} busy, busiest core {busiest:.0%}")
    facts = ", ".join(parts)
    if not emulation_ok:
        text = f"CPU-bound: the emulated port could not send at line rate ({facts})"
    elif busy_link:
        text = f"link-bound, as intended ({facts})"
    elif cpu_busy >= 0.9 or busiest >= 0.9:
        text = f"CPU-bound: the hosts could not fill the link ({facts})"
    elif asked >= 0.9 and held.get("timer", 0) > held.get("cwnd", 0):
        text = f"pacer-bound: the hosts' pacing left the link idle, CPUs to spare ({facts})"
    else:
        text = f"the algorithm left the link idle, CPUs to spare ({facts})"
    return Verdict(emulation_ok and busy_link, util_r, ratio, dur / 1e9, cpu_busy, busiest, text)
