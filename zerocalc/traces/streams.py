"""The bytes of a trace file as one buffered stream, plain or compressed (gzip, and the xz and bzip2
that ``tar -J`` / ``xz`` and ``bzip2`` write, read with Python's own ``lzma`` and ``bz2``): what a
compressed file expands to capped (a gzip bomb expands a thousandfold), a plain file read whatever its
size, and a truncated or corrupt stream a :class:`~zerocalc.errors.TraceFormatError` naming the file.
A zstd stream (Python reads one only from 3.14, ``compression.zstd``) or a zip archive is refused
naming what it is and how to unpack it. A UTF-16 text (its byte-order mark first) is decoded whole into
the UTF-8 the readers take.

The file itself is opened by the reader (:func:`zerocalc.traces.reader._open`); nothing here
opens, unpickles or writes a file.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import zlib
from typing import BinaryIO

from zerocalc.errors import TraceFormatError


def buffered(raw: BinaryIO, path: str, cap: int, tick=None) -> BinaryIO:
    """The bytes of the open file ``raw`` (named ``path``), decompressed if it is gzip, xz or bzip2;
    what a compressed file expands to is capped at ``cap`` bytes, a plain file is read whatever its
    size. ``tick``, if given, is called with the position in the file after each read. Closing the
    stream closes ``raw``."""
    magic = raw.read(6)
    raw.seek(0)
    if magic[:2] in UTF16_BOMS:
        return _utf8(raw, path, cap, tick)
    kind = compression(magic)
    if kind is None:
        return io.BufferedReader(_Plain(raw, tick), buffer_size=1 << 20)
    if kind in _REFUSED:
        raw.close()
        raise TraceFormatError(path, None, _REFUSED[kind])
    inner = _OPENERS[kind](raw)
    return io.BufferedReader(_Capped(inner, cap, path, (inner, raw), tick, kind), buffer_size=1 << 20)


#: The first bytes of each compressed or archive format a trace may come in, by name (RFC 1952 gzip,
#: the xz file format's header magic, bzip2's ``BZh`` and block size digit, RFC 8878 zstd's frame
#: magic, a zip archive's local file header).
MAGIC = {"gzip": b"\x1f\x8b", "xz": b"\xfd7zXZ\x00", "bzip2": b"BZh", "zstd": b"\x28\xb5\x2f\xfd",
         "zip": b"PK\x03\x04"}
_OPENERS = {"gzip": lambda raw: gzip.GzipFile(fileobj=raw, mode="rb"),
            "xz": lambda raw: lzma.LZMAFile(raw, mode="rb"),
            "bzip2": lambda raw: bz2.BZ2File(raw, mode="rb")}
_REFUSED = {"zstd": "zstd-compressed data: decompress it first (zstd -d FILE); Python reads zstd only "
                    "from 3.14",
            "zip": "a zip archive: unpack it first (unzip FILE) and give the files or their directory"}


def compression(head: bytes) -> str | None:
    """The name of the compression or archive format whose magic ``head`` opens with (:data:`MAGIC`),
    ``None`` for anything else (a text); bzip2 only with its block size digit after ``BZh``."""
    for kind, magic in MAGIC.items():
        if head.startswith(magic) and (kind != "bzip2" or head[3:4].isdigit()):
            return kind
    return None


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

    def __init__(self, raw: BinaryIO, cap: int, file: str, owned: tuple = (), tick=None,
                 kind: str = "gzip") -> None:
        super().__init__()
        self._raw, self._cap, self._file, self.n, self._owned = raw, cap, file, 0, owned
        self._tick, self._kind = tick, kind

    def close(self) -> None:
        for f in self._owned:
            f.close()
        super().close()

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[override]
        data = _guard(self._file, self._raw.read, len(b), kind=self._kind)
        self.n += len(data)
        if self.n > self._cap:
            raise TraceFormatError(self._file, None, f"decompressed size exceeds the cap of {self._cap} "
                                                     f"bytes (a {self._kind} bomb?)")
        b[: len(data)] = data
        if self._tick is not None:
            self._tick(self._owned[-1].tell())
        return len(data)


def _guard(file: str, fn, *args, kind: str = "gzip"):
    """Run a read, turning decompression failures into TraceFormatError (``kind`` names the
    compression in the message)."""
    try:
        return fn(*args)
    except EOFError:
        raise TraceFormatError(file, None, f"truncated {kind} stream (no end-of-stream marker)") from None
    except (gzip.BadGzipFile, zlib.error, lzma.LZMAError) as exc:
        raise TraceFormatError(file, None, f"corrupt {kind} data ({exc})") from None
    except OSError as exc:  # bz2 reports a corrupt stream as OSError("Invalid data stream")
        if kind != "bzip2":
            raise
        raise TraceFormatError(file, None, f"corrupt {kind} data ({exc})") from None


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
