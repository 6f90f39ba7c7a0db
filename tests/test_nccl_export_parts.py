"""The export Hopper/Ampere SXM parts (A800, H800, H20): their device names pick their own presets, and
NCCL's graph on their NVLink is derived by hand from the link figures each preset cites. The NVL PCIe
cards (H100 NVL, H200 NVL): what their NVLink bridges leave the file to tell."""

from pathlib import Path

import pytest

from zerocalc.errors import ConfigError
from zerocalc.nccl import Algorithm
from zerocalc.nccl.channels import comm_channels
from zerocalc.nccl.graph import machine
from zerocalc.nccl.tables import release_for
from zerocalc.topology import PRESETS
from zerocalc.topology.devices import preset_for_devices, preset_for_gpu

DATA = Path(__file__).parent / "data" / "traces" / "nccl-tests"


@pytest.mark.parametrize("gpu,preset", [
    # the names nvidia-smi and nccl-tests print for them (public nccl-tests outputs of such nodes)
    ("NVIDIA A800-SXM4-80GB", "hgx-a800"), ("NVIDIA A800-SXM4-40GB", "hgx-a800"),
    ("NVIDIA H800", "hgx-h800"), ("NVIDIA H800 80GB HBM3", "hgx-h800"),
    ("NVIDIA H20", "hgx-h20"), ("NVIDIA H20-3e", "hgx-h20"),
    # their PCIe cards are PCIe cards; H200 NVL is not the SXM H200, nor H20 the H200
    ("NVIDIA H800 PCIe", "pcie-gen5"), ("NVIDIA A800 80GB PCIe", "pcie-gen4"),
    ("NVIDIA H200 NVL", "pcie-gen5"), ("NVIDIA H200", "dgx-h200"),
    # the SXM modules under other spellings: the module name, or the memory after the model
    ("NVIDIA H100 SXM5 80GB", "dgx-h100"), ("NVIDIA H200 141GB HBM3e", "dgx-h200"),
])
def test_export_names_pick_their_presets(gpu, preset):
    assert preset_for_gpu(gpu) == preset


def test_an_a800_is_not_priced_as_an_a100():
    """The A800 keeps 8 of the A100's 12 NVLink3 links (A800 datasheet: 400 GB/s against 600): a preset
    of 12 links would price 1.5x its NVLink."""
    a800, a100 = PRESETS["hgx-a800"], PRESETS["dgx-a100"]
    assert (a800.nvlinks_per_gpu, a100.nvlinks_per_gpu) == (8, 12)
    assert a800.intra.bw_Bps * 1.5 == a100.intra.bw_Bps
    topo, how = preset_for_devices({"NVIDIA A800-SXM4-80GB": 16}, {"h1": 8, "h2": 8}, where="f",
                                   network={"ib": [(12, "NET/IB")]})
    assert topo.name == "hgx-a800" and "2 hosts" in how


@pytest.mark.parametrize("preset,version,links,per_link,speed,channels", [
    # sm90 at NCCL 2.20+: 20.6 GB/s a link (topo.h). H800: 8 links = 164.8 GB/s; speeds 60, 50, 40:
    # 2 x 60 = 120, 3 x 50 = 150, 4 x 40 = 160 (search.cc pass 1 keeps the most), 30 and 24 carry less,
    # 20 no more (8 x 20 = 160); 40 < 50 with 4 channels: duplicated to 8 x 20 (ncclTopoDupChannels)
    ("hgx-h800", "2.21.5", 8, 20.6, 20.0, 8),
    # NCCL 2.18: sm90 at 20 GB/s a link, speeds 60, 40, ...: 8 x 20 = 160 = 4 x 40 exactly, then 8 x 20
    ("hgx-h800", "2.18.3", 8, 20.0, 20.0, 8),
    # H20: the H100's 18 links, 370.8 GB/s: 6 x 60 = 360; no slower speed carries more; 60 >= 50: 12 x 30
    ("hgx-h20", "2.21.5", 18, 20.6, 30.0, 12),
    # A800: 8 x 20 = 160 GB/s (sm80); 40 x 4 = 160 at once; sm80 duplicates from 25: 8 x 20
    ("hgx-a800", "2.19.4", 8, 20.0, 20.0, 8),
])
def test_one_node_ring_graph_by_hand(preset, version, links, per_link, speed, channels):
    release, _ = release_for(version)
    m = machine(PRESETS[preset], 8, release)
    ring = m.graphs[Algorithm.RING]
    assert (ring.n_channels, ring.bw_intra) == (channels, speed)
    # the total NCCL prices: every link's figure but what the speed steps leave over
    assert links * per_link - ring.n_channels * ring.bw_intra < 12.0


