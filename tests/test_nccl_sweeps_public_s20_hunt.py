"""check on public nccl-tests runs whose files print no device lines, priced on the preset their pages name:
HPE's Cray EX example (crickett-hpe/hpc-ai-envs) of an all-reduce over 2 nodes of 4 GH200 on Slingshot,
NCCL 2.20.5 with ``NCCL_ALGO=Tree`` as its command sets it; and the all-gathers of Google Cloud's NCCL pages
(through its gIB plugin): 2 A4 VMs (B200, NCCL 2.25.1), 2 A4 and 2 A3 Ultra (H200) GKE nodes, 2 and 8 A4X
(GB200) nodes over multi-node NVLink, and the A4X Max page's JobSet run (2 hosts of 4 GB300, NCCL 2.28.9),
whose device lines that page replaced by ``...``.

What each test expects is counted from the files themselves by a plain split, not through zerocalc: their
rows (size, out-of-place µs, in-place µs), their ``NCCL version`` line or ``nccl-library=`` code, and the
ranks their columns give (busbw/algbw = 2(n-1)/n for an all-reduce; size / (count × 4 B) for a float
all-gather). None names its GPU: the GH200 page's ``nvidia-smi topo -m`` (4 GPUs joined by ``NV6``, a
72-core CPU and a GPU NUMA node each) is HPE's quad GH200 node, given as ``--topology gh200``; Google's
pages name the machine: A4 (8 B200, 8 × 400 Gb/s RoCE: ``dgx-b200``), A3 Ultra (8 H200, the same NICs:
``dgx-h200``), A4X (4 GB200 a host: ``gb200-nvl72``), A4X Max (4 GB300 a host: ``gb300-nvl72``). The
bands are issue 11's (0.5-2x at every size, 0.8-1.25x at the median size) where the model meets them, as a
regression guard.

The 8-rank A4X runs' Ring/LL calls are timed with the hop measured in NVL72 domains
(``NVL72_LL_HOP_US``, 1.64 µs where NCCL's table charges 0.6), these runs among its sources. Misses, left as
they are: the 32-rank A4X run takes about twice the model's NVLS time to 1 MiB (no source found for such a
latency); and with no host names
nothing tells the A4X Max run's two hosts' NVLink domains apart, so the preset prices its 8 ranks over
NVLink, while from 2 MiB on its calls take what the same page's cross-domain run of two node pools takes
(over RDMA): 0.16-0.50x at every size.
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

A4_VMS = "all_gather_perf-16xB200-gcp-a4-vms-gib-collapsed-nccl2.25.1.txt"
A4_GKE = "all_gather_perf-16xB200-gcp-a4-gke-2nodes-gib-collapsed.txt"
A3U_GKE = "all_gather_perf-16xH200-gcp-a3ultra-gke-2nodes-gib-collapsed.txt"
A4X_IMEX = "all_gather_perf-8xGB200-gcp-a4x-2nodes-imex-collapsed.txt"
A4X_TAS = "all_gather_perf-32xGB200-gcp-a4x-tas-subblock-collapsed.txt"
A4X_DEFAULT = "all_gather_perf-8xGB200-gcp-a4x-gke-default-jobset-collapsed.txt"
A4X = (A4X_IMEX, A4X_TAS, A4X_DEFAULT)

PRESET = {GH200: "gh200", JOBSET: "gb300-nvl72", A4_VMS: "dgx-b200", A4_GKE: "dgx-b200", A3U_GKE: "dgx-h200"}
PRESET |= dict.fromkeys(A4X, "gb200-nvl72")
#: file → the options its page lets a user give: the GH200 run's ``env NCCL_ALGO=Tree srun …`` and its
#: nodes' ``nvidia-smi topo -m``; the machine each Google page names
ARGS = {name: ("--topology", preset) for name, preset in PRESET.items()} | {
    GH200: ("--topology", "gh200", "--nccl-algo", "Tree")}
ALL = sorted(PRESET)
#: within both bands of issue 11 / within 0.5-2x at every size only, on the preset their pages name
IN_BANDS = {GH200, A4_GKE, A3U_GKE, A4X_DEFAULT}
EVERY_SIZE = {A4_VMS, A4X_IMEX}


def sweep_of(name):
    return check_json(name, *ARGS[name])


def table(name):
    """The split fields of the file's rows (the lines whose first two fields are numbers)."""
    rows = [line.split() for line in (DATA / name).read_text().splitlines()]
    return [f for f in rows if len(f) >= 13 and f[0].isdigit() and f[1].isdigit()]


def stated_version(name):
    """The release the file states, by a plain split: its ``NCCL version X+cudaY`` line, else the
    ``nccl-library=NNNNN`` code of its ``# nccl-tests version`` line (2.28.9 is 22809); None if neither."""
    for line in (DATA / name).read_text().splitlines():
        if line.startswith("NCCL version"):
            return line.split()[2].split("+")[0]
        for field in line.split():
            if field.startswith("nccl-library="):
                code = int(field.split("=")[1])
                return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return None


