"""NCCL debug logs (``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL[,TUNING,INIT]``).

One ``COLL`` line per collective call, unchanged since NCCL 2.4 (NCCL ``src/enqueue.cc``)::

    host:pid:tid [dev] NCCL INFO AllReduce: opCount 1a sendbuff 0x.. recvbuff 0x.. count 4096
        datatype 7 op 0 root 0 comm 0x.. [nranks=8] stream 0x..

RCCL appends `` task N globalrank N``; launchers prepend their own prefixes (searched,
not anchored); one real log has ``NCCL INFO [2] AllReduce:``. ``[dev]`` is the CUDA
device, not the rank: the rank is RCCL's ``globalrank``, else the process's rank in the largest
communicator of its ``comm .. rank r nranks p .. Init COMPLETE`` lines (the world: a rank within a
tensor- or data-parallel sub-communicator is not a global rank), else NA. The rank within the
call's own communicator is the extra column ``comm_rank``.
``TUNING`` lines (``AllReduce: 8388608 Bytes -> Algo RING proto SIMPLE ...``) give the
algorithm and protocol of the preceding call of that thread.

The log is read as bytes, in blocks of a few MB (constant memory in the file size, apart from
the table itself), each cut at its last line end; since any run of whole lines reads the same
wherever it is cut, the reader shares the chunks of a large log with worker processes
(:func:`scan_bytes` scans one) and joins their scans in order (:func:`finish`).
Line ends are read as text mode reads them (``\\r\\n`` and a lone ``\\r`` end a line too), and
the fields a row keeps are decoded as UTF-8 (an invalid byte becomes U+FFFD); patterns match
ASCII digits and whitespace only, so a line reads the same as bytes and as text.
Where polars is installed it reads the fields of each block by position (:mod:`zerocalc.traces.nccl_polars`,
:data:`ENGINE`) and leaves to ``re`` the lines in another form. The ``re`` scanner parses a block
column-wise (benchmarks/bench_nccl_log.py): one ``re.split`` in C gives the fields of every call
in NCCL's own layout (``host:pid:tid [dev] NCCL INFO`` at the start of the line) as one flat list,
sliced into columns; further splits read the lines left that carry the COLL marker, first where
the prefix follows a space (after a launcher's tag), then with the general pattern. Few-valued
fields (the communicator among them) become codes into a table of their distinct values, kept in
the smallest integer type that holds them, numbers are converted by numpy, and the table is
assembled once at the end, compact: categorical columns for the strings, narrow identifiers
(schema.CANONICAL_COLUMNS), about 100 bytes per call.
"""

from __future__ import annotations

import functools
import operator
import re
from collections import defaultdict
from dataclasses import dataclass, field
from itertools import count, islice, repeat
from typing import Any, BinaryIO, TextIO

import numpy as np

from zerocalc.errors import TraceFormatError
from zerocalc.traces.records import ParseResult, SkipLog, bad
from zerocalc.traces.schema import DTYPE_BYTES, NCCL_COLL_OPS, NCCL_DATATYPES, NCCL_REDOPS

FORMAT = "nccl_log"

#: The marker every COLL line carries; a line with it that does not match COLL is skipped.
MARKER = "opCount "
#: The marker of a TUNING line.
TUNING_MARKER = " Bytes -> Algo "

