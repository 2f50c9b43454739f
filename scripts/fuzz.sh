#!/usr/bin/env bash
# Long fuzzing runs of the libFuzzer harnesses in fuzz/ (docs/fuzzing.md).
#
#   bash scripts/fuzz.sh [SECONDS] [HARNESS...]
#
# SECONDS per harness (default 600; 0: no fuzzing, only the coverage
# report over the corpora of earlier runs), the harnesses one after the other
# (default all: fuzz_wire_frame fuzz_int_hop fuzz_cc).  Each run starts from
# the seed corpus (build/fuzz/corpus/<h>, made from tests/vectors/wire.json
# and the bundled traces) plus what earlier runs found (build/fuzz/work/<h>,
# kept between runs), and prints libFuzzer's executions, exec/s, cov: (edges
# covered) and ft: (features).  With llvm-cov installed, a line/branch
# coverage report of the C sources over the final corpora follows (COV=0
# skips it).  A crash leaves its input in build/fuzz/artifacts/<h>/ and
# makes the script exit 1: turn it into a regression input
# (fuzz/regressions/<h>/, docs/fuzzing.md says how).
#
# Environment: NICE (default 10: the lab machines have two cores shared
# with timing-sensitive tests), COV (default 1), FUZZ_FLAGS (extra
# libFuzzer flags, e.g. "-jobs=2 -workers=2").
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

SECONDS_EACH=${1:-600}
[ $# -gt 0 ] && shift
HARNESSES=("$@")
[ ${#HARNESSES[@]} -eq 0 ] && HARNESSES=(fuzz_wire_frame fuzz_int_hop fuzz_cc)
NICE=${NICE:-10}
COV=${COV:-1}
OUT=build/fuzz

case "$SECONDS_EACH" in
''|*[!0-9]*) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac

make -s -C fuzz all

summary=()
failed=0
for h in "${HARNESSES[@]}"; do
	[ "$SECONDS_EACH" -eq 0 ] && break
	if [ ! -x "$OUT/$h" ]; then
		echo "scripts/fuzz.sh: no harness $h (have: $(cd fuzz && ls fuzz_*.c | sed 's/\.c$//' | tr '\n' ' '))" >&2
		exit 2
	fi
	mkdir -p "$OUT/work/$h" "$OUT/artifacts/$h" "$OUT/logs"
	log="$OUT/logs/$h.log"
	echo "== $h: ${SECONDS_EACH}s (log: $log)"
	rc=0
	# shellcheck disable=SC2086
	nice -n "$NICE" "$OUT/$h" -max_total_time="$SECONDS_EACH" -print_final_stats=1 \
		-artifact_prefix="$OUT/artifacts/$h/" ${FUZZ_FLAGS:-} \
		"$OUT/work/$h" "$OUT/corpus/$h" >"$log" 2>&1 || rc=$?
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
	last=$(grep -E '^#[0-9]+.*cov: [0-9]+' "$log" | tail -1 || true)
	cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
	ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
	corp=$(sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p' <<<"$last")
	line=$(printf '%-16s runs %-11s exec/s %-7s cov %-5s ft %-6s corpus %s' \
		"$h" "${runs:-?}" "${eps:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}")
	if [ "$rc" -ne 0 ]; then
		failed=1
		line="$line  CRASH (exit $rc): $(ls "$OUT/artifacts/$h" | tr '\n' ' ')"
		grep -E 'ERROR:|runtime error|invariant violated|SUMMARY' "$log" | head -5 >&2 || true
	fi
	echo "$line"
	summary+=("$line")
done

if [ "$COV" != 0 ] && command -v llvm-profdata >/dev/null && command -v llvm-cov >/dev/null; then
	echo "== coverage of the C sources over the corpora (llvm-cov, no sanitizers)"
	make -s -C fuzz cov
	prof="$OUT/cov/profiles"
	rm -rf "$prof"
	mkdir -p "$prof"
	objs=()
	for h in "${HARNESSES[@]}"; do
		mkdir -p "$OUT/work/$h"
		LLVM_PROFILE_FILE="$prof/$h.profraw" \
			"$OUT/cov/$h" -runs=0 "$OUT/work/$h" "$OUT/corpus/$h" >/dev/null 2>&1 || true
		objs+=(-object "$OUT/cov/$h")
	done
	llvm-profdata merge -sparse "$prof"/*.profraw -o "$prof/all.profdata"
	# The first object is positional, the others -object.
	llvm-cov report "${objs[@]:1}" -instr-profile="$prof/all.profdata" \
		fastpath/cc/*.c include/hpccd/parse.h include/hpccd/siphash.h
fi

if [ ${#summary[@]} -gt 0 ]; then
	echo "== summary (${SECONDS_EACH}s each)"
	printf '%s\n' "${summary[@]}"
fi
exit "$failed"
