"""hpccd, the daemon: ``hpccd --config /etc/hpccd/hpccd.toml``.

Start-up, in order (any failure undoes what was done and exits non-zero):

1. load and validate the configuration (exit status 2 when it is refused,
   with the file, line and key on stderr);
2. open the control socket (a daemon that still answers on it owns the
   programs: start-up is refused before touching anything); claim the
   configured interfaces (hpccd.agent.ownership: an owner record with pid and
   start time per interface; another live daemon's interface refuses the
   start with exit status 2, touching nothing); remove what a dead daemon
   left: hpccd_* XDP programs and tc filters on the claimed interfaces
   (hpccd.bpf.loader.cleanup_stale), the components' own leftovers (the TCP
   side's struct_ops only when no live daemon shares them), a control
   socket nobody answers on;
3. per interface: load xdp_host with the port, DSCP and flags of the
   configuration as load-time constants, write the integrity key and the
   interface's IPv4 addresses into its maps, attach it (generic/skb mode on
   a veth, native otherwise: ebpf/README.md, "Attach mode"); load and attach
   tc_tracker on egress;
4. start the flow-manager components (hpccd.agent.component);
5. start the metrics exporter;
6. READY=1 (sd_notify) — only now are the programs attached.

Running: one thread runs a selector loop over the control socket and a
self-pipe the signal handlers write to (they only set flags); it polls the
components (each at its own interval, less often while it is idle: the
idle daemon's cost does not grow with time), re-reads the interfaces'
addresses when netlink announces a change, sends WATCHDOG=1 at half
of WatchdogSec while every component is healthy.  The exporter's HTTP
server has its own thread and reads the flow table and the BPF maps.

SIGHUP reloads the file: a configuration that is refused — by the schema, by
a component, or because a key that needs a restart changed — leaves the
running one in place, and the reason goes to the log, to systemd's STATUS=
and to ``hpccctl status``.  SIGTERM/SIGINT: STOPPING=1, stop the
components, close the sockets, detach every program, exit 0.

``hpccd --cleanup`` (the unit's ExecStopPost) removes what a daemon that
died left attached; it refuses to touch anything while a daemon answers on
the control socket, and leaves alone every interface a live daemon owns
(its owner record) and struct_ops that live daemons share; it also prunes
the owner records of dead daemons whose network namespace is gone, as each
claim does (hpccd.agent.ownership.prune).  ``hpccd --check`` only validates
the file.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import errno
import logging
import os
import pathlib
import selectors
import signal
import socket
import sys
import time
from typing import Any

from .. import __version__
from .._bpf import lib as abi         # the kernel/user ABI (include/hpccd/kern_user.h)
from ..bpf import loader as bpf, counters as bpf_counters
from . import ownership
from . import config as config_mod
from .component import (AttachedInterface, Component, ComponentError, DaemonContext, load_class,
                        poll_due)
from .config import Config, ConfigError
from ..cli.errors import permission_denied, privilege_hint, run_main
from .control import ControlError, ControlServer
from .flows import FlowTable
from .sdnotify import Notifier

__all__ = ["Daemon", "DaemonError", "main", "find_bpf_dir", "cleanup"]

log = logging.getLogger("hpccd")

XDP_PROG = "hpccd_xdp_host"
TC_PROG = "hpccd_tc_tracker"
TC_HANDLE, TC_PRIO = 1, 1
# The interfaces' IPv4 addresses are re-read when the kernel announces a
# change (netlink RTMGRP_IPV4_IFADDR), and every ADDR_REFRESH_S in case an
# announcement was lost (a full socket buffer); every ADDR_POLL_S without
# the netlink socket.
ADDR_REFRESH_S = 60.0
ADDR_POLL_S = 2.0
_RTMGRP_IPV4_IFADDR = 0x10
EXIT_CONFIG = 2
EXIT_NO_INTERFACE = 3       # a configured interface does not exist: not retried either
BPF_OBJECTS = ("xdp_host.bpf.o", "tc_tracker.bpf.o")
TCP_SIDE_OBJECTS = ("tcp_hpcc.bpf.o", "tcp_dctcp.bpf.o")    # hpccd.tcp_side.engine.CC_NAMES


class DaemonError(RuntimeError):
    """The daemon cannot start (the message says what and where)."""


class NoInterfaceError(DaemonError):
    """A configured interface is not in the daemon's network namespace."""


class InterfaceOwnedError(DaemonError):
    """Another live daemon owns a configured interface (exit status 2: a
    restart would not help until that daemon is stopped)."""