#: ``host:pid:tid [dev] ``, the prefix NCCL writes right before ``NCCL INFO``. The host is tried
#: only where a run of host characters starts (the longest one wins anyway), which keeps a
#: search through a long launcher prefix linear.
_PREFIX = r"(?<![^\s:])(?P<host>[^\s:]+):(?P<pid>\d{1,18}):(?P<tid>\d{1,18}) \[(?P<dev>\d{1,9})\] "
#: A COLL line from ``NCCL INFO`` to its end; the groups are the fields the table needs. Numbers
#: are bounded in length so that every one fits the table's 64-bit columns: a longer one makes the
#: line malformed (skipped and counted, or a TraceFormatError in strict mode), never an overflow.
_BODY = (
    r"NCCL INFO (?:\[\d+\] )?(?P<op>[A-Za-z]+): opCount (?P<opcount>[0-9a-fA-F]{1,15})"
    r" sendbuff \S+ recvbuff \S+ count (?P<count>\d{1,18})"
    r" datatype (?P<datatype>\d{1,9}) op (?P<redop>\d{1,9}) root (?P<root>-?\d{1,18}) comm (?P<comm>\S+)"
    r"(?: \[nranks=(?P<nranks>\d{1,9})\])? stream \S+"
    r"(?: task \d+ globalrank (?P<globalrank>\d{1,9}))?[ \t\r]*"
)
#: One COLL line; the prefix is the one that ends right before ``NCCL INFO``.
COLL = re.compile(r"^[^\n]*?(?:" + _PREFIX + r")?" + _BODY + r"$", re.M | re.ASCII)
#: The same lines within a block (bytes) that starts with a newline, for ``re.split``: starting
#: with a literal newline lets the engine skip from line to line. Neighbouring few-valued fields
#: are captured as one (``tid [dev]``; ``datatype op redop root``): one code lookup per row for
#: each, the fields read from its few distinct values (:data:`_MERGED`).
_MERGED_PREFIX = _PREFIX.replace(r"(?P<tid>\d{1,18}) \[(?P<dev>\d{1,9})\]", r"(?P<td>\d{1,18} \[\d{1,9}\])")
_MERGED_BODY = _BODY.replace(r"(?P<datatype>\d{1,9}) op (?P<redop>\d{1,9}) root (?P<root>-?\d{1,18})",
                             r"(?P<dro>\d{1,9} op \d{1,9} root -?\d{1,18})")
_ROWS = re.compile((r"\n[^\n]*?(?:" + _MERGED_PREFIX + r")?" + _MERGED_BODY + r"(?=\n)").encode())
#: The same match found faster where the prefix starts the line (as NCCL writes it) or follows a
#: space (after a launcher's prefix), tried in this order before :data:`_ROWS` on the lines they
#: leave. A line has at most one place where the body matches (its words cannot overlap a second
#: ``NCCL INFO``) and at most one prefix that ends there (the host is the whole run of
#: non-space, non-colon characters before ``:pid``), so each finds on a line what :data:`_ROWS`
#: finds, or nothing; they only spare the engine trying the prefix at every character.
_TIERS = tuple(re.compile((start + _MERGED_PREFIX.replace(r"(?<![^\s:])", "") + _MERGED_BODY
                           + r"(?=\n)").encode()) for start in (r"\n", r"\n[^\n]*? "))
_ROW_FIELDS = tuple(_ROWS.groupindex)
assert all(tuple(tier.groupindex) == _ROW_FIELDS for tier in _TIERS)
PREFIX = re.compile((_PREFIX + r"$").encode())
INIT = re.compile(
    rb"^(?P<pre>[^\n]*?)NCCL INFO [^\n]*?comm (?P<comm>0x[0-9a-fA-F]+) rank (?P<rank>\d{1,9})"
    rb" nranks (?P<nranks>\d{1,9})[^\n]*- Init COMPLETE",
    re.M,
)
TUNING = re.compile(
    rb"^(?P<pre>[^\n]*?)NCCL INFO (?:\[\d+\] )?(?P<op>[A-Za-z]+): (?P<bytes>\d{1,18}) Bytes -> "
    rb"Algo (?P<algo>[^\s,]+) proto (?P<proto>[^\s,]+)",
    re.M,
)
#: The same markers as bytes.
_MARKER, _TUNING_MARKER, _INIT_MARKER = MARKER.encode(), TUNING_MARKER.encode(), b"Init COMPLETE"

#: Bytes per block read from the stream (the block is cut at its last newline).
BLOCK_BYTES = 1 << 22
_UNMATCHED = "line has 'opCount' but not the NCCL COLL layout"
#: Fields kept as codes into a table of their distinct values (few distinct values per log).
_FACTORS = ("host", "tid", "dev", "op", "datatype", "redop", "root", "nranks", "globalrank", "comm")
#: The groups of :data:`_ROWS` that hold several of them, and how to split one's text into theirs.
_MERGED: dict[str, tuple[tuple[str, ...], Any]] = {
    "td": (("tid", "dev"), lambda s: (s[: s.index(b" ")], s[s.index(b"[") + 1 : -1])),
    "dro": (("datatype", "redop", "root"), lambda s: tuple(s.split(b" ")[::2])),
}
#: The fields of :data:`_FACTORS` captured on their own.
_DIRECT = tuple(name for name in _FACTORS if not any(name in names for names, _ in _MERGED.values()))
#: Missing integer in a code table.
_NA = -1
#: The fields that tell calls apart in a summary (per file, rank or process, op: counts and
#: element totals; the rank from ``globalrank`` or the process's Init lines, the group size from
#: ``[nranks=]`` or the communicator's Init line), with the pid: what an aggregated read keeps
#: per distinct call.
_KEY = ("host", "op", "datatype", "nranks", "globalrank", "comm")


