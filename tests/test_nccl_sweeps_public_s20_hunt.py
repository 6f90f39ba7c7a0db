"""check on two public nccl-tests runs whose files print no device lines, priced on the preset their pages
name: HPE's Cray EX example (crickett-hpe/hpc-ai-envs) of an all-reduce over 2 nodes of 4 GH200 on
Slingshot, NCCL 2.20.5 with ``NCCL_ALGO=Tree`` as its command sets it; and the JobSet all-gather of Google
Cloud's A4X Max page (2 hosts of 4 GB300, NCCL 2.28.9), whose device lines the page replaced by ``...``.

What each test expects is counted from the files themselves by a plain split, not through zerocalc: their
rows (size, out-of-place µs, in-place µs), their ``NCCL version`` line or ``nccl-library=`` code, and the
ranks their columns give (busbw/algbw = 2(n-1)/n for an all-reduce; size / (count × 4 B) for a float
all-gather). Neither names its GPU: the GH200 page's ``nvidia-smi topo -m`` (4 GPUs joined by ``NV6``, a
72-core CPU and a GPU NUMA node each) is HPE's quad GH200 node, given as ``--topology gh200``; the A4X Max
page's hosts are 4 GB300 each, given as ``--topology gb300-nvl72``. The bands are issue 11's (0.5-2x at
every size, 0.8-1.25x at the median size) where the model meets them, as a regression guard.

The miss, left as it is: with no host names nothing tells the A4X Max run's two hosts' NVLink domains apart,
so the preset prices its 8 ranks over NVLink, while from 2 MiB on its calls take what the same page's
cross-domain run of two node pools takes (over RDMA): 0.16-0.50x at every size.
"""

import pytest
from sweep_files import (
    DATA,
    assert_within_both_bands,
    check_json,
    file_rows,
    median_size_ratio,
    runner,
    unsteady_sizes,
)

from zerocalc.cli import app

GH200 = "all_reduce_perf-8xGH200-cray-ex-2nodes-tree-no-device-lines-nccl2.20.5.txt"
JOBSET = "all_gather_perf-8xGB300-gcp-a4xmax-jobset-elided-nccl2.28.9.txt"
#: the same page's first run: two pods in two node pools, distinct NVLink domains (bundled before)
CROSS_DOMAIN = "all_gather_perf-8xGB300-gcp-a4xmax-collapsed-nccl2.28.9.txt"

#: file → the options its page lets a user give: the GH200 run's ``env NCCL_ALGO=Tree srun …`` and its
#: nodes' ``nvidia-smi topo -m``; the A4X Max page's machine (4 GB300 a host)
ARGS = {GH200: ("--topology", "gh200", "--nccl-algo", "Tree"), JOBSET: ("--topology", "gb300-nvl72")}
PRESET = {GH200: "gh200", JOBSET: "gb300-nvl72"}


def sweep_of(name):
    return check_json(name, *ARGS[name])


def table(name):
    """The split fields of the file's rows (the lines whose first two fields are numbers)."""
    rows = [line.split() for line in (DATA / name).read_text().splitlines()]
    return [f for f in rows if len(f) >= 13 and f[0].isdigit() and f[1].isdigit()]


def stated_version(name):
    """The release the file states, by a plain split: its ``NCCL version X+cudaY`` line, else the
    ``nccl-library=NNNNN`` code of its ``# nccl-tests version`` line (2.28.9 is 22809)."""
    for line in (DATA / name).read_text().splitlines():
        if line.startswith("NCCL version"):
            return line.split()[2].split("+")[0]
        for field in line.split():
            if field.startswith("nccl-library="):
                code = int(field.split("=")[1])
                return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    raise AssertionError(f"{name} states no version")


def counted_ranks(name):
    """Ranks from the last row, by a plain split: busbw/algbw = 2(n-1)/n for an all-reduce, size / (count ×
    4 B) for a float all-gather (nccl-tests prints the total size and one rank's count)."""
    f = table(name)[-1]
    if f[3] == "sum":
        return round(2 / (2 - float(f[7]) / float(f[6])))
    return int(f[0]) // (int(f[1]) * 4)


