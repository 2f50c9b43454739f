"""``gbn-vs-sr``: go-back-N against selective repeat under loss, the
transport's per-flow ``recovery`` ([HPCC] section 5.3, Figure 12: with HPCC
"different flow control schemes do not affect the performance", while
DCQCN, which "controls the queue poorly", gains from a better one).

Embedded topology (common.dumbbell): ``flows`` senders on s1, as many
receivers on s2, every link at R; the s1 -> s2 port is the bottleneck, its
buffer ``buffer_bytes`` (default 64 KB: small, so that a congestion
control that lets a queue build loses packets there, as the paper's
lossy runs without PFC do).  Random loss on top (``losses``, default 0,
0.1 % and 1 %) by ebpf/lab_loss.bpf.c on tc ingress of both ends of the
bottleneck link (s2 receiving the data, s1 the feedback); 0 leaves only the
bottleneck's own drops.

Per loss rate, per algorithm (native only: the recovery is the native
transport's), per recovery (``sr``, ``gbn``): the ``flows`` flows of
``size`` bytes start together; each must arrive byte-exact (the
receiver's CRC-32 of the generated stream).  Reported per row: goodput
(the bytes of all flows over the time until the last one finished), FCT
p50 / max, packets retransmitted and how many each loss cost (retransmitted
/ dropped, the drops counted by lab_loss plus the bottleneck queue's own),
go-backs, selective-repeat recoveries, timeouts, the receiver's duplicates
and its packets that arrived ahead of their turn (a loss, or reordering: the
lab steers each flow through one CPU per hop so that it has none, docs/lab.md
"Order").
"""
from __future__ import annotations

import dataclasses
import math
import threading
import time
from typing import Any

from ..lab.loss import LinkLoss
from . import loaded_rtt, measure, native
from .algos import Algo
from .common import Skip, UsageError, dumbbell, native_engines, parse_shares, with_defaults
from .report import Results, progress, pyplot, table
from .results import Record, Summary, derived, mbps, ms, pct, value

NAME = "gbn-vs-sr"
RECOVERIES = ("sr", "gbn")
DEFAULTS = {"flows": 2, "size": 4_000_000, "rate_mbps": 1000, "buffer_bytes": 1_000_000,
            "bottleneck_buffer_bytes": 64_000, "k_bytes": 30_000, "losses": "0,0.001,0.01",
            "timeout": 60.0}


def topology(p: dict[str, Any]) -> str:
    n = p["flows"]
    return dumbbell("xgbn", "10.126.0.0/16", [f"h{i}" for i in range(1, n + 1)],
                    [f"r{i}" for i in range(1, n + 1)], p["rate_mbps"], p["buffer_bytes"],
                    p["k_bytes"], bottleneck_buffer_bytes=p["bottleneck_buffer_bytes"])


def parse_losses(text: str | float) -> list[float]:
    """"0,0.001,0.01" -> [0.0, 0.001, 0.01]; each a probability in [0, 0.5]."""
    return parse_shares(text, "--losses", lambda x: 0 <= x <= 0.5,
                        "0 <= p <= 0.5; 1 % is 0.01", "loss probability")


def _host_drops(tp) -> int:
    """Packets the host lost on its way in (the AF_XDP socket's RX ring
    full, the kernel's drops): the shared cores' losses, not the link's."""
    st = tp.stats()
    return st["k_rx_dropped"] + st["k_rx_ring_full"]


@dataclasses.dataclass(kw_only=True)
class RecoveryRow(Record):
    """One algorithm's flows with one recovery at one loss rate: goodput,
    completion times, and what each loss cost."""

    algo: str
    recovery: str                       # "sr" or "gbn"
    loss: float                         # random loss probability, each way
    variant: str                        # "<recovery> <loss %>": the row's name in reps
    flows: int
    goodput_bps: float                  # all flows' bytes over the time until the last finished
    fct_p50_s: float
    fct_max_s: float
    retx_pkts: int
    dropped: int                        # random_drops + queue_drops + host_drops
    random_drops: int                   # lab_loss's
    queue_drops: int                    # the bottleneck queue's own
    host_drops: int                     # the hosts' (AF_XDP RX ring full, kernel drops)
    retx_per_drop: float
    go_backs: int
    recoveries: int                     # selective-repeat recoveries
    rtos: int
    dup_pkts: int                       # the receivers' duplicates
    ooo_pkts: int                       # the receivers' packets ahead of their turn
    cpu_busy: float

    loss_pct = derived("loss", pct)
    goodput_mbps = derived("goodput_bps", mbps)
    fct_p50_ms = derived("fct_p50_s", ms)
    fct_max_ms = derived("fct_max_s", ms)


