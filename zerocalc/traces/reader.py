"""Read trace files of any supported format into one canonical table.

Accepts one path, many paths (one per rank) or a directory of one run (the files directly in
it; subdirectories are other runs and are not read); plain or gzip; the format is detected per
file unless given. A file named twice (also as ``x`` and ``./x``) is read once. Text formats
are streamed; Kineto JSON is read whole and decoded field by field
(:func:`zerocalc.traces.kineto.parse_bytes`). What a gzip file expands to is capped (plain files
are read whatever their size); nothing is ever
unpickled or written. Many large files, or one large plain NCCL log, are parsed in parallel
worker processes.
"""

from __future__ import annotations

import gzip
import io
import os
import zlib
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

from zerocalc.errors import TraceFormatError, TraceMismatchError, UnknownNameError
from zerocalc.traces import deepspeed_comms, kineto, nccl_log, nccl_tests
from zerocalc.traces.detect import FORMATS, HEAD_BYTES, detect_format
from zerocalc.traces.records import ParseResult, SkipLog
from zerocalc.traces.schema import CANONICAL_COLUMNS

if TYPE_CHECKING:
    import pandas as pd

#: Default cap on what one gzip file expands to (bytes); plain files are read whatever their size.
MAX_BYTES = 8 * 2**30
#: Total input size above which several files are parsed in worker processes.
PARALLEL_MIN_BYTES = 32 * 2**20
#: Size above which one plain NCCL log is scanned in chunks shared with worker processes.
SPLIT_MIN_BYTES = 64 * 2**20
_SKIP_SUFFIXES = (".md", ".rst", ".py", ".ipynb")


@dataclass(frozen=True)
class TraceSet:
    """The canonical table of all files read, what was skipped, and per-file metadata."""

    table: pd.DataFrame
    skipped: SkipLog = field(default_factory=SkipLog)
    meta: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Paths inside a given directory that were not read, with why: subdirectories (other runs)
    #: and files whose format could not be detected (or, with a forced format, held none of it).
    skipped_files: dict[str, str] = field(default_factory=dict)
    #: One line per thing the reader did that the caller should know of (a path given twice, a
    #: skipped subdirectory or file), for display.
    notes: tuple[str, ...] = ()

    def processes(self) -> pd.Series:
        """Per call, its process ``host:pid`` where it records no rank (missing where the rank is
        known or the trace names no process): the ``process`` column of :meth:`summary`.

        A categorical column (its categories sorted): the text of each distinct (host, pid) pair
        is made once, not once per call."""
        import pandas as pd

        t = self.table
        codes = np.full(len(t), -1, np.int32)
        categories: list[str] = []
        if "host" in t.columns and "pid" in t.columns:
            named = (t["rank"].isna() & t["host"].notna()).to_numpy(dtype=bool, na_value=False)
            if named.any():
                hosts, host_of = pd.factorize(t["host"][named])
                pids, pid_of = pd.factorize(t["pid"][named])  # a missing pid: -1
                pairs, pair_of = pd.factorize(hosts.astype(np.int64) * (len(pid_of) + 1) + (pids + 1))
                span = len(pid_of) + 1
                text = [f"{host_of[k // span]}:{int(pid_of[k % span - 1]) if k % span else '?'}"
                        for k in pair_of.tolist()]
                categories = sorted(set(text))
                at = {v: i for i, v in enumerate(categories)}
                codes[named] = np.array([at[v] for v in text], np.int32)[pairs]
        return pd.Series(pd.Categorical.from_codes(codes, categories=pd.Index(categories, dtype="string")),
                         index=t.index)

    def summary(self) -> pd.DataFrame:
        """Per file, rank, step and op: number of calls and summed in/out elements and bytes.

        A call without a rank is counted under its process instead, ``host:pid`` (column
        ``process``, missing where the rank is known or the trace names no process): NCCL debug
        logs without ``Init COMPLETE`` lines record no rank, and one file often holds the lines
        of every process, which would otherwise count as one.
        """
        import pandas as pd

        table = self.table
        t = pd.DataFrame({  # the columns it needs, not a copy of the table
            "file": table["file"], "rank": table["rank"], "process": self.processes(), "step": table["step"],
            "op": table["op"], "in_nelems": table["in_nelems"], "out_nelems": table["out_nelems"],
            "in_bytes": table["in_nelems"] * table["elem_bytes"],
            "out_bytes": table["out_nelems"] * table["elem_bytes"]}, copy=False)
        keys = ["file", "rank", "process", "step", "op"]
        g = t.groupby(keys, dropna=False, sort=True)
        # missing where every call of the group lacks it (min_count=1), not 0
        out = g[["in_nelems", "out_nelems", "in_bytes", "out_bytes"]].sum(min_count=1)
        if "aggregated_calls" in table.columns:  # an aggregated read: a row per distinct call (read_traces)
            calls = table["aggregated_calls"].fillna(1).astype(np.int64).groupby(
                [t[k] for k in keys], dropna=False, sort=True).sum()
            out.insert(0, "calls", calls)
        else:
            out.insert(0, "calls", g.size())
        return pd.DataFrame(out.reset_index())


