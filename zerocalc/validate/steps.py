"""Steps: where each rank's steps begin and end, from the trace's step markers (:mod:`.marked_steps`) or
its repeating call sequences (:mod:`.repeats`).

Each search runs once per distinct call sequence (a rank's calls), not once per rank: the ranks of a
data-parallel run make the same calls. Sources: §7 (micro-batches and gradient accumulation) and the
trace formats of §5.
"""

from __future__ import annotations

import numpy as np

from zerocalc.errors import TraceMismatchError
from zerocalc.validate.accounting import _OP_VERBS, _plural
from zerocalc.validate.block_steps import _steps_in_block
from zerocalc.validate.classify import GRADIENT_OPS
from zerocalc.validate.columns import Codes, group_codes, run_bounds, zero_nan
from zerocalc.validate.folded import Unfoldable, unfold_steps
from zerocalc.validate.interrupted import interrupted_steps
from zerocalc.validate.marked_steps import _marked_steps
from zerocalc.validate.repeats import (
    AGAIN,
    _before_tail,
    _gradient_weight,
    _heavier_run,
    _next_to_nothing,
    _repeating_suffix,
)


def infer_steps(marked: np.ndarray | None, rank: np.ndarray, ops: Codes, in_e: np.ndarray, out_e: np.ndarray,
                gs: np.ndarray, small: np.ndarray, steps: int | None,
                w: np.ndarray | None = None, sent: np.ndarray | None = None,
                objects: np.ndarray | None = None, per_optimizer: tuple[int, int, int] | None = None
                ) -> tuple[np.ndarray, str, list[str]]:
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
    (:func:`~.folded.unfold_steps`); the step ids are those of the calls kept. ``objects``: the calls that
    carry pickled objects (:func:`~.classify.object_calls`), which a checkpoint or a logger sends between
    steps. ``per_optimizer``: (K, marked steps left out, marked steps) where ``marked`` holds each call's
    optimizer step, the markers marking micro-batches (:func:`~.optimizer_steps.optimizer_grouped`).
    """
    if w is not None and (steps is not None or (marked is not None and not np.isnan(marked).all())):
        raise Unfoldable("--steps and step markers are read on the full trace")
    # one integer per distinct (op, in, out, group size): the sequence a step pattern repeats in
    sig, _ = group_codes(ops.codes, zero_nan(in_e, inplace=True), zero_nan(out_e, inplace=True), gs)
    carries, reduces = ops.isin(_OP_VERBS) & ~small, ops.isin(GRADIENT_OPS) & ~small
    if marked is not None and not np.isnan(marked).all():
        light = ~carries
        if sent is not None and reduces.any():
            light |= _next_to_nothing(sent, _gradient_weight(sent, reduces))
        return _marked_steps(marked, rank, sig, steps, light, objects, reduces, per_optimizer)
    load = None if sent is None else sent if w is None else sent * w
    step_id, periods, tails, between, interrupted = _repeated_steps(rank, sig, carries, reduces, steps, w,
                                                                    load, objects)
    return (step_id, *_repeated_how(periods, tails, steps, between, interrupted))


def _repeated_steps(rank: np.ndarray, sig: np.ndarray, carries: np.ndarray, reduces: np.ndarray,
                    steps: int | None, w: np.ndarray | None, load: np.ndarray | None,
                    objects: np.ndarray | None = None):
    """:func:`infer_steps` without markers: each call's step, and per rank (calls per step, steps, calls
    before the first), (calls after the last, whether they carry data) and (calls between steps, steps
    between them, whether pickled objects are among them, calls a step after them sends again, calls of
    theirs lent to the step after) where the repeated block is steps and an evaluation or a checkpoint
    (:func:`~.block_steps._steps_in_block`).
    ``carries`` / ``reduces``: the calls carrying data / the reductions among them; ``load``: each call's
    bytes, weighted; ``objects``: the calls carrying pickled objects."""
    step_id = np.full(len(rank), -1, dtype=np.int32)
    periods: dict[int, tuple[int, int, int]] = {}
    tails: dict[int, tuple[int, bool]] = {}
    between: dict[int, tuple[int, int, bool, int, int]] = {}
    interrupted: dict[int, tuple[tuple[tuple[int, int, int, int], ...], bool]] = {}
    bounds = run_bounds(rank)
    # ranks that made the same calls: one search
    found: dict[tuple[bytes, bytes, int, bytes], tuple] = {}
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        r, n_calls = int(rank[lo]), hi - lo
        data_at = np.flatnonzero(carries[lo:hi])
        # a step must hold at least one collective that carries data: the last p calls do
        # exactly when p reaches back to the last such call
        min_period = n_calls - int(data_at[-1]) if len(data_at) else n_calls + 1
        mine = slice(lo, hi)
        key = (sig[mine].tobytes(), b"" if load is None else load[mine].tobytes(), min_period,
               b"" if objects is None else objects[mine].tobytes())
        if key not in found:
            found[key] = _rank_search(sig[mine], carries[mine], reduces[mine],
                                      None if load is None else load[mine],
                                      None if objects is None else objects[mine], steps, w is None,
                                      min_period)
        per, reps, tail, inner, around = found[key]
        if around is not None:  # steps on both sides of an evaluation or a checkpoint
            step_id[mine] = np.maximum(around.labels, -1)
            periods[r], tails[r], interrupted[r] = _interrupted_rank(
                around, carries[mine], None if objects is None else objects[mine])
            continue
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
        labels, late, lent = inner
        k = int(labels.max()) + 1
        ids = _steps_between(labels, late, reps)
        step_id[lo + start:hi] = ids
        n_steps = int(ids.max()) + 1
        if w is not None:
            n_steps += (unfold_steps(sig[lo:hi], w[lo:hi], per, reps) - reps) * k
        periods[r] = (int(np.bincount(labels[labels >= 0]).min()), n_steps, start + int(np.argmax(ids >= 0)))
        saved = objects is not None and bool(objects[lo + start:lo + start + per][labels < 0].any())
        between[r] = (int((labels == -1).sum()), k, saved, int((labels == AGAIN).sum()), lent)
    return step_id, periods, tails, between, interrupted


def _rank_search(sig: np.ndarray, carries: np.ndarray, reduces: np.ndarray, load: np.ndarray | None,
                 objects: np.ndarray | None, steps: int | None, whole: bool, min_period: int) -> tuple:
    """One rank's steps, searched (:func:`_repeated_steps`): (period, repetitions, tail) of its run
    (:func:`_rank_run`), the run's block read as steps and an evaluation every k
    (:func:`~.block_steps._steps_in_block`, or None), and the steps on both sides of an interruption where the
    run is no reading, or where that reading is the run's and more steps of its very block beyond it
    (:func:`~.interrupted.interrupted_steps`, :func:`_extends`; or None; ``whole``: the trace is not
    folded)."""
    run = _rank_run(sig, carries, reduces, load, steps, min_period)
    n = len(sig)
    block = slice(n - run[2] - run[0], n - run[2])
    inner = (_steps_in_block(sig[block], load[block], carries[block], reduces[block],
                             None if objects is None else objects[block])
             if run[0] and load is not None and steps is None else None)
    around = None
    if load is not None and steps is None and whole and inner is None:
        held, total = _run_weight(run, load, reduces)
        if _under_half(run, held, total):
            around = interrupted_steps(sig, load, carries, reduces)
        elif _leaves_a_step(run, held, total):
            around = _extends(interrupted_steps(sig, load, carries, reduces), run, sig, load)
    return (*run, inner, around)


def _run_weight(run: tuple[int, int, int], load: np.ndarray, reduces: np.ndarray) -> tuple[float, float]:
    """The gradients' bytes (:func:`~.repeats._gradient_weight`) a rank's run (period, repetitions, tail:
    :func:`_rank_run`) holds, and the rank's in all."""
    per, reps, tail = run
    weight = _gradient_weight(load, reduces)
    end = len(load) - tail
    return float(weight[end - per * reps:end].sum()), float(weight.sum())


