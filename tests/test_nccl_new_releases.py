"""NCCL release lines 2.18 to 2.29 that have tables of their own: hand derivations from each tag's
tuning.cc, search.cc and topo.h (NVIDIA/nccl), and which table a version gets."""

import dataclasses

import pytest

from zerocalc.nccl import RELEASES, Algorithm, Collective, Protocol, release_for, tune
from zerocalc.nccl.p2p import p2p_comm, protocol
from zerocalc.topology import PRESETS, get_topology
from zerocalc.topology.devices import nodes_of

A, P, C = Algorithm, Protocol, Collective
H100, B200, A100 = get_topology("dgx-h100"), get_topology("dgx-b200"), get_topology("dgx-a100")


def entry(topo, ranks, version, coll, algo, proto):
    return tune(topo, ranks, release_for(version)[0]).entries[(coll, algo, proto)]


@pytest.mark.parametrize(("version", "table"), [
    ("2.18.1", "2.18.1"), ("2.18.3", "2.18"), ("2.18.5", "2.18"), ("v2.18.6-1", "2.18"),
    ("2.20.3", "2.20"), ("2.20.5+cuda12.4", "2.20"), ("2.22.3", "2.22"), ("2.23.4", "2.23"),
    ("2.24.3", "2.24"),
    ("2.27.0", "2.27.3"), ("2.27.3", "2.27.3"), ("2.27.5+cuda12.9", "2.27.5"), ("2.27.6", "2.27.5"),
    ("v2.27.7-1", "2.27"), ("2.28.3", "2.28.3"), ("2.28.6", "2.28.3"), ("2.28.7", "2.28.7"),
    ("2.28.9", "2.28"),
    ("2.29.2", "2.29.3"), ("2.29.3", "2.29.3"), ("2.29.7", "2.29"),
])
def test_each_line_gets_its_own_table(version, table):
    # a version of a line with a table gets that line's table (the patch range's, where the patches differ)
    # and no note
    rel, note = release_for(version)
    assert rel.name == table and note is None
    assert rel is RELEASES[table]


def test_2_25_gets_2_26s_table_and_says_so():
    # v2.25.1 against v2.26.2: identical tuning.cc tables, speeds, topo.h, device.h, algorithm rules; only
    # tuning.cc's sm60 test for PAT (modelled) and the tree pattern it reads (not modelled) differ
    rel, note = release_for("2.25.1")
    assert rel is RELEASES["2.26"]
    assert note == "NCCL 2.25.1: priced with the tables of NCCL 2.26 (v2.26.2-1), the same tables"


def test_versions_past_the_latest_table_say_which_table_they_get():
    rel, note = release_for("2.31.1")
    assert rel.name == "2.30"
    assert note == ("NCCL 2.31.1: priced with the tables of NCCL 2.30 (v2.30.7-1), "
                    "the nearest modelled release")


def test_2_27_nvls_all_gather_bandwidth_one_h100_node():
    # v2.27.7 tuning.cc: NVLS all-gather / reduce-scatter at min(bwIntra · (ppn − 1)/ppn, bwInter · 0.9) a
    # channel (v2.26.2: min(bwIntra, bwInter)), no bus → algorithm conversion for them.
    # NVLS graph on one DGX H100: 8 channels (one per GPU); 18 × 20.6 = 370.8 GB/s of NVLink carries bwIntra
    # once a channel and twice for its head, (8 + 1) × bwIntra: 40 (search.cc ncclTopoSearchTryNvls);
    # bwInter raised up to 2 · 40 → 60 (the fastest speed)
    e = entry(H100, 8, "2.27.7", C.ALL_GATHER, A.NVLS, P.SIMPLE)
    assert e.bandwidth_GBps == pytest.approx(8 * min(40 * 7 / 8, 60 * 0.9))  # 280
    assert entry(H100, 8, "2.26.2", C.ALL_GATHER, A.NVLS, P.SIMPLE).bandwidth_GBps == pytest.approx(8 * 40)


