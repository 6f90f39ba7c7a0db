"""nccl-tests outputs as users post them: quoted in a Markdown reply, two processes' runs interleaved in
one output, a run started again under one header, and a gather run with a linear step across hosts.

Expected values are counted from the bundled files (tests/data/traces/README.md) by a plain split, not
through zerocalc's reader.
"""

import json

import pytest
from typer.testing import CliRunner

from tests.sweep_files import DATA, check_json, median_size_ratio
from zerocalc.cli import app

runner = CliRunner()
QUOTED = "all_reduce_perf-4xRTX5090-g4-quoted.txt"
TWO_PROCESSES = "all_reduce_perf-2x8xH20-g8-two-processes-interleaved.txt"
GATHER = "gather_perf-2xA100-PCIe-2nodes-roce-stepbytes-nccl2.16.5.txt"


def rows_past(name, mark=""):
    """(size, out-of-place µs) of each result row in file order, ``mark`` (a Markdown quote's ``>``)
    taken off the front of each line first."""
    out = []
    for line in (DATA / name).read_text().splitlines():
        f = line.split()
        if mark and f[:1] == [mark]:
            f = f[1:]
        if len(f) >= 13 and f[0].isdigit() and f[1].isdigit():
            out.append((int(f[0]), float(f[5])))
    return out


def sweeps(name, *args):
    res = runner.invoke(app, ["check", str(DATA / name), "--format", "json", *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["sweeps"]


def test_a_run_quoted_in_a_markdown_reply_is_read_as_posted():
    """GitHub's '> ' quote marks in front of every line (NVIDIA/nccl-tests issue 287, a reply quoting the
    run): the rows, the four '# Rank' lines and the -g 4 of the line they quote."""
    counted = rows_past(QUOTED, ">")
    assert len(counted) == 25
    (sweep,) = sweeps(QUOTED)
    assert sweep["op"] == "all_reduce"
    assert sweep["group_size"] == sum(line.startswith(">") and "#  Rank" in line
                                      for line in (DATA / QUOTED).read_text().splitlines()) == 4
    assert [r["bytes"] for r in sweep["rows"]] == [s for s, _ in counted]
    assert [r["measured_s"] for r in sweep["rows"]] == pytest.approx([t * 1e-6 for _, t in counted])


def test_two_processes_runs_interleaved_are_two_sweeps_each_rising_once():
    """nccl-tests built without MPI=1 and started on two hosts (NVIDIA/nccl-tests issue 306): each process
    prints its own 8-GPU run; the second one's header fell among the first one's rows, its rows came after
    the first one's summary. Each run is one sweep of the file's 12 sizes, no size read twice: the first
    12 rows of the file are the first process's, the last 12 the second's."""
    counted = rows_past(TWO_PROCESSES)
    assert len(counted) == 24
    first, second = sweeps(TWO_PROCESSES)
    for sweep, part in ((first, counted[:12]), (second, counted[12:])):
        assert sweep["op"] == "all_reduce" and sweep["group_size"] == 8
        assert [r["bytes"] for r in sweep["rows"]] == [s for s, _ in part] == sorted({s for s, _ in counted})
        assert [r["measured_s"] for r in sweep["rows"]] == pytest.approx([t * 1e-6 for _, t in part])


def test_a_run_that_starts_again_under_one_header_is_a_second_sweep(tmp_path):
    """The quoted run's rows printed twice under its one header, as nccl-tests' -N 2 (run cycles) prints
    them: two sweeps of the same sizes, not one with each size twice."""
    lines = (DATA / QUOTED).read_text().splitlines(keepends=True)
    body = [ln for ln in lines if ln.split()[1:2] and ln.split()[1].isdigit()]
    at = lines.index(body[-1]) + 1
    f = tmp_path / "all_reduce_perf-cycles.txt"
    f.write_text("".join(lines[:at] + body + lines[at:]))
    counted = rows_past(QUOTED, ">")
    one, two = sweeps(str(f))
    assert [r["bytes"] for r in one["rows"]] == [r["bytes"] for r in two["rows"]] == [s for s, _ in counted]


def test_a_gather_with_a_linear_step_across_two_hosts_is_read_and_priced():
    """gather_perf -b 128M -e 12G --stepbytes 128M on two hosts of one A100 PCIe each (issue 350), NCCL INFO
    lines between the header and the rows: each size as printed, 2 ranks by the file's '# Rank' lines and
    by size / count (nccl-tests prints gather's total bytes and one rank's count), priced within the
    acceptance bands."""
    sweep = check_json(GATHER)
    assert sweep["op"] == "gather"
    sizes = [r["bytes"] for r in sweep["rows"]]
    assert {b - a for a, b in zip(sizes, sizes[1:], strict=False)} == {sizes[0]}  # the file's linear step
    assert sweep["group_size"] == sizes[0] // (16777216 * 4) == 2
    assert all(0.5 <= r["ratio"] <= 2 for r in sweep["rows"])
    assert 0.8 <= median_size_ratio(sweep) <= 1.25


def test_two_runs_printed_row_by_row_in_turn_each_keep_their_rows(tmp_path):
    """The two processes' rows of the H20 file printed alternately under one header (as two processes'
    rows come out in NVIDIA/nccl-tests issue 182's post: 8 … 256, then 8, 512, 16, 1024, …): each row
    goes to the run whose sizes it carries on, two sweeps as the file's two runs."""
    lines = (DATA / TWO_PROCESSES).read_text().splitlines(keepends=True)
    body = [ln for ln in lines if ln.split()[:1] and ln.split()[0].isdigit()]
    first, second = body[:12], body[12:]
    head = [ln for ln in lines[:lines.index(body[0])] if ln.startswith("#")]
    f = tmp_path / "all_reduce_perf-in-turn.txt"
    f.write_text("".join(head + [row for pair in zip(first, second, strict=True) for row in pair]))
    counted = rows_past(TWO_PROCESSES)
    one, two = sweeps(str(f))
    for sweep, part in ((one, counted[:12]), (two, counted[12:])):
        assert [r["measured_s"] for r in sweep["rows"]] == pytest.approx([t * 1e-6 for _, t in part])


def test_rows_of_size_zero_repeat_without_starting_the_run_again():
    """nccl-tests -b 1 prints a row of size 0 for each size its type rounds to nothing (SuperBench's
    all_gather log: 1-16 B of float over 8 ranks): those repeat, yet the table is one run."""
    from zerocalc.traces.nccl_tests import parse

    name = "all_gather_perf-8xA100-SXM4-40GB-g8-superbench.txt"
    counted = [int(f[0]) for f in map(str.split, (DATA / name).read_text().splitlines())
               if len(f) >= 3 and f[0].isdigit() and f[1].isdigit()]
    assert counted.count(0) > 1
    with open(DATA / name) as f:
        rows = parse(f, name).rows
    assert len(rows) == len(counted) and {r["run"] for r in rows} == {0}
