"""The struct_ops TCP congestion controls "hpcc" and "dctcp" (ebpf/tcp_hpcc.bpf.c,
ebpf/tcp_dctcp.bpf.c) and their registration (hpccd.tcp_side.engine.TcpCc).

Invariants protected:
- both objects load through the verifier and register; while registered the
  names are in tcp_available_congestion_control, after stop() they are not,
  and nothing named hpccd_tcp_* is left registered;
- the host-wide names are shared by every live owner (one per namespace's
  daemon): a second TcpCc joins the first one's registration (the same
  maps), either may leave first, the registration stays while one owner
  lives and goes with the last one; TcpCc.cleanup_stale() (every daemon's
  start-up clean-up) touches nothing while an owner lives;
- a registration left by a SIGKILLed owner is removed by the next start(),
  which then registers its own; one whose registrant was SIGKILLed while
  another owner lives stays, and that owner, the last, unregisters it;
- the Python layouts (struct formats, counter slot names) are the header's;
- a TCP-side probe built by hpccd.tcp_side.engine is what docs/wire-format.md and
  the scapy layers say (DSCP, no TCP flag, correct TCP checksum, INT with
  COLLECT, PROBE with the probe number and a zeroed tag slot), and the
  reference classifier finds it valid.
"""
from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import struct
import subprocess
import sys

import pytest

pytestmark = pytest.mark.bpf

if os.geteuid() != 0:
    pytest.skip("registering struct_ops needs root", allow_module_level=True)

from scapy.layers.inet import IP, TCP  # noqa: E402
from scapy.layers.l2 import Ether  # noqa: E402

from hpccd._bpf import ffi as abi  # noqa: E402
from hpccd.bpf import loader as bpf  # noqa: E402
from hpccd.bpf.abi import c_layout, check_format, format_layout  # noqa: E402
from hpccd.tcp_side import engine as tcp_side  # noqa: E402
from hpccd.core import wire  # noqa: E402
from hpccd.tcp_side.engine import FlowKey, TcpCc, TcpSideError  # noqa: E402
from child_process import killed_when_ready  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILT = ROOT / "build" / "ebpf"
LOCK_WAIT_S = 60.0
NAMES = ("hpcc", "dctcp")


def available() -> list[str]:
    with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
        return f.read().split()


def registered_maps() -> list[str]:
    """Names of registered (value state INUSE) hpccd_tcp_* struct_ops maps:
    a map exists only while something holds it, and ours are held by their
    object or by the kernel's registration."""
    out = subprocess.run(["bpftool", "-j", "map", "show"], capture_output=True, text=True,
                         timeout=30)
    import json
    return [m["name"] for m in json.loads(out.stdout or "[]")
            if m.get("type") == "struct_ops" and m.get("name", "").startswith("hpccd_tcp_")]


@pytest.fixture(autouse=True)
def built():
    for n in ("tcp_hpcc", "tcp_dctcp"):
        if not (BUILT / f"{n}.bpf.o").exists():
            pytest.skip(f"build/ebpf/{n}.bpf.o is not built (make bpf)")


def test_load_register_unregister():
    c = TcpCc(BUILT)
    c.start(wait_s=LOCK_WAIT_S)
    try:
        for n in NAMES:
            assert n in available()
        # what the CC programs and maps look like to the kernel
        for n, (_, map_name) in tcp_side.CC_NAMES.items():
            obj = c.objs[n]
            progs = [obj.program(p) for p in obj.program_names()]
            assert progs and all(p.type == bpf.lib.HPCCD_BPF_PROG_TYPE_STRUCT_OPS for p in progs)
            assert obj.map(map_name).type == bpf.lib.HPCCD_BPF_MAP_TYPE_STRUCT_OPS
    finally:
        c.stop()
    for n in NAMES:
        assert n not in available()
    c.stop()                                       # twice: fine
    assert not registered_maps()


@pytest.mark.parametrize("first_leaves", ["registrant", "joiner"])
def test_second_owner_shares_last_one_unregisters(first_leaves):
    a = TcpCc(BUILT)
    a.start(wait_s=LOCK_WAIT_S)
    b = TcpCc(BUILT)
    try:
        b.start(wait_s=0)
        assert a.registered and not b.registered and not b.removed_stale
        for n, m in (("hpcc", "hpccd_tcp_win"), ("hpcc", "hpccd_tcp_cfg"),
                     ("dctcp", "hpccd_dctcp_cnt")):
            assert b.map(n, m).id == a.map(n, m).id
        assert sorted(registered_maps()) == ["hpccd_tcp_dctcp", "hpccd_tcp_hpcc"]
        assert TcpCc.cleanup_stale() == []                 # live owners: not stale
        first, last = (a, b) if first_leaves == "registrant" else (b, a)
        first.stop()
        assert not first.unregistered and not first.started
        assert all(n in available() for n in NAMES)        # the other one still uses them
        assert sorted(registered_maps()) == ["hpccd_tcp_dctcp", "hpccd_tcp_hpcc"]
        win = last.map("hpcc", "hpccd_tcp_win")
        key = bytes(16)
        win.update(key, struct.pack(tcp_side.WIN_FMT, 1, 2, 3, 4, 5))
        assert win.lookup(key) == struct.pack(tcp_side.WIN_FMT, 1, 2, 3, 4, 5)
        win.delete(key)
        last.stop()
        assert last.unregistered
    finally:
        a.stop()
        b.stop()
    assert not any(n in available() for n in NAMES)
    assert not registered_maps()


