"""DeepSpeed ZeRO-3 with part of its parameters gathered again in the backward: a model past
``stage3_max_reuse_distance``.

ZeRO-3 gathers every parameter for the forward and keeps a gathered parameter for its next use when that
use comes within ``stage3_max_reuse_distance`` elements of the step's module trace (1e9 by default;
``deepspeed/runtime/zero/partitioned_param_coordinator.py`` ``__params_to_release``). A model of a few
billion parameters is past it for its first layers and within it for its last: the backward gathers again
a share r of Ψ that the module order sets, 0 < r < 1, so a micro-batch gathers (1 + r)Ψ, neither the Ψ of a
model within the distance nor the 2Ψ of one far past it. The scheme's formula, Max(0, Ψ - D/2), prices the
distance D from parameter elements alone; the modules' sizes and DeepSpeed's prefetch buckets move the true
share off it by a few per cent, which the check cannot tell from another scheme. So the share is read from
the trace, where it shows that DeepSpeed sent it:

* the gathers are not of the vectors the reductions reduce: DeepSpeed gathers a module's parameters (with
  those its prefetch bucket joins) and reduce-scatters gradient buckets of ``reduce_bucket_size``, where
  FSDP gathers and reduces the same flat units, and FSDP that keeps part of its parameters for the backward
  is read so (:func:`~.regimes.kept_for_backward_share`);
* where the trace records the backward's nodes (a Kineto trace: its ``backward_op`` column,
  :mod:`zerocalc.traces.kineto_recompute`), the forward gathers Ψ a micro-batch, each parameter once, and
  the backward the rest; where it does not (a Flight Recorder dump, an NCCL log, DeepSpeed's comms log), the
  gathers past Ψ are read as the backward's, and the note says what else sends them (a tied weight gathered
  at each use, frozen parameters), which only the nodes tell apart.

Under activation checkpointing (``torch.utils.checkpoint``, reentrant or not) such a model's backward gathers
more than Ψ: DeepSpeed's forward hooks run again when the backward recomputes a checkpointed segment and
gather it, and it is released and gathered again for the segment's own backward. Where the forward gathers Ψ
and the backward between Ψ and 2Ψ, that share is read whole (:func:`recomputed_share`): nothing in the trace
tells a non-reentrant recompute's gathers from the backward's, and DeepSpeed's prefetch buckets give the
recompute's gathers other sizes than the backward's, so :mod:`.recompute` pairs none of them. Frozen
parameters or tied embeddings past the distance make the forward gather more than Ψ: :mod:`.frozen` reads
them (by pass). With ZeRO++'s hierarchical partitioning (hpZ) the gathers after the first forward since the
optimizer step, the backward's among them, come from a secondary copy on groups of s ranks and are
reported apart; counted with those on N they read the same (:func:`hpz_regathered`).
"""

from __future__ import annotations

import math
from functools import partial
from typing import NamedTuple

import numpy as np

from zerocalc.validate.accounting import RTOL
from zerocalc.validate.classify import STEP
from zerocalc.validate.regimes import (
    by_op_and_group,
    gather_apart,
    gathers_of_reduced_vectors,
    ranks_gather_alike,
)

#: The canonical table's column naming the node of the backward an all-gather ran in.
COLUMN = "backward_op"


def gathered_in_backward(rows, cat: np.ndarray, ops, step_id: np.ndarray, full: np.ndarray,
                         w: np.ndarray | None, meta: dict | None, rank_steps: float,
                         category: int = STEP) -> float | None:
    """The elements of the step's all-gathers (of ``category``: those the schemes model, or those reported
    apart) that ran inside a node of the backward, a rank a step (``rank_steps``: the ranks times the steps
    counted); None where there are none or a file of those gathers records no backward pass (the trace
    does not show where they ran)."""
    gathers = (cat == category) & ops.eq("all_gather") & (step_id >= 0)
    if not gathers.any() or rank_steps <= 0:
        return None
    files = rows.codes("file")
    used = np.unique(files.codes[gathers])
    if (used < 0).any() or not all((meta or {}).get(files.names[f], {}).get("backward_passes") for f in used):
        return None
    inside = gathers & rows.notna(COLUMN) if rows.has(COLUMN) else np.zeros(len(full), dtype=bool)
    weights = np.ones(len(full)) if w is None else w
    return float((full * weights)[inside].sum()) / rank_steps


