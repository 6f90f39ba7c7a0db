"""check on single-node runs as users post them, and on the forms a paste gives an output.

A published cut of an 8-GPU B200 run (a GKE node of Google Cloud's ``a4-highgpu-8g``, one process driving
its 8 GPUs, ``nGpus 8``): its author left the host out of each ``#  Rank`` line (``Pid 221599 device  0
[0000:8f:00] NVIDIA B200``, where nccl-tests prints ``on HOST`` before ``device``) and kept the lead columns
and one group of ``time algbw busbw``, no ``#wrong``. Such lines still count their ranks and name their
GPU; and a table whose header reads as pre-2022 (no ``#wrong``) but prints ``redop root`` with root -1 on
every row is a later run's, cut: before Aug 2022 only reduce_perf printed both columns, its root a rank
(nccl-tests 8274cb4 ``src/reduce.cu``), so it is not priced as NCCL 2.12.12 (1.4-2.4x there).

The "MOD 8" block of NVIDIA/nccl-tests issue 306: nccl-tests built without ``MPI=1`` and started once on
each of two H20 hosts, so each process ran a single-host 8-GPU run (``nGpus 8`` printed), their lines
interleaved: ``node3``'s run is read whole (its last row comes after ``node2``'s device lines) and priced
within both bands on hgx-h20; ``node2``'s run took 21-200 ms a call and is read as printed.

A DGX A100 run on 4 of its 8 GPUs (``-g 4`` in a container given devices 4-7; CoreWeave's nccl-tests image
of NCCL 2.16.2, the page says): a table alone, 1-8 GiB, its 4 ranks told by busbw/algbw; priced with the
topology and NCCL the page states, within both bands (one row's in-place time 1.42x its out-of-place one).

An OCI BM.GPU4.8 host's 8 A100 (one process a GPU under Singularity, nccl-tests 2.17.6, NCCL 2.26.5), one
size: read and priced with no option, within both bands.

Then bundled single-node files as a web page, a mail or a filter gives them: blanks copied as no-break
spaces (HTML's ``&nbsp;``, U+00A0), lines wrapped between words at 72 or 80 characters (the column header
before its in-place group, a ``# Rank`` line inside its GPU's name, a row between its cells, the ``# nThread``
line before its options), and each line stamped with a time (moreutils ``ts``, its default format and
others): each is read as the file itself.

What each test expects is counted from the files themselves by a plain split, not through zerocalc; the
bands are issue 11's (0.5-2x at every size, 0.8-1.25x at the median size), as a regression guard.
"""

import json
import textwrap

import pytest
from sweep_files import DATA, assert_within_both_bands, check_json, file_rows, median_size_ratio, runner

from zerocalc.cli import app

B200_CUT = "all_reduce_perf-8xB200-gcp-a4-gke-1node-g8-no-host-out-of-place-columns.txt"
H20_MOD8 = "all_reduce_perf-2x8xH20-g8-two-processes-mod8-interleaved.txt"
DGX_A100_G4 = "all_reduce_perf-4xA100-dgx-a100-g4-devices4-7-rows-only.txt"
OCI_1NODE = "all_reduce_perf-8xA100-SXM4-40GB-oci-1node-singularity-10G-nccl2.26.5.txt"
#: Bundled runs (one or two hosts, by their ``#  Rank`` lines) the paste forms are tried on.
PASTED = ["all_reduce_perf-8xH100-g8-ring-nccl2.26.2.out", "all_gather_perf-8xH100-1node-nccl2.29.2.txt",
            "all_reduce_perf-8xA100-SXM4-80GB-g8-nccl2.19.3.txt",
            "all_reduce_perf-4xL40S-2pods-roce-g2-nccl2.27.3.txt"]


def split_lines(name):
    return [line.split() for line in (DATA / name).read_text().splitlines()]


