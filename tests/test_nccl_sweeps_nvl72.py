"""Multi-node NVLink racks (GB200 NVL72) and GH200 nodes: the presets their device lines name, an NVL72 rack's
hosts as one NVLink domain (NCCL's MNNVL clique, one node), and check on the public sweeps bundled (CLI)."""

import json
from dataclasses import replace

import pytest
from sweep_files import DATA, check_json, file_rows, median_size_ratio
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.errors import ConfigError
from zerocalc.nccl.channels import nvls_channels
from zerocalc.nccl.graph import machine
from zerocalc.nccl.model import tune
from zerocalc.nccl.tables import Algorithm, Collective, Protocol, release_for
from zerocalc.topology import get_topology
from zerocalc.topology.devices import nodes_as_listed, nodes_of, preset_for_devices
from zerocalc.topology.mapping import topology_from_mapping

runner = CliRunner()

RACK = "all_reduce_perf-72xGB200-nvl72-1rack-nccl2.26.2.txt"
RACKS2 = "all_reduce_perf-128xGB200-nvl72-2racks-nccl2.26.2.txt"
RACKS20 = "all_reduce_perf-1440xGB200-nvl72-20racks-nccl2.26.2.txt"
OCI = "all_reduce_perf-128xGB200-2racks-oci-nccl2.29.2.txt"
ALPS = "all_reduce_perf-8xGH200-2nodes-4pernode-slingshot.txt"
OLIVIA = "all_reduce_perf-8xGH200-olivia-2nodes-int8-nccl2.30.4.txt"
#: the CoreWeave GB200 job of those runs sets NCCL_NVLS_ENABLE=0 (slurm/nccl-test-distributed-gb200-nvl72-
#: enroot.slurm at the README's commit): no NVLS nor NVLS Tree
NO_NVLS = ("--nccl-algo", "^NVLS,NVLSTree")


def rank_lines(name):
    """(rank, host, GPU name) of each '# Rank' line of the file."""
    out = []
    for line in (DATA / name).read_text().splitlines():
        if line.startswith("#  Rank"):
            head, _, gpu = line.partition("] ")
            f = head.split()
            out.append((int(f[2]), head.split(" on ")[1].split()[0], gpu))
    return out


@pytest.mark.parametrize(("name", "n_rows", "first", "last", "ranks", "listed", "gpu", "version"), [
    (RACK, 5, (536870912, 1806.7), (8589934592, 20299), 72, [71], "NVIDIA Graphics Device", None),
    (RACKS2, 6, (536870912, 2156.8), (17179869184, 42067), 128, [143], "NVIDIA Graphics Device", None),
    (RACKS20, 6, (536870912, 7108.4), (17179869184, 84625), None, [1439], "NVIDIA GB200", None),
    (OCI, 33, (8, 183.82), (34359738368, 99744.6), 128, [127], "NVIDIA GB200", "2.29.2"),
    (ALPS, 25, (8, 18.74), (134217728, 1773.7), 8, list(range(8)), "NVIDIA GH200 120GB", None),
    (OLIVIA, 28, (1, 26.95), (134217728, 2309.49), 8, list(range(8)), "NVIDIA GH200 120GB", None),
])
def test_bundled_sweeps_as_counted_from_the_files(name, n_rows, first, last, ranks, listed, gpu, version):
    """Rows, first and last size and time, the ranks the '# Rank' lines list and their GPU, counted from each
    file; the excerpts list one rank, the last (71 of 72, 127 of 128): their group size is the rows'
    busbw/algbw = 2(n-1)/n, not the one line. The 2-rack CoreWeave block's line says rank 143 where its rows
    give 128 (793.06/399.65 = 1.9844 = 2 x 127/128): refused naming --n, priced with --n 128."""
    rows, devices = file_rows(name), rank_lines(name)
    assert len(rows) == n_rows and rows[0][:2] == first and rows[-1][:2] == last
    assert [r for r, _, _ in devices] == listed and {g for _, _, g in devices} == {gpu}
    text = (DATA / name).read_text()
    assert ("NCCL version " + version in text) if version else "NCCL version " not in text
    if ranks is None or name == RACKS2:  # 1440 ranks: its two-decimal bandwidths cannot single out n
        res = runner.invoke(app, ["check", str(DATA / name), "--topology", "gb200-nvl72"])
        assert res.exit_code == 2 and "give --n" in res.output
        if ranks is None:
            return
    args = ("--topology", "gb200-nvl72") if gpu == "NVIDIA Graphics Device" else ()
    args += ("--n", "128") if name == RACKS2 else ()
    sweep = check_json(name, *args)
    assert (sweep["op"], sweep["group_size"]) == ("all_reduce", ranks)
    assert sweep["topology"] == ("gh200" if "GH200" in gpu else "gb200-nvl72")


