"""DeepSpeed comms logger output (``deepspeed/utils/comms_logging.py``).

* verbose lines, one per op (rank 0 only)::

    [Rank 0] comm op: all_gather_into_tensor | time (ms): 0.11 | msg size: 6.0 MB
        | algbw (Gbps): .. | busbw (Gbps): ..

  (the 2022-07 .. 2023-07 form starts ``rank=0 | ``; with the logger's ``debug`` on, the op is followed by
  `` | [Caller Func: allreduce_bucket]``, kept as the row's ``caller``);
* the ``log_summary`` table: an op name on its own line (optionally ``| [Caller Func: f]``),
  then rows ``size count total_ms avg_ms tput_Gbps busbw_Gbps``. A summary row becomes
  ``count`` rows of the canonical table with ``duration_s`` NA (only the mean is known,
  in ``mean_duration_s``);
* after it, with ``log_summary(show_straggler=True)``, the breakdown with straggler effect: the same
  layout with other columns, ``size count total_comm_ms total_straggler_ms avg_comm_ms avg_straggler_ms``
  (each call's fastest rank's latency and the rest's wait, all-reduced over the ranks). Its rows are
  the summary's calls again (with the analysis's own all-reduces of 4 B among them, logged as it runs):
  each row is checked against that layout and counted as no call, in a note; where a row counts as many
  calls as the summary's of its op and size, its mean latency of the fastest rank is kept on those calls
  (``comm_mean_duration_s``: the call's time without the wait for the last rank to arrive).

Sizes are DeepSpeed's ``convert_size``: 1024-based units rounded to 2 decimals, of the tensor
argument (``reduce_scatter_tensor``: the full input; ``all_gather_into_tensor``: the shard),
so only an approximate byte count (``msg_size_bytes``) is known and no element count or
dtype: those are NA. Its bandwidths are kept as printed; they use the global world size n
(``calc_bw_log``: busbw = algbw × (n-1)/n for all_reduce, whose algbw counts its bytes twice, and for
all_gather, reduce_scatter and all_to_all), so where the verbose lines' are large enough to pin one whole
n, printed with 2 decimals as they are, it is the trace's world size (:func:`world_from_bandwidth`), said
in a note.
"""

from __future__ import annotations

import math
import re
from typing import Any, TextIO

from zerocalc.errors import TraceFormatError
from zerocalc.traces.busbw import RanksFromBandwidth, ranks_from_bandwidth
from zerocalc.traces.records import COUNT_LIMIT, INT_LIMIT, ParseResult, bad
from zerocalc.traces.schema import DEEPSPEED_OPS, DEEPSPEED_SIZE_UNITS, DEEPSPEED_SUMMARY_COLUMNS

FORMAT = "deepspeed_comms"
_SIZE = r"(?P<size>\d+(?:\.\d+)?) ?(?P<unit>[KMGTP]?B)"
VERBOSE = re.compile(
    r"(?:\[Rank (?P<rank>\d+)\] )?(?:rank=(?P<rank2>\d+) \| )?comm op: (?P<op>\S+) "
    r"(?:\| \[Caller Func: (?P<caller>[^\]]*)\] )?\| time \(ms\): "
    r"(?P<time>\d+(?:\.\d+)?) \| msg size: " + _SIZE
    + r" \| algbw \(Gbps\): (?P<algbw>\d+(?:\.\d+)?) +\| busbw \(Gbps\): (?P<busbw>\d+(?:\.\d+)?)"
)
HEADER = re.compile(r"^Comm\. Op\s+Message Size\s+Count\b")
#: the straggler breakdown's header (``comms_logging.py``, ``log_all(show_straggler=True)``)
STRAGGLER_HEADER = re.compile(r"^Comm\. Op\s+Message Size\s+Count\s+Total comm lat\(ms\)")
#: the straggler breakdown's columns after the size (``log_all``: the latencies of each call's fastest rank,
#: all-reduced with MIN over the ranks, and the others' wait beyond it)
STRAGGLER_COLUMNS = ("calls", "total_comm_latency_ms", "total_straggler_ms", "avg_comm_latency_ms",
                     "avg_straggler_ms")
#: each table's rows: the name an error gives them and their columns after the size
_LAYOUTS = {"summary": ("log_summary row", DEEPSPEED_SUMMARY_COLUMNS),
            "straggler": ("straggler breakdown row", STRAGGLER_COLUMNS)}
