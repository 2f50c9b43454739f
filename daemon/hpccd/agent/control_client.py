"""hpccctl's commands that talk to the running daemon over its control socket.

    hpccctl status            daemon, interfaces and attachments, components, last reload
    hpccctl flows             one line per flow
    hpccctl flow ID           every field of one flow
    hpccctl set PARAM VALUE   change a configuration key in the running daemon
    hpccctl probes            probe counts per flow, reflections and drops in XDP

Human tables by default, ``--json`` for scripts; ``--socket PATH`` when the
daemon's ``daemon.control_socket`` is not the default.  Exit status 1 when
the daemon refuses or cannot be reached (the reason on stderr).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, Iterable, TextIO

from .config import DEFAULT_CONTROL_SOCKET
from .control import ControlError, request

__all__ = ["add_parsers", "run", "table"]


def table(rows: Iterable[Iterable[Any]], header: Iterable[str]) -> str:
    """Left-aligned text columns, numbers right-aligned."""
    head = [str(h) for h in header]
    body = [[_cell(c) for c in r] for r in rows]
    widths = [max([len(head[i])] + [len(r[i]) for r in body]) for i in range(len(head))]
    numeric = [all(_isnum(r[i]) for r in body) and body for i in range(len(head))]

    def line(cells):
        return "  ".join(c.rjust(w) if num else c.ljust(w)
                         for c, w, num in zip(cells, widths, numeric)).rstrip()

    return "\n".join([line(head)] + [line(r) for r in body])


def _isnum(s: str) -> bool:
    try:
        float(s.rstrip("%").replace("k", "").replace("M", "").replace("G", ""))
        return True
    except ValueError:
        return s == "-"


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _si(v: float | None, unit: str = "") -> str:
    if v is None:
        return "-"
    for div, p in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:.3g}{p}{unit}"
    return f"{v:.4g}{unit}"


def _us(s: float | None) -> str:
    return "-" if s is None else f"{s * 1e6:.1f}"


# ---- output -----------------------------------------------------------------------

def _print_status(st: dict, out: TextIO) -> None:
    c = st["config"]
    print(f"hpccd {st['version']} pid {st['pid']}, up {st['uptime_s']:.0f} s, "
          f"{st['flows']} flows (max {c['max_flows']}, refused {st['flows_refused']})", file=out)
    print(f"config {c['file']}: default {c['default_algorithm']}, probe mode "
          f"{c['probe_mode']}, integrity key {'set' if c['integrity_key'] else 'NOT SET'}, "
          f"peers {', '.join(c['peers'])}", file=out)
    lr = st["last_reload"]
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(lr["time"]))
    print(f"last reload {when}: {'ok' if lr['ok'] else 'REFUSED: ' + lr['error']} "
          f"({lr['ok_count']} ok, {lr['error_count']} refused)", file=out)
    print(f"metrics {c['metrics_address'] or 'off'}, control {c['control_socket']}", file=out)
    print(file=out)
    print(table([(i["name"], i["ifindex"], i["xdp_mode"], i["xdp_prog_id"], i["xdp_attached"],
                  i["tc_prog_id"], i["tc_attached"], ",".join(i["addresses"]) or "-",
                  ",".join(map(str, i["queues"])) or "-") for i in st["interfaces"]],
                ("interface", "ifindex", "mode", "xdp id", "attached", "tc id", "attached",
                 "addresses", "queues")), file=out)
    if st["components"]:
        print(file=out)
        nested = []                 # (component, key, value): lists and tables, own lines
        rows = []
        for n, v in st["components"].items():
            flat = []
            for k, x in v.items():
                if k == "healthy":
                    continue
                if isinstance(x, (dict, list)):
                    nested.append((n, k, x))
                else:
                    flat.append(f"{k}={_cell(x)}")
            rows.append((n, v.get("healthy"), ", ".join(flat) or "-"))
        print(table(rows, ("component", "healthy", "status")), file=out)
        for n, k, x in nested:
            items = list(x.items()) if isinstance(x, dict) else list(enumerate(x))
            if not items:
                print(f"  {n} {k}: none", file=out)
            for i, item in items:
                print(f"  {n} {k}[{i}]: {_fields(item)}", file=out)


def _print_flows(rows: list[dict], out: TextIO) -> None:
    if not rows:
        print("no flows", file=out)
        return
    print(table([(r["id"], r["kind"], r["role"], r["algorithm"], r["peer"],
                  f"{r['saddr']}:{r['sport']}", f"{r['daddr']}:{r['dport']}",
                  _si(r["window_bytes"], "B"), _si(r["rate_bps"], "b/s"),
                  _cell(r["U"] if r["U"] is not None else r["alpha"]), _us(r["rtt_s"]),
                  _si(r["bytes_sent"], "B"), r["retx_packets"], f"{r['age_s']:.1f}")
                 for r in rows],
                ("id", "kind", "role", "algo", "peer", "local", "remote", "window", "rate",
                 "U/alpha", "rtt us", "sent", "retx", "age s")), file=out)


def _fields(v: Any) -> str:
    """A nested status value on one line: k=v, ... (dicts within, recursively)."""
    if isinstance(v, dict):
        return ", ".join(f"{k}={_fields(x) if isinstance(x, (dict, list)) else _cell(x)}"
                         for k, x in v.items()) or "-"
    if isinstance(v, list):
        return "[" + "; ".join(_fields(x) for x in v) + "]"
    return _cell(v)


def _plain(v: float) -> str:
    """A float in full, without an exponent: 12500, 1000000000, 0.0001."""
    if v != v or v in (float("inf"), float("-inf")):
        return str(v)
    if v.is_integer():
        return str(int(v))
    return f"{v:.9f}".rstrip("0").rstrip(".") if abs(v) >= 1e-9 else "0"


def _date(wall: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(wall))


def _print_flow(f: dict, out: TextIO) -> None:
    extra = f.pop("extra", {}) or {}
    # The daemon's clocks: started/updated are its monotonic clock, started_wall
    # the wall clock at start; shown as dates (--json keeps the numbers).
    mono0, wall0, upd = f.pop("started", None), f.pop("started_wall", None), f.pop("updated", None)
    shown: dict[str, Any] = {}
    if wall0 is not None:
        shown["started"] = _date(wall0)
        if upd and mono0 is not None:
            shown["updated"] = _date(wall0 + (upd - mono0))
    for k, v in f.items():
        shown[k] = _plain(v) if isinstance(v, float) else v
    w = max(len(k) for k in [*shown, *extra])
    for k, v in [*shown.items(), *extra.items()]:
        print(f"{k.ljust(w)}  {_fields(v) if isinstance(v, (dict, list)) else _cell(v)}",
              file=out)


def _print_probes(p: dict, out: TextIO) -> None:
    print(f"probe mode {p['mode']}, timeout {p['timeout_us']} us, reflect in XDP "
          f"{'on' if p['reflect'] else 'off'}, TCP side {'on' if p['tcp_side'] else 'off'}",
          file=out)
    print(file=out)
    if p["flows"]:
        print(table([(r["id"], r["kind"], r["peer"], f"{r['daddr']}:{r['dport']}", r["sent"],
                      r["answered"], r["lost"], _us(r["probe_rtt_s"])) for r in p["flows"]],
                    ("id", "kind", "peer", "remote", "sent", "answered", "lost",
                     "probe rtt us")), file=out)
    else:
        print("no flow has sent probes", file=out)
    if p["xdp"]:
        print(file=out)
        names = list(next(iter(p["xdp"].values())))
        print(table([(i, *(v[n] for n in names)) for i, v in p["xdp"].items()],
                    ("interface", *names)), file=out)


# ---- commands -----------------------------------------------------------------------

def run(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    cmd = args.ctl_cmd
    req: dict[str, Any] = {}
    if cmd == "flow":
        req = {"id": args.id}
    elif cmd == "set":
        req = {"param": args.param, "value": args.value}
    try:
        res = request(args.socket, cmd, req)
    except ControlError as e:
        print(f"hpccctl {cmd}: {e}", file=sys.stderr)
        return 1
    if args.json:
        json.dump(res, out, indent=2, sort_keys=True)
        out.write("\n")
        return 0
    if cmd == "status":
        _print_status(res, out)
    elif cmd == "flows":
        _print_flows(res, out)
    elif cmd == "flow":
        _print_flow(res, out)
    elif cmd == "set":
        print(f"{res['param']} = {res['value']} ({res['note']})", file=out)
    elif cmd == "probes":
        _print_probes(res, out)
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Register status, flows, flow, set and probes on hpccctl's parser."""

    def common(p: argparse.ArgumentParser, name: str) -> None:
        p.add_argument("--json", action="store_true", help="print JSON")
        p.add_argument("--socket", default=DEFAULT_CONTROL_SOCKET,
                       help=f"the daemon's control socket (default {DEFAULT_CONTROL_SOCKET})")
        p.set_defaults(func=run, ctl_cmd=name)

    common(sub.add_parser("status", help="the running daemon: interfaces, components, reload",
                          description="State of the running hpccd: its programs as the "
                                      "kernel reports them, components, flows, last reload."),
           "status")
    common(sub.add_parser("flows", help="the daemon's flows, one per line",
                          description="The running daemon's flows, one per line: id (for "
                                      "'hpccctl flow ID'), kind (native: AF_XDP transport; "
                                      "tcp: kernel TCP on the TCP side), role, algorithm, "
                                      "peer ([[peers]] name), local and remote address, "
                                      "window, pacing rate, U (HPCC) or alpha (DCTCP), last "
                                      "RTT, bytes sent, retransmitted packets, age. "
                                      "docs/metrics.md says what each value is."),
           "flows")
    f = sub.add_parser("flow", help="every field of one flow")
    f.add_argument("id", type=int, metavar="ID", help="flow id (hpccctl flows)")
    common(f, "flow")
    s = sub.add_parser("set", help="change a configuration key of the running daemon",
                       description="Change one key of the running configuration, e.g. "
                                   "'hpccctl set hpcc.eta 0.9', 'hpccctl set algorithm.default "
                                   "ldcp', 'hpccctl set peers.rack2.algorithm hpcc'. Validated "
                                   "like the file; keys that need a restart are refused. Lasts "
                                   "until the next reload (SIGHUP) or restart.")
    s.add_argument("param", metavar="PARAM", help="TABLE.KEY, or peers.NAME.KEY")
    s.add_argument("value", metavar="VALUE", help="a TOML value: 0.9, 5, true, dctcp")
    common(s, "set")
    common(sub.add_parser("probes", help="probe counts per flow and XDP reflections",
                          description="The running daemon's probes: its probe mode and "
                                      "timeout; per flow the probes sent, answered and lost "
                                      "and the last probe RTT; per interface what the XDP "
                                      "program did with probes (answered in XDP, dropped "
                                      "for a bad or missing tag, ...)."),
           "probes")
