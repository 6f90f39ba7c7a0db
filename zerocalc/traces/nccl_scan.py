"""The calls of a block of an NCCL log, column by column (:class:`Scan`): the ``re`` scanner that
finds them (:func:`_extract_re`, see benchmarks/bench_nccl_log.py), the Init and TUNING lines among
the others, and the storing of a block's calls into a scan as codes, numbers and lines (or, for an
aggregated read, as sums per distinct call).
"""

from __future__ import annotations

import functools
import operator
import re
from collections import defaultdict
from dataclasses import dataclass, field
from itertools import count, islice, repeat
from typing import Any

import numpy as np

from zerocalc.traces.nccl_lines import (
    _DIRECT,
    _FACTORS,
    _INIT_MARKER,
    _KEY,
    _MARKER,
    _MERGED,
    _NA,
    _ROW_FIELDS,
    _ROWS,
    _TIERS,
    _TUNING_MARKER,
    _UNMATCHED,
    INIT,
    NCCL_COLL_OPS,
    TUNING,
    _check,
    _int,
    _prefix,
    _text,
)
from zerocalc.traces.records import SkipLog, bad


@dataclass
class Scan:
    """The calls of a run of whole lines of a log, column by column, with what else it said.

    Line numbers count from 1 at the start of the run. A few-valued field is a code array into
    ``tables[name]`` (its distinct raw values, ``None`` where the line lacks it: bytes while
    scanning, text once frozen).
    """

    lines: int = 0
    columns: dict[str, list[Any]] = field(default_factory=lambda: {
        name: [] for name in (*_FACTORS, "line", "pid", "count", "opcount")})
    tables: dict[str, Any] = field(default_factory=lambda: {name: defaultdict(count().__next__)
                                                            for name in _FACTORS})
    skipped: SkipLog = field(default_factory=SkipLog)
    #: While scanning: the distinct texts of each merged group (:data:`_MERGED`), and for each of
    #: its fields the code of each text's part.
    merged: dict[str, Any] = field(default_factory=lambda: {key: defaultdict(count().__next__)
                                                            for key in _MERGED})
    merged_codes: dict[str, list[list[int]]] = field(default_factory=lambda: {
        key: [[] for _ in names] for key, (names, _) in _MERGED.items()})
    #: ``Init COMPLETE`` lines in order: (host, pid, comm, rank, nranks).
    inits: list[tuple[Any, ...]] = field(default_factory=list)
    #: TUNING lines in order: (line, host, pid, tid, op, algorithm, protocol, bytes).
    tunings: list[tuple[Any, ...]] = field(default_factory=list)

    #: The distinct (host code, pid) pairs of the calls, once frozen.
    processes: tuple[np.ndarray, np.ndarray] = (np.zeros(0, np.int32), np.zeros(0, np.int64))
    #: Aggregated: keep per distinct call (:data:`_KEY` codes and pid) its number of calls and the
    #: sum of their counts, not a row per call (memory that does not grow with the log's length).
    #: Once frozen, the columns hold one row per distinct call: its fields, ``count`` the sum
    #: and ``calls`` the number of calls (the table's ``aggregated_calls``).
    aggregate: bool = False
    sums: dict[tuple[int, ...], list[int]] = field(default_factory=dict)
    #: Sequence: keep per call only an int32 code into the distinct calls (:data:`CALL`: every field
    #: a row keeps but its line and opCount, ``distinct``), its line and its opCount (``seq``: lists
    #: of one array per block; :mod:`~zerocalc.traces.nccl_fold` folds them). Once frozen, the columns
    #: hold one row per distinct call (its fields),
    #: in code order.
    sequence: bool = False
    distinct: dict[tuple[int, ...], int] = field(default_factory=dict)
    seq: dict[str, list[np.ndarray]] = field(default_factory=lambda: {"code": [], "line": [], "opcount": []})

    def freeze(self) -> Scan:
        """Plain lists and arrays only (picklable): each code table becomes its list of values,
        decoded. The columns stay one array per block, joined once with those of the other scans
        (:class:`~zerocalc.traces.nccl_table._Table`)."""
        self.tables = {name: list(map(_text, table)) for name, table in self.tables.items()}
        self.merged, self.merged_codes = {}, {}
        if self.aggregate:
            keys = np.array(list(self.sums), np.int64).reshape(len(self.sums), len(_KEY) + 1)
            sums = np.array(list(self.sums.values()), np.int64).reshape(len(self.sums), 2)
            self.columns = {name: [_small(keys[:, i])] for i, name in enumerate(_KEY)}
            self.columns.update(pid=[keys[:, -1]], calls=[sums[:, 0]], count=[sums[:, 1]])
            self.sums = {}
        if self.sequence:
            keys = np.array(list(self.distinct), np.int64).reshape(len(self.distinct), len(CALL))
            self.columns = {name: [_small(keys[:, i]) if name != "count" else keys[:, i]]
                            for i, name in enumerate(CALL)}
            self.distinct = {}
        if not any(map(len, self.columns["count"])):
            self.columns = {}
            return self
        pairs = [_pairs(h, p) for h, p in zip(self.columns["host"], self.columns["pid"], strict=True)]
        self.processes = _pairs(np.concatenate([h for h, _ in pairs]), np.concatenate([p for _, p in pairs]))
        return self


