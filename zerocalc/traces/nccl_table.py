"""The table of an NCCL log, assembled once from the scans of its consecutive parts
(:func:`finish`): code tables merged, element counts scaled by group size, ranks from Init lines,
compact columns (schema.CANONICAL_COLUMNS), TUNING lines given to their calls, and the log's
metadata.
"""

from __future__ import annotations

import operator
from collections import defaultdict
from itertools import count
from typing import Any

import numpy as np

from zerocalc.traces.nccl_lines import _FACTORS, _NA, FORMAT, _dtype, _int, _redop
from zerocalc.traces.nccl_scan import Scan, _pairs, _small
from zerocalc.traces.records import ParseResult, SkipLog
from zerocalc.traces.schema import DTYPE_BYTES, NCCL_COLL_OPS


def finish(scans: list[Scan], file: str) -> ParseResult:
    """Join the scans of consecutive parts of one log into its table, metadata and skip log."""
    res = ParseResult(meta={"format": FORMAT, "backend": "nccl"})
    offsets = _offsets(scans, res)
    t = _Table(scans, offsets)
    n = len(t.count)
    rank, group_size = t.ints("globalrank"), t.ints("nranks")
    nelems = _nelems(t, group_size)
    inits = [i for s in scans for i in s.inits]
    world_n = comm_rank = None
    if inits:  # after the sizes: those use the line's own nranks only
        rank, comm_rank, group_size, world_n = _init_ranks(t, inits, rank, group_size)
    columns = _columns(t, file, rank, group_size, nelems)
    if comm_rank is not None:  # the rank within the call's own communicator (the checker reads the layout)
        columns["comm_rank"] = _nullable(comm_rank, comm_rank < 0)
    if t.calls is None:  # a row per call: each TUNING line gives its call algorithm and protocol
        tunings = [(ln + off, *rest) for off, s in zip(offsets, scans, strict=True)
                   for ln, *rest in s.tunings]
        if tunings:
            columns.update(_tuning(tunings, t, t.lookup("op", None, object)))
    _meta(res, rank, group_size, world_n, t.processes)
    res.columns = columns if n else None  # no rows: the reader's empty table
    return res


def _offsets(scans: list[Scan], res: ParseResult) -> list[int]:
    """Each scan's offset in the log (the lines of the scans before it); the scans' skip logs
    merged into ``res``'s, their lines counted from the log's start."""
    offsets = []
    offset = 0
    for s in scans:
        offsets.append(offset)
        res.skipped.merge(SkipLog(s.skipped.count, s.skipped.by_reason,
                                  [(f, ln + offset if ln is not None else None, r)
                                   for f, ln, r in s.skipped.examples]))
        offset += s.lines
    return offsets


def _nelems(t: _Table, group_size: np.ndarray) -> list[Any]:
    """The in and out element counts of each row: its count × the op's factor of each side
    (``"1"``, ``"0"`` or ``"p"`` = × nranks; missing where that is ``"p"`` and nranks is)."""
    nelems = []
    for side in (1, 2):  # in, out: count × its factor ("1", "0" or "p" = × nranks)
        factor = t.lookup("op", lambda o, side=side: "01p".index(NCCL_COLL_OPS.get(o, "000")[side]), np.int8)
        scaled = factor == 2
        values = np.where(scaled, np.maximum(group_size, 0), factor)
        values *= t.count
        nelems.append(_nullable(values, scaled & (group_size < 0)))
        del factor, scaled
    return nelems


