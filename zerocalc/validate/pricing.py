"""Pricing: a scheme's phases as numbers at a measurement's Ψ, groups, element types, micro-batches and
gradient sync (:class:`Pricing`), per (op, group, dtype) and per op, DeepSpeed ZeRO-3's reuse-distance
regimes, and one scheme priced against the measured step (:func:`price_against`), which
:mod:`~zerocalc.validate.compare` then reads.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

from zerocalc.errors import ConfigError
from zerocalc.validate.accounting import RTOL, ring_bytes_factor
from zerocalc.validate.measure import Measurement
from zerocalc.validate.regimes import by_op_and_group, same_elements

#: One predicted or measured pattern entry: (op, group size, dtype, calls, full elements, bytes) per rank
#: and optimizer step.
Entry = tuple[str, int, str, float, float, float]


def _gpus_per_node(n: int, gpus_per_node: int | None) -> int:
    if gpus_per_node is None:
        return n if n <= 8 or n % 8 else 8
    if gpus_per_node < 1:  # as ``table`` says it (evaluate.py)
        raise ConfigError("must be a whole number ≥ 1", option="--gpus-per-node")
    if n > gpus_per_node and n % gpus_per_node:
        raise ConfigError(f"{gpus_per_node} does not divide N = {n}", option="--gpus-per-node")
    return min(gpus_per_node, n)


@dataclass(frozen=True)
class Pricing:
    """What a scheme is evaluated at: the trace's Ψ and groups, its element type per side, its
    micro-batches and gradient-sync mode."""

    psi: float
    n: int
    g: int
    param_bytes: float
    grad_bytes: float
    param_dtype: str = ""
    grad_dtype: str = ""
    h: int | None = None
    micro_batches: int = 1
    grad_sync: str = "every"
    #: DeepSpeed's stage3_max_reuse_distance (None: its default, evaluate.DEFAULT_REUSE_DISTANCE)
    reuse_distance: float | None = None
    #: expert parallelism: (the experts' elements each rank holds, their expert-data-parallel group size),
    #: priced as the scheme again beside the dense parameters (``psi`` then theirs alone, on N); None: no
    #: experts apart
    expert: tuple[float, int] | None = None


def pricing_of(m: Measurement, gpus_per_node: int | None = None) -> Pricing:
    """The :class:`Pricing` of a measurement: HSDP's shard size stands for G unless ``--gpus-per-node``."""
    g = _gpus_per_node(m.n, gpus_per_node) if gpus_per_node is not None or not m.shard_size else m.shard_size
    pb = m.param_elem_bytes if m.param_elem_bytes == m.param_elem_bytes else m.comm_elem_bytes
    gb = m.grad_elem_bytes if m.grad_elem_bytes == m.grad_elem_bytes else m.comm_elem_bytes
    experts = m.expert_psi if m.expert_size and m.expert_psi and m.expert_psi < m.psi else None
    return Pricing(psi=m.psi - (experts or 0), n=m.n, g=g, param_bytes=pb, grad_bytes=gb,
                   param_dtype=m.param_dtype or m.comm_dtype, grad_dtype=m.grad_dtype or m.comm_dtype,
                   h=m.shard_size, micro_batches=m.micro_batches, grad_sync=m.grad_sync or "every",
                   expert=(float(experts), m.expert_size) if experts else None)