def _factor(table: defaultdict, values: list) -> np.ndarray:
    """Codes of ``values`` in ``table`` (which grows by the values it has not seen)."""
    return np.fromiter(map(table.__getitem__, values), np.int32, len(values))


@dataclass
class _Split:
    """The calls that one pattern finds in a text that starts with a newline: the fields of
    each (lists of bytes), and the text between them (``gaps``: a newline and a line, for each
    line that is not a call; ``gaps[j]`` precedes call ``j``, the last follows the last call)."""

    fields: dict[str, list]
    gaps: list[bytes]
    #: The newlines in each gap (``None`` when every gap before the last is empty).
    newlines: np.ndarray | None
    #: Each call's line, counted from 0 at the text's first newline.
    lines: np.ndarray

    @classmethod
    def of(cls, pattern: re.Pattern, text: bytes, end: int) -> _Split:
        parts = pattern.split(text)
        if end < len(text):  # the text after the block is at the end of the last gap
            parts[-1] = parts[-1][: end - len(text)]
        stride = len(_ROW_FIELDS) + 1
        gaps = parts[::stride]
        n = len(gaps) - 1
        fields = {name: parts[i::stride] for i, name in enumerate(_ROW_FIELDS, 1)}
        # each call's match holds one newline (the one before it), each gap the rest
        lines = np.arange(n, dtype=np.int64)
        newlines = None
        if any(gaps[:n]):
            newlines = np.fromiter(map(len, gaps), np.int64, n + 1)  # counted where not empty
            for j in np.flatnonzero(newlines).tolist():
                newlines[j] = gaps[j].count(b"\n")
            lines += np.cumsum(newlines[:n])
        return cls(fields, gaps, newlines, lines)

    def gap_newlines(self) -> np.ndarray:
        if self.newlines is None:
            self.newlines = np.zeros(len(self.gaps), np.int64)
            self.newlines[-1] = self.gaps[-1].count(b"\n")
        return self.newlines

    def total_newlines(self) -> int:
        return len(self.lines) + int(self.gap_newlines().sum())

    def gap_lines(self, which: np.ndarray) -> np.ndarray:
        """The line (from 0) of each line of the gaps ``which``, in order. The text ends with a
        newline, the last of the last gap, which ends the last line rather than starting one."""
        newlines = self.gap_newlines()
        first = np.arange(len(self.gaps), dtype=np.int64) + np.cumsum(newlines) - newlines
        counts = newlines[which] - (which == len(self.gaps) - 1)
        return np.repeat(first[which] - (np.cumsum(counts) - counts), counts) + np.arange(counts.sum())

    def marked(self) -> np.ndarray:
        """The gaps that hold a line with the COLL marker."""
        return np.array([j for j in np.flatnonzero(self.gap_newlines()).tolist() if _MARKER in self.gaps[j]],
                        np.int64)

    def unmatched(self) -> list[int]:
        """The lines (from 0) in the gaps that carry the COLL marker, outside comments."""
        out = []
        for j in self.marked().tolist():
            first = int(self.lines[j - 1]) + 1 if j else 0  # the line after the previous call
            for i, line in enumerate(self.gaps[j].split(b"\n")[1:]):
                if _MARKER in line and not line.lstrip().startswith(b"#"):
                    out.append(first + i)
        return out


