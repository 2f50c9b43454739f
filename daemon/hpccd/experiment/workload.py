"""Flow-size workloads of the ``fct`` experiment: empirical CDFs read from
files, inverse-transform sampling, Poisson arrivals and size buckets ([HPCC]
section 5.1, "Traffic loads": WebSearch and FB_Hadoop at 30% and 50%
average link load).

The published distributions are bundled with the package
(``hpccd/workloads/NAME.cdf``, each with its source in its header lines,
docs/experiments.md "fct"): ``websearch``, ``fb_hadoop``, ``ali_storage``
and ``google_rpc``.  A workload is a file, one point a line::

    # comment (from '#' to the end of the line); blank lines are ignored
    SIZE_BYTES  CUMULATIVE
    SIZE_BYTES  ANYTHING  CUMULATIVE     (three columns: the middle is ignored)

CUMULATIVE is the probability that a flow is no larger than SIZE_BYTES,
as fractions (the last point 1.0) or percent (the last point 100); which
one is read off the last point.  Sizes and probabilities must not
decrease from one point to the next; the file ends at 1.0 or 100.  The
HPCC authors' simulator files (``traffic_gen/*_distribution.txt``: size
in bytes, a space, the cumulative percent) are of this format and load
unchanged.

Between two points sizes are uniformly distributed (the CDF is
piecewise linear), so a size is drawn by inverse transform: u uniform in
[0, 1), the size where the CDF crosses u, rounded to whole bytes (at
least 1).  A first point with a probability above 0 is a point mass: a
share p0 of the flows has exactly that size.  Everything random is drawn
from ``random.Random`` seeded with a string (deterministic across runs
and Python processes), one stream for arrival times, one for sizes and
one for the endpoints, so the same seed gives every algorithm the same
flows.
"""
from __future__ import annotations

import bisect
import math
import os
import random
from importlib import resources
from typing import Mapping, NamedTuple, Sequence

__all__ = ["Cdf", "CdfError", "WorkloadMissing", "parse_cdf", "load_cdf", "cdf_dirs",
           "resolve", "load_workloads", "FlowSpec", "schedule", "parse_buckets",
           "bucket_labels", "bucket_of", "PUBLISHED", "DEFAULT_BUCKETS", "size_text",
           "bundled_dir", "source_lines"]

ENV_DIR = "HPCCD_CDF_DIR"
BUNDLED_DIR = "workloads"        # in the hpccd package: NAME.cdf (pyproject.toml package-data)
# Size buckets' upper edges, bytes: [0, 3 KB), [3 KB, 12 KB), ... [1 MB, inf).
# 3 KB is [HPCC]'s short-flow figure (section 5.2: "flows shorter than 3KB"),
# then factors of four up to 192 KB, and 1 MB (the long-short flow).
DEFAULT_BUCKETS = (3_000, 12_000, 48_000, 192_000, 1_000_000)

# The named workloads: the bundled files' names.  Where each one's points come
# from is in its file's header lines (source_lines), not repeated here.
PUBLISHED = ("websearch", "fb_hadoop", "ali_storage", "google_rpc")
FORMAT_HINT = ("one point a line, 'SIZE_BYTES CUMULATIVE' (or three columns, the middle "
               "ignored), CUMULATIVE as fractions ending at 1.0 or percent ending at 100, "
               "neither column decreasing, '#' starts a comment (docs/experiments.md \"fct\")")


class CdfError(ValueError):
    """A CDF file that cannot be used; the message names the file (and line)."""


class WorkloadMissing(CdfError):
    """A named workload whose file is in none of the searched folders."""