def test_gpu_names_pick_the_presets():
    """``NVIDIA GB200`` (OCI's and CoreWeave's device lines) → gb200-nvl72, ``GB300`` → gb300-nvl72,
    ``NVIDIA GH200 120GB`` / ``480GB`` → gh200; ``B200`` alone stays dgx-b200 and ``B300`` (the HGX / DGX
    B300 SXM6 module) dgx-b300."""
    for gpu, preset in (("NVIDIA GB200", "gb200-nvl72"), ("NVIDIA GB300", "gb300-nvl72"),
                        ("NVIDIA GH200 480GB", "gh200"), ("NVIDIA GH200 120GB", "gh200"),
                        ("NVIDIA B200", "dgx-b200"), ("NVIDIA B300 SXM6 AC", "dgx-b300"),
                        ("NVIDIA B300", "dgx-b300")):
        topo, _ = preset_for_devices({gpu: 4}, {"h": 4}, where="f")
        assert topo.name == preset, gpu


def test_an_nvl72_racks_hosts_are_one_nvlink_domain():
    """4 ranks on each of 2 GB200 trays: one node of the rack (NCCL's MNNVL clique), not two 4-GPU nodes
    joined by the network; 1 rank per tray on 8 trays: a domain of 18 hosts x 1 GPU with those GPUs' NICs;
    8 ranks on a 4-GPU tray is refused naming --topology."""
    topo, how = preset_for_devices({"NVIDIA GB200": 8}, {"a": 4, "b": 4}, where="f")
    assert (topo.name, topo.gpus_per_node, topo.gpus_per_host, topo.nics_per_node) == \
        ("gb200-nvl72", 72, 4, 72)
    assert "one NVLink domain of 18 hosts" in how
    one, _ = nodes_of(get_topology("gb200-nvl72"), 1)
    assert (one.gpus_per_node, one.gpus_per_host, one.nics_per_node) == (18, 1, 18)
    assert one.inter.bw_Bps == pytest.approx(18 * 400e9 / 8)
    with pytest.raises(ConfigError, match="more than the 4 GPUs of a gb200-nvl72 host"):
        preset_for_devices({"NVIDIA GB200": 16}, {"a": 8, "b": 8}, where="f")
    given, words = nodes_as_listed(get_topology("gb200-nvl72"), {"a": 4, "b": 4}, 8)
    assert given.gpus_per_node == 72 and "NVLink domain" in words
    # GH200: 4 per node as the preset; one per host → nodes of one GPU and one NIC
    gh, _ = preset_for_devices({"NVIDIA GH200 480GB": 2}, {"a": 1, "b": 1}, where="f")
    assert (gh.name, gh.gpus_per_node, gh.nics_per_node) == ("gh200", 1, 1)


def test_nccl_joins_the_clique_from_2_20_only():
    """72 ranks on an NVL72 rack: one node from NCCL 2.20.3 (MNNVL, init.cc ncclMnnvlCheck), 18 nodes of 4
    (each host, its 4 NICs) before; 144 ranks: two racks, two nodes."""
    topo = get_topology("gb200-nvl72")
    assert machine(topo, 72, release_for("2.26.2")[0]).n_nodes == 1
    assert machine(topo, 144, release_for("2.26.2")[0]).n_nodes == 2
    old = machine(topo, 72, release_for("2.19.3")[0])
    assert (old.n_nodes, old.n_ranks / old.n_nodes) == (18, 4)


