"""Reentrant activation checkpointing under sharded schemes: the all-gathers its recompute adds are named and
reported apart, the rest checks as the scheme that ran.

Expected values are the real runs' counts (tests/data/traces/real-runs/README.md, expected.json, counted by
count_calls.py from the traces with plain json/gzip), priced under the ring accounting: a rank sends
(p-1)/p of an all-gather's or a reduce-scatter's vector (Thakur, Rabenseifner & Gropp 2005).
"""

import gzip
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from real_runs import gathered_and_scattered

from zerocalc.traces import read_traces
from zerocalc.traces.kineto import parse_bytes, parse_document
from zerocalc.validate import check
from zerocalc.validate.columns import Rows
from zerocalc.validate.recompute import extra_gathers

RUNS = Path(__file__).parent / "data" / "traces" / "real-runs"
PSI = 24_768 + 30_880 + 15_456  # the MLP's three layers (README: Ψ = 71,104)
LAYER1 = 30_880  # layers.1, the checkpointed one


def _counted(case: str) -> list[tuple[Counter, list[str]]]:
    """Per rank and step: the elements it all-gathers and reduce-scatters, and the all-gathers counted in a
    checkpoint's recompute."""
    return [(per, s.get("recompute_gathers", [])) for s, per in gathered_and_scattered(case)]


@pytest.mark.parametrize(("case", "scheme"), [("fsdp1-reentrant-checkpoint", "fsdp-full-shard"),
                                              ("ds-zero3-reuse0-reentrant-checkpoint", "deepspeed-zero3")])
@pytest.mark.parametrize("psi", [None, PSI])
def test_a_unit_gathered_again_by_the_recompute_is_reported_apart(case, scheme, psi):
    # counted: every step of every rank gathers each unit for the forward and the backward, and layers.1 once
    # more, inside CheckpointFunctionBackward; Ψ reduce-scattered
    for per, again in _counted(case):
        assert per["all_gather"] == 2 * PSI + LAYER1
        assert per["reduce_scatter"] == PSI
        assert again == [again[0]] and again[0].endswith(f"{LAYER1 // 4} in CheckpointFunctionBackward")
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta, psi=psi)
    m = res.measurement
    assert (m.psi, m.n, m.micro_batches) == (PSI, 4, 1)
    # the step: 2Ψ gathered and Ψ reduce-scattered, fp32, 3/4 of each sent; the recompute's gather apart
    assert m.bytes_per_rank_per_step == pytest.approx(3 * PSI * 3 / 4 * 4, rel=1e-9)
    cats = m.categories.set_index("category")["bytes_per_rank_per_step"]
    assert cats["unexplained"] == pytest.approx(LAYER1 * 3 / 4 * 4, rel=1e-9)
    # before: no scheme (FSDP1's read as frozen parameters gathered and never reduced)
    assert scheme in res.matches and "zero3" in res.matches and not res.frozen
    note = next(n for n in m.notes if "recompute" in n)
    assert f"({LAYER1:,} elements)" in note and "pytorch/pytorch#105635" in note
    assert res.as_dict()["recompute_gathered_elements_per_rank_per_step"] == LAYER1


def test_a_prefetch_inside_the_checkpoints_node_is_the_backwards_own_gather():
    # GPT-2 under FSDP1 with Hugging Face's reentrant gradient checkpointing: counted, each step gathers the
    # root once (kept for the backward) and each block twice, no gather in a recompute: FSDP1 prefetched each
    # block for its backward (the second block's prefetch runs inside the first's checkpoint node, in a
    # _pre_backward_hook)
    root, block = 9_248 * 4, 12_496 * 4
    for per, again in _counted("fsdp1-gpt2-reentrant-checkpoint"):
        assert per["all_gather"] == root + 4 * block and not again
    data = gzip.decompress((RUNS / "fsdp1-gpt2-reentrant-checkpoint" / "rank0.json.gz").read_bytes())
    rows = parse_bytes(data, "r0").rows
    assert not any(r.get("recompute_op") for r in rows)
    ts = read_traces(RUNS / "fsdp1-gpt2-reentrant-checkpoint")
    res = check(ts.table, meta=ts.meta)
    cats = res.measurement.categories.set_index("category")["bytes_per_rank_per_step"]
    assert cats["unexplained"] == 0
    assert not any("recompute" in n for n in (*res.notes, *res.measurement.notes))
    assert "fsdp-full-shard" in res.partly_kept  # the root kept, as without checkpointing
    assert res.as_dict()["recompute_gathered_elements_per_rank_per_step"] is None


def _trace(events: list[dict]) -> bytes:
    return json.dumps({"distributedInfo": {"rank": 0, "world_size": 4}, "traceEvents": [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": 1000, "pid": 1,
         "tid": 1},
        *({"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1, **e} for e in events)]}).encode()


def _gather(ts: float) -> dict:
    return {"name": "c10d::_allgather_base_", "ts": ts, "dur": 5,
            "args": {"Input Dims": [[400], [100]], "Input type": ["float", "float"]}}


def test_the_reader_names_the_gathers_of_a_recompute_and_no_other():
    # by hand, a reentrant checkpoint's node holding: the recomputed forward's gather (under FSDP1's
    # _pre_forward), a backward hook's prefetch, and a gather inside a node nested in it
    node = "autograd::engine::evaluate_function: CheckpointFunctionBackward"
    events = [
        {"name": node, "ts": 100, "dur": 500}, {"name": "CheckpointFunctionBackward", "ts": 101, "dur": 498},
        {"name": "FullyShardedDataParallel._pre_forward", "ts": 110, "dur": 20}, _gather(112),
        {"name": "FullyShardedDataParallel._pre_backward_hook", "ts": 200, "dur": 20}, _gather(205),
        {"name": "autograd::engine::evaluate_function: AddmmBackward0", "ts": 300, "dur": 50}, _gather(310),
        _gather(700),  # after the node
    ]
    data = _trace(events)
    for parsed in (parse_bytes(data, "t.json"), parse_document(json.loads(data), "t.json")):  # fast, full
        rows = sorted(parsed.rows, key=lambda r: r["cpu_start_s"])
        assert [r.get("recompute_op") for r in rows] == ["CheckpointFunctionBackward", None, None, None]


@pytest.mark.parametrize(("marks", "extra"), [
    # recompute, then the unit's own backward gather: the recompute's is extra
    ([True, False], [True, False]),
    # units of one size each gathered once in the backward, by its recompute: none extra
    ([True, True], [False, False]),
    # the recompute's gather the last of its size: none extra
    ([False, True], [False, False]),
])
def test_a_recompute_gather_is_extra_only_before_the_units_own(marks, extra):
    table = pd.DataFrame({"op": ["all_gather"] * 2, "cpu_start_s": [1.0, 2.0],
                          "recompute_op": ["CheckpointFunctionBackward" if m else None for m in marks]})
    rows = Rows(table, np.arange(2))
    got = extra_gathers(rows, rows.codes("op"), np.array([400.0, 400.0]), np.array([4.0, 4.0]),
                        np.zeros(2, dtype=np.int64), np.zeros(2, dtype=np.int64))
    assert got.tolist() == extra
