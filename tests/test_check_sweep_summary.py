"""The summary ``check`` closes with on several nccl-tests sweeps (text and Markdown) and gives in JSON
always: a line a sweep (file, op, ranks, hosts, version, topology, rows, ratios, rows within 0.5-2x,
unsteady rows) and the count of sweeps within issue 11's bands. The expected figures are counted from the
files with a plain split (tests/sweep_files.py) and from check's JSON rows, not from the summary's code."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil

import pytest
from sweep_files import DATA, device_lines, file_rows, median_size_ratio
from typer.testing import CliRunner

from zerocalc.cli import app

runner = CliRunner()
#: NVIDIA/nccl-tests issue 309's all-reduce on 2 hosts of 8 H100 (2 unsteady sizes) and a -g 8 NVLS run
DIR_FILES = ["all_reduce_perf-16xH100-2nodes-ib-nccl2.26.2.txt",
             "all_reduce_perf-8xH100-g8-nvls-nccl2.26.2.out"]
#: one host of 8 H100, nccl-tests' all-reduce, all-gather, reduce-scatter, all-to-all and sendrecv in one log
FIVE = "five-tests-8xH100-1node-nccl2.29.2.log"
FIVE_OPS = ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "sendrecv"]


def _dir(tmp_path):
    d = tmp_path / "runs"
    d.mkdir()
    for n in DIR_FILES:
        shutil.copy(DATA / n, d / n)
    return d


def _check(*args):
    res = runner.invoke(app, ["check", *map(str, args)])
    assert res.exit_code == 0, res.output
    return res.stdout


def _in_band(sweep):
    return sum(0.5 <= r["ratio"] <= 2 for r in sweep["rows"])


def _summary_lines(text):
    """The summary's lines a sweep (cells split at two or more spaces) and its closing count line."""
    lines = text.splitlines()
    (at,) = [i for i, ln in enumerate(lines) if ln.startswith("summary of ")]
    assert lines[at + 1].split()[:3] == ["#", "file", "op"]
    body = [re.split(r"\s{2,}", ln.strip()) for ln in lines[at + 2:-1]]
    return body, lines[-1]


def _hosts(name):
    return len({h for h, _ in device_lines(name)})


def test_a_directory_closes_with_a_line_a_file(tmp_path):
    d = _dir(tmp_path)
    sweeps = json.loads(_check(d, "--format", "json"))["sweeps"]
    for name, sweep in zip(DIR_FILES, sweeps, strict=True):  # the rows are the files' own
        assert [r["bytes"] for r in sweep["rows"]] == [s for s, _, _ in file_rows(name)]
        measured = [t * 1e-6 for _, t, _ in file_rows(name)]
        assert [r["measured_s"] for r in sweep["rows"]] == pytest.approx(measured)
    body, count = _summary_lines(_check(d))
    assert len(body) == 2
    for i, (cells, name, sweep) in enumerate(zip(body, DIR_FILES, sweeps, strict=True)):
        rows = file_rows(name)
        unsteady = sum(max(a, b) / min(a, b) > 1.25 for _, a, b in rows)
        ranks = len(device_lines(name))
        assert cells[:8] == [str(i + 1), name, "all_reduce", str(ranks), str(_hosts(name)), "NCCL 2.26.2",
                             "dgx-h100", str(len(rows))]
        assert float(cells[8]) == pytest.approx(median_size_ratio(sweep), abs=5e-4)
        assert cells[11:13] == [f"{_in_band(sweep)}/{len(rows)}", str(unsteady)]
    assert (_hosts(DIR_FILES[0]), _hosts(DIR_FILES[1])) == (2, 1)
    every = sum(_in_band(s) == len(s["rows"]) for s in sweeps)
    median = sum(0.8 <= median_size_ratio(s) <= 1.25 for s in sweeps)
    assert count.startswith(f"{every} of 2 sweeps within 0.5-2x at every size; {median} within 0.8-1.25x at "
                            "the median size")


def test_json_summary_totals_are_the_rows_counts(tmp_path):
    doc = json.loads(_check(_dir(tmp_path), "--format", "json"))
    sweeps, summary = doc["sweeps"], doc["summary"]
    assert [e["index"] for e in summary["sweeps"]] == [0, 1]
    for e, s in zip(summary["sweeps"], sweeps, strict=True):
        ratios = [r["ratio"] for r in s["rows"]]
        assert (e["file"], e["op"], e["group_size"], e["rows"]) == (s["file"], s["op"], s["group_size"],
                                                                   len(s["rows"]))
        assert e["median_size_ratio"] == median_size_ratio(s)
        assert (e["min_ratio"], e["max_ratio"]) == (min(ratios), max(ratios))
        assert e["rows_in_band"] == _in_band(s)
        assert e["unsteady_rows"] == sum(r["unsteady"] for r in s["rows"])
        assert e["every_size_in_band"] == all(0.5 <= x <= 2 for x in ratios)
        assert e["median_size_in_band"] == (0.8 <= median_size_ratio(s) <= 1.25)
    t = summary["totals"]
    assert t["sweeps"] == len(sweeps) == 2
    assert t["rows"] == sum(len(s["rows"]) for s in sweeps) == sum(len(file_rows(n)) for n in DIR_FILES)
    assert t["rows_in_band"] == sum(_in_band(s) for s in sweeps)
    assert t["unsteady_rows"] == sum(r["unsteady"] for s in sweeps for r in s["rows"])
    assert t["every_size_in_band"] == sum(e["every_size_in_band"] for e in summary["sweeps"])
    assert t["median_size_in_band"] == sum(e["median_size_in_band"] for e in summary["sweeps"])
    # the 2-node file's 8 B and 256 B sizes ran 2.8x and 3.6x slower out of place than in place
    assert summary["sweeps"][0]["unsteady_rows"] == 2 and not summary["sweeps"][0]["every_size_in_band"]


