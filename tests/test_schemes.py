"""Schemes: the volume identities of ZeRO §7 and hand derivations for the real implementations."""

import pytest
import sympy

from zerocalc import symbols as S
from zerocalc.errors import ConfigError, UnknownNameError
from zerocalc.evaluate import model_bytes_per_rank
from zerocalc.schemes import SCHEME_NAMES, SCHEMES, Group, get_scheme, one_wire_width

Psi, N, G, b = S.Psi, S.N, S.G, S.b_comm
DP = 2 * (N - 1) / N * Psi * b  # ring all-reduce of Ψ elements of b bytes


def vol(name, alg="ring"):
    """The textbook step: one micro-batch, one wire dtype b, HSDP's shard group = the node (H = G)."""
    return one_wire_width(SCHEMES[name].bytes_per_rank(alg)).subs(S.H, G)


def test_names_are_fixed():
    assert SCHEME_NAMES == (
        "dp", "zero1", "zero2", "zero3", "colocated", "deepspeed-zero1", "deepspeed-zero2",
        "deepspeed-zero2-reduce", "deepspeed-zero3", "torch-zero1", "fsdp-full-shard", "fsdp-shard-grad-op",
        "fsdp-hybrid", "zeropp",
    )
    # the name that stood for DeepSpeed ZeRO-1/2 before they were told apart stays accepted
    assert get_scheme("deepspeed-zero12").name == "deepspeed-zero12"
    assert get_scheme("deepspeed-zero12").alias_of == "deepspeed-zero2"