def find_bpf_dir(cfg: Config) -> pathlib.Path:
    """Where xdp_host.bpf.o and tc_tracker.bpf.o are: daemon.bpf_dir, else
    $HPCCD_BPF_DIR, else build/ebpf of the source tree this package runs
    from, else the installed package's bpf/ folder, else /usr/lib/hpccd/bpf."""
    cands = [cfg.bpf_dir] if cfg.bpf_dir else []
    if os.environ.get("HPCCD_BPF_DIR"):
        cands.append(os.environ["HPCCD_BPF_DIR"])
    cands += [bpf.SOURCE_OBJ_DIR, bpf.PACKAGE_OBJ_DIR,
              "/usr/lib/hpccd/bpf", "/usr/local/lib/hpccd/bpf"]
    need = BPF_OBJECTS + (TCP_SIDE_OBJECTS if "tcp_side" in cfg.components else ())
    if cfg.bpf_dir:                     # said: only there, never a fallback
        p = pathlib.Path(cfg.bpf_dir)
        missing = [n for n in need if not (p / n).is_file()]
        if missing:
            why = "no such directory" if not p.is_dir() else f"no {' or '.join(missing)} there"
            raise ConfigError(cfg.file, cfg.where(("daemon", "bpf_dir")), "daemon.bpf_dir",
                              f"{cfg.bpf_dir}: {why} (make bpf builds the objects; an empty "
                              f"bpf_dir searches the usual places)")
        return p
    for c in cands:
        p = pathlib.Path(c)
        if all((p / n).is_file() for n in need):
            return p
    raise DaemonError(f"no {', '.join(need)} found together in {', '.join(cands)} (make bpf "
                      f"builds them; daemon.bpf_dir says where they are)")


def _link_kind(ifindex: int) -> str:
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        msg = ipr.get_links(ifindex)[0]
        info = msg.get_attr("IFLA_LINKINFO")
        return (info.get_attr("IFLA_INFO_KIND") if info else None) or ""


def _ipv4_addresses(ifindex: int) -> list[str]:
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        return sorted(a.get_attr("IFA_ADDRESS") for a in
                      ipr.get_addr(family=socket.AF_INET, index=ifindex))


def _set_addrs(obj: bpf.BpfObject, addrs: list[str]) -> None:
    m = obj.map("hpccd_addrs")
    want = {socket.inet_aton(a) for a in addrs}
    for k in list(m.keys()):
        if k not in want:
            m.delete(k)
    for k in want:
        m.update(k, 1)


def _interface_desc(cfg: Config, i: int) -> str:
    line = cfg.where(("interfaces", i, "name"))
    return f"{cfg.file}:{line}: interfaces[{i}].name" if line else f"interfaces[{i}].name"


