"""The egress queue of every lab interface: HTB root 1: -> class 1:1 at the
link rate -> bfifo 10: of the link's buffer, and reading it back as the
kernel has it (docs/lab.md, "Queues")."""
from __future__ import annotations

from typing import Any

from .topology import ETH_HLEN

HTB_HANDLE = 0x10000          # 1:
HTB_CLASS = 0x10001           # 1:1
FIFO_HANDLE = 0x100000        # 10:
FIFO_ROOT_HANDLE = 0x10000    # 1: (add_fifo_root: a bare veth pair's ends)
# HTB's bucket, in microseconds at the link rate (12 500 bytes at 1 Gbit/s).
# A real port releases one frame at a time; the emulated one needs slack
# because HTB's timer fires late on a busy two-core machine, and tokens
# beyond the bucket are lost: a port whose bucket is shorter than its
# timer's lateness drains below its rate and builds a standing queue that
# no real port of that rate would have.  docs/lab.md ("Queues") has the
# measurements this value comes from.
HTB_BURST_US = 100


def ensure_bfifo() -> None:
    """pyroute2 0.9 knows pfifo's options but not bfifo's; both take the
    kernel's struct tc_fifo_qopt {__u32 limit} (bytes for bfifo), so the
    same encoder serves.  Registered once, only if pyroute2 has none."""
    from pyroute2.netlink.rtnl.tcmsg import plugins, sched_pfifo

    plugins.setdefault("bfifo", sched_pfifo)


def htb_burst_bytes(rate_mbps: int, mtu: int) -> int:
    """HTB bucket of a link: HTB_BURST_US at the link rate, at least one frame."""
    return max(mtu + ETH_HLEN, rate_mbps * HTB_BURST_US // 8)


def add_queue(ns, idx: int, rate_mbps: int, buffer_bytes: int, mtu: int) -> None:
    """HTB root 1: -> class 1:1 at the link rate -> bfifo 10: of buffer_bytes."""
    ensure_bfifo()
    rate = rate_mbps * 125_000                      # bytes/s, as tc's ratespec wants
    burst = htb_burst_bytes(rate_mbps, mtu)
    ns.tc("add", "htb", idx, handle=HTB_HANDLE, default=1)
    ns.tc("add-class", "htb", idx, handle=HTB_CLASS, parent=HTB_HANDLE, rate=rate,
          ceil=rate, burst=burst, cburst=burst, quantum=mtu + ETH_HLEN, mtu=mtu + ETH_HLEN)
    ns.tc("add", "bfifo", idx, handle=FIFO_HANDLE, parent=HTB_CLASS, limit=buffer_bytes)


def add_fifo_root(ns, idx: int, packets: int = 1000) -> None:
    """A pfifo root of `packets` (a real NIC's driver queue, txqueuelen's
    1,000 by default) in place of veth's noqueue.  A veth whose peer runs
    native XDP hands frames to the peer's ring; with a qdisc it stops its
    queue when that ring is full and the sender's frame waits (AF_XDP's
    sendto() says EAGAIN and the descriptor stays), with noqueue it drops
    the frame (counted in its TX "dropped" only): docs/transport.md
    "Native XDP on a veth needs a qdisc"."""
    ns.tc("add", "pfifo", idx, handle=FIFO_ROOT_HANDLE, limit=packets)


def qdisc_stats(msg) -> dict[str, int]:
    st = msg.get_attr("TCA_STATS2")
    basic = st.get_attr("TCA_STATS_BASIC") if st else None
    queue = st.get_attr("TCA_STATS_QUEUE") if st else None
    return {"bytes": basic["bytes"] if basic else 0,
            "packets": basic["packets"] if basic else 0,
            "drops": queue["drops"] if queue else 0,
            "overlimits": queue["overlimits"] if queue else 0,
            "backlog": queue["backlog"] if queue else 0,
            "qlen": queue["qlen"] if queue else 0}


def read_queue(ns, idx: int) -> dict[str, Any]:
    """The egress queue of interface `idx` as the kernel has it: the HTB
    class's rate and ceil (bit/s), the FIFO's kind and limit, the root's
    counters (bytes and packets sent, drops, backlog bytes and packets,
    overlimits), and whether a clsact qdisc is there."""
    ensure_bfifo()
    out: dict[str, Any] = {"root": None, "rate_bps": None, "ceil_bps": None,
                           "fifo": None, "limit": None, "clsact": False}
    for q in ns.get_qdiscs(idx):
        kind = q.get_attr("TCA_KIND")
        if kind == "clsact":
            out["clsact"] = True
        elif q["parent"] == 0xFFFFFFFF:
            out["root"] = kind
            out.update(qdisc_stats(q))
        elif q["parent"] == HTB_CLASS:
            out["fifo"] = kind
            opts = q.get_attr("TCA_OPTIONS")
            if opts is not None and kind in ("bfifo", "pfifo"):
                out["limit"] = opts["limit"]
            out["fifo_stats"] = qdisc_stats(q)
    for c in ns.get_classes(idx):
        if c["handle"] != HTB_CLASS or c.get_attr("TCA_KIND") != "htb":
            continue
        opts = c.get_attr("TCA_OPTIONS")
        parms = opts.get_attr("TCA_HTB_PARMS")
        out["rate_bps"] = 8 * (opts.get_attr("TCA_HTB_RATE64") or parms["rate"])
        out["ceil_bps"] = 8 * (opts.get_attr("TCA_HTB_CEIL64") or parms["ceil"])
    return out
