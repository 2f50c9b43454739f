"""Packets larger than a UMEM frame (issue 14): AF_XDP multi-buffer.

An engine binds its socket with XDP_USE_SG; a flow whose MTU is larger
than a frame (4096-byte frames carry 3,824) sends each packet as up to 16
frames, and the receiving engine gathers the pieces the kernel hands it.
Here on real veths: a bare pair at MTU 9000 (the flow's default MTU is the
interface's), the largest MTU the frames carry, and a switched path at MTU
9000 that loses 1 % of the data (selective repeat keeps copies of
multi-buffer packets out of order, and frees them).
"""
from __future__ import annotations

import os
import pathlib
import struct
import sys

import pytest

from conftest import lab_ctx, netns_pair_ctx, set_mtu, transfer, transport_engines
from hpccd.bpf import counters as bpf_counters
from hpccd.experiment.common import dumbbell
from hpccd.lab.topology import Topology

tp = pytest.importorskip("hpccd.transport.engine", reason="hpccd._transport not built")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="namespaces and AF_XDP need root")

ROOT = pathlib.Path(__file__).resolve().parents[2]
LOSS_OBJ = ROOT / "build" / "ebpf" / "lab_loss.bpf.o"
LOSS_TC = (2, 2)                 # after the lab's departure filter (test_faults.py)
U32 = 2 ** 32


def jumbo_lab(mtu: int) -> str:
    """h1 - s1 - s2 - r1 at 2 Gbit/s, every link at `mtu`."""
    return dumbbell("jumbo", "10.126.0.0/16", ["h1"], ["r1"], 2000, 2_000_000,
                    k_bytes=200_000, mtu=mtu)


@pytest.mark.parametrize("mtu", [9000, 16 * 3838 - 14])
def test_native_xdp_takes_frames_larger_than_a_page(mtu):
    """xdp_host is a multi-buffer (xdp.frags) program: it attaches in native
    mode to a veth whose MTU is larger than a page (a program that is not
    is refused there), steers the frames whose payload goes on in fragments
    to the engine, and the engine gathers them exactly."""
    with netns_pair_ctx() as pair:
        set_mtu(pair, mtu)
        with transport_engines(pair, xdp_mode="native") as make:
            rx, tx = make("b"), make("a")
            s_rx, x0 = rx.stats(), rx.xdp_counters()
            res, got = transfer(tx, rx, pair.ip_b, 20_000_000, line_rate_bps=5_000_000_000)
            assert res.stats["mss"] + res.stats["hdr_bytes"] - 14 == mtu, res.stats
            # Nothing lost: no retransmission but after a timeout (the
            # engines starved for an RTO on the loaded machine resend one
            # packet each time, seen 2 in 10 runs at load 4); a frame the
            # receiver did not take would be resent on its report.
            assert res.stats["retx_pkts"] <= res.stats["rtos"], res.stats
            e_rx = rx.stats()
            assert e_rx["rx_mb_pkts"] - s_rx["rx_mb_pkts"] >= res.stats["pkts"] - 1, e_rx
            assert e_rx["rx_mb_bad"] == s_rx["rx_mb_bad"] and e_rx["bad_csum"] == 0, e_rx
            # every DATA packet steered by the program, none taken for
            # malformed (a payload that goes on in the fragments is not a
            # truncated one)
            x1 = rx.xdp_counters()
            delta = {sl.name: x1[sl.index] - x0[sl.index] for sl in bpf_counters.XDP_SLOTS}
            assert delta["redirect_xsk"] >= res.stats["pkts"], delta
            assert not any(delta[sl.name] for sl in bpf_counters.XDP_SLOTS
                           if sl.name.startswith("malformed")), delta


