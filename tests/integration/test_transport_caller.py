"""Run to completion (issue 14 item 7; docs/transport.md "Run to completion"):
``Transport(drive="caller")`` runs the engine's loop in the application's
thread while it waits, and the engine's thread serves what no caller waits
for.  Real packets through a veth pair the test creates; the server is the
engine's echo responder; every request and reply is checked by its CRC-32.
"""
from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import threading
import time

import pytest

from conftest import HPCCCTL_MODULE as CLI, hpccctl_pair, transport_engines

tp = pytest.importorskip("hpccd.transport.engine", reason="hpccd._transport not built")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="namespaces and AF_XDP need root")

FLOW = {"algo": "dctcp", "int_mode": "none", "line_rate_bps": 10_000_000_000}


def _reply(cli, f, size: int, n: int, timeout: float = 5.0) -> tuple[object, int]:
    """Drive `cli` until the echo of request `f` (size bytes) is delivered;
    (its receiver flow, the engine's completed-flow count)."""
    want = tp.pattern_crc32(f.flow_id, size)      # the responder's seed: the request's id
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        n = cli.run(rx_done=n, timeout=0.2)
        for r in cli.rx_flows():
            if r.done and r.bytes == size and r.crc32 == want:
                return r, n
    raise AssertionError(f"no reply of {size} bytes to {f.what} in {timeout} s")


def test_caller_drives_request_response_byte_exact(netns_pair):
    """Requests of 1 byte to several packets, one at a time: each is sent
    from the application's thread and its reply delivered while that thread
    runs the loop; both byte-exact.  The engine's thread is never handed a
    flow (its eventfd never written).  Meanwhile a paced 2 MB flow to the
    same server needs the pacing timers served at every moment, by the
    caller's passes while it waits and by the engine's thread between
    requests: it arrives byte-exact, as does its 2 MB echo."""
    sizes = [1, 1024, 1500, 4000, 30_000]
    with transport_engines(netns_pair) as make:
        srv = make("b", responder=True)
        srv.set_echo(**FLOW)
        cli = make("a", drive="caller")
        mac = cli.next_hop_mac(netns_pair.ip_b)
        big = cli.open_flow(netns_pair.ip_b, 2_000_000, dmac=mac, algo="dctcp",
                            int_mode="none", line_rate_bps=200_000_000)   # >= 80 ms paced
        n = cli.stats()["rx_done"]
        sent = []
        for i in range(100):
            size = sizes[i % len(sizes)]
            f = cli.open_flow(netns_pair.ip_b, size, dmac=mac, **FLOW)
            r, n = _reply(cli, f, size, n)
            res = f.wait(5)
            assert res.done and res.stats["snd_una"] == size, res
            sent.append((f.flow_id, f.seed, size))
            f.close()
        res = big.wait(30)
        assert res.done, res
        # the server received every request and the big flow byte-exact
        got = {r.flow_id: r for r in srv.rx_flows() if r.done}
        for fid, seed, size in sent + [(big.flow_id, big.seed, 2_000_000)]:
            assert got[fid].bytes == size and got[fid].crc32 == tp.pattern_crc32(seed, size)
        _reply(cli, big, 2_000_000, 0, timeout=30)
        s = cli.stats()
        assert s["wakeups"] == 0, s            # no hand-off through the eventfd
        # every request: open_flow's pass, and at least one pass of run()
        assert s["run_loops"] >= 200, s
        assert s["bad_csum"] == 0 and srv.stats()["echo_failed"] == 0


def _no_receiver_flow(cli, peer: str, mac: bytes):
    """A flow whose packets the peer's kernel drops (no engine there): only
    its retransmission timer acts on it, and it fails after its timeout."""
    return cli.open_flow(peer, 10_000, dmac=mac, algo="dctcp", int_mode="none",
                         timeout_s=0.4, rto_min_ns=20_000_000)


def _on_time(r, took: float) -> None:
    """The flow's timers ran when due: 20 ms, then backing off, until 0.4 s
    without progress -- it fails at 0.50 s on the engine's clock (measured:
    0.500-0.503 s, 5 timeouts, either way).  A timer left to the thread's
    200 ms backstop would fail it at 0.6 s or later with fewer timeouts."""
    life = (r.stats["end_ns"] - r.stats["start_ns"]) / 1e9
    assert r.stats["rtos"] >= 4 and 0.4 <= life < 0.58, (r.stats["rtos"], life)
    assert took < 2.5, took