def test_gpus_per_host_in_toml():
    """``gpus_per_host`` reads from a topology TOML; more than ``gpus_per_node`` is refused naming it."""
    base = {"gpus_per_node": 72, "intra": {"alpha_us": 3.4, "bw_GBps": 900},
            "inter": {"alpha_us": 14, "bw_GBps": 3600}}
    assert topology_from_mapping({**base, "gpus_per_host": 4}).mnnvl
    with pytest.raises(ConfigError, match="gpus_per_host"):
        topology_from_mapping({**base, "gpus_per_host": 96})
    with pytest.raises(ConfigError, match="gpus_per_host"):
        topology_from_mapping({**base, "gpus_per_host": 0})


def test_one_gb200_rack_ring_within_bands():
    """72 GB200 on one NVL72 rack, NCCL 2.26.2 (the README's words), NVLS disabled by its job: Ring over the
    rack's NVLink within 0.5-2x at every size, the median size within 0.8-1.25x. Hand check at 8 GiB
    (v2.26.2): 18 links x 40.0 GB/s (topo.h SM100_NVLINK_BW) = 720 GB/s; sm100 intra speed 90 (search.cc) →
    8 channels, duplicated (>= 50 GB/s) to 16 x 45; Ring all-reduce 16 x 45 x 72/142 GB/s; latency 8.4 +
    142 x 3.4 us (baseLat, hwLat NVLink Ring Simple): 24.02 ms, the file 20.30 ms."""
    sweep = check_json(RACK, "--topology", "gb200-nvl72", "--nccl-version", "2.26.2", *NO_NVLS)
    assert sweep["group_size"] == 72
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
    assert 0.8 <= median_size_ratio(sweep) <= 1.25  # 1.14 at 2 GiB
    big = sweep["rows"][-1]
    hand = (8.4 + 142 * 3.4) * 1e-6 + 8589934592 / (16 * 45 * 72 / 142 * 1e9)
    assert (big["algorithm"], big["protocol"]) == ("Ring", "Simple")
    assert big["predicted_s"] == pytest.approx(hand, rel=1e-6)
    assert big["ratio"] == pytest.approx(hand / 20299e-6, rel=1e-6)


def test_two_gb200_racks_within_bands():
    """128 GB200 over two NVL72 racks joined by InfiniBand (one 400 Gb/s NIC per GPU), NVLS disabled: two
    nodes of NCCL's, Tree then Ring, every size within 0.5-2x, the median size within 0.8-1.25x."""
    sweep = check_json(RACKS2, "--topology", "gb200-nvl72", "--nccl-version", "2.26.2", "--n", "128",
                       *NO_NVLS)
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
    assert 0.8 <= median_size_ratio(sweep) <= 1.25  # 1.11 at 2 GiB


