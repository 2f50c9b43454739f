"""The offloads of a lab interface by mode (docs/lab.md, "Offloads"): which
ethtool features are set, and the largest super-packet a host may build."""
from __future__ import annotations

from .queues import ETH_HLEN, htb_burst_bytes

OFFLOAD_MODES = ("trains", "frames", "on", "off")

# ethtool feature names (ethtool -k): TSO is a family of features.
_TSO = ("tx-tcp-segmentation", "tx-tcp-ecn-segmentation", "tx-tcp-mangleid-segmentation",
        "tx-tcp6-segmentation", "tx-tcp-accecn-segmentation")
_GSO = ("tx-generic-segmentation",)
_UFO = ("tx-udp-segmentation",)
_GRO = ("rx-gro",)
_GRO_VARIANTS = ("rx-gro-list", "rx-udp-gro-forwarding")


def offload_features(mode: str, on_switch: bool) -> dict[str, bool]:
    """ethtool features of one lab interface in offload `mode` (docs/lab.md,
    "Offloads"); {} leaves veth's defaults (TSO/GSO on, GRO off).

    - "trains" (default): veth's defaults, plus GRO on the hosts' receive
      side (as a host NIC's GRO); with the super-packet cap of
      gso_max_segs a host's TCP sends trains of at most half an HTB
      bucket, which travel as one skb until the receiving host.
    - "frames": hosts TSO off (super-packets are cut into frames after the
      host's own queue, as a TSO NIC does), GRO on; switch ports TSO, GSO
      and GRO off: every switch queue holds single frames only.
    - "on": veth's defaults everywhere, no cap: 64 KB super-packets travel
      through the switch queues whole.
    - "off": segmentation and GRO off everywhere, one frame per packet
      from TCP on (see gso_max_segs).
    Checksum offload stays on in every mode: it does not change what a
    queue holds."""
    if mode == "on":
        return {}
    if mode == "trains":
        return {} if on_switch else dict.fromkeys(_GRO, True)
    feats = dict.fromkeys(_TSO + _UFO + _GRO_VARIANTS, False)
    host = mode == "frames" and not on_switch
    feats.update(dict.fromkeys(_GSO, host))
    feats.update(dict.fromkeys(_GRO, host))
    return feats


def gso_max_segs(mode: str, on_switch: bool, rate_mbps: int, mtu: int) -> int | None:
    """The largest super-packet (in frames) a host's TCP may build, or None
    for the kernel's default (65535).  "trains" and "frames": as many
    frames as half the link's HTB bucket holds (at least one).  A host's
    queue then releases no more back-to-back than any port may after a
    late wake-up, so the first switch sees the same trains as every later
    one, not 64 KB at once; the other half of the bucket is the slack for
    the next port's timer to fire late without losing rate (docs/lab.md,
    "Queues").  "off": one frame (TCP in this kernel builds GSO packets
    even when the device has GSO off; they would be cut only after the
    host's queue)."""
    if mode == "on" or on_switch:
        return None
    if mode == "off":
        return 1
    return max(1, htb_burst_bytes(rate_mbps, mtu) // (2 * (mtu + ETH_HLEN)))


def set_features(et, ifname: str, want: dict[str, bool]) -> None:
    """Set ethtool features (ethtool -K) through pyroute2's ioctl support,
    in the calling thread's namespace; a feature the device cannot change
    is left alone, a feature it does not know is skipped."""
    if not want:
        return
    feats = et.get_features(ifname)
    changed = False
    for name, on in want.items():
        f = feats.features.get(name)
        if f is None or f.enable == on or not f.available:
            continue
        f.enable = on
        changed = True
    if changed:
        et.set_features(ifname, feats)
