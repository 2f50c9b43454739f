"""``hpccctl reproduce``: the HPCC paper's evaluation ([HPCC] section 5) in
the lab with one command, and its report.

The set (:data:`FULL`, or :data:`QUICK` with ``--quick``: the same
experiments with short phases and few flows, for tests) is a list of
stages, each one experiment run (``hpccctl experiment``'s modules, in labs
of their own): the micro-benchmarks of section 5.2 (incast, long-short,
mice, fairness), fct under WebSearch and FB_Hadoop at 30 % and 50 % load,
fct with incasts on top of the background load (section 5.3, Figure 11),
go-back-N against selective repeat under loss (Figure 12), the reaction
ablation (section 5.4, Figure 13), the W_AI sweep (Figure 14) and txRate
against rxRate (section 3.4, Figure 6).

Everything goes under ``<out>/reproduce-<stamp>/``: each stage's results
folder, and ``reproduce.json`` (the manifest: per stage its folder,
seconds, the load average before and after, or why it failed), rewritten
after every stage.  At the end the report (results_report.py; claims.py: each claim of section
5 in a line, the lab's figure beside it and a verdict; then each stage's
summary and plots) is written to ``--report`` (default
``<folder>/results.md``; scripts/results.sh makes it docs/results.md), its
plots copied into ``results/<stage>/`` beside it.

A progress line per stage gives the stages done, the time spent and an
estimate of the time left (each stage's own estimate, scaled by how the
finished ones compared with theirs).

Each stage runs in a child process of its own (forked, in a process group
of its own, so a terminal's Ctrl-C reaches only this process).  SIGINT or
SIGTERM stops the run: it is passed on to the stage's child as SIGINT, whose
experiment unwinds and takes its lab down as any interrupted experiment
does; when the child has exited (after CHILD_GRACE_S it is killed), every
lab it made that is still there is taken down from here (hpccd.lab.teardown.down:
namespaces, BPF pins, state file) -- an interrupt can land anywhere, e.g.
while a transport engine is being made, and what it leaves is held only
by the child's descriptors, gone with it.  Further signals are ignored
while this happens; the finished stages are kept and the report is written
from them; the exit status is 128 + the signal.
"""
from __future__ import annotations

import datetime
import json
import math
import os
import signal
import sys
import threading
import time
from typing import Any, Callable, NamedTuple

from ..cli.errors import REINTERRUPT
from .algos import AlgoError, parse_algos
from .common import UsageError
from .report import progress

__all__ = ["Stage", "FULL", "QUICK", "run", "add_parser", "main", "DEFAULT_ALGOS"]

# The paper's baselines beside HPCC ([HPCC] section 5.1: DCQCN, TIMELY, their
# "+win", DCTCP), and kernel TCP for reference.
DEFAULT_ALGOS = "hpcc,dcqcn,timely,dcqcn-win,timely-win,dctcp,tcp-dctcp,cubic"
QUICK_ALGOS = "hpcc,dcqcn,dctcp"


class Stage(NamedTuple):
    key: str                    # names it in the manifest, the report and results/<key>/
    exp: str                    # hpccd.experiment.EXPERIMENTS name
    what: str                   # one line: what it reproduces
    params: dict
    algos: str | None = None    # its own algorithms; None: the run's
    sweep: tuple = ()           # ((param, (values...)),) for sweep.run_sweep
    cost: tuple = (10.0, 10.0)  # estimate: seconds for its labs, seconds per algorithm


# W_AI values of the sweep (bytes): the lab's rule-of-thumb value for the
# fairness experiment's N flows is W_init (1 - eta) / N = 37.5 KB x 0.05 / 4
# = 469 bytes; below, at and above it, as [HPCC] Figure 14 goes from 10 to
# 300 bytes around its bound of 150.
W_AI_FULL = (50.0, 150.0, 469.0, 1500.0, 5000.0)