@pytest.mark.parametrize(
    ("name", "factor"),
    [("dp", 1), ("zero1", 1), ("zero2", 1), ("zero3", sympy.Rational(3, 2)),
     ("colocated", sympy.Rational(1, 2)), ("deepspeed-zero12", sympy.Rational(3, 2)),
     ("deepspeed-zero1", sympy.Rational(3, 2)), ("deepspeed-zero2", sympy.Rational(3, 2)),
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
    cross = [ph for ph in SCHEMES["fsdp-hybrid"].phases if ph.group is Group.REPLICATE]
    assert len(cross) == 1
    derived = 2 * Psi * b * (N - G) / (N * G)
    assert sympy.simplify(one_wire_width(cross[0].bytes_per_rank()).subs(S.H, G) - derived) == 0
    assert sympy.simplify(vol("fsdp-hybrid") - (3 * (G - 1) / G * Psi * b + derived)) == 0
    # one node: no cross-node traffic; the FSDP paper's printed 2M(W-1)/(GW) would not vanish
    assert one_wire_width(cross[0].bytes_per_rank()).subs(S.H, G).subs(N, G) == 0
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
    inter = sum(one_wire_width(ph.bytes_per_rank()) for ph in SCHEMES["zeropp"].phases
                if ph.group is Group.INTER)
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


# --- micro-batches: each implementation's own rule, hand-derived per optimizer step ----------------
# Units: R = (N-1)/N·Ψ·b, one ring pass over the whole model (reduce-scatter or all-gather); an
# all-reduce is 2R. k = micro-batches per optimizer step.

k = S.n_mb
R = (N - 1) / N * Psi * b


def step_vol(name, grad_sync="every"):
    return SCHEMES[name].bytes_per_rank("ring", grad_sync).subs({S.b_p: b, S.b_g: b, S.H: G})


@pytest.mark.parametrize(
    ("name", "grad_sync", "want"),
    [
        # engine.py allreduce_gradients: ZeRO-1 reduces only at the boundary; its all-gather follows step()
        ("deepspeed-zero1", "every", 2 * R + R),
        # ZeRO-2 all-reduces every micro-batch's buckets, then one all-gather per step
        ("deepspeed-zero2", "every", 2 * k * R + R),
        ("deepspeed-zero2-reduce", "every", k * R + R),
        # ZeRO-3, model within stage3_max_reuse_distance: gather in forward + reduce-scatter, per micro-batch
        ("deepspeed-zero3", "every", 2 * k * R),
        # DDP: every micro-batch, or only the last under no_sync()
        ("dp", "every", 2 * k * R), ("dp", "boundary", 2 * R),
        ("torch-zero1", "every", 2 * k * R + R), ("torch-zero1", "boundary", 3 * R),
        # FSDP2: gathers in every micro-batch; the reduce-scatter unless set_requires_gradient_sync(False)
        ("fsdp-full-shard", "every", 3 * k * R), ("fsdp-full-shard", "boundary", 2 * k * R + R),
        ("fsdp-shard-grad-op", "every", 2 * k * R), ("fsdp-shard-grad-op", "boundary", k * R + R),
        # the paper's stages: P_os accumulates its full gradient, P_os+g reduces as it goes
        ("zero1", "every", 2 * R), ("zero2", "every", k * R + R), ("zero3", "every", 3 * k * R),
        ("colocated", "every", R),
    ],
)
def test_volume_per_optimizer_step_with_micro_batches(name, grad_sync, want):
    got = step_vol(name, grad_sync)
    if name == "deepspeed-zero3":
        got = got.subs(S.D_reuse, 2 * Psi)  # the whole model within the reuse distance
    assert sympy.simplify(got - want) == 0
    assert sympy.simplify(got.subs(k, 1) - want.subs(k, 1)) == 0


def test_deepspeed_zero2_gradient_bytes_are_k_times_zero1s():
    grads = {name: sum(ph.bytes_per_rank() for ph in SCHEMES[name].phases if ph.side.value == "grad")
             for name in ("deepspeed-zero1", "deepspeed-zero2")}
    assert sympy.simplify(grads["deepspeed-zero2"] - k * grads["deepspeed-zero1"]) == 0
    # and the same all-gather after step(): at k = 1 the two send the same
    assert sympy.simplify((step_vol("deepspeed-zero2") - step_vol("deepspeed-zero1")).subs(k, 1)) == 0


def test_deepspeed_zero3_backward_regather_follows_the_reuse_distance():
    # partitioned_param_coordinator.__params_to_release: a module is kept gathered when it is used again
    # within D elements; the forward module at offset x is used again after 2(Ψ - x), so Ψ - D/2 elements
    # are gathered again in backward. D = 0: every parameter, the paper's 3Ψ per micro-batch.
    v = step_vol("deepspeed-zero3")
    assert sympy.simplify(v.subs(S.D_reuse, 0) - 3 * k * R) == 0
    assert sympy.simplify(v.subs({S.D_reuse: Psi}) - (2 * k * R + k * R / 2)) == 0
    assert sympy.simplify(v.subs({S.D_reuse: 4 * Psi}) - 2 * k * R) == 0


def test_zeropp_runs_every_phase_every_micro_batch():
    v = SCHEMES["zeropp"].bytes_per_rank()
    assert sympy.simplify(v - k * v.subs(k, 1)) == 0


def test_only_ddp_and_fsdp_let_the_user_choose_the_gradient_sync():
    assert {s.name for s in SCHEMES.values() if s.grad_sync_choice} == {
        "dp", "torch-zero1", "fsdp-full-shard", "fsdp-shard-grad-op", "fsdp-hybrid"}
    for s in SCHEMES.values():
        assert any(k_ in s.micro_batch_rule for k_ in (".py", "arXiv", "issue", "torch")), s.name


# --- element type per collective -----------------------------------------------------------------

def test_mixed_precision_fsdp2_gathers_in_param_dtype_and_reduces_in_reduce_dtype():
    # MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32): two bf16 all-gathers and one fp32
    # reduce-scatter per micro-batch: (N-1)/N·Ψ·(2 + 2 + 4)
    v = SCHEMES["fsdp-full-shard"].bytes_per_rank().subs({S.b_p: 2, S.b_g: 4, k: 1})
    assert sympy.simplify(v - (N - 1) / N * Psi * 8) == 0


def test_ddp_compression_hook_with_zero_redundancy_optimizer():
    # fp16_compress_hook: the all-reduce in fp16; ZeroRedundancyOptimizer broadcasts fp32 parameters
    v = SCHEMES["torch-zero1"].bytes_per_rank().subs({S.b_p: 4, S.b_g: 2, k: 1})
    assert sympy.simplify(v - (N - 1) / N * Psi * (2 * 2 + 4)) == 0


def test_every_collective_has_its_side():
    for s in SCHEMES.values():
        for ph in s.phases:
            if ph.side.value == "param":
                assert ph.collective.value in ("all_gather", "broadcast"), (s.name, ph)
            elif ph.side.value == "grad":
                assert ph.collective.value in ("all_reduce", "reduce_scatter", "reduce"), (s.name, ph)


def test_hsdp_shard_group_is_its_own_size():
    # shard group of H = 16 over N = 64: in-group FULL_SHARD 3·(H-1)/H·Ψb, across the N/H = 4 replicas
    # an all-reduce of the Ψ/H shard: 2·(4-1)/4·Ψb/16
    psi = 1e9
    got = model_bytes_per_rank("fsdp-hybrid", psi=psi, n=64, gpus_per_node=8, hsdp_shard_size=16)
    assert got == pytest.approx(3 * 15 / 16 * psi * 2 + 2 * 3 / 4 * psi * 2 / 16)
    with pytest.raises(ConfigError, match="--hsdp-shard-size"):
        model_bytes_per_rank("fsdp-hybrid", psi=psi, n=64, gpus_per_node=8, hsdp_shard_size=24)


# --- collectives: the tree reduce-scatter, counted by hand (REFERENCE §4) --------------------------

@pytest.mark.parametrize(("p", "want_over_n"),
                         [(8, sympy.Rational(17, 16)), (4, 1), (2, sympy.Rational(3, 4))])
def test_tree_reduce_scatter_counts_the_reduce_and_the_scatter(p, want_over_n):
    from zerocalc.collectives import bytes_sent_per_rank

    # binomial reduce to the root: every non-root rank sends the whole n once, (p-1)·n in all;
    # binomial scatter from the root: log2(p) rounds, each moving n/2 in all (p = 8: n/2 from the
    # root, then 2 × n/4, then 4 × n/8), n·log2(p)/2 in all. Per rank: ((p-1)·n + n·log2(p)/2)/p.
    assert sympy.simplify(bytes_sent_per_rank("reduce_scatter", 1, p, "tree") - want_over_n) == 0
