#!/usr/bin/env python3
"""Request/response latency of the native transport against kernel UDP on the
same veth, in one run (issue 14, item 7; docs/transport.md "Latency").

Two namespaces joined by one veth (hpccd.lab.namespaces.veth_pair), xdp_host
on both ends.  A request is a flow of --size bytes from a to b; b's engine
answers it with a flow of as many bytes (Transport(responder=True), the echo
responder in the engine); the round trip is from the request's open to the
delivery of the reply's last byte, both on the engines' clocks.  One request
at a time, --count of them, after 50 unmeasured.  For each wait strategy of
the engines:

- interrupt: the default (ppoll between deadlines, 20 us interrupt
  moderation after a batch: coalesce_ns);
- interrupt, no moderation (coalesce_ns = 0);
- busy: the threads poll the rings without sleeping (one core each).

Kernel UDP: scripts/udp_pingpong.c, one datagram of --size bytes echoed,
timed around send/recv.  Prints p50, p99 and their ratios to UDP's, and the
machine's busy share.

    sudo .venv/bin/python scripts/bench_latency.py --count 2000
"""
from __future__ import annotations

import argparse
import os
import pathlib
import secrets
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "daemon"))

from bench_report import busy_share, machine_cpu, machine_line, table  # noqa: E402
from hpccd.experiment.measure import percentile  # noqa: E402


def run_transport(pair, size: int, count: int, busy: bool, coalesce_ns: int) -> list[int]:
    from hpccd.transport.engine import Transport

    kw = {"busy_poll": busy, "config": {"coalesce_ns": coalesce_ns, "rx_flows": 64}}
    ncpu = os.cpu_count() or 1
    srv = Transport(pair.vb, netns=pair.b, responder=True, cpu=1 % ncpu if busy else None, **kw)
    cli = Transport(pair.va, netns=pair.a, cpu=0 if busy else None, **kw)
    flow_kw = {"algo": "dctcp", "int_mode": "none", "line_rate_bps": 10_000_000_000}
    try:
        srv.set_echo(**flow_kw)
        rtts = []
        for i in range(count + 50):
            f = cli.open_flow(pair.ip_b, size, **flow_kw)
            deadline = time.monotonic() + 5
            while True:
                # the RTT is on the engines' clocks: this loop only has to
                # find the reply.  It sleeps first and reads the request's
                # open time only afterwards: this thread's Python work
                # (a stats() call is ~100 us of it) would otherwise take
                # the CPU the two engines need for the round trip, as an
                # application waiting for its reply does not (measured:
                # 150-275 us of it between the request's arrival and the
                # server engine's turn on the same core)
                time.sleep(0.001)
                done = [r for r in cli.rx_flows() if r.done]
                if done:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"request {i}: no reply in 5 s")
            if done[0].bytes != size:
                raise RuntimeError(f"request {i}: a reply of {done[0].bytes} bytes")
            if i >= 50:
                rtts.append(done[0].stats["last_ns"] - f.stats().stats["start_ns"])
            f.wait(5)
            f.close()
            cli.rx_reap()
        return rtts
    finally:
        cli.close()
        srv.close()


def run_udp(pair, exe: str, size: int, count: int) -> list[int]:
    srv = pair.popen("b", [exe, "server", pair.ip_b, "18999", str(count + 50)],
                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(0.2)
    out = subprocess.run(["ip", "netns", "exec", pair.a, exe, "client", pair.ip_b, "18999",
                          str(count + 50), str(size)], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    srv.wait(timeout=10)
    return [int(x) for x in out.split()][50:]


def run_xsk(pair, exe: str, size: int, count: int, busy: bool) -> list[int]:
    """The floor of AF_XDP itself: scripts/xsk_pingpong.c, one frame of
    `size` bytes back and forth between two bare AF_XDP sockets."""
    mac = subprocess.run(["ip", "netns", "exec", pair.b, "cat",
                          f"/sys/class/net/{pair.vb}/address"],
                         capture_output=True, text=True, check=True).stdout.strip()
    mode = ["busy"] if busy else []
    srv = pair.popen("b", [exe, "server", pair.vb, str(count + 50), *mode],
                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)              # its socket bound and its XDP program attached
        out = subprocess.run(["ip", "netns", "exec", pair.a, exe, "client", pair.va,
                              str(count + 50), str(size), mac, *mode],
                             capture_output=True, text=True, timeout=120)
        if out.returncode:
            raise RuntimeError(f"xsk_pingpong client: {out.stderr.strip()[-300:]}")
        srv.wait(timeout=10)
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()
    return [int(x) for x in out.stdout.split()][50:]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--size", type=int, default=1024)
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("bench_latency: needs root (namespaces, XDP, AF_XDP)", file=sys.stderr)
        return 2
    from hpccd.lab.namespaces import pair_names, veth_pair

    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "udp_pingpong")
        subprocess.run(["gcc", "-O2", "-o", exe, str(ROOT / "scripts" / "udp_pingpong.c")],
                       check=True)
        xsk = os.path.join(tmp, "xsk_pingpong")
        subprocess.run(["gcc", "-O2", "-o", xsk, str(ROOT / "scripts" / "xsk_pingpong.c"),
                        "-lxdp", "-lbpf"], check=True)
        with veth_pair(*pair_names("hpccdb", secrets.token_hex(3)), "10.199.0.1",
                   "10.199.0.2") as pair:
            rows = []
            for name, fn in (
                    ("kernel UDP", lambda: run_udp(pair, exe, args.size, args.count)),
                    ("bare AF_XDP sockets, interrupt",
                     lambda: run_xsk(pair, xsk, args.size + 42, args.count, False)),
                    ("transport, interrupt (default)",
                     lambda: run_transport(pair, args.size, args.count, False, 20000)),
                    ("transport, interrupt, no moderation",
                     lambda: run_transport(pair, args.size, args.count, False, 0)),
                    ("transport, busy poll",
                     lambda: run_transport(pair, args.size, args.count, True, 0))):
                m0 = machine_cpu()
                v = fn()
                m1 = machine_cpu()
                rows.append((name, v, busy_share(m0, m1)))
    base50, base99 = percentile(rows[0][1], 50), percentile(rows[0][1], 99)
    print(f"{args.size}-byte request/response on a veth, {args.count} round trips each; "
          f"{machine_line()}")
    out = []
    for name, v, busy in rows:
        p50, p99 = percentile(v, 50), percentile(v, 99)
        out.append([name, f"{p50 / 1e3:.1f}", f"{p50 / base50:.2f}", f"{p99 / 1e3:.1f}",
                    f"{p99 / base99:.2f}", f"{statistics.mean(v) / 1e3:.1f}", f"{busy:.0%}"])
    print(table(["path", "p50 us", "p50 / UDP", "p99 us", "p99 / UDP", "mean us",
                 "machine busy"], out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
