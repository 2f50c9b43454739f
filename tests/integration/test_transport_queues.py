"""Several engines per interface (issue 14, item 5): one engine per RX queue
of a multi-queue veth, sharing one xdp_host (hpccd.transport.engine.Engines), flows
spread over the engines, each engine's thread on a CPU of its own.

The veth keeps the queue when its peer runs XDP natively: a frame sent on
TX queue q arrives on the peer's RX queue q, so a flow's DATA reach the
receiver's engine q and its ACKs come back to the sender's engine q.  In
generic (skb) mode every frame arrives on RX queue 0, and AF_XDP takes a
frame only on the queue its socket is bound to: multi-queue needs native
XDP on veth (or RSS / flow steering on a NIC).
"""
from __future__ import annotations

import os
import time

import pytest

from conftest import netns_pair_ctx

tp = pytest.importorskip("hpccd.transport.engine", reason="hpccd._transport not built")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="namespaces and AF_XDP need root")


def _thread_cpus(tid: int) -> str:
    with open(f"/proc/self/task/{tid}/status") as f:
        for line in f:
            if line.startswith("Cpus_allowed_list:"):
                return line.split(":", 1)[1].strip()
    return ""


def _engine_tids() -> list[int]:
    out = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                if f.read().strip() == "hpccd-tp":
                    out.append(int(tid))
        except OSError:
            pass
    return out


def test_two_queues_two_engines_each_carrying_flows():
    ncpu = os.cpu_count() or 1
    with netns_pair_ctx(queues=2) as pair:
        before = set(_engine_tids())
        with tp.Engines(pair.vb, [0, 1], netns=pair.b, xdp_mode="native") as rx, \
                tp.Engines(pair.va, [0, 1], netns=pair.a, xdp_mode="native",
                           cpus=[0, 1 % ncpu]) as tx:
            # each sender engine's thread is where it was placed
            mine = [t for t in _engine_tids() if t not in before]
            assert len(mine) == 4
            placed = sorted(_thread_cpus(t) for t in mine)
            assert "0" in placed and str(1 % ncpu) in placed, placed
            # paced at 200 Mbit/s: each lasts ~120 ms, longer than opening all
            flows = [tx.open_flow(pair.ip_b, 3_000_000, algo="dctcp",
                                  line_rate_bps=200_000_000, int_mode="none")
                     for _ in range(6)]
            # pick() spread them: three per engine
            per_engine = [e.stats()["flows_running"] for e in tx.engines]
            results = [f.wait(30) for f in flows]
            assert all(r.state == "done" for r in results)
            time.sleep(0.2)
            got = {}
            for q, e in enumerate(rx.engines):
                for r in e.rx_flows():
                    got[r.flow_id] = (q, r.bytes, r.crc32)
            for f in flows:
                assert got[f.flow_id][1:] == (3_000_000, tp.pattern_crc32(f.seed, 3_000_000))
            by_queue = [sum(1 for v in got.values() if v[0] == q) for q in (0, 1)]
            assert by_queue == [3, 3], (by_queue, per_engine)
            # every engine moved data: the senders' ACKs came back to them
            for e in (*tx.engines, *rx.engines):
                st = e.stats()
                assert st["tx_frames"] > 1000 and st["rx_frames"] > 1000, st
                assert st["unknown_flow"] == 0
