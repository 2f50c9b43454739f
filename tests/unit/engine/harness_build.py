"""Builds the engine's protocol harness (harness.c + fake_rings.c + the
engine's sources without rings.c + the core library the module links) with
the transport module's own flags:
the one build of it, for tests/unit/test_engine_protocol.py and
scripts/bench_feedback.py."""
from __future__ import annotations

import importlib
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3]
HERE = pathlib.Path(__file__).resolve().parent


def build(exe: pathlib.Path) -> pathlib.Path:
    """Compiles the harness to `exe`; raises RuntimeError with the compiler's output."""
    sys.path.insert(0, str(ROOT / "cffi_build"))
    try:
        bt = importlib.import_module("build_transport")
        common = importlib.import_module("cffi_common")
    finally:
        sys.path.pop(0)
    sources = [s for s in bt.ENGINE_SOURCES if not s.endswith("/transport/rings.c")]
    if len(sources) != len(bt.ENGINE_SOURCES) - 1:
        raise RuntimeError("rings.c is where the fake goes, and it is not among the sources")
    sources.append(bt.CORE)              # the one build of fastpath/cc/
    libs = [f"-l{lib}" for lib in ("xdp", "bpf", "isal", "m", "pthread")]
    r = subprocess.run(["gcc", *common.CFLAGS, *common.CFLAGS_NUMERIC, f"-I{ROOT / 'include'}",
                        f"-I{ROOT / 'fastpath' / 'transport'}", "-o", str(exe),
                        str(HERE / "harness.c"), str(HERE / "fake_rings.c"), *sources, *libs],
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"harness build failed:\n{r.stderr}")
    return exe
