"""gloo work annotations paired with the calls: in start order, or within the worker threads' reach where
two worker threads open theirs in the other order. Expected values read off the trace files by plain json."""

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from zerocalc.traces.kineto import parse_document

RUNS = Path(__file__).parent / "data" / "traces" / "real-runs"
#: kept runs' ranks with two gloo annotations opened out of their calls' order
REORDERED = [RUNS / "ds-zero3-defaults-mixed-ga4" / "rank1.json.gz",
             RUNS / "torch2.4-ddp-zero-ro-fp16-hook" / "rank2.json.gz"]
DTYPES = {"float": "fp32", "c10::BFloat16": "bf16", "c10::Half": "fp16", "double": "fp64", "int": "int32",
          "long int": "int64"}


def _events(path):
    return [e for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"] if e.get("ph") == "X"]


def _size(dims):
    n = 1
    for d in dims:
        n *= d
    return n


@pytest.mark.parametrize("path", REORDERED, ids=lambda p: p.parent.name)
def test_annotations_opened_out_of_order_still_pair_with_their_calls(path):
    events = _events(path)
    gloo = sorted((e["ts"], e["dur"], e["name"], _size(e["args"]["Input Dims"][0]),
                   e["args"]["Input type"][0]) for e in events if e["name"].startswith("gloo:"))
    calls = sorted(e["ts"] for e in events if e["name"].startswith("c10d::") and e["name"] != "c10d::barrier")
    # what makes this file the case: as many annotations as calls, on two worker threads, and the start
    # order of the annotations differs from the order of the calls' sizes somewhere
    assert len(gloo) == len(calls)
    assert len({e["tid"] for e in events if e["name"].startswith("gloo:")}) == 2
    res = parse_document(json.loads(gzip.decompress(path.read_bytes())), str(path))
    rows = [r for r in res.rows if r["op"] != "barrier"]
    assert [g[3] for g in gloo] != [r["in_nelems"] for r in rows]
    assert res.meta["gloo_matched"]
    # every call took one annotation of its size and element type: the same multiset, each annotation once,
    # and each call's time is its annotation's
    assert Counter((r["in_nelems"], r["dtype"]) for r in rows) == Counter((g[3], DTYPES[g[4]]) for g in gloo)
    by_start = sorted(rows, key=lambda r: r["worker_start_s"])
    assert [r["in_nelems"] for r in by_start] == [g[3] for g in gloo]
    for r, g in zip(by_start, gloo, strict=True):
        assert r["worker_start_s"] == pytest.approx(g[0] * 1e-6, abs=1e-9)
        assert r["duration_s"] == pytest.approx(g[1] * 1e-6, abs=1e-9)
    assert all(r["worker_start_s"] >= r["cpu_start_s"] for r in rows)
    # each call keeps its own start, the order the rank issued them in
    assert all(r["start_s"] == r["cpu_start_s"] for r in rows)
    assert [r["start_s"] for r in rows] == sorted(r["start_s"] for r in rows)


def _trace(calls, annotations):
    """A minimal trace: c10d all-reduces on the main thread at (ts, elements), gloo annotations on worker
    threads at (ts, elements, thread)."""
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0,
           "dur": 1000}]
    ev += [{"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 1, "tid": 1, "ts": ts, "dur": 1,
            "args": {"Input Dims": [[[n]], [], [], [], [], []],
                     "Input type": ["TensorList", "", "", "", "", ""]}} for ts, n in calls]
    ev += [{"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 1, "tid": t, "ts": ts,
            "dur": 50, "args": {"Input Dims": [[n]], "Input type": ["float"]}} for ts, n, t in annotations]
    return {"traceEvents": ev, "distributedInfo": {"backend": "gloo", "rank": 0, "world_size": 2}}


def test_two_workers_opening_in_the_other_order_pair_by_size():
    res = parse_document(_trace([(10, 100), (13, 200)], [(20.5, 200, 7), (20.6, 100, 8)]), "t.json")
    assert res.meta["gloo_matched"]
    assert [(r["in_nelems"], r["dtype"]) for r in res.rows] == [(100, "fp32"), (200, "fp32")]
    assert [r["worker_start_s"] for r in res.rows] == pytest.approx([20.6e-6, 20.5e-6])


def test_no_annotation_pairs_with_a_call_issued_after_it_or_beyond_the_workers_reach():
    # the size-200 annotation opens before its call was issued: no pairing at all (all-or-nothing)
    res = parse_document(_trace([(10, 100), (30, 200)], [(20.5, 200, 7), (31, 100, 8)]), "t.json")
    assert not res.meta["gloo_matched"] and all(r["dtype"] is None for r in res.rows)
    # two worker threads reach two annotations ahead, not three
    res = parse_document(_trace([(10, 100), (13, 200), (16, 300)],
                                [(20, 200, 7), (21, 300, 8), (22, 100, 7)]), "t.json")
    assert not res.meta["gloo_matched"]
