"""The largest GSO/TSO train a host's kernel TCP flows send: the interface's
gso_max_segs, capped while the TCP side runs (docs/tcp-side.md, "Trains").

A kernel TCP flow sends one skb per pacing slot, of min(cwnd / 2, cwnd -
in flight, the autosize goal, the device's gso_max_segs) segments.  The
autosize goal is the pacing rate's 1 ms plus gso_max_size >> (min RTT >>
tcp_tso_rtt_log), i.e. the whole gso_max_size for any flow whose minimum
RTT is below 512 us, whatever its pacing rate; and a struct_ops CC can raise
the floor (min_tso_segs) but not lower the goal, nor write sk_gso_max_segs or
sk_pacing_shift.  So below cwnd / 2 the train of a data-centre flow is the
device's cap, the one knob left, and it is per interface: every flow through
it sends trains of at most that many segments, whatever its CC (a socket
copies the device's cap when it sets up its route; set_gso_max_segs flushes
the routes so that the running flows copy it again).

Why HPCC needs it: a train lands in the bottleneck's queue whole (the sender
sends it at its NIC's rate), and the INT the probes carry sees the queue
and the port's byte counter move in steps of one train.  With the lab's
8-segment trains (11.6 KB, two BDPs of a 50 us, 1 Gbit/s path, 0.75 of
B x T at T = 125 us) one probe per RTT read U anywhere from 0.01 to 5 with
two flows on a link used at 0.7, and W swung between W_max and a sixth of
it; with 2-segment trains the same flows read U 0.8-1.1.

Why a train may need to be longer: the kernel's pacer sends one skb each
time its timer fires and makes up at most half a slot of the timer's
lateness (tcp_update_skb_after_send), so a flow paced at R in trains of S
bytes loses rate whenever the timer is later than S / (2 R).  A train at
least twice the pacer's measured lateness long on the bottleneck
(hpccd.tcp_side.pacer) loses none; measured on a two-vCPU VM whose pacer
fired 15.6 us late at the median, 19.7 us on average: one flow 0.54-0.78
of a 1 Gbit/s link in 2-segment trains (a 23 us slot), 0.90-0.95 in 4.

Why a train must stay short of the path's BDP: it lands in the bottleneck's
queue whole, its frames behind the first waiting there, so a train of S
segments queues S - 1 frames however well HPCC sets its window.  The
longest train within one BDP of the base RTT (bdp_segs) keeps the queue
within HPCC's target and makes up as much of the pacer's lateness as that
allows: on the lab's 1 Gbit/s path with a 26-43 us base RTT, 3-4 segments
(measured, one host's `iperf3 -C hpcc` flows: one / two / four 0.93 / 0.95 /
0.93 of the link in 4-segment trains at queue p99 0.03 / 1.14 / 1.19 BDP,
against 0.69 / 0.88 / 0.91 in 2).  Senders on several hosts queued more
with such trains (their trains land together), so the experiments keep
TRAIN_SHARE (docs/tcp-side.md, "Trains within one BDP").
"""
from __future__ import annotations

import contextlib
import math
from typing import Any, Iterator

from ..bpf import loader as bpf


# A train at most this share of B x T (B the bottleneck's rate, T the flows'
# T): one probe's U then moves by at most about this much with the queue and
# byte counter stepping by a train.  Measured in the lab (1 Gbit/s, T 125 us,
# B x T 15.6 KB): 2 segments (0.19) kept U within 0.8-1.1; 8 (0.75) let it
# swing 0.01-5.
TRAIN_SHARE = 1 / 8
# ... but never below this: 1-segment trains made the lab's senders CPU-bound
# (4 flows 0.41 of the link against 0.72 with 2).
TRAIN_MIN_SEGS = 2


# The pacer's lateness a train covers: this quantile of the measured
# lateness (hpccd.tcp_side.pacer.Lateness.quantile_ns).
PACER_LATE_Q = 0.75
# A train longer than this share of B x T, whatever the pacer: U then moves
# by about this much with each train (0.75 let it swing 0.01-5, above).
TRAIN_MAX_SHARE = 1 / 2


def pacer_segs(bottleneck_bps: float, late_ns: float, mss: int = 1448) -> int:
    """Segments a train needs so that its time on a link of
    `bottleneck_bps` is at least twice `late_ns`, the pacing timer's
    lateness: the kernel then makes all of it up."""
    if bottleneck_bps <= 0 or late_ns < 0 or mss <= 0:
        raise ValueError(f"pacer_segs needs a positive rate and mss and a lateness of "
                         f"at least 0 ({bottleneck_bps}, {late_ns}, {mss})")
    return math.ceil(2 * late_ns / 1e9 * bottleneck_bps / 8 / mss)


