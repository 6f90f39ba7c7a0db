"""``table`` on a topology calibrated by ``fit --out`` marks the NCCL pairs the calibration timed and says
what it timed, or that it timed nothing there, as ``check`` marks a calibrated row. Expected times from the
calibration file itself: a fitted pair's time is ``alpha_us + bytes / bw_GBps``."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from typer.testing import CliRunner

from zerocalc.cli import app

CAL = Path(__file__).parent / "data" / "calibrations" / "all_reduce-16xH100-2nodes-fit-1d5c39d.toml"
runner = CliRunner()


def _table(*args):
    res = runner.invoke(app, ["table", "--topology", str(CAL), "--psi", "1e9", *args])
    assert res.exit_code == 0, res.output
    return res


def test_a_calibrated_all_reduce_is_marked_and_timed_by_its_fitted_pair():
    """dp on 16 ranks (2 nodes of 8) all-reduces Ψ·b = 2 GB once a step: the file's NVLSTree/Simple pair
    times it, 77.16 µs + 2e9 B / 243.6 GB/s = 8.287 ms, marked ``*``; the note names what it timed."""
    (pair,) = [c for c in tomllib.loads(CAL.read_text())["nccl_calibration"] if c["algorithm"] == "NVLSTree"]
    res = _table("--n", "16", "--format", "json")
    dp = next(r for r in json.loads(res.stdout) if r["scheme"] == "dp")
    assert dp["nccl_choice"] == "AR NVLSTree/Simple*"
    assert abs(dp["time_s_nccl"] - (pair["alpha_us"] * 1e-6 + 2e9 / (pair["bw_GBps"] * 1e9))) < 1e-12
    notes = [x for x in res.stderr.splitlines() if "calibration of topology" in x]
    assert len(notes) == 1 and "times the pairs marked *: all_reduce on 16 ranks" in notes[0]
    text = _table("--n", "16").stdout.splitlines()
    assert any(x.startswith("dp ") and "AR NVLSTree/Simple*" in x for x in text)
    assert any(x.startswith("zero2 ") and "RS " in x and "*" not in x for x in text)  # RS/AG: the tables


def test_a_calibration_that_times_nothing_here_says_so():
    """On 32 ranks no phase is an all-reduce on 16: no pair is marked, and one note says what the
    calibration holds and that it timed nothing (before, the table said nothing of it)."""
    res = _table("--n", "32")
    assert "*" not in "".join(x for x in res.stdout.splitlines() if x.startswith(("dp ", "zero2 ")))
    notes = [x for x in res.stdout.splitlines() + res.stderr.splitlines() if "calibration of topology" in x]
    assert len(notes) == 1
    assert "holds all_reduce on 16 ranks and times no phase here" in notes[0]
