"""A PCIe box's GPUs each on a root port of their own, read off the bus numbers of a run's ``#  Rank``
lines (:mod:`zerocalc.topology.pci_buses`)."""

import pytest
from sweep_files import DATA, check_json

from zerocalc.topology import PRESETS
from zerocalc.topology.pci_buses import on_own_root_ports, own_root_ports

Q5090 = "all_reduce_perf-4xRTX5090-g4-quoted.txt"


def _quoted_rows(name):
    """(size, out-of-place µs, in-place µs) of each row, a Markdown quote's '>' taken off each line first."""
    rows = []
    for line in (DATA / name).read_text().splitlines():
        f = line.split()
        f = f[1:] if f[:1] == [">"] else f
        if len(f) >= 13 and f[0].isdigit() and f[1].isdigit():
            rows.append((int(f[0]), float(f[5]), float(f[9])))
    return rows


def _buses(name):
    """The bus number of each '#  Rank' line's bracketed id, by a plain split of the file."""
    out = []
    for line in (DATA / name).read_text().splitlines():
        f = line.split()
        if "Rank" in f and "device" in f:
            tok = next(w for w in f if w.startswith("["))[1:-1]
            out.append(int(tok[2:], 16) if tok.startswith("0x") else int(tok.split(":")[1], 16))
    return out


@pytest.mark.parametrize(("name", "buses", "own"), [
    (Q5090, [0x01, 0x21, 0x41, 0x61], True),  # an AMD EPYC Genoa host: a root complex each
    ("all_reduce_perf-2xRTX4090-g2-k8s-kalavai.txt", [0x1a, 0xb2], True),  # a socket each
    ("all_reduce_perf-4xRTX4090-g4-docker-kalavai.txt", [0x1a, 0x1b, 0x3d, 0x3e], False),  # two switches
    ("all_reduce_perf-2xRTX2080Ti-pcie3-shm.txt", [0xb4, 0xb5], False),  # one switch (nvidia-smi: PIX)
    ("all_reduce_perf-2xV100-PCIe-azure-nc12sv3-g2.txt", [0, 0], False),  # bus 0: stated.on_own_host_bridges
])
def test_gpus_far_apart_on_the_bus_sit_on_root_ports_of_their_own(name, buses, own):
    assert _buses(name) == buses
    assert own_root_ports(buses) is own


def test_the_sockets_are_the_halves_of_the_bus_space():
    box = PRESETS["pcie-gen4"]  # 8 GPUs, 2 sockets, 4 a switch
    one, words = on_own_root_ports(box, [0x01, 0x21, 0x41, 0x61])
    assert (one.gpus_per_pcie_switch, one.cpu_sockets) == (1, 1) and "one socket" in words
    two, words = on_own_root_ports(box, [0x1a, 0xb2])
    assert (two.gpus_per_pcie_switch, two.cpu_sockets, two.gpus_per_node) == (1, 2, 2)
    mixed, _ = on_own_root_ports(box, [0x81, 0x01])  # the second socket's first: the preset's sockets
    assert (mixed.gpus_per_pcie_switch, mixed.cpu_sockets, mixed.gpus_per_node) == (1, 2, 8)
    assert on_own_root_ports(box, [0x1a, 0x1b]) == (box, "")
    assert on_own_root_ports(PRESETS["dgx-h100"], [0x01, 0x21]) == (PRESETS["dgx-h100"], "")


def test_four_rtx_5090_on_their_own_root_ports_price_within_the_bands():
    """Four RTX 5090 of an AMD EPYC Genoa host (NVIDIA/nccl-tests issue 287): on NCCL 2.26+ four GPUs on
    AMD stop peer-to-peer at PATH_PXB, and GeForce cards have none, so NCCL goes through host memory. Put
    under one switch (the preset's layout) NCCL's Blackwell search finds no ring and the price was three
    times the time; each on a root port, the file's 27.3 GB/s of bus bandwidth at 128 MiB is within the
    bands at every size."""
    rows = _quoted_rows(Q5090)
    size, t_us, _ = rows[-1]
    assert size == 134217728 and size / (t_us * 1e-6) / 1e9 * 1.5 == pytest.approx(27.26, abs=0.01)
    sweep = check_json(Q5090, counted=_quoted_rows)
    assert "host bridge of its own" in sweep["topology_how"] and "far apart" in sweep["topology_how"]
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
