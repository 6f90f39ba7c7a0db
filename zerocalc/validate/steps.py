"""Steps: where each rank's steps begin and end, from the trace's step markers or its repeating call
sequences (:mod:`.repeats`).

Each search runs once per distinct call sequence (a rank's calls), not once per rank: the ranks of a
data-parallel run make the same calls. Sources: §7 (micro-batches and gradient accumulation) and the
trace formats of §5.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from zerocalc.errors import TraceMismatchError
from zerocalc.validate.accounting import _OP_VERBS, _plural
from zerocalc.validate.classify import GRADIENT_OPS
from zerocalc.validate.columns import Codes, group_codes, run_bounds, zero_nan
from zerocalc.validate.folded import Unfoldable, unfold_steps
from zerocalc.validate.repeats import (
    GRADIENT_SHARE,
    _before_tail,
    _gradient_weight,
    _heavier_run,
    _repeating_suffix,
    _steps_in_block,
)


def infer_steps(marked: np.ndarray | None, rank: np.ndarray, ops: Codes, in_e: np.ndarray, out_e: np.ndarray,
                gs: np.ndarray, small: np.ndarray, steps: int | None,
                w: np.ndarray | None = None,
                sent: np.ndarray | None = None) -> tuple[np.ndarray, str, list[str]]:
    """The step of every call (-1 outside the steps), how the steps were found, and notes.

    From the trace's step markers (``marked``: each call's step, NaN where unmarked; None: no column)
    where it has them (K marked steps to an optimizer step where they mark micro-batches:
    :func:`_marked_micro_batches`); else each rank's calls (sorted by rank) end in repetitions of one
    pattern (:func:`~.repeats._repeating_suffix`) that holds at least one collective carrying data; where
    that run holds under half the gradients' bytes (from ``sent``, each call's), or there is none, the run
    that holds the most anywhere (:func:`~.repeats._heavier_run`), with the calls after it (evaluation, a
    checkpoint, a step cut short) one-off. ``in_e`` and ``out_e`` are spent: their NaN become 0. ``w``:
    each call's weight in a folded trace
    (:mod:`.folded`): the steps are found on the calls kept and said of the full trace
    (:func:`~.folded.unfold_steps`); the step ids are those of the calls kept.
    """
    if w is not None and (steps is not None or (marked is not None and not np.isnan(marked).all())):
        raise Unfoldable("--steps and step markers are read on the full trace")
    # one integer per distinct (op, in, out, group size): the sequence a step pattern repeats in
    sig, _ = group_codes(ops.codes, zero_nan(in_e, inplace=True), zero_nan(out_e, inplace=True), gs)
    carries, reduces = ops.isin(_OP_VERBS) & ~small, ops.isin(GRADIENT_OPS) & ~small
    if marked is not None and not np.isnan(marked).all():
        light = ~carries
        if sent is not None and reduces.any():
            light |= sent < _gradient_weight(sent, reduces).max() * GRADIENT_SHARE
        return _marked_steps(marked, rank, sig, steps, light)
    load = None if sent is None else sent if w is None else sent * w
    step_id, periods, tails, between = _repeated_steps(rank, sig, carries, reduces, steps, w, load)
    return (step_id, *_repeated_how(periods, tails, steps, between))


def _marked_steps(marked: np.ndarray, rank: np.ndarray, sig: np.ndarray, steps: int | None,
                  light: np.ndarray | None = None) -> tuple[np.ndarray, str, list[str]]:
    """:func:`infer_steps` where the trace marks its steps: each call's marked step, or the optimizer
    step of the micro-batches the markers mark (:func:`_marked_micro_batches`). Where every K-th marked
    step holds an evaluation instead (:func:`_evaluations`), its calls are one-off. ``light``: the calls
    that carry no data or next to nothing (a loss or metric all-reduce)."""
    step_id = np.full(len(rank), -1, dtype=np.int32)
    step_marked = ~np.isnan(marked)
    step_id[step_marked] = marked[step_marked].astype(np.int32)
    n_marked = len(np.unique(step_id[step_marked]))
    grouped = _marked_micro_batches(step_id, rank, sig)
    evaluated = (None if grouped is None or light is None or steps not in (None, n_marked)
                 else _evaluations(step_id, rank, sig, light))
    if evaluated is not None:
        n_eval, k = evaluated
        return step_id, (f"{n_marked} step(s) from the trace's step markers; every {_ordinal(k)} also "
                         "holds an evaluation (the forward's calls again, and small all-reduces: "
                         f"{_plural(n_eval, 'call')} in all), counted one-off"), []
    if grouped is not None and steps in (None, grouped[1]):
        regrouped, n, k, partial = grouped
        how = (f"{n} optimizer step(s) from the trace's step markers, which mark micro-batches: every "
               f"{_ordinal(k)} marked step holds more calls (the optimizer's), so {k} make one optimizer "
               "step")
        if partial:
            how += f"; {partial} marked step(s) of an optimizer step the trace holds in part count as one-off"
        return regrouped, how, [f"the trace marks {n_marked} steps, taken as micro-batches of {n} optimizer "
                                f"steps (K = {k}): give --steps {n_marked} if each marked step is an "
                                "optimizer step"]
    if steps is not None and steps != n_marked:
        raise TraceMismatchError(f"--steps {steps} but the trace marks {n_marked} step(s)")
    return step_id, f"{n_marked} step(s) from the trace's step markers", []


def _repeated_steps(rank: np.ndarray, sig: np.ndarray, carries: np.ndarray, reduces: np.ndarray,
                    steps: int | None, w: np.ndarray | None, load: np.ndarray | None):
    """:func:`infer_steps` without markers: each call's step, and per rank (calls per step, steps, calls
    before the first), (calls after the last, whether they carry data) and (calls between steps, steps
    between them) where the repeated block is steps and an evaluation (:func:`~.repeats._steps_in_block`).
    ``carries`` / ``reduces``: the calls carrying data / the reductions among them; ``load``: each call's
    bytes, weighted."""
    step_id = np.full(len(rank), -1, dtype=np.int32)
    periods: dict[int, tuple[int, int, int]] = {}
    tails: dict[int, tuple[int, bool]] = {}
    between: dict[int, tuple[int, int]] = {}
    bounds = run_bounds(rank)
    # ranks that made the same calls: one search
    found: dict[tuple[bytes, bytes, int], tuple[int, int, int, tuple[int, int, int] | None]] = {}
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        r, n_calls = int(rank[lo]), hi - lo
        data_at = np.flatnonzero(carries[lo:hi])
        # a step must hold at least one collective that carries data: the last p calls do
        # exactly when p reaches back to the last such call
        min_period = n_calls - int(data_at[-1]) if len(data_at) else n_calls + 1
        key = (sig[lo:hi].tobytes(), b"" if load is None else load[lo:hi].tobytes(), min_period)
        if key not in found:
            run = _rank_run(sig[lo:hi], carries[lo:hi], reduces[lo:hi],
                            None if load is None else load[lo:hi], steps, min_period)
            block = slice(hi - run[2] - run[0], hi - run[2])
            inner = (_steps_in_block(sig[block], load[block], carries[block], reduces[block])
                     if run[0] and load is not None and steps is None else None)
            found[key] = (*run, inner)
        per, reps, tail, inner = found[key]
        hi, n_calls = hi - tail, n_calls - tail  # the calls after the last step are one-off
        tails[r] = (tail, bool(carries[hi:hi + tail].any()))
        if per == 0:
            if steps is not None:
                raise TraceMismatchError(
                    f"--steps {steps}: the calls of rank {r} do not end in {steps} repetitions "
                    "of one pattern"
                )
            per, reps = n_calls, 1
        start = n_calls - per * reps
        if inner is None:
            step_id[lo + start:hi] = np.arange(per * reps) // per
            if w is not None:
                reps = unfold_steps(sig[lo:hi], w[lo:hi], per, reps)
            periods[r] = (per, reps, start)
            continue
        labels, late = inner
        k = int(labels.max()) + 1
        ids = _steps_between(labels, late, reps)
        step_id[lo + start:hi] = ids
        n_steps = int(ids.max()) + 1
        if w is not None:
            n_steps += (unfold_steps(sig[lo:hi], w[lo:hi], per, reps) - reps) * k
        periods[r] = (int(np.bincount(labels[labels >= 0]).min()), n_steps, start + int(np.argmax(ids >= 0)))
        between[r] = (int((labels < 0).sum()), k)
    return step_id, periods, tails, between


def _steps_between(labels: np.ndarray, late: np.ndarray, reps: int) -> np.ndarray:
    """The step of each call of ``reps`` blocks, each of k steps and calls between them (``labels``: each
    call's step in its block, -1 between; ``late``: of the step the next block begins): -1 between steps
    and in a step the blocks hold in part; the steps numbered from 0."""
    per, k = len(labels), int(labels.max()) + 1
    pos = np.arange(per * reps)
    lab = labels[pos % per]
    ids = np.where(lab >= 0, (pos // per + late[pos % per]) * k + lab, -1)
    kept = ids >= 0
    size = np.bincount(labels[labels >= 0], minlength=k)  # each step's calls in a block
    counts = np.bincount(ids[kept])
    full = counts[ids[kept]] == size[lab[kept]]
    ids[np.flatnonzero(kept)[~full]] = -1
    kept = ids >= 0
    ids[kept] = np.unique(ids[kept], return_inverse=True)[1]
    return ids


def _rank_run(sig: np.ndarray, carries: np.ndarray, reduces: np.ndarray, load: np.ndarray | None,
              steps: int | None, min_period: int) -> tuple[int, int, int]:
    """(period, repetitions, tail) of one rank's steps (:mod:`.repeats`): the repetitions ending its calls
    (``--steps``: that many), else those before a few closing calls without data, or the run anywhere that
    holds the gradients' bytes."""
    found = (*_repeating_suffix(sig, steps, min_period=min_period), 0)
    if steps is not None:
        return found
    if found[0] == 0:  # nothing repeats to the end: scalars may close the run
        found = _before_tail(sig, carries) or found
    return found if load is None else _heavier_run(found, sig, load, carries, reduces)


def _repeated_how(periods: dict[int, tuple[int, int, int]], tails: dict[int, tuple[int, bool]],
                  steps: int | None, between: dict[int, tuple[int, int]] | None = None
                  ) -> tuple[str, list[str]]:
    """How :func:`_repeated_steps` found the steps, in words, and a note where ranks differ."""
    pers = sorted({v[:2] for v in periods.values()})
    per, reps = pers[0]
    lead = max(v[2] for v in periods.values())
    if steps is not None:
        steps_how = ("1 step from --steps 1: each rank's whole trace is one step" if steps == 1 else
                     f"{reps} step(s) from --steps (the longest run of {reps} equal blocks ending each "
                     f"rank's calls: {_plural(per, 'call')} per step)")
    elif reps == 1:
        steps_how = "no step markers and no repeating pattern: the whole trace is taken as one step"
    else:
        steps_how = (f"{reps} step(s) from a repeating pattern of {_plural(per, 'call')} per step "
                     "(the trace has no step markers)")
    if between:
        n, k = max(between.values())
        steps_how += (f"; the {_plural(n, 'call')} after every {k} steps, which carry no gradients (an "
                      "evaluation), count as one-off")
    if lead:
        steps_how += f"; {lead} call(s) before the first repetition count as one-off"
    tail, data = max(tails.values(), default=(0, False))
    if tail and data:
        steps_how += (f"; {tail} call(s) after the last repetition (evaluation, a checkpoint or a step cut "
                      "short) count as one-off")
    elif tail:
        steps_how += (f"; {tail} call(s) without data after the last repetition (a closing barrier or loss "
                      "all-reduce) count as one-off")
    notes = []
    if len(pers) > 1:
        notes.append("ranks differ in their calls (calls per step × steps): "
                     + ", ".join(f"{p_} × {r_}" for p_, r_ in pers))
    return steps_how, notes


def _ordinal(k: int) -> str:
    """2nd, 3rd, 4th, 11th, 21st."""
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"


def _evaluations(step_id: np.ndarray, rank: np.ndarray, sig: np.ndarray, light: np.ndarray
                 ) -> tuple[int, int] | None:
    """Where every K-th marked step holds the others' calls and an evaluation, not the optimizer's calls
    after K micro-batches (:func:`_marked_micro_batches`): the more calls are all the step's own (the
    forward's gathers again) or ``light`` (a loss or metric all-reduce), and some are the step's own
    carrying data. Then those calls of each such step are one-off (``step_id`` -1, in place; the first of
    each kind in the step is the step's own) and (calls set so, K) is returned; None otherwise, ``step_id``
    untouched."""
    bounds = run_bounds(rank)
    plans, ks = [], set()
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        ids, codes, lite = step_id[lo:hi], sig[lo:hi], light[lo:hi]
        marks = np.unique(ids[ids >= 0]).tolist()
        calls = {m: Counter(codes[ids == m].tolist()) for m in marks}
        kinds = Counter(tuple(sorted(c.items())) for c in calls.values())
        if len(kinds) != 2:
            return None
        (a, _), (b, _) = kinds.most_common()
        a, b = Counter(dict(a)), Counter(dict(b))
        extra = b - a
        if a - b or not extra:
            return None
        weightless = {int(c): bool(lite[codes == c].all()) for c in extra}
        if not all(c in a or weightless[c] for c in extra) or all(weightless[c] for c in extra if c in a):
            return None
        ends = [m for m in marks if calls[m] == b]
        gaps = {y - x for x, y in zip(ends, ends[1:], strict=False)}
        ks |= gaps or {0}
        plans.append((lo, hi, ends, a))
    if len(ks) != 1:
        return None
    n = 0
    for lo, hi, ends, a in plans:
        for m in ends:
            at = lo + np.flatnonzero(step_id[lo:hi] == m)
            left = Counter(a)
            for i in at.tolist():
                if left[sig[i]] > 0:
                    left[sig[i]] -= 1
                else:
                    step_id[i] = -1
                    n += 1
    return n, ks.pop()


def _marked_micro_batches(step_id: np.ndarray, rank: np.ndarray, sig: np.ndarray
                          ) -> tuple[np.ndarray, int, int, int] | None:
    """Where the markers mark micro-batches rather than optimizer steps (DeepSpeed's loop, ``engine.step()``
    then ``prof.step()`` every micro-batch): (each call's optimizer step, -1 outside, the optimizer steps,
    K, the marked steps left out as parts of an optimizer step the trace holds in part); None otherwise.

    So read where on every rank the marked steps holding calls are of two kinds, the same calls (A) in all
    but every K-th (B, K ≥ 2), which holds A's calls and more (the optimizer's gathers, its overflow check),
    at least twice, with the K - 1 marked steps before each B all A: an optimizer step is B and the K - 1
    before it. Marked steps with no calls (micro-batches that send nothing, as under ZeRO-1) leave the
    steps as marked: each that holds calls is an optimizer step already.
    """
    bounds = run_bounds(rank)
    out = np.full(len(step_id), -1, dtype=np.int32)
    found: set[tuple[int, int, int]] = set()
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        ids, codes = step_id[lo:hi], sig[lo:hi]
        at = np.flatnonzero(ids >= 0)
        order = at[np.argsort(ids[at], kind="stable")]  # each marked step's calls together, in time order
        marks, first = np.unique(ids[order], return_index=True)
        marks = marks.tolist()
        calls = dict(zip(marks, map(tuple, np.split(codes[order], first[1:])), strict=True))
        kinds = Counter(calls.values())
        if len(kinds) != 2:
            return None
        (a, _), (b, n_b) = kinds.most_common()
        if n_b < 2 or Counter(a) - Counter(b) or len(b) <= len(a):
            return None
        ends = [m for m in marks if calls[m] == b]
        gaps = {y - x for x, y in zip(ends, ends[1:], strict=False)}
        if len(gaps) != 1 or (k := gaps.pop()) < 2:
            return None
        for e in ends[1:]:
            if any(calls.get(m) != a for m in range(e - k + 1, e)):
                return None
        # the ends after the first are whole; the first is where the window holds its K - 1 before it
        whole = ends if all(calls.get(m) == a for m in range(ends[0] - k + 1, ends[0])) else ends[1:]
        first_mark, last_mark = whole[0] - k + 1, whole[-1]
        inside = (ids >= first_mark) & (ids <= last_mark)
        out[lo:hi][inside] = (ids[inside] - first_mark) // k
        partial = sum(1 for m in marks if not first_mark <= m <= last_mark)
        found.add((k, len(whole), partial))
    if len(found) != 1:
        return None
    k, n, partial = found.pop()
    return out, n, k, partial