def test_timers_served_whether_the_caller_waits_or_not(netns_pair):
    """A flow nobody answers times out on time (RTOs, then ETIMEDOUT after
    0.4 s without progress):
    (a) while the application does not run the loop (it sleeps): the
    engine's thread serves the timer; (b) while the application runs the
    loop waiting for something else: its passes serve it; (c) the same for
    a paced flow's send times."""
    with transport_engines(netns_pair) as make:
        cli = make("a", drive="caller")
        mac = cli.next_hop_mac(netns_pair.ip_b)
        # (a) nobody inside run(): the thread
        s0 = cli.stats()
        t0 = time.monotonic()
        f = _no_receiver_flow(cli, netns_pair.ip_b, mac)
        while (r := f.stats()).state == "running" and time.monotonic() - t0 < 5:
            time.sleep(0.02)
        took = time.monotonic() - t0
        s1 = cli.stats()
        assert r.state == "failed" and r.err == -errno.ETIMEDOUT, r
        _on_time(r, took)
        assert s1["run_loops"] - s0["run_loops"] == 1, (s0, s1)    # open_flow's pass only
        assert s1["loops"] - s0["loops"] >= r.stats["rtos"]
        f.close()
        # (b) the application inside run(), waiting for a reply that never comes
        t0 = time.monotonic()
        f = _no_receiver_flow(cli, netns_pair.ip_b, mac)
        n = cli.stats()["rx_done"]
        while (r := f.stats()).state == "running" and time.monotonic() - t0 < 5:
            assert cli.run(rx_done=n, timeout=0.05) == n
        took = time.monotonic() - t0
        s2 = cli.stats()
        assert r.state == "failed" and r.err == -errno.ETIMEDOUT, r
        _on_time(r, took)
        assert s2["run_polls"] - s1["run_polls"] >= r.stats["rtos"], (s1, s2)
        f.close()
        # (c) pacing: a flow at 10 Mbit/s (a frame every 0.9 ms) that nobody
        # acknowledges, opened from this thread, whose first packet leaves in
        # open_flow's pass: its next ones wait for pacing timers only.  30 ms
        # later its window's first packets have left (measured 6-7), whether
        # the application sleeps (the thread's timer, which open_flow's pass
        # armed: without that, 1) or runs the loop.
        for drive in (False, True, False, True):
            time.sleep(0.25)                  # the thread asleep on a later deadline
            f = cli.open_flow(netns_pair.ip_b, 1_000_000, dmac=mac, algo="dctcp",
                              int_mode="none", line_rate_bps=10_000_000, timeout_s=1)
            t0 = time.monotonic()
            while (left := 0.03 - (time.monotonic() - t0)) > 0:
                if drive:
                    cli.run(rx_done=n, timeout=left)
                else:
                    time.sleep(left)
            pkts = f.stats().stats["pkts"]
            assert pkts >= 4, (drive, pkts)
            f.close()


def test_one_caller_at_a_time_and_close_ends_a_run(netns_pair):
    """A second thread's run() is refused (EBUSY) while one is inside, and
    its Flow.wait() still works (it polls); run() on a thread-mode engine
    is refused with the reason; close() while a caller is inside ends its
    run() with ESHUTDOWN, and nothing is left behind."""
    with transport_engines(netns_pair) as make:
        srv = make("b")
        plain = make("a")
        with pytest.raises(tp.TransportError, match="own thread only") as e:
            plain.run(rx_done=0, timeout=0.01)
        assert e.value.errno == errno.EINVAL
        plain.close()
        cli = make("a", drive="caller")
        errs: list[BaseException] = []
        inside = threading.Event()

        def drive():
            inside.set()
            try:
                cli.run(rx_done=1 << 40, timeout=3.0)
            except BaseException as ex:        # noqa: BLE001 -- checked below
                errs.append(ex)

        th = threading.Thread(target=drive)
        th.start()
        inside.wait()
        time.sleep(0.05)
        with pytest.raises(tp.TransportError) as e:
            cli.run(rx_done=0, timeout=0.01)
        assert e.value.errno == errno.EBUSY
        f = cli.open_flow(netns_pair.ip_b, 50_000, **FLOW)
        assert f.wait(5).done                  # served by the thread inside run()
        got = srv.wait_rx_flow(f.flow_id, timeout=5)
        assert got.crc32 == tp.pattern_crc32(f.seed, 50_000)
        t0 = time.monotonic()
        cli.close()
        th.join(5)
        assert not th.is_alive() and time.monotonic() - t0 < 2.0
        assert len(errs) == 1 and isinstance(errs[0], tp.TransportError), errs
        assert errs[0].errno == errno.ESHUTDOWN


