"""Which inputs of ``check`` and ``fit`` are nccl-tests sweeps: files named one by one, each holding
nccl-tests output, or a directory standing for those of its files that yield a sweep (a job script, notes,
a run that printed no rows kept beside them are skipped, each said on stderr); and one file's rows as the
reader parses them."""

from __future__ import annotations

import re

#: The formats ``check`` and ``fit`` read as sweeps: nccl-tests output (text, ``-J`` JSON) and NCCL Inspector
#: logs (:mod:`zerocalc.traces.nccl_inspector`), whose calls are sweeps of the sizes a run used.
SWEEP_KINDS = ("nccl_tests", "nccl_tests_json", "nccl_inspector")


def _dir_files(path: str) -> list[str]:
    """The files of directory ``path``, sorted by name, hidden ones left out (sub-directories too);
    ``OSError`` where it cannot be listed."""
    import os

    names = sorted(n for n in os.listdir(path) if not n.startswith("."))
    return [f for f in (os.path.join(path, n) for n in names) if os.path.isfile(f)]


def _sweep_files(paths: list[str]) -> bool:
    """Whether every path is a file holding nccl-tests text output (its head as the trace reader
    detects it): ``check`` then compares the sweeps with NCCL's model."""
    import os

    from zerocalc.errors import TraceFormatError
    from zerocalc.traces import reader
    from zerocalc.traces.piped import source

    for path in paths:
        try:
            if not os.path.isfile(source(path)):
                return False
            if reader.detect_file(path) not in SWEEP_KINDS:  # as the reader reads it
                return False
        except (OSError, TraceFormatError):
            return False  # the trace reader says what is wrong with it
    return bool(paths)


def sweep_paths(paths: list[str]) -> list[str] | None:
    """The nccl-tests files ``paths`` name, a directory standing for the files in it that yield a sweep
    (sorted by name, hidden ones left out; :func:`_dir_sweeps`), each file it holds that yields none
    (a job script, notes, a run that printed no rows) skipped with one line ``skipped: PATH: reason`` on
    stderr; a file named explicitly must hold nccl-tests output (:func:`_sweep_files`). Else ``None``: a
    directory of per-rank traces, or one that mixes them in, is read as traces; a directory none of whose
    files yields a sweep is as :func:`_all_sweeps` takes it (every file nccl-tests output: its errors
    said file by file), as are explicit files that are not all sweeps (read as traces)."""
    import os

    from zerocalc.cli.application import _echo_err

    files: list[str] = []
    skipped: list[str] = []
    for path in paths:
        if not os.path.isdir(path):
            if not _sweep_files([path]):
                return _all_sweeps(paths)
            files.append(path)
            continue
        got = _dir_sweeps(path)
        if got is None:
            return _all_sweeps(paths)
        files += got[0]
        skipped += got[1]
    for line in skipped:  # stderr: a --format json / csv / markdown output stays parseable
        _echo_err(f"skipped: {line}")
    return files


def per_rank_traces(paths: list[str]) -> bool:
    """Whether ``paths`` name per-rank training traces rather than nccl-tests sweeps: a file read as
    another format, or a directory holding one. (``-`` and pipes are read as ``check`` reads them.)"""
    import os

    from zerocalc.errors import ZerocalcError
    from zerocalc.traces import reader

    for path in paths:
        try:
            if os.path.isdir(path):
                if any(_dir_file(f)[0] == "trace" for f in _dir_files(path)):
                    return True
            elif reader.detect_file(path) not in SWEEP_KINDS:  # files, and - or a pipe
                return True
        except (OSError, ZerocalcError):
            continue  # unreadable or of no known format: refused where it is read, naming it
    return False


