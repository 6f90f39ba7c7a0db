"""The lines of an NCCL debug log: the patterns of its COLL, Init and TUNING lines, the fields
the table keeps of a call, and one COLL line read on its own (:func:`parse_coll_line`).

The layout of each line is described in :mod:`zerocalc.traces.nccl_log`; a line reads the same as
bytes and as text (the patterns match ASCII digits and whitespace only).
"""

from __future__ import annotations

import re
from typing import Any

from zerocalc.errors import TraceFormatError
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
