"""nccl-tests tables pasted as Markdown (GitHub issues, READMEs, blogs): ``| size | count | type | redop |
root | time | algbw | busbw | #wrong | time | … |`` over a ``|---|---|`` line, then a row per size.

A GitHub-flavoured Markdown table is a header row, a delimiter row (cells of ``-`` with an optional ``:`` at
either end) and body rows, each cell between unescaped ``|`` (``\\|`` is a pipe inside a cell). The header's
cells name the columns nccl-tests prints (``src/common.cu``), each read as the text header's word
(:func:`zerocalc.traces.nccl_tests_rows.parse_header`), so every layout the text reader knows reads the same
way here: a cell may carry its unit (``size (B)``, ``time (us)``, ``algbw (GB/s)``, nccl-tests' own units
line below its header) and name its side (``Out-of-place time (us)``, ``In-place busbw``); a table cut to
one side reads as the text's one-group table unless its cells say out-of-place. Units are honoured or the
table refused naming the unit: sizes in bytes, KiB/MiB/GiB, or KB/MB/GB read as the binary or decimal
multiple whichever makes the size a whole number of the row's elements (as nccl-tests' sizes are: count ×
element size, × ranks for the gathering tests), refused where neither or both do; times in ns, us, ms or s;
bandwidths in MB/s, GB/s, TB/s or Gb/s. A cell may also carry its own unit (``8 MiB``) and thousands commas
(``2,097,152``). A header whose cells are not nccl-tests' (``| GPUs | busbw |``) makes no table; a row that
does not fit its header is refused naming its line, never read with shifted cells.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from zerocalc.errors import TraceFormatError
from zerocalc.traces.nccl_tests_rows import Layout, cells_of, parse_header
from zerocalc.traces.records import SkipLog, bad
from zerocalc.traces.schema import DTYPE_BYTES, NCCL_TESTS_DTYPES

#: A delimiter row's cell (GitHub Flavored Markdown spec, "Tables (extension)").
_DELIMITER = re.compile(r"^:?-+:?$")
#: A cell's text past Markdown's emphasis and code marks (``**476.27**``, `` `sum` ``).
_MARKS = re.compile(r"^(?:\*\*|__|\*|_|`)+|(?:\*\*|__|\*|_|`)+$")
#: A header cell: its name, then its unit in parentheses or brackets (``time (us)``, ``algbw[GB/s]``).
_UNIT = re.compile(r"^(.*?)\s*[(\[]\s*([^)\]]*?)\s*[)\]]\s*$")
#: The side a header cell names before or after its column's name.
_SIDES = (("out-of-place", "oop"), ("out of place", "oop"), ("outofplace", "oop"), ("oop", "oop"),
          ("in-place", "ip"), ("in place", "ip"), ("inplace", "ip"), ("ip", "ip"))
#: Header cell names → the word nccl-tests' text header prints for that column.
_NAMES = {"size": "size", "message size": "size", "msg size": "size", "bytes": "bytes", "count": "count",
          "n": "N", "type": "type", "dtype": "type", "redop": "redop", "op": "op", "root": "root",
          "time": "time", "cputime": "cputime", "algbw": "algbw", "alg bw": "algbw", "busbw": "busbw",
          "bus bw": "busbw", "#wrong": "#wrong", "wrong": "#wrong", "error": "error", "err": "error",
          "res": "res",
          "i_min": "i_min", "i_max": "i_max", "i_p99": "i_p99", "i_cv%": "i_cv%", "timestamp": "timestamp"}
#: Byte multiples: binary ones exact, decimal-looking ones resolved per row (module docstring).
_BINARY = {"b": 1, "byte": 1, "bytes": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}
_EITHER = {"kb": 1, "k": 1, "mb": 2, "m": 2, "gb": 3, "g": 3, "tb": 4, "t": 4}
#: Microseconds per unit of a time column; GB/s per unit of a bandwidth column.
_TIME_US = {"us": 1.0, "µs": 1.0, "μs": 1.0, "usec": 1.0, "ns": 1e-3, "ms": 1e3, "msec": 1e3, "s": 1e6,
            "sec": 1e6}
_BW_GBPS = {"gb/s": 1.0, "gbps": 1.0, "gbytes/s": 1.0, "mb/s": 1e-3, "tb/s": 1e3, "gb/sec": 1.0,
            "gib/s": 1.073741824, "gbit/s": 0.125}
_COUNT_UNITS = ("", "elements", "elems", "element")
_NUMBER = re.compile(r"^([-+]?(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?))\s*(\S*)$")


#: A cell border: a pipe not escaped as ``\\|``.
_PIPE = re.compile(r"(?<!\\)\|")


def cells(payload: str) -> list[str] | None:
    """The cells of a Markdown table line, ``\\|`` read as a pipe inside a cell; ``None`` for other lines.
    The pipes at either end are optional (GitHub Flavored Markdown spec, "Tables (extension)": ``size |
    count | type`` is a header row too); a line that does not open with one needs two, as every nccl-tests
    table has more than three columns."""
    parts = _PIPE.split(payload)
    if payload.startswith("|"):
        parts = parts[1:]
    elif len(parts) < 3:
        return None
    if parts and not parts[-1].strip():
        parts = parts[:-1]
    return [p.strip().replace("\\|", "|") for p in parts]


def _plain(cell: str) -> str:
    return _MARKS.sub("", cell).strip()


@dataclass
class _Column:
    """A header cell: the text header's word, its side (``oop``, ``ip`` or ``""``) and its unit."""

    word: str
    side: str
    unit: str


