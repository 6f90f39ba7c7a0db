"""Measured against predicted: per-step volume per rank, which scheme ran, α and β fitted.

Three parts, all pure (tables in, dataclasses and tables out; no printing, no files):

* **Fit** (:func:`fit_alpha_beta`, :func:`fit_table`): least squares of the ring α-β
  model ``t = h(op, p)·α + f(op, p)·n·β`` (Thakur, Rabenseifner & Gropp 2005; ``h`` latency hops of the ring,
  ``f`` the nccl-tests bus-bandwidth factor, ``n`` the full vector in bytes), so that
  ``1/β`` *is* the bus bandwidth. How the two regimes are handled is said in
  :func:`fit_alpha_beta`.
* **Measure** (:func:`measure`): bytes each rank sent per step under the model's ring
  accounting (:func:`zerocalc.collectives.bytes_sent_per_rank`), every call put in one
  category (:data:`CATEGORIES`), nothing dropped; steps, Ψ, N and missing element types
  taken from options or inferred, with the inference kept as text for the user.
* **Compare** (:func:`compare`, :func:`check`): every scheme's predicted per-step
  collectives against the measured ones, by volume and by pattern (which ops, how much,
  in what order), the consistent schemes best first, and each mismatch in words.

Sources: DeepSpeed issues #5758 and #6463 and PyTorch issue #69591 (what implementations send);
Thakur, Rabenseifner & Gropp 2005 and nccl-tests ``doc/PERFORMANCE.md`` (collective cost,
nccl-tests bus bandwidth), §5 (trace formats).
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from zerocalc.errors import ConfigError, TraceMismatchError, UnknownNameError

# ---------------------------------------------------------------------------
# Ring accounting (Thakur, Rabenseifner & Gropp 2005) and nccl-tests factors (doc/PERFORMANCE.md)
# ---------------------------------------------------------------------------

#: Ops a data-parallel scheme is made of (the model's collective names).
DP_OPS: tuple[str, ...] = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce")

#: Display names of ops, for sentences.
OP_NAMES: dict[str, str] = {
    "all_reduce": "all-reduce", "reduce_scatter": "reduce-scatter", "all_gather": "all-gather",
    "broadcast": "broadcast", "reduce": "reduce", "all_to_all": "all-to-all", "send": "send",
    "recv": "recv", "barrier": "barrier", "other": "other",
}
_OP_VERBS: dict[str, str] = {
    "all_reduce": "all-reduces", "reduce_scatter": "reduce-scatters", "all_gather": "all-gathers",
    "broadcast": "broadcasts", "reduce": "reduces", "all_to_all": "exchanges all-to-all",
}


@functools.cache
def ring_bytes_factor(op: str, p: float) -> float:
    """Bytes one rank sends in one ring call ÷ bytes of the full vector, averaged over ranks.

    For the six collectives this is :func:`zerocalc.collectives.bytes_sent_per_rank` with the
    ring algorithm (all-reduce 2(p-1)/p; reduce-scatter, all-gather, broadcast, reduce as a
    pipelined chain, and all-to-all (p-1)/p; Thakur, Rabenseifner & Gropp 2005; Patarasuk & Yuan
    2009) as a number; the trace-only ops add send 1, recv, barrier and other 0, and a group of one
    rank sends nothing. Unknown ops raise :class:`UnknownNameError`.
    """
    if op == "send":
        return 1.0
    if op in ("recv", "barrier", "other") or p <= 1:
        return 0.0
    if op not in _OP_VERBS:
        raise UnknownNameError("collective", op, list(OP_NAMES))
    from zerocalc.collectives import bytes_sent_per_rank

    return float(bytes_sent_per_rank(op, 1, int(p) if float(p).is_integer() else p))


def busbw_factor(op: str, p: float) -> float:
    """nccl-tests bus-bandwidth factor (``busbw = algbw × factor``, nccl-tests doc/PERFORMANCE.md).

    all-reduce 2(p-1)/p; all-gather, reduce-scatter, all-to-all (p-1)/p; broadcast,
    reduce, send/recv 1. For the ring this is also the time-relevant bytes per rank ÷ n.
    """
    if op == "all_reduce":
        return 2 * (p - 1) / p
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (p - 1) / p
    if op in ("broadcast", "reduce", "send", "recv"):
        return 1.0
    raise UnknownNameError("collective", op, list(_OP_VERBS) + ["send", "recv"])


def latency_hops(op: str, p: float) -> float:
    """α terms of the ring (NCCL ``src/graph/tuning.cc``): all-reduce 2(p-1), others p-1, p2p 1."""
    if op == "all_reduce":
        return 2.0 * (p - 1)
    if op in ("send", "recv"):
        return 1.0
    return float(p - 1)


def _num(col: pd.Series) -> np.ndarray:
    """A nullable pandas column as float numpy with NaN for missing."""
    return pd.to_numeric(col, errors="coerce").astype("float64").to_numpy(na_value=np.nan)


def full_vector_elements(op: np.ndarray, in_nelems: np.ndarray, out_nelems: np.ndarray) -> np.ndarray:
    """Elements of the collective's full vector from the canonical in/out
    (the convention of Thakur, Rabenseifner & Gropp 2005).

    all-reduce, broadcast, reduce: in = out = full; all-gather: out (= shard × p);
    reduce-scatter: in; all-to-all: the rank's send buffer (in); send: in; others 0.
    """
    full = np.where(np.isnan(out_nelems), in_nelems, np.fmax(in_nelems, out_nelems))
    full = np.where(np.isin(op, ["all_to_all", "send"]), in_nelems, full)
    full = np.where(np.isin(op, ["recv", "barrier", "other"]), 0.0, full)
    return full


# ---------------------------------------------------------------------------
# α-β fit
# ---------------------------------------------------------------------------


#: A fit whose standard error reaches this share of its value is flagged as unreliable.
UNRELIABLE_SE_SHARE = 0.5


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
    def reliable(self) -> bool:
        """False when a standard error is at least half its value (latency or bus bandwidth):
        the fit then says little more than the order of magnitude."""
        return not (self.busbw_se_Bps >= UNRELIABLE_SE_SHARE * abs(self.busbw_Bps)
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
    op_label = ops[0] if len(set(ops)) == 1 else "+".join(sorted(set(ops)))
    p_label = int(ps[0]) if len(set(ps.tolist())) == 1 else -1
    if len(n) < 2 or len(set(n.tolist())) < 2:
        raise TraceMismatchError(
            f"cannot fit α and β for {op_label}: need timed calls of at least two sizes, "
            f"got {len(n)} call(s) of {len(set(n.tolist()))} size(s)"
        )
    h = _per_op_and_size(latency_hops, np.asarray(ops, dtype=object), ps)
    x = _per_op_and_size(busbw_factor, np.asarray(ops, dtype=object), ps) * n

    alpha = float(np.min(t / h))
    beta = float(np.min(t[x > 0] / x[x > 0])) if np.any(x > 0) else math.nan
    lat = bw = np.zeros(len(n), bool)
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
    if method == "joint":
        lat = bw = np.ones(len(n), bool)
        design = np.column_stack([h, x]) / t[:, None]
        # The α column is ~1/t and the β column ~n/t: many orders of magnitude apart. Solve and take
        # the covariance in unit-norm columns, or the small singular value drowns in rounding.
        scale = np.linalg.norm(design, axis=0)
        scale[scale == 0] = 1.0
        unit = design / scale
        coef_u, *_ = np.linalg.lstsq(unit, np.ones(len(n)), rcond=None)
        resid = np.ones(len(n)) - unit @ coef_u
        dof = max(len(n) - 2, 1)
        cov = float(resid @ resid) / dof * np.linalg.pinv(unit.T @ unit) / np.outer(scale, scale)
        coef = coef_u / scale
        alpha, beta = float(coef[0]), float(coef[1])
        a_se, b_se = float(np.sqrt(max(cov[0, 0], 0.0))), float(np.sqrt(max(cov[1, 1], 0.0)))
    rel = (h * alpha + x * beta - t) / t
    h0 = latency_hops(ops[0], ps[0])
    notes = []
    if beta <= 0 or alpha < 0:
        notes.append("the fit is unphysical (α < 0 or β ≤ 0): the timings do not follow α-β")
    if method == "joint" and len(n) < 3:
        notes.append("two sizes: the fit is exact, no uncertainty")
    b_bps, b_se_bps = (1.0 / beta, b_se / beta**2) if beta > 0 else (math.nan, math.nan)
    unreliable = [what for what, se, v in (("bus bandwidth", b_se_bps, b_bps),
                                           ("latency", h0 * a_se, h0 * alpha))
                  if se >= UNRELIABLE_SE_SHARE * abs(v)]
    if unreliable:
        notes.append(f"unreliable: the standard error of the {' and the '.join(unreliable)} is at least half "
                     "the value")
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
    left out and named in ``skipped`` with the reason. ``pooled=True`` fits one α and β over all
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
    reason = pd.Series("", index=df.index)
    reason[df["p"].isna()] = "no group size recorded (give a trace with a world size)"
    reason[df["p"] <= 1] = "group of one rank (nothing crosses)"
    reason[~(df["n"] > 0)] = "no size recorded"
    reason[~(df["t"] > 0)] = "no duration recorded"
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
                           f"size{'' if sizes == 1 else 's'} left out: a fit needs at least two sizes")
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
# Measured volume
# ---------------------------------------------------------------------------

#: Category of every measured call, with what it means.
CATEGORIES: dict[str, str] = {
    "step": "gradient and parameter traffic of the step (what the schemes model)",
    "buffers": "per-step broadcasts of model buffers (e.g. DDP's BatchNorm statistics), not parameters",
    "scalar": "small scalar collectives (loss, gradient norm, overflow flags) and barriers",
    "one_off": "traffic outside the steady state (initial broadcasts, calls outside the profiled steps)",
    "unexplained": "collectives no data-parallel scheme explains (all-to-all, point-to-point, other groups)",
}

#: A collective whose full vector has at most this many elements is a scalar collective.
SCALAR_MAX_ELEMENTS = 8
#: Per-step broadcasts moving less than this share of Ψ are model buffers, not parameters.
BUFFER_MAX_SHARE_OF_PSI = 0.5
#: Relative tolerance of "the same volume" (padding of shards, rounding in traces).
RTOL = 0.02


@dataclass(frozen=True)
class Measurement:
    """What a trace says, per rank and per step, with how each fact was obtained.

    ``calls`` is the canonical table plus columns ``step_id`` (the step used, -1 outside the
    steps), ``elem_bytes_used``, ``full_elements``, ``bytes_sent``, ``category``,
    ``duration_used_s`` and ``group_size_used`` (the world size, else ``n``, where a call records none).
    ``psi_how``, ``n_how``, ``steps_how`` and ``notes`` are sentences for the user.
    """

    calls: pd.DataFrame
    psi: int
    psi_how: str
    psi_trace: int | None
    n: int
    n_how: str
    steps: int
    steps_how: str
    ranks: tuple[int, ...]
    comm_elem_bytes: float
    comm_dtype: str
    notes: tuple[str, ...]
    per_step: pd.DataFrame  # rank, step_id, category, calls, bytes_sent, duration_s
    categories: pd.DataFrame  # category, description, calls_per_rank_per_step, bytes_per_rank_per_step, ...
    #: (op, calls, full elements, bytes) per rank and step, in first-appearance order
    pattern: tuple[tuple[str, float, float, float], ...]
    order_variants: int
    #: how ranks were identified when the trace records none ("" when it records them)
    ranks_how: str = ""

    @property
    def bytes_per_rank_per_step(self) -> float:
        """Mean over ranks and steps of the step category's bytes sent."""
        row = self.categories[self.categories["category"] == "step"]
        return float(row["bytes_per_rank_per_step"].iloc[0]) if len(row) else 0.0


