"""Inputs that can be read only once: ``-`` (standard input) and pipes (``/dev/stdin`` behind a pipe,
a FIFO, a shell's ``<(ssh host cat run.log)``).

The readers open a file more than once (its head to detect the format, then the whole of it), which
a pipe cannot give. So the command line copies each such input first (:mod:`zerocalc.cli.piped`) and
the copy stands in for it under its own name (:func:`standing_in`): the readers open the copy
(:func:`source`), and messages, tables and JSON name the input as it was given, ``-`` as ``<stdin>``.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager

#: The argument that names standard input, and the name it is read under.
STDIN, STDIN_NAME = "-", "<stdin>"

#: name -> the copy standing in for it.
_COPIES: dict[str, str] = {}


def source(file: str) -> str:
    """The path to open for ``file``: the copy standing in for it, if any, else ``file`` itself."""
    return _COPIES.get(file, file)


def is_copy(file: str) -> bool:
    """Whether ``file`` is read from a copy (which another process cannot open by its name)."""
    return file in _COPIES


def one_shot(path: str) -> bool:
    """Whether ``path`` is ``-`` or a pipe (a FIFO; ``/dev/stdin`` behind a pipe): input that can be
    read only once. A device (``/dev/null``, a terminal) is not one: the readers refuse it as not a
    regular file."""
    if path == STDIN:
        return True
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode)


@contextmanager
def standing_in(copies: dict[str, str]) -> Iterator[None]:
    """Read each name of ``copies`` from its copy (name -> path) until the block ends."""
    taken = [name for name in copies if name not in _COPIES]
    _COPIES.update({name: copies[name] for name in taken})
    try:
        yield
    finally:
        for name in taken:
            _COPIES.pop(name, None)
