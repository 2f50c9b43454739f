"""The netns lab: a topology file (hpccd.lab.topology) built out of network
namespaces, veth pairs and real egress queues, with pyroute2 only (netlink,
ethtool ioctls, /proc/sys inside the namespace; no ip/tc commands).

    with Lab("dumbbell") as lab:                 # up() ... down(), always
        lab.ping("h1", "r1")
        lab.popen("r1", ["iperf3", "-s", "-1"])
        ...

``Lab`` is here; each step and concern of it has a module beside this one:
names (LabError, namespace/interface/state-file names), build (what up()
builds), offloads, queues, namespaces (named namespaces: entering, holders,
ids), reach (probe, ping), teardown (down(), and down by name), state (the
state file read back, status), cli (hpccctl lab).

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
import json
import os
import secrets
import socket as _socket
import subprocess
import time
from typing import Any, Callable, Iterator, Sequence

from . import build, reach, teardown
from .names import NETNS_DIR, STATE_DIR, LabError, netns_name, port_ifname, state_path
from .namespaces import in_netns, lookup, popen_in, stop_processes
from .offloads import OFFLOAD_MODES
from .state import status
from .topology import LAB_NAME, Port, Switch, Topology

__all__ = ["Lab", "LabError", "SwitchPort", "PortHook"]


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
        self.ifaces = build.interfaces(topology, self.token)
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
        build.build(self)

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
            oif = lookup(ns, port_ifname(port), switch)
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
                idx = {p.number: lookup(ns, port_ifname(p.number), sw.name) for p in sw.ports}
            for p in sw.ports:
                yield SwitchPort(self.name, ns_name, sw, p, port_ifname(p.number),
                                 idx[p.number], self.topology)

    def _run_hooks(self) -> None:
        if not self.port_hooks:
            return
        for sp in list(self.switch_ports()):
            with in_netns(sp.netns):
                for hook in self.port_hooks:
                    hook(sp)

    # ---- processes ----

    def popen(self, node: str, argv: list[str], **kw) -> subprocess.Popen:
        """Start `argv` in `node`'s namespace (namespaces.popen_in: ``ip netns
        exec``, its own session); terminated by down() if still running."""
        p = popen_in(self.netns(node), argv, **kw)
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
        with in_netns(self.netns(node)):
            s = _socket.socket(family, type, proto)
        self._socks.append(s)
        return s

    def track(self, s: _socket.socket) -> _socket.socket:
        """Have down() close `s` too (a socket accepted from one of ours)."""
        self._socks.append(s)
        return s
    def probe(self, src: str, dst: str, timeout: float = 3.0) -> tuple[float, int, int]:
        """A UDP round trip from host `src` to host `dst` and back: (round-trip
        seconds, switch hops there, switch hops back); hpccd.lab.reach.probe."""
        return reach.probe(self, src, dst, timeout)

    def ping(self, src: str, dst: str, timeout: float = 3.0) -> tuple[float, int]:
        """ICMP echo from host `src` to host (or address) `dst`: (round-trip
        seconds, TTL of the reply); hpccd.lab.reach.ping."""
        return reach.ping(self, src, dst, timeout)

    def _forget(self, s: _socket.socket) -> None:
        s.close()
        with contextlib.suppress(ValueError):
            self._socks.remove(s)

    def _close_socks(self) -> None:
        for s in self._socks:
            s.close()
        self._socks.clear()

    def _stop_procs(self) -> None:
        stop_processes(self._procs)

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
            report = teardown.remove(self.name, self.namespaces, [i.temp for i in self.ifaces],
                             self.state_file, errors)
            self._claimed = False
        self.is_up = False
        if errors:
            raise LabError(f"lab {self.name}: down: " + "; ".join(errors))
        return report

    # ---- status ----

    def status(self) -> dict[str, Any]:
        return status(self.name, self.state_dir)
