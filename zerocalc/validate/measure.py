"""Measure: bytes each rank sent per step, by category, from a canonical trace table.

:func:`measure` reads as its stages: the per-call rows (:mod:`.classify`), ranks, N, element types
and sizes (:mod:`.infer`), the ring bytes of every call (:mod:`.accounting`), steps, categories,
Ψ and the wire type, then the per-step tables and the measured pattern.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from zerocalc.errors import ConfigError
from zerocalc.validate import classify, infer
from zerocalc.validate.accounting import (
    OP_NAMES,
    _num,
    _per_op_and_size,
    _world_sizes,
    full_vector_elements,
    ring_bytes_factor,
)
from zerocalc.validate.classify import CATEGORIES


@dataclass(frozen=True)
class Measurement:
    """What a trace says, per rank and per step, with how each fact was obtained.

    ``calls`` is the canonical table plus columns ``step_id`` (the step used, -1 outside the
    steps), ``elem_bytes_used``, ``full_elements``, ``bytes_sent``, ``category``,
    ``duration_used_s`` and ``group_size_used`` (the world size, else ``n``, where a call records none).
    ``psi_how``, ``n_how``, ``steps_how`` and ``notes`` are sentences for the user.
    """

    calls: pd.DataFrame
    psi: int
    psi_how: str
    psi_trace: int | None
    n: int
    n_how: str
    steps: int
    steps_how: str
    ranks: tuple[int, ...]
    comm_elem_bytes: float
    comm_dtype: str
    notes: tuple[str, ...]
    per_step: pd.DataFrame  # rank, step_id, category, calls, bytes_sent, duration_s
    categories: pd.DataFrame  # category, description, calls_per_rank_per_step, bytes_per_rank_per_step, ...
    #: (op, calls, full elements, bytes) per rank and step, in first-appearance order
    pattern: tuple[tuple[str, float, float, float], ...]
    order_variants: int
    #: how ranks were identified when the trace records none ("" when it records them)
    ranks_how: str = ""
    #: the trace header's world size (None when it records none)
    world_size: int | None = None
    #: group sizes the data-parallel collectives run on ({N}, or HSDP's shard and replicate sizes)
    dp_group_sizes: tuple[int, ...] = ()
    #: HSDP's shard-group size (None: the gradients are reduced on one group)
    shard_size: int | None = None
    micro_batches: int = 1
    micro_batches_how: str = ""
    #: "every", "boundary" or None (the trace cannot tell), with the sentence saying why
    grad_sync: str | None = None
    grad_sync_how: str = ""
    #: element types of the parameter-side (all-gather, broadcast) and gradient-side collectives
    param_dtype: str = ""
    param_elem_bytes: float = math.nan
    grad_dtype: str = ""
    grad_elem_bytes: float = math.nan
    #: (op, group size, dtype, calls, full elements, bytes) per rank and step, ops in :attr:`pattern` order
    pattern_groups: tuple[tuple[str, int, str, float, float, float], ...] = ()

    @property
    def bytes_per_rank_per_step(self) -> float:
        """Mean over ranks and steps of the step category's bytes sent."""
        row = self.categories[self.categories["category"] == "step"]
        return float(row["bytes_per_rank_per_step"].iloc[0]) if len(row) else 0.0



