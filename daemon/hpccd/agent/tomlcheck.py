"""Validation of TOML files with errors that name the file, the line and the key.

Shared by the topology files (hpccd.lab.topology) and the daemon's configuration
(hpccd.agent.config): one way of finding lines, one error shape, one set of typed
getters.  tomllib gives no positions, so :class:`LineIndex` finds them by
scanning the text for table headers (the n-th ``[[links]]``) and for the key
within its table.

A validator subclasses :class:`Validator`, sets ``error`` to its exception
class (a :class:`TomlError`), and calls ``self.fail(path, message)`` with the
path of the value at fault as tomllib's result is indexed, e.g.
``("links", 3, "rate_mbps")``; the message then reads
``file:LINE: links[3].rate_mbps: message``.
"""
from __future__ import annotations

import collections
import math
import re
import tomllib
from typing import Any, NoReturn

__all__ = ["TomlError", "LineIndex", "Validator", "key_name", "toml_type"]


class TomlError(ValueError):
    """A TOML file is unreadable or breaks its schema.  ``file``, ``line``
    (1-based, or None when the problem has no one place) and ``key``
    (dotted, e.g. ``links[3].rate_mbps``, or None) say where."""

    def __init__(self, file: str, line: int | None, key: str | None, message: str):
        self.file, self.line, self.key, self.message = file, line, key, message
        where = file if line is None else f"{file}:{line}"
        super().__init__(f"{where}: {key}: {message}" if key else f"{where}: {message}")


