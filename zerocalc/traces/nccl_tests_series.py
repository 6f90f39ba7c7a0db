"""Which run of an nccl-tests output a result row belongs to, where runs share a header.

nccl-tests prints each series (type, reduction, root) of a run by rising size, once (``src/common.cu``:
``for (size = minBytes; size <= maxBytes; ...)``). A row then belongs to the run whose series it
carries on most closely (the largest last size below its own; among equals the run that printed that
size first, as runs printed in turn do; among runs holding none of its series, the latest), and a row
that carries on none starts a run again (``-N`` cycles, or another process's run: nccl-tests built
without MPI prints one run per process, their lines interleaved). Used by
:meth:`zerocalc.traces.nccl_tests._Runs.row`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from zerocalc.traces.nccl_tests_rows import Layout

#: A run's rows as the reader keeps them: (the line each starts at, its cells).
Recs = Sequence[tuple[int, dict[str, Any]]]


def series_key(rec: dict[str, Any]) -> tuple[Any, Any, Any]:
    """The series a result row belongs to within its run: its type, reduction and root."""
    return rec.get("type"), rec.get("redop"), rec.get("root")


def same_columns(a: Layout | None, b: Layout | None) -> bool:
    """Whether two tables have the same columns (their header lines aside)."""
    if a is None or b is None:
        return a is b
    return (a.name, a.columns, a.timestamp, a.time_unit_us) == (
        b.name, b.columns, b.timestamp, b.time_unit_us)


def last_of_series(recs: Recs, rec: dict[str, Any], order: int) -> tuple[int, int]:
    """The largest size of ``rec``'s series among ``recs`` (-1 where none is of it) and how to rank runs
    at the same size: the one whose row of it came first, or where none holds the series, ``order``."""
    key = series_key(rec)
    rows = [(r["size_bytes"], -ln) for ln, r in recs if series_key(r) == key]
    return max(rows) if rows else (-1, order)


def carried_on(runs: Sequence[tuple[Recs, Layout | None]], rec: dict[str, Any], layout: Layout | None
               ) -> int | None:
    """The index in ``runs`` ((rows, layout) of each run under the header, the latest last) of the run
    ``rec`` (read under ``layout``) carries on most closely; ``None`` where it carries on none."""
    fits = [(*last_of_series(recs, rec, i), i) for i, (recs, lay) in enumerate(runs)
            if same_columns(lay, layout) and last_of_series(recs, rec, i)[0] < rec["size_bytes"]]
    return max(fits)[2] if fits else None