def _extract_re(text: bytes, end: int, line0: int, res: Scan) -> tuple:
    """The calls of a block found by ``re``: (codes of the few-valued fields, numbers, lines, the
    lines with the marker that are not calls or ``None``, newlines); the block's Init and TUNING
    lines go to ``res``."""
    fast = _Split.of(_TIERS[0], text, end)
    g, lines = fast.fields, fast.lines + line0
    others = b"".join(fast.gaps)  # the lines that are not calls in NCCL's own layout
    order = unmatched = None
    if _MARKER in others:  # the next patterns on the lines left that carry the marker
        found = [(g, lines)]
        rest, line_of = fast, None
        for pattern in (*_TIERS[1:], _ROWS):
            which = rest.marked()
            if not len(which):
                break
            # the block's line of each line of the text to search next
            at = rest.gap_lines(which)
            at = at + line0 if line_of is None else line_of[at]
            sub = b"".join(map(rest.gaps.__getitem__, which.tolist()))
            sub += b"" if sub.endswith(b"\n") else b"\n"  # one newline ends the text, as the block
            rest, line_of = _Split.of(pattern, sub, len(sub)), at
            if len(rest.lines):
                found.append((rest.fields, line_of[rest.lines]))
        else:  # lines with the marker that the general pattern does not match either
            unmatched = line_of[rest.unmatched()]
        if len(found) > 1:
            g = {name: functools.reduce(operator.add, [f[name] for f, _ in found]) for name in g}
            lines = np.concatenate([ls for _, ls in found])
            order = np.argsort(lines, kind="stable")
            lines = lines[order]
    n = len(lines)
    tables = res.tables
    codes = {name: _factor(tables[name], g[name]) for name in _DIRECT}
    for key, (names, split) in _MERGED.items():
        merged, known = res.merged[key], res.merged_codes[key]
        combined = _factor(merged, g[key])
        for value in islice(merged, len(known[0]), None):  # texts first seen in this block
            for codes_of, name, part in zip(known, names, (repeat(None) if value is None else split(value)),
                                            strict=False):
                codes_of.append(tables[name][part])
        for codes_of, name in zip(known, names, strict=True):
            codes[name] = np.array(codes_of, np.int32)[combined]
    try:
        pid = np.array(g["pid"], dtype=np.int64)
    except TypeError:  # some line has no host:pid:tid prefix
        pid = np.array([_int(s) for s in g["pid"]], dtype=np.int64)
    numbers = {"pid": pid, "count": np.array(g["count"], dtype=np.int64),
               "opcount": np.fromiter(map(int, g["opcount"], repeat(16)), np.int64, n)}
    if order is not None:
        codes = {name: c[order] for name, c in codes.items()}
        numbers = {name: c[order] for name, c in numbers.items()}
    _others(others, fast, line0, res)
    return codes, numbers, lines, unmatched, fast.total_newlines()


