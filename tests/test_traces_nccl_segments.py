"""`check` on a long NCCL log read in compacted segments: each process's repeated blocks dropped as
the log is read, put back as codes for the fold. The fold, and so the check, must be what a read of
every call gives; where it cannot be, the log is read again in full."""

import json
import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.traces import nccl_fold, nccl_log, nccl_segments, read_traces, reader
from zerocalc.traces.nccl_fold import KEEP, _expand, fold, join, materialise
from zerocalc.traces.nccl_segments import _droppable, join_segments, segment
from zerocalc.traces.reader import read_folded

runner = CliRunner()
OPS = {"ar": "AllReduce", "ag": "AllGather", "rs": "ReduceScatter", "bc": "Broadcast"}
STEP = [("ag", 1000), ("ag", 3000), ("rs", 4000), ("ar", 1024), ("ar", 1)]


def _write(path: Path, streams: list[list[tuple[str, int]]], seed: int = 0, tuning_at: int | None = None,
           late: int = 0) -> int:
    """A COLL log of one process per stream (its calls as (op, count)), the processes' lines
    interleaved at random, each counting its own opCount; the last stream's calls ``late`` calls
    before the end (0: anywhere); ``tuning_at``: a TUNING line after that line. Returns the COLL lines
    written."""
    rng = random.Random(seed)
    lines, at = [], [0] * len(streams)
    left = sum(map(len, streams))
    while left:
        ready = [k for k, s in enumerate(streams) if at[k] < len(s)]
        if late and left > late and len(ready) > 1:
            ready = ready[:-1] if ready[-1] == len(streams) - 1 else ready
        i = rng.choice(ready)
        op, count = streams[i][at[i]]
        lines.append(f"node{i // 8}:{100 + i}:{200 + i} [{i % 8}] NCCL INFO {OPS[op]}: opCount {at[i]:x} "
                     f"sendbuff 0x7f00 recvbuff 0x7f80 count {count} datatype 7 op 0 root 0 comm 0xc0 "
                     f"[nranks={len(streams)}] stream 0x5\n")
        at[i] += 1
        left -= 1
        if tuning_at is not None and len(lines) == tuning_at:
            lines.append(f"node{i // 8}:{100 + i}:{200 + i} [{i % 8}] NCCL INFO {OPS[op]}: {count * 4} Bytes "
                         "-> Algo RING proto SIMPLE channel{Lo..Hi}={0..1}\n")
    path.write_text("".join(lines))
    return sum(map(len, streams))


