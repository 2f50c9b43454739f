"""hpccd's struct_ops congestion controls for the runner's kernel TCP
flows: ``tcp-dctcp`` and ``tcp-hpcc`` (docs/tcp-side.md).

:class:`KernelCc` registers both (hpccd.tcp_side.engine.TcpCc: host-wide, one
owner at a time, taken for the experiment and released at its end) the
first time an experiment needs one, and :meth:`KernelCc.session` prepares
the lab for one algorithm's run:

- ``tcp-dctcp``: DCTCP only works between DCTCP endpoints from the SYN on
  ([DCTCP] section 4; the kernel accepts ECN on a SYN only when the
  listening socket's congestion control needs it), so it is made the
  default congestion control of every host namespace for the run (servers
  started by tools such as iperf3 listen with it); restored after.
- ``tcp-hpcc``: the hosts' XDP program (xdp_host: reflects probes on the
  receivers, keeps the responses on the senders) on every host, the tc
  tracker on each sender, and one TcpSide per sender probing its flows once
  per RTT and writing their windows (T as the native flows', above the
  lab's loaded RTT), with the senders' GSO trains capped for the run at an
  eighth of the slowest link's B x T (hpccd.tcp_side.trains.segs_for; not
  the longer trains within one BDP of the base RTT that one host's flows
  fill the link with: from several senders they grew the queue, fairness's
  p99 139 KB against 18, docs/tcp-side.md "Trains within one BDP");
  everything detached and restored after the run.  With ``--tcp-trains
  queue`` (TRAINS) each sender's cap starts there and follows its pacer and
  the queue its probes find instead, as the daemon's
  ``tcp_side.trains_from_pacer`` does (TcpSide.retrain every POLL_S; docs/
  tcp-side.md "Trains from the queue the probes find").  Native transport
  engines, which attach their own xdp_host, are closed first (they are
  made again when a native algorithm runs next).  While tcp-hpcc runs, a
  PaceLog samples its engines' pacing totals and the host's pacing-timer
  lateness, from which :meth:`KernelCc.pacing` tells an experiment how
  much of the link HPCC's rates asked for and how much of that the flows
  sent (the row's ``pace lost``, ``timer late us`` and the verdict's
  "asked").
"""
from __future__ import annotations

import contextlib
import math
import socket
import threading
import time
from typing import Iterator

from .algos import Algo
from .common import Skip
from .native import hook_last_hop, hpcc_params

__all__ = ["KernelCc", "TRAIN_MODES", "pacing", "row_figures"]

# How tcp-hpcc's senders size their GSO trains (--tcp-trains): "eighth", an
# eighth of B x T for the run; "queue", from there as the daemon's
# trains_from_pacer decides, at each POLL_S.
TRAIN_MODES = ("eighth", "queue")
TRAINS = "eighth"
POLL_S = 0.1
# PaceLog's period: a window's figures are over the samples around it, at
# most this much wider on each side (long-short's is the short flow's life);
# a sample costs about 0.5 ms of CPU with the incast's eight senders (1 %
# of a core at this period, 4 % at 20 ms with the whole stats and counters)
PACE_LOG_S = 0.05
# the hpcc CC's counters PaceLog reads: its ACKs in HPCC mode and what held them
HELD = ("used_hpcc", "lim_cwnd", "lim_pacing", "lim_app", "lim_tsq", "lim_timer")


def pacing(lab, algo: Algo, t_from: int, t_to: int, link_bps: float) -> dict:
    """KernelCc.pacing of the lab's KernelCc (empty without one)."""
    kc = getattr(lab, "kernel_cc", None)
    return kc.pacing(algo, t_from, t_to, link_bps) if kc is not None else {}


def row_figures(paced: dict) -> dict:
    """Of pacing()'s figures, those a Row keeps (results.Row: pace_lost,
    timer_late_us, asked)."""
    return {k: v for k, v in paced.items() if k in ("pace_lost", "timer_late_us", "asked")}


