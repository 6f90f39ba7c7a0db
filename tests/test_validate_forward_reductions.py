"""Reductions and all-gathers of a forward pass (activations of model parallelism) in real gloo runs: read
from the profiler traces, reported apart from the gradients and parameters, and a run of tensor
parallelism alone (with sequence parallelism or without) refused.

Expected values are counted from the traces by count_calls.py (expected.json's ``forward_reductions`` and
``forward_gathers``: each c10d reduction or all-gather nested in an op that records a ``Sequence number``
and in no node of the backward, found by a full stack of each thread's events, not by zerocalc) and the
runs' facts (run.json, tests/data/traces/real-runs/README.md).
"""

import json
from collections import Counter

import pytest
from real_runs import RUNS, forward_gathers, forward_reductions
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.errors import TraceMismatchError
from zerocalc.traces import read_traces
from zerocalc.validate import check


def _refusal(case: str) -> str:
    """The message ``check`` refuses the run ``case`` with (:class:`TraceMismatchError`)."""
    ts = read_traces(RUNS / case)
    with pytest.raises(TraceMismatchError) as e:
        check(ts.table, meta=ts.meta)
    return str(e.value)


def test_tensor_parallelism_alone_is_refused_with_what_its_forward_reduces():
    # tp4: 4 ranks × 3 steps × one all-reduce of 8 × 160 in the forward (counted), and nothing else
    counted = forward_reductions("tp4")
    assert counted == {(1280, "Redistribute"): 12}
    msg = _refusal("tp4")
    assert "no data-parallel traffic" in msg
    assert "all-reduce of 1,280 elements ×12, inside Redistribute" in msg
    res = CliRunner().invoke(app, ["check", str(RUNS / "tp4")])
    assert res.exit_code == 2 and res.output.count("\n") == 1 and "Traceback" not in res.output
    files = sorted(p.name for p in (RUNS / "tp4").glob("rank*.json.gz"))
    assert res.output.startswith(f"error: no data-parallel traffic in {RUNS / 'tp4' / files[0]} and "
                                 f"{len(files) - 1} other files: ")


def test_tensor_parallelism_alone_with_backward_reductions_of_another_shape_is_refused_by_their_group():
    # tp4-first-whole-ga2: per step and rank 2 all-reduces of 768 (8 × 96) in the forward and 2 of 1,536
    # (8 × 192, the block's input gradient) in the backward (counted), all on the one group the 4 ranks'
    # gloo worker threads serve: the backward's are of a shape the forward does not reduce, but on the group
    # it reduces activations on, where no data-parallel scheme reduces: refused, both named
    counted = forward_reductions("tp4-first-whole-ga2")
    assert counted == {(768, "Redistribute"): 24}
    steps = json.loads((RUNS / "tp4-first-whole-ga2" / "expected.json").read_text())["ranks"]
    assert {c["in_elems"]: c["calls"] for r in steps.values() for s in r["steps"].values()
            for c in s["c10d"]} == {768: 2, 1536: 2}
    msg = _refusal("tp4-first-whole-ga2")
    assert "inside a forward pass (all-reduce of 768 elements ×24, inside Redistribute)" in msg
    assert ("outside it on the group it reduces them on, the gradients of those activations or of parameters "
            "tensor parallelism replicates there (all-reduce of 1,536 elements ×24)") in msg


def _tp_by_hand(named):
    """By hand: 2 ranks × 2 steps of tensor parallelism alone, as tp4-first-whole-ga2 runs it: each step an
    all-reduce of 8 × 96 inside Redistribute and, in the backward, one of 8 × 192 (a block's input
    gradient); ``named``: the calls name their group (else nothing tells it)."""
    import pandas as pd

    base = {"file": "t", "op": "all_reduce", "dtype": "fp32", "elem_bytes": 4, "group_size": 2}
    if named:
        base["group"] = "0"
    return pd.DataFrame([{**base, "rank": r, "step": s, "in_nelems": e, "out_nelems": e, "forward_op": f,
                          "in_shape": shape}
                         for r in (0, 1) for s in (1, 2)
                         for e, f, shape in ((768, "Redistribute", "8x96"), (1536, None, "8x192"))])


