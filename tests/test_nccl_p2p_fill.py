"""The pipeline's fill of a Simple point-to-point message (zerocalc.nccl.p2p, module step 5): one step of
p2pChunkSize (or the part, when smaller) at a channel's rate on top of the transfer, worked by hand on a
communicator written out, and held against bundled one-node sweeps whose rows are counted from the files."""

import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.nccl.p2p import P2pComm, group_time, message_channels, protocol
from zerocalc.nccl.tables import Protocol, release_for

DATA = Path(__file__).parent / "data" / "traces" / "nccl-tests"
runner = CliRunner()


def two_gpus(**kw):
    """Two GPUs of one node under NCCL 2.29.2: 8 p2p channels, 8 per peer, 512 KiB steps, a channel at
    20 GB/s and the pair's NVLink at 100 GB/s."""
    rel, _ = release_for("2.29.2")
    c = P2pComm(n_ranks=2, ranks_per_node=2, n_nodes=1, version=(2, 29, 2), release=rel, p2p_channels=8,
                per_peer=8, chunk_bytes=512 * 1024, bw={"nvl": (20.0, 100.0)}, net_latency_us=0.0)
    return replace(c, **kw)


def test_a_message_of_many_steps_pays_one_step_more():
    """64 MiB: addP2pToPlan by hand starts on nChannelsMin = 8 halved while 8 x 2 ranks > 8 p2p channels
    (4), parts of 16 MiB, not above 32 steps (16 MiB), so 4 channels. Bounds: the message over its 4
    channels 67108864 / 80e9 s = 838.9 us; the link 671.1 us; all channels 419.4 us. Fill: one 512 KiB
    step at 20 GB/s, 26.2 us: 865.1 us."""
    c = two_gpus()
    n = 64 * 2**20
    assert message_channels(c, n) == 4 and protocol(c, n) == Protocol.SIMPLE
    t = group_time(c, [(n, "nvl")])
    assert t.transfer_us == pytest.approx((n / 4 + 524288) / 20e9 * 1e6)
    assert t.transfer_us == pytest.approx(865.1, abs=0.05)


def test_a_part_smaller_than_a_step_fills_with_the_part():
    """256 KiB: Simple (above 8 channels x 16 KiB); min(4, 256 KiB / 64 KiB) = 4 channels of 64 KiB, less
    than a step: the message over its channels 262144 / 80e9 s = 3.28 us, plus one 64 KiB part at 20 GB/s,
    3.28 us. With a 1 MiB step, parts of at least 128 KiB: 2 channels, 262144 / 40e9 s = 6.55 us and one
    128 KiB part, 6.55 us."""
    c = two_gpus()
    n = 256 * 1024
    assert message_channels(c, n) == 4 and protocol(c, n) == Protocol.SIMPLE
    want = (n / 4 + 65536) / 20e9 * 1e6
    assert group_time(c, [(n, "nvl")]).transfer_us == pytest.approx(want)
    big = two_gpus(chunk_bytes=2**20)
    assert message_channels(big, n) == 2
    assert group_time(big, [(n, "nvl")]).transfer_us == pytest.approx((n / 2 + 131072) / 20e9 * 1e6)


def test_ll_has_no_fill():
    """128 KiB goes LL (at most 8 x 16 KiB): each 8-byte line carries its flag, no step to wait for. LL
    steps of 64 KiB, parts of at least 8 KiB: 4 channels at half of 20 GB/s, 131072 / 40e9 s = 3.28 us,
    and nothing more."""
    c = two_gpus()
    n = 128 * 1024
    assert protocol(c, n) == Protocol.LL and message_channels(c, n) == 4
    assert group_time(c, [(n, "nvl")]).transfer_us == pytest.approx(n / 40e9 * 1e6)


def runs_in_file(name):
    """{test: {size: out-of-place µs}} per ``# Collective test starting`` run (``None``: a file of one run
    without that line), counted from the file."""
    runs, test = {}, None
    for line in (DATA / name).read_text().splitlines():
        if line.startswith("# Collective test starting:"):
            test = line.split()[-1]
        f = line.split()
        if len(f) >= 13 and f[0].isdigit() and f[1].isdigit():
            runs.setdefault(test, {})[int(f[0])] = float(f[5])
    return runs


def sweeps(name, *args):
    res = runner.invoke(app, ["check", str(DATA / name), "--format", "json", *args])
    assert res.exit_code == 0, res.output
    return {s["op"]: s for s in json.loads(res.stdout)["sweeps"]}


@pytest.mark.parametrize("name", ["five-tests-8xH100-1node-nccl2.29.2.log",
                                  "five-tests-4xH100-1node-4procs-nccl2.29.2.log"])
def test_one_node_h100_alltoall_at_32MiB_meets_its_two_steps(name):
    """One node of 8 and of 4 H100 (NCCL 2.29.2): alltoall at 32 MiB (two 512 KiB steps a channel) took
    124.8 / 109.9 us, which the transfer and latency alone priced 0.73x / 0.72x; with the step 0.85-1.1x.
    sendrecv at 32 MiB (8-16 steps a channel) stays within 0.9-1.1x."""
    counted = runs_in_file(name)
    s = sweeps(name, "--nccl-version", "2.29.2")
    bands = (("all_to_all", "alltoall_perf", 0.85, 1.1), ("sendrecv", "sendrecv_perf", 0.9, 1.1))
    for op, test, lo, hi in bands:
        rows = {r["bytes"]: r for r in s[op]["rows"]}
        assert sorted(rows) == sorted(counted[test])
        row = rows[2**25]
        assert row["measured_s"] == pytest.approx(counted[test][2**25] * 1e-6)
        assert (row["algorithm"], row["protocol"]) == ("P2P", "Simple")
        assert lo <= row["ratio"] <= hi, (op, row)


def test_a100_pair_sendrecv_mid_sizes():
    """Two A100 of a 4-GPU board (NCCL 2.22.3, 8 p2p channels stated): sendrecv's Simple rows from 256 KiB
    to 64 MiB were 0.53-0.70x; one step (64-512 KiB parts at 20 GB/s) more: 0.7-1.0x."""
    name = "sendrecv_perf-2xA100-SXM-64GB-4gpu-board-t2-info-nccl2.22.3.txt"
    counted = runs_in_file(name)
    (test,) = counted
    s = sweeps(name, "--nccl-version", "2.22.3")["sendrecv"]
    assert [r["bytes"] for r in s["rows"]] == sorted(counted[test])
    mid = [r for r in s["rows"] if 2**18 <= r["bytes"] <= 2**26]
    assert len(mid) == 9 and {r["protocol"] for r in mid} == {"Simple"}
    for r in mid:
        assert r["measured_s"] == pytest.approx(counted[test][r["bytes"]] * 1e-6)
        assert 0.7 <= r["ratio"] <= 1.0, r
