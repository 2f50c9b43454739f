"""Soak (issue 9; docs/security.md "Soak"): a churn of native-transport
flows starting and finishing for a bounded time, then memory flat.

Short in CI (SOAK_S, default 20 s); the long run is the same test with
HPCCD_SOAK_S set:

    HPCCD_SOAK_S=3600 .venv/bin/python -m pytest tests/integration/test_soak.py -q -s

Two sender engines (h1, h2) keep up to CONCURRENT flows each open to r1, of
random algorithms and sizes (1 KB to 2 MB, a mice-heavy mix), opening a new
one as each finishes; the receiver is never reaped during the run, so its
table recycles finished flows (rx_recycled) as a long-running receiver
must.  Every flow's bytes are checked at the receiver (CRC-32) while its
record is still there.

Invariants protected, at the end (after a warm-up whose state is the
baseline):
- every flow completed byte-exact, none failed, nothing hung (bounded waits);
- RSS of this process grew by less than RSS_SLACK_MB since the warm-up;
- every UMEM TX frame is free again on every engine (tx_free = tx_frames),
  the receiver's flows not done are 0 and, after rx_reap(), its table is
  empty;
- the BPF map entries of every engine's xdp_host (hpccd_addrs, hpccd_xsks,
  hpccd_tag_key, hpccd_telem) are back to their count after the warm-up;
- this process's open file descriptors are back to the warm-up count.
"""
from __future__ import annotations

import os
import random
import time

import pytest

pytestmark = pytest.mark.integration

if os.geteuid() != 0:
    pytest.skip("AF_XDP, XDP and namespaces need root", allow_module_level=True)

from hpccd.transport.engine import Transport, pattern_crc32  # noqa: E402

from conftest import lab_ctx  # noqa: E402

SOAK_S = float(os.environ.get("HPCCD_SOAK_S", "20"))
WARMUP_S = 3.0
CONCURRENT = 8
RSS_SLACK_MB = 8.0
LINE = 2_000_000_000
T_NS = 300_000
ALGOS = ("hpcc", "rx-hpcc", "dctcp", "ldcp")
MAPS = ("hpccd_addrs", "hpccd_xsks", "hpccd_tag_key", "hpccd_telem")


def _rss_mb() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _map_entries(tp: Transport) -> dict[str, int]:
    out = {}
    for name in MAPS:
        try:
            m = tp._obj.map(name)
        except Exception:
            continue
        out[name] = len(list(m.keys()))
    return out


def _size(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.6:
        return rng.randint(1_000, 50_000)          # mice
    if r < 0.9:
        return rng.randint(50_000, 500_000)
    return rng.randint(500_000, 2_000_000)


def test_churn_of_flows_memory_flat():
    rng = random.Random(int(os.environ.get("HPCCD_SOAK_SEED", "9")))
    with lab_ctx("dumbbell") as lab:
        for h in ("h1", "h2"):
            lab.probe(h, "r1")
        r1 = lab.address("r1")
        engines: list[Transport] = []
        try:
            rx = Transport("eth0", netns=lab.netns("r1"), ack_every=4,
                           rx_hpcc={"T_ns": T_NS, "line_rate_bps": LINE})
            engines.append(rx)
            senders = [Transport("eth0", netns=lab.netns(h)) for h in ("h1", "h2")]
            engines += senders
            open_flows: list[tuple] = []            # (flow, nbytes, sender)
            done = failed = 0
            total_bytes = 0
            baseline = None
            t0 = time.monotonic()
            end = t0 + SOAK_S

            def top_up() -> None:
                for tx in senders:
                    while sum(1 for _, _, s in open_flows if s is tx) < CONCURRENT:
                        n = _size(rng)
                        f = tx.open_flow(r1, n, algo=rng.choice(ALGOS), line_rate_bps=LINE,
                                         hpcc={"T_ns": T_NS}, timeout_s=10)
                        open_flows.append((f, n, tx))

            def reap(final: bool) -> None:
                nonlocal done, failed, total_bytes
                # keyed as the receiver keys them: two senders' flow ids
                # may be equal (each sender draws its own)
                rxd = {(x.saddr, x.flow_id): x for x in rx.rx_flows() if x.done}
                for item in list(open_flows):
                    f, n, tx = item
                    st = f.stats()
                    if st.state == "running":
                        continue
                    if st.state == "failed":
                        failed += 1
                        raise AssertionError(f"flow failed: {st.err} {st.stats}")
                    r = rxd.get((tx.local_addr, f.flow_id))
                    if r is None:               # the receiver's record of it is on its way
                        if not final and time.monotonic() - st.stats["end_ns"] / 1e9 < 5:
                            continue
                        r = next((x for x in rx.rx_flows()
                                  if (x.saddr, x.flow_id) == (tx.local_addr, f.flow_id)), None)
                    assert r is not None and r.done, f"receiver lost flow {f.flow_id:#x}"
                    assert r.bytes == n and r.crc32 == pattern_crc32(f.seed, n)
                    done += 1
                    total_bytes += n
                    f.close()
                    open_flows.remove(item)

            while time.monotonic() < end:
                top_up()
                time.sleep(0.02)
                reap(False)
                if baseline is None and time.monotonic() - t0 >= WARMUP_S:
                    baseline = {"rss": _rss_mb(), "fds": _fds(),
                                "maps": [_map_entries(e) for e in engines], "done": done}
            # drain: no new flows; every open one finishes within its bound
            deadline = time.monotonic() + 60
            while open_flows:
                assert time.monotonic() < deadline, f"{len(open_flows)} flows still open"
                time.sleep(0.02)
                reap(False)
            for tx in senders:
                deadline = time.monotonic() + 5
                while tx.stats()["tx_free"] < 4096:       # completions reaped
                    assert time.monotonic() < deadline, tx.stats()["tx_free"]
                    time.sleep(0.01)
            rs = rx.stats()
            assert rs["rx_live"] == 0, rs["rx_live"]
            reaped = rx.rx_reap()
            assert rx.stats()["rx_used"] == 0
            import gc
            gc.collect()
            after = {"rss": _rss_mb(), "fds": _fds(), "maps": [_map_entries(e) for e in engines]}
            elapsed = time.monotonic() - t0
            print(f"\nsoak {SOAK_S:.0f} s: {done} flows ({done - baseline['done']} after the "
                  f"warm-up), {total_bytes / 1e6:.0f} MB, {failed} failed; receiver recycled "
                  f"{rs['rx_recycled']}, reaped {reaped}; RSS {baseline['rss']:.1f} -> "
                  f"{after['rss']:.1f} MB; fds {baseline['fds']} -> {after['fds']}; maps "
                  f"{baseline['maps']} -> {after['maps']}; TX frames free "
                  f"{[tx.stats()['tx_free'] for tx in senders]}; {elapsed:.1f} s")
            assert baseline is not None and done > baseline["done"] > 0
            assert after["rss"] - baseline["rss"] < RSS_SLACK_MB
            assert after["fds"] == baseline["fds"]
            assert after["maps"] == baseline["maps"]
            assert all(tx.stats()["tx_free"] == 4096 for tx in senders)
        finally:
            for e in engines:
                e.close()