def test_backward_reductions_on_a_group_no_call_names_are_read_with_a_caution():
    # by hand (_tp_by_hand): without group names, a reduction of another shape than the forward's may be a
    # data-parallel group's of the same size: read as the step's (Ψ 1,536), with the caution on the size
    m = check(_tp_by_hand(named=False), meta={"t": {"world_size": 2}}).measurement
    assert m.psi_trace == 1536 and m.n == 2
    assert any(n.startswith("the forward passes reduce activations on the group of 2 ranks the gradients")
               for n in m.notes)
    with pytest.raises(TraceMismatchError, match="outside it on the group it reduces them on"):
        check(_tp_by_hand(named=True), meta={"t": {"world_size": 2}})


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
    # and their gradients all-gathered back in the backward (counted from the file's c10d::_allgather_base_
    # Input Dims: 5 from 8,192 × 384 into 65,536 × 384, 5 from 8,192 × 64 into 65,536 × 64), named as such
    said = (f"all-gather of {65536 * 64:,} elements ×5, all-gather of {65536 * 384:,} elements ×5, "
            "all-gathered from shards of 8192×384, 8192×64")
    assert any(n.startswith("all-gathers in the backward") and n.endswith(said) for n in m.notes)


def test_tensor_parallelism_alone_whose_block_keeps_its_width_is_refused_too():
    # tp4-block-ga2: per step and rank 4 all-reduces of 8 × 192 = 1,536 elements (counted), 2 in the forward
    # (inside Redistribute) and 2 in the backward, of the same shape (the block's input gradient): 24 of each
    # over the 4 ranks and 3 steps; nothing else
    assert forward_reductions("tp4-block-ga2") == {(1536, "Redistribute"): 24}
    steps = json.loads((RUNS / "tp4-block-ga2" / "expected.json").read_text())["ranks"]
    total = sum(c["calls"] for r in steps.values() for s in r["steps"].values() for c in s["c10d"])
    assert total == 48
    msg = _refusal("tp4-block-ga2")
    assert "inside a forward pass (all-reduce of 1,536 elements ×24, inside Redistribute)" in msg
    assert ("in the backward those activations' gradients, tensors of the shape the forward reduces "
            "(all-reduce of 1,536 elements ×24, of shape 8×192)") in msg


def _counted_calls(case):
    """(c10d op, elements in) → calls over every rank and step of a run (expected.json's per-step rows)."""
    steps = json.loads((RUNS / case / "expected.json").read_text())["ranks"]
    out = Counter()
    for r in steps.values():
        for s in r["steps"].values():
            for c in s["c10d"]:
                out[(c["op"], c["in_elems"])] += c["calls"]
    return out


def test_sequence_parallelism_alone_is_refused_with_what_it_gathers_and_reduces():
    # tp4-sp (counted): over 4 ranks × 3 steps, in the forward a reduce-scatter of 1,536 in (8 × 192), an
    # all-gather of 384 in (2 × 192, gathered over 4: 1,536) and an all-reduce of 768, inside Redistribute; in
    # the backward a reduce-scatter of 1,536 and an all-gather of 384 more; nothing else
    assert forward_reductions("tp4-sp") == {(1536, "Redistribute"): 12, (768, "Redistribute"): 12}
    assert forward_gathers("tp4-sp") == {(384, "Redistribute"): 12}
    assert _counted_calls("tp4-sp") == {("c10d::reduce_scatter_tensor_coalesced_", 1536): 24,
                                        ("c10d::allgather_into_tensor_coalesced_", 384): 24,
                                        ("c10d::allreduce_", 768): 12}
    msg = _refusal("tp4-sp")
    assert ("every reduction and all-gather larger than a scalar is model parallelism's (tensor, sequence "
            "or embedding parallelism), none a data-parallel scheme's: activations reduced and gathered "
            "inside a forward pass (reduce-scatter of 1,536 elements ×12, all-gather of 1,536 elements ×12, "
            "all-reduce of 768 elements ×12, inside Redistribute)") in msg
    assert ("in the backward those activations' gradients, tensors of the shapes the forward reduces and "
            "gathers (reduce-scatter of 1,536 elements ×12, all-gather of 1,536 elements ×12, of shape "
            "8×192; all-gathered from shards of 2×192)") in msg
    res = CliRunner().invoke(app, ["check", str(RUNS / "tp4-sp")])
    assert res.exit_code == 2 and res.output.count("\n") == 1 and "Traceback" not in res.output
    assert res.output.startswith("error: no data-parallel traffic in ")


