"""The channels NCCL launches a call on (zerocalc.nccl.launch), derived by hand from NVIDIA/nccl's loop.

Sources: src/enqueue.cc (``getAlgoInfo`` v2.9.9-v2.19.4, ``getChannnelThreadInfo`` v2.20-v2.21,
``topoGetAlgoInfo`` and ``scheduleCollTasksToPlan`` v2.22.3 on), src/graph/tuning.cc (``threadThresholds``,
``maxThreads``), src/include/device.h (``NCCL_*_THREAD_THRESHOLD``, ``NCCL_*_MAX_NTHREADS``)."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.nccl.launch import cell_bytes, launch, max_threads, parse_thresholds, thread_threshold
from zerocalc.nccl.model import tune
from zerocalc.nccl.predict import launched, predict
from zerocalc.nccl.tables import Algorithm as A
from zerocalc.nccl.tables import Collective as C
from zerocalc.nccl.tables import Protocol as P
from zerocalc.nccl.tables import release_for
from zerocalc.topology import PRESETS

DATA = Path(__file__).parent / "data" / "traces" / "nccl-tests"
runner = CliRunner()


def test_thresholds_and_threads_of_tuning_cc():
    """8 / 8 / 64 bytes per thread for LL / LL128 / Simple, Ring/LL's times nRanks, CollNet's Simple 512;
    512 LL and Simple threads, 640 LL128, Ring/Simple 256 on a ring of at most PCI_BW (12 GB/s). The Tree
    and Ring figures on 16 ranks are those NCCL's INFO log prints on two 8-GPU EC2 hosts,
    ``threadThresholds 8/8/64 | 128/8/64 | 8/8/64`` (aws/aws-ofi-nccl issue 65; the third group, CollNet's,
    from a release before CollNet's Simple threshold of 512)."""
    assert [thread_threshold(A.TREE, p, 16) for p in P] == [8, 8, 64]
    assert [thread_threshold(A.RING, p, 16) for p in P] == [128, 8, 64]
    assert thread_threshold(A.COLLNET_CHAIN, P.SIMPLE, 16) == 512
    # NCCL_THREAD_THRESHOLDS="-1 -1 -1 4096 -1 16": Ring's LL and Simple replaced, the rest kept
    env = (-1, -1, -1, 4096, -1, 16)
    assert [thread_threshold(A.RING, p, 16, env) for p in P] == [4096, 8, 16]
    assert [thread_threshold(A.TREE, p, 16, env) for p in P] == [8, 8, 64]
    assert [max_threads(A.RING, p, 240.0) for p in P] == [512, 640, 512]
    assert max_threads(A.RING, P.SIMPLE, 12.0) == 256 and max_threads(A.TREE, P.SIMPLE, 12.0) == 512
    # NCCL_NTHREADS: a multiple of 32 within [64, 512], else the maximum
    assert max_threads(A.RING, P.SIMPLE, 240.0, nthreads=128) == 128
    assert max_threads(A.RING, P.LL, 240.0, nthreads=100) == 512
    assert max_threads(A.RING, P.LL128, 240.0, ll128_nthreads=64) == 160


def test_ring_ll_on_eight_ranks_by_hand():
    """Ring/LL on 8 ranks from 24 channels: 8 x 8 = 64 bytes a thread, 512 threads, so 32 KiB a channel.
    32 KiB: nc falls to 1 (32768 < nc x 32768 for every nc >= 2), nt stays 512 (32768 < 32768 is false);
    64 KiB: nc = 2; 1 MiB: all 24 (1048576 >= 24 x 32768). 8 bytes: one channel, threads halved while a
    multiple of 128 (512, 256, 128, 64). v2.30.7's planner (32 KiB cells of traffic, LL's x 4, an
    all-reduce's x 2) leaves them: 32 KiB is 8 cells."""
    v = (2, 30, 7)
    run = launch(C.ALL_REDUCE, A.RING, P.LL, 32 << 10, 8, 24, v)
    assert (run.channels, run.threads, run.start, run.reduced) == (1, 512, 24, True)
    assert launch(C.ALL_REDUCE, A.RING, P.LL, 64 << 10, 8, 24, v).channels == 2
    assert launch(C.ALL_REDUCE, A.RING, P.LL, 1 << 20, 8, 24, v).channels == 24
    run = launch(C.ALL_REDUCE, A.RING, P.LL, 8, 8, 24, v)
    assert (run.channels, run.threads) == (1, 64)
    # 80 ranks, all-gather: 8 x 80 x 512 = 327680 bytes a channel
    assert launch(C.ALL_GATHER, A.RING, P.LL, 327680 * 5, 80, 32, v).channels == 5
    assert launch(C.ALL_GATHER, A.RING, P.LL, 327680 * 5 - 1, 80, 32, v).channels == 4


def test_planner_cells_by_release():
    """Tree/LL, 16 KiB all-reduce, 16 channels: the loop leaves 4 (8 x 512 = 4 KiB a channel). The planner's
    cells: v2.19.4 none (4); v2.22.3 512 bytes (64 cells: 4); v2.23.4 16 KiB, traffic 2 x 16 KiB = 2 cells
    (2); v2.26.2 LL's traffic x 4 = 8 cells (4); v2.29.2 32 KiB cells, 4 cells (4). Ring/Simple 64 KiB from
    32: the loop gives 2 (64 bytes x 512 threads a channel), the cells (4 at v2.29.2) keep it."""
    assert [cell_bytes(v) for v in [(2, 19, 4), (2, 22, 3), (2, 23, 4), (2, 28, 9), (2, 29, 2)]] == \
        [0, 512, 16384, 16384, 32768]
    got = [launch(C.ALL_REDUCE, A.TREE, P.LL, 16 << 10, 16, 16, v).channels
           for v in [(2, 19, 4), (2, 22, 3), (2, 23, 4), (2, 26, 2), (2, 29, 2)]]
    assert got == [4, 4, 2, 4, 4]
    assert launch(C.ALL_REDUCE, A.RING, P.SIMPLE, 64 << 10, 16, 32, (2, 29, 2)).channels == 2


def test_algorithms_the_loop_leaves():
    """NVLS and NVLS Tree run on ``nvlsChannels``, CollNet Direct has its own loop: the count kept; PAT's
    ``maxThreads`` is never set (0), so the loop does not cut it and only v2.23.4 on's cells do."""
    for a in (A.NVLS, A.NVLS_TREE, A.COLLNET_DIRECT):
        assert launch(C.ALL_REDUCE, a, P.SIMPLE, 1024, 16, 16, (2, 30, 7)).channels == 16
    assert launch(C.ALL_GATHER, A.PAT, P.SIMPLE, 64 << 10, 16, 16, (2, 21, 5)).channels == 16
    assert launch(C.ALL_GATHER, A.PAT, P.SIMPLE, 64 << 10, 16, 16, (2, 26, 2)).channels == 4


def test_start_count_by_release():
    """The loop starts from comm->collChannels at v2.20-v2.21, else comm->nChannels (their counts agree on a
    machine without NVLS); the release's own tag when no version is given."""
    tuning = tune(PRESETS["aws-p5"], 16, release_for("2.20.3")[0])
    assert tuning.channels.coll_channels == 16
    assert launched(tuning, C.ALL_REDUCE, A.TREE, P.LL, 16 << 10, (2, 20, 3)).start == 16
    assert launched(tuning, C.ALL_REDUCE, A.TREE, P.LL, 16 << 10).channels == 4


def test_one_row_time_on_the_channels_launched():
    """The 8x A100 mpirun -np 8 sweep's 32 KiB row (no version printed: v2.30.7): Ring/LL on one of 24
    channels, i.e. 1/24 of the ring graph's 12 channels of 20 GB/s. NCCL 2.30's Ring/LL bus bandwidth
    (tuning.cc) is min(llMaxBw, channels x bw x 0.5): all channels min(87.7, 120) = 87.7 GB/s, one channel
    min(87.7, 0.5 x 20 x 0.5) = 5 GB/s, each x 8 / 14 for a ring all-reduce. The row's time is NCCL's
    priced time with the bandwidth term on the one channel; the file measures 30.25 us (the 1-2 KiB rows
    24.3-24.4 us), NCCL's own price 15.7 us."""
    res = runner.invoke(app, ["check", str(DATA / "all_reduce_perf-8xA100-SXM4-80GB-np8-thanos.txt"),
                              "--format", "json"])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    (row,) = [r for r in sweep["rows"] if r["bytes"] == 32 << 10]
    assert (row["algorithm"], row["protocol"], row["launch_channels"]) == ("Ring", "LL", 1)
    tuning = tune(PRESETS["dgx-a100"], 8, release_for("2.30.7")[0])
    full = tuning.run_time_s(C.ALL_REDUCE, A.RING, P.LL, 32 << 10)
    hand = full - 32768 / (87.7e9 * 8 / 14) + 32768 / (5e9 * 8 / 14)
    assert row["nccl_s"] == pytest.approx(hand, rel=1e-6)
    assert row["ratio"] == pytest.approx(hand / 30.25e-6, rel=1e-6)  # 0.88 (0.52 on all channels)
    assert predict(tuning, C.ALL_REDUCE, 32 << 10).all_channels_s == pytest.approx(full)


def test_thread_thresholds_parsed_as_nccls_sscanf():
    """``sscanf(str, "%ld %ld %ld %ld %ld %ld")``: leading whole numbers, the rest kept at -2 (default)."""
    assert parse_thresholds("-1 -1 -1 8 -1 -1") == (-1, -1, -1, 8, -1, -1)
    assert parse_thresholds("16 16") == (16, 16, -2, -2, -2, -2)
    assert parse_thresholds("4,8 9") == (4, -2, -2, -2, -2, -2)
    assert parse_thresholds("auto") == (-2,) * 6


def test_the_files_thread_settings_are_priced(tmp_path):
    """The -np 8 sweep with ``export NCCL_THREAD_THRESHOLDS="-1 -1 -1 8 -1 -1"`` and ``NCCL_NTHREADS=256``
    in front: Ring/LL takes 8 bytes a thread (not 8 x 8 ranks) on 256 threads, 2 KiB a channel, so 32 KiB
    runs on 16 channels by the loop; v2.30.7's planner spreads its 2 x 32 KiB x 4 of LL traffic in 32 KiB
    cells, 8 of them: 8 channels (1 without the two settings). A note names both with their lines."""
    text = (DATA / "all_reduce_perf-8xA100-SXM4-80GB-np8-thanos.txt").read_text()
    path = tmp_path / "run.txt"
    path.write_text('export NCCL_THREAD_THRESHOLDS="-1 -1 -1 8 -1 -1"\nexport NCCL_NTHREADS=256\n' + text)
    res = runner.invoke(app, ["check", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    rows = {r["bytes"]: r for r in sweep["rows"]}
    assert rows[32 << 10]["launch_channels"] == 8
    assert rows[4 << 10]["launch_channels"] == 1  # 2 x 4 KiB x 4 = one 32 KiB cell
    assert any("NCCL_THREAD_THRESHOLDS=-1 -1 -1 8 -1 -1 (line 1), NCCL_NTHREADS=256 (line 2)" in n
               for n in sweep["notes"])