def _phase_numbers(scheme, *, psi: float, n: int, g: int, comm_bytes: float | None = None,
                   pricing: Pricing | None = None):
    """A scheme's phases as numbers, in order: (op, group size, calls per step, elements, bytes per
    element, dtype).

    Each phase is priced at its side's element type (parameter or gradient, :class:`Pricing`), run
    as often per optimizer step as its cadence says at the pricing's micro-batches and gradient-sync
    mode (``Phase.runs``). Phases on a group of one rank move nothing and are left out. ``scheme``: a
    name (its phases from :mod:`zerocalc.validate.numeric`'s table, no sympy) or a
    :class:`~zerocalc.schemes.Scheme`; each expression evaluated as sympy evaluates it at these numbers.
    """
    from zerocalc.dtypes import DTYPE_BYTES
    from zerocalc.validate import numeric

    if pricing is None:
        pricing = Pricing(psi=psi, n=n, g=g, param_bytes=comm_bytes, grad_bytes=comm_bytes)
    sch = numeric.scheme(scheme)
    base = {"Psi": pricing.psi, "N": pricing.n, "G": pricing.g, "H": pricing.h or pricing.g,
            "n_mb": pricing.micro_batches, "b_p": pricing.param_bytes, "b_g": pricing.grad_bytes,
            "D_reuse": pricing.reuse_distance if pricing.reuse_distance is not None
            else numeric.default_reuse_distance()}
    sync = str(pricing.grad_sync)
    for ph in sch.phases:
        op = ph.collective
        b = pricing.param_bytes if ph.side == "param" else pricing.grad_bytes
        vals = dict(base, b_comm=b, b_param=b, b_grad=b)
        p = float(numeric.evaluate(ph.size, vals))
        elements = float(numeric.evaluate(ph.elements, vals))
        if p <= 1 or elements <= 0:  # e.g. no re-gather within the reuse distance
            continue
        runs = float(numeric.number(pricing.micro_batches)) if ph.runs_per_micro_batch(sync) else 1.0
        eb = float(numeric.evaluate(ph.elem_bytes, vals))
        dtype = (pricing.param_dtype if ph.side == "param" else pricing.grad_dtype) if eb == b else \
            next((k for k, v in DTYPE_BYTES.items() if v == eb), f"{eb:g} B")
        yield (op, p, runs * float(numeric.evaluate(ph.calls, vals)), elements, eb, dtype)


def priced_phases(scheme, pricing: Pricing) -> list:
    """:func:`_phase_numbers` at ``pricing``; under expert parallelism (``pricing.expert``) the scheme run
    twice, on the dense parameters (Ψ on N) and on each rank's experts (on their expert-data-parallel
    group, G at most its size), phase by phase in turn, as one backward reduces both."""
    dense = list(_phase_numbers(scheme, psi=pricing.psi, n=pricing.n, g=pricing.g, pricing=pricing))
    if pricing.expert is None:
        return dense
    psi_e, n_e = pricing.expert
    of_experts = replace(pricing, psi=psi_e, n=n_e, g=min(pricing.g, n_e), h=None, expert=None)
    experts = list(_phase_numbers(scheme, psi=psi_e, n=n_e, g=of_experts.g, pricing=of_experts))
    out = []
    for pair in itertools.zip_longest(dense, experts):
        out += [ph for ph in pair if ph is not None]
    return out


def predicted_groups(scheme, pricing: Pricing, phases=None) -> tuple[Entry, ...]:
    """A scheme's phases as numbers per (op, group size, dtype), in first-appearance order (:data:`Entry`);
    ``phases``: :func:`_phase_numbers` already computed."""
    acc: dict[tuple[str, int, str], list[float]] = {}
    if phases is None:
        phases = priced_phases(scheme, pricing)
    for op, p, calls, elems, eb, dt in phases:
        a = acc.setdefault((op, int(p), dt), [0.0, 0.0, 0.0])
        a[0] += calls
        a[1] += calls * elems
        a[2] += calls * ring_bytes_factor(op, p) * elems * eb
    return tuple((*k, *v) for k, v in acc.items())


def merged(entries) -> tuple[tuple[str, float, float, float], ...]:
    """:data:`Entry` rows merged per op, in first-appearance order: (op, calls, elements, bytes)."""
    acc: dict[str, list[float]] = {}
    for o, _p, _d, c, e, b in entries:
        a = acc.setdefault(o, [0.0, 0.0, 0.0])
        a[0] += c
        a[1] += e
        a[2] += b
    return tuple((o, *v) for o, v in acc.items())


def predicted_pattern(scheme, *, psi: float, n: int, g: int, comm_bytes: float | None = None,
                      pricing: Pricing | None = None):
    """A scheme's phases as numbers, merged per op in first-appearance order: (op, calls, elements, bytes).

    Phases on a group of one rank move nothing and are left out. Bytes per rank under the
    ring accounting of :func:`ring_bytes_factor`, the same as ``Scheme.bytes_per_rank()``.
    """
    if pricing is None:
        pricing = Pricing(psi=psi, n=n, g=g, param_bytes=comm_bytes, grad_bytes=comm_bytes)
    return merged(predicted_groups(scheme, pricing))


