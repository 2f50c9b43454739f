"""The netns lab: a topology file (hpccd.lab.topology) built out of network
namespaces, veth pairs and real egress queues, with pyroute2 only (netlink,
ethtool ioctls, /proc/sys inside the namespace; no ip/tc commands).

    with Lab("dumbbell") as lab:                 # up() ... down(), always
        lab.ping("h1", "r1")
        lab.popen("r1", ["iperf3", "-s", "-1"])
        ...

What up() builds (docs/lab.md has the diagrams and the reasons):

- one namespace per node, ``<lab>-<node>`` (``dumbbell-s1``), loopback up;
  switches forward (ip_forward=1, rp_filter=0), hosts do not; IPv6 is off
  in every namespace so that no router solicitation or MLD report lands
  in a measured queue;
- per link a veth pair, created in the root namespace under temporary
  unique names (``hl`` + 6 random hex digits of this Lab object + the link
  index in hex + ``a``/``b``), its offloads set there (ethtool ioctls
  through pyroute2), then each end moved into its node's namespace and
  renamed there: a switch's port ``n`` is ``p<n>``, a host's one
  interface ``eth0``;
- addresses from the topology (the /30 of each link), a default route on
  every host via its switch, a /32 route on every switch to every host;
- on every interface, switch port and host alike, the egress queue of the
  link: HTB root ``1:`` whose one class ``1:1`` runs at the link rate
  (bucket: HTB_BURST_US at that rate), and under it a byte-limited FIFO
  (bfifo ``10:``) of ``buffer_bytes``;
- a clsact qdisc on every switch port, where the software INT switch's tc
  egress program goes: ``port_hooks`` (below) attach it;
- offloads by mode (OFFLOAD_MODES, default "trains"): see
  _offload_features and _gso_max_segs.

Ownership and clean-up.  up() first creates the state file
``/run/hpccd/lab-<name>.json`` with O_EXCL (a second up() of the same lab
fails there, touching nothing) listing every namespace and temporary
interface name it is about to create.  down() closes the hooks, stops the
processes and sockets it handed out, deletes what is left of those
interfaces in the root namespace, aborts TCP connections no process owns
any more in each namespace, removes the namespaces (their veths and tc
programs go with them), waits until the kernel has freed each one, then
removes the state file.  down() runs on any exception in up() (including
KeyboardInterrupt), in ``__exit__``, and from another process by name
(``hpccctl lab down NAME``, :func:`down`), for instance after a crash.

The INT switch.  ``Lab(topology)`` attaches the software INT switch
(hpccd.lab.int_switch: ebpf/int_switch.bpf.o on tc egress of every switch
port, configured from the topology's switch ids, port rates and ``ecn``
tables) as the first port hook, and keeps it as ``lab.int_switch`` for
counters, queue samples and reconfiguration; its maps are pinned under
``/sys/fs/bpf/hpccd-lab/<lab>/`` for other processes, and down() removes
the pins.  ``int_switch=False`` builds plain routers (the queues are
there, no INT, no marking); an ``IntSwitch`` instance is used as given.

Hooks for the switch program.  ``Lab(topology, port_hooks=[hook, ...])``:
after everything is up, every hook is called once per switch port as
``hook(port: SwitchPort)`` with the calling thread inside that switch's
namespace (so libbpf's tc calls and interface names act there); a hook
attaches its tc egress program (``hpccd.bpf.loader.tc_attach(port.ifname, prog)``)
and fills its maps from ``port.switch`` (id, ECN thresholds) and
``port.port`` (number, rate, speed code, buffer).  A hook with a
``close()`` method has it called by down() before the namespaces go.  An
exception in a hook tears the lab down like any other failure of up().
"""
from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import pathlib
import secrets
import signal
import socket as _socket
import struct
import subprocess
import time
from typing import Any, Callable, Iterable, Iterator, Sequence

from ..cli.errors import not_root
from ..core.checksum import internet_checksum
from .topology import LAB_NAME, Port, Switch, Topology, TopologyError

__all__ = ["Lab", "LabError", "SwitchPort", "PortHook", "OFFLOAD_MODES", "STATE_DIR",
           "HOST_IFNAME", "port_ifname", "netns_name", "down", "status", "list_labs",
           "load_state"]

STATE_DIR = "/run/hpccd"
NETNS_DIR = "/run/netns"
HOST_IFNAME = "eth0"
HTB_HANDLE = 0x10000          # 1:
HTB_CLASS = 0x10001           # 1:1
FIFO_HANDLE = 0x100000        # 10:
ETH_HLEN = 14
# HTB's bucket, in microseconds at the link rate (12 500 bytes at 1 Gbit/s).
# A real port releases one frame at a time; the emulated one needs slack
# because HTB's timer fires late on a busy two-core machine, and tokens
# beyond the bucket are lost: a port whose bucket is shorter than its
# timer's lateness drains below its rate and builds a standing queue that
# no real port of that rate would have.  docs/lab.md ("Queues") has the
# measurements this value comes from.
HTB_BURST_US = 100
OFFLOAD_MODES = ("trains", "frames", "on", "off")
TEMP_PREFIX = "hl"
# How long down() waits for the kernel to free a removed namespace: at
# once normally, but the last sockets of a namespace are freed after an RCU
# grace period, which a saturated machine can stretch to seconds.
ALIVE_WAIT_S = 10.0

# ethtool feature names (ethtool -k): TSO is a family of features.
_TSO = ("tx-tcp-segmentation", "tx-tcp-ecn-segmentation", "tx-tcp-mangleid-segmentation",
        "tx-tcp6-segmentation", "tx-tcp-accecn-segmentation")
_GSO = ("tx-generic-segmentation",)
_UFO = ("tx-udp-segmentation",)
_GRO = ("rx-gro",)
_GRO_VARIANTS = ("rx-gro-list", "rx-udp-gro-forwarding")


