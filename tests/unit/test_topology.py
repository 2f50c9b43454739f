"""hpccd.lab.topology: the schema of docs/topology.md, exactly.

Invariants protected:
- every rule of the schema is enforced, and each failure names the file,
  the line and the key where the problem is (tomllib gives no positions:
  the module finds them in the text, also for dotted keys, inline tables,
  sub-table headers, and with look-alikes in comments and strings);
- addressing: link i is the /30 at offset 4 i, first endpoint .1, second .2;
- ports: a switch's ports are numbered from 1 in the order of its links;
- routing: fewest switch hops, ties broken by link order, every switch has
  a /32 to every host; paths of 1, 2 and 3 switch hops in the tree;
- rates map to the INT speed codes of docs/wire-format.md.
"""
from __future__ import annotations

import ipaddress
import json
import textwrap

import pytest

from hpccd.core import cc
from hpccd.lab.topology import Hop, Topology, TopologyError, _LineIndex, bundled

A = ipaddress.IPv4Address


def load(text: str) -> Topology:
    return Topology.loads(textwrap.dedent(text), "t.toml")


def err(text: str) -> TopologyError:
    with pytest.raises(TopologyError) as ei:
        load(text)
    return ei.value


# A small valid file; tests break it one rule at a time.  Line numbers below
# refer to this text after dedent (line 1 is "[lab]").
BASE = """\
[lab]
name = "t"
subnet = "10.50.0.0/24"

[defaults]
rate_mbps = 1000
buffer_bytes = 100000

[[switches]]
name = "s1"
id = 1
ecn = { kmin_bytes = 3000, kmax_bytes = 6000, pmax = 0.5 }

[[switches]]
name = "s2"
id = 2

[[hosts]]
name = "h1"
[[hosts]]
name = "h2"

[[links]]
endpoints = ["h1", "s1"]
[[links]]
endpoints = ["s1", "s2"]
rate_mbps = 2000
[[links]]
endpoints = ["s2", "h2"]
"""


def replace(old: str, new: str, text: str = BASE) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


# ---- the bundled files ---------------------------------------------------------------

def test_bundled_names():
    assert bundled() == ["dumbbell", "incast", "tree"]


@pytest.mark.parametrize("name", ["dumbbell", "incast", "tree"])
def test_bundled_files_load_and_every_host_pair_has_a_path(name):
    t = Topology.load(name)
    assert t.name == name
    for a, b in t.host_pairs():
        path = t.path(a, b)
        assert path and path[0].switch == t.hosts[a].switch
        last = t.switches[path[-1].switch].port(path[-1].port)
        assert last.peer == b
    json.dumps(t.to_dict())                 # the P4 generator and status --json use it


def test_dumbbell_addresses_ports_and_routes():
    t = Topology.load("dumbbell")
    assert t.subnet == ipaddress.IPv4Network("10.111.0.0/16")
    assert t.address("h1") == A("10.111.0.1")           # link 0, first endpoint
    assert t.address("h3") == A("10.111.0.9")           # link 2
    assert t.address("r1") == A("10.111.0.18")          # link 4, second endpoint
    assert t.address("r2") == A("10.111.0.22")
    s1, s2 = t.switches["s1"], t.switches["s2"]
    assert (s1.id, s2.id) == (0x0A1, 0x0B2)
    assert [(p.number, p.peer) for p in s1.ports] == [(1, "h1"), (2, "h2"), (3, "h3"),
                                                      (4, "s2")]
    assert [(p.number, p.peer) for p in s2.ports] == [(1, "s1"), (2, "r1"), (3, "r2")]
    bott = s1.port(4)
    assert (bott.address, bott.peer_address, bott.peer_port) == (A("10.111.0.13"),
                                                                A("10.111.0.14"), 1)
    assert (bott.rate_mbps, bott.buffer_bytes, bott.mtu) == (1000, 500000, 1500)
    assert bott.speed_code == cc.speed_code(1_000_000_000) == 14
    assert s1.port(1).rate_mbps == 2000 and s1.port(1).speed_code == 16
    assert s1.port(1).buffer_bytes == 1000000
    assert s1.ecn.kmin_bytes == s1.ecn.kmax_bytes == 3000
    assert s1.ecn.fast_start_k_bytes == 3000 and s1.ecn.pmax == 1.0
    assert s2.ecn is None
    h1 = t.hosts["h1"]
    assert (h1.switch, h1.gateway, h1.prefixlen) == ("s1", A("10.111.0.2"), 30)
    assert t.hosts["r1"].gateway == A("10.111.0.17")
    r = t.route("s1", "r1")
    assert (r.dst, r.port, r.via, r.hops) == (A("10.111.0.18"), 4, A("10.111.0.14"), 2)
    r = t.route("s1", "h2")
    assert (r.port, r.via, r.hops) == (2, A("10.111.0.5"), 1)        # attached host
    assert t.path("h1", "r1") == [Hop("s1", 4), Hop("s2", 2)]
    assert t.path("r2", "h3") == [("s2", 1), ("s1", 3)]
    # every switch routes to every host
    for s in t.switches:
        assert {r.host for r in t.routes[s]} == set(t.hosts)


