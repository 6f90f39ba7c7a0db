"""An NCCL log read for ``check``: each process's call sequence with its repeated steps folded.

NCCL's COLL lines carry no times: a training log is a few one-off calls, then the same step repeated
thousands of times, and the check needs each rank's sequence of calls, not every repetition. A
sequence read (:attr:`~zerocalc.traces.nccl_scan.Scan.sequence`) keeps per call an int32 code into
the log's distinct calls, its line and its opCount (:class:`Calls`); :func:`fold` finds where each
process's sequence (its calls in the order the check orders them: files as given, then line) ends in
``r`` repetitions of one block of ``p`` calls and drops whole blocks from inside that run, keeping
the one-off calls before it, the run's first block, every block that holds the first call of some
distinct call in some file, and the last :data:`KEEP` blocks; :func:`materialise` builds the canonical
table of the kept calls, row for row what a full read gives for them, and its file metadata from every
call. The last kept block of a process stands for itself and the blocks dropped: :class:`Folded`
gives each of its calls that weight, which :func:`zerocalc.validate.measure.measure` uses for every sum
and count, and with which it corrects the number of steps (or asks for a full read when the folded
table does not show the same steps).

A long log is read in segments that drop repeated blocks as they are read
(:mod:`~zerocalc.traces.nccl_segments`, :attr:`Calls.gaps`); :func:`fold` puts them back as codes,
one process at a time, so it folds each process's whole sequence all the same.

The search is linear per candidate period: the candidates are the distances from a process's last
call back to earlier calls of the same code, shortest first, each checked on its last two blocks
and then on the whole sequence by one vectorised comparison.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import count
from typing import Any

import numpy as np

from zerocalc.traces.nccl_lines import _FACTORS, _KEY
from zerocalc.traces.nccl_scan import CALL, Scan, _distinct_rows, _pairs, _small
from zerocalc.traces.nccl_table import finish
from zerocalc.traces.records import ParseResult, SkipLog

#: Repetitions of a process's block kept at the end of its run (besides its first block): enough for
#: the step search, which needs two, and for the micro-batch search inside the steps to see the same
#: structure as in the whole log.
KEEP = 8
#: Candidate periods verified on the whole sequence, at most, per process.
MAX_TRIED = 16


@dataclass
class Calls:
    """A sequence read of one NCCL log: its distinct calls, and per call a code into them, its line
    (from 1) and its opCount, with the log's Init and TUNING lines and skip log."""

    file: str
    lines: int
    tables: dict[str, list]
    #: One row per distinct call, its fields (:data:`~zerocalc.traces.nccl_scan.CALL`) as codes into
    #: ``tables`` (pid and count as numbers).
    distinct: np.ndarray
    code: np.ndarray
    line: np.ndarray
    opcount: np.ndarray
    inits: list[tuple[Any, ...]] = field(default_factory=list)
    tunings: list[tuple[Any, ...]] = field(default_factory=list)
    skipped: SkipLog = field(default_factory=SkipLog)
    processes: tuple[np.ndarray, np.ndarray] = (np.zeros(0, np.int32), np.zeros(0, np.int64))
    #: Calls dropped while the log was read (:func:`zerocalc.traces.nccl_segments.compact`), one row per
    #: run of them: (the index of the call held just after the run, its process's period ``p``, blocks
    #: ``n``): ``n`` × ``p`` calls of that process, each block the codes of the ``p`` calls of that
    #: process held just before the run. None dropped: no rows.
    gaps: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), np.int64))

    def __len__(self) -> int:
        """The calls held (``code``, ``line``, ``opcount``)."""
        return len(self.code)

    @property
    def total(self) -> int:
        """The calls of the log: those held and those dropped while reading."""
        return len(self.code) + int((self.gaps[:, 1] * self.gaps[:, 2]).sum())


def line_offsets(parts: list) -> tuple[list[int], int, SkipLog]:
    """Of consecutive parts of one log (chunk scans or segments, each with ``lines`` and ``skipped``):
    each part's first line counted from the log's start, the log's lines, and the parts' skip logs
    merged with their example lines counted from the log's start."""
    offsets, offset = [], 0
    skipped = SkipLog()
    for s in parts:
        offsets.append(offset)
        examples = [(f, ln + offset if ln is not None else None, r) for f, ln, r in s.skipped.examples]
        skipped.merge(SkipLog(s.skipped.count, s.skipped.by_reason, examples))
        offset += s.lines
    return offsets, offset, skipped


