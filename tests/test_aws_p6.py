"""AWS P6 (p6-b200.48xlarge, p6-b300.48xlarge): the presets' figures and the device lines that pick them.

Figures: AWS's EC2 P6 page (8 B200 with 3,200 Gb/s of EFAv4 as 8 × 400 Gb/s; 8 B300 with 6,400 Gb/s of
EFA; NVLink 1,800 GB/s GPU peer-to-peer on both), aws/aws-ofi-nccl v1.21.1 ``src/platform-aws.cpp`` (the
``p5en/p6-b200`` and ``p6-b300`` entries: latency 35 µs, RDMA protocol) and its tuner's
``src/tuner/nccl_ofi_model.cpp`` (``model_platform_params``: P5/P5e and P5en only, no P6 wire figure).
The runs are the bundled 2-node p5 all-reduce log with its device lines renamed and aws-ofi-nccl's platform
line edited, as a P6 run prints them.
"""

import gzip
import json
import math
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.cli.options import TOPOLOGY_PRESETS
from zerocalc.topology import PRESETS, topology_from_mapping, topology_to_toml
from zerocalc.topology.devices import preset_for_devices

DATA = Path(__file__).parent / "data" / "traces" / "nccl-tests"
P5_RUN1 = DATA / "all_reduce_perf-16xH100-p5-info-tagged-nccl2.22.3-run1.log.gz"
P5_GPU = "NVIDIA H100 80GB HBM3"
P5_PLATFORM = "NET/OFI Running on p5.48xlarge platform"
runner = CliRunner()


@pytest.mark.parametrize("name,gpus,gbps,nic,pcie,cc", [
    ("aws-p6-b200", 8, 3200, 400, 5, 100),
    ("aws-p6-b300", 8, 6400, 800, 6, 103),
])
def test_p6_presets_state_the_instances_figures(name, gpus, gbps, nic, pcie, cc):
    t = PRESETS[name]
    assert t.gpus_per_node == gpus and t.nics_per_node * t.nic_Gbps == gbps and t.nic_Gbps == nic
    assert t.inter.bw_Bps == pytest.approx(gbps / 8 * 1e9)
    assert t.intra.bw_Bps == pytest.approx(1800e9 / 2)  # 1,800 GB/s GPU peer-to-peer, each way
    assert (t.nvlink_gen, t.nvlinks_per_gpu, t.nvswitch_gen, t.nvls) == (5, 18, 4, True)
    assert (t.pcie_gen, t.compute_capability, t.cpu_vendor) == (pcie, cc, "intel")
    assert t.net_latency_us == 35.0 and t.net_wire_latency_us is None
    assert "aws-ofi-nccl" in t.source and "AWS EC2 P6 page" in t.source
    assert name in TOPOLOGY_PRESETS
    assert topology_from_mapping(tomllib.loads(topology_to_toml(t)), where=name) == t


EFA = {"efa": (3, "x NCCL INFO NET/OFI Selected Provider is efa")}
IB = {"ib": (3, "x NCCL INFO NET/IB : Using [0]mlx5_0:1/IB")}


@pytest.mark.parametrize("gpu,network,instance,preset", [
    ("NVIDIA B200", EFA, None, "aws-p6-b200"),
    ("NVIDIA B200", EFA, ("p6-b200.48xlarge", 9), "aws-p6-b200"),
    ("NVIDIA B300 SXM6 AC", EFA, None, "aws-p6-b300"),
    ("NVIDIA B300", EFA, ("p6-b300.48xlarge", 9), "aws-p6-b300"),
    # without EFA the NVIDIA boards stand
    ("NVIDIA B200", IB, None, "dgx-b200"), ("NVIDIA B200", {}, None, "dgx-b200"),
    ("NVIDIA B300 SXM6 AC", IB, None, "dgx-b300"), ("NVIDIA B300", {}, None, "dgx-b300"),
])
def test_b200_and_b300_on_efa_pick_the_p6_presets(gpu, network, instance, preset):
    topo, _ = preset_for_devices({gpu: 16}, {"a": 8, "b": 8}, where="f", network=network, instance=instance)
    assert topo.name == preset


def _renamed(tmp_path, gpu, platform):
    text = gzip.decompress(P5_RUN1.read_bytes()).decode()
    assert text.count(P5_GPU) >= 16 and P5_PLATFORM in text
    f = tmp_path / f"p6-{gpu.split()[-1]}.log"
    f.write_text(text.replace(P5_GPU, gpu).replace(P5_PLATFORM, f"NET/OFI Running on {platform} platform"))
    return f


def _file_rows(path):
    """(size, out-of-place µs) of each row, by a plain split once the ``[1,0]<stdout>:`` tags are cut."""
    rows = []
    for line in path.read_text().splitlines():
        f = line.replace("[1,0]<stdout>:", " ").split()
        if len(f) == 13 and f[0].isdigit() and f[1].isdigit():
            rows.append((int(f[0]), float(f[5])))
    return rows


@pytest.mark.parametrize("gpu,platform,preset", [
    ("NVIDIA B200", "p6-b200.48xlarge", "aws-p6-b200"),
    ("NVIDIA B300 SXM6 AC", "p6-b300.48xlarge", "aws-p6-b300"),
])
def test_a_p6_run_is_checked_on_its_instance(tmp_path, gpu, platform, preset):
    f = _renamed(tmp_path, gpu, platform)
    res = runner.invoke(app, ["check", str(f), "--format", "json"])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    assert sweep["topology"] == preset and sweep["group_size"] == 16
    assert f"{platform} by aws-ofi-nccl's line" in sweep["topology_how"]
    rows = _file_rows(f)
    assert len(rows) > 20
    assert [(r["bytes"], r["measured_s"]) for r in sweep["rows"]] == [(b, pytest.approx(t * 1e-6))
                                                                     for b, t in rows]
    assert all(r["predicted_s"] > 0 and math.isfinite(r["ratio"]) for r in sweep["rows"])


def test_a_b200_run_naming_another_instance_keeps_its_gpus_preset(tmp_path):
    """The platform line left at p5.48xlarge (H100s) under B200 device lines: the GPUs' own AWS preset,
    and the first line says which instance the plugin named."""
    f = _renamed(tmp_path, "NVIDIA B200", "p5.48xlarge")
    res = runner.invoke(app, ["check", str(f), "--format", "json"])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    assert sweep["topology"] == "aws-p6-b200"
    assert "names p5.48xlarge, aws-p5's, a machine of other GPUs" in sweep["topology_how"]
