"""A progress meter for long reads: bytes and files done, rate and time left, on one line.

The reader reports how far it got (:func:`zerocalc.traces.read_traces`'s ``progress``); this draws
it on a terminal, redrawn in place at most a few times a second and cleared at the end. The CLI
draws it on stderr only when stderr is a terminal: piped or redirected output gets nothing.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from zerocalc.units import format_bytes


class Meter:
    """``meter(done_bytes, total_bytes, files_done, files)`` redraws the line; :meth:`close` clears it."""

    def __init__(self, stream: TextIO | None = None, *, every_s: float = 0.25,
                 clock=time.monotonic) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.every_s, self.clock = every_s, clock
        self.start = clock()
        self.last = -1.0
        self.width = 0
        #: (time, bytes) of the first report: the rate is taken from there on, not from the start, which
        #: the process's start-up (imports, starting the worker processes) would make look slow
        self.first: tuple[float, int] | None = None

    def __call__(self, done: int, total: int, files_done: int, files: int) -> None:
        now = self.clock()
        if now - self.last < self.every_s and done < total:
            return
        self.last = now
        if self.first is None:
            self.first = (now, done)
        t0, d0 = self.first
        if now > t0 and done > d0:
            rate = (done - d0) / (now - t0)
        else:  # the first report: all we have is the time since the start
            rate = done / (now - self.start) if now > self.start else 0.0
        self._draw(_line(done, total, files_done, files, rate))

    def close(self) -> None:
        if self.width:
            self._draw("")
            self.width = 0

    def _draw(self, text: str) -> None:
        self.stream.write("\r" + text.ljust(self.width) + ("\r" if not text else ""))
        self.stream.flush()
        self.width = len(text)


def _line(done: int, total: int, files_done: int, files: int, rate: float) -> str:
    """``reading 1.2 GB of 4.0 GB (30%), 3 of 16 files, 85 MB/s, 33 s left`` (``rate`` in bytes/s)."""
    parts = [f"reading {format_bytes(done)} of {format_bytes(total)}"
             + (f" ({100 * done / total:.0f}%)" if total else "")]
    if files > 1:
        parts.append(f"{files_done} of {files} files")
    if rate > 0 and done:
        parts.append(f"{format_bytes(rate)}/s")
        if total > done:
            parts.append(f"{(total - done) / rate:.0f} s left")
    return ", ".join(parts)


def terminal_meter(stream: TextIO | None = None) -> Meter | None:
    """A meter on ``stream`` (stderr by default) if it is a terminal, else ``None``."""
    stream = stream if stream is not None else sys.stderr
    isatty = getattr(stream, "isatty", None)
    return Meter(stream) if isatty is not None and isatty() else None