def test_incast_addresses_and_one_hop_everywhere():
    t = Topology.load("incast")
    assert t.address("h1") == A("10.112.0.1")
    assert t.address("h7") == A("10.112.0.25")
    assert t.address("r1") == A("10.112.0.30")          # link 7, second endpoint
    assert t.switches["s1"].port(8).peer == "r1"
    assert t.switches["s1"].port(8).address == A("10.112.0.29")
    # the port toward a peer, by name (the experiments' bottleneck ports)
    assert t.switches["s1"].port_to("r1") == 8 and t.switches["s1"].port_to("h1") == 1
    with pytest.raises(KeyError, match="switch s1 has no port toward r9"):
        t.switches["s1"].port_to("r9")
    assert {len(t.path(a, b)) for a, b in t.host_pairs()} == {1}
    assert t.path("h4", "r1") == [("s1", 8)]


def test_tree_paths_have_1_2_and_3_switch_hops():
    t = Topology.load("tree")
    assert t.address("h5") == A("10.113.0.25")
    assert t.switches["a1"].port(3).address == A("10.113.0.26")
    assert t.switches["tor1"].port(3).address == A("10.113.0.17")
    assert t.switches["a1"].port(1).address == A("10.113.0.18")
    assert t.path("h1", "h2") == [("tor1", 2)]
    assert t.path("h1", "h5") == [("tor1", 3), ("a1", 3)]
    assert t.path("h1", "h3") == [("tor1", 3), ("a1", 2), ("tor2", 1)]
    assert t.path("h4", "h2") == [("tor2", 3), ("a1", 1), ("tor1", 2)]
    assert {len(t.path(a, b)) for a, b in t.host_pairs()} == {1, 2, 3}
    for a, b in t.host_pairs():                          # symmetric hop counts
        assert len(t.path(a, b)) == len(t.path(b, a))
    assert t.route("tor1", "h4").hops == 3
    assert t.route("a1", "h3").via == A("10.113.0.21")   # tor2's address on link 5


SQUARE = """\
[lab]
name = "sq"
subnet = "10.60.0.0/24"
[[switches]]
name = "s1"
id = 1
[[switches]]
name = "s2"
id = 2
[[switches]]
name = "s3"
id = 3
[[switches]]
name = "s4"
id = 4
[[hosts]]
name = "h1"
[[hosts]]
name = "h2"
[[links]]
endpoints = ["h1", "s1"]
{middle}
[[links]]
endpoints = ["s4", "h2"]
"""
VIA_S2 = '[[links]]\nendpoints = ["s1", "s2"]\n[[links]]\nendpoints = ["s2", "s4"]\n'
VIA_S3 = '[[links]]\nendpoints = ["s1", "s3"]\n[[links]]\nendpoints = ["s3", "s4"]\n'


