"""PyTorch Flight Recorder JSON dumps as traces: read into the canonical table, counted by ``trace summary``
and checked against the schemes by ``check``.

The dumps (tests/data/traces/flight-recorder/ddp-dp2-of-4-gloo, a real run of its make_dumps.py: torch 2.13,
gloo, 4 ranks, DDP over the groups {0, 2} and {1, 3}, 6 steps) are counted here with plain ``json``; the
model's Ψ is the make script's: Linear(128,192) + Linear(192,96) = 43,296 parameters."""

from __future__ import annotations

import gzip
import json
import math
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.errors import TraceFormatError
from zerocalc.traces import detect_format, read_traces
from zerocalc.traces.flight_recorder import parse_document, rank_from_name

runner = CliRunner()
RUN = Path(__file__).parent / "data" / "traces" / "flight-recorder" / "ddp-dp2-of-4-gloo"
PSI = 128 * 192 + 192 + 192 * 96 + 96


def _entries(rank: int) -> list[dict]:
    return json.loads((RUN / f"rank{rank}.json").read_text())["entries"]


def test_the_dumps_are_detected_and_read_call_by_call():
    for r in range(4):
        assert detect_format((RUN / f"rank{r}.json").read_bytes()) == "flight_recorder"
    ts = read_traces(str(RUN))
    t = ts.table
    assert sorted(t["rank"].dropna().unique().tolist()) == [0, 1, 2, 3]
    for r in range(4):
        mine = t[t["rank"] == r]
        entries = _entries(r)
        assert len(mine) == len(entries)
        names = [e["profiling_name"].split(":")[1] for e in entries]
        assert mine["op"].astype(str).tolist() == names  # all_gather, broadcast, all_reduce: c10d's names
        assert mine["in_nelems"].tolist() == [math.prod(e["input_sizes"][0]) for e in entries]
        # every group of the run holds 2 ranks: its one all-gather gathers 2 × 1 elements
        assert set(mine["group_size"].tolist()) == {2}
    assert {m["backend"] for m in ts.meta.values()} == {"gloo"}


def test_check_infers_the_model_and_the_data_parallel_groups():
    res = runner.invoke(app, ["check", str(RUN), "--format", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["psi"] == PSI  # one step's all-reduces: 18,528 + 24,768 elements, the model's parameters
    assert out["n"] == 2
    # the steady state: 6 steps, the first with DDP's whole-model all-reduce, then 5 alike
    steady = [e for e in _entries(0) if e["profiling_name"] == "gloo:all_reduce"][1:]
    assert out["steps"] == len(steady) // 2 == 5
    assert out["matches"][0] == "dp"


def test_rank_from_the_file_name_and_groups_from_pg_config():
    assert [rank_from_name(f) for f in ("rank3.json", "/x/nccl_trace_rank_12", "dump.json")] == [3, 12, None]
    # an NCCL dump as FlightRecorder.hpp writes one: pg_config lists each group's ranks as text, timed work
    # has duration_ms
    doc = {"version": "2.10", "comm_lib_version": "2.21.5", "pg_status": {},
           "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"},
                         "1": {"name": "1", "desc": "dp", "ranks": "[1, 3]"}},
           "entries": [{"record_id": 0, "pg_id": 1, "process_group": ["1", "dp"], "collective_seq_id": 1,
                        "profiling_name": "nccl:reduce_scatter_tensor_coalesced", "time_created_ns": 5,
                        "input_sizes": [[8, 4]], "input_dtypes": ["BFloat16"], "output_sizes": [[4, 4]],
                        "output_dtypes": ["BFloat16"], "state": "completed", "duration_ms": 0.25},
                       {"record_id": 1, "pg_id": 0, "process_group": ["0", "default_pg"],
                        "collective_seq_id": 1, "profiling_name": "nccl:send 1->3", "input_sizes": [[10]],
                        "input_dtypes": ["Float"], "output_sizes": [[10]], "state": "scheduled"}]}
    res = parse_document(doc, "nccl_trace_rank_1")
    rs, send = res.rows
    assert (rs["op"], rs["dtype"], rs["in_nelems"], rs["out_nelems"]) == ("reduce_scatter", "bf16", 32, 16)
    assert (rs["group_size"], rs["group_ranks"], rs["group_desc"]) == (2, "1,3", "dp")
    assert rs["duration_s"] == pytest.approx(0.25e-3) and rs["rank"] == 1
    assert (send["op"], send["peer"], send["duration_s"]) == ("send", 3, None)
    # ProcessGroupNCCL's barrier: a one-element all-reduce named so since PyTorch PR #140785
    doc["entries"][1]["profiling_name"] = "nccl:all_reduce_barrier"
    assert parse_document(doc, "nccl_trace_rank_1").rows[1]["op"] == "barrier"
    assert (res.meta["backend"], res.meta["nccl_version"], res.meta["world_size"]) == ("nccl", "2.21.5", 4)


def test_a_coalesced_group_is_its_calls_and_the_slow_path_titles_are_their_ops():
    # ProcessGroupNCCL's titles: an all-gather of unequal sizes runs as one out-of-place broadcast a rank
    # (nccl:_broadcast_oop) in a coalescing group, which an entry with no tensors closes (nccl:coalesced,
    # the same collective_seq_id; tools/flight_recorder's find_coalesced_group); all_reduce_coalesced is
    # titled nccl:allreduce_coalesced
    def entry(i, seq, name, n):
        return {"record_id": i, "pg_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": seq,
                "profiling_name": name, "input_sizes": [[n]] if n else [], "output_sizes": [[n]] if n else [],
                "input_dtypes": ["Float"] if n else [], "state": "completed"}

    doc = {"version": "2.10", "comm_lib_version": "2.21.5", "pg_status": {},
           "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
           "entries": [entry(0, 1, "nccl:_broadcast_oop", 3), entry(1, 1, "nccl:_broadcast_oop", 5),
                       entry(2, 1, "nccl:coalesced", 0), entry(3, 2, "nccl:allreduce_coalesced", 8),
                       entry(4, 3, "nccl:_reduce_oop", 4)]}
    rows = parse_document(doc, "nccl_trace_rank_0").rows
    assert [(r["op"], r["in_nelems"], r["seq"]) for r in rows] == [
        ("broadcast", 3, 1), ("broadcast", 5, 1), ("all_reduce", 8, 2), ("reduce", 4, 3)]


def test_a_group_closed_by_its_op_types_name_is_its_calls():
    """PyTorch's Flight Recorder analyzer (tools/flight_recorder/components/types.py ``COLLECTIVES``, and its
    tests' uneven all-gather and reduce-scatter) closes the slow path's group with an entry named after the
    OpType (``endCoalescing(OpType::ALLGATHER)``): ``ALLGATHER_coalesced``, ``REDUCE_SCATTER_coalesced``,
    with no tensors. Those are no calls; ``allreduce_coalesced`` and ``all_gather_into_tensor_coalesced``
    are."""
    def entry(i, seq, name, n):
        return {"record_id": i, "pg_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": seq,
                "profiling_name": name, "input_sizes": [[n]] if n else [[]],
                "output_sizes": [[n]] if n else [[]], "input_dtypes": ["Float"] if n else [],
                "state": "completed"}

    doc = {"version": "2.10", "comm_lib_version": "2.21.5", "pg_status": {},
           "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
           "entries": [entry(0, 1, "nccl:_broadcast_oop", 4), entry(1, 1, "nccl:_broadcast_oop", 5),
                       entry(2, 1, "nccl:ALLGATHER_coalesced", 0), entry(3, 2, "nccl:_reduce_oop", 4),
                       entry(4, 2, "nccl:_reduce_oop", 4), entry(5, 2, "nccl:REDUCE_SCATTER_coalesced", 0),
                       entry(6, 3, "nccl:allreduce_coalesced", 8),
                       entry(7, 4, "nccl:all_gather_into_tensor_coalesced", 6)]}
    rows = parse_document(doc, "nccl_trace_rank_0").rows
    assert [(r["op"], r["in_nelems"], r["seq"]) for r in rows] == [
        ("broadcast", 4, 1), ("broadcast", 5, 1), ("reduce", 4, 2), ("reduce", 4, 2), ("all_reduce", 8, 3),
        ("all_gather", 6, 4)]
    # the analyzer's later titles: single-tensor and uneven calls are their ops; a communicator's
    # split and a memory window's creation are no calls
    doc["entries"] = [entry(0, 1, "nccl:all_gather_single", 3), entry(1, 2, "nccl:reduce_scatter_v", 6),
                      entry(2, 3, "nccl:all_to_all_v_single", 4), entry(3, 4, "nccl:split", 0),
                      entry(4, 4, "nccl:new_window", 0), entry(5, 5, "nccl:all_gather_v", 2),
                      entry(6, 6, "nccl:reduce_scatter_single", 8), entry(7, 7, "nccl:all_to_all_single", 5)]
    rows = parse_document(doc, "nccl_trace_rank_0").rows
    assert [(r["op"], r["in_nelems"]) for r in rows] == [
        ("all_gather", 3), ("reduce_scatter", 6), ("all_to_all", 4), ("all_gather", 2), ("reduce_scatter", 8),
        ("all_to_all", 5)]


