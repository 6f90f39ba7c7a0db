"""Compare: every scheme's predicted step against the measured one, by volume and by pattern.

A scheme's phases (:mod:`zerocalc.schemes`) evaluated at the trace's Ψ, N and element type, merged
per op, set against the measured pattern (which ops, how much, in what order); the consistent schemes
best first, and the groups the trace cannot tell apart. Sources: DeepSpeed issues #5758 and #6463 and
PyTorch issue #69591 (what implementations send).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from zerocalc.errors import ConfigError
from zerocalc.traces.deepspeed_comms import FORMAT as DEEPSPEED_COMMS
from zerocalc.validate.accounting import RTOL, ring_bytes_factor
from zerocalc.validate.explain import NO_CROSS_RANK_TRAFFIC, _explain
from zerocalc.validate.fit import AlphaBetaFit
from zerocalc.validate.frozen import frozen_choices
from zerocalc.validate.measure import Measurement
from zerocalc.validate.regather import recomputed_share, regathered_share
from zerocalc.validate.regimes import (
    KEPT_FOR_BACKWARD_OPTIONS,
    all_reduced_once,
    by_op_and_group,
    gathers_of_reduced_vectors,
    kept_for_backward_share,
    kept_gathers,
    persistent_share,
    same_elements,
)

#: One predicted or measured pattern entry: (op, group size, dtype, calls, full elements, bytes) per rank
#: and optimizer step.
Entry = tuple[str, int, str, float, float, float]


@dataclass(frozen=True)
class SchemeComparison:
    """One scheme against the measured step: volume, pattern and, if it differs, why.

    ``predicted_pattern``/``measured_pattern`` merge each op's calls (op, calls, elements, bytes);
    ``predicted_groups``/``measured_groups`` keep them apart per group size and dtype (:data:`Entry`).
    """

    scheme: str
    predicted_bytes_per_rank_per_step: float
    measured_bytes_per_rank_per_step: float
    ratio: float  # measured ÷ predicted
    volume_match: bool
    pattern_match: bool
    order: str  # "same", "rotated" (same cyclic order, the step boundary falls elsewhere), "different"
    predicted_pattern: tuple[tuple[str, float, float, float], ...]  # (op, calls, elements, bytes)
    measured_pattern: tuple[tuple[str, float, float, float], ...]
    explanation: str
    equivalent_to_dp: bool
    predicted_time_s: float = math.nan
    #: the pattern and volume match once the scheme's all-gather volume is halved: the forward
    #: gather kept for backward (:data:`_REUSED_PARAMETERS`)
    matches_if_reused: bool = False
    predicted_groups: tuple[Entry, ...] = ()
    #: the pattern and volume match once every parameter is gathered again in backward
    #: (stage3_max_reuse_distance = 0, or a model past it)
    matches_if_regathered: bool = False
    measured_groups: tuple[Entry, ...] = ()
    #: DeepSpeed's stage3_max_reuse_distance the scheme was priced at (None: a scheme without one), and
    #: that regime in words (:func:`reuse_regime`): the one that matched, when one did
    reuse_distance: float | None = None
    reuse_regime: str = ""
    #: the pattern and volume match once gathered parameters are kept across the step's micro-batches:
    #: the backward's (K + 1 gathers of the parameters a step in place of 2K, as FSDP2 keeps them under
    #: PyTorch's pipeline schedules), or the forward's through backward and every later micro-batch (1 in
    #: place of K, as FSDP1's SHARD_GRAD_OP keeps them under no_sync())
    matches_if_kept_across_micro_batches: bool = False
    #: the gathers of the parameters a step once they are kept so (K + 1 or 1; 0 where they do not match)
    gathers_if_kept: int = 0
    #: DeepSpeed ZeRO-3: the share of Ψ that, kept whole (persistent) and gathered once a step, makes the
    #: pattern match (:func:`~.regimes.persistent_share`; 0 where none does)
    persistent_share: float = 0.0
    #: the pattern and volume match once the replicate all-reduce of HSDP's shards runs in the step's last
    #: micro-batch alone (FSDP2's set_requires_all_reduce(False) on the others;
    #: :func:`~.regimes.all_reduced_once`)
    matches_if_all_reduced_once: bool = False
    #: the share of Ψ whose forward gather, kept for the backward (the rest gathered again), makes the
    #: pattern match (FSDP1's root unit, FSDP2's root module at its default, reshard_after_forward=False on
    #: some modules; :func:`~.regimes.kept_for_backward_share`; 0 where none does)
    kept_for_backward_share: float = 0.0
    #: the elements a step gathered of frozen parameters, never reduced, with which the pattern and volume
    #: match (:mod:`.frozen`; 0 where none), at the reuse regime named where the scheme has one, and how they
    #: were read: "size" (whole units gathered in calls of sizes no reduction has) or "unit" (units gathering
    #: more than they reduce)
    frozen_gathered: float = 0.0
    frozen_how: str = ""
    #: DeepSpeed ZeRO-3: the share of Ψ gathered again in the backward each micro-batch, read from the
    #: trace, with which the pattern matches (a model past stage3_max_reuse_distance for part of its modules;
    #: :func:`~.regather.regathered_share`; 0 where it is not read so)
    regathered_share: float = 0.0
    #: DeepSpeed ZeRO-3: the share of Ψ, more than Ψ, the backward gathers each micro-batch, read from the
    #: trace, with which the pattern matches (activation checkpointing's recompute gathering segments again;
    #: :func:`~.regather.recomputed_share`; 0 where it is not read so)
    recomputed_share: float = 0.0

    @property
    def label(self) -> str:
        """The scheme's name, with the reuse-distance regime it was priced at where it has one."""
        return f"{self.scheme} ({self.reuse_regime})" if self.reuse_regime else self.scheme

    def as_record(self, psi: float) -> dict:
        def pat(merged, fine):
            if fine:
                return [{"op": o, "calls": c, "elements_over_psi": e / psi, "bytes": b, "group": p,
                         "dtype": d}
                        for o, p, d, c, e, b in fine]
            return [{"op": o, "calls": c, "elements_over_psi": e / psi, "bytes": b} for o, c, e, b in merged]

        return {
            "scheme": self.scheme,
            "predicted_bytes_per_rank_per_step": self.predicted_bytes_per_rank_per_step,
            "measured_bytes_per_rank_per_step": self.measured_bytes_per_rank_per_step,
            "ratio": self.ratio,
            "volume_match": self.volume_match,
            "pattern_match": self.pattern_match,
            "order": self.order,
            "predicted_pattern": pat(self.predicted_pattern, self.predicted_groups),
            "measured_pattern": pat(self.measured_pattern, self.measured_groups),
            "explanation": self.explanation,
            "equivalent_to_dp": self.equivalent_to_dp,
            "predicted_time_s": None if math.isnan(self.predicted_time_s) else self.predicted_time_s,
            "matches_if_reused": self.matches_if_reused,
            "matches_if_regathered": self.matches_if_regathered,
            "reuse_distance": self.reuse_distance,
            "reuse_regime": self.reuse_regime or None,
            "matches_if_kept_across_micro_batches": self.matches_if_kept_across_micro_batches,
            "gathers_if_kept_across_micro_batches": self.gathers_if_kept or None,
            "persistent_share": self.persistent_share or None,
            "matches_if_all_reduced_once": self.matches_if_all_reduced_once,
            "share_kept_for_backward": self.kept_for_backward_share or None,
            "matches_with_frozen_parameters": bool(self.frozen_gathered),
            "share_gathered_again_in_backward": self.regathered_share or None,
            "share_gathered_in_backward_with_recompute": self.recomputed_share or None,
        }


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


