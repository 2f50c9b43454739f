"""hpccd.cli.manpage: man pages written from the argparse definitions.

Invariants protected: ``python3 -m hpccd.cli.manpage hpccctl`` / ``hpccd`` give
pages that groff formats without a warning; the hpccctl page has a section
for every subcommand, nested ones included (``lab up``), and every option
of every subcommand and of the programs themselves; an unknown page name is
a usage error (exit 2).
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys

import pytest

from hpccd.cli import main as cli
from hpccd.agent import main as daemon


def page(name: str) -> str:
    r = subprocess.run([sys.executable, "-m", "hpccd.cli.manpage", name], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def walk(p: argparse.ArgumentParser, words=()):
    yield words, p
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                yield from walk(sub, words + (name,))


@pytest.mark.parametrize("name,section,parser", [("hpccctl", "1", cli.build_parser),
                                                 ("hpccd", "8", daemon.build_parser)])
def test_every_command_and_option_is_on_the_page(name, section, parser):
    text = page(name)
    assert text.startswith(f".TH {name.upper()} {section} ")
    for words, p in walk(parser()):
        if words:
            assert f".SS {' '.join(words)}\n" in text, words
        for a in p._actions:
            for o in a.option_strings:
                assert "\\fB" + o.replace("-", "\\-") + "\\fR" in text, (words, o)
    if shutil.which("groff"):
        r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z"], input=text,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and r.stderr == "", r.stderr


def test_unknown_page_is_a_usage_error():
    r = subprocess.run([sys.executable, "-m", "hpccd.cli.manpage", "nosuch"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "usage: python3 -m hpccd.cli.manpage {hpccd,hpccctl}" in r.stderr
