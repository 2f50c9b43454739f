"""A real Prometheus (Debian's ``prometheus``) scrapes the daemons of a lab
during a transfer.

Lab: h1 -> s1 -> h2, the s1 -> h2 port 1 Gbit/s (the bottleneck), the
software INT switch on every port.  ``hpccd.lab.metrics.add_links`` gives
each host a management address the root namespace reaches (what ``hpccctl
lab prometheus`` does), each host runs a daemon (``transport``; h1's
``tcp_side`` too) whose exporter listens there, and the test starts ``prometheus`` in the root
namespace with the configuration ``prometheus_yml`` writes (scrape interval
1 s, its own storage in a temporary folder, an ephemeral port on loopback).

During the scrape window h1 sends four native flows at once through its
daemon (HPCC with probes, Rx-HPCC, DCTCP, LDCP), a kernel TCP flow
(``iperf3 -C hpcc``: the tc tracker's counters and the TCP side's probe
engine and CC) and a few malformed packets to h1's hpccd port (for the drop
counters).

Invariants protected, through Prometheus's HTTP API only:
- both targets are up, with the lab and host labels of the configuration;
- every metric documented in docs/metrics.md arrived (a histogram as its
  ``_bucket`` series), the per-hop INT ones from both hosts;
- h1's payload bytes sent are exactly the four flows' sizes, below its frame
  bytes sent; h2 counts the four flows it received under
  ``algorithm="unknown"`` and none under an algorithm;
- every PromQL expression of grafana/hpccd-dashboard.json (its variables set
  to match everything, ``$__rate_interval`` 4 s) returns data over the
  transfer's time range, as the dashboard would query it.
"""
from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.bpf]

if os.geteuid() != 0:
    pytest.skip("namespaces, XDP and AF_XDP need root", allow_module_level=True)

from hpccd.lab import metrics as lab_metrics  # noqa: E402
from hpccd.agent.control import request  # noqa: E402
from hpccd.experiment.common import line  # noqa: E402
from hpccd.lab.topology import Topology  # noqa: E402
from lab_hpccd import BUILT, LabHpccd, daemon_toml  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PORT = 9477
FLOW_BYTES = 120_000_000
TOPOLOGY = line("plab", "10.125.0.0/16", 0x0C1, 2000, 1_000_000, 1000, 500_000)


def config_text(d: pathlib.Path, host: str, address: str) -> str:
    # h1's daemon runs the TCP side too (its probe engine's metrics)
    comps = ["transport", "tcp_side"] if host == "h1" else ["transport"]
    return daemon_toml(control_socket=d / f"{host}.sock", metrics_address=f"{address}:{PORT}",
                       components=comps, key_file=d / "tag.key", rest="""\
        [hpcc]
        T_ns = 300000
        line_rate_bps = 2000000000
        mtu_bytes = 1500
        N_flows = 4

        [ldcp]
        line_rate_bps = 2000000000
        rtt_ns = 300000

        [[peers]]
        name = "lab"
        prefix = "10.125.0.0/16"
        dctcp_endpoint = true

        [metrics]
        top_flows = 5
        """)


def documented_series() -> list[str]:
    """Series names of every metric of docs/metrics.md's table."""
    out = []
    for name, kind in re.findall(r"^\| `(hpccd_\w+)` \| (\w+) \|",
                                 (ROOT / "docs" / "metrics.md").read_text(), flags=re.M):
        out.append(name + "_bucket" if kind == "histogram" else name)
    assert len(out) > 40
    return out


def dashboard_exprs() -> list[str]:
    d = json.loads((ROOT / "grafana" / "hpccd-dashboard.json").read_text())

    def walk(ps):
        for p in ps:
            yield p
            yield from walk(p.get("panels", []))

    return [t["expr"] for p in walk(d["panels"]) for t in p.get("targets", [])]


def promql(expr: str) -> str:
    """A dashboard expression as Grafana sends it, every variable matching all."""
    for var in ("instance", "algorithm", "peer"):
        expr = expr.replace(f'"${var}"', '".*"')
    return expr.replace("$__rate_interval", "4s")


class Prometheus:
    def __init__(self, d: pathlib.Path, config: str):
        (d / "prometheus.yml").write_text(config)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.log = open(d / "prometheus.log", "w+")
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={d / 'prometheus.yml'}",
             f"--storage.tsdb.path={d / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}",
             "--web.enable-lifecycle"], stdout=self.log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while True:
            assert self.proc.poll() is None, self.text()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready",
                                            timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            assert time.monotonic() < deadline, self.text()
            time.sleep(0.2)

    def text(self) -> str:
        self.log.flush()
        return pathlib.Path(self.log.name).read_text()[-3000:]

    def api(self, path: str, **params) -> dict:
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=30) as r:
            out = json.loads(r.read())
        assert out["status"] == "success", out
        return out["data"]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()


