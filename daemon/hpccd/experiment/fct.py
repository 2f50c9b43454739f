"""``fct``: flow completion time slowdown under realistic load ([HPCC]
sections 5.1 and 5.2, Figure 10: WebSearch and FB_Hadoop at 30% and 50%
average link load; slowdown p50 / p95 / p99 by flow size).

Workloads are flow-size CDFs read from files (hpccd.experiment.workload:
the published ones are bundled, docs/experiments.md "fct").  For
each workload and load, one schedule of Poisson arrivals (seeded: every
algorithm gets the same flows): exponential gaps of mean E[size] x 8 /
(load x R), sizes by inverse transform from the CDF, each flow from a
sender ``h1..hN`` to a receiver ``r1..rN`` drawn uniformly.  Embedded
topology (common.dumbbell): the senders on s1, the receivers on s2, every
link at R; the s1 -> s2 port is the one bottleneck (s2 can only forward
what s1 sent it, at R), its queue recorded throughout.

Each flow is a new flow of the algorithm under test:

- native algorithms: a flow of the sender host's transport engine, opened
  at its arrival; its FCT is the engine's (open to the last byte
  acknowledged, timed by the engine thread), its bytes checked at the
  receiver (delivered in order, CRC-32 of the generated stream);
- kernel TCP: a new connection made by hpccd.experiment.flowgen, a process
  of its own per sender host (the runner's threads would stretch short
  flows' timings), connected shortly before the arrival, timed from the
  first send() to the receiver's byte count coming back after the FIN;
  the count must equal the size.  net.ipv4.tcp_no_metrics_save is set in
  every host, so no flow inherits the ssthresh of an earlier one.

Slowdown ([HPCC] section 2.3, footnote 1: "a flow's actual FCT
normalized by its ideal FCT when the network only has this flow"):
FCT / ideal, where

    ideal = base RTT + max(0, wire bytes - HTB bucket) x 8 / R

- base RTT: the algorithm's own FCT of a one-packet flow alone (the least
  of 2 x ``idle_flows`` flows of ``idle_size`` bytes from h1 to r1 in the
  idle network, IDLE_GAP_S apart, half before the run and half after, and
  of the run's own one-packet flows: waiting only adds time, so the least
  of all is the floor), timed by the same code as the flows measured:
  software RTTs differ between kernel TCP and AF_XDP;
- wire bytes: the flow's payload plus the headers of the packets that
  carry it, without INT (kernel TCP: MSS = MTU - 52, 66 header bytes a
  segment; native: MTU - 64 payload bytes, 78 header bytes, INT room 0):
  the INT padding is HPCC's overhead and counts against it, as in [HPCC]
  section 5.3;
- HTB bucket: the lab's links are token buckets of 100 us at R (docs/lab.md
  "HTB's bucket"), which let the first 12.5 KB of a flow that is alone
  through back to back; a flow alone is that much faster than size / R.

With ``incast_load`` > 0, incast events are added on top of the
background load ([HPCC] section 5.3, Figure 11: FB_Hadoop at 30 % plus
60-to-1 incasts of 500 KB each, 2 % of the capacity), scaled to the lab's
hosts (workload.incast_schedule): each event ``incast_flows`` flows
(default two per sender host) of ``incast_size`` bytes start together
toward one receiver, events Poisson at ``incast_load`` of the link rate.
Their flows are flows of the run like the others (in the size buckets, as
in the paper's figure) and are also reported on their own (row "incast":
events, FCT p50 / max).

Flows whose slowdown is below 1 are counted and reported per bucket, not
clamped.  Reported per run (workload, load, algorithm): flows completed
and byte-exact, the load offered (payload bytes of the schedule over the
window) and the load the bottleneck port carried (its byte counter, wire
bytes), how late arrivals started, the base RTT, the queue p50 / p95 / p99
over time, slowdown p50 / p95 / p99 per size bucket, and the verdict: did
the emulated link and the algorithms, not the CPUs, shape the FCTs?
"""
from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
import threading
import time
from typing import Any

from ..lab.queues import htb_burst_bytes
from . import loaded_rtt, measure, native, workload
from .algos import Algo
from .common import (Skip, UsageError, base_rtt, dumbbell, native_engines, parse_shares,
                     run_each, verdict_lines, with_defaults)
from .kernel_cc import KernelCc
from .kernel_tcp import AlgoUnavailable, check_available
from .report import Results, progress, pyplot, table
from .results import Row, Summary, derived, kb, ms, pct, private, us

NAME = "fct"
PORT = 5300
DEFAULTS = {"senders": 4, "rate_mbps": 1000, "buffer_bytes": 1_000_000, "k_bytes": 30_000,
            "cdf": ["websearch", "fb_hadoop"], "cdf_dir": None, "loads": "0.3,0.5",
            "duration": 5.0, "durations": None, "max_size": None, "seed": 1, "buckets": None, "drain": 10.0,
            "idle_flows": 50, "idle_size": 100,
            "incast_load": 0.0, "incast_size": 500_000, "incast_flows": None}