def sweeps_needed(paths: list[str]) -> list[str]:
    """:func:`sweep_paths` where only nccl-tests sweeps will do (``fit --out``, ``check --topology``): a
    directory that does not stand for any is refused naming it and a file of it that says why
    (:class:`TraceFormatError`); explicit files are given back, each refused when read if not a sweep."""
    import os

    from zerocalc.errors import TraceFormatError

    files = sweep_paths(paths)
    if files is not None:
        return files
    for path in paths:
        if os.path.isdir(path):
            try:
                whys = [_dir_file(f) for f in _dir_files(path)]
            except OSError as exc:
                raise TraceFormatError(path, None, f"cannot list: {exc.strerror or exc}") from None
            trace = next((why for kind, why in whys if kind == "trace"), None)
            if trace is not None:
                raise TraceFormatError(path, None, f"holds per-rank traces, not nccl-tests outputs alone "
                                                   f"({trace}); name the nccl-tests files one by one")
            if not whys:
                raise TraceFormatError(path, None, "no files in it")
            why = min(whys, key=lambda w: w[0] == "unread")[1]  # a file read, before notes left unread
            raise TraceFormatError(path, None, f"none of its {len(whys)} files yields an nccl-tests sweep "
                                               f"({why})")
    return paths


def _all_sweeps(paths: list[str]) -> list[str] | None:
    """The files ``paths`` name, a directory standing for every file in it, where every one holds
    nccl-tests output (:func:`_sweep_files`); else ``None``."""
    import os

    files: list[str] = []
    for path in paths:
        if not os.path.isdir(path):
            files.append(path)
            continue
        try:
            files += _dir_files(path)
        except OSError:
            return None  # the trace reader says what is wrong with it
    return files if _sweep_files(files) else None


def _dir_sweeps(path: str) -> tuple[list[str], list[str]] | None:
    """The files of directory ``path`` (sorted by name, hidden ones left out) that yield an nccl-tests
    sweep, and ``PATH: reason`` for each that yields none (:func:`_dir_file`); ``None`` where none yields
    one, where one is a per-rank trace (the directory is read as traces, as before), or where it cannot
    be listed (the trace reader says why)."""
    try:
        files = _dir_files(path)
    except OSError:
        return None
    sweeps, skipped = [], []
    for f in files:
        kind, why = _dir_file(f)
        if kind == "trace":
            return None
        if kind == "sweep":
            sweeps.append(f)
        else:
            skipped.append(why)
    return (sweeps, skipped) if sweeps else None


def _dir_file(path: str) -> tuple[str, str]:
    """What a file found in a directory is: ``("sweep", "")`` where it yields nccl-tests result rows or is
    an NCCL Inspector log (the trace reader's detection, on its head, then :func:`_read_sweep`), ``("trace",
    "PATH: ...")`` where the reader detects another trace format (NCCL log, Kineto, DeepSpeed comms log,
    Flight Recorder), ``("unread", "PATH: ...")`` for notes or code by their name, as the reader leaves
    them out of a directory (:data:`zerocalc.traces.paths._SKIP_SUFFIXES`), else ``("other", "PATH:
    reason")`` with the reader's reason: no format it detects (binary, other JSON, a CSV), a text whose
    nccl-tests header has no result rows (a job script naming ``<op>_perf``, a run that failed)."""
    import os

    from zerocalc.errors import TraceFormatError
    from zerocalc.traces import reader
    from zerocalc.traces.paths import _SKIP_SUFFIXES

    suffix = os.path.splitext(path)[1]
    if suffix in _SKIP_SUFFIXES:
        return "unread", f"{path}: a {suffix} file (notes or code kept beside a run), not read"
    try:
        kind = reader.detect_file(path)
        if kind not in SWEEP_KINDS:
            return "trace", f"{path}: a per-rank trace ({kind})"
        if kind != "nccl_inspector":  # an Inspector log's head holds a record (its detection): read later
            _read_sweep(path, strict=False)
    except TraceFormatError as exc:
        return "other", str(exc)
    except OSError as exc:
        return "other", f"{path}: cannot read: {exc.strerror or exc}"
    return "sweep", ""


