"""Two V100 PCIe GPUs of one Azure VM (``Standard_NC12s_v3``), one process driving both (``-g 2``) and one
process each (``-np 2``): the class of a pair of PCIe GPUs without NVLink, priced on the ``pcie-gen3`` preset
their device lines pick. Expected figures are read off the files; the band is issue 11's 0.5-2x at every
size."""

import pytest
from sweep_files import check_json, file_rows

G2 = "all_reduce_perf-2xV100-PCIe-azure-nc12sv3-g2.txt"
NP2 = "all_reduce_perf-2xV100-PCIe-azure-nc12sv3-np2.txt"


@pytest.mark.parametrize(("name", "busbw_2g"), [(G2, 6.88), (NP2, 6.74)])
def test_two_v100_pcie_of_one_vm_within_the_every_size_band(name, busbw_2g):
    """29 rows, 8 B to 2 GiB, on 2 ranks of one host; every size within 0.5-2x of the file's time. At 2 GiB
    the pair moves 6.88 / 6.74 GB/s of bus bandwidth (the file), under the 12 GB/s of a PCIe 3.0 x16 link
    NCCL's search counts (``topo.cc``: 16 × 60 / 80), which the model's ring through one switch prices."""
    rows = file_rows(name)
    assert len(rows) == 29 and rows[0][0] == 8 and rows[-1][0] == 2147483648
    assert rows[-1][0] / (rows[-1][1] * 1e-6) / 1e9 == pytest.approx(busbw_2g, abs=0.01)  # all-reduce, n = 2
    sweep = check_json(name)
    assert sweep["group_size"] == 2 and sweep["topology"] == "pcie-gen3"
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
    assert all(r["algorithm"] == "Ring" for r in sweep["rows"])


def test_a_pair_through_host_memory_says_its_rate_is_the_hosts():
    """Two GeForce RTX 4090 (no peer-to-peer: NCCL's SHM transport) of kalavai's pod: the note says the rate
    through host memory is the host's, which the file does not state (they move 3.85 GB/s at 2 GiB, the
    file's last row, where the links NCCL counts give 8); the V100 pair, peer-to-peer by default, gets
    none."""
    k8s = check_json("all_reduce_perf-2xRTX4090-g2-k8s-kalavai.txt")
    assert any("host's rate" in n for n in k8s["notes"])
    assert not any("host's rate" in n for n in check_json(G2)["notes"])
