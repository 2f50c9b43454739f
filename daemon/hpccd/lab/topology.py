"""Topology files (docs/topology.md): load, validate, derive.

One TOML file describes a lab network.  :meth:`Topology.load` reads it (a
path, or the name of a bundled file: ``"dumbbell"``, ``"incast"``,
``"tree"``), checks it against the schema of docs/topology.md and derives
what the lab builder (hpccd.lab.netns) and the P4 control-plane generator
(switch_p4/) both need, so that one file means the same network in both:

- nodes (switches and hosts) and links, links numbered in file order from 0;
- ports: a switch's ports are numbered from 1 in the order of its links;
- addresses: link ``i`` is the /30 at offset ``4 i`` of the subnet, its first
  endpoint ``.1``, its second ``.2``; a host's address is its one endpoint's;
- routes: every switch has a /32 route to every host (static shortest path,
  fewest switch hops, ties broken by link order); every host a default
  route via its switch;
- ``path(src, dst)``: the (switch, egress port) hops a packet takes;
- the INT speed code of each link's rate (docs/wire-format.md).

This module is pure: no netlink, no files other than the topology, no
privileges.  Every validation failure raises :class:`TopologyError` naming
the file, the line and the key.  tomllib gives no positions, so the line is
found by scanning the file's text for the table header (the n-th
``[[links]]``) and the key within that table (:class:`_LineIndex`).
"""
from __future__ import annotations

import collections
import dataclasses
import ipaddress
import os
import re
from importlib import resources
from typing import Any, Iterator, NamedTuple

from ..core import cc
from ..agent.tomlcheck import LineIndex, TomlError, Validator, key_name, toml_type

__all__ = ["TopologyError", "Topology", "Ecn", "Switch", "Host", "Link", "Endpoint",
           "Port", "Route", "Hop", "bundled", "DEFAULT_RATE_MBPS", "DEFAULT_BUFFER_BYTES",
           "DEFAULT_MTU"]

# Defaults of docs/topology.md.  docs/lab.md says why the two cores of a lab
# machine sustain them with every emulated host busy.
DEFAULT_RATE_MBPS = 1000
DEFAULT_BUFFER_BYTES = 1_000_000
DEFAULT_MTU = 1500

ETH_HLEN = cc.lib.HPCCD_ETH_HLEN   # a queued frame is the IP packet plus this (wire.h)
MIN_MTU, MAX_MTU = 576, 65535      # IPv4's minimum reassembly size; veth's maximum
NODE_NAME = re.compile(r"[a-z0-9]{1,8}")
# <lab>-<node> must stay a file name under /run/netns; the state file is
# /run/hpccd/lab-<lab>.json.
LAB_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,31}")
SWITCH_ID_MAX = 4095               # 12-bit switch id (pathID XOR)

_TOP_KEYS = ("lab", "defaults", "switches", "hosts", "links")
_LAB_KEYS = ("name", "subnet")
_DEFAULT_KEYS = ("rate_mbps", "buffer_bytes", "mtu")
_SWITCH_KEYS = ("name", "id", "ecn")
_ECN_KEYS = ("kmin_bytes", "kmax_bytes", "pmax", "fast_start_k_bytes", "fast_start_class")
# Which ECN-incapable packets the fast-start rule drops (docs/topology.md).
FAST_START_CLASSES = ("hpccd", "all")
_HOST_KEYS = ("name",)
_LINK_KEYS = ("endpoints", "rate_mbps", "buffer_bytes")

BUNDLED_DIR = "topologies"


class TopologyError(TomlError):
    """A topology file is unreadable or breaks the schema.  ``file``,
    ``line`` (1-based, or None when the problem has no one place) and
    ``key`` (dotted, e.g. ``links[3].rate_mbps``, or None) say where."""


# Line numbers and typed getters are hpccd.agent.tomlcheck's (shared with the
# daemon's configuration); the old private names stay for callers.
_LineIndex = LineIndex
_key_name = key_name
_toml_type = toml_type


