"""The files a read names: a directory gives the files directly in it (its subdirectories are
other runs, not read), a file named twice (by any spelling, or through a link) is read once, a
path that does not exist is a :class:`~zerocalc.errors.TraceFormatError`."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from zerocalc.errors import TraceFormatError
from zerocalc.traces.piped import is_copy, source

#: Files in a directory that are never read as traces (notes and code kept beside a run).
_SKIP_SUFFIXES = (".md", ".rst", ".py", ".ipynb")

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
        real = os.path.realpath(source(file))
        if real in seen:
            out.notes.append(f"{file}: the same file as {seen[real]}, read once")
            return
        seen[real] = file
        out.files.append(file)
        out.optional.append(optional)

    for p in paths:
        if is_copy(str(p)):  # one-shot input, read from its copy under its own name
            add(str(p), optional=False)
            continue
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
