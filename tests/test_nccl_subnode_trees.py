"""A few GPUs of each node across 2 nodes (``mpirun -n 2 … -g 2`` on DGX H100): NCCL's tree graph is searched
with the ring's channels after their duplication and its second pass raises ``bwIntra`` from there
(``src/init.cc`` ``treeGraph->minChannels = maxChannels = ringGraph->nChannels``; ``src/graph/search.cc``
``ncclTopoCompute``: ``ncclTopoDupChannels`` before pass 2, "increase bwIntra for trees (2 nodes or collnet)",
v2.19.3-v2.30.7), and ``ncclTopoTuneModel`` prices 2 nodes on ``bwIntra``. Figures derived by hand below."""

from __future__ import annotations

import pytest
from sweep_files import check_json, file_rows

from zerocalc.nccl import Algorithm, Collective, Protocol, release_for, tune
from zerocalc.nccl.graph import machine
from zerocalc.topology import get_topology
from zerocalc.topology.devices import nodes_of

DGX_G2 = "all_reduce_perf-4xH100-2nodes-2pernode-g2-dgx.txt"
REL = release_for("2.30.7")[0]


def two_gpus_a_node():
    topo, _ = nodes_of(get_topology("dgx-h100"), 2)
    return topo


def test_two_gpus_a_node_tree_graph_raised_after_the_rings_duplication():
    """Ring: 2 NICs of 400 Gb/s (50 GB/s) behind PCIe gen5 x16 (48 GB/s, topo.cc) → the first speed of
    sm90SpeedArrayInter, 48, one channel a NIC: 2 × 48; ncclTopoDupChannels (48 ≥ 25, not more than 4
    channels) → 4 × 24. Tree: 4 channels (min = max = the ring's) at 24, then bwIntra up a speed at a time
    (30, 40, 42, 45, 48) while below 2 × bwInter = 48: 4 × 48 / 24."""
    m = machine(two_gpus_a_node(), 4, REL)
    ring, tree = m.graphs[Algorithm.RING], m.graphs[Algorithm.TREE]
    assert (ring.n_channels, ring.bw_intra, ring.bw_inter) == (4, 24.0, 24.0)
    assert (tree.n_channels, tree.bw_intra, tree.bw_inter) == (4, 48.0, 24.0)


def test_full_nodes_keep_their_tree_graph():
    """8 GPUs and 8 NICs a node: 8 × 48, not duplicated (sm90 below 50 GB/s with more than 4 channels), and
    48 is the array's top speed, so pass 2 has nothing to raise."""
    tree = machine(get_topology("dgx-h100"), 16, REL).graphs[Algorithm.TREE]
    assert (tree.n_channels, tree.bw_intra, tree.bw_inter) == (8, 48.0, 48.0)


def test_nccl_prices_tree_above_ring_on_two_gpus_a_node():
    """tuning.cc (v2.30.7), 2 nodes: Tree/Simple all-reduce min(4 × 48 × 0.92, 4 × perChMaxTreeBw 41.4
    (Hopper, N2)) × 0.5 = 82.8 GB/s; Ring/Simple 4 × 24 × nRanks / nsteps (4 / 6) = 64 GB/s; NCCL picks
    Tree at 1 GiB."""
    t = tune(two_gpus_a_node(), 4, REL)
    bw = {a: t.entries[(Collective.ALL_REDUCE, a, Protocol.SIMPLE)].bandwidth_GBps
          for a in (Algorithm.TREE, Algorithm.RING)}
    assert bw[Algorithm.TREE] == pytest.approx(82.8)
    assert bw[Algorithm.RING] == pytest.approx(64.0)
    assert t.choose(Collective.ALL_REDUCE, 1 << 30)[0] == Algorithm.TREE


