"""The plug-in point of the daemon: flow-manager components.

The daemon core (hpccd.agent.main) owns the lifecycle, the BPF programs of the
host interfaces, the configuration, the flow table, the control socket and
the metrics.  The flow managers — the AF_XDP transport (native flows,
probes, Rx-HPCC notifications: ``hpccd.transport.engine``) and the TCP-side
deployment (kernel TCP flows, struct_ops: ``hpccd.tcp_side.engine``) — plug into it
as components, named in ``daemon.components`` of the configuration.

A component module exposes ``COMPONENT``, a subclass of :class:`Component`.
A name in ``daemon.components`` is one of :data:`KNOWN` or, for components
outside the package, ``"package.module:Class"``.

Lifecycle, all calls from the daemon's main thread:

1. ``cls.cleanup_stale(cfg)`` — at start (before anything is attached) and
   by ``hpccd --cleanup``: remove what a dead daemon left behind that the
   core's clean-up does not know about (registered struct_ops, pins).
   Several daemons run on one host (one per network namespace): what is
   host-wide may belong to a live one, and is removed only when no live
   daemon holds it (the TCP side's struct_ops: hpccd.tcp_side.engine.TcpCc's
   shared lock); the core removes programs only from interfaces no live
   daemon owns (hpccd.agent.ownership).
2. ``cls(ctx)`` then ``start()`` — after the core has attached xdp_host and
   tc_tracker (``ctx.interfaces``) and before READY=1.  Raising fails the
   start: the core then calls ``stop()`` on this component (so it must
   undo a half-done start) and on those already started, and detaches
   everything.
3. ``poll(now)`` every ``poll_interval`` seconds (None: never) — read
   fast-path state in batches, publish to ``ctx.flows``.  Must not block.
   It may return a longer delay, in seconds, until its next poll (a
   component with nothing to publish backs off, so that an idle daemon's
   cost does not grow with time: :func:`idle_backoff`); a control command
   the component answers brings its next poll back to ``poll_interval``.
4. ``check_config(new)`` then ``apply_config(new)`` on a reload (SIGHUP or
   ``hpccctl set``): ``check_config`` raises (ConfigError or ValueError,
   with a message naming the key) to refuse; the core then keeps the old
   configuration everywhere.  ``apply_config`` must not fail.  The core
   has already put the reloaded integrity key into ``ctx.tag_key`` (and
   into every xdp_host's ``hpccd_tag_key``): a component running
   transport engines passes it on with ``Transport.set_tag_key()``
   (key rotation without restart, docs/security.md).
5. ``stop()`` — on SIGTERM or a failed start: stop threads, unregister and
   unpin what ``start`` made (the core detaches its own programs after).
   Idempotent.

``status()`` goes into ``hpccctl status``; ``healthy()`` False stops the
watchdog pings (systemd then restarts the daemon).

A component may answer control-socket commands of its own: it lists them
in ``control_commands`` and implements ``control(cmd, args)``, which runs in
the main loop (must not block for long) and raises
hpccd.agent.control.ControlError to refuse.  The transport's ``send`` and
``transfer`` are such commands.
"""
from __future__ import annotations

import dataclasses
import importlib
import logging
import math
import pathlib
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from ..bpf import loader as bpf
    from .config import Config
    from .flows import FlowTable

__all__ = ["Component", "DaemonContext", "AttachedInterface", "KNOWN", "load_class",
           "ComponentError"]

# Component name -> module of the package that defines COMPONENT.
KNOWN = {"transport": "hpccd.transport.component", "tcp_side": "hpccd.tcp_side.engine"}


class ComponentError(RuntimeError):
    """A component cannot be found, started or reconfigured."""