def test_h800_communicator_channels_as_nccl_2_18_prints_them():
    """comm->nChannels = min(ring, tree) doubled by the post-set (init.cc): 8 x 2 = 16, the count an H800
    node's NCCL 2.18.3 log prints ("16 coll channels, 16 nvls channels")."""
    release, _ = release_for("2.18.3")
    m = machine(PRESETS["hgx-h800"], 8, release)
    assert comm_channels(m, release).coll_channels == 16
    assert m.nvls  # NVSwitch 3 on sm90: NVLink SHARP ("NVLS multicast support is available")


@pytest.mark.parametrize("gpu,per_host", [("NVIDIA H100 NVL", 2), ("NVIDIA H200 NVL", 2),
                                          ("NVIDIA H200 NVL", 3), ("NVIDIA H200 NVL", 4)])
def test_a_run_that_fits_one_nvlink_bridge_group_is_refused(gpu, per_host):
    """H100 NVL bridges join pairs, H200 NVL 2 or 4 GPUs (the product briefs): such a run may sit on one
    bridge or cross PCIe, and the device lines do not say which."""
    with pytest.raises(ConfigError, match="NVLink bridge") as exc:
        preset_for_devices({gpu: per_host}, {"h": per_host}, where="f")
    assert exc.value.option == "--topology"


@pytest.mark.parametrize("gpu,per_host,bridge", [("NVIDIA H100 NVL", 8, 2), ("NVIDIA H100 NVL", 4, 2),
                                                 ("NVIDIA H200 NVL", 8, 4)])
def test_a_run_wider_than_a_bridge_group_is_priced_on_pcie_and_says_why(gpu, per_host, bridge):
    topo, how = preset_for_devices({gpu: per_host}, {"h": per_host}, where="f")
    assert topo.name == "pcie-gen5" and topo.nvlink_gen == 0
    assert f"NVLink bridges join at most {bridge} of its {per_host} GPUs" in how
    # one GPU a host on several hosts: no bridge in the communicator's node at all
    topo, how = preset_for_devices({gpu: 2}, {"a": 1, "b": 1}, where="f")
    assert topo.name == "pcie-gen5" and "NVLink" not in how


def test_check_refuses_a_bridge_sized_nvl_run_in_one_line(tmp_path):
    """At the CLI the refusal is one line on stderr and exit 2: the bundled 4-GPU run's device lines (one
    host, -g 4) with the card named H200 NVL instead of GeForce RTX 4090, so 4 H200 NVL on one host."""
    from typer.testing import CliRunner

    from zerocalc.cli import app

    src = DATA / "all_reduce_perf-4xRTX4090-g4-docker-kalavai.txt"
    f = tmp_path / "all_reduce_perf-4xH200NVL.txt"
    f.write_text(src.read_text().replace("NVIDIA GeForce RTX 4090", "NVIDIA H200 NVL"))
    res = CliRunner().invoke(app, ["check", str(f)])
    assert res.exit_code == 2
    line, = res.stderr.strip().splitlines()
    assert "NVLink bridge" in line and "--topology" in line
