"""The Kineto reader's reductions and all-gathers of a forward pass (``forward_op``) in real gloo runs.

Expected values are counted from the traces by count_calls.py (expected.json's ``forward_reductions`` and
``forward_gathers``: each c10d reduction or all-gather nested in an op that records a ``Sequence number``
and in no node of the backward, found from a full stack of each thread's events, not by zerocalc) and the
runs' facts (run.json).
"""

import gzip
import json
from collections import Counter

import orjson
import pytest
from real_runs import RUNS, count_calls, forward_gathers, forward_reductions, recompute_gathers

from zerocalc.traces import read_traces
from zerocalc.traces.kineto import parse_bytes, parse_document

CASES = sorted(d.name for d in RUNS.iterdir() if (d / "expected.json").exists())
REDUCTIONS = ["all_reduce", "reduce_scatter", "reduce"]
#: Runs whose forward gathers run in an op that began more events before them than the reader searches
#: (kineto_forward.WINDOW, a documented limit): a reentrant CheckpointFunction around a whole transformer
#: block, 271 to 617 of rank 0's events before the gathers of its parameters (counted in the trace). The
#: reader marks none of them.
FAR_BACK = {"ds-zero3-gpt2-past-reuse-distance-reentrant-checkpoint"}


def test_the_runs_have_forward_reductions_where_tensor_parallelism_ran():
    # the counts themselves: every run with a tensor-parallel (or by-hand Megatron) split reduces in its
    # forward, and no other run does
    with_tp = {c for c in CASES if forward_reductions(c)}
    assert with_tp == {"tp2-dp2", "fsdp2-tp2", "fsdp2-tp2-sp", "hsdp-2x2-tp2", "pp2-fsdp2-tp2", "tp4",
                       "tp4-first-whole-ga2", "tp4-block-ga2", "tp4-sp", "fsdp2-tp2-sp-norm",
                       "ds-autotp2-zero1-ga2", "tp2-dp4"}
    for c in with_tp:
        assert "tp" in json.loads((RUNS / c / "run.json").read_text())["groups"]
    # and the runs of sequence parallelism all-gather in it: its input, inside Redistribute; DeepSpeed
    # AutoTP the logits of its split output head, inside GatherFromTensorParallelRegion; and FSDP1 and ZeRO-3
    # the checkpointed layer's parameters, their forward hooks run inside a reentrant CheckpointFunction
    assert {c for c in CASES if forward_gathers(c)} == {"fsdp2-tp2-sp", "tp4-sp", "fsdp2-tp2-sp-norm",
                                                        "ds-autotp2-zero1-ga2", "fsdp1-reentrant-checkpoint",
                                                        "ds-zero3-reuse0-reentrant-checkpoint", *FAR_BACK}
    assert forward_gathers("fsdp1-reentrant-checkpoint") == {(7_720, "CheckpointFunction"): 8}
    assert all({op for _, op in forward_gathers(c)} == {"CheckpointFunction"} for c in FAR_BACK)
    assert forward_gathers("tp4-sp") == {(384, "Redistribute"): 12}


@pytest.mark.parametrize("case", CASES)
def test_reader_marks_the_reductions_counted_in_a_forward_pass(case):
    table = read_traces(RUNS / case).table
    rows = table[table["step"].notna()]
    if "forward_op" not in rows:
        assert not forward_reductions(case)
        return
    fwd = rows[rows["forward_op"].notna()]
    assert set(fwd["op"].astype(str)) <= {*REDUCTIONS, "all_gather"}
    gathers = Counter() if case in FAR_BACK else forward_gathers(case)
    for counted, ops in ((forward_reductions(case), REDUCTIONS), (gathers, ["all_gather"])):
        calls = fwd[fwd["op"].astype(str).isin(ops)]
        assert Counter(zip(calls["in_nelems"].astype(int), calls["forward_op"], strict=True)) == counted
    # and the all-gathers of a reentrant checkpoint's recompute (kineto_recompute), as counted
    again = rows[rows["recompute_op"].notna()] if "recompute_op" in rows else rows.iloc[:0]
    assert Counter(zip(again["in_nelems"].astype(int), again.get("recompute_op", []), strict=True)) == (
        recompute_gathers(case))


