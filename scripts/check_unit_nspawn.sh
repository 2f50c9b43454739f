#!/usr/bin/env bash
# systemd/hpccd.service under a real systemd as PID 1, with its whole sandbox
# (ProtectSystem=strict, the capability set, the system call filter ...):
# a Debian 12 tree made by debootstrap from Debian's packages, booted with
# systemd-nspawn, running this checkout's hpccd with Debian's python3.
#
#   sudo bash scripts/check_unit_nspawn.sh [TREE]     (default /var/tmp/hpccd-nspawn)
#
# HPCCD_UNIT=FILE checks another unit file instead of systemd/hpccd.service (e.g.
# an older one, to see a check fail).  HPCCD_DEB=FILE installs that Debian
# package (scripts/build_deb.sh) in the tree with apt instead, and checks its
# programs and unit.
#
# Checks, each printed as "ok: ..." or "FAIL: ..." (exit status 1 on a failure):
#   - systemd-analyze verify of the installed unit inside the container;
#   - start with the transport and tcp_side components: active, READY reached,
#     hpccctl status answers, the TCP congestion controls registered and the
#     lock /run/hpccd/tcp_cc.lock written under ProtectSystem=strict;
#   - stop: inactive, nothing left on the interface, the congestion controls gone;
#   - a configured interface that does not exist: failed with exit status 3 and
#     not restarted (RestartPreventExitStatus);
#   - a refused configuration: exit status 2, not restarted.
# Needs root, debootstrap and systemd-container (installed when missing), and the
# checkout set up (scripts/run.sh setup: the cffi modules and BPF objects).
# The container shares the host's /run/hpccd, so that the host-wide lock of the
# TCP congestion controls is one lock for it and for the host's daemons.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TREE=${1:-/var/tmp/hpccd-nspawn}
R=$TREE/root
MACHINE=hpccdnsp
fails=0