def test_an_owner_of_another_build_is_refused_clearly():
    """Registrations are host-wide: a daemon of another build (another
    hpccd_tcp_win layout) must not join a registration and write windows
    the CC reads as something else.  Simulated: the registration's state
    points hpccd_tcp_win at a map of 32-byte values (the layout before
    w_bytes).  The joiner is refused naming the map and both sizes, holds
    no lock, and the registrant's registration is untouched."""
    import json
    a = TcpCc(BUILT)
    a.start(wait_s=LOCK_WAIT_S)
    pin = f"/sys/fs/bpf/hpccd-test-oldwin-{os.getpid()}"
    state = pathlib.Path(a.state_file)
    saved = state.read_text()
    try:
        subprocess.run(["bpftool", "map", "create", pin, "type", "hash", "key", "16", "value",
                        "32", "entries", "16384", "name", "hpccd_tcp_win"], check=True,
                       capture_output=True, timeout=30)
        old = json.loads(subprocess.run(["bpftool", "-j", "map", "show", "pinned", pin],
                                        check=True, capture_output=True, text=True,
                                        timeout=30).stdout)["id"]
        st = json.loads(saved)
        st["maps"]["hpcc"]["hpccd_tcp_win"] = old
        state.write_text(json.dumps(st))
        b = TcpCc(BUILT)
        with pytest.raises(TcpSideError) as ei:
            b.start(wait_s=0)
        msg = str(ei.value)
        assert "another build of hpccd" in msg and "hpccd_tcp_win" in msg, msg
        assert "16384 x 32 bytes" in msg and "16384 x 40" in msg, msg
        assert not b.started and not b._maps
        assert json.loads(state.read_text())["owners"] == st["owners"]   # not joined
    finally:
        state.write_text(saved)
        if os.path.exists(pin):
            os.unlink(pin)
        a.stop()
    assert not registered_maps()


def test_daemon_clean_up_leaves_a_live_owner_alone():
    """The tcp_side component's clean-up (run by every hpccd at start and by
    `hpccd --cleanup`) removes stale registrations only under the lock: with
    a live owner it returns nothing and the owner's struct_ops stay."""
    from hpccd.tcp_side.engine import COMPONENT
    a = TcpCc(BUILT)
    a.start(wait_s=LOCK_WAIT_S)
    try:
        assert COMPONENT.cleanup_stale(None) == []
        assert all(n in available() for n in NAMES)
        assert registered_maps()
    finally:
        a.stop()


CHILD = """
import sys, time
sys.path.insert(0, {daemon!r})
from hpccd.tcp_side.engine import TcpCc
c = TcpCc({built!r}).start(wait_s=60)
for link in c.links.values():
    link.disconnect()          # as if the process died without unregistering
print("ready", flush=True)
time.sleep(600)
"""


def test_stale_registration_removed_at_start():
    killed_when_ready(CHILD.format(daemon=str(ROOT / "daemon"), built=str(BUILT)))
    # The dead process's registrations outlive it (libbpf 1.1 registers
    # without a kernel link) ...
    assert all(n in available() for n in NAMES)
    c = TcpCc(BUILT)
    try:
        c.start(wait_s=LOCK_WAIT_S)        # ... until the next owner starts
        assert sorted(c.removed_stale) == ["hpccd_tcp_dctcp", "hpccd_tcp_hpcc"]
        assert all(n in available() for n in NAMES)       # its own, now
    finally:
        c.stop()
    assert not any(n in available() for n in NAMES)
    assert not registered_maps()


CHILD_OWNER = """
import sys, time
sys.path.insert(0, {daemon!r})
from hpccd.tcp_side.engine import TcpCc
c = TcpCc({built!r}).start(wait_s=60)
print("registered" if c.registered else "joined", flush=True)
time.sleep(600)
"""