def test_2_27_blackwell_tree_graph_from_the_96_gbps_inter_speed():
    # v2.27.7 search.cc: sm100SpeedArrayInter starts at 96 (v2.26.2: 48). 2 DGX B200 (8 × 400 Gb/s NICs
    # behind PCIe 5: 48 GB/s): ring graph 8 channels at 48; the tree pass would raise bwIntra to the next
    # faster speed while below 2 · bwInter, 96 in 2.27 (none faster than 48 in 2.26), but 8 channels × 96 =
    # 768 exceed a GPU's link to the NVSwitch (18 × SM100_NVLINK_BW 40.1 = 721.8, topo.h; followPath counts
    # bwIntra once a channel on each hop), so bwIntra stays 48 in both.
    # tuning.cc Tree/Simple all-reduce on 2 nodes: min(8 · bwIntra · 0.92, 8 · perChMaxTreeBw) · 0.5 with
    # Blackwell's cap 2 · 41.4 (v2.26.2 and v2.27.7 alike)
    e27 = entry(B200, 16, "2.27.7", C.ALL_REDUCE, A.TREE, P.SIMPLE)
    e26 = entry(B200, 16, "2.26.2", C.ALL_REDUCE, A.TREE, P.SIMPLE)
    assert e27.bandwidth_GBps == pytest.approx(min(8 * 48 * .92, 8 * 2 * 41.4) * .5)
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
    # v2.27.7 and v2.28.3: twice Hopper's 36.7, above the bus
    for version in ("2.27.7", "2.28.3"):
        assert entry(B200, 16, version, C.ALL_REDUCE, A.RING, P.LL128).bandwidth_GBps == pytest.approx(
            8 * 48 * .92 * 16 / 30), version


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


def test_2_18_tree_simple_latency_two_h100_nodes():
    # v2.18.6 tuning.cc: Tree/Simple base 0, hops 4 (NVLink) and 14 (network) µs; latency
    # 2 · ((nRanks/nNodes − 1) · intraLat + log2(nNodes) · interLat) = 2 · (7 · 4 + 1 · 14); v2.18.1 and
    # v2.19.4:
    # hops 28 and 28
    e = entry(H100, 16, "2.18.6", C.ALL_REDUCE, A.TREE, P.SIMPLE)
    assert e.latency_us == pytest.approx(2 * (7 * 4 + 14))
    for version in ("2.18.1", "2.19.4"):
        e = entry(H100, 16, version, C.ALL_REDUCE, A.TREE, P.SIMPLE)
        assert e.latency_us == pytest.approx(2 * (7 * 28 + 28)), version


def test_2_18_nvls_tree_two_h100_nodes():
    # v2.18.6 tuning.cc: NVLS Tree latency = base 23 + 2 · (nNodes − 1) · hwLat[NET][NVLSTree] 19 (v2.19.4:
    # 0 + NVLink 23 + 2 · log2(nNodes) · 14); bandwidth: the NVLS graph's bwIntra on ≤ 2 nodes × 0.7 ·
    # nNodes / (2 (nNodes − 1)) (v2.19.4: min(bwIntra, bwInter) × 5/6). The graph (search.cc, v2.18.6 and
    # v2.19.4): one channel a NIC, 8 heads, each channel bwIntra on every GPU's NVSwitch link and twice on
    # its head's (ncclTopoSearchTryNvls), so 9 × bwIntra ≤ 18 × 20 (v2.18/v2.19 topo.h SM90_NVLINK_BW): 40
    # of the sm90 inter-node speeds 48, 45, 42, 40; v2.19.4's pass 2 then raises bwInter alone to 48 (NIC 50)
    e = entry(H100, 16, "2.18.6", C.ALL_REDUCE, A.NVLS_TREE, P.SIMPLE)
    assert e.latency_us == pytest.approx(23 + 2 * 1 * 19)
    assert e.bandwidth_GBps == pytest.approx(8 * 40 * .7 * 2 / (2 * 1))
    e19 = entry(H100, 16, "2.19.4", C.ALL_REDUCE, A.NVLS_TREE, P.SIMPLE)
    assert (e19.latency_us, e19.bandwidth_GBps) == (pytest.approx(23 + 2 * 14), pytest.approx(8 * 40 * 5 / 6))


