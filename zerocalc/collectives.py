"""Per-rank bytes and α-β-γ time of each collective under each algorithm, as sympy expressions.

Conventions (shared with the trace readers):

* ``n_bytes`` is the size of the collective's FULL vector: the whole buffer of an
  all-reduce, broadcast or reduce; the gathered output of an all-gather; the input of a
  reduce-scatter; for all-to-all, one rank's whole send buffer.
* ``bytes_sent_per_rank`` is what ONE rank sends, averaged over the ``p`` ranks of the
  group (ranks of a broadcast tree send unequal amounts).
* Times follow the Hockney model with α (s per message step), β (s per byte) and γ
  (s per byte reduced); formulas from Thakur, Rabenseifner & Gropp, "Optimization of
  collective communication operations in MPICH", IJHPCA 19(1), 2005, and the MPICH
  sources.  The ring bandwidth terms are the lower bounds of Patarasuk & Yuan, JPDC 2009.
* ``Algorithm.RECURSIVE`` means recursive halving (reduce-scatter), recursive doubling
  (all-gather), Rabenseifner (all-reduce, reduce), van de Geijn scatter + all-gather
  (broadcast) and Bruck (all-to-all); it and ``TREE`` count log2(p) steps, exact for p a
  power of two.
* ``Algorithm.HIERARCHICAL`` is the two-level form for ``p`` ranks in nodes of ``g``:
  intra-node reduce-scatter → inter-node all-reduce on 1/g of the data → intra-node
  all-gather (all-reduce), and the matching forms below; each level runs as a ring.
"""

from __future__ import annotations

from enum import StrEnum

import sympy

from zerocalc import symbols as S
from zerocalc.errors import UnknownNameError


class Collective(StrEnum):
    """The collective operations; the values are the names used everywhere (model and traces)."""

    ALL_REDUCE = "all_reduce"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_GATHER = "all_gather"
    BROADCAST = "broadcast"
    REDUCE = "reduce"
    ALL_TO_ALL = "all_to_all"


class Algorithm(StrEnum):
    """Collective algorithms (see the module docstring for what each means per collective)."""

    RING = "ring"
    RECURSIVE = "recursive"
    TREE = "tree"
    HIERARCHICAL = "hierarchical"


def as_collective(value: Collective | str) -> Collective:
    """``"all_reduce"`` → :attr:`Collective.ALL_REDUCE`; unknown names raise :class:`UnknownNameError`."""
    try:
        return Collective(value)
    except ValueError:
        raise UnknownNameError("collective", str(value), [c.value for c in Collective]) from None


def as_algorithm(value: Algorithm | str) -> Algorithm:
    """``"ring"`` → :attr:`Algorithm.RING`; unknown names raise :class:`UnknownNameError`."""
    try:
        return Algorithm(value)
    except ValueError:
        pass
    try:  # names are case-insensitive: Ring is ring
        return Algorithm(str(value).strip().lower())
    except ValueError:
        raise UnknownNameError("algorithm", str(value), [a.value for a in Algorithm]) from None


def _log2(p: sympy.Expr) -> sympy.Expr:
    return sympy.log(p, 2)


def _flat_bytes(c: Collective, n: sympy.Expr, p: sympy.Expr, a: Algorithm) -> sympy.Expr:
    """Average bytes one rank sends, single-level algorithms."""
    share = (p - 1) / p * n  # the Patarasuk-Yuan bound for one pass over the data
    binomial_gather = n * _log2(p) / (2 * p)  # binomial scatter/gather: n·log2(p)/2 in total over p ranks
    if a is Algorithm.RING:
        # ring all-reduce = reduce-scatter + all-gather; broadcast/reduce as a pipelined chain
        # (the root/last rank sends n, the other end nothing: (p-1)·n in total);
        # all-to-all as pairwise exchange.
        return 2 * share if c is Collective.ALL_REDUCE else share
    if a is Algorithm.RECURSIVE:
        return {
            Collective.ALL_REDUCE: lambda: 2 * share,  # Rabenseifner: halving RS + doubling AG
            Collective.REDUCE_SCATTER: lambda: share,  # recursive halving
            Collective.ALL_GATHER: lambda: share,  # recursive doubling
            Collective.BROADCAST: lambda: binomial_gather + share,  # van de Geijn: binomial scatter + AG
            Collective.REDUCE: lambda: share + binomial_gather,  # Rabenseifner: RS + binomial gather
            Collective.ALL_TO_ALL: lambda: n * _log2(p) / 2,  # Bruck: log2(p) steps of n/2
        }[c]()
    if a is Algorithm.TREE:
        return {
            Collective.ALL_REDUCE: lambda: 2 * share,  # binomial reduce + binomial broadcast
            Collective.REDUCE_SCATTER: lambda: share + binomial_gather,  # reduce to root + binomial scatter
            Collective.ALL_GATHER: lambda: binomial_gather + share,  # binomial gather + broadcast
            Collective.BROADCAST: lambda: share,  # p-1 messages of n
            Collective.REDUCE: lambda: share,
            Collective.ALL_TO_ALL: lambda: share,  # no tree form: pairwise exchange
        }[c]()
    raise AssertionError(a)  # pragma: no cover - hierarchical handled by the caller


