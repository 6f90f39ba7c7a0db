"""Simulated ranks in one process and the collectives they run, counting every bit they send.

A :class:`World` moves real array slices between ``N`` ranks with ring collectives (all-reduce,
reduce-scatter, all-gather), pipelined chains (broadcast, reduce) and a pairwise all-to-all. Vectors
that do not divide by the group size are split as ``numpy.array_split`` does (the first ``n mod p``
chunks one element longer), so chunks are uneven and counts are exact integers.

Byte accounting: wire bytes are ``nbytes`` of what is sent: float64 arrays are 8 bytes per element
(:data:`WIRE_ELEM_BYTES`); a quantised :class:`~zerocalc.sim.quantize.Packet` counts its payload
(``bits × elements / 8``) and its scales apart as metadata. Every ring collective, chain and all-to-all
here sends exactly ``(p-1)·n`` elements in total, so the mean over the ranks of a group (the
convention of Thakur, Rabenseifner & Gropp 2005 that the symbolic model uses) is an exact rational.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import contextmanager

import numpy as np

from zerocalc.sim.quantize import Packet

__all__ = [
    "SWITCH_OPS",
    "WIRE_ELEM_BYTES",
    "Item",
    "World",
    "all_gather",
    "all_reduce",
    "all_to_all",
    "broadcast",
    "chunk_bounds",
    "reduce",
    "reduce_scatter",
]

#: The collectives a switch can run (NVLS and CollNet: all-reduce, reduce-scatter, all-gather; NCCL
#: ``src/graph/tuning.cc``); broadcast, reduce and all-to-all stay rings.
SWITCH_OPS = frozenset({"all_reduce", "reduce_scatter", "all_gather"})
#: Bytes per element of an unquantised message: the simulation moves float64 arrays.
WIRE_ELEM_BYTES = 8


Item = np.ndarray | Packet


class World:
    """N simulated ranks, grouped into nodes of ``gpus_per_node``, that count what they send.

    Groups (names as in :mod:`zerocalc.schemes`): ``world`` (all N ranks), ``intra`` (the G ranks of one
    node: ranks ``m·G … m·G+G-1``), ``inter`` (one rank per node with the same local index).
    Every :meth:`send` copies the data (no aliasing between ranks) and adds its bits to the sender's
    and receiver's counters, and to the sender's entry under the outermost open collective.
    """

    def __init__(self, n: int, gpus_per_node: int = 1, in_network: frozenset[str] = frozenset(),
                 switch_ops: frozenset[str] = SWITCH_OPS) -> None:
        self.n, self.g = n, gpus_per_node
        #: kinds of in-network reduction the switches offer (:data:`zerocalc.in_network.KINDS`)
        self.in_network = frozenset(in_network)
        #: the collectives that go through the switch when it can (the others run as rings)
        self.switch_ops = frozenset(switch_ops)
        self.sent_bits = [0] * n
        self.recv_bits = [0] * n
        self.meta_bits = [0] * n
        #: (op, group, purpose) -> bits sent per rank
        self.by_phase: dict[tuple[str, str, str], list[int]] = {}
        #: (link, direction) -> bits per rank; link ``intra`` (inside the node) or ``inter`` (across
        #: nodes), direction ``sent`` or ``received``
        self.link_bits: dict[tuple[str, str], list[int]] = {
            (link, d): [0] * n for link in ("intra", "inter") for d in ("sent", "received")}
        self._ctx: tuple[str, str, str] | None = None

    def node(self, rank: int) -> int:
        return rank // self.g

    def groups(self, kind: str) -> list[list[int]]:
        n, g = self.n, self.g
        if kind == "world":
            return [list(range(n))]
        if kind == "intra":
            return [list(range(m * g, m * g + g)) for m in range(n // g)]
        if kind == "inter":
            return [list(range(j, n, g)) for j in range(g)]
        raise ValueError(kind)

    @contextmanager
    def collective(self, op: str, group: str, purpose: str):
        """Attribute the sends inside to one collective call; nested calls keep the outer label."""
        outer = self._ctx
        if outer is None:
            self._ctx = (op, group, purpose)
            self.by_phase.setdefault(self._ctx, [0] * self.n)
        try:
            yield
        finally:
            self._ctx = outer

    def send(self, src: int, dst: int, item: Item) -> Item:
        if src == dst or self._ctx is None:
            raise RuntimeError("send outside a collective or to self")
        if isinstance(item, Packet):
            bits, meta, out = item.payload_bits, item.meta_bits, item.copy()
        else:
            bits, meta, out = int(item.nbytes) * 8, 0, item.copy()
        link = "intra" if self.node(src) == self.node(dst) else "inter"
        self._count_sent(src, bits, meta, link)
        self._count_received(dst, bits, link)
        return out

    def _count_sent(self, src: int, bits: int, meta: int, link: str) -> None:
        self.sent_bits[src] += bits
        self.meta_bits[src] += meta
        self.by_phase[self._ctx][src] += bits  # type: ignore[index]
        self.link_bits[(link, "sent")][src] += bits

    def _count_received(self, dst: int, bits: int, link: str) -> None:
        self.recv_bits[dst] += bits
        self.link_bits[(link, "received")][dst] += bits

    def to_switch(self, src: int, item: Item, link: str) -> Item:
        """Rank ``src`` sends ``item`` into the switch of ``link`` (``intra``: the NVSwitch, ``inter``: the
        network's); the switch is no rank, so only the sender's counters grow."""
        if self._ctx is None:
            raise RuntimeError("send outside a collective")
        packet = isinstance(item, Packet)
        bits, meta = (item.payload_bits, item.meta_bits) if packet else (int(item.nbytes) * 8, 0)
        self._count_sent(src, bits, meta, link)
        return item.copy()

    def from_switch(self, dst: int, item: Item, link: str) -> Item:
        """The switch of ``link`` delivers ``item`` (a sum it made, or a multicast copy) to rank ``dst``."""
        if self._ctx is None:
            raise RuntimeError("send outside a collective")
        bits = item.payload_bits if isinstance(item, Packet) else int(item.nbytes) * 8
        self._count_received(dst, bits, link)
        return item.copy()

    def switch_tier(self, group_kind: str, p: int, op: str | None = None) -> str | None:
        """How a reduction on ``group_kind`` of ``p`` ranks runs: ``"intra"`` (one NVLS switch),
        ``"inter"`` (one SHARP switch), ``"two-level"`` (a world group spanning nodes, with some switch),
        or ``None`` (a ring)."""
        if p == 1 or not self.in_network or (op is not None and op not in self.switch_ops):
            return None
        nvls, sharp = "nvls" in self.in_network, "sharp" in self.in_network
        if group_kind == "intra" or (group_kind == "world" and self.n <= self.g):
            return "intra" if nvls else None
        if group_kind == "inter":
            return "inter" if sharp else None
        return "two-level"


def chunk_bounds(n: int, p: int) -> list[tuple[int, int]]:
    """``numpy.array_split`` boundaries: p chunks, the first ``n mod p`` one element longer."""
    q, r = divmod(n, p)
    bounds, a = [], 0
    for i in range(p):
        b = a + q + (1 if i < r else 0)
        bounds.append((a, b))
        a = b
    return bounds


def reduce_scatter(world: World, group: Sequence[int], inputs: Sequence[np.ndarray],
                   bounds: Sequence[tuple[int, int]] | None = None, *, group_kind: str = "world",
                   purpose: str = "gradient reduction", ring: bool = False) -> list[np.ndarray]:
    """Ring reduce-scatter (Patarasuk & Yuan 2009): p-1 steps, in step s rank i sends its running sum of
    chunk ``i-s-1`` to rank i+1, which adds its own. Rank i ends with the full sum of chunk i.
    Each chunk travels p-1 hops: ``(p-1)·n`` elements in total, ``(p-1)/p·n`` per rank on average."""
    p = len(group)
    bounds = list(bounds) if bounds is not None else chunk_bounds(len(inputs[0]), p)
    if not ring and world.switch_tier(group_kind, p, "reduce_scatter"):
        from zerocalc.sim.switch import reduce_scatter_in_network

        with world.collective("reduce_scatter", group_kind, purpose):
            return reduce_scatter_in_network(world, group, inputs, bounds, group_kind)
    acc = [[np.array(inp[a:b], dtype=np.float64) for a, b in bounds] for inp in inputs]
    with world.collective("reduce_scatter", group_kind, purpose):
        for s in range(p - 1):
            msgs = []
            for i in range(p):
                c = (i - s - 1) % p
                msgs.append((c, (i + 1) % p, world.send(group[i], group[(i + 1) % p], acc[i][c])))
            for c, j, data in msgs:
                acc[j][c] = acc[j][c] + data
    return [acc[i][i] for i in range(p)]


def all_gather(world: World, group: Sequence[int], pieces: Sequence[Item], *, group_kind: str = "world",
               purpose: str = "parameter all-gather", ring: bool = False) -> list[list[Item]]:
    """Ring all-gather: in step s rank i forwards piece ``i-s`` to rank i+1. Returns, per rank, the p
    pieces in group order (quantised pieces stay quantised: a ring forwards what it received)."""
    p = len(group)
    if not ring and world.switch_tier(group_kind, p, "all_gather"):
        from zerocalc.sim.switch import all_gather_in_network

        with world.collective("all_gather", group_kind, purpose):
            return all_gather_in_network(world, group, pieces, group_kind)
    have: list[list[Item | None]] = [[None] * p for _ in range(p)]
    for i in range(p):
        have[i][i] = pieces[i]
    with world.collective("all_gather", group_kind, purpose):
        for s in range(p - 1):
            msgs = []
            for i in range(p):
                c = (i - s) % p
                msgs.append((c, (i + 1) % p, world.send(group[i], group[(i + 1) % p], have[i][c])))
            for c, j, data in msgs:
                have[j][c] = data
    return have  # type: ignore[return-value]


def all_reduce(world: World, group: Sequence[int], inputs: Sequence[np.ndarray], *,
               group_kind: str = "world", purpose: str = "gradient reduction",
               ring: bool = False) -> list[np.ndarray]:
    """Ring all-reduce = ring reduce-scatter + ring all-gather: ``2(p-1)/p·n`` per rank. With in-network
    reduction (:mod:`zerocalc.sim.switch`) the switch sums instead."""
    if not ring and world.switch_tier(group_kind, len(group), "all_reduce"):
        from zerocalc.sim.switch import all_reduce_in_network

        with world.collective("all_reduce", group_kind, purpose):
            return all_reduce_in_network(world, group, inputs, group_kind)
    with world.collective("all_reduce", group_kind, purpose):
        shards = reduce_scatter(world, group, inputs, group_kind=group_kind, purpose=purpose, ring=True)
        have = all_gather(world, group, shards, group_kind=group_kind, purpose=purpose, ring=True)
    return [np.concatenate(h) for h in have]


def broadcast(world: World, group: Sequence[int], root: int, item: np.ndarray, *, group_kind: str = "world",
              purpose: str = "parameter broadcast") -> list[np.ndarray]:
    """Chain broadcast from group position ``root`` along the ring (pipelined in segments in practice,
    which changes latency, not bytes): ranks root … root+p-2 each send n; ``(p-1)/p·n`` on average."""
    p = len(group)
    out: list[np.ndarray | None] = [None] * p
    out[root] = item
    with world.collective("broadcast", group_kind, purpose):
        for k in range(p - 1):
            i, j = (root + k) % p, (root + k + 1) % p
            out[j] = world.send(group[i], group[j], out[i])  # type: ignore[arg-type]
    return out  # type: ignore[return-value]


def reduce(world: World, group: Sequence[int], root: int, inputs: Sequence[np.ndarray], *,
           group_kind: str = "world", purpose: str = "gradient reduction") -> np.ndarray:
    """Chain reduce to group position ``root``: the partial sum starts at root+1 and travels around the
    ring, each rank adding its input, ending at root. p-1 sends of n; ``(p-1)/p·n`` on average."""
    p = len(group)
    if p == 1:
        return np.array(inputs[0], dtype=np.float64)
    with world.collective("reduce", group_kind, purpose):
        partial = np.array(inputs[(root + 1) % p], dtype=np.float64)
        for k in range(1, p):
            i, j = (root + k) % p, (root + k + 1) % p
            partial = world.send(group[i], group[j], partial) + inputs[j]  # type: ignore[operator]
    return partial


def all_to_all(world: World, group: Sequence[int], send: Sequence[Sequence[Item]], *,
               group_kind: str = "world", purpose: str = "gradient reduction") -> list[list[Item]]:
    """Pairwise all-to-all: rank i sends ``send[i][j]`` to rank j for every j ≠ i; ``recv[j][i]``.
    A rank sends its whole buffer except its own piece: ``(p-1)/p·n`` on average over ranks."""
    p = len(group)
    recv: list[list[Item | None]] = [[None] * p for _ in range(p)]
    with world.collective("all_to_all", group_kind, purpose):
        for s in range(p):
            for i in range(p):
                j = (i + s) % p
                recv[j][i] = send[i][j] if i == j else world.send(group[i], group[j], send[i][j])
    return recv  # type: ignore[return-value]