#: Parameter-side collectives (all-gather, broadcast of parameters) carry the parameter dtype; the others
#: the reduction dtype (§7; schemes.py ``Side``).
_PARAM_SIDE = ("all_gather", "broadcast")


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


def _priced_phases(scheme, pricing: Pricing) -> list:
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
        phases = _priced_phases(scheme, pricing)
    for op, p, calls, elems, eb, dt in phases:
        a = acc.setdefault((op, int(p), dt), [0.0, 0.0, 0.0])
        a[0] += calls
        a[1] += calls * elems
        a[2] += calls * ring_bytes_factor(op, p) * elems * eb
    return tuple((*k, *v) for k, v in acc.items())


def _merged(entries) -> tuple[tuple[str, float, float, float], ...]:
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
    return _merged(predicted_groups(scheme, pricing))


def sympy_float(expr, vals) -> float:
    """A sympy expression (or number) evaluated at ``vals`` (every free symbol given: ``xreplace``, a
    plain substitution, is enough and much faster than ``subs``)."""
    if not hasattr(expr, "xreplace"):
        return float(expr)
    out = expr.xreplace(vals)
    return float(out if getattr(out, "is_number", True) else expr.subs(vals))


def _rotations(seq: tuple) -> list[tuple]:
    return [seq[i:] + seq[:i] for i in range(len(seq))] or [()]


