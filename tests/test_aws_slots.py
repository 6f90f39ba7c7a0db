"""AWS EC2 p4d / p4de / p5 told by the PCI slots of their GPUs, where no line names the network.

nccl-tests lists each rank's GPU with its bus id. The bundled runs whose aws-ofi-nccl INFO lines name the
instance show its layout: on ``p4d.24xlarge`` two A100s on each of the buses ``10 20 90 a0``, on
``p5.48xlarge`` one H100 on each of ``53 64 75 86 97 a8 b9 ca``. A run that prints no INFO line (the p4de
run of aws-samples/aws-hpc-tutorials) is priced on the instance's preset (EFA) the same way; the slot
lists are counted here from the files with a plain regular expression, not through zerocalc's reader.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.topology.slots import aws_instance_by_slots

DATA = Path(__file__).parent / "data" / "traces" / "nccl-tests"
P4DE = DATA / "all_reduce_perf-16xA100-80GB-p4de-2nodes-efa-simple.txt"
P4D_DLAMI = DATA / "all_reduce_perf-16xA100-SXM4-40GB-p4d-dlami-efa-truncated-nccl2.23.4.txt"
P5_TUNER = DATA / "all_reduce_perf-16xH100-p5-info-tuner-nccl2.20.3.log.gz"
DEVICE = re.compile(r"#\s+Rank\s+\d+ .* on (\S+) device\s+\d+ "
                    r"\[(0x[0-9a-f]+|[0-9a-f]{4}:([0-9a-f]{2}):[0-9a-f]{2})\]")
runner = CliRunner()


def _text(path: Path) -> str:
    return gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()


def _buses(text: str) -> dict[str, list[int]]:
    """host → the bus number of each of its ranks' GPUs, as the device lines print them."""
    out: dict[str, list[int]] = {}
    for m in DEVICE.finditer(text):
        out.setdefault(m[1], []).append(int(m[3] or m[2], 16))
    return out


def _sweep(path: Path, *args: str) -> dict:
    res = runner.invoke(app, ["check", str(path), "--format", "json", *args])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    return sweep


def _without_info(src: Path, tmp_path: Path) -> Path:
    """``src`` with every NCCL INFO line left out (as a run without NCCL_DEBUG=INFO prints it)."""
    lines = [ln for ln in _text(src).splitlines(True) if "NCCL INFO" not in ln]
    out = tmp_path / src.name.removesuffix(".gz")
    out.write_text("".join(lines))
    return out


@pytest.mark.parametrize("path,layout", [
    (P4DE, [0x10, 0x10, 0x20, 0x20, 0x90, 0x90, 0xA0, 0xA0]),
    (P4D_DLAMI, [0x10, 0x10, 0x20, 0x20, 0x90, 0x90, 0xA0, 0xA0]),
    (P5_TUNER, [0x53, 0x64, 0x75, 0x86, 0x97, 0xA8, 0xB9, 0xCA]),
])
def test_the_files_list_the_instances_layouts(path, layout):
    buses = _buses(_text(path))
    assert len(buses) == 2 and all(b == layout for b in buses.values())


def test_a_p4de_run_without_info_lines_is_priced_on_its_instance():
    text = P4DE.read_text()
    assert "NCCL INFO" not in text and "A100-SXM4-80GB" in text
    sweep = _sweep(P4DE)
    assert sweep["topology"] == "aws-p4de"
    assert "p4de.24xlarge" in sweep["topology_how"] and "10 10 20 20 90 90 a0 a0" in sweep["topology_how"]
    # the page's run: 1 GiB in 25.9 ms; the instance's 4 x 100 Gb/s EFA, not a DGX A100's 8 x 200 Gb/s IB
    big = max(sweep["rows"], key=lambda r: r["bytes"])
    assert big["measured_s"] == pytest.approx(25.9e-3, rel=0.01)
    assert 0.8 <= big["ratio"] <= 1.25
    dgx = _sweep(P4DE, "--topology", "dgx-a100")
    assert max(dgx["rows"], key=lambda r: r["bytes"])["ratio"] < 0.5


@pytest.mark.parametrize("src,preset,words", [
    # its hosts are named ip-172-31-…, EC2's own names, which already say AWS
    (P4D_DLAMI, "aws-p4d", "AWS EC2, a hint"),
    (P5_TUNER, "aws-p5", "are an AWS p5.48xlarge's, whose network is EFA"),
])
def test_slots_pick_the_instance_the_info_lines_name(tmp_path, src, preset, words):
    told = _sweep(src)
    assert told["topology"] == preset and "aws-ofi-nccl" in told["topology_how"]
    bare = _sweep(_without_info(src, tmp_path), "--nccl-version", told["nccl_version"])
    assert bare["topology"] == preset and words in bare["topology_how"]


def test_other_hosts_keep_their_presets():
    # ABCI's A nodes (their own buses: tests/test_abci_slots.py) and an H20 host sharing buses 10 and 90 with
    # p4d: not AWS
    abci = _sweep(DATA / "all_reduce_perf-16xA100-SXM4-40GB-abci-2nodes-nccl2.8.4.txt")
    assert abci["topology"] == "abci-a" and "AWS" not in abci["topology_how"]


@pytest.mark.parametrize("kind,buses,expected", [
    ("a100-40", {"a": [0x10, 0x10, 0x20, 0x20], "b": [0x10, 0x10, 0x20, 0x20]}, "p4d.24xlarge"),
    ("a100-80", {"a": [0x90, 0x90], "b": [0xA0, 0xA0]}, "p4de.24xlarge"),
    ("a100-40", {"a": [0x10, 0x20], "b": [0x10, 0x20]}, None),  # no pair on a bus: not told apart
    ("a100-40", {"a": [0x10, 0x10]}, None),  # one host: the node is the same machine either way
    ("a100-40", {"a": [0x10, 0x10], "b": [0x07, 0x0F]}, None),
    ("h100", {"a": [0x53, 0x64], "b": [0x75, 0x86]}, "p5.48xlarge"),
    ("h100", {"a": [0x53, 0x53], "b": [0x53, 0x53]}, None),
    ("h200", {"a": [0x53, 0x64], "b": [0x53, 0x64]}, None),  # p5e's layout is not one the bundled runs show
])
def test_slot_rule(kind, buses, expected):
    assert aws_instance_by_slots(kind, buses) == expected


def test_full_bus_ids_tell_the_instance_too(tmp_path):
    """nccl-tests 2.10 and later print domain:bus:device (``[0000:10:1c]``): the p4de run's lines rewritten
    so, each pair's GPUs at devices 1c and 1d of their bus as the instance puts them, pick the same preset."""
    def full(m):
        return f"device  {m[1]} [0000:{m[2]}:{'1c' if int(m[1]) % 2 == 0 else '1d'}]"

    text = re.sub(r"device\s+(\d+) \[0x([0-9a-f]{2})\]", full, P4DE.read_text())
    assert "[0000:a0:1d]" in text and "[0x" not in text
    path = tmp_path / P4DE.name
    path.write_text(text)
    assert _sweep(path)["topology"] == "aws-p4de"
