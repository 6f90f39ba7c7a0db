"""The canonical rows of a read, part by part (:func:`row_parts`): the full table a user asks for
(``trace summary --format json``) without holding it, so memory stays flat in the length of a log.

It follows an aggregated read of the same paths (:func:`zerocalc.traces.read_traces` with
``aggregate=True``), which has already checked every file, kept per distinct NCCL call only its number
of calls, and holds the rows of the other formats (a Kineto trace, an nccl-tests output, a DeepSpeed
comms log are read whole by their parsers anyway). Each NCCL debug log is then read again, block by
block as :func:`zerocalc.traces.nccl_log.scan` reads it, and every part of about :data:`PART_BYTES`
becomes the rows a whole read gives for its lines (:func:`zerocalc.traces.nccl_log.finish`), with
what a row's values depend on outside its part supplied from the whole log or read:

- the log's ``Init COMPLETE`` lines (each process's world rank and every communicator's size), found
  by a first pass over the log that reads only those lines;
- the lines before the part (``source_line`` counts from the log's start);
- the ranks of processes that another log of the read names (the parts of a rotated log,
  :func:`zerocalc.traces.traceset._ranks_of_processes`), from the aggregated read.

Each part has the canonical columns and dtypes of :attr:`TraceSet.table`, in the same row order, so
the rows of all parts are the rows of ``read_traces(paths).table``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from zerocalc.traces import nccl_log
from zerocalc.traces.nccl_lines import _INIT_MARKER
from zerocalc.traces.nccl_scan import Scan
from zerocalc.traces.piped import source
from zerocalc.traces.reader import MAX_BYTES, _open
from zerocalc.traces.records import ParseResult
from zerocalc.traces.schema import CANONICAL_COLUMNS
from zerocalc.traces.traceset import TraceSet, _frame, _ranks_of_processes

if TYPE_CHECKING:
    import pandas as pd

#: Bytes of a log read into one part of rows (about 100,000 calls of a typical COLL line).
PART_BYTES = 1 << 24


def row_parts(ts: TraceSet, *, strict: bool = False, max_bytes: int = MAX_BYTES,
              part_bytes: int | None = None, progress=None) -> Iterator[pd.DataFrame]:
    """The rows of every file of the aggregated read ``ts``, in file order, as frames of the canonical
    columns (:data:`~zerocalc.traces.schema.CANONICAL_COLUMNS`; more where a format has them) and dtypes;
    an NCCL log's in parts of about ``part_bytes`` (default :data:`PART_BYTES`) of the log, every other
    file's whole. Empty parts are left out. ``strict`` and ``max_bytes`` as the read had them.
    ``progress``, if given, is told (bytes read, bytes in all, files read, files) as the logs are read
    again, as :func:`~zerocalc.traces.read_traces` tells it (on disk, compressed where they are)."""
    import os

    part_bytes = part_bytes or PART_BYTES
    known = _known_ranks(ts)
    logs = [f for f, m in ts.meta.items() if m.get("format") == nccl_log.FORMAT]
    sizes = [os.path.getsize(source(f)) for f in logs]
    for file, meta in ts.meta.items():
        if meta.get("format") != nccl_log.FORMAT:
            part = ts.table[(ts.table["file"] == file).to_numpy(dtype=bool, na_value=False)]
            if len(part):
                yield part.reset_index(drop=True)
            continue
        inits = _init_lines(file, max_bytes)
        k = logs.index(file)
        tick = None if progress is None else functools.partial(_tell, progress, sum(sizes[:k]), sum(sizes), k,
                                                               len(logs))
        for offset, scan in _log_parts(file, strict, max_bytes, part_bytes, tick):
            scan.inits = inits
            res = nccl_log.finish([scan], file)
            if res.columns is None:
                continue
            res.columns["source_line"] = res.columns["source_line"] + offset
            if known is not None:
                _ranks_of_processes([res, known])
            yield _canonical(res)
        if progress is not None:
            progress(sum(sizes[: k + 1]), sum(sizes), k + 1, len(logs))


def _tell(progress, before: int, total: int, k: int, files: int, pos: int) -> None:
    """``pos`` bytes into log ``k`` (``before`` bytes in the logs before it)."""
    progress(before + pos, total, k, files)


def _canonical(res: ParseResult) -> pd.DataFrame:
    """One file's rows as :func:`zerocalc.traces.traceset._assemble` makes the table of a read."""
    table = _frame([res])
    for col in CANONICAL_COLUMNS:
        if col not in table.columns:
            table[col] = None
    extra = [c for c in table.columns if c not in CANONICAL_COLUMNS]
    return table[list(CANONICAL_COLUMNS) + extra].astype(CANONICAL_COLUMNS)


