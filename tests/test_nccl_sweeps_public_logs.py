"""Public nccl-tests logs of more setups, read as a user would give them to ``check``: one host of 8
H100 (Together AI's all_gather and reduce_scatter, NCCL 2.26.2; an AWS Batch p5.48xlarge all_reduce under
``--tag-output``), 128 A100 over 16 CoreWeave nodes (a README excerpt whose ``...`` cuts the ``# Rank``
lines), 16 A100 over two p4d.24xlarge (a whole Slurm log of ``scatter_perf``, ``srun -l`` prefixes, NCCL
2.18.3), GKE's all_gather over two A3 Mega, A3 Ultra and A3 High VMs (README excerpts without device
lines) and an all_reduce over one T4 on each of two g4dn.metal over EFA. tests/data/traces/README.md names
each source. Expected figures are counted from the files by a plain split (no zerocalc code); the bands
are issue 11's (0.5-2x at every size, 0.8-1.25x at the median size), asserted only for the files whose
setup a preset describes and that lie within them."""

import json

import pytest
from sweep_files import DATA, check_json, device_lines, median_size_ratio
from typer.testing import CliRunner

from zerocalc.cli import app

runner = CliRunner()
TOGETHER_AG = "all_gather_perf-8xH100-g8-ring-nccl2.26.2.out"
TOGETHER_RS = "reduce_scatter_perf-8xH100-g8-nvls-nccl2.26.2.out"
P5_BATCH = "all_reduce_perf-8xH100-p5-aws-batch-tagged.txt"
COREWEAVE = "all_reduce_perf-128xA100-80GB-coreweave-16nodes-ib.txt"
P4D_SCATTER = "scatter_perf-16xA100-40GB-p4d-2nodes-srun-nccl2.18.3.out"
A3MEGA = "all_gather_perf-16xH100-gcp-a3mega-gke-tcpxo.txt"
A3ULTRA = "all_gather_perf-16xH200-gcp-a3ultra-dws-flex-start.txt"
A3HIGH = "all_gather_perf-16xH100-gcp-a3high-gke-tcpx.txt"
T4_EFA = "all_reduce_perf-2xT4-g4dn-efa-2nodes-tagged-nccl2.12.7.txt"


def counted(name):
    """(size, out-of-place µs, in-place µs) of each row with data, by a plain split: past an OpenMPI
    ``[1,0]<stdout>:`` tag or an ``srun -l`` ``N:`` label, a row is two integers (size > 0, count > 0) and
    ends with the out-of-place then in-place ``time algbw busbw #wrong`` (or ``error``) cells."""
    rows = []
    for line in (DATA / name).read_text().splitlines():
        f = line.split("<stdout>:", 1)[-1].split()
        if f and f[0].endswith(":") and f[0][:-1].isdigit():
            f = f[1:]
        if len(f) >= 11 and f[0].isdigit() and f[1].isdigit() and int(f[0]) > 0 and int(f[1]) > 0:
            rows.append((int(f[0]), float(f[-8]), float(f[-4])))
    return rows


def _json(name, *args):
    res = runner.invoke(app, ["check", str(DATA / name), "--format", "json", *args])
    return res, (json.loads(res.stdout) if res.exit_code == 0 else None)


@pytest.mark.parametrize(("name", "op", "args"), [
    (TOGETHER_AG, "all_gather", ()),
    (TOGETHER_RS, "reduce_scatter", ()),
    (P5_BATCH, "all_reduce", ("--topology", "aws-p5")),
])
def test_one_host_of_eight_h100_read_as_counted_and_within_both_bands(name, op, args):
    sweep = check_json(name, *args, counted=counted)
    assert sweep["op"] == op and sweep["group_size"] == 8
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
    assert 0.8 <= median_size_ratio(sweep) <= 1.25


def test_together_logs_state_their_nccl_and_eight_gpus_of_one_host():
    """``nccl-library=22602`` and eight ``# Rank`` lines of one host in each; 27 sizes with data, 128 B to
    8 GiB, after four zero-size rows (-b 8 of a float all_gather / reduce_scatter over 8 ranks)."""
    for name in (TOGETHER_AG, TOGETHER_RS):
        text = (DATA / name).read_text()
        assert "nccl-library=22602" in text
        assert {h for h, _ in device_lines(name)} == {"gpu-dp-2jvzl-pqq7p"} and len(device_lines(name)) == 8
        sizes = [s for s, _, _ in counted(name)]
        assert sizes[0] == 128 and sizes[-1] == 8 << 30 and len(sizes) == 27
        sweep = check_json(name, counted=counted)
        assert sweep["nccl_version"] == "2.26.2"


def test_p5_batch_log_without_device_lines_tells_eight_ranks_by_its_bandwidths():
    """No ``# Rank`` line: every row's busbw/algbw is 2·7/8 (483.05 / 276.03 = 1.750 at 16 GiB), and without
    ``--topology`` the file names no GPU to choose one from."""
    res, _ = _json(P5_BATCH)
    assert res.exit_code == 2 and "--topology" in res.output
    sweep = check_json(P5_BATCH, "--topology", "aws-p5", counted=counted)
    assert [r["bytes"] for r in sweep["rows"]][-1] == 16 << 30
    assert sweep["n_how"].startswith("from busbw/algbw")


