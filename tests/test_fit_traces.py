"""``fit`` on a training run's traces. DeepSpeed comms logs: the calls state their message size in
DeepSpeed's rounded units (an all-gather's shard) and, in a ``log_summary`` table, only each size's mean time.
Expected values are counted from the files with plain regular expressions and fitted by hand (``fit``'s
documented "joint" method: least squares of the relative error, which through two sizes passes through each
size's 1/t²-weighted mean). ``fit --out`` calibrates on nccl-tests sweeps and refuses a trace in one line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from zerocalc.cli import app

TRACES = Path(__file__).parent / "data" / "traces"
TUTORIAL = TRACES / "deepspeed-comms" / "tutorial-examples.txt"
GLOO_ZERO3 = TRACES / "deepspeed-comms-gloo" / "zero3-ga1-verbose.log"
UNITS = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3}
runner = CliRunner()


def _fit(path, *extra):
    res = runner.invoke(app, ["fit", str(path), "--format", "json", *extra])
    assert res.exit_code == 0, res.output
    return {(f["op"], f["group_size"]): f for f in json.loads(res.stdout)}, res.stderr


def _summary_rows(path, op):
    """(bytes, count, mean seconds) of ``op``'s rows in every log_summary table of the file."""
    rows, current = [], None
    for line in path.read_text().splitlines():
        if line and not line[0].isspace():
            current = line.split(" |")[0].strip()
            continue
        m = re.match(r"\s+([\d.]+) ?([KMG]?B)\s+(\d+)\s+[\d.]+\s+([\d.]+)\s", line)
        if m and current == op:
            rows.append((float(m[1]) * UNITS[m[2]], int(m[3]), float(m[4]) * 1e-3))
    return rows


def test_a_log_summary_is_fitted_at_each_sizes_mean_time():
    """The tutorial's two summary tables time the Megatron-DeepSpeed run's broadcasts of 2.0 KB (146 calls,
    0.08 and 0.06 ms) and 98.25 MB (1 call, 8317.12 and 8540.60 ms) on the 16 ranks its verbose lines'
    bandwidths pin; broadcast's bus factor and hops are 1 (nccl-tests), so the line through the two sizes'
    weighted means gives 1/β and the latency."""
    rows = _summary_rows(TUTORIAL, "broadcast")
    assert sorted({b for b, _, _ in rows}) == [2048.0, 98.25 * 1024**2]
    means = {}
    for size in {b for b, _, _ in rows}:
        t = np.concatenate([np.full(c, m) for b, c, m in rows if b == size])
        means[size] = float(np.sum(1 / t) / np.sum(1 / t**2))  # the 1/t²-weighted mean
    (small, t_small), (big, t_big) = sorted(means.items())
    beta = (t_big - t_small) / (big - small)
    fits, err = _fit(TUTORIAL)
    f = fits[("broadcast", 16)]
    assert f["n_points"] == sum(c for _, c, _ in rows) == 294
    assert f["busbw_GBps"] == pytest.approx(1 / beta / 1e9, rel=1e-9)
    assert f["latency_s"] == pytest.approx(t_small - small * beta, rel=1e-9)
    assert f["latency_s"] < 0 and "unphysical" in f["note"]  # the 8.3 s broadcast is the run's first
    summarized = sum(c for op in ("broadcast", "reduce_scatter_tensor") for _, c, _ in
                     _summary_rows(TUTORIAL, op))
    verbose = TUTORIAL.read_text().count("rank=0 | comm op:")  # not the header comment's f-string
    assert (summarized, verbose) == (414, 3)
    assert f"{summarized + verbose} call(s) record only an approximate message size" in err
    assert f"{summarized} call(s) are rows of a log_summary table" in err


def test_verbose_all_gathers_are_fitted_on_their_shard_times_the_group():
    """The gloo ZeRO-3 run's verbose lines: 10 all_gather_into_tensor calls of 4 sizes (15.09, 24.19, 30.16
    and 69.44 KB, each a rank's shard of the 4-rank group), every other op at one size or none."""
    calls = [(float(m["size"]) * UNITS[m["unit"]] * 4, float(m["t"]) * 1e-3) for m in re.finditer(
        r"comm op: all_gather_into_tensor \| time \(ms\): (?P<t>[\d.]+) \| msg size: "
        r"(?P<size>[\d.]+) ?(?P<unit>[KMG]?B)", GLOO_ZERO3.read_text())]
    assert len(calls) == 10 and len({s for s, _ in calls}) == 4
    fits, err = _fit(GLOO_ZERO3)
    f = fits[("all_gather", 4)]
    assert (f["n_points"], f["n_sizes"]) == (10, 4)
    # the ring model t = 3α + (3/4)·n·β, its relative error least squares, by hand
    n, t = np.array([s for s, _ in calls]), np.array([x for _, x in calls])
    a = np.column_stack([np.full(len(n), 3.0), 0.75 * n]) / t[:, None]
    alpha, beta = np.linalg.lstsq(a, np.ones(len(n)), rcond=None)[0]
    assert f["alpha_s"] == pytest.approx(alpha, rel=1e-6)
    assert f["busbw_GBps"] == pytest.approx(1 / beta / 1e9, rel=1e-6)
    assert "an all-gather's shard times its group" in err


@pytest.mark.parametrize(("path", "kind"), [
    (TRACES / "kineto" / "ddp-resnet50-a100-rank0-of-2.json.gz", "a PyTorch profiler trace"),
    (TRACES / "nccl-debug" / "tp-allgather-reducescatter-2ranks.txt", "an NCCL debug log"),
    (GLOO_ZERO3, "a DeepSpeed comms log"),
    (TRACES / "flight-recorder" / "hsdp-2x2" / "rank0.json.gz", "a PyTorch Flight Recorder dump"),
])
def test_fit_out_refuses_a_trace_saying_what_it_is_and_what_reads_it(tmp_path, path, kind):
    out = tmp_path / "c.toml"
    res = runner.invoke(app, ["fit", str(path), "--out", str(out)])
    assert res.exit_code == 2 and not out.exists()
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("error: --out: ") and f"{path} is {kind}, not an nccl-tests sweep" in line
    assert "`zerocalc fit FILE` without --out" in line and "Traceback" not in res.output


def test_ranks_gives_the_group_of_a_trace_whose_calls_name_none():
    """The gloo ZeRO-3 run's log_summary alone (``comms-summary.txt``) prints no bandwidth that pins a world
    size: its calls name no group and nothing is fitted, unless ``--ranks`` gives it (4, the run's). Its
    all_gather_into_tensor rows: 15 calls of 10 sizes, each shard × 4 ranks."""
    path = TRACES / "deepspeed-gloo-zero3-n4" / "comms-summary.txt"
    res = runner.invoke(app, ["fit", str(path)])
    said = "no group size recorded (give a trace with a world size, or fit --ranks)"
    assert res.exit_code == 2 and said in res.stderr
    rows = _summary_rows(path, "all_gather_into_tensor")
    fits, err = _fit(path, "--ranks", "4")
    f = fits[("all_gather", 4)]
    assert (f["n_points"], f["n_sizes"]) == (sum(c for _, c, _ in rows), len(rows)) == (15, 10)
    assert "call(s) record no group size: taken as --ranks 4" in err
