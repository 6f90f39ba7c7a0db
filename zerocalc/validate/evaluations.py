"""An evaluation (or a checkpoint) inside every K-th marked step, set apart from the steps
(:mod:`.marked_steps` reads the steps): its calls are one-off, and so is what it leaves to the steps
after it, read from the calls those steps send beyond the others' or lack.

A run that evaluates after every K-th optimizer step and calls ``prof.step()`` after the evaluation puts
it inside that step's ``ProfilerStep``: that step holds the others' calls and the evaluation's, its
forward's gathers again and a loss or metric all-reduce. What the evaluation leaves behind shows in the
step after it: FSDP2 gathers again in that step's backward a module the evaluation's forward left
resharded (one call more than a step that follows none); DeepSpeed ZeRO-3 keeps the parameters the
evaluation's forward gathered for the next forward, which then gathers nothing (one call less).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from zerocalc.validate.columns import run_bounds


@dataclass
class Evaluated:
    """What :func:`evaluations` set apart, in calls over all ranks."""

    calls: int  # the evaluations' calls, one-off
    k: int  # every K-th marked step holds one; 0: one marked step alone
    saved: bool  # pickled objects among them: a checkpoint's or a logger's
    again: int = 0  # what the steps after an evaluation send again, one-off
    lent: int = 0  # the evaluation's calls that the step after it uses, counted in that step
    first: int = 0  # the calls of a first marked step that follows an evaluation the trace does not hold
    inside: bool = False  # the more calls all come before the step's last gradient reduction: none after


@dataclass
class _Plan:
    """One rank's marked steps as :func:`_evaluation_plan` reads them."""

    lo: int
    hi: int
    ends: list[int]  # the marked steps holding an evaluation
    marks: list[int]  # every marked step holding calls, in order (optimizer steps may skip numbers)
    a: Counter  # the calls of every other step, as one that follows no evaluation sends them
    again: dict[int, Counter] = field(default_factory=dict)  # step after an evaluation → calls sent again
    early: dict[int, Counter] = field(default_factory=dict)  # step after → calls the evaluation sent for it

    @property
    def before(self) -> dict[int, int]:
        """Each marked step → the one before it."""
        return dict(zip(self.marks[1:], self.marks, strict=False))


def evaluations(step_id: np.ndarray, rank: np.ndarray, sig: np.ndarray, light: np.ndarray,
                objects: np.ndarray | None = None, reduces: np.ndarray | None = None) -> Evaluated | None:
    """Where every K-th marked step holds the others' calls and an evaluation or a checkpoint, not the
    optimizer's calls after K micro-batches (:func:`~.marked_steps._marked_micro_batches`; each rank's
    steps read by :func:`_evaluation_plan`), set those calls of each such step one-off (``step_id`` -1, in
    place): the calls after the step's own (:func:`_evaluation_tails`, with ``reduces``, the gradient
    reductions, ``light`` ones aside), else the calls beyond the others' counts (the first of each kind
    the step's own). What the steps after an evaluation send again is one-off too; what they lack and the
    evaluation sent for them is counted in them; a first marked step that lacks it, after an evaluation the
    trace does not hold, is one-off. None where the steps are not so, ``step_id`` untouched."""
    bounds = run_bounds(rank)
    grads = None if reduces is None else reduces & ~light
    plans, ks, saved = [], set(), False
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        obj = objects[lo:hi] if objects is not None else np.zeros(hi - lo, dtype=bool)
        read = _evaluation_plan(lo, hi, step_id[lo:hi], sig[lo:hi], light[lo:hi], obj,
                                None if grads is None else grads[lo:hi])
        if read is None:
            return None
        plan, pickled = read
        saved |= pickled
        at = [plan.marks.index(m) for m in plan.ends]
        ks |= {y - x for x, y in zip(at, at[1:], strict=False)} or {0}
        plans.append(plan)
    if len(ks) != 1 or (0 in ks and grads is None):
        return None  # one evaluating step (K 0) read only where its evaluation can be cut after its own
    out = Evaluated(0, ks.pop(), saved)
    cuts = None if grads is None else _evaluation_tails(step_id, sig, grads, plans)
    if not out.k and cuts is None:
        return None
    out.inside = cuts is None and grads is not None and all(_inside(step_id, sig, grads, p) for p in plans)
    for plan, cut in zip(plans, cuts or [None] * len(plans), strict=True):
        _set_apart(step_id[plan.lo:plan.hi], sig[plan.lo:plan.hi], plan, cut, out)
    return out


def _inside(step_id: np.ndarray, sig: np.ndarray, grads: np.ndarray, plan: _Plan) -> bool:
    """Whether each of the plan's more calls falls before its step's last gradient reduction: no
    evaluation after the step's own calls, but its own sent again (gathers of what an evaluation profiled
    as a step of its own left resharded)."""
    ids, codes, g = step_id[plan.lo:plan.hi], sig[plan.lo:plan.hi], grads[plan.lo:plan.hi]
    for m in plan.ends:
        at = np.flatnonzero(ids == m)
        more, x = _counted(at, codes, plan.a)[1], _last_reduction(at, g)
        if not (len(more) and x) or more.max() >= at[x - 1]:
            return False
    return True


