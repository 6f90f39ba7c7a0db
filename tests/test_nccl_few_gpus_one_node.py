"""A few GPUs of one NVSwitch host (nccl-tests ``-g 2`` / ``-g 4``, one thread driving them): public sweeps of
2 and 4 H100 SXM5 and of 2 and 4 A100 SXM4, read as the files count them and priced on their HGX presets, and
what the files show of a few-GPU effect at large sizes: none. Two H100 reach the bus bandwidth four H100 or
four H200 reach, and NCCL's own ring figure; two A100 of one container move bytes no slower than four of the
same container, both some 0.85 of NCCL's figure (tests/data/traces/README.md for the sources)."""

from __future__ import annotations

import pytest
from sweep_files import check_json, device_lines, file_rows

H100_G2 = "all_reduce_perf-2xH100-g2-1node-baremetal.txt"
H100_G4 = "all_reduce_perf-4xH100-g4-lambda-nccl2.26.2.txt"
A100_G2 = "all_reduce_perf-2xA100-SXM4-80GB-g2-docker-nccl2.20.5.txt"
A100_G4 = "all_reduce_perf-4xA100-SXM4-80GB-g4-docker-nccl2.20.5.txt"
A100_SENDRECV_G2 = "sendrecv_perf-2xA100-SXM4-80GB-g2-docker-nccl2.20.5.txt"
H200_G4 = "all_reduce_perf-4xH200-vm-g4-stepbytes-nccl2.31.2.txt"

#: file → (rows, first size, its out-of-place µs, last size, its out-of-place µs, '#  Rank' lines, the GPU
#: they name, the file's NCCL version or None, the preset its GPU names), as the file shows them
COUNTED = {
    H100_G2: (21, 1024, 15.75, 1073741824, 2996.1, 2, "NVIDIA H100 80GB HBM3", None, "dgx-h100"),
    H100_G4: (28, 8, 26.08, 1073741824, 4525.6, 4, "NVIDIA H100 80GB HBM3", "2.26.2", "dgx-h100"),
    A100_G2: (3, 134217728, 857.6, 536870912, 2789.9, 2, "NVIDIA A100-SXM4-80GB", "2.20.5", "dgx-a100"),
    A100_G4: (3, 134217728, 1144.4, 536870912, 4157.4, 4, "NVIDIA A100-SXM4-80GB", "2.20.5", "dgx-a100"),
    A100_SENDRECV_G2: (3, 134217728, 876.8, 536870912, 2541.2, 2, "NVIDIA A100-SXM4-80GB", "2.20.5",
                       "dgx-a100"),
}

#: NCCL's bus bandwidth for a Ring/Simple all-reduce inside an HGX H100 node: its ring search on one node
#: (``src/graph/search.cc``, v2.19-v2.30) finds 6 channels at 60 GB/s (``sm90SpeedArrayIntra``' first speed)
#: under a GPU's 18 NVLink4 links of 20.6 GB/s (``SM90_NVLINK_BW``, ``src/graph/topo.h``): 360 GB/s, which
#: ``ncclTopoTuneModel`` prices as channels × speed (``src/graph/tuning.cc``)
NCCL_RING_BUS_GBPS_H100 = 6 * 60.0
#: the same on an HGX A100 node: 12 channels at 20 GB/s (``sm80``: ``speedArrayIntra``, 12 NVLink3 links of
#: ``SM80_NVLINK_BW`` 20 GB/s; v2.12-v2.30), 240 GB/s
NCCL_RING_BUS_GBPS_A100 = 12 * 20.0


def _bus_GBps(size, us, ranks):
    """nccl-tests' all-reduce bus bandwidth of one row (``src/all_reduce.cu``: algbw × 2(n-1)/n)."""
    return size / (us * 1e-6) / 1e9 * 2 * (ranks - 1) / ranks


def _marginal_bus_GBps(name, ranks):
    """Bus bandwidth of the bytes the last out-of-place row adds over the first (each call's fixed cost gone),
    from the file's own rows."""
    rows = file_rows(name)
    (s0, t0, _), (s1, t1, _) = rows[0], rows[-1]
    return _bus_GBps(s1 - s0, t1 - t0, ranks)


@pytest.mark.parametrize("name", sorted(COUNTED))
def test_few_gpu_sweeps_read_as_the_files_count_them(name):
    """Each file's rows, sizes and out-of-place times, its rank lines (one host), the GPU they name and the
    NCCL version it prints; the preset chosen from the device lines is that GPU's HGX board, one node of
    as many GPUs as the file's ranks, and every size within the 0.5-2x band on it."""
    n_rows, first, t_first, last, t_last, n_ranks, gpu, version, preset = COUNTED[name]
    rows = file_rows(name)
    assert len(rows) == n_rows
    assert rows[0][:2] == (first, t_first) and rows[-1][:2] == (last, t_last)
    lines = device_lines(name)
    assert len(lines) == n_ranks and len({h for h, _ in lines}) == 1 and {g for _, g in lines} == {gpu}
    sweep = check_json(name)
    assert sweep["group_size"] == n_ranks
    assert sweep["topology"] == preset
    assert f"{n_ranks} per host, 1 host" in sweep["topology_how"]
    if version:
        assert sweep["nccl_version"] == version
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])


