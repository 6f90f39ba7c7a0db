"""nccl-tests output: every row's printed busbw is recomputed from size, time and group size."""

from pathlib import Path

import orjson
import pytest

from zerocalc.traces import read_traces

DATA = Path(__file__).parent / "data" / "traces" / "nccl-tests"


def _busbw(op: str, size_bytes: int, time_s: float, p: int) -> float:
    """nccl-tests doc/PERFORMANCE.md: algbw = size / time; busbw = algbw × factor(op, p), GB = 1e9."""
    factor = {"all_reduce": 2 * (p - 1) / p, "all_gather": (p - 1) / p, "reduce_scatter": (p - 1) / p}[op]
    return size_bytes / time_s / 1e9 * factor


@pytest.mark.parametrize(
    ("name", "op", "p", "rows"),
    [
        ("all_reduce_perf-16xH100-2nodes.txt", "all_reduce", 16, 31),  # 8 B .. 8 GiB by x2: 31 sizes
        ("all_gather_perf-bf16-2gpu.txt", "all_gather", 2, 18),  # 7 + 11 rows
        ("all_gather_perf-oldformat-8ranks.txt", "all_gather", 8, 13),  # 64 KiB .. 256 MiB by x2
    ],
)
def test_busbw_recomputed_within_rounding(name, op, p, rows):
    t = read_traces(DATA / name).table
    assert len(t) == rows
    assert set(t["op"]) == {op} and set(t["group_size"]) == {p}
    for r in t.itertuples():
        # printed with 2 decimals; time printed with >= 4 significant digits
        for dur, printed in ((r.duration_s, r.busbw_GBps), (r.inplace_duration_s, r.inplace_busbw_GBps)):
            assert _busbw(op, r.size_bytes, dur, p) == pytest.approx(printed, rel=2e-3, abs=0.0051)
        assert r.in_nelems * r.elem_bytes * (p if op == "all_gather" else 1) == r.size_bytes


def test_first_rows_by_hand():
    t = read_traces(DATA / "all_gather_perf-bf16-2gpu.txt").table
    first = t.iloc[0]
    # "16777216  4194304  bfloat16  none  -1  108.8  154.20  77.10  0  98.19 ..."
    assert (first["dtype"], first["elem_bytes"], first["in_nelems"], first["out_nelems"]) == (
        "bf16", 2, 4194304, 8388608)
    assert first["duration_s"] == pytest.approx(108.8e-6)
    assert first["inplace_duration_s"] == pytest.approx(98.19e-6)
    old = read_traces(DATA / "all_gather_perf-oldformat-8ranks.txt").table
    assert old["layout"].iloc[0] == "pre2022" and old["redop"].isna().all()


def test_json_report(tmp_path):
    # Keys as written by nccl-tests src/util.cu (JSON_FILE_VERSION 2); the numbers are the first
    # out-of-place/in-place row of all_reduce_perf-16xH100-2nodes.txt.
    doc = {
        "version": 2, "args": ["/opt/src/nccl-tests/build/all_reduce_perf", "-b", "8"],
        "config": {"ngpus": 1, "devices": [{"rank": i} for i in range(16)]},
        "results": [{"size": 8589934592, "count": 2147483648, "type": "float", "redop": "sum",
                     "root": "    -1", "out_of_place": {"time": 47535.0, "alg_bw": 180.71, "bus_bw": 338.82,
                                                       "nwrong": 0.0},
                     "in_place": {"time": 47743.0, "alg_bw": 179.92, "bus_bw": 337.35, "nwrong": 0.0}}],
    }
    f = tmp_path / "report.json"
    f.write_bytes(orjson.dumps(doc))
    (row,) = read_traces(f).table.itertuples()
    assert row.op == "all_reduce" and row.group_size == 16 and row.root == -1
    assert _busbw("all_reduce", row.size_bytes, row.duration_s, 16) == pytest.approx(row.busbw_GBps, rel=2e-3)
