"""Which all-reduces of a gloo Flight Recorder dump stand for reduce-scatters, on hand-written tables: an
all-reduce of the whole an all-gather of the same rank returns on the same group (ProcessGroupGloo runs a
reduce-scatter as an all-reduce of the whole input), larger than a scalar, in a gloo dump."""

from __future__ import annotations

import numpy as np
import pandas as pd

from zerocalc.traces.schema import CANONICAL_COLUMNS
from zerocalc.validate.gloo_dumps import as_reduce_scatters, stand_ins

META = {"gloo0": {"format": "flight_recorder", "backend": "gloo"},
        "nccl0": {"format": "flight_recorder", "backend": "nccl"},
        "kineto0": {"format": "kineto", "backend": "gloo"}}


def _table(rows: list[tuple]) -> pd.DataFrame:
    t = pd.DataFrame([dict(zip(("file", "rank", "op", "in_nelems", "out_nelems", "group_size", "group"), r,
                               strict=True)) for r in rows])
    for col in t.columns:
        t[col] = t[col].astype(CANONICAL_COLUMNS[col])
    return t


def test_the_all_reduce_of_a_gathers_whole_on_its_group_stands_for_a_reduce_scatter():
    t = _table([
        ("gloo0", 0, "all_gather", 250, 1000, 4, "0"),  # a unit's parameters, gathered on group 0
        ("gloo0", 0, "all_reduce", 1000, 1000, 4, "0"),  # its gradient: the reduce-scatter, as gloo runs it
        ("gloo0", 0, "all_reduce", 1000, 1000, 2, "1"),  # the same size on another group: an all-reduce
        ("gloo0", 0, "all_reduce", 500, 500, 4, "0"),  # no gather returns 500 elements: an all-reduce
        ("gloo0", 0, "all_gather", 2, 8, 4, "0"),
        ("gloo0", 0, "all_reduce", 8, 8, 4, "0"),  # a scalar's size: flags, a norm
        ("gloo0", 1, "all_reduce", 1000, 1000, 4, "0"),  # rank 1 gathers nothing of that size
        ("nccl0", 0, "all_gather", 250, 1000, 4, "0"),
        ("nccl0", 0, "all_reduce", 1000, 1000, 4, "0"),  # NCCL records its reduce-scatters as such
        ("kineto0", 0, "all_gather", 250, 1000, 4, "0"),
        ("kineto0", 0, "all_reduce", 1000, 1000, 4, "0"),  # a profiler trace names c10d's call
    ])
    assert stand_ins(t, META).tolist() == [False, True] + [False] * 9
    assert not stand_ins(t, None).any()


def test_a_stand_in_reads_as_the_reduce_scatter_of_the_whole_into_the_ranks_part():
    t = _table([("gloo0", 0, "all_gather", 250, 1000, 4, "0"),
                ("gloo0", 0, "all_reduce", 1000, 1000, 4, "0")])
    read = as_reduce_scatters(t, stand_ins(t, META))
    assert read["op"].astype(str).tolist() == ["all_gather", "reduce_scatter"]
    assert read["in_nelems"].tolist() == [250, 1000] and read["out_nelems"].tolist() == [1000, 250]
    assert t["op"].astype(str).tolist() == ["all_gather", "all_reduce"]  # the table read is left as it was
    # rows found by position, whatever the index (tables read together may repeat labels)
    t.index = [7, 7]
    read = as_reduce_scatters(t, np.array([False, True]))
    assert read["op"].astype(str).tolist() == ["all_gather", "reduce_scatter"]
    assert read["out_nelems"].tolist() == [1000, 250]


