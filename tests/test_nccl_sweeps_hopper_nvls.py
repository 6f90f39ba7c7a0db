"""check on public Hopper all_reduce sweeps where NCCL runs NVLink SHARP: 8 H100 on one node (NVLS), 2 H200
nodes and 4 and 8 H100 nodes over 400 Gb/s NICs (NVLS Tree), each with the preset its device lines name
(CLI)."""

import json

import pytest
from sweep_files import DATA, check_json, file_rows, median_size_ratio
from typer.testing import CliRunner

from zerocalc.cli import app

runner = CliRunner()

H200_2N = "all_reduce_perf-16xH200-2nodes-roce.txt"
H100_1N = "all_reduce_perf-8xH100-1node-g8-nvls.txt"
H100_4N = "all_reduce_perf-32xH100-4nodes-ib-nccl2.26.2.txt"
H100_8N = "all_reduce_perf-64xH100-8nodes-ib.txt"
H100_4OF8 = "all_reduce_perf-32xH100-4of8nodes-ib.txt"


def device_lines(name):
    """(host, GPU name) of each '# Rank' line of the file."""
    out = []
    for line in (DATA / name).read_text().splitlines():
        if line.startswith("#  Rank"):
            head, _, gpu = line.partition("] ")
            out.append((head.split(" on ")[1].split()[0], gpu))
    return out


def unsteady(name):
    """Sizes whose out-of-place and in-place times differ by more than 1.25x in the file."""
    return {s for s, o, i in file_rows(name) if max(o / i, i / o) > 1.25}


@pytest.mark.parametrize(("name", "n_rows", "first", "last", "hosts", "gpu", "version"), [
    (H200_2N, 3, (1073741824, 4389.5), (9663676416, 37069), 2, "NVIDIA H200", None),
    (H100_1N, 6, (134217728, 613.3), (4294967296, 15870), 1, "NVIDIA H100 80GB HBM3", None),
    (H100_4N, 32, (8, 83.42), (17179869184, 90986), 4, "NVIDIA H100 80GB HBM3", "2.26.2"),
    (H100_8N, 14, (1048576, 117.0), (8589934592, 52733), 8, "NVIDIA H100 80GB HBM3", None),
    (H100_4OF8, 14, (1048576, 317.0), (8589934592, 51285), 4, "NVIDIA H100 80GB HBM3", None),
])
def test_bundled_sweeps_as_counted_from_the_files(name, n_rows, first, last, hosts, gpu, version):
    """Rows, first and last size and time, GPU and hosts counted from each file; check reads them all, with
    the preset the device lines name and the NCCL version the file prints (none: the latest modelled)."""
    rows, devices = file_rows(name), device_lines(name)
    assert len(rows) == n_rows and rows[0][:2] == first and rows[-1][:2] == last
    assert {g for _, g in devices} == {gpu} and len({h for h, _ in devices}) == hosts
    text = (DATA / name).read_text()
    assert ("NCCL version " + version in text) if version else "NCCL version" not in text
    sweep = check_json(name)
    preset = "dgx-h200" if gpu == "NVIDIA H200" else "dgx-h100"
    assert (sweep["op"], sweep["topology"], sweep["group_size"]) == ("all_reduce", preset, len(devices))
    assert "device lines" in sweep["topology_how"]
    if version:
        assert (sweep["nccl_version"], sweep["nccl_version_how"]) == (version, "stated by the file")
    else:
        assert sweep["nccl_version_how"].startswith("default")


def test_two_h200_nodes_nvls_tree_within_bands():
    """2 x 8 H200 (Supermicro HGX, a ConnectX-7 400 Gb/s NIC beside each GPU per the topology dump of
    NVIDIA/ nccl-tests issue 256), bare metal, 1-9 GiB: every size NVLS Tree and within 0.5-2x, the
    median size within 0.8-1.25x. Hand check, 9 GiB (v2.30.7 tuning.cc, H200 = H100's NVLink4 and 400
    Gb/s per GPU): NVLS Tree on 2 nodes, min(48 x 0.85 x 7/8 x 2, 2 x 48, 57.7) = 57.7 GB/s per channel x
    8 channels x 16/30 (nvls ratio), latency 25 + 2 x 20.9 us, and the pipeline's fill: two loops of 16
    channels x 8 heads x 128 KiB = 16 MiB (zerocalc.nccl.nvls_pipeline); the file measures 37069 us."""
    sweep = check_json(H200_2N)
    assert all(r["algorithm"] == "NVLSTree" for r in sweep["rows"])
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
    assert 0.8 <= median_size_ratio(sweep) <= 1.25  # 1.05 at 3 GiB
    big = sweep["rows"][-1]
    hand = (25 + 2 * 20.9) * 1e-6 + (9663676416 + 2 * (16 << 20)) / (57.7 * 8 * 16 / 30 * 1e9)
    assert big["predicted_s"] == pytest.approx(hand, rel=1e-6)
    assert big["ratio"] == pytest.approx(hand / 37069e-6, rel=1e-6)  # 1.06


