"""nccl-tests outputs whose test is named by a wrapper's command line, or by a command line that does
not fit the table printed under it, and indented Markdown copies of single- and two-host H100 runs.

Expected values are counted from the bundled files (tests/data/traces/README.md) by a plain split, not
through zerocalc's reader.
"""

import json
import shutil

import pytest
from typer.testing import CliRunner

from tests.sweep_files import DATA, check_json, device_lines, file_rows, median_size_ratio
from zerocalc.cli import app

runner = CliRunner()
GIB_DRANET = "gib-run_nccl_tests-16xB200-gcp-a4-2nodes-nccl2.26.6.txt"
GIB_VERL = "gib-run_nccl_tests-16xB200-gcp-a4-verl-nccl2.26.6.txt"
NAMED_OVER_ALLTOALL = "mpirun-all_reduce-named-over-alltoall-rows-16xA100-2nodes.txt"
H100_ONE_HOST = "all_reduce_perf-8xH100-g8-indented-256M-2G.txt"
H100_TWO_HOSTS = "all_reduce_perf-16xH100-2nodes-indented-256M-8G.txt"


def gib_test(name):
    """The test a ``run_nccl_tests.sh -t TEST`` line of the file names, by a plain split."""
    (line,) = [ln for ln in (DATA / name).read_text().splitlines() if "run_nccl_tests.sh" in ln]
    f = line.replace('"', " ").split()
    return f[f.index("-t") + 1]


def test_the_gib_script_names_the_test_its_output_does_not():
    """Google's gIB image runs nccl-tests through run_nccl_tests.sh -t all_gather (kubernetes-sigs/dranet's
    GKE page): no all_gather_perf in the output or the file's name, its table all_gather's or alltoall's
    alike. The -t names it: 16 ranks by the '# Rank' lines, the rows as printed."""
    assert "_perf" not in (DATA / GIB_DRANET).read_text() and "_perf" not in GIB_DRANET
    sweep = check_json(GIB_DRANET)
    assert sweep["op"] == gib_test(GIB_DRANET) == "all_gather"
    assert sweep["group_size"] == len(device_lines(GIB_DRANET)) == 16
    assert sweep["nccl_version"] == "2.26.6"
    assert not [n for n in sweep["notes"] if n.startswith("the file names")]  # its own line named it


def test_a_gib_run_without_device_lines_prices_on_the_b200_preset():
    """The same script's run on two a4-highgpu-8g VMs (esaaren/verl-on-gke: `MACHINE_TYPE="a4-highgpu-8g"`,
    8 B200 each), no '# Rank' lines: the test from -t, 16 ranks from busbw/algbw (15/16 of every row),
    within the acceptance bands on dgx-b200."""
    sweep = check_json(GIB_VERL, "--topology", "dgx-b200")
    assert sweep["op"] == gib_test(GIB_VERL) == "all_gather"
    assert not [n for n in sweep["notes"] if n.startswith("the file names")]
    assert sweep["group_size"] == 16 and sweep["nccl_version"] == "2.26.6"
    assert all(0.5 <= r["ratio"] <= 2 for r in sweep["rows"])
    assert 0.8 <= median_size_ratio(sweep) <= 1.25


def in_place_cells(name):
    """The in-place #wrong cell of each result row, by a plain split."""
    return {f[12] for f in map(str.split, (DATA / name).read_text().splitlines())
            if len(f) >= 13 and f[0].isdigit() and f[1].isdigit()}


def test_a_command_line_the_table_denies_is_not_taken_for_the_test(tmp_path):
    """A post whose mpirun line runs all_reduce_perf above a table of redop none, size = 16 × count × 4 B
    and an in-place check of N/A on every row (an alltoall's: nccl-tests checks no alltoall result in
    place): not priced as all_reduce but as the alltoall its table is, saying so; a file name the user
    gives (alltoall_perf) agrees."""
    text = (DATA / NAMED_OVER_ALLTOALL).read_text()
    assert "all_reduce_perf" in text and "alltoall" not in text
    assert in_place_cells(NAMED_OVER_ALLTOALL) == {"N/A"}
    rows = file_rows(NAMED_OVER_ALLTOALL)
    named = tmp_path / "alltoall_perf-16xA100.txt"
    shutil.copy(DATA / NAMED_OVER_ALLTOALL, named)
    for path in (DATA / NAMED_OVER_ALLTOALL, named):
        res = runner.invoke(app, ["check", str(path), "--format", "json"])
        assert res.exit_code == 0, res.output
        (sweep,) = json.loads(res.stdout)["sweeps"]
        assert sweep["op"] == "all_to_all"
        assert sweep["group_size"] == len(device_lines(NAMED_OVER_ALLTOALL)) == 16
        assert [r["bytes"] for r in sweep["rows"]] == [s for s, _, _ in rows]
        (note,) = [n for n in sweep["notes"] if n.startswith("the file names all_reduce_perf, but")]
        assert "redop none" in note and "alltoall_perf" in note