def test_2_18_nvls_one_h100_node_and_no_nvls_all_gather():
    # One DGX H100: 18 × 20 GB/s (topo.h SM90_NVLINK_BW 20.0) = 360; 8 copies of a v2.18.6 sm90 intra speed
    # (60, 40, …) within 360 · 8/7: 40 (v2.19.4's array has 50). tuning.cc: bus 8 · 40 × 5/6 (v2.18.1: ×
    # 0.75);
    # latency base 23 alone on one node. v2.18.x prices all-gather / reduce-scatter on Ring only.
    for version, ratio in (("2.18.6", 5 / 6), ("2.18.1", .75)):
        t = tune(H100, 8, release_for(version)[0])
        e = t.entries[(C.ALL_REDUCE, A.NVLS, P.SIMPLE)]
        assert e.latency_us == pytest.approx(23.0), version
        assert e.bandwidth_GBps == pytest.approx(8 * 40 * ratio), version
        assert (C.ALL_GATHER, A.NVLS, P.SIMPLE) not in t.entries
        assert t.choose(C.ALL_GATHER, 1 << 20)[0] == A.RING


def test_2_18_1_hopper_tree_caps_four_nodes():
    # 4 DGX H100, tree graph 8 × 48. Tree/LL128 all-reduce: min(min(8 · 48 · 0.92, 8 · perChMaxTreeBw) ·
    # 120/128,
    # 8 · perChMaxTreeLL128Bw) · 0.5 — v2.18.1: Hopper caps 33 and 36.7 (one LL128 cap a row);
    # v2.18.6: 36 and 29
    for version, tree, ll128 in (("2.18.1", 33.0, 36.7), ("2.18.6", 36.0, 29.0)):
        e = entry(H100, 32, version, C.ALL_REDUCE, A.TREE, P.LL128)
        assert e.bandwidth_GBps == pytest.approx(min(min(8 * 48 * .92, 8 * tree) * 120 / 128, 8 * ll128) * .5)


def test_2_20_between_2_19_and_2_21():
    # v2.20.5 keeps v2.19.4's NVLS NVLink hop (23 µs; v2.21.5: 25): NVLS latency on one DGX H100 = that hop
    for version, hop in (("2.19.4", 23.0), ("2.20.5", 23.0), ("2.21.5", 25.0)):
        assert entry(H100, 8, version, C.ALL_REDUCE, A.NVLS, P.SIMPLE).latency_us == pytest.approx(hop)
    # Ring/LL all-reduce on one DGX A100 (12 channels × 20 GB/s after duplication): v2.20.5 min(llMaxBw 87.7,
    # bus / 4) (v2.21.5: bus / 2), × nRanks/nsteps = 8/14
    for version, f in (("2.20.5", 1 / 4), ("2.21.5", 1 / 2)):
        e = entry(A100, 8, version, C.ALL_REDUCE, A.RING, P.LL)
        assert e.bandwidth_GBps == pytest.approx(min(87.7, 12 * 20 * f) * 8 / 14), version
    # connect.cc "4 compute channels": v2.19.4 doubles while 2n ≤ MAXCHANNELS (16 → 32), v2.20.5 only below
    # 16 channels (16 stays); 2 DGX H100: ring graph 8 channels, doubled to 16 by the post-set
    assert tune(H100, 16, release_for("2.19.4")[0]).comm_channels == 32
    assert tune(H100, 16, release_for("2.20.5")[0]).comm_channels == 16


def test_2_22_p2p_ll_threshold_per_peer():
    # tuning.cc of v2.22.3 is v2.21.5's (its latencies and bandwidths alike); enqueue.cc differs: v2.21.5
    # sends
    # a p2p chunk LL up to NCCL_P2P_LL_THRESHOLD (16 KiB), v2.22.3's addP2pToPlan up to nChannelsMax × that
    t21, t22 = (tune(H100, 8, release_for(v)[0]) for v in ("2.21.5", "2.22.3"))
    assert {k: (e.latency_us, e.bandwidth_GBps) for k, e in t21.entries.items()} == {
        k: (e.latency_us, e.bandwidth_GBps) for k, e in t22.entries.items()}
    for version, t, expected in (("2.21.5", t21, P.SIMPLE), ("2.22.3", t22, P.LL)):
        comm = p2p_comm(H100, 8, t.release, version, t.comm_channels)
        assert comm.per_peer > 1
        assert protocol(comm, 32 * 1024) == expected, version