def test_a_bad_entry_is_refused_with_its_index_or_skipped(tmp_path):
    doc = json.loads((RUN / "rank0.json").read_text())
    doc["entries"][3]["profiling_name"] = 7
    f = tmp_path / "rank0.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(TraceFormatError, match="entry 3"):
        read_traces(str(f), strict=True)
    ts = read_traces(str(f))
    assert len(ts.table) == len(doc["entries"]) - 1 and ts.skipped.count == 1
    res = runner.invoke(app, ["trace", "summary", str(f), "--strict"])
    assert res.exit_code == 2 and "entry 3" in res.output and "Traceback" not in res.output



@pytest.mark.parametrize(("key", "value"), [("record_id", "x"), ("collective_seq_id", [2]),
                                            ("collective_seq_id", True), ("record_id", 1.5)])
def test_an_entry_whose_ids_are_no_integers_is_skipped_naming_it(tmp_path, key, value):
    # PyTorch writes record_id and collective_seq_id as integers (torch/csrc/distributed/c10d/
    # FlightRecorder.hpp); a dump whose entry holds other is skipped there, where check raised ValueError
    doc = json.loads((RUN / "rank0.json").read_text())
    doc["entries"][3][key] = value
    f = tmp_path / "rank0.json"
    f.write_text(json.dumps(doc))
    for cmd in (["check", str(f), "--n", "2"], ["trace", "summary", str(f)]):
        res = runner.invoke(app, cmd)
        assert res.exit_code == 0, res.output
        assert f"rank0.json: entry 3: {key} {value!r} is not an integer" in res.output
        res = runner.invoke(app, [*cmd, "--strict"])
        assert res.exit_code == 2 and "Traceback" not in res.output
        assert res.output.strip().endswith(f"rank0.json: entry 3: {key} {value!r} is not an integer")

def test_a_group_without_a_size_asks_for_n(tmp_path):
    # gloo's dumps list no group's ranks: a world call with no gather of its own group has no size
    doc = json.loads((RUN / "rank0.json").read_text())
    doc["entries"].append({**doc["entries"][-1], "process_group": ["0", "default_pg"], "input_sizes": [[1]],
                           "output_sizes": [[1]]})
    f = tmp_path / "rank0.json"
    f.write_text(json.dumps(doc))
    res = runner.invoke(app, ["check", str(f)])
    assert res.exit_code == 2 and "--n" in res.output and "Traceback" not in res.output
    # the line names the group and the ops that lack a size: the one world call appended above
    assert "1 call(s) (on group '0': all_reduce) record no group size" in res.output