def compare(
    m: Measurement,
    schemes: Sequence[str] | None = None,
    *,
    gpus_per_node: int | None = None,
    fit: AlphaBetaFit | None = None,
    reuse_distance: float | None = None,
) -> list[SchemeComparison]:
    """Every scheme (or the ones named) against the measured step traffic, in SCHEME_NAMES order.

    Patterns are compared by elements per (op, group size), as multiples of Ψ, never by bytes, so
    that no element type can make one scheme look like another; the volume ratio prices every call at
    its own dtype (the scheme's parameter-side and gradient-side phases at the trace's).

    A scheme whose backward re-gather depends on DeepSpeed's ``stage3_max_reuse_distance``
    (deepspeed-zero3) is priced at ``reuse_distance`` when given; otherwise at each regime in turn
    (:func:`_reuse_candidates`: DeepSpeed's default, parameters kept for backward, every parameter
    gathered again), and reported at the first that matches, with the regime said
    (``SchemeComparison.reuse_regime``), as the micro-batches are read from the trace.
    """
    from zerocalc.validate import numeric

    names = list(numeric.scheme_names()) if not schemes else [numeric.scheme(s).name for s in schemes]
    pricing = pricing_of(m, gpus_per_node)
    if reuse_distance is not None:
        pricing = replace(pricing, reuse_distance=float(reuse_distance))
    mkeys = by_op_and_group(m.pattern_groups)
    tried_by = {name: _priced(numeric.scheme(name), m, mkeys, pricing) for name in names}
    # read once: the measured bytes (a filter of the categories' table) and, where a share needs it,
    # whether the gathers are of the reduced vectors
    seen = _Seen(m, mkeys, m.bytes_per_rank_per_step, pricing, functools.cache(
        lambda: gathers_of_reduced_vectors(m)), fit)
    out = [_compared(name, tried_by[name], seen) for name in names]
    # where no scheme matches, at any regime nor in one of its implementation's: frozen parameters gathered,
    # never reduced (:mod:`.frozen`), the last reading tried
    if m.n > 1 and not any(_explains(c) for c in out):
        # ZeRO-3 read by pass needs its pricing with every parameter kept, whatever reuse distance was given
        with_kept = {name: [*tried, _at_kept(numeric.scheme(name), m, mkeys, pricing)]
                     if tried[0][0] is not None else tried for name, tried in tried_by.items()}
        frozen_by = frozen_choices(m, mkeys, with_kept)
        out = [_compared(c.scheme, tried_by[c.scheme], seen, frozen_by[c.scheme]) if c.scheme in frozen_by
               else c for c in out]
    if m.shard_size is not None and not any(c.pattern_match for c in out):
        out = [_at_kept_option(c, m, fit) if c.matches_if_reused and c.scheme in KEPT_FOR_BACKWARD_OPTIONS
               else c for c in out]
    return out


def _priced(sch, m: Measurement, mkeys: dict, pricing: Pricing) -> list[tuple]:
    """A scheme (:class:`~zerocalc.validate.numeric.NumericScheme`) priced against the measured pattern at
    each reuse regime it has (:func:`_reuse_candidates`; one pricing for a scheme without one), each
    ``(reuse distance, phases, groups, predicted elements per (op, group), ratio, order, pattern match)``
    (:func:`_against`)."""
    regimes = _reuse_candidates(pricing) if _priced_by_reuse(sch) else [None]
    return [_against(sch, m, mkeys, m.pattern_groups, replace(pricing, reuse_distance=d)) for d in regimes]


class _Seen(NamedTuple):
    """What every scheme is compared with: the measurement, its elements per (op, group), its step bytes
    per rank, the pricing, ``units()`` (whether the gathers are of the reduced vectors) and the α-β fit."""

    m: Measurement
    mkeys: dict
    measured: float
    pricing: Pricing
    units: Callable[[], bool]
    fit: AlphaBetaFit | None


