"""Infer: what the trace leaves implicit: element types, sizes, Ψ and the element type on the wire, each
with a sentence saying how it was found (N and the groups: :mod:`.groups`; ranks: :mod:`.ranks`; steps:
:mod:`.steps`; micro-batches: :mod:`.micro_batches`).

Each function takes the calls ordered by rank and time (:func:`~zerocalc.validate.ranks.assign_ranks`)
as numpy columns (ops and element types as :class:`~zerocalc.validate.columns.Codes`), and the user's
option where there is one (None: infer it). Sources: §7 (HSDP, element types per side) and the trace
formats of §5.
"""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

import numpy as np

from zerocalc.errors import TraceMismatchError
from zerocalc.validate.accounting import _OP_VERBS, OP_NAMES, RTOL, _plural, full_from_message
from zerocalc.validate.columns import Codes, Rows, first_rows, group_codes, group_sums, zero_nan
from zerocalc.validate.folded import weighted, weighted_median


def _w(values: np.ndarray, w: np.ndarray | None, at: np.ndarray) -> np.ndarray:
    """``values`` (the calls ``at``) times their weights (:func:`.folded.weighted`)."""
    return values if w is None else weighted(values, w[at])


def _count(mask: np.ndarray, w: np.ndarray | None) -> int:
    """The calls ``mask`` marks, each counted by its weight."""
    return int(mask.sum()) if w is None else int(w[mask].sum())

def fill_elem_types(rows: Rows, rank: np.ndarray, ops: Codes, full: np.ndarray, dt: Codes,
                    dtype: str | None, w: np.ndarray | None = None) -> tuple[np.ndarray, list[str]]:
    """Bytes per element of every call: recorded, else ``--dtype``, else the type carrying the most
    bytes among the same rank's calls of the same step (else of the whole trace), said in notes.
    ``dt``: the recorded element types; ``w``: each call's weight (:mod:`.folded`; None: 1)."""
    from zerocalc.dtypes import DTYPE_BYTES

    notes: list[str] = []
    data_ops = ops.isin(_OP_VERBS)
    eb = rows.num("elem_bytes")
    missing = np.isnan(eb) & data_ops & (full > 0)
    if not missing.any():
        return eb, notes
    if dtype is not None:
        notes.append(f"element type of {_count(missing, w)} call(s) not recorded: {dtype} from --dtype")
        return np.where(missing, DTYPE_BYTES[dtype], eb), notes
    known = ~np.isnan(eb) & data_ops
    if not known.any():
        raise TraceMismatchError(
            f"the trace records no element type for its {_count(missing, w)} collective(s): give --dtype"
        )
    step = rows.num("step")
    fill = eb.copy()
    how = Counter()
    miss, kn = np.flatnonzero(missing), np.flatnonzero(known)
    weight = _w(zero_nan(full[kn]) * eb[kn], w, kn)
    key, _ = group_codes(rank[miss], step[miss])  # one choice per (rank, step) of the missing calls
    for j in first_rows(key).tolist():
        same = rank[kn] == rank[miss[j]]
        if not np.isnan(step[miss[j]]):
            same &= step[kn] == step[miss[j]]
        pool, pw = (kn[same], weight[same]) if same.any() else (kn, weight)
        kind, _ = group_codes(dt.codes[pool], eb[pool])  # (type, bytes) in order of first appearance
        best = pool[np.argmax(kind == int(np.argmax(np.bincount(kind, weights=pw))))]
        name = dt.names[dt.codes[best]] if dt.codes[best] >= 0 else ""
        these = miss[key == key[j]]
        fill[these] = eb[best]
        where = "the same step" if same.any() else "the rest of the trace"
        these_ops = ops.take(these)
        for o in these_ops.present():
            how[(o, name, where)] += _count(these_ops.eq(o), None if w is None else w[these])
    for (o, name, where), cnt in sorted(how.items()):
        notes.append(
            f"element type of {cnt} {OP_NAMES[o]} call(s) not recorded in the trace: "
            f"taken as {name} ({int(DTYPE_BYTES.get(name, 0)) or '?'} B) from {where}"
        )
    return fill, notes