def _prefix(pre: bytes) -> tuple[str | None, int | None, int | None, int | None]:
    """``host:pid:tid [dev] `` at the end of whatever precedes ``NCCL INFO``."""
    m = PREFIX.search(pre)
    return (_text(m["host"]), int(m["pid"]), int(m["tid"]), int(m["dev"])) if m else (None, None, None, None)


def _text(raw: bytes | None) -> str | None:
    """A field's bytes as text (UTF-8; an invalid byte becomes U+FFFD)."""
    return raw.decode("utf-8", "replace") if raw is not None else None


def _redop(code: int) -> str:
    return NCCL_REDOPS.get(code, f"premulsum:{code}" if code >= 5 else str(code))


def _dtype(code: int) -> str:
    dtype = NCCL_DATATYPES.get(code)
    return dtype if dtype is not None else f"nccl:{code}"


def _check(op: str, nranks: int | None) -> str | None:
    """Why a matched COLL line is not a row, or ``None``."""
    if op not in NCCL_COLL_OPS:
        return f"unknown NCCL collective {op!r}"
    if nranks is not None and nranks < 1:
        return f"nranks={nranks} is not a group size"
    return None


def _scale(count: int, factor: str, p: int | None) -> int | None:
    if factor == "1":
        return count
    if factor == "0":
        return 0
    return count * p if p is not None else None


def parse_coll_line(line: str, *, file: str = "<line>", lineno: int | None = None) -> dict[str, Any] | None:
    """One COLL line → a row dict; ``None`` for a line without ``opCount``.

    Raises :class:`TraceFormatError` for a line that carries the COLL marker but not its layout.
    """
    if MARKER not in line:
        return None
    text = line.rstrip("\n")
    m = COLL.search(text) if "\n" not in text else None
    if m is None:
        raise TraceFormatError(file, lineno, _UNMATCHED)
    nranks = int(m["nranks"]) if m["nranks"] is not None else None
    reason = _check(m["op"], nranks)
    if reason is not None:
        raise TraceFormatError(file, lineno, reason)
    op, fin, fout = NCCL_COLL_OPS[m["op"]]
    count, dtype = int(m["count"]), _dtype(int(m["datatype"]))
    host, pid, tid, dev = m["host"], *(int(m[k]) if m[k] is not None else None for k in ("pid", "tid", "dev"))
    return {
        "file": file, "rank": int(m["globalrank"]) if m["globalrank"] is not None else None,
        "op": op, "dtype": dtype, "elem_bytes": DTYPE_BYTES.get(dtype),
        "in_nelems": _scale(count, fin, nranks), "out_nelems": _scale(count, fout, nranks),
        "group_size": nranks, "group": m["comm"], "source_line": lineno if lineno is not None else 0,
        "nccl_op": m["op"], "count": count, "opcount": int(m["opcount"], 16),
        "redop": _redop(int(m["redop"])), "root": int(m["root"]),
        "host": host, "pid": pid, "tid": tid, "device": dev,
    }


