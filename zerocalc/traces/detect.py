"""Which trace format a file holds, from its first bytes (after decompression).

Looks for each format's signature in the head of the file; a pickle is a Flight Recorder dump (the
one a watchdog timeout writes) where its head has that dump's keys, and is refused by name otherwise,
never loaded (:mod:`zerocalc.traces.pickled` reads the dump without running code). A text line is
looked at past a launcher's prefix (:mod:`zerocalc.traces.prefix`) as the
line parsers read it, so a text whose first character is ``[`` (such a prefix, a shell prompt
``[user@host dir]$``, DeepSpeed's ``[2022-06-21 ...] [INFO]``) is JSON only when it opens a JSON
array of objects (``[`` then ``{`` or ``]``).

An nccl-tests output run with ``NCCL_DEBUG=INFO`` opens with its header line and then NCCL's INFO
lines, tens of KB of them before the first row: its header's signatures (:data:`_TESTS_HEADER`) make
it an nccl-tests output wherever they are in the head, before NCCL's lines are looked at. Its header
may also come after more than the head of other output (many ranks' INFO lines printed before rank 0's
header reaches the merged output, a job script's own lines): a head that is NCCL's INFO/WARN lines and
nothing else (no per-call COLL line, which makes an NCCL log, and no header) is only a weak verdict, and
:func:`detect_stream` reads on (:func:`read_on`) until a COLL line or an nccl-tests header says which.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from typing import BinaryIO

from zerocalc.errors import TraceFormatError
from zerocalc.traces.pickled import is_pickle
from zerocalc.traces.prefix import WIDE_SPACES, strip_prefixes
from zerocalc.traces.streams import compression

FORMATS: tuple[str, ...] = ("nccl_log", "kineto", "nccl_tests", "nccl_tests_json", "deepspeed_comms",
                            "flight_recorder")

#: How many leading bytes the detector looks at.
HEAD_BYTES = 1 << 16

_NCCL = re.compile(rb"NCCL INFO (?:\[\d+\] )?[A-Za-z]+: opCount [0-9a-fA-F]+ ")
_NCCL_ANY = re.compile(rb"NCCL (?:INFO|WARN) ")
_PERF_HEADER = re.compile(rb"#\s+size\s+count\s+type\b|^\s*\d+\s+\d+\s+[a-z0-9]+\s+(?:\S+\s+){2,}", re.M)
#: A column header with or without its ``#`` (a paste whose ``#`` markdown ate, a hand-made table).
_PERF_COLUMNS = re.compile(rb"^[^\n]{0,40}?\bsize\s+count\s+type\b[^\n]*\btime\s+algbw\s+busbw\b", re.M)
_PERF_ROW = re.compile(
    rb"^\s*\d+\s+\d+\s+[a-z][a-z0-9]*(?:\s+[a-z]+)?(?:\s+-?\d+)?\s+\d+(?:\.\d+)?\s+\d+(?:\.\d+)?\s", re.M
)
#: What only an nccl-tests output prints where a run's header is (nccl-tests ``src/common.cu``): the
#: ``# nThread T nGpus G minBytes`` line, ``# Using devices``, ``# nccl-tests version`` (2.17+),
#: ``# Collective test starting``, the column header, and a ``<test>_perf`` command line with its options.
#: Any of them in the head wins over NCCL's own lines (``NCCL_DEBUG=INFO`` prints KBs of those before
#: the table; with ``NCCL_DEBUG_SUBSYS=COLL`` a COLL line per call too): the file is the sweep.
_TESTS_HEADER = re.compile(
    rb"^#\s*nThread\s+\d+\s+nGpus\s+\d+\s+minBytes\b|^#\s*Using devices\s*$|^#\s*nccl-tests version\b"
    rb"|^#\s*Collective test starting\b|^#\s+size\s+count\s+type\s+(?:\S+\s+){0,3}time\s+algbw\s+busbw\b"
    rb"|(?<![\w-])[a-z][a-z_]*_perf(?:_mpi)?[ \t]+-[A-Za-z]", re.M)
#: An nccl-tests table pasted as Markdown (:mod:`zerocalc.traces.nccl_tests_markdown`): a header row whose
#: first cells are ``size``, ``count`` and ``type`` and whose later ones name ``time``, ``algbw`` and
#: ``busbw`` (with units or sides: ``Message Size (GB)``, ``Out-of-place time (us)``), over its delimiter row;
#: the pipes at the ends of a row are optional.
_MD_HEADER = re.compile(
    rb"^[ \t]*\|?[^\n|]*\bsize\b[^\n|]*\|[^\n|]*\bcount\b[^\n|]*\|[^\n|]*\btype\b[^\n|]*\|"
    rb"[^\n]*\btime\b[^\n]*\balg ?bw\b[^\n]*\bbus ?bw\b[^\n]*\n[ \t]*\|?[ \t]*:?-", re.M | re.I)
#: NCCL's Inspector plugin (:mod:`zerocalc.traces.nccl_inspector`): JSON objects, one a line, each a
#: ``header`` and a ``coll_perf`` or ``p2p_perf``. Not a trace of the canonical table (:data:`FORMATS`):
#: ``check`` compares its calls with NCCL's model as it does nccl-tests sweeps.
INSPECTOR = "nccl_inspector"
_INSPECTOR = re.compile(rb'"(?:coll|p2p)_perf"\s*:\s*\{\s*"(?:coll|p2p)"\s*:')
_DS = re.compile(rb"comm op: \S+ (?:\| \[Caller Func: [^\]\n]*\] )?\| time \(ms\)"
                 rb"|^Comm\. Op\s+Message Size\s+Count", re.M)


#: How far :func:`read_on` reads past a weak head before it keeps the verdict ``nccl_log``.
READ_ON_BYTES = 256 << 20
#: What any of :data:`_TESTS_HEADER`'s lines holds: a block without any of these is not searched.
_TESTS_HINTS = (b"nThread", b"Using devices", b"nccl-tests version", b"Collective test", b"size", b"_perf")


#: :data:`zerocalc.traces.prefix.WIDE_SPACES` in UTF-8, each one blank to the detector as to Python's
#: ``str.split`` and ``\s``, which the readers use.
_WIDE_SPACES = re.compile(b"|".join(re.escape(c.encode()) for c in WIDE_SPACES))


def _plain_spaces(text: bytes) -> bytes:
    """``text`` with each of :data:`_WIDE_SPACES` made a blank."""
    return _WIDE_SPACES.sub(b" ", text)


def weak(head: bytes, kind: str) -> bool:
    """Whether ``kind`` (:func:`detect_format` of ``head``) rests on NCCL's INFO/WARN lines alone: a
    full head that is an NCCL log by :data:`_NCCL_ANY`, without a per-call COLL line (:data:`_NCCL`)."""
    return kind == "nccl_log" and len(head) >= HEAD_BYTES and _NCCL.search(head) is None


def read_on(blocks: Iterable[bytes]) -> str:
    """The format of a text whose head was :func:`weak`, from its bytes ``blocks`` (the whole text, in
    order, in blocks of any size): ``nccl_tests`` if an nccl-tests header line (:data:`_TESTS_HEADER`)
    comes before the first COLL line, ``nccl_log`` if a COLL line comes first or neither comes within
    :data:`READ_ON_BYTES`."""
    rest = b""
    seen = 0
    for block in blocks:
        seen += len(block)
        cut = block.rfind(b"\n") + 1
        text, rest = rest + block[:cut], (rest + block if cut == 0 else block[cut:])
        said = _said(text) if cut else None
        if said is not None:
            return said
        if seen >= READ_ON_BYTES:
            return "nccl_log"
    return _said(rest) or "nccl_log"


def _said(text: bytes) -> str | None:
    """``nccl_tests`` if whole lines ``text`` hold an nccl-tests header before any COLL line, ``nccl_log``
    if they hold a COLL line first, else ``None``."""
    coll = _NCCL.search(text)
    before = text if coll is None else text[:coll.start()]
    if any(h in before for h in _TESTS_HINTS) and _TESTS_HEADER.search(strip_prefixes(_plain_spaces(before))):
        return "nccl_tests"
    return None if coll is None else "nccl_log"


def detect_stream(stream: BinaryIO, file: str = "<bytes>", block: int = 1 << 20) -> str:
    """:func:`detect_format` of the head of ``stream`` (a readable binary stream at its start, decompressed),
    read on past a :func:`weak` head (:func:`read_on`). Reads the stream."""
    head = stream.read(HEAD_BYTES)
    kind = detect_format(head, file)
    if not weak(head, kind):
        return kind
    return read_on(itertools.chain([head], iter(lambda: stream.read(block), b"")))


#: A JSON array of trace events (or an empty one), as opposed to a text line opening with ``[``.
_JSON_ARRAY = re.compile(rb"\[\s*(?:\{|\]|$)")
def detect_format(head: bytes, file: str = "<bytes>") -> str:
    """Name of the format of a file whose (decompressed) head is ``head``.

    Raises :class:`TraceFormatError` for an empty file, a pickle that is not a Flight Recorder dump, binary
    data or a text that matches no format.
    """
    if not isinstance(head, bytes | bytearray):
        raise TraceFormatError(file, None, "detector needs bytes")
    head = bytes(head[:HEAD_BYTES])
    if not head.strip():
        raise TraceFormatError(file, None, "empty file")
    if is_pickle(head):
        if b"pg_config" in head or b"entries" in head and b"profiling_name" in head:
            return "flight_recorder"  # the dump a watchdog timeout writes, read as data (traces/pickled.py)
        raise TraceFormatError(file, None, "a pickle that is not a Flight Recorder dump (no 'pg_config', "
                                           "'entries' or 'profiling_name' in its head): pickles are read "
                                           "only as those dumps, without running code")
    inner = compression(head)
    if inner is not None:
        raise TraceFormatError(file, None, f"{inner} data inside compressed data")
    if head[257:262] == b"ustar":  # POSIX tar's header magic (pax and GNU tar write it too)
        raise TraceFormatError(file, None, "a tar archive: unpack it first (tar -xf FILE) and give the files "
                                           "or their directory")
    if b"\x00" in head:
        raise TraceFormatError(file, None, "binary data, not a text or JSON trace")
    try:
        text_ok = True
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # a multi-byte character cut at the end of the head is fine
        text_ok = exc.start >= len(head) - 4
    if not text_ok:
        raise TraceFormatError(file, None, "binary data, not a text or JSON trace")
    stripped = head.lstrip()
    if stripped[:1] == b"{" or _JSON_ARRAY.match(stripped):
        if b'"traceEvents"' in head or b'"ph"' in head:
            return "kineto"
        if stripped[:1] == b"{" and b'"header"' in head and _INSPECTOR.search(head):
            return INSPECTOR
        if stripped[:1] == b"{" and b'"entries"' in head and (
                b'"profiling_name"' in head or b'"pg_config"' in head or b'"pg_status"' in head):
            return "flight_recorder"  # PyTorch's Flight Recorder, JSON dump (traces/flight_recorder.py)
        if b'"results"' in head or b'"nccl_version"' in head or b'"experiment_name"' in head:
            return "nccl_tests_json"
        if stripped[:1] == b"[":
            return "kineto"
        raise TraceFormatError(file, None, "JSON that is neither a Chrome trace, an nccl-tests report, a "
                                           "Flight Recorder dump nor an NCCL Inspector log")
    body = strip_prefixes(_plain_spaces(head))
    if _TESTS_HEADER.search(body):
        return "nccl_tests"
    if _NCCL.search(head):
        return "nccl_log"
    head = body
    if _DS.search(head):
        return "deepspeed_comms"
    if (_PERF_ROW.search(head) or b"_perf" in head and _PERF_HEADER.search(head) or _PERF_COLUMNS.search(head)
            or b"|" in head and _MD_HEADER.search(head)):
        return "nccl_tests"
    if _NCCL_ANY.search(head):
        return "nccl_log"  # an NCCL log without COLL lines (yet): parses to no rows
    raise TraceFormatError(file, None, "unrecognised trace format (not an NCCL log, Kineto JSON, "
                                       "nccl-tests output, DeepSpeed comms log, Flight Recorder dump or NCCL "
                                       "Inspector log)")