def _hier_steps(c: Collective, n: sympy.Expr, p: sympy.Expr, g: sympy.Expr):
    """The ring sub-collectives of the two-level algorithm: (collective, n_bytes, ranks, tier).

    Tier ``"leaders"`` is an inter-node step that only one rank per node takes part in
    (broadcast and reduce between node leaders); ``"inter"`` steps run on all g ranks of a
    node at once, one group per local rank.
    """
    m = p / g  # nodes
    intra, inter, leaders = "intra", "inter", "leaders"
    return {
        Collective.ALL_REDUCE: [(Collective.REDUCE_SCATTER, n, g, intra),
                                (Collective.ALL_REDUCE, n / g, m, inter),
                                (Collective.ALL_GATHER, n, g, intra)],
        Collective.REDUCE_SCATTER: [(Collective.REDUCE_SCATTER, n, g, intra),
                                    (Collective.REDUCE_SCATTER, n / g, m, inter)],
        Collective.ALL_GATHER: [(Collective.ALL_GATHER, n / g, m, inter),
                                (Collective.ALL_GATHER, n, g, intra)],
        Collective.BROADCAST: [(Collective.BROADCAST, n, m, leaders),
                               (Collective.BROADCAST, n, g, intra)],
        Collective.REDUCE: [(Collective.REDUCE, n, g, intra),
                            (Collective.REDUCE, n, m, leaders)],
        Collective.ALL_TO_ALL: [(Collective.ALL_TO_ALL, n, g, intra),
                                (Collective.ALL_TO_ALL, n, m, inter)],
    }[c]


def bytes_sent_per_rank(
    collective: Collective | str,
    n_bytes,
    p,
    algorithm: Algorithm | str = Algorithm.RING,
    *,
    g=None,
) -> sympy.Expr:
    """Bytes ONE rank sends in one call, averaged over the ``p`` ranks of the group.

    ``n_bytes`` is the full vector (module docstring). Ring: all-reduce 2(p-1)/p·n;
    reduce-scatter, all-gather, broadcast, reduce, all-to-all (p-1)/p·n (Thakur, Rabenseifner & Gropp 2005,
    Patarasuk & Yuan 2009). ``g`` (ranks per node, default the symbol G) is used by
    :attr:`Algorithm.HIERARCHICAL` only.

    In a two-level all-reduce the total equals the flat ring's, 2(p-1)/p·n: the
    hierarchy moves bytes off the slow tier, it does not remove them.
    """
    c, a = as_collective(collective), as_algorithm(algorithm)
    n, p = sympy.sympify(n_bytes), sympy.sympify(p)
    if a is Algorithm.HIERARCHICAL:
        g = S.G if g is None else sympy.sympify(g)
        return sum(
            (_flat_bytes(sc, sn, sp, Algorithm.RING) / (g if tier == "leaders" else 1)
             for sc, sn, sp, tier in _hier_steps(c, n, p, g)),
            sympy.Integer(0),
        )
    return _flat_bytes(c, n, p, a)