@pytest.mark.parametrize("mtu", [9000, 16 * 3838 - 14])
def test_packets_larger_than_a_frame_on_a_veth_pair(mtu):
    with netns_pair_ctx() as pair:
        set_mtu(pair, mtu)
        with transport_engines(pair) as make:
            rx, tx = make("b"), make("a")
            assert tx.stats()["sg"] == 1 and rx.stats()["sg"] == 1
            assert tx.mtu_max >= mtu
            s_tx, s_rx = tx.stats(), rx.stats()
            res, got = transfer(tx, rx, pair.ip_b, 40_000_000, line_rate_bps=5_000_000_000)
            # the flow took the interface's MTU, not one frame's
            assert res.stats["mss"] + res.stats["hdr_bytes"] - 14 == mtu, res.stats
            e_tx, e_rx = tx.stats(), rx.stats()
            pkts = res.stats["pkts"]
            assert e_tx["tx_mb_pkts"] - s_tx["tx_mb_pkts"] >= pkts - 1, (pkts, e_tx)
            assert e_rx["rx_mb_pkts"] - s_rx["rx_mb_pkts"] >= pkts - 1, (pkts, e_rx)
            assert e_rx["rx_mb_bad"] == s_rx["rx_mb_bad"]
            # each packet as ceil(len / 4094) TX frames
            per = -(-(mtu + 14) // 4094)
            assert e_tx["tx_frames"] - s_tx["tx_frames"] >= (pkts - 1) * per, (pkts, e_tx)


def test_without_multi_buffer_a_flow_keeps_to_one_frame():
    with netns_pair_ctx() as pair:
        set_mtu(pair, 9000)
        with transport_engines(pair, sg=False) as make:
            rx, tx = make("b"), make("a")
            assert tx.stats()["sg"] == 0
            assert tx.mtu_max == 4096 - 2 - 256 - 14
            res, _ = transfer(tx, rx, pair.ip_b, 5_000_000)
            assert res.stats["mss"] + res.stats["hdr_bytes"] - 14 == tx.mtu_max
            assert tx.stats()["tx_mb_pkts"] == 0
            with pytest.raises(tp.TransportError, match="(?i)mtu"):
                tx.open_flow(pair.ip_b, 1000, mtu=9000)


def test_jumbo_selective_repeat_under_loss_through_a_switch():
    """1 % of the data lost at the switch: the receiver keeps the
    out-of-order multi-buffer packets (copies), the sender resends each
    lost packet about once, every byte arrives."""
    from hpccd.bpf import loader as bpf

    if not LOSS_OBJ.exists():
        pytest.skip("build/ebpf objects missing (make bpf)")
    with lab_ctx(Topology.loads(jumbo_lab(9000))) as lab:
        port = next(f"p{pt.number}" for pt in lab.topology.switches["s1"].ports
                    if pt.peer == "h1")
        obj = bpf.BpfObject.open(LOSS_OBJ)
        attached = False
        try:
            obj.load()
            obj.map("hpccd_loss_cfg").update(0, struct.pack("<II", int(0.01 * (U32 - 1)), 0))
            with bpf.in_netns(lab.netns("s1")):
                bpf.tc_attach(port, obj.program("hpccd_lab_loss"), "ingress", *LOSS_TC)
            attached = True
            with transport_engines(lab) as make:
                rx, tx = make("r1"), make("h1")
                res, got = transfer(tx, rx, lab.address("r1"), 60_000_000,
                                     line_rate_bps=2_000_000_000, recovery="sr")
                dropped = sum(int.from_bytes(v[:8], sys.byteorder)
                              for v in obj.map("hpccd_loss_cnt").lookup(1))
        finally:
            if attached:
                with bpf.in_netns(lab.netns("s1")):
                    bpf.tc_detach(port, "ingress", *LOSS_TC)
            obj.close()
    assert res.stats["mss"] + res.stats["hdr_bytes"] - 14 == 9000, res.stats
    assert dropped > 20, dropped
    assert got.stats["held_pkts"] > 0, got.stats
    assert res.stats["retx_pkts"] <= 1.3 * dropped + 5, (res.stats["retx_pkts"], dropped)


@pytest.mark.parametrize("mtu", [9000, 16 * 3838 - 14])
def test_jumbo_packets_carry_int_through_the_switch(mtu):
    """The lab's INT switch stamps multi-buffer packets (it makes them
    linear: up to 9,216 bytes it did, and 61 KB packets crossed unstamped,
    HPCC running blind at line rate), and HPCC reacts to their INT."""
    with lab_ctx(Topology.loads(jumbo_lab(mtu))) as lab:
        with transport_engines(lab) as make:
            rx, tx = make("r1"), make("h1")
            res, got = transfer(tx, rx, lab.address("r1"), 20_000_000, verify=False,
                                algo="hpcc", int_mode="every", line_rate_bps=2_000_000_000,
                                hpcc={"T_ns": 300_000})
    assert got.bytes == 20_000_000, (res, got)
    assert res.stats["mss"] + res.stats["hdr_bytes"] - 14 == mtu, res.stats
    assert got.stats["int_pkts"] == got.stats["pkts"] > 0, got.stats
    assert res.stats["cc_updates"] > 100, res.stats
