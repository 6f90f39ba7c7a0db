"""The first box of the report ("In short"): a one-sentence verdict and at most five bullets.

Everything in it is about the chosen cluster (the report's Ψ, N, topology and wire dtype); the
simulation's own small sizes stay in section 7. Numbers are written one way: counts as 7.5B,
bytes with three significant digits (14.8 GB), times as 74.7 ms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from zerocalc.report.config import topology_name
from zerocalc.report.sections import number
from zerocalc.units import format_seconds

if TYPE_CHECKING:
    from zerocalc.report.config import ReportData

#: Largest number of bullets in the box.
MAX_BULLETS = 5


def format_count(x: float) -> str:
    """A parameter count with a suffix and three significant digits: 7.5B, 70B, 175B, 1.2T, 350M."""
    for factor, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(x) >= factor:
            return f"{x / factor:.3g}{suffix}"
    return f"{x:.3g}"


def format_size(n: float) -> str:
    """Bytes with three significant digits and a decimal unit (GB = 1e9 B): 14.8 GB, 738 MB."""
    value = float(n)
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if abs(value) < 999.5 or unit == "PB":
            return f"{value:.3g} {unit}"
        value /= 1000
    raise AssertionError("unreachable")


def verdict_sentence(data: ReportData) -> str:
    """The answer to the question in one sentence, from the simulation (never its sizes)."""
    result = data.extra["feasibility"]
    col = next(r for r in result.runs if r.scheme == "colocated")
    if not col.steps:
        return "Not decided: no training step was simulated, so the updates were not compared."
    if col.equivalent:
        return ("Only where there is nothing to sum: the simulated ranks had no data parallelism, so "
                "skipping the reduce-scatter lost nothing; with it, the reduce-scatter is the sum of "
                "gradients over ranks and cannot be skipped.")
    return ("No: the reduce-scatter is the sum of gradients over ranks, not a relocation, so skipping it "
            "changes the update and training is no longer data-parallel.")


def _colocated_times(plan, ring_z2: float, ring_col: float) -> tuple[float, float]:
    """ZeRO-2's and the proposal's time per step as the plan priced them (its ``zero2 → colocated``
    item: NCCL's model where it priced the plan), so that page 1's times are the plan's; the ring α-β
    ones (``ring_z2``, ``ring_col``) where the plan has no time for it."""
    item = plan[(plan["from_scheme"] == "zero2") & (plan["to_scheme"] == "colocated")]
    if len(item) and np.isfinite(item["time_saved_s"].iloc[0]) and np.isfinite(item["from_time_s"].iloc[0]):
        t = float(item["from_time_s"].iloc[0])
        return t, t - float(item["time_saved_s"].iloc[0])
    return ring_z2, ring_col


def in_short(data: ReportData) -> tuple[str, list[str]]:
    """(verdict sentence, bullets): what the proposal would save on the chosen cluster, what can be
    saved exactly instead, memory, and the evidence (simulation, real traces) by section."""
    c = data.config
    table = data.table.set_index("scheme")
    z2, col = table.loc["zero2"], table.loc["colocated"]
    plan = data.extra["plan"]
    t_z2, t_col = _colocated_times(plan, float(z2["time_s"]), float(col["time_s"]))
    bullets = [
        f"Ψ = {format_count(c.psi)} on {c.gpus_words} ({topology_name(c)}, {c.wire_words}): skipping it "
        f"sends {format_size(col['bytes_per_rank'])} instead of ZeRO-2's "
        f"{format_size(z2['bytes_per_rank'])} per GPU per step ({format_seconds(t_col)} instead of "
        f"{format_seconds(t_z2)})."]
    exact = plan[(plan["update"] == "exact") & (plan["bytes_saved_per_rank"] > 0) & ~plan["slower"]
                 & (plan["in_network"] == "")]  # the change cluster_verdict names too
    if len(exact):
        top = exact.iloc[0]
        bullets.append(f"Saved without changing the update: {top['action'].split(' (')[0]} "
                       f"({top['from_scheme']} → {top['to_scheme']}), "
                       f"{format_size(top['bytes_saved_per_rank'])}"
                       + (f" and {format_seconds(top['time_saved_s'])} per GPU per step."
                          if np.isfinite(top["time_saved_s"]) else
                          " per GPU per step; its time is not priced"
                          + (f" (section {number('volume_table')} names what is not and why)."
                             if c.nccl_priced else " by the library's model.")))
    else:
        bullets.append("No change of scheme that keeps the update saves time on this cluster.")
    mem_z2, mem_col = float(z2["memory_bytes_per_rank"]), float(col["memory_bytes_per_rank"])
    gpu, over = c.gpu_memory, ""
    if gpu is not None and max(mem_col, mem_z2) > gpu:  # model states alone: activations come on top
        who = ("neither fits" if min(mem_col, mem_z2) > gpu
               else "ZeRO-2 does not fit" if mem_z2 > gpu else "the proposal does not fit")
        over = f", above the GPU's {format_size(gpu)}: {who}"
    bullets.append(f"Memory is unchanged: the proposal keeps ZeRO-2's sharding, {format_size(mem_col)} of "
                   f"model states per GPU{over}." if mem_col == mem_z2 else
                   f"Memory: {format_size(mem_col)} of model states per GPU, against ZeRO-2's "
                   f"{format_size(mem_z2)}{over}.")
    result = data.extra["feasibility"]
    runs = {r.scheme: r for r in result.runs}
    claimed = [r for r in runs.values() if r.scheme not in ("colocated", "zeropp") and r.steps]
    colocated = runs["colocated"]
    if colocated.steps and not colocated.equivalent:
        exact_runs = sum(bool(r.equivalent) for r in claimed)
        bullets.append(f"Simulated training (section {number('verdict')}): without the reduce-scatter the "
                       "parameters leave data-parallel training from the first step; "
                       f"{exact_runs} of the {len(claimed)} exact schemes stay at rounding level.")
    val = data.extra.get("validation")
    if val is not None and not val.empty:
        ratios = val["ratio"].to_numpy(dtype=float)
        ratios = ratios[np.isfinite(ratios)]
        runs_n = val["trace"].nunique()
        if len(ratios):
            dev = float(np.max(np.abs(ratios - 1.0)))
            how = ("exactly" if dev == 0 else f"to within {dev:.1%}" if dev <= 0.05
                   else f"only to within {dev:.0%}")
            bullets.append(f"Real traces (section {number('validation')}): the model's bytes per step match "
                           f"{runs_n} measured run{'s' if runs_n != 1 else ''} {how}.")
    return verdict_sentence(data), bullets[:MAX_BULLETS]
