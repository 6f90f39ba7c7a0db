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
from zerocalc.traces.schema import REDUCTION_OPS, SCALAR_MAX_ELEMENTS
from zerocalc.validate.accounting import _OP_VERBS, DP_OPS, OP_NAMES, _plural, _world_sizes
from zerocalc.validate.columns import Codes, Rows, first_rows, group_codes, group_ranges, group_sums, zero_nan

#: Category of every measured call, with what it means.
CATEGORIES: dict[str, str] = {
    "step": "gradient and parameter traffic of the step (what the schemes model)",
    "buffers": "per-step broadcasts of model buffers (e.g. DDP's BatchNorm statistics), not parameters",
    "scalar": "small scalar collectives (loss, gradient norm, overflow flags) and barriers",
    "one_off": "traffic outside the steady state (initial broadcasts, calls outside the profiled steps)",
    "unexplained": "collectives no data-parallel scheme explains (all-to-all, point-to-point, other groups, "
                   "model parallelism's activations)",
}

#: Per-step broadcasts moving less than this share of Ψ are model buffers, not parameters.
BUFFER_MAX_SHARE_OF_PSI = 0.5
#: Ops that reduce gradients (Ψ is read from their elements).
GRADIENT_OPS: tuple[str, ...] = REDUCTION_OPS


#: Each category's code in the arrays the check works on (the order of :data:`CATEGORIES`).
STEP, BUFFERS, SCALAR, ONE_OFF, UNEXPLAINED = range(len(CATEGORIES))


def _set_aside(table: pd.DataFrame, files: Codes, meta: dict | None) -> np.ndarray:
    """Rows that are not one call of one rank: DeepSpeed ``log_summary`` aggregates, nccl-tests rows."""
    aside = np.zeros(len(table), bool)
    if "summary" in table.columns:
        aside |= table["summary"].fillna(False).astype(bool).to_numpy()
    bench = {str(f) for f, m in (meta or {}).items()
             if isinstance(m, dict) and m.get("format") == "nccl_tests"}
    if bench:
        aside |= files.isin(bench)
    return aside


def select_calls(table: pd.DataFrame, meta: dict | None, ops: Codes | None = None) -> tuple[Rows, list[str]]:
    """The per-call rows of a canonical table (``ops``: its ``op`` column as codes, if already made),
    with a sentence for each thing set aside.

    Drops ``other`` rows; sets aside aggregates and benchmark rows (:func:`_set_aside`). Raises
    :class:`TraceMismatchError` for traces of different world sizes and when no collective is left. The
    notes begin with the readers' (each file's ``meta["notes"]``, once each).
    """
    notes: list[str] = list(dict.fromkeys(t for m in (meta or {}).values() if isinstance(m, dict)
                                          for t in m.get("notes") or ()))
    ws = _world_sizes(meta)
    if len(set(ws.values())) > 1:
        by = ", ".join(f"{f} ({w})" for f, w in sorted(ws.items()))
        raise TraceMismatchError(f"traces of different world sizes mixed: {by}")
    rows = Rows(table, np.arange(len(table)))
    files = rows.codes("file")
    fname = [*files.names, "nan"]  # code -1 (no file) reads the last
    ops = ops if ops is not None else rows.codes("op")
    keep = ~ops.eq("other")
    aside = _set_aside(table, files, meta) & keep
    if aside.any():
        kept_f, aside_f = set(files.present(keep & ~aside, na="nan")), set(files.present(aside, na="nan"))
        whole = sorted(aside_f - kept_f)
        part = sorted(aside_f & kept_f)
        if whole:
            notes.append("set aside (aggregates or benchmarks, not per-call traces): " + ", ".join(whole))
        for f in part:
            this = files.codes == (fname.index(f) if f != "nan" else -1)
            k = int((aside & this).sum())
            notes.append(f"set aside {_plural(k, 'aggregate row')} of {f} (summaries, not calls); "
                         f"its {_plural(int((keep & ~aside & this).sum()), 'per-call row')} "
                         "are counted")
        keep &= ~aside
    if not keep.any() or not ops.isin(_OP_VERBS)[keep].any():
        names = ", ".join(sorted(set(files.present(na="nan")))) if len(table) else "the input"
        hint = (" (nccl-tests output and comms-logger summaries are not per-call traces)"
                if aside.any() else "")
        summaries = aside & (table["summary"].fillna(False).astype(bool).to_numpy()
                             if "summary" in table.columns else False)
        if summaries.any() and (aside == summaries).all():  # DeepSpeed's log_summary tables alone
            hint = (" (DeepSpeed's log_summary table counts each size's calls over the whole run, in no "
                    "order, which tells no step from another; check reads the comms logger's line per "
                    "call: run with \"comms_logger\": {\"enabled\": true, \"verbose\": true}; zerocalc "
                    "fit reads the table)")
        p2p = {o: int((keep & ops.eq(o)).sum()) for o in ("send", "recv")}
        if not hint and any(p2p.values()):
            hint = (f" (only point-to-point calls, {p2p['send']} send and {p2p['recv']} recv, as pipeline "
                    "parallelism without data parallelism makes: the schemes are data-parallel collectives; "
                    "`zerocalc trace summary` counts them)")
        raise TraceMismatchError(f"no collectives in {names}: nothing to check{hint}")
    kept = np.flatnonzero(keep)
    return rows.subset(kept.astype(np.int32) if len(table) < 2**31 else kept), notes


