"""Ranks: which rank made each call, and each rank's calls in time order.

A trace that records no rank (NCCL ``COLL`` logs without ``Init COMPLETE`` lines) has its ranks told
apart by process and device (:data:`PROCESS_COLUMNS`); the parts of a log rotated or split by line
count are one run. Works on :class:`~zerocalc.validate.columns.Rows` (codes and numbers taken at the
kept rows), so no copy of the table is made. Sources: NCCL ``misc/debug.cc`` (process prefix) and the
trace formats of §5.
"""

from __future__ import annotations

import numpy as np

from zerocalc.errors import TraceMismatchError
from zerocalc.validate.accounting import _plural
from zerocalc.validate.columns import Rows, first_rows, group_codes, group_ranges, isna

#: Columns that tell one rank apart from another when a trace records none (NCCL debug lines start
#: ``host:pid:tid [dev]``; NCCL's own ``misc/debug.cc``): the process, and the CUDA device within it,
#: since one process may drive several GPUs, one communicator (one rank) each (REFERENCE §7).
PROCESS_COLUMNS: tuple[str, ...] = ("file", "host", "pid", "device")


def _nunique_per(key: np.ndarray, value: np.ndarray, valid: np.ndarray, n_keys: int) -> np.ndarray:
    """Distinct ``value`` per ``key`` (0 … n_keys-1) among the ``valid`` rows."""
    if not valid.any():
        return np.zeros(n_keys, dtype=np.int64)
    pair, _ = group_codes(key[valid], value[valid])
    first = first_rows(pair)
    return np.bincount(key[valid][first], minlength=n_keys)


def _check_one_run(rows: Rows, rank: np.ndarray, known: np.ndarray) -> str:
    """Refuse a rank that appears in several files, unless one process (host:pid) wrote it in each:
    the parts of one log rotated or split by lines; or each file holds profiled steps of its own, one
    after another in time: the windows of one profiler (:func:`_profiling_windows`), said in the
    sentence returned ("" otherwise)."""
    if "file" not in rows.table.columns:
        return ""
    files = rows.codes("file")
    ranks, r_idx = np.unique(rank[known], return_inverse=True)
    n_files = _nunique_per(r_idx, files.codes[known], np.ones(len(r_idx), bool), len(ranks))
    dup = np.flatnonzero(n_files > 1)
    if not len(dup):
        return ""
    if {"host", "pid"} <= set(rows.table.columns):
        host, pid = rows.values("host")[known], rows.values("pid")[known]
        host_na, pid_na = isna(host), isna(pid)
        hosts = _nunique_per(r_idx, host, ~host_na, len(ranks))
        pids = _nunique_per(r_idx, pid, ~pid_na, len(ranks))
        any_na = np.bincount(r_idx, weights=host_na | pid_na, minlength=len(ranks)) > 0
        one_process = (hosts == 1) & (pids == 1) & ~any_na
        dup = dup[~one_process[dup]]
    said = ""
    if len(dup) and rows.has("step") and rows.has("start_s"):
        windows = _profiling_windows(rows, known, r_idx, files.codes[known], dup)
        if windows:
            dup = dup[~np.isin(dup, list(windows))]
            lo, hi = min(windows.values()), max(windows.values())
            said = (f"{_plural(len(windows), 'rank')} in {lo if lo == hi else f'{lo}-{hi}'} files each: the "
                    "windows of one profiler whose schedule repeats (torch.profiler.schedule's repeat), each "
                    "file's steps its own and after the file before in time; read as one trace")
    if len(dup):
        r = dup[0]
        names = sorted({files.names[c] if c >= 0 else "nan" for c in files.codes[known][r_idx == r].tolist()})
        raise TraceMismatchError(
            f"rank {int(ranks[r])} appears in {len(names)} files ({', '.join(names)}): these are several "
            "runs; check one at a time"
        )
    return said


def _profiling_windows(rows: Rows, known: np.ndarray, r_idx: np.ndarray, file: np.ndarray,
                       dup: np.ndarray) -> dict[int, int]:
    """Of the ranks ``dup`` (indices into ``r_idx``'s ranks), those whose files are windows of one
    profiler, with their file counts: every file of the rank marks steps, and ordered by their first
    call, each file's calls and step numbers all come after the one before's. A profiler whose schedule
    repeats writes one file per window (``tensorboard_trace_handler``), its steps numbered on; two runs
    of one script number theirs alike."""
    mine = np.isin(r_idx, dup)
    step, start = rows.num("step")[known][mine], rows.num("start_s")[known][mine]
    pair, n = group_codes(r_idx[mine], file[mine])  # (rank, file)
    span = {"t": group_ranges(pair, n, start), "s": group_ranges(pair, n, step)}
    owner = r_idx[mine][first_rows(pair)]
    out = {}
    for r in dup.tolist():
        at = np.flatnonzero(owner == r)
        at = at[np.argsort(span["t"][0][at], kind="stable")]  # the rank's files by their first call
        (t_lo, t_hi), (s_lo, s_hi) = ((lo[at], hi[at]) for lo, hi in (span["t"], span["s"]))
        if np.isfinite(s_lo).all() and np.isfinite(t_lo).all() and (t_hi[:-1] < t_lo[1:]).all() and (
                s_hi[:-1] < s_lo[1:]).all():
            out[r] = len(at)
    return out