def cut_rows(name=B200_CUT):
    """(size, µs, µs) of the cut's 8-field rows (size count type redop root time algbw busbw), by a plain
    split: its one time column twice, as check reads a table of one group of time columns."""
    rows = [f for f in split_lines(name) if len(f) == 8 and f[0].isdigit()]
    return [(int(f[0]), float(f[5]), float(f[5])) for f in rows]


def test_the_b200_cut_lists_eight_ranks_of_one_process_without_hosts():
    lines = [f for f in split_lines(B200_CUT) if f[:2] == ["#", "Rank"]]
    assert [int(f[2]) for f in lines] == list(range(8))
    assert all("on" not in f and f[f.index("device") + 3:] == ["NVIDIA", "B200"] for f in lines)
    assert {f[f.index("Pid") + 1] for f in lines} == {"221599"}
    nthread = next(f for f in split_lines(B200_CUT) if f[:2] == ["#", "nThread"])
    assert nthread[nthread.index("nGpus") + 1] == "8"


def test_the_b200_cut_is_read_as_its_lines_and_columns_say():
    sweep = check_json(B200_CUT, counted=cut_rows)
    rows = [f for f in split_lines(B200_CUT) if len(f) == 8 and f[0].isdigit()]
    assert len(rows) == 12 and {(f[2], f[3], f[4]) for f in rows} == {("float", "sum", "-1")}
    assert {int(f[0]) // int(f[1]) for f in rows} == {4}
    assert {round(2 / (2 - float(f[7]) / float(f[6]))) for f in rows} == {8}  # busbw/algbw = 2(n-1)/n
    assert (sweep["op"], sweep["group_size"], sweep["gpus_per_thread"]) == ("all_reduce", 8, 8)
    assert sweep["topology"] == "dgx-b200"
    assert "NVIDIA B200, its 8 ranks listed without their hosts" in sweep["topology_how"]


def test_the_b200_cut_is_priced_as_a_later_run_and_within_both_bands():
    sweep = check_json(B200_CUT, counted=cut_rows)
    assert sweep["nccl_version_how"] == "default: the latest modelled (the file states none)"
    assert sweep["nccl_version"] != "2.12.12"
    assert_within_both_bands(sweep)
    assert 0.8 <= median_size_ratio(sweep) <= 1.25


def test_a_cut_whose_roots_are_ranks_keeps_the_old_layouts_release(tmp_path):
    """The same lines with root 0 on every row are what a pre-2022 reduce_perf printed (redop and root, no
    '#wrong'): the rule for tables in the pre-2.13 layout stands there."""
    out = []
    for line in (DATA / B200_CUT).read_text().splitlines(True):
        f = line.split()
        out.append(line.replace("     sum      -1 ", "     sum       0 ") if len(f) == 8 and f[0].isdigit()
                   else line)
    assert sum("sum       0" in e for e in out) == 12
    path = tmp_path / "reduce_perf.txt"
    path.write_text("".join(out))
    res = runner.invoke(app, ["check", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    assert (sweep["op"], sweep["nccl_version"]) == ("reduce", "2.12.12")
    assert "before v2.13" in sweep["nccl_version_how"]


def test_device_lines_without_hosts_still_give_way_to_a_given_topology():
    sweep = check_json(B200_CUT, "--topology", "dgx-b200", counted=cut_rows)
    assert (sweep["topology"], sweep["group_size"]) == ("dgx-b200", 8)


def checked(path, *args):
    res = runner.invoke(app, ["check", str(path), "--format", "json", *args])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    return sweep


def same_reading(a, b):
    """What a reading of a sweep says: op, ranks, version, topology, -g, -a, -G and each row's size, time and
    prediction."""
    keys = ("op", "group_size", "nccl_version", "topology", "gpus_per_thread", "agg_iters", "graph")
    assert {k: a.get(k) for k in keys} == {k: b.get(k) for k in keys}
    assert [(r["bytes"], r["measured_s"], r["predicted_s"]) for r in a["rows"]] == \
        [(r["bytes"], r["measured_s"], pytest.approx(r["predicted_s"])) for r in b["rows"]]


@pytest.mark.parametrize("name", PASTED)
def test_no_break_spaces_of_a_web_page_copy_read_as_blanks(name, tmp_path):
    text = (DATA / name).read_text()
    path = tmp_path / name
    path.write_text(text.replace(" ", "\u00a0"))
    assert " " not in path.read_text()
    same_reading(checked(path), checked(DATA / name))


@pytest.mark.parametrize("width", [72, 80])
@pytest.mark.parametrize("name", PASTED)
def test_lines_wrapped_between_words_read_as_the_file(name, width, tmp_path):
    lines = (DATA / name).read_text().splitlines()
    wrap = textwrap.TextWrapper(width, drop_whitespace=False, replace_whitespace=False)
    wrapped = [piece for line in lines for piece in wrap.wrap(line) or [""]]
    assert len(wrapped) > len(lines)
    path = tmp_path / name
    path.write_text("\n".join(wrapped) + "\n")
    same_reading(checked(path), checked(DATA / name))


def test_a_gpu_name_wrapped_onto_the_next_line_still_names_the_gpu(tmp_path):
    name = "all_gather_perf-8xH100-1node-nccl2.29.2.txt"
    out = []
    for line in (DATA / name).read_text().splitlines(True):
        out += (line.replace(" NVIDIA H100 80GB HBM3", " NVIDIA H100\n80GB HBM3") if line.lstrip("# ")
                .startswith("Rank") else line)
    path = tmp_path / name
    path.write_text("".join(out))
    assert path.read_text().count("\n80GB HBM3\n") == 8
    sweep = checked(path)
    assert sweep["topology"] == "dgx-h100" and "NVIDIA H100 80GB HBM3" in sweep["topology_how"]
    assert [r["bytes"] for r in sweep["rows"]] == [s for s, _, _ in file_rows(name)]


def h20_tables():
    """The 13-field rows of the MOD 8 block by a plain split, in file order: ``node3``'s 12 (1 MiB-2 GiB) come
    first, ``node2``'s 12 after them."""
    rows = [f for f in split_lines(H20_MOD8) if len(f) == 13 and f[0].isdigit()]
    assert len(rows) == 24
    return [[(int(f[0]), float(f[5]), float(f[9])) for f in rows[k:k + 12]] for k in (0, 12)]


def test_the_h20_block_is_read_as_two_single_host_runs():
    res = runner.invoke(app, ["check", str(DATA / H20_MOD8), "--format", "json"])
    assert res.exit_code == 0, res.output
    sweeps = json.loads(res.stdout)["sweeps"]
    lines = [f for f in split_lines(H20_MOD8) if f[:2] == ["#", "Rank"]]
    hosts = [f[f.index("on") + 1] for f in lines]
    assert hosts == ["node3"] * 8 + ["node2"] * 8
    assert {" ".join(f[f.index("device") + 3:]) for f in lines} == {"NVIDIA H20"}
    for sweep, rows in zip(sweeps, h20_tables(), strict=True):
        assert (sweep["op"], sweep["group_size"], sweep["topology"]) == ("all_reduce", 8, "hgx-h20")
        sizes = [s for s, _, _ in rows]
        assert [r["bytes"] for r in sweep["rows"]] == sizes == [1 << k for k in range(20, 32)]
        assert [r["measured_s"] for r in sweep["rows"]] == pytest.approx([t * 1e-6 for _, t, _ in rows])
    assert_within_both_bands(sweeps[0])
    assert max(r["ratio"] for r in sweeps[1]["rows"]) < 0.05  # node2's calls of 21-200 ms, as printed


@pytest.mark.parametrize("stamp", ["Dec 03 15:13:{s:02d} ", "Dec  3 15:13:{s:02d}.123456 ",
                                   "[2025-12-03 15:13:{s:02d}] ", "2025-12-03 15:13:{s:02d},123 ",
                                   "00:00:{s:02d} ", "[00:00:{s:02d}.004] "])
def test_lines_stamped_with_a_time_read_as_the_file(stamp, tmp_path):
    name = PASTED[1]
    lines = (DATA / name).read_text().splitlines(True)
    path = tmp_path / name
    path.write_text("".join(stamp.format(s=k % 60) + line for k, line in enumerate(lines)))
    same_reading(checked(path), checked(DATA / name))


def test_a_dgx_a100_run_on_half_its_gpus_is_read_and_priced_as_the_page_states():
    sweep = check_json(DGX_A100_G4, "--topology", "dgx-a100", "--nccl-version", "2.16.2")
    rows = [f for f in split_lines(DGX_A100_G4) if len(f) == 13 and f[0].isdigit()]
    assert [int(f[0]) for f in rows] == [1 << k for k in range(30, 34)]
    assert {round(2 / (2 - float(f[7]) / float(f[6]))) for f in rows} == {4}  # busbw/algbw = 2(n-1)/n
    assert not any(f[:2] == ["#", "Rank"] for f in split_lines(DGX_A100_G4))
    assert (sweep["op"], sweep["group_size"], sweep["topology"], sweep["nccl_version"]) == \
        ("all_reduce", 4, "dgx-a100", "2.16.2")
    assert_within_both_bands(sweep)
    assert [r["bytes"] for r in sweep["rows"] if r["unsteady"]] == [4 << 30]


def test_an_oci_host_run_of_one_size_is_read_and_priced_with_no_option():
    sweep = check_json(OCI_1NODE)
    lines = [f for f in split_lines(OCI_1NODE) if f[:2] == ["#", "Rank"]]
    assert [int(f[2]) for f in lines] == list(range(8))
    assert {f[f.index("on") + 1] for f in lines} == {"inst-3egdh-ao-ol905"}
    assert {" ".join(f[f.index("device") + 3:]) for f in lines} == {"NVIDIA A100-SXM4-40GB"}
    words = [w for f in split_lines(OCI_1NODE) for w in f]
    code = next(int(w.split("=")[1]) for w in words if w.startswith("nccl-library="))
    assert (code // 10000, code // 100 % 100, code % 100) == (2, 26, 5)
    assert (sweep["op"], sweep["group_size"], sweep["topology"], sweep["nccl_version"]) == \
        ("all_reduce", 8, "dgx-a100", "2.26.5")
    assert [r["bytes"] for r in sweep["rows"]] == [10 << 30]
    assert_within_both_bands(sweep)


@pytest.mark.parametrize("head", ["> ", "[1,0]<stdout>:", "3: "])
def test_a_gpu_name_wrapped_inside_a_quote_or_tag_still_names_the_gpu(head, tmp_path):
    """The same wrapped name in a paste whose every line carries one head (a Markdown quote, Open MPI's
    ``--tag-output``, ``srun -l``): the rest of the name carries it too, and is taken into the name; a
    line with another head is not (tests/test_traces_nccl_tests_wrappers.py)."""
    name = "all_gather_perf-8xH100-1node-nccl2.29.2.txt"
    out = []
    for line in (DATA / name).read_text().splitlines(True):
        line = line.replace(" NVIDIA H100 80GB HBM3", f" NVIDIA H100\n{head}80GB HBM3") \
            if line.lstrip("# ").startswith("Rank") else line
        out.append(head + line)
    path = tmp_path / name
    path.write_text("".join(out))
    assert path.read_text().count(f"\n{head}80GB HBM3\n") == 8
    sweep = checked(path)
    assert sweep["topology"] == "dgx-h100" and "NVIDIA H100 80GB HBM3" in sweep["topology_how"]
    assert [r["bytes"] for r in sweep["rows"]] == [s for s, _, _ in file_rows(name)]