def test_2_23_pat_bandwidth_factor():
    # v2.23.4 tuning.cc: PAT bus × 0.85 (v2.24.3 on: × 0.75); 10 one-GPU H100 nodes: tree graph 2 channels ×
    # 24 GB/s, not converted to an algorithm bandwidth; latency 8 + log2(10) · 14/3.5 + 10 · 2.8 = 48 µs in
    # both
    one, _ = nodes_of(PRESETS["dgx-h100"], 1)
    for version, f in (("2.23.4", .85), ("2.24.3", .75)):
        e = entry(one, 10, version, C.ALL_GATHER, A.PAT, P.SIMPLE)
        assert (e.latency_us, e.bandwidth_GBps) == (pytest.approx(48.0), pytest.approx(2 * 24 * f)), version
    assert (C.ALL_GATHER, A.PAT, P.SIMPLE) not in tune(one, 10, release_for("2.22.3")[0]).entries


def test_2_24_blackwell_without_rows_of_its_own():
    # v2.24.3 has no Blackwell row (sm100 reads Hopper's), no SM100_NVLINK_BW (sm100 takes sm90's 20.6 a link)
    # and no sm100 speed arrays. One DGX B200: 18 × 20.6 = 370.8 GB/s, sm90 intra speed 60 → 6 channels,
    # duplicated (≥ 50 GB/s) to 12 × 30; v2.26.2: 18 × 40 = 720, sm100 speed 90 → 8, duplicated to 16 × 45.
    # Ring/Simple all-reduce: channels × bw × 8/14
    for version, graph in (("2.24.3", (12, 30.0)), ("2.26.2", (16, 45.0))):
        t = tune(B200, 8, release_for(version)[0])
        g = t.machine.graphs[A.RING]
        assert (g.n_channels, g.bw_intra) == graph
        assert t.entries[(C.ALL_REDUCE, A.RING, P.SIMPLE)].bandwidth_GBps == pytest.approx(
            graph[0] * graph[1] * 8 / 14)
    # 2 nodes: Tree/Simple capped by Hopper's 41.4 a channel (v2.26.2: Blackwell's 2 · 41.4)
    for version, cap in (("2.24.3", 41.4), ("2.26.2", 2 * 41.4)):
        e = entry(B200, 16, version, C.ALL_REDUCE, A.TREE, P.SIMPLE)
        assert e.bandwidth_GBps == pytest.approx(min(8 * 48 * .92, 8 * cap) * .5), version
    # connect.cc: "4 compute channels" on sm90 only in v2.24.3 (minCompCap == 90), sm90 and later in v2.26.2
    assert tune(B200, 16, release_for("2.24.3")[0]).comm_channels == 16
    assert tune(B200, 16, release_for("2.26.2")[0]).comm_channels == 32


def test_2_27_patches_differ_in_blackwell_inter_speeds():
    # search.cc sm100SpeedArrayInter: v2.27.3 (47.9, 45, …), v2.27.5 (48, 45.1, …), v2.27.7 (96, 48, 45.1, …).
    # 2 DGX B200, one 48 GB/s path to each of 8 NICs: the ring graph takes the first speed ≤ 48, 8 channels;
    # the tree pass tries the next faster speed below 2 · bwInter, which only v2.27.7 has (96), but 8 × 96 =
    # 768 is more than a GPU's 18 × 40.1 = 721.8 GB/s to the NVSwitch: bwIntra stays 48.
    # Ring/Simple all-reduce = 8 · speed · 16/30; Tree/Simple = min(8 · bwIntra · 0.92, 8 · 2 · 41.4) · 0.5
    for version, ring, tree in (("2.27.3", 47.9, 47.9), ("2.27.5", 48.0, 48.0), ("2.27.7", 48.0, 48.0)):
        t = tune(B200, 16, release_for(version)[0])
        assert t.entries[(C.ALL_REDUCE, A.RING, P.SIMPLE)].bandwidth_GBps == pytest.approx(
            8 * ring * 16 / 30), version
        assert t.entries[(C.ALL_REDUCE, A.TREE, P.SIMPLE)].bandwidth_GBps == pytest.approx(
            min(8 * tree * .92, 8 * 2 * 41.4) * .5), version
    # topo.h SM100_NVLINK_BW: 40.0 in v2.27.3, 40.1 from v2.27.5
    assert RELEASES["2.27.3"].nvlink_bw_per_link[100] == 40.0
    assert RELEASES["2.27.5"].nvlink_bw_per_link[100] == 40.1