def approximate_sizes(rows: Rows, ops: Codes, full: np.ndarray, gs: np.ndarray,
                      eb: np.ndarray, w: np.ndarray | None = None, dtype: str | None = None
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Full elements and approximate bytes of calls that record only a message size, with notes.

    DeepSpeed's comms logger gives no elements, only the tensor argument's size in 1024-based units
    rounded to 2 decimals (``msg_size_bytes``; traces/deepspeed_comms.py): the call's bytes,
    approximately. all_gather_into_tensor's argument is the shard (full vector = shard × p). With
    ``--dtype`` (``dtype``) those bytes are elements of that type, approximately, from here on: Ψ, the
    steps and the micro-batches are read from them as from a trace that records elements.
    Returns (full elements, approximate full bytes or NaN, bytes per element, notes). ``w``: each call's
    weight (:mod:`.folded`; None: 1).
    """
    data_ops = ops.isin(_OP_VERBS)
    full, approx, eb, notes = _sized_in_bytes(rows, ops, data_ops, full, gs, eb, w, dtype)
    nosize = data_ops & np.isnan(full) & np.isnan(approx)
    if nosize.any() and nosize[data_ops].all():
        raise TraceMismatchError(
            f"none of the trace's {_plural(_count(nosize, w), 'collective call')} records its size, so there "
            "is nothing to measure (the PyTorch profiler records sizes only with record_shapes=True: "
            "profile(..., record_shapes=True))")
    if nosize.any():
        notes.append(f"{_plural(_count(nosize, w), 'call')} record no size: counted as 0 bytes "
                     "(not as scalar collectives)")
    return full, approx, eb, notes


def _sized_in_bytes(rows: Rows, ops: Codes, data_ops: np.ndarray, full: np.ndarray, gs: np.ndarray,
                    eb: np.ndarray, w: np.ndarray | None, dtype: str | None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """:func:`approximate_sizes` of the calls ``data_ops`` that record a message size alone: their full
    bytes (NaN elsewhere), and their elements and bytes per element where ``--dtype`` (``dtype``) or the
    call gives its type, with the note."""
    from zerocalc.dtypes import DTYPE_BYTES

    approx = np.broadcast_to(np.float64(np.nan), (len(rows),))  # read-only, no memory per call
    if not rows.has("msg_size_bytes"):
        return full, approx, eb, []
    approx = np.full(len(rows), np.nan)
    msg = rows.num("msg_size_bytes")
    use = data_ops & np.isnan(full) & ~np.isnan(msg)
    approx[use] = full_from_message(ops.eq("all_gather")[use], msg[use], gs[use])
    if not use.any():
        return full, approx, eb, []
    typed = dtype is not None and not (eb[use] > 0).any()
    note = (f"{_plural(_count(use, w), 'call')} record only an approximate message size (DeepSpeed's comms "
            "logger: 1024-based units rounded to 2 decimals): its bytes are used, approximately, and "
            + (f"read as elements of {dtype} (from --dtype)" if typed else
               "give no element count (give --dtype, the type they carry, to read Ψ, the steps and the "
               "micro-batches from them)"))
    if typed:
        eb = np.where(use, float(DTYPE_BYTES[dtype]), eb)
    with np.errstate(invalid="ignore"):
        full = np.where(use & (eb > 0), approx / eb, full)
    return full, approx, eb, [note]


def psi_in_trace(grad: np.ndarray, ops: Codes, full: np.ndarray, rank: np.ndarray,
                 step_id: np.ndarray, *, syncs: int = 1,
                 shard_only: bool = False, w: np.ndarray | None = None) -> tuple[int | None, list[str]]:
    """Ψ as the trace sees it: the element total of one step's gradient collective(s) (``grad``; median
    over ranks and steps; None without one) ÷ the gradient reductions per step (``syncs``: K when they
    run in every micro-batch), and a note when it varies. Under HSDP (``shard_only``) the replicate
    all-reduce of the shards is left out: it reduces Ψ/H more elements of the same gradients. ``w``:
    each call's weight (:mod:`.folded`; a pair's calls share one)."""
    if shard_only:
        grad = grad & ops.eq("reduce_scatter")
    if not grad.any():
        return None, []
    pair, k = group_codes(rank[grad], step_id[grad])
    tot = group_sums(pair, k, {"e": full[grad]})["e"] / syncs
    notes = []
    if tot.min() != tot.max():
        notes.append(f"gradient elements per step vary between {int(tot.min()):,} and {int(tot.max()):,}")
    pair_w = None if w is None else w[grad][first_rows(pair)]
    return int(round(weighted_median(tot.to_numpy(), pair_w))), notes


class Unread(NamedTuple):
    """Why a trace shows no Ψ, for the error where it has none to give (each 0 where not so)."""

    #: the trace's collectives, where every one is a scalar
    scalars_only: int = 0
    #: the reductions in its steps that record no element count (bytes alone)
    unsized: int = 0
    #: the reductions outside its steps (one-off), by op ({"reduce-scatter": 1}), and how many of them record
    #: bytes alone
    outside: dict[str, int] | None = None
    outside_unsized: int = 0
    #: of ``unsized``, those that record no bytes either (a profiler trace's ``TensorList`` argument)
    sizeless: int = 0


#: A trace that says nothing of why it shows no Ψ.
NOTHING_UNREAD = Unread()


def infer_psi(psi: int | None, psi_trace: int | None, grad: np.ndarray, ops: Codes, syncs: int = 1,
              shard_only: bool = False, parts: str = "", unread: Unread = NOTHING_UNREAD,
              own: int | None = None) -> tuple[int, str]:
    """Ψ: ``--psi`` (checked against the trace: :func:`_given`) or the trace's (read from the gradient
    collectives ``grad``), and how; ``parts``: what the trace's Ψ is made of, for the error; ``unread``: why
    the trace shows none (:class:`Unread`), for the error; ``own``: the gradients' own elements of the
    trace's Ψ where its calls carry padding (:mod:`.padding`)."""
    if psi is not None:
        return _given(psi, psi_trace, own, syncs, parts)
    if psi_trace is None:
        raise _unread(unread)
    if shard_only:
        grad = grad & ops.eq("reduce_scatter")
    per = "one step's" if syncs == 1 else f"one of the step's {syncs} gradient reductions:"
    return psi_trace, (f"Ψ = {psi_trace:,}: inferred from the trace (elements of {per} gradient "
                       f"{'/'.join(sorted({OP_NAMES[o] for o in ops.present(grad)}))} calls)")