def _column(cell: str) -> _Column | None:
    """What a header cell names (its side and unit taken off first: ``Out-of-place time (us)``, ``Time(us)
    oop``), ``None`` for a name nccl-tests does not print."""
    text = _plain(cell).lower()
    side = ""
    for word, s in _SIDES:
        if text.startswith(word + " ") or text.endswith(" " + word):
            text = (text[len(word):] if text.startswith(word + " ") else text[:-len(word)]).strip(" -:/")
            side = s
            break
    m = _UNIT.match(text)
    name, unit = (m[1], m[2]) if m else (text, "")
    word = _NAMES.get(name.strip())
    return None if word is None else _Column(word, side, unit.strip())


@dataclass
class Table:
    """An nccl-tests table in Markdown: its layout (the text header's), each cell's column, the units."""

    layout: Layout
    columns: list[_Column]
    line: int

    def with_units(self, row: list[str]) -> bool:
        """Take a row of units only (``(B)``, ``(elements)``, ``(us)``, ``(GB/s)``: nccl-tests' units line)
        into the columns; whether ``row`` is one."""
        units = [_plain(c) for c in row]
        if len(units) != len(self.columns) or not any(units) or not all(
                not u or (u[0] in "([" and u[-1] in ")]") for u in units):
            return False
        for col, u in zip(self.columns, units, strict=True):
            col.unit = u[1:-1].strip().lower() if u else col.unit
        self.layout = _checked_units(self.layout, self.columns)
        return True

    def row(self, row: list[str], file: str, lineno: int) -> dict[str, Any]:
        """One body row read by the header; :class:`TraceFormatError` where it does not fit."""
        if len(row) != len(self.columns):
            raise TraceFormatError(file, lineno, f"row has {len(row)} cells, the header (line {self.line}) "
                                                 f"has {len(self.columns)}: refused, not read with shifted "
                                                 "columns")
        if self.layout.invalid:
            raise TraceFormatError(file, lineno, f"row refused: {self.layout.invalid}")
        toks: list[str] = []
        size_at = None
        for col, cell in zip(self.columns, row, strict=True):
            text = _plain(cell)
            if col.word == "timestamp":
                toks.extend(text.split())
                continue
            if col.word in ("size", "bytes"):
                size_at = len(toks)
            toks.append(text if col.word in ("type", "redop", "op") else _value(text, col, file, lineno))
        if size_at is not None and not toks[size_at].isdigit():
            toks[size_at] = _bytes(toks[size_at], toks, self.layout, file, lineno)
        return cells_of(toks, self.layout, file, lineno)


