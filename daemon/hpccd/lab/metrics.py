"""Prometheus for a lab: an address of each host that the root namespace
reaches, and the ``prometheus.yml`` that scrapes the hosts' daemons
(``hpccctl lab prometheus NAME``; docs/lab.md "Metrics of a lab").

The lab's hosts sit behind its switches; nothing routes from the root
namespace to them, and a host's data interface must carry only the
experiment's packets.  So each host gets a management link of its own: a
veth pair, one end ``mgmt0`` in the host, the other (``hm`` + 6 hex digits
+ host index) in the root namespace, a /30 from :data:`POOL`
(169.254.128.0/17, link-local, never routed) per host: the root end has the
first address, the host the second.  The blocks are chosen under a lock
among those no address of the root namespace overlaps, so concurrent labs
do not collide.  The links go with the lab: deleting a host's namespace
deletes the pair.  They are recorded in the lab's state file (``"mgmt"``),
so that a second call, from any process, finds them.

:func:`add_links` makes them (idempotent); :func:`prometheus_yml` writes
the configuration: one target per host, ``ADDRESS:PORT``, with the labels
``lab`` and ``host``; the daemon in a host listens there with
``daemon.metrics_address = "ADDRESS:PORT"``.
"""
from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import secrets
import socket
from typing import Any, Iterator

from ..cli.errors import not_root
from .names import STATE_DIR, LabError, netns_name, state_path
from .state import load_state

__all__ = ["POOL", "MGMT_IFNAME", "add_links", "prometheus_yml", "cli"]

POOL = ipaddress.IPv4Network("169.254.128.0/17")
MGMT_IFNAME = "mgmt0"
DEFAULT_PORT = 9477


@contextlib.contextmanager
def _locked(state_dir: str) -> Iterator[None]:
    os.makedirs(state_dir, mode=0o755, exist_ok=True)
    fd = os.open(os.path.join(state_dir, "mgmt.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
                 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _used_networks(ipr) -> list[ipaddress.IPv4Network]:
    return [ipaddress.IPv4Interface(f"{a.get_attr('IFA_ADDRESS')}/{a['prefixlen']}").network
            for a in ipr.get_addr(family=socket.AF_INET)]


def _free_blocks(used: list[ipaddress.IPv4Network], n: int) -> list[ipaddress.IPv4Network]:
    out: list[ipaddress.IPv4Network] = []
    if n == 0:
        return out
    for block in POOL.subnets(new_prefix=30):
        if not any(block.overlaps(u) for u in used):
            out.append(block)
            if len(out) == n:
                return out
    raise LabError(f"no free /30 left in {POOL} for the management links")


def add_links(name: str, state_dir: str = STATE_DIR) -> dict[str, str]:
    """Give every host of lab `name` a management link (see the module
    docstring); returns {host: its address}.  Needs root."""
    from pyroute2 import IPRoute, NetNS

    with _locked(state_dir):
        st = load_state(name, state_dir)
        from .topology import Topology
        hosts = list(Topology.loads(st["topology_text"]).hosts)
        have: dict[str, dict[str, Any]] = dict(st.get("mgmt", {}))
        with IPRoute() as ipr:
            # a record whose root end is gone (the lab was rebuilt?) is made again
            for h, rec in list(have.items()):
                if not ipr.link_lookup(ifname=rec["root_if"]):
                    del have[h]
            todo = [h for h in hosts if h not in have]
            blocks = _free_blocks(_used_networks(ipr), len(todo))
            token = secrets.token_hex(3)
            for k, (h, block) in enumerate(zip(todo, blocks)):
                i = hosts.index(h)
                root_if, tmp = f"hm{token}{i:02x}", f"hn{token}{i:02x}"
                root_ip, host_ip = str(block[1]), str(block[2])
                ns = netns_name(st["name"], h)
                ipr.link("add", ifname=root_if, kind="veth", peer={"ifname": tmp})
                try:
                    ipr.link("set", index=ipr.link_lookup(ifname=tmp)[0], net_ns_fd=ns)
                    with NetNS(ns, flags=0) as nns:
                        idx = nns.link_lookup(ifname=tmp)[0]
                        nns.link("set", index=idx, ifname=MGMT_IFNAME)
                        nns.addr("add", index=idx, address=host_ip, prefixlen=30)
                        nns.link("set", index=idx, state="up")
                    idx = ipr.link_lookup(ifname=root_if)[0]
                    ipr.addr("add", index=idx, address=root_ip, prefixlen=30)
                    ipr.link("set", index=idx, state="up")
                except BaseException:
                    with contextlib.suppress(Exception):
                        ipr.link("del", index=ipr.link_lookup(ifname=root_if)[0])
                    raise
                have[h] = {"root_if": root_if, "root_address": root_ip, "address": host_ip}
        st["mgmt"] = have
        path = state_path(name, state_dir)
        tmp_path = f"{path}.{os.getpid()}.tmp"
        with open(tmp_path, "w") as f:
            json.dump(st, f, indent=1)
            f.write("\n")
        os.replace(tmp_path, path)
    return {h: have[h]["address"] for h in hosts}


def prometheus_yml(name: str, addresses: dict[str, str], port: int = DEFAULT_PORT,
                   interval: str = "5s") -> str:
    """A prometheus.yml scraping the daemon of every host of lab `name`."""
    lines = [f"# Prometheus configuration of lab {name}: hpccctl lab prometheus {name}",
             "# Each host's daemon listens on its management address:",
             '#   [daemon] metrics_address = "ADDRESS:PORT"  (docs/lab.md "Metrics of a lab")',
             "global:",
             f"  scrape_interval: {interval}",
             f"  evaluation_interval: {interval}",
             "scrape_configs:",
             "  - job_name: hpccd",
             "    static_configs:"]
    for h, a in addresses.items():
        lines += [f'      - targets: ["{a}:{port}"]',
                  f'        labels: {{lab: "{name}", host: "{h}"}}']
    return "\n".join(lines) + "\n"


def cli(args) -> int:
    """``hpccctl lab prometheus NAME [--port P] [--interval I] [--out FILE]``."""
    import sys

    if not_root("hpccctl lab prometheus", "network namespaces"):
        return 2
    try:
        addrs = add_links(args.name)
    except LabError as e:
        print(f"hpccctl lab prometheus: {e}", file=sys.stderr)
        return 1
    text = prometheus_yml(args.name, addrs, args.port, args.interval)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
        print(f"wrote {args.out}: {len(addrs)} targets", file=sys.stderr)
    else:
        sys.stdout.write(text)
    for h, a in addrs.items():
        print(f"  {h}: {MGMT_IFNAME} {a} (metrics_address = \"{a}:{args.port}\")",
              file=sys.stderr)
    return 0