def _int(text: str | None) -> int:
    return int(text) if text is not None else _NA


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

    def freeze(self) -> Scan:
        """Plain lists and arrays only (picklable): each code table becomes its list of values,
        decoded. The columns stay one array per block, joined once with those of the other scans
        (:class:`_Table`)."""
        self.tables = {name: list(map(_text, table)) for name, table in self.tables.items()}
        self.merged, self.merged_codes = {}, {}
        if self.aggregate:
            keys = np.array(list(self.sums), np.int64).reshape(len(self.sums), len(_KEY) + 1)
            sums = np.array(list(self.sums.values()), np.int64).reshape(len(self.sums), 2)
            self.columns = {name: [_small(keys[:, i])] for i, name in enumerate(_KEY)}
            self.columns.update(pid=[keys[:, -1]], calls=[sums[:, 0]], count=[sums[:, 1]])
            self.sums = {}
        if not any(map(len, self.columns["count"])):
            self.columns = {}
            return self
        pairs = [_pairs(h, p) for h, p in zip(self.columns["host"], self.columns["pid"], strict=True)]
        self.processes = _pairs(np.concatenate([h for h, _ in pairs]), np.concatenate([p for _, p in pairs]))
        return self



def scan(stream: BinaryIO | TextIO, file: str, *, strict: bool = False, aggregate: bool = False) -> Scan:
    """Scan a log (a text stream is read as its UTF-8 encoding); ``aggregate``: see :class:`Scan`."""
    res = Scan(aggregate=aggregate)
    tail = b""
    while True:
        chunk = stream.read(BLOCK_BYTES)
        if isinstance(chunk, str):
            chunk = chunk.encode("utf-8", "surrogatepass")
        if chunk:
            # the block is text[1:end], the whole lines of tail + chunk; the rest is the next tail
            # (kept in text, which is the one copy of the block made: no slices of it)
            text = b"\n" + tail + chunk
            # after the last line end: a newline, or a lone carriage return (one not last in text,
            # which a newline in the next chunk may follow)
            end = max(text.rfind(b"\n"), text.rfind(b"\r", 0, len(text) - 1)) + 1
            tail = text[end:]
            if end > 1:
                res.lines += _scan_block(text, end, file, res.lines + 1, strict, res) - 1
        else:
            if tail:  # a last line without a newline
                text = b"\n" + tail + b"\n"
                _scan_block(text, len(text), file, res.lines + 1, strict, res)
            break
    return res.freeze()


def scan_bytes(data: bytes, file: str, *, strict: bool = False, aggregate: bool = False) -> Scan:
    """Scan a run of whole lines of a log held in memory (the last may lack its newline) as one
    block: what :func:`scan` gives for the same lines."""
    res = Scan(aggregate=aggregate)
    if data:
        text = b"\n" + data + (b"" if data.endswith(b"\n") else b"\n")
        res.lines = _scan_block(text, len(text), file, 1, strict, res) - 1
    return res.freeze()


def parse(stream: BinaryIO | TextIO, file: str, *, strict: bool = False,
          aggregate: bool = False) -> ParseResult:
    """Stream an NCCL log and return its table, one row per COLL line (``aggregate``: one row per
    distinct call, with its number of calls, ``aggregated_calls``, and the sum of their counts,
    ``count``)."""
    return finish([scan(stream, file, strict=strict, aggregate=aggregate)], file)


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


def _scan_block(text: bytes, end: int, file: str, line0: int, strict: bool, res: Scan) -> int:
    """Parse the whole lines of one block (the first is line ``line0``) into ``res``.

    ``text`` is a newline, the block's lines, each ending with a newline, and after ``end`` the
    start of a line not in the block (not a call: it has no newline to end it). Returns the
    number of newlines in the block (after line ends are read as text mode reads them).
    The fields are pulled out by polars where it is installed and reads every call of the block
    (:mod:`zerocalc.traces.nccl_polars`, :data:`ENGINE`), else by ``re`` (:func:`_extract_re`).
    """
    if text.find(b"\r", 0, end) >= 0:  # "\r\n" and a lone "\r" end a line, as in text mode
        text = text[:end].replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        end = len(text)
    got = None
    engine = _native(end)
    if engine is not None:
        from zerocalc.traces import nccl_polars

        extract = nccl_polars.extract_fields if engine == "polars" else nccl_polars.extract_regex
        got = extract(text, end, line0, res)
    if got is None:
        got = _extract_re(text, end, line0, res)
    codes, numbers, lines, unmatched, newlines = got
    _store(codes, numbers, lines, unmatched, file, strict, res)
    return newlines


