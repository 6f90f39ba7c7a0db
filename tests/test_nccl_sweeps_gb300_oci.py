"""check on OCI's GB300 NVL72 sweeps (oracle-quickstart/oci-gpu-quickstarts, nvidia/GB300/README-GB300.md;
tests/data/traces/README.md): all-reduce and all-to-all on one host, 2 hosts and 16 hosts of one rack, and
32 hosts of two racks, NCCL 2.28.7, NVLS enabled as the guide's job sets it, 8 and 16 GiB rows.

Expected figures are read off the files by a plain split (tests/sweep_files.py): the rows, the device
lines (the last rank's), the version line, busbw/algbw (nccl-tests' factors: 2(n-1)/n for all-reduce,
(n-1)/n for all-to-all); the bands are issue 11's."""

import pytest
from sweep_files import DATA, check_json, device_lines, file_rows, median_size_ratio

#: file → (ranks, hosts its device lines name, the collective, both bands met)
SWEEPS = {
    "all_reduce_perf-4xGB300-oci-1node-nccl2.28.7.txt": (4, 1, "all_reduce", True),
    "all_reduce_perf-8xGB300-oci-2nodes-1rack-nccl2.28.7.txt": (8, 2, "all_reduce", True),
    "all_reduce_perf-64xGB300-oci-16nodes-1rack-nccl2.28.7.txt": (64, 2, "all_reduce", True),
    # NVLS Tree across the two racks' domains: 0.78-0.81x, the median size under 0.8 (traces README)
    "all_reduce_perf-128xGB300-oci-32nodes-2racks-nccl2.28.7.txt": (128, 2, "all_reduce", False),
    "alltoall_perf-4xGB300-oci-1node-nccl2.28.7.txt": (4, 1, "all_to_all", True),
    "alltoall_perf-8xGB300-oci-2nodes-1rack-nccl2.28.7.txt": (8, 2, "all_to_all", True),
    "alltoall_perf-64xGB300-oci-16nodes-1rack-nccl2.28.7.txt": (64, 2, "all_to_all", True),
    # half of every rank's data crosses between the racks at 24 GB/s a GPU, a quarter of its NICs' rate
    "alltoall_perf-128xGB300-oci-32nodes-2racks-nccl2.28.7.txt": (128, 2, "all_to_all", False),
}


def _ranks_listed(name, op):
    """The ranks of the last '#  Rank' line (+1), checked against nccl-tests' bus-bandwidth factor on the
    file's last row (algbw, busbw: cells 7, 8; two decimals each)."""
    text = (DATA / name).read_text().splitlines()
    last = max(int(line.split()[2]) for line in text if line.startswith("#  Rank"))
    f = [line.split() for line in text if line.split() and line.split()[0].isdigit()][-1]
    n = last + 1
    factor = 2 * (n - 1) / n if op == "all_reduce" else (n - 1) / n
    assert float(f[7]) == pytest.approx(float(f[6]) * factor, abs=0.02)
    return n


@pytest.mark.parametrize("name", sorted(SWEEPS))
def test_oci_gb300_sweeps_read_as_counted_and_priced(name):
    ranks, hosts, op, in_band = SWEEPS[name]
    assert _ranks_listed(name, op) == ranks
    lines = device_lines(name)
    assert {g for _, g in lines} == {"NVIDIA GB300"} and len({h for h, _ in lines}) == hosts
    assert "NCCL version 2.28.7+cuda13.0" in (DATA / name).read_text()
    assert [s for s, _, _ in file_rows(name)] == [8589934592, 17179869184]
    sweep = check_json(name)
    assert sweep["op"] == op and sweep["group_size"] == ranks
    assert sweep["topology"] == "gb300-nvl72" and sweep["nccl_version"] == "2.28.7"
    if in_band:
        assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
        assert 0.8 <= median_size_ratio(sweep) <= 1.25


def test_two_racks_of_64_are_two_domains_of_16_trays():
    """128 ranks, more than one NVL72 domain holds: spread over two domains of 64 (OCI's racks of 16
    trays), NCCL's two cliques, not 72 and 56; every size within 0.5-2x."""
    sweep = check_json("all_reduce_perf-128xGB300-oci-32nodes-2racks-nccl2.28.7.txt")
    assert "spread evenly over 2 domains" in sweep["topology_how"]
    assert "16 hosts × 4 GPUs" in sweep["topology_how"]
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