def _store(codes: dict, numbers: dict, lines: np.ndarray, unmatched: np.ndarray | None,
           file: str, strict: bool, res: Scan) -> None:
    """Append a block's calls to ``res``, setting aside (and reporting) those that are not calls."""
    tables, cols = res.tables, res.columns
    ops, nranks = [_text(o) for o in tables["op"]], [_int(s) for s in tables["nranks"]]
    invalid = (np.array([op not in NCCL_COLL_OPS for op in ops], bool)[codes["op"]]
               | (np.array([p != _NA and p < 1 for p in nranks], bool)[codes["nranks"]]))
    keep = None
    if invalid.any():
        for j in np.flatnonzero(invalid):
            p = nranks[codes["nranks"][j]]
            reason = _check(ops[codes["op"][j]], p if p != _NA else None)
            bad(file, int(lines[j]), reason, strict, res.skipped)
        keep = ~invalid
    if unmatched is not None:  # lines with the marker that are not calls: report them
        for line in unmatched.tolist():
            bad(file, line, _UNMATCHED, strict, res.skipped)
    if keep is not None:
        codes = {name: c[keep] for name, c in codes.items()}
        numbers = {name: c[keep] for name, c in numbers.items()}
        lines = lines[keep]
    if res.aggregate:
        _fold(codes, numbers, res)
        return
    if res.sequence:
        _code(codes, numbers, lines, res)
        return
    for name, c in (*codes.items(), *numbers.items(), ("line", lines)):
        # codes, lines and pids in the smallest type that holds them (count and opCount whole)
        cols[name].append(c if name in ("count", "opcount") else _small(c))


#: The fields of a distinct call in a sequence read (:attr:`Scan.sequence`), in the order of its key.
CALL = (*_FACTORS, "pid", "count")


