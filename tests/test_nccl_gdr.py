"""GPUDirect RDMA or host memory on the network path (``gpudirect_rdma``; :mod:`zerocalc.nccl.graph`
assumption 7): what NCCL's INFO lines and launch lines state of it, what the model does with it, and the
two public two-rank H200 runs whose pods were given a NIC apart from their GPU.

Hand derivations: NCCL's graph for a node of one H200 and one 400 Gb/s NIC on PCIe 5.0 is one channel at
48 GB/s (``topo.cc``: the NIC's 400000 Mb/s / 8000 = 50, the GPU's x16 gen 5 link 16 × 240 / 80 = 48;
``search.cc``'s sm90 inter-node speed array starts at 48), a bus bandwidth of 48 GB/s with GDR; through host
memory NVIDIA expects 16 of the 24 GB/s a 200 Gb/s NIC gives near the GPU (NVIDIA/nccl issue 412), so
48 × 16/24 = 32 GB/s. Measured figures are read off the files."""

import json
from dataclasses import replace

import pytest
from sweep_files import DATA, file_rows
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.collectives import Collective
from zerocalc.nccl.graph import HOST_RELAY_SHARE, machine
from zerocalc.nccl.tables import Algorithm, Protocol, release_for
from zerocalc.topology import PRESETS, topology_to_toml
from zerocalc.topology.devices import gdr_unstated_note, nodes_of, with_stated_gdr
from zerocalc.traces.nccl_info import InfoFacts, info_facts

runner = CliRunner()

A3U_ALLGATHER_1PN = "all_gather_perf-2xH200-a3ultra-1pernode-nccl2.25.1.txt"
GKE_H200_ALLREDUCE_1PN = "all_reduce_perf-2xH200-gke-1pernode.txt"
A3U_ALLGATHER_1PN_GPU1 = "all_gather_perf-2xH200-a3ultra-1pernode-gpu1-nccl2.25.1.txt"
P4D_TAGGED = "all_reduce_perf-16xA100-p4d-2nodes-tagged-nccl2.9.9.log"


@pytest.mark.parametrize(("line", "want"), [
    # NCCL 2.9.9 net.cc's form (bus ids in hex), aws-ofi-nccl's network name with a space: a line of the
    # bundled p4d log
    ("[1,1]<stdout>:nccl-tests-efa-16-worker-0:26:68 [1] NCCL INFO Channel 00 : 1[101d0] -> 8[101c0] [send] "
     "via NET/AWS Libfabric/1/GDRDMA", [("net_gdr", True)]),
    # v2.19-v2.30 net.cc: "Channel %02d/%d : %d[%d] -> %d[%d] [receive] via NET/%s/%d%s%s", no GDR, not shared
    ("node1:77:90 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0", [("net_host", True)]),
    ("node1:77:90 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] [send] via NET/IB/0/Shared",
     [("net_host", True)]),
    # through a proxy rank (PXN): "via NET/%s/%d(%d)%s%s"
    ("node1:77:90 [0] NCCL INFO Channel 01/0 : 0[0] -> 9[1] [send] via NET/IB/1(1)/GDRDMA",
     [("net_gdr", True)]),
    # paths.cc ncclTopoCheckGdr: v2.25 (rank / NIC id), v2.19 (bus ids in hex), v2.29 (GPU/system-local ids)
    ("node1:77:90 [0] NCCL INFO GPU Direct RDMA Disabled for GPU 0 / HCA 0 (distance 6 > 4)",
     [("net_host", True)]),
    ("node1:77:90 [0] NCCL INFO GPU Direct RDMA Disabled for GPU 1b000 / HCA 0 (distance 6 > 4)",
     [("net_host", True)]),
    ("node1:77:90 [0] NCCL INFO GPU Direct RDMA Disabled for GPU/0-110592 (rank 0) - NET/0-0 "
     "(distance 6 > 4)",
     [("net_host", True)]),
    # topo.cc v2.28-v2.30, a NIC that cannot reach GPU memory (two DGX Spark hosts as a public log shows
    # them); its "Enabled" says only that the NIC could, and is not read
    ("spark-01:14213:14219 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'",
     [("net_host", True)]),
    ("node1:77:90 [0] NCCL INFO NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'", []),
    ("node1:77:90 [0] NCCL INFO GPU Direct RDMA Enabled for GPU 0 / HCA 0 (distance 3 <= 4), read 1",
     [("net_gdr", True)]),
    # NCCL's socket transport never uses GDR: no fact
    ("agzen-master:3867861:3867877 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0", []),
])
def test_network_connect_lines_state_gdr_or_host_memory(line, want):
    assert info_facts(line) == want


