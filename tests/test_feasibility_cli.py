"""`zerocalc feasibility` through typer's CliRunner: the table, the JSON contract, bad input."""

import json

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app

runner = CliRunner()
SCHEMES = ("dp", "zero1", "zero2", "zero3", "colocated", "deepspeed-zero12", "deepspeed-zero2-reduce",
           "torch-zero1", "fsdp-full-shard", "fsdp-shard-grad-op", "fsdp-hybrid", "zeropp")


def _run(*args):
    return runner.invoke(app, ["feasibility", *args])


def test_table_default():
    r = _run("--steps", "5")
    assert r.exit_code == 0, r.output
    for s in SCHEMES:
        assert f"\n{s} " in r.output
    assert "verdict:" in r.output and "plan (" in r.output
    assert "NO " not in r.output  # every simulated byte count matched the model
    assert "(N-1)/N·Ψ·b = 1272 B" in r.output  # 3/4 · 212 · 8


def test_json_contract():
    r = _run("--n", "3", "--steps", "4", "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert isinstance(doc["verdict"], str) and doc["verdict"]
    assert isinstance(doc["plan"], list) and doc["plan"]
    assert [rec["scheme"] for rec in doc["schemes"]] == list(SCHEMES)
    for rec in doc["schemes"]:
        assert isinstance(rec["bytes_per_rank_simulated"], float)
        assert isinstance(rec["bytes_per_rank_model"], float)
        assert isinstance(rec["max_abs_diff"], float) and isinstance(rec["max_rel_diff"], float)
        assert isinstance(rec["equivalent"], bool)
        assert rec["bytes_match"] is True
    eq = {rec["scheme"]: rec["equivalent"] for rec in doc["schemes"]}
    assert not eq["colocated"] and not eq["zeropp"] and eq["zero2"] and eq["fsdp-hybrid"]


def test_schemes_filter_repeat_and_comma():
    r = _run("--steps", "2", "--schemes", "dp,zero2", "--schemes", "colocated", "--format", "json")
    assert r.exit_code == 0, r.output
    assert [s["scheme"] for s in json.loads(r.output)["schemes"]] == ["dp", "zero2", "colocated"]


def test_deterministic():
    a = _run("--n", "2", "--steps", "3", "--seed", "7", "--format", "json").output
    b = _run("--n", "2", "--steps", "3", "--seed", "7", "--format", "json").output
    assert a == b


def test_one_rank():
    r = _run("--n", "1", "--steps", "3", "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert all(rec["bytes_per_rank_simulated"] == 0.0 for rec in doc["schemes"])
    col = next(rec for rec in doc["schemes"] if rec["scheme"] == "colocated")
    assert col["equivalent"] and col["max_abs_diff"] == 0.0


def test_zero_steps():
    r = _run("--steps", "0", "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert all(rec["bytes_per_rank_simulated"] is None for rec in doc["schemes"])
    assert "steps = 0" in doc["verdict"]
    assert _run("--steps", "0").exit_code == 0


@pytest.mark.parametrize(
    ("args", "needle"),
    [(("--n", "-1"), "--n"), (("--n", "0"), "--n"), (("--steps", "-3"), "--steps"),
     (("--schemes", "zero4"), "zero4"), (("--format", "xml"), "--format"),
     (("--n", "6", "--gpus-per-node", "4"), "--gpus-per-node")],
)
def test_bad_input_is_one_line_exit_2(args, needle):
    r = _run(*args)
    assert r.exit_code == 2
    assert needle in r.output
    assert len(r.output.strip().splitlines()) == 1 and "Traceback" not in r.output


@pytest.mark.parametrize("value", ["", " , "])
def test_empty_schemes_option_is_exit_2(value):
    r = _run("--schemes", value, "--steps", "1")
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.strip().startswith("error: --schemes: no scheme given")


def test_zero_steps_equivalence_is_null_and_na():
    doc = json.loads(_run("--steps", "0", "--format", "json").output)
    assert {rec["equivalent"] for rec in doc["schemes"]} == {None}
    assert {c["equivalent"] for c in doc["conditions"]} == {None}
    text = _run("--steps", "0", "--schemes", "dp,colocated").output
    rows = [ln for ln in text.splitlines() if ln.startswith(("dp ", "colocated ")) and "0.00e+00" in ln]
    assert len(rows) == 2 and all(ln.rstrip().endswith("n/a") for ln in rows)
    conds = text.split("colocated scheme, conditions:")[1].split("\n\n")[0].strip().splitlines()
    conds = [ln for ln in conds if "divergence" not in ln]
    assert len(conds) == 4 and all("n/a" in ln and "exact" not in ln for ln in conds)


def test_sizes_beyond_the_cap_are_refused_quickly():
    """`--n 1000` used to run for minutes (cost ∝ N² × steps): refused at once, naming the option."""
    from zerocalc.feasibility import MAX_RANKS, MAX_STEPS

    for option, value in (("--n", MAX_RANKS + 1), ("--steps", MAX_STEPS + 1)):
        r = runner.invoke(app, ["feasibility", option, str(value)])
        assert r.exit_code == 2 and r.stderr.startswith(f"error: {option}: at most")
