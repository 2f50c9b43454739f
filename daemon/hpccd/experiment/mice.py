"""``mice``: 1 KB request/response mice through a link saturated by two
elephants ([HPCC] section 5.2, Figure 9e/9f).

Embedded topology: elephants ``e1``, ``e2`` and the mice client ``m1`` on
switch ``s1``, all toward ``r1``; every link at the same rate, so the port
toward ``r1`` is the bottleneck.  Per algorithm:

1. idle: the mice alone (the idle base RTT of a mouse, measured by the same
   program as under load, once per lab);
2. the two elephants start (iperf3 with the algorithm, ``-C``), and after
   ``warmup`` seconds the mice run for ``duration`` seconds, one request
   every ``interval_us`` (hpccd.experiment.rr, its own process in ``m1``:
   timings free of the runner's threads);
3. the bottleneck queue is recorded throughout.

Reported: the mice's RTT p50 / p99 / p99.9 and p99 over the idle p50
(the paper's claim for HPCC: close to the base RTT; issue 8 asks p99 <=
1.5x), the queue p50 / p99, the elephants' throughput; the bottleneck
verdict.
"""
from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
import time
from typing import Any

from . import kernel_cc, loaded_rtt, measure
from .algos import Algo
from . import native
from .common import Skip, run_each, star, verdict_lines, with_defaults
from .kernel_cc import KernelCc
from ..lab.namespaces import stop_processes
from .kernel_tcp import AlgoUnavailable, check_available
from .report import Results, progress, pyplot, table
from .results import Row, Summary, derived, kb, mbps, private

NAME = "mice"
RR_PORT = 7000
ELEPHANT_PORTS = (5201, 5202)
DEFAULTS = {"rate_mbps": 1000, "buffer_bytes": 1_000_000, "k_bytes": 30_000, "size": 1000,
            "interval_us": 1000, "warmup": 1.0, "duration": 2.0, "idle_count": 400}


def topology(rate_mbps: int, buffer_bytes: int, k_bytes: int) -> str:
    return star("xmice", "10.121.0.0/16", 0x0E2, ["e1", "e2", "m1", "r1"], rate_mbps,
                buffer_bytes, k_bytes)


