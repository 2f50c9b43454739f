"""Man pages of ``hpccd`` (section 8) and ``hpccctl`` (section 1), written
from their argparse definitions, so that the page and ``--help`` never
disagree::

    python3 -m hpccd.cli.manpage hpccd   > hpccd.8
    python3 -m hpccd.cli.manpage hpccctl > hpccctl.1

Each page: NAME, SYNOPSIS (argparse's usage), DESCRIPTION, OPTIONS, and for
hpccctl a COMMANDS section with every subcommand (nested ones too: ``lab
up``) with its usage, description and options; then FILES and SEE ALSO.
scripts/install.sh and the Debian package install them.
"""
from __future__ import annotations

import argparse
import sys

from .. import __version__

__all__ = ["render", "PAGES"]

# name: (section, one-line summary, FILES lines)
PAGES = {
    "hpccd": ("8", "INT-based congestion control daemon (HPCC, HPCC++, DCTCP, LDCP)",
              ["/etc/hpccd/hpccd.toml", "/run/hpccd-daemon/control.sock", "/run/hpccd/tcp_cc.lock",
               "/run/hpccd/owners/"]),
    "hpccctl": ("1", "control and tools of hpccd",
                ["/run/hpccd-daemon/control.sock", "/run/hpccd/lab-*.json"]),
}


def _esc(text: str) -> str:
    """Text for roff: backslashes and hyphens escaped, no line taken as a request."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join(("\\&" + ln) if ln.startswith((".", "'")) else ln
                     for ln in text.splitlines())


def _usage(p: argparse.ArgumentParser) -> str:
    u = p.format_usage().strip()
    return " ".join(u[len("usage:"):].split()) if u.startswith("usage:") else u


def _options(p: argparse.ArgumentParser) -> list[str]:
    out: list[str] = []
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction) or a.help == argparse.SUPPRESS:
            continue
        if a.option_strings:
            metavar = ""
            choices = a.choices if a.choices and not isinstance(a.choices, dict) else None
            if a.nargs != 0:
                metavar = " " + (a.metavar or (f"{{{','.join(map(str, choices))}}}"
                                               if choices else a.dest.upper()))
                if a.nargs == "?":
                    metavar = f" [{metavar.strip()}]"
            head = ", ".join(f"\\fB{_esc(o)}\\fR" for o in a.option_strings)
            head += f"\\fI{_esc(metavar)}\\fR" if metavar else ""
        else:
            head = f"\\fI{_esc(a.metavar or a.dest)}\\fR"
        help_text = (a.help or "") % {"default": a.default, "prog": p.prog} if a.help else ""
        out += [".TP", head, _esc(help_text)]
    return out


def _subcommands(p: argparse.ArgumentParser):
    """(name, help, parser) of every subcommand of `p`, depth first."""
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            helps = {c.dest: c.help for c in a._choices_actions}
            for name, sub in a.choices.items():
                yield name, helps.get(name, ""), sub
                for nested in _subcommands(sub):
                    yield nested


def render(name: str, parser: argparse.ArgumentParser) -> str:
    section, summary, files = PAGES[name]
    lines = [f'.TH {name.upper()} {section} "" "hpccd {__version__}" "hpccd"',
             ".SH NAME", f"{name} \\- {_esc(summary)}",
             ".SH SYNOPSIS", f".B {_esc(_usage(parser))}",
             ".SH DESCRIPTION", _esc(parser.description or summary),
             ".SH OPTIONS", *_options(parser)]
    subs = list(_subcommands(parser))
    if subs:
        lines.append(".SH COMMANDS")
        for sub_name, sub_help, sub in subs:
            words = sub.prog.split()[1:]             # "hpccctl lab up" -> "lab up"
            lines += [f".SS {_esc(' '.join(words) or sub_name)}",
                      f".B {_esc(_usage(sub))}", ".PP", _esc(sub.description or sub_help or "")]
            lines += _options(sub)
    lines += [".SH FILES"]
    for f in files:
        lines += [".TP", f"\\fI{_esc(f)}\\fR"]
    other = "hpccctl (1)" if name == "hpccd" else "hpccd (8)"
    lines += [".SH SEE ALSO", f"\\fB{other.split()[0]}\\fR{other[len(other.split()[0]):]}, "
              "/usr/share/doc/hpccd/ (configuration.md, metrics.md, install.md)", ""]
    return "\n".join(lines)


def _parser(name: str) -> argparse.ArgumentParser:
    if name == "hpccd":
        from ..agent.main import build_parser
    else:
        from .main import build_parser
    return build_parser()


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 1 or args[0] not in PAGES:
        print(f"usage: python3 -m hpccd.cli.manpage {{{','.join(PAGES)}}}", file=sys.stderr)
        return 2
    sys.stdout.write(render(args[0], _parser(args[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
