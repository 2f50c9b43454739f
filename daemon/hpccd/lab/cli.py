"""``hpccctl lab up|down|status``: the lab's command (argument parsing in
hpccd.cli.main)."""
from __future__ import annotations

import json
from typing import Any

from ..cli.errors import not_root
from .names import NETNS_DIR, LabError
from .netns import Lab
from .state import list_labs, status
from .teardown import down
from .topology import Topology, TopologyError


def _print_status(st: dict[str, Any], out) -> None:
    print(f"lab {st['name']}: {st['status']} (pid {st['pid']}, offloads {st['offloads']}, "
          f"{st['topology_file']})", file=out)
    print(f"  {'node':8s} {'netns':24s} {'if':4s} {'peer':13s} {'address':18s} "
          f"{'Mbit/s':>6s} {'buffer':>8s} {'sent bytes':>12s} {'packets':>9s} {'drops':>6s} "
          f"{'backlog':>8s}", file=out)
    for n in st["nodes"]:
        if not n["exists"]:
            print(f"  {n['node']:8s} {n['netns']:24s} (namespace missing)", file=out)
            continue
        if "error" in n:
            print(f"  {n['node']:8s} {n['netns']:24s} ({n['error']})", file=out)
            continue
        for i in n["interfaces"]:
            q = i.get("queue") or {}
            peer = f"{i['peer']}:{i['peer_ifname']}"
            if not i["exists"]:
                print(f"  {n['node']:8s} {n['netns']:24s} {i['ifname']:4s} (missing)", file=out)
                continue
            print(f"  {n['node']:8s} {n['netns']:24s} {i['ifname']:4s} {peer:13s} "
                  f"{i['address']:18s} {i['rate_mbps']:6d} {i['buffer_bytes']:8d} "
                  f"{q.get('bytes', 0):12d} {q.get('packets', 0):9d} {q.get('drops', 0):6d} "
                  f"{q.get('backlog', 0):8d}", file=out)
    sws = [n for n in st["nodes"] if n.get("int_switch")]
    if not sws:
        return
    print(f"  INT switch (packets): {'node':8s} {'if':4s} {'forwarded':>10s} "
          f"{'INT stamped':>11s} {'at departure':>12s} {'INT full':>8s} {'ECN marked':>10s} "
          f"{'fast-start drops':>16s}", file=out)
    for n in sws:
        if "error" in n["int_switch"]:
            print(f"  {'':22s}{n['node']:8s} ({n['int_switch']['error']})", file=out)
            continue
        for num, c in n["int_switch"].items():
            # "at departure": records rewritten with the port's state when the
            # packet left (docs/lab.md "Where the record is stamped")
            print(f"  {'':22s}{n['node']:8s} {'p' + num:4s} {c['forwarded'][0]:10d} "
                  f"{c['int_stamped'][0]:11d} {c['int_departed'][0]:12d} {c['int_full'][0]:8d} "
                  f"{c['ecn_marked'][0]:10d} {c['drop_fast_start'][0]:16d}", file=out)


def cli(args) -> int:
    """``hpccctl lab up|down|status`` (argument parsing in hpccd.cli.main)."""
    import sys

    err = sys.stderr
    if not_root("hpccctl lab", "network namespaces"):
        return 2
    try:
        if args.lab_cmd == "up":
            try:
                topo = Topology.load(args.topology)
            except TopologyError as e:
                print(f"hpccctl lab up: {e}", file=err)
                return 2
            lab = Lab(topo, name=args.name, offloads=args.offloads,
                      int_switch=not args.no_int).up()
            print(f"lab {lab.name} up: {len(lab.namespaces)} namespaces "
                  f"({', '.join(lab.namespaces)}), {len(topo.links)} links, state in "
                  f"{lab.state_file}")
            if lab.int_switch is not None:
                from .int_switch import pin_dir
                lab.int_switch.close()      # the tc filters keep the programs
                print(f"  INT switch on {sum(len(s.ports) for s in topo.switches.values())} "
                      f"switch ports, maps pinned in {pin_dir(lab.name)}")
            print(f"  hpccctl lab status {lab.name}; hpccctl lab down {lab.name}")
            return 0
        if args.lab_cmd == "down":
            name = args.name
            if name is None:
                labs = list_labs()
                if not labs:
                    print("hpccctl lab down: no lab is up")
                    return 0
                if len(labs) > 1:
                    print(f"hpccctl lab down: several labs are up, name one: "
                          f"{', '.join(labs)}", file=err)
                    return 2
                name = labs[0]
            rep = down(name, topology=args.topology)
            print(f"lab {rep['name']} down: removed {len(rep['namespaces'])} namespaces"
                  + (f" and {len(rep['temp_ifnames'])} half-built interfaces"
                     if rep["temp_ifnames"] else ""))
            if rep["held"]:
                for ns, pids in rep["held"].items():
                    print(f"hpccctl lab down: {ns} is removed from {NETNS_DIR} but processes "
                          f"{pids} are still in it; its interfaces live until they exit",
                          file=err)
                return 1
            return 0
        if args.lab_cmd == "status":
            names = [args.name] if args.name else list_labs()
            sts = [status(n) for n in names]
            if args.json:
                json.dump(sts[0] if args.name else sts, sys.stdout, indent=1)
                print()
            elif not sts:
                print("no lab is up")
            for st in sts if not args.json else ():
                _print_status(st, sys.stdout)
            return 0
    except LabError as e:
        print(f"hpccctl lab {args.lab_cmd}: {e}", file=err)
        return 1
    raise AssertionError(args.lab_cmd)