def measure(
    table: pd.DataFrame,
    *,
    psi: int | None = None,
    n: int | None = None,
    steps: int | None = None,
    dtype: str | None = None,
    meta: dict | None = None,
    micro_batches: int | None = None,
) -> Measurement:
    """Bytes each rank sent per step, by category, from a canonical trace table.

    ``psi``, ``n``, ``steps`` and ``dtype`` are the user's options (None: infer from the
    trace). Raises :class:`TraceMismatchError` for mixed world sizes, no collectives,
    or options the trace contradicts, and :class:`ConfigError` for bad option values.
    """
    dtype = _check_options(n=n, steps=steps, dtype=dtype)
    world = next(iter(_world_sizes(meta).values()), None)
    df, notes = classify.select_calls(table, meta)
    df, ranks_how = infer.assign_ranks(df)
    if ranks_how:
        notes.append(ranks_how)
    op = df["op"].astype(str).to_numpy()
    rank = df["rank"].to_numpy()
    full = full_vector_elements(op, _num(df["in_nelems"]), _num(df["out_nelems"]))

    gs, groups = infer.infer_n(df, op, full, world, n)
    n, n_how = groups.n, groups.how
    eb, more = infer.fill_elem_types(df, op, full, dtype)
    notes += more
    full, approx, more = infer.approximate_sizes(df, op, full, gs, eb)
    notes += more
    small = classify.scalar_calls(full, approx)
    full_bytes = np.where(np.isnan(full), approx, full * eb)
    full, eb = np.nan_to_num(full), np.nan_to_num(eb)
    ring = _per_op_and_size(lambda o, p: ring_bytes_factor(o, p) if o in OP_NAMES else 0.0,
                            op, np.nan_to_num(gs, nan=1.0))
    sent = ring * np.nan_to_num(full_bytes)

    step_id, steps_how, more = infer.infer_steps(df, op, gs, small, steps)
    notes += more
    cat = classify.steady_state(op, gs, groups.sizes, step_id, full, rank)
    mb = infer.infer_micro_batches(op, gs, full, cat, rank, step_id, micro_batches,
                                   marked=bool(df["step"].notna().any()))
    syncs = mb.k if mb.grad_sync == "every" else 1
    psi_trace, more = infer.psi_in_trace(cat, op, full, rank, step_id, syncs=syncs,
                                         shard_only=groups.shard is not None)
    notes += more
    cat = classify.small_traffic(cat, op, full, rank, step_id, small,
                                 psi_trace if psi_trace is not None else psi)
    psi, psi_how = infer.infer_psi(psi, psi_trace, cat, op, full, syncs, shard_only=groups.shard is not None)
    comm_dtype, comm_eb, full, eb, more = infer.wire_dtype(df, cat, op, full, eb, sent, approx, dtype)
    notes += more
    sides = infer.side_dtypes(df, cat, op, full, eb, (comm_dtype, comm_eb))

    calls = df.assign(step_id=step_id, elem_bytes_used=eb, full_elements=full, bytes_sent=sent, category=cat,
                      duration_used_s=_num(df["duration_s"]) if "duration_s" in df.columns
                      else np.full(len(df), np.nan),
                      group_size_used=gs)
    ranks = tuple(sorted(set(rank.tolist())))
    n_steps = len(set(step_id[step_id >= 0].tolist())) or 1
    per_step, categories = _per_step_tables(calls, ranks, n_steps)
    unexplained = classify.unexplained_note(calls)
    if unexplained:
        notes.append(unexplained)
    step_calls = calls[calls["category"] == "step"]
    pattern, variants = _measured_pattern(step_calls, len(ranks) * n_steps)
    return Measurement(
        calls=calls, psi=int(psi), psi_how=psi_how, psi_trace=psi_trace, n=int(n), n_how=n_how,
        steps=n_steps, steps_how=steps_how, ranks=ranks, comm_elem_bytes=float(comm_eb),
        comm_dtype=str(comm_dtype), notes=tuple(notes), per_step=per_step, categories=categories,
        pattern=pattern, order_variants=variants, ranks_how=ranks_how, world_size=world,
        dp_group_sizes=tuple(sorted(groups.sizes)), shard_size=groups.shard,
        micro_batches=mb.k, micro_batches_how=mb.how, grad_sync=mb.grad_sync, grad_sync_how=mb.grad_sync_how,
        param_dtype=sides[0], param_elem_bytes=sides[1], grad_dtype=sides[2], grad_elem_bytes=sides[3],
        pattern_groups=_measured_groups(step_calls, len(ranks) * n_steps, [o for o, *_ in pattern]),
    )


def _check_options(*, n: int | None, steps: int | None, dtype: str | None) -> str | None:
    """Refuse non-positive ``--steps``/``--n``; the canonical name of ``--dtype``."""
    from zerocalc.dtypes import canonical_dtype

    if steps is not None and steps < 1:
        raise ConfigError(f"must be a positive integer, got {steps}", option="--steps")
    if n is not None and n < 1:
        raise ConfigError(f"must be a positive integer, got {n}", option="--n")
    return canonical_dtype(dtype) if dtype is not None else None


