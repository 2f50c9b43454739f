"""T by the paper's rule: "slightly greater than the maximum RTT of the
network" ([HPCC] section 5.1), measured in the experiment's own lab under
its own load, before the algorithms run.

The lab's round trip is mostly software (engine wake-ups, XDP, veth,
the ACK's own pacing), and it grows with the number of hosts that send at
once on the two shared cores, so the idle UDP round trip (common.base_rtt)
is not it.  :func:`measure` opens one native HPCC flow per (sender,
receiver) pair of the experiment, INT on every packet and ACKs as the
experiment's, each capped (its NIC rate, B_NIC) at ``SHARE`` of the
bottleneck divided among them, so that together they load every host the
experiment uses without a bottleneck queue; it reads each flow's smoothed
RTT (RFC 6298 from the echoed clock) every ``POLL_S`` for ``SECONDS``
after ``WARMUP_S``, and the bottleneck queue over the same time (which
must stay near empty: it is reported).  The network's RTT is the largest
over the flows of each flow's median, and T = ``MARGIN`` x that, rounded
up to 10 us.  ``Engines.set_T`` then gives the engines that T (their
Rx-HPCC receivers through set_rx_hpcc) and has them forget the
calibration's receiver flows, which their senders closed mid-stream
(Engines.retune).
"""
from __future__ import annotations

import math
import statistics
import time
from typing import Any, NamedTuple

from . import measure
from .report import progress

__all__ = ["LoadedRtt", "T_from_rtt", "measure_rtt", "set_T_from_rtt", "setup", "MARGIN", "SHARE"]

MARGIN = 1.2            # T "slightly greater than" the RTT
SHARE = 0.5             # of the bottleneck the calibration flows use together
WARMUP_S = 0.15
SECONDS = 0.6
POLL_S = 0.01
ROUND_NS = 10_000


class LoadedRtt(NamedTuple):
    rtt_s: float                    # the network's: max over flows of the flow's median srtt
    per_flow_us: list[float]        # each flow's median srtt, us
    p90_us: float                   # the 90th percentile of every reading, us
    q_p99_bytes: float              # the bottleneck queue's p99 meanwhile
    flows: int
    T_ns: int                       # MARGIN x rtt_s, rounded up to ROUND_NS

    def line(self, used_T_ns: int, why: str) -> str:
        """The summary's line on T."""
        return (f"\nT = {used_T_ns / 1000:g} us ({why}); the lab's RTT without a bottleneck "
                f"queue under this experiment's load: {self.rtt_s * 1e6:.0f} us (largest of "
                f"{self.flows} HPCC flows' median srtt at {SHARE:.0%} of the bottleneck "
                f"together; per flow {', '.join(f'{x:.0f}' for x in self.per_flow_us)} us, "
                f"p90 of all readings {self.p90_us:.0f} us; queue p99 meanwhile "
                f"{self.q_p99_bytes:.0f} B)")


def measure_rtt(lab, pairs: list[tuple[str, str]], switch: str, port: int,
                T_ns: int) -> LoadedRtt:
    """Open the calibration flows (module docstring) on lab.native's engines,
    `T_ns` the provisional T of their HPCC; close them; return the figures."""
    from .native import STREAM_BYTES, flow_kwargs

    eng = lab.native
    link_bps = lab.topology.switches[switch].port(port).rate_bps
    cap = int(SHARE * link_bps / len(pairs))
    rec = measure.QueueRecorder(lab, switch, port).start()
    flows = []
    readings: list[list[float]] = [[] for _ in pairs]
    t_meas = None
    try:
        for dst in {d for _, d in pairs}:
            eng.get(dst)                            # receivers first
        for src, dst in pairs:
            tp = eng.get(src)
            peer = lab.address(dst)
            kw = flow_kwargs("hpcc", cap, {**eng.hpcc, "T_ns": T_ns})
            flows.append(tp.open_flow(peer, STREAM_BYTES, dmac=tp.next_hop_mac(peer), **kw))
        time.sleep(WARMUP_S)
        t_meas = time.monotonic_ns()
        end = time.monotonic() + SECONDS
        while time.monotonic() < end:
            for i, f in enumerate(flows):
                s = f.stats().stats
                if s["srtt_ns"]:
                    readings[i].append(s["srtt_ns"] / 1e3)
            time.sleep(POLL_S)
        t_end = time.monotonic_ns()
    finally:
        for f in flows:
            f.close()
        samples = rec.stop()
    if not all(readings):
        raise RuntimeError("loaded RTT: a calibration flow took no RTT sample "
                           f"({[len(r) for r in readings]} readings)")
    per_flow = [statistics.median(r) for r in readings]
    q = [b for _, b in measure.queue_over_time(samples, link_bps, t_meas, t_end)]
    rtt_s = max(per_flow) / 1e6
    return LoadedRtt(rtt_s, per_flow, measure.percentile([x for r in readings for x in r], 90),
                     measure.percentile(q, 99) if q else math.nan, len(pairs),
                     T_from_rtt(rtt_s))


