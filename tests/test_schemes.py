"""Schemes: the volume identities of ZeRO §7 and hand derivations for the real implementations."""

import pytest
import sympy

from zerocalc import symbols as S
from zerocalc.errors import ConfigError, UnknownNameError
from zerocalc.evaluate import model_bytes_per_rank
from zerocalc.schemes import SCHEME_NAMES, SCHEMES, Group, get_scheme

Psi, N, G, b = S.Psi, S.N, S.G, S.b_comm
DP = 2 * (N - 1) / N * Psi * b  # ring all-reduce of Ψ elements of b bytes


def vol(name, alg="ring"):
    return SCHEMES[name].bytes_per_rank(alg)


def test_names_are_fixed():
    assert SCHEME_NAMES == (
        "dp", "zero1", "zero2", "zero3", "colocated", "deepspeed-zero12", "deepspeed-zero2-reduce",
        "torch-zero1", "fsdp-full-shard", "fsdp-shard-grad-op", "fsdp-hybrid", "zeropp",
    )


@pytest.mark.parametrize(
    ("name", "factor"),
    [("dp", 1), ("zero1", 1), ("zero2", 1), ("zero3", sympy.Rational(3, 2)),
     ("colocated", sympy.Rational(1, 2)), ("deepspeed-zero12", sympy.Rational(3, 2)),
     ("deepspeed-zero2-reduce", 1), ("torch-zero1", sympy.Rational(3, 2)),
     ("fsdp-full-shard", sympy.Rational(3, 2)), ("fsdp-shard-grad-op", 1)],
)
def test_volume_in_units_of_dp(name, factor):
    assert sympy.simplify(vol(name) - factor * DP) == 0
    # and with ring algorithms inside two-level collectives, the total does not change
    assert sympy.simplify(vol(name, "hierarchical") - factor * DP) == 0


def test_dp_is_the_all_reduce_bound():
    assert sympy.simplify(vol("dp") - 2 * (N - 1) / N * Psi * b) == 0


def test_fsdp_hybrid_derivation():
    # In-node FULL_SHARD: 3 × (G-1)/G Ψb. Across nodes: ring all-reduce of the Ψ/G shard over
    # N/G replicas: 2(N/G - 1)/(N/G) · Ψb/G = 2Ψb(N-G)/(NG)
    # (the FSDP paper, arXiv 2304.11277, prints 2M(W-1)/(GW)).
    cross = [ph for ph in SCHEMES["fsdp-hybrid"].phases if ph.group is Group.INTER]
    assert len(cross) == 1
    derived = 2 * Psi * b * (N - G) / (N * G)
    assert sympy.simplify(cross[0].bytes_per_rank() - derived) == 0
    assert sympy.simplify(vol("fsdp-hybrid") - (3 * (G - 1) / G * Psi * b + derived)) == 0
    # one node: no cross-node traffic; the FSDP paper's printed 2M(W-1)/(GW) would not vanish
    assert cross[0].bytes_per_rank().subs(N, G) == 0
    paper = 2 * Psi * b * (N - 1) / (G * N)
    assert sympy.simplify(paper.subs(N, G)) != 0


def test_zeropp_hand_derivation():
    # qwZ: int8 all-gather over N; hpZ: bf16 all-gather over G; qgZ: int4 all-to-all over G of
    # the whole gradient, then int4 all-to-all over N/G of the node-reduced 1/G.
    m = N / G
    want = ((N - 1) / N * Psi * 1 + (G - 1) / G * Psi * b + (G - 1) / G * Psi / 2
            + (m - 1) / m * Psi / (2 * G))
    assert sympy.simplify(vol("zeropp") - want) == 0
    # ZeRO++ §4: cross-node traffic per node, in M = 2Ψ bytes (fp16), is 0.5M (qwZ) + 0 + 0.25M:
    # the INTER phases of one node's G ranks carry the qgZ part, → 0.25M as the nodes grow.
    inter = sum(ph.bytes_per_rank() for ph in SCHEMES["zeropp"].phases if ph.group is Group.INTER)
    assert sympy.limit((G * inter).subs(b, 2) / (2 * Psi), N, sympy.oo) == sympy.Rational(1, 4)


def test_equivalence_flags():
    not_dp = {name for name, s in SCHEMES.items() if not s.equivalent_to_dp}
    assert not_dp == {"colocated", "zeropp"}


def test_every_scheme_cites_a_source():
    for s in SCHEMES.values():
        assert any(k in s.source for k in ("arXiv", "issue", ".py", "PyTorch", "pytorch")), s.name


def test_get_scheme_unknown():
    with pytest.raises(UnknownNameError, match="unknown scheme 'zero4'"):
        get_scheme("zero4")


def test_model_bytes_per_rank_numbers():
    # dp, Ψ = 7.5e9, N = 64, fp16: 2·63/64·15e9 bytes
    assert model_bytes_per_rank("dp", psi=7.5e9, n=64) == pytest.approx(2 * 63 / 64 * 15e9)
    assert model_bytes_per_rank("zero3", psi=1e9, n=4, comm_bytes=4) == pytest.approx(3 * 3 / 4 * 4e9)
    # a partial node (N < G) is one node of N GPUs
    assert model_bytes_per_rank("fsdp-hybrid", psi=1e9, n=4, gpus_per_node=8) == pytest.approx(
        3 * 3 / 4 * 2e9)


@pytest.mark.parametrize(("n", "g"), [(12, 8), (0, 8), (9, 4)])
def test_model_bytes_per_rank_refuses_bad_layouts(n, g):
    with pytest.raises(ConfigError, match="--n"):
        model_bytes_per_rank("dp", psi=1e9, n=n, gpus_per_node=g)


def test_exact_on_one_rank_for_colocated_and_zeropp():
    # Skipping the reduce-scatter changes nothing on one rank (nothing to sum), and ZeRO++ quantises
    # what it sends, which on one rank is nothing; every other scheme is exact for every N already.
    assert [s.name for s in SCHEMES.values() if s.exact_on_one_rank] == ["colocated", "zeropp"]
    assert SCHEMES["colocated"].equivalent_at(1) is True
    assert SCHEMES["colocated"].equivalent_at(2) is False
    assert SCHEMES["zeropp"].equivalent_at(1) is True
    assert SCHEMES["zeropp"].equivalent_at(2) is False
    assert SCHEMES["dp"].equivalent_at(1) is True
