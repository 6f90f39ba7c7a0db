"""A long NCCL log read for ``check`` in segments: the sequence read of each run of about
:data:`SEGMENT_BYTES` of the log compacted as soon as it is read, so that what a read holds does not
grow with the log's length.

A segment is the chunk scans of consecutive parts of one log joined (:func:`~.nccl_fold.join`) and
compacted (:func:`compact`): in each process's calls of the segment, whole blocks of the run of equal
blocks that ends them are dropped, remembered as :attr:`~.nccl_fold.Calls.gaps` (where, the period,
how many blocks). The segments of a log are then joined in file order (:func:`join_segments`) and
folded once (:func:`~.nccl_fold.fold`), which puts the dropped calls back as codes, one process at a
time, and folds each process's whole sequence: the answer is the one a read of every call gives.

A segment keeps more than the fold does, so that what the fold keeps is held: the calls before the
run, its first two blocks, the last :data:`~.nccl_fold.KEEP` + 2 blocks (the segment may end the
log), and every block holding the first call of some distinct call in the segment, each kept block
with its neighbours (the segment's blocks end where the segment does, the fold's where the log does:
one of the fold's blocks overlaps two of the segment's). Where the fold still finds a call it keeps
dropped (a process whose period changes from segment to segment), it says so and the log is read
again in full (:func:`zerocalc.traces.reader.read_folded`).
"""

from __future__ import annotations

from collections import defaultdict
from itertools import count
from typing import Any, BinaryIO

import numpy as np

from zerocalc.errors import TraceFormatError
from zerocalc.traces.nccl_fold import KEEP, Calls, _repeating_end, join, line_offsets
from zerocalc.traces.nccl_lines import _FACTORS
from zerocalc.traces.nccl_scan import CALL, _distinct_rows, _pairs

#: Bytes of log read (of whole chunks) before a reading process compacts what it read into a segment;
#: 0: every call held, nothing compacted (the read before this module, that a fold which needs calls
#: dropped while reading falls back to).
SEGMENT_BYTES = 128 << 20


def segment(scans: list[Any], file: str, compacted: bool = True) -> Any:
    """The scans of consecutive chunks of a log (in file order) as one segment: compacted
    (:func:`compact`) unless ``compacted`` is false, or in strict mode the first chunk's error (its
    line counted from the segment's start)."""
    lines = 0
    for s in scans:
        if isinstance(s, tuple):
            line, reason = s
            return (line + lines if line is not None else None, reason)
        lines += s.lines
    calls = join(scans, file)
    return compact(calls) if compacted else calls


def compact(calls: Calls, keep: int = KEEP) -> Calls:
    """The calls of one segment with whole blocks dropped from each process's repeating end (see the
    module's docstring), the drops in :attr:`~.nccl_fold.Calls.gaps`; the calls whole when there is a
    TUNING line (the fold then keeps every call) or nothing to drop."""
    if calls.tunings or len(calls.gaps) or not len(calls):
        return calls
    d = calls.distinct
    h, p = CALL.index("host"), CALL.index("pid")
    no_host = np.array([v is None for v in calls.tables["host"]], bool)
    has = ~no_host[d[:, h]] & (d[:, p] >= 0)
    proc = np.full(len(d), -1, np.int64)
    if has.any():
        span = int(d[:, p].max()) + 1
        proc[has] = np.unique(d[has, h] * span + d[has, p], return_inverse=True)[1].reshape(-1)
    owner = proc[calls.code]
    owner = owner.astype(np.int16) if len(d) < 2**15 else owner
    order = np.argsort(owner, kind="stable")  # radix, on 16 bits
    ends = np.cumsum(np.bincount(owner + 1, minlength=int(proc.max()) + 2))
    drop = np.zeros(len(owner), bool)
    gaps = []
    for lo, hi in zip(ends[:-1].tolist(), ends[1:].tolist(), strict=True):  # calls with a process
        seg = order[lo:hi]
        found = _droppable(calls.code[seg], keep)
        if found is None:
            continue
        dropped, after, per, n = found
        drop[seg[dropped]] = True
        gaps.append(np.stack([seg[after], np.full(len(after), per), n], axis=1))
    if not gaps:
        return calls
    position = np.cumsum(~drop) - 1
    kept = np.flatnonzero(~drop)
    gaps = np.concatenate(gaps).astype(np.int64)
    gaps[:, 0] = position[gaps[:, 0]]
    gaps = gaps[np.argsort(gaps[:, 0], kind="stable")]
    return Calls(file=calls.file, lines=calls.lines, tables=calls.tables, distinct=calls.distinct,
                 code=calls.code[kept], line=calls.line[kept], opcount=calls.opcount[kept],
                 inits=calls.inits, tunings=calls.tunings, skipped=calls.skipped,
                 processes=calls.processes, gaps=gaps)