def test_one_h100_node_driven_by_one_thread_nvls_within_bands():
    """8 H100 on one node, one process and thread driving them (nThread 1 nGpus 8), 128 MiB-4 GiB: NVLS at
    every size (NVIDIA/nccl-tests issue 290, where NCCL's developer calls its 476 GB/s NVLink SHARP),
    within 0.5-2x, the median size within 0.8-1.25x."""
    text = (DATA / H100_1N).read_text()
    assert "# nThread 1 nGpus 8 " in text
    sweep = check_json(H100_1N)
    assert sweep["gpus_per_thread"] == 8
    assert all(r["algorithm"] == "NVLS" for r in sweep["rows"])
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
    assert 0.8 <= median_size_ratio(sweep) <= 1.25  # 0.92 at 512 MiB


def test_four_h100_nodes_outliers_are_the_files_unsteady_rows():
    """4 x 8 H100 (Dell XE9680 VMs, 8 x ConnectX-7 400 Gb/s InfiniBand each; NVIDIA/nccl-tests issue 309,
    where NCCL's developer calls its 365 GB/s a good number), NCCL 2.26.2 as printed, 8 B-16 GiB: the
    only sizes out of 0.5-2x are 8 B and 256 B, whose out-of-place times are 2.4x and 3.0x the in-place
    ones in the file; the median size within 0.8-1.25x; Tree at the small sizes, NVLS Tree, then Ring at
    the largest."""
    sweep = check_json(H100_4N)
    outside = {r["bytes"] for r in sweep["rows"] if not 0.5 <= r["ratio"] <= 2.0}
    assert outside == {8, 256} and outside <= unsteady(H100_4N)
    assert {r["bytes"] for r in sweep["rows"] if r["unsteady"]} == unsteady(H100_4N)
    assert 0.8 <= median_size_ratio(sweep) <= 1.25  # 1.02 at 256 KiB
    algos = [r["algorithm"] for r in sweep["rows"]]
    assert algos[0] == "Tree" and "NVLSTree" in algos and algos[-1] == "Ring"


def test_eight_h100_nodes_only_unsteady_row_out_of_band():
    """8 x 8 H100 over 400 Gb/s InfiniBand (NVIDIA/nccl-tests issue 309, another cluster), 1 MiB-8 GiB: the
    one size out of 0.5-2x is 8 MiB, whose out-of-place time is 3.96x its in-place one in the file; the
    median size (64 MiB, NVLS Tree) within 0.8-1.25x (0.84; 0.72 before NVLS Tree's mid-size correction)."""
    sweep = check_json(H100_8N)
    outside = {r["bytes"] for r in sweep["rows"] if not 0.5 <= r["ratio"] <= 2.0}
    assert outside == {8 << 20} == unsteady(H100_8N)
    assert 0.8 <= median_size_ratio(sweep) <= 1.25


def test_four_of_the_eight_nodes_only_unsteady_rows_out_of_band():
    """4 of the same 8 nodes (32 ranks, same thread and user), 1 MiB-8 GiB: the sizes out of 0.5-2x are 1 and
    2 MiB, whose out-of-place times are 3.40x and 1.45x the in-place ones in the file (4 MiB, 1.33x, is at
    0.505x, 0.46x before Tree/LL128's network hops were timed, zerocalc.nccl.tree_pipeline); the median size
    (64 MiB, NVLS Tree) within 0.8-1.25x (0.89; 0.75 before NVLS Tree's mid-size correction)."""
    sweep = check_json(H100_4OF8)
    outside = {r["bytes"] for r in sweep["rows"] if not 0.5 <= r["ratio"] <= 2.0}
    assert outside == {1 << 20, 2 << 20} < unsteady(H100_4OF8) == {1 << 20, 2 << 20, 4 << 20}
    assert 0.8 <= median_size_ratio(sweep) <= 1.25


XE9680 = "all_reduce_perf-16xH100-2nodes-ib-nccl2.26.2.txt"


