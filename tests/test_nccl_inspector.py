"""NCCL's Inspector plugin logs (NCCL 2.28+) in ``check`` and ``fit``: each communicator's calls of one
collective a sweep of the sizes it ran, measured against NCCL's model as an nccl-tests sweep is.

The published records (tests/data/traces/nccl-inspector, from NVIDIA/nccl's Inspector README and its
exporter's README) are held to what the files print: their sizes, times and the plugin's own bandwidths
(``inspectorComputeOpBw``: algbw = msg × (n_ranks for AllGather / ReduceScatter) / time). The records
written here follow the plugin's writer (``inspector_json.cc``: one compact object a line) to test what
those examples cannot show: several ranks, calls and sizes, nodes, bad lines."""

from __future__ import annotations

import json
import re
import statistics

import pytest
from sweep_files import DATA as TESTS_DATA
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.errors import TraceFormatError
from zerocalc.traces.detect import detect_format
from zerocalc.traces.nccl_inspector import parse_bytes, sweeps
from zerocalc.traces.reader import read_file

runner = CliRunner()
DATA = TESTS_DATA.parent / "nccl-inspector"
ALLREDUCE = DATA / "readme-allreduce-8ranks-1node.log"
VERBOSE = DATA / "readme-verbose-reducescatter-8ranks-1node.log"
EXPORTER = DATA / "exporter-readme-reducescatter-32ranks-4nodes.log"


def _printed(path) -> dict:
    """The record's numbers as the file prints them, read with a plain regex (not the parser)."""
    text = path.read_text()
    return {k: float(re.search(rf'"{k}": ([0-9.]+)', text).group(1)) for k in (
        "n_ranks", "nnodes", "coll_msg_size_bytes", "coll_exec_time_us", "coll_algobw_gbs")}