def _unread(unread: Unread) -> TraceMismatchError:
    """The refusal of a trace that shows no Ψ, naming why (:class:`Unread`) and what reads it."""
    if unread.scalars_only:
        from zerocalc.validate.classify import SCALAR_MAX_ELEMENTS

        return TraceMismatchError(
            f"the trace has no gradient collective: its {unread.scalars_only:,} collective(s) are all "
            f"scalars of at most {SCALAR_MAX_ELEMENTS} elements (losses, metrics), as an evaluation or "
            "inference run sends them, so there is no training step to check")
    if unread.sizeless:
        return TraceMismatchError(
            f"the trace's {unread.sizeless:,} reduction(s) in its steps record no size, neither elements nor "
            "bytes: give --psi")
    if unread.unsized:
        return TraceMismatchError(
            f"the trace's {unread.unsized:,} reduction(s) in its steps record no element count, only bytes "
            "(a DeepSpeed comms log's sizes): give --dtype, the type they carry, to read Ψ from them, "
            "or --psi")
    if unread.outside:
        one = sum(unread.outside.values()) == 1
        return TraceMismatchError(
            f"the trace has no gradient collective in its steps to infer Ψ from: its "
            f"{_listed(unread.outside)} {'falls' if one else 'fall'} outside the steps found (an "
            "excerpt, or a trace of one step that repeats nothing): give --steps K, the optimizer steps "
            "it holds (--steps 1 reads it whole as one), or --psi"
            + (f"; {'it records' if one else 'they record'} bytes alone (a DeepSpeed comms log's sizes): "
               f"--dtype, the type carried, reads Ψ from {'it' if one else 'them'}"
               if unread.outside_unsized else ""))
    return TraceMismatchError("the trace has no gradient collective (all-reduce, reduce-scatter or reduce) "
                              "to infer Ψ from: give --psi")


