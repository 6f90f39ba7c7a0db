"""`zerocalc table --ofi-tuner` and `zerocalc report --ofi-tuner`: the schemes priced under aws-ofi-nccl's
tuner plugin, as `check --ofi-tuner` prices a sweep.

Expected pairs come from the plugin's own regions (aws-ofi-nccl v1.10.0 ``src/tuner/nccl_ofi_tuner.c``,
all-reduce, 8 ranks per node): on 16 ranks Tree/LL128 holds every size up to its vertex at 31457280 bytes
and NVLS Tree/Simple every size above (the region geometry is tested point by point against the plugin's
own decisions in test_nccl_ofi_tuner.py). From v1.14.0 both of its tuners return nothing on 2 nodes or fewer
(commit b70a787b, "Default to nccl internal tuner on two nodes"). A dp step is one all-reduce of Ψ × 2 bytes
(fp16) on the world.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.nccl.ofi_tuner import ofi_tuner
from zerocalc.report.config import ReportConfig
from zerocalc.report.sweeps import nccl_under_tuner
from zerocalc.topology import get_topology, topology_to_mapping

runner = CliRunner()
TREE_LL128_VERTEX = 31457280  # bytes: v1.10.0's Tree/LL128 region at y = 16 ranks


def _table(*args: str) -> dict[str, dict]:
    res = runner.invoke(app, ["table", "--topology", "aws-p5", "--n", "16", "--schemes", "dp,zero1",
                              "--format", "json", *args])
    assert res.exit_code == 0, res.output
    return {r["scheme"]: r for r in json.loads(res.stdout)}


@pytest.mark.parametrize(("psi", "pair"), [
    (TREE_LL128_VERTEX // 2, "Tree/LL128"),  # exactly the vertex: on the region's edge, inside
    (15_000_000, "Tree/LL128"),
    (TREE_LL128_VERTEX // 2 + 1, "NVLSTree/Simple"),
    (1_000_000_000, "NVLSTree/Simple"),
])
def test_the_plugins_region_picks_the_all_reduce(psi, pair):
    rows = _table("--psi", str(psi), "--ofi-tuner", "1.10.0-aws")
    assert rows["dp"]["nccl_choice"] == f"AR {pair}^"
    assert rows["dp"]["nccl_ofi_tuner"] == "aws-ofi-nccl 1.10.0-aws"
    # v1.10's regions are all-reduce's alone: zero1's reduce-scatter and all-gather keep NCCL's own choice
    stock = _table("--psi", str(psi))
    assert "^" not in rows["zero1"]["nccl_choice"]
    assert rows["zero1"]["nccl_choice"] == stock["zero1"]["nccl_choice"]
    assert rows["zero1"]["time_s_nccl"] == stock["zero1"]["time_s_nccl"]
    assert "nccl_ofi_tuner" not in stock["dp"]
    # where NCCL's own model picks the plugin's pair too, the time is the same
    if stock["dp"]["nccl_choice"] == f"AR {pair}":
        assert rows["dp"]["time_s_nccl"] == pytest.approx(stock["dp"]["time_s_nccl"], rel=1e-12)


def test_two_nodes_left_to_nccl_from_v1_14():
    stock = _table("--psi", "1e7")
    res = runner.invoke(app, ["table", "--topology", "aws-p5", "--n", "16", "--schemes", "dp,zero1", "--psi",
                              "1e7", "--ofi-tuner", "1.14.0"])
    assert res.exit_code == 0, res.output
    assert "^" not in res.stdout
    assert "aws-ofi-nccl 1.14.0's tuner plugin" in res.stdout and "returned no pair" in res.stdout
    rows = _table("--psi", "1e7", "--ofi-tuner", "1.14.0")
    for s in ("dp", "zero1"):
        assert (rows[s]["nccl_choice"], rows[s]["time_s_nccl"]) == (stock[s]["nccl_choice"],
                                                                    stock[s]["time_s_nccl"])


def _toml_with_tuner(tmp_path) -> str:
    (tmp_path / "rules.csv").write_text("allreduce,0,17179869184,ring,simple,2,-1,-1\n")
    data = topology_to_mapping(get_topology("aws-p5"))
    lines = [f"{k} = {json.dumps(v)}" for k, v in data.items() if not isinstance(v, dict | list)]
    lines += ['nccl_tuner = "rules.csv"']
    for tier in ("intra", "inter"):
        lines += [f"[{tier}]", *(f"{k} = {v}" for k, v in data[tier].items())]
    (tmp_path / "aws-p5.toml").write_text("\n".join(lines) + "\n")
    return str(tmp_path / "aws-p5.toml")


@pytest.mark.parametrize(("args", "needle"), [
    (["--topology", "dgx-h100", "--n", "32", "--ofi-tuner", "1.14.0"], "EC2 instance type"),
    (["--topology", "aws-p5", "--ofi-tuner", "1.14.0", "--nccl-version", "2.18.3"], "no tuner plugin API"),
    (["--topology", "aws-p5", "--ofi-tuner", "1.10.0", "--nccl-version", "2.19.3", "--nccl-algo", "Ring"],
     "refuses to load"),
    (["--topology", "aws-p5", "--ofi-tuner", "1.8.0"], "ships no tuner plugin"),
    (["--topology", "aws-p5", "--ofi-tuner", "1.22.0"], "not modelled"),
    (["--topology", "aws-p5", "--ofi-tuner", "1.10.0", "--nccl-tuner", "x.csv"], "not both"),
    (["--topology", "aws-p5en", "--n", "32", "--ofi-tuner", "1.14.0"], "p5en regions are not modelled"),
])
def test_table_refusals_are_one_line_and_exit_2(args, needle):
    res = runner.invoke(app, ["table", *args])
    assert res.exit_code == 2, res.output
    assert needle in res.stderr and "--ofi-tuner" in res.stderr and len(res.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("command", ["table", "report", "check"])
def test_a_topology_naming_tuner_rules_is_refused_with_ofi_tuner(tmp_path, command):
    args = {"table": ["table"], "report": ["report", "-o", str(tmp_path / "r.pdf")],
            "check": ["check", "x.txt"]}[command]
    res = runner.invoke(app, [*args, "--topology", _toml_with_tuner(tmp_path), "--ofi-tuner", "1.10.0"])
    assert res.exit_code == 2, res.output
    assert "names tuner rules" in res.stderr and "--ofi-tuner" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and not (tmp_path / "r.pdf").exists()


def test_report_prices_as_the_table_command_does_under_the_plugin():
    tuned = _table("--psi", "1.5e7", "--ofi-tuner", "1.10.0")
    stock = _table("--psi", "1.5e7")
    on = ofi_tuner("1.10.0")
    frame, notes = nccl_under_tuner(ReportConfig(psi=1.5e7, n=16, gpus_per_node=8, topology="aws-p5",
                                                 ofi_tuner=on))
    frame = frame.set_index("scheme")
    for s in ("dp", "zero1"):
        assert frame.loc[s, "tuned_choice"] == tuned[s]["nccl_choice"]
        assert frame.loc[s, "time_s_tuned"] == pytest.approx(tuned[s]["time_s_nccl"], rel=1e-12)
        assert frame.loc[s, "nccl_choice"] == stock[s]["nccl_choice"]
    assert frame.loc["dp", "tuned_choice"] == "AR Tree/LL128^"
    assert any("aws-ofi-nccl 1.10.0's tuner plugin" in n for n in notes)


def test_report_takes_the_plugin_and_refuses_one_it_cannot_price_before_any_work(tmp_path, no_work):
    res = runner.invoke(app, ["report", "-o", str(tmp_path / "r.pdf"), "--topology", "aws-p5", "--ofi-tuner",
                              "1.13.0"])
    assert res.exit_code == 0, res.output
    (config,) = no_work
    assert config.ofi_tuner.name == "aws-ofi-nccl 1.13.0" and config.ofi_tuner.platform == "p5"
    assert config.nccl_tuner is None
    res = runner.invoke(app, ["report", "-o", str(tmp_path / "s.pdf"), "--topology", "dgx-h100",
                              "--ofi-tuner", "1.14.0"])
    assert res.exit_code == 2 and "EC2 instance type" in res.stderr and "--ofi-tuner" in res.stderr
    assert len(no_work) == 1 and not (tmp_path / "s.pdf").exists()
