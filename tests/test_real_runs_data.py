"""The real-run traces in tests/data/traces/real-runs agree with how their runs were configured.

Two independent records of each run are compared: ``run.json`` (what the run was configured
with, written by make_traces.py) and the profiler traces themselves, counted by the plain
json/gzip counter beside them (count_calls.py, no zerocalc). ``expected.json`` must be what
that counter reads off the committed traces today.
"""

import functools
import json

import pytest
from real_runs import RUNS, count_calls, sampled

CASES = sorted(p.name for p in RUNS.iterdir() if p.is_dir())


@functools.cache
def counted(case):
    return json.loads(json.dumps(count_calls().count_case(str(RUNS / case))))


def test_every_case_has_its_files():
    assert len(CASES) >= 10
    for case in CASES:
        names = {p.name for p in (RUNS / case).iterdir()}
        assert {"run.json", "expected.json"} <= names, case
        # one file a rank, or one a profiling window (tensorboard_trace_handler's names)
        last = json.loads((RUNS / case / "run.json").read_text())["world_size"] - 1
        for r in (0, last):
            assert f"rank{r}.json.gz" in names or any(
                count_calls().TRACE_FILE.fullmatch(n) and n.startswith(f"rank{r}.") for n in names), (case, r)


@pytest.mark.parametrize("case", sampled(CASES))
def test_expected_json_is_what_the_traces_count(case):
    assert json.loads((RUNS / case / "expected.json").read_text()) == counted(case)


@pytest.mark.parametrize("case", sampled(CASES))
def test_traces_match_the_configured_run(case):
    run = json.loads((RUNS / case / "run.json").read_text())
    res = counted(case)
    assert sorted(map(int, res["ranks"])) == list(range(run["world_size"]))
    for rank, r in res["ranks"].items():
        assert r["world_size"] == run["world_size"] and r["backend"] == "gloo"
        # one ProfilerStep per optimizer step, each holding every micro-batch's forward pass (or, where the
        # run says so, one per micro-batch, each holding its own)
        per_micro_batch = run["profiler"]["one ProfilerStep per"] == "micro-batch"
        # without ProfilerStep, the spans between the optimizer steps' ends: one fewer than the steps
        unmarked = run["profiler"]["one ProfilerStep per"].startswith("none")
        assert len(r["steps"]) == run["steps_profiled"] - unmarked, (case, rank)
        loss_calls = 1 if per_micro_batch else run["micro_batches"]
        if "pipeline" in run and int(rank) not in run["pipeline"]["stages"][-1]:
            loss_calls = 0  # only the last pipeline stage computes the loss
        # an evaluation inside some steps adds its batches' losses to theirs
        also = {loss_calls + run["evaluation_loss_calls"]} if "evaluation_loss_calls" in run else set()
        # steps that evaluate alone (a ProfilerStep of their own) are no training step
        evaluating = {f"ProfilerStep#{k}" for k in run.get("evaluation_steps", [])}
        assert evaluating <= set(r["steps"]), (case, rank)
        losses = {s["loss_calls"] for k, s in r["steps"].items() if k not in evaluating}
        assert losses - also == {loss_calls}, (case, rank)
        # every c10d op has its gloo worker event, but gather_ and scatter_ (a checkpoint's object
        # collectives), which record none; without record_shapes no size pairs them: none is paired
        for s in r["steps"].values():
            workerless = sum(c["calls"] for c in s["c10d"] if c["op"] in ("c10d::gather_", "c10d::scatter_"))
            if not run["profiler"]["record_shapes"]:
                workerless = sum(c["calls"] for c in s["c10d"])
                assert {c["in_elems"] for c in s["c10d"]} == {None}, (case, rank)
            assert s["unpaired_c10d"] == workerless, (case, rank)
        # every configured group this rank belongs to is in its pg_config, and nothing else but the world
        mine = {tuple(g) for groups in run["groups"].values() for g in groups if int(rank) in g}
        listed = {tuple(g["ranks"]) for g in r["pg_config"]}
        assert mine <= listed, (case, rank)
        assert listed - mine <= {tuple(range(run["world_size"]))}, (case, rank)


def test_gradient_reductions_per_optimizer_step_follow_the_sync_mode():
    """Gradient reductions per optimizer step: k when synced every micro-batch, 1 at the boundary."""

    def grad_calls(case, op, elems):
        steps = counted(case)["ranks"]["0"]["steps"].values()
        return {sum(r["calls"] for r in s["c10d"] if r["op"] == op and r["in_elems"] == elems) for s in steps}

    assert grad_calls("ddp-ga4-sync-every", "c10d::allreduce_", 71104) == {4}
    assert grad_calls("ddp-ga4-no-sync", "c10d::allreduce_", 71104) == {1}
    assert grad_calls("fsdp2-ga4-sync-every", "c10d::_reduce_scatter_base_", 30880) == {4}
    assert grad_calls("fsdp2-ga4-no-sync", "c10d::_reduce_scatter_base_", 30880) == {1}
    assert grad_calls("ds-zero1-ga4", "c10d::allreduce_", 71104) == {1}
    assert grad_calls("ds-zero2-ga4", "c10d::allreduce_", 71104) == {4}
    assert grad_calls("ds-zero3-ga4", "c10d::_reduce_scatter_base_", 71104) == {4}


def test_parameter_gathers_per_optimizer_step_follow_the_reshard_rule():
    """All-gathers per step: re-gathered in the backward unless parameters are kept from the forward."""

    def gathers(case):
        steps = counted(case)["ranks"]["1"]["steps"].values()
        return {sum(r["calls"] for r in s["c10d"] if r["op"] == "c10d::_allgather_base_") for s in steps}

    assert gathers("fsdp2-no-reshard") == {3}  # one per layer
    assert gathers("fsdp2-mixed-bf16-fp32") == {6}  # forward + backward, per layer
    assert gathers("fsdp2-ga4-no-sync") == {24}  # 2 per layer per micro-batch, no_sync or not
    assert gathers("ds-zero3-ga4") == {4}  # one coalesced gather per micro-batch
    assert gathers("ds-zero3-ga4-reuse0-prefetch0") == {24}  # per layer, forward and backward
    assert gathers("ds-zero1-ga4") == gathers("ds-zero2-ga4") == {1}  # after the optimizer step