# ---- the derived model -------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Ecn:
    """Marking on every egress port of a switch (docs/topology.md).
    ``fast_start_k_bytes`` None: ECN-incapable packets are never dropped
    for the queue (only when the buffer is full).  ``fast_start_class``:
    which ECN-incapable packets that rule applies to: "hpccd" (native
    transport packets, where LDCP's first-RTT packets come from), "all"
    (every IPv4 packet) or a DSCP (int 0..63)."""

    kmin_bytes: int
    kmax_bytes: int
    pmax: float
    fast_start_k_bytes: int | None = None
    fast_start_class: str | int = "hpccd"


@dataclasses.dataclass(frozen=True)
class Endpoint:
    """One end of a link: a node, its port number (1.. on a switch, 0 on a
    host, which has one interface) and its address on the link's /30."""

    node: str
    port: int
    address: ipaddress.IPv4Address


@dataclasses.dataclass(frozen=True)
class Link:
    index: int
    a: Endpoint                 # the first of `endpoints` (.1 of the /30)
    b: Endpoint                 # the second (.2)
    rate_mbps: int
    buffer_bytes: int           # egress buffer at both ends
    mtu: int
    network: ipaddress.IPv4Network
    line: int | None = None

    @property
    def rate_bps(self) -> int:
        return self.rate_mbps * 1_000_000

    @property
    def speed_code(self) -> int:
        """The INT hop record's speed code B of this rate (docs/wire-format.md)."""
        return cc.speed_code(self.rate_bps)

    def end(self, node: str) -> Endpoint:
        if node == self.a.node:
            return self.a
        if node == self.b.node:
            return self.b
        raise KeyError(f"{node} is not an endpoint of link {self.index}")

    def other(self, node: str) -> Endpoint:
        return self.b if self.end(node) is self.a else self.a


@dataclasses.dataclass(frozen=True)
class Port:
    """An egress port of a switch: everything its queue and the INT switch
    program need."""

    switch: str
    number: int                 # 1.., in the order of the switch's links in the file
    link: int                   # index of the link
    address: ipaddress.IPv4Address
    peer: str                   # node at the other end
    peer_port: int              # its port (0 for a host)
    peer_address: ipaddress.IPv4Address
    rate_mbps: int
    buffer_bytes: int
    mtu: int
    speed_code: int

    @property
    def rate_bps(self) -> int:
        return self.rate_mbps * 1_000_000


@dataclasses.dataclass(frozen=True)
class Switch:
    name: str
    id: int
    ecn: Ecn | None
    ports: tuple[Port, ...]
    line: int | None = None

    def port(self, number: int) -> Port:
        return self.ports[number - 1]

    def port_to(self, peer: str) -> int:
        """The number of the port toward `peer` (a host or a switch)."""
        for p in self.ports:
            if p.peer == peer:
                return p.number
        raise KeyError(f"switch {self.name} has no port toward {peer}")


@dataclasses.dataclass(frozen=True)
class Host:
    name: str
    link: int                   # its one link
    address: ipaddress.IPv4Address
    prefixlen: int              # 30
    switch: str                 # the switch it hangs off
    gateway: ipaddress.IPv4Address   # that switch's address on the link
    line: int | None = None


@dataclasses.dataclass(frozen=True)
class Route:
    """A switch's route to one host: ``dst``/32 out of ``port`` to next
    hop ``via`` (the neighbour's address on that link; the host's own
    address when it is attached to this switch)."""

    dst: ipaddress.IPv4Address
    host: str
    port: int
    via: ipaddress.IPv4Address
    hops: int                   # switch hops from here to the host, this one included


class Hop(NamedTuple):
    """(switch, egress port) of a path."""

    switch: str
    port: int


def bundled() -> list[str]:
    """Names of the bundled topology files."""
    d = resources.files("hpccd").joinpath(BUNDLED_DIR)
    return sorted(p.name[:-5] for p in d.iterdir() if p.name.endswith(".toml"))