def _set_apart(ids: np.ndarray, codes: np.ndarray, plan: _Plan, cut: dict[int, int] | None,
               out: Evaluated) -> None:
    """One rank's evaluations set apart (``ids``, in place), counted in ``out``: each evaluating step's
    calls from ``cut`` on (else those beyond A's counts), but those the step after it lacks
    (``plan.early``), which move to it; the calls sent again (``plan.again``, the last of each kind); a first
    marked step lacking what an evaluation would have sent for it, whole."""
    after = dict(zip(plan.marks, plan.marks[1:], strict=False))
    for m in plan.ends:
        at = np.flatnonzero(ids == m)
        tail = at[cut[m]:] if cut is not None else _counted(at, codes, plan.a)[1]
        if after.get(m) in plan.early:
            lent, tail = _counted(tail, codes, plan.early[after[m]])
            ids[lent] = after[m]
            out.lent += len(lent)
        ids[tail] = -1
        out.calls += len(tail)
    for m in plan.early:
        if plan.before.get(m) not in plan.ends:
            out.first += int((ids == m).sum())
            ids[ids == m] = -1
    for m, calls in plan.again.items():
        at = np.flatnonzero(ids == m)
        for c, times in calls.items():
            last = at[codes[at] == c][-times:]
            ids[last] = -1
            out.again += len(last)


def _counted(at: np.ndarray, codes: np.ndarray, counts: Counter) -> tuple[np.ndarray, np.ndarray]:
    """The calls ``at`` (time order) split by ``counts``: the first of each kind, as many as it counts, and
    the rest (a step's own calls, then those beyond them)."""
    left, within = Counter(counts), np.zeros(len(at), dtype=bool)
    for k, i in enumerate(at.tolist()):
        if left[codes[i]] > 0:
            left[codes[i]] -= 1
            within[k] = True
    return at[within], at[~within]


def _evaluation_plan(lo: int, hi: int, ids: np.ndarray, codes: np.ndarray, lite: np.ndarray, obj: np.ndarray,
                     grads: np.ndarray | None) -> tuple[_Plan, bool] | None:
    """One rank's marked steps (``ids``) read for :func:`evaluations`: where they are of two kinds, A in
    all but every K-th, B, which holds A's calls and more, the more calls all A's own or B's own
    (:func:`_both_sides`: the forward's gathers again), ``lite`` (a loss or metric all-reduce) or ``obj``
    (pickled objects: a checkpoint's save plan), and some of them a step's own carrying data or objects:
    the rank's plan (its calls ``lo``:``hi``, B's marked steps, A's calls) and whether objects were among
    the more calls. Where three kinds, the steps right after each B (and the first) one of them
    (:func:`_after_kind`), they are read as A. None otherwise."""
    marks = np.unique(ids[ids >= 0]).tolist()
    calls = {m: Counter(codes[ids == m].tolist()) for m in marks}
    kinds = Counter(tuple(sorted(c.items())) for c in calls.values())
    again: dict[int, Counter] = {}
    early: dict[int, Counter] = {}
    if len(kinds) == 3 and grads is not None:
        found = _after_kind(marks, calls, kinds, codes, grads)
        if found is None:
            return None
        after, plain, diff, sent_again = found
        (again if sent_again else early).update(dict.fromkeys(after, diff))
        calls.update(dict.fromkeys(after, plain))
        kinds = Counter(tuple(sorted(c.items())) for c in calls.values())
    if len(kinds) != 2:
        return None
    a, b = (Counter(dict(c)) for c in sorted(kinds, key=lambda c: sum(n for _, n in c)))
    extra = b - a
    if a - b or not extra or (grads is not None and grads[np.isin(codes, list(extra))].any()):
        return None  # an evaluation reduces no gradients: more reductions are more micro-batches
    ends = [m for m in marks if calls[m] == b]
    weightless = {int(c): bool(lite[codes == c].all()) for c in extra}
    pickled = {int(c) for c in extra if c not in a and obj[codes == c].all()}
    own = {int(c) for c in extra if c in a or (grads is not None and _both_sides(c, ends, ids, codes, grads))}
    if not all(c in own or weightless[c] or c in pickled for c in extra) or (
            not pickled and all(weightless[c] for c in extra if c in own)):
        return None
    return _Plan(lo, hi, ends, marks, a, again, early), bool(pickled)


def _both_sides(c: int, ends: list[int], ids: np.ndarray, codes: np.ndarray, grads: np.ndarray) -> bool:
    """Whether each of the marked steps ``ends`` sends calls of kind ``c`` both before its last gradient
    reduction (``grads``) and after it: the step's own calls (its forward's gathers, which the steps
    after an evaluation need not send: FSDP1's SHARD_GRAD_OP keeps what the evaluation gathered), sent again
    by the evaluation. The optimizer's gathers after the reductions (DeepSpeed ZeRO-1/2's, where the
    markers mark micro-batches) are on one side alone."""
    for m in ends:
        at = np.flatnonzero(ids == m)
        x = _last_reduction(at, grads)
        if not (x and (codes[at[:x]] == c).any() and (codes[at[x:]] == c).any()):
            return False
    return True


