"""The HGX H100 4-GPU board (``hgx-h100-4gpu``): its figures against their sources, by hand, and which device
lines pick it.

Sources: the H100 SXM5's 18 NVLink4 links, 25 GB/s each way a link (900 GB/s both ways; NVIDIA H100
datasheet); on the 4-GPU board no NVSwitch, the links split 6 to each of the other three GPUs; NCCL's figure
for an sm90 link, 20.6 GB/s (``src/graph/topo.h`` ``SM90_NVLINK_BW``, v2.20 on); 4 InfiniBand ports of 200
Gb/s a Snellius gpu_h100 node (ibstat in odissei-benchmarks/nccl-tests ``runs/2nodes/ib_speed.txt``).
"""

import pytest

from zerocalc.errors import ConfigError
from zerocalc.nccl.graph import comm_nvlink_GBps, intra_bw_GBps
from zerocalc.nccl.tables import release_for
from zerocalc.topology import PRESETS, nvlink_mesh_peers
from zerocalc.topology.devices import preset_for_devices, preset_for_gpu

BOARD = PRESETS["hgx-h100-4gpu"]
SM90_NVLINK_BW = 20.6  # GB/s a link, NCCL's src/graph/topo.h from v2.20
LINKS, LINK_GBPS_EACH_WAY, NICS, NIC_GBPS = 18, 25.0, 4, 200.0  # datasheet; ibstat's 4 ports at Rate 200


def test_the_board_is_its_sources_figures():
    assert (BOARD.gpus_per_node, BOARD.compute_capability, BOARD.nvlink_gen) == (4, 90, 4)
    assert (BOARD.nvlinks_per_gpu, BOARD.nvswitch_gen, BOARD.in_network_reduction) == (LINKS, 0, ())
    assert BOARD.intra.bw_Bps == pytest.approx(LINKS * LINK_GBPS_EACH_WAY * 1e9)  # 450 GB/s each way
    assert (BOARD.nics_per_node, BOARD.nic_Gbps) == (NICS, NIC_GBPS)
    assert BOARD.inter.bw_Bps == pytest.approx(NICS * NIC_GBPS / 8 * 1e9)  # 100 GB/s a node
    assert not BOARD.nvls  # no NVSwitch: no NVLink SHARP


def test_nccls_view_of_the_mesh_by_hand():
    """A full mesh: 18 links over 3 peers, 6 a pair; NCCL prices a GPU's links at 18 × 20.6 = 370.8 GB/s
    and a pair's at 6 × 20.6 = 123.6; a communicator of 2 or 3 of the 4 GPUs keeps their pairs' links."""
    assert nvlink_mesh_peers(BOARD) == 3 and LINKS // 3 == 6
    release, _ = release_for("2.22.3")
    assert intra_bw_GBps(BOARD, release) == pytest.approx(LINKS * SM90_NVLINK_BW)
    assert comm_nvlink_GBps(BOARD, release, 2) == pytest.approx((6 * SM90_NVLINK_BW, 6 * SM90_NVLINK_BW))
    assert comm_nvlink_GBps(BOARD, release, 3) == pytest.approx((6 * SM90_NVLINK_BW, 12 * SM90_NVLINK_BW))


IB = {"ib": [(12, "NET/IB")]}


@pytest.mark.parametrize("gpu", ["NVIDIA H100", "H100", "nvidia h100"])
def test_a_plain_h100_name_is_the_4gpu_board(gpu):
    assert preset_for_gpu(gpu) == "hgx-h100-4gpu"
    topo, how = preset_for_devices({gpu: 8}, {"a": 4, "b": 4}, where="f", network=IB)
    assert (topo.name, topo.gpus_per_node) == ("hgx-h100-4gpu", 4)
    assert "4 per host, 2 hosts" in how and "HGX H100 4-GPU" in how


def test_fewer_plain_h100s_a_host_keep_their_pairs_links():
    """2 a host on 2 hosts: nodes of 2 GPUs, the pair's 6 links and 2 of the 4 NICs."""
    topo, how = preset_for_devices({"NVIDIA H100": 4}, {"a": 2, "b": 2}, where="f", network=IB)
    assert (topo.name, topo.gpus_per_node) == ("hgx-h100-4gpu", 2)
    assert (topo.nvlinks_per_gpu, topo.nics_per_node) == (6, 2)
    assert "6 NVLinks a GPU" in how


def test_eight_plain_h100s_a_host_are_no_4gpu_board():
    with pytest.raises(ConfigError, match="8 ranks per host, more than the 4 GPUs of a hgx-h100-4gpu") as exc:
        preset_for_devices({"NVIDIA H100": 16}, {"a": 8, "b": 8}, where="f", network=IB)
    assert exc.value.option == "--topology"


@pytest.mark.parametrize("gpu,preset", [
    ("NVIDIA H100 80GB HBM3", "dgx-h100"),  # the 8-GPU boards' module, also when a run puts 4 a host
    ("NVIDIA H100 PCIe", "pcie-gen5"), ("NVIDIA H100 NVL", "pcie-gen5"), ("NVIDIA GH200 480GB", "gh200"),
])
def test_other_h100_names_keep_their_presets(gpu, preset):
    assert preset_for_gpu(gpu) == preset


def test_four_80gb_hbm3_h100s_a_host_stay_dgx_h100_nodes_of_four():
    topo, how = preset_for_devices({"NVIDIA H100 80GB HBM3": 8}, {"a": 4, "b": 4}, where="f", network=IB)
    assert (topo.name, topo.gpus_per_node, topo.nvswitch_gen) == ("dgx-h100", 4, 3)
    assert "HGX H100 4-GPU" not in how
