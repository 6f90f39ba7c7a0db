"""nccl-tests tables pasted as Markdown (``| size | count | type | … |`` over ``|---|``), and outputs whose
every line a logging library or launcher heads (``[TIME] [INFO] ``, ``TIME,ms - INFO - ``, ``INFO MM-DD
TIME ``). The bundled table's rows are counted from the file by a plain split on ``|``; the class cases'
from the lines the tests write; a wrapped output's from the bundled file without the wrapper."""

import io
import json

import pytest
from typer.testing import CliRunner

from tests.sweep_files import DATA, device_lines, file_rows, median_size_ratio
from zerocalc.cli import app
from zerocalc.errors import TraceFormatError
from zerocalc.traces.detect import detect_format
from zerocalc.traces.nccl_tests import parse

runner = CliRunner()
GB300 = "all_reduce_perf-72xGB300-nvl72-18trays-markdown-table.txt"
PLAIN = "all_gather_perf-8xH100-1node-nccl2.29.2.txt"


def markdown_rows(name):
    """(size cell, count, out-of-place µs, in-place µs) of each body row of the file's Markdown table: the
    lines opening with ``|`` whose second cell is a whole number, by a plain split on ``|``."""
    rows = []
    for line in (DATA / name).read_text().splitlines():
        f = [c.strip() for c in line.split("|")[1:-1]]
        if len(f) >= 12 and f[1].isdigit():
            rows.append((f[0], int(f[1]), float(f[4]), float(f[8])))
    return rows


def test_bundled_gb300_table_reads_its_rows_and_ranks():
    res = runner.invoke(app, ["check", str(DATA / GB300), "--format", "json", "--topology", "gb300-nvl72"])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    rows = markdown_rows(GB300)
    assert len(rows) == 5
    # size (GB) of float counts: count × 4 bytes, the binary GB (2^30) the count fits, not 10^9
    assert [r["bytes"] for r in sweep["rows"]] == [c * 4 for _, c, _, _ in rows]
    assert [r["bytes"] for r in sweep["rows"]] == [int(s) << 30 for s, _, _, _ in rows]
    assert [r["measured_s"] for r in sweep["rows"]] == pytest.approx([t * 1e-6 for _, _, t, _ in rows])
    # mpirun -H over 18 trays (…tray{01..18}-f3:4), 4 ranks each: 72
    assert (sweep["op"], sweep["group_size"]) == ("all_reduce", 18 * 4)
    assert all(0.5 <= r["ratio"] <= 2 for r in sweep["rows"])
    assert 0.8 <= median_size_ratio(sweep) <= 1.25


def _read(text, name="all_reduce_perf.md", strict=False):
    return parse(io.StringIO(text), name, strict=strict)


HEAD_2022 = ("| size | count | type | redop | root | time | algbw | busbw | #wrong | time | algbw | busbw "
             "| #wrong |")
ROW_2022 = "| 1048576 | 262144 | float | sum | -1 | 12.34 | 84.97 | 159.33 | 0 | 12.20 | 85.94 | 161.14 | 0 |"


@pytest.mark.parametrize("delim", ["|---|---|---|---|---|---|---|---|---|---|---|---|---|",
                                   "| --- " * 13 + "|",
                                   "|:---|:---:|---:|:-|-|-|-|-|-|-|-|-|-|",
                                   "|--|--|--|--|--|--|--|--|--|--|--|--|--"])
def test_2022_layout_under_each_delimiter_row(delim):
    second = ROW_2022.replace("1048576 | 262144", "2097152 | 524288")
    res = _read(f"{HEAD_2022}\n{delim}\n{ROW_2022}\n{second}\n")
    assert [(r["size_bytes"], r["count"], r["redop"], r["root"]) for r in res.rows] == [
        (1048576, 262144, "sum", -1), (2097152, 524288, "sum", -1)]
    assert res.rows[0]["duration_s"] == pytest.approx(12.34e-6)
    assert res.rows[0]["inplace_duration_s"] == pytest.approx(12.20e-6)
    assert res.rows[0]["layout"] == "2022" and res.rows[0]["op"] == "all_reduce"


