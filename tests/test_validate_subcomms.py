"""Sub-communicators in NCCL logs, byte-only DeepSpeed comms-logger rows, skewed timings, option checks.

The NCCL logs are written here in the line layout of tests/data/traces/nccl-debug (NCCL's own format
strings: init.cc ``comm %p rank %d nranks %d ... - Init COMPLETE``, enqueue.cc COLL line); expected
values are derived by hand in each test.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.errors import TraceMismatchError
from zerocalc.traces import read_traces
from zerocalc.validate import check

DATA = Path(__file__).parent / "data" / "traces"
BF16 = 9  # NCCL datatype code of bfloat16


def _init(pid: int, comm: int, rank: int, nranks: int) -> str:
    dev = pid % 100
    return (f"node0:{pid}:{pid + 5} [{dev}] NCCL INFO comm 0x{comm:x} rank {rank} nranks {nranks} "
            f"cudaDev {dev} nvmlDev {dev} busId 1000 commId 0x1 - Init COMPLETE")


def _coll(pid: int, opcount: int, count: int, comm: int, nranks: int, op: str = "AllReduce") -> str:
    return (f"node0:{pid}:{pid + 5} [{pid % 100}] NCCL INFO {op}: opCount {opcount:x} "
            f"sendbuff 0x7f0000000000 recvbuff 0x7f0000100000 count {count} datatype {BF16} op 0 root 0 "
            f"comm 0x{comm:x} [nranks={nranks}] stream 0x55000000")


def _tp_dp_log(path: Path) -> Path:
    """8 processes (pids 200–207 = global ranks 0–7): a world comm of 8, TP comms of 2 (ranks 2k, 2k+1:
    rank in TP = r mod 2), DP comms of 4 (ranks of equal r mod 2: rank in DP = r // 2). Per step:
    4 TP all-reduces of 16M bf16 elements (activations), 1 DP all-reduce of 3M (the rank's gradients)."""
    lines = []
    for r in range(8):
        lines += [_init(200 + r, 0x6000 + r, r, 8), _init(200 + r, 0x7000 + r, r % 2, 2),
                  _init(200 + r, 0x8000 + r, r // 2, 4)]
    opc = {}
    for _step in range(3):
        for _ in range(4):
            for r in range(8):
                k = opc.get((r, "tp"), 0)
                lines.append(_coll(200 + r, k, 16_000_000, 0x7000 + r, 2))
                opc[(r, "tp")] = k + 1
        for r in range(8):
            k = opc.get((r, "dp"), 0)
            lines.append(_coll(200 + r, k, 3_000_000, 0x8000 + r, 4))
            opc[(r, "dp")] = k + 1
    path.write_text("\n".join(lines) + "\n")
    return path


def _pp_dp_log(path: Path) -> Path:
    """8 processes (pids 400–407), two pipeline stages, each a DP comm of 4 (rank in it: p mod 4); no
    world comm. Per step each process all-reduces 2M then 1M bf16 elements of its stage's gradients."""
    lines = [_init(400 + p, 0xA000 + p, p % 4, 4) for p in range(8)]
    opc = [0] * 8
    for _step in range(3):
        for count in (2_000_000, 1_000_000):
            for p in range(8):
                lines.append(_coll(400 + p, opc[p], count, 0xA000 + p, 4))
                opc[p] += 1
    path.write_text("\n".join(lines) + "\n")
    return path


def test_rank_is_the_world_rank_not_the_rank_in_the_sub_communicator(tmp_path):
    ts = read_traces(_tp_dp_log(tmp_path / "tp_dp.log"))
    t = ts.table
    # every process's rank is its rank in the comm of 8: pid 200 + r is rank r
    assert sorted(set(zip(t["pid"], t["rank"], strict=True))) == [(200 + r, r) for r in range(8)]
    # each call keeps its own comm's size and the rank within that comm
    tp, dp = t[t["group_size"] == 2], t[t["group_size"] == 4]
    assert len(tp) == 3 * 4 * 8 and len(dp) == 3 * 8 and len(t) == len(tp) + len(dp)
    assert (tp["comm_rank"] == tp["rank"] % 2).all()
    assert (dp["comm_rank"] == dp["rank"] // 2).all()
    assert ts.meta[str(tmp_path / "tp_dp.log")]["world_size"] == 8


def test_no_world_communicator_leaves_the_rank_missing(tmp_path):
    ts = read_traces(_pp_dp_log(tmp_path / "pp_dp.log"))
    # two comms of 4 give ranks 0–3 twice: no global rank, and 8 processes cannot be a world of 4
    assert ts.table["rank"].isna().all()
    assert ts.meta[str(tmp_path / "pp_dp.log")]["world_size"] is None


def test_check_pipeline_by_data_parallel_counts_eight_ranks(tmp_path):
    ts = read_traces(_pp_dp_log(tmp_path / "pp_dp.log"))
    m = check(ts.table, meta=ts.meta).measurement
    assert m.ranks == tuple(range(8))  # told apart by process
    assert m.n == 4
    assert m.psi == 3_000_000  # 2M + 1M per step per process
    # ring all-reduce on 4: 2·(4−1)/4 · 3M elements · 2 B = 9,000,000 B per rank per step
    assert m.bytes_per_rank_per_step == pytest.approx(9_000_000)
    assert "8 ranks in all" in m.n_how


def test_check_tensor_by_data_parallel_takes_the_strided_groups_as_n(tmp_path):
    ts = read_traces(_tp_dp_log(tmp_path / "tp_dp.log"))
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert m.ranks == tuple(range(8))
    assert m.n == 4 and "groups of 2 ranks are consecutive global ranks" in m.n_how
    assert m.psi == 3_000_000
    assert m.bytes_per_rank_per_step == pytest.approx(2 * 3 / 4 * 3_000_000 * 2)  # 9 MB
    cats = m.categories.set_index("category")
    # the TP all-reduces, reported apart: 4 × 2·(2−1)/2 · 16M · 2 B = 128,000,000 B per rank per step
    assert cats.at["unexplained", "bytes_per_rank_per_step"] == pytest.approx(128_000_000)
    assert any("all-reduce on 2 ranks" in s for s in m.notes)
    assert "dp" in res.matches


DS = DATA / "deepspeed-comms" / "tutorial-examples.txt"


def test_comms_logger_sizes_are_used_not_taken_as_scalars():
    ts = read_traces(DS)
    res = check(ts.table, meta=ts.meta, n=8, psi=1_000_000_000)
    m = res.measurement
    calls = m.calls
    # the file's three verbose lines: reduce_scatter_tensor 678.86 MB, all_gather_into_tensor 6.0 MB twice
    assert len(calls) == 3
    assert not (calls["category"] == "scalar").any()
    # DeepSpeed's units are 1024-based; all_gather_into_tensor's argument is the shard (× N = 8)
    rs = calls[calls["op"] == "reduce_scatter"]
    ag = calls[calls["op"] == "all_gather"]
    assert rs["bytes_sent"].iloc[0] == pytest.approx(7 / 8 * 678.86 * 2**20)
    assert list(ag["bytes_sent"]) == pytest.approx([7 / 8 * 6.0 * 2**20 * 8] * 2)
    notes = " | ".join(m.notes)
    assert "approximate message size" in notes
    assert "record no size" not in notes
    # the summary rows are set aside, the per-call rows counted: the note says both
    assert "its 3 per-call rows are counted" in notes
    assert "set aside (aggregates or benchmarks, not per-call traces)" not in notes


def test_call_without_any_size_is_not_a_scalar(tmp_path):
    import pandas as pd

    ts = read_traces(DS)
    table = ts.table.copy()
    # the two all-gathers as calls that record neither elements nor bytes
    table.loc[table["op"].eq("all_gather") & table["rank"].notna(), "msg_size_bytes"] = pd.NA
    m = check(table, meta=ts.meta, n=8, psi=1_000_000_000).measurement
    assert not (m.calls["category"] == "scalar").any()
    assert any("2 calls record no size" in s for s in m.notes)
    # where no call records a size there is nothing to measure: refused, saying so
    table["msg_size_bytes"] = pd.NA
    with pytest.raises(TraceMismatchError, match="none of the trace's 3 collective calls records its size"):
        check(table, meta=ts.meta, n=8, psi=1_000_000_000)


def test_timing_flags_durations_that_include_waiting():
    ts = read_traces(DATA / "kineto" / "dlrm-v100-8ranks")
    t = check(ts.table, meta=ts.meta).timing
    assert t is not None and t.fit is not None
    # the prediction from a fit on the same calls misses their summed durations by more than 2×
    assert not 0.5 <= t.ratio <= 2
    assert "include waiting for the other ranks" in t.note
    assert "not a measurement of the links" in t.note


def test_timing_note_absent_when_fit_and_sum_agree():
    ts = read_traces(DATA / "kineto" / "ddp-resnet50-a100-rank0-of-2.json.gz")
    t = check(ts.table, meta=ts.meta).timing
    assert t is not None and t.fit is not None
    assert 0.5 <= t.ratio <= 2 and t.fit.max_abs_rel_residual <= 1
    assert "include waiting" not in t.note


def test_check_gpus_per_node_zero_is_refused_like_table(tmp_path):
    log = str(_pp_dp_log(tmp_path / "pp_dp.log"))
    runner = CliRunner()
    for cmd in (["check", log], ["table", "--psi", "1B", "--n", "8"]):
        r = runner.invoke(app, [*cmd, "--gpus-per-node", "0"])
        assert r.exit_code == 2
        assert "--gpus-per-node: must be a whole number ≥ 1" in r.output


def test_gloo_worker_threads_name_a_group_only_where_both_of_its_threads_are_seen():
    import numpy as np
    import pandas as pd

    from zerocalc.validate.columns import Rows
    from zerocalc.validate.groups import group_keys

    # one rank, no call naming its group. Threads 11 and 12 ran the same gather (a group's two threads: one
    # group); 21 and 22 the same all-reduce (another). Threads 31 and 32 each ran one bucket's all-reduce,
    # never the same one: as likely one group's threads taking its two buckets by turns, so not named
    t = pd.DataFrame({"file": "rank0", "op": ["all_gather", "all_gather", "all_reduce", "all_reduce",
                                              "all_reduce", "all_reduce"],
                      "in_nelems": [100.0, 100.0, 64.0, 64.0, 300.0, 200.0],
                      "out_nelems": [200.0, 200.0, 64.0, 64.0, 300.0, 200.0],
                      "worker": ["(1, 11)", "(1, 12)", "(1, 21)", "(1, 22)", "(1, 31)", "(1, 32)"]})
    key = group_keys(Rows(t, np.arange(len(t))))
    assert key[0] == key[1] >= 0 and key[2] == key[3] >= 0 and key[0] != key[2]
    assert (key[4:] == -1).all()
