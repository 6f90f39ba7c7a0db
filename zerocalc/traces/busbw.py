"""The ranks an nccl-tests sweep ran on, read from its own bandwidth columns.

nccl-tests prints per row ``algbw = size / time`` and ``busbw = algbw × factor``, the factor depending
on the collective and the number of ranks n only (nccl-tests ``doc/PERFORMANCE.md`` and each test's
``GetBw`` in ``src/*.cu``): ``2(n-1)/n`` for all_reduce, ``(n-1)/n`` for all_gather, reduce_scatter,
alltoall, alltoallv, gather and scatter, ``1`` for broadcast, reduce, sendrecv and hypercube (whose
algbw is ``(n-1)/n × size / time``). Where the factor depends on n, every row with
non-zero bandwidths bounds it: the text prints both figures with two decimals (``%7.2f``), so the
true ones lie within ±0.005 GB/s of the printed ones and the factor within
``[(busbw - 0.005) / (algbw + 0.005), (busbw + 0.005) / (algbw - 0.005)]``; each bound maps to n by
inverting the factor. :func:`ranks_from_bandwidth` intersects the rows' ranges of n: a single whole
number in the intersection is the answer (rows with large bandwidths pin it, small ones only agree);
an empty intersection means the rows disagree (not one nccl-tests run, or edited figures), and
several whole numbers that the rows cannot tell them apart (every bandwidth too small).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from zerocalc.errors import TraceFormatError

#: Half the last printed digit of ``algbw`` / ``busbw`` (nccl-tests prints them ``%7.2f``), GB/s.
HALF_DIGIT_GBps = 0.005

#: Canonical op → (factor's name, n from the factor f): ``2(n-1)/n`` → ``n = 2/(2-f)``,
#: ``(n-1)/n`` → ``n = 1/(1-f)`` (nccl-tests doc/PERFORMANCE.md).
_INVERSE = {
    "all_reduce": ("2(n-1)/n", 2.0),
    "all_gather": ("(n-1)/n", 1.0),
    "reduce_scatter": ("(n-1)/n", 1.0),
    "all_to_all": ("(n-1)/n", 1.0),
    "gather": ("(n-1)/n", 1.0),
    "scatter": ("(n-1)/n", 1.0),
    "alltoallv": ("(n-1)/n", 1.0),
}
#: Ops whose busbw equals algbw whatever n is (sendrecv; hypercube, whose algbw is already × (n-1)/n).
FACTOR_ONE = ("broadcast", "reduce", "send", "sendrecv", "hypercube")


@dataclass(frozen=True)
class RanksFromBandwidth:
    """The ranks a sweep's busbw/algbw ratio implies, and the rows that told it."""

    n: int
    factor: str
    #: Rows with non-zero algbw and busbw (the ones that bound n).
    rows_used: int
    #: The row (its line) whose range of n is narrowest, with that range.
    tightest_line: int | None
    tightest_range: tuple[float, float]

    @property
    def how(self) -> str:
        """One phrase for the output: how n was read."""
        lo, hi = self.tightest_range
        return (f"from busbw/algbw = {self.factor} ({self.rows_used} rows agree on n = {self.n}; "
                f"line {self.tightest_line} alone gives {lo:.2f} ≤ n ≤ {hi:.2f})")


def _n_of(f: float, k: float) -> float:
    """n from the factor ``f = k(n-1)/n`` (k = 1 or 2): ``n = k/(k-f)``; ∞ at and past ``f = k``."""
    return math.inf if f >= k else (k / (k - f) if f > 0 else 1.0)


