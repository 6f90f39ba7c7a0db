"""`zerocalc feasibility` through typer's CliRunner: the table, the JSON contract, bad input."""

import json

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app

runner = CliRunner()
SCHEMES = ("dp", "zero1", "zero2", "zero3", "colocated", "deepspeed-zero1", "deepspeed-zero2",
           "deepspeed-zero2-reduce", "deepspeed-zero3", "torch-zero1", "fsdp-full-shard",
           "fsdp-shard-grad-op", "fsdp-hybrid", "zeropp")


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


# -- the plan priced on the user's cluster -----------------------------------------------------------


def test_plan_priced_on_a_preset_with_psi(tmp_path):
    r = _run("--steps", "2", "--psi", "70B", "--topology", "dgx-h100", "--plan-n", "64", "--format", "json")
    assert r.exit_code == 0, r.output
    assert r.stderr == ""  # no progress bar when stderr is not a terminal
    doc = json.loads(r.stdout)
    b = doc["plan_basis"]
    assert (b["psi"], b["n"], b["gpus_per_node"], b["topology"], b["in_network"]) == (
        70_000_000_000, 64, 8, "dgx-h100", "nvls")
    flags = [p["slower"] for p in doc["plan"]]
    assert flags == sorted(flags) and any(flags)
    priced = [p for p in doc["plan"] if p["bytes_saved_per_rank"] is not None]
    assert all(isinstance(p["time_saved_s"], float) for p in priced)


def test_plan_priced_on_a_toml_topology(tmp_path):
    toml = tmp_path / "lab.toml"
    toml.write_text('name = "lab"\ngpus_per_node = 4\nin_network_reduction = ["nvls", "sharp"]\n'
                    '[intra]\nalpha_us = 3\nbw_GBps = 300\n[inter]\nalpha_us = 10\nbw_GBps = 100\n')
    r = _run("--steps", "1", "--topology", str(toml), "--plan-n", "16")
    assert r.exit_code == 0, r.output
    assert "on lab, Ψ = 7.5e+09, N = 16, G = 4" in r.stdout and "in-network reduction priced: nvls+sharp)" \
        in r.stdout
    assert "slower on this cluster (kept apart):" in r.stdout or "slower" not in r.stdout


@pytest.mark.parametrize("args, option", [
    (("--psi", "lots"), "--psi"),
    (("--topology", "dgx-z9"), "topology 'dgx-z9'"),
    (("--topology", "missing.toml"), "--topology"),
    (("--plan-n", "0"), "--plan-n"),
    (("--plan-n", "12", "--gpus-per-node", "8"), "--plan-n"),
    (("--dtype", "fp7"), "dtype 'fp7'"),
])
def test_bad_cluster_options_exit_2_with_one_line(args, option):
    r = _run("--steps", "1", *args)
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and option in lines[0]


def test_zeropp_at_one_rank_sends_and_quantises_nothing():
    r = _run("--n", "1", "--steps", "3", "--schemes", "zeropp", "--format", "json")
    assert r.exit_code == 0, r.output
    rec = json.loads(r.stdout)["schemes"][0]
    assert rec["bytes_per_rank_simulated"] == 0 and rec["metadata_bytes_per_rank_simulated"] == 0
    assert rec["max_rel_diff"] == 0 and rec["equivalent"] is True and rec["equivalent_to_dp_model"] is True


def test_micro_batches_option_simulates_gradient_accumulation():
    # 2 micro-batches on N = 2: DeepSpeed ZeRO-1 all-reduces once per step, ZeRO-2 every micro-batch;
    # all-reduce 2·(1/2)·212·8 = 1696 B per pass, the parameter all-gather (1/2)·212·8 = 848 B once
    r = _run("--n", "2", "--steps", "2", "--micro-batches", "2",
             "--schemes", "deepspeed-zero1,deepspeed-zero2", "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["config"]["micro_batches"] == 2
    got = {rec["scheme"]: rec["bytes_per_rank_simulated"] for rec in doc["schemes"]}
    assert got == {"deepspeed-zero1": 1696 + 848, "deepspeed-zero2": 2 * 1696 + 848}
    assert all(rec["bytes_match"] and rec["equivalent"] for rec in doc["schemes"])
    bad = _run("--micro-batches", "0")
    assert bad.exit_code == 2 and "--micro-batches" in bad.stderr
