"""hpccctl decode: print hpccd packets field by field.

Input is Ethernet frames, as hex on the command line or from a pcap file.
Each frame is shown layer by layer (Ethernet, IPv4, UDP or TCP, INT header,
hop records, hpccd header, NOTIFY body, SACK blocks or payload, Rx-HPCC window, trailer, tag) with the names of
docs/wire-format.md; hop records also in their units (bit/s, ns, bytes).
A malformed packet is named by its ``enum hpccd_wire_err`` class and shown
as far as its bytes go.  With ``--key`` the tag of PROBE_RESP, NOTIFY, ACK and NACK is
verified.  ``--json`` prints one JSON object per packet (JSON Lines), whose
``fields`` have the shape of tests/vectors/wire.json.
"""
from __future__ import annotations

import json
import struct
import sys
from typing import Any, Iterable, Iterator, Optional, TextIO

from . import wire

__all__ = ["describe", "render", "frames_from_hex", "frames_from_pcap", "run"]

_ECN = {0: "not-ECT", 1: "ECT(1)", 2: "ECT(0)", 3: "CE"}
_INT_FLAGS = {wire.INT_F_COLLECT: "COLLECT", wire.INT_F_OVERFLOW: "OVERFLOW"}
_HDR_FLAGS = {wire.F_ECE: "ECE", wire.F_CWR: "CWR", wire.F_FIRST_RTT: "FIRST_RTT",
              wire.F_FIN: "FIN", wire.F_RETX: "RETX", wire.F_INT_ECHO: "INT_ECHO",
              wire.F_SYN: "SYN"}


class InputError(Exception):
    """Input that cannot be read as frames (bad hex, unreadable pcap)."""


# ---- input ---------------------------------------------------------------------------

def frames_from_hex(items: Iterable[str]) -> Iterator[bytes]:
    for n, s in enumerate(items, 1):
        t = "".join(s.split()).replace(":", "").replace("-", "")
        if t[:2].lower() == "0x":
            t = t[2:]
        try:
            yield bytes.fromhex(t)
        except ValueError:
            raise InputError(f"argument {n} is not hex: {s[:40]!r}") from None


def frames_from_pcap(path: str) -> Iterator[bytes]:
    """The frames of a pcap or pcapng file with Ethernet link type."""
    from scapy.utils import RawPcapReader

    try:
        reader = RawPcapReader(path)
    except OSError as e:
        raise InputError(f"cannot open {path}: {e.strerror or e}") from None
    except Exception as e:      # scapy: Scapy_Exception("Not a supported capture file")
        raise InputError(f"{path}: {e}") from None
    with reader:
        linktype = getattr(reader, "linktype", 1)
        if linktype != 1:
            raise InputError(f"{path}: link type {linktype}, only Ethernet (1) is decoded")
        for data, _meta in reader:
            yield bytes(data)


# ---- one frame -------------------------------------------------------------------------

def _flag_names(value: int, names: dict[int, str]) -> list[str]:
    out = [n for bit, n in sorted(names.items()) if value & bit]
    rest = value & ~sum(names)
    if rest:
        out.append(f"0x{rest:x}")
    return out


def _hop_units(h: dict) -> dict:
    return {"bw_bps": wire.SPEED_MBPS[h["speed_code"]] * 1_000_000, "ts_ns": h["ts"],
            "tx_bytes": h["tx_units"] * wire.INT_TX_UNIT,
            "qlen_bytes": h["qlen_units"] * wire.INT_QLEN_UNIT}


