"""The engine's UMEM as frames: one split (hpccd.transport.engine.umem_frames)
for the daemon's limits.umem_bytes and hpccctl send / recv's --umem-bytes.

Invariants protected:
- half the frames RX, half TX (TX the odd one), nothing left over but a
  part of a frame;
- hpccctl send and recv build their engine with the daemon's default UMEM
  and frame size unless told otherwise, so that the command measures the
  engine the daemon runs (scripts/bench_transport.py's rows and its
  hpccctl row alike).
"""
from __future__ import annotations

import argparse

import pytest

transport = pytest.importorskip("hpccd.transport.engine", reason="hpccd._transport not built")

from hpccd.agent import config  # noqa: E402
from hpccd.transport import cli as transfer_cli  # noqa: E402


def test_the_split_of_a_umem():
    assert transport.umem_frames(16 << 20, 4096) == {"rx_frames": 2048, "tx_frames": 2048}
    assert transport.umem_frames(16 << 20, 2048) == {"rx_frames": 4096, "tx_frames": 4096}
    assert transport.umem_frames(3 * 4096 + 100, 4096) == {"rx_frames": 1, "tx_frames": 2}


def _engine_config(argv: list[str]) -> dict:
    """The config hpccctl ARGV would give its engine (Transport not made)."""
    p = argparse.ArgumentParser()
    transfer_cli.add_parsers(p.add_subparsers(dest="cmd"))
    args = p.parse_args(argv)
    made = {}

    class FakeTransport:
        def __init__(self, *a, **kw):
            made.update(kw)

    transfer_cli._engine(args, argparse.Namespace(Transport=FakeTransport,
                                                  umem_frames=transport.umem_frames))
    return made["config"]


@pytest.mark.parametrize("cmd", [["send", "10.0.0.2", "--bytes", "1M"], ["recv"]])
def test_hpccctl_engines_have_the_daemons_umem(cmd):
    cfg = config.loads('[[interfaces]]\nname = "eth0"\n')
    daemon = {"frame_size": cfg.frame_bytes, **transport.umem_frames(cfg.umem_bytes,
                                                                      cfg.frame_bytes)}
    assert _engine_config(cmd) == daemon == {"frame_size": 4096, "rx_frames": 2048,
                                             "tx_frames": 2048}
    assert _engine_config([*cmd, "--umem-bytes", "64Mi", "--frame-bytes", "2048"]) == {
        "frame_size": 2048, "rx_frames": 16384, "tx_frames": 16384}
