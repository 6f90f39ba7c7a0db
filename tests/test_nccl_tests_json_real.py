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


@pytest.mark.parametrize(("key", "value", "says"), [
    ("root", "abc", "root 'abc' is not an integer"),  # check raised TypeError comparing it with 0
    ("root", True, "root True is not an integer"),
    ("size", True, "size True / count 16 are not whole numbers"),
    ("count", -4, "size 64 / count -4 are not whole numbers"),
    ("redop", 5, "redop 5 is not a name"),
    ("out_of_place", [1], "out_of_place [1] is not an object"),
])
def test_a_result_of_other_types_than_nccl_tests_writes_is_skipped_naming_it(tmp_path, key, value, says):
    # src/util.cu writes size and count as integers, type and redop as names, root as an integer in a
    # padded string, each side as an object of numbers; the report is one line, so the result is named
    doc = json.loads(REPORT.read_text())
    assert (doc["results"][3]["size"], doc["results"][3]["count"]) == (64, 16)
    doc["results"][3][key] = value
    f = tmp_path / REPORT.name
    f.write_text(json.dumps(doc))
    ts = read_traces(str(f))
    assert len(ts.table) == len(doc["results"]) - 1 and ts.skipped.count == 1
    res = CliRunner().invoke(app, ["trace", "summary", str(f)])
    assert res.exit_code == 0 and f"{f}: result 3: {says}" in res.output, res.output
    res = CliRunner().invoke(app, ["trace", "summary", str(f), "--strict"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith(f"error: {f}: result 3: {says}"), line