def test_twenty_gb200_racks_with_the_jobs_nvls_off_within_bands():
    """1440 GB200 on 20 NVL72 racks, CoreWeave's job (NCCL_NVLS_ENABLE=0, NCCL 2.26.2): Tree at every size,
    timed with NCCL 2.28.3's GB200-NV72 Tree caps (tree_run_release): every size within 0.5-2x, the median
    size (2 GiB) within 0.8-1.25x. Hand check at 16 GiB: 15 channels x min(48 x 0.92, 24.0) GB/s (the
    4-node column of perChMaxTreeBws' Blackwell row from v2.28.3) = 360 GB/s of bus bandwidth, x 0.5;
    latency 8.4 + 2 x (71 x 4.0 + 5 x 14) us (v2.26.2 baseLat, NVLink and network Tree/Simple hwLat; NCCL's
    trees over 20 racks are ceil(log2 20) = 5 levels deep, ncclGetBtree, where its estimate counts 4):
    96.16 ms, the file 84.6 ms; 2.26.2's own cap (72.0) would give 331 GB/s, 52.6 ms."""
    sweep = check_json(RACKS20, "--topology", "gb200-nvl72", "--nccl-version", "2.26.2", "--n", "1440",
                       *NO_NVLS)
    assert sweep["group_size"] == 1440
    assert all(r["algorithm"] == "Tree" for r in sweep["rows"])
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
    assert 0.8 <= median_size_ratio(sweep) <= 1.25
    big = sweep["rows"][-1]
    hand = (8.4 + 2 * (71 * 4.0 + 5 * 14)) * 1e-6 + 17179869184 / (15 * 24.0 * 0.5 * 1e9)
    assert big["protocol"] == "Simple" and big["predicted_s"] == pytest.approx(hand, rel=1e-6)


def test_gb200_racks_tree_timed_with_the_gb200_data():
    """Before 2.28.3 NCCL's Blackwell Tree caps were 2 x Hopper's; 2.28.3 took them from GB200-NV72 data:
    on NVL72 racks a Tree call under 2.26.2 runs at the corrected caps while NCCL chooses with its own;
    HGX B200 nodes, and releases that hold the data, are left as they are."""
    rel = release_for("2.26.2")[0]
    args = (Collective.ALL_REDUCE, Algorithm.TREE, Protocol.SIMPLE)
    t = tune(get_topology("gb200-nvl72"), 1440, rel)
    assert t.entries[args].bandwidth_GBps == pytest.approx(15 * min(48 * 0.92, 72.0) * 0.5)
    assert t.tree_run_scale(*args) == pytest.approx(24.0 / (48 * 0.92))
    ll128 = (Collective.ALL_REDUCE, Algorithm.TREE, Protocol.LL128)
    # LL128 min(bus x 120/128, channels x cap): min(662.4 x .9375, 15 x 58) before, min(360 x .9375, 15 x 20)
    assert t.tree_run_scale(*ll128) == pytest.approx(15 * 20.0 / (15 * 48 * 0.92 * 120 / 128))
    assert t.tree_run_scale(Collective.ALL_REDUCE, Algorithm.RING, Protocol.SIMPLE) == 1.0
    assert tune(get_topology("dgx-b200"), 32, rel).tree_run is None
    assert tune(get_topology("gb200-nvl72"), 1440, release_for("2.29.2")[0]).tree_run is None


def test_oci_gb200_racks_priced_as_their_job_sets_nvls():
    """OCI's 2 racks (32 hosts x 4 GB200, NCCL 2.29.2): the repository's kueue job for that shape sets
    NCCL_NVLS_ENABLE=0 in every version up to the README's commit, so NVLS and NVLS Tree are left out. From
    2 GiB Ring within 0.8-1.25x; hand check at 32 GiB (v2.29.2): the ring graph's 15 channels x 48 GB/s
    (one 400 Gb/s NIC per GPU, sm100's speed array, search.cc), busBw 720 GB/s, algorithm bandwidth
    720 x 128/254; latency 8.4 + 252 x 3.4 + 2 x 14 us (baseLat, NVLink and network Ring/Simple hwLat),
    x 1.4 (the ring's plateau, ncclTopoGetAlgoTime). Up to 128 KiB the file's 182-209 us floor is about
    twice NCCL's Tree/LL latency (6.8 + 2 x (63 x 0.6 + 5.0) us), recorded as it is."""
    sweep = check_json(OCI, *NO_NVLS)
    assert {r["algorithm"] for r in sweep["rows"]} <= {"Tree", "Ring"}
    big = sweep["rows"][-1]
    hand = (8.4 + 252 * 3.4 + 2 * 14) * 1.4e-6 + 34359738368 / (15 * 48 * 128 / 254 * 1e9)
    assert (big["algorithm"], big["protocol"]) == ("Ring", "Simple")
    assert big["predicted_s"] == pytest.approx(hand, rel=1e-6)
    assert all(0.8 <= r["ratio"] <= 1.25 for r in sweep["rows"] if r["bytes"] >= 2 << 30)
    small = [r for r in sweep["rows"] if r["bytes"] <= 128 << 10]
    assert all(r["algorithm"] == "Tree" and r["protocol"] == "LL" for r in small)
    assert all(0.45 <= r["ratio"] <= 0.55 for r in small)  # 92.4-106 us against 182-209 us