FULL: tuple[Stage, ...] = (
    Stage("incast", "incast", "[HPCC] 5.2 Figure 9c/9d: 7-to-1 incast into a long flow",
          {}, cost=(8, 8)),
    Stage("long-short", "long-short", "[HPCC] 5.2 Figure 9a/9b: a 1 MB short flow joins a "
          "long one", {}, cost=(8, 6)),
    Stage("mice", "mice", "[HPCC] 5.2 Figure 9e/9f: 1 KB mice beside two elephants", {},
          cost=(10, 8)),
    Stage("fairness", "fairness", "[HPCC] 5.2 Figure 9g/9h: four flows join and leave", {},
          cost=(8, 9)),
    Stage("fct", "fct", "[HPCC] 5.2 Figure 10: WebSearch and FB_Hadoop at 30 % and 50 % load",
          # WebSearch 30 s: its bucket under 3 KB gets 20+ flows at 30 % (5 s: 1)
          {"cdf": ["websearch", "fb_hadoop"], "loads": "0.3,0.5", "duration": 5.0,
           "durations": {"websearch": 30.0}},
          cost=(10, 120)),
    Stage("fct-incast", "fct", "[HPCC] 5.3 Figure 11: FB_Hadoop at 30 % load plus incasts",
          {"cdf": ["fb_hadoop"], "loads": "0.3", "duration": 5.0, "incast_load": 0.02,
           "buckets": "3000,12000,48000,120000,1000000"}, cost=(10, 30)),
    Stage("reaction", "incast", "[HPCC] 5.4 Figure 13: per-ACK, per-RTT and HPCC's reaction",
          {"senders": 7}, algos="hpcc,hpcc-rtt,hpcc-ack", cost=(8, 8)),
    Stage("w-ai", "fairness", "[HPCC] 5.4 Figure 14: fairness and queue against W_AI", {},
          algos="hpcc", sweep=(("w_ai_bytes", W_AI_FULL),), cost=(8, 9)),
    Stage("gbn-vs-sr", "gbn-vs-sr", "[HPCC] 5.3 Figure 12: go-back-N against selective "
          "repeat, with the bottleneck's drops and 0.1 % and 1 % random loss", {},
          algos="hpcc,dcqcn", cost=(8, 15)),
    Stage("txrate", "txrate-vs-rxrate", "[HPCC] 3.4 Figure 6: txRate against rxRate", {},
          algos="hpcc", cost=(8, 6)),
)

QUICK: tuple[Stage, ...] = (
    Stage("incast", "incast", FULL[0].what,
          {"senders": 3, "size": 200_000, "warmup": 0.3, "observe": 0.4}, cost=(4, 3)),
    Stage("long-short", "long-short", FULL[1].what,
          {"size": 300_000, "warmup": 0.3, "after": 0.2}, cost=(4, 3)),
    Stage("mice", "mice", FULL[2].what,
          {"warmup": 0.3, "duration": 0.5, "idle_count": 60}, cost=(5, 4)),
    Stage("fairness", "fairness", FULL[3].what, {"flows": 2, "step": 0.4}, cost=(4, 3)),
    Stage("fct", "fct", FULL[4].what,
          {"cdf": ["websearch", "fb_hadoop"], "loads": "0.3,0.5", "duration": 0.3,
           "senders": 2, "max_size": 300_000, "idle_flows": 10}, cost=(5, 12)),
    Stage("fct-incast", "fct", FULL[5].what,
          {"cdf": ["fb_hadoop"], "loads": "0.3", "duration": 0.4, "senders": 2,
           "max_size": 300_000, "idle_flows": 10, "incast_load": 0.05, "incast_size": 100_000,
           "buckets": "3000,12000,48000,120000,1000000"}, cost=(5, 4)),
    Stage("reaction", "incast", FULL[6].what,
          {"senders": 3, "size": 200_000, "warmup": 0.3, "observe": 0.4},
          algos="hpcc,hpcc-rtt,hpcc-ack", cost=(4, 3)),
    Stage("w-ai", "fairness", FULL[7].what, {"flows": 2, "step": 0.4}, algos="hpcc",
          sweep=(("w_ai_bytes", (150.0, 900.0, 3000.0)),), cost=(4, 3)),
    Stage("gbn-vs-sr", "gbn-vs-sr", FULL[8].what, {"size": 1_000_000, "losses": "0,0.01"},
          algos="hpcc,dcqcn", cost=(4, 5)),
    Stage("txrate", "txrate-vs-rxrate", FULL[9].what, {"duration": 0.5}, algos="hpcc",
          cost=(4, 2)),
)