def regathered_share(mkeys: dict, pkeys: dict, k: int, psi: float, backward: float | None,
                     units, alike) -> float:
    """The share r of Ψ DeepSpeed ZeRO-3 gathers again in the backward, each micro-batch, for the measured
    pattern (module docstring): the measured gathers k(1 + r)Ψ with 0 < r < 1, in the group the scheme
    gathers on, where ``pkeys`` (the scheme's elements per (op, group) with every parameter kept for the
    backward, kΨ gathered) agrees with the other calls and the gathers are not of the reduced vectors
    (``units()`` False: FSDP's are, and FSDP that keeps part of its parameters for the backward is read
    so). Where the trace shows where the gathers ran (``backward``: the elements gathered in the backward a
    step), the forward gathers kΨ; where it does not (a Flight Recorder dump, an NCCL log, DeepSpeed's comms
    log), the gathers past kΨ are read as the backward's (:func:`regathered_note` says so) where every rank
    gathers alike (``alike()``: data parallelism's gathers, where a tensor-parallel excerpt's differ). 0 where
    it does not read so."""
    gather = gather_apart(mkeys, pkeys)
    if gather is None or psi <= 0 or k < 1:
        return 0.0
    measured = mkeys[gather]
    share = measured / (k * psi) - 1
    if not RTOL < share < 1 - RTOL or units():
        return 0.0
    if backward is not None and not math.isclose(measured - backward, k * psi, rel_tol=RTOL):
        return 0.0
    return share if backward is not None or alike() else 0.0


def recomputed_share(mkeys: dict, pkeys: dict, k: int, psi: float, backward: float | None, units) -> float:
    """The share b of Ψ DeepSpeed ZeRO-3's backward gathers a micro-batch where that is more than Ψ, 1 < b
    ≤ 2: parameters gathered twice in the backward, for the recompute of activation checkpointing and for
    their own backward (``torch.utils.checkpoint``, reentrant or not: DeepSpeed's forward hooks run again in
    the recompute and gather a segment it released after the forward, and it releases it again before the
    segment's backward). Read where the trace shows where the gathers ran (``backward``), the forward gathers
    kΨ, the gathers are not of the reduced vectors (``units()`` False) and ``pkeys`` (every parameter kept
    for the backward) agrees with the other calls; 0 elsewhere. Nothing in the trace tells the recompute's
    gathers of a non-reentrant checkpoint from the backward's, so the share is read whole."""
    gather = gather_apart(mkeys, pkeys)
    if backward is None or gather is None or psi <= 0 or k < 1:
        return 0.0
    share = backward / (k * psi)
    forward = mkeys[gather] - backward
    if not (math.isclose(forward, k * psi, rel_tol=RTOL) and 1 + RTOL < share <= 2 + RTOL):
        return 0.0
    return 0.0 if units() else share


def recomputed_note(schemes, share: float, psi: float) -> str:
    """The note naming the schemes that send the measured pattern with ``share`` of Ψ, more than Ψ, gathered
    in the backward each micro-batch (:func:`recomputed_share`)."""
    return (f"{', '.join(schemes)} sends exactly this pattern with the backward gathering {share:.3g}Ψ "
            f"({share * psi:,.0f} elements) each micro-batch, more than each parameter once, and the forward "
            "Ψ: parameters gathered for the recompute of activation checkpointing and again for their own "
            "backward (torch.utils.checkpoint, reentrant or not: DeepSpeed's forward hooks gather a "
            "checkpointed segment again when the backward recomputes it, on a model past "
            "stage3_max_reuse_distance), as the trace's nodes of the backward show")


def regathered_note(schemes, share: float, psi: float, shown: bool) -> str:
    """The note naming the schemes that send the measured pattern with ``share`` of Ψ gathered again in the
    backward (:func:`regathered_share`); ``shown``: whether the trace shows which gathers ran there."""
    how = "gathers of modules and buckets, not of the vectors reduced, as DeepSpeed's are"
    if shown:
        how += "; the forward gathers each parameter once and the backward the rest, as its nodes show"
    else:
        how += ("; the trace marks no backward pass, so the gathers past Ψ are read as the backward's: a "
                "tied weight gathered again at a later use in the forward, or frozen parameters gathered and "
                "never reduced, add to them alike, which a profiler trace's nodes of the backward tell apart")
    return (f"{', '.join(schemes)} sends exactly this pattern with {share:.3g}Ψ ({share * psi:,.0f} "
            "elements) of the parameters gathered again in the backward each micro-batch "
            f"({1 + share:.3g}Ψ gathered in place of Ψ or 2Ψ): a model past stage3_max_reuse_distance (1e9 "
            "elements by default) for its earlier modules and within it for its later ones, read from the "
            "trace (" + how + "); the scheme's Max(0, Ψ - D/2) prices it from elements alone")


