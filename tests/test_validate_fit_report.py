"""``fit`` says what it left out and why, flags fits whose uncertainty is as large as the value,
counts distinct sizes, fills a missing group size from the trace's world_size, and prints the
reader's skipped lines (``--strict`` stops at the first).

Expected values are read off the trace files (the arithmetic is in the comments).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.errors import TraceMismatchError
from zerocalc.traces import read_traces
from zerocalc.validate import fit_table, fit_trace

DATA = Path(__file__).parent / "data" / "traces"
GLOO0 = str(DATA / "deepspeed-gloo-zero3-n4" / "rank0.json.gz")
RESNET = str(DATA / "kineto" / "ddp-resnet50-a100-rank0-of-2.json.gz")
DLRM = str(DATA / "kineto" / "dlrm-v100-8ranks")
H100 = DATA / "nccl-tests" / "all_reduce_perf-16xH100-2nodes.txt"
runner = CliRunner()


def test_fit_names_what_it_left_out_and_flags_the_broadcast_fit():
    # Rank 0 of the ZeRO-3 run: 3 profiled steps, each one all-gather and one reduce-scatter of the
    # whole 377,856-element vector and one 0-d all-reduce: 3 calls of ONE size each, which cannot
    # fit two parameters. Only the 6 initial broadcasts have two sizes.
    r = runner.invoke(app, ["fit", GLOO0])
    assert r.exit_code == 0, r.output
    for op in ("all_gather", "reduce_scatter", "all_reduce"):
        assert f"skipped: {op} on 4 ranks: 3 call(s) of 1 size left out: a fit needs at least two sizes" \
            in r.stdout
    ts = read_traces(GLOO0)
    bc = ts.table[ts.table["op"] == "broadcast"]
    sizes = len(set((bc["in_nelems"] * bc["elem_bytes"]).tolist()))
    assert len(bc) == 6
    assert f"broadcast on 4 ranks, {sizes} sizes (6 calls)" in r.stdout
    # busbw 0.00037 ± 0.00034 GB/s: the error is 92 % of the value
    assert "unreliable: the standard error of the bus bandwidth" in r.stdout


def test_fit_counts_distinct_sizes_and_flags_resnet():
    # ResNet-50 DDP: 5 gradient buckets × 3 profiled steps = 15 all-reduce calls of 5 sizes
    r = runner.invoke(app, ["fit", RESNET])
    assert r.exit_code == 0, r.output
    head = next(ln for ln in r.stdout.splitlines() if "all_reduce on 2 ranks" in ln)
    assert "5 sizes (15 calls)" in head
    block = r.stdout.split(head)[1].split("ddp-resnet50")[0]
    busbw, se = map(float, re.search(r"bus bandwidth ([\d.]+) ± ([\d.]+) GB/s", block).groups())
    assert se >= busbw / 2 and "unreliable" in block


def test_h100_sweep_fit_is_not_flagged():
    r = runner.invoke(app, ["fit", str(H100), "--format", "json"])
    (row,) = json.loads(r.stdout)
    # 31 sizes 8 B … 8 GiB, one row each
    assert row["n_sizes"] == 31 and row["n_points"] == 31 and row["reliable"] is True
    assert "unreliable" not in row["note"]


def test_fit_fills_the_group_size_from_world_size():
    # The DLRM traces (2021 schema) record no group size for their collectives; world_size is 8.
    ts = read_traces(DLRM)
    assert ts.table["group_size"].isna().any()
    res = fit_trace(ts.table, meta=ts.meta)
    assert {(f.op, f.group_size) for f in res.fits} >= {("all_reduce", 8)}
    assert any("world_size 8" in t for t in res.notes)
    r = runner.invoke(app, ["fit", DLRM])
    assert r.exit_code == 0, r.output
    # three all-reduce buckets per step (394,241 + 112 + 226,960 elements): 3 sizes
    assert re.search(r"all_reduce on 8 ranks, 3 sizes", r.stdout)
    assert "taken as the trace's world_size 8" in r.stdout


def test_fit_prints_skipped_lines_and_strict_stops(tmp_path):
    # the H100 sweep with a result row cut after its fifth column, after the 8 GiB row
    lines = H100.read_text().splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.split()[:1] == ["8589934592"])
    lines.insert(at + 1, "  17179869184    4294967296     float     sum      -1")
    f = tmp_path / "cut.txt"
    f.write_text("\n".join(lines) + "\n")
    r = runner.invoke(app, ["fit", str(f)])
    assert r.exit_code == 0, r.output
    assert f"note: skipped 1 unreadable line (--strict stops at the first), e.g. {f}:{at + 2}:" in r.stdout
    j = runner.invoke(app, ["fit", str(f), "--format", "json"])
    assert json.loads(j.stdout)[0]["n_sizes"] == 31 and "skipped 1 unreadable line" in j.stderr
    s = runner.invoke(app, ["fit", str(f), "--strict"])
    assert s.exit_code == 2 and f":{at + 2}:" in s.stderr and "Traceback" not in s.stderr


def test_nothing_to_fit_says_why():
    # rank 0's all-gathers alone: 3 calls of one size (see above)
    ts = read_traces(GLOO0)
    ag = ts.table[ts.table["op"] == "all_gather"]
    assert fit_trace(ag, meta=ts.meta).fits == ()
    with pytest.raises(TraceMismatchError, match=r"nothing to fit: all_gather on 4 ranks: 3 call\(s\) of 1 "):
        fit_table(ag, meta=ts.meta)
