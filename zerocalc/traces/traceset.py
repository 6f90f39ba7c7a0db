"""The result of a read: :class:`TraceSet` (the canonical table of every file read, what was
skipped, per-file metadata) and its assembly from the files' parse results: the files in a
directory that held no trace set aside with a note, the world sizes checked to agree, the ranks
of processes carried across the parts of a rotated NCCL log, the rows of all files in one table
of the canonical columns (:data:`zerocalc.traces.schema.CANONICAL_COLUMNS`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from zerocalc.errors import TraceFormatError, TraceMismatchError
from zerocalc.traces import flight_recorder, nccl_log
from zerocalc.traces.records import ParseResult, SkipLog
from zerocalc.traces.schema import CANONICAL_COLUMNS

if TYPE_CHECKING:
    import pandas as pd

    from zerocalc.traces.paths import _Inputs


@dataclass(frozen=True)
class TraceSet:
    """The canonical table of all files read, what was skipped, and per-file metadata."""

    table: pd.DataFrame
    skipped: SkipLog = field(default_factory=SkipLog)
    meta: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Paths inside a given directory that were not read, with why: subdirectories (other runs)
    #: and files whose format could not be detected (or, with a forced format, held none of it).
    skipped_files: dict[str, str] = field(default_factory=dict)
    #: One line per thing the reader did that the caller should know of (a path given twice, a
    #: skipped subdirectory or file), for display.
    notes: tuple[str, ...] = ()

    def processes(self) -> pd.Series:
        """Per call, its process ``host:pid`` where it records no rank (missing where the rank is
        known or the trace names no process): the ``process`` column of :meth:`summary`.

        A categorical column (its categories sorted): the text of each distinct (host, pid) pair
        is made once, not once per call."""
        import pandas as pd

        t = self.table
        codes = np.full(len(t), -1, np.int32)
        categories: list[str] = []
        if "host" in t.columns and "pid" in t.columns:
            named = (t["rank"].isna() & t["host"].notna()).to_numpy(dtype=bool, na_value=False)
            if named.any():
                hosts, host_of = pd.factorize(t["host"][named])
                pids, pid_of = pd.factorize(t["pid"][named])  # a missing pid: -1
                pairs, pair_of = pd.factorize(hosts.astype(np.int64) * (len(pid_of) + 1) + (pids + 1))
                span = len(pid_of) + 1
                text = [f"{host_of[k // span]}:{int(pid_of[k % span - 1]) if k % span else '?'}"
                        for k in pair_of.tolist()]
                categories = sorted(set(text))
                at = {v: i for i, v in enumerate(categories)}
                codes[named] = np.array([at[v] for v in text], np.int32)[pairs]
        return pd.Series(pd.Categorical.from_codes(codes, categories=pd.Index(categories, dtype="string")),
                         index=t.index)

    def summary(self) -> pd.DataFrame:
        """Per file, rank, step and op: number of calls and summed in/out elements and bytes, and where a
        profiler trace records reductions inside a forward pass, how many of the calls are such
        (``forward_calls``).

        A call without a rank is counted under its process instead, ``host:pid`` (column
        ``process``, missing where the rank is known or the trace names no process): NCCL debug
        logs without ``Init COMPLETE`` lines record no rank, and one file often holds the lines
        of every process, which would otherwise count as one.
        """
        import pandas as pd

        table = self.table
        t = pd.DataFrame({  # the columns it needs, not a copy of the table
            "file": table["file"], "rank": table["rank"], "process": self.processes(), "step": table["step"],
            "op": table["op"], "in_nelems": table["in_nelems"], "out_nelems": table["out_nelems"],
            "in_bytes": table["in_nelems"] * table["elem_bytes"],
            "out_bytes": table["out_nelems"] * table["elem_bytes"]}, copy=False)
        keys = ["file", "rank", "process", "step", "op"]
        g = t.groupby(keys, dropna=False, sort=True)
        # missing where every call of the group lacks it (min_count=1), not 0
        out = g[["in_nelems", "out_nelems", "in_bytes", "out_bytes"]].sum(min_count=1)
        if "aggregated_calls" in table.columns:  # an aggregated read: a row per distinct call (read_traces)
            calls = table["aggregated_calls"].fillna(1).astype(np.int64).groupby(
                [t[k] for k in keys], dropna=False, sort=True).sum()
            out.insert(0, "calls", calls)
        else:
            out.insert(0, "calls", g.size())
        if "forward_op" in table.columns and table["forward_op"].notna().any():
            # the calls of each that a profiler trace records inside a forward pass (kineto_forward)
            out["forward_calls"] = table["forward_op"].notna().astype(np.int64).groupby(
                [t[k] for k in keys], dropna=False, sort=True).sum()
        return pd.DataFrame(out.reset_index())


def _frame(results: list[ParseResult]) -> pd.DataFrame:
    """One frame of all rows, in file order; row dicts of consecutive files are built together."""
    import pandas as pd

    frames: list[pd.DataFrame] = []
    rows: list[dict[str, Any]] = []
    for r in results:
        if r.columns is None:
            rows.extend(r.rows)
            continue
        if rows:
            frames.append(pd.DataFrame.from_records(rows))
            rows = []
        frames.append(pd.DataFrame(r.columns, copy=False))  # the arrays are the result's own
    if rows or not frames:
        frames.append(pd.DataFrame.from_records(rows) if rows else pd.DataFrame())
    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)


def _assemble(inputs: _Inputs, all_results: list[ParseResult | str]) -> TraceSet:
    skipped = SkipLog()
    meta: dict[str, dict[str, Any]] = {}
    skipped_files, notes = dict(inputs.skipped_files), list(inputs.notes)
    files, results = [], []
    for f, r in zip(inputs.files, all_results, strict=True):
        if isinstance(r, str):  # a file in a directory that is not a trace (of the forced format)
            skipped_files[f] = r
            notes.append(f"{f}: skipped, {r}")
            continue
        files.append(f)
        results.append(r)
    if not files:
        why = "; ".join(f"{os.path.basename(f)}: {r}" for f, r in skipped_files.items())
        raise TraceFormatError(", ".join(inputs.files), None, f"no trace files found ({why})")
    flight_recorder.members_across_dumps(results)
    for f, r in zip(files, results, strict=True):
        skipped.merge(r.skipped)
        calls = r.columns.get("aggregated_calls") if r.columns is not None else None  # an aggregated read
        meta[f] = dict(r.meta, rows=len(r) if calls is None else int(calls.sum()), skipped=r.skipped.count)
    worlds = {m.get("world_size") for m in meta.values()} - {None}
    if len(worlds) > 1:
        detail = ", ".join(f"{os.path.basename(f)}: {m['world_size']}" for f, m in meta.items()
                           if m.get("world_size") is not None)
        raise TraceMismatchError(f"traces disagree on the world size ({detail}); read each run separately")
    _ranks_of_processes(results)
    table = _frame(results)
    for col in CANONICAL_COLUMNS:
        if col not in table.columns:
            table[col] = None
    extra = [c for c in table.columns if c not in CANONICAL_COLUMNS]
    table = table[list(CANONICAL_COLUMNS) + extra]
    table = table.astype(CANONICAL_COLUMNS)
    return TraceSet(table=table, skipped=skipped, meta=meta, skipped_files=skipped_files, notes=tuple(notes))


def _ranks_of_processes(results: list[ParseResult]) -> None:
    """The calls of an NCCL log that records no rank for them get the rank their process
    (host:pid) has in another log of the same read, where it has exactly one: the parts of a log
    rotated or split by line count, of which only the first holds the ``Init COMPLETE`` lines
    that give the ranks (nccl_log: the world communicator's rank)."""
    import pandas as pd

    logs = [r for r in results if r.meta.get("format") == nccl_log.FORMAT and r.columns is not None
            and "host" in r.columns]
    if len(logs) < 2:
        return
    keys = [pd.DataFrame({"h": pd.array(r.columns["host"], dtype="string"),
                          "p": pd.array(r.columns["pid"], dtype="Int64"), "r": r.columns["rank"]})
            for r in logs]
    known = pd.concat([k.dropna().drop_duplicates() for k in keys]).drop_duplicates()
    known = known[~known.duplicated(["h", "p"], keep=False)]  # a process with one rank only
    if known.empty:
        return
    for r, k in zip(logs, keys, strict=True):
        na = k["r"].isna().to_numpy()
        if not na.any():
            continue
        found = k.loc[na, ["h", "p"]].merge(known, on=["h", "p"], how="left")["r"].to_numpy(
            dtype="float64", na_value=np.nan)
        if np.isnan(found).all():
            continue
        rank = k["r"].to_numpy(dtype="float64", na_value=np.nan)
        rank[na] = found
        r.columns["rank"] = pd.arrays.IntegerArray(np.nan_to_num(rank).astype(np.int64), np.isnan(rank))
