"""The measured step, summed: per rank, step and category the calls and bytes, per category their
means, and the step's pattern (its ops in order, the order variants, the groups each op runs on), from the
classified calls of :func:`~zerocalc.validate.measure.measure` (a folded trace's each counted by its
weight).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from zerocalc.validate import classify
from zerocalc.validate.classify import CATEGORIES, STEP
from zerocalc.validate.columns import (
    Codes,
    exact_total,
    first_rows,
    group_codes,
    group_sums,
    sorted_labels,
)
from zerocalc.validate.folded import Unfoldable, weighted

if TYPE_CHECKING:
    from zerocalc.validate.measure import CallColumns


def summarise(cols: CallColumns, cat: np.ndarray, ops: Codes, gs: np.ndarray, rank_idx: np.ndarray,
              ranks: tuple, step_id: np.ndarray, w: np.ndarray | None = None,
              noted: np.ndarray | None = None):
    """The steps counted, the per-step and per-category tables, the note on unexplained calls (those of
    ``noted`` left out: reported apart with a note of their own that names what sends them), and the
    measured step pattern (ops, order variants, groups). ``w``: each call's weight (a folded trace's: the
    steps it stands for counted too)."""
    steps_used = np.unique(step_id[step_id >= 0])
    n_steps = (len(steps_used) if w is None else _weighted_steps(rank_idx, step_id, w)) or 1
    per_step, categories = _per_step_tables(cols, rank_idx, ranks, steps_used, w, n_steps)
    unexplained = classify.unexplained_note(cat if noted is None else np.where(noted, STEP, cat), ops, gs, w)
    step = np.flatnonzero((cat == STEP) & (gs != 1))  # a group of one rank moves nothing: no pattern's
    pattern, variants = _measured_pattern(cols, step, rank_idx, len(ranks) * n_steps, w)
    groups = _measured_groups(cols, step, len(ranks) * n_steps, [o for o, *_ in pattern], w)
    return n_steps, per_step, categories, unexplained, pattern, variants, groups


def _weighted_steps(rank_idx: np.ndarray, step_id: np.ndarray, w: np.ndarray) -> int:
    """The most steps of one rank, each step counted by its calls' weight (a folded trace's)."""
    has = step_id >= 0
    if not has.any():
        return 0
    pair, k = group_codes(rank_idx[has], step_id[has])
    first = first_rows(pair)
    return int(np.bincount(rank_idx[has][first], weights=w[has][first]).max())


def _per_step_tables(cols: CallColumns, rank_idx: np.ndarray, ranks: tuple[int, ...], steps_used: np.ndarray,
                     w: np.ndarray | None = None, n_steps: int | None = None):
    """(rank, step, category) sums, and per category the mean calls and bytes per rank and step
    (``w``: each call's weight, ``n_steps``: the steps, of a folded trace)."""
    # one key per (rank, step, category name), in that sorted order: step -1 first, names alphabetical
    by_name = {c: i for i, c in enumerate(sorted(CATEGORIES))}
    alpha = np.array([by_name[c] for c in CATEGORIES], dtype=np.int64)
    lo, hi = int(cols.step_id.min()), int(cols.step_id.max())
    n_cat, n_step = len(CATEGORIES), hi - lo + 1
    key = (rank_idx.astype(np.int64) * n_step + (cols.step_id - lo)) * n_cat + alpha[cols.cat]
    labels, k = sorted_labels(key)
    keys = np.empty(k, dtype=np.int64)
    keys[labels] = key
    sums = group_sums(labels, k, {"b": cols.bytes_sent})
    per_step = pd.DataFrame({
        "rank": np.asarray(ranks, dtype=np.int64)[keys // n_cat // n_step],
        "step_id": (keys // n_cat % n_step + lo).astype(np.int64),
        "category": np.array(sorted(CATEGORIES), dtype=object)[keys % n_cat],
        "calls": sums["size"].to_numpy(np.int64), "bytes_sent": sums["b"].to_numpy(),
        "duration_s": (np.full(k, np.nan) if cols.duration_s.strides == (0,)  # no durations at all
                       else group_sums(labels, k, {"d": cols.duration_s}, min_count=1)["d"].to_numpy()),
    })
    n_rank_steps = len(ranks) * max(len(steps_used) if n_steps is None else n_steps, 1)
    grid_steps = steps_used if len(steps_used) else np.zeros(1, dtype=np.int64)
    cell_w = None
    if w is not None:  # a cell's calls share one weight: the steps it stands for
        cell_w = np.zeros(k, np.int64)
        cell_w[labels] = w
    rows = []
    for c, desc in CATEGORIES.items():
        this = (per_step["category"] == c).to_numpy()
        sub = per_step[this]
        sw = None if cell_w is None else cell_w[this]
        calls, sent = _cell_sum(sub["calls"], sw), _cell_sum(sub["bytes_sent"], sw)
        if c == "one_off":
            rows.append({"category": c, "description": desc,
                         "calls_per_rank_per_step": calls / len(ranks),
                         "bytes_per_rank_per_step": sent / len(ranks),
                         "min_bytes": math.nan, "max_bytes": math.nan, "per": "rank (whole trace)"})
            continue
        # over every (rank, step) of the steps, 0 where the category has no call
        in_grid = np.isin(sub["step_id"].to_numpy(), grid_steps)
        cells = sub["bytes_sent"].to_numpy()[in_grid]
        n_cells = len(cells) if sw is None else int(sw[in_grid].sum())
        if n_cells < n_rank_steps if n_steps is not None else len(cells) < len(ranks) * len(grid_steps):
            cells = np.append(cells, 0.0)
        rows.append({"category": c, "description": desc,
                     "calls_per_rank_per_step": calls / n_rank_steps,
                     "bytes_per_rank_per_step": sent / n_rank_steps,
                     "min_bytes": float(cells.min()), "max_bytes": float(cells.max()),
                     "per": "rank and step"})
    return per_step, pd.DataFrame(rows)


def _cell_sum(values: pd.Series, w: np.ndarray | None):
    """The sum of a per-step table's column, each cell counted by its weight (None: 1): whole numbers
    as integers, bytes exactly where they are multiples of one power of two (:func:`exact_total`: a
    sum that depends on the values alone), else pandas' sum (a folded trace's: refused)."""
    v = values.to_numpy()
    if v.dtype.kind in "iu":
        return v.sum() if w is None else (v * w).sum().item()
    total = exact_total(v, w)
    if total is not None:
        return total
    if w is not None:
        raise Unfoldable("a sum of bytes is not exact in floating point")
    return values.sum()


def _measured_pattern(cols: CallColumns, step: np.ndarray, rank_idx: np.ndarray, n_rank_steps: int,
                      w: np.ndarray | None = None):
    """Per-step ops in first-appearance order, each with mean calls, full elements and bytes, over the
    step calls ``step``.

    The order is the most common one over (rank, step) (ties: the one seen first); each
    (rank, step)'s order is encoded as one integer (op codes as base-``k+1`` digits), so no
    Python loop runs over the groups.
    """
    if not len(step):
        return (), 0
    code, n_ops = group_codes(cols.ops.codes[step])  # ops numbered in order of first appearance
    op_codes = cols.ops.codes[step][first_rows(code)]
    names = [cols.ops.names[c] if c >= 0 else "nan" for c in op_codes.tolist()]
    pair, n_pairs = group_codes(rank_idx[step], cols.step_id[step])
    base = n_ops + 1
    first = first_rows(group_codes(pair, code)[0])  # each op's first call in each (rank, step), in call order
    p_first, c_first = pair[first], code[first]
    # position of each first call within its (rank, step): its index among the pair's first calls
    by_pair = np.argsort(p_first, kind="stable")
    starts = np.concatenate([[0], np.cumsum(np.bincount(p_first, minlength=n_pairs))[:-1]])
    pos = np.empty(len(first), dtype=np.int64)
    pos[by_pair] = np.arange(len(first)) - starts[p_first[by_pair]]
    digits = (c_first.astype(np.int64) + 1) * base ** pos
    keys = np.bincount(p_first, weights=digits, minlength=n_pairs) if base ** int(pos.max()) * base < 2**52 \
        else pd.Series(digits).groupby(p_first).sum().to_numpy()
    variant, uniq = pd.factorize(keys.astype(np.int64))  # orders numbered in order of first appearance
    counts = np.bincount(variant) if w is None else np.bincount(variant, weights=w[step][first_rows(pair)])
    key = int(uniq[int(np.argmax(counts))])
    order = []
    while key:
        key, digit = divmod(key, base)
        order.append(names[digit - 1])
    agg = _weighted_sums(code, n_ops, cols, step, w)
    mean = {o: tuple(float(agg[c].iat[j]) / n_rank_steps for c in ("size", "e", "b"))
            for j, o in enumerate(names)}
    pattern = tuple((o, *mean[o]) for o in order)
    return pattern, len(counts)


def _weighted_sums(labels: np.ndarray, k: int, cols: CallColumns, step: np.ndarray, w: np.ndarray | None):
    """Per label: calls (``size``), full elements (``e``) and bytes (``b``) of the calls ``step``, each
    call counted by its weight (None: 1)."""
    if w is None:
        return group_sums(labels, k, {"e": cols.full_elements[step], "b": cols.bytes_sent[step]})
    ws = w[step]
    agg = group_sums(labels, k, {"e": weighted(cols.full_elements[step], ws),
                                 "b": weighted(cols.bytes_sent[step], ws), "n": ws.astype(np.float64)})
    agg["size"] = agg.pop("n").to_numpy(np.int64)
    return agg


def _measured_groups(cols: CallColumns, step: np.ndarray, n_rank_steps: int, op_order: list[str],
                     w: np.ndarray | None = None):
    """Per-step (op, group size, dtype) entries: mean calls, full elements and bytes per rank and step,
    ops in ``op_order``, then by first appearance."""
    if not len(step):
        return ()
    kind, k = group_codes(cols.ops.codes[step], cols.group_size[step], cols.dtype.codes[step])
    agg = _weighted_sums(kind, k, cols, step, w)
    first = step[first_rows(kind)]
    out = []
    for j, i in enumerate(first.tolist()):
        c, d = cols.ops.codes[i], cols.dtype.codes[i]
        out.append((cols.ops.names[c] if c >= 0 else "nan", int(cols.group_size[i]), cols.dtype.names[d],
                    float(agg["size"].iat[j]) / n_rank_steps, float(agg["e"].iat[j]) / n_rank_steps,
                    float(agg["b"].iat[j]) / n_rank_steps))
    rank = {o: i for i, o in enumerate(op_order)}
    return tuple(sorted(out, key=lambda t: rank.get(t[0], len(rank))))
