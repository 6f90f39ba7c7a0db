"""The feasibility simulation behind the verdict, its divergence (figure 4), and its plan priced
on the report's cluster.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from zerocalc.report.config import ReportConfig, topology_name
from zerocalc.units import format_bytes


def feasibility_result(config: ReportConfig):
    """The feasibility simulation behind section 7 (:func:`zerocalc.feasibility.run_feasibility`).

    Its plan is priced on the report's cluster: Ψ, N, G, topology and wire element size, timed as
    ``config.plan_time_model`` says under the report's NCCL version and ``NCCL_ALGO`` / ``NCCL_PROTO``,
    per optimizer step of the report's micro-batches (the simulation's too), on the data-parallel group of
    its tp / pp.
    """
    from fractions import Fraction

    from zerocalc.evaluate import dtype_bytes
    from zerocalc.feasibility import FeasibilityConfig, run_feasibility

    cfg = FeasibilityConfig(n=config.feasibility_n, steps=config.feasibility_steps, seed=config.seed,
                            micro_batches=config.micro_batches)
    def width(dtype: str | None):
        if dtype is None:
            return None
        w = Fraction(str(dtype_bytes(dtype)))
        return int(w) if w.denominator == 1 else w

    b = width(config.comm_dtype)
    return run_feasibility(cfg, plan_psi=int(config.psi), plan_comm_bytes=b,
                           plan_param_bytes=width(config.param_dtype),
                           plan_grad_bytes=width(config.grad_dtype),
                           plan_topology=config.topology, plan_n=config.n,
                           plan_gpus_per_node=config.gpus_per_node, plan_time_model=config.plan_time_model,
                           plan_nccl=plan_nccl(config), plan_tp=config.tp, plan_pp=config.pp)


def plan_nccl(config: ReportConfig) -> dict:
    """The report's NCCL options as :func:`zerocalc.feasibility.plan_pricing` takes them."""
    return dict(nccl_version=config.nccl_version, nccl_algo=config.nccl_algo, nccl_proto=config.nccl_proto,
                call_bytes=config.bucket_bytes)


def divergence_vs_steps(config: ReportConfig, result=None) -> pd.DataFrame:
    """Relative distance from data-parallel training after each step (figure 4's data).

    Columns ``case``, ``step``, ``max_rel_diff``: the colocated proposal on distinct micro-batches,
    the same on N = 1 and with every rank on one micro-batch (the conditions under which it is
    exact), and the largest difference of the schemes the model says are exact.
    """
    from dataclasses import replace

    from zerocalc.feasibility import simulate_reference, simulate_scheme

    result = result if result is not None else feasibility_result(config)
    cfg = result.config
    rows: list[tuple[str, int, float]] = []
    runs = {r.scheme: r for r in result.runs}
    col = runs["colocated"]
    rows += [(f"colocated, N = {cfg.n}, distinct micro-batches", k + 1, d)
             for k, d in enumerate(col.diff_by_step)]
    conditions = ((f"colocated, N = {cfg.n}, one shared micro-batch", replace(cfg, shared_micro_batch=True)),
                  ("colocated, N = 1", replace(cfg, n=1, gpus_per_node=None)))
    for label, c in conditions:
        run = simulate_scheme("colocated", c, simulate_reference(c))
        rows += [(label, k + 1, d) for k, d in enumerate(run.diff_by_step)]
    exact = [r for r in result.runs if r.scheme != "colocated" and r.equivalent]
    if exact:
        worst = np.max(np.array([r.diff_by_step for r in exact]), axis=0)
        rows += [(f"largest of the {len(exact)} exact schemes", k + 1, float(d)) for k, d in enumerate(worst)]
    return pd.DataFrame(rows, columns=["case", "step", "max_rel_diff"])


def plan_on_cluster(config: ReportConfig, result) -> pd.DataFrame:
    """The feasibility plan priced on the report's cluster (:func:`zerocalc.plan.build_plan`, which
    :func:`feasibility_result` asked to price at the report's Ψ, N, G, topology and wire dtype).

    One row per plan item in the plan's order: the items that help, then those that are slower on
    this cluster (``slower`` true). ``bytes_saved_per_rank`` is NaN where the model cannot price an
    item (it depends on layer shapes).
    """
    rows = [{"rank": p.rank, "action": p.action, "update": p.update, "from_scheme": p.from_scheme,
             "to_scheme": p.to_scheme,
             "bytes_saved_per_rank": np.nan if p.bytes_saved_per_rank is None else p.bytes_saved_per_rank,
             "time_saved_s": np.nan if p.time_saved_s is None else p.time_saved_s,
             "from_time_s": np.nan if p.from_time_s is None else p.from_time_s,
             "in_network": p.in_network, "available": p.available, "in_network_idle": p.in_network_idle,
             "slower": p.slower,
             "from_choice": p.from_choice, "to_choice": p.to_choice,
             "evidence": p.evidence, "note": p.note} for p in result.plan]
    return pd.DataFrame(rows)


def cluster_verdict(config: ReportConfig, result, plan: pd.DataFrame) -> str:
    """The feasibility verdict with its saving priced on the report's cluster.

    The simulation's findings (its N, its Ψ, its divergence) stay as the simulation found them; the
    last sentence takes the plan's first exact change of scheme that saves bytes and is not slower on
    the cluster (the plan's own ranking) and states its saving from :func:`plan_on_cluster`: the model
    at the report's Ψ, N, topology and wire dtype.
    """
    from zerocalc.feasibility import saving_sentence

    exact = plan[(plan["update"] == "exact") & (plan["bytes_saved_per_rank"] > 0) & ~plan["slower"]
                 & (plan["in_network"] == "")]
    where = config.n_words
    basis = (f"on the chosen cluster: {topology_name(config)}, {where}, Ψ = {config.psi:.3g}, "
             f"{config.wire_words} on the wire, so {format_bytes(exact['bytes_saved_per_rank'].iloc[0])} "
             "per rank per step" if len(exact) else
             f"the chosen cluster ({topology_name(config)}, {where}, {config.wire_words})")
    if not len(exact):
        return f"{result.findings} {saving_sentence(None, None, None, None, basis)}"
    top = exact.iloc[0]
    return (f"{result.findings} " + saving_sentence(top["action"], top["from_scheme"], top["to_scheme"],
                                                    top["bytes_saved_per_rank"] / config.psi, basis))