def _given(psi: int, psi_trace: int | None, own: int | None, syncs: int, parts: str) -> tuple[int, str]:
    """``--psi`` checked against the trace: within :data:`RTOL` of the Ψ its gradient collectives reduce, or
    of the gradients' own count in it (``own``, where its calls carry padding), else refused; taken as the
    own count where it is that alone, the schemes then priced with what the calls carry."""
    per = "step" if syncs == 1 else "gradient reduction"
    off_trace = psi_trace is not None and abs(psi_trace - psi) > RTOL * psi
    if off_trace and (own is None or abs(own - psi) > RTOL * psi):
        fewer = ("; fewer than --psi: frozen parameters send no gradient (a frozen backbone, LoRA's base "
                 "weights: give the trained parameters' count, or leave --psi out), and a compressing "
                 "comm hook (PowerSGD's low-rank factors) reduces fewer elements than it trains"
                 if psi_trace < psi else "")
        padded = "" if own is None or own == psi_trace else (
            f" ({own:,} of them the gradients' own, the rest FSDP2's padding)")
        raise TraceMismatchError(f"--psi {psi:,} contradicts the trace: its gradient collectives reduce "
                                 f"{psi_trace:,} elements per {per}{parts}{padded}{fewer}")
    if off_trace:  # the gradients' own count, off what the calls carry: priced as they carry it
        return psi_trace, (f"Ψ = {psi_trace:,}: what the trace's gradient collectives reduce per {per}, "
                           f"and the schemes are priced with (--psi {psi:,} is the gradients' own count in "
                           "it)")
    return psi, f"Ψ = {psi:,}: from --psi" + (
        f" (the trace's gradient collectives reduce {psi_trace:,} elements per {per})"
        if psi_trace is not None else " (the trace has no gradient collective to confirm it)")


def _listed(calls: dict[str, int]) -> str:
    """``{"reduce-scatter": 1, "all-reduce": 2}`` as "1 reduce-scatter and 2 all-reduces"."""
    parts = [f"{n:,} {op}{'s' if n != 1 else ''}" for op, n in calls.items()]
    return ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1]


def _heaviest_type(dt: Codes, use: np.ndarray, eb: np.ndarray,
                   weight: np.ndarray, w: np.ndarray | None = None) -> tuple[str, float] | None:
    """The (element type, bytes per element) carrying the most ``weight`` among the calls ``use``
    (ties: the one seen first); None when there are none."""
    rows = np.flatnonzero(use)
    if not len(rows):
        return None
    kind, k = group_codes(dt.codes[rows], eb[rows])  # numbered in order of first appearance
    sums = group_sums(kind, k, {"w": _w(weight[rows], w, rows)})["w"].to_numpy()
    first = rows[np.argmax(kind == int(np.argmax(sums)))]  # the first of the heaviest
    return dt.names[dt.codes[first]], eb[first]