def _set_aside(df: pd.DataFrame, meta: dict | None) -> np.ndarray:
    """Rows that are not one call of one rank: DeepSpeed ``log_summary`` aggregates, nccl-tests rows."""
    aside = np.zeros(len(df), bool)
    if "summary" in df.columns:
        aside |= df["summary"].fillna(False).astype(bool).to_numpy()
    bench = {str(f) for f, m in (meta or {}).items()
             if isinstance(m, dict) and m.get("format") == "nccl_tests"}
    if bench:
        aside |= df["file"].astype(str).isin(bench).to_numpy()
    return aside


def _world_sizes(meta: dict | None) -> dict[str, int]:
    out = {}
    for f, m in (meta or {}).items():
        ws = m.get("world_size") if isinstance(m, dict) else None
        if ws is not None and not pd.isna(ws):
            out[str(f)] = int(ws)
    return out


def _plural(k: float, word: str, words: str | None = None) -> str:
    """``1 call``, ``2 calls``, ``1.5 calls`` (``words``: an irregular plural)."""
    return f"{k:g} {word}" if k == 1 else f"{k:g} {words or word + 's'}"


def _per_op_and_size(func, op: np.ndarray, p: np.ndarray) -> np.ndarray:
    """``func(op, p)`` for every row, computed once per distinct (op, p) pair."""
    if len(op) == 0:
        return np.zeros(0)
    pairs = pd.DataFrame({"o": np.asarray(op, dtype=object), "p": np.asarray(p, dtype=float)})
    code = pairs.groupby(["o", "p"], sort=False, dropna=False).ngroup().to_numpy()
    uniq = pairs.drop_duplicates()
    vals = np.array([func(o, q) for o, q in zip(uniq["o"], uniq["p"], strict=True)], dtype=float)
    return vals[code]


#: Columns that tell one process apart from another when a trace records no rank (NCCL debug lines
#: start ``host:pid:tid``; NCCL's own ``misc/debug.cc``).
PROCESS_COLUMNS: tuple[str, ...] = ("file", "host", "pid")


