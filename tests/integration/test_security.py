"""Authenticated feedback and limits (issue 9; docs/security.md), with real
packets in the bundled dumbbell (h1, h2, h3 -> s1 -> s2 -> r1).

Invariants protected:
- an ACK (here one carrying an Rx-HPCC window) that is forged (wrong key),
  replayed (a valid tag but an fb_seq not above the newest accepted one), or
  truncated (no trailer; or shorter than its headers say) is dropped and
  counted and never applied: the window stays the receiver's; a positive
  control (right key, new fb_seq) shows the same packet *is* applied;
- PROBE_RESP of a probe-mode flow that is forged or replayed (an older probe
  number) is counted and not applied; a truncated one is dropped by xdp_host
  as malformed;
- key rotation without restart: engines (Transport.set_tag_key) drop the
  old key's ACKs from the moment they rotate and accept the new key's;
  the real `hpccd` rotates xdp_host's key on SIGHUP after the key file
  changed, so the PROBE_RESPs it reflects verify under the new key only;
- limits: the 257th sender flow of an engine is refused with ENOSPC, a
  clear message and a counter while the open flows complete; a too-small
  UMEM is refused at creation; a tiny UMEM (TX frames and RX fill ring
  exhausted) slows flows but they complete byte-exact, counted; a flood of
  new flows from one peer is capped at rx_peer_max (counted) while an
  existing flow completes byte-exact and another peer can still open one;
  a flood of probes does not stop a flow either;
- the receiver table recycles finished flows: after more than
  cfg.rx_flows finished flows without rx_reap() a new flow is still
  accepted (rx_recycled counts), where it used to be refused.
"""
from __future__ import annotations

import errno
import os
import pathlib
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time

import pytest

pytestmark = pytest.mark.integration

if os.geteuid() != 0:
    pytest.skip("AF_XDP, XDP and namespaces need root", allow_module_level=True)

from hpccd.transport.engine import Transport, TransportError, lib, pattern_crc32  # noqa: E402

from conftest import lab_ctx, transport_engines  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
XDP_HOST = ROOT / "build" / "ebpf" / "xdp_host.bpf.o"
HPCCD = shutil.which("hpccd") or str(ROOT / ".venv" / "bin" / "hpccd")
LINE = 2_000_000_000
T_NS = 300_000
PORT = 18471
K1, K2 = bytes(range(1, 17)), bytes(range(101, 117))


@pytest.fixture(scope="module")
def lab():
    if not XDP_HOST.exists():
        pytest.skip("build/ebpf objects missing (make bpf)")
    with lab_ctx("dumbbell") as lab:
        for h in ("h1", "h2", "h3"):
            lab.probe(h, "r1")
        yield lab


@pytest.fixture
def engines(lab):
    with transport_engines(lab, ack_every=4, rx_hpcc={"T_ns": T_NS, "line_rate_bps": LINE}) as make:
        yield make


def _until(pred, timeout: float, what: str, poll: float = 0.01):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(poll)


def _rx_done(tp: Transport, flow_id: int, timeout: float = 10.0):
    return _until(lambda: next((f for f in tp.rx_flows() if f.flow_id == flow_id and f.done),
                               None), timeout, f"receiver flow {flow_id:#x}")


# ---- building feedback packets (the receiver's side of the wire) -----------------------

def _ack(r1: str, h1: str, sport: int, flow_id: int, *, key: bytes | None, fb_seq: int,
         w: int, ack: int = 0, truncate: bool = False) -> bytes:
    """The UDP payload of an ACK from r1:PORT to h1:sport carrying an Rx-HPCC
    window W = w, its trailer tagged under `key` (a random key when None); no
    trailer at all with truncate."""
    from scapy.layers.inet import IP, UDP

    from hpccd.core import wire

    hdr = wire.Hpccd(type=wire.T_ACK, flow_id=flow_id, ack=ack)
    if truncate:
        return bytes(wire.HpccdInt(room=0) / hdr)
    body = wire.HpccdFeedback(w_bytes=w, u_q16=1 << 15, n_flows=1, t_ns=T_NS, fb_seq=fb_seq,
                              fb_flags=wire.FB_F_WINDOW)
    p = IP(src=r1, dst=h1) / UDP(sport=PORT, dport=sport) / wire.HpccdInt(room=0) / hdr / body
    p = IP(bytes(p))                                   # lengths filled, layers decoded
    wire.set_tag(key if key is not None else os.urandom(16), p)
    return bytes(p[wire.HpccdInt])


