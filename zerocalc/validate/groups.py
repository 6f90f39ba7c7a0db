"""Groups: the data-parallel layout the gradient collectives show: N, HSDP's shard and replicate groups
(beside tensor parallelism's too), expert parallelism's expert-data-parallel groups, and the tensor-parallel
group sizes left out, each with the sentence saying how it was found (:func:`infer_n`).

Each function takes the calls ordered by rank and time (:func:`~zerocalc.validate.ranks.assign_ranks`)
as numpy columns (ops as :class:`~zerocalc.validate.columns.Codes`), and the user's option where there
is one (None: infer it). Sources: Megatron-LM ``parallel_state.py`` (rank order), §7 (HSDP), DeepSpeed
``deepspeed/utils/groups.py`` (expert parallelism).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from zerocalc.errors import TraceMismatchError
from zerocalc.validate.accounting import _OP_VERBS, RTOL
from zerocalc.validate.columns import Codes, Rows, first_rows, group_codes, zero_nan
from zerocalc.validate.folded import weighted
from zerocalc.validate.infer import _w


def _tensor_parallel_sizes(comm_rank: np.ndarray | None, rank: np.ndarray, gs: np.ndarray,
                           data_ops: np.ndarray, sizes: dict[int, float]) -> set[int]:
    """Group sizes, below the largest, whose groups are blocks of consecutive global ranks.

    Megatron-LM orders ranks tensor-parallel first (``parallel_state.py``, order ``tp-cp-ep-dp-pp``):
    a tensor-parallel group of p is ranks kp … kp+p−1, each at position ``rank mod p``, while a
    data-parallel group takes every TP-th rank. Read from NCCL's per-communicator rank
    (``comm_rank``) where the trace has it and the data collectives run on groups of several sizes;
    a size is left out only if another remains.
    """
    if comm_rank is None or len(sizes) < 2:
        return set()
    cr = comm_rank
    rank = rank.astype(float)
    out = set()
    for p in sorted(sizes)[:-1]:
        on = data_ops & (gs == p)
        if p > 1 and on.any() and not np.isnan(cr[on]).any() and np.all(cr[on] == rank[on] % p):
            out.add(p)
    return out if len(out) < len(sizes) else set()


def _elements_by_size(gs: np.ndarray, elems: np.ndarray) -> dict[int, float]:
    """Elements summed per group size (in the calls' order, as a running sum per size would)."""
    if not len(gs):
        return {}
    code, k = group_codes(gs)
    first = first_rows(code)
    sums = np.bincount(code, weights=elems, minlength=k)
    return {int(gs[i]): float(s) for i, s in zip(first.tolist(), sums.tolist(), strict=True)}


def group_keys(rows: Rows) -> np.ndarray:
    """Each call's group as a code: its members where the trace lists them (two groups of the same ranks
    are one), or those another call of its name lists, else its name (a process group's, an NCCL
    communicator's); -1: neither."""
    none = np.full(len(rows.idx), -1)
    named = rows.codes("group").codes if rows.has("group") else none
    listed = rows.codes("group_ranks").codes.copy() if rows.has("group_ranks") else none.copy()
    both = (named >= 0) & (listed >= 0)
    if both.any():  # a name's ranks, for its calls that list none
        of_name = np.full(int(named.max()) + 1, -1)
        of_name[named[both]] = listed[both]
        fill = (listed < 0) & (named >= 0)
        listed[fill] = of_name[named[fill]]
    offset = int(listed.max()) + 1
    key = np.where(listed >= 0, listed, np.where(named >= 0, named + offset, -1))
    if (key < 0).any() and rows.has("worker"):
        threads = _worker_threads(rows, key < 0)
        start = max(int(key.max()), int(named.max()) + offset) + 1
        key = np.where((key < 0) & (threads >= 0), threads + start, key)
    return key


def _worker_threads(rows: Rows, unnamed: np.ndarray) -> np.ndarray:
    """For calls no group names (``unnamed``), the gloo worker threads that ran them, as a group's code: the
    threads that ran calls alike (op and sizes) serve one group, as each process group runs its calls on
    threads of its own (:data:`~zerocalc.traces.kineto_groups.THREADS_PER_GROUP`). Only a set of that many
    threads counts (both of a group seen): one thread alone may be one of a group whose calls fell to its
    threads by turns (a DDP step's two buckets, the first always on one thread, the second on the other).
    -1 elsewhere."""
    from zerocalc.traces.kineto_groups import THREADS_PER_GROUP

    out = np.full(len(unnamed), -1)
    at = np.flatnonzero(unnamed & rows.notna("worker"))
    if not len(at):
        return out
    worker = rows.codes("worker").codes[at]
    files = rows.codes("file").codes[at] if rows.has("file") else np.zeros(len(at), dtype=np.int64)
    sig, _ = group_codes(rows.codes("op").codes[at], rows.num("in_nelems")[at], rows.num("out_nelems")[at],
                         files)
    parent = list(range(int(worker.max()) + 1))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    first: dict[int, int] = {}
    for s_, w_ in zip(sig.tolist(), worker.tolist(), strict=True):
        a, b = find(first.setdefault(s_, w_)), find(w_)
        if a != b:
            parent[b] = a
    root = np.array([find(x) for x in range(len(parent))])
    members = np.bincount(root[np.unique(worker)], minlength=len(parent))
    whole = members[root[worker]] == THREADS_PER_GROUP
    out[at[whole]] = root[worker[whole]]
    return out


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
    #: expert parallelism's expert-data-parallel group size (None: no experts apart; :func:`_experts`)
    expert: int | None = None
    #: the calls on a data-parallel group size that run on another group of it, reported apart (HSDP's
    #: replicate size shared with tensor parallelism: :func:`_hsdp_beside`); None: none
    apart: np.ndarray | None = None


def _hsdp(ops: Codes, gs: np.ndarray, full: np.ndarray, grad: np.ndarray,
          w: np.ndarray | None = None) -> tuple[int, int] | None:
    """(shard size H, replicate size R) when the gradients are reduce-scattered on groups of H and the
    shards then all-reduced on groups of R: HSDP (FSDP ``HYBRID_SHARD`` / FSDP2 on a 2-D mesh; §7).

    Read from the elements: the all-reduces carry 1/H of the reduce-scatters' elements (each rank's
    shard), which on one group would be pointless; or, where every all-reduce reduces a vector the size
    of a reduce-scatter's output, 1/(HK) of them for a whole K ≥ 2: the shards all-reduced once for K
    reduce-scatters (FSDP2's ``set_requires_all_reduce(False)`` on all micro-batches but the last).
    None otherwise.
    """
    rs = grad & ops.eq("reduce_scatter")
    ar = grad & ops.eq("all_reduce")
    if not rs.any() or not ar.any():
        return None
    h, r = set(gs[rs].tolist()), set(gs[ar].tolist())
    if len(h) != 1 or len(r) != 1:
        return None
    h_, r_ = int(next(iter(h))), int(next(iter(r)))
    e_rs, e_ar = (float(weighted(full[m], None if w is None else w[m]).sum()) for m in (rs, ar))
    if h_ <= 1 or r_ <= 1 or e_ar <= 0:
        return None
    if math.isclose(e_ar * h_, e_rs, rel_tol=RTOL):
        return h_, r_
    k = round(e_rs / (e_ar * h_))
    if k >= 2 and math.isclose(e_ar * h_ * k, e_rs, rel_tol=RTOL) and (
            set(full[ar].tolist()) == {f / h_ for f in full[rs].tolist()}):
        return h_, r_
    return None


def _hsdp_beside(rows: Rows, rank: np.ndarray, ops: Codes, gs: np.ndarray, full: np.ndarray,
                 grad: np.ndarray, w: np.ndarray | None = None) -> tuple[int, int, np.ndarray] | None:
    """HSDP (:func:`_hsdp`) whose replicate groups share their size with another group the rank all-reduces
    on (tensor parallelism's activations beside HSDP on a 3-D mesh, torchtitan's (replicate, shard, tp)):
    (H, R, the all-reduces on the other groups), read where the trace names each call's group
    (:func:`group_keys`). The replicate group of a rank is the one whose every all-reduce reduces a shard,
    the size of a reduce-scatter's output; the shards of all must then carry 1/H of the reduce-scatters'
    elements, as :func:`_hsdp` reads them. None otherwise."""
    rs = grad & ops.eq("reduce_scatter")
    if not rs.any():
        return None
    ar = grad & ops.eq("all_reduce")
    if not ar.any() or len(np.unique(gs[rs])) != 1:
        return None
    h = int(gs[rs][0])
    key = group_keys(rows)
    if (key[ar] < 0).any() or h <= 1:
        return None
    shards = set((full[rs] / h).tolist())
    is_shard = ar & np.isin(full, list(shards))
    # per (rank, group): whether every all-reduce on it reduces a shard
    pair, k = group_codes(rank[ar], key[ar])
    every = np.bincount(pair, weights=is_shard[ar], minlength=k) == np.bincount(pair, minlength=k)
    replicate = np.zeros(len(full), dtype=bool)
    replicate[np.flatnonzero(ar)] = every[pair]
    others = ar & ~replicate
    if not replicate.any() or not others.any():
        return None
    found = _hsdp(ops, gs, full, grad & ~others, w)
    return None if found is None else (*found, others)


def _experts(ops: Codes, gs: np.ndarray, full: np.ndarray, grad: np.ndarray) -> tuple[int, int] | None:
    """(N, E) when the gradients are reduced on groups of two sizes N > E, E dividing N, and tokens are
    exchanged by all-to-all on groups of N / E: expert parallelism (DeepSpeed MoE's ``ep_size``,
    Megatron-LM's and torchtitan's expert-parallel dimension). Each rank holds 1 / (N/E) of the experts,
    whose gradients it reduces with the E ranks that hold the same experts (``expert_data_parallel``), and
    the dense parameters' with all N (DeepSpeed ``deepspeed/utils/groups.py``
    ``_create_expert_and_data_parallel``). None otherwise."""
    from zerocalc.validate.classify import GRADIENT_OPS, SCALAR_MAX_ELEMENTS

    a2a = ops.eq("all_to_all")
    if not a2a.any():
        return None
    sizes = np.unique(gs[grad]).tolist()
    alone = ops.isin(GRADIENT_OPS) & (full > SCALAR_MAX_ELEMENTS) & (gs == 1)
    if len(sizes) == 1 and alone.any():  # one expert a rank: its gradients reduced on a group of itself
        sizes = [1, *sizes]
    if len(sizes) != 2:
        return None
    e, n = (int(s) for s in sizes)
    if n % e:
        return None
    a2a &= (gs == n // e) & (full > SCALAR_MAX_ELEMENTS)
    return (n, e) if a2a.any() else None


def infer_n(rows: Rows, rank: np.ndarray, ops: Codes, full: np.ndarray, world: int | None,
            n: int | None, w: np.ndarray | None = None, world_from: str | None = None,
            activations: np.ndarray | None = None, averaged_on: int | None = None
            ) -> tuple[np.ndarray, Groups]:
    """Group size of every call (recorded, else the world size, else ``n``), N and how it was found.

    N is ``--n`` (which must be one of the trace's group sizes) or found from the groups the
    gradient collectives (all-reduce, reduce-scatter, reduce of more than a scalar) run on: the
    group that reduces the most elements, or HSDP's shard × replicate groups (:func:`_hsdp`, beside
    tensor parallelism: :func:`_hsdp_beside`), or expert parallelism's (:func:`_experts`); without gradient
    collectives, the group of the collectives that move the most elements. Tensor-parallel groups
    (:func:`_tensor_parallel_sizes`) are left out, and so are the reductions of activations, a forward
    pass's and their gradients' (``activations``: :mod:`.activations`; and parameter averaging's
    all-reduces, :mod:`.averaging`, on groups of ``averaged_on``). ``w``: each call's weight
    (:mod:`.folded`; None: 1).
    ``world_from``: where the trace's world size comes from, where not its header (a DeepSpeed log's
    printed bandwidths).
    """
    from zerocalc.validate.classify import GRADIENT_OPS, SCALAR_MAX_ELEMENTS

    gs, unnamed = _sizes_of_calls(rows, ops, world, n)
    data_ops = ops.isin(_OP_VERBS)
    sizes_by_elems = _elements_by_size(gs[data_ops], _w(zero_nan(full[data_ops]), w, data_ops))
    inner = _tensor_parallel_sizes(rows.num("comm_rank") if rows.has("comm_rank") else None, rank, gs,
                                   data_ops, sizes_by_elems)
    grad = ops.isin(GRADIENT_OPS) & (full > SCALAR_MAX_ELEMENTS) & (gs > 1)
    grad &= ~np.isin(gs, list(inner))
    if activations is not None:
        grad &= ~activations
    by_grad = _elements_by_size(gs[grad], _w(full[grad], w, grad))
    most = {k: v for k, v in sizes_by_elems.items() if k not in inner} or sizes_by_elems
    most_n = max(most, key=lambda k: (most[k], k))
    trace_n = max(by_grad, key=lambda k: (by_grad[k], k)) if by_grad else most_n
    hsdp = _hsdp(ops, gs, full, grad, w)
    beside = None if hsdp is not None else _hsdp_beside(rows, rank, ops, gs, full, grad, w)
    if beside is not None:
        hsdp = beside[:2]
    experts = None if hsdp is not None else _experts(ops, gs, full, grad)
    sizes = frozenset({trace_n})
    if hsdp is not None:
        trace_n, sizes = hsdp[0] * hsdp[1], frozenset(hsdp)
    if experts is not None:
        trace_n, sizes = experts[0], frozenset(experts)
    if n is None:
        n = trace_n
        n_how = _inferred_how(n, world, most_n if by_grad else None, hsdp,
                              None if beside is None else sorted({int(g) for g in gs[beside[2]]}), experts,
                              inner, sizes_by_elems, world_from)
        if world is not None and unnamed:
            n_how += (f"; no call records its group, so each is taken to span the world of {world} ranks: "
                      "give --n if they ran on a smaller one")
    else:
        if (hsdp is not None or experts is not None) and n == trace_n:
            pass
        elif n not in sizes_by_elems:
            raise TraceMismatchError(
                f"--n {n} contradicts the trace: its collectives run on groups of "
                f"{', '.join(str(k) for k in sorted(sizes_by_elems))} ranks"
            )
        else:
            sizes, hsdp, experts, beside = frozenset({n}), None, None, None
        n_how = (f"N = {n}: from --n (HSDP: shard groups of {hsdp[0]} × replicate groups of {hsdp[1]})"
                 if hsdp is not None else
                 f"N = {n}: from --n (expert parallelism: the experts' gradients reduced on groups of "
                 f"{experts[1]})" if experts is not None else
                 f"N = {n}: from --n (no call in the trace records its group)" if unnamed else
                 f"N = {n}: from --n (the trace has collectives on groups of {n})")
    n_ranks = len(pd.unique(rank))
    if world is not None and n_ranks > world:
        raise TraceMismatchError(f"{n_ranks} ranks in the traces but world_size is {world}")
    if n_ranks > n and averaged_on is not None and averaged_on > n:
        n_how += (f"; {n_ranks} ranks in all: each data-parallel group of {n} trains on its own between "
                  f"the parameter averagings on groups of {averaged_on} (local SGD)")
    elif n_ranks > n:
        n_how += (f"; {n_ranks} ranks in all: each data-parallel group of {n} is one of "
                  f"{n_ranks / n:g} model-parallel (pipeline or tensor) parts")
    return gs, Groups(n=int(n), sizes=sizes, shard=hsdp[0] if hsdp else None, how=n_how,
                      expert=experts[1] if experts else None, apart=beside[2] if beside else None)


def _sizes_of_calls(rows: Rows, ops: Codes, world: int | None, n: int | None) -> tuple[np.ndarray, bool]:
    """Each call's group size: recorded, else the world size, else ``n``; ``n`` first where no call records
    one (the user's word on a trace that names no group); refused where a collective is left with none.
    And whether no call records its group size."""
    gs = rows.num("group_size")
    data_ops = ops.isin(_OP_VERBS)
    none_recorded = bool(np.all(np.isnan(gs[data_ops])))
    if none_recorded and world is None and n is None:
        raise TraceMismatchError("the trace records no group sizes and no world size: give --n")
    if none_recorded and n is not None and world is not None and (n > world or world % n):
        raise TraceMismatchError(f"--n {n} contradicts the trace: no call records its group, and its world "
                                 f"of {world} ranks is no whole number of groups of {n}")
    fill = n if none_recorded and n is not None else world if world is not None else (n or np.nan)
    gs = np.where(np.isnan(gs), fill, gs)
    unsized = int(np.isnan(gs[data_ops]).sum())
    if unsized:  # some calls name their group but not its size, and the trace states no world size
        which = ""
        if rows.has("group"):
            mask = data_ops & np.isnan(gs)
            named = rows.codes("group").take(mask).present()
            ops_of = ", ".join(ops.take(mask).present())
            if named:
                which = (f" (on group{'s' if len(named) > 1 else ''} {', '.join(map(repr, named[:3]))}"
                         f"{' …' if len(named) > 3 else ''}: {ops_of})")
        raise TraceMismatchError(f"{unsized} call(s){which} record no group size and the trace states no "
                                 "world size to take: give --n")
    return gs, none_recorded


def _inferred_how(n: int, world: int | None, most_n: int | None, hsdp, beside, experts, inner: set[int],
                  sizes_by_elems: dict[int, float], world_from: str | None = None) -> str:
    """The sentence saying how N was found in the trace (``most_n``: the group size that moves the most
    data, where gradient collectives chose another; None where there are none; ``beside``: the sizes of the
    groups whose all-reduces HSDP's replicate group leaves apart, :func:`_hsdp_beside`)."""
    how = f"N = {n}: inferred from the trace (group size of the collectives that move the most data"
    if most_n is not None and n != most_n:
        how = (f"N = {n}: inferred from the trace (the group the gradient collectives run on; "
               f"groups of {most_n} ranks move more data")
    if hsdp is not None:
        how = (f"N = {n}: inferred from the trace (HSDP: gradients reduce-scattered on shard groups of "
               f"{hsdp[0]} ranks, then each shard all-reduced on replicate groups of {hsdp[1]}")
    if beside is not None:  # the sizes of the rank's other groups that all-reduce
        whose = " (tensor parallelism's)" if beside == [hsdp[1]] else ""
        how += (f"; the all-reduces on the rank's other groups of {', '.join(map(str, beside))}{whose} are "
                "reported apart")
    if experts is not None:
        how = (f"N = {n}: inferred from the trace (expert parallelism: the dense parameters' gradients "
               f"reduced on groups of {n} ranks, the experts' on expert-data-parallel groups of "
               f"{experts[1]}, tokens exchanged by all-to-all on expert-parallel groups of {n // experts[1]}")
    elif inner:
        how = (f"N = {n}: inferred from the trace (the data-parallel groups: the groups of "
               f"{' and '.join(map(str, sorted(inner)))} ranks are consecutive global ranks, tensor "
               "parallelism's layout, and are reported apart")
    elif rest := [k for k in sorted(sizes_by_elems) if k != n and (hsdp is None or k not in hsdp)]:
        how += (f"; the trace also has groups of {', '.join(map(str, rest))} ranks, reported apart: give --n "
                "if the data-parallel group is another")
    if world is None:
        return how + ")"
    return how + (f"; world size {world} from {world_from})" if world_from
                  else f"; world_size {world} in the trace header)")
