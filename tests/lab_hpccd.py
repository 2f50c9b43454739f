"""hpccd as the lab tests run it: the configuration every one of them starts from, the
daemon process in a host of the lab, and the Prometheus text it exposes.

Used by tests/integration/test_daemon_lab.py, test_daemon_owners.py, test_prometheus.py,
test_daemon.py and test_faults.py (``from lab_hpccd import ...``; tests/ is on the path, as
for conftest).
"""
from __future__ import annotations

import errno
import json
import os
import pathlib
import shutil
import signal
import subprocess
import textwrap
import time
from typing import Callable

ROOT = pathlib.Path(__file__).resolve().parents[1]
BUILT = ROOT / "build" / "ebpf"
HPCCD = shutil.which("hpccd") or str(ROOT / ".venv" / "bin" / "hpccd")


def daemon_toml(*, control_socket: str | pathlib.Path, metrics_address: str,
                components: list[str], key_file: str | pathlib.Path | None = None,
                rest: str = "") -> str:
    """The [daemon] table and the one interface eth0 of a lab host, with the built BPF
    objects; with `key_file`, the transport's integrity key, an ACK per 4 packets and
    probes per RTT; then `rest` (more tables, dedented)."""
    text = textwrap.dedent(f"""\
        [daemon]
        control_socket = "{control_socket}"
        metrics_address = "{metrics_address}"
        bpf_dir = "{BUILT}"
        components = {json.dumps(components)}

        [[interfaces]]
        name = "eth0"
        """)
    if key_file is not None:
        text += textwrap.dedent(f"""
            [transport]
            integrity_key_file = "{key_file}"
            ack_every = 4

            [probes]
            mode = "probe"
            """)
    return text + ("\n" + textwrap.dedent(rest) if rest else "")


class LabHpccd:
    """One hpccd in `host` of `lab` with configuration `toml`, its file and log named
    `name` in folder `d`.  Not started under systemd: NOTIFY_SOCKET is dropped."""

    def __init__(self, lab, host: str, d: pathlib.Path, name: str, toml: str,
                 sock: str | pathlib.Path):
        self.lab, self.host, self.sock = lab, host, str(sock)
        self.cfg = d / f"{name}.toml"
        self.cfg.write_text(toml)
        self.logf = open(d / f"{name}.log", "w+")
        env = dict(os.environ)
        env.pop("NOTIFY_SOCKET", None)
        self.proc = lab.popen(host, [HPCCD, "--config", str(self.cfg)], stdout=self.logf,
                              stderr=subprocess.STDOUT, env=env)

    def log(self) -> str:
        if not self.logf.closed:
            self.logf.flush()
        return pathlib.Path(self.logf.name).read_text()

    def status(self) -> dict | None:
        """The control socket's status, None while it does not answer."""
        from hpccd.agent.control import request
        try:
            return request(self.sock, "status", {})
        except Exception:
            return None

    def wait_ready(self, timeout: float = 60) -> dict:
        """The first status the daemon answers; RuntimeError (with the log) if it exits,
        AssertionError if it does not answer within `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"hpccd in {self.host} exited {self.proc.returncode}: "
                                   f"{self.log()}")
            st = self.status()
            if st is not None:
                return st
            assert time.monotonic() < deadline, f"hpccd in {self.host} not ready: {self.log()}"
            time.sleep(0.1)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Signal it and reap it (SIGKILL after 30 s); its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def close(self) -> None:
        self.stop(signal.SIGKILL)
        self.logf.close()


def start_when_free(make: Callable[[], LabHpccd], busy: str, timeout: float = 120) -> LabHpccd:
    """make() and wait until ready; while its log says `busy` (the TCP side's struct_ops,
    host-wide, held by another test run for a while), close it and try again."""
    deadline = time.monotonic() + timeout
    while True:
        h = make()
        try:
            h.wait_ready()
            return h
        except RuntimeError:
            h.close()
            if busy not in h.log() or time.monotonic() > deadline:
                raise
            time.sleep(2)
        except BaseException:
            h.close()
            raise


def samples(text: str) -> dict[str, list[tuple[dict, float]]]:
    """Prometheus exposition text -> {series name: [(labels, value), ...]}."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, list] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def prog_gone(prog_id: int, timeout: float = 10.0) -> bool:
    """Whether BPF program `prog_id` is gone within `timeout` seconds: the
    kernel frees a detached program after an RCU grace period."""
    from hpccd.bpf import loader as bpf

    deadline = time.monotonic() + timeout
    while True:
        try:
            bpf.Program.from_id(prog_id).close()
        except bpf.BpfError as e:
            if e.errno == errno.ENOENT:
                return True
            raise
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
