"""Reductions of activations: those a profiler trace records inside a forward pass.

A Kineto trace says which reductions ran nested in an op the autograd engine differentiates and in no
node of the backward (its ``forward_op`` column, :mod:`zerocalc.traces.kineto_forward`): a tensor-parallel
block's output all-reduced (Megatron-LM's ``_ReduceFromModelParallelRegion``, DTensor's ``Redistribute``
under ``RowwiseParallel``), a sequence-parallel reduce-scatter, TorchRec's pooled embeddings
reduce-scattered (``ReduceScatterBase_Req``). No gradient exists yet there: these reduce activations of
model parallelism, and no data-parallel scheme sends them. Nor does it send their gradients, which a
tensor-parallel block reduces in the backward at its input: a reduction outside the forward of a tensor of
at least two dimensions, of the very shape a forward reduction of the same rank reduces on the same group
(``in_shape``: a transformer block's ``[batch, sequence, hidden]`` both ways), is one
(:func:`activation_gradients`; a data-parallel scheme reduces gradients flat in buckets, or shaped as their
parameters). Both are reported apart, never read as gradients; a trace holding nothing else has no
data-parallel traffic to check.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from zerocalc.errors import TraceMismatchError
from zerocalc.validate.accounting import _OP_VERBS, OP_NAMES, _plural
from zerocalc.validate.classify import GRADIENT_OPS, SCALAR_MAX_ELEMENTS
from zerocalc.validate.columns import Codes, Rows
from zerocalc.validate.groups import group_keys

#: The canonical table's column naming the op a reduction ran inside, in a forward pass.
COLUMN = "forward_op"
#: The canonical table's column holding the shape of the one tensor a reduction reduces (``8x192``).
SHAPE = "in_shape"


def forward_reductions(rows: Rows, ops: Codes, full: np.ndarray) -> np.ndarray:
    """The reductions (all-reduce, reduce-scatter, reduce) larger than a scalar that the trace records inside
    a forward pass (``full``: each call's elements). A scalar there (a capacity or a loss reduced inside a
    checkpointed segment) stays a scalar."""
    if not rows.has(COLUMN):
        return np.zeros(len(rows), dtype=bool)
    return rows.notna(COLUMN) & ops.isin(GRADIENT_OPS) & ~(full <= SCALAR_MAX_ELEMENTS)


def masks(rows: Rows, ops: Codes, full: np.ndarray, rank: np.ndarray
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The reductions of a forward pass (:func:`forward_reductions`), those of their gradients
    (:func:`activation_gradients`), and each call's group key (:func:`~.groups.group_keys`), None where the
    forward reduces nothing."""
    fwd = forward_reductions(rows, ops, full)
    if not fwd.any():
        return fwd, np.zeros_like(fwd), None
    keys = group_keys(rows)
    return fwd, activation_gradients(rows, ops, full, fwd, rank, keys), keys


def activation_gradients(rows: Rows, ops: Codes, full: np.ndarray, fwd: np.ndarray, rank: np.ndarray,
                         keys: np.ndarray) -> np.ndarray:
    """The reductions larger than a scalar outside a forward pass whose tensor, of at least two dimensions,
    has the shape of one a forward reduction (``fwd``) of the same ``rank`` reduces on the same group
    (``keys``: each call's group, -1 unnamed): the gradients of the activations a tensor-parallel block
    reduces, which its backward reduces at the block's input."""
    out = np.zeros(len(rows), dtype=bool)
    if not fwd.any() or not rows.has(SHAPE):
        return out
    shape = rows.codes(SHAPE).codes
    cand = np.flatnonzero(~fwd & ops.isin(GRADIENT_OPS) & (shape >= 0) & ~(full <= SCALAR_MAX_ELEMENTS))
    at = np.flatnonzero(fwd & (shape >= 0))
    if not len(cand) or not len(at):
        return out
    seen = set(zip(rank[at].tolist(), keys[at].tolist(), shape[at].tolist(), strict=True))
    out[cand] = [k in seen for k in zip(rank[cand].tolist(), keys[cand].tolist(), shape[cand].tolist(),
                                        strict=True)]
    return out


