#!/usr/bin/env bash
# The transport engine's cost per packet as the number of flows grows
# (issue 14: within 10 % from 1 to 10,000 active flows).  Builds
# tests/unit/engine/harness.c (the engine's own code, the ring layer
# simulated: no kernel, no root) and runs its `scale` scenario: N flows
# open at once, each paced at 10 Gbit/s / N, so the aggregate packet rate
# is the same for every N; after a warm-up (every flow acknowledged), the
# CPU time of the two engines' loops over 20 ms of simulated time, per
# data packet.  Median of --reps runs per N, printed with its ratio to one
# flow.  The machine's other load shows in the spread: run it idle.
#
# With CACHEGRIND=1 it prints, instead of times, what the machine's other
# load cannot change: instructions and simulated cache misses per data
# packet (valgrind's callgrind with its cache simulation, counting only the
# timed turns of the two engines: D1 = first-level data cache, LL = last
# level), one run of 20 ms per N.
#
#   bash scripts/bench_engine_flows.sh [REPS] [FLOWS...]
#   CACHEGRIND=1 bash scripts/bench_engine_flows.sh 1 [FLOWS...]
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPS=${1:-5}
shift || true
FLOWS=${*:-1 100 1000 10000}
EXE=$(mktemp -d)/harness
trap 'rm -rf "$(dirname "$EXE")"' EXIT
SRCS=$(ls "$ROOT"/fastpath/transport/*.c | grep -v '/rings.c$')
mapfile -t NUMERIC < <(grep -v '^[[:space:]]*#' "$ROOT/fastpath/cc/numeric.cflags")   # the core's flags
gcc -O2 -std=gnu11 "${NUMERIC[@]}" -I"$ROOT/include" -I"$ROOT/fastpath/transport" \
	-o "$EXE" "$ROOT/tests/unit/engine/harness.c" "$ROOT/tests/unit/engine/fake_rings.c" $SRCS \
	"$ROOT"/fastpath/cc/*.c -lxdp -lbpf -lisal -lm -lpthread
if [[ ${CACHEGRIND:-0} == 1 ]]; then
	command -v valgrind >/dev/null || { echo "CACHEGRIND=1 needs valgrind (apt install valgrind)" >&2; exit 2; }
	echo "per data packet in the timed turns of both engines, 20 ms simulated; callgrind's simulated caches"
	D=$(dirname "$EXE")
	for n in $FLOWS; do
		valgrind --tool=callgrind --cache-sim=yes --toggle-collect=timed_turns \
			--callgrind-out-file="$D/cg.out" "$EXE" scale 1 flows="$n" ms=20 rx_peer_max=0 \
			>"$D/out.json" 2>/dev/null
		python3 - "$D" "$n" <<'PY'
import json, sys
d, n = sys.argv[1], sys.argv[2]
ev = tot = None
for line in open(f"{d}/cg.out"):
    if line.startswith("events:"):
        ev = line.split()[1:]
    elif line.startswith("totals:") or line.startswith("summary:"):
        tot = [int(x) for x in line.split()[1:]]
c = dict(zip(ev, tot))
k = json.load(open(f"{d}/out.json"))["pkts"]
d1 = c.get("D1mr", 0) + c.get("D1mw", 0)
ll = c.get("DLmr", 0) + c.get("DLmw", 0)
print(f"{n:>6} flows: {c['Ir'] / k:7.0f} instructions, {d1 / k:6.1f} D1 misses, "
      f"{ll / k:5.2f} LL data misses per packet ({k} packets)")
PY
	done
	exit 0
fi
echo "engine CPU per data packet (both engines: sender and receiver), 20 ms simulated, $REPS runs each"
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
base=""
for n in $FLOWS; do
	vals=()
	for r in $(seq "$REPS"); do
		vals+=("$("$EXE" scale "$r" flows="$n" ms=20 rx_peer_max=0 |
			python3 -c 'import json,sys; print(json.load(sys.stdin)["ns_per_pkt"])')")
	done
	med=$(printf '%s\n' "${vals[@]}" | sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}')
	lo=$(printf '%s\n' "${vals[@]}" | sort -n | head -1)
	hi=$(printf '%s\n' "${vals[@]}" | sort -n | tail -1)
	base=${base:-$med}
	printf '%6s flows: %7.0f ns per packet (min %.0f, max %.0f), %.2fx one flow\n' \
		"$n" "$med" "$lo" "$hi" "$(python3 -c "print($med / $base)")"
done
