"""Kineto reader on real gloo runs: group size and dtype of each call from what the trace records,
traces with only gloo worker events, and the ProfilerStep window.

Expected values are counted in the runs' README.md and expected.json (tests/data/traces/real-runs),
made from the trace files without zerocalc.
"""

import gzip
import json
from pathlib import Path

import pytest

from zerocalc.traces import kineto, read_traces

RUNS = Path(__file__).parent / "data" / "traces" / "real-runs"


def _expected(case: str) -> dict:
    return json.loads((RUNS / case / "expected.json").read_text())


def _doc(case: str, rank: int = 0) -> dict:
    with gzip.open(RUNS / case / f"rank{rank}.json.gz", "rt") as f:
        return json.load(f)


def test_hsdp_group_sizes_from_shapes_and_pg_config():
    # README: all-gathers and reduce-scatters on the shard group of 2 (output/input = 2), the
    # all-reduces of the shards on the replicate group of 2; pg_config holds default_pg (4) and two
    # groups of 2. No collective spans the world of 4.
    t = read_traces(RUNS / "hsdp-2x2").table
    assert set(t["group_size"].astype(int)) == {2}
    by = t.groupby(["op", "group_from"]).size().to_dict()
    assert by == {("all_gather", "shapes"): 4 * 3 * 6, ("reduce_scatter", "shapes"): 4 * 3 * 3,
                  ("all_reduce", "pg_config"): 4 * 3 * 3}


def test_subgroup_ddp_all_reduce_is_on_the_group_of_two():
    # README: pg_config = default_pg (4) and one group of 2; the all-reduce of Ψ = 71,104 runs on it
    t = read_traces(RUNS / "ddp-subgroup-dp2-of-4").table
    ar = t[t["op"] == "all_reduce"]
    assert len(ar) == 4 * 3 and set(ar["group_size"].astype(int)) == {2}
    assert set(ar["in_nelems"].astype(int)) == {71_104}
    assert set(ar["group"].astype(str)) <= {"pg 1", "pg 2"}


def test_mixed_precision_dtype_per_call():
    # README: 6 all-gathers in bf16 and 3 reduce-scatters in fp32 per step, group 4 from the shapes
    t = read_traces(RUNS / "fsdp2-mixed-bf16-fp32").table
    got = t.groupby(["op", "dtype", "group_size"]).size().to_dict()
    assert got == {("all_gather", "bf16", 4): 4 * 3 * 6, ("reduce_scatter", "fp32", 4): 4 * 3 * 3}


def test_tensorlist_all_reduce_takes_the_dtype_of_its_gloo_worker_event():
    # ddp-bf16: c10d::allreduce_ says TensorList; the gloo:all_reduce worker event says c10::BFloat16
    t = read_traces(RUNS / "ddp-bf16").table
    ar = t[t["op"] == "all_reduce"]
    assert set(ar["dtype"]) == {"bf16"} and set(ar["elem_bytes"].astype(int)) == {2}


def test_a_trace_with_only_gloo_worker_events_is_read():
    doc = _doc("fsdp2-mixed-bf16-fp32")
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith("c10d::")]
    res = kineto.parse_document(doc, "gloo-only.json")
    steps = _expected("fsdp2-mixed-bf16-fp32")["ranks"]["0"]["steps"]
    workers = {k: v["gloo_workers"] for k, v in steps.items()}
    rows = [r for r in res.rows if r["step"] is not None]
    # every worker event that starts inside a step is a row of that step (README: gloo_workers)
    for k, ws in workers.items():
        step = int(k.split("#")[1])
        mine = [r for r in rows if r["step"] == step]
        want = sorted((w["op"].split(":")[1], w["elems"]) for w in ws for _ in range(w["calls"]))
        assert sorted((r["op"], r["in_nelems"]) for r in mine) == want
    ag = [r for r in rows if r["op"] == "all_gather"]
    # the worker event holds the shard; the group (pg_config: the world of 4) gives the gathered size
    assert ag and all(r["dtype"] == "bf16" and r["group_size"] == 4 and r["out_nelems"] == 4 * r["in_nelems"]
                      for r in ag)
    assert "reads as an all-reduce" in res.meta["notes"][0]


