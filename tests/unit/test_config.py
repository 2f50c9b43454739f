"""The daemon's configuration (hpccd.agent.config, docs/configuration.md).

Invariants protected:
- every refusal names the file, the line and the key at fault, for schema
  errors, for values the congestion-control core refuses (found by the core
  itself), and for the DCTCP rule;
- DCTCP is never the policy toward an address not declared a DCTCP endpoint
  ([DCTCP] section 4), however the prefixes nest;
- per-peer policy is the most specific entry per key; parameters merge;
- `hpccctl set` goes through the same validation and refuses keys that
  need a restart;
- the example file and docs/configuration.md cover every key of the schema.
"""
from __future__ import annotations

import ipaddress
import pathlib
import os
import re
import textwrap

import pytest

from hpccd.agent import config
from hpccd.agent.config import ConfigError

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "systemd" / "hpccd.toml"
DOC = ROOT / "docs" / "configuration.md"

BASE = """\
[[interfaces]]
name = "eth0"
"""


def _err(text: str, file: str = "hpccd.toml") -> ConfigError:
    with pytest.raises(ConfigError) as ei:
        config.loads(textwrap.dedent(text), file)
    return ei.value


def _line_of(text: str, needle: str, nth: int = 0) -> int:
    lines = [i for i, ln in enumerate(textwrap.dedent(text).splitlines(), 1) if needle in ln]
    return lines[nth]


@pytest.fixture
def keyfile(tmp_path):
    p = tmp_path / "tag.key"
    p.write_text("00112233445566778899aabbccddeeff\n")
    return p


def test_minimal_file_gets_the_documented_defaults():
    c = config.loads(BASE)
    assert c.interfaces == (config.Interface("eth0", "auto", (0,), True),)
    assert (c.udp_port, c.probe_dscp) == (18471, 45)
    assert c.control_socket == "/run/hpccd-daemon/control.sock"
    assert not c.control_socket.startswith("/run/hpccd/")     # the lab's state directory
    assert c.metrics_address == "127.0.0.1:9477"
    assert (c.probe_mode, c.probe_timeout_us, c.tcp_side, c.reflect) == ("probe", 1000, True, True)
    assert (c.reflect_rate, c.reflect_burst) == (100_000, 256)       # HPCCD_PROBE_*_DEFAULT
    assert c.default_algorithm == "hpcc"
    assert (c.max_flows, c.umem_bytes, c.frame_bytes) == (4096, 16 << 20, 4096)
    assert (c.top_flows, c.int_hop_series) == (0, 64)
    assert c.read_key() is None
    pol = c.policy("10.0.0.1")
    assert (pol.peer, pol.algorithm, dict(pol.params)) == ("default", "hpcc", {})


