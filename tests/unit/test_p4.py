"""The P4 switch program (switch_p4/hpccd.p4) and its control-plane generator,
checked without a P4 compiler (none is installable here; docs/switch.md).

Invariants protected:
  - the P4 header declarations of the INT header, the hop record and the
    hpccd header match include/hpccd/wire.h and int_hop.h field by field
    (names, widths, order), and the P4 constants match the C ones;
  - the P4 parser's hpccd errors are the classes of enum hpccd_wire_err in
    their order, and ingress maps each back to its number;
  - every shift amount fits in 8 bits (p4c-bm2-ss rejects wider ones);
  - every table and action the generated runtime files name exists in
    hpccd.p4 with the same match keys and action parameters, and every
    table has a size and a default action;
  - the committed runtime files are exactly what the generator writes;
  - the generated routes take every host to every other host, hop by hop
    through the tables, over shortest paths (1, 2 or 3 switches in the tree);
  - the port speed codes the generator writes are the C table's;
  - two pieces of the program's arithmetic, transcribed here (keep in step
    with hpccd.p4): the parser's length checks classify every shared test
    vector as the C parser does, and IntStamp's incremental checksum equals
    a full recomputation.
"""
from __future__ import annotations

import ipaddress
import json
import pathlib
import re
import struct

import pytest

from hpccd.lab import p4runtime_gen as gen
from hpccd.lab.topology import Topology

ROOT = pathlib.Path(__file__).resolve().parents[2]
P4_FILE = ROOT / "switch_p4" / "hpccd.p4"
WIRE_H = ROOT / "include" / "hpccd" / "wire.h"
INT_HOP_H = ROOT / "include" / "hpccd" / "int_hop.h"
INT_DECODE_C = ROOT / "fastpath" / "cc" / "int_decode.c"
RUNTIME = ROOT / "switch_p4" / "runtime"
VECTORS = ROOT / "tests" / "vectors" / "wire.json"
BUNDLED = ["dumbbell", "incast", "tree"]


# ---- reading the P4 source ------------------------------------------------------

def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _block(text: str, start: int) -> str:
    """The text between the brace at or after start and its matching brace."""
    i = text.index("{", start)
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1:j]
    raise ValueError("unbalanced braces")


class P4Source:
    """What the tests need from hpccd.p4: defines, typedefs, constants, headers,
    errors, actions and tables (a regex reading of the subset it uses)."""

    def __init__(self, path: pathlib.Path):
        raw = path.read_text()
        self.defines = dict(re.findall(r"^#define\s+(\w+)\s+(\S+)", raw, re.M))
        text = _strip_comments(raw)
        self.text = text
        self.typedefs = {n: int(w) for w, n in
                         re.findall(r"typedef\s+bit<(\d+)>\s+(\w+)\s*;", text)}
        const = r"const\s+\w+(?:<\d+>)?\s+(\w+)\s*=\s*(0x[0-9a-fA-F]+|\d+)\s*;"
        self.consts = {n: int(v, 0) for n, v in re.findall(const, text)}
        self.headers: dict[str, list[tuple[str, int]]] = {}
        for m in re.finditer(r"\bheader\s+(\w+)\s*\{", text):
            fields = []
            for typ, name in re.findall(r"(\w+(?:<\d+>)?)\s+(\w+)\s*;", _block(text, m.start())):
                fields.append((name, self.width(typ)))
            self.headers[m.group(1)] = fields
        m = re.search(r"\berror\s*\{([^}]*)\}", text)
        self.errors = [e.strip() for e in m.group(1).split(",") if e.strip()]
        # actions: control-plane name (absolute @name without the dot, else the
        # identifier) -> parameter names; ident -> control-plane name
        self.actions: dict[str, list[str]] = {}
        self.action_name: dict[str, str] = {}
        for m in re.finditer(r'(?:@name\("\.?([\w.]+)"\)\s*)?\baction\s+(\w+)\s*\(([^)]*)\)', text):
            name = m.group(1) or m.group(2)
            params = [p.split()[-1] for p in m.group(3).split(",") if p.strip()]
            self.actions[name] = params
            self.action_name[m.group(2)] = name
        self.tables: dict[str, dict] = {}
        for m in re.finditer(r'(?:@name\("\.?([\w.]+)"\)\s*)?\btable\s+(\w+)\s*\{', text):
            body = _block(text, m.start())
            key = re.search(r"\bkey\s*=\s*\{([^}]*)\}", body)
            keys = re.findall(r"([\w.]+)\s*:\s*(\w+)\s*;", key.group(1)) if key else []
            acts = re.search(r"\bactions\s*=\s*\{([^}]*)\}", body).group(1)
            size = re.search(r"\bsize\s*=\s*(\w+)\s*;", body)
            default = re.search(r"\bdefault_action\s*=\s*(\w+)\s*\(", body)
            self.tables[m.group(1) or m.group(2)] = {
                "ident": m.group(2),
                "keys": keys,
                "actions": [self.action_name.get(a.strip(), a.strip())
                            for a in acts.split(";") if a.strip()],
                "size": size.group(1) if size else None,
                "default": self.action_name.get(default.group(1)) if default else None,
            }

    def width(self, typ: str) -> int:
        m = re.fullmatch(r"bit<(\d+)>", typ)
        if m:
            return int(m.group(1))
        m = re.fullmatch(r"varbit<(\d+)>", typ)
        if m:
            return -int(m.group(1))
        return self.typedefs[typ]


