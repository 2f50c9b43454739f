"""Synthetic INT traces from a packet-level model of a small fabric.

Until the lab records telemetry from real queues, the bundled trace comes
from this model of the paper's incast micro-benchmark ([HPCC] section 5.2):
a long flow runs at line rate toward a receiver; seven senders start flows
toward the same receiver at the same time.  Every sender runs HPCC with the C
core (closed loop, per-packet ACKs that echo the INT, window plus pacing at
R = W/T); the trace records the INT-carrying ACKs of the long flow, i.e. what
its sender saw.

Fabric: each packet crosses two switch egress ports, both FIFO with a byte
backlog and a constant drain rate:
  hop 0  ToR uplink, 400 Gbit/s, shared by the senders (never the bottleneck)
  hop 1  receiver's ToR downlink, 100 Gbit/s (the incast bottleneck)
The switch stamps at dequeue: ts = start of transmission, qLen = bytes still
queued behind the packet, txBytes = bytes dequeued so far including it.
Links add 2 us of propagation each way per link (three links: 12 us base RTT
with the uncongested return path), so T = 13 us as in the paper's
simulations (section 5.1).

The model is deterministic: ``python -m hpccd.core.tracegen bundle daemon/hpccd/traces``
rewrites the bundled files bit for bit (a test checks it).
"""
from __future__ import annotations

import heapq
import itertools
import json
import sys
from dataclasses import dataclass, field
from typing import IO

from . import cc

MTU = 1000                    # bytes per packet, headers included ([HPCC] section 5.1)
LINE = 100_000_000_000        # NIC and bottleneck speed, bit/s
UPLINK = 400_000_000_000      # ToR uplink speed, bit/s
PROP_NS = 2000                # propagation per link, ns
T_NS = 13000                  # slightly above the 12 us base RTT (section 5.1)
SWITCH_IDS = (0x0A1, 0x0B2)   # 12-bit switch ids; pathID is their XOR (section 4.1)

N_INCAST = 7                  # senders that join (the paper's testbed incast)
INCAST_AT_NS = 60_000         # when they start; the long flow runs from 0
INCAST_BYTES = 200_000        # size of each incast flow
END_NS = 300_000              # end of the recorded episode

HPCC_PARAMS = {"T_ns": T_NS, "eta": 0.95, "max_stage": 5, "w_ai_bytes": 80,
               "line_rate_bps": LINE, "mtu_bytes": MTU}


@dataclass
class Port:
    rate_bps: int
    queue: list = field(default_factory=list)   # packets waiting (FIFO)
    backlog: int = 0                             # bytes waiting, not in transmission
    tx_bytes: int = 0                            # bytes dequeued so far
    busy: bool = False


@dataclass
class Sender:
    idx: int
    size: int                 # bytes to send (None-like huge for the long flow)
    start_ns: int
    flow: cc.Hpcc
    snd_nxt: int = 0
    snd_una: int = 0
    next_tx_ns: int = 0
    waiting: bool = False     # a wake-up is scheduled
    done_ns: int | None = None


@dataclass
class Packet:
    sender: int
    seq_end: int
    size: int
    sent_ns: int = 0                             # when the sender put it on the wire
    hops: list = field(default_factory=list)