@dataclasses.dataclass
class AttachedInterface:
    """A host interface as the core set it up: its xdp_host object (maps:
    hpccd_xsks, hpccd_telem, hpccd_addrs, hpccd_tag_key, hpccd_xdp_cnt) and,
    if configured, its tc_tracker object (hpccd_tcp_flows, hpccd_tc_cnt)."""

    name: str
    ifindex: int
    xdp_mode: str                       # "native" or "skb", as attached
    xdp: "bpf.BpfObject"
    tc: "bpf.BpfObject | None"
    addresses: list[str]                # its IPv4 addresses, in hpccd_addrs
    queues: tuple[int, ...]             # rx queues for AF_XDP sockets (config)
    cpus: tuple[int, ...] = ()          # the CPU of each queue's engine (config); (): any

    def xdp_map(self, name: str) -> "bpf.Map":
        return self.xdp.map(name)

    def tc_map(self, name: str) -> "bpf.Map":
        if self.tc is None:
            raise ComponentError(f"{self.name}: no tc_tracker (interfaces.tc_tracker = false)")
        return self.tc.map(name)


@dataclasses.dataclass
class DaemonContext:
    """What a component gets from the core.  ``config`` is replaced on every
    accepted reload (after ``apply_config``)."""

    config: "Config"
    flows: "FlowTable"
    interfaces: dict[str, AttachedInterface]
    tag_key: bytes | None
    log: logging.Logger
    netns: str | None = None            # reserved: the daemon runs in its own netns
    bpf_dir: "pathlib.Path | None" = None   # daemon.bpf_dir as found (daemon.find_bpf_dir)


# The longest an idle component waits between polls, seconds.
IDLE_POLL_S = 1.0


def idle_backoff(previous: float | None, interval: float, busy: bool) -> float | None:
    """The delay a poll() returns: None (``interval``) while busy; while
    idle, twice the previous delay, from ``interval`` up to IDLE_POLL_S."""
    if busy:
        return None
    return min(2 * (previous or interval), max(IDLE_POLL_S, interval))


def poll_due(now: float, delay: float) -> float:
    """When a poll `delay` seconds from `now` (monotonic) is due.  An idle
    component's (a delay of IDLE_POLL_S or more) falls on a whole multiple of
    IDLE_POLL_S of the clock, at most `delay` away, so that every idle
    component is polled in the same wake of the daemon's loop: two idle
    components at their own phases woke it twice a second (issue 19)."""
    if delay < IDLE_POLL_S:
        return now + delay
    return math.floor((now + delay) / IDLE_POLL_S) * IDLE_POLL_S


class Component:
    """Base class of a flow-manager component (see the module docstring)."""

    name: ClassVar[str] = ""
    poll_interval: ClassVar[float | None] = 0.1
    control_commands: ClassVar[tuple[str, ...]] = ()

    def __init__(self, ctx: DaemonContext):
        self.ctx = ctx
        self.log = ctx.log.getChild(self.name or type(self).__name__)

    @classmethod
    def cleanup_stale(cls, cfg: "Config") -> list[str]:
        """Remove leftovers of a dead daemon; returns what it removed."""
        return []

    def start(self) -> None:
        raise NotImplementedError

    def poll(self, now: float) -> float | None:
        return None

    def check_config(self, new: "Config") -> None:
        pass

    def apply_config(self, new: "Config") -> None:
        pass

    def status(self) -> dict[str, Any]:
        return {}

    def healthy(self) -> bool:
        return True

    def control(self, cmd: str, args: dict) -> Any:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError


def load_class(name: str) -> type[Component]:
    """The Component class of a ``daemon.components`` entry."""
    target = KNOWN.get(name, name)
    mod_name, _, attr = target.partition(":")
    attr = attr or "COMPONENT"
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as e:
        raise ComponentError(f"component {name!r}: cannot import {mod_name}: {e}") from None
    cls = getattr(mod, attr, None)
    if not (isinstance(cls, type) and issubclass(cls, Component)):
        raise ComponentError(f"component {name!r}: {mod_name}.{attr} is not a "
                             f"hpccd.agent.component.Component subclass")
    return cls