# ---- line numbers ------------------------------------------------------------------

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\[\]]+?)\s*(\]\]?)\s*(#.*)?$")
_BARE_OR_QUOTED = r'(?:[A-Za-z0-9_-]+|"[^"]*"|\'[^\']*\')'
_KEY_LINE = re.compile(r"^\s*(" + _BARE_OR_QUOTED + r"(?:\s*\.\s*" + _BARE_OR_QUOTED
                       + r")*)\s*=(.*)$")
_INLINE_KEY = re.compile(r"[{,]\s*(" + _BARE_OR_QUOTED + r")\s*=")


def _split_key(dotted: str) -> tuple[str, ...]:
    parts = re.findall(_BARE_OR_QUOTED, dotted)
    return tuple(p[1:-1] if p[:1] in "\"'" else p for p in parts)


class LineIndex:
    """Where each table and key of a TOML text is: path -> 1-based line.

    A path is a tuple of keys and array indices as tomllib's result is
    indexed, e.g. ("links", 3, "rate_mbps") or ("switches", 0, "ecn",
    "kmax_bytes").  Recognised: ``[table]`` and ``[[array]]`` headers (a
    ``[array.sub]`` header belongs to the array's last element), ``key =``
    and dotted ``a.b =`` lines, and keys of one-line inline tables
    ``k = { a = 1, b = 2 }``.  Lines inside multi-line strings are skipped.
    A path not found falls back to its longest found prefix (a missing
    key is reported at its table's header)."""

    def __init__(self, text: str):
        self.lines: dict[tuple, int] = {}
        counts: dict[tuple, int] = collections.Counter()
        section: tuple = ()
        in_string: str | None = None
        for no, raw in enumerate(text.splitlines(), 1):
            line = raw
            if in_string:
                if line.count(in_string) % 2 == 1:
                    in_string = None
                continue
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            m = _HEADER.match(line)
            if m and len(m.group(1)) == len(m.group(3)):
                name = _split_key(m.group(2))
                if m.group(1) == "[[":
                    idx = counts[name]
                    counts[name] += 1
                    section = self._resolve(name[:-1], counts) + (name[-1], idx)
                    # the array itself is where its first element starts
                    self.lines.setdefault(section[:-1], no)
                else:
                    section = self._resolve(name, counts)
                self._mark(section, no)
                continue
            m = _KEY_LINE.match(line)
            if m:
                path = section + _split_key(m.group(1))
                self._mark(path, no)
                rest = m.group(2)
                if rest.lstrip().startswith("{"):
                    for k in _INLINE_KEY.findall(rest):
                        self.lines.setdefault(path + _split_key(k), no)
                for q in ('"""', "'''"):
                    if rest.count(q) % 2 == 1:
                        in_string = q
                        break

    def _mark(self, path: tuple, no: int) -> None:
        """Line `no` for `path` and for every prefix not seen before: the
        tables a dotted header or key creates implicitly (``[[a.b]]``,
        ``a.b = 1`` define ``a`` there; tests/fuzz found errors about such
        an ``a`` without a line)."""
        for n in range(1, len(path) + 1):
            self.lines.setdefault(path[:n], no)

    @staticmethod
    def _resolve(name: tuple, counts: dict) -> tuple:
        """Insert the last index after every prefix that is an array of tables."""
        out: tuple = ()
        for i, part in enumerate(name):
            out += (part,)
            n = counts.get(name[:i + 1], 0)
            if n:
                out += (n - 1,)
        return out

    def line(self, path: tuple) -> int | None:
        for n in range(len(path), 0, -1):
            if path[:n] in self.lines:
                return self.lines[path[:n]]
        return None


def key_name(path: tuple) -> str:
    """("links", 3, "rate_mbps") -> "links[3].rate_mbps"."""
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out


def toml_type(v: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a float", str: "a string",
            list: "an array", dict: "a table"}.get(type(v), type(v).__name__)


# ---- validators ----------------------------------------------------------------------

class Validator:
    """Typed getters over a parsed TOML document that fail with the file,
    line and key.  Subclasses set ``error`` and walk their schema."""

    error: type[TomlError] = TomlError

    def __init__(self, text: str, file: str):
        self.text, self.file = text, file
        self.index = LineIndex(text)

    def fail(self, path: tuple, message: str) -> NoReturn:
        raise self.error(self.file, self.index.line(path), key_name(path) or None, message)

    def parse(self) -> dict:
        """The TOML document; a syntax error names tomllib's line."""
        try:
            return tomllib.loads(self.text)
        except tomllib.TOMLDecodeError as e:
            m = re.search(r"at line (\d+)", str(e))
            raise self.error(self.file, int(m.group(1)) if m else None, None,
                             f"TOML syntax: {e}") from None

    def keys(self, table: Any, path: tuple, allowed: tuple[str, ...] | dict) -> dict:
        if not isinstance(table, dict):
            self.fail(path, f"must be a table, not {toml_type(table)}")
        for k in table:
            if k not in allowed:
                self.fail(path + (k,), f"unknown key (allowed here: {', '.join(allowed)})")
        return table

    def int_(self, table: dict, path: tuple, key: str, default: int | None = None,
             lo: int | None = None, hi: int | None = None) -> int:
        if key not in table:
            if default is None:
                self.fail(path + (key,), "required key is missing")
            return default
        v = table[key]
        if isinstance(v, bool) or not isinstance(v, int):
            self.fail(path + (key,), f"must be an integer, not {toml_type(v)} {v!r}")
        self._range(path + (key,), v, lo, hi)
        return v

    def float_(self, table: dict, path: tuple, key: str, default: float | None = None,
               lo: float | None = None, hi: float | None = None) -> float:
        """A number (integer or float, finite)."""
        if key not in table:
            if default is None:
                self.fail(path + (key,), "required key is missing")
            return default
        v = table[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            self.fail(path + (key,), f"must be a finite number, not {toml_type(v)} {v!r}")
        self._range(path + (key,), v, lo, hi)
        return float(v)

    def _range(self, path: tuple, v: float, lo: float | None, hi: float | None) -> None:
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            rng = (f"{lo}..{hi}" if lo is not None and hi is not None
                   else f">= {lo}" if lo is not None else f"<= {hi}")
            self.fail(path, f"{v} is out of range ({rng})")

    def str_(self, table: dict, path: tuple, key: str, default: str | None = None,
             choices: tuple[str, ...] | None = None) -> str:
        if key not in table:
            if default is None:
                self.fail(path + (key,), "required key is missing")
            return default
        v = table[key]
        if not isinstance(v, str):
            self.fail(path + (key,), f"must be a string, not {toml_type(v)} {v!r}")
        if choices is not None and v not in choices:
            self.fail(path + (key,), f"{v!r} is not one of {', '.join(choices)}")
        return v

    def bool_(self, table: dict, path: tuple, key: str, default: bool | None = None) -> bool:
        if key not in table:
            if default is None:
                self.fail(path + (key,), "required key is missing")
            return default
        v = table[key]
        if not isinstance(v, bool):
            self.fail(path + (key,), f"must be true or false, not {toml_type(v)} {v!r}")
        return v

    def array(self, doc: dict, key: str, path: tuple = ()) -> list:
        """An array of tables ([[key]]), empty when absent."""
        v = doc.get(key, [])
        if not isinstance(v, list) or not all(isinstance(t, dict) for t in v):
            self.fail(path + (key,), f"must be an array of tables ([[{key_name(path + (key,))}]])")
        return v
