"""The experiments' types: the protocol every experiment module implements,
the row one algorithm's run gives (a dataclass per experiment, its fields
named and typed), and the summary a run writes (summary.json), which
reps, sweep and reproduce read back.

    class Experiment(Protocol):       incast, longshort, fairness, ... (modules)
        NAME, COLUMNS, ROW, run(lab_factory, algos, params, out) -> (text, folder)

    @dataclasses.dataclass(kw_only=True)
    class IncastRow(Row):             one algorithm's incast run
        q_p99: float                  ...

A row's JSON (``Row.as_dict``, what summary.json holds under "results") is
its fields, less the private ones (``private()``: raw samples the report
plots and writes as CSV), less the optional ones that are None (``optional()``:
figures only some flows have: the native flows' send-time shares), plus the
derived figures the table shows (``derived``: e.g. KB from bytes).  Readers of summary.json (reps, claims) see the same keys as the
rows' fields; ``load_row`` (``Summary.rows``) reads a row back as its type,
which each experiment names (``ROW``): the claims read them so.
"""
from __future__ import annotations

import dataclasses
import json
import os
import types
import typing
from typing import Any, Callable, Mapping, Protocol, Sequence, runtime_checkable

__all__ = ["Experiment", "Record", "Row", "RowError", "Summary", "check", "derived", "kb",
           "load_row", "mbps", "ms", "optional", "pct", "private", "us", "value"]


@runtime_checkable
class Experiment(Protocol):
    """What ``hpccctl experiment``, reps, sweep and reproduce need of an
    experiment (each is a module: incast, longshort, ...)."""

    NAME: str
    # the summary table: (row field, column header); reps' table uses it too
    COLUMNS: Sequence[tuple[str, str]]
    # the type of its rows: what Summary.rows reads summary.json's "results" back as
    ROW: type

    def run(self, lab_factory: Callable, algos: Sequence, params: dict[str, Any],
            out: str) -> tuple[str, str]:
        """Run every algorithm of `algos` in a lab made by `lab_factory`
        with `params` (None: the experiment's default); write the results
        folder under `out`; return (summary text, results folder)."""
        ...


def check(mod: Any) -> Any:
    """`mod` if it implements Experiment; TypeError naming what it lacks."""
    missing = [a for a in ("NAME", "COLUMNS", "ROW", "run") if not hasattr(mod, a)]
    if missing or not callable(getattr(mod, "run", None)):
        raise TypeError(f"experiment {getattr(mod, '__name__', mod)!r} lacks "
                        f"{', '.join(missing) or 'a callable run'}")
    return mod


def private(**kw) -> Any:
    """A row field kept out of the JSON (raw samples for the report)."""
    return dataclasses.field(default=None, repr=False, compare=False,
                             metadata={"private": True}, **kw)


def optional() -> Any:
    """A row figure that some flows do not have: left out of the JSON when None."""
    return dataclasses.field(default=None, metadata={"optional": True})


class derived:
    """A figure computed from another field for the table (and the JSON):
    ``q_p99_kb = derived("q_p99", kb)``."""

    def __init__(self, field: str, convert: Callable[[float], float]):
        self.field, self.convert = field, convert

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        v = getattr(obj, self.field)
        # a row read back without the figure (an older summary): none derived either
        return None if v is None else self.convert(v)


def kb(b: float) -> float:
    return b / 1e3


def mbps(bps: float) -> float:
    return bps / 1e6


def ms(s: float) -> float:
    return s * 1e3


def us(s: float) -> float:
    return s * 1e6


def pct(share: float) -> float:
    return share * 100


@dataclasses.dataclass(kw_only=True)
class Record:
    """A typed row of a summary: its JSON is ``as_dict()`` (module docstring)."""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.metadata.get("private") or (f.metadata.get("optional") and v is None):
                continue
            out[f.name] = _plain(v)
        seen = set(out)
        for cls in reversed(type(self).__mro__):
            for name, attr in vars(cls).items():
                if isinstance(attr, derived) and name not in seen:
                    out[name] = getattr(self, name)
                    seen.add(name)
        return out


@dataclasses.dataclass(kw_only=True)
class Row(Record):
    """One algorithm's run of an experiment: what every experiment reports
    about it.  Each experiment subclasses it with its own figures."""

    algo: str
    cpu_busy: float                     # share of the machine's CPU time, busy
    queue_bound: bool                   # the emulated link, not the CPUs, was the bottleneck
    verdict: str                        # measure.bottleneck_verdict's text
    # where the native flows' sending time went (native.send_time); tcp-hpcc's
    # from its engines and the kernel's pacer (kernel_cc.KernelCc.pacing:
    # pace_lost, timer_late_us and asked, the link's share HPCC's rates
    # asked for); other kernel flows have none
    wnd_limited: float | None = optional()
    pace_lost: float | None = optional()
    timer_late_us: float | None = optional()
    asked: float | None = optional()

    def send_time(self, shares: Mapping[str, float]) -> "Row":
        """Set the send-time shares native.send_time or KernelCc.pacing
        measured (none for other kernel flows)."""
        for k, v in shares.items():
            setattr(self, k, v)
        return self