class Daemon:
    """The running daemon (see the module docstring)."""

    def __init__(self, cfg: Config, notifier: Notifier | None = None):
        self.config = cfg
        self.notifier = notifier or Notifier()
        self.flows = FlowTable(cfg.max_flows, cfg.peer_names, config_mod.ALGORITHMS,
                               cfg.int_hop_series)
        self.interfaces: dict[str, AttachedInterface] = {}
        self.components: dict[str, Component] = {}
        self.started_wall = time.time()
        self.started = time.monotonic()
        self.reloads: collections.Counter[str] = collections.Counter()
        self.last_reload: tuple[float, bool] = (self.started_wall, True)
        self.last_reload_error = ""
        self.control_requests: collections.Counter[tuple[str, str]] = collections.Counter()
        self.tag_key: bytes | None = None
        self.netns = None
        self.sel = selectors.DefaultSelector()
        self.control: ControlServer | None = None
        self._metrics_server = None
        self._ctx: DaemonContext | None = None
        self._term = False
        self._hup = False
        self._wake_r = self._wake_w = -1
        self._next_poll: dict[str, float] = {}
        self._next_addr = 0.0
        self._addr_every = ADDR_POLL_S          # ADDR_REFRESH_S once netlink tells
        self._addr_nl: socket.socket | None = None
        self._claimed: list[int] = []       # ifindexes of our owner records

    # ---- start ----

    def start(self) -> None:
        cfg = self.config
        classes = {name: load_class(name) for name in cfg.components}
        # First: a daemon that still answers there owns the programs, and the
        # clean-up below must not remove them (ControlError: refused).
        self.control = ControlServer(cfg.control_socket, self._handle, self.sel)
        self.control.open()
        self._claim()
        self.notifier.status("starting: removing stale attachments")
        cleanup(cfg, classes)
        self.tag_key = cfg.read_key()
        exposed = cfg.key_file_warning()
        if exposed:
            log.warning("%s", exposed)
        if self.tag_key is None:
            log.warning("transport.integrity_key_file is not set: probes are dropped and "
                        "counted by the XDP program rather than answered (docs/configuration.md)")
        bpf_dir = find_bpf_dir(cfg)
        self.notifier.status("starting: attaching programs")
        for i, itf in enumerate(cfg.interfaces):
            self.interfaces[itf.name] = self._attach(i, itf, bpf_dir)
        self._ctx = DaemonContext(cfg, self.flows, self.interfaces, self.tag_key,
                                  logging.getLogger("hpccd.agent.component"), bpf_dir=bpf_dir)
        for name, cls in classes.items():
            self.notifier.status(f"starting: component {name}")
            comp = cls(self._ctx)
            # Registered first: stop() (idempotent) then also undoes a half-done start.
            self.components[name] = comp
            comp.start()
            self._next_poll[name] = 0.0
        if cfg.metrics_address:
            from . import metrics

            try:
                self._metrics_server, _ = metrics.serve(cfg.metrics_address,
                                                        metrics.make_registry(self))
            except OSError as e:
                raise DaemonError(f"daemon.metrics_address {cfg.metrics_address}: "
                                  f"{e.strerror}") from None
        log.info("hpccd %s ready: %s", __version__, self._status_line())
        self.notifier.ready(self._status_line())

    def _claim(self) -> None:
        """Owner records for the configured interfaces that exist here (a
        missing one fails in _attach); refused if another live daemon owns one."""
        present = []
        for itf in self.config.interfaces:
            try:
                present.append((itf.name, socket.if_nametoindex(itf.name)))
            except OSError:
                pass
        try:
            stale = ownership.claim(present, self.config.control_socket)
        except ownership.InterfaceOwnedError as e:
            raise InterfaceOwnedError(str(e)) from None
        self._claimed = [ifindex for _, ifindex in present]
        for o in stale:
            log.warning("%s: its owner, hpccd pid %d, is gone: removing what it left",
                        o.name, o.pid)

    def _attach(self, i: int, itf: config_mod.Interface, bpf_dir: pathlib.Path
                ) -> AttachedInterface:
        cfg = self.config
        try:
            ifindex = socket.if_nametoindex(itf.name)
        except OSError:
            raise NoInterfaceError(f"{_interface_desc(cfg, i)}: no interface {itf.name!r} in "
                                   f"this network namespace") from None
        mode = itf.xdp_mode
        if mode == "auto":
            mode = "skb" if _link_kind(ifindex) == "veth" else "native"
        flags = ((abi.HPCCD_CFG_REFLECT_PROBES if cfg.reflect else 0)
                 | (abi.HPCCD_CFG_TCP_SIDE if cfg.tcp_side else 0))
        xdp = bpf.BpfObject.open(bpf_dir / "xdp_host.bpf.o", rodata={
            "hpccd_cfg_udp_port": cfg.udp_port, "hpccd_cfg_probe_dscp": cfg.probe_dscp,
            "hpccd_cfg_flags": flags, "hpccd_cfg_probe_rate": cfg.reflect_rate,
            "hpccd_cfg_probe_burst": cfg.reflect_burst})
        tc = None
        try:
            xdp.load()
            if self.tag_key is not None:
                xdp.map("hpccd_tag_key").update(0, self.tag_key)
            addrs = _ipv4_addresses(ifindex)
            _set_addrs(xdp, addrs)
            bpf.xdp_attach(ifindex, xdp.program(XDP_PROG), mode=mode)
            if mode == "native" and (why := bpf.native_xdp_drops(ifindex)):
                log.warning("%s", why)
            att = AttachedInterface(itf.name, ifindex, mode, xdp, None, addrs, itf.queues,
                                    itf.cpus)
            # Registered before tc so that a failure below detaches the XDP program too.
            self.interfaces[itf.name] = att
            if itf.tc_tracker:
                tc = bpf.BpfObject.open(bpf_dir / "tc_tracker.bpf.o",
                                        rodata={"hpccd_cfg_probe_dscp": cfg.probe_dscp})
                att.tc = tc
                tc.load()
                bpf.tc_attach(ifindex, tc.program(TC_PROG), "egress", TC_HANDLE, TC_PRIO)
            ownership.record_programs(ifindex, xdp.program(XDP_PROG).id,
                                      tc.program(TC_PROG).id if tc else None)
            log.info("%s (ifindex %d): xdp_host attached in %s mode%s; addresses %s",
                     itf.name, ifindex, mode, ", tc_tracker on egress" if tc else "",
                     ", ".join(addrs) or "none")
            return att
        except bpf.BpfError as e:
            if itf.name not in self.interfaces:
                xdp.close()
            raise DaemonError(f"{_interface_desc(cfg, i)}: {itf.name}: {e}") from None

    # ---- stop ----

    def stop(self) -> list[str]:
        """Stop components, close the sockets, detach and close every
        program.  Returns the problems met (it carries on after each)."""
        problems: list[str] = []
        # The exporter's thread reads the components and the programs: first.
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
            self._metrics_server.server_close()
            self._metrics_server = None
        for name, comp in reversed(list(self.components.items())):
            try:
                comp.stop()
            except Exception as e:
                problems.append(f"component {name}: stop: {e}")
                log.error("component %s: stop failed: %s", name, e)
                log.debug("component %s: stop failed", name, exc_info=True)
        self.components.clear()
        for f in self.flows.snapshot():
            try:
                self.flows.finish(f.id, completed=False)
            except KeyError:
                pass
        if self.control is not None:
            self.control.close()
            self.control = None
        if self._addr_nl is not None:
            with contextlib.suppress(KeyError, ValueError):
                self.sel.unregister(self._addr_nl)
            self._addr_nl.close()
            self._addr_nl = None
        for name, att in list(self.interfaces.items()):
            problems += self._detach(att)
            del self.interfaces[name]
        if self._claimed:
            try:
                ownership.release(self._claimed)
            except OSError as e:
                problems.append(f"owner records: {e}")
            self._claimed = []
        return problems

    def _detach(self, att: AttachedInterface) -> list[str]:
        problems = []
        try:
            if att.tc is not None:
                try:
                    cur = bpf.tc_query(att.ifindex, "egress", TC_HANDLE, TC_PRIO)
                    if cur is not None and cur == att.tc.program(TC_PROG).id:
                        bpf.tc_detach(att.ifindex, "egress", TC_HANDLE, TC_PRIO)
                    bpf.tc_remove_clsact(att.ifindex, only_if_empty=True)
                except bpf.BpfError as e:
                    if e.errno != errno.ENODEV:         # the interface is gone: so is the filter
                        problems.append(f"{att.name}: tc detach: {e}")
                finally:
                    att.tc.close()
            try:
                if bpf.xdp_query(att.ifindex) == att.xdp.program(XDP_PROG).id:
                    bpf.xdp_detach(att.ifindex)
            except bpf.BpfError as e:
                if e.errno != errno.ENODEV:
                    problems.append(f"{att.name}: xdp detach: {e}")
        finally:
            att.xdp.close()
        for p in problems:
            log.error("%s", p)
        return problems

    # ---- the loop ----

    def _install_signals(self) -> None:
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)
        self.sel.register(self._wake_r, selectors.EVENT_READ, self._drain_wake)
        try:
            nl = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_NONBLOCK
                               | socket.SOCK_CLOEXEC, socket.NETLINK_ROUTE)
            nl.bind((0, _RTMGRP_IPV4_IFADDR))
        except OSError as e:
            log.warning("no netlink address announcements (%s): addresses re-read every "
                        "%.0f s", e, ADDR_POLL_S)
        else:
            self._addr_nl = nl
            self._addr_every = ADDR_REFRESH_S
            self.sel.register(nl, selectors.EVENT_READ, self._addr_changed)

        def on_term(signum, frame):
            self._term = True

        def on_hup(signum, frame):
            self._hup = True

        signal.signal(signal.SIGTERM, on_term)
        signal.signal(signal.SIGINT, on_term)
        signal.signal(signal.SIGHUP, on_hup)

    def _addr_changed(self, mask: int) -> None:
        """An IPv4 address was added or removed somewhere: re-read ours."""
        try:
            while self._addr_nl.recv(65536):
                pass
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:                     # ENOBUFS: announcements lost, re-read anyway
            pass
        self._next_addr = 0.0

    def _drain_wake(self, mask: int) -> None:
        try:
            while os.read(self._wake_r, 512):
                pass
        except BlockingIOError:
            pass

    def run(self) -> None:
        """Serve until SIGTERM/SIGINT."""
        while not self._term:
            now = time.monotonic()
            due = [self._next_addr]
            for name, comp in self.components.items():
                if comp.poll_interval is not None:
                    due.append(self._next_poll[name])
            wd = self.notifier.watchdog_due(now)
            if wd is not None:
                due.append(now + wd)
            timeout = max(0.0, min(min(due) - now, 1.0))
            for key, mask in self.sel.select(timeout):
                key.data(mask)
            if self._hup:
                self._hup = False
                self.reload_file()
            now = time.monotonic()
            for name, comp in self.components.items():
                if comp.poll_interval is not None and now >= self._next_poll[name]:
                    nxt = None
                    try:
                        nxt = comp.poll(now)
                    except Exception:
                        log.exception("component %s: poll failed", name)
                    # an idle component asks for its next poll later: the
                    # daemon's cost grows with its flows, not with time
                    self._next_poll[name] = poll_due(now, comp.poll_interval if nxt is None
                                                     else max(comp.poll_interval, float(nxt)))
            if now >= self._next_addr:
                self._next_addr = now + self._addr_every
                self._refresh_addresses()
            wd = self.notifier.watchdog_due(now)
            if wd is not None and wd <= 0 and self._healthy():
                self.notifier.ping_watchdog(now)
            if self.control is not None:
                self.control.expire(now)

    def _healthy(self) -> bool:
        for name, comp in self.components.items():
            try:
                if not comp.healthy():
                    return False
            except Exception:
                log.exception("component %s: healthy() failed", name)
                return False
        return True

    def _refresh_addresses(self) -> None:
        for att in self.interfaces.values():
            try:
                addrs = _ipv4_addresses(att.ifindex)
                if addrs != att.addresses:
                    _set_addrs(att.xdp, addrs)
                    log.info("%s: addresses now %s", att.name, ", ".join(addrs) or "none")
                    att.addresses = addrs
            except Exception as e:                  # keep serving; say so
                log.warning("%s: address refresh failed: %s", att.name, e)

    # ---- reload ----

    def reload_file(self) -> bool:
        """SIGHUP: re-read the configuration file."""
        self.notifier.reloading()
        try:
            new = config_mod.load(self.config.file)
            self.apply(new)
        except (ConfigError, ComponentError, ValueError) as e:
            self._reload_failed(e)
            return False
        finally:
            self.notifier.ready(self._status_line())
        return True

    def _reload_failed(self, e: Exception) -> None:
        self.reloads["error"] += 1
        self.last_reload = (time.time(), False)
        self.last_reload_error = str(e)
        log.error("reload refused, the running configuration stays: %s", e)

    def apply(self, new: Config) -> None:
        """Switch to `new`, or raise (ConfigError naming the key, or the
        component's error) and change nothing."""
        for path in config_mod.restart_only_changes(self.config, new):
            line = new.where(path)
            raise ConfigError(new.file, line, ".".join(map(str, path)),
                              "changing it needs a restart (compiled into the loaded programs "
                              "or bound at start): systemctl restart hpccd")
        key = new.read_key()
        for name, comp in self.components.items():
            try:
                comp.check_config(new)
            except ConfigError:
                raise
            except Exception as e:
                raise ComponentError(f"component {name}: {e}") from None
        # -- nothing below may fail --
        self.flows.configure(new.max_flows, new.peer_names, config_mod.ALGORITHMS,
                             new.int_hop_series)
        if key != self.tag_key:
            for att in self.interfaces.values():
                att.xdp.map("hpccd_tag_key").update(0, key or bytes(16))
            self.tag_key = key
        logging.getLogger("hpccd").setLevel(new.log_level.upper())
        if self._ctx is not None:
            self._ctx.config = new
            self._ctx.tag_key = key
        for name, comp in self.components.items():
            try:
                comp.apply_config(new)
            except Exception:                       # the contract says it cannot; say so
                log.exception("component %s: apply_config failed", name)
        self.config = new
        self.reloads["ok"] += 1
        self.last_reload = (time.time(), True)
        self.last_reload_error = ""
        log.info("configuration applied from %s", new.file)

    # ---- control socket ----

    def _handle(self, cmd: str, args: dict) -> Any:
        try:
            fn = getattr(self, f"_cmd_{cmd}", None)
            if fn is None:                  # a component's command (hpccd.agent.component)
                comp = next((c for c in self.components.values()
                             if cmd in c.control_commands), None)
                if comp is None:
                    raise ControlError(f"{cmd}: no running component answers it (the "
                                       f"transport component answers send and transfer)")
                out = comp.control(cmd, args)
                # what the command started is published at the component's
                # own pace, not at an idle component's (poll's return)
                if comp.poll_interval is not None:
                    self._next_poll[comp.name] = min(self._next_poll[comp.name],
                                                     time.monotonic() + comp.poll_interval)
            else:
                out = fn(args)
        except Exception:
            self.control_requests[(cmd, "error")] += 1
            raise
        self.control_requests[(cmd, "ok")] += 1
        return out

    def _cmd_status(self, args: dict) -> dict[str, Any]:
        cfg = self.config
        ifaces = []
        for att in self.interfaces.values():
            xdp_id = bpf.xdp_query(att.ifindex)
            tc_id = bpf.tc_query(att.ifindex, "egress", TC_HANDLE, TC_PRIO) if att.tc else None
            own_xdp = att.xdp.program(XDP_PROG).id
            ifaces.append({
                "name": att.name, "ifindex": att.ifindex, "xdp_mode": att.xdp_mode,
                "xdp_prog_id": own_xdp, "xdp_attached": xdp_id == own_xdp,
                "tc_prog_id": att.tc.program(TC_PROG).id if att.tc else None,
                "tc_attached": (tc_id == att.tc.program(TC_PROG).id) if att.tc else None,
                "addresses": att.addresses, "queues": list(att.queues)})
        comps = {}
        for name, comp in self.components.items():
            try:
                comps[name] = {"healthy": comp.healthy(), **comp.status()}
            except Exception as e:
                comps[name] = {"healthy": False, "error": repr(e)}
        when, ok = self.last_reload
        return {
            "version": __version__, "pid": os.getpid(),
            "uptime_s": round(time.monotonic() - self.started, 3),
            "config": {"file": cfg.file, "default_algorithm": cfg.default_algorithm,
                       "probe_mode": cfg.probe_mode, "peers": list(cfg.peer_names),
                       "max_flows": cfg.max_flows, "metrics_address": cfg.metrics_address,
                       "control_socket": cfg.control_socket,
                       "integrity_key": self.tag_key is not None},
            "last_reload": {"time": when, "ok": ok, "error": self.last_reload_error,
                            "ok_count": self.reloads["ok"], "error_count": self.reloads["error"]},
            "interfaces": ifaces, "components": comps, "flows": len(self.flows),
            "flows_refused": self.flows.refused,
        }

    def _cmd_flows(self, args: dict) -> list[dict[str, Any]]:
        return [_flow_row(f) for f in sorted(self.flows.snapshot(), key=lambda f: f.id)]

    def _cmd_flow(self, args: dict) -> dict[str, Any]:
        try:
            fid = int(args.get("id"))
        except (TypeError, ValueError):
            raise ControlError(f"flow id {args.get('id')!r} is not a number") from None
        f = self.flows.get(fid)
        if f is None:
            raise ControlError(f"no flow {fid} (hpccctl flows lists them)")
        return f.to_dict()

    def _cmd_set(self, args: dict) -> dict[str, Any]:
        param, value = args.get("param"), args.get("value")
        if not isinstance(param, str) or not isinstance(value, str):
            raise ControlError('set needs "param" and "value" strings')
        try:
            new = config_mod.set_value(self.config, param, value)
            self.apply(new)
        except (ConfigError, ComponentError) as e:
            # A refused request (a typo, a value out of range) is not a failed
            # reload: the running configuration is the last one applied, and
            # hpccd_config_last_reload_successful stays as it was.  Counted in
            # hpccd_control_requests_total{command="set",result="error"}.
            log.info("set %s = %s refused: %s", param, value, e)
            raise ControlError(str(e)) from None
        self.notifier.status(self._status_line())
        return {"param": param, "value": value, "applied": True,
                "note": "until the next reload or restart (the file is unchanged)"}

    def _cmd_probes(self, args: dict) -> dict[str, Any]:
        cfg = self.config
        rows = [{"id": f.id, "kind": f.kind, "peer": f.peer, "daddr": f.daddr,
                 "dport": f.dport, "sent": f.probes_sent, "answered": f.probes_answered,
                 "lost": f.probes_lost, "probe_rtt_s": f.probe_rtt_s}
                for f in sorted(self.flows.snapshot(), key=lambda f: f.id)
                if f.probes_sent or f.probes_lost]
        xdp = {}
        names = ("tx_probe_resp_udp", "tx_probe_resp_tcp", "tcp_resp_stored", "drop_no_key",
                 "drop_tag_slot", "drop_tcp_probe_off", "drop_tcp_resp_tag",
                 "drop_tcp_resp_full", "drop_probe_rate")
        for att in self.interfaces.values():
            vals = bpf_counters.read(att.xdp.map("hpccd_xdp_cnt"))
            xdp[att.name] = {s.name: vals[s.index][0] for s in bpf_counters.XDP_SLOTS
                             if s.name in names}
        return {"mode": cfg.probe_mode, "timeout_us": cfg.probe_timeout_us,
                "reflect": cfg.reflect, "tcp_side": cfg.tcp_side, "flows": rows, "xdp": xdp}

    def _status_line(self) -> str:
        n = len(self.flows)
        s = (f"{n} flow{'s' if n != 1 else ''} on {', '.join(self.interfaces) or 'no interface'}"
             f"; {self.config.default_algorithm} by default")
        if self.last_reload_error:
            s += f"; last reload refused: {self.last_reload_error}"
        return s