def T_from_rtt(rtt_s: float) -> int:
    """T, ns: MARGIN x the network's RTT, rounded up to ROUND_NS."""
    return int(math.ceil(MARGIN * rtt_s * 1e9 / ROUND_NS - 1e-9) * ROUND_NS)


def set_T_from_rtt(exp: str, lab, pairs: list[tuple[str, str]], switch: str,
                   port: int) -> tuple[LoadedRtt, str, float | None]:
    """Measure (measure_rtt) and set the experiment's T on lab.native:
    MARGIN x the loaded RTT, unless --T-us (or a sweep of T_ns) gives it.
    Returns the figures, the summary's line on T and the rule of thumb's
    W_AI that W_AI's floor replaced (None: not replaced; native.bxt_w_ai)."""
    from . import native

    eng = lab.native
    given = native.given_T_ns()
    lr = measure_rtt(lab, pairs, switch, port, given or native.T_NS)
    T = given or lr.T_ns
    why = ("given" if given else
           f"{MARGIN:g} x the loaded RTT, [HPCC] section 5.1: slightly greater than the "
           f"maximum RTT")
    replaced = eng.set_T(T, lab.topology.switches[switch].port(port).rate_bps)
    line = lr.line(T, why)
    progress(exp, f"loaded RTT {lr.rtt_s * 1e6:.0f} us over {lr.flows} flows "
                  f"(queue p99 {lr.q_p99_bytes:.0f} B): T = {T / 1000:g} us ({why.split(',')[0]})")
    return lr, line, replaced


def setup(exp: str, lab, p: dict[str, Any], pairs: list[tuple[str, str]], switch: str,
          peer: str, started: int) -> None:
    """An experiment's HPCC set-up once its lab is up: T from the loaded RTT
    (set_T_from_rtt) over `pairs` with the bottleneck the port of `switch`
    toward `peer`; into `p` the figures (loaded_rtt_us, T_us, N, W_AI) and
    ``hpcc_text``, the summary's lines on them (`started`: the flows the
    experiment puts on its bottleneck at most, printed beside N)."""
    from .native import DEFAULT_N, bxt_frames, hpcc_line

    port = lab.topology.switches[switch].port_to(peer)
    lr, t_line, replaced = set_T_from_rtt(exp, lab, pairs, switch, port)
    h = lab.native.hpcc
    line_bps = lab.topology.switches[switch].port(port).rate_bps
    p.update(loaded_rtt_us=lr.rtt_s * 1e6, loaded_rtt_p90_us=lr.p90_us,
             loaded_rtt_q_p99_bytes=lr.q_p99_bytes, T_us=h["T_ns"] / 1000,
             # N stays the paper's where W_AI's floor replaced its rule of thumb
             hpcc_N=h.get("N_flows") or (DEFAULT_N if replaced is not None else None),
             flows_started=started,
             bxt_frames=round(bxt_frames(h["T_ns"], line_bps), 1),
             w_ai_floor_from=replaced,
             hpcc_text=t_line + hpcc_line(h, line_bps, started, replaced))