def test_gh200_nodes_over_slingshot_large_sizes_within_bands():
    """2 nodes of 4 GH200 (Alps, Olivia) over Slingshot 11: from 64 MiB within 0.75-1.25x, the rendezvous of
    their messages (zerocalc.nccl.ofi_cxi) capped where the pipeline is full (smaller sizes: test_ofi_cxi)."""
    for name in (ALPS, OLIVIA):
        res = runner.invoke(app, ["check", str(DATA / name), "--format", "json"])
        assert res.exit_code == 0, res.output
        (sweep,) = json.loads(res.stdout)["sweeps"]
        assert sweep["topology"] == "gh200" and "4 per host, 2 hosts" in sweep["topology_how"]
        big = [r for r in sweep["rows"] if r["bytes"] >= 64 << 20]
        assert big and all(0.75 <= r["ratio"] <= 1.25 for r in big), name


def test_nvls_tree_on_grace_hosts_priced_without_the_tree_correction():
    """From v2.29.2 NCCL multiplies NVLS Tree's Blackwell all-reduce bandwidth by treeCorrectionFactor on x86
    hosts only (tuning.cc ncclTopoGetAlgoTime: comm->cpuArch == NCCL_TOPO_CPU_ARCH_X86): on two NVL72 racks
    of Grace hosts NCCL's own estimate at 16 MiB (2^18 x 64 B, factor 0.7) leaves it out, on the same racks
    with x86 hosts it holds it; the call is timed alike on both, its pipeline's fill in the factor's
    place (zerocalc.nccl.nvls_pipeline; the factor taken back out of the x86 estimate). From 1 GiB, past
    the row, all agree."""
    arm = get_topology("gb200-nvl72")
    x86 = replace(arm, cpu_vendor="intel")
    rel = release_for("2.29.2")[0]
    t_arm, t_x86 = tune(arm, 128, rel), tune(x86, 128, rel)
    args = (Collective.ALL_REDUCE, Algorithm.NVLS_TREE, Protocol.SIMPLE)
    mid, big = 16 << 20, 1 << 30
    lat = t_arm.entries[args].latency_us * 1e-6
    assert t_x86.time_s(*args, mid) - lat == pytest.approx((t_arm.time_s(*args, mid) - lat) / 0.7, rel=1e-9)
    assert t_arm.run_time_s(*args, mid) == pytest.approx(t_x86.run_time_s(*args, mid), rel=1e-9)
    assert t_arm.time_s(*args, big) == pytest.approx(t_x86.time_s(*args, big), rel=1e-9)
    sweep = check_json(OCI)
    assert all(r["algorithm"] == "NVLSTree" for r in sweep["rows"])


@pytest.mark.parametrize(("preset", "ranks", "version", "nvls"), [
    ("dgx-h100", 2, "2.17.1", True),  # v2.17.1 nvls.cc: localRanks <= 1 → none
    ("dgx-h100", 2, "2.26.2", False),  # v2.18.1-v2.28.6: gpuCount <= 2 → none
    ("dgx-h100", 3, "2.26.2", True),
    ("dgx-h100", 2, "2.28.3", False),
    ("dgx-h100", 2, "2.28.7", True),  # v2.28.7 on: gpuCount < 2
    ("gb200-nvl72", 8, "2.20.3", False),  # v2.20.x: "NVLS is not supported on MNNVL yet"
    ("gb200-nvl72", 4, "2.20.3", True),  # one host: no MNNVL
    ("gb200-nvl72", 8, "2.21.5", True),  # v2.21.5: MNNVL with a clique of more than 2
])
def test_nvls_needs_more_gpus_than_the_release_allows(preset, ranks, version, nvls):
    """NCCL's NVLS gate (src/transport/nvls.cc ncclNvlsInit, each tag): the GPUs of the node (an NVLink
    clique's with multi-node NVLink) against the release's minimum, and none over MNNVL in 2.20."""
    assert machine(get_topology(preset), ranks, release_for(version)[0]).nvls is nvls


