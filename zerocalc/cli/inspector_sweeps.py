"""NCCL Inspector logs as ``check`` and ``fit`` read them: the files that hold them, read together into one
sweep per communicator and collective (:mod:`zerocalc.traces.nccl_inspector`), and the JSON fields and notes
an Inspector sweep adds to its comparison."""

from __future__ import annotations

#: The first NCCL release whose sources hold the Inspector plugin (NCCL 2.28.3, ``ext-profiler/inspector``).
INSPECTOR_SINCE = (2, 28)


def inspector_files(paths: list[str]) -> list[str]:
    """The paths that hold NCCL Inspector logs, in order: told by their head alone (an Inspector log's first
    bytes are a record), not read on as an nccl-tests output whose head is NCCL's INFO lines is."""
    from zerocalc.errors import TraceFormatError
    from zerocalc.traces import reader
    from zerocalc.traces.detect import HEAD_BYTES, INSPECTOR, detect_format

    out = []
    for path in paths:
        try:
            with reader._open(path, reader.MAX_BYTES) as stream:
                if detect_format(stream.read(HEAD_BYTES), path) == INSPECTOR:
                    out.append(path)
        except (OSError, TraceFormatError):
            continue  # refused where it is read, naming it
    return out


def inspector_inputs(files: list[str], n: int | None, strict: bool):
    """The NCCL Inspector files ``files`` read together (a communicator's ranks write one file each), as
    sweeps (:func:`zerocalc.traces.nccl_inspector.sweeps`) in the form of
    :func:`zerocalc.cli.sweep_commands._sweep_inputs`; ``--n`` is refused: each record states its
    communicator's ranks."""
    import os

    from zerocalc.errors import ConfigError
    from zerocalc.traces.nccl_inspector import sweep_note, sweeps
    from zerocalc.traces.records import SkipLog

    if n is not None:
        raise ConfigError("an NCCL Inspector record states its communicator's ranks (header.n_ranks); --n is "
                          "for nccl-tests files that do not say", option="--n")
    records, skipped = [], SkipLog()
    for path in files:
        try:
            got = read_inspector(path, strict)
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
        records += got.records
        skipped.merge(got.skipped)
    dirs = {os.path.dirname(f) for f in files}
    label = files[0] if len(files) == 1 else (
        f"{dirs.pop() or '.'} ({len(files)} Inspector files)" if len(dirs) == 1 else
        f"{files[0]} and {len(files) - 1} more Inspector file(s)")
    got_sweeps, notes = sweeps(records, label)
    out = []
    for sw in got_sweeps:
        run = {**sw.run, "n_how": "the Inspector records' header (n_ranks)",
               "inspector_notes": [sweep_note(sw), *notes]}
        out.append((label, sw.rows, sw.op, sw.group_size, None, skipped, run))
    return out


def with_inspector_fields(d: dict, run: dict, rows: list, *, nccl: bool) -> None:
    """An Inspector sweep's comparison ``d`` (JSON) with its communicator (``inspector``), the notes on its
    records first, each row's calls, ranks and all ranks' median, and, on NVIDIA GPUs (``nccl``), a note
    where the release priced is older than the plugin."""
    from zerocalc.nccl.tables import parse_version

    d["inspector"] = run["inspector"]
    d["notes"] = run["inspector_notes"] + d["notes"]
    if nccl and parse_version(d["nccl_version"])[:2] < INSPECTOR_SINCE:
        since = ".".join(map(str, INSPECTOR_SINCE))
        d["notes"].append(f"NCCL's Inspector plugin ships with NCCL {since} and later "
                          f"(ext-profiler/inspector): a run it logged had a newer NCCL than "
                          f"{d['nccl_version']}, the release priced")
    measured = {r["size_bytes"]: r for r in rows}
    for r in d["rows"]:
        m = measured[r["bytes"]]
        r["calls"], r["ranks"], r["all_ranks_median_s"] = m["calls"], m["ranks"], m["all_ranks_median_s"]


def read_inspector(path: str, strict: bool):
    """The records of an NCCL Inspector file (plain or gzip, as the reader opens it;
    :func:`zerocalc.traces.nccl_inspector.parse_bytes`); a file with none raises :class:`TraceFormatError`
    naming the first line refused and why, if any."""
    from zerocalc.errors import TraceFormatError
    from zerocalc.traces import reader
    from zerocalc.traces.nccl_inspector import parse_bytes

    with reader._open(path, reader.MAX_BYTES) as stream:
        got = parse_bytes(stream.read(), path, strict=strict)
    if not got.records:
        first = got.skipped.examples[0] if got.skipped.examples else None
        if first is not None:
            more = f" (and {got.skipped.count - 1} more)" if got.skipped.count > 1 else ""
            raise TraceFormatError(path, first[1], f"no Inspector records read{more}: {first[2]}")
        raise TraceFormatError(path, None, "no Inspector records")
    return got