@pytest.mark.parametrize("first, via", [(VIA_S2, "s2"), (VIA_S3, "s3")])
def test_equal_cost_ties_go_to_the_earlier_link(first, via):
    second = VIA_S3 if first is VIA_S2 else VIA_S2
    t = Topology.loads(SQUARE.format(middle=first + second), "sq.toml")
    assert [h.switch for h in t.path("h1", "h2")] == ["s1", via, "s4"]
    assert [h.switch for h in t.path("h2", "h1")] == ["s4", via, "s1"]


def test_defaults_apply_when_absent():
    t = load(replace("[defaults]\nrate_mbps = 1000\nbuffer_bytes = 100000\n", ""))
    assert t.defaults == {"rate_mbps": 1000, "buffer_bytes": 1000000, "mtu": 1500}
    assert t.links[0].buffer_bytes == 1000000


def test_link_values_override_defaults():
    t = load(BASE)
    assert [ln.rate_mbps for ln in t.links] == [1000, 2000, 1000]
    assert [ln.buffer_bytes for ln in t.links] == [100000] * 3
    assert [ln.speed_code for ln in t.links] == [14, 16, 14]
    assert t.switches["s1"].ecn.fast_start_k_bytes is None


# ---- validation: file, line, key ----------------------------------------------------

@pytest.mark.parametrize("desc, old, new, line, key, words", [
    ("unknown top-level table", "[defaults]", "[extras]\nx = 1\n[defaults]", 5, "extras",
     "unknown key"),
    ("a key after [lab] belongs to [lab]", "[defaults]", "colour = 1\n[defaults]", 5,
     "lab.colour", "unknown key"),
    ("unknown key in a link", 'endpoints = ["s1", "s2"]\n',
     'endpoints = ["s1", "s2"]\nmtu = 9000\n', 27, "links[1].mtu", "unknown key"),
    ("unknown key in an inline ecn table", "pmax = 0.5 }", "pmax = 0.5, kmid = 1 }", 12,
     "switches[0].ecn.kmid", "unknown key"),
    ("unknown key in [lab]", 'subnet = "10.50.0.0/24"\n',
     'subnet = "10.50.0.0/24"\nowner = "me"\n', 4, "lab.owner", "unknown key"),
    ("rate not in the speed table", "rate_mbps = 2000", "rate_mbps = 1001", 27,
     "links[1].rate_mbps", "not a speed of the INT table"),
    ("default rate not in the table", "rate_mbps = 1000", "rate_mbps = 999", 6,
     "defaults.rate_mbps", "999 Mbit/s"),
    ("rate of the wrong type", "rate_mbps = 2000", 'rate_mbps = "2000"', 27,
     "links[1].rate_mbps", "must be an integer"),
    ("duplicate switch id", "id = 2", "id = 1", 16, "switches[1].id", "also s1's"),
    ("switch id out of range", "id = 2", "id = 4096", 16, "switches[1].id", "1..4095"),
    ("switch id zero", "id = 1\n", "id = 0\n", 11, "switches[0].id", "out of range"),
    ("missing switch id", "id = 2\n", "", 14, "switches[1].id", "required"),
    ("duplicate node name", 'name = "h2"', 'name = "s2"', 21, "hosts[1].name",
     "already the name of switches[1]"),
    ("malformed node name", 'name = "h2"', 'name = "H-2"', 21, "hosts[1].name",
     "not a node name"),
    ("host with two links", '[[links]]\nendpoints = ["s2", "h2"]',
     '[[links]]\nendpoints = ["s2", "h2"]\n[[links]]\nendpoints = ["s1", "h2"]', 31,
     "links[3].endpoints", "second link"),
    ("host-host link", '[[links]]\nendpoints = ["s2", "h2"]',
     '[[links]]\nendpoints = ["s2", "h2"]\n[[links]]\nendpoints = ["h1", "h2"]', 31,
     "links[3].endpoints", "host-host"),
    ("unknown endpoint", '["s2", "h2"]', '["s2", "h9"]', 29, "links[2].endpoints",
     "no node named 'h9'"),
    ("self loop", '["s1", "s2"]', '["s1", "s1"]', 26, "links[1].endpoints", "distinct"),
    ("three endpoints", '["s1", "s2"]', '["s1", "s2", "h1"]', 26, "links[1].endpoints",
     "two node names"),
    ("missing endpoints", '[[links]]\nendpoints = ["s2", "h2"]', '[[links]]\nrate_mbps = 1000',
     28, "links[2].endpoints", "required"),
    ("kmin above kmax", "kmin_bytes = 3000", "kmin_bytes = 7000", 12,
     "switches[0].ecn.kmin_bytes", "kmin_bytes 7000 > kmax_bytes 6000"),
    ("pmax zero", "pmax = 0.5", "pmax = 0", 12, "switches[0].ecn.pmax", "0 < pmax <= 1"),
    ("pmax above one", "pmax = 0.5", "pmax = 1.5", 12, "switches[0].ecn.pmax", "out of range"),
    ("pmax missing", ", pmax = 0.5", "", 12, "switches[0].ecn.pmax", "required"),
    ("kmax above the buffer", "kmax_bytes = 6000", "kmax_bytes = 200000", 12,
     "switches[0].ecn.kmax_bytes", "exceeds the 100000-byte buffer of port 1"),
    ("negative fast-start K", "pmax = 0.5 }", "pmax = 0.5, fast_start_k_bytes = -1 }", 12,
     "switches[0].ecn.fast_start_k_bytes", "out of range"),
    ("fast-start class without K", "pmax = 0.5 }", 'pmax = 0.5, fast_start_class = "all" }',
     12, "switches[0].ecn.fast_start_class", "needs fast_start_k_bytes"),
    ("unknown fast-start class", "pmax = 0.5 }",
     'pmax = 0.5, fast_start_k_bytes = 3000, fast_start_class = "tcp" }', 12,
     "switches[0].ecn.fast_start_class", "'hpccd', 'all' or a DSCP"),
    ("fast-start DSCP above 63", "pmax = 0.5 }",
     "pmax = 0.5, fast_start_k_bytes = 3000, fast_start_class = 64 }", 12,
     "switches[0].ecn.fast_start_class", "out of range"),
    ("buffer smaller than a frame", "buffer_bytes = 100000", "buffer_bytes = 1000", 7,
     "defaults.buffer_bytes", "one full-size frame"),
    ("mtu too small", "buffer_bytes = 100000\n", "buffer_bytes = 100000\nmtu = 100\n", 8,
     "defaults.mtu", "out of range"),
    ("subnet too small", '"10.50.0.0/24"', '"10.50.0.0/29"', 3, "lab.subnet",
     "room for 2 links"),
    ("subnet with host bits", '"10.50.0.0/24"', '"10.50.0.1/24"', 3, "lab.subnet",
     "not an IPv4 network"),
    ("missing lab name", 'name = "t"\n', "", 1, "lab.name", "required"),
    ("bad lab name", 'name = "t"', 'name = "T t"', 2, "lab.name", "not a lab name"),
])
def test_schema_errors_name_file_line_and_key(desc, old, new, line, key, words):
    e = err(replace(old, new))
    assert (e.file, e.line, e.key) == ("t.toml", line, key), (desc, str(e))
    assert words in e.message, (desc, e.message)
    assert str(e).startswith(f"t.toml:{line}: {key}: "), str(e)