def test_sequence_parallel_gathers_beside_fsdp2_are_named_as_activations():
    # fsdp2-tp2-sp (counted): on each of 4 ranks and 3 steps, the tensor-parallel group all-gathers the input
    # in the forward (512 in, gathered over 2: 1,024) inside Redistribute, and in the backward the gradient of
    # the reduce-scattered output (640 in: 4 × 160, the forward reduce-scatter's 8 × 160 over 2; 1,280);
    # FSDP2's gathers (flat shards, in no numbered op) stay parameters'
    assert forward_gathers("fsdp2-tp2-sp") == {(512, "Redistribute"): 12}
    assert _counted_calls("fsdp2-tp2-sp")[("c10d::allgather_into_tensor_coalesced_", 640)] == 12
    ts = read_traces(RUNS / "fsdp2-tp2-sp")
    m = check(ts.table, meta=ts.meta).measurement
    assert any(n.startswith("reductions and all-gathers inside forward passes") and
               "all-gather of 1,024 elements ×12, reduce-scatter of 1,280 elements ×12, inside Redistribute"
               in n for n in m.notes)
    assert any(n.startswith("all-gathers in the backward") and
               n.endswith("all-gather of 1,280 elements ×12, all-gathered from shards of 4×160")
               for n in m.notes)


def _hand_table(gather_op_around, reduce_in_forward, gather_group="dp", gather_shape="10x50"):
    """By hand: 2 ranks × 2 steps; each step an all-gather of 1,000 elements (500 in) on ``gather_group``
    whose ``forward_op`` is ``gather_op_around``, and after the backward a reduce-scatter of those 1,000 (500
    out) on group "dp"; with ``reduce_in_forward``, an all-reduce of 64 elements inside Redistribute on group
    "tp" too; ``gather_shape``: the gathers' shard's shape (None: flat, or not recorded)."""
    import pandas as pd

    base = {"file": "t", "dtype": "fp32", "elem_bytes": 4, "group_size": 2}
    rows = []
    for r in (0, 1):
        for s in (1, 2):
            rows.append({**base, "rank": r, "step": s, "op": "all_gather", "in_nelems": 500,
                         "out_nelems": 1000, "forward_op": gather_op_around, "in_shape": gather_shape,
                         "group": gather_group})
            if reduce_in_forward:
                rows.append({**base, "rank": r, "step": s, "op": "all_reduce", "in_nelems": 64,
                             "out_nelems": 64, "forward_op": "Redistribute", "in_shape": "8x8",
                             "group": "tp"})
            rows.append({**base, "rank": r, "step": s, "op": "reduce_scatter", "in_nelems": 1000,
                         "out_nelems": 500, "forward_op": None, "in_shape": None, "group": "dp"})
    return pd.DataFrame(rows)


def test_parameters_gathered_through_an_autograd_op_stay_parameters():
    # by hand (_hand_table): the all-gathers run inside Redistribute, as a scheme gathering its parameters
    # through DTensor does (torchtitan's SimpleFSDP), and the forward reduces nothing: a gather and a
    # reduce-scatter of Ψ = 1,000 a step, FSDP's full-shard pattern, no activations' note
    m = check(_hand_table("Redistribute", False), meta={"t": {"world_size": 2}}).measurement
    assert m.psi == 1000 and not any("forward passes" in n for n in m.notes)
    per = m.categories.set_index("category")["calls_per_rank_per_step"]
    assert per["step"] == 2


def test_a_gather_beside_a_forward_reduction_on_its_group_is_an_activation():
    # by hand (_hand_table): the same, with an all-reduce of 64 elements inside Redistribute in each forward
    # on the gathers' group: the gathers are sequence parallelism's then, reported apart; the reduce-scatter
    # of 1,000 alone is the step's
    m = check(_hand_table("Redistribute", True, gather_group="tp"), meta={"t": {"world_size": 2}}).measurement
    assert any(n.startswith("reductions and all-gathers inside forward passes") and
               "all-gather of 1,000 elements ×4, all-reduce of 64 elements ×4, inside Redistribute" in n
               for n in m.notes)
    per = m.categories.set_index("category")["calls_per_rank_per_step"]
    assert (per["step"], per["unexplained"]) == (1, 2)