def _partial(b: bytes) -> dict:
    """What can be read of a malformed packet's hpccd bytes, header by header."""
    out: dict[str, Any] = {}
    if len(b) < wire.INT_HDR_BYTES:
        out["bytes_hex"] = b.hex()
        return out
    pf = struct.unpack_from("!H", b, 2)[0]
    room = b[1] & 0xF
    out["int"] = {"magic": b[0] >> 4, "ver": b[0] & 0xF, "nhop": b[1] >> 4, "room": room,
                  "flags": pf >> 12, "path_id": pf & 0xFFF}
    if b[0] != (wire.INT_MAGIC << 4 | wire.WIRE_VERSION) or room > wire.INT_MAX_HOPS:
        out["bytes_hex"] = b[:64].hex()
        return out
    n = min(room, (len(b) - wire.INT_HDR_BYTES) // wire.INT_HOP_BYTES)
    hops = []
    for k in range(n):
        h = wire.HpccdHop(b[4 + 8 * k:12 + 8 * k])
        hops.append({"speed_code": h.speed_code, "ts": h.ts, "tx_units": h.tx_units,
                     "qlen_units": h.qlen_units})
    out["int"]["hops"] = hops
    at = wire.INT_HDR_BYTES + room * wire.INT_HOP_BYTES
    if len(b) >= at + wire.HDR_BYTES:
        h = wire.Hpccd(b[at:at + wire.HDR_BYTES])
        out["hdr"] = {"ver": h.ver, "type": h.type, "flags": int(h.flags), "len": h.len,
                      "flow_id": h.flow_id, "seq": h.seq, "ack": h.ack, "ts": h.ts,
                      "aux": h.aux}
        out["after_hdr_bytes"] = len(b) - at - wire.HDR_BYTES
    elif len(b) > at:
        out["bytes_hex"] = b[at:at + 64].hex()
    return out


def describe(frame: bytes, index: int = 0, key16: Optional[bytes] = None,
             port: Optional[int] = None, dscp: int = wire.PROBE_DSCP_DEFAULT) -> dict:
    """Everything ``decode`` prints about one frame, as a JSON-ready dict."""
    d: dict[str, Any] = {"index": index, "frame_len": len(frame), "eth": None, "ip": None,
                         "l4": None, "hpccd": False, "error": None, "error_name": None,
                         "error_text": None, "fields": None, "hops_decoded": None,
                         "partial": None}
    ip = 14
    if len(frame) >= 14:
        d["eth"] = {"dst": frame[0:6].hex(":"), "src": frame[6:12].hex(":"),
                    "type": struct.unpack_from("!H", frame, 12)[0]}
        if d["eth"]["type"] == 0x8100 and len(frame) >= 18:
            d["eth"]["vlan"] = struct.unpack_from("!H", frame, 14)[0] & 0xFFF
            d["eth"]["type"] = struct.unpack_from("!H", frame, 16)[0]
            ip = 18
    if len(frame) >= ip + 20 and d["eth"]["type"] == 0x0800 and frame[ip] >> 4 == 4:
        ihl = (frame[ip] & 0xF) * 4
        tos, tot, _, frag, ttl, proto = struct.unpack_from("!BHHHBB", frame, ip + 1)
        d["ip"] = {"src": ".".join(map(str, frame[ip + 12:ip + 16])),
                   "dst": ".".join(map(str, frame[ip + 16:ip + 20])), "dscp": tos >> 2,
                   "ecn": tos & 3, "ttl": ttl, "len": tot, "proto": proto,
                   "frag": frag & 0x1FFF}
        l4 = ip + ihl
        if proto in (6, 17) and len(frame) >= l4 + 4:
            d["ip"]["sport"], d["ip"]["dport"] = struct.unpack_from("!HH", frame, l4)
        if proto == 17 and len(frame) >= l4 + 8:
            d["udp"] = dict(zip(("len", "chksum"), struct.unpack_from("!HH", frame, l4 + 4)))
        if proto == 6 and len(frame) >= l4 + 20:
            seq, ack, off, flags, win, ck = struct.unpack_from("!IIBBHH", frame, l4 + 4)
            d["tcp"] = {"seq": seq, "ack": ack, "data_offset": (off >> 4) * 4,
                        "flags": ((off & 1) << 8) | flags, "window": win, "chksum": ck}

    region = wire.l4_region(frame, port, dscp)
    if region is None:
        return d
    kind, _, start, end = region
    code = wire.WireErr(wire.classify(frame, port, dscp))
    d.update(l4=kind, hpccd=True, error=int(code), error_name=code.c_name,
             error_text=wire.ERR_TEXT[code])
    if code == wire.WireErr.OK:
        f = wire.packet_fields(wire.decode(frame, dscp), key16)
        d["fields"] = f
        d["hops_decoded"] = [dict(_hop_units(h), stamped=k < f["int"]["nhop"])
                             for k, h in enumerate(f["int"]["hops"])]
    else:
        d["partial"] = _partial(frame[start:end])
    if end < len(frame):
        d["trailer_bytes"] = len(frame) - end
    return d


# ---- text ------------------------------------------------------------------------------

def _kv(lines: list[str], name: str, value: Any) -> None:
    lines.append(f"    {name:<12} {value}")


def _int_lines(lines: list[str], i: dict) -> None:
    lines.append("  INT header")
    _kv(lines, "magic", f"0x{i['magic']:x}")
    _kv(lines, "ver", i["ver"])
    _kv(lines, "nHop", i["nhop"])
    _kv(lines, "room", i["room"])
    _kv(lines, "flags", f"0x{i['flags']:x} " + ("|".join(_flag_names(i["flags"], _INT_FLAGS))
                                                or "-"))
    _kv(lines, "pathID", f"0x{i['path_id']:03x}")
    hops = i.get("hops", [])
    for k, h in enumerate(hops):
        if k >= i["nhop"] and not any(h.values()):
            if k == i["nhop"] or any(hops[k - 1].values()):     # first of a zeroed run
                last = k
                while last + 1 < len(hops) and not any(hops[last + 1].values()):
                    last += 1
                span = f"hop {k}" if last == k else f"hops {k}..{last}"
                lines.append(f"  {span} (not stamped, zeroed)")
            continue
        u = _hop_units(h)
        bw = f"{u['bw_bps']} bit/s" if u["bw_bps"] else "unknown speed"
        state = "" if k < i["nhop"] else " (not stamped)"
        lines.append(f"  hop {k}{state}")
        _kv(lines, "B", f"{h['speed_code']} = {bw}")
        _kv(lines, "TS", f"{h['ts']} ns (mod 2^24)")
        _kv(lines, "txBytes",
            f"{h['tx_units']} x 128 = {u['tx_bytes']} B (counter mod 2^20 units)")
        _kv(lines, "qLen", f"{h['qlen_units']} x 80 = {u['qlen_bytes']} B"
                           + (" (saturated)" if h["qlen_units"] == wire.INT_QLEN_MAX else ""))


def _hdr_lines(lines: list[str], h: dict) -> None:
    lines.append("  hpccd header")
    _kv(lines, "ver", h["ver"])
    _kv(lines, "type", f"{wire.TYPES.get(h['type'], 'unknown')} ({h['type']})")
    _kv(lines, "flags", f"0x{h['flags']:02x} " + ("|".join(_flag_names(h["flags"], _HDR_FLAGS))
                                                  or "-"))
    _kv(lines, "len", h["len"])
    _kv(lines, "flow_id", f"0x{h['flow_id']:08x}")
    _kv(lines, "seq", h["seq"])
    _kv(lines, "ack", h["ack"])
    _kv(lines, "ts", h["ts"])
    _kv(lines, "aux", h["aux"])


def render(d: dict) -> str:
    """The text form of :func:`describe`'s dict."""
    lines: list[str] = []
    if d["hpccd"]:
        verdict = ("valid" if d["error"] == 0 else
                   f"MALFORMED {d['error_name']} ({d['error']}): {d['error_text']}")
        what = f"hpccd over {d['l4'].upper()}, {verdict}"
    else:
        what = "not hpccd (passes to the kernel)"
    lines.append(f"packet {d['index']}: {d['frame_len']} bytes, {what}")
    if d["eth"]:
        e = d["eth"]
        lines.append("  Ethernet")
        _kv(lines, "dst", e["dst"])
        _kv(lines, "src", e["src"])
        if "vlan" in e:
            _kv(lines, "802.1Q vid", e["vlan"])
        _kv(lines, "type", f"0x{e['type']:04x}")
    if d["ip"]:
        ip = d["ip"]
        lines.append("  IPv4")
        for k in ("src", "dst"):
            _kv(lines, k, ip[k])
        _kv(lines, "dscp", ip["dscp"])
        _kv(lines, "ecn", f"{ip['ecn']} {_ECN[ip['ecn']]}")
        _kv(lines, "ttl", ip["ttl"])
        _kv(lines, "total len", ip["len"])
        _kv(lines, "proto", ip["proto"])
    if "udp" in d:
        lines.append("  UDP")
        _kv(lines, "sport", d["ip"]["sport"])
        _kv(lines, "dport", d["ip"]["dport"])
        _kv(lines, "len", d["udp"]["len"])
        _kv(lines, "chksum", f"0x{d['udp']['chksum']:04x}")
    if "tcp" in d:
        t = d["tcp"]
        lines.append("  TCP")
        _kv(lines, "sport", d["ip"]["sport"])
        _kv(lines, "dport", d["ip"]["dport"])
        _kv(lines, "seq", t["seq"])
        _kv(lines, "ack", t["ack"])
        _kv(lines, "flags", f"0x{t['flags']:03x}" + (" (none: probe)" if not t["flags"] else ""))
        _kv(lines, "window", t["window"])
        _kv(lines, "chksum", f"0x{t['chksum']:04x}")

    f = d["fields"]
    if f is not None:
        _int_lines(lines, f["int"])
        _hdr_lines(lines, f["hdr"])
        if f["notify"] is not None:
            n = f["notify"]
            lines.append("  NOTIFY")
            _kv(lines, "w_bytes", f"{n['w_bytes']} B")
            _kv(lines, "rate_kbps", f"{n['rate_kbps']} kbit/s")
            _kv(lines, "u_q16", f"{n['u_q16']} (U = {n['u_q16'] / 65536:.4f})")
            _kv(lines, "n_flows", n["n_flows"])
            _kv(lines, "reserved", n["reserved"])
            _kv(lines, "notify_seq", n["notify_seq"])
            _kv(lines, "t_ns", f"{n['t_ns']} ns")
        fb = f.get("feedback")
        if fb is not None:
            w = fb["window"]
            if w is not None:
                lines.append("  Rx-HPCC window")
                _kv(lines, "w_bytes", f"{w['w_bytes']} B")
                _kv(lines, "u_q16", f"{w['u_q16']} (U = {w['u_q16'] / 65536:.4f})")
                _kv(lines, "n_flows", w["n_flows"])
                _kv(lines, "t_ns", f"{w['t_ns']} ns")
            lines.append("  trailer")
            _kv(lines, "fb_seq", fb["fb_seq"])
            _kv(lines, "fb_flags", f"0x{fb['fb_flags']:x}" + (" (WINDOW)" if w else ""))
        elif f["hdr"]["type"] in (wire.T_ACK, wire.T_NACK):
            lines.append("  no trailer: never applied by a sender")
        if f["payload_len"]:
            lines.append(f"  payload      {f['payload_len']} bytes")
        if f["tag_hex"] is not None:
            if f["hdr"]["type"] == wire.T_PROBE:
                state = "(slot for the reflector)"
            elif f["tag_valid"] is None:
                state = "(not verified: no --key)"
            else:
                state = "verified" if f["tag_valid"] else "FAILED verification"
            lines.append(f"  tag          0x{f['tag_hex']} {state}")
    elif d["partial"] is not None:
        p = d["partial"]
        if "int" in p:
            _int_lines(lines, p["int"])
        if "hdr" in p:
            _hdr_lines(lines, p["hdr"])
            lines.append(f"  bytes after the header: {p['after_hdr_bytes']}")
        if "bytes_hex" in p:
            lines.append(f"  unparsed     {p['bytes_hex'] or '(none)'}")
    if d.get("trailer_bytes"):
        lines.append(f"  not L4 payload: {d['trailer_bytes']} bytes (padding or beyond "
                     "the announced length)")
    return "\n".join(lines)


# ---- command ----------------------------------------------------------------------------

def run(hexes: list[str], pcap: Optional[str], key_hex: Optional[str], port: Optional[int],
        dscp: int, as_json: bool, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """hpccctl decode.  Exit status 0, or 2 on unreadable input."""
    key16 = None
    if key_hex is not None:
        try:
            key16 = bytes.fromhex(key_hex)
        except ValueError:
            key16 = b""
        if len(key16) != 16:
            print("hpccctl decode: --key must be 32 hex digits (128 bits)", file=err)
            return 2
    if port is not None and port != wire.bound_port():
        wire.bind_port(port)
    if bool(hexes) == bool(pcap):
        print("hpccctl decode: give either HEX frames or --pcap FILE", file=err)
        return 2
    frames = frames_from_pcap(pcap) if pcap else frames_from_hex(hexes)
    try:
        for k, frame in enumerate(frames):
            d = describe(frame, k, key16, port, dscp)
            if as_json:
                out.write(json.dumps(d) + "\n")
            else:
                out.write(render(d) + "\n\n")
    except InputError as e:
        print(f"hpccctl decode: {e}", file=err)
        return 2
    return 0
