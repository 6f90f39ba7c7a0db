"""check on post-local SGD (PyTorch's post_localSGD_hook beside a PeriodicModelAverager): the gradients are
all-reduced within subgroups, the parameters over all ranks after the optimizer's step every few steps;
those all-reduces are parameter averaging's (:mod:`zerocalc.validate.averaging`), never gradients, and the
subgroup is the data-parallel group.

Expected values come from each run's run.json (the model's parameter count, the groups, the averaged
steps), from count_calls.py (plain json/gzip, no zerocalc: the calls after the optimizer's step by
``count_after_optimizer``) and from the ring all-reduce's 2(N-1)/N by hand."""

import gzip
import json
from collections import Counter

import pytest
from real_runs import RUNS, count_calls
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.traces.kineto import parse_bytes

runner = CliRunner()
LOCAL_SGD = "ddp-post-local-sgd-2x2"
OPS = {"allreduce": "all_reduce", "allgather": "all_gather", "broadcast": "broadcast",
       "barrier": "barrier"}


def _op(c10d: str) -> str:
    return next(v for k, v in OPS.items() if k in c10d)


@pytest.mark.parametrize("case", [LOCAL_SGD, "ddp-periodic-averager", "ddp-zero-ro-fp16-hook",
                                  "fsdp2-eval-every-2", "ds-zero1-ga4", "lightning-ddp-ga4-sync-dist"])
def test_the_reader_marks_the_calls_after_the_optimizers_step_as_the_plain_counter_does(case):
    counted = count_calls().count_after_optimizer(str(RUNS / case))
    for path in sorted((RUNS / case).glob("rank*.json.gz")):
        rows = parse_bytes(gzip.decompress(path.read_bytes()), path.name).rows
        rank = str(rows[0]["rank"])
        # a barrier's elements left out: zerocalc counts none, the counter its dummy tensor's one
        got = Counter((r["step"], r["op"], r["in_nelems"] if r["op"] != "barrier" else None)
                      for r in rows if r.get("after_optimizer"))
        want = Counter((int(s.split("#")[1]), op := _op(c.split()[0]), int(c.split()[1]) if op != "barrier"
                        else None) for s, calls in counted[rank].items() for c in calls)
        assert got == want, (case, rank)


def test_post_local_sgd_averages_apart_from_its_subgroups_gradients():
    run = json.loads((RUNS / LOCAL_SGD / "run.json").read_text())
    psi = run["model"]["psi"]
    n = len(run["groups"]["gradients (subgroups)"][0])
    world = len(run["groups"]["averaging (world)"][0])
    averaged, steps = len(run["averaged_in_profiled_steps"]), run["steps_profiled"]
    res = runner.invoke(app, ["check", str(RUNS / LOCAL_SGD), "--format", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert (out["psi"], out["n"]) == (psi, n)
    assert f"each data-parallel group of {n} trains on its own between the parameter averagings on groups " \
           f"of {world}" in out["n_how"]
    (note,) = [t for t in out["notes"] if t.startswith("parameter averaging")]
    assert f"{averaged} all-reduces of {psi:,} elements" in note
    assert f"on groups of {world}, in {averaged} of its {steps} steps" in note
    cats = {c["category"]: c for c in out["categories"]}
    # by hand: a ring all-reduce sends 2(N-1)/N of its elements per rank, fp32
    assert cats["step"]["bytes_per_rank_per_step"] == pytest.approx(2 * (n - 1) / n * psi * 4)
    assert cats["unexplained"]["bytes_per_rank_per_step"] == pytest.approx(
        averaged / steps * 2 * (world - 1) / world * psi * 4)
    dp = next(s for s in out["schemes"] if s["scheme"] == "dp")
    assert dp["measured_bytes_per_rank_per_step"] == pytest.approx(2 * (n - 1) / n * psi * 4)


def test_averaging_over_the_data_parallel_group_itself_is_traffic_it_does_not_need():
    run = json.loads((RUNS / "ddp-periodic-averager" / "run.json").read_text())
    psi, (dp,) = run["model"]["psi"], run["groups"]["dp"]
    n, averaged, steps = len(dp), len(run["averaged_in_profiled_steps"]), run["steps_profiled"]
    res = runner.invoke(app, ["check", str(RUNS / "ddp-periodic-averager"), "--format", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert (out["psi"], out["n"], out["matches"]) == (psi, n, ["dp"])
    (note,) = [t for t in out["notes"] if t.startswith("parameter averaging")]
    assert note.startswith("parameter averaging over the data-parallel group itself: ")
    assert f"on groups of {n}, in {averaged} of its {steps} steps" in note
    cats = {c["category"]: c for c in out["categories"]}
    ring = 2 * (n - 1) / n * psi * 4  # one ring all-reduce of Ψ fp32 elements, per rank
    assert cats["step"]["bytes_per_rank_per_step"] == pytest.approx(ring)
    assert cats["unexplained"]["bytes_per_rank_per_step"] == pytest.approx(averaged / steps * ring)


@pytest.mark.parametrize("case", ["fsdp2-eval-every-2", "ds-zero3-ga4-eval-every-2", "ddp-ga4-sync-every"])
def test_an_evaluations_metrics_after_the_step_are_no_averaging(case):
    res = runner.invoke(app, ["check", str(RUNS / case), "--format", "json"])
    assert res.exit_code == 0, res.output
    assert not any(t.startswith("parameter averaging") for t in json.loads(res.stdout)["notes"])


def test_each_call_takes_the_group_of_the_gloo_worker_that_ran_it():
    """No call names its group over gloo, and pg_config's guess (the one group besides the world) would put
    the averaging on the subgroup: each group's worker threads, started in the groups' order, tell them
    apart (run.json: the gradients on the subgroups, the averaging on the world)."""
    run = json.loads((RUNS / LOCAL_SGD / "run.json").read_text())
    (world,) = run["groups"]["averaging (world)"]
    for path in sorted((RUNS / LOCAL_SGD).glob("rank*.json.gz")):
        rows = parse_bytes(gzip.decompress(path.read_bytes()), path.name).rows
        (sub,) = [g for g in run["groups"]["gradients (subgroups)"] if rows[0]["rank"] in g]
        for r in rows:
            want = world if r.get("after_optimizer") else sub
            assert (r["group_size"], r.get("group_ranks")) == (len(want), ",".join(map(str, want))), r
