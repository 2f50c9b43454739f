"""The errors a user meets with hpccd and hpccctl: each says what failed and
what to do, with a documented exit status, and never a Python traceback
(issue 17, "Errors a user meets").  Every case runs the real command.

Invariants protected:

- output into a pipe nobody reads (``hpccctl replay ... | head``, ``hpccctl
  lab status | head``): exit 141 (128 + SIGPIPE) and nothing on stderr;
- not root: ``hpccd`` names the control socket or the BPF object the kernel
  refused and says that root (the capability list) is needed; ``hpccctl
  recv``/``send`` say the same; ``hpccctl status`` on a socket it may not
  open says permission, not "is hpccd running?";
- ``recv`` on a queue a running daemon owns says who owns it and what to do;
- ``daemon.bpf_dir`` that does not exist: configuration refused (exit 2) at
  its line, by ``--check`` and by a start, never a fallback to another folder;
- ``--int probe`` without ``--key``: refused (exit 2) with why;
- a key file that other users can read: a warning naming the file and chmod;
  a private one: none;
- a component that fails in start() or stop(): one line each, no traceback;
- ``hpccctl flow`` shows dates, not epoch floats; ``hpccctl status`` shows no
  Python dict or list; ``flows`` and ``probes`` have help text;
- ``hpccctl send --daemon PEER`` takes PEER as the peer (not as the socket),
  and the transfer goes through the daemon.
"""
from __future__ import annotations

import os
import pathlib
import re
import socket
import subprocess
import tempfile
import textwrap
import time

import pytest

from test_daemon import (  # noqa: F401  (fixtures)
    FAKE_COMPONENT, HPCCCTL, HPCCD, ROOT, WAIT_S, built, config_text, daemons,
    workdir)

pytestmark = pytest.mark.integration

BUILT = ROOT / "build" / "ebpf"
TRACE = ROOT / "daemon" / "hpccd" / "traces" / "incast_7to1_100g.jsonl"
NOBODY = ["setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups"]
NEEDS_ROOT = ("needs root (CAP_BPF, CAP_PERFMON, CAP_NET_ADMIN, CAP_NET_RAW, CAP_SYS_ADMIN): "
              "run it with sudo")


def run(argv, timeout=60, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("stdin", subprocess.DEVNULL)
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)


def no_traceback(r) -> None:
    assert "Traceback" not in (r.stderr or "") + (r.stdout or "")