def join(scans: list[Scan], file: str) -> Calls:
    """The sequence scans of consecutive parts of one log joined: code tables merged, each part's
    distinct calls recoded into the log's, lines counted from the log's start."""
    offsets, offset, skipped = line_offsets(scans)
    parts = [(off, s) for off, s in zip(offsets, scans, strict=True) if s.columns]
    tables: dict[str, list] = {}
    columns: dict[str, list[np.ndarray]] = {name: [] for name in CALL}
    hosts, pids = [], []
    for name in _FACTORS:
        merged: defaultdict = defaultdict(count().__next__)
        for _, s in parts:
            new = np.array([merged[v] for v in s.tables[name]], dtype=np.int64)
            columns[name].append(new[s.columns[name][0]])
            if name == "host":
                hosts.append(new[s.processes[0]])
                pids.append(s.processes[1])
        tables[name] = list(merged)
    for name in ("pid", "count"):
        columns[name] = [s.columns[name][0].astype(np.int64) for _, s in parts]
    if parts:
        keys = np.stack([np.concatenate(columns[name]) for name in CALL], axis=1)
        distinct, inverse = _distinct_rows(keys)
        processes = _pairs(np.concatenate(hosts), np.concatenate(pids))
    else:
        distinct, inverse = np.zeros((0, len(CALL)), np.int64), np.zeros(0, np.int64)
        processes = Calls.processes
    # each field's blocks copied into one array, and released, block by block (one copy at a time)
    n = sum(len(b) for _, s in parts for b in s.seq["code"])
    top = max((int(b.max()) for _, s in parts for b in s.seq["opcount"] if len(b)), default=0)
    code = np.empty(n, np.int32)
    line = np.empty(n, np.int32 if offset < 2**31 else np.int64)
    opcount = np.empty(n, np.int32 if top < 2**31 else np.int64)
    at = pos = 0
    for off, s in parts:
        k = len(s.columns["count"][0])
        recode = inverse[at : at + k].astype(np.int32)
        at += k
        seq, s.seq = s.seq, {}
        for c, ln, oc in zip(seq["code"], seq["line"], seq["opcount"], strict=True):
            end = pos + len(c)
            code[pos:end], line[pos:end], opcount[pos:end] = recode[c], ln, oc
            line[pos:end] += off
            pos = end
        del seq
    return Calls(
        file=file, lines=offset, tables=tables, distinct=distinct, code=code, line=line, opcount=opcount,
        inits=[i for s in scans for i in s.inits],
        tunings=[(ln + off, *rest) for off, s in zip(offsets, scans, strict=True) for ln, *rest in s.tunings],
        skipped=skipped, processes=processes)


def materialise(calls: Calls, kept: np.ndarray | None = None) -> ParseResult:
    """The canonical table of the calls ``kept`` (indices in line order; None: every call), each row
    what a full read of the log gives for that call; the file's metadata (rank, world size,
    processes) from every call of the log."""
    rows = calls.distinct[calls.code if kept is None else calls.code[kept]]
    s = Scan()
    s.lines, s.tables, s.processes, s.inits = calls.lines, calls.tables, calls.processes, calls.inits
    s.skipped = calls.skipped
    s.tunings = [(ln, *rest) for ln, *rest in calls.tunings] if kept is None else []
    if len(rows):
        s.columns = {name: [_small(rows[:, i]) if name != "count" else rows[:, i]]
                     for i, name in enumerate(CALL)}
        s.columns["line"] = [calls.line if kept is None else calls.line[kept]]
        s.columns["opcount"] = [calls.opcount if kept is None else calls.opcount[kept]]
    else:
        s.columns = {}
    del rows
    res = finish([s], calls.file)
    if kept is not None:
        res.meta = _meta(calls)
    return res


def _meta(calls: Calls) -> dict[str, Any]:
    """The file's metadata as a full read gives it: from one row per distinct call (an aggregated
    table of the log, whose ranks, group sizes and processes are those of every call)."""
    s = Scan(aggregate=True)
    s.lines, s.tables, s.processes, s.inits = calls.lines, calls.tables, calls.processes, calls.inits
    d = calls.distinct
    if len(d):
        s.columns = {name: [_small(d[:, CALL.index(name)])] for name in _KEY}
        s.columns.update(pid=[d[:, CALL.index("pid")]], count=[d[:, CALL.index("count")]],
                         calls=[np.ones(len(d), np.int64)])
    else:
        s.columns = {}
    return finish([s], calls.file).meta


@dataclass(frozen=True)
class Folded:
    """What :func:`fold` dropped: the kept calls of each log (indices in line order) and, among them
    (as positions in the table of the kept calls of every log, in file order), those that stand for
    dropped blocks, with their weight (1 + the blocks their process dropped)."""

    kept: tuple[np.ndarray, ...]
    weighted: np.ndarray
    weight: np.ndarray
    #: Calls in all, and calls kept.
    total: int
    rows: int
    #: The trace set of every call, built from the sequences read (no second read of the files).
    full: Callable[[], Any] | None = field(default=None, compare=False, repr=False)

    def weights(self) -> np.ndarray:
        """Each kept call's weight (1 but where it stands for dropped blocks)."""
        w = np.ones(self.rows, np.int64)
        w[self.weighted] = self.weight
        return w