def _bounds(rows: Iterable[Mapping[str, Any]], k: float
            ) -> tuple[float, Any, float, Any, int, tuple[float, Any, tuple[float, float]]]:
    """The n every row allows for the factor ``k(n-1)/n``: (lowest bound, its line, highest bound, its
    line, rows that bound it, (narrowest range's width, its line, that range))."""
    lo, hi = 1.0, math.inf
    lo_line = hi_line = None
    used = 0
    tight: tuple[float, Any, tuple[float, float]] = (math.inf, None, (1.0, math.inf))
    for r in rows:
        bounded = False
        for a_key, b_key in (("algbw_GBps", "busbw_GBps"), ("inplace_algbw_GBps", "inplace_busbw_GBps")):
            a, b = r.get(a_key), r.get(b_key)
            if a is None or b is None or not (a > HALF_DIGIT_GBps and b > HALF_DIGIT_GBps):
                continue
            bounded = True
            r_lo = _n_of((b - HALF_DIGIT_GBps) / (a + HALF_DIGIT_GBps), k)
            r_hi = _n_of((b + HALF_DIGIT_GBps) / (a - HALF_DIGIT_GBps), k)
            line = r.get("source_line")
            if r_hi - r_lo < tight[0]:
                tight = (r_hi - r_lo, line, (r_lo, r_hi))
            if r_lo > lo:
                lo, lo_line = r_lo, line
            if r_hi < hi:
                hi, hi_line = r_hi, line
        used += bounded
    return lo, lo_line, hi, hi_line, used, tight


def listed_ranks_cut(rows: Iterable[Mapping[str, Any]], op: str, listed: int) -> bool:
    """Whether ``listed`` ranks (a run's ``# Rank`` lines) lie outside the several whole n the rows'
    busbw/algbw allows: a post that cut its device lines short without a mark (NVIDIA/nccl-tests issue
    322 lists 100 of its 1,024 ranks, its rows allowing 953-1,036). Where the bandwidths pin one n, or
    allow ``listed``, the lines stand (a count they deny is refused by ``check`` naming ``--n``)."""
    if op not in _INVERSE:
        return False
    lo, _, hi, _, used, _ = _bounds(rows, _INVERSE[op][1])
    whole = _whole(lo, hi)
    return bool(used) and whole is not None and len(whole) > 1 and listed not in whole


def _whole(lo: float, hi: float) -> range | None:
    """The whole n within ``lo`` ≤ n ≤ ``hi``; None where ``hi`` is unbounded, empty where ``lo`` is (a
    row whose busbw/algbw reaches the factor's limit, which no number of ranks gives)."""
    if not math.isfinite(lo):
        return range(0)
    return range(math.ceil(lo - 1e-9), math.floor(hi + 1e-9) + 1) if math.isfinite(hi) else None


def ranks_from_bandwidth(rows: Iterable[Mapping[str, Any]], op: str, *, file: str) -> RanksFromBandwidth:
    """The n every row's ``algbw_GBps`` / ``busbw_GBps`` (out-of-place, then in-place) allows.

    Raises :class:`TraceFormatError` naming the file (and the disagreeing lines) when the op's factor
    is 1 (broadcast, reduce, sendrecv: the file cannot tell n), when no row has both bandwidths
    non-zero, when the rows disagree, or when they allow more than one whole n."""
    if op in FACTOR_ONE:
        raise TraceFormatError(file, None, f"{op}'s busbw equals its algbw whatever the ranks "
                                           "(nccl-tests doc/PERFORMANCE.md): the file does not say how "
                                           "many ranks ran; give --n")
    if op not in _INVERSE:
        raise TraceFormatError(file, None, f"cannot read the ranks of a {op} sweep from its bandwidths; "
                                           "give --n")
    factor, k = _INVERSE[op]
    lo, lo_line, hi, hi_line, used, tight = _bounds(rows, k)
    if not used:
        raise TraceFormatError(file, None, "no row has non-zero algbw and busbw to read the ranks from "
                                           f"(busbw = algbw × {factor}); give --n")
    whole = _whole(lo, hi)
    if not math.isfinite(lo):
        raise TraceFormatError(file, lo_line, f"its busbw/algbw is {k:g} or more, which no number of ranks "
                                              f"gives (busbw = algbw × {factor}); give --n")
    if whole is not None and len(whole) == 0:
        raise TraceFormatError(file, None, f"its rows disagree on the ranks their busbw/algbw implies "
                                           f"(line {lo_line}: n ≥ {lo:.2f}, line {hi_line}: n ≤ {hi:.2f}); "
                                           "give --n")
    if whole is None or len(whole) > 1:
        top = "∞" if not math.isfinite(hi) else f"{hi:.2f}"
        raise TraceFormatError(file, None, f"its bandwidths are too small to tell the ranks (busbw/algbw "
                                           f"allows {lo:.2f} ≤ n ≤ {top}); give --n")
    return RanksFromBandwidth(whole[0], factor, used, tight[1], tight[2])
