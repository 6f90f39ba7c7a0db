"""Infer: what the trace leaves implicit: ranks, N (the data-parallel group), element types, sizes,
steps, Ψ and the element type on the wire, each with a sentence saying how it was found.

Each function takes the calls ordered by rank and time (:func:`assign_ranks`) as numpy columns, and
the user's option where there is one (None: infer it). Sources: NCCL ``misc/debug.cc`` (process
prefix), Megatron-LM ``parallel_state.py`` (rank order), Gusfield 1997 §1.4 (Z-algorithm), and the
trace formats of §5.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from zerocalc.errors import TraceMismatchError
from zerocalc.validate.accounting import _OP_VERBS, OP_NAMES, RTOL, _num, _plural
from zerocalc.validate.classify import gradient_calls

#: Columns that tell one rank apart from another when a trace records none (NCCL debug lines start
#: ``host:pid:tid [dev]``; NCCL's own ``misc/debug.cc``): the process, and the CUDA device within it,
#: since one process may drive several GPUs, one communicator (one rank) each (REFERENCE §7).
PROCESS_COLUMNS: tuple[str, ...] = ("file", "host", "pid", "device")


def _ranks_by_process(df: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Rows without a rank get one per process and device (file, host, pid and device where the table
    has them).

    NCCL debug logs without ``Init COMPLETE`` lines (``NCCL_DEBUG_SUBSYS=COLL``) record no rank, and
    one file often holds the lines of every process: merged, they would count as one rank sending
    the traffic of all. Returns the table and a sentence saying how the ranks were told apart
    ("" when every row has a rank). Known ranks keep their numbers; processes are numbered after them.
    """
    na = df["rank"].isna().to_numpy()
    if not na.any():
        return df.assign(rank=df["rank"].astype(int)), ""
    cols = [c for c in PROCESS_COLUMNS if c in df.columns and df.loc[na, c].notna().any()]
    if {"host", "pid"} <= set(cols) and df.loc[na, ["host", "pid"]].notna().all(axis=None):
        # a process named by host and pid is one process in every file holding its lines: the
        # parts of a log rotated or split by line count are one run, not one run per part
        cols = [c for c in cols if c != "file"]
    if "device" in cols:  # named only when some process drives several devices
        by = [c for c in cols if c != "device"]
        if not by or df.loc[na].groupby(by, dropna=False)["device"].nunique().max() <= 1:
            cols = [c for c in cols if c != "device"]
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
    """Each rank's calls in time order, else in the order of its files (the parts of a rotated
    log, as given) and of their lines."""
    keys = [c for c in ("rank", "start_s") if c in df.columns]
    if "source_line" in df.columns:
        if "file" in df.columns and df["file"].nunique() > 1:
            df = df.assign(_part=pd.factorize(df["file"])[0])
            keys.append("_part")
        keys.append("source_line")
    return df.sort_values(keys, kind="stable", na_position="last").drop(columns="_part", errors="ignore")


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


