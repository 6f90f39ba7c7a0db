"""nccl-tests outputs as each release and option writes them, and the input gaps around them: a file
whose rows are all refused, a header after more than the detector's head of NCCL's lines, NCCL's own
``threadThresholds`` line, and nccl-tests v1's table (times in milliseconds).

Expected values come from counting the files (the bundled ones, tests/data/traces/nccl-tests/README.md)
or from the printf formats of nccl-tests' sources quoted at each test.
"""
# ruff: noqa: UP031 -- the lines are written with nccl-tests' own printf formats, as C's % formats them

import gzip
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.errors import TraceFormatError
from zerocalc.nccl.env import settings
from zerocalc.topology import get_topology
from zerocalc.traces import read_traces
from zerocalc.traces.detect import HEAD_BYTES, detect_format
from zerocalc.traces.nccl_info import info_facts
from zerocalc.traces.nccl_tests import parse
from zerocalc.traces.reader import detect_file

TESTS = Path(__file__).parent / "data" / "traces" / "nccl-tests"
P5_RUN1 = TESTS / "all_reduce_perf-16xH100-p5-info-tagged-nccl2.22.3-run1.log.gz"
IB16 = TESTS / "all_reduce_perf-16xH100-2nodes-infiniband.txt"
runner = CliRunner()

# nccl-tests 2.13-2.17 src/common.cu: the preamble, the header and one row's printf formats
NTHREAD = ("# nThread 1 nGpus 8 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 5 iters: 20 "
           "agg iters: 1 validation: 1 graph: 0\n")
HEADER = ("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n"
          % ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
             "busbw", "#wrong"))


def row(size: int, count: int, *sides: tuple[float, float, float, int]) -> str:
    lead = "%12li  %12li  %8s  %6s  %6s" % (size, count, "float", "sum", "%6i" % -1)
    return lead + "".join("  %7.2f  %6.2f  %6.2f  %5g" % s for s in sides) + "\n"


def invoke(*args):
    return runner.invoke(app, [*map(str, args)])


# -- a file whose only result row is refused -----------------------------------------------------------

@pytest.mark.parametrize("command", [["check", "--topology", "dgx-h100"], ["check"], ["fit"],
                                     ["fit", "--topology", "dgx-h100", "--out", "OUT"]])
def test_a_file_whose_only_row_is_short_names_that_row(tmp_path, command):
    path = tmp_path / "all_reduce_perf.txt"
    full = row(8, 2, (10.41, 0.0, 0.0, 0), (10.2, 0.0, 0.0, 0))
    short = full[:full.index("10.2") + 4] + "\n"  # the in-place side cut after its time: 10 cells of 13
    path.write_text(NTHREAD + "#\n" + HEADER + short)
    args = [a if a != "OUT" else tmp_path / "out.toml" for a in command]
    res = invoke(args[0], path, *args[1:])
    assert res.exit_code == 2, res.output
    (line,) = res.stderr.strip().splitlines()
    assert f"{path}:4:" in line  # the row is the file's 4th line
    assert "10 cells" in line and "13 columns" in line
    assert not (tmp_path / "out.toml").exists()


def test_refused_rows_are_counted_in_the_message(tmp_path):
    path = tmp_path / "all_reduce_perf.txt"
    bad = "%12li  %12li  %8s  %6s  %6s  x\n" % (8, 2, "float", "sum", "-1")
    path.write_text(NTHREAD + HEADER + bad + bad.replace("  8  ", " 16  "))
    res = invoke("check", path, "--topology", "dgx-h100")
    assert res.exit_code == 2
    (line,) = res.stderr.strip().splitlines()
    assert f"{path}:3:" in line and "(and 1 more)" in line


# -- an nccl-tests header after more than the detector's head ------------------------------------------

def _p5_text() -> str:
    return gzip.decompress(P5_RUN1.read_bytes()).decode()


def _info_block(text: str, at_least: int) -> str:
    """NCCL INFO lines of the file itself (its ranks' init lines), more than ``at_least`` bytes of them:
    what many ranks print before rank 0's header reaches a merged output."""
    out, n = [], 0
    for line in text.splitlines(True):
        if "NCCL INFO" in line and " opCount " not in line:
            out.append(line)
            n += len(line.encode())
            if n > at_least:
                return "".join(out)
    raise AssertionError("not enough INFO lines")