def test_older_layouts_read_as_their_text_headers():
    gather = ("| size | count | type | time | algbw | busbw | #wrong | time | algbw | busbw | #wrong |\n"
              "|-|-|-|-|-|-|-|-|-|-|-|\n"
              "| 65536 | 2048 | float | 20.1 | 3.26 | 2.86 | 0 | 19.8 | 3.31 | 2.90 | 0 |\n")
    res = _read(gather, "all_gather_perf.md")
    assert (res.rows[0]["layout"], res.rows[0]["op"], res.rows[0]["group_size"]) == ("2022", "all_gather", 8)
    pre = ("| size | count | type | redop | time | algbw | busbw | error | time | algbw | busbw | error |\n"
           "|-|-|-|-|-|-|-|-|-|-|-|-|\n"
           "| 8 | 2 | float | sum | 30.5 | 0.00 | 0.00 | 0e+00 | 30.1 | 0.00 | 0.00 | 0e+00 |\n")
    assert _read(pre).rows[0]["layout"] == "pre2022-redop"


def test_units_in_the_header_are_honoured():
    text = ("| size (KiB) | count (elements) | type | redop | root | time (ms) | algbw (MB/s) | busbw (MB/s) "
            "| #wrong | time (ms) | algbw (MB/s) | busbw (MB/s) | #wrong |\n" + "|---" * 13 + "|\n"
            "| 1024 | 262144 | float | sum | -1 | 1.5 | 699.05 | 1223.3 | 0 | 1.4 | 748.98 | 1310.7 | 0 |\n")
    (row,) = _read(text).rows
    assert row["size_bytes"] == 1024 * 1024
    assert row["duration_s"] == pytest.approx(1.5e-3)
    assert row["algbw_GBps"] == pytest.approx(0.69905)


def test_nccl_tests_units_row_under_the_header():
    text = (f"{HEAD_2022}\n" + "|-" * 13 + "|\n"
            "| (B) | (elements) | | | | (ms) | (GB/s) | (GB/s) | | (ms) | (GB/s) | (GB/s) | |\n"
            "| 1048576 | 262144 | float | sum | -1 | 2.5 | 0.42 | 0.73 | 0 | 2.4 | 0.44 | 0.76 | 0 |\n")
    (row,) = _read(text).rows
    assert row["duration_s"] == pytest.approx(2.5e-3)


@pytest.mark.parametrize("unit,size,ok", [("GB", "1", 1 << 30), ("MB", "1", 1 << 20),
                                         ("B", "1048576", 1 << 20)])
def test_decimal_looking_size_unit_resolved_by_the_count(unit, size, ok):
    count = ok // 4
    text = (f"| size ({unit}) | count | type | redop | time | algbw | busbw | #wrong |\n" + "|-" * 8 + "|\n"
            f"| {size} | {count} | float | sum | 100.0 | 1.0 | 1.0 | 0 |\n")
    (row,) = _read(text).rows
    assert row["size_bytes"] == ok


def test_unknown_unit_is_refused_naming_it():
    text = (f"{HEAD_2022.replace('| time |', '| time (cycles) |', 1)}\n" + "|-" * 13 + f"|\n{ROW_2022}\n")
    res = _read(text)
    assert res.rows == []
    (example,) = res.skipped.examples
    assert example[1] == 3 and "'cycles'" in example[2]
    with pytest.raises(TraceFormatError, match=r"all_reduce_perf\.md:3: .*cycles"):
        _read(text, strict=True)


def test_size_that_fits_neither_step_is_refused():
    text = ("| size (MB) | count | type | redop | time | algbw | busbw | #wrong |\n" + "|-" * 8 + "|\n"
            "| 3 | 7 | float | sum | 100.0 | 1.0 | 1.0 | 0 |\n")
    res = _read(text)
    assert res.rows == [] and "neither fits" in res.skipped.examples[0][2]


