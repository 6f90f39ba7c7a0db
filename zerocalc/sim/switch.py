"""In-network reduction on the simulated ranks: a switch that sums.

The forms of :mod:`zerocalc.in_network`, executed: with ``nvls`` the node's NVSwitch reduces, with
``sharp`` the network's switches do (NVIDIA NVLink SHARP / InfiniBand SHARP; NCCL's NVLS and CollNet
algorithms). A rank hands its whole vector to the switch (:meth:`World.to_switch`), the switch adds
the N contributions in float64 in group order, and hands back the sum (:meth:`World.from_switch`):

* reduce-scatter: each rank sends its vector once and receives the sum of its own chunk;
* all-gather: each rank sends its piece once and the switch writes every piece to every rank;
* all-reduce: with ``nvls`` the two above at once (each rank receives its reduced chunk and stores it
  to all, as ``multimem.ld_reduce`` + ``multimem.st`` do); with ``sharp`` the rank sends its vector
  once and receives the whole sum once.

A world group spanning nodes runs in two levels: reduce-scatter in the node, the node's 1/G share
across nodes, all-gather in the node; a level whose switch is missing runs as the ring of
:mod:`zerocalc.sim.world`. The update the ranks compute is the data-parallel one (only the order of
the float64 additions changes); the bytes each rank sends and receives per link are counted.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from zerocalc.sim.world import Item, World, all_gather, all_reduce, chunk_bounds, reduce_scatter

__all__ = ["all_gather_in_network", "all_reduce_in_network", "reduce_scatter_in_network"]


def _sum(parts: Sequence[np.ndarray]) -> np.ndarray:
    out = np.array(parts[0], dtype=np.float64)
    for x in parts[1:]:
        out = out + x
    return out


def _switch_reduce_scatter(world: World, group: Sequence[int], vectors: Sequence[np.ndarray],
                           bounds: Sequence[tuple[int, int]], link: str) -> list[np.ndarray]:
    into = [world.to_switch(r, np.asarray(v, dtype=np.float64), link)
            for r, v in zip(group, vectors, strict=True)]
    return [world.from_switch(r, _sum([v[a:b] for v in into]), link)
            for r, (a, b) in zip(group, bounds, strict=True)]


def _switch_all_gather(world: World, group: Sequence[int], pieces: Sequence[Item],
                       link: str) -> list[list[Item]]:
    held = [world.to_switch(r, piece, link) for r, piece in zip(group, pieces, strict=True)]
    return [[world.from_switch(r, piece, link) for piece in held] for r in group]


def _tier(world: World, group_kind: str, p: int, op: str) -> str:
    tier = world.switch_tier(group_kind, p, op)
    if tier is None:
        raise RuntimeError(f"no in-network {op} for a {group_kind} group of {p}")
    return tier


def _has(world: World, level: str) -> bool:
    """Whether one level of a two-level collective has its switch: NVLS in the node, SHARP across."""
    return ("nvls" if level == "intra" else "sharp") in world.in_network


def _level_reduce_scatter(world, gr, vectors, bounds, level):
    if _has(world, level) and len(gr) > 1:
        return _switch_reduce_scatter(world, gr, vectors, bounds, level)
    return reduce_scatter(world, gr, vectors, bounds, group_kind=level, ring=True)


def _level_all_gather(world, gr, pieces, level):
    if _has(world, level) and len(gr) > 1:
        return _switch_all_gather(world, gr, pieces, level)
    return all_gather(world, gr, pieces, group_kind=level, ring=True)


def _level_all_reduce(world, gr, vectors, level):
    if _has(world, level) and len(gr) > 1:
        return _single_all_reduce(world, gr, vectors, level)
    return all_reduce(world, gr, vectors, group_kind=level, ring=True)


def _single_all_reduce(world: World, group: Sequence[int], inputs: Sequence[np.ndarray], link: str):
    """One switch: SHARP sums the whole vectors once; NVLS reduce-scatters and multicasts the chunks."""
    if link == "inter":
        into = [world.to_switch(r, np.asarray(v, dtype=np.float64), "inter")
                for r, v in zip(group, inputs, strict=True)]
        total = _sum(into)
        return [world.from_switch(r, total, "inter") for r in group]
    shards = _switch_reduce_scatter(world, group, inputs, chunk_bounds(len(inputs[0]), len(group)), "intra")
    return [np.concatenate(h) for h in _switch_all_gather(world, group, shards, "intra")]


def reduce_scatter_in_network(world: World, group: Sequence[int], inputs: Sequence[np.ndarray],
                              bounds: Sequence[tuple[int, int]], group_kind: str) -> list[np.ndarray]:
    """Reduce-scatter through the switch; group position i ends with the sum of ``bounds[i]``."""
    tier = _tier(world, group_kind, len(group), "reduce_scatter")
    if tier != "two-level":
        return _switch_reduce_scatter(world, group, inputs, bounds, tier)
    # Two levels over nodes of G consecutive ranks: in the node, local rank j reduces the elements that
    # the ranks with local index j own (in rank order); across nodes, those are split among them.
    g, n_nodes = world.g, world.n // world.g
    idx = [np.concatenate([np.arange(*bounds[m * g + j]) for m in range(n_nodes)]) for j in range(g)]
    perm = np.concatenate(idx)
    cuts = np.cumsum([0] + [len(i) for i in idx])
    local = [(int(cuts[j]), int(cuts[j + 1])) for j in range(g)]
    partial: dict[int, np.ndarray] = {}
    for gr in world.groups("intra"):
        out = _level_reduce_scatter(world, gr, [np.asarray(inputs[group.index(r)])[perm] for r in gr], local,
                                    "intra")
        partial.update(zip(gr, out, strict=True))
    result: dict[int, np.ndarray] = {}
    for gr in world.groups("inter"):
        sizes = np.cumsum([0] + [bounds[group.index(r)][1] - bounds[group.index(r)][0] for r in gr])
        out = _level_reduce_scatter(world, gr, [partial[r] for r in gr],
                                    [(int(sizes[i]), int(sizes[i + 1])) for i in range(len(gr))], "inter")
        result.update(zip(gr, out, strict=True))
    return [result[r] for r in group]


def all_gather_in_network(world: World, group: Sequence[int], pieces: Sequence[Item],
                          group_kind: str) -> list[list[Item]]:
    """All-gather by multicast; returns, per group position, the p pieces in group order."""
    tier = _tier(world, group_kind, len(group), "all_gather")
    if tier != "two-level":
        return _switch_all_gather(world, group, pieces, tier)
    g, n_nodes = world.g, world.n // world.g
    piece = {r: pieces[group.index(r)] for r in group}
    # across nodes first: rank (k, j) collects the pieces of every rank with local index j ...
    bundle: dict[int, list[Item]] = {}
    for gr in world.groups("inter"):
        got = _level_all_gather(world, gr, [piece[r] for r in gr], "inter")
        bundle.update(zip(gr, got, strict=True))
    # ... then in the node, one all-gather per source node m: every rank gets piece m·G + j for all j
    have: dict[int, list[Item | None]] = {r: [None] * world.n for r in group}
    for gr in world.groups("intra"):
        for m in range(n_nodes):
            got = _level_all_gather(world, gr, [bundle[r][m] for r in gr], "intra")
            for r, row in zip(gr, got, strict=True):
                for j, item in enumerate(row):
                    have[r][m * g + j] = item
    return [[have[r][q] for q in group] for r in group]  # type: ignore[misc]


def all_reduce_in_network(world: World, group: Sequence[int], inputs: Sequence[np.ndarray],
                          group_kind: str) -> list[np.ndarray]:
    """All-reduce through the switch (module docstring); every rank ends with the whole sum."""
    tier = _tier(world, group_kind, len(group), "all_reduce")
    if tier != "two-level":
        return _single_all_reduce(world, group, inputs, tier)
    # two levels: reduce-scatter in the node, all-reduce of the node's 1/G share across nodes, all-gather
    local = chunk_bounds(len(inputs[0]), world.g)
    shard: dict[int, np.ndarray] = {}
    for gr in world.groups("intra"):
        out = _level_reduce_scatter(world, gr, [inputs[group.index(r)] for r in gr], local, "intra")
        shard.update(zip(gr, out, strict=True))
    for gr in world.groups("inter"):
        out = _level_all_reduce(world, gr, [shard[r] for r in gr], "inter")
        shard.update(zip(gr, out, strict=True))
    full: dict[int, np.ndarray] = {}
    for gr in world.groups("intra"):
        got = _level_all_gather(world, gr, [shard[r] for r in gr], "intra")
        full.update((r, np.concatenate(row)) for r, row in zip(gr, got, strict=True))
    return [full[r] for r in group]