def _read_sweep(path: str, strict: bool):
    """The text of an nccl-tests file (plain or gzip, as the reader opens it; ``[]`` for a ``-J`` JSON
    report) and its parse; a file with no result rows raises :class:`TraceFormatError` naming the first
    row refused and why, if any."""
    from zerocalc.errors import TraceFormatError
    from zerocalc.traces import reader
    from zerocalc.traces.detect import HEAD_BYTES, detect_format
    from zerocalc.traces.nccl_tests import parse
    from zerocalc.traces.nccl_tests_json import parse_json_bytes

    with reader._open(path, reader.MAX_BYTES) as stream:
        data = stream.read()
    if detect_format(data[:HEAD_BYTES], path) == "nccl_tests_json":  # -J: its version is a field
        text, res = [], parse_json_bytes(data, path, strict=strict)
    else:
        text = data.decode("utf-8", errors="replace").splitlines(True)
        res = parse(iter(text), path, strict=strict)
    if not res.rows:
        first = res.skipped.examples[0] if res.skipped.examples else None
        if first is not None:  # its rows were refused: the first one's line and why
            more = f" (and {res.skipped.count - 1} more)" if res.skipped.count > 1 else ""
            raise TraceFormatError(path, first[1], f"no nccl-tests result rows read{more}: {first[2]}")
        failed = _failure_line(text)
        if failed is not None:  # the test stopped before its first row: say where and why
            raise TraceFormatError(path, failed[0], "no nccl-tests result rows: the run failed before "
                                   f"its first one: {failed[1]!r}")
        cut = _cut_header(text)
        if cut is not None:  # a table cut down to a few columns: rows nccl-tests never prints
            raise TraceFormatError(path, cut[0], "no nccl-tests result rows: its table header has no count "
                                   f"and type columns, which every nccl-tests table prints: {cut[1]!r}")
        last = _last_line(text)
        if last is not None and _started(text):  # no failure printed: the run stopped (killed, hung, cut)
            raise TraceFormatError(path, None, "no nccl-tests result rows: the test started but its output "
                                   f"stops at line {last[0]} before its first one: {last[1]!r}")
        raise TraceFormatError(path, None, "no nccl-tests result rows")
    return text, res


#: the lines nccl-tests (and ROCm's rccl-tests) print when a call fails, ``src/common.h``: ``NCCLCHECK``
#: "%s: Test NCCL failure %s:%d '%s / %s'", ``CUDACHECK`` "%s: Test CUDA failure %s:%d '%s'" (rccl-tests,
#: hipified: "Test HIP failure"), ``TESTCHECK`` " .. %s pid %d: Test failure %s:%d"
_FAILURE = re.compile(r"\bTest (?:(?:NCCL|CUDA|HIP) )?failure\b")


def _started(text: list[str]) -> bool:
    """Whether the text holds the line every nccl-tests run prints as it starts (``src/common.cu``: "#
    nThread %d nGpus %d minBytes %ld maxBytes %ld ..."), whatever a launcher put before it."""
    return any("nThread" in line and "nGpus" in line and "minBytes" in line for line in text)


def _last_line(text: list[str]) -> tuple[int, str] | None:
    """The last line that is not blank (1-based number, its text stripped), if any."""
    for number in range(len(text), 0, -1):
        if text[number - 1].strip():
            return number, text[number - 1].strip()
    return None


def _failure_line(text: list[str]) -> tuple[int, str] | None:
    """The first line (1-based number, its text stripped) where the test reports a failed call, if any."""
    for number, line in enumerate(text, 1):
        if _FAILURE.search(line):
            return number, line.strip()
    return None


def _cut_header(text: list[str]) -> tuple[int, str] | None:
    """The first ``#`` line naming a table's ``size`` and ``busbw`` columns but not its ``count`` and ``type``
    (1-based number, its text stripped), if any: every nccl-tests table's header names an element count and
    a type beside its size (nccl-tests ``src/util.cu``: "size", "count", "type", "redop", "root", ...; its
    first release, 2017: "bytes", "N", "type", ...), so such a table was cut down to a few columns by hand."""
    for number, line in enumerate(text, 1):
        fields = line.strip().lstrip("#").split()
        if line.lstrip().startswith("#") and "size" in fields and "busbw" in fields:
            if "count" not in fields and "type" not in fields:
                return number, line.strip()
    return None
