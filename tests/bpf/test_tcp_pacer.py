"""The kernel pacer's lateness (ebpf/tcp_pacer.bpf.c, hpccd.tcp_side.pacer).

Invariants protected:
- the program loads through the verifier and attaches to the hrtimer
  expiry tracepoint; the histogram's layout is the header's;
- a TCP flow that TCP paces itself (SO_MAX_PACING_RATE turns its internal
  pacing on) over loopback is counted: expiries of its pacing timer, each
  in one bucket, their lateness summed, the figures plausible (none
  negative, the mean within the buckets' span);
- a flow that is not paced adds nothing beyond what other paced flows of
  the host add (nothing at all is asserted there: the host's own flows may
  fire the timer);
- closing the meter detaches the program: no program of its name is left
  in the kernel (once the kernel's grace period has passed); the process's
  shared meter (acquire / release) is one program whatever its users, and
  goes with the last.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time

import pytest

pytestmark = pytest.mark.bpf

if os.geteuid() != 0:
    pytest.skip("attaching a tracing program needs root", allow_module_level=True)

from hpccd.bpf.abi import c_layout, format_layout  # noqa: E402
from hpccd.tcp_side import pacer  # noqa: E402

SO_MAX_PACING_RATE = 47       # asm-generic/socket.h


def paced_flow(rate_Bps: int, nbytes: int) -> float:
    """`nbytes` over a loopback TCP connection whose sender TCP paces at
    `rate_Bps` (its internal pacing: the pacing timer fires between skbs);
    returns the seconds from the receiver's first byte to its last."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    cli = socket.socket()
    try:
        if rate_Bps:
            cli.setsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE, rate_Bps)
        cli.connect(srv.getsockname())
        conn, _ = srv.accept()
        got, span = [], []

        def drain() -> None:
            n, first, last = 0, 0, 0
            while True:
                b = conn.recv(1 << 16)
                if not b:
                    break
                last = time.monotonic_ns()
                first = first or last
                n += len(b)
            got.append(n)
            span.append((last - first) / 1e9)

        t = threading.Thread(target=drain)
        t.start()
        cli.sendall(b"\0" * nbytes)
        cli.shutdown(socket.SHUT_WR)
        t.join(30)
        conn.close()
        assert got == [nbytes], f"the loopback flow delivered {got} of {nbytes} bytes"
        return span[0]
    finally:
        cli.close()
        srv.close()


def programs_named(name: str) -> list[dict]:
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True,
                         check=True).stdout
    return [p for p in json.loads(out) if p.get("name") in (name, name[:15])]


def test_the_histogram_is_the_headers():
    assert format_layout(pacer.HIST_FMT) == c_layout("hpccd_pacer_hist")
    assert pacer.BUCKET_NS == 1000 and pacer.BUCKETS == 128


def test_a_paced_flow_s_timer_expiries_are_counted():
    with pacer.PacerMeter() as m:
        before = m.read()
        # 2 MB at 20 MB/s: about 0.1 s of paced sending, skbs of up to 64 KB
        # on loopback, so some tens of expiries
        paced_flow(20_000_000, 2_000_000)
        late = m.read() - before
    assert late.n >= 5, f"only {late.n} pacing-timer expiries counted for a paced flow"
    assert sum(late.buckets) == late.n
    assert all(c >= 0 for c in late.buckets)
    assert 0 <= late.mean_ns < pacer.BUCKETS * pacer.BUCKET_NS * 10, late.summary()
    q50, q90 = late.quantile_ns(0.5), late.quantile_ns(0.9)
    assert pacer.BUCKET_NS <= q50 <= q90 <= pacer.BUCKETS * pacer.BUCKET_NS
    print("loopback pacer lateness:", late.summary())


