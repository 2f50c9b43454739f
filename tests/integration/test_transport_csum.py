"""DATA's UDP checksum left to the device (issue 14; docs/transport.md
"Checksum offload"): the sending engine asks the kernel through AF_XDP TX
metadata to complete it (the skb leaves CHECKSUM_PARTIAL), and the
receiving engine judges what arrives:

- on a veth nobody completes it: the field holds exactly the pseudo-header
  sum; the receiver takes such packets unchecked and counts them
  (csum_unverified), none as malformed;
- on a path that completes it (here: the sender's veth with its checksum
  offload turned off, so the kernel sums it in software as for a NIC without
  offload) the receiver verifies every packet: none unverified, none bad --
  which also proves the request's csum_start / csum_offset are right;
- a damaged checksum is still dropped and counted (bad_csum), and a crafted
  frame whose field is the pseudo-header sum is taken unverified.

Real packets through a veth pair the test creates and removes.
"""
from __future__ import annotations

import os
import socket
import struct
import subprocess
import time

import pytest

from conftest import netns_pair_ctx, set_mtu, transfer, transport_engines
from hpccd.core.checksum import internet_checksum

# A checksum summed in full equals the folded pseudo-header sum (what an
# offloaded field holds, taken unchecked and counted csum_unverified) by
# chance, about once in 65,536 packets: one in a CI run of 1,393.  With the
# offload wrongly on every packet would count.
CHANCE = 2

tp = pytest.importorskip("hpccd.transport.engine", reason="hpccd._transport not built")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="namespaces and AF_XDP need root")


def _flow(tx, rx, peer: str, nbytes: int):
    s0 = rx.stats()
    res, _ = transfer(tx, rx, peer, nbytes, line_rate_bps=5_000_000_000)
    s1 = rx.stats()
    return res, {k: s1[k] - s0[k] for k in ("csum_unverified", "bad_csum")}, \
        s1["by_type"]["DATA"] - s0["by_type"]["DATA"]


@pytest.mark.parametrize("mtu", [1500, 9000])
def test_offloaded_checksum_on_a_veth_is_taken_unverified(mtu):
    with netns_pair_ctx() as pair:
        set_mtu(pair, mtu)
        with transport_engines(pair) as make:
            rx, tx = make("b"), make("a")
            assert tx.stats()["tx_csum_offload"] == 1       # the default, and 6.8+ took it
            res, d, data = _flow(tx, rx, pair.ip_b, 5_000_000)
            assert data >= res.stats["pkts"] - res.stats["retx_pkts"] > 0
            assert d == {"csum_unverified": data, "bad_csum": 0}, (d, data)


def test_checksum_completed_on_the_path_is_verified():
    """The sender's veth without checksum offload: the kernel completes each
    DATA checksum in software from the request (validate_xmit_skb), the
    receiver sums and verifies every one."""
    with netns_pair_ctx() as pair:
        set_mtu(pair, 9000)
        subprocess.run(["ip", "netns", "exec", pair.a, "ethtool", "-K", pair.va, "tx", "off"],
                       check=True, capture_output=True)
        with transport_engines(pair) as make:
            rx, tx = make("b"), make("a")
            assert tx.stats()["tx_csum_offload"] == 1
            res, d, data = _flow(tx, rx, pair.ip_b, 5_000_000)
            assert data > 0 and d["bad_csum"] == 0 and d["csum_unverified"] <= CHANCE, (d, data)


def test_offload_off_sums_every_checksum(netns_pair):
    with transport_engines(netns_pair) as make:
        rx, tx = make("b"), make("a", csum_offload=False)
        assert tx.stats()["tx_csum_offload"] == 0
        res, d, data = _flow(tx, rx, netns_pair.ip_b, 2_000_000)
        assert data > 0 and d["bad_csum"] == 0 and d["csum_unverified"] <= CHANCE, (d, data)


def test_receiver_judges_crafted_checksums(netns_pair):
    """Frames written byte for byte from A (AF_PACKET): a DATA whose field is
    the folded pseudo-header sum is taken unverified; one with the correct
    checksum is verified; one whose checksum is off by a bit is dropped and
    counted bad; only the first two are delivered."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw

    from hpccd.bpf import loader as bpf
    from hpccd.core import wire

    p = netns_pair
    body = bytes(wire.int_header() / wire.Hpccd(type=wire.T_DATA, flow_id=0x77, seq=0) /
                 Raw(b"a" * 64))
    body2 = bytes(wire.int_header() / wire.Hpccd(type=wire.T_DATA, flow_id=0x77, seq=64) /
                  Raw(b"b" * 64))
    body3 = bytes(wire.int_header() / wire.Hpccd(type=wire.T_DATA, flow_id=0x77, seq=128) /
                  Raw(b"c" * 64))

    def frame(b: bytes, check: int | None) -> bytes:
        pkt = (Ether(src=p.mac_a, dst=p.mac_b) / IP(src=p.ip_a, dst=p.ip_b, flags="DF") /
               UDP(sport=40000, dport=wire.UDP_PORT_DEFAULT) / Raw(b))
        raw = bytearray(bytes(pkt))         # scapy fills the correct checksum
        if check is not None:
            struct.pack_into("!H", raw, 14 + 20 + 6, check)
        return bytes(raw)

    ulen = 8 + len(body)
    # the folded pseudo-header sum: the checksum's complement
    pseudo = ~internet_checksum(socket.inet_aton(p.ip_a) + socket.inet_aton(p.ip_b) +
                                struct.pack("!BBH", 0, 17, ulen)) & 0xFFFF
    good = frame(body2, None)
    (good_check,) = struct.unpack_from("!H", good, 40)
    with transport_engines(p) as make:
        rx = make("b")
        s0 = rx.stats()
        with bpf.in_netns(p.a):
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
            s.bind((p.va, 0))
        try:
            s.send(frame(body, pseudo))                   # partial: unverified
            s.send(good)                                  # complete: verified
            s.send(frame(body3, good_check ^ 0x0100))     # damaged: bad
        finally:
            s.close()
        deadline = time.monotonic() + 5
        while rx.stats()["by_type"]["DATA"] - s0["by_type"]["DATA"] < 3 and \
                time.monotonic() < deadline:
            time.sleep(0.02)
        s1 = rx.stats()
        assert s1["by_type"]["DATA"] - s0["by_type"]["DATA"] == 3, s1
        assert s1["csum_unverified"] - s0["csum_unverified"] == 1, s1
        assert s1["bad_csum"] - s0["bad_csum"] == 1, s1
        (f,) = [f for f in rx.rx_flows() if f.flow_id == 0x77]
        assert f.bytes == 128 and f.stats["pkts"] == 2, (f.bytes, f.stats)
