"""How hpccd's programs (``hpccd``, ``hpccctl``) end when something goes wrong:
with a message that says what failed and what to do, never a Python traceback.

- :func:`run_main` wraps an entry point: a closed output pipe
  (``hpccctl replay ... | head``) ends quietly with 141 (128 + SIGPIPE, as a
  C tool killed by SIGPIPE does), Ctrl-C with 130, and an error nobody
  expected with one line naming it as a bug (``HPCCD_DEBUG=1`` prints the
  traceback for the report).
- :func:`permission_denied` tells whether an error (or what caused it) is
  EPERM/EACCES, and :func:`privilege_hint` says what the program needs then:
  root, or the capabilities of systemd/hpccd.service.
"""
from __future__ import annotations

import errno
import os
import sys
import traceback
from typing import Callable

__all__ = ["run_main", "permission_denied", "privilege_hint", "not_root", "CAPABILITIES",
           "EXIT_SIGPIPE"]

EXIT_SIGPIPE = 128 + 13
EXIT_INTERRUPTED = 128 + 2
# The unit's CapabilityBoundingSet, and why each is needed: systemd/hpccd.service.
CAPABILITIES = "CAP_BPF, CAP_PERFMON, CAP_NET_ADMIN, CAP_NET_RAW, CAP_SYS_ADMIN"


def permission_denied(e: BaseException | None) -> bool:
    """EPERM or EACCES in `e` or in the chain of errors that caused it."""
    seen = 0
    while e is not None and seen < 8:
        if isinstance(e, OSError) and e.errno in (errno.EPERM, errno.EACCES):
            return True
        if getattr(e, "errno", None) in (errno.EPERM, errno.EACCES):
            return True
        e = e.__cause__ or e.__context__
        seen += 1
    return False


def privilege_hint(what: str) -> str:
    """What `what` (e.g. "hpccd", "hpccctl recv") needs when the kernel said no."""
    if os.geteuid() != 0:
        return f"{what} needs root ({CAPABILITIES}): run it with sudo"
    return (f"{what} runs as root but lacks a capability it needs ({CAPABILITIES}; "
            f"systemd/hpccd.service grants exactly these)")


def not_root(prog: str, why: str) -> bool:
    """True, having said "`prog`: needs root (`why`)" on stderr, when this process is not
    root: the one prologue of the subcommands that build namespaces."""
    if os.geteuid() == 0:
        return False
    print(f"{prog}: needs root ({why})", file=sys.stderr)
    return True


def run_main(prog: str, main: Callable[[list[str] | None], int],
             argv: list[str] | None = None) -> int:
    """Run `main(argv)` and return its exit status; see the module docstring."""
    try:
        code = main(argv)
        sys.stdout.flush()          # a closed pipe shows here, not at interpreter exit
        return code
    except BrokenPipeError:
        # Nobody reads any more: stop writing, and keep the interpreter's own
        # final flush from reporting the same error.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return EXIT_SIGPIPE
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except SystemExit:
        raise
    except Exception as e:          # a bug: one line for the user, the traceback on demand
        if os.environ.get("HPCCD_DEBUG"):
            traceback.print_exc()
        print(f"{prog}: internal error: {type(e).__name__}: {e} (a bug in hpccd; "
              f"HPCCD_DEBUG=1 {prog} ... prints where, for a report)", file=sys.stderr)
        return 1
