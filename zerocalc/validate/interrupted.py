"""Steps on both sides of an interruption: a trace without step markers (a Flight Recorder dump, an NCCL
log) whose steps repeat one block of calls but for calls between some of them that carry no gradients: an
evaluation or a checkpoint taken once in a window of steps, or at no regular interval, so that the block
and the interruption never repeat together (:func:`~.block_steps._steps_in_block` reads those that do).

Each sequence is of integers, one per distinct call, as in :mod:`.repeats`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from zerocalc.validate.repeats import AGAIN, _gradient_weight, _heaviest_stretch, _latest_match

#: The fewest steps an interrupted reading counts: fewer say too little of the block to trust it.
MIN_STEPS = 3


@dataclass(frozen=True)
class Interrupted:
    """Each call's step (0, 1, …; -1 one-off: before the first step, between steps, after the last;
    :data:`~.repeats.AGAIN`: calls a step after an interruption sends again), the block's length in calls,
    and per interruption: (the steps before it, its calls, the calls sent again after it, the calls it
    lent to the step after it)."""

    labels: np.ndarray
    period: int
    breaks: tuple[tuple[int, int, int, int], ...]

    @property
    def steps(self) -> int:
        return int(self.labels.max()) + 1


def interrupted_steps(sig: np.ndarray, load: np.ndarray, carries: np.ndarray,
                      reduces: np.ndarray) -> Interrupted | None:
    """The steps of a rank's calls (``sig``) where one block repeats on both sides of calls that carry no
    gradients; None where none does.

    The block is that of the run of equal blocks holding the most gradient bytes (``load`` of the
    reductions sending at least :data:`~.repeats.GRADIENT_SHARE` of the largest), in the phase that occurs
    most often whole (:func:`_phases`). Each whole occurrence is a step. Between two, the calls may end in a
    step that sends the block's calls and more of its own that carry no gradients (FSDP2 gathers again in
    the backward a module the evaluation's forward left resharded: sent again, one-off), or the block's
    calls but some that carry no gradients (DeepSpeed ZeRO-3 keeps what the evaluation's forward gathered:
    the evaluation's last calls of those kinds count in that step, lent to it), or in no step; the other
    calls between carry no gradients (an evaluation's forward gathers and loss all-reduces, a checkpoint's
    calls). The calls before the first occurrence are one-off, as are those after the last unless they
    end in such a step. Read so where there is at least one interruption, at least :data:`MIN_STEPS` steps
    holding at least half the gradient bytes, and the block holds two or more distinct calls that carry
    data."""
    weight = _gradient_weight(load, reduces)
    stretch = _heaviest_stretch(sig, weight) if weight.any() else None
    if stretch is None:
        return None
    _, per, _, end = stretch
    start = end - per
    if len(set(sig[start:end][carries[start:end]].tolist())) < 2:
        return None
    best = None
    for block, starts in _phases(sig, start, per):
        found = _read(sig, block, starts, weight)
        if found is not None and (best is None or found.steps > best.steps):
            best = found
    return best


def _read(sig: np.ndarray, block: np.ndarray, starts: list[int], weight: np.ndarray) -> Interrupted | None:
    """:func:`interrupted_steps` with the block given, and where it occurs whole (``starts``)."""
    per = len(block)
    graded = weight[starts[0]:starts[0] + per] > 0  # the block's gradient reductions
    steps = [np.arange(s, s + per) for s in starts]
    labels = np.full(len(sig), -1, dtype=np.int64)
    breaks = []
    edges = [(-1, 0, starts[0])] + [(a, a + per, b) for a, b in zip(starts, [*starts[1:], len(sig)],
                                                                   strict=True)]
    for a, lo, hi in edges:
        gap = np.arange(lo, hi)
        if not len(gap):
            continue
        where = "prefix" if a < 0 else "suffix" if hi == len(sig) else "inner"
        ending = _step_ending(sig[gap], block, graded, weight[gap], where)
        if ending is None:
            if where == "inner":
                return None
            continue  # before the first step or after the last: one-off, as a repeating run's are
        own, again, between, lent = ending
        if len(own):
            steps.append(gap[own])
        labels[gap[again]] = AGAIN
        if len(between) or len(again):
            breaks.append((a if where != "prefix" else -1, len(between), len(again), lent))
    steps.sort(key=lambda s: int(s.min()))
    if not breaks:  # none between whole steps: one just before the first or after the last
        breaks = _edge_breaks(sig, block, weight, int(steps[0].min()), int(steps[-1].max()))
    if not breaks:
        return None
    for i, s in enumerate(steps):
        labels[s] = i
    if len(steps) < MIN_STEPS or weight[labels >= 0].sum() < weight.sum() / 2:
        return None
    first = {int(s.min()): i + 1 for i, s in enumerate(steps)}
    first[-1], first[len(sig)] = 0, len(steps)
    return Interrupted(labels, per, tuple((first[a], n, again, lent) for a, n, again, lent in breaks))


def _step_ending(gap: np.ndarray, block: np.ndarray, graded: np.ndarray, weight: np.ndarray, where: str
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int] | None:
    """Where calls next to whole steps end in a step (:func:`interrupted_steps`; ``where``: ``"inner"``
    between two whole steps, ``"prefix"`` before the first, ``"suffix"`` after the last): the indices in
    ``gap`` of that step's calls, of the calls it sends again, of the calls between (an evaluation's or a
    checkpoint's), and how many of the step's calls the evaluation lent it (its calls before the last of
    the evaluation's own, DeepSpeed ZeRO-3's kept gathers); the calls before the step are between (inner:
    none may carry gradients) or one-off (prefix); None where no step ends the calls and they are no
    evaluation or checkpoint. ``graded``: the block's gradient reductions; ``weight``: gradient bytes."""
    none = np.zeros(0, dtype=np.int64)
    if not weight.any():
        return (none, none, np.arange(len(gap)), 0) if where == "inner" else None
    matched = _latest_match(gap, block)
    if matched is not None and matched[-1] == len(gap) - 1:
        extra = np.setdiff1d(np.arange(int(matched[0]), len(gap)), matched)
        if weight[extra].any() or (where != "prefix" and weight[:matched[0]].any()):
            return None
        mine = np.isin(gap[extra], block)
        other = extra[~mine]
        lent = int((matched < other.max()).sum()) if len(other) else 0
        before = np.arange(int(matched[0])) if where != "prefix" else none
        return matched, extra[mine], np.concatenate([before, other]), lent
    return _lent_ending(gap, block, graded, weight) if where == "inner" else None


def _lent_ending(gap: np.ndarray, block: np.ndarray, graded: np.ndarray, weight: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int] | None:
    """:func:`_step_ending` where the step sends the block's calls but some that carry no gradients: each
    such call is the latest of its kind before the step (the evaluation's, lent to it); None where the
    calls do not end so, or those left carry gradients."""
    none = np.zeros(0, dtype=np.int64)
    own, skipped, i = [], [], len(gap) - 1
    for j in range(len(block) - 1, -1, -1):  # from the end
        if i >= 0 and gap[i] == block[j]:
            own.append(i)
            i -= 1
        elif graded[j]:
            return None
        else:
            skipped.append(int(block[j]))
    first = own[-1] if own else len(gap)
    lent, free = [], list(range(first - 1, -1, -1))
    for code in skipped:  # the latest call of its kind before the step, not yet lent
        at = next((k for k in free if gap[k] == code), None)
        if at is None:
            return None
        free.remove(at)
        lent.append(at)
    step = np.array(sorted(own + lent), dtype=np.int64)
    rest = np.setdiff1d(np.arange(len(gap)), step)
    if weight[rest].any():
        return None
    return step, none, rest, len(lent)


def _edge_breaks(sig: np.ndarray, block: np.ndarray, weight: np.ndarray, lo: int,
                 hi: int) -> list[tuple[int, int, int, int]]:
    """The interruptions next to the first step (calls ``lo`` on) or the last (up to ``hi``): the calls
    between it and the nearest gradient reduction beyond it, where they are some and hold a call of a kind
    the block does not send (an evaluation's loss all-reduce, a checkpoint's objects), as (-1 before the
    first step, ``len(sig)`` after the last; the calls; 0; 0), the key :func:`_read` numbers steps by."""
    graded = np.flatnonzero(weight > 0)
    out = []
    before = graded[graded < lo]
    span = np.arange(int(before[-1]) + 1 if len(before) else 0, lo)
    if len(span) and not np.isin(sig[span], block).all():
        out.append((-1, len(span), 0, 0))
    after = graded[graded > hi]
    span = np.arange(hi + 1, int(after[0]) if len(after) else len(sig))
    if len(after) and len(span) and not np.isin(sig[span], block).all():
        out.append((len(sig), len(span), 0, 0))
    return out


def _occurrences(hits: np.ndarray, per: int) -> list[int]:
    """Of the places a block of ``per`` calls occurs whole (``hits``, ascending), those none overlapping,
    left to right."""
    out, end = [], -1
    for h in hits.tolist():
        if h >= end:
            out.append(h)
            end = h + per
    return out


#: The most phases of the block :func:`_phases` offers, those occurring most often first.
MAX_PHASES = 64


def _phases(sig: np.ndarray, start: int, per: int) -> list[tuple[np.ndarray, list[int]]]:
    """The rotations of the block ``sig[start:start + per]`` that occur whole twice or more, each with the
    places it does (:func:`_occurrences`), most places first (the phase a step begins at occurs at every
    step; another only where steps are adjacent), ties by rotation; at most :data:`MAX_PHASES`. Every
    window of ``per`` calls is hashed once (two polynomial hashes) and checked call by call where its hash
    is a rotation's."""
    windows = sliding_window_view(sig, per)
    doubled = np.concatenate([sig[start:start + per]] * 2)
    rots = sliding_window_view(doubled, per)[:per]
    keys = []
    for base, mod in ((1_000_003, 2_147_483_647), (999_983, 2_147_483_629)):
        powers = np.ones(per, dtype=np.int64)
        for k in range(per - 2, -1, -1):
            powers[k] = powers[k + 1] * base % mod
        keys.append((_hash(windows, powers, mod), _hash(rots, powers, mod)))
    w = keys[0][0] * 2_147_483_648 + keys[1][0]
    rot = keys[0][1] * 2_147_483_648 + keys[1][1]
    order = np.argsort(w, kind="stable")
    values, first, counts = np.unique(w[order], return_index=True, return_counts=True)
    at = np.clip(np.searchsorted(values, rot), 0, len(values) - 1)
    n = np.where(values[at] == rot, counts[at], 0)
    out = []
    for r in np.lexsort((np.arange(per), -n))[:MAX_PHASES].tolist():
        if n[r] < 2:
            break
        hits = np.sort(order[first[at[r]]:first[at[r]] + counts[at[r]]])
        hits = hits[(windows[hits] == rots[r]).all(axis=1)]
        starts = _occurrences(hits, per)
        if len(starts) >= 2:
            out.append((rots[r].copy(), starts))
    return out


def _hash(rows: np.ndarray, powers: np.ndarray, mod: int) -> np.ndarray:
    """Each row's polynomial hash modulo ``mod`` (rows of small non-negative integers), column by column so
    that no product overflows."""
    h = np.zeros(len(rows), dtype=np.int64)
    for k in range(rows.shape[1]):
        h = (h + (rows[:, k].astype(np.int64) % mod) * powers[k]) % mod
    return h
