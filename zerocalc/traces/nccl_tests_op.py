"""The test an nccl-tests table measured, told by the table itself when the file names none.

A run launched from a job file kept apart (a Kubernetes MPIJob, a Slurm script) prints its table with
no ``<test>_perf`` command line, and its file may be named anything. Since Aug 2022 (nccl-tests
51af557) every test prints ``redop`` and ``root`` columns, and with the ranks the figures tell most
tests apart (nccl-tests ``src/*.cu``: each ``RunTest``'s ``TimeTest(..., opName, root)``, each
``GetCollByteCount`` and ``GetBw``; ``doc/PERFORMANCE.md``):

=================  ==========  ========  ========================  ===============
test               redop       root      size / (count × element)  busbw / algbw
=================  ==========  ========  ========================  ===============
all_reduce         an op       -1        1                         2(n-1)/n
sendrecv           an op       -1        1                         1
reduce_scatter     an op       -1        n                         (n-1)/n
reduce             an op       ≥ 0       1                         1
broadcast          ``none``    ≥ 0       1                         1
gather, scatter    ``none``    ≥ 0       n                         (n-1)/n
all_gather,        ``none``    -1        n                         (n-1)/n
alltoall
=================  ==========  ========  ========================  ===============

all_reduce and sendrecv are told apart by busbw/algbw (:func:`zerocalc.traces.busbw.ranks_from_bandwidth`)
only above 2 ranks; gather/scatter and all_gather/alltoall not at all: those stay untold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from zerocalc.errors import TraceFormatError
from zerocalc.traces.busbw import ranks_from_bandwidth


def op_from_table(rows: Sequence[Mapping[str, Any]], ranks: int | None, file: str) -> tuple[str | None, str]:
    """``(test, how)``: the nccl-tests test (a key of :data:`~zerocalc.traces.schema.NCCL_TESTS_OPS`)
    the rows of one run measured and the sentence saying how it was told, or ``(None, why not)``.
    ``rows`` are the run's canonical rows (``redop``, ``root``, ``size_bytes``, ``count``,
    ``elem_bytes``, the bandwidths); ``ranks`` what its ``# Rank`` or INFO lines say, if anything."""
    if not rows or any(r.get("redop") is None or r.get("root") is None for r in rows):
        return None, "its table has no redop and root columns (nccl-tests before Aug 2022)"
    reduces = {r["redop"] != "none" for r in rows}
    rooted = {r["root"] >= 0 for r in rows}
    mult = {r["size_bytes"] // (r["count"] * r["elem_bytes"]) if r["count"] and r["elem_bytes"] else None
            for r in rows if r["size_bytes"]}
    if len(reduces) != 1 or len(rooted) != 1 or len(mult) != 1 or None in mult:
        return None, "its rows mix reductions, roots or size/count ratios"
    (reduce,), (root,), (m,) = reduces, rooted, mult
    cols = (f"redop {rows[0]['redop']}, root {rows[0]['root']}, "
            f"size = {'' if m == 1 else f'{m} × '}count × {rows[0]['elem_bytes']} B")
    if reduce and not root and m == 1:
        try:
            bw = ranks_from_bandwidth(rows, "all_reduce", file=file)
        except TraceFormatError:
            return None, f"{cols}: all_reduce or sendrecv, and its bandwidths cannot tell which"
        if bw.n > 2 and ranks in (None, bw.n):
            return "all_reduce", f"{cols}, busbw/algbw = 2(n-1)/n with n = {bw.n}"
        if bw.n == 2 and ranks is not None and ranks > 2:
            return "sendrecv", f"{cols}, busbw = algbw on {ranks} ranks"
        return None, f"{cols}: all_reduce or sendrecv, and {bw.n} ranks by busbw/algbw cannot tell which"
    if reduce and not root and m > 1 and ranks in (None, m):
        return "reduce_scatter", f"{cols} (n = {m})"
    if reduce and root and m == 1:
        return "reduce", cols
    if not reduce and root and m == 1:
        return "broadcast", cols
    if not reduce and m > 1:
        pair = "gather or scatter" if root else "all_gather or alltoall"
        return None, f"{cols}: {pair}, which nccl-tests prints alike"
    return None, f"{cols}: no nccl-tests test prints such rows" + (f" on {ranks} ranks" if ranks else "")