#: Which engine pulls the fields out of a block: "auto" (polars where installed, for blocks of at
#: least :data:`NATIVE_MIN_BYTES`), "polars" (every block), "polars-regex" (every block, by polars'
#: regex extraction: the engine before the positional one, kept for comparison) or "re" (never polars).
ENGINE = "auto"
#: The smallest block that "auto" gives polars (below it, importing polars costs more than it saves).
NATIVE_MIN_BYTES = 1 << 18


@functools.cache
def _polars_available() -> bool:
    from zerocalc.traces import nccl_polars

    return nccl_polars.available()


def _native(size: int) -> str | None:
    """The polars engine for a block of ``size`` bytes ("polars" or "polars-regex"), or ``None``."""
    if ENGINE == "re":
        return None
    if ENGINE in ("polars", "polars-regex"):
        _polars_available()  # imported as it is for "auto" (one thread)
        return ENGINE
    return "polars" if size >= NATIVE_MIN_BYTES and _polars_available() else None


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
    for name, c in (*codes.items(), *numbers.items(), ("line", lines)):
        # codes, lines and pids in the smallest type that holds them (count and opCount whole)
        cols[name].append(c if name in ("count", "opcount") else _small(c))


def _fold(codes: dict, numbers: dict, res: Scan) -> None:
    """Add a block's calls to the sums per distinct call (:attr:`Scan.sums`)."""
    if not len(numbers["count"]):
        return
    keys = np.stack([codes[name].astype(np.int64) for name in _KEY] + [numbers["pid"].astype(np.int64)],
                    axis=1)
    radix = keys.max(axis=0) + 2  # the fields as digits of one number (a pid may be -1)
    if float(np.prod(radix.astype(float))) < 2.0**62:
        weights = np.cumprod(np.concatenate(([1], radix[:-1])))
        first, inverse = np.unique((keys + 1) @ weights, return_index=True, return_inverse=True)[1:]
        distinct = keys[first]
    else:
        distinct, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(inverse, kind="stable")
    starts = np.flatnonzero(np.concatenate(([True], np.diff(inverse[order]) != 0)))
    calls = np.diff(np.append(starts, len(order)))
    totals = np.add.reduceat(numbers["count"].astype(np.int64)[order], starts)
    sums = res.sums
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


