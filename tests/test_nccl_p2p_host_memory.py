"""Point-to-point across nodes without GPUDirect RDMA: the host-memory path's bound, one per NIC and the
collectives' (zerocalc.nccl.p2p.host_path_GBps), by hand from NCCL's source on a bundled run.

The run (tests/data/traces/README.md names its source): a sendrecv between two hosts of one H100 and one
RoCE port each, NCCL 2.26.2, its network channels ``via NET/IB/1/Shared`` (no ``/GDRDMA``), its
communicator of ``2 coll channels``. Everything the tests expect is counted from the file by a plain split
or computed here from constants cited to NCCL's source and NVIDIA's own figure, not from zerocalc.
"""

from dataclasses import replace

import pytest
from sweep_files import DATA, check_json, file_rows

from zerocalc.nccl.graph import Graph
from zerocalc.nccl.p2p import p2p_comm
from zerocalc.nccl.tables import release_for
from zerocalc.topology import PRESETS

MOC_SENDRECV = "sendrecv-2xH100-moc-2nodes-roce-no-test-name-nccl2.26.2.log"

# NCCL v2.26.2, src/graph/topo.cc kvDictPciGen: 32 GT/s (PCIe 5.0) → 240, × width 16 / 80: a x16 link
PCIE5_X16_GBPS = 240 * 16 / 80
# src/graph/search.cc sm90SpeedArrayInter: the speeds NCCL's search tries across nodes on sm90
SM90_SPEEDS_INTER = (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0)
# src/graph/search.cc ncclTopoDupChannels: a graph of bwIntra >= 25 doubles its channels, each at half
DUP_FROM_GBPS = 25.0
# NVIDIA/nccl issue 412: 16 GB/s through the CPU where a NIC near the GPU gives 24 (200 Gb/s NIC)
HOST_SHARE = 16.0 / 24.0
# src/graph/paths.cc v2.29.2+ NCCL_P2P_PER_CHANNEL_NET_BW (GB/s), and src/init.cc NCCL_P2P_NET_CHUNKSIZE
NET_CHANNEL_GBPS, NET_CHUNK = 14.0, 131072
# src/graph/tuning.cc v2.26.2: baseLat Ring Simple, hwLat NET Ring Simple, getNetOverhead on Intel (x 3
# for Simple), in µs
BASE_RING_SIMPLE_US, NET_RING_SIMPLE_US, NET_OVERHEAD_US = 8.4, 14.0, 1.0


def comm_channels_line(name):
    """``comm->nChannels`` from the ``N coll channels, ...`` INFO line, by a plain split."""
    (n,) = {line.split("NCCL INFO ")[1].split()[0] for line in (DATA / name).read_text().splitlines()
            if " coll channels," in line}
    return int(n)


def test_moc_sendrecv_is_priced_through_host_memory_as_derived_from_nccl_source():
    """One H100 and one NIC a host: NCCL's path to the NIC is the smaller of the port (400 Gb/s, the
    preset's) and the PCIe 5.0 x16 link, 48 GB/s; the search takes 48, the first sm90 speed it fits, and
    doubles it to 2 channels of 24 (bwIntra >= 25). The run says its communicator has 2 channels, which
    ``ncclTopoPostset`` doubled from the graph's (``src/graph/connect.cc``: ``nChannels*2``): its Ring graph
    found 1 channel of 24 GB/s, and through host memory the GPU's sends and receives cross it at 16/24 of
    that. The sendrecv's 2 channels of 14 GB/s (28) do not bind; 16 GB/s does. At 25 GiB (the last row):
    latency (8.4 + 14 + 3 x 1 µs) + bytes / 16 GB/s + one 128 KiB step at a channel's 14 GB/s."""
    text = (DATA / MOC_SENDRECV).read_text()
    assert "/GDRDMA" not in text and " via NET/IB/1/Shared" in text
    assert comm_channels_line(MOC_SENDRECV) == 2
    path = min(400 / 8, PCIE5_X16_GBPS)
    speed = next(s for s in SM90_SPEEDS_INTER if s <= path)
    per_channel = speed / 2 if speed >= DUP_FROM_GBPS else speed
    graph_channels = comm_channels_line(MOC_SENDRECV) // 2
    host_GBps = graph_channels * per_channel * HOST_SHARE
    assert host_GBps < 2 * NET_CHANNEL_GBPS  # the host path binds, not the two p2p channels
    size, measured_us, _ = file_rows(MOC_SENDRECV)[-1]
    expected_us = (BASE_RING_SIMPLE_US + NET_RING_SIMPLE_US + 3 * NET_OVERHEAD_US
                   + size / (host_GBps * 1e3) + NET_CHUNK / (NET_CHANNEL_GBPS * 1e3))
    sweep = check_json(MOC_SENDRECV)
    row = next(r for r in sweep["rows"] if r["bytes"] == size)
    assert row["predicted_s"] * 1e6 == pytest.approx(expected_us, rel=1e-9)
    assert row["ratio"] == pytest.approx(expected_us / measured_us, rel=1e-9)


def test_host_path_is_the_ring_graphs_per_nic_and_only_without_gdr():
    """Through host memory a rank's network share is 2/3 of the lesser of the NIC's path and the Ring
    graph's bandwidth a NIC (``nChannels × bwInter / nics``); with GPUDirect RDMA the graph is not read."""
    rel, _ = release_for("2.26.2")
    topo = replace(PRESETS["dgx-h100"], gpus_per_node=1, nics_per_node=1)
    host = replace(topo, gpudirect_rdma=False)
    slow, wide = Graph(1, 24.0, 24.0, True), Graph(4, 24.0, 24.0, True)
    assert p2p_comm(host, 2, rel, "2.26.2", 2, ring=slow).bw["net"][1] == pytest.approx(24 * 16 / 24)
    assert p2p_comm(host, 2, rel, "2.26.2", 2, ring=wide).bw["net"][1] == pytest.approx(48 * 16 / 24)
    assert p2p_comm(topo, 2, rel, "2.26.2", 2, ring=slow).bw["net"][1] == pytest.approx(48)
    # unstated, the graph is the one the topology gives: 2 channels of 24, the NIC's 48 again
    assert p2p_comm(host, 2, rel, "2.26.2", 4).bw["net"][1] == pytest.approx(48 * 16 / 24)
