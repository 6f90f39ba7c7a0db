"""check on FSDP2 runs whose widths the shard ranks do not divide: Ψ is what the reduce-scatters carry (each
parameter's first dimension padded to a multiple of the shard ranks), and the gradients' own count beside it,
read from FSDP2's reduce-scatter copy-ins (``aten::_chunk_cat``; :mod:`zerocalc.validate.padding`).

Expected values come from each run's run.json (the model's layers, so its parameter count) and from
count_calls.py (plain json/gzip, no zerocalc): the reduce-scatters' input elements (expected.json) and the
copy-ins' gradient and input elements (``count_copy_ins``)."""

import json
import re

import numpy as np
import pytest
from real_runs import RUNS, count_calls
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.traces.kineto_events import chunk_cat_sizes
from zerocalc.validate.columns import Codes
from zerocalc.validate.padding import own_sizes

runner = CliRunner()
DATA = RUNS.parent


def _check(path, *args) -> dict:
    res = runner.invoke(app, ["check", str(path), "--format", "json", *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _counted(case: str) -> tuple[int, int, int]:
    """Rank 0's first step as the traces count it: the reduce-scatters' input elements, and the copy-ins'
    gradient and input elements."""
    step = json.loads((RUNS / case / "expected.json").read_text())["ranks"]["0"]["steps"]["ProfilerStep#1"]
    copies = count_calls().count_copy_ins(str(RUNS / case))["0"]["ProfilerStep#1"]
    return (step["c10d_totals"]["c10d::_reduce_scatter_base_"]["in_elems"],
            sum(c["grad_elems"] for c in copies), sum(c["out_elems"] for c in copies))


@pytest.mark.parametrize("case, reductions, shard, scheme", [
    ("fsdp2-odd-widths", 1, 4, "fsdp-full-shard"),  # 191 -> 192 and 150 -> 152 rows on 4 ranks
    ("torch2.14-fsdp2-odd-widths", 1, 4, "fsdp-full-shard"),  # the same run under torch 2.14.1
    ("fsdp2-narrow-widths", 1, 4, "fsdp-full-shard"),  # 9 -> 12 and 5 -> 8: a fifth of the model
    ("hsdp-2x2-odd-widths-ga2", 2, 2, "fsdp-hybrid")])  # 191 -> 192 on 2; each micro-batch reduces
def test_psi_is_what_the_calls_carry_and_the_gradients_own_count_is_beside_it(case, reductions, shard,
                                                                               scheme):
    run = json.loads((RUNS / case / "run.json").read_text())
    reduced, own, copied = _counted(case)
    assert copied == reduced  # the copy-ins fill the reduce-scatters' inputs
    assert own == reductions * run["model"]["psi"] < reduced
    out = _check(RUNS / case)
    assert out["psi"] == out["psi_inferred"] == reduced // reductions
    assert out["psi_without_padding"] == run["model"]["psi"]
    padding = (reduced - own) // reductions
    # by hand: a padded row of each parameter whose first dimension the shard ranks do not divide
    layers = [tuple(map(int, re.fullmatch(r"Linear\((\d+), (\d+)\)", t).groups()))
              for t in run["model"]["layers"]]
    rows = sum((-o % shard) * (i + 1) for i, o in layers)
    assert padding == rows
    own_said = f"; {run['model']['psi']:,} of them the gradients' own, {padding:,} FSDP2's padding"
    assert own_said in out["psi_how"] and f"multiple of the {shard} ranks" in out["psi_how"]
    assert scheme in out["matches"]


def test_the_models_count_given_as_psi_is_confirmed_with_the_padding_named():
    case = RUNS / "fsdp2-odd-widths"
    run = json.loads((case / "run.json").read_text())
    reduced, own, _ = _counted("fsdp2-odd-widths")
    out = _check(case, "--psi", str(run["model"]["psi"]))
    assert out["psi"] == run["model"]["psi"] and out["psi_inferred"] == reduced
    assert f"{own:,} of them the gradients' own, {reduced - own:,} FSDP2's padding" in out["psi_how"]
    assert "fsdp-full-shard" in out["matches"]


def test_the_models_count_past_the_tolerance_of_the_padded_one_is_taken_as_the_gradients_own():
    # 417 padded elements on a model of 1,787: --psi 1787 is 19 % off what the calls reduce (2,204), past the
    # 2 % a --psi may be off, and the trace's copy-ins show it is the gradients' own count. Before: refused
    case = RUNS / "fsdp2-narrow-widths"
    run = json.loads((case / "run.json").read_text())
    reduced, own, _ = _counted("fsdp2-narrow-widths")
    assert own == run["model"]["psi"] and abs(reduced - own) > 0.02 * own
    out = _check(case, "--psi", str(own))
    # priced with what the calls carry, so the schemes read as without --psi
    assert out["psi"] == reduced and out["psi_without_padding"] == own
    assert f"--psi {own:,} is the gradients' own count" in out["psi_how"]
    assert out["matches"] == _check(case)["matches"] and "fsdp-full-shard" in out["matches"]
    # a --psi off both is refused, the error naming the gradients' own count
    res = runner.invoke(app, ["check", str(case), "--psi", "1500"])
    assert res.exit_code == 2
    assert f"reduce {reduced:,} elements per step ({own:,} of them the gradients' own, the rest FSDP2's " \
           "padding)" in res.output


@pytest.mark.parametrize("path", [RUNS / "fsdp2-ga4-no-sync", RUNS / "fsdp2-lora-r4", RUNS / "hsdp-2x2"])
def test_fsdp2_runs_whose_widths_divide_have_no_padding(path):
    # every width of these models is a multiple of 4 (LoRA's adapters of rank 4 too): nothing padded
    out = _check(path)
    assert out["psi_without_padding"] == out["psi"]
    assert "padding" not in out["psi_how"]


@pytest.mark.parametrize("path", [
    RUNS / "ddp-bf16", RUNS / "ds-zero3-ga4", RUNS / "fsdp1-full-shard",  # no FSDP2 copy-in
    DATA / "flight-recorder" / "fsdp2-no-reshard",  # a dump records no CPU op
    DATA / "kineto" / "ddp-resnet50-a100-rank0-of-2.json.gz"])
def test_traces_without_fsdp2_copy_ins_say_nothing_of_padding(path):
    out = _check(path)
    assert out["psi_without_padding"] is None and "padding" not in out["psi_how"]


def test_a_copy_in_reads_only_in_its_signature():
    dims = {"Input Dims": [[[191, 128], [191]], [], [], [4, 6192]]}
    assert chunk_cat_sizes(dims) == (24768, 191 * 128 + 191)
    for bad in ({"Input Dims": [[], [], [], [4, 6192]]},  # shapes not recorded
                {"Input Dims": [[[191, 128]], [], []]},  # another signature
                {"Input Dims": [[[200, 128]], [], [], [4, 6192]]},  # more in than out
                {"Input Dims": [[[191, "x"]], [], [], [4, 6192]]}, {}, None):
        assert chunk_cat_sizes(bad) is None, bad


def test_a_padded_size_standing_for_two_counts_reads_none():
    files = Codes(np.array([0, 1]), ("rank0", "rank1"))
    assert own_sizes({"rank0": {"fsdp_padding": [(24768, 24639)]},
                      "rank1": {"fsdp_padding": [(24768, 24639), (29184, 28800)]}}, files) == {
        24768: 24639, 29184: 28800}
    assert own_sizes({"rank0": {"fsdp_padding": [(24768, 24639)]},
                      "rank1": {"fsdp_padding": [(24768, 24700)]}}, files) == {}


def test_fsdp1_on_ranks_that_do_not_divide_a_flat_parameter_says_its_padding():
    # FSDP1 FULL_SHARD on 3 ranks (run.json). Counted: each step reduce-scatters 15,456, 30,882 and 24,768
    # elements (expected.json), and the trace's aten::pad pads a flat gradient of 30,880 by [0, 2] before the
    # second (plain json/gzip): layers.1's 30,880 parameters padded to a multiple of 3; the others divide
    import gzip

    case = "fsdp1-full-shard-3-ranks"
    run = json.loads((RUNS / case / "run.json").read_text())
    assert run["world_size"] == 3 and run["model"]["psi"] == 71_104
    step = json.loads((RUNS / case / "expected.json").read_text())["ranks"]["0"]["steps"]["ProfilerStep#1"]
    scattered = step["c10d_totals"]["c10d::_reduce_scatter_base_"]["in_elems"]
    pads = set()
    for r in range(3):
        doc = json.loads(gzip.decompress((RUNS / case / f"rank{r}.json.gz").read_bytes()))
        pads |= {(e["args"]["Input Dims"][0][0], e["args"]["Concrete Inputs"][1]) for e in doc["traceEvents"]
                 if e.get("name") == "aten::pad"}
    assert pads == {(30_880, "[0, 2]")}
    assert scattered == 71_104 + 2
    out = _check(RUNS / case)
    assert (out["psi"], out["psi_without_padding"], out["n"]) == (scattered, run["model"]["psi"], 3)
    assert out["psi_how"].endswith("; 71,104 of them the gradients' own, 2 FSDP1's padding (each flat "
                                   "parameter padded to a multiple of the 3 ranks it is sharded over; the "
                                   "flat gradients' sizes in the trace's aten::pad before their "
                                   "reduce-scatters)")


def test_an_fsdp1_pad_reads_as_padded_and_own_elements():
    # by hand: aten::pad calls of a 1-D vector at its end, read as (padded, own) where their arguments say so
    from zerocalc.traces.kineto_events import pad_sizes

    args = {"Input Dims": [[30880], [], [], []], "Concrete Inputs": ["", "[0, 2]", "", ""]}
    assert pad_sizes(args) == (30_882, 30_880)
    assert pad_sizes({**args, "Concrete Inputs": ["", "[1, 2]", "", ""]}) is None  # padded at both ends
    assert pad_sizes({**args, "Input Dims": [[8, 160], [], [], []]}) is None  # not a flat vector
    assert pad_sizes({**args, "Concrete Inputs": ["", "[0, 0]", "", ""]}) is None
    assert pad_sizes({"Input Dims": [[30880]]}) is None  # no padding recorded