@pytest.mark.parametrize("value, want", [(None, "hpccd"), ('"hpccd"', "hpccd"),
                                         ('"all"', "all"), ("10", 10)])
def test_fast_start_class(value, want):
    extra = ", fast_start_k_bytes = 3000" + (f", fast_start_class = {value}" if value else "")
    topo = Topology.loads(replace("pmax = 0.5 }", f"pmax = 0.5{extra} }}"))
    e = next(iter(topo.switches.values())).ecn
    assert (e.fast_start_k_bytes, e.fast_start_class) == (3000, want)


def test_disconnected_graph_names_the_unreachable_node():
    text = replace('[[links]]\nendpoints = ["s1", "s2"]\nrate_mbps = 2000\n', "",
                   replace("[[hosts]]\nname = \"h1\"", "[[hosts]]\nname = \"h1\"\n"))
    e = err(text)
    assert e.key == "switches[1].name" and e.line == 15, str(e)
    assert "not connected" in e.message and "'s2'" in e.message


def test_host_without_a_link():
    e = err(replace("[[hosts]]\nname = \"h2\"", "[[hosts]]\nname = \"h2\"\n[[hosts]]\n"
                                                  "name = \"h3\""))
    assert (e.line, e.key) == (23, "hosts[2].name"), str(e)
    assert "no link" in e.message