def _droppable(seq: np.ndarray, keep: int) -> tuple[np.ndarray, np.ndarray, int, np.ndarray] | None:
    """One process's calls in a segment: (the positions dropped, the position of the call after each
    run of dropped blocks, the period, the blocks in each run), or None when nothing is dropped."""
    m = len(seq)
    per, reps = _repeating_end(seq, keep + 2)
    if per == 0:
        return None
    start = m - per * reps
    keeps = np.zeros(reps, bool)
    keeps[:2] = True
    keeps[reps - keep - 1 :] = True
    first = np.unique(seq[start:], return_index=True)[1]
    keeps[first // per] = True
    wide = keeps.copy()  # each kept block with its neighbours
    wide[1:] |= keeps[:-1]
    wide[:-1] |= keeps[1:]
    if wide.all():
        return None
    edge = np.diff(wide.astype(np.int8))
    run_start = np.flatnonzero(edge == -1) + 1  # first block of each run dropped
    run_end = np.flatnonzero(edge == 1) + 1  # the kept block after it
    dropped = start + np.flatnonzero(np.repeat(~wide, per))
    return dropped, start + run_end * per, per, run_end - run_start


def join_segments(parts: list[Calls], file: str) -> Calls:
    """The segments of one log (:class:`~.nccl_fold.Calls` of consecutive parts, in file order) joined,
    as :func:`~.nccl_fold.join` joins chunk scans: code tables merged, each segment's distinct calls
    recoded into the log's, lines counted from the log's start."""
    if len(parts) == 1:
        return parts[0]
    offsets, offset, skipped = line_offsets(parts)
    full = [(i, s) for i, s in enumerate(parts) if len(s.distinct)]
    names = list(_FACTORS)
    tables: dict[str, list] = {}
    recoded = {i: s.distinct.copy() for i, s in full}
    hosts, pids = [], []
    for name in names:
        merged: defaultdict = defaultdict(count().__next__)
        col = CALL.index(name)
        for i, s in full:
            new = np.array([merged[v] for v in s.tables[name]], dtype=np.int64)
            recoded[i][:, col] = new[s.distinct[:, col]]
            if name == "host":
                hosts.append(new[s.processes[0]])
                pids.append(s.processes[1])
        tables[name] = list(merged)
    if full:
        distinct, inverse = _distinct_rows(np.concatenate([recoded[i] for i, _ in full]))
        processes = _pairs(np.concatenate(hosts), np.concatenate(pids))
    else:
        distinct, inverse = np.zeros((0, len(CALL)), np.int64), np.zeros(0, np.int64)
        processes = Calls.processes
        tables = {name: [] for name in names}
    code, line, opcount, gaps = [], [], [], []
    at = held = 0
    for i, s in full:
        k = len(s.distinct)
        code.append(inverse[at : at + k].astype(np.int32)[s.code])
        at += k
        line.append(s.line.astype(np.int64) + offsets[i])
        opcount.append(s.opcount)
        gaps.append(s.gaps + (held, 0, 0))
        held += len(s.code)
    line = np.concatenate(line) if line else np.zeros(0, np.int64)
    opcount = np.concatenate(opcount) if opcount else np.zeros(0, np.int64)
    top = int(opcount.max()) if len(opcount) else 0
    return Calls(
        file=file, lines=offset, tables=tables, distinct=distinct,
        code=np.concatenate(code) if code else np.zeros(0, np.int32),
        line=line.astype(np.int32 if offset < 2**31 else np.int64),
        opcount=opcount.astype(np.int32 if top < 2**31 else np.int64),
        inits=[i for s in parts for i in s.inits],
        tunings=[(ln + off, *rest) for off, s in zip(offsets, parts, strict=True) for ln, *rest in s.tunings],
        skipped=skipped, processes=processes,
        gaps=np.concatenate(gaps) if gaps else np.zeros((0, 3), np.int64))


def read(stream: BinaryIO, file: str, strict: bool = False) -> Calls:
    """The sequence read of a whole log from a stream (a log too small to split, a gzip log, one of
    several files): read in segments of about :data:`SEGMENT_BYTES`, each cut after a line's end and
    compacted when another follows (a log of one segment is held whole), and joined."""
    from zerocalc.traces import nccl_log

    cut = _Cut(stream, SEGMENT_BYTES or float("inf"))
    parts: list[Calls] = []
    lines = 0
    while True:
        try:
            scan = nccl_log.scan(cut, file, strict=strict, sequence=True)
        except TraceFormatError as exc:  # its line counted from the segment's start
            raise TraceFormatError(file, exc.line + lines if exc.line is not None else None,
                                   exc.reason) from None
        lines += scan.lines
        calls = join([scan], file)
        if cut.eof:
            parts.append(calls)
            break
        parts.append(compact(calls))
        cut.next_segment()
    return join_segments(parts, file)


class _Cut:
    """A byte stream seen as segments: each ends (reads give ``b""``) at the first line end after
    ``limit`` bytes of it; :meth:`next_segment` starts the next one, where the last ended."""

    def __init__(self, stream: BinaryIO, limit: float) -> None:
        self.stream, self.limit = stream, limit
        self.pending, self.given, self.stop, self.eof = b"", 0, False, False

    def next_segment(self) -> None:
        self.given, self.stop = 0, False

    def read(self, n: int = -1) -> bytes:
        if self.stop:
            return b""
        data, self.pending = self.pending or self.stream.read(n), b""
        if not data:
            self.eof = self.stop = True
            return b""
        if self.given + len(data) >= self.limit:
            at = data.find(b"\n", max(0, int(self.limit) - self.given - 1))
            if at >= 0:
                data, self.pending = data[: at + 1], data[at + 1 :]
                self.stop = True
        self.given += len(data)
        return data