def header(row: list[str], lineno: int) -> Table | None:
    """The :class:`Table` a header row opens, ``None`` where its cells are not nccl-tests' columns."""
    cols = []
    for cell in row:  # most lines with bars head no nccl-tests table: stop at the first cell naming none
        col = _column(cell)
        if col is None:
            return None
        cols.append(col)
    words = [c.word for c in cols]
    if "time" not in words and "cputime" not in words:
        return None
    layout = parse_header("#  " + "  ".join(words), lineno)
    if layout is None:
        return None
    sides = {c.side for c in cols if c.word in ("time", "cputime")}
    if sides == {"oop"} and layout.name.endswith("-inplace"):  # one group, its cells say out-of-place
        layout = replace(layout, name=layout.name[:-len("-inplace")] + "-oop",
                         columns=tuple(c.replace("ip_", "oop_", 1) for c in layout.columns))
    elif "ip" in sides and "oop" in sides and [c.side for c in cols if c.word == "time"] != ["oop", "ip"]:
        layout = replace(layout, invalid=f"the header (line {lineno}) puts its in-place times before the "
                                         "out-of-place ones")
    return Table(_checked_units(layout, cols), cols, lineno)


def _checked_units(layout: Layout, columns: list[_Column]) -> Layout:
    """``layout`` refused (``invalid``) where a column's unit is not one zerocalc reads."""
    for col in columns:
        u = col.unit.lower()
        ok = (not u or (u in _BINARY or u in _EITHER if col.word in ("size", "bytes")
                        else u in _COUNT_UNITS if col.word in ("count", "N")
                        else u in _TIME_US if col.word in ("time", "cputime", "i_min", "i_max", "i_p99")
                        else u in _BW_GBPS if col.word in ("algbw", "busbw")
                        else u == "%"))
        if not ok:
            why = (f"the header (line {layout.line}) gives {col.word} in {col.unit!r}, a unit zerocalc does "
                   "not read")
            return replace(layout, invalid=layout.invalid or why)
    if any(c.unit for c in columns if c.word in ("time", "cputime")) and layout.time_unit_us != 1.0:
        layout = replace(layout, time_unit_us=1.0)  # v1's milliseconds: the stated unit says
    return layout


def _value(text: str, col: _Column, file: str, lineno: int) -> str:
    """A numeric cell in the text's units (µs, GB/s), its own unit (``12.3 us``) before the header's."""
    m = _NUMBER.match(text)
    if m is None:
        return text  # ``N/A``, or a cell the row's reader refuses
    number, unit = m[1].replace(",", ""), (m[2] or col.unit).lower()
    if col.word in ("size", "bytes"):
        return f"{number} {unit}".strip()
    if col.word in ("time", "cputime", "i_min", "i_max", "i_p99") and unit:
        if unit not in _TIME_US:
            raise TraceFormatError(file, lineno, f"{col.word} {text!r}: unit {unit!r} is not one zerocalc "
                                                 "reads")
        return repr(float(number) * _TIME_US[unit]) if _TIME_US[unit] != 1.0 else number
    if col.word in ("algbw", "busbw") and unit:
        if unit not in _BW_GBPS:
            raise TraceFormatError(file, lineno, f"{col.word} {text!r}: unit {unit!r} is not one zerocalc "
                                                 "reads")
        return repr(float(number) * _BW_GBPS[unit]) if _BW_GBPS[unit] != 1.0 else number
    if m[2] and m[2].lower() not in _COUNT_UNITS:
        raise TraceFormatError(file, lineno, f"{col.word} {text!r} is not a number")
    return number


