"""check on more public nccl-tests outputs of H100 hosts: NVIDIA's DGX Cloud recipe's sample all-reduce on one
DGX H100 (one process a GPU), an NVLS all-reduce of one process driving one host's 8 H100, and two-host
all-reduce runs in which one process drives each host's GPUs (``-g 4`` or ``-g 8``), on DGX H100 hosts and on
a second pair of hosts (tests/data/traces/README.md names each file's source).

What each test expects is counted from the file itself by a plain split, not through zerocalc: its '#  Rank'
lines, its ``nThread ... nGpus`` line, its rows (size, out-of-place µs, in-place µs). The bands are issue
11's (0.5-2x at every size, 0.8-1.25x at the median size) where the model meets them.

The DGX Cloud run is within both bands but for its 32 B row, one slow out-of-place iteration (68 µs, in-place
13.5 µs), held below. The NVLS run is within both; its 2-8 MiB rows are 1.25-1.37x, the launch stagger of -g 8
(7 × 2.76 µs, zerocalc.validate.host_launch) being in its price and not in this host's times there (without it
0.93-1.04x; the other -g 8 sweeps of this host at NCCL 2.26.2 show the same), where other -g hosts need it
(removed, 4 bundled sweeps leave a band). None of the two-host runs is within the bands at its median size,
and none states its network or NCCL version (priced as NCCL 2.18.3, 2.19.3, 2.21.5, 2.23.4 or 2.30.7 they miss
alike). The two DGX runs meet NCCL's model from 256 MiB (8 ranks) and 2 GiB (16 ranks) on, which is held
below; under that both are slower than any of NCCL's algorithms (16 ranks: 0.03-0.22x from 8 KiB to 64 MiB,
out-of-place and in-place times apart by up to 19x), as is the same hosts' 4-rank run bundled before (0.31x at
its median size), where other two-host H100 runs with a NIC a GPU meet it (NVIDIA/nccl-tests issue 309's:
1.0-1.1x from 1 to 512 MiB): the slowness is those hosts' network path at mid sizes, which nothing in the
files names. The ``alpha-test`` pair's 8 GiB call takes 2.1x the time NCCL's model gives on the DGX H100
preset (8 × 400 Gb/s a host), 220 GB/s of bus bandwidth; its hosts' network is not stated (their bus ids, 63
to 95, are no DGX's), and the same hosts' 8-rank run, bundled before, misses alike.
"""

import pytest
from sweep_files import (
    DATA,
    check_json,
    device_lines,
    file_rows,
    gpus_per_process,
    median_size_ratio,
    unsteady_sizes,
)

#: out-of-place over in-place (either way) beyond which ``check`` calls a row unsteady, and the upper edge
#: of the 0.8-1.25x band (issue 11)
GAP = 1.25
#: the lower edge of the median-size band (issue 11)
LOW = 0.8

DGX_G4 = "all_reduce_perf-8xH100-2nodes-4pernode-g4-dgx.txt"
DGX_G8 = "all_reduce_perf-16xH100-2nodes-8pernode-g8-dgx.txt"
ALPHA_G8 = "all_reduce_perf-16xH100-2nodes-8pernode-g8-alpha.txt"
DGXC = "all_reduce_perf-8xH100-dgx-1node-dgxc-benchmarking.txt"
#: one process driving one host's 8 H100 with NVLS on, NCCL 2.26.2 stated (``nccl-library=22602``)
NVLS_G8 = "all_reduce_perf-8xH100-g8-nvls-1M-8G-nccl2.26.2.out"

#: file → (op, GPU name, GPUs each process drives, hosts): what the file's own lines say
READ = {
    DGXC: ("all_reduce", "NVIDIA H100 80GB HBM3", 1, ["pool0-01806"]),
    NVLS_G8: ("all_reduce", "NVIDIA H100 80GB HBM3", 8, ["gpu-dp-2jvzl-pqq7p"]),
    DGX_G4: ("all_reduce", "NVIDIA H100 80GB HBM3", 4, ["dgx-06", "dgx-07"]),
    DGX_G8: ("all_reduce", "NVIDIA H100 80GB HBM3", 8, ["dgx-06", "dgx-07"]),
    ALPHA_G8: (
        "all_reduce", "NVIDIA H100 80GB HBM3", 8, ["alpha-test-16way-node-001", "alpha-test-16way-node-002"]
    ),
}

#: file → the smallest size from which every size is within 0.8-1.25x (the DGX runs' bandwidth-bound end)
IN_BAND_FROM = {DGX_G4: 256 << 20, DGX_G8: 2 << 30}


