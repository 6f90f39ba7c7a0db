"""Ring accounting: bytes one rank sends per collective, nccl-tests bus-bandwidth factors, latency hops.

The per-call arithmetic every other stage of the check uses: the ring algorithm's bytes sent per rank
(:func:`zerocalc.collectives.bytes_sent_per_rank`; Thakur, Rabenseifner & Gropp 2005; Patarasuk & Yuan
2009), the nccl-tests bus-bandwidth factor (``doc/PERFORMANCE.md``) and the ring's latency hops (NCCL
``src/graph/tuning.cc``), and the full vector of a call from its canonical in/out elements (§5).
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from zerocalc.errors import UnknownNameError

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
    if float(p).is_integer():  # the model's expression evaluated without sympy, to sympy's number
        from zerocalc.validate.numeric import ring_bytes

        return ring_bytes(op, int(p))
    from zerocalc.collectives import bytes_sent_per_rank

    return float(bytes_sent_per_rank(op, 1, p))


def busbw_factor(op: str, p: float) -> float:
    """nccl-tests bus-bandwidth factor (``busbw = algbw × factor``, nccl-tests doc/PERFORMANCE.md).

    all-reduce 2(p-1)/p; all-gather, reduce-scatter, all-to-all (p-1)/p; broadcast,
    reduce, send/recv 1. For the ring this is also the time-relevant bytes per rank ÷ n.
    nccl-tests' other tests (each test's ``GetBw`` in its ``src/*.cu``): gather, scatter and hypercube
    (p-1)/p, sendrecv 1.
    """
    if op == "all_reduce":
        return 2 * (p - 1) / p
    if op in ("all_gather", "reduce_scatter", "all_to_all", "gather", "scatter", "hypercube"):
        return (p - 1) / p
    if op in ("broadcast", "reduce", "send", "recv", "sendrecv"):
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



def full_from_message(is_gather: np.ndarray, msg_bytes: np.ndarray, group: np.ndarray) -> np.ndarray:
    """The full vector's bytes of calls that record a message size alone (DeepSpeed's comms logger: the
    tensor argument, an all-gather's shard, a reduce-scatter's whole input): the shard × the group for an
    all-gather (``is_gather``), the message itself otherwise."""
    return np.where(is_gather, msg_bytes * group, msg_bytes)


def _per_op_and_size(func, op, p: np.ndarray) -> np.ndarray:
    """``func(op, p)`` for every row, computed once per distinct (op, p) pair; ``op`` is an array of
    names or :class:`~zerocalc.validate.columns.Codes`."""
    from zerocalc.validate.columns import Codes, first_rows, group_codes

    if len(p) == 0:
        return np.zeros(0)
    if isinstance(op, Codes):
        p = np.asarray(p, dtype=float)
        pair, _ = group_codes(op.codes, p)
        first = first_rows(pair)
        names = [*op.names, "nan"]  # code -1 reads the last
        return np.array([func(names[op.codes[i]], float(p[i])) for i in first.tolist()], dtype=float)[pair]
    pairs = pd.DataFrame({"o": np.asarray(op, dtype=object), "p": np.asarray(p, dtype=float)})
    code = pairs.groupby(["o", "p"], sort=False, dropna=False).ngroup().to_numpy()
    uniq = pairs.drop_duplicates()
    vals = np.array([func(o, q) for o, q in zip(uniq["o"], uniq["p"], strict=True)], dtype=float)
    return vals[code]




def _plural(k: float, word: str, words: str | None = None) -> str:
    """``1 call``, ``2 calls``, ``1.5 calls`` (``words``: an irregular plural)."""
    return f"{k:g} {word}" if k == 1 else f"{k:g} {words or word + 's'}"


#: Relative tolerance of "the same volume" (padding of shards, rounding in traces).
RTOL = 0.02


def _world_sizes(meta: dict | None) -> dict[str, int]:
    """Each file's ``world_size`` from the readers' metadata, where it records one."""
    out = {}
    for f, m in (meta or {}).items():
        ws = m.get("world_size") if isinstance(m, dict) else None
        if ws is not None and not pd.isna(ws):
            out[str(f)] = int(ws)
    return out


def _world_from(meta: dict | None) -> str | None:
    """Where the readers found the world size (``world_from``), where all that say so agree and it is not a
    header (a DeepSpeed log's printed bandwidths); None otherwise."""
    froms = {m.get("world_from") for m in (meta or {}).values() if isinstance(m, dict)} - {None}
    return next(iter(froms)) if len(froms) == 1 else None
