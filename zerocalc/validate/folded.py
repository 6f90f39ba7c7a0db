"""Measuring a folded trace: the calls of a table from which repeated steps were dropped
(:mod:`zerocalc.traces.nccl_fold`), each kept call weighted by the calls it stands for.

Every sum and count over calls, (rank, step) pairs or cells is taken with these weights, so it is
the full trace's; the steps found on the folded calls are corrected by the blocks dropped
(:func:`unfold_steps`) after checking that the folded calls show the full trace's steps. Where that
cannot be shown, or a float sum would not be exact (and so could differ in its last bit from the
full trace's), :class:`Unfoldable` is raised and the caller measures the full trace instead: folding
changes no answer.
"""

from __future__ import annotations

import numpy as np


class Unfoldable(Exception):
    """The folded trace cannot be shown to give the full trace's answer: measure the full trace."""


def weighted(values: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    """``values`` × ``w`` (``values`` when unweighted), after checking that any float sum of them is
    exact, so that it equals the full trace's sum of the calls they stand for, in any order."""
    if w is None:
        return values
    exact(values, w)
    return values * w


def exact(values: np.ndarray, w: np.ndarray) -> None:
    """Raise :class:`Unfoldable` unless the weighted values are multiples of one power of two 2⁻ᵏ
    whose magnitudes sum below 2⁶²⁻ᵏ (NaN left out): every sum of them is then exact
    (:func:`~zerocalc.validate.columns.group_sums`), of the full trace's calls as of the weighted
    ones."""
    from zerocalc.validate.columns import dyadic_scale

    v = np.asarray(values, dtype=np.float64)
    keep = ~np.isnan(v)
    if keep.any() and dyadic_scale(v[keep] * w[keep]) is None:
        raise Unfoldable("a sum of these values is not exact in floating point")


def weighted_median(values: np.ndarray, w: np.ndarray | None) -> float:
    """The median of ``values`` each repeated ``w`` times (pandas' median of the repeated values)."""
    import pandas as pd

    if w is None:
        return float(pd.Series(values).median())
    order = np.argsort(values, kind="stable")
    v, cw = np.asarray(values, dtype=np.float64)[order], np.cumsum(w[order])
    n = int(cw[-1])
    lo = v[int(np.searchsorted(cw, (n - 1) // 2, side="right"))]
    hi = v[int(np.searchsorted(cw, n // 2, side="right"))]
    return float(lo) if n % 2 else float((lo + hi) / 2)


def unfold_steps(sig: np.ndarray, w: np.ndarray, per: int, reps: int) -> int:
    """The steps of one rank in the full trace, from those found in its folded calls (``sig``: its
    calls' step signatures, ``w`` their weights; ``per`` calls per step, ``reps`` steps).

    The weighted calls are the rank's last block of ``p`` calls, which stands for ``w - 1`` blocks
    dropped from the run of equal blocks that ends the rank's calls. The full trace has the folded
    trace's steps when ``per`` is the shortest period of that run and divides ``p`` (the steps then
    cover the whole run, in both, and the dropped blocks are ``(w - 1) p / per`` more steps).
    """
    heavy = np.flatnonzero(w > 1)
    if not len(heavy):
        return reps
    m, p = len(w), len(heavy)
    if heavy[0] != m - p or not np.all(w[heavy] == w[heavy[0]]):
        raise Unfoldable("the weighted calls are not one block ending the rank's calls")
    if reps < 2 or p % per or per * reps < 2 * p:
        raise Unfoldable("the steps found do not divide the folded block")
    block = sig[m - per:]
    for q in range(1, per):  # the shortest period of the steps' run
        if per % q == 0 and np.array_equal(block[q:], block[:-q]):
            raise Unfoldable("the steps found are not the shortest period")
    return reps + (int(w[heavy[0]]) - 1) * (p // per)
