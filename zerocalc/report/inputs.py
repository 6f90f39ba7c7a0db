"""What the report reads and writes, checked before any work: the PDF path and the traces.

Both checks only look at the file system (stat, a directory listing, the first bytes of a
trace), so a bad path fails at once, before the model, the simulation or matplotlib are loaded.
Every refusal is a :class:`~zerocalc.errors.ConfigError` naming the option.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from zerocalc.errors import ConfigError, TraceFormatError
from zerocalc.report.config import DEFAULT_CONFIG, ReportConfig


def _os_reason(exc: OSError) -> str:
    """An OS error as a few words (``permission denied``), without the path the caller prints."""
    return (os.strerror(exc.errno) if exc.errno else str(exc)).lower()


def check_output(path: str | Path, config: ReportConfig = DEFAULT_CONFIG) -> Path:
    """The PDF path to write, refused (:class:`ConfigError`, option ``--output``) unless writing it
    can succeed and loses nothing.

    Refused, in this order: a directory; an input trace or a path inside one; an existing file that
    is not a PDF; a name that does not end in ``.pdf``; a directory part that does not exist (it is
    never created), is not a directory, or cannot be written (tried by creating and removing an
    unnamed temporary file in it, which also holds for root and read-only file systems).
    """
    out = Path(path)
    if out.is_dir():
        raise ConfigError(f"{out} is a directory; give a file name such as {out / 'review.pdf'}",
                          option="--output")
    target = out.resolve()
    for trace in config.traces:
        t = Path(trace).resolve()
        if target == t or (t.is_dir() and t in target.parents):
            raise ConfigError(f"{out} is (inside) the input trace {trace}; write the PDF elsewhere",
                              option="--output")
    if out.exists():
        try:
            with out.open("rb") as fh:
                head = fh.read(5)
        except OSError as exc:
            raise ConfigError(f"{out}: exists and cannot be read ({_os_reason(exc)})",
                              option="--output") from None
        if head != b"%PDF-":
            raise ConfigError(f"refusing to overwrite {out}: it exists and is not a PDF", option="--output")
    if out.suffix.lower() != ".pdf":
        raise ConfigError(f"{out}: the report is a PDF; give a file name ending in .pdf", option="--output")
    parent = out.parent
    if not parent.exists():
        raise ConfigError(f"{out}: directory {parent} does not exist (create it first)", option="--output")
    if not parent.is_dir():
        raise ConfigError(f"{out}: {parent} is not a directory", option="--output")
    try:
        with tempfile.TemporaryFile(dir=parent, prefix=f".{out.name}."):
            pass
    except OSError as exc:
        raise ConfigError(f"{out}: cannot write in directory {parent} ({_os_reason(exc)})",
                          option="--output") from None
    return out


#: Files in a trace directory the reader leaves out (zerocalc.traces.paths._SKIP_SUFFIXES).
_SKIP_SUFFIXES = (".md", ".rst", ".py", ".ipynb")
#: Bytes read from the head of a trace (zerocalc.traces.detect.HEAD_BYTES, checked by a test).
_HEAD_BYTES = 1 << 16


def _head(file: Path) -> bytes:
    """The first bytes of a trace, decompressed when it is gzip, xz or bzip2 (what its format is
    detected from; :func:`zerocalc.traces.streams.buffered`, which needs only the standard library);
    of the copy standing in for it where it was piped (:func:`zerocalc.traces.piped.source`)."""
    from zerocalc.traces.piped import source
    from zerocalc.traces.streams import buffered

    try:
        with buffered(open(source(str(file)), "rb"), str(file), 1 << 30) as stream:
            return stream.read(_HEAD_BYTES)
    except TraceFormatError as exc:
        raise ConfigError(f"{file}: {exc.reason}", option="--trace") from None
    except OSError as exc:
        raise ConfigError(f"{file}: cannot be read ({_os_reason(exc)})", option="--trace") from None


def check_traces(paths: Iterable[str | Path]) -> tuple[Path, ...]:
    """The ``--trace`` paths, refused (:class:`ConfigError`, option ``--trace``) unless each can be read. A
    path must be a regular file or a directory (a device is refused without being opened); ``-`` (standard
    input) and a pipe are read from the copy the command line made of them (:mod:`zerocalc.cli.piped`;
    :func:`zerocalc.traces.piped.source`), a pipe given here uncopied is refused unopened as not a regular
    file. A file must be readable and its first bytes a known trace format; a directory must be listable,
    the files directly in it readable, and at least one of them a trace (the reader reads those and skips
    the rest). The file system is checked first, for every path, and only then the formats (which loads the
    trace readers)."""
    paths = tuple(map(Path, paths))
    heads: list[tuple[Path, list[tuple[Path, bytes]]]] = []  # per path: (file, head) of its files
    from zerocalc.traces.piped import source

    for p in paths:
        try:
            mode = os.stat(source(str(p))).st_mode
        except OSError as exc:
            reason = "no such file or directory" if exc.errno == errno.ENOENT else _os_reason(exc)
            raise ConfigError(f"{p}: {reason}", option="--trace") from None
        if stat.S_ISDIR(mode):
            try:
                entries = sorted(p.iterdir())
            except OSError as exc:
                raise ConfigError(f"{p}: cannot list the directory ({_os_reason(exc)})",
                                  option="--trace") from None
            files = [q for q in entries if not q.name.startswith(".") and q.is_file()
                     and q.suffix not in _SKIP_SUFFIXES]
            heads.append((p, [(q, _head(q)) for q in files]))
        elif stat.S_ISREG(mode):
            heads.append((p, [(p, _head(p))]))
        else:
            raise ConfigError(f"{p}: not a regular file or directory", option="--trace")
    if not heads:
        return paths
    from zerocalc.traces.detect import detect_format

    for p, files in heads:
        known = []
        for file, head in files:
            try:
                detect_format(head, str(file))
                known.append(file)
            except TraceFormatError as exc:
                if file == p:
                    raise ConfigError(f"{file}: not a trace zerocalc reads ({exc.reason})",
                                      option="--trace") from None
        if not known:
            raise ConfigError(f"{p}: no trace of a known format in the directory", option="--trace")
    return paths
