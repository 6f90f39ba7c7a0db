"""The lines of an nccl-tests output a paste broke: the rest of a line on the next one.

An output pasted where lines are wrapped at a width (a mail or chat client's, ``fold -s``) is broken between
words: the column header (113 characters since nccl-tests 2.13) before its in-place group, a ``# Rank`` line
before its bus id or inside its GPU's name (``… [0000:18:00] NVIDIA H100`` then ``80GB HBM3``), the ``#
nThread`` line before its options. :class:`Wrapped` takes each such rest into the line before it, as
:func:`zerocalc.traces.nccl_tests.parse` reads; a row broken so is put back together by
:class:`~zerocalc.traces.nccl_tests_rows.RowJoiner`, its pieces being cells. The ``# Rank`` line's device
part (:data:`DEVICE`) and a cut's line of dots (:data:`ELISION`) are defined here, for both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from zerocalc.traces.nccl_tests_rows import Layout, header_tail, parse_header

if TYPE_CHECKING:
    from zerocalc.traces.nccl_tests import _Run, _Runs

#: The rest of a ``# Rank`` line (nccl-tests src/common.cu, "Using devices"): ``on HOST device D
#: [BUSID] NAME``, NAME being the CUDA device name (``cudaDeviceProp.name``); rccl-tests prints it empty
#: where HIP reports no marketing name (``#  Rank  0 Group  0 Pid 2908511 on mi355-gpu-23 device  0
#: [0000:75:00]``, the bundled MI355X sweep under ROCm 7.0.1): the host still counts, the GPU is unnamed.
DEVICE = re.compile(r"(?:\bon\s+(?:(\S+)\s+)?)?device\s+\d+\s+\[([^\]]*)\](?:\s+(\S.*?))?\s*$")
#: A line of dots (or an ellipsis) where a post cut lines out.
ELISION = re.compile(r"^#?\s*(?:\.{3,}|…)\s*$")
#: ``-a`` and ``-G`` from the same line (``agg iters: A``, ``graph: G``; pre-2022 outputs print neither).
_AGG_ITERS = re.compile(r"\bagg iters:\s*(\d+)")
_GRAPH = re.compile(r"\bgraph:\s*(\d+)")
#: The rest of a ``# nThread`` line a wrapped paste broke off: its options' words (nccl-tests src/common.cu).
_OPTIONS_TAIL = re.compile(r"^(?:\d+(?:\((?:factor|bytes)\))?\s+)?"
                           r"(?:step:|warmup|iters:|agg iters:|validation:|graph:|unalign:)")


def options_from(run: _Run, payload: str) -> None:
    """``-a`` and ``-G`` as a ``# nThread`` line (or the rest of it a wrapped paste broke off) prints them."""
    a, gr = _AGG_ITERS.search(payload), _GRAPH.search(payload)
    run.agg_iters = int(a[1]) if a else run.agg_iters
    run.graph = int(gr[1]) if gr else run.graph


@dataclass
class Wrapped:
    """The line before, where the next may be the rest of it: an output pasted where lines are wrapped at
    a width (a mail or chat client's, ``fold -s``) breaks nccl-tests' longest lines between words: the
    column header (113 characters since 2.13) before its in-place group, and a ``# Rank`` line before or
    inside its GPU's name (``… [0000:18:00] NVIDIA H100`` then ``80GB HBM3``). A row broken so is put back
    together by :class:`~zerocalc.traces.nccl_tests_rows.RowJoiner`, its pieces being cells."""

    #: The column header just read (its text and layout), while no other line has come.
    header: tuple[str, Layout] | None = None
    #: The run and rank of the ``# Rank`` line just read, while no other line has come.
    device: tuple[_Run, int] | None = None
    #: The run whose ``# nThread`` line was just read, while no other line has come.
    options: _Run | None = None
    #: The run, rank and text after ``Rank R [Group G] [Pid P]`` of a ``# Rank`` line cut before its
    #: device's bus id, while no other line has come.
    broken: tuple[_Run, int, str] | None = None
    #: The head the line before carried ahead of its payload (a launcher's tag, a quote's ``>``; '' none).
    head: str = ""

    def rest_of_line(self, state: _Runs, line: str, payload: str, lineno: int) -> bool:
        """Whether ``payload`` (``line`` past its launcher's prefix) is the rest of the line before: a
        header's further time columns, the options of a ``# nThread`` line, the rest of a ``# Rank`` line
        (read from ``line`` itself: a wrapped piece carries no prefix, and its bus id's brackets are not
        one), or words of a GPU's name (no head but the line before's: a paste wraps inside its quote or
        tag, while a launcher's own line, ``srun: …`` or ``[host:pid] …`` between two ``# Rank`` lines,
        carries another; no ``#``, no code fence, no colon, no digits-only first word, at most 40
        characters); taken into it."""
        header, device, options, broken = self.header, self.device, self.options, self.broken
        self.header = self.device = self.options = self.broken = None
        stripped = line.strip()
        before, self.head = self.head, stripped[:len(stripped) - len(payload)].strip() \
            if stripped.endswith(payload) else ""
        if broken is not None and not line.lstrip().startswith("#"):
            d = DEVICE.match(f"{broken[2]} {line.strip()}")
            if d:
                broken[0].devices[broken[1]] = (d[1], " ".join((d[3] or "").split()), d[2])
                self.device = (broken[0], broken[1])
                return True
        if options is not None and _OPTIONS_TAIL.match(payload):  # ``iters: 20 agg iters: 1 ... graph: 0``
            options_from(options, payload)
            return True
        if header is not None and header_tail(payload):
            joined = parse_header(f"{header[0]} {payload}", header[1].line)
            if joined is not None and not joined.invalid:
                state.header(joined, header[1].line or lineno)
                self.header = (f"{header[0]} {payload}", joined)
                return True
        words = payload.split()
        if (device is None or self.head not in ("", before) or payload[0] in "#[(`" or ":" in payload
                or "NCCL" in payload or len(payload) > 40 or words[0].isdigit() or ELISION.match(payload)):
            return False
        run, rank = device
        host, gpu, bus = run.devices[rank]
        run.devices[rank] = (host, " ".join(f"{gpu} {payload}".split()), bus)
        return True
