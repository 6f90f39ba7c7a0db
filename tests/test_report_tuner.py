"""`zerocalc report --nccl-tuner`: the schemes priced with NCCL's cost model under a tuner's rules.

The priced times are compared with NCCL's formula (``ncclTopoGetAlgoTime``: time = latency + bytes /
bandwidth, the bandwidth scaled by the channels a tuner imposes, v2.21.5 ``src/graph/tuning.cc``) and
with ``zerocalc table --nccl-tuner`` (tested against source in test_nccl_tuner.py); bad tuner input is
refused before any work, as ``check`` and ``table`` refuse it.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.nccl.tuner import parse_tuner
from zerocalc.report.config import ReportConfig
from zerocalc.report.sweeps import nccl_under_tuner

runner = CliRunner()
CLUSTER = {"psi": 1e9, "n": 16, "gpus_per_node": 8, "topology": "dgx-h100"}


def _ring_rule(channels: int) -> str:
    return f"allreduce,0,17179869184,ring,simple,{channels},-1,-1\n"


def _priced(channels: int):
    tuner = parse_tuner(_ring_rule(channels).splitlines(), f"ring{channels}.csv")
    frame, notes = nccl_under_tuner(ReportConfig(**CLUSTER, nccl_tuner=tuner))
    return frame.set_index("scheme"), notes


def test_a_rule_that_forces_ring_on_fewer_channels_slows_the_step_as_nccls_formula_says():
    one, _ = _priced(1)
    two, _ = _priced(2)
    four, notes = _priced(4)
    # dp: one all-reduce of Ψ·b on the world of 16; the rule forces Ring/Simple on c channels, so
    # T(c) = latency + bytes × C / (c × full bandwidth): T(1) - T(2) = 2 (T(2) - T(4)), the latency cancels
    t1, t2, t4 = (f.loc["dp", "time_s_tuned"] for f in (one, two, four))
    assert t1 > t2 > t4
    assert t1 - t2 == pytest.approx(2 * (t2 - t4), rel=1e-9)
    assert one.loc["dp", "tuned_choice"] == "AR Ring/Simple"
    # NCCL's own choice (the least time over every pair, on every channel) is faster than the forced pair
    assert (one["time_s_nccl"] < one["time_s_tuned"]).all()
    assert one["time_s_nccl"].equals(four["time_s_nccl"])  # without the tuner: the same, whatever its rules
    assert any("NCCL 2.30" in n for n in notes)


def test_report_prices_as_the_table_command_does_under_the_same_tuner(tmp_path):
    csv = tmp_path / "rules.csv"
    csv.write_text("# large all-reduces on Tree/Simple, 4 channels\n"
                   "allreduce,1048576,17179869184,tree,simple,4,2,16\n")
    args = ["table", "--topology", "dgx-h100", "--n", "16", "--psi", "1e9", "--format", "json"]
    stock = {r["scheme"]: r for r in json.loads(runner.invoke(app, args).stdout)}
    res = runner.invoke(app, [*args, "--nccl-tuner", str(csv)])
    assert res.exit_code == 0, res.output
    tuned = {r["scheme"]: r for r in json.loads(res.stdout)}
    frame, _ = nccl_under_tuner(ReportConfig(**CLUSTER, nccl_tuner=parse_tuner(csv.read_text().splitlines(),
                                                                                 str(csv))))
    assert list(frame["scheme"]) == list(tuned)
    for r in frame.itertuples(index=False):
        assert r.time_s_tuned == pytest.approx(tuned[r.scheme]["time_s_nccl"], rel=1e-12)
        assert r.tuned_choice == tuned[r.scheme]["nccl_choice"]
        assert r.time_s_nccl == pytest.approx(stock[r.scheme]["time_s_nccl"], rel=1e-12)
        assert r.nccl_choice == stock[r.scheme]["nccl_choice"]
    assert frame.set_index("scheme").loc["dp", "tuned_choice"] == "AR Tree/Simple"


@pytest.mark.parametrize(("content", "needle"), [
    (None, "cannot read"),
    ("hello\n", "t.csv:1: expected 8 to 10 comma-separated fields"),
    ("# NVLink SHARP\nallreduce,0,10,nvls,simple,-1,-1,-1\n",
     "t.csv:2: NVLS/Simple for all_reduce cannot run on pcie-gen4"),
])
def test_bad_tuner_input_is_one_line_and_exit_2_before_any_work(tmp_path, no_work, content, needle):
    path = tmp_path / "t.csv"
    if content is not None:
        path.write_text(content)
    out = tmp_path / "r.pdf"
    res = runner.invoke(app, ["report", "-o", str(out), "--topology", "pcie-gen4", "--nccl-tuner", str(path)])
    assert res.exit_code == 2, res.output
    err = res.stderr
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in res.output, err
    assert needle in err and "--nccl-tuner" in err, err
    assert no_work == [] and not out.exists()


def test_good_tuner_reaches_the_report_and_the_default_has_none(tmp_path, no_work):
    csv = tmp_path / "rules.csv"
    csv.write_text(_ring_rule(2))
    res = runner.invoke(app, ["report", "-o", str(tmp_path / "r.pdf"), "--topology", "dgx-h100",
                              "--nccl-tuner", str(csv)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["report", "-o", str(tmp_path / "s.pdf")])
    assert res.exit_code == 0, res.output
    (tuned, stock) = no_work
    assert [r.channels for r in tuned.nccl_tuner.rules] == [2] and stock.nccl_tuner is None
