"""The libFuzzer harnesses of fuzz/ (docs/fuzzing.md), short and bounded, as CI runs them.

Each harness is built (``make -C fuzz``: clang, ASan + UBSan, every finding
fatal) and run for SMOKE_SECONDS from its seed corpus (tests/vectors/
wire.json, the bundled replay traces, and the regression inputs of
fuzz/regressions/), writing what it finds into a temporary directory.  The
test fails on any crash, sanitizer report or violated invariant (the
harness's exit status and its artifact), and when the harness did not
actually execute inputs.  The regression inputs are also replayed one by
one, so that a bug fixed once stays fixed even when the random run does not
reach it.

An input that runs longer than 20 s is a finding too (libFuzzer's
``-timeout``: a loop whose work the input can make unbounded), kept as an
artifact like a crash.  The whole file stays under about a minute: SMOKE_SECONDS (10) per harness,
niced (the lab machines have two cores shared with timing-sensitive tests).
Skipped, with the reason, when clang or its libFuzzer runtime
(libclang-rt-14-dev on Debian bookworm) is missing.  The long run is
``bash scripts/fuzz.sh SECONDS``.
"""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FUZZ = ROOT / "fuzz"
OUT = ROOT / "build" / "fuzz"
HARNESSES = sorted(p.stem for p in FUZZ.glob("fuzz_*.c"))
SMOKE_SECONDS = int(os.environ.get("HPCCD_FUZZ_SMOKE_SECONDS", "10"))
CLANG = os.environ.get("FUZZ_CC", "clang")


def _libfuzzer_missing() -> str | None:
    """Why libFuzzer cannot be used here, or None."""
    if shutil.which(CLANG) is None:
        return f"{CLANG} not installed (Debian: clang, libclang-rt-14-dev)"
    rt = subprocess.run([CLANG, "-print-file-name=libclang_rt.fuzzer-x86_64.a"],
                        capture_output=True, text=True).stdout.strip()
    if not rt or not os.path.isabs(rt) or not os.path.exists(rt):
        return f"{CLANG} has no libFuzzer runtime (Debian: libclang-rt-14-dev)"
    return None


@pytest.fixture(scope="module")
def built():
    why = _libfuzzer_missing()
    if why:
        pytest.skip(why)
    r = subprocess.run(["make", "-s", "-C", str(FUZZ), "all"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, f"make -C fuzz failed:\n{r.stdout}\n{r.stderr}"
    return OUT


def test_every_harness_has_seeds(built):
    assert HARNESSES == ["fuzz_cc", "fuzz_int_hop", "fuzz_wire_frame"]
    for h in HARNESSES:
        seeds = list((built / "corpus" / h).iterdir())
        assert len(seeds) >= 10, (h, len(seeds))
    # every vector of the shared file is a seed of the frame parser
    import json
    names = {v["name"] for v in json.loads(
        (ROOT / "tests" / "vectors" / "wire.json").read_text())["vectors"]}
    assert names <= {p.name for p in (built / "corpus" / "fuzz_wire_frame").iterdir()}


@pytest.mark.parametrize("harness", HARNESSES)
def test_harness_short_run(built, harness, tmp_path):
    found = tmp_path / "corpus"
    found.mkdir()
    argv = ["nice", "-n", "10", str(built / harness), f"-max_total_time={SMOKE_SECONDS}",
            "-runs=50000000", "-timeout=20", "-print_final_stats=1", f"-artifact_prefix={tmp_path}/",
            str(found), str(built / "corpus" / harness)]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=SMOKE_SECONDS + 60)
    log = r.stdout + r.stderr
    artifacts = sorted(p.name for p in tmp_path.iterdir() if p.name != "corpus")
    tail = "\n".join(log.splitlines()[-40:])
    assert r.returncode == 0 and not artifacts, (
        f"{harness} crashed (exit {r.returncode}); input kept as {artifacts} - add it to "
        f"fuzz/regressions/{harness}/ once fixed.\n{tail}")
    runs = re.search(r"stat::number_of_executed_units: *(\d+)", log)
    assert runs and int(runs.group(1)) > 1000, f"{harness} hardly ran:\n{tail}"


def regression_inputs() -> dict[str, list[pathlib.Path]]:
    """fuzz/regressions/<harness>/<input>: crashes found and fixed."""
    out = {}
    for h in HARNESSES:
        d = FUZZ / "regressions" / h
        files = sorted(p for p in d.glob("*") if p.is_file() and p.suffix != ".md") \
            if d.is_dir() else []
        if files:
            out[h] = files
    return out


def test_regression_inputs_replay(built):
    """Each harness runs each of its regression inputs once (libFuzzer with
    file arguments) and must not crash on any."""
    inputs = regression_inputs()
    assert inputs, "fuzz/regressions/ holds no input"
    for harness, files in inputs.items():
        r = subprocess.run([str(built / harness), *map(str, files)], capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 0, f"{harness} fails on a regression input:\n{r.stderr[-3000:]}"
        for f in files:
            assert f"Executed {f}" in r.stderr, f"{harness} did not run {f}"
