#!/usr/bin/env bash
# Install hpccd on this host, or remove it again (docs/install.md):
#
#   sudo bash scripts/run.sh install      (set-up of the build tools, then this script)
#   sudo bash scripts/install.sh install | uninstall
#
# install places, under PREFIX (default /usr/local):
#   lib/hpccd/venv/            a virtualenv of Debian's python3 with hpccd built by
#                              `pip install .` (the cffi modules and the BPF objects
#                              inside the package) and its Python dependencies
#   lib/hpccd/bpf              -> the package's BPF objects (daemon.bpf_dir)
#   bin/hpccd, bin/hpccctl     -> the virtualenv's programs
#   share/doc/hpccd/           README.md, CHANGELOG.md and docs/*.md
#   share/man/man8/hpccd.8, share/man/man1/hpccctl.1   (hpccd.cli.manpage)
#   share/bash-completion/completions/hpccctl, hpccd   (hpccd.cli.completion)
# and the unit in UNITDIR (default /etc/systemd/system/hpccd.service, its paths
# pointed at PREFIX) and an example configuration in
# SYSCONFDIR/hpccd/hpccd.toml.example (SYSCONFDIR default /etc).  Your own
# /etc/hpccd/hpccd.toml and key are never written or removed.
#
# Every file and folder it creates is listed in lib/hpccd/installed; uninstall
# stops and disables the unit if it runs, removes exactly what that list
# names (folders only once empty) and nothing else.
#
# INSTALL_PYTHON (default /usr/bin/python3) is the interpreter of the virtualenv:
# not one under /home or /root, which the unit's ProtectHome=yes hides.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PREFIX=${PREFIX:-/usr/local}
SYSCONFDIR=${SYSCONFDIR:-/etc}
UNITDIR=${UNITDIR:-/etc/systemd/system}
PY=${INSTALL_PYTHON:-/usr/bin/python3}
LIB=$PREFIX/lib/hpccd
VENV=$LIB/venv
MANIFEST=$LIB/installed
DOC=$PREFIX/share/doc/hpccd
UNIT=$UNITDIR/hpccd.service
EXAMPLE=$SYSCONFDIR/hpccd/hpccd.toml.example

log() { printf '[hpccd install] %s\n' "$*" >&2; }
die() { printf 'scripts/install.sh: %s\n' "$*" >&2; exit 1; }

systemd_running() { [ -d /run/systemd/system ] && command -v systemctl >/dev/null; }

# Record a path we created (a folder only if it did not exist before).
created=()
mkdir_rec() {
	local d=$1 missing=()
	while [ ! -d "$d" ]; do missing=("$d" "${missing[@]}"); d=$(dirname "$d"); done
	for d in "${missing[@]}"; do mkdir -m 0755 "$d"; created+=("$d/"); done
}
put() {   # SRC DEST [MODE]: copy a file
	mkdir_rec "$(dirname "$2")"
	install -m "${3:-0644}" "$1" "$2"
	created+=("$2")
}
link() {   # TARGET LINK
	mkdir_rec "$(dirname "$2")"
	ln -sfn "$1" "$2"
	created+=("$2")
}

do_install() {
	[ -x "$PY" ] || die "INSTALL_PYTHON=$PY: no such interpreter (Debian: apt-get install python3 python3-venv python3-dev)"
	[ -e "$MANIFEST" ] && die "hpccd is installed under $PREFIX already ($MANIFEST): uninstall first"
	for p in "$UNIT" "$EXAMPLE" "$PREFIX/bin/hpccd" "$PREFIX/bin/hpccctl"; do
		[ -e "$p" ] || [ -L "$p" ] && die "$p exists and is not from this installer: not replacing it"
	done
	mkdir_rec "$LIB"
	log "virtualenv $VENV ($PY), pip install $ROOT (builds the cffi modules and BPF objects)"
	"$PY" -m venv "$VENV"
	created+=("$VENV/")
	"$VENV/bin/python" -m pip install -q --upgrade pip
	"$VENV/bin/python" -m pip install -q "$ROOT"
	local pkg
	pkg=$("$VENV/bin/python" -c 'import hpccd, os; print(os.path.dirname(hpccd.__file__))')
	[ -f "$pkg/bpf/xdp_host.bpf.o" ] || die "the installed package has no BPF objects in $pkg/bpf"
	link "$pkg/bpf" "$LIB/bpf"
	link "$VENV/bin/hpccd" "$PREFIX/bin/hpccd"
	link "$VENV/bin/hpccctl" "$PREFIX/bin/hpccctl"
	local f tmp
	tmp=$(mktemp)
	"$VENV/bin/python" -m hpccd.cli.manpage hpccd >"$tmp"
	put "$tmp" "$PREFIX/share/man/man8/hpccd.8"
	"$VENV/bin/python" -m hpccd.cli.manpage hpccctl >"$tmp"
	put "$tmp" "$PREFIX/share/man/man1/hpccctl.1"
	"$VENV/bin/python" -m hpccd.cli.completion >"$tmp"
	put "$tmp" "$PREFIX/share/bash-completion/completions/hpccctl"
	link hpccctl "$PREFIX/share/bash-completion/completions/hpccd"
	for f in "$ROOT"/README.md "$ROOT"/CHANGELOG.md "$ROOT"/docs/*.md; do
		put "$f" "$DOC/$(basename "$f")"
	done
	sed -e "s|/usr/bin/hpccd|$PREFIX/bin/hpccd|g" -e "s|/usr/share/doc/hpccd|$DOC|g" \
		-e "s|/usr/lib/hpccd/bpf|$LIB/bpf|g" -e "s|/etc/hpccd/|$SYSCONFDIR/hpccd/|g" \
		"$ROOT/systemd/hpccd.service" >"$tmp"
	put "$tmp" "$UNIT"
	sed -e "s|/usr/lib/hpccd/bpf|$LIB/bpf|g" "$ROOT/systemd/hpccd.toml" >"$tmp"
	put "$tmp" "$EXAMPLE"
	rm -f "$tmp"
	printf '%s\n' "${created[@]}" "$MANIFEST" >"$MANIFEST"
	systemd_running && systemctl daemon-reload || true
	"$PREFIX/bin/hpccd" --version >/dev/null || die "$PREFIX/bin/hpccd does not run"
	log "installed: $PREFIX/bin/hpccd, $PREFIX/bin/hpccctl, $UNIT, $EXAMPLE, $DOC"
	log "next: cp $EXAMPLE $SYSCONFDIR/hpccd/hpccd.toml, edit it (docs/configuration.md), then systemctl enable --now hpccd"
}

do_uninstall() {
	[ -f "$MANIFEST" ] || die "no $MANIFEST: hpccd is not installed under $PREFIX by this script"
	if systemd_running && systemctl is-active --quiet hpccd 2>/dev/null; then
		log "stopping hpccd"
		systemctl disable --now hpccd || true
	elif systemd_running; then
		systemctl disable hpccd 2>/dev/null || true
	fi
	local p dirs=()
	while IFS= read -r p; do
		case "$p" in
		"$VENV/") rm -rf "$VENV" ;;
		*/) dirs=("${p%/}" "${dirs[@]}") ;;       # deepest last listed: remove first
		*) rm -f "$p" ;;
		esac
	done <"$MANIFEST"
	for p in "${dirs[@]}"; do
		rmdir "$p" 2>/dev/null || log "kept $p: not empty (files that are not the installer's)"
	done
	systemd_running && systemctl daemon-reload || true
	log "removed hpccd from $PREFIX"
}

case "${1:-}" in
install) do_install ;;
uninstall) do_uninstall ;;
*) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