def fold(logs: list[Calls], keep: int = KEEP) -> Folded | None:
    """Fold each process's repeated steps across the logs (the parts of one run, in the order given);
    None when nothing repeats enough to fold. A process is a (host, pid) pair: calls without one are
    kept whole.

    Calls dropped while reading (:attr:`Calls.gaps`) are put back, as codes, one process at a time
    (:func:`_expand`), so each process is folded on its whole sequence, as if nothing had been dropped:
    the same calls kept, the same weights. None too when that fold keeps a call dropped while reading,
    or folds nothing of a process that lost calls while reading: the caller then reads the logs again
    with every call held (:func:`zerocalc.traces.reader.read_folded`)."""
    if any(c.tunings for c in logs):  # a TUNING line names the call before it: keep every call
        return None
    if not logs:
        return None
    gcode, proc, nprocs = _global_codes(logs)
    codes = np.concatenate([g[c.code] for g, c in zip(gcode, logs, strict=True)])
    owner = np.concatenate([p[c.code] for p, c in zip(proc, logs, strict=True)])
    starts = np.cumsum([0] + [len(c) for c in logs])  # each log's first call
    gaps = np.concatenate([c.gaps + (start, 0, 0) for c, start in zip(logs, starts.tolist(), strict=False)])
    gaps = gaps[np.argsort(gaps[:, 0], kind="stable")]
    gap_owner = owner[gaps[:, 0]]
    owner = owner.astype(np.int16) if nprocs < 2**15 else owner.astype(np.int32)
    order = np.argsort(owner, kind="stable")  # radix, on 16 bits
    order = order.astype(np.int32) if len(order) < 2**31 else order
    ends = np.cumsum(np.bincount(owner + 1, minlength=nprocs + 1))  # calls without a process first
    gap_order = np.argsort(gap_owner, kind="stable")
    gap_ends = np.cumsum(np.bincount(gap_owner + 1, minlength=nprocs + 1))
    if gap_ends[0]:  # not reached: a call without a process is never dropped while reading
        return None
    del owner
    drop = np.zeros(len(codes), bool)
    weighted, weight = [], []
    bounds = zip(ends[:-1].tolist(), ends[1:].tolist(), gap_ends[:-1].tolist(), gap_ends[1:].tolist(),
                 strict=True)
    for lo, hi, glo, ghi in bounds:
        seg = order[lo:hi]
        if not len(seg):
            continue
        found = _fold_process(codes[seg], seg, starts, gaps[gap_order[glo:ghi]], keep)
        if found is _REREAD:
            return None
        if found is None:
            continue
        dropped, last, w = found
        drop[seg[dropped]] = True
        weighted.append(seg[last])
        weight.append(np.full(len(last), w, np.int64))
    del order, codes
    if not weighted:
        return None
    position = np.cumsum(~drop, dtype=np.int32 if len(drop) < 2**31 else np.int64) - 1  # in the kept table
    kept, at = [], 0
    for c in logs:
        kept.append(np.flatnonzero(~drop[at : at + len(c)]))
        at += len(c)
    w_at = np.concatenate(weighted)
    return Folded(kept=tuple(kept), weighted=position[w_at], weight=np.concatenate(weight),
                  total=sum(c.total for c in logs), rows=int((~drop).sum()))


def _global_codes(logs: list[Calls]) -> tuple[list[np.ndarray], list[np.ndarray], int]:
    """Per log, each distinct call's code among the distinct calls of every log (its fields as values)
    and its process's index (-1 without a host or pid); and the number of processes."""
    gcode, proc = [], []
    calls_of: dict[tuple, int] = {}
    procs: dict[tuple, int] = {}
    h, p = CALL.index("host"), CALL.index("pid")
    for c in logs:
        ids = np.empty(len(c.distinct), np.int32)
        pr = np.empty(len(c.distinct), np.int32)
        for j, row in enumerate(c.distinct.tolist()):
            values = tuple(c.tables[name][v] if name in c.tables else v
                           for name, v in zip(CALL, row, strict=True))
            ids[j] = calls_of.setdefault(values, len(calls_of))
            host, pid = c.tables["host"][row[h]], row[p]
            pr[j] = -1 if host is None or pid < 0 else procs.setdefault((host, pid), len(procs))
        gcode.append(ids)
        proc.append(pr)
    return gcode, proc, len(procs)


#: :func:`_fold_process`'s answer when the logs must be read again with every call held.
_REREAD = object()


