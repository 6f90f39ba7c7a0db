"""Parameter averaging: all-reduces after the optimizer's step, of as many elements as the gradients.

Local SGD and its kin let groups of ranks (or single ranks) train apart and average the parameters, or
their change (DiLoCo's outer step), over all of them every few steps: PyTorch's ``PeriodicModelAverager``
(``torch.distributed.algorithms.model_averaging``) all-reduces the flattened parameters after the
optimizer's step every ``period`` steps, beside ``post_localSGD_hook``, which from ``start_localSGD_iter`` on
all-reduces the gradients within a subgroup only. Those ranks are not one data-parallel group: between
averagings each subgroup's model drifts from the others', and no scheme here models that.

A Kineto trace marks the calls that begin after the optimizer's step in their ProfilerStep, in no node of
a backward (``after_optimizer``: :mod:`zerocalc.traces.kineto_calls`). Such an all-reduce larger than a
scalar, in a step whose other reductions on its rank carry the same element count within
:data:`TOLERANCE` (the gradients of the parameters averaged), is parameter averaging's; every such
all-reduce of the trace must be, or none is (an evaluation's metrics all-reduced after the step carry a
few elements, no gradient count). Those calls are reported apart, never read as gradients.
"""

from __future__ import annotations

import numpy as np

from zerocalc.validate.accounting import _plural
from zerocalc.validate.classify import GRADIENT_OPS, SCALAR_MAX_ELEMENTS
from zerocalc.validate.columns import Codes, Rows, group_codes, group_sums

#: The canonical table's column marking the calls begun after the optimizer's step.
COLUMN = "after_optimizer"
#: How far an averaging step's all-reduced elements may be from its gradient reductions' (relative).
TOLERANCE = 0.1


def calls(rows: Rows, ops: Codes, full: np.ndarray, rank: np.ndarray,
          w: np.ndarray | None = None) -> np.ndarray:
    """The all-reduces of parameter averaging (see the module's text), as a mask over the rows."""
    none = np.zeros(len(full), dtype=bool)
    if not rows.has(COLUMN) or not rows.has("step"):
        return none
    big = ~(full <= SCALAR_MAX_ELEMENTS)
    cand = rows.notna(COLUMN) & ops.eq("all_reduce") & big
    if not cand.any():
        return none
    other = ops.isin(GRADIENT_OPS) & big & ~cand
    if rows.has("forward_op"):
        other &= ~rows.notna("forward_op")
    step = rows.num("step")
    use = (cand | other) & ~np.isnan(step)
    pair, k = group_codes(rank[use], step[use])
    weight = np.ones(int(use.sum())) if w is None else w[use]
    sums = group_sums(pair, k, {"avg": np.where(cand[use], full[use], 0.0) * weight,
                                "grad": np.where(other[use], full[use], 0.0) * weight})
    avg, grad = sums["avg"].to_numpy(), sums["grad"].to_numpy()
    at = avg > 0
    if not at.any() or not (np.abs(avg[at] - grad[at]) <= TOLERANCE * grad[at]).all():
        return none
    return cand & ~np.isnan(step)


def recorded_group(rows: Rows, mask: np.ndarray, world: int | None) -> int | None:
    """The group the averaging all-reduces ``mask`` run on as they record it (the largest, should they
    differ), else the world's; None without any."""
    if not mask.any():
        return None
    sizes = rows.num("group_size")[mask] if rows.has("group_size") else np.array([np.nan])
    return world if np.isnan(sizes).all() else int(np.nanmax(sizes))


def note(mask: np.ndarray, full: np.ndarray, gs: np.ndarray, rank: np.ndarray, step: np.ndarray,
         n: int, w: np.ndarray | None) -> str:
    """What the averaging all-reduces are, for the user."""
    if not mask.any():
        return ""
    step = np.asarray(step, dtype=float)
    valid = ~np.isnan(step) & (step >= 0)
    r0 = rank[mask][0]
    mine = mask & (rank == r0) & valid
    steps_with = len(np.unique(step[mine]))
    all_steps = len(np.unique(step[(rank == r0) & valid]))
    elems = int(np.median(full[mask]))
    calls = int(mine.sum() if w is None else w[mine].sum())
    m = int(gs[mask].max())
    what = (f"{_plural(calls, 'all-reduce')} of {elems:,} elements a rank after the optimizer's step, on "
            f"groups of {m}, in {steps_with} of its {all_steps} steps, as many elements as its gradient "
            "reductions")
    if m <= n:  # over the data-parallel group itself: its parameters are equal already
        return (f"parameter averaging over the data-parallel group itself: {what}: parameters its gradients' "
                "reduction already keeps equal, averaged again (PyTorch's PeriodicModelAverager without "
                "post_localSGD_hook): traffic the data-parallel update does not need, left out of the step's "
                "traffic")
    return (f"parameter averaging, not one data-parallel group: {what}: the parameters (or their change) "
            "averaged every few steps (PyTorch's PeriodicModelAverager beside post_localSGD_hook: local SGD; "
            f"DiLoCo's outer step); between averagings each group of {n} trains on its own, which no scheme "
            "here models: left out of the step's traffic")
