"""The lab's software INT switch: ebpf/int_switch.bpf.o on every egress
port of a switch namespace, configured from the topology.

One BPF object per switch (its port map is keyed by ifindex, which is
unique only within a namespace), with three programs:

- ``hpccd_int_sw`` on tc egress of every port ``p<n>`` of that switch, in
  front of the port's HTB + bfifo queue (marking, fast start, the hop
  record as the packet joins the queue, counters, queue samples);
- ``hpccd_int_deq`` on the tracepoint ``qdisc_dequeue`` (one per switch,
  machine-wide): the port's state when a stamped packet leaves the queue;
- ``int_sw_depart`` on tc ingress of the far end of every port's link (a
  host's ``eth0`` or the next switch's port, in that node's namespace):
  rewrites the record with that departure state ([HPCC] section 4.1,
  "when the packet is emitted").  Its name lacks the daemon's ``hpccd_``
  prefix on purpose: a daemon starting in a host namespace removes tc
  programs with that prefix from its interfaces as its own stale ones.

On the last hop into a host that runs xdp_host (the daemon, a transport
engine), xdp_host takes hpccd packets before tc ingress; there the
departure comes through xdp_host's hook instead: ``hook_host(host)`` puts
``int_sw_dep_xdp`` (ebpf/int_depart_xdp.bpf.c) into the hook of the XDP
program on the host's ``eth0`` (docs/lab.md "The last hop into a host").

What the programs do is in ebpf/int_switch.bpf.c and docs/lab.md; this
module only decides what each port's ``struct hpccd_sw_port`` says, from
the topology:

- ``switch_id`` (XORed into pathID), ``port`` (the port number of the hop
  record), ``speed_code`` (B of the port's rate) and ``buffer_bytes``;
- INT stamping on (flag INT), rewritten at departure (flag DEPART), and the
  queue sampler on (flag SAMPLE): on every port, or, while readers have
  said which ports they read (``want_samples``: the experiments'
  recorders), only on those;
- with the switch's ``ecn`` table: WRED/ECN (flag ECN, K_min, K_max, P_max
  as P_max x 2^32) and, with ``fast_start_k_bytes``, the fast-start drop of
  ECN-incapable packets of ``fast_start_class`` ("hpccd" -> FS_HPCCD,
  "all" -> FS_ALL, a DSCP -> FS_DSCP).

The structs, flags and counter slots come from include/hpccd/kern_user.h
through the loader's cffi module (``hpccd._bpf``): nothing is restated here.

Pins.  With ``pin=True`` (what the lab does) each switch's port map,
counters and sample ring are pinned under
``/sys/fs/bpf/hpccd-lab/<lab>/<switch>/`` so that another process (``hpccctl
lab status``, an experiment runner) can read and reconfigure them after
the process that built the lab has exited: the tc filters keep the
program, and the program its maps, alive.  The lab removes that directory
at ``down`` (it is not under ``/sys/fs/bpf/hpccd``, which the daemon's
crash clean-up empties).
"""
from __future__ import annotations

import os
import struct
from collections import Counter
from typing import Any, Callable, Iterable, NamedTuple

from ..bpf import loader as bpf
from .._bpf import ffi, lib
from .topology import Ecn, Port, Switch

__all__ = ["IntSwitch", "QueueSample", "QueueSampler", "port_config", "COUNTER_NAMES",
           "PIN_ROOT", "PROG", "pin_dir", "read_counters", "remove_pins"]

OBJECT = "int_switch"
PROG = "hpccd_int_sw"
DEQ_PROG = "hpccd_int_deq"           # tp_btf/qdisc_dequeue
DEPART_PROG = "int_sw_depart"        # tc ingress of each link's far end
DEPART_HANDLE, DEPART_PRIO = 1, 1
HOOK_OBJECT = "int_depart_xdp"       # the lab's program for xdp_host's hook
HOOK_PROG = "int_sw_dep_xdp"
HOOK_MAPS = ("hpccd_lab_hook", "hpccd_lab_in")      # xdp_host's, reused
HOOK_SW_MAPS = ("hpccd_sw_cnt", "hpccd_sw_depw", "hpccd_sw_dep")   # the switch's, reused
PIN_ROOT = bpf.BPFFS + "/hpccd-lab"
# Pinned map file names (in pin_dir(lab, switch)) -> map names in the object.
PINNED = {"ports": "hpccd_sw_ports", "counters": "hpccd_sw_cnt", "samples": "hpccd_sw_qsamp",
          "departures": "hpccd_sw_depw", "waiting": "hpccd_sw_dep"}
