"""The real hpccd processes in the lab: native flows opened through the
control socket, kernel TCP under the TCP side, crash and restart.

Lab: h1 -> s1 -> h2, access links 2 Gbit/s, the s1 -> h2 port 1 Gbit/s with a
500 KB buffer (the bottleneck), the software INT switch on every port, no
ECN marking.  One daemon per host, started with ``ip netns exec``: h1 runs the
``transport`` and ``tcp_side`` components, h2 the ``transport`` component;
both read the same integrity key file, so h2's xdp_host signs the probe
responses (native and TCP-side) that h1 verifies.

Invariants protected:
- ``hpccctl send --daemon`` opens a native flow in the running daemon with
  its configuration: a probe-mode HPCC flow (``probes.mode = "probe"``) and
  an Rx-HPCC flow complete, the receiving daemon's CRC-32 equals the
  sender's, and the bottleneck queue stays near empty (median at most two
  frames, 90th percentile under 10 % of the buffer; best of three on the
  shared machine); the probe flow sent probes once per RTT that were
  answered, the Rx-HPCC flow applied the receiver's windows (in its ACKs);
- the flows appear in ``hpccctl flows`` while running, and in the metrics
  scraped over HTTP afterwards (completed flows, FCT histogram, probes,
  windows);
- an ACK with a forged tag, sent to a live flow from the receiver's
  address and port, is dropped and counted:
  ``hpccd_drops_total{layer="transport",cause="feedback_tag"}`` over HTTP;
- kernel TCP ``iperf3 -C hpcc`` under the daemon's TCP side keeps the
  bottleneck queue well below cubic's in the same run (median, p90 and mean
  at most a quarter; both printed);
- SIGKILL of h1's daemon and a restart leave exactly one XDP program and one
  tc filter of the daemon's on eth0 (the new ones; the old programs
  unloaded; the lab's departure stamp on eth0's ingress untouched) and one
  registered struct_ops "hpcc" and "dctcp"; the restarted daemon works
  (another flow completes).
"""
from __future__ import annotations

import contextlib
import json
import os
import pathlib
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import tempfile
import threading
import time
import urllib.request

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.bpf]

if os.geteuid() != 0:
    pytest.skip("namespaces, XDP, tc and struct_ops need root", allow_module_level=True)

from hpccd.bpf import loader as bpf  # noqa: E402
from hpccd.lab.topology import Topology  # noqa: E402
from hpccd.experiment.common import line  # noqa: E402
from lab_hpccd import BUILT, LabHpccd, daemon_toml, start_when_free  # noqa: E402
from lab_hpccd import samples as prom_samples  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
HPCCCTL = shutil.which("hpccctl") or str(ROOT / ".venv" / "bin" / "hpccctl")
METRICS_PORT = 9477
BUFFER = 500_000
BOTTLENECK = ("s1", 2)
T_NS = 300_000
ATTEMPTS = 3
TOPOLOGY = line("dlab", "10.121.0.0/16", 0x0A1, 2000, 1_000_000, 1000, BUFFER)


def config_text(d: pathlib.Path, host: str, components: list[str]) -> str:
    return daemon_toml(control_socket=d / f"{host}.sock",
                       metrics_address=f"127.0.0.1:{METRICS_PORT}", components=components,
                       key_file=d / "tag.key", rest=f"""\
        [hpcc]
        T_ns = {T_NS}
        line_rate_bps = 2000000000
        mtu_bytes = 1500
        eta = 0.95
        N_flows = 1
        """)


class Daemon(LabHpccd):
    def __init__(self, lab, d: pathlib.Path, host: str, components: list[str], n: int = 0):
        super().__init__(lab, host, d, f"{host}-{n}", config_text(d, host, components),
                         d / f"{host}.sock")

    def ctl(self, *args: str, check: bool = True, timeout: float = 120):
        r = subprocess.run(["ip", "netns", "exec", self.lab.netns(self.host), HPCCCTL, *args],
                           capture_output=True, text=True, timeout=timeout)
        if check:
            assert r.returncode == 0, (args, r.stdout, r.stderr, self.log()[-3000:])
        return r

    def ctl_json(self, *args: str):
        return json.loads(self.ctl(*args, "--json", "--socket", self.sock).stdout)

    def request(self, cmd: str, **args):
        from hpccd.agent.control import request
        return request(self.sock, cmd, args)

    def scrape(self) -> str:
        with bpf.in_netns(self.lab.netns(self.host)):
            with urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics",
                                        timeout=20) as r:
                return r.read().decode()