@contextlib.contextmanager
def registrant():
    """A child process that registered the CCs (CHILD_OWNER) and holds its
    share until killed; killed at the end of the block if still alive."""
    child = subprocess.Popen([sys.executable, "-c", CHILD_OWNER.format(
        daemon=str(ROOT / "daemon"), built=str(BUILT))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline()
        assert line.strip() == "registered", (line, child.stderr.read()
                                              if child.poll() is not None else "")
        yield child
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=30)
        child.stdout.close()
        child.stderr.close()


def test_a_registration_still_held_by_a_socket_is_not_stale():
    """An unregistered struct_ops map lives on while a socket still runs
    its CC (the kernel answers EINPROGRESS to unregistering it again).  The
    next owner registers beside it and its stop(), the last owner's, which
    unregisters every hpccd_tcp_* map it finds, must pass over that one:
    seen as a daemon's stop failing ("Operation now in progress") right after
    iperf3 flows of an earlier daemon's registration."""
    import socket
    srv = socket.create_server(("127.0.0.1", 0))
    cli = socket.socket()
    a = TcpCc(BUILT)
    a.start(wait_s=LOCK_WAIT_S)
    try:
        cli.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"hpcc")
        cli.connect(srv.getsockname())
        conn, _ = srv.accept()
        a.stop()                      # unregistered; the socket still holds the map
        assert a.unregistered and "hpcc" not in available()
        assert "hpccd_tcp_hpcc" in registered_maps()
        b = TcpCc(BUILT)
        b.start(wait_s=0)
        try:
            assert sorted(registered_maps()).count("hpccd_tcp_hpcc") == 2
            assert TcpCc.cleanup_stale() == []          # b lives: nothing touched
        finally:
            b.stop()                                    # must not raise
        assert b.unregistered and "hpcc" not in available()
        assert cli.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0") \
            == b"hpcc"
        conn.close()
    finally:
        cli.close()
        srv.close()
        a.stop()


def test_registrant_sigkilled_while_another_owner_lives():
    b = TcpCc(BUILT)
    try:
        with registrant() as child:
            b.start(wait_s=LOCK_WAIT_S)
            assert not b.registered
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=30)
        # The registrant is gone, b still owns a share: nothing is stale.
        assert TcpCc.cleanup_stale() == []
        assert all(n in available() for n in NAMES)
        assert b.others() == []
        cfg = b.map("hpcc", "hpccd_tcp_cfg")
        cfg.update(0, struct.pack(tcp_side.CFG_FMT, 1, 2, 3, 4, 5))
        b.stop()                                          # the last owner
        assert b.unregistered
        assert not any(n in available() for n in NAMES)
        assert not registered_maps()
    finally:
        b.stop()


def test_tcp_side_stopping_beside_another_owner_marks_the_configuration_idle():
    """The heartbeat is host-wide: an owner that stops while another lives
    leaves the configuration, with idle_ns set (an idle owner writes no
    heartbeat until a flow of its own wakes it, and the CC trusts an idle
    engine for a flow younger than stale_ns); the last owner zeroes it."""
    b = TcpCc(BUILT)
    objs = [bpf.BpfObject.open(BUILT / f"{n}.bpf.o") for n in ("tc_tracker", "xdp_host")]
    params = {"T_ns": 100_000.0, "line_rate_bps": 1_000_000_000, "mtu_bytes": 1500}
    side = None
    try:
        with registrant() as child:
            b.start(wait_s=LOCK_WAIT_S)
            for o in objs:
                o.load()
            side = tcp_side.TcpSide(*objs, tcp_cc=b, hpcc_params=params)
            side.start()                              # no flow: the idle mark at once
            cfg = b.map("hpcc", "hpccd_tcp_cfg")
            w_init, rate, stale, hb, idle = struct.unpack(tcp_side.CFG_FMT, cfg.lookup(0))
            assert idle == hb > 0 and stale == side.stale_ns and w_init > 0 and rate > 0
            assert side.stats["idle_marks"] == 1
            # as an owner with flows would leave it: a heartbeat, not idle
            cfg.update(0, struct.pack(tcp_side.CFG_FMT, w_init, rate, stale, hb, 0))
            side.stop()                               # the child still owns a share
            after = struct.unpack(tcp_side.CFG_FMT, cfg.lookup(0))
            assert after[:4] == (w_init, rate, stale, hb) and after[4] > hb, after
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=30)
        side = tcp_side.TcpSide(*objs, tcp_cc=b, hpcc_params=params)
        side.start()
        side.stop()                                   # the last owner now
        assert cfg.lookup(0) == bytes(struct.calcsize(tcp_side.CFG_FMT))
    finally:
        if side is not None:
            side.stop()
        b.stop()
        for o in objs:
            o.close()


# ---- layouts -----------------------------------------------------------------------

