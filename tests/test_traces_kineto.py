"""Kineto traces: expected values read off the trace files (tests/data/traces/README.md)."""

import gzip
import json
from pathlib import Path

import orjson
import pandas as pd

from zerocalc.traces import read_traces
from zerocalc.traces.kineto import parse_document

DATA = Path(__file__).parent / "data" / "traces"


def test_resnet50_ddp_five_buckets_per_step_and_two_broadcasts():
    ts = read_traces(DATA / "kineto" / "ddp-resnet50-a100-rank0-of-2.json.gz")
    t = ts.table
    assert ts.meta[str(DATA / "kineto" / "ddp-resnet50-a100-rank0-of-2.json.gz")]["world_size"] == 2
    assert sorted(set(t["step"])) == [4, 5, 6]
    buckets = [2049000, 7875584, 6563840, 6637568, 2431040]
    assert sum(buckets) == 25_557_032  # ResNet-50's parameter count
    for _, s in t.groupby("step"):
        ar = s[s["op"] == "all_reduce"]
        assert list(ar["in_nelems"]) == buckets and list(ar["out_nelems"]) == buckets
        assert ar["in_nelems"].sum() == 25_557_032
        assert set(ar["dtype"]) == {"fp32"} and set(ar["group_size"]) == {2}
        bc = s[s["op"] == "broadcast"]
        assert list(zip(bc["dtype"], bc["in_nelems"], strict=True)) == [("fp32", 53120), ("int64", 53)]
    assert len(t) == 3 * 7  # the 6 'wait' entries are dropped
    assert t["rank"].eq(0).all() and set(t["group"]) == {"0"}
    # the first bucket's kernel: ncclKernel_AllReduce_RING_LL_Sum_float, dur 3306.963 us
    first = t[(t["step"] == 4) & (t["in_nelems"] == 2049000)].iloc[0]
    assert abs(first["duration_s"] - 3306.963e-6) < 1e-12
    assert first["kernel"].startswith("ncclKernel_AllReduce_RING_LL_Sum_float")


def test_dlrm_eight_ranks_old_schema_with_kernel_durations():
    ts = read_traces(DATA / "kineto" / "dlrm-v100-8ranks")
    t = ts.table
    assert sorted(set(t["rank"])) == list(range(8))
    for rank, s in t.groupby("rank"):
        ar = s[s["op"] == "all_reduce"]
        assert list(ar["in_nelems"]) == [394241, 112, 226960], rank
        assert set(ar["dtype"]) == {"fp32"}
        assert ar["duration_s"].notna().all() and (ar["duration_s"] > 0).all()
        assert ar["kernel"].str.startswith("ncclKernel_AllReduce").all()
        assert len(s[s["op"] == "all_to_all"]) == 5
        assert set(s["step"]) == {10}
    r0 = t[(t["rank"] == 0) & (t["op"] == "all_reduce")]
    # rank 0 kernels: dur 246, 601, 952 us (correlation 42386, 43152, 43640)
    assert [round(d * 1e6) for d in r0["duration_s"]] == [246, 601, 952]
    # sizes only in Input Dims: no group size recorded in this schema
    assert t["group_size"].isna().all()
    # c10d::alltoall_base_ output [768], input [3392] (rank 0, int32)
    a2a = t[(t["rank"] == 0) & (t["in_nelems"] == 3392)].iloc[0]
    assert a2a["out_nelems"] == 768 and a2a["dtype"] == "int32"


