"""`check` on NCCL logs folded: each process's repeated steps dropped from the read, the kept calls
weighted by the blocks they stand for. The folded check must print exactly what the full read's
check prints, on every bundled NCCL log and on synthetic logs of the shapes real runs take."""

import importlib.util
import json
import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.traces import nccl_fold, nccl_log, read_traces, reader
from zerocalc.traces.nccl_fold import _repeating_end
from zerocalc.traces.reader import read_folded

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "traces"
runner = CliRunner()

#: Every bundled NCCL debug log.
LOGS = sorted((DATA / "nccl-debug").glob("*.txt"))

OPS = {"ar": "AllReduce", "ag": "AllGather", "rs": "ReduceScatter", "bc": "Broadcast"}


def _synth():
    spec = importlib.util.spec_from_file_location("synth_nccl_log", ROOT / "benchmarks" / "synth_nccl_log.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _write(path: Path, streams: list[list[tuple[str, int]]], *, nranks: int | None = None, dtype: int = 7,
           init: bool = False, seed: int = 0) -> int:
    """A COLL log of one process per stream (its calls as (op, count)), the processes' lines
    interleaved at random, each process counting its own opCount; with ``init`` an Init COMPLETE line
    per process first (process i is rank i). Returns the COLL lines written."""
    rng = random.Random(seed)
    n = nranks or len(streams)
    lines = []
    if init:
        lines += [f"node{i // 8}:{100 + i}:{200 + i} [{i % 8}] NCCL INFO comm 0xc0 rank {i} nranks {n} "
                  f"cudaDev {i % 8} busId 1000 - Init COMPLETE\n" for i in range(len(streams))]
    at = [0] * len(streams)
    while any(a < len(s) for a, s in zip(at, streams, strict=True)):
        i = rng.choice([k for k, s in enumerate(streams) if at[k] < len(s)])
        op, count = streams[i][at[i]]
        lines.append(f"node{i // 8}:{100 + i}:{200 + i} [{i % 8}] NCCL INFO {OPS[op]}: opCount {at[i]:x} "
                     f"sendbuff 0x7f00 recvbuff 0x7f80 count {count} datatype {dtype} op 0 root 0 comm 0xc0 "
                     f"[nranks={n}] stream 0x5\n")
        at[i] += 1
    path.write_text("".join(lines))
    return sum(map(len, streams))


def _cli_json(monkeypatch, paths, *options, fold=True):
    if not fold:  # the full read: nothing folded
        monkeypatch.setattr(nccl_fold, "fold", lambda logs, keep=nccl_fold.KEEP: None)
    res = runner.invoke(app, ["check", *map(str, paths), "--format", "json", *map(str, options)])
    monkeypatch.undo()
    return res.exit_code, res.stdout


def _same(monkeypatch, paths, *options):
    folded = _cli_json(monkeypatch, paths, *options)
    full = _cli_json(monkeypatch, paths, *options, fold=False)
    assert folded == full
    return json.loads(full[1]) if full[0] == 0 else None


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_a_materialised_sequence_read_is_the_full_table(log):
    # every call kept: the table, metadata and skip log of the full read
    from zerocalc.traces.nccl_fold import join, materialise

    full = read_traces(log, workers=1)
    with open(log, "rb") as f:
        calls = join([nccl_log.scan(f, str(log), sequence=True)], str(log))
    res = materialise(calls)
    pd.testing.assert_frame_equal(pd.DataFrame(res.columns)[list(full.table.columns)].astype(full.table.dtypes),
                                  full.table)
    assert res.meta == {k: v for k, v in full.meta[str(log)].items() if k not in ("rows", "skipped")}


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_every_bundled_log_checks_the_same_folded(monkeypatch, log):
    _same(monkeypatch, [log])
    _same(monkeypatch, [log], "--psi", "1e6", "--n", "2")


def test_the_repeating_end_of_a_sequence():
    step = [3, 3, 3, 4, 5]
    seq = np.array([9, 8, 7] + step * 20 + step[:2], np.int32)  # a prefix, 20 steps, a partial one
    per, reps = _repeating_end(seq, 8)
    assert per == 5 and reps == 20  # the run's blocks start at the step's 3rd call: 20 of them end it
    assert _repeating_end(np.array(step * 9, np.int32), 8) == (0, 0)  # 9 blocks: nothing to drop
    assert _repeating_end(np.arange(100, dtype=np.int32), 8) == (0, 0)