def test_a_call_after_the_last_profiler_step_window_has_no_step():
    # ddp-bf16 rank 0 with its ProfilerStep#3 marker removed: the all-reduce of step 3 (expected.json:
    # 1 call) now ends after the last window, so it belongs to no step; steps 1 and 2 keep their 3 and 1
    doc = _doc("ddp-bf16")
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("name") != "ProfilerStep#3"]
    rows = kineto.parse_document(doc, "ddp-bf16-two-markers.json").rows
    steps = _expected("ddp-bf16")["ranks"]["0"]["steps"]
    want = {int(k.split("#")[1]): sum(v["calls"] for v in s["c10d_totals"].values())
            for k, s in steps.items()}
    got = {k: sum(1 for r in rows if r["step"] == k) for k in (1, 2, 3)}
    assert got == {1: want[1], 2: want[2], 3: 0}
    assert sum(1 for r in rows if r["step"] is None) == want[3]


@pytest.mark.parametrize("case", ["ddp-bf16", "hsdp-2x2", "fsdp2-mixed-bf16-fp32"])
def test_process_groups_of_pg_config_in_meta(case):
    meta = read_traces(RUNS / case).meta
    for f, m in meta.items():
        rank = m["rank"]
        pgs = _expected(case)["ranks"][str(rank)]["pg_config"]
        assert sorted((g["size"], tuple(g["ranks"])) for g in m["process_groups"]) == \
            sorted((g["pg_size"], tuple(g["ranks"])) for g in pgs), f


def _group_of_rank(run: dict) -> dict[str, dict[int, str]]:
    """run.json's groups: kind → rank → its group's ranks as text."""
    return {kind: {r: ",".join(map(str, g)) for g in groups for r in g}
            for kind, groups in run["groups"].items()}


#: the tensor-parallel calls of each case (README): layers.1's output all-reduced (8 × 160), or under
#: sequence parallelism the input and the output's gradient all-gathered (4 × 128, 4 × 160 a rank) and the
#: output reduce-scattered (8 × 160)
TENSOR_PARALLEL = {
    "tp2-dp2": {("all_reduce", 8 * 160)},
    "fsdp2-tp2": {("all_reduce", 8 * 160)},
    "fsdp2-tp2-sp": {("all_gather", 4 * 128), ("all_gather", 4 * 160), ("reduce_scatter", 8 * 160)},
}


@pytest.mark.parametrize("case", list(TENSOR_PARALLEL))
def test_two_groups_of_one_size_told_apart_by_their_worker_threads(case):
    # README: every call is on a group of 2 and none names it; run.json lists the groups that ran. The
    # tensor-parallel calls ran on the rank's tensor-parallel group, every other call on its data-parallel
    # group.
    run = json.loads((RUNS / case / "run.json").read_text())
    mine = _group_of_rank(run)
    t = read_traces(RUNS / case).table
    tp = [(op, n) in TENSOR_PARALLEL[case] for op, n in zip(t["op"].astype(str), t["in_nelems"].astype(int),
                                                             strict=True)]
    assert sum(tp) == 4 * 3 * len(TENSOR_PARALLEL[case])  # counted: each once a step on each rank
    want = [mine["tp" if a else "dp"][r] for r, a in zip(t["rank"].astype(int), tp, strict=True)]
    assert list(t["group_ranks"].astype(str)) == want
    assert set(t["group_size"].astype(int)) == {2}


def test_hsdp_shard_and_replicate_calls_named_by_their_worker_threads():
    # README: all-gathers and reduce-scatters on the shard group ({0, 1} for rank 0), the shards'
    # all-reduce on the replicate group ({0, 2}); the two groups of 2 are told apart by their threads
    run = json.loads((RUNS / "hsdp-2x2" / "run.json").read_text())
    mine = _group_of_rank(run)
    t = read_traces(RUNS / "hsdp-2x2").table
    kind = ["replicate" if op == "all_reduce" else "shard" for op in t["op"]]
    assert list(t["group_ranks"].astype(str)) == [mine[k][r] for k, r in zip(kind, t["rank"].astype(int),
                                                                                strict=True)]