def _counted_rows(text: str) -> list[tuple[int, int]]:
    """(line, size) of each row, counted from the text: OpenMPI's tags cut the rows of this file into
    three pieces on one line; the row is the line whose first piece is two integers and ``float``."""
    rows = []
    for i, line in enumerate(text.splitlines(), 1):
        f = line.replace("[1,0]<stdout>:", " ").split()
        if len(f) == 13 and f[0].isdigit() and f[1].isdigit() and f[2] == "float":
            rows.append((i, int(f[0])))
    return rows


def test_a_header_after_more_than_the_head_of_info_lines_is_an_nccl_tests_output(tmp_path):
    text = _p5_text()
    block = _info_block(text, 2 * HEAD_BYTES)
    path = tmp_path / "all_reduce_perf-late-header.log"
    path.write_text(block + text)
    head = path.read_bytes()[:HEAD_BYTES]
    assert b"# nThread" not in head and b"size" not in head  # the head alone is NCCL's lines
    assert detect_format(head, str(path)) == "nccl_log"
    assert detect_file(str(path)) == "nccl_tests"
    shift = block.count("\n")
    expected = [(ln + shift, s) for ln, s in _counted_rows(text)]
    assert [s for _, s in expected] == [8 << k for k in range(32)]
    ts = read_traces(path)
    assert list(zip(ts.table["source_line"], ts.table["size_bytes"], strict=True)) == expected
    res = invoke("check", path, "--topology", "aws-p5", "--format", "json")
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    assert len(sweep["rows"]) == 32 and sweep["group_size"] == 16 and sweep["nccl_version"] == "2.22.3"


def test_a_gzipped_late_header_is_read_too(tmp_path):
    text = _p5_text()
    path = tmp_path / "late.log.gz"
    path.write_bytes(gzip.compress((_info_block(text, 2 * HEAD_BYTES) + text).encode()))
    assert detect_file(str(path)) == "nccl_tests"
    assert len(read_traces(path).table) == 32


def test_info_lines_then_coll_lines_stay_an_nccl_log(tmp_path):
    text = _p5_text()
    coll = ("host:1:2 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x7f0 recvbuff 0x7f0 count 2 datatype 7 "
            "op 0 root 0 comm 0x55 [nranks=16] stream 0x56\n")
    path = tmp_path / "training.log"
    # NCCL's lines, then a call, then (later in the log) text that names nccl-tests' columns
    path.write_text(_info_block(text, 2 * HEAD_BYTES) + coll + HEADER)
    assert detect_file(str(path)) == "nccl_log"
    path.write_text(_info_block(text, 2 * HEAD_BYTES))  # NCCL's lines and nothing else
    assert detect_file(str(path)) == "nccl_log"


# -- NCCL's threadThresholds line ----------------------------------------------------------------------

def test_the_thread_thresholds_line_is_read_as_nccl_prints_it():
    text = _p5_text()
    lines = text.splitlines()
    first = next(i for i, ln in enumerate(lines, 1) if "threadThresholds" in ln)
    assert first == 1252
    assert info_facts(lines[first - 1]) == [("thread_thresholds", [8, 8, 64, 128, 8, 64])]
    # the older layouts (CollNet with three protocols; before CollNet), NCCL src/graph/tuning.cc
    assert info_facts("h:1:2 [0] NCCL INFO threadThresholds 8/8/64 | 16/8/64 | 8/8/512") == [
        ("thread_thresholds", [8, 8, 64, 16, 8, 64])]
    assert info_facts("h:1:2 [0] NCCL INFO threadThresholds 8/8/64 | 16/8/64") == [
        ("thread_thresholds", [8, 8, 64, 16, 8, 64])]
    res = parse(iter(text.splitlines(True)), str(P5_RUN1))
    assert res.meta["runs"][0]["nccl_info"]["thread_thresholds"] == [[8, 8, 64, 128, 8, 64], 1252]