# (description, file text, the line's marker, key, part of the message)
CASES = [
    ("unknown top-level table", BASE + "[transprot]\nudp_port = 1\n", "[transprot]",
     "transprot", "unknown key"),
    ("no interfaces", "[daemon]\nlog_level = \"info\"\n", None, "interfaces",
     "at least one"),
    ("duplicate interface", BASE + "[[interfaces]]\nname = \"eth0\"\n", ('name = "eth0"', 1),
     "interfaces[1].name", "also interfaces[0]"),
    ("queue out of range", BASE + "queues = [0, 64]\n", "queues", "interfaces[0].queues",
     "out of range"),
    ("xdp mode", BASE + "xdp_mode = \"hw\"\n", "xdp_mode", "interfaces[0].xdp_mode",
     "not one of"),
    ("port out of range", BASE + "[transport]\nudp_port = 70000\n", "udp_port",
     "transport.udp_port", "out of range"),
    ("port of the wrong type", BASE + "[transport]\nudp_port = \"18471\"\n", "udp_port",
     "transport.udp_port", "must be an integer"),
    ("dscp zero", BASE + "[transport]\nprobe_dscp = 0\n", "probe_dscp",
     "transport.probe_dscp", "out of range"),
    ("cpus per queue", BASE + "queues = [0, 1]\ncpus = [0]\n", "cpus", "interfaces[0].cpus",
     "1 CPUs for 2 queues"),
    ("cpu out of range", BASE + "cpus = [4096]\n", "cpus", "interfaces[0].cpus",
     "this machine has CPUs"),
    ("cpus of the wrong type", BASE + "cpus = [\"0\"]\n", "cpus", "interfaces[0].cpus",
     "array of CPU numbers"),
    ("frame size", BASE + "[transport]\nframe_bytes = 3000\n", "frame_bytes",
     "transport.frame_bytes", "frame size is 2048 or 4096"),
    ("probe mode", BASE + "[probes]\nmode = \"sometimes\"\n", "mode =", "probes.mode",
     "not one of"),
    ("probe timeout", BASE + "[probes]\ntimeout_us = 1\n", "timeout_us", "probes.timeout_us",
     "out of range"),
    ("eta refused by the core", BASE + "[hpcc]\nT_ns = 50000\neta = 1.5\n", "eta",
     "hpcc.eta", "eta must be in (0, 1]"),
    ("T refused by the core", BASE + "[hpcc]\nT_ns = 0\n", "T_ns", "hpcc.T_ns",
     "T_ns must be a positive number"),
    ("W_AI and N both", BASE + "[hpcc]\nw_ai_bytes = 80.0\nN_flows = 10\n", "N_flows",
     "hpcc.N_flows", "not both"),
    ("unknown HPCC parameter", BASE + "[hpcc]\nmaxStage = 5\n", "maxStage", "hpcc.maxStage",
     "unknown key"),
    ("DCTCP g", BASE + "[dctcp]\ng = 0.3\n", "g = ", "dctcp.g", "2^-k"),
    ("probe burst of 0", BASE + "[probes]\nreflect_burst = 0\n", "reflect_burst",
     "probes.reflect_burst", "out of range (1..1048576)"),
    ("LDCP eta", BASE + "[ldcp]\neta = 1.0\n", "eta", "ldcp.eta", "eta must be in (0, 1)"),
    ("DCTCP by default", BASE + "[algorithm]\ndefault = \"dctcp\"\n", "default",
     "algorithm.default", "not declared a DCTCP endpoint"),
    ("bad prefix", BASE + "[[peers]]\nname = \"r\"\nprefix = \"10.1.2.3/8\"\n", "prefix",
     "peers[0].prefix", "not an IPv4 prefix"),
    ("duplicate peer name", BASE + "[[peers]]\nname = \"r\"\nprefix = \"10.1.0.0/16\"\n"
     "[[peers]]\nname = \"r\"\nprefix = \"10.2.0.0/16\"\n", ('name = "r"', 1), "peers[1].name",
     "also peers[0]"),
    ("peer named default", BASE + "[[peers]]\nname = \"default\"\nprefix = \"10.1.0.0/16\"\n",
     'name = "default"', "peers[0].name", "not a peer name"),
    ("duplicate prefix", BASE + "[[peers]]\nname = \"a\"\nprefix = \"10.1.0.0/16\"\n"
     "[[peers]]\nname = \"b\"\nprefix = \"10.1.0.0/16\"\n", ("prefix", 1), "peers[1].prefix",
     "also peers[0]"),
    ("peer override refused by the core", BASE + "[hpcc]\neta = 0.9\n[[peers]]\nname = \"r\"\n"
     "prefix = \"10.1.0.0/16\"\n[peers.hpcc]\neta = 0\n", ("eta", 1), "peers[0].hpcc.eta",
     "eta must be in (0, 1]"),
    ("metrics address", BASE + "[daemon]\nmetrics_address = \"localhost\"\n", "metrics_address",
     "daemon.metrics_address", "HOST:PORT"),
    ("metrics host name", BASE + "[daemon]\nmetrics_address = \"localhost:9477\"\n",
     "metrics_address", "daemon.metrics_address", "not an IP address"),
    ("relative socket", BASE + "[daemon]\ncontrol_socket = \"hpccd.sock\"\n", "control_socket",
     "daemon.control_socket", "absolute"),
    ("unknown component", BASE + "[daemon]\ncomponents = [\"scheduler\"]\n", "components",
     "daemon.components", "not a component"),
    ("component twice", BASE + "[daemon]\ncomponents = [\"tcp_side\", \"tcp_side\"]\n",
     "components", "daemon.components", "twice"),
    ("log level", BASE + "[daemon]\nlog_level = \"loud\"\n", "log_level", "daemon.log_level",
     "not one of"),
    ("top-K bound", BASE + "[metrics]\ntop_flows = 500\n", "top_flows", "metrics.top_flows",
     "out of range"),
    ("UMEM multiple of frames", BASE + "[limits]\numem_bytes = 1000000\n", "umem_bytes",
     "limits.umem_bytes", "multiple"),
    ("max flows zero", BASE + "[limits]\nmax_flows = 0\n", "max_flows", "limits.max_flows",
     "out of range"),
    ("key file missing", BASE + "[transport]\nintegrity_key_file = \"/nonexistent/tag.key\"\n",
     "integrity_key_file", "transport.integrity_key_file", "cannot read"),
    ("interfaces not an array of tables", "interfaces = \"eth0\"\n", "interfaces",
     "interfaces", "array of tables"),
]