def into_closed_pipe(argv, timeout=120) -> subprocess.CompletedProcess:
    """`argv | head` where head has already gone: stdout is a pipe whose
    read end is closed, so the first write fails with EPIPE."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run(argv, stdout=w, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                           text=True, timeout=timeout)
    finally:
        os.close(w)
    return p


# ---- no root needed ------------------------------------------------------------------

def test_replay_into_a_closed_pipe_ends_quietly():
    r = into_closed_pipe([HPCCCTL, "replay", str(TRACE)])
    assert r.returncode == 141
    assert r.stderr == ""


def test_int_probe_without_key_is_refused():
    # no key, and the all-zero key that the XDP program reads as "no key"
    for key in ([], ["--key", "00" * 16]):
        r = run([HPCCCTL, "send", "10.199.0.2", "--bytes", "1k", "--int", "probe", *key])
        assert r.returncode == 2
        assert "hpccctl send: --int probe needs --key (the same on both ends)" in r.stderr
        assert "every probe is dropped" in r.stderr
        no_traceback(r)


def test_flows_and_probes_have_help_text():
    for cmd, words in (("flows", "one per line: id (for 'hpccctl flow ID')"),
                       ("probes", "per flow the probes sent, answered and lost")):
        r = run([HPCCCTL, cmd, "--help"])
        assert r.returncode == 0
        assert words in " ".join(r.stdout.split())
    top = run([HPCCCTL, "--help"]).stdout
    assert re.search(r"flows\s+the daemon's flows", top)
    assert re.search(r"probes\s+probe counts per flow", top)


def test_send_without_peer_says_so():
    r = run([HPCCCTL, "send", "--bytes", "1k"])
    assert r.returncode == 2
    assert "hpccctl send: PEER is required: the receiver's IPv4 address" in r.stderr


def _key_config(d: pathlib.Path, bpf_dir: str, key_mode: int) -> pathlib.Path:
    key = d / "tag.key"
    key.write_text(os.urandom(16).hex() + "\n")
    key.chmod(key_mode)
    cfg = d / "hpccd.toml"
    cfg.write_text(textwrap.dedent(f"""\
        [daemon]
        control_socket = "{d / 'ctl.sock'}"
        bpf_dir = "{bpf_dir}"

        [[interfaces]]
        name = "eth0"

        [transport]
        integrity_key_file = "{key}"
        """))
    return cfg


def test_bpf_dir_that_does_not_exist_is_refused_at_its_line(tmp_path):
    cfg = _key_config(tmp_path, "/nonexistent", 0o600)
    r = run([HPCCD, "--check", "--config", str(cfg)])
    assert r.returncode == 2
    assert (f"hpccd: configuration refused: {cfg}:3: daemon.bpf_dir: /nonexistent: no such "
            f"directory") in r.stderr
    # a folder without the objects: refused too, naming them (no fallback to build/ebpf)
    cfg = _key_config(tmp_path, str(tmp_path), 0o600)
    r = run([HPCCD, "--check", "--config", str(cfg)])
    assert r.returncode == 2
    assert f"{cfg}:3: daemon.bpf_dir: {tmp_path}: no xdp_host.bpf.o or tc_tracker.bpf.o" \
        in r.stderr
    no_traceback(r)


def test_key_file_readable_by_others_is_warned_about(tmp_path):
    cfg = _key_config(tmp_path, str(BUILT), 0o644)
    r = run([HPCCD, "--check", "--config", str(cfg)])
    assert r.returncode == 0, r.stderr
    key = tmp_path / "tag.key"
    assert (f"hpccd: warning: {cfg}:9: transport.integrity_key_file: {key} is readable or "
            f"writable by every user (mode 0644)") in r.stderr
    assert f"chmod 600 {key}" in r.stderr
    key.chmod(0o640)
    r = run([HPCCD, "--check", "--config", str(cfg)])
    assert "by its group (mode 0640)" in r.stderr
    key.chmod(0o600)
    r = run([HPCCD, "--check", "--config", str(cfg)])
    assert r.returncode == 0 and "warning" not in r.stderr


# ---- as another user (root switches to nobody) ----------------------------------------

need_root = pytest.mark.skipif(os.geteuid() != 0, reason="switching to user nobody needs root")


@need_root
def test_status_on_a_socket_it_may_not_open_says_permission(tmp_path):
    tmp_path.chmod(0o755)
    path = tmp_path / "ctl.sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        srv.bind(str(path))
        srv.listen(1)
        path.chmod(0o600)
        r = run([*NOBODY, HPCCCTL, "status", "--socket", str(path)])
    finally:
        srv.close()
    assert r.returncode == 1
    assert (f"hpccctl status: cannot reach the daemon at {path}: Permission denied (the "
            f"control socket is for root and the daemon's group: run as root)") in r.stderr
    assert "is hpccd running" not in r.stderr


@need_root
def test_hpccd_not_root_names_what_failed_and_says_root(netns_pair, tmp_path):
    ns, iface, _ = netns_pair.side("a")
    d = pathlib.Path(tempfile.mkdtemp(prefix="hpccd-u-"))
    try:
        d.chmod(0o755)                       # nobody may not create the socket here
        cfg = _key_config(d, str(BUILT), 0o600)
        cfg.write_text(cfg.read_text().replace('"eth0"', f'"{iface}"'))
        os.chmod(d / "tag.key", 0o644)       # readable by nobody; warned about
        os.chmod(cfg, 0o644)
        r = run(["ip", "netns", "exec", ns, *NOBODY, HPCCD, "--config", str(cfg)])
        assert r.returncode == 1
        assert (f"start failed: control socket {d / 'ctl.sock'}: Permission denied; hpccd "
                f"{NEEDS_ROOT}") in r.stderr
        no_traceback(r)
        # the socket's folder writable: the interfaces' owner records, in
        # root's /run/hpccd (hpccd.agent.ownership), are next, before anything is
        # loaded or attached
        sub = d / "run"
        sub.mkdir(mode=0o777)
        sub.chmod(0o777)
        cfg.write_text(cfg.read_text().replace(str(d / "ctl.sock"), str(sub / "ctl.sock")))
        r = run(["ip", "netns", "exec", ns, *NOBODY, HPCCD, "--config", str(cfg)])
        assert r.returncode == 1
        assert "start failed: [Errno 13] owner records /run/hpccd/owners: Permission denied" \
            in r.stderr and f"hpccd {NEEDS_ROOT}" in r.stderr, r.stderr
        no_traceback(r)
    finally:
        subprocess.run(["rm", "-rf", str(d)])


@need_root
def test_send_and_recv_not_root_say_root(netns_pair):
    ns, iface, _ = netns_pair.side("a")
    for argv in (["recv", "--timeout", "1"], ["send", netns_pair.ip_b, "--bytes", "1k"]):
        r = run(["ip", "netns", "exec", ns, *NOBODY, HPCCCTL, *argv, "--iface", iface])
        assert r.returncode == 1
        assert "Operation not permitted" in r.stderr
        assert f"hpccctl {argv[0]} {NEEDS_ROOT}" in r.stderr, r.stderr
        no_traceback(r)


@need_root
def test_lab_and_experiment_not_root_say_root():
    """The subcommands that build namespaces refuse before touching anything, in one
    wording (hpccd.cli.errors.not_root), with exit status 2."""
    for argv, prog in ((["lab", "status"], "hpccctl lab"),
                       (["lab", "prometheus", "nolab"], "hpccctl lab prometheus"),
                       (["lab", "hook", "nolab", "h1"], "hpccctl lab hook"),
                       (["experiment", "incast"], "hpccctl experiment")):
        r = run([*NOBODY, HPCCCTL, *argv])
        assert r.returncode == 2, (argv, r.stderr)
        assert r.stderr == f"{prog}: needs root (network namespaces)\n"
        no_traceback(r)


# ---- with a running daemon ------------------------------------------------------------

def transport_config(d: pathlib.Path, iface: str) -> str:
    return textwrap.dedent(f"""\
        [daemon]
        control_socket = "{d / 'ctl.sock'}"
        metrics_address = ""
        bpf_dir = "{BUILT}"
        components = ["transport"]

        [[interfaces]]
        name = "{iface}"
        queues = [0]

        [transport]
        integrity_key_file = "{d / 'tag.key'}"

        [hpcc]
        T_ns = 300000
        line_rate_bps = 1000000000
        """)


def test_recv_on_the_daemons_queue_status_and_send_through_it(netns_pair, workdir, daemons):
    pair = netns_pair
    (workdir / "tag.key").chmod(0o600)
    (workdir / "hpccd.toml").write_text(transport_config(workdir, pair.va))
    h = daemons()
    h.ready()
    # recv on the queue the daemon's engine holds
    r = run(["ip", "netns", "exec", pair.a, HPCCCTL, "recv", "--iface", pair.va,
             "--queue", "0", "--timeout", "2"])
    assert r.returncode == 1
    assert "Device or resource busy" in r.stderr
    assert (f"another AF_XDP socket owns {pair.va} queue 0, typically a running hpccd with "
            f"the transport component") in r.stderr
    assert "use another --queue, or 'hpccctl send PEER --daemon'" in r.stderr
    no_traceback(r)
    # status: the transport's engines on lines of their own, no Python dict or list
    st = h.ctl("status").stdout
    assert not re.search(r"[{\[]'", st), st
    assert re.search(r"^  transport engines\[0\]: engine=\S+, running=yes, zerocopy=(yes|no), "
                     r"rx_frames=\d+", st, re.M), st
    # send --daemon before PEER: PEER is the peer, and the flow goes through the
    # daemon (at the default socket path, which a private /run points at ours)
    recv = pair.popen("b", [HPCCCTL, "recv", "--iface", pair.vb, "--timeout", "60",
                            "--key", (workdir / "tag.key").read_text().strip()],
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    inner = (f"mount -t tmpfs hpccdt /run && mkdir -p /run/hpccd-daemon && "
             f"ln -s {workdir / 'ctl.sock'} /run/hpccd-daemon/control.sock && "
             f"exec {HPCCCTL} send --daemon {pair.ip_b} --bytes 200k --timeout 60")
    r = run(["ip", "netns", "exec", pair.a, "unshare", "--mount", "--propagation", "private",
             "sh", "-c", inner], timeout=90)
    assert r.returncode == 0, r.stderr
    m = re.match(rf"sent 200000 bytes to {re.escape(pair.ip_b)} \(hpcc, INT \w+\) "
                 rf"through hpccd .*crc32 ([0-9a-f]{{8}})$", r.stdout.strip())
    assert m, r.stdout
    out, err = recv.communicate(timeout=90)
    assert recv.returncode == 0, err
    assert f"received 200000 bytes from {pair.ip_a}" in out
    assert out.strip().endswith(f"crc32 {m.group(1)}"), (out, r.stdout)
    assert h.stop() == 0


BROKEN_STOP = FAKE_COMPONENT + '''

class BadStop(Fake):
    def stop(self):
        super().stop()
        raise RuntimeError("stop broken on purpose")
'''


def test_component_start_and_stop_failures_are_one_line(netns_pair, workdir, daemons):
    (workdir / "hpccd_testcomp.py").write_text(BROKEN_STOP)
    cfg = workdir / "hpccd.toml"
    cfg.write_text(config_text(netns_pair.va, workdir).replace("hpccd_testcomp:Fake",
                                                               "hpccd_testcomp:Broken"))
    h = daemons()
    assert h.proc.wait(WAIT_S) == 1
    log = h.log()
    assert "start failed: broken on purpose" in log
    assert "Traceback" not in log
    cfg.write_text(config_text(netns_pair.va, workdir).replace("hpccd_testcomp:Fake",
                                                               "hpccd_testcomp:BadStop"))
    h = daemons()
    h.ready()
    # (meanwhile: a flow of the fake component, with dates rather than epoch floats)
    fid = h.ctl_json("flows")[0]["id"]
    flow = h.ctl_json("flow", str(fid))
    fl = h.ctl("flow", str(fid)).stdout
    assert not re.search(r"\de[+-]\d", fl), fl
    wall = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(flow["started_wall"]))
    assert re.search(rf"^started\s+{wall}$", fl, re.M), fl
    assert re.search(r"^updated\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", fl, re.M), fl
    assert h.stop() == 1
    log = h.log()
    assert "component hpccd_testcomp:BadStop: stop failed: stop broken on purpose" in log
    assert "Traceback" not in log


def test_lab_status_into_a_closed_pipe_ends_quietly(lab):
    name = lab("dumbbell").name             # only ours: other sessions' labs come and go
    r = into_closed_pipe([HPCCCTL, "lab", "status", name])
    assert r.returncode == 141
    assert r.stderr == ""
