"""In-network reduction: bytes per link type derived by hand, the simulated switch against the model.

Hand derivations (n = the full vector's bytes, p ranks, nodes of G, M = N/G nodes):

* NVLS all-reduce on one node: the switch reads each rank's whole vector (n out of every rank), hands
  each rank the sum of its 1/p chunk (n/p in), the rank stores that chunk once (n/p out) and the
  switch writes it to all p ranks (n in: p chunks): n + n/p each way, against the ring's 2(p-1)/p·n.
* Two levels (N > G): reduce-scatter in the node (n out, n/G in), the node's n/G share across nodes
  (SHARP: n/G out and n/G in; a ring: 2(M-1)/M·n/G each way), all-gather in the node (n/G out, n in).
* A flat ring over nodes of G consecutive ranks: one hop in G leaves the node, so 1/G of each rank's
  ring bytes are on the network, (G-1)/G inside the node.
"""

from fractions import Fraction

import numpy as np
import pytest
import sympy

from zerocalc import symbols as S
from zerocalc.errors import ConfigError
from zerocalc.in_network import (
    collective_link_bytes,
    in_network_time_s,
    parse_kinds,
    scheme_link_bytes,
)
from zerocalc.sim import FeasibilityConfig, World, all_gather, all_reduce, reduce_scatter, simulate_scheme
from zerocalc.sim.accounting import model_link_bytes_exact
from zerocalc.sim.training import simulate_reference

KEYS = ("intra_sent", "intra_received", "inter_sent", "inter_received")


def _at(lb, n, g):
    """The four link-byte expressions at Ψ·b = 1 (bytes as a fraction of the model), N = n, G = g."""
    v = {S.Psi: 1, S.b_comm: 1, S.b_p: 1, S.b_g: 1, S.n_mb: 1, S.N: n, S.G: g, S.H: g}
    return tuple(sympy.nsimplify(getattr(lb, k).subs(v)) for k in KEYS)


R = sympy.Rational


@pytest.mark.parametrize("scheme, kinds, n, g, expected", [
    # dp on one DGX-H100 node: NVLS all-reduce n + n/8 each way; the ring 2·7/8 = 7/4
    ("dp", "nvls", 8, 8, (R(9, 8), R(9, 8), 0, 0)),
    ("dp", None, 8, 8, (R(7, 4), R(7, 4), 0, 0)),
    # 8 nodes of 8, NVLS only: in the node 1 + 1/8; across nodes a ring all-reduce of 1/8 over 8 nodes,
    # 2·7/8·1/8 = 7/32 each way
    ("dp", "nvls", 64, 8, (R(9, 8), R(9, 8), R(7, 32), R(7, 32))),
    # ... and with SHARP the network carries the node's 1/8 share once each way
    ("dp", "nvls+sharp", 64, 8, (R(9, 8), R(9, 8), R(1, 8), R(1, 8))),
    # flat ring, 64 ranks: 2·63/64 = 63/32 per rank, 1/8 of it across nodes: 63/256, 7/8 inside: 441/256
    ("dp", None, 64, 8, (R(441, 256), R(441, 256), R(63, 256), R(63, 256))),
    # zero2 = reduce-scatter + all-gather, both in the switch: RS n out, n/8 in; AG n/8 out, n in.
    # Across nodes with SHARP: RS n/8 out, n/64 in; AG n/64 out, n/8 in: 9/64 each way
    ("zero2", "nvls+sharp", 64, 8, (R(9, 8), R(9, 8), R(9, 64), R(9, 64))),
    # the #4582 all-gather alone, multicast in the node: 1/8 out, 1 in
    ("colocated", "nvls", 8, 8, (R(1, 8), 1, 0, 0)),
    # one rank: nothing moves, switch or not
    ("dp", "nvls+sharp", 1, 1, (0, 0, 0, 0)),
    # HYBRID_SHARD on one node of 4: FULL_SHARD inside it, all-gather ×2 + reduce-scatter = 3 · 3/4; its
    # cross-node all-reduce has one rank, so nothing crosses, SHARP or not
    ("fsdp-hybrid", "sharp", 4, 4, (R(9, 4), R(9, 4), 0, 0)),
])
def test_link_bytes_by_hand(scheme, kinds, n, g, expected):
    assert _at(scheme_link_bytes(scheme, kinds), n, g) == tuple(sympy.nsimplify(e) for e in expected)


def test_in_network_time_on_one_node_by_hand():
    # NVLS all-reduce on one node: 2 stages of α (reduce, multicast) + the busier direction, n + n/p, over
    # one GPU's NVLink bandwidth
    t = in_network_time_s("all_reduce", S.Psi * S.b_comm, "world", "nvls")
    v = {S.N: 8, S.G: 8, S.Psi: 10**9, S.b_comm: 2, S.alpha_intra: R(1, 10**6), S.alpha_inter: 1,
         S.bw_intra: 450 * 10**9, S.bw_inter: 400 * 10**9}
    assert sympy.nsimplify(t.subs(v)) == 2 * R(1, 10**6) + R(9, 8) * 2 * 10**9 / (450 * 10**9)


def test_in_network_without_a_kind_is_refused_and_unknown_kinds_name_the_option():
    with pytest.raises(ConfigError, match="in-network"):
        in_network_time_s("all_reduce", 1, "world", None)
    with pytest.raises(ConfigError, match="'infiniband'") as e:
        parse_kinds("nvls+infiniband")
    assert e.value.option == "--in-network"
    assert parse_kinds("NVLS, sharp") == {"nvls", "sharp"}
    with pytest.raises(ConfigError):
        FeasibilityConfig(in_network=("bogus",))