class KernelCc:
    def __init__(self, lab, n_flows: int | None = None):
        self.lab = lab
        self.n_flows = n_flows          # HPCC's N (native.hpcc_params)
        self.cc = None
        self.trains: dict | None = None         # the last tcp-hpcc run's train cap (note)
        self.pace_log: PaceLog | None = None     # the last tcp-hpcc run's pacing totals

    def __enter__(self) -> "KernelCc":
        self.lab.kernel_cc = self
        return self

    def __exit__(self, *exc) -> None:
        if self.cc is not None:
            self.cc.stop()
            self.cc = None
        self.lab.kernel_cc = None

    def _hpcc(self) -> dict:
        """HPCC's parameters: the experiment's engines' (T measured,
        loaded_rtt.py), else native.hpcc_params."""
        eng = getattr(self.lab, "native", None)
        return dict(eng.hpcc) if eng is not None else hpcc_params(self.n_flows)

    def _register(self):
        if self.cc is None:
            from ..tcp_side.engine import TcpCc, TcpSideError
            try:
                self.cc = TcpCc().start(wait_s=5.0)
            except (TcpSideError, OSError) as e:
                raise Skip(f"cannot register hpccd's TCP congestion controls: {e}") from None
        return self.cc

    def _default_cc(self, hosts: list[str], cc: str) -> dict[str, str]:
        old = {}
        for h in hosts:
            r = self.lab.run(h, ["sysctl", "-n", "net.ipv4.tcp_congestion_control"])
            old[h] = r.stdout.strip()
            r = self.lab.run(h, ["sysctl", "-w", f"net.ipv4.tcp_congestion_control={cc}"])
            if r.returncode != 0:
                raise RuntimeError(f"{h}: cannot make {cc} the default: {r.stderr.strip()}")
        return old

    @contextlib.contextmanager
    def session(self, algo: Algo, senders: list[str], receivers: list[str]) -> Iterator[None]:
        """The lab ready for `algo`'s kernel flows from `senders` to `receivers`."""
        if algo.kind != "kernel" or algo.cc not in ("dctcp", "hpcc"):
            yield
            return
        self._register()
        hosts = list(dict.fromkeys(senders + receivers))
        if algo.cc == "dctcp":
            old = self._default_cc(hosts, "dctcp")
            try:
                yield
            finally:
                for h, cc in old.items():
                    self.lab.run(h, ["sysctl", "-w", f"net.ipv4.tcp_congestion_control={cc}"])
            return
        native = getattr(self.lab, "native", None)
        if native is not None:
            native.release()                     # they hold xdp_host on the hosts' eth0
        with self._hpcc_hosts(hosts, senders):
            yield

    def pacing(self, algo: Algo, t_from: int, t_to: int, link_bps: float) -> dict:
        """For a tcp-hpcc run (empty for any other algorithm, or without a
        log): over the log's samples around [t_from, t_to] (monotonic ns;
        PaceLog.between),
        ``asked``, the rate HPCC wrote for the senders' flows (bits its
        pacing rates allowed, engine.c host_limited) over the link's;
        ``pace_lost``, the share of those bits the flows did not deliver
        (the kernel's pacer and the hosts); ``timer_late_us``, the mean
        lateness of the host's TCP pacing timers (nan where not measured)."""
        if algo.kind != "kernel" or algo.cc != "hpcc" or self.pace_log is None:
            return {}
        return self.pace_log.between(t_from, t_to, link_bps)

    def note(self, p: dict) -> None:
        """Into an experiment's params `p` (after its runs): the senders'
        train cap of its tcp-hpcc runs, and a line of the summary saying it
        (nothing when tcp-hpcc did not run)."""
        if self.trains is None:
            return
        t = self.trains
        p["tcp_hpcc_trains"] = dict(t)
        text = (f"\ntcp-hpcc: the senders' GSO trains at most {t['segs']} segments (an eighth "
                f"of B x T at {t['bottleneck_bps'] / 1e6:.0f} Mbit/s and T = {t['T_us']:.0f} "
                f"us, at least 2; hpccd.tcp_side.trains.segs_for)")
        if t.get("mode") == "queue":
            caps = ", ".join(f"{h} {c}" for h, c in sorted(t["last"].items()))
            text += (f", then as the pacer and the queue the probes found asked "
                     f"(--tcp-trains queue, {t['decisions']} decisions; at the end: {caps})")
        p["hpcc_text"] = p.get("hpcc_text", "") + text

    @contextlib.contextmanager
    def _hpcc_hosts(self, hosts: list[str], senders: list[str]) -> Iterator[None]:
        import secrets

        from ..bpf import loader as bpf
        from ..tcp_side.engine import TcpSide
        from ..tcp_side.trains import segs_for

        key = secrets.token_bytes(16)
        hp = self._hpcc()
        slowest = min(lk.rate_bps for lk in self.lab.topology.links)
        segs = segs_for(slowest, hp["T_ns"])
        self.trains = {"segs": segs, "bottleneck_bps": slowest, "T_us": hp["T_ns"] / 1e3,
                       "mode": TRAINS}
        objs, sides, attached = [], [], []
        poller = None
        self.pace_log = None                     # this run's, once its senders probe
        try:
            xdp = {}
            for h in hosts:
                o = bpf.BpfObject.open(bpf.object_path("xdp_host"))
                objs.append(o)
                o.load()
                o.map("hpccd_tag_key").update(0, key)
                o.map("hpccd_addrs").update(socket.inet_aton(self.lab.address(h)), 1)
                with bpf.in_netns(self.lab.netns(h)):
                    bpf.xdp_attach("eth0", o.program("hpccd_xdp_host"), mode="skb")
                attached.append((h, "xdp"))
                hook_last_hop(self.lab, h)
                xdp[h] = o
            for h in senders:
                t = bpf.BpfObject.open(bpf.object_path("tc_tracker"))
                objs.append(t)
                t.load()
                with bpf.in_netns(self.lab.netns(h)):
                    bpf.tc_attach("eth0", t.program("hpccd_tc_tracker"), "egress")
                attached.append((h, "tc"))
                line = self.lab.topology.links[self.lab.topology.hosts[h].link].rate_bps
                side = TcpSide(t, xdp[h],
                               hpcc_params={**hp, "line_rate_bps": line},
                               netns=self.lab.netns(h), tcp_cc=self.cc,
                               gso_max_segs=segs, gso_dev="eth0",
                               trains_from_pacer=TRAINS == "queue")
                side.start()
                sides.append(side)
                side.start_thread()
                side.bench_host = h
            if TRAINS == "queue":
                poller = _Retrain(sides, self.trains)
            self.pace_log = PaceLog(sides)
            yield
        finally:
            if self.pace_log is not None:
                self.pace_log.stop()
            if poller is not None:
                poller.stop()
            for s in sides:
                s.stop()
            sw = getattr(self.lab, "int_switch", None)
            for h, what in attached:
                if what == "xdp" and sw is not None:
                    with contextlib.suppress(OSError):      # the others still go
                        sw.unhook_host(h)
                with bpf.in_netns(self.lab.netns(h)):
                    if what == "xdp":
                        bpf.xdp_detach("eth0")
                    else:
                        bpf.tc_detach("eth0", "egress")
            for o in objs:
                o.close()