def _probe_resp(r1: str, h1: str, sport: int, flow_id: int, *, key: bytes | None,
                seq: int) -> bytes:
    from scapy.layers.inet import IP, UDP

    from hpccd.core import wire

    p = IP(src=r1, dst=h1) / UDP(sport=PORT, dport=sport) / wire.HpccdInt(room=0) / \
        wire.Hpccd(type=5, flow_id=flow_id, seq=seq) / wire.HpccdTag()
    p = IP(bytes(p))
    wire.set_tag(key if key is not None else os.urandom(16), p)
    return bytes(p[wire.HpccdInt])


def _sock(lab, node: str, port: int = 0) -> socket.socket:
    s = lab.socket(node, socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((lab.address(node), port))
    return s


class _RawUdp:
    """UDP datagrams with a complete checksum (a raw socket: a kernel UDP
    socket on a veth leaves CHECKSUM_PARTIAL, which the engine's DATA check
    rejects, as it would a corrupted packet)."""

    def __init__(self, lab, node: str, sport: int = 40999):
        self.src, self.sport = lab.address(node), sport
        self.s = lab.socket(node, socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)

    def send(self, dst: str, dport: int, payload: bytes) -> None:
        n = 8 + len(payload)
        ph = socket.inet_aton(self.src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 17, n)
        udp = struct.pack("!HHHH", self.sport, dport, n, 0) + payload
        data = ph + udp + (b"\0" if len(udp) % 2 else b"")
        c = sum(struct.unpack(f"!{len(data) // 2}H", data))
        while c >> 16:
            c = (c & 0xFFFF) + (c >> 16)
        c = (~c & 0xFFFF) or 0xFFFF
        self.s.sendto(udp[:6] + struct.pack("!H", c) + udp[8:], (dst, 0))

    def close(self) -> None:
        self.s.close()


def _xdp_slot(tp: Transport, name: str) -> int:
    from hpccd.bpf import counters as bpf_counters

    return tp.xdp_counters()[next(s.index for s in bpf_counters.XDP_SLOTS if s.name == name)]


# ---- ACK: forged, replayed, truncated ([HPCC++2022] section 9.1) -----------------------------

def test_ack_forged_replayed_truncated_dropped_counted_never_applied(lab, engines):
    engines("r1", tag_key=K1)                     # the receiver, its ACKs tagged with K1
    tx = engines("h1", tag_key=K1)
    r1, h1 = lab.address("r1"), lab.address("h1")
    flow = tx.open_flow(r1, 400_000_000, algo="rx-hpcc", line_rate_bps=LINE,
                        hpcc={"T_ns": T_NS}, timeout_s=30)
    s = _sock(lab, "r1", PORT)
    try:
        _until(lambda: flow.stats().stats["rx_windows"] >= 3, 10, "genuine windows")
        st0 = flow.stats().stats
        malformed0 = _xdp_slot(tx, "malformed_len")
        send = lambda payload: [s.sendto(payload, (h1, flow.sport)) for _ in range(5)]  # noqa
        send(_ack(r1, h1, flow.sport, flow.flow_id, key=None, fb_seq=1 << 30, w=1000))
        _until(lambda: flow.stats().stats["bad_tags"] - st0["bad_tags"] >= 5, 5, "forged")
        # replayed: a valid tag, but an fb_seq the flow has taken already
        send(_ack(r1, h1, flow.sport, flow.flow_id, key=K1, fb_seq=1, w=1000))
        _until(lambda: flow.stats().stats["fb_replayed"] - st0["fb_replayed"] >= 5, 5,
               "replayed")
        # truncated: no trailer (len 0), and a frame shorter than its hpccd len
        send(_ack(r1, h1, flow.sport, flow.flow_id, key=K1, fb_seq=1 << 30, w=1000,
                  truncate=True))
        full = _ack(r1, h1, flow.sport, flow.flow_id, key=K1, fb_seq=1 << 30, w=1000)
        send(full[:-4])
        _until(lambda: _xdp_slot(tx, "malformed_len") - malformed0 >= 5, 5,
               "truncated frames dropped in XDP")
        time.sleep(0.1)
        st1 = flow.stats().stats
        assert st1["bad_tags"] - st0["bad_tags"] == 10      # forged + without trailer
        assert st1["fb_replayed"] - st0["fb_replayed"] == 5
        assert st1["window_bytes"] != 2 * 1000              # never applied (window 2 W)
        assert st1["rx_windows"] > st0["rx_windows"]        # the genuine ones still are
        # positive control: right key, a new fb_seq: the same forgery *is* applied
        w = 20_000                                          # within [w_min, w_max]
        s.sendto(_ack(r1, h1, flow.sport, flow.flow_id, key=K1, fb_seq=1 << 30, w=w),
                 (h1, flow.sport))
        _until(lambda: abs(flow.stats().stats["window_bytes"] - 2 * w) < 1, 5,
               "control applied")
    finally:
        s.close()
        flow.close()


# ---- PROBE_RESP: forged, replayed, truncated ------------------------------------------------

def test_probe_resp_forged_replayed_truncated_not_applied(lab, engines):
    rx = engines("r1", tag_key=K1)
    tx = engines("h1", tag_key=K1)
    r1, h1 = lab.address("r1"), lab.address("h1")
    try:
        flow = tx.open_flow(r1, 400_000_000, algo="hpcc", line_rate_bps=LINE,
                            hpcc={"T_ns": T_NS}, int_mode="probe", timeout_s=30)
    except (TypeError, ValueError, TransportError) as e:
        pytest.skip(f"probe mode not available in this build: {e}")
    s = _sock(lab, "r1", PORT)
    try:
        _until(lambda: flow.stats().stats["probes_answered"] >= 3, 10, "genuine responses")
        st0 = flow.stats().stats
        malformed0 = _xdp_slot(tx, "malformed_len")
        for _ in range(5):
            s.sendto(_probe_resp(r1, h1, flow.sport, flow.flow_id, key=None, seq=1 << 40),
                     (h1, flow.sport))
            # replayed: right key, probe number 1 (long answered)
            s.sendto(_probe_resp(r1, h1, flow.sport, flow.flow_id, key=K1, seq=1),
                     (h1, flow.sport))
            s.sendto(_probe_resp(r1, h1, flow.sport, flow.flow_id, key=K1, seq=1)[:-4],
                     (h1, flow.sport))
        _until(lambda: flow.stats().stats["probe_bad_tags"] - st0["probe_bad_tags"] >= 5, 5,
               "forged responses counted")
        _until(lambda: flow.stats().stats["probes_late"] - st0["probes_late"] >= 5, 5,
               "replayed responses counted")
        _until(lambda: _xdp_slot(tx, "malformed_len") - malformed0 >= 5, 5,
               "truncated responses dropped in XDP")
        st1 = flow.stats().stats
        assert st1["probe_bad_tags"] - st0["probe_bad_tags"] == 5
        assert rx.stats()["bad_csum"] == 0
    finally:
        s.close()
        flow.close()


# ---- key rotation -----------------------------------------------------------------------------

def test_engine_key_rotation_without_restart(lab, engines):
    rx = engines("r1", tag_key=K1)
    tx = engines("h1", tag_key=K1)
    r1, h1 = lab.address("r1"), lab.address("h1")
    flow = tx.open_flow(r1, 2_000_000_000, algo="rx-hpcc", line_rate_bps=400_000_000,
                        hpcc={"T_ns": T_NS}, timeout_s=30)
    s = _sock(lab, "r1", PORT)
    try:
        st = lambda: flow.stats().stats  # noqa: E731
        _until(lambda: st()["rx_windows"] >= 3, 10, "windows under K1")
        # the sender rotates first: the receiver's K1 ACKs are now dropped
        tx.set_tag_key(K2)
        a = st()
        _until(lambda: st()["bad_tags"] - a["bad_tags"] >= 3, 10, "old-key ACKs dropped")
        # the receiver follows: its K2 ACKs are accepted again
        rx.set_tag_key(K2)
        time.sleep(0.05)                                   # what was in flight under K1
        b = st()
        _until(lambda: st()["rx_windows"] - b["rx_windows"] >= 3, 10,
               "new-key ACKs accepted")
        c = st()
        time.sleep(0.2)
        d = st()
        assert d["bad_tags"] == c["bad_tags"]              # nothing under the old key now
        # a forgery under the old key with a fresh seq: dropped, not applied
        s.sendto(_ack(r1, h1, flow.sport, flow.flow_id, key=K1, fb_seq=1 << 30, w=1000),
                 (h1, flow.sport))
        _until(lambda: st()["bad_tags"] > d["bad_tags"], 5, "old-key forgery counted")
        assert st()["window_bytes"] != 2 * 1000
        print(f"\nrotation: {b['bad_tags'] - a['bad_tags']} ACKs dropped in between; "
              f"{d['rx_windows'] - b['rx_windows']} windows accepted under the new key")
    finally:
        s.close()
        flow.close()


def _ping_probe(lab, key: bytes | None) -> tuple[bool, bool]:
    """A native PROBE from r1 to h1; xdp_host of h1 reflects it.  Whether the
    PROBE_RESP's tag verifies under K1, under K2."""
    from scapy.layers.inet import IP, UDP

    from hpccd.core import wire

    r1, h1 = lab.address("r1"), lab.address("h1")
    s = _sock(lab, "r1")
    try:
        sport = s.getsockname()[1]
        probe = wire.int_header(room=2) / wire.Hpccd(type=4, flow_id=7, seq=1) / \
            wire.HpccdTag()
        s.settimeout(0.5)
        for _ in range(10):
            s.sendto(bytes(probe), (h1, PORT))
            try:
                data, src = s.recvfrom(2048)
            except socket.timeout:
                continue
            pkt = IP(src=h1, dst=r1) / UDP(sport=PORT, dport=sport) / wire.HpccdInt(data)
            pkt = IP(bytes(pkt))
            return wire.verify_tag(K1, pkt), wire.verify_tag(K2, pkt)
        raise AssertionError("no PROBE_RESP from h1's xdp_host")
    finally:
        s.close()


def test_daemon_sighup_rotates_the_key_into_xdp(lab):
    from hpccd.agent.control import ControlError, request

    if not os.path.exists(HPCCD):
        pytest.skip("the hpccd entry point is not installed")
    d = pathlib.Path(tempfile.mkdtemp(prefix="hpccd-k-"))
    key = d / "tag.key"
    key.write_text(K1.hex() + "\n")
    cfg = d / "hpccd.toml"
    cfg.write_text(f'[daemon]\ncontrol_socket = "{d}/ctl.sock"\nmetrics_address = ""\n'
                   f'bpf_dir = "{ROOT / "build" / "ebpf"}"\n\n[[interfaces]]\nname = "eth0"\n'
                   f'tc_tracker = false\n\n[transport]\nintegrity_key_file = "{key}"\n')
    log = d / "hpccd.log"
    p = lab.popen("h1", [HPCCD, "--config", str(cfg)], stdout=open(log, "w"),
                  stderr=subprocess.STDOUT)
    sock = str(d / "ctl.sock")
    try:
        st = _until(lambda: _status(request, ControlError, sock), 60, "hpccd ready", 0.1)
        assert st["config"]["integrity_key"]
        assert _ping_probe(lab, K1) == (True, False)
        key.write_text(K2.hex() + "\n")
        p.send_signal(signal.SIGHUP)
        _until(lambda: (_status(request, ControlError, sock) or {}).get("last_reload", {})
               .get("ok_count", 0) >= 1, 30, "reload applied")
        assert _ping_probe(lab, K2) == (False, True)
        # a key file that is refused (all zero) keeps the running key
        key.write_text("00" * 16 + "\n")
        p.send_signal(signal.SIGHUP)
        _until(lambda: (_status(request, ControlError, sock) or {}).get("last_reload", {})
               .get("error_count", 0) >= 1, 30, "reload refused")
        assert _ping_probe(lab, K2) == (False, True)
        p.send_signal(signal.SIGTERM)
        assert p.wait(30) == 0, log.read_text()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)
        lab.run("h1", [HPCCD, "--cleanup", "--config", str(cfg)], timeout=60)
        shutil.rmtree(d, ignore_errors=True)