def finish(scans: list[Scan], file: str) -> ParseResult:
    """Join the scans of consecutive parts of one log into its table, metadata and skip log."""
    res = ParseResult(meta={"format": FORMAT, "backend": "nccl"})
    offsets = []
    offset = 0
    for s in scans:
        offsets.append(offset)
        res.skipped.merge(SkipLog(s.skipped.count, s.skipped.by_reason,
                                  [(f, ln + offset if ln is not None else None, r)
                                   for f, ln, r in s.skipped.examples]))
        offset += s.lines
    t = _Table(scans, offsets)
    n = len(t.count)
    rank, group_size = t.ints("globalrank"), t.ints("nranks")
    nelems = []
    for side in (1, 2):  # in, out: count × its factor ("1", "0" or "p" = × nranks)
        factor = t.lookup("op", lambda o, side=side: "01p".index(NCCL_COLL_OPS.get(o, "000")[side]), np.int8)
        scaled = factor == 2
        values = np.where(scaled, np.maximum(group_size, 0), factor)
        values *= t.count
        nelems.append(_nullable(values, scaled & (group_size < 0)))
        del factor, scaled
    inits = [i for s in scans for i in s.inits]
    world_n = None
    if inits:  # after the sizes: those use the line's own nranks only
        import pandas as pd

        in_comm = {(h, p, c): (r, size) for h, p, c, r, size in inits}
        world_rank, world_n = _world_ranks(inits)
        # one lookup per distinct (host, pid, comm), spread over its rows
        comm_names = t.tables["comm"]
        keys = pd.DataFrame({"h": t.codes["host"], "p": t.pid, "c": t.codes["comm"]})
        which = keys.groupby(["h", "p", "c"], sort=False).ngroup().to_numpy()
        found = np.full((len(keys.drop_duplicates()), 3), _NA, np.int64)  # world rank, comm rank, size
        for j, (h, p, c) in enumerate(keys.drop_duplicates().itertuples(index=False)):
            proc = (t.tables["host"][h], int(p) if p >= 0 else None)
            found[j, 1:] = in_comm.get((*proc, comm_names[c]), (_NA, _NA))
            # a call on a world communicator has its rank in it: one process driving several GPUs
            # (one communicator per device) holds several ranks, which host:pid alone would merge
            on_world = world_n is not None and found[j, 2] == world_n
            found[j, 0] = found[j, 1] if on_world else world_rank.get(proc, _NA)
        found = found[which]
        rank = np.where(rank < 0, found[:, 0], rank)
        comm_rank = found[:, 1]
        group_size = np.where(group_size < 0, found[:, 2], group_size)
    import pandas as pd

    elem_bytes = t.lookup("datatype", lambda s: DTYPE_BYTES.get(_dtype(int(s)), _NA), np.int64)
    # The canonical dtypes (schema.CANONICAL_COLUMNS), built directly and compact: a few-valued
    # string column is a categorical of the codes (no object per call), an identifier the smallest
    # integer type that holds it, a column missing everywhere zeros that are never written (np.zeros
    # takes fresh pages from the system, which hold no memory until touched) under its mask.
    none = np.ones(n, bool)
    if t.calls is not None:  # aggregated: a row per distinct call, with its number of calls
        columns: dict[str, Any] = {
            "file": pd.Categorical.from_codes(np.zeros(n, np.int8),
                                              categories=pd.Index([file], dtype="string")),
            "rank": _nullable(rank, rank < 0), "step": _nullable(np.zeros(n, np.int64), none),
            "op": t.categorical("op", lambda o: NCCL_COLL_OPS.get(o, ("",))[0]),
            "dtype": t.categorical("datatype", lambda s: _dtype(int(s))),
            "elem_bytes": _nullable(elem_bytes, elem_bytes < 0), "in_nelems": nelems[0],
            "out_nelems": nelems[1], "group_size": _nullable(group_size, group_size < 0),
            "group": t.categorical("comm", None), "nccl_op": t.categorical("op", None), "count": t.count,
            "host": t.categorical("host", None) if t.has("host") else t.inferred("host", None),
            "pid": _inferred(_narrow(t.pid)), "aggregated_calls": t.calls,
        }
        if inits:
            columns["comm_rank"] = _nullable(comm_rank, comm_rank < 0)
        _meta(res, rank, group_size, world_n, t.processes)
        res.columns = columns if n else None
        return res
    columns = {
        "file": pd.Categorical.from_codes(np.zeros(n, np.int8), categories=pd.Index([file], dtype="string")),
        "rank": _nullable(rank, rank < 0), "step": _nullable(np.zeros(n, np.int64), none),
        "op": t.categorical("op", lambda o: NCCL_COLL_OPS.get(o, ("",))[0]),
        "dtype": t.categorical("datatype", lambda s: _dtype(int(s))),
        "elem_bytes": _nullable(elem_bytes, elem_bytes < 0), "in_nelems": nelems[0], "out_nelems": nelems[1],
        "group_size": _nullable(group_size, group_size < 0), "group": t.categorical("comm", None),
        "start_s": pd.arrays.FloatingArray(np.zeros(n), none),
        "duration_s": pd.arrays.FloatingArray(np.zeros(n), none),
        "source_line": _nullable(t.line, np.zeros(n, bool)),
        "nccl_op": t.categorical("op", None), "count": t.count,
        "opcount": _narrow(t.opcount), "redop": t.categorical("redop", lambda s: _redop(int(s))),
        "root": t.inferred("root", _int),
        "host": t.categorical("host", None) if t.has("host") else t.inferred("host", None),
        "pid": _inferred(_narrow(t.pid)),
        "tid": t.inferred("tid", _int), "device": t.inferred("dev", _int),
    }
    if inits:  # the rank within the call's own communicator (the checker reads the group layout from it)
        columns["comm_rank"] = _nullable(comm_rank, comm_rank < 0)
    tunings = [(ln + off, *rest) for off, s in zip(offsets, scans, strict=True) for ln, *rest in s.tunings]
    if tunings:
        columns.update(_tuning(tunings, t, t.lookup("op", None, object)))
    _meta(res, rank, group_size, world_n, t.processes)
    res.columns = columns if n else None  # no rows: the reader's empty table
    return res