def _flow_row(f) -> dict[str, Any]:
    return {"id": f.id, "kind": f.kind, "role": f.role, "algorithm": f.algorithm,
            "peer": f.peer, "saddr": f.saddr, "sport": f.sport, "daddr": f.daddr,
            "dport": f.dport, "window_bytes": f.window_bytes, "rate_bps": f.rate_bps,
            "U": f.U, "alpha": f.alpha, "cw_pkts": f.cw_pkts, "rtt_s": f.rtt_s,
            "bytes_sent": f.bytes_sent, "retx_packets": f.retx_packets,
            "age_s": round(time.monotonic() - f.started, 3)}


# ---- clean-up ----------------------------------------------------------------------

def cleanup(cfg: Config | None, classes: dict[str, type[Component]] | None = None,
            ifaces: list[str] | None = None) -> dict[str, Any]:
    """What a dead daemon left: hpccd_* XDP programs and tc filters on the
    interfaces (``cfg``'s, or `ifaces`), an empty clsact it made, and the
    components' own leftovers.  Pins and struct_ops are not the core's: it
    pins nothing, and struct_ops are host-wide (another daemon in another
    namespace may own them), so the TCP-side component handles its own."""
    names = ifaces if ifaces is not None else [i.name for i in cfg.interfaces] if cfg else []
    present, owned = [], []
    for n in names:
        try:
            ifindex = socket.if_nametoindex(n)
        except OSError:
            log.warning("clean-up: no interface %r here", n)
            continue
        o = ownership.owner(ifindex)
        if o is not None and o.pid != os.getpid():
            owned.append(f"{n}: {o.describe()}")    # live: not ours to touch
        else:
            present.append(ifindex)
    done = bpf.cleanup_stale(present, pin_dir=None, struct_ops=False)
    done["records"] = ownership.release(present, dead_only=True)
    done["owned"] = owned
    # The clsact qdisc tc_attach created, where a stale filter of ours was
    # removed and nothing else is left on it.
    for ifindex in sorted({ifindex for ifindex, _ in done["tc"]}):
        try:
            if bpf.tc_remove_clsact(ifindex, only_if_empty=True):
                done.setdefault("clsact", []).append(ifindex)
        except bpf.BpfError as e:
            if e.errno not in (errno.EINVAL, errno.ENOENT):
                raise
    for name, cls in (classes or {}).items():
        done[f"component:{name}"] = cls.cleanup_stale(cfg) if cfg else []
    removed = {k: v for k, v in done.items() if v and k != "owned"}
    if removed:
        log.warning("removed what a previous daemon left: %s", removed)
    return done