def _offload_features(mode: str, on_switch: bool) -> dict[str, bool]:
    """ethtool features of one lab interface in offload `mode` (docs/lab.md,
    "Offloads"); {} leaves veth's defaults (TSO/GSO on, GRO off).

    - "trains" (default): veth's defaults, plus GRO on the hosts' receive
      side (as a host NIC's GRO); with the super-packet cap of
      _gso_max_segs a host's TCP sends trains of at most half an HTB
      bucket, which travel as one skb until the receiving host.
    - "frames": hosts TSO off (super-packets are cut into frames after the
      host's own queue, as a TSO NIC does), GRO on; switch ports TSO, GSO
      and GRO off: every switch queue holds single frames only.
    - "on": veth's defaults everywhere, no cap: 64 KB super-packets travel
      through the switch queues whole.
    - "off": segmentation and GRO off everywhere, one frame per packet
      from TCP on (see _gso_max_segs).
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


def _steer_by_flow(ifname: str) -> None:
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


def _gso_max_segs(mode: str, on_switch: bool, rate_mbps: int, mtu: int) -> int | None:
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


class LabError(RuntimeError):
    """Building, tearing down or inspecting a lab failed."""


def netns_name(lab: str, node: str) -> str:
    return f"{lab}-{node}"


def port_ifname(number: int) -> str:
    return f"p{number}"


def state_path(lab: str, state_dir: str = STATE_DIR) -> str:
    return os.path.join(state_dir, f"lab-{lab}.json")


@dataclasses.dataclass(frozen=True)
class SwitchPort:
    """What a port hook gets: one egress port of one switch of a lab that
    is up.  The hook runs with the calling thread in ``netns``."""

    lab: str
    netns: str
    switch: Switch              # name, id, ecn
    port: Port                  # number, rate, speed code, buffer, peer
    ifname: str                 # p<number>
    ifindex: int                # in netns
    topology: Topology


PortHook = Callable[[SwitchPort], Any]


@dataclasses.dataclass
class _Iface:
    node: str
    ifname: str
    temp: str                   # its name in the root namespace while being built
    link: int
    peer: str
    peer_ifname: str
    on_switch: bool


def _interfaces(topo: Topology, token: str) -> list[_Iface]:
    out = []
    for ln in topo.links:
        ends = (ln.a, ln.b)
        names = [port_ifname(e.port) if topo.is_switch(e.node) else HOST_IFNAME for e in ends]
        for j, e in enumerate(ends):
            o = 1 - j
            out.append(_Iface(e.node, names[j], f"{TEMP_PREFIX}{token}{ln.index:x}{'ab'[j]}",
                              ln.index, ends[o].node, names[o], topo.is_switch(e.node)))
    return out


class Lab:
    """A lab built from `topology`; see the module docstring.

    ``name`` overrides the topology's lab name (tests use unique names so
    that labs of the same file can coexist); ``offloads`` is one of
    OFFLOAD_MODES; ``int_switch``: attach the INT switch (True), not
    (False), or this hpccd.lab.int_switch.IntSwitch; ``port_hooks`` are called
    per switch port once the lab is up, after the INT switch."""

    def __init__(self, topology: Topology | str, *, name: str | None = None,
                 offloads: str = "trains", int_switch: "bool | Any" = True,
                 port_hooks: Sequence[PortHook] = (), state_dir: str = STATE_DIR):
        if not isinstance(topology, Topology):
            topology = Topology.load(topology)
        if offloads not in OFFLOAD_MODES:
            raise ValueError(f"offloads {offloads!r}: one of {', '.join(OFFLOAD_MODES)}")
        self.topology = topology
        self.name = name or topology.name
        if not LAB_NAME.fullmatch(self.name):
            raise ValueError(f"lab name {self.name!r}: must match {LAB_NAME.pattern}")
        self.offloads = offloads
        if int_switch is True:
            from .int_switch import IntSwitch
            int_switch = IntSwitch()
        self.int_switch = int_switch or None
        self.port_hooks = ([self.int_switch] if self.int_switch else []) + list(port_hooks)
        self.state_dir = state_dir
        self.state_file = state_path(self.name, state_dir)
        self.token = secrets.token_hex(3)
        self.ifaces = _interfaces(topology, self.token)
        self.is_up = False
        self._claimed = False
        self._procs: list[subprocess.Popen] = []
        self._socks: list[_socket.socket] = []
        self.reroutes: dict[tuple[str, str], int] = {}    # (switch, host) -> port

    # ---- names ----

    def netns(self, node: str) -> str:
        """Namespace of `node`."""
        if node not in self.topology.switches and node not in self.topology.hosts:
            raise KeyError(f"lab {self.name}: no node {node!r}")
        return netns_name(self.name, node)

    @property
    def namespaces(self) -> list[str]:
        return [self.netns(n) for n in self.topology.nodes]

    def ifname(self, node: str, peer: str | None = None) -> str:
        """Interface of `node` (towards `peer`; a host has one)."""
        for i in self.ifaces:
            if i.node == node and (peer is None or i.peer == peer):
                return i.ifname
        raise KeyError(f"lab {self.name}: {node} has no link" + (f" to {peer}" if peer else ""))

    def address(self, host: str) -> str:
        return str(self.topology.address(host))

    # ---- up ----

    def __enter__(self) -> "Lab":
        if not self.is_up:
            self.up()
        return self

    def __exit__(self, *exc) -> None:
        self.down()

    def up(self) -> "Lab":
        """Build the lab; on any failure remove what was built and re-raise."""
        if self._claimed:
            raise LabError(f"lab {self.name} is up already (this Lab object built it)")
        try:
            self._claim()        # down() removes nothing unless the claim succeeded
            self._build()
            self._run_hooks()
            self._write_state("up")
            self.is_up = True
        except BaseException as e:
            try:
                self.down()
            except BaseException as e2:         # keep the original error in front
                raise LabError(f"lab {self.name}: up() failed ({e!r}) and so did the "
                               f"clean-up: {e2}; see hpccctl lab down {self.name}") from e
            raise
        return self

    def _claim(self) -> None:
        """Create the state file (O_EXCL: the lab's lock) listing what up()
        will create, after checking that none of it exists."""
        os.makedirs(self.state_dir, mode=0o755, exist_ok=True)
        if os.path.exists(self.state_file):
            raise LabError(f"lab {self.name} exists (state file {self.state_file}); "
                           f"hpccctl lab down {self.name} removes it")
        there = [n for n in self.namespaces if os.path.exists(f"{NETNS_DIR}/{n}")]
        if there:
            raise LabError(f"lab {self.name}: namespaces {there} exist but no state file "
                           f"does (hpccctl lab down {self.name} --topology "
                           f"{self.topology.file} removes them)")
        try:
            fd = os.open(self.state_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            raise LabError(f"lab {self.name} is being built by another process "
                           f"(state file {self.state_file})") from None
        os.close(fd)
        self._claimed = True
        self._write_state("building")

    def _state(self, status: str) -> dict[str, Any]:
        return {
            "version": 1, "name": self.name, "status": status, "pid": os.getpid(),
            "time": time.time(), "offloads": self.offloads,
            "int_switch": self.int_switch is not None,
            "topology_file": self.topology.file, "topology_text": self.topology.text,
            "namespaces": self.namespaces,
            "temp_ifnames": [i.temp for i in self.ifaces],
            "interfaces": [dataclasses.asdict(i) for i in self.ifaces],
        }

    def _write_state(self, status: str) -> None:
        tmp = f"{self.state_file}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(self._state(status), f, indent=1)
            f.write("\n")
        os.replace(tmp, self.state_file)

    def _build(self) -> None:
        self._create_namespaces()
        self._create_links()
        self._configure_interfaces()
        self._add_routes()

    def _create_namespaces(self) -> None:
        from pyroute2 import netns

        for node in self.topology.nodes:
            name = self.netns(node)
            netns.create(name)
            self._sysctls(name, self.topology.is_switch(node))

    def _sysctls(self, ns: str, switch: bool) -> None:
        """Before any interface moves in, so that they inherit "default"."""
        values = {
            "net/ipv4/ip_forward": "1" if switch else "0",
            "net/ipv4/conf/all/rp_filter": "0",
            "net/ipv4/conf/default/rp_filter": "0",
            "net/ipv6/conf/all/disable_ipv6": "1",
            "net/ipv6/conf/default/disable_ipv6": "1",
        }
        with _in_netns(ns):
            for key, value in values.items():
                try:
                    f = open(f"/proc/sys/{key}", "w")
                except FileNotFoundError:
                    if "ipv6" in key:           # a kernel without IPv6: nothing to silence
                        continue
                    raise
                with f:
                    f.write(value)

    def _create_links(self) -> None:
        from pyroute2 import IPRoute
        from pyroute2.ethtool import Ethtool

        pairs = [(self.ifaces[k], self.ifaces[k + 1]) for k in range(0, len(self.ifaces), 2)]
        with IPRoute() as ipr, Ethtool() as et:
            for a, b in pairs:
                ipr.link("add", ifname=a.temp, kind="veth", peer={"ifname": b.temp})
                for i in (a, b):
                    _set_features(et, i.temp, _offload_features(self.offloads, i.on_switch))
                    _steer_by_flow(i.temp)
                for i in (a, b):
                    idx = _lookup(ipr, i.temp, "root namespace")
                    ipr.link("set", index=idx, net_ns_fd=self.netns(i.node))

    def _configure_interfaces(self) -> None:
        from pyroute2 import NetNS

        by_node: dict[str, list[_Iface]] = {}
        for i in self.ifaces:
            by_node.setdefault(i.node, []).append(i)
        for node in self.topology.nodes:
            with NetNS(self.netns(node), flags=0) as ns:
                ns.link("set", index=_lookup(ns, "lo", node), state="up")
                for i in by_node.get(node, []):
                    ln = self.topology.links[i.link]
                    idx = _lookup(ns, i.temp, node)
                    ns.link("set", index=idx, ifname=i.ifname, mtu=ln.mtu)
                    segs = _gso_max_segs(self.offloads, i.on_switch, ln.rate_mbps, ln.mtu)
                    if segs is not None:
                        ns.link("set", index=idx, gso_max_segs=segs)
                    end = ln.end(node)
                    ns.addr("add", index=idx, address=str(end.address),
                            prefixlen=ln.network.prefixlen)
                    _add_queue(ns, idx, ln.rate_mbps, ln.buffer_bytes, ln.mtu)
                    if i.on_switch:
                        ns.tc("add", "clsact", idx)
                    ns.link("set", index=idx, state="up")

    def _add_routes(self) -> None:
        from pyroute2 import NetNS

        topo = self.topology
        for h in topo.hosts.values():
            with NetNS(self.netns(h.name), flags=0) as ns:
                ns.route("add", dst="0.0.0.0/0", gateway=str(h.gateway),
                         oif=_lookup(ns, HOST_IFNAME, h.name))
        for s, routes in topo.routes.items():
            with NetNS(self.netns(s), flags=0) as ns:
                for r in routes:
                    oif = _lookup(ns, port_ifname(r.port), s)
                    if r.via == r.dst:          # the host is on this port's link
                        ns.route("add", dst=f"{r.dst}/32", oif=oif, scope=253)
                    else:
                        ns.route("add", dst=f"{r.dst}/32", gateway=str(r.via), oif=oif)

    # ---- route changes ----

    def reroute(self, switch: str, host: str, port: int) -> None:
        """Send `switch`'s traffic to `host` out of `port` from now on (a
        path change, [HPCC++2022] section 9.1 / [HPCC] section 4.1): its /32
        route to the host is replaced, via the neighbour on that port.  The
        neighbour must be a switch (whose own routes carry on) or the host
        itself; a change that makes a loop is refused.  ``path()`` follows."""
        topo = self.topology
        sw = topo.switches.get(switch)
        if sw is None:
            raise LabError(f"lab {self.name}: reroute: no switch {switch!r}")
        if host not in topo.hosts:
            raise LabError(f"lab {self.name}: reroute: no host {host!r}")
        if not 1 <= port <= len(sw.ports):
            raise LabError(f"lab {self.name}: reroute: {switch} has no port {port} "
                           f"(ports 1..{len(sw.ports)})")
        p = sw.port(port)
        if p.peer != host and not topo.is_switch(p.peer):
            raise LabError(f"lab {self.name}: reroute {switch} -> {host} via p{port}: its "
                           f"neighbour there is host {p.peer}, which does not forward")
        before = self.reroutes.get((switch, host))
        self.reroutes[(switch, host)] = port
        try:
            for src in topo.hosts:
                if src != host:
                    self.path(src, host)
        except LabError:
            if before is None:
                del self.reroutes[(switch, host)]
            else:
                self.reroutes[(switch, host)] = before
            raise
        from pyroute2 import NetNS

        dst = f"{topo.address(host)}/32"
        with NetNS(self.netns(switch), flags=0) as ns:
            oif = _lookup(ns, port_ifname(port), switch)
            if p.peer == host:
                ns.route("replace", dst=dst, oif=oif, scope=253)
            else:
                ns.route("replace", dst=dst, gateway=str(p.peer_address), oif=oif)

    def path(self, src: str, dst: str) -> list:
        """Like Topology.path (the switches and egress ports from host `src`
        to host `dst`), with the reroute()s made so far."""
        topo = self.topology
        s, d = topo.hosts[src], topo.hosts[dst]
        if s.name == d.name:
            return []
        from .topology import Hop

        hops: list = []
        node = s.switch
        while True:
            port = self.reroutes.get((node, dst)) or topo.route(node, dst).port
            hops.append(Hop(node, port))
            peer = topo.switches[node].port(port).peer
            if peer == dst:
                return hops
            if len(hops) > len(topo.switches):
                raise LabError(f"lab {self.name}: the routes from {src} to {dst} loop: "
                               f"{' -> '.join(f'{h.switch}:p{h.port}' for h in hops)}")
            node = peer

    def switch_ports(self) -> Iterator[SwitchPort]:
        """Every switch port, for hooks; needs the lab up (reads ifindexes)."""
        from pyroute2 import NetNS

        for sw in self.topology.switches.values():
            ns_name = self.netns(sw.name)
            with NetNS(ns_name, flags=0) as ns:
                idx = {p.number: _lookup(ns, port_ifname(p.number), sw.name) for p in sw.ports}
            for p in sw.ports:
                yield SwitchPort(self.name, ns_name, sw, p, port_ifname(p.number),
                                 idx[p.number], self.topology)

    def _run_hooks(self) -> None:
        if not self.port_hooks:
            return
        for sp in list(self.switch_ports()):
            with _in_netns(sp.netns):
                for hook in self.port_hooks:
                    hook(sp)

    # ---- processes ----

    def popen(self, node: str, argv: list[str], **kw) -> subprocess.Popen:
        """Start `argv` in `node`'s namespace (``ip netns exec``: it also
        mounts the namespace's /sys); terminated by down() if still running.
        Its own session, so that a Ctrl-C of the caller does not reach it."""
        kw.setdefault("stdin", subprocess.DEVNULL)
        p = subprocess.Popen(["ip", "netns", "exec", self.netns(node), *argv],
                             start_new_session=True, **kw)
        self._procs.append(p)
        return p

    def run(self, node: str, argv: list[str], timeout: float = 60, **kw
            ) -> subprocess.CompletedProcess:
        """Run `argv` in `node`'s namespace to completion (killed on timeout)."""
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        kw.setdefault("stdin", subprocess.DEVNULL)
        return subprocess.run(["ip", "netns", "exec", self.netns(node), *argv],
                              timeout=timeout, start_new_session=True, **kw)

    def socket(self, node: str, family: int = _socket.AF_INET, type: int = _socket.SOCK_DGRAM,
               proto: int = 0) -> _socket.socket:
        """A socket in `node`'s namespace (made by this thread inside it;
        a socket stays in the namespace it was made in).  Closed by down():
        an open socket would keep a removed namespace, and its veths, alive."""
        with _in_netns(self.netns(node)):
            s = _socket.socket(family, type, proto)
        self._socks.append(s)
        return s

    def track(self, s: _socket.socket) -> _socket.socket:
        """Have down() close `s` too (a socket accepted from one of ours)."""
        self._socks.append(s)
        return s

    def probe(self, src: str, dst: str, timeout: float = 3.0) -> tuple[float, int, int]:
        """A UDP round trip from host `src` to host `dst` and back, between
        two sockets of this process (one made in each namespace), resent
        every 0.5 s until it completes or `timeout` passes.  Returns
        (round-trip seconds, switch hops there, switch hops back), the hops
        from the TTL each datagram arrived with (both sent with TTL 64).
        Unlike ping() it needs nothing of the kernel's shared ICMP sockets
        (docs/lab.md, "Known limits").  Raises LabError on timeout."""
        a, b = self.address(src), self.address(dst)
        tx = self.socket(src, _socket.AF_INET, _socket.SOCK_DGRAM)
        rx = self.socket(dst, _socket.AF_INET, _socket.SOCK_DGRAM)
        try:
            for s, addr in ((tx, a), (rx, b)):
                s.setsockopt(_socket.IPPROTO_IP, _socket.IP_TTL, 64)
                s.setsockopt(_socket.IPPROTO_IP, _IP_RECVTTL, 1)
                s.bind((addr, 0))
            token = secrets.token_bytes(16)
            deadline = time.monotonic() + timeout
            sent_at = None
            while True:
                now = time.monotonic()
                if now >= deadline:
                    raise LabError(f"lab {self.name}: no UDP round trip {src} ({a}) -> "
                                   f"{dst} ({b}) within {timeout} s")
                if sent_at is None or now - sent_at >= 0.5:
                    sent_at = time.monotonic()
                    tx.sendto(token, rx.getsockname())
                got = _recv_ttl(rx, token, min(sent_at + 0.5, deadline))
                if got is None:
                    continue
                there, frm = got
                rx.sendto(token, frm)
                back = _recv_ttl(tx, token, deadline)
                if back is not None:
                    return time.monotonic() - sent_at, 64 - there, 64 - back[0]
        finally:
            self._forget(tx)
            self._forget(rx)

    def ping(self, src: str, dst: str, timeout: float = 3.0) -> tuple[float, int]:
        """ICMP echo from host `src` to host (or address) `dst`, as ping(8)
        does it: a request every 0.5 s until a reply comes or `timeout`
        passes.  Returns (round-trip seconds of the answered request, TTL of
        the reply).  The reply leaves `dst` with TTL 64 and loses one per
        switch hop, so ``64 - ttl`` is the hop count of the way back.
        Raises LabError when no reply comes in time.  The kernel answers
        with the ICMP socket of the CPU that took the request, one per CPU
        for all namespaces of the machine: ICMP stuck in a queue anywhere
        can starve it (docs/lab.md, "Known limits"); probe() does not
        depend on it."""
        addr = self.address(dst) if dst in self.topology.hosts else dst
        s = self.socket(src, _socket.AF_INET, _socket.SOCK_RAW, _socket.IPPROTO_ICMP)
        try:
            ident = secrets.randbits(16)
            body = secrets.token_bytes(16)
            sent: dict[int, float] = {}
            start = time.monotonic()
            deadline = start + timeout
            next_send = start
            while True:
                now = time.monotonic()
                if now >= deadline:
                    raise LabError(f"lab {self.name}: no echo reply from {dst} ({addr}) "
                                   f"to {src} within {timeout} s ({len(sent)} requests)")
                if now >= next_send:
                    seq = len(sent) + 1
                    hdr = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
                    pkt = struct.pack("!BBHHH", 8, 0, internet_checksum(hdr + body), ident,
                                      seq) + body
                    sent[seq] = time.monotonic()
                    s.sendto(pkt, (addr, 0))
                    next_send = sent[seq] + 0.5
                s.settimeout(max(0.001, min(next_send, deadline) - time.monotonic()))
                try:
                    data, (frm, _) = s.recvfrom(2048)
                except TimeoutError:
                    continue
                t = time.monotonic()
                ihl = (data[0] & 0x0F) * 4
                if frm != addr or len(data) < ihl + 8 or data[ihl] != 0:
                    continue
                r_ident, r_seq = struct.unpack_from("!HH", data, ihl + 4)
                if r_ident == ident and r_seq in sent and data[ihl + 8:] == body:
                    return t - sent[r_seq], data[8]
        finally:
            self._forget(s)

    def _forget(self, s: _socket.socket) -> None:
        s.close()
        with contextlib.suppress(ValueError):
            self._socks.remove(s)

    def _close_socks(self) -> None:
        for s in self._socks:
            s.close()
        self._socks.clear()

    def _stop_procs(self) -> None:
        for p in self._procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGTERM)
        for p in self._procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=5)
            for f in (p.stdin, p.stdout, p.stderr):
                if f is not None:
                    f.close()
        self._procs.clear()

    # ---- down ----

    def down(self) -> dict[str, Any]:
        """Remove everything this lab created (namespaces, temporary
        interfaces, state file), also after a partial up().  Calls the hooks'
        close() and stops processes started with popen() first.  Returns
        what it did; raises LabError after trying everything if something
        could not be removed."""
        errors = []
        for hook in self.port_hooks:
            close = getattr(hook, "close", None)
            if close is not None:
                try:
                    close()
                except Exception as e:
                    errors.append(f"closing hook {hook!r}: {e!r}")
        try:
            self._stop_procs()
        except Exception as e:
            errors.append(f"stopping processes: {e!r}")
        self._close_socks()
        report = {"name": self.name, "namespaces": [], "temp_ifnames": [], "held": {}}
        if self._claimed:
            report = _remove(self.name, self.namespaces, [i.temp for i in self.ifaces],
                             self.state_file, errors)
            self._claimed = False
        self.is_up = False
        if errors:
            raise LabError(f"lab {self.name}: down: " + "; ".join(errors))
        return report

    # ---- status ----

    def status(self) -> dict[str, Any]:
        return status(self.name, self.state_dir)