@pytest.mark.parametrize("desc,text,marker,key,msg", CASES, ids=[c[0] for c in CASES])
def test_each_error_names_file_line_and_key(desc, text, marker, key, msg):
    e = _err(text, "/etc/hpccd/hpccd.toml")
    assert e.file == "/etc/hpccd/hpccd.toml"
    assert e.key == key, str(e)
    assert msg in e.message, str(e)
    if marker is not None:
        needle, nth = marker if isinstance(marker, tuple) else (marker, 0)
        assert e.line == _line_of(text, needle, nth), str(e)
        assert str(e).startswith(f"/etc/hpccd/hpccd.toml:{e.line}: {key}: ")


def test_frame_sizes_are_the_engines():
    """transport.frame_bytes accepts exactly the UMEM frame sizes the engine
    takes (HPCCD_TP_FRAME_MIN, _MAX of include/hpccd/transport.h), so a
    valid configuration never fails at engine creation."""
    tp = pytest.importorskip("hpccd.transport.engine", reason="hpccd._transport not built")
    assert config.FRAME_SIZES == (tp.lib.HPCCD_TP_FRAME_MIN, tp.lib.HPCCD_TP_FRAME_MAX)
    for frame in config.FRAME_SIZES:
        c = config.loads(BASE + f"[transport]\nframe_bytes = {frame}\n", "hpccd.toml")
        assert c.frame_bytes == frame
    for frame in (1024, 3000, 8192):
        e = _err(BASE + f"[transport]\nframe_bytes = {frame}\n")
        assert e.key == "transport.frame_bytes" and "frame size is 2048 or 4096" in e.message


def test_tx_csum_offload_is_on_by_default_and_a_restart_key():
    """transport.tx_csum_offload: on unless the file says false; a bool (a
    string is refused with the key named); changing it needs a restart (the
    engines' sockets are bound with or without the metadata room)."""
    assert config.loads(BASE).tx_csum_offload is True
    off = config.loads(BASE + "[transport]\ntx_csum_offload = false\n")
    assert off.tx_csum_offload is False
    e = _err(BASE + "[transport]\ntx_csum_offload = \"yes\"\n")
    assert e.key == "transport.tx_csum_offload", str(e)
    assert config.restart_only_changes(config.loads(BASE), off) == [
        ("transport", "tx_csum_offload")]


def test_toml_syntax_error_names_the_line():
    e = _err(BASE + "[hpcc]\neta = = 0.9\n")
    assert e.line == 4 and "TOML syntax" in e.message


