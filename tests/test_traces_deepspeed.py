"""DeepSpeed comms logs, and the gloo ZeRO-3 traces checked against the run's own comms summary."""

from pathlib import Path

from zerocalc.traces import read_traces

DATA = Path(__file__).parent / "data" / "traces"


def _convert_size(n_bytes: int) -> str:
    """DeepSpeed utils/comms_logging.py convert_size: 1024-based units, rounded to 2 decimals."""
    if n_bytes == 0:
        return "0 B"
    units = ("B", "KB", "MB", "GB", "TB")
    i = 0
    while n_bytes >= 1024 ** (i + 1) and i < len(units) - 1:
        i += 1
    return f"{round(n_bytes / 1024**i, 2)} {units[i]}"


def test_tutorial_verbose_and_summary():
    ts = read_traces(DATA / "deepspeed-comms" / "tutorial-examples.txt")
    t = ts.table
    assert ts.skipped.count == 0
    verbose = t[t["summary"].isna()]
    assert list(verbose["op"]) == ["reduce_scatter", "all_gather", "all_gather"]
    assert list(verbose["duration_s"].round(6)) == [0.00946, 0.00011, 0.00008]
    assert set(verbose["rank"]) == {0}
    assert verbose["msg_size_bytes"].iloc[0] == 678.86 * 1024**2
    summ = t[t["summary"].notna()]
    # two tables: broadcast 146 + 1, reduce_scatter_tensor 40; then 146 + 1, 80
    assert (summ["op"] == "broadcast").sum() == 2 * (146 + 1)
    assert (summ["op"] == "reduce_scatter").sum() == 40 + 80
    assert summ["duration_s"].isna().all() and summ["in_nelems"].isna().all() and summ["dtype"].isna().all()
    assert set(summ.loc[summ["caller"].notna(), "caller"]) == {"_broadcast_model", "reduce_scatter_fn"}


def test_gloo_traces_agree_with_comms_summary():
    d = DATA / "deepspeed-gloo-zero3-n4"
    summary = read_traces(d / "comms-summary.txt").table
    ops = {"all_gather_into_tensor": "all_gather", "reduce_scatter_tensor": "reduce_scatter",
           "all_reduce": "all_reduce", "broadcast": "broadcast"}
    printed = {(ops.get(n, n), s): c for (n, s), c in summary.groupby(["op_name", "msg_size"]).size().items()}
    trace = read_traces([d / f"rank{r}.json.gz" for r in range(4)]).table
    r0 = trace[trace["rank"] == 0]
    # DeepSpeed sizes the input tensor: all-gather's shard, reduce-scatter's full input
    seen = {}
    for r in r0.itertuples():
        key = (r.op, _convert_size(int(r.in_nelems) * int(r.elem_bytes)))
        seen[key] = seen.get(key, 0) + 1
    assert seen == {
        ("all_gather", "369.0 KB"): 3,  # 94464 fp32 = 377856 B = 369.0 KiB
        ("reduce_scatter", "1.44 MB"): 3,  # 377856 fp32 = 1511424 B = 1.44 MiB
        ("all_reduce", "8.0 B"): 3,  # one fp64 scalar
        ("broadcast", "8.0 B"): 3,  # one int64
        ("broadcast", "96.0 B"): 3,  # 12 int64
    }
    for key, n in seen.items():
        # the summary covers the warm-up step and initialisation too: at least as many calls
        assert printed[key] >= n, key
    assert printed[("reduce_scatter", "1.44 MB")] == 3 + 1  # 3 profiled + 1 warm-up step
