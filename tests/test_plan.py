"""The implementation plan priced on a cluster by the ring α-β model (``--time-model ring``): in-network
reduction, items that are slower kept apart.

Hand derivations on dgx-h100 (NVLink 450 GB/s per GPU and α 3.4 µs; 8 × 50 GB/s = 400 GB/s per node and
α 14 µs; NVLS in the NVSwitch, no SHARP), N = 64 ranks in 8 nodes of G = 8, Ψ = 70e9, b = 2 bytes, so
n = Ψb = 140e9 bytes per vector. A ring spanning nodes runs at the node's 400 GB/s with α = 14 µs per
step (the model's rule for a world ring across nodes).
"""

import pytest

from zerocalc.feasibility import FeasibilityConfig, run_feasibility
from zerocalc.plan import helps, slower

A_INTRA, A_INTER, BW_INTRA, BW_NODE = 3.4e-6, 14e-6, 450e9, 400e9
N, G, M, PSI, B = 64, 8, 8, 70e9, 2
NB = PSI * B


@pytest.fixture(scope="module")
def h100():
    return run_feasibility(FeasibilityConfig(n=4, steps=2), plan_psi=int(PSI), plan_topology="dgx-h100",
                           plan_n=N, plan_time_model="ring")


def _item(result, src, dst, in_network=""):
    return next(p for p in result.plan
                if (p.from_scheme, p.to_scheme, p.in_network) == (src, dst, in_network))


def test_in_network_all_reduce_on_dgx_h100_by_hand(h100):
    item = _item(h100, "deepspeed-zero2", "deepspeed-zero2", "nvls")
    assert item.update == "exact" and item.available is True and not item.slower
    # ring all-reduce sends 2·63/64·n; NVLS in the node: n out for the reduce-scatter + n/8 for the
    # multicast store, across nodes a ring all-reduce of n/8 over 8 nodes: 2·7/8·n/8 = 7/32·n
    ring, switch = 2 * 63 / 64 * NB, (1 + 1 / 8 + 7 / 32) * NB
    assert item.bytes_saved_per_rank == pytest.approx(ring - switch, rel=1e-12)
    assert item.bytes_saved_over_psi == pytest.approx(1.25, rel=1e-12)
    # time: ring 2·63 steps of α_inter + 2·63/64·n at 400 GB/s; in the switch one α per NVLS stage (2),
    # 2·7 ring steps across nodes, and the busier link: in the node (1 + 1/8)·n at 450 GB/s, across
    # nodes 7/32·n at the rank's share 400/8 GB/s
    t_ring = 2 * 63 * A_INTER + ring / BW_NODE
    t_switch = 2 * A_INTRA + 14 * A_INTER + max(9 / 8 * NB / BW_INTRA, 7 / 32 * NB / (BW_NODE / G))
    assert item.time_saved_s == pytest.approx(t_ring - t_switch, rel=1e-9)


def test_slower_item_is_kept_apart_below_the_ones_that_help(h100):
    hybrid = _item(h100, "fsdp-full-shard", "fsdp-hybrid")
    # FULL_SHARD: 3 world rings of 63/64·n at 400 GB/s, 63 α_inter each. HYBRID_SHARD: 3 rings in the
    # node (7 α_intra, 7/8·n at 450 GB/s) and an all-reduce of n/8 across 8 nodes (14 α_inter,
    # 2·7/8·n/8 at 400/8 GB/s): slower on this cluster, though it sends fewer bytes
    full = 3 * (63 * A_INTER + 63 / 64 * NB / BW_NODE)
    hyb = 3 * (7 * A_INTRA + 7 / 8 * NB / BW_INTRA) + 14 * A_INTER + 2 * 7 / 8 * NB / 8 / (BW_NODE / G)
    assert hybrid.time_saved_s == pytest.approx(full - hyb, rel=1e-9) and hybrid.time_saved_s < 0
    assert hybrid.bytes_saved_per_rank > 0
    assert hybrid.slower and hybrid in slower(h100.plan) and hybrid not in helps(h100.plan)
    assert max(p.rank for p in helps(h100.plan)) < min(p.rank for p in slower(h100.plan))
    assert all(p.time_saved_s >= 0 for p in helps(h100.plan) if p.time_saved_s is not None)
    assert [p.rank for p in h100.plan] == list(range(1, len(h100.plan) + 1))
    assert h100.to_dict()["plan"][hybrid.rank - 1]["slower"] is True


def test_verdict_states_in_network_numbers_on_the_cluster(h100):
    # dp all-reduce per parameter per rank: ring 2·63/64·2 = 3.94 B; NVLS (1 + 1/8 + 7/32)·2 = 2.69 B;
    # the #4582 all-gather alone 63/64·2 = 1.97 B
    text = h100.in_network_finding
    assert "sends 2.69 bytes per parameter per rank instead of a ring's 3.94" in text
    assert "all-gather alone: 1.97" in text and "data-parallel" in text
    assert "On dgx-h100, N = 64" in text and text in h100.verdict
    assert "simulated deepspeed-zero2 with nvls switches: max rel diff" in text


def test_cluster_without_in_network_reduction_prices_it_as_unavailable():
    res = run_feasibility(FeasibilityConfig(n=4, steps=1), ["dp", "deepspeed-zero2", "colocated"],
                          plan_topology="dgx-a100", plan_n=64)
    item = _item(res, "dp", "dp", "nvls+sharp")
    assert item.available is False and res.plan_basis["in_network_available"] is False
    assert "no in-network reduction" in res.in_network_finding


def test_approximate_tier_lists_error_feedback_compression_with_sources(h100):
    approx = {p.action.split(" (")[0]: p for p in h100.plan if p.update == "approximate"}
    one_bit = next(p for a, p in approx.items() if "1-bit" in a)
    # 1 bit instead of 16 on dp's all-reduce: 15/16 of 2·63/64·n
    assert one_bit.bytes_saved_per_rank == pytest.approx(15 / 16 * 2 * 63 / 64 * NB, rel=1e-12)
    assert "2102.02888" in one_bit.note and "2202.06009" in one_bit.note
    power = next(p for a, p in approx.items() if "PowerSGD" in p.action)
    assert power.bytes_saved_per_rank is None and "1905.13727" in power.note


def test_lower_bound_names_what_goes_below_it(h100):
    lb = h100.to_dict()["lower_bound"]
    assert "in-network" in lb["below_ring_step"]
    assert any("fewer bits" in x for x in lb["below_bound"])
    assert any("low-rank or sparse" in x for x in lb["below_bound"])
    assert any("fewer reductions" in x for x in lb["below_bound"])


def test_one_rank_reduces_nothing_in_a_switch_or_on_a_ring():
    res = run_feasibility(FeasibilityConfig(n=1, steps=2), ["dp", "deepspeed-zero2", "zero2", "colocated"],
                          plan_topology="dgx-h100")
    for p in res.plan:
        if p.in_network:
            assert p.bytes_saved_per_rank == 0 and p.time_saved_s == 0 and not p.slower
    assert "with one rank nothing is reduced" in res.in_network_finding
