"""ABCI 2.0's compute nodes told by the PCI slots of their GPUs, and the ``abci-v`` preset.

ABCI's nccl-tests outputs name the GPU alone (``A100-SXM4-40GB``, ``Tesla V100-SXM2-16GB``) and hosts such as
``a0008`` / ``g0191``; the GPU model would make them a DGX A100 (8 NICs) and a DGX-1 (8 GPUs on a hybrid
cube-mesh). Their device lines list each node's GPUs at the same slots on every host, which no other machine
of those GPU models bundled here uses: the slots are counted here from the files with a plain regular
expression, not through zerocalc's reader; the preset's figures are checked against ABCI's system overview
(aistabci/abci-docs ``en/docs/system-overview.md``: Compute Node (V), 2× Xeon Gold 6148, 4× V100 for NVLink
16 GiB, 2× InfiniBand EDR 100 Gb/s; its block diagram: 2 NVLink2 links between each pair of GPUs, the EDR
NICs on the CPUs) and NVIDIA's V100 datasheet (6 NVLink2 links, 300 GB/s a GPU both ways).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.nccl.graph import machine
from zerocalc.nccl.tables import Algorithm, release_for
from zerocalc.topology import PRESETS, nvlink_mesh_peers
from zerocalc.topology.slots import SLOT_NODES, node_by_slots

DATA = Path(__file__).parent / "data" / "traces" / "nccl-tests"
ABCI_FILES = sorted(p.name for p in DATA.iterdir() if "-abci-" in p.name)
DEVICE = re.compile(r"#\s+Rank\s+\d+ .* on\s+(\S+) device\s+\d+ "
                    r"\[(0x[0-9a-f]+|[0-9a-f]{4}:([0-9a-f]{2}):[0-9a-f]{2})\]\s+(.+)")
#: the slots of each node, as ABCI's files list them on a whole node (bus numbers, device order)
A_SLOTS = [0x27, 0x2A, 0x51, 0x57, 0x9E, 0xA4, 0xC7, 0xCA]
V_SLOTS = [0x3D, 0x3E, 0xB1, 0xB2]
runner = CliRunner()


def _devices(path: Path) -> tuple[dict[str, list[int]], set[str]]:
    """host → the bus number of each of its ranks' GPUs, and the GPU names, as the device lines print them."""
    buses: dict[str, list[int]] = {}
    names = set()
    for m in DEVICE.finditer(path.read_text()):
        buses.setdefault(m[1], []).append(int(m[3] or m[2], 16))
        names.add(m[4].strip())
    return buses, names


def _sweep(path: Path, *args: str) -> dict:
    res = runner.invoke(app, ["check", str(path), "--format", "json", *args])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    return sweep


def _version(name: str) -> tuple[str, ...]:
    m = re.search(r"nccl(\d+\.\d+(?:\.\d+)?)\.txt$", name)
    return ("--nccl-version", m[1]) if m else ()


def test_the_abci_files_list_their_nodes_slots():
    assert len(ABCI_FILES) == 14
    for name in ABCI_FILES:
        buses, names = _devices(DATA / name)
        (gpu,) = names
        whole = A_SLOTS if "A100-SXM4-40GB" in gpu else V_SLOTS
        assert ("V100-SXM2-16GB" in gpu) is (whole == V_SLOTS), name
        k = 4 if "-4xA100-" in name else len(whole)  # ABCI's 4-rank A-node run: GPUs 0-3 of one node
        assert buses and all(b == whole[:k] for b in buses.values()), name
    assert {n.preset: list(n.slots) for n in SLOT_NODES} == {"abci-a": A_SLOTS, "abci-v": V_SLOTS}


@pytest.mark.parametrize("name", ABCI_FILES)
def test_abci_files_are_priced_on_their_node(name):
    sweep = _sweep(DATA / name, *_version(name))
    preset, words = (("abci-v", "ABCI 2.0 Compute Node (V)") if "V100" in name
                     else ("abci-a", "ABCI 2.0 Compute Node (A)"))
    assert sweep["topology"] == preset
    assert f"an {words} (its GPUs' PCI slots" in sweep["topology_how"]