def _compared(name: str, tried: list[tuple], seen: _Seen, frozen_at: tuple | None = None) -> SchemeComparison:
    """One scheme against the measured step traffic, from its pricings ``tried`` (:func:`_priced`): at the
    first regime that matches (as micro-batches are read from the trace), else at the one that matches with
    frozen parameters (``frozen_at``: :func:`~.frozen.frozen_choices`), else at the first."""
    from zerocalc.validate import numeric

    m, mkeys, pricing, fit = seen.m, seen.mkeys, seen.pricing, seen.fit
    sch = numeric.scheme(name)
    meas_fine, meas = m.pattern_groups, m.pattern
    chosen = next((t for t in tried if t[-1]), None)
    frozen, how, again = 0.0, "", 0.0
    if chosen is None and frozen_at is not None:
        chosen, frozen, how = frozen_at
    recomputed = 0.0
    if chosen is None and tried[0][0] is not None and m.n > 1:
        chosen, again = _part_regathered(sch, seen)
        if chosen is None:
            recomputed = _recomputed(sch, seen)
    d, phases, fine, pkeys, ratio, order, pattern_match = chosen or tried[0]
    pred = _merged(fine)
    predicted = sum(b for *_, b in pred)
    volume_match = math.isclose(ratio, 1.0, rel_tol=RTOL)
    reused, kept, share, once, part = _regimes(name, m, mkeys, pkeys, phases, d, order, pattern_match,
                                               int(pricing.micro_batches), seen.units)
    regime = "" if d is None else reuse_regime(d, m.psi)
    if again:  # priced at the distance the formula gives that share at, which is not the run's: none said
        d, regime = None, (f"{again:.3g}Ψ gathered again in backward, read from the trace: past "
                           "stage3_max_reuse_distance")
    elif how == "pass":  # priced with every parameter kept; what the backward gathers again is in the note
        d, regime = None, ""
    regathered = pattern_match and d is not None and _regathered(d, m.psi) >= m.psi
    if m.n == 1:
        ratio, volume_match, pattern_match, reused, regathered, kept, share, once, part = (
            math.nan, False, False, False, False, 0, 0.0, False, 0.0)
    t_pred = math.nan
    if fit is not None:
        t_pred = sum(calls * fit.predict_s(op, elems * eb, p) for op, p, calls, elems, eb, _ in phases)
    return SchemeComparison(
        scheme=name, predicted_bytes_per_rank_per_step=predicted,
        measured_bytes_per_rank_per_step=seen.measured,
        ratio=ratio, volume_match=volume_match, pattern_match=pattern_match, order=order,
        predicted_pattern=pred, measured_pattern=meas,
        explanation=(NO_CROSS_RANK_TRAFFIC if m.n == 1
                     else _explain(name, pred, meas, ratio, order, m.psi, fine, meas_fine)
                     + (f" (at {regime})" if regime and pattern_match else "")),
        equivalent_to_dp=sch.equivalent_to_dp, predicted_time_s=t_pred, matches_if_reused=reused,
        predicted_groups=fine, measured_groups=meas_fine, matches_if_regathered=regathered,
        reuse_distance=d, reuse_regime=regime, matches_if_kept_across_micro_batches=bool(kept or share),
        gathers_if_kept=kept, persistent_share=share, matches_if_all_reduced_once=once,
        kept_for_backward_share=part, frozen_gathered=frozen, frozen_how=how, regathered_share=again,
        recomputed_share=recomputed,
    )


def _at_kept(sch, m: Measurement, mkeys: dict, pricing: Pricing) -> tuple:
    """A scheme priced by reuse distance (deepspeed-zero3) at 2Ψ, every parameter kept for the backward
    (:func:`_against`), the price the readings of what a trace shows its backward gather start from."""
    return _against(sch, m, mkeys, m.pattern_groups, replace(pricing, reuse_distance=2.0 * m.psi))


def _recomputed(sch, seen: _Seen) -> float:
    """The share of Ψ, more than Ψ, DeepSpeed ZeRO-3's backward gathers (:func:`~.regather.recomputed_share`,
    from the scheme with every parameter kept for the backward); 0 where the trace does not read so."""
    m, pricing = seen.m, seen.pricing
    kept = _at_kept(sch, m, seen.mkeys, pricing)
    return recomputed_share(seen.mkeys, kept[3], int(pricing.micro_batches), m.psi, m.gathered_in_backward,
                            seen.units)


