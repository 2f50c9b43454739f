#!/usr/bin/env bash
# hpccd set-up and entry point.  Run as root on a fresh Debian machine:
#
#   bash scripts/run.sh demo    set up, then run the main job
#   bash scripts/run.sh test    set up, then run the whole test suite
#   bash scripts/run.sh setup   set up only
#   bash scripts/run.sh bench   set up, then the C benchmarks (callgrind)
#
# Set-up is idempotent: Debian packages are installed only when missing,
# the virtualenv (.venv) is refreshed only when pyproject.toml changed, and
# make rebuilds only what changed.  Extra arguments after "test" go to pytest.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

APT_PACKAGES=(
	clang llvm libbpf-dev libxdp-dev bpftool   # BPF programs (CO-RE) and their loader
	gcc make pkg-config libc6-dev              # C fast path and cffi modules
	iproute2 iperf3 ethtool                    # lab: namespaces, kernel TCP peers
	valgrind                                   # instruction-count benchmarks
	systemd                                    # systemd-analyze verify of the unit file
	zlib1g-dev libisal-dev                     # CRC-32 of the transport (-lz, ISA-L)
	libclang-rt-14-dev                         # libFuzzer + sanitizer runtimes (fuzz/)
)

log() { printf '[hpccd setup] %s\n' "$*" >&2; }

need_root() {
	if [ "$(id -u)" -ne 0 ]; then
		echo "scripts/run.sh: run as root (it installs Debian packages; the lab needs root)" >&2
		exit 1
	fi
}

apt_setup() {
	local missing=() p
	for p in "${APT_PACKAGES[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' \
			|| missing+=("$p")
	done
	# A Python without venv or headers (Debian's own python3) needs these.
	if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
		missing+=(python3-venv)
	fi
	if ! python3 -c 'import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' 2>/dev/null; then
		missing+=(python3-dev)
	fi
	if [ ${#missing[@]} -gt 0 ]; then
		need_root
		log "installing Debian packages: ${missing[*]}"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -q
		apt-get install -y -q --no-install-recommends "${missing[@]}"
	fi
}

venv_setup() {
	local stamp=.venv/.pyproject.sha256 want
	want=$(sha256sum pyproject.toml | cut -d' ' -f1)
	if [ ! -x .venv/bin/python ]; then
		log "creating .venv"
		python3 -m venv .venv
	fi
	if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
		log "installing Python packages from pyproject.toml"
		.venv/bin/python -m pip install -q --upgrade pip
		.venv/bin/python -m pip install -q -e '.[test]'
		echo "$want" > "$stamp"
	fi
}

setup() {
	apt_setup
	venv_setup
	make -s PYTHON=.venv/bin/python all
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
setup) setup ;;
demo)  setup; exec .venv/bin/hpccctl demo "$@" ;;
test)  setup; exec .venv/bin/python -m pytest "$@" ;;
bench) setup; exec bash scripts/bench_cc.sh "$@" ;;
*)
	sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
	;;
esac
