"""``check --format csv`` and ``--format markdown`` on nccl-tests sweeps: a CSV line a size (the JSON
contract's field names) and a Markdown table a sweep, held against the rows counted from the file itself
with a plain split (tests/sweep_files.py), not through zerocalc's reader."""

from __future__ import annotations

import csv
import io

import pytest
from sweep_files import DATA, file_rows
from typer.testing import CliRunner

from zerocalc.cli import app

runner = CliRunner()
IB = "all_reduce_perf-16xH100-2nodes-ib-nccl2.26.2.txt"  # NVIDIA/nccl-tests issue 309: 32 sizes, 8 B-16 GiB
TWO_OPS = "all_reduce-alltoall-8xMI355X-oci-g8.txt"  # an all-reduce block, then an all-to-all block
COLUMNS = ["file", "op", "series", "group_size", "library", "nccl_version", "topology", "bytes", "measured_s",
           "predicted_s", "ratio", "algorithm", "protocol", "nccl_s", "in_place_s", "unsteady", "wrong",
           "calibrated"]


def _check(name, fmt):
    res = runner.invoke(app, ["check", str(DATA / name), "--format", fmt])
    assert res.exit_code == 0, res.output
    return res.stdout


def _unsteady(name):
    """Sizes whose out-of-place and in-place times, as the file prints them, differ by more than 1.25x."""
    return {s for s, oop, ip in file_rows(name) if max(oop, ip) / min(oop, ip) > 1.25}


def test_csv_is_a_line_a_size_of_the_files_rows():
    records = list(csv.DictReader(io.StringIO(_check(IB, "csv"))))
    assert list(records[0]) == COLUMNS
    rows = file_rows(IB)
    assert len(rows) == 32 and len(records) == 32
    assert [int(r["bytes"]) for r in records] == [s for s, _, _ in rows]
    assert [float(r["measured_s"]) for r in records] == pytest.approx([t * 1e-6 for _, t, _ in rows])
    assert [float(r["in_place_s"]) for r in records] == pytest.approx([t * 1e-6 for _, _, t in rows])
    for r in records:
        assert (r["op"], r["group_size"], r["nccl_version"]) == ("all_reduce", "16", "2.26.2")
        assert r["library"] == "NCCL"
        assert float(r["ratio"]) == pytest.approx(float(r["predicted_s"]) / float(r["measured_s"]))
    assert {int(r["bytes"]) for r in records if r["unsteady"] == "True"} == _unsteady(IB) == {8, 256}


def test_csv_holds_every_sweep_of_a_file():
    records = list(csv.DictReader(io.StringIO(_check(TWO_OPS, "csv"))))
    rows = file_rows(TWO_OPS)
    assert [(r["op"], int(r["bytes"])) for r in records] == (
        [("all_reduce", s) for s, _, _ in rows[:len(rows) // 2]]
        + [("all_to_all", s) for s, _, _ in rows[len(rows) // 2:]])
    assert {r["library"] for r in records} == {"RCCL"}


def test_markdown_is_a_table_a_sweep():
    text = _check(IB, "markdown")
    table = [ln for ln in text.splitlines() if ln.startswith("| ") and not ln.startswith("| size")]
    rows = file_rows(IB)
    assert len(table) == len(rows)
    assert table[0].startswith("| 8 B | 68.5 µs |") and table[-1].startswith("| 17.18 GB | 68.7 ms |")
    marked = [s for (s, _, _), ln in zip(rows, table, strict=True) if "! out-of-place" in ln]
    assert set(marked) == _unsteady(IB)
    assert text.startswith(f"**{DATA / IB}**: all_reduce on 16 ranks, NCCL 2.26.2, topology dgx-h100")
    assert "ratio (predicted / measured): min" in text and "at the median size" in text


def test_an_unknown_format_is_still_refused():
    res = runner.invoke(app, ["check", str(DATA / IB), "--format", "latex"])
    assert res.exit_code == 2 and "--format" in res.output and "Traceback" not in res.output