P4 = P4Source(P4_FILE)


# ---- reading the C headers --------------------------------------------------------

C_WIDTH = {"__u8": 8, "__be16": 16, "__u16": 16, "__be32": 32, "__u32": 32, "__u64": 64}


def _c_structs() -> dict[str, list[tuple[str, int]]]:
    text = _strip_comments(WIRE_H.read_text() + INT_HOP_H.read_text())
    out = {}
    for name, body in re.findall(r"struct\s+(\w+)\s*\{(.*?)\};", text, re.S):
        out[name] = [(f, C_WIDTH[t] * (int(n) if n else 1))
                     for t, f, n in re.findall(r"(\w+)\s+(\w+)(?:\[(\d+)\])?\s*;", body)]
    return out


def _c_defines() -> dict[str, int]:
    out = {}
    for path in (WIRE_H, INT_HOP_H):
        for name, val in re.findall(r"^#define\s+(HPCCD_\w+)\s+(0x[0-9a-fA-F]+|\d+)(?:ULL|U)?\b",
                                    path.read_text(), re.M):
            out[name] = int(val, 0)
    return out


def _c_enum(name: str) -> dict[str, int]:
    text = _strip_comments(WIRE_H.read_text())
    body = re.search(r"enum\s+" + name + r"\s*\{(.*?)\};", text, re.S).group(1)
    return {k: int(v) for k, v in re.findall(r"(\w+)\s*=\s*(\d+)", body)}


C_STRUCTS = _c_structs()
C_DEFINES = _c_defines()


# ---- (a) header declarations against the C headers -------------------------------

# The correspondence, written once: each C struct field and the P4 fields it
# is split into (most significant first).  A C byte or word that packs
# several fields (magic_ver, nhop_room, path_flags, ver_type; the hop word)
# is split in P4 so that the program can read the parts; widths that come
# from a C constant are checked against it below.
CORRESPONDENCE = {
    ("hpccd_int_hdr", "hpccd_int_t"): [
        ("magic_ver", [("magic", 4), ("ver", 4)]),          # magic << 4 | version
        ("nhop_room", [("nhop", 4), ("room", 4)]),          # nHop << 4 | room
        ("path_flags", [("flags", 4), ("path_id", 12)]),    # flags << 12 | pathID
    ],
    ("hpccd_int_hop_wire", "hpccd_hop_t"): [
        # one 64-bit word as two __be32 halves; fields at HPCCD_INT_*_SHIFT/_BITS
        ("hi_be+lo_be", [("speed_code", "SPEED"), ("ts", "TS"), ("tx_units", "TX"),
                         ("qlen_units", "QLEN")]),
    ],
    ("hpccd_hdr", "hpccd_hdr_t"): [
        ("ver_type", [("ver", 4), ("msg_type", 4)]),        # version << 4 | type
        ("flags", [("flags", 8)]),
        ("len", [("len", 16)]),
        ("flow_id", [("flow_id", 32)]),
        ("seq_hi", [("seq_hi", 32)]),
        ("seq_lo", [("seq_lo", 32)]),
        ("ack_hi", [("ack_hi", 32)]),
        ("ack_lo", [("ack_lo", 32)]),
        ("ts", [("ts", 32)]),
        ("aux", [("aux", 32)]),
    ],
}


def _expected_p4_fields(c_struct: str, corr: list) -> list[tuple[str, int]]:
    """The P4 fields the C struct calls for, with every width resolved and the
    split words checked to add up to the C field's width."""
    c_fields = dict(C_STRUCTS[c_struct])
    out = []
    for c_name, parts in corr:
        resolved = [(n, C_DEFINES[f"HPCCD_INT_{w}_BITS"] if isinstance(w, str) else w)
                    for n, w in parts]
        c_width = sum(c_fields[n] for n in c_name.split("+"))
        assert sum(w for _, w in resolved) == c_width, (c_struct, c_name)
        out += resolved
    assert [n for c, _ in corr for n in c.split("+")] == [n for n, _ in C_STRUCTS[c_struct]], \
        f"the correspondence table does not cover struct {c_struct} in order"
    return out