def test_the_stated_thresholds_are_the_launch_thresholds():
    topo = get_topology("aws-p5")
    info = {"thread_thresholds": [[8, 8, 64, 512, 8, 64], 7]}
    env = settings(topo, "2.22.3", None, None, info=info)
    assert env.launch.thresholds == (8, 8, 64, 512, 8, 64)
    assert any("threadThresholds line (line 7)" in n for n in env.notes)
    # NCCL's line is what it ran with, after the environment: it wins over NCCL_THREAD_THRESHOLDS
    env = settings(topo, "2.22.3", None, None, info=info,
                   stated={"NCCL_THREAD_THRESHOLDS": ("1 1 1 1 1 1", 3, 1)})
    assert env.launch.thresholds == (8, 8, 64, 512, 8, 64)
    assert settings(topo, "2.22.3", None, None).launch.thresholds is None


def test_a_sweep_with_a_thresholds_line_is_priced_as_with_the_variable_that_sets_it(tmp_path):
    """Every threshold raised (Tree 512/512/4096, Ring 4096/512/4096 from 8/8/64, 128/8/64): priced the
    same whether the file says it
    by NCCL's INFO line or by the launch line's NCCL_THREAD_THRESHOLDS (the variable's own handling is
    tested in test_nccl_tests_env.py), and differently from NCCL's defaults at some size."""
    body = IB16.read_text()
    info = tmp_path / "all_reduce_perf-info.txt"
    line = "host:1:2 [0] NCCL INFO threadThresholds 512/512/4096 | 4096/512/4096 | 512 | 512\n"
    info.write_text(line + body)
    var = tmp_path / "all_reduce_perf-var.txt"
    var.write_text("mpirun -x NCCL_THREAD_THRESHOLDS='512 512 4096 4096 512 4096' ./all_reduce_perf\n" + body)

    def predicted(path):
        res = invoke("check", path, "--topology", "dgx-h100", "--format", "json")
        assert res.exit_code == 0, res.output
        (sweep,) = json.loads(res.stdout)["sweeps"]
        return [r["predicted_s"] for r in sweep["rows"]], sweep["notes"]

    got, notes = predicted(info)
    assert any("threadThresholds line (line 1)" in n for n in notes)
    assert got == predicted(var)[0]
    assert got != predicted(IB16)[0]


# -- nccl-tests v1 (to Mar 2019): times in milliseconds ------------------------------------------------

def _v1(test: str, lead: list[str], rows: list[tuple], sides: int = 2) -> str:
    """An output as nccl-tests v1.0.0 prints it (src/common.cu, src/<test>.cu print_header)."""
    lines = ["# NCCL Tests compiled with NCCL 2.2", "# Using devices",
             "#   Rank %2d on %10s device %2d [0x%02x] %s" % (0, "dgx1", 0, 6, "Tesla V100-SXM2-16GB"),
             "#   Rank %2d on %10s device %2d [0x%02x] %s" % (1, "dgx1", 1, 7, "Tesla V100-SXM2-16GB"), ""]
    names = ["bytes", "N", "type", *lead]
    side_names = ["time", "algbw", "busbw", "res"] * sides
    cols = ["%10s" % names[0], "%12s" % names[1]] + ["%6s" % x for x in names[2:]]
    lines.append("# " + "  ".join(cols + ["%7s" % x for x in side_names]))
    for size, count, *cells in rows:
        lead_cells = cells[:len(lead)]
        timing = cells[len(lead):]
        line = "%12li  %12li  %6s" % (size, count, "float") + "".join("  %6s" % c for c in lead_cells)
        for s in range(sides):
            ms, alg, bus, res = timing[4 * s: 4 * s + 4]
            line += "  %7.3f  %5.2f  %5.2f  %7.0e" % (ms, alg, bus, res)
        lines.append(line)
    lines += [" Out of bounds values : 0 OK", " Avg bus bandwidth    : 5.5 ", ""]
    return "\n".join(lines)


def test_v1_times_are_milliseconds(tmp_path):
    path = tmp_path / "all_reduce_perf.txt"
    rows = [(8388608, 2097152, "sum", 1.678, 5.0, 5.0, 0, 1.701, 4.93, 4.93, 0),
            (16777216, 4194304, "sum", 3.355, 5.0, 5.0, 0, 3.36, 4.99, 4.99, 0)]
    path.write_text(_v1("all_reduce", ["op"], rows))
    res = parse(iter(path.read_text().splitlines(True)), str(path))
    assert res.skipped.count == 0
    assert [(r["size_bytes"], r["count"], r["redop"], r["group_size"]) for r in res.rows] == [
        (8388608, 2097152, "sum", 2), (16777216, 4194304, "sum", 2)]
    assert [r["duration_s"] for r in res.rows] == pytest.approx([1.678e-3, 3.355e-3])
    assert [r["inplace_duration_s"] for r in res.rows] == pytest.approx([1.701e-3, 3.36e-3])
    assert res.meta["runs"][0]["gpus"] == {"Tesla V100-SXM2-16GB": 2}
    assert res.meta["runs"][0]["hosts"] == {"dgx1": 2}