def _status(request, ControlError, sock):
    try:
        return request(sock, "status", timeout=2)
    except ControlError:
        return None


# ---- limits -----------------------------------------------------------------------------------

def test_sender_flow_limit_refused_with_clear_error_and_counter(lab, engines):
    rx = engines("r1")
    n = 256                     # cfg.max_flows: the engine's sender flow slots
    tx = engines("h1", config={"max_flows": n})
    r1 = lab.address("r1")
    big = tx.open_flow(r1, 20_000_000, algo="dctcp", line_rate_bps=400_000_000, timeout_s=20)
    flows = [big] + [tx.open_flow(r1, 1000, algo="hpcc", line_rate_bps=LINE,
                                  hpcc={"T_ns": T_NS}) for _ in range(n - 1)]
    try:
        with pytest.raises(TransportError) as ei:
            tx.open_flow(r1, 1000, algo="hpcc", line_rate_bps=LINE)
        assert ei.value.errno == errno.ENOSPC
        assert f"all {n} flow slots are in use" in str(ei.value)
        assert tx.stats()["flows_refused"] == 1
        big.wait(60)                                    # the open flows are served
        assert _rx_done(rx, big.flow_id).crc32 == pattern_crc32(big.seed, 20_000_000)
        for f in flows[1:]:
            f.wait(30)
        flows[1].close()                               # a slot freed: accepted again
        again = tx.open_flow(r1, 1000, algo="hpcc", line_rate_bps=LINE)
        flows.append(again)
        again.wait(30)
    finally:
        for f in flows:
            f.close()


