"""NCCL's NVLS / NVLS Tree graph across HGX nodes with a NIC for each GPU (``src/graph/search.cc``).

``ncclTopoSearchRecNet`` takes one NIC a channel and that NIC's local GPU as the channel's head (v2.18.1
on), and ``ncclTopoSearchRecGpu`` then calls ``ncclTopoSearchTryNvls``, which loads each GPU's NVSwitch
link with ``bwIntra`` and its head's twice, as on one node: 8 heads need ``9 × bwIntra`` on one GPU's link.
On H100 / H200 that link is 18 NVLinks × ``SM90_NVLINK_BW`` (``topo.h``: 20.0 GB/s to v2.19.4, 20.6 from
v2.20.3), 360 or 370.8 GB/s. Of ``sm90SpeedArrayInter`` (48, 45, 42, 40, …, the array of a search with
NICs) 9 × 48, 9 × 45 and 9 × 42 exceed it and 9 × 40 fits, so pass 1 ends with 8 channels of 40 (48 gives
6, 45 and 42 give 7; ``ncclTopoCompareGraphs`` keeps an NVLS graph with more channels). From v2.19.3 pass 2
raises ``bwInter`` alone while the NICs (400 Gb/s, 50 GB/s; PCIe Gen5 x16 48) hold it and it is below
``2 · bwIntra``: 42, 45, 48, so NCCL prints ``nChannels 8, bw 40.000000/48.000000`` for the graph. v2.18.x's
pass 2 raises ``bwIntra`` instead, which the NVLink refuses, and keeps 40/40. On one node (no NIC) the
search takes ``sm90SpeedArrayIntra`` instead and its pass 2 reaches 60: NVIDIA/nccl issue 1197 prints
``Pattern 5, crossNic 0, nChannels 8, bw 40.000000/60.000000`` under NCCL 2.19.4."""

import pytest

from zerocalc.nccl import RELEASES, Algorithm, Collective, Protocol, tune
from zerocalc.nccl.graph import machine, nvls_net_speeds
from zerocalc.topology import get_topology

A, C, P = Algorithm, Collective, Protocol
#: search.cc sm90SpeedArrayInter (the same in v2.19.4 and v2.30.7)
SM90_INTER = (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24,
              0.12)


def _nvls(preset: str, ranks: int, version: str) -> tuple[int, float, float]:
    g = machine(get_topology(preset), ranks, RELEASES[version]).graphs[A.NVLS]
    return g.n_channels, g.bw_intra, g.bw_inter


def test_the_search_rule_by_hand():
    # 8 heads on an H100's 370.8 GB/s: 9 x 40 = 360 fits, 9 x 42 = 378 does not; bwInter 42, 45, 48
    assert nvls_net_speeds(SM90_INTER, 18 * 20.6, 8, 48.0) == (40.0, 48.0)
    assert nvls_net_speeds(SM90_INTER, 18 * 20.0, 8, 48.0) == (40.0, 48.0)  # 9 x 40 = 360 exactly
    # v2.18.x: no bwInter step in pass 2
    assert nvls_net_speeds(SM90_INTER, 18 * 20.6, 8, 48.0, raise_inter=False) == (40.0, 40.0)
    # 4 heads (4 GPUs a node, each with its NIC): 5 x 48 = 240 fits at the first speed
    assert nvls_net_speeds(SM90_INTER, 18 * 20.6, 4, 48.0) == (48.0, 48.0)
    # 8 NVLinks (H800, 164.8 GB/s): 9 x 17.5 = 157.5 fits, 9 x 20 = 180 does not; bwInter raised while
    # below 2 x 17.5 = 35: 20, 22, 24, 30, then 40 (checked before the step, as in ncclTopoCompute)
    assert nvls_net_speeds(SM90_INTER, 8 * 20.6, 8, 48.0) == (17.5, 40.0)
    # a 200 Gb/s NIC (25 GB/s) caps both at 24 first; bwInter cannot pass the NIC
    assert nvls_net_speeds(SM90_INTER, 18 * 20.6, 8, 25.0) == (24.0, 24.0)


@pytest.mark.parametrize("preset", ["dgx-h100", "dgx-h200"])
@pytest.mark.parametrize("version", ["2.19", "2.21", "2.26", "2.28", "2.30"])
@pytest.mark.parametrize("ranks", [16, 32])
def test_hgx_hopper_nodes_with_a_nic_a_gpu(preset, version, ranks):
    assert _nvls(preset, ranks, version) == (8, 40.0, 48.0)


def test_nccl_2_18_keeps_pass_one_speed():
    assert _nvls("dgx-h100", 16, "2.18") == (8, 40.0, 40.0)


def test_one_node_keeps_the_intra_node_search():
    # issue 1197's graph line on one node of 8 H100 (NCCL 2.19.4): 8 channels of 40/60
    assert _nvls("dgx-h100", 8, "2.19") == (8, 40.0, 60.0)


def test_the_choice_figures_follow_the_graph():
    # v2.19.4-v2.26.2 tuning.cc: NVLS Tree bw = min(bwIntra, bwInter on <= 2 nodes, bwInter / 2 beyond),
    # x nChannels x 5/6
    two = tune(get_topology("dgx-h100"), 16, RELEASES["2.26"])
    assert two.entries[(C.ALL_REDUCE, A.NVLS_TREE, P.SIMPLE)].bandwidth_GBps == pytest.approx(8 * 40 * 5 / 6)
    four = tune(get_topology("dgx-h100"), 32, RELEASES["2.26"])
    assert four.entries[(C.ALL_REDUCE, A.NVLS_TREE, P.SIMPLE)].bandwidth_GBps == pytest.approx(8 * 24 * 5 / 6)
