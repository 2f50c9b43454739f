"""Faults in the lab (issue 9; docs/security.md "Faults"): the native
transport (hpccd.transport.engine, fastpath/transport/transport.c) under loss, burst
loss, reordering, a link going down and up, and its receiver restarted;
the real `hpccd` daemon SIGKILLed and restarted under kernel traffic.

The bundled dumbbell: h1 -> s1 -> (1 Gbit/s, 500 KB) -> s2 -> r1, one
engine per host in this process.  Faults are BPF programs and pyroute2
netlink calls only (no tc/ip commands): ebpf/lab_loss.bpf.c on tc ingress
of both ends of the bottleneck link (random, and Gilbert-Elliott bursts),
or as the classifier of the HTB root of the last egress port of each
direction, sending a share of the packets to a slow HTB class beside the
link's so that the packets behind them overtake them (the kernel here has
no netem).

Invariants protected, for each algorithm (hpcc, rx-hpcc, dctcp, ldcp):
- with 1 % and 5 % random loss, bursts of losses and reordering, in both
  directions, a flow completes and the receiver's CRC-32 of the stream is
  the source's (byte-exact), and the fault really happened (drops, bursts
  or reordered packets counted by the program, retransmissions or
  out-of-order packets counted by the engines);
- the bottleneck link set down for 0.5 s and up again mid-transfer: the
  flow completes byte-exact once the link is back (the recovery time, from
  link up to the next acknowledged byte, is printed);
- the receiver's engine closed and re-created mid-transfer: the sender's
  flow fails with ECONNRESET ("the receiver lost the flow's state") within
  RESET_BOUND_S, not a hang and not a silent success; a flow opened again
  to the new engine completes byte-exact;
- nothing hangs: every wait has a bound (flow timeout_s, wait timeouts).

And for the daemon: the real `hpccd` with the tcp_side component on h1,
SIGKILLed while a kernel TCP stream runs from h1 to r1, then restarted:
the stream never stalls for more than STALL_MAX_S and pings pass before,
after the kill and after the restart; the restarted daemon removed the
dead one's XDP program and tc filter (exactly one of each, the new ones;
the old programs are freed) and its struct_ops ("hpcc" still registered
once, from the new daemon); after SIGTERM nothing of hpccd remains.

Timing-sensitive figures are printed (run with -s).
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import pathlib
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

import pytest

pytestmark = pytest.mark.integration

if os.geteuid() != 0:
    pytest.skip("AF_XDP, XDP, tc and namespaces need root", allow_module_level=True)

from hpccd.bpf import loader as bpf  # noqa: E402
from hpccd.transport.engine import Transport, TransportError, pattern_crc32  # noqa: E402

from conftest import lab_ctx, transport_engines  # noqa: E402
from hpccd.lab.loss import GILBERT_ELLIOTT, LinkLoss  # noqa: E402
from lab_hpccd import prog_gone  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
XDP_HOST = ROOT / "build" / "ebpf" / "xdp_host.bpf.o"
LOSS_OBJ = ROOT / "build" / "ebpf" / "lab_loss.bpf.o"
HPCCD = shutil.which("hpccd") or str(ROOT / ".venv" / "bin" / "hpccd")
LINE = 2_000_000_000
T_NS = 300_000
ACK_EVERY = 4
ALGOS = ["hpcc", "rx-hpcc", "dctcp", "ldcp"]
FLOW_TIMEOUT_S = 20             # no progress for this long fails a flow (ETIMEDOUT)
WAIT_S = 90                     # bound on any flow's wait
RESET_BOUND_S = 5.0             # receiver restart -> ECONNRESET at the sender within this
STALL_MAX_S = 2.0               # kernel TCP across the daemon's SIGKILL and restart
HTB_ROOT, SLOW_CLASS = 0x10000, 0x10002
U32 = 2 ** 32


@pytest.fixture(scope="module")
def dumbbell():
    if not XDP_HOST.exists() or not LOSS_OBJ.exists():
        pytest.skip("build/ebpf objects missing (make bpf)")
    with lab_ctx("dumbbell") as lab:
        for h in ("h1", "r1"):
            lab.probe(h, "r1" if h == "h1" else "h1")
        yield lab


@pytest.fixture
def engines(dumbbell):
    with transport_engines(dumbbell, ack_every=ACK_EVERY, rx_hpcc={"T_ns": T_NS, "line_rate_bps": LINE}) as make:
        yield make


def _sum_slot(obj, slot: int) -> int:
    m = obj.map("hpccd_loss_cnt")
    return sum(int.from_bytes(v[:8], sys.byteorder) for v in m.lookup(slot))


class Reorder:
    """Reordering without netem: on the last egress port of each direction
    (s2 towards r1 for the data, s1 towards h1 for the feedback) a slow HTB
    class 1:2 (SLOW_MBPS) beside the link's 1:1, and lab_loss in mode 2 on
    tc egress steering a share of the packets into it (skb->priority): they
    wait in the slow class while the ones behind them pass through 1:1.  Runs of
    packets, not single ones: a lone packet finds the slow class's bucket
    full and leaves at once."""

    SLOW_MBPS = 50

    def __init__(self, lab, p_enter: float, p_exit: float):
        from pyroute2 import NetNS

        self.lab, self.done = lab, []
        ports = [lab.path("h1", "r1")[-1], lab.path("r1", "h1")[-1]]
        try:
            for hop in ports:
                obj = bpf.BpfObject.open(LOSS_OBJ)
                obj.load()
                self.done.append((hop, obj, None))
                obj.map("hpccd_loss_cfg").update(0, struct.pack("<II", 0, 2))
                obj.map("hpccd_loss_ext").update(0, struct.pack(
                    "<IIII", int(p_enter * (U32 - 1)), int(p_exit * (U32 - 1)), 0, SLOW_CLASS))
                rate = self.SLOW_MBPS * 125_000
                with NetNS(lab.netns(hop.switch), flags=0) as ns:
                    idx = ns.link_lookup(ifname=f"p{hop.port}")[0]
                    ns.tc("add-class", "htb", idx, handle=SLOW_CLASS, parent=HTB_ROOT,
                          rate=rate, ceil=rate, burst=3028, cburst=3028, quantum=1514,
                          mtu=1514)
                    self.done[-1] = (hop, obj, idx)
                # before the INT switch's filter (handle 1, prio 1): cls_bpf
                # runs the newest program of a priority first, and this one
                # always lets the next one run (TC_ACT_UNSPEC)
                with bpf.in_netns(lab.netns(hop.switch)):
                    bpf.tc_attach(f"p{hop.port}", obj.program("hpccd_lab_loss"), "egress",
                                  handle=2, priority=1)
        except BaseException:
            self.close()
            raise

    def reordered(self) -> int:
        return [_sum_slot(o, 2) for _, o, _ in self.done]

    def close(self) -> None:
        from pyroute2 import NetNS

        for hop, obj, idx in self.done:
            try:
                if idx is not None:
                    with bpf.in_netns(self.lab.netns(hop.switch)):
                        with contextlib.suppress(bpf.BpfError):
                            bpf.tc_detach(f"p{hop.port}", "egress", handle=2, priority=1)
                    with NetNS(self.lab.netns(hop.switch), flags=0) as ns:
                        ns.tc("del-class", index=idx, handle=SLOW_CLASS, parent=HTB_ROOT)
            finally:
                obj.close()
        self.done = []




def _open(tx: Transport, lab, algo: str, n: int, **kw):
    kw.setdefault("line_rate_bps", LINE)
    return tx.open_flow(lab.address("r1"), n, algo=algo, hpcc={"T_ns": T_NS},
                        timeout_s=FLOW_TIMEOUT_S, **kw)


def _wait_acked(flow, nbytes: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while flow.stats().stats["snd_una"] < nbytes:
        assert flow.stats().state == "running", flow.stats()
        assert time.monotonic() < deadline, f"{nbytes} bytes not acknowledged in {timeout} s"
        time.sleep(0.002)


def _byte_exact(rx, flow, n: int):
    r = rx.wait_rx_flow(flow.flow_id, timeout=10.0)
    assert r.bytes == n and r.crc32 == pattern_crc32(flow.seed, n), (r.bytes, n)
    return r


# ---- loss, bursts, reordering --------------------------------------------------------------

@pytest.mark.parametrize("recovery", ["sr", "gbn"])
@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("fault", ["loss1", "loss5", "burst"])
def test_loss_byte_exact(dumbbell, engines, algo, fault, recovery):
    """Byte-exact under loss with either recovery.  Selective repeat (the
    default) resends what was lost and little else: at 1 % random loss,
    retransmitted / dropped <= 1.3 (issue 14's target; the drops counted
    include lost ACKs, which need no retransmission).  Go-back-N resends
    from each gap, so it is only held to delivering."""
    rx, tx = engines("r1"), engines("h1")
    if fault == "burst":
        # bursts of 1 / p_exit = 8 packets on average, about 1 % in the long run
        loss = LinkLoss(dumbbell, 0.0, mode=GILBERT_ELLIOTT, p_enter=0.0012, p_exit=0.125)
    else:
        loss = LinkLoss(dumbbell, 0.01 if fault == "loss1" else 0.05)
    # bursts: enough packets (~9000, ~11 bursts expected) that "more than one
    # drop per burst" does not hang on a single burst of length 1 (p = 1/8);
    # 1 % loss: ~100 drops, so that retransmitted / dropped is the
    # recovery's and not the spread of 25-30 drops (3 MB crossed 1.3 in CI)
    n = 12_000_000 if fault in ("burst", "loss1") else 3_000_000
    try:
        t0 = time.monotonic()
        flow = _open(tx, dumbbell, algo, n, recovery=recovery)
        res = flow.wait(WAIT_S)
        dt = time.monotonic() - t0
        c = loss.counts()
    finally:
        loss.close()
    r = _byte_exact(rx, flow, n)
    st = res.stats
    print(f"\n{algo} {recovery} {fault}: {c['dropped']} of {c['seen']} dropped "
          f"({c['bursts']} bursts), {dt:.2f} s, {st['retx_pkts']} retransmitted "
          f"({st['retx_pkts'] / c['dropped']:.2f} per drop), {st['go_backs']} go-backs, "
          f"{st['recoveries']} SR recoveries, {st['rtos']} timeouts "
          f"({st['rtos_spurious']} spurious); receiver {r.stats['ooo_pkts']} out of order, "
          f"{r.stats['held_pkts']} held")
    assert c["dropped"] > 0
    if fault == "loss5":
        assert c["dropped"] > 0.025 * c["seen"]
    if fault == "burst":
        assert c["bursts"] > 0 and c["dropped"] > c["bursts"]   # more than one per burst
    assert st["retx_pkts"] > 0
    if recovery == "gbn":
        assert st["go_backs"] + st["rtos"] > 0 and r.stats["held_pkts"] == 0
    else:
        assert st["recoveries"] + st["rtos"] > 0 and r.stats["held_pkts"] > 0
        assert st["go_backs"] == 0
        if fault == "loss1":
            assert st["retx_pkts"] <= 1.3 * c["dropped"], (st["retx_pkts"], c["dropped"])


@pytest.mark.parametrize("algo", ALGOS)
def test_reordering_byte_exact(dumbbell, engines, algo):
    rx, tx = engines("r1"), engines("h1")
    # runs of 8 packets on average held back, about 3 % of the packets
    reo = Reorder(dumbbell, 0.004, 0.125)
    n = 3_000_000
    try:
        flow = _open(tx, dumbbell, algo, n)
        res = flow.wait(WAIT_S)
        moved = reo.reordered()
    finally:
        reo.close()
    r = _byte_exact(rx, flow, n)
    print(f"\n{algo} reordering: {moved} packets held back, FCT {res.fct_s:.3f} s, "
          f"{res.stats['retx_pkts']} retransmitted; receiver {r.stats['ooo_pkts']} out of "
          f"order, {r.stats['dup_pkts']} duplicates")
    assert moved[0] > 0
    # go-back-N: a packet overtaken arrives after its successors, which the
    # receiver saw out of order (or, held back itself, as a duplicate)
    assert r.stats["ooo_pkts"] + r.stats["dup_pkts"] > 0


# ---- link down and up --------------------------------------------------------------------

def _link(lab, switch: str, port: int, up: bool) -> None:
    """Set `switch`'s port down or up; on up, put back the routes the kernel
    flushed from it when it went down (the lab's static /32 routes)."""
    from pyroute2 import NetNS

    with NetNS(lab.netns(switch), flags=0) as ns:
        idx = ns.link_lookup(ifname=f"p{port}")[0]
        ns.link("set", index=idx, state="up" if up else "down")
    if up:
        for r in lab.topology.routes[switch]:
            if (lab.reroutes.get((switch, r.host)) or r.port) == port:
                lab.reroute(switch, r.host, port)


@pytest.mark.parametrize("algo", ALGOS)
def test_link_down_and_up_mid_transfer(dumbbell, engines, algo):
    rx, tx = engines("r1"), engines("h1")
    n = 20_000_000
    hop = dumbbell.path("h1", "r1")[0]                 # s1's port to s2: the bottleneck
    flow = _open(tx, dumbbell, algo, n, line_rate_bps=400_000_000)
    down = False
    try:
        _wait_acked(flow, 2_000_000)
        _link(dumbbell, hop.switch, hop.port, False)
        down = True
        at_down = flow.stats().stats["snd_una"]
        time.sleep(0.5)
        stalled = flow.stats().stats["snd_una"]
        _link(dumbbell, hop.switch, hop.port, True)
        down = False
        t_up = time.monotonic()
        while flow.stats().stats["snd_una"] == stalled and time.monotonic() - t_up < 15:
            time.sleep(0.001)
        recovery = time.monotonic() - t_up
        res = flow.wait(WAIT_S)
    finally:
        if down:
            _link(dumbbell, hop.switch, hop.port, True)
    _byte_exact(rx, flow, n)
    print(f"\n{algo} link down 0.5 s at {at_down} bytes: progress again {recovery * 1e3:.0f} "
          f"ms after link up; {res.stats['rtos']} timeouts, FCT {res.fct_s:.2f} s")
    assert stalled - at_down < 3_000_000            # (what was in flight when it went down)
    assert res.stats["rtos"] > 0
    assert recovery < 2.0
    dumbbell.probe("h1", "r1")                      # the kernel's path is back too


# ---- the receiver's engine restarted --------------------------------------------------------

@pytest.mark.parametrize("algo", ALGOS)
def test_receiver_restart_fails_the_flow_with_a_clear_error(dumbbell, engines, algo):
    rx, tx = engines("r1"), engines("h1")
    n = 20_000_000
    flow = _open(tx, dumbbell, algo, n, line_rate_bps=400_000_000)
    _wait_acked(flow, 2_000_000)
    rx.close()
    rx2 = engines("r1")
    t0 = time.monotonic()
    with pytest.raises(TransportError) as ei:
        flow.wait(RESET_BOUND_S + 5)
    dt = time.monotonic() - t0
    st = flow.stats()
    print(f"\n{algo} receiver restarted at {st.stats['snd_una']} bytes acknowledged: "
          f"{ei.value.errno and errno.errorcode[ei.value.errno]} after {dt:.3f} s: {ei.value}")
    assert ei.value.errno == errno.ECONNRESET, ei.value
    assert "receiver lost the flow's state" in str(ei.value)
    assert dt < RESET_BOUND_S
    assert st.state == "failed" and 0 < st.stats["snd_una"] < n
    flow.close()
    # the caller's remedy: open the flow again; it completes byte-exact
    again = _open(tx, dumbbell, algo, 2_000_000)
    again.wait(WAIT_S)
    _byte_exact(rx2, again, 2_000_000)


def test_receiver_gone_fails_with_timeout_not_a_hang(dumbbell, engines):
    """No receiver engine at all (the restart never comes): ETIMEDOUT after the
    flow's timeout_s, with a message that says nobody answered."""
    tx = engines("h1")
    flow = tx.open_flow(dumbbell.address("r1"), 1_000_000, algo="hpcc", line_rate_bps=LINE,
                        hpcc={"T_ns": T_NS}, timeout_s=1.0)
    t0 = time.monotonic()
    with pytest.raises(TransportError) as ei:
        flow.wait(10)
    dt = time.monotonic() - t0
    assert ei.value.errno == errno.ETIMEDOUT and "no answer from the receiver" in str(ei.value)
    assert 0.9 < dt < 5.0, dt


# ---- the sender's daemon SIGKILLed and restarted ---------------------------------------------

DAEMON_CFG = """\
[daemon]
control_socket = "{d}/ctl.sock"
metrics_address = ""
bpf_dir = "{bpf}"
components = ["tcp_side"]

[[interfaces]]
name = "eth0"

[transport]
integrity_key_file = "{d}/tag.key"
"""


class _Stream:
    """A kernel TCP stream h1 -> r1 (cubic), with the time of every chunk
    received, from two threads; stop() joins them."""

    def __init__(self, lab):
        self.stop_ev = threading.Event()
        self.got: list[tuple[float, int]] = []
        self.errors: list[BaseException] = []
        ls = lab.socket("r1", socket.AF_INET, socket.SOCK_STREAM)
        ls.bind((lab.address("r1"), 5201))
        ls.listen(1)
        cs = lab.socket("h1", socket.AF_INET, socket.SOCK_STREAM)
        cs.settimeout(5)
        cs.connect((lab.address("r1"), 5201))
        ss, _ = ls.accept()
        ls.close()
        ss.settimeout(0.5)
        self.cs, self.ss = cs, ss
        self.threads = [threading.Thread(target=self._send), threading.Thread(target=self._recv)]
        for t in self.threads:
            t.start()

    def _send(self) -> None:
        buf = b"x" * 65536
        try:
            while not self.stop_ev.is_set():
                self.cs.send(buf)
                time.sleep(0.002)              # about 250 Mbit/s at most: no CPU hog
        except OSError as e:
            if not self.stop_ev.is_set():
                self.errors.append(e)

    def _recv(self) -> None:
        while not self.stop_ev.is_set():
            try:
                n = len(self.ss.recv(1 << 20))
            except socket.timeout:
                continue
            except OSError as e:
                self.errors.append(e)
                return
            if not n:
                return
            self.got.append((time.monotonic(), n))

    def max_stall(self, since: float) -> float:
        ts = [since] + [t for t, _ in self.got if t >= since] + [time.monotonic()]
        return max(b - a for a, b in zip(ts, ts[1:]))

    def stop(self) -> None:
        self.stop_ev.set()
        for s in (self.cs, self.ss):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        for t in self.threads:
            t.join(10)
        for s in (self.cs, self.ss):
            s.close()


def _wait_for_lock(path: str, timeout: float = 60.0) -> None:
    """struct_ops are host-wide: wait until no other process (another test
    run on this machine) owns the TCP congestion controls."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    deadline = time.monotonic() + timeout
    with open(path, "a") as f:
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(f, fcntl.LOCK_UN)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.skip(f"{path} held by another process for {timeout} s")
                time.sleep(0.5)


def _attached(lab) -> dict:
    """The daemon's programs on h1's eth0 (its tc filters carry its prefix;
    the lab's own departure stamp on that interface's ingress does not)."""
    with bpf.in_netns(lab.netns("h1")):
        return {"xdp": bpf.xdp_query("eth0", "skb"),
                "tc": [f.prog_id for f in bpf.tc_list("eth0")
                       if f.name.startswith(bpf.NAME_PREFIX)]}


def _available_cc() -> list[str]:
    return open("/proc/sys/net/ipv4/tcp_available_congestion_control").read().split()


def _wait_ready(proc, sock: pathlib.Path, log: pathlib.Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, f"hpccd exited {proc.returncode}: {log.read_text()}"
        if sock.exists():
            from hpccd.agent.control import ControlError, request

            try:
                if request(str(sock), "status", timeout=2)["pid"] == proc_pid(proc):
                    return
            except ControlError:
                pass
        assert time.monotonic() < deadline, f"hpccd not ready in {timeout} s: {log.read_text()}"
        time.sleep(0.1)


def proc_pid(proc) -> int:
    """The daemon's pid: `ip netns exec` execs it, so the same process."""
    return proc.pid


def test_sender_daemon_sigkill_and_restart_keeps_kernel_traffic(dumbbell):
    from hpccd.tcp_side.engine import LOCK_FILE

    if not os.path.exists(HPCCD):
        pytest.skip("the hpccd entry point is not installed (pip install -e .)")
    _wait_for_lock(LOCK_FILE)
    d = pathlib.Path(tempfile.mkdtemp(prefix="hpccd-f-"))
    (d / "tag.key").write_text(os.urandom(16).hex() + "\n")
    cfg = d / "hpccd.toml"
    cfg.write_text(DAEMON_CFG.format(d=d, bpf=ROOT / "build" / "ebpf"))
    procs: list[subprocess.Popen] = []
    logs = []

    def start() -> subprocess.Popen:
        log = d / f"hpccd{len(procs)}.log"
        logs.append(log)
        p = dumbbell.popen("h1", [HPCCD, "--config", str(cfg)], stdout=open(log, "w"),
                           stderr=subprocess.STDOUT)
        procs.append(p)
        _wait_ready(p, d / "ctl.sock", log)
        return p

    stream = None
    try:
        assert _attached(dumbbell) == {"xdp": None, "tc": []}
        stream = _Stream(dumbbell)
        t_begin = time.monotonic()
        p1 = start()
        first = _attached(dumbbell)
        assert first["xdp"] is not None and len(first["tc"]) == 1
        assert "hpcc" in _available_cc()
        dumbbell.ping("h1", "r1")

        p1.kill()
        assert p1.wait(30) == -signal.SIGKILL
        # killed: its programs stay attached, and kernel traffic still flows
        assert _attached(dumbbell) == first
        dumbbell.ping("h1", "r1")
        time.sleep(0.5)

        p2 = start()
        second = _attached(dumbbell)
        assert second["xdp"] is not None and second["xdp"] != first["xdp"]
        assert len(second["tc"]) == 1 and second["tc"] != first["tc"]
        assert prog_gone(first["xdp"]) and prog_gone(first["tc"][0])
        assert _available_cc().count("hpcc") == 1
        assert "removed what a previous daemon left" in logs[-1].read_text()
        dumbbell.ping("h1", "r1")
        time.sleep(0.5)

        p2.send_signal(signal.SIGTERM)
        assert p2.wait(30) == 0, logs[-1].read_text()
        assert _attached(dumbbell) == {"xdp": None, "tc": []}
        assert prog_gone(second["xdp"])
        assert "hpcc" not in _available_cc()
        dumbbell.ping("h1", "r1")
        time.sleep(0.3)
        stall = stream.max_stall(t_begin)
        total = sum(n for _, n in stream.got)
        print(f"\nkernel TCP across hpccd SIGKILL + restart + stop: {total / 1e6:.0f} MB, "
              f"longest stall {stall * 1e3:.0f} ms")
        assert not stream.errors, stream.errors
        assert stall < STALL_MAX_S, f"kernel TCP stalled {stall:.2f} s"
    finally:
        if stream is not None:
            stream.stop()
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
        dumbbell.run("h1", [HPCCD, "--cleanup", "--config", str(cfg)], timeout=60)
        shutil.rmtree(d, ignore_errors=True)