@pytest.mark.parametrize("c_struct,p4_header", list(CORRESPONDENCE), ids=lambda x: x)
def test_p4_header_matches_c_struct(c_struct, p4_header):
    expected = _expected_p4_fields(c_struct, CORRESPONDENCE[(c_struct, p4_header)])
    assert P4.headers[p4_header] == expected


def test_hop_fields_sit_where_the_shift_constants_put_them():
    msb = 64
    for name, width in P4.headers["hpccd_hop_t"]:
        key = {"speed_code": "SPEED", "ts": "TS", "tx_units": "TX", "qlen_units": "QLEN"}[name]
        assert C_DEFINES[f"HPCCD_INT_{key}_SHIFT"] == msb - width, name
        msb -= width
    assert msb == 0
    assert sum(w for _, w in P4.headers["hpccd_hop_t"]) == C_DEFINES["HPCCD_INT_HOP_BYTES"] * 8


def test_int_header_widths_hold_the_c_constants():
    f = dict(P4.headers["hpccd_int_t"])
    assert f["path_id"] == bin(C_DEFINES["HPCCD_INT_PATH_MASK"]).count("1")
    assert C_DEFINES["HPCCD_INT_F_MASK"] < 1 << f["flags"]
    assert C_DEFINES["HPCCD_INT_MAX_HOPS"] < 1 << f["room"]
    assert sum(f.values()) == C_DEFINES["HPCCD_INT_HDR_BYTES"] * 8
    assert sum(w for _, w in P4.headers["hpccd_hdr_t"]) == C_DEFINES["HPCCD_HDR_BYTES"] * 8


def test_p4_constants_match_c():
    c = C_DEFINES
    assert P4.consts["INT_MAGIC"] == c["HPCCD_INT_MAGIC"]
    assert P4.consts["WIRE_VERSION"] == c["HPCCD_WIRE_VERSION"]
    assert P4.consts["INT_F_COLLECT"] == c["HPCCD_INT_F_COLLECT"]
    assert P4.consts["INT_F_OVERFLOW"] == c["HPCCD_INT_F_OVERFLOW"]
    assert P4.consts["QLEN_MAX"] == c["HPCCD_INT_QLEN_MAX"]
    assert P4.consts["QLEN_SAT_BYTES"] == c["HPCCD_INT_QLEN_MAX"] * c["HPCCD_INT_QLEN_UNIT"]
    assert int(P4.defines["HPCCD_INT_MAX_HOPS"]) == c["HPCCD_INT_MAX_HOPS"]
    assert int(P4.defines["HPCCD_UDP_PORT"]) == c["HPCCD_UDP_PORT_DEFAULT"]
    assert int(P4.defines["HPCCD_PROBE_DSCP"]) == c["HPCCD_PROBE_DSCP_DEFAULT"]
    types = _c_enum("hpccd_type")
    assert P4.consts["HPCCD_T_MIN"] == types["HPCCD_T_DATA"]
    assert P4.consts["HPCCD_T_MAX"] == types["HPCCD_T_MAX"]
    assert P4.headers["hpccd_hop_t"][2] == ("tx_units", c["HPCCD_INT_TX_BITS"])
    assert c["HPCCD_INT_TX_UNIT"] == 1 << 7        # tx_units = tx_bytes >> 7 in hpccd.p4
    assert "(meta.tx_deq_bytes >> 7)" in P4.text


def test_qlen_division_by_80_is_exact_below_saturation():
    """qLen = floor(q / 80) by multiply and shift: floor(q M / 2^S) is monotone
    in q, so exactness at both ends of every 80-byte step is exactness
    everywhere up to saturation."""
    mul, shift = P4.consts["QLEN_DIV80_MUL"], P4.consts["QLEN_DIV80_SHIFT"]
    unit, qmax = C_DEFINES["HPCCD_INT_QLEN_UNIT"], C_DEFINES["HPCCD_INT_QLEN_MAX"]
    for k in range(qmax + 1):
        for q in (k * unit, k * unit + unit - 1):
            assert (q * mul) >> shift == k, q


def test_shift_amounts_fit_in_8_bits():
    """p4c-bm2-ss rejects a shift whose amount is wider than 8 bits ("shift
    amount limited to 8 bits on this target"), a named constant too: every
    shift amount is a literal below 256 or a constant declared bit<8> or
    narrower (the first compile of hpccd.p4 failed on a bit<64> one)."""
    widths = {n: int(w) for w, n in re.findall(r"const\s+bit<(\d+)>\s+(\w+)\s*=", P4.text)}
    amounts = re.findall(r"(?:>>|<<)\s*(\w+)", P4.text)
    assert amounts
    for a in amounts:
        if a.isdigit():
            assert int(a) < 256, a
        else:
            assert widths.get(a, P4.typedefs.get(a, 99)) <= 8, a


