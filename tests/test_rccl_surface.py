"""What ``check`` says of an rccl-tests sweep: the library it names is RCCL, not NCCL.

Expected wording: the RCCL version is the one the file's banner states (``RCCL version : 2.22.3-HEAD``,
line 26 of the two-node file; the ROCm blog's file states 2.22.3 too, tests/data/traces/README.md), the
tables the latest RCCL release zerocalc.nccl.rccl transcribes (2.21.5); the variable named unpriced is the one
the two-node file's launch line sets (``-x NCCL_NET_GDR_LEVEL=3``, line 2).
"""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app

DATA = Path(__file__).parent / "data" / "traces" / "nccl-tests"
BLOG = DATA / "all_reduce_perf-8xMI300X-1node-rccl2.22.3-rocm-blog.txt"
TWO_NODES = DATA / "all_reduce_perf-16xMI300X-2nodes-rccl2.22.3.txt"
runner = CliRunner()


def check(*args):
    res = runner.invoke(app, ["check", *map(str, args)])
    assert res.exit_code == 0, res.output
    return res.stdout


def test_check_names_rccl_in_its_first_line_and_choice_column():
    out = check(BLOG)
    first, *rest = out.splitlines()
    assert f"{BLOG}: all_reduce on 8 ranks, RCCL 2.22.3 (tables of RCCL 2.21.5), topology amd-mi300x" in first
    header = next(line for line in rest if line.lstrip().startswith("size"))
    assert "RCCL choice" in header
    assert "NCCL choice" not in out and "NCCL 2.22.3" not in out
    # the file's 4 MiB row is unsteady (line 42: out-of-place 51.72 µs, in-place 129.0 µs): legend names RCCL
    assert "which RCCL's model cannot (it prices both alike)" in out


def test_check_json_says_the_library_of_each_sweep():
    (rccl,) = json.loads(check(BLOG, "--format", "json"))["sweeps"]
    assert rccl["library"] == "RCCL" and rccl["nccl_version"] == "2.22.3"
    nvidia = next(p for p in sorted(DATA.glob("all_reduce_perf-*H100*.txt")))
    sweeps = json.loads(check(nvidia, "--format", "json"))["sweeps"]
    assert sweeps and all(s["library"] == "NCCL" for s in sweeps)
    assert "NCCL choice" in check(nvidia)


def test_unpriced_variables_are_said_unpriced_by_rccls_model():
    out = check(TWO_NODES)
    assert "the file also sets NCCL_NET_GDR_LEVEL=3, which RCCL's cost model does not price" in out
    assert "NCCL's cost model" not in out


# ``table`` on an AMD preset: RCCL's columns. Hand derivation from RCCL 2.21.5's tuning_model_5
# (ROCm/rccl release-staging/rocm-rel-6.3 src/graph/tuning.cc, as zerocalc.nccl.rccl transcribes it): one
# node of 8 MI300X, ``totalBw`` = 7 xGMI peers × 48 GB/s = 336 GB/s; Ring/Simple: ``baseLat`` 17 µs, xGMI
# hop 2.1 µs, bwRatio 1.0; a ring's bandwidth is busBw × nRanks / nsteps.


def table(*args):
    res = runner.invoke(app, ["table", *map(str, args)])
    assert res.exit_code == 0, res.output
    return res


def table_json(*args):
    out = json.loads(table(*args, "--format", "json").stdout)
    return {r["scheme"]: r for r in (out["rows"] if isinstance(out, dict) else out)}


def test_table_prices_zero1_with_rccl_ring_simple_by_hand():
    """zero1 at Ψ = 1e9, fp16, 8 ranks: a reduce-scatter and an all-gather of 2e9 bytes, each 7 ring steps:
    17 + 7 × 2.1 µs and 2e9 B at 336 × 8/7 = 384 GB/s."""
    row = table_json("--topology", "amd-mi300x", "--n", "8", "--psi", "1e9", "--schemes", "zero1")["zero1"]
    one = (17 + 7 * 2.1 + 2e9 / (384 * 1e3)) * 1e-6
    assert row["time_s_nccl"] == pytest.approx(2 * one, rel=1e-9)
    assert row["nccl_choice"] == "RS Ring/Simple; AG Ring/Simple" and row["nccl_library"] == "RCCL"


def test_table_all_reduce_is_in_place_for_msccl_programs():
    """An all-reduce of 524,288 B (Ψ = 262,144 fp16) runs allreduce-allpairs-8n-simple.xml (in place,
    524,288-11,534,336 B): 17 + 2 × (2.1 µs + 524288 / 8 B at 48 GB/s). At 12 MiB (12,582,912 B) no in-place
    program runs (simple_2.xml starts at 14,680,065 B): RCCL's Ring/Simple, 14 steps, 336 × 8/14 GB/s."""
    small = table_json("--topology", "amd-mi300x", "--n", "8", "--psi", "262144", "--schemes", "dp")["dp"]
    assert small["nccl_choice"] == "AR MSCCL/Simple"
    assert small["time_s_nccl"] == pytest.approx((17 + 2 * (2.1 + 524288 / 8 / 48e3)) * 1e-6, rel=1e-9)
    mid = table_json("--topology", "amd-mi325x", "--n", "8", "--psi", "6291456", "--schemes", "dp")["dp"]
    assert mid["nccl_choice"] == "AR Ring/Simple"
    assert mid["time_s_nccl"] == pytest.approx((17 + 14 * 2.1 + 12582912 / (192 * 1e3)) * 1e-6, rel=1e-9)


def test_table_text_heads_rccl_columns_and_says_what_is_unpriced():
    res = table("--topology", "amd-mi300x", "--schemes", "dp,zeropp")
    header = res.stdout.splitlines()[1]
    assert "t RCCL" in header and "RCCL choice" in header and "NCCL" not in header
    assert "no NCCL columns" not in res.output
    assert "RCCL 2.21.5's own cost model" in res.output
    assert "zeropp: all-to-all (A2A) is not in RCCL's tuning model" in res.output
    dgx = table("--topology", "dgx-h100", "--schemes", "dp").stdout.splitlines()[1]
    assert "t NCCL" in dgx and "NCCL choice" in dgx


def test_table_refuses_a_tuner_plugin_on_an_amd_preset_in_one_line():
    res = runner.invoke(app, ["table", "--topology", "amd-mi300x", "--ofi-tuner", "1.14.0"])
    assert res.exit_code == 2
    assert res.stderr.strip().count("\n") == 0 and "--ofi-tuner" in res.stderr and "RCCL" in res.stderr



def test_fit_names_rccl_for_an_rccl_tests_sweep():
    """The blog's sweep lists 8 "AMD Instinct MI300X" device lines and RCCL's banner 2.22.3."""
    res = runner.invoke(app, ["fit", str(BLOG)])
    assert res.exit_code == 0, res.output
    assert f"{BLOG}: all_reduce on 8 ranks, RCCL 2.22.3, 32 sizes" in res.stdout
    (fit,) = json.loads(runner.invoke(app, ["fit", str(BLOG), "--format", "json"]).stdout)
    assert fit["library"] == "RCCL" and fit["nccl_version"] == "2.22.3"
    nvidia = DATA / "all_gather_perf-10xH100-10nodes-1pernode-nccl2.29.2.txt"
    assert ", NCCL 2.29.2," in runner.invoke(app, ["fit", str(nvidia)]).stdout
