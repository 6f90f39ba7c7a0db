"""More public nccl-tests runs, read as a user would give them to ``check``: one host of 8 H100 driven by
one process (Together AI's all_reduce and reduce_scatter, NCCL 2.26.2), an all_reduce over 1,024 H100
on RoCE whose post cut its ``# Rank`` lines short without a mark (NVIDIA/nccl-tests issue 322), and one
process driving 4 GPUs of a university cluster node (4 A100 SXM4 on NVLink; 4 V100 PCIe, NCCL 2.8.3), both
from reStructuredText pages that indent every line, two processes each driving 2 H100 of a DGX, and 5 rows
of an all_reduce over two Crusoe VMs of 8 H100 posted without any header (NVIDIA/nccl-tests issue 294), and
OCI's B300 quick start (one BM.GPU.B300.8: all_reduce and alltoall; two over RoCE: all_reduce; NCCL 2.28.9).
tests/data/traces/README.md names each source. Expected figures are counted from the files by a plain
split (no zerocalc code); issue 11's bands (0.5-2x at every size, 0.8-1.25x at the median size) are
asserted only where the file's setup is a preset's and its rows lie within them."""

import json

import pytest
from sweep_files import DATA, check_json, device_lines, file_rows, median_size_ratio
from typer.testing import CliRunner

from zerocalc.cli import app

runner = CliRunner()
TOGETHER_AR = "all_reduce_perf-8xH100-g8-nvls-nccl2.26.2.out"
TOGETHER_RS = "reduce_scatter_perf-8xH100-g8-ring-nccl2.26.2.out"
ROCE_1024 = "all_reduce_perf-roce-1024xH100-ring-ll128-cut-rank-lines.txt"
STANAGE_A100 = "all_reduce_perf-4xA100-SXM4-80GB-g4-xe8545-stanage.txt"
BESSEMER_V100 = "all_reduce_perf-4xV100-PCIe-g4-bessemer-nccl2.8.3.txt"
DGX_G2 = "all_reduce_perf-4xH100-2nodes-2pernode-g2-dgx.txt"
CRUSOE_ROWS = "all_reduce_perf-16xH100-crusoe-ib-rows-only.txt"
B300_AR_1NODE = "all_reduce_perf-8xB300-oci-1node-g8-nccl2.28.9.txt"
B300_AR_2NODES = "all_reduce_perf-16xB300-oci-2nodes-nccl2.28.9.txt"
B300_A2A_1NODE = "alltoall_perf-8xB300-oci-1node-g8-nccl2.28.9.txt"


def sized(name):
    """:func:`file_rows` less nccl-tests' zero-size rows (reduce_scatter prints 0 B for sizes below one
    element a rank), which ``check`` does not price."""
    return [r for r in file_rows(name) if r[0] > 0]


@pytest.mark.parametrize(("name", "op"), [(TOGETHER_AR, "all_reduce"), (TOGETHER_RS, "reduce_scatter")])
def test_one_process_driving_eight_h100_read_as_counted_and_within_both_bands(name, op):
    sweep = check_json(name, counted=sized)
    hosts = {h for h, _ in device_lines(name)}
    assert sweep["op"] == op and sweep["group_size"] == len(device_lines(name)) == 8 and len(hosts) == 1
    assert sweep["nccl_version"] == "2.26.2"  # the file's nccl-library=22602
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
    assert 0.8 <= median_size_ratio(sweep) <= 1.25


def test_rank_lines_cut_short_are_not_taken_for_the_group():
    """The post lists ranks 0-99 of a run its command line starts with ``-np 1024``: its rows' busbw/algbw
    (2(n-1)/n to two decimals) cannot be 100 ranks, so ``check`` asks for the count instead of pricing 100
    ranks (or refusing the listed hosts' unequal counts), and prices 1,024 when given it."""
    listed = len(device_lines(ROCE_1024))
    rows = [line.split() for line in (DATA / ROCE_1024).read_text().splitlines()]
    ratios = [float(f[7]) / float(f[6]) for f in rows if len(f) >= 13 and f[0].isdigit()]
    assert listed == 100 and all(ratio > 2 * (listed - 1) / listed + 0.01 for ratio in ratios)
    res = runner.invoke(app, ["check", str(DATA / ROCE_1024)])
    assert res.exit_code == 2 and "--n" in res.output and "too small to tell the ranks" in res.output
    assert len(res.output.strip().splitlines()) == 1
    sweep = check_json(ROCE_1024, "--n", "1024")
    assert sweep["op"] == "all_reduce" and sweep["group_size"] == 1024
    assert {(r["algorithm"], r["protocol"]) for r in sweep["rows"]} == {("Ring", "LL128")}  # its -x NCCL_*
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])


