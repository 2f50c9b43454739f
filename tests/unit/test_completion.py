"""hpccd.cli.completion: bash completion written from the argparse definitions.

Invariants protected: the script, sourced by bash, completes hpccctl's
subcommands at each level (``lab`` -> up, down, status), the options of the
command typed so far (options before the subcommand skipped), hpccd's own
options, and falls back to file names where no subcommand is expected.
"""
from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

CASES = [
    (["hpccctl", "la"], {"lab"}),
    (["hpccctl", "lab", ""], {"up", "down", "status", "prometheus", "hook"}),
    (["hpccctl", "lab", "up", "--n"], {"--name", "--no-int"}),
    (["hpccctl", "send", "10.0.0.1", "--by"], {"--bytes"}),
    (["hpccctl", "--json", "status", "--so"], {"--socket"}),
    (["hpccd", "--c"], {"--config", "--check", "--cleanup"}),
    (["hpccctl", "flow", "--j"], {"--json"}),
]


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_completion_in_bash(tmp_path):
    script = subprocess.run([sys.executable, "-m", "hpccd.cli.completion"], capture_output=True,
                            text=True, timeout=60, check=True).stdout
    (tmp_path / "c.bash").write_text(script)
    (tmp_path / "hpccd.toml").write_text("")
    lines = [f"source {tmp_path / 'c.bash'}", f"cd {tmp_path}"]
    for words, _ in CASES + [(["hpccd", "--config", "hpccd.t"], None)]:
        arr = " ".join(f"'{w}'" for w in words)
        lines.append(f"COMP_WORDS=({arr}); COMP_CWORD={len(words) - 1}; _hpccd_complete; "
                     "echo \"${COMPREPLY[*]}\"")
    out = subprocess.run(["bash", "-c", "\n".join(lines)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    got = out.stdout.split("\n")
    for (words, want), line in zip(CASES, got):
        assert set(line.split()) == want, (words, line)
    assert got[len(CASES)] == "hpccd.toml"             # a file name where a value goes
