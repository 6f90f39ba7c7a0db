"""α-β fit: the ring model ``t = h(op, p)·α + f(op, p)·n·β`` fitted to timed calls, and the step's time.

Least squares of the ring α-β model (Thakur, Rabenseifner & Gropp 2005; ``h`` latency hops of the
ring, ``f`` the nccl-tests bus-bandwidth factor, ``n`` the full vector in bytes), so that ``1/β``
*is* the bus bandwidth (nccl-tests ``doc/PERFORMANCE.md``). How the two regimes are handled is said
in :func:`fit_alpha_beta`; :func:`timing` prices a measured step with a fit.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from zerocalc.errors import ConfigError, TraceMismatchError
from zerocalc.validate.accounting import (
    _OP_VERBS,
    _num,
    _per_op_and_size,
    _world_sizes,
    busbw_factor,
    full_from_message,
    full_vector_elements,
    latency_hops,
)

if TYPE_CHECKING:
    from zerocalc.validate.measure import Measurement



#: A fit whose standard error reaches this share of its value is flagged as unreliable.
UNRELIABLE_SE_SHARE = 0.5
#: What :func:`fit_trace` says of an op and group timed at one size (which ``fit --out`` calibrates on).
ONE_SIZE = "a fit needs at least two sizes"


@dataclass(frozen=True)
class AlphaBetaFit:
    """The fitted ring α-β model of one collective (or of several pooled ops) on one group size.

    ``latency_s`` is the model's time of an empty message, ``h·α``; ``busbw_Bps`` is
    ``1/β`` (bus bandwidth in bytes/s, comparable with nccl-tests' busbw column × 1e9).
    Standard errors come from each least-squares fit's residuals (σ² (XᵀX)⁻¹).
    """

    op: str
    group_size: int
    alpha_s: float
    alpha_se_s: float
    latency_s: float
    latency_se_s: float
    beta_s_per_byte: float
    busbw_Bps: float
    busbw_se_Bps: float
    method: str
    n_points: int
    latency_sizes_bytes: tuple[float, ...]
    bandwidth_sizes_bytes: tuple[float, ...]
    max_abs_rel_residual: float
    note: str = ""
    #: evidence from the input itself: nccl-tests' busbw column over the bandwidth sizes (max),
    #: and the median measured time over the latency sizes
    reported_busbw_GBps: float = math.nan
    small_message_time_s: float = math.nan
    #: distinct message sizes among the points (``n_points`` counts calls)
    n_sizes: int = 0

    @property
    def physical(self) -> bool:
        """α ≥ 0 and β > 0: a latency and a bus bandwidth a link can have. Timings that fall as the size
        grows (β ≤ 0) give no bus bandwidth (``busbw_Bps`` NaN) and predict no time."""
        return self.alpha_s >= 0 and self.beta_s_per_byte > 0

    @property
    def reliable(self) -> bool:
        """False when the fit is not :attr:`physical`, or when a standard error is at least half its value
        (latency or bus bandwidth): the fit then says little more than the order of magnitude."""
        return self.physical and not (self.busbw_se_Bps >= UNRELIABLE_SE_SHARE * abs(self.busbw_Bps)
                                      or self.latency_se_s >= UNRELIABLE_SE_SHARE * abs(self.latency_s))

    def predict_s(self, op: str, n_bytes: float, p: float) -> float:
        """Ring α-β time of one call of ``op`` on ``n_bytes`` (full vector) over ``p`` ranks."""
        return latency_hops(op, p) * self.alpha_s + busbw_factor(op, p) * n_bytes * self.beta_s_per_byte

    def as_record(self) -> dict:
        return {
            "op": self.op, "group_size": self.group_size, "alpha_s": self.alpha_s,
            "alpha_se_s": self.alpha_se_s, "latency_s": self.latency_s, "latency_se_s": self.latency_se_s,
            "beta_s_per_byte": self.beta_s_per_byte, "busbw_GBps": self.busbw_Bps / 1e9,
            "busbw_se_GBps": self.busbw_se_Bps / 1e9, "method": self.method, "n_points": self.n_points,
            "n_latency_points": len(self.latency_sizes_bytes),
            "n_bandwidth_points": len(self.bandwidth_sizes_bytes),
            "max_abs_rel_residual": self.max_abs_rel_residual,
            "reported_busbw_GBps": self.reported_busbw_GBps,
            "small_message_time_s": self.small_message_time_s,
            "n_sizes": self.n_sizes, "reliable": self.reliable,
            "note": self.note,
        }


def _one_param_lsq(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least squares of ``y ≈ c·x`` (no intercept): c and its standard error."""
    sxx = float(x @ x)
    c = float(x @ y) / sxx
    r = y - c * x
    se = math.sqrt(float(r @ r) / (len(x) - 1) / sxx) if len(x) > 1 else math.nan
    return c, se


def fit_alpha_beta(
    size_bytes: Sequence[float] | np.ndarray,
    time_s: Sequence[float] | np.ndarray,
    *,
    op: str | Sequence[str],
    group_size: float | Sequence[float],
    share: float = 0.9,
) -> AlphaBetaFit:
    """Fit α (s per ring step) and β (s per byte) of ``t = h·α + f·n·β`` to measured calls.

    Regimes: the two terms are each fitted on the sizes where they dominate.
    A size is *latency-dominated* when ``h·α ≥ share·t`` (the flat part of a sweep) and
    *bandwidth-dominated* when ``f·n·β ≥ share·t``. Starting from α = min(t)/h and
    β = the best observed 1/busbw, α is fitted by least squares on the latency sizes
    with the bandwidth term held, β on the bandwidth sizes with the latency term held,
    and the regimes are re-drawn until they stop changing (a fixed point, a few rounds).
    Sizes in between (where NCCL switches protocol and neither term explains the time)
    take no part and show up in ``max_abs_rel_residual``.

    When either regime holds fewer than two sizes (a trace's few bucket sizes), both
    parameters are fitted jointly by least squares of the *relative* error
    (rows weighted by 1/t, close to a fit in log space): method ``"joint"``.

    ``op`` and ``group_size`` may be one value or one per row (pooled ops share α and β:
    the model's hops and bus factors put them on one scale). ``size_bytes`` is the full
    vector (nccl-tests ``size``, doc/PERFORMANCE.md).
    """
    n, t, ps, ops = _timed_rows(size_bytes, time_s, op, group_size)
    op_label = ops[0] if len(set(ops)) == 1 else "+".join(sorted(set(ops)))
    p_label = int(ps[0]) if len(set(ps.tolist())) == 1 else -1
    if len(n) < 2 or len(set(n.tolist())) < 2:
        raise TraceMismatchError(
            f"cannot fit α and β for {op_label}: need timed calls of at least two sizes, "
            f"got {len(n)} call(s) of {len(set(n.tolist()))} size(s)"
        )
    h = _per_op_and_size(latency_hops, np.asarray(ops, dtype=object), ps)
    x = _per_op_and_size(busbw_factor, np.asarray(ops, dtype=object), ps) * n

    method, alpha, beta, a_se, b_se, lat, bw = _fit_regimes(h, x, t, share)
    if method == "joint":
        lat = bw = np.ones(len(n), bool)
        alpha, beta, a_se, b_se = _fit_joint(h, x, t)
    rel = (h * alpha + x * beta - t) / t
    h0 = latency_hops(ops[0], ps[0])
    notes = _fit_notes(method, len(n), alpha, beta, a_se, b_se, h0)
    return AlphaBetaFit(
        op=op_label, group_size=p_label, alpha_s=alpha, alpha_se_s=a_se,
        latency_s=float(h0 * alpha), latency_se_s=float(h0 * a_se),
        beta_s_per_byte=beta,
        busbw_Bps=1.0 / beta if beta > 0 else math.nan,
        busbw_se_Bps=b_se / beta**2 if beta > 0 else math.nan,
        method=method, n_points=len(n),
        latency_sizes_bytes=tuple(sorted(set(n[lat].tolist()))) if method == "regimes" else (),
        bandwidth_sizes_bytes=tuple(sorted(set(n[bw].tolist()))) if method == "regimes" else (),
        max_abs_rel_residual=float(np.max(np.abs(rel))),
        note="; ".join(notes), n_sizes=len(set(n.tolist())),
    )


def _timed_rows(size_bytes, time_s, op, group_size):
    """Sizes, times, group sizes and ops of the usable calls (finite, positive time, size ≥ 0, more
    than one rank); ``op`` and ``group_size`` broadcast from one value to every row."""
    n = np.asarray(size_bytes, dtype=float)
    t = np.asarray(time_s, dtype=float)
    if n.shape != t.shape:
        raise ConfigError("sizes and times differ in length", option="fit")
    m = len(n)
    ops = [op] * m if isinstance(op, str) else list(op)
    ps = np.full(m, float(group_size)) if np.isscalar(group_size) else np.asarray(group_size, dtype=float)
    ok = np.isfinite(n) & np.isfinite(t) & (t > 0) & (n >= 0) & (ps > 1)
    n, t, ps = n[ok], t[ok], ps[ok]
    ops = [o for o, k in zip(ops, ok, strict=True) if k]
    return n, t, ps, ops


def _fit_regimes(h: np.ndarray, x: np.ndarray, t: np.ndarray, share: float):
    """The regimes fit of :func:`fit_alpha_beta`: α on the latency sizes, β on the bandwidth sizes,
    re-drawn to a fixed point. Returns ``(method, α, β, se α, se β, latency rows, bandwidth rows)``;
    method ``"joint"`` when a regime holds fewer than two sizes (then α, β are to be refitted)."""
    alpha = float(np.min(t / h))
    beta = float(np.min(t[x > 0] / x[x > 0])) if np.any(x > 0) else math.nan
    lat = bw = np.zeros(len(t), bool)
    method, a_se, b_se = "regimes", math.nan, math.nan
    for _ in range(200):
        new_lat = h * alpha >= share * t
        new_bw = x * beta >= share * t
        if new_lat.sum() < 2 or new_bw.sum() < 2:
            method = "joint"
            break
        same = np.array_equal(new_lat, lat) and np.array_equal(new_bw, bw)
        lat, bw = new_lat, new_bw
        old = (alpha, beta)
        alpha, a_se = _one_param_lsq(h[lat], (t - x * beta)[lat])
        beta, b_se = _one_param_lsq(x[bw], (t - h * alpha)[bw])
        if same and abs(alpha - old[0]) <= 1e-12 * abs(alpha) and abs(beta - old[1]) <= 1e-12 * abs(beta):
            break
    return method, alpha, beta, a_se, b_se, lat, bw


def _fit_joint(h: np.ndarray, x: np.ndarray, t: np.ndarray) -> tuple[float, float, float, float]:
    """α, β and their standard errors by least squares of the relative error over every row."""
    design = np.column_stack([h, x]) / t[:, None]
    # The α column is ~1/t and the β column ~n/t: many orders of magnitude apart. Solve and take
    # the covariance in unit-norm columns, or the small singular value drowns in rounding.
    scale = np.linalg.norm(design, axis=0)
    scale[scale == 0] = 1.0
    unit = design / scale
    coef_u, *_ = np.linalg.lstsq(unit, np.ones(len(t)), rcond=None)
    resid = np.ones(len(t)) - unit @ coef_u
    dof = max(len(t) - 2, 1)
    cov = float(resid @ resid) / dof * np.linalg.pinv(unit.T @ unit) / np.outer(scale, scale)
    coef = coef_u / scale
    return (float(coef[0]), float(coef[1]),
            float(np.sqrt(max(cov[0, 0], 0.0))), float(np.sqrt(max(cov[1, 1], 0.0))))


def _fit_notes(method: str, n_points: int, alpha: float, beta: float, a_se: float, b_se: float,
               h0: float) -> list[str]:
    """What a reader should know of a fit: unphysical, exact through two sizes, or unreliable."""
    notes = []
    if beta <= 0 or alpha < 0:
        notes.append("the fit is unphysical (α < 0 or β ≤ 0): the timings do not follow α-β")
    if method == "joint" and n_points < 3:
        notes.append("two sizes: the fit is exact, no uncertainty")
    b_bps, b_se_bps = (1.0 / beta, b_se / beta**2) if beta > 0 else (math.nan, math.nan)
    unreliable = [what for what, se, v in (("bus bandwidth", b_se_bps, b_bps),
                                           ("latency", h0 * a_se, h0 * alpha))
                  if se >= UNRELIABLE_SE_SHARE * abs(v)]
    if unreliable:
        notes.append(f"unreliable: the standard error of the {' and the '.join(unreliable)} is at least half "
                     "the value")
    return notes


def _from_summaries(df: pd.DataFrame, table: pd.DataFrame) -> tuple[list[str], np.ndarray]:
    """Fill in, in place, what a DeepSpeed comms log states of its calls where ``df`` has no size or time:
    the message size alone (``msg_size_bytes``: 1024-based units rounded to 2 decimals, of the tensor
    argument, so an all-gather's shard: its full vector is that × the group,
    :func:`zerocalc.validate.accounting.full_from_message`, as ``check`` reads it) and
    a ``log_summary`` row's mean time of its size
    (``mean_duration_s``: each of its calls fitted at it). Returns the notes saying so, and the all-gathers
    whose size waits on a group size the trace does not record."""
    notes = []
    waits = np.zeros(len(df), dtype=bool)
    if "msg_size_bytes" in table.columns:
        msg = _num(table["msg_size_bytes"])
        use = (np.isnan(df["n"].to_numpy(float)) & ~np.isnan(msg) & (msg > 0)
               & df["op"].isin(list(_OP_VERBS)).to_numpy())
        gathers = df["op"].to_numpy() == "all_gather"
        waits = use & gathers & np.isnan(df["p"].to_numpy(float))
        use &= ~waits
        if use.any():
            df.loc[use, "n"] = full_from_message(gathers, msg, df["p"].to_numpy(float))[use]
            notes.append(f"{int(use.sum())} call(s) record only an approximate message size (DeepSpeed's "
                         "comms logger: 1024-based units rounded to 2 decimals, an all-gather's shard times "
                         "its group): fitted on those bytes")
    if "mean_duration_s" in table.columns:
        mean = _num(table["mean_duration_s"])
        fastest = (_num(table["comm_mean_duration_s"]) if "comm_mean_duration_s" in table.columns
                   else np.full(len(table), np.nan))
        use = (np.isnan(df["t"].to_numpy(float)) & ~np.isnan(mean) & (mean > 0)
               & df["op"].isin(list(_OP_VERBS)).to_numpy())
        without_wait = use & ~np.isnan(fastest) & (fastest > 0)
        if use.any():
            df.loc[use, "t"] = np.where(without_wait, fastest, mean)[use]
            notes.append(f"{int(use.sum())} call(s) are rows of a log_summary table, which states each "
                         "size's mean time alone: each call fitted at its size's mean")
        if without_wait.any():
            notes.append(f"{int(without_wait.sum())} of them at the mean its breakdown with straggler effect "
                         "gives of the fastest rank (log_summary(show_straggler=True): each call's time "
                         "without the wait for the last rank to arrive)")
    return notes, waits


def _size_bytes(table: pd.DataFrame) -> np.ndarray:
    """Full-vector bytes per row: nccl-tests' ``size_bytes`` where present, else elements × bytes."""
    full = full_vector_elements(table["op"].astype(str).to_numpy(), _num(table["in_nelems"]),
                                _num(table["out_nelems"])) * _num(table["elem_bytes"])
    if "size_bytes" in table.columns:
        sb = _num(table["size_bytes"])
        full = np.where(np.isnan(sb), full, sb)
    return full


@dataclass(frozen=True)
class FitResult:
    """The fits of one input, what was left out and why, and what was filled in."""

    fits: tuple[AlphaBetaFit, ...]
    #: one sentence per (op, group size) left out, with the reason
    skipped: tuple[str, ...]
    notes: tuple[str, ...]


def fit_trace(table: pd.DataFrame, *, meta: dict | None = None, pooled: bool = False) -> FitResult:
    """Fit α-β per (op, group size) on every timed row of a canonical table (or nccl-tests rows).

    A call that records no group size takes its file's ``world_size`` from ``meta`` (as
    :func:`measure` does), said in ``notes``. Collectives without a duration, a size or a group
    of two or more ranks, and (op, group size) pairs with fewer than two distinct sizes, are
    left out and named in ``skipped`` with the reason, as are nccl-tests rows whose result failed the
    test's check (the out-of-place ``#wrong`` cell above 0,
    :func:`zerocalc.traces.nccl_tests_rows.counts_wrong`). ``pooled=True`` fits one α and β over all
    data-carrying ops per group size instead.
    """
    if table.empty or "duration_s" not in table.columns:
        raise TraceMismatchError("no timed collectives to fit (the input has no durations)")
    df = pd.DataFrame({
        "op": table["op"].astype(str).to_numpy(),
        "p": _num(table["group_size"]),
        "n": _size_bytes(table),
        "t": _num(table["duration_s"]),
        "busbw": _num(table["busbw_GBps"]) if "busbw_GBps" in table.columns else np.nan,
        "file": table["file"].astype(str).to_numpy() if "file" in table.columns else "",
    })
    notes = []
    ws = _world_sizes(meta)
    nop = df["p"].isna() & df["op"].isin(list(_OP_VERBS))
    if nop.any() and ws:
        fill = df["file"].map(ws)
        filled = nop & fill.notna()
        df.loc[filled, "p"] = fill[filled]
        for f, cnt in df[filled].groupby("file").size().items():
            notes.append(f"{f}: {cnt} call(s) record no group size: taken as the trace's world_size {ws[f]}")
    said, waits = _from_summaries(df, table)
    notes += said
    reason = pd.Series("", index=df.index)
    reason[df["p"].isna()] = "no group size recorded (give a trace with a world size, or fit --ranks)"
    reason[df["p"] <= 1] = "group of one rank (nothing crosses)"
    reason[~(df["n"] > 0) & ~waits] = "no size recorded"
    reason[~(df["t"] > 0)] = "no duration recorded"
    if "wrong" in table.columns and "layout" in table.columns:  # nccl-tests rows
        from zerocalc.traces.nccl_tests_rows import counts_wrong

        counted = np.array([counts_wrong(x) for x in table["layout"]], dtype=bool)
        reason[counted & (_num(table["wrong"]) > 0)] = (
            "failed nccl-tests' check (#wrong above 0): a failed run's time, not the collective's")
    data = df["op"].isin(list(_OP_VERBS))
    skipped = []
    for (o, p, why), g in df.assign(why=reason)[data & (reason != "")].groupby(
            ["op", "p", "why"], sort=True, dropna=False):
        where = f"on {int(p)} ranks" if p == p else "on ? ranks"
        skipped.append(f"{o} {where}: {len(g)} call(s) left out: {why}")
    df = df[data & (reason == "")]
    fits = []
    keys = ["p"] if pooled else ["op", "p"]
    for _, g in df.groupby(keys, sort=True):
        try:
            f = fit_alpha_beta(g["n"], g["t"], op=list(g["op"]), group_size=list(g["p"]))
            big = g[g["n"].isin(f.bandwidth_sizes_bytes)]
            small = g[g["n"].isin(f.latency_sizes_bytes)]
            fits.append(replace(
                f,
                reported_busbw_GBps=float(big["busbw"].max()) if big["busbw"].notna().any() else math.nan,
                small_message_time_s=float(small["t"].median()) if len(small) else math.nan,
            ))
        except TraceMismatchError:
            label = "+".join(sorted(set(g["op"])))
            sizes = g["n"].nunique()
            skipped.append(f"{label} on {int(g['p'].iloc[0])} ranks: {len(g)} call(s) of {sizes} "
                           f"size{'' if sizes == 1 else 's'} left out: {ONE_SIZE}")
    return FitResult(fits=tuple(fits), skipped=tuple(skipped), notes=tuple(notes))


def fit_table(table: pd.DataFrame, *, pooled: bool = False, meta: dict | None = None) -> list[AlphaBetaFit]:
    """The fits of :func:`fit_trace` as a list; raises :class:`TraceMismatchError` (saying what was
    left out and why) when nothing can be fitted."""
    res = fit_trace(table, meta=meta, pooled=pooled)
    if not res.fits:
        raise TraceMismatchError("nothing to fit: " + ("; ".join(res.skipped) or "no timed collectives with "
                                                       "a size and a group of two or more ranks"))
    return list(res.fits)


def fits_frame(fits: Iterable[AlphaBetaFit]) -> pd.DataFrame:
    """Fits as a tidy table (one row per fit, units in column names)."""
    return pd.DataFrame([f.as_record() for f in fits])


# ---------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    """Step communication time: α-β prediction for the measured calls vs the measured durations."""

    fit: AlphaBetaFit | None
    fit_source: str
    predicted_step_time_s: float
    measured_step_time_s: float
    ratio: float
    note: str = ""


#: A fit on a trace's own calls whose worst relative residual exceeds this, or a prediction off the
#: measured sum by more than this factor, is taken as timings that include waiting for other ranks: a
#: collective kernel starts when its rank launches it and ends when the slowest rank has joined.
SKEW_MAX_REL_RESIDUAL = 1.0
SKEW_MAX_RATIO = 2.0


def timing(m: Measurement, fit: AlphaBetaFit | None = None, *, backend: str | None = None) -> Timing | None:
    """Predicted vs measured step communication time (mean per rank and step, step category).

    Without ``fit``, α and β are fitted (pooled over ops, :func:`fit_alpha_beta`) on the
    trace's own timed step calls. Returns None when the trace has no durations.
    """
    from zerocalc.validate.classify import STEP

    c = m.columns
    step = np.flatnonzero((c.cat == STEP) & (c.step_id >= 0))
    dur = c.duration_s[step]
    if not len(step) or np.all(np.isnan(dur)):
        return None
    source = "given"
    notes = []
    full, eb, ps = c.full_elements[step], c.elem_bytes[step], c.group_size[step]
    ops = c.ops.take(step)
    if fit is None:
        timed = ~np.isnan(dur) & (full > 0)
        try:
            fit = fit_alpha_beta(full[timed] * eb[timed], dur[timed], op=ops.take(timed).labels("nan"),
                                 group_size=ps[timed])
            source = "fitted on this trace's step collectives (pooled over ops)"
        except TraceMismatchError as exc:
            return Timing(None, "none", math.nan, float(np.nansum(dur)) / (len(m.ranks) * m.steps), math.nan,
                          note=str(exc))
    pred = float(np.sum(
        _per_op_and_size(latency_hops, ops, ps) * fit.alpha_s
        + _per_op_and_size(busbw_factor, ops, ps) * full * eb * fit.beta_s_per_byte
    )) / (len(m.ranks) * m.steps) if fit.physical else math.nan
    meas = float(np.nansum(dur)) / (len(m.ranks) * m.steps)
    if backend == "gloo":
        notes.append("gloo: durations are CPU op times that include waiting for the other ranks")
    if fit.note:
        notes.append(fit.note)
    ratio = meas / pred if pred > 0 else math.nan
    own = source != "given"
    missed = math.isfinite(ratio) and not 1 / SKEW_MAX_RATIO <= ratio <= SKEW_MAX_RATIO
    if (own and fit.max_abs_rel_residual > SKEW_MAX_REL_RESIDUAL) or missed:
        why = ([f"the fit misses its own calls by up to {fit.max_abs_rel_residual:.0%}"]
               if own and fit.max_abs_rel_residual > SKEW_MAX_REL_RESIDUAL else [])
        if missed:
            why.append(f"the prediction misses the measured sum {ratio:.3g}×")
        notes.append(f"{' and '.join(why)}: the kernel durations include waiting for the other ranks "
                     "(skew between them), so these α-β numbers are not a measurement of the links")
    return Timing(fit, source, float(pred), meas, ratio, "; ".join(notes))

