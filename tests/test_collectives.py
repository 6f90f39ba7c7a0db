"""Collectives: per-rank bytes and α-β-γ times against Thakur, Rabenseifner & Gropp (2005)
and hand derivations."""

import pytest
import sympy

from zerocalc import symbols as S
from zerocalc.collectives import Algorithm, Collective, bytes_sent_per_rank, time_s
from zerocalc.errors import UnknownNameError

n, p, a, b, c = sympy.symbols("n p alpha beta gamma", positive=True)


def test_ring_all_reduce_is_reduce_scatter_plus_all_gather():
    ar = bytes_sent_per_rank(Collective.ALL_REDUCE, n, p)
    rs = bytes_sent_per_rank(Collective.REDUCE_SCATTER, n, p)
    ag = bytes_sent_per_rank(Collective.ALL_GATHER, n, p)
    assert sympy.simplify(ar - (rs + ag)) == 0
    assert sympy.simplify(ar - 2 * (p - 1) / p * n) == 0  # Patarasuk & Yuan bound
    t = {k: time_s(k, n, p, alpha=a, beta=b, gamma=c) for k in Collective}
    assert sympy.simplify(t[Collective.ALL_REDUCE] - t[Collective.REDUCE_SCATTER]
                          - t[Collective.ALL_GATHER]) == 0


def test_reference_time_formulas():
    # Thakur, Rabenseifner & Gropp 2005, typed in independently of the implementation
    lg = sympy.log(p, 2)
    share = (p - 1) / p * n
    expected = {
        (Collective.ALL_GATHER, Algorithm.RING): (p - 1) * a + share * b,
        (Collective.ALL_GATHER, Algorithm.RECURSIVE): lg * a + share * b,
        (Collective.REDUCE_SCATTER, Algorithm.RECURSIVE): lg * a + share * (b + c),
        (Collective.ALL_REDUCE, Algorithm.RING): 2 * (p - 1) * a + 2 * share * b + share * c,
        (Collective.ALL_REDUCE, Algorithm.RECURSIVE): 2 * lg * a + 2 * share * b + share * c,
        (Collective.REDUCE, Algorithm.TREE): lg * (a + n * b + n * c),
        (Collective.BROADCAST, Algorithm.TREE): lg * (a + n * b),
        (Collective.BROADCAST, Algorithm.RECURSIVE): (lg + p - 1) * a + 2 * share * b,
    }
    for (coll, alg), want in expected.items():
        got = time_s(coll, n, p, alg, alpha=a, beta=b, gamma=c)
        assert sympy.simplify(got - want) == 0, (coll, alg)


@pytest.mark.parametrize("alg", list(Algorithm))
@pytest.mark.parametrize("coll", list(Collective))
def test_one_rank_sends_nothing(coll, alg):
    assert bytes_sent_per_rank(coll, 1000, 1, alg, g=1) == 0
    assert time_s(coll, 1000, 1, alg, alpha=1, beta=1, gamma=1, g=1) == 0


def test_hand_counted_examples():
    # ring all-reduce, 4 ranks, 100 bytes: 3 reduce-scatter + 3 all-gather steps of 25 bytes
    assert bytes_sent_per_rank("all_reduce", 100, 4) == 150
    # Bruck all-to-all, 8 ranks, 8-byte buffer: 3 steps of 4 bytes
    assert bytes_sent_per_rank("all_to_all", 8, 8, "recursive") == 12
    # binomial broadcast, 8 ranks: 7 messages of n in total
    assert bytes_sent_per_rank("broadcast", 8, 8, "tree") == 7
    # two-level all-to-all, 2 nodes × 4: 3/4 of the buffer in the node, then 1/2 across nodes
    assert bytes_sent_per_rank("all_to_all", 8, 8, "hierarchical", g=4) == 6 + 4


@pytest.mark.parametrize("coll", list(Collective))
def test_hierarchical_single_node_equals_flat_ring(coll):
    g = S.G
    flat = time_s(coll, n, g, Algorithm.RING, alpha=a, beta=b, gamma=c)
    hier = time_s(coll, n, g, Algorithm.HIERARCHICAL, alpha=a, beta=b, gamma=c, g=g,
                  alpha_inter=3 * a, beta_inter=5 * b)
    assert sympy.simplify(flat - hier) == 0
    hier_bytes = bytes_sent_per_rank(coll, n, g, "hierarchical")
    assert sympy.simplify(bytes_sent_per_rank(coll, n, g) - hier_bytes) == 0


def test_hierarchical_all_reduce_moves_same_total_as_ring():
    flat = bytes_sent_per_rank("all_reduce", n, S.N)
    hier = bytes_sent_per_rank("all_reduce", n, S.N, "hierarchical", g=S.G)
    assert sympy.simplify(flat - hier) == 0


def test_unknown_names():
    with pytest.raises(UnknownNameError, match="all_reduce"):
        bytes_sent_per_rank("allreduce", n, p)
    with pytest.raises(UnknownNameError, match="ring"):
        bytes_sent_per_rank("all_reduce", n, p, "butterfly")
