"""check on public nccl-tests sweeps from Google Cloud's RDMA machines: A4 (8 B200 and 8 ConnectX-7
400 Gb/s RoCE NICs per VM) and A3 Ultra (8 H200, the same NICs), priced with the HGX preset of their GPU
(``dgx-b200``, ``dgx-h200``: 8 SXM GPUs on NVSwitches, one 400 Gb/s NIC per GPU), as their device lines pick.

Expected figures are read off the files (rows, first and last size and time, device lines, the NCCL version
line); the bands are issue 11's (0.5-2x at every size, 0.8-1.25x at the median size) where they hold."""

import json

import pytest
from sweep_files import DATA, check_json, device_lines, file_rows, median_size_ratio
from typer.testing import CliRunner

from zerocalc.cli import app

runner = CliRunner()

A4_ALLREDUCE = "all_reduce_perf-16xB200-gcp-a4-2nodes.txt"
A4_ALLGATHER_1PN = "all_gather_perf-2xB200-gcp-a4-1pernode-nccl2.26.6.txt"
A3U_ALLGATHER_1PN = "all_gather_perf-2xH200-a3ultra-1pernode-nccl2.25.1.txt"
A3U_ALLGATHER_1PN_GPU1 = "all_gather_perf-2xH200-a3ultra-1pernode-gpu1-nccl2.25.1.txt"
GKE_H200_ALLREDUCE_1PN = "all_reduce_perf-2xH200-gke-1pernode.txt"
A4_ALLGATHER_1NODE = "all_gather_perf-2xB200-gcp-a4-1node-nccl2.26.6.txt"

#: file → (rows with a size above 0, first size, its out-of-place µs, last size, its out-of-place µs,
#: '#  Rank' lines, GPU those lines name, hosts, the file's 'NCCL version' line or None), as the file shows
COUNTED = {
    A4_ALLREDUCE: (11, 8388608, 156.9, 8589934592, 23563.0, 0, None, 0, None),
    A4_ALLGATHER_1PN: (26, 32, 14.18, 1073741824, 14640.0, 2, "NVIDIA B200", 2, "2.26.6"),
    A3U_ALLGATHER_1PN: (24, 1024, 21.75, 8589934592, 133370.0, 2, "NVIDIA H200", 2, "2.25.1"),
    A3U_ALLGATHER_1PN_GPU1: (24, 1024, 20.89, 8589934592, 166030.0, 2, "NVIDIA H200", 2, "2.25.1"),
    GKE_H200_ALLREDUCE_1PN: (24, 1024, 35.59, 8589934592, 269368.0, 2, "NVIDIA H200", 2, None),
    A4_ALLGATHER_1NODE: (8, 67108864, 100.1, 8589934592, 8897.6, 2, "NVIDIA B200", 1, "2.26.6"),
}



def _check(name, *args):
    res = runner.invoke(app, ["check", str(DATA / name), "--format", "json", *args])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    return sweep


@pytest.mark.parametrize("name", sorted(COUNTED))
def test_gcp_rdma_sweeps_read_as_the_files_count_them(name):
    """Every row of each file with a size above 0 (nccl-tests prints 0-byte rows for all_gather's first
    counts; nothing is timed there), its sizes and out-of-place times; the GPU, host count and NCCL version
    the file prints."""
    n_rows, first, t_first, last, t_last, n_ranks, gpu, n_hosts, version = COUNTED[name]
    rows = [r for r in file_rows(name) if r[0] > 0]
    assert len(rows) == n_rows
    assert rows[0][:2] == (first, t_first) and rows[-1][:2] == (last, t_last)
    lines = device_lines(name)
    assert len(lines) == n_ranks and len({h for h, _ in lines}) == n_hosts
    assert {g for _, g in lines} == ({gpu} if gpu else set())
    sweep = _check(name, *(() if lines else ("--topology", "dgx-b200")))  # no device lines: say it
    assert [r["bytes"] for r in sweep["rows"]] == [s for s, _, _ in rows]
    assert [r["measured_s"] for r in sweep["rows"]] == pytest.approx([t * 1e-6 for _, t, _ in rows])
    if version:
        assert sweep["nccl_version"] == version
    if lines:  # the device lines name the GPU: its HGX preset, one rank on each host
        assert sweep["topology"] == {"NVIDIA B200": "dgx-b200", "NVIDIA H200": "dgx-h200"}[gpu]
        assert sweep["group_size"] == n_ranks


