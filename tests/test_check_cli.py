"""``zerocalc check`` and ``zerocalc fit`` through typer's CliRunner, on the real traces.

Expected values are the hand-derived ones of tests/test_validate.py (arithmetic repeated here).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from zerocalc.cli import app

DATA = Path(__file__).parent / "data" / "traces"
RESNET = str(DATA / "kineto" / "ddp-resnet50-a100-rank0-of-2.json.gz")
GLOO = sorted(str(p) for p in (DATA / "deepspeed-gloo-zero3-n4").glob("rank*.json.gz"))
H100 = str(DATA / "nccl-tests" / "all_reduce_perf-16xH100-2nodes.txt")

runner = CliRunner()


def _run(*args):
    return runner.invoke(app, list(args))


def test_check_json_contract_resnet():
    r = _run("check", RESNET, "--format", "json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["psi"] == 2049000 + 7875584 + 6563840 + 6637568 + 2431040 == 25_557_032
    assert d["n"] == 2 and d["steps"] == 3 and d["matches"] == ["dp"]
    dp = next(s for s in d["schemes"] if s["scheme"] == "dp")
    # N = 2 ring all-reduce: one full vector per rank, 25,557,032 × 4 B
    assert dp["measured_bytes_per_rank_per_step"] == dp["predicted_bytes_per_rank_per_step"] == 25_557_032 * 4
    assert dp["ratio"] == 1.0 and dp["pattern_match"] is True
    for s in d["schemes"]:
        assert {"scheme", "predicted_bytes_per_rank_per_step", "measured_bytes_per_rank_per_step", "ratio",
                "pattern_match"} <= set(s)
    assert {c["category"] for c in d["categories"] if c["calls_per_rank_per_step"]} == {"step", "buffers"}


def test_check_table_gloo_names_consistent_schemes():
    r = _run("check", *GLOO, "--psi", "377856", "--n", "4")
    assert r.exit_code == 0, r.output
    # one all-gather and one reduce-scatter of Ψ each: the three cannot be told apart, so no order among them
    # (DeepSpeed ZeRO-3 with the forward gather kept for backward, the regime it is said to match at)
    assert ("consistent with the trace (best first): zero1 = zero2 = deepspeed-zero3 (reuse distance ≥ 2Ψ: "
            "parameters kept for backward) = fsdp-shard-grad-op" in r.stdout)
    assert "cannot tell apart" in r.stdout


def test_check_scheme_filter():
    r = _run("check", RESNET, "--scheme", "dp,zero3", "--format", "json")
    assert r.exit_code == 0, r.output
    assert [s["scheme"] for s in json.loads(r.stdout)["schemes"]] == ["dp", "zero3"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ((RESNET, "--psi", "1000"), "contradicts the trace"),
        ((RESNET, GLOO[0]), "world size"),
        ((RESNET, "--n", "8"), "--n 8 contradicts"),
        ((RESNET, "--scheme", "zero9"), "unknown scheme"),
        ((RESNET, "--format", "xml"), "--format"),
        ((str(DATA / "nccl-tests" / "all_gather_perf-16xH100-a3mega.txt"),), "names no GPU"),
    ],
)
def test_check_bad_input_one_line_exit_2(args, needle):
    r = _run("check", *args)
    assert r.exit_code == 2
    assert needle in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_check_no_collectives(tmp_path):
    # A profiler trace with a step and a matmul, and no communication at all.
    f = tmp_path / "nocomm.json"
    f.write_text(json.dumps({
        "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 2},
        "traceEvents": [
            {"name": "ProfilerStep#1", "ph": "X", "cat": "user_annotation", "ts": 1, "dur": 5,
             "pid": 1, "tid": 1},
            {"name": "aten::mm", "ph": "X", "cat": "cpu_op", "ts": 2, "dur": 1, "pid": 1, "tid": 1},
        ],
    }))
    r = _run("check", str(f))
    assert r.exit_code == 2 and "no collectives" in r.stderr


def test_check_of_sends_and_receives_only_says_what_it_found(tmp_path):
    # NVIDIA/nccl issue 584's log: its "NCCL INFO Send:" and "NCCL INFO Recv:" lines are its only calls
    log = DATA / "nccl-debug" / "send-recv-2ranks.txt"
    text = log.read_text()
    sends, recvs = text.count("NCCL INFO Send:"), text.count("NCCL INFO Recv:")
    assert (sends, recvs) == (6, 1)
    r = _run("check", str(log))
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1
    assert f"only point-to-point calls, {sends} send and {recvs} recv" in r.stderr
    # trace summary says what a receive took in: its output (its input is empty)
    r = _run("trace", "summary", str(log))
    assert r.exit_code == 0 and " recv " in r.stdout
    recv_lines = [line for line in r.stdout.splitlines() if line.split()[4:5] == ["recv"]]
    assert recv_lines and all(" out " in line for line in recv_lines)


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_fit_h100(fmt):
    r = _run("fit", H100, "--format", fmt)
    assert r.exit_code == 0, r.output
    if fmt == "csv":
        import io

        df = pd.read_csv(io.StringIO(r.stdout))
        row = df.iloc[0]
    elif fmt == "json":
        row = json.loads(r.stdout)[0]
    else:
        assert "bus bandwidth" in r.stdout and "latency" in r.stdout
        return
    # busbw column at 8 GiB: 338.82 GB/s; small messages take 123–147 µs
    assert abs(row["busbw_GBps"] - 338.82) < 10
    assert 120e-6 < row["latency_s"] < 135e-6
    assert row["group_size"] == 16 and row["op"] == "all_reduce"


def test_empty_or_repeated_scheme_lists():
    """`--scheme ""` names no scheme: an error naming the option; a name given twice is compared once."""
    r = _run("check", RESNET, "--scheme", " , ")
    assert r.exit_code == 2 and r.stderr.startswith("error: --schemes:") and r.stderr.count("\n") == 1
    r = _run("check", RESNET, "--scheme", "dp,zero2", "--scheme", "dp", "--format", "json")
    assert r.exit_code == 0, r.output
    assert [s["scheme"] for s in json.loads(r.stdout)["schemes"]] == ["dp", "zero2"]


def test_check_says_the_reuse_regime_deepspeed_zero3_matched_at():
    # tests/data/traces/real-runs/README.md: ds-zero3-ga4-reuse0-prefetch0 gathers every layer again in
    # backward (stage3_max_reuse_distance 0); ds-zero3-ga4 keeps the forward gather
    runs = DATA / "real-runs"
    r = _run("check", str(runs / "ds-zero3-ga4-reuse0-prefetch0"))
    assert r.exit_code == 0, r.output
    line = next(x for x in r.stdout.splitlines() if x.startswith("consistent with the trace"))
    assert "deepspeed-zero3 (reuse distance 0: every parameter gathered again in backward)" in line
    r = _run("check", str(runs / "ds-zero3-ga4"), "--format", "json")
    d = json.loads(r.stdout)
    assert "deepspeed-zero3" in d["matches"]
    assert "parameters kept for backward" in d["matches_reuse_regime"]["deepspeed-zero3"]["regime"]
    r = _run("check", str(runs / "ds-zero3-ga4"), "--reuse-distance", "0", "--format", "json")
    assert "deepspeed-zero3" not in json.loads(r.stdout)["matches"]


def test_check_refuses_a_negative_reuse_distance():
    r = runner.invoke(app, ["check", str(DATA / "real-runs" / "ds-zero3-ga4"), "--reuse-distance", "-1"])
    assert r.exit_code == 2 and "--reuse-distance" in r.stderr and len(r.stderr.strip().splitlines()) == 1