def _cleanup_command(cfg_path: str) -> int:
    cfg = None
    try:
        cfg = config_mod.load(cfg_path)
    except ConfigError as e:
        print(f"hpccd --cleanup: {e}; cleaning every interface of this namespace",
              file=sys.stderr)
    sock = cfg.control_socket if cfg else config_mod.DEFAULT_CONTROL_SOCKET
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(1.0)
        s.connect(sock)
    except OSError:
        pass
    else:
        print(f"hpccd --cleanup: a daemon answers on {sock}; not touching its programs",
              file=sys.stderr)
        return 1
    finally:
        s.close()
    ifaces = None if cfg else [n for _, n in socket.if_nameindex()]
    classes = {}
    if cfg:
        for name in cfg.components:
            try:
                classes[name] = load_class(name)
            except ComponentError as e:
                print(f"hpccd --cleanup: {e}", file=sys.stderr)
    done = cleanup(cfg, classes, ifaces)
    # The records of dead daemons whose namespace is gone, wherever it was.
    try:
        done["pruned"] = [f"net{o.netns}-if{o.ifindex} ({o.name}, pid {o.pid})"
                          for o in ownership.prune()]
    except OSError as e:
        print(f"hpccd --cleanup: owner records not pruned: {e}", file=sys.stderr)
    if os.path.exists(sock):
        try:
            os.unlink(sock)
            done["control_socket"] = [sock]
        except OSError as e:
            print(f"hpccd --cleanup: {sock}: {e.strerror}", file=sys.stderr)
    owned = done.pop("owned", [])
    for o in owned:
        print(f"hpccd --cleanup: left alone, a live daemon owns it: {o}", file=sys.stderr)
    # Not this namespace's leftovers: counted apart.
    pruned = done.pop("pruned", [])
    n = sum(len(v) for v in done.values())
    print(f"hpccd --cleanup: removed {n} leftover(s)"
          + (f": {({k: v for k, v in done.items() if v})}" if n else ""))
    if pruned:
        print(f"hpccd --cleanup: pruned {len(pruned)} owner record(s) of dead daemons whose "
              f"network namespace is gone: {pruned}")
    return 0