def test_parser_errors_are_the_wire_error_classes_in_order():
    enum = _c_enum("hpccd_wire_err")
    c_order = [k for k, v in sorted(enum.items(), key=lambda kv: kv[1])
               if 0 < v < enum["HPCCD_E_MAX"]]
    p4_order = [e for e in P4.errors if e.startswith("Hpccd")]
    assert len(p4_order) == len(c_order)
    # the ingress mapping: error.HpccdX -> code
    pattern = r"parser_error\s*==\s*error\.(Hpccd\w+)\)\s*\{\s*code\s*=\s*(\d+)"
    mapping = {e: int(n) for e, n in re.findall(pattern, P4.text)}
    assert [mapping[e] for e in p4_order] == [enum[c] for c in c_order]
    # and the parser's verify() calls name them in the same order
    verifies = re.findall(r"verify\([^;]*?error\.(Hpccd\w+)\)", P4.text, re.S)
    assert verifies == p4_order


def test_every_table_has_size_and_default_action():
    assert P4.tables
    for name, t in P4.tables.items():
        assert t["size"] is not None, name
        assert t["default"] in t["actions"], name


# ---- speed codes ------------------------------------------------------------------

def _c_speed_table() -> list[int]:
    body = re.search(r"speed_mbps\[HPCCD_SPEED_CODES\]\s*=\s*\{(.*?)\};",
                     INT_DECODE_C.read_text(), re.S).group(1)
    return [int(x) for x in re.findall(r"\d+", _strip_comments(body))]


def test_c_speed_table_is_read():
    t = _c_speed_table()
    assert len(t) == C_DEFINES["HPCCD_SPEED_CODES"] and t[0] == 0 and t[14] == 1000


@pytest.mark.parametrize("name", BUNDLED)
def test_generated_speed_codes_are_the_c_tables(name):
    c_table = _c_speed_table()
    for f in sorted((RUNTIME / name).glob("*.json")):
        doc = json.loads(f.read_text())
        for p in doc["ports"]:
            assert c_table[p["speed_code"]] == p["rate_mbps"], (f.name, p["port"])
        codes = {e["match"]["smeta.egress_port"]: e["params"]["speed_code"]
                 for e in doc["table_entries"] if e["table"] == "port_config"}
        assert codes == {p["port"]: p["speed_code"] for p in doc["ports"]}


# ---- (b) the generated configuration names only what hpccd.p4 declares -------------

def _runtime_files(name: str) -> list[pathlib.Path]:
    return sorted((RUNTIME / name).iterdir())


def _parse_cli(line: str) -> dict:
    words = line.split()
    if words[0] == "table_set_default":
        return {"cmd": "default", "table": words[1], "action": words[2], "match": [],
                "params": words[3:]}
    if words[0] == "table_add":
        arrow = words.index("=>")
        return {"cmd": "add", "table": words[1], "action": words[2], "match": words[3:arrow],
                "params": words[arrow + 1:]}
    assert words[0] in ("set_queue_depth", "set_queue_rate"), line
    assert len(words) == 3 and all(w.isdigit() for w in words[1:]), line
    return {"cmd": words[0], "value": int(words[1]), "port": int(words[2])}


@pytest.mark.parametrize("name", BUNDLED)
def test_cli_commands_use_declared_tables_and_actions(name):
    for f in _runtime_files(name):
        if f.suffix != ".txt":
            continue
        text = f.read_text()
        assert text.endswith("\n") and "\n\n" not in text and "#" not in text
        ports = {p["port"] for p in json.loads(f.with_suffix(".json").read_text())["ports"]}
        for line in text.splitlines():
            c = _parse_cli(line)
            if c["cmd"] in ("set_queue_depth", "set_queue_rate"):
                assert c["port"] in ports and c["value"] > 0
                continue
            t = P4.tables[c["table"]]
            assert c["action"] in t["actions"], line
            assert len(c["match"]) == len(t["keys"]), line
            assert len(c["params"]) == len(P4.actions[c["action"]]), line
            for value, (_, kind) in zip(c["match"], t["keys"]):
                if kind == "lpm":
                    ipaddress.IPv4Network(value)
                else:
                    assert kind == "exact" and value.isdigit(), line


@pytest.mark.parametrize("name", BUNDLED)
def test_json_entries_name_keys_and_parameters_as_in_p4(name):
    for f in _runtime_files(name):
        if f.suffix != ".json":
            continue
        doc = json.loads(f.read_text())
        assert doc["program"] == "switch_p4/hpccd.p4" and doc["topology"] == name
        for e in doc["table_entries"]:
            t = P4.tables[e["table"]]
            assert e["action"] in t["actions"]
            assert list(e["params"]) == P4.actions[e["action"]], e
            if e.get("default"):
                assert "match" not in e
            else:
                assert list(e["match"]) == [k for k, _ in t["keys"]], e
        # the .txt is the same entries, in the same order
        assert gen.cli_lines(doc) == f.with_suffix(".txt").read_text().splitlines()