def _info(*lines):
    facts = InfoFacts()
    for i, line in enumerate(lines, 1):
        facts.add(line, i)
    return facts.as_dict()


def test_stated_gdr_sets_the_topology_as_the_lines_say():
    """Host-memory lines alone: no GDR; GDR lines alone: GDR; both: left as it is. ``NCCL_NET_GDR_LEVEL=LOC``
    (never, NCCL's documentation) on the launch line: no GDR; ``PIX`` depends on the PCI distance: left."""
    topo, _ = nodes_of(PRESETS["dgx-h200"], 1)
    host = "h:1:2 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0"
    gdr = "h:1:2 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0/GDRDMA"
    off, how = with_stated_gdr(topo, None, _info(host))
    assert off.gpudirect_rdma is False and "line 1" in how
    on, _ = with_stated_gdr(topo, None, _info(gdr))
    assert on.gpudirect_rdma is True
    assert with_stated_gdr(topo, None, _info(host, gdr)) == (topo, "")
    loc, how = with_stated_gdr(topo, {"NCCL_NET_GDR_LEVEL": ("LOC", 3)}, {})
    assert loc.gpudirect_rdma is False and "line 3" in how
    assert with_stated_gdr(topo, {"NCCL_NET_GDR_LEVEL": ("PIX", 3)}, {}) == (topo, "")


def test_without_gdr_nccls_graph_and_choice_stand_ll128_is_off_and_the_run_gets_two_thirds():
    """Assumption 7: the graph NCCL prices is unchanged (48 GB/s, one channel duplicated to 2 × 24, as
    search.cc's ncclTopoDupChannels does at ≥ 25 GB/s), LL128 is off (tuning.cc: typeInter PHB), and every
    graph runs at 16/24 of it; on one node nothing changes."""
    rel, _ = release_for("2.25.1")
    topo, _ = nodes_of(PRESETS["dgx-h200"], 1)
    gdr = machine(topo, 2, rel)
    host = machine(replace(topo, gpudirect_rdma=False), 2, rel)
    ring, ring_host = gdr.graphs[Algorithm.RING], host.graphs[Algorithm.RING]
    assert (ring.n_channels, ring.bw_inter) == (2, 24.0)
    assert (ring_host.n_channels, ring_host.bw_inter) == (ring.n_channels, ring.bw_inter)
    assert HOST_RELAY_SHARE == pytest.approx(16 / 24)
    assert all(g.run_scale == pytest.approx(16 / 24) for g in host.graphs.values())
    assert gdr.ll128_path_ok and not host.ll128_path_ok
    one_node = machine(replace(PRESETS["dgx-h200"], gpudirect_rdma=False), 8, rel)
    assert one_node.ll128_path_ok and all(g.run_scale == 1 for g in one_node.graphs.values())


def _relay_check(name, tmp_path, gdr=False):
    topo, _ = nodes_of(PRESETS["dgx-h200"], 1)
    path = tmp_path / "h200-slice.toml"
    path.write_text(topology_to_toml(replace(topo, name="h200-slice", gpudirect_rdma=gdr)))
    res = runner.invoke(app, ["check", str(DATA / name), "--format", "json", "--topology", str(path)])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    return sweep