def _enum_names(name: str, prefix: str) -> tuple[str, ...]:
    members = sorted(abi.typeof(f"enum {name}").relements.items(), key=lambda kv: kv[1])
    assert members[-1][0].endswith("COUNTERS")
    return tuple(n.removeprefix(prefix).lower() for n, _ in members[:-1])


def test_python_layouts_match_the_headers():
    for fmt, name in ((tcp_side.WIN_FMT, "hpccd_tcp_win"), (tcp_side.CFG_FMT, "hpccd_tcp_cc_cfg"),
                      (tcp_side.CST_FMT, "hpccd_tcp_cc_state"),
                      (tcp_side.DCTCP_ST_FMT, "hpccd_tcp_dctcp_state"),
                      (tcp_side.TCP_FLOW_FMT, "hpccd_tcp_flow"),
                      (tcp_side.TELEM_FMT, "hpccd_tcp_telem"),
                      (tcp_side.KEY_FMT, "hpccd_flow_key")):
        assert struct.calcsize(fmt) == abi.sizeof(f"struct {name}"), name
        assert format_layout(fmt) == c_layout(name), name
    # a field of the wrong width, or a struct's pad forgotten, is refused at import
    with pytest.raises(ImportError, match="hpccd_tcp_win"):
        check_format("=QQQI", "hpccd_tcp_win")
    with pytest.raises(ImportError, match="hpccd_flow_key"):
        check_format("=4s4sHHB", "hpccd_flow_key")
    assert tcp_side.HPCC_COUNTERS == _enum_names("hpccd_tcp_hpcc_counter", "HPCCD_TCPC_")
    assert tcp_side.DCTCP_COUNTERS == _enum_names("hpccd_tcp_dctcp_counter", "HPCCD_TCPD_")
    # map value sizes as the kernel created them (loaded, not registered)
    with bpf.BpfObject.open(BUILT / "tcp_hpcc.bpf.o") as o:
        o.load()
        assert o.map("hpccd_tcp_win").value_size == struct.calcsize(tcp_side.WIN_FMT)
        assert o.map("hpccd_tcp_cfg").value_size == struct.calcsize(tcp_side.CFG_FMT)
        assert o.map("hpccd_tcp_cst").value_size == struct.calcsize(tcp_side.CST_FMT)
        assert o.map("hpccd_tcpc_cnt").max_entries == len(tcp_side.HPCC_COUNTERS)
    with bpf.BpfObject.open(BUILT / "tcp_dctcp.bpf.o") as o:
        o.load()
        assert o.map("hpccd_dctcp_st").value_size == struct.calcsize(tcp_side.DCTCP_ST_FMT)
        assert o.map("hpccd_dctcp_cnt").max_entries == len(tcp_side.DCTCP_COUNTERS)


# ---- the probe -----------------------------------------------------------------------

def test_probe_packet_is_a_tcp_side_probe():
    key = FlowKey("10.1.2.3", "10.4.5.6", 40123, 5201)
    seq, ts = (1 << 33) + 7, 0x12345678
    ip_bytes = tcp_side.probe_packet(key, seq, 0xBEEF, ts, dscp=45, ecn=2, room=5)
    frame = bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02", type=0x0800)) + ip_bytes
    assert wire.classify(frame) == wire.WireErr.OK
    pkt = wire.decode(frame)
    assert wire.is_tcp_probe(pkt)
    ip, tcp = pkt[IP], pkt[TCP]
    assert (ip.src, ip.dst, ip.tos, ip.flags, ip.ttl) == (key.saddr, key.daddr, 45 << 2 | 2,
                                                          "DF", 64)
    assert (tcp.sport, tcp.dport, int(tcp.flags), tcp.seq, tcp.ack, tcp.window) == \
        (key.sport, key.dport, 0, seq & 0xFFFFFFFF, 0, 0)
    again = IP(ip_bytes)
    del again[TCP].chksum
    assert IP(bytes(again))[TCP].chksum == tcp.chksum           # a correct TCP checksum
    i = pkt[wire.HpccdInt]
    assert (i.nhop, i.room, int(i.flags), i.path_id) == (0, 5, wire.INT_F_COLLECT, 0)
    h = pkt[wire.Hpccd]
    assert (h.type, h.flow_id, h.seq, h.ts, h.len) == (wire.T_PROBE, 0xBEEF, seq, ts, 8)
    assert bytes(pkt[wire.HpccdTag])[:8] == bytes(8)


def test_flow_key_matches_the_tracker_layout():
    k = FlowKey("10.0.0.1", "10.0.0.2", 1234, 80)
    raw = k.pack()
    assert raw == bytes([10, 0, 0, 1, 10, 0, 0, 2, 0x04, 0xD2, 0, 80, 6, 0, 0, 0])
    assert FlowKey.unpack(raw) == k
