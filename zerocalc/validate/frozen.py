"""Frozen parameters (a frozen backbone, LoRA's base weights) under the schemes that shard them: gathered for
the compute like the trained ones, never reduced, so Ψ read from the reductions is the trained parameters'
and the all-gathers carry more than a scheme prices from it. DDP and ZeRO-1/-2 hold a frozen parameter whole
and send nothing for it.

Three readings, tried last: where no scheme sends the pattern as priced nor in a regime of its implementation
(:mod:`.regimes`):

* **by size**: whole units frozen. FSDP gathers a unit whole and reduces it whole, so a unit that trains is
  gathered in calls of the size its reductions have, and a frozen one in calls of a size none has; ZeRO-3
  gathers and reduces parameter by parameter where its buckets hold one. The gathers of sizes no reduction
  has are left out (:func:`frozen_shares`) and the rest compared with the scheme.
* **by unit**: frozen and trained parameters in one unit, as LoRA's adapters sit beside their base weights.
  FSDP2 gathers the unit whole and reduce-scatters the gradients of its parameters that have one alone
  (``torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py`` ``post_backward``:
  ``fsdp_params_with_grad``), one reduce-scatter a unit, so every unit gathers more than it reduces. Read
  where the calls line up with the scheme's (:func:`unit_gathers`): the step's all-gathers are p gathers of
  each unit a micro-batch, the units counted by the reduce-scatters of one gradient reduction, p the times
  the scheme gathers its parameters a micro-batch, and every other call as priced; the gathers' elements
  past the price are the frozen parameters'. Units that reduce nothing (a frozen root module, as torchtune's
  and torchtitan's roots hold the embeddings and the output layer; frozen blocks) add whole gathers a
  micro-batch, fewer than another round of the units that reduce (which would be those units gathered
  again, in micro-batches the trace does not show, as a pipeline's Flight Recorder dump hides them). Where
  schemes (or reuse regimes) of several p fit so, the most gathers a unit is read, and none where some
  scheme reads by size (the stronger evidence: sizes, not counts).
  DeepSpeed ZeRO-3 gathers in prefetch buckets and reduces in reduce buckets
  (``stage3_prefetch_bucket_size``, ``reduce_bucket_size``), the trained parameters' gradients alone: it
  is read so where its gathers and reductions pair up as units do (a model within one bucket of each);
  elsewhere its buckets hold no units to count. FSDP1 reduce-scatters a unit's whole flat gradient,
  frozen parts included (zeros), so it reads as it is.
* **by pass**: DeepSpeed ZeRO-3 on a model past ``stage3_max_reuse_distance`` (:mod:`.regather`), its
  buckets holding no units: where the trace shows which gathers ran in the backward and they are not of the
  reduced vectors, the forward gathers more than Ψ a micro-batch (each parameter it computes with once, the
  frozen ones too) and the backward part of that again (:func:`pass_gathers`). A parameter used twice in
  the forward and released between its uses (tied input and output embeddings) is gathered at each use and
  reads the same: the note says so. Under activation checkpointing (``torch.utils.checkpoint``, reentrant
  or not) DeepSpeed's forward hooks gather a checkpointed segment again when the backward recomputes it, and
  it is released and gathered again for the segment's own backward, so the backward gathers up to twice
  what the forward does; where it gathers more than the forward, that is the recompute
  (:func:`pass_recomputed`: LoRA or tied embeddings on a model past the distance, checkpointed, as
  fine-tuning a model of a few billion parameters runs). A recompute can also release parameters a model
  within the distance kept, which its backward then gathers again (LoRA under non-reentrant checkpointing,
  at DeepSpeed's defaults): that reads by pass too. With ZeRO++'s hpZ the gathers after the first forward
  since the optimizer step come from a secondary copy on smaller groups and are reported apart; counted with
  those on N they read by pass the same (:func:`hpz_pass`).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from zerocalc.validate.accounting import RTOL
from zerocalc.validate.classify import STEP, gradient_calls
from zerocalc.validate.measure import Measurement
from zerocalc.validate.regather import HpzMerged, hpz_note
from zerocalc.validate.regimes import gather_apart, gathers_of_reduced_vectors, same_elements

#: The schemes that gather every parameter they compute with, a frozen one too: FSDP's units and ZeRO-3's
#: parameters are sharded whether they train or not.
GATHER_FROZEN = frozenset({"zero3", "deepspeed-zero3", "fsdp-full-shard", "fsdp-shard-grad-op",
                           "fsdp-hybrid"})


def frozen_shares(m: Measurement) -> dict[int, float]:
    """Per all-gather group size, the share of the step's gathered elements that are in calls of a size no
    gradient reduction of the trace has, where some gathered size is also reduced: whole units gathered and
    never reduced; {} where no gather is of a reduced size or every one is."""
    cols = m.columns
    if not m.steps or not len(m.ranks):
        return {}
    step = (cols.cat == STEP) & (cols.step_id >= 0)
    gathers = step & cols.ops.eq("all_gather")
    reduced = np.unique(cols.full_elements[gradient_calls(cols.cat, cols.ops, cols.full_elements)])
    trained = np.isin(cols.full_elements, reduced)
    if not (gathers & trained).any() or (gathers & trained).sum() == gathers.sum():
        return {}
    out = {}
    for p in np.unique(cols.group_size[gathers]).astype(int).tolist():
        on = gathers & (cols.group_size == p)
        total = float(cols.full_elements[on].sum())
        if total > 0:
            out[p] = float(cols.full_elements[on & ~trained].sum()) / total
    return out


def _without_frozen(mkeys: dict, shares: dict[int, float]) -> dict:
    """The measured elements per (op, group) less the gathers of whole units never reduced
    (:func:`frozen_shares`); a group left with none drops out."""
    out = {}
    for (op, p), e in mkeys.items():
        kept = e * (1 - shares.get(p, 0.0)) if op == "all_gather" else e
        if kept > RTOL * e:
            out[(op, p)] = kept
    return out


def _by_size(mkeys: dict, shares: dict[int, float]) -> float:
    """The elements a step of the gathers of sizes no reduction has (:func:`frozen_shares`)."""
    return sum(e * shares.get(p, 0.0) for (op, p), e in mkeys.items() if op == "all_gather")


def unit_gathers(m: Measurement, mkeys: dict, pkeys: dict) -> tuple[float, int]:
    """The elements a step that a scheme of :data:`GATHER_FROZEN` gathers beyond its price once its units hold
    frozen parameters beside the trained ones (module docstring), and p, the gathers of each unit a
    micro-batch it prices; (0, 0) where it does not: every call but the all-gathers as priced, each
    all-gather group's elements above the price, and the step's all-gathers p a micro-batch of each unit
    that reduces (the reduce-scatters of one gradient reduction), and whole gathers a micro-batch more of
    units that reduce nothing (a frozen root module, frozen blocks)."""
    gathers = [key for key in pkeys if key[0] == "all_gather"]
    if not gathers or set(mkeys) != set(pkeys) or not any(key[0] == "reduce_scatter" for key in pkeys):
        return 0.0, 0
    if not all(math.isclose(e, pkeys[key], rel_tol=RTOL)
               for key, e in mkeys.items() if key[0] != "all_gather"):
        return 0.0, 0
    if not all(mkeys[key] > pkeys[key] * (1 + RTOL) for key in gathers):
        return 0.0, 0
    k = max(m.micro_batches, 1)
    calls = {o: sum(c for op, _p, _d, c, _e, _b in m.pattern_groups if op == o)
             for o in ("all_gather", "reduce_scatter")}
    units = calls["reduce_scatter"] / (k if m.grad_sync == "every" else 1)
    priced = sum(pkeys[key] for key in gathers) / (k * m.psi) if m.psi else 0.0
    p = round(priced)
    if not (units and p >= 1 and math.isclose(priced, p, rel_tol=RTOL)):
        return 0.0, 0
    # the gathers a micro-batch of units that reduce nothing: whole, and fewer than another round of the
    # units that reduce (those would be the same units gathered again: micro-batches a trace does not show)
    more = (calls["all_gather"] - p * units * k) / k
    if more < -1e-9 or more > p * units - 1 + 1e-9 or not math.isclose(more, round(more), abs_tol=1e-9):
        return 0.0, 0
    return sum(mkeys[key] - pkeys[key] for key in gathers), p


def pass_gathers(m: Measurement, mkeys: dict, pkeys: dict) -> tuple[float, float]:
    """DeepSpeed ZeRO-3, priced with every parameter gathered once a micro-batch (``pkeys``: kΨ gathered), on
    a model past ``stage3_max_reuse_distance`` with parameters it gathers and never reduces (module
    docstring, by pass): (the elements a step gathered past that price, those gathered in the backward);
    (0, 0) where it does not read so: the trace does not show where the gathers ran
    (``Measurement.gathered_in_backward``), they are of the reduced vectors (FSDP's units, read by unit),
    another call differs from the price, the forward gathers no more than kΨ, or the backward gathers
    nothing (every parameter kept: read by unit or by size) or more than twice the forward (each parameter
    gathered once for activation checkpointing's recompute and once for its own backward)."""
    gather = gather_apart(mkeys, pkeys)
    back, k = m.gathered_in_backward, max(m.micro_batches, 1)
    if back is None or gather is None or m.psi <= 0:
        return 0.0, 0.0
    if not math.isclose(pkeys[gather], k * m.psi, rel_tol=RTOL):
        return 0.0, 0.0
    forward = mkeys[gather] - back
    if not (forward > k * m.psi * (1 + RTOL) and RTOL * forward < back <= 2 * forward * (1 + RTOL)):
        return 0.0, 0.0
    if gathers_of_reduced_vectors(m):
        return 0.0, 0.0
    return mkeys[gather] - pkeys[gather], back


def hpz_pass(m: Measurement, merged: HpzMerged) -> tuple[tuple[str, ...], list[str], dict] | None:
    """DeepSpeed ZeRO-3 with ZeRO++'s hpZ past its reuse distance (:func:`~.regather.hpz_regathered`) with
    parameters gathered and never reduced, or tied: read by pass (:func:`pass_gathers`) once the gathers
    reported apart on groups of s are counted with those on N, the backward's elements those of both:
    (("deepspeed-zero3",), its note, the comparison's fields that say so); None where it does not read so."""
    s, extra, measured, kept, backward = merged
    if backward is None:
        return None
    elements, back = pass_gathers(replace(m, gathered_in_backward=backward), measured, kept)
    if not elements:
        return None
    note = hpz_note(s, extra, m.psi, "parameters gathered and never reduced, or tied, among them")
    return ("deepspeed-zero3",), [note], {"frozen_gathered": elements, "frozen_how": "pass"}


def pass_recomputed(m: Measurement, elements: float) -> bool:
    """Whether DeepSpeed ZeRO-3 read by pass (:func:`pass_gathers`, ``elements`` a step gathered past one
    gather of Ψ a micro-batch) gathers more in the backward than in the forward: only activation
    checkpointing's recompute does (a parameter past the reuse distance is gathered again once for its
    backward; a tied one at each use, as in the forward)."""
    back = m.gathered_in_backward or 0.0
    forward = max(m.micro_batches, 1) * m.psi + elements - back
    return back > forward * (1 + RTOL)


def frozen_note(schemes, elements: float, psi: float, how: str, backward: float = 0.0,
                recomputed: bool = False) -> str:
    """The note naming the schemes that send the measured pattern with frozen parameters, ``elements`` a step
    gathered and never reduced, read by unit, by size or by pass (``how``: "unit", "size", "pass"; by pass,
    ``backward`` of them gathered in the backward, more than the forward where ``recomputed``:
    :func:`pass_recomputed`)."""
    send = "sends" if len(schemes) == 1 else "send"
    if how == "pass":
        forward = elements - backward
        again = ("parameters released after their use in the forward (past the reuse distance, or by "
                 "activation checkpointing's recompute)" if not recomputed else
                 "more than the forward: parameters gathered for activation checkpointing's recompute "
                 "(torch.utils.checkpoint, reentrant or not: DeepSpeed's forward hooks gather a checkpointed "
                 "segment again when the backward recomputes it) and again for their own backward")
        return (f"{', '.join(schemes)} {send} exactly this pattern with parameters gathered and never "
                "reduced, on a model past stage3_max_reuse_distance or under activation checkpointing: "
                f"{elements:,.0f} elements a step are "
                f"gathered beyond one gather of Ψ a micro-batch, {forward:,.0f} of them in the "
                "forward (parameters the gradient reductions leave out, as a frozen backbone's or LoRA's "
                "base weights, or one used twice in the forward and gathered again at its second use, as "
                f"tied input and output embeddings are) and {backward:,.0f} in the backward again, {again}, "
                "as the trace's nodes of the backward show; "
                f"Ψ = {psi:,.0f} is what the gradient reductions reduce")
    how = ("past what the trained parameters' units price: each unit gathered whole, frozen parameters with "
           "it, and its trained parameters' gradients alone reduced, as an FSDP2 unit or a DeepSpeed ZeRO-3 "
           "bucket that holds LoRA's adapters beside their frozen base weights is" if how == "unit" else
           "in calls of sizes no gradient reduction has: whole units gathered for the compute and never "
           "reduced, as FSDP and ZeRO-3 do for a frozen backbone's")
    return (f"{', '.join(schemes)} {send} exactly this pattern with frozen parameters: {elements:,.0f} "
            f"elements a step are gathered {how}; Ψ = {psi:,.0f} is the trained parameters, the rest of the "
            "model is gathered besides")


def frozen_choices(m: Measurement, mkeys: dict, tried_by: dict[str, list]) -> dict[str, tuple]:
    """The schemes of :data:`GATHER_FROZEN` that send the measured pattern with frozen parameters, each as
    (its pricing that does, the elements a step gathered and never reduced, "size", "unit" or "pass"):
    ``tried_by`` holds each scheme's pricings at its reuse regimes (:func:`~.compare._priced`). By size
    where some scheme reads so (the first regime that does), else by unit, the schemes (and the regime of
    each) that gather a unit the most times a micro-batch, else by pass (deepspeed-zero3 alone)."""
    names = [name for name in tried_by if name in GATHER_FROZEN]  # in the schemes' order
    shares = frozen_shares(m)
    unfrozen = _without_frozen(mkeys, shares) if shares else {}
    out = {}
    for name in names if unfrozen else ():
        t = next((t for t in tried_by[name] if same_elements(unfrozen, t[3])), None)
        if t is not None:
            out[name] = (t, _by_size(mkeys, shares), "size")
    if out:
        return out
    fits = {}
    for name in names:
        read = [(t, f) for t in tried_by[name] if (f := unit_gathers(m, mkeys, t[3]))[0]]
        if read:
            fits[name] = max(read, key=lambda tf: tf[1][1])  # the first of the most gathers a unit
    most = max((f[1] for _t, f in fits.values()), default=0)
    if fits:
        return {name: (t, f[0], "unit") for name, (t, f) in fits.items() if f[1] == most}
    for name in (n for n in names if n == "deepspeed-zero3"):
        kept = next((t for t in tried_by[name] if t[0] is not None and t[0] >= 2 * m.psi), None)
        if kept is not None and (f := pass_gathers(m, mkeys, kept[3]))[0]:
            return {name: (kept, f[0], "pass")}
    return {}
