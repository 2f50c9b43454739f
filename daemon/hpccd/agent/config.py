"""The daemon's configuration file (docs/configuration.md): load, validate, resolve.

``hpccd --config /etc/hpccd/hpccd.toml`` reads one TOML file.  :func:`load`
checks it against the schema of docs/configuration.md and returns a frozen
:class:`Config`; every failure raises :class:`ConfigError` naming the file,
the line and the key (hpccd.agent.tomlcheck, the same machinery as the topology
files).  Algorithm parameters are checked by the congestion-control core
itself (hpccd.core.cc raises ParamError naming the parameter), so the file is
refused for exactly the values the core would refuse, at the line of the
table that set them.

Per-peer policy.  ``[[peers]]`` entries give an IPv4 prefix a name (the
``peer`` label of the metrics), an algorithm, parameter overrides and
whether the hosts of that prefix are DCTCP endpoints.  For an address the
most specific entry that sets a key decides it (longest prefix match, per
key); an address no entry covers is peer ``"default"``.  DCTCP has no
negotiation and must only be used between DCTCP endpoints ([DCTCP]
section 4): a file in which any address would get DCTCP without being
declared a DCTCP endpoint is refused, at the ``algorithm`` key that gave
it DCTCP, with an example address.

Restart-only keys.  What is compiled into the loaded BPF programs or bound
at start (interfaces, port, DSCP, sockets, UMEM ...) cannot change on a
reload: :func:`restart_only_changes` lists those that differ, and the
daemon refuses such a reload (keeping the running configuration).
"""
from __future__ import annotations

import copy
import dataclasses
import ipaddress
import os
import re
import tomllib
from typing import Any, Iterable, Mapping

from .._cc import lib as _cc_lib
from ..core import algorithms, cc
from .tomlcheck import TomlError, Validator, key_name

__all__ = ["ConfigError", "Config", "Interface", "Peer", "Policy", "load", "loads",
           "from_dict", "restart_only_changes", "set_value", "ALGORITHMS",
           "RESTART_ONLY", "DEFAULT_PATH"]

DEFAULT_PATH = "/etc/hpccd/hpccd.toml"
# Distinct from /run/hpccd, which holds the lab's state files (docs/lab.md).
DEFAULT_CONTROL_SOCKET = "/run/hpccd-daemon/control.sock"
DEFAULT_METRICS_ADDRESS = "127.0.0.1:9477"
UDP_PORT_DEFAULT = _cc_lib.HPCCD_UDP_PORT_DEFAULT        # include/hpccd/wire.h
PROBE_DSCP_DEFAULT = _cc_lib.HPCCD_PROBE_DSCP_DEFAULT
XSKS_MAX = _cc_lib.HPCCD_XSKS_MAX   # rx queues per interface (include/hpccd/kern_user.h)
# UMEM frame sizes the engine takes (include/hpccd/transport.h)
FRAME_SIZES = (_cc_lib.HPCCD_TP_FRAME_MIN, _cc_lib.HPCCD_TP_FRAME_MAX)
TOP_FLOWS_MAX = 50
DEFAULT_PEER = "default"

ALGORITHMS = algorithms.NAMES
# Which parameter table an algorithm reads (hpccd.core.algorithms).
PARAM_TABLE = {a.name: a.table for a in algorithms.ALGORITHMS.values()}
# Per parameter table its first algorithm: the core's class whose keys the table takes,
# and whose flow checks the table's values.
_TABLE_ALGO = {t: next(a for a in algorithms.ALGORITHMS.values() if a.table == t)
               for t in PARAM_TABLE.values()}
PARAM_KEYS: dict[str, dict[str, type]] = {t: a.flow_class.PARAMS for t, a in _TABLE_ALGO.items()}
PROBE_MODES = ("inband", "probe")
XDP_MODES = ("auto", "native", "skb")
LOG_LEVELS = ("debug", "info", "warning", "error")
COMPONENTS = ("transport", "tcp_side")
COMPONENT_REF = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")   # outside the package
PEER_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
IFNAME = re.compile(r"[^\s/:]{1,15}")

_TOP = ("daemon", "interfaces", "transport", "probes", "algorithm", "hpcc", "dctcp", "ldcp",
        "dcqcn", "timely",
        "peers", "metrics", "limits", "tcp_side")
