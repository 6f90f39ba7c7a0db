"""Compare: every scheme's predicted step against the measured one, by volume and by pattern.

A scheme's phases (:mod:`zerocalc.schemes`) evaluated at the trace's Ψ, N and element type
(:mod:`~zerocalc.validate.pricing`), merged per op, set against the measured pattern (which ops, how much,
in what order); the consistent schemes best first, and the groups the trace cannot tell apart. Sources:
DeepSpeed issues #5758 and #6463 and PyTorch issue #69591 (what implementations send).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from zerocalc.validate.accounting import RTOL
from zerocalc.validate.explain import NO_CROSS_RANK_TRAFFIC, _explain
from zerocalc.validate.fit import AlphaBetaFit
from zerocalc.validate.frozen import frozen_choices
from zerocalc.validate.measure import Measurement
from zerocalc.validate.pricing import (
    Entry,
    Pricing,
    merged,
    price_against,
    priced_by_reuse,
    pricing_of,
    regathered_elements,
    reuse_candidates,
    reuse_regime,
)
from zerocalc.validate.regather import recomputed_share, regathered_share
from zerocalc.validate.regimes import (
    KEPT_FOR_BACKWARD_OPTIONS,
    all_reduced_once,
    by_op_and_group,
    first_and_later_gathers,
    gather_apart,
    gathers_of_reduced_vectors,
    kept_for_backward_share,
    kept_gathers,
    persistent_share,
    ranks_gather_alike,
    same_elements,
)


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
    (:func:`reuse_candidates`: DeepSpeed's default, parameters kept for backward, every parameter
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
    each reuse regime it has (:func:`reuse_candidates`; one pricing for a scheme without one), each
    ``(reuse distance, phases, groups, predicted elements per (op, group), ratio, order, pattern match)``
    (:func:`price_against`)."""
    regimes = reuse_candidates(pricing) if priced_by_reuse(sch) else [None]
    return [price_against(sch, m, mkeys, m.pattern_groups, replace(pricing, reuse_distance=d))
            for d in regimes]


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
    frozen, how, again, kept_share = 0.0, "", 0.0, 0.0
    if chosen is None and frozen_at is not None:
        chosen, frozen, how = frozen_at
    recomputed = 0.0
    if chosen is None and tried[0][0] is not None and m.n > 1:
        kept_keys = _at_kept(sch, m, mkeys, seen.pricing)[3]
        # where the first micro-batch gathers more than the later ones: before 0.19.3, the modules the
        # backward uses last kept into the next (read first: the share gathered again alone is their mean)
        again, kept_share = _kept_and_regathered(seen, kept_keys)
        if not again:
            chosen, again = _part_regathered(sch, seen, kept_keys)
        if chosen is None and not again:
            recomputed = _recomputed(seen, kept_keys)
    d, phases, fine, pkeys, ratio, order, pattern_match = chosen or tried[0]
    pred = merged(fine)
    predicted = sum(b for *_, b in pred)
    volume_match = math.isclose(ratio, 1.0, rel_tol=RTOL)
    reused, kept, share, once, part = _regimes(name, m, mkeys, pkeys, phases, d, order, pattern_match,
                                               int(pricing.micro_batches), seen.units)
    share = share or kept_share
    regime = "" if d is None else reuse_regime(d, m.psi)
    if again:  # priced at the distance the formula gives that share at, which is not the run's: none said
        d, regime = None, (f"{again:.3g}Ψ gathered again in backward, read from the trace: past "
                           "stage3_max_reuse_distance")
    elif how == "pass":  # priced with every parameter kept; what the backward gathers again is in the note
        d, regime = None, ""
    regathered = pattern_match and d is not None and regathered_elements(d, m.psi) >= m.psi
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
    (:func:`price_against`), the price the readings of what a trace shows its backward gather start from."""
    return price_against(sch, m, mkeys, m.pattern_groups, replace(pricing, reuse_distance=2.0 * m.psi))


def _recomputed(seen: _Seen, kept_keys: dict) -> float:
    """The share of Ψ, more than Ψ, DeepSpeed ZeRO-3's backward gathers (:func:`~.regather.recomputed_share`,
    from its elements per (op, group) with every parameter kept for the backward, ``kept_keys``); 0 where
    the trace does not read so."""
    m = seen.m
    return recomputed_share(seen.mkeys, kept_keys, int(seen.pricing.micro_batches), m.psi,
                            m.gathered_in_backward, seen.units)


def _kept_and_regathered(seen: _Seen, kept_keys: dict) -> tuple[float, float]:
    """(r, b): DeepSpeed ZeRO-3 past its reuse distance, r of Ψ gathered again in each micro-batch's backward,
    and before 0.19.3 b of Ψ kept gathered from one micro-batch into the next (the modules its backward uses
    last): the first micro-batch of a step gathers (1 + r)Ψ, each later one (1 + r - b)Ψ
    (:func:`~.regimes.first_and_later_gathers`), read as :func:`~.regather.regathered_share` reads the
    step with the later ones gathering as the first; (0, 0) where the trace does not read so."""
    m = seen.m
    blocks = first_and_later_gathers(m)
    gather = gather_apart(seen.mkeys, kept_keys)
    if blocks is None or gather is None or m.psi <= 0:
        return 0.0, 0.0
    first, later = blocks
    k = int(seen.pricing.micro_batches)
    kept = (first - later) / m.psi
    if not RTOL < kept < 1 or not math.isclose(seen.mkeys[gather], first + (k - 1) * later, rel_tol=RTOL):
        return 0.0, 0.0
    as_first = {**seen.mkeys, gather: k * first}
    again = regathered_share(as_first, kept_keys, k, m.psi, None, seen.units,
                             functools.partial(ranks_gather_alike, m))
    return (again, kept) if again else (0.0, 0.0)


def _part_regathered(sch, seen: _Seen, kept_keys: dict) -> tuple[tuple | None, float]:
    """DeepSpeed ZeRO-3 priced with the share of Ψ the trace shows gathered again in the backward
    (:func:`~.regather.regathered_share`, from its elements per (op, group) with every parameter kept for the
    backward, ``kept_keys``), at the reuse distance its formula, Max(0, Ψ - D/2), gives that share at: (that
    pricing (:func:`price_against`), the share), or (None, 0) where the trace does not read so."""
    m, mkeys, pricing = seen.m, seen.mkeys, seen.pricing
    share = regathered_share(mkeys, kept_keys, int(pricing.micro_batches), m.psi, m.gathered_in_backward,
                             seen.units, functools.partial(ranks_gather_alike, m))
    if not share:
        return None, 0.0
    at = price_against(sch, m, mkeys, m.pattern_groups,
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
    pred = merged(half)
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

