"""Reductions of activations: those a profiler trace records inside a forward pass.

A Kineto trace says which reductions ran nested in an op the autograd engine differentiates and in no
node of the backward (its ``forward_op`` column, :mod:`zerocalc.traces.kineto_forward`): a tensor-parallel
block's output all-reduced (Megatron-LM's ``_ReduceFromModelParallelRegion``, DTensor's ``Redistribute``
under ``RowwiseParallel``), a sequence-parallel reduce-scatter, TorchRec's pooled embeddings
reduce-scattered (``ReduceScatterBase_Req``). No gradient exists yet there: these reduce activations of
model parallelism, and no data-parallel scheme sends them. They are reported apart, never read as
gradients; a trace holding nothing else has no data-parallel traffic to check.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from zerocalc.errors import TraceMismatchError
from zerocalc.validate.accounting import _OP_VERBS, OP_NAMES, _plural
from zerocalc.validate.classify import GRADIENT_OPS, SCALAR_MAX_ELEMENTS
from zerocalc.validate.columns import Codes, Rows

#: The canonical table's column naming the op a reduction ran inside, in a forward pass.
COLUMN = "forward_op"


def forward_reductions(rows: Rows, ops: Codes, full: np.ndarray) -> np.ndarray:
    """The reductions (all-reduce, reduce-scatter, reduce) larger than a scalar that the trace records inside
    a forward pass (``full``: each call's elements). A scalar there (a capacity or a loss reduced inside a
    checkpointed segment) stays a scalar."""
    if not rows.has(COLUMN):
        return np.zeros(len(rows), dtype=bool)
    return rows.notna(COLUMN) & ops.isin(GRADIENT_OPS) & ~(full <= SCALAR_MAX_ELEMENTS)


def _what(rows: Rows, ops: Codes, full: np.ndarray, mask: np.ndarray, w: np.ndarray | None) -> str:
    """The calls of ``mask`` by op and size, the commonest first (three at most), and the ops around them."""
    count: Counter = Counter()
    weights = np.ones(len(mask)) if w is None else w
    for o, e, k in zip(ops.labels("?")[mask].tolist(), full[mask].tolist(), weights[mask].tolist(),
                       strict=True):
        count[(o, e)] += k
    kinds = count.most_common()
    parts = [f"{OP_NAMES.get(o, o)} of {e:,.0f} elements ×{k:g}" if e == e else f"{OP_NAMES.get(o, o)} ×{k:g}"
             for (o, e), k in kinds[:3]]
    more = f" and {_plural(len(kinds) - 3, 'other size')}" if len(kinds) > 3 else ""
    around = sorted(set(rows.codes(COLUMN).labels("?")[mask].tolist()))
    ops_in = ", ".join(around[:3]) + (" …" if len(around) > 3 else "")
    return f"{', '.join(parts)}{more}, inside {ops_in}"


def refuse_activations_alone(rows: Rows, ops: Codes, full: np.ndarray, fwd: np.ndarray,
                             w: np.ndarray | None = None) -> None:
    """Raise :class:`TraceMismatchError` where every collective larger than a scalar is a reduction of a
    forward pass (``fwd``): tensor parallelism alone, say, whose only reductions are activations'."""
    if not fwd.any():
        return
    data = ops.isin(_OP_VERBS) & ~(full <= SCALAR_MAX_ELEMENTS)
    if (data & ~fwd).any():
        return
    files = sorted(set(rows.codes("file").present(na="the input")))
    where = ", ".join(files) if len(files) <= 2 else f"{files[0]} and {len(files) - 1} other files"
    raise TraceMismatchError(
        f"no data-parallel traffic in {where}: every reduction larger than a scalar runs inside a "
        f"forward pass ({_what(rows, ops, full, fwd, w)}), so it reduces activations of model parallelism "
        "(tensor, sequence or embedding parallelism), not gradients, which the backward makes; the schemes "
        "are data-parallel collectives (`zerocalc trace summary` counts these)")


def activations_note(rows: Rows, ops: Codes, full: np.ndarray, fwd: np.ndarray, w: np.ndarray | None = None
                     ) -> str:
    """The sentence on the reductions of a forward pass, reported apart ("" where there are none)."""
    if not fwd.any():
        return ""
    return ("reductions inside forward passes, reported apart as activations of model parallelism (tensor, "
            f"sequence or embedding parallelism), not gradients: {_what(rows, ops, full, fwd, w)}")


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