# ---- steps in pyroute2 ---------------------------------------------------------------

_IP_RECVTTL = getattr(_socket, "IP_RECVTTL", 12)
_IP_TTL_CMSG = _socket.IP_TTL


def _recv_ttl(s: _socket.socket, token: bytes, until: float) -> tuple[int, Any] | None:
    """Wait until `until` for datagram `token` on `s`: (its IP TTL, sender)."""
    while True:
        left = until - time.monotonic()
        if left <= 0:
            return None
        s.settimeout(left)
        try:
            data, anc, _, frm = s.recvmsg(64, _socket.CMSG_SPACE(4))
        except TimeoutError:
            return None
        if data != token:
            continue
        for level, kind, val in anc:
            if level == _socket.IPPROTO_IP and kind == _IP_TTL_CMSG:
                return struct.unpack("i", val[:4])[0], frm
        raise LabError("a datagram came without its IP_TTL control message")


def _lookup(ipr, ifname: str, where: str) -> int:
    found = ipr.link_lookup(ifname=ifname)
    if not found:
        raise LabError(f"no interface {ifname!r} in {where}")
    return found[0]


def _set_features(et, ifname: str, want: dict[str, bool]) -> None:
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


def _ensure_bfifo() -> None:
    """pyroute2 0.9 knows pfifo's options but not bfifo's; both take the
    kernel's struct tc_fifo_qopt {__u32 limit} (bytes for bfifo), so the
    same encoder serves.  Registered once, only if pyroute2 has none."""
    from pyroute2.netlink.rtnl.tcmsg import plugins, sched_pfifo

    plugins.setdefault("bfifo", sched_pfifo)