def _what(rows: Rows, ops: Codes, full: np.ndarray, mask: np.ndarray, w: np.ndarray | None,
          column: str = COLUMN) -> str:
    """The calls of ``mask`` by op and size, the commonest first (three at most), and the ops around them
    (``column``: or their tensors' shapes, :data:`SHAPE`)."""
    count: Counter = Counter()
    weights = np.ones(len(mask)) if w is None else w
    for o, e, k in zip(ops.labels("?")[mask].tolist(), full[mask].tolist(), weights[mask].tolist(),
                       strict=True):
        count[(o, e)] += k
    kinds = count.most_common()
    parts = [f"{OP_NAMES.get(o, o)} of {e:,.0f} elements ×{k:g}" if e == e else f"{OP_NAMES.get(o, o)} ×{k:g}"
             for (o, e), k in kinds[:3]]
    more = f" and {_plural(len(kinds) - 3, 'other size')}" if len(kinds) > 3 else ""
    around = sorted({v.replace("x", "×") if column == SHAPE else v
                     for v in rows.codes(column).labels("?")[mask].tolist()})
    listed = ", ".join(around[:3]) + (" …" if len(around) > 3 else "")
    return f"{', '.join(parts)}{more}, {'inside' if column == COLUMN else 'of shape'} {listed}"


def refuse_activations_alone(rows: Rows, ops: Codes, full: np.ndarray, fwd: np.ndarray,
                             mirrored: np.ndarray, w: np.ndarray | None = None) -> None:
    """Raise :class:`TraceMismatchError` where every collective larger than a scalar is a reduction of a
    forward pass (``fwd``) or of those activations' gradients (``mirrored``): tensor parallelism alone, say,
    whose only reductions are activations'."""
    if not fwd.any():
        return
    data = ops.isin(_OP_VERBS) & ~(full <= SCALAR_MAX_ELEMENTS)
    if (data & ~fwd & ~mirrored).any():
        return
    back = (", and in the backward those activations' gradients, tensors of the shape the forward reduces "
            f"({_what(rows, ops, full, mirrored, w, SHAPE)})" if mirrored.any() else "")
    files = sorted(set(rows.codes("file").present(na="the input")))
    where = ", ".join(files) if len(files) <= 2 else f"{files[0]} and {len(files) - 1} other files"
    raise TraceMismatchError(
        f"no data-parallel traffic in {where}: every reduction larger than a scalar reduces activations of "
        f"model parallelism (tensor, sequence or embedding parallelism), not parameters' gradients: inside a "
        f"forward pass ({_what(rows, ops, full, fwd, w)}){back}; the schemes are data-parallel collectives "
        "(`zerocalc trace summary` counts these)")


def activations_note(rows: Rows, ops: Codes, full: np.ndarray, fwd: np.ndarray, w: np.ndarray | None = None
                     ) -> str:
    """The sentence on the reductions of a forward pass, reported apart ("" where there are none)."""
    if not fwd.any():
        return ""
    return ("reductions inside forward passes, reported apart as activations of model parallelism (tensor, "
            f"sequence or embedding parallelism), not gradients: {_what(rows, ops, full, fwd, w)}")


def mirrored_note(rows: Rows, ops: Codes, full: np.ndarray, mirrored: np.ndarray,
                  w: np.ndarray | None = None) -> str:
    """The sentence on the activations' gradients reduced in the backward, reported apart ("" where none)."""
    if not mirrored.any():
        return ""
    return ("reductions in the backward of tensors of the shape the forward reduces on the same group, "
            "reported apart as those activations' gradients (a tensor-parallel block's input), not "
            f"parameters': {_what(rows, ops, full, mirrored, w, SHAPE)}")


def same_group_note(keys: np.ndarray, gs: np.ndarray, fwd: np.ndarray, grad: np.ndarray) -> str:
    """A caution where the step's gradient reductions (``grad``) run on a group the forward passes reduce
    activations on (``keys``: each call's group, -1 unnamed, then told by its size ``gs``): without data
    parallelism beside it, the backward's reductions on a tensor-parallel group are those activations'
    gradients (a block's input), not parameters'; "" otherwise."""
    if not fwd.any() or not grad.any():
        return ""
    named = keys >= 0
    shared = set(keys[fwd & named].tolist()) & set(keys[grad & named].tolist())
    at = grad & np.isin(keys, list(shared))
    sizes_unnamed = set(gs[fwd & ~named].tolist()) & set(gs[grad & ~named].tolist())
    at |= grad & ~named & np.isin(gs, list(sizes_unnamed))
    if not at.any():
        return ""
    sizes = sorted({int(s) for s in gs[at].tolist() if s == s})
    return (f"the forward passes reduce activations on the group{'s' if len(sizes) > 1 else ''} of "
            f"{', '.join(map(str, sizes))} ranks the gradients are reduced on: if it is a tensor-parallel "
            "group with no data parallelism beside it, its reductions in the backward are those activations' "
            "gradients (the input of a tensor-parallel block), not parameters'")
