"""check on a public two-rank run of one H100 on each of two hosts (xxrjun/nccl-tests-cluster's smoke log:
all_reduce_perf then sendrecv_perf, NCCL 2.29.2 by its nccl-library line), priced on the preset its device
lines pick (``dgx-h100``: one 400 Gb/s NIC per GPU) as two nodes of one GPU and one NIC, with GPUDirect RDMA.
Against the Google Cloud pods of one GPU (``test_nccl_sweeps_gcp_rdma``), this is the same shape where the
NIC is the GPU's own: NCCL's figure for it holds."""

import json

import pytest
from sweep_files import DATA
from typer.testing import CliRunner

from zerocalc.cli import app

runner = CliRunner()

LOG = "allreduce-sendrecv-2xH100-2nodes-1pernode-nccl2.29.2.log"


def runs_in_file():
    """Per ``# Collective test starting`` run: (test, [(size, out-of-place µs)]), and the '#  Rank' lines'
    (host, device) pairs, counted from the file itself."""
    runs, ranks = [], set()
    for line in (DATA / LOG).read_text().splitlines():
        f = line.split()
        if line.startswith("# Collective test starting:"):
            runs.append((f[-1], []))
        elif len(f) >= 13 and f[0].isdigit() and f[1].isdigit():
            runs[-1][1].append((int(f[0]), float(f[5])))
        elif "Rank" in f and "on" in f and "device" in f:
            ranks.add((f[f.index("on") + 1], f[f.index("device") + 1]))
    return runs, ranks


def test_two_hosts_of_one_h100_within_both_bands_at_every_size():
    """Both runs (5 sizes each, 32-512 MiB): every size within 0.8-1.25x of NCCL's model, as read."""
    runs, ranks = runs_in_file()
    assert [t for t, _ in runs] == ["all_reduce_perf", "sendrecv_perf"]
    assert ranks == {("cnode3-002", "0"), ("cnode3-003", "0")}
    res = runner.invoke(app, ["check", str(DATA / LOG), "--format", "json"])
    assert res.exit_code == 0, res.output
    sweeps = json.loads(res.stdout)["sweeps"]
    assert [(s["op"], s["group_size"], s["nccl_version"]) for s in sweeps] == [
        ("all_reduce", 2, "2.29.2"), ("sendrecv", 2, "2.29.2")]
    for sweep, (_, rows) in zip(sweeps, runs, strict=True):
        assert "1 per host, 2 hosts" in sweep["topology_how"]
        assert [r["bytes"] for r in sweep["rows"]] == [s for s, _ in rows]
        assert [r["measured_s"] for r in sweep["rows"]] == pytest.approx([t * 1e-6 for _, t in rows])
        assert all(0.8 <= r["ratio"] <= 1.25 for r in sweep["rows"])


def test_the_largest_all_reduce_by_hand_from_nccl_2_29():
    """512 MiB, derived from ``tuning.cc`` (v2.29.3 tables): the ring graph of a node of one H100 and one
    400 Gb/s NIC is one channel at 48 GB/s duplicated into 2 × 24 (``search.cc``); Ring/Simple busBw 48,
    × nRanks / nsteps = 2/2. Latency: baseLat 8.4 µs + 2 network steps (nInterSteps = 2 (nNodes − 1)) of
    hwLat[NET][Tree][Simple] = 14 µs (ppn = 1: the Tree network latency), × 1.4 for the ring's plateau
    (``ncclTopoGetAlgoTime``: all-reduce across nodes, nBytes / (nChannels · nRanks) ≥ 64). The run's own
    time is 11591.0 µs, 0.97 of it slower."""
    runs, _ = runs_in_file()
    size, measured_us = runs[0][1][-1]
    expected_us = (8.4 + 2 * 14.0) * 1.4 + size / (1000.0 * 48.0)
    res = runner.invoke(app, ["check", str(DATA / LOG), "--format", "json"])
    row = json.loads(res.stdout)["sweeps"][0]["rows"][-1]
    assert (row["bytes"], row["algorithm"], row["protocol"]) == (size, "Ring", "Simple")
    assert row["predicted_s"] == pytest.approx(expected_us * 1e-6, rel=1e-9)
    assert measured_us == 11591.0 and row["ratio"] == pytest.approx(expected_us / measured_us)


PAIRWISE = "alltoall-sendrecv-2xH100-2nodes-1pernode-nccl2.29.2.log"


def test_the_same_hosts_all_to_all_and_send_receive_within_both_bands():
    """The pairwise log of the same two hosts (3 sizes each, 4-16 GiB): every size within 0.5-2x and the
    median size within 0.8-1.25x; out of place the all-to-all's bus bandwidth is below its in-place one at
    every size (38.84 against 43.72 GB/s at 16 GiB: its chunk to itself, a local copy as large as what crosses
    the network), which the model, pricing both alike, does not separate."""
    res = runner.invoke(app, ["check", str(DATA / PAIRWISE), "--format", "json"])
    assert res.exit_code == 0, res.output
    sweeps = json.loads(res.stdout)["sweeps"]
    assert [(s["op"], s["group_size"]) for s in sweeps] == [("all_to_all", 2), ("sendrecv", 2)]
    counted = []
    for line in (DATA / PAIRWISE).read_text().splitlines():
        f = line.split()
        if len(f) >= 13 and f[0].isdigit() and f[1].isdigit():
            counted.append((int(f[0]), float(f[5]), float(f[7]), float(f[11])))
    assert len(counted) == 6
    for sweep, rows in zip(sweeps, (counted[:3], counted[3:]), strict=True):
        assert [r["bytes"] for r in sweep["rows"]] == [s for s, *_ in rows]
        assert [r["measured_s"] for r in sweep["rows"]] == pytest.approx([t * 1e-6 for _, t, *_ in rows])
        assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
        assert 0.8 <= sweep["rows"][1]["ratio"] <= 1.25
    assert all(out < inplace for _, _, out, inplace in counted[:3])
    assert counted[2][2:] == (38.84, 43.72)