def test_drive_setting_refused_when_wrong(netns_pair):
    with transport_engines(netns_pair) as make:
        with pytest.raises(tp.TransportError, match="drive 'app'"):
            make("a", drive="app")


def _requests(cli, peer: str, mac: bytes, n: int, count: int) -> int:
    """`count` requests of 1, 1,024 and 5,000 bytes in turn through
    Transport.request, each answered byte-exact and acknowledged; the
    engine's completed-flow count after them."""
    for i in range(count):
        size = (1, 1024, 5000)[i % 3]
        f, m = cli.request(peer, size, rx_done=n, timeout=5.0, dmac=mac, **FLOW)
        assert m == n + 1, (i, n, m)
        _, n = _reply(cli, f, size, m - 1)
        assert f.wait(5).done
        f.close()
        cli.rx_reap()
    return n


def test_request_opens_and_waits_in_one_call(netns_pair):
    """Transport.request(): the socket is the caller's before the request
    leaves, so its reply never wakes the engine's thread (which wakes only
    for its timer meanwhile); 100 replies byte-exact.  A request the engine
    refuses (an MTU its frames cannot carry) raises with the flow named and
    leaves the engine usable."""
    with transport_engines(netns_pair) as make:
        srv = make("b", responder=True)
        srv.set_echo(**FLOW)
        cli = make("a", drive="caller")
        mac = cli.next_hop_mac(netns_pair.ip_b)
        n = cli.stats()["rx_done"]
        with pytest.raises(tp.TransportError, match="flow to .* MTU") as e:
            cli.request(netns_pair.ip_b, 100, rx_done=n, dmac=mac, mtu=100_000, **FLOW)
        assert e.value.errno == errno.EINVAL
        s0 = cli.stats()
        n = _requests(cli, netns_pair.ip_b, mac, n, 100)
        s1 = cli.stats()
        assert s1["wakeups"] == s0["wakeups"] == 0
        assert s1["polls"] - s0["polls"] < 50, (s0["polls"], s1["polls"])
        assert s1["run_loops"] - s0["run_loops"] >= 100


def test_a_busy_caller_polls_while_it_waits_and_the_thread_sleeps(netns_pair):
    """drive="caller" with busy_poll (the latency benchmark's request-busy
    row): the caller polls the rings while it waits for each answer and
    never sleeps in ppoll(); the engine's thread keeps sleeping meanwhile
    (its own passes are its timer's, not a spin: a polling thread makes
    hundreds of thousands a second); 200 requests and their answers
    byte-exact, the waits of Flow.wait() polling too."""
    with transport_engines(netns_pair) as make:
        srv = make("b", responder=True)
        srv.set_echo(**FLOW)
        cli = make("a", drive="caller", busy_poll=True)
        mac = cli.next_hop_mac(netns_pair.ip_b)
        n = cli.stats()["rx_done"]
        s0 = cli.stats()
        t0 = time.monotonic()
        n = _requests(cli, netns_pair.ip_b, mac, n, 200)
        took = time.monotonic() - t0
        s1 = cli.stats()
        assert s1["run_polls"] == s0["run_polls"], (s0["run_polls"], s1["run_polls"])
        assert s1["wakeups"] == s0["wakeups"] == 0
        thread = (s1["loops"] - s1["run_loops"]) - (s0["loops"] - s0["run_loops"])
        assert thread < 4 * 200 + 1000 * took, (thread, took)
        assert s1["run_loops"] - s0["run_loops"] >= 400
        ss = srv.stats()
        assert ss["rx_done"] >= 200 and ss["echo_failed"] == 0, ss