_DAEMON = ("log_level", "control_socket", "metrics_address", "bpf_dir", "components")
_IFACE = ("name", "xdp_mode", "queues", "cpus", "tc_tracker")
_TRANSPORT = ("udp_port", "probe_dscp", "integrity_key_file", "frame_bytes", "ack_every",
              "rx_notify", "tx_csum_offload")
UMEM_BYTES_DEFAULT = 16 << 20       # limits.umem_bytes: an engine's UMEM per queue
ENGINE_FRAMES_MIN = 256             # 64 RX + 128 TX frames at least (transport.c), halved
_PROBES = ("mode", "inband_every", "timeout_us", "tcp_side", "reflect", "reflect_rate",
           "reflect_burst")
_ALGORITHM = ("default",)
_PEER = ("name", "prefix", "algorithm", "dctcp_endpoint", "hpcc", "dctcp", "ldcp", "dcqcn",
         "timely")
_METRICS = ("top_flows", "int_hop_series")
_LIMITS = ("max_flows", "umem_bytes")
_TCP_SIDE = ("t_from_rtt", "t_rtt_factor", "probe_gap_rtt", "cwnd_rtt_gain", "stale_ms",
             "gso_max_segs", "host_cap_t", "path_rate_gain", "solo_rate_gain", "path_rate_shared",
             "path_rate_work_conserving", "app_limited_hold", "pace_gain_max",
             "trains_from_pacer", "wake_lead")

# Keys that need a restart: compiled into the BPF programs (port, DSCP,
# flags), bound at start (interfaces, sockets, UMEM) or choosing code.
RESTART_ONLY: tuple[tuple, ...] = (
    ("daemon", "control_socket"), ("daemon", "metrics_address"), ("daemon", "bpf_dir"),
    ("daemon", "components"), ("interfaces",), ("transport", "udp_port"),
    ("transport", "probe_dscp"), ("transport", "frame_bytes"), ("probes", "tcp_side"),
    ("probes", "reflect"), ("probes", "reflect_rate"), ("probes", "reflect_burst"),
    ("limits", "umem_bytes"), ("transport", "ack_every"),
    ("transport", "rx_notify"), ("transport", "tx_csum_offload"),
    *(("tcp_side", k) for k in _TCP_SIDE),
)


class ConfigError(TomlError):
    """The configuration breaks the schema; ``file``, ``line``, ``key`` say where."""


@dataclasses.dataclass(frozen=True)
class Interface:
    name: str
    xdp_mode: str               # auto | native | skb ("auto": skb on veth, else native)
    queues: tuple[int, ...]     # rx queues the native transport binds AF_XDP sockets on
    tc_tracker: bool            # attach tc_tracker on egress (kernel TCP flows)
    cpus: tuple[int, ...] = ()  # the CPU of each queue's engine thread; (): any


@dataclasses.dataclass(frozen=True)
class TcpSideOptions:
    """[tcp_side]: the TCP-side probe engine's options (hpccd.tcp_side.engine.TcpSide,
    docs/tcp-side.md)."""
    t_from_rtt: bool = True         # each flow's T from its measured RTTs ([HPCC] 5.1)
    t_rtt_factor: float = 1.25      # T = factor x max(hpcc.T_ns, least probe RTT, least srtt)
    probe_gap_rtt: float = 1.0      # next probe not sooner than this x the flow's srtt
    cwnd_rtt_gain: float = 1.5      # cwnd = W + R x min(srtt - probe RTT, T) x this; 0: cwnd = W
    stale_ms: int = 100             # the CC falls back to Reno on a W or heartbeat this old
    gso_max_segs: int = 0           # cap of the tc_tracker interface's GSO trains; 0: leave it
    host_cap_t: float = 1.0         # the hosts' share in cwnd counts at most this x T
    path_rate_gain: float = 1.0     # R at most this x the path's slowest link
    solo_rate_gain: float = 1.0     # ... for a flow alone on its path (the kernel's pacer)
    path_rate_shared: bool = True   # one host's flows on one path: their R summed at most that
    path_rate_work_conserving: bool = False  # ... and a flow's unused part lent to the others
    app_limited_hold: bool = False  # W not raised from an interval the flow left it unused
    pace_gain_max: float = 1.0      # pacing rate up to this x R, following the pacer's loss
    trains_from_pacer: bool = False  # gso_max_segs set again from the pacer's lateness
    wake_lead: bool = True          # probe-gap timers armed early by the engine's wake lateness

    def kwargs(self) -> dict[str, Any]:
        """Keyword arguments of TcpSide."""
        return {"t_from_rtt": self.t_from_rtt, "t_rtt_factor": self.t_rtt_factor,
                "probe_gap_rtt": self.probe_gap_rtt, "cwnd_rtt_gain": self.cwnd_rtt_gain,
                "stale_ns": self.stale_ms * 1_000_000, "gso_max_segs": self.gso_max_segs,
                "host_cap_t": self.host_cap_t, "path_rate_gain": self.path_rate_gain,
                "solo_rate_gain": self.solo_rate_gain,
                "path_rate_shared": self.path_rate_shared,
                "path_rate_work_conserving": self.path_rate_work_conserving,
                "app_limited_hold": self.app_limited_hold,
                "pace_gain_max": self.pace_gain_max,
                "trains_from_pacer": self.trains_from_pacer, "wake_lead": self.wake_lead}