def estimate_s(st: Stage, n_algos: int) -> float:
    """The stage's rough duration: its labs and its algorithms' turns (a sweep
    runs the whole stage once per value)."""
    n = len(parse_algos(st.algos)) if st.algos else n_algos
    if st.exp == "txrate-vs-rxrate":
        n = 2                                        # its two variants, whatever the algos
    points = max(1, sum(len(v) for _, v in st.sweep))
    return points * (st.cost[0] + st.cost[1] * n)


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


class _Signals:
    """SIGINT/SIGTERM, once: with `child` set (the running stage's pid), it
    gets SIGINT and this process goes on waiting for it; without, a
    KeyboardInterrupt in the main thread.  Later signals are said on stderr
    and ignored, so that the clean-up completes.  In a process forked with
    these handlers that is not a stage's child (pyroute2's helpers), the
    signal's default action."""

    def __init__(self, raise_: bool = True):
        self.signum: int | None = None
        self.stopping = False               # later signals only said on stderr
        self.child: int | None = None
        self.raise_ = raise_                # False: only noted (the loop looks)
        self._old: dict[int, Any] = {}

    def _on(self, signum, frame) -> None:
        if os.getpid() != self.pid:
            # a child forked with this handler (pyroute2's netns helpers are
            # such children, and are stopped by SIGTERM): the default action
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        if self.stopping or self.signum is not None:
            progress("reproduce", f"signal {signum} again: already stopping, removing the lab")
            return
        self.signum = signum
        if self.child is not None:
            progress("reproduce", f"signal {signum}: stopping the stage in progress")
            try:
                os.kill(self.child, signal.SIGINT)
            except ProcessLookupError:
                pass
            return
        if self.raise_:
            raise KeyboardInterrupt
        progress("reproduce", f"signal {signum}: stopping")

    def _again(self) -> int | None:
        """The KeyboardInterrupt raised for self.signum was swallowed where
        Python ignores exceptions (hpccd.cli.errors._unraisable): re-armed,
        the signal to deliver again."""
        if not self.raise_ or os.getpid() != self.pid or self.signum is None or self.stopping:
            return None
        signum, self.signum = self.signum, None
        return signum

    def __enter__(self) -> "_Signals":
        self.pid = os.getpid()
        for s in (signal.SIGINT, signal.SIGTERM):
            self._old[s] = signal.signal(s, self._on)
        REINTERRUPT.append(self._again)
        return self

    def __exit__(self, *exc) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)
        if self._again in REINTERRUPT:
            REINTERRUPT.remove(self._again)


def _write_json(path: str, doc: dict[str, Any]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1, default=str)
        f.write("\n")
    os.replace(tmp, path)


CHILD_GRACE_S = 90.0        # a stage's child this long after the signal: killed


def _run_stage(st: Stage, algos_text: str, out: str, lab_factory) -> str:
    from . import EXPERIMENTS
    from .sweep import run_sweep

    mod = EXPERIMENTS[st.exp]
    algos = parse_algos(st.algos or algos_text)
    params = dict(st.params)
    if st.sweep:
        _, folder = run_sweep(mod, lab_factory, algos, params, out,
                              [(n, list(v)) for n, v in st.sweep])
    else:
        _, folder = mod.run(lab_factory, algos, params, out)
    return folder


def _child(st: Stage, algos_text: str, out: str, lab_factory, labs_file: str,
           w: int, held: set) -> None:
    """In the stage's child: run it, write {"folder"} or {"interrupted"} or
    {"error"} as JSON to `w`, exit.  Never returns."""
    code = 0
    try:
        os.setpgid(0, 0)
        sig = _Signals()
        sig.__enter__()                      # SIGINT/SIGTERM -> KeyboardInterrupt, once
        signal.pthread_sigmask(signal.SIG_UNBLOCK, held)
        default_hook = threading.excepthook

        def quiet(args) -> None:
            # after the interrupt the experiment unwinds: a helper thread
            # (a receiver's poller, the queue recorder) that meets its engine
            # or ring closed under it says so in a line, not a traceback
            if sig.signum is None:
                default_hook(args)
                return
            progress("reproduce", f"thread {args.thread.name if args.thread else '?'} stopped "
                                  f"with the stage: {args.exc_type.__name__}: {args.exc_value}")
        threading.excepthook = quiet

        def factory(topo):
            lab = lab_factory(topo)
            with open(labs_file, "a") as f:  # known to the parent before it is built
                f.write(lab.name + "\n")
            return lab
        try:
            res: dict[str, Any] = {"folder": _run_stage(st, algos_text, out, factory)}
        except KeyboardInterrupt:
            res = {"interrupted": True}
        except (UsageError, AlgoError, RuntimeError, OSError, ValueError) as e:
            res = {"error": str(e) or type(e).__name__}
        sig.stopping = True
        os.write(w, json.dumps(res).encode())
    except BaseException as e:              # noqa: BLE001 -- the child must not return
        try:
            os.write(w, json.dumps({"error": f"{type(e).__name__}: {e}"}).encode())
        except OSError:
            pass
        code = 1
    finally:
        os._exit(code)


