"""``fit --out`` on files of several series (nccl-tests ``-d all`` / ``-o all``, several ops): each series
calibrated on its own and priced by its own pairs, a sweep the model does not price skipped and said."""

from __future__ import annotations

import json
import tomllib

import numpy as np
import pytest
from sweep_files import DATA, check_json, runner

from zerocalc.cli import app
from zerocalc.topology import Calibration, series_calibration, topology_from_mapping, topology_to_mapping

DALL = "all_reduce_perf-16xH200-2nodes-roce-dall-nccl2.30.4.txt"
MULTI_OP = "all_reduce-alltoall-8xMI355X-oci-g8.txt"


def typed_rows(name):
    """{type: [(size, out-of-place µs)]} by a plain split of the file (type: nccl-tests' name)."""
    out: dict[str, list] = {}
    for line in (DATA / name).read_text().splitlines():
        f = line.split()
        if len(f) >= 13 and f[0].isdigit() and f[1].isdigit():
            out.setdefault(f[2], []).append((int(f[0]), float(f[5])))
    return out


def _check(name, toml):
    res = runner.invoke(app, ["check", str(DATA / name), "--topology", str(toml), "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["sweeps"]


def test_dall_file_calibrates_each_type_on_its_own(tmp_path):
    """Types of one all-reduce run at different rates (the file's busbw: int8 390 GB/s on Ring, int64 436,
    float 487 on NVLS Tree, fp8 362 on Tree): one calibration for all of them misprices the others by up
    to 25%; one per type prices each series at its own measured times."""
    out = tmp_path / "c.toml"
    res = runner.invoke(app, ["fit", str(DATA / DALL), "--out", str(out)])
    assert res.exit_code == 0, res.output
    cals = tomllib.loads(out.read_text())["nccl_calibration"]
    counted = typed_rows(DALL)
    assert len({c["dtype"] for c in cals}) == len(counted) == 12
    assert {c["redop"] for c in cals} == {"sum"}
    sweeps = _check(DALL, out)
    assert len(sweeps) == len(counted)
    for s, (_, rows) in zip(sweeps, counted.items(), strict=True):
        assert [r["bytes"] for r in s["rows"]] == [n for n, _ in rows]
        assert all(r["calibrated"] for r in s["rows"])
        assert [r["predicted_s"] for r in s["rows"]] == pytest.approx([t * 1e-6 for _, t in rows], rel=0.02)
        assert 0.9 <= float(np.median([r["ratio"] for r in s["rows"]])) <= 1.1


def test_series_calibration_prefers_the_series_own_then_any_type_then_any():
    def cal(dtype, bw, op="all_reduce", redop="sum"):
        return Calibration(op, 16, "any", "any", 10.0, bw, "2.30.4", dtype, redop if dtype else "")

    typed = (cal("int8", 1.0), cal("fp32", 2.0), cal("fp32", 3.0, redop="max"))
    assert [c.bw_GBps for c in series_calibration(typed, "fp32", "sum")] == [2.0]
    assert [c.bw_GBps for c in series_calibration(typed, "fp32", "max")] == [3.0]
    assert [c.bw_GBps for c in series_calibration(typed, "bf16", "sum")] == [1.0, 2.0, 3.0]  # none fits
    mixed = (*typed, cal("", 4.0), cal("", 5.0, op="all_gather"))
    assert [c.bw_GBps for c in series_calibration(mixed, "bf16", "sum")] == [4.0, 5.0]
    assert [c.bw_GBps for c in series_calibration(mixed, "int8", "SUM")] == [1.0, 5.0]
    assert [c.bw_GBps for c in series_calibration(mixed, None, None)] == [4.0, 5.0]


def test_calibration_type_keys_round_trip_and_stay_out_when_untyped():
    base = {"gpus_per_node": 8, "intra": {"alpha_us": 3, "bw_GBps": 300},
            "inter": {"alpha_us": 14, "bw_GBps": 50},
            "nccl_calibration": [
                {"op": "all_reduce", "ranks": 16, "algorithm": "any", "protocol": "any", "alpha_us": 5.0,
                 "bw_GBps": 100.0, "nccl_version": "2.30.4", "dtype": "fp8e4m3", "redop": "sum"},
                {"op": "all_reduce", "ranks": 16, "algorithm": "any", "protocol": "any", "alpha_us": 5.0,
                 "bw_GBps": 200.0}]}
    topo = topology_from_mapping(base)
    assert [(c.dtype, c.redop) for c in topo.nccl_calibration] == [("fp8e4m3", "sum"), ("", "")]
    again = topology_to_mapping(topo)["nccl_calibration"]
    assert again[0]["dtype"] == "fp8e4m3" and again[0]["redop"] == "sum"
    assert "dtype" not in again[1] and "redop" not in again[1]


def test_multi_op_rccl_file_calibrates_each_op(tmp_path):
    """RCCL's all-reduce and all-to-all of one file: each op calibrated, each priced by its own pair (the
    all-to-all through RCCL's grouped sends, zerocalc.nccl.rccl_p2p) at the file's times."""
    out = tmp_path / "c.toml"
    res = runner.invoke(app, ["fit", str(DATA / MULTI_OP), "--out", str(out)])
    assert res.exit_code == 0, res.output
    ops = {c["op"] for c in tomllib.loads(out.read_text())["nccl_calibration"]}
    assert ops == {"all_reduce", "all_to_all"}
    sweeps = _check(MULTI_OP, out)
    assert [s["op"] for s in sweeps] == ["all_reduce", "all_to_all"]
    for s in sweeps:
        assert s["rows"] and all(r["calibrated"] for r in s["rows"])
        assert 0.9 <= float(np.median([r["ratio"] for r in s["rows"]])) <= 1.1


def _int8_cut_to_one_size(tmp_path, wrong=False):
    """The -d all file with its int8 series cut to its first row (its #wrong counts set to 1: a failed
    check, where ``wrong``)."""
    lines = (DATA / DALL).read_text().splitlines(keepends=True)
    int8 = [i for i, ln in enumerate(lines) if len(ln.split()) >= 13 and ln.split()[2] == "int8"]
    if wrong:
        cells = lines[int8[0]].split()
        cells[8] = cells[12] = "1"
        lines[int8[0]] = "  ".join(cells) + "\n"
    cut = tmp_path / DALL
    cut.write_text("".join(ln for i, ln in enumerate(lines) if i not in int8[1:]))
    return cut, lines[int8[0]].split()


def test_series_without_a_timed_size_is_skipped_and_named(tmp_path):
    """The -d all file with its int8 series cut to one size whose check failed: the other eleven series are
    fitted, int8 is named as not fitted, and no calibration is written for it."""
    cut, _ = _int8_cut_to_one_size(tmp_path, wrong=True)
    out = tmp_path / "c.toml"
    res = runner.invoke(app, ["fit", str(cut), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert ("(int8 sum): not fitted: all_reduce on 16 ranks: no timed size that passed nccl-tests' check "
            "(1 failed it): nothing to fit") in res.stdout
    dtypes = {c["dtype"] for c in tomllib.loads(out.read_text())["nccl_calibration"]}
    assert "int8" not in dtypes and len(dtypes) == len(typed_rows(DALL)) - 1


def test_series_of_one_size_scales_the_model_to_it(tmp_path):
    """int8 cut to its first size (10 GiB): no line through one size; the calibration scales the model's
    time to the size's measured time, so check on the file written predicts that time (the file's
    out-of-place 51702.1 µs) at ratio 1 (fit_calibration; before, the series was not fitted)."""
    cut, cells = _int8_cut_to_one_size(tmp_path)
    out = tmp_path / "c.toml"
    res = runner.invoke(app, ["fit", str(cut), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "(int8 sum), any/any: the model's time × " in res.stdout
    assert "one timed size, too few for an α-β line: every pair's time scaled to it" in res.stdout
    (int8,) = [c for c in tomllib.loads(out.read_text())["nccl_calibration"] if c["dtype"] == "int8"]
    assert (int8["algorithm"], int8["protocol"]) == ("any", "any") and int8["model_scale"] > 0
    assert "alpha_us" not in int8 and "bw_GBps" not in int8
    chk = runner.invoke(app, ["check", str(cut), "--topology", str(out), "--format", "json"])
    assert chk.exit_code == 0, chk.output
    (s,) = [s for s in json.loads(chk.stdout)["sweeps"] if s["dtype"] == "int8"]
    (row,) = s["rows"]
    assert row["bytes"] == int(cells[0]) == 10737418240 and row["calibrated"]
    assert row["measured_s"] == pytest.approx(float(cells[5]) * 1e-6)
    assert row["predicted_s"] == pytest.approx(51702.1e-6, rel=1e-9) and row["ratio"] == pytest.approx(1.0)


def test_fit_of_only_unfit_sweeps_is_one_line_exit_2(tmp_path):
    """A file whose every sweep is unfit still fails: one line, exit 2 (here the -d all file cut to its
    first int8 size, whose check failed)."""
    cut, cells = _int8_cut_to_one_size(tmp_path, wrong=True)
    lines = cut.read_text().splitlines(keepends=True)
    row = [ln.split() for ln in lines]
    cut.write_text("".join(ln for ln, f in zip(lines, row, strict=True)
                           if not (len(f) >= 13 and f[0].isdigit()) or f[2] == "int8"))
    res = runner.invoke(app, ["fit", str(cut), "--out", str(tmp_path / "c.toml")])
    assert res.exit_code == 2, res.output
    assert "no timed size that passed nccl-tests' check (1 failed it)" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and not (tmp_path / "c.toml").exists()


def test_fit_takes_checks_algorithm_restriction(tmp_path):
    """Under --nccl-algo the fit calibrates the pairs NCCL picks under it, the ones check then prices."""
    name, out = "all_reduce_perf-72xGB200-nvl72-1rack-nccl2.26.2.txt", tmp_path / "c.toml"
    algo = "^NVLS,NVLSTree"
    res = runner.invoke(app, ["fit", str(DATA / name), "--out", str(out), "--topology", "gb200-nvl72",
                              "--nccl-algo", algo])
    assert res.exit_code == 0, res.output
    fitted = {(c["algorithm"], c["protocol"]) for c in tomllib.loads(out.read_text())["nccl_calibration"]}
    sweep = check_json(name, "--topology", str(out), "--nccl-algo", algo)
    assert "NVLS" not in {a for a, _ in fitted}
    assert {(r["algorithm"], r["protocol"]) for r in sweep["rows"]} & fitted
    assert 0.9 <= float(np.median([r["ratio"] for r in sweep["rows"]])) <= 1.1
    bad = runner.invoke(app, ["fit", str(DATA / name), "--out", str(tmp_path / "d.toml"),
                              "--nccl-algo", "Rong"])
    assert bad.exit_code == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_pair_fit_is_least_absolute_relative_error():
    """Three sizes on t = 10 µs + n / (1 GB/s) and a fourth three times that line (a slow outlier): the fit
    goes through the three (the sum of |predicted / measured - 1| is then 2/3, the least), where a least
    squares line is pulled off all four."""
    from zerocalc.validate.sweep import _fit_pair

    n = np.array([1e6, 2e6, 4e6, 8e6])
    t = 10e-6 + n / 1e9
    t[3] *= 3
    alpha, beta = _fit_pair(n, t)
    assert alpha == pytest.approx(10e-6) and beta == pytest.approx(1e-9)
    ratios = (alpha + beta * n) / t
    assert float(np.median(ratios)) == pytest.approx(1.0)


def test_plain_fit_of_a_one_size_sweep_points_to_fit_out():
    """The ring α-β fit needs two sizes; on an nccl-tests sweep of one (8 GiB on 8 H200), the refusal says
    that ``fit --out`` calibrates on it (a trace of one size gets no such hint:
    test_validate_fit_report)."""
    name = "all_reduce_perf-8xH200-azure-ndv5-nccl2.19.3.txt"
    res = runner.invoke(app, ["fit", str(DATA / name)])
    assert res.exit_code == 2 and res.stderr.count("\n") == 1
    assert res.stderr.strip().endswith("1 call(s) of 1 size left out: a fit needs at least two sizes "
                                       "(fit --out calibrates NCCL's model on one size)")


def test_rccl_table_on_a_one_size_calibration_says_the_time_is_scaled(tmp_path):
    """An rccl-tests sweep (8 MI300X) cut to its largest size: fit --out scales RCCL's model to it, and table
    on the file marks the all-reduce it times and says it is RCCL's time scaled, not a fitted pair (its note
    said "a fitted α-β pair" whatever the calibration held)."""
    src = DATA / "all_reduce_perf-8xMI300X-g8-rocm-acceptance-guide.txt"
    lines = src.read_text().splitlines(keepends=True)
    rows = [i for i, ln in enumerate(lines) if len(ln.split()) >= 13 and ln.split()[0].isdigit()]
    cut = tmp_path / "one.txt"
    cut.write_text("".join(ln for i, ln in enumerate(lines) if i not in rows[:-1]))
    out = tmp_path / "c.toml"
    fit = runner.invoke(app, ["fit", str(cut), "--out", str(out)])
    assert fit.exit_code == 0, fit.output
    assert [c["algorithm"] for c in tomllib.loads(out.read_text())["nccl_calibration"]] == ["any"]
    res = runner.invoke(app, ["table", "--topology", str(out), "--n", "8", "--schemes", "dp"])
    assert res.exit_code == 0, res.output
    assert "AR Ring/Simple*" in res.stdout
    assert ("note: t RCCL: * = timed by the topology's calibration (zerocalc fit --out: a fitted α-β pair, "
            "or RCCL's time scaled)") in res.output
