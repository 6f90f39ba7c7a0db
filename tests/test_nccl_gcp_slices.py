"""One GPU per Google Cloud RDMA VM (A3 Ultra: 8 H200; A4: 8 B200; 8 ConnectX-7 400 Gb/s RoCE NICs each),
told by the PCI slots of the device lines (:mod:`zerocalc.topology.slots`): a slice whose NIC the file does
not name, priced through host memory (:mod:`zerocalc.nccl.graph` assumption 7).

Expected figures are read off the files (device lines and rows by a plain split); the hand figure is NCCL's
48 GB/s for a node of one GPU and one 400 Gb/s NIC on PCIe 5.0 (``topo.cc``: the smaller of 400000 / 8000
and 16 × 240 / 80) × 16/24 through host memory (NVIDIA/nccl issue 412) = 32 GB/s of bus bandwidth."""

import json
from dataclasses import replace

import pytest
from sweep_files import DATA, check_json, file_rows, median_size_ratio
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.topology import PRESETS, topology_to_toml
from zerocalc.topology.devices import nodes_of
from zerocalc.topology.slots import GCP_RDMA_VM_SLOTS, on_gcp_rdma_vms, slot, with_gcp_slice

runner = CliRunner()

A3U_WHOLE = "all_gather_perf-16xH200-gcp-a3ultra-nccl2.26.6.txt"
A3U_1PN = "all_gather_perf-2xH200-a3ultra-1pernode-nccl2.25.1.txt"
A3U_1PN_GPU1 = "all_gather_perf-2xH200-a3ultra-1pernode-gpu1-nccl2.25.1.txt"
GKE_1PN = "all_reduce_perf-2xH200-gke-1pernode.txt"
A4_1PN = "all_gather_perf-2xB200-gcp-a4-1pernode-nccl2.26.6.txt"
H100_IB_1PN = "allreduce-sendrecv-2xH100-2nodes-1pernode-nccl2.29.2.log"
SLICES = {A3U_1PN: "dgx-h200", A3U_1PN_GPU1: "dgx-h200", GKE_1PN: "dgx-h200", A4_1PN: "dgx-b200"}


def _slots_by_host(name):
    """host → the bus numbers of its '#  Rank' lines, by a plain split of the file."""
    out = {}
    for line in (DATA / name).read_text().splitlines():
        f = line.split()
        if "Rank" in f and "device" in f and "on" in f:
            bus = f[f.index("device") + 2].strip("[]")
            out.setdefault(f[f.index("on") + 1], []).append(bus.split(":")[1].lower())
    return out


def _check(path, *args):
    res = runner.invoke(app, ["check", str(path), "--format", "json", *args])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    return sweep


def test_the_slots_are_those_the_whole_a3_ultra_vms_list():
    """Google's own test pods on two whole A3 Ultra VMs (SkyPilot's GCP networking page) list each VM's eight
    H200 at the eight slots the rule reads, on both hosts."""
    by_host = _slots_by_host(A3U_WHOLE)
    assert len(by_host) == 2
    assert all(sorted(v) == sorted(GCP_RDMA_VM_SLOTS) for v in by_host.values())


def test_whole_a3_ultra_vms_are_no_slice_and_within_both_bands():
    """16 ranks on two A3 Ultra VMs: nodes of eight GPUs (no slice: the rule leaves them with GPUDirect RDMA),
    every size within 0.5-2x and the median size within 0.8-1.25x on ``dgx-h200``."""
    sweep = check_json(A3U_WHOLE)
    assert sweep["topology"] == "dgx-h200" and sweep["group_size"] == 16
    assert "GCP" not in sweep["topology_how"]
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
    assert 0.8 <= median_size_ratio(sweep) <= 1.25


@pytest.mark.parametrize("name", sorted(SLICES))
def test_one_gpu_slices_of_gcp_vms_are_priced_through_host_memory(name, tmp_path):
    """Each of the four two-rank GCP runs has its GPUs at the VM's slots (the file), so it is priced as the
    preset's node of one GPU through host memory, as a topology TOML with ``gpudirect_rdma = false`` prices
    it, size for size, with the note that says so and no LL128."""
    assert all(s in GCP_RDMA_VM_SLOTS for v in _slots_by_host(name).values() for s in v)
    sweep = _check(DATA / name)
    assert "GCP" in sweep["topology_how"] and "through host memory" in sweep["topology_how"]
    assert any("NCCL_NET_GDR_LEVEL=PIX" in n for n in sweep["notes"])
    assert not any("priced with GPUDirect RDMA" in n for n in sweep["notes"])
    assert not any(r["protocol"] == "LL128" for r in sweep["rows"])
    topo, _ = nodes_of(PRESETS[SLICES[name]], 1)
    path = tmp_path / "slice.toml"
    path.write_text(topology_to_toml(replace(topo, name="slice", gpudirect_rdma=False)))
    relay = _check(DATA / name, "--topology", str(path))
    want = [r["predicted_s"] for r in relay["rows"]]
    assert [r["predicted_s"] for r in sweep["rows"]] == pytest.approx(want)


