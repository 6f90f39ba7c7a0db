"""The rows of an nccl-tests table: each header's column layout, and each row read by it.

nccl-tests ``src/common.cu``/``src/util.cu`` and ``doc/PERFORMANCE.md``: ``size`` is the total bytes,
``count`` the NCCL count argument; then out-of-place and in-place ``time(us) algbw busbw #wrong``,
per layout as :mod:`zerocalc.traces.nccl_tests` describes. A row that does not fit the header above it
is refused, never read with shifted columns. A header copied with its leading ``#`` marks removed (as
dstack's pages print nccl-tests output, e.g. dstackai/dstack ``examples/clusters/a4/README.md``) has lost
the one of ``#wrong`` too: ``wrong`` names the same column.

nccl-tests prints a row with several ``printf`` calls (``src/common.cu``: the lead columns, then each
side's cells, then the newline). Whatever else the process prints in between lands inside the row: a
launcher's tag before each piece (OpenMPI ``--tag-output``), and NCCL's own INFO lines, which end with a
newline and so split the row over several lines (``8192  2048  float  sum  -1[0] host:1:2 [0] NCCL INFO
...``, then NCCL's lines, then ``[0]     75.38    0.05    0.10      0``). :class:`RowJoiner` puts such a
row back together: the piece that opens it (two integers and a type), then the following pieces of cells
from the same process, NCCL's text and other lines between them skipped, until the header's width is
reached; a row that is not completed before the next row, header or run is refused naming its line.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any

from zerocalc.errors import TraceFormatError
from zerocalc.traces.prefix import inner_tags, prefix_of, strip_prefix
from zerocalc.traces.records import COUNT_LIMIT, INT_LIMIT, SkipLog, bad
from zerocalc.traces.schema import NCCL_TESTS_DTYPES

_NUM = re.compile(r"^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$")
_INT = re.compile(r"^-?[0-9]+$")
_HEADER = re.compile(r"\bsize\s+count\s+type\b|\bbytes\s+N\s+type\b")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_CLOCK = re.compile(r"^\d{2}:\d{2}:\d{2}$")
#: Lead columns of the header → field names; then per side (out-of-place, in-place) these.
_LEAD = {"size": "size_bytes", "count": "count", "type": "type", "redop": "redop", "root": "root"}
_SIDE = {"time": "time_us", "cputime": "time_us", "algbw": "algbw", "busbw": "busbw",
         "#wrong": "wrong", "wrong": "wrong", "error": "wrong", "i_min": "i_min_us", "i_max": "i_max_us",
         "i_p99": "i_p99_us", "i_cv%": "i_cv_pct"}
#: nccl-tests v1 (its tests' ``print_header`` to Mar 2019, nccl-tests cbe7f65, NCCL 2.0-2.3): ``bytes N
#: type`` then each test's ``op`` / ``root``, and per side ``time algbw busbw res``, the time in
#: MILLISECONDS (``common.cu``: ``PRINT("  %7.3f  %5.2f  %5.2f  %7.0le", deltaSec * 1.0E3, ...)``) and
#: ``res`` the largest deviation found; broadcast printed the out-of-place side only. Its rows without their
#: header are told by their times (:func:`_in_milliseconds`).
#: Appended to the layout of a table whose times are ``cputime`` (nccl-tests ``-C 1``, since d313d20, Sep
#: 2022: ``src/common.cu`` reads ``cputimeSec = tim.elapsed()`` after the loop that enqueues the calls and
#: before ``completeColl`` waits for them): the host's time to launch a call, not the call's, so not what
#: NCCL's cost model prices (with ``-z`` the launch waits for each call).
CPUTIME_SUFFIX = "-cputime"
_LEAD_V1 = {"bytes": "size_bytes", "N": "count", "type": "type", "op": "redop", "root": "root"}
_SIDE_V1 = {"time": "time_us", "algbw": "algbw", "busbw": "busbw", "res": "wrong"}


def _float(tok: str) -> float | None:
    """The token's value; None where it is not a number nccl-tests prints (``inf``, ``nan``) or overflows a
    double (``1e309``)."""
    v = float(tok) if _NUM.match(tok) else math.nan
    return v if math.isfinite(v) else None


@dataclass
class Layout:
    """The columns of one header line (or of a headerless row's shape)."""

    name: str
    columns: tuple[str, ...]
    timestamp: bool = False
    #: Why rows under this header cannot be read (an unknown column), or "".
    invalid: str = ""
    line: int | None = None
    #: Microseconds per unit of its time columns (1000: nccl-tests v1's milliseconds).
    time_unit_us: float = 1.0

    @property
    def width(self) -> int:
        return len(self.columns) + (2 if self.timestamp else 0)


def parse_header(payload: str, lineno: int | None = None) -> Layout | None:
    """The :class:`Layout` of a column-header line (``#  size  count  type ...``), ``None`` for
    other lines. A header with a column zerocalc does not know gives a layout whose rows are
    refused (``invalid`` says why)."""
    m = _HEADER.search(payload)
    if not m or "algbw" not in payload:
        return None
    before = payload[:m.start()].split()
    toks = payload[m.start():].split()
    v1 = toks[0] == "bytes"
    lead_of, side_of = (_LEAD_V1, _SIDE_V1) if v1 else (_LEAD, _SIDE)
    cols: list[str] = []
    side = ""
    seen_time = 0
    timestamp = False
    new_wrong = False
    unknown = [t for t in before if t != "#"]
    for t in toks:
        if t in lead_of and not seen_time:
            cols.append(lead_of[t])
        elif t in ("time", "cputime") and t in side_of:
            seen_time += 1
            side = "oop_" if seen_time == 1 else "ip_"
            cols.append(side + side_of[t])
        elif t in side_of and seen_time:
            new_wrong |= t in ("#wrong", "wrong")
            cols.append(side + side_of[t])
        elif t == "timestamp" and seen_time == 2:
            timestamp = True
        else:
            unknown.append(t)
    if len(unknown) > 2:  # prose that names the columns, not a header
        return None
    invalid = ""
    if unknown:
        invalid = f"the header (line {lineno}) has column(s) nccl-tests does not print: {', '.join(unknown)}"
    elif seen_time not in (1, 2) or cols[:3] != ["size_bytes", "count", "type"]:
        invalid = f"the header (line {lineno}) lacks the out-of-place and in-place column groups"
    lead = tuple(c for c in cols if c in ("redop", "root"))
    if "cputime" in toks:  # -C: the host's time to enqueue the calls (CPUTIME_SUFFIX)
        layout = parse_header(payload.replace("cputime", "time"), lineno)
        assert layout is not None
        return replace(layout, name=layout.name + CPUTIME_SUFFIX)
    if v1:
        name = "-".join(("v1", *lead)) + ("" if seen_time == 2 else "-oop")
        return Layout(name, tuple(cols), timestamp, invalid, lineno, time_unit_us=1000.0)
    if seen_time == 1 and not invalid:  # rccl-tests -O 0 (src/common.cu): the in-place group alone
        cols = [c.replace("oop_", "ip_", 1) for c in cols]
        name = "-".join(("2022" if new_wrong else "pre2022", *lead, "inplace"))
        return Layout(name, tuple(cols), timestamp, invalid, lineno)
    if "oop_i_min_us" in cols:
        name = "2022-per-iter"
    elif new_wrong:
        name = "2022" if lead == ("redop", "root") else "-".join(("2022", *lead))
    else:
        name = "-".join(("pre2022", *lead))
    return Layout(name, tuple(cols), timestamp, invalid, lineno)


def header_tail(payload: str) -> bool:
    """Whether a line holds only column names of a header's time groups (``#wrong  time  algbw  busbw
    #wrong``): the rest of a header a wrapped paste broke
    (:class:`zerocalc.traces.nccl_tests_wrapped.Wrapped`)."""
    words = payload.split()
    return bool(words) and all(w in _SIDE or w == "timestamp" for w in words)


def dated_by_root(recs: list[tuple[int, dict[str, Any]]]) -> list[tuple[int, dict[str, Any]]]:
    """The rows of one run, their layout renamed ``2022…`` where a header that reads as pre-2022 (no
    ``#wrong`` column) prints ``redop root`` lead columns and every row's root is -1: before Aug 2022 only
    reduce_perf printed both, its root a rank, ``0`` to ``nranks - 1`` (nccl-tests 8274cb4 ``src/reduce.cu``:
    ``begin_root = 0; end_root = nProcs*nThreads*nGpus-1``); since then every test prints both and the tests
    of no root print -1 (51af557, "Resync with NCCL 2.13"). Such a table is a later run's, cut after the run
    to fewer columns (its ``#wrong`` dropped); other rows are returned as they are."""
    names = {rec["layout"] for _, rec in recs}
    if len(names) != 1:
        return recs
    parts = names.pop().split("-")
    if parts[:3] != ["pre2022", "redop", "root"] or any(rec.get("root") != -1 for _, rec in recs):
        return recs
    name = "-".join(["2022", *parts[1:]]) if "inplace" in parts else "-".join(["2022", *parts[3:]])
    return [(ln, {**rec, "layout": name}) for ln, rec in recs]


def _shape_layout(toks: list[str]) -> Layout | None:
    """The layout a headerless row's shape implies: after ``size count type``, a word is a
    ``redop`` and an integer before the eight timing cells a ``root``."""
    rest = len(toks) - 3
    lead: list[str] = []
    i = 3
    for _ in range(2):
        if rest <= 8 or i >= len(toks):
            break
        tok = toks[i]
        if _float(tok) is None and tok != "N/A" and "redop" not in lead:
            lead.append("redop")
        elif _INT.match(tok) and rest - 1 >= 8:
            lead.append("root")
        else:
            break
        i += 1
        rest -= 1
    if rest != 8:
        return None
    sides = [p + c for p in ("oop_", "ip_") for c in ("time_us", "algbw", "busbw", "wrong")]
    columns = ("size_bytes", "count", "type", *lead, *sides)
    if _in_milliseconds(toks[0], toks[i], toks[i + 1], toks[i + 4]):
        return Layout("-".join(("v1", *lead)), columns, time_unit_us=1000.0)
    name = "2022" if lead == ["redop", "root"] else "-".join(("pre2022", *lead))
    return Layout(name, columns)


_THREE_DECIMALS = re.compile(r"^[0-9]+\.[0-9]{3}$")


def _in_milliseconds(size: str, time: str, algbw: str, in_place_time: str) -> bool:
    """Whether a headerless row is nccl-tests v1's, its times in milliseconds (:data:`_LEAD_V1`): v1
    printed them ``%7.3f``, three decimals, which no later release prints (``%7.2f`` / ``%7.1f`` /
    ``%7.0f``, from 2.18 ``getFloatStr`` at most two); its algbw, where it shows, is then the size over the
    time in ms (``algBw = size / 1e9 / sec``)."""
    if not (_THREE_DECIMALS.match(time) and _THREE_DECIMALS.match(in_place_time)):
        return False
    ms, bw = float(time), _float(algbw)
    if bw is None or bw < 0.1 or ms <= 0:
        return True
    return abs(int(size) / 1e6 / ms - bw) <= 0.01 + 0.05 * bw


def _cells(toks: list[str], layout: Layout, file: str, lineno: int | None) -> dict[str, Any]:
    """One row's cells by ``layout``; :class:`TraceFormatError` when a cell does not fit its column."""
    if len(toks) != layout.width:
        where = f"the header (line {layout.line})" if layout.line is not None else "its layout"
        raise TraceFormatError(file, lineno, f"row has {len(toks)} cells, {where} has {layout.width} "
                                             "columns: refused, not read with shifted columns")
    if layout.timestamp and not (_DATE.match(toks[-2]) and _CLOCK.match(toks[-1])):
        raise TraceFormatError(file, lineno, "the header's timestamp column holds no date and time")
    rec: dict[str, Any] = {"layout": layout.name}
    for col, tok in zip(layout.columns, toks, strict=False):
        if col in ("size_bytes", "count"):
            if not _INT.match(tok) or tok.startswith("-"):
                raise TraceFormatError(file, lineno, f"{col} {tok!r} is not a whole number")
            if int(tok) >= COUNT_LIMIT:
                raise TraceFormatError(file, lineno, f"{col} {tok!r} is past what a 64-bit count holds")
            rec[col] = int(tok)
        elif col == "redop" and tok == "":
            rec[col] = None  # the blank cell :func:`_blank_redop` restored
        elif col in ("type", "redop"):
            if _float(tok) is not None or tok == "N/A":
                raise TraceFormatError(file, lineno, f"{col} {tok!r} is a number, not a name")
            rec[col] = tok
        elif col == "root":
            if not _INT.match(tok):
                raise TraceFormatError(file, lineno, f"root {tok!r} is not an integer")
            if abs(int(tok)) >= INT_LIMIT:
                raise TraceFormatError(file, lineno, f"root {tok!r} is past what nccl-tests' int root holds")
            rec[col] = int(tok)
        elif tok == "N/A":
            rec[col] = None
        else:
            v = _float(tok)
            if v is None:
                raise TraceFormatError(file, lineno, f"{col} {tok!r} is not a number")
            rec[col] = v * layout.time_unit_us if col.endswith("time_us") else v
    if rec["type"] not in NCCL_TESTS_DTYPES:
        raise TraceFormatError(file, lineno, f"type {rec['type']!r} is not an nccl-tests data type")
    return rec


def cells_of(toks: list[str], layout: Layout, file: str, lineno: int | None) -> dict[str, Any]:
    """One row's cells ``toks`` (already split, a blank ``redop`` as ``""``) read by ``layout``, as a text
    row's are; :class:`TraceFormatError` when a cell does not fit its column (the Markdown tables of
    :mod:`zerocalc.traces.nccl_tests_markdown`)."""
    return _cells(toks, layout, file, lineno)


def parse_row(line: str, *, file: str = "<line>", lineno: int | None = None,
              layout: Layout | None = None) -> dict[str, Any] | None:
    """One result row → dict of its layout's fields; ``None`` for comments and other lines.

    Read by ``layout`` (the header above it) when given, else by its shape, past the launcher
    tags before and inside it (:func:`~zerocalc.traces.prefix.inner_tags`). Raises
    :class:`TraceFormatError` for a line that starts like a result row (two integers and a name)
    but does not fit the layout, or whose body holds another process's tag (a row another
    process's output broke into).
    """
    payload = strip_prefix(line)
    body, tags = inner_tags(payload)
    toks = body.split()
    if len(toks) < 3 or not ((toks[0] + toks[1]).isascii() and toks[0].isdecimal() and toks[1].isdecimal()):
        return None
    lead = prefix_of(line)
    other = [t for t in tags if lead and "".join(t.split()) not in lead]
    if other:
        raise TraceFormatError(file, lineno, "row continues with another process's output "
                                             f"({other[0].strip()} inside a {lead} line): refused")
    if layout is None:
        layout = _shape_layout(toks)
        if layout is None:
            raise TraceFormatError(file, lineno, "result row fits no nccl-tests column layout "
                                                 f"({len(toks)} cells)")
    elif layout.invalid:
        raise TraceFormatError(file, lineno, f"row refused: {layout.invalid}")
    return _cells(_blank_redop(toks, layout), layout, file, lineno)


def _blank_redop(toks: list[str], layout: Layout | None) -> list[str]:
    """``toks`` with the ``redop`` cell nccl-tests printed blank put back as ``""``: up to v2.11 the
    all-to-all test prints a ``redop`` header column and, in each row, that cell as ``%6s`` of ``""``
    (``src/common.cu`` ``print_line_header``; ``src/alltoall.cu`` ``TimeTest(..., "", -1)``), which a
    split on blanks loses. Only where the header has ``redop`` and the row's cell there is a number
    (its first time): the row then fits the header's width, its other cells in their columns."""
    if layout is None or "redop" not in layout.columns:
        return toks
    i = layout.columns.index("redop")
    if len(toks) > i and _float(toks[i]) is not None:
        return [*toks[:i], "", *toks[i:]]
    return toks




#: Where NCCL's own line starts inside a line (``host:pid:tid [dev] NCCL INFO``, NCCL ``src/debug.cc``):
#: from there to the end of the line the text is NCCL's (its lines end with a newline).
_NCCL_TEXT = re.compile(r"(?:[A-Za-z][\w.\-]*:\d+:\d+ )?\[\d+\] NCCL (?:INFO|WARN)\b|\bNCCL (?:INFO|WARN)\b")


def _row_start(toks: list[str]) -> bool:
    return len(toks) >= 3 and (toks[0] + toks[1]).isascii() and toks[0].isdecimal() and toks[1].isdecimal()


def _cell(tok: str) -> bool:
    """Whether a token can be a cell after a row's lead columns (a number, ``N/A``, a timestamp)."""
    return bool(_NUM.match(tok) or tok == "N/A" or _DATE.match(tok) or _CLOCK.match(tok))


class RowJoiner:
    """A table's rows from its lines, each row put together from the pieces other output split
    (module docstring); bad rows go to ``skipped`` (raise in strict mode)."""

    def __init__(self, file: str, strict: bool, skipped: SkipLog) -> None:
        self.file, self.strict, self.skipped = file, strict, skipped
        #: The row being put together: (its first line, its prefix, its cells so far, its layout).
        self.pending: tuple[int, str, list[str], Layout] | None = None

    def _continues(self, lead: str, toks: list[str]) -> bool:
        """Whether cells alone (``0  10519  6.38  9.57  0``: no type's name, which a row's start holds) carry
        on the row waiting for its pieces, as the rest of a row a wrapped paste broke would."""
        return self.pending is not None and lead == self.pending[1] and all(_cell(t) for t in toks)

    def feed(self, line: str, lineno: int, layout: Layout | None) -> tuple[int, dict[str, Any]] | None:
        """The row this line completes, as ``(its first line, its cells)``, if any."""
        lead = prefix_of(line)
        body = strip_prefix(line)
        cut = _NCCL_TEXT.search(body)
        if cut is not None:
            body = body[:cut.start()]
        body, tags = inner_tags(body)
        toks = body.split()
        if not toks:
            return None
        if _row_start(toks) and not self._continues(lead, toks):
            self.flush()
            other = [t for t in tags if lead and "".join(t.split()) not in lead]
            try:
                if other:
                    raise TraceFormatError(self.file, lineno, "row continues with another process's output "
                                                              f"({other[0].strip()} inside a {lead} line): "
                                                              "refused")
                toks = _blank_redop(toks, layout)
                if layout is not None and not layout.invalid and len(toks) < layout.width:
                    self.pending = (lineno, lead, toks, layout)  # its other pieces on the lines below
                    return None
                return lineno, parse_row(body, file=self.file, lineno=lineno, layout=layout)
            except TraceFormatError as exc:
                bad(self.file, lineno, exc.reason, self.strict, self.skipped)
                return None
        if self.pending is None or lead != self.pending[1] or not all(_cell(t) for t in toks):
            return None  # another process's line, or text between a row's pieces
        first, lead, cells, pending_layout = self.pending
        cells = _blank_redop(cells + toks, pending_layout)  # a blank redop right where the row broke
        if len(cells) < pending_layout.width:
            self.pending = (first, lead, cells, pending_layout)
            return None
        self.pending = None
        try:
            return first, _cells(cells, pending_layout, self.file, first)
        except TraceFormatError as exc:
            bad(self.file, first, exc.reason, self.strict, self.skipped)
            return None

    def flush(self) -> None:
        """Refuse the row being put together, if any: its pieces end before its header's width."""
        if self.pending is None:
            return
        first, _, cells, layout = self.pending
        self.pending = None
        where = f"the header (line {layout.line})" if layout.line is not None else "its layout"
        bad(self.file, first, f"row has {len(cells)} cells, {where} has {layout.width} columns "
                              "(its remaining pieces never came): refused, not read with shifted columns",
            self.strict, self.skipped)


def cputime_refusal(rows: list[dict[str, Any]], file: str) -> TraceFormatError | None:
    """The error for a comparison or fit of rows whose times are ``-C`` cputime (:data:`~zerocalc.traces.
    nccl_tests_rows.CPUTIME_SUFFIX`), naming the first such row; ``None`` when none is."""
    first = next((r for r in rows if str(r.get("layout") or "").endswith(CPUTIME_SUFFIX)), None)
    if first is None:
        return None
    return TraceFormatError(file, first.get("source_line"), "its times are cputime (nccl-tests -C 1): "
                            "the host's time to enqueue the calls, not the calls' own; run without -C to "
                            "compare or fit them")


def counts_wrong(layout: str | None) -> bool:
    """Whether a row of this layout holds in ``wrong`` the count of elements that failed nccl-tests' check
    (``#wrong``, the layouts since nccl-tests' Aug 2022 "Resync with NCCL 2.13": ``src/common.cu``
    ``wrongElts``), a count above 0 being a call whose result came out corrupted; the older layouts' ``error``
    column, read into the same ``wrong``, is the largest deviation, not a count."""
    return str(layout or "").startswith("2022")