def run_one(lab, algo: Algo, recovery: str, loss: float, p: dict[str, Any]) -> RecoveryRow:
    if algo.kind != "native":
        raise Skip(f"{algo.name}: go-back-N or selective repeat is the native transport's "
                   f"choice; kernel TCP always repairs selectively (SACK)")
    eng = native_engines(lab, algo)
    n = p["flows"]
    pairs = [(f"h{i}", f"r{i}") for i in range(1, n + 1)]
    rx = {r: eng.get(r) for _, r in pairs}
    tx = {h: eng.get(h) for h, _ in pairs}
    for tp in rx.values():
        tp.rx_reap()
    port = lab.topology.switches["s1"].port_to("s2")
    engines = list(rx.values()) + list(tx.values())
    host0 = sum(_host_drops(tp) for tp in engines)
    lossy = LinkLoss(lab, loss) if loss > 0 else None
    flows = []
    rec = None
    try:
        rec = measure.QueueRecorder(lab, "s1", port).start()
        cpu = measure.CpuMeter().start()
        barrier = threading.Barrier(n)
        errors: list[str] = []

        def start(h, r):
            try:
                barrier.wait()
                fl = tx[h].open_flow(lab.address(r), p["size"], recovery=recovery,
                                     dmac=tx[h].next_hop_mac(lab.address(r)),
                                     timeout_s=p["timeout"],
                                     **native.flow_kwargs(algo.cc, eng.link_bps(h), eng.hpcc))
                flows.append((h, r, fl))
            except Exception as e:            # reported below
                errors.append(f"{h}: {e}")
        threads = [threading.Thread(target=start, args=pr, daemon=True) for pr in pairs]
        for th in threads:
            th.start()
        for th in threads:
            th.join(30)
        if errors:
            raise RuntimeError(f"{algo.name} {recovery}: opening flows: " + "; ".join(errors))
        results = [(h, r, fl, fl.wait(timeout=p["timeout"] + 10, poll=0.02))
                   for h, r, fl in flows]
        busy = cpu.stop()
        dropped = lossy.dropped() if lossy else 0
    finally:
        samples = rec.stop() if rec else []
        if lossy:
            lossy.close()
        for _, _, fl in flows:
            fl.close()
    # the bottleneck queue's own drops (its qdisc's counter, in the samples)
    q_drops = samples[-1].drops - samples[0].drops if len(samples) > 1 else 0
    host = sum(_host_drops(tp) for tp in engines) - host0
    fcts, retx, go_backs, recs, rtos, dups, ooo, bad = [], 0, 0, 0, 0, 0, 0, []
    start_ns = min(res.stats["start_ns"] for *_, res in results)
    end_ns = 0
    for h, r, fl, res in results:
        st = res.stats
        if not res.done:
            bad.append(f"{h}->{r}: {res.state}, {st['snd_una']} of {p['size']} bytes "
                       f"acknowledged")
            continue
        got = rx[r].wait_rx_flow(fl.flow_id, timeout=5.0)
        from ..transport.engine import pattern_crc32
        if got.bytes != p["size"] or got.crc32 != pattern_crc32(fl.seed, p["size"]):
            bad.append(f"{h}->{r}: the receiver got {got.bytes} of {p['size']} bytes, "
                       f"CRC-32 {got.crc32:#010x}")
        fcts.append(res.fct_s)
        end_ns = max(end_ns, st["end_ns"])
        retx += st["retx_pkts"]
        go_backs += st["go_backs"]
        recs += st["recoveries"]
        rtos += st["rtos"]
        dups += got.stats.get("dup_pkts", 0)
        ooo += got.stats.get("ooo_pkts", 0)
    if bad:
        raise RuntimeError(f"{algo.name} {recovery} at {loss:.1%} loss: not byte-exact: "
                           + "; ".join(bad))
    span = (end_ns - start_ns) / 1e9
    drops = dropped + q_drops + host
    return RecoveryRow(
        algo=algo.name, recovery=recovery, loss=loss, variant=f"{recovery} {loss:.1%}",
        flows=n, goodput_bps=n * p["size"] * 8 / span if span > 0 else math.nan,
        fct_p50_s=measure.percentile(fcts, 50), fct_max_s=max(fcts),
        retx_pkts=retx, dropped=drops, random_drops=dropped, queue_drops=q_drops,
        host_drops=host, retx_per_drop=retx / drops if drops else math.nan,
        go_backs=go_backs, recoveries=recs, rtos=rtos, dup_pkts=dups, ooo_pkts=ooo,
        cpu_busy=busy)


ROW = RecoveryRow         # what Summary.rows reads its summary's rows back as

COLUMNS = [("algo", "algo"), ("recovery", "recovery"), ("loss_pct", "loss %"),
           ("goodput_mbps", "goodput Mbit/s"), ("fct_p50_ms", "FCT p50 ms"),
           ("fct_max_ms", "FCT max ms"), ("retx_pkts", "retx pkts"), ("dropped", "dropped"),
           ("host_drops", "of which hosts"), ("retx_per_drop", "retx/drop"),
           ("go_backs", "go-backs"), ("rtos", "timeouts"),
           ("dup_pkts", "rx dups"), ("ooo_pkts", "rx out of order")]


