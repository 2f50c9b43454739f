#!/usr/bin/env bash
# hpccd set-up and entry point.  Run as root on a fresh Debian machine:
#
#   bash scripts/run.sh demo    set up, then run the main job
#   bash scripts/run.sh test    set up, then run the whole test suite
#   bash scripts/run.sh setup   set up only
#   bash scripts/run.sh bench   set up, then the C benchmarks (callgrind)
#   bash scripts/run.sh install     build tools, then install hpccd on this host
#   bash scripts/run.sh uninstall   remove what install placed (docs/install.md)
#   bash scripts/run.sh deb         set up, then build the Debian package (build/deb/)
#
# Set-up is idempotent: Debian packages are installed only when missing,
# the virtualenv (.venv) is refreshed only when pyproject.toml changed, and
# make rebuilds only what changed.  Extra arguments after "test" go to pytest.
#
# P4 tools (optional): with HPCCD_P4TOOLS_ARCHIVE=FILE, a relocatable build of
# p4c and BMv2 packed as a .tar.zst (one top folder holding bin/p4c-bm2-ss,
# bin/simple_switch, bin/simple_switch_CLI), set-up also installs the Debian
# packages those tools need at run time and unpacks the archive into
# build/p4tools (again only when the archive changed); "test" then points
# HPCCD_P4TOOLS at it unless HPCCD_P4TOOLS is already set (your own build).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

APT_PACKAGES=(
	clang llvm libbpf-dev libxdp-dev bpftool   # BPF programs (CO-RE) and their loader
	gcc make pkg-config libc6-dev              # C fast path and cffi modules
	iproute2 iperf3 ethtool                    # lab: namespaces, kernel TCP peers
	valgrind                                   # instruction-count benchmarks
	linux-perf                                 # scripts/perf_lab_split.py: where the lab's CPU goes
	systemd                                    # systemd-analyze verify of the unit file
	zlib1g-dev libisal-dev                     # CRC-32 of the transport (-lz, ISA-L)
	libclang-rt-14-dev                         # libFuzzer + sanitizer runtimes (fuzz/)
	debhelper dh-python python3-cffi python3-all-dev dpkg-dev fakeroot   # the Debian package
	python3-scapy python3-pyroute2 python3-prometheus-client             # ... its man pages
	prometheus                                 # the integration test of the metrics: a real server scrapes a lab
)

# Run-time needs of a p4c/BMv2 build (Debian 12), installed only with
# HPCCD_P4TOOLS_ARCHIVE: cpp for p4c-bm2-ss's preprocessor; simple_switch's
# shared libraries; python3-thrift and python3-six for simple_switch_CLI,
# a script for Debian's python3; zstd for tar --zstd.
P4_APT_PACKAGES=(
	cpp python3 python3-thrift python3-six zstd
	libthrift-0.17.0 libnanomsg5 libpcap0.8 libgmp10 libjsoncpp25 libxxhash0
	libboost-program-options1.74.0 libstdc++6 libgcc-s1 libc6
)
P4TOOLS_DIR=build/p4tools    # where the archive is unpacked (build/ is ignored by git)

# install: the virtualenv of Debian's own python3 (scripts/install.sh), with headers.
INSTALL_APT_PACKAGES=(python3 python3-venv python3-dev)

log() { printf '[hpccd setup] %s\n' "$*" >&2; }

need_root() {
	if [ "$(id -u)" -ne 0 ]; then
		echo "scripts/run.sh: run as root (it installs Debian packages; the lab needs root)" >&2
		exit 1
	fi
}

apt_setup() {
	local missing=() p
	for p in "${APT_PACKAGES[@]}" "$@"; do
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

# The archive named by HPCCD_P4TOOLS_ARCHIVE, or nothing: a missing archive is
# said and skipped (the P4 tests then skip with their reason), not an error.
p4tools_archive() {
	local a=${HPCCD_P4TOOLS_ARCHIVE:-}
	[ -n "$a" ] || return 0
	if [ ! -f "$a" ]; then
		log "HPCCD_P4TOOLS_ARCHIVE=$a: no such file; the P4 tools are not set up"
		return 0
	fi
	printf '%s\n' "$a"
}

# Unpack the archive into $P4TOOLS_DIR unless that copy came from the same
# archive (sha256 stamp); unpack beside it first, so a failed run leaves the
# previous copy or nothing, never half a tree.  Then check that each tool runs.
p4tools_setup() {
	local archive=$1 stamp=$P4TOOLS_DIR/.archive.sha256 want tmp top t
	want=$(sha256sum "$archive" | cut -d' ' -f1)
	if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
		log "unpacking $archive into $P4TOOLS_DIR"
		mkdir -p build
		rm -rf build/p4tools.unpack.*          # left by an interrupted run
		tmp=$(mktemp -d build/p4tools.unpack.XXXXXX)
		if ! tar --zstd -xf "$archive" -C "$tmp"; then
			rm -rf "$tmp"
			echo "scripts/run.sh: $archive: not a readable .tar.zst; $P4TOOLS_DIR left as it was" >&2
			exit 1
		fi
		top=("$tmp"/*)
		if [ ${#top[@]} -ne 1 ] || [ ! -d "${top[0]}/bin" ]; then
			rm -rf "$tmp"
			echo "scripts/run.sh: $archive: expected one top folder with bin/ inside; $P4TOOLS_DIR left as it was" >&2
			exit 1
		fi
		echo "$want" > "${top[0]}/.archive.sha256.new"
		rm -rf "$P4TOOLS_DIR"
		mv "${top[0]}" "$P4TOOLS_DIR"
		mv "$P4TOOLS_DIR/.archive.sha256.new" "$stamp"
		rm -rf "$tmp"
	fi
	for t in p4c-bm2-ss simple_switch; do
		if ! "$P4TOOLS_DIR/bin/$t" --version >/dev/null 2>&1; then
			echo "scripts/run.sh: $P4TOOLS_DIR/bin/$t --version fails (from $archive):" >&2
			"$P4TOOLS_DIR/bin/$t" --version >&2 || true
			exit 1
		fi
	done
	if ! /usr/bin/python3 -c 'import thrift, six' 2>/dev/null; then
		echo "scripts/run.sh: simple_switch_CLI needs Debian's python3 with python3-thrift and python3-six" >&2
		exit 1
	fi
}

setup() {
	local archive
	archive=$(p4tools_archive)
	if [ -n "$archive" ]; then
		apt_setup "${P4_APT_PACKAGES[@]}"
	else
		apt_setup
	fi
	venv_setup
	make -s PYTHON=.venv/bin/python all
	if [ -n "$archive" ]; then
		p4tools_setup "$archive"
	fi
}

# The P4 tests find the tools through HPCCD_P4TOOLS; a user's own setting wins.
p4tools_env() {
	if [ -z "${HPCCD_P4TOOLS:-}" ] && [ -x "$P4TOOLS_DIR/bin/simple_switch" ]; then
		export HPCCD_P4TOOLS=$ROOT/$P4TOOLS_DIR
	fi
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
setup) setup ;;
demo)  setup; exec .venv/bin/hpccctl demo "$@" ;;
test)  setup; p4tools_env; exec .venv/bin/python -m pytest "$@" ;;
bench) setup; exec bash scripts/bench_cc.sh "$@" ;;
install)   need_root; apt_setup "${INSTALL_APT_PACKAGES[@]}"; exec bash scripts/install.sh install ;;
uninstall) need_root; exec bash scripts/install.sh uninstall ;;
deb)   setup; exec bash scripts/build_deb.sh ;;
*)
	sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
	;;
esac
