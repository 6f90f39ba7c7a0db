"""validate.columns and the stages on compact columns: each helper against its pandas or brute-force
definition on random input, and the check of a table with ``category`` string columns against the same
table with plain string columns (the readers may return either).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from zerocalc.traces import read_traces
from zerocalc.traces.schema import CANONICAL_COLUMNS
from zerocalc.validate import check, measure
from zerocalc.validate import columns as C
from zerocalc.validate.ranks import _lexsort_nan_last

DATA = Path(__file__).parent / "data" / "traces"


def _runs(rng: random.Random, n_runs: int) -> tuple[np.ndarray, np.ndarray]:
    """Random runs of codes, drawn from a few patterns so that many repeat."""
    patterns = [[rng.randrange(4) for _ in range(rng.randrange(1, 7))] for _ in range(5)]
    runs = [list(rng.choice(patterns)) if rng.random() < 0.8 else [rng.randrange(4)] * rng.randrange(1, 4)
            for _ in range(n_runs)]
    codes = np.array([c for r in runs for c in r], dtype=np.int64)
    bounds = np.concatenate([[0], np.cumsum([len(r) for r in runs])])
    return codes, bounds


def test_distinct_runs_points_each_run_at_the_first_equal_one():
    rng = random.Random(0)
    for _ in range(20):
        codes, bounds = _runs(rng, rng.randrange(1, 60))
        runs = [tuple(codes[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        first = {}
        expected = [first.setdefault(r, i) for i, r in enumerate(runs)]
        assert C.distinct_runs(codes, bounds).tolist() == expected


def test_distinct_runs_stays_exact_when_every_hash_collides(monkeypatch):
    # multipliers of 0: every run of a length hashes alike; the element-wise check must split them
    monkeypatch.setattr(C, "_MULT", (np.uint64(0), np.uint64(0)))
    rng = random.Random(1)
    codes, bounds = _runs(rng, 80)
    runs = [tuple(codes[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    rep = C.distinct_runs(codes, bounds).tolist()
    assert all(runs[r] == runs[i] and r <= i for i, r in enumerate(rep))
    assert len(set(rep)) < len(rep)  # equal runs still share a representative where the check holds


def test_group_codes_and_first_rows_follow_pandas():
    rng = np.random.default_rng(2)
    a = rng.integers(0, 4, 500)
    b = rng.choice([1.5, 2.0, np.nan], 500)
    c = rng.integers(-1, 3, 500).astype(np.int8)
    d = rng.choice([4.0, 128.0, np.nan], 500)  # whole numbers of a small range, and NaN
    e = rng.choice([1e12, 3.0, 7e15], 500)  # whole numbers of a wide range
    code, k = C.group_codes(a, b, c, d, e)
    want = (pd.DataFrame({"a": a, "b": b, "c": c, "d": d, "e": e})
            .groupby(["a", "b", "c", "d", "e"], sort=False, dropna=False).ngroup())
    assert code.tolist() == want.tolist() and k == want.max() + 1
    for one in (a, d, e):
        assert C.group_codes(one)[0].tolist() == pd.factorize(one, use_na_sentinel=False)[0].tolist()
    assert C.first_rows(code).tolist() == np.unique(code, return_index=True)[1].tolist()


def test_group_sums_are_pandas_groupby_sums_to_the_bit():
    rng = np.random.default_rng(4)
    key = rng.integers(0, 40, 2000) * 7
    vals = rng.random(2000) * 1e9 / 3  # not whole numbers: the summation order shows in the last bits
    vals[rng.random(2000) < 0.1] = np.nan
    labels, k = C.sorted_labels(key)
    assert labels.tolist() == pd.factorize(key, sort=True)[0].tolist() and k == len(np.unique(key))
    whole = np.floor(rng.random(2000) * 1e12)  # whole numbers: summed exactly, by bincount
    got = C.group_sums(labels, k, {"v": vals, "w": whole}, min_count=1)
    for name, v in (("v", vals), ("w", whole)):
        want = pd.Series(v).groupby(key).sum(min_count=1)
        assert got[name].to_numpy().tobytes() == want.to_numpy().tobytes()
    assert got["size"].tolist() == pd.Series(vals).groupby(key).size().tolist()


def test_codes_of_string_and_category_columns_agree():
    s = pd.Series(["fp32", None, "bf16", "fp32", "?"], dtype="string")
    for col in (s, s.astype("category"), s.astype(object)):
        codes = C.string_codes(col)
        assert codes.labels("<none>").tolist() == ["fp32", "<none>", "bf16", "fp32", "?"]
        assert codes.isin(["fp32", "?"]).tolist() == [True, False, False, True, True]
        assert codes.filled("?").labels("x").tolist() == ["fp32", "?", "bf16", "fp32", "?"]
        assert codes.present(na="none") == [n for n in codes.names if n in {"fp32", "bf16", "?"}] + ["none"]


def test_rank_order_is_pandas_stable_sort_with_nan_last():
    rng = np.random.default_rng(3)
    for layout in ("log", "per rank", "shuffled"):
        rank = rng.integers(0, 5, 300)
        start = rng.choice([0.5, 1.0, 2.0, np.nan], 300)
        line = rng.integers(0, 50, 300).astype(float)
        if layout == "log":  # one log's line order: in order over the whole trace
            start, line = np.full(300, np.nan), np.arange(300, dtype=float)
        if layout == "per rank":  # each rank's rows in order, the ranks' times interleaved out of order
            start = np.where(rng.random(300) < 0.1, np.nan, 0.0)
            line = np.array([(rank[:i] == rank[i]).sum() * 10.0 - rank[i] for i in range(300)])
        df = pd.DataFrame({"r": rank, "s": start, "l": line})
        want = df.sort_values(["r", "s", "l"], kind="stable", na_position="last").index.to_numpy()
        assert _lexsort_nan_last([rank, start, line]).tolist() == want.tolist()


@pytest.mark.parametrize("trace", [
    "nccl-debug/ddp-allreduce-128ranks-L4-ray.txt",
    "nccl-debug/tp-allgather-reducescatter-2ranks.txt",
    "kineto/dlrm-v100-8ranks",
    "real-runs/hsdp-2x2",
    "real-runs/ds-zero3-ga4",
    "deepspeed-gloo-zero3-n4/no-step-markers",
])
def test_check_is_the_same_on_category_columns(trace):
    ts = read_traces(DATA / trace)
    cat = ts.table.copy()
    for name in cat.columns:
        if cat[name].dtype == object or isinstance(cat[name].dtype, pd.StringDtype):
            cat[name] = cat[name].astype("category")
    assert any(isinstance(d, pd.CategoricalDtype) for d in cat.dtypes)
    plain = check(ts.table, meta=ts.meta)
    as_cat = check(cat, meta=ts.meta)
    assert json.dumps(as_cat.as_dict(), default=str) == json.dumps(plain.as_dict(), default=str)
    assert as_cat.measurement.calls["category"].tolist() == plain.measurement.calls["category"].tolist()


def test_pattern_order_is_the_most_common_over_ranks_and_steps():
    # 3 ranks × 3 marked steps of one all-gather and one reduce-scatter of 3,000 fp32 elements on 3
    # ranks; rank 0 gathers first, ranks 1 and 2 reduce first: two orders, (reduce-scatter, all-gather)
    # in 6 of the 9 (rank, step) pairs
    rows = []
    for rank in range(3):
        for step in range(3):
            ops = ["all_gather", "reduce_scatter"] if rank == 0 else ["reduce_scatter", "all_gather"]
            for op in ops:
                shard, full = 1000, 3000
                rows.append({"file": f"rank{rank}", "rank": rank, "step": step, "op": op, "dtype": "fp32",
                             "elem_bytes": 4, "in_nelems": shard if op == "all_gather" else full,
                             "out_nelems": full if op == "all_gather" else shard, "group_size": 3,
                             "source_line": len(rows)})
    table = pd.DataFrame(rows).reindex(columns=list(CANONICAL_COLUMNS)).astype(CANONICAL_COLUMNS)
    m = measure(table)
    assert m.order_variants == 2
    # per rank and step: one call of each, 3,000 elements, 2/3 · 12,000 B = 8,000 B sent
    assert m.pattern == (("reduce_scatter", 1.0, 3000.0, 8000.0), ("all_gather", 1.0, 3000.0, 8000.0))


def test_group_ranges_are_each_labels_least_and_greatest_without_nan():
    from zerocalc.validate.columns import group_ranges

    labels = np.array([0, 1, 0, 2, 1, 0])
    values = np.array([5.0, np.nan, -1.0, np.nan, 7.0, 3.0])
    lo, hi = group_ranges(labels, 4, values)
    # label 0: 5, -1, 3; label 1: 7 (its NaN left out); label 2: only NaN; label 3: no rows
    assert lo.tolist() == [-1.0, 7.0, np.inf, np.inf]
    assert hi.tolist() == [5.0, 7.0, -np.inf, -np.inf]