def test_a4_sixteen_b200_allreduce_within_bands_at_its_images_nccl():
    """dstack's GCP A4 page (2 VMs × 8 B200): 16 ranks by busbw/algbw = 2·15/16 (100.25 / 53.47 in its first
    row); its task sets no image, so dstack's default image ran it, whose Dockerfile at that commit builds
    NCCL 2.26.2 (``docker/base/Dockerfile``, ``ARG NCCL_VERSION=2.26.2-1``). Every size within 0.5-2x, the
    median size within 0.8-1.25x, on the B200 preset (8 ConnectX-7 400 Gb/s per node, as the page states)."""
    sweep = check_json(A4_ALLREDUCE, "--topology", "dgx-b200", "--nccl-version", "2.26.2")
    assert sweep["group_size"] == 16 and sweep["nccl_version"] == "2.26.2"
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
    assert 0.8 <= median_size_ratio(sweep) <= 1.25


@pytest.mark.parametrize("name", [A4_ALLGATHER_1PN, A3U_ALLGATHER_1PN, A3U_ALLGATHER_1PN_GPU1,
                                  GKE_H200_ALLREDUCE_1PN])
def test_one_gpu_per_vm_sweeps_are_priced_on_nodes_of_one_gpu_and_one_nic(name):
    """The four two-rank runs hold one GPU on each of two VMs (each pod claims one GPU and one RDMA NIC,
    as the pages' manifests show): priced on two nodes of one GPU and one NIC, as the device lines list
    them, never as two GPUs of one NVLink node."""
    sweep = _check(name)
    assert sweep["group_size"] == 2
    assert "1 per host, 2 hosts" in sweep["topology_how"]
    assert not any(r["algorithm"].startswith("NVLS") for r in sweep["rows"])


def test_a4_one_b200_per_vm_allgather_within_the_every_size_band_from_1_mib():
    """The A4 two-VM all_gather (NCCL 2.26.6, stated): from 1 MiB up (Simple protocol, the network's
    bandwidth) every size within 0.5-2x; it reaches 36.7 GB/s of bus bandwidth at 1 GiB, 0.73 of a
    400 Gb/s NIC's 50 GB/s (the file's last row)."""
    sweep = _check(A4_ALLGATHER_1PN)
    big = [r for r in sweep["rows"] if r["bytes"] >= 1 << 20]
    assert len(big) == 11
    assert all(0.5 <= r["ratio"] <= 2.0 for r in big)


def test_a_header_copied_without_its_hash_marks_reads_wrong_as_nccl_tests_wrong_column():
    """dstack's pages print nccl-tests output with every leading '#' removed, the one inside '#wrong'
    too: the A4 file's header says 'wrong' where nccl-tests prints '#wrong'. It names the same column."""
    from zerocalc.traces.nccl_tests_rows import parse_header

    header = next(line for line in (DATA / A4_ALLREDUCE).read_text().splitlines() if "algbw" in line)
    assert header.split().count("wrong") == 2 and "#wrong" not in header
    got = parse_header(header)
    want = parse_header(header.replace(" wrong", "#wrong"))
    assert got is not None and not got.invalid
    assert (got.name, got.columns) == (want.name, want.columns)


def test_a4_two_b200_of_one_vm_allgather_within_the_every_size_band():
    """Two B200 of one A4 VM over NVLink (one pod, ``-g 2``; the page elides the rows below 64 MiB with
    ``...``), NCCL 2.26.6: every size within 0.5-2x on ``dgx-b200`` as one node of two GPUs. It peaks at a
    bus bandwidth of 482.71 GB/s out of place (564.14 in place: the file's last row), about half of NVLink5's
    900 GB/s each way."""
    sweep = _check(A4_ALLGATHER_1NODE)
    assert "2 per host, 1 host" in sweep["topology_how"]
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