def counted_ranks(name):
    """Ranks from the last row, by a plain split: busbw/algbw = 2(n-1)/n for an all-reduce, size / (count ×
    4 B) for a float all-gather (nccl-tests prints the total size and one rank's count)."""
    f = table(name)[-1]
    if f[3] == "sum":
        return round(2 / (2 - float(f[7]) / float(f[6])))
    return int(f[0]) // (int(f[1]) * 4)


def times(name):
    return {size: oop for size, oop, _ in file_rows(name)}


#: ranks each run's page gives: 2 nodes of 4 GPUs, 2 A4 / A3 Ultra nodes of 8, 8 A4X nodes of 4 (TAS run)
PAGE_RANKS = {GH200: 8, JOBSET: 8, A4_VMS: 16, A4_GKE: 16, A3U_GKE: 16, A4X_IMEX: 8, A4X_TAS: 32,
              A4X_DEFAULT: 8}


@pytest.mark.parametrize("name", ALL)
def test_the_files_are_read_as_their_lines_count_them(name):
    text = (DATA / name).read_text()
    assert "#  Rank" not in text and "# Rank" not in text
    sweep = sweep_of(name)
    op = "all_reduce" if table(name)[0][3] == "sum" else "all_gather"
    assert (sweep["op"], sweep["group_size"], sweep["topology"]) == (op, counted_ranks(name), PRESET[name])
    assert counted_ranks(name) == PAGE_RANKS[name]
    if stated_version(name):
        said = (sweep["nccl_version"], sweep["nccl_version_how"])
        assert said == (stated_version(name), "stated by the file")
    else:
        assert "states no NCCL version" in "\n".join(sweep["notes"])


def test_the_versions_are_the_ones_the_files_state():
    assert [stated_version(n) for n in (GH200, JOBSET, A4_VMS)] == ["2.20.5", "2.28.9", "2.25.1"]
    assert not any(stated_version(n) for n in (A4_GKE, A3U_GKE, *A4X))


@pytest.mark.parametrize("name", ALL)
def test_the_rows_are_the_files_from_first_to_last(name):
    rows = file_rows(name)
    sweep = sweep_of(name)
    assert len(sweep["rows"]) == len(rows) >= 14
    assert [r["in_place_s"] for r in sweep["rows"]] == pytest.approx([ip * 1e-6 for _, _, ip in rows])
    assert [r["bytes"] for r in sweep["rows"] if r["unsteady"]] == unsteady_sizes(name)


@pytest.mark.parametrize("name", ALL)
def test_without_the_preset_check_asks_for_one(name):
    """Neither file names a GPU: check stops with one line naming the file and ``--topology``, exit 2."""
    res = runner.invoke(app, ["check", str(DATA / name)])
    assert res.exit_code == 2
    assert "--topology" in res.output and name in res.output and "Traceback" not in res.output


@pytest.mark.parametrize("name", sorted(IN_BANDS))
def test_the_runs_within_both_bands(name):
    assert_within_both_bands(sweep_of(name))


@pytest.mark.parametrize("name", sorted(EVERY_SIZE))
def test_the_runs_within_half_and_twice_at_every_size(name):
    assert all(0.5 <= r["ratio"] <= 2 for r in sweep_of(name)["rows"])


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


def test_a4x_32_rank_nvls_calls_to_1_mib_take_about_twice_the_priced_time():
    """The A4X miss, counted from the file: every call to 1 MiB takes at least 56.7 µs on 32 ranks; check
    prices them (NCCL's NVLS) at 0.65x or less of that."""
    assert min(t for size, t in times(A4X_TAS).items() if size <= 1 << 20) >= 56.7
    assert all(r["ratio"] <= 0.65 for r in sweep_of(A4X_TAS)["rows"] if r["bytes"] <= 1 << 20)


@pytest.mark.parametrize("name", [A4X_IMEX, A4X_DEFAULT])
def test_a4x_8_rank_ring_ll_calls_to_1_mib_timed_with_the_nvl72_hop(name):
    """Counted from the files: every call to 1 MiB takes at least 19.6 µs on 8 ranks, where NCCL's own
    Ring/LL estimate is 10.9-14.1 µs (0.51-0.64x); with 7 hops at 1.64 µs (NVL72_LL_HOP_US) each is priced
    within 0.82-1.0x, and NCCL still chooses Ring/LL."""
    assert min(t for size, t in times(name).items() if size <= 1 << 20) >= 19.6
    rows = [r for r in sweep_of(name)["rows"] if r["bytes"] <= 1 << 20]
    assert {(r["algorithm"], r["protocol"]) for r in rows} == {("Ring", "LL")}
    assert all(0.8 <= r["ratio"] <= 1.01 for r in rows)
