"""How a scheme that does not match as priced still sends the measured pattern: the regimes real
implementations run it in (gathered parameters kept across micro-batches, part of them kept from the forward
to the backward, DeepSpeed ZeRO-3's persistent parameters, parameters gathered on a smaller group, HSDP's
shards all-reduced once a step, HSDP with SHARD_GRAD_OP inside its shard groups), each read off the measured
elements per (op, group), and the notes that name them; frozen parameters, gathered and never reduced, are
:mod:`.frozen`'s.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from zerocalc.validate.accounting import RTOL
from zerocalc.validate.classify import STEP, UNEXPLAINED, gradient_calls

if TYPE_CHECKING:  # for annotations alone: measure reads regather, which reads gather_apart here
    from zerocalc.validate.measure import Measurement

#: Schemes whose forward gather kept for backward is an option of their implementation that no scheme of its
#: own prices, and that option in words: HSDP with SHARD_GRAD_OP inside the shard group (FSDP1's
#: ``ShardingStrategy._HYBRID_SHARD_ZERO2``, ``torch/distributed/fsdp/api.py``: "a hybrid shard where
#: SHARD_GRAD_OP is applied within the node"; FSDP2's ``fully_shard(mesh=<2-D mesh>,
#: reshard_after_forward=False)``). FULL_SHARD's counterpart is fsdp-shard-grad-op, a scheme of its own.
KEPT_FOR_BACKWARD_OPTIONS = {
    "fsdp-hybrid": "the forward gather kept for backward: FSDP1's _HYBRID_SHARD_ZERO2, FSDP2's HSDP with "
                   "reshard_after_forward=False",
}


def by_op_and_group(entries) -> dict[tuple[str, int], float]:
    """Elements per (op, group size), dtypes merged: what the pattern comparison looks at."""
    out: dict[tuple[str, int], float] = {}
    for o, p, _d, _c, e, _b in entries:
        out[(o, p)] = out.get((o, p), 0.0) + e
    return out


def same_elements(meas: dict, pred: dict, *, gathers: float = 1.0) -> bool:
    """Whether the measured elements per (op, group) are the predicted ones, the all-gathers' times
    ``gathers``."""
    return set(meas) == set(pred) and all(
        math.isclose(e, pred[k] * (gathers if k[0] == "all_gather" else 1.0), rel_tol=RTOL)
        for k, e in meas.items())


def kept_gathers(mkeys: dict, pkeys: dict, phases, k: int, grad_sync: str | None,
                 forward_kept: bool = False) -> int:
    """The parameter gathers a step with which the measured pattern matches once gathered parameters are
    kept across the step's ``k`` micro-batches, else 0: k + 1 where the scheme gathers 2k times (the
    backward's gathers kept: FSDP2 with reshard_after_backward=False until the last micro-batch, as PyTorch's
    pipeline schedules and gradient accumulation set it), 1 where it gathers k times (the
    forward's kept through backward and the later micro-batches: FSDP1's SHARD_GRAD_OP under no_sync(),
    ``torch/distributed/fsdp/_runtime_utils.py`` ``_should_free_in_backward``, where the gradients are
    not reduced in every micro-batch (``grad_sync``)), or 2k times where the scheme's forward gather kept
    for backward is an option of its implementation (``forward_kept``: :data:`KEPT_FOR_BACKWARD_OPTIONS`,
    FSDP1's _HYBRID_SHARD_ZERO2 under no_sync())."""
    if k < 2:
        return 0
    calls = sum(ph[2] for ph in phases if ph[0] == "all_gather")
    for predicted, kept in ((2 * k, k + 1), (k, 1), (2 * k if forward_kept else 0, 1)):
        if not predicted or (kept == 1 and grad_sync == "every"):
            continue
        if calls == predicted and same_elements(mkeys, pkeys, gathers=kept / predicted):
            return kept
    return 0


def all_reduced_once(mkeys: dict, pkeys: dict, k: int) -> bool:
    """Whether a scheme that reduce-scatters and then all-reduces the shards (HSDP) in each of ``k``
    micro-batches sends the measured pattern once its all-reduces run in the last micro-batch alone: the
    reduce-scattered shards summed over the micro-batches, then all-reduced once (FSDP2's
    ``set_requires_all_reduce(False)`` on the earlier micro-batches,
    ``torch.distributed.fsdp.FSDPModule``)."""
    if k < 2 or set(mkeys) != set(pkeys) or not {op for op, _ in pkeys} >= {"reduce_scatter", "all_reduce"}:
        return False
    return all(math.isclose(e, pkeys[key] / (k if key[0] == "all_reduce" else 1), rel_tol=RTOL)
               for key, e in mkeys.items())


def gather_apart(mkeys: dict, pkeys: dict) -> tuple | None:
    """The one (all_gather, group) key of a scheme's elements per (op, group) ``pkeys`` where the measured
    ``mkeys`` has the same keys and every other call as priced: the gathers a regime reads, alone left to
    differ; None where not."""
    gathers = [key for key in pkeys if key[0] == "all_gather"]
    if len(gathers) != 1 or set(mkeys) != set(pkeys):
        return None
    if not all(math.isclose(e, pkeys[key], rel_tol=RTOL) for key, e in mkeys.items() if key != gathers[0]):
        return None
    return gathers[0]


def persistent_share(mkeys: dict, pkeys: dict, k: int, psi: float) -> float:
    """The share p of Ψ with which DeepSpeed ZeRO-3, priced with its parameters gathered once a micro-batch
    (A = kΨ gathered a step), sends the measured pattern once p·Ψ of them are persistent: at most
    ``stage3_param_persistence_threshold`` elements each (1e5 by default,
    ``deepspeed/runtime/zero/parameter_offload.py`` ``mark_persistent_parameters``), never released, their
    updated shards gathered once after the optimizer step (``stage3.py`` ``_post_step``). The measured
    gathers are then k(1 - p)Ψ + pΨ, so p = (A - measured)·k / (A·(k - 1)); 0 where the other calls
    differ, the scheme is priced otherwise (A is not kΨ) or p falls outside (0, 1]."""
    gather = gather_apart(mkeys, pkeys)
    if k < 2 or gather is None or not math.isclose(pkeys[gather], k * psi, rel_tol=RTOL):
        return 0.0
    a = pkeys[gather]
    share = (a - mkeys[gather]) * k / (a * (k - 1))
    return min(share, 1.0) if 0 < share <= 1 + RTOL else 0.0


def gathers_of_reduced_vectors(m: Measurement) -> bool:
    """Whether each rank gathers, in whole calls a step that its ``k`` micro-batches share alike, only
    vectors of the sizes its gradient reductions reduce: a module's parameters gathered and its gradients
    reduced, as FSDP's units are (what :func:`kept_for_backward_share` reads needs it; a trace whose ranks
    differ, or that gathers activations, does not show it)."""
    cols = m.columns
    if not m.steps or not len(m.ranks):
        return False
    gathers = sum(c for o, _p, _d, c, _e, _b in m.pattern_groups if o == "all_gather")
    per_micro_batch = gathers / max(m.micro_batches, 1)
    if gathers < 1 or not math.isclose(per_micro_batch, round(per_micro_batch), rel_tol=1e-9):
        return False
    step = (cols.cat == STEP) & (cols.step_id >= 0)
    gathered = np.unique(cols.full_elements[step & cols.ops.eq("all_gather")])
    reduced = np.unique(cols.full_elements[gradient_calls(cols.cat, cols.ops, cols.full_elements)])
    return bool(len(gathered)) and bool(np.isin(gathered, reduced).all())


def ranks_gather_alike(m: Measurement) -> bool:
    """Whether every rank all-gathers as many elements a step as every other, in the step's calls: data
    parallelism's gathers of a model's partitions, each rank its own share of the same parameters (where an
    excerpt of tensor parallelism's gathers of activations, or a pipeline's stages, differ by rank)."""
    cols = m.columns
    gathers = (cols.cat == STEP) & (cols.step_id >= 0) & cols.ops.eq("all_gather")
    if not gathers.any():
        return False
    r = cols.rank_idx[gathers]
    steps = np.bincount(np.unique(np.stack([r, cols.step_id[gathers]]), axis=1)[0], minlength=len(cols.ranks))
    if (steps == 0).any():
        return False
    per = np.bincount(r, weights=cols.full_elements[gathers], minlength=len(cols.ranks)) / steps
    return bool(np.allclose(per, per[0], rtol=RTOL, atol=0.0))


def kept_for_backward_share(mkeys: dict, pkeys: dict, phases, k: int, psi: float) -> float:
    """The share q of Ψ with which a scheme that gathers its parameters twice a micro-batch (forward and
    backward: A = 2kΨ a step, in 2k gathers) sends the measured pattern once the forward's gathers of q·Ψ are
    kept for the backward and the rest gathered again: FSDP1 does not reshard its root unit after the
    forward (``torch/distributed/fsdp/_runtime_utils.py`` ``_post_forward_reshard``), and FSDP2 neither the
    root module's parameters when ``reshard_after_forward`` is left at its default (``_fsdp_state.py``
    ``_lazy_init``) nor any module's given ``reshard_after_forward=False`` (torchtitan's parallelize does so
    for the last transformer block). The measured gathers are then k(2 - q)Ψ, so q = 2(A - measured)/A;
    0 where the other calls differ, the scheme gathers otherwise, or q falls outside (0, 1) (q = 1, every
    gather kept, is :func:`same_elements` at half the gathers). Read only where the gathers are of the
    reduced vectors (:func:`gathers_of_reduced_vectors`)."""
    gather = gather_apart(mkeys, pkeys)
    if gather is None:
        return 0.0
    a = pkeys[gather]
    calls = sum(ph[2] for ph in phases if ph[0] == "all_gather")
    if not (math.isclose(calls, 2 * k) and math.isclose(a, 2 * k * psi, rel_tol=RTOL)):
        return 0.0
    share = 2 * (a - mkeys[gather]) / a
    return share if RTOL < share < 1 - RTOL else 0.0


def kept_for_backward_note(comps, psi: float) -> str | None:
    """The note naming the schemes that send the measured pattern with part of the parameters kept from the
    forward to the backward (:func:`kept_for_backward_share`), and the implementations that keep them so."""
    shares = {}
    for c in comps:
        if c.kept_for_backward_share:
            shares.setdefault(round(c.kept_for_backward_share, 6), []).append(c.scheme)
    if not shares:
        return None
    parts = [f"{_names_send(names)} exactly this pattern with {q:.1%} of Ψ ({q * psi:,.0f} elements) kept "
             f"gathered from the forward to the backward and the rest gathered again ({2 - q:.3g}Ψ gathered "
             "a micro-batch in place of 2Ψ)" for q, names in shares.items()]
    return ("; ".join(parts) + ", as FSDP1 keeps its root unit's parameters (not resharded after the "
            "forward: _runtime_utils.py _post_forward_reshard), FSDP2 the root module's when "
            "reshard_after_forward is left at its default, and any module's given "
            "reshard_after_forward=False (torchtitan's parallelize sets it on the last transformer block): "
            "the share is those modules' parameters")


def gathered_after_reductions(m: Measurement) -> float | None:
    """The elements a rank gathers a step after the step's last gradient reduction (a mean over the
    (rank, step) pairs that reduce): where DeepSpeed ZeRO-3 gathers its persistent parameters' updated
    shards, after the optimizer step (``stage3.py`` ``_post_step``); None where no step reduces."""
    cols = m.columns
    in_step = (cols.cat == STEP) & (cols.step_id >= 0)
    sel = np.flatnonzero(in_step)  # in rank and time order
    if not len(sel):
        return None
    pair = cols.rank_idx[sel].astype(np.int64) * (int(cols.step_id[sel].max()) + 1) + cols.step_id[sel]
    _, inv = np.unique(pair, return_inverse=True)
    grad = gradient_calls(cols.cat, cols.ops, cols.full_elements)[sel]
    last = np.full(inv.max() + 1, -1, dtype=np.int64)
    np.maximum.at(last, inv[grad], np.flatnonzero(grad))
    reducing = last >= 0
    if not reducing.any():
        return None
    after = cols.ops.eq("all_gather")[sel] & (np.arange(len(sel)) > last[inv]) & reducing[inv]
    return float(cols.full_elements[sel][after].sum()) / int(reducing.sum())


def first_and_later_gathers(m: Measurement) -> tuple[float, float] | None:
    """(the elements a rank gathers in a step's first micro-batch, those it gathers in each later one)
    where every (rank, step) cuts into as many blocks as the step has micro-batches, each ending in a run of
    gradient reductions (the blocks :func:`~.step_blocks._wider_first_block` reads), the later blocks
    gathering alike and every rank alike; None otherwise, or where calls of the steps are reported apart
    (gathers on another group: a secondary copy's)."""
    cols, k = m.columns, m.micro_batches
    in_step = (cols.step_id >= 0) & np.isin(cols.cat, (STEP, UNEXPLAINED))
    if k < 2 or not in_step.any() or ((cols.cat == UNEXPLAINED) & in_step).any():
        return None
    sel = np.flatnonzero(in_step)  # in rank and time order
    grad = gradient_calls(cols.cat, cols.ops, cols.full_elements)[sel]
    gathers = np.where(cols.ops.eq("all_gather")[sel], cols.full_elements[sel], 0.0)
    pair = cols.rank_idx[sel].astype(np.int64) * (int(cols.step_id[sel].max()) + 1) + cols.step_id[sel]
    cuts = np.flatnonzero(pair[1:] != pair[:-1]) + 1
    seen = set()
    for lo, hi in zip(np.concatenate([[0], cuts]), np.concatenate([cuts, [len(sel)]]), strict=True):
        g = grad[lo:hi]
        ends = np.flatnonzero(g & ~np.append(g[1:], False))  # each run of reductions' last call
        if len(ends) != k:
            return None
        # each block's gathers, up to its reductions' end (what follows the last is no micro-batch's)
        sums = np.add.reduceat(gathers[lo:lo + ends[-1] + 1], np.concatenate([[0], ends[:-1] + 1]))
        if not np.allclose(sums[1:], sums[1], rtol=RTOL, atol=0.0):
            return None
        seen.add((round(float(sums[0])), round(float(sums[1]))))
    if len(seen) != 1:
        return None
    first, later = seen.pop()
    return float(first), float(later)


def _kept_share_words(name: str, share: float, psi: float, k: int, after: float | None) -> str:
    """What keeps ``share`` of Ψ gathered across DeepSpeed ZeRO-3's ``k`` micro-batches, as where the trace
    gathers it tells (``after``: :func:`gathered_after_reductions`): persistent parameters' updated shards
    gathered after the optimizer step, or the parameters of the modules the backward uses last kept for the
    next micro-batch's forward, gathered in the first micro-batch alone (DeepSpeed before 0.19.3: the same
    run of ds-zero3-ga4 under 0.15.4 to 0.19.2 gathers so, under 0.19.3 and later every micro-batch gathers
    Ψ)."""
    kept = share * psi
    persistent = ("parameters of at most stage3_param_persistence_threshold elements (100,000 by default) "
                  "are never released for forward and backward and their updated shards are gathered once "
                  "after the optimizer step")
    if after is None or math.isclose(after, kept, rel_tol=0.01):
        return (f"{name} sends exactly this pattern with {share:.1%} of Ψ ({kept:,.0f} elements) persistent: "
                f"{persistent}, the others in each of the {k} micro-batches "
                "(deepspeed/runtime/zero/stage3.py _post_step)")
    head = (f"{name} sends exactly this pattern with {share:.1%} of Ψ ({kept:,.0f} elements) gathered once a "
            f"step and the rest in each of the {k} micro-batches" if share < 1 else
            f"{name} sends exactly this pattern with every parameter gathered once a step (1 gather of the "
            f"parameters a step in place of {k})")
    boundary = ("the parameters of the modules the backward uses last (a model's first layers), kept "
                "gathered for the next micro-batch's forward within stage3_max_reuse_distance, as "
                "DeepSpeed before 0.19.3 keeps them: the first micro-batch after the optimizer step "
                "gathers them, the later ones do not")
    if after <= 0.01 * kept:
        return f"{head}: {boundary}"
    return (f"{head}: {after:,.0f} of those elements gathered after the optimizer step, as persistent "
            f"parameters are ({persistent}: deepspeed/runtime/zero/stage3.py _post_step), the other "
            f"{kept - after:,.0f} {boundary}")


def kept_notes(comps, k: int, psi: float, after: float | None = None) -> list[str]:
    """What the schemes that match with gathered parameters kept across the step's ``k`` micro-batches
    send, and which implementation keeps them so (``after``: the elements gathered a step after its last
    gradient reduction, :func:`gathered_after_reductions`, which tells DeepSpeed ZeRO-3's persistent
    parameters from those it keeps across a micro-batch boundary)."""
    out = []
    backward = [c.scheme for c in comps if c.gathers_if_kept == k + 1]
    if backward:
        out.append(f"{_names_send(backward)} exactly this pattern with the backward's gathers kept across "
                   f"the step's {k} micro-batches ({k + 1} gathers of the parameters a step in place of "
                   f"{2 * k}), as FSDP2 keeps them with reshard_after_backward=False until the last "
                   "micro-batch (PyTorch's pipeline schedules set it; set_reshard_after_backward under "
                   "gradient accumulation)")
    for c in comps:
        if c.persistent_share >= 1 and after is not None and after < psi * 0.99:
            # not all persistent: those gathered before the step's last reduction are kept otherwise
            out.append(_kept_share_words(c.scheme, 1.0, psi, k, after))
        elif c.persistent_share >= 1:
            out.append(f"{c.scheme} sends exactly this pattern with every parameter persistent (at most "
                       "stage3_param_persistence_threshold elements, 100,000 by default, as every parameter "
                       "of a small model is): never released for forward and backward, its updated shards "
                       "gathered once after the optimizer step (1 gather of the parameters a step in place "
                       f"of {k}; deepspeed/runtime/zero/stage3.py _post_step)")
        elif c.persistent_share > 0:
            words = _kept_share_words(c.scheme, c.persistent_share, psi, k, after)
            if r := c.regathered_share:  # past the reuse distance too
                b = c.persistent_share
                words += (f"; beside them, {r:.3g}Ψ ({r * psi:,.0f} elements) of the parameters gathered "
                          "again in each micro-batch's backward, a model past stage3_max_reuse_distance for "
                          f"its earlier modules: the first micro-batch gathers {1 + r:.3g}Ψ, each later one "
                          f"{1 + r - b:.3g}Ψ (the step's blocks, each ending in its gradient reductions)")
            out.append(words)
    whole = [c.scheme for c in comps if c.gathers_if_kept == 1 and c.persistent_share == 0]
    for names, was in (([s for s in whole if s not in KEPT_FOR_BACKWARD_OPTIONS], k),
                       ([s for s in whole if s in KEPT_FOR_BACKWARD_OPTIONS], 2 * k)):
        hybrid = " (_HYBRID_SHARD_ZERO2 in the shard group)" if was == 2 * k else ""
        if names:
            out.append(f"{_names_send(names)} exactly this pattern with the parameters gathered once and "
                       f"kept across the step's {k} micro-batches (1 gather of the parameters a step in "
                       f"place of {was}), as FSDP1's SHARD_GRAD_OP{hybrid} keeps them while gradients are "
                       "not synchronised (no_sync() on the earlier micro-batches)")
    return out


#: the schemes that may gather their parameters on groups smaller than N, and how they come to: DeepSpeed
#: ZeRO-3 with ZeRO++'s hierarchical partitioning (``zero_hpz_partition_size``, read by
#: ``deepspeed/runtime/zero/stage3.py``; arXiv 2306.10209 §3.2) keeps a secondary copy of the parameters in
#: each group of s ranks and gathers from it every time but the first after the optimizer step; FSDP2's
#: ``fully_shard(reshard_after_forward=s)`` (an int: "the world size to reshard to after forward", its
#: docstring) reshards the gathered parameters over groups of s, so its backward gathers on them
SECONDARY_PARTITION: dict[str, str] = {
    "deepspeed-zero3": ("ZeRO++'s hierarchical partitioning (hpZ, zero_hpz_partition_size = {s}): the "
                        "all-gathers on groups of {s} reported apart ({extra}Ψ a step) are its parameter "
                        "gathers from each group's secondary copy, in place of gathers on all {n} after the "
                        "first since the optimizer step"),
    "fsdp-full-shard": ("FSDP2's reshard_after_forward = {s} (an int): the all-gathers on groups of {s} "
                        "reported apart ({extra}Ψ a step) are its backward's, of the parameters resharded "
                        "after the forward over groups of {s} in place of all {n}"),
}


def smaller_group_gathers(m: Measurement) -> tuple[int, float] | None:
    """Where every call reported apart in the steps is an all-gather on groups of one size s that divides N,
    1 < s < N (a secondary copy's or a resharded unit's gathers: :data:`SECONDARY_PARTITION`): (s, those
    gathers' elements a rank a step); None otherwise."""
    cols = m.columns
    if m.n < 2 or not m.steps or not len(m.ranks):
        return None
    apart = (cols.cat == UNEXPLAINED) & (cols.step_id >= 0)
    secondary = apart & cols.ops.eq("all_gather")
    sizes = set(cols.group_size[secondary].astype(int).tolist())
    if len(sizes) != 1 or secondary.sum() != apart.sum():
        return None
    s = sizes.pop()
    if not (1 < s < m.n and m.n % s == 0):
        return None
    return s, float(cols.full_elements[secondary].sum()) / (len(m.ranks) * m.steps)


def secondary_partition(m: Measurement, comps, on: tuple[int, float]
                        ) -> tuple[tuple[str, ...], list[str], dict[str, float]] | None:
    """The schemes that send exactly the measured pattern once the all-gathers reported apart, all on
    groups of one size s that divides N (``on``: (s, their elements a rank a step), from
    :func:`smaller_group_gathers`), count among their parameter gathers on N (those of
    :data:`SECONDARY_PARTITION`), the notes that say so, and the share of Ψ DeepSpeed ZeRO-3 keeps gathered
    across the micro-batches beside it where it does (:func:`persistent_share` of the gathers so counted:
    before 0.19.3, the modules its backward uses last, which the later micro-batches' gathers from the copy
    leave out); None where no scheme does."""
    s, extra = on
    found, notes, kept = [], [], {}
    for comp in comps:
        if comp.scheme not in SECONDARY_PARTITION:
            continue
        pred = by_op_and_group(comp.predicted_groups)
        meas = by_op_and_group(comp.measured_groups)
        gathers = meas.get(("all_gather", m.n), 0.0) + extra
        alike = set(pred) == set(meas) | {("all_gather", m.n)} and all(
            math.isclose(e, pred[k], rel_tol=RTOL) for k, e in meas.items() if k != ("all_gather", m.n))
        share = 0.0
        if alike and not math.isclose(pred[("all_gather", m.n)], gathers, rel_tol=RTOL):
            share = (persistent_share({**meas, ("all_gather", m.n): gathers}, pred, m.micro_batches, m.psi)
                     if comp.scheme == "deepspeed-zero3" else 0.0)
            if not 0 < share < 1:
                continue
        if alike:
            found.append(comp.scheme)
            how = SECONDARY_PARTITION[comp.scheme].format(s=s, n=m.n, extra=f"{extra / m.psi:.3g}")
            notes.append(f"{comp.scheme} sends exactly this pattern with {how}")
            if share:
                kept[comp.scheme] = share
    return (tuple(found), notes, kept) if found else None


def all_reduced_once_note(schemes, k: int) -> str:
    return (f"{_names_send(schemes)} exactly this pattern with the replicate all-reduce of the shards in "
            f"the last of the step's {k} micro-batches alone (1 all-reduce of each shard a step in place "
            f"of {k}), as FSDP2 runs it under set_requires_all_reduce(False) on the earlier ones: the "
            "reduce-scattered shards add up over the micro-batches and are all-reduced once")


def _names_send(schemes) -> str:
    return ", ".join(schemes) + (" sends" if len(schemes) == 1 else " send")
