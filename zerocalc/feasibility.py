"""The verdict on DeepSpeed issue #4582, from simulated ranks that execute each scheme on real numbers.

The question: *can ZeRO-2's reduce-scatter be skipped by placing each gradient in the partition of its
optimizer state?* :func:`run_feasibility` simulates every scheme (:mod:`zerocalc.sim`), compares each
update with single-process data-parallel training and each byte count with the symbolic model
(exactly, as rationals), tests the conditions under which the colocated proposal is exact, derives
the implementation plan (:mod:`zerocalc.plan`) and states the verdict.

The simulation's names (the world, its collectives, the training loop, the runners) are re-exported
here, where they were first published.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np

from zerocalc.errors import ConfigError
from zerocalc.plan import DEFAULT_PLAN_COMM_BYTES, PlanItem, build_plan, in_network_sentence, saving_sentence
from zerocalc.plan_run import plan_run
from zerocalc.sim.accounting import model_bytes_by_phase, model_bytes_exact, simulated_bytes_by_collective
from zerocalc.sim.compare import REL_TOL, SchemeRun, _check_scheme, _diff, simulate_scheme
from zerocalc.sim.quantize import QUANT_BLOCK, Packet, dequantize, quantize
from zerocalc.sim.runners import SIMULATED_SCHEMES
from zerocalc.sim.training import (
    MAX_RANKS,
    MAX_STEPS,
    MLP,
    Adam,
    FeasibilityConfig,
    micro_batch,
    simulate_reference,
    simulate_shardwise_local,
)
from zerocalc.sim.world import (
    WIRE_ELEM_BYTES,
    World,
    all_gather,
    all_reduce,
    all_to_all,
    broadcast,
    chunk_bounds,
    reduce,
    reduce_scatter,
)
from zerocalc.units import format_diff

__all__ = [
    "DEFAULT_PLAN_COMM_BYTES",
    "MAX_RANKS",
    "MAX_STEPS",
    "MLP",
    "QUANT_BLOCK",
    "REL_TOL",
    "SIMULATED_SCHEMES",
    "WIRE_ELEM_BYTES",
    "Adam",
    "FeasibilityConfig",
    "FeasibilityResult",
    "Packet",
    "PlanItem",
    "SchemeRun",
    "World",
    "all_gather",
    "all_reduce",
    "all_to_all",
    "broadcast",
    "chunk_bounds",
    "dequantize",
    "lower_bound_bytes",
    "micro_batch",
    "model_bytes_by_phase",
    "model_bytes_exact",
    "quantize",
    "reduce",
    "reduce_scatter",
    "run_feasibility",
    "saving_sentence",
    "simulate_reference",
    "simulate_scheme",
    "simulate_shardwise_local",
    "simulated_bytes_by_collective",
]


def lower_bound_bytes(psi: int, n: int, elem_bytes: int = WIRE_ELEM_BYTES) -> Fraction:
    """Bytes per rank that the gradient reduction of any exact data-parallel scheme must send, on
    average over ranks: ``(N-1)/N · Ψ · b``.

    Why: the update of each parameter needs the sum of N gradient values that start on N different
    ranks (ZeRO §2.1). Whoever adds them up — another rank, or a switch — each rank's values for the
    elements it does not own must leave it at least once: ``(N-1)/N·Ψ`` elements per rank on average,
    the reduce-scatter bound of Patarasuk & Yuan (JPDC 2009), which a ring meets (ZeRO §2.1, §5.2). Where
    the owner of an element sits does not enter: colocating gradients with their optimizer shard
    changes where the sum is needed, not how many contributions it has.

    What goes below what a ring step sends: in-network reduction (NVLS, SHARP: the switch sums, so a
    rank's all-reduce sends about Ψ(1 + 1/N) instead of 2(N-1)/N·Ψ, :mod:`zerocalc.in_network`) — exact,
    but not below this bound. What goes below the bound itself changes the update: fewer bits per value
    (quantisation, ZeRO++, 1-bit Adam), low-rank or sparse gradients (PowerSGD, top-k), or fewer
    reductions (periodic averaging, local SGD / DiLoCo).
    """
    return Fraction((n - 1) * psi * elem_bytes, n)


@dataclass(frozen=True)
class FeasibilityResult:
    """Everything :func:`run_feasibility` found; :meth:`to_dict` is the JSON contract of
    ``zerocalc feasibility --format json``."""

    config: FeasibilityConfig
    runs: tuple[SchemeRun, ...]
    model_bytes: dict[str, Fraction]
    lower_bound_bytes_per_rank: Fraction
    conditions: tuple[dict, ...]
    divergence: tuple[dict, ...]
    plan: tuple[PlanItem, ...]
    plan_basis: dict
    verdict: str
    #: the verdict without its last sentence (the plan's saving at ``plan_basis``): what the simulation found
    findings: str = ""
    #: schemes simulated with in-network reduction (switches of ``plan_basis["in_network"]``), the
    #: evidence of the plan's in-network items
    in_network_runs: tuple[SchemeRun, ...] = ()
    #: what in-network reduction does to the #4582 question, at ``plan_basis`` (part of ``verdict``)
    in_network_finding: str = ""

    def records(self) -> list[dict]:
        """One JSON-ready record per simulated scheme."""
        from zerocalc.schemes import SCHEME_ALIASES, get_scheme

        out = []
        for r in self.runs:
            mb = self.model_bytes[r.scheme]
            sim = r.bytes_per_rank_exact
            out.append({
                "scheme": r.scheme,
                "n": r.n,
                "gpus_per_node": r.gpus_per_node,
                "psi": r.psi,
                "steps": r.steps,
                "wire_elem_bytes": WIRE_ELEM_BYTES,
                "bytes_per_rank_simulated": None if sim is None else float(sim),
                "bytes_per_rank_model": float(mb),
                "bytes_per_rank_simulated_exact": None if sim is None else str(sim),
                "bytes_per_rank_model_exact": str(mb),
                "bytes_match": None if sim is None else sim == mb,
                "bytes_sent_per_rank_min": _f(r.bytes_sent_per_rank_min),
                "bytes_sent_per_rank_max": _f(r.bytes_sent_per_rank_max),
                "bytes_received_per_rank_simulated": _f(r.bytes_received_per_rank_exact),
                "gradient_bytes_per_rank_simulated": _f(r.gradient_bytes_per_rank_exact),
                "gradient_lower_bound_bytes_per_rank": float(self.lower_bound_bytes_per_rank),
                "metadata_bytes_per_rank_simulated": _f(r.metadata_bytes_per_rank),
                "optimizer_state_elements_per_rank": r.optimizer_state_elements_per_rank_max,
                "max_abs_diff": r.max_abs_diff,
                "max_rel_diff": r.max_rel_diff,
                "tolerance_rel": REL_TOL,
                "equivalent": r.equivalent,
                "equivalent_to_dp_model": get_scheme(r.scheme).equivalent_at(r.n),
                # names that stand for this scheme (deepspeed-zero12, the one name of DeepSpeed ZeRO-1 and
                # ZeRO-2 before they were told apart, is deepspeed-zero2's)
                "aliases": [a for a, t in SCHEME_ALIASES.items() if t == r.scheme],
            })
        return out

    def _in_network_record(self, r: SchemeRun) -> dict:
        from zerocalc.sim.accounting import model_link_bytes_exact

        model = model_link_bytes_exact(r.scheme, psi=r.psi, n=r.n, gpus_per_node=r.gpus_per_node,
                                       comm_bytes=WIRE_ELEM_BYTES, in_network=r.in_network,
                                       switch_ops=r.switch_ops, micro_batches=r.micro_batches)
        links = ("intra_sent", "intra_received", "inter_sent", "inter_received")
        return {"scheme": r.scheme, "n": r.n, "gpus_per_node": r.gpus_per_node, "psi": r.psi,
                "steps": r.steps, "in_network": "+".join(r.in_network), "switch_ops": list(r.switch_ops),
                "link_bytes_per_rank_simulated": {k: _f(r.link_bytes.get(k)) for k in links},
                "link_bytes_per_rank_model": {k: float(model[k]) for k in links},
                "bytes_match": None if not r.steps else all(r.link_bytes[k] == model[k] for k in links),
                "max_rel_diff": r.max_rel_diff, "equivalent": r.equivalent}

    def to_dict(self) -> dict:
        c = self.config
        return {
            "verdict": self.verdict,
            "plan": [p.to_dict() for p in self.plan],
            "plan_basis": self.plan_basis,
            "schemes": self.records(),
            "lower_bound": {
                "bytes_per_rank": float(self.lower_bound_bytes_per_rank),
                "formula": "(N-1)/N * Psi * b",
                "source": "Patarasuk & Yuan, JPDC 2009 (reduce-scatter bound); ZeRO §2.1",
                "below_ring_step": "in-network reduction (NVLS, SHARP): exact, about Psi(1 + 1/N) per "
                                   "all-reduce instead of 2(N-1)/N Psi, not below this bound",
                "below_bound": ["fewer bits (quantisation, ZeRO++, 1-bit / 0/1 Adam)",
                                "low-rank or sparse gradients (PowerSGD, top-k)",
                                "fewer reductions (periodic averaging: local SGD, DiLoCo)"],
            },
            "in_network": {
                "kinds": self.plan_basis.get("in_network", ""),
                "finding": self.in_network_finding,
                "schemes": [self._in_network_record(r) for r in self.in_network_runs],
            },
            "conditions": list(self.conditions),
            "divergence": list(self.divergence),
            "config": {"n": c.n, "steps": c.steps, "seed": c.seed, "gpus_per_node": c.g,
                       "micro_batch": c.micro_batch, "micro_batches": c.micro_batches, "psi": c.model.psi,
                       "lr": c.optimizer.lr,
                       "wire_elem_bytes": WIRE_ELEM_BYTES, "tolerance_rel": REL_TOL},
        }


def _f(x: Fraction | None) -> float | None:
    return None if x is None else float(x)


def _verdict(cfg: FeasibilityConfig, runs: dict[str, SchemeRun], col: SchemeRun,
             conditions: tuple[dict, ...], lower: Fraction, plan: tuple[PlanItem, ...],
             comm_bytes: int, basis: str) -> tuple[str, str]:
    """(what the simulation found, what the plan saves at ``basis``): sentences built from the numbers of
    this run."""
    exact = [r for r in runs.values() if r.scheme != "colocated" and r.equivalent]
    claimed = [r for r in runs.values() if r.scheme != "colocated" and r.scheme != "zeropp"]
    by_cond = {c["condition"]: c for c in conditions}
    n1, shared = by_cond["N = 1"], by_cond["every rank on the same micro-batch"]
    col_grad = col.gradient_bytes_per_rank_exact or Fraction(0)
    if col.steps == 0:
        first = ("No step was simulated (steps = 0), so nothing distinguishes the colocated scheme from data "
                 "parallelism yet; run with steps ≥ 1 to compare updates.")
    elif col.equivalent:
        why = "N = 1" if cfg.n == 1 else "every rank sees the same micro-batch"
        first = (f"Here the colocated scheme matches data-parallel training (max rel diff "
                 f"{format_diff(col.max_rel_diff)}), but only because {why}: there is no cross-rank "
                 "gradient sum "
                 f"to skip, and the (N-1)/N·Ψ·b lower bound for the gradient reduction is {float(lower):g} "
                 "bytes.")
    else:
        first = (f"No: the reduce-scatter is the sum of gradients over ranks, not a relocation — skipping "
                 f"it, the colocated scheme sends {float(col_grad):g} gradient bytes per rank where any "
                 f"exact scheme needs at least (N-1)/N·Ψ·b = {float(lower):g} (here Ψ = {cfg.model.psi} "
                 f"parameters of the simulated MLP, b = {WIRE_ELEM_BYTES} bytes; Patarasuk & Yuan 2009), and "
                 f"after {col.steps} steps on N = {cfg.n} ranks its parameters differ from data-parallel "
                 f"training by {format_diff(col.max_rel_diff)} (relative), "
                 f"{col.max_rel_diff / REL_TOL:.0e}× the "
                 f"{REL_TOL:g} tolerance" + (f" that {len(exact)} of the {len(claimed)} exact schemes "
                                              "simulated meet." if claimed else "."))
    div = col.diff_by_step
    grow = (f"; its divergence grows from {div[0]:.1e} after one step to {div[-1]:.1e} after {len(div)}"
            if len(div) > 1 and not col.equivalent else "")
    second = (f"It is exact only when no data parallelism is left — N = 1 (max rel diff "
              f"{format_diff(n1['max_rel_diff'])}) or all ranks on one micro-batch "
              f"({format_diff(shared['max_rel_diff'])}) — "
              f"otherwise each parameter shard is trained on its own rank's 1/N of the batch, a "
              f"local-SGD-like update{grow}.")
    top = next((p for p in plan if p.update == "exact" and not p.slower and not p.in_network
                and (p.bytes_saved_per_rank or 0) > 0), None)
    third = saving_sentence(None if top is None else top.action, None if top is None else top.from_scheme,
                            None if top is None else top.to_scheme,
                            None if top is None else top.bytes_saved_over_psi,
                            basis)
    return " ".join((first, second)), third


def run_feasibility(cfg: FeasibilityConfig | None = None, schemes: Sequence[str] | None = None, *,
                    plan_psi: int = 7_500_000_000, plan_comm_bytes: int = DEFAULT_PLAN_COMM_BYTES,
                    plan_period: int = 4, plan_topology=None, plan_n: int | None = None,
                    plan_gpus_per_node: int | None = None, plan_time_model: str | None = None,
                    plan_nccl: dict | None = None, plan_micro_batches: int | None = None,
                    plan_tp: int = 1, plan_pp: int = 1, plan_param_bytes=None, plan_grad_bytes=None,
                    progress=None) -> FeasibilityResult:
    """Simulate ``schemes`` (default: all) and the colocated proposal, compare each with the reference
    and with the symbolic model, test the conditions under which colocated is exact, simulate the
    in-network reductions the plan prices, and derive the plan and the verdict.

    The plan is priced at ``plan_psi`` parameters, ``plan_comm_bytes`` per element, N = ``plan_n`` and
    G = ``plan_gpus_per_node`` (default: the simulation's), on ``plan_topology`` (a preset name or a
    :class:`zerocalc.topology.Topology`; ``None``: bytes only, no time), timed by ``plan_time_model``
    (:func:`plan_pricing`: ``"nccl"``, NCCL's cost model under ``plan_nccl``'s ``nccl_version`` /
    ``nccl_algo`` / ``nccl_proto``; ``"ring"``, the α-β model; default NCCL's where the topology gives
    what it needs), per optimizer step of ``plan_micro_batches`` (default: the simulation's
    micro-batches; each scheme reduces in every micro-batch or once per step as its implementation
    does). With ``plan_tp`` / ``plan_pp`` above 1, ``plan_n`` is the run's GPUs and the plan is of its
    data-parallel group: N = ``plan_n``/(tp·pp) ranks holding Ψ/(tp·pp) parameters each, placed as
    ``zerocalc table --tp --pp`` places them (:func:`zerocalc.evaluate.data_parallel_layout`).
    ``plan_param_bytes`` / ``plan_grad_bytes``: the wire widths of the plan's parameter- and gradient-side
    collectives under mixed precision (default ``plan_comm_bytes``). ``progress(done, total, what)``,
    when given, is called as the simulations go (the CLI draws a bar with it)."""
    cfg = cfg if cfg is not None else FeasibilityConfig()
    names = _scheme_names(schemes)
    if plan_period < 2:
        raise ConfigError(f"must be ≥ 2, got {plan_period}", option="--plan-period")
    topology, world, node_g = _plan_cluster(cfg, plan_topology, plan_n, plan_gpus_per_node)
    run = plan_run(psi=plan_psi, world=world, node_gpus=node_g, comm_bytes=plan_comm_bytes,
                   micro_batches=cfg.micro_batches if plan_micro_batches is None else plan_micro_batches,
                   tp=plan_tp, pp=plan_pp, param_bytes=plan_param_bytes, grad_bytes=plan_grad_bytes)
    pricing, time_model = plan_pricing(topology, plan_time_model, plan_nccl)
    offered = tuple(getattr(topology, "in_network_reduction", None) or ())
    kinds = offered or ("nvls", "sharp")
    from zerocalc.plan import in_network_candidates

    switched = [(s, ops) for s, ops in in_network_candidates() if s in names]
    bar = _Progress(progress, len(names) + len(switched) + 5)
    ref, runs, col = _simulate_schemes(cfg, names, bar)
    psi = cfg.model.psi
    model_exact = {name: model_bytes_exact(name, psi=psi, n=cfg.n, gpus_per_node=cfg.g,
                                           in_network=cfg.in_network, micro_batches=cfg.micro_batches)
                   for name in names}
    in_network_runs = _simulate_in_network(cfg, switched, kinds, ref, bar)
    lower = lower_bound_bytes(psi, cfg.n)
    conditions = _conditions(cfg, col, ref)
    for _ in range(4):
        bar.tick("conditions")
    divergence = tuple({"step": t + 1, "max_rel_diff": d} for t, d in enumerate(col.diff_by_step))
    plan = build_plan(runs, **run.group, period=plan_period, topology=topology,
                      in_network_runs=in_network_runs, in_network=kinds, pricing=pricing,
                      run=run.pricing_sizes)
    basis = run.words(topology)
    findings, saving = _verdict(cfg, runs, col, conditions, lower, plan, plan_comm_bytes, basis)
    from zerocalc.units import format_seconds

    algo = (plan_nccl or {}).get("nccl_algo") if time_model == "nccl" else None
    finding = in_network_sentence(plan, **run.group, basis=basis, format_time=format_seconds, nccl_algo=algo)
    return FeasibilityResult(
        config=cfg, runs=tuple(runs.values()), model_bytes=model_exact,
        lower_bound_bytes_per_rank=lower, conditions=conditions, divergence=divergence, plan=plan,
        plan_basis={**run.basis(plan_period), **_timing_basis(topology, time_model, pricing, plan_nccl),
                    "in_network": "+".join(kinds),
                    "in_network_available": None if topology is None else all(k in offered for k in kinds)},
        verdict=" ".join(x for x in (findings, saving, finding) if x), findings=findings,
        in_network_runs=tuple(in_network_runs.values()), in_network_finding=finding,
    )


def _timing_basis(topology, time_model: str, pricing, nccl: dict | None) -> dict:
    """How the plan was timed, for ``plan_basis``: its ``algorithm``, ``time_model`` and its name, the
    bucket (``call_bytes``, ``implementation_buckets``) and the ``topology``."""
    by_nccl = time_model == "nccl"
    return {"algorithm": "nccl" if by_nccl else "ring",
            "time_model": time_model if topology is not None else None,
            "call_bytes": _call_bytes(nccl) if by_nccl else None,
            "implementation_buckets": by_nccl and _implementation_buckets(nccl),
            "time_model_name": None if topology is None else pricing.model if pricing is not None
            else "the ring α-β model",
            "topology": None if topology is None else topology.name}


def _implementation_buckets(nccl: dict | None) -> bool:
    """Whether the plan is priced in each implementation's own buckets (``--bucket implementation``)."""
    from zerocalc.buckets import IMPLEMENTATION

    return (nccl or {}).get("call_bytes") == IMPLEMENTATION


def _call_bytes(nccl: dict | None) -> float | None:
    """The plan's one bucket size (``--bucket SIZE``), else ``None``."""
    return None if _implementation_buckets(nccl) else (nccl or {}).get("call_bytes")


def plan_pricing(topology, time_model: str | None, nccl: dict | None = None):
    """``(pricing, time model)``: how the plan on ``topology`` is timed. ``time_model`` ``"nccl"``:
    NCCL's cost model (RCCL's on AMD GPUs) under ``nccl`` (``nccl_version``, ``nccl_algo``,
    ``nccl_proto``, ``call_bytes``: the bucket), a topology it cannot price being a :class:`ConfigError`
    naming what it lacks (a bucket without NCCL's model, one naming ``--bucket``);
    ``"ring"``: the α-β model (``pricing`` ``None``); ``None``: NCCL's where the topology gives what it
    needs, else the α-β model. ``pricing``: a :class:`zerocalc.plan_pricing.NcclPlanPricing`."""
    from zerocalc.plan_pricing import TIME_MODELS, NcclPlanPricing, nccl_priceable

    if time_model is not None and time_model not in TIME_MODELS:
        raise ConfigError(f"must be one of {', '.join(TIME_MODELS)}, got {time_model!r}",
                          option="--time-model")
    bucket = (nccl or {}).get("call_bytes")
    if topology is None or time_model == "ring" or (time_model is None and not nccl_priceable(topology)):
        if bucket is not None and topology is not None:
            raise ConfigError("the plan is priced by the α-β ring model here, one call per phase; a bucket "
                              "is NCCL's model's (--time-model nccl on a topology that gives what it needs)",
                              option="--bucket")
        return None, "ring"
    if not nccl_priceable(topology):
        from zerocalc.nccl_pricing import missing_fields

        raise ConfigError(f"topology {topology.name!r} does not give {', '.join(missing_fields(topology))}, "
                          "which NCCL's cost model needs (--time-model ring prices the plan by the α-β "
                          "model)", option="--time-model")
    pricing = NcclPlanPricing(**(nccl or {}))
    pricing.check(topology)
    return pricing, "nccl"


def _scheme_names(schemes: Sequence[str] | None) -> list[str]:
    """The schemes to simulate, each checked, in order, without repeats (default: all)."""
    names = list(SIMULATED_SCHEMES) if schemes is None else [_check_scheme(s) for s in schemes]
    names = list(dict.fromkeys(names))
    if not names:
        raise ConfigError("no scheme given; name at least one, e.g. dp,colocated (or omit it for all)",
                          option="--schemes")
    return names


def _plan_cluster(cfg: FeasibilityConfig, plan_topology, plan_n: int | None,
                  plan_gpus_per_node: int | None):
    """The plan's cluster: its topology (``None`` without one), N and G, the layout checked with the
    errors naming ``--plan-n`` rather than the simulation's ``--n``."""
    topology = None
    if plan_topology is not None:
        from zerocalc.topology import get_topology

        topology = get_topology(plan_topology)
    p_n = cfg.n if plan_n is None else plan_n
    p_g = plan_gpus_per_node if plan_gpus_per_node is not None else (
        cfg.g if plan_n is None or topology is None else topology.gpus_per_node)
    if plan_n is not None or plan_gpus_per_node is not None:
        from zerocalc.evaluate import check_layout

        try:
            p_g = int(check_layout(p_n, p_g))
        except ConfigError as exc:  # the cluster's N is --plan-n here, not the simulation's --n
            option = "/".join("--plan-n" if o == "--n" else o for o in (exc.option or "").split("/"))
            raise ConfigError(exc.message, option=option or None) from None
    return topology, p_n, p_g


class _Progress:
    """Counts the simulations done and reports each to ``progress(done, total, what)`` when given."""

    def __init__(self, progress, total: int) -> None:
        self.progress, self.total, self.done = progress, total, 0

    def start(self, what: str) -> None:
        if self.progress is not None:
            self.progress(0, self.total, what)

    def tick(self, what: str) -> None:
        self.done += 1
        if self.progress is not None:
            self.progress(self.done, self.total, what)


def _simulate_schemes(cfg: FeasibilityConfig, names: list[str], bar: _Progress):
    """The reference training, each scheme's run, and the colocated run (simulated if not named)."""
    bar.start("reference training")
    ref = simulate_reference(cfg)
    bar.tick("reference training")
    runs = {}
    for name in names:
        runs[name] = simulate_scheme(name, cfg, ref)
        bar.tick(name)
    col = runs.get("colocated") or simulate_scheme("colocated", cfg, ref)
    return ref, runs, col


def _simulate_in_network(cfg: FeasibilityConfig, switched, kinds: tuple[str, ...], ref,
                         bar: _Progress) -> dict:
    """Each (scheme, ops) the plan could switch to an in-network reduction, simulated with it."""
    in_network_runs = {}
    for name, ops in switched:
        switched_cfg = replace(cfg, in_network=kinds, switch_ops=ops)
        in_network_runs[(name, ops)] = simulate_scheme(name, switched_cfg, ref)
        bar.tick(f"{name} with in-network reduction")
    return in_network_runs


def _condition(label: str, c: FeasibilityConfig, theta: np.ndarray | None = None,
               ref_theta: np.ndarray | None = None) -> dict:
    """Colocated's final parameters against a reference under one condition (simulated when
    ``theta`` is not given)."""
    if theta is None:
        c_ref = simulate_reference(c)
        theta, ref_theta = simulate_scheme("colocated", c, c_ref).final_params, c_ref[-1]
    a, r = _diff(theta, ref_theta)
    return {"condition": label, "n": c.n, "shared_micro_batch": c.shared_micro_batch, "steps": c.steps,
            "compared_with": ("shard-wise local training" if "shard" in label
                              else "data-parallel reference"),
            "max_abs_diff": a, "max_rel_diff": r,
            "equivalent": None if c.steps == 0 else r <= REL_TOL}


def _conditions(cfg: FeasibilityConfig, col, ref) -> tuple[dict, ...]:
    """The four conditions under which colocated is tested for exactness."""
    return (
        _condition("N = 1", replace(cfg, n=1, gpus_per_node=None, in_network=())),
        _condition("every rank on the same micro-batch", replace(cfg, shared_micro_batch=True)),
        _condition("distinct micro-batches (data parallelism)", cfg, col.final_params, ref[-1]),
        _condition("each shard trained on its own rank's micro-batch", cfg, col.final_params,
                   simulate_shardwise_local(cfg)),
    )