def test_malformed_key_file(tmp_path):
    bad = tmp_path / "k"
    bad.write_text("not a key")
    e = _err(BASE + f"[transport]\nintegrity_key_file = \"{bad}\"\n")
    assert e.key == "transport.integrity_key_file" and e.line == 4
    assert "16 raw bytes or 32 hex digits" in e.message
    zero = tmp_path / "z"
    zero.write_bytes(bytes(16))
    e = _err(BASE + f"[transport]\nintegrity_key_file = \"{zero}\"\n")
    assert "all-zero" in e.message


def test_key_file_raw_and_hex(tmp_path, keyfile):
    c = config.loads(BASE + f"[transport]\nintegrity_key_file = \"{keyfile}\"\n")
    assert c.read_key() == bytes.fromhex("00112233445566778899aabbccddeeff")
    raw = tmp_path / "raw"
    raw.write_bytes(bytes(range(1, 17)))
    c = config.loads(BASE + f"[transport]\nintegrity_key_file = \"{raw}\"\n")
    assert c.read_key() == bytes(range(1, 17))


# ---- DCTCP only between DCTCP endpoints ----

DCTCP_OK = BASE + """\
[[peers]]
name = "rack2"
prefix = "10.111.0.0/24"
algorithm = "dctcp"
dctcp_endpoint = true
"""


def test_dctcp_toward_declared_endpoints_is_accepted():
    c = config.loads(DCTCP_OK)
    assert c.policy("10.111.0.7").algorithm == "dctcp"
    assert c.policy("10.111.0.7").peer == "rack2"
    assert c.policy("10.111.1.7").algorithm == "hpcc"
    assert c.policy("10.111.1.7").peer == "default"


def test_dctcp_refused_where_a_nested_prefix_is_not_an_endpoint():
    text = DCTCP_OK + '[[peers]]\nname = "odd"\nprefix = "10.111.0.128/25"\n' \
                      'dctcp_endpoint = false\n'
    e = _err(text)
    assert e.key == "peers[0].algorithm" and e.line == _line_of(text, "algorithm")
    assert "10.111.0.128" in e.message and "[DCTCP] section 4" in e.message


def test_dctcp_refused_for_an_entry_without_endpoint():
    text = BASE + '[[peers]]\nname = "x"\nprefix = "10.1.0.0/16"\nalgorithm = "dctcp"\n'
    assert _err(text).key == "peers[0].algorithm"


def test_dctcp_endpoint_inherited_from_a_wider_prefix():
    text = BASE + """\
[[peers]]
name = "dc"
prefix = "10.0.0.0/8"
dctcp_endpoint = true
[[peers]]
name = "rack"
prefix = "10.1.0.0/16"
algorithm = "dctcp"
"""
    c = config.loads(text)
    assert c.policy("10.1.2.3").algorithm == "dctcp"
    assert c.policy("10.2.0.1").algorithm == "hpcc"


def test_default_dctcp_is_accepted_when_every_region_is_an_endpoint_or_overridden():
    # 0/0 is wholly covered by two /1 entries: no address is left to the default
    text = BASE + """\
[algorithm]
default = "dctcp"
[[peers]]
name = "low"
prefix = "0.0.0.0/1"
dctcp_endpoint = true
[[peers]]
name = "high"
prefix = "128.0.0.0/1"
algorithm = "hpcc"
"""
    c = config.loads(text)
    assert c.policy("1.2.3.4").algorithm == "dctcp"
    assert c.policy("200.1.1.1").algorithm == "hpcc"


def test_policy_parameters_merge_most_specific_last():
    text = BASE + """\
[hpcc]
T_ns = 50000
eta = 0.95
[[peers]]
name = "wide"
prefix = "10.0.0.0/8"
[peers.hpcc]
eta = 0.9
max_stage = 3
[[peers]]
name = "narrow"
prefix = "10.1.0.0/16"
algorithm = "rx-hpcc"
[peers.hpcc]
eta = 0.8
"""
    c = config.loads(text)
    p = c.policy("10.1.0.9")
    assert (p.peer, p.algorithm) == ("narrow", "rx-hpcc")
    assert dict(p.params) == {"T_ns": 50000.0, "eta": 0.8, "max_stage": 3}
    f = p.make_flow()
    assert f.algo == "rx-hpcc" and f.T == 50000
    assert dict(c.policy("10.2.0.1").params)["eta"] == 0.9
    assert c.peer_names == ("narrow", "wide", "default")