def test_umem_too_small_refused_and_exhaustion_survived(lab, engines):
    with pytest.raises(TransportError) as ei:
        Transport("eth0", netns=lab.netns("h2"), config={"rx_frames": 16})
    assert ei.value.errno == errno.EINVAL and "frames" in str(ei.value)
    rx = engines("r1", config={"rx_frames": 64})
    tx = engines("h1", config={"tx_frames": 128})
    r1 = lab.address("r1")
    flows = [tx.open_flow(r1, 2_000_000, algo=a, line_rate_bps=LINE, hpcc={"T_ns": T_NS},
                          timeout_s=20)
             for a in ("hpcc", "rx-hpcc", "dctcp", "ldcp") * 2]
    try:
        # Exhaust it for sure: the receiver's thread stops reaping for 200 ms
        # while eight flows send, so its 64 fill-ring frames run out and the
        # kernel drops at the socket; then it resumes and every flow must
        # still complete byte-exact (retransmission does the rest).
        _until(lambda: sum(f.stats().stats["snd_una"] for f in flows) > 200_000, 10,
               "flows under way")
        rx.stop()
        time.sleep(0.2)
        rx.start()
        for f in flows:
            f.wait(60)
            assert _rx_done(rx, f.flow_id).crc32 == pattern_crc32(f.seed, 2_000_000)
        ts, rs = tx.stats(), rx.stats()
        print(f"\ntiny UMEM: sender TX frame shortages {ts['tx_no_frame']}, receiver fill "
              f"ring empty {rs['k_rx_fill_ring_empty']}, kernel RX drops {rs['k_rx_dropped']}")
        # exhausted, counted, survived (copy mode frees TX frames inside the
        # kick, so it is the receiver's 64-frame fill ring that runs dry)
        assert ts["tx_no_frame"] + rs["k_rx_fill_ring_empty"] + rs["k_rx_dropped"] > 0
        _until(lambda: tx.stats()["tx_free"] == 128, 5, "every TX frame back")
    finally:
        for f in flows:
            f.close()