def test_gloo_zero3_traces_shapes_and_missing_dtype_is_filled_only_from_gloo():
    d = DATA / "deepspeed-gloo-zero3-n4"
    ts = read_traces([d / f"rank{r}.json.gz" for r in range(4)])
    t = ts.table
    psi, n = 377_856, 4
    for rank, s in t.groupby("rank"):
        ag, rs, ar = (s[s["op"] == op] for op in ("all_gather", "reduce_scatter", "all_reduce"))
        assert list(ag["step"]) == list(rs["step"]) == list(ar["step"]) == [0, 1, 2], rank
        assert set(ag["in_nelems"]) == {psi // n} and set(ag["out_nelems"]) == {psi}
        assert set(rs["in_nelems"]) == {psi} and set(rs["out_nelems"]) == {psi // n}
        assert set(ar["in_nelems"]) == {1}
        assert set(s["group_size"]) == {4}
    meta = next(iter(ts.meta.values()))
    assert meta["backend"] == "gloo" and meta["gloo_matched"]
    # without step markers the same calls come out; their steps are the spans between the ends of the
    # optimizer's steps (its Optimizer.step# annotations, read here by plain json): none before the first
    # end or after the last
    t2 = read_traces(d / "no-step-markers").table
    raw = gzip.decompress((d / "no-step-markers" / "rank0.json.gz").read_bytes())
    events = json.loads(raw)["traceEvents"]
    ends = sorted((e["ts"] + e["dur"]) * 1e-6 for e in events
                  if e.get("name", "").startswith("Optimizer.step#") and e.get("cat") == "user_annotation")
    assert len(ends) == 3 and not any(e.get("name", "").startswith("ProfilerStep#") for e in events)
    want = [next((k for k in (1, 2) if ends[k - 1] < ts <= ends[k]), None) for ts in t2["cpu_start_s"]]
    assert [None if pd.isna(v) else int(v) for v in t2["step"]] == want
    assert {1, 2} <= set(want) and None in want
    assert sorted(t2.groupby("op").size().items()) == sorted(t.groupby("op").size().items())


def test_2024_schema_process_group_id_event():
    # One record_param_comms event quoted verbatim from HolisticTraceAnalysis
    # tests/data/ns_resolution_trace (spring-2024 schema), inside a minimal trace.
    ev = orjson.loads(
        b'{"ph":"X","cat":"cpu_op","name":"record_param_comms","pid":1102,"tid":1262,'
        b'"ts":1712195495520871.0,"dur":36.526,"args":{"External id":2099,"Collective name":"allreduce",'
        b'"dtype":"Float","In msg nelems":2049000,"Global rank start":0,"Group size":1,'
        b'"Process Group Ranks":"[0]","Out msg nelems":2049000,"Global rank stride":1,'
        b'"Process Group ID":0,"Ev Idx":50}}'
    )
    info = "{'backend': 'nccl', 'rank': 0, 'world_size': 1}"  # a repr string, as in that file
    res = parse_document({"traceEvents": [ev], "distributedInfo": info}, "t.json")
    (row,) = res.rows
    assert row["op"] == "all_reduce" and row["in_nelems"] == 2049000 and row["group"] == "0"
    assert row["group_size"] == 1 and row["rank"] == 0 and row["duration_s"] is None
    assert res.meta["schema"] == ["2024-pg-id"]


def test_2023_msg_size_generation_and_wait_dropped():
    args = {"Collective name": "_allgather_base", "dtype": "BFloat16", "In msg size": 1024,
            "Out msg size": 8192, "Group size": 8}
    evs = [
        {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": 10.0,
         "dur": 5.0, "args": args},
        {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": 20.0,
         "dur": 1.0, "args": {"Collective name": "wait"}},
    ]
    res = parse_document({"traceEvents": evs}, "t.json")
    (row,) = res.rows
    assert (row["op"], row["dtype"], row["elem_bytes"]) == ("all_gather", "bf16", 2)
    assert (row["in_nelems"], row["out_nelems"], row["group_size"]) == (1024, 8192, 8)
    assert res.meta["ignored"] == {"record_param_comms 'wait'": 1}


def test_the_slow_paths_collective_names_are_their_ops_and_a_groups_close_is_none():
    """ProcessGroupNCCL records an all-gather / reduce-scatter of unequal sizes as one out-of-place
    broadcast / reduction a rank (``RECORD_PARAM_COMMS_DATA`` colName ``"_broadcast_oop"`` /
    ``"_reduce_oop"``, torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp), closed by an entry named after
    the OpType (``ALLGATHER_coalesced``) or ``coalesced``, which is no call."""
    def rpc(ts, name, n):
        return {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": ts,
                "dur": 1.0, "args": {"Collective name": name, "dtype": "Float", "In msg nelems": n,
                                     "Out msg nelems": n, "Group size": 2}}

    evs = [rpc(10.0, "_broadcast_oop", 3), rpc(20.0, "_broadcast_oop", 5),
           rpc(30.0, "ALLGATHER_coalesced", 0), rpc(40.0, "_reduce_oop", 4), rpc(50.0, "coalesced", 0)]
    res = parse_document({"traceEvents": evs}, "t.json")
    assert [(r["op"], r["in_nelems"]) for r in res.rows] == [
        ("broadcast", 3), ("broadcast", 5), ("reduce", 4)]
    assert res.meta["ignored"] == {"record_param_comms 'ALLGATHER_coalesced'": 1,
                                   "record_param_comms 'coalesced'": 1}