@dataclasses.dataclass(frozen=True)
class Peer:
    name: str
    prefix: ipaddress.IPv4Network
    algorithm: str | None       # None: not set here (a less specific entry decides)
    dctcp_endpoint: bool | None
    params: Mapping[str, Mapping[str, Any]]    # table -> overrides set here
    line: int | None = None


@dataclasses.dataclass(frozen=True)
class Policy:
    """What a flow toward one address runs: ``algorithm`` with ``params``
    (keyword arguments of hpccd.core.cc's class), ``peer`` its metrics label."""

    peer: str
    algorithm: str
    params: Mapping[str, Any]
    dctcp_endpoint: bool

    def make_flow(self) -> Any:
        """A fresh per-flow state of the congestion-control core."""
        return algorithms.make_flow(self.algorithm, **self.params)


@dataclasses.dataclass(frozen=True)
class Config:
    file: str
    text: str
    raw: Mapping[str, Any]              # the document as parsed (for `set`)
    log_level: str
    control_socket: str
    metrics_address: str                # "" = no exporter
    bpf_dir: str                        # "" = search (daemon.find_bpf_dir)
    components: tuple[str, ...]
    interfaces: tuple[Interface, ...]
    udp_port: int
    probe_dscp: int
    integrity_key_file: str             # "" = none (probes are then dropped, counted)
    frame_bytes: int
    ack_every: int                      # native receivers: an ACK every m packets
    rx_notify: bool                     # native receivers: Rx-HPCC windows in ACKs, once per T
    tx_csum_offload: bool               # native senders: DATA's UDP checksum left to the device
    probe_mode: str
    inband_every: int
    probe_timeout_us: int
    tcp_side: bool
    reflect: bool
    reflect_rate: int                   # PROBEs answered per second per source (0: no limit)
    reflect_burst: int
    default_algorithm: str
    params: Mapping[str, Mapping[str, Any]]   # table -> global values set in the file
    peers: tuple[Peer, ...]                   # most specific prefix first
    top_flows: int
    int_hop_series: int
    max_flows: int
    umem_bytes: int
    tcp_side_opts: TcpSideOptions = TcpSideOptions()

    # ---- policy ----

    def policy(self, address: str | ipaddress.IPv4Address,
               algorithm: str | None = None) -> Policy:
        """The algorithm, parameters and peer label of flows toward `address`
        (with `algorithm` instead of the one configured for it: its table's
        merged parameters)."""
        a = ipaddress.IPv4Address(address)
        covering = [p for p in self.peers if a in p.prefix]     # most specific first
        return _policy(self, covering, algorithm)

    @property
    def peer_names(self) -> tuple[str, ...]:
        """Every value the metrics' ``peer`` label can take."""
        return tuple(p.name for p in self.peers) + (DEFAULT_PEER,)

    def read_key(self) -> bytes | None:
        """The 16-byte integrity key from ``integrity_key_file`` (16 raw bytes,
        or 32 hex digits with optional whitespace), or None when none is set.
        Raises ConfigError naming the key on an unreadable or malformed file."""
        if not self.integrity_key_file:
            return None
        return _read_key(self.integrity_key_file,
                         lambda msg: _fail_at(self, ("transport", "integrity_key_file"), msg))

    def where(self, path: tuple) -> int | None:
        return Validator(self.text, self.file).index.line(path)

    def key_file_warning(self) -> str | None:
        """Why ``integrity_key_file`` is not private (another user may read or
        replace it, and with it forge tags), or None."""
        if not self.integrity_key_file:
            return None
        try:
            st = os.stat(self.integrity_key_file)
        except OSError:
            return None                 # read_key says why it cannot be read
        mode = st.st_mode & 0o777
        if not mode & 0o066:
            return None
        who = "every user" if mode & 0o006 else "its group"
        line = self.where(("transport", "integrity_key_file"))
        at = f"{self.file}:{line}: " if line else ""
        return (f"{at}transport.integrity_key_file: {self.integrity_key_file} is readable or "
                f"writable by {who} (mode {mode:04o}): whoever reads it can forge tags; "
                f"chmod 600 {self.integrity_key_file}")