@pytest.mark.parametrize("name", [A3U_1PN, GKE_1PN])
def test_h200_slices_reach_two_thirds_of_the_nic_at_their_largest_size(name):
    """Priced so by default, the two later H200 runs' largest size is within 0.9-1.1x (their last rows: 32.20
    and 31.89 GB/s of bus bandwidth against the model's 32)."""
    sweep = _check(DATA / name)
    assert sweep["rows"][-1]["bytes"] == file_rows(name)[-1][0]
    assert 0.9 <= sweep["rows"][-1]["ratio"] <= 1.1


def test_the_a4_slice_within_the_every_size_band():
    """The A4 pods (two B200 and two NICs of one PCIe root each, one rank on device 0): every size within
    0.5-2x priced through host memory; out of place it reaches 36.67 GB/s of bus bandwidth at 1 GiB (the
    file), 1.15 of the model's 32."""
    sweep = _check(DATA / A4_1PN)
    rows = [r for r in file_rows(A4_1PN) if r[0] > 0]
    assert [r["bytes"] for r in sweep["rows"]] == [s for s, _, _ in rows]
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])


def test_one_gpu_per_host_elsewhere_keeps_gpudirect_rdma():
    """Two DGX H100 hosts (GPU ``1b:00`` on each, the file) are no GCP slice: GDR, and the note that says it
    assumed so."""
    assert {s for v in _slots_by_host(H100_IB_1PN).values() for s in v} == {"1b"}
    res = runner.invoke(app, ["check", str(DATA / H100_IB_1PN), "--format", "json"])
    assert res.exit_code == 0, res.output
    for sweep in json.loads(res.stdout)["sweeps"]:
        assert "GCP" not in sweep["topology_how"]
        assert any("priced with GPUDirect RDMA" in n for n in sweep["notes"])


def test_a_slot_off_the_vm_or_a_stated_path_leaves_the_slice_alone(tmp_path):
    """The same A3 Ultra file with one rank moved to slot ``1b`` is no GCP VM's: GDR as before; with an NCCL
    INFO line connecting the nodes ``via NET/IB/0/GDRDMA`` the stated path wins."""
    text = (DATA / A3U_1PN).read_text()
    moved = tmp_path / "all_gather_perf-moved.txt"
    moved.write_text(text.replace("[0000:c4:00]", "[0000:1b:00]"))
    sweep = _check(moved)
    assert "GCP" not in sweep["topology_how"]
    stated = tmp_path / "all_gather_perf-gdr.txt"
    stated.write_text("nccl-gib-test-0:85:90 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via "
                      "NET/IB/0/GDRDMA\n" + text)
    sweep = _check(stated)
    assert "GCP" not in sweep["topology_how"] and "GDRDMA" in sweep["topology_how"]


def test_the_rule_by_hand():
    """Bus ids in domain 0 only; two hosts at least; nodes of one GPU of the H200 or B200 preset; a stated
    path or a given topology's other presets untouched."""
    assert slot("0000:CC:00") == "cc" and slot("00000000:8f:00") == "8f" and slot("0001:8f:00") is None
    assert on_gcp_rdma_vms({"a": ["0000:8f:00"], "b": ["0000:cc:00"]})
    assert not on_gcp_rdma_vms({"a": ["0000:8f:00"]})
    assert not on_gcp_rdma_vms({"a": ["0000:8f:00"], "b": ["0000:1b:00"]})
    ids = {"a": ["0000:8f:00"], "b": ["0000:8f:00"]}
    one, _ = nodes_of(PRESETS["dgx-b200"], 1)
    off, how = with_gcp_slice(one, ids, 2)
    assert off.gpudirect_rdma is False and "A4" in how
    stated = replace(one, gpudirect_rdma=True)
    assert with_gcp_slice(stated, ids, 2) == (stated, "")
    assert with_gcp_slice(PRESETS["dgx-b200"], ids, 16) == (PRESETS["dgx-b200"], "")
    h100, _ = nodes_of(PRESETS["dgx-h100"], 1)
    assert with_gcp_slice(h100, ids, 2) == (h100, "")