def wire_dtype(dt: Codes, stepmask: np.ndarray, gradmask: np.ndarray, full: np.ndarray, eb: np.ndarray,
               sent: np.ndarray, approx: np.ndarray, dtype: str | None, w: np.ndarray | None = None):
    """The step traffic's dominant element type on the wire (bytes sent), and the calls sized in bytes
    only expressed in elements of it.

    The gradient collectives' dominant type, else the whole step's: a rank that runs something else
    (a desynchronised all-gather of bytes) does not set the wire type of the gradients. ``dt``: the
    element types (missing read as "?"); ``stepmask``, ``gradmask``: the step calls and the gradient
    reductions among them. Returns
    (dtype name, bytes per element, full elements, bytes per element of each call, notes).
    """
    from zerocalc.dtypes import DTYPE_BYTES

    notes: list[str] = []
    basis = gradmask if gradmask.any() else stepmask
    typed = basis & (eb > 0)  # calls with a size in bytes only have no element type
    heaviest = _heaviest_type(dt, typed, eb, sent, w)
    if heaviest is not None:
        comm_dtype, comm_eb = heaviest
    else:
        comm_dtype, comm_eb = (dtype or "fp32"), float(DTYPE_BYTES[dtype or "fp32"])
        notes.append(f"no step traffic: the model is evaluated with {comm_dtype} on the wire"
                     if not basis.any() else
                     f"the step traffic records no element type: the model is evaluated with "
                     f"{comm_dtype} on the wire ({'from --dtype' if dtype else 'give --dtype to change it'})")
    bytes_only = ~np.isnan(approx) & (eb <= 0)
    if bytes_only.any():  # elements at the wire type, for the pattern's multiples of Ψ
        full = np.where(bytes_only, approx / comm_eb, full)
        eb = np.where(bytes_only, comm_eb, eb)
    if comm_dtype == "?":
        comm_dtype = type_of_width(comm_eb, dtype)
    return str(comm_dtype), float(comm_eb), full, eb, notes


#: The type a width names where a call records its bytes per element but not its type: a float's, as
#: gradients and parameters are (the first of each width; 2 bytes reads fp16, bf16's width too).
_FLOAT_OF_WIDTH = {8: "fp64", 4: "fp32", 2: "fp16", 1: "fp8e4m3"}


def type_of_width(width: float, preferred: str | None = None) -> str:
    """The element type of a call that records only its bytes per element (``width``): ``preferred``
    (``--dtype``, the wire's) where it is that wide, else the float type of that width, else "?"."""
    from zerocalc.dtypes import DTYPE_BYTES

    if preferred is not None and DTYPE_BYTES.get(preferred) == width:
        return preferred
    return _FLOAT_OF_WIDTH.get(int(width), "?") if width == int(width) else "?"



#: Parameter-side and gradient-side collectives (§7: FSDP2 gathers in param_dtype and reduce-scatters in
#: reduce_dtype; a DDP compression hook changes the all-reduce only).
PARAM_SIDE_OPS: tuple[str, ...] = ("all_gather", "broadcast")


def side_dtypes(dt: Codes, ops: Codes, stepmask: np.ndarray, gradmask: np.ndarray, full: np.ndarray,
                eb: np.ndarray, wire: tuple[str, float], w: np.ndarray | None = None
                ) -> tuple[str, float, str, float]:
    """(parameter dtype, its bytes, gradient dtype, its bytes): the type carrying the most elements
    among the steady-state parameter-side (all-gather, broadcast) and gradient-side (``gradmask``)
    collectives; a side the step lacks takes the wire type. ``dt``: element types, missing read as "?"."""
    from zerocalc.validate.classify import SCALAR_MAX_ELEMENTS

    out = []
    for side in (ops.isin(PARAM_SIDE_OPS), gradmask):
        heaviest = _heaviest_type(dt, side & stepmask & (eb > 0) & (full > SCALAR_MAX_ELEMENTS), eb, full, w)
        if heaviest is None:
            out += list(wire)
            continue
        name, b = heaviest
        if name == "?":
            name = type_of_width(b, wire[0])
        out += [str(name), float(b)]
    return out[0], out[1], out[2], out[3]