def _fail_at(cfg: Config, path: tuple, msg: str):
    raise ConfigError(cfg.file, cfg.where(path), key_name(path), msg)


def _read_key(path: str, fail) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read(4096)
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}")
    text = re.sub(rb"\s+", b"", data)
    if len(data) == 16:
        key = data
    elif re.fullmatch(rb"[0-9a-fA-F]{32}", text):
        key = bytes.fromhex(text.decode())
    else:
        fail(f"{path}: expected 16 raw bytes or 32 hex digits, found {len(data)} bytes")
    if key == bytes(16):
        fail(f"{path}: an all-zero key means 'not configured' to the XDP program")
    return key


def _policy(cfg: Config, covering: list[Peer], algo: str | None = None) -> Policy:
    """The policy of addresses covered by `covering` (most specific first);
    `algo` instead of the algorithm they would get (to check parameters)."""
    if algo is None:
        algo = next((p.algorithm for p in covering if p.algorithm is not None),
                    cfg.default_algorithm)
    endpoint = next((p.dctcp_endpoint for p in covering if p.dctcp_endpoint is not None),
                    False)
    table = PARAM_TABLE[algo]
    params = dict(cfg.params.get(table, {}))
    for p in reversed(covering):                # least specific first, so specific wins
        params.update(p.params.get(table, {}))
    peer = covering[0].name if covering else DEFAULT_PEER
    return Policy(peer, algo, params, endpoint)


# ---- loading ------------------------------------------------------------------------

def load(path: str | os.PathLike) -> Config:
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(path, None, None, f"cannot read: {e}") from None
    return loads(text, path)


def loads(text: str, file: str = "<string>") -> Config:
    v = _Validator(text, file)
    return v.config(v.parse())


def from_dict(doc: Mapping[str, Any], file: str, text: str = "") -> Config:
    """Validate an already parsed document (``hpccctl set``: the running
    file's document with one value changed).  Lines are looked up in `text`."""
    return _Validator(text, file).config(copy.deepcopy(dict(doc)))


def set_value(cfg: Config, param: str, value: str) -> Config:
    """The running configuration with one key changed: `param` is a dotted
    key (``hpcc.eta``, ``algorithm.default``, ``peers.rack2.algorithm`` -
    a peer by name), `value` a TOML value (``0.9``, ``"dctcp"``, ``true``;
    a bare word is taken as a string).  Validated like the file; a refusal
    raises ConfigError naming the key."""
    try:
        val = tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        val = value
    doc = copy.deepcopy(dict(cfg.raw))
    parts = param.split(".")
    where = f"set {param}"
    if len(parts) < 2 or not all(parts):
        raise ConfigError(where, None, param, "expected TABLE.KEY (e.g. hpcc.eta)")
    path: list[Any] = []
    node: Any = doc
    i = 0
    while i < len(parts) - 1:
        k = parts[i]
        if k == "peers" and path == []:
            name = parts[i + 1] if i + 1 < len(parts) - 1 else None
            peers = node.get("peers", [])
            idx = next((j for j, p in enumerate(peers)
                        if isinstance(p, dict) and p.get("name") == name), None)
            if idx is None:
                raise ConfigError(where, None, param, f"no [[peers]] entry named {name!r} "
                                  f"(peers.NAME.KEY)")
            node = peers[idx]
            path += ["peers", idx]
            i += 2
            continue
        if k == "interfaces":
            raise ConfigError(where, None, param, "interfaces need a restart")
        nxt = node.setdefault(k, {})
        if not isinstance(nxt, dict):
            raise ConfigError(where, None, param, f"{k} is not a table")
        node = nxt
        path.append(k)
        i += 1
    node[parts[-1]] = val
    path.append(parts[-1])
    new = from_dict(doc, where)
    changed = restart_only_changes(cfg, new)
    if changed:
        raise ConfigError(where, None, param, "needs a restart (compiled into the loaded "
                                              "programs or bound at start)")
    return dataclasses.replace(new, file=cfg.file, text=cfg.text)