def _init_ranks(t: _Table, inits: list[tuple[Any, ...]], rank: np.ndarray, group_size: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int | None]:
    """The ranks and group sizes the log's Init lines give: (the global rank where the line has
    none, the rank within the call's communicator, the group size where the line has none, the
    world's size or ``None``)."""
    import pandas as pd

    in_comm = {(h, p, c): (r, size) for h, p, c, r, size in inits}
    world_rank, world_n = _world_ranks(inits)
    # one lookup per distinct (host, pid, comm), spread over its rows
    comm_names = t.tables["comm"]
    keys = pd.DataFrame({"h": t.codes["host"], "p": t.pid, "c": t.codes["comm"]})
    which = keys.groupby(["h", "p", "c"], sort=False).ngroup().to_numpy()
    found = np.full((len(keys.drop_duplicates()), 3), _NA, np.int64)  # world rank, comm rank, size
    for j, (h, p, c) in enumerate(keys.drop_duplicates().itertuples(index=False)):
        proc = (t.tables["host"][h], int(p) if p >= 0 else None)
        found[j, 1:] = in_comm.get((*proc, comm_names[c]), (_NA, _NA))
        # a call on a world communicator has its rank in it: one process driving several GPUs
        # (one communicator per device) holds several ranks, which host:pid alone would merge
        on_world = world_n is not None and found[j, 2] == world_n
        found[j, 0] = found[j, 1] if on_world else world_rank.get(proc, _NA)
    found = found[which]
    rank = np.where(rank < 0, found[:, 0], rank)
    comm_rank = found[:, 1]
    group_size = np.where(group_size < 0, found[:, 2], group_size)
    return rank, comm_rank, group_size, world_n


def _columns(t: _Table, file: str, rank: np.ndarray, group_size: np.ndarray, nelems: list[Any]
             ) -> dict[str, Any]:
    """The table's columns: the canonical ones, then the log's own (aggregated: a row per distinct
    call, with its number of calls; else a row per call, with its line and fields)."""
    import pandas as pd

    n = len(t.count)
    elem_bytes = t.lookup("datatype", lambda s: DTYPE_BYTES.get(_dtype(int(s)), _NA), np.int64)
    # The canonical dtypes (schema.CANONICAL_COLUMNS), built directly and compact: a few-valued
    # string column is a categorical of the codes (no object per call), an identifier the smallest
    # integer type that holds it, a column missing everywhere zeros that are never written (np.zeros
    # takes fresh pages from the system, which hold no memory until touched) under its mask.
    none = np.ones(n, bool)
    columns: dict[str, Any] = {
        "file": pd.Categorical.from_codes(np.zeros(n, np.int8), categories=pd.Index([file], dtype="string")),
        "rank": _nullable(rank, rank < 0), "step": _nullable(np.zeros(n, np.int64), none),
        "op": t.categorical("op", lambda o: NCCL_COLL_OPS.get(o, ("",))[0]),
        "dtype": t.categorical("datatype", lambda s: _dtype(int(s))),
        "elem_bytes": _nullable(elem_bytes, elem_bytes < 0), "in_nelems": nelems[0], "out_nelems": nelems[1],
        "group_size": _nullable(group_size, group_size < 0), "group": t.categorical("comm", None),
    }
    if t.calls is not None:  # aggregated: a row per distinct call, with its number of calls
        columns.update({
            "nccl_op": t.categorical("op", None), "count": t.count,
            "host": t.categorical("host", None) if t.has("host") else t.inferred("host", None),
            "pid": _inferred(_narrow(t.pid)), "aggregated_calls": t.calls,
        })
        return columns
    columns.update({
        "start_s": pd.arrays.FloatingArray(np.zeros(n), none),
        "duration_s": pd.arrays.FloatingArray(np.zeros(n), none),
        "source_line": _nullable(t.line, np.zeros(n, bool)),
        "nccl_op": t.categorical("op", None), "count": t.count,
        "opcount": _narrow(t.opcount), "redop": t.categorical("redop", lambda s: _redop(int(s))),
        "root": t.inferred("root", _int),
        "host": t.categorical("host", None) if t.has("host") else t.inferred("host", None),
        "pid": _inferred(_narrow(t.pid)),
        "tid": t.inferred("tid", _int), "device": t.inferred("dev", _int),
    })
    return columns


def _meta(res: ParseResult, rank: np.ndarray, group_size: np.ndarray, world_n: int | None,
          processes: int) -> None:
    """The log's rank (where it has one), world size and number of processes."""
    ranks = rank[rank >= 0]
    sizes = group_size[group_size >= 0]
    largest = max(int(sizes.max()) if len(sizes) else 0, world_n or 0)
    res.meta.update(
        rank=int(ranks[0]) if len(ranks) and ranks.min() == ranks.max() else None,
        # the largest communicator is the world only when it can hold every process of the log
        world_size=largest if largest and processes <= largest else None,
        processes=processes,
    )


