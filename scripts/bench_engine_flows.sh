#!/usr/bin/env bash
# The transport engine's cost per packet as the number of flows grows
# (issue 14: within 10 % from 1 to 10,000 active flows).  Builds
# tests/unit/engine/harness.c (the engine's own code, the ring layer
# simulated: no kernel, no root) and runs its `scale` scenario: N flows
# open at once, each paced at 10 Gbit/s / N, so the aggregate packet rate
# is the same for every N (flow i starts i packet times after the first:
# no bursts of N); after a warm-up (every flow acknowledged), the CPU time
# of the two engines' turns over 20 ms of simulated time, per data packet.
# The engines' own work is timed apart from the simulated kernel's (the
# harness's copies of each frame into the receiver's UMEM and off the
# sender's TX frame, which a real engine does not run: "kernel" below).
# REPS rounds, each of which runs every N once, back to back (which N goes
# first alternates); per N the median and least of its runs and their
# ratios to one flow, and the median of the ratios taken within a round
# (scripts/bench_engine_flows_time.py): the VM's speed drifts from minute
# to minute by more than the 10 %, and within a round the drift cancels.
# The machine's other load shows in the spread: run it idle.
#
# With CACHEGRIND=1 it prints, instead of times, what the machine's other
# load cannot change: instructions and simulated cache misses per data
# packet (valgrind's callgrind with its cache simulation: D1 = a 32 KB
# 8-way first-level data cache; L2 = a 512 KB 8-way second level, the
# lines that come from the last-level cache or memory: with thousands of
# flows, what costs), of the engines' turns and, apart, of the simulated
# kernel; one run of 20 ms per N.  The caches are given, not the host's
# (on the project's VM callgrind took a 256 MB direct-mapped LL).
# Callgrind does not model prefetches: their effect shows in the times only.
#
# RATE=G (default 10): the flows' aggregate rate in Gbit/s (an integer; the
# simulated time 200 / G ms, at least 20: as many packets).  At 10 Gbit/s
# each of 10,000 flows sends every 12 ms, within the pacing wheel's near
# slots (16.8 ms); RATE=1 (120 ms) files them in its far level first.
#
# TICK=N (default 1): the engines take a turn every N us of simulated time
# (20: an engine that sleeps its default coalesce_ns between batches, so
# that a batch holds ~16 packets).
#
# BASE=DIR (times only): also build DIR's harness (another worktree, say
# of main before a change) and run the two builds alternately, run by run
# (which goes first alternates too), so that the machine's load weighs on
# both alike; each build's figures and ratios to its own one flow, and the
# least runs' too (the figure the load disturbs least).
#
#   bash scripts/bench_engine_flows.sh [REPS] [FLOWS...]
#   CACHEGRIND=1 bash scripts/bench_engine_flows.sh 1 [FLOWS...]
#   BASE=/work/wt/base TICK=20 bash scripts/bench_engine_flows.sh 15
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[[ ${RATE:-10} =~ ^[1-9][0-9]*$ ]] || { echo "RATE=$RATE: whole Gbit/s, 1 or more" >&2; exit 2; }
REPS=${1:-5}
shift || true
FLOWS=${*:-1 100 1000 10000}
EXE=$(mktemp -d)/harness
trap 'rm -rf "$(dirname "$EXE")"' EXIT
# build_harness TREE OUT: the harness of the source tree TREE
build_harness() {
	local srcs numeric
	srcs=$(ls "$1"/fastpath/transport/*.c | grep -v '/rings.c$')
	mapfile -t numeric < <(grep -v '^[[:space:]]*#' "$1/fastpath/cc/numeric.cflags")   # the core's flags
	gcc -O2 -std=gnu11 "${numeric[@]}" -I"$1/include" -I"$1/fastpath/transport" \
		-o "$2" "$1/tests/unit/engine/harness.c" "$1/tests/unit/engine/fake_rings.c" $srcs \
		"$1"/fastpath/cc/*.c -lxdp -lbpf -lisal -lm -lpthread
}
build_harness "$ROOT" "$EXE"
if [[ -n ${BASE:-} ]]; then
	[[ ${CACHEGRIND:-0} == 1 ]] && { echo "BASE= is for the times (callgrind's counts need no A/B)" >&2; exit 2; }
	[[ -f $BASE/tests/unit/engine/harness.c ]] || { echo "BASE=$BASE: no tests/unit/engine/harness.c there" >&2; exit 2; }
	build_harness "$BASE" "$(dirname "$EXE")/base"
	python3 "$ROOT/scripts/bench_engine_flows_time.py" "$REPS" "${TICK:-1}" "$EXE" \
		"$(dirname "$EXE")/base" -- $FLOWS
	exit 0
fi
if [[ ${CACHEGRIND:-0} == 1 ]]; then
	command -v valgrind >/dev/null || { echo "CACHEGRIND=1 needs valgrind (apt install valgrind)" >&2; exit 2; }
	MS=$(( 200 / ${RATE:-10} > 20 ? 200 / ${RATE:-10} : 20 ))
	echo "per data packet, both engines, $MS ms simulated, ${RATE:-10} Gbit/s in all, tick ${TICK:-1} us; callgrind's simulated caches (D1 32 KB, L2 512 KB)"
	D=$(dirname "$EXE")
	for n in $FLOWS; do
		valgrind --tool=callgrind --cache-sim=yes --D1=32768,8,64 --LL=524288,8,64 \
			--toggle-collect=timed_turns \
			--toggle-collect=kernel_in --toggle-collect=kernel_out \
			--callgrind-out-file="$D/cg.out" "$EXE" scale 1 flows="$n" ms="$MS" rx_peer_max=0 \
			tick_us="${TICK:-1}" rate_gbps="${RATE:-10}" >"$D/out.json" 2>/dev/null
		callgrind_annotate --inclusive=yes --threshold=100 "$D/cg.out" >"$D/cg.txt"
		python3 - "$D" "$n" <<'PY'
import json, re, sys
d, n = sys.argv[1], sys.argv[2]
ev, cost = None, {}
for line in open(f"{d}/cg.txt"):
    if line.startswith("Events shown:"):
        ev = line.split(":", 1)[1].split()
    m = re.search(r":(timed_turns|kernel_in|kernel_out) \[", line)
    if m and ev:
        nums = [0 if t == "." else int(t.replace(",", ""))
                for t in re.sub(r"\([^)]*\)", " ", line).split()[:len(ev)]]
        cost[m.group(1)] = dict(zip(ev, nums))
k = json.load(open(f"{d}/out.json"))["pkts"]
def show(c):
    d1 = c.get("D1mr", 0) + c.get("D1mw", 0)
    ll = c.get("DLmr", 0) + c.get("DLmw", 0)
    return f"{c['Ir'] / k:6.0f} instructions, {d1 / k:5.1f} D1 misses, {ll / k:5.1f} L2"
eng = cost["timed_turns"]
ker = {e: cost["kernel_in"].get(e, 0) + cost["kernel_out"].get(e, 0) for e in ev}
print(f"{n:>6} flows: engines {show(eng)}; simulated kernel {show(ker)} "
      f"per packet ({k} packets)")
PY
	done
	exit 0
fi
python3 "$ROOT/scripts/bench_engine_flows_time.py" "$REPS" "${TICK:-1}" "$EXE" -- $FLOWS
