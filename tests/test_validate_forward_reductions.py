"""Reductions of a forward pass (activations of model parallelism) in real gloo runs: read from the
profiler traces, reported apart from the gradients, and a run of tensor parallelism alone refused.

Expected values are counted from the traces by count_calls.py (expected.json's ``forward_reductions``:
each c10d reduction nested in an op that records a ``Sequence number`` and in no node of the backward,
found by a full stack of each thread's events, not by zerocalc) and the runs' facts (run.json,
tests/data/traces/real-runs/README.md).
"""

import json

import pytest
from real_runs import RUNS, forward_reductions
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.errors import TraceMismatchError
from zerocalc.traces import read_traces
from zerocalc.validate import check


def test_tensor_parallelism_alone_is_refused_with_what_its_forward_reduces():
    # tp4: 4 ranks × 3 steps × one all-reduce of 8 × 160 in the forward (counted), and nothing else
    counted = forward_reductions("tp4")
    assert counted == {(1280, "Redistribute"): 12}
    ts = read_traces(RUNS / "tp4")
    with pytest.raises(TraceMismatchError) as e:
        check(ts.table, meta=ts.meta)
    msg = str(e.value)
    assert "no data-parallel traffic" in msg
    assert "all-reduce of 1,280 elements ×12, inside Redistribute" in msg
    res = CliRunner().invoke(app, ["check", str(RUNS / "tp4")])
    assert res.exit_code == 2 and res.output.count("\n") == 1 and "Traceback" not in res.output
    files = sorted(p.name for p in (RUNS / "tp4").glob("rank*.json.gz"))
    assert res.output.startswith(f"error: no data-parallel traffic in {RUNS / 'tp4' / files[0]} and "
                                 f"{len(files) - 1} other files: ")


def test_tensor_parallelism_alone_with_backward_reductions_says_they_may_be_activations():
    # tp4-first-whole-ga2: per step and rank 2 all-reduces of 768 in the forward and 2 of 1,536 in the
    # backward (counted); the forward's reported apart, the backward's read as the step's (a trace does not
    # tell a block input's gradient from a parameter's), with the caution on the group they share
    counted = forward_reductions("tp4-first-whole-ga2")
    assert counted == {(768, "Redistribute"): 24}
    ts = read_traces(RUNS / "tp4-first-whole-ga2")
    m = check(ts.table, meta=ts.meta).measurement
    assert m.psi_trace == 1536 and m.n == 4 and m.micro_batches == 2
    assert any("reported apart as activations" in n and "all-reduce of 768 elements ×24, inside Redistribute"
               in n for n in m.notes)
    assert any(n.startswith("the forward passes reduce activations on the group of 4 ranks the gradients")
               for n in m.notes)


@pytest.mark.parametrize("case", ["tp2-dp2", "fsdp2-tp2", "fsdp2-tp2-sp", "hsdp-2x2-tp2", "pp2-fsdp2-tp2"])
def test_forward_reductions_beside_data_parallelism_are_reported_apart(case):
    # each counted forward reduction named in the note, by size and op, with its count over ranks and steps;
    # the gradients are on other groups, so no caution on a shared group
    (elems, around), k = next(iter(forward_reductions(case).items()))
    assert len(forward_reductions(case)) == 1
    ts = read_traces(RUNS / case)
    m = check(ts.table, meta=ts.meta).measurement
    op = "reduce-scatter" if case == "fsdp2-tp2-sp" else "all-reduce"
    assert any(f"{op} of {elems:,} elements ×{k}, inside {around}" in n for n in m.notes)
    assert not any(n.startswith("the forward passes reduce activations on the group") for n in m.notes)
    assert not any(n.startswith("reductions in the backward of tensors of the shape") for n in m.notes)


@pytest.mark.parametrize("case", ["ddp-ga4-no-sync", "fsdp2-ga4-no-sync", "ds-zero3-ga4", "pp2-dp2",
                                  "lightning-ddp-ga4-sync-dist", "ddp-zero-ro-fp16-hook"])
def test_runs_without_forward_reductions_have_no_such_note(case):
    assert not forward_reductions(case)
    ts = read_traces(RUNS / case)
    m = check(ts.table, meta=ts.meta).measurement
    assert not any("forward passes" in n for n in m.notes)


def test_a_scalar_reduced_in_a_forward_pass_stays_a_scalar():
    # by hand: 2 ranks × 2 steps, each a gradient all-reduce of 1,000 fp32 elements after the backward and an
    # all-reduce of one element inside a checkpointed segment's forward (a capacity, a loss): scalar traffic,
    # as any one-element reduction, not an activation of model parallelism
    import pandas as pd

    rows = [{"file": "t", "rank": r, "step": s, "op": "all_reduce", "dtype": "fp32", "elem_bytes": 4,
             "in_nelems": e, "out_nelems": e, "group_size": 2, "forward_op": f}
            for r in (0, 1) for s in (1, 2) for e, f in ((1, "CheckpointFunction"), (1000, None))]
    m = check(pd.DataFrame(rows), meta={"t": {"world_size": 2}}).measurement
    per = m.categories.set_index("category")["calls_per_rank_per_step"]
    assert (per["step"], per["scalar"], per["unexplained"]) == (1, 1, 0)
    assert m.psi == 1000 and not any("forward passes" in n for n in m.notes)


def test_forward_reductions_on_another_group_are_named_too():
    # HolisticTraceAnalysis's TorchRec trace: its forward reduce-scatters (counted in
    # test_trace_forward_reductions: 5 of 65,536 × 384 and 5 of 65,536 × 64 elements in, inside
    # ReduceScatterBase_Req) run on groups of 8 where DDP all-reduces on 16: reported apart by their group
    # already, and named as activations all the same; no note is left empty
    ts = read_traces(RUNS.parent / "kineto" / "torchrec-a100-rank0-of-16" / "rank0.json.gz")
    m = check(ts.table, meta=ts.meta).measurement
    assert m.n == 16 and all(n.strip() for n in m.notes)
    said = (f"reduce-scatter of {65536 * 384:,} elements ×5, reduce-scatter of {65536 * 64:,} elements ×5, "
            "inside ReduceScatterBase_Req")
    assert any(said in n for n in m.notes)


def test_tensor_parallelism_alone_whose_block_keeps_its_width_is_refused_too():
    # tp4-block-ga2: per step and rank 4 all-reduces of 8 × 192 = 1,536 elements (counted), 2 in the forward
    # (inside Redistribute) and 2 in the backward, of the same shape (the block's input gradient): 24 of each
    # over the 4 ranks and 3 steps; nothing else
    assert forward_reductions("tp4-block-ga2") == {(1536, "Redistribute"): 24}
    steps = json.loads((RUNS / "tp4-block-ga2" / "expected.json").read_text())["ranks"]
    total = sum(c["calls"] for r in steps.values() for s in r["steps"].values() for c in s["c10d"])
    assert total == 48
    ts = read_traces(RUNS / "tp4-block-ga2")
    with pytest.raises(TraceMismatchError) as e:
        check(ts.table, meta=ts.meta)
    msg = str(e.value)
    assert "inside a forward pass (all-reduce of 1,536 elements ×24, inside Redistribute)" in msg
    assert ("in the backward those activations' gradients, tensors of the shape the forward reduces "
            "(all-reduce of 1,536 elements ×24, of shape 8×192)") in msg