DEQ_LINK_PIN = "dequeue"             # the tracepoint's link, pinned beside the maps
DEFAULT_SAMPLE_NS = 100_000          # the sampler's interval per port (docs/lab.md)

# Slot names of enum hpccd_sw_counter, lower case without the prefix, in
# slot order; "counters" (the number of slots) is not a slot.
_SLOTS = {name.removeprefix("HPCCD_SW_").lower(): v
          for name, v in ffi.typeof("enum hpccd_sw_counter").relements.items()}
N_SLOTS = _SLOTS.pop("counters")
COUNTER_NAMES = tuple(sorted(_SLOTS, key=_SLOTS.get))


def pin_dir(lab: str, switch: str | None = None) -> str:
    d = os.path.join(PIN_ROOT, lab)
    return os.path.join(d, switch) if switch else d


_TOPOLOGY = object()


def port_config(switch: Switch, port: Port, *, ecn: Ecn | None | object = _TOPOLOGY,
                stamp: bool = True, sample: bool = True, depart: bool = True) -> Any:
    """The ``struct hpccd_sw_port`` of `port` of `switch` as the topology
    says (module docstring), with `ecn` instead of the switch's marking if
    given (None: no marking, no fast-start drops); a cffi struct the caller
    may still change."""
    c = ffi.new("struct hpccd_sw_port *")
    c.buffer_bytes = port.buffer_bytes
    c.port = port.number
    c.switch_id = switch.id
    c.speed_code = port.speed_code
    flags = ((lib.HPCCD_SW_F_INT | (lib.HPCCD_SW_F_DEPART if depart else 0) if stamp else 0)
             | (lib.HPCCD_SW_F_SAMPLE if sample else 0))
    e = switch.ecn if ecn is _TOPOLOGY else ecn
    if e is not None:
        flags |= lib.HPCCD_SW_F_ECN
        c.kmin_bytes = e.kmin_bytes
        c.kmax_bytes = e.kmax_bytes
        # P_max as a fraction of 2^32 (the program compares a 32-bit random
        # number with it); 1.0 is the largest u32, "always".
        c.pmax_u32 = min(round(e.pmax * 2 ** 32), 0xFFFFFFFF)
        if e.fast_start_k_bytes is not None:
            c.fast_start_k_bytes = e.fast_start_k_bytes
            if e.fast_start_class == "hpccd":
                flags |= lib.HPCCD_SW_F_FS_HPCCD
            elif e.fast_start_class == "all":
                flags |= lib.HPCCD_SW_F_FS_ALL
            else:
                flags |= lib.HPCCD_SW_F_FS_DSCP
                c.fs_dscp = int(e.fast_start_class)
    c.flags = flags
    return c


def _sum_counters(m: bpf.Map, number: int) -> dict[str, tuple[int, int]]:
    """(packets, bytes) per counter slot of port `number`, summed over CPUs."""
    out = {}
    for name, slot in _SLOTS.items():
        per_cpu = m.lookup(number * N_SLOTS + slot)
        pk = by = 0
        for v in per_cpu:
            c = ffi.cast("struct hpccd_counter *", ffi.from_buffer(v))
            pk += c.packets
            by += c.bytes
        out[name] = (pk, by)
    return out


class QueueSample(NamedTuple):
    """One record of the queue sampler (struct hpccd_sw_sample)."""

    ts_ns: int
    tx_bytes: int
    tx_packets: int
    backlog_bytes: int
    qlen: int
    drops: int
    ifindex: int
    port: int
    flags: int


_SAMPLE_SIZE = ffi.sizeof("struct hpccd_sw_sample")
# Decoding with struct is ~6x cheaper than a cffi cast and nine attribute
# reads, and the reader runs beside the flows it measures on two cores.  The
# layout is checked against the compiler's (cffi) at import: field order,
# offsets and size, so the header stays the one definition.
_SAMPLE_STRUCT = struct.Struct("<QQQIIIIHH4x")