@pytest.fixture(scope="module")
def plab():
    for n in ("xdp_host", "tc_tracker", "int_switch"):
        if not (BUILT / f"{n}.bpf.o").exists():
            pytest.skip(f"build/ebpf/{n}.bpf.o is not built (make bpf)")
    if not os.path.exists(PROMETHEUS):
        pytest.skip("no prometheus server: apt-get install prometheus (scripts/run.sh "
                    "setup installs it)")
    from conftest import lab_ctx

    d = pathlib.Path(tempfile.mkdtemp(prefix="hpccd-prom-"))
    (d / "tag.key").write_text(os.urandom(16).hex() + "\n")
    procs = []
    prom = None
    try:
        with lab_ctx(Topology.loads(TOPOLOGY)) as lab:
            addrs = lab_metrics.add_links(lab.name)
            assert lab_metrics.add_links(lab.name) == addrs          # idempotent
            for h in ("h1", "h2"):
                procs.append(LabHpccd(lab, h, d, h, config_text(d, h, addrs[h]),
                                      d / f"{h}.sock"))
            for p in procs:
                p.wait_ready()
            prom = Prometheus(d, lab_metrics.prometheus_yml(lab.name, addrs, PORT, "1s"))
            lab.d, lab.addrs, lab.prom = d, addrs, prom
            yield lab
            for p in procs:
                assert p.stop(signal.SIGTERM) == 0, p.log()
    finally:
        if prom is not None:
            prom.stop()
        for p in procs:
            p.close()
        shutil.rmtree(d, ignore_errors=True)


def _scraping(prom, n: int = 3, timeout: float = 60) -> None:
    """Until every target has been scraped successfully `n` times."""
    deadline = time.monotonic() + timeout
    while True:
        res = prom.api("query", query=f"count_over_time(up[1m]) >= {n} and up == 1")["result"]
        if len(res) == 2:
            return
        assert time.monotonic() < deadline, (res, prom.api("targets"))
        time.sleep(0.5)


def _transfer(lab) -> tuple[float, float]:
    """Four native flows, a kernel TCP flow and a few malformed packets;
    returns the (start, end) wall times of the window to query."""
    _scraping(lab.prom)
    sock = str(lab.d / "h1.sock")
    h2 = lab.address("h2")
    t0 = time.time()
    srv = lab.popen("h2", ["iperf3", "-s", "-1", "-p", "5299"], stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    cli = lab.popen("h1", ["iperf3", "-c", h2, "-p", "5299", "-n", "30M", "-C", "hpcc"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ids = [request(sock, "send", {"peer": h2, "bytes": FLOW_BYTES, "algo": a})["id"]
           for a in ("hpcc", "rx-hpcc", "dctcp", "ldcp")]
    s = lab.socket("h2")
    for _ in range(5):
        s.sendto(b"\x00" * 64, (lab.address("h1"), 18471))
        time.sleep(0.2)
    deadline = time.monotonic() + 120
    while True:
        res = request(sock, "transfer")
        done = {r["id"]: r for r in res["results"] if r["role"] == "sender"}
        if all(i in done for i in ids):
            break
        assert time.monotonic() < deadline, res
        time.sleep(0.25)
    assert all(done[i]["state"] == "done" for i in ids), [done[i] for i in ids]
    assert cli.wait(60) == 0
    srv.wait(30)
    time.sleep(3)                       # the last scrapes after the flows ended
    return t0, time.time()


def test_prometheus_scrapes_every_documented_series_and_the_dashboard_has_data(plab):
    prom = plab.prom
    t0, t1 = _transfer(plab)
    targets = prom.api("targets")["activeTargets"]
    assert sorted((t["labels"]["host"], t["health"]) for t in targets) == \
        [("h1", "up"), ("h2", "up")], targets
    assert {t["labels"]["lab"] for t in targets} == {plab.name}
    names = set(prom.api("label/__name__/values", start=t0 - 60, end=t1))
    # h1's daemon runs the TCP side too: its probe engine's families arrive
    missing = [n for n in documented_series() if n not in names]
    assert not missing, f"documented series Prometheus never received: {missing}"
    # the per-hop INT series of native flows, from both daemons' hosts
    hops = prom.api("query_range", query="hpccd_int_hop_queue_bytes", start=t0, end=t1,
                    step=1)["result"]
    assert {r["metric"]["host"] for r in hops} == {"h1", "h2"}, hops

    def at_end(q: str) -> dict[str, float]:
        return {r["metric"].get("algorithm", ""): float(r["value"][1])
                for r in prom.api("query", query=q, time=t1)["result"]}

    # what the counters mean: payload sent once (the four flows' bytes) below the frame
    # bytes; the receiver cannot know the sender's algorithm and says so
    payload = at_end('sum(hpccd_sent_payload_bytes_total{host="h1"})')[""]
    wire = at_end('sum(hpccd_sent_bytes_total{host="h1"})')[""]
    assert payload == 4 * FLOW_BYTES and payload < wire, (payload, wire)
    received = at_end('sum by (algorithm) (hpccd_flows_completed_total{host="h2"})')
    assert received.pop("unknown") >= 4 and not any(received.values()), received
    empty = []
    for expr in dashboard_exprs():
        q = promql(expr)
        res = prom.api("query_range", query=q, start=t0, end=t1, step=1)["result"]
        if not any(v != "NaN" for r in res for _, v in r["values"]):
            empty.append(q)
    print(f"\n[prometheus] {len(documented_series())} documented series arrived; "
          f"{len(dashboard_exprs()) - len(empty)} of {len(dashboard_exprs())} dashboard "
          f"expressions with data over {t1 - t0:.1f} s")
    assert not empty, "dashboard expressions without data:\n" + "\n".join(empty)
