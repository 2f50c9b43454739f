"""Building a lab (netns.Lab.up): one namespace per node, one veth pair per
link made in the root namespace under temporary names, moved and renamed
into its nodes, addresses, egress queues and routes.  The module docstring
of hpccd.lab.netns says what is built and why."""
from __future__ import annotations

import dataclasses
import os
import pathlib

from . import offloads, queues
from .names import HOST_IFNAME, TEMP_PREFIX, port_ifname
from .namespaces import in_netns, lookup
from .topology import Topology


@dataclasses.dataclass
class Iface:
    node: str
    ifname: str
    temp: str                   # its name in the root namespace while being built
    link: int
    peer: str
    peer_ifname: str
    on_switch: bool


def interfaces(topo: Topology, token: str) -> list[Iface]:
    out = []
    for ln in topo.links:
        ends = (ln.a, ln.b)
        names = [port_ifname(e.port) if topo.is_switch(e.node) else HOST_IFNAME for e in ends]
        for j, e in enumerate(ends):
            o = 1 - j
            out.append(Iface(e.node, names[j], f"{TEMP_PREFIX}{token}{ln.index:x}{'ab'[j]}",
                             ln.index, ends[o].node, names[o], topo.is_switch(e.node)))
    return out


def _rps_mask(ncpu: int) -> str:
    """The sysfs CPU bitmap of CPUs 0..ncpu-1: hex, 32-bit groups, commas."""
    bits = (1 << ncpu) - 1
    groups = []
    while True:
        groups.append(f"{bits & 0xFFFFFFFF:08x}")
        bits >>= 32
        if not bits:
            break
    return ",".join(reversed(groups))


def steer_by_flow(ifname: str) -> None:
    """Receive packet steering by flow hash on every receive queue of
    `ifname` (in the root namespace, where sysfs shows it; the map stays
    with the device when it moves): each flow's packets are taken, on every
    hop, by the same CPU's backlog, so a hop forwards a flow in order as a
    switch port and a NIC queue (RSS) do.  Without it a veth hands each
    packet to the backlog of whichever CPU sent it, and two CPUs' backlogs
    reorder a flow: measured with two flows through the dumbbell and no
    loss, 105 go-back-N rewinds and 423 retransmissions in one run (none
    with the process held on one CPU, none with this steering; docs/lab.md,
    "Order")."""
    base = pathlib.Path(f"/sys/class/net/{ifname}/queues")
    mask = _rps_mask(os.cpu_count() or 1)
    for q in sorted(base.glob("rx-*")):
        (q / "rps_cpus").write_text(mask)


#: The least per-CPU receive backlog (packets) a lab needs: the steering
#: above queues every hop's packets of a flow on one CPU's backlog, also
#: when another CPU sent them, and the kernel's default of 1,000 packets is
#: about 3 ms of the lab's traffic summed over its hops (1 Gbit/s, three or
#: four veths a packet).  A CPU that runs the lab's other threads may serve
#: its backlog that late (its softirq deferred to ksoftirqd); the packets
#: over the limit were dropped (counted as "dropped" on the veths and in
#: /proc/net/softnet_stat) and a lossless path lost them: measured
#: 2026-11-26, one lab run in 20 under load 4 dropped 257 at one CPU's
#: backlog, none in 30 runs at 10,000 under load 6 (docs/lab.md "Order").
LAB_NETDEV_BACKLOG = 10_000
NETDEV_BACKLOG = pathlib.Path("/proc/sys/net/core/netdev_max_backlog")


def raise_netdev_backlog(least: int = LAB_NETDEV_BACKLOG, path: pathlib.Path = NETDEV_BACKLOG
                         ) -> int:
    """net.core.netdev_max_backlog at `least` packets: raised, never lowered
    (a host-wide setting with no namespace of its own; a larger value set by
    its owner is kept, and the lab leaves the raised one in place, as
    another lab or the host may rely on it).  Returns the value in force."""
    try:
        now = int(path.read_text())
    except (OSError, ValueError) as e:
        raise OSError(f"{path}: cannot read the receive backlog limit: {e}") from e
    if now < least:
        try:
            path.write_text(f"{least}\n")
        except OSError as e:
            raise OSError(f"{path}: cannot raise the receive backlog limit from {now} to "
                          f"{least} packets (the lab's steering needs it): {e}") from e
        now = least
    return now


