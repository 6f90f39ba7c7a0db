"""One runner per scheme: each shards the optimizer state (and gradients, parameters) the way it does
in its source (ZeRO, arXiv 1910.02054 §5 and §7; the implementations' sources named in
:mod:`zerocalc.schemes`) and runs the collectives it runs, in float64. Quantised collectives (ZeRO++)
really quantise (:mod:`zerocalc.sim.quantize`).

A runner takes the shared state of one run (:class:`_Sim`) and returns ``step(t)``, which runs Adam
step ``t`` on every rank and returns the parameters as rank 0 (or its group) holds them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from zerocalc.sim.quantize import dequantize, quantize
from zerocalc.sim.training import FeasibilityConfig, _teacher, _theta0, micro_batch
from zerocalc.sim.world import (
    World,
    all_gather,
    all_reduce,
    all_to_all,
    broadcast,
    chunk_bounds,
    reduce,
    reduce_scatter,
)

__all__ = ["RUNNERS", "SIMULATED_SCHEMES"]

class _Sim:
    """Shared state of one scheme's run: the world, the data, and per-rank optimizer shards."""

    def __init__(self, cfg: FeasibilityConfig) -> None:
        self.cfg, self.n, self.model, self.opt = cfg, cfg.n, cfg.model, cfg.optimizer
        self.world = World(cfg.n, cfg.g, frozenset(cfg.in_network), frozenset(cfg.switch_ops))
        self.teacher = _teacher(cfg)
        self.theta0 = _theta0(cfg)
        self.psi = self.model.psi
        self.part = chunk_bounds(self.psi, cfg.n)  # ZeRO's flat partition: rank r owns part[r]
        self.m: dict[int, np.ndarray] = {}
        self.v: dict[int, np.ndarray] = {}
        self.opt_elements = [0] * cfg.n

    def batch(self, t: int, r: int, j: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Micro-batch ``j`` of rank ``r`` at step ``t``."""
        return micro_batch(self.cfg, t, r, self.teacher, j)

    def scaled(self, grad: np.ndarray) -> np.ndarray:
        """One micro-batch's share of the step's gradient: ÷ micro-batches (DeepSpeed scales the loss by
        1/gradient_accumulation_steps; the mean over the step's samples, as the reference takes it)."""
        k = self.cfg.micro_batches
        return grad / k if k > 1 else grad

    def own(self, r: int, idx: np.ndarray) -> None:
        """Give rank r optimizer state (m, v) for the elements ``idx`` only."""
        self.m[r], self.v[r] = np.zeros(idx.size), np.zeros(idx.size)
        self.opt_elements[r] = int(idx.size)

    def adam(self, r: int, param: np.ndarray, grad: np.ndarray, t: int) -> np.ndarray:
        return self.opt.update(param, grad, self.m[r], self.v[r], t)


def _replicated(reduce: Callable[[_Sim, list[np.ndarray]], list[np.ndarray]],
                update: Callable[[_Sim, list[np.ndarray], list[np.ndarray], int], None],
                owned: Callable[[_Sim, int], np.ndarray], *,
                boundary: bool) -> Callable[[_Sim], Callable[[int], np.ndarray]]:
    """A scheme whose ranks all hold the full parameters between steps (DP, ZeRO-1/2 and relatives).

    Each rank computes its local gradient; ``reduce`` communicates one set of per-rank gradients and
    returns what each rank keeps of their sum, ``update`` steps the parameters with it (÷ N) and
    communicates what follows the step. With several micro-batches, ``boundary`` schemes accumulate
    the gradients locally and reduce once per optimizer step (ZeRO-1's P_os keeps whole gradients;
    DeepSpeed's engine reduces stage 0/1 only at the gradient-accumulation boundary); the others reduce
    every micro-batch's gradients and accumulate what they keep (ZeRO-2, DDP without no_sync)."""

    def run(sim: _Sim):
        n, k = sim.n, sim.cfg.micro_batches
        params = [sim.theta0.copy() for _ in range(n)]
        for r in range(n):
            sim.own(r, owned(sim, r))

        def grads(t: int, j: int) -> list[np.ndarray]:
            return [sim.model.gradient(params[r], *sim.batch(t, r, j)) for r in range(n)]

        def step(t: int) -> np.ndarray:
            if boundary:
                acc = grads(t, 0)
                for j in range(1, k):
                    acc = [a + g for a, g in zip(acc, grads(t, j), strict=True)]
                kept = reduce(sim, [sim.scaled(g) for g in acc])
            else:
                kept = reduce(sim, [sim.scaled(g) for g in grads(t, 0)])
                for j in range(1, k):
                    more = reduce(sim, [sim.scaled(g) for g in grads(t, j)])
                    kept = [a + b for a, b in zip(kept, more, strict=True)]
            update(sim, params, kept, t)
            spread = max(float(np.abs(p - params[0]).max(initial=0.0)) for p in params)
            if spread != 0.0:
                raise AssertionError(f"replicas diverged by {spread}")
            return params[0].copy()

        return step

    return run


def _range_idx(bounds: Sequence[tuple[int, int]]) -> np.ndarray:
    return np.concatenate([np.arange(a, b) for a, b in bounds]) if bounds else np.zeros(0, dtype=int)


def _own_part(sim: _Sim, r: int) -> np.ndarray:
    return _range_idx([sim.part[r]])


def _own_all(sim: _Sim, r: int) -> np.ndarray:
    return np.arange(sim.psi)


def _update_own_and_gather(sim: _Sim, params: list[np.ndarray], grad_shards: list[np.ndarray],
                           t: int) -> None:
    """Each rank updates its partition with its (reduced or local) gradient shard, then the updated
    partitions are all-gathered (ZeRO §5.2 / DeepSpeed ``all_gather_into_tensor``)."""
    world, n = sim.world, sim.n
    new = []
    for r in range(n):
        a, b = sim.part[r]
        new.append(sim.adam(r, params[r][a:b], grad_shards[r], t))
    have = all_gather(world, list(range(n)), new, purpose="parameter all-gather (after step)")
    for r in range(n):
        params[r][:] = np.concatenate(have[r])


def _all_reduce_full(sim, grads):
    """DDP: the whole gradient all-reduced; every rank keeps the sum."""
    return all_reduce(sim.world, list(range(sim.n)), grads)


def _update_all(sim, params, kept, t):
    for r in range(sim.n):
        params[r][:] = sim.adam(r, params[r], kept[r] / sim.n, t)


def _reduce_scatter_flat(sim, grads):
    """ZeRO-1 (paper): one reduce-scatter onto the flat partition; rank r keeps part[r] of the sum."""
    return reduce_scatter(sim.world, list(range(sim.n)), grads, sim.part)


def _update_own(sim, params, kept, t):
    """Each rank updates its partition with its reduced shard (÷ N), then all-gathers."""
    _update_own_and_gather(sim, params, [s / sim.n for s in kept], t)


def _buckets(sim: _Sim) -> list[tuple[int, int]]:
    """Gradient buckets in the order backward produces them: one per tensor, last layer first."""
    return list(reversed(sim.model.tensor_ranges))


def _reduce_scatter_buckets(sim, grads):
    """ZeRO-2: each bucket is reduce-scattered as backward produces it, split at the partition
    boundaries, so a rank keeps only the gradient elements it owns (empty and uneven chunks included)."""
    n = sim.n
    pieces: list[list[tuple[int, np.ndarray]]] = [[] for _ in range(n)]
    for a, b in _buckets(sim):
        bounds = [(min(max(pa, a), b) - a, min(max(pb, a), b) - a) for pa, pb in sim.part]
        out = reduce_scatter(sim.world, list(range(n)), [g[a:b] for g in grads], bounds)
        for r in range(n):
            pieces[r].append((a + bounds[r][0], out[r]))
    return [np.concatenate([p for _, p in sorted(pieces[r], key=lambda e: e[0])]) for r in range(n)]


def _local_part(sim, grads):
    """The proposal of issue #4582: no reduction; rank r keeps its partition of its LOCAL gradient."""
    return [grads[r][slice(*sim.part[r])] for r in range(sim.n)]


def _update_own_local(sim, params, kept, t):
    """The proposal of issue #4582: rank r updates its partition with its local gradient (not ÷ N)."""
    _update_own_and_gather(sim, params, kept, t)


def _bucket_all_reduce(sim, grads):
    """DeepSpeed ZeRO-1/2 as released: bucketed all-reduce of the gradients
    (``deepspeed/runtime/zero/stage_1_and_2.py``, use_multi_rank_bucket_allreduce; DeepSpeed issues
    #5758, #6463); each rank keeps its partition of the sum."""
    n = sim.n
    avg = [np.empty(sim.psi) for _ in range(n)]
    for a, b in _buckets(sim):
        out = all_reduce(sim.world, list(range(n)), [g[a:b] for g in grads])
        for r in range(n):
            avg[r][a:b] = out[r]
    return [avg[r][slice(*sim.part[r])] for r in range(n)]


def _reduce_per_owner(sim, grads):
    """DeepSpeed ZeRO-2 with multi-rank bucket all-reduce off: one ``reduce`` per destination rank."""
    n = sim.n
    return [reduce(sim.world, list(range(n)), k, [g[slice(*sim.part[k])] for g in grads]) for k in range(n)]


def _torch_owner(sim: _Sim) -> list[int]:
    """ZeroRedundancyOptimizer's partition: whole tensors, largest first, to the least-loaded rank."""
    ranges = sim.model.tensor_ranges
    load, owner = [0] * sim.n, [0] * len(ranges)
    for i in sorted(range(len(ranges)), key=lambda i: -(ranges[i][1] - ranges[i][0])):
        r = min(range(sim.n), key=lambda r: (load[r], r))
        owner[i] = r
        load[r] += ranges[i][1] - ranges[i][0]
    return owner


def _own_torch(sim: _Sim, r: int) -> np.ndarray:
    ranges = sim.model.tensor_ranges
    return _range_idx([ranges[i] for i, o in enumerate(_torch_owner(sim)) if o == r])


def _update_torch_zero1(sim, params, avg, t):
    """PyTorch ZeroRedundancyOptimizer under DDP (whose all-reduce is :func:`_all_reduce_full`): each
    rank steps the tensors it owns, then one broadcast per tensor from its owner (pytorch issue #69591)."""
    n = sim.n
    ranges, owner = sim.model.tensor_ranges, _torch_owner(sim)
    for r in range(n):
        idx = _own_torch(sim, r)
        if idx.size:
            params[r][idx] = sim.adam(r, params[r][idx], avg[r][idx] / n, t)
    for i, (a, b) in enumerate(ranges):
        out = broadcast(sim.world, list(range(n)), owner[i], params[owner[i]][a:b].copy())
        for r in range(n):
            params[r][a:b] = out[r]


def _sharded(units: Callable[[_Sim], list[tuple[int, int]]], *, shard_group: str, reshard: bool,
             replicate: bool) -> Callable[[_Sim], Callable[[int], np.ndarray]]:
    """A scheme whose ranks hold only a shard of each unit's parameters between steps (ZeRO-3, FSDP).

    Forward: all-gather each unit in ``shard_group``; backward: all-gather again if ``reshard``
    (FULL_SHARD) or keep the gathered copy (SHARD_GRAD_OP); reduce-scatter each unit's gradient in
    ``shard_group``; with ``replicate`` (HYBRID_SHARD) all-reduce the shard across nodes; update the shard.
    """

    def run(sim: _Sim):
        world, n = sim.world, sim.n
        unit_list = units(sim)
        size = world.g if shard_group == "intra" else n
        local = (lambda r: r % world.g) if shard_group == "intra" else (lambda r: r)
        shard_b = [chunk_bounds(b - a, size) for a, b in unit_list]
        shards = [[sim.theta0[a:b][slice(*shard_b[u][local(r)])].copy() for u, (a, b) in enumerate(unit_list)]
                  for r in range(n)]
        for r in range(n):
            sim.own(r, np.zeros(sum(s.size for s in shards[r])))

        def gather(purpose: str, order: list[int]) -> list[np.ndarray]:
            full = [np.empty(sim.psi) for _ in range(n)]
            for u in order:
                a, b = unit_list[u]
                for gr in world.groups(shard_group):
                    have = all_gather(world, gr, [shards[r][u] for r in gr], group_kind=shard_group,
                                      purpose=purpose)
                    for i, r in enumerate(gr):
                        full[r][a:b] = np.concatenate(have[i])
            return full

        def micro(t: int, j: int) -> list[list[np.ndarray]]:
            """One micro-batch: gather, forward, (gather again), backward, reduce: the gradient shards."""
            units_fwd = list(range(len(unit_list)))
            full = gather("parameter all-gather (forward)", units_fwd)
            batches = [sim.batch(t, r, j) for r in range(n)]
            caches = [sim.model.forward(full[r], batches[r][0]) for r in range(n)]
            if reshard:
                full = gather("parameter all-gather (backward)", units_fwd[::-1])
            grads = [sim.scaled(sim.model.backward(full[r], caches[r], batches[r][1])) for r in range(n)]
            gshard: list[list[np.ndarray]] = [[np.zeros(0)] * len(unit_list) for _ in range(n)]
            for u in units_fwd[::-1]:
                a, b = unit_list[u]
                for gr in world.groups(shard_group):
                    out = reduce_scatter(world, gr, [grads[r][a:b] for r in gr], shard_b[u],
                                         group_kind=shard_group)
                    for i, r in enumerate(gr):
                        gshard[r][u] = out[i]
                if replicate:
                    for gr in world.groups("inter"):
                        out = all_reduce(world, gr, [gshard[r][u] for r in gr], group_kind="inter")
                        for i, r in enumerate(gr):
                            gshard[r][u] = out[i]
            return gshard

        def step(t: int) -> np.ndarray:
            # every micro-batch gathers and reduce-scatters (ZeRO-3, DeepSpeed stage 3, FSDP without
            # no_sync); the shards of the reduced gradients accumulate until the step
            gshard = micro(t, 0)
            for j in range(1, sim.cfg.micro_batches):
                more = micro(t, j)
                gshard = [[x + y for x, y in zip(gs, ms, strict=True)]
                          for gs, ms in zip(gshard, more, strict=True)]
            for r in range(n):
                flat_p = np.concatenate(shards[r])
                new = sim.adam(r, flat_p, np.concatenate(gshard[r]) / n, t)
                cut = np.cumsum([s.size for s in shards[r]])[:-1]
                shards[r] = list(np.split(new, cut))
            return _assemble(sim, unit_list, shard_b, shards, local, size)

        return step

    return run


def _assemble(sim, unit_list, shard_b, shards, local, size) -> np.ndarray:
    """The parameters as the ranks of group 0 hold them (inspection, not communication); checks that
    replicated shards (HYBRID_SHARD's nodes) agree bit for bit."""
    theta = np.empty(sim.psi)
    for u, (a, _) in enumerate(unit_list):
        for r in range(sim.n):
            lo, hi = shard_b[u][local(r)]
            if r < size:
                theta[a + lo:a + hi] = shards[r][u]
            elif not np.array_equal(theta[a + lo:a + hi], shards[r][u]):
                raise AssertionError("replicated shards diverged")
    return theta


def _zeropp(sim: _Sim):
    """ZeRO++ (arXiv 2306.10209) on ZeRO-3: qwZ = forward all-gather of int8-quantised weights over all
    ranks; hpZ = each rank keeps its node's shard of the gathered weights, so the backward all-gather
    stays inside the node; qgZ = gradients quantised to int4 and reduced by a two-hop all-to-all
    (inside the node, then across nodes), dequantising and summing after each hop. Not DP-exact. Only
    what is sent is quantised: a group of one rank sends nothing, so at N = 1 nothing is quantised and
    the update is the data-parallel one."""
    world, n, g = sim.world, sim.n, sim.world.g
    part = sim.part
    master = [sim.theta0[slice(*part[r])].copy() for r in range(n)]
    for r in range(n):
        sim.own(r, np.zeros(master[r].size))
    sec_b = chunk_bounds(sim.psi, g)
    # Elements a rank with local index j reduces in hop 1: the partitions of every rank m·G + j.
    hop1_idx = [_range_idx([part[m * g + j] for m in range(n // g)]) for j in range(g)]

    def wire(x: np.ndarray, bits: int, ranks: int):
        return quantize(x, bits) if ranks > 1 else x

    def unwire(item) -> np.ndarray:
        return item if isinstance(item, np.ndarray) else dequantize(item)

    def step(t: int) -> np.ndarray:
        # ZeRO++ is built on ZeRO-3: every phase runs in every micro-batch, the reduced shards accumulate
        gshard = micro(t, 0)
        for j in range(1, sim.cfg.micro_batches):
            more = micro(t, j)
            gshard = {r: gshard[r] + more[r] for r in range(n)}
        for r in range(n):
            master[r] = sim.adam(r, master[r], gshard[r] / n, t)
        return np.concatenate(master)

    def micro(t: int, j: int) -> dict[int, np.ndarray]:
        have = all_gather(world, list(range(n)), [wire(master[r], 8, n) for r in range(n)],
                          purpose="parameter all-gather (forward)")
        full = [np.concatenate([unwire(p) for p in have[r]]) for r in range(n)]
        secondary = [full[r][slice(*sec_b[r % g])].copy() for r in range(n)]
        batches = [sim.batch(t, r, j) for r in range(n)]
        caches = [sim.model.forward(full[r], batches[r][0]) for r in range(n)]
        del full
        back = [np.empty(sim.psi) for _ in range(n)]
        for gr in world.groups("intra"):
            h = all_gather(world, gr, [secondary[r] for r in gr], group_kind="intra",
                           purpose="parameter all-gather (backward)")
            for i, r in enumerate(gr):
                back[r][:] = np.concatenate(h[i])
        grads = [sim.scaled(sim.model.backward(back[r], caches[r], batches[r][1])) for r in range(n)]
        partial: dict[int, np.ndarray] = {}
        for gr in world.groups("intra"):
            recv = all_to_all(world, gr, [[wire(grads[r][hop1_idx[j]], 4, g) for j in range(g)] for r in gr],
                              group_kind="intra")
            for j, r in enumerate(gr):
                partial[r] = np.sum([unwire(p) for p in recv[j]], axis=0)
        gshard: dict[int, np.ndarray] = {}
        for gr in world.groups("inter"):
            j = gr[0] % g
            cuts = np.cumsum([part[m * g + j][1] - part[m * g + j][0] for m in range(n // g)])[:-1]
            send = [[wire(c, 4, len(gr)) for c in np.split(partial[r], cuts)] for r in gr]
            recv = all_to_all(world, gr, send, group_kind="inter")
            for i, r in enumerate(gr):
                gshard[r] = np.sum([unwire(p) for p in recv[i]], axis=0)
        return gshard

    return step


RUNNERS: dict[str, Callable[[_Sim], Callable[[int], np.ndarray]]] = {
    "dp": _replicated(_all_reduce_full, _update_all, _own_all, boundary=False),
    "zero1": _replicated(_reduce_scatter_flat, _update_own, _own_part, boundary=True),
    "zero2": _replicated(_reduce_scatter_buckets, _update_own, _own_part, boundary=False),
    "zero3": _sharded(lambda s: [(0, s.psi)], shard_group="world", reshard=True, replicate=False),
    "colocated": _replicated(_local_part, _update_own_local, _own_part, boundary=True),
    # DeepSpeed ZeRO-1 keeps the full gradient (P_os) and all-reduces it at the boundary; ZeRO-2 keeps
    # its partition and all-reduces every micro-batch's buckets (engine.py allreduce_gradients)
    "deepspeed-zero1": _replicated(_bucket_all_reduce, _update_own, _own_part, boundary=True),
    "deepspeed-zero2": _replicated(_bucket_all_reduce, _update_own, _own_part, boundary=False),
    "deepspeed-zero2-reduce": _replicated(_reduce_per_owner, _update_own, _own_part, boundary=False),
    # DeepSpeed ZeRO-3 partitions every parameter tensor over the ranks and gathers a module's tensors
    # for its forward (stage3.py); at the default stage3_max_reuse_distance (1e9 elements, far above
    # the simulated model) the forward gather is kept for backward (partitioned_param_coordinator.py
    # __params_to_release), and each micro-batch's gradients are reduce-scattered
    "deepspeed-zero3": _sharded(lambda s: s.model.tensor_ranges, shard_group="world", reshard=False,
                                replicate=False),
    "torch-zero1": _replicated(_all_reduce_full, _update_torch_zero1, _own_torch, boundary=False),
    "fsdp-full-shard": _sharded(lambda s: s.model.layer_ranges, shard_group="world", reshard=True,
                                replicate=False),
    "fsdp-shard-grad-op": _sharded(lambda s: s.model.layer_ranges, shard_group="world", reshard=False,
                                   replicate=False),
    "fsdp-hybrid": _sharded(lambda s: s.model.layer_ranges, shard_group="intra", reshard=True,
                            replicate=True),
    "zeropp": _zeropp,
}
#: The schemes the simulation executes (the fixed scheme names of zerocalc).
SIMULATED_SCHEMES: tuple[str, ...] = tuple(RUNNERS)