def _ranks_by_process(df: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Rows without a rank get one per process (file, and host and pid where the table has them).

    NCCL debug logs without ``Init COMPLETE`` lines (``NCCL_DEBUG_SUBSYS=COLL``) record no rank, and
    one file often holds the lines of every process: merged, they would count as one rank sending
    the traffic of all. Returns the table and a sentence saying how the ranks were told apart
    ("" when every row has a rank). Known ranks keep their numbers; processes are numbered after them.
    """
    na = df["rank"].isna().to_numpy()
    if not na.any():
        return df.assign(rank=df["rank"].astype(int)), ""
    cols = [c for c in PROCESS_COLUMNS if c in df.columns and df.loc[na, c].notna().any()]
    key = df.loc[na, cols].astype(str)
    proc = key.groupby(cols, sort=False).ngroup().to_numpy()
    known = df.loc[~na, "rank"]
    base = int(known.max()) + 1 if len(known) else 0
    rank = df["rank"].astype("Int64").to_numpy(dtype=object, na_value=None)
    rank[na] = base + proc
    df = df.assign(rank=np.asarray(rank, dtype=np.int64))
    k = int(proc.max()) + 1
    first, last = base, base + k - 1
    span = f"rank {first}" if k == 1 else f"ranks {first}–{last}"
    return df, (f"the trace records no rank for {_plural(k, 'process', 'processes')}: told apart by process "
                f"({' + '.join(cols)}) and numbered {span} in order of appearance")


def _tensor_parallel_sizes(df: pd.DataFrame, gs: np.ndarray, data_ops: np.ndarray,
                           sizes: Counter) -> set[int]:
    """Group sizes, below the largest, whose groups are blocks of consecutive global ranks.

    Megatron-LM orders ranks tensor-parallel first (``parallel_state.py``, order ``tp-cp-ep-dp-pp``):
    a tensor-parallel group of p is ranks kp … kp+p−1, each at position ``rank mod p``, while a
    data-parallel group takes every TP-th rank. Read from NCCL's per-communicator rank
    (``comm_rank``) where the trace has it and the data collectives run on groups of several sizes;
    a size is left out only if another remains.
    """
    if "comm_rank" not in df.columns or len(sizes) < 2:
        return set()
    cr = _num(df["comm_rank"])
    rank = df["rank"].to_numpy(dtype=float)
    out = set()
    for p in sorted(sizes)[:-1]:
        on = data_ops & (gs == p)
        if p > 1 and on.any() and not np.isnan(cr[on]).any() and np.all(cr[on] == rank[on] % p):
            out.add(p)
    return out if len(out) < len(sizes) else set()


def _order_calls(df: pd.DataFrame) -> pd.DataFrame:
    keys = [c for c in ("rank", "start_s", "source_line") if c in df.columns]
    return df.sort_values(keys, kind="stable", na_position="last")


def _z_function(codes: Sequence[int]) -> np.ndarray:
    """``z[i]`` = length of the longest common prefix of ``codes`` and ``codes[i:]`` (``z[0] = len``).

    The linear-time Z-algorithm (Gusfield 1997, §1.4).
    """
    m = len(codes)
    z = [0] * m
    if m:
        z[0] = m
    lo = hi = 0
    for i in range(1, m):
        k = min(hi - i, z[i - lo]) if i < hi else 0
        while i + k < m and codes[k] == codes[i + k]:
            k += 1
        z[i] = k
        if i + k > hi:
            lo, hi = i, i + k
    return np.asarray(z, dtype=np.int64)


def _repeating_suffix(sig: Sequence, want: int | None, *, min_period: int = 1) -> tuple[int, int]:
    """(period, repetitions) of equal blocks ending the sequence.

    Without ``want``: the run of at least two equal blocks that covers the most calls (ties: the
    shorter period), considering only periods ≥ ``min_period`` (the caller's way of refusing a block
    made only of scalar collectives). With ``want`` (``--steps K``): the *longest* block repeated
    at least K times at the end, so that K = 1 takes the whole sequence as one step; (0, 0) when
    there is none.

    Linear in the length: reversed, the sequence ends in ``r`` repetitions of period ``p`` exactly
    when its Z-function at ``p`` is at least ``(r - 1)·p``.
    """
    m = len(sig)
    if m == 0:
        return (0, 0)
    if isinstance(sig, np.ndarray):
        codes = sig[::-1].tolist()
    else:
        index: dict = {}
        codes = [index.setdefault(x, len(index)) for x in reversed(list(sig))]
    z = _z_function(codes)
    periods = np.arange(1, m + 1)
    reps = 1 + np.minimum(np.append(z[1:], 0), m - periods) // periods
    if want is None:
        ok = (reps >= 2) & (periods >= min_period)
        if not ok.any():
            return (0, 0)
        cover = np.where(ok, periods * reps, 0)
        i = int(np.argmax(cover))  # first maximum: the shortest period among ties
        return int(periods[i]), int(reps[i])
    ok = np.flatnonzero(reps >= max(want, 1))
    if not len(ok):
        return (0, 0)
    i = int(ok[-1])
    return int(periods[i]), int(want)


def measure(
    table: pd.DataFrame,
    *,
    psi: int | None = None,
    n: int | None = None,
    steps: int | None = None,
    dtype: str | None = None,
    meta: dict | None = None,
) -> Measurement:
    """Bytes each rank sent per step, by category, from a canonical trace table.

    ``psi``, ``n``, ``steps`` and ``dtype`` are the user's options (None: infer from the
    trace). Raises :class:`TraceMismatchError` for mixed world sizes, no collectives,
    or options the trace contradicts, and :class:`ConfigError` for bad option values.
    """
    from zerocalc.dtypes import DTYPE_BYTES, canonical_dtype  # the one dtype → bytes table

    notes: list[str] = []
    if steps is not None and steps < 1:
        raise ConfigError(f"must be a positive integer, got {steps}", option="--steps")
    if n is not None and n < 1:
        raise ConfigError(f"must be a positive integer, got {n}", option="--n")
    if dtype is not None:
        dtype = canonical_dtype(dtype)

    ws = _world_sizes(meta)
    if len(set(ws.values())) > 1:
        by = ", ".join(f"{f} ({w})" for f, w in sorted(ws.items()))
        raise TraceMismatchError(f"traces of different world sizes mixed: {by}")
    df = table[table["op"].astype(str) != "other"] if len(table) else table
    aside = _set_aside(df, meta)
    if aside.any():
        fcol = df["file"].astype(str)
        kept = set(fcol[~aside])
        whole = sorted(set(fcol[aside]) - kept)
        part = sorted(set(fcol[aside]) & kept)
        if whole:
            notes.append("set aside (aggregates or benchmarks, not per-call traces): " + ", ".join(whole))
        for f in part:
            k = int((aside & (fcol == f).to_numpy()).sum())
            notes.append(f"set aside {_plural(k, 'aggregate row')} of {f} (summaries, not calls); "
                         f"its {_plural(int(((~aside) & (fcol == f).to_numpy()).sum()), 'per-call row')} "
                         "are counted")
        df = df[~aside]
    if df.empty or not df["op"].astype(str).isin(list(_OP_VERBS)).any():
        files = ", ".join(sorted(set(table["file"].astype(str)))) if len(table) else "the input"
        hint = (" (nccl-tests output and comms-logger summaries are not per-call traces)"
                if aside.any() else "")
        raise TraceMismatchError(f"no collectives in {files}: nothing to check{hint}")
    if df["rank"].notna().any():
        per_rank = df[df["rank"].notna()].groupby("rank")["file"].agg(lambda f: sorted(set(f.astype(str))))
        dup = {int(r): f for r, f in per_rank.items() if len(f) > 1}
        if dup:
            r, f = next(iter(dup.items()))
            raise TraceMismatchError(
                f"rank {r} appears in {len(f)} files ({', '.join(f)}): these are several runs; "
                "check one at a time"
            )
    df, ranks_how = _ranks_by_process(df.reset_index(drop=True))
    if ranks_how:
        notes.append(ranks_how)
    df = _order_calls(df).reset_index(drop=True)
    op = df["op"].astype(str).to_numpy()

    # --- N: option or the trace's data-parallel group size --------------------------------
    gs = _num(df["group_size"])
    data_ops = np.isin(op, list(_OP_VERBS))
    world = next(iter(ws.values()), None)
    if np.all(np.isnan(gs[data_ops])) and world is None and n is None:
        raise TraceMismatchError("the trace records no group sizes and no world size: give --n")
    gs = np.where(np.isnan(gs), world if world is not None else (n or np.nan), gs)
    sizes_by_elems = Counter()
    in_e, out_e = _num(df["in_nelems"]), _num(df["out_nelems"])
    full = full_vector_elements(op, in_e, out_e)
    for p, e in zip(gs[data_ops], np.nan_to_num(full[data_ops]), strict=True):
        sizes_by_elems[int(p)] += e
    trace_n = max(sizes_by_elems, key=lambda k: (sizes_by_elems[k], k))
    inner = _tensor_parallel_sizes(df, gs, data_ops, sizes_by_elems)
    if inner:
        trace_n = max((k for k in sizes_by_elems if k not in inner), key=lambda k: (sizes_by_elems[k], k))
    if n is None:
        n = trace_n
        n_how = f"N = {n}: inferred from the trace (group size of the collectives that move the most data"
        if inner:
            n_how = (f"N = {n}: inferred from the trace (the data-parallel groups: the groups of "
                     f"{' and '.join(map(str, sorted(inner)))} ranks are consecutive global ranks, tensor "
                     "parallelism's layout, and are reported apart")
        elif len(sizes_by_elems) > 1:
            others = ", ".join(str(k) for k in sorted(sizes_by_elems) if k != n)
            n_how += (f"; the trace also has groups of {others} ranks, reported apart: give --n if the "
                      "data-parallel group is another")
        n_how += f"; world_size {world} in the trace header)" if world is not None else ")"
    else:
        if n not in sizes_by_elems:
            raise TraceMismatchError(
                f"--n {n} contradicts the trace: its collectives run on groups of "
                f"{', '.join(str(k) for k in sorted(sizes_by_elems))} ranks"
            )
        n_how = f"N = {n}: from --n (the trace has collectives on groups of {n})"
    ranks = tuple(sorted(set(df["rank"].tolist())))
    if world is not None and len(ranks) > world:
        raise TraceMismatchError(f"{len(ranks)} ranks in the traces but world_size is {world}")
    if len(ranks) > n:
        n_how += (f"; {len(ranks)} ranks in all: each data-parallel group of {n} is one of "
                  f"{len(ranks) / n:g} model-parallel (pipeline or tensor) parts")

    # --- element types: recorded, else --dtype, else the rest of the trace ----------------
    eb = _num(df["elem_bytes"])
    missing = np.isnan(eb) & data_ops & (np.nan_to_num(full) > 0)
    if missing.any():
        if dtype is not None:
            eb = np.where(missing, DTYPE_BYTES[dtype], eb)
            notes.append(f"element type of {int(missing.sum())} call(s) not recorded: {dtype} from --dtype")
        else:
            known = ~np.isnan(eb) & data_ops
            if not known.any():
                raise TraceMismatchError(
                    f"the trace records no element type for its {int(missing.sum())} collective(s): "
                    "give --dtype"
                )
            dt = df["dtype"].astype("string").fillna("").to_numpy()
            step_col = df["step"]
            fill = eb.copy()
            how = Counter()
            for i in np.flatnonzero(missing):
                same = known & (df["rank"].to_numpy() == df["rank"].iat[i])
                if not pd.isna(step_col.iat[i]):
                    same &= (step_col == step_col.iat[i]).fillna(False).to_numpy()
                pool = same if same.any() else known
                w = Counter()
                for j in np.flatnonzero(pool):
                    w[(dt[j], eb[j])] += np.nan_to_num(full[j]) * eb[j]
                (name, b), _ = w.most_common(1)[0]
                fill[i] = b
                how[(op[i], name, "the same step" if same.any() else "the rest of the trace")] += 1
            eb = fill
            for (o, name, where), cnt in sorted(how.items()):
                notes.append(
                    f"element type of {cnt} {OP_NAMES[o]} call(s) not recorded in the trace: "
                    f"taken as {name} ({int(DTYPE_BYTES.get(name, 0)) or '?'} B) from {where}"
                )
    # DeepSpeed's comms logger gives no elements, only the tensor argument's size in 1024-based
    # units rounded to 2 decimals (``msg_size_bytes``; traces/deepspeed_comms.py): the call's bytes,
    # approximately. all_gather_into_tensor's argument is the shard (full vector = shard × p).
    approx = np.full(len(df), np.nan)
    if "msg_size_bytes" in df.columns:
        msg = _num(df["msg_size_bytes"])
        use = data_ops & np.isnan(full) & ~np.isnan(msg)
        approx[use] = np.where(op[use] == "all_gather", msg[use] * gs[use], msg[use])
        if use.any():
            notes.append(f"{_plural(int(use.sum()), 'call')} record only an approximate message size "
                         "(DeepSpeed's comms logger: 1024-based units rounded to 2 decimals): its bytes are "
                         "used, approximately, and give no element count")
            with np.errstate(invalid="ignore"):
                full = np.where(use & (eb > 0), approx / eb, full)
    nosize = data_ops & np.isnan(full) & np.isnan(approx)
    if nosize.any():
        notes.append(f"{_plural(int(nosize.sum()), 'call')} record no size: counted as 0 bytes "
                     "(not as scalar collectives)")
    sized = ~np.isnan(full) | ~np.isnan(approx)
    full_bytes = np.where(np.isnan(full), approx, full * eb)
    # scalar: at most SCALAR_MAX_ELEMENTS elements; a size in bytes only is one at ≥ 1 B per element
    small = np.where(np.isnan(full), np.nan_to_num(approx) <= SCALAR_MAX_ELEMENTS,
                     full <= SCALAR_MAX_ELEMENTS)
    small &= sized
    full = np.nan_to_num(full)
    eb = np.nan_to_num(eb)
    ring = _per_op_and_size(lambda o, p: ring_bytes_factor(o, p) if o in OP_NAMES else 0.0,
                            op, np.nan_to_num(gs, nan=1.0))
    sent = ring * np.nan_to_num(full_bytes)

    # --- steps ---------------------------------------------------------------------------
    step_marked = df["step"].notna().to_numpy()
    step_id = np.full(len(df), -1, dtype=int)
    if step_marked.any():
        step_id[step_marked] = df.loc[step_marked, "step"].astype(int).to_numpy()
        marked = len(set(step_id[step_marked].tolist()))
        if steps is not None and steps != marked:
            raise TraceMismatchError(f"--steps {steps} but the trace marks {marked} step(s)")
        steps_how = f"{marked} step(s) from the trace's step markers"
    else:
        periods = {}
        rank_arr = df["rank"].to_numpy()
        # one integer per distinct (op, in, out, group size): the sequence a step pattern repeats in
        sig = (pd.DataFrame({"o": op, "i": np.nan_to_num(in_e), "u": np.nan_to_num(out_e), "p": gs})
               .groupby(["o", "i", "u", "p"], sort=False, dropna=False).ngroup().to_numpy())
        carries = np.isin(op, list(_OP_VERBS)) & ~small
        bounds = np.flatnonzero(np.diff(rank_arr)) + 1  # df is sorted by rank
        for idx in np.split(np.arange(len(df)), bounds):
            r = int(rank_arr[idx[0]])
            data_at = np.flatnonzero(carries[idx])
            # a step must hold at least one collective that carries data: the last p calls do
            # exactly when p reaches back to the last such call
            min_period = len(idx) - int(data_at[-1]) if len(data_at) else len(idx) + 1
            per, reps = _repeating_suffix(sig[idx], steps, min_period=min_period)
            if per == 0:
                if steps is not None:
                    raise TraceMismatchError(
                        f"--steps {steps}: the calls of rank {r} do not end in {steps} repetitions "
                        "of one pattern"
                    )
                per, reps = len(idx), 1
            start = len(idx) - per * reps
            step_id[idx[start:]] = np.arange(per * reps) // per
            periods[r] = (per, reps, start)
        pers = sorted({v[:2] for v in periods.values()})
        per, reps = pers[0]
        lead = max(v[2] for v in periods.values())
        if steps is not None:
            steps_how = ("1 step from --steps 1: each rank's whole trace is one step" if steps == 1 else
                         f"{reps} step(s) from --steps (the longest run of {reps} equal blocks ending each "
                         f"rank's calls: {_plural(per, 'call')} per step)")
        elif reps == 1:
            steps_how = "no step markers and no repeating pattern: the whole trace is taken as one step"
        else:
            steps_how = (f"{reps} step(s) from a repeating pattern of {_plural(per, 'call')} per step "
                         "(the trace has no step markers)")
        if lead:
            steps_how += f"; {lead} call(s) before the first repetition count as one-off"
        if len(pers) > 1:
            notes.append("ranks differ in their calls (calls per step × steps): "
                         + ", ".join(f"{p_} × {r_}" for p_, r_ in pers))
    n_steps = len(set(step_id[step_id >= 0].tolist())) or 1

    # --- categories ----------------------------------------------------------------------
    cat = np.full(len(df), "step", dtype=object)
    cat[~np.isin(op, list(DP_OPS) + ["barrier"])] = "unexplained"
    other_group = np.isin(op, list(DP_OPS)) & (gs != n)
    cat[other_group] = "unexplained"
    cat[(cat == "step") & (step_id < 0)] = "one_off"
    rank_arr = df["rank"].to_numpy()
    if n_steps > 1:
        # a call signature (rank, op, size, group) that some of its rank's steps lack is not steady state
        st = np.flatnonzero(cat == "step")
        keyed = pd.DataFrame({"r": rank_arr[st], "o": op[st], "f": full[st], "g": gs[st], "s": step_id[st]})
        in_steps = keyed.groupby(["r", "o", "f", "g"], sort=False, dropna=False)["s"].transform("nunique")
        has = step_id >= 0
        steps_of_rank = pd.Series(step_id[has]).groupby(rank_arr[has]).nunique()
        cat[st[in_steps.to_numpy() != steps_of_rank.reindex(rank_arr[st]).to_numpy()]] = "one_off"
    # Ψ as the trace sees it: the element total of one step's gradient collective(s).
    grad = ((cat == "step") & np.isin(op, ["all_reduce", "reduce_scatter", "reduce"])
            & (full > SCALAR_MAX_ELEMENTS))
    psi_trace = None
    if grad.any():
        tot = pd.Series(full[grad]).groupby([rank_arr[grad], step_id[grad]]).sum()
        psi_trace = int(round(float(tot.median())))
        if tot.min() != tot.max():
            notes.append(f"gradient elements per step vary between {int(tot.min()):,} and {int(tot.max()):,}")
    psi_ref = psi_trace if psi_trace is not None else psi
    bc = (cat == "step") & (op == "broadcast")
    if bc.any() and psi_ref:
        bc_tot = pd.Series(full[bc]).groupby([rank_arr[bc], step_id[bc]]).sum()
        if float(bc_tot.max()) < BUFFER_MAX_SHARE_OF_PSI * psi_ref:
            cat[bc] = "buffers"
    cat[(cat == "step") & (small | (op == "barrier"))] = "scalar"
    cat[(cat == "one_off") & (op == "barrier")] = "scalar"

    # --- Ψ: option or trace ----------------------------------------------------------------
    if psi is None:
        if psi_trace is None:
            raise TraceMismatchError(
                "the trace has no gradient collective (all-reduce, reduce-scatter or reduce) "
                "to infer Ψ from: give --psi"
            )
        psi = psi_trace
        psi_how = (f"Ψ = {psi:,}: inferred from the trace (elements of one step's gradient "
                   f"{'/'.join(sorted({OP_NAMES[o] for o in op[grad]}))} calls)")
    else:
        if psi_trace is not None and abs(psi_trace - psi) > RTOL * psi:
            raise TraceMismatchError(
                f"--psi {psi:,} contradicts the trace: its gradient collectives reduce {psi_trace:,} "
                "elements per step"
            )
        psi_how = f"Ψ = {psi:,}: from --psi"
        psi_how += (f" (the trace's gradient collectives reduce {psi_trace:,} elements per step)"
                    if psi_trace is not None else " (the trace has no gradient collective to confirm it)")

    # --- element bytes on the wire: the step traffic's dominant type ----------------------
    # the gradient collectives' dominant type (bytes sent), else the whole step's: a rank that runs
    # something else (a desynchronised all-gather of bytes) does not set the wire type of the gradients
    stepmask = cat == "step"
    gradmask = (stepmask & np.isin(op, ["all_reduce", "reduce_scatter", "reduce"])
                & (full > SCALAR_MAX_ELEMENTS))
    basis = gradmask if gradmask.any() else stepmask
    typed = basis & (eb > 0)  # calls with a size in bytes only have no element type
    dt = df["dtype"].astype("string").fillna("?").to_numpy()
    w = (pd.DataFrame({"dt": dt[typed], "eb": eb[typed], "b": sent[typed]})
         .groupby(["dt", "eb"], sort=False)["b"].sum())
    if len(w):
        comm_dtype, comm_eb = w.idxmax()
    else:
        comm_dtype, comm_eb = (dtype or "fp32"), float(DTYPE_BYTES[dtype or "fp32"])
        notes.append(f"no step traffic: the model is evaluated with {comm_dtype} on the wire"
                     if not basis.any() else
                     f"the step traffic records no element type: the model is evaluated with "
                     f"{comm_dtype} on the wire ({'from --dtype' if dtype else 'give --dtype to change it'})")
    bytes_only = ~np.isnan(approx) & (eb <= 0)
    if bytes_only.any():  # elements at the wire type, for the pattern's multiples of Ψ
        full = np.where(bytes_only, approx / comm_eb, full)
        eb = np.where(bytes_only, comm_eb, eb)
    if comm_dtype == "?":
        comm_dtype = next((k for k, v in DTYPE_BYTES.items() if v == comm_eb), "?")

    calls = df.copy()
    calls["step_id"] = step_id
    calls["elem_bytes_used"] = eb
    calls["full_elements"] = full
    calls["bytes_sent"] = sent
    calls["category"] = cat

    dur = _num(df["duration_s"]) if "duration_s" in df.columns else np.full(len(df), np.nan)
    calls["duration_used_s"] = dur
    calls["group_size_used"] = gs
    grouped = calls.groupby(["rank", "step_id", "category"], sort=True)
    per_step = pd.DataFrame({
        "calls": grouped.size(), "bytes_sent": grouped["bytes_sent"].sum(),
        "duration_s": grouped["duration_used_s"].sum(min_count=1),
    }).reset_index()
    n_rank_steps = len(ranks) * n_steps
    rows = []
    for c, desc in CATEGORIES.items():
        sub = per_step[per_step["category"] == c]
        if c == "one_off":
            rows.append({"category": c, "description": desc,
                         "calls_per_rank_per_step": sub["calls"].sum() / len(ranks),
                         "bytes_per_rank_per_step": sub["bytes_sent"].sum() / len(ranks),
                         "min_bytes": math.nan, "max_bytes": math.nan, "per": "rank (whole trace)"})
            continue
        full_grid = (sub.set_index(["rank", "step_id"])["bytes_sent"]
                     .reindex(pd.MultiIndex.from_product([ranks, sorted(set(step_id[step_id >= 0].tolist()))
                                                          or [0]]), fill_value=0.0))
        rows.append({"category": c, "description": desc,
                     "calls_per_rank_per_step": sub["calls"].sum() / n_rank_steps,
                     "bytes_per_rank_per_step": sub["bytes_sent"].sum() / n_rank_steps,
                     "min_bytes": float(full_grid.min()), "max_bytes": float(full_grid.max()),
                     "per": "rank and step"})
    categories = pd.DataFrame(rows)
    unexp = calls[calls["category"] == "unexplained"]
    if len(unexp):
        what = Counter(
            f"{OP_NAMES.get(o, o)} on {int(p) if not pd.isna(p) else '?'} ranks"
            for o, p in zip(unexp["op"].astype(str), unexp["group_size_used"], strict=True)
        )
        notes.append("not explained by any data-parallel scheme, reported apart: "
                     + ", ".join(f"{k} ×{v}" for k, v in sorted(what.items())))

    pattern, variants = _measured_pattern(calls[calls["category"] == "step"], len(ranks) * n_steps)
    return Measurement(
        calls=calls, psi=int(psi), psi_how=psi_how, psi_trace=psi_trace, n=int(n), n_how=n_how,
        steps=n_steps, steps_how=steps_how, ranks=ranks, comm_elem_bytes=float(comm_eb),
        comm_dtype=str(comm_dtype), notes=tuple(notes), per_step=per_step, categories=categories,
        pattern=pattern, order_variants=variants, ranks_how=ranks_how,
    )


def _measured_pattern(step_calls: pd.DataFrame, n_rank_steps: int):
    """Per-step ops in first-appearance order, each with mean calls, full elements and bytes.

    The order is the most common one over (rank, step) (ties: the one seen first); each
    (rank, step)'s order is encoded as one integer (op codes as base-``k+1`` digits), so no
    Python loop runs over the groups.
    """
    if step_calls.empty:
        return (), 0
    ops = step_calls["op"].astype(str).to_numpy()
    code, names = pd.factorize(ops)
    first = pd.DataFrame({"r": step_calls["rank"].to_numpy(), "s": step_calls["step_id"].to_numpy(),
                          "c": code}).drop_duplicates()
    base = len(names) + 1
    pos = first.groupby(["r", "s"], sort=False).cumcount().to_numpy()
    first = first.assign(d=(first["c"].to_numpy() + 1) * base ** pos.astype(np.int64))
    keys = first.groupby(["r", "s"], sort=False)["d"].sum()
    counts = keys.groupby(keys.to_numpy(), sort=False).size()
    key = int(counts.idxmax())
    order = []
    while key:
        key, digit = divmod(key, base)
        order.append(str(names[digit - 1]))
    agg = step_calls.groupby(ops).agg(
        calls=("op", "size"), elems=("full_elements", "sum"), bytes=("bytes_sent", "sum"))
    pattern = tuple(
        (o, float(agg.at[o, "calls"]) / n_rank_steps, float(agg.at[o, "elems"]) / n_rank_steps,
         float(agg.at[o, "bytes"]) / n_rank_steps)
        for o in order
    )
    return pattern, len(counts)


# ---------------------------------------------------------------------------
# Comparison with the schemes
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SchemeComparison:
    """One scheme against the measured step: volume, pattern and, if it differs, why."""

    scheme: str
    predicted_bytes_per_rank_per_step: float
    measured_bytes_per_rank_per_step: float
    ratio: float  # measured ÷ predicted
    volume_match: bool
    pattern_match: bool
    order: str  # "same", "rotated" (same cyclic order, the step boundary falls elsewhere), "different"
    predicted_pattern: tuple[tuple[str, float, float, float], ...]  # (op, calls, elements, bytes)
    measured_pattern: tuple[tuple[str, float, float, float], ...]
    explanation: str
    equivalent_to_dp: bool
    predicted_time_s: float = math.nan
    #: the pattern and volume match once the scheme's all-gather volume is halved: the forward
    #: gather kept for backward (:data:`_REUSED_PARAMETERS`)
    matches_if_reused: bool = False

    def as_record(self, psi: float) -> dict:
        def pat(p):
            return [{"op": o, "calls": c, "elements_over_psi": e / psi, "bytes": b} for o, c, e, b in p]

        return {
            "scheme": self.scheme,
            "predicted_bytes_per_rank_per_step": self.predicted_bytes_per_rank_per_step,
            "measured_bytes_per_rank_per_step": self.measured_bytes_per_rank_per_step,
            "ratio": self.ratio,
            "volume_match": self.volume_match,
            "pattern_match": self.pattern_match,
            "order": self.order,
            "predicted_pattern": pat(self.predicted_pattern),
            "measured_pattern": pat(self.measured_pattern),
            "explanation": self.explanation,
            "equivalent_to_dp": self.equivalent_to_dp,
            "predicted_time_s": None if math.isnan(self.predicted_time_s) else self.predicted_time_s,
            "matches_if_reused": self.matches_if_reused,
        }


def _gpus_per_node(n: int, gpus_per_node: int | None) -> int:
    if gpus_per_node is None:
        return n if n <= 8 or n % 8 else 8
    if gpus_per_node < 1:  # as ``table`` says it (evaluate.py)
        raise ConfigError("must be a whole number ≥ 1", option="--gpus-per-node")
    if n > gpus_per_node and n % gpus_per_node:
        raise ConfigError(f"{gpus_per_node} does not divide N = {n}", option="--gpus-per-node")
    return min(gpus_per_node, n)


def _phase_numbers(scheme, *, psi: float, n: int, g: int, comm_bytes: float):
    """A scheme's phases as numbers, in order: (op, group size, calls, elements, bytes per element).

    Phases on a group of one rank move nothing and are left out.
    """
    from zerocalc import symbols as S

    vals = {S.Psi: psi, S.N: n, S.G: g, S.b_comm: comm_bytes, S.b_param: comm_bytes, S.b_grad: comm_bytes}
    for ph in scheme.phases:
        p = float(ph.group.size.subs(vals))
        if p > 1:
            yield (str(ph.collective.value), p, sympy_float(ph.calls, vals), sympy_float(ph.elements, vals),
                   sympy_float(ph.elem_bytes, vals))


def predicted_pattern(scheme, *, psi: float, n: int, g: int, comm_bytes: float):
    """A scheme's phases as numbers, merged per op in first-appearance order: (op, calls, elements, bytes).

    Phases on a group of one rank move nothing and are left out. Bytes per rank under the
    ring accounting of :func:`ring_bytes_factor`, the same as ``Scheme.bytes_per_rank()``.
    """
    acc: dict[str, list[float]] = {}
    for op, p, calls, elems, eb in _phase_numbers(scheme, psi=psi, n=n, g=g, comm_bytes=comm_bytes):
        a = acc.setdefault(op, [0.0, 0.0, 0.0])
        a[0] += calls
        a[1] += calls * elems
        a[2] += calls * ring_bytes_factor(op, p) * elems * eb
    return tuple((o, *v) for o, v in acc.items())


def sympy_float(expr, vals) -> float:
    """A sympy expression (or number) evaluated at ``vals``."""
    return float(expr.subs(vals)) if hasattr(expr, "subs") else float(expr)


def _rotations(seq: tuple) -> list[tuple]:
    return [seq[i:] + seq[:i] for i in range(len(seq))] or [()]


def _psi_mult(x: float) -> str:
    """``2.0 → '2Ψ'``, ``0.25 → '0.25Ψ'``."""
    return f"{x:.3g}Ψ" if abs(x - 1) > 1e-9 else "Ψ"


def _names(ops: Iterable[str]) -> str:
    return " + ".join(OP_NAMES[o] for o in ops)


#: Why a fully sharded run can all-gather Ψ per step instead of 2Ψ: DeepSpeed ZeRO-3 keeps a gathered
#: parameter if it will be reused within ``stage3_max_reuse_distance`` parameters (default 1e9,
#: ``deepspeed/runtime/zero/config.py``), so a model smaller than that skips the backward re-gather once
#: the first step has recorded the module trace; FSDP's ``reshard_after_forward=False`` does the same.
_REUSED_PARAMETERS = ("the forward gather is kept for backward (a ZeRO-3 model under DeepSpeed's "
                      "stage3_max_reuse_distance, or FSDP without reshard after forward, sends exactly this)")


#: What a check of a one-rank run says instead of comparing volumes (nothing crosses between ranks).
NO_CROSS_RANK_TRAFFIC = "N = 1: one rank, no cross-rank traffic to compare"


def _explain(name: str, pred, meas, ratio: float, order: str, psi: float) -> str:
    """One sentence saying how the measured step differs from (or agrees with) ``name``."""
    pm = {o: (c, e, b) for o, c, e, b in pred}
    mm = {o: (c, e, b) for o, c, e, b in meas}
    extra = [o for o in mm if o not in pm]
    missing = [o for o in pm if o not in mm]
    parts = []
    if extra and missing:
        what = " + ".join(f"{OP_NAMES[o]} of {_psi_mult(mm[o][1] / psi)}" for o in extra)
        parts.append(f"{what} where {name} "
                     + " and ".join(f"{_OP_VERBS[o]} {_psi_mult(pm[o][1] / psi)}" for o in missing))
    elif extra:
        parts.append(" + ".join(f"{OP_NAMES[o]} of {_psi_mult(mm[o][1] / psi)}" for o in extra)
                     + f" that {name} does not have")
    elif missing:
        parts.append(f"no {_names(missing)} where {name} "
                     + " and ".join(f"{_OP_VERBS[o]} {_psi_mult(pm[o][1] / psi)}" for o in missing))
    for o in mm:
        if o in pm and not math.isclose(mm[o][2], pm[o][2], rel_tol=RTOL):
            parts.append(f"{OP_NAMES[o]} of {_psi_mult(mm[o][1] / psi)} per step in {mm[o][0]:.3g} call(s) "
                         f"where {name} {_OP_VERBS[o]} {_psi_mult(pm[o][1] / psi)} in {pm[o][0]:.3g}")
            if o == "all_gather" and math.isclose(2 * mm[o][1], pm[o][1], rel_tol=RTOL):
                parts.append(_REUSED_PARAMETERS)
    if not parts and order == "different":
        parts.append(f"same collectives in another order ({_names(o for o, *_ in meas)} vs "
                     f"{_names(o for o, *_ in pred)})")
    same_volume = math.isclose(ratio, 1.0, rel_tol=RTOL)
    if not parts:
        s = f"matches {name}: {_names(o for o, *_ in meas)} of the predicted volume"
        if order == "rotated":
            s += (f", in rotated order ({name}: {_names(o for o, *_ in pred)}; the step boundary falls "
                  "elsewhere, which the wire cannot tell)")
        return s
    tail = "same volume" if same_volume else f"{ratio:.3g}× {name}'s volume"
    if same_volume and "all_reduce" in set(extra) | set(missing):
        tail += " (a ring all-reduce is a reduce-scatter plus an all-gather), different pattern"
    return "; ".join(parts) + f": {tail}"


def compare(
    m: Measurement,
    schemes: Sequence[str] | None = None,
    *,
    gpus_per_node: int | None = None,
    fit: AlphaBetaFit | None = None,
) -> list[SchemeComparison]:
    """Every scheme (or the ones named) against the measured step traffic, in SCHEME_NAMES order."""
    from zerocalc.schemes import SCHEME_NAMES, get_scheme

    names = list(SCHEME_NAMES) if not schemes else [get_scheme(s).name for s in schemes]
    g = _gpus_per_node(m.n, gpus_per_node)
    meas = m.pattern
    measured = m.bytes_per_rank_per_step
    out = []
    for name in names:
        sch = get_scheme(name)
        pred = predicted_pattern(sch, psi=m.psi, n=m.n, g=g, comm_bytes=m.comm_elem_bytes)
        predicted = sum(b for *_, b in pred)
        ratio = measured / predicted if predicted > 0 else (math.inf if measured > 0 else 1.0)
        volume_match = math.isclose(ratio, 1.0, rel_tol=RTOL)
        mo, po = tuple(o for o, *_ in meas), tuple(o for o, *_ in pred)
        if mo == po:
            order = "same"
        elif set(mo) == set(po) and len(mo) == len(po) and mo in _rotations(po):
            order = "rotated"
        else:
            order = "different"
        per_op_ok = set(mo) == set(po) and all(
            math.isclose(b, dict((o, bb) for o, *_, bb in pred)[o], rel_tol=RTOL) for o, *_, b in meas
        )
        pattern_match = per_op_ok and order != "different"
        # the same with the scheme's all-gathers halved: the forward gather kept for backward
        reused = (not pattern_match and order != "different" and set(mo) == set(po) and "all_gather" in po
                  and all(math.isclose(b, dict((o, bb * (0.5 if o == "all_gather" else 1.0))
                                               for o, *_, bb in pred)[o], rel_tol=RTOL) for o, *_, b in meas))
        if m.n == 1:
            ratio, volume_match, pattern_match, reused = math.nan, False, False, False
        t_pred = math.nan
        if fit is not None:
            t_pred = sum(calls * fit.predict_s(op, elems * eb, p) for op, p, calls, elems, eb
                         in _phase_numbers(sch, psi=m.psi, n=m.n, g=g, comm_bytes=m.comm_elem_bytes))
        out.append(SchemeComparison(
            scheme=name, predicted_bytes_per_rank_per_step=predicted,
            measured_bytes_per_rank_per_step=measured,
            ratio=ratio, volume_match=volume_match, pattern_match=pattern_match, order=order,
            predicted_pattern=pred, measured_pattern=meas,
            explanation=(NO_CROSS_RANK_TRAFFIC if m.n == 1
                         else _explain(name, pred, meas, ratio, order, m.psi)),
            equivalent_to_dp=sch.equivalent_to_dp, predicted_time_s=t_pred, matches_if_reused=reused,
        ))
    return out


def consistent(comparisons: Sequence[SchemeComparison]) -> list[str]:
    """Names of the schemes whose pattern and volume match, best first.

    Best = same order before rotated order, then the closer volume; ties keep the scheme
    order of :data:`zerocalc.schemes.SCHEME_NAMES`.
    """
    ok = [c for c in comparisons if c.pattern_match]
    ok.sort(key=lambda c: (c.order != "same", abs(math.log(c.ratio)) if c.ratio > 0 else math.inf))
    return [c.scheme for c in ok]


def indistinguishable(comparisons: Sequence[SchemeComparison]) -> list[list[str]]:
    """Groups of consistent schemes the trace cannot tell apart (same collectives, same volumes)."""
    groups: dict[tuple, list[str]] = {}
    for c in comparisons:
        if c.pattern_match:
            key = tuple(sorted((o, round(b)) for o, _, _, b in c.predicted_pattern))
            groups.setdefault(key, []).append(c.scheme)
    return [v for v in groups.values() if len(v) > 1]


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
    step = m.calls[(m.calls["category"] == "step") & (m.calls["step_id"] >= 0)]
    dur = step["duration_used_s"].to_numpy(dtype=float)
    if step.empty or np.all(np.isnan(dur)):
        return None
    source = "given"
    notes = []
    if fit is None:
        timed = step[~np.isnan(dur) & (step["full_elements"].to_numpy() > 0)]
        try:
            fit = fit_alpha_beta(timed["full_elements"] * timed["elem_bytes_used"], timed["duration_used_s"],
                                 op=list(timed["op"].astype(str)), group_size=list(timed["group_size_used"]))
            source = "fitted on this trace's step collectives (pooled over ops)"
        except TraceMismatchError as exc:
            return Timing(None, "none", math.nan, float(np.nansum(dur)) / (len(m.ranks) * m.steps), math.nan,
                          note=str(exc))
    ops, ps = step["op"].astype(str).to_numpy(), step["group_size_used"].to_numpy(dtype=float)
    pred = float(np.sum(
        _per_op_and_size(latency_hops, ops, ps) * fit.alpha_s
        + _per_op_and_size(busbw_factor, ops, ps) * step["full_elements"].to_numpy(dtype=float)
        * step["elem_bytes_used"].to_numpy(dtype=float) * fit.beta_s_per_byte
    )) / (len(m.ranks) * m.steps)
    meas = float(np.nansum(dur)) / (len(m.ranks) * m.steps)
    if backend == "gloo":
        notes.append("gloo: durations are CPU op times that include waiting for the other ranks")
    if fit.note:
        notes.append(fit.note)
    ratio = meas / pred if pred > 0 else math.nan
    own = source != "given"
    if (own and fit.max_abs_rel_residual > SKEW_MAX_REL_RESIDUAL) or not (
            1 / SKEW_MAX_RATIO <= ratio <= SKEW_MAX_RATIO):
        why = ([f"the fit misses its own calls by up to {fit.max_abs_rel_residual:.0%}"]
               if own and fit.max_abs_rel_residual > SKEW_MAX_REL_RESIDUAL else [])
        if not 1 / SKEW_MAX_RATIO <= ratio <= SKEW_MAX_RATIO:
            why.append(f"the prediction misses the measured sum {ratio:.3g}×")
        notes.append(f"{' and '.join(why)}: the kernel durations include waiting for the other ranks "
                     "(skew between them), so these α-β numbers are not a measurement of the links")
    return Timing(fit, source, float(pred), meas, ratio, "; ".join(notes))


# ---------------------------------------------------------------------------
# The whole check
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckResult:
    """Everything ``zerocalc check`` reports."""

    measurement: Measurement
    comparisons: tuple[SchemeComparison, ...]
    matches: tuple[str, ...]
    indistinguishable: tuple[tuple[str, ...], ...]
    timing: Timing | None
    notes: tuple[str, ...] = field(default=())
    #: schemes that send exactly the measured pattern when the forward all-gather is kept for backward
    reused: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict:
        """The ``check --format json`` contract, plus detail fields."""
        m = self.measurement
        t = self.timing
        return {
            "psi": m.psi, "psi_inferred": m.psi_trace, "psi_how": m.psi_how,
            "n": m.n, "n_how": m.n_how,
            "steps": m.steps, "steps_how": m.steps_how,
            "ranks": list(m.ranks), "ranks_how": m.ranks_how,
            "comm_dtype": m.comm_dtype, "comm_elem_bytes": m.comm_elem_bytes,
            "matches": list(self.matches),
            "indistinguishable": [list(g) for g in self.indistinguishable],
            "matches_if_parameters_kept_for_backward": list(self.reused),
            "measured_bytes_per_rank_per_step": m.bytes_per_rank_per_step,
            "categories": m.categories.to_dict(orient="records"),
            "schemes": [c.as_record(m.psi) for c in self.comparisons],
            "timing": None if t is None else {
                "fit": None if t.fit is None else t.fit.as_record(), "fit_source": t.fit_source,
                "predicted_step_time_s": t.predicted_step_time_s,
                "measured_step_time_s": t.measured_step_time_s,
                "ratio": float(t.ratio), "note": t.note,
            },
            "notes": list(m.notes) + list(self.notes),
        }


def reused_sentence(schemes: Sequence[str]) -> str:
    """The sentence saying that ``schemes`` send the measured pattern with parameters kept for backward."""
    return (f"{', '.join(schemes)} with the parameters kept for backward send exactly this pattern "
            "(DeepSpeed ZeRO-3 keeps a gathered parameter for reuse within stage3_max_reuse_distance; "
            "FSDP without reshard after forward does the same)")


def check(
    table: pd.DataFrame,
    *,
    psi: int | None = None,
    n: int | None = None,
    steps: int | None = None,
    dtype: str | None = None,
    schemes: Sequence[str] | None = None,
    meta: dict | None = None,
    gpus_per_node: int | None = None,
    fit: AlphaBetaFit | None = None,
) -> CheckResult:
    """Measure a canonical trace table and compare it with every scheme."""
    m = measure(table, psi=psi, n=n, steps=steps, dtype=dtype, meta=meta)
    backends = {str(v.get("backend")) for v in (meta or {}).values()
                if isinstance(v, dict) and v.get("backend")}
    t = timing(m, fit, backend=next(iter(backends)) if len(backends) == 1 else None)
    comps = compare(m, schemes, gpus_per_node=gpus_per_node, fit=t.fit if t is not None else None)
    notes = []
    if m.n == 1:
        notes.append("N = 1: a single rank sends nothing to another rank, so there is no cross-rank traffic "
                     "to compare with the schemes (every scheme predicts 0 B)")
    elif m.bytes_per_rank_per_step == 0:
        notes.append("no gradient or parameter traffic in the steady state: no scheme can be checked")
    reused = tuple(c.scheme for c in comps if c.matches_if_reused)
    if reused:
        notes.append(reused_sentence(reused))
    return CheckResult(
        measurement=m, comparisons=tuple(comps), matches=tuple(consistent(comps)),
        indistinguishable=tuple(tuple(g) for g in indistinguishable(comps)), timing=t, notes=tuple(notes),
        reused=reused,
    )
