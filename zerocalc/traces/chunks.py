"""One large plain NCCL log scanned in parallel: cut into chunks of about one block at line
boundaries, the chunks claimed from the front by the reading process and from the back by worker
processes until the two ends meet, and their scans joined in order into the result a sequential
read gives (:func:`zerocalc.traces.nccl_log.finish`); for ``check``, each process's run of chunks
compacted into segments as it reads them (:mod:`zerocalc.traces.nccl_segments`)."""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any, BinaryIO

from zerocalc.errors import TraceFormatError
from zerocalc.traces import nccl_log


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
                 aggregate: bool = False, sequence: bool = False, workers: int = 1) -> dict[int, Any]:
    """Scan the chunks of a log that this process claims, from the front (the reading process) or
    from the back (``workers`` worker processes), until the two ends meet: each chunk's
    :class:`~nccl_log.Scan`, or in strict mode the line (counted from the chunk's start) and
    reason of its first unusable line. ``size`` is the log's size when the read began (a log
    still being written is read as it was then, by every process alike). ``tick`` is told the bytes
    of the chunks claimed so far, from both ends, after each chunk.

    ``sequence``: each run of consecutive chunks this process scanned, of about
    :data:`~zerocalc.traces.nccl_segments.SEGMENT_BYTES`, as one compacted segment
    (:func:`~zerocalc.traces.nccl_segments.segment`), under its first chunk's number, as soon as it is
    read: what a process holds does not grow with the log's length. Several workers each claim
    runs of consecutive chunks from the back (shorter as the ends near), so that their segments are
    runs too."""
    out: dict[int, Any] = {}
    last = -(-size // nccl_log.BLOCK_BYTES) - 1
    side, step = (0, 1) if front else (1, -1)  # shared = [next from the front, next from the back]
    run: dict[int, Any] = {}  # sequence: the chunks of the segment being read
    run_bytes = 0
    if sequence:
        from zerocalc.traces import nccl_segments

        limit = nccl_segments.SEGMENT_BYTES or size + 1  # 0: nothing compacted, one run at most
        seg_chunks = max(1, limit // nccl_log.BLOCK_BYTES)

    def close() -> None:
        nonlocal run_bytes
        if run:
            out[min(run)] = nccl_segments.segment([run[k] for k in sorted(run)], file,
                                                  compacted=bool(nccl_segments.SEGMENT_BYTES))
            run.clear()
            run_bytes = 0

    claimed: list[int] = []
    with open(file, "rb") as f:
        while True:
            if not claimed:
                with shared.get_lock():
                    if shared[0] > shared[1]:
                        break
                    k = shared[side]
                    n = 1
                    if sequence and not front and workers > 1:
                        n = max(1, min(seg_chunks, (shared[1] - shared[0] + 1) // (2 * (workers + 1))))
                    shared[side] = k + step * n
                claimed = list(range(k, k + step * n, step))
            k = claimed.pop(0)
            if sequence and run and (k - step not in run or run_bytes >= limit):
                close()
            start = _boundary(f, k, size)
            end = _boundary(f, k + 1, size)
            before = 1 if start else 0  # the newline that ends the line before the chunk
            f.seek(start - before)
            try:
                result = nccl_log.scan_bytes(f.read(end - start + before), file, strict=strict,
                                             aggregate=aggregate, sequence=sequence,
                                             after_newline=bool(before))
                if tick is not None:
                    tick(min(size, (shared[0] + last - shared[1]) * nccl_log.BLOCK_BYTES))
            except TraceFormatError as exc:
                result = (exc.line, exc.reason)
            if sequence:
                run[k] = result
                run_bytes += end - start
            else:
                out[k] = result
            if isinstance(result, tuple) and front:
                # every chunk before it is read and clean: this is the log's first error
                with shared.get_lock():
                    shared[0], shared[1] = 1, 0
                break
    if sequence:
        close()
    return out


#: A worker's end of the chunk counters (set when its process starts).
_SHARED: Any = None


def _start_worker(shared: Any, block_bytes: int | None = None, segment_bytes: int | None = None) -> None:
    """A worker's start: the chunk counters, and the caller's chunk and segment sizes (a spawned
    process imports the modules afresh)."""
    global _SHARED
    _SHARED = shared
    if block_bytes is not None:
        nccl_log.BLOCK_BYTES = block_bytes
    if segment_bytes is not None:
        from zerocalc.traces import nccl_segments

        nccl_segments.SEGMENT_BYTES = segment_bytes
    _keep_freed_memory()
    # one process per CPU already: polars (nccl_polars) need not start a thread per CPU in each
    os.environ.setdefault("POLARS_MAX_THREADS", "1")


def _keep_freed_memory() -> None:
    """Have glibc's malloc keep the memory a chunk's scan frees for the next chunk's (blocks of a few
    MB: served from the heap, not mapped apart, and the heap not trimmed below 128 MB) rather than
    return it to the system and take the page faults again: about half the system time of a
    scan (benchmarks/bench_scale.py). Elsewhere than glibc, nothing. Glibc's
    ``M_MMAP_THRESHOLD`` (-3) and ``M_TRIM_THRESHOLD`` (-1), mallopt(3)."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(-3, 32 << 20)
    mallopt(-1, 128 << 20)


def _worker_chunks(file: str, size: int, strict: bool, aggregate: bool,
                   sequence: bool = False, workers: int = 1) -> dict[int, Any]:
    return _scan_chunks(file, size, strict, False, _SHARED, aggregate=aggregate, sequence=sequence,
                        workers=workers)


def _read_split(file: str, strict: bool, workers: int, tick=None,
                aggregate: bool = False, sequence: bool = False) -> Any:
    """Scan a large NCCL log in chunks of about one block, this process taking them from the
    front and ``workers`` - 1 worker processes from the back, until the two ends meet (so each
    process scans what its start-up and speed allow), and join them in order: the same result
    as a sequential read (runs of whole lines read alike wherever they are cut). ``None`` for
    fewer than two processes. ``sequence``: the sequence read instead of the table, each process's
    chunks compacted into segments as it reads them and the segments joined here
    (:mod:`zerocalc.traces.nccl_segments`)."""
    import multiprocessing

    if workers < 2:
        return None
    size = os.path.getsize(file)
    # spawn, not fork: the caller may hold threads (numpy's own included) whose locks a fork copies
    spawn = multiprocessing.get_context("spawn")
    segment_bytes = None
    if sequence:
        from zerocalc.traces import nccl_segments

        segment_bytes = nccl_segments.SEGMENT_BYTES
    shared = spawn.Array("q", [0, -(-size // nccl_log.BLOCK_BYTES) - 1])  # next from the front, the back
    with ProcessPoolExecutor(max_workers=workers - 1, mp_context=spawn, initializer=_start_worker,
                             initargs=(shared, nccl_log.BLOCK_BYTES, segment_bytes)) as ex:
        pending = [ex.submit(_worker_chunks, file, size, strict, aggregate, sequence, workers - 1)
                   for _ in range(workers - 1)]
        import pandas  # noqa: F401 -- the table needs it: import it while the workers start

        _keep_freed_memory()
        chunks = _scan_chunks(file, size, strict, True, shared, tick, aggregate, sequence)
        for future in pending:
            chunks.update(future.result())
    return _join_chunks(file, [chunks[k] for k in sorted(chunks)], sequence)


def _join_chunks(file: str, results: list[Any], sequence: bool = False) -> Any:
    """The scans of a log's chunks, in order, joined into its result (``sequence``: its segments
    joined into its sequence read, :func:`zerocalc.traces.nccl_segments.join_segments`); in strict mode
    the first chunk's (or segment's) error (its line counted from its start) raised with the log's
    line."""
    lines = 0
    for r in results:
        if isinstance(r, tuple):  # strict: the first unusable line, in file order
            line, reason = r
            raise TraceFormatError(file, line + lines if line is not None else None, reason)
        lines += r.lines
    if sequence:
        from zerocalc.traces.nccl_segments import join_segments

        return join_segments(results, file)
    return nccl_log.finish(results, file)


def _scan_range(file: str, start: int, end: int, strict: bool, aggregate: bool = False,
                sequence: bool = False) -> Any:
    """One chunk of a log (bytes ``start`` to ``end``, whole lines) scanned: its
    :class:`~nccl_log.Scan`, or in strict mode (line from the chunk's start, reason) of its
    first unusable line."""
    with open(file, "rb") as f:
        f.seek(start)
        data = f.read(end - start)
    try:
        return nccl_log.scan_bytes(data, file, strict=strict, aggregate=aggregate, sequence=sequence)
    except TraceFormatError as exc:
        return (exc.line, exc.reason)