class Topology:
    """A validated topology.  Build with :meth:`load` or :meth:`loads`.

    Attributes: ``name``, ``subnet``, ``file`` (where it came from),
    ``text`` (the TOML source), ``switches`` and ``hosts`` (name -> object,
    in file order), ``links`` (in file order), ``routes`` (switch name ->
    [Route] in host order), ``defaults`` (rate_mbps, buffer_bytes, mtu)."""

    def __init__(self, *, name: str, subnet: ipaddress.IPv4Network, file: str, text: str,
                 switches: dict[str, Switch], hosts: dict[str, Host], links: list[Link],
                 routes: dict[str, list[Route]], defaults: dict[str, int]):
        self.name, self.subnet, self.file, self.text = name, subnet, file, text
        self.switches, self.hosts, self.links = switches, hosts, links
        self.routes, self.defaults = routes, defaults

    # ---- loading ----

    @classmethod
    def load(cls, what: str | os.PathLike) -> "Topology":
        """Load a topology file: a path, or the name of a bundled file
        (``"dumbbell"``).  A string without a slash that is not an existing
        file is looked up among the bundled ones."""
        path = os.fspath(what)
        if not os.path.exists(path) and "/" not in path:
            name = path[:-5] if path.endswith(".toml") else path
            res = resources.files("hpccd").joinpath(BUNDLED_DIR, f"{name}.toml")
            if not res.is_file():
                raise TopologyError(path, None, None,
                                    f"no such file, and not a bundled topology "
                                    f"(bundled: {', '.join(bundled())})")
            return cls.loads(res.read_text(encoding="utf-8"), str(res))
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as e:
            raise TopologyError(path, None, None, f"cannot read: {e}") from None
        return cls.loads(text, path)

    @classmethod
    def loads(cls, text: str, file: str = "<string>") -> "Topology":
        """Validate TOML text; `file` names it in errors."""
        return _Validator(text, file).topology()

    # ---- queries ----

    @property
    def nodes(self) -> list[str]:
        """Every node name: switches, then hosts, each in file order."""
        return [*self.switches, *self.hosts]

    def is_switch(self, node: str) -> bool:
        return node in self.switches

    def address(self, host: str) -> ipaddress.IPv4Address:
        return self._host(host).address

    def host_of(self, address: str | ipaddress.IPv4Address) -> str | None:
        a = ipaddress.IPv4Address(address)
        return next((h.name for h in self.hosts.values() if h.address == a), None)

    def links_of(self, node: str) -> list[Link]:
        """The node's links in file order (a switch's port n is the n-th)."""
        self._node(node)
        return [ln for ln in self.links if node in (ln.a.node, ln.b.node)]

    def route(self, switch: str, host: str) -> Route:
        for r in self.routes[self._switch(switch).name]:
            if r.host == host:
                return r
        self._host(host)
        raise KeyError(host)                    # not reached: every host has a route

    def path(self, src: str, dst: str) -> list[Hop]:
        """The switches a packet from host `src` to host `dst` crosses, each
        with its egress port, in order.  ``len(path)`` is the switch hop
        count (the IP TTL decrements by it)."""
        s, d = self._host(src), self._host(dst)
        if s.name == d.name:
            return []
        hops: list[Hop] = []
        node = s.switch
        while True:
            r = self.route(node, d.name)
            hops.append(Hop(node, r.port))
            peer = self.switches[node].port(r.port).peer
            if peer == d.name:
                return hops
            node = peer

    def host_pairs(self) -> Iterator[tuple[str, str]]:
        for a in self.hosts:
            for b in self.hosts:
                if a != b:
                    yield a, b

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able summary (what `hpccctl lab status --json` shows)."""
        return {
            "name": self.name, "subnet": str(self.subnet), "file": self.file,
            "switches": [{"name": s.name, "id": s.id,
                          "ecn": dataclasses.asdict(s.ecn) if s.ecn else None,
                          "ports": [{"port": p.number, "link": p.link,
                                     "address": str(p.address), "peer": p.peer,
                                     "peer_port": p.peer_port, "rate_mbps": p.rate_mbps,
                                     "buffer_bytes": p.buffer_bytes, "mtu": p.mtu,
                                     "speed_code": p.speed_code} for p in s.ports]}
                         for s in self.switches.values()],
            "hosts": [{"name": h.name, "address": str(h.address), "switch": h.switch,
                       "gateway": str(h.gateway), "link": h.link}
                      for h in self.hosts.values()],
            "links": [{"index": ln.index, "endpoints": [ln.a.node, ln.b.node],
                       "ports": [ln.a.port, ln.b.port], "network": str(ln.network),
                       "rate_mbps": ln.rate_mbps, "buffer_bytes": ln.buffer_bytes,
                       "mtu": ln.mtu, "speed_code": ln.speed_code} for ln in self.links],
        }

    def _node(self, node: str) -> Switch | Host:
        if node in self.switches:
            return self.switches[node]
        if node in self.hosts:
            return self.hosts[node]
        raise KeyError(f"{self.name}: no node {node!r}")

    def _switch(self, node: str) -> Switch:
        if node not in self.switches:
            raise KeyError(f"{self.name}: no switch {node!r}")
        return self.switches[node]

    def _host(self, node: str) -> Host:
        if node not in self.hosts:
            raise KeyError(f"{self.name}: no host {node!r}")
        return self.hosts[node]

    def __repr__(self) -> str:
        return (f"<Topology {self.name}: {len(self.switches)} switches, "
                f"{len(self.hosts)} hosts, {len(self.links)} links>")


# ---- validation --------------------------------------------------------------------

class _Validator(Validator):
    error = TopologyError

    def rate(self, table: dict, path: tuple, default: int) -> int:
        v = self.int_(table, path, "rate_mbps", default, lo=1)
        if cc.speed_code(v * 1_000_000) == 0:
            speeds = [cc.speed_mbps(c) for c in range(1, 32)]
            self.fail(path + ("rate_mbps",),
                      f"{v} Mbit/s is not a speed of the INT table (docs/wire-format.md): "
                      f"{', '.join(map(str, speeds))}")
        return v

    # -- the schema --

    def topology(self) -> Topology:
        doc = self.parse()
        self.keys(doc, (), _TOP_KEYS)
        if "lab" not in doc:
            self.fail(("lab",), "required table [lab] is missing")
        lab = self.keys(doc["lab"], ("lab",), _LAB_KEYS)
        name = self.str_(lab, ("lab",), "name")
        if not LAB_NAME.fullmatch(name):
            self.fail(("lab", "name"), f"{name!r} is not a lab name ({LAB_NAME.pattern})")
        subnet_s = self.str_(lab, ("lab",), "subnet")
        try:
            subnet = ipaddress.IPv4Network(subnet_s)
        except ValueError as e:
            self.fail(("lab", "subnet"), f"{subnet_s!r} is not an IPv4 network: {e}")

        dflt = self.keys(doc.get("defaults", {}), ("defaults",), _DEFAULT_KEYS)
        d_rate = self.rate(dflt, ("defaults",), DEFAULT_RATE_MBPS)
        mtu = self.int_(dflt, ("defaults",), "mtu", DEFAULT_MTU, lo=MIN_MTU, hi=MAX_MTU)
        d_buf = self.int_(dflt, ("defaults",), "buffer_bytes", DEFAULT_BUFFER_BYTES, lo=1)
        self.check_buffer(d_buf, ("defaults", "buffer_bytes"), mtu)

        node_path: dict[str, tuple] = {}
        switches: dict[str, tuple[int, Ecn | None]] = {}
        ids: dict[int, str] = {}
        for i, sw in enumerate(self.array(doc, "switches")):
            p = ("switches", i)
            self.keys(sw, p, _SWITCH_KEYS)
            n = self.node_name(sw, p, node_path)
            sid = self.int_(sw, p, "id", lo=1, hi=SWITCH_ID_MAX)
            if sid in ids:
                self.fail(p + ("id",), f"switch id {sid} (0x{sid:03x}) is also {ids[sid]}'s")
            ids[sid] = n
            switches[n] = (sid, self.ecn(sw, p))
        hosts: list[str] = []
        for i, h in enumerate(self.array(doc, "hosts")):
            p = ("hosts", i)
            self.keys(h, p, _HOST_KEYS)
            hosts.append(self.node_name(h, p, node_path))
        if not node_path:
            self.fail((), "no nodes: a topology needs [[switches]] and [[hosts]]")

        raw_links = self.array(doc, "links")
        if len(raw_links) * 4 > subnet.num_addresses:
            self.fail(("lab", "subnet"), f"{subnet} has room for {subnet.num_addresses // 4} "
                                         f"links (a /30 each), the file has {len(raw_links)}")
        links: list[Link] = []
        ports: dict[str, int] = collections.Counter()
        host_link: dict[str, int] = {}
        for i, ln in enumerate(raw_links):
            p = ("links", i)
            self.keys(ln, p, _LINK_KEYS)
            ends = ln.get("endpoints")
            if ends is None:
                self.fail(p + ("endpoints",), "required key is missing")
            if (not isinstance(ends, list) or len(ends) != 2
                    or not all(isinstance(e, str) for e in ends)):
                self.fail(p + ("endpoints",), f"must be two node names, not {ends!r}")
            for e in ends:
                if e not in node_path:
                    self.fail(p + ("endpoints",), f"no node named {e!r}")
            if ends[0] == ends[1]:
                self.fail(p + ("endpoints",), f"a link joins two distinct nodes, not "
                                              f"{ends[0]!r} to itself")
            if ends[0] not in switches and ends[1] not in switches:
                self.fail(p + ("endpoints",), "host-host links are refused: a host "
                                              "hangs off a switch")
            for e in ends:
                if e not in switches:
                    if e in host_link:
                        self.fail(p + ("endpoints",),
                                  f"host {e!r} has a second link (links[{host_link[e]}] "
                                  f"is its first): hosts are single-homed")
                    host_link[e] = i
            rate = self.rate(ln, p, d_rate)
            buf = self.int_(ln, p, "buffer_bytes", d_buf, lo=1)
            self.check_buffer(buf, p + ("buffer_bytes",), mtu)
            net = ipaddress.IPv4Network((int(subnet.network_address) + 4 * i, 30))
            eps = []
            for j, e in enumerate(ends):
                port = 0
                if e in switches:
                    ports[e] += 1
                    port = ports[e]
                eps.append(Endpoint(e, port, net.network_address + 1 + j))
            links.append(Link(i, eps[0], eps[1], rate, buf, mtu, net, self.index.line(p)))
        for h in hosts:
            if h not in host_link:
                self.fail(node_path[h] + ("name",),
                          f"host {h!r} has no link: every host has exactly one")
        self.check_connected(node_path, links)

        sw_objs: dict[str, Switch] = {}
        for n, (sid, ecn) in switches.items():
            plist = []
            for ln in links:
                if n not in (ln.a.node, ln.b.node):
                    continue
                me, peer = ln.end(n), ln.other(n)
                plist.append(Port(n, me.port, ln.index, me.address, peer.node, peer.port,
                                  peer.address, ln.rate_mbps, ln.buffer_bytes, ln.mtu,
                                  ln.speed_code))
                if ecn is not None and ecn.kmax_bytes > ln.buffer_bytes:
                    self.fail(node_path[n] + ("ecn", "kmax_bytes"),
                              f"{ecn.kmax_bytes} exceeds the {ln.buffer_bytes}-byte buffer "
                              f"of port {me.port} (links[{ln.index}])")
            sw_objs[n] = Switch(n, sid, ecn, tuple(plist), self.index.line(node_path[n]))
        host_objs: dict[str, Host] = {}
        for h in hosts:
            ln = links[host_link[h]]
            me, gw = ln.end(h), ln.other(h)
            host_objs[h] = Host(h, ln.index, me.address, 30, gw.node, gw.address,
                                self.index.line(node_path[h]))
        routes = _routes(sw_objs, host_objs, links)
        return Topology(name=name, subnet=subnet, file=self.file, text=self.text,
                        switches=sw_objs, hosts=host_objs, links=links, routes=routes,
                        defaults={"rate_mbps": d_rate, "buffer_bytes": d_buf, "mtu": mtu})

    def node_name(self, table: dict, path: tuple, seen: dict[str, tuple]) -> str:
        n = self.str_(table, path, "name")
        if not NODE_NAME.fullmatch(n):
            self.fail(path + ("name",), f"{n!r} is not a node name ({NODE_NAME.pattern})")
        if n in seen:
            self.fail(path + ("name",), f"{n!r} is already the name of "
                                        f"{_key_name(seen[n])}")
        seen[n] = path
        return n

    def ecn(self, sw: dict, p: tuple) -> Ecn | None:
        if "ecn" not in sw:
            return None
        p = p + ("ecn",)
        e = self.keys(sw["ecn"], p, _ECN_KEYS)
        kmin = self.int_(e, p, "kmin_bytes", lo=0)
        kmax = self.int_(e, p, "kmax_bytes", lo=0)
        if kmin > kmax:
            self.fail(p + ("kmin_bytes",), f"kmin_bytes {kmin} > kmax_bytes {kmax}")
        if "pmax" not in e:
            self.fail(p + ("pmax",), "required key is missing")
        pmax = e["pmax"]
        if isinstance(pmax, bool) or not isinstance(pmax, (int, float)):
            self.fail(p + ("pmax",), f"must be a number, not {_toml_type(pmax)} {pmax!r}")
        if not 0 < pmax <= 1:
            self.fail(p + ("pmax",), f"{pmax} is out of range (0 < pmax <= 1)")
        fsk = None
        if "fast_start_k_bytes" in e:
            fsk = self.int_(e, p, "fast_start_k_bytes", lo=0)
        fsc: str | int = "hpccd"
        if "fast_start_class" in e:
            if fsk is None:
                self.fail(p + ("fast_start_class",), "needs fast_start_k_bytes")
            v = e["fast_start_class"]
            if isinstance(v, str):
                if v not in FAST_START_CLASSES:
                    self.fail(p + ("fast_start_class",),
                              f"{v!r}: one of {', '.join(map(repr, FAST_START_CLASSES))} "
                              f"or a DSCP 0..63")
                fsc = v
            else:
                fsc = self.int_(e, p, "fast_start_class", lo=0, hi=63)
        return Ecn(kmin, kmax, float(pmax), fsk, fsc)

    def check_buffer(self, buf: int, path: tuple, mtu: int) -> None:
        if buf < mtu + ETH_HLEN:
            self.fail(path, f"{buf} bytes cannot hold one full-size frame "
                            f"(mtu {mtu} + {ETH_HLEN} bytes of Ethernet header)")

    def check_connected(self, node_path: dict[str, tuple], links: list[Link]) -> None:
        adj: dict[str, list[str]] = {n: [] for n in node_path}
        for ln in links:
            adj[ln.a.node].append(ln.b.node)
            adj[ln.b.node].append(ln.a.node)
        first = next(iter(node_path))
        seen = {first}
        todo = collections.deque([first])
        while todo:
            for m in adj[todo.popleft()]:
                if m not in seen:
                    seen.add(m)
                    todo.append(m)
        for n, path in node_path.items():
            if n not in seen:
                self.fail(path + ("name",), f"the graph is not connected: no path from "
                                            f"{first!r} to {n!r}")


def _routes(switches: dict[str, Switch], hosts: dict[str, Host],
            links: list[Link]) -> dict[str, list[Route]]:
    """Static shortest-path routes: for each host, a BFS over the switches
    from its switch gives every switch's distance; a switch's route leaves
    by the lowest-numbered link (= its lowest port) towards a neighbour one
    hop nearer.  Every switch on the way makes the same kind of choice, so
    the hops of a route are a shortest path and paths are loop-free."""
    routes: dict[str, list[Route]] = {s: [] for s in switches}
    for h in hosts.values():
        dist = {h.switch: 1}
        todo = collections.deque([h.switch])
        while todo:
            s = todo.popleft()
            for p in switches[s].ports:
                if p.peer in switches and p.peer not in dist:
                    dist[p.peer] = dist[s] + 1
                    todo.append(p.peer)
        for s, sw in switches.items():
            if s == h.switch:
                p = next(p for p in sw.ports if p.link == h.link)
                routes[s].append(Route(h.address, h.name, p.number, h.address, 1))
                continue
            p = min((p for p in sw.ports
                     if p.peer in switches and dist[p.peer] == dist[s] - 1),
                    key=lambda p: p.link)
            routes[s].append(Route(h.address, h.name, p.number, p.peer_address, dist[s]))
    return routes
