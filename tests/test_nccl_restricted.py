"""An NCCL_ALGO / NCCL_PROTO restriction that some of a table's collectives cannot run under.

NCCL's Tree algorithm runs all-reduce only (``src/graph/tuning.cc``: ``ncclTopoTuneModel`` gives Tree a
bandwidth for ``ncclFuncAllReduce`` alone; RCCL's the same), so under ``NCCL_ALGO=Tree`` a reduce-scatter,
all-gather, reduce or broadcast has no algorithm and NCCL fails the call. ``table`` prices the schemes
whose every collective can run (data parallelism: one all-reduce) and leaves the others ``n/a``, named in a
note, where it refused the whole table; where nothing is left to price (NVLS across nodes without CollNet),
the restriction is refused, one line and exit 2, as before.
"""

from __future__ import annotations

import json
from pathlib import Path

import pypdf
import pytest
from typer.testing import CliRunner

from zerocalc.cli import app

runner = CliRunner()
SWEEPS = Path(__file__).parent / "data" / "traces" / "nccl-tests"
ONLY_ALL_REDUCE = {"dp"}  # the schemes whose collectives are all all-reduces


@pytest.mark.parametrize(("topology", "lib"), [("dgx-h100", "NCCL"), ("amd-mi300x", "RCCL")])
def test_table_under_tree_prices_the_all_reduce_schemes_and_leaves_the_others_na(topology, lib):
    res = runner.invoke(app, ["table", "--topology", topology, "--nccl-algo", "Tree", "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = {r["scheme"]: r for r in json.loads(res.stdout)}
    for scheme, r in rows.items():
        if scheme in ONLY_ALL_REDUCE:
            assert r["nccl_choice"].startswith("AR Tree/") and r["time_s_nccl"] > 0
        else:
            assert (r["nccl_choice"], r["time_s_nccl"]) == ("n/a", None)
    notes = [ln for ln in res.stderr.splitlines() if " not priced (n/a): " in ln]
    for coll, schemes in [("reduce_scatter", "zero1, zero2"), ("reduce", "deepspeed-zero2-reduce"),
                          ("broadcast", "torch-zero1")]:
        assert any(ln.startswith(f"note: t {lib}: {schemes} not priced (n/a): ") and f"can run {coll} " in ln
                   for ln in notes), notes


def test_table_under_a_restriction_that_leaves_nothing_is_one_line_exit_2():
    # 64 ranks on 8 nodes: NVLS alone runs no all-reduce across nodes without CollNet, and no other
    # collective at all
    res = runner.invoke(app, ["table", "--topology", "dgx-h100", "--nccl-algo", "NVLS"])
    assert res.exit_code == 2
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.output
    assert res.stderr.startswith("error: --nccl-algo: NCCL_ALGO: no algorithm/protocol that NCCL_ALGO / "
                                 "NCCL_PROTO allow can run all_reduce here (NVLS/Simple: NVLS across nodes "
                                 "needs CollNet)")


def test_check_of_a_file_with_two_collectives_under_tree_prices_the_all_reduce():
    # the file's all-reduce sweep is priced under Tree; its all-gather, which Tree cannot run, is said not
    # priced (the whole file was refused)
    name = "tag-output-allreduce-allgather-2ranks.txt"
    res = runner.invoke(app, ["check", str(SWEEPS / name), "--nccl-algo", "Tree", "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    reduce, gather = doc["sweeps"]
    assert reduce["op"] == "all_reduce" and {r["algorithm"] for r in reduce["rows"]} == {"Tree"}
    assert (gather["op"], gather["rows"]) == ("all_gather", [])
    assert gather["notes"] == ["not priced: no algorithm/protocol that NCCL_ALGO / NCCL_PROTO allow can run "
                               "all_gather here (all excluded)"]
    text = runner.invoke(app, ["check", str(SWEEPS / name), "--nccl-algo", "Tree"])
    assert (f"{name}: all_gather on 2 ranks: not priced: no algorithm/protocol that NCCL_ALGO / NCCL_PROTO "
            "allow can run all_gather here") in text.output
    alone = runner.invoke(app, ["check", str(SWEEPS / "all_gather_perf-8xH100-1node-nccl2.29.2.txt"),
                                "--nccl-algo", "Tree"])
    assert alone.exit_code == 2 and alone.stderr.count("\n") == 1
    assert "can run all_gather here (all excluded)" in alone.stderr


@pytest.mark.slow
def test_report_under_tree_says_what_it_could_not_price(tmp_path):
    out = tmp_path / "r.pdf"
    res = runner.invoke(app, ["report", "-o", str(out), "--topology", "dgx-h100", "--nccl-algo", "Tree"])
    assert res.exit_code == 0, res.output
    pages = [p.extract_text() for p in pypdf.PdfReader(str(out)).pages]
    text = " ".join(" ".join(pages).split())
    assert "nan" not in text.split() and "NaN" not in text
    # the in-short box: the exact change's bytes, and why no time
    assert ("(deepspeed-zero2 → zero2), 14.8 GB per GPU per step; its time is not priced (section 4 names "
            "what is not and why).") in text
    # the priced table: data parallelism under Tree, each other scheme n/a in its time and ratio columns
    assert "dp AR Tree/Simple" in text and "zero2 n/a n/a 75.6 ms n/a" in text
    # the notes keep the schemes' names as written
    assert "• zero1, zero2 not priced (n/a)" in text and "Zero1" not in text


def test_feasibility_under_nvls_alone_prices_the_plan_it_can():
    # one H100 node: NVLS runs the all-reduce, reduce-scatter and all-gather; the plan's items that compare
    # a scheme with and without in-network reduction price the "without" side on rings, which NCCL_ALGO=NVLS
    # leaves nothing to run: those items are unpriced (the whole command was refused, exit 2)
    res = runner.invoke(app, ["feasibility", "--topology", "dgx-h100", "--n", "8", "--nccl-algo", "NVLS"])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    (colocated,) = [ln for ln in lines if ln.strip().startswith("zero2 → colocated:")]
    assert "per step [NCCL: RS NVLS/Simple; AG NVLS/Simple → AG NVLS/Simple]" in colocated
    in_switch = [lines[i + 1] for i, ln in enumerate(lines) if "[in the switch: nvls]" in ln]
    assert in_switch and all("time not priced by NCCL's model" in ln for ln in in_switch)