def value(row: "Record | Mapping[str, Any]", key: str, default: Any = "") -> Any:
    """Figure `key` of a row, typed or read back from JSON (report.table)."""
    if isinstance(row, Record):
        v = getattr(row, key, None)          # an optional figure the row lacks: as absent
        return default if v is None else v
    return row.get(key, default)


class RowError(ValueError):
    """A summary's row that its row type cannot read: one line naming the
    file and the key."""


# a row of reps' aggregates (reps.json, sweep.json) has, beside the row's
# own fields, how many runs it aggregates
AGGREGATE_KEYS = ("runs",)


def load_row(cls: type, doc: Mapping[str, Any], where: str = "summary.json",
             aggregated: bool = False) -> Any:
    """Row type `cls` (a dataclass, its nested rows too: an FctRow's buckets)
    from its JSON `doc`, read back from file `where`.  A field the JSON lacks
    (a summary written before the field was added) is None, as a figure not
    measured; a derived figure is the one the summary holds (a reps'
    aggregate's own statistics), else computed again from its field; a key
    that is no field of `cls` is refused (RowError).  `aggregated`: a row of
    reps' aggregates, whose figures are {median, min, max, n, values} (read
    by the same names) and flags "k/n"."""
    if not isinstance(doc, Mapping):
        raise RowError(f"{where}: a {cls.__name__} is an object, not {type(doc).__name__}")
    if aggregated and "median" in doc:
        return doc                          # a figure's statistics, not a nested row
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if not f.metadata.get("private")}
    derived_names = {n for c in cls.__mro__ for n, a in vars(c).items()
                     if isinstance(a, derived)}
    for k in doc:
        if k not in fields and k not in derived_names and \
                not (aggregated and k in AGGREGATE_KEYS):
            raise RowError(f"{where}: key {k!r} is not a field of {cls.__name__}")
    kw = {n: _load_value(hints.get(n), doc.get(n), f"{where}: {n}", aggregated)
          for n in fields}
    row = cls(**kw)
    for n in derived_names & set(doc):
        row.__dict__[n] = doc[n]            # over the class's derived (a non-data descriptor)
    return row


def _load_value(hint: Any, v: Any, where: str, aggregated: bool) -> Any:
    """`v` as type `hint`: nested rows (dataclasses, lists of them) loaded,
    anything else as JSON gave it."""
    if v is None or hint is None:
        return v
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType) and len(args) == 1:
        return _load_value(args[0], v, where, aggregated)
    if origin is list and len(args) == 1 and dataclasses.is_dataclass(args[0]):
        if not isinstance(v, list):
            raise RowError(f"{where} is a list of {args[0].__name__}, not {type(v).__name__}")
        return [load_row(args[0], x, where, aggregated) for x in v]
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return load_row(hint, v, where, aggregated)
    return v


def _plain(v: Any) -> Any:
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return v.as_dict() if hasattr(v, "as_dict") else dataclasses.asdict(v)
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


@dataclasses.dataclass
class Summary:
    """What one run of an experiment writes as summary.json: the experiment,
    its parameters, a row per algorithm run ("results"), the algorithms
    skipped with their reasons, and the experiment's own top-level figures
    (``extra``: mice's idle p50, fct's workloads and loads, ...).  Read
    back, "results" are dicts (a row's JSON), and ``rows(RowType)`` gives
    them typed; reps' aggregates keep the same keys with {median, min, max,
    n, values} for each figure."""

    experiment: str
    params: dict[str, Any]
    results: list[Any]
    skipped: dict[str, str] | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    source: str = ""                    # the file it was loaded from (not in the JSON)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"experiment": self.experiment, "params": self.params,
                               "results": [r.as_dict() if isinstance(r, Record) else r
                                           for r in self.results]}
        if self.skipped is not None:
            doc["skipped"] = self.skipped
        return {**doc, **self.extra}

    def rows(self, row: type, aggregated: bool = False) -> list[Any]:
        """The results as rows of type `row` (load_row; RowError naming the
        summary's file for a key `row` does not have).  `aggregated`: the
        results are reps' aggregates (a reps.json read as a summary)."""
        where = self.source or "summary.json"
        return [r if isinstance(r, row) else load_row(row, r, where, aggregated)
                for r in self.results]

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "Summary":
        known = ("experiment", "params", "results", "skipped")
        return cls(experiment=doc.get("experiment", ""), params=dict(doc.get("params") or {}),
                   results=list(doc.get("results") or []), skipped=doc.get("skipped"),
                   extra={k: v for k, v in doc.items() if k not in known})

    @classmethod
    def load(cls, folder: str) -> "Summary":
        """The summary.json of results folder `folder`."""
        path = os.path.join(folder, "summary.json")
        with open(path) as f:
            return dataclasses.replace(cls.from_json(json.load(f)), source=path)