def _fold_process(codes: np.ndarray, seg: np.ndarray, starts: np.ndarray, g: np.ndarray, keep: int):
    """One process's fold: its held calls' codes, their indices ``seg`` among all held calls, each
    log's first held call ``starts`` and the process's calls dropped while reading ``g`` (rows of
    :attr:`Calls.gaps`, held-call index counted over every log). Returns (the positions in ``seg``
    dropped, those of the last block, the last block's weight), None when nothing folds, or
    :data:`_REREAD` when the fold needs a call dropped while reading."""
    part = (np.searchsorted(starts, seg, side="right") - 1).astype(np.int32)
    seq, part, held = _expand(codes, part, np.searchsorted(seg, g[:, 0]), g[:, 1], g[:, 2])
    found = _fold_one(seq, part, keep)
    if found is None:
        return _REREAD if len(g) else None  # calls dropped while reading that this fold keeps
    dropped, last = found
    if not len(g):
        return dropped, last, 1 + len(dropped) // len(last)
    kept = np.ones(len(seq), bool)
    kept[dropped] = False
    if (held[kept] < 0).any():  # a call kept here was dropped while reading
        return _REREAD
    per, n_dropped = len(last), len(dropped)
    dropped = held[dropped]
    return dropped[dropped >= 0], held[last], 1 + n_dropped // per


def _expand(seq: np.ndarray, part: np.ndarray, at: np.ndarray, per: np.ndarray, n: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """One process's held calls (codes, each call's log) with the calls dropped while reading put
    back: before held call ``at[i]``, ``n[i]`` copies of the ``per[i]`` held calls before it (in the
    log of the held call). Returns the codes, logs and, for each call, its index among the held
    calls (-1: dropped while reading; None when nothing was dropped)."""
    if not len(at):
        return seq, part, None
    pieces: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    index = np.arange(len(seq), dtype=np.int32 if len(seq) < 2**31 else np.int64)
    prev = 0
    for j, p, k in zip(at.tolist(), per.tolist(), n.tolist(), strict=True):
        pieces.append((seq[prev:j], part[prev:j], index[prev:j]))
        pieces.append((np.tile(seq[j - p : j], k), np.full(p * k, part[j], part.dtype),
                       np.full(p * k, -1, index.dtype)))
        prev = j
    pieces.append((seq[prev:], part[prev:], index[prev:]))
    return tuple(np.concatenate(x) for x in zip(*pieces, strict=True))  # type: ignore[return-value]


def _fold_one(seq: np.ndarray, part: np.ndarray, keep: int) -> tuple[np.ndarray, np.ndarray] | None:
    """One process's sequence (codes, and each call's log): (the positions dropped, the positions of
    the last block), or None when its repeating end is too short to drop a block."""
    m = len(seq)
    per, reps = _repeating_end(seq, keep)
    if per == 0:
        return None
    start = m - per * reps
    block = (np.arange(start, m) - start) // per
    keeps = np.zeros(reps, bool)
    keeps[0] = True
    keeps[reps - keep:] = True
    # every block holding the first call of a distinct call in a log: each log keeps what it holds
    key = part[start:].astype(np.int64) * (int(seq.max()) + 1) + seq[start:]
    first = np.unique(key, return_index=True)[1]
    keeps[block[first]] = True
    if keeps.all():
        return None
    dropped = start + np.flatnonzero(~keeps[block])
    return dropped, np.arange(m - per, m)


def _repeating_end(seq: np.ndarray, keep: int) -> tuple[int, int]:
    """(period, repetitions) of the run of equal blocks that ends ``seq`` and covers the most calls,
    among the shortest candidate periods (:data:`MAX_TRIED`); (0, 0) when no run has more than
    ``keep`` + 1 blocks."""
    m = len(seq)
    limit = m // (keep + 2)
    if limit < 1:
        return 0, 0
    lo = max(0, m - 1 - limit)
    cands = (m - 1) - (lo + np.flatnonzero(seq[lo : m - 1] == seq[-1]))[::-1]  # distances, shortest first
    best, tried = (0, 0), 0
    for p in cands.tolist():
        k = min(p, 64)
        if not (np.array_equal(seq[m - k :], seq[m - p - k : m - p])
                and np.array_equal(seq[m - p :], seq[m - 2 * p : m - p])):
            continue
        differ = np.flatnonzero(seq[p:] != seq[:-p])
        run = m - (int(differ[-1]) + 1 if len(differ) else 0)  # the p-periodic end, in calls
        reps = run // p
        if reps > keep + 1 and reps * p > best[0] * best[1]:
            best = (p, reps)
        tried += 1
        if run >= m // 2 or tried >= MAX_TRIED:
            break
    return best