def test_generator_configures_every_table_the_program_needs():
    used = set()
    for name in BUNDLED:
        for f in _runtime_files(name):
            if f.suffix == ".json":
                used |= {e["table"] for e in json.loads(f.read_text())["table_entries"]}
    # ecmp_group is only written with --ecmp (test_ecmp_groups_reach_every_host)
    assert used == set(P4.tables) - {"ecmp_group"}


# ---- (c) the committed files are the generator's output ----------------------------

@pytest.mark.parametrize("name", BUNDLED)
def test_runtime_files_are_up_to_date(name, tmp_path):
    topo = Topology.load(name)
    assert gen.write_runtime(topo, RUNTIME, check=True) == [], \
        "stale: run python3 switch_p4/gen_runtime.py"
    written = gen.write_runtime(topo, tmp_path)
    assert sorted(f.name for f in written) == [f.name for f in _runtime_files(name)]
    for f in written:
        assert f.read_bytes() == (RUNTIME / name / f.name).read_bytes()


def test_generator_cli_check_mode(tmp_path, capsys):
    assert gen.main(["--check", "-o", str(RUNTIME)]) == 0
    assert gen.main(["incast", "-o", str(tmp_path)]) == 0
    assert gen.main(["incast", "-o", str(tmp_path), "--check"]) == 0
    (tmp_path / "incast" / "s1.txt").write_text("stale\n")
    assert gen.main(["incast", "-o", str(tmp_path), "--check"]) == 1
    assert "differs" in capsys.readouterr().out


# ---- (d) routes: walk the tables hop by hop -----------------------------------------

def _toml(name: str) -> dict:
    import tomllib
    return tomllib.loads((ROOT / "daemon" / "hpccd" / "topologies" / f"{name}.toml").read_text())


def _addressing(doc: dict):
    """Addresses, port numbers and hosts by docs/topology.md, computed here from
    the TOML alone (not through hpccd.lab.topology)."""
    subnet = ipaddress.IPv4Network(doc["lab"]["subnet"])
    switches = {s["name"] for s in doc["switches"]}
    addr, peer_at, hosts = {}, {}, {}
    nports = dict.fromkeys(switches, 0)
    for i, ln in enumerate(doc["links"]):
        a, b = ln["endpoints"]
        base = subnet.network_address + 4 * i
        addr[(i, a)], addr[(i, b)] = base + 1, base + 2
        for me, other in ((a, b), (b, a)):
            if me in switches:
                nports[me] += 1
                peer_at[(me, nports[me])] = (other, i)
            else:
                hosts[me] = (i, addr[(i, me)], other)
    return switches, hosts, addr, peer_at


def _mac(a: ipaddress.IPv4Address) -> str:
    """docs/switch.md: 02:00 and the four bytes of the interface's address."""
    return "02:00:" + ":".join(f"{b:02x}" for b in a.packed)


def _tables(files: dict[str, str]) -> dict[str, dict]:
    """switch -> {"lpm": [(net, action, params)], "ecmp": {(group, member): params}}."""
    out = {}
    for fname, text in files.items():
        if not fname.endswith(".txt"):
            continue
        t: dict = {"lpm": [], "ecmp": {}}
        for line in text.splitlines():
            c = _parse_cli(line)
            if c.get("table") == "ipv4_lpm":
                t["lpm"].append((ipaddress.IPv4Network(c["match"][0]), c["action"], c["params"]))
            elif c.get("table") == "ecmp_group":
                t["ecmp"][tuple(int(x) for x in c["match"])] = c["params"]
        out[fname[:-4]] = t
    return out


def _walk(doc: dict, files: dict[str, str], src: str, dst: str) -> list[list[str]]:
    """Every path a packet from host src to host dst can take through the
    tables (one per ECMP member choice), each as the switches it crosses.
    At every hop the MACs the entry writes must be this port's and the next
    hop's on that link."""
    switches, hosts, addr, peer_at = _addressing(doc)
    tables = _tables(files)
    dst_addr = hosts[dst][1]

    def follow(node: str, path: list[str]) -> list[list[str]]:
        if node == dst:
            return [path]
        assert node in switches, f"{src}->{dst}: delivered to host {node}"
        assert len(path) < 16, f"{src}->{dst}: loop {path}"
        matches = [m for m in tables[node]["lpm"] if dst_addr in m[0]]
        assert matches, f"{node} has no route to {dst}"
        _, action, params = max(matches, key=lambda m: m[0].prefixlen)
        if action == "ecmp_select":
            choices = [tables[node]["ecmp"][(int(params[0]), m)] for m in range(int(params[1]))]
        else:
            assert action == "forward"
            choices = [params]
        out = []
        for port, smac, dmac in choices:
            nxt, lk = peer_at[(node, int(port))]
            assert (smac, dmac) == (_mac(addr[(lk, node)]), _mac(addr[(lk, nxt)])), (node, port)
            out += follow(nxt, path + [node])
        return out

    return follow(hosts[src][2], [])


