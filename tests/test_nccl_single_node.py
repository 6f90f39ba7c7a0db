"""check on public single-node nccl-tests sweeps: one thread driving 8 GPUs (-g 8) and one process per GPU.

Expected values are read off the files (tests/data/traces/README.md names their sources); the launch terms
come from NVIDIA/nccl-tests issue 123 (zerocalc.validate.sweep), not from these files; the floor's per-call
part (3.3 us) is a median over fifteen -g runs' floors, these two hosts' among them."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app

DATA = Path(__file__).parent / "data" / "traces" / "nccl-tests"
runner = CliRunner()

DKH = "all_reduce_perf-8xA100-SXM4-80GB-g8-nccl2.19.3.txt"
THANOS_G8 = "all_reduce_perf-8xA100-SXM4-80GB-g8-thanos.txt"
THANOS_NP8 = "all_reduce_perf-8xA100-SXM4-80GB-np8-thanos.txt"
STAGGER_8 = 7 * 2.76e-6  # (G - 1) launches of 2.76 us (issue 123 less NCCL's own ring time)
FLOOR_8 = (3.3 + 8 * 3.96) * 1e-6  # the call's part and 8 GPUs' (HOST_US_PER_CALL, HOST_US_PER_GPU)


def floor_8(channels, version):
    """The thread's floor of a call on ``channels`` channels: 3.3 + 8 x 3.96 us, and before NCCL 2.22 8 x
    0.206 us more per channel beyond the first (one work struct per channel and GPU written by the host)."""
    old = tuple(int(x) for x in version.split(".")[:2]) < (2, 22)
    return FLOOR_8 + (8 * (channels - 1) * 0.206e-6 if old else 0.0)


def file_rows(name):
    """{size: out-of-place µs} of the rows, read with a plain split (13 fields, the first two integers)."""
    rows = {}
    for line in (DATA / name).read_text().splitlines():
        f = line.split()
        if len(f) == 13 and f[0].isdigit() and f[1].isdigit():
            rows[int(f[0])] = float(f[5])
    return rows


def sweep_of(name, *args):
    res = runner.invoke(app, ["check", str(DATA / name), "--format", "json", *args])
    assert res.exit_code == 0, res.output
    (sweep,) = json.loads(res.stdout)["sweeps"]
    rows = file_rows(name)
    assert [r["bytes"] for r in sweep["rows"]] == list(rows)
    assert [r["measured_s"] for r in sweep["rows"]] == pytest.approx([t * 1e-6 for t in rows.values()])
    return sweep


def at_median_size(sweep):
    return sweep["rows"][(len(sweep["rows"]) - 1) // 2]["ratio"]


@pytest.mark.parametrize(("name", "args", "version", "sizes", "at_median"), [
    (DKH, (), "2.19.3", 25, 1.193),  # the file's nccl-library=21903
    (THANOS_G8, (), "2.30.7", 30, 1.013),  # no version printed: the latest modelled
    (THANOS_G8, ("--nccl-version", "2.19.3"), "2.19.3", 30, 1.042),
])
def test_g8_sweeps_every_size_in_band(name, args, version, sizes, at_median):
    """Two more -g 8 sweeps on 8x A100-SXM4-80GB (dgx-a100 from their device lines): every size within
    0.5-2x and the median size within 0.8-1.25x, priced at NCCL's time plus the 19.32 us stagger of the
    thread's launches (the larger of the floor and NCCL's time alone left 256 KiB-32 MiB at 0.56-0.71 and
    0.66-0.96, the median sizes at 0.86 and 0.75). Where NCCL launches fewer channels than it prices
    (zerocalc.nccl.launch), the call takes the later of its time on all channels plus the stagger and its
    time on those it launches (the 2.19.3 host's median size, 64 KiB on 2 of 24 channels: 1.03; 0.96 with
    every call on all channels). Ring/LL's hops at the A100's 1.02 us (zerocalc.nccl.tune_model.
    AMPERE_LL_HOP_US) put the 2.19.3 host's median size at 1.19 and the thanos host's at 1.01 and 1.04."""
    sweep = sweep_of(name, *args)
    assert (sweep["topology"], sweep["group_size"], sweep["gpus_per_thread"]) == ("dgx-a100", 8, 8)
    assert sweep["nccl_version"] == version
    assert len(sweep["rows"]) == len(file_rows(name)) == sizes
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
    assert at_median_size(sweep) == pytest.approx(at_median, abs=0.002)
    assert 0.8 <= at_median_size(sweep) <= 1.25
    for r in sweep["rows"]:
        assert r["launch_stagger_s"] == pytest.approx(STAGGER_8)
        floor = floor_8(r["launch_channels"], version)
        assert r["host_floor_s"] == pytest.approx(floor)
        launched = max(r["nccl_all_channels_s"] + STAGGER_8, r["nccl_s"])
        assert r["predicted_s"] == pytest.approx(max(floor, launched))
        assert (r["nccl_s"] > r["nccl_all_channels_s"]) == (r["launch_channels"] < 24)
    assert any("7 × 2.76 µs = 19.3 µs" in n for n in sweep["notes"])


def test_g8_row_by_hand_from_the_formulas():
    """The 2.19.3 host's 128 MiB row by hand: Ring/Simple, NCCL 2.19's latency 8.4 + 2 (8 - 1) x 3.4 = 56.0 us
    (tuning.cc baseLat[Ring][Simple], hwLat[NVLINK][Ring][Simple]) and its bandwidth 12 channels x 20 GB/s
    (SM80 NVLink, 12 NVLinks per A100) x 8 / (2 x 7) for a ring all-reduce; plus the stagger 7 x 2.76 us.
    The file measures 1295.41 us."""
    sweep = sweep_of(DKH)
    (row,) = [r for r in sweep["rows"] if r["bytes"] == 128 << 20]
    assert (row["algorithm"], row["protocol"]) == ("Ring", "Simple")
    nccl = 56.0e-6 + (128 << 20) / (12 * 20e9 * 8 / 14)
    hand = nccl + 7 * 2.76e-6  # 1054.0 us
    assert row["nccl_s"] == pytest.approx(nccl, rel=1e-3)
    assert row["predicted_s"] == pytest.approx(hand, rel=1e-3) and not row["host_bound"]
    assert row["ratio"] == pytest.approx(hand / 1295.41e-6, rel=1e-3)  # 0.81


def test_same_host_g8_is_slower_than_one_process_per_gpu():
    """The same host's -g 8 and mpirun -np 8 runs of one sweep, counted from the files: from 4 to 16 MiB
    (NCCL's time well above the thread's floor) the -g 8 run takes 22-47 us more per call, about the 19.3 us
    stagger and more; from 1 GiB up the two agree within 0.5 %."""
    g8, np8 = file_rows(THANOS_G8), file_rows(THANOS_NP8)
    assert list(g8) == list(np8)
    gap = {s: g8[s] - np8[s] for s in g8}
    assert [round(gap[s], 2) for s in (4 << 20, 8 << 20, 16 << 20)] == [22.14, 32.0, 47.2]
    assert all(abs(g8[s] / np8[s] - 1) < 0.005 for s in g8 if s >= 1 << 30)


def test_one_process_per_gpu_single_node_is_nccls_time_alone():
    """mpirun -np 8 -g 1 on the same 8x A100 host: no launch terms; every size within 0.5-2x. The sizes up
    to 128 KiB measure 17.9-31.9 us, rising from 24-26 us to 30-32 us at 32-128 KiB, where NCCL launches
    Ring/LL on 1, 2 and 4 of its 24 channels (32 KiB a channel, 8 x 8 bytes x 512 threads;
    zerocalc.nccl.launch): NCCL's time on those, 26.5 us at each, puts the median size (128 KiB) at 0.83
    (0.55 on all 24 channels, 17.6 us). The smallest sizes, at NCCL's own 15.0 us (6.6 + 14 x 0.6 us), are
    timed at 6.6 + 14 x 1.02 = 20.88 us (zerocalc.nccl.tune_model.AMPERE_LL_HOP_US, measured on this sweep and
    ABCI's), which also moves the sizes NCCL launches on 1-4 channels by 14 x 0.42 = 5.88 us: 32.4 us, the
    median size at 1.01."""
    sweep = sweep_of(THANOS_NP8)
    assert sweep["gpus_per_thread"] == 1
    assert not any("thread drives" in n for n in sweep["notes"])
    rows = file_rows(THANOS_NP8)
    for r in sweep["rows"]:
        assert r["launch_stagger_s"] is None and r["host_floor_s"] is None and not r["host_bound"]
        assert r["predicted_s"] == r["nccl_s"]
    assert all(0.5 <= r["ratio"] <= 2.0 for r in sweep["rows"])
    small = [r for r in sweep["rows"] if r["bytes"] <= 128 << 10]
    assert min(rows[r["bytes"]] for r in small) == 17.90 and max(rows[r["bytes"]] for r in small) == 31.90
    assert small[0]["nccl_s"] == pytest.approx(20.88e-6, rel=0.01)
    mid = {r["bytes"]: r for r in sweep["rows"] if 32 << 10 <= r["bytes"] <= 128 << 10}
    assert [r["launch_channels"] for r in mid.values()] == [1, 2, 4]
    assert all(r["nccl_s"] == pytest.approx(26.5e-6 + 5.88e-6, rel=0.01) for r in mid.values())
    assert mid[128 << 10]["nccl_all_channels_s"] == pytest.approx(17.6e-6 + 5.88e-6, rel=0.01)
    assert at_median_size(sweep) == pytest.approx(1.014, abs=0.002)


@pytest.mark.parametrize("name", ["all_reduce_perf-8xA100-SXM4-40GB-oci.txt", DKH, THANOS_G8])
def test_fit_out_on_a_g8_sweep_calibrates_the_collective_not_the_launch(tmp_path, name):
    """fit --out on a -g 8 sweep fits the measured time less the launch stagger, which check adds back:
    check on the fitted topology has its median ratio within 0.9-1.1 (issue 11). Counted check of one
    fitted pair: the sweep-wide α-β of the 'any' fit, at the smallest size, plus the 19.32 us stagger,
    is the prediction of that row."""
    import tomllib

    out = tmp_path / "c.toml"
    res = runner.invoke(app, ["fit", str(DATA / name), "--topology", "dgx-a100", "--out", str(out)])
    assert res.exit_code == 0, res.output
    sweep = sweep_of(name, "--topology", str(out))
    ratios = sorted(r["ratio"] for r in sweep["rows"])
    assert 0.9 <= ratios[(len(ratios) - 1) // 2] <= 1.1
    assert all(r["calibrated"] for r in sweep["rows"])
    assert all(r["predicted_s"] == pytest.approx(r["nccl_s"] + STAGGER_8) for r in sweep["rows"])
    fits = tomllib.loads(out.read_text())["nccl_calibration"]
    pair = {(f["algorithm"], f["protocol"]): f for f in fits}
    first = sweep["rows"][0]
    f = pair.get((first["algorithm"], first["protocol"]), pair[("any", "any")])
    assert first["predicted_s"] == pytest.approx(f["alpha_us"] * 1e-6 + first["bytes"] / (f["bw_GBps"] * 1e9)
                                                 + STAGGER_8, rel=1e-3)
    # the fitted α is the collective's own: the smallest measured time less the stagger, not the whole
    smallest = min(file_rows(name).values()) * 1e-6
    assert f["alpha_us"] * 1e-6 < smallest - STAGGER_8 * 0.5


def test_point_to_point_calls_carry_the_same_launch_stagger():
    """The bundled sendrecv block ran `sendrecv_perf ... -g 8` (its first line) on 8x A100; the file prints
    no nccl-tests header, so check does not know G. Priced with G = 8 given, each point-to-point row is
    zerocalc's p2p time plus 7 x 2.76 us, as a collective's: the thread launches the 8 kernels the same way
    and a send completes no earlier than its peer's receive runs."""
    from zerocalc.topology import get_topology
    from zerocalc.traces.nccl_tests import parse
    from zerocalc.validate.sweep import compare_sweep

    name = "sendrecv_perf-8xA100-g8-block.txt"
    text = (DATA / name).read_text()
    assert text.splitlines()[0].endswith("-g 8")
    res = parse(iter(text.splitlines(True)), name)
    kw = dict(op="sendrecv", group_size=8, nccl_version="2.19.3")
    alone = compare_sweep(res.rows, get_topology("dgx-a100"), **kw)
    g8 = compare_sweep(res.rows, get_topology("dgx-a100"), gpus_per_thread=8, **kw)
    assert len(g8.rows) == len(alone.rows) == 4
    for a, b in zip(alone.rows, g8.rows, strict=True):
        assert a["launch_stagger_s"] is None and b["launch_stagger_s"] == pytest.approx(STAGGER_8)
        assert b["predicted_s"] == pytest.approx(a["predicted_s"] + STAGGER_8) and not b["host_bound"]
