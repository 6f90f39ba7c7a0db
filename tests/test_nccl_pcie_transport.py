"""Which transport NCCL gives the hops of a PCIe ring: peer-to-peer, or host memory (SHM) where the driver
refuses peer-to-peer or the path is past NCCL's P2P level (``src/graph/paths.cc`` ``ncclTopoCheckP2p``),
and GPUs a VM's device lines put each on PCI bus 0, whose paths cross the CPU."""

import pytest
from sweep_files import DATA, check_json, file_rows, with_lines_before_table

from zerocalc.nccl.pcie import PcieLayout, hop_via_host, p2p_past_cpu, ring_via_host
from zerocalc.topology import PRESETS, topology_to_toml
from zerocalc.topology.stated import p2p_level_of
from zerocalc.traces.nccl_tests import parse

G2 = "all_reduce_perf-2xV100-PCIe-azure-nc12sv3-g2.txt"
NP2 = "all_reduce_perf-2xV100-PCIe-azure-nc12sv3-np2.txt"


def _layout(per_switch, *, p2p=True, amd=False, gpus=2, era=30):
    return PcieLayout(gpus=gpus, per_socket=4, per_switch=per_switch, p2p=p2p, intel=not amd, pci_GBps=12.0,
                      smp_GBps=10.0, p2p_past_cpu=p2p_past_cpu("amd" if amd else "intel", era, gpus))


@pytest.mark.parametrize(("vendor", "era", "gpus", "past"), [
    ("intel", 30, 2, False),  # p2pLevel = PATH_PXB on Intel, every release
    ("arm", 30, 2, False),  # PATH_PXB ("Don't use P2P through ARM CPUs" up to 2.22, the default after)
    ("amd", 22, 8, True),  # up to 2.22: "In general, use P2P whenever we can" (PATH_SYS)
    ("amd", 23, 2, True),  # from 2.23: "Allow P2P between pairs of GPUs on AMD systems"
    ("amd", 23, 4, False),  # ... and PATH_PXB for more than two
])
def test_nccls_default_p2p_level_by_cpu_and_release(vendor, era, gpus, past):
    assert p2p_past_cpu(vendor, era, gpus) is past


def test_a_ring_goes_through_host_memory_where_its_hops_are_past_the_p2p_level():
    assert not ring_via_host(_layout(4))  # one switch, peer-to-peer: PATH_PIX
    assert ring_via_host(_layout(4, p2p=False))  # the driver refuses it (GeForce)
    assert ring_via_host(_layout(1))  # each GPU on a host bridge of its own: PATH_PHB, past PATH_PXB
    assert not ring_via_host(_layout(1, amd=True))  # AMD, two GPUs: PATH_SYS lets PHB through
    assert ring_via_host(_layout(1, amd=True, gpus=4, era=23))
    assert not ring_via_host(_layout(1, amd=True, gpus=4, era=22))


@pytest.mark.parametrize(("value", "level"), [
    ("SYS", "SYS"), ("PHB", "PHB"), ("PXB", "PXB"), ("PIX", "PIX"),  # topo.cc topoPathTypeStr, strcmp
    ("PXN", "PXB"), ("P2C", "PXB"),  # between PXB and PHB: for two GPUs' PCIe path, PXB
    ("1", "PIX"), ("2", "PXB"), ("3", "PHB"), ("4", "SYS"), ("9", "SYS"),  # paths.cc levelsOldToNew
    ("sys", None), ("NODE", None), ("LOC", None),  # not a name NCCL matches; LOC: no PCIe peer-to-peer
])
def test_nccl_p2p_level_read_as_nccl_reads_it(value, level):
    assert p2p_level_of(value) == level


def test_a_p2p_level_of_phb_keeps_a_socket_but_not_the_smp_link():
    # 2 sockets of 2 GPUs, each GPU on a root port: PHB lets 0 -> 1 through its CPU, not 1 -> 2 across
    lay = PcieLayout(gpus=4, per_socket=2, per_switch=1, p2p=True, intel=True, pci_GBps=12.0, smp_GBps=10.0,
                     p2p_past_cpu=True, p2p_past_socket=False)
    assert not hop_via_host(lay, 0, 1) and hop_via_host(lay, 1, 2)
    assert not hop_via_host(PcieLayout(**{**lay.__dict__, "p2p_past_socket": True}), 1, 2)  # SYS
    assert hop_via_host(PcieLayout(**{**lay.__dict__, "p2p": False}), 0, 1)  # the driver refuses it


@pytest.mark.parametrize(("value", "p2p"), [("PHB", True), ("SYS", True), ("3", True), ("PXB", False),
                                            ("sys", False)])