def test_missing_lab_table():
    e = err(BASE.replace('[lab]\nname = "t"\nsubnet = "10.50.0.0/24"\n', ""))
    assert e.key == "lab" and "required table [lab]" in e.message


def test_toml_syntax_error_has_its_line():
    e = err(replace("id = 2", "id = = 2"))
    assert e.line == 16 and e.key is None and "TOML syntax" in e.message


def test_dotted_keys_and_sub_table_headers_are_located():
    text = replace("ecn = { kmin_bytes = 3000, kmax_bytes = 6000, pmax = 0.5 }",
                   "ecn.kmin_bytes = 3000\necn.kmax_bytes = 6000\necn.pmax = 2.0")
    e = err(text)
    assert (e.line, e.key) == (14, "switches[0].ecn.pmax"), str(e)
    text = replace("ecn = { kmin_bytes = 3000, kmax_bytes = 6000, pmax = 0.5 }\n", "")
    text = replace("[[switches]]\nname = \"s2\"",
                   "[switches.ecn]\nkmin_bytes = 3000\nkmax_bytes = 6000\npmax = 0.5\n"
                   "# a [[links]] in a comment\nfoo = 1\n\n[[switches]]\nname = \"s2\"", text)
    e = err(text)
    assert (e.line, e.key) == (18, "switches[0].ecn.foo"), str(e)


def test_line_index_skips_comments_and_multiline_strings():
    text = textwrap.dedent('''\
        # [[links]] is not a header here
        [[links]]
        note = """
        [[links]]
        rate_mbps = 5
        """
        "rate_mbps" = 7
        endpoints = [
          "a",
          "b",
        ]
        [[links]]
        rate_mbps = 9
    ''')
    idx = _LineIndex(text)
    assert idx.line(("links", 0)) == 2
    assert idx.line(("links", 0, "rate_mbps")) == 7
    assert idx.line(("links", 0, "endpoints")) == 8
    assert idx.line(("links", 1)) == 12
    assert idx.line(("links", 1, "rate_mbps")) == 13
    assert idx.line(("links", 1, "missing")) == 12        # falls back to the header
    assert idx.line(("nothing",)) is None


def test_missing_file_and_unknown_bundled_name(tmp_path):
    with pytest.raises(TopologyError) as ei:
        Topology.load("nosuchtopo")
    assert "not a bundled topology" in str(ei.value) and "dumbbell" in str(ei.value)
    with pytest.raises(TopologyError) as ei:
        Topology.load(tmp_path / "x.toml")
    assert ei.value.file == str(tmp_path / "x.toml") and "cannot read" in str(ei.value)


def test_load_from_a_path_reports_that_path(tmp_path):
    p = tmp_path / "mine.toml"
    p.write_text(replace("rate_mbps = 2000", "rate_mbps = 1234"))
    with pytest.raises(TopologyError) as ei:
        Topology.load(p)
    assert str(ei.value).startswith(f"{p}:27: links[1].rate_mbps: ")
    p.write_text(BASE)
    assert Topology.load(str(p)).file == str(p)


def test_every_speed_of_the_int_table_is_accepted():
    for code in range(1, 32):
        mbps = cc.speed_mbps(code)
        t = load(replace("rate_mbps = 2000", f"rate_mbps = {mbps}"))
        assert t.links[1].speed_code == code