def test_dgx_two_gpus_a_host_large_rows_run_faster_than_any_ring_and_are_priced_as_trees():
    """From 128 MiB the file's algorithm bandwidth (size / time, counted here) exceeds what a ring could carry
    through each host's 2 NICs (2 × 50 GB/s × nRanks / (2 (nRanks − 1)) = 66.7 GB/s), as a tree does (its
    network traffic a node is the size once each way, the ring's 1.5 times it; NVIDIA's maintainer: "On two
    nodes, NCCL uses the tree (or nvlstree) algorithm which can indeed go beyond the network bottleneck",
    NVIDIA/nccl-tests issue 196). zerocalc prices those rows as NCCL's Tree: within 0.5-2x, and from 512 MiB,
    where the sweep's bandwidth has levelled (within 2 % from one size to the next), within 0.8-1.25x."""
    big = [(s, t) for s, t, _ in file_rows(DGX_G2) if s >= 128 << 20]
    assert len(big) >= 6 and all(s / (t * 1e-6) / 1e9 > 2 * 50.0 * 4 / 6 for s, t in big)
    sweep = check_json(DGX_G2)
    rows = [r for r in sweep["rows"] if r["bytes"] >= 128 << 20]
    assert len(rows) == len(big)
    assert all(r["algorithm"] == "Tree" for r in rows)
    assert all(0.5 <= r["ratio"] <= 2.0 for r in rows)
    level = [r for r in rows if r["bytes"] >= 512 << 20]
    assert len(level) >= 5 and all(0.8 <= r["ratio"] <= 1.25 for r in level)


def four_gpus_a_node():
    topo, _ = nodes_of(get_topology("dgx-h100"), 4)
    return topo


def test_four_gpus_a_node_tree_raise_stops_at_the_nvlink():
    """Ring: 4 NICs × 48, duplicated (4 channels, not more than 4) → 8 × 24. Tree: 8 channels at 24,
    then pass 2 raises bwIntra (30, 40, 42, 45) while each GPU's link to the NVSwitch (18 NVLinks ×
    20.6 GB/s = 370.8, topo.h SM90_NVLINK_BW) holds 8 channels: 8 × 45 = 360 fits, 8 × 48 = 384 does
    not (search.cc followPath counts bwIntra once a channel on each hop of the chain, v2.30.7)."""
    m = machine(four_gpus_a_node(), 8, REL)
    ring, tree = m.graphs[Algorithm.RING], m.graphs[Algorithm.TREE]
    assert (ring.n_channels, ring.bw_intra, ring.bw_inter) == (8, 24.0, 24.0)
    assert (tree.n_channels, tree.bw_intra, tree.bw_inter) == (8, 45.0, 24.0)


def test_nccl_prices_tree_above_nvls_tree_on_four_gpus_a_node():
    """tuning.cc (v2.30.7), 2 nodes, Hopper: Tree/Simple all-reduce min(8 × 45 × 0.92, 8 ×
    perChMaxTreeBw 41.4) × 0.5 = 165.6 GB/s; NVLSTree: 4 heads at 48 (one a NIC), a channel
    min(48 × nvlsEfficiency 0.85 × 3/4 × 2, 48 × 2 (2 nodes), perChMaxNVLSTreeBw 57.7) = 57.7,
    × 4 × nRanks / nsteps (8 / 14) = 131.9 GB/s. No rule of tuning.cc or enqueue.cc
    (topoGetAlgoInfo: least time) prefers NVLSTree where NVLS is supported: NCCL picks Tree at 1 GiB."""
    t = tune(four_gpus_a_node(), 8, REL)
    bw = {a: t.entries[(Collective.ALL_REDUCE, a, Protocol.SIMPLE)].bandwidth_GBps
          for a in (Algorithm.TREE, Algorithm.NVLS_TREE)}
    assert bw[Algorithm.TREE] == pytest.approx(165.6)
    assert bw[Algorithm.NVLS_TREE] == pytest.approx(4 * 57.7 * 8 / 14)
    assert t.choose(Collective.ALL_REDUCE, 1 << 30)[0] == Algorithm.TREE
