"""check on more public nccl-tests runs that the repositories of bundled ones hold beside, or showed before,
them (tests/data/traces/README.md names each file's source): AIST's ABCI 2.0 benchmarks under NCCL 2.8.4
(all-reduce on 4 and 8 Compute Nodes (A) of 8 A100-SXM4-40GB, on 4 and 16 Compute Nodes (V) of 4
V100-SXM2-16GB, on 4 GPUs of one node (A), and broadcast on 2 nodes (A)); the 16-size blocks (512 KiB-16
GiB) OCI's GB300 guide showed before it cut each to its 8 and 16 GiB rows (all-reduce and all-to-all on 1,
2, 16 and 32 hosts of 4 GB300, NCCL 2.28.7: the same runs as the 2-size files bundled before); and the
2-node A100 80GB InfiniBand run dstack's Crusoe example showed (rows only).

What each test expects is counted from the file itself by a plain split, not through zerocalc: its rows
(size, out-of-place µs, in-place µs; ABCI's pre-2022 layout has no root column), its ``# Rank`` lines and
its ``NCCL version`` line. ABCI's files print no version: the job's module and the benchmark's README
table name 2.8.4-1, given as ``--nccl-version``. The Crusoe file has no device lines: its page's task asks
for ``A100:8`` a node with 8 InfiniBand HCAs, given as ``--topology dgx-a100``. The bands are issue 11's
(0.5-2x at every size, 0.8-1.25x at the median size) where the model meets them, as a regression guard.

Misses, left as they are: ABCI's A100 nodes (abci-a, the node their GPUs' PCI slots tell) from 16 MiB on 8
nodes (0.29-0.38x; 0.54-0.69x from 8 MiB on 4 nodes), its V100 nodes (abci-v) on 16 nodes, whose median
size (Tree/LL) is 0.68x, and its 2-node broadcast from 256 KiB (0.25-0.44x: NCCL's model prices a 2-node
ring at its intra-node bandwidth). On GB300 the
all-to-all's P2P/LL sizes run 2-4x slower than NCCL's LL estimate (on 64 ranks the 64 MiB call, the first
NCCL sends Simple, takes less time than the 32 MiB one), the 16- and 64-rank NVLS all-reduces to 64 MiB
take 1.5-2.5x NCCL's estimate, and across 2 racks every all-reduce to 16 MiB takes about 0.5 ms. Crusoe's
256 KiB row is an unsteady one (its out-of-place time 1.9x its in-place).
"""

import pytest
from sweep_files import (
    DATA,
    assert_read_as_counted,
    assert_within_both_bands,
    check_json,
    file_rows,
    median_size_ratio,
    old_layout_rows,
    unsteady_sizes,
)

A4N = "all_reduce_perf-32xA100-SXM4-40GB-abci-4nodes-nccl2.8.4.txt"
A8N = "all_reduce_perf-64xA100-SXM4-40GB-abci-8nodes-nccl2.8.4.txt"
V4N = "all_reduce_perf-16xV100-SXM2-16GB-abci-4nodes-nccl2.8.4.txt"
V16N = "all_reduce_perf-64xV100-SXM2-16GB-abci-16nodes-nccl2.8.4.txt"
A1N4 = "all_reduce_perf-4xA100-SXM4-40GB-abci-1node-nccl2.8.4.txt"
ABCI_BC = "broadcast_perf-16xA100-SXM4-40GB-abci-2nodes-nccl2.8.4.txt"
ABCI = (A4N, A8N, V4N, V16N, A1N4, ABCI_BC)
GB300 = {(op, ranks): f"{op}_perf-{ranks}xGB300-oci-{where}-16sizes-nccl2.28.7.txt"
         for op in ("all_reduce", "alltoall")
         for ranks, where in ((4, "1node"), (8, "2nodes-1rack"), (64, "16nodes-1rack"),
                              (128, "32nodes-2racks"))}
