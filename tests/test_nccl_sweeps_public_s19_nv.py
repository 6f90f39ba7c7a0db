"""check on more public nccl-tests runs of NVIDIA datacenter GPUs across hosts (tests/data/traces/README.md
names each file's source): A100 40 GB on two OCI BM.GPU.B4.8 nodes under OKE (Kueue, Slurm, the Slurm
operator; NCCL 2.25.1 and 2.29.3), on two ABCI Compute Nodes (A) with SHARP, on two AWS p4d.24xlarge under
NCCL 2.8.3; A100 80 GB on four CoreWeave nodes with SHARP; H100 on two Azure ND H100 v5 VMs (NCCL 2.29.7)
and on two HGX hosts under DOCA (NCCL 2.26.2); B200 on two GCP A4 VMs (all_gather: 16 ranks, and 4 ranks
of two GPUs a pod).

What each test expects is counted from the file itself by a plain split, not through zerocalc: its rows
(size, out-of-place µs, in-place µs), its ``# Rank`` lines, its ``NCCL version`` / ``nccl-library=`` line;
where a page prints some of the ``# Rank`` lines only, or none, the ranks come from the rows themselves
(nccl-tests' busbw = algbw × 2(n-1)/n for all_reduce, size = count × 4 B × n for all_gather). The bands
are issue 11's (0.5-2x at every size, 0.8-1.25x at the median size) where the model meets them.

The Azure walkthrough condenses each host's ``# Rank`` lines into one (``#  Rank  0 .. Rank  7 on HOST
NAME``): such a line is read as the ranks it spans (``zerocalc.traces.nccl_tests_spans``), where the file
was refused as naming no GPU. CoreWeave's SHARP run (CollNet, which NCCL's cost model does not price) is
within both bands on the Ring/Tree it is priced with (0.61-0.88x). Misses, left as they are: the p4d run
(0.72x at its median size; the same instances' NCCL 2.9.9 run bundled before is 0.65x), the 4-rank A4
all_gather (0.68-0.72x: each pod's GPUs given RDMA NICs by DraNet; the page's one-GPU-a-pod run is priced
through host memory) and the DOCA hosts (0.19x at 16 GiB: 89 GB/s of bus bandwidth where the post states
the same hosts reach 450 GB/s under MLNX_OFED).
"""

import re

import pytest
from sweep_files import DATA, assert_within_both_bands, check_json, unsteady_sizes

from zerocalc.traces.nccl_tests_spans import rank_span

P4D = "all_reduce_perf-16xA100-p4d-2nodes-tagged-nccl2.8.3.log"
KUEUE = "all_reduce_perf-16xA100-SXM4-40GB-oci-oke-kueue-nccl2.25.1.txt"
SLURM = "all_reduce_perf-16xA100-SXM4-40GB-oci-oke-slurm-4of16ranks-nccl2.29.3.txt"
SLINKY = "all_reduce_perf-16xA100-SXM4-40GB-oci-oke-slinky-2sizes-nccl2.29.3.txt"
AZURE = "all_reduce_perf-16xH100-azure-ndv5-2nodes-condensed-ranks-nccl2.29.7.txt"
ABCI = "all_reduce_perf-16xA100-SXM4-40GB-abci-2nodes-collnet-sharp-nccl2.8.txt"
SHARP = "all_reduce_perf-32xA100-80GB-coreweave-sharp-excerpt.txt"
A4_PODS = "all_gather_perf-4xB200-gcp-a4-2nodes-2pernode-elided-nccl2.26.6.txt"
A4_GKE = "all_gather_perf-16xB200-gcp-a4-gke-2nodes-rows-only.txt"
DOCA = "all_reduce_perf-16xH100-hgx-2nodes-ib-doca-slow-nccl2.26.2.txt"