def _distinct_rows(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of an integer matrix (values >= -1) and each row's index among them.

    The columns are packed as digits of one integer key, left to right; a column of large values
    (a pid, a count) is renumbered densely first, and the key is renumbered whenever the next digit
    would overflow it, so one sort of integers finds the rows whatever their values."""
    key, span = np.zeros(len(keys), np.int64), 1
    for col in keys.T:
        top = int(col.max()) + 2
        if top > len(col) + 1:  # few distinct values among large ones: their dense codes
            col = np.unique(col, return_inverse=True)[1].reshape(-1)
            top = int(col.max()) + 2
        if span * top >= 2**62:
            key = np.unique(key, return_inverse=True)[1].reshape(-1)
            span = int(key.max()) + 1
        key = key * top + (col + 1)
        span *= top
    first, inverse = np.unique(key, return_index=True, return_inverse=True)[1:]
    return keys[first], inverse.reshape(-1)


def _code(codes: dict, numbers: dict, lines: np.ndarray, res: Scan) -> None:
    """Add a block's calls to a sequence read: each call's code into :attr:`Scan.distinct`, line and
    opCount."""
    if not len(numbers["count"]):
        return
    keys = np.stack([codes[name].astype(np.int64) for name in _FACTORS]
                    + [numbers["pid"].astype(np.int64), numbers["count"].astype(np.int64)], axis=1)
    distinct, inverse = _distinct_rows(keys)
    known = res.distinct
    ids = np.fromiter((known.setdefault(k, len(known)) for k in map(tuple, distinct.tolist())), np.int32,
                      len(distinct))
    res.seq["code"].append(ids[inverse])
    res.seq["line"].append(_small(lines))
    res.seq["opcount"].append(_small(numbers["opcount"]))


def _fold(codes: dict, numbers: dict, res: Scan) -> None:
    """Add a block's calls to the sums per distinct call (:attr:`Scan.sums`), each block's distinct
    calls added in the order of their keys."""
    if not len(numbers["count"]):
        return
    keys = np.stack([codes[name].astype(np.int64) for name in _KEY] + [numbers["pid"].astype(np.int64)],
                    axis=1)
    count = numbers["count"].astype(np.int64, copy=False)
    radix = keys.max(axis=0) + 2  # the fields as digits of one number (a pid may be -1)
    if float(np.prod(radix.astype(float))) < 2.0**62:
        weights = np.cumprod(np.concatenate(([1], radix[:-1])))
        packed, inverse = np.unique((keys + 1) @ weights, return_inverse=True)
        distinct = (packed[:, None] // weights) % radix - 1
    else:
        distinct, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    calls = np.bincount(inverse, minlength=len(distinct))
    if int(count.max()) * len(count) < 2**53:  # counts are >= 0: every partial sum exact in float64
        totals = np.bincount(inverse, weights=count, minlength=len(distinct)).astype(np.int64)
    else:
        totals = np.zeros(len(distinct), np.int64)
        np.add.at(totals, inverse, count)
    _add(res.sums, distinct, calls, totals)


def _add(sums: dict, distinct: np.ndarray, calls: np.ndarray, totals: np.ndarray) -> None:
    """Add to ``sums`` the number of calls and the total count of each distinct call (a row of
    ``distinct``)."""
    for key, n, total in zip(map(tuple, distinct.tolist()), calls.tolist(), totals.tolist(), strict=True):
        if key in sums:
            sums[key][0] += n
            sums[key][1] += total
        else:
            sums[key] = [n, total]


def _small(values: np.ndarray) -> np.ndarray:
    """An array of integers >= -1 in the smallest type that holds them."""
    if not len(values):
        return values
    top = int(values.max())
    small = np.int8 if top < 2**7 else np.int16 if top < 2**15 else np.int32 if top < 2**31 else np.int64
    return values.astype(small, copy=False)


def _read_others(found: list[tuple[int, bytes]], res: Scan) -> None:
    """Init and TUNING lines, given as (line, text) in order, read into ``res`` (as :func:`_others`
    reads them)."""
    for line, text in found:
        if _INIT_MARKER in text and (m := INIT.match(text)):
            host, pid_, _, _ = _prefix(m["pre"])
            res.inits.append((host, pid_, _text(m["comm"]), int(m["rank"]), int(m["nranks"])))
        if _TUNING_MARKER in text and (m := TUNING.match(text)):
            host, pid_, tid, _ = _prefix(m["pre"])
            res.tunings.append((line, host, pid_, tid, _text(m["op"]), _text(m["algo"]), _text(m["proto"]),
                                int(m["bytes"])))


def _others(others: bytes, fast: _Split, line0: int, res: Scan) -> None:
    """The Init and TUNING lines among a block's lines that are not calls."""
    if _INIT_MARKER in others:  # Init and TUNING lines are among the lines that are not calls
        for m in INIT.finditer(others):
            host, pid_, _, _ = _prefix(m["pre"])
            res.inits.append((host, pid_, _text(m["comm"]), int(m["rank"]), int(m["nranks"])))
    if _TUNING_MARKER in others:
        line_of = fast.gap_lines(np.arange(len(fast.gaps))) + line0
        pos, k = 0, -1
        for m in TUNING.finditer(others):
            k += others.count(b"\n", pos, m.start())  # the match starts a line, after its newline
            pos = m.start()
            host, pid_, tid, _ = _prefix(m["pre"])
            res.tunings.append((int(line_of[k]), host, pid_, tid, _text(m["op"]), _text(m["algo"]),
                                _text(m["proto"]), int(m["bytes"])))


def _pairs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct pairs of two integer columns (``a`` non-negative codes, ``b`` >= -1)."""
    if not len(a):
        return a, b
    b = b.astype(np.int64, copy=False)
    span = int(b.max()) + 2
    if span * (int(a.max()) + 1) < 2**62:  # one integer key per pair
        key = np.sort(a.astype(np.int64) * span + (b + 1))
        key = key[np.concatenate(([True], key[1:] != key[:-1]))]
        return (key // span).astype(a.dtype), key % span - 1
    order = np.lexsort((b, a))
    a, b = a[order], b[order]
    first = np.ones(len(a), bool)
    first[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
    return a[first], b[first]