def test_gb300_prices_as_blackwell():
    """GB300's compute capability 10.3: NCCL's NVLink bandwidth (topo.h ncclTopoNVLinkBw), speed arrays
    (search.cc) and Blackwell rows (tuning.cc) all test >= 100, so one rack's graphs are GB200's. Across
    racks its 800 Gb/s NIC (PCIe Gen6, 96 GB/s to NCCL) takes sm100's 96 GB/s inter speed where GB200's 400
    Gb/s takes 48: 7 channels of 96 (duplicated to 14 x 48) within the GPU's NVLink, GB200's 15 x 48."""
    rel = release_for("2.29.2")[0]
    gb200, gb300 = get_topology("gb200-nvl72"), get_topology("gb300-nvl72")
    assert gb300.compute_capability == 103
    assert machine(gb300, 72, rel).graphs == machine(gb200, 72, rel).graphs
    ring = Algorithm.RING
    g3, g2 = machine(gb300, 144, rel).graphs[ring], machine(gb200, 144, rel).graphs[ring]
    assert (g3.n_channels, g3.bw_inter, g2.n_channels, g2.bw_inter) == (14, 48.0, 15, 48.0)


@pytest.mark.parametrize(("ranks", "version", "channels"), [
    (72, "2.26.2", 32),  # v2.25.1-v2.26.x: NVLS_NCHANNELS_SM100 32
    (72, "2.27.7", 24),  # v2.27.3 on: NVLS_NCHANNELS_SM100_NVL 24 within one MNNVL domain
    (144, "2.27.7", 32),  # two racks: multi-node, 32
    (4, "2.29.2", 24),  # one tray: one node
])
def test_blackwell_nvls_channels_in_one_nvlink_domain(ranks, version, channels):
    """comm->nvlsChannels on NVL72 racks (src/transport/nvls.cc ncclNvlsInit, "a reduced number of channels
    for single node/MNNVL domain on Blackwell"); the communicator's channels stay the ring's 16 (8 x 90
    GB/s duplicated) doubled by ncclTopoPostset, 32, above either."""
    rel = release_for(version)[0]
    m = machine(get_topology("gb200-nvl72"), ranks, rel)
    assert nvls_channels(m, rel) == channels
    if ranks == 72:
        assert tune(get_topology("gb200-nvl72"), ranks, rel).comm_channels == 32


@pytest.mark.parametrize(("preset", "ranks", "version", "ll128"), [
    ("gb200-nvl72", 128, "2.26.2", False),  # two racks: the NIC is PHB from the GPU (over C2C)
    ("gb200-nvl72", 128, "2.27.3", True),  # P2C from v2.27.3, within the sm90+ bound (PXN)
    ("gb200-nvl72", 72, "2.26.2", True),  # one rack: no network in the graphs
    ("gh200", 8, "2.26.2", False),
    ("gh200", 8, "2.30.4", True),
    ("gb300-nvl72", 144, "2.26.2", True),  # ConnectX-8 on the GPU's PCIe, not behind the CPU
    ("dgx-h100", 16, "2.26.2", True),
])
def test_ll128_across_nodes_with_nics_behind_grace(preset, ranks, version, ll128):
    """LL128 by default only where the graphs' GPU-NIC path is at most PXB, or PXN on sm90+ (tuning.cc
    v2.19-v2.30); a NIC on the Grace CPU reached over NVLink-C2C is PHB until v2.27.3 types it P2C
    (paths.cc, PATH_P2C 6 < PATH_PXN 7): off across GB200 racks and GH200 nodes before 2.27."""
    assert machine(get_topology(preset), ranks, release_for(version)[0]).ll128_path_ok is ll128


