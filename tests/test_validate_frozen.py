"""check on real runs with frozen parameters (a frozen backbone, LoRA's base weights) under FSDP and DeepSpeed
ZeRO-3: every parameter is gathered for the compute, only the trained ones' gradients are reduced.

Expected values come from each run's run.json (what was frozen, the trained Ψ) and its expected.json (the
calls count_calls.py counts off the traces, no zerocalc); bytes under the ring accounting (a rank sends
(p-1)/p of an all-gather's or reduce-scatter's whole, Thakur, Rabenseifner & Gropp 2005)."""

import gzip
import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app

runner = CliRunner()
DATA = Path(__file__).parent / "data" / "traces"
RUNS = DATA / "real-runs"


def _counted(case: str) -> tuple[dict, list[dict]]:
    """run.json, and the calls of the first step of rank 0 as expected.json counts them."""
    run = json.loads((RUNS / case / "run.json").read_text())
    steps = json.loads((RUNS / case / "expected.json").read_text())["ranks"]["0"]["steps"]
    return run, steps["ProfilerStep#1"]["c10d"]


def _check(path) -> dict:
    res = runner.invoke(app, ["check", str(path), "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.mark.parametrize("case, schemes, gathers_per_frozen", [
    # FULL_SHARD: FSDP2 gathers every unit in forward and again in backward, frozen ones too
    ("fsdp2-frozen-layers-0-2", ["zero3", "deepspeed-zero3", "fsdp-full-shard", "fsdp-hybrid"], 2),
    # SHARD_GRAD_OP: every unit gathered once, in forward, and kept for backward
    ("fsdp1-shard-grad-op-frozen-layers-0-2", ["deepspeed-zero3", "fsdp-shard-grad-op"], 1)])
def test_frozen_layers_under_fsdp_read_as_gathered_and_never_reduced(case, schemes, gathers_per_frozen):
    run, calls = _counted(case)
    psi, trained = run["model"]["psi"], run["psi_trained"]
    gathers = [c for c in calls if "allgather" in c["op"]]
    reduced = {c["in_elems"] for c in calls if "reduce_scatter" in c["op"]}
    # counted: the trained layer's gradient alone reduce-scattered; every layer gathered
    assert sum(c["in_elems"] * c["calls"] for c in calls if "reduce_scatter" in c["op"]) == trained
    frozen = sum(c["calls"] * _whole(c) for c in gathers if _whole(c) not in reduced)
    assert frozen == gathers_per_frozen * (psi - trained)
    out = _check(RUNS / case)
    assert out["psi"] == trained and out["n"] == run["world_size"]
    assert out["matches"] == [] and out["matches_with_frozen_parameters"] == schemes
    assert out["frozen_gathered_elements_per_rank_per_step"] == pytest.approx(frozen)
    sent = sum(c["calls"] * _whole(c) for c in gathers) * 3 / 4 * 4 + trained * 3 / 4 * 4
    assert out["measured_bytes_per_rank_per_step"] == pytest.approx(sent)
    assert any("exactly this pattern with frozen parameters" in n and f"Ψ = {trained:,}" in n
               for n in out["notes"])
    text = runner.invoke(app, ["check", str(RUNS / case)]).stdout
    assert "with frozen parameters gathered and never reduced (see the note above)" in text


def _whole(call: dict, world: int = 4) -> int:
    """What an all-gather returns on its group (count_calls.py's out_elems, or, where the op gathers into a
    list whose sizes the trace does not record, FSDP1's c10d::allgather_, its input times the group: every
    rank of the world of 4, the runs' one group)."""
    return call["out_elems"] or call["in_elems"] * world


def _lora_unit(run: dict, i: int) -> int:
    """The elements of layers.i as a LoRALinear of the run's rank: its base and its adapters."""
    (n_in, n_out), r = LAYERS[i], run["lora_rank"]
    assert run["model"]["psi_per_layer"][i] == n_in * n_out + n_out
    return n_in * n_out + n_out + r * (n_in + n_out)


LAYERS = [(128, 192), (192, 160), (160, 96)]  # run.json's model.layers


@pytest.mark.parametrize("case, schemes, gathers_per_unit, whole_per_micro_batch", [
    # FSDP2: each LoRALinear one unit, gathered whole in forward and backward, its adapters reduced alone
    ("fsdp2-lora-r4", ["zero3", "deepspeed-zero3", "fsdp-full-shard", "fsdp-hybrid"], 2,
     lambda run: 2 * sum(_lora_unit(run, i) for i in range(3))),
    # DeepSpeed ZeRO-3: every parameter gathered in one prefetch bucket a micro-batch, the adapters'
    # gradients reduced in one bucket a micro-batch; kept for the backward (its default reuse distance)
    ("ds-zero3-lora-r4-ga4", ["deepspeed-zero3", "fsdp-shard-grad-op"], 1,
     lambda run: sum(_lora_unit(run, i) for i in range(3))),
    # LoRA units gathered twice a micro-batch, the frozen layers.2 with the root, gathered once (kept from
    # the forward to the backward), 2 micro-batches reducing in the last
    ("fsdp2-lora-r4-root-holds-last", ["fsdp-full-shard", "fsdp-hybrid"], 2,
     lambda run: 2 * (_lora_unit(run, 0) + _lora_unit(run, 1)) + run["model"]["psi_per_layer"][2])])
