"""Reading trace files on a running Dask distributed cluster (``--scheduler tcp://HOST:PORT``).

The reader's units of work go to the cluster's workers as they do to local worker processes:
one task per file, and one per chunk of about one block of a large plain NCCL log
(:func:`zerocalc.traces.chunks._scan_range`, cut where a local read cuts it); this process
gathers the results in file and chunk order and joins them as a local read does, so the table,
its metadata and the skip log are the same. The workers read the files by the paths given here:
they must see the same files at the same paths (one machine, or a shared file system).

Dask is an optional extra (``pip install 'zerocalc[dask]'``), imported only here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from zerocalc.errors import ConfigError, TraceFormatError

if TYPE_CHECKING:
    from zerocalc.traces.paths import _Inputs
    from zerocalc.traces.reader import _Track
    from zerocalc.traces.records import ParseResult

OPTION = "--scheduler"
#: Seconds to wait for the scheduler to answer.
CONNECT_TIMEOUT_S = 10


def connect(address: str) -> Any:
    """A ``distributed.Client`` of the scheduler at ``address``; :class:`ConfigError` when Dask is
    not installed or the scheduler does not answer."""
    try:
        from distributed import Client
    except ImportError:
        raise ConfigError("needs Dask's distributed scheduler: pip install 'zerocalc[dask]'",
                          option=OPTION) from None
    if "://" not in address:
        raise ConfigError(f"{address!r} is not a scheduler address (tcp://HOST:PORT)", option=OPTION)
    try:
        return Client(address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise ConfigError(f"cannot reach the Dask scheduler at {address}: {exc}", option=OPTION) from None


def run(address: str, fn: Callable, jobs: Sequence[tuple], on_done: Callable[[int], None] | None = None
        ) -> list[Any]:
    """``[fn(*job) for job in jobs]``, each call a task on the cluster at ``address``, in order;
    ``on_done(i)`` as job ``i`` finishes.

    An exception a task raises (a :class:`~zerocalc.errors.TraceFormatError` naming its file and
    line) is raised here as it was raised there.
    """
    client = connect(address)  # first: says what to install when Dask is missing
    from distributed import as_completed

    try:
        futures = [client.submit(fn, *job, pure=False) for job in jobs]
        if on_done is not None:
            index = {f.key: i for i, f in enumerate(futures)}
            for future in as_completed(futures):
                on_done(index[future.key])
        return client.gather(futures)
    finally:
        client.close()


def _task(kind: str, args: tuple) -> Any:
    """One unit of a read on a cluster: a whole file (``"file"``), a chunk of a log (``"chunk"``) or,
    for ``check``, a run of consecutive chunks read as one compacted segment (``"segment"``:
    :func:`zerocalc.traces.nccl_segments.segment`)."""
    from zerocalc.traces.chunks import _scan_range
    from zerocalc.traces.reader import _read_one

    if kind == "file":
        return _read_one(args)
    if kind == "chunk":
        return _scan_range(*args)
    from zerocalc.traces.nccl_segments import segment

    file, bounds, strict, compacted = args
    return segment([_scan_range(file, a, b, strict, sequence=True)
                    for a, b in zip(bounds, bounds[1:], strict=False)], file, compacted)


def read_on_cluster(inputs: _Inputs, strict: bool, fmt: str | None, cap: int,
                    scheduler: str, track: _Track | None = None,
                    aggregate: bool = False, sequence: bool = False) -> list[ParseResult | Any | str]:
    """Each file, or each chunk of a large plain NCCL log, read as a task on the Dask cluster at
    ``scheduler`` (:func:`run`); the chunks of a log joined here, in order. ``sequence``: an NCCL
    log's sequence read, each run of chunks of about
    :data:`~zerocalc.traces.nccl_segments.SEGMENT_BYTES` one task that returns it compacted
    (:func:`~zerocalc.traces.nccl_segments.segment`), the segments joined here
    (:func:`~zerocalc.traces.nccl_segments.join_segments`)."""
    from zerocalc.traces import nccl_log
    from zerocalc.traces.chunks import _boundary, _join_chunks
    from zerocalc.traces.detect import HEAD_BYTES
    from zerocalc.traces.reader import _no_records, _splittable

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
            if sequence:
                from zerocalc.traces.nccl_segments import SEGMENT_BYTES

                per = max(1, (SEGMENT_BYTES or size + 1) // nccl_log.BLOCK_BYTES)  # 0: nothing compacted
                runs = [bounds[i : i + per + 1] for i in range(0, len(bounds) - 1, per)]
                jobs.extend(("segment", (file, run, strict, bool(SEGMENT_BYTES))) for run in runs)
                parts.append(len(runs))
            else:
                jobs.extend(("chunk", (file, a, b, strict, aggregate, sequence))
                            for a, b in zip(bounds, bounds[1:], strict=False))
                parts.append(len(bounds) - 1)
        else:
            jobs.append(("file", (file, strict, fmt, cap, optional, aggregate, sequence)))
            parts.append(0)
    # the bytes of each task, for progress: a whole file, or its chunk
    nbytes = [os.path.getsize(a[0]) if kind == "file" else a[1][-1] - a[1][0] if kind == "segment"
              else a[2] - a[1] for kind, a in jobs]
    on_done = None
    if track is not None:
        def on_done(i: int) -> None:
            track.add(nbytes[i], files=int(jobs[i][0] == "file"))
    done = run(scheduler, _task, jobs, on_done)
    results: list[ParseResult | str] = []
    i = 0
    for file, k in zip(inputs.files, parts, strict=True):
        if not k:
            results.append(done[i])
            i += 1
            continue
        result = _join_chunks(file, done[i : i + k], sequence)
        i += k
        if fmt is not None and not len(result):
            with open(file, "rb") as f:
                raise TraceFormatError(file, None, _no_records(fmt, f.read(HEAD_BYTES), file))
        results.append(result)
    return results