def _labs_of(labs_file: str) -> list[str]:
    try:
        with open(labs_file) as f:
            return [ln.strip() for ln in f if ln.strip()]
    except FileNotFoundError:
        return []


def _remove_left(labs: list[str]) -> list[str]:
    """Take down what is left of `labs` (their state files, namespaces,
    pins); returns the errors."""
    from ..lab.names import NETNS_DIR, STATE_DIR, LabError, state_path
    from ..lab.teardown import down
    from ..lab.int_switch import pin_dir, remove_pins
    errors = []
    for name in labs:
        try:
            if os.path.exists(state_path(name, STATE_DIR)):
                down(name)
                progress("reproduce", f"lab {name}: taken down after its stage stopped")
            left = [n for n in (os.listdir(NETNS_DIR) if os.path.isdir(NETNS_DIR) else [])
                    if n.startswith(f"{name}-")]
            if left:
                errors.append(f"lab {name}: namespaces left: {', '.join(left)}")
            if os.path.isdir(pin_dir(name)):
                remove_pins(name)
        except (LabError, OSError) as e:
            errors.append(f"lab {name}: {e}")
    return errors


def _run_in_child(st: Stage, algos_text: str, out: str, lab_factory, labs_file: str,
                  sig: _Signals) -> dict[str, Any]:
    """Fork the stage's child, wait for it (passing a signal on, _Signals),
    then remove what is left of its labs; returns the child's result."""
    import select

    r, w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    # signals held over the fork: the parent's handler must know the child
    # before one is handled, the child's must be its own
    held = {signal.SIGINT, signal.SIGTERM}
    signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        pid = os.fork()
        if pid == 0:
            os.close(r)
            _child(st, algos_text, out, lab_factory, labs_file, w, held)
        sig.child = pid
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, held)
    os.close(w)
    data = b""
    stopped_at = None
    try:
        while True:
            if sig.signum is not None and stopped_at is None:
                stopped_at = time.monotonic()
            if stopped_at is not None and time.monotonic() - stopped_at > CHILD_GRACE_S:
                progress("reproduce", f"the stage's process did not stop in "
                                      f"{CHILD_GRACE_S:g} s: killed")
                os.kill(pid, signal.SIGKILL)
                stopped_at = math.inf
            ready, _, _ = select.select([r], [], [], 1.0)
            if ready:
                chunk = os.read(r, 65536)
                if not chunk:
                    break
                data += chunk
    finally:
        os.close(r)
        os.waitpid(pid, 0)
        sig.child = None
    try:
        res = json.loads(data.decode() or "{}")
    except ValueError:
        res = {}
    if not res:
        res = {"error": "the stage's process ended without a result"}
    errors = _remove_left(_labs_of(labs_file))
    if errors:
        res.setdefault("cleanup", errors)
        progress("reproduce", "clean-up: " + "; ".join(errors))
    return res