def test_lora_units_read_as_gathering_their_frozen_base_weights(case, schemes, gathers_per_unit,
                                                                whole_per_micro_batch):
    run, calls = _counted(case)
    trained, k = run["psi_trained"], run["micro_batches"]
    gathers = [c for c in calls if "allgather" in c["op"]]
    scatters = [c for c in calls if "reduce_scatter" in c["op"]]
    # counted: the adapters alone reduced, once a step where run.json says the last micro-batch alone, else
    # in every one (DeepSpeed's runs state no grad_sync: ZeRO-3 reduces each micro-batch); every parameter
    # gathered whole
    syncs = 1 if run.get("grad_sync", "every").startswith("last") else k
    assert sum(c["in_elems"] * c["calls"] for c in scatters) == syncs * trained
    gathered = sum(c["calls"] * _whole(c) for c in gathers)
    assert gathered == k * whole_per_micro_batch(run)
    out = _check(RUNS / case)
    assert (out["psi"], out["micro_batches"]) == (trained, k)
    assert out["matches"] == [] and out["matches_with_frozen_parameters"] == schemes
    # the gathers past the scheme's price (gathers_per_unit × k × the trained Ψ) are the frozen base's
    assert out["frozen_gathered_elements_per_rank_per_step"] == pytest.approx(gathered - gathers_per_unit * k
                                                                              * trained)
    assert any("exactly this pattern with frozen parameters" in n and "LoRA's adapters" in n
               for n in out["notes"])


def test_frozen_layers_in_gloo_dumps_read_with_their_reduce_scatters_recorded_as_all_reduces():
    # the same case's Flight Recorder dumps over gloo, counted with plain json: each step gathers every layer
    # twice and all-reduces layers.1's whole (the reduce-scatter as gloo runs it and the dump records it)
    fr = DATA / "flight-recorder" / "fsdp2-frozen-layers-0-2"
    run = json.loads((fr / "run.json").read_text())
    psi, trained, steps = run["model"]["psi"], run["psi_trained"], run["optimizer_steps"]
    stand_ins = 0
    for r in range(run["world_size"]):
        entries = json.loads(gzip.decompress((fr / f"rank{r}.json.gz").read_bytes()))["entries"]
        gathered = {_elements(e["output_sizes"]) for e in entries if e["profiling_name"] == "gloo:all_gather"}
        reduces = [e for e in entries if e["profiling_name"] == "gloo:all_reduce"]
        assert {_elements(e["input_sizes"]) for e in reduces} == {trained} and trained in gathered
        stand_ins += len(reduces)
        frozen = sum(_elements(e["output_sizes"]) for e in entries if e["profiling_name"] == "gloo:all_gather"
                     and _elements(e["output_sizes"]) != trained)
        assert frozen == steps * 2 * (psi - trained)
    out = _check(fr)
    assert out["psi"] == trained and out["all_reduces_read_as_reduce_scatters"] == stand_ins
    assert out["matches_with_frozen_parameters"] == ["zero3", "deepspeed-zero3", "fsdp-full-shard",
                                                     "fsdp-hybrid"]
    assert out["frozen_gathered_elements_per_rank_per_step"] == pytest.approx(2 * (psi - trained))


def _elements(shapes: list[list[int]]) -> int:
    return sum(math.prod(s) for s in shapes)


def test_lora_dumps_over_gloo_read_with_their_adapters_reduced():
    # the fsdp2-lora-r4 case's Flight Recorder dumps: each unit's adapters' gradients all-reduced whole
    # (gloo's reduce-scatter), no all-reduce of a gather's size; read as the profiler trace of the case reads
    fr = DATA / "flight-recorder" / "fsdp2-lora-r4"
    run = json.loads((fr / "run.json").read_text())
    for r in range(run["world_size"]):
        entries = json.loads(gzip.decompress((fr / f"rank{r}.json.gz").read_bytes()))["entries"]
        reduced = [_elements(e["input_sizes"]) for e in entries if e["profiling_name"] == "gloo:all_reduce"]
        assert sum(reduced) == run["optimizer_steps"] * run["psi_trained"]
    out, trace = _check(fr), _check(RUNS / "fsdp2-lora-r4")
    assert out["psi"] == run["psi_trained"]
    for key in ("matches_with_frozen_parameters", "frozen_gathered_elements_per_rank_per_step",
                "measured_bytes_per_rank_per_step"):
        assert out[key] == trace[key], key


@pytest.mark.parametrize("path", [
    RUNS / "fsdp2-no-reshard",  # every unit trained: each gathered size is reduced
    RUNS / "ds-zero3-defaults-mixed-ga4",  # DeepSpeed's buckets: no gathered size is reduced
    # a root unit kept from forward to backward: fewer gathers than the units' twice, not frozen ones
    RUNS / "fsdp1-root-holds-last", RUNS / "fsdp2-default-root-holds-last-ga4",
    # a pipeline's FSDP2 dump: each unit gathered 3 times a step (2 micro-batches the dump does not show), a
    # whole round more than a scheme's, not frozen units
    DATA / "flight-recorder" / "pp2-fsdp2",
    DATA / "flight-recorder" / "ds-zero3-defaults-mixed-ga4"])
def test_runs_without_frozen_parameters_read_none(path):
    out = _check(path)
    assert out["matches_with_frozen_parameters"] == []
    assert out["frozen_gathered_elements_per_rank_per_step"] is None


def test_the_whole_model_as_psi_is_refused_with_what_a_frozen_model_reduces():
    # --psi the model's whole count where the run trains layers.1 alone: one line naming the trained count
    # the trace reduces, and frozen parameters as a reason
    case = RUNS / "fsdp2-frozen-layers-0-2"
    run = json.loads((case / "run.json").read_text())
    res = runner.invoke(app, ["check", str(case), "--psi", str(run["model"]["psi"])])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1
    assert f"reduce {run['psi_trained']:,} elements per step; fewer than --psi: frozen parameters send no " \
           "gradient" in res.output
    # a --psi below the trace's names no such reason
    res = runner.invoke(app, ["check", str(case), "--psi", "10000"])
    assert res.exit_code == 2 and "fewer than" not in res.output