def _check_sample_layout() -> None:
    offsets, off = [], 0
    for code in "QQQIIIIHH":
        offsets.append(off)
        off += struct.calcsize("<" + code)
    want = [ffi.offsetof("struct hpccd_sw_sample", f) for f in QueueSample._fields]
    if offsets != want or _SAMPLE_STRUCT.size != _SAMPLE_SIZE:
        raise ImportError(f"struct hpccd_sw_sample changed (offsets {want}, size "
                          f"{_SAMPLE_SIZE}): update _SAMPLE_STRUCT in hpccd.lab.int_switch")


_check_sample_layout()


class QueueSampler(bpf.RingBuffer):
    """The queue-sample ring buffer of one switch, read as QueueSample."""

    def read(self) -> list[QueueSample]:      # type: ignore[override]
        out = []
        unpack, make = _SAMPLE_STRUCT.unpack_from, QueueSample._make
        for raw in super().read():
            if len(raw) < _SAMPLE_SIZE:
                raise bpf.BpfError(22, f"queue sample of {len(raw)} bytes, "
                                       f"expected {_SAMPLE_SIZE}")
            out.append(make(unpack(raw)))
        return out


class IntSwitch:
    """Lab port hook (hpccd.lab.netns.Lab(port_hooks=...), or Lab's ``int_switch``
    argument) that loads, configures and attaches the INT switch on every
    switch port.  ``sample_ns``: the queue sampler's interval (0: off);
    ``pin``: pin each switch's maps under pin_dir(lab, switch)."""

    def __init__(self, *, sample_ns: int = DEFAULT_SAMPLE_NS, pin: bool = True):
        self.sample_ns = sample_ns
        self.pin = pin
        self.objs: dict[str, bpf.BpfObject] = {}
        self.ports: dict[tuple[str, int], Any] = {}       # (switch, number) -> SwitchPort
        self._rings: dict[str, QueueSampler] = {}
        self._hooks: dict[str, _Hook] = {}
        # switch -> port number -> readers that want its samples (want_samples)
        self._wants: dict[str, Counter] = {}
        self.lab: str | None = None

    def __call__(self, sp) -> None:
        """Attach to one port (hpccd.lab.netns.SwitchPort); runs in its namespace."""
        from .names import HOST_IFNAME, netns_name, port_ifname

        self.lab = sp.lab
        obj = self.objs.get(sp.switch.name)
        if obj is None:
            # the switch's namespace, this thread's now: its dequeues only
            ns_ino = os.stat("/proc/thread-self/ns/net").st_ino
            obj = bpf.BpfObject.open(bpf.object_path(OBJECT),
                                     rodata={"hpccd_cfg_sample_ns": self.sample_ns,
                                             "hpccd_cfg_netns_ino": ns_ino})
            self.objs[sp.switch.name] = obj
            obj.load()
            link = obj.attach_program(DEQ_PROG)
            if self.pin:
                self._pin(sp.lab, sp.switch.name, obj, link)
        self.ports[(sp.switch.name, sp.port.number)] = sp
        self.configure(sp.switch.name, sp.port.number)
        bpf.tc_attach(sp.ifname, obj.program(PROG), "egress")
        # The far end: the first point after the queue where a program may
        # still write the packet (docs/lab.md "Where the record is stamped").
        peer = sp.port.peer
        peer_if = port_ifname(sp.port.peer_port) if peer in sp.topology.switches else HOST_IFNAME
        with bpf.in_netns(netns_name(sp.lab, peer)):
            bpf.tc_attach(peer_if, obj.program(DEPART_PROG), "ingress", DEPART_HANDLE,
                          DEPART_PRIO, name_prefix=DEPART_PROG)

    def _pin(self, lab: str, switch: str, obj: bpf.BpfObject, link: bpf.Link) -> None:
        bpf.ensure_bpffs()
        d = pin_dir(lab, switch)
        os.makedirs(d, mode=0o700, exist_ok=True)
        for fname, mname in PINNED.items():
            obj.map(mname).pin(os.path.join(d, fname))
        # The tracepoint stays attached while the pin does (lab down unpins).
        link.pin(os.path.join(d, DEQ_LINK_PIN))

    def _sp(self, switch: str, number: int):
        try:
            return self.ports[(switch, number)]
        except KeyError:
            raise KeyError(f"INT switch: no port {switch}:p{number} attached") from None

    def configure(self, switch: str, number: int, *, ecn: Ecn | None | object = _TOPOLOGY,
                  depart: bool = True, **fields: Any) -> None:
        """(Re)write port `number` of `switch`: the topology's configuration,
        with marking `ecn` (a topology.Ecn, or None for none) if given, the
        record rewritten at departure unless `depart` is False (then it
        says what the packet found on arrival, as marking does), and
        `fields` of struct hpccd_sw_port overriding the result (e.g.
        ``flags=``)."""
        sp = self._sp(switch, number)
        c = self.port_struct(switch, number, ecn=ecn, depart=depart)
        for k, v in fields.items():
            setattr(c, k, v)
        self.objs[switch].map("hpccd_sw_ports").update(sp.ifindex, ffi.buffer(c)[:])

    def port_struct(self, switch: str, number: int, *, ecn: Ecn | None | object = _TOPOLOGY,
                    depart: bool = True) -> Any:
        """The struct hpccd_sw_port that configure() writes for port
        `number` of `switch` with these arguments and no `fields`: the
        topology's (port_config), this lab's sampling, and on a port whose
        far end is a host the departure kept by hop word too (that host's
        xdp_host may take the packet before tc ingress)."""
        sp = self._sp(switch, number)
        c = port_config(sp.switch, sp.port, ecn=ecn, sample=self._sampled(switch, number),
                        depart=depart)
        if depart and sp.port.peer in sp.topology.hosts:
            c.flags |= lib.HPCCD_SW_F_DEPART_XDP
        return c

    def _sampled(self, switch: str, number: int) -> bool:
        if self.sample_ns <= 0:
            return False
        if not any(+c for c in self._wants.values()):
            return True                       # no reader said which: every port
        return self._wants.get(switch, Counter())[number] > 0

    def want_samples(self, switch: str, ports: Iterable[int] | None) -> Callable[[], None]:
        """Sample `ports` of `switch` (None: all of its ports) for a reader of
        sampler(switch); returns the function that says the reader is done.
        While any reader has said which ports it reads, only those ports
        are sampled, on every switch of the lab; with none, every port.
        Each sampled port costs a ring record per sample interval with
        packet arrivals, which the reader parses (the ACK ports of a
        fairness run were about half of its 200-280 thousand samples:
        docs/lab.md "Where the lab's CPU goes")."""
        numbers = sorted({n for (s, n) in self.ports if s == switch} if ports is None
                         else set(ports))
        for n in numbers:
            self._sp(switch, n)
        wants = self._wants.setdefault(switch, Counter())
        wants.update(numbers)
        self._write_sample_flags()
        released = False

        def done() -> None:
            nonlocal released
            if released:
                return
            released = True
            wants.subtract(numbers)
            self._write_sample_flags()
        return done

    def _write_sample_flags(self) -> None:
        """Set each port's SAMPLE flag as _sampled() says, in the port's
        struct as it is (an experiment may have changed its marking or
        fields); only ports whose flag changes are written."""
        for (s, n), sp in self.ports.items():
            ports_map = self.objs[s].map("hpccd_sw_ports")
            raw = ports_map.lookup(sp.ifindex)
            if raw is None:
                continue
            c = ffi.new("struct hpccd_sw_port *")
            ffi.buffer(c)[:] = raw
            flags = c.flags & ~lib.HPCCD_SW_F_SAMPLE
            if self._sampled(s, n):
                flags |= lib.HPCCD_SW_F_SAMPLE
            if flags != c.flags:
                c.flags = flags
                ports_map.update(sp.ifindex, ffi.buffer(c)[:])

    def counters(self, switch: str, number: int) -> dict[str, tuple[int, int]]:
        """(packets, bytes) per counter of port `number` (COUNTER_NAMES)."""
        self._sp(switch, number)
        return _sum_counters(self.objs[switch].map("hpccd_sw_cnt"), number)

    def sampler(self, switch: str) -> QueueSampler:
        """The queue sampler of `switch` (one reader per switch, kept open)."""
        r = self._rings.get(switch)
        if r is None:
            if switch not in self.objs:
                raise KeyError(f"INT switch: no switch {switch!r} attached")
            r = self._rings[switch] = QueueSampler(self.objs[switch].map("hpccd_sw_qsamp"))
        return r

    def host_port(self, host: str):
        """The switch port (hpccd.lab.netns.SwitchPort) whose far end is `host`."""
        for sp in self.ports.values():
            if sp.port.peer == host:
                return sp
        raise KeyError(f"INT switch: no switch port leads to host {host!r}")

    def hook_host(self, host: str) -> None:
        """Fill the lab's hook of the XDP program on `host`'s eth0 (an
        xdp_host: the daemon's, a transport engine's) with the departure
        stamp of the last hop (docs/lab.md "The last hop into a host").
        Call it after that program is attached, and again when it was
        replaced (a restarted daemon, a new engine): the hook belongs to
        one loaded xdp_host.  A host without an XDP program needs no hook
        (tc ingress sees its packets); one whose program has no hook is
        refused (ValueError).  Undone by unhook_host() and close()."""
        from .names import HOST_IFNAME, netns_name

        sp = self.host_port(host)
        with bpf.in_netns(netns_name(sp.lab, host)):
            prog_id = bpf.xdp_query(HOST_IFNAME)
        if prog_id is None:
            raise ValueError(f"INT switch: no XDP program on {host}:{HOST_IFNAME} to hook")
        old = self._hooks.get(host)
        if old is not None and old.prog.id == prog_id:
            return
        self.unhook_host(host)
        obj = self.objs[sp.switch.name]
        self._hooks[host] = _Hook.make(prog_id, {n: obj.map(n) for n in HOOK_SW_MAPS},
                                       sp.port.number, f"{host}:{HOST_IFNAME}")

    def unhook_host(self, host: str) -> None:
        """Empty the hook hook_host() filled (if its program is still there)."""
        h = self._hooks.pop(host, None)
        if h is not None:
            h.close()

    def close(self) -> None:
        """Empty the hooks, close the objects (the tc filters keep the
        programs until the namespaces go) -- the pins are removed by the
        lab's down."""
        for host in list(self._hooks):
            self.unhook_host(host)
        for r in self._rings.values():
            r.close()
        for o in self.objs.values():
            o.close()
        self._rings.clear()
        self.objs.clear()