def _sum(samples, name: str, **labels) -> float:
    return sum(v for lb, v in samples.get(name, [])
               if all(lb.get(k) == x for k, x in labels.items()))


def _pct(q: list[int], p: float) -> int:
    q = sorted(q)
    return q[min(len(q) - 1, int(p / 100 * len(q)))]


class QueueRecorder:
    """The bottleneck port's backlog, sampled by the INT switch."""

    def __init__(self, lab):
        self.sampler = lab.int_switch.sampler(BOTTLENECK[0])
        self.sampler.read()
        self.samples: list = []
        self._stop = threading.Event()
        self._th = threading.Thread(target=self._run)
        self._th.start()

    def _run(self):
        while not self._stop.is_set():
            self.samples += [s for s in self.sampler.read() if s.port == BOTTLENECK[1]]
            self._stop.wait(0.05)

    def stop(self) -> list:
        self._stop.set()
        self._th.join()
        self.samples += [s for s in self.sampler.read() if s.port == BOTTLENECK[1]]
        return self.samples


@pytest.fixture(scope="module")
def dlab():
    for n in ("xdp_host", "tc_tracker", "tcp_hpcc", "tcp_dctcp", "int_switch"):
        if not (BUILT / f"{n}.bpf.o").exists():
            pytest.skip(f"build/ebpf/{n}.bpf.o is not built (make bpf)")
    from conftest import lab_ctx

    d = pathlib.Path(tempfile.mkdtemp(prefix="hpccd-dl-"))
    (d / "tag.key").write_text(os.urandom(16).hex() + "\n")
    daemons: list[Daemon] = []
    try:
        with lab_ctx(Topology.loads(TOPOLOGY)) as lab:
            lab.int_switch.configure(*BOTTLENECK, ecn=None)
            lab.probe("h1", "h2")
            lab.d = d
            lab.daemons = {}

            def start(host: str, components: list[str]) -> Daemon:
                # tcp_side's struct_ops are host-wide: another test run may
                # own them for a while (TcpCc's lock); retry until it is free.
                def make() -> Daemon:
                    dm = Daemon(lab, d, host, components, len(daemons))
                    daemons.append(dm)
                    return dm
                dm = start_when_free(make, "lock")
                lab.daemons[host] = dm
                return dm

            lab.start_daemon = start
            start("h2", ["transport"])
            start("h1", ["transport", "tcp_side"])
            yield lab
            for dm in daemons:
                if dm.proc.poll() is None:
                    assert dm.stop() == 0, dm.log()[-3000:]
    finally:
        for dm in daemons:
            with contextlib.suppress(Exception):
                dm.close()
        shutil.rmtree(d, ignore_errors=True)


def _received(h2: Daemon, h1_addr: str, sport: int, timeout: float = 10) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        for r in h2.request("transfer")["results"]:
            if r["role"] == "receiver" and r["peer"] == h1_addr and r["sport"] == sport:
                return r
        assert time.monotonic() < deadline, "the receiving daemon has no record of the flow"
        time.sleep(0.05)


def _send_through_daemon(lab, algo: str, nbytes: int) -> dict:
    h1, h2 = lab.daemons["h1"], lab.daemons["h2"]
    rec = QueueRecorder(lab)
    try:
        r = h1.ctl("send", lab.address("h2"), "--bytes", str(nbytes), "--algo", algo,
                   "--daemon", h1.sock, "--json", "--timeout", "60")
    finally:
        samples = rec.stop()
    res = json.loads(r.stdout)
    got = _received(h2, lab.address("h1"), res["sport"])
    assert res["state"] == "done" and got["bytes"] == nbytes == res["bytes"]
    assert got["crc32"] == res["crc32"], (got, res)
    # steady state: from 10 % of the FCT on, until 5 % before its end
    end = max(s.ts_ns for s in samples)
    t0 = end - res["fct_s"] * 1e9
    w = [s for s in samples if t0 + 0.1 * res["fct_s"] * 1e9 <= s.ts_ns
         <= end - 0.05 * res["fct_s"] * 1e9]
    q = [s.backlog_bytes for s in w] or [0]
    util = ((w[-1].tx_bytes - w[0].tx_bytes) * 8 / ((w[-1].ts_ns - w[0].ts_ns) / 1e9) / 1e9
            if len(w) > 2 else 0.0)
    res.update(q50=_pct(q, 50), q90=_pct(q, 90), qmax=max(q), util=util, n=len(w))
    return res


