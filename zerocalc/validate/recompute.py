"""The all-gathers activation checkpointing's recompute adds: a unit gathered for its forward, again when the
backward recomputes that forward, and again for its own backward.

A Kineto trace names the gathers that ran in a reentrant checkpoint's recompute (its ``recompute_op`` column:
:mod:`zerocalc.traces.kineto_recompute`). One of them is an extra gather where the same rank gathers the same
elements on a group of the same size, in the same step, next, in no recompute (for the unit's own
backward): FSDP1's ``FULL_SHARD`` and DeepSpeed ZeRO-3 that does not keep its parameters, under
``torch.utils.checkpoint(..., use_reentrant=True)`` (Hugging Face's gradient checkpointing), gather a
checkpointed unit three times where the scheme prices two (pytorch/pytorch#105635, fairscale issue 777). Those
are reported apart, with their elements, and the schemes are compared on the rest. Where the recompute's
gather is the unit's one gather in the backward (a scheme that keeps it for the backward that follows), it
is the scheme's own and stays in the step.
"""

from __future__ import annotations

import numpy as np

from zerocalc.validate.accounting import _plural
from zerocalc.validate.columns import Codes, Rows, group_codes

#: The canonical table's column naming the checkpoint whose recompute ran an all-gather.
COLUMN = "recompute_op"
#: The column that orders a rank's calls: each one's start on the host.
START = "cpu_start_s"


def extra_gathers(rows: Rows, ops: Codes, full: np.ndarray, gs: np.ndarray, rank_idx: np.ndarray,
                  step_id: np.ndarray) -> np.ndarray:
    """The all-gathers of a checkpoint's recompute (:data:`COLUMN`) that the same rank follows, in the same
    step, with an all-gather of the same elements on a group of the same size that ran in no recompute: the
    unit gathered again for its own backward (module docstring). Where the next such gather is another
    recompute's (units of one size, each gathered once in the backward, by its recompute) or there is none,
    the recompute's gather is the unit's one gather in the backward, and stays."""
    out = np.zeros(len(full), dtype=bool)
    if not rows.has(COLUMN):
        return out
    gathers = ops.isin(["all_gather"]) & (step_id >= 0) & (full > 0)
    marked = gathers & rows.notna(COLUMN)
    if not marked.any():
        return out
    idx = np.flatnonzero(gathers)
    key, _ = group_codes(rank_idx[idx], step_id[idx], gs[idx], full[idx])
    start = rows.num(START) if rows.has(START) else np.arange(len(full), dtype=float)
    order = np.lexsort((np.arange(len(idx)), start[idx], key))  # each key's gathers in order of their start
    at, same = idx[order], key[order]
    nxt = np.zeros(len(at), dtype=bool)
    nxt[:-1] = (same[1:] == same[:-1]) & ~marked[at[1:]]  # the next gather of the key ran in no recompute
    out[at] = marked[at] & nxt
    return out


def per_rank_step(full: np.ndarray, extra: np.ndarray, rank_idx: np.ndarray, step_id: np.ndarray,
                  w: np.ndarray | None) -> tuple[float, float]:
    """The recompute's extra all-gathers (``extra``) a rank a step, and their elements; (0, 0) where none."""
    if not extra.any():
        return 0.0, 0.0
    weights = np.ones(len(full)) if w is None else w
    ranks_steps = len(set(zip(rank_idx[extra].tolist(), step_id[extra].tolist(), strict=True)))
    return float(weights[extra].sum()) / ranks_steps, float((full * weights)[extra].sum()) / ranks_steps


def note(rows: Rows, full: np.ndarray, extra: np.ndarray, rank_idx: np.ndarray, step_id: np.ndarray,
         w: np.ndarray | None) -> str:
    """The sentence on the recompute's extra all-gathers, reported apart ("" where none): their elements a
    rank a step (:func:`per_rank_step`), and the checkpoints that ran them."""
    if not extra.any():
        return ""
    calls, elements = per_rank_step(full, extra, rank_idx, step_id, w)
    names = sorted(set(rows.codes(COLUMN).labels("?")[extra].tolist()))
    n = round(calls)
    return (f"{_plural(n, 'all-gather')} a rank a step ({elements:,.0f} elements) in the recompute of a "
            f"reentrant activation checkpoint ({', '.join(names)}) gather{'s' if n == 1 else ''} again what "
            "the unit's own backward gathers next: each checkpointed unit gathered for its forward, for the "
            "recompute and for its backward, as FSDP1's FULL_SHARD and a ZeRO-3 that does not keep its "
            "parameters do under torch.utils.checkpoint(use_reentrant=True) (pytorch/pytorch#105635); "
            "reported apart, the schemes priced on the rest (use_reentrant=False, or FSDP2, gathers such a "
            "unit twice)")