def _committed(name: str) -> dict[str, str]:
    return {f.name: f.read_text() for f in _runtime_files(name)}


@pytest.mark.parametrize("name", BUNDLED)
def test_every_host_reaches_every_other_host(name):
    doc, files, topo = _toml(name), _committed(name), Topology.load(name)
    hosts = _addressing(doc)[1]
    for a in hosts:
        for b in hosts:
            if a != b:
                assert _walk(doc, files, a, b) == [[h.switch for h in topo.path(a, b)]], (a, b)


def test_tree_paths_have_one_two_or_three_switches():
    doc, files = _toml("tree"), _committed("tree")
    names = ("h1", "h2", "h3", "h4", "h5")
    hops = {(a, b): len(_walk(doc, files, a, b)[0]) for a in names for b in names if a != b}
    assert hops[("h1", "h2")] == hops[("h3", "h4")] == 1        # same ToR
    assert hops[("h1", "h5")] == hops[("h5", "h4")] == 2        # ToR and aggregation
    assert hops[("h1", "h3")] == hops[("h4", "h2")] == 3        # ToR, aggregation, ToR
    assert set(hops.values()) == {1, 2, 3}


def test_dumbbell_and_incast_paths():
    doc, files = _toml("dumbbell"), _committed("dumbbell")
    assert _walk(doc, files, "h1", "h2") == [["s1"]]
    assert _walk(doc, files, "h1", "r1") == [["s1", "s2"]]
    assert _walk(doc, files, "r2", "h3") == [["s2", "s1"]]
    doc, files = _toml("incast"), _committed("incast")
    assert _walk(doc, files, "h7", "r1") == [["s1"]]


DIAMOND = """
[lab]
name = "diamond"
subnet = "10.120.0.0/24"
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
ecn = { kmin_bytes = 2000, kmax_bytes = 10000, pmax = 0.5 }
[[hosts]]
name = "a"
[[hosts]]
name = "b"
[[links]]
endpoints = ["a", "s1"]
[[links]]
endpoints = ["s1", "s2"]
[[links]]
endpoints = ["s1", "s3"]
[[links]]
endpoints = ["s2", "s4"]
[[links]]
endpoints = ["s3", "s4"]
[[links]]
endpoints = ["s4", "b"]
"""


