"""An aggregated read of an NCCL log (one row per distinct call, with its number of calls) gives
the same summary, metadata and skip log as the read of every call, in memory that does not grow
with the log's length; the totals are counted from the files here."""

import importlib.util
import re
from pathlib import Path

import pandas as pd
import pytest

from zerocalc.traces import nccl_log, read_traces

ROOT = Path(__file__).resolve().parent.parent
NCCL_LOGS = sorted((ROOT / "tests" / "data" / "traces" / "nccl-debug").glob("*.txt"))


def _same(a, b):
    pd.testing.assert_frame_equal(a.summary(), b.summary())
    assert a.meta == b.meta
    assert (a.skipped.count, a.skipped.examples) == (b.skipped.count, b.skipped.examples)


@pytest.mark.parametrize("log", NCCL_LOGS, ids=lambda p: p.name)
def test_bundled_logs_summarise_alike(log):
    calls, agg = read_traces(log), read_traces(log, aggregate=True)
    _same(calls, agg)
    lines = log.read_text().splitlines()
    expected = sum("opCount" in ln and not ln.startswith("#") for ln in lines)
    assert agg.table["aggregated_calls"].sum() == expected


@pytest.mark.parametrize("name", ["deepspeed-comms", "deepspeed-gloo-zero3-n4", "kineto", "nccl-tests"])
def test_other_formats_keep_their_rows(name):
    # an aggregated read changes NCCL logs only (a DeepSpeed summary row has its own "calls")
    path = ROOT / "tests" / "data" / "traces" / name
    files = [path] if name != "nccl-tests" else [path / "all_gather_perf-bf16-2gpu.txt"]
    calls, agg = read_traces(files), read_traces(files, aggregate=True)
    pd.testing.assert_frame_equal(calls.table, agg.table)
    _same(calls, agg)


def test_synthetic_log_in_chunks(monkeypatch, tmp_path):
    spec = importlib.util.spec_from_file_location("synth_nccl_log", ROOT / "benchmarks" / "synth_nccl_log.py")
    synth = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(synth)
    log = tmp_path / "ray.log"
    n, _ = synth.build(log, 2.5 * nccl_log.BLOCK_BYTES, init=True)
    text = log.read_text()
    calls = read_traces(log, workers=1)
    monkeypatch.setattr("zerocalc.traces.reader.SPLIT_MIN_BYTES", 1 << 20)
    agg = read_traces(log, workers=2, aggregate=True)  # scanned in chunks by two processes
    _same(calls, agg)
    # a row per distinct (process, communicator, op, datatype, group size) of the 128 ranks
    assert agg.table["aggregated_calls"].sum() == n == text.count("opCount ")
    assert len(agg.table) <= 128 * len(synth.BUCKETS)
    counts = [int(c) for c in re.findall(r" count (\d+) ", text)]
    assert agg.table["in_nelems"].sum() == sum(counts)  # AllReduce: in = count
    assert agg.table["rank"].notna().all()  # from the Init lines
