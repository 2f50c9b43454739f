"""The transport engine's protocol logic without root, a socket or a kernel:
tests/unit/engine/harness.c drives two engines, made with the engine's own
state initialiser, through the engine's own receive path, timers and
scheduler over a simulated link with delay, random loss, reordering and a
finite RX ring in front of a receiver that may be slower than its sender.
Only the ring layer is fake (tests/unit/engine/fake_rings.c stands in for
fastpath/transport/rings.c).

Invariants protected (issue 14, items 2 and 3):
- every transfer is byte-exact (the receiver's CRC-32 is the pattern's) and
  gives every UMEM frame back;
- selective repeat resends the lost packets and nothing else on a link that
  only loses (retransmissions == data packets lost, <= 1.3 with timeouts),
  for every algorithm; go-back-N resends far more, and stays selectable;
- reordering alone costs selective repeat no retransmission;
- the receive window keeps a fast sender from overrunning a slow
  receiver's RX ring: no drop, no retransmission; without it, drops;
- a receiver that lost the flow's state (restart) fails the flow with
  ECONNRESET;
- admission: at most rx_peer_max unfinished flows per peer, the rest are
  refused until earlier ones finish, and every flow completes.
- the receiver table's probe bound: a peer's flows with ids equal modulo
  the table's size take at most TP_RX_PROBE_MAX slots from their home, the
  rest refused and counted (rx_probe_full); every flow, honest or not,
  within the bound of its home; their slots reusable once they end.
- the receiver's peer table: a sender spoofing many source addresses
  cannot push an honest peer's flows out nor get a flow admitted without
  its source counted (rx_peer_table_full); entries go when their flows end.

Issue 15: every ACK, NACK and CNP carries a tagged trailer; forged, replayed or
truncated ones are dropped and counted, never applied; Rx-HPCC carries the
receiver's W in about one ACK per T (through a simulated switch port that
stamps INT at departure), only to flows that asked, with N counted from
the Rx-HPCC flows of the last hop.  [HPCC] Figure 9's dynamics without the
lab's CPUs: an incast's queue gone a few RTTs after its own transmission,
and a long flow with the link back a few RTTs after a short one ends.
"""
from __future__ import annotations

import errno
import importlib
import json
import pathlib
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
HERE = pathlib.Path(__file__).resolve().parent / "engine"

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="no C compiler")

DONE, FAILED = 2, 3          # enum hpccd_tp_state


@pytest.fixture(scope="module")
def harness(tmp_path_factory) -> pathlib.Path:
    """The harness, built with the transport module's own flags and sources
    (cffi_build/build_transport.py), rings.c replaced by the fake."""
    sys.path.insert(0, str(HERE))
    try:
        build = importlib.import_module("harness_build")
    finally:
        sys.path.pop(0)
    try:
        return build.build(tmp_path_factory.mktemp("engine") / "harness")
    except RuntimeError as e:
        pytest.fail(str(e))


def run(exe: pathlib.Path, scenario: str, seed: int, **kw) -> dict:
    args = [str(exe), scenario, str(seed), *(f"{k}={v}" for k, v in kw.items())]
    r = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def exact(res: dict) -> bool:
    return (res["state"] == DONE and res["rx_crc"] == res["want_crc"]
            and res["rx_free"] == res["rx_frames"] and res["rx_held_now"] == 0)


def test_lossless_transfer_resends_nothing(harness):
    res = run(harness, "transfer", 1)
    assert exact(res), res
    assert res["retx"] == 0 and res["ring_drops"] == 0 and res["ooo"] == 0


@pytest.mark.parametrize("algo", ["hpcc", "rx-hpcc", "dctcp", "ldcp"])
@pytest.mark.parametrize("seed", [11, 12, 13])
def test_selective_repeat_resends_what_was_lost(harness, algo, seed):
    res = run(harness, "transfer", seed, loss=0.01, algo=algo)
    assert exact(res), res
    assert res["lost"] > 50 and res["go_backs"] == 0 and res["held"] > 0
    # each lost data packet once, plus one per timeout at most
    assert res["lost"] <= res["retx"] <= res["lost"] + res["rtos"], res
    assert res["retx"] <= 1.3 * res["lost"], res


def test_selective_repeat_repairs_every_hole_of_a_window_at_once(harness):
    """Three holes of two packets in one window (data packets 300-301,
    303-304 and 307-308 of a 100 Gbit/s flow whose window is some hundred
    packets): the SACK blocks name all three, each packet is resent once,
    none waits for a timeout.  (A scan that resumed one packet past a
    block's end missed the second packet of the later holes and waited for
    the RTO: FCT 1.9 ms against 0.8.)"""
    res = run(harness, "transfer", 81, rate_gbps=100, bytes=5_000_000,
              drop="300,301,303,304,307,308")
    assert exact(res), res
    assert res["lost"] == 6 and res["retx"] == 6 and res["rtos"] == 0, res
    assert res["recoveries"] == 1, res


def test_selective_repeat_at_five_percent_loss(harness):
    res = run(harness, "transfer", 21, loss=0.05, bytes=5_000_000)
    assert exact(res), res
    assert res["retx"] <= 1.3 * res["lost"], res


@pytest.mark.parametrize("seed", [31, 32])
def test_go_back_n_is_still_go_back_n(harness, seed):
    sr = run(harness, "transfer", seed, loss=0.01)
    gbn = run(harness, "transfer", seed, loss=0.01, recovery="gbn")
    assert exact(gbn), gbn
    assert gbn["go_backs"] > 0 and gbn["held"] == 0 and gbn["recoveries"] == 0
    assert gbn["retx"] > 3 * sr["retx"], (gbn, sr)


def test_reordering_costs_selective_repeat_nothing(harness):
    sr = run(harness, "transfer", 41, reorder=0.02)
    gbn = run(harness, "transfer", 41, reorder=0.02, recovery="gbn")
    assert sr["reordered"] > 100 and exact(sr) and exact(gbn), (sr, gbn)
    assert sr["retx"] == 0 and gbn["retx"] > 0


def test_receive_window_keeps_a_fast_sender_from_overrunning(harness):
    """A 100 Gbit/s sender, a receiver that takes one frame per microsecond
    (~1.2 Gbit/s of 1500-byte frames) behind a 512-frame ring."""
    kw = dict(budget=1, frames=512, bytes=5_000_000, rate_gbps=100)
    on = run(harness, "transfer", 51, **kw)
    off = run(harness, "transfer", 51, window="off", **kw)
    assert exact(on) and exact(off), (on, off)
    assert on["ring_drops"] == 0 and on["retx"] == 0 and on["rx_hold_full"] == 0, on
    assert off["ring_drops"] > 100 and off["retx"] > 100, off


