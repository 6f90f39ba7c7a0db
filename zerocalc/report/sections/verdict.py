"""Section 7: the verdict, the simulation behind it, and the implementation plan priced on the cluster."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from zerocalc.report.config import topology_name
from zerocalc.report.sections import title
from zerocalc.units import format_bytes, format_diff, format_seconds

if TYPE_CHECKING:
    from zerocalc.report.config import ReportData
    from zerocalc.report.layout import Writer


def draw(w: Writer, data: ReportData) -> None:
    from zerocalc.feasibility import REL_TOL, WIRE_ELEM_BYTES

    result = data.extra["feasibility"]
    plan: pd.DataFrame = data.extra["plan"]
    c = data.config
    cfg = result.config
    w.heading(title("verdict"))
    w.heading("Verdict", 2)
    w.paragraph(str(data.extra.get("verdict_short") or result.verdict))
    w.heading("The simulation behind it", 2)
    w.paragraph(
        f"{cfg.n} ranks, {cfg.steps} Adam steps, seed {cfg.seed}; bytes per rank per step with "
        f"{WIRE_ELEM_BYTES}-byte (float64) wire elements, simulated (ring collectives moving real array "
        f"slices) and from the model; "
        f"equivalent = relative parameter difference from data-parallel training ≤ {REL_TOL:g}. The lower "
        f"bound for the gradient reduction of any exact scheme is (N−1)/N·Ψ·b = "
        f"{float(result.lower_bound_bytes_per_rank):,.0f} bytes (Patarasuk & Yuan 2009).", size=8.5)
    w.table(["scheme", "simulated B", "model B", "same", "gradient B", "max rel diff", "DP-equivalent"],
            [[r["scheme"], _num(r["bytes_per_rank_simulated"]), _num(r["bytes_per_rank_model"]),
              "-" if r["bytes_match"] is None else ("yes" if r["bytes_match"] else "NO"),
              _num(r["gradient_bytes_per_rank_simulated"]), format_diff(r["max_rel_diff"]),
              "yes" if r["equivalent"] else "NO"] for r in result.records()], size=7.5)
    w.table(["condition (colocated scheme)", "N", "compared with", "max rel diff", "exact"],
            [[d["condition"], str(d["n"]), d["compared_with"], format_diff(d["max_rel_diff"]),
              "yes" if d["equivalent"] else "no"] for d in result.conditions], align="lrlrl", size=7.5)
    w.heading("Implementation plan, priced on the chosen cluster", 2)
    w.paragraph(f"{topology_name(c)}, N = {c.n} GPUs, Ψ = {c.psi:,.0f} parameters.", size=8.5)
    w.paragraph(
        "Ranked as the simulation ranks it (exact updates first, then approximate, then changed update "
        "rules; within a tier by bytes saved). Bytes and time saved per rank per step are the model's "
        f"difference between the two schemes on this cluster ({c.comm_dtype} on the wire, default "
        "algorithm); an item that keeps the scheme saves the share of the source scheme's traffic it "
        "removes. A negative time "
        "means the change is slower on this cluster.", size=8.5)
    w.table(["#", "step", "update", "from → to", "bytes saved", "time saved"],
            [[str(r.rank), r.action, r.update, f"{r.from_scheme} → {r.to_scheme}",
              format_bytes(r.bytes_saved_per_rank),
              (format_seconds(r.time_saved_s) if r.bytes_saved_per_rank or r.from_scheme != r.to_scheme
               else f"hides ≤ {format_seconds(r.from_time_s)}")]
             for r in plan.itertuples()], align="llllrr", size=7.0, wrap={1: 48, 3: 22})
    w.paragraph("Evidence and caveats per step: " + " ".join(
        f"({r.rank}) {r.evidence}; {r.note}." for r in plan.itertuples()), size=7.5, color="#333333")


def _num(x) -> str:
    return "-" if x is None else f"{x:,.0f}"
