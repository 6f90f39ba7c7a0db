"""`trace summary --format json` and `--format csv-rows`: the canonical rows, streamed part by part.

The expected bytes are those of the whole table of a plain read (``read_traces(paths).table``, itself
checked against the files in the trace tests) with each call's process, written at once
(``json.dumps(every row, indent=1)``; ``DataFrame.to_csv``). The stream must give them whatever the
size of its parts: the tests also cut every NCCL log into parts of a few lines.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.traces import CANONICAL_COLUMNS, nccl_log, read_traces, streamed
from zerocalc.traces.nccl_tests import complete

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "traces"
RAY = DATA / "nccl-debug" / "ddp-allreduce-128ranks-L4-ray.txt"
SWEEP = DATA / "nccl-tests" / "all_reduce_perf-16xH100-2nodes-infiniband.txt"
SETS = [*sorted((DATA / "nccl-debug").glob("*.txt")), SWEEP,
        DATA / "kineto" / "ddp-resnet50-a100-rank0-of-2.json.gz", DATA / "kineto" / "dlrm-v100-8ranks",
        DATA / "deepspeed-comms" / "tutorial-examples.txt", DATA / "deepspeed-gloo-zero3-n4"]


def _whole(paths, fmt: str) -> str:
    """The rows of a plain read, written at once."""
    ts = read_traces(paths)
    table = ts.table[list(CANONICAL_COLUMNS)].assign(process=ts.processes())
    if fmt == "csv-rows":
        return table.to_csv(index=False)
    values = table.astype(object)
    return json.dumps(values.where(values.notna(), None).to_dict(orient="records"), indent=1) + "\n"


def _streamed(paths, fmt: str, *extra: str) -> str:
    res = CliRunner().invoke(app, ["trace", "summary", *map(str, paths), "--format", fmt, *extra])
    assert res.exit_code == 0, res.output
    return res.stdout


@pytest.fixture
def small_parts(monkeypatch):
    """Blocks of 2 KiB and parts of one block: an NCCL log of the test data in many parts."""
    monkeypatch.setattr(nccl_log, "BLOCK_BYTES", 2048)
    monkeypatch.setattr(streamed, "PART_BYTES", 1)


@pytest.mark.parametrize("path", SETS, ids=lambda p: p.name)
def test_json_rows_are_the_whole_tables(path):
    assert _streamed([path], "json") == _whole([path], "json")


@pytest.mark.parametrize("path", [p for p in SETS if p.suffix == ".txt" and p.parent.name == "nccl-debug"],
                         ids=lambda p: p.name)
def test_an_nccl_log_in_parts_of_a_few_lines_gives_the_same_bytes(path, small_parts):
    assert _streamed([path], "json") == _whole([path], "json")
    assert _streamed([path], "csv-rows") == _whole([path], "csv-rows")


def test_csv_rows_of_several_files_and_formats_together(tmp_path, small_parts):
    rccl = DATA / "nccl-debug" / "rccl-4ranks-allreduce-allgather.txt"
    again = tmp_path / "rccl-again.txt"  # a second log of the same 4 ranks: ranks matched across logs
    again.write_text(rccl.read_text())
    paths = [rccl, DATA / "deepspeed-gloo-zero3-n4", again]
    text = _streamed(paths, "csv-rows")
    assert text == _whole(paths, "csv-rows")
    lines = text.splitlines()
    assert lines[0] == ",".join([*CANONICAL_COLUMNS, "process"]) and lines.count(lines[0]) == 1
    calls = rccl.read_text().count("opCount ")
    for path in (rccl, again):
        assert sum(ln.startswith(f"{path},") for ln in lines) == calls


def test_nccl_tests_rows_completed_from_the_options():
    """Rows that name no op or group size take --op and --ranks (nccl_tests.complete) in the stream too."""
    path = DATA / "nccl-tests" / "rows-only-pre2022-allreduce-p4d.txt"
    rows = json.loads(_streamed([path], "json", "--op", "all_reduce", "--ranks", "8"))
    ts = read_traces(path)
    table = complete(ts.table, op="all_reduce", ranks=8)[list(CANONICAL_COLUMNS)]
    table = table.assign(process=ts.processes())
    values = table.astype(object)
    assert rows == values.where(values.notna(), None).to_dict(orient="records")
    assert {r["op"] for r in rows} == {"all_reduce"} and {r["group_size"] for r in rows} == {8}


def test_a_gzip_log_with_crlf_line_ends_in_parts(tmp_path, small_parts):
    log = tmp_path / "ray-crlf.log.gz"
    log.write_bytes(gzip.compress(RAY.read_bytes().replace(b"\n", b"\r\n")))
    text = _streamed([log], "json")
    assert text == _whole([log], "json")
    rows = json.loads(text)
    calls = [ln for ln in RAY.read_text().splitlines() if " opCount " in ln and not ln.startswith("#")]
    assert len(rows) == len(calls)
    # source_line counts from the log's start in every part: each row's line holds a call
    lines = gzip.decompress(log.read_bytes()).decode().split("\r\n")
    assert all(" opCount " in lines[r["source_line"] - 1] for r in rows)


def _synthetic(path: Path) -> None:
    spec = importlib.util.spec_from_file_location("synth_nccl_log", ROOT / "benchmarks" / "synth_nccl_log.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.build(path, 4e5, init=True)


def test_a_log_split_by_line_count_keeps_its_init_ranks_in_every_part(tmp_path, monkeypatch):
    """Init COMPLETE lines (each process's world rank) only at the top of the first file; every call of
    the later files and of the later parts of each file takes its process's rank from them."""
    whole, parts = tmp_path / "ray.log", tmp_path / "parts"
    _synthetic(whole)
    lines = whole.read_text().splitlines(keepends=True)
    parts.mkdir()
    for i in range(0, len(lines), 1000):  # split -l 1000: xaa, xab, ...
        (parts / f"xa{chr(ord('a') + i // 1000)}").write_text("".join(lines[i : i + 1000]))
    ranks = {m.group(1): int(m.group(2)) for m in
             (re.search(r" (\S+:\d+):\d+ \[\d+\] NCCL INFO comm \S+ rank (\d+) ", ln)
              for ln in lines if "Init COMPLETE" in ln)}
    assert len(ranks) == 128 and len(list(parts.iterdir())) > 2
    monkeypatch.setattr(nccl_log, "BLOCK_BYTES", 1 << 14)
    monkeypatch.setattr(streamed, "PART_BYTES", 1 << 15)
    for path in (whole, parts):
        text = _streamed([path], "json")
        assert text == _whole([path], "json")
        rows = json.loads(text)
        assert len(rows) == sum(" opCount " in ln for ln in lines)
        files = {f: Path(f).read_text().splitlines() for f in {r["file"] for r in rows}}
        for r in rows:  # the rank of the process (host:pid) on the row's own line of its file
            line = files[r["file"]][r["source_line"] - 1]
            assert r["rank"] == ranks[re.search(r" (\S+:\d+):\d+ \[\d+\] NCCL INFO", line).group(1)]


def test_parts_hold_a_bounded_number_of_rows(tmp_path, monkeypatch):
    """Memory flat in the log's length: no part holds more than the calls of about PART_BYTES of log."""
    log = tmp_path / "ray.log"
    _synthetic(log)
    monkeypatch.setattr(nccl_log, "BLOCK_BYTES", 1 << 14)
    ts = read_traces(log, aggregate=True)
    sizes = [len(p) for p in streamed.row_parts(ts, part_bytes=1 << 15)]
    shortest = min(len(ln) for ln in log.read_text().splitlines() if " opCount " in ln)
    assert len(sizes) > 8 and max(sizes) <= ((1 << 15) + (1 << 14)) // shortest
    assert sum(sizes) == log.read_text().count(" opCount ")


def test_a_bad_line_under_strict_is_refused_before_any_row_is_written(tmp_path):
    lines = RAY.read_text().splitlines(keepends=True)
    bad = tmp_path / "bad.log"
    bad.write_text("".join(lines[:5]) + lines[5].replace("datatype 7", "datatype x") + "".join(lines[6:]))
    res = CliRunner().invoke(app, ["trace", "summary", str(bad), "--format", "json", "--strict"])
    assert res.exit_code == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and f"{bad}:6" in res.stderr and "Traceback" not in res.output


def test_the_second_read_tells_its_progress(tmp_path, monkeypatch):
    """(bytes read, bytes in all, files read, files), over the NCCL logs only, rising to their size."""
    log = tmp_path / "ray.log"
    _synthetic(log)
    monkeypatch.setattr(nccl_log, "BLOCK_BYTES", 1 << 14)
    # beside it a comms summary, which states no world size (the tutorial's verbose lines state 16, which
    # the log's 128 ranks would contradict)
    other = DATA / "deepspeed-gloo-zero3-n4" / "comms-summary.txt"
    ts = read_traces([log, other], aggregate=True)
    told = []
    rows = sum(len(p) for p in streamed.row_parts(ts, part_bytes=1 << 15, progress=lambda *a: told.append(a)))
    size = log.stat().st_size
    assert rows == len(read_traces([log, other]).table)
    assert told[-1] == (size, size, 1, 1) and any(t[2] == 0 for t in told)  # during the log, and after it
    assert [t[0] for t in told] == sorted(t[0] for t in told) and all(t[1] == size for t in told)