@pytest.mark.parametrize("algo", ["hpcc", "rx-hpcc"])
def test_native_flows_through_the_daemon(dlab, algo):
    h1 = dlab.daemons["h1"]
    runs = []
    for _ in range(ATTEMPTS):
        m = _send_through_daemon(dlab, algo, 60_000_000)
        runs.append(m)
        print(f"\n[daemon] {algo} ({m['int_mode']}): FCT {m['fct_s']:.3f} s, goodput "
              f"{m['goodput_bps'] / 1e6:.0f} Mbit/s, utilisation {m['util']:.3f}, queue p50/p90/"
              f"max {m['q50']}/{m['q90']}/{m['qmax']} B ({m['n']} samples), probes "
              f"{m['probes_sent']}/{m['probes_answered']}/{m['probes_lost']} sent/answered/lost, "
              f"windows {m['rx_windows']}, retransmitted {m['retx_packets']}, srtt "
              f"{m['srtt_s'] * 1e6:.0f} us")
        if m["q50"] <= 2 * 1514 and m["q90"] < BUFFER / 10:
            break
    best = min(runs, key=lambda m: m["q90"])
    assert best["q50"] <= 2 * 1514 and best["q90"] < BUFFER / 10, runs
    for m in runs:
        if algo == "hpcc":
            assert m["int_mode"] == "probe"
            assert m["probes_answered"] > 0.9 * m["probes_sent"] > 100, m
        else:
            assert m["int_mode"] == "every" and m["rx_windows"] > 10, m
    s = prom_samples(h1.scrape())
    # the engine of queue 0 is listed, with its flows (all done by now)
    assert any(lb.get("queue") == "0" and lb.get("role") == "sender"
               for lb, _ in s.get("hpccd_engine_flows", [])), s.get("hpccd_engine_flows")
    assert _sum(s, "hpccd_engine_flows", role="sender") == 0
    assert _sum(s, "hpccd_flows_completed_total", algorithm=algo) >= len(runs)
    assert _sum(s, "hpccd_flow_completion_seconds_count", algorithm=algo) >= len(runs)
    if algo == "hpcc":
        assert _sum(s, "hpccd_probes_answered_total", algorithm="hpcc") > 100
        assert _sum(s, "hpccd_probe_rtt_seconds_count", algorithm="hpcc") > 0
    else:
        assert _sum(s, "hpccd_notify_received_total", algorithm="rx-hpcc") > 10
        s2 = prom_samples(dlab.daemons["h2"].scrape())
        assert _sum(s2, "hpccd_notify_sent_total") > 10