def test_indented_h100_runs_are_read_and_priced_in_band():
    """A Markdown page's two runs, every line indented four spaces and the rows' own padding dropped:
    one process driving the 8 H100 of a DGX-class host (-g 8), and 16 ranks on two such hosts; each
    read as printed and priced within the acceptance bands on the preset their device lines pick."""
    for name, ranks in ((H100_ONE_HOST, 8), (H100_TWO_HOSTS, 16)):
        sweep = check_json(name)
        assert sweep["op"] == "all_reduce" and sweep["group_size"] == len(device_lines(name)) == ranks
        assert all(0.5 <= r["ratio"] <= 2 for r in sweep["rows"])
        assert 0.8 <= median_size_ratio(sweep) <= 1.25


def test_a_vm_slice_run_under_an_nccl_newer_than_the_tables_is_read():
    """4 H200 of one VM (-g4), a 1 MiB --stepbytes cut after two sizes, under NCCL 2.31.2 (its
    nccl-library= code): read as printed, the version as stated, 4 ranks on one host."""
    name = "all_reduce_perf-4xH200-vm-g4-stepbytes-nccl2.31.2.txt"
    sweep = check_json(name)
    code = next(w.split("=")[1] for w in (DATA / name).read_text().split() if w.startswith("nccl-library="))
    assert code == "23102" and sweep["nccl_version"] == "2.31.2"
    assert sweep["op"] == "all_reduce" and sweep["group_size"] == len(device_lines(name)) == 4
    sizes = [r["bytes"] for r in sweep["rows"]]
    assert sizes[1] - sizes[0] == 1 << 20


def test_launcher_lines_that_name_ranks_are_not_rank_lines():
    """OCI's oci-hpc sbatch prints 'rank 0=GPU-6550 slot=0' … before nccl-tests' output: the 16 ranks and
    2 hosts are its '# Rank' lines', the rows as printed, NCCL 2.27.5."""
    name = "all_reduce_perf-16xH200-oci-slurm-nccl2.27.5.txt"
    text = (DATA / name).read_text()
    assert sum(line.startswith("rank ") for line in text.splitlines()) == 16
    sweep = check_json(name)
    hosts = {h for h, _ in device_lines(name)}
    assert sweep["group_size"] == len(device_lines(name)) == 16 and len(hosts) == 2
    assert sweep["nccl_version"] == "2.27.5"


def test_two_processes_of_four_gpus_on_two_hosts_are_eight_ranks():
    """mpirun -n 2 … -g 4 across two hosts of 4 H100: 8 ranks, 4 a host, every row of 8 B-16 GiB read."""
    name = "all_reduce_perf-8xH100-2nodes-4pernode-g4.txt"
    sweep = check_json(name)
    lines = device_lines(name)
    assert sweep["group_size"] == len(lines) == 8 and len({h for h, _ in lines}) == 2
    assert len(sweep["rows"]) == len(file_rows(name)) == 32


def test_rank_lines_that_lost_their_hash_marks_still_name_the_gpus(tmp_path):
    """A post's '#' lines turned into Markdown headings lose the mark (NVIDIA/nccl issue 583's post prints
    '   Rank  0 Pid 1821213 on AI-A100-Beethoven01 device  0 [0x00] NVIDIA A100-SXM4-40GB'): the OCI H200
    run with every line's leading '#' taken off is read as the run itself, its preset from its device
    lines, 16 ranks on 2 hosts."""
    name = "all_reduce_perf-16xH200-oci-slurm-nccl2.27.5.txt"
    lines = (DATA / name).read_text().splitlines(True)
    bare = tmp_path / name
    bare.write_text("".join(ln[1:] if ln.startswith("#") else ln for ln in lines))
    assert not [ln for ln in bare.read_text().splitlines() if ln.startswith("#")]
    sweep, stated = check_json(bare, counted=lambda _: file_rows(name)), check_json(name)
    assert sweep["topology"] == stated["topology"] == "dgx-h200"
    assert sweep["group_size"] == stated["group_size"] == len(device_lines(name)) == 16
    assert [r["predicted_s"] for r in sweep["rows"]] == [r["predicted_s"] for r in stated["rows"]]


def test_two_single_host_runs_interleaved_by_srun_are_two_sweeps():
    """srun starting an nccl-tests built without MPI on two hosts, each process driving its host's 8 H100
    (-g 8): two runs of ranks 0-7, their headers and rows interleaved in one output (Together AI's
    together-nccl-tests). Two sweeps of 8 ranks on one host each, each of every size once."""
    name = "all_reduce_perf-2x8xH100-srun-two-processes-nccl2.26.2.out"
    counted = file_rows(name)
    sizes = sorted({s for s, _, _ in counted})
    assert len(counted) == 2 * len(sizes)
    res = runner.invoke(app, ["check", str(DATA / name), "--format", "json"])
    assert res.exit_code == 0, res.output
    one, two = json.loads(res.stdout)["sweeps"]
    for sweep in (one, two):
        assert sweep["group_size"] == 8 and sweep["op"] == "all_reduce"
        assert [r["bytes"] for r in sweep["rows"]] == sizes
    measured = sorted(r["measured_s"] for s in (one, two) for r in s["rows"])
    assert measured == pytest.approx(sorted(t * 1e-6 for _, t, _ in counted))