def test_receiver_restart_fails_the_flow_with_econnreset(harness):
    res = run(harness, "restart", 61, bytes=5_000_000)
    assert res["state"] == FAILED and res["err"] == -errno.ECONNRESET, res


def test_admission_caps_unfinished_flows_per_peer(harness):
    res = run(harness, "admit", 71, flows=20, rx_peer_max=8)
    assert res["max_rx_live"] == 8 and res["rx_peer_full"] > 0, res
    assert res["rx_flows"] == 20 and res["done_exact"] == 20, res


def test_receiver_finds_ten_thousand_flows_of_one_sender_at_their_home_slot(harness):
    """tp_rx_home (docs/transport.md "Flows"): a sender's flow ids carry its
    slot, and the home permutes slots, so 10,000 flows of one sender sit in
    10,000 distinct home slots of the 16,384-slot table and a DATA packet's
    lookup reads one slot (the hash it replaced left 7,599 slots of probing
    among them).  The flows keep sending meanwhile (about 16,500 packets in
    the 20 ms, none resent)."""
    res = run(harness, "scale", 1, flows=10_000, ms=20, rx_peer_max=0, tick_us=20)
    assert res["rx_used"] == 10_000 and res["rx_probes"] == 0, res
    assert res["pkts"] > 10_000 and res["retx"] == 0, res


def test_paced_flows_keep_their_phases_when_the_engine_comes_late(harness):
    """50 flows at 20 Mbit/s each (1 Gbit/s in all), their send times spread
    over a flow's packet time (606 us), the sender's turns coming at random
    gaps of mean 100 us (up to 200: more than the 40 us of pacing credit).
    A flow that comes late loses only whole packet times and keeps its phase
    (outgoing.c): 50 distinct phases at the end, no pacing time lost, at
    most the ~17 packets that a 200 us gap holds in one turn, and as many
    packets as with a turn every microsecond.  Rebased to the late turn's
    "now", as before, the flows merged into one phase and sent all 50 in
    one turn, losing 276 ms of pacing time and 5.5 % of the packets."""
    on_time = run(harness, "phases", 1, flows=50, rate_gbps=1, ms=100)
    late = run(harness, "phases", 1, flows=50, rate_gbps=1, ms=100, late_us=100)
    assert on_time["phases"] == 50 and on_time["most_per_turn"] == 1, on_time
    assert late["running"] == 50 and late["phases"] == 50, late
    assert late["pace_lost_ns"] == 0 and late["most_per_turn"] <= 25, late
    assert late["pkts"] >= 0.99 * on_time["pkts"], (late, on_time)


@pytest.mark.parametrize("seed,span_ms,step_us", [(1, 10_000, 2_000), (2, 20_000, 20_000),
                                                 (3, 3_000, 100)])
def test_pacing_wheel_takes_every_flow_at_its_slot_on_both_levels(harness, seed, span_ms,
                                                                  step_us):
    """The pacing wheel's two levels (wheel.c) against their definition:
    2,000 nodes filed up to 3-20 s ahead (the near slots reach 16.8 ms, the
    far ones 4.4 s), the clock moved in random steps of up to 0.1-20 ms
    (past the near horizon), nodes taken out and filed elsewhere meanwhile.
    Each node is taken once, at the first take whose slot reaches its time,
    wheel_next() is never later than the earliest time filed, and no node
    comes out before its time to be filed again by the caller: the far
    level moves each into the near slots itself (without it, every flow past
    16.8 ms came out every 16.8 ms to be filed again).  Twice: the second
    time after the wheel stood empty for 10 s, past the far horizon."""
    res = run(harness, "wheel", seed, flows=2000, span_ms=span_ms, step_us=step_us)
    assert res["taken"] + res["removed"] == 4000 and res["removed"] > 0, res
    assert res["moved"] > 0 and res["steps"] > 1000, res
    assert (res["early"], res["late"], res["twice"], res["next_late"]) == (0, 0, 0, 0), res
    assert res["refiled"] == 0 and (res["count"], res["fcount"]) == (0, 0), res


@pytest.mark.parametrize("reap", [0, 1])
def test_receiver_table_bounds_a_hostile_peers_run_and_serves_the_others(harness, reap):
    """TP_RX_PROBE_MAX (fastpath/transport/tp.h; docs/security.md "Limits"):
    10,000 flows of 100 honest senders, then 1,000 unfinished flows of one
    peer whose ids are equal modulo the table's size (one home whatever
    the engine's keys; under its rx_peer_max of 4,096).  The run from that
    home takes the hostile flows up to the bound (its slots that honest
    flows do not hold) and refuses the rest, counted in rx_probe_full and
    nowhere else; every flow sits less than the bound past its home, so
    every lookup reads at most probe_max slots; every honest flow's second
    packet finds its flow.  After the hostile flows end (FIN), with or
    without rx_reap(), as many new ones of that peer take their slots (a
    done flow of the run recycled, or its tombstone reused).  Unbounded,
    the 1,000 sat up to 2,555 slots past their home."""
    res = run(harness, "rxtable", 3, flows=10_000, senders=100, hostile=1000, reap=reap)
    bound = res["probe_max"]
    assert bound == 128 and res["ring_drops"] == 0, res
    honest, bad = res["honest"], res["hostile"]
    # honest load alone never meets the bound (at most 60 of 128 seen: tp.h)
    assert honest["n"] == 10_000 and honest["max_d"] < bound, res
    assert res["after_honest"]["rx_probe_full"] == 0, res
    # the hostile run: at most the bound, less the honest flows in it
    assert 0 < bad["n"] < bound and res["all"]["max_d"] < bound, res
    refused = res["after_hostile"]
    assert refused["rx_probe_full"] == 1000 - bad["n"], res
    assert refused["rx_peer_full"] == 0 and refused["rx_table_full"] == 0, res
    # the honest flows, found where they were
    assert res["honest_found"] == 10_000, res
    assert res["honest_after"]["n"] == 10_000, res
    assert res["honest_after"]["max_d"] == honest["max_d"], res
    # the hostile flows end; their slots take as many new ones
    assert res["hostile_done"] == bad["n"], res
    assert res["reaped"] == (bad["n"] if reap else 0), res
    assert res["hostile2"] == bad["n"] and res["all2"]["max_d"] < bound, res
    after = res["after_hostile2"]
    assert after["rx_probe_full"] == 2 * refused["rx_probe_full"], res
    assert after["rx_recycled"] == (0 if reap else bad["n"]), res
    assert after["rx_used"] == 10_000 + bad["n"], res