class _Capped(io.RawIOBase):
    """A read-only stream that refuses to yield more than ``cap`` bytes; ``tick`` is told how far
    into the compressed file each read got."""

    def __init__(self, raw: BinaryIO, cap: int, file: str, owned: tuple = (), tick=None) -> None:
        super().__init__()
        self._raw, self._cap, self._file, self.n, self._owned = raw, cap, file, 0, owned
        self._tick = tick

    def close(self) -> None:
        for f in self._owned:
            f.close()
        super().close()

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[override]
        data = _guard(self._file, self._raw.read, len(b))
        self.n += len(data)
        if self.n > self._cap:
            raise TraceFormatError(self._file, None,
                                   f"decompressed size exceeds the cap of {self._cap} bytes (a gzip bomb?)")
        b[: len(data)] = data
        if self._tick is not None:
            self._tick(self._owned[-1].tell())
        return len(data)


def _guard(file: str, fn, *args):
    """Run a read, turning decompression failures into TraceFormatError."""
    try:
        return fn(*args)
    except EOFError:
        raise TraceFormatError(file, None, "truncated gzip stream (no end-of-stream marker)") from None
    except (gzip.BadGzipFile, zlib.error) as exc:
        raise TraceFormatError(file, None, f"corrupt gzip data ({exc})") from None


def _open(path: str, cap: int, tick=None) -> BinaryIO:
    """The file's bytes, decompressed if it is gzip; what a gzip file expands to is capped at ``cap``
    bytes (a gzip bomb expands a thousandfold), a plain file is read whatever its size. ``tick``, if
    given, is called with the position in the file after each read."""
    raw = open(path, "rb")  # closed through the wrapper
    magic = raw.read(2)
    raw.seek(0)
    if magic != b"\x1f\x8b":
        return io.BufferedReader(_Plain(raw, tick), buffer_size=1 << 20)
    inner = gzip.GzipFile(fileobj=raw, mode="rb")
    return io.BufferedReader(_Capped(inner, cap, path, (inner, raw), tick), buffer_size=1 << 20)


class _Plain(io.RawIOBase):
    """A plain file read as it is, through the same buffered interface as a gzip one."""

    def __init__(self, raw: BinaryIO, tick=None) -> None:
        super().__init__()
        self._raw, self._tick = raw, tick

    def close(self) -> None:
        self._raw.close()
        super().close()

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[override]
        n = self._raw.readinto(b)
        if self._tick is not None:
            self._tick(self._raw.tell())
        return n


def read_file(path: str | os.PathLike, *, strict: bool = False, fmt: str | None = None,
              max_bytes: int = MAX_BYTES) -> ParseResult:
    """Parse one file (plain or gzip) into rows; see :func:`read_traces`.

    With ``fmt`` forced, a file holding no record of that format raises
    :class:`TraceFormatError` naming the format the file looks like.
    """
    result = _parse(str(path), strict, fmt, max_bytes, optional=False)
    if isinstance(result, str):  # not reached: only optional files give a reason
        raise TraceFormatError(str(path), None, result)
    return result