def _servers(lab, cc: str | None, port: int, p: dict[str, Any], elephants: bool):
    """The mice server (and the elephants' iperf3 servers) in r1, listening
    with `cc`; returns the processes."""
    argv = [sys.executable, "-m", "hpccd.experiment.rr", "server", str(port),
            "--size", str(p["size"])] + (["--cc", cc] if cc else [])
    srv = lab.popen("r1", argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    if srv.stdout.readline().strip() != b"ready":
        raise RuntimeError("mice server in r1 did not start")
    procs = [srv]
    if elephants:
        procs += [lab.popen("r1", ["iperf3", "-s", "-p", str(pt)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL) for pt in ELEPHANT_PORTS]
        time.sleep(0.3)
    return procs


def _rr(lab, cc: str | None, count: int, p: dict[str, Any], port: int = RR_PORT,
        seconds: float | None = None) -> list[float]:
    argv = [sys.executable, "-m", "hpccd.experiment.rr", "client", lab.address("r1"),
            str(port), "--size", str(p["size"]), "--count", str(count),
            "--interval-us", str(p["interval_us"])] + (["--cc", cc] if cc else []) + \
        (["--seconds", f"{seconds:g}"] if seconds else [])
    r = lab.run("m1", argv, timeout=60 + count * p["interval_us"] / 1e6 * 3)
    try:
        out = json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise RuntimeError(f"mice client in m1 failed (exit {r.returncode}): "
                           f"{r.stderr.strip()[-500:]}") from None
    if "error" in out:
        raise RuntimeError(f"mice client in m1: {out['error']}")
    return out["rtt_us"]


def _native_mice(lab, algo: Algo, count: int, p: dict[str, Any],
                 seconds: float | None = None, rtts: list[float] | None = None) -> list[float]:
    """`count` mice as native flows of `size` bytes from m1 to r1, one after
    the other, every `interval_us`: each one's completion time (open to
    the last byte acknowledged, timed by the engine thread), us.  `rtts`,
    when given, gets each mouse's round trip as its sender's engine timed
    it (its DATA stamped to its ACK taken, the flow's least RTT sample: a
    mouse is one packet); the rest of its completion time is the hand-off
    from hpccd_tp__flow_open() to the engine sending its DATA."""
    rx = lab.native.get("r1")             # the receiving engine must be up first
    tp = lab.native.get("m1")
    peer = lab.address("r1")
    dmac = tp.next_hop_mac(peer)
    line = lab.native.link_bps("m1")
    out = []
    nxt = time.monotonic()
    end = nxt + seconds if seconds else None
    for i in range(count):
        if end is not None and time.monotonic() >= end:
            break
        if i % 256 == 255:
            rx.rx_reap()        # free the receiver's table of finished mice (1024 slots)
        d = nxt - time.monotonic()
        if d > 0:
            time.sleep(d)
        nxt = time.monotonic() + p["interval_us"] / 1e6
        with tp.open_flow(peer, p["size"], dmac=dmac,
                          **native.flow_kwargs(algo.cc, line, lab.native.hpcc)) as f:
            try:
                res = f.wait(timeout=10)
                out.append(res.fct_s * 1e6)
                if rtts is not None:
                    rtts.append(res.stats["min_rtt_ns"] / 1e3)
            except Exception as e:
                raise RuntimeError(f"native mouse {i + 1} of {count} ({algo.name}): {e}; "
                                   f"receiver r1: {rx.stats()}") from None
    rx.rx_reap()
    return out


@dataclasses.dataclass(kw_only=True)
class MiceRow(Row):
    """One algorithm's mice: their round trips through the bottleneck that
    two elephants saturate, against the idle round trip, and the queue."""

    t0_ns: int
    link_bps: int
    mice: int                           # how many ran
    mice_kind: str                      # kernel TCP request/response, or native flows
    idle_p50_us: float
    rtt_p50_us: float
    rtt_p99_us: float
    rtt_p999_us: float
    p99_over_idle: float
    q_p50: float
    q_p99: float
    elephants_bps: float                # the bottleneck's rate while the mice ran
    # native mice: where a mouse's time went, from its sender engine's own
    # clock (_native_mice): DATA stamped -> ACK taken (the network, the
    # receiver's engine and the ACK's way back) and open -> DATA stamped (the
    # hand-off to the sender's engine), p50 / p99 while the elephants ran
    # and p50 idle; nan for kernel TCP mice
    net_p50_us: float = math.nan
    net_p99_us: float = math.nan
    hand_p50_us: float = math.nan
    hand_p99_us: float = math.nan
    idle_net_p50_us: float = math.nan
    idle_hand_p50_us: float = math.nan
    rtts: list = private()              # each mouse's, us
    samples: list = private()           # the queue sampler's

    q_p50_kb = derived("q_p50", kb)
    q_p99_kb = derived("q_p99", kb)
    elephants_mbps = derived("elephants_bps", mbps)


def run_one(lab, algo: Algo, p: dict[str, Any], idle: list[float]) -> MiceRow:
    if algo.kind == "kernel":
        try:
            check_available(algo.cc)
        except AlgoUnavailable as e:
            raise Skip(str(e)) from None
    elif algo.engine is None:
        raise Skip(f"{algo.name}: probes per RTT are sent by the daemon, not by the transport "
                   f"engine the runner drives (docs/experiments.md)")
    else:
        # the idle base of native mice: the same mice, alone
        idle_net: list[float] = []
        idle = _native_mice(lab, algo, p["idle_count"] // 2, p, rtts=idle_net)
    sw = lab.topology.switches["s1"]
    port = sw.port_to("r1")
    link_bps = sw.port(port).rate_bps
    secs = p["warmup"] + p["duration"] + 2      # the mice stop after `duration`
    rec = measure.QueueRecorder(lab, "s1", port).start()
    cpu = measure.CpuMeter().start()
    count = int(p["duration"] * 1e6 / p["interval_us"])
    if algo.kind == "kernel":
        servers = _servers(lab, algo.cc, RR_PORT + 1, p, elephants=True)
        elephants = [lab.popen(e, ["iperf3", "-c", lab.address("r1"), "-p", str(pt), "-t",
                                   f"{secs:g}", "-C", algo.cc, "-J"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                     for e, pt in zip(("e1", "e2"), ELEPHANT_PORTS)]
        try:
            time.sleep(p["warmup"])
            t0 = time.monotonic_ns()
            rtts = _rr(lab, algo.cc, count, p, RR_PORT + 1, seconds=p["duration"])
            t1 = time.monotonic_ns()
            bps = []
            for e in elephants:
                out, err = e.communicate(timeout=secs + 30)
                try:
                    bps.append(json.loads(out)["end"]["sum_received"]["bits_per_second"])
                except (ValueError, KeyError):
                    raise RuntimeError(f"iperf3 elephant with -C {algo.cc} failed: "
                                       f"{err.decode(errors='replace').strip()[-300:]}") from None
        finally:
            stop_processes(elephants + servers)
            busy = cpu.stop()
            samples = rec.stop()
    else:
        sink = native.NativeSink(lab.native, "r1")
        flows = [native.NativeFlow(lab.native, e, "r1", algo.cc, e).start()
                 for e in ("e1", "e2")]
        try:
            time.sleep(p["warmup"])
            t0 = time.monotonic_ns()
            net: list[float] = []
            rtts = _native_mice(lab, algo, count, p, seconds=p["duration"], rtts=net)
            t1 = time.monotonic_ns()
            bps = [measure.delivered_rate(sink.conn(f).points, t0, t1) for f in flows]
            for f in flows:
                f.stop()
                f.join()
        finally:
            for f in flows:
                f.close()
            sink.close()
            busy = cpu.stop()
            samples = rec.stop()
    during = [b for _, b in measure.queue_over_time(samples, link_bps, t0, t1)]
    idle_p50 = measure.percentile(idle, 50)
    kp = kernel_cc.pacing(lab, algo, t0, t1, link_bps)
    verdict = measure.bottleneck_verdict(samples, link_bps, busy, t0, t1,
                                         busiest_cpu=cpu.busiest, paced=kp)
    # the elephants' throughput while the mice ran, from the bottleneck's own
    # byte counter (the mice's bytes are noise): the same for every algorithm
    if t1 > t0 and samples:
        bps = [measure.port_rate(samples, t0, t1, t1 - t0)[0][1]]
    row = MiceRow(
        algo=algo.name, t0_ns=t0, link_bps=link_bps, mice=len(rtts),
        mice_kind="kernel TCP request/response" if algo.kind == "kernel" else
                  "native flows of size bytes (open to last ACK)",
        idle_p50_us=idle_p50, rtt_p50_us=measure.percentile(rtts, 50),
        rtt_p99_us=measure.percentile(rtts, 99), rtt_p999_us=measure.percentile(rtts, 99.9),
        p99_over_idle=measure.percentile(rtts, 99) / idle_p50,
        q_p50=measure.percentile(during, 50), q_p99=measure.percentile(during, 99),
        elephants_bps=sum(bps), cpu_busy=busy, queue_bound=verdict.queue_bound,
        verdict=verdict.text, rtts=rtts, samples=samples)
    if algo.kind == "kernel":
        return row.send_time(kernel_cc.row_figures(kp))
    hand = [f - n for f, n in zip(rtts, net)]
    row.net_p50_us, row.net_p99_us = (measure.percentile(net, q) for q in (50, 99))
    row.hand_p50_us, row.hand_p99_us = (measure.percentile(hand, q) for q in (50, 99))
    row.idle_net_p50_us = measure.percentile(idle_net, 50)
    row.idle_hand_p50_us = measure.percentile([f - n for f, n in zip(idle, idle_net)], 50)
    return row.send_time(native.send_time(flows, lab.native))


ROW = MiceRow             # what Summary.rows reads its summary's rows back as

COLUMNS = [("algo", "algo"), ("rtt_p50_us", "mice p50 us"), ("rtt_p99_us", "mice p99 us"),
           ("rtt_p999_us", "mice p99.9 us"), ("p99_over_idle", "p99 / idle p50"),
           ("q_p50_kb", "q p50 KB"), ("q_p99_kb", "q p99 KB"),
           ("elephants_mbps", "elephants Mbit/s"), ("wnd_limited", "wnd-limited"), ("pace_lost", "pace lost"),
           ("timer_late_us", "timer late us"), ("cpu_busy", "CPU busy"), ("queue_bound", "link-bound")]


def report(res: Results, rows: list[MiceRow], skipped: dict[str, str],
           p: dict[str, Any], idle: list[float]) -> str:
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    res.csv("mice_idle.csv", ["rtt_us"], [(x,) for x in idle])
    xs = sorted(idle)
    ax1.plot(xs, [(i + 1) / len(xs) for i in range(len(xs))], label="idle", color="black",
             lw=1)
    for r in rows:
        rtts, qs, t0 = r.rtts, r.samples, r.t0_ns
        res.csv(f"mice_{r.algo}.csv", ["rtt_us"], [(x,) for x in rtts])
        res.csv(f"queue_{r.algo}.csv", ["t_ms", "backlog_bytes", "tx_bytes", "drops"],
                [((s.ts_ns - t0) / 1e6, s.backlog_bytes, s.tx_bytes, s.drops) for s in qs])
        xs = sorted(rtts)
        ax1.plot(xs, [(i + 1) / len(xs) for i in range(len(xs))], label=r.algo, lw=1)
        g = measure.queue_over_time(qs, r.link_bps, t0, t0 + int(p["duration"] * 1e9),
                                    step_ns=100_000)
        ax2.plot([(t - t0) / 1e6 for t, _ in g], [b / 1e3 for _, b in g], label=r.algo, lw=1)
    ax1.set_xscale("log")
    ax1.set_xlabel("mouse RTT (us, 1 KB each way)")
    ax1.set_ylabel("CDF")
    ax1.legend()
    ax2.set_xlabel("ms from the mice start")
    ax2.set_ylabel("bottleneck queue (KB)")
    ax2.legend()
    fig.suptitle(f"1 KB mice through a {p['rate_mbps']} Mbit/s link saturated by two elephants")
    res.figure("mice.png", fig)
    text = table(rows, COLUMNS)
    text += f"\nidle mouse RTT p50 {measure.percentile(idle, 50):.0f} us ({len(idle)} mice alone)"
    for r in rows:
        if not math.isnan(r.net_p99_us):
            text += (f"\nwhere the {r.algo} mice's time went (their sender engine's clock): "
                     f"DATA -> ACK p50 / p99 {r.net_p50_us:.0f} / {r.net_p99_us:.0f} us "
                     f"(idle p50 {r.idle_net_p50_us:.0f}), open -> DATA p50 / p99 "
                     f"{r.hand_p50_us:.0f} / {r.hand_p99_us:.0f} us (idle p50 "
                     f"{r.idle_hand_p50_us:.0f})")
    text += verdict_lines(rows, skipped, hpcc_text=p["hpcc_text"])
    res.summary(text, Summary(NAME, p, rows, skipped,
                              extra={"idle_p50_us": measure.percentile(idle, 50)}))
    return text


def run(lab_factory, algos: list[Algo], params: dict[str, Any], out: str) -> tuple[str, str]:
    p = with_defaults(DEFAULTS, params)
    if params.get("observe") is not None:
        p["duration"] = params["observe"]
    from ..lab.topology import Topology
    topo = Topology.loads(topology(p["rate_mbps"], p["buffer_bytes"], p["k_bytes"]),
                          "<mice experiment>")
    res = Results(out, NAME)
    rows, skipped = [], {}
    with lab_factory(topo) as lab, native.Engines(lab), KernelCc(lab) as kcc:
        loaded_rtt.setup(NAME, lab, p, [("e1", "r1"), ("e2", "r1"), ("m1", "r1")], "s1", "r1",
                         3)
        idle_srv = _servers(lab, None, RR_PORT, p, elephants=False)
        idle = _rr(lab, None, p["idle_count"], p)
        stop_processes(idle_srv)
        progress(NAME, f"lab up; idle mouse RTT p50 {measure.percentile(idle, 50):.0f} us")
        rows, skipped = run_each(
            NAME, algos, kcc, ["e1", "e2", "m1"], ["r1"], lambda a: run_one(lab, a, p, idle),
            f"two elephants, then {p['duration']:g} s of mice",
            lambda r: f"mice p99 {r.rtt_p99_us:.0f} us ({r.p99_over_idle:.1f}x idle)")
        kcc.note(p)
    if math.isnan(measure.percentile(idle, 50)):
        raise RuntimeError("no idle mice")
    return report(res, rows, skipped, p, idle), res.dir