def test_flood_of_new_flows_and_probes_from_one_peer(lab, engines):
    rx = engines("r1", tag_key=K1, config={"rx_peer_max": 64})
    tx = engines("h1", tag_key=K1)             # ACKs are tagged: both ends hold the key
    r1 = lab.address("r1")
    flow = tx.open_flow(r1, 30_000_000, algo="hpcc", line_rate_bps=400_000_000,
                        hpcc={"T_ns": T_NS}, timeout_s=20)
    from hpccd.core import wire

    flood = _sock(lab, "h2")
    raw = _RawUdp(lab, "h2")
    probes = 0
    try:
        _until(lambda: flow.stats().stats["snd_una"] > 1_000_000, 10, "flow under way")
        # 1000 new flows from h2 (DATA that never finishes) and probes between them
        for i in range(1000):
            data = bytes(wire.HpccdInt(room=0) / wire.Hpccd(type=1, flow_id=0x5000 + i,
                                                            seq=1396) / (b"z" * 64))
            raw.send(r1, PORT, data)
            if i % 2 == 0:
                flood.sendto(bytes(wire.int_header(room=2) /
                                   wire.Hpccd(type=4, flow_id=9, seq=i) / wire.HpccdTag()),
                             (r1, PORT))
                probes += 1
            if i % 50 == 0:
                time.sleep(0.001)
        res = flow.wait(60)
        assert _rx_done(rx, flow.flow_id).crc32 == pattern_crc32(flow.seed, 30_000_000)
        # the flood may still be in the rings: until its count stands still
        last = [-1]

        def settled() -> bool:
            time.sleep(0.3)
            v = rx.stats()["rx_peer_full"]
            ok, last[0] = v == last[0], v
            return ok

        _until(settled, 15, "the flood processed")
        st = rx.stats()
        from_h2 = [f for f in rx.rx_flows() if f.saddr == lab.address("h2")]
        print(f"\nflood: {len(from_h2)} flows of h2 admitted, {st['rx_peer_full']} refused "
              f"(rx_peer_full), probes reflected {_xdp_slot(rx, 'tx_probe_resp_udp')}; "
              f"h1's flow FCT {res.fct_s:.2f} s")
        assert len(from_h2) == 64 and st["rx_peer_full"] >= 1000 - 64 - 5
        assert _xdp_slot(rx, "tx_probe_resp_udp") >= probes * 0.9
        # another peer can still open a flow
        tx3 = engines("h3", tag_key=K1)
        f3 = tx3.open_flow(r1, 1_000_000, algo="dctcp", line_rate_bps=LINE)
        f3.wait(30)
        assert _rx_done(rx, f3.flow_id).crc32 == pattern_crc32(f3.seed, 1_000_000)
        assert rx.stats()["rx_peer_full"] == st["rx_peer_full"]
    finally:
        flood.close()
        raw.close()
        flow.close()