def test_a_stated_p2p_level_lets_the_vm_pair_through_the_cpu(tmp_path, value, p2p):
    """The V100 pair of the Azure VM, each GPU on a host bridge of its own (PATH_PHB between them), with
    ``export NCCL_P2P_LEVEL=…`` before its table: from PHB up NCCL uses peer-to-peer through the CPU
    (``ncclTopoCheckP2p``: ``path->type <= p2pLevel``), the same PCIe links with no host-memory steps. By
    hand at 2 GiB: each x16 gen3 link 12 GB/s over Intel's 6/5 (``INTEL_P2P_OVERHEAD``) = 10 GB/s, one
    ring of it: 2147483648 B / 10 GB/s = 0.2147 s (all-reduce, 2 ranks); through host memory the steps'
    idle directions add 1 + 1 / (2 channels × 2) (``host_staged_slowdown``): 0.2684 s. A value NCCL does
    not match (lower case) leaves its default."""
    path = with_lines_before_table(tmp_path, G2, [f"export NCCL_P2P_LEVEL={value}"])
    sweep = check_json(path)
    last = sweep["rows"][-1]
    assert last["bytes"] == 2147483648
    assert last["predicted_s"] == pytest.approx(2147483648 / 10e9 * (1.0 if p2p else 1.25), rel=1e-3)
    assert (f"NCCL_P2P_LEVEL={value} (line" in sweep["topology_how"]) is (value != "sys")
    assert any("host's rate" in n for n in sweep["notes"]) is not p2p


def _bus_tokens(name):
    """The bracketed bus id of each '#  Rank' line, by a plain split of the file."""
    return [w for line in (DATA / name).read_text().splitlines() if line.split()[1:2] == ["Rank"]
            for w in line.split() if w.startswith("[")]


@pytest.mark.parametrize("name", [G2, NP2])
def test_a_vms_gpus_on_pci_bus_0_are_read_off_the_device_lines(name):
    assert _bus_tokens(name) == ["[0x00]", "[0x00]"]
    with open(DATA / name) as f:
        (run,) = parse(f, str(DATA / name)).meta["runs"]
    assert run["root_bus_hosts"] == ["vmnetto9831"]
    other = "all_reduce_perf-2xRTX4090-g2-docker-kalavai.txt"  # [0x1a], [0x1b]: under a PCIe switch
    assert _bus_tokens(other) == ["[0x1a]", "[0x1b]"]
    with open(DATA / other) as f:
        (run,) = parse(f, str(DATA / other)).meta["runs"]
    assert run["root_bus_hosts"] == []


@pytest.mark.parametrize(("name", "busbw_2g"), [(G2, 6.88), (NP2, 6.74)])
def test_the_azure_v100_pair_runs_through_host_memory(name, busbw_2g):
    """Each V100 on its own host bridge (the page's ``nvidia-smi topo -m``: ``NODE``): NCCL's path is PHB,
    past Intel's P2P level, so it goes through host memory. By hand: each GPU's PCIe 3.0 x16 link, 12 GB/s
    (``topo.cc``: 16 × 60 / 80), carries 6/5 of a PHB path on Intel (``INTEL_P2P_OVERHEAD``): one channel
    of 10 GB/s, launched as two (``ncclTopoPostset`` doubles the rings); through host memory the
    all-reduce's two idle steps take 1 + 1 / (2 · (3 − 1)) = 1.25 of NCCL's time
    (:func:`zerocalc.nccl.pcie.host_staged_slowdown`): 8 GB/s of bus bandwidth, 268 ms at 2 GiB, where
    peer-to-peer through one switch (the preset's layout, before) gave 12. The file moves 6.88 / 6.74."""
    rows = file_rows(name)
    assert rows[-1][0] / (rows[-1][1] * 1e-6) / 1e9 == pytest.approx(busbw_2g, abs=0.01)  # all-reduce, n = 2
    sweep = check_json(name)
    assert "PCI bus 0" in sweep["topology_how"] and "SHM through host memory" in sweep["topology_how"]
    assert any("host's rate" in n for n in sweep["notes"])
    last = sweep["rows"][-1]
    assert last["bytes"] == 2147483648 and last["predicted_s"] == pytest.approx(2147483648 / 8e9, rel=0.01)
    big = [r for r in sweep["rows"] if r["bytes"] >= 8 << 20]
    assert all(0.8 <= r["ratio"] <= 1.25 for r in big)


def test_a_given_topology_keeps_its_own_layout(tmp_path):
    """With ``--topology`` the device lines pick nothing: the pcie-gen3 preset's GPUs under one switch talk
    peer-to-peer, and no note says the rate is the host's."""
    toml = tmp_path / "box.toml"
    toml.write_text(topology_to_toml(PRESETS["pcie-gen3"]))
    sweep = check_json(G2, "--topology", str(toml))
    assert not any("host's rate" in n for n in sweep["notes"])
    assert sweep["rows"][-1]["predicted_s"] == pytest.approx(2147483648 / 12e9, rel=0.02)
