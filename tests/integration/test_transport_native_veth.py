"""Native XDP on a veth needs a qdisc (issue 14 item 2: no self-inflicted
loss; docs/transport.md "Native XDP on a veth needs a qdisc").

With native XDP at the peer, a veth puts each frame into the peer's XDP
ring.  When that ring is full, a veth with a qdisc stops its queue and the
sender waits (AF_XDP's sendto() says EAGAIN, the descriptor stays in the TX
ring); a veth with veth's default noqueue drops the frame (its TX
"dropped") and the flow retransmits it.  Measured before the pairs got a
qdisc: 1,064-1,394 of 69,638 packets retransmitted in about one 100 MB flow
of four, at MTU 1500.  So the namespace pairs have a pfifo root on both ends
(hpccd.lab.namespaces.veth_pair), and an engine attached in native mode to
a veth without one warns, naming the fix.  Real veths in namespaces the
test creates.
"""
from __future__ import annotations

import os
import subprocess
import warnings

import pytest

from conftest import netns_pair_ctx, set_mtu, transfer, transport_engines

tp = pytest.importorskip("hpccd.transport.engine", reason="hpccd._transport not built")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="namespaces and AF_XDP need root")


def _tc(pair, side: str, *args: str) -> None:
    ns, dev, _ = pair.side(side)
    subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", *args[:1], "dev", dev,
                    *args[1:]], check=True, capture_output=True)


def _tx_dropped(pair, side: str) -> int:
    from pyroute2 import NetNS

    ns, dev, _ = pair.side(side)
    with NetNS(ns, flags=0) as n:
        link = n.get_links(n.link_lookup(ifname=dev)[0])[0]
        return link.get_attr("IFLA_STATS64")["tx_dropped"]


def _root(pair, side: str) -> str:
    ns, dev, _ = pair.side(side)
    out = subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "show", "dev", dev,
                          "root"], check=True, capture_output=True, text=True).stdout
    return out.split()[1] if out.split() else ""


def test_the_pairs_have_a_qdisc_and_native_xdp_without_one_warns():
    """veth_pair's ends have a pfifo root; an engine in native mode on a
    noqueue veth warns (RuntimeWarning naming the interface and the fix),
    on a veth with a qdisc and in skb mode it does not."""
    with netns_pair_ctx() as pair:
        assert _root(pair, "a") == "pfifo" and _root(pair, "b") == "pfifo"
        with transport_engines(pair) as make, warnings.catch_warnings():
            warnings.simplefilter("error")                  # none here
            make("a", xdp_mode="native").close()
            _tc(pair, "a", "del", "root")                   # back to veth's noqueue
            assert _root(pair, "a") == "noqueue"
            make("a").close()                               # skb mode: no warning
            with pytest.warns(RuntimeWarning, match=f"{pair.va} .*without a qdisc.*pfifo"):
                make("a", xdp_mode="native")


def test_native_xdp_at_full_rate_loses_nothing():
    """Four 100 MB flows as fast as the engines go, native XDP on both ends
    at MTU 1500 (the smallest frames: the most per second into the peer's
    ring): byte-exact, no retransmission, nothing dropped by either veth
    (where the ring was full, the sender's sendto() said EAGAIN and it
    sent again)."""
    with netns_pair_ctx() as pair:
        set_mtu(pair, 1500)
        with transport_engines(pair, xdp_mode="native") as make:
            rx, tx = make("b"), make("a")
            for _ in range(4):
                res, _got = transfer(tx, rx, pair.ip_b, 100_000_000,
                                     line_rate_bps=100_000_000_000)
                # a timeout on a starved engine resends a packet; a drop
                # would be resent on the receiver's report (retx > rtos)
                assert res.stats["retx_pkts"] <= res.stats["rtos"], res.stats
            assert _tx_dropped(pair, "a") == 0 and _tx_dropped(pair, "b") == 0
