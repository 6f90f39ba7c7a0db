"""Steps from the trace's step markers (``ProfilerStep#k``): each call's marked step, or the optimizer step
of the micro-batches the markers mark (DeepSpeed's loop), or the marked steps with the evaluation every K-th
holds set apart (:mod:`.steps` reads the steps of a trace without markers).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from zerocalc.errors import TraceMismatchError
from zerocalc.validate.accounting import _plural
from zerocalc.validate.columns import run_bounds
from zerocalc.validate.evaluations import Evaluated, evaluations

#: Where marked steps come from, as the steps' sentence says it.
MARKERS = "from the trace's step markers"


def _marked_steps(marked: np.ndarray, rank: np.ndarray, sig: np.ndarray, steps: int | None,
                  light: np.ndarray | None = None, objects: np.ndarray | None = None,
                  reduces: np.ndarray | None = None, per_optimizer: tuple[int, int, int] | None = None
                  ) -> tuple[np.ndarray, str, list[str]]:
    """:func:`~.steps.infer_steps` where the trace marks its steps: each call's marked step, or the optimizer
    step of the micro-batches the markers mark (:func:`_marked_micro_batches`). Where every K-th marked
    step (or optimizer step) holds an evaluation or a checkpoint instead (:func:`~.evaluations.evaluations`),
    its calls are one-off, and so are those of a first step unlike the alike ones after it
    (:func:`_warm_up_step`). ``light``: the calls that carry no data or next to nothing (a loss or metric
    all-reduce); ``objects``: the calls that carry pickled objects (a checkpoint's save plan);
    ``reduces``: the gradient reductions; ``per_optimizer``:
    (K, marked steps left out, marked steps) where ``marked`` is already each call's optimizer step, the
    markers marking micro-batches (:mod:`.optimizer_steps`)."""
    step_id = np.full(len(rank), -1, dtype=np.int32)
    step_marked = ~np.isnan(marked)
    step_id[step_marked] = marked[step_marked].astype(np.int32)
    n_marked = len(np.unique(step_id[step_marked]))
    warm_up, data = (0, True) if steps == n_marked or light is None or reduces is None else _warm_up_step(
        step_id, rank, sig, light, reduces)
    if warm_up:
        step_marked &= step_id >= 0
        n_marked -= 1
    each = per_optimizer is not None and per_optimizer[0] == 1  # the optimizer's annotations: one a mark
    if per_optimizer is not None and not each and steps is not None and steps != n_marked:
        raise TraceMismatchError(f"--steps {steps} but the trace's calls fall in {per_optimizer[2]} marked "
                                 f"step(s), micro-batches of {n_marked} optimizer step(s)")
    if per_optimizer is None or each:
        how, notes = _marked_how(step_id, rank, sig, steps, light, objects, n_marked, regroup=not each,
                                 reduces=reduces)
    else:
        how, notes = _optimizer_how(n_marked, *per_optimizer)
        evaluated = None if light is None else evaluations(step_id, rank, sig, light, objects, reduces)
        if evaluated is not None:
            how = _evaluated_how(evaluated, how, n_marked)
    if warm_up and data:
        how = (f"{how}; the first marked step, unlike the {n_marked} alike after it, is a warm-up step "
               f"(its {_plural(warm_up, 'call')} a rank counted one-off), as DeepSpeed ZeRO-3's first, which "
               "gathers the parameters one by one while it records their order")
    elif warm_up:
        how = (f"{how}; the first marked step holds small calls alone, which none of the {n_marked} alike "
               f"after it holds: one-off ({_plural(warm_up, 'call')} a rank), as DDP's bucket-order "
               "broadcasts are where the profiler steps every micro-batch (their micro-batch reduces "
               "nothing)")
    return step_id, how, notes


def _optimizer_how(n: int, k: int, left_out: int, n_marked: int) -> tuple[str, list[str]]:
    """How ``n`` optimizer steps were found from ``n_marked`` markers of micro-batches, ``k`` to one, and the
    note."""
    how = (f"{n} optimizer step(s) {MARKERS}, which mark micro-batches: every "
           f"{_ordinal(k)} marked step holds the optimizer's step (its Optimizer.step# annotation), so {k} "
           "make one optimizer step")
    if left_out:
        how += f"; {left_out} marked step(s) a rank, of an optimizer step held in part, one-off"
    return how, [f"the trace's calls fall in {n_marked} marked steps, taken as micro-batches of {n} "
                 f"optimizer steps (K = {k}): give --steps {n_marked} if each marked step is an optimizer "
                 "step"]


def _warm_up_step(step_id: np.ndarray, rank: np.ndarray, sig: np.ndarray, light: np.ndarray,
                  reduces: np.ndarray) -> tuple[int, bool]:
    """Where on every rank the marked steps after the first, at least two, hold the same calls carrying
    data (``sig``, in any order; ``light`` calls aside) and the first lacks some of their parameter-side
    calls (not ``reduces``: gradient reductions in other buckets are DDP's first iteration, which
    :func:`~.classify.steady_state` keeps), or holds light calls alone, the first is a warm-up step: its
    calls are set outside the steps (``step_id`` -1, in place) and the most of one rank returned, with
    whether it held any call carrying data; (0, True) otherwise, ``step_id`` untouched. DeepSpeed ZeRO-3
    gathers the parameters one by one in its first step while it records their order, and checks that order
    on every rank at the start of the next: a trace profiled from the start of training holds those steps.
    DDP broadcasts its bucket order before the forward after its first synchronised backward: where the
    profiler steps every micro-batch under ``no_sync()``, that micro-batch's marked step holds those small
    calls alone, and the steps that hold the gradient all-reduce follow it."""
    bounds = run_bounds(rank)
    firsts, data = [], False
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        ids = step_id[lo:hi]
        at = np.flatnonzero(ids >= 0)
        order = at[np.argsort(ids[at], kind="stable")]  # each marked step's calls together
        marks, first = np.unique(ids[order], return_index=True)
        if len(marks) < 3:
            return 0, True
        heavy = ~light[lo:hi][order]
        parts = zip(np.split(sig[lo:hi][order], first[1:]), np.split(heavy, first[1:]),
                    np.split(reduces[lo:hi][order], first[1:]), strict=True)
        calls = [(np.sort(c[h]), Counter(c[h & ~g].tolist())) for c, h, g in parts]  # each step's, any order
        if not len(calls[1][0]) or not all(np.array_equal(c, calls[1][0]) for c, _ in calls[2:]):
            return 0, True
        if len(calls[0][0]) and not calls[1][1] - calls[0][1]:
            return 0, True  # the parameter-side calls of the later steps are all in the first: a step
        data |= bool(len(calls[0][0]))
        firsts.append(lo + order[:first[1]])
    if not firsts:
        return 0, True
    step_id[np.concatenate(firsts)] = -1
    return max(map(len, firsts)), data


def _marked_how(step_id: np.ndarray, rank: np.ndarray, sig: np.ndarray, steps: int | None,
                light: np.ndarray | None, objects: np.ndarray | None, n_marked: int, regroup: bool = True,
                reduces: np.ndarray | None = None) -> tuple[str, list[str]]:
    """:func:`_marked_steps` past its warm-up step: how the steps were found and notes, with each call's
    step (``step_id``) regrouped in place where the markers mark micro-batches (not where ``regroup`` is
    False: the optimizer's annotations say each marks an optimizer step), or set apart where some steps
    hold an evaluation or a checkpoint."""
    grouped = _marked_micro_batches(step_id, rank, sig)
    evaluated = (None if light is None or steps not in (None, n_marked)
                 else evaluations(step_id, rank, sig, light, objects, reduces))
    if evaluated is not None:
        return _evaluated_how(evaluated, f"{n_marked} step(s) {MARKERS}", n_marked), []
    if grouped is not None and regroup and steps in (None, grouped[1]):
        regrouped, n, k, partial = grouped
        step_id[:] = regrouped
        how = (f"{n} optimizer step(s) {MARKERS}, which mark micro-batches: every "
               f"{_ordinal(k)} marked step holds more calls (the optimizer's), so {k} make one optimizer "
               "step")
        if partial:
            how += f"; {partial} marked step(s) of an optimizer step the trace holds in part count as one-off"
        return how, [f"the trace marks {n_marked} steps, taken as micro-batches of {n} optimizer steps "
                     f"(K = {k}): give --steps {n_marked} if each marked step is an optimizer step"]
    if steps is not None and steps != n_marked:
        raise TraceMismatchError(f"--steps {steps} but the trace marks {n_marked} step(s)")
    return f"{n_marked} step(s) {MARKERS}", []


def _evaluated_how(ev: Evaluated, lead: str, n: int) -> str:
    """The steps' sentence ``lead`` (of ``n`` steps) where every K-th step holds an evaluation
    (:func:`~.evaluations.evaluations`)."""
    what = ("a checkpoint's or a logger's calls (pickled objects, and small ones" if ev.saved
            else "an evaluation (the forward's calls again, and small all-reduces")
    which = f"every {_ordinal(ev.k)}" if ev.k else "one"
    how = f"{lead}; {which} also holds {what}: {_plural(ev.calls, 'call')} in all), counted one-off"
    if ev.inside:
        how = (f"{lead}; {which} sends more of its own calls before its last gradient "
               f"reduction than the others ({_plural(ev.calls, 'call')} in all: gathers again of what an "
               "evaluation or a checkpoint between steps left resharded), counted one-off")
    if ev.again:
        how += ("; so are the calls that each step after an evaluation sends again "
                f"({ev.again} in all: the parameters it left resharded, gathered once more)")
    if ev.lent:
        how += ("; the evaluation's calls that the step after it would otherwise send, the parameters it "
                f"gathered and kept for that step's forward ({ev.lent} in all), count in that step")
    if ev.first:
        how += (f"; the first step, after an evaluation the trace does not hold, lacks them: one-off "
                f"({_plural(ev.first, 'call')} in all), so {n - 1} steps count")
    return how


def _ordinal(k: int) -> str:
    """2nd, 3rd, 4th, 11th, 21st."""
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"


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
