"""``zerocalc check`` output: the reader's skip note and --strict, ranks told apart by process,
one rank (N = 1), the reused-parameters explanation in the summary, and "1 call" wording.

Expected values are derived by hand (arithmetic in the comments) from the NCCL lines written
here or from tests/data/traces.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.traces import read_traces
from zerocalc.validate import check

DATA = Path(__file__).parent / "data" / "traces"
GLOO = sorted(str(p) for p in (DATA / "deepspeed-gloo-zero3-n4").glob("rank*.json.gz"))
runner = CliRunner()

# The layout of tests/data/traces/nccl-debug/ddp-allreduce-128ranks-L4-ray.txt's lines; datatype 6 is
# ncclFloat16.
LINE = ("{host}:{pid}:{pid} [0] NCCL INFO AllReduce: opCount {op:x} sendbuff 0x78d056200000 "
        "recvbuff 0x78d056200000 count {count} datatype 6 op 0 root 0 comm 0x78cfda045840 "
        "[nranks={nranks}] stream 0x78d07125e5e0")
# A line cut off in the middle (a log truncated while it was written)
CUT = "node0:1000:1000 [0] NCCL INFO AllReduce: opCount 99 sendbuff 0x7f0000000000 recvbuff"


def _log(path: Path, procs, nranks: int, tail: str = "") -> Path:
    """3 steps of two fp16 buckets (3,000,000 and 2,000,000 elements) per process, no rank records."""
    lines = [LINE.format(host=h, pid=pid, op=2 * s + b, count=c, nranks=nranks)
             for s in range(3) for b, c in enumerate((3_000_000, 2_000_000)) for h, pid in procs]
    path.write_text("\n".join(lines + ([tail] if tail else [])) + "\n")
    return path


FOUR = [("node0", 1000), ("node0", 1001), ("node1", 1000), ("node1", 1001)]


def test_check_prints_the_skip_note_and_strict_stops(tmp_path):
    f = _log(tmp_path / "cut.txt", FOUR, 4, tail=CUT)
    r = runner.invoke(app, ["check", str(f)])
    assert r.exit_code == 0, r.output
    # 4 processes × 6 calls = 24 lines, then the cut line: line 25
    assert f"note: skipped 1 unreadable line (--strict stops at the first), e.g. {f}:25:" in r.stdout
    d = json.loads(runner.invoke(app, ["check", str(f), "--format", "json"]).stdout)
    assert d["skipped_lines"]["count"] == 1 and d["skipped_lines"]["examples"][0][1] == 25
    s = runner.invoke(app, ["check", str(f), "--strict"])
    assert s.exit_code == 2 and ":25:" in s.stderr and len(s.stderr.strip().splitlines()) == 1


def test_check_without_skips_prints_no_skip_note(tmp_path):
    r = runner.invoke(app, ["check", str(_log(tmp_path / "ok.txt", FOUR, 4))])
    assert r.exit_code == 0 and "skipped" not in r.stdout


def test_check_says_ranks_were_told_apart_by_process(tmp_path):
    r = runner.invoke(app, ["check", str(_log(tmp_path / "ok.txt", FOUR, 4))])
    # node0:1000 and node1:1000 share a pid but not a host: 4 processes, not 2
    assert "ranks: 4, told apart by process" in r.stdout
    # Ψ = 3,000,000 + 2,000,000; a 4-rank ring all-reduce sends 2·3/4 · 5e6 · 2 B = 15.00 MB per rank
    assert "Ψ = 5,000,000" in r.stdout and "15.00 MB" in r.stdout
    d = json.loads(runner.invoke(app, ["check", str(tmp_path / "ok.txt"), "--format", "json"]).stdout)
    assert d["ranks"] == [0, 1, 2, 3] and "told apart by process (host + pid)" in d["ranks_how"]


def test_one_rank_has_nothing_to_compare(tmp_path):
    f = _log(tmp_path / "one.txt", [("node0", 1000)], 1)
    ts = read_traces(f)
    res = check(ts.table, meta=ts.meta)
    assert res.measurement.n == 1 and res.matches == ()
    assert all(math.isnan(c.ratio) and not c.pattern_match for c in res.comparisons)
    assert any("no cross-rank traffic" in t for t in res.notes)
    r = runner.invoke(app, ["check", str(f)])
    assert r.exit_code == 0, r.output
    assert "no cross-rank traffic to compare" in r.stdout
    assert not re.search(r"1\.000\s+no", r.stdout) and "does not have" not in r.stdout
    d = json.loads(runner.invoke(app, ["check", str(f), "--format", "json"]).stdout)
    assert all(s["ratio"] is None and s["pattern_match"] is False for s in d["schemes"])


def test_summary_names_zero3_with_parameters_kept_for_backward():
    # Measured per step: all-gather Ψ + reduce-scatter Ψ. zero3 and fsdp-full-shard gather 2Ψ (forward
    # and backward) and reduce-scatter Ψ; fsdp-hybrid on one node of 4 (G = N = 4) has no inter-node
    # group, so it is the same. With the forward gather kept for backward each gathers Ψ: exactly the
    # measured pattern. dp, zero1/2 and the others gather nothing twice.
    r = runner.invoke(app, ["check", *GLOO, "--psi", "377856", "--n", "4"])
    assert r.exit_code == 0, r.output
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("consistent with the trace"))
    assert line.startswith("consistent with the trace (best first): zero1 = zero2 = deepspeed-zero3 (reuse "
                           "distance ≥ 2Ψ: parameters kept for backward) = fsdp-shard-grad-op; also zero3, "
                           "fsdp-full-shard, fsdp-hybrid with the parameters kept for backward")
    assert "stage3_max_reuse_distance" in line
    d = json.loads(runner.invoke(app, ["check", *GLOO, "--psi", "377856", "--n", "4", "--format",
                                       "json"]).stdout)
    assert d["matches_if_parameters_kept_for_backward"] == ["zero3", "fsdp-full-shard", "fsdp-hybrid"]


def test_resnet_summary_has_no_reuse_sentence():
    # DDP all-reduces: no scheme gathers parameters in this pattern
    r = runner.invoke(app, ["check", str(DATA / "kineto" / "ddp-resnet50-a100-rank0-of-2.json.gz")])
    assert "consistent with the trace (best first): dp\n" in r.stdout and "kept for backward" not in r.stdout


def test_one_call_is_singular():
    # gloo ZeRO-3: one 0-d fp64 all-reduce per rank per step (the scalar category)
    r = runner.invoke(app, ["check", *GLOO, "--psi", "377856", "--n", "4"])
    assert re.search(r"scalar\s+1 call\s", r.stdout)
    assert not re.search(r"\b1 calls\b", r.stdout)
