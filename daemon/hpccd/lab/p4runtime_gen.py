"""Runtime configuration of the P4 switch (switch_p4/hpccd.p4) from a lab topology file.

One topology file (docs/topology.md) describes the lab for both switches: the
lab builder (hpccd.lab.netns) turns it into namespaces with the software INT
switch, and this module turns it into what each BMv2 ``simple_switch``
running hpccd.p4 needs.  Both read it through hpccd.lab.topology (validation,
addresses, port numbers, routes), so one description means one network.

Per switch, two files with the same content:

* ``<switch>.txt``: ``simple_switch_CLI`` commands, one per line (no comments
  and no blank lines: the CLI repeats the previous command on an empty line);
* ``<switch>.json``: the same entries as data (table, match fields by their
  P4 key expressions, action, parameters by their P4 names), and the ports
  they were derived from.  Not P4Runtime: BMv2's own CLI loads the .txt.

What is configured:

==================  ==========================================================
``switch_config``   default action ``set_switch_id``: the 12-bit id (pathID)
``port_config``     ``set_port_speed``: B, the speed code of the link's rate
``port_buffer``     ``set_port_buffer``: the link's buffer_bytes (buf_max)
``wred_profile``    ``wred_set`` on every port of a switch with ``ecn``:
                    K_min, K_max, the P_max slope, fast-start K and class
``ipv4_lpm``        a /32 ``forward`` (port, own MAC, next hop's MAC) to every
                    host; with ``ecmp=True``, ``ecmp_select`` where several
                    next hops are equally short
``ecmp_group``      ``forward`` per member (only with ``ecmp=True``)
queues              ``set_queue_depth`` / ``set_queue_rate`` of each port
==================  ==========================================================

No mirroring sessions, no multicast groups, no register writes: every
register starts at 0 when simple_switch loads the program.

Routes are the topology's (shortest path in switch hops, ties broken by the
order of the links in the file).  MAC addresses are not in the topology:
here an interface's MAC is ``02:00`` followed by the four bytes of its IPv4
address (locally administered, unique in a lab), and :func:`host_commands`
prints the host side that goes with it (MAC, address, default route, a
static neighbour entry for the gateway: the P4 switch answers no ARP).

Output is deterministic: the same file gives the same bytes.
"""
from __future__ import annotations

import argparse
import ipaddress
import json
import math
import pathlib
import sys
from typing import Iterable, Optional

from . import topology as topo_mod
from .topology import ETH_HLEN, Topology, TopologyError

__all__ = ["FAST_START_CLASSES", "switch_document", "cli_lines", "render", "write_runtime",
           "host_commands", "next_hops", "pmax_slope", "mac_of", "main"]

FORMAT = 1
PROGRAM = "switch_p4/hpccd.p4"
RUNTIME_DIR = pathlib.Path(__file__).resolve().parents[3] / "switch_p4" / "runtime"

# The shortest frame that reaches an egress queue: Ethernet + IPv4 header
# (ingress drops everything else).  BMv2's queues count packets; sized at
# buffer_bytes / this, the byte limit of the program always binds first.
MIN_QUEUED_FRAME = ETH_HLEN + 20
PMAX_SLOPE_MAX = (1 << 48) - 1          # wred_set's pmax_slope is bit<48>
NO_FAST_START_K = 0xFFFFFFFF            # wred_set's fast_start_k_bytes: never reached

# wred_set's fast_start_class: the packets whose ECN-incapable ones are
# dropped above fast_start_k_bytes (hpccd.p4 FS_*; the lab switch's
# HPCCD_SW_F_FS_*).  "hpccd": the native transport, where LDCP sends its
# first-RTT packets not-ECT; "all": every IPv4 packet (kernel TCP without ECN
# too); "dscp": packets with the DSCP given by --fast-start-dscp.
FAST_START_CLASSES = {"none": 0, "hpccd": 0x1, "dscp": 0x2, "all": 0x4}


def mac_of(addr: ipaddress.IPv4Address) -> str:
    """The MAC of the interface with IPv4 address addr: 02:00 + its four bytes."""
    return ":".join(f"{b:02x}" for b in b"\x02\x00" + addr.packed)


def next_hops(topo: Topology, switch: str, host: str) -> list:
    """Every port of switch on a shortest path to host, lowest first (the
    first is the topology's route: ties are broken by link order, and a
    switch's ports are numbered in link order)."""
    h = topo.hosts[host]
    dist = {h.switch: 1}
    todo = [h.switch]
    while todo:
        nxt = []
        for s in todo:
            for p in topo.switches[s].ports:
                if p.peer in topo.switches and p.peer not in dist:
                    dist[p.peer] = dist[s] + 1
                    nxt.append(p.peer)
        todo = nxt
    sw = topo.switches[switch]
    if switch == h.switch:
        return [p for p in sw.ports if p.link == h.link]
    return [p for p in sw.ports if p.peer in topo.switches and dist[p.peer] == dist[switch] - 1]