def _ranks_by_process(rows: Rows, rank: np.ndarray) -> tuple[np.ndarray, str]:
    """Rows without a rank get one per process and device (file, host, pid and device where the table
    has them).

    NCCL debug logs without ``Init COMPLETE`` lines (``NCCL_DEBUG_SUBSYS=COLL``) record no rank, and
    one file often holds the lines of every process: merged, they would count as one rank sending
    the traffic of all. Returns the ranks and a sentence saying how the ranks were told apart
    ("" when every row has a rank). Known ranks keep their numbers; processes are numbered after them.
    """
    na = np.isnan(rank)
    if not na.any():
        return rank.astype(np.int64), ""
    every = bool(na.all())  # the common case (no rank anywhere): no row to leave out

    def at_na(a: np.ndarray) -> np.ndarray:
        return a if every else a[na]

    cols = [c for c in PROCESS_COLUMNS if rows.has(c) and at_na(rows.notna(c)).any()]
    if {"host", "pid"} <= set(cols) and at_na(rows.notna("host")).all() and at_na(rows.notna("pid")).all():
        # a process named by host and pid is one process in every file holding its lines: the
        # parts of a log rotated or split by line count are one run, not one run per part
        cols = [c for c in cols if c != "file"]
    vals = {c: at_na(rows.values(c)) for c in cols}
    proc = None
    if "device" in cols:  # named only when some process drives several devices
        by = [c for c in cols if c != "device"]
        if by:
            key, k = group_codes(*(vals[c] for c in by))
            dev = vals["device"]
            many = _nunique_per(key, dev, ~isna(dev), k).max() > 1
        if not by or not many:
            cols = by
            proc = (key, k) if by else None
    proc, k = proc or group_codes(*(vals[c] for c in cols))
    known = rank[~na]
    base = int(known.max()) + 1 if len(known) else 0
    out = np.empty(len(rank), dtype=np.int64)
    out[~na] = known.astype(np.int64)
    out[na] = base + proc
    first, last = base, base + k - 1
    span = f"rank {first}" if k == 1 else f"ranks {first}–{last}"
    return out, (f"the trace records no rank for {_plural(k, 'process', 'processes')}: told apart by process "
                 f"({' + '.join(cols)}) and numbered {span} in order of appearance")


def _in_order(keys: list[np.ndarray], within: np.ndarray | None) -> bool:
    """Whether consecutive rows never go down in the tuple of ``keys`` (NaN after every number), among
    the pairs ``within`` marks (None: all)."""
    undecided = np.ones(len(keys[0]) - 1, bool) if within is None else within.copy()
    for k in keys:
        a, b = k[:-1], k[1:]
        a_nan, b_nan = np.isnan(a), np.isnan(b)
        if (undecided & ~b_nan & (a_nan | (a > b))).any():  # a pair out of order
            return False
        undecided &= ~(~a_nan & (b_nan | (a < b)))  # pairs already in order stay so
    return True


def _lexsort_nan_last(keys: list[np.ndarray]) -> np.ndarray:
    """Stable order of rows by ``keys`` (first key first), NaN after every number: the order of
    ``DataFrame.sort_values(kind="stable", na_position="last")``.

    The first key (the rank, small integers) is sorted by radix; the rest are only checked to be in
    order already (over the whole trace, as a log's own line order is; else within each rank), and
    sorted when they are not.
    """
    first = keys[0]
    lo = int(first.min()) if len(first) else 0
    span = int(first.max()) - lo if len(first) else 0
    small = first - lo
    order = np.argsort(small.astype(np.uint16) if span < 2**16 else small, kind="stable")
    # a key missing everywhere (a read-only view of one NaN) decides nothing
    rest = [np.asarray(k, dtype=float) for k in keys[1:] if k.strides != (0,) or not np.isnan(k[:1]).all()]
    if not rest or len(first) < 2 or _in_order(rest, None):
        return order
    ranked = first[order]
    if _in_order([k[order] for k in rest], ranked[1:] == ranked[:-1]):
        return order
    cols = []  # np.lexsort: the last key first; each key's NaN flag before its value
    for k in reversed([np.asarray(first, dtype=float), *rest]):
        cols += [np.where(np.isnan(k), 0.0, k), np.isnan(k)]
    return np.lexsort(cols)


def _order_calls(rows: Rows, rank: np.ndarray) -> np.ndarray:
    """Each rank's calls in time order, else in the order of its files (the parts of a rotated
    log, as given) and of their lines: the permutation of the rows."""
    keys = [rank]
    if rows.has("start_s"):
        keys.append(rows.num("start_s"))
    if rows.has("source_line"):
        if rows.has("file"):
            files = rows.codes("file")
            if len(files.present()) > 1:
                part, _ = group_codes(files.codes)  # parts numbered in order of appearance
                keys.append(part.astype(float))
        keys.append(rows.num("source_line"))
    return _lexsort_nan_last(keys)


def assign_ranks(rows: Rows) -> tuple[Rows, np.ndarray, str, str]:
    """The calls ordered by rank and time, each one's rank, how ranks were told apart, and a sentence
    where a rank's calls come from the windows of one profiler ("" otherwise).

    Raises :class:`TraceMismatchError` when one rank appears in several files (several runs mixed), but
    for the windows of one profiler (:func:`_check_one_run`).
    """
    rank = rows.num("rank")
    known = ~np.isnan(rank)
    windows = _check_one_run(rows, rank, known) if known.any() else ""
    rank, ranks_how = _ranks_by_process(rows, rank)
    order = _order_calls(rows, rank)
    return rows.subset(order), rank[order], ranks_how, windows