def _known_ranks(ts: TraceSet) -> ParseResult | None:
    """Where the read holds several NCCL logs with calls (the condition under which the read gives
    calls without a rank the rank their process has in another log): the (host, pid, rank) of the
    logs' distinct calls, as one more log to match the parts against; else ``None``."""
    import pandas as pd

    logs = [f for f, m in ts.meta.items() if m.get("format") == nccl_log.FORMAT and m.get("rows")]
    if len(logs) < 2 or "host" not in ts.table.columns:
        return None
    t = ts.table[ts.table["file"].isin(logs).to_numpy(dtype=bool, na_value=False)]
    keys = pd.DataFrame({"h": pd.array(t["host"].astype(object), dtype="string"),
                         "p": pd.array(t["pid"].astype(object), dtype="Int64"),
                         "r": pd.array(t["rank"], dtype="Int64")}).dropna().drop_duplicates()
    return ParseResult(meta={"format": nccl_log.FORMAT},
                       columns={"file": np.zeros(len(keys)), "host": keys["h"].array, "pid": keys["p"].array,
                                "rank": keys["r"].array})


def _init_lines(file: str, max_bytes: int) -> list[tuple[Any, ...]]:
    """The log's ``Init COMPLETE`` lines as a scan reads them: (host, pid, comm, rank, nranks), in order.
    Only the lines that hold the marker are scanned (the rest is searched for it, not parsed)."""
    found: list[bytes] = []
    tail = b""
    with _open(file, max_bytes) as stream:
        while chunk := stream.read(nccl_log.BLOCK_BYTES):
            text = tail + chunk
            end = max(text.rfind(b"\n"), text.rfind(b"\r")) + 1
            tail = text[end:]
            found.extend(_marked_lines(text, end))
        found.extend(_marked_lines(tail, len(tail)))
    if not found:
        return []
    return nccl_log.scan_bytes(b"\n".join(found), file).inits


def _marked_lines(text: bytes, end: int) -> list[bytes]:
    """The lines of ``text[:end]`` that hold the Init marker (a lone ``\\r`` ends a line too)."""
    out = []
    at = text.find(_INIT_MARKER, 0, end)
    while at >= 0:
        start = max(text.rfind(b"\n", 0, at), text.rfind(b"\r", 0, at)) + 1
        stop = min((i for i in (text.find(b"\n", at, end), text.find(b"\r", at, end)) if i >= 0), default=end)
        out.append(text[start:stop])
        at = text.find(_INIT_MARKER, stop, end)
    return out


def _log_parts(file: str, strict: bool, max_bytes: int, part_bytes: int,
               tick=None) -> Iterator[tuple[int, Scan]]:
    """The log read block by block as :func:`zerocalc.traces.nccl_log.scan` reads it, a frozen scan of
    its lines (counted from 1) every ``part_bytes`` or so, with the number of lines before it. ``tick``,
    if given, is told the position in the file after each read."""
    res, offset, size, tail = Scan(), 0, 0, b""
    with _open(file, max_bytes, tick) as stream:
        while True:
            chunk = stream.read(nccl_log.BLOCK_BYTES)
            if not chunk:
                break
            text = b"\n" + tail + chunk
            end = max(text.rfind(b"\n"), text.rfind(b"\r", 0, len(text) - 1)) + 1
            tail = text[end:]
            if end > 1:
                res.lines += nccl_log._scan_block(text, end, file, res.lines + 1, strict, res) - 1
                size += end
            if size >= part_bytes:
                yield offset, res.freeze()
                offset += res.lines
                res, size = Scan(), 0
        if tail:  # a last line without a newline
            text = b"\n" + tail + b"\n"
            nccl_log._scan_block(text, len(text), file, res.lines + 1, strict, res)
    yield offset, res.freeze()