def test_a_gather_in_a_forward_on_another_group_than_its_reductions_stays():
    # by hand (_hand_table): the forward's all-reduce on group "tp", the gathers inside Redistribute on
    # group "dp": not sequence parallelism's (it gathers on the group it scatters on); the all-reduces
    # reported apart
    m = check(_hand_table("Redistribute", True), meta={"t": {"world_size": 2}}).measurement
    assert any(n.startswith("reductions inside forward passes") and
               n.endswith("all-reduce of 64 elements ×4, inside Redistribute") for n in m.notes)
    assert not any("all-gather of 1,000 elements" in n for n in m.notes if "forward passes" in n)


def test_other_reductions_on_the_tensor_parallel_group_beside_data_parallelism_are_reported_apart():
    # by hand: 2 ranks × 2 steps; on group "tp" an all-reduce of 8 × 96 inside Redistribute and, after the
    # backward, one of 96 elements (the gradient of a norm's weight tensor parallelism replicates); on group
    # "dp" the gradient all-reduce of 1,000 elements: Ψ = 1,000 from "dp" alone, the 96 reported apart
    import pandas as pd

    base = {"file": "t", "op": "all_reduce", "dtype": "fp32", "elem_bytes": 4, "group_size": 2}
    rows = [{**base, "rank": r, "step": s, "in_nelems": e, "out_nelems": e, "forward_op": f,
             "in_shape": shape, "group": g}
            for r in (0, 1) for s in (1, 2)
            for e, f, shape, g in ((768, "Redistribute", "8x96", "tp"), (96, None, None, "tp"),
                                   (1000, None, None, "dp"))]
    m = check(pd.DataFrame(rows), meta={"t": {"world_size": 2}}).measurement
    assert m.psi == 1000
    assert any(n.startswith("reductions outside forward passes on the groups the forward passes reduce "
                            "activations on")
               and n.endswith("not data parallelism's: all-reduce of 96 elements ×4")
               for n in m.notes)
    per = m.categories.set_index("category")["calls_per_rank_per_step"]
    assert (per["step"], per["unexplained"]) == (1, 2)


def test_fsdp2_with_tensor_and_sequence_parallelism_and_a_replicated_norm():
    # fsdp2-tp2-sp-norm (counted): each rank reduce-scatters its 35,888 parameters' gradients a step on its
    # data-parallel group (run.json psi_per_rank: the norm's 256, half of each Linear); on the tensor-parallel
    # group the forward gathers and reduce-scatters activations, and after the backward FSDP2 all-reduces the
    # replicated norm's 2 gradients of 128 elements (24 over 4 ranks × 3 steps): model parallelism's, apart
    run = json.loads((RUNS / "fsdp2-tp2-sp-norm" / "run.json").read_text())
    steps = json.loads((RUNS / "fsdp2-tp2-sp-norm" / "expected.json").read_text())["ranks"]
    grads = {sum(c["calls"] * c["in_elems"] for c in s["c10d"] if c["op"] == "c10d::_reduce_scatter_base_")
             for r in steps.values() for s in r["steps"].values()}
    assert grads == {run["psi_per_rank"]} == {35_888}
    assert _counted_calls("fsdp2-tp2-sp-norm")[("c10d::allreduce_", 128)] == 24
    ts = read_traces(RUNS / "fsdp2-tp2-sp-norm")
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert (m.psi, m.n, m.world_size) == (35_888, 2, 4) and "fsdp-full-shard" in res.matches
    assert any(n.startswith("reductions outside forward passes on the groups the forward passes reduce")
               and n.endswith("all-reduce of 128 elements ×24") for n in m.notes)
    assert not any("all-reduce of 128" in n for n in m.notes if "inside forward passes" in n)


def test_flat_gathers_in_a_forward_op_stay_parameters_beside_a_forward_reduction():
    # by hand (_hand_table): flat all-gathers (no shape of two dimensions) inside CheckpointFunction, as
    # FSDP's or ZeRO-3's pre-forward hooks run inside a reentrant checkpoint's forward, beside a forward
    # all-reduce, no call naming its group: not sequence parallelism's (it gathers [sequence / N, batch,
    # hidden]); the gathers and the reduce-scatter stay the step's, FSDP's full-shard pattern
    table = _hand_table("CheckpointFunction", True, gather_shape=None)
    table["group"] = None
    m = check(table, meta={"t": {"world_size": 2}}).measurement
    assert not any("all-gather" in n for n in m.notes if "forward passes" in n)
    per = m.categories.set_index("category")["calls_per_rank_per_step"]
    assert per["step"] == 2 and m.psi == 1000