def _check(*args):
    res = runner.invoke(app, ["check", *map(str, args), "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["sweeps"]


def test_the_published_records_are_detected_and_read_as_printed():
    for path in (ALLREDUCE, VERBOSE, EXPORTER):
        assert detect_format(path.read_bytes(), str(path)) == "nccl_inspector"
        got = parse_bytes(path.read_bytes(), str(path), strict=True)
        (rec,) = got.records
        p = _printed(path)
        assert (rec.n_ranks, rec.nnodes) == (p["n_ranks"], p["nnodes"])
        assert rec.msg_bytes == p["coll_msg_size_bytes"]
        assert rec.exec_s == pytest.approx(p["coll_exec_time_us"] * 1e-6)
        assert got.versions == ("v4.0",)
    assert parse_bytes(VERBOSE.read_bytes(), str(VERBOSE)).records[0].source == "kernel_gpu"
    assert parse_bytes(ALLREDUCE.read_bytes(), str(ALLREDUCE)).records[0].source == ""  # the README's first


def test_check_prices_each_published_record_at_nccl_tests_size():
    got = {(s["op"], s["group_size"]): s for s in _check(DATA, "--topology", "dgx-h100")}
    assert set(got) == {("all_reduce", 8), ("reduce_scatter", 8), ("reduce_scatter", 32)}
    for path, key in ((ALLREDUCE, ("all_reduce", 8)), (VERBOSE, ("reduce_scatter", 8)),
                      (EXPORTER, ("reduce_scatter", 32))):
        p, s = _printed(path), got[key]
        (row,) = s["rows"]
        assert row["measured_s"] == pytest.approx(p["coll_exec_time_us"] * 1e-6)
        # the size NCCL's model is given is the one the plugin's own algbw divides by the time
        assert row["bytes"] / 1e9 / row["measured_s"] == pytest.approx(p["coll_algobw_gbs"], rel=1e-6)
        assert (row["calls"], row["ranks"]) == (1, 1)
        assert s["inspector"]["nnodes"] == p["nnodes"]
    # 32 ranks on 4 nodes of 8 GPUs: the header's nodes, the preset's GPUs a node
    assert (got["reduce_scatter", 32]["nodes"], got["reduce_scatter", 32]["ranks_per_node"]) == (4, 8)
    assert got["all_reduce", 8]["inspector"]["communicator"] == "0x7f8c496ae9f661"


def test_a_release_before_the_plugin_is_said():
    (s,) = _check(ALLREDUCE, "--topology", "dgx-h100", "--nccl-version", "2.21.5")
    assert s["nccl_version"] == "2.21.5" and any("ships with NCCL 2.28 and later" in n for n in s["notes"])
    (s,) = _check(ALLREDUCE, "--topology", "dgx-h100", "--nccl-version", "2.28.9")
    assert not any("ships with NCCL" in n for n in s["notes"])


def test_an_inspector_log_needs_the_cluster_and_states_its_ranks():
    res = runner.invoke(app, ["check", str(ALLREDUCE)])
    assert res.exit_code == 2 and "--topology" in res.output and len(res.output.strip().splitlines()) == 1
    res = runner.invoke(app, ["check", str(ALLREDUCE), "--topology", "dgx-h100", "--n", "16"])
    assert res.exit_code == 2 and "--n" in res.output and "Traceback" not in res.output


def test_the_trace_reader_points_to_check():
    with pytest.raises(TraceFormatError, match="zerocalc check FILE --topology"):
        read_file(ALLREDUCE)
    res = runner.invoke(app, ["trace", "summary", str(ALLREDUCE)])
    assert res.exit_code == 2 and "Inspector" in res.output and "Traceback" not in res.output


def _line(comm, rank, n, nnodes, host, coll, sn, msg, us, source="kernel_gpu"):
    """One record as ``inspector_json.cc`` writes it: compact, keys in its order."""
    return json.dumps({
        "header": {"id": comm, "comm_name": "", "rank": rank, "n_ranks": n, "nnodes": nnodes},
        "metadata": {"inspector_output_format_version": "v4.0", "git_rev": "", "rec_mechanism":
                     "nccl_profiler_interface", "dump_timestamp_us": 1, "hostname": host, "pid": 7},
        "coll_perf": {"coll": coll, "coll_sn": sn, "coll_msg_size_bytes": msg, "coll_exec_time_us": us,
                      "coll_timing_source": source, "coll_algobw_gbs": 0.0, "coll_busbw_gbs": 0.0}},
        separators=(",", ":"))


def test_ranks_files_are_read_together_each_call_timed_on_its_fastest_rank(tmp_path):
    # two ranks of one all-gather communicator, one file each; three calls of 1 MiB a rank, one of 2 MiB
    times = {0: [50, 41, 60, 90], 1: [45, 52, 58, 80]}
    sizes = [1 << 20, 1 << 20, 1 << 20, 2 << 20]
    for rank in (0, 1):
        (tmp_path / f"host{rank}-pid{rank}.log").write_text("".join(
            _line("0xab", rank, 2, 2, f"host{rank}", "AllGather", sn, sizes[sn], times[rank][sn]) + "\n"
            for sn in range(4)))
    (s,) = _check(tmp_path, "--topology", "dgx-h100")
    assert (s["op"], s["group_size"], s["nodes"], s["ranks_per_node"]) == ("all_gather", 2, 2, 1)
    first, second = s["rows"]
    assert first["bytes"] == 2 * (1 << 20) and second["bytes"] == 2 * (2 << 20)  # × n_ranks
    # per call the faster rank: 45, 41, 58 µs; their median 45 µs
    assert first["measured_s"] == pytest.approx(statistics.median([45, 41, 58]) * 1e-6)
    assert second["measured_s"] == pytest.approx(80e-6)
    # every rank's records: 50, 41, 60, 45, 52, 58 µs, whose median holds the waits too
    assert first["all_ranks_median_s"] == pytest.approx(statistics.median([50, 41, 60, 45, 52, 58]) * 1e-6)
    assert (first["calls"], first["ranks"]) == (3, 2)
    assert "2 ranks on 2 node(s), 2 of them recorded" in s["notes"][0]


def test_the_header_places_ranks_on_their_nodes(tmp_path):
    # 8 ranks on 4 nodes, rank 0's file alone: 2 ranks a node, as the header says
    (tmp_path / "a-pid1.log").write_text(_line("0x1", 0, 8, 4, "a", "AllReduce", 0, 1 << 24, 300) + "\n")
    (s,) = _check(tmp_path / "a-pid1.log", "--topology", "dgx-h100")
    assert (s["nodes"], s["ranks_per_node"]) == (4, 2)
    assert "Inspector records' header" in s["topology_how"]


def test_bad_lines_are_refused_with_their_line_or_skipped_and_counted(tmp_path):
    good = _line("0x1", 0, 2, 1, "a", "AllReduce", 0, 1 << 20, 30)
    f = tmp_path / "a-pid1.log"
    f.write_text(good + "\n" + '{"header": {"id": "0x1", "rank": 5, "n_ranks": 2, "nnodes": 1}, '
                 '"coll_perf": {"coll": "AllReduce", "coll_msg_size_bytes": 8, "coll_exec_time_us": 1}}\n'
                 + good[:40] + "\n")
    with pytest.raises(TraceFormatError) as exc:
        parse_bytes(f.read_bytes(), str(f), strict=True)
    assert exc.value.line == 2 and "rank 5" in str(exc.value)
    got = parse_bytes(f.read_bytes(), str(f))
    assert len(got.records) == 1 and got.skipped.count == 2 and got.skipped.examples[1][1] == 3
    res = runner.invoke(app, ["check", str(f), "--topology", "dgx-h100", "--strict"])
    assert res.exit_code == 2 and ":2" in res.output and len(res.output.strip().splitlines()) == 1


def test_an_exec_time_with_a_fraction_is_read(tmp_path):
    # NCCL writes whole µs (jsonUint64); a writer of fractions is read to the fraction, a negative refused
    f = tmp_path / "a-pid1.log"
    f.write_text(_line("0x1", 0, 2, 1, "a", "AllReduce", 0, 1 << 20, 30.25) + "\n"
                 + _line("0x1", 0, 2, 1, "a", "AllReduce", 1, 1 << 20, -1) + "\n")
    got = parse_bytes(f.read_bytes(), str(f))
    assert [r.exec_s for r in got.records] == [pytest.approx(30.25e-6)] and got.skipped.count == 1


def test_a_communicator_stated_two_ways_is_refused(tmp_path):
    f = tmp_path / "a-pid1.log"
    f.write_text(_line("0x1", 0, 2, 1, "a", "AllReduce", 0, 1 << 20, 30) + "\n"
                 + _line("0x1", 0, 4, 1, "a", "AllReduce", 1, 1 << 20, 30) + "\n")
    with pytest.raises(TraceFormatError, match="different ranks/nodes"):
        sweeps(parse_bytes(f.read_bytes(), str(f)).records, str(f))


def test_point_to_point_records_are_said_not_priced(tmp_path):
    f = tmp_path / "a-pid1.log"
    p2p = json.dumps({"header": {"id": "0x2", "rank": 0, "n_ranks": 2, "nnodes": 1},
                      "metadata": {"hostname": "a"},
                      "p2p_perf": {"p2p": "Send", "p2p_sn": 1, "p2p_peer": 1, "p2p_msg_size_bytes": 1 << 20,
                                   "p2p_exec_time_us": 20, "p2p_timing_source": "kernel_gpu"}})
    f.write_text(_line("0x1", 0, 2, 1, "a", "AllReduce", 0, 1 << 20, 30) + "\n" + p2p + "\n")
    assert detect_format(f.read_bytes(), str(f)) == "nccl_inspector"
    (s,) = _check(f, "--topology", "dgx-h100")
    assert any("1 Send record(s) not priced" in n for n in s["notes"])
    only = tmp_path / "b-pid2.log"
    only.write_text(p2p + "\n")
    res = runner.invoke(app, ["check", str(only), "--topology", "dgx-h100"])
    assert res.exit_code == 2 and "no Inspector collective records" in res.output


def test_fit_out_calibrates_on_an_inspector_log_and_check_reads_it_back(tmp_path):
    # one all-reduce communicator on 8 ranks of one node, 8 sizes, times of α + size / bw by hand
    alpha_us, bw = 20.0, 100e9
    sizes = [1 << k for k in range(20, 28)]
    logs = tmp_path / "nccl-inspector-1"
    logs.mkdir()
    (logs / "a-pid1.log").write_text("".join(
        _line("0x1", 0, 8, 1, "a", "AllReduce", i, b, round(alpha_us + b / bw * 1e6)) + "\n"
        for i, b in enumerate(sizes)))
    out = tmp_path / "c.toml"
    res = runner.invoke(app, ["fit", str(logs), "--out", str(out), "--topology", "dgx-h100"])
    assert res.exit_code == 0, res.output
    # the pair NCCL picks at most sizes is fitted back to the α and bandwidth the times were made of
    a, b = map(float, re.search(r"NVLS/Simple: α = ([0-9.]+) µs, bw = ([0-9.]+) GB/s", res.output).groups())
    assert a == pytest.approx(alpha_us, abs=1.0) and b == pytest.approx(bw / 1e9, rel=0.02)
    (s,) = _check(logs, "--topology", str(out))
    assert 0.9 <= statistics.median(r["ratio"] for r in s["rows"]) <= 1.1


def test_records_spread_over_lines_keep_their_line_numbers():
    # two published records one after the other, as a README prints them: each starts at its own "{" line
    both = ALLREDUCE.read_text() + EXPORTER.read_text()
    starts = [i for i, line in enumerate(both.splitlines(), 1) if line == "{"]
    got = parse_bytes(both.encode(), "both.log", strict=True)
    assert [r.line for r in got.records] == starts == [1, len(ALLREDUCE.read_text().splitlines()) + 1]