class Cdf(NamedTuple):
    """An empirical flow-size CDF: P(size <= sizes[i]) = probs[i]."""
    name: str
    path: str
    sizes: tuple[float, ...]       # bytes, non-decreasing
    probs: tuple[float, ...]       # cumulative fractions, non-decreasing, the last 1.0
    unit: str                      # how the file gave them: "fraction" or "percent"

    def mean(self, cap: float | None = None) -> float:
        """E[size] (E[min(size, cap)] with a cap), bytes, of the piecewise-
        linear CDF: the first point's mass at its size, then each segment's
        mass uniform between its two sizes."""
        def capped_segment(a: float, b: float) -> float:
            if cap is None or b <= cap:
                return (a + b) / 2
            if a >= cap:
                return cap
            w = b - a                # a < cap < b
            return (cap - a) / w * (a + cap) / 2 + (b - cap) / w * cap

        s, p = self.sizes, self.probs
        m = p[0] * (s[0] if cap is None else min(s[0], cap))
        for i in range(1, len(s)):
            if p[i] > p[i - 1]:
                m += (p[i] - p[i - 1]) * capped_segment(s[i - 1], s[i])
        return m

    def cdf(self, x: float) -> float:
        """P(size <= x)."""
        s, p = self.sizes, self.probs
        if x < s[0]:
            return 0.0
        j = bisect.bisect_right(s, x) - 1          # the last point with size <= x
        if j >= len(s) - 1:
            return 1.0
        return p[j] + (p[j + 1] - p[j]) * (x - s[j]) / (s[j + 1] - s[j])

    def quantile(self, u: float) -> float:
        """The size at which the CDF reaches u (0 <= u < 1), not rounded."""
        s, p = self.sizes, self.probs
        i = bisect.bisect_left(p, u)               # the first point with probs[i] >= u
        if i == 0:
            return s[0]
        if i >= len(p):
            return s[-1]
        return s[i - 1] + (s[i] - s[i - 1]) * (u - p[i - 1]) / (p[i] - p[i - 1])

    def sample(self, rng: random.Random, cap: int | None = None) -> int:
        """One flow size, whole bytes (at least 1), at most `cap`."""
        n = max(1, int(self.quantile(rng.random()) + 0.5))
        return n if cap is None else min(n, cap)


def parse_cdf(text: str, path: str, name: str | None = None) -> Cdf:
    """Read a CDF in the module docstring's format; CdfError names `path`
    and the line of the first problem."""
    sizes: list[float] = []
    probs: list[float] = []
    lines: list[int] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{path}:{lineno}"
        fields = line.split()
        if len(fields) not in (2, 3):
            raise CdfError(f"{where}: {len(fields)} columns in {raw.strip()!r}; "
                           f"expected {FORMAT_HINT}")
        try:
            size, prob = float(fields[0]), float(fields[-1])
        except ValueError:
            raise CdfError(f"{where}: not numbers: {raw.strip()!r}; expected "
                           f"{FORMAT_HINT}") from None
        if not (math.isfinite(size) and size >= 0):
            raise CdfError(f"{where}: size {fields[0]} is not a byte count >= 0")
        if not (math.isfinite(prob) and prob >= 0):
            raise CdfError(f"{where}: cumulative value {fields[-1]} is not >= 0")
        if sizes and size < sizes[-1]:
            raise CdfError(f"{where}: size {fields[0]} is below the previous point's "
                           f"{sizes[-1]:g} (line {lines[-1]}): sizes must not decrease")
        if probs and prob < probs[-1]:
            raise CdfError(f"{where}: cumulative value {fields[-1]} is below the previous "
                           f"point's {probs[-1]:g} (line {lines[-1]}): a CDF must not decrease")
        sizes.append(size)
        probs.append(prob)
        lines.append(lineno)
    if not sizes:
        raise CdfError(f"{path}: no points; expected {FORMAT_HINT}")
    last = probs[-1]
    if abs(last - 100.0) <= 1e-6:
        unit, scale = "percent", 100.0
    elif abs(last - 1.0) <= 1e-9:
        unit, scale = "fraction", 1.0
    else:
        raise CdfError(f"{path}:{lines[-1]}: the last cumulative value is {last:g}; a CDF "
                       f"ends at 1.0 (fractions) or 100 (percent)")
    ps = [min(1.0, x / scale) for x in probs]
    ps[-1] = 1.0
    cdf = Cdf(name or _stem(path), path, tuple(sizes), tuple(ps), unit)
    if cdf.mean() <= 0:
        raise CdfError(f"{path}: every flow would be 0 bytes (mean size 0)")
    return cdf