@pytest.mark.parametrize("busy", [False, True], ids=["interrupt", "busy"])
def test_hpccctl_measures_request_response(netns_pair, busy):
    """The command line's request/response (how a user measures latency):
    `hpccctl recv --echo` answers, `hpccctl send --requests` sends one
    request at a time, checks each answer byte for byte and prints the
    round trips' percentiles; with --busy-poll (and --cpu) both poll.  100
    requests after 10 of warm-up, all answered and acknowledged."""
    extra = (["--busy-poll"], ["--cpu", "1"], ["--cpu", "0"]) if busy else ([], [], [])
    s, r = hpccctl_pair(netns_pair, ["recv", "--iface", netns_pair.vb, "--echo", "--count", "110",
                                     "--json", "--timeout", "60", *extra[0], *extra[1]],
                        ["send", netns_pair.ip_b, "--iface", netns_pair.va, "--bytes", "1K",
                         "--requests", "100", "--algo", "hpcc", "--json", *extra[0], *extra[2]])
    assert s["requests"] == 100 and s["warmup"] == 10 and s["bytes"] == 1000
    assert s["wait"] == r["wait"] == ("busy polling" if busy else "interrupt")
    rtt = s["rtt_us"]
    assert 0 < rtt["min"] <= rtt["p50"] <= rtt["p99"] <= rtt["max"], rtt
    assert s["app_rtt_us"]["p50"] >= rtt["min"], s
    assert r["answered"] == 110 and r["echo_failed"] == 0, r


@pytest.mark.parametrize("signum,how", [(signal.SIGTERM, "SIGTERM"),
                                        (signal.SIGINT, "interrupted")], ids=["term", "int"])
def test_hpccctl_echo_server_answers_until_stopped(netns_pair, signum, how):
    """`hpccctl recv --echo` without --count is a server (as iperf3 -s): it
    answers the requests of several `send --requests` runs one after the
    other, and on SIGTERM or Ctrl-C (SIGINT) prints its summary (every
    request and warm-up answered, nothing failed, how it stopped), exits 0
    and leaves no XDP program on its interface."""
    pair = netns_pair
    srv = pair.popen("b", [*CLI, "recv", "--iface", pair.vb, "--echo", "--json"],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)
        for _ in range(2):
            sent = subprocess.run(["ip", "netns", "exec", pair.a, *CLI, "send", pair.ip_b,
                                   "--iface", pair.va, "--bytes", "1K", "--requests", "20",
                                   "--warmup", "5", "--json"],
                                  capture_output=True, text=True, timeout=120)
            assert sent.returncode == 0, sent.stderr
            assert json.loads(sent.stdout.splitlines()[-1])["requests"] == 20
        assert srv.poll() is None, srv.communicate()   # still serving
        srv.send_signal(signum)
        out, err = srv.communicate(timeout=30)
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.communicate()
    assert srv.returncode == 0, err
    assert "Traceback" not in err, err
    r = json.loads(out.strip().splitlines()[-1])
    assert r == {"answered": 50, "echo_failed": 0, "algo": "dctcp", "wait": "interrupt",
                 "stopped": how}, r
    link = subprocess.run(["ip", "netns", "exec", pair.b, "ip", "-d", "link", "show", pair.vb],
                          capture_output=True, text=True, check=True).stdout
    assert "xdp" not in link.split("\n", 1)[0] and "prog/xdp" not in link, link


def test_hpccctl_request_response_refusals():
    """--requests with a file or a buffer, --requests 0, and recv --echo with
    --out or --verify none: refused with the reason, exit status 2, before
    anything is made."""
    for argv, why in ((["send", "10.0.0.2", "--bytes", "1K", "--requests", "0"], "--requests N"),
                      (["send", "10.0.0.2", "--file", "/etc/hostname", "--requests", "5"],
                       "--requests N"),
                      (["recv", "--echo", "--verify", "none"], "--echo answers"),
                      (["recv", "--echo", "--out", "/tmp/x"], "--echo answers")):
        r = subprocess.run([*CLI, *argv], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and why in r.stderr and "Traceback" not in r.stderr, (argv, r)
