"""Micro-batches per optimizer step and when the gradients are reduced, from the block of calls that
repeats inside each step (:func:`~.repeats._leading_repeats`).

Each search runs once per distinct call sequence (one (rank, step)'s), not once per pair. Sources: §7
(micro-batches and gradient accumulation per implementation).
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from dataclasses import dataclass

import numpy as np

from zerocalc.validate.classify import SCALAR_MAX_ELEMENTS
from zerocalc.validate.columns import Codes, distinct_runs, group_codes
from zerocalc.validate.repeats import _leading_repeats


@dataclass(frozen=True)
class MicroBatches:
    """Micro-batches per optimizer step and when the gradients are reduced, with how each was found."""

    k: int
    how: str
    #: "every" (gradients reduced in every micro-batch), "boundary" (once per optimizer step), or None
    #: when the trace cannot tell (one micro-batch, or nothing repeats)
    grad_sync: str | None
    grad_sync_how: str


#: :func:`_step_blocks`'s mode where the micro-batches are one forward's gathers, then backwards alike, the
#: reductions in the last (:func:`_backwards_after_one_forward`): the boundary, read so.
KEPT_BACKWARDS = "boundary, backwards after one forward"


def _step_blocks(codes: list[int], grad: list[bool], data: list[bool] | None = None,
                 elems: list[float] | None = None, scatter: list[bool] | None = None,
                 passes: int | None = None) -> tuple[int, str | None, int | None, bool]:
    """:func:`_blocks` of one (rank, step)'s call sequence, where the trace counts the backward passes its
    steps run (``passes``, the most common count; None: not counted) with the scalars that open the step
    set aside where they repeat as a block (:func:`_scalars_ahead`: the passes tell the micro-batches), or
    where, opening the step once, they keep its calls from reading as that many micro-batches and the calls
    after them do (:func:`_leading_scalars`: Hugging Face Trainer gathers the step's item count first)."""
    if passes:
        per, reps = _leading_repeats(codes)
        if ahead := _scalars_ahead(grad, data, per, reps):
            return _blocks_after(codes, grad, data, elems, scatter, ahead)
    found = _blocks(codes, grad, data, elems, scatter)
    if passes and passes > 1 and found[0] != passes and (lead := _leading_scalars(grad, data)):
        after = _blocks_after(codes, grad, data, elems, scatter, lead)
        if after[0] == passes:
            return after
    return found


def _blocks_after(codes: list[int], grad: list[bool], data: list[bool] | None, elems: list[float] | None,
                  scatter: list[bool] | None, n: int) -> tuple[int, str | None, int | None, bool]:
    """:func:`_blocks` of the calls after the first ``n``, the gradient calls' recurrence
    (:func:`_recurrence`) counted over all of them."""
    g = Counter(c for c, is_g in zip(codes, grad, strict=True) if is_g)
    reps, mode, _, sure = _blocks(codes[n:], grad[n:], None if data is None else data[n:],
                                  None if elems is None else elems[n:],
                                  None if scatter is None else scatter[n:])
    return reps, mode, _recurrence(g), sure


def _leading_scalars(grad: list[bool], data: list[bool] | None) -> int:
    """How many calls without data that reduce no gradients open the step before calls with data; 0 where
    none does or no call with data follows."""
    if data is None:
        return 0
    n = next((i for i, (d, g) in enumerate(zip(data, grad, strict=True)) if d or g), len(data))
    return n if n < len(data) and data[n] else 0


def _blocks(codes: list[int], grad: list[bool], data: list[bool] | None = None,
            elems: list[float] | None = None, scatter: list[bool] | None = None
            ) -> tuple[int, str | None, int | None, bool]:
    """One (rank, step)'s call sequence (``codes``, ``grad``: which are gradient reductions, ``data``: which
    carry more than a scalar; None: all; ``elems``: each call's full vector; ``scatter``: which are
    reduce-scatters, None: not known): the
    micro-batches its opening block shows, where the gradient reductions fall ("every", "boundary",
    "none", or None when nothing repeats), the times the gradient calls recur (:func:`_recurrence`), and
    whether the step could be nothing but micro-batches (``sure``, what a step found without markers
    needs): its repeats hold all its gradient reductions and are followed by calls that reduce none and
    carry data (the optimizer's gathers) or, where each block gathers what it reduces, by any calls
    (:func:`_gathers_what_it_reduces`), or hold none and are followed by the boundary micro-batch, the
    block once more with all the reductions (calls of other kinds, such as the optimizer's, aside), or hold
    none and are followed by the reductions alone (:func:`_reductions_after`); or, in any phase, its
    calls with data are blocks that gather what they reduce, its others scalars
    (:func:`_blocks_between_scalars`)."""
    g = Counter(c for c, is_g in zip(codes, grad, strict=True) if is_g)
    recur = _recurrence(g)
    per, reps = _leading_repeats(codes)
    mode, sure = None, False
    if reps > 1:
        in_block = any(grad[:per * reps])
        after = any(grad[per * reps:])
        mode = "every" if in_block else "boundary" if after else "none"
        # the boundary micro-batch: the same block with the gradient reductions among its calls
        rest = [c for c, is_g in zip(codes[per * reps:], grad[per * reps:], strict=True) if not is_g]
        closed = rest[:per] == codes[:per] and after and not in_block
        block = set(codes[:per])
        # or the last micro-batch with reductions of its own (a step would repeat whole)
        more = in_block and after and _with_more_reductions(codes, grad, data, per, reps, block)
        if closed or more:
            reps += 1
        sure = more or (closed and [c for c in rest if c in block] == codes[:per]) or (
            in_block and not after and (any(data[per * reps:] if data is not None else rest)
                                        or (rest and _gathers_what_it_reduces(grad, data, elems, per,
                                                                              scatter)))) or (
            mode == "boundary" and not closed and _reductions_after(grad, data, elems, per, reps))
    if not sure and _two_with_more_reductions(codes, grad, data):
        reps, mode, sure = 2, "every", True
    if not sure and (k := _blocks_between_scalars(codes, grad, data, elems, scatter)):
        reps, mode, sure = k, "every", True
    if not sure and (k := _alike_then_reductions(codes, grad, data, elems, scatter)):
        reps, mode, sure = k, "boundary", True
    if not sure and (k := _backwards_after_one_forward(codes, grad, data)):
        reps, mode, sure = k, KEPT_BACKWARDS, True
    return reps, mode, recur, sure


def _recurrence(counts: Counter) -> int | None:
    """The times a step's gradient calls recur (``counts``: each distinct call's): 1 where each runs once,
    else the number every count is a multiple of (buckets of one size recur together), where it is 2 or
    more; None where there are none or they recur unlike (DeepSpeed ZeRO-1's experts in 4 equal buckets
    beside buckets of their own, all reduced once, at the boundary: 4 of one call is no sign of 4
    micro-batches reducing)."""
    if not counts:
        return None
    if max(counts.values()) == 1:
        return 1
    times = math.gcd(*counts.values())
    return times if times > 1 else None


def _scalars_ahead(grad: list[bool], data: list[bool] | None, per: int, reps: int) -> int:
    """How many calls open a step as a block of scalars alone repeated (``reps`` ≥ 2 blocks of ``per``
    calls, none carrying data nor reducing gradients) before calls with data; 0 otherwise. Such a block
    is what a training loop sends before its micro-batches, not one of them: Hugging Face Trainer's
    logging gathers the loss and the FLOPs from every rank after a step (``nested_gather``,
    ``store_flos``), after the profiler's ``on_step_end``, so the pair opens the next marked step, before
    its first forward, whatever the micro-batches. Where the trace counts the backward passes, they tell
    the micro-batches, and the calls after the block are searched for their own."""
    n = per * reps
    return n if reps >= 2 and n <= _leading_scalars(grad, data) else 0


def _reductions_after(grad: list[bool], data: list[bool] | None, elems: list[float] | None, per: int,
                      reps: int) -> bool:
    """Whether ``reps`` blocks of ``per`` calls that reduce nothing are followed by gradient reductions alone
    (and calls without data) of no more elements than one block gathers: the micro-batches of a step
    whose gradients are reduced once, after the last (FSDP under no_sync() or
    set_requires_gradient_sync(False) on the earlier ones, its reduce-scatters after the last backward's
    gathers). A step repeats no block without reductions, and a micro-batch gathers each parameter it
    reduces at least once, which the gathers of one layer repeated (a model of equal layers, its
    parameters kept for backward) do not."""
    if elems is None:
        return False
    tail = range(per * reps, len(grad))
    if not all(grad[i] or (data is not None and not data[i]) for i in tail):
        return False
    reduced = sum(elems[i] for i in tail if grad[i])
    gathered = sum(elems[i] for i in range(per) if data is None or data[i])
    return 0 < reduced <= gathered * (1 + 1e-9)


def _gathers_what_it_reduces(grad: list[bool], data: list[bool] | None, elems: list[float] | None,
                             per: int, scatter: list[bool] | None = None) -> bool:
    """Whether the block of the first ``per`` calls gathers, before its first gradient reduction, at least
    as many elements as it reduces, in calls that carry data: a whole forward and backward (ZeRO-3, FSDP),
    whose forward gathers each parameter before the backward reduces it. Repeated, then closed by calls
    without data (a gradient norm, an overflow flag), such blocks are micro-batches; one micro-batch's
    buckets repeat its reductions alone, or after every gather of its forward. A block whose other calls
    carry less (DDP's broadcast buffers beside its buckets) is not taken for one, nor one that gathers
    after it reduces (ZeRO-1/2's optimizer step: the reduced gradients, then the updated parameters).
    Where the block reduce-scatters (``scatter``: which calls do), what it reduces is what it
    reduce-scatters: HSDP's all-reduces of the shards on the replicate group reduce those gradients
    again."""
    if elems is None:
        return False
    first = next((i for i in range(per) if grad[i]), per)
    sc = scatter if scatter is not None and any(scatter[first:per]) else None
    reduced = sum(elems[i] for i in range(first, per) if grad[i] and (sc is None or sc[i]))
    gathered = sum(elems[i] for i in range(first) if data is None or data[i])
    return 0 < reduced <= gathered * (1 + 1e-9)


def _alike_then_reductions(codes: list[int], grad: list[bool], data: list[bool] | None,
                           elems: list[float] | None, scatter: list[bool] | None = None) -> int | None:
    """K where a step is K ≥ 2 micro-batches alike, the gradients reduced in the last alone: its calls that
    carry data and reduce no gradients are one block K times, the first K − 1 wholly before the first
    reduction and at most half a block's calls after it (the last backward's gathers of the units it has
    not reduced yet), and the block gathers more than the step reduces (what it reduce-scatters, where it
    does: HSDP's all-reduces of the shards on the replicate group reduce those gradients again). That is
    FSDP's or HSDP's step under ``set_requires_gradient_sync(False)`` (``no_sync()``) on the earlier
    micro-batches, each gathering its units in the forward and again in the backward, the reductions among
    the last's gathers. The finest such blocks count. A step of one micro-batch whose forward and backward
    gather alike (one unit, or units of one size, gathered in the forward and again in the backward)
    gathers in its first half no more than it reduces, and is not taken for two; a step found in another
    phase (the steps of a trace without markers found from its end) has more calls after its first
    reduction. Tried where no other reading is sure: two micro-batches show no block repeated back to
    back before the reductions, nor do units of one size gathered in a row (a block of one call repeated),
    which :func:`_blocks` cannot take for micro-batches. None where the step is not so."""
    if elems is None:
        return None
    calls = [i for i, g in enumerate(grad) if not g and (data is None or data[i])]
    first = next((i for i, g in enumerate(grad) if g), None)
    if first is None:
        return None
    after = sum(i > first for i in calls)
    sc = scatter if scatter is not None and any(scatter) else None
    reduced = sum(elems[i] for i in range(len(grad)) if grad[i] and (sc is None or sc[i]))
    for k in range(len(calls), 1, -1):
        per = len(calls) // k
        if per * k != len(calls) or calls[(k - 1) * per - 1] > first or 2 * after > per:
            continue
        block = [codes[i] for i in calls[:per]]
        if all([codes[i] for i in calls[b * per:(b + 1) * per]] == block for b in range(1, k)) \
                and 0 < reduced < sum(elems[i] for i in calls[:per]) / (1 + 1e-9):
            return k
    return None


def _blocks_between_scalars(codes: list[int], grad: list[bool], data: list[bool] | None,
                            elems: list[float] | None, scatter: list[bool] | None = None) -> int | None:
    """K where the calls that carry data are one block repeated K ≥ 2 times, end to end, that gathers what
    it reduces (:func:`_gathers_what_it_reduces`), and the others are scalars, wherever they fall: the
    micro-batches of a step found in any phase, as one found from a trace cut mid-step begins inside
    a micro-batch or after its closing scalar. None otherwise."""
    if data is None or all(data) or not any(data):
        return None
    at = [i for i, d in enumerate(data) if d]
    sub = [codes[i] for i in at]
    per, reps = _leading_repeats(sub)
    if reps < 2 or per * reps != len(sub):
        return None
    g = [grad[i] for i in at]
    sc = None if scatter is None else [scatter[i] for i in at]
    return reps if _gathers_what_it_reduces(g, None, [elems[i] for i in at], per, sc) else None


def _backwards_after_one_forward(codes: list[int], grad: list[bool], data: list[bool] | None) -> int | None:
    """K where a step is one forward's gathers, each call once, then K backward blocks alike that gather
    again what the forward gathered (in their own order, each call once), the last with the gradient
    reductions among its calls (and calls without data): FSDP2 keeping what a backward gathered for the
    next micro-batch's forward (``set_reshard_after_backward(False)`` until the last micro-batch, under
    gradient accumulation or PyTorch's pipeline schedules), which reshards after the forward and gathers
    again in the backward, the gradients reduced after the last one. None otherwise."""
    seen: set[int] = set()
    p = next((i for i, c in enumerate(codes) if c in seen or seen.add(c)), 0)  # the first call seen again
    if not p or any(grad[:p]) or (data is not None and not all(data[:p])):
        return None
    forward = set(codes[:p])
    q, back = 0, set()
    while p + q < len(codes) and codes[p + q] in forward - back and not grad[p + q]:
        back.add(codes[p + q])
        q += 1
    block = codes[p:p + q]
    r = 1
    while q and codes[p + r * q:p + (r + 1) * q] == block:
        r += 1
    tail = range(p + r * q, len(codes))
    core = [codes[i] for i in tail if codes[i] in forward]
    extra = [i for i in tail if codes[i] not in forward]
    closed = core == block and any(grad[i] for i in extra) and all(
        grad[i] or (data is not None and not data[i]) for i in extra)
    return r + 1 if q and closed else None


def _two_with_more_reductions(codes: list[int], grad: list[bool], data: list[bool] | None) -> bool:
    """Whether a step is one block that reduces gradients, then the block once more with gradient reductions
    of its own among its calls (:func:`_with_more_reductions`): 2 micro-batches that reduce in each, the
    last once more, as HSDP's replicate all-reduce of the shards runs in the last micro-batch alone (FSDP2's
    ``set_requires_all_reduce(False)`` on the first). With 3 or more, the block repeats back to back before
    the last and :func:`_blocks` finds it; with 2 nothing repeats (or a call alike repeats: units of one
    size gathered in a row). The second block opens with the first's opening call, after the first's
    reductions."""
    first = next((i for i, g in enumerate(grad) if g), None)
    if first is None:
        return False
    for per in range(first + 1, len(codes) // 2 + 1):
        if codes[per] == codes[0] and _with_more_reductions(codes, grad, data, per, 1, set(codes[:per])):
            return True
    return False


def _with_more_reductions(codes: list[int], grad: list[bool], data: list[bool] | None, per: int, reps: int,
                          block: set) -> bool:
    """Whether what follows ``reps`` blocks of ``per`` calls is the block once more with gradient reductions
    of its own (and calls without data) among its calls: the last micro-batch of a step that reduces in
    every micro-batch and once more at the end, as HSDP's replicate all-reduce of the shards runs in the
    last micro-batch alone (FSDP2's ``set_requires_all_reduce(False)`` on the others)."""
    tail = range(per * reps, len(codes))
    core = [codes[i] for i in tail if codes[i] in block]
    extra = [i for i in tail if codes[i] not in block]
    return (core == codes[:per] and any(grad[i] for i in extra)
            and all(grad[i] or (data is not None and not data[i]) for i in extra))


def secondary_gathers(ops: Codes, gs: np.ndarray, full: np.ndarray, step: np.ndarray,
                      apart: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The all-gathers reported apart (``apart``) on a smaller group that gather a vector of the very size a
    step's all-gather on a larger group does (``step``): the same parameters gathered from a secondary copy
    (ZeRO++'s hpZ, FSDP2's ``reshard_after_forward`` as an int); and the group sizes with each such call's
    set to that larger group's, so that a micro-batch which gathers from the copy reads as one that gathers
    on the whole group."""
    gathers = ops.eq("all_gather")
    cand = np.flatnonzero(apart & gathers)
    if not len(cand):
        return np.zeros(len(full), dtype=bool), gs
    size_of = {}
    for f, g in zip(full[step & gathers].tolist(), gs[step & gathers].tolist(), strict=True):
        size_of[f] = max(size_of.get(f, 0), g)
    hit = [i for i in cand.tolist() if 1 < gs[i] < size_of.get(full[i], 0) and size_of[full[i]] % gs[i] == 0]
    mask = np.zeros(len(full), dtype=bool)
    mask[hit] = True
    if not hit:
        return mask, gs
    out = gs.copy()
    out[hit] = [size_of[full[i]] for i in hit]
    return mask, out


def backward_passes(files: Codes, profiler_step: np.ndarray, meta: dict | None, rank: np.ndarray,
                    step_id: np.ndarray, use: np.ndarray, span: int | None = None
                    ) -> tuple[Counter, bool]:
    """Backward passes per step → how many (rank, step) pairs of the calls ``use`` run that many, from
    the passes each trace file counts per ``ProfilerStep`` (``meta[file]["backward_passes"]``,
    :mod:`zerocalc.traces.kineto_backward`). A ProfilerStep holding calls of ``use`` counts its passes and
    those of the ProfilerSteps since the one before it that held any: a profiler stepped every micro-batch
    (DeepSpeed's ``engine.backward(loss); engine.step(); prof.step()``) marks the micro-batches that send
    nothing before the boundary as steps without calls. A pair's passes are its ProfilerSteps' summed; a
    pair whose first ProfilerStep follows counted ones that no step holding calls precedes (a profile
    begun inside an optimizer step) is left out, and so is one with a ProfilerStep its file counts none
    in. ``span``: where ``profiler_step`` is each call's optimizer step, the marked step that ends it, span
    marked steps to one (:mod:`.optimizer_steps`), each optimizer step's passes are those of its span. Also
    returns whether some pair counted passes of ProfilerSteps without calls (found so, not by span)."""
    counted = [(meta or {}).get(name, {}).get("backward_passes") for name in files.names]
    if not any(counted):
        return Counter(), False
    sel = use & (files.codes >= 0) & ~np.isnan(profiler_step) & (step_id >= 0)
    if not sel.any():
        return Counter(), False
    quads = np.unique(np.stack([rank[sel], step_id[sel], files.codes[sel],
                                profiler_step[sel].astype(np.int64)], axis=1), axis=0)
    before: dict[tuple[int, int], int | None] = {}  # (file, ProfilerStep holding calls) -> the one before
    last: dict[int, int | None] = {}
    for f, p in np.unique(quads[:, 2:], axis=0).tolist():
        before[(f, p)] = last.get(f)
        last[f] = p
    sums: dict[int, tuple[list[int], np.ndarray]] = {}  # file -> its counted steps and their running sum
    per_pair: dict[tuple[int, int], int | None] = {}
    spanned = False
    for r, s, f, p in quads.tolist():
        mine = counted[f] or {}
        if f not in sums:
            steps = sorted(mine)
            sums[f] = steps, np.concatenate([[0], np.cumsum([mine[q] for q in steps])])
        steps, run = sums[f]
        prev = before[(f, p)] if span is None else p - span
        lo = bisect.bisect_right(steps, prev) if prev is not None else 0
        hi = bisect.bisect_right(steps, p)
        got = int(run[hi] - run[lo]) if p in mine else None
        if prev is None and hi - lo > 1:
            got = None  # passes before the first step that holds calls: where its step began is unknown
        spanned |= got is not None and hi - lo > 1 and span is None
        have = per_pair.get((r, s), 0)
        per_pair[(r, s)] = None if got is None or have is None else have + got
    return Counter(v for v in per_pair.values() if v), spanned


def infer_micro_batches(ops: Codes, gs: np.ndarray, full: np.ndarray, use: np.ndarray, grad: np.ndarray,
                        rank: np.ndarray, step_id: np.ndarray, k: int | None, *,
                        marked: bool = True, w: np.ndarray | None = None,
                        apart: np.ndarray | None = None, small: np.ndarray | None = None,
                        backwards: tuple[Counter, bool] | None = None) -> MicroBatches:
    """Micro-batches per optimizer step: ``--micro-batches K``, else the number of times the block of
    collectives that opens each optimizer step repeats back to back (the most common count over ranks
    and steps). Gradient accumulation repeats forward and backward, and with them every collective
    they issue (§7: DDP and FSDP reduce in every micro-batch unless ``no_sync``; FSDP and DeepSpeed
    ZeRO-3 gather in every micro-batch; DeepSpeed ZeRO-2/3 reduce in every micro-batch, ZeRO-1 at the
    boundary). The gradient-sync mode is read from where the gradient reductions fall: inside the
    repeated block (every micro-batch) or only after it (at the boundary). A trace that marks no optimizer
    steps (``marked`` False) has steps that are themselves repeated blocks, which micro-batches that reduce
    in each would be: there a step shows its micro-batches only where it could be nothing else
    (:func:`_step_blocks`).

    ``use``: the steady-state calls inside a step; ``grad``: the gradient reductions among them; ``w``:
    each call's weight in a folded trace (:mod:`.folded`; a pair counts as its calls' weight); ``apart``:
    the calls reported apart, among which gathers from a secondary copy count as the whole group's
    (:func:`secondary_gathers`); ``small``: the calls that carry no data (scalars, norm vectors; None:
    those of at most a scalar's elements); ``backwards``: the backward passes the steps run
    (:func:`backward_passes`), which give K where no collective repeats inside a step (micro-batches that
    send nothing before the boundary: DDP's ``no_sync``, DeepSpeed ZeRO-1, FSDP's SHARD_GRAD_OP under
    ``no_sync``, a pipeline stage whose data-parallel reduction follows its last backward), and whether
    they span marked steps without calls.
    """
    backwards, spanned = backwards or (Counter(), False)
    if apart is not None:
        secondary, gs = secondary_gathers(ops, gs, full, use, apart)
        use = use | (secondary & (step_id >= 0))
    found: Counter = Counter()
    modes: Counter = Counter()
    repeats: Counter = Counter()  # the times a step's gradient calls recur (_recurrence)
    if not marked:  # steps found as equal blocks: each rank's first stands for all of its steps
        use = use & (step_id == 0)
    _count_blocks(ops, gs, full, use, grad, rank, step_id, found, modes, repeats, w,
                  sure_only=not marked and k is None, passes=_most(backwards),
                  lead=(step_id < 0) & ~apart if not marked and k is None and apart is not None else None,
                  small=small)
    passes = _most(backwards)  # on a tie, the count the backward passes confirm, else the fewer
    inferred = max(found, key=lambda r: (found[r], r == passes, -r)) if found else 1
    mode = max(modes, key=modes.get) if modes else None
    k, how = _k_and_how(k, inferred, marked, _most(backwards), spanned, reduces=mode == "every")
    if mode == KEPT_BACKWARDS:
        mode = "boundary"
        if k == inferred and k > 1:
            how = (f"K = {k}: inferred from the trace (each optimizer step holds one forward's gathers, then "
                   f"{k} backward blocks alike, the gradient reductions in the last: one per micro-batch, "
                   "each gathering again what the one forward gathered)")
    if mode is None and k > 1 and (repeats or (use & grad).any()):
        # K given, nothing repeats: the gradient reductions recur K times per step (a multiple: buckets of
        # one size) where each micro-batch reduces; else (once each, or unlike: buckets of equal layers
        # beside others, DeepSpeed ZeRO-1's bucket of reduce_bucket_size elements beside the rest) they are
        # reduced at the boundary
        recur = max(repeats, key=repeats.get) if repeats else None
        mode = "every" if recur is not None and recur % k == 0 else "boundary"
        if mode == "boundary" and not marked:
            return MicroBatches(k, how, "boundary", "gradients reduced once a step found, as at the boundary "
                                                    "(no_sync / set_requires_gradient_sync(False) on the "
                                                    "earlier micro-batches, or a ZeRO-1 boundary reduction); "
                                                    "the trace marks no steps, and micro-batches that each "
                                                    "reduce repeat so too: there each step found is a "
                                                    "micro-batch, and --steps N, the optimizer steps it "
                                                    "holds, reads K of them as one")
    if k == 1:
        return MicroBatches(1, how, None, "one micro-batch per optimizer step: nothing to tell")
    if mode == "every":
        return MicroBatches(k, how, "every",
                            "gradients reduced in every micro-batch (the repeated block holds the gradient "
                            "collectives)")
    if mode == "boundary":
        return MicroBatches(k, how, "boundary", "gradients reduced once per optimizer step (no_sync / "
                                                "set_requires_gradient_sync(False) on the earlier "
                                                "micro-batches, or a ZeRO-1 boundary reduction)")
    return MicroBatches(k, how, None, "the trace does not show when the gradients are reduced")


def _k_and_how(k: int | None, inferred: int, marked: bool, passes: int | None, spanned: bool,
               reduces: bool = True) -> tuple[int, str]:
    """K and how it was found: ``--micro-batches`` (``k``), else the block that repeats ``inferred`` times
    inside a step unless a marked step runs more backward passes (``passes``, the most common), or fewer
    where the block reduces no gradient (``reduces`` False), else those passes (``spanned``: counted over
    marked steps without calls), else 1."""
    if k is not None:
        if k < 1:
            from zerocalc.errors import ConfigError

            raise ConfigError(f"must be a positive integer, got {k}", option="--micro-batches")
        how = f"K = {k}: from --micro-batches"
        if inferred > 1 and inferred != k:
            how += f" (the trace's steps open with a block repeated {inferred} times)"
        elif passes and passes != k:
            how += f" (the trace's steps run {passes} backward pass{'es' if passes > 1 else ''} each)"
    elif inferred > 1 and not marked:
        k = inferred
        how = (f"K = {k}: inferred from the trace (it marks no optimizer steps; each repeating step is one "
               f"block of collectives repeated {k} times, the gradient reductions in every block or in the "
               "last alone: one per micro-batch)")
    elif inferred > 1 and marked and passes and passes > inferred:
        # the block that opens a step repeats fewer times than the step's backward passes: no block per
        # micro-batch, as a pipeline schedule other than GPipe (1F1B, interleaved, zero bubble) orders them:
        # a stage's warm-up forwards back to back, then forwards and backwards in turn
        k = passes
        how = (f"{_by_passes(k)}; the block of collectives that opens each step repeats {inferred} times, "
               "fewer: the micro-batches do not each send one block, as a pipeline schedule that runs "
               "forwards and backwards in turn (1F1B, interleaved) orders them")
    elif inferred > 1 and marked and passes and passes < inferred and not reduces:
        # more repeats than backward passes, of a block that reduces nothing: the gathers of units of one
        # size back to back (a model's equal blocks, each its own unit), or one unit gathered for its
        # forward and again for its backward, not one block a micro-batch (where a block reduces, a rank
        # that joined early under DDP's Join shadows the others' reductions without a backward of its own)
        k = passes
        how = (f"{_by_passes(k)}; the block of collectives that opens each step repeats {inferred} times, "
               "more, and reduces no gradient: gathers alike back to back (units of one size, as a model's "
               "equal blocks are, or one unit gathered for its forward and again for its backward), not one "
               "block a micro-batch")
    elif inferred > 1:
        k = inferred
        how = (f"K = {k}: inferred from the trace (each optimizer step opens with one block of collectives "
               f"repeated {k} times: one per micro-batch)")
    elif marked and passes and passes > 1:
        k = passes
        how = (f"{_by_passes(k)}; no collective repeats inside a step: the micro-batches before the boundary "
               "send nothing")
        if spanned:
            how += (" (the profiler marks every micro-batch: a step is the marked steps since the one before "
                    "that held calls)")
    elif not marked:
        k = 1
        how = ("K = 1: the trace marks no optimizer steps, so micro-batches cannot be told from steps "
               "(give --micro-batches K)")
    else:
        k = 1
        how = ("K = 1: nothing repeats inside an optimizer step (one micro-batch, or micro-batches that send "
               "nothing before the boundary: give --micro-batches K if so)")
    return k, how


def _by_passes(k: int) -> str:
    """How K was read from the backward passes each marked step runs, the opening of the sentence."""
    return (f"K = {k}: inferred from the trace's backward passes (each optimizer step runs {k}, by the "
            "autograd engine's node events: a node numbered above every one before it opens a pass)")


def _most(counts: Counter | None) -> int | None:
    """The most common value of ``counts`` (the smaller on a tie); None where it is empty."""
    return max(counts, key=lambda r: (counts[r], -r)) if counts else None


def _count_blocks(ops: Codes, gs: np.ndarray, full: np.ndarray, use: np.ndarray, grad: np.ndarray,
                  rank: np.ndarray, step_id: np.ndarray, found: Counter, modes: Counter,
                  repeats: Counter, w: np.ndarray | None = None, *, sure_only: bool = False,
                  lead: np.ndarray | None = None, small: np.ndarray | None = None,
                  passes: int | None = None) -> None:
    """Count, over the (rank, step) pairs in rank and step order, each pair's :func:`_step_blocks`:
    searched once per distinct call sequence, counted once per pair (counters filled in order of first
    appearance, as a loop over the pairs would). ``sure_only``: a step's micro-batches count only where
    they could be nothing else (:func:`_step_blocks`; else 1), and so its gradient-sync mode. ``lead``:
    the calls that may come before each rank's first step (a trace without markers: its steps read in
    the phase :func:`_cut_phase` finds where they are not sure as found)."""
    sel = np.flatnonzero(use)
    if not len(sel):
        return
    # the pairs' calls in (rank, step, call) order: already so when each rank's steps come in order
    r, s = rank[sel], step_id[sel]
    if not (np.all(r[1:] >= r[:-1]) and np.all((r[1:] != r[:-1]) | (s[1:] >= s[:-1]))):
        sel = sel[np.lexsort((sel, s, r))]
        r, s = rank[sel], step_id[sel]
    before = _before_first(sel, r, rank, lead) if lead is not None else np.zeros(0, dtype=np.int64)
    both, _ = group_codes(*(np.concatenate([a[sel], a[before]]) for a in (ops.codes, full, gs)))
    sig, lead_sig = both[:len(sel)], both[len(sel):]
    bounds = np.concatenate([[0], np.flatnonzero((r[1:] != r[:-1]) | (s[1:] != s[:-1])) + 1, [len(sel)]])
    rep = distinct_runs(sig, bounds)
    firsts, mult = np.unique(rep, return_counts=True)  # the first pair of each sequence, in pair order
    if w is not None:  # each pair counted by its weight
        mult = np.bincount(rep, weights=w[sel][bounds[:-1]])[firsts].astype(np.int64)
    g, elems, scatter = grad[sel], full[sel], ops.eq("reduce_scatter")[sel]
    data = elems > SCALAR_MAX_ELEMENTS if small is None else ~small[sel]
    for i, times in zip(firsts.tolist(), mult.tolist(), strict=True):
        lo, hi = int(bounds[i]), int(bounds[i + 1])
        args = (sig[lo:hi].tolist(), g[lo:hi].tolist(), data[lo:hi].tolist(), elems[lo:hi].tolist(),
                scatter[lo:hi].tolist())
        reps, mode, recur, sure = _step_blocks(*args, passes=passes)
        if sure_only and not sure and len(before):
            reps, mode, recur, sure = _cut_phase(args, lead_sig[rank[before] == r[lo]].tolist()) or (
                reps, mode, recur, sure)
        if sure_only and not sure:
            reps, mode = 1, None
        if recur is not None:
            repeats[recur] += times
        if mode is not None:
            modes[mode] += times
        found[reps] += times


def _before_first(sel: np.ndarray, r: np.ndarray, rank: np.ndarray, lead: np.ndarray) -> np.ndarray:
    """The calls of ``lead`` that come before their rank's first call in ``sel`` (``r``: its calls'
    ranks), in order."""
    first = np.full(int(rank.max()) + 1, np.iinfo(np.int64).max)
    np.minimum.at(first, r, sel)
    cand = np.flatnonzero(lead)
    return cand[cand < first[rank[cand]]]


def _cut_phase(args: tuple[list, ...], lead: list[int]):
    """A step found without markers read in another phase: its last t calls moved to its front, where the
    calls before the first step end in those t calls, so that the steps are as many equal blocks as
    before. That is the phase of a trace that ends in a step cut short (an NCCL log of a run stopped
    mid-step, a Flight Recorder dump taken during one): the steps found from the end begin inside one,
    its micro-batches out of place. The first t (fewest calls moved) whose reading is sure, with more than
    one micro-batch (:func:`_step_blocks`), but for blocks that gather what they reduce followed by more
    gathers (one step's layers, each gathered in the forward and again in the backward, read from its
    backward on); None where none is."""
    codes = args[0]
    m = 0
    while m < min(len(lead), len(codes) - 1) and lead[-1 - m] == codes[-1 - m]:
        m += 1
    for t in range(1, m + 1):
        rot = tuple(a[-t:] + a[:-t] for a in args)
        got = _step_blocks(*rot)
        if not (got[3] and got[0] > 1):
            continue
        per, reps = _leading_repeats(rot[0])
        grad, data, elems = rot[1][:per], rot[2][:per], rot[3][:per]
        sc = rot[4][:per] if len(rot) > 4 else [False] * per  # which reduce-scatter, where given
        gathered = sum(e for e, g, d in zip(elems, grad, data, strict=True) if d and not g)
        reduced = sum(e for e, g, x in zip(elems, grad, sc, strict=True) if g and (x or not any(sc)))
        rest = range(per * reps, len(rot[0]))
        if 0 < reduced <= gathered and any(rot[2][i] for i in rest) and not any(rot[1][i] for i in rest):
            continue  # blocks that gather their own parameters, then gathers: the next forward's, not a cut
        return got
    return None
