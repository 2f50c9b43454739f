#!/usr/bin/env bash
# Run every experiment with every algorithm and copy the summaries and plots
# into docs/results/ (what docs/results.md shows).  Root; a few minutes on
# the two-core lab machine, which must be otherwise idle for the figures to
# be the algorithms' (each summary says whether the link or the CPU was the
# bottleneck).
#
#   sudo bash scripts/results.sh [ALGOS]
set -euo pipefail
cd "$(dirname "$0")/.."
ALGOS=${1:-hpcc,rx-hpcc,hpcc-probe,dctcp,ldcp,tcp-hpcc,tcp-dctcp,cubic,bbr}
OUT=results/full-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT" docs/results
for exp in incast mice long-short fairness txrate-vs-rxrate; do
	echo "== $exp" >&2
	.venv/bin/hpccctl experiment "$exp" --algos "$ALGOS" --out "$OUT"
done
for d in "$OUT"/*/; do
	name=$(basename "$d")
	exp=${name%-20*}
	mkdir -p "docs/results/$exp"
	cp "$d"/summary.txt "$d"/*.png "docs/results/$exp/"
done
echo "summaries and plots copied to docs/results/ (from $OUT)" >&2
