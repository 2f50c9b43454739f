"""How hpccd's programs (``hpccd``, ``hpccctl``) end when something goes wrong:
with a message that says what failed and what to do, never a Python traceback.

- :func:`run_main` wraps an entry point: a closed output pipe
  (``hpccctl replay ... | head``) ends quietly with 141 (128 + SIGPIPE, as a
  C tool killed by SIGPIPE does), Ctrl-C with 130, and an error nobody
  expected with one line naming it as a bug (``HPCCD_DEBUG=1`` prints the
  traceback for the report); what pyroute2's asyncio loop reports is one line,
  and nothing when an interrupt caused it; an interrupt that lands where
  Python ignores exceptions (a fork hook, a finalizer) is raised again, not
  printed as "Exception ignored".
- :func:`permission_denied` tells whether an error (or what caused it) is
  EPERM/EACCES, and :func:`privilege_hint` says what the program needs then:
  root, or the capabilities of systemd/hpccd.service.
"""
from __future__ import annotations

import errno
import logging
import os
import signal
import sys
import threading
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


def _caused_by_interrupt(e: BaseException | None) -> bool:
    """KeyboardInterrupt is `e` or in the chain of errors that led to it."""
    seen = 0
    while e is not None and seen < 8:
        if isinstance(e, KeyboardInterrupt):
            return True
        e = e.__cause__ or e.__context__
        seen += 1
    return False


class _AsyncioLines(logging.Handler):
    """pyroute2 runs its netlink requests on an asyncio loop of its own; what
    that loop reports (through the "asyncio" logger, whose fallback prints a
    traceback) becomes one line.  A report caused by an interrupt is dropped:
    a signal raised in the middle of a request leaves its generator half
    closed, and the interrupt itself is already said."""

    def __init__(self, prog: str):
        super().__init__(logging.WARNING)
        self.prog = prog

    def emit(self, record: logging.LogRecord) -> None:
        exc = record.exc_info[1] if record.exc_info else None
        if _caused_by_interrupt(exc):
            return
        try:
            line = record.getMessage().splitlines()[0] if record.getMessage() else ""
            if exc is not None:
                line += f": {type(exc).__name__}: {exc}"
            print(f"{self.prog}: asyncio: {line}", file=sys.stderr)
            if os.environ.get("HPCCD_DEBUG") and record.exc_info:
                traceback.print_exception(*record.exc_info)
        except Exception:           # a closed stderr: nothing left to say it on
            pass


def _asyncio_in_lines(prog: str) -> None:
    log = logging.getLogger("asyncio")
    if not any(isinstance(h, _AsyncioLines) for h in log.handlers):
        log.addHandler(_AsyncioLines(prog))
    log.propagate = False


# Who raises an interrupt again that Python swallowed (see _unraisable):
# the innermost registered function, which returns the signal to deliver
# again or None (reproduce's handler, which raises only once, re-arms
# itself), else SIGINT when its handler is Python's own.
REINTERRUPT: list[Callable[[], "int | None"]] = []
REINTERRUPT_DELAY_S = 0.005     # long enough for the swallowing hook to return


def _deliver_again(signum: int) -> None:
    """`signum` to the main thread, if Python still handles it (as
    _thread.interrupt_main would: a handler set back to the default or
    ignore since then is left to it)."""
    if callable(signal.getsignal(signum)):
        signal.pthread_kill(threading.main_thread().ident, signum)


def _unraisable(u) -> None:
    """sys.unraisablehook: an interrupt raised where Python ignores
    exceptions (a fork hook such as logging's _releaseLock, a finalizer)
    would print "Exception ignored in ..." with a traceback and be lost.
    It is not shown, and the signal is delivered to the main thread again
    from a timer thread, after this hook (and the code that called it) has
    returned: raised inside the hook it would be swallowed again.  As a
    real signal (pthread_kill), not _thread.interrupt_main(): that one only
    marks the signal pending from the timer's thread, which wakes no
    blocking call of the main thread and leaves the noticing to its next
    taking of the GIL (a 30 s sleep ran out before the program ended)."""
    if not _caused_by_interrupt(u.exc_value):
        sys.__unraisablehook__(u)
        return
    if REINTERRUPT:
        signum = REINTERRUPT[-1]()
    elif signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signum = signal.SIGINT
    else:
        signum = None
    if signum is not None:
        t = threading.Timer(REINTERRUPT_DELAY_S, _deliver_again, (signum,))
        t.daemon = True
        t.start()


def run_main(prog: str, main: Callable[[list[str] | None], int],
             argv: list[str] | None = None) -> int:
    """Run `main(argv)` and return its exit status; see the module docstring."""
    _asyncio_in_lines(prog)
    sys.unraisablehook = _unraisable
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