def test_ring_collective_link_bytes_split_one_hop_in_g():
    lb = collective_link_bytes("all_gather", S.Psi, "world")
    # 16 ranks in 4 nodes: 15/16 per rank, 1/4 of it across nodes
    assert _at(lb, 16, 4) == (R(45, 64), R(45, 64), R(15, 64), R(15, 64))


# --------------------------------------------------------------------------- the simulated switch


def test_switch_all_reduce_sums_and_counts_each_link_by_hand():
    # N = 4 in nodes of 2, 8 float64 elements = 64 bytes. NVLS + SHARP, two levels:
    # RS in the node: 64 out, 32 in; SHARP all-reduce of 32: 32 out, 32 in; AG in the node: 32 out, 64 in.
    rng = np.random.default_rng(0)
    xs = [rng.normal(size=8) for _ in range(4)]
    w = World(4, 2, frozenset({"nvls", "sharp"}))
    out = all_reduce(w, [0, 1, 2, 3], xs)
    for o in out:
        np.testing.assert_allclose(o, np.sum(xs, axis=0), rtol=1e-14)
    assert w.link_bits[("intra", "sent")] == [96 * 8] * 4
    assert w.link_bits[("intra", "received")] == [96 * 8] * 4
    assert w.link_bits[("inter", "sent")] == [32 * 8] * 4
    assert w.link_bits[("inter", "received")] == [32 * 8] * 4


def test_switch_reduce_scatter_and_all_gather_on_one_node_by_hand():
    # one node of 4, 12 elements = 96 bytes: RS sends 96, receives its 3-element sum (24 B);
    # the multicast AG of 3-element pieces sends 24 and receives all 4 pieces (96)
    xs = [np.arange(12.0) * (r + 1) for r in range(4)]
    w = World(4, 4, frozenset({"nvls"}))
    out = reduce_scatter(w, [0, 1, 2, 3], xs)
    assert [o.tolist() for o in out] == [(np.arange(12.0) * 10)[3 * r:3 * r + 3].tolist() for r in range(4)]
    assert w.sent_bits == [96 * 8] * 4 and w.recv_bits == [24 * 8] * 4
    w = World(4, 4, frozenset({"nvls"}))
    have = all_gather(w, [0, 1, 2, 3], out)
    assert all(np.concatenate(h).tolist() == (np.arange(12.0) * 10).tolist() for h in have)
    assert w.sent_bits == [24 * 8] * 4 and w.recv_bits == [96 * 8] * 4
    assert w.link_bits[("inter", "sent")] == [0] * 4


#: chains (broadcast, reduce) split their bytes over links by root, not 1 hop in G: compared in total only
CHAINS = ("torch-zero1", "deepspeed-zero2-reduce")
EXACT = ("dp", "zero1", "zero2", "zero3", "deepspeed-zero1", "deepspeed-zero2", "deepspeed-zero2-reduce",
         "deepspeed-zero3", "torch-zero1", "fsdp-full-shard", "fsdp-shard-grad-op", "fsdp-hybrid")


@pytest.mark.parametrize("kinds, n, g", [((), 4, 2), (("nvls",), 4, 2), (("sharp",), 4, 2),
                                         (("nvls", "sharp"), 4, 2), (("nvls",), 4, 4),
                                         (("nvls", "sharp"), 8, 4)])
def test_simulated_switch_keeps_the_update_and_counts_the_model_bytes(kinds, n, g):
    cfg = FeasibilityConfig(n=n, steps=2, gpus_per_node=g, in_network=kinds)
    ref = simulate_reference(cfg)
    for name in (*EXACT, "colocated", "zeropp"):
        run = simulate_scheme(name, cfg, ref)
        model = model_link_bytes_exact(name, psi=run.psi, n=n, gpus_per_node=g, comm_bytes=8,
                                       in_network=kinds)
        assert run.bytes_per_rank_exact == model["sent"], name
        assert sum(run.link_bytes[k] for k in ("intra_received", "inter_received")) == \
            run.bytes_received_per_rank_exact
        if name not in CHAINS:
            assert {k: run.link_bytes[k] for k in KEYS} == {k: model[k] for k in KEYS}, name
        if name in EXACT:
            assert run.equivalent, (name, run.max_rel_diff)


def test_in_network_dp_sends_less_than_the_ring_on_one_node():
    # 4 ranks on one node, Ψ = 212 float64: ring 2·3/4·212·8 = 2544 B; switch 212·8·(1 + 1/4) = 2120 B
    cfg = FeasibilityConfig(n=4, steps=1, gpus_per_node=4, in_network=("nvls",))
    run = simulate_scheme("dp", cfg)
    ring = simulate_scheme("dp", FeasibilityConfig(n=4, steps=1, gpus_per_node=4))
    assert ring.bytes_per_rank_exact == Fraction(2544) and run.bytes_per_rank_exact == Fraction(2120)
    assert run.equivalent


def test_one_rank_in_network_takes_no_time():
    t = in_network_time_s("all_reduce", S.Psi * S.b_comm, "world", "nvls+sharp")
    assert t.subs({S.N: 1, S.G: 1, S.Psi: 10**9, S.b_comm: 2}) == 0