def test_hpccctl_lab_hook_gives_the_daemons_last_hop_its_departure(dlab):
    """``hpccctl lab hook NAME h2`` (another process than the one that built
    the lab, through its pins) fills the hook of h2's daemon's xdp_host: the
    DATA of an Rx-HPCC flow (INT in every DATA) into h2's daemon get the
    bottleneck port's record rewritten at departure, in XDP (the daemon
    takes them before tc ingress); ``--off`` empties it and the records stay
    the enqueue ones, as without the lab's hook.  The daemon is not
    restarted or reconfigured for either."""
    sw = dlab.int_switch

    def hook(*extra: str) -> None:
        r = subprocess.run([HPCCCTL, "lab", "hook", dlab.name, "h2", *extra],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, (r.stdout, r.stderr)

    def transfer() -> dict[str, int]:
        c0 = sw.counters(*BOTTLENECK)
        _send_through_daemon(dlab, "rx-hpcc", 5_000_000)
        c1 = sw.counters(*BOTTLENECK)
        d = {k: c1[k][0] - c0[k][0] for k in c1}
        assert d["int_stamped"] > 5_000_000 // 1500, d
        # all of them: every record the host saw is counted once, as
        # departed or no dequeue (the lab's Known limits); a mismatch is a
        # packet the bottleneck's bfifo dropped, whose entry a later packet
        # with the same sk_buff address met (docs/lab.md), counted beside
        # the stamped ones or among them (CI: 3,582 departed of 3,582
        # stamped with 2 mismatches, and 3,582 of 3,584 with 2)
        seen = d["int_departed"] + d["int_dep_no_deq"]
        assert seen <= d["int_stamped"] <= seen + d["int_dep_mismatch"], d
        return d

    hook()
    try:
        runs = [transfer()]
        # The records whose dequeue the kernel's tracepoint did not report
        # keep their enqueue values (docs/lab.md, Known limits: none in
        # most runs, 72 and 118 of 3,582 in two fresh-clone CI runs of
        # session 18, bursts on a loaded machine): such a run is sent once
        # more, and the second must hold the bound (a rewrite that does
        # not work departs none in either)
        if runs[0]["int_departed"] < 0.999 * runs[0]["int_stamped"]:
            runs.append(transfer())
    finally:
        hook("--off")
    print(f"\n[lab hook] departed / stamped / no dequeue seen: "
          + "; ".join(f"{d['int_departed']} / {d['int_stamped']} / {d['int_dep_no_deq']}"
                      for d in runs))
    assert all(d["int_departed"] >= 0.9 * d["int_stamped"] for d in runs), runs
    assert runs[-1]["int_departed"] >= 0.999 * runs[-1]["int_stamped"], runs
    c0 = sw.counters(*BOTTLENECK)
    _send_through_daemon(dlab, "rx-hpcc", 2_000_000)
    c1 = sw.counters(*BOTTLENECK)
    d = {k: c1[k][0] - c0[k][0] for k in c1}
    assert d["int_stamped"] > 2_000_000 // 1500 and d["int_departed"] == 0, d
    r = subprocess.run([HPCCCTL, "lab", "hook", dlab.name, "nohost"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1 and "no host 'nohost'" in r.stderr and "Traceback" not in r.stderr


def _forged_ack(flow_id: int) -> bytes:
    """An ACK with an Rx-HPCC window of 1000 bytes and a trailer whose tag is zero."""
    int_hdr = bytes([0xC1, 0x00, 0x00, 0x00])
    body = struct.pack("!IIHHI", 1000, 0, 1, 0, T_NS) + struct.pack("!II", 1 << 30, 1) + bytes(8)
    hdr = struct.pack("!BBHIIIIIII", 0x10 | 2, 0, len(body), flow_id, 0, 0, 0, 0, 0, 0)
    return int_hdr + hdr + body


def test_forged_ack_dropped_and_counted_in_metrics(dlab):
    h1 = dlab.daemons["h1"]
    before = _sum(prom_samples(h1.scrape()), "hpccd_drops_total", layer="transport",
                  cause="feedback_tag")
    info = h1.request("send", peer=dlab.address("h2"), bytes=400_000_000, algo="rx-hpcc")
    try:
        deadline = time.monotonic() + 10
        while h1.request("transfer", id=info["id"])["bytes_acked"] == 0:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        rows = h1.ctl_json("flows")
        assert any(r["id"] == info["id"] and r["algorithm"] == "rx-hpcc" for r in rows), rows
        with bpf.in_netns(dlab.netns("h2")):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.bind((dlab.address("h2"), 18471))
            for _ in range(5):
                s.sendto(_forged_ack(info["engine_flow_id"]),
                         (dlab.address("h1"), info["sport"]))
        finally:
            s.close()
        deadline = time.monotonic() + 60
        while h1.request("transfer", id=info["id"])["state"] == "running":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        res = h1.request("transfer", id=info["id"])
    finally:
        pass
    assert res["state"] == "done"
    after = _sum(prom_samples(h1.scrape()), "hpccd_drops_total", layer="transport",
                 cause="feedback_tag")
    print(f"\n[daemon] forged ACK: feedback_tag drops {before:.0f} -> {after:.0f}; the flow "
          f"applied {res['rx_windows']} genuine windows")
    assert after - before == 5
    assert res["rx_windows"] > 0


# ---- kernel TCP under the TCP side --------------------------------------------------------

_port = 5400


def run_iperf(lab, cc: str, seconds: int = 4, warmup_s: float = 1.0) -> dict:
    global _port
    _port += 1
    srv = lab.popen("h2", ["iperf3", "-s", "-1", "-p", str(_port)], stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    rec = QueueRecorder(lab)
    t0 = time.monotonic_ns()
    cli = lab.popen("h1", ["iperf3", "-c", lab.address("h2"), "-p", str(_port), "-C", cc,
                           "-t", str(seconds), "-J"],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = cli.communicate(timeout=60)
    samples = rec.stop()
    assert cli.returncode == 0, err
    srv.wait(timeout=10)
    res = json.loads(out)
    q = sorted(s.backlog_bytes for s in samples if s.ts_ns >= t0 + warmup_s * 1e9)
    assert len(q) > 500, f"only {len(q)} queue samples"
    return {"cc": cc, "goodput_mbps": res["end"]["sum_received"]["bits_per_second"] / 1e6,
            "congestion": res["end"].get("sender_tcp_congestion", ""),
            "p50": _pct(q, 50), "p90": _pct(q, 90), "p99": _pct(q, 99), "max": q[-1],
            "mean": statistics.fmean(q)}


def test_iperf3_hpcc_under_the_daemon_below_cubic(dlab):
    if shutil.which("iperf3") is None:
        pytest.skip("iperf3 is not installed")
    h1 = dlab.daemons["h1"]
    started0 = _sum(prom_samples(h1.scrape()), "hpccd_flows_started_total", algorithm="hpcc")
    runs = []
    for _ in range(2):
        runs.append(run_iperf(dlab, "cubic"))
        p0 = h1.ctl_json("status")["components"]["tcp_side"]
        runs.append(run_iperf(dlab, "hpcc"))
        p1 = h1.ctl_json("status")["components"]["tcp_side"]
        runs[-1]["probes"] = {k: p1[k] - p0[k] for k in ("probes_sent", "probes_answered",
                                                          "probes_lost", "windows_written")}
        runs[-1]["pace"] = {k: p1[k] - p0[k] for k in ("pace_want_bits", "pace_acked_bits")}
    for r in runs:
        print(f"\n[daemon tcp_side] {r['cc']:>5}: {r['goodput_mbps']:.0f} Mbit/s, queue p50 "
              f"{r['p50'] / 1e3:.1f} KB p90 {r['p90'] / 1e3:.1f} KB p99 {r['p99'] / 1e3:.1f} KB "
              f"max {r['max'] / 1e3:.1f} KB mean {r['mean'] / 1e3:.1f} KB"
              + (f", probes {r['probes']}, HPCC asked for "
                 f"{r['pace']['pace_want_bits'] / (1e9 * 4):.2f} of the link over 4 s, the "
                 f"flow had {r['pace']['pace_acked_bits'] / max(1, r['pace']['pace_want_bits']):.0%}"
                 f" of it acked" if "probes" in r else ""))
    for r in runs[1::2]:
        assert r["congestion"] == "hpcc"
        assert r["probes"]["probes_answered"] > 100 and r["probes"]["windows_written"] > 100
        assert r["goodput_mbps"] > 300, r
        # what HPCC's written rates allowed and what the flow had acked between
        # its responses: the acked bits are (nearly all of) what iperf3 got,
        # and no more than the rates allowed, give or take an interval's lag
        got = r["goodput_mbps"] * 1e6 * 4
        assert 0.6 * got <= r["pace"]["pace_acked_bits"] <= 1.1 * got, r
        assert r["pace"]["pace_acked_bits"] <= 1.1 * r["pace"]["pace_want_bits"], r
    for cub, hp in zip(runs[0::2], runs[1::2]):
        assert cub["p50"] > 0.3 * BUFFER, cub
        for k in ("p50", "p90", "mean"):
            assert hp[k] <= cub[k] / 4, (k, cub, hp)
    # the kernel flows were in the daemon's flow table (kind tcp), one at
    # least per iperf3 -C hpcc run, and are finished when they end
    time.sleep(1.5)                                  # idle_s: the tracker lets them go
    m = prom_samples(h1.scrape())
    assert _sum(m, "hpccd_flows_started_total", algorithm="hpcc") - started0 >= 2
    assert not [f for f in h1.ctl_json("flows") if f.get("kind") == "tcp"]
    # the probes' INT shows up per (pathID, hop): s1 (id 0x0a1) is hop 0 of
    # h1 -> h2, its port a 1 Gbit/s link the flows kept busy
    m = prom_samples(h1.scrape())
    q = [v for lb, v in m.get("hpccd_int_hop_queue_bytes", [])
         if lb.get("path_id") == "0x0a1" and lb.get("hop") == "0"]
    u = [v for lb, v in m.get("hpccd_int_hop_utilization_ratio", [])
         if lb.get("path_id") == "0x0a1" and lb.get("hop") == "0"]
    assert len(q) == 1 and 0 <= q[0] <= BUFFER, m.get("hpccd_int_hop_queue_bytes")
    print(f"[daemon tcp_side] s1 hop 0 after the runs: queue {q} B, utilisation {u}")
    # utilisation over >= 1 ms (HPCCD_INT_UTIL_SPAN_NS): a shaped port's
    # burst is a small part of it (two probes microseconds apart once gave 1.55)
    assert len(u) == 1 and 0 <= u[0] <= 1.5, m.get("hpccd_int_hop_utilization_ratio")
    # the kernel paced the hpcc flows itself: the daemon timed its pacing
    # timer (hpccd.tcp_side.pacer), thousands of expiries in 2 x 3 s
    late_n = _sum(m, "hpccd_tcp_pacer_lateness_seconds_count")
    late_s = _sum(m, "hpccd_tcp_pacer_lateness_seconds_sum")
    print(f"[daemon tcp_side] pacer: {late_n:.0f} expiries, mean "
          f"{late_s / late_n * 1e6 if late_n else float('nan'):.1f} us late")
    assert late_n > 1000 and late_s > 0, (late_n, late_s)
    # the same totals as metrics (the flows are over: the engine's counters stand)
    st = h1.ctl_json("status")["components"]["tcp_side"]
    assert _sum(m, "hpccd_tcp_pacing_asked_bits_total") == st["pace_want_bits"] > 0
    assert _sum(m, "hpccd_tcp_pacing_acked_bits_total") == st["pace_acked_bits"] > 0


# ---- crash and restart ------------------------------------------------------------------------

def _struct_ops(prefix: str = "hpccd_tcp_") -> list[str]:
    """Names of the struct_ops maps that exist (registered or not yet freed)."""
    lib, ffi = bpf.lib, bpf.ffi
    names, start = [], 0
    nxt = ffi.new("uint32_t *")
    while lib.hpccd_bpf_map_next_id(start, nxt) == 0:
        start = nxt[0]
        fd = lib.hpccd_bpf_map_fd_by_id(start)
        if fd < 0:
            continue
        try:
            info = ffi.new("struct hpccd_bpf_map_info *")
            if lib.hpccd_bpf_map_info(fd, info) == 0:
                name = ffi.string(info.name).decode()
                if info.type == lib.HPCCD_BPF_MAP_TYPE_STRUCT_OPS and name.startswith(prefix):
                    names.append(name)
        finally:
            os.close(fd)
    return sorted(names)


def _attached(lab) -> tuple[int | None, list]:
    """The daemon's programs on h1's eth0 (its tc filters carry its prefix;
    the lab's own departure stamp on that interface's ingress does not)."""
    with bpf.in_netns(lab.netns("h1")):
        return bpf.xdp_query("eth0", "skb"), [f for f in bpf.tc_list("eth0")
                                              if f.name.startswith(bpf.NAME_PREFIX)]


def test_sigkill_and_restart_leave_no_duplicates(dlab):
    old = dlab.daemons["h1"]
    xdp0, tc0 = _attached(dlab)
    assert xdp0 is not None and len(tc0) == 1
    so0 = _struct_ops()
    assert so0.count("hpccd_tcp_hpcc") == 1 and so0.count("hpccd_tcp_dctcp") == 1, so0
    old.stop(signal.SIGKILL)
    assert _attached(dlab)[0] == xdp0            # a killed daemon leaves them
    new = dlab.start_daemon("h1", ["transport", "tcp_side"])
    xdp1, tc1 = _attached(dlab)
    assert xdp1 is not None and xdp1 != xdp0
    assert len(tc1) == 1 and tc1[0].prog_id != tc0[0].prog_id
    assert "removed what a previous daemon left" in new.log()
    # the lab's departure stamp on eth0's ingress is not the daemon's: its
    # clean-up of a previous daemon's programs left it there
    with bpf.in_netns(dlab.netns("h1")):
        assert [f.direction for f in bpf.tc_list("eth0") if f.name == "int_sw_depart"] == \
            ["ingress"]
    deadline = time.monotonic() + 15
    while True:                                  # freed after an RCU grace period
        so1 = _struct_ops()
        if so1.count("hpccd_tcp_hpcc") == 1 and so1.count("hpccd_tcp_dctcp") == 1:
            break
        assert time.monotonic() < deadline, so1
        time.sleep(0.2)
    avail = open("/proc/sys/net/ipv4/tcp_available_congestion_control").read().split()
    assert avail.count("hpcc") == 1 and avail.count("dctcp") == 1, avail
    st = new.ctl_json("status")
    assert st["interfaces"][0]["xdp_attached"] and st["interfaces"][0]["tc_attached"]
    assert st["components"]["transport"]["healthy"]
    # the restarted daemon carries a probe-mode flow end to end
    m = _send_through_daemon(dlab, "hpcc", 5_000_000)
    assert m["probes_answered"] > 0


class _KernelPath:
    """Kernel traffic across h1 -> h2 during the faults: a UDP round trip
    (Lab.probe, no ICMP) every 20 ms in a thread; the longest gap between
    two answered ones is what "kernel traffic works throughout" allows."""

    def __init__(self, lab):
        self.lab, self.ok, self.errors = lab, [], []
        self._stop = threading.Event()
        self._th = threading.Thread(target=self._run, daemon=True)
        self._th.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                self.lab.probe("h1", "h2", timeout=2.0)
                self.ok.append(time.monotonic())
            except Exception as e:               # counted, the loop goes on
                self.errors.append(repr(e))
            self._stop.wait(0.02)

    def stop(self) -> float:
        self._stop.set()
        self._th.join(10)
        return max((b - a for a, b in zip(self.ok, self.ok[1:])), default=float("inf"))


def _send_in_background(lab, nbytes: int, timeout_s: float):
    h1, h2 = lab.daemons["h1"], lab.daemons["h2"]
    return lab.popen("h1", [HPCCCTL, "send", lab.address("h2"), "--bytes", str(nbytes),
                            "--algo", "hpcc", "--daemon", h1.sock, "--json",
                            "--timeout", str(timeout_s)],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _progressing(lab, timeout: float = 10) -> None:
    """Until the sending daemon has a running flow with bytes acknowledged."""
    h1 = lab.daemons["h1"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running = h1.request("transfer")["running"]
        if running and h1.request("transfer", id=running[-1]["id"]).get(
                "bytes_acked", 0) > 1_000_000:
            return
        time.sleep(0.05)
    raise AssertionError("the transfer never got going")


def test_daemons_restarted_or_killed_mid_transfer(dlab):
    """Issue 9 with native flows under real daemons.  The receiver's daemon
    restarted in the middle of a transfer: the sender's flow fails with a
    clear error to its caller, within a bound, and the next transfer
    completes byte-exact.  The sender's daemon SIGKILLed in the middle of a
    transfer: its caller gets a clear error at once; after a restart a
    transfer completes.  Kernel traffic between the hosts is answered
    throughout."""
    path = _KernelPath(dlab)
    try:
        # -- the receiver's daemon restarted -------------------------------------------------
        send = _send_in_background(dlab, 4_000_000_000, timeout_s=60)
        _progressing(dlab)
        t_kill = time.monotonic()
        assert dlab.daemons["h2"].stop(signal.SIGTERM) == 0
        dlab.start_daemon("h2", ["transport"])
        out, err = send.communicate(timeout=90)
        waited = time.monotonic() - t_kill
        assert send.returncode == 1, (out, err)
        assert "hpccctl send: flow" in err and "failed" in err, err
        assert waited < 30, f"the sender noticed the lost receiver only after {waited:.1f} s"
        m = _send_through_daemon(dlab, "hpcc", 5_000_000)       # byte-exact (CRC) again
        assert m["state"] == "done"

        # -- the sender's daemon SIGKILLed ---------------------------------------------------
        send = _send_in_background(dlab, 4_000_000_000, timeout_s=60)
        _progressing(dlab)
        t_kill = time.monotonic()
        dlab.daemons["h1"].stop(signal.SIGKILL)
        out, err = send.communicate(timeout=30)
        assert send.returncode == 1 and "hpccctl send:" in err, (out, err)
        assert time.monotonic() - t_kill < 10
        dlab.start_daemon("h1", ["transport", "tcp_side"])
        m = _send_through_daemon(dlab, "hpcc", 5_000_000)
        assert m["state"] == "done"
    finally:
        gap = path.stop()
    assert path.ok and gap < 2.5, (gap, path.errors[:3])
