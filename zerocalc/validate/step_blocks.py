"""One optimizer step's call sequence read as micro-batches: the shapes a step's calls take (a block
repeated back to back, the reductions in every block or after the last; blocks that gather what they
reduce between scalars; one forward's gathers then backwards alike; K blocks alike before the reductions;
a block then itself with reductions of its own), on plain lists, one call per entry. The trace's columns
and the counting over ranks and steps are :mod:`.micro_batches`'.
"""

from __future__ import annotations

import math
from collections import Counter

from zerocalc.validate.repeats import _leading_repeats

#: :func:`step_blocks`'s mode where the micro-batches are one forward's gathers, then backwards alike, the
#: reductions in the last (:func:`_backwards_after_one_forward`): the boundary, read so.
KEPT_BACKWARDS = "boundary, backwards after one forward"
#: :func:`step_blocks`'s mode where the micro-batches each reduce alike, the first gathering more than the
#: later ones, which repeat alike (:func:`_wider_first_block`): every micro-batch reduces, read so.
WIDER_FIRST = "every, the first micro-batch gathering more"


def step_blocks(codes: list[int], grad: list[bool], data: list[bool] | None = None,
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
    if not sure and (k := _wider_first_block(codes, grad, data, elems, scatter)):
        reps, mode, sure = k, WIDER_FIRST, True
    return reps, mode, recur, sure


def _wider_first_block(codes: list[int], grad: list[bool], data: list[bool] | None,
                       elems: list[float] | None, scatter: list[bool] | None = None) -> int | None:
    """K where a step is K ≥ 2 blocks that each end in the same gradient reductions, the K − 1 after the
    first alike, the first gathering more than each of them, at least what a block reduces and less than
    K times it, then calls that reduce nothing: DeepSpeed ZeRO-3 before 0.19.3 under gradient
    accumulation, which keeps the parameters its backward uses last gathered into the next micro-batch's
    forward, so the first micro-batch after the optimizer step gathers Ψ and the later ones the rest, each
    reducing Ψ. Blocks are cut after each run of reductions; calls without data (scalars) are left out, and
    where they fall between the blocks, the blocks are steps (a step closes with one). One micro-batch
    whose backward reduces units of one size, one a block, gathers every unit in its first block, K times
    what a block reduces or more, and is not taken for K. None where the step is not so."""
    if elems is None:
        return None
    sc = scatter if scatter is not None and any(scatter) else None
    blocks: list[tuple[list[int], list[int]]] = []  # each block's data calls, then its reductions
    pre: list[int] = []
    red: list[int] = []
    for i, g in enumerate(grad):
        if g:
            red.append(i)
            if i + 1 == len(grad) or not grad[i + 1]:
                blocks.append((pre, red))
                pre, red = [], []
        elif data is None or data[i]:
            pre.append(i)
    k = len(blocks)
    if k < 2:
        return None
    # no scalar between the blocks: one closes each optimizer step (an overflow flag, a norm), not each
    # micro-batch, so blocks with scalars between them are steps
    inner = range(blocks[0][1][0], blocks[-1][1][-1])
    if data is not None and not all(data[i] or grad[i] for i in inner):
        return None
    reductions = [codes[i] for i in blocks[0][1]]
    if any([codes[i] for i in r] != reductions for _, r in blocks[1:]):
        return None
    later = [codes[i] for i in blocks[1][0]]
    if any([codes[i] for i in c] != later for c, _ in blocks[2:]):
        return None
    reduced = sum(elems[i] for i in blocks[0][1] if sc is None or sc[i])
    first = sum(elems[i] for i in blocks[0][0])
    rest = sum(elems[i] for i in blocks[1][0])
    return k if 0 < reduced <= first < k * reduced and rest < first else None


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



def cut_phase(args: tuple[list, ...], lead: list[int]):
    """A step found without markers read in another phase: its last t calls moved to its front, where the
    calls before the first step end in those t calls, so that the steps are as many equal blocks as
    before. That is the phase of a trace that ends in a step cut short (an NCCL log of a run stopped
    mid-step, a Flight Recorder dump taken during one): the steps found from the end begin inside one,
    its micro-batches out of place. The first t (fewest calls moved) whose reading is sure, with more than
    one micro-batch (:func:`step_blocks`), but for blocks that gather what they reduce followed by more
    gathers (one step's layers, each gathered in the forward and again in the backward, read from its
    backward on); None where none is."""
    codes = args[0]
    m = 0
    while m < min(len(lead), len(codes) - 1) and lead[-1 - m] == codes[-1 - m]:
        m += 1
    for t in range(1, m + 1):
        rot = tuple(a[-t:] + a[:-t] for a in args)
        got = step_blocks(*rot)
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
