"""Measure: bytes each rank sent per step, by category, from a canonical trace table.

:func:`measure` reads as its stages: the per-call rows (:mod:`.classify`), ranks (:mod:`.ranks`), N and
the groups (:mod:`.groups`), element types and sizes (:mod:`.infer`), the ring bytes of every call
(:mod:`.accounting`), steps (:mod:`.steps`), categories and other groups (:mod:`.classify`),
micro-batches (:mod:`.micro_batches`), Ψ and the wire type, then the per-step tables and the
measured pattern (:mod:`.measured_tables`). Every stage works on compact per-call arrays
(:mod:`.columns`), never on copies of the table; the table with the measured columns
(:attr:`Measurement.calls`) is built when asked for.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from zerocalc.errors import ConfigError
from zerocalc.validate import (
    activations,
    averaging,
    classify,
    comm_hooks,
    infer,
    measured_tables,
    padding,
    recompute,
)
from zerocalc.validate.accounting import (
    OP_NAMES,
    _per_op_and_size,
    _plural,
    _world_from,
    _world_sizes,
    ring_bytes_factor,
)
from zerocalc.validate.classify import CATEGORIES, ONE_OFF, STEP, UNEXPLAINED
from zerocalc.validate.columns import (
    Codes,
    Rows,
    first_rows,
    group_codes,
    run_bounds,
    zero_nan,
)
from zerocalc.validate.folded import Unfoldable
from zerocalc.validate.groups import group_keys, infer_n
from zerocalc.validate.marked_steps import MARKERS
from zerocalc.validate.micro_batches import backward_passes, infer_micro_batches
from zerocalc.validate.optimizer_steps import optimizer_marked, spanned_by_optimizer
from zerocalc.validate.ranks import assign_ranks
from zerocalc.validate.regather import gathered_in_backward
from zerocalc.validate.steps import infer_steps


@dataclass(frozen=True)
class CallColumns:
    """The measured calls as compact columns, one entry per call, ordered by rank and time.

    ``rows`` are the calls' rows of the canonical table; ``cat`` holds category codes
    (:data:`~zerocalc.validate.classify.STEP` …, the order of :data:`CATEGORIES`); ``dtype`` the
    recorded element types with missing ones read as "?".
    """

    rows: Rows
    #: the ranks in increasing order, and each call's as an index into them
    ranks: tuple[int, ...]
    rank_idx: np.ndarray
    step_id: np.ndarray
    ops: Codes
    group_size: np.ndarray
    full_elements: np.ndarray
    elem_bytes: np.ndarray
    bytes_sent: np.ndarray
    cat: np.ndarray
    duration_s: np.ndarray
    dtype: Codes

    def frame(self) -> pd.DataFrame:
        """The canonical table's rows of these calls (index 0 … n-1, ``rank`` as assigned) plus the
        measured columns (see :attr:`Measurement.calls`)."""
        table = self.rows.table.take(self.rows.idx).reset_index(drop=True)
        return table.assign(
            rank=np.asarray(self.ranks, dtype=np.int64)[self.rank_idx], step_id=self.step_id.astype(np.int64),
            elem_bytes_used=self.elem_bytes,
            full_elements=self.full_elements, bytes_sent=self.bytes_sent,
            category=np.array(list(CATEGORIES), dtype=object)[self.cat],
            duration_used_s=np.array(self.duration_s), group_size_used=self.group_size)


@dataclass(frozen=True)
class Measurement:
    """What a trace says, per rank and per step, with how each fact was obtained.

    ``columns`` holds the calls as compact arrays (:class:`CallColumns`); :attr:`calls` is them as a
    table. ``psi_how``, ``n_how``, ``steps_how`` and ``notes`` are sentences for the user.
    """

    columns: CallColumns = field(repr=False, compare=False)
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
    #: expert parallelism: the expert-data-parallel group size the experts' gradients are reduced on, and
    #: the experts' elements each rank holds (Ψ then counts them with the dense parameters, whose
    #: gradients are reduced on N; None: no experts apart)
    expert_size: int | None = None
    expert_psi: int | None = None
    #: the gradients' own elements of the Ψ the trace reduces, its padding left out (FSDP2's, read from its
    #: reduce-scatter copy-ins: :mod:`.padding`); None where the trace does not say
    psi_own: int | None = None
    #: the elements a rank gathers a step again in a reentrant checkpoint's recompute, reported apart
    #: (:mod:`.recompute`); 0 where none
    recompute_elements: float = 0.0
    #: the elements of the step's all-gathers a rank runs a step inside a node of the backward (a trace that
    #: records the backward's nodes: :mod:`.regather`); None where the trace does not show where they ran
    gathered_in_backward: float | None = None
    #: the same of the all-gathers reported apart (a secondary copy's: :func:`~.regather.hpz_regathered`);
    #: None where there are none or the trace does not show where they ran
    apart_gathered_in_backward: float | None = None
    #: the formats of the files read (their readers' ``meta["format"]``: "kineto", "deepspeed_comms", …)
    formats: tuple[str, ...] = ()
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

    @functools.cached_property
    def calls(self) -> pd.DataFrame:
        """The canonical table's rows of the measured calls (ordered by rank and time, index 0 … n-1,
        ``rank`` as assigned) plus columns ``step_id`` (the step used, -1 outside the steps),
        ``elem_bytes_used``, ``full_elements``, ``bytes_sent``, ``category``, ``duration_used_s`` and
        ``group_size_used`` (the world size, else ``n``, where a call records none). Built on first
        use."""
        return self.columns.frame()

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
    weights: np.ndarray | None = None,
) -> Measurement:
    """Bytes each rank sent per step, by category, from a canonical trace table.

    ``psi``, ``n``, ``steps`` and ``dtype`` are the user's options (None: infer from the
    trace). Raises :class:`TraceMismatchError` for mixed world sizes, no collectives,
    or options the trace contradicts, and :class:`ConfigError` for bad option values.
    ``weights``: a folded trace's weight of each row (:mod:`.folded`): every sum and count then is
    the full trace's, or :class:`~.folded.Unfoldable` is raised.
    """
    dtype = _check_options(n=n, steps=steps, dtype=dtype)
    world = next(iter(_world_sizes(meta).values()), None)
    rows, rank, ranks, rank_idx, ranks_how, notes = _ranked_calls(table, meta)
    w = _row_weights(rows, rank_idx, weights)
    ops = rows.codes("op")
    in_e, out_e = rows.num("in_nelems"), rows.num("out_nelems")
    full = _full_elements(ops, in_e, out_e)
    act, avg, gs, groups = _groups(rows, rank, ops, full, world, n, w, meta)
    n, n_how = groups.n, groups.how
    dt = rows.codes("dtype")
    full, approx, eb, small, sent, more = _sizes(rows, rank_idx, ops, full, gs, dt, dtype, w, in_e)
    notes += more

    step_id, steps_how, marked, per_optimizer, more = _steps(rows, meta, steps, rank, ops, in_e, out_e, gs,
                                                             small, w, sent, dt)
    del in_e, out_e, rank  # the rank index serves from here on
    notes += more
    cat, more, regathered = _first_categories(rows, ops, gs, groups, step_id, full, rank_idx,
                                              world if world is not None else len(ranks), w, act, avg)
    notes += more
    small, more = classify.with_non_gradients(cat, ops, gs, full, rank_idx, step_id, small, dt)
    notes += more
    mb, cat, grad, (psi_trace, psi, psi_how, expert_psi, psi_own), more = _micro_batches_and_psi(
        rows, ops, gs, groups, full, cat, small, rank_idx, step_id, micro_batches, psi, w,
        (meta, marked, per_optimizer[0] if per_optimizer else None))
    notes += more
    del small
    dt = dt.filled("?")
    comm_dtype, comm_eb, full, eb, sides, more = _wire_dtypes(dt, ops, cat, grad, full, eb, sent, approx,
                                                              dtype, w)
    notes += more
    del approx, grad

    cols = CallColumns(rows=rows, ranks=ranks, rank_idx=rank_idx, step_id=step_id, ops=ops, group_size=gs,
                       full_elements=full, elem_bytes=eb, bytes_sent=sent, cat=cat, dtype=dt,
                       duration_s=rows.num("duration_s"))
    regathered &= cat == UNEXPLAINED  # the recompute's gathers reported apart (:mod:`.recompute`)
    n_steps, per_step, categories, unexplained, pattern, variants, pattern_groups = measured_tables.summarise(
        cols, cat, ops, gs, rank_idx, ranks, step_id, w, noted=regathered)
    if unexplained:
        notes.append(unexplained)
    return Measurement(
        columns=cols, psi=int(psi), psi_how=psi_how, psi_trace=psi_trace, n=int(n), n_how=n_how,
        steps=n_steps, steps_how=steps_how, ranks=ranks, comm_elem_bytes=float(comm_eb),
        comm_dtype=str(comm_dtype), notes=tuple(notes), per_step=per_step, categories=categories,
        pattern=pattern, order_variants=variants, ranks_how=ranks_how, world_size=world,
        dp_group_sizes=tuple(sorted(groups.sizes)), shard_size=groups.shard, expert_size=groups.expert,
        expert_psi=expert_psi, psi_own=psi_own,
        recompute_elements=recompute.per_rank_step(full, regathered, rank_idx, step_id, w)[1],
        gathered_in_backward=gathered_in_backward(rows, cat, ops, step_id, full, w, meta,
                                                  len(ranks) * n_steps),
        apart_gathered_in_backward=gathered_in_backward(rows, cat, ops, step_id, full, w, meta,
                                                        len(ranks) * n_steps, UNEXPLAINED),
        formats=tuple(sorted({str(v["format"]) for v in (meta or {}).values()
                              if isinstance(v, dict) and v.get("format")})),
        micro_batches=mb.k, micro_batches_how=mb.how, grad_sync=mb.grad_sync, grad_sync_how=mb.grad_sync_how,
        param_dtype=sides[0], param_elem_bytes=sides[1], grad_dtype=sides[2], grad_elem_bytes=sides[3],
        pattern_groups=pattern_groups,
    )


def _groups(rows: Rows, rank: np.ndarray, ops: Codes, full: np.ndarray, world: int | None, n: int | None,
            w: np.ndarray | None, meta: dict | None):
    """The activations' calls (:mod:`.activations`; refused where they are all the trace has) and parameter
    averaging's (:mod:`.averaging`), then each call's group size and N (:func:`~.groups.infer_n`, both kinds
    left out of the gradients it reads N from)."""
    act = activations.masks(rows, ops, full, rank)
    activations.refuse_activations_alone(rows, ops, full, act, w)
    avg = averaging.calls(rows, ops, full, rank, w)
    gs, groups = infer_n(rows, rank, ops, full, world, n, w, _world_from(meta), act.all | avg,
                         averaging.recorded_group(rows, avg, world))
    return act, avg, gs, groups


def _sizes(rows: Rows, rank_idx: np.ndarray, ops: Codes, full: np.ndarray, gs: np.ndarray, dt: Codes,
           dtype: str | None, w: np.ndarray | None, in_e: np.ndarray):
    """Each call's element bytes (:func:`~.infer.fill_elem_types`), its elements where the trace records
    bytes alone (:func:`~.infer.approximate_sizes`, with which are approximate), whether it is a scalar's,
    and the bytes it sends (ring accounting), with the notes."""
    eb, notes = infer.fill_elem_types(rows, rank_idx, ops, full, dt, dtype, w)
    full, approx, eb, more = infer.approximate_sizes(rows, ops, full, gs, eb, w, dtype)
    small = classify.scalar_calls(full, approx, ops, in_e)
    full, eb, sent = _bytes_sent(ops, gs, full, eb, approx)
    return full, approx, eb, small, sent, notes + more


def _steps(rows: Rows, meta: dict | None, steps: int | None, rank: np.ndarray, ops: Codes, in_e: np.ndarray,
           out_e: np.ndarray, gs: np.ndarray, small: np.ndarray, w: np.ndarray | None, sent: np.ndarray,
           dt: Codes):
    """Each call's step and how the steps were found (:func:`~.steps.infer_steps` on the marked steps
    :func:`~.optimizer_steps.optimizer_marked` gives, or on the steps the optimizer's annotations mark in a
    trace without ProfilerStep, said so), with those marked steps, K where they mark micro-batches, and the
    notes."""
    marked = rows.num("step") if rows.has("step") else None
    per_optimizer, notes = None, []
    if marked is not None and rows.has("file"):
        marked, per_optimizer, notes = optimizer_marked(marked, rows.codes("file"), meta, steps)
    step_id, how, more = infer_steps(marked, rank, ops, in_e, out_e, gs, small, steps, w, sent,
                                     classify.object_calls(ops, dt), per_optimizer)
    if spanned_by_optimizer(meta):
        how = how.replace(MARKERS, "from the optimizer's steps (the trace marks no ProfilerStep: a step runs "
                                   "from one Optimizer.step# annotation's end to the next's)", 1)
    return step_id, how, marked, per_optimizer, notes + more


def _micro_batches_and_psi(rows: Rows, ops: Codes, gs: np.ndarray, groups, full: np.ndarray, cat: np.ndarray,
                           small: np.ndarray, rank_idx: np.ndarray, step_id: np.ndarray, k: int | None,
                           psi: int | None, w: np.ndarray | None,
                           marks: tuple[dict | None, np.ndarray | None, int | None]):
    """The micro-batches (:func:`_micro_batches`), then Ψ as the gradient reductions show it, per reduction
    where they run in every micro-batch (:func:`_psi_in_trace`), with the small traffic beside it set apart
    (:func:`~.classify.small_traffic`), and Ψ used (``--psi`` checked, else the trace's: :func:`_psi`).
    Returns the micro-batches, the categories, the gradient reductions, (Ψ of the trace, Ψ used, how,
    the experts' Ψ, the gradients' own elements of Ψ without FSDP2's padding: :mod:`.padding`) and the
    notes."""
    grad = classify.gradient_calls(cat, ops, full) & ~small
    mb = _micro_batches(rows, ops, gs, full, cat, grad, small, rank_idx, step_id, k, w, marks)
    syncs = mb.k if mb.grad_sync == "every" else 1
    dense_psi, expert_psi, notes = _psi_in_trace(grad, gs, groups, ops, full, rank_idx, step_id, syncs, w)
    files = rows.codes("file") if rows.has("file") else None
    own = None if dense_psi is None or expert_psi is not None else padding.psi_without_padding(
        marks[0], files, grad, ops, full, rank_idx, step_id, syncs, groups.shard is not None, w)
    hook = None if expert_psi is not None else comm_hooks.compressed(marks[0], files, grad, full, dense_psi,
                                                                      w)
    cat = classify.small_traffic(cat, ops, full, rank_idx, step_id, small,
                                 dense_psi if dense_psi is not None else psi)
    data_ops = ops.isin(list(OP_NAMES))
    scalars_only = infer._count(data_ops, w) if data_ops.any() and small[data_ops].all() else 0
    grad = classify.gradient_calls(cat, ops, full)
    reductions, outside = ops.isin(classify.GRADIENT_OPS) & ~small, cat == ONE_OFF
    no_elements = reductions & (full == 0)
    in_bytes = (~np.isnan(rows.num("msg_size_bytes")) if rows.has("msg_size_bytes")
                else np.zeros(len(full), dtype=bool))
    unsized = (cat == STEP) & no_elements
    unread = infer.Unread(scalars_only, infer._count(unsized, w), _by_op(reductions & outside, ops, w),
                          infer._count(no_elements & outside & in_bytes, w),
                          infer._count(unsized & ~in_bytes, w))
    if hooked := comm_hooks.priced(hook, psi, dense_psi, syncs, groups.n):
        (psi, psi_how, note), psi_trace = hooked, dense_psi  # Ψ is what DDP hands the hook
        notes.append(note)
    else:
        psi_trace, psi, psi_how = _psi(psi, dense_psi, expert_psi, groups, grad, ops, syncs, unread, own)
    if own is not None:
        psi_how += padding.padding_sentence(psi_trace, own, groups.shard or groups.n,
                                            padding.pads_fsdp1(marks[0], files))
    return mb, cat, grad, (psi_trace, psi, psi_how, expert_psi, own), notes


def _wire_dtypes(dt: Codes, ops: Codes, cat: np.ndarray, grad: np.ndarray, full: np.ndarray, eb: np.ndarray,
                 sent: np.ndarray, approx: np.ndarray, dtype: str | None, w: np.ndarray | None):
    """The element type on the wire (:func:`~.infer.wire_dtype`: the step's, or ``--dtype``), the full
    elements and element bytes it settles, and the parameter and gradient sides' types
    (:func:`~.infer.side_dtypes`), with the notes."""
    step = cat == STEP
    comm_dtype, comm_eb, full, eb, notes = infer.wire_dtype(dt, step, grad, full, eb, sent, approx, dtype, w)
    sides = infer.side_dtypes(dt, ops, step, classify.gradient_calls(cat, ops, full), full, eb,
                              (comm_dtype, comm_eb), w)
    return comm_dtype, comm_eb, full, eb, sides, notes


def _micro_batches(rows: Rows, ops: Codes, gs: np.ndarray, full: np.ndarray, cat: np.ndarray,
                   grad: np.ndarray, small: np.ndarray, rank_idx: np.ndarray, step_id: np.ndarray,
                   k: int | None, w: np.ndarray | None,
                   marks: tuple[dict | None, np.ndarray | None, int | None]):
    """:func:`~.micro_batches.infer_micro_batches` on the steady-state calls inside the steps (none where
    they are scalars alone, which repeat nothing of a step), the calls reported apart and those that carry
    no data (``small``) told to it, the steps marked or not as the trace's rows say, and the backward passes
    the traces count in those steps (:func:`~.micro_batches.backward_passes`)."""
    in_steps = (cat == STEP) & (step_id >= 0)
    if not (in_steps & ~small).any():
        in_steps = np.zeros_like(in_steps)
    meta, profiler_step, span = marks
    marked = profiler_step is not None and bool((~np.isnan(profiler_step)).any())
    backwards = backward_passes(rows.codes("file"), profiler_step, meta, rank_idx, step_id,
                                (cat == STEP) & (step_id >= 0), span) if marked and rows.has("file") else None
    return infer_micro_batches(ops, gs, full, in_steps, grad, rank_idx, step_id, k, marked=marked, w=w,
                               apart=cat == UNEXPLAINED, small=small, backwards=backwards)


def _psi_in_trace(grad: np.ndarray, gs: np.ndarray, groups, ops: Codes, full: np.ndarray,
                  rank_idx: np.ndarray, step_id: np.ndarray, syncs: int, w: np.ndarray | None):
    """Ψ as the gradient collectives ``grad`` show it (:func:`~.infer.psi_in_trace`): the dense parameters'
    and, under expert parallelism (``groups.expert``), the experts' apart, reduced on their own group
    (None where there are none); with the notes."""
    expert_psi, notes = None, []
    if groups.expert is not None:
        on_expert = gs == groups.expert
        expert_psi, more = infer.psi_in_trace(grad & on_expert, ops, full, rank_idx, step_id, syncs=syncs,
                                              w=w)
        notes += [f"experts: {t}" for t in more]
        grad = grad & ~on_expert
    dense_psi, more = infer.psi_in_trace(grad, ops, full, rank_idx, step_id, syncs=syncs,
                                         shard_only=groups.shard is not None, w=w)
    return dense_psi, expert_psi, notes + more


def _by_op(mask: np.ndarray, ops: Codes, w: np.ndarray | None) -> dict[str, int]:
    """The calls of ``mask`` counted by op ({"reduce-scatter": 1}), in the ops' order."""
    return {OP_NAMES[o]: n for o in ops.present(mask) if (n := infer._count(mask & ops.eq(o), w))}


def _psi(psi: int | None, dense_psi: int | None, expert_psi: int | None, groups, grad: np.ndarray, ops: Codes,
         syncs: int, unread: infer.Unread = infer.NOTHING_UNREAD,
         own: int | None = None) -> tuple[int | None, int, str]:
    """Ψ the trace shows (each rank's parameters: the dense ones and, under expert parallelism, the rank's
    experts), Ψ used (``--psi``, checked against it, else it; :func:`~.infer.infer_psi`) and how."""
    psi_trace = dense_psi
    if expert_psi is not None and psi_trace is not None:
        psi_trace += expert_psi
    parts = "" if expert_psi is None or psi_trace is None else (
        f" ({psi_trace - expert_psi:,} of dense parameters and {expert_psi:,} of the rank's experts: give "
        "each rank's parameters, dense and experts)")
    psi, psi_how = infer.infer_psi(psi, psi_trace, grad, ops, syncs, shard_only=groups.shard is not None,
                                   parts=parts, unread=unread, own=own)
    if expert_psi is not None:
        psi_how += (f": {psi - expert_psi:,} of dense parameters, their gradients reduced on groups of "
                    f"{groups.n}, and {expert_psi:,} of the rank's experts, on groups of {groups.expert}")
    return psi_trace, psi, psi_how


def _ranked_calls(table: pd.DataFrame, meta: dict | None):
    """The collective calls of ``table`` ordered by rank: the rows, each call's rank, the ranks, each
    call's index among them, how the ranks were found, and the notes so far."""
    rows, notes = classify.select_calls(table, meta)
    rows, rank, ranks_how, windows = assign_ranks(rows)
    notes += [t for t in (ranks_how, windows) if t]
    bounds = run_bounds(rank)  # the calls are ordered by rank: each rank's as 0, 1, … in rank order
    ranks = tuple(rank[bounds[:-1]].tolist())
    rank_idx = np.repeat(np.arange(len(ranks), dtype=np.int32), np.diff(bounds))
    return rows, rank, ranks, rank_idx, ranks_how, notes


def _row_weights(rows: Rows, rank_idx: np.ndarray, weights: np.ndarray | None) -> np.ndarray | None:
    """The weight of each call (in the calls' order) of a folded trace, None for a full one; each rank's
    calls must come from one process (the fold is per process)."""
    if weights is None:
        return None
    if rows.has("host") and rows.has("pid"):
        _, k = group_codes(rank_idx, rows.values("host"), rows.values("pid"))
        if k != len(np.unique(rank_idx)):
            raise Unfoldable("a rank's calls come from several processes")
    return np.asarray(weights, dtype=np.int64)[rows.idx]


def _bytes_sent(ops: Codes, gs: np.ndarray, full: np.ndarray, eb: np.ndarray, approx: np.ndarray):
    """Elements and element bytes with unknowns as 0, and the bytes each call sent (its full
    vector's bytes, or the approximate size, times the ring's factor for its op and group)."""
    sent = np.where(np.isnan(full), approx, full * eb)  # the full vector's bytes
    full, eb = zero_nan(full, inplace=True), zero_nan(eb)
    sent = _per_op_and_size(lambda o, p: ring_bytes_factor(o, p) if o in OP_NAMES else 0.0,
                            ops, zero_nan(gs, 1.0)) * zero_nan(sent, inplace=True)
    return full, eb, sent


def _first_categories(rows: Rows, ops: Codes, gs: np.ndarray, groups, step_id: np.ndarray, full: np.ndarray,
                      rank_idx: np.ndarray, everyone: int,
                      w: np.ndarray | None, act: activations.Masks,
                      avg: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Steady state, one-off and unexplained (:func:`~.classify.steady_state`), and the calls on a rank's
    other groups of its data-parallel size unexplained too (:func:`~.classify.foreign_groups`; not under
    HSDP, whose shard and replicate groups may be of one size: there the all-reduces the groups found on
    another group of the replicate size, ``groups.apart``), and so are the activations' calls of a forward
    pass and outside it (``act``: :mod:`.activations`), and parameter averaging's all-reduces (``avg``:
    :mod:`.averaging`), and the all-gathers a reentrant checkpoint's recompute adds (:mod:`.recompute`).
    ``everyone``: the world's size. With a note where gradients reduced in other buckets in some step were
    kept in the step, on the activations' calls, on the recompute's and on the averaging; and the mask of the
    recompute's gathers (their note names them: the note on unexplained calls leaves them out)."""
    cat, rebucketed = classify.steady_state(ops, gs, groups.sizes, step_id, full, rank_idx)
    notes = []
    fwd, keys = act.fwd, act.keys
    kept = cat != ONE_OFF
    for mask, note in ((fwd, activations.activations_note(rows, ops, full, fwd & kept, w)),
                       (act.mirrored, activations.mirrored_note(rows, ops, full, act.mirrored & kept, w)),
                       (act.grouped, activations.grouped_note(ops, full, act.grouped & kept, w))):
        if note:
            notes.append(note)
            cat[mask & (cat == STEP)] = UNEXPLAINED
    regathered = recompute.extra_gathers(rows, ops, full, gs, rank_idx, step_id) & kept
    if note := recompute.note(rows, full, regathered, rank_idx, step_id, w):
        notes.append(note)
        cat[regathered & (cat == STEP)] = UNEXPLAINED
    if rebucketed.any():
        pair, _ = group_codes(rank_idx[rebucketed], step_id[rebucketed])
        k = int(np.bincount(rank_idx[rebucketed][first_rows(pair)]).max())
        notes.append(f"on each rank {_plural(k, 'step')} reduce{'s' if k == 1 else ''} the gradients in "
                     "other buckets than the other steps (calls of other sizes, the same elements), as DDP "
                     "all-reduces every gradient in one bucket until it rebuilds its buckets (in its first "
                     "iteration; its first two under static_graph): counted in the step")
    if groups.apart is not None:
        cat[groups.apart & (cat == STEP)] = UNEXPLAINED
    if keys is None and groups.shard is None:
        keys = group_keys(rows)
    if groups.shard is None:
        foreign = classify.foreign_groups(keys, rank_idx, ops, full, gs, cat, everyone)
        cat[foreign] = UNEXPLAINED
    if fwd.any():
        grad = classify.gradient_calls(cat, ops, full)
        if note := activations.same_group_note(keys, gs, fwd, grad):
            notes.append(note)
    if note := averaging.note(avg & (cat != ONE_OFF), full, gs, rank_idx, step_id, groups.n, w):
        notes.append(note)
        cat[avg & (cat == STEP)] = UNEXPLAINED  # those on a group of the data-parallel size too
    return cat, notes, regathered


def _full_elements(ops: Codes, in_e: np.ndarray, out_e: np.ndarray) -> np.ndarray:
    """:func:`~zerocalc.validate.accounting.full_vector_elements` on op codes."""
    full = np.where(np.isnan(out_e), in_e, np.fmax(in_e, out_e))
    full = np.where(ops.isin(["all_to_all", "send"]), in_e, full)
    full[ops.isin(["recv", "barrier", "other"])] = 0.0
    return full


def _check_options(*, n: int | None, steps: int | None, dtype: str | None) -> str | None:
    """Refuse non-positive ``--steps``/``--n``; the canonical name of ``--dtype``."""
    from zerocalc.dtypes import canonical_dtype

    if steps is not None and steps < 1:
        raise ConfigError(f"must be a positive integer, got {steps}", option="--steps")
    if n is not None and n < 1:
        raise ConfigError(f"must be a positive integer, got {n}", option="--n")
    return canonical_dtype(dtype) if dtype is not None else None
