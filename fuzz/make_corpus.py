#!/usr/bin/env python3
"""Seed corpora for the libFuzzer harnesses of fuzz/, from the shared test data.

    python3 fuzz/make_corpus.py [--out build/fuzz/corpus]

writes one directory per harness:

* ``fuzz_wire_frame/``: every frame of tests/vectors/wire.json, as is
  (the harness takes the whole input as one Ethernet frame);
* ``fuzz_int_hop/``: the hop records of every valid vector, one packet per
  seed, and all of them as one flow's sequence of packets, in the
  harness's record format (fuzz/fuzz_int_hop.c);
* ``fuzz_cc/``: slices of the bundled replay traces (daemon/hpccd/traces/,
  one per algorithm) in the event format of fuzz/fuzz_cc.c, DCQCN and TIMELY
  episodes with their defaults, the default
  parameters in its "raw" domain, and a DCTCP receiver run;
* the regression inputs of fuzz/regressions/<harness>/ (crashes found
  earlier, kept so that every run replays them).

Standard library only: no hpccd import, so it runs before anything is built.
The encoders below mirror the readers of the harnesses field for field; a
seed that drifts from them is still a valid input, just a less useful one.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import pathlib
import shutil
import struct

ROOT = pathlib.Path(__file__).resolve().parent.parent
VECTORS = ROOT / "tests" / "vectors" / "wire.json"
TRACES = ROOT / "daemon" / "hpccd" / "traces"
REGRESSIONS = ROOT / "fuzz" / "regressions"
HARNESSES = ("fuzz_wire_frame", "fuzz_int_hop", "fuzz_cc")

# fastpath/cc/int_decode.c, Mbit/s by code.
SPEED_MBPS = (0, 10, 20, 25, 40, 50, 100, 200, 250, 300, 400, 500, 600, 800, 1000, 1500,
              2000, 2500, 3000, 4000, 5000, 8000, 10000, 20000, 25000, 40000, 50000, 100000,
              200000, 400000, 800000, 1600000)

# Slices of each trace: the start (slow start, first ACKs), the queueing
# episode of the incast, and the tail.
SLICES = ((0, 200), (500, 700), (900, 1100), (1400, 1625))


def u8(v: int) -> bytes:
    return struct.pack("<B", v & 0xFF)


def u16(v: int) -> bytes:
    return struct.pack("<H", v & 0xFFFF)


def u32(v: int) -> bytes:
    return struct.pack("<I", v & 0xFFFFFFFF)


def u64(v: int) -> bytes:
    return struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF)


def f64(v: float) -> bytes:
    return struct.pack("<d", v)


def hop_word(h: dict) -> bytes:
    """One hop record as on the wire (docs/wire-format.md)."""
    w = (h["speed_code"] << 59) | (h["ts"] << 35) | (h["tx_units"] << 15) | h["qlen_units"]
    return struct.pack("!Q", w)


# ---- fuzz_wire_frame, fuzz_int_hop -------------------------------------------------

def wire_frames(vectors: list[dict]) -> dict[str, bytes]:
    return {v["name"]: bytes.fromhex(v["hex"]) for v in vectors}


def int_hop_record(hops: list[dict], step_ns: int, path_id: int, seq_step: int) -> bytes:
    """n_hops u8, time step u32, pathID u16, seq step u16, then the hop words."""
    return (u8(len(hops)) + u32(step_ns) + u16(path_id) + u16(seq_step)
            + b"".join(hop_word(h) for h in hops))


def int_hop_seeds(vectors: list[dict]) -> dict[str, bytes]:
    out = {}
    valid = [v for v in vectors if v["error"] == 0 and v["fields"]["int"]["room"]]
    for v in valid:
        i = v["fields"]["int"]
        hops = i["hops"][:i["nhop"]] or i["hops"]
        for mode in (0, 1):
            out[f"{v['name']}.mode{mode}"] = u8(mode) + int_hop_record(hops, 2000, i["path_id"], 1)
    # One flow: the same path stamped again and again with advancing
    # counters (a wrap of ts and txBytes included), then a long gap.
    base = next(v for v in valid if v["fields"]["int"]["nhop"] >= 2)["fields"]["int"]
    hops = [dict(h) for h in base["hops"][:base["nhop"]]]
    for mode in (0, 1):
        seq = u8(mode)
        for k in range(40):
            for h in hops:
                h["ts"] = (h["ts"] + 700_000) & 0xFFFFFF
                h["tx_units"] = (h["tx_units"] + 30_000 + 1000 * k) & 0xFFFFF
                h["qlen_units"] = (h["qlen_units"] * 3 + 7 * k) & 0x7FFF
            step = 9_000_000 | 0x80000000 if k == 30 else 700_000   # k = 30: stale
            seq += int_hop_record(hops, step, base["path_id"], 10)
        out[f"flow.mode{mode}"] = seq
    return out


# ---- fuzz_cc ---------------------------------------------------------------------------

def frac16(x: float) -> int:
    """Inverse of the harness's frac16: (v + 1) / 65536."""
    return max(0, min(0xFFFF, round(x * 65536) - 1))


