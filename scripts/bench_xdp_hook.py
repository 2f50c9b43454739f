#!/usr/bin/env python3
"""What the lab's hook in xdp_host costs (docs/benchmarks.md, "The lab's hook
in xdp_host"; docs/lab.md "The last hop into a host").

    sudo python3 scripts/bench_xdp_hook.py [--rounds 7] [--repeat 200000]

A benchmark, not a test: it prints figures and fails only when it cannot
produce them.  Needs root, clang and the BPF objects (`make bpf`, run here).

xdp_host is run by BPF_PROG_TEST_RUN (the kernel runs the program
`--repeat` times on the same frame and returns the mean time per run) on
two frames to this host (address in hpccd_addrs, no AF_XDP socket, so the
verdict is XDP_PASS after the steering):

  int     a DATA with INT (room 5, COLLECT, one record stamped): the packets
          that reach the hook;
  plain   a DATA without COLLECT: the packets that do not;

in three builds:

  nohook  xdp_host compiled here with -DHPCCD_NO_LAB_HOOK (no hook at all);
  empty   build/ebpf/xdp_host.bpf.o as the daemon loads it (the hook empty:
          one per-CPU array read and a failed tail call);
  lab     the same with the lab's program in the hook (int_sw_dep_xdp, the
          maps of a loaded int_switch object): it parses the frame, looks up
          the record's word (not found: the record of this run is not
          pending), sets the flag and tail-calls xdp_host again.

Each round runs every (build, frame) pair, in alternating order (ABBA);
ratios are taken within a round and the median over rounds is printed,
with the machine's load average before and after.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import socket
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "daemon"))

DST, SRC = "10.199.0.2", "10.199.0.1"


def log(msg: str) -> None:
    print(f"[bench_xdp_hook] {msg}", file=sys.stderr, flush=True)


def build_nohook(out: pathlib.Path) -> pathlib.Path:
    """xdp_host without the hook, with the Makefile's flags."""
    obj = out / "xdp_host_nohook.bpf.o"
    cmd = ["clang", "-O2", "-g", "-target", "bpf", "-D__TARGET_ARCH_x86", "-Wall", "-Werror",
           "-DHPCCD_NO_LAB_HOOK", "-Wno-unused-function", f"-I{ROOT}/build/ebpf", f"-I{ROOT}/include",
           f"-I{ROOT}/ebpf", "-c", str(ROOT / "ebpf" / "xdp_host.bpf.c"), "-o", str(obj)]
    subprocess.run(cmd, check=True)
    return obj


def frames() -> dict[str, bytes]:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw

    from hpccd.core import wire

    out = {}
    for name, flags, nhop in (("int", wire.INT_F_COLLECT, 1), ("plain", 0, 0)):
        hops = [wire.HpccdHop(speed_code=17, ts=12345, tx_units=678, qlen_units=9)
                if i < nhop else wire.HpccdHop() for i in range(5)]
        p = (Ether() / IP(src=SRC, dst=DST) / UDP(sport=40000, dport=wire.UDP_PORT_DEFAULT)
             / wire.int_header(room=5, flags=flags, nhop=nhop, hops=hops)
             / wire.Hpccd(type=wire.T_DATA, flow_id=1, seq=0, len=1000) / Raw(b"\x00" * 1000))
        out[name] = bytes(p)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=200_000)
    args = ap.parse_args()
    if os.geteuid() != 0:
        log("needs root (BPF_PROG_TEST_RUN)")
        return 2
    subprocess.run(["make", "-C", str(ROOT), "-s", "bpf"], check=True)

    from hpccd.bpf import loader as bpf
    from hpccd.lab import int_switch

    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="hpccd-bench-hook-") as tmp:
        nohook_path = build_nohook(pathlib.Path(tmp))
        objs = {}
        try:
            for name, path in (("nohook", nohook_path), ("empty", bpf.object_path("xdp_host")),
                               ("lab", bpf.object_path("xdp_host"))):
                o = bpf.BpfObject.open(path).load()
                objs[name] = o
                o.map("hpccd_addrs").update(socket.inet_aton(DST), 1)
            sw = bpf.BpfObject.open(bpf.object_path("int_switch")).load()
            objs["switch"] = sw
            hook = int_switch._Hook.make(objs["lab"].program("hpccd_xdp_host").id,
                                         {n: sw.map(n) for n in int_switch.HOOK_SW_MAPS}, 2,
                                         "bench")
            try:
                fr = frames()
                pairs = [(b, f) for b in ("nohook", "empty", "lab") for f in fr]
                for b, f in pairs:          # warm-up, and the verdicts
                    rc, _, _ = objs[b].program("hpccd_xdp_host").test_run(fr[f], repeat=1000)
                    if rc != 2:
                        log(f"{b}/{f}: verdict {rc}, expected XDP_PASS")
                        return 1
                rows = []
                for r in range(args.rounds):
                    order = pairs if r % 2 == 0 else pairs[::-1]
                    ns = {}
                    for b, f in order:
                        _, _, d = objs[b].program("hpccd_xdp_host").test_run(
                            fr[f], repeat=args.repeat)
                        ns[(b, f)] = d
                    rows.append(ns)
            finally:
                hook.close()
        finally:
            for o in objs.values():
                o.close()
    load1 = os.getloadavg()

    print(f"xdp_host under BPF_PROG_TEST_RUN, {args.repeat} runs per figure, "
          f"{args.rounds} rounds (ABBA); ns per packet")
    print(f"{'round':>5} " + " ".join(f"{b + '/' + f:>13}" for b, f in pairs))
    for i, ns in enumerate(rows, 1):
        print(f"{i:>5} " + " ".join(f"{ns[p]:>13}" for p in pairs))
    med = {p: statistics.median(ns[p] for ns in rows) for p in pairs}
    print(f"{'med':>5} " + " ".join(f"{med[p]:>13g}" for p in pairs))
    for f in ("int", "plain"):
        d_empty = statistics.median(ns[("empty", f)] - ns[("nohook", f)] for ns in rows)
        d_lab = statistics.median(ns[("lab", f)] - ns[("nohook", f)] for ns in rows)
        r_empty = statistics.median(ns[("empty", f)] / ns[("nohook", f)] for ns in rows)
        print(f"{f:>5}: empty hook {d_empty:+g} ns (ratio {r_empty:.3f} to no hook), "
              f"lab's program {d_lab:+g} ns")
    print(f"load average before {load0[0]:.2f}, after {load1[0]:.2f} (2 CPUs, shared)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
