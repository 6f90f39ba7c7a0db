"""Section 7: the verdict, the simulation behind it, and the implementation plan priced on the cluster."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from zerocalc.report.config import nccl_words, topology_name
from zerocalc.report.sections import number, title
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
    if result.in_network_finding:
        w.heading("In-network reduction", 2)
        w.paragraph(result.in_network_finding)
    w.heading("Implementation plan, priced on the chosen cluster", 2)
    basis = result.plan_basis
    by_nccl = basis.get("time_model") == "nccl"
    nccl = nccl_words(c)
    k = int(basis.get("micro_batches") or 1)
    step = "step" if k == 1 else f"optimizer step of {k} micro-batches"
    w.paragraph(f"{topology_name(c)}, " + (f"N = {c.n} GPUs" if c.tp * c.pp == 1 else c.n_words)
                + f", Ψ = {c.psi:,.0f} parameters"
                + (f", {k} micro-batches per optimizer step" if k > 1 else "") + "; time by "
                f"{basis.get('time_model_name') or 'the ring α-β model'}." + (
        f" {nccl[:1].upper()}{nccl[1:]} prices the schemes in section {number('volume_table')}"
        + ("; the plan under the same version and NCCL_ALGO / NCCL_PROTO, without the tuner or --nccl-env."
           if by_nccl else "; this plan is the α-β model's (--time-model ring).") if nccl else ""), size=8.5)
    timing = ("NCCL's predicted time of the collectives it picks for each scheme (the pairs in the table's "
              "last column, from → to); an item in the switch goes from the scheme without in-network "
              "reduction to the same scheme with it, so it saves time only where NCCL picks NVLS / CollNet "
              "over its rings and trees" if by_nccl else
              "the ring α-β model's; an item in the switch goes from the scheme on rings to the same scheme "
              "with its collectives in the switch")
    w.paragraph(
        "Ranked as the simulation ranks it (exact updates first, then approximate, then changed update "
        f"rules; within a tier by bytes saved). Bytes saved per rank per {step} are the model's difference "
        f"between the two schemes on this cluster ({c.wire_words} on the wire); time saved is {timing}. An "
        "item that keeps the scheme saves the share of the source scheme's traffic it removes; an item in "
        "the switch is priced with the in-network reduction the cluster offers (with NVLS and SHARP where "
        "it offers none, marked not available). Changes that are slower on this cluster are listed apart, "
        "after the ones that help.", size=8.5)
    helps, slower = plan[~plan["slower"]], plan[plan["slower"]]
    from zerocalc.plan import pairs_library

    lib = pairs_library(basis)
    _plan_table(w, helps, lib)
    if len(slower):
        fewer = bool((slower["bytes_saved_per_rank"].fillna(0) > 0).all())
        w.paragraph("Slower on this cluster (" + ("sends fewer bytes, takes longer" if fewer else
                                                  "takes longer") + "):", size=8.5)
        _plan_table(w, slower, lib)
    w.paragraph("Evidence and caveats per step: " + " ".join(
        f"({r.rank}) {r.evidence}; {r.note}." for r in plan.itertuples()), size=7.5, color="#333333")


def _plan_table(w: Writer, rows: pd.DataFrame, lib: str = "NCCL") -> None:
    from zerocalc.plan import switch_words

    def step(r) -> str:
        words = switch_words(r, "not on this cluster")
        return f"{r.action} {words}" if words else r.action

    def saved_bytes(r) -> str:
        if pd.isna(r.bytes_saved_per_rank):
            return "not priced"
        b = r.bytes_saved_per_rank
        return format_bytes(b) if b >= 0 else f"−{format_bytes(-b)}"

    def saved_time(r) -> str:
        if pd.isna(r.time_saved_s):
            return "-"
        if not r.bytes_saved_per_rank and r.from_scheme == r.to_scheme and not r.in_network:
            return f"hides ≤ {format_seconds(r.from_time_s)}"
        t = r.time_saved_s
        return format_seconds(t) if t >= 0 else f"−{format_seconds(-t)}"

    def choices(r) -> str:
        return r.from_choice + (f" → {r.to_choice}" if r.to_choice and r.to_choice != r.from_choice else "")

    if rows["from_choice"].astype(bool).any():
        w.table(["#", "step", "update", "from → to", "bytes saved", "time saved", f"{lib}'s choice"],
                [[str(r.rank), step(r), r.update, f"{r.from_scheme} → {r.to_scheme}", saved_bytes(r),
                  saved_time(r), choices(r)] for r in rows.itertuples()], align="llllrrl", size=6.5,
                wrap={1: 40, 3: 20, 6: 30})
        return
    w.table(["#", "step", "update", "from → to", "bytes saved", "time saved"],
            [[str(r.rank), step(r), r.update, f"{r.from_scheme} → {r.to_scheme}", saved_bytes(r),
              saved_time(r)] for r in rows.itertuples()], align="llllrr", size=7.0, wrap={1: 48, 3: 22})


def _num(x) -> str:
    return "-" if x is None else f"{x:,.0f}"