def _meta(res: ParseResult, rank: np.ndarray, group_size: np.ndarray, world_n: int | None,
          processes: int) -> None:
    """The log's rank (where it has one), world size and number of processes."""
    ranks = rank[rank >= 0]
    sizes = group_size[group_size >= 0]
    largest = max(int(sizes.max()) if len(sizes) else 0, world_n or 0)
    res.meta.update(
        rank=int(ranks[0]) if len(ranks) and ranks.min() == ranks.max() else None,
        # the largest communicator is the world only when it can hold every process of the log
        world_size=largest if largest and processes <= largest else None,
        processes=processes,
    )


def _world_ranks(inits: list[tuple[Any, ...]]) -> tuple[dict[tuple[Any, Any], int], int | None]:
    """Each process's global rank: its rank in the largest communicator of the log (the world).

    A process belongs to several communicators under parallelism of more than one kind (tensor,
    pipeline, data: Megatron-LM ``parallel_state.py``), and its rank in each is a different number;
    only the world communicator's rank tells processes apart. A process with no Init line of that
    size gets none; when the largest communicators do not give distinct ranks (two data-parallel
    communicators of 4 ranks in a log of 8 processes, none of them the world) no process gets one,
    and the checker tells them apart by process. Returns the ranks by (host, pid) and the world's
    size (``None`` in the latter case).
    """
    world_n = max(size for *_, size in inits)
    ranks = {(h, p): r for h, p, _, r, size in inits if size == world_n}
    if len(set(ranks.values())) < len(ranks) or any(p is None for _, p in ranks):
        return {}, None
    return ranks, world_n


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


def _frame(columns: dict[str, Any]) -> Any:
    import pandas as pd

    return pd.DataFrame(columns)


def _nullable(values: np.ndarray, missing: np.ndarray) -> Any:
    """An ``Int64`` array: ``values`` where not ``missing``."""
    import pandas as pd

    return pd.arrays.IntegerArray(values.astype(np.int64, copy=False), missing)


class _Table:
    """The columns of consecutive scans joined, their code tables merged; the scans' columns are
    released as they are joined (each held once at a time, not twice)."""

    def __init__(self, scans: list[Scan], offsets: list[int]) -> None:
        parts = [(off, s.columns) for off, s in zip(offsets, scans, strict=True) if s.columns]
        self.tables: dict[str, list] = {}
        self.codes: dict[str, np.ndarray] = {}
        hosts, pids = [], []
        present = parts[0][1] if parts else {}
        #: Aggregated scans: the number of calls of each row (a distinct call), else ``None``.
        self.calls = None
        for name in _FACTORS:
            if parts and name not in present:  # not kept by an aggregated read
                continue
            merged: defaultdict = defaultdict(count().__next__)
            recoded = []
            for sc in scans:
                if sc.columns:
                    new = np.array([merged[v] for v in sc.tables[name]], dtype=np.int32)
                    same = bool((new == np.arange(len(new))).all())  # the first scan's, or as it
                    recoded.extend(sc.columns[name] if same else [new[block] for block in sc.columns[name]])
                    sc.columns[name] = []
                    if name == "host":
                        hosts.append(new[sc.processes[0]])
                        pids.append(sc.processes[1])
            self.tables[name] = list(merged)
            self.codes[name] = _small(np.concatenate(recoded)) if recoded else np.zeros(0, np.int8)
            del recoded
        #: How many distinct (host, pid) pairs the calls come from.
        self.processes = len(_pairs(np.concatenate(hosts), np.concatenate(pids))[0]) if hosts else 0
        empty = [np.zeros(0, np.int64)]
        self.pid, self.count = (self._join(parts, k, empty) for k in ("pid", "count"))
        if "calls" in present:
            self.calls = self._join(parts, "calls", empty)
            return
        self.line = np.concatenate([block.astype(np.int64) + off for off, c in parts for block in c["line"]]
                                   or empty)
        for _, c in parts:
            c["line"] = []
        self.opcount = self._join(parts, "opcount", empty)

    @staticmethod
    def _join(parts: list, name: str, empty: list) -> np.ndarray:
        out = np.concatenate([b for _, c in parts for b in c[name]] or empty)
        for _, c in parts:
            c[name] = []
        return out

    def lookup(self, name: str, fn, dtype) -> np.ndarray:
        """``fn`` of each distinct raw string of a field (the string itself if ``fn`` is None),
        spread over the rows."""
        table = self.tables[name] if fn is None else [fn(v) for v in self.tables[name]]
        return np.array(table, dtype=dtype)[self.codes[name]]

    def categorical(self, name: str, fn) -> Any:
        """A categorical column: ``fn`` of each distinct raw string (the string itself if ``fn`` is
        None; missing where that is None), its categories the values that occur, sorted (so that
        sorting the column sorts its strings), its codes the smallest integer type that holds them."""
        import pandas as pd

        codes = self.codes[name]
        table = self.tables[name] if fn is None else [fn(v) for v in self.tables[name]]
        used = np.bincount(codes, minlength=len(table)) > 0 if len(codes) else np.zeros(len(table), bool)
        categories = sorted({v for v, u in zip(table, used.tolist(), strict=True) if u and v is not None})
        at = {v: i for i, v in enumerate(categories)}
        recode = np.array([at.get(v, -1) if v is not None else -1 for v in table], np.int64)
        small = np.int8 if len(categories) < 2**7 else np.int16 if len(categories) < 2**15 else np.int32
        return pd.Categorical.from_codes(recode.astype(small)[codes],
                                         categories=pd.Index(categories, dtype="string"))

    def has(self, name: str) -> bool:
        """Whether some row has the field."""
        return bool(len(self.codes[name])) and not self.lookup(name, lambda v: v is None, bool).all()

    def ints(self, name: str) -> np.ndarray:
        """An integer field, :data:`_NA` where missing (a fresh array)."""
        return self.lookup(name, _int, np.int64)

    def inferred(self, name: str, fn) -> Any:
        """A string field (``fn`` None) or integer one (``fn`` :func:`_int`) as a table built from
        rows of dicts had it: a typed array when no row lacks it, else a list with ``None`` for
        pandas to infer the column type from, as it did."""
        values = _narrow(self.ints(name)) if fn is _int else self.lookup(name, None, object)
        return _inferred(values, self.lookup(name, lambda v: v is None, bool))


