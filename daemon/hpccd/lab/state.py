"""A lab's state file (/run/hpccd/lab-<name>.json, written by Lab.up) read
back from any process: the labs that are up, and a lab's status read now
from the kernel (namespaces, links, queues, INT switch counters)."""
from __future__ import annotations

import json
import os
from typing import Any

from .names import NETNS_DIR, STATE_DIR, LabError, netns_name, state_path
from .queues import read_queue
from .topology import Topology


def load_state(name: str, state_dir: str = STATE_DIR) -> dict[str, Any]:
    path = state_path(name, state_dir)
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise LabError(f"no lab {name!r} (no state file {path})") from None
    except (OSError, ValueError) as e:
        raise LabError(f"lab {name!r}: unreadable state file {path}: {e}") from None


def list_labs(state_dir: str = STATE_DIR) -> list[str]:
    """Names of the labs with a state file."""
    try:
        files = os.listdir(state_dir)
    except FileNotFoundError:
        return []
    return sorted(f[4:-5] for f in files if f.startswith("lab-") and f.endswith(".json"))


def status(name: str, state_dir: str = STATE_DIR) -> dict[str, Any]:
    """A lab's namespaces, links and per-port queues (rate, limit, bytes,
    packets, drops, backlog), read now through pyroute2."""
    from pyroute2 import NetNS

    st = load_state(name, state_dir)
    topo = Topology.loads(st["topology_text"], st.get("topology_file", "<state>"))
    nodes = []
    for node in topo.nodes:
        ns_name = netns_name(st["name"], node)
        entry: dict[str, Any] = {"node": node, "netns": ns_name,
                                 "kind": "switch" if topo.is_switch(node) else "host",
                                 "exists": os.path.exists(f"{NETNS_DIR}/{ns_name}"),
                                 "interfaces": []}
        if entry["exists"]:
            try:
                with NetNS(ns_name, flags=0) as ns:
                    for i in st["interfaces"]:
                        if i["node"] != node:
                            continue
                        ln = topo.links[i["link"]]
                        found = ns.link_lookup(ifname=i["ifname"])
                        iface: dict[str, Any] = {
                            "ifname": i["ifname"], "link": i["link"], "peer": i["peer"],
                            "peer_ifname": i["peer_ifname"],
                            "address": f"{ln.end(node).address}/{ln.network.prefixlen}",
                            "rate_mbps": ln.rate_mbps, "buffer_bytes": ln.buffer_bytes,
                            "exists": bool(found)}
                        if found:
                            link = ns.get_links(found[0])[0]
                            iface["state"] = link.get_attr("IFLA_OPERSTATE")
                            iface["queue"] = read_queue(ns, found[0])
                        entry["interfaces"].append(iface)
            except Exception as e:              # gone meanwhile, or unreadable
                entry["error"] = repr(e)
            if topo.is_switch(node) and st.get("int_switch"):
                entry["int_switch"] = _int_switch_counters(st["name"], topo.switches[node])
        nodes.append(entry)
    return {"name": st["name"], "status": st["status"], "pid": st.get("pid"),
            "offloads": st.get("offloads"), "topology_file": st.get("topology_file"),
            "state_file": state_path(name, state_dir), "nodes": nodes,
            "links": [{"index": ln.index, "a": ln.a.node, "b": ln.b.node,
                       "network": str(ln.network), "rate_mbps": ln.rate_mbps,
                       "buffer_bytes": ln.buffer_bytes} for ln in topo.links]}


def _int_switch_counters(lab: str, sw) -> dict[str, Any]:
    """The INT switch's counters of every port of `sw`, {port: {name:
    [packets, bytes]}}, or {"error": ...} when the pins cannot be read."""
    from .int_switch import read_counters

    try:
        got = read_counters(lab, sw.name, [p.number for p in sw.ports])
    except Exception as e:
        return {"error": repr(e)}
    return {str(n): {k: list(v) for k, v in c.items()} for n, c in got.items()}