def assign_ranks(df: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The calls with a rank each, ordered by rank and time, and how ranks were told apart.

    Raises :class:`TraceMismatchError` when one rank appears in several files (several runs mixed).
    """
    if df["rank"].notna().any():
        per_rank = df[df["rank"].notna()].groupby("rank")["file"].agg(lambda f: sorted(set(f.astype(str))))
        dup = {int(r): f for r, f in per_rank.items() if len(f) > 1}
        if dup and {"host", "pid"} <= set(df.columns):
            # one process (host:pid) in every file: the parts of a log rotated or split by lines
            calls = df[df["rank"].isin(list(dup))]
            who = calls.assign(na=calls["host"].isna() | calls["pid"].isna()).groupby("rank").agg(
                hosts=("host", "nunique"), pids=("pid", "nunique"), na=("na", "any"))
            dup = {r: f for r, f in dup.items()
                   if not (who.at[r, "hosts"] == who.at[r, "pids"] == 1 and not who.at[r, "na"])}
        if dup:
            r, f = next(iter(dup.items()))
            raise TraceMismatchError(
                f"rank {r} appears in {len(f)} files ({', '.join(f)}): these are several runs; "
                "check one at a time"
            )
    df, ranks_how = _ranks_by_process(df.reset_index(drop=True))
    return _order_calls(df).reset_index(drop=True), ranks_how


@dataclass(frozen=True)
class Groups:
    """The data-parallel layout the gradient collectives show.

    ``n`` ranks in the data-parallel group; ``sizes`` the group sizes its collectives run on
    (``{n}``, or HSDP's shard and replicate sizes); ``shard`` HSDP's shard-group size (None when the
    gradients are reduced on one group).
    """

    n: int
    sizes: frozenset[int]
    shard: int | None
    how: str


def _hsdp(op: np.ndarray, gs: np.ndarray, full: np.ndarray, grad: np.ndarray) -> tuple[int, int] | None:
    """(shard size H, replicate size R) when the gradients are reduce-scattered on groups of H and the
    shards then all-reduced on groups of R: HSDP (FSDP ``HYBRID_SHARD`` / FSDP2 on a 2-D mesh; §7).

    Read from the elements: the all-reduces carry 1/H of the reduce-scatters' elements (each rank's
    shard), which on one group would be pointless; None otherwise.
    """
    rs = grad & (op == "reduce_scatter")
    ar = grad & (op == "all_reduce")
    if not rs.any() or not ar.any():
        return None
    h, r = set(gs[rs].tolist()), set(gs[ar].tolist())
    if len(h) != 1 or len(r) != 1:
        return None
    h_, r_ = int(next(iter(h))), int(next(iter(r)))
    e_rs, e_ar = float(full[rs].sum()), float(full[ar].sum())
    if h_ > 1 and r_ > 1 and math.isclose(e_ar * h_, e_rs, rel_tol=RTOL):
        return h_, r_
    return None


def infer_n(df: pd.DataFrame, op: np.ndarray, full: np.ndarray, world: int | None,
            n: int | None) -> tuple[np.ndarray, Groups]:
    """Group size of every call (recorded, else the world size, else ``n``), N and how it was found.

    N is ``--n`` (which must be one of the trace's group sizes) or found from the groups the
    gradient collectives (all-reduce, reduce-scatter, reduce of more than a scalar) run on: the
    group that reduces the most elements, or HSDP's shard × replicate groups (:func:`_hsdp`);
    without gradient collectives, the group of the collectives that move the most elements.
    Tensor-parallel groups (:func:`_tensor_parallel_sizes`) are left out.
    """
    from zerocalc.validate.classify import GRADIENT_OPS, SCALAR_MAX_ELEMENTS

    gs = _num(df["group_size"])
    data_ops = np.isin(op, list(_OP_VERBS))
    if np.all(np.isnan(gs[data_ops])) and world is None and n is None:
        raise TraceMismatchError("the trace records no group sizes and no world size: give --n")
    gs = np.where(np.isnan(gs), world if world is not None else (n or np.nan), gs)
    sizes_by_elems = Counter()
    for p, e in zip(gs[data_ops], np.nan_to_num(full[data_ops]), strict=True):
        sizes_by_elems[int(p)] += e
    inner = _tensor_parallel_sizes(df, gs, data_ops, sizes_by_elems)
    grad = np.isin(op, list(GRADIENT_OPS)) & (np.nan_to_num(full) > SCALAR_MAX_ELEMENTS) & (gs > 1)
    grad &= ~np.isin(gs, list(inner))
    by_grad = Counter()
    for p, e in zip(gs[grad], full[grad], strict=True):
        by_grad[int(p)] += e
    most = Counter({k: v for k, v in sizes_by_elems.items() if k not in inner}) or sizes_by_elems
    most_n = max(most, key=lambda k: (most[k], k))
    trace_n = max(by_grad, key=lambda k: (by_grad[k], k)) if by_grad else most_n
    hsdp = _hsdp(op, gs, full, grad)
    sizes = frozenset({trace_n})
    if hsdp is not None:
        trace_n, sizes = hsdp[0] * hsdp[1], frozenset(hsdp)
    if n is None:
        n = trace_n
        n_how = f"N = {n}: inferred from the trace (group size of the collectives that move the most data"
        if by_grad and n != most_n:
            n_how = (f"N = {n}: inferred from the trace (the group the gradient collectives run on; "
                     f"groups of {most_n} ranks move more data")
        if hsdp is not None:
            n_how = (f"N = {n}: inferred from the trace (HSDP: gradients reduce-scattered on shard groups of "
                     f"{hsdp[0]} ranks, then each shard all-reduced on replicate groups of {hsdp[1]}")
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
        if hsdp is not None and n == trace_n:
            pass
        elif n not in sizes_by_elems:
            raise TraceMismatchError(
                f"--n {n} contradicts the trace: its collectives run on groups of "
                f"{', '.join(str(k) for k in sorted(sizes_by_elems))} ranks"
            )
        else:
            sizes, hsdp = frozenset({n}), None
        n_how = (f"N = {n}: from --n (the trace has collectives on groups of {n})" if hsdp is None else
                 f"N = {n}: from --n (HSDP: shard groups of {hsdp[0]} × replicate groups of {hsdp[1]})")
    ranks = sorted(set(df["rank"].tolist()))
    if world is not None and len(ranks) > world:
        raise TraceMismatchError(f"{len(ranks)} ranks in the traces but world_size is {world}")
    if len(ranks) > n:
        n_how += (f"; {len(ranks)} ranks in all: each data-parallel group of {n} is one of "
                  f"{len(ranks) / n:g} model-parallel (pipeline or tensor) parts")
    return gs, Groups(n=int(n), sizes=sizes, shard=hsdp[0] if hsdp else None, how=n_how)


def fill_elem_types(df: pd.DataFrame, op: np.ndarray, full: np.ndarray,
                    dtype: str | None) -> tuple[np.ndarray, list[str]]:
    """Bytes per element of every call: recorded, else ``--dtype``, else the type carrying the most
    bytes among the same rank's calls of the same step (else of the whole trace), said in notes."""
    from zerocalc.dtypes import DTYPE_BYTES

    notes: list[str] = []
    data_ops = np.isin(op, list(_OP_VERBS))
    eb = _num(df["elem_bytes"])
    missing = np.isnan(eb) & data_ops & (np.nan_to_num(full) > 0)
    if not missing.any():
        return eb, notes
    if dtype is not None:
        notes.append(f"element type of {int(missing.sum())} call(s) not recorded: {dtype} from --dtype")
        return np.where(missing, DTYPE_BYTES[dtype], eb), notes
    known = ~np.isnan(eb) & data_ops
    if not known.any():
        raise TraceMismatchError(
            f"the trace records no element type for its {int(missing.sum())} collective(s): give --dtype"
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
    for (o, name, where), cnt in sorted(how.items()):
        notes.append(
            f"element type of {cnt} {OP_NAMES[o]} call(s) not recorded in the trace: "
            f"taken as {name} ({int(DTYPE_BYTES.get(name, 0)) or '?'} B) from {where}"
        )
    return fill, notes


def approximate_sizes(df: pd.DataFrame, op: np.ndarray, full: np.ndarray, gs: np.ndarray,
                      eb: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Full elements and approximate bytes of calls that record only a message size, with notes.

    DeepSpeed's comms logger gives no elements, only the tensor argument's size in 1024-based units
    rounded to 2 decimals (``msg_size_bytes``; traces/deepspeed_comms.py): the call's bytes,
    approximately. all_gather_into_tensor's argument is the shard (full vector = shard × p).
    Returns (full elements, approximate full bytes or NaN, notes).
    """
    notes: list[str] = []
    data_ops = np.isin(op, list(_OP_VERBS))
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
    return full, approx, notes


def infer_steps(df: pd.DataFrame, op: np.ndarray, gs: np.ndarray, small: np.ndarray,
                steps: int | None) -> tuple[np.ndarray, str, list[str]]:
    """The step of every call (-1 outside the steps), how the steps were found, and notes.

    From the trace's step markers where it has them; else each rank's calls end in repetitions of
    one pattern (:func:`_repeating_suffix`) that holds at least one collective carrying data.
    """
    notes: list[str] = []
    step_marked = df["step"].notna().to_numpy()
    step_id = np.full(len(df), -1, dtype=int)
    if step_marked.any():
        step_id[step_marked] = df.loc[step_marked, "step"].astype(int).to_numpy()
        marked = len(set(step_id[step_marked].tolist()))
        if steps is not None and steps != marked:
            raise TraceMismatchError(f"--steps {steps} but the trace marks {marked} step(s)")
        return step_id, f"{marked} step(s) from the trace's step markers", notes
    periods = {}
    rank_arr = df["rank"].to_numpy()
    in_e, out_e = _num(df["in_nelems"]), _num(df["out_nelems"])
    # one integer per distinct (op, in, out, group size): the sequence a step pattern repeats in
    sig = (pd.DataFrame({"o": op, "i": np.nan_to_num(in_e), "u": np.nan_to_num(out_e), "p": gs})
           .groupby(["o", "i", "u", "p"], sort=False, dropna=False).ngroup().to_numpy())
    carries = np.isin(op, list(_OP_VERBS)) & ~small
    bounds = np.flatnonzero(np.diff(rank_arr)) + 1  # df is sorted by rank
    found: dict[tuple[bytes, int], tuple[int, int]] = {}  # ranks that made the same calls: one search
    for idx in np.split(np.arange(len(df)), bounds):
        r = int(rank_arr[idx[0]])
        data_at = np.flatnonzero(carries[idx])
        # a step must hold at least one collective that carries data: the last p calls do
        # exactly when p reaches back to the last such call
        min_period = len(idx) - int(data_at[-1]) if len(data_at) else len(idx) + 1
        key = (sig[idx].tobytes(), min_period)
        if key not in found:
            found[key] = _repeating_suffix(sig[idx], steps, min_period=min_period)
        per, reps = found[key]
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
    return step_id, steps_how, notes


def psi_in_trace(cat: np.ndarray, op: np.ndarray, full: np.ndarray, rank: np.ndarray,
                 step_id: np.ndarray, *, syncs: int = 1,
                 shard_only: bool = False) -> tuple[int | None, list[str]]:
    """Ψ as the trace sees it: the element total of one step's gradient collective(s) (median over
    ranks and steps; None without one) ÷ the gradient reductions per step (``syncs``: K when they run
    in every micro-batch), and a note when it varies. Under HSDP (``shard_only``) the replicate
    all-reduce of the shards is left out: it reduces Ψ/H more elements of the same gradients."""
    grad = gradient_calls(cat, op, full)
    if shard_only:
        grad &= op == "reduce_scatter"
    if not grad.any():
        return None, []
    tot = pd.Series(full[grad]).groupby([rank[grad], step_id[grad]]).sum() / syncs
    notes = []
    if tot.min() != tot.max():
        notes.append(f"gradient elements per step vary between {int(tot.min()):,} and {int(tot.max()):,}")
    return int(round(float(tot.median()))), notes


def infer_psi(psi: int | None, psi_trace: int | None, cat: np.ndarray, op: np.ndarray,
              full: np.ndarray, syncs: int = 1, shard_only: bool = False) -> tuple[int, str]:
    """Ψ: ``--psi`` (checked against the trace within :data:`RTOL`) or the trace's, and how."""
    if psi is None:
        if psi_trace is None:
            raise TraceMismatchError(
                "the trace has no gradient collective (all-reduce, reduce-scatter or reduce) "
                "to infer Ψ from: give --psi"
            )
        grad = gradient_calls(cat, op, full) & ((op == "reduce_scatter") if shard_only else True)
        per = "one step's" if syncs == 1 else f"one of the step's {syncs} gradient reductions:"
        return psi_trace, (f"Ψ = {psi_trace:,}: inferred from the trace (elements of {per} gradient "
                           f"{'/'.join(sorted({OP_NAMES[o] for o in op[grad]}))} calls)")
    if psi_trace is not None and abs(psi_trace - psi) > RTOL * psi:
        raise TraceMismatchError(
            f"--psi {psi:,} contradicts the trace: its gradient collectives reduce {psi_trace:,} "
            f"elements per {'step' if syncs == 1 else 'gradient reduction'}"
        )
    psi_how = f"Ψ = {psi:,}: from --psi"
    psi_how += (f" (the trace's gradient collectives reduce {psi_trace:,} elements per "
                f"{'step' if syncs == 1 else 'gradient reduction'})"
                if psi_trace is not None else " (the trace has no gradient collective to confirm it)")
    return psi, psi_how


def wire_dtype(df: pd.DataFrame, cat: np.ndarray, op: np.ndarray, full: np.ndarray, eb: np.ndarray,
               sent: np.ndarray, approx: np.ndarray, dtype: str | None):
    """The step traffic's dominant element type on the wire (bytes sent), and the calls sized in bytes
    only expressed in elements of it.

    The gradient collectives' dominant type, else the whole step's: a rank that runs something else
    (a desynchronised all-gather of bytes) does not set the wire type of the gradients. Returns
    (dtype name, bytes per element, full elements, bytes per element of each call, notes).
    """
    from zerocalc.dtypes import DTYPE_BYTES

    notes: list[str] = []
    stepmask = cat == "step"
    gradmask = gradient_calls(cat, op, full)
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
    return str(comm_dtype), float(comm_eb), full, eb, notes



@dataclass(frozen=True)
class MicroBatches:
    """Micro-batches per optimizer step and when the gradients are reduced, with how each was found."""

    k: int
    how: str
    #: "every" (gradients reduced in every micro-batch), "boundary" (once per optimizer step), or None
    #: when the trace cannot tell (one micro-batch, or nothing repeats)
    grad_sync: str | None
    grad_sync_how: str


def _leading_repeats(codes: list[int]) -> tuple[int, int]:
    """(period, repetitions) of the block that starts the sequence and repeats back to back, covering the
    most calls (ties: the shorter period); (len, 1) when nothing repeats. Z-function as in
    :func:`_repeating_suffix`, read forwards."""
    m = len(codes)
    if m < 2:
        return m, 1
    z = _z_function(codes)
    best = None
    for p in range(1, m // 2 + 1):
        reps = 1 + min(int(z[p]), m - p) // p
        if reps >= 2 and (best is None or p * reps > best[0] * best[1]):
            best = (p, reps)
    return best or (m, 1)


def infer_micro_batches(op: np.ndarray, gs: np.ndarray, full: np.ndarray, cat: np.ndarray, rank: np.ndarray,
                        step_id: np.ndarray, k: int | None, *, marked: bool = True) -> MicroBatches:
    """Micro-batches per optimizer step: ``--micro-batches K``, else the number of times the block of
    collectives that opens each optimizer step repeats back to back (the most common count over ranks
    and steps). Gradient accumulation repeats forward and backward, and with them every collective
    they issue (§7: DDP and FSDP reduce in every micro-batch unless ``no_sync``; FSDP and DeepSpeed
    ZeRO-3 gather in every micro-batch; DeepSpeed ZeRO-2/3 reduce in every micro-batch, ZeRO-1 at the
    boundary). The gradient-sync mode is read from where the gradient reductions fall: inside the
    repeated block (every micro-batch) or only after it (at the boundary). Only a trace that marks its
    optimizer steps (``marked``) is read so: without markers the steps are themselves repeated blocks.
    """
    from zerocalc.validate.classify import gradient_calls

    grad = gradient_calls(cat, op, full)
    use = (cat == "step") & (step_id >= 0)
    sig = (pd.DataFrame({"o": op, "f": full, "p": gs}).groupby(["o", "f", "p"], sort=False, dropna=False)
           .ngroup().to_numpy())
    found: Counter = Counter()
    modes: Counter = Counter()
    repeats: Counter = Counter()  # the most times one gradient call recurs in a step
    order = np.lexsort((np.arange(len(op)), step_id, rank))
    sel = order[use[order]]
    bounds = np.flatnonzero((np.diff(rank[sel]) != 0) | (np.diff(step_id[sel]) != 0)) + 1
    for part in np.split(sel, bounds) if len(sel) else []:
        codes = sig[part].tolist()
        g = Counter(c for c, is_g in zip(codes, grad[part], strict=True) if is_g)
        if g:
            repeats[max(g.values())] += 1
        per, reps = _leading_repeats(codes)
        if reps > 1:
            in_block = grad[part[:per * reps]].any()
            after = grad[part[per * reps:]].any()
            modes["every" if in_block else "boundary" if after else "none"] += 1
            # the boundary micro-batch: the same block with the gradient reductions among its calls
            rest = [c for c, g in zip(codes[per * reps:], grad[part[per * reps:]], strict=True) if not g]
            if rest[:per] == codes[:per] and after and not in_block:
                reps += 1
        found[reps] += 1
    inferred = max(found, key=lambda r: (found[r], -r)) if found and marked else 1
    if k is not None:
        if k < 1:
            from zerocalc.errors import ConfigError

            raise ConfigError(f"must be a positive integer, got {k}", option="--micro-batches")
        how = f"K = {k}: from --micro-batches"
        if inferred > 1 and inferred != k:
            how += f" (the trace's steps open with a block repeated {inferred} times)"
    elif inferred > 1:
        k = inferred
        how = (f"K = {k}: inferred from the trace (each optimizer step opens with one block of collectives "
               f"repeated {k} times: one per micro-batch)")
    elif not marked:
        k = 1
        how = ("K = 1: the trace marks no optimizer steps, so micro-batches cannot be told from steps "
               "(give --micro-batches K)")
    else:
        k = 1
        how = ("K = 1: nothing repeats inside an optimizer step (one micro-batch, or micro-batches that send "
               "nothing before the boundary: give --micro-batches K if so)")
    mode = max(modes, key=modes.get) if modes else None
    if mode is None and k > 1 and repeats:
        # K given, nothing repeats: the gradient reductions recur K times per step, or run once
        most = max(repeats, key=repeats.get)
        mode = "every" if most == k else "boundary" if most == 1 else None
    if k == 1:
        return MicroBatches(1, how, None, "one micro-batch per optimizer step: nothing to tell")
    if mode == "every":
        return MicroBatches(k, how, "every",
                            "gradients reduced in every micro-batch (the repeated block holds the gradient "
                            "collectives)")
    if mode == "boundary":
        return MicroBatches(k, how, "boundary", "gradients reduced once per optimizer step (no_sync / "
                                                "set_requires_gradient_sync(False) on the earlier "
                                                "micro-batches, or a ZeRO-1 boundary reduction)")
    return MicroBatches(k, how, None, "the trace does not show when the gradients are reduced")


#: Parameter-side and gradient-side collectives (§7: FSDP2 gathers in param_dtype and reduce-scatters in
#: reduce_dtype; a DDP compression hook changes the all-reduce only).
PARAM_SIDE_OPS: tuple[str, ...] = ("all_gather", "broadcast")


def side_dtypes(df: pd.DataFrame, cat: np.ndarray, op: np.ndarray, full: np.ndarray, eb: np.ndarray,
                wire: tuple[str, float]) -> tuple[str, float, str, float]:
    """(parameter dtype, its bytes, gradient dtype, its bytes): the type carrying the most elements
    among the steady-state parameter-side (all-gather, broadcast) and gradient-side collectives; a side
    the step lacks takes the wire type."""
    from zerocalc.dtypes import DTYPE_BYTES
    from zerocalc.validate.classify import SCALAR_MAX_ELEMENTS

    dt = df["dtype"].astype("string").fillna("?").to_numpy()
    out = []
    for side in (np.isin(op, list(PARAM_SIDE_OPS)), gradient_calls(cat, op, full)):
        use = side & (cat == "step") & (eb > 0) & (full > SCALAR_MAX_ELEMENTS)
        if not use.any():
            out += list(wire)
            continue
        w = (pd.DataFrame({"d": dt[use], "b": eb[use], "e": full[use]})
             .groupby(["d", "b"], sort=False)["e"].sum())
        name, b = w.idxmax()
        if name == "?":
            name = next((k for k, v in DTYPE_BYTES.items() if v == b), "?")
        out += [str(name), float(b)]
    return out[0], out[1], out[2], out[3]