def test_v1_broadcast_has_one_side_and_a_root(tmp_path):
    path = tmp_path / "broadcast_perf.txt"
    path.write_text(_v1("broadcast", ["root"], [(1048576, 262144, "0", 0.25, 4.19, 4.19, 0)], sides=1))
    (r,) = parse(iter(path.read_text().splitlines(True)), str(path)).rows
    assert (r["op"], r["root"], r["duration_s"], r["inplace_duration_s"]) == ("broadcast", 0, 0.25e-3, None)


def test_v1_rows_that_do_not_fit_are_refused(tmp_path):
    path = tmp_path / "all_reduce_perf.txt"
    text = _v1("all_reduce", ["op"], [(8388608, 2097152, "sum", 1.678, 5.0, 5.0, 0, 1.701, 4.93, 4.93, 0)])
    path.write_text(text.replace("    0e+00\n", "\n", 1))  # the last cell gone
    with pytest.raises(TraceFormatError, match=r":7: row has 11 cells"):
        parse(iter(path.read_text().splitlines(True)), str(path), strict=True)


# -- rccl-tests -O 0: the in-place group alone ---------------------------------------------------------

def _rccl_inplace_only() -> str:
    """As ROCm/rccl-tests src/common.cu (Sep 2024) prints a run with ``-O 0``: its one-group header, then
    each row's lead columns and the in-place cells."""
    lines = [NTHREAD.rstrip("\n"), "#", "rccl-tests: Version develop:83d38d9", "# Using devices"]
    lines += ["#  Rank %2d Group %2d Pid %6d on %10s device %2d [0000:%02x:00] %s"
              % (r, 0, 37300, "g100n126", r, 5 + 16 * r, "AMD Instinct MI300X") for r in range(8)]
    lines += ["#", "# %10s  %12s  %8s  %6s  %6s           in-place          " % ("", "", "", "", ""),
              "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s" % ("size", "count", "type", "redop", "root",
                                                                  "time", "algbw", "busbw", "#wrong"),
              "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s" % ("(B)", "(elements)", "", "", "", "(us)",
                                                                   "(GB/s)", "(GB/s)", "")]
    for size, us in ((8388608, 94.94), (16777216, 150.2), (33554432, 260.7)):
        alg = size / 1e9 / (us * 1e-6)
        lines.append("%12li  %12li  %8s  %6s  %6s" % (size, size // 4, "float", "sum", "%6i" % -1)
                     + "  %7.2f  %6.2f  %6.2f  %5g" % (us, alg, alg * 2 * 7 / 8, 0))
    return "\n".join(lines + ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 160.5 ", ""])


def test_an_in_place_only_table_is_read_as_in_place(tmp_path):
    path = tmp_path / "all_reduce_perf.txt"
    path.write_text(_rccl_inplace_only())
    res = parse(iter(path.read_text().splitlines(True)), str(path))
    assert res.skipped.count == 0
    assert [(r["size_bytes"], r["source_line"], r["group_size"]) for r in res.rows] == [
        (8388608, 17, 8), (16777216, 18, 8), (33554432, 19, 8)]  # 4 + 8 + 4 lines before
    assert [r["duration_s"] for r in res.rows] == pytest.approx([94.94e-6, 150.2e-6, 260.7e-6])
    assert [r["inplace_duration_s"] for r in res.rows] == [r["duration_s"] for r in res.rows]
    assert res.meta["runs"][0]["layout"].endswith("-inplace")
    out = invoke("check", path, "--topology", "dgx-h100", "--format", "json")
    assert out.exit_code == 0, out.output
    (sweep,) = json.loads(out.stdout)["sweeps"]
    assert [r["measured_s"] for r in sweep["rows"]] == pytest.approx([94.94e-6, 150.2e-6, 260.7e-6])
    assert any("one group of time columns, read as the in-place one" in n for n in sweep["notes"])


def test_a_row_with_both_groups_under_an_in_place_only_header_is_refused(tmp_path):
    path = tmp_path / "all_reduce_perf.txt"
    text = _rccl_inplace_only().replace("    94.94", "    94.94   88.36  154.63      0    94.94", 1)
    path.write_text(text)
    with pytest.raises(TraceFormatError, match=r":17: row has 13 cells, the header \(line 15\) has 9"):
        parse(iter(path.read_text().splitlines(True)), str(path), strict=True)


# -- the -J JSON report (nccl-tests 2.17.x on, src/util.cu) --------------------------------------------

G8 = TESTS / "all_reduce_perf-8xH100-1node-g8-nvls.txt"


def _json_of(text: str, env: list[str], code: int = 22703, version: int = 3) -> dict:
    """The JSON report nccl-tests writes with ``-J`` for the run ``text`` prints (src/util.cu: the keys
    of ``jsonOutputInit``, ``writeDeviceReport``'s ``config`` with one ``devices`` entry per process, the
    first ``# Rank`` line of its block, and per row ``writeBenchmarkLinePreamble`` / ``...Body``)."""
    lines = text.splitlines()
    first = next(ln for ln in lines if ln.startswith("#  Rank"))
    f = first.split()
    device = {"rank": int(f[2]), "group": int(f[4]), "pid": int(f[6]), "hostname": f[8],
              "device": int(f[10]), "device_hex": f[11].strip("[]"), "device_info": " ".join(f[12:])}
    results = []
    for ln in lines:
        c = ln.split()
        if len(c) == 13 and c[0].isdigit():
            side = [{"time": float(c[5 + 4 * k]), "alg_bw": float(c[6 + 4 * k]),
                     "bus_bw": float(c[7 + 4 * k]), "nwrong": float(c[8 + 4 * k])} for k in (0, 1)]
            results.append({"size": int(c[0]), "count": int(c[1]), "type": c[2], "redop": c[3],
                            "root": "%6i" % int(c[4]), "out_of_place": side[0], "in_place": side[1],
                            "actual_iterations": 2, "experiment_name": ""})
    return {"version": version, "start_time": "2025-03-01 10:00:00",
            "args": ["./build/all_reduce_perf", "-b", "128M", "-e", "4G", "-g", "8", "-J", "r.json"],
            "env": ["PATH=/usr/bin", *env], "nccl_version": code,
            "config": {"nthreads": 1, "ngpus": 8, "minimum_bytes": 134217728, "maximum_bytes": 4294967296,
                       "step_factor": 2, "warmup_iters": 5, "iterations": 2, "aggregated_iterations": 1,
                       "validation": 1, "graph": 0, "blocking_collectives": False, "parallel_init": False,
                       "devices": [device]},
            "results": results, "out_of_bounds": {"count": 0, "okay": True},
            "average_bus_bandwidth": {"bandwidth": 439.369, "okay": "unchecked"}, "errors": []}


def _check(path, *args):
    res = invoke("check", path, "--format", "json", *args)
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    return sweep


def test_a_json_report_is_a_sweep_as_its_text_is(tmp_path):
    """One process driving 8 GPUs (-g 8): the report lists one device, the run has 8 ranks."""
    text = G8.read_text()
    path = tmp_path / "report.json"
    path.write_text(json.dumps(_json_of(text, [])))
    res = read_traces(path)
    assert list(res.table["size_bytes"]) == [128 << 20 << k for k in range(6)]
    (run,) = res.meta[str(path)]["runs"]
    assert (run["group_size"], run["gpus"], run["hosts"]) == (8, {"NVIDIA H100 80GB HBM3": 8}, {"node005": 8})
    assert (run["nccl_version"], run["gpus_per_thread"], run["agg_iters"], run["graph"]) == (
        "2.27.3", 8, 1, 0)
    got = _check(path)
    text_path = tmp_path / "all_reduce_perf.txt"
    text_path.write_text("# nccl-tests version 2.17.1 nccl-headers=22703 nccl-library=22703\n" + text)
    want = _check(text_path)
    for key in ("op", "group_size", "nccl_version", "topology"):
        assert got[key] == want[key]
    assert [(r["bytes"], r["measured_s"], r["predicted_s"], r["in_place_s"]) for r in got["rows"]] == [
        (r["bytes"], r["measured_s"], r["predicted_s"], r["in_place_s"]) for r in want["rows"]]
    assert got["rows"][0]["measured_s"] == pytest.approx(613.3e-6)


def test_a_json_report_names_its_nccl_environment(tmp_path):
    path = tmp_path / "report.json"
    path.write_text(json.dumps(_json_of(G8.read_text(), ["NCCL_ALGO=Ring", "NCCL_DEBUG=INFO"])))
    sweep = _check(path)
    assert {r["algorithm"] for r in sweep["rows"]} == {"Ring"}
    assert any("NCCL_ALGO=Ring" in n for n in sweep["notes"])


def test_a_json_result_that_is_not_a_number_is_refused(tmp_path):
    doc = _json_of(G8.read_text(), [])
    doc["results"][2]["out_of_place"]["time"] = "nan"  # jsonDouble writes a NaN as the string "nan"
    path = tmp_path / "report.json"
    path.write_text(json.dumps(doc))
    res = read_traces(path)
    assert len(res.table) == 5 and res.skipped.count == 1
    # the report is one line: the result is named by its index, not as a line
    assert res.skipped.examples[0][1] is None
    assert "result 2: out_of_place.time 'nan' is not a number" in res.skipped.examples[0][2]


# -- -C 1: cputime, the host's time to enqueue the calls ------------------------------------------------

def _cputime_text() -> str:
    """nccl-tests 2.17 with ``-C 1`` (src/common.cu ``writeResultHeader``: ``timeStr`` is ``cputime``)."""
    header = HEADER.replace("    time", " cputime")
    return (NTHREAD + "#\n" + header + row(8, 2, (3.21, 0.0, 0.0, 0), (3.02, 0.0, 0.0, 0))
            + row(16, 4, (3.25, 0.0, 0.0, 0), (3.1, 0.0, 0.0, 0)))


def test_cputime_rows_are_read_but_not_compared_or_fitted(tmp_path):
    path = tmp_path / "all_reduce_perf.txt"
    path.write_text(_cputime_text())
    assert _cputime_text().count("cputime") == 2
    ts = read_traces(path)  # the rows are what the file says
    assert list(ts.table["size_bytes"]) == [8, 16] and ts.table["layout"].iloc[0].endswith("-cputime")
    for args in (["check", path, "--topology", "dgx-h100"], ["fit", path, "--n", "8"],
                 ["fit", path, "--topology", "dgx-h100", "--out", tmp_path / "c.toml"]):
        res = invoke(*args)
        assert res.exit_code == 2, res.output
        (line,) = res.stderr.strip().splitlines()
        assert f"{path}:4:" in line and "cputime" in line and "-C" in line  # the first row


def test_a_json_report_of_cputime_is_refused_too(tmp_path):
    doc = _json_of(G8.read_text(), [])
    for r in doc["results"]:
        for side in ("out_of_place", "in_place"):
            r[side]["cpu_time"] = r[side].pop("time")  # util.cu: report_cputime ? "cpu_time" : "time"
    path = tmp_path / "report.json"
    path.write_text(json.dumps(doc))
    res = invoke("check", path)
    assert res.exit_code == 2
    assert "cputime" in res.stderr and f"{path}:0:" in res.stderr


def test_v1_rows_without_their_header_are_read_in_milliseconds(tmp_path):
    """An excerpt of v1 rows (no header): their ``%7.3f`` times, which no later release prints, and an
    algbw of size / time in ms tell them."""
    text = _v1("all_reduce", ["op"], [(8388608, 2097152, "sum", 1.678, 5.0, 5.0, 0, 1.701, 4.93, 4.93, 0)])
    rows_only = "".join(ln + "\n" for ln in text.splitlines() if ln[:1] == " " and ln.split()[0].isdigit())
    path = tmp_path / "all_reduce_perf.txt"
    path.write_text(rows_only)
    (r,) = parse(iter(rows_only.splitlines(True)), str(path)).rows
    assert r["layout"] == "v1-redop" and r["duration_s"] == pytest.approx(1.678e-3)
    # the same row in microseconds, as 2019-2022 printed it (%7.2f): read as it says
    later = rows_only.replace("  1.678", "1678.00").replace("  1.701", "1701.00")
    (r,) = parse(iter(later.splitlines(True)), str(path)).rows
    assert r["layout"] == "pre2022-redop" and r["duration_s"] == pytest.approx(1678e-6)
