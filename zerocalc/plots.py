"""Figures: a tidy DataFrame in, a matplotlib Figure out.

Nothing here computes a model quantity or shows a window. Each function draws the
columns it is given (the report and the notebook build the DataFrames from the
public API) onto a new :class:`matplotlib.figure.Figure`, or onto the figure or
sub-figure passed as ``fig``, and returns the top-level Figure. pyplot is never
imported, so no global figure state is created and nothing is displayed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure, SubFigure
from matplotlib.ticker import FuncFormatter, MaxNLocator

__all__ = [
    "SCHEME_COLORS",
    "plot_bytes_vs_n",
    "plot_divergence_vs_steps",
    "plot_fit",
    "plot_memory_vs_n",
    "plot_nccl_sweeps",
    "plot_time_vs_psi",
    "plot_validation",
]

# One fixed colour per scheme name (the names are fixed; see zerocalc.schemes), so a
# scheme has the same colour in every figure. Colours from matplotlib's tab20 palette.
SCHEME_COLORS: dict[str, str] = {
    "dp": "#1f77b4",
    "zero1": "#aec7e8",
    "zero2": "#ff7f0e",
    "zero3": "#2ca02c",
    "colocated": "#d62728",
    "deepspeed-zero1": "#ffbb78",
    "deepspeed-zero2": "#9467bd",
    "deepspeed-zero12": "#9467bd",  # the alias of deepspeed-zero2, its colour
    "deepspeed-zero3": "#98df8a",
    "deepspeed-zero2-reduce": "#c5b0d5",
    "torch-zero1": "#8c564b",
    "fsdp-full-shard": "#e377c2",
    "fsdp-shard-grad-op": "#7f7f7f",
    "fsdp-hybrid": "#bcbd22",
    "zeropp": "#17becf",
}
_ALGORITHM_COLORS = {"ring": "#1f77b4", "recursive": "#ff7f0e", "tree": "#2ca02c", "hierarchical": "#d62728"}
_LINESTYLES = ("-", "--", ":", "-.")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def _target(fig: Figure | SubFigure | None, size: tuple[float, float]) -> Figure | SubFigure:
    return fig if fig is not None else Figure(figsize=size, layout="constrained")


def _root(target: Figure | SubFigure) -> Figure:
    return target if isinstance(target, Figure) else target.get_figure(root=True)


def _color(name: str, i: int) -> str:
    return SCHEME_COLORS.get(name, f"C{i % 10}")


def _require(df: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{what}: the DataFrame lacks column(s) {', '.join(missing)}")


def _si(x: float, _pos: object = None) -> str:
    """Tick label with a decimal SI prefix (k, M, G, T): counts and bytes, 1e9 = G."""
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= factor:
            return f"{x / factor:g}{prefix}"
    return f"{x:g}"


def _count(x: float, _pos: object = None) -> str:
    """A parameter count with K, M, B (1e9) or T: ``7.5e9`` → ``7.5B``."""
    for factor, prefix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(x) >= factor:
            return f"{x / factor:g}{prefix}"
    return f"{x:g}"


def _binary(x: float, _pos: object = None) -> str:
    """Bytes on a base-2 axis: 1 KiB, 4 MiB, 16 GiB."""
    for factor, unit in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if abs(x) >= factor:
            return f"{x / factor:g} {unit}"
    return f"{x:g} B"


def _seconds(x: float, _pos: object = None) -> str:
    for factor, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if abs(x) >= factor:
            return f"{x / factor:g} {unit}"
    return f"{x:g} s"


def plot_bytes_vs_n(df: pd.DataFrame, *, fig: Figure | SubFigure | None = None) -> Figure:
    """Bytes one rank sends per step against the data-parallel degree N, one line per scheme.

    Columns: ``scheme``, ``n``, ``bytes_per_rank_over_psi`` (left panel, in units of
    Ψ × bytes per element) and ``bytes_per_rank`` (right panel, bytes), plus ``psi``.
    """
    _require(df, ["scheme", "n", "bytes_per_rank", "bytes_per_rank_over_psi"], "plot_bytes_vs_n")
    target = _target(fig, (9.0, 4.0))
    ax_rel, ax_abs = target.subplots(1, 2)
    for i, (scheme, g) in enumerate(df.groupby("scheme", sort=False)):
        g = g.sort_values("n")
        style = dict(color=_color(str(scheme), i), marker=_MARKERS[i % len(_MARKERS)], markersize=3,
                     linestyle=_LINESTYLES[i % 2], linewidth=1.3)
        ax_rel.plot(g["n"], g["bytes_per_rank_over_psi"], label=str(scheme), **style)
        ax_abs.plot(g["n"], g["bytes_per_rank"], **style)
    for ax in (ax_rel, ax_abs):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("data-parallel degree N (GPUs)")
        ax.grid(True, which="major", alpha=0.3)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _p: f"{x:g}"))
    ax_rel.set_ylabel("bytes sent per rank per step / (Ψ·b)")
    ax_abs.set_ylabel("bytes sent per rank per step")
    ax_abs.yaxis.set_major_formatter(FuncFormatter(lambda x, _p: _si(x) + "B"))
    if "psi" in df.columns and df["psi"].nunique() == 1:
        ax_abs.set_title(f"Ψ = {_count(float(df['psi'].iloc[0]))} parameters", fontsize="medium")
    ax_rel.set_title("in units of Ψ × bytes per element", fontsize="medium")
    target.legend(*ax_rel.get_legend_handles_labels(), loc="outside lower center", ncols=4,
                  fontsize="small", frameon=False)
    return _root(target)


def plot_time_vs_psi(
    df: pd.DataFrame, *, fig: Figure | SubFigure | None = None, ncols: int = 2
) -> Figure:
    """Step communication time against Ψ: one panel per topology, colour = algorithm, line style = scheme.

    Columns: ``topology``, ``algorithm``, ``scheme``, ``psi``, ``time_s``.
    """
    _require(df, ["topology", "algorithm", "scheme", "psi", "time_s"], "plot_time_vs_psi")
    topologies = list(dict.fromkeys(df["topology"]))
    schemes = list(dict.fromkeys(df["scheme"]))
    algorithms = list(dict.fromkeys(df["algorithm"]))
    nrows = -(-len(topologies) // ncols)
    target = _target(fig, (9.0, 3.2 * nrows))
    axes = target.subplots(nrows, ncols, squeeze=False, sharex=True)
    for k, ax in enumerate(axes.flat):
        if k >= len(topologies):
            ax.set_visible(False)
            continue
        topo = topologies[k]
        sub = df[df["topology"] == topo]
        for a_i, alg in enumerate(algorithms):
            for s_i, scheme in enumerate(schemes):
                g = sub[(sub["algorithm"] == alg) & (sub["scheme"] == scheme)].sort_values("psi")
                if g.empty:
                    continue
                ax.plot(g["psi"], g["time_s"], color=_ALGORITHM_COLORS.get(str(alg), f"C{a_i}"),
                        linestyle=_LINESTYLES[s_i % len(_LINESTYLES)], linewidth=1.3)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.grid(True, which="major", alpha=0.3)
        ax.xaxis.set_major_formatter(FuncFormatter(_count))
        ax.yaxis.set_major_formatter(FuncFormatter(_seconds))
        title = str(topo)
        if "n" in sub.columns and sub["n"].nunique() == 1:
            title += f"  (N = {int(sub['n'].iloc[0])})"
        ax.set_title(title, fontsize="medium")
        if k >= len(topologies) - ncols:
            ax.set_xlabel("parameters Ψ")
            ax.xaxis.set_tick_params(labelbottom=True)
    handles = []
    from matplotlib.lines import Line2D

    for a_i, alg in enumerate(algorithms):
        handles.append(Line2D([], [], color=_ALGORITHM_COLORS.get(str(alg), f"C{a_i}"), label=f"{alg}"))
    for s_i, scheme in enumerate(schemes):
        handles.append(Line2D([], [], color="black", linestyle=_LINESTYLES[s_i % len(_LINESTYLES)],
                              label=str(scheme)))
    target.legend(handles=handles, loc="outside lower center", ncols=min(4, len(handles)),
                  fontsize="small", frameon=False)
    target.supylabel("communication time per step")  # once: a label per row of panels overlaps its neighbours
    return _root(target)


def plot_memory_vs_n(
    df: pd.DataFrame,
    points: pd.DataFrame | None = None,
    *,
    fig: Figure | SubFigure | None = None,
) -> Figure:
    """Model-state memory per GPU against N, one line per scheme; published points as markers.

    ``df`` columns: ``scheme``, ``n``, ``memory_bytes_per_rank``. ``points`` (optional):
    ``scheme``, ``n``, ``memory_bytes_per_rank`` and ``label`` (e.g. "ZeRO Table 1 P_os+g"),
    drawn as unfilled markers in the colour of their scheme.
    """
    _require(df, ["scheme", "n", "memory_bytes_per_rank"], "plot_memory_vs_n")
    target = _target(fig, (6.5, 4.2))
    ax = target.subplots()
    for i, (scheme, g) in enumerate(df.groupby("scheme", sort=False)):
        g = g.sort_values("n")
        ax.plot(g["n"], g["memory_bytes_per_rank"], color=_color(str(scheme), i), linewidth=1.4,
                linestyle=_LINESTYLES[(i // 10) % len(_LINESTYLES)], label=f"{scheme} (model)")
    if points is not None and not points.empty:
        _require(points, ["scheme", "n", "memory_bytes_per_rank", "label"], "plot_memory_vs_n points")
        for j, (label, g) in enumerate(points.groupby("label", sort=False)):
            scheme = str(g["scheme"].iloc[0])
            ax.plot(g["n"], g["memory_bytes_per_rank"], linestyle="none", marker=_MARKERS[j % len(_MARKERS)],
                    markersize=7, markerfacecolor="none", markeredgewidth=1.4,
                    color=_color(scheme, j), label=str(label))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _p: f"{x:g}"))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda x, _p: _si(x) + "B"))
    ax.set_xlabel("data-parallel degree N (GPUs)")
    ax.set_ylabel("model-state memory per GPU (GB = 1e9 B)")
    if "psi" in df.columns and df["psi"].nunique() == 1:
        ax.set_title(f"Ψ = {_count(float(df['psi'].iloc[0]))} parameters", fontsize="medium")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="small", ncols=2, loc="lower left", frameon=False)
    return _root(target)


def plot_divergence_vs_steps(
    df: pd.DataFrame, *, fig: Figure | SubFigure | None = None, tolerance: float | None = None,
    floor: float = 1e-18,
) -> Figure:
    """Relative distance of each run's parameters from data-parallel training against the step count.

    Columns: ``case`` (one line each), ``step``, ``max_rel_diff``. On the log axis, exact zeros
    are drawn at ``floor`` (labelled "0"); ``tolerance`` adds a horizontal line.
    """
    _require(df, ["case", "step", "max_rel_diff"], "plot_divergence_vs_steps")
    target = _target(fig, (6.5, 4.0))
    ax = target.subplots()
    palette = ("#d62728", "#2ca02c", "#ff7f0e", "#1f77b4", "#9467bd", "#8c564b")
    for i, (case, g) in enumerate(df.groupby("case", sort=False)):
        g = g.sort_values("step")
        ax.plot(g["step"], g["max_rel_diff"].clip(lower=floor), color=palette[i % len(palette)],
                marker=_MARKERS[i % len(_MARKERS)], markersize=3.5,
                linestyle=_LINESTYLES[i % len(_LINESTYLES)], linewidth=1.3, label=str(case))
    if tolerance is not None:
        ax.axhline(tolerance, color="black", linewidth=0.8, linestyle="--")
        ax.annotate(f"tolerance {tolerance:g}", (0.01, tolerance), xycoords=("axes fraction", "data"),
                    xytext=(0, 3), textcoords="offset points", fontsize="small")
    ax.set_yscale("log")
    ax.set_ylim(floor / 3, 3.0)
    ticks = [floor, *[10.0**e for e in range(int(np.log10(floor)) + 3, 1, 3)]]
    ax.set_yticks(ticks, ["0", *[f"1e{int(np.log10(t))}" for t in ticks[1:]]])
    ax.minorticks_off()
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("training steps")
    ax.set_ylabel("max |θ − θ_DP| / max |θ_DP|")
    ax.grid(True, which="major", alpha=0.3)
    target.legend(fontsize="small", frameon=False, loc="outside lower center", ncols=2)
    return _root(target)


def plot_fit(df: pd.DataFrame, *, fig: Figure | SubFigure | None = None) -> Figure:
    """Measured against fitted collective time per message size (top) and the relative residual (bottom).

    Columns: ``size_bytes``, ``measured_s``, ``predicted_s``, ``residual`` (measured / fitted − 1).
    """
    _require(df, ["size_bytes", "measured_s", "predicted_s", "residual"], "plot_fit")
    target = _target(fig, (6.5, 4.5))
    ax, ax_r = target.subplots(2, 1, sharex=True, height_ratios=[3, 1.4])
    g = df.sort_values("size_bytes")
    ax.plot(g["size_bytes"], g["measured_s"], "o", markersize=3.5, color="#ff7f0e", label="measured")
    ax.plot(g["size_bytes"], g["predicted_s"], "-", color="#1f77b4", linewidth=1.3, label="α-β fit")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(_seconds))
    ax.set_ylabel("time per call")
    ax.legend(fontsize="small", frameon=False)
    ax_r.axhline(0.0, color="black", linewidth=0.8)
    ax_r.plot(g["size_bytes"], 100 * g["residual"], "o-", markersize=3, color="#d62728", linewidth=0.8)
    ax_r.set_ylabel("residual, %")
    ax_r.set_xlabel("message size (bytes of the full vector)")
    ax_r.xaxis.set_major_formatter(FuncFormatter(_binary))
    for a in (ax, ax_r):
        a.grid(True, which="major", alpha=0.3)
    return _root(target)


def plot_validation(df: pd.DataFrame, *, fig: Figure | SubFigure | None = None) -> Figure:
    """Predicted against measured bytes per rank per step (left) and their ratio (right).

    Columns: ``label`` (one bar group per row, e.g. "resnet50 · all_reduce"),
    ``predicted_bytes``, ``measured_bytes`` and ``ratio`` (measured / predicted).
    """
    _require(df, ["label", "predicted_bytes", "measured_bytes", "ratio"], "plot_validation")
    target = _target(fig, (9.0, 0.5 + 0.45 * max(len(df), 3)))
    ax_b, ax_r = target.subplots(1, 2, sharey=True, width_ratios=[3, 2])
    y = list(range(len(df)))
    h = 0.38
    ax_b.barh([v - h / 2 for v in y], df["predicted_bytes"], height=h, color="#1f77b4", label="predicted")
    ax_b.barh([v + h / 2 for v in y], df["measured_bytes"], height=h, color="#ff7f0e", label="measured")
    ax_b.set_yticks(y, list(df["label"]), fontsize="small")
    ax_b.invert_yaxis()
    ax_b.set_xscale("log")
    ax_b.xaxis.set_major_formatter(FuncFormatter(lambda x, _p: _si(x) + "B"))
    ax_b.set_xlabel("bytes per rank per step")
    ax_b.legend(fontsize="small", frameon=False, loc="lower right")
    ratio = df["ratio"]
    ax_r.axvline(1.0, color="black", linewidth=0.8)
    ax_r.plot(ratio, y, "D", color="#2ca02c", markersize=6)
    ax_r.set_xlabel("measured / predicted")
    for v, r in zip(y, ratio, strict=True):
        ax_r.annotate(f"{r:.3f}", (r, v), xytext=(6, 0), textcoords="offset points", va="center",
                      fontsize="small")
    lo, hi = min(float(ratio.min()), 1.0), max(float(ratio.max()), 1.0)
    pad = max(0.1, 0.15 * (hi - lo))
    ax_r.set_xlim(lo - pad, hi + 2 * pad)
    for ax in (ax_b, ax_r):
        ax.grid(True, axis="x", alpha=0.3)
    return _root(target)


def plot_nccl_sweeps(df: pd.DataFrame, *, fig: Figure | SubFigure | None = None,
                     columns: int | None = None) -> Figure:
    """nccl-tests sweeps against NCCL's cost model: one panel per sweep, time per call against size
    (measured points, NCCL's model, the textbook ring α-β) on top, predicted / measured below; the
    panels in rows of ``columns`` (default: all in one row).

    Columns: ``sweep`` (the panel title), ``bytes``, ``measured_s``, ``predicted_s``, ``textbook_s``.
    """
    _require(df, ["sweep", "bytes", "measured_s", "predicted_s", "textbook_s"], "plot_nccl_sweeps")
    sweeps = list(dict.fromkeys(df["sweep"]))
    ncol = min(columns or len(sweeps), len(sweeps))
    nrow = -(-len(sweeps) // ncol)
    target = _target(fig, (3.3 * ncol, 4.6 * nrow))
    axes = target.subplots(2 * nrow, ncol, height_ratios=[3, 1.6] * nrow, squeeze=False)
    for k in range(len(sweeps), nrow * ncol):  # the empty panels of the last row
        axes[2 * (k // ncol)][k % ncol].set_visible(False)
        axes[2 * (k // ncol) + 1][k % ncol].set_visible(False)
    for k, name in enumerate(sweeps):
        g = df[df["sweep"] == name].sort_values("bytes")
        ax, ax_r = axes[2 * (k // ncol)][k % ncol], axes[2 * (k // ncol) + 1][k % ncol]
        ax.sharex(ax_r)
        ax.tick_params(labelbottom=False)
        j = k % ncol
        ax.plot(g["bytes"], g["measured_s"], "o", markersize=3, color="#ff7f0e", label="measured")
        ax.plot(g["bytes"], g["predicted_s"], "-", color="#1f77b4", linewidth=1.3, label="NCCL's model")
        ax.plot(g["bytes"], g["textbook_s"], "--", color="#7f7f7f", linewidth=1.0, label="textbook ring α-β")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(_seconds))
        ax.set_title(name, fontsize="small")
        ax_r.axhspan(0.5, 2.0, color="#2ca02c", alpha=0.08)
        ax_r.axhline(1.0, color="black", linewidth=0.8)
        ax_r.plot(g["bytes"], g["predicted_s"] / g["measured_s"], "o-", markersize=2.5, linewidth=0.8,
                  color="#1f77b4")
        ax_r.plot(g["bytes"], g["textbook_s"] / g["measured_s"], "x", markersize=3, color="#7f7f7f")
        ax_r.set_yscale("log", base=2)
        ax_r.set_ylim(1 / 8, 16)
        ax_r.yaxis.set_major_formatter(FuncFormatter(lambda x, _p: f"{x:g}"))
        ax_r.xaxis.set_major_formatter(FuncFormatter(_binary))
        ax_r.tick_params(axis="x", labelrotation=45, labelsize="x-small")
        for a in (ax, ax_r):
            a.grid(True, which="major", alpha=0.3)
        if j == 0:
            ax.set_ylabel("time per call")
            ax_r.set_ylabel("predicted / measured")
        if k == 0:
            ax.legend(fontsize="x-small", frameon=False)
    return _root(target)


def plot_bytes_vs_micro_batches(df: pd.DataFrame, *, fig: Figure | SubFigure | None = None) -> Figure:
    """Bytes one rank sends per optimizer step against the micro-batches per step, one line per
    implementation (left), and the same per micro-batch (right).

    Columns: ``label`` (the line's name: scheme and gradient-sync mode), ``micro_batches``,
    ``bytes_per_rank`` (per optimizer step) and ``bytes_per_rank_per_micro_batch``; ``psi`` and ``n``
    for the title when single-valued. The rules behind each line are the schemes' own
    (:attr:`zerocalc.schemes.Scheme.micro_batch_rule`).
    """
    _require(df, ["label", "micro_batches", "bytes_per_rank", "bytes_per_rank_per_micro_batch"],
             "plot_bytes_vs_micro_batches")
    target = _target(fig, (9.0, 4.0))
    ax_step, ax_mb = target.subplots(1, 2)
    for i, (label, g) in enumerate(df.groupby("label", sort=False)):
        g = g.sort_values("micro_batches")
        style = dict(color=_color(str(label), i), marker=_MARKERS[i % len(_MARKERS)],
                     markersize=3, linestyle=_LINESTYLES[i % 2], linewidth=1.3)
        ax_step.plot(g["micro_batches"], g["bytes_per_rank"], label=str(label), **style)
        ax_mb.plot(g["micro_batches"], g["bytes_per_rank_per_micro_batch"], **style)
    for ax in (ax_step, ax_mb):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("micro-batches per optimizer step")
        ax.grid(True, which="major", alpha=0.3)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _p: f"{x:g}"))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda x, _p: _si(x) + "B"))
    ax_step.set_ylabel("bytes sent per rank per optimizer step")
    ax_mb.set_ylabel("bytes sent per rank per micro-batch (average)")
    ax_step.set_yscale("log")
    if {"psi", "n"} <= set(df.columns) and df["psi"].nunique() == 1 and df["n"].nunique() == 1:
        ax_step.set_title(f"Ψ = {_count(float(df['psi'].iloc[0]))} parameters, N = {int(df['n'].iloc[0])}",
                          fontsize="medium")
    ax_mb.set_title("per micro-batch, boundary collectives shared out", fontsize="medium")
    target.legend(*ax_step.get_legend_handles_labels(), loc="outside lower center", ncols=3,
                  fontsize="small", frameon=False)
    return _root(target)