class _Hook:
    """int_sw_dep_xdp in the hook of one loaded xdp_host (prog array
    hpccd_lab_hook: the lab's program in slot HPCCD_LAB_HOOK_PROG, xdp_host
    itself in HPCCD_LAB_HOOK_BACK to go back to), sharing the maps of the
    switch of the host's last hop."""

    def __init__(self, prog: bpf.Program, hook: bpf.Map, obj: bpf.BpfObject):
        self.prog, self.hook, self.obj = prog, hook, obj

    @classmethod
    def make(cls, prog_id: int, sw_maps: dict[str, bpf.Map], port: int, where: str) -> "_Hook":
        """`sw_maps`: the switch's HOOK_SW_MAPS by name (its object's, or its pins)."""
        prog = bpf.Program.from_id(prog_id)
        maps: dict[str, bpf.Map] = {}
        obj = None
        try:
            for mid in prog.map_ids():
                m = bpf.Map.from_id(mid)
                if m.name in HOOK_MAPS and m.name not in maps:
                    maps[m.name] = m
                else:
                    m.close()
            missing = [n for n in HOOK_MAPS if n not in maps]
            if missing:
                raise ValueError(f"INT switch: the XDP program on {where} ({prog.kernel_name}, "
                                 f"id {prog_id}) has no lab hook (no map {missing[0]})")
            obj = bpf.BpfObject.open(bpf.object_path(HOOK_OBJECT),
                                     rodata={"hpccd_cfg_lab_port": port})
            for n in HOOK_MAPS:
                obj.reuse_map(n, maps[n])
            for n in HOOK_SW_MAPS:
                obj.reuse_map(n, sw_maps[n])
            obj.load()
            hook = maps.pop("hpccd_lab_hook")
            # the way back first: the lab's program never finds it empty
            hook.update(lib.HPCCD_LAB_HOOK_BACK, prog.fd)
            hook.update(lib.HPCCD_LAB_HOOK_PROG, obj.program(HOOK_PROG).fd)
            return cls(prog, hook, obj)
        except BaseException:
            if obj is not None:
                obj.close()
            prog.close()
            raise
        finally:
            for m in maps.values():
                m.close()

    def close(self, keep: bool = False) -> None:
        """Empty the hook (unless `keep`: then it stays filled for as long as
        the program's owner holds its map) and let go of everything."""
        try:
            if not keep:
                self.hook.delete(lib.HPCCD_LAB_HOOK_PROG)
                self.hook.delete(lib.HPCCD_LAB_HOOK_BACK)
        finally:
            self.hook.close()
            self.obj.close()
            self.prog.close()