#: a line of underscores or dashes: the rules DeepSpeed prints around "Breakdown with straggler effect"
RULE = re.compile(r"^[_-]{3,}\s*$")
OPLINE = re.compile(r"^(?P<op>[A-Za-z_][\w.]*)(?: \| \[Caller Func: (?P<caller>[^\]]*)\])?\s*$")
SUMROW = re.compile(r"^\s+" + _SIZE + r"\s+(?P<rest>\d.*?)\s*$")


def _bytes(size: str, unit: str) -> float:
    return float(size) * DEEPSPEED_SIZE_UNITS[unit]


def _base(file: str, lineno: int, name: str) -> dict[str, Any]:
    return {"file": file, "rank": None, "step": None, "op": DEEPSPEED_OPS.get(name, "other"),
            "dtype": None, "elem_bytes": None, "in_nelems": None, "out_nelems": None,
            "group_size": None, "group": None, "start_s": None, "duration_s": None,
            "source_line": lineno, "op_name": name}


def parse_verbose_line(
    line: str, *, file: str = "<line>", lineno: int | None = None
) -> dict[str, Any] | None:
    """A verbose ``comm op:`` line → row dict; ``None`` if the line is not one.

    Raises :class:`TraceFormatError` for a line with ``comm op:`` that does not fit the layout.
    """
    if "comm op:" not in line:
        return None
    m = VERBOSE.search(line)
    if m is None:
        raise TraceFormatError(file, lineno, "'comm op:' line does not fit DeepSpeed's verbose layout")
    row = _base(file, lineno or 0, m["op"])
    rank = m["rank"] or m["rank2"]
    if m["caller"] is not None:  # the logger's debug mode names the calling function
        row["caller"] = m["caller"]
    if rank is not None and int(rank) >= INT_LIMIT:
        raise TraceFormatError(file, lineno, f"rank {rank[:30]} is past what a rank number holds")
    size = _bytes(m["size"], m["unit"])
    figures = [float(m[k]) for k in ("time", "algbw", "busbw")]
    if not all(math.isfinite(v) for v in (size, *figures)):
        raise TraceFormatError(file, lineno, "'comm op:' line with a number no double holds")
    row.update(rank=int(rank) if rank is not None else None, duration_s=figures[0] * 1e-3,
               msg_size=f"{m['size']} {m['unit']}", msg_size_bytes=size,
               calls=1, algbw_Gbps_printed=figures[1], busbw_Gbps_printed=figures[2])
    return row


def parse_summary_row(line: str, *, file: str = "<line>", lineno: int | None = None,
                      what: str = "log_summary row",
                      columns: tuple[str, ...] = DEEPSPEED_SUMMARY_COLUMNS) -> dict[str, Any] | None:
    """A ``log_summary`` data row → its fields; ``None`` if the line is not indented data. ``what`` names
    the row in an error and ``columns`` its fields after the size (the straggler breakdown's rows have the
    same layout, other columns: :data:`STRAGGLER_COLUMNS`)."""
    m = SUMROW.match(line)
    if m is None:
        return None
    toks = m["rest"].split()
    if len(toks) != len(columns) or not toks[0].isdigit():
        raise TraceFormatError(file, lineno, f"{what} does not have 6 columns")
    try:
        vals = [int(toks[0])] + [float(t) for t in toks[1:]]
    except ValueError:
        raise TraceFormatError(file, lineno, f"{what} with a non-numeric column") from None
    size = _bytes(m["size"], m["unit"])
    if vals[0] >= COUNT_LIMIT or not all(math.isfinite(v) for v in (*vals[1:], size)):
        raise TraceFormatError(file, lineno, f"{what} with a number past what its column holds")
    rec = dict(zip(columns, vals, strict=True))
    rec.update(msg_size=f"{m['size']} {m['unit']}", msg_size_bytes=size)
    return rec