@pytest.mark.parametrize(("name", "busbw_8g"), [(A3U_ALLGATHER_1PN, 32.20), (GKE_H200_ALLREDUCE_1PN, 31.89)])
def test_h200_pods_given_another_gpus_nic_run_at_two_thirds_of_the_nic(name, busbw_8g, tmp_path):
    """kubernetes-sigs/dranet's two H200 examples claim a fixed NIC (``gpu1rdma0``, ``gpu2rdma0``: another
    GPU's) and take the GPU from the device plugin; under the gIB profile's ``NCCL_NET_GDR_LEVEL=PIX`` NCCL
    uses GDR only for a NIC under the GPU's own switch, so it goes through host memory. Priced so, the bus
    bandwidth at the largest size is 48 × 16/24 = 32 GB/s (the files: 32.20 and 31.89), every size from
    1 MiB up within 0.6-1.25x of the file's time, and the largest sizes within 0.9-1.1x."""
    sweep = _relay_check(name, tmp_path)
    rows = file_rows(name)
    last = rows[-1]
    row = next(ln.split() for ln in (DATA / name).read_text().splitlines()
               if ln.split()[:1] == [str(last[0])])
    assert float(row[7]) == busbw_8g  # the 8 GiB row's out-of-place busbw
    factor = 0.5 if sweep["op"] == "all_gather" else 1.0  # busbw: (n-1)/n, 2(n-1)/n of algbw at n = 2
    predicted_busbw = last[0] / sweep["rows"][-1]["predicted_s"] * factor / 1e9
    assert predicted_busbw == pytest.approx(48 * 16 / 24, rel=0.01)
    assert [r["measured_s"] for r in sweep["rows"]] == pytest.approx([t * 1e-6 for _, t, _ in rows])
    big = [r for r in sweep["rows"] if r["bytes"] >= 1 << 20]
    assert all(0.6 <= r["ratio"] <= 1.25 for r in big)
    assert all(0.9 <= r["ratio"] <= 1.1 for r in sweep["rows"][-4:])
    assert not any(r["protocol"] == "LL128" for r in sweep["rows"])


def test_the_earlier_h200_pod_run_not_used_for_the_share_is_within_the_band_from_2_mib(tmp_path):
    """The first version of dranet's A3 Ultra example (GPU ``90:00`` on both hosts, the NIC claimed by name:
    ``gpu2rdma0``, GPU 2's), held out from the 16/24 share above: through host memory it reaches 25.87 GB/s
    of bus bandwidth at 8 GiB (the file), 0.54 of the NIC's 48 where the two runs above reach 0.67, so the
    share prices it too fast: every size from 2 MiB within 0.7-0.85x, inside the 0.5-2x band, where pricing
    it with GPUDirect RDMA (a topology TOML with ``gpudirect_rdma = true``) gives 0.49-0.58x."""
    sweep = _relay_check(A3U_ALLGATHER_1PN_GPU1, tmp_path)
    rows = file_rows(A3U_ALLGATHER_1PN_GPU1)
    assert [r["measured_s"] for r in sweep["rows"]] == pytest.approx([t * 1e-6 for _, t, _ in rows])
    last = next(ln.split() for ln in (DATA / A3U_ALLGATHER_1PN_GPU1).read_text().splitlines()
                if ln.split()[:1] == [str(rows[-1][0])])
    assert float(last[7]) == 25.87
    big = [r for r in sweep["rows"] if r["bytes"] >= 2 << 20]
    assert len(big) == 13 and all(0.7 <= r["ratio"] <= 0.85 for r in big)
    gdr = _relay_check(A3U_ALLGATHER_1PN_GPU1, tmp_path, gdr=True)
    assert all(0.45 <= r["ratio"] <= 0.6 for r in gdr["rows"] if r["bytes"] >= 2 << 20)


def test_a_run_stating_gdr_in_its_info_lines_says_so():
    """The bundled p4d log's channels run ``via NET/AWS Libfabric/…/GDRDMA``: its topology line says so."""
    res = runner.invoke(app, ["check", str(DATA / P4D_TAGGED), "--format", "json", "--nccl-algo", "Ring"])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    assert "with GDRDMA" in sweep["topology_how"]