#: file → the options its page lets a user give: ABCI's guide loads ``nccl/2.8`` (its Compute Node (A),
#: ``rt_AF``, the preset its GPUs' PCI slots pick: tests/test_abci_slots.py); the A4 blueprint's page names
#: its ``a4-highgpu-8g`` nodes (8 B200, 8 × 400 Gb/s)
ARGS = {ABCI: ("--nccl-version", "2.8"), A4_GKE: ("--topology", "dgx-b200")}
#: file → (op, preset): the GPU and hosts its lines name (A4_GKE: the page's, given above)
READ = {P4D: ("all_reduce", "aws-p4d"), KUEUE: ("all_reduce", "dgx-a100"), SLURM: ("all_reduce", "dgx-a100"),
        SLINKY: ("all_reduce", "dgx-a100"), AZURE: ("all_reduce", "dgx-h100"), ABCI: ("all_reduce", "abci-a"),
        SHARP: ("all_reduce", "dgx-a100"), A4_PODS: ("all_gather", "dgx-b200"),
        A4_GKE: ("all_gather", "dgx-b200"), DOCA: ("all_reduce", "dgx-h100")}
#: files in nccl-tests' layout before v2.13 (no ``root`` column; an ``error`` column)
OLD_LAYOUT = {P4D, ABCI, SHARP}
#: files that print some of their ``# Rank`` lines (ranks 0, 7, 8, 15; CoreWeave's 0-4 and a ``...``) or none
PARTIAL = {SLURM, SLINKY, SHARP, A4_GKE}
#: within both bands of issue 11 on the preset and release the file (or its page) states
IN_BANDS = {KUEUE, SLURM, SLINKY, AZURE, ABCI, A4_GKE, SHARP}

_TAG = re.compile(r"^\[\d+,\d+\]<stdout>:")


def rows_of(name):
    """(size, out-of-place µs, in-place µs, count, out-of-place algbw, out-of-place busbw) of each row, by a
    plain split past an OpenMPI ``--tag-output`` tag: ``size count type [redop] [root] time algbw busbw``."""
    rows = []
    for line in (DATA / name).read_text().splitlines():
        f = _TAG.sub("", line).split()
        if len(f) >= 12 and f[0].isdigit() and f[1].isdigit():
            at = 4 if name in OLD_LAYOUT else 5
            rows.append((int(f[0]), float(f[at]), float(f[at + 4]), int(f[1]), float(f[at + 1]),
                         float(f[at + 2])))
    return rows


def counted(name):
    return [r[:3] for r in rows_of(name)]


def sweep_of(name):
    return check_json(name, *ARGS.get(name, ()), counted=lambda _: counted(name))