CRUSOE = "all_reduce_perf-16xA100-80GB-crusoe-2nodes-ib-dstack.txt"

#: file → the options its page lets a user give: ABCI's ``module load nccl/2.8.4`` (``allreduce/README.md``
#: and ``bcast/README.md``: NCCL 2.8.4-1); the Crusoe task's ``gpu: A100:8`` and 8 ``NCCL_IB_HCA`` ports
ARGS = dict.fromkeys(ABCI, ("--nccl-version", "2.8.4")) | {CRUSOE: ("--topology", "dgx-a100")}
#: file → (op, preset, hosts) its command, table and ``# Rank`` lines give
#: (the ABCI node their GPUs' PCI slots tell: tests/test_abci_slots.py)
READ = {A4N: ("all_reduce", "abci-a", 4), A8N: ("all_reduce", "abci-a", 8),
        V4N: ("all_reduce", "abci-v", 4), V16N: ("all_reduce", "abci-v", 16),
        A1N4: ("all_reduce", "abci-a", 1), ABCI_BC: ("broadcast", "abci-a", 2)}
#: within both bands of issue 11 on the preset and release the file (or its page) states
IN_BANDS = {A1N4, V4N, GB300["all_reduce", 4]}
#: within 0.5-2x at every size, the median size outside 0.8-1.25x
EVERY_SIZE = {A4N, V16N, GB300["all_reduce", 8]}


def counted(name):
    """(size, out-of-place µs, in-place µs) by a plain split, in the layout the file is written in."""
    return old_layout_rows(name) if name in ABCI else file_rows(name)


def sweep_of(name):
    return check_json(name, *ARGS.get(name, ()), counted=counted)


def rank_lines(name):
    """(rank, host, GPU name) of each ``# Rank`` line, by a plain split."""
    out = []
    for line in (DATA / name).read_text().splitlines():
        f = line.split()
        if "Rank" in f and "device" in f and "on" in f:
            gpu = " ".join(f[f.index("device") + 3:])
            out.append((int(f[f.index("Rank") + 1]), f[f.index("on") + 1], gpu))
    return out


def stated_version(name):
    """The release of the file's ``NCCL version X+cudaY`` line, by a plain split."""
    line = next(e for e in (DATA / name).read_text().splitlines() if e.startswith("NCCL version"))
    return line.split()[2].split("+")[0]


def busbw_over_algbw_ranks(name):
    """Ranks of an all-reduce from the last row's busbw/algbw = 2(n-1)/n, by a plain split."""
    rows = [e.split() for e in (DATA / name).read_text().splitlines()]
    f = [r for r in rows if r[:1] and r[0].isdigit()][-1]
    return round(2 / (2 - float(f[7]) / float(f[6])))


def times(name):
    return {size: oop for size, oop, _ in counted(name)}


@pytest.mark.parametrize("name", sorted(READ))
def test_abci_files_are_read_as_their_lines_count_them(name):
    sweep = sweep_of(name)
    assert_read_as_counted(sweep, rank_lines(name), *READ[name])
    assert sweep["nccl_version"] == "2.8.4"


@pytest.mark.parametrize("key", sorted(GB300))
def test_gb300_files_are_read_as_their_lines_count_them(key):
    """Ranks from the last ``# Rank`` line (the page prints 4 of them and ``...`` for the rest beyond one
    host), the release from the file's own line, given nothing."""
    op, _ = key
    name = GB300[key]
    lines = rank_lines(name)
    assert {gpu for _, _, gpu in lines} == {"NVIDIA GB300"}
    sweep = check_json(name)
    assert (sweep["op"], sweep["group_size"]) == ({"alltoall": "all_to_all"}.get(op, op), lines[-1][0] + 1)
    assert sweep["topology"] == "gb300-nvl72"
    assert sweep["nccl_version"] == stated_version(name) == "2.28.7"