# ---- entry point ---------------------------------------------------------------------

class _JournalFormatter(logging.Formatter):
    """`<N>` priority prefixes, which journald turns into log levels."""

    PRIO = {logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4, logging.ERROR: 3,
            logging.CRITICAL: 2}

    def format(self, record: logging.LogRecord) -> str:
        return f"<{self.PRIO.get(record.levelno, 6)}>{super().format(record)}"


def _setup_logging(level: str) -> None:
    h = logging.StreamHandler(sys.stderr)
    if os.environ.get("JOURNAL_STREAM"):
        h.setFormatter(_JournalFormatter("%(name)s: %(message)s"))
    else:
        h.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("hpccd")
    root.handlers[:] = [h]
    root.setLevel(level.upper())
    root.propagate = False


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hpccd", description="INT-based congestion control "
                                "daemon (HPCC, HPCC++, DCTCP, LDCP). docs/configuration.md")
    p.add_argument("--config", default=config_mod.DEFAULT_PATH,
                   help=f"configuration file (default {config_mod.DEFAULT_PATH})")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--check", action="store_true",
                   help="validate the configuration (also the objects in daemon.bpf_dir "
                        "and the key file) and exit (status 2 if refused)")
    g.add_argument("--cleanup", action="store_true",
                   help="remove what a dead daemon left attached, then exit")
    p.add_argument("--version", action="version", version=f"hpccd {__version__}")
    return p