# Wire framing without INT (module docstring): (headers a packet, payload a packet - MTU).
TCP_HDR, TCP_MSS_LESS = 14 + 20 + 20 + 12, 20 + 20 + 12       # Ethernet, IPv4, TCP, timestamps
NATIVE_HDR, NATIVE_MSS_LESS = 14 + 20 + 8 + 4 + 32, 20 + 8 + 4 + 32   # ... UDP, INT hdr, hpccd
LAG_OK_S = 0.002          # arrivals later than this at p99: the hosts did not keep the schedule
TX_POLL_S = 0.02          # native flows: finished ones collected this often
# Idle flows (the base RTT) this far apart: a little more than one such
# flow's FCT, so that they do not overlap, and close enough that the hosts'
# threads stay awake as they are under load.  3 ms apart, each found them
# asleep, and the least of 50 was slower than many a flow under load
# (slowdowns down to 0.74).  0.1 ms apart, kernel TCP's idle flows (FCT
# 0.15-0.9 ms, all from one sender process) overlapped 3 to 8 deep: its
# base came out at 91-421 us from run to run and loaded flows at 0.33x it.
# 0.4 ms: cubic's base 147-160 us, HPCC's 74-84 us, in six runs.
IDLE_GAP_S = 0.0004
GIL_SWITCH_S = 0.0002     # the runner's GIL switch interval while native flows are opened


def topology(p: dict[str, Any]) -> str:
    n = p["senders"]
    return dumbbell("xfct", "10.125.0.0/16", [f"h{i}" for i in range(1, n + 1)],
                    [f"r{i}" for i in range(1, n + 1)], p["rate_mbps"], p["buffer_bytes"],
                    p["k_bytes"])


def parse_loads(text: str | float) -> list[float]:
    """"0.3,0.5" -> [0.3, 0.5]; each a share of the link rate in (0, 1)."""
    return parse_shares(text, "--loads", lambda x: 0 < x < 1,
                        "0 < load < 1; 30% is 0.3", "share of the link rate")