def test_a_ddp_log_folds_to_its_first_and_last_steps(monkeypatch, tmp_path):
    synth = _synth()
    for init in (False, True):
        log = tmp_path / f"ddp{init}.txt"
        lines, steps = synth.build(log, 1.2e6, ranks=8, init=init)
        ts, folded = read_folded(log, workers=1)
        # each process: its first step and the last KEEP, 8 buckets each (5 of one size: same code)
        assert folded.total == lines and folded.rows == 8 * (1 + nccl_fold.KEEP) * 8
        assert ts.meta[str(log)]["rows"] == lines
        out = _same(monkeypatch, [log])
        assert out["steps"] == steps and out["micro_batches"] == 1


@pytest.mark.slow
def test_zero3_with_micro_batches_a_prefix_and_a_partial_step(monkeypatch, tmp_path):
    # ZeRO-3-like: 4 micro-batches of gathers and reduce-scatters, then a scalar all-reduce; a few
    # one-off broadcasts first, and the log cut inside the last step
    mb = [("ag", 1000), ("ag", 3000), ("ag", 3000), ("ag", 1000), ("rs", 12000), ("rs", 4000)]
    step = mb * 4 + [("ar", 1)]
    streams = [[("bc", 500), ("bc", 700)] + step * 60 + step[:7] for _ in range(4)]
    log = tmp_path / "zero3.txt"
    _write(log, streams, init=True)
    ts, folded = read_folded(log, workers=1)
    assert folded is not None and folded.rows < folded.total / 4
    out = _same(monkeypatch, [log])
    # 1,507 calls after the prefix: 60 blocks of 25 end the log, the 9 calls before them are one-off
    assert out["steps"] == 60 and "9 call(s) before the first repetition" in out["steps_how"]
    assert out["micro_batches"] == 1  # a log marks no optimizer steps: K is not read from it
    for options in (["--micro-batches", "2"], ["--psi", "16000"], ["--n", "4"], ["--dtype", "bf16"],
                    ["--schemes", "zero3,dp"], ["--steps", "60"]):
        _same(monkeypatch, [log], *options)


@pytest.mark.slow
def test_processes_with_different_step_counts_and_a_rotated_log(monkeypatch, tmp_path, rotate):
    step = [("ar", 4096), ("ar", 4096), ("ar", 1024), ("ar", 1)]
    streams = [[("bc", 10)] + step * (40 if i == 0 else 50) for i in range(4)]
    log = tmp_path / "differ.txt"
    _write(log, streams)
    assert read_folded(log, workers=1)[1] is not None
    out = _same(monkeypatch, [log])
    assert any("ranks differ" in n for n in out["notes"])
    # the same log rotated by line count into 3 parts: one run, its files in order
    parts = rotate(log, "differ")
    rotated = _same(monkeypatch, parts)
    assert rotated["steps"] == out["steps"] and rotated["ranks"] == out["ranks"]


@pytest.mark.slow
def test_a_group_of_six_is_measured_on_the_full_read(monkeypatch, tmp_path):
    # a ring all-reduce on 6 ranks sends 10/6 of its bytes: sums that are not exact in floating point
    # could differ in their last bit, so the check measures every call (from the sequences read)
    streams = [[("ar", 3000), ("ar", 1000)] * 30 for _ in range(6)]
    log = tmp_path / "six.txt"
    _write(log, streams)
    folded = read_folded(log, workers=1)[1]
    assert folded is not None
    pd.testing.assert_frame_equal(folded.full().table, read_traces(log, workers=1).table)
    made = []
    real = nccl_fold.materialise
    monkeypatch.setattr(nccl_fold, "materialise", lambda c, kept=None: made.append(kept) or real(c, kept))
    code, out = _cli_json(monkeypatch, [log])
    assert code == 0 and made[-1] is None  # every call's table made
    assert (code, out) == _cli_json(monkeypatch, [log], fold=False)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::RuntimeWarning")
def test_a_folded_check_on_a_dask_cluster_and_in_chunks_is_the_full_read(monkeypatch, tmp_path):
    # a log of 3 chunks of 256 kB: scanned in chunks locally and as chunk tasks on a loopback cluster
    from distributed import LocalCluster

    log = tmp_path / "ray.log"
    lines, steps = _synth().build(log, 2.5 * (1 << 18), ranks=8)
    full = _cli_json(monkeypatch, [log], fold=False)
    monkeypatch.setattr(reader, "SPLIT_MIN_BYTES", 1 << 18)
    monkeypatch.setattr(nccl_log, "BLOCK_BYTES", 1 << 18)
    assert read_folded(log)[1].total == lines  # folded, in chunks
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        for options in ((), ("--scheduler", cluster.scheduler_address)):
            res = runner.invoke(app, ["check", str(log), "--format", "json", *options])
            assert (res.exit_code, res.stdout) == full
    assert json.loads(full[1])["steps"] == steps
