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
above 2 ranks, and at any ranks by the in-place check (sendrecv, like alltoall, prints ``N/A`` there beside a
checked out-of-place result; all_reduce and all_gather check both); gather/scatter not at all, nor
all_gather/alltoall or all_reduce/sendrecv run without checks (``-c 0``): those stay untold.

Before Aug 2022 each test printed lead columns of its own (nccl-tests 8274cb4, May 2022, each
``src/*.cu``'s ``print_header`` and ``print_line_header``), which tell the test with the same size/count
ratio (:func:`op_from_pre2022_table`):

==================  ======================  ========================
lead columns        size / (count × elem)   test
==================  ======================  ========================
``redop``           1                       all_reduce
``redop``           n, an op's name         reduce_scatter
``redop``           n, the cell blank       alltoall (``TimeTest(…, "", -1)``)
``root``            1                       broadcast
``root``            n                       gather or scatter (untold)
``redop root``      1                       reduce
neither             1                       sendrecv
neither             n                       all_gather (hypercube, Jun 2021, prints alike and is not
                                            priced: as in the table above, it is not told apart)
==================  ======================  ========================
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from zerocalc.errors import TraceFormatError
from zerocalc.traces.busbw import ranks_from_bandwidth


def op_from_table(rows: Sequence[Mapping[str, Any]], ranks: int | None, file: str,
                  inplace_checked: bool | None = None) -> tuple[str | None, str]:
    """``(test, how)``: the nccl-tests test (a key of :data:`~zerocalc.traces.schema.NCCL_TESTS_OPS`)
    the rows of one run measured and the sentence saying how it was told, or ``(None, why not)``.
    ``rows`` are the run's canonical rows (``redop``, ``root``, ``size_bytes``, ``count``,
    ``elem_bytes``, the bandwidths); ``ranks`` what its ``# Rank`` or INFO lines say, if anything;
    ``inplace_checked``: whether every row prints its in-place ``#wrong`` (``True``), ``N/A`` there
    beside a checked out-of-place one (``False``), or neither. alltoall never checks in place (nccl-tests
    ``src/alltoall.cu`` since the test's first version, Mar 2020: ``args->reportErrors = in_place ? 0 :
    1``; ``src/util.cu`` prints ``N/A`` then), all_gather does: that tells the pair apart."""
    if rows and str(rows[0].get("layout") or "").startswith("pre2022"):
        return op_from_pre2022_table(rows, ranks)
    if not rows:
        return None, "it has no rows"
    missing = [c for c in ("redop", "root") if any(r.get(c) is None for r in rows)]
    if missing:  # a table of nccl-tests since Aug 2022 ('#wrong') cut to fewer lead columns
        return None, (f"no {' and no '.join(missing)} column, which nccl-tests prints beside "
                      "'#wrong' since Aug 2022: a table cut to fewer columns")
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
        return _all_reduce_or_sendrecv(rows, ranks, file, cols, inplace_checked)
    if reduce and not root and m > 1 and ranks in (None, m):
        return "reduce_scatter", f"{cols} (n = {m})"
    if reduce and root and m == 1:
        return "reduce", cols
    if not reduce and root and m == 1:
        return "broadcast", cols
    if not reduce and m > 1 and not root and inplace_checked is not None:
        return (("all_gather", f"{cols}, its in-place check printed (alltoall prints N/A there)")
                if inplace_checked else ("alltoall", f"{cols}, N/A in place only (alltoall checks no in-place"
                                                     " result)"))
    if not reduce and m > 1:
        pair = "gather or scatter" if root else "all_gather or alltoall"
        return None, f"{cols}: {pair}, which nccl-tests prints alike"
    return None, f"{cols}: no nccl-tests test prints such rows" + (f" on {ranks} ranks" if ranks else "")


def _all_reduce_or_sendrecv(rows: Sequence[Mapping[str, Any]], ranks: int | None, file: str, cols: str,
                            checked: bool | None) -> tuple[str | None, str]:
    """all_reduce or sendrecv (an op, root -1, size = count × element): sendrecv checks no in-place
    result (nccl-tests ``src/sendrecv.cu`` since the test's first version, 9dae3d3, Jun 2021:
    ``args->reportErrors = in_place ? 0 : 1``), all_reduce does, so ``checked`` (:func:`inplace_checked`)
    tells them apart whatever the ranks; else busbw/algbw does above 2 ranks."""
    if checked is False:
        return "sendrecv", f"{cols}, N/A in place only (sendrecv checks no in-place result, all_reduce does)"
    try:
        bw = ranks_from_bandwidth(rows, "all_reduce", file=file)
    except TraceFormatError:
        return None, f"{cols}: all_reduce or sendrecv, and its bandwidths cannot tell which"
    if bw.n > 2 and ranks in (None, bw.n):
        return "all_reduce", f"{cols}, busbw/algbw = 2(n-1)/n with n = {bw.n}"
    if bw.n == 2 and checked and ranks in (None, 2):
        return "all_reduce", (f"{cols}, busbw/algbw = 2(n-1)/n with n = 2 and its in-place check printed "
                              "(sendrecv prints N/A there)")
    if bw.n == 2 and ranks is not None and ranks > 2:
        return "sendrecv", f"{cols}, busbw = algbw on {ranks} ranks"
    return None, f"{cols}: all_reduce or sendrecv, and {bw.n} ranks by busbw/algbw cannot tell which"


def op_from_pre2022_table(rows: Sequence[Mapping[str, Any]], ranks: int | None) -> tuple[str | None, str]:
    """``(test, how)`` for the rows of one run under a pre-Aug-2022 header (layout ``pre2022[-redop][-root]``,
    :mod:`zerocalc.traces.nccl_tests_rows`), told by its lead columns and size/count ratio (the second table
    of this module's docstring), or ``(None, why not)``."""
    parts = {p for r in rows for p in str(r.get("layout") or "").split("-")}
    redop, root = "redop" in parts, "root" in parts
    mult = {r["size_bytes"] // (r["count"] * r["elem_bytes"]) if r["count"] and r["elem_bytes"] else None
            for r in rows if r["size_bytes"]}
    named = {r.get("redop") not in (None, "", "none") for r in rows}
    if len(mult) != 1 or None in mult or len(named) != 1:
        return None, "its pre-2022 rows mix size/count ratios or reductions"
    (m,), (op_named,) = mult, named
    lead = " ".join(c for c, on in (("redop", redop), ("root", root)) if on) or "no redop or root"
    size = f"{'' if m == 1 else f'{m} × '}count × {rows[0]['elem_bytes']} B"
    cols = f"pre-2022 lead columns: {lead}, size = {size}"
    if m > 1 and ranks not in (None, m):
        return None, f"{cols}, which no pre-2022 test prints on {ranks} ranks"
    test = {(True, False, True): "all_reduce" if op_named else None,
            (True, False, False): ("reduce_scatter" if op_named else "alltoall"),
            (False, True, True): "broadcast", (True, True, True): "reduce" if op_named else None,
            (False, False, True): "sendrecv", (False, False, False): "all_gather"}.get((redop, root, m == 1))
    if test is None:
        return None, f"{cols}: " + ("gather or scatter, which nccl-tests prints alike" if root and not redop
                                    else "no pre-2022 nccl-tests test prints such rows")
    return test, cols


#: Each test's rows by the table above: (reduces, rooted, size a multiple of count × element).
_SIGNATURE = {"all_reduce": (True, False, False), "sendrecv": (True, False, False),
              "reduce_scatter": (True, False, True), "reduce": (True, True, False),
              "broadcast": (False, True, False), "gather": (False, True, True),
              "scatter": (False, True, True),
              "all_gather": (False, False, True), "alltoall": (False, False, True)}


#: The tests that check no in-place result (nccl-tests ``src/alltoall.cu``, ``src/sendrecv.cu``:
#: ``args->reportErrors = in_place ? 0 : 1``; ``src/util.cu`` then prints ``N/A``); every other test
#: checks both.
_NO_INPLACE_CHECK = frozenset({"alltoall", "sendrecv"})


def table_contradicts(rows: Sequence[Mapping[str, Any]], test: str,
                      checked: bool | None = None) -> str | None:
    """Why the rows of one run cannot be ``test``'s (a post whose command line names one test above
    another test's output: its rows' ``redop``, ``root`` and size/count ratio, the table above, and
    ``checked``, :func:`inplace_checked`), or ``None`` when they may be (or the table, or the test, has no
    such columns to tell)."""
    sig = _SIGNATURE.get(test)
    sized = [r for r in rows if r.get("size_bytes") and r.get("count") and r.get("elem_bytes")]
    if sig is None or not sized or any(r.get("redop") is None or r.get("root") is None for r in sized):
        return None
    seen = {(r["redop"] != "none", r["root"] >= 0, r["size_bytes"] // (r["count"] * r["elem_bytes"]) > 1)
            for r in sized}
    if len(seen) == 1 and seen != {sig}:
        r = sized[0]
        m = r["size_bytes"] // (r["count"] * r["elem_bytes"])
        return (f"its rows are redop {r['redop']}, root {r['root']}, size = "
                f"{'' if m == 1 else f'{m} × '}count × {r['elem_bytes']} B, which {test}_perf does not print")
    if checked is not None and checked == (test in _NO_INPLACE_CHECK):
        return ("its rows print an in-place check" if checked else "its rows print N/A for the in-place "
                "check beside an out-of-place one") + f", which {test}_perf does not"
    return None


def inplace_checked(recs: Sequence[tuple[int, Mapping[str, Any]]]) -> bool | None:
    """Whether every row prints its in-place ``#wrong`` (``True``) or ``N/A`` there beside a printed
    out-of-place one (``False``); ``None`` for a mix, or where the out-of-place one is not printed."""
    if not recs or any(rec.get("oop_wrong") is None or "ip_time_us" not in rec for _, rec in recs):
        return None
    printed = {rec.get("ip_wrong") is not None for _, rec in recs}
    return printed.pop() if len(printed) == 1 else None