def scalar_calls(full: np.ndarray, approx: np.ndarray, ops: Codes, in_e: np.ndarray) -> np.ndarray:
    """Calls of at most :data:`SCALAR_MAX_ELEMENTS` elements (a size in bytes only: one at ≥ 1 B per
    element); calls with no size at all are not scalar. All-gathers of at most that many from each rank
    (``in_e``) are scalar too: a loss or a metric gathered to be logged (Hugging Face Trainer's
    ``_nested_gather``, Accelerate's ``gather``), whose output holds one such value a rank however many
    ranks there are, as an all-reduce of it would be."""
    sized = ~np.isnan(full) | ~np.isnan(approx)
    small = np.where(np.isnan(full), zero_nan(approx) <= SCALAR_MAX_ELEMENTS,
                     full <= SCALAR_MAX_ELEMENTS)
    with np.errstate(invalid="ignore"):
        gathered = ops.eq("all_gather") & (in_e <= SCALAR_MAX_ELEMENTS)
    return (small & sized) | gathered


def steady_state(ops: Codes, gs: np.ndarray, dp_sizes, step_id: np.ndarray, full: np.ndarray,
                 rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First categories (codes :data:`STEP` …): ``step``, ``unexplained`` (not a data-parallel op, or a
    group other than the data-parallel ones: N, or HSDP's shard and replicate groups) and ``one_off``
    (outside the steps, or a call signature some of its rank's steps lack, but gradients in other buckets:
    :func:`_rebucketed`); and the mask of those gradient reductions kept in the step that are in the steps
    that bucket otherwise than the most."""
    sizes = [dp_sizes] if np.isscalar(dp_sizes) else list(dp_sizes)
    cat = np.full(len(gs), STEP, dtype=np.int8)
    cat[~ops.isin(list(DP_OPS) + ["barrier"])] = UNEXPLAINED
    other_group = ops.isin(DP_OPS) & ~np.isin(gs, sizes)
    cat[other_group] = UNEXPLAINED
    cat[(cat == STEP) & (step_id < 0)] = ONE_OFF
    has = step_id >= 0
    rebucketed = np.zeros(len(gs), dtype=bool)
    if has.any() and step_id[has].min() != step_id[has].max():
        # a call signature (rank, op, size, group) that some of its rank's steps lack is not steady state
        st = np.flatnonzero(cat == STEP)
        sig, n_sig = group_codes(rank[st], ops.codes[st], full[st], gs[st])
        in_steps = _distinct_per(sig, step_id[st], n_sig)[sig]
        r_inv, n_ranks = group_codes(rank)
        steps_of_rank = _distinct_per(r_inv[has], step_id[has], n_ranks)
        cat[st[in_steps != steps_of_rank[r_inv[st]]]] = ONE_OFF
        rebucketed = _rebucketed(ops, gs, step_id, full, r_inv, cat, steps_of_rank)
        cat[rebucketed] = STEP
        # of those, the calls of the steps that bucket otherwise: signatures in fewer steps than the most
        seen = np.zeros(len(gs), dtype=np.int64)
        seen[st] = in_steps
        most = np.zeros(n_ranks, dtype=np.int64)
        np.maximum.at(most, r_inv[rebucketed], seen[rebucketed])
        rebucketed &= seen < most[r_inv]
    return cat, rebucketed


def _rebucketed(ops: Codes, gs: np.ndarray, step_id: np.ndarray, full: np.ndarray, rank: np.ndarray,
                cat: np.ndarray, steps_of_rank: np.ndarray) -> np.ndarray:
    """Gradient reductions inside the steps that :func:`steady_state`'s signatures set apart, where their
    rank's reductions of that op and group size add up to the same elements in every step of the rank: the
    same gradients in other buckets. DDP all-reduces every gradient in one bucket in its first iteration
    (its first two under ``static_graph``), then rebuilds its buckets in the order the gradients became
    ready, of ``bucket_cap_mb`` each (torch/nn/parallel/distributed.py: no initial bucketing unless
    ``find_unused_parameters``; ``Reducer::rebuild_buckets``). A trace profiled from the first iteration
    holds a step of one all-reduce where the others have several, the same total. ``rank``: each call's
    rank as codes 0 … (``steps_of_rank``'s index)."""
    grad = (step_id >= 0) & ops.isin(GRADIENT_OPS) & (full > SCALAR_MAX_ELEMENTS)
    set_apart = grad & (cat == ONE_OFF)
    if not set_apart.any():
        return set_apart
    pool = np.flatnonzero(grad & ((cat == STEP) | set_apart))
    key, n_keys = group_codes(rank[pool], ops.codes[pool], gs[pool])
    pair, n_pairs = group_codes(key, step_id[pool])
    totals = group_sums(pair, n_pairs, {"e": full[pool]})["e"].to_numpy()
    pair_key = key[first_rows(pair)]
    lo, hi = group_ranges(pair_key, n_keys, totals)
    in_every = np.bincount(pair_key, minlength=n_keys) == steps_of_rank[rank[pool][first_rows(key)]]
    out = np.zeros(len(cat), dtype=bool)
    out[pool] = (in_every & (lo == hi))[key]
    return out & set_apart


def foreign_groups(group: np.ndarray, rank: np.ndarray, ops: Codes, full: np.ndarray, gs: np.ndarray,
                   cat: np.ndarray, world: int) -> np.ndarray:
    """Steady-state calls carrying data on a group other than their rank's data-parallel group of the same
    size, where the trace names each call's group (``group``: a code per call, its ranks or its name; -1
    unnamed).

    A rank's data-parallel group of a size is the one its gradient reductions move the most elements on.
    So a tensor-parallel group of the data-parallel group's size (tensor parallelism 2 × data parallelism
    2, {0, 1} beside {0, 2}), which its size alone cannot tell apart, is reported apart: its activations'
    all-reduces are not gradients. Groups of the ``world``'s size are left alone: two of them hold the
    same ranks (the default group beside a data-parallel group of every rank, as DeepSpeed makes). Nothing
    where no rank has two groups of one size.
    """
    out = np.zeros(len(cat), dtype=bool)
    dp = (cat == STEP) & ops.isin(DP_OPS) & (group >= 0) & (gs != world) & (full > SCALAR_MAX_ELEMENTS)
    if not dp.any():
        return out
    r, g = rank[dp].astype(np.int64), group[dp].astype(np.int64)
    n_groups = int(g.max()) + 1
    if (int(r.max()) + 1) * n_groups <= 1 << 24:  # one group on every rank (the usual run): nothing to do
        if np.count_nonzero(np.bincount(r * n_groups + g)) == np.count_nonzero(np.bincount(r)):
            return out
    key, _ = group_codes(rank[dp], gs[dp])  # (rank, size)
    pair, n_pair = group_codes(key, group[dp])
    if n_pair == key.max() + 1:  # one group of each size on every rank
        return out
    grad = ops.isin(GRADIENT_OPS)[dp] & (full[dp] > SCALAR_MAX_ELEMENTS)
    moved = np.bincount(pair, weights=np.where(grad, zero_nan(full[dp]), 0.0), minlength=n_pair)
    first = first_rows(pair)  # each (rank, size, group)'s first call: its (rank, size)
    chosen = np.full(key.max() + 1, -1, dtype=np.int64)
    for p_ in np.argsort(-moved, kind="stable").tolist():  # the most moved first; ties: first seen
        k = key[first[p_]]
        if chosen[k] < 0 and moved[p_] > 0:
            chosen[k] = p_
    out[np.flatnonzero(dp)] = (chosen[key] >= 0) & (pair != chosen[key])
    return out


def _distinct_per(key: np.ndarray, value: np.ndarray, n_keys: int) -> np.ndarray:
    """Distinct ``value`` per ``key`` (0 … n_keys-1)."""
    pair, _ = group_codes(key, value)
    return np.bincount(key[first_rows(pair)], minlength=n_keys)


def gradient_calls(cat: np.ndarray, ops: Codes, full: np.ndarray) -> np.ndarray:
    """Steady-state gradient reductions (all-reduce, reduce-scatter, reduce) larger than a scalar."""
    return (cat == STEP) & ops.isin(GRADIENT_OPS) & (full > SCALAR_MAX_ELEMENTS)


#: An all-reduce in a step that reduce-scatters its gradients on the all-reduce's group, of at most this share
#: of the elements the step reduce-scatters there, is a vector of norms or flags, not gradients.
NORM_MAX_SHARE = 1 / 64


def norm_vectors(cat: np.ndarray, ops: Codes, gs: np.ndarray, full: np.ndarray, rank: np.ndarray,
                 step_id: np.ndarray, small: np.ndarray) -> np.ndarray:
    """The steady-state all-reduces larger than a scalar that carry next to nothing beside the gradients
    their step reduce-scatters on the same group (:data:`NORM_MAX_SHARE`): ``clip_grad_norm_`` over
    FSDP2's sharded gradients all-reduces one partial norm per parameter tensor each step (its DTensor
    norm is a partial placement, redistributed), a few hundred elements where the step reduces billions.
    A sharded scheme reduces no gradient by all-reduce on its gather group; counted as gradients, such a
    vector would be an op no scheme has. Scalar traffic, as a 1-element norm is. An all-reduce of a shard
    the rank's reduce-scatters leave (HSDP's replicate all-reduce of each unit, on a group that may be of
    the shard group's size) is a gradient, however small beside the step. Where a step all-gathers on a
    group and reduce-scatters nothing there, its all-reduces of an all-gather's whole there stand for the
    reduce-scatters (a Flight Recorder dump over gloo records each so: ProcessGroupGloo runs it as an
    all-reduce of the whole, the size of the unit's gather), where they are all the step reduces there
    but next to nothing; each of them is a reduce-scatter, however small (DeepSpeed ZeRO-3 in buckets
    smaller than a layer reduces each parameter as it is gathered, a bias too). Otherwise the all-reduces
    are gradient buckets, however small the last (DeepSpeed ZeRO-1 and -2 all-reduce buckets of
    ``reduce_bucket_size`` and gather the updated parameters)."""
    ar = (cat == STEP) & ops.eq("all_reduce") & ~small
    rs = (cat == STEP) & ops.eq("reduce_scatter") & ~small
    ag = (cat == STEP) & ops.eq("all_gather") & ~small
    if not ar.any() or not (rs.any() or ag.any()):
        return np.zeros(len(cat), dtype=bool)
    key, k = group_codes(rank, step_id, np.nan_to_num(gs, nan=-1.0))
    scattered = np.bincount(key[rs], weights=full[rs], minlength=k)
    at, of = np.flatnonzero(ar & (scattered[key] == 0)), np.flatnonzero(ag)
    pair, _ = group_codes(np.concatenate([key[at], key[of]]), np.concatenate([full[at], full[of]]))
    whole = np.zeros(len(cat), dtype=bool)  # the reduce-scatters, recorded as all-reduces
    whole[at[np.isin(pair[:len(at)], pair[len(at):])]] = True
    alike = np.bincount(key[whole], weights=full[whole], minlength=k)
    keep = alike >= np.bincount(key[at], weights=full[at], minlength=k) * (1 - NORM_MAX_SHARE)
    whole &= keep[key]
    scattered = np.where(scattered > 0, scattered, np.where(keep, alike, 0))[key]
    norms = ar & ~whole & (scattered > 0) & (full <= scattered * NORM_MAX_SHARE)
    if norms.any():  # not a shard some reduce-scatter of the rank leaves
        at, of = np.flatnonzero(norms), np.flatnonzero(rs)
        pair, _ = group_codes(np.concatenate([rank[at], rank[of]]),
                              np.concatenate([full[at], full[of] / gs[of]]))
        norms[at[np.isin(pair[:len(at)], pair[len(at):])]] = False
    return norms


#: Element types of pickled objects on the wire (``broadcast_object_list``, ``all_gather_object``).
OBJECT_TYPES = ("uint8", "int8")


def object_calls(ops: Codes, dt: Codes) -> np.ndarray:
    """Broadcasts and all-gathers of bytes: Python objects pickled onto the wire, as a checkpoint's save plan
    (``torch.distributed.checkpoint``) or a logger's gathered values travel; no training step's data. (A
    ZeRO++ qwZ gather of int8 weights is one too, but it runs in every step, never only between them.)"""
    return ops.isin(["broadcast", "all_gather"]) & dt.isin(OBJECT_TYPES)


#: Element types no gradient is reduced in: a reduction of integers is a count, a map or a flag.
INTEGER_TYPES = ("bool", "int8", "uint8", "int16", "int32", "uint32", "int64", "uint64")


def with_non_gradients(cat: np.ndarray, ops: Codes, gs: np.ndarray, full: np.ndarray, rank: np.ndarray,
                       step_id: np.ndarray, small: np.ndarray, dt: Codes) -> tuple[np.ndarray, list[str]]:
    """``small`` with the steady-state reductions that carry no gradients among the scalars, and a sentence
    for each kind: the norm vectors of :func:`norm_vectors`, and reductions of integers (``dt``: each
    call's element type), such as the map of parameters used in the forward that DDP all-reduces every
    iteration under ``find_unused_parameters=True``, one int32 per parameter tensor."""
    notes = []
    ints = (cat == STEP) & ops.isin(GRADIENT_OPS) & ~small & dt.isin(INTEGER_TYPES)
    if ints.any():
        names = ", ".join(sorted(set(dt.present(ints))))
        notes.append(f"reductions of integers ({names}: {_sizes(full, ints)} elements) count as scalar "
                     "traffic, not gradients: counts, maps or flags (DDP's find_unused_parameters=True "
                     "all-reduces one int32 per parameter tensor each iteration)")
    norms = norm_vectors(cat, ops, gs, full, rank, step_id, small | ints)
    if norms.any():
        notes.append(f"all-reduces of {_sizes(full, norms)} elements in the steps, next to nothing beside "
                     "the gradients each step reduce-scatters on their group, count as scalar traffic, not "
                     "gradients (clip_grad_norm_ over FSDP2's sharded gradients all-reduces one norm per "
                     "parameter tensor)")
    return small | ints | norms, notes


def _sizes(full: np.ndarray, mask: np.ndarray) -> str:
    """The calls' distinct element counts, the first three."""
    sizes = sorted({int(e) for e in full[mask].tolist()})
    return ", ".join(f"{e:,}" for e in sizes[:3]) + (" …" if len(sizes) > 3 else "")


def small_traffic(cat: np.ndarray, ops: Codes, full: np.ndarray, rank: np.ndarray, step_id: np.ndarray,
                  small: np.ndarray, psi_ref: float | None) -> np.ndarray:
    """Last categories: per-step broadcasts under :data:`BUFFER_MAX_SHARE_OF_PSI` of Ψ are ``buffers``, but
    where a step's broadcasts are all scalars (``small``): a flag, not a model's buffers, whose statistics
    are vectors (Lightning broadcasts its SIGTERM flag, one int64, every batch:
    ``_TrainingEpochLoop._broadcast_sigterm_tensor``); scalar collectives and barriers are ``scalar``."""
    cat = cat.copy()
    barrier = ops.eq("barrier")
    bc = (cat == STEP) & ops.eq("broadcast")
    if bc.any() and psi_ref:
        pair, k = group_codes(rank[bc], step_id[bc])
        sums = group_sums(pair, k, {"e": full[bc], "data": (~small[bc]).astype(np.float64)})
        if float(sums["e"].max()) < BUFFER_MAX_SHARE_OF_PSI * psi_ref:
            cat[np.flatnonzero(bc)[sums["data"].to_numpy()[pair] > 0]] = BUFFERS
    cat[(cat == STEP) & (small | barrier)] = SCALAR
    cat[(cat == ONE_OFF) & barrier] = SCALAR
    return cat


def unexplained_note(cat: np.ndarray, ops: Codes, gs: np.ndarray, w: np.ndarray | None = None) -> str:
    """The sentence naming the calls no data-parallel scheme explains ("" when there are none); ``w``:
    each call's weight (a folded trace's, :mod:`.folded`)."""
    unexp = np.flatnonzero(cat == UNEXPLAINED)
    if not len(unexp):
        return ""
    kind, _ = group_codes(ops.codes[unexp], gs[unexp])
    first = first_rows(kind)
    count = np.bincount(kind) if w is None else np.bincount(kind, weights=w[unexp]).astype(np.int64)
    what = Counter()
    for i, k in zip(first.tolist(), count.tolist(), strict=True):
        c, p = ops.codes[unexp[i]], gs[unexp[i]]
        o = ops.names[c] if c >= 0 else "nan"
        what[f"{OP_NAMES.get(o, o)} on {int(p) if not np.isnan(p) else '?'} ranks"] += k
    return ("not explained by any data-parallel scheme, reported apart: "
            + ", ".join(f"{k} ×{v}" for k, v in sorted(what.items())))