def test_rank_lines_the_bandwidths_allow_still_give_the_group():
    """Listed ranks within what the rows allow stand: the one-host files above keep their 8."""
    res = runner.invoke(app, ["check", str(DATA / TOGETHER_AR), "--format", "json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["sweeps"][0]["group_size"] == 8


def indented_rows(name):
    """(size, out-of-place µs, in-place µs) of a reStructuredText literal block's rows (indented, and in
    nccl-tests' pre-2022 layout where it has no root column: its times then sit in cells 4 and 8)."""
    rows = []
    for line in (DATA / name).read_text().splitlines():
        f = line.split()
        if len(f) >= 12 and f[0].isdigit() and f[1].isdigit():
            shift = 1 if len(f) >= 13 else 0
            rows.append((int(f[0]), float(f[4 + shift]), float(f[8 + shift])))
    return rows


@pytest.mark.parametrize(("name", "args", "gpu", "in_band"), [
    (STANAGE_A100, ("--nccl-version", "2.12.12"), "NVIDIA A100-SXM4-80GB", True),
    (BESSEMER_V100, ("--nccl-version", "2.8.3"), "Tesla V100-PCIE-32GB", True),
])
def test_one_process_driving_four_gpus_of_a_cluster_node(name, args, gpu, in_band):
    sweep = check_json(name, *args, counted=indented_rows)
    devices = device_lines(name)
    assert sweep["op"] == "all_reduce" and sweep["group_size"] == len(devices) == 4
    assert {g for _, g in devices} == {gpu} and len({h for h, _ in devices}) == 1
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
    if in_band:
        assert 0.8 <= median_size_ratio(sweep) <= 1.25


def test_nccl_2_8_launches_a_process_s_gpus_together():
    """NCCL 2.8.3 (the V100 box's, ``-g 4``) launches the process's 4 kernels in one multi-device call
    (launch mode GROUP, the default before v2.9: v2.8.4 ``src/init.cc``), so no row carries a launch
    stagger; the same file priced as NCCL 2.9.9 (PARALLEL: one launch per GPU in turn) carries 3 × 2.76 µs
    on every row, and its median size prices above the band."""
    grouped = check_json(BESSEMER_V100, "--nccl-version", "2.8.3", counted=indented_rows)
    parallel = check_json(BESSEMER_V100, "--nccl-version", "2.9.9", counted=indented_rows)
    assert all(r["launch_stagger_s"] == 0.0 for r in grouped["rows"])
    assert all(r["launch_stagger_s"] == pytest.approx(3 * 2.76e-6) for r in parallel["rows"])
    assert median_size_ratio(parallel) > 1.25 >= median_size_ratio(grouped)
    assert any("launch mode GROUP" in n for n in grouped["notes"])


def test_two_processes_each_driving_two_gpus_of_a_host():
    """``mpirun -n 2 … -g 2``: 4 ranks, 2 on each of 2 hosts, as the ``# Rank`` lines list them; NCCL's
    -g launch floor applies to each process's 2 GPUs (the file prints no NCCL version)."""
    sweep = check_json(DGX_G2)
    devices = device_lines(DGX_G2)
    hosts = [h for h, _ in devices]
    assert sweep["op"] == "all_reduce" and sweep["group_size"] == len(devices) == 4
    assert sorted({hosts.count(h) for h in hosts}) == [2] and len(set(hosts)) == 2
    res = runner.invoke(app, ["check", str(DATA / DGX_G2)])
    assert res.exit_code == 0 and "2 per host, 2 hosts" in res.output and "-g 2" in res.output


def test_rows_posted_without_a_header_read_by_their_shape_and_ranks_by_their_bandwidths():
    """5 rows, no header and no ``# Rank`` lines: the op from the file name, 16 ranks from busbw/algbw
    (2(n-1)/n), which the INFO lines' ``nranks 16`` agree with; within both bands on ``dgx-h100``."""
    text = (DATA / CRUSOE_ROWS).read_text()
    assert "nranks 16" in text and not any(line.lstrip().startswith("#  Rank") for line in text.splitlines())
    sweep = check_json(CRUSOE_ROWS, "--topology", "dgx-h100")
    assert sweep["op"] == "all_reduce" and sweep["group_size"] == 16 and len(sweep["rows"]) == 5
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
    assert 0.8 <= median_size_ratio(sweep) <= 1.25


@pytest.mark.parametrize(("name", "op", "ranks"), [
    (B300_AR_1NODE, "all_reduce", 8), (B300_AR_2NODES, "all_reduce", 16), (B300_A2A_1NODE, "all_to_all", 8),
])
def test_oci_b300_quick_start_rows_priced_on_dgx_b300(name, op, ranks):
    """No device lines: the ranks from busbw/algbw (2(n-1)/n for all_reduce, (n-1)/n for alltoall, the
    figures counted here too), NCCL 2.28.9 from the file's own line; within both bands on ``dgx-b300``."""
    fields = [line.split() for line in (DATA / name).read_text().splitlines()]
    factor = [float(f[7]) / float(f[6]) for f in fields if len(f) >= 13 and f[0].isdigit()]
    k = 2 if op == "all_reduce" else 1
    assert all(abs(k * (ranks - 1) / ranks - x) < 0.001 for x in factor)
    sweep = check_json(name, "--topology", "dgx-b300")
    assert sweep["op"] == op and sweep["group_size"] == ranks and sweep["nccl_version"] == "2.28.9"
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
    assert 0.8 <= median_size_ratio(sweep) <= 1.25