def test_two_hopper_gpus_reach_the_ring_bus_bandwidth_four_reach():
    """Two H100 of one host (``-g 2``, bare metal) reach at 1 GiB the bus bandwidth four H100 of another host
    (``-g 4``, NCCL 2.26.2) and four H200 of a third (``-g 4``, a VM, NCCL 2.31.2) reach: 358.38, 355.89 and
    356.04 GB/s (each file's 1 GiB row), all 0.99 of NCCL's own Ring/Simple figure
    (:data:`NCCL_RING_BUS_GBPS_H100`; the H200 has the H100's 18 NVLink4 links). A communicator of two GPUs
    on the NVSwitches is no slower per byte than a larger one: NCCL's graph for it is the same (search.cc
    searches the GPU's links to the NVSwitches, not its peers)."""
    gib = 1 << 30
    two = _bus_GBps(*next(r for r in file_rows(H100_G2) if r[0] == gib)[:2], 2)
    fours = [_bus_GBps(*next(r for r in file_rows(n) if r[0] == gib)[:2], 4) for n in (H100_G4, H200_G4)]
    assert two == pytest.approx(358.38, abs=0.01)
    assert fours == pytest.approx([355.89, 356.04], abs=0.01)
    for four in fours:
        assert 0.98 <= two / four <= 1.02
    for bus in (two, *fours):
        assert 0.95 <= bus / NCCL_RING_BUS_GBPS_H100 <= 1.0


@pytest.mark.parametrize("name", [H100_G2, H100_G4])
def test_h100_few_gpus_priced_at_large_sizes(name):
    """From 64 MiB up both H100 sweeps run Ring/Simple at NCCL's price: every such size within 0.9-1.1x
    (measured 0.92-1.00 on two GPUs, 0.97-1.00 on four), so nothing of a few GPUs slows the large sizes."""
    sweep = check_json(name)
    big = [r for r in sweep["rows"] if r["bytes"] >= 64 << 20]
    assert len(big) == 5
    assert all((r["algorithm"], r["protocol"]) == ("Ring", "Simple") for r in big)
    assert all(0.9 <= r["ratio"] <= 1.1 for r in big)


def test_two_a100_no_slower_than_four_of_the_same_container():
    """The 2- and 4-GPU all-reduce sweeps of one container (NCCL 2.20.5) add bytes at one rate: from 128 to
    512 MiB, out of place, 208.4 GB/s of bus bandwidth on two GPUs and 200.5 on four (the files' rows), both
    0.83-0.87 of NCCL's 240 GB/s (:data:`NCCL_RING_BUS_GBPS_A100`). What keeps both under NCCL's figure is
    the host, not the number of GPUs; the 2-GPU sweep's 128 MiB row (156.51 GB/s) carries a fixed cost its
    larger rows do not."""
    two = _marginal_bus_GBps(A100_G2, 2)
    four = _marginal_bus_GBps(A100_G4, 4)
    assert two == pytest.approx(208.4, abs=0.1) and four == pytest.approx(200.5, abs=0.1)
    assert two >= 0.95 * four
    for bus in (two, four):
        assert 0.8 <= bus / NCCL_RING_BUS_GBPS_A100 <= 0.9


def _ring_bus_GBps(topo, ranks, version="2.30.7"):
    """NCCL's ring graph on ``ranks`` GPUs of one node of ``topo``: channels × per-channel speed."""
    from zerocalc.nccl import graph
    from zerocalc.nccl.tables import Algorithm, release_for

    ring = graph.machine(topo, ranks, release_for(version)[0]).graphs[Algorithm.RING]
    return ring.n_channels * ring.bw_intra


#: NCCL's per-link NVLink bandwidth (``src/graph/topo.h``: ``SM90_NVLINK_BW`` 20.6, ``SM80_NVLINK_BW`` 20.0)
#: and the first speeds of its one-node ring search (``src/graph/search.cc``: ``sm90SpeedArrayIntra`` 60,
#: ``speedArrayIntra`` 40)
SM90_LINK, SM90_FIRST_SPEED = 20.6, 60.0
SM80_LINK, SM80_FIRST_SPEED = 20.0, 40.0


