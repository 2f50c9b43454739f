"""hpccctl decode, run as a subprocess the way a user runs it."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = json.loads((ROOT / "tests" / "vectors" / "wire.json").read_text())
VEC = {v["name"]: v for v in DOC["vectors"]}
KEY_HEX = DOC["tag_key_hex"]


def hpccctl(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "daemon") + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "hpccd.cli.main", "decode", *args],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


def test_text_output_names_fields_layer_by_layer():
    r = hpccctl(VEC["data_room5_nhop2"]["hex"])
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "hpccd over UDP, valid" in out
    lines = out.splitlines()
    heads = [ln.strip() for ln in lines if ln.startswith("  ") and not ln.startswith("    ")]
    assert heads == ["Ethernet", "IPv4", "UDP", "INT header", "hop 0", "hop 1",
                     "hops 2..4 (not stamped, zeroed)", "hpccd header", "payload      200 bytes"]
    for line in ("nHop         2", "room         5", "flags        0x8 COLLECT",
                 "pathID       0x303", "B            6 = 100000000 bit/s",
                 "B            22 = 10000000000 bit/s", "qLen         32767 x 80 = 2621360 B",
                 "txBytes      1048575 x 128 = 134217600 B", "type         DATA (1)",
                 "flags        0x12 CWR|RETX", "seq          8589934692",
                 "payload      200 bytes", "hops 2..4 (not stamped, zeroed)"):
        assert line in out, line


def test_malformed_packet_is_named():
    r = hpccctl(VEC["err_nhop_gt_room"]["hex"], VEC["err_len_padding_not_counted"]["hex"])
    assert r.returncode == 0, r.stderr
    assert "MALFORMED HPCCD_E_NHOP (5): nHop > room" in r.stdout
    assert "MALFORMED HPCCD_E_LEN (10)" in r.stdout
    assert "not L4 payload: 6 bytes" in r.stdout


def test_tag_verification_with_key():
    args = [VEC["notify"]["hex"], VEC["probe_resp_udp_bad_tag"]["hex"],
            VEC["tcp_probe"]["hex"]]
    r = hpccctl("--key", KEY_HEX, *args)
    assert r.returncode == 0, r.stderr
    blocks = r.stdout.strip().split("\n\n")
    assert "verified" in blocks[0] and "w_bytes      150000 B" in blocks[0]
    assert "FAILED verification" in blocks[1]
    assert "hpccd over TCP, valid" in blocks[2] and "(slot for the reflector)" in blocks[2]
    r = hpccctl(VEC["notify"]["hex"])
    assert "(not verified: no --key)" in r.stdout


@pytest.mark.parametrize("name", ["data_room5_nhop5", "notify", "tcp_probe_resp",
                                  "probe_resp_udp_bad_tag", "nack_eth_padding_valid"])
def test_json_fields_equal_the_vector(name):
    v = VEC[name]
    r = hpccctl("--json", "--key", KEY_HEX, v["hex"])
    assert r.returncode == 0, r.stderr
    (d,) = [json.loads(line) for line in r.stdout.splitlines()]
    assert d["error"] == 0 and d["error_name"] == "HPCCD_E_OK" and d["l4"] == v["l4"]
    assert d["fields"] == v["fields"]
    units = d["hops_decoded"]
    assert len(units) == v["fields"]["int"]["room"]
    for u, h in zip(units, v["fields"]["int"]["hops"]):
        assert u["qlen_bytes"] == h["qlen_units"] * 80
        assert u["tx_bytes"] == h["tx_units"] * 128
        assert u["ts_ns"] == h["ts"]


def test_pcap_input(tmp_path):
    names = [n for n in VEC if n != "err_int_trunc_frame_cut"]
    pcap = tmp_path / "vectors.pcap"
    wrpcap(str(pcap), [Ether(bytes.fromhex(VEC[n]["hex"])) for n in names])
    r = hpccctl("--pcap", str(pcap), "--json", "--key", KEY_HEX)
    assert r.returncode == 0, r.stderr
    out = [json.loads(line) for line in r.stdout.splitlines()]
    assert [d["index"] for d in out] == list(range(len(names)))
    for d, n in zip(out, names):
        v = VEC[n]
        assert d["error"] == v["error"], n
        assert d["frame_len"] == len(v["hex"]) // 2
        if v["error"] == 0:
            assert d["fields"] == v["fields"], n
    r = hpccctl("--pcap", str(pcap))
    assert r.returncode == 0 and r.stdout.count("packet ") == len(names)


def test_not_hpccd_and_bad_input(tmp_path):
    frame = bytearray.fromhex(VEC["data_room0_probe_mode"]["hex"])
    frame[36:38] = (53).to_bytes(2, "big")              # UDP dport 53
    r = hpccctl(frame.hex())
    assert r.returncode == 0 and "not hpccd" in r.stdout
    assert hpccctl("--port", "53", frame.hex()).stdout.count("valid") == 1
    assert hpccctl("zz").returncode == 2
    assert hpccctl("--key", "0011", VEC["notify"]["hex"]).returncode == 2
    assert hpccctl().returncode == 2
    assert hpccctl("--pcap", str(tmp_path / "missing.pcap")).returncode == 2
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"not a capture file at all")
    assert hpccctl("--pcap", str(junk)).returncode == 2