def _streams(steps: int = 120, one_off: bool = False) -> list[list[tuple[str, int]]]:
    # 8 processes: one stops after a third of the steps (its calls in the first segments only), and
    # a ninth process's few calls all late in the log; ``one_off``: a process makes a one-off
    # broadcast late in its run (the fold then keeps every step before it)
    streams = [[("bc", 500)] + STEP * (steps if i != 3 else steps // 3) for i in range(8)]
    streams.append([("bc", 500), ("ar", 1024), ("bc", 500)])
    if one_off:
        streams[5].insert(len(streams[5]) - 12 * len(STEP), ("bc", 77))
    return streams


def _pieces(path: Path, size: int) -> list[bytes]:
    """The log cut into runs of whole lines of about ``size`` bytes (as chunks are cut)."""
    data, out, pos = path.read_bytes(), [], 0
    while pos < len(data):
        end = data.rfind(b"\n", pos, pos + size) + 1
        end = len(data) if end <= pos else end
        out.append(data[pos:end])
        pos = end
    return out


def test_a_segment_drops_whole_blocks_inside_its_run_and_they_expand_back():
    step = [3, 3, 3, 4, 5]
    seq = np.array([9, 8, 7] + step * 40 + step[:2], np.int32)  # 205 calls: 40 blocks of 5 from call 5
    dropped, after, per, n = _droppable(seq, KEEP)
    # kept: the blocks 0-1 (first two) and 2 (the first 3, 4 and 5 are in block 0: its neighbour),
    # the last KEEP + 1 and the one before them: blocks 30-39; dropped: 3-29, calls 20 to 154
    assert per == 5 and list(after) == [155] and list(n) == [27]
    assert np.array_equal(dropped, np.arange(20, 155))
    held = np.delete(seq, dropped)
    part = np.zeros(len(held), np.int64)
    codes, parts, index = _expand(held, part, np.array([20]), np.array([5]), np.array([27]))
    assert np.array_equal(codes, seq) and not parts.any()
    assert np.array_equal(index[index >= 0], np.arange(len(held))) and (index[20:155] == -1).all()


@pytest.mark.parametrize(("piece", "per_segment"), [(30000, 5), (150000, 1), (20000, 11)])
def test_segments_fold_as_the_whole_log(tmp_path, piece, per_segment):
    # segment boundaries inside steps, a process in the first segments only, a late one-off call
    log = tmp_path / "seg.txt"
    total = _write(log, _streams(), late=100)
    pieces = _pieces(log, piece)
    whole = join([nccl_log.scan_bytes(p, str(log), sequence=True) for p in pieces], str(log))
    scans = [nccl_log.scan_bytes(p, str(log), sequence=True) for p in pieces]
    segs = [segment(scans[i : i + per_segment], str(log)) for i in range(0, len(scans), per_segment)]
    assert sum(len(s.gaps) for s in segs) > 0  # calls were dropped while reading
    joined = join_segments(segs, str(log))
    assert joined.total == whole.total == len(whole) == total and len(joined) < total
    a, b = fold([whole]), fold([joined])
    assert (a.total, a.rows) == (b.total, b.rows)
    assert np.array_equal(whole.line[a.kept[0]], joined.line[b.kept[0]])
    assert np.array_equal(a.weighted, b.weighted) and np.array_equal(a.weight, b.weight)
    ra, rb = materialise(whole, a.kept[0]), materialise(joined, b.kept[0])
    pd.testing.assert_frame_equal(pd.DataFrame(ra.columns), pd.DataFrame(rb.columns))
    assert ra.meta == rb.meta


def _json(paths):
    res = runner.invoke(app, ["check", *map(str, paths), "--format", "json"])
    return res.exit_code, res.stdout


@pytest.fixture
def small_segments(monkeypatch):
    """Chunks of 32 kB, segments of 160 kB, every log split; a spy on the segments joined: the runs of
    calls dropped while reading, per log."""
    monkeypatch.setattr(reader, "SPLIT_MIN_BYTES", 1 << 15)
    monkeypatch.setattr(nccl_log, "BLOCK_BYTES", 1 << 15)
    monkeypatch.setattr(nccl_segments, "SEGMENT_BYTES", 5 << 15)
    gaps = []
    real = nccl_segments.join_segments
    monkeypatch.setattr(nccl_segments, "join_segments",
                        lambda parts, file: gaps.append(sum(len(p.gaps) for p in parts)) or real(parts, file))
    return gaps


def _full(monkeypatch, paths):
    """The check of every call: nothing folded, nothing split or compacted."""
    with monkeypatch.context() as m:
        m.setattr(nccl_fold, "fold", lambda logs, keep=KEEP: None)
        m.setattr(nccl_segments, "SEGMENT_BYTES", 1 << 40)
        m.setattr(reader, "SPLIT_MIN_BYTES", 1 << 40)
        return _json(paths)


@pytest.mark.slow
def test_check_of_a_log_in_segments_is_the_full_read(monkeypatch, tmp_path, small_segments):
    log = tmp_path / "seg.txt"
    _write(log, _streams(200), late=100)
    full = _full(monkeypatch, [log])
    assert full[0] == 0 and json.loads(full[1])["steps"] == 200
    # split between this process and a worker (one segment of 3 chunks each at least), and read
    # sequentially in segments
    for workers in (2, 1):
        monkeypatch.setattr(reader.os, "cpu_count", lambda w=workers: w)
        small_segments.clear()
        ts, folded = read_folded(log, workers=workers)
        assert folded is not None and ts.meta[str(log)]["rows"] == folded.total
        assert _json([log]) == full
    assert any(small_segments)


@pytest.mark.slow
def test_a_rotated_log_of_three_files_in_segments(monkeypatch, tmp_path, small_segments, rotate):
    log = tmp_path / "whole.txt"
    _write(log, _streams(200), seed=3, late=100)
    parts = rotate(log, "rot")
    full = _full(monkeypatch, parts)
    assert full[0] == 0
    small_segments.clear()
    assert _json(parts) == full
    assert any(small_segments)


@pytest.mark.slow
def test_what_cannot_fold_is_read_again(monkeypatch, tmp_path, small_segments):
    # a one-off call late in a process's run (the fold keeps the steps before it, dropped while
    # reading) and a TUNING line in a late segment (the fold keeps every call): read again with every
    # call held; a group of 6 (sums not exact in floating point: the check measures every call):
    # read again in full
    one_off, tuned, six = tmp_path / "one-off.txt", tmp_path / "tuned.txt", tmp_path / "six.txt"
    _write(one_off, _streams(150, one_off=True))
    _write(tuned, _streams(150), tuning_at=sum(map(len, _streams(150))) - 40)
    _write(six, [[("ar", 3000), ("ar", 1000), ("ar", 1)] * 150 for _ in range(6)])
    reads = []
    real = reader.read_folded, reader.read_traces
    for log, again in ((one_off, [0, 0]), (tuned, [0, 0]), (six, [0, 1])):
        full = _full(monkeypatch, [log])
        small_segments.clear()
        reads.clear()
        with monkeypatch.context() as m:
            m.setattr(reader, "read_folded", lambda *a, **k: reads.append(0) or real[0](*a, **k))
            m.setattr(reader, "read_traces", lambda *a, **k: reads.append(1) or real[1](*a, **k))
            assert _json([log]) == full
        assert any(small_segments) and reads == again  # compacted while reading, then read again
    ts, folded = read_folded(tuned, workers=1)
    assert folded is None
    pd.testing.assert_frame_equal(ts.table, read_traces(tuned, workers=1).table)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::RuntimeWarning")
def test_a_dask_read_in_segments_is_the_full_read(monkeypatch, tmp_path, small_segments):
    from distributed import LocalCluster

    log = tmp_path / "seg.txt"
    _write(log, _streams(200), late=100)
    full = _full(monkeypatch, [log])
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        res = runner.invoke(app, ["check", str(log), "--format", "json", "--scheduler",
                                  cluster.scheduler_address])
    assert (res.exit_code, res.stdout) == full
    assert any(small_segments)
