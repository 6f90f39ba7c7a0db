"""An α-β fit whose times do not grow with the size (β ≤ 0) or whose latency is negative (α < 0).

gloo's CPU op times include waiting for the other ranks, so a trace's calls can take longer at a small size
than at a large one: a straight line through such times falls (β < 0), and 1/β is no bus bandwidth. The
fit says so, is not reliable, and predicts no step time; the texts of ``check`` and ``fit`` print no NaN.
The traces below are written by hand: two all-reduce sizes, the larger one faster."""

import json
import re
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.validate import fit_alpha_beta

runner = CliRunner()


def _trace(tmp_path: Path, timed: list[tuple[int, float]], steps: int = 2) -> Path:
    """Rank 0 of a 4-rank gloo run, ``steps`` ProfilerSteps, each with the all-reduces ``timed`` (fp32
    elements, duration in µs) as PyTorch 2.13 writes them on CPU: a ``gloo:all_reduce`` annotation on
    gloo's worker thread inside the step (its input's type and dims), whose duration is the call's."""
    events, ts = [], 0.0
    for s in range(steps):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s + 1}", "pid": 1,
                       "tid": 1, "ts": ts, "dur": 100_000.0, "args": {}})
        for i, (elements, dur) in enumerate(timed):
            events.append({"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 1,
                           "tid": 2, "ts": ts + 10.0 + 20_000.0 * i, "dur": dur,
                           "args": {"External id": 100 * s + i, "Record function id": 0,
                                    "Concrete Inputs": [""], "Input type": ["float"],
                                    "Input Strides": [[1]], "Input Dims": [[elements]]}})
        ts += 100_000.0
    doc = {"distributedInfo": {"backend": "gloo", "rank": 0, "world_size": 4, "pg_count": 1,
                               "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "pg_size": 4,
                                              "backend_config": "cpu:gloo", "ranks": [0, 1, 2, 3]}]},
           "traceEvents": events}
    path = tmp_path / "rank0.json"
    path.write_text(json.dumps(doc))
    return path


# 1,000 elements in 9 ms, 1,000,000 in 3 ms: by hand the line through them falls, β < 0
FALLING = [(1_000, 9_000.0), (1_000_000, 3_000.0)]


def test_a_falling_fit_has_no_bus_bandwidth_and_is_not_reliable():
    bytes_ = np.array([4e3, 4e6])
    fit = fit_alpha_beta(bytes_, np.array([9e-3, 3e-3]), op="all_reduce", group_size=4)
    assert fit.beta_s_per_byte < 0 and not fit.physical
    assert not fit.reliable  # was True: NaN compared False with its standard error
    assert fit.as_record()["reliable"] is False
    # times that grow: physical, as before
    grows = fit_alpha_beta(bytes_, np.array([1e-3, 3e-3]), op="all_reduce", group_size=4)
    assert grows.physical and grows.beta_s_per_byte > 0


def test_check_predicts_no_step_time_from_a_falling_fit(tmp_path):
    path = _trace(tmp_path, FALLING)
    r = runner.invoke(app, ["check", str(path)])
    assert r.exit_code == 0, r.output
    line = next(x for x in r.stdout.splitlines() if x.startswith("timing:"))
    assert not re.search(r"\bnan\b", r.stdout, re.I)
    assert "no bus bandwidth (β = " in line and "no step prediction from it" in line
    # measured: the two calls of a step, 9 + 3 ms, per rank per step
    assert "measured (sum of durations) 12 ms per rank per step" in line
    assert "fit is unphysical" in r.stdout and "misses the measured sum" not in r.stdout
    t = json.loads(runner.invoke(app, ["check", str(path), "--format", "json"]).stdout)["timing"]
    assert t["predicted_step_time_s"] is None and t["ratio"] is None
    assert t["fit"]["busbw_GBps"] is None and t["fit"]["reliable"] is False
    assert abs(t["measured_step_time_s"] - 12e-3) < 1e-9


def test_check_keeps_its_prediction_where_the_times_grow(tmp_path):
    path = _trace(tmp_path, [(1_000, 1_000.0), (1_000_000, 3_000.0)])
    t = json.loads(runner.invoke(app, ["check", str(path), "--format", "json"]).stdout)["timing"]
    # two sizes: the line passes through both, so the step's two calls are predicted exactly, 4 ms
    assert abs(t["predicted_step_time_s"] - 4e-3) < 1e-9 and abs(t["ratio"] - 1.0) < 1e-9


def test_fit_prints_no_nan_for_a_falling_fit(tmp_path):
    r = runner.invoke(app, ["fit", str(_trace(tmp_path, FALLING))])
    assert r.exit_code == 0, r.output
    assert not re.search(r"\bnan\b", r.stdout, re.I)
    assert "  no bus bandwidth: β = -" in r.stdout and "(the times do not grow with the size)" in r.stdout


def test_a_negative_latency_predicts_no_step_time(tmp_path):
    # 500,000 elements in 1 ms, 1,000,000 in 9 ms: by hand the line through them crosses zero size at
    # 1 − 8 = −7 ms, a negative latency (β > 0: a bus bandwidth, printed)
    path = _trace(tmp_path, [(500_000, 1_000.0), (1_000_000, 9_000.0)])
    line = next(x for x in runner.invoke(app, ["check", str(path)]).stdout.splitlines()
                if x.startswith("timing:"))
    assert "latency -7 ms (negative), busbw " in line and "no step prediction from it" in line
    t = json.loads(runner.invoke(app, ["check", str(path), "--format", "json"]).stdout)["timing"]
    assert t["predicted_step_time_s"] is None and t["fit"]["reliable"] is False
    assert t["fit"]["busbw_GBps"] > 0