def _after_kind(marks: list[int], calls: dict[int, Counter], kinds: Counter, codes: np.ndarray,
                grads: np.ndarray) -> tuple[list[int], Counter, Counter, bool] | None:
    """Of three kinds of marked step, each holding the one before's calls (few ⊂ more ⊂ most), where every
    step right after a step of the most (the evaluating ones) is of one of the other two and every step of
    that kind is one (or the first): (those steps, the calls of the plain kind, what they send beyond it or
    lack, whether beyond). Beyond: none a gradient reduction (``grads``), sent again after the evaluation;
    lacking: among the calls the evaluating steps hold beyond the plain ones (the evaluation sent them).
    None otherwise."""
    few, more, most = (Counter(dict(c)) for c in sorted(kinds, key=lambda c: sum(n for _, n in c)))
    if few - more or more - most:
        return None
    before = dict(zip(marks[1:], marks, strict=False))
    follow = {tuple(sorted(calls[m].items())) for m in marks[1:] if calls[before[m]] == most}
    if len(follow) != 1:
        return None
    kind = Counter(dict(follow.pop()))
    if kind == most:
        return None
    after = [m for m in marks if calls[m] == kind]
    if any(m != marks[0] and calls[before[m]] != most for m in after):
        return None
    diff = more - few
    if kind == more:
        return None if grads[np.isin(codes, list(diff))].any() else (after, few, diff, True)
    return None if diff - (most - more) else (after, more, diff, False)


def _evaluation_tails(step_id: np.ndarray, sig: np.ndarray, grads: np.ndarray, plans: list[_Plan]
                      ) -> list[dict[int, int]] | None:
    """Where each evaluating step of :func:`evaluations` is the step's own calls, then the evaluation's:
    the step's own end with its last gradient reduction (``grads``) and the calls every other step sends
    after its last (the same in each), the evaluation's are the rest. Per rank, each such step's cut
    (marked step → its own calls, in time order). Where the steps' own differ from the others' (A's) calls,
    the same in every one, and every other step follows an evaluation (:func:`_each_after`; K = 2, or one
    evaluating step between two others): A's calls beyond them, none a gradient reduction, are sent again
    after the evaluation; those A lacks, among the evaluation's calls, the evaluation sent for the step
    after it: each plan takes them as ``again`` or ``early`` of its other steps. None where a step is not
    so, or A's calls differ the other way, or both ways."""
    cuts, diffs = [], set()
    for plan in plans:
        ids, codes, g = step_id[plan.lo:plan.hi], sig[plan.lo:plan.hi], grads[plan.lo:plan.hi]
        closing = _closing(ids, codes, g, plan)
        if closing is None:
            return None
        cut = {}
        for m in plan.ends:
            at = np.flatnonzero(ids == m)
            j = _last_reduction(at, g) + len(closing)
            if tuple(codes[at[j - len(closing):j]].tolist()) != closing or j >= len(at):
                return None
            own, tail = Counter(codes[at[:j]].tolist()), Counter(codes[at[j:]].tolist())
            again, early = +(plan.a - own), +(own - plan.a)
            if early - tail:
                return None
            diffs.add((frozenset(again.items()), frozenset(early.items())))
            cut[m] = j
        cuts.append(cut)
    if len(diffs) != 1:
        return None
    again, early = (Counter(dict(d)) for d in diffs.pop())
    if not (again or early):
        return cuts
    if (again and early) or grads[np.isin(sig, list(again))].any() or not all(map(_each_after, plans)):
        return None
    for plan in plans:
        others = [m for m in plan.marks if m not in plan.ends]
        (plan.again if again else plan.early).update(dict.fromkeys(others, again or early))
    return cuts


def _each_after(plan: _Plan) -> bool:
    """Whether every marked step but the evaluating ones follows one, or is the first."""
    return all(m == plan.marks[0] or plan.before[m] in plan.ends for m in plan.marks if m not in plan.ends)


def _closing(ids: np.ndarray, codes: np.ndarray, g: np.ndarray, plan: _Plan) -> tuple[int, ...] | None:
    """The calls each step but the evaluating ones sends after its last gradient reduction (``g``), the
    same in each (DeepSpeed's overflow flag; none for FSDP); None where a step reduces nothing or they
    differ."""
    closings = set()
    for m in plan.marks:
        at = np.flatnonzero(ids == m)
        if not (x := _last_reduction(at, g)):
            return None
        if m not in plan.ends:
            closings.add(tuple(codes[at[x:]].tolist()))
    return closings.pop() if len(closings) == 1 else None


def _last_reduction(at: np.ndarray, g: np.ndarray) -> int:
    """The index in ``at`` just after its last gradient reduction (``g``); 0 where it holds none."""
    hit = np.flatnonzero(g[at])
    return int(hit[-1]) + 1 if len(hit) else 0
