"""The trees NCCL and RCCL build across nodes, and what a tree all-reduce puts on the busiest node's NICs.

Source: ``ncclGetBtree`` / ``ncclGetDtree`` (``src/graph/trees.cc``, the same in NVIDIA/nccl v2.4 to v2.30
and in ROCm/rccl, e.g. tag ``rocm-6.2.1``): node 0 roots a binary tree whose one child is the largest power
of two below the node count, each other node having up to two children; the second tree mirrors the first
(even node count) or shifts it by one node (odd). ``connectTrees`` (``src/graph/connect.cc``) puts the first
half of the channels on the first tree and the second half on the second, so each tree carries half the
buffer. A tree all-reduce sends a node's share to its parent once (reduce) and the result to each child once
(broadcast), so a node sends, on its NICs, half the buffer for each tree neighbour it has.
"""

from __future__ import annotations

from functools import cache


def btree(n_nodes: int, node: int) -> tuple[int, int, int]:
    """(parent, child 0, child 1) of ``node`` in ``ncclGetBtree``'s tree of ``n_nodes``; -1 for none."""
    bit = 1
    while bit < n_nodes:
        if bit & node:
            break
        bit <<= 1
    if node == 0:
        return -1, -1, (bit >> 1) if n_nodes > 1 else -1
    up = (node ^ bit) | (bit << 1)
    if up >= n_nodes:
        up = node ^ bit
    low = bit >> 1
    down0 = -1 if low == 0 else node - low
    down1 = -1 if low == 0 else node + low
    while down1 >= n_nodes:
        down1 = -1 if low == 0 else node + low
        low >>= 1
    return up, down0, down1


def dtree(n_nodes: int, node: int) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """``node``'s (parent, child 0, child 1) in each of ``ncclGetDtree``'s two trees of ``n_nodes``."""
    first = btree(n_nodes, node)
    if n_nodes % 2 == 1:
        shifted = btree(n_nodes, (node - 1 + n_nodes) % n_nodes)
        second = tuple(-1 if x == -1 else (x + 1) % n_nodes for x in shifted)
    else:
        mirrored = btree(n_nodes, n_nodes - 1 - node)
        second = tuple(-1 if x == -1 else n_nodes - 1 - x for x in mirrored)
    return first, second  # type: ignore[return-value]


@cache
def busiest_node_sends(n_nodes: int) -> float:
    """The bytes the busiest node sends on its NICs in a tree all-reduce, per byte of the buffer: half the
    buffer for each of its neighbours in the two trees (module docstring). 1 on two nodes, 1.5 on three,
    2 from four on; 0 on one node."""
    if n_nodes <= 1:
        return 0.0
    return max(0.5 * sum(x != -1 for tree in dtree(n_nodes, node) for x in tree) for node in range(n_nodes))