def test_one_file_of_several_tests_has_a_summary_line_a_test():
    doc = json.loads(_check(DATA / FIVE, "--format", "json"))
    body, _ = _summary_lines(_check(DATA / FIVE))
    rows = file_rows(FIVE)  # the five tests' tables in turn, 10 sizes each
    # each test prints its own '# Rank' lines, 8 of them
    assert [c[2] for c in body] == FIVE_OPS == [s["op"] for s in doc["sweeps"]]
    assert {c[1] for c in body} == {FIVE} and {c[3] for c in body} == {str(len(device_lines(FIVE)) // 5)}
    assert [c[7] for c in body] == [str(len(rows) // 5)] * 5
    assert [c[11] for c in body] == [f"{_in_band(s)}/{len(s['rows'])}" for s in doc["sweeps"]]
    assert [e["op"] for e in doc["summary"]["sweeps"]] == FIVE_OPS


def test_sweeps_not_priced_count_as_within_neither_band():
    # NCCL 2.6 has no ncclSend / ncclRecv: the log's all-to-all and sendrecv are listed, not priced
    doc = json.loads(_check(DATA / FIVE, "--nccl-version", "2.6.4", "--format", "json"))
    entries = doc["summary"]["sweeps"]
    assert [e["rows"] for e in entries] == [len(s["rows"]) for s in doc["sweeps"]] == [10, 10, 10, 0, 0]
    assert [e["every_size_in_band"] or e["median_size_in_band"] for e in entries][3:] == [False, False]
    assert entries[3]["median_size_ratio"] is None and doc["summary"]["totals"]["priced"] == 3
    body, _ = _summary_lines(_check(DATA / FIVE, "--nccl-version", "2.6.4"))
    assert [c[-1] for c in body][3:] == ["not priced", "not priced"]


def test_markdown_closes_with_the_summary_table(tmp_path):
    d = _dir(tmp_path)
    text = _check(d, "--format", "markdown")
    sweeps = json.loads(_check(d, "--format", "json"))["sweeps"]
    tail = text[text.index("**summary of 2 sweeps**"):].splitlines()
    table = [ln for ln in tail if ln.startswith("| ") and not ln.startswith("| #")]
    assert [ln.split(" | ")[1] for ln in table] == DIR_FILES
    assert [ln.split(" | ")[11] for ln in table] == [f"{_in_band(s)}/{len(s['rows'])}" for s in sweeps]
    both = sum(0.8 <= median_size_ratio(s) <= 1.25 and _in_band(s) == len(s["rows"]) for s in sweeps)
    assert tail[-1].endswith(f"within 0.8-1.25x at the median size; {both} within both")


def test_one_sweep_prints_no_summary_but_its_json_has_one():
    name = DIR_FILES[0]
    for fmt in ("table", "markdown"):
        text = _check(DATA / name, "--format", fmt)
        assert "summary of" not in text and "sweeps within" not in text
    # the sweep's text is the block the directory's output gives it
    assert _check(DATA / name).rstrip("\n").splitlines()[-1].startswith("  ! = the file's out-of-place")
    doc = json.loads(_check(DATA / name, "--format", "json"))
    (e,) = doc["summary"]["sweeps"]
    assert e["rows"] == len(file_rows(name)) and e["hosts"] == _hosts(name)
    assert doc["summary"]["totals"]["sweeps"] == 1


def test_a_directory_s_text_is_its_files_texts_then_the_summary(tmp_path):
    d = _dir(tmp_path)
    alone = [_check(d / n).rstrip("\n") for n in DIR_FILES]
    together = _check(d).rstrip("\n")
    assert together.startswith("\n\n".join(alone) + "\n\nsummary of 2 sweeps")


def test_hosts_are_unknown_where_the_lines_list_some_ranks():
    # OCI's MI300X run prints 4 of its 16 '# Rank' lines (ranks read from its bandwidths)
    name = "all_reduce_perf-16xMI300X-oci-oke-2nodes-1G-16G.txt"
    assert len(device_lines(name)) == 4
    doc = json.loads(_check(DATA / name, "--topology", "amd-mi300x", "--format", "json"))
    (e,) = doc["summary"]["sweeps"]
    assert (e["group_size"], e["hosts"], e["library"]) == (16, None, "RCCL")


def test_csv_stays_a_line_a_size(tmp_path):
    records = list(csv.DictReader(io.StringIO(_check(_dir(tmp_path), "--format", "csv"))))
    assert len(records) == sum(len(file_rows(n)) for n in DIR_FILES)
