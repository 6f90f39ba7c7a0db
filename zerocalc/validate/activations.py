"""Activations' collectives: those a profiler trace records inside a forward pass, and their gradients'.

A Kineto trace says which reductions and all-gathers ran nested in an op the autograd engine
differentiates and in no node of the backward (its ``forward_op`` column,
:mod:`zerocalc.traces.kineto_forward`): a tensor-parallel block's output all-reduced (Megatron-LM's
``_ReduceFromModelParallelRegion``, DTensor's ``Redistribute`` under ``RowwiseParallel``), a
sequence-parallel reduce-scatter, TorchRec's pooled embeddings reduce-scattered (``ReduceScatterBase_Req``).
No gradient exists yet there: these reduce activations of model parallelism, and no data-parallel scheme
sends them. An all-gather there, on a group the forward reduces on, is sequence parallelism's gathering
back what its reduce-scatter scattered (:func:`forward_gathers`; a scheme that gathers parameters through
an autograd op reduces nothing in the forward). Nor does a data-parallel scheme send those activations'
gradients, which the backward moves on the same group as tensors of the activations' shapes: a
tensor-parallel block's input gradient reduced, a sequence-parallel output's gradient gathered
(:func:`activation_gradients`, by ``in_shape``: a transformer block's ``[batch, sequence, hidden]``; a
data-parallel scheme reduces gradients flat in buckets, or shaped as their parameters, and gathers flat
shards). All are reported apart, never read as gradients or parameters; a trace holding nothing else has
no data-parallel traffic to check.
"""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

import numpy as np

from zerocalc.errors import TraceMismatchError
from zerocalc.validate.accounting import _OP_VERBS, OP_NAMES, _plural
from zerocalc.validate.classify import GRADIENT_OPS, SCALAR_MAX_ELEMENTS
from zerocalc.validate.columns import Codes, Rows
from zerocalc.validate.groups import group_keys

#: The canonical table's column naming the op a reduction or an all-gather ran inside, in a forward pass.
COLUMN = "forward_op"
#: The canonical table's column holding the shape of the one tensor a reduction reduces, or an all-gather
#: gathers from (``8x192``).
SHAPE = "in_shape"
#: The ops a forward pass moves activations by: the reductions, and the all-gathers of sequence
#: parallelism.
GATHER_OPS = ("all_gather",)


def forward_reductions(rows: Rows, ops: Codes, full: np.ndarray) -> np.ndarray:
    """The reductions (all-reduce, reduce-scatter, reduce) larger than a scalar that the trace records inside
    a forward pass (``full``: each call's elements). A scalar there (a capacity or a loss reduced inside a
    checkpointed segment) stays a scalar."""
    if not rows.has(COLUMN):
        return np.zeros(len(rows), dtype=bool)
    return rows.notna(COLUMN) & ops.isin(GRADIENT_OPS) & ~(full <= SCALAR_MAX_ELEMENTS)


def forward_gathers(rows: Rows, ops: Codes, full: np.ndarray, fwd: np.ndarray, rank: np.ndarray,
                    keys: np.ndarray) -> np.ndarray:
    """The all-gathers larger than a scalar that the trace records inside a forward pass, from a shard of at
    least two dimensions (``in_shape``), on a group the same ``rank``'s forward passes reduce activations on
    (``fwd``; ``keys``: each call's group, -1 unnamed): sequence parallelism's, which gathers what its
    reduce-scatters scattered (``[sequence / N, batch, hidden]``). A data-parallel scheme that gathers its
    parameters through an autograd op (DTensor's redistribution, as torchtitan's SimpleFSDP does) reduces
    nothing in the forward: its gathers stay parameters'; FSDP's and ZeRO-3's, which run inside one where a
    reentrant checkpoint's or a compiled graph's forward holds their hooks, gather flat shards."""
    if not fwd.any() or not rows.has(SHAPE):
        return np.zeros(len(rows), dtype=bool)
    cand = rows.notna(COLUMN) & ops.isin(GATHER_OPS) & ~(full <= SCALAR_MAX_ELEMENTS) & rows.notna(SHAPE)
    return _on_groups_of(cand, fwd, rank, keys)


