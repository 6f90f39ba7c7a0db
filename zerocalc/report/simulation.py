"""The feasibility simulation behind the verdict, its divergence (figure 4), and its plan priced
on the report's cluster.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from zerocalc.report.config import ReportConfig, topology_name
from zerocalc.report.sweeps import volume_table
from zerocalc.units import format_bytes


def feasibility_result(config: ReportConfig):
    """The feasibility simulation behind section 7 (:func:`zerocalc.feasibility.run_feasibility`).

    Its plan is priced at the report's Ψ and wire element size.
    """
    from zerocalc.evaluate import dtype_bytes
    from zerocalc.feasibility import FeasibilityConfig, run_feasibility

    cfg = FeasibilityConfig(n=config.feasibility_n, steps=config.feasibility_steps, seed=config.seed)
    return run_feasibility(cfg, plan_psi=int(config.psi), plan_comm_bytes=int(dtype_bytes(config.comm_dtype)))


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
    """The feasibility plan priced on the report's cluster by the model.

    For a change of scheme, bytes and time saved are the model's difference between the two
    schemes at the report's Ψ, N, topology and element size; for an item that keeps the scheme
    (overlap, periodic averaging) the fraction of the source scheme's volume the plan item saves
    at its own basis is applied to the cluster's volume and time.
    """
    from zerocalc.evaluate import model_bytes_per_rank

    table = volume_table(config).set_index("scheme")
    basis = result.plan_basis
    rows = []
    for item in result.plan:
        src, dst = table.loc[item.from_scheme], table.loc[item.to_scheme]
        if item.from_scheme != item.to_scheme:
            saved_b = float(src["bytes_per_rank"] - dst["bytes_per_rank"])
            saved_t = float(src["time_s"] - dst["time_s"])
        else:
            at_basis = model_bytes_per_rank(item.from_scheme, psi=basis["psi"], n=basis["n"],
                                            gpus_per_node=basis["gpus_per_node"],
                                            comm_bytes=float(basis["comm_bytes"]))
            frac = item.bytes_saved_per_rank / at_basis if at_basis else 0.0
            saved_b = frac * float(src["bytes_per_rank"])
            saved_t = frac * float(src["time_s"])
        rows.append({"rank": item.rank, "action": item.action, "update": item.update,
                     "from_scheme": item.from_scheme, "to_scheme": item.to_scheme,
                     "bytes_saved_per_rank": saved_b, "time_saved_s": saved_t,
                     "from_time_s": float(src["time_s"]), "evidence": item.evidence, "note": item.note})
    return pd.DataFrame(rows)


def cluster_verdict(config: ReportConfig, result, plan: pd.DataFrame) -> str:
    """The feasibility verdict with its saving priced on the report's cluster.

    The simulation's findings (its N, its Ψ, its divergence) stay as the simulation found them; the
    last sentence takes the plan's first exact item that saves bytes on the cluster (the plan's own
    ranking) and states its saving from :func:`plan_on_cluster`: the model at the report's Ψ, N,
    topology and wire dtype.
    """
    from zerocalc.feasibility import saving_sentence

    exact = plan[(plan["update"] == "exact") & (plan["bytes_saved_per_rank"] > 0)]
    basis = (f"on the chosen cluster: {topology_name(config)}, N = {config.n}, Ψ = {config.psi:.3g}, "
             f"{config.comm_dtype} on the wire, so {format_bytes(exact['bytes_saved_per_rank'].iloc[0])} per "
             "rank per step" if len(exact) else
             f"the chosen cluster ({topology_name(config)}, N = {config.n}, {config.comm_dtype})")
    if not len(exact):
        return f"{result.findings} {saving_sentence(None, None, None, None, basis)}"
    top = exact.iloc[0]
    return (f"{result.findings} " + saving_sentence(top["action"], top["from_scheme"], top["to_scheme"],
                                                    top["bytes_saved_per_rank"] / config.psi, basis))

