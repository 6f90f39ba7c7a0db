"""Up to NCCL 2.12 a collective's time grows with the channels it is launched on also where each GPU has a
process of its own (nccl-tests ``-g 1`` under ``mpirun``): ONE_GPU_US_PER_CHANNEL against the two bundled
one-node ABCI sweeps at NCCL 2.8.4 it comes from, by hand.

The rows are counted from the files by a plain split (:func:`test_nccl_sweeps_public_older.old_rows`); the
channels a call is launched on come from NCCL's loop written out here (``src/enqueue.cc``: ``nc`` drops
while ``nBytes < nc × 512 threads × 8 × nRanks``, Ring/LL's thread threshold), not from zerocalc.
"""

import numpy as np
import pytest
from sweep_files import check_json, file_rows, median_size_ratio
from test_nccl_sweeps_public_older import old_rows

from zerocalc.validate.host_launch import ONE_GPU_US_PER_CHANNEL, one_gpu_channels_s

A100_1N = "all_reduce_perf-8xA100-SXM4-40GB-abci-1node-nccl2.8.4.txt"
V100_1N = "all_reduce_perf-4xV100-SXM2-16GB-abci-1node-nccl2.8.4.txt"
THANOS_NP8 = "all_reduce_perf-8xA100-SXM4-80GB-np8-thanos.txt"
#: file → (ranks, the communicator's channels: 24 on a DGX A100, 12 on a DGX-1's four V100)
ABCI = {A100_1N: (8, 24), V100_1N: (4, 12)}


def loop_channels(size, ranks, most):
    """The channels NCCL's loop launches a Ring/LL all-reduce of ``size`` bytes on (module docstring)."""
    nc = most
    while size < nc * 512 * 8 * ranks and nc >= 2:
        nc -= 1
    return nc


def check(name, *args):
    return check_json(name, "--nccl-version", "2.8.4", *args, counted=old_rows)


def test_one_gpu_time_per_channel_from_the_two_abci_one_node_sweeps():
    """The rows on which each launched channel carries the same bytes (from ranks × 8 × 512 bytes to the last
    size on fewer than all channels), where NCCL's own time is one time per sweep: the out-of-place time
    against the channels less one, one slope and one intercept per sweep, is 1.37 µs per channel (1.40 on
    the A100s, 1.18 on the V100s)."""
    a, y = [], []
    for i, (name, (ranks, most)) in enumerate(ABCI.items()):
        for size, t, _ in old_rows(name):
            nc = loop_channels(size, ranks, most)
            if size >= ranks * 8 * 512 and nc < most:
                a.append([nc - 1] + [float(j == i) for j in range(len(ABCI))])
                y.append(t)
    assert len(y) == 5 + 4  # 32-512 KiB on 1-16 channels; 16-128 KiB on 1-8
    slope = np.linalg.lstsq(np.array(a), np.array(y), rcond=None)[0][0]
    assert slope == pytest.approx(1.369, abs=0.001)
    assert ONE_GPU_US_PER_CHANNEL == pytest.approx(slope, abs=0.005)


def test_abci_a100_half_mebibyte_row_pays_its_sixteen_channels_by_hand():
    """512 KiB on 8 ranks: 524288 / (512 × 8 × 8) = 16 channels, so 15 × 1.37 = 20.55 µs on NCCL's time; the
    file measures 58.27 µs, which NCCL's time alone (32.0 µs) put at 0.55x, and with its 14 Ring/LL hops at
    the A100's 1.02 µs in place of the table's 0.47 (39.7 µs) at 0.68x."""
    sweep = check(A100_1N)
    (row,) = [r for r in sweep["rows"] if r["bytes"] == 512 << 10]
    assert row["launch_channels"] == loop_channels(512 << 10, 8, 24) == 16
    assert row["channel_work_s"] == pytest.approx(15 * 1.37e-6)
    assert row["predicted_s"] == pytest.approx(row["nccl_s"] + 15 * 1.37e-6)
    (measured,) = [t for s, t, _ in old_rows(A100_1N) if s == 512 << 10]
    assert measured == 58.27 and row["measured_s"] == pytest.approx(58.27e-6)
    assert row["nccl_s"] == pytest.approx(32.0e-6 + 14 * (1.02 - 0.47) * 1e-6, rel=0.01)
    assert row["nccl_s"] / row["measured_s"] < 0.7 and 0.8 <= row["ratio"] <= 1.25
    assert any("work FIFO of its own" in n and "beyond the first adds 1.37 µs" in n for n in sweep["notes"])


def test_abci_v100_one_node_sweep_within_both_bands():
    """The 4 V100 sweep: every size within 0.5-2x (its LL128 rows at 512 KiB and 1 MiB were 0.45-0.47x on
    NCCL's time alone) and the median size within 0.8-1.25x."""
    sweep = check(V100_1N)
    assert len(sweep["rows"]) == len(old_rows(V100_1N)) == 24
    assert all(0.5 <= r["ratio"] <= 2 for r in sweep["rows"])
    assert 0.8 <= median_size_ratio(sweep) <= 1.25
    (row,) = [r for r in sweep["rows"] if r["bytes"] == 1 << 20]
    assert row["protocol"] == "LL128" and row["launch_channels"] == 12
    assert row["channel_work_s"] == pytest.approx(11 * 1.37e-6)


def test_no_channel_time_from_nccl_2_13_under_g_or_outside_the_default_mode():
    """one_gpu_channels_s by hand: (channels - 1) x 1.37 us with one GPU per thread up to 2.12.12; nothing
    from 2.13 (one work FIFO heap per communicator) or where the release is not known, for -g 2 and up (the
    thread's per-GPU figure prices it) or unknown, for one channel or a calibrated call, nor under -a, -G."""
    assert one_gpu_channels_s(1, 16, (2, 8, 4)) == pytest.approx(15 * 1.37e-6)
    assert one_gpu_channels_s(1, 24, (2, 12, 12)) == pytest.approx(23 * 1.37e-6)
    assert one_gpu_channels_s(1, 24, (2, 13, 4)) == one_gpu_channels_s(1, 24, (2, 21, 5)) == 0.0
    assert one_gpu_channels_s(1, 24, (2, 30, 7)) == one_gpu_channels_s(1, 24, None) == 0.0
    assert one_gpu_channels_s(8, 24, (2, 12, 12)) == one_gpu_channels_s(None, 24, (2, 12, 12)) == 0.0
    assert one_gpu_channels_s(1, 1, (2, 12, 12)) == one_gpu_channels_s(1, None, (2, 12, 12)) == 0.0
    v = (2, 12, 12)
    assert one_gpu_channels_s(1, 24, v, agg_iters=4) == one_gpu_channels_s(1, 24, v, graph=1) == 0.0


def test_nccl_2_30_one_process_per_gpu_sweep_keeps_nccls_time():
    """The same kind of run at NCCL 2.30.7 (8 A100-SXM4-80GB, mpirun -np 8): no row pays for its channels,
    and the file's own times from 32 to 512 KiB (1 to 16 channels) stay within 27.6-31.9 µs."""
    sweep = check_json(THANOS_NP8)
    assert sweep["nccl_version"] == "2.30.7"
    assert all(r["channel_work_s"] == 0 and r["predicted_s"] == r["nccl_s"] for r in sweep["rows"])
    assert not any("work FIFO of its own" in n for n in sweep["notes"])
    times = [t for s, t, _ in file_rows(THANOS_NP8) if 32 << 10 <= s <= 512 << 10]
    assert len(times) == 5 and 27.5 < min(times) and max(times) < 32