def _on_groups_of(cand: np.ndarray, at: np.ndarray, rank: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """The calls of ``cand`` on a (``rank``, group ``keys``) pair that a call of ``at`` runs on."""
    out = np.zeros(len(cand), dtype=bool)
    idx, on = np.flatnonzero(cand), np.flatnonzero(at)
    if len(idx) and len(on):
        seen = set(zip(rank[on].tolist(), keys[on].tolist(), strict=True))
        out[idx] = [k in seen for k in zip(rank[idx].tolist(), keys[idx].tolist(), strict=True)]
    return out


class Masks(NamedTuple):
    """The activations' calls of a trace, as masks over its rows."""

    #: Inside a forward pass (:func:`forward_reductions`, :func:`forward_gathers`).
    fwd: np.ndarray
    #: Outside it, of a tensor of an activation's shape on its group (:func:`activation_gradients`).
    mirrored: np.ndarray
    #: Outside it, the other reductions and all-gathers on a named group a rank's forward reduces
    #: activations on (:func:`on_activation_groups`).
    grouped: np.ndarray
    #: Each call's group key (:func:`~.groups.group_keys`), None where the forward reduces nothing.
    keys: np.ndarray | None

    @property
    def all(self) -> np.ndarray:
        """Every activations' call, of the forward or not."""
        return self.fwd | self.mirrored | self.grouped


def masks(rows: Rows, ops: Codes, full: np.ndarray, rank: np.ndarray) -> Masks:
    """The activations' calls of a forward pass, and outside it those of their gradients (by shape, and on
    a named group by group)."""
    fwd = forward_reductions(rows, ops, full)
    if not fwd.any():
        return Masks(fwd, np.zeros_like(fwd), np.zeros_like(fwd), None)
    keys = group_keys(rows)
    fwd |= forward_gathers(rows, ops, full, fwd, rank, keys)
    mirrored = activation_gradients(rows, ops, full, fwd, rank, keys)
    return Masks(fwd, mirrored, on_activation_groups(ops, full, fwd, mirrored, rank, keys), keys)


def on_activation_groups(ops: Codes, full: np.ndarray, fwd: np.ndarray, mirrored: np.ndarray,
                         rank: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """The reductions and all-gathers larger than a scalar, in neither ``fwd`` nor ``mirrored``, on a group
    the trace names (``keys`` ≥ 0) that the same ``rank``'s forward passes reduce activations on: a
    tensor-parallel group, as no data-parallel scheme reduces on the group whose ranks share their data.
    Its calls outside the forward are those activations' gradients (of a shape the forward does not
    reduce: a block's input wider than its output), or the gradients of the parameters tensor parallelism
    replicates on it (a norm's under sequence parallelism): model parallelism's traffic either way. On
    groups the trace does not name, the shape alone tells (:func:`activation_gradients`)."""
    cand = (~fwd & ~mirrored & ops.isin((*GRADIENT_OPS, *GATHER_OPS)) & (keys >= 0)
            & ~(full <= SCALAR_MAX_ELEMENTS))
    return _on_groups_of(cand, fwd & ops.isin(GRADIENT_OPS) & (keys >= 0), rank, keys)


def activation_gradients(rows: Rows, ops: Codes, full: np.ndarray, fwd: np.ndarray, rank: np.ndarray,
                         keys: np.ndarray) -> np.ndarray:
    """The calls larger than a scalar outside a forward pass that move, on the group of a call of the
    forward (``fwd``) of the same ``rank`` (``keys``: each call's group, -1 unnamed), a tensor of at least two
    dimensions of a shape that call's activations have: a reduction of a tensor of the shape a forward
    reduction reduces or a forward all-gather gathers into (a tensor-parallel block's input gradient, which
    its backward reduces at the block's input), an all-gather from a shard of the shape a forward all-gather
    gathers from or a forward reduce-scatter scatters into (sequence parallelism's output gradient). A
    collective's shard is its tensor's first dimension split over its ranks, as ``c10d`` splits it."""
    out = np.zeros(len(rows), dtype=bool)
    if not fwd.any() or not rows.has(SHAPE):
        return out
    shape = rows.codes(SHAPE)
    code = shape.codes
    cand = np.flatnonzero(~fwd & ops.isin((*GRADIENT_OPS, *GATHER_OPS)) & (code >= 0)
                          & ~(full <= SCALAR_MAX_ELEMENTS))
    at = np.flatnonzero(fwd & (code >= 0))
    if not len(cand) or not len(at):
        return out
    labels, op = shape.labels(""), ops.labels("?")
    in_e, out_e = rows.num("in_nelems"), rows.num("out_nelems")
    whole, shard = set(), set()  # (rank, group, shape) of the activations whole, and of a rank's shard
    for i in at.tolist():
        k, ranks = (rank[i], keys[i]), out_e[i] / in_e[i] if in_e[i] > 0 else np.nan
        if op[i] in GATHER_OPS:
            shard.add((*k, labels[i]))
            whole.add((*k, _first_dim_times(labels[i], ranks)))
        else:
            whole.add((*k, labels[i]))
            if op[i] == "reduce_scatter":
                shard.add((*k, _first_dim_times(labels[i], ranks)))
    out[cand] = [(rank[i], keys[i], labels[i]) in (shard if op[i] in GATHER_OPS else whole)
                 for i in cand.tolist()]
    return out


def _first_dim_times(shape: str, factor: float) -> str | None:
    """``shape`` (``"8x192"``) with its first dimension times ``factor`` (a whole number of elements), None
    where it is not one."""
    first, _, rest = shape.partition("x")
    d = int(first) * factor
    if not (np.isfinite(d) and d >= 1 and d == int(d)):
        return None
    return f"{int(d)}x{rest}"


def _counted(ops: Codes, full: np.ndarray, mask: np.ndarray, w: np.ndarray | None) -> str:
    """The calls of ``mask`` by op and size, the commonest first (three at most)."""
    count: Counter = Counter()
    weights = np.ones(len(mask)) if w is None else w
    for o, e, k in zip(ops.labels("?")[mask].tolist(), full[mask].tolist(), weights[mask].tolist(),
                       strict=True):
        count[(o, e)] += k
    kinds = count.most_common()
    parts = [f"{OP_NAMES.get(o, o)} of {e:,.0f} elements ×{k:g}" if e == e else f"{OP_NAMES.get(o, o)} ×{k:g}"
             for (o, e), k in kinds[:3]]
    more = f" and {_plural(len(kinds) - 3, 'other size')}" if len(kinds) > 3 else ""
    return f"{', '.join(parts)}{more}"


def _what(rows: Rows, ops: Codes, full: np.ndarray, mask: np.ndarray, w: np.ndarray | None,
          column: str = COLUMN) -> str:
    """The calls of ``mask`` by op and size (:func:`_counted`), and the ops around them (``column``: or their
    tensors' shapes, :data:`SHAPE`, an all-gather's its shard's)."""
    counted = _counted(ops, full, mask, w)
    values = rows.codes(column).labels("?")

    def listed(at: np.ndarray) -> str:
        around = sorted({v.replace("x", "×") if column == SHAPE else v for v in values[at].tolist()})
        return ", ".join(around[:3]) + (" …" if len(around) > 3 else "")

    if column == COLUMN:
        return f"{counted}, inside {listed(mask)}"
    gathers = mask & ops.isin(GATHER_OPS)  # their shape is a rank's shard's
    shapes = [f"of shape {listed(mask & ~gathers)}"] if (mask & ~gathers).any() else []
    shapes += [f"all-gathered from shards of {listed(gathers)}"] if gathers.any() else []
    return f"{counted}, {'; '.join(shapes)}"


def refuse_activations_alone(rows: Rows, ops: Codes, full: np.ndarray, act: Masks,
                             w: np.ndarray | None = None) -> None:
    """Raise :class:`TraceMismatchError` where every collective larger than a scalar is an activations' call
    (``act``): tensor parallelism alone, say, with or without sequence parallelism."""
    fwd, mirrored = act.fwd, act.mirrored
    if not fwd.any():
        return
    data = ops.isin(_OP_VERBS) & ~(full <= SCALAR_MAX_ELEMENTS)
    if (data & ~act.all).any():
        return
    shapes = "shape" if _kinds(ops, fwd | mirrored) == "reductions" else "shapes"
    back = (f", and in the backward those activations' gradients, tensors of the {shapes} the forward "
            f"{_verbs(ops, fwd)} ({_what(rows, ops, full, mirrored, w, SHAPE)})" if mirrored.any() else "")
    if act.grouped.any():
        back += (", and outside it on the group it reduces them on, the gradients of those activations or of "
                 f"parameters tensor parallelism replicates there ({_counted(ops, full, act.grouped, w)})")
    files = sorted(set(rows.codes("file").present(na="the input")))
    where = ", ".join(files) if len(files) <= 2 else f"{files[0]} and {len(files) - 1} other files"
    every = ("every reduction" if not (ops.isin(GATHER_OPS) & data).any()
             else "every reduction and all-gather")
    moved = {"reductions": "reduced", "all-gathers": "gathered"}.get(_kinds(ops, fwd), "reduced and gathered")
    raise TraceMismatchError(
        f"no data-parallel traffic in {where}: {every} larger than a scalar is model parallelism's (tensor, "
        f"sequence or embedding parallelism), none a data-parallel scheme's: activations {moved} inside a "
        f"forward pass ({_what(rows, ops, full, fwd, w)}){back}; the schemes are data-parallel collectives "
        "(`zerocalc trace summary` counts these)")


def _kinds(ops: Codes, mask: np.ndarray) -> str:
    """"reductions", "all-gathers" or "reductions and all-gathers": the calls of ``mask``."""
    gathers = ops.isin(GATHER_OPS) & mask
    if not gathers.any():
        return "reductions"
    return "all-gathers" if gathers.sum() == mask.sum() else "reductions and all-gathers"


def _verbs(ops: Codes, mask: np.ndarray) -> str:
    """"reduces", "gathers" or "reduces and gathers": what the calls of ``mask`` do."""
    return {"reductions": "reduces", "all-gathers": "gathers"}.get(_kinds(ops, mask), "reduces and gathers")


def activations_note(rows: Rows, ops: Codes, full: np.ndarray, fwd: np.ndarray, w: np.ndarray | None = None
                     ) -> str:
    """The sentence on the activations' calls of a forward pass, reported apart ("" where there are none)."""
    if not fwd.any():
        return ""
    params = "" if _kinds(ops, fwd) == "reductions" else " or parameters"
    return (f"{_kinds(ops, fwd)} inside forward passes, reported apart as activations of model parallelism "
            f"(tensor, sequence or embedding parallelism), not gradients{params}: "
            f"{_what(rows, ops, full, fwd, w)}")


def mirrored_note(rows: Rows, ops: Codes, full: np.ndarray, mirrored: np.ndarray,
                  w: np.ndarray | None = None) -> str:
    """The sentence on the activations' gradients moved in the backward, reported apart ("" where none)."""
    if not mirrored.any():
        return ""
    if _kinds(ops, mirrored) == "reductions":
        return ("reductions in the backward of tensors of the shape the forward reduces on the same group, "
                "reported apart as those activations' gradients (a tensor-parallel block's input), not "
                f"parameters': {_what(rows, ops, full, mirrored, w, SHAPE)}")
    return (f"{_kinds(ops, mirrored)} in the backward of tensors of the shapes the forward's activations "
            "have on the same group, reported apart as those activations' gradients (a tensor-parallel "
            "block's input, a sequence-parallel output), not parameters' or their gradients: "
            f"{_what(rows, ops, full, mirrored, w, SHAPE)}")


def grouped_note(ops: Codes, full: np.ndarray, grouped: np.ndarray, w: np.ndarray | None = None) -> str:
    """The sentence on the other calls outside the forward on a group it reduces activations on, reported
    apart (:func:`on_activation_groups`; "" where none)."""
    if not grouped.any():
        return ""
    return (f"{_kinds(ops, grouped)} outside forward passes on the groups the forward passes reduce "
            "activations on, reported apart as model parallelism's (those activations' gradients, or the "
            "gradients of parameters tensor parallelism replicates there), not data parallelism's: "
            f"{_counted(ops, full, grouped, w)}")


def same_group_note(keys: np.ndarray, gs: np.ndarray, fwd: np.ndarray, grad: np.ndarray) -> str:
    """A caution where the step's gradient reductions (``grad``) run on groups the trace does not name
    (``keys`` -1) of the size of one the forward passes reduce activations on (``gs``): without data
    parallelism beside it, the backward's reductions on a tensor-parallel group are those activations'
    gradients (a block's input), not parameters'; "" otherwise. (On a named group,
    :func:`on_activation_groups` tells.)"""
    if not fwd.any() or not grad.any():
        return ""
    unnamed = keys < 0
    sizes_unnamed = set(gs[fwd & unnamed].tolist()) & set(gs[grad & unnamed].tolist())
    at = grad & unnamed & np.isin(gs, list(sizes_unnamed))
    if not at.any():
        return ""
    sizes = sorted({int(s) for s in gs[at].tolist() if s == s})
    return (f"the forward passes reduce activations on the group{'s' if len(sizes) > 1 else ''} of "
            f"{', '.join(map(str, sizes))} ranks the gradients are reduced on: if it is a tensor-parallel "
            "group with no data parallelism beside it, its reductions in the backward are those activations' "
            "gradients (the input of a tensor-parallel block), not parameters'")
