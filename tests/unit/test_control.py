"""The control socket (hpccd.agent.control) and hpccctl's side of it
(hpccd.agent.control_client), without a daemon: a handler stands in for it.

Invariants protected: one JSON request, one JSON answer; malformed,
unknown and oversized requests get an error answer and the server keeps
serving; a handler's exception does not kill the server; the socket is
mode 0660; a dead daemon's socket file is replaced, a live one's is not
taken over; hpccctl prints tables, --json prints the daemon's result, and a
refusal exits 1 with the daemon's message.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import selectors
import socket
import stat
import threading

import pytest

from hpccd.agent import control, control_client


class Server:
    def __init__(self, path, handler):
        self.sel = selectors.DefaultSelector()
        self.srv = control.ControlServer(str(path), handler, self.sel)
        self.srv.open()
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.loop, daemon=True)
        self.t.start()

    def loop(self):
        while not self.stop.is_set():
            for key, mask in self.sel.select(0.05):
                key.data(mask)

    def close(self):
        self.stop.set()
        self.t.join(5)
        self.srv.close()


def _handler(cmd, args):
    if cmd == "status":
        return {"hello": "world"}
    if cmd == "flow":
        if args.get("id") == 7:
            return {"id": 7, "kind": "native", "extra": {"x": 1}}
        raise control.ControlError(f"no flow {args.get('id')}")
    if cmd == "set":
        raise RuntimeError("boom")
    if cmd == "flows":
        return [{"id": 1, "kind": "tcp", "role": "sender", "algorithm": "hpcc", "peer": "default",
                 "saddr": "10.0.0.1", "sport": 5201, "daddr": "10.0.0.2", "dport": 40000,
                 "window_bytes": 12500.0, "rate_bps": 1e9, "U": 0.93, "alpha": None,
                 "rtt_s": 85e-6, "bytes_sent": 123456789, "retx_packets": 2, "age_s": 1.5}]
    return None


@pytest.fixture
def server(tmp_path):
    s = Server(tmp_path / "run" / "ctl.sock", _handler)
    yield s
    s.close()


def _raw(path, data: bytes) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
        c.settimeout(5)
        c.connect(str(path))
        c.sendall(data)
        buf = b""
        while True:
            d = c.recv(65536)
            if not d:
                break
            buf += d
    return json.loads(buf)


def test_requests_and_errors(server):
    p = server.srv.path
    assert control.request(p, "status") == {"hello": "world"}
    assert control.request(p, "flow", {"id": 7})["kind"] == "native"
    with pytest.raises(control.ControlError, match="no flow 8"):
        control.request(p, "flow", {"id": 8})
    with pytest.raises(control.ControlError, match="internal error"):
        control.request(p, "set", {})
    assert "not a JSON request" in _raw(p, b"{nope\n")["error"]
    assert "unknown command" in _raw(p, b'{"cmd": "reboot"}\n')["error"]
    assert "JSON object" in _raw(p, b'[1, 2]\n')["error"]
    assert "longer than" in _raw(p, b"x" * (control.MAX_REQUEST + 10))["error"]
    assert control.request(p, "status") == {"hello": "world"}       # still serving
    assert stat.S_IMODE(os.stat(p).st_mode) == 0o660
    assert stat.S_IMODE(os.stat(os.path.dirname(p)).st_mode) == 0o750


def test_live_socket_is_not_taken_over_and_dead_one_is_replaced(server, tmp_path):
    sel = selectors.DefaultSelector()
    other = control.ControlServer(server.srv.path, _handler, sel)
    with pytest.raises(control.ControlError, match="another daemon"):
        other.open()
    dead = tmp_path / "dead.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(dead))
    s.close()                                      # the file stays, nobody listens
    srv = control.ControlServer(str(dead), _handler, sel)
    srv.open()
    srv.close()
    assert not dead.exists()
    plain = tmp_path / "plain"
    plain.write_text("")
    with pytest.raises(control.ControlError, match="not a socket"):
        control.ControlServer(str(plain), _handler, sel).open()


def _run(args: list[str]) -> tuple[int, str]:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd")
    control_client.add_parsers(sub)
    ns = p.parse_args(args)
    out = io.StringIO()
    return ns.func(ns, out), out.getvalue()


def test_hpccctl_tables_json_and_refusals(server, capsys):
    sock = server.srv.path
    rc, out = _run(["flows", "--socket", sock])
    assert rc == 0
    head, row = out.splitlines()
    assert head.split()[:5] == ["id", "kind", "role", "algo", "peer"]
    assert "10.0.0.2:40000" in row and "12.5kB" in row and "1Gb/s" in row and "85.0" in row
    rc, out = _run(["flows", "--json", "--socket", sock])
    assert rc == 0 and json.loads(out)[0]["U"] == 0.93
    rc, out = _run(["flow", "7", "--socket", sock])
    assert rc == 0 and "kind  native" in out and "x     1" in out
    rc, out = _run(["flow", "8", "--socket", sock])
    assert rc == 1 and "no flow 8" in capsys.readouterr().err
    rc, _ = _run(["status", "--socket", sock + ".nobody"])
    assert rc == 1 and "cannot reach the daemon" in capsys.readouterr().err


def test_table_alignment():
    t = control_client.table([(1, "a", 2.5), (10, "bb", None)], ("n", "s", "v"))
    lines = t.splitlines()
    assert lines[1] == " 1  a   2.5"
    assert lines[2] == "10  bb    -"


def test_a_daemon_dying_mid_request_is_a_control_error(tmp_path):
    """The daemon resets the connection while a request waits for its
    answer (SIGKILL mid-request): ControlError naming the socket and the
    command, not a traceback out of hpccctl."""
    import struct

    path = str(tmp_path / "dying.sock")
    ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ls.bind(path)
    ls.listen(1)

    def die():
        c, _ = ls.accept()
        c.recv(10)                       # part of the request, then a reset
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.close()

    t = threading.Thread(target=die, daemon=True)
    t.start()
    try:
        with pytest.raises(control.ControlError, match="went away during 'transfer'"):
            control.request(path, "transfer", {"id": 1, "pad": "x" * 100_000})
    finally:
        t.join(5)
        ls.close()