@pytest.mark.parametrize("name", sorted(READ))
def test_each_file_is_read_as_its_lines_say(name):
    op, gpu, per_process, hosts = READ[name]
    devices = device_lines(name)
    assert {g for _, g in devices} == {gpu}
    assert sorted({h for h, _ in devices}) == hosts
    assert gpus_per_process(name) == per_process
    sweep = check_json(name)
    assert (sweep["op"], sweep["group_size"]) == (op, len(devices))
    assert sweep["gpus_per_thread"] == per_process
    assert sweep["topology"] == "dgx-h100"
    assert f"{len(devices) // len(hosts)} per host, {len(hosts)} host" in sweep["topology_how"]


@pytest.mark.parametrize("name", sorted(READ))
def test_the_rows_are_the_files_from_first_to_last(name):
    """Every row of the file is read, the first and the last as printed (8 B or 1 MiB; 8 or 16 GiB)."""
    rows = file_rows(name)
    sweep = check_json(name)
    assert len(sweep["rows"]) == len(rows)
    first, last = sweep["rows"][0], sweep["rows"][-1]
    assert (first["bytes"], last["bytes"]) == (rows[0][0], rows[-1][0])
    assert first["measured_s"] == pytest.approx(rows[0][1] * 1e-6)
    assert last["measured_s"] == pytest.approx(rows[-1][1] * 1e-6)
    assert (rows[0][0], rows[-1][0] >> 30) in {(8, 8), (8, 16), (1 << 20, 8)}


@pytest.mark.parametrize("name", sorted(set(READ) - {NVLS_G8}))
def test_a_file_stating_no_version_is_priced_on_the_default_and_says_so(name):
    text = (DATA / name).read_text()
    assert "NCCL version" not in text and "library=" not in text
    assert "states none" in check_json(name)["nccl_version_how"]


@pytest.mark.parametrize("name", sorted(READ))
def test_the_unsteady_rows_are_those_whose_two_timings_differ(name):
    sweep = check_json(name)
    flagged = [r["bytes"] for r in sweep["rows"] if r["unsteady"]]
    assert flagged == unsteady_sizes(name)
    for r, (_, _, in_place) in zip(sweep["rows"], file_rows(name), strict=True):
        assert r["in_place_s"] == pytest.approx(in_place * 1e-6)


@pytest.mark.parametrize("name", sorted(IN_BAND_FROM))
def test_the_dgx_runs_meet_nccls_model_at_their_largest_sizes(name):
    """From 256 MiB (8 ranks, Tree) or 2 GiB (16 ranks, NVLS Tree) every size is within 0.8-1.25x: the
    hosts' NVLink and 8 × 400 Gb/s are the preset's; the misses are below (module docstring)."""
    rows = [r for r in check_json(name)["rows"] if r["bytes"] >= IN_BAND_FROM[name]]
    assert len(rows) >= 4
    assert all(LOW <= r["ratio"] <= GAP for r in rows), [(r["bytes"], round(r["ratio"], 3)) for r in rows]


def test_the_one_host_run_is_within_both_bands_at_every_steady_size():
    """NVIDIA's sample on one DGX H100: 0.8-1.25x at its median size and 0.5-2x at every size whose two
    timings agree; its two unsteady rows (32 B and 4 KiB: out-of-place 5x and 1.4x in-place) are the file's
    own outliers."""
    sweep = check_json(DGXC)
    assert LOW <= median_size_ratio(sweep) <= GAP
    assert unsteady_sizes(DGXC) == [32, 4096]
    steady = [r for r in sweep["rows"] if r["bytes"] not in unsteady_sizes(DGXC)]
    assert len(steady) == len(file_rows(DGXC)) - 2
    assert all(0.5 <= r["ratio"] <= 2 for r in steady), [(r["bytes"], round(r["ratio"], 3)) for r in steady]


def stated_version(name):
    """The NCCL release of the file's ``nccl-library=MMmmpp`` header field, by a plain split."""
    line = next(e for e in (DATA / name).read_text().splitlines() if "nccl-library=" in e)
    code = int(line.split("nccl-library=")[1].split()[0])
    return f"{code // 10000}.{code // 100 % 100}.{code % 100}"


def test_the_nvls_run_is_priced_at_its_stated_release_and_is_within_both_bands():
    """One process driving 8 H100 with NVLS on (its script's ``nvls`` label, no algorithm restricted):
    priced on NCCL 2.26.2 as its header states, 0.8-1.25x at the median size and 0.5-2x at every size."""
    assert stated_version(NVLS_G8) == "2.26.2"
    sweep = check_json(NVLS_G8)
    assert sweep["nccl_version"] == stated_version(NVLS_G8)
    assert "stated" in sweep["nccl_version_how"]
    assert LOW <= median_size_ratio(sweep) <= GAP
    ratios = [(r["bytes"], round(r["ratio"], 3)) for r in sweep["rows"]]
    assert all(0.5 <= x <= 2 for _, x in ratios), ratios