def _world_ranks(inits: list[tuple[Any, ...]]) -> tuple[dict[tuple[Any, Any], int], int | None]:
    """Each process's global rank: its rank in the largest communicator of the log (the world).

    A process belongs to several communicators under parallelism of more than one kind (tensor,
    pipeline, data: Megatron-LM ``parallel_state.py``), and its rank in each is a different number;
    only the world communicator's rank tells processes apart. A process with no Init line of that
    size gets none; when the largest communicators do not give distinct ranks (two data-parallel
    communicators of 4 ranks in a log of 8 processes, none of them the world) no process gets one,
    and the checker tells them apart by process. Returns the ranks by (host, pid) and the world's
    size (``None`` in the latter case).
    """
    world_n = max(size for *_, size in inits)
    ranks = {(h, p): r for h, p, _, r, size in inits if size == world_n}
    if len(set(ranks.values())) < len(ranks) or any(p is None for _, p in ranks):
        return {}, None
    return ranks, world_n


def _frame(columns: dict[str, Any]) -> Any:
    import pandas as pd

    return pd.DataFrame(columns)


def _nullable(values: np.ndarray, missing: np.ndarray) -> Any:
    """An ``Int64`` array: ``values`` where not ``missing``."""
    import pandas as pd

    return pd.arrays.IntegerArray(values.astype(np.int64, copy=False), missing)


class _Table:
    """The columns of consecutive scans joined, their code tables merged; the scans' columns are
    released as they are joined (each held once at a time, not twice)."""

    def __init__(self, scans: list[Scan], offsets: list[int]) -> None:
        parts = [(off, s.columns) for off, s in zip(offsets, scans, strict=True) if s.columns]
        self.tables: dict[str, list] = {}
        self.codes: dict[str, np.ndarray] = {}
        hosts, pids = [], []
        present = parts[0][1] if parts else {}
        #: Aggregated scans: the number of calls of each row (a distinct call), else ``None``.
        self.calls = None
        for name in _FACTORS:
            if parts and name not in present:  # not kept by an aggregated read
                continue
            merged: defaultdict = defaultdict(count().__next__)
            recoded = []
            for sc in scans:
                if sc.columns:
                    new = np.array([merged[v] for v in sc.tables[name]], dtype=np.int32)
                    same = bool((new == np.arange(len(new))).all())  # the first scan's, or as it
                    recoded.extend(sc.columns[name] if same else [new[block] for block in sc.columns[name]])
                    sc.columns[name] = []
                    if name == "host":
                        hosts.append(new[sc.processes[0]])
                        pids.append(sc.processes[1])
            self.tables[name] = list(merged)
            self.codes[name] = _small(np.concatenate(recoded)) if recoded else np.zeros(0, np.int8)
            del recoded
        #: How many distinct (host, pid) pairs the calls come from.
        self.processes = len(_pairs(np.concatenate(hosts), np.concatenate(pids))[0]) if hosts else 0
        empty = [np.zeros(0, np.int64)]
        self.pid, self.count = (self._join(parts, k, empty) for k in ("pid", "count"))
        if "calls" in present:
            self.calls = self._join(parts, "calls", empty)
            return
        self.line = np.concatenate([block.astype(np.int64) + off for off, c in parts for block in c["line"]]
                                   or empty)
        for _, c in parts:
            c["line"] = []
        self.opcount = self._join(parts, "opcount", empty)

    @staticmethod
    def _join(parts: list, name: str, empty: list) -> np.ndarray:
        out = np.concatenate([b for _, c in parts for b in c[name]] or empty)
        for _, c in parts:
            c[name] = []
        return out

    def lookup(self, name: str, fn, dtype) -> np.ndarray:
        """``fn`` of each distinct raw string of a field (the string itself if ``fn`` is None),
        spread over the rows."""
        table = self.tables[name] if fn is None else [fn(v) for v in self.tables[name]]
        return np.array(table, dtype=dtype)[self.codes[name]]

    def categorical(self, name: str, fn) -> Any:
        """A categorical column: ``fn`` of each distinct raw string (the string itself if ``fn`` is
        None; missing where that is None), its categories the values that occur, sorted (so that
        sorting the column sorts its strings), its codes the smallest integer type that holds them."""
        import pandas as pd

        codes = self.codes[name]
        table = self.tables[name] if fn is None else [fn(v) for v in self.tables[name]]
        used = np.bincount(codes, minlength=len(table)) > 0 if len(codes) else np.zeros(len(table), bool)
        categories = sorted({v for v, u in zip(table, used.tolist(), strict=True) if u and v is not None})
        at = {v: i for i, v in enumerate(categories)}
        recode = np.array([at.get(v, -1) if v is not None else -1 for v in table], np.int64)
        small = np.int8 if len(categories) < 2**7 else np.int16 if len(categories) < 2**15 else np.int32
        return pd.Categorical.from_codes(recode.astype(small)[codes],
                                         categories=pd.Index(categories, dtype="string"))

    def has(self, name: str) -> bool:
        """Whether some row has the field."""
        return bool(len(self.codes[name])) and not self.lookup(name, lambda v: v is None, bool).all()

    def ints(self, name: str) -> np.ndarray:
        """An integer field, :data:`_NA` where missing (a fresh array)."""
        return self.lookup(name, _int, np.int64)

    def inferred(self, name: str, fn) -> Any:
        """A string field (``fn`` None) or integer one (``fn`` :func:`_int`) as a table built from
        rows of dicts had it: a typed array when no row lacks it, else a list with ``None`` for
        pandas to infer the column type from, as it did."""
        values = _narrow(self.ints(name)) if fn is _int else self.lookup(name, None, object)
        return _inferred(values, self.lookup(name, lambda v: v is None, bool))