def _parse(file: str, strict: bool, fmt: str | None, max_bytes: int, optional: bool,
           tick=None, aggregate: bool = False) -> ParseResult | str:
    """:func:`read_file`, or, when ``optional`` (a file found in a directory), the reason it was
    not read where its format cannot be detected or a forced format finds nothing in it."""
    if fmt is not None and fmt not in FORMATS:
        raise UnknownNameError("trace format", fmt, FORMATS)
    if not os.path.isfile(file):
        raise TraceFormatError(file, None, "not a regular file" if os.path.exists(file) else "no such file")
    with _open(file, max_bytes, tick) as stream:
        head = _guard(file, stream.peek, HEAD_BYTES)[:HEAD_BYTES]
        try:
            kind = fmt or detect_format(head, file)
        except TraceFormatError as exc:
            if optional:
                return exc.reason
            raise
        result = _parse_stream(stream, file, kind, strict, aggregate)
    if fmt is not None and not len(result):
        reason = _no_records(fmt, head, file)
        if optional:
            return reason
        raise TraceFormatError(file, None, reason)
    return result


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
                  aggregate: bool = False) -> ParseResult:
    if kind in ("kineto", "nccl_tests_json"):
        chunks = []  # 1 MiB reads: no growing buffer, no copy of the whole file at the end but one
        while chunk := _guard(file, stream.read, 1 << 20):
            chunks.append(chunk)
        data = b"".join(chunks)
        del chunks
        if not data or data.isspace():
            raise TraceFormatError(file, None, "empty file")
        if kind == "kineto":  # decodes only the fields it reads (kineto.parse_bytes)
            return kineto.parse_bytes(data, file, strict=strict)
        return nccl_tests.parse_json_bytes(data, file, strict=strict)
    if kind == "nccl_log":  # scanned as bytes (nccl_log.scan)
        return nccl_log.parse(stream, file, strict=strict, aggregate=aggregate)
    text = io.TextIOWrapper(stream, encoding="utf-8", errors="replace", newline=None)
    module = {"nccl_tests": nccl_tests, "deepspeed_comms": deepspeed_comms}[kind]
    try:
        return module.parse(text, file, strict=strict)
    finally:
        text.detach()


#: Characters that make a path a glob pattern (which the shell, not zerocalc, expands).
_GLOB_CHARS = frozenset("*?[")


@dataclass
class _Inputs:
    """The files to read, in first-seen order; ``optional`` = found in a directory (skipped,
    not fatal, when their format cannot be detected); what was left out and why."""

    files: list[str] = field(default_factory=list)
    optional: list[bool] = field(default_factory=list)
    skipped_files: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _expand(paths: str | os.PathLike | Iterable[str | os.PathLike]) -> _Inputs:
    """The files named by ``paths``: a directory gives the files directly in it (its
    subdirectories are other runs: listed in ``skipped_files``, not read); a file named twice,
    also by another spelling or a link, is read once (by its real path)."""
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    paths = list(paths)
    out = _Inputs()
    seen: dict[str, str] = {}  # real path -> the spelling read

    def add(file: str, optional: bool) -> None:
        real = os.path.realpath(file)
        if real in seen:
            out.notes.append(f"{file}: the same file as {seen[real]}, read once")
            return
        seen[real] = file
        out.files.append(file)
        out.optional.append(optional)

    for p in paths:
        p = Path(p)
        if p.is_dir():
            subdirs = []
            for q in sorted(p.iterdir()):
                if q.name.startswith("."):
                    continue
                if q.is_dir():
                    subdirs.append(str(q))
                elif q.is_file() and q.suffix not in _SKIP_SUFFIXES:
                    add(str(q), optional=True)
            for d in subdirs:
                out.skipped_files[d] = "a subdirectory (another run?), not read; pass it on its own"
                out.notes.append(f"{d}: a subdirectory (another run?), not read; pass it on its own")
        elif p.exists():
            add(str(p), optional=False)
        elif _GLOB_CHARS & set(str(p)):
            raise TraceFormatError(str(p), None, "no such file or directory (globs are expanded by the "
                                                 "shell; quote-free or pass the directory)")
        else:
            raise TraceFormatError(str(p), None, "no such file or directory")
    if not out.files:
        where = ", ".join(str(p) for p in paths) or "<none>"
        sub = f" (subdirectories not read: {', '.join(out.skipped_files)})" if out.skipped_files else ""
        raise TraceFormatError(where, None, f"no trace files found{sub}")
    return out


def _read_one(args: tuple[str, bool, str | None, int, bool, bool]) -> ParseResult | str:
    file, strict, fmt, cap, optional, aggregate = args
    return _parse(file, strict, fmt, cap, optional, aggregate=aggregate)


