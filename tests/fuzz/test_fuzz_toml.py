"""Property-based fuzzing (hypothesis) of the TOML loaders: topology files
(hpccd.lab.topology, docs/topology.md) and the daemon's configuration
(hpccd.agent.config, docs/configuration.md).

Inputs: arbitrary text; the bundled topologies and the example
configuration (systemd/hpccd.toml) mutated line by line (a value replaced
by a drawn TOML value of any type, a line deleted, duplicated, swapped or
inserted, a character replaced); and for the configuration, ``hpccctl set``
style changes (config.set_value) with drawn keys and values.

Invariants protected (the loaders' docstrings, hpccd.agent.tomlcheck):
  - a load returns a valid object or raises the loader's documented error
    (TopologyError / ConfigError, both tomlcheck.TomlError, a ValueError)
    and never anything else (no KeyError, TypeError, OverflowError from
    the cffi core, ...);
  - the error names the file it was given; its line, when given, is a line
    of the text; a TOML syntax error inside the text names its line; an
    error about a key of a table the file does have names a line;
  - what loads is usable: a topology's summary is JSON, every pair of hosts
    has a path that ends at the destination's switch, every link rate has an
    INT speed code; a configuration gives a policy (algorithm and parameters
    the core accepts) for any address.
"""
from __future__ import annotations

import ipaddress
import json
import math
import os
import pathlib
import re
import tomllib

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from hpccd.lab import topology  # noqa: E402
from hpccd.agent.tomlcheck import TomlError  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOPOLOGIES = sorted((ROOT / "daemon" / "hpccd" / "topologies").glob("*.toml"))
EXAMPLE_CONFIG = ROOT / "systemd" / "hpccd.toml"

# HPCCD_FUZZ_EXAMPLES scales a run up (docs/fuzzing.md: the long run).
FUZZ = settings(max_examples=int(os.environ.get("HPCCD_FUZZ_EXAMPLES", 300)), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

try:
    from hpccd.agent import config
except ImportError:                  # the configuration loader is not there yet
    config = None


# ---- TOML values and line mutations ----------------------------------------------------

def toml_str(s: str) -> str:
    return json.dumps(s)             # a TOML basic string: JSON's escapes are TOML's


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return toml_str(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return "{" + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + "}"


def value_strategy(no_abs_paths: bool = False):
    """Any TOML value, biased toward the edges of what the schemas take."""
    text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20)
    if no_abs_paths:                 # never make the config loader open a drawn path
        text = text.filter(lambda s: not s.startswith("/"))
    names = st.sampled_from(("s1", "s2", "h1", "h2", "r1", "x", "", "S1", "eth0", "lo",
                             "10.0.2.0/24", "10.0.0.0/8", "0.0.0.0/0", "300.1.1.1/8",
                             "127.0.0.1:9477", "[::1]:80", "hpcc", "rx-hpcc", "dctcp",
                             "ldcp", "probe", "inband", "native", "skb", "hpccd", "all"))
    ints = st.one_of(st.integers(-3, 70000), st.sampled_from(
        (0, 1, 2**31, 2**32 - 1, 2**32, 2**53 + 1, 2**63 - 1, -2**63, 2**64 - 1)))
    floats = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                       st.sampled_from((0.0, 0.5, 0.95, 1.0, 1e-300, 1e300, 0.0625)))
    scalar = st.one_of(ints, floats, st.booleans(), names, text)
    return st.recursive(scalar, lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(("name", "id", "pmax", "kmin_bytes", "kmax_bytes",
                                         "eta", "x")), inner, max_size=3)), max_leaves=6)


_KEY_LINE = re.compile(r"^(\s*[A-Za-z0-9_.\"-]+\s*=\s*)(.*)$")


@st.composite
def mutated(draw, base: str, keys: tuple[str, ...], no_abs_paths: bool = False) -> str:
    lines = base.splitlines()
    values = value_strategy(no_abs_paths)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(("value", "value", "value", "delete", "dup", "swap",
                                   "insert", "char")))
        if not lines:
            lines = [""]
        i = draw(st.integers(0, len(lines) - 1))
        if op == "value":
            kv = [j for j, s in enumerate(lines) if _KEY_LINE.match(s)]
            if kv:
                j = draw(st.sampled_from(kv))
                m = _KEY_LINE.match(lines[j])
                lines[j] = m.group(1) + toml_value(draw(values))
        elif op == "delete":
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "insert":
            key = draw(st.one_of(st.sampled_from(keys), st.from_regex(r"[a-z_]{1,8}",
                                                                      fullmatch=True)))
            lines.insert(i, f"{key} = {toml_value(draw(values))}")
        elif lines[i]:
            k = draw(st.integers(0, len(lines[i]) - 1))
            c = draw(st.sampled_from(list("[]{}=\"'#.,0x \t") + ["\\", "é"]))
            lines[i] = lines[i][:k] + c + lines[i][k + 1:]
    return "\n".join(lines) + "\n"