def _narrow(values: np.ndarray) -> np.ndarray:
    """An identifier column (a pid, thread, device, root) in the smallest signed integer type that
    holds its values (and :data:`_NA`)."""
    if not len(values):
        return values
    lo, hi = int(values.min()), int(values.max())
    for small in (np.int8, np.int16, np.int32):
        if np.iinfo(small).min <= lo and hi <= np.iinfo(small).max:
            return values.astype(small)
    return values


def _inferred(values: np.ndarray, missing: np.ndarray | None = None) -> Any:
    """A column as a table built from rows of dicts had it: ``values`` when none is missing,
    else a list with ``None`` for pandas to infer the column type from, as it did."""
    missing = values == _NA if missing is None else missing
    if not missing.any():
        return values
    return [None if m else v for v, m in zip(values.tolist(), missing.tolist(), strict=True)]


def _tuning(tunings: list[tuple[Any, ...]], t: _Table, ops: np.ndarray) -> dict[str, list]:
    """Give each TUNING line's algorithm and protocol to the preceding call of its thread."""
    hosts = {h: i for i, h in enumerate(t.tables["host"])}
    threads = _frame({"h": t.codes["host"], "p": t.pid, "t": t.ints("tid")})
    rows_of = threads.groupby(["h", "p", "t"], sort=False).indices
    tuned: dict[int, tuple[str, str, int]] = {}
    for line, host, pid, tid, op, algo, proto, nbytes in sorted(tunings, key=operator.itemgetter(0)):
        rows = rows_of.get((hosts.get(host, _NA), _NA if pid is None else pid, _NA if tid is None else tid))
        if rows is None:
            continue
        k = int(np.searchsorted(t.line[rows], line, side="right")) - 1
        if k >= 0 and (row := int(rows[k])) not in tuned and ops[row] == op:
            tuned[row] = (algo, proto, nbytes)
    if not tuned:
        return {}
    n = len(t.line)
    return {name: [tuned[i][j] if i in tuned else None for i in range(n)]
            for j, name in enumerate(("algorithm", "protocol", "tuning_bytes"))}