log() { printf '[check_unit_nspawn] %s\n' "$*" >&2; }
ok() { printf 'ok: %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*"; fails=$((fails + 1)); }

[ "$(id -u)" -eq 0 ] || { echo "check_unit_nspawn.sh: run as root" >&2; exit 2; }
for p in debootstrap systemd-container; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || {
		log "installing $p"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$p" >&2
	}
done
for o in xdp_host tc_tracker tcp_hpcc tcp_dctcp; do
	[ -f "$ROOT/build/ebpf/$o.bpf.o" ] || { echo "build/ebpf/$o.bpf.o missing: bash scripts/run.sh setup" >&2; exit 2; }
done

if [ ! -x "$R/usr/bin/python3" ]; then
	log "debootstrap bookworm into $R (a few minutes)"
	mkdir -p "$TREE"
	debootstrap --variant=minbase \
		--include=systemd,systemd-sysv,dbus,iproute2,procps,python3,libbpf1,libxdp1,zlib1g,python3-cffi-backend,python3-pyroute2,python3-prometheus-client,python3-scapy \
		bookworm "$R" http://deb.debian.org/debian >"$TREE/debootstrap.log" 2>&1 \
		|| { echo "debootstrap failed: $TREE/debootstrap.log" >&2; exit 1; }
fi

mkdir -p "$R/etc/hpccd" "$R$ROOT" "$R/etc/systemd/system/multi-user.target.wants"
if [ -n "${HPCCD_DEB:-}" ]; then
	log "installing $HPCCD_DEB into $R with apt"
	rm -f "$R/etc/systemd/system/hpccd.service" "$R/usr/bin/hpccd" "$R/usr/bin/hpccctl"
	rm -rf "$R/usr/lib/hpccd"
	cp "$HPCCD_DEB" "$R/tmp/hpccd.deb"
	cp /etc/apt/sources.list.d/debian.sources "$R/etc/apt/sources.list.d/" 2>/dev/null || true
	chroot "$R" sh -c 'apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends /tmp/hpccd.deb' \
		>"$TREE/apt.log" 2>&1 || { echo "apt-get install of $HPCCD_DEB failed: $TREE/apt.log" >&2; exit 1; }
	rm -f "$R/tmp/hpccd.deb"
else
log "installing the checkout's hpccd, the unit, the BPF objects and a configuration into $R"
dpkg --root="$R" -s hpccd >/dev/null 2>&1 && chroot "$R" dpkg --purge hpccd >/dev/null
mkdir -p "$R/usr/lib/hpccd/bpf"
cp "$ROOT"/build/ebpf/{xdp_host,tc_tracker,tcp_hpcc,tcp_dctcp}.bpf.o "$R/usr/lib/hpccd/bpf/"
for p in hpccd:hpccd.agent.main hpccctl:hpccd.cli.main; do
	cat >"$R/usr/bin/${p%%:*}" <<-EOF
	#!/usr/bin/python3
	# this checkout's hpccd with Debian's python3 and Python packages
	import sys
	sys.path.insert(0, "$ROOT/daemon")
	from ${p#*:} import main
	sys.exit(main())
	EOF
	chmod 755 "$R/usr/bin/${p%%:*}"
done
cp "${HPCCD_UNIT:-$ROOT/systemd/hpccd.service}" "$R/etc/systemd/system/hpccd.service"
fi
rm -f "$R/etc/systemd/system/multi-user.target.wants/hpccd.service"    # started by the checks
# Test scaffolding: an address on the container's veth end before hpccd starts.
cat >"$R/etc/systemd/system/test-host0.service" <<'EOF'
[Unit]
Description=address host0 (check_unit_nspawn.sh)
Before=hpccd.service
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/sbin/ip link set host0 up
ExecStart=/usr/sbin/ip addr add 10.231.0.2/24 dev host0
[Install]
WantedBy=multi-user.target
EOF
ln -sf /etc/systemd/system/test-host0.service "$R/etc/systemd/system/multi-user.target.wants/"
head -c16 /dev/urandom >"$R/etc/hpccd/tag.key"
chmod 600 "$R/etc/hpccd/tag.key"
config() {   # INTERFACE [EXTRA]
	cat >"$R/etc/hpccd/hpccd.toml" <<-EOF
	[daemon]
	components = ["transport", "tcp_side"]
	bpf_dir = "/usr/lib/hpccd/bpf"
	metrics_address = "127.0.0.1:9477"

	[[interfaces]]
	name = "$1"
	queues = [0]

	[transport]
	integrity_key_file = "/etc/hpccd/tag.key"

	[limits]
	umem_bytes = 4194304   # within an RLIMIT_MEMLOCK the container may not lift
	${2:-}
	EOF
}
config host0

mkdir -p /run/hpccd
run_mode=$(stat -c %a /run/hpccd)
log "booting $MACHINE"
systemd-nspawn -D "$R" --boot --register=no --keep-unit --machine="$MACHINE" --network-veth \
	--bind-ro="$ROOT" --bind=/run/hpccd \
	--capability=CAP_BPF,CAP_PERFMON,CAP_NET_ADMIN,CAP_NET_RAW,CAP_SYS_ADMIN \
	--system-call-filter=bpf --console=passive >"$TREE/nspawn.log" 2>&1 &
NSPAWN=$!
cleanup() {
	if kill -0 "$NSPAWN" 2>/dev/null; then
		kill "$NSPAWN" 2>/dev/null || true     # SIGTERM: the container powers off
		for _ in $(seq 100); do kill -0 "$NSPAWN" 2>/dev/null || break; sleep 0.2; done
		kill -9 "$NSPAWN" 2>/dev/null || true
	fi
	chmod "$run_mode" /run/hpccd 2>/dev/null || true    # RuntimeDirectoryMode applied to it
}
trap cleanup EXIT
leader=""
for _ in $(seq 150); do
	leader=$(pgrep -P "$NSPAWN" | head -1 || true)
	if [ -n "$leader" ] && nsenter -t "$leader" -a systemctl is-system-running --wait >/dev/null 2>&1; then
		break
	fi
	sleep 0.2
done
[ -n "$leader" ] || { echo "the container did not boot: $TREE/nspawn.log" >&2; exit 1; }
in_c() { nsenter -t "$leader" -a "$@"; }
show() { in_c systemctl show -p "$1" --value hpccd; }

unit_path=$(in_c systemctl show -p FragmentPath --value hpccd)
out=$(in_c systemd-analyze verify --man=no "$unit_path" 2>&1) && [ -z "$out" ] \
	&& ok "systemd-analyze verify $unit_path: no warning" || fail "systemd-analyze verify: $out"

# 1. start and stop under the sandbox.  The TCP congestion controls are host-wide, and
# the lock is shared with the host's daemons (tests of other checkouts): wait for it.
if ! flock -w 300 /run/hpccd/tcp_cc.lock true; then
	fail "another daemon on this host has owned the TCP congestion controls for 5 minutes (pid $(cat /run/hpccd/tcp_cc.lock))"
fi
if in_c systemctl start hpccd && [ "$(show ActiveState)" = active ]; then
	ok "started: $(show StatusText)"
else
	fail "start: $(in_c journalctl -u hpccd -n 20 --no-pager)"
fi
in_c hpccctl status >/dev/null 2>&1 && ok "hpccctl status answers" || fail "hpccctl status: $(in_c hpccctl status 2>&1)"
grep -qw hpcc /proc/sys/net/ipv4/tcp_available_congestion_control \
	&& ok "tcp_side registered the congestion controls" || fail "no 'hpcc' congestion control"
[ "$(cat /run/hpccd/tcp_cc.lock 2>/dev/null)" = "$(show MainPID)" ] \
	&& ok "/run/hpccd/tcp_cc.lock written by the daemon under ProtectSystem=strict" \
	|| fail "tcp_cc.lock: '$(cat /run/hpccd/tcp_cc.lock 2>/dev/null)' != MainPID $(show MainPID)"
# What ProtectSystem=strict leaves writable for the daemon, as its mount table says.
mi=$(in_c cat "/proc/$(show MainPID)/mountinfo")
mnt_opts() { awk -v t="$1" '$5 == t { print $6 }' <<<"$mi" | tail -1; }
case "$(mnt_opts /run/hpccd)" in
rw*) ok "/run/hpccd is writable for the daemon (RuntimeDirectory)" ;;
*) fail "/run/hpccd is not a writable mount for the daemon: '$(mnt_opts /run/hpccd)'" ;;
esac
case "$(mnt_opts /run)" in
ro*) ok "/run itself is read-only for the daemon (ProtectSystem=strict)" ;;
*) echo "note: /run is writable for the daemon on this systemd ($(in_c systemctl --version | head -1)," \
	"ProtectKernelTunables=yes undoes the read-only /run inside systemd-nspawn), so an older unit's" \
	"read-only failure cannot be reproduced here" ;;