def test_ecmp_groups_take_every_shortest_path():
    """Two equally short paths between a and b: without ECMP the first in link
    order (through s2), with ECMP a group of both."""
    import tomllib
    doc = tomllib.loads(DIAMOND)
    topo = Topology.loads(DIAMOND, "diamond.toml")
    plain, ecmp = gen.render(topo), gen.render(topo, ecmp=True)
    assert _walk(doc, plain, "a", "b") == [["s1", "s2", "s4"]]
    assert sorted(_walk(doc, ecmp, "a", "b")) == [["s1", "s2", "s4"], ["s1", "s3", "s4"]]
    assert sorted(_walk(doc, ecmp, "b", "a")) == [["s4", "s2", "s1"], ["s4", "s3", "s1"]]
    assert "ecmp_group" not in plain["s1.txt"]
    for text in ecmp.values():
        if text.startswith("{"):
            for e in json.loads(text)["table_entries"]:
                assert list(e["params"]) == P4.actions[e["action"]]
                if not e.get("default"):
                    assert list(e["match"]) == [k for k, _ in P4.tables[e["table"]]["keys"]]
    # s4 marks: P_max 0.5 over 8000 bytes; no fast_start_k_bytes: no fast-start drop
    s4 = json.loads(ecmp["s4.json"])
    (w,) = {tuple(e["params"].values()) for e in s4["table_entries"]
            if e["table"] == "wred_profile"}
    assert w == (2000, 10000, (1 << 31) // 8000, 0xFFFFFFFF, 0, 0)


@pytest.mark.parametrize("kmin,kmax,pmax,q,p", [
    (3000, 3000, 1.0, 2999, 0.0),                # DCTCP: below K no mark (q < K_max, q < K_min)
    (1000, 5000, 1.0, 3000, 0.5),
    (1000, 5000, 0.2, 4999, 0.2 * 3999 / 4000),
    (0, 100000, 1.0, 50000, 0.5),
])
def test_wred_slope_gives_the_seed_probability(kmin, kmax, pmax, q, p):
    """hpccd.p4 Wred: p x 2^16 = ((q - K_min) x pmax_slope) >> 16 for K_min <= q < K_max."""
    slope = gen.pmax_slope(kmin, kmax, pmax)
    p16 = ((q - kmin) * slope) >> 16 if kmin <= q < kmax else 0
    assert abs(p16 / 65536 - p) < 2 / 65536


def test_fast_start_class_option():
    topo = Topology.load("dumbbell")
    doc = gen.switch_document(topo, "s1", fast_start_class="dscp", fast_start_dscp=46)
    (w,) = {tuple(e["params"].values()) for e in doc["table_entries"]
            if e["table"] == "wred_profile"}
    assert w == (3000, 3000, 0, 3000, P4.consts["FS_DSCP"], 46)
    assert gen.FAST_START_CLASSES["hpccd"] == P4.consts["FS_HPCCD"]
    assert gen.FAST_START_CLASSES["all"] == P4.consts["FS_ALL"]


def test_host_commands_match_the_switch_macs():
    topo = Topology.load("incast")
    lines = gen.host_commands(topo)
    doc = json.loads((RUNTIME / "incast" / "s1.json").read_text())
    port1 = doc["ports"][0]
    assert f"ip link set dev eth0 address {port1['peer_mac']}" in lines
    assert (f"ip neigh replace {port1['address']} lladdr {port1['mac']} dev eth0 "
            "nud permanent") in lines
    assert f"ip route replace default via {port1['address']} dev eth0" in lines


# ---- transcriptions of hpccd.p4's arithmetic, over the shared test vectors ---------
#
# No P4 compiler or BMv2 here, so these run Python copies of two pieces of the
# program.  They check the design (the three length bounds checked together
# instead of a minimum; the RFC 1624 update over the words that change), not
# the P4 text itself; keep them in step with SwitchParser and IntStamp.

def _vectors() -> list[dict]:
    return json.loads(VECTORS.read_text())["vectors"]


def _p4_parser_model(frame: bytes, port: int = 18471, probe_dscp: int = 45):
    """SwitchParser: None when the packet is not an hpccd packet (forwarded
    untouched), else the enum hpccd_wire_err code (0 = valid) and offsets."""
    off = 14
    et = struct.unpack_from("!H", frame, 12)[0]
    if et == 0x8100:
        et = struct.unpack_from("!H", frame, 16)[0]
        off = 18
    if et != 0x0800:
        return None
    vihl, tos, total = frame[off], frame[off + 1], struct.unpack_from("!H", frame, off + 2)[0]
    ihl = (vihl & 0xF) * 4
    assert vihl >> 4 == 4 and ihl >= 20 and total >= ihl     # else DROP_PARSER
    frag, proto = struct.unpack_from("!H", frame, off + 6)[0] & 0x1FFF, frame[off + 9]
    ip_payload, l4 = total - ihl, off + ihl
    if frag != 0:
        return None
    if proto == 17:
        if ip_payload < 8:
            return None
        sport, dport, ulen = struct.unpack_from("!HHH", frame, l4)
        if ulen < 8 or port not in (sport, dport):
            return None
        start = l4 + 8
        rg = (ulen - 8, ip_payload - 8, len(frame) - start)
    elif proto == 6:
        if ip_payload < 20:
            return None
        doff = frame[l4 + 12] >> 4
        flags = (frame[l4 + 12] & 1) << 8 | frame[l4 + 13]
        start = l4 + doff * 4
        short = ip_payload - doff * 4 < 0 or len(frame) - start < 0
        if tos >> 2 != probe_dscp or flags != 0 or short or doff < 5:
            return None
        rg = (ip_payload - doff * 4,) * 2 + (len(frame) - start,)
        if rg[0] < 1 or rg[2] < 1 or frame[start] >> 4 != 0xC:
            return None
    else:
        return None

    def fits(need):
        return all(r >= need for r in rg)

    if not fits(4):
        return 1, start
    magic, ver = frame[start] >> 4, frame[start] & 0xF
    nhop, room = frame[start + 1] >> 4, frame[start + 1] & 0xF
    for code, ok in ((2, magic == 0xC), (3, ver == 1), (4, room <= 8), (5, nhop <= room)):
        if not ok:
            return code, start
    need = 4 + 8 * room
    if not fits(need):
        return 6, start
    need += 32
    if not fits(need):
        return 7, start
    h = start + 4 + 8 * room
    if frame[h] >> 4 != 1:
        return 8, start
    if not 1 <= frame[h] & 0xF <= 7:
        return 9, start
    need += struct.unpack_from("!H", frame, h + 2)[0]
    if not (fits(need) and need in rg):
        return 10, start
    return 0, start


@pytest.mark.parametrize("v", _vectors(), ids=lambda v: v["name"])
def test_parser_length_checks_classify_the_vectors(v):
    got = _p4_parser_model(bytes.fromhex(v["hex"]))
    assert got is not None and got[0] == v["error"]


def _fold(s: int) -> int:
    s = (s & 0xFFFF) + (s >> 16)
    return (s & 0xFFFF) + (s >> 16)


def _words(b: bytes) -> int:
    return sum(struct.unpack(f"!{len(b) // 2}H", b))


def _int_stamp_model(frame: bytearray, start: int, switch_id: int, hop: int, udp: bool) -> str:
    """IntStamp on a frame whose INT header is at start: the result and the
    frame rewritten in place, checksum patched as csum_replace() does."""
    csum_at = start - 2 if udp else start - 4       # UDP: last 2 bytes; TCP (20 bytes): offset 16
    w = frame[start:start + 4]
    nhop, room, flags = w[1] >> 4, w[1] & 0xF, w[2] >> 4
    if not flags & 0x8:
        return "skip"
    if nhop == room:
        if flags & 0x4:
            return "overflow"
        old, frame[start + 2] = bytes(frame[start:start + 4]), frame[start + 2] | 0x40
        new, result = bytes(frame[start:start + 4]), "overflow"
    else:
        at = start + 4 + 8 * nhop
        old = bytes(frame[start:start + 4]) + bytes(frame[at:at + 8])
        frame[at:at + 8] = hop.to_bytes(8, "big")
        frame[start + 1] = (nhop + 1) << 4 | room
        pf = struct.unpack_from("!H", frame, start + 2)[0]
        struct.pack_into("!H", frame, start + 2, (pf & 0xF000) | ((pf ^ switch_id) & 0x0FFF))
        new, result = bytes(frame[start:start + 4]) + bytes(frame[at:at + 8]), "written"
    hc = struct.unpack_from("!H", frame, csum_at)[0]
    if udp and hc == 0:
        return result
    c = ~_fold((~hc & 0xFFFF) + (~_fold(_words(old)) & 0xFFFF) + _fold(_words(new))) & 0xFFFF
    if udp and c == 0:
        c = 0xFFFF
    struct.pack_into("!H", frame, csum_at, c)
    return result


def _stampable():
    return [v for v in _vectors() if v["error"] == 0 and v["fields"]["int"]["flags"] & 0x8]


def _full_l4_checksum(frame: bytes, udp: bool) -> int:
    """RFC 1071 over the IPv4 pseudo-header and the L4 segment with its
    checksum field taken as zero (the segment as the IPv4 total length and,
    for UDP, the UDP length bound it)."""
    ip = 14
    ihl = (frame[ip] & 0xF) * 4
    total = struct.unpack_from("!H", frame, ip + 2)[0]
    l4 = ip + ihl
    length = struct.unpack_from("!H", frame, l4 + 4)[0] if udp else total - ihl
    seg = bytearray(frame[l4:l4 + length])
    seg[6 if udp else 16:8 if udp else 18] = b"\0\0"
    if len(seg) % 2:
        seg += b"\0"
    pseudo = frame[ip + 12:ip + 20] + struct.pack("!BBH", 0, 17 if udp else 6, length)
    c = ~_fold(_words(pseudo) + _words(bytes(seg))) & 0xFFFF
    return 0xFFFF if udp and c == 0 else c


@pytest.mark.parametrize("v", _stampable(), ids=lambda v: v["name"])
def test_int_stamp_checksum_equals_full_recomputation(v):
    frame = bytearray.fromhex(v["hex"])
    _, start = _p4_parser_model(bytes(frame))
    udp = v["l4"] == "udp"
    csum_at = start - 2 if udp else start - 4
    before = struct.unpack_from("!H", frame, csum_at)[0]
    assert before == _full_l4_checksum(bytes(frame), udp)       # the vector's own
    hop = (14 << 59) | (0xABCDEF << 35) | (0x12345 << 15) | 0x0042
    result = _int_stamp_model(frame, start, 0x5A5, hop, udp)
    f = v["fields"]["int"]
    assert result == ("written" if f["nhop"] < f["room"] else "overflow")
    after = struct.unpack_from("!H", frame, csum_at)[0]
    assert after == _full_l4_checksum(bytes(frame), udp)
    if result == "written":
        assert frame[start + 1] >> 4 == f["nhop"] + 1
        assert frame[start + 4 + 8 * f["nhop"]:start + 12 + 8 * f["nhop"]] == hop.to_bytes(8, "big")
        assert struct.unpack_from("!H", frame, start + 2)[0] & 0xFFF == f["path_id"] ^ 0x5A5
        assert after != before
    # a zero UDP checksum ("none") stays zero
    if udp:
        frame = bytearray.fromhex(v["hex"])
        struct.pack_into("!H", frame, csum_at, 0)
        _int_stamp_model(frame, start, 0x5A5, hop, True)
        assert struct.unpack_from("!H", frame, csum_at)[0] == 0