def test_a_paced_flow_delivers_what_its_timer_s_lateness_leaves():
    """hpccd.tcp_side.trains.paced_share, the model the train rule and the
    benchmark's control rows rest on, against the kernel: a flow paced at
    1 Gbit/s in 2-segment skbs (loopback of a namespace of the test's own
    at MTU 1500 and gso_max_segs 2: a 23 us slot) delivers no more than
    its pacing timer's measured lateness leaves of its rate (the kernel
    makes up at most half a slot; a kernel that made up more would beat
    the model, and the rule's trains would be longer than they need be),
    and not far below it (the sender and receiver are one host's: below
    is the CPU's, not the pacer's)."""
    from hpccd.bpf.loader import in_netns
    from hpccd.tcp_side import trains

    ns = f"hpccd-t-pacer-{os.getpid()}"
    rate_Bps, segs, mss = 125_000_000, 2, 1448
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "mtu", "1500", "up"], check=True)
        trains.set_gso_max_segs("lo", segs, ns)
        assert trains.gso_max_segs("lo", ns) == segs
        with pacer.PacerMeter() as m, in_netns(ns):
            paced_flow(rate_Bps, 2_000_000)              # warm: past the unpaced first skbs
            before = m.read()
            secs = paced_flow(rate_Bps, 25_000_000)      # 0.2 s at the rate
            late = m.read() - before
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)
    got = 25_000_000 / secs / rate_Bps
    model = trains.paced_share(rate_Bps * 8, segs * mss, late)
    print(f"paced at 1 Gbit/s in {segs}-segment skbs: delivered {got:.3f} of the rate, the "
          f"model {model:.3f} from the timer's lateness {late.summary()}")
    assert late.n >= 1000, f"only {late.n} pacing-timer expiries for 25 MB in 3 KB skbs"
    assert got <= model + 0.08, (
        f"the flow delivered {got:.3f} of its rate, more than the kernel's make-up of half "
        f"a slot allows with its timer's lateness ({model:.3f}): "
        f"tcp_update_skb_after_send changed?")
    assert got >= 0.6 * model, f"delivered {got:.3f} against the model's {model:.3f}"


def test_the_meter_leaves_nothing_attached():
    m = pacer.PacerMeter()
    assert programs_named(pacer.PROG), "the meter's program is not loaded"
    m.close()
    m.close()                      # twice: nothing to do
    # a tracing program's trampoline is freed after an RCU-tasks grace
    # period: gone within a few seconds, not at once
    deadline = time.monotonic() + 10
    while programs_named(pacer.PROG) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not programs_named(pacer.PROG), "the meter's program outlived close() by 10 s"


def test_one_meter_per_process_whatever_its_users():
    """acquire() / release(): the TcpSides of a lab's hosts share the
    process's meter (one program on the tracepoint, not one per host); the
    last release closes it."""
    a = pacer.acquire()
    b = pacer.acquire()
    try:
        assert a is b
        assert len(programs_named(pacer.PROG)) == 1
        with pytest.raises(ValueError):
            pacer.release(pacer.PacerMeter.__new__(pacer.PacerMeter))
        pacer.release(b)
        assert a.read().n >= 0                   # still open for the other user
    finally:
        pacer.release(a)
    with pytest.raises(pacer.PacerError, match="closed"):
        a.read()
    with pytest.raises(ValueError):
        pacer.release(a)
    deadline = time.monotonic() + 10
    while programs_named(pacer.PROG) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not programs_named(pacer.PROG)


def test_an_unknown_symbol_is_refused_by_name(tmp_path):
    syms = tmp_path / "kallsyms"
    syms.write_text("ffffffff81000000 T _stext\n0000000000000000 t hidden_fn\n")
    with pytest.raises(pacer.PacerError, match="no symbol tcp_pace_kick"):
        pacer.kernel_symbol("tcp_pace_kick", str(syms))
    with pytest.raises(pacer.PacerError, match="kptr_restrict"):
        pacer.kernel_symbol("hidden_fn", str(syms))
    assert pacer.kernel_symbol("_stext", str(syms)) == 0xffffffff81000000