def _boundary(f: BinaryIO, k: int, size: int) -> int:
    """Where chunk ``k`` of a log starts: just after the last newline before byte ``k`` × the
    block size (0 if there is none; the file's size past its end)."""
    pos = min(k * nccl_log.BLOCK_BYTES, size)
    if pos >= size:
        return size
    window = 1 << 16
    while pos > 0:
        start = max(0, pos - window)
        f.seek(start)
        newline = f.read(pos - start).rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        pos, window = start, window * 2
    return 0


def _scan_chunks(file: str, size: int, strict: bool, front: bool, shared: Any, tick=None,
                 aggregate: bool = False) -> dict[int, Any]:
    """Scan the chunks of a log that this process claims, one at a time, from the front (the
    reading process) or from the back (a worker), until the two ends meet: each chunk's
    :class:`~nccl_log.Scan`, or in strict mode the line (counted from the chunk's start) and
    reason of its first unusable line. ``size`` is the log's size when the read began (a log
    still being written is read as it was then, by every process alike). ``tick`` is told the bytes
    of the chunks claimed so far, from both ends, after each chunk."""
    out: dict[int, Any] = {}
    last = -(-size // nccl_log.BLOCK_BYTES) - 1
    side, step = (0, 1) if front else (1, -1)  # shared = [next from the front, next from the back]
    with open(file, "rb") as f:
        while True:
            with shared.get_lock():
                if shared[0] > shared[1]:
                    break
                k = shared[side]
                shared[side] = k + step
            start = _boundary(f, k, size)
            end = _boundary(f, k + 1, size)
            f.seek(start)
            try:
                out[k] = nccl_log.scan_bytes(f.read(end - start), file, strict=strict, aggregate=aggregate)
                if tick is not None:
                    tick(min(size, (shared[0] + last - shared[1]) * nccl_log.BLOCK_BYTES))
            except TraceFormatError as exc:
                out[k] = (exc.line, exc.reason)
                if front:  # every chunk before it is read and clean: this is the log's first error
                    with shared.get_lock():
                        shared[0], shared[1] = 1, 0
                    break
    return out


#: A worker's end of the chunk counters (set when its process starts).
_SHARED: Any = None


def _start_worker(shared: Any) -> None:
    global _SHARED
    _SHARED = shared
    # one process per CPU already: polars (nccl_polars) need not start a thread per CPU in each
    os.environ.setdefault("POLARS_MAX_THREADS", "1")


def _worker_chunks(file: str, size: int, strict: bool, aggregate: bool) -> dict[int, Any]:
    return _scan_chunks(file, size, strict, False, _SHARED, aggregate=aggregate)


def _read_split(file: str, strict: bool, workers: int, tick=None,
                aggregate: bool = False) -> ParseResult | None:
    """Scan a large NCCL log in chunks of about one block, this process taking them from the
    front and ``workers`` - 1 worker processes from the back, until the two ends meet (so each
    process scans what its start-up and speed allow), and join them in order: the same result
    as a sequential read (runs of whole lines read alike wherever they are cut). ``None`` for
    fewer than two processes."""
    import multiprocessing

    if workers < 2:
        return None
    size = os.path.getsize(file)
    # spawn, not fork: the caller may hold threads (numpy's own included) whose locks a fork copies
    spawn = multiprocessing.get_context("spawn")
    shared = spawn.Array("q", [0, -(-size // nccl_log.BLOCK_BYTES) - 1])  # next from the front, the back
    with ProcessPoolExecutor(max_workers=workers - 1, mp_context=spawn, initializer=_start_worker,
                             initargs=(shared,)) as ex:
        pending = [ex.submit(_worker_chunks, file, size, strict, aggregate) for _ in range(workers - 1)]
        import pandas  # noqa: F401 -- the table needs it: import it while the workers start

        chunks = _scan_chunks(file, size, strict, True, shared, tick, aggregate)
        for future in pending:
            chunks.update(future.result())
    return _join_chunks(file, [chunks[k] for k in sorted(chunks)])


def _join_chunks(file: str, results: list[Any]) -> ParseResult:
    """The scans of a log's chunks, in order, joined into its result; in strict mode the first
    chunk's error (its line counted from the chunk's start) raised with the log's line."""
    lines = 0
    for r in results:
        if isinstance(r, tuple):  # strict: the first unusable line, in file order
            line, reason = r
            raise TraceFormatError(file, line + lines if line is not None else None, reason)
        lines += r.lines
    return nccl_log.finish(results, file)


def _scan_range(file: str, start: int, end: int, strict: bool, aggregate: bool = False) -> Any:
    """One chunk of a log (bytes ``start`` to ``end``, whole lines) scanned: its
    :class:`~nccl_log.Scan`, or in strict mode (line from the chunk's start, reason) of its
    first unusable line."""
    with open(file, "rb") as f:
        f.seek(start)
        data = f.read(end - start)
    try:
        return nccl_log.scan_bytes(data, file, strict=strict, aggregate=aggregate)
    except TraceFormatError as exc:
        return (exc.line, exc.reason)


def _task(kind: str, args: tuple) -> Any:
    """One unit of a read on a cluster: a whole file (``"file"``) or a chunk of a log (``"chunk"``)."""
    return _read_one(args) if kind == "file" else _scan_range(*args)


def _read_on_cluster(inputs: _Inputs, strict: bool, fmt: str | None, cap: int,
                     scheduler: str, track: _Track | None = None,
                     aggregate: bool = False) -> list[ParseResult | str]:
    """Each file, or each chunk of a large plain NCCL log, read as a task on the Dask cluster at
    ``scheduler`` (:mod:`zerocalc.traces.cluster`); the chunks of a log joined here, in order."""
    from zerocalc.traces import cluster

    jobs: list[tuple[str, tuple]] = []
    parts: list[int] = []  # tasks per file: 0 = one whole-file task, else its chunks
    for file, optional in zip(inputs.files, inputs.optional, strict=True):
        try:
            split = _splittable(file, fmt, cap)
        except TraceFormatError:  # not a known format: its own task says so, as a local read does
            split = False
        if split:
            size = os.path.getsize(file)
            with open(file, "rb") as f:
                bounds = [_boundary(f, k, size) for k in range(-(-size // nccl_log.BLOCK_BYTES) + 1)]
            jobs.extend(("chunk", (file, a, b, strict, aggregate))
                        for a, b in zip(bounds, bounds[1:], strict=False))
            parts.append(len(bounds) - 1)
        else:
            jobs.append(("file", (file, strict, fmt, cap, optional, aggregate)))
            parts.append(0)
    # the bytes of each task, for progress: a whole file, or its chunk
    nbytes = [os.path.getsize(a[0]) if kind == "file" else a[2] - a[1] for kind, a in jobs]
    on_done = None
    if track is not None:
        def on_done(i: int) -> None:
            track.add(nbytes[i], files=int(jobs[i][0] == "file"))
    done = cluster.run(scheduler, _task, jobs, on_done)
    results: list[ParseResult | str] = []
    i = 0
    for file, k in zip(inputs.files, parts, strict=True):
        if not k:
            results.append(done[i])
            i += 1
            continue
        result = _join_chunks(file, done[i : i + k])
        i += k
        if fmt is not None and not len(result):
            with open(file, "rb") as f:
                raise TraceFormatError(file, None, _no_records(fmt, f.read(HEAD_BYTES), file))
        results.append(result)
    return results


def _splittable(file: str, fmt: str | None, cap: int) -> bool:
    """A plain (not gzip) NCCL log large enough to be scanned in parts."""
    size = os.path.getsize(file)
    if size < SPLIT_MIN_BYTES or fmt not in (None, nccl_log.FORMAT):
        return False
    with open(file, "rb") as f:
        head = f.read(HEAD_BYTES)
    return not head.startswith(b"\x1f\x8b") and (fmt or detect_format(head, file)) == nccl_log.FORMAT


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
    files = inputs.files
    track = _Track(progress, [os.path.getsize(f) for f in files]) if progress is not None else None
    if scheduler is not None:
        return _assemble(inputs, _read_on_cluster(inputs, strict, fmt, max_bytes, scheduler, track,
                                                  aggregate))
    results: list[ParseResult | str]
    if workers != 1 and len(files) == 1 and _splittable(files[0], fmt, max_bytes):
        result = _read_split(files[0], strict, workers or os.cpu_count() or 1,
                             track.within if track is not None else None, aggregate)
        if result is not None:
            if fmt is not None and not len(result):
                with open(files[0], "rb") as f:
                    raise TraceFormatError(files[0], None, _no_records(fmt, f.read(HEAD_BYTES), files[0]))
            return _assemble(inputs, [result])
    jobs = [(f, strict, fmt, max_bytes, opt, aggregate)
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
            results.append(_read_one(job) if track is None else _parse(*job[:5], tick=track.within,
                                                                            aggregate=aggregate))
            if track is not None:
                track.next_file()
    return _assemble(inputs, results)


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


def _frame(results: list[ParseResult]) -> pd.DataFrame:
    """One frame of all rows, in file order; row dicts of consecutive files are built together."""
    import pandas as pd

    frames: list[pd.DataFrame] = []
    rows: list[dict[str, Any]] = []
    for r in results:
        if r.columns is None:
            rows.extend(r.rows)
            continue
        if rows:
            frames.append(pd.DataFrame.from_records(rows))
            rows = []
        frames.append(pd.DataFrame(r.columns, copy=False))  # the arrays are the result's own
    if rows or not frames:
        frames.append(pd.DataFrame.from_records(rows) if rows else pd.DataFrame())
    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)


def _assemble(inputs: _Inputs, all_results: list[ParseResult | str]) -> TraceSet:
    skipped = SkipLog()
    meta: dict[str, dict[str, Any]] = {}
    skipped_files, notes = dict(inputs.skipped_files), list(inputs.notes)
    files, results = [], []
    for f, r in zip(inputs.files, all_results, strict=True):
        if isinstance(r, str):  # a file in a directory that is not a trace (of the forced format)
            skipped_files[f] = r
            notes.append(f"{f}: skipped, {r}")
            continue
        files.append(f)
        results.append(r)
    if not files:
        why = "; ".join(f"{os.path.basename(f)}: {r}" for f, r in skipped_files.items())
        raise TraceFormatError(", ".join(inputs.files), None, f"no trace files found ({why})")
    for f, r in zip(files, results, strict=True):
        skipped.merge(r.skipped)
        calls = r.columns.get("aggregated_calls") if r.columns is not None else None  # an aggregated read
        meta[f] = dict(r.meta, rows=len(r) if calls is None else int(calls.sum()), skipped=r.skipped.count)
    worlds = {m.get("world_size") for m in meta.values()} - {None}
    if len(worlds) > 1:
        detail = ", ".join(f"{os.path.basename(f)}: {m['world_size']}" for f, m in meta.items()
                           if m.get("world_size") is not None)
        raise TraceMismatchError(f"traces disagree on the world size ({detail}); read each run separately")
    _ranks_of_processes(results)
    table = _frame(results)
    for col in CANONICAL_COLUMNS:
        if col not in table.columns:
            table[col] = None
    extra = [c for c in table.columns if c not in CANONICAL_COLUMNS]
    table = table[list(CANONICAL_COLUMNS) + extra]
    table = table.astype(CANONICAL_COLUMNS)
    return TraceSet(table=table, skipped=skipped, meta=meta, skipped_files=skipped_files, notes=tuple(notes))


def _ranks_of_processes(results: list[ParseResult]) -> None:
    """The calls of an NCCL log that records no rank for them get the rank their process
    (host:pid) has in another log of the same read, where it has exactly one: the parts of a log
    rotated or split by line count, of which only the first holds the ``Init COMPLETE`` lines
    that give the ranks (nccl_log: the world communicator's rank)."""
    import pandas as pd

    logs = [r for r in results if r.meta.get("format") == nccl_log.FORMAT and r.columns is not None
            and "host" in r.columns]
    if len(logs) < 2:
        return
    keys = [pd.DataFrame({"h": pd.array(r.columns["host"], dtype="string"),
                          "p": pd.array(r.columns["pid"], dtype="Int64"), "r": r.columns["rank"]})
            for r in logs]
    known = pd.concat([k.dropna().drop_duplicates() for k in keys]).drop_duplicates()
    known = known[~known.duplicated(["h", "p"], keep=False)]  # a process with one rank only
    if known.empty:
        return
    for r, k in zip(logs, keys, strict=True):
        na = k["r"].isna().to_numpy()
        if not na.any():
            continue
        found = k.loc[na, ["h", "p"]].merge(known, on=["h", "p"], how="left")["r"].to_numpy(
            dtype="float64", na_value=np.nan)
        if np.isnan(found).all():
            continue
        rank = k["r"].to_numpy(dtype="float64", na_value=np.nan)
        rank[na] = found
        r.columns["rank"] = pd.arrays.IntegerArray(np.nan_to_num(rank).astype(np.int64), np.isnan(rank))
