"""The ``abci-v`` preset: ABCI 2.0's Compute Node (V), its figures against their sources.

ABCI's system overview (aistabci/abci-docs ``en/docs/system-overview.md``: Compute Node (V), 2× Xeon Gold
6148, 4× V100 for NVLink 16 GiB, 2× InfiniBand EDR 100 Gb/s; its block diagram: 2 NVLink2 links between each
pair of GPUs, the EDR NICs on the CPUs) and NVIDIA's V100 datasheet (6 NVLink2 links, 300 GB/s a GPU both
ways).
"""

from __future__ import annotations

import pytest

from zerocalc.nccl.graph import machine
from zerocalc.nccl.tables import Algorithm, release_for
from zerocalc.topology import PRESETS, nvlink_mesh_peers


def test_abci_v_preset_figures_are_its_sources():
    v = PRESETS["abci-v"]
    assert (v.gpus_per_node, v.nics_per_node, v.nic_Gbps) == (4, 2, 100.0)  # 4 V100, 2 × EDR 100 Gb/s
    assert v.inter.bw_Bps == pytest.approx(2 * 100e9 / 8)
    # NVIDIA V100 SXM2: 6 NVLink2 links of 25 GB/s each way; ABCI's diagram: 2 to each of the other three
    assert (v.nvlink_gen, v.nvlinks_per_gpu, v.nvswitch_gen) == (2, 6, 0)
    assert nvlink_mesh_peers(v) == 3 and v.nvlinks_per_gpu // 3 == 2
    assert v.intra.bw_Bps == pytest.approx(6 * 25e9)
    assert (v.compute_capability, v.pcie_gen, v.cpu_vendor) == (70, 3, "intel")
    assert "Xeon Gold 6148" in v.source and "EDR" in v.source
    # the NICs on the CPUs, the GPUs under PCIe switches: no GPUDirect RDMA at NCCL's level PXB
    assert v.gpudirect_rdma is False


def test_across_v_nodes_nccl_goes_through_host_memory_without_ll128():
    """Two V nodes: one ring channel per EDR NIC, each at the GPU's PCIe Gen3 x16 (NCCL's 12 GB/s: topo.h
    PCI_WIDTH, v2.8.4), LL128 off (GPU-NIC path PHB) and the host relay's share of the rate; on one node
    nothing of that."""
    rel, _ = release_for("2.8.4")
    two = machine(PRESETS["abci-v"], 8, rel)
    ring = two.graphs[Algorithm.RING]
    assert (two.n_nodes, ring.n_channels, ring.bw_inter) == (2, 2, 12.0)
    assert two.relayed and not two.ll128_path_ok
    one = machine(PRESETS["abci-v"], 4, rel)
    assert one.ll128_path_ok and not one.relayed
