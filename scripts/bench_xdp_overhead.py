#!/usr/bin/env python3
"""Kernel TCP throughput with and without hpccd's host programs (docs/benchmarks.md,
"XDP/tc overhead on kernel TCP").

    sudo python3 scripts/bench_xdp_overhead.py [--rounds 5] [--seconds 3]

A benchmark, not a test: it prints figures and fails only when it cannot
produce them.  Needs root, iperf3, and the BPF objects (`make bpf`, run
here, a no-op when they are up to date).

Lab: two network namespaces joined by a veth (hpccd.lab.namespaces.veth_pair, names
``hpccdb-`` plus a random suffix, 10.198.0.1/24 and 10.198.0.2/24 inside
them only), an iperf3 server in b, the client in a (a sends).  Each round
runs iperf3 for --seconds in every mode, in alternating order (ABBA), so
that a drift of the machine's speed does not favour one mode:

  none  nothing attached (the veth as created);
  all   xdp_host (native mode) on both veths, configured as hpccd runs it
        (tag key, each side's address in hpccd_addrs), and tc_tracker on
        a's egress;
  with --modes none,all,xdp,tc,pass,frags also xdp_host alone, tc_tracker
        alone, and two reference XDP programs that only return XDP_PASS
        (compiled here with clang into a temporary directory): "pass" in a
        plain SEC("xdp") like xdp_host, "frags" in SEC("xdp.frags"), which
        tells the veth the program handles multi-buffer frames.  They tell
        the cost of xdp_host's own work from the cost of running any XDP
        program on a veth.

Prints one row per round (Gbit/s per mode, ratio all/none) and the median
ratio, plus what the programs counted (proof that they were in the path)
and the TSO setting of a's veth in each mode.  Everything it set up is
removed on exit, also on Ctrl-C or SIGTERM: programs detached, iperf3
stopped, namespaces deleted.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import pathlib
import secrets
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "daemon"))

from bench_report import machine_line, table  # noqa: E402

NS_PREFIX = "hpccdb"
MODES = ("none", "all", "xdp", "tc", "pass", "frags", "all-skb")
REFERENCE_XDP = """
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
char LICENSE[] SEC("license") = "GPL";
SEC("xdp") int hpccd_pass(struct xdp_md *ctx) { return XDP_PASS; }
SEC("xdp.frags") int hpccd_pass_frags(struct xdp_md *ctx) { return XDP_PASS; }
"""
IP_A, IP_B, PREFIXLEN = "10.198.0.1", "10.198.0.2", 24
IPERF_PORT = 5201


def log(msg: str) -> None:
    print(f"[bench_xdp_overhead] {msg}", file=sys.stderr, flush=True)


class Lab:
    """Namespace pair, iperf3 server, loaded programs; close() undoes all of it."""

    def __init__(self):
        from hpccd.lab.namespaces import pair_names

        self.a, self.b, self.va, self.vb = pair_names(NS_PREFIX, secrets.token_hex(3))
        self.stack = contextlib.ExitStack()
        self.pair = None                # hpccd.lab.namespaces.VethPair, once built
        self.objs = []
        self.xdp: dict[str, object] = {}
        self.tc = None
        self.ref = None                 # reference XDP programs, if compiled
        self.tmp = None

    # -- namespaces
    def build(self) -> None:
        from hpccd.lab.namespaces import veth_pair

        self.pair = self.stack.enter_context(
            veth_pair(self.a, self.b, self.va, self.vb, IP_A, IP_B, PREFIXLEN))

    @property
    def procs(self) -> list[subprocess.Popen]:
        return self.pair.procs

    def popen(self, ns: str, argv: list[str], **kw) -> subprocess.Popen:
        return self.pair.popen(ns, argv, **kw)

    # -- programs
    def load(self) -> None:
        from hpccd.bpf import loader as bpf

        built = ROOT / "build" / "ebpf"
        key = secrets.token_bytes(16)
        for side, ip in (("a", IP_A), ("b", IP_B)):
            o = bpf.BpfObject.open(built / "xdp_host.bpf.o")
            self.objs.append(o)
            o.load()
            o.map("hpccd_tag_key").update(0, key)
            o.map("hpccd_addrs").update(socket.inet_aton(ip), 1)
            self.xdp[side] = o
        o = bpf.BpfObject.open(built / "tc_tracker.bpf.o")
        self.objs.append(o)
        o.load()
        self.tc = o

    def load_reference(self) -> None:
        """Compile and load the XDP_PASS reference programs."""
        import tempfile

        from hpccd.bpf import loader as bpf

        self.tmp = tempfile.TemporaryDirectory(prefix="hpccd-bench-")
        src = pathlib.Path(self.tmp.name) / "ref.bpf.c"
        src.write_text(REFERENCE_XDP)
        obj = src.with_suffix(".o")
        res = subprocess.run([os.environ.get("BPF_CLANG", "clang"), "-O2", "-g", "-target", "bpf",
                              f"-I{ROOT / 'build' / 'ebpf'}", "-c", str(src), "-o", str(obj)], capture_output=True, text=True)
        if res.returncode != 0:
            raise RuntimeError(f"compiling the reference XDP programs failed:\n{res.stderr}")
        o = bpf.BpfObject.open(obj)
        self.objs.append(o)
        o.load()
        self.ref = o

    def set_mode(self, mode: str) -> None:
        """Attach exactly the programs of `mode`, detach the others."""
        from hpccd.bpf import loader as bpf

        want_tc = mode in ("all", "tc", "all-skb")
        # all-skb: the same programs, XDP in generic (skb) mode: on a veth,
        # native XDP of any program turns the peer's TSO off; generic XDP
        # runs after the skb exists and leaves it on.
        xmode = "skb" if mode == "all-skb" else "native"
        for side, ns, ifname in (("a", self.a, self.va), ("b", self.b, self.vb)):
            prog = None
            if mode in ("all", "xdp", "all-skb"):
                prog = self.xdp[side].program("hpccd_xdp_host")
            elif mode in ("pass", "frags"):
                prog = self.ref.program("hpccd_pass" if mode == "pass" else "hpccd_pass_frags")
            with bpf.in_netns(ns):
                bpf.xdp_detach(ifname)
                if prog is not None:
                    bpf.xdp_attach(ifname, prog, mode=xmode)
        with bpf.in_netns(self.a):
            if want_tc:
                bpf.tc_attach(self.va, self.tc.program("hpccd_tc_tracker"), "egress")
            else:
                bpf.tc_detach(self.va, "egress")
                with contextlib.suppress(bpf.BpfError):
                    bpf.tc_remove_clsact(self.va)       # the veth as created

    def tso_on_a(self) -> bool:
        from hpccd.bpf import loader as bpf
        from pyroute2.ethtool import Ethtool

        with bpf.in_netns(self.a):
            e = Ethtool()
            try:
                return bool(e.get_features(self.va).features["tx-tcp-segmentation"].enable)
            finally:
                e.close()

    def counted(self) -> dict[str, int]:
        """Frames the programs saw so far (sum of all counter slots)."""
        def total(m):
            n = 0
            for i in range(m.max_entries):
                n += sum(struct.unpack_from("=Q", v)[0] for v in m.lookup(i))
            return n
        return {"xdp_host a": total(self.xdp["a"].map("hpccd_xdp_cnt")),
                "xdp_host b": total(self.xdp["b"].map("hpccd_xdp_cnt")),
                "tc_tracker a": total(self.tc.map("hpccd_tc_cnt"))}

    # -- clean-up
    def close(self) -> None:
        if self.pair is not None:
            self.pair.stop_procs()
            with contextlib.suppress(Exception):
                self.set_mode("none")
        for o in self.objs:
            o.close()
        if self.tmp is not None:
            self.tmp.cleanup()
        try:
            self.stack.close()          # the namespaces, checked gone (veth_pair)
        except Exception as e:
            log(f"clean-up incomplete: {e}")


def iperf(lab: Lab, seconds: float, streams: int) -> float:
    """One iperf3 run a -> b; received Gbit/s."""
    p = lab.popen(lab.a, ["iperf3", "-c", IP_B, "-B", IP_A, "-p", str(IPERF_PORT),
                          "-t", str(seconds), "-P", str(streams), "-J"],
                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.communicate(timeout=seconds + 60)
    lab.procs.remove(p)
    if p.returncode != 0:
        raise RuntimeError(f"iperf3 client failed ({p.returncode}): {err or out[-2000:]}")
    return json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e9


def wait_server(lab: Lab) -> None:
    from hpccd.bpf import loader as bpf

    deadline = time.monotonic() + 10
    while True:
        with bpf.in_netns(lab.a):
            s = socket.socket()
        with s:
            try:
                s.settimeout(1)
                s.connect((IP_B, IPERF_PORT))
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("iperf3 server in b did not come up") from None
                time.sleep(0.1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=3.0, help="per iperf3 run")
    ap.add_argument("--streams", type=int, default=1, help="iperf3 -P")
    ap.add_argument("--modes", default="none,all",
                    help=f"comma list of {', '.join(MODES)} (none and all required)")
    args = ap.parse_args()
    modes = args.modes.split(",")
    if not {"none", "all"} <= set(modes) or not set(modes) <= set(MODES) \
            or len(set(modes)) != len(modes):
        ap.error(f"--modes: none and all, optionally {', '.join(MODES[2:])}")
    if os.geteuid() != 0:
        ap.error("needs root (namespaces, BPF)")
    for tool in ("iperf3", "ip"):
        if shutil.which(tool) is None:
            ap.error(f"{tool} is not installed")
    res = subprocess.run(["make", "-C", str(ROOT), "-s", "bpf"], capture_output=True, text=True)
    if res.returncode != 0:
        log(f"make bpf failed:\n{res.stdout}{res.stderr}")
        return 1

    me = os.getpid()

    def on_signal(sig, _frame):
        # A forked child inherits this handler: pyroute2's netns.create()
        # forks one and stops it with SIGTERM.  It must just die, not run
        # the clean-up below (that would delete the namespaces it made).
        if os.getpid() != me:
            os._exit(128 + sig)
        raise SystemExit(128 + sig)               # runs the finally below (the "trap")
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)

    lab = Lab()
    try:
        lab.build()
        lab.load()
        if {"pass", "frags"} & set(modes):
            lab.load_reference()
        lab.popen(lab.b, ["iperf3", "-s", "-B", IP_B, "-p", str(IPERF_PORT)],
                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_server(lab)
        tso = {}
        for m in modes:
            lab.set_mode(m)
            tso[m] = lab.tso_on_a()
        lab.set_mode("none")
        iperf(lab, 1, args.streams)                   # warm-up, not reported

        rows = []
        for r in range(args.rounds):
            order = modes if r % 2 == 0 else modes[::-1]
            got = {}
            for m in order:
                lab.set_mode(m)
                got[m] = iperf(lab, args.seconds, args.streams)
            rows.append(got)
            log(f"round {r + 1}/{args.rounds}: " +
                ", ".join(f"{m} {got[m]:.2f}" for m in modes))
        lab.set_mode("none")
        counted = lab.counted()
    finally:
        lab.close()

    print(f"{machine_line()}; veth, MTU 1500, "
          f"iperf3 -t {args.seconds:g} -P {args.streams}, {args.rounds} rounds (ABBA order)")
    print("TSO on a's veth: " + ", ".join(f"{m} {'on' if tso[m] else 'off'}" for m in modes))
    others = [m for m in modes if m not in ("none", "all")]
    ratios = {m: [] for m in modes if m != "none"}
    out = []
    for i, g in enumerate(rows, 1):
        for m in ratios:
            ratios[m].append(g[m] / g["none"])
        out.append([i] + [f"{g[m]:.2f}" for m in modes] + [f"{g['all'] / g['none']:.3f}"]
                   + [f"{g[m] / g['none']:.3f}" for m in others])
    out.append(["median"] + [f"{statistics.median(g[m] for g in rows):.2f}" for m in modes]
               + [f"**{statistics.median(ratios['all']):.3f}**"]
               + [f"{statistics.median(ratios[m]):.3f}" for m in others])
    print(table(["round"] + [f"{m} Gbit/s" for m in modes] + ["ratio all/none"]
                + [f"ratio {m}/none" for m in others], out))
    print(f"median ratio all/none: {statistics.median(ratios['all']):.3f}")
    print("frames counted by the programs over the run: " +
          ", ".join(f"{k} {v}" for k, v in counted.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