def _part_regathered(sch, seen: _Seen) -> tuple[tuple | None, float]:
    """DeepSpeed ZeRO-3 priced with the share of Ψ the trace shows gathered again in the backward
    (:func:`~.regather.regathered_share`, from the scheme with every parameter kept for the backward), at the
    reuse distance its formula, Max(0, Ψ - D/2), gives that share at: (that pricing (:func:`_against`),
    the share), or (None, 0) where the trace does not read so."""
    m, mkeys, pricing = seen.m, seen.mkeys, seen.pricing
    kept = _at_kept(sch, m, mkeys, pricing)
    share = regathered_share(mkeys, kept[3], int(pricing.micro_batches), m.psi, m.gathered_in_backward,
                             seen.units, DEEPSPEED_COMMS in m.formats)
    if not share:
        return None, 0.0
    at = _against(sch, m, mkeys, m.pattern_groups,
                  replace(pricing, reuse_distance=2.0 * m.psi * (1 - share)))
    return (at, share) if at[-1] else (None, 0.0)


def _explains(c: SchemeComparison) -> bool:
    """Whether a scheme sends the measured pattern as priced or in a regime of its implementation
    (:func:`_regimes`, parameters gathered again in backward)."""
    return bool(c.pattern_match or c.matches_if_reused or c.matches_if_kept_across_micro_batches
                or c.matches_if_all_reduced_once or c.kept_for_backward_share or c.matches_if_regathered
                or c.recomputed_share)


def _regimes(name: str, m: Measurement, mkeys: dict, pkeys: dict, phases, d: float | None, order: str,
             pattern_match: bool, k: int, units) -> tuple[bool, int, float, bool, float]:
    """How a scheme that does not match as priced still sends the measured pattern (:mod:`.regimes`):
    (its forward gather kept for backward, the gathers a step with gathered parameters kept across the
    micro-batches or 0, DeepSpeed ZeRO-3's persistent share, HSDP's shards all-reduced once, the share of
    Ψ kept for backward). ``d``: the reuse distance it was priced at (None: a scheme without one);
    ``units()``: whether the gathers are of the reduced vectors."""
    # the same with the scheme's all-gathers halved: the forward gather kept for backward
    reused = (not pattern_match and d is None and order != "different"
              and any(o == "all_gather" for o, _ in pkeys)
              and same_elements(mkeys, pkeys, gathers=0.5))
    open_ = not (pattern_match or reused or order == "different")
    # an implementation's option that keeps the forward gather (KEPT_FOR_BACKWARD_OPTIONS), read only where
    # the trace shows HSDP's groups: on one group fsdp-hybrid is fsdp-full-shard, and fsdp-shard-grad-op
    # prices its option
    option = name in KEPT_FOR_BACKWARD_OPTIONS and m.shard_size is not None
    kept = kept_gathers(mkeys, pkeys, phases, k, m.grad_sync, option) if open_ and d is None else 0
    # DeepSpeed ZeRO-3 (unmatched, so at its first regime): parameters kept whole, gathered once a step
    share = persistent_share(mkeys, pkeys, k, m.psi) if open_ and d is not None else 0.0
    if share >= 1 - RTOL:
        kept, share = 1, 1.0
    once = open_ and d is None and all_reduced_once(mkeys, pkeys, k)
    part = (kept_for_backward_share(mkeys, pkeys, phases, k, m.psi)
            if open_ and d is None and not (kept or once) else 0.0)
    if part and not units():
        part = 0.0
    return reused, kept, share, once, part


def _at_kept_option(c: SchemeComparison, m: Measurement, fit: AlphaBetaFit | None) -> SchemeComparison:
    """A scheme that sends the measured pattern with its forward gather kept for backward, where that is
    an option of its implementation (:data:`~.regimes.KEPT_FOR_BACKWARD_OPTIONS`), the trace shows HSDP's
    groups and no scheme matches as it stands, read as a match at that option (its ``reuse_regime``): priced
    with its all-gathers halved."""
    from zerocalc.dtypes import DTYPE_BYTES

    half = tuple((o, p, d, k / 2, e / 2, b / 2) if o == "all_gather" else (o, p, d, k, e, b)
                 for o, p, d, k, e, b in c.predicted_groups)
    pred = _merged(half)
    predicted = sum(b for *_, b in half)
    ratio = c.measured_bytes_per_rank_per_step / predicted
    regime = KEPT_FOR_BACKWARD_OPTIONS[c.scheme]
    t = c.predicted_time_s
    if fit is not None:
        t = sum(k * fit.predict_s(o, e / k * DTYPE_BYTES.get(d, m.comm_elem_bytes), p)
                for o, p, d, k, e, _ in half if k)
    return replace(
        c, predicted_bytes_per_rank_per_step=predicted, ratio=ratio,
        volume_match=math.isclose(ratio, 1.0, rel_tol=RTOL), pattern_match=True, predicted_pattern=pred,
        predicted_groups=half, matches_if_reused=False, reuse_regime=regime, predicted_time_s=t,
        explanation=_explain(c.scheme, pred, c.measured_pattern, ratio, c.order, m.psi, half,
                             c.measured_groups) + f" (at {regime})")


