#!/usr/bin/env python3
"""A/B of the transport's DATA checksum offload (AF_XDP TX metadata,
docs/transport.md "Checksum offload") and of the like-iperf3 mode, on a veth
pair of its own: one DCTCP flow of --bytes per run, the four settings
alternated round by round; per setting the medians of goodput and of the two
engines' user and system CPU-seconds per GB (user time is the engine's own
work: the checksums, the CRC, the stream; system time is the kernel's copies
of copy mode; hpccd.transport.engine.engine_cpu).  Shared machine: the
machine and its load average are printed before, the load average after, and
the medians as a table of bench_report, the benchmarks' shared format.

    sudo .venv/bin/python scripts/bench_tx_csum.py --reps 3 --bytes 1G --mtus 65535,9000
"""
from __future__ import annotations

import argparse
import os
import pathlib
import secrets
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "daemon"))
from bench_report import loadavg, machine_line, median, table  # noqa: E402


def one(pair, nbytes: int, like: bool, offload: bool) -> dict:
    from hpccd.transport.engine import Transport, engine_cpu, pattern_bytes, pattern_crc32

    rx = Transport(pair.vb, netns=pair.b, sink="count" if like else "verify")
    tx = Transport(pair.va, netns=pair.a, csum_offload=offload)
    try:
        if offload and not tx.stats()["tx_csum_offload"]:
            raise RuntimeError("the kernel refused AF_XDP TX metadata")
        src = {"repeat": pattern_bytes(secrets.randbits(63), 0, 128 * 1024)} if like else {}
        u0, s0 = engine_cpu()
        fl = tx.open_flow(pair.ip_b, nbytes, algo="dctcp", int_mode="none",
                          line_rate_bps=100_000_000_000, timeout_s=30, **src)
        try:
            r = fl.wait(120)
            got = rx.wait_rx_flow(fl.flow_id, timeout=10)
        finally:
            fl.close()
        u1, s1 = engine_cpu()
        if got.bytes != nbytes or (not like and got.crc32 != pattern_crc32(fl.seed, nbytes)):
            raise RuntimeError("delivery differs from the source")
        st = rx.stats()
        gb = nbytes / 1e9
        return {"gbps": r.goodput_bps / 1e9, "user": (u1 - u0) / gb, "sys": (s1 - s0) / gb,
                "retx": r.stats["retx_pkts"], "bad_csum": st["bad_csum"],
                "unverified": st["csum_unverified"], "pkts": r.stats["pkts"]}
    finally:
        tx.close()
        rx.close()


ROW = {False: "verified", True: "like-iperf3"}
ON = {False: "off", True: "on"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--bytes", default="1G")
    ap.add_argument("--mtus", default="65535,9000")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench_tx_csum: needs root", file=sys.stderr)
        return 2
    from hpccd.lab.namespaces import pair_names, veth_pair
    from hpccd.transport.cli import parse_bytes

    nbytes = parse_bytes(args.bytes)
    settings = [(like, off) for like in (False, True) for off in (False, True)]
    print(machine_line(), flush=True)
    medians = []
    with veth_pair(*pair_names("hpccdk", secrets.token_hex(3)), "10.198.0.1",
                   "10.198.0.2") as pair:
        for mtu in (int(m) for m in args.mtus.split(",")):
            for ns, dev in ((pair.a, pair.va), (pair.b, pair.vb)):
                subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "set", dev, "mtu",
                                str(mtu)], check=True)
            rows: dict = {s: [] for s in settings}
            for i in range(args.reps):
                for s in settings:
                    r = one(pair, nbytes, *s)
                    rows[s].append(r)
                    print(f"MTU {mtu} rep {i + 1} {ROW[s[0]]:11} offload {ON[s[1]]:3}: "
                          f"{r['gbps']:6.2f} Gbit/s  user {r['user']:.3f} sys {r['sys']:.3f} "
                          f"CPU-s/GB  retx {r['retx']} bad_csum {r['bad_csum']} unverified "
                          f"{r['unverified']} of {r['pkts']}", flush=True)
            for s in settings:
                m = {k: median(rows[s], k) for k in ("gbps", "user", "sys")}
                medians.append([mtu, ROW[s[0]], ON[s[1]], f"{m['gbps']:.2f}", f"{m['user']:.3f}",
                                f"{m['sys']:.3f}", f"{m['user'] + m['sys']:.3f}"])
    print(f"\nmedians of {args.reps} (load average after: {loadavg()})")
    print(table(["MTU", "row", "offload", "Gbit/s", "user CPU-s/GB", "system CPU-s/GB",
                 "engine CPU-s/GB"], medians), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
