"""Micro-batches per optimizer step and when the gradients are reduced, from the block of calls that
repeats inside each step (:func:`~.repeats._leading_repeats`), each step's calls read by
:mod:`.step_blocks`, counted over the ranks and steps here.

Each search runs once per distinct call sequence (one (rank, step)'s), not once per pair. Sources: §7
(micro-batches and gradient accumulation per implementation).
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass

import numpy as np

from zerocalc.validate.classify import SCALAR_MAX_ELEMENTS
from zerocalc.validate.columns import Codes, distinct_runs, group_codes
from zerocalc.validate.step_blocks import KEPT_BACKWARDS, WIDER_FIRST, cut_phase, step_blocks


@dataclass(frozen=True)
class MicroBatches:
    """Micro-batches per optimizer step and when the gradients are reduced, with how each was found."""

    k: int
    how: str
    #: "every" (gradients reduced in every micro-batch), "boundary" (once per optimizer step), or None
    #: when the trace cannot tell (one micro-batch, or nothing repeats)
    grad_sync: str | None
    grad_sync_how: str


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
    (:func:`~.step_blocks.step_blocks`).

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
    passes = _most(backwards)  # on a tie, the count the backward passes confirm, else the fewer
    if apart is not None:
        secondary, gs = secondary_gathers(ops, gs, full, use, apart)
        use = use | (secondary & (step_id >= 0))
    if not marked:  # steps found as equal blocks: each rank's first stands for all of its steps
        use = use & (step_id == 0)
    # each reading's count over the (rank, step) pairs; repeats: the times a step's gradient calls recur
    found, modes, repeats = Counter(), Counter(), Counter()
    _count_blocks(ops, gs, full, use, grad, rank, step_id, found, modes, repeats, w,
                  sure_only=not marked and k is None, passes=passes,
                  lead=(step_id < 0) & ~apart if not marked and k is None and apart is not None else None,
                  small=small)
    inferred = max(found, key=lambda r: (found[r], r == passes, -r)) if found else 1
    mode = max(modes, key=modes.get) if modes else None
    recur = max(repeats, key=repeats.get) if repeats else None
    k, how = _k_and_how(k, inferred, marked, passes, spanned, reduces=mode == "every", recur=recur)
    mode, how = _shaped(mode, how, k, inferred)
    return _sync_read(k, how, mode, recur, marked, bool(repeats) or bool((use & grad).any()))


def _shaped(mode: str | None, how: str, k: int, inferred: int) -> tuple[str | None, str]:
    """The gradient-sync mode of the step shapes :mod:`.step_blocks` names by a mode of their own (a first
    micro-batch that gathers more; one forward, then backwards alike), and K's sentence for them where the
    blocks gave it."""
    if mode == WIDER_FIRST:
        mode = "every"
        if k == inferred and k > 1:
            later = "the one after it" if k == 2 else f"the {k - 1} after it (alike)"
            how = (f"K = {k}: inferred from the trace (each optimizer step holds {k} blocks of collectives "
                   "that end in the same gradient reductions, one per micro-batch: the first gathers more "
                   f"than {later}, which do not gather again there what an earlier one kept, as DeepSpeed "
                   "ZeRO-3 before 0.19.3 keeps the parameters its backward uses last, or gathered from "
                   "elsewhere, as ZeRO++'s hpZ does from its secondary copy)")
    if mode == KEPT_BACKWARDS:
        mode = "boundary"
        if k == inferred and k > 1:
            how = (f"K = {k}: inferred from the trace (each optimizer step holds one forward's gathers, then "
                   f"{k} backward blocks alike, the gradient reductions in the last: one per micro-batch, "
                   "each gathering again what the one forward gathered)")
    return mode, how


def _sync_read(k: int, how: str, mode: str | None, recur: int | None, marked: bool,
               reducing: bool) -> MicroBatches:
    """The reading: K, how, and the gradient-sync mode the blocks show (``mode``), else, where K > 1 and the
    step reduces (``reducing``), the one the gradient reductions' recurrence shows (``recur``)."""
    recurring = False  # the mode read from the gradient reductions' recurrence, no block repeating
    if mode is None and k > 1 and reducing:
        # K given, nothing repeats: the gradient reductions recur K times per step (a multiple: buckets of
        # one size) where each micro-batch reduces; else (once each, or unlike: buckets of equal layers
        # beside others, DeepSpeed ZeRO-1's bucket of reduce_bucket_size elements beside the rest) they are
        # reduced at the boundary
        mode = "every" if recur is not None and recur % k == 0 else "boundary"
        recurring = mode == "every"
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
                            "gradients reduced in every micro-batch (" + (
                                f"the gradient reductions recur {recur} times a step" if recurring else
                                "the repeated block holds the gradient collectives") + ")")
    if mode == "boundary":
        return MicroBatches(k, how, "boundary", "gradients reduced once per optimizer step (no_sync / "
                                                "set_requires_gradient_sync(False) on the earlier "
                                                "micro-batches, or a ZeRO-1 boundary reduction)")
    return MicroBatches(k, how, None, "the trace does not show when the gradients are reduced")


def _k_and_how(k: int | None, inferred: int, marked: bool, passes: int | None, spanned: bool,
               reduces: bool = True, recur: int | None = None) -> tuple[int, str]:
    """K and how it was found: ``--micro-batches`` (``k``), else the block that repeats ``inferred`` times
    inside a step unless a marked step runs more backward passes (``passes``, the most common), or fewer
    where the block reduces no gradient (``reduces`` False), else those passes (``spanned``: counted over
    marked steps without calls), else 1. ``recur``: the times a step's gradient reductions recur (a multiple
    of the passes where each micro-batch reduces, though no block repeats alike)."""
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
    elif marked and passes and passes > 1 and recur and recur % passes == 0:
        # each micro-batch reduces, but the blocks around the reductions differ, in no shape step_blocks
        # reads: DeepSpeed ZeRO-3 before 0.19.3 at its defaults gathers a module it keeps across them before
        # the first alone and its persistent parameters after the last
        # (real-runs/deepspeed0.15.4-ds-zero3-defaults-mixed-ga4)
        k = passes
        how = (f"{_by_passes(k)}; the gradient reductions recur in each ({recur} times a step), but no "
               "block of collectives repeats alike: the calls around them differ from one micro-batch to "
               "the next")
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
    """Count, over the (rank, step) pairs in rank and step order, each pair's
    :func:`~.step_blocks.step_blocks`: searched once per distinct call sequence, counted once per pair
    (counters filled in order of first appearance, as a loop over the pairs would). ``sure_only``: a step's
    micro-batches count only where they could be nothing else (:func:`~.step_blocks.step_blocks`; else 1),
    and so its gradient-sync mode. ``lead``: the calls that may come before each rank's first step (a trace
    without markers: its steps read in the phase :func:`~.step_blocks.cut_phase` finds where they are not
    sure as found)."""
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
        reps, mode, recur, sure = step_blocks(*args, passes=passes)
        if sure_only and not sure and len(before):
            reps, mode, recur, sure = cut_phase(args, lead_sig[rank[before] == r[lo]].tolist()) or (
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