def restart_only_changes(old: Config, new: Config) -> list[tuple]:
    """The RESTART_ONLY keys whose values differ between two configurations."""
    out = []
    for path in RESTART_ONLY:
        if _get(old.raw, path) != _get(new.raw, path):
            out.append(path)
    return out


def _get(doc: Mapping[str, Any], path: tuple) -> Any:
    node: Any = doc
    for p in path:
        if not isinstance(node, Mapping) or p not in node:
            return None
        node = node[p]
    return node


class _Validator(Validator):
    error = ConfigError

    def config(self, doc: dict) -> Config:
        self.keys(doc, (), _TOP)
        d = self.keys(doc.get("daemon", {}), ("daemon",), _DAEMON)
        p = ("daemon",)
        log_level = self.str_(d, p, "log_level", "info", LOG_LEVELS)
        control = self.str_(d, p, "control_socket", DEFAULT_CONTROL_SOCKET)
        if not os.path.isabs(control):
            self.fail(p + ("control_socket",), f"{control!r} is not an absolute path")
        if len(os.fsencode(control)) > 107:
            self.fail(p + ("control_socket",), "longer than a Unix socket path may be (107)")
        metrics = self.str_(d, p, "metrics_address", DEFAULT_METRICS_ADDRESS)
        if metrics:
            self.address(metrics, p + ("metrics_address",))
        bpf_dir = self.str_(d, p, "bpf_dir", "")
        components = self.str_list(d, p, "components", ())
        for i, c in enumerate(components):
            if c not in COMPONENTS and not COMPONENT_REF.fullmatch(c):
                self.fail(p + ("components",), f"{c!r} is not a component "
                                               f"({', '.join(COMPONENTS)}, or "
                                               f"'package.module:Class')")
            if c in components[:i]:
                self.fail(p + ("components",), f"{c!r} is listed twice")

        ifaces = self.interfaces(doc)

        t = self.keys(doc.get("transport", {}), ("transport",), _TRANSPORT)
        p = ("transport",)
        udp_port = self.int_(t, p, "udp_port", UDP_PORT_DEFAULT, lo=1, hi=65535)
        dscp = self.int_(t, p, "probe_dscp", PROBE_DSCP_DEFAULT, lo=1, hi=63)
        key_file = self.str_(t, p, "integrity_key_file", "")
        if key_file:
            if not os.path.isabs(key_file):
                self.fail(p + ("integrity_key_file",), f"{key_file!r} is not an absolute path")
            _read_key(key_file, lambda msg: self.fail(p + ("integrity_key_file",), msg))
        frame = self.int_(t, p, "frame_bytes", 4096)
        if frame not in FRAME_SIZES:
            self.fail(p + ("frame_bytes",), f"{frame}: the engine's UMEM frame size is "
                                            f"{' or '.join(map(str, FRAME_SIZES))}")
        ack_every = self.int_(t, p, "ack_every", 1, lo=1, hi=64)
        rx_notify = self.bool_(t, p, "rx_notify", True)
        csum_offload = self.bool_(t, p, "tx_csum_offload", True)

        pr = self.keys(doc.get("probes", {}), ("probes",), _PROBES)
        p = ("probes",)
        mode = self.str_(pr, p, "mode", "probe", PROBE_MODES)
        every = self.int_(pr, p, "inband_every", 1, lo=1, hi=1 << 16)
        timeout = self.int_(pr, p, "timeout_us", 1000, lo=10, hi=10_000_000)
        tcp_side = self.bool_(pr, p, "tcp_side", True)
        reflect = self.bool_(pr, p, "reflect", True)
        reflect_rate = self.int_(pr, p, "reflect_rate", 100_000, lo=0, hi=1_000_000_000)
        reflect_burst = self.int_(pr, p, "reflect_burst", 256, lo=1, hi=1 << 20)

        a = self.keys(doc.get("algorithm", {}), ("algorithm",), _ALGORITHM)
        default = self.str_(a, ("algorithm",), "default", "hpcc", ALGORITHMS)
        params = {tbl: self.param_table(doc, (tbl,), tbl) for tbl in PARAM_KEYS}
        peers = self.peers(doc)

        m = self.keys(doc.get("metrics", {}), ("metrics",), _METRICS)
        top = self.int_(m, ("metrics",), "top_flows", 0, lo=0, hi=TOP_FLOWS_MAX)
        hop_series = self.int_(m, ("metrics",), "int_hop_series", 64, lo=0, hi=4096)
        ts = self.keys(doc.get("tcp_side", {}), ("tcp_side",), _TCP_SIDE)
        p = ("tcp_side",)
        d = TcpSideOptions()
        tcp_opts = TcpSideOptions(
            t_from_rtt=self.bool_(ts, p, "t_from_rtt", d.t_from_rtt),
            t_rtt_factor=self.float_(ts, p, "t_rtt_factor", d.t_rtt_factor, lo=1.0, hi=16.0),
            probe_gap_rtt=self.float_(ts, p, "probe_gap_rtt", d.probe_gap_rtt, lo=0.0, hi=16.0),
            cwnd_rtt_gain=self.float_(ts, p, "cwnd_rtt_gain", d.cwnd_rtt_gain, lo=0.0, hi=16.0),
            stale_ms=self.int_(ts, p, "stale_ms", d.stale_ms, lo=1, hi=60_000),
            gso_max_segs=self.int_(ts, p, "gso_max_segs", d.gso_max_segs, lo=0, hi=65535),
            host_cap_t=self.float_(ts, p, "host_cap_t", d.host_cap_t, lo=0.0, hi=64.0),
            path_rate_gain=self.float_(ts, p, "path_rate_gain", d.path_rate_gain, lo=0.1,
                                       hi=4.0),
            solo_rate_gain=self.float_(ts, p, "solo_rate_gain", d.solo_rate_gain, lo=0.1,
                                       hi=4.0),
            path_rate_shared=self.bool_(ts, p, "path_rate_shared", d.path_rate_shared),
            path_rate_work_conserving=self.bool_(ts, p, "path_rate_work_conserving",
                                                 d.path_rate_work_conserving),
            app_limited_hold=self.bool_(ts, p, "app_limited_hold", d.app_limited_hold),
            pace_gain_max=self.float_(ts, p, "pace_gain_max", d.pace_gain_max, lo=1.0, hi=4.0),
            trains_from_pacer=self.bool_(ts, p, "trains_from_pacer", d.trains_from_pacer),
            wake_lead=self.bool_(ts, p, "wake_lead", d.wake_lead))
        if tcp_opts.path_rate_work_conserving and not tcp_opts.path_rate_shared:
            self.fail(("tcp_side", "path_rate_work_conserving"),
                      "needs tcp_side.path_rate_shared = true (it lends the part of the shared "
                      "path rate a flow leaves unused)")
        lim = self.keys(doc.get("limits", {}), ("limits",), _LIMITS)
        max_flows = self.int_(lim, ("limits",), "max_flows", 4096, lo=1, hi=1 << 20)
        umem = self.int_(lim, ("limits",), "umem_bytes", UMEM_BYTES_DEFAULT, lo=2 * frame,
                         hi=1 << 34)
        if umem % frame:
            self.fail(("limits", "umem_bytes"), f"{umem} is not a multiple of "
                                                f"transport.frame_bytes ({frame})")
        if "transport" in components and not any(i.queues for i in ifaces):
            self.fail(("daemon", "components"), "the transport needs an interface with queues")
        if "transport" in components and umem // frame < ENGINE_FRAMES_MIN:
            self.fail(("limits", "umem_bytes"), f"{umem} bytes are {umem // frame} frames of "
                                                f"{frame}: the transport needs at least "
                                                f"{ENGINE_FRAMES_MIN} per queue")

        cfg = Config(file=self.file, text=self.text, raw=doc, log_level=log_level,
                     control_socket=control, metrics_address=metrics, bpf_dir=bpf_dir,
                     components=tuple(components), interfaces=ifaces, udp_port=udp_port,
                     probe_dscp=dscp, integrity_key_file=key_file, frame_bytes=frame,
                     ack_every=ack_every, rx_notify=rx_notify,
                     tx_csum_offload=csum_offload, probe_mode=mode, inband_every=every, probe_timeout_us=timeout,
                     tcp_side=tcp_side, reflect=reflect, reflect_rate=reflect_rate,
                     reflect_burst=reflect_burst, default_algorithm=default,
                     params=params, peers=peers, top_flows=top, int_hop_series=hop_series,
                     max_flows=max_flows, umem_bytes=umem, tcp_side_opts=tcp_opts)
        self.check_policies(cfg, doc)
        return cfg

    # -- pieces --

    def address(self, s: str, path: tuple) -> tuple[str, int]:
        host, sep, port = s.rpartition(":")
        if not sep or not port.isdigit() or not 0 < int(port) < 65536:
            self.fail(path, f"{s!r}: expected HOST:PORT (e.g. 127.0.0.1:9477)")
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        try:
            ipaddress.ip_address(host)
        except ValueError:
            self.fail(path, f"{host!r} is not an IP address")
        return host, int(port)

    def str_list(self, t: dict, p: tuple, key: str, default: tuple) -> list[str]:
        if key not in t:
            return list(default)
        v = t[key]
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            self.fail(p + (key,), f"must be an array of strings, not {v!r}")
        return v

    def interfaces(self, doc: dict) -> tuple[Interface, ...]:
        out = []
        seen: dict[str, int] = {}
        for i, t in enumerate(self.array(doc, "interfaces")):
            p = ("interfaces", i)
            self.keys(t, p, _IFACE)
            name = self.str_(t, p, "name")
            if not IFNAME.fullmatch(name):
                self.fail(p + ("name",), f"{name!r} is not an interface name")
            if name in seen:
                self.fail(p + ("name",), f"{name!r} is also interfaces[{seen[name]}]")
            seen[name] = i
            mode = self.str_(t, p, "xdp_mode", "auto", XDP_MODES)
            queues = t.get("queues", [0])
            if (not isinstance(queues, list) or
                    not all(isinstance(q, int) and not isinstance(q, bool) for q in queues)):
                self.fail(p + ("queues",), f"must be an array of rx queue numbers, "
                                           f"not {queues!r}")
            for q in queues:
                if not 0 <= q < XSKS_MAX:
                    self.fail(p + ("queues",), f"queue {q} is out of range (0..{XSKS_MAX - 1})")
            if len(set(queues)) != len(queues):
                self.fail(p + ("queues",), "a queue is listed twice")
            tracker = self.bool_(t, p, "tc_tracker", True)
            cpus = t.get("cpus", [])
            if (not isinstance(cpus, list) or
                    not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0
                            for c in cpus)):
                self.fail(p + ("cpus",), f"must be an array of CPU numbers, not {cpus!r}")
            if cpus and len(cpus) != len(queues):
                self.fail(p + ("cpus",), f"{len(cpus)} CPUs for {len(queues)} queues: one "
                                         f"per queue, in the order of queues")
            ncpu = os.cpu_count() or 1
            for c in cpus:
                if c >= ncpu:
                    self.fail(p + ("cpus",), f"CPU {c}: this machine has CPUs 0..{ncpu - 1}")
            out.append(Interface(name, mode, tuple(queues), tracker, tuple(cpus)))
        if not out:
            self.fail(("interfaces",), "no [[interfaces]]: the daemon needs at least one")
        return tuple(out)

    def param_table(self, t: dict, p: tuple, table: str) -> dict[str, Any]:
        if table not in t:
            return {}
        spec = PARAM_KEYS[table]
        vals = self.keys(t[table], p, tuple(spec))
        for k, v in vals.items():
            kind = spec[k]
            if kind is int:
                self.int_(vals, p, k, lo=0)
            else:
                self.float_(vals, p, k)
        if table == "hpcc" and "w_ai_bytes" in vals and "N_flows" in vals:
            self.fail(p + ("N_flows",), "set W_AI either directly (w_ai_bytes) or through "
                                        "N (N_flows: W_AI = W_init (1 - eta) / N), not both")
        return dict(vals)

    def peers(self, doc: dict) -> tuple[Peer, ...]:
        out = []
        names: dict[str, int] = {}
        prefixes: dict[ipaddress.IPv4Network, int] = {}
        for i, t in enumerate(self.array(doc, "peers")):
            p = ("peers", i)
            self.keys(t, p, _PEER)
            name = self.str_(t, p, "name")
            if not PEER_NAME.fullmatch(name) or name == DEFAULT_PEER:
                self.fail(p + ("name",), f"{name!r} is not a peer name ({PEER_NAME.pattern}, "
                                         f"not {DEFAULT_PEER!r})")
            if name in names:
                self.fail(p + ("name",), f"{name!r} is also peers[{names[name]}]'s name")
            names[name] = i
            s = self.str_(t, p, "prefix")
            try:
                net = ipaddress.IPv4Network(s)
            except ValueError as e:
                self.fail(p + ("prefix",), f"{s!r} is not an IPv4 prefix: {e}")
            if net in prefixes:
                self.fail(p + ("prefix",), f"{net} is also peers[{prefixes[net]}]'s prefix")
            prefixes[net] = i
            algo = self.str_(t, p, "algorithm", "", ALGORITHMS) if "algorithm" in t else None
            ep = self.bool_(t, p, "dctcp_endpoint") if "dctcp_endpoint" in t else None
            params = {tbl: self.param_table(t, p + (tbl,), tbl)
                      for tbl in PARAM_KEYS if tbl in t}
            out.append(Peer(name, net, algo, ep, params, self.index.line(p)))
        out.sort(key=lambda q: -q.prefix.prefixlen)
        return tuple(out)

    def check_policies(self, cfg: Config, doc: dict) -> None:
        """Every region of the address space (atoms of the prefix tree) gets
        a policy that the core accepts, and DCTCP only toward DCTCP endpoints."""
        pos = {t["name"]: j for j, t in enumerate(doc.get("peers", []))}
        nets = [p.prefix for p in cfg.peers]
        for region in [ipaddress.IPv4Network("0.0.0.0/0"), *nets]:
            covering = [p for p in cfg.peers if region.subnet_of(p.prefix)]
            inner = [n for n in nets if n != region and n.subnet_of(region)]
            example = _atom_example(region, inner)
            if example is None:                 # wholly covered by more specific entries
                continue
            pol = _policy(cfg, covering)
            decider = next((p for p in covering if p.algorithm is not None), None)
            algo_path = (("peers", pos[decider.name], "algorithm") if decider
                         else ("algorithm", "default"))
            if pol.algorithm == "dctcp" and not pol.dctcp_endpoint:
                self.fail(algo_path, f"DCTCP toward {example} ({pol.peer} peers), which is not "
                                     f"declared a DCTCP endpoint: DCTCP must only be used "
                                     f"between DCTCP endpoints ([DCTCP] section 4); set "
                                     f"dctcp_endpoint = true on a [[peers]] entry covering it")
            # Every table that reaches this region, whether or not its
            # algorithm is the one in use now (`hpccctl set` may switch).
            for a in _TABLE_ALGO.values():
                self.check_params(cfg, _policy(cfg, covering, a.name), covering, pos)

    def check_params(self, cfg: Config, pol: Policy, covering: list[Peer],
                     pos: dict[str, int]) -> None:
        try:
            pol.make_flow()
        except cc.ParamError as e:
            table = PARAM_TABLE[pol.algorithm]
            setter = next((p for p in covering if e.key in p.params.get(table, {})), None)
            if setter is not None:
                path = ("peers", pos[setter.name], table, e.key)
            elif e.key in cfg.params.get(table, {}):
                path = (table, e.key)
            else:
                path = (table,)
            self.fail(path, f"{e} (for {pol.algorithm}, peer {pol.peer})")


def _atom_example(region: ipaddress.IPv4Network,
                  inner: Iterable[ipaddress.IPv4Network]) -> ipaddress.IPv4Address | None:
    """An address of `region` outside every network of `inner` (its
    subnets), or None when they cover it all."""
    rest = [region]
    for n in sorted(inner, key=lambda x: x.prefixlen):
        nxt = []
        for r in rest:
            if n.subnet_of(r):
                nxt.extend(r.address_exclude(n))
            elif r.subnet_of(n):
                continue
            else:
                nxt.append(r)
        rest = nxt
        if not rest:
            return None
    return min(rest, key=lambda r: r.network_address).network_address if rest else None