def ranks_counted(name, op):
    """The ranks the rows imply: all_gather's size / (count × 4 B) (float), all_reduce's busbw/algbw =
    2(n-1)/n on the row of the highest algbw (whose two decimals tell n best)."""
    rows = rows_of(name)
    if op == "all_gather":
        (n,) = {size // (count * 4) for size, _, _, count, _, _ in rows}
        return n
    _, _, _, _, algbw, busbw = max(rows, key=lambda r: r[4])
    return round(2 / (2 - busbw / algbw))


def rank_lines(name):
    """(rank, host, GPU name) of each ``# Rank`` line, by a plain split (``Rank R … on HOST device D [BUS]
    NAME``), and of each condensed line (``Rank A .. Rank B on HOST NAME``) for each rank it spans."""
    out = []
    for line in (DATA / name).read_text().splitlines():
        f = _TAG.sub("", line).split()
        if "Rank" not in f or "on" not in f:
            continue
        at = f.index("on")
        if "device" in f:
            out.append((int(f[f.index("Rank") + 1]), f[at + 1], " ".join(f[f.index("device") + 3:])))
        elif ".." in f:
            first, last = int(f[f.index("Rank") + 1]), int(f[at - 1])
            out += [(r, f[at + 1], " ".join(f[at + 2:])) for r in range(first, last + 1)]
    return out


def stated_version(name):
    """The release the file states: ``NCCL version X.Y.Z`` or ``nccl-library=MMmmpp``; ``None`` if neither."""
    text = (DATA / name).read_text()
    m = re.search(r"NCCL version (\d+\.\d+\.\d+)", text)
    if m:
        return m[1]
    m = re.search(r"nccl-library=(\d+)", text)
    return f"{int(m[1]) // 10000}.{int(m[1]) // 100 % 100}.{int(m[1]) % 100}" if m else None


@pytest.mark.parametrize("name", sorted(READ))
def test_each_file_is_read_as_its_lines_count_it(name):
    """Op, ranks and preset: the ranks from the ``# Rank`` lines where the file prints all of them, from the
    rows where it prints some or none (and then they agree with the highest rank printed)."""
    op, preset = READ[name]
    sweep = sweep_of(name)
    lines = rank_lines(name)
    ranks = ranks_counted(name, op)
    if name in PARTIAL:
        assert len(lines) < ranks and all(r < ranks for r, _, _ in lines)
    else:
        assert [r for r, _, _ in lines] == list(range(ranks))
    assert (sweep["op"], sweep["group_size"], sweep["topology"]) == (op, ranks, preset)


@pytest.mark.parametrize("name", sorted(READ))
def test_the_rows_are_the_files_from_first_to_last(name):
    rows, sweep = counted(name), sweep_of(name)
    assert len(sweep["rows"]) == len(rows) >= 2
    first, last = sweep["rows"][0], sweep["rows"][-1]
    assert (first["bytes"], last["bytes"]) == (rows[0][0], rows[-1][0])
    assert first["measured_s"] == pytest.approx(rows[0][1] * 1e-6)
    assert last["measured_s"] == pytest.approx(rows[-1][1] * 1e-6)
    assert [r["in_place_s"] for r in sweep["rows"]] == pytest.approx([r[2] * 1e-6 for r in rows])


@pytest.mark.parametrize("name", sorted(set(READ) - set(ARGS)))
def test_the_release_priced_is_the_one_the_file_states(name):
    """Every file but the two whose page gives the options states its release; CoreWeave's excerpt states
    none and is priced on the last release of its table layout's era, saying so."""
    stated, sweep = stated_version(name), sweep_of(name)
    if stated is None:
        assert name == SHARP and "states no NCCL version" in "\n".join(sweep.get("notes", [])) + sweep.get(
            "nccl_version_how", "")
    else:
        assert sweep["nccl_version"] == stated


@pytest.mark.parametrize("name", sorted(READ))
def test_the_unsteady_rows_are_those_whose_two_timings_differ(name):
    flagged = [r["bytes"] for r in sweep_of(name)["rows"] if r["unsteady"]]
    assert flagged == unsteady_sizes(name, rows=counted)


@pytest.mark.parametrize("name", sorted(IN_BANDS))
def test_the_runs_on_their_stated_machines_are_within_both_bands(name):
    assert_within_both_bands(sweep_of(name))


def test_condensed_rank_lines_give_the_ranks_hosts_and_gpu():
    """The Azure page's two lines stand for 16 ranks, 8 on each VM, of the H100 they name: priced on the DGX
    H100 preset (8 H100, 8 × 400 Gb/s) as the page's ND H100 v5 is; refused as naming no GPU before."""
    lines = rank_lines(AZURE)
    assert [r for r, _, _ in lines] == list(range(16))
    assert {g for _, _, g in lines} == {"NVIDIA H100 80GB HBM3"}
    sweep = sweep_of(AZURE)
    assert "8 per host, 2 hosts" in sweep["topology_how"]
    assert sweep["gpus_per_thread"] == 1


@pytest.mark.parametrize(("line", "span"), [
    ("#  Rank  0 .. Rank  7 on h100a-gpu-0001  NVIDIA H100 80GB HBM3", (0, 7, "h100a-gpu-0001",
                                                                         "NVIDIA H100 80GB HBM3")),
    ("#  Rank  8 .. Rank 15 on h100a-gpu-0002  NVIDIA H100 80GB HBM3", (8, 15, "h100a-gpu-0002",
                                                                         "NVIDIA H100 80GB HBM3")),
    ("# Rank 0-3 on node1", (0, 3, "node1", "")),
])
def test_a_condensed_rank_line_is_a_span(line, span):
    assert tuple(rank_span(line)) == span
    assert list(rank_span(line).ranks()) == list(range(span[0], span[1] + 1))


@pytest.mark.parametrize("line", [
    "#  Rank  0 Group  0 Pid  10204 on host device  0 [0000:1b:00] NVIDIA H200",  # nccl-tests' own line
    "#  Rank  7 .. Rank  0 on host  NVIDIA H200",  # backwards: no span
    "#  Rank  0 .. Rank  7 on host device  0 [0000:1b:00] NVIDIA H200",
])
def test_other_lines_are_no_span(line):
    assert rank_span(line) is None
