"""Real runs: the bundled traces, their checks against the model (section 6, figure 5) and the
α-β fit of an nccl-tests sweep (figure 6).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd


def bundled_traces() -> dict[str, tuple[Path, ...]]:
    """The real traces shipped with zerocalc (``zerocalc/data/traces``), by name.

    ``resnet50-ddp``: a PyTorch DDP ResNet-50 step on A100 (rank 0 of 2); ``deepspeed-zero3``:
    a DeepSpeed ZeRO-3 run on 4 ranks over gloo. Their origin is in ``data/traces/README.md``.
    """
    from importlib.resources import files

    root = Path(str(files("zerocalc") / "data" / "traces"))
    return {
        "resnet50-ddp": (root / "kineto" / "ddp-resnet50-a100-rank0-of-2.json.gz",),
        "deepspeed-zero3": tuple(sorted((root / "deepspeed-gloo-zero3-n4").glob("rank*.json.gz"))),
    }


def bundled_nccl_tests() -> Path:
    """The bundled all_reduce_perf sweep on 16 H100 GPUs (2 nodes), for the α-β fit."""
    from importlib.resources import files

    root = files("zerocalc") / "data" / "traces" / "nccl-tests"
    return Path(str(root / "all_reduce_perf-16xH100-2nodes.txt"))


def trace_checks(paths_by_name: dict[str, Sequence[Path]], nccl: dict | None = None) -> dict[str, object]:
    """:func:`zerocalc.validate.check` on each named trace set (Ψ and N inferred from the trace). With
    ``nccl`` (``check``'s: the topology and the NCCL options), each trace whose calls ran on NCCL also has
    them timed by NCCL's model on that topology, its nodes of the topology's GPUs (its ``nccl_timing``, as
    ``check TRACE --topology`` times it; a trace run on gloo is not, nor any where the topology lacks what
    the model needs)."""
    from zerocalc.errors import ConfigError
    from zerocalc.traces import read_traces
    from zerocalc.validate import check

    out = {}
    for name, paths in paths_by_name.items():
        ts = read_traces([str(p) for p in paths] if len(paths) > 1 else str(paths[0]))
        backends = {str(m.get("backend")) for m in ts.meta.values() if isinstance(m, dict)}
        res = None
        if nccl is not None and "gloo" not in backends:
            try:
                res = check(ts.table, meta=ts.meta, nccl=nccl)
            except ConfigError:  # a topology without NCCL's fields: the trace is checked, not timed
                res = None
        out[name] = res if res is not None else check(ts.table, meta=ts.meta)
    return out


def validation_frame(checks: dict[str, object]) -> pd.DataFrame:
    """Predicted against measured bytes per rank per step, per collective, for the best-matching scheme.

    The scheme is the trace's first match (or, when none matches, the one whose volume is closest).
    Columns: ``trace``, ``scheme``, ``op``, ``label``, ``predicted_calls``, ``measured_calls``,
    ``predicted_bytes``, ``measured_bytes``, ``residual_bytes`` (measured − predicted), ``ratio``.
    """
    rows = []
    for name, res in checks.items():
        comps = {c.scheme: c for c in res.comparisons if c.ratio is not None and np.isfinite(c.ratio)
                 and c.ratio > 0}
        if not comps:  # e.g. N = 1: no cross-rank traffic, nothing to compare
            continue
        best = (res.matches[0] if res.matches and res.matches[0] in comps
                else min(comps, key=lambda s: abs(np.log(comps[s].ratio))))
        c = comps[best]
        pred = {op: (calls, nbytes) for op, calls, _el, nbytes in c.predicted_pattern}
        meas = {op: (calls, nbytes) for op, calls, _el, nbytes in c.measured_pattern}
        for op in list(dict.fromkeys([*meas, *pred])):
            pc, pb = pred.get(op, (0.0, 0.0))
            mc, mb = meas.get(op, (0.0, 0.0))
            rows.append({"trace": name, "scheme": best, "op": op, "label": f"{name} · {op} ({best})",
                         "predicted_calls": pc, "measured_calls": mc, "predicted_bytes": pb,
                         "measured_bytes": mb, "residual_bytes": mb - pb,
                         "ratio": mb / pb if pb else float("nan")})
    return pd.DataFrame(rows)


def nccl_tests_fit(path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The α-β fit of an nccl-tests sweep: (fit summary, per-size measured vs fitted time).

    Fitted time per size = the fitted model's own prediction,
    :meth:`zerocalc.validate.AlphaBetaFit.predict_s` (latency hops × α + bus-bandwidth factor
    × size × β; Thakur et al. 2005 ring costs, nccl-tests doc/PERFORMANCE.md).
    """
    from zerocalc.traces import read_traces
    from zerocalc.validate import fit_table, fits_frame

    table = read_traces(str(path)).table
    fits = fit_table(table)
    summary = fits_frame(fits)
    rows = []
    for fit in fits:
        sub = table[(table["op"] == fit.op) & (table["group_size"] == fit.group_size)]
        for r in sub.itertuples():
            size = float(r.size_bytes)
            pred = fit.predict_s(fit.op, size, fit.group_size)
            rows.append({"op": fit.op, "group_size": fit.group_size, "size_bytes": size,
                         "measured_s": float(r.duration_s), "predicted_s": pred,
                         "residual": float(r.duration_s) / pred - 1.0})
    return summary, pd.DataFrame(rows)

