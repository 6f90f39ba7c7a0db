"""A repeated block read as k steps and an evaluation between them: a run without step markers that
evaluates (or checkpoints) every k steps repeats the k steps and the evaluation together
(:mod:`.steps` asks where its run's block is so; :mod:`.interrupted` reads an evaluation that does not
repeat with the steps).

Each sequence is of integers, one per distinct call, as in :mod:`.repeats`.
"""

from __future__ import annotations

import numpy as np

from zerocalc.validate.repeats import AGAIN, _gradient_weight, _latest_match, _next_to_nothing


def _steps_in_block(block: np.ndarray, load: np.ndarray, carries: np.ndarray, reduces: np.ndarray,
                    objects: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, int] | None:
    """Where a repeated block is k ≥ 2 steps and an evaluation between them (a run that evaluates every k
    steps): each call's step in the block (0 … k - 1; -1 between steps), whether it is of the step the next
    block begins (it follows the block's last step), and the calls of the evaluation that count in the step
    after it (lent: what it gathered and that step keeps); None where the block is one step.

    The gradients' reductions (:data:`~.repeats.GRADIENT_SHARE`) repeat k times round the block; each k that
    so repeats is read (:func:`_block_as_steps`) and the one read with the fewest steps unlike the shortest is
    kept (ties: the most steps): where every reduction is the same call (DeepSpeed ZeRO-3's micro-batches),
    each micro-batch may be read as a step, and the steps whose calls all look alike are the reading whose
    only odd place is the evaluation."""
    if not reduces.any():
        return None
    weight = _gradient_weight(load, reduces)
    grad_at = np.flatnonzero(weight > 0)
    n = len(grad_at)
    codes = block[grad_at]
    best = None
    for g in range(1, n // 2 + 1):
        if n % g == 0 and np.array_equal(codes, np.roll(codes, g)):
            read = _block_as_steps(block, load, carries, weight, grad_at, g, objects)
            if read is not None and (best is None or read[3] < best[3]):
                best = read
    return None if best is None else best[:3]


def _block_as_steps(block: np.ndarray, load: np.ndarray, carries: np.ndarray, weight: np.ndarray,
                    grad_at: np.ndarray, g: int, objects: np.ndarray | None
                    ) -> tuple[np.ndarray, np.ndarray, int, int] | None:
    """:func:`_steps_in_block`'s reading of a block as k = len(grad_at) / g steps: (labels, late, calls lent,
    steps unlike the shortest), or None.

    Each step ends at a gradient reduction (``grad_at``; ``weight``: :func:`~.repeats._gradient_weight`),
    where every repetition leaves the most calls before the next (the forward comes between; ties: the most in
    all). The shortest of the k stretches so cut is a step; in each other, the calls before the last place the
    step's calls can begin, in order, are between steps, and so are those after the step's next-to-nothing
    calls that come first there and before its first that carries data (cut at the reductions, a step begins
    with the step before's gradient norm or overflow flag, and an evaluation follows it). Read so only where
    those calls carry no gradients, send nothing but a step's own calls or next to nothing (a loss or metric
    all-reduce), and some of them are a step's own calls carrying data (an evaluation's forward gathers), and
    the step holds two or more distinct calls that carry data (equal buckets and a loss all-reduce stay one
    step). Micro-batches that each reduce, then a loss or metric all-reduce, have nothing of a forward between
    them; the optimizer's gather after them (DeepSpeed ZeRO-2) is none of a micro-batch's own calls: such
    blocks stay one step. An evaluation that sends nothing but its metrics (DDP's) is not told from such a
    block. Pickled objects between steps (``objects``: a checkpoint's save plan every k steps) are as sure a
    sign as a forward: no micro-batch sends them. A step longer than the shortest by calls of a step's own
    that carry no gradients (FSDP2 gathers again in the next backward a module the evaluation left resharded)
    sends them again after the evaluation: their label is :data:`~.repeats.AGAIN`, one-off too. A step longer
    by next-to-nothing calls that follow its own gathers (DeepSpeed ZeRO-3, FSDP1 ``SHARD_GRAD_OP`` and FSDP2
    without resharding after forward keep what the evaluation's forward gathered: the step after it gathers
    nothing, and the evaluation's loss all-reduces fall between those gathers and the step's reductions) holds
    the evaluation: those calls are between steps, the gathers before them lent to the step, and its own calls
    beyond the shortest's sent again."""
    per, n = len(block), len(grad_at)
    k = n // g
    gap = np.append(grad_at[1:], grad_at[0] + per) - grad_at  # calls to the next gradient call, round
    phase = max(range(g), key=lambda f: (gap[f::g].min(), gap[f::g].sum(), -f))
    ends = grad_at[phase::g]
    segments = [np.arange(ends[i - 1] + 1 - (per if i == 0 else 0), ends[i] + 1) % per for i in range(k)]
    shortest = min(segments, key=len)
    template = block[shortest]
    if len(set(template[carries[shortest]].tolist())) < 2:
        return None
    tiny = _next_to_nothing(load, weight)
    own = np.isin(block, template)
    labels = np.full(per, -1, dtype=np.int64)
    forward = False  # a step's own call carrying data between steps: a forward pass
    lent = unlike = 0
    for i, seg in enumerate(segments):
        matched = _latest_match(block[seg], template)
        if matched is None:
            return None
        # the step's calls from its first that carries data; the next-to-nothing ones matched before it
        # (the step before's last, a gradient norm or overflow flag) stay the step's, the rest between
        data = matched[carries[seg[matched]] & ~tiny[seg[matched]]]
        x = int(data[0]) if len(data) else int(matched[0]) if len(matched) else 0
        before = seg[np.setdiff1d(np.arange(x), matched)]
        obj = objects[before] if objects is not None else np.zeros(len(before), dtype=bool)
        if weight[before].any() or not np.all(~carries[before] | tiny[before] | own[before] | obj):
            return None
        labels[seg[x:]] = i
        labels[seg[matched[matched < x]]] = i
        unlike += len(seg) != len(shortest)
        extra = np.setdiff1d(np.arange(x, len(seg)), matched)  # beyond the step's calls, inside it
        again = seg[extra]
        if len(again) and not weight[again].any() and own[again].all():
            labels[again] = AGAIN
        elif len(again) and not weight[again].any():
            metric = tiny[again] & ~own[again]  # an evaluation's loss all-reduces, inside the step
            gathered = seg[matched[matched < extra[np.argmax(metric)]]]
            gathered = gathered[carries[gathered] & (weight[gathered] == 0)]
            if (metric | own[again]).all() and len(gathered):  # the evaluation's gathers, kept by the step
                labels[again[metric]] = -1
                labels[again[~metric]] = AGAIN
                lent += len(gathered)
                forward = True
        forward |= bool((carries[before] & own[before]).any() or obj.any())
    if not forward:
        return None
    return labels, np.arange(per) > ends[-1], lent, unlike