def test_table_cut_to_one_side():
    oop = ("| Size | Count | Type | Out-of-place time (us) | Out-of-place algbw (GB/s) "
           "| Out-of-place busbw (GB/s) |\n"
           "|---|---|---|---|---|---|\n| 8 MiB | 2,097,152 | float | 906.10 | 9.26 | 9.26 |\n")
    (row,) = _read(oop).rows
    assert (row["size_bytes"], row["count"]) == (8 << 20, 2097152)
    assert row["layout"].endswith("-oop") and row["inplace_duration_s"] is None
    assert row["duration_s"] == pytest.approx(906.10e-6)
    bare = oop.replace("Out-of-place ", "")  # unlabelled: the text's one group (rccl-tests -O 0, in place)
    (row,) = _read(bare).rows
    assert row["layout"].endswith("-inplace") and row["duration_s"] == pytest.approx(906.10e-6)


def test_escaped_pipe_stays_in_its_cell_and_trailing_spaces():
    text = (f"{HEAD_2022}   \n" + "|-" * 13 + "|  \n"
            "| 1048576 | 262144 | float | sum | -1 | 12.34 | 84.97 | 159.33 | 0 | 12.20 | 85.94 | 161.14 "
            "| 0   \n"
            "| 2097152 | 524288 | float | sum | -1 | 20.0 | 1 \\| 2 | 159.33 | 0 | 12.20 | 85.94 | 161.14 "
            "| 0 |\n")
    res = _read(text)
    assert [r["size_bytes"] for r in res.rows] == [1048576]  # no trailing pipe: still its 13 cells
    assert res.skipped.examples[0][1] == 4 and "algbw '1 | 2' is not a number" in res.skipped.examples[0][2]


def test_row_that_does_not_fit_its_header_is_refused_with_its_line():
    text = (f"intro\n\n{HEAD_2022}\n" + "|-" * 13 + f"|\n{ROW_2022}\n"
            "| 2097152 | 524288 | float | sum | 20.0 | 1.0 |\n")
    res = _read(text)
    assert len(res.rows) == 1
    (_, line, reason), = res.skipped.examples
    assert line == 6 and "row has 6 cells, the header (line 3) has 13" in reason


def test_markdown_tables_of_other_columns_are_not_sweeps():
    summary = "| GPUs | busbw (GB/s) |\n|---|---|\n| 8 | 476.3 |\n| 16 | 380.1 |\n"
    with pytest.raises(TraceFormatError, match="unrecognised"):
        detect_format(summary.encode())
    cut = ("| Size | Time (us) | AlgBW (GB/s) | BusBW (GB/s) |\n|---|---|---|---|\n"
           "| 134217728 | 588.33 | 228.13 | 399.23 |\n")
    with pytest.raises(TraceFormatError, match="unrecognised"):
        detect_format(cut.encode())
    text = (DATA / PLAIN).read_text() + "\n" + summary  # beside a text sweep: its rows only
    assert [r["size_bytes"] for r in _read(text, PLAIN).rows] == [s for s, _, _ in file_rows(PLAIN)]


def test_hash_lines_around_the_table_give_its_run_facts():
    text = ("```\n# nccl-tests version 2.17.6 nccl-headers=22703 nccl-library=22703\n"
            "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 2097152 step: 2(factor) warmup iters: 5 "
            "iters: 20\n"
            "#\n# Using devices\n"
            "#  Rank  0 Group  0 Pid  11 on node-a device  0 [0000:18:00] NVIDIA H100 80GB HBM3\n"
            "#  Rank  1 Group  0 Pid  12 on node-a device  1 [0000:2a:00] NVIDIA H100 80GB HBM3\n```\n\n"
            f"{HEAD_2022}\n" + "|-" * 13 + f"|\n{ROW_2022}\n\n```\n# Avg bus bandwidth    : 159.33\n```\n")
    assert detect_format(text.encode()) == "nccl_tests"
    res = _read(text)
    (run,) = res.meta["runs"]
    assert run["nccl_version"] == "2.27.3"  # nccl-library=22703
    assert (run["gpus"], run["hosts"]) == ({"NVIDIA H100 80GB HBM3": 2}, {"node-a": 2})
    assert res.rows[0]["group_size"] == 2