def test_two_gb200_racks_without_ll128_before_2_27():
    """CoreWeave's 2 racks at NCCL 2.26.2 (NVLS off): NCCL leaves LL128 out across the racks (NIC behind
    Grace), so Tree/Simple then Ring/Simple; hand check at 512 MiB (v2.26.2): Tree/Simple 8.4 + 2 x (63 x 4.0
    + 1 x 14) us, 15 channels x min(48 x 0.92, 42.8) GB/s (2.28.3's 2-node cap, tree_run_release) x 0.5."""
    sweep = check_json(RACKS2, "--topology", "gb200-nvl72", "--nccl-version", "2.26.2", "--n", "128",
                       *NO_NVLS)
    assert {r["protocol"] for r in sweep["rows"]} == {"Simple"}
    first = sweep["rows"][0]
    hand = (8.4 + 2 * (63 * 4.0 + 14)) * 1e-6 + 536870912 / (15 * 42.8 * 0.5 * 1e9)
    assert first["algorithm"] == "Tree" and first["predicted_s"] == pytest.approx(hand, rel=1e-6)
    assert all(0.8 <= r["ratio"] <= 1.25 for r in sweep["rows"])


def test_nic_via_c2c_in_toml():
    """``nic_via_c2c`` reads from a topology TOML as true or false; anything else is refused naming it."""
    base = {"gpus_per_node": 4, "intra": {"alpha_us": 3.4, "bw_GBps": 450},
            "inter": {"alpha_us": 14, "bw_GBps": 100}}
    assert topology_from_mapping({**base, "nic_via_c2c": True}).nic_via_c2c is True
    assert topology_from_mapping(base).nic_via_c2c is None
    with pytest.raises(ConfigError, match="nic_via_c2c"):
        topology_from_mapping({**base, "nic_via_c2c": 1})


@pytest.mark.parametrize("flag", [1, 0])
def test_unnamed_gpu_named_by_its_mnnvl_line(tmp_path, flag):
    """The one-rack block with an NCCL INFO line of NCCL's own format (``comm %p rank %d nRanks %d nNodes %d
    localRanks %d localRank %d MNNVL %d``, src/init.cc, as the p5 logs bundled print it) after its device
    line: ``MNNVL 1`` (a multi-node NVLink domain) names the unnamed GPU a GB200 and prices it as
    ``--topology gb200-nvl72`` does, saying why in the first line; ``MNNVL 0`` leaves it refused naming
    --topology."""
    lines = (DATA / RACK).read_text().splitlines(keepends=True)
    info = (f"slurm-gb200-207-171:14840:14840 [3] NCCL INFO comm 0x55d4c8a0e2f0 rank 71 nRanks 72 nNodes 1 "
            f"localRanks 72 localRank 71 MNNVL {flag}\n")
    path = tmp_path / "rack.txt"
    path.write_text(lines[0] + info + "".join(lines[1:]))
    res = runner.invoke(app, ["check", str(path), "--format", "json", *NO_NVLS])
    if not flag:
        assert res.exit_code == 2 and "--topology" in res.output and "Graphics Device" in res.output
        return
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    assert sweep["topology"] == "gb200-nvl72" and "MNNVL 1" in sweep["topology_how"]
    given = check_json(RACK, "--topology", "gb200-nvl72", *NO_NVLS)
    priced = [r["predicted_s"] for r in given["rows"]]
    assert [r["predicted_s"] for r in sweep["rows"]] == pytest.approx(priced)
    text = runner.invoke(app, ["check", str(path), *NO_NVLS])
    assert text.exit_code == 0 and "taken for a GB200" in text.output.splitlines()[0]
