"""Differential check of the HPCC / Rx-HPCC core against the implementation
before the per-ACK instruction-count work (docs/benchmarks.md).

tests/unit/hpcc_diff/ref_hpcc.c is that implementation, frozen (commit 290738d
of fastpath/cc/hpcc.c, byte for byte below its header comment).
hpcc_diff.c links it, every hpccd_hpcc_* symbol renamed to ref_hpccd_hpcc_*,
with the current fastpath/cc/hpcc.c and drives both with the same random
calls of every entry point (NewAck, NewINT, both wire forms, the batch API,
decode_hops, set_active_flows, rate_bps, hops aliasing the flow's own L) over
random INT sequences: steady paths (the unrolled fast path) mixed with
counter wrap-around on the wire, pathID and hop-count changes, zero and odd
bandwidths, qLen saturation and queues >= 2^63, ts/txBytes going back or
jumping by 2^52 .. 2^64, stale records, random and invalid parameters.  After
every call the return values, the outputs and every byte of both
struct hpccd_hpcc must be equal: doubles bit for bit.

Built with each compiler found (gcc, clang), each both ways: the x86-64 path
(cvtsi2sdq written out) and the portable one (-DHPCCD_CC_SCALAR, plain
casts, what other architectures get).  HPCCD_DIFF_TRIALS (default 6000 per
build, about 0.9 million calls) makes the run longer.
"""
from __future__ import annotations

import os
import pathlib
import platform
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
HERE = pathlib.Path(__file__).resolve().parent / "hpcc_diff"
HPCC_C = ROOT / "fastpath" / "cc" / "hpcc.c"
INT_DECODE_C = ROOT / "fastpath" / "cc" / "int_decode.c"
# The core's numeric flags (include/hpccd/cc.h, "Numeric type"), from their one
# home, fastpath/cc/numeric.cflags.
sys.path.insert(0, str(ROOT / "cffi_build"))
try:
    from cffi_common import CFLAGS_NUMERIC as NUMERIC   # noqa: E402
finally:
    sys.path.pop(0)
CFLAGS = ["-O2", "-std=gnu11", *NUMERIC, "-Wall",
          "-Wextra", "-Wno-unused-parameter", "-Werror", f"-I{ROOT / 'include'}"]
EXPORTED = ["params_default", "init", "new_ack", "new_int", "decode_hops",
            "new_ack_wire", "new_int_wire", "rate_bps", "set_active_flows", "run"]
RENAME = [f"-Dhpccd_hpcc_{f}=ref_hpccd_hpcc_{f}" for f in EXPORTED]
TRIALS = int(os.environ.get("HPCCD_DIFF_TRIALS", "6000"))
X86_64 = platform.machine() in ("x86_64", "AMD64")

COMPILERS = [c for c in ("gcc", "clang") if shutil.which(c)]
BUILDS = [(cc, scalar) for cc in COMPILERS for scalar in (False, True)]


def _build(tmp: pathlib.Path, cc: str, scalar: bool) -> pathlib.Path:
    extra = ["-DHPCCD_CC_SCALAR"] if scalar else []
    ref_o, new_o, exe = tmp / "ref.o", tmp / "new.o", tmp / "hpcc_diff"
    for cmd in (
        [cc, *CFLAGS, *RENAME, "-c", str(HERE / "ref_hpcc.c"), "-o", str(ref_o)],
        [cc, *CFLAGS, *extra, "-c", str(HPCC_C), "-o", str(new_o)],
        [cc, *CFLAGS, "-o", str(exe), str(HERE / "hpcc_diff.c"), str(ref_o),
         str(new_o), str(INT_DECODE_C), "-lm"],
    ):
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stderr}"
    return exe


@pytest.mark.skipif(not COMPILERS, reason="no C compiler (gcc or clang)")
@pytest.mark.parametrize("cc,scalar", BUILDS,
                         ids=[f"{cc}-{'scalar' if s else 'native'}" for cc, s in BUILDS])
def test_current_core_is_bit_identical_to_the_reference(tmp_path, cc, scalar):
    exe = _build(tmp_path, cc, scalar)
    seed = 0x5eed + len(cc) * 2 + scalar
    r = subprocess.run([str(exe), str(seed), str(TRIALS)], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    m = re.match(r"ok trials=(\d+) calls=(\d+) refused_params=(\d+) bad_hops=(\d+) "
                 r"path_resets=(\d+) stale_resets=(\d+) wc_updates=(\d+) notifies=(\d+)",
                 r.stdout)
    assert m, r.stdout
    trials, calls, refused, bad, resets, stale, wc, notify = map(int, m.groups())
    assert trials == TRIALS and calls > 100 * TRIALS
    # The rare paths were taken, not only the steady state.
    assert min(refused, bad, resets, stale, wc, notify) > 0, r.stdout


@pytest.mark.skipif(not COMPILERS, reason="no C compiler (gcc or clang)")
@pytest.mark.skipif(not X86_64, reason="the written-out conversion is x86-64 only")
@pytest.mark.parametrize("cc", COMPILERS)
def test_scalar_build_is_the_portable_path(tmp_path, cc):
    """-DHPCCD_CC_SCALAR really selects the plain casts (the code other
    architectures compile), and the default x86-64 build the inline cvtsi2sdq:
    the test above then covers both."""
    def asm(extra: list[str]) -> str:
        out = tmp_path / "hpcc.s"
        subprocess.run([cc, *CFLAGS, *extra, "-S", str(HPCC_C), "-o", str(out)],
                       check=True, capture_output=True)
        return out.read_text()

    assert "#APP" in asm([])
    assert "#APP" not in asm(["-DHPCCD_CC_SCALAR"])


def test_reference_is_the_frozen_pre_optimisation_core():
    """ref_hpcc.c is the old hpcc.c below its header, not a copy of the new
    one (the check would then compare the code with itself)."""
    ref = (HERE / "ref_hpcc.c").read_text()
    assert "FROZEN REFERENCE" in ref
    assert "static inline __attribute__((always_inline)) double\nmeasure_inflight(" in ref
    assert "FAST_HOP" not in ref and "FAST_HOP" in HPCC_C.read_text()
