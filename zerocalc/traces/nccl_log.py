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
Where polars is installed it reads the fields of each block by position
(:mod:`zerocalc.traces.nccl_polars`, :data:`ENGINE`) and leaves to ``re`` the lines in another form; a
log of less than 16 MiB is read by ``re`` alone, which reads it faster than polars is imported
(:data:`NATIVE_MIN_STREAM_BYTES`). The ``re`` scanner parses a block column-wise
(benchmarks/bench_nccl_log.py): one ``re.split`` in C gives the fields of every call in NCCL's own
layout (``host:pid:tid [dev] NCCL INFO`` at the start of the line) as one flat list, sliced into
columns; further splits read the lines left that carry the COLL marker, first where the prefix follows a
space (after a launcher's tag), then with the general pattern. Few-valued fields (the communicator among
them) become codes into a table of their distinct values, kept in the smallest integer type that holds
them, numbers are converted by numpy, and the table is assembled once at the end, compact: categorical
columns for the strings, narrow identifiers (schema.CANONICAL_COLUMNS), about 100 bytes per call.

This module reads the log block by block and hands each block to an engine; the stages live
apart: the line patterns and one line's reading in :mod:`~zerocalc.traces.nccl_lines`, the ``re``
scanner and the scan's columns in :mod:`~zerocalc.traces.nccl_scan`, the table in
:mod:`~zerocalc.traces.nccl_table`. Their public names are importable from here.
"""

from __future__ import annotations

import functools
import sys
from typing import BinaryIO, TextIO

from zerocalc.traces.nccl_lines import (
    COLL,
    FORMAT,
    INIT,
    MARKER,
    PREFIX,
    TUNING,
    TUNING_MARKER,
    parse_coll_line,
)
from zerocalc.traces.nccl_scan import Scan, _extract_re, _store
from zerocalc.traces.nccl_table import finish
from zerocalc.traces.records import ParseResult

__all__ = [
    "BLOCK_BYTES", "COLL", "ENGINE", "FORMAT", "INIT", "MARKER", "NATIVE_MIN_BYTES",
    "NATIVE_MIN_STREAM_BYTES", "PREFIX", "TUNING", "TUNING_MARKER", "Scan", "finish", "parse",
    "parse_coll_line", "scan", "scan_bytes",
]

#: Bytes per block read from the stream (the block is cut at its last newline).
BLOCK_BYTES = 1 << 22


def scan(stream: BinaryIO | TextIO, file: str, *, strict: bool = False, aggregate: bool = False,
         sequence: bool = False) -> Scan:
    """Scan a log (a text stream is read as its UTF-8 encoding); ``aggregate``, ``sequence``: see
    :class:`Scan`."""
    res = Scan(aggregate=aggregate, sequence=sequence)
    tail = b""
    read = 0  # bytes of the stream read so far (:func:`_native`)
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
            read += len(chunk)
            if end > 1:
                res.lines += _scan_block(text, end, file, res.lines + 1, strict, res, read) - 1
        else:
            if tail:  # a last line without a newline
                text = b"\n" + tail + b"\n"
                _scan_block(text, len(text), file, res.lines + 1, strict, res, read)
            break
    return res.freeze()


def scan_bytes(data: bytes, file: str, *, strict: bool = False, aggregate: bool = False,
               sequence: bool = False, after_newline: bool = False) -> Scan:
    """Scan a run of whole lines of a log held in memory (the last may lack its newline) as one
    block: what :func:`scan` gives for the same lines. ``after_newline``: ``data`` starts with the
    newline that ends the line before the run, not a line of it (read from one byte earlier, the
    block needs no copy with a newline put first). The block is a chunk of a log large enough to be
    read in parallel (:mod:`zerocalc.traces.chunks`): :func:`_native` takes it as read past
    :data:`NATIVE_MIN_STREAM_BYTES`."""
    res = Scan(aggregate=aggregate, sequence=sequence)
    text = data if after_newline else b"\n" + data
    if len(text) > 1:
        if not text.endswith(b"\n"):
            text += b"\n"
        res.lines = _scan_block(text, len(text), file, 1, strict, res) - 1
    return res.freeze()


def parse(stream: BinaryIO | TextIO, file: str, *, strict: bool = False,
          aggregate: bool = False) -> ParseResult:
    """Stream an NCCL log and return its table, one row per COLL line (``aggregate``: one row per
    distinct call, with its number of calls, ``aggregated_calls``, and the sum of their counts,
    ``count``)."""
    return finish([scan(stream, file, strict=strict, aggregate=aggregate)], file)


def _scan_block(text: bytes, end: int, file: str, line0: int, strict: bool, res: Scan,
                read: int | None = None) -> int:
    """Parse the whole lines of one block (the first is line ``line0``) into ``res``.

    ``text`` is a newline, the block's lines, each ending with a newline, and after ``end`` the
    start of a line not in the block (not a call: it has no newline to end it). Returns the
    number of newlines in the block (after line ends are read as text mode reads them).
    The fields are pulled out by polars where it is installed and reads every call of the block
    (:mod:`zerocalc.traces.nccl_polars`, :data:`ENGINE`, :func:`_native`: ``read`` is the bytes of
    the stream read through this block; ``None``: past :data:`NATIVE_MIN_STREAM_BYTES`), else by
    ``re`` (:func:`_extract_re`).
    """
    if text.find(b"\r", 0, end) >= 0:  # "\r\n" and a lone "\r" end a line, as in text mode
        text = text[:end].replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        end = len(text)
    got = None
    engine = _native(end, NATIVE_MIN_STREAM_BYTES if read is None else read)
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
#: least :data:`NATIVE_MIN_BYTES` once polars is worth importing, :func:`_native`), "polars" (every
#: block), "polars-regex" (every block, by polars' regex extraction: the engine before the positional
#: one, kept for comparison) or "re" (never polars).
ENGINE = "auto"
#: The smallest block that "auto" gives polars (below it, polars' per-block start costs more than it saves).
NATIVE_MIN_BYTES = 1 << 18
#: The bytes of one stream that "auto" reads with ``re`` before it imports polars (the block that reaches
#: them is polars'). Importing polars
#: costs about 0.2-0.25 s of one core; ``re`` reads about 43 MB/s and polars about 110 MB/s (single
#: thread, import apart, on the synthetic 128-rank log of benchmarks/synth_nccl_log.py, 4, 16 and 48 MB,
#: each read in a fresh process): the two break even near 14 MB, so a log below 16 MiB is read by ``re``
#: alone (a 300 KB log's check no longer imports polars), a larger one by polars from its 16th MiB on
#: (at most the import's cost lost where the log ends soon after). Where polars is already imported,
#: it reads every block of at least :data:`NATIVE_MIN_BYTES`.
NATIVE_MIN_STREAM_BYTES = 1 << 24


@functools.cache
def _polars_available() -> bool:
    from zerocalc.traces import nccl_polars

    return nccl_polars.available()


def _native(size: int, read: int = NATIVE_MIN_STREAM_BYTES) -> str | None:
    """The polars engine for a block of ``size`` bytes, ``read`` bytes into its stream (through the
    block), ("polars" or "polars-regex"), or ``None`` (:data:`ENGINE`)."""
    if ENGINE == "re":
        return None
    if ENGINE in ("polars", "polars-regex"):
        _polars_available()  # imported as it is for "auto" (one thread)
        return ENGINE
    if size < NATIVE_MIN_BYTES or (read < NATIVE_MIN_STREAM_BYTES and "polars" not in sys.modules):
        return None
    return "polars" if _polars_available() else None
