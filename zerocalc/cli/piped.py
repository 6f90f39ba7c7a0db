"""``-`` (standard input) and pipes given as trace paths: each copied to a temporary file first, which
stands in for it under its own name while the command reads (:mod:`zerocalc.traces.piped`, where why);
``-`` is named ``<stdin>``. A copy is capped as a compressed file's expansion is
(:data:`zerocalc.traces.reader.MAX_BYTES`); the copies are removed when the command ends."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext

#: Bytes copied at a time.
_STEP = 1 << 20


def piped_inputs(argument: str):
    """A command whose ``argument`` lists trace paths, made to read ``-`` and pipes too
    (:func:`copied`). A Dask cluster's workers could not open such a copy: ``--scheduler`` with one is
    a :class:`~zerocalc.errors.ConfigError`."""
    import functools

    def wrap(command):
        @functools.wraps(command)
        def run(*args, **kwargs):
            from zerocalc.traces import piped

            paths = kwargs[argument]
            if not paths:  # an optional list left out (report's --trace)
                return command(*args, **kwargs)
            if kwargs.get("scheduler") and any(piped.one_shot(p) for p in paths):
                from zerocalc.errors import ConfigError

                raise ConfigError("reads files on the cluster's workers, which cannot read standard input "
                                  "or a pipe; save it to a file first", option="--scheduler")
            from zerocalc.traces.reader import MAX_BYTES

            with copied(paths, MAX_BYTES) as names:
                return command(*args, **{**kwargs, argument: names})

        return run

    return wrap


@contextmanager
def copied(paths: list[str], cap: int) -> Iterator[list[str]]:
    """``paths`` with each one-shot input (:func:`zerocalc.traces.piped.one_shot`) copied to a
    temporary file that stands in for it, ``-`` renamed ``<stdin>`` (named twice, read once); the
    copies removed on exit. More than ``cap`` bytes is a :class:`~zerocalc.errors.TraceFormatError`."""
    from zerocalc.traces import piped

    names: list[str] = []
    copies: dict[str, str] = {}
    folder = None
    try:
        for path in paths:
            if not piped.one_shot(path):
                names.append(path)
                continue
            name = piped.STDIN_NAME if path == piped.STDIN else path
            if name not in copies:
                import os
                import tempfile

                folder = folder or tempfile.mkdtemp(prefix="zerocalc-input-")
                copies[name] = os.path.join(folder, str(len(copies)))
                _copy(path, name, copies[name], cap)
            names.append(name)
        with piped.standing_in(copies):
            yield names
    finally:
        if folder is not None:
            import shutil

            shutil.rmtree(folder, ignore_errors=True)


def _copy(path: str, name: str, dest: str, cap: int) -> None:
    """Copy the one-shot input ``path`` (read as ``name``) to ``dest``, refusing more than ``cap``
    bytes; a terminal is told how to end its input."""
    from zerocalc.cli.application import _echo_err
    from zerocalc.errors import TraceFormatError
    from zerocalc.traces import piped

    stdin = path == piped.STDIN  # left open: nullcontext, not a file this function opened
    with nullcontext(sys.stdin.buffer) if stdin else open(path, "rb") as stream, open(dest, "wb") as out:
        if stdin and stream.isatty():
            _echo_err("reading standard input; end it with Ctrl-D")
        total = 0
        while chunk := stream.read(_STEP):
            total += len(chunk)
            if total > cap:
                raise TraceFormatError(name, None, f"more than {cap / 2**30:g} GiB read; save it to a "
                                                   "file and pass its path")
            out.write(chunk)