def _priced_by_reuse(scheme) -> bool:
    """Whether a scheme's volume depends on the reuse distance D_reuse (deepspeed-zero3); ``scheme``: a
    :class:`~zerocalc.validate.numeric.NumericScheme`."""
    return any(ph.reuse_priced for ph in scheme.phases)


def _reuse_candidates(pricing: Pricing) -> list[float]:
    """The reuse distances a check tries, in order: the one given, else DeepSpeed's default (1e9,
    ``deepspeed/runtime/zero/config.py``), 2Ψ (the least that keeps every parameter for backward, the
    same as the default below Ψ = 5e8) and 0 (every parameter gathered again in backward). A regime
    that predicts the same re-gather as an earlier one is not tried again."""
    from zerocalc.validate.numeric import default_reuse_distance

    if pricing.reuse_distance is not None:
        return [pricing.reuse_distance]
    out, seen = [], set()
    for d in (default_reuse_distance(), 2.0 * pricing.psi, 0.0):
        again = _regathered(d, pricing.psi)
        if again not in seen:
            seen.add(again)
            out.append(d)
    return out


def _regathered(d: float, psi: float) -> float:
    """Elements DeepSpeed ZeRO-3 gathers again in backward per micro-batch at reuse distance ``d``:
    Max(0, Ψ - D/2) (schemes.py, the deepspeed-zero3 scheme's backward phase)."""
    return max(0.0, psi - d / 2)


def reuse_regime(d: float, psi: float) -> str:
    """A reuse distance in words, with what it means for the backward re-gather:
    ``"reuse distance 0: every parameter gathered again in backward"``."""
    again = _regathered(d, psi)
    if d == 0:
        return "reuse distance 0: every parameter gathered again in backward"
    if again <= 0:  # DeepSpeed's default 1e9 for any Ψ up to 5e8
        return "reuse distance ≥ 2Ψ: parameters kept for backward"
    return f"reuse distance {d:,.0f}: {again / psi:.3g}Ψ gathered again in backward"


def _against(sch, m: Measurement, mkeys: dict, meas_fine, pricing: Pricing):
    """One scheme priced at ``pricing`` against the measured step: (reuse distance or None, phases,
    predicted groups, elements per (op, group), ratio, order, whether pattern and volume match)."""
    phases = _priced_phases(sch, pricing)
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
    d = pricing.reuse_distance if _priced_by_reuse(sch) else None
    return d, phases, fine, pkeys, ratio, order, match


def _wire_key(c: SchemeComparison) -> tuple:
    """What the wire shows of a scheme's prediction: its collectives per group, elements and bytes."""
    if c.predicted_groups:
        return tuple(sorted((o, p, round(e), round(b)) for o, p, _d, _c, e, b in c.predicted_groups))
    return tuple(sorted((o, round(b)) for o, _, _, b in c.predicted_pattern))


def consistent(comparisons: Sequence[SchemeComparison]) -> list[str]:
    """Names of the schemes whose pattern and volume match, best first.

    Best = the closer volume, then same order before rotated order. Schemes the trace cannot tell
    apart (:func:`indistinguishable`) are never ranked among themselves: they stay together, in the
    scheme order of :data:`zerocalc.schemes.SCHEME_NAMES`, at the place of the best of them.
    """
    ok = [c for c in comparisons if c.pattern_match]
    best: dict[tuple, tuple] = {}
    for c in ok:
        k = (abs(math.log(c.ratio)) if c.ratio > 0 else math.inf, c.order != "same")
        best[_wire_key(c)] = min(best.get(_wire_key(c), k), k)
    first = {}
    for i, c in enumerate(ok):
        first.setdefault(_wire_key(c), i)
    ok.sort(key=lambda c: (best[_wire_key(c)], first[_wire_key(c)]))
    return [c.scheme for c in ok]


def indistinguishable(comparisons: Sequence[SchemeComparison]) -> list[list[str]]:
    """Groups of consistent schemes the trace cannot tell apart (same collectives on the same groups,
    same elements, same volumes)."""
    groups: dict[tuple, list[str]] = {}
    for c in comparisons:
        if c.pattern_match:
            groups.setdefault(_wire_key(c), []).append(c.scheme)
    return [v for v in groups.values() if len(v) > 1]