def _host_port(lab: str, host: str) -> tuple[str, int]:
    """(switch, port number) of the link into `host` of lab `lab` (its state file)."""
    from .names import LabError
    from .state import load_state
    from .topology import Topology

    st = load_state(lab)
    if not st.get("int_switch"):
        raise LabError(f"lab {lab!r} has no INT switch (built with --no-int)")
    topo = Topology.loads(st["topology_text"])
    if host not in topo.hosts:
        raise LabError(f"lab {lab!r} has no host {host!r} (hosts: {', '.join(topo.hosts)})")
    for sw in topo.switches.values():
        for port in sw.ports:
            if port.peer == host:
                return sw.name, port.number
    raise LabError(f"lab {lab!r}: no switch port leads to host {host!r}")


def hook_pinned(lab: str, host: str, on: bool = True) -> int:
    """From any process (``hpccctl lab hook``): fill the hook of the XDP
    program now on `host`'s eth0 with the departure stamp of the last hop,
    from the maps the lab pinned, and leave it filled (the program's owner,
    e.g. the daemon, keeps its map and so the hook); or, `on` False, empty
    it.  Returns the XDP program's id."""
    from .names import HOST_IFNAME, LabError, netns_name

    switch, port = _host_port(lab, host)
    with bpf.in_netns(netns_name(lab, host)):
        prog_id = bpf.xdp_query(HOST_IFNAME)
    if prog_id is None:
        raise LabError(f"no XDP program on {host}:{HOST_IFNAME} (start hpccd there first)")
    if not on:
        with bpf.Program.from_id(prog_id) as prog:
            for mid in prog.map_ids():
                with bpf.Map.from_id(mid) as m:
                    if m.name == "hpccd_lab_hook":
                        m.delete(lib.HPCCD_LAB_HOOK_PROG)
                        m.delete(lib.HPCCD_LAB_HOOK_BACK)
                        return prog_id
        raise LabError(f"the XDP program on {host}:{HOST_IFNAME} (id {prog_id}) has no lab hook")
    d = pin_dir(lab, switch)
    maps = {}
    try:
        for fname, mname in PINNED.items():
            if mname in HOOK_SW_MAPS:
                path = os.path.join(d, fname)
                if not os.path.exists(path):
                    raise LabError(f"lab {lab!r}: {path} is missing (a lab built before the "
                                   f"hook existed? rebuild it)")
                maps[mname] = bpf.Map.from_pinned(path)
        try:
            _Hook.make(prog_id, maps, port, f"{host}:{HOST_IFNAME}").close(keep=True)
        except ValueError as e:
            raise LabError(str(e)) from None
    finally:
        for m in maps.values():
            m.close()
    return prog_id


