"""Read trace files of any supported format into one canonical table.

Accepts one path, many paths (one per rank) or a directory of one run (the files directly in
it; subdirectories are other runs and are not read); plain or compressed (gzip, xz, bzip2:
:mod:`~zerocalc.traces.streams`); the format is detected per
file unless given. A file named twice (also as ``x`` and ``./x``) is read once. Text formats
are streamed; Kineto JSON is read whole and decoded field by field
(:func:`zerocalc.traces.kineto.parse_bytes`). What a compressed file expands to is capped (plain files
are read whatever their size); nothing is ever written, and a pickle is loaded only as a Flight
Recorder dump's data, nothing it names called (:mod:`~zerocalc.traces.pickled`). Many large files, or
one large plain NCCL log, are parsed in parallel worker processes.

The stages, one module each: the files a read names (:mod:`~zerocalc.traces.paths`), each opened
as a capped byte stream (:mod:`~zerocalc.traces.streams`) and parsed in its format (here), a
large plain NCCL log scanned in parallel chunks (:mod:`~zerocalc.traces.chunks`) or the whole
read done on a Dask cluster (:mod:`~zerocalc.traces.cluster`), and the results assembled into
one :class:`~zerocalc.traces.traceset.TraceSet` (:mod:`~zerocalc.traces.traceset`).
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from typing import Any, BinaryIO

from zerocalc.errors import TraceFormatError, UnknownNameError
from zerocalc.traces import deepspeed_comms, kineto, nccl_log, nccl_tests, streams
from zerocalc.traces.chunks import _boundary, _read_split, _scan_chunks  # noqa: F401 -- re-exported
from zerocalc.traces.detect import FORMATS, HEAD_BYTES, INSPECTOR, detect_format, detect_stream, weak
from zerocalc.traces.paths import _SKIP_SUFFIXES, _expand  # noqa: F401 -- _SKIP_SUFFIXES re-exported
from zerocalc.traces.piped import is_copy, source
from zerocalc.traces.records import ParseResult
from zerocalc.traces.streams import _guard
from zerocalc.traces.traceset import TraceSet, _assemble  # noqa: F401 -- TraceSet re-exported

#: Default cap on what one compressed file expands to (bytes); plain files are read whatever their size.
MAX_BYTES = 8 * 2**30
#: Total input size above which several files are parsed in worker processes.
PARALLEL_MIN_BYTES = 32 * 2**20
#: Size above which one plain NCCL log is scanned in chunks shared with worker processes.
SPLIT_MIN_BYTES = 64 * 2**20


def _open(path: str, cap: int, tick=None) -> BinaryIO:
    """The file's bytes, decompressed if it is gzip, xz or bzip2; what such a file expands to is
    capped at ``cap`` bytes (a gzip bomb expands a thousandfold), a plain file is read whatever its
    size. ``tick``, if given, is called with the position in the file after each read
    (:func:`streams.buffered`). One-shot input (``-``, a pipe) is read from its copy
    (:mod:`~zerocalc.traces.piped`)."""
    return streams.buffered(open(source(path), "rb"), path, cap, tick)  # closed through the wrapper


def read_file(path: str | os.PathLike, *, strict: bool = False, fmt: str | None = None,
              max_bytes: int = MAX_BYTES) -> ParseResult:
    """Parse one file (plain or compressed) into rows; see :func:`read_traces`.

    With ``fmt`` forced, a file holding no record of that format raises
    :class:`TraceFormatError` naming the format the file looks like.
    """
    result = _parse(str(path), strict, fmt, max_bytes, optional=False)
    if isinstance(result, str):  # not reached: only optional files give a reason
        raise TraceFormatError(str(path), None, result)
    return result


def _parse(file: str, strict: bool, fmt: str | None, max_bytes: int, optional: bool,
           tick=None, aggregate: bool = False, sequence: bool = False) -> ParseResult | Any | str:
    """:func:`read_file`, or, when ``optional`` (a file found in a directory), the reason it was
    not read where its format cannot be detected or a forced format finds nothing in it."""
    if fmt is not None and fmt not in FORMATS:
        raise UnknownNameError("trace format", fmt, FORMATS)
    if not os.path.isfile(source(file)):
        raise TraceFormatError(file, None, "not a regular file" if os.path.exists(file) else "no such file")
    with _open(file, max_bytes, tick) as stream:
        head = _guard(file, stream.peek, HEAD_BYTES)[:HEAD_BYTES]
        try:
            kind = fmt or detect_format(head, file)
        except TraceFormatError as exc:
            if optional:
                return exc.reason
            raise
        if fmt is None and weak(head, kind):  # NCCL's lines alone in the head: an nccl-tests header may come
            kind = detect_file(file, max_bytes)
        if kind == INSPECTOR and optional:  # beside a run's traces (Flight Recorder dumps, say): left out
            return ("an NCCL Inspector log, not a per-rank trace: `zerocalc check FILE --topology T` "
                    "compares its calls with NCCL's cost model")
        result = _parse_stream(stream, file, kind, strict, aggregate, sequence)
    if fmt is not None and not len(result):
        reason = _no_records(fmt, head, file)
        if optional:
            return reason
        raise TraceFormatError(file, None, reason)
    return result


def detect_file(file: str, cap: int = MAX_BYTES) -> str:
    """The format of a file (plain or gzip, as :func:`_open` reads it), read past its head where the head
    alone cannot tell (:func:`zerocalc.traces.detect.detect_stream`)."""
    with _open(file, cap) as stream:
        return detect_stream(_Guarded(stream, file), file)


class _Guarded:
    """A stream whose reads turn decompression failures into :class:`TraceFormatError` (:func:`_guard`)."""

    def __init__(self, stream: BinaryIO, file: str) -> None:
        self.stream, self.file = stream, file

    def read(self, n: int) -> bytes:
        return _guard(self.file, self.stream.read, n)


def _no_records(fmt: str, head: bytes, file: str) -> str:
    """Why a forced format found nothing: and which format the file looks like, if any."""
    try:
        guess = detect_format(head, file)
    except TraceFormatError as exc:
        return f"no {fmt} records found; the file is not a trace of a known format ({exc.reason})"
    if guess == fmt:
        return f"no {fmt} records found"
    return f"no {fmt} records found; is it a {guess} file?"


def _parse_stream(stream: BinaryIO, file: str, kind: str, strict: bool,
                  aggregate: bool = False, sequence: bool = False) -> ParseResult | Any:
    if kind in ("kineto", "nccl_tests_json", "flight_recorder"):
        data = _whole(stream, file)
        if not data or data.isspace():
            raise TraceFormatError(file, None, "empty file")
        if kind == "kineto":  # decodes only the fields it reads (kineto.parse_bytes)
            return kineto.parse_bytes(data, file, strict=strict)
        if kind == "flight_recorder":
            from zerocalc.traces import flight_recorder

            return flight_recorder.parse_bytes(data, file, strict=strict)
        from zerocalc.traces import nccl_tests_json  # -J reports only

        return nccl_tests_json.parse_json_bytes(data, file, strict=strict)
    if kind == INSPECTOR:  # per-call times of a communicator: compared with NCCL's model, not counted
        raise TraceFormatError(file, None, (
            "an NCCL Inspector log: it records each call's bytes and time but no element type or training "
            "step; `zerocalc check FILE --topology T` compares its calls with NCCL's cost model size by "
            "size, `zerocalc fit FILE --out C.toml` calibrates the model on them"))
    if kind == "nccl_log":  # scanned as bytes (nccl_log.scan)
        if sequence:  # the calls as a sequence of codes, to fold (nccl_fold), read in segments
            from zerocalc.traces import nccl_segments

            return nccl_segments.read(stream, file, strict=strict)
        return nccl_log.parse(stream, file, strict=strict, aggregate=aggregate)
    text = io.TextIOWrapper(stream, encoding="utf-8", errors="replace", newline=None)
    module = {"nccl_tests": nccl_tests, "deepspeed_comms": deepspeed_comms}[kind]
    try:
        return module.parse(text, file, strict=strict)
    finally:
        text.detach()


#: The most bytes :func:`_whole` reads at once (a progress report after each read).
WHOLE_STEP = 1 << 26


def _whole(stream: BinaryIO, file: str) -> bytes:
    """The rest of ``stream`` (the open file ``file``) as one bytes object.

    A plain file smaller than :data:`WHOLE_STEP` is one read of its size into one object, nothing
    joined; a larger or a gzip file is read in steps of its size on disk (at least 1 MiB, at most
    :data:`WHOLE_STEP`), joined at the end. A read shorter than asked is the end of the stream (a
    buffered read returns less only there), so no further read is made: each read takes a buffer
    of the size asked. Reading in 1 MiB steps instead made each 10 MB Kineto trace of a 1,024-rank
    set fault in about twice its size of fresh pages (the steps and their join, returned to the
    system and taken again for the next file): a quarter of its CPU time
    (benchmarks/bench_kineto.py --ranks)."""
    step = min(max(os.path.getsize(source(file)) + 1, 1 << 20), WHOLE_STEP)
    chunks = []
    while True:
        chunk = _guard(file, stream.read, step)
        chunks.append(chunk)
        if len(chunk) < step:
            return b"".join(chunks)  # one chunk: that object itself, not a copy


def _read_one(args: tuple) -> ParseResult | Any | str:
    file, strict, fmt, cap, optional, aggregate, *sequence = args
    return _parse(file, strict, fmt, cap, optional, aggregate=aggregate,
                  sequence=bool(sequence and sequence[0]))


def _splittable(file: str, fmt: str | None, cap: int) -> bool:
    """A plain (not compressed) NCCL log large enough to be scanned in parts."""
    size = os.path.getsize(file)
    if size < SPLIT_MIN_BYTES or fmt not in (None, nccl_log.FORMAT):
        return False
    with open(file, "rb") as f:
        head = f.read(HEAD_BYTES)
    if head.startswith(streams.UTF16_BOMS) or streams.compression(head):  # not the text's bytes: read whole
        return False
    return fmt == nccl_log.FORMAT or detect_file(file, cap) == nccl_log.FORMAT


def read_traces(paths: str | os.PathLike | Iterable[str | os.PathLike], *, strict: bool = False,
                fmt: str | None = None, max_bytes: int = MAX_BYTES, workers: int | None = None,
                scheduler: str | None = None, progress=None, aggregate: bool = False) -> TraceSet:
    """Read one file, many files or a directory into a :class:`TraceSet`.

    A directory gives the files directly in it: its subdirectories are other runs, not read
    (listed in ``TraceSet.skipped_files`` and ``notes``), and a file in it whose format cannot
    be detected is skipped with a note; a file named explicitly that cannot be read raises.
    A file named twice (by any spelling, or through a link) is read once. With ``fmt`` forced,
    a named file holding no record of that format raises :class:`TraceFormatError`.
    ``strict`` raises :class:`TraceFormatError` (file, line, reason) at the first unusable
    line; the default skips it and reports it in ``TraceSet.skipped``. ``fmt`` forces one
    of :data:`zerocalc.traces.detect.FORMATS`. ``workers`` = 1 reads sequentially; ``None``
    uses worker processes when there are several files totalling more than 32 MiB, and scans
    one plain NCCL log of 64 MiB or more in chunks of about 4 MB shared between this process
    (from the front) and a worker process per further CPU (from the back), with the same
    result as a sequential read.
    ``scheduler`` (``tcp://HOST:PORT``) reads each file, and each chunk of a large plain NCCL
    log, as a task on that running Dask cluster instead (:mod:`zerocalc.traces.cluster`; the
    optional ``dask`` extra), with the same result. ``progress``, if given, is called as the read
    goes with (bytes read, bytes in all, files read, files): on disk, compressed where they are
    (zerocalc.traces.progress draws it on a terminal).
    ``aggregate`` keeps of an NCCL log one row per distinct call (file, process, communicator, op,
    datatype, group size, rank; ``count`` the sum of their counts, ``in_nelems``/``out_nelems``
    their totals) with its number of calls in the ``aggregated_calls`` column, not a row per call: what
    :meth:`TraceSet.summary` needs, in memory that does not grow with the log's length (other
    formats keep their rows). Files that disagree on the world size raise :class:`TraceMismatchError`.
    """
    inputs = _expand(paths)
    return _assemble(inputs, _read_results(inputs, strict, fmt, max_bytes, workers, scheduler, progress,
                                           aggregate))


def read_folded(paths: str | os.PathLike | Iterable[str | os.PathLike], *, strict: bool = False,
                max_bytes: int = MAX_BYTES, workers: int | None = None, scheduler: str | None = None,
                progress=None) -> tuple[TraceSet, Any]:
    """:func:`read_traces` for ``check``: NCCL logs read as call sequences with each process's repeated
    steps folded (:mod:`zerocalc.traces.nccl_fold`). Returns the trace set of the kept calls (each
    row as a full read gives it; ``meta`` rows and skipped lines counted over every call) and the
    :class:`~zerocalc.traces.nccl_fold.Folded` saying what was dropped, or None when nothing was (a
    read of other formats, or nothing repeats): then the trace set is the full read's.

    A long log is read in compacted segments (:mod:`zerocalc.traces.nccl_segments`: repeated blocks
    dropped as they are read). Where calls were dropped so and the fold cannot stand for them (nothing
    to fold, a TUNING line, a call the fold keeps among those dropped: a one-off call late in a
    process's run, after which only its last steps fold), the files are read again as sequences with
    every call held, as before segments: the same answer, slower. The folded one's ``full()`` gives
    the full read's trace set: made from the sequences read where every call was held, else by
    reading the files again (:func:`read_traces`)."""
    import dataclasses

    from zerocalc.traces.nccl_fold import Calls, fold, materialise

    inputs = _expand(paths)
    results = _read_results(inputs, strict, None, max_bytes, workers, scheduler, progress, sequence=True)
    logs = [r for r in results if isinstance(r, Calls)]
    folded = fold(logs) if all(isinstance(r, Calls | str) for r in results) else None
    held = not any(len(c.gaps) for c in logs)  # every call's code held: the full table can be made

    def again() -> TraceSet:
        return read_traces(paths, strict=strict, max_bytes=max_bytes, workers=workers, scheduler=scheduler)

    if folded is None and not held:  # read again, every call held (nccl_segments.SEGMENT_BYTES 0)
        from zerocalc.traces import nccl_segments

        del results, logs
        segment_bytes, nccl_segments.SEGMENT_BYTES = nccl_segments.SEGMENT_BYTES, 0
        try:
            return read_folded(paths, strict=strict, max_bytes=max_bytes, workers=workers,
                               scheduler=scheduler)
        finally:
            nccl_segments.SEGMENT_BYTES = segment_bytes
    sequences = list(results)
    k = 0
    for i, r in enumerate(results):
        if isinstance(r, Calls):
            results[i] = materialise(r, folded.kept[k] if folded is not None else None)
            k += 1
    ts = _assemble(inputs, results)
    if folded is not None:  # the rows of each log: every call, not the kept ones
        for f, calls in zip((f for f, r in zip(inputs.files, results, strict=True) if not isinstance(r, str)),
                            logs, strict=True):
            ts.meta[f]["rows"] = calls.total

        def full() -> TraceSet:
            return _assemble(inputs, [materialise(r) if isinstance(r, Calls) else r for r in sequences])

        folded = dataclasses.replace(folded, full=full if held else again)
    return ts, folded


def _read_results(inputs, strict: bool, fmt: str | None, max_bytes: int, workers: int | None,
                  scheduler: str | None, progress, aggregate: bool = False,
                  sequence: bool = False) -> list[ParseResult | Any | str]:
    """Each file's result (see :func:`read_traces`; ``sequence``: an NCCL log's sequence read)."""
    files = inputs.files
    track = _Track(progress, [os.path.getsize(source(f)) for f in files]) if progress is not None else None
    if scheduler is not None:
        from zerocalc.traces.cluster import read_on_cluster

        return read_on_cluster(inputs, strict, fmt, max_bytes, scheduler, track, aggregate, sequence)
    results: list[ParseResult | Any | str]
    if any(is_copy(f) for f in files):  # read here: other processes cannot open a copy by its name
        workers = 1
    if workers != 1 and len(files) == 1 and _splittable(files[0], fmt, max_bytes):
        result = _read_split(files[0], strict, workers or os.cpu_count() or 1,
                             track.within if track is not None else None, aggregate, sequence)
        if result is not None:
            if fmt is not None and not len(result):
                with open(files[0], "rb") as f:
                    raise TraceFormatError(files[0], None, _no_records(fmt, f.read(HEAD_BYTES), files[0]))
            return [result]
    jobs = [(f, strict, fmt, max_bytes, opt, aggregate, sequence)
            for f, opt in zip(files, inputs.optional, strict=True)]
    if workers is None:
        total = sum(os.path.getsize(f) for f in files)
        workers = min(len(files), os.cpu_count() or 1) if total >= PARALLEL_MIN_BYTES else 1
    if workers > 1 and len(files) > 1:
        import multiprocessing

        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as ex:
            results = []
            for result in ex.map(_read_one, jobs):
                results.append(result)
                if track is not None:
                    track.next_file()
    else:
        results = []
        for job in jobs:
            results.append(_read_one(job) if track is None else _parse(
                *job[:5], tick=track.within, aggregate=aggregate, sequence=sequence))
            if track is not None:
                track.next_file()
    return results


class _Track:
    """Progress of a read, told to ``report(bytes read, bytes in all, files read, files)``."""

    def __init__(self, report, sizes: list[int]) -> None:
        self.report, self.sizes, self.total = report, sizes, sum(sizes)
        self.files = self.done = 0

    def within(self, pos: int) -> None:
        """``pos`` bytes into the file being read."""
        self.report(min(self.done + pos, self.total), self.total, self.files, len(self.sizes))

    def next_file(self) -> None:
        self.add(self.sizes[self.files], files=1)

    def add(self, nbytes: int, files: int = 0) -> None:
        self.done, self.files = self.done + nbytes, self.files + files
        self.report(min(self.done, self.total), self.total, self.files, len(self.sizes))