def _leaves_a_step(run: tuple[int, int, int], held: float, total: float) -> bool:
    """Whether the calls outside a rank's run hold as many gradient bytes as one of its steps (``held`` of
    ``total``: :func:`_run_weight`): steps after a checkpoint taken once may be there."""
    per, reps, _ = run
    return per > 0 and total - held >= held / reps * (1 - 1e-9)


def _extends(around, run: tuple[int, int, int], sig: np.ndarray, load: np.ndarray):
    """``around`` (:class:`~.interrupted.Interrupted`, or None) where it reads the run's steps as the run
    does (the same calls, the same phase) and more, every step it adds is the run's block, call for call
    and byte for byte (``load``: a DeepSpeed comms log records bytes alone, so its gathers of one layer
    and of the whole model may be one call in ``sig``), and no step after an interruption sends again or
    keeps what the interruption sent; else None. A step it adds that way (DeepSpeed ZeRO-3's first step
    after its gathers layer by layer, read with two of them lent to it) would hide the micro-batches that
    the run's equal steps show."""
    per, reps, tail = run
    if around is None or around.steps <= reps or any(again or lent for _, _, again, lent in around.breaks):
        return None
    end = len(sig) - tail
    start = end - per * reps
    labels = around.labels
    mine = labels[start:end]
    if (mine < 0).any() or not np.array_equal(mine - mine[0], np.arange(per * reps) // per):
        return None
    block, sent = sig[end - per:end], load[end - per:end]
    for step in np.setdiff1d(labels[labels >= 0], mine):
        at = labels == step
        if not (np.array_equal(sig[at], block) and np.allclose(load[at], sent)):
            return None
    return around


def _interrupted_rank(around, carries: np.ndarray, objects: np.ndarray | None
                      ) -> tuple[tuple[int, int, int], tuple[int, bool], tuple]:
    """A rank's (calls per step, steps, calls before the first), (calls after the last, whether they
    carry data) and (the interruptions, whether pickled objects are among their calls) where its steps
    are read on both sides of them (:class:`~.interrupted.Interrupted`)."""
    at = np.flatnonzero(around.labels >= 0)
    first, last = int(at[0]), int(at[-1])
    between = np.flatnonzero(around.labels[first:last] == -1) + first
    return ((around.period, around.steps, first), (len(carries) - 1 - last, bool(carries[last + 1:].any())),
            (around.breaks, objects is not None and bool(objects[between].any())))


def _under_half(run: tuple[int, int, int], held: float, total: float) -> bool:
    """Whether a rank's run (period, repetitions, tail: :func:`_rank_run`) is one step, or its steps hold
    under half the gradients' bytes (``held`` of ``total``: :func:`_run_weight`): the run is then no
    reading of the rank's steps, and steps on both sides of an interruption may be (:mod:`.interrupted`).
    A run that holds more is kept, taking in only steps beyond a break that are its block
    (:func:`_extends`): a first step that differs (DeepSpeed ZeRO-3's first gathers) is as much outside it
    as steps after a checkpoint, and the steps around an interruption would count it in a phase that hides
    the micro-batches."""
    return run[1] < 2 or held < total / 2


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
                  steps: int | None, between: dict[int, tuple[int, int, bool, int, int]] | None = None,
                  interrupted: dict[int, tuple[tuple[tuple[int, int, int, int], ...], bool]] | None = None
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
        n, k, saved, again, lent = max(between.values())
        what = "a checkpoint's or a logger's pickled objects" if saved else "an evaluation"
        steps_how += (f"; the {_plural(n, 'call')} after every {k} steps, which carry no gradients ({what}), "
                      "count as one-off")
        if again:
            steps_how += (f", as does what the step after them sends again ({_plural(again, 'call')}: the "
                          "parameters the evaluation left resharded, gathered once more)")
        if lent:
            steps_how += (f"; they follow {_plural(lent, 'call')} of a step's own that {_counts(lent)} in "
                          "the step after (what the evaluation gathered, where that step keeps it instead of "
                          "gathering it: DeepSpeed ZeRO-3, FSDP1 SHARD_GRAD_OP, FSDP2 without resharding "
                          "after forward; or the last of the step before: DeepSpeed ZeRO-1 and -2's gather "
                          "of the updated parameters)")
    if interrupted:
        steps_how += _interrupted_how(*max(interrupted.values()))
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


def _interrupted_how(breaks: tuple[tuple[int, int, int, int], ...], saved: bool) -> str:
    """The steps sentence's part on the calls between steps of :mod:`.interrupted` (``breaks``: per
    interruption, the steps before it, its calls, the calls sent again after it, the calls it lent)."""
    what = "a checkpoint's or a logger's pickled objects" if saved else "an evaluation"
    after = [str(b[0]) for b in breaks if b[0] > 0]
    where = ("" if len(after) == 0 else f"after step {after[0]}" if len(after) == 1 else
             "after steps " + ", ".join(after[:-1]) + " and " + after[-1])
    where = " and ".join([w for w in ("before the first step" if breaks[0][0] == 0 else "", where) if w])
    calls = sorted({b[1] for b in breaks})
    sizes = _plural(calls[0], "call") if len(calls) == 1 else f"{calls[0]}-{calls[-1]} calls"
    out = (f"; the steps repeat on both sides of calls that carry no gradients ({what}: {sizes} {where}), "
           "counted one-off")
    again, lent = sum(b[2] for b in breaks), sum(b[3] for b in breaks)
    if again:
        out += (f", as is what the step after sends again ({_plural(again, 'call')} in all: the parameters "
                "the evaluation left resharded, gathered once more)")
    if lent:
        out += (f"; {_plural(lent, 'call')} of them {_counts(lent)} in the step after (what the evaluation "
                "gathered and that step keeps instead of gathering it)")
    return out


def _counts(n: int) -> str:
    """The verb after a count of calls: "1 call counts", "3 calls count"."""
    return "counts" if n == 1 else "count"