def load_cdf(path: str, name: str | None = None) -> Cdf:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise CdfError(f"{path}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise CdfError(f"{path}: not a text file ({e.reason})") from None
    return parse_cdf(text, path, name)


def _stem(path: str) -> str:
    base = os.path.basename(path)
    return base.rsplit(".", 1)[0] if "." in base[1:] else base


def bundled_dir() -> str:
    """The folder of the bundled NAME.cdf files, in the installed package."""
    return str(resources.files("hpccd").joinpath(BUNDLED_DIR))


def source_lines(path: str) -> list[str]:
    """The header comment of a CDF file (its source), without the '#'s:
    the comment lines before the first point."""
    out = []
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.strip()
            if line and not line.startswith("#"):
                break
            if line.lstrip("#").strip():
                out.append(line.lstrip("#").strip())
    return out


def cdf_dirs(cdf_dir: str | None = None, env: Mapping[str, str] | None = None) -> list[str]:
    """The folders a named workload's file is looked for in: `cdf_dir`
    (--cdf-dir) alone, else $HPCCD_CDF_DIR alone, else the bundled folder."""
    env = os.environ if env is None else env
    if cdf_dir:
        return [cdf_dir]
    if env.get(ENV_DIR):
        return [env[ENV_DIR]]
    return [bundled_dir()]


def resolve(spec: str, dirs: Sequence[str]) -> tuple[str, str]:
    """A --cdf entry -> (workload name, file).  A name of PUBLISHED is
    NAME.cdf in the first of `dirs` that has it; anything else is a file
    path, named by its file name without the extension."""
    key = spec.strip().lower()
    if key in PUBLISHED:
        tried = [os.path.join(d, f"{key}.cdf") for d in dirs]
        for p in tried:
            if os.path.isfile(p):
                return key, p
        bundled = os.path.join(bundled_dir(), f"{key}.cdf")
        raise WorkloadMissing(
            f"workload {key}: no file {' or '.join(tried)} (the folder given by --cdf-dir or "
            f"${ENV_DIR} replaces the bundled one, {bundled_dir()}). Put it there as "
            f"{FORMAT_HINT}, or drop --cdf-dir / ${ENV_DIR} to use the bundled "
            f"{bundled}.")
    path = os.path.expanduser(spec.strip())
    if not os.path.isfile(path):
        raise CdfError(f"{spec}: no such file (a --cdf entry is one of {', '.join(PUBLISHED)} "
                       f"or the path of a CDF file)")
    return _stem(path), path


def load_workloads(specs: Sequence[str], cdf_dir: str | None = None,
                   env: Mapping[str, str] | None = None
                   ) -> tuple[list[Cdf], dict[str, str]]:
    """--cdf entries (each may be a comma list) -> (loaded CDFs, {entry:
    why it cannot be used}).  A missing or broken file costs its workload
    only."""
    dirs = cdf_dirs(cdf_dir, env)
    out: list[Cdf] = []
    bad: dict[str, str] = {}
    seen: set[str] = set()
    for spec in (s.strip() for item in specs for s in item.split(",")):
        if not spec or spec in seen:
            continue
        seen.add(spec)
        try:
            name, path = resolve(spec, dirs)
            cdf = load_cdf(path, name)
        except CdfError as e:
            bad[spec] = str(e)
            continue
        if any(c.name == cdf.name for c in out):
            bad[spec] = f"{spec}: a workload named {cdf.name!r} is already loaded"
            continue
        out.append(cdf)
    return out, bad


# ---- arrivals --------------------------------------------------------------------------

class FlowSpec(NamedTuple):
    idx: int
    t_s: float          # arrival, seconds from the start of the window
    size: int           # bytes
    src: str
    dst: str


def mean_interarrival_s(mean_bytes: float, load: float, rate_bps: float) -> float:
    """Seconds between arrivals for `load` x `rate_bps` of flows of
    `mean_bytes` on average: mean_bytes x 8 / (load x rate)."""
    return mean_bytes * 8 / (load * rate_bps)


def schedule(cdf: Cdf, load: float, rate_bps: float, duration_s: float,
             senders: Sequence[str], receivers: Sequence[str], seed: int | str,
             cap: int | None = None) -> list[FlowSpec]:
    """Poisson arrivals over [0, duration_s): exponential gaps of mean
    mean_interarrival_s(E[min(size, cap)], load, rate), each flow's size
    from `cdf` (capped), its sender and receiver uniformly from the lists.
    One aggregate process: every flow crosses the one bottleneck, so its
    load is load x rate on average (the per-host processes of the HPCC
    simulator's generator add up to the same)."""
    if not 0 < load < 1:
        raise ValueError(f"load {load}: a share of the link rate, 0 < load < 1")
    gap = mean_interarrival_s(cdf.mean(cap), load, rate_bps)
    tag = f"{seed}/{cdf.name}/{load:g}"
    r_t, r_size, r_ends = (random.Random(f"{tag}/{what}") for what in ("t", "size", "ends"))
    out: list[FlowSpec] = []
    t = r_t.expovariate(1 / gap)
    while t < duration_s:
        out.append(FlowSpec(len(out), t, cdf.sample(r_size, cap), r_ends.choice(senders),
                            r_ends.choice(receivers)))
        t += r_t.expovariate(1 / gap)
    return out


def incast_schedule(load: float, rate_bps: float, duration_s: float, senders: Sequence[str],
                    receivers: Sequence[str], flows_each: int, size: int, seed: int | str,
                    first_idx: int = 0) -> list[list[FlowSpec]]:
    """Incast events on top of a background schedule ([HPCC] section 5.3:
    "randomly selecting 60 senders and one receiver, each sending 500KB ...
    2% of the network capacity"), scaled to the lab's hosts: Poisson events
    of mean gap flows_each x size x 8 / (load x rate) over [0, duration_s),
    each `flows_each` flows of `size` bytes starting at the same moment
    toward one receiver drawn uniformly, from the senders in turn (a host
    sends several when flows_each exceeds the senders).  Returns the events,
    each a list of FlowSpec, numbered from `first_idx`."""
    if not 0 < load < 1:
        raise ValueError(f"incast load {load}: a share of the link rate, 0 < load < 1")
    if flows_each < 1 or size < 1:
        raise ValueError(f"incast of {flows_each} flows of {size} bytes: both at least 1")
    gap = mean_interarrival_s(flows_each * size, load, rate_bps)
    tag = f"{seed}/incast/{load:g}/{flows_each}/{size}"
    r_t, r_dst = (random.Random(f"{tag}/{what}") for what in ("t", "dst"))
    events: list[list[FlowSpec]] = []
    idx = first_idx
    t = r_t.expovariate(1 / gap)
    while t < duration_s:
        dst = r_dst.choice(receivers)
        ev = []
        for k in range(flows_each):
            ev.append(FlowSpec(idx, t, size, senders[k % len(senders)], dst))
            idx += 1
        events.append(ev)
        t += r_t.expovariate(1 / gap)
    return events


# ---- size buckets ----------------------------------------------------------------------

def parse_buckets(text: str | Sequence[int] | None) -> tuple[int, ...]:
    """"3000,12000,..." (bytes, strictly increasing, > 0) -> the buckets'
    upper edges; None: DEFAULT_BUCKETS."""
    if text is None:
        return DEFAULT_BUCKETS
    items = text.split(",") if isinstance(text, str) else list(text)
    try:
        edges = tuple(int(str(x).strip()) for x in items if str(x).strip())
    except ValueError:
        raise ValueError(f"buckets {text!r}: byte counts separated by commas") from None
    if not edges or any(e <= 0 for e in edges) or any(b <= a for a, b in zip(edges, edges[1:])):
        raise ValueError(f"buckets {text!r}: byte counts > 0, strictly increasing")
    return edges


def size_text(n: int) -> str:
    """1000000 -> "1MB", 3000 -> "3KB", 1500 -> "1500B" (decimal units)."""
    if n % 1_000_000 == 0:
        return f"{n // 1_000_000}MB"
    if n % 1000 == 0:
        return f"{n // 1000}KB"
    return f"{n}B"


def bucket_labels(edges: Sequence[int]) -> list[str]:
    """[lo, hi) per bucket: "<3KB", "3KB-12KB", ..., ">=1MB"."""
    out = [f"<{size_text(edges[0])}"]
    out += [f"{size_text(a)}-{size_text(b)}" for a, b in zip(edges, edges[1:])]
    return out + [f">={size_text(edges[-1])}"]


def bucket_of(size: int, edges: Sequence[int]) -> int:
    """Index of the bucket [edges[i-1], edges[i]) that holds `size`."""
    return bisect.bisect_right(edges, size)