@pytest.mark.parametrize("head", ["[2025-03-01 12:00:01] [INFO] ", "2025-03-01 12:00:01,123 - INFO - ",
                                  "INFO 03-01 12:00:01 ", "INFO 03-01 12:00:01 [launch.py:42] ",
                                  "2025-03-01 12:00:01,123 INFO ", "[2025-03-01 12:00:01,123] INFO - ",
                                  "[2025-03-01T12:00:01Z INFO] ", "[INFO 2025-03-01 12:00:01] ",
                                  "2025-03-01 12:00:01.123 | INFO     | __main__:run:12 - ",
                                  "bench.nccl - INFO - ", "I0301 12:00:01.123456 12345 run.py:42] ",
                                  "2025/03/01 12:00:01 ", "WARNING: "])
def test_logging_heads_are_looked_past(tmp_path, head):
    path = tmp_path / PLAIN
    path.write_text("".join(head + line for line in (DATA / PLAIN).read_text().splitlines(keepends=True)))
    res = runner.invoke(app, ["check", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    rows = file_rows(PLAIN)
    assert [r["bytes"] for r in sweep["rows"]] == [s for s, _, _ in rows]
    assert [r["measured_s"] for r in sweep["rows"]] == pytest.approx([t * 1e-6 for _, t, _ in rows])
    assert sweep["group_size"] == len(device_lines(PLAIN))


def test_logging_head_before_a_markdown_table():
    lines = (HEAD_2022, "|-" * 13 + "|", ROW_2022)
    text = "".join(f"[2025-03-01 12:00:01] [INFO] {line}\n" for line in lines)
    assert [r["size_bytes"] for r in _read(text).rows] == [1048576]


#: nccl-tests' text headers and a row under each (2022 and later, 2.19's per-iteration columns, -S's
#: timestamp, the 2019-2022 per-test lead columns with 'error', v1's 'bytes N type' in milliseconds).
LAYOUTS = {
    "all_reduce_perf": (
        "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong",
        "1048576  262144  float  sum  -1  12.34  84.97  159.33  0  12.20  85.94  161.14  0"),
    "all_gather_perf": (
        "#  size  count  type  redop  root  time  algbw  busbw  #wrong  i_min  i_max  i_p99  i_cv%"
        "  time  algbw  busbw  #wrong  i_min  i_max  i_p99  i_cv%",
        "65536  2048  float  none  -1  20.1  3.26  2.86  0  19.0  22.0  21.5  3.1  19.8  3.31  2.90"
        "  0  18.9  21.7  21.0  2.9"),
    "broadcast_perf": (
        "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong"
        "  timestamp",
        "8192  2048  float  none  0  9.10  0.90  0.90  0  9.00  0.91  0.91  0  2024-05-01  10:00:00"),
    "reduce_perf": (
        "#  size  count  type  redop  root  time  algbw  busbw  error  time  algbw  busbw  error",
        "4096  1024  float  sum  0  10.5  0.39  0.39  0e+00  10.2  0.40  0.40  0e+00"),
    "sendrecv_perf": (
        "#  bytes  N  type  time  algbw  busbw  res  time  algbw  busbw  res",
        "1048576  262144  float  0.123  8.52  8.52  0e+00  0.121  8.67  8.67  0e+00"),
}


def _as_markdown(head, row):
    words = head.split()[1:]
    cells = row.split()
    if words[-1] == "timestamp":
        cells = [*cells[:-2], " ".join(cells[-2:])]
    return ("| " + " | ".join(words) + " |\n" + "|---" * len(words) + "|\n"
            + "| " + " | ".join(cells) + " |\n")


@pytest.mark.parametrize("test", sorted(LAYOUTS))
def test_each_text_layout_reads_the_same_as_markdown(test):
    head, row = LAYOUTS[test]
    keys = ("size_bytes", "count", "dtype", "redop", "root", "duration_s", "inplace_duration_s", "algbw_GBps",
            "busbw_GBps", "layout", "op", "group_size")
    text = _read(f"{head}\n{row}\n", f"{test}.txt").rows
    md = _read(_as_markdown(head, row), f"{test}.md").rows
    assert len(text) == len(md) == 1
    assert {k: md[0][k] for k in keys} == {k: text[0][k] for k in keys}


def test_cell_units_zero_size_and_a_line_that_ends_the_table():
    text = ("| size | count | type | redop | time | algbw | busbw | #wrong |\n" + "|-" * 8 + "|\n"
            "| 0 GB | 0 | float | sum | 1.0 | 0.00 | 0.00 | 0 |\n"
            "| 8 furlongs | 2 | float | sum | 1.0 | 0.00 | 0.00 | 0 |\n"
            "| 1 KiB | 256 | float | sum | 2.0 us | 0.51 | 0.51 | 0 |\n"
            "prose after the table\n"
            "| 2 KiB | 512 | float | sum | 2.0 | 1.02 | 1.02 | 0 |\n")
    res = _read(text)
    assert [(r["size_bytes"], r["duration_s"]) for r in res.rows] == [(0, pytest.approx(1e-6)),
                                                                     (1024, pytest.approx(2e-6))]
    (_, line, reason), = res.skipped.examples
    assert line == 4 and "'furlongs'" in reason


def test_sides_after_the_names_and_err_columns():
    # a report script's header (public GitHub shell script writing nccl-tests results as Markdown)
    head = ("| Size (B) | Count | Type | Redop | Root | Time(us) oop | Algbw oop | Busbw oop | Err oop "
            "| Time(us) ip | Algbw ip | Busbw ip | Err ip |")
    text = f"{head}\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n{ROW_2022}\n"
    assert detect_format(text.encode()) == "nccl_tests"
    (row,) = _read(text).rows
    assert row["duration_s"] == pytest.approx(12.34e-6)
    assert row["inplace_duration_s"] == pytest.approx(12.20e-6)
    assert row["layout"] == "2022"  # 'error' columns, every root -1: a later run's table (dated_by_root)


def _pipeless(line):
    """A Markdown table line without its outer pipes, as GitHub Flavored Markdown allows."""
    return line.strip().strip("|").strip()


def test_table_without_outer_pipes_reads_as_with_them():
    delim = "|" + "---|" * 13
    second = ROW_2022.replace("1048576 | 262144", "2097152 | 524288")
    piped = f"{HEAD_2022}\n{delim}\n{ROW_2022}\n{second}\n"
    bare = "\n".join(_pipeless(x) for x in piped.splitlines()) + "\n"
    assert not bare.startswith("|") and "\n|" not in bare
    assert detect_format(bare.encode()) == "nccl_tests"
    rows = _read(bare).rows
    assert [(r["size_bytes"], r["count"], r["root"]) for r in rows] == [(1048576, 262144, -1),
                                                                       (2097152, 524288, -1)]
    assert [r["duration_s"] for r in rows] == [r["duration_s"] for r in _read(piped).rows]


def test_bundled_gb300_table_without_outer_pipes(tmp_path):
    """The bundled table's lines with their outer pipes taken off give the same rows (counted by a plain
    split of the bundled file)."""
    text = "\n".join(_pipeless(x) if x.startswith("|") else x
                     for x in (DATA / GB300).read_text().splitlines()) + "\n"
    path = tmp_path / GB300
    path.write_text(text)
    res = runner.invoke(app, ["check", str(path), "--format", "json", "--topology", "gb300-nvl72"])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    assert [r["bytes"] for r in sweep["rows"]] == [c * 4 for _, c, _, _ in markdown_rows(GB300)]


def test_pipeless_lines_that_are_not_a_table_are_left_alone():
    # one pipe is no row; a row of nccl-tests words without its delimiter row opens no table
    one = "size | count\n"
    with pytest.raises(TraceFormatError, match="unrecognised"):
        detect_format(one.encode())
    no_delim = _pipeless(HEAD_2022) + "\n" + _pipeless(ROW_2022) + "\n"
    with pytest.raises(TraceFormatError, match="unrecognised"):
        detect_format(no_delim.encode())
    text = (DATA / PLAIN).read_text() + "\nsummary: a | b | c\n"
    assert [r["size_bytes"] for r in _read(text, PLAIN).rows] == [s for s, _, _ in file_rows(PLAIN)]