def run(stages: tuple[Stage, ...] | list[Stage], algos_text: str, out: str,
        lab_factory: Callable, report_path: str | None = None, quick: bool = False,
        clock: Callable[[], float] = time.monotonic, in_process: bool = False,
        resume: str | None = None, redo: tuple[str, ...] = ()) -> tuple[int, str, str]:
    """Run `stages` (module docstring); returns (exit status, the run's
    folder, the report's path).  `in_process`: no child per stage (tests
    with stand-in experiments; an interrupt is then a KeyboardInterrupt
    here).  `resume`: the folder of an earlier run, whose finished stages
    are kept (but those of `redo`, run again) and the others run into it."""
    n_algos = len(parse_algos(algos_text))
    earlier = 0.0
    if resume:
        folder = resume
        manifest = load_manifest(folder)
        done_keys = {e["key"] for e in manifest["stages"] if e.get("status") == "done"}
        stages = [st for st in stages if st.key not in done_keys or st.key in redo]
        manifest.setdefault("resumed", []).append(
            datetime.datetime.now().isoformat(timespec="seconds"))
        manifest["interrupted"] = None
        earlier = float(manifest.get("seconds") or 0)
        progress("reproduce", f"resuming {folder}: {len(done_keys)} stages kept, "
                              f"{len(stages)} to run")
    else:
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        folder = os.path.join(out, f"reproduce-{stamp}")
        k = 1
        while os.path.exists(folder):
            k += 1
            folder = os.path.join(out, f"reproduce-{stamp}-{k}")
        os.makedirs(folder)
        manifest = {
            "started": datetime.datetime.now().isoformat(timespec="seconds"), "quick": quick,
            "algos": algos_text, "host": os.uname().nodename, "kernel": os.uname().release,
            "cpus": os.cpu_count(), "stages": [], "labs": [], "interrupted": None}
    manifest_path = os.path.join(folder, "reproduce.json")
    _write_json(manifest_path, manifest)
    labs_file = os.path.join(folder, "labs.txt")
    estimates = [estimate_s(st, n_algos) for st in stages]
    t0 = clock()
    status = 0
    with _Signals(raise_=in_process) as sig:
        for i, st in enumerate(stages):
            if sig.signum is not None:
                break                       # signalled between two stages
            done = [s for s in manifest["stages"] if s["status"] == "done"]
            spent = clock() - t0
            est_done = sum(estimates[:i])
            scale = spent / est_done if est_done > 0 and spent > 0 else 1.0
            left = scale * sum(estimates[i:])
            progress("reproduce", f"run {i + 1} of {len(stages)}: {st.key} ({st.what}); "
                                  f"{len(done)} done in {spent:.0f} s, about {left:.0f} s left "
                                  f"(load average {' '.join(map(str, _load()))})")
            entry: dict[str, Any] = {"key": st.key, "experiment": st.exp, "what": st.what,
                                     "algos": st.algos or algos_text, "params": st.params,
                                     "sweep": [[n, list(v)] for n, v in st.sweep],
                                     "load_before": _load()}
            ts = clock()
            if in_process:
                try:
                    res = {"folder": _run_stage(st, algos_text, folder, lab_factory)}
                except KeyboardInterrupt:
                    res = {"interrupted": True}
                except (UsageError, AlgoError, RuntimeError, OSError, ValueError) as e:
                    res = {"error": str(e) or type(e).__name__}
            else:
                res = _run_in_child(st, algos_text, folder, lab_factory, labs_file, sig)
            if res.get("folder"):               # finished, even if a signal came at its end
                entry["folder"] = res["folder"]
                entry["status"] = "done"
            elif res.get("interrupted") or sig.signum is not None:
                entry["status"] = "interrupted"
                entry["error"] = f"stopped by signal {sig.signum or signal.SIGINT}"
                manifest["interrupted"] = st.key
                status = 128 + (sig.signum or signal.SIGINT)
            else:
                entry["status"] = "failed"
                entry["error"] = res.get("error")
                progress("reproduce", f"{st.key} failed: {entry['error']}; the rest goes on")
                status = status or 1
            if res.get("cleanup"):
                entry["cleanup"] = res["cleanup"]
            entry["seconds"] = round(clock() - ts, 1)
            entry["load_after"] = _load()
            manifest["labs"] = _labs_of(labs_file) or manifest["labs"]
            old = [j for j, e in enumerate(manifest["stages"]) if e["key"] == st.key]
            if old:                              # resumed: in its place
                manifest["stages"][old[0]] = entry
            else:
                manifest["stages"].append(entry)
            _write_json(manifest_path, manifest)
            if entry["status"] == "interrupted":
                progress("reproduce", f"interrupted in {st.key}: its lab is down; keeping the "
                                      f"{len(done)} finished stages")
                break
        sig.stopping = True                 # the report is written whatever comes now
        if sig.signum is not None and status < 128:       # between two stages
            status = 128 + sig.signum
            manifest["interrupted"] = manifest["interrupted"] or "(between stages)"
        manifest["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
        manifest["seconds"] = round(earlier + clock() - t0, 1)
        _write_json(manifest_path, manifest)
        from .results_report import write_report
        report = write_report(folder, report_path or os.path.join(folder, "results.md"))
    progress("reproduce", f"report {report} ({manifest['seconds']:.0f} s in all)")
    return status, folder, report


def add_parser(sub) -> None:
    rp = sub.add_parser("reproduce", help="the HPCC paper's evaluation in the lab, one command, "
                                          "and its report (docs/results.md)",
                        description="Run the set of experiments that reproduces [HPCC] "
                                    "section 5 in labs of their own and write a report: each "
                                    "of the paper's claims, the lab's figure beside it and a "
                                    "verdict, with the plots. Needs root.")
    rp.add_argument("--quick", action="store_true",
                    help="short phases, few flows and algorithms (seconds per stage; for "
                         "tests): the figures are not the paper's")
    rp.add_argument("--algos", help=f"algorithms of the stages that compare them (default "
                                    f"{DEFAULT_ALGOS}; --quick: {QUICK_ALGOS})")
    rp.add_argument("--only", metavar="STAGE,...",
                    help="run only these stages, of: " + ", ".join(s.key for s in FULL))
    rp.add_argument("--out", default="results", help="results root folder (default ./results)")
    rp.add_argument("--report", metavar="PATH",
                    help="write the report here, its plots in results/ beside it (default "
                         "<out>/reproduce-<stamp>/results.md)")
    rp.add_argument("--resume", metavar="DIR",
                    help="go on with an earlier (interrupted) run in DIR: its finished stages "
                         "are kept, the others run; with --only, only those, again if they "
                         "had finished")
    rp.add_argument("--from", dest="from_dir", metavar="DIR",
                    help="no run: write the report again from the folder of an earlier "
                         "(possibly interrupted) run")
    rp.set_defaults(func=main)


def load_manifest(folder: str) -> dict[str, Any]:
    """An earlier run's reproduce.json; UsageError if there is none."""
    path = os.path.join(folder, "reproduce.json")
    try:
        with open(path) as f:
            m = json.load(f)
        if not isinstance(m.get("stages"), list):
            raise ValueError("no list of stages")
        return m
    except (OSError, ValueError) as e:
        raise UsageError(f"{path}: not a reproduce run's manifest ({e})") from None


def select(stages: tuple[Stage, ...], only: str | None) -> list[Stage]:
    if not only:
        return list(stages)
    keys = [k.strip() for k in only.split(",") if k.strip()]
    known = {s.key for s in stages}
    bad = [k for k in keys if k not in known]
    if bad or not keys:
        raise UsageError(f"--only {only!r}: stages are {', '.join(s.key for s in stages)}")
    return [s for s in stages if s.key in keys]


def main(args) -> int:
    if args.from_dir:
        from .results_report import ReportError, write_report
        try:
            path = write_report(args.from_dir, args.report or
                                os.path.join(args.from_dir, "results.md"))
        except ReportError as e:
            print(f"hpccctl reproduce --from: {e}", file=sys.stderr)
            return 2
        print(f"report {path}")
        return 0
    if os.geteuid() != 0:
        print("hpccctl reproduce: needs root (network namespaces, BPF)", file=sys.stderr)
        return 2
    quick, algos = args.quick, args.algos
    try:
        if args.resume:
            m = load_manifest(args.resume)
            quick = bool(m.get("quick"))
            algos = algos or m.get("algos")
        algos = algos or (QUICK_ALGOS if quick else DEFAULT_ALGOS)
        parse_algos(algos)
        stages = select(QUICK if quick else FULL, args.only)
        redo = tuple(s.key for s in stages) if args.resume and args.only else ()
    except (AlgoError, UsageError) as e:
        print(f"hpccctl reproduce: {e}", file=sys.stderr)
        return 2
    from .cli import _lab_factory
    status, folder, report = run(stages, algos, args.out, _lab_factory, args.report,
                                 quick, resume=args.resume, redo=redo)
    print(f"results in {folder}\nreport {report}")
    return status