# Bytes a full segment takes on the wire beyond its payload: TCP with
# timestamps (32), IPv4 (20), Ethernet (14).
SEG_WIRE_OVERHEAD = 66


def bdp_segs(bottleneck_bps: float, base_rtt_ns: float, mss: int = 1448) -> int:
    """The longest train whose queue stays within one bandwidth-delay
    product of the path's base RTT `base_rtt_ns`: a train leaves its sender
    faster than the bottleneck drains it, so it lands there whole and the
    frames behind its first wait: 1 + (B x base RTT) // frame."""
    if bottleneck_bps <= 0 or base_rtt_ns <= 0 or mss <= 0:
        raise ValueError(f"bdp_segs needs a positive rate, base RTT and mss "
                         f"({bottleneck_bps}, {base_rtt_ns}, {mss})")
    return 1 + int(bottleneck_bps / 8 * base_rtt_ns / 1e9 // (mss + SEG_WIRE_OVERHEAD))


def segs_for(bottleneck_bps: float, T_ns: float, mss: int = 1448,
             pacer_late_ns: float = 0.0, base_rtt_ns: float = 0.0) -> int:
    """gso_max_segs for flows of T `T_ns` through a bottleneck of
    `bottleneck_bps`: trains of TRAIN_SHARE of B x T, at least
    TRAIN_MIN_SEGS segments.  Longer where the kernel's pacer asks for it,
    up to TRAIN_MAX_SHARE of B x T: with the pacer's lateness
    `pacer_late_ns` (PACER_LATE_Q of what hpccd.tcp_side.pacer measured),
    long enough for the pacer to make it up (pacer_segs); with the path's
    base RTT `base_rtt_ns` and no lateness measured, as long as the queue
    target allows.  With the base RTT, never longer than a train whose
    queue stays within one BDP of it (bdp_segs): the pacer's lateness then
    costs rate, not queue."""
    if bottleneck_bps <= 0 or T_ns <= 0 or mss <= 0 or pacer_late_ns < 0 or base_rtt_ns < 0:
        raise ValueError(f"segs_for needs a positive rate, T and mss and a lateness and "
                         f"base RTT of at least 0 ({bottleneck_bps}, {T_ns}, {mss}, "
                         f"{pacer_late_ns}, {base_rtt_ns})")
    bt = bottleneck_bps / 8 * T_ns / 1e9
    segs = int(bt * TRAIN_SHARE // mss)
    most = int(bt * TRAIN_MAX_SHARE // mss)
    cap = bdp_segs(bottleneck_bps, base_rtt_ns, mss) if base_rtt_ns else 0
    if pacer_late_ns:
        segs = max(segs, min(pacer_segs(bottleneck_bps, pacer_late_ns, mss), most))
    elif cap:
        segs = max(segs, min(cap, most))
    if cap:
        segs = min(segs, cap)
    return min(max(segs, TRAIN_MIN_SEGS), 65535)


# A decision from the pacer's lateness waits for at least this many expiries
# of the pacing timers since the last one (about 0.1 s of one flow's).
RETRAIN_EXPIRIES = 2000


# The queue the trains may build, judged from the responses' INT: this
# quantile of the largest queue each response found (the engine's
# qlen_hist, in frames) must stay within one BDP of the base RTT ...
QUEUE_Q = 0.99
# ... over at least this many responses since the last decision.
QUEUE_MIN_RESPONSES = 200


def queue_frames(hist: list[int], q: float = QUEUE_Q) -> int | None:
    """The bucket of quantile `q` of a queue histogram window (bucket k: a
    largest queue of k to k + 1 frames); None below QUEUE_MIN_RESPONSES."""
    n = sum(hist)
    if n < QUEUE_MIN_RESPONSES:
        return None
    need, seen = q * n, 0
    for k, c in enumerate(hist):
        seen += c
        if seen >= need:
            return k
    return len(hist) - 1


def segs_from_pacer(late, paths: list[tuple[float, float]], mss: int = 1448,
                    base_rtt_ns: float = 0.0, queue: list[int] | None = None,
                    current: int = 0) -> int | None:
    """segs_for from the pacing timers' lateness `late` (a
    hpccd.tcp_side.pacer.Lateness window) for flows whose paths are
    (slowest link's bits/s, T ns) `paths`: the slowest link of them and the
    least T (a train is at most half of B x T for every flow), within one
    BDP of `base_rtt_ns` (the least base RTT of the flows; 0: unknown);
    None with fewer than RETRAIN_EXPIRIES expiries or no path known.

    With the queue the flows' responses found since the last decision
    (`queue`, the engine's qlen_hist window) and the trains in force
    (`current` segments), the BDP bound is the measured one instead of the
    computed one when the pacer asks for more: one segment longer while
    the queue's QUEUE_Q stays within one BDP (its bucket's upper edge), one
    shorter while it is over (its lower edge past the BDP), never shorter
    than the computed bound nor longer than what the pacer asks for (up to
    half of B x T).  The computed bound assumes every frame of a train waits
    behind the first; where the bottleneck drains a train while it arrives
    (a sender's link not much faster than the bottleneck, a port with a
    burst allowance) the queue says how long a train may be.  The queue
    judged is the one beyond the train in service: a probe leaves right
    behind its flow's data, so it finds its own flow's last train ahead of
    it (up to `current` frames: the lab queues a train as one packet, a NIC
    that sends it frame by frame leaves at most one frame less), a queue a
    data packet arriving a slot later does not meet (docs/tcp-side.md,
    "Trains from the queue the probes find")."""
    paths = [(b, t) for b, t in paths if b > 0 and t > 0]
    if late.n < RETRAIN_EXPIRIES or not paths:
        return None
    bps, T = min(b for b, _ in paths), min(t for _, t in paths)
    late_ns = late.quantile_ns(PACER_LATE_Q)
    rule = segs_for(bps, T, mss, pacer_late_ns=late_ns, base_rtt_ns=base_rtt_ns)
    k = queue_frames(queue) if queue is not None and base_rtt_ns and current else None
    if k is None:
        return rule
    want = segs_for(bps, T, mss, pacer_late_ns=late_ns)          # the pacer's, unbounded
    bdp, frame = bps / 8 * base_rtt_ns / 1e9, mss + SEG_WIRE_OVERHEAD
    k = max(0, k - current)                                       # beyond the train in service
    if (k + 1) * frame <= bdp:
        segs = current + 1
    elif k * frame > bdp:
        segs = current - 1
    else:
        segs = current
    return max(rule, min(segs, want))


def paced_share(rate_bps: float, skb_bytes: float, late) -> float:
    """The share of `rate_bps` a flow paced by the kernel's internal pacer
    delivers in skbs of `skb_bytes` when its timer fires as late as `late`
    (a hpccd.tcp_side.pacer.Lateness); both counted as the kernel's pacer
    counts them, in payload (sk_pacing_rate, an skb's length before its
    headers are pushed).  Each skb takes its
    slot S / R, and a timer L late adds what the kernel does not make up,
    max(0, L - S / 2R) (tcp_update_skb_after_send credits at most half a
    slot), so the share is (S / R) / (S / R + E[max(0, L - S / 2R)]), the
    expectation over the measured expiries (each bucket at its middle; the
    open last bucket at what the sum leaves for it).  What no rate written
    at R can beat with these trains on this host, whatever the algorithm;
    nan without expiries."""
    if rate_bps <= 0 or skb_bytes <= 0:
        raise ValueError(f"paced_share needs a positive rate and skb size "
                         f"({rate_bps}, {skb_bytes})")
    from .pacer import BUCKET_NS
    if not late.n:
        return float("nan")
    slot = skb_bytes * 8 / rate_bps * 1e9
    last = len(late.buckets) - 1
    rest = late.sum_ns - sum((i + 0.5) * BUCKET_NS * c
                             for i, c in enumerate(late.buckets[:last]))
    tail = (rest / late.buckets[last] if late.buckets[last]
            else (last + 0.5) * BUCKET_NS)
    lost = sum(c * max(0.0, ((i + 0.5) * BUCKET_NS if i < last else tail) - slot / 2)
               for i, c in enumerate(late.buckets)) / late.n
    return slot / (slot + lost)


class TrainCapError(RuntimeError):
    """The interface's gso_max_segs could not be read or set."""


def _ipr():
    from pyroute2 import IPRoute
    return IPRoute()


@contextlib.contextmanager
def _link(ifname: str, netns: str | None, doing: str) -> Iterator[tuple[Any, int]]:
    """(IPRoute, `ifname`'s index) inside `netns`; TrainCapError when there
    is no such interface, or naming `doing` for an OSError meanwhile."""
    ctx = bpf.in_netns(netns) if netns else contextlib.nullcontext()
    try:
        with ctx, _ipr() as ipr:
            idx = ipr.link_lookup(ifname=ifname)
            if not idx:
                raise TrainCapError(f"{ifname}: no such interface")
            yield ipr, idx[0]
    except OSError as e:
        raise TrainCapError(f"{ifname}: {doing}: {e}") from e


def gso_max_segs(ifname: str, netns: str | None = None) -> int:
    """The interface's gso_max_segs (IFLA_GSO_MAX_SEGS)."""
    with _link(ifname, netns, "reading gso_max_segs") as (ipr, idx):
        v = ipr.get_links(idx)[0].get_attr("IFLA_GSO_MAX_SEGS")
    if v is None:
        raise TrainCapError(f"{ifname}: the kernel reports no gso_max_segs")
    return int(v)


# Writing 1 here invalidates the namespace's cached routes (IPv4, IPv6).
ROUTE_FLUSH = ("/proc/sys/net/ipv4/route/flush", "/proc/sys/net/ipv6/route/flush")


def set_gso_max_segs(ifname: str, segs: int, netns: str | None = None) -> None:
    """Sets the interface's gso_max_segs and flushes the namespace's cached
    routes, so that every socket, the running ones too, takes the new cap at
    its next send.  A socket copies the cap when it sets up its route
    (sk_setup_caps): without the flush a running flow kept its old cap, and
    under a lowered one the device refused its trains, which the stack then
    cut into single segments in software (measured: a cubic flow's 8-segment
    skbs became 1-segment ones, 11.6 KB -> 1.5 KB a packet, for the rest of
    its life, its trains on the wire as long as before); with the flush it
    sends the new cap's trains (4: 5.9 KB, 2: 3.0 KB)."""
    ctx = bpf.in_netns(netns) if netns else contextlib.nullcontext()
    with _link(ifname, netns, f"setting gso_max_segs {segs}") as (ipr, idx):
        ipr.link("set", index=idx, gso_max_segs=int(segs))
    try:
        with ctx:                    # /proc/sys/net is the opening thread's namespace's
            for path in ROUTE_FLUSH:
                try:
                    with open(path, "w") as f:
                        f.write("1\n")
                except FileNotFoundError:
                    pass             # no IPv6 in this kernel or namespace
    except OSError as e:
        raise TrainCapError(f"{ifname}: gso_max_segs {segs} set, but the routes were not "
                            f"flushed, so running flows keep their cap: {e}") from e


class TrainCap:
    """Caps `ifname`'s gso_max_segs at `segs` (only lowers it) from apply()
    to restore(), which puts back the value found unless someone changed it
    meanwhile.  `segs` 0: leaves the interface alone."""

    def __init__(self, ifname: str | None, segs: int, netns: str | None = None):
        if segs < 0 or segs > 65535:
            raise ValueError(f"gso_max_segs must be within [0, 65535], got {segs}")
        if segs and not ifname:
            raise ValueError("gso_max_segs needs the interface the flows leave by")
        self.ifname, self.segs, self.netns = ifname, int(segs), netns
        self.found: int | None = None        # the value before, while capped

    @property
    def active(self) -> bool:
        return self.found is not None

    def apply(self) -> None:
        if not self.segs or self.active:
            return
        cur = gso_max_segs(self.ifname, self.netns)
        if cur > self.segs:
            set_gso_max_segs(self.ifname, self.segs, self.netns)
            self.found = cur

    def retarget(self, segs: int) -> int:
        """Cap at `segs` from now on (the running flows too): lowered
        or raised, never above the value found before the cap; nothing is
        written while someone else has changed the interface's value since
        this cap set it (restore() leaves such a value alone too).  Returns
        the cap in force."""
        if not 1 <= segs <= 65535:
            raise ValueError(f"gso_max_segs must be within [1, 65535], got {segs}")
        if not self.active:
            self.segs = int(segs)
            self.apply()
            return gso_max_segs(self.ifname, self.netns)
        want = min(int(segs), self.found)
        if want != self.segs and gso_max_segs(self.ifname, self.netns) == self.segs:
            set_gso_max_segs(self.ifname, want, self.netns)
            self.segs = want
        return self.segs

    def restore(self) -> None:
        if self.found is None:
            return
        found, self.found = self.found, None
        with contextlib.suppress(TrainCapError):      # the interface may be gone
            if gso_max_segs(self.ifname, self.netns) == self.segs:
                set_gso_max_segs(self.ifname, found, self.netns)