def test_flows_at_one_home_past_the_probe_bound_refused(lab, engines):
    """TP_RX_PROBE_MAX (docs/security.md "Limits"): 1000 unfinished flows of
    h2 whose ids are equal modulo the receiver's table (1024 slots: one home
    whatever its keys; rx_peer_max 256) while a long flow of h1 runs.  The
    run from their home takes the bound's 128 slots less h1's flow if it
    sits there, the rest are refused and counted in rx_probe_full only; h1's
    flow is served byte-exact throughout (kept running: a done flow in the
    run would be recycled for h2's next new flow, as a full run's done
    flows are)."""
    table, bound = 1024, 128
    rx = engines("r1", ack_every=1, config={"rx_flows": table})
    tx = engines("h1")
    r1, h1, h2 = lab.address("r1"), lab.address("h1"), lab.address("h2")
    flow = tx.open_flow(r1, 2_000_000_000, algo="hpcc", line_rate_bps=400_000_000,
                        hpcc={"T_ns": T_NS}, timeout_s=60)
    from hpccd.core import wire

    def served() -> int:
        """h1's flow at the receiver: bytes delivered, each one right."""
        r = next(f for f in rx.rx_flows() if f.saddr == h1)
        assert not r.done and r.crc32 == pattern_crc32(flow.seed, r.bytes)
        return r.bytes

    s = _RawUdp(lab, "h2")
    try:
        _until(lambda: flow.stats().stats["snd_una"] > 1_000_000, 10, "flow under way")
        for i in range(1000):
            s.send(r1, PORT, bytes(wire.HpccdInt(room=0) /
                                   wire.Hpccd(type=1, flags=0x40, flow_id=0x7000 + i * table) /
                                   (b"h" * 64)))
            if i % 64 == 0:
                time.sleep(0.002)

        def from_h2() -> list:
            return [f for f in rx.rx_flows() if f.saddr == h2]

        _until(lambda: len(from_h2()) + rx.stats()["rx_probe_full"] >= 1000, 10,
               "every DATA of h2 admitted or refused")
        st, took, now = rx.stats(), len(from_h2()), served()
        print(f"\none home: {took} flows of h2 admitted, {st['rx_probe_full']} refused "
              f"(rx_probe_full); h1's flow at {now} bytes")
        assert bound - 1 <= took <= bound and st["rx_probe_full"] == 1000 - took
        assert st["rx_peer_full"] == 0 and st["rx_table_full"] == 0
        assert st["rx_recycled"] == 0 and st["rx_expired"] == 0
        _until(lambda: served() > now + 2_000_000, 20, "h1's flow served on")
        assert flow.stats().state == "running"
    finally:
        s.close()
        flow.close()