def test_rank_lines_cut_by_dots_are_not_taken_for_the_group():
    """The README shows five ``# Rank`` lines, then ``...``: the five are an excerpt of the job's 128
    ranks, so they do not give the group size; the bandwidths allow 125-128 (two-decimal cells), so check
    asks for ``--n`` instead of pricing five ranks; with ``--n 128`` (the job's ``-np 128``) the rows read as
    counted, on the ``dgx-a100`` preset the device lines name."""
    lines = (DATA / COREWEAVE).read_text().splitlines()
    assert len(device_lines(COREWEAVE)) == 5 and "..." in lines
    res, _ = _json(COREWEAVE)
    assert res.exit_code == 2 and "--n" in res.output
    sweep = check_json(COREWEAVE, "--n", "128", counted=counted)
    assert sweep["group_size"] == 128 and sweep["op"] == "all_reduce"
    assert len(sweep["rows"]) == len(counted(COREWEAVE)) == 30


def test_p4d_scatter_log_read_whole_under_its_srun_labels():
    """The whole Slurm log: 16 ``# Rank`` lines over two hosts, NCCL 2.18.3, 26 sizes with data (64 B to
    2 GiB: 16 ranks × 4 B × count) after three zero-size rows; the table's ``none`` / root ``0`` cells are
    gather's or scatter's, the file's name tells which."""
    text = (DATA / P4D_SCATTER).read_text()
    assert "NCCL version 2.18.3" in text
    assert len({h for h, _ in device_lines(P4D_SCATTER)}) == 2 and len(device_lines(P4D_SCATTER)) == 16
    sweep = check_json(P4D_SCATTER, counted=counted)
    assert sweep["op"] == "scatter" and sweep["group_size"] == 16 and sweep["nccl_version"] == "2.18.3"
    assert [r["bytes"] for r in sweep["rows"]][0] == 64 and len(sweep["rows"]) == 26


@pytest.mark.parametrize(("name", "args", "rows"), [
    (A3MEGA, ("--topology", "gcp-a3-mega", "--nccl-version", "2.28.7"), 26),
    (A3ULTRA, ("--topology", "dgx-h200"), 24),
    (A3HIGH, ("--topology", "gcp-a3-high", "--nccl-version", "2.19.3"), 10),
])
def test_gke_all_gather_excerpts_tell_sixteen_ranks_by_size_over_count(name, args, rows):
    """No ``# Rank`` line: each row's size is 16 × count × 4 B (A3 Mega's 256 B row: count 4). A3 Mega's
    excerpt starts with five zero-size rows (``-b`` below one float a rank), which tell no ranks and no
    longer split the sweep in two (one group of 16 ranks, one of none)."""
    sized = counted(name)
    assert len(sized) == rows and all(s % (16 * 4) == 0 for s, _, _ in sized)
    sweep = check_json(name, *args, counted=counted)
    assert sweep["op"] == "all_gather" and sweep["group_size"] == 16


@pytest.mark.parametrize(("name", "args"), [
    (A3ULTRA, ("--topology", "dgx-h200")),
    (A3MEGA, ("--topology", "gcp-a3-mega", "--nccl-version", "2.28.7")),
    (A3HIGH, ("--topology", "gcp-a3-high", "--nccl-version", "2.19.3")),
])
def test_gke_all_gather_within_half_to_twice_at_every_size(name, args):
    sweep = check_json(name, *args, counted=counted)
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])


def test_a3_ultra_all_gather_within_the_median_band_too():
    sweep = check_json(A3ULTRA, "--topology", "dgx-h200", counted=counted)
    assert 0.8 <= median_size_ratio(sweep) <= 1.25


def test_a3_high_all_gather_within_the_median_band_too():
    """GKE's A3 High run (TCPX, NCCL 2.19.3): its 1-8 MiB rows take 943-1007 µs, the ring's 15 steps each at
    a TCP message's trip between two VMs; the median size (16 MiB) was at 0.51x when each step took NCCL's
    14 µs network hop."""
    sweep = check_json(A3HIGH, "--topology", "gcp-a3-high", "--nccl-version", "2.19.3", counted=counted)
    assert 0.8 <= median_size_ratio(sweep) <= 1.25


def test_t4_over_efa_read_under_its_tags_and_refused_without_a_topology():
    """Two ``# Rank`` lines (one Tesla T4 on each of two hosts), NCCL 2.12.7, 29 sizes with data (4 B to
    1 GiB after two zero-size rows): no preset describes a T4 with EFA, so check names ``--topology``; on
    ``pcie-gen3`` (the T4's own link) the rows read as counted."""
    text = (DATA / T4_EFA).read_text()
    assert "NCCL version 2.12.7" in text and "Selected Provider is efa" in text
    lines = [t for t in text.splitlines() if " Rank " in t and "Tesla T4" in t]
    assert len(lines) == 2 and len({t.split(" on ")[1].split()[0] for t in lines}) == 2
    res, _ = _json(T4_EFA)
    assert res.exit_code == 2 and "--topology" in res.output and "EFA" in res.output
    sweep = check_json(T4_EFA, "--topology", "pcie-gen3", counted=counted)
    assert sweep["group_size"] == 2 and sweep["nccl_version"] == "2.12.7" and len(sweep["rows"]) == 29