def build(lab) -> None:
    """Namespaces, links, interfaces and routes of `lab` (netns.Lab.up)."""
    raise_netdev_backlog()
    create_namespaces(lab)
    create_links(lab)
    configure_interfaces(lab)
    add_routes(lab)


def create_namespaces(lab) -> None:
    from pyroute2 import netns

    for node in lab.topology.nodes:
        name = lab.netns(node)
        netns.create(name)
        sysctls(name, lab.topology.is_switch(node))


def sysctls(ns: str, switch: bool) -> None:
    """Before any interface moves in, so that they inherit "default"."""
    values = {
        "net/ipv4/ip_forward": "1" if switch else "0",
        "net/ipv4/conf/all/rp_filter": "0",
        "net/ipv4/conf/default/rp_filter": "0",
        "net/ipv6/conf/all/disable_ipv6": "1",
        "net/ipv6/conf/default/disable_ipv6": "1",
    }
    with in_netns(ns):
        for key, value in values.items():
            try:
                f = open(f"/proc/sys/{key}", "w")
            except FileNotFoundError:
                if "ipv6" in key:           # a kernel without IPv6: nothing to silence
                    continue
                raise
            with f:
                f.write(value)


def create_links(lab) -> None:
    from pyroute2 import IPRoute
    from pyroute2.ethtool import Ethtool

    pairs = [(lab.ifaces[k], lab.ifaces[k + 1]) for k in range(0, len(lab.ifaces), 2)]
    with IPRoute() as ipr, Ethtool() as et:
        for a, b in pairs:
            ipr.link("add", ifname=a.temp, kind="veth", peer={"ifname": b.temp})
            for i in (a, b):
                offloads.set_features(et, i.temp,
                                      offloads.offload_features(lab.offloads, i.on_switch))
                steer_by_flow(i.temp)
            for i in (a, b):
                idx = lookup(ipr, i.temp, "root namespace")
                ipr.link("set", index=idx, net_ns_fd=lab.netns(i.node))


def configure_interfaces(lab) -> None:
    from pyroute2 import NetNS

    by_node: dict[str, list[Iface]] = {}
    for i in lab.ifaces:
        by_node.setdefault(i.node, []).append(i)
    for node in lab.topology.nodes:
        with NetNS(lab.netns(node), flags=0) as ns:
            ns.link("set", index=lookup(ns, "lo", node), state="up")
            for i in by_node.get(node, []):
                ln = lab.topology.links[i.link]
                idx = lookup(ns, i.temp, node)
                ns.link("set", index=idx, ifname=i.ifname, mtu=ln.mtu)
                segs = offloads.gso_max_segs(lab.offloads, i.on_switch, ln.rate_mbps, ln.mtu)
                if segs is not None:
                    ns.link("set", index=idx, gso_max_segs=segs)
                end = ln.end(node)
                ns.addr("add", index=idx, address=str(end.address),
                        prefixlen=ln.network.prefixlen)
                queues.add_queue(ns, idx, ln.rate_mbps, ln.buffer_bytes, ln.mtu)
                if i.on_switch:
                    ns.tc("add", "clsact", idx)
                ns.link("set", index=idx, state="up")


def add_routes(lab) -> None:
    from pyroute2 import NetNS

    topo = lab.topology
    for h in topo.hosts.values():
        with NetNS(lab.netns(h.name), flags=0) as ns:
            ns.route("add", dst="0.0.0.0/0", gateway=str(h.gateway),
                     oif=lookup(ns, HOST_IFNAME, h.name))
    for s, routes in topo.routes.items():
        with NetNS(lab.netns(s), flags=0) as ns:
            for r in routes:
                oif = lookup(ns, port_ifname(r.port), s)
                if r.via == r.dst:          # the host is on this port's link
                    ns.route("add", dst=f"{r.dst}/32", oif=oif, scope=253)
                else:
                    ns.route("add", dst=f"{r.dst}/32", gateway=str(r.via), oif=oif)

# ---- route changes ----