def open_frac16(x: float) -> int:
    return max(0, min(0xFFFE, round(x * 65536) - 1))


def speed_code(bps: int) -> int:
    return SPEED_MBPS.index(bps // 1_000_000) if bps % 1_000_000 == 0 and \
        bps // 1_000_000 in SPEED_MBPS else 0


def read_trace(path: pathlib.Path) -> tuple[dict, list[dict]]:
    lines = [json.loads(s) for s in path.read_text().splitlines() if s.strip()]
    return lines[0]["params"], lines[1:]


def hpcc_params(p: dict) -> bytes:
    opt = 1 if "w_ai_bytes" in p else 0
    b = u8(opt) + u32(int(p.get("T_ns", 13000)) - 1) + u16(frac16(p.get("eta", 0.95)))
    b += u8(p.get("max_stage", 5)) + u16(p.get("N_flows", 100) - 1)
    b += u32(p.get("line_rate_bps", 100_000_000_000) // 1_000_000 - 1)
    b += u16(p.get("mtu_bytes", 1000) - 1) + u16(round(p.get("u_init", 0) * 4096))
    if opt:
        b += u32(int(p["w_ai_bytes"]))
    return b


def hpcc_events(events: list[dict], rx: bool) -> bytes:
    out = b""
    seq = nxt_now = 0
    ts = [0] * 8
    tx = [0] * 8
    for e in events[:512]:
        hops = e.get("hops", [])
        k = len(hops) | (0x10 if "path_id" in e else 0) | ((e.get("path_id", 0) & 3) << 5)
        now_step = (e.get("now_ns", 0) - nxt_now) if rx else 1000
        nxt_now += now_step
        f = (1 if now_step > 0xFFFF else 0) | (2 if e.get("active_flows") else 0)
        out += u8(k) + u8(f)
        s = e.get("seq", seq)
        out += u16(s - seq) + u32(e.get("snd_nxt", s) - s)
        seq = s
        out += u32(now_step) if f & 1 else u16(now_step)
        if f & 2:
            out += u16(e["active_flows"])
        for i, h in enumerate(hops[:8]):
            dts, dtx = h["ts_ns"] - ts[i], h["tx_bytes"] - tx[i]
            hk = 0
            body = b""
            if dts < 0:
                hk |= 1
                ts[i] -= min(ts[i], 100_000)
            else:
                hk |= 2 if dts > 0xFFFF else 0
                body += u32(dts) if hk & 2 else u16(dts)
                ts[i] += dts
            if dtx < 0:
                hk |= 4
                body += u16(h["tx_bytes"])
                tx[i] = h["tx_bytes"] & 0xFFFF
            else:
                hk |= 8 if dtx > 0xFFFF else 0
                body += u32(dtx) if hk & 8 else u16(dtx)
                tx[i] += dtx
            hk |= 16 if h["qlen_bytes"] > 0xFFFF else 0
            body += u32(h["qlen_bytes"]) if hk & 16 else u16(h["qlen_bytes"])
            body += u8(speed_code(h["bw_bps"]))
            out += u8(hk) + body
    return out


def dctcp_params(p: dict) -> bytes:
    g_shift = round(-math.log2(p.get("g", 1 / 16)))
    mtu = p.get("mtu_bytes", 1000)
    opt = 1 if "init_cwnd_bytes" in p else 0
    b = u8(opt) + u8(g_shift - 1) + u16(mtu - 1)
    if opt:
        b += u8(p["init_cwnd_bytes"] // mtu - 1)
    return b


def dctcp_events(events: list[dict], mtu: int) -> bytes:
    out = b""
    ack = nxt = 0
    unit = mtu // 4 + 1
    for e in events[:512]:
        # loss: enum hpccd_loss (0 none, 1 fast, 2 timeout), as in the trace format
        k = (1 if e.get("ece") else 0) | (int(e.get("loss", 0)) & 3) << 1
        da = e["ack"] - ack
        if da < 0:
            out += u8(k | 8)
            ack -= min(ack, mtu)
        else:
            n = min(255, round(da / unit))
            out += u8(k) + u8(n)
            ack += n * unit
        dn = max(0, min(255, round((e["snd_nxt"] - nxt) / mtu)))
        out += u8(dn)
        nxt = max(nxt + dn * mtu, ack)
    return out


def ldcp_params(p: dict) -> bytes:
    b = u8(0) + u16(frac16(p.get("alpha", 1.0))) + u16(frac16(p.get("beta", 0.5)))
    b += u16(open_frac16(p.get("gamma", 0.125))) + u16(open_frac16(p.get("eta", 0.5)))
    b += u32(p.get("line_rate_bps", 100_000_000_000) // 1_000_000 - 1)
    b += u32(p.get("rtt_ns", 13000) - 1) + u16(p.get("mtu_bytes", 1000) - 1)
    return b + u16(0) + u64(3)          # pkt_ect probe: message of IW packets, idx 3


def ldcp_events(events: list[dict]) -> bytes:
    out = b""
    now = 0
    for e in events[:512]:
        n = e.get("acked_pkts", 1)
        f = (1 if e.get("ece") else 0) | (2 if e.get("loss") else 0) | (4 if n != 1 else 0)
        t = e.get("now_ns", 0)
        if t:
            f |= 8
        out += u8(f)
        if f & 4:
            out += u8(n)
        if f & 8:
            out += u32(t - now)
            now = t
        out += u32(0)                   # tx_interval_ns(rtt = the configured one)
    return out


def timely_params(p: dict) -> bytes:
    """The lab-domain block of fuzz_timely (defaults of include/hpccd/cc.h)."""
    t_low, t_high = p.get("T_low_ns", 50_000), p.get("T_high_ns", 500_000)
    return (u8(0) + u16(frac16(p.get("alpha", 0.875))) + u16(frac16(p.get("beta", 0.8)))
            + u32(int(p.get("delta_bps", 10e6)) - 1) + u32(t_low) + u32(t_high - t_low - 1)
            + u32(p.get("min_rtt_ns", 13_000) - 1) + u8(p.get("hai_N", 5) - 1)
            + u8(p.get("hai_after", 5) - 1)
            + u32(p.get("line_rate_bps", 100_000_000_000) // 1_000_000 - 1)
            + u32(int(p.get("min_rate_bps", 1e6)) - 1))


def cc_seeds() -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for path in sorted(TRACES.glob("*.jsonl")):
        params, events = read_trace(path)
        algo = params.get("algo", "hpcc")
        for lo, hi in SLICES:
            ev = events[lo:hi]
            if algo in ("hpcc", "rx-hpcc"):
                rx = algo == "rx-hpcc"
                body = u8(1 if rx else 0) + hpcc_params(params) + hpcc_events(ev, rx)
            elif algo == "dctcp":
                body = u8(2) + dctcp_params(params) + dctcp_events(ev, params.get("mtu_bytes", 1000))
            elif algo == "ldcp":
                body = u8(3) + ldcp_params(params) + ldcp_events(ev)
            elif algo == "timely":
                body = u8(5) + timely_params(params) + b"".join(
                    u8(1) + u32(e["rtt_ns"]) for e in ev[:512])
            else:
                continue
            out[f"{path.stem}.{lo}-{hi}"] = body
    # The raw domain with the defaults as bit patterns, and a few events.
    out["raw.hpcc.defaults"] = (u8(0x80) + f64(13000) + f64(0.95) + u32(5) + u32(100) + f64(0)
                                + u64(100_000_000_000) + u32(1000) + f64(0) * 4
                                + bytes(range(200)))
    out["raw.ldcp.defaults"] = (u8(0x83) + f64(1.0) + f64(0.5) + f64(0.125) + f64(0.5) + f64(0)
                                + u64(100_000_000_000) + u64(13000) + u32(1000) + u16(0) + u64(0)
                                + bytes(range(200)))
    out["raw.dctcp.defaults"] = (u8(0x82) + u32(4) + u32(1000) + u64(0) + u64(0) + u32(0)
                                 + bytes(range(200)))
    # DCQCN and TIMELY with the defaults of include/hpccd/cc.h (no bundled
    # trace drives them): the lab domain, an episode of CNPs, timer catch-ups
    # and byte counts; TIMELY an RTT rising past T_high and falling back.
    dcqcn = (u8(4) + u8(0) + u16(frac16(1 / 256)) + u32(55_000 - 1) + u32(55_000 - 1)
             + u32(10_000_000 - 1) + u16(5 - 1) + u32(100_000 - 1)
             + u16(418)                                  # R_AI = 100G / 2^20 x 419 ~ 40M
             + u32(1_000_000 - 1) + u16(0xFFFF)          # min rate 1M, alpha 1
             + u32(300_000) + u32(50_000))               # queue probe, NP's N
    for f, dt, tx in ((4 | 8, 1000, 1000), (8, 10_000, 9000), (16, 50_000, 0),
                      (0, 60_000, 60_000), (4 | 8, 1000, 1000), (1, 3_000_000, 1000),
                      (2, 1000, 40_000_000), (16, 0, 0)):
        dcqcn += u8(f) + (u32(dt) if f & 1 else u16(dt)) + (u32(tx) if f & 2 else u16(tx))
    out["dcqcn.defaults"] = dcqcn
    timely = u8(5) + timely_params({})
    for rtt in (20_000, 60_000, 120_000, 300_000, 700_000, 400_000, 200_000, 150_000,
                140_000, 130_000, 120_000, 110_000, 100_000, 40_000):
        timely += u8(1) + u32(rtt)
    out["timely.defaults"] = timely
    out["raw.dcqcn.defaults"] = (u8(0x84) + f64(1 / 256) + u64(55_000) + u64(55_000)
                                 + u64(10_000_000) + u32(5) + f64(40e6) + f64(0)
                                 + u64(100_000_000_000) + f64(1e6) + f64(1.0)
                                 + u64(300_000) + u64(50_000) + bytes(range(200)))
    out["raw.timely.defaults"] = (u8(0x85) + f64(0.875) + f64(0.8) + f64(10e6) + u64(50_000)
                                  + u64(500_000) + u64(13_000) + u32(5) + u32(5)
                                  + u64(100_000_000_000) + f64(1e6) + f64(0)
                                  + bytes(range(200)))
    # The DCTCP receiver: m = 2, CE flipping now and then, a timer.
    out["dctcp_rx"] = u8(2) + u8(8) + u8(0) + u16(999) + u8(2) + bytes(
        [0, 2, 4, 1, 3, 3, 0xFF, 0, 1, 0, 0, 0, 0xFF, 1, 1, 1])
    return out


# ---- output ----------------------------------------------------------------------------

def write(out: pathlib.Path, harness: str, seeds: dict[str, bytes]) -> int:
    d = out / harness
    d.mkdir(parents=True, exist_ok=True)
    for name, data in seeds.items():
        (d / name).write_bytes(data)
    reg = REGRESSIONS / harness
    if reg.is_dir():
        for f in sorted(reg.iterdir()):
            if f.is_file() and not f.name.startswith(".") and f.suffix != ".md":
                shutil.copyfile(f, d / f"regression.{f.name}")
    return len(list(d.iterdir()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "build" / "fuzz" / "corpus"),
                    help="directory of the per-harness corpora (default: %(default)s)")
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    vectors = json.loads(VECTORS.read_text())["vectors"]
    counts = {
        "fuzz_wire_frame": write(out, "fuzz_wire_frame", wire_frames(vectors)),
        "fuzz_int_hop": write(out, "fuzz_int_hop", int_hop_seeds(vectors)),
        "fuzz_cc": write(out, "fuzz_cc", cc_seeds()),
    }
    digest = hashlib.sha256(VECTORS.read_bytes()).hexdigest()[:12]
    print(f"seed corpora in {out} (wire.json {digest}): "
          + ", ".join(f"{h} {n}" for h, n in counts.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