def _per_step_tables(calls: pd.DataFrame, ranks: tuple[int, ...], n_steps: int):
    """(rank, step, category) sums, and per category the mean calls and bytes per rank and step."""
    step_id = calls["step_id"].to_numpy()
    grouped = calls.groupby(["rank", "step_id", "category"], sort=True)
    per_step = pd.DataFrame({
        "calls": grouped.size(), "bytes_sent": grouped["bytes_sent"].sum(),
        "duration_s": grouped["duration_used_s"].sum(min_count=1),
    }).reset_index()
    n_rank_steps = len(ranks) * n_steps
    rows = []
    for c, desc in CATEGORIES.items():
        sub = per_step[per_step["category"] == c]
        if c == "one_off":
            rows.append({"category": c, "description": desc,
                         "calls_per_rank_per_step": sub["calls"].sum() / len(ranks),
                         "bytes_per_rank_per_step": sub["bytes_sent"].sum() / len(ranks),
                         "min_bytes": math.nan, "max_bytes": math.nan, "per": "rank (whole trace)"})
            continue
        full_grid = (sub.set_index(["rank", "step_id"])["bytes_sent"]
                     .reindex(pd.MultiIndex.from_product([ranks, sorted(set(step_id[step_id >= 0].tolist()))
                                                          or [0]]), fill_value=0.0))
        rows.append({"category": c, "description": desc,
                     "calls_per_rank_per_step": sub["calls"].sum() / n_rank_steps,
                     "bytes_per_rank_per_step": sub["bytes_sent"].sum() / n_rank_steps,
                     "min_bytes": float(full_grid.min()), "max_bytes": float(full_grid.max()),
                     "per": "rank and step"})
    return per_step, pd.DataFrame(rows)


def _measured_pattern(step_calls: pd.DataFrame, n_rank_steps: int):
    """Per-step ops in first-appearance order, each with mean calls, full elements and bytes.

    The order is the most common one over (rank, step) (ties: the one seen first); each
    (rank, step)'s order is encoded as one integer (op codes as base-``k+1`` digits), so no
    Python loop runs over the groups.
    """
    if step_calls.empty:
        return (), 0
    ops = step_calls["op"].astype(str).to_numpy()
    code, names = pd.factorize(ops)
    first = pd.DataFrame({"r": step_calls["rank"].to_numpy(), "s": step_calls["step_id"].to_numpy(),
                          "c": code}).drop_duplicates()
    base = len(names) + 1
    pos = first.groupby(["r", "s"], sort=False).cumcount().to_numpy()
    first = first.assign(d=(first["c"].to_numpy() + 1) * base ** pos.astype(np.int64))
    keys = first.groupby(["r", "s"], sort=False)["d"].sum()
    counts = keys.groupby(keys.to_numpy(), sort=False).size()
    key = int(counts.idxmax())
    order = []
    while key:
        key, digit = divmod(key, base)
        order.append(str(names[digit - 1]))
    agg = step_calls.groupby(ops).agg(
        calls=("op", "size"), elems=("full_elements", "sum"), bytes=("bytes_sent", "sum"))
    pattern = tuple(
        (o, float(agg.at[o, "calls"]) / n_rank_steps, float(agg.at[o, "elems"]) / n_rank_steps,
         float(agg.at[o, "bytes"]) / n_rank_steps)
        for o in order
    )
    return pattern, len(counts)



def _measured_groups(step_calls: pd.DataFrame, n_rank_steps: int, op_order: list[str]):
    """Per-step (op, group size, dtype) entries: mean calls, full elements and bytes per rank and step,
    ops in ``op_order``, then by first appearance."""
    if step_calls.empty:
        return ()
    df = pd.DataFrame({"o": step_calls["op"].astype(str).to_numpy(),
                       "p": step_calls["group_size_used"].to_numpy(dtype=float),
                       "d": step_calls["dtype"].astype("string").fillna("?").to_numpy(),
                       "e": step_calls["full_elements"].to_numpy(dtype=float),
                       "b": step_calls["bytes_sent"].to_numpy(dtype=float)})
    rank = {o: i for i, o in enumerate(op_order)}
    agg = df.groupby(["o", "p", "d"], sort=False).agg(calls=("e", "size"), e=("e", "sum"), b=("b", "sum"))
    keys = sorted(agg.index, key=lambda k: rank.get(k[0], len(rank)))
    return tuple((str(o), int(p), str(d), float(agg.at[(o, p, d), "calls"]) / n_rank_steps,
                  float(agg.at[(o, p, d), "e"]) / n_rank_steps, float(agg.at[(o, p, d), "b"]) / n_rank_steps)
                 for o, p, d in keys)
