"""NCCL release lines 2.18 to 2.29 that have tables of their own: hand derivations from each tag's
tuning.cc, search.cc and topo.h (NVIDIA/nccl), and which table a version gets."""

import dataclasses

import pytest

from zerocalc.nccl import RELEASES, Algorithm, Collective, Protocol, release_for, tune
from zerocalc.topology import get_topology

A, P, C = Algorithm, Protocol, Collective
H100, B200 = get_topology("dgx-h100"), get_topology("dgx-b200")


def entry(topo, ranks, version, coll, algo, proto):
    return tune(topo, ranks, release_for(version)[0]).entries[(coll, algo, proto)]


@pytest.mark.parametrize(("version", "table"), [
    ("2.27.3", "2.27"), ("2.27.5+cuda12.9", "2.27"), ("v2.27.7-1", "2.27"),
    ("2.28.3", "2.28.7"), ("2.28.7", "2.28.7"), ("2.28.9", "2.28"),
    ("2.29.2", "2.29.3"), ("2.29.3", "2.29.3"), ("2.29.7", "2.29"),
])
def test_each_line_gets_its_own_table(version, table):
    # a version of a line with a table gets that line's table (the patch range's, where the patches differ)
    # and no note
    rel, note = release_for(version)
    assert rel.name == table and note is None
    assert rel is RELEASES[table]


def test_versions_past_the_latest_table_say_which_table_they_get():
    rel, note = release_for("2.31.1")
    assert rel.name == "2.30"
    assert note == ("NCCL 2.31.1: priced with the tables of NCCL 2.30 (v2.30.7-1), "
                    "the nearest modelled release")


def test_2_27_nvls_all_gather_bandwidth_one_h100_node():
    # v2.27.7 tuning.cc: NVLS all-gather / reduce-scatter at min(bwIntra · (ppn − 1)/ppn, bwInter · 0.9) a
    # channel (v2.26.2: min(bwIntra, bwInter)), no bus → algorithm conversion for them.
    # NVLS graph on one DGX H100: 8 channels (one per GPU); 18 × 20.6 = 370.8 GB/s of NVLink, 8 copies of a
    # sm90 intra speed within 370.8 · 8/7: 50; bwInter raised up to 2 · 50 → 60 (the fastest speed)
    e = entry(H100, 8, "2.27.7", C.ALL_GATHER, A.NVLS, P.SIMPLE)
    assert e.bandwidth_GBps == pytest.approx(8 * min(50 * 7 / 8, 60 * 0.9))  # 350
    assert entry(H100, 8, "2.26.2", C.ALL_GATHER, A.NVLS, P.SIMPLE).bandwidth_GBps == pytest.approx(8 * 50)


def test_2_27_blackwell_tree_graph_from_the_96_gbps_inter_speed():
    # v2.27.7 search.cc: sm100SpeedArrayInter starts at 96 (v2.26.2: 48). 2 DGX B200 (8 × 400 Gb/s NICs
    # behind PCIe 5: 48 GB/s): ring graph 8 channels at 48; the tree pass raises bwIntra to the next faster
    # speed while below 2 · bwInter: 96 in 2.27 (none faster than 48 in 2.26).
    # tuning.cc Tree/Simple all-reduce on 2 nodes: min(8 · bwIntra · 0.92, 8 · perChMaxTreeBw) · 0.5 with
    # Blackwell's cap 2 · 41.4 (v2.26.2 and v2.27.7 alike)
    e27 = entry(B200, 16, "2.27.7", C.ALL_REDUCE, A.TREE, P.SIMPLE)
    e26 = entry(B200, 16, "2.26.2", C.ALL_REDUCE, A.TREE, P.SIMPLE)
    assert e27.bandwidth_GBps == pytest.approx(min(8 * 96 * .92, 8 * 2 * 41.4) * .5)
    assert e26.bandwidth_GBps == pytest.approx(min(8 * 48 * .92, 8 * 2 * 41.4) * .5)


def test_2_27_ll128_on_any_gpu_from_sm70():
    # v2.27.3 tuning.cc: pEnable &= !(minCompCap < 70 || …) (v2.26.2: a switch on 70, 80, 90, 100, 120).
    # An sm89 node with NVLink and the NIC under the GPU's switch: LL128 off in 2.26, on in 2.27
    l40 = dataclasses.replace(H100, name="sm89-nvlink", compute_capability=89, in_network_reduction=[])
    assert not entry(l40, 8, "2.26.2", C.ALL_REDUCE, A.RING, P.LL128).enabled
    assert entry(l40, 8, "2.27.7", C.ALL_REDUCE, A.RING, P.LL128).enabled