class _Retrain:
    """TcpSide.retrain() of every sender every POLL_S in a thread (the
    daemon's component does it at its polls), counting the decisions into
    `into` ("decisions"; "last": each sender's cap in force; "decided": each
    sender's last decision, its T, base RTT and queue among them)."""

    def __init__(self, sides: list, into: dict):
        import threading

        self.sides, self.into = sides, into
        self._seen: dict[str, dict] = {}         # sender -> its last decision counted
        into.update(decisions=0, last={s.bench_host: s.trains.segs for s in sides}, decided={})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tcp-hpcc-retrain", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(POLL_S):
            for s in self.sides:
                s.retrain()
                d = s.train_decision
                if d and self._seen.get(s.bench_host) is not d:
                    self._seen[s.bench_host] = d
                    self.into["decisions"] += 1
                    self.into["decided"][s.bench_host] = dict(d)
                self.into["last"][s.bench_host] = s.trains.segs

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


class PaceLog:
    """Every PACE_LOG_S while tcp-hpcc runs: (monotonic ns, the senders'
    engines' pace_acked_bits and pace_want_bits summed, the host's
    pacing-timer Lateness or None), for KernelCc.pacing.  The counters are
    the engines' own totals (ended flows included), so a window's figures
    are differences of two samples."""

    def __init__(self, sides: list):
        self.sides = sides
        self.points: list[tuple[int, int, int, object, dict]] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()            # one sample at a time, in time order
        self._sample()
        self._thread = threading.Thread(target=self._run, name="tcp-hpcc-pace-log", daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        with self._lock:
            acked = want = 0
            for s in self.sides:
                a, w = s.pace_bits()
                acked += a
                want += w
            meter = next((s.pacer for s in self.sides if s.pacer is not None), None)
            held = self.sides[0].counters(HELD).get("hpcc", {}) if self.sides else {}
            self.points.append((time.monotonic_ns(), acked, want,
                                meter.read() if meter is not None else None,
                                {k: v[1] for k, v in held.items()}))

    def _run(self) -> None:
        while not self._stop.wait(PACE_LOG_S):
            self._sample()

    def stop(self) -> None:
        """The last sample, then no more (before the engines stop)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(timeout=10)
        self._sample()

    def between(self, t_from: int, t_to: int, link_bps: float) -> dict:
        """KernelCc.pacing's figures from the last sample at or before
        t_from to the first at or after t_to (a window at most a period
        wider on each side; a window that ended since the last period is
        sampled now, while the log runs); empty unless both are there."""
        if not self._stop.is_set() and self.points[-1][0] < t_to:
            self._sample()                 # the window ended since the last period
        a = next((p for p in reversed(self.points) if p[0] <= t_from), None)
        b = next((p for p in self.points if p[0] >= t_to), None)
        if a is None or b is None or b[0] <= a[0]:
            return {}
        (t0, a0, w0, l0, h0), (t1, a1, w1, l1, h1) = a, b
        acked, want = a1 - a0, w1 - w0
        late = l1 - l0 if l0 is not None and l1 is not None else None
        hp = h1.get("used_hpcc", 0) - h0.get("used_hpcc", 0)
        held = {k[4:]: (h1[k] - h0.get(k, 0)) / hp for k in h1 if k.startswith("lim_") and hp > 0}
        return {"asked": want / (link_bps * (t1 - t0) / 1e9),
                "pace_lost": max(0.0, 1 - acked / want) if want > 0 else math.nan,
                "timer_late_us": late.mean_ns / 1e3 if late is not None else math.nan,
                "held": held}