def htb_burst_bytes(rate_mbps: int, mtu: int) -> int:
    """HTB bucket of a link: HTB_BURST_US at the link rate, at least one frame."""
    return max(mtu + ETH_HLEN, rate_mbps * HTB_BURST_US // 8)


def _add_queue(ns, idx: int, rate_mbps: int, buffer_bytes: int, mtu: int) -> None:
    """HTB root 1: -> class 1:1 at the link rate -> bfifo 10: of buffer_bytes."""
    _ensure_bfifo()
    rate = rate_mbps * 125_000                      # bytes/s, as tc's ratespec wants
    burst = htb_burst_bytes(rate_mbps, mtu)
    ns.tc("add", "htb", idx, handle=HTB_HANDLE, default=1)
    ns.tc("add-class", "htb", idx, handle=HTB_CLASS, parent=HTB_HANDLE, rate=rate,
          ceil=rate, burst=burst, cburst=burst, quantum=mtu + ETH_HLEN, mtu=mtu + ETH_HLEN)
    ns.tc("add", "bfifo", idx, handle=FIFO_HANDLE, parent=HTB_CLASS, limit=buffer_bytes)


@contextlib.contextmanager
def _in_netns(name: str) -> Iterator[None]:
    from ..bpf.loader import in_netns

    with in_netns(name):
        yield


def netns_inode(name: str) -> int | None:
    """Inode of named namespace `name` (/run/netns), None when it is not there."""
    try:
        return os.stat(f"{NETNS_DIR}/{name}").st_ino
    except FileNotFoundError:
        return None


def pids_in_netns(inode: int) -> list[int]:
    """Tasks (pid of their thread group) whose network namespace has `inode`:
    what still holds a namespace after its name was removed."""
    found = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                if os.stat(f"/proc/{pid}/task/{tid}/ns/net").st_ino == inode:
                    found.add(int(pid))
                    break
            except OSError:
                continue
    return sorted(found)


def _nsid(ipr, name: str) -> int | None:
    """The root namespace's id for namespace `name` (assigned now if it
    has none), or None if `name` is gone.  An id lives exactly as long as
    the namespace does, whatever holds it (a process, a mount, an open fd
    or socket), so it tells when a removed namespace, and its veths, are
    really gone."""
    try:
        fd = os.open(f"{NETNS_DIR}/{name}", os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        nsid = ipr.get_netnsid(fd=fd)["nsid"]
        if nsid is None or nsid >= 0x80000000:          # NETNSA_NSID_NOT_ASSIGNED
            ipr.set_netnsid(fd=fd)
            nsid = ipr.get_netnsid(fd=fd)["nsid"]
        return nsid
    finally:
        os.close(fd)


def _nsid_alive(ipr, nsid: int) -> bool:
    try:
        return ipr.get_netnsid(nsid=nsid) is not None
    except Exception as e:
        if _gone(e):
            return False
        raise


_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY, _SOCK_DESTROY = 20, 21
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_NLM_F_REQUEST, _NLM_F_ACK, _NLM_F_DUMP = 0x1, 0x4, 0x300
_NLMSG_HDR = struct.Struct("=IHHII")
_DIAG_REQ = struct.Struct("=BBBBI")          # struct inet_diag_req_v2, then the 48-byte id
_DIAG_ID_LEN = 48                            # struct inet_diag_sockid
_DIAG_MSG_TAIL = struct.Struct("=IIIII")     # expires, rqueue, wqueue, uid, inode


def _abort_orphans(ns: str) -> int:
    """Abort (SOCK_DESTROY, as ``ss -K`` does) every TCP socket in
    namespace `ns` that no process owns any more (inode 0: an orphan still
    closing, a SYN_RECV or TIME_WAIT entry).  An orphan whose peer cannot
    be reached (a broken path, a switch program dropping everything) holds
    the namespace, its veths and their tc programs for minutes while TCP
    retries; nothing of a lab that is going away needs it.  Sockets that a
    process holds are left alone: down() reports them.  Raw sock_diag
    netlink: pyroute2 0.9 lists sockets but cannot destroy them.  Returns
    how many were aborted."""
    with _in_netns(ns):
        sk = _socket.socket(_socket.AF_NETLINK, _socket.SOCK_RAW, _NETLINK_SOCK_DIAG)
    n = 0
    with sk:
        sk.settimeout(5)
        for family in (_socket.AF_INET, _socket.AF_INET6):
            ids = []
            req = _DIAG_REQ.pack(family, _socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF) \
                + bytes(_DIAG_ID_LEN)
            sk.send(_NLMSG_HDR.pack(_NLMSG_HDR.size + len(req), _SOCK_DIAG_BY_FAMILY,
                                    _NLM_F_REQUEST | _NLM_F_DUMP, 1, 0) + req)
            done = False
            while not done:
                data = sk.recv(1 << 16)
                off = 0
                while off + _NLMSG_HDR.size <= len(data):
                    length, kind = _NLMSG_HDR.unpack_from(data, off)[:2]
                    body = off + _NLMSG_HDR.size
                    if kind in (_NLMSG_DONE, _NLMSG_ERROR):
                        done = True
                        break
                    if kind == _SOCK_DIAG_BY_FAMILY:
                        sockid = data[body + 4:body + 4 + _DIAG_ID_LEN]
                        inode = _DIAG_MSG_TAIL.unpack_from(data, body + 4 + _DIAG_ID_LEN)[4]
                        if inode == 0:
                            ids.append(sockid)
                    off += (length + 3) & ~3
            for sockid in ids:
                req = _DIAG_REQ.pack(family, _socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF) + sockid
                sk.send(_NLMSG_HDR.pack(_NLMSG_HDR.size + len(req), _SOCK_DESTROY,
                                        _NLM_F_REQUEST | _NLM_F_ACK, 2, 0) + req)
                ack = sk.recv(4096)
                err = struct.unpack_from("=i", ack, _NLMSG_HDR.size)[0]
                if err == 0:
                    n += 1          # gone meanwhile (ENOENT), a TIME_WAIT (EOPNOTSUPP): fine
    return n


def _remove(lab: str, namespaces: Iterable[str], temps: Iterable[str], state_file: str,
            errors: list[str]) -> dict[str, Any]:
    """Delete the root-namespace interfaces named in `temps` and the
    `namespaces` that exist, wait (up to ALIVE_WAIT_S) until the kernel has
    really freed those namespaces, then remove `state_file` if nothing
    failed.  Appends failures to `errors`.  A namespace that stays alive
    because processes are in it is reported in ``["held"]`` (pid lists):
    its interfaces live until they exit; one alive without any process in
    it (an open fd or socket holds it) is an error."""
    from pyroute2 import IPRoute, netns

    report: dict[str, Any] = {"name": lab, "namespaces": [], "temp_ifnames": [], "held": {},
                              "aborted": 0}
    before = len(errors)
    with IPRoute() as ipr:
        for t in temps:
            try:
                for idx in ipr.link_lookup(ifname=t):
                    ipr.link("del", index=idx)
                    report["temp_ifnames"].append(t)
            except Exception as e:
                if not _gone(e):
                    errors.append(f"deleting interface {t}: {e!r}")
        ids: dict[str, tuple[int, int | None]] = {}
        for name in namespaces:
            ino = netns_inode(name)
            if ino is None:
                continue
            try:
                ids[name] = (ino, _nsid(ipr, name))
            except Exception as e:
                ids[name] = (ino, None)
                errors.append(f"namespace id of {name}: {e!r}")
            try:
                report["aborted"] += _abort_orphans(name)
            except Exception as e:
                errors.append(f"aborting orphaned TCP connections in {name}: {e!r}")
            try:
                netns.remove(name)
                report["namespaces"].append(name)
            except Exception as e:
                if not _gone(e) or os.path.exists(f"{NETNS_DIR}/{name}"):
                    errors.append(f"removing namespace {name}: {e!r}")
        deadline = time.monotonic() + ALIVE_WAIT_S
        alive = [n for n, (_, i) in ids.items() if i is not None]
        while alive:
            alive = [n for n in alive if _nsid_alive(ipr, ids[n][1])]
            if not alive or time.monotonic() > deadline:
                break
            time.sleep(0.02)
    for name in alive:
        holders = pids_in_netns(ids[name][0])
        if holders:
            report["held"][name] = holders
        else:
            errors.append(f"namespace {name} is removed from {NETNS_DIR} but still alive "
                          f"after {ALIVE_WAIT_S:.0f} s with no process in it: an open file "
                          f"descriptor or socket of a process outside holds it (and its "
                          f"veths)")
    left = [n for n in namespaces if os.path.exists(f"{NETNS_DIR}/{n}")]
    if left:
        errors.append(f"namespaces still there: {left}")
    try:
        report["pins"] = _remove_pins(lab)
    except Exception as e:
        errors.append(f"removing the INT switch pins of lab {lab}: {e!r}")
    if len(errors) == before:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(state_file)
    return report


def _remove_pins(lab: str) -> list[str]:
    """Unpin the INT switch maps of `lab` (hpccd.lab.int_switch), if any."""
    from .int_switch import pin_dir, remove_pins

    return remove_pins(lab) if os.path.isdir(pin_dir(lab)) else []


def _gone(e: BaseException) -> bool:
    code = getattr(e, "code", None) or getattr(e, "errno", None)
    return code in (errno.ENOENT, errno.ENODEV)


# ---- by name, from any process ---------------------------------------------------------

def load_state(name: str, state_dir: str = STATE_DIR) -> dict[str, Any]:
    path = state_path(name, state_dir)
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise LabError(f"no lab {name!r} (no state file {path})") from None
    except (OSError, ValueError) as e:
        raise LabError(f"lab {name!r}: unreadable state file {path}: {e}") from None


def list_labs(state_dir: str = STATE_DIR) -> list[str]:
    """Names of the labs with a state file."""
    try:
        files = os.listdir(state_dir)
    except FileNotFoundError:
        return []
    return sorted(f[4:-5] for f in files if f.startswith("lab-") and f.endswith(".json"))


def down(what: str, state_dir: str = STATE_DIR,
         topology: Topology | str | None = None) -> dict[str, Any]:
    """Tear down a lab from any process: by lab name (its state file).
    Without a state file of that name: the namespaces ``<what>-<node>``
    of `topology` (a Topology, file or bundled name), or, without
    `topology`, those of the topology `what` names (a file or bundled
    name, under its own [lab] name).  Processes still inside are reported
    in ``["held"]``, not killed."""
    errors: list[str] = []
    if os.path.exists(state_path(what, state_dir)):
        st = load_state(what, state_dir)
        report = _remove(st["name"], st["namespaces"], st.get("temp_ifnames", []),
                         state_path(what, state_dir), errors)
    else:
        try:
            topo = topology if isinstance(topology, Topology) else Topology.load(topology or what)
        except TopologyError as e:
            raise LabError(f"no lab {what!r} (no state file {state_path(what, state_dir)}) "
                           f"and no topology to find its namespaces: {e}") from None
        name = what if topology is not None else topo.name
        report = _remove(name, [netns_name(name, n) for n in topo.nodes], [],
                         state_path(name, state_dir), errors)
    if errors:
        raise LabError(f"lab {what}: down: " + "; ".join(errors))
    return report


def _qdisc_stats(msg) -> dict[str, int]:
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
    _ensure_bfifo()
    out: dict[str, Any] = {"root": None, "rate_bps": None, "ceil_bps": None,
                           "fifo": None, "limit": None, "clsact": False}
    for q in ns.get_qdiscs(idx):
        kind = q.get_attr("TCA_KIND")
        if kind == "clsact":
            out["clsact"] = True
        elif q["parent"] == 0xFFFFFFFF:
            out["root"] = kind
            out.update(_qdisc_stats(q))
        elif q["parent"] == HTB_CLASS:
            out["fifo"] = kind
            opts = q.get_attr("TCA_OPTIONS")
            if opts is not None and kind in ("bfifo", "pfifo"):
                out["limit"] = opts["limit"]
            out["fifo_stats"] = _qdisc_stats(q)
    for c in ns.get_classes(idx):
        if c["handle"] != HTB_CLASS or c.get_attr("TCA_KIND") != "htb":
            continue
        opts = c.get_attr("TCA_OPTIONS")
        parms = opts.get_attr("TCA_HTB_PARMS")
        out["rate_bps"] = 8 * (opts.get_attr("TCA_HTB_RATE64") or parms["rate"])
        out["ceil_bps"] = 8 * (opts.get_attr("TCA_HTB_CEIL64") or parms["ceil"])
    return out


def status(name: str, state_dir: str = STATE_DIR) -> dict[str, Any]:
    """A lab's namespaces, links and per-port queues (rate, limit, bytes,
    packets, drops, backlog), read now through pyroute2."""
    from pyroute2 import NetNS

    st = load_state(name, state_dir)
    topo = Topology.loads(st["topology_text"], st.get("topology_file", "<state>"))
    nodes = []
    for node in topo.nodes:
        ns_name = netns_name(st["name"], node)
        entry: dict[str, Any] = {"node": node, "netns": ns_name,
                                 "kind": "switch" if topo.is_switch(node) else "host",
                                 "exists": os.path.exists(f"{NETNS_DIR}/{ns_name}"),
                                 "interfaces": []}
        if entry["exists"]:
            try:
                with NetNS(ns_name, flags=0) as ns:
                    for i in st["interfaces"]:
                        if i["node"] != node:
                            continue
                        ln = topo.links[i["link"]]
                        found = ns.link_lookup(ifname=i["ifname"])
                        iface: dict[str, Any] = {
                            "ifname": i["ifname"], "link": i["link"], "peer": i["peer"],
                            "peer_ifname": i["peer_ifname"],
                            "address": f"{ln.end(node).address}/{ln.network.prefixlen}",
                            "rate_mbps": ln.rate_mbps, "buffer_bytes": ln.buffer_bytes,
                            "exists": bool(found)}
                        if found:
                            link = ns.get_links(found[0])[0]
                            iface["state"] = link.get_attr("IFLA_OPERSTATE")
                            iface["queue"] = read_queue(ns, found[0])
                        entry["interfaces"].append(iface)
            except Exception as e:              # gone meanwhile, or unreadable
                entry["error"] = repr(e)
            if topo.is_switch(node) and st.get("int_switch"):
                entry["int_switch"] = _int_switch_counters(st["name"], topo.switches[node])
        nodes.append(entry)
    return {"name": st["name"], "status": st["status"], "pid": st.get("pid"),
            "offloads": st.get("offloads"), "topology_file": st.get("topology_file"),
            "state_file": state_path(name, state_dir), "nodes": nodes,
            "links": [{"index": ln.index, "a": ln.a.node, "b": ln.b.node,
                       "network": str(ln.network), "rate_mbps": ln.rate_mbps,
                       "buffer_bytes": ln.buffer_bytes} for ln in topo.links]}


def _int_switch_counters(lab: str, sw) -> dict[str, Any]:
    """The INT switch's counters of every port of `sw`, {port: {name:
    [packets, bytes]}}, or {"error": ...} when the pins cannot be read."""
    from .int_switch import read_counters

    try:
        got = read_counters(lab, sw.name, [p.number for p in sw.ports])
    except Exception as e:
        return {"error": repr(e)}
    return {str(n): {k: list(v) for k, v in c.items()} for n, c in got.items()}


# ---- hpccctl lab ------------------------------------------------------------------------

def _print_status(st: dict[str, Any], out) -> None:
    print(f"lab {st['name']}: {st['status']} (pid {st['pid']}, offloads {st['offloads']}, "
          f"{st['topology_file']})", file=out)
    print(f"  {'node':8s} {'netns':24s} {'if':4s} {'peer':13s} {'address':18s} "
          f"{'Mbit/s':>6s} {'buffer':>8s} {'sent bytes':>12s} {'packets':>9s} {'drops':>6s} "
          f"{'backlog':>8s}", file=out)
    for n in st["nodes"]:
        if not n["exists"]:
            print(f"  {n['node']:8s} {n['netns']:24s} (namespace missing)", file=out)
            continue
        if "error" in n:
            print(f"  {n['node']:8s} {n['netns']:24s} ({n['error']})", file=out)
            continue
        for i in n["interfaces"]:
            q = i.get("queue") or {}
            peer = f"{i['peer']}:{i['peer_ifname']}"
            if not i["exists"]:
                print(f"  {n['node']:8s} {n['netns']:24s} {i['ifname']:4s} (missing)", file=out)
                continue
            print(f"  {n['node']:8s} {n['netns']:24s} {i['ifname']:4s} {peer:13s} "
                  f"{i['address']:18s} {i['rate_mbps']:6d} {i['buffer_bytes']:8d} "
                  f"{q.get('bytes', 0):12d} {q.get('packets', 0):9d} {q.get('drops', 0):6d} "
                  f"{q.get('backlog', 0):8d}", file=out)
    sws = [n for n in st["nodes"] if n.get("int_switch")]
    if not sws:
        return
    print(f"  INT switch (packets): {'node':8s} {'if':4s} {'forwarded':>10s} "
          f"{'INT stamped':>11s} {'at departure':>12s} {'INT full':>8s} {'ECN marked':>10s} "
          f"{'fast-start drops':>16s}", file=out)
    for n in sws:
        if "error" in n["int_switch"]:
            print(f"  {'':22s}{n['node']:8s} ({n['int_switch']['error']})", file=out)
            continue
        for num, c in n["int_switch"].items():
            # "at departure": records rewritten with the port's state when the
            # packet left (docs/lab.md "Where the record is stamped")
            print(f"  {'':22s}{n['node']:8s} {'p' + num:4s} {c['forwarded'][0]:10d} "
                  f"{c['int_stamped'][0]:11d} {c['int_departed'][0]:12d} {c['int_full'][0]:8d} "
                  f"{c['ecn_marked'][0]:10d} {c['drop_fast_start'][0]:16d}", file=out)


def cli(args) -> int:
    """``hpccctl lab up|down|status`` (argument parsing in hpccd.cli.main)."""
    import sys

    err = sys.stderr
    if not_root("hpccctl lab", "network namespaces"):
        return 2
    try:
        if args.lab_cmd == "up":
            try:
                topo = Topology.load(args.topology)
            except TopologyError as e:
                print(f"hpccctl lab up: {e}", file=err)
                return 2
            lab = Lab(topo, name=args.name, offloads=args.offloads,
                      int_switch=not args.no_int).up()
            print(f"lab {lab.name} up: {len(lab.namespaces)} namespaces "
                  f"({', '.join(lab.namespaces)}), {len(topo.links)} links, state in "
                  f"{lab.state_file}")
            if lab.int_switch is not None:
                from .int_switch import pin_dir
                lab.int_switch.close()      # the tc filters keep the programs
                print(f"  INT switch on {sum(len(s.ports) for s in topo.switches.values())} "
                      f"switch ports, maps pinned in {pin_dir(lab.name)}")
            print(f"  hpccctl lab status {lab.name}; hpccctl lab down {lab.name}")
            return 0
        if args.lab_cmd == "down":
            name = args.name
            if name is None:
                labs = list_labs()
                if not labs:
                    print("hpccctl lab down: no lab is up")
                    return 0
                if len(labs) > 1:
                    print(f"hpccctl lab down: several labs are up, name one: "
                          f"{', '.join(labs)}", file=err)
                    return 2
                name = labs[0]
            rep = down(name, topology=args.topology)
            print(f"lab {rep['name']} down: removed {len(rep['namespaces'])} namespaces"
                  + (f" and {len(rep['temp_ifnames'])} half-built interfaces"
                     if rep["temp_ifnames"] else ""))
            if rep["held"]:
                for ns, pids in rep["held"].items():
                    print(f"hpccctl lab down: {ns} is removed from {NETNS_DIR} but processes "
                          f"{pids} are still in it; its interfaces live until they exit",
                          file=err)
                return 1
            return 0
        if args.lab_cmd == "status":
            names = [args.name] if args.name else list_labs()
            sts = [status(n) for n in names]
            if args.json:
                json.dump(sts[0] if args.name else sts, sys.stdout, indent=1)
                print()
            elif not sts:
                print("no lab is up")
            for st in sts if not args.json else ():
                _print_status(st, sys.stdout)
            return 0
    except LabError as e:
        print(f"hpccctl lab {args.lab_cmd}: {e}", file=err)
        return 1
    raise AssertionError(args.lab_cmd)