def _flat_time(c: Collective, n, p, a: Algorithm, alpha, beta, gamma) -> sympy.Expr:
    """Hockney α-β-γ time, single level (Thakur, Rabenseifner & Gropp 2005; MPICH sources)."""
    lg = _log2(p)
    share = (p - 1) / p * n
    if a is Algorithm.RING:
        return {
            Collective.ALL_REDUCE: lambda: 2 * (p - 1) * alpha + 2 * share * beta + share * gamma,
            Collective.REDUCE_SCATTER: lambda: (p - 1) * alpha + share * (beta + gamma),
            Collective.ALL_GATHER: lambda: (p - 1) * alpha + share * beta,
            # pipelined chain: p-1 hops of latency, every link carries the whole vector once
            # (nccl-tests bus-bandwidth factor 1); nothing at all moves when p = 1
            Collective.BROADCAST: lambda: (p - 1) * alpha + sympy.Min(1, p - 1) * n * beta,
            Collective.REDUCE: lambda: (p - 1) * alpha + sympy.Min(1, p - 1) * n * (beta + gamma),
            Collective.ALL_TO_ALL: lambda: (p - 1) * alpha + share * beta,  # pairwise exchange
        }[c]()
    if a is Algorithm.RECURSIVE:
        return {
            Collective.ALL_REDUCE: lambda: 2 * lg * alpha + 2 * share * beta + share * gamma,
            Collective.REDUCE_SCATTER: lambda: lg * alpha + share * (beta + gamma),
            Collective.ALL_GATHER: lambda: lg * alpha + share * beta,
            Collective.BROADCAST: lambda: (lg + p - 1) * alpha + 2 * share * beta,
            Collective.REDUCE: lambda: 2 * lg * alpha + 2 * share * beta + share * gamma,
            Collective.ALL_TO_ALL: lambda: lg * alpha + n / 2 * lg * beta,
        }[c]()
    if a is Algorithm.TREE:
        bcast = lg * (alpha + n * beta)
        reduce = lg * (alpha + n * beta + n * gamma)
        gather = lg * alpha + share * beta
        return {
            Collective.ALL_REDUCE: lambda: reduce + bcast,
            Collective.REDUCE_SCATTER: lambda: reduce + gather,  # reduce + binomial scatter
            Collective.ALL_GATHER: lambda: gather + bcast,
            Collective.BROADCAST: lambda: bcast,
            Collective.REDUCE: lambda: reduce,
            Collective.ALL_TO_ALL: lambda: (p - 1) * alpha + share * beta,
        }[c]()
    raise AssertionError(a)  # pragma: no cover


def time_s(
    collective: Collective | str,
    n_bytes,
    p,
    algorithm: Algorithm | str = Algorithm.RING,
    *,
    alpha,
    beta,
    gamma=0,
    g=None,
    alpha_inter=None,
    beta_inter=None,
) -> sympy.Expr:
    """α-β-γ time in seconds of one call on ``p`` ranks.

    ``alpha`` (s), ``beta`` (s/byte) and ``gamma`` (s/byte reduced) describe the link; for
    :attr:`Algorithm.HIERARCHICAL` they are the intra-node link and ``alpha_inter`` /
    ``beta_inter`` the inter-node one (s/byte for one rank while all g ranks of its node send
    at once), ``g`` the ranks per node (default G).
    """
    c, a = as_collective(collective), as_algorithm(algorithm)
    n, p = sympy.sympify(n_bytes), sympy.sympify(p)
    alpha, beta, gamma = sympy.sympify(alpha), sympy.sympify(beta), sympy.sympify(gamma)
    if a is Algorithm.HIERARCHICAL:
        g = S.G if g is None else sympy.sympify(g)
        ai = alpha if alpha_inter is None else sympy.sympify(alpha_inter)
        bi = beta if beta_inter is None else sympy.sympify(beta_inter)
        total = sympy.Integer(0)
        for sc, sn, sp, tier in _hier_steps(c, n, p, g):
            # a leaders-only step has the node's whole injection bandwidth: g × the per-rank share
            la, lb = {"intra": (alpha, beta), "inter": (ai, bi), "leaders": (ai, bi / g)}[tier]
            total += _flat_time(sc, sn, sp, Algorithm.RING, la, lb, gamma)
        return total
    return _flat_time(c, n, p, a, alpha, beta, gamma)