def test_per_packet_counters_carry_past_32_bits(harness):
    """A sender flow's per-packet counters are 32 bits in its hot cache lines,
    each carry going to the 64-bit field of the same name in its cold stats
    (tp.h TP_HS_ADD; docs/transport.md "Flows"), and hpccd_tp__flow_stats
    exports the sums.  Started 10 short of 2^32, a lossless DCTCP transfer's
    counts come out as the same transfer's from 0 plus the start: packets,
    bytes, ECT packets, ACKs and reactions each wrap in their 32 bits and
    none is lost or counted twice; the INT counters (no INT here) come out
    as the start."""
    start = 2**32 - 10
    plain = run(harness, "transfer", 1, algo="dctcp", bytes=2_000_000)
    near = run(harness, "transfer", 1, algo="dctcp", bytes=2_000_000, hs_at=start)
    assert exact(plain) and exact(near) and plain["retx"] == 0, (plain, near)
    assert all(plain[k] > 10 for k in ("pkts", "wire_bytes", "ect_pkts", "acks",
                                       "cc_updates")), plain
    for k in ("pkts", "wire_bytes", "int_pkts", "ect_pkts", "acks", "cc_updates", "int_acks"):
        assert near[k] == plain[k] + start, (k, plain[k], near[k])


@pytest.mark.parametrize("seed", [5, 6])
def test_peer_table_counts_every_flow_of_a_spoofing_sender(harness, seed):
    """The receiver's table of peers (receiver.c peer_find; docs/security.md
    "Limits"): 10 honest peers with 10 flows each, and a greedy honest one
    that opens rx_peer_max + 10 = 26 (16 taken, 10 refused: rx_peer_full);
    then 300 spoofed addresses, a flow each, all at one place of the peer
    table (chosen with B's key: the worst a spoofer could do if it knew
    it): at most TP_RX_PROBE_MAX of them get an entry and a flow, the rest
    are refused and counted in rx_peer_table_full alone, none admitted
    uncounted.  After each step every unfinished flow is counted in its
    source's entry, within the bound of its place, and no entry is left
    without a flow.  Their flows end (FIN): their entries go, and 300 more
    addresses at that place take as many.  Then 20,000 random addresses
    (more than the 16,384-slot flow table holds): the flow table refuses
    what it cannot hold (rx_table_full, rx_probe_full: its limits), the peer
    table (at most half full) refuses none and its entries sit far less
    than the bound from their places.  rx_idle_ns later 2,000 new
    addresses expire idle spoofed flows, whose entries go.  Every honest
    flow is still there and its packets found.  (Before: an unkeyed table of rx_flows entries,
    never emptied; a spoofer's addresses filled it and then each new flow
    read all 16,384 entries and was admitted without a count.)"""
    res = run(harness, "peertable", seed, senders=10, per=10, aimed=300, spoof=20_000,
              rx_peer_max=16)
    bound = res["probe_max"]
    assert bound == 128 and res["peer_slots"] == 2 * 16384 and res["ring_drops"] == 0, res
    steps = ["honest", "aimed", "aimed_ended", "aimed2", "aimed2_ended", "spoofed", "expired"]
    assert all(res[k]["errors"] == 0 for k in steps), res
    assert all(res[k]["max_d"] < bound for k in steps), res
    # the honest limit per peer still holds: 100 flows + the greedy's 16
    honest = res["honest"]
    assert res["honest_live"] == 116 and honest["entries"] == 11, res
    assert honest["rx_peer_full"] == 10 and honest["rx_peer_table_full"] == 0, res
    # one place: at most the bound's entries (less honest ones in the run)
    took = res["aimed_live"]
    aimed = res["aimed"]
    assert 0 < took <= bound and aimed["entries"] == 11 + took, res
    assert aimed["rx_peer_table_full"] == 300 - took, res
    assert aimed["rx_probe_full"] == 0 and aimed["rx_table_full"] == 0, res
    assert res["honest_live_after"] == 116, res
    # ended: their entries go, and as many new addresses take their place
    assert res["ended"] == took and res["aimed_ended"]["entries"] == 11, res
    assert res["aimed2_live"] == took and res["aimed2"]["entries"] == 11 + took, res
    assert res["aimed2"]["rx_peer_table_full"] == 2 * (300 - took), res
    assert res["ended2"] == took and res["aimed2_ended"]["entries"] == 11, res
    # random addresses: the flow table fills, the peer table refuses none
    spoofed = res["spoofed"]
    # (a few slots may stay empty: no new flow's home within the bound
    # before them; 16,376-16,384 used over 200 tables)
    assert spoofed["rx_used"] >= 16_300 and spoofed["entries"] > 16_000, res
    assert spoofed["rx_peer_table_full"] == 2 * (300 - took), res
    assert spoofed["rx_table_full"] + spoofed["rx_probe_full"] > 0, res
    # rx_idle_ns later, 2,000 new addresses expire as many idle spoofed
    # flows (less the empty slots they take, and a repeated random address
    # finds its flow: 1,992-2,000 over 200 tables), whose entries go; the
    # honest flows, sending, are kept and found (their third packet in order)
    expired = res["expired"]
    assert 1900 <= res["rx_expired"] <= 2000 and expired["rx_used"] == 16384, res
    assert expired["rx_peer_table_full"] == spoofed["rx_peer_table_full"], res
    assert res["honest_found"] == 100 and res["honest_live_end"] == 116, res


# ---- multi-buffer packets (a socket bound with XDP_USE_SG) ----------------------------
# A flow whose MTU is larger than a frame sends each packet as up to 16 TX
# frames (XDP_PKT_CONTD on all but the last); the receiver gets it as the
# kernel splits it, a frame's room after the XDP headroom a piece (4096-byte
# frames: 3838 bytes), gathers and parses it.

