"""Compare: every scheme's predicted step against the measured one, by volume and by pattern.

A scheme's phases (:mod:`zerocalc.schemes`) evaluated at the trace's Ψ, N and element type, merged
per op, set against the measured pattern (which ops, how much, in what order); the consistent schemes
best first, and the groups the trace cannot tell apart. Sources: DeepSpeed issues #5758 and #6463 and
PyTorch issue #69591 (what implementations send).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from zerocalc.errors import ConfigError
from zerocalc.validate.accounting import RTOL, ring_bytes_factor
from zerocalc.validate.explain import NO_CROSS_RANK_TRAFFIC, _explain
from zerocalc.validate.fit import AlphaBetaFit
from zerocalc.validate.measure import Measurement


@dataclass(frozen=True)
class SchemeComparison:
    """One scheme against the measured step: volume, pattern and, if it differs, why."""

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

    def as_record(self, psi: float) -> dict:
        def pat(p):
            return [{"op": o, "calls": c, "elements_over_psi": e / psi, "bytes": b} for o, c, e, b in p]

        return {
            "scheme": self.scheme,
            "predicted_bytes_per_rank_per_step": self.predicted_bytes_per_rank_per_step,
            "measured_bytes_per_rank_per_step": self.measured_bytes_per_rank_per_step,
            "ratio": self.ratio,
            "volume_match": self.volume_match,
            "pattern_match": self.pattern_match,
            "order": self.order,
            "predicted_pattern": pat(self.predicted_pattern),
            "measured_pattern": pat(self.measured_pattern),
            "explanation": self.explanation,
            "equivalent_to_dp": self.equivalent_to_dp,
            "predicted_time_s": None if math.isnan(self.predicted_time_s) else self.predicted_time_s,
            "matches_if_reused": self.matches_if_reused,
        }


def _gpus_per_node(n: int, gpus_per_node: int | None) -> int:
    if gpus_per_node is None:
        return n if n <= 8 or n % 8 else 8
    if gpus_per_node < 1:  # as ``table`` says it (evaluate.py)
        raise ConfigError("must be a whole number ≥ 1", option="--gpus-per-node")
    if n > gpus_per_node and n % gpus_per_node:
        raise ConfigError(f"{gpus_per_node} does not divide N = {n}", option="--gpus-per-node")
    return min(gpus_per_node, n)


def _phase_numbers(scheme, *, psi: float, n: int, g: int, comm_bytes: float):
    """A scheme's phases as numbers, in order: (op, group size, calls, elements, bytes per element).

    Phases on a group of one rank move nothing and are left out.
    """
    from zerocalc import symbols as S

    vals = {S.Psi: psi, S.N: n, S.G: g, S.b_comm: comm_bytes, S.b_param: comm_bytes, S.b_grad: comm_bytes}
    for ph in scheme.phases:
        p = float(ph.group.size.subs(vals))
        if p > 1:
            yield (str(ph.collective.value), p, sympy_float(ph.calls, vals), sympy_float(ph.elements, vals),
                   sympy_float(ph.elem_bytes, vals))


def predicted_pattern(scheme, *, psi: float, n: int, g: int, comm_bytes: float):
    """A scheme's phases as numbers, merged per op in first-appearance order: (op, calls, elements, bytes).

    Phases on a group of one rank move nothing and are left out. Bytes per rank under the
    ring accounting of :func:`ring_bytes_factor`, the same as ``Scheme.bytes_per_rank()``.
    """
    acc: dict[str, list[float]] = {}
    for op, p, calls, elems, eb in _phase_numbers(scheme, psi=psi, n=n, g=g, comm_bytes=comm_bytes):
        a = acc.setdefault(op, [0.0, 0.0, 0.0])
        a[0] += calls
        a[1] += calls * elems
        a[2] += calls * ring_bytes_factor(op, p) * elems * eb
    return tuple((o, *v) for o, v in acc.items())


def sympy_float(expr, vals) -> float:
    """A sympy expression (or number) evaluated at ``vals``."""
    return float(expr.subs(vals)) if hasattr(expr, "subs") else float(expr)


def _rotations(seq: tuple) -> list[tuple]:
    return [seq[i:] + seq[:i] for i in range(len(seq))] or [()]


def compare(
    m: Measurement,
    schemes: Sequence[str] | None = None,
    *,
    gpus_per_node: int | None = None,
    fit: AlphaBetaFit | None = None,
) -> list[SchemeComparison]:
    """Every scheme (or the ones named) against the measured step traffic, in SCHEME_NAMES order."""
    from zerocalc.schemes import SCHEME_NAMES, get_scheme

    names = list(SCHEME_NAMES) if not schemes else [get_scheme(s).name for s in schemes]
    g = _gpus_per_node(m.n, gpus_per_node)
    meas = m.pattern
    measured = m.bytes_per_rank_per_step
    out = []
    for name in names:
        sch = get_scheme(name)
        pred = predicted_pattern(sch, psi=m.psi, n=m.n, g=g, comm_bytes=m.comm_elem_bytes)
        predicted = sum(b for *_, b in pred)
        ratio = measured / predicted if predicted > 0 else (math.inf if measured > 0 else 1.0)
        volume_match = math.isclose(ratio, 1.0, rel_tol=RTOL)
        mo, po = tuple(o for o, *_ in meas), tuple(o for o, *_ in pred)
        if mo == po:
            order = "same"
        elif set(mo) == set(po) and len(mo) == len(po) and mo in _rotations(po):
            order = "rotated"
        else:
            order = "different"
        per_op_ok = set(mo) == set(po) and all(
            math.isclose(b, dict((o, bb) for o, *_, bb in pred)[o], rel_tol=RTOL) for o, *_, b in meas
        )
        pattern_match = per_op_ok and order != "different"
        # the same with the scheme's all-gathers halved: the forward gather kept for backward
        reused = (not pattern_match and order != "different" and set(mo) == set(po) and "all_gather" in po
                  and all(math.isclose(b, dict((o, bb * (0.5 if o == "all_gather" else 1.0))
                                               for o, *_, bb in pred)[o], rel_tol=RTOL) for o, *_, b in meas))
        if m.n == 1:
            ratio, volume_match, pattern_match, reused = math.nan, False, False, False
        t_pred = math.nan
        if fit is not None:
            t_pred = sum(calls * fit.predict_s(op, elems * eb, p) for op, p, calls, elems, eb
                         in _phase_numbers(sch, psi=m.psi, n=m.n, g=g, comm_bytes=m.comm_elem_bytes))
        out.append(SchemeComparison(
            scheme=name, predicted_bytes_per_rank_per_step=predicted,
            measured_bytes_per_rank_per_step=measured,
            ratio=ratio, volume_match=volume_match, pattern_match=pattern_match, order=order,
            predicted_pattern=pred, measured_pattern=meas,
            explanation=(NO_CROSS_RANK_TRAFFIC if m.n == 1
                         else _explain(name, pred, meas, ratio, order, m.psi)),
            equivalent_to_dp=sch.equivalent_to_dp, predicted_time_s=t_pred, matches_if_reused=reused,
        ))
    return out


def consistent(comparisons: Sequence[SchemeComparison]) -> list[str]:
    """Names of the schemes whose pattern and volume match, best first.

    Best = same order before rotated order, then the closer volume; ties keep the scheme
    order of :data:`zerocalc.schemes.SCHEME_NAMES`.
    """
    ok = [c for c in comparisons if c.pattern_match]
    ok.sort(key=lambda c: (c.order != "same", abs(math.log(c.ratio)) if c.ratio > 0 else math.inf))
    return [c.scheme for c in ok]


def indistinguishable(comparisons: Sequence[SchemeComparison]) -> list[list[str]]:
    """Groups of consistent schemes the trace cannot tell apart (same collectives, same volumes)."""
    groups: dict[tuple, list[str]] = {}
    for c in comparisons:
        if c.pattern_match:
            key = tuple(sorted((o, round(b)) for o, _, _, b in c.predicted_pattern))
            groups.setdefault(key, []).append(c.scheme)
    return [v for v in groups.values() if len(v) > 1]

