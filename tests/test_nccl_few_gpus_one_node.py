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


#: the one-host ``-g G`` runs on NVIDIA GPUs bundled with sizes of 8 KiB and less: run → (G, its files; the
#: same host's collectives together)
HOST_RUNS = {
    "2 H100, bare metal": (2, [H100_G2]),
    "2 RTX 2080 Ti": (2, [f"{op}_perf-2xRTX2080Ti-pcie3-shm.txt"
                          for op in ("all_reduce", "all_gather", "broadcast", "reduce")]),
    "2 V100-PCIe, Azure": (2, ["all_reduce_perf-2xV100-PCIe-azure-nc12sv3-g2.txt"]),
    "2 RTX 4090, Docker": (2, ["all_reduce_perf-2xRTX4090-g2-docker-kalavai.txt"]),
    "2 RTX 4090, Kubernetes": (2, ["all_reduce_perf-2xRTX4090-g2-k8s-kalavai.txt"]),
    "4 RTX 4090, Docker": (4, ["all_reduce_perf-4xRTX4090-g4-docker-kalavai.txt"]),
    "4 RTX 5090": (4, ["all_reduce_perf-4xRTX5090-g4-quoted.txt"]),
    "4 H100, VM": (4, [H100_G4]),
    "8 A100, OCI": (8, ["all_reduce_perf-8xA100-SXM4-40GB-oci.txt"]),
    "8 A100, SuperBench": (8, [f"{op}_perf-8xA100-SXM4-40GB-g8-superbench.txt" for op in
                               ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce")]),
    "8 A100-80GB, NCCL 2.19.3": (8, ["all_reduce_perf-8xA100-SXM4-80GB-g8-nccl2.19.3.txt"]),
    "8 A100-80GB, thanos": (8, ["all_reduce_perf-8xA100-SXM4-80GB-g8-thanos.txt"]),
    "8 H100, NCCL 2.26.2": (8, ["all_gather_perf-8xH100-g8-ring-nccl2.26.2.out",
                                "reduce_scatter_perf-8xH100-g8-nvls-nccl2.26.2.out"]),
    "8 V100, DGX-1": (8, ["all_reduce_perf-8xV100-SXM2-16GB-dgx1-g8.txt"]),
}
#: NVIDIA/nccl-tests issue 123's posted times (µs) by G: DGX-A100, Ring, one channel, 8-128 B
ISSUE_123 = {2: 10.0, 3: 13.76, 4: 16.88, 5: 20.8, 6: 25.2, 7: 29.5, 8: 33.7}


def _small_times(name):
    """Out-of-place µs of the rows of 1 B to 8 KiB, by a plain split of each line (a Markdown quote mark
    '> ' left off): the first two fields integers, the time the eighth field from the end (every layout
    ends with the out-of-place time, two bandwidths and a check cell, then the in-place four)."""
    from sweep_files import DATA

    out = []
    for line in (DATA / name).read_text().splitlines():
        f = line.removeprefix("> ").split()
        if len(f) >= 11 and f[0].isdigit() and f[1].isdigit() and 0 < int(f[0]) <= 8192:
            out.append(float(f[-8]))
    return out


def test_host_time_per_call_is_the_median_over_hosts_of_their_floors():
    """HOST_US_PER_CALL against the files it is fitted on: each run's floor, the least over its collectives
    of the median time of its sizes from 1 B to 8 KiB, less G x 3.96 us (HOST_US_PER_GPU), and issue 123's
    mean over its seven times; the median of the fifteen. The hosts spread from -0.03 to 16.93 us a call
    (one figure for all, not any host's own); the DGX-1 V100 and the H100 VM stay above the floor's band."""
    from statistics import mean, median

    from zerocalc.validate.host_launch import HOST_US_PER_CALL, HOST_US_PER_GPU

    per_call = {run: min(median(_small_times(n)) for n in names) - g * HOST_US_PER_GPU
                for run, (g, names) in HOST_RUNS.items()}
    assert all(len(_small_times(n)) >= 4 for _, names in HOST_RUNS.values() for n in names)
    per_call["issue 123"] = mean(t - g * HOST_US_PER_GPU for g, t in ISSUE_123.items())
    assert len(per_call) == 15
    assert per_call["issue 123"] == pytest.approx(1.606, abs=0.001)
    assert per_call["8 A100, SuperBench"] == pytest.approx(34.67 - 31.68, abs=0.005)
    assert (min(per_call.values()), max(per_call.values())) == pytest.approx((-0.03, 16.93), abs=0.005)
    assert HOST_US_PER_CALL == pytest.approx(median(per_call.values()), abs=0.005)  # 3.30


def test_superbench_collectives_share_one_floor_whatever_nccls_time():
    """One host's five -g 8 collectives (SuperBench's 8 A100) take the same 34.6-35.6 us at their sizes up to
    8 KiB, where NCCL prices their smallest from 4.1 us (broadcast, reduce) to 10.2 us (all-reduce), their
    8 KiB from 6.3 to 15.4 us (one channel, as NCCL launches them): the host's floor,
    3.3 + 8 x 3.96 = 34.98 us, prices four there, within 0.95-1.05x of each size. The all-reduce's 14 Ring/LL
    hops, timed at the A100's 1.02 us (zerocalc.nccl.tune_model.AMPERE_LL_HOP_US; NCCL 2.12's table: 0.47),
    make its smallest 3.6 + 14 x 1.02 = 17.88 us, which with the launch stagger (7 x 2.76 = 19.32 us) is
    37.2 us, above the floor: 1.05-1.08x of its sizes up to 8 KiB."""
    import json
    from statistics import median

    from sweep_files import DATA, runner

    from zerocalc.cli import app

    for op in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"):
        name = f"{op}_perf-8xA100-SXM4-40GB-g8-superbench.txt"
        times = _small_times(name)
        assert 34.6 <= median(times) <= 35.6
        res = runner.invoke(app, ["check", str(DATA / name), "--format", "json"])
        assert res.exit_code == 0, res.output
        (sweep,) = json.loads(res.stdout)["sweeps"]
        small = [r for r in sweep["rows"] if r["bytes"] <= 8192]
        assert [r["measured_s"] for r in small] == pytest.approx([t * 1e-6 for t in times])
        assert all(r["nccl_s"] < 30e-6 for r in small)
        if op == "all_reduce":
            assert small[0]["nccl_s"] == pytest.approx(17.88e-6, abs=0.01e-6)
            assert all(not r["host_bound"] for r in small)
            assert small[0]["predicted_s"] == pytest.approx(17.88e-6 + 19.32e-6, abs=0.01e-6)
            assert all(1.0 <= r["ratio"] <= 1.1 for r in small)
            continue
        assert 4.0e-6 <= small[0]["nccl_s"] <= 10.8e-6
        assert all(r["host_bound"] and r["predicted_s"] == pytest.approx(34.98e-6) for r in small)
        assert all(0.95 <= r["ratio"] <= 1.05 for r in small)