def test_hopper_nvls_tree_mid_sizes_pay_the_pipeline_fill():
    """NVLS Tree all-reduce on Hopper runs at NCCL's bandwidth plus its pipeline's fill (zerocalc.nccl.
    nvls_pipeline), where NCCL still chooses NVLS Tree. Hand check on 2 Dell XE9680 (NVIDIA/nccl-tests issue
    309, NCCL 2.26.2, timed with v2.30.7's Hopper NVLS figures): 16 MiB in chunks of 64 KiB (calcCollChunking:
    below 4 x 128 x 128 KiB) is two loops of 16 channels x 8 heads x 64 KiB = 8 MiB, two more loops:
    25 + 2 x 20.9 us + (16 + 16) MiB / (57.7 GB/s x 8 channels x 16/30) = 203.1 us, the file 185.4 us (1.10x;
    0.89x with treeCorrectionFactor, 0.73x without either); 1 GiB in chunks of 128 KiB, two loops of 16 MiB
    more: 4497 us, the file 4484.9 us."""
    sweep = check_json(XE9680)
    rows = {r["bytes"]: r for r in sweep["rows"]}
    bw = 57.7 * 8 * 16 / 30 * 1e9
    mid, big = rows[16 << 20], rows[1 << 30]
    assert mid["algorithm"] == big["algorithm"] == "NVLSTree"
    assert mid["predicted_s"] == pytest.approx(66.8e-6 + (32 << 20) / bw, rel=1e-6)
    assert big["predicted_s"] == pytest.approx(66.8e-6 + ((1 << 30) + (32 << 20)) / bw, rel=1e-6)
    assert mid["ratio"] == pytest.approx(mid["predicted_s"] / 185.4e-6, rel=1e-6)
    # every NVLS Tree size of the four multi-node Hopper sweeps within 0.5-1.25x (0.57-1.13x)
    for name in (XE9680, H100_4N, H100_8N, "five-tests-80xH100-10nodes-nccl2.29.2.log"):
        res = runner.invoke(app, ["check", str(DATA / name), "--format", "json"])
        nvls_tree = [r for r in json.loads(res.stdout)["sweeps"][0]["rows"]
                     if r["algorithm"] == "NVLSTree" and not r["unsteady"]]
        assert nvls_tree and all(0.5 <= r["ratio"] <= 1.25 for r in nvls_tree), name


B200 = "all_reduce_perf-16xB200-2nodes-nccl2.26.2.txt"


def test_blackwell_nvls_tree_timed_with_its_fill_on_the_nvlinks_graph():
    """2 DGX B200 (NVIDIA/nccl-tests issue 309's Lambda run, NCCL 2.26.2), hand check: the calls run at 2.30's
    figures on the NVLS graph at the bwIntra each B200's NVSwitch link holds, (8 + 1) x 80 <= 18 x 40.1
    (search.cc): per channel min(80 x 0.74 x 7/8 x 2, 2 x 48, 96) = 96 GB/s, x 8 channels x 16/30 = 409.6
    GB/s (the file's 1-2 GiB rows add 2.81 ms a GiB: 382 GB/s), latency 25 + 2 x 20.9 us; plus the fill of
    2.26's loops, 32 nvlsChannels x 8 heads x chunk: 1 MiB one loop of 32 KiB chunks (the call, 1 MiB),
    16 MiB one of 64 KiB (16 MiB), 2 GiB two of 128 KiB (32 MiB each). NCCL 2.26 chooses with 320 GB/s."""
    sweep = check_json(B200, "--topology", "dgx-b200", "--n", "16")
    rows = {r["bytes"]: r for r in sweep["rows"]}
    bw = 96 * 8 * 16 / 30 * 1e9
    lat = (25 + 2 * 20.9) * 1e-6
    for n, fill in ((1 << 20, 1 << 20), (16 << 20, 16 << 20), (2 << 30, 64 << 20)):
        assert rows[n]["algorithm"] == "NVLSTree"
        assert rows[n]["predicted_s"] == pytest.approx(lat + n / bw + fill / bw, rel=1e-6)
    assert all(0.5 <= r["ratio"] <= 1.25 for r in sweep["rows"] if r["algorithm"] == "NVLSTree")


def test_hopper_nvls_tree_at_2_28_past_the_correction_rows_end():
    """v2.28.9's treeCorrectionFactor rows have 23 entries (64 B to 256 MiB); sizes from 512 MiB take none.
    Every row of the 2 XE9680 sweep is priced under 2.28.9 (it ran 2.26.2)."""
    sweep = check_json(XE9680, "--nccl-version", "2.28.9")
    assert [r["bytes"] for r in sweep["rows"]] == [b for b, *_ in file_rows(XE9680)]
    big = [r for r in sweep["rows"] if r["bytes"] >= 512 << 20]
    assert big and all(r["algorithm"] == "NVLSTree" and 0.8 <= r["ratio"] <= 1.25 for r in big)
