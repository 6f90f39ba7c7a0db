"""Section 6: the model checked against real traces, and α-β fitted to an nccl-tests sweep."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from zerocalc.report.sections import title
from zerocalc.units import format_bytes, format_seconds

if TYPE_CHECKING:
    from zerocalc.report.config import ReportData
    from zerocalc.report.layout import Writer


def draw(w: Writer, data: ReportData) -> None:
    from zerocalc import plots

    w.heading(title("validation"))
    checks = data.extra["checks"]
    w.paragraph(
        "Each trace is read into zerocalc's canonical table; bytes each rank sent per step are counted with "
        "the model's ring accounting, Ψ and N are inferred from the trace, and every scheme's predicted "
        "collectives "
        "are compared with the measured ones (volume and pattern). "
        + ("The traces are those given on the command line." if data.config.traces else
           "The traces are real runs bundled with zerocalc: a PyTorch DDP ResNet-50 step on A100 (HTA test "
           "data) "
           "and a DeepSpeed 0.19.8 ZeRO-3 run on 4 ranks over gloo."))
    for name, res in checks.items():
        m = res.measurement
        w.heading(f"Trace {name}", 2)
        w.bullets([m.psi_how, m.n_how, f"steps: {m.steps_how}",
                   "consistent schemes (best first): " + (", ".join(
                       next((c.label for c in res.comparisons if c.scheme == s), s) for s in res.matches)
                       or "none")
                   + "".join(f"; the trace cannot tell apart {', '.join(g)}" for g in res.indistinguishable),
                   *[f"note: {t}" for t in (*m.notes, *res.notes)]], size=8.5)
        cats = m.categories
        cats = cats[cats["calls_per_rank_per_step"] > 0]
        w.table(["category", "calls/rank/step", "bytes/rank/step", "what it is"],
                [[r.category, f"{r.calls_per_rank_per_step:.3g}", format_bytes(r.bytes_per_rank_per_step),
                  r.description] for r in cats.itertuples()], align="lrrl", size=7.5, wrap={3: 60})
        if res.nccl_timing is not None:
            _nccl_timing(w, res.nccl_timing)
        shown = ("dp", "zero2", "zero3", "colocated", "deepspeed-zero2", *res.matches)
        key = [c for c in res.comparisons if c.scheme in shown]
        w.table(["scheme", "predicted", "measured", "ratio", "pattern", "explanation"],
                [[c.scheme, format_bytes(c.predicted_bytes_per_rank_per_step),
                  format_bytes(c.measured_bytes_per_rank_per_step),
                  "n/a" if c.ratio is None or not np.isfinite(c.ratio) else f"{c.ratio:.3f}",
                  "match" if c.pattern_match else "no", c.explanation] for c in key],
                align="lrrrll", size=7.0, wrap={5: 62})
    val = data.extra["validation"]
    shown = val[val["predicted_bytes"] > 0] if not val.empty else val
    if not shown.empty:
        w.figure(0.9 + 0.42 * max(len(shown), 3), lambda sf: plots.plot_validation(shown, fig=sf), caption=(
            "Predicted against measured bytes per rank per step for each collective of each trace, "
            "under the scheme that matches it (in brackets); right: measured / predicted (1.000 = exact). "
            "Residuals (measured − predicted): " + "; ".join(
                f"{r.label}: {r.residual_bytes:+,.0f} B" for r in val.itertuples()) + "."))
    summary = data.extra.get("fit_summary")
    points = data.extra.get("fit_points")
    if isinstance(summary, pd.DataFrame) and isinstance(points, pd.DataFrame) and not points.empty:
        f = summary.iloc[0]
        w.figure(4.0, lambda sf: plots.plot_fit(points, fig=sf), caption=(
            "Time: the α-β model fitted to the bundled all_reduce_perf sweep on "
            f"{int(f['group_size'])} H100 GPUs (2 nodes): latency {format_seconds(f['latency_s'])} ± "
            f"{format_seconds(f['latency_se_s'])}, "
            f"bus bandwidth {f['busbw_GBps']:.4g} ± {f['busbw_se_GBps']:.2g} GB/s (method {f['method']}). "
            "Bottom: measured / fitted − 1 per size; the sizes between the latency and bandwidth regimes "
            "(protocol and algorithm switches in NCCL) are where the two-parameter model is furthest off."))


def _nccl_timing(w: Writer, t) -> None:
    """A trace's calls timed by NCCL's model on the report's topology (:mod:`zerocalc.validate.nccl_timing`):
    the step's total against it, and its largest calls."""
    from zerocalc.validate.nccl_timing import CATEGORY_WORDS, ran_elsewhere

    fastest = not np.isnan(t.fastest_step_time_s)
    other = t.other
    w.paragraph(
        f"Timed by {t.model}: the step's gradient and parameter collectives took "
        f"{format_seconds(t.measured_step_time_s)} per rank per step (sum of kernel durations)"
        + (f", {format_seconds(t.fastest_step_time_s)} on each call's fastest rank" if fastest else "")
        + f", where NCCL's model predicts {format_seconds(t.predicted_step_time_s)} (measured / predicted "
        f"{t.ratio:.3g}" + (f", {t.fastest_ratio:.3g} fastest" if fastest else "") + ")."
        + (f" The steps' other NCCL calls (model buffers, scalars, other groups, all-to-all) took "
           f"{format_seconds(other['measured_s'])} against {format_seconds(other['predicted_s'])}."
           if other["calls_per_rank_per_step"] else "")
        + (" By group: " + "; ".join(_group_words(g) for g in t.groups) + "." if len(t.groups) > 1 else "")
        + " A kernel's duration runs from its launch to the end of the collective: it holds the wait for the "
          "slowest rank, which the fastest rank's duration leaves out.", size=8.5)
    top = sorted(t.calls, key=lambda r: -r["measured_s"] * r["calls_per_rank_per_step"])[:6]
    w.table(["call", "group", "calls/step", "measured", *(["fastest rank"] if fastest else []), "NCCL",
             "pair", "ratio"],
            [[f"{r['op']}{'' if r['category'] == 'step' else ' (' + CATEGORY_WORDS[r['category']] + ')'} of "
              f"{format_bytes(r['bytes'])}",
              f"{r['group_size']} ranks, {r['nodes']} node{'s' if r['nodes'] > 1 else ''}"
              + ("" if r["placement"] == "ranks" else " (packed)"),
              f"{r['calls_per_rank_per_step']:g}", format_seconds(r["measured_s"]),
              *([format_seconds(r["fastest_rank_s"])] if fastest else []), format_seconds(r["predicted_s"]),
              r["pair"] + (f" (ran {ran_elsewhere(r)})" if ran_elsewhere(r) else ""),
              f"{r['ratio']:.3g}"] for r in top],
            align="llrrr" + ("r" if fastest else "") + "lr", size=7.0)


def _group_words(g: dict) -> str:
    """One group's share of a trace's NCCL time: ``2 ranks (mesh_replicate) on 2 nodes: 1 ms against
    43.2 µs``."""
    name = f" ({g['group_name']})" if g.get("group_name") else ""
    nodes = f"{g['nodes']} node{'s' if g['nodes'] > 1 else ''}"
    return (f"{g['group_size']} ranks{name} on {nodes}: {format_seconds(g['measured_s'])} against "
            f"{format_seconds(g['predicted_s'])}")
