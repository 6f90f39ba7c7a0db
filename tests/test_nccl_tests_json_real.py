"""A real nccl-tests ``-J`` JSON report beside the text of the same run (nccl-tests 2.19.6, NCCL 2.28.9,
one H200; tests/data/traces/README.md): the report is read as the text is. Expected values are read off
the files themselves: the report's fields with :mod:`json`, the text's columns by splitting its rows."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.traces import read_traces

TESTS = Path(__file__).parent / "data" / "traces" / "nccl-tests"
REPORT = TESTS / "all_reduce_perf-1xH200-g1-nccl2.28.9.json"
TEXT = TESTS / "all_reduce_perf-1xH200-g1-nccl2.28.9.txt"


def _text_rows() -> list[tuple[int, float, float]]:
    """(size, out-of-place µs, in-place µs) of each result row of the text: 13 columns, the size first."""
    rows = []
    for line in TEXT.read_text().splitlines():
        f = line.split()
        if len(f) == 13 and f[0].isdigit():
            rows.append((int(f[0]), float(f[5]), float(f[9])))
    return rows


def test_the_report_and_the_text_of_one_run_give_the_same_rows():
    doc = json.loads(REPORT.read_text())
    assert doc["version"] == 3 and doc["nccl_version"] == 22809 and len(doc["results"]) == 25
    want = _text_rows()
    assert [r["size"] for r in doc["results"]] == [s for s, _, _ in want] == [8 << k for k in range(25)]
    report, text = read_traces(REPORT).table, read_traces(TEXT).table
    assert list(report["size_bytes"]) == list(text["size_bytes"]) == [s for s, _, _ in want]
    # the report keeps the times the text prints rounded (%7.2f below 10 ms, µs)
    times = [r["out_of_place"]["time"] * 1e-6 for r in doc["results"]]
    assert list(report["duration_s"]) == pytest.approx(times)
    for got, (_, oop, ip) in zip(text.itertuples(), want, strict=True):
        assert got.duration_s == pytest.approx(oop * 1e-6)
        assert got.inplace_duration_s == pytest.approx(ip * 1e-6)
    for a, b in zip(report["duration_s"], text["duration_s"], strict=True):
        assert abs(a - b) <= 0.005e-6 + 1e-15  # the text's two decimals of a microsecond
    assert set(report["op"]) == set(text["op"]) == {"all_reduce"} and set(report["dtype"]) == {"fp32"}


def test_the_report_states_the_library_that_ran_not_the_images_package():
    # its env keeps the image's NCCL_VERSION=2.28.3-1; the library that ran is nccl_version 22809
    doc = json.loads(REPORT.read_text())
    assert "NCCL_VERSION=2.28.3-1" in doc["env"]
    for path in (REPORT, TEXT):
        (run,) = read_traces(path).meta[str(path)]["runs"]
        assert run["nccl_version"] == "2.28.9" and run["group_size"] == 1
        assert run["gpus"] == {"NVIDIA H200": 1}


def test_one_rank_report_is_refused_by_check_in_one_line():
    res = CliRunner().invoke(app, ["check", str(REPORT)])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1
    assert "one rank (the JSON report's devices" in res.output