def test_jumbo_packets_travel_as_pieces_and_arrive_exact(harness):
    res = run(harness, "transfer", 91, mtu=9000, bytes=20_000_000)
    assert exact(res), res
    # 20 MB in packets of 8,936 payload bytes (78 header bytes without
    # INT), all multi-buffer but the last (1,232 bytes)
    assert res["pkts"] == -(-20_000_000 // (9000 + 14 - 78)), res
    assert res["tx_mb_pkts"] == res["rx_mb_pkts"] == res["pkts"] - 1, res
    assert res["retx"] == 0 and res["ring_drops"] == 0, res


@pytest.mark.parametrize("seed", [92, 93])
def test_jumbo_selective_repeat_holds_copies_and_frees_them(harness, seed):
    res = run(harness, "transfer", seed, mtu=9000, loss=0.01)
    assert exact(res), res
    assert res["held"] > 0 and res["go_backs"] == 0, res
    assert res["retx"] <= 1.3 * res["lost"], res
    assert res["rx_held_heap"] == 0, res          # every copy freed


@pytest.mark.parametrize("piece", [1001, 600])
def test_jumbo_pieces_of_any_size_check_and_deliver_exact(harness, piece):
    """The receiver reads a multi-buffer packet where its pieces are: the
    UDP checksum and the stream run across pieces of odd sizes too."""
    res = run(harness, "transfer", 90, mtu=9000, bytes=5_000_000, piece=piece, loss=0.01)
    assert exact(res), res
    assert res["bad_csum"] == 0 and res["rx_mb_bad"] == 0 and res["held"] > 0, res
    assert res["rx_mb_pkts"] >= res["pkts"] - res["retx"] - 1 - res["lost"], res


def test_jumbo_first_piece_too_short_for_the_headers_is_dropped(harness):
    res = run(harness, "transfer", 89, mtu=9000, bytes=200_000, piece=300)
    assert res["state"] == FAILED and res["rx_mb_bad"] > 0 and res["rx_mb_pkts"] == 0, res


def test_jumbo_receive_window_counts_frames_not_packets(harness):
    """A packet of 9,000 bytes takes three RX frames: the window (in frames
    of the 512-frame ring) must give a third of the packets, or a fast
    sender overruns the ring."""
    kw = dict(budget=1, frames=512, bytes=5_000_000, rate_gbps=100, mtu=9000)
    on = run(harness, "transfer", 94, **kw)
    off = run(harness, "transfer", 94, window="off", **kw)
    assert exact(on) and exact(off), (on, off)
    assert on["ring_drops"] == 0 and on["retx"] == 0, on
    assert off["ring_drops"] > 50, off


def test_largest_mtu_is_sixteen_frames(harness):
    res = run(harness, "transfer", 95, mtu=16 * 3838 - 14, bytes=2_000_000)
    assert exact(res) and res["tx_mb_pkts"] >= res["pkts"] - 1, res
    r = subprocess.run([str(harness), "transfer", "96", f"mtu={16 * 3838 - 13}"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 3 and "mtu" in r.stderr.lower(), r.stderr


def test_without_multi_buffer_the_mtu_is_one_frame(harness):
    res = run(harness, "transfer", 97, mtu=3838 - 14, sg="off", bytes=2_000_000)
    assert exact(res) and res["tx_mb_pkts"] == 0, res
    r = subprocess.run([str(harness), "transfer", "98", "mtu=3825", "sg=off"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 3 and "mtu" in r.stderr.lower(), r.stderr


@pytest.mark.parametrize("ack_every", [1, 4])
def test_a_stalled_receiver_costs_one_packet_per_timeout(harness, ack_every):
    """The receiver's thread held off its CPU for 5 ms (five RTOs of 1 ms)
    while data is in flight: the sender times out, resends one packet, and
    the first ACK after the stall echoes the clock of a packet sent before
    the timeout (RFC 3522's Eifel detection): the timeout was spurious and
    sending carries on.  Judged by the ACK number alone (beyond the one
    resent packet), an ACK per packet never showed it, and each such
    timeout resent the whole window: 34 packets each on a loaded veth."""
    res = run(harness, "transfer", 99, stall_us=5000, stall_at=2_000_000,
              ack_every=ack_every, bytes=10_000_000)
    assert exact(res), res
    assert res["rtos"] >= 1 and res["ring_drops"] == 0, res
    assert res["rtos_spurious"] >= 1, res
    # one packet per timeout (backed off: fewer than five)
    assert res["retx"] <= res["rtos"], res


# ---- integrity of feedback ([HPCC++2022] section 9.1, issue 15 section 3) ----------

@pytest.mark.parametrize("mode", ["forge", "replay", "truncate"])
def test_tampered_feedback_is_dropped_and_counted(harness, mode):
    """Every 5th ACK or NACK B -> A is forged (a bit of its cumulative ACK
    flipped, checksums fixed, tag kept), replayed (delivered twice) or cut
    before its trailer; three lost DATA packets make NACKs among them.  None
    is applied: each is counted once (bad tag, or replay), and the transfer
    is exact."""
    res = run(harness, "transfer", 91, bytes=5_000_000, drop="300,301,900",
              tamper=mode, tamper_every=5)
    assert exact(res), res
    assert res["tampered"] > 500 and res["nacks"] > 0, res
    if mode == "replay":
        assert res["fb_replayed"] == res["tampered"] and res["bad_tags"] == 0, res
    else:
        assert res["bad_tags"] == res["tampered"] and res["fb_replayed"] == 0, res
    # a dropped NACK is a lost NACK: at most one timeout more to repair
    assert res["lost"] == 3 and res["retx"] <= res["lost"] + res["rtos"] <= 5, res


def test_feedback_under_another_key_is_never_applied(harness):
    """B tags with a key A does not have: every ACK is dropped (bad tag), none
    acknowledges anything, and the flow fails for want of progress instead of
    being driven by feedback it cannot authenticate."""
    res = run(harness, "transfer", 92, bytes=100_000, key="other")
    assert res["state"] == FAILED and res["err"] == -errno.ETIMEDOUT, res
    assert res["acks"] == 0 and res["nacks"] == 0 and res["bad_tags"] > 10, res


# ---- Rx-HPCC ([HPCC++2020] section 6.2, issue 15 section 2) ------------------------

def test_rx_hpcc_carries_w_in_one_ack_per_T(harness):
    """Four flows through a 10 Gbit/s port that stamps INT at departure, T =
    30 us: with sender HPCC every DATA is acknowledged (m = 1); with Rx-HPCC
    the receiver's ACKs carry W and leave once per T per flow (plus the last
    byte's), so feedback falls to a fraction, the port staying as busy."""
    kw = dict(flows=4, bytes=2_000_000, bneck_gbps=10, T_us=30)
    snd = run(harness, "bneck", 1, algo="hpcc", **kw)
    rx = run(harness, "bneck", 1, algo="rx-hpcc", **kw)
    assert snd["done_exact"] == rx["done_exact"] == 4, (snd, rx)
    assert snd["fb_per_data"] >= 0.99 and snd["windows"] == 0, snd
    assert rx["windows"] == rx["acks"] + rx["nacks"], rx      # every ACK carries W
    # about one per T per flow over the run (measured 1067 in 254 T of 4 flows)
    assert rx["acks"] <= 1.1 * 4 * rx["ms"] * 1000 / 30, rx
    assert rx["fb_per_data"] < 0.25 * snd["fb_per_data"], (snd, rx)
    assert rx["util"] >= 0.85 and snd["util"] >= 0.85, (snd, rx)


def test_rx_hpcc_windows_only_for_flows_that_ask_and_N_counts_them(harness):
    """Three Rx-HPCC flows and two sender-HPCC flows share the receiver's last
    hop: N (the receiver's count for W_AI) is 3, and with the last hop the
    bottleneck W_AI is W_init (1 - eta) / 3 ([HPCC++2020] section 6.2: 625
    bytes at 10 Gbit/s, T = 30 us, eta 0.95, against the configured 18.75 of
    N = 100); the HPCC flows get no window in their ACKs, and every flow
    completes exactly."""
    res = run(harness, "bneck", 2, algo="rx-hpcc", flows=3, algo2="hpcc", flows2=2,
              bytes=1_000_000, bneck_gbps=10, T_us=30)
    assert res["done_exact"] == 5, res
    assert res["max_n"] == 3, res
    assert res["w_ai_want"] == pytest.approx(37_500 * 0.05 / 3), res
    assert res["w_ai_at_max_n"] == pytest.approx(res["w_ai_want"]), res
    assert res["windows_to_flows2"] == 0 and res["windows"] > 0, res
# ---- DCQCN and TIMELY in the engine (issue 16) ----------------------------------------
# Rate-based: W unlimited, the pacing rate the algorithm's.  The harness's
# link marks CE (ce=P, ce_list=I,J) as a switch would; the receiver is
# DCQCN's notification point for flows whose DATA ask for CNPs (cnp.c).

LINE = 10e9                  # the harness's default rate_gbps=10
CNP_N_NS = 50_000            # hpccd_tp_config_default's cnp_ns: DCQCN's N


def test_dcqcn_one_cnp_halves_the_rate_then_recovers(harness):
    """One CE mark (the 6th frame): one CNP, Eq. (1) with alpha = 1 cuts RC
    to exactly line / 2; fast recovery then brings it back to line rate."""
    res = run(harness, "transfer", 81, algo="dcqcn", ce_list="5")
    assert exact(res), res
    assert res["ce_marked"] == 1 and res["cnps_sent"] == 1 and res["cnps"] == 1, res
    assert res["rate_first"] == LINE / 2 and res["rate_min"] == LINE / 2, res
    assert res["rate_end"] == LINE, res


def test_dcqcn_without_marks_sends_at_line_rate_and_no_cnp(harness):
    res = run(harness, "transfer", 82, algo="dcqcn")
    assert exact(res), res
    assert res["cnps_sent"] == 0 and res["cc_updates"] == 0 and res["rate_min"] == LINE, res


@pytest.mark.parametrize("seed", [83, 84])
def test_dcqcn_under_marks_at_most_one_cnp_per_interval(harness, seed):
    res = run(harness, "transfer", seed, algo="dcqcn", ce=0.05)
    assert exact(res), res
    assert res["ce_marked"] > 100, res
    # the notification point: at least one CNP, at most one per N per flow
    assert 0 < res["cnps_sent"] <= res["fct_us"] * 1000 / CNP_N_NS + 1, res
    # every CNP that reached the sender while its flow ran was applied; the
    # CNP timer's last one may still be on the wire when the last ACK ends
    # the flow (seen: 689 of 690 taken, the 690th after the finish)
    assert res["cnps"] == res["cc_updates"], res
    assert res["cnps_sent"] - 1 <= res["cnps"] <= res["cnps_sent"], res
    assert res["cnps_sent"] < res["ce_marked"], res
    assert res["rate_min"] < LINE / 4, res


@pytest.mark.parametrize("mode", ["forge", "truncate"])
def test_a_forged_or_cut_cnp_does_not_cut_the_rate(harness, mode):
    """[HPCC++2022] section 9.1: the one CNP of the run (one CE mark) is forged
    (a bit of its header flipped, checksums fixed, tag kept) or cut before its
    trailer on its way: dropped and counted as a bad tag, never handed to
    DCQCN, whose rate stays at the line (the genuine one halves it, above)."""
    res = run(harness, "transfer", 81, algo="dcqcn", ce_list="5", tamper=mode,
              tamper_every=1, tamper_cnp=1)
    assert exact(res), res
    assert res["cnps_sent"] == 1 and res["tampered"] == 1, res
    assert res["bad_tags"] == 1 and res["fb_replayed"] == 0, res
    assert res["cnps"] == 0 and res["cc_updates"] == 0 and res["rate_min"] == LINE, res


def test_a_replayed_cnp_cuts_the_rate_once(harness):
    """The one CNP arrives twice: the copy's fb_seq is not new, so it is
    dropped (fb_replayed) and DCQCN cuts once, to line / 2 (applying the copy
    too cuts again, to line / 4: measured with the check taken out)."""
    res = run(harness, "transfer", 81, algo="dcqcn", ce_list="5", tamper="replay",
              tamper_every=1, tamper_cnp=1)
    assert exact(res), res
    assert res["tampered"] == 1 and res["fb_replayed"] == 1 and res["bad_tags"] == 0, res
    assert res["cnps"] == 1 and res["cc_updates"] == 1, res
    assert res["rate_min"] == LINE / 2, res


@pytest.mark.parametrize("mode", ["forge", "replay", "truncate"])
def test_tampered_cnps_under_marks_are_dropped_and_counted(harness, mode):
    """Every 3rd CNP of a marked run tampered with: each counted once (bad tag
    or replay), the others applied, ACKs untouched, the transfer exact."""
    res = run(harness, "transfer", 83, algo="dcqcn", ce=0.05, tamper=mode, tamper_every=3,
              tamper_cnp=1)
    assert exact(res), res
    assert res["tampered"] > 100, res
    if mode == "replay":
        assert res["fb_replayed"] == res["tampered"] and res["bad_tags"] == 0, res
        assert res["cnps"] == res["cnps_sent"], res
    else:
        assert res["bad_tags"] == res["tampered"] and res["fb_replayed"] == 0, res
        assert res["cnps"] == res["cnps_sent"] - res["tampered"], res
    assert res["cc_updates"] == res["cnps"], res


def test_rxrate_oscillates_where_txrate_converges(harness):
    """[HPCC] section 3.4, Figure 6, on the engine's own code: two HPCC
    flows into one 10 Gbit/s port (2-to-1), the hop's txBytes from the
    bytes sent (txRate) or from the bytes that arrived at the queue
    (rxRate, as the lab's HPCCD_SW_F_RX_BYTES).  Both cut the start's
    queue (44-50 KB) within ~150 us; once it has drained, txRate's queue
    stays within two frames, rxRate's rises again: "using rxRate has
    oscillation before it finally converges ... using txRate gracefully
    converges".  That second peak, over 18 runs of seeds 1-3: txRate 1.5-3.0
    KB, rxRate 3.0-10.6 KB (mean 6.6).  The harness's clock starts at the
    real time, and the start depends on its phase: a single run can tie,
    and about one run in 50 built no start queue at all (nothing to
    converge from: left out, at most two of eight); so the mean of 8 seeds."""
    second: dict[int, list[int]] = {0: [], 1: []}
    no_start = 0
    for seed in range(1, 9):
        got = {}
        for rx in (0, 1):
            res = run(harness, "bneck", seed, flows=2, algo="hpcc", bytes=5_000_000,
                      bneck_gbps=10, T_us=30, rxrate=rx, qtrace_us=2)
            assert res["done_exact"] == 2, res
            tr = res["qtrace"]
            peak = max(range(len(tr)), key=lambda i: tr[i][1])
            if tr[peak][1] < 30_000:
                break
            drained = next(i for i in range(peak, len(tr)) if tr[i][1] < 2000)
            assert tr[drained][0] < 200, tr[drained]
            got[rx] = max(q for t, q in tr[drained:] if t < tr[drained][0] + 300)
        if len(got) < 2:
            no_start += 1
            continue
        for rx in (0, 1):
            second[rx].append(got[rx])
    assert no_start <= 2, (no_start, second)
    n = len(second[0])
    assert max(second[0]) <= 2 * 1514 + 100, second
    assert sum(second[1]) / n >= sum(second[0]) / n + 1514, second


@pytest.mark.parametrize("cnp_us", [50, 120])
def test_dcqcn_a_held_mark_gets_its_cnp_when_the_window_ends(harness, cnp_us):
    """The first two frames CE-marked: the first mark's CNP leaves at once,
    the second is within N of it and is held; the rest of the flow (ten
    frames, done well within N) brings no mark and no window end.  The
    receiver's timer sends the held mark's CNP exactly N after the first
    (one tick of the harness's clock: 1 us), though no packet of the flow
    arrives then (without the timer it never left: cnps_sent 1); the flow
    was over, so the sender counts it as late, not applied."""
    res = run(harness, "transfer", 86, algo="dcqcn", bytes=14_360, ce_list="0,1",
              cnp_us=cnp_us, linger_us=3 * cnp_us)
    assert exact(res), res
    assert res["fct_us"] < cnp_us, res
    assert res["ce_marked"] == 2 and res["cnps_sent"] == 2, res
    first, second = res["cnp_at_us"]
    assert second - first == pytest.approx(cnp_us, abs=1.0), res
    assert res["cnps"] == 1 and res["cc_updates"] == 1, res


def test_cnps_go_only_to_flows_that_ask(harness):
    """A DCTCP flow's DATA do not ask for CNPs: marks reach it as ECE only."""
    res = run(harness, "transfer", 85, algo="dctcp", ce=0.05)
    assert exact(res), res
    assert res["ce_marked"] > 100 and res["cnps_sent"] == 0 and res["cnps"] == 0, res


def test_timely_below_t_low_stays_at_line_rate(harness):
    """RTT ~20 us < T_low = 50 us: every sample adds delta, capped at the line."""
    res = run(harness, "transfer", 86, algo="timely")
    assert exact(res), res
    assert res["cc_updates"] > 1000 and res["rate_min"] == LINE, res


def test_timely_above_t_high_cuts_by_hand_computed_factor(harness):
    """One-way delay 300 us: RTT just above 600 us > T_high = 500 us.  The first
    sample cuts the rate to line x (1 - beta (1 - T_high / rtt)), beta = 0.8;
    the RTT stays above T_high, so the rate falls to its floor (1 Mbit/s)
    and the transfer still completes byte-exact."""
    res = run(harness, "transfer", 87, algo="timely", delay_us=300, bytes=100_000)
    assert exact(res), res
    rtt = 600e3                                  # ns, plus serialisation (< 2 us)
    hi = LINE * (1 - 0.8 * (1 - 500e3 / rtt))
    lo = LINE * (1 - 0.8 * (1 - 500e3 / (rtt + 2e3)))
    assert lo <= res["rate_first"] <= hi, res
    assert res["rate_min"] == 1e6, res


@pytest.mark.parametrize("algo", ["dcqcn", "timely"])
def test_plus_win_bounds_bytes_in_flight_by_hpccs_w_init(harness, algo):
    """"DCQCN+win", "TIMELY+win" ([HPCC] section 5.1): W = line rate x T (the
    harness's T = 50 us: 62,500 bytes at 10 Gbit/s).  Over a 200 us RTT the
    window, not the rate, sets the pace: W / RTT, the 20 MB in about
    20e6 x 1514/1436 (wire per payload) / 62,500 x 200 us = 67.5 ms, where
    the flow without a window runs at the line rate (~17 ms)."""
    free = run(harness, "transfer", 88, algo=algo, delay_us=100)
    win = run(harness, "transfer", 88, algo=algo, delay_us=100, win=1)
    assert exact(free) and exact(win), (free, win)
    assert free["window_bytes"] >= 1e15 and free["wnd_limited_us"] == 0, free
    assert win["window_bytes"] == LINE * 50e3 / 8e9 == 62_500, win
    assert win["wnd_limited_us"] > 0.5 * win["fct_us"], win
    bound_us = 20e6 * 1514 / 1436 / 62_500 * 200
    assert 0.9 * bound_us <= win["fct_us"] <= 1.15 * bound_us, win
    assert free["fct_us"] < 0.3 * win["fct_us"], (free, win)


def test_plus_win_is_refused_for_window_based_algorithms(harness):
    r = subprocess.run([str(harness), "transfer", "89", "algo=dctcp", "win=1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 3 and "rate_win 1" in r.stderr, r.stderr


def test_long_flow_has_the_link_back_a_few_rtts_after_the_short_flow_ends(harness):
    """[HPCC] section 5.2, Figure 9a on the engine's own code, without the
    lab's two shared cores (docs/experiments.md "What holds the long flow
    back"): a long HPCC flow alone at the 10 Gbit/s port, a 1 MB short one
    joins, shares, and leaves.  After the short flow's last byte U falls
    below eta within a few RTTs (its EWMA weighs each ACK by tau / T), then
    up to maxStage additive W^c updates and the multiplicative one ([HPCC]
    Algorithm 1 lines 12-19): W is back at 90 % of its level alone within 9
    base RTTs (maxStage + 4) and the long flow's delivery rate within 10 (the
    issue's target); 60 runs measured 2.2-7.3 and 3.2-8.0 RTTs.  The join's
    queue (the short flow starts at line rate, W_init = B x T: 35-36 KB) is
    gone within 5 RTTs (measured 3.2-3.6).  Their shares while together are
    HPCC's: W_AI = W_init (1 - eta) / 100 evens them out slowly (the long
    flow kept 0.30-0.50 of its rate alone)."""
    us = 1000
    for seed in (1, 2, 3):
        res = run(harness, "longshort", seed, bytes=1_000_000, T_us=25, delay_us=10,
                  after_us=1000, step_us=5)
        assert res["port_drops"] == 0, res
        join = next(x[0] for x in res["trace"] if x[1] == "short")
        tr = [x for x in res["trace"] if x[1] != "short"]
        end, rtt = res["t_end_ns"], res["min_rtt_ns"]
        assert 20 * us <= rtt <= 25 * us, rtt          # 2 x 10 us of links, two frames

        def acked(t):                                  # the long flow's bytes acked by t
            return max((x for x in tr if x[0] <= t), key=lambda x: x[0])[4]

        def rate(a, b):
            return (acked(b) - acked(a)) * 8e9 / (b - a)

        alone = rate(join - 500 * us, join)
        during = rate(join + 200 * us, end)
        assert alone >= 0.8 * res["line_bps"], (seed, alone)   # eta 0.95 of the wire, less headers
        assert 0.2 * alone <= during <= 0.65 * alone, (seed, alone, during)
        # the join's queue: up while both send at line rate, gone in a few RTTs
        q_join = [(x[0], x[5]) for x in tr if join <= x[0] <= join + 500 * us]
        peak_t, peak_q = max(q_join, key=lambda x: x[1])
        assert peak_q >= 20_000, (seed, peak_q)
        gone = next(t for t, q in q_join if t > peak_t and q <= 2 * 1514)
        assert gone - join <= 5 * rtt, (seed, gone - join)
        # W: halved while shared, back at 90 % of its level alone soon after
        w_alone = sorted(x[1] for x in tr if join - 500 * us <= x[0] < join)[len(
            [x for x in tr if join - 500 * us <= x[0] < join]) // 2]
        assert max(x[1] for x in tr if join + 200 * us <= x[0] <= end) <= 0.6 * w_alone
        w_back = next(x[0] for x in tr if x[0] > end and x[1] >= 0.9 * w_alone)
        assert w_back - end <= 9 * rtt, (seed, (w_back - end) / rtt)
        # the rate: the first window of 2 RTTs at >= 90 % of alone
        back = next(t for t in range(end, end + 1000 * us, 5 * us)
                    if rate(t, t + 2 * rtt) >= 0.9 * alone)
        assert back - end <= 10 * rtt, (seed, (back - end) / rtt)


def test_an_incasts_queue_is_gone_a_few_rtts_after_its_own_transmission(harness):
    """[HPCC] section 5.2, Figure 9d on the engine's own code (no CPUs in the
    way; docs/experiments.md "What holds the incast's queue"): eight HPCC
    flows of 500 KB start together at W_init = B x T into one 10 Gbit/s port
    (22 us RTT, T = 25 us).  The queue they build (224-229 KB measured) is
    sent at the line rate, which no sender can shorten; HPCC cuts the windows
    one round trip after the peak, so the queue is down to two frames within
    that transmission plus 8 RTTs of the peak (measured 4.3-5.0 RTTs more)
    and stays under ten frames after; no drop, every flow byte-exact."""
    rtt_us = 22
    for seed in (1, 2, 3):
        res = run(harness, "bneck", seed, flows=8, algo="hpcc", bytes=500_000, bneck_gbps=10,
                  T_us=25, delay_us=10, qtrace_us=2)
        assert res["done_exact"] == 8 and res["port_drops"] == 0, res
        tr = res["qtrace"]                           # [us from the first departure, bytes]
        peak = max(range(len(tr)), key=lambda i: tr[i][1])
        t_peak, q_peak = tr[peak]
        assert q_peak >= 150_000, (seed, tr[peak])    # the start's queue, several BDPs
        drained = next(i for i in range(peak, len(tr)) if tr[i][1] <= 2 * 1514)
        own = q_peak * 8 / 10e9 * 1e6                 # its transmission at line rate, us
        assert tr[drained][0] - t_peak <= own + 8 * rtt_us, (seed, tr[drained], own)
        assert max(q for _, q in tr[drained:]) <= 10 * 1514, seed


def _fairness(harness, seed: int, **kw) -> list:
    """The lab's fairness run on the engine's code: 4 HPCC flows join a 1 Gbit/s port
    one a second and leave in reverse order, T = 210 us, one-way delay 80 us, N = 100
    (docs/results.md's fairness run); its phases read by tests/unit/engine/fairness_trace.py."""
    sys.path.insert(0, str(HERE))
    try:
        trace = importlib.import_module("fairness_trace")
    finally:
        sys.path.pop(0)
    res = run(harness, "fairness", seed, flows=4, rate_gbps=1, bneck_gbps=1, T_us=210,
              delay_us=80, N=100, step_us=1_000_000, bin_us=1000, **kw)
    assert res["port_drops"] == 0, res["port_drops"]
    return trace.analyse(res)


def test_flows_converge_to_fairness_when_u_is_unbiased(harness):
    """[HPCC] section 5.2, Figure 9g/9h on the engine's own code (docs/experiments.md
    "Fairness without the lab's CPUs"): with an ACK per packet and the switch's qLen
    stamped 0, every flow's U is the same link's txRate, and Algorithm 1's additive
    step W_AI = W_init (1 - eta) / 100 (13 bytes) brings 2, 3 and 4 flows to Jain
    about 0.98 over each phase's second half (the least phase of a run 0.963-0.993,
    mean 0.985 in 45 runs of seeds 1-3 at random start_ns: the harness's clock starts
    at the real one's, so runs differ; one of three at 0.967 in CI; asserted: the mean
    of three >= 0.97, none below 0.95),
    its windows' Jain >= 0.98 for good 263-755 ms after a join in most runs (1,365-3,769
    W^c updates of the newest flow; the harness's clock starts at the real one's, so a
    run's W hovering near 0.98 is not asserted).  It fails with the core's W_AI at 0
    (checked: the ratios a join leaves are kept).

    With the switch's real qLen (the queue a packet leaves behind at departure,
    [HPCC] section 4.1) the same run does not converge: the newest flow takes
    0.7-0.8 of the link and the others sit at W_min (Jain 0.54 / 0.39 / 0.32 for 2 /
    3 / 4 flows in every seed).  A small flow's packet, arriving among a big flow's
    smoothly paced ones, nearly always leaves one of them behind: one 1,514-byte
    frame is 0.058 of U at B x T = 26 KB, more than 1 - eta, so the small flow is
    cut while the big one is not (its U measured above the big one's), which makes
    it smaller still."""
    least = []
    for seed in (1, 2, 3):
        phases = _fairness(harness, seed, ack_every=1, int_noq=1)
        least.append(min(ph.jain_second_half for ph in phases if ph.flows >= 2))
    assert min(least) >= 0.95 and sum(least) / 3 >= 0.97, least
    real = _fairness(harness, 1, ack_every=1)
    four = next(ph for ph in real if ph.flows == 4)
    assert four.jain_second_half < 0.5, four
    assert max(four.rates_bps) >= 0.65e9 and min(four.rates_bps) <= 0.06e9, four


def test_fairness_returns_once_one_queued_frame_is_a_small_part_of_u(harness):
    """Issue 15 section 4, docs/experiments.md "Fairness and B x T": at the lab's
    B x T of 17 frames (1 Gbit/s, T = 210 us) HPCC does not converge after a join
    because a small flow's packet nearly always leaves one of a big flow's frames
    behind it, and one frame is 1 / 17 = 0.058 of U, more than the 1 - eta = 0.05
    Algorithm 1 leaves.  Everything else the lab's (1 Gbit/s, one-way delay 80 us,
    an ACK every 4, INT at the dequeue, N = 100, eta 0.95) but T = 1 ms, B x T is
    83 frames and one frame 0.012 of U: the four flows converge (the least phase's
    Jain over its second half 0.980-0.990 in seeds 1-3; asserted >= 0.97).

    The claimed cause mutated, nothing else: the port stamps 5 x its queue, so one
    frame weighs 0.061 of U as at 17 frames, with the same B, T, RTT, W_init and
    W_AI: the flows do not converge again (the four-flow phase 0.37-0.73 in 80 runs
    at random start_ns, 0.37-0.51 in 75 of them, where one flow, the newest in 59,
    takes 551-715 Mbit/s; in every run one flow held at 27-37 Mbit/s; CI once saw
    0.709 where this asked < 0.6)."""
    kw = dict(flows=4, rate_gbps=1, bneck_gbps=1, T_us=1000, delay_us=80, N=100,
              ack_every=4, int_at="deq", step_us=2_500_000, bin_us=1000)
    with ThreadPoolExecutor(2) as ex:
        fair, mutated = ex.map(lambda q: _fairness_run(harness, 1, qlen_scale=q, **kw), (1, 5))
    least = min((ph for ph in fair if ph.flows >= 2), key=lambda ph: ph.jain_second_half)
    assert least.jain_second_half >= 0.97, least
    four = next(ph for ph in mutated if ph.flows == 4)
    assert four.jain_second_half < 0.8 and min(four.rates_bps) < 0.06e9, four


def test_at_the_labs_b_x_t_a_larger_w_ai_converges(harness):
    """docs/experiments.md "Fairness and B x T": at the lab's 17 frames (1 Gbit/s,
    T = 210 us, INT at the dequeue, eta 0.95) the flows converge with [HPCC]
    section 5.1's W_AI of 80 bytes (the paper's testbed ran it at 25 Gbit/s x
    9 us = 28 KB of B x T, like the lab's 26 KB: W_init (1 - eta) / 17.6) and
    section 3.1's ACK per packet: the least phase's Jain over its second half
    0.983-0.990 in seeds 1-3 (asserted >= 0.97).  Without the rule, W_AI by N =
    100 (13 bytes), the newest flow keeps the link (0.42-0.44); with the lab's
    ACK every 4 the same W_AI does not converge either (0.83-0.95: a quarter of
    the records, each weighing four times as much in U), twice it, 160 bytes
    (W_init (1 - eta) / 8), does (0.993-0.994).
    The clock's start phase moves these figures (six phases, session 15:
    rule 0.981-0.983, N = 100 0.424-0.492, ACK every 4 0.906-0.942, twice
    W_AI 0.961-0.995, which crossed 0.97 in one of them and failed a run of
    the suite), so the runs start at one phase: the test asserts the
    behaviour at that phase, and cannot flake with the real clock."""
    kw = dict(flows=4, rate_gbps=1, bneck_gbps=1, T_us=210, delay_us=80, N=100,
              int_at="deq", step_us=1_000_000, bin_us=1000, start_ns=1_000_000_000)
    cases = [dict(ack_every=1, w_ai=80), dict(ack_every=1), dict(ack_every=4, w_ai=80),
             dict(ack_every=4, w_ai=160)]
    with ThreadPoolExecutor(2) as ex:
        rule, n100, ack4, rule4 = ex.map(lambda c: _fairness_run(harness, 1, **kw, **c), cases)

    def least(phases):
        return min((ph for ph in phases if ph.flows >= 2), key=lambda ph: ph.jain_second_half)

    assert least(rule).jain_second_half >= 0.97, least(rule)
    assert least(n100).jain_second_half < 0.6, least(n100)
    # below the 0.97 the converging cases reach (0.83-0.91 in the helper's
    # seeds, 0.950 in one CI run: the harness's clock starts at the real one's)
    assert least(ack4).jain_second_half < 0.97, least(ack4)
    assert least(rule4).jain_second_half >= 0.97, least(rule4)


def _fairness_run(harness, seed: int, **kw) -> list:
    """One harness fairness run (longer than run()'s timeout allows on a loaded
    machine), read by fairness_trace."""
    sys.path.insert(0, str(HERE))
    try:
        trace = importlib.import_module("fairness_trace")
    finally:
        sys.path.pop(0)
    args = [str(harness), "fairness", str(seed), *(f"{k}={v}" for k, v in kw.items())]
    r = subprocess.run(args, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["port_drops"] == 0, res["port_drops"]
    return trace.analyse(res)