def times(name):
    return {size: oop for size, oop, _ in file_rows(name)}


@pytest.mark.parametrize("name", [GH200, JOBSET])
def test_the_files_are_read_as_their_lines_count_them(name):
    text = (DATA / name).read_text()
    assert "#  Rank" not in text and "# Rank" not in text
    sweep = sweep_of(name)
    op = "all_reduce" if table(name)[0][3] == "sum" else "all_gather"
    assert (sweep["op"], sweep["group_size"], sweep["topology"]) == (op, counted_ranks(name), PRESET[name])
    assert counted_ranks(name) == 8
    assert sweep["nccl_version"] == stated_version(name)
    assert sweep["nccl_version_how"] == "stated by the file"


def test_the_versions_are_the_ones_the_files_state():
    assert (stated_version(GH200), stated_version(JOBSET)) == ("2.20.5", "2.28.9")


@pytest.mark.parametrize("name", [GH200, JOBSET])
def test_the_rows_are_the_files_from_first_to_last(name):
    rows = file_rows(name)
    sweep = sweep_of(name)
    assert len(sweep["rows"]) == len(rows) >= 14
    assert [r["in_place_s"] for r in sweep["rows"]] == pytest.approx([ip * 1e-6 for _, _, ip in rows])
    assert [r["bytes"] for r in sweep["rows"] if r["unsteady"]] == unsteady_sizes(name)


@pytest.mark.parametrize("name", [GH200, JOBSET])
def test_without_the_preset_check_asks_for_one(name):
    """Neither file names a GPU: check stops with one line naming the file and ``--topology``, exit 2."""
    res = runner.invoke(app, ["check", str(DATA / name)])
    assert res.exit_code == 2
    assert "--topology" in res.output and name in res.output and "Traceback" not in res.output


@pytest.mark.parametrize("algo", [(), ("--nccl-algo", "Tree")])
def test_gh200_cray_ex_run_within_both_bands(algo):
    """On ``gh200``, with the command's ``NCCL_ALGO=Tree`` and as NCCL would choose alike."""
    assert_within_both_bands(check_json(GH200, "--topology", "gh200", *algo))


def test_gh200_cray_ex_run_is_priced_with_tree_where_told():
    rows = sweep_of(GH200)["rows"]
    assert {r["algorithm"] for r in rows} == {"Tree"}
    assert 0.8 <= median_size_ratio(sweep_of(GH200)) <= 1.25


def test_a4x_max_jobset_run_took_the_cross_domain_runs_time_from_2_mib():
    """Counted from the two files: from 2 MiB on the JobSet run's calls take 0.95-1.06x of the same page's
    two-node-pool run's, and below 512 KiB at least 1.4x."""
    mine, cross = times(JOBSET), times(CROSS_DOMAIN)
    shared = sorted(set(mine) & set(cross))
    assert all(0.94 <= mine[s] / cross[s] <= 1.07 for s in shared if s >= 2 << 20)
    assert all(mine[s] / cross[s] >= 1.4 for s in shared if s < 512 << 10)


def test_a4x_max_jobset_run_is_priced_over_nvlink_where_the_other_over_rdma():
    """The miss: no host names, so ``gb300-nvl72`` prices one NVLink domain, about half the time the
    two-pool run is priced at for the same sizes from 1 GiB, which both runs take alike."""
    mine = {r["bytes"]: r for r in sweep_of(JOBSET)["rows"]}
    cross = {r["bytes"]: r for r in check_json(CROSS_DOMAIN)["rows"]}
    big = [s for s in mine if s in cross and s >= 1 << 30]
    assert len(big) == 4
    assert all(mine[s]["predicted_s"] < 0.6 * cross[s]["predicted_s"] for s in big)
    assert all(r["ratio"] < 0.55 for r in mine.values())
