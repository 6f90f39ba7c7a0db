"""The bytes of a trace file as one buffered stream, plain or gzip: what a gzip file expands to
capped (a gzip bomb expands a thousandfold), a plain file read whatever its size, and a truncated
or corrupt gzip stream a :class:`~zerocalc.errors.TraceFormatError` naming the file. A UTF-16 text (its
byte-order mark first) is decoded whole into the UTF-8 the readers take.

The file itself is opened by the reader (:func:`zerocalc.traces.reader._open`); nothing here
opens, unpickles or writes a file.
"""

from __future__ import annotations

import gzip
import io
import zlib
from typing import BinaryIO

from zerocalc.errors import TraceFormatError


def buffered(raw: BinaryIO, path: str, cap: int, tick=None) -> BinaryIO:
    """The bytes of the open file ``raw`` (named ``path``), decompressed if it is gzip; what a gzip
    file expands to is capped at ``cap`` bytes, a plain file is read whatever its size. ``tick``, if
    given, is called with the position in the file after each read. Closing the stream closes
    ``raw``."""
    magic = raw.read(2)
    raw.seek(0)
    if magic in UTF16_BOMS:
        return _utf8(raw, path, cap, tick)
    if magic != b"\x1f\x8b":
        return io.BufferedReader(_Plain(raw, tick), buffer_size=1 << 20)
    inner = gzip.GzipFile(fileobj=raw, mode="rb")
    return io.BufferedReader(_Capped(inner, cap, path, (inner, raw), tick), buffer_size=1 << 20)


#: The byte-order marks of a UTF-16 text: Windows PowerShell 5.1's ``>`` and ``Out-File`` write UTF-16LE
#: with its mark by default (Microsoft PowerShell docs, about_Character_Encoding), so a log saved there
#: (``kubectl logs POD > out.txt``) is one.
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def _utf8(raw: BinaryIO, path: str, cap: int, tick=None) -> BinaryIO:
    """A UTF-16 text file (``raw``, at its byte-order mark) as the UTF-8 bytes every reader takes,
    decoded whole; refused past ``cap`` bytes like a gzip file's expansion."""
    with raw:
        data = raw.read(cap + 1)
    if len(data) > cap:
        raise TraceFormatError(path, None, f"a UTF-16 text over the cap of {cap} bytes")
    text = data.decode("utf-16", errors="replace")
    return io.BufferedReader(_Plain(io.BytesIO(text.encode("utf-8")), tick), buffer_size=1 << 20)


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
