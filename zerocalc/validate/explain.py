"""Explain: the sentences that say how a measured step differs from (or agrees with) a scheme."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from zerocalc.validate.accounting import _OP_VERBS, OP_NAMES, RTOL


def _psi_mult(x: float) -> str:
    """``2.0 → '2Ψ'``, ``0.25 → '0.25Ψ'``."""
    return f"{x:.3g}Ψ" if abs(x - 1) > 1e-9 else "Ψ"


def _names(ops: Iterable[str]) -> str:
    return " + ".join(OP_NAMES[o] for o in ops)


#: Why a fully sharded run can all-gather Ψ per step instead of 2Ψ: DeepSpeed ZeRO-3 keeps a gathered
#: parameter if it will be reused within ``stage3_max_reuse_distance`` parameters (default 1e9,
#: ``deepspeed/runtime/zero/config.py``), so a model smaller than that skips the backward re-gather once
#: the first step has recorded the module trace; FSDP's ``reshard_after_forward=False`` does the same.
_REUSED_PARAMETERS = ("the forward gather is kept for backward (a ZeRO-3 model under DeepSpeed's "
                      "stage3_max_reuse_distance, or FSDP without reshard after forward, sends exactly this)")


#: What a check of a one-rank run says instead of comparing volumes (nothing crosses between ranks).
NO_CROSS_RANK_TRAFFIC = "N = 1: one rank, no cross-rank traffic to compare"


def _sizes(ps) -> str:
    return " and ".join(str(p) for p in ps)


def _explain(name: str, pred, meas, ratio: float, order: str, psi: float, pred_fine=(), meas_fine=()) -> str:
    """One sentence saying how the measured step differs from (or agrees with) ``name``.

    ``pred``/``meas`` are merged per op (op, calls, elements, bytes); ``pred_fine``/``meas_fine`` keep
    group sizes and dtypes apart (op, group size, dtype, calls, elements, bytes): a difference of group
    is said, and a difference of volume at equal elements is put down to the element types.
    """
    pm = {o: (c, e, b) for o, c, e, b in pred}
    mm = {o: (c, e, b) for o, c, e, b in meas}
    extra = [o for o in mm if o not in pm]
    missing = [o for o in pm if o not in mm]
    parts = []
    if extra and missing:
        what = " + ".join(f"{OP_NAMES[o]} of {_psi_mult(mm[o][1] / psi)}" for o in extra)
        parts.append(f"{what} where {name} "
                     + " and ".join(f"{_OP_VERBS[o]} {_psi_mult(pm[o][1] / psi)}" for o in missing))
    elif extra:
        parts.append(" + ".join(f"{OP_NAMES[o]} of {_psi_mult(mm[o][1] / psi)}" for o in extra)
                     + f" that {name} does not have")
    elif missing:
        parts.append(f"no {_names(missing)} where {name} "
                     + " and ".join(f"{_OP_VERBS[o]} {_psi_mult(pm[o][1] / psi)}" for o in missing))
    for o in mm:
        if o in pm and not math.isclose(mm[o][1], pm[o][1], rel_tol=RTOL):
            parts.append(f"{OP_NAMES[o]} of {_psi_mult(mm[o][1] / psi)} per step in {mm[o][0]:.3g} call(s) "
                         f"where {name} {_OP_VERBS[o]} {_psi_mult(pm[o][1] / psi)} in {pm[o][0]:.3g}")
            if o == "all_gather" and math.isclose(2 * mm[o][1], pm[o][1], rel_tol=RTOL):
                parts.append(_REUSED_PARAMETERS)
    for o in mm:
        ms = sorted({p for oo, p, *_ in meas_fine if oo == o})
        ps = sorted({p for oo, p, *_ in pred_fine if oo == o})
        if o in pm and ms and ps and ms != ps:
            parts.append(f"{OP_NAMES[o]} on groups of {_sizes(ms)} ranks where {name} runs it on "
                         f"{_sizes(ps)}")
    same_volume = math.isclose(ratio, 1.0, rel_tol=RTOL)
    if not parts and not same_volume and set(mm) == set(pm):
        md = sorted({f"{OP_NAMES[o]} {d}" for o, _p, d, *_ in meas_fine})
        pd_ = sorted({f"{OP_NAMES[o]} {d}" for o, _p, d, *_ in pred_fine})
        parts.append("same collectives and elements in other element types"
                     + (f" ({', '.join(md)} vs {', '.join(pd_)})" if md and pd_ else ""))
    if not parts and order == "different":
        parts.append(f"same collectives in another order ({_names(o for o, *_ in meas)} vs "
                     f"{_names(o for o, *_ in pred)})")
    if not parts:
        s = f"matches {name}: {_names(o for o, *_ in meas)} of the predicted volume"
        if order == "rotated":
            s += (f", in rotated order ({name}: {_names(o for o, *_ in pred)}; the step boundary falls "
                  "elsewhere, which the wire cannot tell)")
        return s
    tail = "same volume" if same_volume else f"{ratio:.3g}× {name}'s volume"
    if same_volume and "all_reduce" in set(extra) | set(missing):
        tail += " (a ring all-reduce is a reduce-scatter plus an all-gather), different pattern"
    return "; ".join(parts) + f": {tail}"


def reused_sentence(schemes: Sequence[str]) -> str:
    """The sentence saying that ``schemes`` send the measured pattern with parameters kept for backward."""
    return (f"{', '.join(schemes)} with the parameters kept for backward send exactly this pattern "
            "(DeepSpeed ZeRO-3 keeps a gathered parameter for reuse within stage3_max_reuse_distance; "
            "FSDP without reshard after forward does the same)")

