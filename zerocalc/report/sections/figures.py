"""Section 5: bytes against N, time against Ψ, memory against N, and the simulation's divergence."""

from __future__ import annotations

from typing import TYPE_CHECKING

from zerocalc.report.blocks import caption_height
from zerocalc.report.config import (
    custom_topology,
    figure_gpus_per_node,
    figure_topologies,
    same_links_as,
    topology_label,
)
from zerocalc.report.page import MARGIN_BOTTOM, MARGIN_TOP, PAGE_H
from zerocalc.report.sections import title

if TYPE_CHECKING:
    from zerocalc.report.config import ReportData
    from zerocalc.report.layout import Writer


def draw(w: Writer, data: ReportData) -> None:
    from zerocalc import plots

    c = data.config
    first = (f"Bytes one rank sends per step against N at Ψ = {c.psi:,.0f}, {c.comm_dtype}, ring "
             "algorithms. Left in units of Ψ·b, right in bytes. The colocated proposal sits at half of "
             "data parallel; the curves flatten at the paper's 2Ψ, 3Ψ and Ψ as (N−1)/N → 1."
             + _partial_nodes(c))
    _heading_with_figure(w, title("figures"), 4.1, first)
    w.figure(4.1, lambda sf: plots.plot_bytes_vs_n(data.bytes_vs_n, fig=sf), caption=first)
    panels = data.time_vs_psi["topology"].nunique()
    custom = custom_topology(c)
    where = (f"this report's topology ({topology_label(custom)}) and each preset" if custom is not None
             else "each topology preset")
    shared: dict[str, list[str]] = {}
    for name, first in same_links_as().items():
        shared.setdefault(first, []).append(name)
    also = "; ".join(f"{', '.join(names)} {'has' if len(names) == 1 else 'have'} {first}'s links"
                     for first, names in shared.items())
    own_nodes = [f"{name} {g}" for name in figure_topologies(c) if isinstance(name, str)
                 and (g := figure_gpus_per_node(c, name)) != c.gpus_per_node]
    nodes = f"{c.gpus_per_node} GPUs per node"
    if own_nodes:
        nodes += f"; their own nodes on {', '.join(own_nodes)}"
    per = (f", per optimizer step of {c.micro_batches} micro-batches" if c.micro_batches > 1 else "") + (
        f", {c.wire_words}" if c.wire_words != c.comm_dtype else "")
    caption = (f"Step communication time against Ψ at {c.n_words} ({nodes}){per} on "
               f"{where}{' with its own links' if also else ''}; colour = algorithm, line style = scheme. "
               "Latency dominates on the left, bandwidth on the right."
               + (f" Drawn once: {also}." if also else ""))
    # 3.1 in per row of two panels, at most what a page holds above its caption (a long one, naming a
    # topology of the report's own, ran past the page's foot under 0.9 in)
    room = PAGE_H - MARGIN_TOP - MARGIN_BOTTOM - max(0.9, caption_height(w, caption))
    height = min(3.1 * -(-panels // 2), room)
    w.figure(height, lambda sf: plots.plot_time_vs_psi(data.time_vs_psi, fig=sf), caption=caption)
    _memory_figure(w, data)
    _divergence_figure(w, data)


def _partial_nodes(config) -> str:
    """Figure 1's words on its node sizes where the report's nodes do not divide every N of the sweep
    (:func:`zerocalc.report.sweeps.n_sweep_nodes`); '' where they do."""
    from zerocalc.report.sweeps import N_SWEEP, n_sweep_nodes

    fills = n_sweep_nodes(config)
    odd = [(n, int(f)) for n, f in zip(N_SWEEP, fills, strict=True) if f != min(config.gpus_per_node, n)]
    if not odd:
        return ""
    ns = ", ".join(str(n) for n, _ in odd)
    held = ", ".join(dict.fromkeys(str(f) for _, f in odd))
    return (f" Nodes of {config.gpus_per_node} GPUs do not divide N = {ns}: there each node holds the "
            f"largest fill that does ({held} GPUs), the nodes fsdp-hybrid and zeropp shard within.")


def _memory_figure(w: Writer, data: ReportData) -> None:
    """Figure 3: the model's memory lines, with ZeRO Table 1 overlaid only where the report is at
    the table's Ψ and K (``data.memory_points`` is empty otherwise; see
    :func:`~zerocalc.report.sweeps.table1_overlay`)."""
    from zerocalc import plots

    c = data.config
    points = data.memory_points
    overlaid = points is not None and not points.empty
    w.figure(4.6, lambda sf: plots.plot_memory_vs_n(data.memory_vs_n, points if overlaid else None, fig=sf),
             caption=(
        f"Model-state memory per GPU against N at Ψ = {c.psi:,.0f}, K = {c.k:g} (lines: the "
        "model), with the printed cells of ZeRO Table 1 (7.5B column, GB = 1e9 B) overlaid as "
        "unfilled markers. The colocated proposal does not change memory: it keeps ZeRO-2's sharding."
        if overlaid else
        f"Model-state memory per GPU against N at Ψ = {c.psi:,.0f}, K = {c.k:g} (lines: the model). ZeRO "
        "Table 1 is printed for Ψ = 7.5B and K = 12 only, so its cells are not overlaid here. The colocated "
        "proposal does not change memory: it keeps ZeRO-2's sharding."))


def _divergence_figure(w: Writer, data: ReportData) -> None:
    from zerocalc import plots
    from zerocalc.feasibility import REL_TOL

    result = data.extra["feasibility"]
    cfg = result.config
    divergence = data.extra["divergence"]
    w.figure(4.4, lambda sf: plots.plot_divergence_vs_steps(divergence, fig=sf, tolerance=REL_TOL),
             caption=(
        f"Feasibility: {cfg.n} simulated ranks train a two-layer MLP (Ψ = {cfg.model.psi} "
        f"parameters) with Adam for {cfg.steps} steps, {cfg.micro_batch} samples per rank per step, seed "
        f"{cfg.seed}; each "
        "line is the largest parameter difference from single-process training on the global batch, "
        "relative to the largest parameter. The colocated proposal drifts away from step 1 unless no "
        "data parallelism is left (N = 1, or one micro-batch shared by all ranks); the exact schemes stay "
        "at rounding level."))


def _heading_with_figure(w: Writer, heading: str, height: float, caption: str) -> None:
    """The section's heading on the page its first figure (``height`` inches, ``caption``) starts: where the
    figure would not fit below it, both start the next page (a heading alone at the foot of a page, as after
    section 4's NCCL tables, is not left behind). The room asked is what :meth:`Writer.heading` and
    :func:`~zerocalc.report.blocks.figure` take, so a page that holds both is laid out as before."""
    from zerocalc.report.page import CAPTION_PT, LEADING, TEXT_W

    cap = w.wrap(f"Figure {w.figures + 1}. {caption}", TEXT_W, CAPTION_PT)
    w.ensure(0.14 + 13.0 * 1.55 / 72 + height + len(cap) * CAPTION_PT * LEADING / 72 + 0.1)
    w.heading(heading)