def report(res: Results, rows: list[RecoveryRow], skipped: dict[str, str],
           p: dict[str, Any], losses: list[float]) -> str:
    res.csv("gbn_vs_sr.csv", [k for k, _ in COLUMNS],
            [[value(r, k, None) for k, _ in COLUMNS] for r in rows])
    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    algos = list(dict.fromkeys(r.algo for r in rows))
    width = 0.8 / max(1, 2 * len(algos))
    for k, (key, head) in enumerate((("goodput_mbps", "goodput (Mbit/s)"),
                                     ("fct_max_ms", "FCT max (ms)"),
                                     ("retx_per_drop", "retransmitted per drop"))):
        ax = axes[k]
        j = 0
        for a in algos:
            for rec in RECOVERIES:
                ys = [next((getattr(r, key) for r in rows if r.algo == a and r.recovery == rec
                            and r.loss == ld), math.nan) for ld in losses]
                ax.bar([i + (j - len(algos) + 0.5) * width for i in range(len(losses))], ys,
                       width, label=f"{a} {rec.upper()}", hatch="//" if rec == "gbn" else None,
                       color=f"C{algos.index(a)}", alpha=0.9 if rec == "sr" else 0.55)
                j += 1
        ax.set_xticks(range(len(losses)))
        ax.set_xticklabels([f"{ld:.1%}" for ld in losses])
        ax.set_xlabel("random loss on the bottleneck link (each way)")
        ax.set_ylabel(head)
        if key == "fct_max_ms":
            ax.set_yscale("log")
    axes[0].legend(fontsize=7)
    fig.suptitle(f"go-back-N against selective repeat: {p['flows']} x "
                 f"{p['size'] / 1e6:g} MB through {p['rate_mbps']} Mbit/s, "
                 f"{p['bottleneck_buffer_bytes'] / 1e3:g} KB bottleneck buffer")
    fig.tight_layout()
    res.figure("gbn-vs-sr.png", fig)
    text = table(rows, COLUMNS)
    text += (f"\n{p['flows']} flows of {p['size']} B started together through one "
             f"{p['rate_mbps']} Mbit/s bottleneck with a {p['bottleneck_buffer_bytes']} B "
             f"buffer; random loss on both directions of that link; dropped = lab_loss's "
             f"drops + the bottleneck queue's own + the hosts' (AF_XDP RX ring full, kernel drops)")
    text += p["hpcc_text"]
    text += "".join(f"\n{name}: skipped: {why}" for name, why in skipped.items())
    res.summary(text, Summary(NAME, p, rows, skipped, extra={"losses": losses}))
    return text


def run(lab_factory, algos: list[Algo], params: dict[str, Any], out: str) -> tuple[str, str]:
    p = with_defaults(DEFAULTS, params)
    if params.get("senders") is not None:      # hpccctl experiment --senders
        p["flows"] = params["senders"]
    losses = parse_losses(p["losses"])
    if int(p["flows"]) < 1 or int(p["size"]) < 1:
        raise UsageError(f"flows {p['flows']}, size {p['size']}: both at least 1")
    from ..lab.topology import Topology
    topo = Topology.loads(topology(p), "<gbn-vs-sr experiment>")
    res = Results(out, NAME)
    rows: list[RecoveryRow] = []
    skipped: dict[str, str] = {}
    with lab_factory(topo) as lab, native.Engines(lab):
        for i in range(1, p["flows"] + 1):
            lab.probe(f"h{i}", f"r{i}")       # ARP resolved, path up
        loaded_rtt.setup(NAME, lab, p, [(f"h{i}", f"r{i}") for i in range(1, p["flows"] + 1)],
                         "s1", "s2", p["flows"])
        progress(NAME, f"lab up; {p['flows']} x {p['size']} B per run, losses "
                       f"{', '.join(f'{x:.1%}' for x in losses)}")
        for loss in losses:
            for a in algos:
                if a.name in skipped:
                    continue
                for rec in RECOVERIES:
                    try:
                        r = run_one(lab, a, rec, loss, p)
                    except Skip as e:
                        skipped[a.name] = str(e)
                        progress(NAME, f"{a.name}: skipped: {e}")
                        break
                    rows.append(r)
                    progress(NAME, f"{a.name} {rec.upper()} at {loss:.1%} loss: goodput "
                                   f"{r.goodput_mbps:.0f} Mbit/s, {r.retx_pkts} "
                                   f"retransmitted for {r.dropped} dropped")
                    time.sleep(0.2)
    return report(res, rows, skipped, p, losses), res.dir
