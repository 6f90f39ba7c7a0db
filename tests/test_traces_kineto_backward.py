"""Backward passes per profiler step, from the autograd engine's node events of a Kineto trace.

Hand-made events first (each expectation derived by hand from the rule: a node numbered above every node
run before it opens a pass); then every kept real run, whose run.json says how many micro-batches (each one
forward and one backward) an optimizer step ran, and whose traces count_calls.py (plain json/gzip) splits
into ProfilerSteps.
"""

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest
from real_runs import RUNS, count_calls, sampled

from zerocalc.traces import read_traces
from zerocalc.traces.kineto import parse_bytes, parse_document
from zerocalc.traces.kineto_backward import backward_passes

NODE = "autograd::engine::evaluate_function: "


def _node(ts, dur, seq, tid=1, fwd=1, name="AddmmBackward0"):
    args = {"External id": 1} if seq is None else {"Sequence number": seq, "Fwd thread id": fwd}
    return {"ph": "X", "cat": "cpu_op", "name": NODE + name, "pid": 1, "tid": tid, "ts": ts, "dur": dur,
            "args": args}


def _step(k, ts, dur):
    return {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "pid": 1, "tid": 1, "ts": ts,
            "dur": dur}


def _trace(events):
    return {"traceEvents": events}


#: Step 1 (0-100): two micro-batches, nodes 9 8 7 then 19 18 17, AccumulateGrad (no number) between
#: them; step 2 (100-200): one pass, 29 28, its node 28 holding a nested backward (a reentrant checkpoint:
#: nodes 40 and 39, above 29, inside 28's event on the same thread) and its last node on another thread
#: (a device's autograd thread) numbered 27; a node of another forward thread numbered 50 (not the main
#: forward's); after step 2, a pass begun outside any step.
EVENTS = [
    _step(1, 0, 100), _step(2, 100, 100),
    _node(10, 2, 9, name="MseLossBackward0"), _node(13, 2, 8), _node(16, 2, None, name="torch::autograd::"
                                                                      "AccumulateGrad"), _node(19, 2, 7),
    _node(50, 2, 19, name="MseLossBackward0"), _node(53, 2, 18), _node(56, 2, 17),
    _node(110, 2, 29, name="MseLossBackward0"), _node(113, 20, 28, name="CheckpointFunctionBackward"),
    _node(115, 2, 40), _node(118, 2, 39), _node(140, 2, 27, tid=2), _node(150, 2, 50, fwd=7),
    _node(250, 2, 60),
]


def test_passes_open_where_a_node_is_numbered_above_every_earlier_one():
    sel = [(e["ts"], e["ts"] + e["dur"], (e["pid"], e["tid"]), e["args"]) for e in EVENTS
           if e["name"].startswith(NODE)]
    steps = [(0, 100, 1), (100, 200, 2)]
    assert backward_passes(sel, steps) == {1: 2, 2: 1}
    assert backward_passes([], steps) == {}
    # nothing numbered (AccumulateGrad alone): nothing counted
    assert backward_passes([(10, 12, (1, 1), {"External id": 3})], steps) == {}


def test_both_parse_paths_count_the_same_and_put_it_in_the_meta():
    doc = _trace(EVENTS)
    data = json.dumps(doc).encode()
    assert parse_bytes(data, "t.json").meta["backward_passes"] == {1: 2, 2: 1}
    assert parse_document(doc, "t.json").meta["backward_passes"] == {1: 2, 2: 1}
    # a trace without node events states none
    bare = _trace([e for e in EVENTS if not e["name"].startswith(NODE)])
    assert "backward_passes" not in parse_bytes(json.dumps(bare).encode(), "t.json").meta


def test_the_sequence_number_is_read_wherever_the_args_put_it():
    # Kineto writes the keys in its own order and spacing; a key written twice counts as JSON reads it
    text = ('{"traceEvents": [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, '
            '"tid": 1, "ts": 0, "dur": 100}, '
            '{"ph": "X", "cat": "cpu_op", "name": "' + NODE + 'A", "pid": 1, "tid": 1, "ts": 10, "dur": 1, '
            '"args": {"Fwd thread id": 1,"Sequence number":5}}, '
            '{"ph": "X", "cat": "cpu_op", "name": "' + NODE + 'B", "pid": 1, "tid": 1, "ts": 20, "dur": 1, '
            '"args": {"Sequence number": 9, "Fwd thread id": 1, "Sequence number": 4}}]}')
    assert parse_bytes(text.encode(), "t.json").meta["backward_passes"] == {3: 1}


@pytest.mark.parametrize("case", sampled(sorted(p.name for p in RUNS.iterdir() if p.is_dir())))
def test_each_real_run_counts_one_backward_pass_per_micro_batch(case):
    run = json.loads((RUNS / case / "run.json").read_text())
    # one backward pass a micro-batch; a trace without ProfilerStep counts them per span between the
    # optimizer's steps (count_calls.py's OptimizerStep#k)
    per_step = 1 if run["profiler"]["one ProfilerStep per"] == "micro-batch" else run["micro_batches"]
    if "no backward" in str(run.get("grad_sync")):
        per_step = 0
    ts = read_traces(RUNS / case)
    counted = count_calls().count_case(str(RUNS / case))["ranks"]
    got: dict[int, dict[int, int]] = {}
    for meta in ts.meta.values():
        got.setdefault(meta["rank"], {}).update(meta.get("backward_passes", {}))
    evaluated = set(run.get("evaluation_steps", ()))  # batches evaluated in a step of their own: no backward
    for rank, r in counted.items():
        steps = [int(name.split("#")[1]) for name in r["steps"]]
        want = {s: per_step for s in steps if s not in evaluated} if per_step else {}
        assert got[int(rank)] == want, (case, rank)


