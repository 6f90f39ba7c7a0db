"""`zerocalc trace summary` as a user runs it: every output format, and bad input."""

import gzip
import io
import json
import re
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from zerocalc.cli import app

DATA = Path(__file__).parent / "data" / "traces"
TP_LOG = DATA / "nccl-debug" / "tp-allgather-reducescatter-2ranks.txt"
CANONICAL = ["file", "rank", "step", "op", "dtype", "elem_bytes", "in_nelems", "out_nelems",
             "group_size", "group", "start_s", "duration_s", "source_line"]

runner = CliRunner()


def _run(*args):
    return runner.invoke(app, ["trace", "summary", *map(str, args)])


def test_table_on_a_log_without_ranks_is_per_process():
    # The torchtitan excerpt has 7 COLL lines: 3 AllGather, 2 ReduceScatter, 2 AllReduce, and no rank
    # (the [dev] token is the CUDA device, not the rank; no Init lines). Its two processes must be
    # counted apart (host:pid, the start of NCCL's line prefix), not merged into one rank "-".
    expected = {}  # (host:pid, NCCL op) -> calls, counted in the file
    for ln in TP_LOG.read_text().splitlines():
        if " opCount " in ln and not ln.startswith("#"):
            host, pid = ln.split(":")[:2]
            key = (f"{host}:{pid}", ln.split("NCCL INFO ")[1].split(":")[0])
            expected[key] = expected.get(key, 0) + 1
    assert len({p for p, _ in expected}) == 2
    res = _run(TP_LOG)
    assert res.exit_code == 0, res.output
    assert "7 calls, world size 2" in res.output
    assert "total: all_gather 3, all_reduce 2, reduce_scatter 2" in res.output
    assert "rank    -" not in res.output
    ops = {"AllGather": "all_gather", "ReduceScatter": "reduce_scatter", "AllReduce": "all_reduce"}
    for (proc, op), calls in expected.items():
        assert any(f"process {proc} " in ln and f" {ops[op]} " in ln and f" {calls} call" in ln
                   for ln in res.output.splitlines()), (proc, op, calls, res.output)
    csv = pd.read_csv(io.StringIO(_run(TP_LOG, "--format", "csv").stdout))
    assert csv["rank"].isna().all()
    assert csv.groupby("process")["calls"].sum().to_dict() == {
        p: sum(c for (q, _), c in expected.items() if q == p) for p, _ in expected}


def test_json_is_the_canonical_rows():
    res = _run(TP_LOG, "--format", "json")
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    # the canonical columns, then the process the summary table and csv have
    assert len(rows) == 7 and all(list(r) == [*CANONICAL, "process"] for r in rows)
    ag = [r for r in rows if r["op"] == "all_gather"]
    # AllGather count = per-rank send count 2,097,152 fp32; out = 2 ranks × that.
    assert {(r["in_nelems"], r["out_nelems"], r["elem_bytes"]) for r in ag} == {(2097152, 4194304, 4)}
    assert all(r["rank"] is None and r["duration_s"] is None for r in rows)


def test_json_names_the_process_of_calls_without_rank():
    # send-recv-2ranks.txt: 7 opCount lines, all from 'ubuntu:199574:...', no Init COMPLETE lines
    res = _run(DATA / "nccl-debug" / "send-recv-2ranks.txt", "--format", "json")
    rows = json.loads(res.stdout)
    assert len(rows) == 7 and {r["process"] for r in rows} == {"ubuntu:199574"}


def test_csv_reads_back_per_rank_and_step():
    # DLRM: 8 ranks, each with 3 all-reduces and 5 all-to-alls in one profiled step.
    res = _run(DATA / "kineto" / "dlrm-v100-8ranks", "--format", "csv")
    assert res.exit_code == 0, res.output
    df = pd.read_csv(io.StringIO(res.stdout))
    calls = df.groupby(["rank", "op"])["calls"].sum().unstack()
    assert sorted(calls.index) == list(range(8))
    assert (calls["all_reduce"] == 3).all() and (calls["all_to_all"] == 5).all()


