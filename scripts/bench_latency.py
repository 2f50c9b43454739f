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
- busy: the threads poll the rings without sleeping (one core each);
- caller drives (run to completion): the client's application thread
  sends the request from open_flow() and runs the engine's loop itself
  while it waits for the reply (Transport(drive="caller"), Transport.run),
  sleeping in ppoll() on the socket; the server as by default.  Also printed
  for it: the round trip as the application sees it (open_flow() called ->
  run() returned, Python's own work included);
- request: the same with Transport.request(), which opens the request and
  waits for its answer in one C call (the socket the caller's before the
  request leaves);
- caller-apart / request-apart / caller-onecpu: the caller and request rows
  with the busy threads placed: the client's application thread (driving its
  engine) and its engine thread on CPU 0, the server engine on CPU 1; or all
  of them on CPU 0;
- caller-nocsum / caller-nosg / caller-nofrags: the caller row without TX
  metadata, without XDP_USE_SG, with xdp_host built without xdp.frags (what a
  DATA frame's sendto() costs);
- request-busy / caller-busy: the request and caller rows busy polling
  (Transport(drive="caller", busy_poll=True): the caller polls the rings
  while it waits, its engine's thread sleeps), the server's engine thread
  busy polling; the caller on CPU 0, the server engine on CPU 1 -- two
  cores at 100 % while requests are outstanding;
- udp-busy / xsk-busy: kernel UDP and the bare AF_XDP sockets polling
  (MSG_DONTWAIT / the rings) with the same placement, for comparison.
--rows picks and repeats rows.

Kernel UDP: scripts/udp_pingpong.c, one datagram of --size bytes echoed,
timed around send/recv, each side waiting in recv(2).  Prints p50, p99 and
their ratios to it (the issue's baseline), and the machine's busy share.

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


APP_RTTS: list[int] = []     # the caller-driven row's round trips as the application sees them


def run_caller(cli, pair, size: int, count: int, flow_kw: dict, one_call: bool = False
               ) -> list[int]:
    """The client drives its engine: open_flow() sends the request from this
    thread, run() runs the loop here until the reply is delivered; one_call:
    Transport.request() does both in one C call."""
    mac = cli.next_hop_mac(pair.ip_b)
    n = cli.stats()["rx_done"]
    rtts = []
    APP_RTTS.clear()
    for i in range(count + 50):
        t0 = time.perf_counter_ns()
        if one_call:
            f, m = cli.request(pair.ip_b, size, rx_done=n, timeout=0.5, dmac=mac, **flow_kw)
        else:
            f, m = cli.open_flow(pair.ip_b, size, dmac=mac, **flow_kw), n
        deadline = time.monotonic() + 5
        while m <= n and (m := cli.run(rx_done=n, timeout=0.5)) <= n:
            if time.monotonic() > deadline:
                raise RuntimeError(f"request {i}: no reply in 5 s")
        t1 = time.perf_counter_ns()
        n = m
        done = [r for r in cli.rx_flows() if r.done]
        if len(done) != 1 or done[0].bytes != size:
            raise RuntimeError(f"request {i}: replies {[r.bytes for r in done]}")
        if i >= 50:
            rtts.append(done[0].stats["last_ns"] - f.stats().stats["start_ns"])
            APP_RTTS.append(t1 - t0)
        f.wait(5)
        f.close()
        cli.rx_reap()
    return rtts


def run_transport(pair, size: int, count: int, busy: bool, coalesce_ns: int,
                  drive: str = "thread", xdp_obj: str | None = None,
                  pin: tuple[int, int] | None = None, **engine_kw) -> list[int]:
    from hpccd.transport import engine
    from hpccd.transport.engine import Transport

    kw = {"busy_poll": busy, "config": {"coalesce_ns": coalesce_ns, "rx_flows": 64},
          **engine_kw}
    if xdp_obj:
        engine.XDP_HOST = pathlib.Path(xdp_obj)       # this row only (restored below)
        try:
            return run_transport(pair, size, count, busy, coalesce_ns, drive, pin=pin,
                                 **engine_kw)
        finally:
            engine.XDP_HOST = ROOT / "build" / "ebpf" / "xdp_host.bpf.o"
    ncpu = os.cpu_count() or 1
    if pin is not None:                  # (the client's CPU, the server engine's)
        cpus = (pin[0] % ncpu, pin[1] % ncpu)
    else:
        cpus = (0, 1 % ncpu) if busy else (None, None)
    srv = Transport(pair.vb, netns=pair.b, responder=True, cpu=cpus[1], **kw)
    cli = Transport(pair.va, netns=pair.a, cpu=cpus[0],
                    drive="caller" if drive == "request" else drive, **kw)
    flow_kw = {"algo": "dctcp", "int_mode": "none", "line_rate_bps": 10_000_000_000}
    mask = os.sched_getaffinity(0)
    try:
        srv.set_echo(**flow_kw)
        if drive in ("caller", "request"):
            if pin is not None:          # this thread drives the client engine: its CPU
                os.sched_setaffinity(0, {cpus[0]})
            return run_caller(cli, pair, size, count, flow_kw, drive == "request")
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
        os.sched_setaffinity(0, mask)
        cli.close()
        srv.close()


def _placed(argv: list[str], cpu: int | None) -> list[str]:
    """argv run on `cpu` (taskset), or where the scheduler puts it."""
    return argv if cpu is None else ["taskset", "-c", str(cpu % (os.cpu_count() or 1)), *argv]


def run_udp(pair, exe: str, size: int, count: int, busy: bool = False) -> list[int]:
    """Kernel UDP ping-pong (scripts/udp_pingpong.c): each side waits in
    recv(2); busy: each polls its socket on a CPU of its own (client 0,
    server 1), as the transport's busy rows are placed."""
    mode, cpus = (["busy"], (0, 1)) if busy else ([], (None, None))
    srv = pair.popen("b", _placed([exe, "server", pair.ip_b, "18999", str(count + 50), *mode],
                                  cpus[1]),
                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.2)
        out = subprocess.run(["ip", "netns", "exec", pair.a,
                              *_placed([exe, "client", pair.ip_b, "18999", str(count + 50),
                                        str(size), *mode], cpus[0])],
                             capture_output=True, text=True, timeout=120, check=True).stdout
        srv.wait(timeout=10)
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()
    return [int(x) for x in out.split()][50:]


def run_xsk(pair, exe: str, size: int, count: int, busy: bool) -> list[int]:
    """The floor of AF_XDP itself: scripts/xsk_pingpong.c, one frame of
    `size` bytes back and forth between two bare AF_XDP sockets; busy: each
    polls its rings on a CPU of its own (client 0, server 1)."""
    mac = subprocess.run(["ip", "netns", "exec", pair.b, "cat",
                          f"/sys/class/net/{pair.vb}/address"],
                         capture_output=True, text=True, check=True).stdout.strip()
    mode, cpus = (["busy"], (0, 1)) if busy else ([], (None, None))
    srv = pair.popen("b", _placed([exe, "server", pair.vb, str(count + 50), *mode], cpus[1]),
                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)              # its socket bound and its XDP program attached
        out = subprocess.run(["ip", "netns", "exec", pair.a,
                              *_placed([exe, "client", pair.va, str(count + 50), str(size),
                                        mac, *mode], cpus[0])],
                             capture_output=True, text=True, timeout=120)
        if out.returncode:
            raise RuntimeError(f"xsk_pingpong client: {out.stderr.strip()[-300:]}")
        srv.wait(timeout=10)
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait()
    return [int(x) for x in out.stdout.split()][50:]


def nofrags_obj(tmp: str) -> str:
    """xdp_host built as a linear-only program (SEC("xdp"), HPCCD_XDP_NO_FRAGS):
    in generic mode the kernel then linearises an skb for it instead of
    copying it into page-pool pages as for a multi-buffer program."""
    out = os.path.join(tmp, "xdp_host_nofrags.bpf.o")
    if not os.path.exists(out):
        subprocess.run(["clang", "-O2", "-g", "-target", "bpf", "-D__TARGET_ARCH_x86",
                        "-DHPCCD_XDP_NO_FRAGS", "-I", str(ROOT / "build" / "ebpf"), "-I",
                        str(ROOT / "include"), "-I", str(ROOT / "ebpf"), "-c",
                        str(ROOT / "ebpf" / "xdp_host.bpf.c"), "-o", out], check=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rows", default="udp,xsk,default,nomod,busy,caller,request,"
                                      "udp-busy,xsk-busy,request-busy",
                    help="which rows, in order (kernel UDP is always measured first: the "
                         "ratios are to it); a row named twice is measured twice")
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
            known = {
                "udp": ("kernel UDP", lambda: run_udp(pair, exe, args.size, args.count)),
                "xsk": ("bare AF_XDP sockets, interrupt",
                        lambda: run_xsk(pair, xsk, args.size + 42, args.count, False)),
                # busy polling, each side on a CPU of its own (client 0,
                # server 1): kernel UDP, the bare sockets, the transport
                "udp-busy": ("kernel UDP, busy polling",
                             lambda: run_udp(pair, exe, args.size, args.count, True)),
                "xsk-busy": ("bare AF_XDP sockets, busy polling",
                             lambda: run_xsk(pair, xsk, args.size + 42, args.count, True)),
                "request-busy": ("request(), caller and server engine busy polling",
                                 lambda: run_transport(pair, args.size, args.count, True, 0,
                                                       "request", pin=(0, 1))),
                "caller-busy": ("caller drives, caller and server engine busy polling",
                                lambda: run_transport(pair, args.size, args.count, True, 0,
                                                      "caller", pin=(0, 1))),
                "default": ("transport, interrupt (default)",
                            lambda: run_transport(pair, args.size, args.count, False, 20000)),
                "nomod": ("transport, interrupt, no moderation",
                          lambda: run_transport(pair, args.size, args.count, False, 0)),
                "busy": ("transport, busy poll",
                         lambda: run_transport(pair, args.size, args.count, True, 0)),
                "caller": ("transport, caller drives (run to completion)",
                           lambda: run_transport(pair, args.size, args.count, False, 20000,
                                                 "caller")),
                "request": ("transport, caller drives, request() in one call",
                            lambda: run_transport(pair, args.size, args.count, False, 20000,
                                                  "request")),
                # what a DATA frame's sendto() costs (docs/transport.md "Latency"):
                # the three busy threads placed (the client application with its
                # engine, the server engine): apart on the two CPUs, or all on one
                "caller-apart": ("caller drives, client on CPU 0, server engine on CPU 1",
                                 lambda: run_transport(pair, args.size, args.count, False,
                                                       20000, "caller", pin=(0, 1))),
                "request-apart": ("request(), client on CPU 0, server engine on CPU 1",
                                  lambda: run_transport(pair, args.size, args.count, False,
                                                        20000, "request", pin=(0, 1))),
                "caller-onecpu": ("caller drives, client and server engine on CPU 0",
                                  lambda: run_transport(pair, args.size, args.count, False,
                                                        20000, "caller", pin=(0, 0))),
                "caller-nocsum": ("caller drives, checksum summed (no TX metadata)",
                                  lambda: run_transport(pair, args.size, args.count, False,
                                                        20000, "caller", csum_offload=False)),
                "caller-nosg": ("caller drives, socket without XDP_USE_SG",
                                lambda: run_transport(pair, args.size, args.count, False,
                                                      20000, "caller", sg=False)),
                "caller-nofrags": ("caller drives, xdp_host without xdp.frags",
                                   lambda: run_transport(pair, args.size, args.count, False,
                                                         20000, "caller",
                                                         xdp_obj=nofrags_obj(tmp))),
            }
            order = ["udp"] + [r for r in args.rows.split(",") if r and r != "udp"]
            if any(r not in known for r in order):
                print(f"bench_latency: rows are {','.join(known)}", file=sys.stderr)
                return 2
            app = []
            for key in order:
                name, fn = known[key]
                m0 = machine_cpu()
                v = fn()
                m1 = machine_cpu()
                rows.append((name, v, busy_share(m0, m1)))
                if key.startswith(("caller", "request")):
                    app.append((key, list(APP_RTTS)))
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
    for key, v in app:
        p50, p99 = percentile(v, 50), percentile(v, 99)
        print(f"{key}, as the application sees it (request called -> reply's wait "
              f"returned, Python included): p50 {p50 / 1e3:.1f} us ({p50 / base50:.2f}x UDP), "
              f"p99 {p99 / 1e3:.1f} us ({p99 / base99:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
