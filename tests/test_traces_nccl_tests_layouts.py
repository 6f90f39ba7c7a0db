"""nccl-tests outputs as people paste them: launcher prefixes, several runs in one file, pre-2022
layouts with N/A cells, a table whose header does not fit its rows, and rows without a header.

Every expected value is read off the files in tests/data/traces/nccl-tests/ (see README.md there).
"""

import csv
import io
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.errors import TraceFormatError
from zerocalc.traces import read_traces
from zerocalc.traces.detect import detect_format
from zerocalc.traces.nccl_tests import complete, nccl_version_from_code, strip_prefix

DATA = Path(__file__).parent / "data" / "traces"
TESTS = DATA / "nccl-tests"
runner = CliRunner()


def _from(path: Path, first: bytes) -> bytes:
    """The file from its first line that starts with ``first`` (past the lines naming its source)."""
    data = path.read_bytes()
    at = data.find(b"\n" + first)
    assert at >= 0
    return data[at + 1:]


@pytest.mark.parametrize(("path", "fmt", "first"), [
    (TESTS / "all_reduce_perf-tag-output-p5-excerpt.txt", "nccl_tests", b"[1,0]<stdout>:"),
    (TESTS / "tag-output-allreduce-allgather-2ranks.txt", "nccl_tests", b"Authorization"),
    (TESTS / "broadcast_perf-pre2022-NA-2ranks.txt", "nccl_tests", b"(base) "),
    (TESTS / "p4dn-table-extra-column.txt", "nccl_tests", b"       "),
    (DATA / "deepspeed-comms" / "tutorial-examples.txt", "deepspeed_comms", b"## Verbose"),
])
def test_detection_looks_past_prefixes(path, fmt, first):
    # the text from a line whose first character is not '#' (a '[' prefix, a prompt, a column)
    assert detect_format(_from(path, first), str(path)) == fmt


def test_json_array_still_json():
    assert detect_format(b'[\n {"ph": "X", "name": "x"}]') == "kineto"
    assert detect_format(b"[]") == "kineto"


def test_strip_prefix_forms():
    # forms seen in the files above and in NCCL logs under launchers
    assert strip_prefix("[1,0]<stdout>:#  Rank  0 Group  0").startswith("#  Rank")
    assert strip_prefix("[0]     62.05    0.00").lstrip().startswith("62.05")
    assert strip_prefix("(base) gandiva@v100-gpu-1:~/nccl-tests$ mpirun").startswith("gandiva@")
    assert strip_prefix("   1   1073741824").split()[0] == "1"  # a number is a column, not a prefix


def test_tag_output_two_runs():
    path = TESTS / "tag-output-allreduce-allgather-2ranks.txt"
    ts = read_traces(path)
    t, runs = ts.table, ts.meta[str(path)]["runs"]
    # two '# Collective test starting' runs, 8 result rows each, 2 '#  Rank' lines each
    assert [(r["op"], r["group_size"], r["rows"], r["line"]) for r in runs] == [
        ("all_reduce", 2, 8, 12), ("all_gather", 2, 8, 45)]
    # '# nccl-tests version 2.18.0 nccl-headers=22907 nccl-library=22907'
    assert {r["nccl_version"] for r in runs} == {"2.29.7"}
    assert {r["nccl_tests_version"] for r in runs} == {"2.18.0"}
    assert list(t["run"]) == [0] * 8 + [1] * 8 and set(t["nccl_version"]) == {"2.29.7"}
    # first rows of each run, by hand
    first = t.iloc[0]
    assert (first["size_bytes"], first["count"]) == (1048576, 262144)
    assert first["duration_s"] == pytest.approx(4366.46e-6)
    ag = t[t["run"] == 1].iloc[0]  # "1048576  131072  float  none  -1  2191.72 ..."
    assert (ag["op"], ag["in_nelems"], ag["out_nelems"]) == ("all_gather", 131072, 262144)
    for r in t.itertuples():  # nccl-tests doc/PERFORMANCE.md: busbw = algbw × 2(p-1)/p or (p-1)/p, p = 2
        factor = 1.0 if r.op == "all_reduce" else 0.5
        assert r.size_bytes / r.duration_s / 1e9 * factor == pytest.approx(r.busbw_GBps, abs=0.0051)
    assert ts.skipped.count == 0