@pytest.mark.parametrize("kind", ["empty", "truncated", "garbage", "missing"])
def test_bad_input_is_one_line_and_exit_2(tmp_path, kind):
    path = tmp_path / "trace.json.gz"
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "truncated":
        whole = gzip.compress((DATA / "kineto" / "dlrm-v100-8ranks" / "rank0.json.gz").read_bytes())
        path.write_bytes(whole[: len(whole) // 2])
    elif kind == "garbage":
        path.write_bytes(bytes(range(256)) * 16)
    before = path.read_bytes() if path.exists() else None
    res = _run(path)
    assert res.exit_code == 2
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("error: ")
    assert "trace.json.gz" in res.stderr and "Traceback" not in res.output
    if before is not None:
        assert path.read_bytes() == before  # the input is never touched
    assert sorted(p.name for p in tmp_path.iterdir()) == ([] if kind == "missing" else ["trace.json.gz"])


def test_same_file_twice_counts_once():
    res = _run(TP_LOG, TP_LOG)
    assert res.exit_code == 0, res.output
    assert "total: all_gather 3, all_reduce 2, reduce_scatter 2" in res.stdout
    assert "read once" in res.stderr


def test_forced_format_without_records_is_exit_2():
    resnet = DATA / "kineto" / "ddp-resnet50-a100-rank0-of-2.json.gz"
    res = _run(resnet, "--trace-format", "nccl_log")
    assert res.exit_code == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1
    assert str(resnet) in res.stderr and "no nccl_log records found; is it a kineto file?" in res.stderr


def test_no_collective_at_all_is_exit_2(tmp_path):
    # An NCCL log with setup lines but no COLL line (NCCL_DEBUG_SUBSYS without COLL).
    log = tmp_path / "init-only.log"
    log.write_text("host:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
                   "host:1:1 [0] NCCL INFO cudaDriverVersion 12020\n")
    res = _run(log)
    assert res.exit_code == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and "no collective calls found" in res.stderr


def test_directory_notes_subdirectories_and_non_traces(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    for r in (0, 1):
        (d / f"rank{r}.json.gz").write_bytes((DATA / "kineto" / "dlrm-v100-8ranks" / f"rank{r}.json.gz")
                                            .read_bytes())
    (d / "notes.txt").write_text("batch 128\n")
    (d / "rerun").mkdir()
    res = _run(d, "--format", "csv")
    assert res.exit_code == 0, res.output
    df = pd.read_csv(io.StringIO(res.stdout))
    # each DLRM rank: 3 all-reduces and 5 all-to-alls in its one step (see test above)
    assert df.groupby("op")["calls"].sum().to_dict() == {"all_reduce": 6, "all_to_all": 10}
    assert "notes.txt: skipped" in res.stderr and "rerun: a subdirectory" in res.stderr


def test_unexpanded_glob_hint():
    res = _run(DATA / "kineto" / "*.json.gz")
    assert res.exit_code == 2 and "globs are expanded by the shell" in res.stderr


def test_singular_wording(tmp_path):
    # One COLL line of the torchtitan excerpt and one broken COLL line: "1 call", "1 unreadable line".
    first = next(ln for ln in TP_LOG.read_text().splitlines() if " opCount " in ln and not ln.startswith("#"))
    log = tmp_path / "one.log"
    log.write_text(first + "\n" + first.split(" count ")[0] + " count four\n")
    res = _run(log)
    assert res.exit_code == 0, res.output
    assert f"{log}: nccl_log, 1 call, world size 2" in res.stdout
    # AllGather count 2097152, datatype 7 = fp32: 2097152 × 4 B = 8.39 MB
    assert re.search(r"all_gather +1 call +in 8\.39 MB", res.stdout) and " calls" not in res.stdout
    assert "skipped 1 unreadable line, e.g." in res.stderr


def test_skipped_profiler_events_are_named_by_their_index_not_a_line(tmp_path):
    # A profiler trace is one JSON document: a malformed event is its entry of traceEvents, which the
    # reader named as if it were a line ("rank0.json:11: …", the trace being one line) and counted as lines
    doc = json.loads(gzip.decompress((DATA / "real-runs" / "ddp-bf16" / "rank0.json.gz").read_bytes()))
    events = doc["traceEvents"]
    gloo = [i for i, e in enumerate(events) if e.get("name", "").startswith("gloo:")]
    first, second = gloo[:2]
    events[first]["dur"] = "x"
    events[second]["args"] = 5
    trace = tmp_path / "rank0.json"
    trace.write_text(json.dumps(doc))
    res = _run(trace)
    assert res.exit_code == 0, res.output
    name = events[first]["name"]
    assert (f"skipped 2 unreadable entries, e.g. {trace}: event {first} ({name!r}) without a valid ts/dur; "
            f"{trace}: event {second} ") in res.stderr
    assert f"{trace}:{first}:" not in res.stderr
    strict = _run(trace, "--strict")
    assert strict.exit_code == 2
    assert strict.stderr.strip() == f"error: {trace}: event {first} ({name!r}) without a valid ts/dur"