def test_the_slow_path_marks_the_same_calls():
    # a trace decoded in full (parse_document, the path for input the fast decoder does not vouch for)
    raw = gzip.decompress((RUNS / "tp4-first-whole-ga2" / "rank0.json.gz").read_bytes())
    fast = [(r["op"], r["in_nelems"], r["forward_op"]) for r in parse_bytes(raw, "t").rows]
    slow = [(r["op"], r["in_nelems"], r["forward_op"]) for r in parse_document(orjson.loads(raw), "t").rows]
    assert fast == slow
    # counted: 2 micro-batches × 3 steps, each an all-reduce of 768 in the forward, of 1,536 in the backward
    assert Counter(fast) == {("all_reduce", 768, "Redistribute"): 6, ("all_reduce", 1536, None): 6}


def test_torchrecs_forward_reduce_scatters_on_an_nccl_trace():
    # HolisticTraceAnalysis's TorchRec trace (rank 0 of 16, A100, NCCL): counted here from the file with
    # count_calls.py's stack of each thread's events, no zerocalc: the reduce-scatters nested in
    # ReduceScatterBase_Req's forward, 5 steps × two sizes (its pooled embeddings, 65,536 × 384 and × 64 in);
    # DDP's all-reduces of the dense part run in no forward
    path = RUNS.parent / "kineto" / "torchrec-a100-rank0-of-16" / "rank0.json.gz"
    events = [e for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
              if e.get("ph") == "X" and "dur" in e]
    counted = Counter()
    for tid in {e["tid"] for e in events if e["name"].startswith("c10d::")}:
        calls = [{"ts": e["ts"], "dur": e["dur"], "op": e["name"], "dims": e["args"]["Input Dims"][1]}
                 for e in events if e["tid"] == tid and e["name"].startswith("c10d::")]
        count_calls().mark_forward(events, tid, calls)
        counted.update((c["op"], c["dims"][0] * c["dims"][1], c["forward_in"]) for c in calls
                       if c["forward_in"])
    assert counted == {("c10d::_reduce_scatter_base_", 65536 * 384, "ReduceScatterBase_Req"): 5,
                       ("c10d::_reduce_scatter_base_", 65536 * 64, "ReduceScatterBase_Req"): 5}
    rows = parse_bytes(gzip.decompress(path.read_bytes()), "t").rows
    got = Counter((r["op"], r["in_nelems"], r["forward_op"]) for r in rows if r["forward_op"])
    assert got == {("reduce_scatter", e, around): k for (_, e, around), k in counted.items()}
    assert {r["op"] for r in rows if r["forward_op"] is None} >= {"all_reduce"}