def test_nodes_of_one_gpu_without_a_stated_nic_path_get_a_note():
    """A run of one GPU per host is a slice of a machine whose NIC may not be its GPU's: the note says what
    was assumed and how to price the other; nodes of eight, or a stated path, get none."""
    one, _ = nodes_of(PRESETS["dgx-h200"], 1)
    assert "gpudirect_rdma = false" in gdr_unstated_note(one, 2)
    assert gdr_unstated_note(PRESETS["dgx-h200"], 16) == ""
    assert gdr_unstated_note(replace(one, gpudirect_rdma=True), 2) == ""


def test_gpudirect_rdma_not_a_boolean_in_a_topology_toml_is_refused_in_one_line(tmp_path):
    text = topology_to_toml(PRESETS["dgx-h200"]).replace("gpus_per_node = 8",
                                                          'gpus_per_node = 8\ngpudirect_rdma = "no"', 1)
    path = tmp_path / "bad.toml"
    path.write_text(text)
    res = runner.invoke(app, ["check", str(DATA / A3U_ALLGATHER_1PN), "--topology", str(path)])
    assert res.exit_code == 2
    assert len(res.output.strip().splitlines()) == 1 and "gpudirect_rdma must be true or false" in res.output


def test_point_to_point_across_nodes_through_host_memory_gets_two_thirds_of_the_nic():
    """The send/receive path's share of the node's NICs (one 400 Gb/s NIC on PCIe 5.0: 48 GB/s as NCCL counts
    it, the smaller of 50 and the x16 link's 48) is 2/3 of it through host memory."""
    from zerocalc.nccl.p2p import p2p_comm

    rel, _ = release_for("2.25.1")
    topo, _ = nodes_of(PRESETS["dgx-h200"], 1)
    gdr = p2p_comm(topo, 2, rel, "2.25.1", 4)
    host = p2p_comm(replace(topo, gpudirect_rdma=False), 2, rel, "2.25.1", 4)
    assert gdr.bw["net"][1] == pytest.approx(48.0)
    assert host.bw["net"][1] == pytest.approx(48.0 * 16 / 24)


@pytest.mark.parametrize(("version", "plain"), [("2.18.1", False), ("2.18.3", True), ("2.25.1", True),
                                                ("2.30.7", True), ("2.17.1", False)])
def test_trees_on_nodes_of_one_gpu_are_plain_and_priced_at_0_85(version, plain, monkeypatch):
    """search.cc makes every tree on nodes of one GPU the plain one (``ngpus == 1``), which tuning.cc takes
    × 0.85 from v2.18.3 (``maxTreePattern == NCCL_TOPO_PATTERN_TREE``); nodes of 8 GPUs keep the balanced
    tree, and no other algorithm is touched."""
    from zerocalc.nccl import tune_model
    from zerocalc.nccl.model import tune

    rel, _ = release_for(version)
    one, _ = nodes_of(PRESETS["dgx-h100"], 1)
    key = (Collective.ALL_REDUCE, Algorithm.TREE, Protocol.SIMPLE)
    ring = (Collective.ALL_REDUCE, Algorithm.RING, Protocol.SIMPLE)
    assert tune_model._plain_tree(rel, machine(one, 2, rel)) is plain
    assert tune_model._plain_tree(rel, machine(PRESETS["dgx-h100"], 16, rel)) is False
    with_rule = tune(one, 2, rel).entries
    monkeypatch.setattr(tune_model, "_plain_tree", lambda r, m: False)
    without = tune(one, 2, rel).entries
    factor = 0.85 if plain else 1.0
    assert with_rule[key].bandwidth_GBps == pytest.approx(without[key].bandwidth_GBps * factor)
    assert with_rule[ring].bandwidth_GBps == pytest.approx(without[ring].bandwidth_GBps)