def main(argv: list[str] | None = None) -> int:
    return run_main("hpccd", _main, argv)


def _start_error(e: BaseException) -> str:
    """One line for a failed start: what failed and, when the kernel said no,
    what the daemon needs."""
    msg = str(e) or type(e).__name__
    if permission_denied(e):             # before a libbpf log, if one follows
        first, nl, rest = msg.partition("\n")
        msg = f"{first}; {privilege_hint('hpccd')}{nl}{rest}"
    return msg


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    _setup_logging("info")
    if args.cleanup:
        return _cleanup_command(args.config)
    try:
        cfg = config_mod.load(args.config)
    except ConfigError as e:
        print(f"hpccd: configuration refused: {e}", file=sys.stderr)
        return EXIT_CONFIG
    if args.check:
        try:
            if cfg.bpf_dir:
                find_bpf_dir(cfg)
            cfg.read_key()
        except ConfigError as e:
            print(f"hpccd: configuration refused: {e}", file=sys.stderr)
            return EXIT_CONFIG
        exposed = cfg.key_file_warning()
        if exposed:
            print(f"hpccd: warning: {exposed}", file=sys.stderr)
        print(f"{args.config}: ok")
        return 0
    _setup_logging(cfg.log_level)
    notifier = Notifier()
    d = Daemon(cfg, notifier)
    d._install_signals()
    code = 0
    try:
        try:
            d.start()
        except Exception as e:                      # whatever failed: undo, say why, exit
            log.error("start failed: %s", _start_error(e))
            log.debug("start failed", exc_info=True)   # log_level = "debug": where
            notifier.status(f"start failed: {e}")
            code = (EXIT_CONFIG if isinstance(e, (ConfigError, InterfaceOwnedError)) else
                    EXIT_NO_INTERFACE if isinstance(e, NoInterfaceError) else 1)
        else:
            d.run()
            log.info("stopping")
            notifier.stopping("stopping: detaching programs")
    except BaseException as e:
        log.error("fatal error: %s", _start_error(e))
        log.debug("fatal error", exc_info=True)
        code = 1
        raise
    finally:
        problems = d.stop()
        if problems:
            code = code or 1
        notifier.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