esac
# The same promise without that quirk: a transient service with only ProtectSystem=strict
# and the unit's RuntimeDirectory= lines may write /run/hpccd (the lock) but not /run.
rd=()
while IFS= read -r line; do rd+=(-p "$line"); done \
	< <(in_c cat "$unit_path" | grep -E '^RuntimeDirectory(Preserve|Mode)?=')
if in_c systemd-run --wait --quiet -p ProtectSystem=strict "${rd[@]}" sh -c \
	'touch /run/hpccd/.rw-check && rm /run/hpccd/.rw-check && ! touch /run/.rw-check 2>/dev/null'; then
	ok "ProtectSystem=strict with the unit's RuntimeDirectory=: /run/hpccd writable, /run read-only"
else
	fail "ProtectSystem=strict with the unit's RuntimeDirectory= (${rd[*]}): /run/hpccd not writable, or /run writable"
fi
in_c systemctl stop hpccd
[ "$(show ActiveState)" = inactive ] && [ "$(show Result)" = success ] \
	&& ok "stopped cleanly" || fail "stop: $(show ActiveState) $(show Result)"
in_c ip -d link show host0 | grep -q 'xdp' && fail "a program left on host0" || ok "nothing left on host0"
grep -qw hpcc /proc/sys/net/ipv4/tcp_available_congestion_control \
	&& fail "'hpcc' still registered after stop" || ok "congestion controls unregistered"

# 2. failures that a restart cannot fix: not retried
check_no_retry() {   # WHAT STATUS
	in_c systemctl reset-failed hpccd 2>/dev/null || true
	in_c systemctl start hpccd 2>/dev/null || true
	sleep 5                                       # RestartSec=2s: a retry would have come
	local st res n
	st=$(show ExecMainStatus); res=$(show Result); n=$(show NRestarts)
	if [ "$st" = "$2" ] && [ "$res" = exit-code ] && [ "$n" = 0 ]; then
		ok "$1: exit status $st, not restarted"
	else
		fail "$1: ExecMainStatus=$st Result=$res NRestarts=$n"
	fi
}
config nosuchif0
check_no_retry "missing interface" 3
config host0 $'\n[hpcc]\neta = 0'
check_no_retry "refused configuration" 2
in_c journalctl -u hpccd --no-pager | grep -q Traceback && fail "a traceback in the journal" \
	|| ok "no traceback in the journal"

[ "$fails" -eq 0 ] && echo "all checks passed" || { echo "$fails check(s) failed"; exit 1; }
