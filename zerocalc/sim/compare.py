"""Run a scheme on the simulated ranks and compare it with single-process training.

``max_rel_diff = max|θ − θ_ref| / max|θ_ref|`` after the last step; a scheme is *equivalent* when it is
at most :data:`REL_TOL`. Exact schemes differ from the reference only by the order of float64
additions in the reduction (≈1e-16 relative per step); Adam's normalised update keeps that small.

Bytes are averaged over the ranks (exact :class:`fractions.Fraction`), per step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from zerocalc.errors import UnknownNameError
from zerocalc.sim.runners import RUNNERS, SIMULATED_SCHEMES, _Sim
from zerocalc.sim.training import FeasibilityConfig, simulate_reference

__all__ = ["REL_TOL", "SchemeRun", "simulate_scheme"]

#: Relative tolerance of "equivalent to data parallelism": ``max|Δθ| / max|θ_ref| ≤ REL_TOL``.
REL_TOL = 1e-9


def _diff(theta: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    """(max|θ − θ_ref|, max|θ − θ_ref| / max|θ_ref|)."""
    d = float(np.abs(theta - ref).max(initial=0.0))
    scale = float(np.abs(ref).max(initial=0.0))
    return d, (d / scale if scale > 0 else d)


@dataclass(frozen=True)
class SchemeRun:
    """What one scheme did in one simulation.

    Bytes are per rank per step, averaged over ranks (exact rationals; floats for display), payload
    only; ``metadata_bytes_per_rank`` are the quantisation scales. ``by_phase`` maps
    ``"<collective>/<group>: <purpose>"`` to simulated bytes per rank per step.
    """

    scheme: str
    n: int
    gpus_per_node: int
    psi: int
    steps: int
    bytes_per_rank_exact: Fraction | None
    bytes_sent_per_rank_min: Fraction | None
    bytes_sent_per_rank_max: Fraction | None
    bytes_received_per_rank_exact: Fraction | None
    gradient_bytes_per_rank_exact: Fraction | None
    metadata_bytes_per_rank: Fraction | None
    by_phase: dict[str, Fraction]
    optimizer_state_elements_per_rank_max: int
    final_params: np.ndarray = field(repr=False)
    max_abs_diff: float = 0.0
    max_rel_diff: float = 0.0
    diff_by_step: tuple[float, ...] = ()
    #: ``"<link>_<direction>"`` (``intra_sent`` … ``inter_received``) -> bytes per rank per step, averaged
    link_bytes: dict[str, Fraction] = field(default_factory=dict)
    #: the in-network reduction the run's switches offered, and the collectives that went through them
    in_network: tuple[str, ...] = ()
    switch_ops: tuple[str, ...] = ()
    #: micro-batches per optimizer step (bytes are per optimizer step)
    micro_batches: int = 1

    @property
    def equivalent(self) -> bool | None:
        """Within :data:`REL_TOL` of the reference; ``None`` after 0 steps, when nothing was compared."""
        return None if self.steps == 0 else self.max_rel_diff <= REL_TOL


def _check_scheme(name: str) -> str:
    """A simulated scheme's name; an alias (``deepspeed-zero12``) gives the scheme it stands for."""
    from zerocalc.schemes import SCHEME_ALIASES

    name = SCHEME_ALIASES.get(name, name)
    if name not in RUNNERS:
        raise UnknownNameError("scheme", str(name), (*SIMULATED_SCHEMES, *SCHEME_ALIASES))
    return name


def simulate_scheme(name: str, cfg: FeasibilityConfig,
                    reference: list[np.ndarray] | None = None) -> SchemeRun:
    """Run ``cfg.steps`` steps of scheme ``name`` on ``cfg.n`` simulated ranks and compare every step's
    parameters with ``reference`` (computed with :func:`simulate_reference` when not given)."""
    name = _check_scheme(name)
    ref = reference if reference is not None else simulate_reference(cfg)
    sim = _Sim(cfg)
    step = RUNNERS[name](sim)
    theta = sim.theta0.copy()
    diffs = []
    for t in range(1, cfg.steps + 1):
        theta = step(t)
        diffs.append(_diff(theta, ref[t])[1])
    abs_d, rel_d = _diff(theta, ref[cfg.steps])
    w, n, k = sim.world, cfg.n, cfg.steps

    def mean(bits: Sequence[int]) -> Fraction | None:
        return Fraction(sum(bits), 8 * n * k) if k else None

    grad_bits = [sum(v[r] for key, v in w.by_phase.items() if key[2].startswith("gradient"))
                 for r in range(n)]
    return SchemeRun(
        scheme=name, n=n, gpus_per_node=cfg.g, psi=sim.psi, steps=k,
        bytes_per_rank_exact=mean(w.sent_bits),
        bytes_sent_per_rank_min=Fraction(min(w.sent_bits), 8 * k) if k else None,
        bytes_sent_per_rank_max=Fraction(max(w.sent_bits), 8 * k) if k else None,
        bytes_received_per_rank_exact=mean(w.recv_bits),
        gradient_bytes_per_rank_exact=mean(grad_bits),
        metadata_bytes_per_rank=mean(w.meta_bits),
        by_phase={f"{op}/{grp}: {purpose}": Fraction(sum(v), 8 * n * k) for (op, grp, purpose), v in
                  w.by_phase.items()} if k else {},
        optimizer_state_elements_per_rank_max=max(sim.opt_elements),
        final_params=theta, max_abs_diff=abs_d, max_rel_diff=rel_d, diff_by_step=tuple(diffs),
        link_bytes={f"{link}_{d}": Fraction(sum(v), 8 * n * k) for (link, d), v in w.link_bits.items()}
        if k else {},
        in_network=tuple(cfg.in_network), switch_ops=tuple(cfg.switch_ops) if cfg.in_network else (),
        micro_batches=cfg.micro_batches,
    )
