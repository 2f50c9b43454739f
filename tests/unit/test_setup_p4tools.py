"""scripts/run.sh and a p4c/BMv2 archive (HPCCD_P4TOOLS_ARCHIVE).

Invariants protected:

- a named archive that does not exist is said, and set-up still succeeds
  (the P4 tests then skip with their own reason);
- a file that is not a .tar.zst fails set-up with a message naming it, and
  leaves build/p4tools as it was and no half-unpacked folder behind;
- where set-up was given an archive (CI: .ci/run finds one beside the clone),
  ``run.sh test`` exported HPCCD_P4TOOLS at the unpacked copy, its three tools
  run, and a second set-up does not unpack again (sha256 stamp) - so the P4
  tests cannot silently skip in CI.

Each case runs the real ``bash scripts/run.sh setup`` (idempotent: about a
second once set up).  The set-up installs Debian packages only when they are
missing, which needs root.
"""
from __future__ import annotations

import hashlib
import os
import pathlib
import re
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
P4TOOLS = ROOT / "build" / "p4tools"

if os.geteuid() != 0:
    pytest.skip("scripts/run.sh setup may install Debian packages: needs root",
                allow_module_level=True)


def run_setup(archive: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, HPCCD_P4TOOLS_ARCHIVE=archive)
    return subprocess.run(["bash", "scripts/run.sh", "setup"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)


def snapshot(d: pathlib.Path) -> dict[str, int]:
    if not d.exists():
        return {}
    return {str(p.relative_to(d)): p.lstat().st_mtime_ns for p in d.rglob("*")}


def test_missing_archive_is_said_and_setup_succeeds(tmp_path):
    missing = tmp_path / "p4tools-nowhere.tar.zst"
    r = run_setup(str(missing))
    assert r.returncode == 0, r.stderr
    assert f"HPCCD_P4TOOLS_ARCHIVE={missing}: no such file; the P4 tools are not set up" in r.stderr


def test_bad_archive_fails_and_keeps_previous_copy(tmp_path):
    bad = tmp_path / "p4tools-bad.tar.zst"
    bad.write_bytes(b"this is not a zstd archive\n" * 10)
    before = snapshot(P4TOOLS)
    r = run_setup(str(bad))
    assert r.returncode == 1
    assert f"{bad}: not a readable .tar.zst; build/p4tools left as it was" in r.stderr
    assert snapshot(P4TOOLS) == before
    assert not list((ROOT / "build").glob("p4tools.unpack.*"))


def test_archive_given_to_setup_gives_working_tools():
    archive = os.environ.get("HPCCD_P4TOOLS_ARCHIVE")
    if not archive or not os.path.isfile(archive):
        pytest.skip("no p4c/BMv2 archive given (HPCCD_P4TOOLS_ARCHIVE): nothing was unpacked")
    tools = os.environ.get("HPCCD_P4TOOLS")
    assert tools, "scripts/run.sh test had an archive but did not export HPCCD_P4TOOLS"
    if pathlib.Path(tools).resolve() != P4TOOLS.resolve():
        pytest.skip(f"HPCCD_P4TOOLS={tools} is the user's own build, not the unpacked archive")
    want = hashlib.sha256(pathlib.Path(archive).read_bytes()).hexdigest()
    assert (P4TOOLS / ".archive.sha256").read_text().strip() == want
    for t in ("p4c-bm2-ss", "simple_switch"):
        v = subprocess.run([str(P4TOOLS / "bin" / t), "--version"], capture_output=True,
                           text=True, timeout=30)
        assert v.returncode == 0 and re.search(r"\d+\.\d+\.\d+", v.stdout + v.stderr), (t, v.stdout, v.stderr)
    assert os.access(P4TOOLS / "bin" / "simple_switch_CLI", os.X_OK)
    before = snapshot(P4TOOLS)
    r = run_setup(archive)
    assert r.returncode == 0, r.stderr
    assert "unpacking" not in r.stderr
    assert snapshot(P4TOOLS) == before
