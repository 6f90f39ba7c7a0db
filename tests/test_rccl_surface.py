"""What ``check`` says of an rccl-tests sweep: the library it names is RCCL, not NCCL.

Expected wording: the RCCL version is the one the file's banner states (``RCCL version : 2.22.3-HEAD``,
line 26 of the two-node file; the ROCm blog's file states 2.22.3 too, tests/data/traces/README.md), the
tables the latest RCCL release zerocalc.nccl.rccl transcribes (2.21.5); the variable named unpriced is the one
the two-node file's launch line sets (``-x NCCL_NET_GDR_LEVEL=3``, line 2).
"""

import json
from pathlib import Path

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
