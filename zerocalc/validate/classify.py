"""Classify: which rows are calls, and the category of every call (nothing dropped).

Rows that are not one call of one rank (aggregates, benchmarks) are set aside first; every remaining
call then falls in one of :data:`CATEGORIES`: the steady-state step traffic the schemes model, model
buffers, scalar collectives, one-off traffic, or collectives no data-parallel scheme explains.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from zerocalc.errors import TraceMismatchError
from zerocalc.validate.accounting import _OP_VERBS, DP_OPS, OP_NAMES, _plural, _world_sizes

#: Category of every measured call, with what it means.
CATEGORIES: dict[str, str] = {
    "step": "gradient and parameter traffic of the step (what the schemes model)",
    "buffers": "per-step broadcasts of model buffers (e.g. DDP's BatchNorm statistics), not parameters",
    "scalar": "small scalar collectives (loss, gradient norm, overflow flags) and barriers",
    "one_off": "traffic outside the steady state (initial broadcasts, calls outside the profiled steps)",
    "unexplained": "collectives no data-parallel scheme explains (all-to-all, point-to-point, other groups)",
}

#: A collective whose full vector has at most this many elements is a scalar collective.
SCALAR_MAX_ELEMENTS = 8
#: Per-step broadcasts moving less than this share of Ψ are model buffers, not parameters.
BUFFER_MAX_SHARE_OF_PSI = 0.5
#: Ops that reduce gradients (Ψ is read from their elements).
GRADIENT_OPS: tuple[str, ...] = ("all_reduce", "reduce_scatter", "reduce")


def _set_aside(df: pd.DataFrame, meta: dict | None) -> np.ndarray:
    """Rows that are not one call of one rank: DeepSpeed ``log_summary`` aggregates, nccl-tests rows."""
    aside = np.zeros(len(df), bool)
    if "summary" in df.columns:
        aside |= df["summary"].fillna(False).astype(bool).to_numpy()
    bench = {str(f) for f, m in (meta or {}).items()
             if isinstance(m, dict) and m.get("format") == "nccl_tests"}
    if bench:
        aside |= df["file"].astype(str).isin(bench).to_numpy()
    return aside


def select_calls(table: pd.DataFrame, meta: dict | None) -> tuple[pd.DataFrame, list[str]]:
    """The per-call rows of a canonical table, with a sentence for each thing set aside.

    Drops ``other`` rows; sets aside aggregates and benchmark rows (:func:`_set_aside`). Raises
    :class:`TraceMismatchError` for traces of different world sizes and when no collective is left.
    """
    notes: list[str] = []
    ws = _world_sizes(meta)
    if len(set(ws.values())) > 1:
        by = ", ".join(f"{f} ({w})" for f, w in sorted(ws.items()))
        raise TraceMismatchError(f"traces of different world sizes mixed: {by}")
    df = table[table["op"].astype(str) != "other"] if len(table) else table
    aside = _set_aside(df, meta)
    if aside.any():
        fcol = df["file"].astype(str)
        kept = set(fcol[~aside])
        whole = sorted(set(fcol[aside]) - kept)
        part = sorted(set(fcol[aside]) & kept)
        if whole:
            notes.append("set aside (aggregates or benchmarks, not per-call traces): " + ", ".join(whole))
        for f in part:
            k = int((aside & (fcol == f).to_numpy()).sum())
            notes.append(f"set aside {_plural(k, 'aggregate row')} of {f} (summaries, not calls); "
                         f"its {_plural(int(((~aside) & (fcol == f).to_numpy()).sum()), 'per-call row')} "
                         "are counted")
        df = df[~aside]
    if df.empty or not df["op"].astype(str).isin(list(_OP_VERBS)).any():
        files = ", ".join(sorted(set(table["file"].astype(str)))) if len(table) else "the input"
        hint = (" (nccl-tests output and comms-logger summaries are not per-call traces)"
                if aside.any() else "")
        raise TraceMismatchError(f"no collectives in {files}: nothing to check{hint}")
    return df, notes


def scalar_calls(full: np.ndarray, approx: np.ndarray) -> np.ndarray:
    """Calls of at most :data:`SCALAR_MAX_ELEMENTS` elements (a size in bytes only: one at ≥ 1 B per
    element); calls with no size at all are not scalar."""
    sized = ~np.isnan(full) | ~np.isnan(approx)
    small = np.where(np.isnan(full), np.nan_to_num(approx) <= SCALAR_MAX_ELEMENTS,
                     full <= SCALAR_MAX_ELEMENTS)
    return small & sized


def steady_state(op: np.ndarray, gs: np.ndarray, dp_sizes, step_id: np.ndarray, full: np.ndarray,
                 rank: np.ndarray) -> np.ndarray:
    """First categories: ``step``, ``unexplained`` (not a data-parallel op, or a group other than the
    data-parallel ones: N, or HSDP's shard and replicate groups) and ``one_off`` (outside the steps, or a
    call signature some of its rank's steps lack)."""
    sizes = [dp_sizes] if np.isscalar(dp_sizes) else list(dp_sizes)
    cat = np.full(len(op), "step", dtype=object)
    cat[~np.isin(op, list(DP_OPS) + ["barrier"])] = "unexplained"
    other_group = np.isin(op, list(DP_OPS)) & ~np.isin(gs, sizes)
    cat[other_group] = "unexplained"
    cat[(cat == "step") & (step_id < 0)] = "one_off"
    if len(set(step_id[step_id >= 0].tolist())) > 1:
        # a call signature (rank, op, size, group) that some of its rank's steps lack is not steady state
        st = np.flatnonzero(cat == "step")
        keyed = pd.DataFrame({"r": rank[st], "o": op[st], "f": full[st], "g": gs[st], "s": step_id[st]})
        in_steps = keyed.groupby(["r", "o", "f", "g"], sort=False, dropna=False)["s"].transform("nunique")
        has = step_id >= 0
        steps_of_rank = pd.Series(step_id[has]).groupby(rank[has]).nunique()
        cat[st[in_steps.to_numpy() != steps_of_rank.reindex(rank[st]).to_numpy()]] = "one_off"
    return cat


def gradient_calls(cat: np.ndarray, op: np.ndarray, full: np.ndarray) -> np.ndarray:
    """Steady-state gradient reductions (all-reduce, reduce-scatter, reduce) larger than a scalar."""
    return (cat == "step") & np.isin(op, list(GRADIENT_OPS)) & (full > SCALAR_MAX_ELEMENTS)


def small_traffic(cat: np.ndarray, op: np.ndarray, full: np.ndarray, rank: np.ndarray, step_id: np.ndarray,
                  small: np.ndarray, psi_ref: float | None) -> np.ndarray:
    """Last categories: per-step broadcasts under :data:`BUFFER_MAX_SHARE_OF_PSI` of Ψ are ``buffers``;
    scalar collectives and barriers are ``scalar``."""
    cat = cat.copy()
    bc = (cat == "step") & (op == "broadcast")
    if bc.any() and psi_ref:
        bc_tot = pd.Series(full[bc]).groupby([rank[bc], step_id[bc]]).sum()
        if float(bc_tot.max()) < BUFFER_MAX_SHARE_OF_PSI * psi_ref:
            cat[bc] = "buffers"
    cat[(cat == "step") & (small | (op == "barrier"))] = "scalar"
    cat[(cat == "one_off") & (op == "barrier")] = "scalar"
    return cat


def unexplained_note(calls: pd.DataFrame) -> str:
    """The sentence naming the calls no data-parallel scheme explains ("" when there are none)."""
    unexp = calls[calls["category"] == "unexplained"]
    if not len(unexp):
        return ""
    what = Counter(
        f"{OP_NAMES.get(o, o)} on {int(p) if not pd.isna(p) else '?'} ranks"
        for o, p in zip(unexp["op"].astype(str), unexp["group_size_used"], strict=True)
    )
    return ("not explained by any data-parallel scheme, reported apart: "
            + ", ".join(f"{k} ×{v}" for k, v in sorted(what.items())))
