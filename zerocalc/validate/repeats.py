"""Repeated blocks in a rank's call sequence: the runs of equal blocks that steps and micro-batches are
read from (:mod:`.steps`, :mod:`.micro_batches`). Each sequence is of integers, one per distinct call.

Linear-time where the search is for a run at an end of the sequence (the Z-algorithm, Gusfield 1997,
§1.4); one pass a period where it is for the run anywhere that holds the gradients' bytes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _z_function(codes: Sequence[int]) -> np.ndarray:
    """``z[i]`` = length of the longest common prefix of ``codes`` and ``codes[i:]`` (``z[0] = len``).

    The linear-time Z-algorithm (Gusfield 1997, §1.4).
    """
    m = len(codes)
    z = [0] * m
    if m:
        z[0] = m
    lo = hi = 0
    for i in range(1, m):
        k = min(hi - i, z[i - lo]) if i < hi else 0
        while i + k < m and codes[k] == codes[i + k]:
            k += 1
        z[i] = k
        if i + k > hi:
            lo, hi = i, i + k
    return np.asarray(z, dtype=np.int64)


def _repeating_suffix(sig: Sequence, want: int | None, *, min_period: int = 1) -> tuple[int, int]:
    """(period, repetitions) of equal blocks ending the sequence.

    Without ``want``: the run of at least two equal blocks that covers the most calls (ties: the
    shorter period), considering only periods ≥ ``min_period`` (the caller's way of refusing a block
    made only of scalar collectives). With ``want`` (``--steps K``): the *longest* block repeated
    at least K times at the end, so that K = 1 takes the whole sequence as one step; (0, 0) when
    there is none.

    Linear in the length: reversed, the sequence ends in ``r`` repetitions of period ``p`` exactly
    when its Z-function at ``p`` is at least ``(r - 1)·p``.
    """
    m = len(sig)
    if m == 0:
        return (0, 0)
    if isinstance(sig, np.ndarray):
        codes = sig[::-1].tolist()
    else:
        index: dict = {}
        codes = [index.setdefault(x, len(index)) for x in reversed(list(sig))]
    z = _z_function(codes)
    periods = np.arange(1, m + 1)
    reps = 1 + np.minimum(np.append(z[1:], 0), m - periods) // periods
    if want is None:
        ok = (reps >= 2) & (periods >= min_period)
        if not ok.any():
            return (0, 0)
        cover = np.where(ok, periods * reps, 0)
        i = int(np.argmax(cover))  # first maximum: the shortest period among ties
        return int(periods[i]), int(reps[i])
    ok = np.flatnonzero(reps >= max(want, 1))
    if not len(ok):
        return (0, 0)
    i = int(ok[-1])
    return int(periods[i]), int(want)


def _leading_repeats(codes: Sequence[int]) -> tuple[int, int]:
    """(period, repetitions) of the block that starts the sequence and repeats back to back, covering the
    most calls (ties: the shorter period); (len, 1) when nothing repeats. Z-function as in
    :func:`_repeating_suffix`, read forwards."""
    m = len(codes)
    if m < 2:
        return m, 1
    z = _z_function(codes)
    periods = np.arange(1, m // 2 + 1)
    reps = 1 + np.minimum(z[periods], m - periods) // periods
    cover = np.where(reps >= 2, periods * reps, 0)
    i = int(np.argmax(cover))  # first maximum: the shorter period among ties
    return (int(periods[i]), int(reps[i])) if cover[i] > 0 else (m, 1)


#: The most calls without data (scalars, barriers) that may close a rank's calls after its last step.
MAX_TAIL = 8


def _before_tail(sig: np.ndarray, carries: np.ndarray) -> tuple[int, int, int] | None:
    """(period, repetitions, tail) where a rank's calls end in a few calls that carry no data (a closing
    barrier, a last loss all-reduce; at most :data:`MAX_TAIL`) after repetitions of a block: the block ending
    the calls before them, where it repeats and holds two or more distinct calls that carry data (one
    repeated call alone is as much a step's buckets as steps); None otherwise."""
    data_at = np.flatnonzero(carries)
    if not len(data_at):
        return None
    tail = len(sig) - 1 - int(data_at[-1])
    if not 0 < tail <= MAX_TAIL:
        return None
    body = sig[:len(sig) - tail]
    per, reps = _repeating_suffix(body, None, min_period=1)
    if per == 0:
        return None
    block = slice(len(body) - per, len(body))
    if len(set(body[block][carries[:len(body)][block]].tolist())) < 2:
        return None
    return per, reps, tail


#: The label :func:`~.block_steps._steps_in_block` gives the calls a step after an evaluation sends again
#: (-1: between steps).
AGAIN = -2
#: The longest step, in calls, that :func:`_heaviest_run` looks for.
MAX_RUN_PERIOD = 1024
#: A reduction counts as a gradient's where it sends at least this share of the rank's largest reduction:
#: an evaluation's loss or metric all-reduce sends next to nothing beside a step's gradients.
GRADIENT_SHARE = 1 / 64


def _heavier_run(found: tuple[int, int, int], sig: np.ndarray, load: np.ndarray, carries: np.ndarray,
                 reduces: np.ndarray) -> tuple[int, int, int]:
    """``found`` (period, repetitions, tail: the run ending a rank's calls, period 0 for none), or the run
    :func:`_heaviest_run` finds where ``found`` is none or holds under half the rank's gradient bytes, and
    that run holds more. ``load``: the bytes each call sends; ``reduces``: the reductions carrying data,
    of which those sending at least :data:`GRADIENT_SHARE` of the largest are the gradients' (without any,
    every call's bytes count)."""
    per, reps, tail = found
    weight = _gradient_weight(load, reduces)
    end = len(sig) - tail
    held = float(weight[end - per * reps:end].sum()) if per else 0.0
    if per and held >= weight.sum() / 2:
        return found
    run = _heaviest_run(sig, load, carries, weight)
    if run is None or (per and run[3] <= held):
        return found
    return run[:3]


def _gradient_weight(load: np.ndarray, reduces: np.ndarray) -> np.ndarray:
    """The bytes of the gradients' reductions (:data:`GRADIENT_SHARE`), per call; every call's bytes where
    there are no reductions."""
    if not reduces.any():
        return load
    return np.where(reduces & (load >= load[reduces].max() * GRADIENT_SHARE), load, 0.0)


def _next_to_nothing(load: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """The calls that send under :data:`GRADIENT_SHARE` of the largest gradient reduction (``weight``:
    :func:`_gradient_weight`): a loss or metric all-reduce beside a step's gradients."""
    return load < weight.max() * GRADIENT_SHARE


def _latest_match(seq: np.ndarray, sub: np.ndarray) -> np.ndarray | None:
    """The indices of ``seq`` where ``sub`` is a subsequence of it matched from the end, the latest each
    (the first is the last index from which the rest holds ``sub``); None where it is none."""
    at, j = [], len(sub) - 1
    for i in range(len(seq) - 1, -1, -1):
        if j < 0:
            break
        if seq[i] == sub[j]:
            at.append(i)
            j -= 1
    return None if j >= 0 else np.array(at[::-1], dtype=np.int64)


def _heaviest_run(sig: np.ndarray, load: np.ndarray, carries: np.ndarray, weight: np.ndarray
                  ) -> tuple[int, int, int, float] | None:
    """(period, repetitions, tail, weight) of the run of two or more equal blocks, anywhere in a rank's
    calls, that holds the most ``weight`` (the gradient bytes of :func:`_heavier_run`; ties: the shorter
    period), with the calls after it as the tail; None unless that run is the bulk of a run of steps: it
    holds at least half the weight, its block holds two or more distinct calls that carry data (one repeated
    call alone is as much a step's buckets as steps), and the calls before it do not send a block's bytes
    (``load``) in calls of the block (else the block is a part of a longer step, as the backward's gathers
    and reduce-scatters of equal layers are, after the forward's gathers of the same layers). The calls after
    it may (an evaluation gathers the parameters again, as a checkpoint's full state dict does).

    Each period ``p`` (up to :data:`MAX_RUN_PERIOD`) is one pass: ``sig[i] == sig[i + p]`` over a stretch
    of ``L ≥ p`` calls is a run of ``(L + p) // p`` blocks, here taken to begin where the stretch does: what
    follows a run of steps in the middle of a trace may begin as a step does (an evaluation's forward
    gathers), what precedes it seldom ends as one does.
    """
    m = len(sig)
    best = _heaviest_stretch(sig, weight)
    if best is None:
        return None
    held, p, reps, end = best
    wsum_all = float(np.cumsum(weight, dtype=np.float64)[-1])  # as the scan sums it
    start = end - p * reps
    block = sig[end - p:end]
    in_block = np.isin(sig[:start], block)
    if (held < wsum_all / 2 or len(set(block[carries[end - p:end]].tolist())) < 2
            or load[:start][in_block].sum() >= load[end - p:end].sum()):
        return None
    return p, reps, m - end, held


def _heaviest_stretch(sig: np.ndarray, weight: np.ndarray) -> tuple[float, int, int, int] | None:
    """(weight, period, repetitions, end) of the run of two or more equal blocks, anywhere in ``sig``, that
    holds the most ``weight`` (ties: the shorter period), each period one pass (:func:`_heaviest_run`);
    None where no run holds any."""
    m = len(sig)
    wsum = np.concatenate(([0.0], np.cumsum(weight, dtype=np.float64)))
    best: tuple[float, int, int, int] | None = None  # (weight, period, repetitions, end)
    for p in range(1, min(m // 2, MAX_RUN_PERIOD) + 1):
        edges = np.diff(np.concatenate(([0], (sig[:-p] == sig[p:]).view(np.int8), [0])))
        lo, hi = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
        long = hi - lo >= p
        if not long.any():
            continue
        lo, hi = lo[long], hi[long]
        reps = (hi - lo + p) // p
        end = lo + reps * p
        held = wsum[end] - wsum[lo]
        i = int(np.argmax(held))
        if best is None or held[i] > best[0]:
            best = (float(held[i]), p, int(reps[i]), int(end[i]))
    return None if best is None or best[0] <= 0 else best