def test_w_ai_through_n():
    c = config.loads(BASE + "[hpcc]\nT_ns = 10000\nline_rate_bps = 1000000000\neta = 0.9\n"
                            "N_flows = 10\n")
    f = c.policy("1.1.1.1").make_flow()
    # W_AI = W_init (1 - eta) / N with W_init = B T = 1250 bytes
    assert f.w_ai == pytest.approx(1250 * 0.1 / 10)


# ---- set and reload ----

def test_set_value_changes_one_key_and_validates(keyfile):
    c = config.loads(DCTCP_OK)
    c2 = config.set_value(c, "hpcc.eta", "0.9")
    assert c2.params["hpcc"]["eta"] == 0.9 and c.params["hpcc"] == {}
    assert c2.file == c.file
    c3 = config.set_value(c2, "peers.rack2.algorithm", "ldcp")
    assert c3.policy("10.111.0.1").algorithm == "ldcp"
    with pytest.raises(ConfigError) as ei:
        config.set_value(c, "hpcc.eta", "2")
    assert ei.value.key == "hpcc.eta" and "eta must be in (0, 1]" in str(ei.value)
    with pytest.raises(ConfigError) as ei:
        config.set_value(c, "algorithm.default", "dctcp")
    assert ei.value.key == "algorithm.default"
    with pytest.raises(ConfigError) as ei:
        config.set_value(c, "transport.udp_port", "9999")
    assert "restart" in str(ei.value)
    with pytest.raises(ConfigError) as ei:
        config.set_value(c, "peers.nobody.algorithm", "hpcc")
    assert "nobody" in str(ei.value)
    with pytest.raises(ConfigError):
        config.set_value(c, "eta", "0.9")


def test_restart_only_changes():
    a = config.loads(BASE)
    b = config.loads(BASE + "[transport]\nudp_port = 9999\n[hpcc]\neta = 0.9\n")
    assert config.restart_only_changes(a, b) == [("transport", "udp_port")]
    c = config.loads(BASE.replace("eth0", "eth1"))
    assert config.restart_only_changes(a, c) == [("interfaces",)]
    assert config.restart_only_changes(a, config.loads(BASE + "[hpcc]\neta = 0.5\n")) == []


def test_atoms_of_nested_prefixes():
    from hpccd.agent.config import _atom_example

    n = ipaddress.IPv4Network
    assert _atom_example(n("10.0.0.0/31"), [n("10.0.0.0/32"), n("10.0.0.1/32")]) is None
    assert _atom_example(n("10.0.0.0/30"), [n("10.0.0.0/31")]) == ipaddress.IPv4Address(
        "10.0.0.2")
    assert _atom_example(n("0.0.0.0/0"), []) == ipaddress.IPv4Address("0.0.0.0")


# ---- the example file and the reference ----

def test_example_file_is_valid(tmp_path, keyfile):
    text = EXAMPLE.read_text()
    assert '"/etc/hpccd/tag.key"' in text
    c = config.loads(text.replace("/etc/hpccd/tag.key", str(keyfile)), str(EXAMPLE))
    assert c.interfaces and c.read_key()


def _schema_keys() -> set[str]:
    out = set()
    for table, keys in (("daemon", config._DAEMON), ("interfaces", config._IFACE),
                        ("transport", config._TRANSPORT), ("probes", config._PROBES),
                        ("algorithm", config._ALGORITHM), ("peers", config._PEER),
                        ("metrics", config._METRICS), ("limits", config._LIMITS),
                        ("tcp_side", config._TCP_SIDE)):
        out.update(f"{table}.{k}" for k in keys)
    for table, keys in config.PARAM_KEYS.items():
        out.update(f"{table}.{k}" for k in keys)
    return out