def test_nvls_tree_network_hop_by_2_27_2_28_patches():
    # tuning.cc hwLat[NET][NVLSTree][Simple]: 14 µs in v2.27.7 and v2.28.3/v2.28.7, 20.9 from v2.28.9.
    # NVLS Tree latency on 2 DGX H100: base 0 + NVLink hop 25 + 2 · log2(2) · network hop (no plugin latency)
    for version, hop in (("2.27.7", 14.0), ("2.28.3", 14.0), ("2.28.7", 14.0), ("2.28.9", 20.9),
                         ("2.29.7", 20.9)):
        e = entry(H100, 16, version, C.ALL_REDUCE, A.NVLS_TREE, P.SIMPLE)
        assert e.latency_us == pytest.approx(25 + 2 * 1 * hop), version


def test_2_28_blackwell_ring_ll128_cap_two_nodes():
    # v2.28.7/v2.28.9 tuning.cc perChMaxRingLL128Bws Blackwell {2·36.7, 34.6, 2·36.7}; v2.29.7 and v2.30.7
    # {40, 40, 40}. 2 DGX B200: ring graph 8 × 48; Ring/LL128 bus = min(8 · 48 · 0.92, 8 · cap),
    # × nRanks/nsteps = 16/30 for all-reduce
    for version, cap in (("2.28.9", 34.6), ("2.28.7", 34.6), ("2.29.7", 40.0), ("2.30.7", 40.0)):
        e = entry(B200, 16, version, C.ALL_REDUCE, A.RING, P.LL128)
        assert e.bandwidth_GBps == pytest.approx(min(8 * 48 * .92, 8 * cap) * 16 / 30), version
    # v2.27.7: twice Hopper's 36.7, above the bus
    assert entry(B200, 16, "2.27.7", C.ALL_REDUCE, A.RING, P.LL128).bandwidth_GBps == pytest.approx(
        8 * 48 * .92 * 16 / 30)


def test_2_29_3_blackwell_ring_ll128_cap_four_nodes():
    # v2.29.2/v2.29.3 tuning.cc perChMaxRingLL128Bws Blackwell {34.5, 34.6, 34.5}; v2.29.7 {40, 40, 40}.
    # 4 DGX B200: 8 × 48 ring graph, nRanks/nsteps = 32/62
    for version, cap in (("2.29.2", 34.5), ("2.29.7", 40.0)):
        e = entry(B200, 32, version, C.ALL_REDUCE, A.RING, P.LL128)
        assert e.bandwidth_GBps == pytest.approx(min(8 * 48 * .92, 8 * cap) * 32 / 62), version


def test_2_29_nvls_tree_blackwell_cap_more_than_two_nodes():
    # perChMaxNVLSTreeBws Blackwell N4: 43.1 (v2.28.7), 43.8 (v2.28.9 to v2.29.7), 80.0 (v2.30.7).
    # 4 DGX B200, NVLS graph 8 channels at 48 / 48: per channel min(48 · nvlsEfficiency 0.74 · 7/8 · 2,
    # 48, cap), × 8 channels × nRanks/nsteps = 32/62
    for version, cap in (("2.28.7", 43.1), ("2.28.9", 43.8), ("2.29.7", 43.8), ("2.30.7", 80.0)):
        e = entry(B200, 32, version, C.ALL_REDUCE, A.NVLS_TREE, P.SIMPLE)
        assert e.bandwidth_GBps == pytest.approx(8 * min(48 * .74 * 7 / 8 * 2, 48, cap) * 32 / 62), version


def test_nvls_tree_correction_on_blackwell_from_2_29():
    # v2.29.2 ncclTopoGetAlgoTime: NVLS Tree all-reduce on sm100+ (x86)
    # × treeCorrectionFactor[p][log2(n >> 6)];
    # v2.28.9 has no such line. At 1 MiB the index is 14: Simple's factor 0.5
    n = 1 << 20
    for version, factor in (("2.28.9", 1.0), ("2.29.7", 0.5)):
        t = tune(B200, 32, release_for(version)[0])
        e = t.entries[(C.ALL_REDUCE, A.NVLS_TREE, P.SIMPLE)]
        assert t.time_s(C.ALL_REDUCE, A.NVLS_TREE, P.SIMPLE, n) * 1e6 == pytest.approx(
            e.latency_us + n / (1000 * e.bandwidth_GBps * factor)), version