def test_crusoe_rows_only_file_is_read_with_the_preset_its_page_gives():
    sweep = sweep_of(CRUSOE)
    assert not rank_lines(CRUSOE) and "NCCL version" not in (DATA / CRUSOE).read_text()
    ranks = busbw_over_algbw_ranks(CRUSOE)
    assert (sweep["op"], sweep["group_size"], sweep["topology"]) == ("all_reduce", ranks, "dgx-a100")
    said = "\n".join(sweep.get("notes", [])) + sweep.get("nccl_version_how", "")
    assert "states no NCCL version" in said


ALL = sorted([*ABCI, *GB300.values(), CRUSOE])


@pytest.mark.parametrize("name", ALL)
def test_the_rows_are_the_files_from_first_to_last(name):
    rows = counted(name)
    sweep = sweep_of(name) if name in ARGS else check_json(name)
    assert len(sweep["rows"]) == len(rows) >= 16
    assert [r["in_place_s"] for r in sweep["rows"]] == pytest.approx([r[2] * 1e-6 for r in rows])
    assert [r["bytes"] for r in sweep["rows"] if r["unsteady"]] == unsteady_sizes(name, rows=counted)


@pytest.mark.parametrize("name", sorted(IN_BANDS))
def test_the_runs_within_both_bands(name):
    assert_within_both_bands(sweep_of(name) if name in ARGS else check_json(name))


@pytest.mark.parametrize("name", sorted(EVERY_SIZE))
def test_the_runs_within_half_and_twice_at_every_size(name):
    sweep = sweep_of(name) if name in ARGS else check_json(name)
    assert all(0.5 <= r["ratio"] <= 2 for r in sweep["rows"])


def test_gb300_two_size_files_are_the_last_rows_of_these():
    """The page later cut each block to its 8 and 16 GiB rows: the files bundled from that version hold
    the same two rows, so these are the same runs, whole."""
    for name in GB300.values():
        assert file_rows(name.replace("-16sizes", ""))[-2:] == file_rows(name)[-2:]


@pytest.mark.parametrize("ranks", (4, 8, 64))
def test_gb300_one_rack_all_reduce_is_on_bandwidth_from_1_gib(ranks):
    sweep = check_json(GB300["all_reduce", ranks])
    assert all(0.8 <= r["ratio"] <= 1.25 for r in sweep["rows"] if r["bytes"] >= 1 << 30)


def test_gb300_all_to_all_ll_sizes_run_slower_than_simple_ones():
    """The miss counted from the file: on 64 ranks the 64 MiB all-to-all takes less time than the 32 MiB one;
    check says NCCL sends the first Simple and the second LL, and prices LL below 0.5x there."""
    name = GB300["alltoall", 64]
    assert times(name)[64 << 20] < times(name)[32 << 20]
    rows = {r["bytes"]: r for r in check_json(name)["rows"]}
    assert (rows[32 << 20]["protocol"], rows[64 << 20]["protocol"]) == ("LL", "Simple")
    assert rows[32 << 20]["ratio"] < 0.5 < rows[64 << 20]["ratio"]


def test_abci_a100_multi_node_latency_sizes_within_the_bands():
    """To 512 KiB (latency) the 4- and 8-node A100 runs are within 0.7-1.25x; their bandwidth sizes miss."""
    for name in (A4N, A8N):
        rows = sweep_of(name)["rows"]
        assert all(0.7 <= r["ratio"] <= 1.25 for r in rows if r["bytes"] <= 512 << 10)
        assert 0.75 <= median_size_ratio(sweep_of(name)) <= 1.25


def test_crusoe_is_within_the_bands_but_for_its_unsteady_row():
    sweep = sweep_of(CRUSOE)
    steady = [r for r in sweep["rows"] if not r["unsteady"]]
    assert [r["bytes"] for r in sweep["rows"] if r["unsteady"]] == [16 << 10, 256 << 10]
    assert all(0.5 <= r["ratio"] <= 2 for r in steady)
    assert 0.8 <= median_size_ratio(sweep) <= 1.25