def check_error(e: TomlError, text: str, file: str) -> None:
    """The documented shape of a loader error."""
    assert e.file == file
    n = max(1, len(text.splitlines()))
    assert e.line is None or 1 <= e.line <= n + 1, (e.line, n, str(e))
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as syntax:
        if "end of document" not in str(syntax):
            assert e.line is not None, f"syntax error without a line: {e}"
        return
    if e.key:
        top = re.split(r"[.\[]", e.key, maxsplit=1)[0]
        if top in doc:
            assert e.line is not None, f"error about {e.key!r}, which the file has, " \
                                       f"without a line: {e}"
    assert str(e).startswith(file)


# ---- topology -----------------------------------------------------------------------------

TOPO_KEYS = ("name", "subnet", "rate_mbps", "buffer_bytes", "mtu", "id", "ecn", "endpoints",
             "[lab]", "[defaults]", "[[switches]]", "[[hosts]]", "[[links]]")


def check_topology(t: topology.Topology) -> None:
    json.dumps(t.to_dict())
    for ln in t.links:
        assert ln.speed_code != 0
    for a, b in t.host_pairs():
        path = t.path(a, b)
        assert path, (a, b)
        last = path[-1]
        assert t.switches[last.switch].port(last.port).peer == b


def load_topology(text: str) -> None:
    try:
        t = topology.Topology.loads(text, "fuzz.toml")
    except topology.TopologyError as e:
        check_error(e, text, "fuzz.toml")
        return
    check_topology(t)


@FUZZ
@given(st.text(max_size=300))
def test_topology_arbitrary_text(text):
    load_topology(text)


@pytest.mark.parametrize("base", TOPOLOGIES, ids=lambda p: p.stem)
def test_topology_mutated(base):
    text = base.read_text()
    load_topology(text)                     # the bundled file itself is valid

    @FUZZ
    @given(mutated(text, TOPO_KEYS))
    def run(t):
        load_topology(t)

    run()


# ---- configuration -------------------------------------------------------------------------

CONF_KEYS = ("log_level", "control_socket", "metrics_address", "components", "name",
             "xdp_mode", "queues", "udp_port", "probe_dscp", "frame_bytes", "mode",
             "timeout_us", "default", "T_ns", "eta", "max_stage", "N_flows", "w_ai_bytes",
             "mtu_bytes", "line_rate_bps", "g", "rtt_ns", "iw_pkts", "gamma", "prefix",
             "algorithm", "dctcp_endpoint", "top_flows", "max_flows", "umem_bytes",
             "[hpcc]", "[dctcp]", "[ldcp]", "[[peers]]", "[peers.hpcc]", "[limits]")


def config_base() -> str:
    # No key file: the example names /etc/hpccd/tag.key, which a test must
    # not depend on (nor read).
    text = EXAMPLE_CONFIG.read_text()
    return re.sub(r'(?m)^integrity_key_file\s*=.*$', 'integrity_key_file = ""', text)


def load_config(text: str):
    try:
        cfg = config.loads(text, "fuzz.toml")
    except config.ConfigError as e:
        check_error(e, text, "fuzz.toml")
        return None
    for addr in ("10.0.2.7", "10.0.9.1", "192.0.2.1"):
        pol = cfg.policy(ipaddress.IPv4Address(addr))
        assert pol.algorithm in config.ALGORITHMS
        pol.make_flow()
    return cfg


needs_config = pytest.mark.skipif(config is None, reason="hpccd.agent.config is not there yet")


@needs_config
@FUZZ
@given(st.text(max_size=300).filter(lambda s: "/" not in s))
def test_config_arbitrary_text(text):
    load_config(text)


@needs_config
def test_config_mutated():
    base = config_base()
    assert load_config(base) is not None    # the example itself is valid

    @FUZZ
    @given(mutated(base, CONF_KEYS, no_abs_paths=True))
    def run(t):
        load_config(t)

    run()


@needs_config
def test_config_set_value():
    cfg = load_config(config_base())
    params = st.one_of(
        st.sampled_from(("hpcc.eta", "hpcc.T_ns", "hpcc.mtu_bytes", "hpcc.max_stage",
                         "dctcp.g", "dctcp.mtu_bytes", "ldcp.gamma", "ldcp.iw_pkts",
                         "ldcp.rtt_ns", "algorithm.default", "peers.rack2.algorithm",
                         "peers.storage.hpcc.eta", "peers.nobody.x", "transport.udp_port",
                         "metrics.top_flows", "limits.max_flows", "interfaces.name",
                         "hpcc", ".", "a..b", "probes.mode", "daemon.log_level")),
        st.from_regex(r"[a-z_]{1,6}(\.[a-z_]{1,6}){0,2}", fullmatch=True))
    values = st.one_of(value_strategy(no_abs_paths=True).map(toml_value),
                       st.text(max_size=12).filter(lambda s: not s.startswith("/")))

    @FUZZ
    @given(params, values)
    def run(param, value):
        try:
            new = config.set_value(cfg, param, value)
        except config.ConfigError as e:
            assert e.key is not None, str(e)
            return
        assert new.file == cfg.file
        new.policy("10.0.2.1").make_flow()

    run()