def test_a_trace_of_a_gpu_run_counts_its_backward_on_the_autograd_thread():
    # the DDP ResNet-50 trace (A100): its backward nodes run on the device's autograd thread, not the main one
    path = Path(__file__).parent / "data" / "traces" / "kineto" / "ddp-resnet50-a100-rank0-of-2.json.gz"
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    marks = [e for e in events if e.get("name", "").startswith("ProfilerStep#")]
    steps = sorted(int(e["name"].split("#")[1]) for e in marks)
    node_threads = {e["tid"] for e in events if e.get("name", "").startswith(NODE)}
    step_threads = {e["tid"] for e in marks}
    assert node_threads.isdisjoint(step_threads)
    meta = next(iter(read_traces(path).meta.values()))
    assert meta["backward_passes"] == {s: 1 for s in steps}


def test_reentrant_checkpointing_nests_nodes_numbered_above_their_pass():
    # the kept run with layers.1 under reentrant checkpointing (README): inside each
    # CheckpointFunctionBackward event, on the same thread, nodes numbered above the root of their pass; read
    # by plain json here
    path = RUNS / "ddp-ga4-no-sync-reentrant-checkpoint" / "rank0.json.gz"
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    nodes = sorted((e for e in events if e.get("name", "").startswith(NODE)),
                   key=lambda e: (e["ts"], -e["dur"]))
    checkpoints = [e for e in nodes if e["name"].endswith("CheckpointFunctionBackward")]
    assert len(checkpoints) == 4 * 2  # one a micro-batch, 4 micro-batches, 2 steps
    for c in checkpoints:
        inside = [e for e in nodes if e is not c and e["tid"] == c["tid"]
                  and c["ts"] <= e["ts"] and e["ts"] + e["dur"] <= c["ts"] + c["dur"]]
        # the pass's root: the loss's division by the micro-batches (loss.div(k).backward()), its first node
        root = [e for e in nodes if e["name"].endswith("DivBackward0") and e["ts"] < c["ts"]][-1]
        assert max(e["args"].get("Sequence number", -1) for e in inside) > root["args"]["Sequence number"]


def test_malformed_node_and_optimizer_events_are_left_out_even_when_strict():
    # a node or an optimizer step is no row: one without a valid time, thread or number is left out, and a
    # strict read does not stop at it; a forward thread that is no scalar names none
    bad = [
        {**_node(20, 2, 5), "ts": "soon"}, {**_node(21, 2, 6), "tid": [1]}, _node(22, 2, 7, fwd=[1]),
        {"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#Adam.step", "pid": 1, "tid": 1,
         "ts": None, "dur": 3},
        {"ph": "X", "cat": "cpu_op", "name": NODE + "A", "pid": 1, "tid": 1, "ts": 30, "dur": 1,
         "args": {"Sequence number": True}},
        {"ph": "X", "cat": "cpu_op", "name": NODE + "B", "pid": 1, "tid": 1, "ts": 31, "dur": 1, "args": [3]},
    ]
    doc = _trace([_step(1, 0, 100), *bad, _node(10, 2, 4), _node(40, 2, 3)])
    for res in (parse_bytes(json.dumps(doc).encode(), "t.json", strict=True),
                parse_document(doc, "t.json", strict=True)):
        # nodes 4 and 3 (forward thread 1, the most named) and 7 (none named): 4 opens the one pass, 3 is in
        # it, 7 is not of the main forward thread's count
        assert res.meta["backward_passes"] == {1: 1}
        assert "optimizer_steps" not in res.meta and not res.skipped


@pytest.mark.parametrize("case", sampled(sorted(p.name for p in RUNS.iterdir() if p.is_dir())))
def test_each_real_run_names_the_node_of_the_backward_its_gathers_ran_in(case):
    # rank 0: the all-gathers count_calls.py finds nested in a node of the backward (expected.json's
    # backward_gathers, by elements in and the innermost node) are those the reader names in backward_op, in
    # the steps both count
    e = json.loads((RUNS / case / "expected.json").read_text())
    steps = e["ranks"]["0"]["steps"]
    if not all(k.startswith("ProfilerStep#") for k in steps):
        pytest.skip("steps from the optimizer's annotations: counted over other windows")
    counted = Counter((int(g.split(" ")[1]), g.split(" in ", 1)[1].split("::")[-1])
                      for s in steps.values() for g in s.get("backward_gathers", []))
    numbers = {int(k.split("#")[1]) for k in steps}
    for path in sorted((RUNS / case).glob("rank0*.json.gz")):
        rows = parse_bytes(gzip.decompress(path.read_bytes()), "r0").rows
        read = Counter((r["in_nelems"], r["backward_op"]) for r in rows
                       if r.get("backward_op") and r["step"] in numbers)
        assert read == counted, case
        assert not any(r.get("backward_op") for r in rows if r["op"] != "all_gather")


def test_both_parse_paths_name_the_same_nodes():
    # DeepSpeed ZeRO-3 at reuse distance 0: each module's parameters gathered again in its backward, inside
    # PreBackwardFunctionForModuleBackward; the full decode names the same as the fast one
    data = gzip.decompress((RUNS / "ds-zero3-ga4-reuse0-prefetch0" / "rank0.json.gz").read_bytes())
    fast, full = parse_bytes(data, "r0").rows, parse_document(json.loads(data), "r0").rows
    named = [r.get("backward_op") for r in fast]
    assert named == [r.get("backward_op") for r in full]
    assert set(named) == {None, "PreBackwardFunctionForModuleBackward"}