def _bytes(size: str, toks: list[str], layout: Layout, file: str, lineno: int) -> str:
    """A size given in a unit (``8 MiB``, ``1`` under ``size (GB)``) as whole bytes: a binary unit exactly,
    ``KB``/``MB``/``GB`` as whichever of 1024ᵏ and 1000ᵏ makes it a whole number of the row's elements."""
    number, _, unit = size.partition(" ")
    try:
        value = float(number)
    except ValueError:
        return size  # the row's reader refuses it
    if unit not in _BINARY and unit not in _EITHER:
        raise TraceFormatError(file, lineno, f"size {size!r}: unit {unit!r} is not one zerocalc reads")
    if unit in _BINARY or value == 0:
        out = value * _BINARY.get(unit, 1)
        if out != int(out):
            raise TraceFormatError(file, lineno, f"size {size!r} is not a whole number of bytes")
        return str(int(out))
    count_at = layout.columns.index("count")
    dtype = NCCL_TESTS_DTYPES.get(toks[layout.columns.index("type")] if "type" in layout.columns else "")
    eb = DTYPE_BYTES.get(dtype or "")
    count = toks[count_at] if count_at < len(toks) else ""
    if not eb or not count.isdigit() or not int(count):
        raise TraceFormatError(file, lineno, f"size {size!r}: {unit!r} may be 1000 or 1024 to a step, and "
                                             "the row's count and type do not tell which")
    fits = [b for b in (1024 ** _EITHER[unit], 1000 ** _EITHER[unit])
            if value * b == int(value * b) and int(value * b) % (int(count) * eb) == 0]
    if len(fits) != 1:
        raise TraceFormatError(file, lineno, f"size {size!r}: {unit!r} as 1024 or 1000 to a step "
                                             f"({'both fit' if fits else 'neither fits'} the row's {count} × "
                                             f"{eb}-byte elements): refused")
    return str(int(value * fits[0]))


def delimiter(row: list[str]) -> bool:
    """Whether a table line is the delimiter row under a header (``|---|:---:|``)."""
    return bool(row) and all(_DELIMITER.match(c.replace(" ", "")) for c in row)


@dataclass
class Tables:
    """The Markdown tables of an output as its lines are read: a header row waits for its delimiter row,
    then each body row is read by it, until a line that is not a table row (or a blank one) ends it."""

    #: The header just read, before its delimiter row.
    pending: Table | None = None
    #: The table whose body is being read, and whether its next row may be its units.
    table: Table | None = None
    units_next: bool = False

    def end(self) -> None:
        self.pending = self.table = None

    def feed(self, payload: str, lineno: int, file: str) -> tuple[str, Any] | None:
        """What a line with cell borders (:func:`cells`) is: ``("header", (Layout, its line))`` once the
        delimiter row confirms a header, ``("row", cells)``, ``("skip", None)`` for the table's other lines
        (the header row, the delimiter, its units); ``None`` for a line of no nccl-tests table. Raises
        :class:`TraceFormatError` for a body row that does not fit its header."""
        row = cells(payload)
        if row is None:
            self.end()
            return None
        pending, self.pending = self.pending, None
        if pending is not None and delimiter(row):
            if len(row) != len(pending.columns):
                return None  # not a table (GitHub's rule: the delimiter row has the header's cells)
            self.table, self.units_next = pending, True
            return "header", (pending.layout, pending.line)
        table = self.table
        if table is None or delimiter(row):
            self.table = None
            self.pending = header(row, lineno)
            return None if self.pending is None else ("skip", None)
        units, self.units_next = self.units_next, False
        if units and table.with_units(row):
            return "header", (table.layout, table.line)
        return "row", table.row(row, file, lineno)

    def take(self, payload: str, lineno: int, file: str, state: Any, rows: Any, strict: bool,
             skipped: SkipLog) -> bool:
        """Whether a line belongs to an nccl-tests table (:meth:`feed`; another line ends one), given to the
        reader's runs ``state`` (its header the run's layout, after ``rows`` are flushed; its rows the run's
        rows); a row that does not fit goes to ``skipped``, or raises in strict mode."""
        try:
            got = self.feed(payload, lineno, file)
        except TraceFormatError as exc:
            bad(file, exc.line, exc.reason, strict, skipped)
            return True
        if got is None:
            return False
        kind, value = got
        if kind == "header":
            rows.flush()
            state.header(value[0], value[1])
        elif kind == "row":
            state.row((lineno, value), lineno)
        return True