def wire_bytes(size: int, kind: str, mtu: int) -> int:
    """Bytes on the wire of a `size`-byte flow's data packets, without INT."""
    hdr, less = (TCP_HDR, TCP_MSS_LESS) if kind == "kernel" else (NATIVE_HDR, NATIVE_MSS_LESS)
    return size + -(-size // (mtu - less)) * hdr


def one_packet(size: int, kind: str, mtu: int, bucket: int) -> bool:
    """Is a `size`-byte flow's ideal FCT the base RTT alone (one packet, in the bucket)?"""
    less = TCP_MSS_LESS if kind == "kernel" else NATIVE_MSS_LESS
    return size <= mtu - less and wire_bytes(size, kind, mtu) <= bucket


def ideal_s(size: int, kind: str, mtu: int, base_s: float, link_bps: int, bucket: int) -> float:
    """The module docstring's ideal FCT, seconds."""
    return base_s + max(0, wire_bytes(size, kind, mtu) - bucket) * 8 / link_bps


# ---- kernel TCP flows (flowgen processes) ----------------------------------------------

class _KernelFlows:
    """Kernel TCP flows: a flowgen sink in every receiver for the
    algorithm's whole turn, a flowgen sender per sender host per run()."""

    def __init__(self, lab, algo: Algo, receivers: list[str]):
        self.lab, self.cc = lab, algo.cc
        self.sinks = []
        try:
            for r in receivers:
                pr = lab.popen(r, [sys.executable, "-m", "hpccd.experiment.flowgen", "sink",
                                   str(PORT), "--cc", self.cc],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                self.sinks.append(pr)
                if pr.stdout.readline().strip() != b"ready":
                    raise RuntimeError(f"flow sink in {r} did not start: "
                                       f"{pr.stderr.read().decode(errors='replace')[-300:]}")
        except BaseException:
            self.close()
            raise

    def run(self, plan: list[workload.FlowSpec], drain_s: float,
            lead_s: float = 0.05) -> tuple[int, dict[int, dict[str, Any]]]:
        """Every flow of `plan` from its sender's flowgen process; returns
        (t0, {idx: {start_ns, end_ns, ok, error}})."""
        by_src: dict[str, list] = {}
        for f in plan:
            by_src.setdefault(f.src, []).append([f.idx, int(f.t_s * 1e9), f.size,
                                                 self.lab.address(f.dst)])
        procs = {}
        try:
            for src, flows in by_src.items():
                pr = self.lab.popen(src, [sys.executable, "-m", "hpccd.experiment.flowgen",
                                          "send", str(PORT), "--cc", self.cc,
                                          "--drain-s", f"{drain_s:g}"],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
                procs[src] = pr
                pr.stdin.write(json.dumps(flows) + "\n")
                pr.stdin.flush()
            for src, pr in procs.items():
                if pr.stdout.readline().strip() != "ready":
                    raise RuntimeError(f"flow sender in {src} did not start: "
                                       f"{pr.stderr.read()[-300:]}")
            t0 = time.monotonic_ns() + int(lead_s * 1e9)
            for pr in procs.values():
                pr.stdin.write(f"{t0}\n")
                pr.stdin.close()
            last = max((f.t_s for f in plan), default=0.0)
            out: dict[int, dict[str, Any]] = {}
            sizes = {f.idx: f.size for f in plan}
            for src, pr in procs.items():
                text = pr.stdout.read()
                pr.wait(timeout=last + drain_s + 30)
                try:
                    flows = json.loads(text.strip().splitlines()[-1])["flows"]
                except (ValueError, IndexError, KeyError):
                    raise RuntimeError(f"flow sender in {src} failed (exit {pr.returncode}): "
                                       f"{pr.stderr.read()[-500:]}") from None
                for idx, start, end, count, err in flows:
                    if err is None and count != sizes[idx]:
                        err = f"the receiver counted {count} of {sizes[idx]} bytes"
                    out[idx] = {"start_ns": start, "end_ns": end if err is None else None,
                                "ok": err is None, "error": err, "rx_checked": count is not None}
            return t0, out
        finally:
            for pr in procs.values():
                if pr.poll() is None:
                    pr.kill()
                    pr.wait()

    def close(self) -> None:
        for pr in self.sinks:
            if pr.poll() is None:
                pr.kill()
                pr.wait()
        self.sinks = []


# ---- native flows (the hosts' transport engines, driven from here) ---------------------

class _NativeFlows:
    """Native flows of the hosts' transport engines, opened at their
    arrivals by one thread per sender host (see run())."""

    def __init__(self, lab, algo: Algo, senders: list[str], receivers: list[str]):
        self.lab, self.algo = lab, algo
        eng = native_engines(lab, algo)
        self.rx = {r: eng.get(r) for r in receivers}          # receivers first: XDP up
        self.tx = {h: eng.get(h) for h in senders}
        self.line = {h: eng.link_bps(h) for h in senders}
        # every next hop resolved now, not at a flow's arrival
        self.dmac = {(h, r): self.tx[h].next_hop_mac(lab.address(r))
                     for h in senders for r in receivers}
        self.sport = {h: 0 for h in senders}
        self.live: dict[str, dict[int, tuple[Any, workload.FlowSpec]]] = {}
        for tp in self.rx.values():
            tp.rx_reap()                                      # earlier runs' flows

    def _open(self, spec: workload.FlowSpec, live: dict, ended: dict) -> None:
        src = spec.src
        self.sport[src] += 1
        try:
            fl = self.tx[src].open_flow(
                self.lab.address(spec.dst), spec.size, dmac=self.dmac[(src, spec.dst)],
                sport=32768 + self.sport[src] % 28000,
                **native.flow_kwargs(self.algo.cc, self.line[src], self.lab.native.hpcc))
        except OSError as e:
            ended[spec.idx] = {"start_ns": None, "end_ns": None, "error": f"not opened: {e}"}
            return
        live[spec.idx] = (fl, spec)

    def _collect(self, live: dict, ended: dict, final: str | None = None) -> None:
        """Record and close the flows of `live` that ended (with `final`:
        every one, the unfinished failed with that reason)."""
        for idx in list(live):
            fl, spec = live[idx]
            st = fl.stats()
            s = st.stats
            if st.state == "done":
                err = None
            elif st.state == "failed":
                err = f"failed: err {st.err}, {s['snd_una']} of {spec.size} bytes acknowledged"
            elif final is not None:
                err = f"{final} ({s['snd_una']} of {spec.size} bytes acknowledged)"
            else:
                continue
            ended[idx] = {"start_ns": s["start_ns"], "end_ns": s["end_ns"] if err is None
                          else None, "error": err, "retx_pkts": s["retx_pkts"],
                          "rtos": s["rtos"], "key": (self.lab.address(spec.src), fl.sport,
                                                     fl.flow_id, fl.seed)}
            fl.close()
            del live[idx]

    def _host(self, src: str, plan: list[workload.FlowSpec], t0: int, end_ns: int,
              ended: dict, errors: list) -> None:
        """One sender host's flows: each opened at its arrival; the ended
        ones collected every TX_POLL_S; given up on at `end_ns`."""
        live = self.live.setdefault(src, {})
        try:
            next_poll = 0
            for spec in plan:
                at = t0 + int(spec.t_s * 1e9)
                while True:
                    now = time.monotonic_ns()
                    if now >= next_poll:
                        self._collect(live, ended)
                        next_poll = time.monotonic_ns() + int(TX_POLL_S * 1e9)
                        now = time.monotonic_ns()
                    if now >= at:
                        break
                    time.sleep((min(at, next_poll) - now) / 1e9)
                self._open(spec, live, ended)
            while live and time.monotonic_ns() < end_ns:
                time.sleep(TX_POLL_S)
                self._collect(live, ended)
        except BaseException as e:                # reported by run()
            errors.append(f"{src}: {e!r}")

    def run(self, plan: list[workload.FlowSpec], drain_s: float,
            lead_s: float = 0.05) -> tuple[int, dict[int, dict[str, Any]]]:
        """Open every flow of `plan` at its arrival, from one thread per
        sender host: opening a flow and reading one's state wait for the
        engine's lock, which its thread holds while it moves a batch of
        frames (and, in copy mode, forwards them through the lab in its
        softirq) -- one busy engine must not hold up the other hosts'
        arrivals.  The engine stamps a flow's start (when it is opened) and
        end (its last byte acknowledged): its FCT does not depend on these
        threads.  Ended flows are collected (their slots freed) every
        TX_POLL_S.  The receivers' records are read once, after the run
        (reading them costs milliseconds): a flow is checked there (bytes
        delivered in order, their CRC-32) when its record is still in its
        receiver's table, of 1024 flows with the oldest finished recycled
        first -- every flow of a run of up to 1024 flows per receiver is."""
        from ..transport.engine import pattern_crc32

        by_src: dict[str, list[workload.FlowSpec]] = {}
        for f in plan:
            by_src.setdefault(f.src, []).append(f)
        ended: dict[int, dict[str, Any]] = {}
        errors: list[str] = []
        t0 = time.monotonic_ns() + int(lead_s * 1e9)
        end_ns = t0 + int((max((f.t_s for f in plan), default=0.0) + drain_s) * 1e9)
        # These threads keep the schedule only if they get the GIL soon
        # after each sleep: the queue recorder's reads would hold it for up
        # to the default switch interval (5 ms) at a time.
        switch = sys.getswitchinterval()
        sys.setswitchinterval(GIL_SWITCH_S)
        try:
            threads = [threading.Thread(target=self._host, name=f"fct-{src}", daemon=True,
                                        args=(src, flows, t0, end_ns, ended, errors))
                       for src, flows in by_src.items()]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
        finally:
            sys.setswitchinterval(switch)
        for live in self.live.values():
            self._collect(live, ended, final=f"not done {drain_s:g} s after the last arrival")
        if errors:
            raise RuntimeError(f"native flows of {self.algo.name}: " + "; ".join(errors))
        got = {(f.saddr, f.sport, f.flow_id): (f.bytes, f.crc32)
               for tp in self.rx.values() for f in tp.rx_flows() if f.done}
        out: dict[int, dict[str, Any]] = {}
        for spec in plan:
            r = ended[spec.idx]
            key = r.pop("key", None)
            r["rx_checked"] = False
            if r["error"] is None:
                saddr, sport, fid, seed = key
                rx = got.get((saddr, sport, fid))
                if rx is not None:
                    r["rx_checked"] = True
                    if rx != (spec.size, pattern_crc32(seed, spec.size)):
                        r["error"] = (f"the receiver got {rx[0]} of {spec.size} bytes, "
                                      f"CRC-32 {rx[1]:#010x}")
            r["ok"] = r["error"] is None
            if not r["ok"]:
                r["end_ns"] = None
            out[spec.idx] = r
        for tp in self.rx.values():
            tp.rx_reap()
        return t0, out

    def close(self) -> None:
        for live in self.live.values():
            self._collect(live, {}, final="the run ended")


def _drivers(lab, algo: Algo, senders: list[str], receivers: list[str]):
    if algo.kind == "kernel":
        try:
            check_available(algo.cc)
        except AlgoUnavailable as e:
            raise Skip(str(e)) from None
        return _KernelFlows(lab, algo, receivers)
    return _NativeFlows(lab, algo, senders, receivers)


# ---- one run ---------------------------------------------------------------------------

def fct_verdict(samples, link_bps: int, cpu_busy: float, busiest: float, t_from: int,
                t_to: int, offered: float, lag_p99_s: float) -> measure.Verdict:
    """Were the FCTs the network's and the algorithm's, or the hosts'?  The
    link is meant to be partly idle here (30-50% load), so
    measure.bottleneck_verdict's "at least 90% utilised" does not apply;
    instead: the emulated port sent at >= 95% of its rate whenever it had
    a backlog (measure.bottleneck_verdict's test), neither the machine nor
    a single core was >= 90% busy, and the arrivals kept their schedule
    (p99 of how late a flow started <= LAG_OK_S)."""
    v = measure.bottleneck_verdict(samples, link_bps, cpu_busy, t_from, t_to,
                                   busiest_cpu=busiest)
    facts = [f"port {v.utilisation:.0%} busy for {offered:.0%} offered"]
    if not math.isnan(v.tx_ratio):
        facts.append(f"{v.tx_ratio:.0%} of line rate while backlogged ({v.backlogged_s:.3f} s)")
    facts.append(f"arrivals p99 {lag_p99_s * 1e3:.2f} ms late")
    facts.append(f"CPU {cpu_busy:.0%} busy, busiest core {busiest:.0%}")
    f = ", ".join(facts)
    emulation_ok = math.isnan(v.tx_ratio) or v.tx_ratio >= 0.95
    cpu_ok = cpu_busy < 0.9 and busiest < 0.9
    lag_ok = not lag_p99_s > LAG_OK_S
    if not emulation_ok:
        text = f"CPU-bound: the emulated port could not send at line rate ({f})"
    elif not cpu_ok:
        text = f"CPU-bound: the CPUs were saturated, FCTs include the hosts' delays ({f})"
    elif not lag_ok:
        text = f"CPU-bound: the senders could not keep the arrival schedule ({f})"
    else:
        text = f"link-bound, as intended: the FCTs are the network's ({f})"
    return v._replace(queue_bound=emulation_ok and cpu_ok and lag_ok, text=text)


@dataclasses.dataclass
class Bucket:
    """The slowdowns of one flow-size bucket of a run."""

    bucket: str                         # its label, e.g. "<=12K"
    n: int                              # flows of it that completed
    flows: int                          # flows of it in the schedule
    p50: float
    p95: float
    p99: float
    min: float
    below_1: int                        # slowdowns below 1 (faster than the ideal)


@dataclasses.dataclass
class IncastStats:
    """The incasts added on top of the background load (--incast-load)."""

    events: int
    flows_each: int
    size: int                           # bytes per incast flow
    flows: int
    done: int
    fct_p50_s: float
    fct_max_s: float
    slowdown_p95: float


@dataclasses.dataclass(kw_only=True)
class FctRow(Row):
    """One algorithm's run of one workload at one load: completion, the
    load offered and carried, the base RTT the ideal FCT comes from, the
    queue, and the slowdowns per size bucket."""

    workload: str
    load: float                         # the load asked, a share of the bottleneck
    run: str                            # "<algo> <workload> <load %>": the row's name
    t0_ns: int
    link_bps: int
    flows: int                          # in the schedule
    done: int                           # completed
    failed: int
    rx_checked: int                     # byte-exact at the receiver
    errors: list[str]                   # the first ten
    offered_load: float                 # payload of the schedule over the window
    port_load: float                    # what the bottleneck port carried (wire bytes)
    lag_p50_s: float                    # how late arrivals started
    lag_p99_s: float
    base_rtt_s: float                   # the least one-packet FCT, idle or in the run
    base_idle_s: float                  # the least idle one
    base_from_run: bool
    idle_fct_p50_s: float
    udp_rtt_s: float
    bucket_bytes: int                   # the HTB bucket the ideal FCT subtracts
    q_p50: float
    q_p95: float
    q_p99: float
    q_max: float
    below_1: int                        # slowdowns below 1, all buckets
    slowdown_min: float
    capped: int                         # flows sent at --max-size
    buckets: list[Bucket]
    incast: IncastStats | None = None
    flow_records: list = private()      # per flow: size, times, slowdown, errors (the CSV)
    samples: list = private()           # the queue sampler's
    grid: list = private()              # the queue over time

    offered_pct = derived("offered_load", pct)
    port_pct = derived("port_load", pct)
    lag_p99_ms = derived("lag_p99_s", ms)
    base_rtt_us = derived("base_rtt_s", us)
    idle_min_us = derived("base_idle_s", us)
    idle_p50_us = derived("idle_fct_p50_s", us)
    q_p50_kb = derived("q_p50", kb)
    q_p95_kb = derived("q_p95", kb)
    q_p99_kb = derived("q_p99", kb)


def duration_of(p: dict[str, Any], workload_name: str) -> float:
    """Seconds of arrivals a run of this workload: its own (`durations`,
    workload name -> seconds) or `duration`.  A heavy-tailed workload
    needs longer runs for its small buckets to hold enough flows:
    WebSearch (mean 1.7 MB) starts about 20 flows a second at 30 % of 1
    Gbit/s, about 3 % of them under 3 KB."""
    return float((p.get("durations") or {}).get(workload_name, p["duration"]))


def run_one(lab, algo: Algo, p: dict[str, Any], cdf: workload.Cdf, load: float,
            plan: list[workload.FlowSpec], edges: tuple[int, ...], udp_rtt: float,
            incast: list[list[workload.FlowSpec]] | None = None) -> FctRow:
    n = p["senders"]
    senders = [f"h{i}" for i in range(1, n + 1)]
    receivers = [f"r{i}" for i in range(1, n + 1)]
    sw = lab.topology.switches["s1"]
    port = sw.port_to("s2")
    link_bps, mtu = sw.port(port).rate_bps, sw.port(port).mtu
    bucket = htb_burst_bytes(sw.port(port).rate_mbps, mtu)
    drv = _drivers(lab, algo, senders, receivers)
    # the algorithm's own base RTT: one-packet flows in the idle network,
    # before the run and after it (a moment of other work on the machine
    # during one of them does not make the base, and so every ideal, late)
    idle_plan = [workload.FlowSpec(i, i * IDLE_GAP_S, p["idle_size"], "h1", "r1")
                 for i in range(p["idle_flows"])]
    try:
        idle = list(drv.run(idle_plan, 5.0)[1].values())
        rec = measure.QueueRecorder(lab, "s1", port).start()
        cpu = measure.CpuMeter().start()
        try:
            t0, res = drv.run(plan, p["drain"])
        finally:
            busy = cpu.stop()
            samples = rec.stop()
        time.sleep(0.2)                      # let the queue empty
        idle += drv.run(idle_plan, 5.0)[1].values()
    finally:
        drv.close()
    idle_fct = [(r["end_ns"] - r["start_ns"]) / 1e9 for r in idle if r["ok"]]
    if not idle_fct:
        raise RuntimeError(f"{algo.name}: none of {len(idle)} idle one-packet flows "
                           f"completed: {idle[0]['error']}")
    # The floor of a one-packet flow's FCT: the least of the idle ones and
    # of the run's own flows whose ideal is the base alone (one packet,
    # inside the HTB bucket).  Queues and a busy machine only ever add
    # time, so the least of more samples is the better estimate of "this
    # flow alone"; the idle flows alone came out above many a loaded one
    # (threads asleep between them, connection state): up to 85 of 1,160
    # kernel TCP flows beat them in a CI run.
    base_idle = min(idle_fct)
    single = [(r["end_ns"] - r["start_ns"]) / 1e9 for f in plan
              for r in (res[f.idx],) if r["ok"] and one_packet(f.size, algo.kind, mtu, bucket)]
    base = min([base_idle] + single)
    t_win = t0 + int(p["duration"] * 1e9)
    flows = []
    for f in plan:
        r = res[f.idx]
        fct = (r["end_ns"] - r["start_ns"]) / 1e9 if r["ok"] else math.nan
        ideal = ideal_s(f.size, algo.kind, mtu, base, link_bps, bucket)
        flows.append({"flow": f.idx, "src": f.src, "dst": f.dst, "size": f.size,
                      "bucket": workload.bucket_of(f.size, edges), "arrival_s": f.t_s,
                      "lag_s": ((r["start_ns"] - t0) / 1e9 - f.t_s) if r["start_ns"] else
                      math.nan, "fct_s": fct, "ideal_s": ideal, "slowdown": fct / ideal,
                      "ok": r["ok"], "rx_checked": r["rx_checked"], "error": r["error"],
                      "retx_pkts": r.get("retx_pkts"), "rtos": r.get("rtos")})
    done = [x for x in flows if x["ok"]]
    t_end = max([r["end_ns"] for r in res.values() if r["ok"]] + [t_win])
    grid = [b for _, b in measure.queue_over_time(samples, link_bps, t0, t_end)]
    offered = sum(f.size for f in plan) * 8 / (p["duration"] * link_bps)
    util = measure.port_rate(samples, t0, t_win, t_win - t0)
    port_load = util[0][1] / link_bps if util else math.nan
    lags = [x["lag_s"] for x in flows if not math.isnan(x["lag_s"])]
    lag_p99 = measure.percentile(lags, 99) if lags else math.nan
    verdict = fct_verdict(samples, link_bps, busy, cpu.busiest, t0, t_end, offered, lag_p99)
    labels = workload.bucket_labels(edges)
    buckets = []
    for i, label in enumerate(labels):
        s = [x["slowdown"] for x in done if x["bucket"] == i]
        buckets.append(Bucket(bucket=label, n=len(s),
                              flows=sum(1 for x in flows if x["bucket"] == i),
                              p50=measure.percentile(s, 50), p95=measure.percentile(s, 95),
                              p99=measure.percentile(s, 99), min=min(s, default=math.nan),
                              below_1=sum(1 for x in s if x < 1)))
    errors = [f"flow {x['flow']} ({x['size']} B {x['src']}->{x['dst']}): {x['error']}"
              for x in flows if not x["ok"]]
    inc_ids = {f.idx for ev in incast or [] for f in ev}
    for x in flows:
        x["incast"] = x["flow"] in inc_ids
    inc_fct = [x["fct_s"] for x in flows if x["incast"] and x["ok"]]
    inc_row = IncastStats(events=len(incast), flows_each=len(incast[0]),
                          size=incast[0][0].size, flows=len(inc_ids), done=len(inc_fct),
                          fct_p50_s=measure.percentile(inc_fct, 50),
                          fct_max_s=max(inc_fct, default=math.nan),
                          slowdown_p95=measure.percentile([x["slowdown"] for x in flows
                                                           if x["incast"] and x["ok"]], 95)) \
        if incast else None
    return FctRow(
        algo=algo.name, workload=cdf.name, load=load,
        run=f"{algo.name} {cdf.name} {load:.0%}", t0_ns=t0, link_bps=link_bps,
        flows=len(plan), done=len(done), failed=len(plan) - len(done),
        rx_checked=sum(1 for x in done if x["rx_checked"]),
        errors=errors[:10], offered_load=offered, port_load=port_load,
        lag_p50_s=measure.percentile(lags, 50), lag_p99_s=lag_p99,
        base_rtt_s=base, base_idle_s=base_idle, base_from_run=base < base_idle,
        idle_fct_p50_s=measure.percentile(idle_fct, 50),
        udp_rtt_s=udp_rtt, bucket_bytes=bucket,
        q_p50=measure.percentile(grid, 50), q_p95=measure.percentile(grid, 95),
        q_p99=measure.percentile(grid, 99),
        q_max=max((s.backlog_bytes for s in samples if t0 <= s.ts_ns <= t_end),
                  default=math.nan),
        below_1=sum(b.below_1 for b in buckets),
        slowdown_min=min((x["slowdown"] for x in done), default=math.nan),
        capped=sum(1 for f in plan if p["max_size"] and f.size >= p["max_size"]),
        buckets=buckets, incast=inc_row, cpu_busy=busy,
        queue_bound=verdict.queue_bound, verdict=verdict.text,
        flow_records=flows, samples=samples, grid=grid)


# ---- report ----------------------------------------------------------------------------

ROW = FctRow              # what Summary.rows reads its summary's rows back as

COLUMNS = [("algo", "algo"), ("flows", "flows"), ("done", "done"),
           ("rx_checked", "checked at receiver"),
           ("offered_pct", "offered %"), ("port_pct", "port load %"),
           ("lag_p99_ms", "lag p99 ms"), ("base_rtt_us", "base RTT us"),
           ("idle_min_us", "idle min us"), ("idle_p50_us", "idle p50 us"),
           ("q_p50_kb", "q p50 KB"), ("q_p95_kb", "q p95 KB"), ("q_p99_kb", "q p99 KB"),
           ("below_1", "slowdown<1"), ("queue_bound", "link-bound")]
BUCKET_COLUMNS = [("algo", "algo"), ("bucket", "size"), ("n", "n"), ("p50", "slowdown p50"),
                  ("p95", "p95"), ("p99", "p99"), ("min", "min"), ("below_1", "<1")]


INCAST_COLUMNS = [("algo", "algo"), ("events", "incasts"), ("flows", "incast flows"),
                  ("done", "done"), ("fct_p50_ms", "incast FCT p50 ms"),
                  ("fct_max_ms", "max ms"), ("slowdown_p95", "slowdown p95")]


def _bytes(x: float) -> str:
    if x >= 1e6:
        return f"{x / 1e6:.2f} MB"
    return f"{x / 1e3:.1f} KB" if x >= 1e3 else f"{x:.0f} B"


def _tag(name: str, load: float) -> str:
    return f"{name}_{round(load * 100)}"


def report(res: Results, rows: list[FctRow], skipped: dict[str, str],
           bad: dict[str, str], cdfs: list[workload.Cdf], loads: list[float],
           p: dict[str, Any], edges: tuple[int, ...], udp_rtt: float) -> str:
    plt = pyplot()
    from matplotlib import ticker
    combos = [(c, ld) for c in cdfs for ld in loads]
    fig, axes = plt.subplots(max(1, len(combos)), 2, figsize=(11, 5.2 * max(1, len(combos))),
                             squeeze=False)
    labels = workload.bucket_labels(edges)
    bucket_rows = []
    for r in rows:
        qs, t0 = r.samples, r.t0_ns
        res.csv(f"queue_{_tag(r.workload, r.load)}_{r.algo}.csv",
                ["t_ms", "backlog_bytes", "tx_bytes", "drops"],
                [((s.ts_ns - t0) / 1e6, s.backlog_bytes, s.tx_bytes, s.drops) for s in qs])
        for b in r.buckets:
            bucket_rows.append([r.workload, r.load, r.algo, b.bucket, b.n, b.flows, b.p50,
                                b.p95, b.p99, b.min, b.below_1])
    res.csv("slowdown_buckets.csv", ["workload", "load", "algo", "bucket", "n_done",
                                     "n_flows", "p50", "p95", "p99", "min", "below_1"],
            bucket_rows)
    for k, (cdf, load) in enumerate(combos):
        ax1, ax2 = axes[k]
        mine = [r for r in rows if r.workload == cdf.name and r.load == load]
        res.csv(f"fct_{_tag(cdf.name, load)}.csv",
                ["algo", "flow", "src", "dst", "size_bytes", "bucket", "arrival_ms", "lag_us",
                 "fct_us", "ideal_us", "slowdown", "done", "checked_at_receiver", "retx_pkts",
                 "rtos", "incast", "error"],
                [[r.algo, x["flow"], x["src"], x["dst"], x["size"], labels[x["bucket"]],
                  x["arrival_s"] * 1e3, x["lag_s"] * 1e6, x["fct_s"] * 1e6,
                  x["ideal_s"] * 1e6, x["slowdown"], x["ok"], x["rx_checked"],
                  "" if x["retx_pkts"] is None else x["retx_pkts"],
                  "" if x["rtos"] is None else x["rtos"], x["incast"], x["error"] or ""]
                 for r in mine for x in r.flow_records])
        for i, r in enumerate(mine):
            color = f"C{i}"
            xs = list(range(len(labels)))
            for q, style in (("p50", ":"), ("p95", "--"), ("p99", "-")):
                ax1.plot(xs, [getattr(b, q) for b in r.buckets], style, color=color,
                         marker=".", label=f"{r.algo} {q}", lw=1)
            g = sorted(r.grid)
            if g:
                ax2.plot([b / 1e3 for b in g], [(j + 1) / len(g) for j in range(len(g))],
                         color=color, label=r.algo, lw=1)
        ax1.set_xticks(list(range(len(labels))))
        ax1.set_xticklabels(labels, fontsize=7)
        ax1.set_yscale("log")
        ax1.yaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
        ax1.yaxis.set_minor_formatter(ticker.NullFormatter())
        ax1.set_ylabel("FCT slowdown")
        ax1.set_title(f"{cdf.name}, {load:.0%} load: slowdown by flow size", fontsize=9)
        # below the axes: with eight algorithms (24 lines) a legend inside
        # covered the lines, one column per algorithm ran off the figure
        ax1.legend(fontsize=6, ncol=min(4, max(1, len(mine))), loc="upper center",
                   bbox_to_anchor=(0.5, -0.12))
        ax2.set_xlabel("bottleneck queue (KB, over time, from the first arrival to the "
                       "last flow's end)")
        ax2.set_ylabel("CDF")
        ax2.set_title(f"{cdf.name}, {load:.0%} load: queue", fontsize=9)
        if mine:
            ax2.legend(fontsize=7)
    fig.tight_layout()
    res.figure("fct.png", fig)

    n = p["senders"]
    cap = p["max_size"]
    bucket_b = rows[0].bucket_bytes if rows else htb_burst_bytes(p["rate_mbps"], 1500)
    text = (f"{n} senders -> {n} receivers over one {p['rate_mbps']} Mbit/s bottleneck (s1 -> "
            f"s2), {p['duration']:g} s of Poisson arrivals a run"
            f"{''.join(f', {k} {v:g} s' for k, v in (p['durations'] or {}).items())}, "
            f"seed {p['seed']}; "
            f"UDP base RTT {udp_rtt * 1e6:.0f} us\n"
            f"slowdown = FCT / ideal, ideal = the algorithm's least one-packet FCT (idle or in the run) + max(0, wire "
            f"bytes - {bucket_b / 1e3:g} KB HTB bucket) / link "
            f"rate ([HPCC] section 2.3, footnote 1: the FCT when the network only has this flow; "
            f"docs/experiments.md)")
    for cdf, load in combos:
        mine = [r for r in rows if r.workload == cdf.name and r.load == load]
        mean = cdf.mean()
        text += (f"\n\n== {cdf.name} at {load:.0%} load: {cdf.path} ({len(cdf.sizes)} points "
                 f"in {cdf.unit}, mean {_bytes(mean)})"
                 f"{', ' + str(mine[0].flows) + ' flows' if mine else ''} ==")
        if cap:
            tail = 1 - cdf.cdf(cap)
            text += (f"\nsizes capped at {cap} bytes: {tail:.2%} of the distribution's flows "
                     f"are larger and are sent as {cap} bytes "
                     f"({mine[0].capped if mine else 0} flows of this run at the cap); mean "
                     f"{_bytes(mean)} -> {_bytes(cdf.mean(cap))}, the arrival rate follows the "
                     f"capped mean, so the load is kept")
        if not mine:
            text += "\n(no algorithm ran)"
            continue
        inc = mine[0].incast
        if inc:
            text += (f"\nplus {inc.events} incasts ({p['incast_load']:.0%} of the link): "
                     f"{inc.flows_each} flows of {_bytes(inc.size)} at once toward one "
                     f"receiver, from the {n} senders in turn ([HPCC] section 5.3 scaled to "
                     f"the lab's hosts)")
        text += "\n" + table(mine, COLUMNS)
        if inc:
            text += "\n" + table([{"algo": r.algo, **dataclasses.asdict(r.incast),
                                   "fct_p50_ms": r.incast.fct_p50_s * 1e3,
                                   "fct_max_ms": r.incast.fct_max_s * 1e3}
                                  for r in mine], INCAST_COLUMNS)
        brows = [{"algo": r.algo, **dataclasses.asdict(b)} for r in mine for b in r.buckets
                 if b.flows]
        text += "\n" + table(brows, BUCKET_COLUMNS)
        for r in mine:
            for e in r.errors:
                text += f"\n{r.algo}: {e}"
            if r.failed > len(r.errors):
                text += f"\n{r.algo}: ... {r.failed} flows not byte-exact in all"
    text += "\n" + verdict_lines(rows, skipped, key="run",
                                 hpcc_text=p["hpcc_text"]).lstrip("\n")
    for spec, why in bad.items():
        text += f"\nworkload {spec}: skipped: {why}"
    res.summary(text, Summary(NAME, p, rows, skipped, extra={
        "loads": loads, "buckets": labels, "workloads": [
            {"name": c.name, "path": c.path, "unit": c.unit,
             "points": len(c.sizes), "mean_bytes": c.mean(),
             "mean_capped_bytes": c.mean(cap) if cap else None,
             "share_above_cap": 1 - c.cdf(cap) if cap else None} for c in cdfs],
        "skipped_workloads": bad, "udp_rtt_s": udp_rtt}))
    return text


def run(lab_factory, algos: list[Algo], params: dict[str, Any], out: str) -> tuple[str, str]:
    p = with_defaults(DEFAULTS, params)
    loads = parse_loads(p["loads"])
    try:
        edges = workload.parse_buckets(p["buckets"])
    except ValueError as e:
        raise UsageError(f"--buckets: {e}") from None
    if p["max_size"] is not None and int(p["max_size"]) <= 0:
        raise UsageError(f"--max-size {p['max_size']}: bytes, > 0")
    if not p["duration"] > 0:
        raise UsageError(f"--duration {p['duration']}: seconds, > 0")
    for name, secs in (p["durations"] or {}).items():
        if not float(secs) > 0:
            raise UsageError(f"duration of {name}: {secs}: seconds, > 0")
    if not 0 <= float(p["incast_load"]) < 1:
        raise UsageError(f"--incast-load {p['incast_load']}: a share of the link rate, "
                         f"0 <= load < 1 (2% is 0.02)")
    if int(p["incast_size"]) <= 0 or (p["incast_flows"] is not None and
                                      int(p["incast_flows"]) <= 0):
        raise UsageError(f"--incast-size {p['incast_size']} / --incast-flows "
                         f"{p['incast_flows']}: > 0")
    specs = [p["cdf"]] if isinstance(p["cdf"], str) else list(p["cdf"])
    cdfs, bad = workload.load_workloads(specs, p["cdf_dir"])
    for spec, why in bad.items():
        progress(NAME, f"workload {spec} skipped: {why}")
    if not cdfs:
        raise UsageError("no workload to run:\n" + "\n".join(bad.values()))
    from ..lab.topology import Topology
    topo = Topology.loads(topology(p), "<fct experiment>")
    n = p["senders"]
    senders = [f"h{i}" for i in range(1, n + 1)]
    receivers = [f"r{i}" for i in range(1, n + 1)]
    res = Results(out, NAME)
    rows: list[FctRow] = []
    skipped: dict[str, str] = {}
    with lab_factory(topo) as lab, native.Engines(lab), KernelCc(lab) as kcc:
        for h in senders + receivers:
            r = lab.run(h, ["sysctl", "-qw", "net.ipv4.tcp_no_metrics_save=1"])
            if r.returncode != 0:
                raise RuntimeError(f"{h}: tcp_no_metrics_save: {r.stderr.strip()}")
        rtt = base_rtt(lab, "h1", "r1")
        link_bps = p["rate_mbps"] * 1_000_000
        progress(NAME, f"lab up ({len(topo.hosts)} hosts); UDP base RTT {rtt * 1e6:.0f} us")
        loaded_rtt.setup(NAME, lab, p, list(zip(senders, receivers)), "s1", "s2", 0)
        for cdf in cdfs:
            pc = dict(p, duration=duration_of(p, cdf.name))
            for load in loads:
                plan = workload.schedule(cdf, load, link_bps, pc["duration"], senders,
                                         receivers, p["seed"], p["max_size"])
                events = workload.incast_schedule(
                    float(p["incast_load"]), link_bps, pc["duration"], senders, receivers,
                    int(p["incast_flows"] or 2 * n), int(p["incast_size"]), p["seed"],
                    len(plan)) if p["incast_load"] else []
                if events:
                    plan = sorted(plan + [f for ev in events for f in ev], key=lambda f: f.t_s)
                progress(NAME, f"{cdf.name} at {load:.0%}: {len(plan)} flows in "
                               f"{pc['duration']:g} s" + (f", {len(events)} incasts among them"
                                                        if events else ""))
                got, skip = run_each(
                    NAME, algos, kcc, senders, receivers,
                    lambda a: run_one(lab, a, pc, cdf, load, plan, edges, rtt, events),
                    f"{cdf.name} at {load:.0%}",
                    lambda r: (f"{r.done}/{r.flows} flows, port load "
                               f"{r.port_load:.0%}, slowdown p99 of the smallest "
                               f"{next((b.p99 for b in r.buckets if b.n), math.nan):.2f}"))
                rows += got
                skipped.update(skip)
        kcc.note(p)
    return report(res, rows, skipped, bad, cdfs, loads, p, edges, rtt), res.dir
