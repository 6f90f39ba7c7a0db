"""All-gather on two B200 of one node: NCCL 2.26.6's Ring/Simple time for the bundled sweep's largest size,
counted by hand from NCCL's source (``src/graph/topo.h``, ``search.cc``, ``tuning.cc`` at v2.26.6-1), held
against what ``check`` predicts for that row."""

import pytest
from sweep_files import check_json, device_lines, file_rows

# two B200 of one GCP A4 node, NCCL 2.26.6 (tests/data/traces/README.md)
A4_ALLGATHER_1NODE = "all_gather_perf-2xB200-gcp-a4-1node-nccl2.26.6.txt"

# NVIDIA DGX B200 datasheet: 18 fifth-generation NVLinks a GPU, all to the node's NVSwitches.
NVLINKS_PER_B200 = 18
# topo.h v2.26.6: ``#define SM100_NVLINK_BW 40.0`` (GB/s NCCL counts per sm100 NVLink).
SM100_NVLINK_BW = 40.0
# search.cc v2.26.6: ``sm100SpeedArrayIntra`` (a search without NICs: paths.cc ``ncclTopoTrimSystem`` drops
# them when the communicator is one node's GPUs).
SM100_SPEED_ARRAY_INTRA = (90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0)
# device.h v2.26.6 ``MAXCHANNELS 64``; init.cc searches the ring with ``maxChannels = MAXCHANNELS/2``.
RING_MAX_CHANNELS = 64 // 2
# tuning.cc v2.26.6: ``baseLat`` Ring Simple 8.4 µs; ``hwLat[NVLINK]`` Ring Simple 3.4 µs a step.
BASE_LAT_RING_SIMPLE_US = 8.4
HW_LAT_NVLINK_RING_SIMPLE_US = 3.4


def _ring_graph_by_hand() -> tuple[int, float]:
    """(nChannels, bwIntra) of the ring graph ``ncclTopoTuneModel`` reads on two B200 of one node."""
    total = NVLINKS_PER_B200 * SM100_NVLINK_BW  # 720 GB/s: the GPU's path to the NVSwitch (maxBw = totalBw)
    # ncclTopoCompute pass 1: the first speed not above maxBw; the search fills the GPU's link with channels
    # and stops, "nChannels*bwInter >= totalBw" (8 × 90 = 720)
    speed = next(s for s in SM100_SPEED_ARRAY_INTRA if s <= total)
    n = int(total // speed)
    assert n * speed >= total
    # ncclTopoDupChannels: bwIntra 90 is not below 25, nor below 50 with more than 4 channels: doubled,
    # min(2 × 8, maxChannels) channels at bwIntra / DIVUP(16, 8)
    dup = min(2 * n, RING_MAX_CHANNELS)
    return dup, speed / -(-dup // n)


def test_two_b200_all_gather_largest_size_by_hand():
    name = A4_ALLGATHER_1NODE
    assert [g for _, g in device_lines(name)] == ["NVIDIA B200"] * 2  # one host, two ranks, as the file lists
    size, measured_us, _ = max(file_rows(name))
    n_ranks = 2
    n_channels, bw_intra = _ring_graph_by_hand()
    assert (n_channels, bw_intra) == (16, 45.0)
    # tuning.cc: one node (nNodes <= 2) reads bwIntra; busBw = nChannels × bw, Simple with no protocol factor;
    # Ring: algBw = busBw × nRanks / nsteps, all-gather's nsteps = nRanks − 1
    nsteps = n_ranks - 1
    alg_bw_GBps = n_channels * bw_intra * n_ranks / nsteps
    # latency: baseLat + (nsteps − nInterSteps) × intraLat, no network step on one node
    lat_us = BASE_LAT_RING_SIMPLE_US + nsteps * HW_LAT_NVLINK_RING_SIMPLE_US
    # ncclTopoGetAlgoTime: lat × numPipeOps (1) + nBytes / (1000 × bw) µs, nBytes = sendcount × nRanks × 4 B,
    # nccl-tests' size column for all_gather
    expected_s = (lat_us + size / (1000.0 * alg_bw_GBps)) * 1e-6
    sweep = check_json(name)
    assert sweep["nccl_version"] == "2.26.6"
    row = next(r for r in sweep["rows"] if r["bytes"] == size)
    assert (row["algorithm"], row["protocol"]) == ("Ring", "Simple")
    assert row["predicted_s"] == pytest.approx(expected_s, rel=1e-9)
    assert row["measured_s"] == pytest.approx(measured_us * 1e-6)
    # the run is slower than NCCL's own figure: 8 GiB in 8897.6 µs is 483 GB/s of bus bandwidth, against
    # the 720 NCCL prices (the ratio the file and the source give, inside 0.5-2×)
    assert row["ratio"] == pytest.approx(expected_s / (measured_us * 1e-6))
    assert 0.5 < row["ratio"] < 0.8