def hpz_regathered(m, merged: HpzMerged) -> tuple[tuple[str, ...], list[str], dict[str, float]] | None:
    """DeepSpeed ZeRO-3 with ZeRO++'s hierarchical partitioning (``zero_hpz_partition_size`` s) on a model
    past ``stage3_max_reuse_distance``: the first forward after the optimizer step gathers on all N ranks,
    every later gather (the backward's of the parameters released past the distance, the later
    micro-batches' forwards) on the groups of s from their secondary copy, reported apart
    (:func:`~.regimes.smaller_group_gathers`). Counted among the gathers on N (``merged``:
    :func:`hpz_merged`), they make k(1 + r)Ψ, 0 < r < 1, as :func:`regathered_share` reads it (the backward's
    elements those of both groups), or, under activation checkpointing, a backward of more than kΨ, as
    :func:`recomputed_share` does: (("deepspeed-zero3",), its notes, the comparison's field and share that
    say so); None where the trace does not read so."""
    s, extra, measured, kept, backward = merged
    k = max(m.micro_batches, 1)
    units = partial(gathers_of_reduced_vectors, m)
    share = regathered_share(measured, kept, k, m.psi, backward, units, partial(ranks_gather_alike, m))
    field, again = "regathered_share", "the parameters gathered again in the backward"
    if not share:  # under activation checkpointing: more than Ψ in the backward
        share = recomputed_share(measured, kept, k, m.psi, backward, units)
        field, again = "recomputed_share", ("gathered in the backward, more than each parameter once, as "
                                            "activation checkpointing's recompute gathers")
    if not share:
        return None
    note = hpz_note(s, extra, m.psi, f"{share:.3g}Ψ a micro-batch of them {again}")
    return ("deepspeed-zero3",), [note], {field: share}


class HpzMerged(NamedTuple):
    """DeepSpeed ZeRO-3's comparison with the all-gathers reported apart on groups of s counted among those
    on N (:func:`hpz_merged`)."""

    s: int
    #: the gathers on the groups of s, elements a rank a step
    extra: float
    #: the measured elements per (op, group), those gathers counted on N
    measured: dict
    #: the scheme's, every parameter gathered once a micro-batch
    kept: dict
    #: the elements both gathered in the backward; None where the trace does not show it
    backward: float | None


def hpz_merged(m, comps, on: tuple[int, float]) -> HpzMerged | None:
    """:class:`HpzMerged` for the gathers on groups of s ``on`` (:func:`~.regimes.smaller_group_gathers`);
    None where no deepspeed-zero3 was compared."""
    comp = next((c for c in comps if c.scheme == "deepspeed-zero3"), None)
    if comp is None:
        return None
    s, extra = on
    whole = ("all_gather", m.n)
    measured = by_op_and_group(comp.measured_groups)
    measured[whole] = measured.get(whole, 0.0) + extra
    kept = {**by_op_and_group(comp.predicted_groups), whole: max(m.micro_batches, 1) * m.psi}
    return HpzMerged(s, extra, measured, kept, gathered_in_backward_with_apart(m))


def gathered_in_backward_with_apart(m) -> float | None:
    """The elements a rank gathers a step in the backward, those of the gathers reported apart too (hpZ's
    secondary copy's); None where the trace does not show where its gathers ran."""
    if m.gathered_in_backward is None:
        return None
    return m.gathered_in_backward + (m.apart_gathered_in_backward or 0.0)


def hpz_note(s: int, extra: float, psi: float, what: str) -> str:
    """The note naming DeepSpeed ZeRO-3 with hpZ on groups of ``s`` past its reuse distance, ``extra``
    elements a rank a step gathered on them, ``what`` saying what part of them is."""
    return (f"deepspeed-zero3 sends exactly this pattern with ZeRO++'s hierarchical partitioning (hpZ, "
            f"zero_hpz_partition_size = {s}) on a model past stage3_max_reuse_distance: the all-gathers on "
            f"groups of {s} reported apart ({extra / psi:.3g}Ψ a step) are its parameter gathers from each "
            f"group's secondary copy after the first forward since the optimizer step, {what} (a note below)")
