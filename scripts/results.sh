#!/usr/bin/env bash
# The HPCC paper's evaluation in the lab, every experiment, and its report:
# docs/results.md with its plots in docs/results/<stage>/ (hpccctl reproduce,
# docs/experiments.md "The whole set").  Root; about half an hour on the
# two-core lab machine, which must be otherwise idle for the figures to be
# the algorithms' (the report gives the load average of every stage, and
# each row says whether the link or the CPU was the bottleneck).  Ctrl-C
# stops it without leaving a lab behind; the stages that finished are in
# the report.
#
#   sudo bash scripts/results.sh [ALGOS] [more hpccctl reproduce options]
set -euo pipefail
cd "$(dirname "$0")/.."
args=()
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
	args+=(--algos "$1")
	shift
fi
exec .venv/bin/hpccctl reproduce "${args[@]}" --out results --report docs/results.md "$@"
