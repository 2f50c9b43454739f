"""Bash completion of ``hpccd`` and ``hpccctl``, written from their argparse
definitions (like hpccd.cli.manpage)::

    python3 -m hpccd.cli.completion > /usr/share/bash-completion/completions/hpccctl

One script completes both programs: the subcommands at each level (``hpccctl
lab <TAB>``: up, down, status) and the options of the command typed so far;
other words complete as file names.
"""
from __future__ import annotations

import argparse
import sys

__all__ = ["render"]


def _words(p: argparse.ArgumentParser, path: tuple[str, ...], out: dict) -> None:
    subs: list[str] = []
    opts: list[str] = []
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                subs.append(name)
                _words(sub, path + (name,), out)
        else:
            opts += [o for o in a.option_strings if o.startswith("--") or len(a.option_strings) == 1]
    out[" ".join(path)] = (subs, opts)


def render() -> str:
    from .main import build_parser as ctl_parser
    from ..agent.main import build_parser as daemon_parser

    lines = ["# bash completion of hpccd and hpccctl (written by python3 -m hpccd.cli.completion)",
             "_hpccd_complete() {",
             "    local cur=${COMP_WORDS[COMP_CWORD]} path=${COMP_WORDS[0]##*/} w i subs opts",
             "    for ((i = 1; i < COMP_CWORD; i++)); do",
             "        w=${COMP_WORDS[i]}",
             "        case \"$w\" in -*) continue ;; esac",
             "        _hpccd_words \"$path\"",
             "        case \" $subs \" in *\" $w \"*) path=\"$path $w\" ;; esac",
             "    done",
             "    _hpccd_words \"$path\"",
             "    if [[ $cur == -* ]]; then",
             "        COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))",
             "    elif [ -n \"$subs\" ]; then",
             "        COMPREPLY=($(compgen -W \"$subs\" -- \"$cur\"))",
             "    else",
             "        COMPREPLY=($(compgen -f -- \"$cur\"))",
             "    fi",
             "}",
             "_hpccd_words() {",
             "    case \"$1\" in"]
    for prog, build in (("hpccd", daemon_parser), ("hpccctl", ctl_parser)):
        table: dict[str, tuple[list[str], list[str]]] = {}
        _words(build(), (prog,), table)
        for path, (subs, opts) in sorted(table.items()):
            lines.append(f"    '{path}') subs='{' '.join(subs)}'; opts='{' '.join(opts)}' ;;")
    lines += ["    *) subs=''; opts='' ;;",
              "    esac",
              "}",
              "complete -o filenames -F _hpccd_complete hpccd hpccctl", ""]
    return "\n".join(lines)


def main() -> int:
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