def sympy_float(expr, vals) -> float:
    """A sympy expression (or number) evaluated at ``vals`` (every free symbol given: ``xreplace``, a
    plain substitution, is enough and much faster than ``subs``)."""
    if not hasattr(expr, "xreplace"):
        return float(expr)
    out = expr.xreplace(vals)
    return float(out if getattr(out, "is_number", True) else expr.subs(vals))


def priced_by_reuse(scheme) -> bool:
    """Whether a scheme's volume depends on the reuse distance D_reuse (deepspeed-zero3); ``scheme``: a
    :class:`~zerocalc.validate.numeric.NumericScheme`."""
    return any(ph.reuse_priced for ph in scheme.phases)


def reuse_candidates(pricing: Pricing) -> list[float]:
    """The reuse distances a check tries, in order: the one given, else DeepSpeed's default (1e9,
    ``deepspeed/runtime/zero/config.py``), 2Ψ (the least that keeps every parameter for backward, the
    same as the default below Ψ = 5e8) and 0 (every parameter gathered again in backward). A regime
    that predicts the same re-gather as an earlier one is not tried again."""
    from zerocalc.validate.numeric import default_reuse_distance

    if pricing.reuse_distance is not None:
        return [pricing.reuse_distance]
    out, seen = [], set()
    for d in (default_reuse_distance(), 2.0 * pricing.psi, 0.0):
        again = regathered_elements(d, pricing.psi)
        if again not in seen:
            seen.add(again)
            out.append(d)
    return out


def regathered_elements(d: float, psi: float) -> float:
    """Elements DeepSpeed ZeRO-3 gathers again in backward per micro-batch at reuse distance ``d``:
    Max(0, Ψ - D/2) (schemes.py, the deepspeed-zero3 scheme's backward phase)."""
    return max(0.0, psi - d / 2)


def reuse_regime(d: float, psi: float) -> str:
    """A reuse distance in words, with what it means for the backward re-gather:
    ``"reuse distance 0: every parameter gathered again in backward"``."""
    again = regathered_elements(d, psi)
    if d == 0:
        return "reuse distance 0: every parameter gathered again in backward"
    if again <= 0:  # DeepSpeed's default 1e9 for any Ψ up to 5e8
        return "reuse distance ≥ 2Ψ: parameters kept for backward"
    return f"reuse distance {d:,.0f}: {again / psi:.3g}Ψ gathered again in backward"


def _rotations(seq: tuple) -> list[tuple]:
    return [seq[i:] + seq[:i] for i in range(len(seq))] or [()]


def price_against(sch, m: Measurement, mkeys: dict, meas_fine, pricing: Pricing):
    """One scheme priced at ``pricing`` against the measured step: (reuse distance or None, phases,
    predicted groups, elements per (op, group), ratio, order, whether pattern and volume match)."""
    phases = priced_phases(sch, pricing)
    fine = predicted_groups(sch, pricing, phases)
    pkeys = by_op_and_group(fine)
    predicted = sum(b for *_, b in fine)
    measured = m.bytes_per_rank_per_step
    ratio = measured / predicted if predicted > 0 else (math.inf if measured > 0 else 1.0)
    mo, po = tuple(dict.fromkeys((o, p) for o, p, *_ in meas_fine)), tuple(pkeys)
    if not meas_fine:
        mo = tuple((o, 0) for o, *_ in m.pattern)
    if mo == po:
        order = "same"
    elif set(mo) == set(po) and len(mo) == len(po) and mo in _rotations(po):
        order = "rotated"
    else:
        order = "different"
    match = (same_elements(mkeys, pkeys) and order != "different"
             and math.isclose(ratio, 1.0, rel_tol=RTOL))
    d = pricing.reuse_distance if priced_by_reuse(sch) else None
    return d, phases, fine, pkeys, ratio, order, match