def _example_keys(text: str) -> set[str]:
    """TABLE.KEY of every key the example sets, or shows commented out
    (``# key = value`` under its table); a [peers.X] sub-table counts as
    the peers key X, its keys as X's (overrides)."""
    out, table = set(), None
    for ln in text.splitlines():
        s = ln.strip()
        m = re.match(r"^\[\[?([a-z_.]+)\]\]?", s)
        if m:
            table = m.group(1)
            if table.startswith("peers."):
                out.add(table)
                table = table.split(".", 1)[1]
            continue
        m = re.match(r"^(?:# )?([A-Za-z_]+) = ", s)
        if m and table:
            out.add(f"{table}.{m.group(1)}")
    return out


def test_example_covers_every_key():
    """systemd/hpccd.toml shows every key of the schema (set, or commented out
    where it has no fixed default or excludes another), and no unknown one."""
    text = EXAMPLE.read_text()
    got = _example_keys(text)
    peer_tables = {k for k in got if k.startswith("peers.") and k.count(".") == 1}
    assert _schema_keys() - got == set(), "keys missing from systemd/hpccd.toml"
    assert got - _schema_keys() == set(), "systemd/hpccd.toml shows unknown keys"
    assert {"peers.hpcc", "peers.dctcp", "peers.ldcp"} <= peer_tables
    # the commented-out ones are valid where they stand: uncommented one at a
    # time (w_ai_bytes replacing N_flows, which it excludes), the file loads
    commented = [ln for ln in text.splitlines() if re.match(r"^# [a-z_A-Z]+ = ", ln)]
    assert commented
    for ln in commented:
        if ln.startswith("# cpus") and len(os.sched_getaffinity(0)) < 4:
            continue                    # checked against this machine's CPUs
        t = text.replace(ln, ln[2:]).replace('"/etc/hpccd/tag.key"', '""')
        if ln.startswith("# w_ai_bytes"):
            t = t.replace("\nN_flows = 16", "\n# N_flows = 16")
        config.loads(t, str(EXAMPLE))


def test_reference_documents_every_key():
    doc = DOC.read_text()
    documented = set(re.findall(r"^\|\s*`([a-z_]+\.[A-Za-z_]+)`", doc, flags=re.M))
    assert _schema_keys() - documented == set(), "keys missing from docs/configuration.md"
    assert documented - _schema_keys() == set(), "docs/configuration.md documents unknown keys"
    for path in config.RESTART_ONLY:
        if len(path) == 2:
            row = re.search(r"^\|\s*`" + re.escape(".".join(path)) + r"`.*$", doc, flags=re.M)
            assert row and "restart" in row.group(0), f"{path}: say it needs a restart"


def test_dcqcn_and_timely_are_algorithms_with_their_own_tables(keyfile):
    """The HPCC paper's baselines (issue 16): selectable by name, parameters
    in [dcqcn] / [timely] (and per peer), validated by the core at load."""
    c = config.loads(BASE + '[algorithm]\ndefault = "dcqcn"\n[dcqcn]\nT_ns = 300000\n'
                     '[timely]\nbeta = 0.5\n[[peers]]\nname = "rack2"\nprefix = "10.111.0.0/24"\n'
                     'algorithm = "timely"\n[peers.timely]\nT_low_ns = 100000\n')
    d = c.policy("1.1.1.1")
    assert d.algorithm == "dcqcn" and d.params == {"T_ns": 300000}
    assert d.make_flow().algo == "dcqcn"
    t = c.policy("10.111.0.9")
    assert t.algorithm == "timely" and t.params == {"beta": 0.5, "T_low_ns": 100000}
    with pytest.raises(ConfigError) as ei:
        config.loads(BASE + "[timely]\nT_low_ns = 600000\n")   # above T_high
    assert "T_low_ns must be below T_high_ns" in str(ei.value)
    with pytest.raises(ConfigError) as ei:
        config.loads(BASE + "[dcqcn]\nF = 0\n")
    assert ei.value.key == "dcqcn.F" and "F must be in [1, 1000]" in str(ei.value)