def _narrow(values: np.ndarray) -> np.ndarray:
    """An identifier column (a pid, thread, device, root) in the smallest signed integer type that
    holds its values (and :data:`_NA`)."""
    if not len(values):
        return values
    lo, hi = int(values.min()), int(values.max())
    for small in (np.int8, np.int16, np.int32):
        if np.iinfo(small).min <= lo and hi <= np.iinfo(small).max:
            return values.astype(small)
    return values


def _inferred(values: np.ndarray, missing: np.ndarray | None = None) -> Any:
    """A column as a table built from rows of dicts had it: ``values`` when none is missing,
    else a list with ``None`` for pandas to infer the column type from, as it did."""
    missing = values == _NA if missing is None else missing
    if not missing.any():
        return values
    return [None if m else v for v, m in zip(values.tolist(), missing.tolist(), strict=True)]


def _tuning(tunings: list[tuple[Any, ...]], t: _Table, ops: np.ndarray) -> dict[str, list]:
    """Give each TUNING line's algorithm and protocol to the preceding call of its thread."""
    hosts = {h: i for i, h in enumerate(t.tables["host"])}
    threads = _frame({"h": t.codes["host"], "p": t.pid, "t": t.ints("tid")})
    rows_of = threads.groupby(["h", "p", "t"], sort=False).indices
    tuned: dict[int, tuple[str, str, int]] = {}
    for line, host, pid, tid, op, algo, proto, nbytes in sorted(tunings, key=operator.itemgetter(0)):
        rows = rows_of.get((hosts.get(host, _NA), _NA if pid is None else pid, _NA if tid is None else tid))
        if rows is None:
            continue
        k = int(np.searchsorted(t.line[rows], line, side="right")) - 1
        if k >= 0 and (row := int(rows[k])) not in tuned and ops[row] == op:
            tuned[row] = (algo, proto, nbytes)
    if not tuned:
        return {}
    n = len(t.line)
    return {name: [tuned[i][j] if i in tuned else None for i in range(n)]
            for j, name in enumerate(("algorithm", "protocol", "tuning_bytes"))}