def cli(args) -> int:
    """``hpccctl lab hook NAME HOST [--off]``."""
    import sys

    from ..cli.errors import not_root
    from .names import LabError

    if not_root("hpccctl lab hook", "network namespaces"):
        return 2
    try:
        prog_id = hook_pinned(args.name, args.host, on=not args.off)
    except (LabError, OSError) as e:
        print(f"hpccctl lab hook: {e}", file=sys.stderr)
        return 1
    print(f"{args.name}: {args.host}'s XDP program (id {prog_id}): the last hop's departure "
          f"stamp {'removed from' if args.off else 'in'} its hook")
    return 0


# ---- from any process, through the pins ---------------------------------------------------

def read_counters(lab: str, switch: str, numbers: list[int]) -> dict[int, dict[str, tuple]]:
    """Counters of ports `numbers` of `switch` of lab `lab`, from its pinned
    map; {} if the lab has no INT switch pins."""
    path = os.path.join(pin_dir(lab, switch), "counters")
    if not os.path.exists(path):
        return {}
    with bpf.Map.from_pinned(path) as m:
        return {n: _sum_counters(m, n) for n in numbers}


def remove_pins(lab: str) -> list[str]:
    """Unpin everything of lab `lab` (its maps live on while a program
    that uses them is attached, i.e. until its namespaces go), and the
    common folder once no lab is left in it."""
    gone = bpf.unpin_tree(pin_dir(lab))
    try:
        os.rmdir(PIN_ROOT)                      # only if empty: other labs keep it
    except OSError:
        pass
    return gone