def _ser_ns(size: int, rate_bps: int) -> int:
    return -(-size * 8_000_000_000 // rate_bps)   # ceil: whole nanoseconds


def simulate(n_incast: int = N_INCAST, incast_at_ns: int = INCAST_AT_NS,
             incast_bytes: int = INCAST_BYTES, end_ns: int = END_NS) -> list[dict]:
    """Run the incast model; return the long flow's ACK events (trace format),
    each with the RTT its packet saw under the extra key ``rtt_ns`` (ACK
    arrival minus the packet's send time; derive() keeps it for timely)."""
    ports = [Port(UPLINK), Port(LINE)]
    senders = [Sender(0, 1 << 62, 0, cc.Hpcc(**HPCC_PARAMS))]
    senders += [Sender(i, incast_bytes, incast_at_ns, cc.Hpcc(**HPCC_PARAMS))
                for i in range(1, n_incast + 1)]
    path_id = SWITCH_IDS[0] ^ SWITCH_IDS[1]
    tie = itertools.count()
    heap: list = []
    events: list[dict] = []

    def at(t: int, kind: str, *args) -> None:
        heapq.heappush(heap, (t, next(tie), kind, args))

    def try_send(s: Sender, now: int) -> None:
        s.waiting = False
        while s.snd_nxt < s.size and s.snd_nxt - s.snd_una + MTU <= s.flow.W:
            if now < s.next_tx_ns:
                s.waiting = True
                at(s.next_tx_ns, "wake", s)
                return
            size = min(MTU, s.size - s.snd_nxt)
            s.snd_nxt += size
            # Pacing at R = W/T ([HPCC] section 3.2), never above the NIC.
            rate = min(s.flow.rate_bps, LINE)
            s.next_tx_ns = max(now, s.next_tx_ns) + _ser_ns(size, int(rate))
            at(now + PROP_NS, "arrive", 0, Packet(s.idx, s.snd_nxt, size, now))

    def start_tx(k: int, now: int) -> None:
        port = ports[k]
        if port.busy or not port.queue:
            return
        pkt = port.queue.pop(0)
        port.backlog -= pkt.size
        port.tx_bytes += pkt.size
        port.busy = True
        pkt.hops.append({"ts_ns": now, "qlen_bytes": port.backlog,
                         "tx_bytes": port.tx_bytes, "bw_bps": port.rate_bps})
        at(now + _ser_ns(pkt.size, port.rate_bps), "txdone", k, pkt)

    for s in senders:
        at(s.start_ns, "wake", s)
    while heap:
        now, _, kind, args = heapq.heappop(heap)
        if now > end_ns:
            break
        if kind == "wake":
            try_send(args[0], now)
        elif kind == "arrive":
            k, pkt = args
            ports[k].queue.append(pkt)
            ports[k].backlog += pkt.size
            start_tx(k, now)
        elif kind == "txdone":
            k, pkt = args
            ports[k].busy = False
            start_tx(k, now)
            if k + 1 < len(ports):
                at(now + PROP_NS, "arrive", k + 1, pkt)
            else:   # at the receiver: ACK at once, echoing the INT
                at(now + 3 * PROP_NS, "ack", pkt)
            # the packet's last bit left the port at `now`; +PROP to the next element
        elif kind == "ack":
            (pkt,) = args
            s = senders[pkt.sender]
            if pkt.seq_end > s.snd_una:
                s.snd_una = pkt.seq_end
            if s.idx == 0:
                events.append({"seq": pkt.seq_end, "snd_nxt": s.snd_nxt,
                               "path_id": path_id, "hops": pkt.hops,
                               "rtt_ns": now - pkt.sent_ns})
            s.flow.new_ack(pkt.seq_end, s.snd_nxt, pkt.hops, path_id)
            if s.snd_una >= s.size and s.done_ns is None:
                s.done_ns = now
            if not s.waiting:
                try_send(s, now)
    return events


# ---- the same telemetry as the other algorithms' feedback ------------------
#
# DCTCP and LDCP see the congestion episode as ECN marks: a packet is marked
# when the bottleneck queue it met exceeds K.  K = 30 KB x Bw / 10 Gbit/s is
# the DCTCP threshold of [HPCC] section 5.1 (300 KB at 100 Gbit/s); LDCP
# uses the same queue with K_min = K_max = K ([LDCP] section 2.1 with P_max
# = 1, i.e. threshold marking), so the two see identical marks.  The queue in
# the INT record is the dequeue-time backlog: the marking a switch would do
# at dequeue.  Rx-HPCC runs at the receiver, which gets each packet one link
# after the last hop stamped it.
#
# TIMELY sees it as RTT samples: one per ACK of the long flow, the ACK's
# arrival minus its packet's departure (the model's five link crossings of
# PROP_NS, serialisation, and the queues it met), with minRTT the least
# sample of the episode (TIMELY's minRTT: the RTT of an empty network).  DCQCN is not derived from this
# episode: its CNPs come from RED marking between Kmin and Kmax, which seed
# 004 section 5.1 sets to 400 KB and 1.6 MB at 100 Gbit/s, and HPCC keeps
# this queue above 400 KB for 99 of the 1625 packets only, where the
# marking probability is below Pmax = 1 %: less than one CNP expected, so an
# open-loop view of HPCC's queue says nothing about DCQCN (a closed-loop
# DCQCN episode is the lab's job).

ECN_K_BYTES = 30_000 * LINE // 10_000_000_000


def event_time_ns(ev: dict) -> int:
    """When the bottleneck (last hop) stamped the packet an event reports."""
    return ev["hops"][-1]["ts_ns"]


def marked(ev: dict) -> bool:
    return max(h["qlen_bytes"] for h in ev["hops"]) > ECN_K_BYTES


def derive(algo: str, events: list[dict]) -> tuple[dict, list[dict]]:
    """(params, events) of `algo` that replay the episode an hpcc trace recorded."""
    if algo == "hpcc":
        return {"algo": "hpcc", **HPCC_PARAMS}, [
            {k: v for k, v in e.items() if k != "rtt_ns"} for e in events]
    if algo == "rx-hpcc":
        return ({"algo": "rx-hpcc", **HPCC_PARAMS},
                [{"now_ns": event_time_ns(e) + PROP_NS, "path_id": e["path_id"],
                  "hops": e["hops"]} for e in events])
    if algo == "dctcp":
        return ({"algo": "dctcp", "g": 0.0625, "mtu_bytes": MTU, "init_cwnd_bytes": 10 * MTU},
                [{"ack": e["seq"], "snd_nxt": e["snd_nxt"], "ece": int(marked(e))}
                 for e in events])
    if algo == "ldcp":
        out, prev = [], 0
        for e in events:
            n = max(1, -(-(e["seq"] - prev) // MTU))
            prev = max(prev, e["seq"])
            out.append({"acked_pkts": n, "ece": int(marked(e)), "now_ns": event_time_ns(e)})
        return ({"algo": "ldcp", "mtu_bytes": MTU, "line_rate_bps": LINE, "rtt_ns": T_NS},
                out)
    if algo == "timely":
        return ({"algo": "timely", "line_rate_bps": LINE,
                 "min_rtt_ns": min(e["rtt_ns"] for e in events)},
                [{"rtt_ns": e["rtt_ns"]} for e in events])
    raise ValueError(f"unknown algorithm {algo!r}")


def write_trace(params: dict, events: list[dict], out: IO[str]) -> None:
    out.write(json.dumps({"params": params}) + "\n")
    for e in events:
        out.write(json.dumps(e, separators=(",", ":")) + "\n")


BUNDLE = {   # file name -> algorithm; all from the one incast episode
    "incast_7to1_100g.jsonl": "hpcc",
    "incast_7to1_100g.rx-hpcc.jsonl": "rx-hpcc",
    "incast_7to1_100g.dctcp.jsonl": "dctcp",
    "incast_7to1_100g.ldcp.jsonl": "ldcp",
    "incast_7to1_100g.timely.jsonl": "timely",
}


def write_bundle(directory: str) -> None:
    import os

    events = simulate()
    for name, algo in BUNDLE.items():
        params, evs = derive(algo, events)
        with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
            write_trace(params, evs, f)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] != "bundle":
        print("usage: python -m hpccd.core.tracegen bundle DIRECTORY\n"
              "  writes the bundled traces: " + ", ".join(BUNDLE), file=sys.stderr)
        return 2
    write_bundle(argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