def test_a_few_gpus_of_a_full_nvlink_mesh_keep_only_their_links():
    """NCCL's system holds only the communicator's GPUs and drops an NVLink to any other GPU
    (``ncclTopoAddNvLinks``, ``src/graph/topo.cc`` v2.12-v2.30), so 2 of a GH200 node's 4 GPUs (18 links, 6 to
    each peer: the preset's source) ring over their 6 links alone: 123.6 GB/s, where the search's first
    speed fits twice (120); 3 GPUs over two peers' links (240), all 4 over the 18 (360, the node's figure).
    On NVSwitches the links to the switch stay whatever the GPUs: 2 H100 keep the 8-GPU figure."""
    from dataclasses import replace

    from zerocalc.topology.presets import get_topology

    gh200 = get_topology("gh200")
    pair = 6 * SM90_LINK
    assert _ring_bus_GBps(gh200, 2) == pytest.approx(SM90_FIRST_SPEED * int(pair // SM90_FIRST_SPEED))
    assert _ring_bus_GBps(gh200, 3) == pytest.approx(SM90_FIRST_SPEED * int(2 * pair // SM90_FIRST_SPEED))
    assert _ring_bus_GBps(gh200, 4) == pytest.approx(NCCL_RING_BUS_GBPS_H100)
    h100 = get_topology("dgx-h100")
    assert [_ring_bus_GBps(h100, g) for g in (2, 4, 8)] == pytest.approx([NCCL_RING_BUS_GBPS_H100] * 3)
    # a node of 4 sm80 GPUs whose 12 links split 4 to each peer, no NVSwitch: 2 GPUs keep 80 GB/s
    mesh = replace(get_topology("dgx-a100"), name="mesh-4", gpus_per_node=4, nvswitch_gen=0)
    assert _ring_bus_GBps(mesh, 2, "2.20.5") == pytest.approx(SM80_FIRST_SPEED * int(4 * SM80_LINK // 40))
    assert _ring_bus_GBps(mesh, 4, "2.20.5") == pytest.approx(NCCL_RING_BUS_GBPS_A100)


def test_a_partial_nvlink_mesh_keeps_the_node_figure():
    """DGX-1's hybrid cube-mesh splits a V100's 6 links unevenly (1 or 2 to four of its 7 peers, none to
    three), so which links a sub-group keeps depends on which GPUs it holds, which a file's device lines do
    not tell: its sub-groups keep the node's 6 channels of 20 GB/s (the preset's source)."""
    from zerocalc.topology.presets import get_topology

    dgx1 = get_topology("dgx-1-v100")
    assert {_ring_bus_GBps(dgx1, g) for g in (2, 4, 8)} == {6 * 20.0}


def test_nodes_of_a_few_mesh_gpus_a_host_keep_their_links():
    """A run of ``k`` ranks on each of several hosts prices nodes of ``k`` GPUs; on GH200's mesh (6 links to
    each peer, the preset's source) those are ``6 (k - 1)`` links a GPU, whose ring NCCL searches on one
    node alike (2 GPUs: 120 GB/s); on NVSwitch nodes and DGX-1's uneven cube-mesh the links stay."""
    from zerocalc.topology.devices import nodes_of
    from zerocalc.topology.presets import get_topology

    gh200 = get_topology("gh200")
    assert [nodes_of(gh200, k)[0].nvlinks_per_gpu for k in (1, 2, 3, 4)] == [18, 6, 12, 18]
    assert "6 NVLinks a GPU" in nodes_of(gh200, 2)[1]
    two = nodes_of(gh200, 2)[0]
    assert _ring_bus_GBps(two, 2) == pytest.approx(_ring_bus_GBps(gh200, 2))
    assert nodes_of(get_topology("dgx-h100"), 2)[0].nvlinks_per_gpu == 18
    assert nodes_of(get_topology("dgx-1-v100"), 2)[0].nvlinks_per_gpu == 6


def test_point_to_point_between_two_mesh_gpus_uses_their_links():
    """Send/receive between 2 of a GH200 node's GPUs runs over the 6 links between them (6 × 20.6 GB/s,
    ``ncclTopoAddNvLinks`` as above); all 4 GPUs (an all-to-all) use every GPU's 18, and 2 H100 on
    NVSwitches theirs."""
    from zerocalc.nccl.p2p import p2p_comm
    from zerocalc.nccl.tables import release_for
    from zerocalc.topology.presets import get_topology

    rel = release_for("2.30.7")[0]

    def nvl(name, ranks):
        return p2p_comm(get_topology(name), ranks, rel, "2.30.7", 16).bw["nvl"]

    assert nvl("gh200", 2) == pytest.approx((SM90_LINK, 6 * SM90_LINK))
    assert nvl("gh200", 4) == pytest.approx((SM90_LINK, 18 * SM90_LINK))
    assert nvl("dgx-h100", 2) == pytest.approx((SM90_LINK, 18 * SM90_LINK))