def test_receiver_table_recycles_finished_flows(lab, engines):
    """More finished flows than the receiver table holds (cfg.rx_flows) without
    rx_reap(): new flows are still accepted (the mice experiment's
    long-running receiver)."""
    table = 1024
    rx = engines("r1", ack_every=1, config={"rx_flows": table})
    r1 = lab.address("r1")
    from hpccd.core import wire

    s = _RawUdp(lab, "h2")
    total = table + 200
    try:
        for i in range(total):
            # a whole flow in one packet: SYN | FIN, 100 bytes
            s.send(r1, PORT, bytes(wire.HpccdInt(room=0) /
                                   wire.Hpccd(type=1, flags=0x48, flow_id=0x10000 + i) /
                                   (b"m" * 100)))
            if i % 64 == 0:
                time.sleep(0.002)
        _until(lambda: rx.stats()["by_type"]["DATA"] >= total, 10, "every DATA received")
        st = rx.stats()
        assert st["rx_table_full"] == 0
        assert st["rx_recycled"] >= total - table
        assert st["rx_used"] == table and st["rx_live"] == 0
        # and a real flow afterwards
        tx = engines("h1")
        f = tx.open_flow(r1, 500_000, algo="hpcc", line_rate_bps=LINE, hpcc={"T_ns": T_NS})
        f.wait(30)
        assert _rx_done(rx, f.flow_id).crc32 == pattern_crc32(f.seed, 500_000)
        # the listing walks the engine's list of used slots (recycled
        # ones swapped out of it): each of the table's flows once, the
        # real one among them, over many more than its first room
        listed = rx.rx_flows()
        assert len(listed) == table > 64
        assert len({(x.saddr, x.flow_id) for x in listed}) == table
        assert any(x.flow_id == f.flow_id for x in listed)
        assert rx.rx_reap() == table
        assert rx.stats()["rx_used"] == 0
    finally:
        s.close()