def test_timed_nccl_dumps_are_priced_on_the_nodes_their_group_names(tmp_path):
    # two ranks' dumps of a data-parallel group {0, 8} (tp = 8 on 8-GPU nodes): 4 steps of one 1 Mi-element
    # bf16 all-reduce each, timed (duration_ms) as TORCH_NCCL_ENABLE_TIMING=1 has NCCL's work timed
    ms = {0: [0.10, 0.11, 0.12, 0.13], 8: [0.15, 0.16, 0.17, 0.18]}
    for r, durations in ms.items():
        entries = [{"record_id": s, "pg_id": 1, "process_group": ["1", "dp"], "collective_seq_id": s + 1,
                    "profiling_name": "nccl:all_reduce", "time_created_ns": (s + 1) * 10**9,
                    "input_sizes": [[1 << 20]], "input_dtypes": ["BFloat16"], "output_sizes": [[1 << 20]],
                    "output_dtypes": ["BFloat16"], "state": "completed", "duration_ms": d}
                   for s, d in enumerate(durations)]
        (tmp_path / f"nccl_trace_rank_{r}").write_text(json.dumps({
            "version": "2.10", "comm_lib_version": "2.21.5", "pg_status": {}, "entries": entries,
            "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": str(list(range(16)))},
                          "1": {"name": "1", "desc": "dp", "ranks": "[0, 8]"}}}))
    res = runner.invoke(app, ["check", str(tmp_path), "--topology", "dgx-h100", "--format", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert (out["psi"], out["n"], out["steps"], out["world_size"]) == (1 << 20, 2, 4, 16)
    (call,) = out["nccl_timing"]["calls"]
    placed = (call["nodes"], call["ranks_per_node"], call["placement"], call["group_name"])
    assert placed == (2, 1, "ranks", "dp")
    every = [d for ds in ms.values() for d in ds]
    assert call["measured_s"] == pytest.approx(sum(every) / len(every) * 1e-3)
    assert call["fastest_rank_s"] == pytest.approx(sum(ms[0]) / 4 * 1e-3)  # rank 0 is each call's faster
    assert "NCCL 2.21" in out["nccl_timing"]["model"]  # comm_lib_version: the release NCCL's model prices


def test_an_inspector_log_beside_the_dumps_is_left_out_with_a_note(tmp_path):
    # both NCCL's Inspector and PyTorch's Flight Recorder were on: the directory holds both kinds of file
    import shutil

    for r in range(4):
        shutil.copy(RUN / f"rank{r}.json", tmp_path / f"rank{r}.json")
    shutil.copy(RUN.parent.parent / "nccl-inspector" / "readme-allreduce-8ranks-1node.log",
                tmp_path / "node-1-pid7.log")
    ts = read_traces(str(tmp_path))
    assert sorted(ts.table["rank"].unique().tolist()) == [0, 1, 2, 3]
    assert any("node-1-pid7.log" in n and "Inspector" in n for n in ts.notes)
    res = runner.invoke(app, ["check", str(tmp_path), "--format", "json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["psi"] == PSI
    with pytest.raises(TraceFormatError, match="Inspector"):  # named on its own, it is refused
        read_traces(str(tmp_path / "node-1-pid7.log"))


FR = Path(__file__).parent / "data" / "traces" / "flight-recorder"


def _count(case: str) -> tuple[dict, list[list[dict]]]:
    """A real-run case's run.json and each rank's entries, read with plain json and gzip."""
    import gzip

    run = json.loads((FR / case / "run.json").read_text())
    return run, [json.loads(gzip.decompress((FR / case / f"rank{r}.json.gz").read_bytes()))["entries"]
                 for r in range(run["world_size"])]


@pytest.mark.parametrize("case", ["fsdp2-ga4-no-sync", "fsdp2-mixed-bf16-fp32"])
def test_real_fsdp2_dumps_give_their_runs_model_steps_and_micro_batches(case):
    # make_runs.py ran the real-runs case without the profiler: no step markers; each optimizer step's
    # calls repeat. Counted from the dumps: the gathers' output over input is the group; the reductions of
    # one step (over gloo, FSDP2's reduce-scatters are recorded as the all-reduces they run as) sum to Ψ
    run, ranks = _count(case)
    steps = run["optimizer_steps"]
    for entries in ranks:
        assert len(entries) % steps == 0
    per_step = ranks[0][:len(ranks[0]) // steps]
    gathers = [e for e in per_step if e["profiling_name"] == "gloo:all_gather"]
    n = {math.prod(e["output_sizes"][0]) // math.prod(e["input_sizes"][0]) for e in gathers}
    psi = sum(math.prod(e["input_sizes"][0]) for e in per_step if e["profiling_name"] == "gloo:all_reduce")
    assert (psi, n) == (run["model"]["psi"], {len(run["groups"]["shard"][0])})
    res = runner.invoke(app, ["check", str(FR / case), "--format", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert (out["psi"], out["n"], out["steps"], out["micro_batches"]) == (
        psi, len(run["groups"]["shard"][0]), steps, run["micro_batches"])
    assert (out["param_dtype"], out["grad_dtype"]) == (
        {"float32": "fp32", "bfloat16": "bf16"}[run["param_dtype"]], "fp32")
    if run["micro_batches"] > 1:
        assert out["grad_sync"] == "boundary"  # set_requires_gradient_sync(False) on the first 3


def test_real_deepspeed_zero2_dumps_reduce_in_every_micro_batch():
    # DeepSpeed ZeRO-2, 4 micro-batches an optimizer step, no step markers. Counted from the dumps: after
    # the model's broadcasts, each step all-reduces the whole gradient once a micro-batch (one bucket), then
    # checks for overflow (a 0-d all-reduce) and all-gathers the updated partitions once
    run, ranks = _count("ds-zero2-ga4")
    steps, k = run["optimizer_steps"], run["micro_batches"]
    for entries in ranks:
        names = [e["profiling_name"] for e in entries if e["profiling_name"] != "gloo:broadcast"]
        assert names == (["gloo:all_reduce"] * (k + 1) + ["gloo:all_gather"]) * steps
        grads = {math.prod(e["input_sizes"][0]) for e in entries if e["profiling_name"] == "gloo:all_reduce"}
        assert grads == {run["model"]["psi"], 1}
    res = runner.invoke(app, ["check", str(FR / "ds-zero2-ga4"), "--format", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert (out["psi"], out["n"], out["steps"], out["micro_batches"], out["grad_sync"]) == (
        run["model"]["psi"], len(run["groups"]["dp"][0]), steps, k, "every")
    assert "deepspeed-zero2" in out["matches"]


def test_real_deepspeed_zero2_dumps_in_small_buckets_reduce_every_bucket_as_gradients():
    # DeepSpeed ZeRO-2 with reduce_bucket_size 20,000: counted from the dumps, each micro-batch all-reduces
    # the gradient in 5 buckets summing to Ψ, two of them (2,160 and 192 elements) under 1/64 of what the
    # step reduces; the step then all-gathers the partitions on the same group. The small buckets are
    # gradients, not a vector of norms: read as such, Ψ fell short by 2,352 and no scheme was consistent
    run, ranks = _count("ds-zero2-ga4-small-buckets")
    steps, k = run["optimizer_steps"], run["micro_batches"]
    buckets = [15_616, 28_560, 2_160, 192, 24_576]
    assert sum(buckets) == run["model"]["psi"]
    for entries in ranks:
        calls = [(e["profiling_name"], math.prod(e["input_sizes"][0])) for e in entries
                 if e["profiling_name"] != "gloo:broadcast"]
        step = [("gloo:all_reduce", b) for b in buckets] * k + [("gloo:all_reduce", 1),
                                                                 ("gloo:all_gather", 17_776)]
        assert calls == step * steps
    res = runner.invoke(app, ["check", str(FR / "ds-zero2-ga4-small-buckets"), "--format", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert (out["psi"], out["n"], out["steps"], out["micro_batches"], out["grad_sync"]) == (
        run["model"]["psi"], len(run["groups"]["dp"][0]), steps, k, "every")
    assert out["matches"][0] == "deepspeed-zero2"


def test_real_deepspeed_zero3_dumps_show_their_micro_batches():
    # DeepSpeed ZeRO-3, 4 micro-batches an optimizer step, no step markers. Counted from the dumps: each
    # step after the warm-up one is 4 × (an all-gather of every rank's partition of the whole model, the
    # gradients reduce-scattered, recorded as an all-reduce of the whole Ψ), then a 0-d fp64 all-reduce.
    # Before, the 4 blocks were read as one micro-batch of 4Ψ
    run, ranks = _count("ds-zero3-ga4")
    steps, k, psi = run["optimizer_steps"], run["micro_batches"], run["model"]["psi"]
    n = len(run["groups"]["dp"][0])
    block = [("gloo:all_gather", psi // n, n * (psi // n)), ("gloo:all_reduce", psi, psi)]
    for entries in ranks:
        seq = [(e["profiling_name"], math.prod(e["input_sizes"][0]), math.prod(e["output_sizes"][0]))
               for e in entries if e["input_sizes"]]  # barriers record no sizes
        assert seq[-(steps - 1) * (2 * k + 1):] == (block * k + [("gloo:all_reduce", 1, 1)]) * (steps - 1)
        assert entries[-1]["input_dtypes"] == ["Double"]
    res = runner.invoke(app, ["check", str(FR / "ds-zero3-ga4"), "--format", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    # the warm-up step gathers layer by layer in its first micro-batch: one-off
    assert (out["psi"], out["n"], out["steps"], out["micro_batches"], out["grad_sync"]) == (
        psi, n, steps - 1, k, "every")


def test_real_deepspeed_before_0_19_3_zero3_dumps_show_their_micro_batches():
    # the same run under DeepSpeed 0.15.4. Counted from the dumps: each step after the warm-up one gathers
    # the whole model once (71,104), then in each of the 3 later micro-batches all but layers.0 (46,336),
    # each micro-batch reducing Ψ (recorded as an all-reduce of the whole), then a 0-d fp64 all-reduce; the
    # gathers on the default group, the reductions on a group of its own of the same 4 ranks. Before, one
    # micro-batch of 4Ψ and no scheme: the all-reduces were not read as the reduce-scatters they stand for
    case = "deepspeed0.15.4-ds-zero3-ga4"
    run, ranks = _count(case)
    steps, k, psi = run["optimizer_steps"], run["micro_batches"], run["model"]["psi"]
    n = len(run["groups"]["dp"][0])
    assert run["deepspeed"] == "0.15.4"
    rest = psi - run["model"]["psi_per_layer"][0]
    first = [("gloo:all_gather", psi // n, psi), ("gloo:all_reduce", psi, psi)]
    later = [("gloo:all_gather", rest // n, rest), ("gloo:all_reduce", psi, psi)]
    for entries in ranks:
        seq = [(e["profiling_name"], math.prod(e["input_sizes"][0]), math.prod(e["output_sizes"][0]))
               for e in entries if e["input_sizes"]]  # barriers record no sizes
        step = first + later * (k - 1) + [("gloo:all_reduce", 1, 1)]
        assert seq[-(steps - 1) * len(step):] == step * (steps - 1)
        groups = {(e["profiling_name"], e["process_group"][1]) for e in entries[-len(step):]}
        assert groups == {("gloo:all_gather", "default_pg"), ("gloo:all_reduce", "undefined")}
    res = runner.invoke(app, ["check", str(FR / case), "--format", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert (out["psi"], out["n"], out["steps"], out["micro_batches"], out["grad_sync"]) == (
        psi, n, steps - 1, k, "every")
    assert out["all_reduces_read_as_reduce_scatters"] == n * (steps * k)
    ds = next(s for s in out["schemes"] if s["scheme"] == "deepspeed-zero3")
    assert ds["persistent_share"] == pytest.approx((psi - rest) / psi, rel=1e-9)
    assert any("the first micro-batch after the optimizer step gathers them" in note for note in out["notes"])


def test_real_deepspeed_zero3_dumps_in_small_buckets_reduce_every_parameter_as_gradients():
    # DeepSpeed ZeRO-3, reduce_bucket_size and stage3_prefetch_bucket_size 20,000: counted from the dumps,
    # each micro-batch gathers the 5 parameters one by one (the biases' 192 and 160 elements alone) and
    # reduces each one's gradient alone, recorded as all-reduces of the sizes of the gathers; the smallest,
    # under 1/64 of the step, are reduce-scatters too. Read as norm vectors, Ψ was 70,752
    run, ranks = _count("ds-zero3-ga4-small-buckets")
    steps, k, psi = run["optimizer_steps"], run["micro_batches"], run["model"]["psi"]
    n = len(run["groups"]["dp"][0])
    for entries in ranks:
        seq = [(e["profiling_name"], math.prod(e["output_sizes"][0])) for e in entries if e["input_sizes"]]
        last = seq[-(5 + 5) * k - 1:]  # the last step
        gathers = [s for op, s in last if op == "gloo:all_gather"]
        reduced = [s for op, s in last if op == "gloo:all_reduce"]
        assert sorted(gathers[:5]) == sorted(reduced[:5]) == [160, 192, 15_456, 24_576, 30_720]
        assert (len(gathers), sum(gathers)) == (5 * k, k * psi)
        assert (len(reduced), sum(reduced)) == (5 * k + 1, k * psi + 1)  # and the step's 0-d norm
    res = runner.invoke(app, ["check", str(FR / "ds-zero3-ga4-small-buckets"), "--format", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert (out["psi"], out["n"], out["micro_batches"], out["grad_sync"]) == (psi, n, k, "every")
    assert out["steps"] == steps - 1  # the warm-up gathers layer by layer: one-off
    assert not any("next to nothing" in note for note in out["notes"])
    # each micro-batch: a gather of Ψ and a reduce-scatter of Ψ (recorded as the all-reduce of the whole gloo
    # runs it as, read as what it stands for), fp32, ring accounting: DeepSpeed ZeRO-3, as its profiler trace
    assert out["measured_bytes_per_rank_per_step"] == pytest.approx(k * psi * (n - 1) / n * 2 * 4, rel=1e-9)
    assert "deepspeed-zero3" in out["matches"]
    read = out["all_reduces_read_as_reduce_scatters"]
    assert read == sum(len(_stand_ins(e)) for e in ranks) == n * steps * 5 * k


@pytest.mark.parametrize("case, sync", [("ds-zero2-ga4", "every"), ("ds-zero3-ga4", "every"),
                                        ("fsdp2-ga4-no-sync", "boundary")])
@pytest.mark.parametrize("cut", [1, 2, 3, 5])
def test_real_dumps_cut_mid_step_read_the_same_micro_batches(tmp_path, case, sync, cut):
    # each rank's dump with its last `cut` entries left out, as a dump taken while a step runs (a hang,
    # a timeout) or the log of a run stopped mid-step ends. Found from the end, the steps begin inside
    # one; read in the phase the calls before them show, they are the run's 4 micro-batches of Ψ, as the
    # whole dump reads (the tests above). Before, K = 1 and, where the gradients are reduced in every
    # micro-batch, Ψ 4×
    import gzip

    run, ranks = _count(case)
    for r, entries in enumerate(ranks):
        doc = json.loads(gzip.decompress((FR / case / f"rank{r}.json.gz").read_bytes()))
        doc["entries"] = entries[:-cut]
        (tmp_path / f"rank{r}.json").write_text(json.dumps(doc))
    res = runner.invoke(app, ["check", str(tmp_path), "--format", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert (out["psi"], out["micro_batches"], out["grad_sync"]) == (run["model"]["psi"], run["micro_batches"],
                                                                    sync)
    if case == "ds-zero2-ga4":
        assert "deepspeed-zero2" in out["matches"]


def test_real_deepspeed_moe_dumps_price_the_dense_parameters_and_the_experts_each_on_its_group():
    # DeepSpeed ZeRO-2 with an MoE layer (4 experts, expert parallelism 2), 4 micro-batches, no step markers.
    # Counted from the dumps: each step all-reduces the dense gradients (44,064) on the group of 4 (pg '5')
    # and the rank's experts' (123,584) on its expert-data-parallel group of 2 in every micro-batch, tokens
    # go by all-to-all on the expert-parallel group (pg '3' or '4'), and each part is all-gathered on its
    # group after the optimizer step
    run, ranks = _count("ds-moe-ep2-zero2-ga4")
    steps, k = run["optimizer_steps"], run["micro_batches"]
    dense, experts = run["model"]["dense_psi"], run["model"]["expert_psi_per_rank"]
    for entries in ranks:
        reduced = {}
        for e in entries:
            if e["profiling_name"] == "gloo:all_reduce" and math.prod(e["input_sizes"][0]) > 1:
                pg = e["process_group"][0]
                reduced[pg] = reduced.get(pg, 0) + math.prod(e["input_sizes"][0])
        # pg '5', DeepSpeed's data-parallel group of 4 on every rank; the other, the rank's group of 2
        assert reduced.pop("5") == steps * k * dense and list(reduced.values()) == [steps * k * experts]
    res = runner.invoke(app, ["check", str(FR / "ds-moe-ep2-zero2-ga4"), "--format", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert (out["psi"], out["n"], out["steps"], out["micro_batches"], out["grad_sync"]) == (
        dense + experts, 4, steps, k, "every")
    assert out["expert_parallel"] == {"expert_data_parallel_size": 2, "expert_parallel_size": 2,
                                      "expert_psi": experts, "dense_psi": dense}
    assert out["matches"] == ["deepspeed-zero2"]


def test_a_run_that_ends_in_evaluation_and_a_checkpoint_keeps_its_steps():
    # FSDP2 over gloo, 3 optimizer steps, then 5 evaluation batches (the forward's gathers and a 16-element
    # loss all-reduce each) and a full state dict (one gather a parameter, its output recorded as one
    # rank's part). Counted from the dumps: the steps are the first 3 × 9 calls; the rest is one-off
    run, ranks = _count("fsdp2-eval-checkpoint")
    steps = run["optimizer_steps"]
    for entries in ranks:
        step = [(e["profiling_name"], e["input_sizes"]) for e in entries[:9]]
        assert [(e["profiling_name"], e["input_sizes"]) for e in entries[:9 * steps]] == step * steps
        after = entries[9 * steps:]
        evaluation = (["gloo:all_gather"] * 3 + ["gloo:all_reduce"]) * 5
        assert [e["profiling_name"] for e in after[:20]] == evaluation
        assert all(e["profiling_name"] == "gloo:all_gather" and math.prod(e["output_sizes"][0])
                   == math.prod(e["input_sizes"][0]) for e in after[20:]) and len(after) == 26
    psi = sum(math.prod(e["input_sizes"][0]) for e in ranks[0][:9]
              if e["profiling_name"] == "gloo:all_reduce")
    assert psi == run["model"]["psi"]
    res = runner.invoke(app, ["check", str(FR / "fsdp2-eval-checkpoint"), "--format", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert (out["psi"], out["n"], out["steps"]) == (psi, 4, steps)
    assert "26 call(s) after the last repetition" in out["steps_how"]


def test_tensor_parallel_groups_of_the_data_parallel_size_are_told_apart_by_name():
    # tensor parallelism 2 × data parallelism 2: both groups have 2 ranks. Counted from the dumps: each
    # rank all-reduces an 8 × 160 activation on one group a step, and its gradient tensors on the other
    run, ranks = _count("tp2-dp2")
    for entries in ranks:
        by_group: dict[str, set[int]] = {}
        for e in entries:
            by_group.setdefault(e["process_group"][0], set()).add(math.prod(e["input_sizes"][0]))
        activations, gradients = sorted(by_group.values(), key=len)
        assert activations == {8 * 160}
        per_step = sum(math.prod(e["input_sizes"][0]) for e in entries[:7]
                       if math.prod(e["input_sizes"][0]) != 8 * 160)
        assert per_step == run["psi_per_rank"] == 43_360
    # over gloo the dumps list no group's ranks: the group's size is given; its name tells the groups apart
    res = runner.invoke(app, ["check", str(FR / "tp2-dp2"), "--n", "2", "--format", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert (out["psi"], out["n"], out["matches"]) == (43_360, 2, ["dp"])
    unexplained = next(c for c in out["categories"] if c["category"] == "unexplained")
    # the activation's all-reduce, reported apart: a ring on 2 sends 2 · 1/2 of its 8 × 160 fp32
    sent = unexplained["bytes_per_rank_per_step"]
    assert (unexplained["calls_per_rank_per_step"], sent) == (1, 2 * (1 / 2) * 8 * 160 * 4)


def test_groups_no_dump_lists_are_the_ranks_whose_dumps_record_their_calls():
    # tp2-dp2 over gloo: pg_config lists no group's ranks. Counted from the dumps: each group name is
    # recorded by two ranks' dumps, the members run.json gives (tp {0, 1} {2, 3}, dp {0, 2} {1, 3})
    run, ranks = _count("tp2-dp2")
    holders: dict[str, set[int]] = {}
    for r, entries in enumerate(ranks):
        for e in entries:
            holders.setdefault(e["process_group"][0], set()).add(r)
    assert sorted(map(sorted, holders.values())) == sorted(run["groups"]["tp"] + run["groups"]["dp"])
    t = read_traces(FR / "tp2-dp2").table
    assert {(g, r) for g, r in zip(t["group"], t["group_ranks"], strict=True)} == \
        {(g, ",".join(map(str, sorted(m)))) for g, m in holders.items()}
    # no --n needed: the data-parallel groups are the ones the gradients are reduced on
    res = runner.invoke(app, ["check", str(FR / "tp2-dp2"), "--format", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert (out["psi"], out["n"], out["matches"]) == (run["psi_per_rank"], 2, ["dp"])
    assert any("ranks whose dumps record their calls" in n and "give --n" in n for n in out["notes"])


def test_a_group_one_dump_records_stays_unsized(tmp_path):
    # only ranks 0 and 1 read: the tensor-parallel group {0, 1} is seen whole, the data-parallel one ({0, 2}
    # on rank 0, {1, 3} on rank 1) by one dump each: unsized, so --n is asked for
    for r in (0, 1):
        (tmp_path / f"rank{r}.json").write_bytes(gzip.decompress((FR / "tp2-dp2" / f"rank{r}.json.gz")
                                                                 .read_bytes()))
    t = read_traces(tmp_path).table
    tp = t["group"] == "1"
    assert set(t.loc[tp, "group_size"]) == {2} and t.loc[~tp, "group_size"].isna().all() and (~tp).any()
    res = runner.invoke(app, ["check", str(tmp_path)])
    assert res.exit_code == 2 and "give --n" in res.output


def test_the_call_most_dumps_record_gives_the_members(tmp_path):
    # a ring buffer that let rank 1's oldest call go: seq 1 of group '1' is on ranks 0 and 2 only, seq 2 on
    # all three, so the group is {0, 1, 2}
    calls = {0: [1, 2], 1: [2], 2: [1, 2]}
    for r, seqs in calls.items():
        entries = [{"record_id": i, "pg_id": 1, "process_group": ["1", "undefined"], "collective_seq_id": q,
                    "profiling_name": "gloo:all_reduce", "input_sizes": [[64]], "output_sizes": [[64]],
                    "input_dtypes": ["Float"], "state": "completed"} for i, q in enumerate(seqs)]
        (tmp_path / f"rank{r}.json").write_text(json.dumps({"version": "2.10", "pg_config": {},
                                                            "entries": entries}))
    t = read_traces(tmp_path).table
    assert set(t["group_size"].astype(int)) == {3} and set(t["group_ranks"].astype(str)) == {"0,1,2"}


def _checked_nccl_dumps(tmp_path, ranks, pg_config: dict[str, tuple[str, str]], calls) -> dict:
    """``check --format json`` of NCCL dumps, as FlightRecorder.hpp writes them, of ``ranks``, each listing
    ``pg_config`` (name → (description, ranks as text)) and making ``calls`` ((group, op, elements))."""
    for r in ranks:
        entries = [{"record_id": i, "pg_id": int(pg), "process_group": [pg, pg_config[pg][0]],
                    "collective_seq_id": i + 1, "profiling_name": f"nccl:{op}", "input_sizes": [[n]],
                    "output_sizes": [[n]], "input_dtypes": ["Float"], "state": "completed"}
                   for i, (pg, op, n) in enumerate(calls)]
        (tmp_path / f"nccl_trace_rank_{r}").write_text(json.dumps({
            "version": "2.10", "comm_lib_version": "2.21.5", "pg_status": {}, "entries": entries,
            "pg_config": {k: {"name": k, "desc": d, "ranks": rs} for k, (d, rs) in pg_config.items()}}))
    res = runner.invoke(app, ["check", str(tmp_path), "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_two_groups_of_every_rank_are_both_data_parallel(tmp_path):
    # DeepSpeed's way: gradients all-reduced on a group of every rank made for data parallelism ("1"), and
    # each step a broadcast of a 100-element buffer on the default group ("0"), which holds the same ranks:
    # both are data-parallel calls, none reported apart as another group's
    out = _checked_nccl_dumps(tmp_path, (0, 1), {"0": ("default_pg", "[0, 1]"), "1": ("dp", "[0, 1]")},
                              [("1", "all_reduce", 5000), ("0", "broadcast", 100)] * 3)
    assert (out["psi"], out["n"], out["steps"]) == (5000, 2, 3)
    unexplained = next(c for c in out["categories"] if c["category"] == "unexplained")
    assert unexplained["calls_per_rank_per_step"] == 0


def test_two_groups_of_the_same_ranks_are_one(tmp_path):
    # a world of 4; ranks 0 and 2 all-reduce gradients on group "1" ({0, 2}) and broadcast a 500-element
    # shard each step on group "2", made apart but of the same ranks (as ZeroRedundancyOptimizer over a
    # data-parallel sub-group): one group, nothing reported apart
    out = _checked_nccl_dumps(tmp_path, (0, 2), {"0": ("default_pg", "[0, 1, 2, 3]"),
                                                 "1": ("undefined", "[0, 2]"), "2": ("undefined", "[0, 2]")},
                              [("1", "all_reduce", 5000), ("2", "broadcast", 500)] * 3)
    assert (out["psi"], out["n"], out["world_size"]) == (5000, 2, 4)
    unexplained = next(c for c in out["categories"] if c["category"] == "unexplained")
    assert unexplained["calls_per_rank_per_step"] == 0


def _stand_ins(entries: list[dict]) -> list[dict]:
    """A rank's all-reduces of as many elements as one of its all-gathers returns on the same group, larger
    than a scalar: a gloo run's reduce-scatters, recorded as the all-reduces of the whole it runs them as."""
    gathered = {(e["process_group"][0], math.prod(e["output_sizes"][0])) for e in entries
                if e["profiling_name"] == "gloo:all_gather"}
    return [e for e in entries if e["profiling_name"] == "gloo:all_reduce"
            and math.prod(e["input_sizes"][0]) > 8
            and (e["process_group"][0], math.prod(e["input_sizes"][0])) in gathered]


def test_dumps_of_a_sharded_run_over_gloo_read_its_reduce_scatters_recorded_as_all_reduces():
    # FSDP2 over gloo, bf16 parameters and fp32 reductions, one micro-batch: counted from the dumps, every
    # entry is an all-gather or an all-reduce, none a reduce-scatter (ProcessGroupGloo runs one as an
    # all-reduce of the whole input). Read as recorded, no scheme sends that; each all-reduce of a unit's
    # whole is read as the reduce-scatter it stands for, and the run reads as its profiler trace does:
    # per step 2Ψ gathered in bf16 and Ψ reduce-scattered in fp32, each rank sending 3/4 of each
    run, ranks = _count("fsdp2-mixed-bf16-fp32")
    names = {e["profiling_name"] for entries in ranks for e in entries}
    assert names == {"gloo:all_gather", "gloo:all_reduce"}
    gathered = {e["input_dtypes"][0] for entries in ranks for e in entries
                if e["profiling_name"] == "gloo:all_gather" and math.prod(e["input_sizes"][0]) > 8}
    assert gathered == {"BFloat16"}
    stand_ins = [e for entries in ranks for e in _stand_ins(entries)]
    assert {e["input_dtypes"][0] for e in stand_ins} == {"Float"}
    psi = run["model"]["psi"]
    assert sum(math.prod(e["input_sizes"][0]) for e in _stand_ins(ranks[0])) == run["optimizer_steps"] * psi
    res = runner.invoke(app, ["check", str(FR / "fsdp2-mixed-bf16-fp32"), "--format", "json"])
    out = json.loads(res.stdout)
    assert out["all_reduces_read_as_reduce_scatters"] == len(stand_ins) == 4 * 3 * run["optimizer_steps"]
    assert "fsdp-full-shard" in out["matches"] and out["psi"] == psi
    assert out["measured_bytes_per_rank_per_step"] == pytest.approx((2 * psi * 2 + psi * 4) * 3 / 4)
    assert any("are read as the reduce-scatters they stand for" in n for n in out["notes"])
    # DeepSpeed ZeRO-2's all-reduces are its own: its dump matches as recorded, read so
    out = json.loads(runner.invoke(app, ["check", str(FR / "ds-zero2-ga4"), "--format", "json"]).stdout)
    assert out["matches"][0] == "deepspeed-zero2" and out["all_reduces_read_as_reduce_scatters"] == 0


@pytest.mark.parametrize("case, gathers, why", [
    ("hsdp-2x2", 2, "read as recorded, no scheme sends the dumps' calls"),
    # as recorded, DeepSpeed ZeRO-1/-2 on N = 2 with the replicate halves, Ψ/2 a step all-reduced on 2
    # ranks (2 × 1/2 × Ψ/2 × 4 B), reported apart
    ("hsdp-2x2-no-reshard", 1, f"read as recorded, the dumps' calls leave {71_104 * 2:,} B per rank per step "
                               "more reported apart")])
def test_hsdp_dumps_over_gloo_read_as_hsdp(case, gathers, why):
    # FSDP2 on a 2 × 2 mesh (replicate × shard), gloo, one micro-batch: counted from the dumps, each rank
    # gathers each unit on its shard group of 2 (in forward and backward, or in forward alone where the
    # parameters are not resharded), all-reduces its whole there (the reduce-scatter, recorded as gloo runs
    # it) and all-reduces its half on the replicate group. Read so, the run is HSDP: N = 4 as shard groups
    # of 2, Ψ the model's, per step each rank sends 1/2 of what it gathers, 1/2 of Ψ reduce-scattered and
    # 2 × 1/2 of Ψ/2 all-reduced, fp32. As recorded, the gradients' all-reduces on the shard group read as
    # DeepSpeed ZeRO-2's on N = 2 where the parameters are not resharded, the halves reported apart
    run, ranks = _count(case)
    psi = run["model"]["psi"]
    for entries in ranks:
        stand_ins = _stand_ins(entries)
        groups = {e["process_group"][0] for e in stand_ins}
        assert len(groups) == 1 and sum(math.prod(e["input_sizes"][0]) for e in stand_ins) \
            == run["optimizer_steps"] * psi
        gathered = sum(math.prod(e["output_sizes"][0]) for e in entries
                       if e["profiling_name"] == "gloo:all_gather" and math.prod(e["output_sizes"][0]) > 8)
        assert gathered == gathers * run["optimizer_steps"] * psi
        halves = [e for e in entries if e["profiling_name"] == "gloo:all_reduce" and e not in stand_ins
                  and math.prod(e["input_sizes"][0]) > 8]
        assert {e["process_group"][0] for e in halves}.isdisjoint(groups)
        assert sum(math.prod(e["input_sizes"][0]) for e in halves) == run["optimizer_steps"] * psi // 2
    out = json.loads(runner.invoke(app, ["check", str(FR / case), "--format", "json"]).stdout)
    assert out["matches"] == ["fsdp-hybrid"]
    assert (out["psi"], out["n"], out["hsdp_shard_size"]) == (psi, 4, 2)
    assert out["all_reduces_read_as_reduce_scatters"] == sum(len(_stand_ins(e)) for e in ranks)
    sent = (gathers * psi / 2 + psi / 2 + psi / 2) * 4
    assert out["measured_bytes_per_rank_per_step"] == pytest.approx(sent)
    apart = next(c for c in out["categories"] if c["category"] == "unexplained")
    assert apart["calls_per_rank_per_step"] == 0
    assert why in out["notes"]


def test_an_hsdp_dump_all_reducing_in_the_last_micro_batch_reads_as_its_regime():
    # HSDP 2 × 2, 4 micro-batches, the replicate all-reduce in the last alone (set_requires_all_reduce(False)
    # on the others): counted from the dumps, each step gathers 2Ψ and all-reduces Ψ whole on the shard group
    # (gloo's reduce-scatters) in every micro-batch, and all-reduces Ψ/2 on the replicate group once. No
    # scheme sends that as it is; fsdp-hybrid does in that regime, as the profiler trace of the run reads:
    # per step each rank sends K × (1/2 of 2Ψ + 1/2 of Ψ) + 2 × 1/2 of Ψ/2, fp32
    run, ranks = _count("hsdp-2x2-ga4-all-reduce-last")
    psi, k, steps = run["model"]["psi"], run["micro_batches"], run["optimizer_steps"]
    for entries in ranks:
        stand_ins = _stand_ins(entries)
        assert sum(math.prod(e["input_sizes"][0]) for e in stand_ins) == steps * k * psi
        groups = {e["process_group"][0] for e in stand_ins}
        halves = [math.prod(e["input_sizes"][0]) for e in entries if e["profiling_name"] == "gloo:all_reduce"
                  and e["process_group"][0] not in groups and math.prod(e["input_sizes"][0]) > 8]
        assert sum(halves) == steps * psi // 2
    out = json.loads(runner.invoke(app, ["check", str(FR / "hsdp-2x2-ga4-all-reduce-last"),
                                         "--format", "json"]).stdout)
    assert out["matches"] == [] and out["matches_if_all_reduced_once"] == ["fsdp-hybrid"]
    assert (out["psi"], out["n"], out["hsdp_shard_size"], out["micro_batches"]) == (psi, 4, 2, k)
    assert out["all_reduces_read_as_reduce_scatters"] == sum(len(_stand_ins(e)) for e in ranks)
    assert out["measured_bytes_per_rank_per_step"] == pytest.approx((k * (psi + psi / 2) + psi / 2) * 4)


def test_a_deepspeed_zero3_dump_at_its_defaults_reads_its_buckets_as_reduce_scatters():
    # DeepSpeed ZeRO-3 at its defaults, 4 micro-batches, on Linear(128, 1024) - ReLU - Linear(1024, 96):
    # counted from the dumps, each step gathers layers.0's weight (131,072) before each micro-batch's forward
    # and the persistent rest (98,304 + 1,024 + 96) once, and reduces Ψ = 230,496 in one bucket a
    # micro-batch (gloo's reduce-scatter, recorded as an all-reduce of a size no gather returns). Read as
    # reduce-scatters, the run is DeepSpeed ZeRO-3 with those parameters kept, as its profiler trace reads:
    # per step each rank sends 3/4 of what it gathers and of 4Ψ, fp32
    run, ranks = _count("ds-zero3-defaults-mixed-ga4")
    psi, k, steps = run["model"]["psi"], run["micro_batches"], run["optimizer_steps"]
    persistent = 98_304 + 1_024 + 96
    for entries in ranks:
        seq = [(e["profiling_name"], math.prod(e["output_sizes"][0])) for e in entries if e["input_sizes"]]
        step = ([("gloo:all_gather", 131_072), ("gloo:all_reduce", psi)] * k + [("gloo:all_reduce", 1)]
                + [("gloo:all_gather", 1_024), ("gloo:all_gather", 98_304), ("gloo:all_gather", 96)])
        assert seq[-len(step) * (steps - 1):] == step * (steps - 1)
        assert ("gloo:all_gather", psi) not in seq
    out, cat = _checked("ds-zero3-defaults-mixed-ga4")
    assert (out["psi"], out["n"], out["micro_batches"], out["grad_sync"]) == (psi, 4, k, "every")
    assert out["matches"] == []
    assert out["matches_if_parameters_kept_across_micro_batches"] == ["deepspeed-zero3"]
    assert out["all_reduces_read_as_reduce_scatters"] == 4 * k * steps
    assert cat["bytes_per_rank_per_step"] == pytest.approx((k * 131_072 + persistent + k * psi) * 3 / 4 * 4)
    assert any("whatever their size" in n for n in out["notes"])


def test_a_deepspeed_zero3_dump_with_every_parameter_persistent_reads_as_its_trace():
    # DeepSpeed ZeRO-3 at its defaults on a model whose tensors are all under
    # stage3_param_persistence_threshold: counted from the dumps, each rank opens (record 0, after the
    # broadcasts) by gathering the parameters, then each step reduces Ψ in one bucket a micro-batch (gloo's
    # reduce-scatter, of a size no gather returns) and gathers the 6 updated tensors once: DeepSpeed ZeRO-2's
    # calls as recorded. Opening with gathers, it is read with the reduce-scatters, as its profiler trace
    # reads: ZeRO-2's volume, DeepSpeed ZeRO-3 with its parameters kept; per step each rank sends 3/4 of 4Ψ
    # reduce-scattered and of Ψ gathered, fp32
    run, ranks = _count("ds-zero3-defaults-ga4")
    psi, k, steps = run["model"]["psi"], run["micro_batches"], run["optimizer_steps"]
    for entries in ranks:
        assert entries[0]["record_id"] == 0
        first = next(e for e in entries if e["profiling_name"] in ("gloo:all_gather", "gloo:all_reduce"))
        assert first["profiling_name"] == "gloo:all_gather"
        seq = [(e["profiling_name"], math.prod(e["output_sizes"][0])) for e in entries if e["input_sizes"]]
        gathers = [("gloo:all_gather", n) for n in (24_576, 192, 30_720, 160, 15_360, 96)]
        step = [("gloo:all_reduce", psi)] * k + [("gloo:all_reduce", 1)] + gathers
        assert seq[-len(step) * (steps - 1):] == step * (steps - 1) and sum(n for _, n in gathers) == psi
    out, cat = _checked("ds-zero3-defaults-ga4")
    assert (out["psi"], out["n"], out["micro_batches"], out["grad_sync"]) == (psi, 4, k, "every")
    assert out["matches_as_recorded"] == ["deepspeed-zero2"] and out["matches"] == ["zero2"]
    assert out["matches_if_parameters_kept_across_micro_batches"] == ["deepspeed-zero3"]
    assert cat["bytes_per_rank_per_step"] == pytest.approx((k * psi + psi) * 3 / 4 * 4)


def test_a_dump_that_opens_with_gathers_reads_its_all_reduces_as_reduce_scatters_though_they_match():
    # FSDP2 with reshard_after_forward=False over gloo: counted from the dumps, each step gathers each unit
    # once and all-reduces its whole (gloo's reduce-scatter). As recorded that is DeepSpeed ZeRO-2's pattern
    # (its buckets all-reduced, its parameters gathered), but every rank's dump opens (record 0) with a
    # gather, before any reduction: a sharded forward, where DeepSpeed reduces first. Read with the
    # reduce-scatters, it is FSDP's SHARD_GRAD_OP, as its profiler trace reads: per step each rank sends 3/4
    # of Ψ gathered and of Ψ reduce-scattered, fp32; the JSON names what the calls match as recorded
    run, ranks = _count("fsdp2-no-reshard")
    psi = run["model"]["psi"]
    for entries in ranks:
        assert entries[0]["record_id"] == 0 and entries[0]["profiling_name"] == "gloo:all_gather"
        gathers = [e for e in entries if e["profiling_name"] == "gloo:all_gather"
                   and math.prod(e["output_sizes"][0]) > 8]
        assert sum(math.prod(e["output_sizes"][0]) for e in gathers) == run["optimizer_steps"] * psi
        reduced = sum(math.prod(e["input_sizes"][0]) for e in _stand_ins(entries))
        assert reduced == run["optimizer_steps"] * psi
    out = json.loads(runner.invoke(app, ["check", str(FR / "fsdp2-no-reshard"), "--format", "json"]).stdout)
    assert "fsdp-shard-grad-op" in out["matches"] and "deepspeed-zero2" not in out["matches"]
    assert "deepspeed-zero2" in out["matches_as_recorded"]
    assert out["all_reduces_read_as_reduce_scatters"] == sum(len(_stand_ins(e)) for e in ranks)
    assert out["measured_bytes_per_rank_per_step"] == pytest.approx((psi + psi) * 3 / 4 * 4)
    assert any("opens with an all-gather, before any reduction" in n for n in out["notes"])
    # DeepSpeed ZeRO-2's dumps open with its first micro-batch's all-reduce: read as recorded, the other
    # reading named
    _, ranks = _count("ds-zero2-ga4")
    for entries in ranks:
        first = next(e for e in entries if e["profiling_name"] in ("gloo:all_gather", "gloo:all_reduce"))
        assert first["profiling_name"] == "gloo:all_reduce"
    out = json.loads(runner.invoke(app, ["check", str(FR / "ds-zero2-ga4"), "--format", "json"]).stdout)
    assert out["matches"] == ["deepspeed-zero2"] and out["matches_as_recorded"] == []
    assert out["matches_if_all_reduces_are_reduce_scatters"] == ["zero2"]
    assert any("read as reduce-scatters" in n and "zero2" in n for n in out["notes"])


def test_an_evaluation_every_two_steps_leaves_two_steps_between_evaluations():
    # counted from the dumps: 6 optimizer steps, each reducing the model's gradients in 3 all-reduces (gloo
    # records FSDP2's reduce-scatters so), and after every 2nd an evaluation: 2 batches of the forward's 3
    # all-gathers and a 16-element loss all-reduce. The first step and its successor differ from the later
    # ones (FSDP2's lazy start; the evaluation leaves layers.2 resharded), so the steps are read from the
    # second evaluation on: the block of 2 steps and an evaluation repeats twice
    run, ranks = _count("fsdp2-eval-every-2")
    for entries in ranks:
        reduces = [math.prod(e["input_sizes"][0]) for e in entries
                   if e["profiling_name"] == "gloo:all_reduce"]
        losses = [n for n in reduces if n == 16]
        assert len(losses) == 2 * 3 and sum(reduces) - sum(losses) == 6 * run["model"]["psi"]
        ends = [i for i, e in enumerate(entries) if math.prod(e["input_sizes"][0]) == 16]
        evaluation = entries[ends[1] + 1 - 8:ends[1] + 1]
        names = [e["profiling_name"] for e in evaluation]
        assert names == (["gloo:all_gather"] * 3 + ["gloo:all_reduce"]) * 2
        # the 2 steps between the 2nd and 3rd evaluations: 3 reductions and 6 gathers each (the forward's
        # and the backward's), and 1 gather more, of layers.2, that the evaluation left resharded
        steps = entries[ends[3] + 1:ends[4] - 3]
        assert Counter(e["profiling_name"] for e in steps) == {"gloo:all_gather": 13, "gloo:all_reduce": 6}
    out, step = _checked("fsdp2-eval-every-2")
    assert (out["psi"], out["n"], out["steps"]) == (run["model"]["psi"], 4, 4)
    assert "the 8 calls after every 2 steps" in out["steps_how"] and "(an evaluation)" in out["steps_how"]
    # a step: its 3 reductions and 6 gathers, the gather again one-off as the evaluation is
    assert "sends again (1 call: " in out["steps_how"]
    assert step["calls_per_rank_per_step"] == 9


def _checked(case: str) -> tuple[dict, dict]:
    """``check --format json`` of a kept dump, and its step category."""
    res = runner.invoke(app, ["check", str(FR / case), "--format", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    return out, next(c for c in out["categories"] if c["category"] == "step")


def test_one_evaluation_in_a_dump_leaves_the_steps_on_both_sides():
    # FSDP2, 5 optimizer steps, an evaluation after the 1st and the 4th (every 3rd, from step 0), no step
    # markers: the block of a step and an evaluation never repeats. Counted from the dumps: the steps'
    # reductions sum to 5Ψ (gloo records FSDP2's reduce-scatters as all-reduces), each evaluation is 2
    # batches of the forward's 3 gathers and a 16-element loss all-reduce, and the step after each sends
    # one gather more (layers.2, left resharded). Before, the whole dump was read as one step of 5Ψ
    run, ranks = _count("fsdp2-one-evaluation")
    psi, steps = run["model"]["psi"], run["optimizer_steps"]
    for entries in ranks:
        reduces = [math.prod(e["input_sizes"][0]) for e in entries
                   if e["profiling_name"] == "gloo:all_reduce"]
        assert sum(n for n in reduces if n != 16) == steps * psi and reduces.count(16) == 2 * 2
        gathers = sum(e["profiling_name"] == "gloo:all_gather" for e in entries)
        assert gathers == steps * 6 + 2 * 2 * 3 + 2
    out, step = _checked("fsdp2-one-evaluation")
    assert (out["psi"], out["n"], out["steps"]) == (psi, 4, steps)
    assert "on both sides of calls that carry no gradients (an evaluation: 8 calls after steps 1 and 4)" \
        in out["steps_how"]
    assert "sends again (2 calls in all: " in out["steps_how"] and step["calls_per_rank_per_step"] == 9


def _zero3_evaluating(case: str):
    """A DeepSpeed ZeRO-3 dump's run facts (Ψ, K, N) and the calls its run.json implies, in (name, elements)
    pairs: a step (K × a gather of every rank's partition and the gradients reduced, recorded as an
    all-reduce of Ψ, then a 1-element norm), the step after an evaluation (one gather less: it keeps the
    evaluation's) and an evaluation (a gather, two 16-element losses)."""
    run, _ = _count(case)
    psi, k = run["model"]["psi"], run["micro_batches"]
    n = len(run["groups"]["dp"][0])
    block = [("gloo:all_gather", psi // n), ("gloo:all_reduce", psi)]
    evaluation = [("gloo:all_gather", psi // n), ("gloo:all_reduce", 16), ("gloo:all_reduce", 16)]
    norm = [("gloo:all_reduce", 1)]
    return psi, k, n, block * k + norm, block[1:] + block * (k - 1) + norm, evaluation


def _ends_in(case: str, tail: list, evaluation: list) -> None:
    """Every rank's dump of ``case`` ends in ``tail``, after an evaluation."""
    for entries in _count(case)[1]:
        seq = [(e["profiling_name"], math.prod(e["input_sizes"][0])) for e in entries if e["input_sizes"]]
        assert seq[-len(tail):] == tail and seq[-len(tail) - len(evaluation):-len(tail)] == evaluation


def test_one_evaluation_in_a_deepspeed_zero3_dump_keeps_its_micro_batches():
    # DeepSpeed ZeRO-3, 4 micro-batches, 5 optimizer steps, an evaluation after the 1st and the 4th. Counted
    # from the dumps: a step is 4 × (a gather of every rank's partition, the gradients reduced, recorded
    # as an all-reduce of Ψ) and a 1-element flag; the step after an evaluation gathers once less (the
    # evaluation's gather is kept for its first micro-batch). Before, the micro-batches after the last
    # evaluation were read as 3 steps of 2 calls and the rest set aside
    psi, k, n, step, kept, evaluation = _zero3_evaluating("ds-zero3-ga4-one-evaluation")
    _ends_in("ds-zero3-ga4-one-evaluation", kept + step + step + evaluation + kept, evaluation)  # steps 2-5
    out, step = _checked("ds-zero3-ga4-one-evaluation")
    assert (out["psi"], out["n"], out["micro_batches"], out["grad_sync"]) == (psi, n, k, "every")
    assert out["steps"] == 4 and "count in the step after" in out["steps_how"]
    assert step["calls_per_rank_per_step"] == 2 * k


def test_an_evaluation_every_two_steps_that_deepspeed_zero3_keeps_gathered():
    # DeepSpeed ZeRO-3, 4 micro-batches, 5 optimizer steps, an evaluation after the 1st, 3rd and 5th (every
    # 2nd from step 0). Counted from the dumps: a step is 4 × (a gather of every rank's partition, the
    # gradients reduced, recorded as an all-reduce of Ψ) and a 1-element norm; the evaluation is a gather
    # and two 16-element losses, and the step after it keeps that gather (one less). Every reduction is the
    # same call: before, the block of 2 steps and an evaluation was read as one step of 8 reductions (Ψ 8×)
    psi, k, n, step, kept, evaluation = _zero3_evaluating("ds-zero3-ga4-eval-every-2")
    # steps 2-5 and the evaluations after the 3rd and 5th
    _ends_in("ds-zero3-ga4-eval-every-2", (kept + step + evaluation) * 2, evaluation)
    out, step = _checked("ds-zero3-ga4-eval-every-2")
    assert (out["psi"], out["n"], out["micro_batches"], out["grad_sync"]) == (psi, n, k, "every")
    # the step after the 1st evaluation kept a gather from before the repeating run: 3 steps read
    assert out["steps"] == 3 and "the 2 calls after every 2 steps" in out["steps_how"]
    assert "they follow 1 call of a step's own that counts in the step after" in out["steps_how"]
    assert step["calls_per_rank_per_step"] == 2 * k


def test_an_evaluation_every_two_steps_that_fsdp1_shard_grad_op_keeps_gathered():
    # FSDP1 SHARD_GRAD_OP, 5 optimizer steps, an evaluation after the 1st, 3rd and 5th. Counted from the
    # dumps: a step gathers the 3 layers (kept for backward) and reduces their gradients (all-reduces on
    # gloo, Ψ in all); the evaluation gathers the 3 layers and all-reduces two 16-element losses, and the
    # step after it keeps those gathers. Before, 2 steps and an evaluation were read as one step (Ψ 2×)
    run, ranks = _count("fsdp1-shard-grad-op-eval-every-2")
    psi = run["model"]["psi"]
    for entries in ranks:
        seq = [(e["profiling_name"], math.prod(e["input_sizes"][0])) for e in entries]
        gathers, reduces = seq[:3], seq[3:6]
        assert {op for op, _ in gathers} == {"gloo:all_gather"} and sum(n for _, n in reduces) == psi
        evaluation = gathers + [("gloo:all_reduce", 16)] * 2
        assert seq == (gathers + reduces + evaluation + reduces) * 2 + gathers + reduces + evaluation
    out, step = _checked("fsdp1-shard-grad-op-eval-every-2")
    assert (out["psi"], out["n"], out["steps"]) == (psi, 4, 3)
    assert "they follow 3 calls of a step's own that count in the step after" in out["steps_how"]
    assert step["calls_per_rank_per_step"] == 6


def test_steps_after_a_checkpoint_are_counted_with_those_before():
    # FSDP2, 7 optimizer steps and a checkpoint after the 5th: its save plan's pickled objects (gloo:gather,
    # scatter, broadcast of bytes) between the steps. Counted from the dumps: the reductions sum to 7Ψ and
    # the pickled calls all come after the 5th step's last reduction. Before, the 5 steps before the
    # checkpoint were read and the 2 after it set aside with it
    run, ranks = _count("fsdp2-checkpoint-once")
    psi, steps = run["model"]["psi"], run["optimizer_steps"]
    for entries in ranks:
        reduces = [i for i, e in enumerate(entries) if e["profiling_name"] == "gloo:all_reduce"]
        assert sum(math.prod(entries[i]["input_sizes"][0]) for i in reduces) == steps * psi
        pickled = [i for i, e in enumerate(entries) if e["input_dtypes"] == ["Byte"]]
        assert pickled and reduces[5 * 3 - 1] < min(pickled) and max(pickled) < reduces[5 * 3]
    out, step = _checked("fsdp2-checkpoint-once")
    assert (out["psi"], out["steps"]) == (psi, steps) and "pickled objects" in out["steps_how"]
    assert "after step 5)" in out["steps_how"] and step["calls_per_rank_per_step"] == 9


def test_an_evaluation_every_two_steps_after_zero3_steps_that_gather_layer_by_layer():
    # DeepSpeed ZeRO-3 without reuse or prefetch, 4 micro-batches, an evaluation after every 2nd optimizer
    # step. Counted from the dumps: a micro-batch gathers the 3 layers' partitions in the forward and again,
    # in reverse, in the backward, then reduces Ψ (an all-reduce on gloo); a step is 4 of them and a
    # 1-element norm; an evaluation is 2 batches of the 3 forward gathers and a 16-element loss. Cut at the
    # reductions, each step begins with the norm of the step before, the evaluation after it. Before, each
    # micro-batch was read as a step (16 steps, K = 1)
    run, ranks = _count("ds-zero3-ga4-reuse0-eval-every-2")
    psi, k = run["model"]["psi"], run["micro_batches"]
    n = len(run["groups"]["dp"][0])
    for entries in ranks:
        seq = [(e["profiling_name"], math.prod(e["input_sizes"][0])) for e in entries if e["input_sizes"]]
        forward = seq[-4:-1]  # the last evaluation batch: its 3 gathers, then its loss
        assert [op for op, _ in forward] == ["gloo:all_gather"] * 3 and sum(x for _, x in forward) == psi // n
        micro = forward + forward[::-1] + [("gloo:all_reduce", psi)]
        step = micro * k + [("gloo:all_reduce", 1)]
        evaluation = (forward + [("gloo:all_reduce", 16)]) * 2
        assert seq[-len(step) * 2 - len(evaluation):] == step * 2 + evaluation
    out, step = _checked("ds-zero3-ga4-reuse0-eval-every-2")
    assert (out["psi"], out["n"], out["micro_batches"], out["grad_sync"]) == (psi, n, k, "every")
    assert out["steps"] == 3 and "the 8 calls after every 2 steps" in out["steps_how"]
    assert step["calls_per_rank_per_step"] == 7 * k  # the norm is a scalar, counted apart
    # each reduction of Ψ, one bucket of 3 layers gathered one by one, is the reduce-scatter gloo records as
    # an all-reduce: read so, DeepSpeed ZeRO-3 regathering in backward, 2Ψ gathered and Ψ reduce-scattered
    # a micro-batch, each rank sending 3/4 of each, fp32
    buckets = sum(1 for entries in ranks for e in entries
                  if e["profiling_name"] == "gloo:all_reduce" and math.prod(e["input_sizes"][0]) == psi)
    assert out["all_reduces_read_as_reduce_scatters"] == buckets
    assert "deepspeed-zero3" in out["matches"]
    assert "deepspeed-zero3" in out["matches_if_parameters_gathered_again_in_backward"]
    assert step["bytes_per_rank_per_step"] == pytest.approx(k * 3 * psi * (n - 1) / n * 4)


def test_a_norm_vector_beside_reduce_scatters_recorded_as_all_reduces_is_no_gradient():
    # FSDP2 on 6 layers (12 parameter tensors), 4 micro-batches, clip_grad_norm_ before each optimizer step.
    # Counted from the dumps: a step is 4 blocks alike, each reducing Ψ in all-reduces (gloo records
    # FSDP2's reduce-scatters so), then one all-reduce of 12 elements (a partial norm per tensor). Counted
    # as a gradient, the norm broke the blocks' repetition: K = 1, Ψ 4×. Beside all-gathers on its group,
    # the all-reduces stand for reduce-scatters and the norm is scalar traffic, as in a profiler trace
    run, ranks = _count("fsdp2-6-layers-ga4-clip")
    psi, k = run["model"]["psi"], run["micro_batches"]
    for entries in ranks:
        seq = [(e["profiling_name"], math.prod(e["input_sizes"][0])) for e in entries]
        norms = [i for i, (op, n) in enumerate(seq) if (op, n) == ("gloo:all_reduce", 12)]
        assert len(norms) == run["optimizer_steps"]
        step = seq[norms[-2] + 1:norms[-1]]
        block = step[:len(step) // k]
        assert step == block * k and sum(n for op, n in block if op == "gloo:all_reduce") == psi
    out, _ = _checked("fsdp2-6-layers-ga4-clip")
    assert (out["psi"], out["n"], out["micro_batches"], out["grad_sync"]) == (psi, 4, k, "every")
    assert any("all-reduces of 12 elements" in n for n in out["notes"])


@pytest.mark.parametrize(("case", "matches"), [("hsdp-2x4-mixed-bf16-fp32-ga2", ["fsdp-hybrid"]),
                                               ("fsdp2-equal-layers-ga2-no-sync", ["fsdp-full-shard",
                                                                                   "fsdp-hybrid"])])
def test_real_dumps_of_two_micro_batches_reduced_in_the_second_read_as_two(case, matches):
    # FSDP2 with 2 micro-batches a step and set_requires_gradient_sync(False) on the first, no step markers
    # (one run HSDP on 2 × 4 ranks, bf16 parameters and fp32 reductions; the other 4 units on 4 ranks, 3 of
    # them of one size). Counted from the dumps:
    # each step gathers every unit in both micro-batches' forwards and backwards (4Ψ), more than half of its
    # gathers before its first reduction; it reduces each unit's whole once (over gloo, the reduce-scatter
    # recorded as an all-reduce), Ψ in all, and under HSDP all-reduces each shard (Ψ over the shard group)
    # on the replicate group. Before: K = 1, and no scheme for HSDP, none for the equal units
    run, ranks = _count(case)
    steps, psi = run["optimizer_steps"], run["model"]["psi"]
    shard = len(run["groups"]["shard"][0])
    for entries in ranks:
        assert len(entries) % steps == 0
        step = entries[:len(entries) // steps]
        gathers = [math.prod(e["output_sizes"][0]) for e in step if e["profiling_name"] == "gloo:all_gather"]
        reduced = [math.prod(e["input_sizes"][0]) for e in step if e["profiling_name"] == "gloo:all_reduce"]
        first = next(i for i, e in enumerate(step) if e["profiling_name"] == "gloo:all_reduce")
        assert sum(gathers) == 4 * psi and 2 * first > len(gathers)
        wholes = [r for r in reduced if r in set(gathers)]
        shards = psi // shard if "replicate" in run["groups"] else 0  # HSDP's all-reduces of the shards
        assert sum(wholes) == psi and sum(reduced) - psi == shards
    res = runner.invoke(app, ["check", str(FR / case), "--format", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert (out["psi"], out["n"], out["steps"], out["micro_batches"], out["grad_sync"]) == (
        psi, run["world_size"], steps, run["micro_batches"], "boundary")
    assert out["matches"] == matches


def test_a_real_dump_whose_first_gather_is_sequence_parallelisms_reads_as_deepspeed_zero2():
    # DeepSpeed ZeRO-2 on 4 ranks beside Ulysses sequence parallelism on pairs, one micro-batch. Counted from
    # the dumps: each step all-reduces the 106,688-element gradient on the group of 4, then a 0-d flag, then
    # gathers the 26,672-element partitions there; before the first of those, the step's first call with
    # data gathers token positions (int64) on the rank's pair. Before: that gather was taken for a sharded
    # forward's, and the all-reduces read as the reduce-scatters they may stand for (fsdp-shard-grad-op)
    run, ranks = _count("ds-ulysses2-zero2")
    for entries in ranks:
        data = [e for e in entries if e["profiling_name"] in ("gloo:all_gather", "gloo:all_reduce")
                and math.prod(e["input_sizes"][0]) > 1]
        assert data[0]["profiling_name"] == "gloo:all_gather" and data[0]["input_dtypes"] == ["Long"]
        pair = data[0]["process_group"][0]
        reducing = {e["process_group"][0] for e in entries if e["profiling_name"] == "gloo:all_reduce"}
        assert pair not in reducing
        grads = [math.prod(e["input_sizes"][0]) for e in entries if e["profiling_name"] == "gloo:all_reduce"
                 and math.prod(e["input_sizes"][0]) > 1]
        parts = [math.prod(e["output_sizes"][0]) for e in entries if e["profiling_name"] == "gloo:all_gather"
                 and e["input_dtypes"] == ["Float"]]
        assert grads == parts == [106_688] * run["optimizer_steps"]
    res = runner.invoke(app, ["check", str(FR / "ds-ulysses2-zero2"), "--format", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert (out["psi"], out["n"], out["steps"]) == (106_688, 4, run["optimizer_steps"])
    assert "deepspeed-zero2" in out["matches"] and "fsdp-shard-grad-op" not in out["matches"]


def test_a_real_dump_of_deepspeed_zero3_past_its_reuse_distance_reads_the_share_gathered_again():
    # DeepSpeed ZeRO-3 with stage3_max_reuse_distance 10,000 (the model's first layers past it), 2
    # micro-batches, no step markers, no backward pass. Counted from the dumps: after the first micro-batch,
    # each gathers the model's partitions once (Ψ in all) and then layers.1's and layers.0's again, then
    # reduces Ψ in one bucket (over gloo, an all-reduce of the whole); the share gathered again is what
    # the gathers bring past Ψ. Before: none (the share was read only where the trace marks the backward,
    # or from DeepSpeed's own comms log)
    run, ranks = _count("ds-zero3-past-reuse-distance-ga2")
    psi = run["model"]["psi"]
    for entries in ranks:
        blocks, gathered = [], 0
        for e in entries:
            if e["profiling_name"] == "gloo:all_gather":
                gathered += math.prod(e["output_sizes"][0])
            elif e["profiling_name"] == "gloo:all_reduce" and math.prod(e["input_sizes"][0]) == psi:
                blocks.append(gathered)
                gathered = 0
        assert len(blocks) == run["optimizer_steps"] * run["micro_batches"]
        assert set(blocks[1:]) == {psi + 55_648}  # the first micro-batch gathers its layers as it goes
    res = runner.invoke(app, ["check", str(FR / "ds-zero3-past-reuse-distance-ga2"), "--format", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert (out["psi"], out["n"], out["micro_batches"], out["grad_sync"]) == (psi, 4, 2, "every")
    assert out["matches"] == ["deepspeed-zero3"]
    (zero3,) = [s for s in out["schemes"] if s["scheme"] == "deepspeed-zero3"]
    assert zero3["share_gathered_again_in_backward"] == pytest.approx(55_648 / psi, rel=1e-9)
    assert any("marks no backward pass" in note for note in out["notes"])