def test_unsized_a_bucket_of_several_gathers_stands_for_a_reduce_scatter_but_a_loss_does_not():
    # DeepSpeed ZeRO-3 gathers its layers one by one (outputs 400 and 600) and reduces them in one bucket of
    # 1,000: no gather returns 1,000, so only unsized is it taken; a 12-element loss beside it (under 1/64 of
    # the largest all-reduce there) and an all-reduce on a group nothing is gathered on never are
    t = _table([
        ("gloo0", 0, "all_gather", 100, 400, 4, "0"),
        ("gloo0", 0, "all_gather", 150, 600, 4, "0"),
        ("gloo0", 0, "all_reduce", 1000, 1000, 4, "0"),
        ("gloo0", 0, "all_reduce", 12, 12, 4, "0"),
        ("gloo0", 0, "all_reduce", 1000, 1000, 2, "1"),
    ])
    assert stand_ins(t, META).tolist() == [False] * 5
    assert stand_ins(t, META, sized=False).tolist() == [False, False, True, False, False]


def _dump(calls: list[tuple], first_record: int = 0, file: str = "gloo0") -> pd.DataFrame:
    """One gloo dump's calls ((op, elements, dtype)) as the table holds them, its records numbered from
    ``first_record``."""
    t = _table([(file, 0, op, n, n * 4 if op == "all_gather" else n, 4, "0") for op, n, _ in calls])
    t["dtype"] = pd.Series([d for _, _, d in calls], dtype="category")
    t["record"] = pd.Series(range(first_record, first_record + len(calls)), dtype="Int64")
    return t


def test_a_dump_opens_with_gathers_where_its_first_data_call_is_an_all_gather():
    from zerocalc.validate.gloo_dumps import opens_with_gathers

    fsdp = [("broadcast", 5000, "fp32"), ("all_gather", 250, "fp32"), ("all_reduce", 1000, "fp32")]
    assert opens_with_gathers(_dump(fsdp), META)
    # DeepSpeed ZeRO-1/-2: the first micro-batch's bucket all-reduced before the updated shards are gathered
    deepspeed = [("broadcast", 5000, "fp32"), ("all_reduce", 1000, "fp32"), ("all_gather", 250, "fp32")]
    assert not opens_with_gathers(_dump(deepspeed), META)
    # a scalar gathered first (a rank's flag) and pickled bytes gathered (an object) are no data
    assert not opens_with_gathers(_dump([("all_gather", 1, "fp32")] + deepspeed), META)
    assert not opens_with_gathers(_dump([("all_gather", 300, "uint8")] + deepspeed), META)
    # a ring buffer that has wrapped holds no first call: nothing is known of how the run opened
    assert not opens_with_gathers(_dump(fsdp, first_record=2000), META)
    # every dump read must open so; a profiler trace or an NCCL dump is none of this
    both = pd.concat([_dump(fsdp), _dump(deepspeed, file="gloo1")], ignore_index=True)
    meta = {**META, "gloo1": META["gloo0"]}
    assert not opens_with_gathers(both, meta)
    assert not opens_with_gathers(_dump(fsdp, file="nccl0"), META)


def test_a_gather_of_token_ids_or_on_a_group_it_reduces_nothing_on_opens_no_sharded_forward():
    from zerocalc.validate.gloo_dumps import opens_with_gathers

    deepspeed = [("broadcast", 5000, "fp32"), ("all_reduce", 1000, "fp32"), ("all_gather", 250, "fp32")]
    # sequence parallelism gathers the micro-batch's positions (int64) before DeepSpeed ZeRO-2 reduces
    assert not opens_with_gathers(_dump([("all_gather", 32, "int64")] + deepspeed), META)
    # and its activations on the rank's pair, a group no gradient is reduced on
    t = _dump([("all_gather", 512, "fp32")] + deepspeed)
    t["group"] = pd.Series(["1"] + ["0"] * len(deepspeed), dtype="category")
    assert not opens_with_gathers(t, META)
    # a float gather on the group the rank reduces on is a sharded forward's, as before
    t["group"] = pd.Series(["0"] * (len(deepspeed) + 1), dtype="category")
    assert opens_with_gathers(t, META)
