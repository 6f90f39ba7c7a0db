"""In-network reduction: the switch sums, so a rank sends its vector once and receives the sum once.

With a ring, every rank forwards partial sums: an all-reduce sends 2(p-1)/p·n per rank (Patarasuk &
Yuan, JPDC 2009), the least any scheme of point-to-point messages can send. A switch that reduces
changes the count. Two kinds exist (``KINDS``):

* ``nvls``: NVLink SHARP in an NVSwitch 3 or later (H100 and later GPUs), NCCL's NVLS algorithm. For a
  reduce-scatter the switch reads every rank's buffer and hands each rank the sum of its chunk
  (``multimem.ld_reduce``); for an all-gather a rank stores its chunk once and the switch writes it to
  every rank (``multimem.st``); an all-reduce is the two at once. NCCL ``src/graph/tuning.cc``
  (v2.30.7, ``ncclTopoTuneModel``): "AllReduce pipelines two operations" (NVLS all-reduce bus bandwidth
  ×2, converted to algorithm bandwidth with the ring's nRanks/(2(nRanks-1))), while NVLS reduce-scatter
  and all-gather get ×(ppn-1)/ppn and no more: the switch halves an all-reduce, not its halves.
* ``sharp``: InfiniBand SHARP in the network switches, NCCL's CollNet (Direct/Chain) through the SHARP
  plugin: each node sends its share of the vector up the aggregation tree once and receives the sum
  once (NVIDIA SHARP documentation, "Scalable Hierarchical Aggregation and Reduction Protocol";
  Graham et al., COMHPC 2016).

Bytes are per rank, averaged over the ranks of the group, per LINK TYPE and DIRECTION:

* ``intra``: the rank's port into its node (NVLink / NVSwitch, or PCIe);
* ``inter``: the rank's share of its node's network (what its traffic puts on the node's NICs);
* ``sent`` out of the rank, ``received`` into it. A ring sends what it receives; a switch does not
  (a reduce-scatter sends n into the switch and receives n/p; a multicast all-gather the reverse), so
  the two directions are kept apart.

Forms, for a vector of n bytes on p ranks (one switch domain):

============== ============================ ============================
collective     sent                         received
============== ============================ ============================
all_reduce     nvls: n + n/p; sharp: n      nvls: n + n/p; sharp: n
reduce_scatter n                            n/p
all_gather     n/p                          n
============== ============================ ============================

(NVLS's all-reduce returns each rank's reduced chunk to it before the multicast store, hence the
extra n/p each way.) Broadcast, reduce and all-to-all have no in-network form here (NCCL runs them as
rings): they keep the ring's bytes. A group spanning nodes runs in two levels: reduce-scatter in the
node, the node's 1/G share across nodes, all-gather in the node (NCCL's NVLS Tree / CollNet); a level
whose switch kind is missing runs as a ring.

Time: the stages of an in-network collective are pipelined in chunks (NCCL's NVLS and CollNet
kernels), so the bandwidth term is the busiest link direction: max over link types of
max(sent, received) × β of that link (β_intra = 1/bw_intra; β_inter = G/bw_inter, one rank's share of
the node), plus one α per stage (a ring stage keeps its p-1 steps). The reduction arithmetic is
the switch's: no γ.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from functools import cache

import sympy

from zerocalc import symbols as S
from zerocalc.collectives import Algorithm, Collective, as_collective, bytes_sent_per_rank
from zerocalc.errors import ConfigError

__all__ = [
    "KINDS",
    "SWITCH_OPS",
    "LinkBytes",
    "collective_link_bytes",
    "in_network_time_s",
    "parse_kinds",
    "scheme_in_network_time_s",
    "scheme_link_bytes",
]

#: The kinds of in-network reduction: NVLink SHARP in the node's NVSwitch, InfiniBand SHARP across nodes.
KINDS: tuple[str, ...] = ("nvls", "sharp")

_ZERO = sympy.Integer(0)
_REDUCING = (Collective.ALL_REDUCE, Collective.REDUCE_SCATTER, Collective.ALL_GATHER)


def parse_kinds(kinds: Iterable[str] | str | None, *, option: str = "--in-network") -> frozenset[str]:
    """``"nvls+sharp"``, ``"nvls,sharp"`` or an iterable of names → a set of :data:`KINDS`; ``None`` or
    ``""`` → empty (rings only). An unknown kind is a :class:`ConfigError` naming ``option``."""
    if kinds is None:
        return frozenset()
    if isinstance(kinds, str):
        kinds = [k for part in kinds.replace("+", ",").split(",") if (k := part.strip().lower())]
    out = frozenset(str(k).lower() for k in kinds)
    bad = sorted(out - set(KINDS))
    if bad:
        raise ConfigError(f"unknown in-network reduction {bad[0]!r} (known: {', '.join(KINDS)})",
                          option=option)
    return out


@dataclass(frozen=True)
class LinkBytes:
    """Bytes one rank moves per step (or per call) by link type and direction, averaged over ranks."""

    intra_sent: sympy.Expr = _ZERO
    intra_received: sympy.Expr = _ZERO
    inter_sent: sympy.Expr = _ZERO
    inter_received: sympy.Expr = _ZERO

    def __add__(self, other: LinkBytes) -> LinkBytes:
        return LinkBytes(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def scaled(self, k) -> LinkBytes:
        return LinkBytes(*(k * getattr(self, f.name) for f in fields(self)))

    @property
    def sent(self) -> sympy.Expr:
        """Bytes out of the rank on both link types: the quantity the ring model calls bytes per rank."""
        return self.intra_sent + self.inter_sent

    @property
    def received(self) -> sympy.Expr:
        return self.intra_received + self.inter_received

    def as_dict(self) -> dict[str, sympy.Expr]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _one_tier(tier: str, sent, received) -> LinkBytes:
    return LinkBytes(intra_sent=sent, intra_received=received) if tier == "intra" else \
        LinkBytes(inter_sent=sent, inter_received=received)


def _switch(kind: str, c: Collective, n, p) -> tuple[sympy.Expr, sympy.Expr]:
    """(sent, received) per rank of one in-network collective on one switch (module docstring table);
    nothing on a group of one rank (NCCL: a one-rank communicator moves nothing, ``enqueue.cc``)."""
    if c is Collective.ALL_REDUCE:
        both = n + n / p if kind == "nvls" else n
        sent, received = both, both
    elif c is Collective.REDUCE_SCATTER:
        sent, received = n, n / p
    else:
        sent, received = n / p, n  # all-gather: multicast
    alone = sympy.Le(p, 1)
    return sympy.Piecewise((_ZERO, alone), (sent, True)), sympy.Piecewise((_ZERO, alone), (received, True))


def _stage(c: Collective, n, p, tier: str, kinds: frozenset[str]) -> tuple[LinkBytes, sympy.Expr]:
    """One level: the switch of ``tier`` when its kind is available, else a ring. (bytes, α steps; no
    step on a group of one rank)."""
    kind = "nvls" if tier == "intra" else "sharp"
    if kind in kinds and c in _REDUCING:
        s, r = _switch(kind, c, n, p)
        stages = 2 if c is Collective.ALL_REDUCE and kind == "nvls" else 1
        return _one_tier(tier, s, r), sympy.Piecewise((_ZERO, sympy.Le(p, 1)), (stages, True))
    b = bytes_sent_per_rank(c, n, p, Algorithm.RING)
    steps = 2 * (p - 1) if c is Collective.ALL_REDUCE else p - 1
    return _one_tier(tier, b, b), steps


def _group_shape(group) -> tuple[str, sympy.Expr]:
    """(``intra`` | ``inter`` | ``spanning``, ranks) of a scheme group (:class:`zerocalc.schemes.Group`)."""
    name = getattr(group, "value", group)
    if name == "intra":
        return "intra", S.G
    if name == "inter":
        return "inter", S.N / S.G
    if name == "world":
        return "spanning", S.N
    if name == "shard":  # HSDP's shard group of H ranks
        return "spanning", S.H  # type: ignore[attr-defined]
    if name == "replicate":
        return "inter", S.N / S.H  # type: ignore[attr-defined]
    raise ValueError(f"unknown group {group!r}")


def _ring_spanning(c: Collective, n, p) -> LinkBytes:
    """A flat ring over p ranks, nodes of G consecutive ranks: of a rank's bytes, 1/G cross the node
    (one hop in G leaves the node; NCCL builds its rings node by node), all of them on one node."""
    b = bytes_sent_per_rank(c, n, p, Algorithm.RING)
    one_node = p <= S.G
    inter = sympy.Piecewise((_ZERO, one_node), (b / S.G, True))
    return LinkBytes(b - inter, b - inter, inter, inter)


def _levels(c: Collective, n, p) -> list[tuple[Collective, sympy.Expr, sympy.Expr, str]]:
    """The two-level form of a collective over p ranks in nodes of G (module docstring)."""
    g, m = S.G, p / S.G
    return {
        Collective.ALL_REDUCE: [(Collective.REDUCE_SCATTER, n, g, "intra"),
                                (Collective.ALL_REDUCE, n / g, m, "inter"),
                                (Collective.ALL_GATHER, n, g, "intra")],
        Collective.REDUCE_SCATTER: [(Collective.REDUCE_SCATTER, n, g, "intra"),
                                    (Collective.REDUCE_SCATTER, n / g, m, "inter")],
        Collective.ALL_GATHER: [(Collective.ALL_GATHER, n / g, m, "inter"),
                                (Collective.ALL_GATHER, n, g, "intra")],
    }[c]


def _in_network(c: Collective, n, group, kinds: frozenset[str]) -> tuple[LinkBytes, sympy.Expr]:
    """(bytes, α_intra steps + α_inter steps as one expression of the α symbols) under ``kinds``."""
    tier, p = _group_shape(group)
    alpha = {"intra": S.alpha_intra, "inter": S.alpha_inter}
    if tier != "spanning":
        lb, steps = _stage(c, n, p, tier, kinds)
        return lb, steps * alpha[tier]
    if c not in _REDUCING:
        b = _ring_spanning(c, n, p)
        return b, (p - 1) * S.alpha_inter
    # one node: the whole group is one NVSwitch domain
    lb1, st1 = _stage(c, n, p, "intra", kinds)
    total, lat = LinkBytes(), _ZERO
    for sc, sn, sp, t in _levels(c, n, p):
        lb, st = _stage(sc, sn, sp, t, kinds)
        total, lat = total + lb, lat + st * alpha[t]
    one_node = p <= S.G
    pick = lambda a, b: sympy.Piecewise((a, one_node), (b, True))  # noqa: E731 - local shorthand
    merged = LinkBytes(*(pick(getattr(lb1, f.name), getattr(total, f.name)) for f in fields(LinkBytes)))
    return merged, pick(st1 * S.alpha_intra, lat)


def collective_link_bytes(collective: Collective | str, n_bytes, group, kinds=None) -> LinkBytes:
    """Bytes per rank by link type and direction of one call of ``collective`` on ``group`` (a
    :class:`zerocalc.schemes.Group` or its name), ``n_bytes`` the full vector (as in
    :mod:`zerocalc.collectives`). ``kinds`` empty or ``None``: rings (a group spanning nodes as one
    flat ring); otherwise in-network where the kind of that level is available."""
    c, ks = as_collective(collective), parse_kinds(kinds)
    n = sympy.sympify(n_bytes)
    if not ks:
        tier, p = _group_shape(group)
        if tier == "spanning":
            return _ring_spanning(c, n, p)
        b = bytes_sent_per_rank(c, n, p, Algorithm.RING)
        return _one_tier(tier, b, b)
    return _in_network(c, n, group, ks)[0]


def in_network_time_s(collective: Collective | str, n_bytes, group, kinds) -> sympy.Expr:
    """Seconds of one call under in-network reduction: α per stage plus the busiest link direction
    (module docstring), on the link symbols of :mod:`zerocalc.symbols`."""
    c, ks = as_collective(collective), parse_kinds(kinds)
    if not ks:
        raise ConfigError("name at least one in-network reduction (nvls, sharp)", option="--in-network")
    lb, latency = _in_network(c, sympy.sympify(n_bytes), group, ks)
    beta_intra, beta_inter = 1 / S.bw_intra, S.G / S.bw_inter
    return latency + sympy.Max(sympy.Max(lb.intra_sent, lb.intra_received) * beta_intra,
                               sympy.Max(lb.inter_sent, lb.inter_received) * beta_inter)


def _phase_parts(phase):
    """(collective, full vector bytes, group, calls per step) of a :class:`zerocalc.schemes.Phase`."""
    runs = phase.runs() if hasattr(phase, "runs") else 1
    return phase.collective, phase.elements * phase.elem_bytes, phase.group, runs * phase.calls


#: The collectives a switch runs (NCCL's NVLS and CollNet algorithms cover these three, ``tuning.cc``).
SWITCH_OPS: frozenset[str] = frozenset(c.value for c in _REDUCING)


def _ops(ops) -> frozenset[str]:
    return SWITCH_OPS if ops is None else frozenset(as_collective(o).value for o in ops)


def scheme_link_bytes(scheme, kinds=None, ops=None) -> LinkBytes:
    """Bytes per rank per step by link type and direction of a scheme (name or
    :class:`zerocalc.schemes.Scheme`): the sum over its phases of calls × :func:`collective_link_bytes`.
    ``ops`` (collective names; default all of :data:`SWITCH_OPS`) go through the switch, the rest as
    rings (NCCL picks the algorithm per call: an all-gather through NVLS is no faster than a ring)."""
    from zerocalc.schemes import get_scheme

    return _scheme_link_bytes(get_scheme(scheme), parse_kinds(kinds), _ops(ops))


@cache
def _scheme_link_bytes(scheme, kinds: frozenset[str], through: frozenset[str]) -> LinkBytes:
    total = LinkBytes()
    for ph in scheme.phases:
        c, n, group, calls = _phase_parts(ph)
        ks = kinds if c.value in through else None
        total = total + collective_link_bytes(c, n, group, ks).scaled(calls)
    return total


def scheme_in_network_time_s(scheme, kinds, ops=None) -> sympy.Expr:
    """Step communication seconds of a scheme under in-network reduction of ``ops`` (as in
    :func:`scheme_link_bytes`), phases one after another; the other phases keep the ring's time."""
    from zerocalc.schemes import get_scheme

    return _scheme_time(get_scheme(scheme), parse_kinds(kinds), _ops(ops))


@cache
def _scheme_time(scheme, kinds: frozenset[str], through: frozenset[str]) -> sympy.Expr:
    total = _ZERO
    for ph in scheme.phases:
        c, n, group, calls = _phase_parts(ph)
        if c.value in through:
            total += calls * in_network_time_s(c, n, group, kinds)
        else:
            total += ph.time_s(Algorithm.RING)
    return total