def pmax_slope(kmin: int, kmax: int, pmax: float) -> int:
    """wred_set's pmax_slope: floor(P_max x 2^32 / (K_max - K_min)); 0 when
    K_min = K_max (then q >= K_max marks and nothing else does)."""
    if kmax == kmin:
        return 0
    # P_max x 2^32 is exact in binary floating point (a power-of-two scale)
    return min(int(pmax * (1 << 32)) // (kmax - kmin), PMAX_SLOPE_MAX)


def _entry(table: str, action: str, match: Optional[list], params: list) -> dict:
    """match: [(P4 key expression, value)], None for the default action;
    params: [(P4 parameter name, value)]."""
    e: dict = {"table": table}
    if match is None:
        e["default"] = True
    else:
        e["match"] = dict(match)
    e["action"] = action
    e["params"] = dict(params)
    return e


def _source(topo: Topology) -> str:
    """The topology file as named in the output: the same in every checkout."""
    p = pathlib.Path(topo.file)
    if p.parent.name == topo_mod.BUNDLED_DIR and p.parent.parent.name == "hpccd":
        return f"daemon/hpccd/topologies/{p.name}"
    return p.name


def switch_document(topo: Topology, switch: str, *, ecmp: bool = False,
                    fast_start_class: str = "hpccd", fast_start_dscp: int = 0) -> dict:
    """Everything one switch needs, as data (written as <switch>.json)."""
    sw = topo.switches[switch]
    fs_class = FAST_START_CLASSES[fast_start_class]
    port_docs, queues = [], []
    entries = [_entry("switch_config", "set_switch_id", None, [("id", sw.id)])]
    for p in sw.ports:
        port_docs.append({
            "port": p.number, "link": p.link, "peer": p.peer,
            "address": str(p.address), "mac": mac_of(p.address),
            "peer_address": str(p.peer_address), "peer_mac": mac_of(p.peer_address),
            "rate_mbps": p.rate_mbps, "speed_code": p.speed_code,
            "buffer_bytes": p.buffer_bytes, "mtu": p.mtu,
        })
        queues.append({
            "port": p.number,
            "depth_pkts": math.ceil(p.buffer_bytes / MIN_QUEUED_FRAME),
            # BMv2 shapes in packets/s: the link rate holds for full-size frames
            "rate_pps": math.ceil(p.rate_mbps * 1_000_000 / (8 * (p.mtu + ETH_HLEN))),
        })
        entries.append(_entry("port_config", "set_port_speed",
                              [("smeta.egress_port", p.number)],
                              [("speed_code", p.speed_code)]))
        entries.append(_entry("port_buffer", "set_port_buffer",
                              [("smeta.egress_spec", p.number)],
                              [("buffer_bytes", p.buffer_bytes)]))
        if sw.ecn is not None:
            e = sw.ecn
            fsk = NO_FAST_START_K if e.fast_start_k_bytes is None else e.fast_start_k_bytes
            entries.append(_entry("wred_profile", "wred_set", [("port", p.number)], [
                ("kmin_bytes", e.kmin_bytes), ("kmax_bytes", e.kmax_bytes),
                ("pmax_slope", pmax_slope(e.kmin_bytes, e.kmax_bytes, e.pmax)),
                ("fast_start_k_bytes", fsk),
                ("fast_start_class", fs_class if e.fast_start_k_bytes is not None else 0),
                ("fast_start_dscp", fast_start_dscp)]))

    def fwd(p) -> list:
        return [("port", p.number), ("smac", mac_of(p.address)), ("dmac", mac_of(p.peer_address))]

    groups = []
    for r in topo.routes[switch]:
        dst = [("hdr.ipv4.dst_addr", [str(r.dst), 32])]
        hops = next_hops(topo, switch, r.host)
        assert hops[0].number == r.port, (switch, r)
        if ecmp and len(hops) > 1:
            groups.append(hops)
            entries.append(_entry("ipv4_lpm", "ecmp_select", dst,
                                  [("group", len(groups)), ("members", len(hops))]))
        else:
            entries.append(_entry("ipv4_lpm", "forward", dst, fwd(sw.port(r.port))))
    for g, hops in enumerate(groups, 1):
        for member, p in enumerate(hops):
            entries.append(_entry("ecmp_group", "forward",
                                  [("meta.ecmp_group", g), ("meta.ecmp_member", member)],
                                  fwd(p)))
    return {
        "about": f"runtime configuration of {PROGRAM} for switch {switch} of lab "
                 f"{topo.name}, generated by switch_p4/gen_runtime.py from "
                 f"{_source(topo)}; do not edit",
        "format": FORMAT,
        "program": PROGRAM,
        "topology": topo.name,
        "switch": switch,
        "switch_id": sw.id,
        "ecmp": ecmp,
        "ports": port_docs,
        "table_entries": entries,
        "queues": queues,
    }


def _cli_value(v) -> str:
    if isinstance(v, list):             # LPM: [address, prefix length]
        return f"{v[0]}/{v[1]}"
    return str(v)


def cli_lines(doc: dict) -> list[str]:
    """simple_switch_CLI commands of a switch document, in its order."""
    lines = []
    for e in doc["table_entries"]:
        params = " ".join(_cli_value(v) for v in e["params"].values())
        if e.get("default"):
            lines.append(f"table_set_default {e['table']} {e['action']} {params}".rstrip())
        else:
            match = " ".join(_cli_value(v) for v in e["match"].values())
            lines.append(f"table_add {e['table']} {e['action']} {match} => {params}".rstrip())
    for q in doc["queues"]:
        lines.append(f"set_queue_depth {q['depth_pkts']} {q['port']}")
        lines.append(f"set_queue_rate {q['rate_pps']} {q['port']}")
    return lines


def render(topo: Topology, **kw) -> dict[str, str]:
    """File name -> content, for every switch of topo (keywords: switch_document's)."""
    out = {}
    for switch in topo.switches:
        doc = switch_document(topo, switch, **kw)
        out[f"{switch}.txt"] = "\n".join(cli_lines(doc)) + "\n"
        out[f"{switch}.json"] = json.dumps(doc, indent=1) + "\n"
    return out


def write_runtime(topo: Topology, outdir: pathlib.Path, *, check: bool = False,
                  **kw) -> list[pathlib.Path]:
    """Writes the files of topo under outdir/<lab name>/, or with check=True
    only compares.  Returns the files that were (or would be) changed, and
    when checking also stray files in that directory."""
    d = outdir / topo.name
    files = render(topo, **kw)
    changed = []
    if not check:
        d.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        f = d / name
        if not f.exists() or f.read_text() != text:
            changed.append(f)
            if not check:
                f.write_text(text)
    if check and d.exists():
        changed += [f for f in sorted(d.iterdir()) if f.name not in files]
    return changed


def host_commands(topo: Topology, dev: str = "eth0") -> list[str]:
    """The host side of the addressing, as ``ip`` commands to run in each
    host's namespace (``dev``: its interface, {host} and {lab} expanded):
    MAC, address, default route via its switch, and a static neighbour entry
    for the gateway (the P4 switch answers no ARP)."""
    lines = []
    for h in topo.hosts.values():
        d = dev.format(host=h.name, lab=topo.name)
        lines += [
            f"# {h.name} (namespace {topo.name}-{h.name}): link {h.link} to {h.switch}",
            f"ip link set dev {d} address {mac_of(h.address)}",
            f"ip addr replace {h.address}/{h.prefixlen} dev {d}",
            f"ip link set dev {d} up",
            f"ip route replace default via {h.gateway} dev {d}",
            f"ip neigh replace {h.gateway} lladdr {mac_of(h.gateway)} dev {d} nud permanent",
        ]
    return lines


def main(argv: Optional[Iterable[str]] = None,
         default_out: pathlib.Path = RUNTIME_DIR) -> int:
    """The command line of switch_p4/gen_runtime.py."""
    ap = argparse.ArgumentParser(
        prog="gen_runtime.py",
        description="Write the BMv2 runtime configuration of switch_p4/hpccd.p4 "
                    "(simple_switch_CLI commands and JSON, per switch) from lab "
                    "topology files.")
    ap.add_argument("topology", nargs="*",
                    help="bundled name or TOML path (default: every bundled topology)")
    ap.add_argument("-o", "--out", type=pathlib.Path, default=default_out,
                    help="output directory; files go to OUT/<lab name>/ (default: %(default)s)")
    ap.add_argument("--ecmp", action="store_true",
                    help="install every equally short next hop as an ECMP group "
                         "instead of the first in link order")
    ap.add_argument("--fast-start-class", choices=sorted(FAST_START_CLASSES), default="hpccd",
                    help="packets whose ECN-incapable ones are dropped above "
                         "fast_start_k_bytes (default: %(default)s)")
    ap.add_argument("--fast-start-dscp", type=int, default=0, metavar="DSCP",
                    help="the DSCP of --fast-start-class dscp")
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 if any file would change")
    ap.add_argument("--hosts", action="store_true",
                    help="print the host-side ip commands instead of writing files")
    ap.add_argument("--dev", default="eth0",
                    help="host interface for --hosts; {host} and {lab} are expanded "
                         "(default: %(default)s, the lab's name)")
    args = ap.parse_args(None if argv is None else list(argv))
    if not 0 <= args.fast_start_dscp < 64:
        ap.error("--fast-start-dscp must be 0..63")
    names = args.topology or topo_mod.bundled()
    try:
        topos = [Topology.load(n) for n in names]
    except TopologyError as e:
        print(f"gen_runtime: {e}", file=sys.stderr)
        return 2
    if args.hosts:
        for t in topos:
            print("\n".join(host_commands(t, args.dev)))
        return 0
    status = 0
    for t in topos:
        changed = write_runtime(t, args.out, check=args.check, ecmp=args.ecmp,
                                fast_start_class=args.fast_start_class,
                                fast_start_dscp=args.fast_start_dscp)
        for f in changed:
            print(f"{'differs' if args.check else 'wrote'}: {f}")
            if args.check:
                status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