def test_pre2022_broadcast_by_its_header_with_na_cells():
    path = TESTS / "broadcast_perf-pre2022-NA-2ranks.txt"
    ts = read_traces(path)
    (row,) = ts.table.itertuples()
    # "8  2  float  0  45.82  0.00  0.00  N/A  38.17  0.00  0.00  N/A" under "size count type root time ..."
    assert (row.op, row.layout, row.root, row.redop, row.size_bytes, row.count) == (
        "broadcast", "pre2022-root", 0, None, 8, 2)
    assert row.duration_s == pytest.approx(45.82e-6) and row.inplace_duration_s == pytest.approx(38.17e-6)
    assert row.wrong is None or row.wrong != row.wrong  # N/A: missing, not 0
    run = ts.meta[str(path)]["runs"][0]
    # '#   Rank  0 Pid ...' (pre-2022 form, no Group) × 2; 'NCCL version 2.9.6+cuda11.2'
    assert (run["group_size"], run["nccl_version"]) == (2, "2.9.6")


def test_rows_that_do_not_fit_their_header_are_refused():
    path = TESTS / "p4dn-table-extra-column.txt"
    ts = read_traces(path)
    assert ts.table.empty and ts.skipped.count == 4  # four p4dn rows, none read shifted
    assert "p4dn" in ts.skipped.examples[0][2]
    with pytest.raises(TraceFormatError) as exc:
        read_traces(path, strict=True)
    assert (exc.value.line, Path(exc.value.file).name) == (7, path.name)
    out = runner.invoke(app, ["trace", "summary", "--strict", str(path)])
    assert out.exit_code == 2 and f"{path}:7:" in out.output


def test_rows_without_header_name_what_is_missing_and_take_options():
    path = TESTS / "rows-only-pre2022-allreduce-p4d.txt"
    ts = read_traces(path)
    # 12 rows: 64 B .. 128 KiB, one lead cell (redop sum) and size = count x 4: before Aug 2022 only
    # all_reduce prints such rows (nccl-tests 8274cb4, src/*.cu print_line_header); the ranks stay untold
    assert len(ts.table) == 12 and set(ts.table["op"]) == {"all_reduce"}
    assert ts.meta[str(path)]["runs"][0]["missing"] == ["ranks"]
    done = complete(ts.table, op="all_reduce", ranks=32)
    assert set(done["op"]) == {"all_reduce"} and set(done["group_size"]) == {32}
    assert list(done["in_nelems"]) == list(ts.table["count"])  # all_reduce: count elements in
    out = runner.invoke(app, ["fit", str(path)])
    assert out.exit_code == 2 and "--ranks" in out.output
    assert "no timed collectives" not in out.output
    out = runner.invoke(app, ["fit", str(path), "--op", "all_reduce", "--ranks", "32"])
    assert out.exit_code == 0 and "all_reduce on 32 ranks, 12 sizes" in out.output


def test_fit_fits_each_run_apart():
    path = TESTS / "tag-output-allreduce-allgather-2ranks.txt"
    out = runner.invoke(app, ["fit", str(path), "--format", "csv", "--trace-format", "nccl_tests"])
    assert out.exit_code == 0, out.output
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    assert [(r["op"], r["group_size"], r["run"], r["nccl_version"]) for r in rows] == [
        ("all_reduce", "2", "0", "2.29.7"), ("all_gather", "2", "1", "2.29.7")]


def test_version_codes():
    # NCCL src/nccl.h.in: NCCL_VERSION(X,Y,Z) = X*10000+Y*100+Z since 2.9, X*1000+Y*100+Z before
    assert nccl_version_from_code(22907) == "2.29.7"
    assert nccl_version_from_code(2708) == "2.7.8"
    assert nccl_version_from_code(21803) == "2.18.3"


def test_check_against_nccl_model_takes_each_run_apart():
    # nccl-tests sweeps compared with NCCL's cost model: one comparison per run of the file
    path = TESTS / "tag-output-allreduce-allgather-2ranks.txt"
    out = runner.invoke(app, ["check", "--topology", "dgx-h100", "--format", "json", str(path)])
    assert out.exit_code == 0, out.output
    import json

    sweeps = json.loads(out.stdout)["sweeps"]
    assert [(s["op"], s["group_size"], s["nccl_version"], len(s["rows"])) for s in sweeps] == [
        ("all_reduce", 2, "2.29.7", 8), ("all_gather", 2, "2.29.7", 8)]


def test_fit_says_what_it_cannot_fit_and_fits_the_rest():
    # the broadcast excerpt holds one size (8 B): nothing to fit; the 16-rank sweep has 31 sizes
    one = TESTS / "broadcast_perf-pre2022-NA-2ranks.txt"
    sweep = TESTS / "all_reduce_perf-16xH100-2nodes.txt"
    out = runner.invoke(app, ["fit", str(sweep), str(one), "--format", "csv"])
    assert out.exit_code == 0, out.output
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    assert [(r["op"], r["group_size"], r["n_sizes"]) for r in rows] == [("all_reduce", "16", "31")]
    assert f"skipped: {one}: nothing to fit" in out.stderr and "two sizes" in out.stderr
    out = runner.invoke(app, ["fit", str(one)])
    assert out.exit_code == 2 and "nothing to fit" in out.output
