"""Steps and micro-batches: where each rank's steps begin and end, and how many micro-batches each
optimizer step holds, from the trace's step markers or its repeating call sequences.

Each search runs once per distinct call sequence (a rank's calls, or one (rank, step)'s), not once
per rank or pair: the ranks of a data-parallel run make the same calls. Sources: Gusfield 1997 §1.4
(Z-algorithm), §7 (micro-batches and gradient accumulation), and the trace formats of §5.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from zerocalc.errors import TraceMismatchError
from zerocalc.validate.accounting import _OP_VERBS, _plural
from zerocalc.validate.classify import GRADIENT_OPS, SCALAR_MAX_ELEMENTS
from zerocalc.validate.columns import Codes, distinct_runs, group_codes, run_bounds, zero_nan
from zerocalc.validate.folded import Unfoldable, unfold_steps


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


def infer_steps(marked: np.ndarray | None, rank: np.ndarray, ops: Codes, in_e: np.ndarray, out_e: np.ndarray,
                gs: np.ndarray, small: np.ndarray, steps: int | None,
                w: np.ndarray | None = None,
                sent: np.ndarray | None = None) -> tuple[np.ndarray, str, list[str]]:
    """The step of every call (-1 outside the steps), how the steps were found, and notes.

    From the trace's step markers (``marked``: each call's step, NaN where unmarked; None: no column)
    where it has them; else each rank's calls (sorted by rank) end in repetitions of one pattern
    (:func:`_repeating_suffix`) that holds at least one collective carrying data; where that run holds
    under half the gradients' bytes (from ``sent``, each call's), or there is none, the run that holds the
    most anywhere (:func:`_heavier_run`), with the calls after it (evaluation, a checkpoint, a step cut short)
    one-off.
    ``in_e`` and
    ``out_e`` are spent: their NaN become 0. ``w``: each call's weight in a folded trace
    (:mod:`.folded`): the steps are found on the calls kept and said of the full trace
    (:func:`~.folded.unfold_steps`); the step ids are those of the calls kept.
    """
    if w is not None and (steps is not None or (marked is not None and not np.isnan(marked).all())):
        raise Unfoldable("--steps and step markers are read on the full trace")
    notes: list[str] = []
    step_id = np.full(len(rank), -1, dtype=np.int32)
    step_marked = ~np.isnan(marked) if marked is not None else np.zeros(len(rank), bool)
    # one integer per distinct (op, in, out, group size): the sequence a step pattern repeats in
    sig, _ = group_codes(ops.codes, zero_nan(in_e, inplace=True), zero_nan(out_e, inplace=True), gs)
    if step_marked.any():
        step_id[step_marked] = marked[step_marked].astype(np.int32)
        n_marked = len(np.unique(step_id[step_marked]))
        grouped = _marked_micro_batches(step_id, rank, sig)
        if grouped is not None and steps in (None, grouped[1]):
            regrouped, n, k, partial = grouped
            how = (f"{n} optimizer step(s) from the trace's step markers, which mark micro-batches: every "
                   f"{k}th marked step holds more calls (the optimizer's), so {k} make one optimizer step")
            if partial:
                how += (f"; {partial} marked step(s) of an optimizer step the trace holds in part count as "
                        "one-off")
            notes.append(f"the trace marks {n_marked} steps, taken as micro-batches of {n} optimizer steps "
                         f"(K = {k}): give --steps {n_marked} if each marked step is an optimizer step")
            return regrouped, how, notes
        if steps is not None and steps != n_marked:
            raise TraceMismatchError(f"--steps {steps} but the trace marks {n_marked} step(s)")
        return step_id, f"{n_marked} step(s) from the trace's step markers", notes
    periods = {}
    carries = ops.isin(_OP_VERBS) & ~small
    reduces = ops.isin(GRADIENT_OPS) & ~small
    bounds = run_bounds(rank)
    # ranks that made the same calls: one search
    found: dict[tuple[bytes, bytes, int], tuple[int, int, int]] = {}
    tails: dict[int, tuple[int, bool]] = {}
    load = None if sent is None else sent if w is None else sent * w
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        r, n_calls = int(rank[lo]), hi - lo
        data_at = np.flatnonzero(carries[lo:hi])
        # a step must hold at least one collective that carries data: the last p calls do
        # exactly when p reaches back to the last such call
        min_period = n_calls - int(data_at[-1]) if len(data_at) else n_calls + 1
        key = (sig[lo:hi].tobytes(), b"" if load is None else load[lo:hi].tobytes(), min_period)
        if key not in found:
            found[key] = (*_repeating_suffix(sig[lo:hi], steps, min_period=min_period), 0)
            if found[key][0] == 0 and steps is None:  # nothing repeats to the end: scalars may close the run
                found[key] = _before_tail(sig[lo:hi], carries[lo:hi]) or found[key]
            if steps is None and load is not None:
                found[key] = _heavier_run(found[key], sig[lo:hi], load[lo:hi], carries[lo:hi],
                                          reduces[lo:hi])
        per, reps, tail = found[key]
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
        step_id[lo + start:hi] = np.arange(per * reps) // per
        if w is not None:
            reps = unfold_steps(sig[lo:hi], w[lo:hi], per, reps)
        periods[r] = (per, reps, start)
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
    if lead:
        steps_how += f"; {lead} call(s) before the first repetition count as one-off"
    tail, data = max(tails.values(), default=(0, False))
    if tail and data:
        steps_how += (f"; {tail} call(s) after the last repetition (evaluation, a checkpoint or a step cut "
                      "short) count as one-off")
    elif tail:
        steps_how += (f"; {tail} call(s) without data after the last repetition (a closing barrier or loss "
                      "all-reduce) count as one-off")
    if len(pers) > 1:
        notes.append("ranks differ in their calls (calls per step × steps): "
                     + ", ".join(f"{p_} × {r_}" for p_, r_ in pers))
    return step_id, steps_how, notes


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
        marks = sorted(set(ids[at].tolist()))
        calls = {m: tuple(codes[at][ids[at] == m].tolist()) for m in marks}
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
        whole = [e for e in ends if all(calls.get(m) == a for m in range(e - k + 1, e))]
        for j, e in enumerate(whole):
            sel = (ids >= e - k + 1) & (ids <= e)
            out[lo:hi][sel] = j
        partial = sum(1 for m in marks if not any(e - k < m <= e for e in whole))
        found.add((k, len(whole), partial))
    if len(found) != 1:
        return None
    k, n, partial = found.pop()
    return out, n, k, partial


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
    weight = load
    if reduces.any():
        weight = np.where(reduces & (load >= load[reduces].max() * GRADIENT_SHARE), load, 0.0)
    end = len(sig) - tail
    held = float(weight[end - per * reps:end].sum()) if per else 0.0
    if per and held >= weight.sum() / 2:
        return found
    run = _heaviest_run(sig, load, carries, weight)
    if run is None or (per and run[3] <= held):
        return found
    return run[:3]


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
    if best is None or best[0] <= 0:
        return None
    held, p, reps, end = best
    start = end - p * reps
    block = sig[end - p:end]
    in_block = np.isin(sig[:start], block)
    if (held < wsum[-1] / 2 or len(set(block[carries[end - p:end]].tolist())) < 2
            or load[:start][in_block].sum() >= load[end - p:end].sum()):
        return None
    return p, reps, m - end, held


@dataclass(frozen=True)
class MicroBatches:
    """Micro-batches per optimizer step and when the gradients are reduced, with how each was found."""

    k: int
    how: str
    #: "every" (gradients reduced in every micro-batch), "boundary" (once per optimizer step), or None
    #: when the trace cannot tell (one micro-batch, or nothing repeats)
    grad_sync: str | None
    grad_sync_how: str


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


def _step_blocks(codes: list[int], grad: list[bool],
                 data: list[bool] | None = None) -> tuple[int, str | None, int | None, bool]:
    """One (rank, step)'s call sequence (``codes``, ``grad``: which are gradient reductions, ``data``: which
    carry more than a scalar; None: all): the
    micro-batches its opening block shows, where the gradient reductions fall ("every", "boundary",
    "none", or None when nothing repeats), the most times one gradient call recurs (None: none), and
    whether the step could be nothing but micro-batches (``sure``, what a step found without markers
    needs): its repeats hold all its gradient reductions and are followed by calls that reduce none and
    carry data (the optimizer's gathers), or hold none and are followed by the boundary micro-batch, the
    block once more with all the reductions (calls of other kinds, such as the optimizer's, aside)."""
    g = Counter(c for c, is_g in zip(codes, grad, strict=True) if is_g)
    most = max(g.values()) if g else None
    per, reps = _leading_repeats(codes)
    mode, sure = None, False
    if reps > 1:
        in_block = any(grad[:per * reps])
        after = any(grad[per * reps:])
        mode = "every" if in_block else "boundary" if after else "none"
        # the boundary micro-batch: the same block with the gradient reductions among its calls
        rest = [c for c, is_g in zip(codes[per * reps:], grad[per * reps:], strict=True) if not is_g]
        closed = rest[:per] == codes[:per] and after and not in_block
        if closed:
            reps += 1
        block = set(codes[:per])
        sure = (closed and [c for c in rest if c in block] == codes[:per]) or (
            in_block and not after and any(data[per * reps:] if data is not None else rest))
    return reps, mode, most, sure


def infer_micro_batches(ops: Codes, gs: np.ndarray, full: np.ndarray, use: np.ndarray, grad: np.ndarray,
                        rank: np.ndarray, step_id: np.ndarray, k: int | None, *,
                        marked: bool = True, w: np.ndarray | None = None) -> MicroBatches:
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
    each call's weight in a folded trace (:mod:`.folded`; a pair counts as its calls' weight).
    """
    found: Counter = Counter()
    modes: Counter = Counter()
    repeats: Counter = Counter()  # the most times one gradient call recurs in a step
    _count_blocks(ops, gs, full, use, grad, rank, step_id, found, modes, repeats, w,
                  sure_only=not marked and k is None)
    inferred = max(found, key=lambda r: (found[r], -r)) if found else 1
    if k is not None:
        if k < 1:
            from zerocalc.errors import ConfigError

            raise ConfigError(f"must be a positive integer, got {k}", option="--micro-batches")
        how = f"K = {k}: from --micro-batches"
        if inferred > 1 and inferred != k:
            how += f" (the trace's steps open with a block repeated {inferred} times)"
    elif inferred > 1 and not marked:
        k = inferred
        how = (f"K = {k}: inferred from the trace (it marks no optimizer steps; each repeating step is one "
               f"block of collectives repeated {k} times, the gradient reductions in every block or in the "
               "last alone: one per micro-batch)")
    elif inferred > 1:
        k = inferred
        how = (f"K = {k}: inferred from the trace (each optimizer step opens with one block of collectives "
               f"repeated {k} times: one per micro-batch)")
    elif not marked:
        k = 1
        how = ("K = 1: the trace marks no optimizer steps, so micro-batches cannot be told from steps "
               "(give --micro-batches K)")
    else:
        k = 1
        how = ("K = 1: nothing repeats inside an optimizer step (one micro-batch, or micro-batches that send "
               "nothing before the boundary: give --micro-batches K if so)")
    mode = max(modes, key=modes.get) if modes else None
    if mode is None and k > 1 and repeats:
        # K given, nothing repeats: the gradient reductions recur K times per step, or run once
        most = max(repeats, key=repeats.get)
        mode = "every" if most == k else "boundary" if most == 1 else None
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


def _count_blocks(ops: Codes, gs: np.ndarray, full: np.ndarray, use: np.ndarray, grad: np.ndarray,
                  rank: np.ndarray, step_id: np.ndarray, found: Counter, modes: Counter,
                  repeats: Counter, w: np.ndarray | None = None, *, sure_only: bool = False) -> None:
    """Count, over the (rank, step) pairs in rank and step order, each pair's :func:`_step_blocks`:
    searched once per distinct call sequence, counted once per pair (counters filled in order of first
    appearance, as a loop over the pairs would). ``sure_only``: a step's micro-batches count only where
    they could be nothing else (:func:`_step_blocks`; else 1), and so its gradient-sync mode."""
    sel = np.flatnonzero(use)
    if not len(sel):
        return
    # the pairs' calls in (rank, step, call) order: already so when each rank's steps come in order
    r, s = rank[sel], step_id[sel]
    if not (np.all(r[1:] >= r[:-1]) and np.all((r[1:] != r[:-1]) | (s[1:] >= s[:-1]))):
        sel = sel[np.lexsort((sel, s, r))]
        r, s = rank[sel], step_id[sel]
    sig, _ = group_codes(ops.codes[sel], full[sel], gs[sel])
    bounds = np.concatenate([[0], np.flatnonzero((r[1:] != r[:-1]) | (s[1:] != s[:-1])) + 1, [len(sel)]])
    rep = distinct_runs(sig, bounds)
    firsts, mult = np.unique(rep, return_counts=True)  # the first pair of each sequence, in pair order
    if w is not None:  # each pair counted by its weight
        mult = np.bincount(rep, weights=w[sel][bounds[:-1]])[firsts].astype(np.int64)
    g, data = grad[sel], full[sel] > SCALAR_MAX_ELEMENTS
    for i, times in zip(firsts.tolist(), mult.tolist(), strict=True):
        lo, hi = int(bounds[i]), int(bounds[i + 1])
        reps, mode, most, sure = _step_blocks(sig[lo:hi].tolist(), g[lo:hi].tolist(), data[lo:hi].tolist())
        if sure_only and not sure:
            reps, mode = 1, None
        if most is not None:
            repeats[most] += times
        if mode is not None:
            modes[mode] += times
        found[reps] += times