@pytest.mark.parametrize("name,preset,args", [
    ("all_reduce_perf-16xA100-SXM4-40GB-sophia-2nodes-nccl2.22.3.txt", "dgx-a100", ()),  # DGX A100's slots
    ("all_reduce_perf-16xA100-SXM4-40GB-oci-oke-roce-2nodes.txt", "dgx-a100", ()),  # OCI BM.GPU4.8
    # ABCI A's slots, but 80 GB A100s: CoreWeave's HGX nodes, another machine on the same board layout
    ("all_reduce_perf-128xA100-80GB-coreweave-16nodes-ib.txt", "dgx-a100", ("--n", "128")),
    ("all_reduce_perf-8xV100-SXM2-16GB-dgx1-g8.txt", "dgx-1-v100", ()),  # shares b1 b2 with ABCI V
    ("all_reduce_perf-8xV100-SXM2-16GB-oci-bm-gpu3-g8-1G.txt", "dgx-1-v100", ()),
])
def test_other_hosts_keep_their_presets(name, preset, args):
    sweep = _sweep(DATA / name, *args)
    assert sweep["topology"] == preset and "ABCI" not in sweep["topology_how"]


A40, V16 = "A100-SXM4-40GB", "Tesla V100-SXM2-16GB"


@pytest.mark.parametrize("gpu,buses,expected", [
    (A40, {"a0008": A_SLOTS, "a0009": A_SLOTS}, "abci-a"),
    ("NVIDIA A100-SXM4-40GB", {"a0000": A_SLOTS}, "abci-a"),
    (A40, {"a0048": A_SLOTS[:4]}, "abci-a"),  # GPUs 0-3 of a node
    (A40, {"x": [0x27], "y": [0x27]}, "abci-a"),  # GPU 0 of each of two nodes
    (A40, {"x": [0x51, 0x57]}, None),  # some of the node's slots, but not its GPU 0's
    (A40, {"x": A_SLOTS, "y": A_SLOTS[:7] + [0xBD]}, None),  # one host at another slot
    (A40, {"x": [0x27, 0x27, 0x2A, 0x2A]}, None),  # two ranks a bus: not these nodes
    (A40, {"x": [0x07, 0x0F, 0x47, 0x4E, 0x87, 0x90, 0xB7, 0xBD]}, None),  # DGX A100
    ("NVIDIA A100-SXM4-80GB", {"x": A_SLOTS, "y": A_SLOTS}, None),  # ABCI's A100s are 40 GB
    (V16, {"g0185": V_SLOTS, "g0186": V_SLOTS}, "abci-v"),
    (V16, {"x": [0xB1, 0xB2]}, None),  # a DGX-1's GPUs 4 and 5 sit there too
    ("Tesla V100-SXM2-32GB", {"x": V_SLOTS}, None),
    (V16, {"x": [0x4F, 0x50, 0x5F, 0x60, 0xB1, 0xB2, 0xDB, 0xDC]}, None),  # DGX-1
    (V16, {}, None),
])
def test_slot_rule(gpu, buses, expected):
    node = node_by_slots(gpu, buses)
    assert (node.preset if node else None) == expected


def test_full_bus_ids_tell_the_node_too(tmp_path):
    """nccl-tests 2.10 and later print domain:bus:device (``[0000:27:00]``): an ABCI file's lines rewritten
    so pick the same preset."""
    src = DATA / "all_reduce_perf-16xA100-SXM4-40GB-abci-2nodes-nccl2.8.4.txt"
    text = re.sub(r"\[0x([0-9a-f]{2})\]", r"[0000:\1:00]", src.read_text())
    assert "[0000:c7:00]" in text and "[0x" not in text
    path = tmp_path / src.name
    path.write_text(text)
    assert _sweep(path, "--nccl-version", "2.8.4")["topology"] == "abci-a"


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