def test_wire_defaults_are_the_headers():
    """The configuration's UDP port and probe DSCP defaults are include/hpccd/wire.h's
    (through hpccd._cc), and so are the scapy layers' (hpccd.core.wire, the Python twin)."""
    from hpccd._cc import lib
    from hpccd.core import wire
    assert config.UDP_PORT_DEFAULT == lib.HPCCD_UDP_PORT_DEFAULT == wire.UDP_PORT_DEFAULT
    assert config.PROBE_DSCP_DEFAULT == lib.HPCCD_PROBE_DSCP_DEFAULT == wire.PROBE_DSCP_DEFAULT
    assert config.loads(BASE).udp_port == lib.HPCCD_UDP_PORT_DEFAULT


def test_tcp_side_table_reaches_the_probe_engine_and_refuses_bad_values():
    """[tcp_side] (issue 19): the probe engine's options, defaults those of
    hpccd.tcp_side.engine.TcpSide, as its keyword arguments; out of range refused
    at the key's line; a change needs a restart."""
    import inspect

    from hpccd.tcp_side.engine import TcpSide
    sig = inspect.signature(TcpSide.__init__).parameters
    d = config.loads(BASE).tcp_side_opts.kwargs()
    assert d == {k: sig[k].default for k in d}          # one set of defaults
    c = config.loads(BASE + "[tcp_side]\nt_from_rtt = false\nt_rtt_factor = 2\n"
                     "probe_gap_rtt = 0\ncwnd_rtt_gain = 0.5\nstale_ms = 250\n"
                     "gso_max_segs = 2\nhost_cap_t = 4\npath_rate_gain = 1.5\n"
                     "solo_rate_gain = 1.5\npath_rate_shared = false\n"
                     "pace_gain_max = 1.5\ntrains_from_pacer = true\nwake_lead = false\n")
    assert c.tcp_side_opts.kwargs() == {"t_from_rtt": False, "t_rtt_factor": 2.0,
                                        "probe_gap_rtt": 0.0, "cwnd_rtt_gain": 0.5,
                                        "stale_ns": 250_000_000, "gso_max_segs": 2,
                                        "host_cap_t": 4.0, "path_rate_gain": 1.5,
                                        "solo_rate_gain": 1.5,
                                        "path_rate_shared": False,
                                        "path_rate_work_conserving": False,
                                        "app_limited_hold": False,
                                        "pace_gain_max": 1.5,
                                        "trains_from_pacer": True, "wake_lead": False}
    c = config.loads(BASE + "[tcp_side]\npath_rate_work_conserving = true\n")
    assert c.tcp_side_opts.kwargs()["path_rate_work_conserving"] is True
    c = config.loads(BASE + "[tcp_side]\napp_limited_hold = true\n")
    assert c.tcp_side_opts.kwargs()["app_limited_hold"] is True
    for bad in ("t_rtt_factor = 0.9", "cwnd_rtt_gain = -1", "probe_gap_rtt = 17",
                "stale_ms = 0", "t_from_rtt = 1", "probe_gap = 1", "gso_max_segs = -1",
                "gso_max_segs = 65536", "host_cap_t = 65", "path_rate_gain = 0.05",
                "path_rate_gain = 5", "solo_rate_gain = 0.05", "solo_rate_gain = 4.5",
                "path_rate_shared = 1",
                "path_rate_work_conserving = 1", "app_limited_hold = 1",
                "pace_gain_max = 0.9", "pace_gain_max = 4.5", "trains_from_pacer = 1"):
        e = _err(BASE + "[tcp_side]\n" + bad + "\n")
        assert e.key == "tcp_side." + bad.split()[0] and e.line == 4, (bad, e)
    e = _err(BASE + "[tcp_side]\npath_rate_shared = false\npath_rate_work_conserving = true\n")
    assert e.key == "tcp_side.path_rate_work_conserving" and e.line == 5, e
    assert "path_rate_shared" in str(e), e
    assert ("tcp_side", "cwnd_rtt_gain") in config.RESTART_ONLY
    assert ("tcp_side", "gso_max_segs") in config.RESTART_ONLY
