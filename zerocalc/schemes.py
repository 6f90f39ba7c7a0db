"""Sharding schemes as ordered lists of collectives per training step.

Each :class:`Scheme` is the sequence of collective calls one step issues (forward,
backward, optimizer step), with the message size of each call, its element width on the
wire and the process group it runs on. ``equivalent_to_dp`` says whether the resulting
update is exactly the data-parallel SGD/Adam update (ZeRO §2.1: the step uses the gradient
averaged over all ranks).

Volumes are per rank and per step; the ZeRO paper's figures (§7: 2Ψ, 2Ψ, 3Ψ) are these
expressions with (N-1)/N dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from functools import cache

import sympy

from zerocalc import symbols as S
from zerocalc.collectives import Algorithm, Collective, as_algorithm, bytes_sent_per_rank, time_s
from zerocalc.errors import UnknownNameError


class Group(StrEnum):
    """The process group a phase runs on."""

    WORLD = "world"  # all N ranks
    INTRA = "intra"  # the G ranks of one node
    INTER = "inter"  # the N/G ranks with the same local rank, one per node

    @property
    def size(self) -> sympy.Expr:
        """Ranks in the group: N, G or N/G."""
        return {Group.WORLD: S.N, Group.INTRA: S.G, Group.INTER: S.N / S.G}[self]


_ONE = sympy.Integer(1)


@dataclass(frozen=True)
class Phase:
    """One kind of collective call in a step.

    ``elements`` is the full vector of ONE call (Ψ for a whole-model all-reduce, Ψ/N for one
    shard's broadcast), ``elem_bytes`` the bytes per element on the wire, ``calls`` how many
    such calls a step makes.
    """

    collective: Collective
    elements: sympy.Expr
    elem_bytes: sympy.Expr
    group: Group
    calls: sympy.Expr = _ONE
    purpose: str = ""

    def _algorithm(self, algorithm: Algorithm | str) -> Algorithm:
        """``algorithm``, except that a one-tier group (intra or inter) has no hierarchy: ring there."""
        a = as_algorithm(algorithm)
        return Algorithm.RING if a is Algorithm.HIERARCHICAL and self.group is not Group.WORLD else a

    def bytes_per_rank(self, algorithm: Algorithm | str = Algorithm.RING) -> sympy.Expr:
        """Bytes one rank sends in this phase per step (all ``calls`` together)."""
        n = self.elements * self.elem_bytes
        a = self._algorithm(algorithm)
        return self.calls * bytes_sent_per_rank(self.collective, n, self.group.size, a, g=S.G)

    def time_s(self, algorithm: Algorithm | str = Algorithm.RING) -> sympy.Expr:
        """α-β-γ seconds of this phase per step on the two-level topology of :mod:`zerocalc.symbols`.

        Intra-node groups use (α_intra, 1/bw_intra). Inter-node groups run G at once, one per
        local rank, sharing the node's injection bandwidth: (α_inter, G/bw_inter). A world
        ring spanning nodes runs at the slower of one GPU's link and the node's injection
        bandwidth (NCCL spreads its rings over the node's NICs, one crossing per ring per
        node); other flat algorithms spanning nodes get the per-GPU share G/bw_inter. On one
        node (N ≤ G) everything is intra-node.
        """
        return _phase_time(self, self._algorithm(algorithm))

    def _time_s(self, a: Algorithm) -> sympy.Expr:
        n = self.elements * self.elem_bytes
        p = self.group.size
        b_intra, b_inter = 1 / S.bw_intra, S.G / S.bw_inter
        if self.group is not Group.WORLD:
            alpha, beta = (S.alpha_intra, b_intra) if self.group is Group.INTRA else (S.alpha_inter, b_inter)
            t = time_s(self.collective, n, p, a, alpha=alpha, beta=beta, gamma=S.gamma)
        elif a is Algorithm.HIERARCHICAL:
            t = time_s(self.collective, n, p, a, alpha=S.alpha_intra, beta=b_intra, gamma=S.gamma,
                       g=S.G, alpha_inter=S.alpha_inter, beta_inter=b_inter)
        else:
            one_node = S.N <= S.G
            alpha = sympy.Piecewise((S.alpha_intra, one_node), (S.alpha_inter, True))
            spanning = sympy.Max(b_intra, 1 / S.bw_inter) if a is Algorithm.RING else b_inter
            beta = sympy.Piecewise((b_intra, one_node), (spanning, True))
            t = time_s(self.collective, n, p, a, alpha=alpha, beta=beta, gamma=S.gamma)
        return self.calls * t


@cache
def _phase_time(phase: Phase, algorithm: Algorithm) -> sympy.Expr:
    return phase._time_s(algorithm)


@dataclass(frozen=True)
class Scheme:
    """A sharding scheme: its phases in step order and whether it computes the DP update.

    ``equivalent_to_dp`` is the answer for N > 1 ranks. ``exact_on_one_rank`` says whether a scheme
    that is not equivalent there becomes the data-parallel update at N = 1: with one rank there is
    no cross-rank sum, so skipping it (the colocated proposal) changes nothing, whereas quantising
    the values on the wire (ZeRO++) still rounds them. :meth:`equivalent_at` combines the two.
    """

    name: str
    title: str
    phases: tuple[Phase, ...]
    equivalent_to_dp: bool
    source: str
    exact_on_one_rank: bool = False

    def equivalent_at(self, n):
        """Whether the update equals data parallelism on ``n`` ranks (a number or a numpy array)."""
        import numpy as np

        one = np.asarray(n) == 1
        out = np.where(one, self.equivalent_to_dp or self.exact_on_one_rank, self.equivalent_to_dp)
        return bool(out) if out.ndim == 0 else out

    def bytes_per_rank(self, algorithm: Algorithm | str = Algorithm.RING) -> sympy.Expr:
        """Bytes one rank sends per step: the sum over phases of calls × bytes per call."""
        return sympy.Add(*(ph.bytes_per_rank(algorithm) for ph in self.phases))

    def time_s(self, algorithm: Algorithm | str = Algorithm.RING) -> sympy.Expr:
        """Step communication time in seconds: phases run one after another, no overlap with compute."""
        return sympy.Add(*(ph.time_s(algorithm) for ph in self.phases))


_b = S.b_comm
_W, _I, _X = Group.WORLD, Group.INTRA, Group.INTER
_AR, _RS, _AG = Collective.ALL_REDUCE, Collective.REDUCE_SCATTER, Collective.ALL_GATHER
_INT8, _INT4 = sympy.Integer(1), sympy.Rational(1, 2)

_GRAD_RS = Phase(_RS, S.Psi, _b, _W, purpose="gradient reduce-scatter onto shard owners")
_PARAM_AG = Phase(_AG, S.Psi, _b, _W, purpose="parameter all-gather after the sharded update")
_GRAD_AR = Phase(_AR, S.Psi, _b, _W, purpose="gradient all-reduce")
# ZeRO-3 and FSDP FULL_SHARD: parameters gathered for forward and again for backward, gradients scattered
_FULL_SHARD = (Phase(_AG, S.Psi, _b, _W, purpose="parameter all-gather (forward)"),
               Phase(_AG, S.Psi, _b, _W, purpose="parameter all-gather (backward)"),
               Phase(_RS, S.Psi, _b, _W, purpose="gradient reduce-scatter"))

_ALL = (
    Scheme(
        "dp", "Data parallel (DDP)", (_GRAD_AR,), True,
        "ZeRO (arXiv 1910.02054) §2.1, §7.1: all-reduce of the gradients, 2Ψ; "
        "Patarasuk & Yuan, JPDC 2009 for the 2(N-1)/N bound",
    ),
    Scheme(
        "zero1", "ZeRO stage 1, P_os (paper)", (_GRAD_RS, _PARAM_AG), True,
        "ZeRO (arXiv 1910.02054) §7.2.1: reduce-scatter Ψ + all-gather Ψ = 2Ψ, as data parallel",
    ),
    Scheme(
        "zero2", "ZeRO stage 2, P_os+g (paper)", (_GRAD_RS, _PARAM_AG), True,
        "ZeRO (arXiv 1910.02054) §5.2, §7.2.1: gradients reduced onto their shard owner "
        "(\"effectively a Reduce-Scatter\") + all-gather = 2Ψ",
    ),
    Scheme(
        "zero3", "ZeRO stage 3, P_os+g+p (paper)", _FULL_SHARD, True,
        "ZeRO (arXiv 1910.02054) §7.2.2: all-gather Ψ forward + all-gather Ψ backward + "
        "reduce-scatter Ψ = 3Ψ (1.5× data parallel)",
    ),
    Scheme(
        "colocated", "Colocated gradients (DeepSpeed #4582 proposal)", (_PARAM_AG,), False,
        "DeepSpeed issue #4582: skip the reduce-scatter, keep only the all-gather (Ψ). Each rank "
        "then updates its shard with its OWN micro-batch gradient, not the average over ranks "
        "(ZeRO §2.1), so the update is not data-parallel SGD; at N = 1 the own gradient is the "
        "average, and the scheme is the data-parallel update",
        exact_on_one_rank=True,
    ),
    Scheme(
        "deepspeed-zero12", "DeepSpeed ZeRO-1/2 as shipped (bucket all-reduce)",
        (Phase(_AR, S.Psi, _b, _W, purpose="gradient all-reduce of whole buckets"), _PARAM_AG), True,
        "deepspeed/runtime/zero/stage_1_and_2.py (use_multi_rank_bucket_allreduce, default true); "
        "DeepSpeed issues #5758, #6463; PR #7440 closed: all-reduce 2Ψ + all-gather Ψ = 3Ψ",
    ),
    Scheme(
        "deepspeed-zero2-reduce", "DeepSpeed ZeRO-2, one reduce per destination rank",
        (Phase(Collective.REDUCE, S.Psi / S.N, _b, _W, S.N,
               purpose="gradient reduce of each shard onto its owner"), _PARAM_AG), True,
        "deepspeed/runtime/zero/stage_1_and_2.py with use_multi_rank_bucket_allreduce=False: "
        "N reduces of Ψ/N + all-gather Ψ",
    ),
    Scheme(
        "torch-zero1", "PyTorch ZeroRedundancyOptimizer + DDP",
        (_GRAD_AR, Phase(Collective.BROADCAST, S.Psi / S.N, _b, _W, S.N,
                         purpose="parameter broadcast from each shard owner")), True,
        "torch.distributed.optim.ZeroRedundancyOptimizer; pytorch issue #69591: DDP all-reduce "
        "+ one broadcast per parameter shard from its owner",
    ),
    Scheme(
        "fsdp-full-shard", "PyTorch FSDP FULL_SHARD", _FULL_SHARD,
        True, "PyTorch FSDP (arXiv 2304.11277) §3: FULL_SHARD = all-gather ×2 + reduce-scatter = 3Ψ",
    ),
    Scheme(
        "fsdp-shard-grad-op", "PyTorch FSDP SHARD_GRAD_OP",
        (Phase(_AG, S.Psi, _b, _W, purpose="parameter all-gather (forward, kept for backward)"),
         Phase(_RS, S.Psi, _b, _W, purpose="gradient reduce-scatter")),
        True, "PyTorch FSDP (arXiv 2304.11277): SHARD_GRAD_OP = one all-gather + reduce-scatter = 2Ψ",
    ),
    Scheme(
        "fsdp-hybrid", "PyTorch FSDP HYBRID_SHARD",
        (Phase(_AG, S.Psi, _b, _I, purpose="parameter all-gather in the node (forward)"),
         Phase(_AG, S.Psi, _b, _I, purpose="parameter all-gather in the node (backward)"),
         Phase(_RS, S.Psi, _b, _I, purpose="gradient reduce-scatter in the node"),
         Phase(_AR, S.Psi / S.G, _b, _X, purpose="all-reduce of the Ψ/G gradient shard across nodes")),
        True,
        "PyTorch FSDP (arXiv 2304.11277) §3.2: FULL_SHARD inside a node of G, the Ψ/G gradient "
        "shard all-reduced across the N/G replicas. Derived cross-node bytes per rank: "
        "2(N/G-1)/(N/G)·Ψb/G = 2Ψb(N-G)/(NG); the paper prints 2M(W-1)/(GW), which does not vanish "
        "for one node (W = G), so zerocalc uses the derivation",
    ),
    Scheme(
        "zeropp", "ZeRO++ (qwZ + hpZ + qgZ)",
        (Phase(_AG, S.Psi, _INT8, _W, purpose="qwZ: int8 parameter all-gather (forward)"),
         Phase(_AG, S.Psi, _b, _I, purpose="hpZ: parameter all-gather from the in-node secondary copy "
               "(backward)"),
         Phase(Collective.ALL_TO_ALL, S.Psi, _INT4, _I,
               purpose="qgZ: int4 gradient all-to-all in the node, then local reduction"),
         Phase(Collective.ALL_TO_ALL, S.Psi / S.G, _INT4, _X,
               purpose="qgZ: int4 all-to-all of the node-reduced 1/G across nodes")),
        False,
        "ZeRO++ (Wang et al., arXiv 2306.10209) §3-4: cross-node volume 3M → 0.75M "
        "(qwZ 0.5M, hpZ 0, qgZ 0.25M, M = model bytes in fp16, counted per node). Quantised "
        "weights and gradients: the update is not bit-equal to data parallel; at N = 1 nothing is sent "
        "and so nothing is quantised, and the update is the data-parallel one. Block-quantisation "
        "scales (one per block of thousands of elements) are left out",
        exact_on_one_rank=True,
    ),
)

SCHEMES: dict[str, Scheme] = {s.name: s for s in _ALL}
SCHEME_NAMES: tuple[str, ...] = tuple(SCHEMES)


def get_scheme(name: str | Scheme) -> Scheme:
    """The scheme called ``name``; :class:`UnknownNameError` (exit 2 in the CLI) otherwise."""
    if isinstance(name, Scheme):
        return name
    try:
        return SCHEMES[name]
    except KeyError:
        pass
    try:  # names are case-insensitive: ZeRO2 is zero2
        return SCHEMES[str(name).strip().lower()]
    except KeyError:
        raise UnknownNameError("scheme", str(name), SCHEME_NAMES) from None
