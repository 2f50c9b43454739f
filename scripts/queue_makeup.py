#!/usr/bin/env python3
"""What a bottleneck queue is made of: which flows' trains were in it.

Reads a pcap of the sender's interface (tcpdump -i eth0 on the host whose
flows cross the bottleneck; on veth one record is one GSO train, its
original length the train's bytes), replays the trains into a queue that
drains at the bottleneck's rate, and prints, for the queue seen by each
arriving train (as the lab's INT switch samples it: the backlog at packet
arrivals), its percentiles and, at the arrivals that found at least one
BDP queued, how many trains and how many distinct flows the queue held.

    .venv/bin/python scripts/queue_makeup.py h1.pcap --link-bps 1e9 --bdp 4900

The model leaves out everything between the interface and the bottleneck
(the software switch's own delay, which is the same for every train); the
benchmark prints the switch's measured p99 beside it
(scripts/bench_tcp_side.py --pcap DIR)."""
from __future__ import annotations

import argparse
import collections
import struct
import sys


def trains(path: str, dport: int | None = None) -> list[tuple[float, int, int]]:
    """(time s, bytes on the wire, the flow's source port) of every TCP
    segment with payload in a pcap (Ethernet, IPv4), in order."""
    out = []
    with open(path, "rb") as f:
        hdr = f.read(24)
        if len(hdr) < 24:
            raise ValueError(f"{path}: not a pcap file (too short)")
        magic = struct.unpack("<I", hdr[:4])[0]
        if magic in (0xA1B2C3D4, 0xA1B23C4D):
            end = "<"
        elif magic in (0xD4C3B2A1, 0x4D3CB2A1):
            end = ">"
        else:
            raise ValueError(f"{path}: not a pcap file (magic {magic:#x})")
        nano = magic in (0xA1B23C4D, 0x4D3CB2A1)
        linktype = struct.unpack(end + "I", hdr[20:24])[0]
        if linktype != 1:
            raise ValueError(f"{path}: link type {linktype}, expected Ethernet (1)")
        rec = struct.Struct(end + "IIII")
        while True:
            h = f.read(16)
            if len(h) < 16:
                break
            sec, frac, incl, orig = rec.unpack(h)
            data = f.read(incl)
            if len(data) < incl:
                break
            if len(data) < 14 + 20 + 20 or data[12:14] != b"\x08\x00" or data[23] != 6:
                continue
            ihl = (data[14] & 0x0F) * 4
            tcp = 14 + ihl
            if len(data) < tcp + 20:
                continue
            tot = struct.unpack(">H", data[16:18])[0]
            doff = (data[tcp + 12] >> 4) * 4
            sport, dp = struct.unpack(">HH", data[tcp:tcp + 4])
            if tot - ihl - doff <= 0 or (dport is not None and dp != dport):
                continue                             # ACKs, other traffic
            t = sec + frac / (1e9 if nano else 1e6)
            out.append((t, orig, sport))
    # the flows that carry the data: not iperf3's control connections (a
    # few hundred bytes of JSON), under 1 % of the bytes
    by = collections.Counter()
    for _, n, fl in out:
        by[fl] += n
    total = sum(by.values())
    return [x for x in out if by[x[2]] >= 0.01 * total]


def makeup(tr: list[tuple[float, int, int]], link_bps: float, bdp: float) -> dict:
    """Replay `tr` into a queue draining at `link_bps`.  Returns the queue
    each train found (percentiles, bytes), and at the arrivals that found
    >= `bdp` bytes: the trains and distinct flows queued (the arriving one
    included), and the share of those arrivals whose queue held one flow's
    trains only."""
    Bps = link_bps / 8
    q = collections.deque()                      # [flow, bytes left]
    backlog = 0.0
    last = None
    seen, at_bdp_trains, at_bdp_flows = [], [], []
    for t, n, flow in tr:
        if last is not None:
            drain = (t - last) * Bps
            while drain > 0 and q:
                if q[0][1] <= drain:
                    drain -= q[0][1]
                    backlog -= q[0][1]
                    q.popleft()
                else:
                    q[0][1] -= drain
                    backlog -= drain
                    drain = 0
        last = t
        seen.append(backlog)
        if backlog >= bdp:
            at_bdp_trains.append(len(q) + 1)
            at_bdp_flows.append(len({f for f, _ in q} | {flow}))
        q.append([flow, float(n)])
        backlog += n
    s = sorted(seen)

    def pct(v, p):
        return v[min(len(v) - 1, int(p / 100 * len(v)))] if v else float("nan")
    flows = collections.Counter(at_bdp_flows)
    return {"trains": len(tr), "flows": len({f for _, _, f in tr}),
            "mean_train": sum(n for _, n, _ in tr) / len(tr) if tr else float("nan"),
            "q50": pct(s, 50), "q90": pct(s, 90), "q99": pct(s, 99), "max": s[-1] if s else 0,
            "over_bdp": len(at_bdp_flows) / len(seen) if seen else float("nan"),
            "trains_at_bdp": (sum(at_bdp_trains) / len(at_bdp_trains)
                              if at_bdp_trains else float("nan")),
            "flows_at_bdp": dict(sorted(flows.items()))}


def fmt(m: dict, bdp: float) -> str:
    n = sum(m["flows_at_bdp"].values())
    split = ", ".join(f"{k} flow{'s' if k > 1 else ''} {v / n:.0%}"
                      for k, v in m["flows_at_bdp"].items()) if n else "none"
    return (f"{m['trains']} trains of {m['flows']} flows (mean {m['mean_train'] / 1e3:.1f} KB); "
            f"modelled queue at arrivals p50 {m['q50'] / 1e3:.1f} KB, p90 "
            f"{m['q90'] / 1e3:.1f} KB, p99 {m['q99'] / 1e3:.1f} KB ({m['q99'] / bdp:.2f} BDP), "
            f"max {m['max'] / 1e3:.1f} KB; arrivals finding >= 1 BDP {m['over_bdp']:.1%}, "
            f"queued trains there {m['trains_at_bdp']:.1f} on average, distinct flows: {split}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pcap")
    ap.add_argument("--link-bps", type=float, required=True, help="the bottleneck's rate")
    ap.add_argument("--bdp", type=float, required=True, help="one BDP, bytes")
    ap.add_argument("--dport", type=int, default=None, help="only segments to this port")
    a = ap.parse_args(argv)
    try:
        tr = trains(a.pcap, a.dport)
    except (OSError, ValueError) as e:
        print(f"queue_makeup: {e}", file=sys.stderr)
        return 2
    if not tr:
        print(f"queue_makeup: {a.pcap}: no TCP segment with payload", file=sys.stderr)
        return 1
    print(fmt(makeup(tr, a.link_bps, a.bdp), a.bdp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