def _trace(with_leaf_node: bool) -> bytes:
    """A minimal Kineto trace by hand: one profiler step; an all-reduce of 1,000 floats nested in an op that
    records a sequence number (an autograd.Function's forward, as a DTensor redistribution run by a hook),
    100 other ops before it; with ``with_leaf_node``, all of it inside an AccumulateGrad node (a hook's
    work, as DDP's and FSDP1's run there)."""
    def op(name, ts, dur, **args):
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                "args": args}

    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0.0,
               "dur": 2000.0}]
    if with_leaf_node:
        events.append(op("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 1.0, 1000.0))
    events += [op("aten::copy_", 2.0 + i, 0.5) for i in range(100)]
    events.append(op("Redistribute", 200.0, 100.0, **{"Sequence number": 5, "Fwd thread id": 0}))
    events.append(op("c10d::allreduce_", 210.0, 10.0, **{"Input Dims": [[1000]], "Input type": ["float"]}))
    return json.dumps({"traceEvents": events, "distributedInfo": {"rank": 0, "world_size": 2}}).encode()


def test_a_hook_inside_an_accumulate_grad_node_is_no_forward_however_far_the_node_began():
    # by hand: the node began 101 events before the call, the numbered op 1 before it
    [row] = parse_bytes(_trace(with_leaf_node=True), "t").rows
    assert row["op"] == "all_reduce" and row["forward_op"] is None
    [row] = parse_bytes(_trace(with_leaf_node=False), "t").rows
    assert row["forward_op"] == "Redistribute"


def test_trace_summary_counts_the_calls_of_a_forward_pass():
    # rank 0 of tp4-first-whole-ga2: per step 4 all-reduces, 2 of them in a forward pass (counted); a run with
    # none keeps the summary's columns as they were
    from typer.testing import CliRunner

    from zerocalc.cli import app

    steps = json.loads((RUNS / "tp4-first-whole-ga2" / "expected.json").read_text())["ranks"]["0"]["steps"]
    fwd = {int(k.split("#")[1]): len(s["forward_reductions"]) for k, s in steps.items()}
    calls = {int(k.split("#")[1]): s["c10d_totals"]["c10d::allreduce_"]["calls"] for k, s in steps.items()}
    path = str(RUNS / "tp4-first-whole-ga2" / "rank0.json.gz")
    res = CliRunner().invoke(app, ["trace", "summary", path, "--format", "csv"])
    lines = res.stdout.splitlines()
    assert lines[0].endswith(",forward_calls")
    got = {int(r.split(",")[3]): (int(r.split(",")[5]), int(r.split(",")[-1])) for r in lines[1:]}
    assert got == {k: (calls[k], fwd[k]) for k in fwd}
    text = CliRunner().invoke(app, ["trace", "summary", path]).stdout
    assert text.count(f"({fwd[1]} in a forward pass)") == len(fwd)
    plain = CliRunner().invoke(app, ["trace", "summary", str(RUNS / "ddp-bf16" / "rank0.json.gz"),
                                     "--format", "csv"]).stdout
    assert plain.splitlines()[0] == "file,rank,process,step,op,calls,in_nelems,out_nelems,in_bytes,out_bytes"


@pytest.mark.parametrize("case", ["tp4-block-ga2", "tp2-dp2", "fsdp2-tp2-sp", "tp4-sp", "ddp-ga4-no-sync",
                                  "fsdp2-ga4-no-sync"])
def test_reader_records_the_shape_each_reduction_reduces_or_gathers_from(case):
    # counted here from the files with plain json: each c10d reduction's tensor and each all-gather's input
    # (a rank's shard), its Input Dims where it is one tensor of at least two dimensions (a list of one such
    # tensor too; a reduce-scatter's and an all-gather's input is their second argument); FSDP2 gathers
    # flat shards, none of which counts
    counted = Counter()
    for path in sorted((RUNS / case).glob("rank*.json.gz")):
        for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]:
            name = e.get("name", "")
            if e.get("ph") != "X" or name not in count_calls().REDUCTIONS + count_calls().GATHERS:
                continue
            dims = e["args"]["Input Dims"][1 if "scatter" in name or "gather" in name else 0]  # the input
            dims = dims[0] if len(dims) == 1 and isinstance(dims[0], list) else dims
            if len(dims) >= 2 and all(isinstance(d, int) for d in dims):
                counted["x".join(map(str, dims))] += 1
    table = read_traces(RUNS / case).table
    got = Counter(table["in_shape"].dropna().tolist()) if "in_shape" in table else Counter()
    assert got == counted


def test_a_trace_of_nccl_annotations_alone_is_read_alike():
    # by hand: the same all-reduce as an older trace records it, an nccl:all_reduce annotation with its
    # Input Dims and no c10d op (traces before 2023), inside the numbered op: a forward one, its shape unread
    # (only a c10d op's is)
    doc = json.loads(_trace(with_leaf_node=False))
    call = doc["traceEvents"][-1]
    call.update(name="nccl:all_reduce", cat="user_annotation")
    [row] = parse_bytes(json.dumps(doc).encode(), "t").rows
    assert (row["op"], row["in_nelems"], row["forward_op"], row["in_shape"]) == ("all_reduce", 1000,
                                                                                  "Redistribute", None)


def test_an_all_gather_annotation_in_a_forward_pass_is_marked_too():
    # by hand: the call of _trace as an nccl:all_gather annotation (an older trace's) inside the numbered op:
    # marked as the forward's; inside an AccumulateGrad node (a hook's), not
    for leaf, around in ((False, "Redistribute"), (True, None)):
        doc = json.loads(_trace(with_leaf_node=leaf))
        doc["traceEvents"][-1].update(name="nccl:all_gather", cat="user_annotation")
        [row] = parse_bytes(json.dumps(doc).encode(), "t").rows
        assert (row["op"], row["forward_op"]) == ("all_gather", around)


def test_sequence_parallelism_alone_read_alike_by_both_paths():
    # rank 0 of tp4-sp, counted (expected.json): per step a reduce-scatter of 1,536 in, an all-gather of 384
    # in and an all-reduce of 768 in the forward, inside Redistribute; a reduce-scatter of 1,536 and an
    # all-gather of 384 in the backward; the shapes counted by hand from the file's Input Dims (8 × 192
    # reduced, 2 × 192 gathered from, 8 × 96 all-reduced)
    steps = json.loads((RUNS / "tp4-sp" / "expected.json").read_text())["ranks"]["0"]["steps"]
    fwd = Counter(f for s in steps.values() for f in s["forward_reductions"] + s["forward_gathers"])
    assert fwd == {"c10d::reduce_scatter_tensor_coalesced_ 1536 in Redistribute": 3,
                   "c10d::allgather_into_tensor_coalesced_ 384 in Redistribute": 3,
                   "c10d::allreduce_ 768 in Redistribute": 3}
    raw = gzip.decompress((RUNS / "tp4-sp" / "rank0.json.gz").read_bytes())
    cols = ("op", "in_nelems", "forward_op", "in_shape")
    fast = [tuple(r[c] for c in cols) for r in parse_bytes(raw, "t").rows]
    slow = [tuple(r[c] for c in cols) for r in parse_document(orjson.loads(raw), "t").rows]
    assert fast == slow
    assert Counter(fast) == {("reduce_scatter", 1536, "Redistribute", "8x192"): 3,
                             ("all_gather", 384, "Redistribute", "2x192"): 3,
                             ("all_reduce", 768, "Redistribute", "8x96"): 3,
                             ("reduce_scatter", 1536, None, "8x192"): 3,
                             ("all_gather", 384, None, "2x192"): 3}


def test_fsdp2s_post_backward_reductions_are_not_a_forward_passes():
    # fsdp2-tp2-sp-norm (counted): per step and rank 2 all-reduces of 128 elements (the replicated norm's
    # gradients), inside Redistribute but inside FSDP::root_post_backward_callback, none among the forward's
    steps = json.loads((RUNS / "fsdp2-tp2-sp-norm" / "expected.json").read_text())["ranks"]
    per_step = {c["calls"] for r in steps.values() for s in r["steps"].values() for c in s["c10d"]
                if c["op"] == "c10d::allreduce_"}
    assert per_step == {2} and not any("allreduce" in f for r in steps.values() for s in r["steps"].values()
                                       for f in s.get("forward_reductions", []))
    table = read_traces(RUNS / "fsdp2-tp2-sp-norm").table
    norm = table[(table["op"] == "all_reduce") & (table["in_nelems"] == 128)]
    assert len(norm) == 24 and norm["forward_op"].isna().all()
    # by hand: _trace's call inside the numbered op, both inside that callback's annotation: no forward's
    doc = json.loads(_trace(with_leaf_node=False))
    doc["traceEvents"].insert(1, {"ph": "X", "cat": "user_annotation", "pid": 1, "tid": 1, "ts": 150.0,
                                  "dur": 200.0, "args": {}, "name": "FSDP::root_post_backward_callback"})
    [row] = parse_bytes(json.dumps(doc).encode(), "t").rows
    assert row["forward_op"] is None