def parse(stream: TextIO, file: str, *, strict: bool = False) -> ParseResult:
    res = ParseResult(meta={"format": FORMAT, "backend": None})
    rows = res.rows
    in_table = False
    straggler: list[int] = []  # the straggler breakdown's rows (line numbers): no calls of their own
    # (summary table, op, caller, size) → calls, fastest rank's mean ms: a breakdown's, of the table before it
    comm_means: dict[tuple, tuple[int, float]] = {}
    tables = 0  # log_summary tables so far (one a call of log_summary, as with reset_log() each epoch)
    summary_lines: list[tuple[tuple, int, int]] = []  # each summary row: its key, its calls in rows
    current: tuple[str, str | None] | None = None
    ranks: set[int] = set()
    for lineno, line in enumerate(stream, 1):
        try:
            if "comm op:" in line and not line.lstrip().startswith("#"):
                row = parse_verbose_line(line, file=file, lineno=lineno)
                if row is not None:
                    rows.append(row)
                    if row["rank"] is not None:
                        ranks.add(row["rank"])
                continue
            if HEADER.match(line):
                in_table, current = ("straggler" if STRAGGLER_HEADER.match(line) else "summary"), None
                tables += in_table == "summary"
                continue
            if not in_table:
                continue
            if line.startswith("#") or RULE.match(line):  # a comment or a rule ends it, a blank line not
                in_table = False
                continue
            if not line.strip():
                continue
            if line[0].isspace():
                what, columns = _LAYOUTS[in_table]
                rec = parse_summary_row(line, file=file, lineno=lineno, what=what, columns=columns)
                if rec is None:
                    raise TraceFormatError(file, lineno, f"unreadable {what}")
                if current is None:
                    raise TraceFormatError(file, lineno, f"{what} before any op name")
                if in_table == "straggler":
                    straggler.append(lineno)
                    comm_means[(tables, *current, rec["msg_size"])] = (rec["calls"],
                                                                       rec["avg_comm_latency_ms"])
                    continue
                name, caller = current
                n = rec.pop("calls")
                for _ in range(n):
                    row = _base(file, lineno, name)
                    row.update(caller=caller, calls=n, mean_duration_s=rec["avg_latency_ms"] * 1e-3,
                               msg_size=rec["msg_size"], msg_size_bytes=rec["msg_size_bytes"],
                               total_duration_s=rec["total_latency_ms"] * 1e-3, summary=True)
                    rows.append(row)
                summary_lines.append(((tables, name, caller, rec["msg_size"]), len(rows) - n, len(rows)))
                continue
            m = OPLINE.match(line)
            if m is None:
                in_table = False
                continue
            current = (m["op"], m["caller"])
        except TraceFormatError as exc:
            bad(file, lineno, exc.reason, strict, res.skipped)
    res.meta.update(rank=next(iter(ranks)) if len(ranks) == 1 else None, world_size=None)
    found = world_from_bandwidth(rows)
    if found is not None:
        res.meta["world_size"] = found.n
        res.meta["world_from"] = "its printed bandwidths"
        res.meta["notes"] = [f"world size {found.n}: from DeepSpeed's printed bandwidths, "
                             + found.how.removeprefix("from ")]
    if comm_means:
        _fastest_rank_means(rows, summary_lines, comm_means)
    if straggler:
        res.meta.setdefault("notes", []).append(
            f"the breakdown with straggler effect (log_summary(show_straggler=True), {len(straggler)} rows, "
            f"lines {straggler[0]}-{straggler[-1]}) repeats the summary's calls with their latency split "
            "into the fastest rank's and the others' wait: read as no calls of its own")
    return res


def _fastest_rank_means(rows: list[dict[str, Any]], summary_lines: list[tuple[tuple, int, int]],
                        comm_means: dict[tuple, tuple[int, float]]) -> None:
    """Keep, on the calls ``rows[lo:hi]`` of each ``log_summary`` row (``summary_lines``: its (table, op,
    caller, size) and ``lo``, ``hi``), the mean latency of the fastest rank that the breakdown after that
    table gives (``Avg comm lat(ms)``, in ``comm_mean_duration_s``), where the breakdown's row counts as many
    calls (the breakdown also counts its own all-reduces, which the summary, printed before them, does
    not)."""
    for key, lo, hi in summary_lines:
        found = comm_means.get(key)
        if found is not None and found[0] == hi - lo:
            for row in rows[lo:hi]:
                row["comm_mean_duration_s"] = found[1] * 1e-3


#: DeepSpeed ops whose printed busbw is algbw × (n-1)/n (``calc_bw_log``; all_reduce's algbw doubles its size)
_SCALED = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")


def world_from_bandwidth(rows: list[dict[str, Any]]) -> RanksFromBandwidth | None:
    """The world size the verbose lines' printed algbw and busbw pin (:mod:`zerocalc.traces.busbw`'s
    bounds of ``(n-1)/n``, each figure within half its last printed digit), or None where no line of a
    scaled op prints both above 0, the lines disagree, or they allow more than one whole n."""
    printed = []
    for r in rows:
        if DEEPSPEED_OPS.get(r["op_name"]) not in _SCALED:
            continue
        a, b = r.get("algbw_Gbps_printed"), r.get("busbw_Gbps_printed")
        printed.append({"algbw_GBps": a, "busbw_GBps": b, "source_line": r["source_line"]})
    if not printed:
        return None
    try:
        return ranks_from_bandwidth(printed, "all_gather", file="")  # all_gather's factor: (n-1)/n
    except TraceFormatError:  # no figure above 0, figures that disagree, or several whole n
        return None
