"""validate: ranks told apart by process when a trace records none, ``--steps K``, and the
step detector (a repeating pattern must carry data).

Expected values are worked out by hand from the NCCL lines written here or in tests/data/traces,
with the arithmetic next to each assertion.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from zerocalc.traces import read_traces
from zerocalc.validate import _repeating_suffix, check, measure

DATA = Path(__file__).parent / "data" / "traces"
NCCL = DATA / "nccl-debug"
GLOO_PSI = 377_856  # 256·512+512 + 512·384+384 + 384·128+128 (tests/test_validate.py)

# A real line of tests/data/traces/nccl-debug/ddp-allreduce-128ranks-L4-ray.txt (Ray prefix removed),
# with host, pid, opCount, count, datatype and nranks as fields. NCCL's datatype 6 is ncclFloat16.
LINE = ("{host}:{pid}:{tid} [{dev}] NCCL INFO AllReduce: opCount {op:x} sendbuff 0x78d056200000 "
        "recvbuff 0x78d056200000 count {count} datatype 6 op 0 root 0 comm 0x78cfda04{dev:04x} "
        "[nranks=4] stream 0x78d07125e5e0")


def _synthetic_log(path: Path) -> Path:
    """4 processes on 2 hosts, 3 steps of two fp16 gradient buckets (3,000,000 then 2,000,000
    elements), no ``Init COMPLETE`` lines (NCCL_DEBUG_SUBSYS=COLL): the trace records no rank."""
    procs = [("node0", 1000, 0), ("node0", 1001, 1), ("node1", 2000, 0), ("node1", 2001, 1)]
    lines = []
    for step in range(3):
        for b, count in enumerate((3_000_000, 2_000_000)):
            for host, pid, dev in procs:
                lines.append(LINE.format(host=host, pid=pid, tid=pid + 7, dev=dev, op=2 * step + b,
                                         count=count))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_ranks_without_rank_records_are_told_apart_by_process(tmp_path):
    ts = read_traces(_synthetic_log(tmp_path / "coll.txt"))
    assert ts.table["rank"].isna().all()  # the premise: no Init lines, no rank
    m = measure(ts.table, meta=ts.meta)
    # 4 processes (host:pid node0:1000, node0:1001, node1:2000, node1:2001)
    assert len(m.ranks) == 4 and m.n == 4 and m.steps == 3
    # Ψ = one step's gradient elements of ONE rank: 3,000,000 + 2,000,000
    assert m.psi == 5_000_000
    # ring all-reduce on 4 ranks: 2·3/4 · 5,000,000 · 2 B (fp16) = 15,000,000 B per rank per step
    assert m.bytes_per_rank_per_step == pytest.approx(2 * 3 / 4 * 5_000_000 * 2)
    assert m.comm_dtype == "fp16"
    assert "told apart by process" in m.ranks_how and "host" in m.ranks_how and "pid" in m.ranks_how
    assert m.ranks_how in m.notes
    # the true Ψ is accepted, not called a contradiction
    assert measure(ts.table, psi=5_000_000, meta=ts.meta).psi == 5_000_000
    assert check(ts.table, meta=ts.meta).matches[0] == "dp"


def test_ray_log_holds_three_processes():
    # pids 615, 22754 and 619 (the "host:pid:tid" prefixes of the four lines)
    ts = read_traces(NCCL / "ddp-allreduce-128ranks-L4-ray.txt")
    m = measure(ts.table, meta=ts.meta)
    assert len(m.ranks) == 3 and m.n == 128


def test_rccl_desync_wire_type_comes_from_the_gradient_all_reduces():
    # pid 45006 all-reduces fp32 (datatype 7) buckets of 9,984,512 and 8,149,504 elements; pid 45012
    # is stuck in an int8 all-gather (datatype 0). The wire type of the gradients is fp32.
    ts = read_traces(NCCL / "rccl-4ranks-allreduce-allgather.txt")
    m = measure(ts.table, meta=ts.meta)
    assert len(m.ranks) == 2
    assert m.comm_dtype == "fp32" and m.comm_elem_bytes == 4
    assert m.psi == 9_984_512 + 8_149_504


def test_known_ranks_are_kept():
    # ResNet's trace records rank 0: no process numbering, no note
    ts = read_traces(DATA / "kineto" / "ddp-resnet50-a100-rank0-of-2.json.gz")
    m = measure(ts.table, meta=ts.meta)
    assert m.ranks == (0,) and m.ranks_how == ""


def test_steps_1_is_the_whole_trace():
    # gloo ZeRO-3 without step markers: per rank, 6 init broadcasts and 3 steps of all-gather +
    # reduce-scatter (Ψ each) + a scalar all-reduce. As ONE step, the gradient reduce-scatters of
    # the step total 3Ψ.
    ts = read_traces(sorted((DATA / "deepspeed-gloo-zero3-n4" / "no-step-markers").glob("rank*.json.gz")))
    m = measure(ts.table, steps=1, meta=ts.meta)
    assert m.steps == 1 and "--steps 1" in m.steps_how
    assert m.psi == 3 * GLOO_PSI
    assert (m.calls["step_id"] == 0).all()  # nothing left out as "before the first step"


def test_scalar_all_reduces_are_not_a_step():
    # Rank 0 (pid 191369) ends in two scalar all-reduces (count 1): a "pattern" of scalars only.
    # The step is then the whole trace, and Ψ comes from the reduce-scatter: count 2097152 is the
    # recvcount, so the full vector is 2 · 2,097,152 = 4,194,304 elements.
    ts = read_traces(NCCL / "tp-allgather-reducescatter-2ranks.txt")
    m = measure(ts.table, meta=ts.meta)
    assert m.steps == 1 and m.psi == 4_194_304


def _brute_force(seq, want, min_period=1):
    """The definition, checked block by block (quadratic)."""
    m = len(seq)

    def reps(p):
        r = 1
        while (r + 1) * p <= m and seq[m - (r + 1) * p: m - r * p] == seq[m - p:]:
            r += 1
        return r

    if want is None:
        best = (0, 0)
        for p in range(max(min_period, 1), m // 2 + 1):
            r = reps(p)
            if r >= 2 and p * r > best[0] * best[1]:
                best = (p, r)
        return best
    ok = [p for p in range(1, m + 1) if reps(p) >= want]
    return (ok[-1], want) if ok else (0, 0)


def test_repeating_suffix_by_hand():
    assert _repeating_suffix(list("xxabcabcabc"), None) == (3, 3)
    assert _repeating_suffix(list("xxabcabcabc"), 3) == (3, 3)
    assert _repeating_suffix(list("xxabcabcabc"), 1) == (11, 1)  # K = 1: everything
    assert _repeating_suffix(list("xxabcabcabc"), 4) == (0, 0)
    assert _repeating_suffix(list("abababab"), 2) == (4, 2)  # the longest block seen twice
    # "xyss": the only repetition is the scalar pair; refused when a step must reach back to y
    assert _repeating_suffix(list("xyss"), None) == (1, 2)
    assert _repeating_suffix(list("xyss"), None, min_period=3) == (0, 0)


def test_repeating_suffix_agrees_with_the_definition():
    rng = random.Random(7)
    for _ in range(400):
        unit = [rng.choice("abc") for _ in range(rng.randint(1, 4))]
        seq = [rng.choice("abcd") for _ in range(rng.randint(0, 5))] + unit * rng.randint(1, 5)
        for want in (None, 1, 2, 3):
            for mp in (1, 2, 4):
                if want is not None and mp != 1:
                    continue
                assert _repeating_suffix(seq, want, min_period=mp) == _brute_force(seq, want, mp), (seq, want)


def _fr_dumps(tmp_path, entries_of):
    """Flight Recorder dumps of 2 ranks (gloo, one group of both), each with the entries ``entries_of``
    makes of (op, elements) pairs (an all-gather's output: both ranks' elements; a reduce-scatter's: half)."""
    import json

    for r in (0, 1):
        entries = [{"record_id": i, "process_group": ["1", "dp"], "collective_seq_id": i + 1,
                    "profiling_name": f"gloo:{op}", "input_sizes": [[n]],
                    "output_sizes": [[{"all_gather": 2 * n, "reduce_scatter": n // 2}.get(op, n)]],
                    "input_dtypes": ["Float"], "state": "scheduled"} for i, (op, n) in enumerate(entries_of)]
        doc = {"version": "2.10", "entries": entries,
               "pg_config": {"1": {"name": "1", "desc": "dp", "ranks": "[0, 1]"}}}
        (tmp_path / f"rank{r}.json").write_text(json.dumps(doc))
    return read_traces(str(tmp_path))


def test_a_closing_scalar_does_not_make_the_run_one_step(tmp_path):
    # 4 steps of two bucket all-reduces (300 and 200 elements), then a closing scalar all-reduce (a loss)
    ts = _fr_dumps(tmp_path, [("broadcast", 500)] + [("all_reduce", 300), ("all_reduce", 200)] * 4
                   + [("all_reduce", 1)])
    m = measure(ts.table, meta=ts.meta)
    assert (m.steps, m.psi) == (4, 500)
    assert "1 call(s) without data after the last repetition" in m.steps_how
    # before the scalar closed it, the same run: the same steps
    ts = _fr_dumps(tmp_path, [("broadcast", 500)] + [("all_reduce", 300), ("all_reduce", 200)] * 4)
    assert (measure(ts.table, meta=ts.meta).steps, measure(ts.table, meta=ts.meta).psi) == (4, 500)


def test_one_step_of_equal_buckets_stays_one_step(tmp_path):
    # one step whose three buckets are alike, then a scalar: as likely three buckets as three steps, so
    # the whole trace stays one step, as it was before a closing call was set apart
    ts = _fr_dumps(tmp_path, [("broadcast", 900)] + [("all_reduce", 300)] * 3 + [("all_reduce", 1)])
    m = measure(ts.table, meta=ts.meta)
    assert (m.steps, m.psi) == (1, 900)


def test_a_bucket_the_size_of_a_gather_leaves_the_small_buckets_gradients(tmp_path):
    # DeepSpeed ZeRO-2 on 2 ranks by hand, Ψ = 80,200: each step all-reduces 3 gradient buckets (40,100,
    # 39,900 and 200 elements), checks a 1-element overflow flag, and gathers the updated partitions in
    # 2 buckets (20,050 each rank: 40,100 each). One bucket is the size of a gather, as a gloo dump's
    # reduce-scatter of a unit would be; the others are not: the all-reduces are buckets, the 200 one a
    # gradient too (under 1/64 of the step, read as a norm vector it left Ψ = 80,000)
    step = [("all_reduce", 40_100), ("all_reduce", 39_900), ("all_reduce", 200), ("all_reduce", 1),
            ("all_gather", 20_050), ("all_gather", 20_050)]
    ts = _fr_dumps(tmp_path, [("broadcast", 80_200)] + step * 4)
    m = measure(ts.table, meta=ts.meta)
    assert (m.steps, m.psi) == (4, 80_200)


STEPS = [("broadcast", 500)] + [("all_reduce", 3000), ("all_reduce", 2000)] * 4  # 4 steps of Ψ = 5,000


@pytest.mark.parametrize("after, tail", [
    ([("all_gather", 5000)], 1),  # a checkpoint gathering the model
    ([("all_reduce", 400)] * 3, 3),  # evaluation: three metric all-reduces (alike, so repeating)
    ([("all_reduce", 3000)], 1),  # a step cut short after its first bucket: the buckets seen as rotated
])
def test_calls_with_data_after_the_last_step_are_one_off(tmp_path, after, tail):
    m = measure(_fr_dumps(tmp_path, STEPS + after).table, meta=_fr_dumps(tmp_path, STEPS + after).meta)
    assert (m.steps, m.psi) == (4, 5000)
    if after[0][1] != 3000:
        assert f"{tail} call(s) after the last repetition (evaluation, a checkpoint" in m.steps_how
    # without them, the same steps
    ts = _fr_dumps(tmp_path, STEPS)
    assert (measure(ts.table, meta=ts.meta).steps, measure(ts.table, meta=ts.meta).psi) == (4, 5000)


def test_one_step_of_alike_layers_stays_one_step(tmp_path):
    # one FSDP-like step of 6 equal layers: 6 forward gathers, then a gather and a reduce-scatter each in
    # backward, then the embedding's reduce-scatter. The (gather, reduce-scatter) pairs repeat 6 times,
    # but the 6 forward gathers before them carry as much as 6 pairs' gathers: a part of one step
    ts = _fr_dumps(tmp_path, [("all_gather", 100)] * 6 + [("all_gather", 100), ("reduce_scatter", 200)] * 6
                   + [("reduce_scatter", 80)])
    m = measure(ts.table, meta=ts.meta)
    assert m.steps == 1
    assert "whole trace is taken as one step" in m.steps_how


def test_micro_batches_that_reduce_at_the_last_show_in_a_trace_without_step_markers(tmp_path):
    # 3 optimizer steps of 4 micro-batches, FSDP with set_requires_gradient_sync(False) on the first 3:
    # each micro-batch gathers both units (100 and 200 elements a rank, group of 2), the last also
    # reduce-scatters their gradients (400 and 200 elements in, 200 and 100 out). No step markers: the
    # repeating step is 4 blocks of gathers with the reductions in the last
    mb = [("all_gather", 100), ("all_gather", 200)]
    step = mb * 3 + [("all_gather", 100), ("reduce_scatter", 400), ("all_gather", 200),
                     ("reduce_scatter", 200)]
    m = measure(_fr_dumps(tmp_path, step * 3).table, meta=_fr_dumps(tmp_path, step * 3).meta)
    assert (m.steps, m.micro_batches, m.grad_sync) == (3, 4, "boundary")
    assert "it marks no optimizer steps" in m.micro_batches_how
    # reductions in every micro-batch: the repeating block is one micro-batch, as like a step as not
    every = (mb + [("reduce_scatter", 400), ("reduce_scatter", 200)]) * 12
    m = measure(_fr_dumps(tmp_path, every).table, meta=_fr_dumps(tmp_path, every).meta)
    assert (m.steps, m.micro_batches) == (12, 1)
    assert "cannot be told from steps" in m.micro_batches_how


def test_equal_buckets_and_a_loss_are_not_micro_batches_without_step_markers(tmp_path):
    # DDP steps of three equal buckets, then the loss all-reduced (a scalar): the buckets repeat inside the
    # step, and nothing but a scalar follows them, so they are as likely one step's buckets as micro-batches
    step = [("all_reduce", 3000)] * 3 + [("all_reduce", 1)]
    m = measure(_fr_dumps(tmp_path, step * 4).table, meta=_fr_dumps(tmp_path, step * 4).meta)
    assert (m.steps, m.micro_batches, m.psi) == (4, 1, 9000)
    # the same buckets then a gather of the updated shards (ZeRO's optimizer step): micro-batches
    step = [("all_reduce", 3000)] * 3 + [("all_reduce", 1), ("all_gather", 1500)]
    m = measure(_fr_dumps(tmp_path, step * 4).table, meta=_fr_dumps(tmp_path, step * 4).meta)
    assert (m.steps, m.micro_batches, m.grad_sync, m.psi) == (4, 3, "every", 3000)


def test_a_long_evaluation_after_the_steps_is_not_taken_for_them(tmp_path):
    # 3 FSDP-like steps (gathers of 1,500 and 1,000 elements a rank, reduce-scatters of their 3,000 and
    # 2,000-element gradients), then 20 evaluation batches (the same gathers and a 16-element loss
    # all-reduce each: more bytes than the steps, and repeating to the end but for a checkpoint's gathers)
    step = [("all_gather", 1500), ("all_gather", 1000), ("reduce_scatter", 3000), ("reduce_scatter", 2000)]
    evaluation = [("all_gather", 1500), ("all_gather", 1000), ("all_reduce", 16)] * 20
    for checkpoint in ([], [("all_gather", 1500), ("all_gather", 1000)]):
        ts = _fr_dumps(tmp_path, step * 3 + evaluation + checkpoint)
        m = measure(ts.table, meta=ts.meta)
        assert (m.steps, m.psi) == (3, 5000)
        assert f"{len(evaluation) + len(checkpoint)} call(s) after the last repetition" in m.steps_how


STEP = [("all_gather", 1500), ("all_gather", 1000), ("reduce_scatter", 3000), ("reduce_scatter", 2000)]


@pytest.mark.parametrize("every", [2, 3])
def test_an_evaluation_every_few_steps_is_between_steps(tmp_path, every):
    # FSDP-like steps (Ψ = 5,000) and after every 2nd (3rd) an evaluation: 2 batches of the same gathers and
    # a 16-element loss all-reduce. Before, the block of the steps and the evaluation was one step
    evaluation = [("all_gather", 1500), ("all_gather", 1000), ("all_reduce", 16)] * 2
    ts = _fr_dumps(tmp_path, [("broadcast", 5000)] + (STEP * every + evaluation) * 3)
    m = measure(ts.table, meta=ts.meta)
    assert (m.steps, m.psi) == (3 * every, 5000)
    assert f"the {len(evaluation)} calls after every {every} steps" in m.steps_how
    # per step, on 2 ranks (a ring sends 1/2 of the full vector): gathers into 3,000 + 2,000 elements and
    # reduce-scatters of 3,000 + 2,000, fp32; the evaluation's calls are not in it
    assert m.bytes_per_rank_per_step == pytest.approx((5000 / 2 + 5000 / 2) * 4)


def test_the_step_after_an_evaluation_may_gather_once_more(tmp_path):
    # the step after the evaluation gathers its first unit once more in backward (the evaluation left it
    # resharded, as FSDP2 does): the two steps differ by that call, and are still two steps
    after = [("all_gather", 1500), ("all_gather", 1000), ("all_gather", 1500), ("reduce_scatter", 3000),
             ("reduce_scatter", 2000)]
    evaluation = [("all_gather", 1500), ("all_gather", 1000), ("all_reduce", 16)]
    ts = _fr_dumps(tmp_path, [("broadcast", 5000)] + (after + STEP + evaluation) * 3)
    m = measure(ts.table, meta=ts.meta)
    assert (m.steps, m.psi) == (6, 5000)


def test_micro_batches_and_the_optimizers_gather_are_not_steps_and_an_evaluation(tmp_path):
    # 4 micro-batches reducing 3,000 + 2,000 elements each, then the optimizer's gather of the updated
    # shards (DeepSpeed ZeRO-2): the gather is none of a micro-batch's calls, so the block stays one step
    step = [("all_reduce", 3000), ("all_reduce", 2000)] * 4 + [("all_gather", 2500)]
    ts = _fr_dumps(tmp_path, [("broadcast", 5000)] + step * 3)
    m = measure(ts.table, meta=ts.meta)
    assert (m.steps, m.micro_batches, m.psi) == (3, 4, 5000)
    # a gather that sends more than the evaluation's forward would, between two steps' reductions: one step
    step = [("all_reduce", 3000), ("all_reduce", 2000)] * 2 + [("all_gather", 9000)]
    ts = _fr_dumps(tmp_path, [("broadcast", 5000)] + step * 3)
    assert measure(ts.table, meta=ts.meta).steps == 3


def test_micro_batches_that_each_reduce_then_a_loss_are_not_steps_and_an_evaluation(tmp_path):
    # 4 micro-batches that each gather and reduce-scatter (ZeRO-3), then the loss all-reduced (a scalar):
    # nothing of a forward between the reductions, so the block of 4 stays one step
    mb = [("all_gather", 1500), ("all_gather", 1000), ("reduce_scatter", 3000), ("reduce_scatter", 2000)]
    ts = _fr_dumps(tmp_path, [("broadcast", 5000)] + (mb * 4 + [("all_reduce", 1)]) * 3)
    m = measure(ts.table, meta=ts.meta)
    assert m.steps == 3 and "evaluation" not in m.steps_how


def test_a_block_without_reductions_is_not_split():
    from zerocalc.validate.block_steps import _steps_in_block

    # a gather (code 0) and a reduce-scatter (code 1) twice, then the gather again (an evaluation's forward)
    block = np.array([0, 1, 0, 1, 0])
    load = np.array([100.0, 200.0, 100.0, 200.0, 100.0])
    reduces = block == 1
    labels, late, lent = _steps_in_block(block, load, load > 0, reduces)
    # both steps in this block, nothing of the evaluation lent to them
    assert labels.tolist() == [0, 0, 1, 1, -1] and not late[labels >= 0].any() and lent == 0
    # without reductions there are no gradients to count steps by
    assert _steps_in_block(block, load, load > 0, np.zeros(5, dtype=bool)) is None
    # a loss all-reduce (tiny, none of a step's calls) in place of the gather: as likely micro-batches
    block, load = np.array([0, 1, 0, 1, 2]), np.array([100.0, 200.0, 100.0, 200.0, 1.0])
    assert _steps_in_block(block, load, load > 0, block == 1) is None


def test_an_evaluation_whose_gather_the_next_step_keeps_is_between_steps(tmp_path):
    # DeepSpeed ZeRO-3 (as tests/data/traces/flight-recorder/ds-zero3-ga4-eval-every-2 records it), no step
    # markers: a micro-batch gathers the model (1,000 elements a rank into 2,000) and reduces its 2,000
    # gradients (gloo: an all-reduce of the whole); 4 of them and a gradient norm (1 element) a step; after
    # every 2nd step an evaluation gathers the model and all-reduces two 16-element losses, and the step
    # after it keeps that gather (its first micro-batch gathers nothing). Every reduction is the same call,
    # so the block of 2 steps and an evaluation reads as 8 steps of a micro-batch too; the reading whose
    # steps all look alike but where the evaluation is: 2 steps of 4 micro-batches a block
    mb = [("all_gather", 1000), ("all_reduce", 2000)]
    evaluation = [("all_gather", 1000), ("all_reduce", 16), ("all_reduce", 16)]
    step, kept = mb * 4 + [("all_reduce", 1)], mb[1:] + mb * 3 + [("all_reduce", 1)]
    ts = _fr_dumps(tmp_path, [("broadcast", 2000)] + step + evaluation + (kept + step + evaluation) * 3)
    m = measure(ts.table, meta=ts.meta)
    # 3 blocks of 2 steps; the first step after the first evaluation kept a gather before the run began
    assert (m.steps, m.micro_batches, m.grad_sync, m.psi) == (5, 4, "every", 2000)
    assert "the 2 calls after every 2 steps" in m.steps_how
    assert "they follow 1 call of a step's own that counts in the step after" in m.steps_how
    # FSDP1 SHARD_GRAD_OP (flight-recorder/fsdp1-shard-grad-op-eval-every-2): one micro-batch, 3 layers'
    # gathers kept for backward, then their 3 reductions; the evaluation's gathers kept for the next step
    gathers = [("all_gather", 3000), ("all_gather", 2000), ("all_gather", 1000)]
    reduces = [("all_reduce", 2000), ("all_reduce", 4000), ("all_reduce", 6000)]
    evaluation = gathers + [("all_reduce", 16), ("all_reduce", 16)]
    ts = _fr_dumps(tmp_path, [("broadcast", 12000)] + (gathers + reduces + evaluation + reduces) * 3)
    m = measure(ts.table, meta=ts.meta)
    assert (m.steps, m.micro_batches, m.psi) == (6, 1, 12000)  # 3 blocks of 2 steps
    assert "they follow 3 calls of a step's own that count in the step after" in m.steps_how


def test_an_evaluation_after_a_steps_closing_scalar_is_between_steps(tmp_path):
    # DeepSpeed ZeRO-3 without reuse or prefetch (stage3_max_reuse_distance 0), no step markers: a
    # micro-batch gathers 3 layers in its forward and again, in reverse, in its backward (500, 300 and
    # 200 elements a rank), then reduces its 2,000 gradients; 4 of them and a gradient norm a step. After
    # every 2nd step an evaluation: 2 batches of the 3 forward gathers and a 16-element loss. Cut at the
    # reductions, each step begins with the step before's norm, and the evaluation falls after it: the
    # evaluation is between steps all the same, and the block 2 steps of 4 micro-batches (before: 8 steps
    # of a micro-batch each, the norm and the evaluation between them)
    fwd = [("all_gather", 500), ("all_gather", 300), ("all_gather", 200)]
    mb = fwd + fwd[::-1] + [("all_reduce", 2000)]
    step = mb * 4 + [("all_reduce", 1)]
    evaluation = (fwd + [("all_reduce", 16)]) * 2
    ts = _fr_dumps(tmp_path, [("broadcast", 2000)] + (step + step + evaluation) * 3)
    m = measure(ts.table, meta=ts.meta)
    # 6 steps; the run's blocks begin after the first (its 29 calls one-off), as the blocks repeat
    assert (m.steps, m.micro_batches, m.psi) == (5, 4, 2000)
    assert "the 8 calls after every 2 steps" in m.steps_how and "29 call(s) before" in m.steps_how


def test_an_evaluation_kept_gathered_and_a_gather_sent_again_in_the_step_after(tmp_path):
    # FSDP2 without resharding after forward: a step gathers 3 layers (kept for backward) and reduces
    # them in reverse; an evaluation every 2nd step gathers the 3 layers and all-reduces two 16-element
    # losses; the step after it keeps those gathers but gathers the last layer once more in its backward.
    # The evaluation's losses are between steps, its gathers lent to the step after, the gather again
    # one-off (before: the 2 steps and the evaluation one step, Ψ 2×)
    gathers = [("all_gather", 3000), ("all_gather", 2000), ("all_gather", 1000)]
    reduces = [("all_reduce", 2000), ("all_reduce", 4000), ("all_reduce", 6000)]
    after = reduces[:2] + [gathers[2]] + reduces[2:]
    evaluation = gathers + [("all_reduce", 16), ("all_reduce", 16)]
    ts = _fr_dumps(tmp_path, [("broadcast", 12000)] + (gathers + reduces + evaluation + after) * 3)
    m = measure(ts.table, meta=ts.meta)
    assert (m.steps, m.micro_batches, m.psi) == (6, 1, 12000)
    assert "sends again (1 call: " in m.steps_how
    assert "they follow 3 calls of a step's own that count in the step after" in m.steps_how


def test_micro_batches_given_on_steps_that_each_reduce_once_say_both_readings(tmp_path):
    # 12 blocks of an FSDP2-like micro-batch (gathers of 1,500 and 1,000 elements a rank, then both
    # reduce-scatters), no step markers: as likely 12 optimizer steps whose 3 earlier micro-batches of 4
    # send nothing (no_sync) as 3 steps of 4 micro-batches that each reduce. Given K = 4, the gradients
    # reduce once a step found; the sentence says so and how --steps reads the other (before: "once per
    # optimizer step" alone)
    mb = [("all_gather", 1500), ("all_gather", 1000), ("reduce_scatter", 3000), ("reduce_scatter", 2000)]
    ts = _fr_dumps(tmp_path, [("broadcast", 5000)] + mb * 12)
    m = measure(ts.table, meta=ts.meta, micro_batches=4)
    assert (m.steps, m.micro_batches, m.grad_sync, m.psi) == (12, 4, "boundary", 5000)
    assert "each step found is a micro-batch, and --steps N" in m.grad_sync_how
    # with the optimizer steps given too, K of the blocks are one step, each reducing
    m = measure(ts.table, meta=ts.meta, micro_batches=4, steps=3)
    assert (m.steps, m.micro_batches, m.grad_sync, m.psi) == (3, 4, "every", 5000)


def test_a_scalar_every_micro_batch_and_one_a_step_stay_micro_batches(tmp_path):
    # ZeRO-3-like micro-batches that each all-reduce their loss (Lightning's sync_dist), then a gradient
    # norm a step: the norm sits in one of the 4 stretches the reductions cut the step into, as an
    # evaluation's loss would, but before any of the step's own calls: no evaluation's gather kept, so one
    # step of 4 micro-batches
    mb = [("all_gather", 1000), ("all_reduce", 2000), ("all_reduce", 1)]
    ts = _fr_dumps(tmp_path, [("broadcast", 2000)] + (mb * 4 + [("all_reduce", 2)]) * 3)
    m = measure(ts.table, meta=ts.meta)
    assert (m.steps, m.micro_batches, m.psi) == (3, 4, 2000)


def test_blocks_that_gather_what_they_reduce_then_a_scalar_are_micro_batches(tmp_path):
    # 3 steps of 4 micro-batches that each gather 1,500 + 1,000 elements a rank (into 3,000 + 2,000) and
    # reduce-scatter their 3,000 + 2,000 gradients, then a gradient norm all-reduced (ZeRO-3, FSDP with
    # clip_grad_norm_): each block is a whole forward and backward, so the step is 4 micro-batches of Ψ
    mb = [("all_gather", 1500), ("all_gather", 1000), ("reduce_scatter", 3000), ("reduce_scatter", 2000)]
    ts = _fr_dumps(tmp_path, [("broadcast", 5000)] + (mb * 4 + [("all_reduce", 1)]) * 3)
    m = measure(ts.table, meta=ts.meta)
    assert (m.steps, m.micro_batches, m.grad_sync, m.psi) == (3, 4, "every", 5000)
    # DDP's buffers broadcast in each forward beside its buckets, then a loss: less gathered than reduced,
    # as likely one step's buckets as micro-batches, so one micro-batch of all three buckets
    step = [("broadcast", 100), ("all_reduce", 3000)] * 3 + [("all_reduce", 1)]
    ts = _fr_dumps(tmp_path, step * 4)
    m = measure(ts.table, meta=ts.meta)
    assert (m.steps, m.micro_batches, m.psi) == (4, 1, 9000)


def test_a_trace_cut_mid_step_reads_its_micro_batches_in_the_steps_phase(tmp_path):
    # 3 steps of DeepSpeed ZeRO-2 with 4 micro-batches (each all-reduces 3,000 + 2,000 elements), an overflow
    # flag and the optimizer's gather of the updated shards, after the model's broadcast; then the 4th step
    # cut short after 2 of its calls, as a run stopped mid-step logs it. Found from the end, each step
    # begins inside one; the calls before the first end in the moved calls, so the steps' phase is the
    # one that reads as micro-batches
    step = [("all_reduce", 3000), ("all_reduce", 2000)] * 4 + [("all_reduce", 1), ("all_gather", 2500)]
    for cut in range(1, len(step) - 1):
        ts = _fr_dumps(tmp_path, [("broadcast", 5000)] + step * 3 + step[:cut])
        m = measure(ts.table, meta=ts.meta)
        assert (m.micro_batches, m.grad_sync, m.psi) == (4, "every", 5000), cut


def test_equal_layers_after_a_first_step_that_differs_are_not_cut_steps():
    from zerocalc.validate.step_blocks import cut_phase

    # one FSDP-like step of 3 equal layers, one micro-batch: 3 forward gathers (code 0, 500 elements a
    # rank into 1,000), then a gather and a reduce-scatter (code 1, 1,000 elements) a layer in backward.
    # The calls before the first step end in a backward (the first step's forward differed): moved to the
    # front, the last 6 calls would read as 3 blocks that each gather and reduce a layer, then gathers.
    # Those are the next forward's: no phase is taken, and the step stays as found
    codes = [0, 0, 0] + [0, 1] * 3
    grad = [c == 1 for c in codes]
    args = (codes, grad, [True] * 9, [1000.0] * 9)
    assert cut_phase(args, [2, 0, 1, 0, 1, 0, 1]) is None
    # the same calls, an optimizer's gather after blocks that reduce alone (DeepSpeed ZeRO-2, code 2, the
    # shards of 3,000 elements): moved to the front, 3 micro-batches
    codes = [1, 1, 2, 1]
    args = (codes, [True, True, False, True], [True] * 4, [1000.0, 1000.0, 3000.0, 1000.0])
    assert cut_phase(args, [5, 1, 1, 2, 1])[:2] == (3, "every")


def test_one_expert_a_rank_counts_in_psi_and_its_group_of_one_moves_nothing(tmp_path):
    # DeepSpeed MoE with expert parallelism over the whole world of 4, one expert a rank, as NCCL Flight
    # Recorder dumps list it (pg_config with each group's ranks): each step the tokens go by 4 all-to-alls
    # on the world, the dense gradients (44,064) are all-reduced on the 4 and the rank's expert's (61,792)
    # on its expert-data-parallel group of the rank alone, which DeepSpeed 0.19.8 still all-reduces on (a
    # gloo run of this layout, ep_size 4, recorded those calls on 4 groups, each in one rank's dump).
    # Ψ is the rank's parameters: 44,064 + 61,792; the group of one sends nothing, so dp matches on the dense
    # part. Before, Ψ was the dense part alone and the experts' reductions were reported apart
    import json

    dense, expert = 44_064, 61_792
    world = ["0", "default_pg"]
    pg = {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"}}
    pg.update({str(q + 1): {"name": str(q + 1), "desc": "edp", "ranks": f"[{q}]"} for q in range(4)})
    for r in range(4):
        calls = ([("all_to_all", 4 * 8 * 192, world)] * 4
                 + [("all_reduce", dense, world), ("all_reduce", expert, [str(r + 1), "edp"])]) * 3
        entries = [{"record_id": i, "process_group": g, "collective_seq_id": i,
                    "profiling_name": f"nccl:{op}", "input_sizes": [[n]], "output_sizes": [[n]],
                    "input_dtypes": ["Float"], "state": "completed"} for i, (op, n, g) in enumerate(calls)]
        (tmp_path / f"rank{r}.json").write_text(json.dumps({"version": "2.10", "entries": entries,
                                                            "pg_config": pg}))
    ts = read_traces(str(tmp_path))
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert (m.psi, m.n, m.steps, m.expert_size, m.expert_psi) == (dense + expert, 4, 3, 1, expert)
    assert res.matches == ("dp",)
    # the dense gradients alone are sent: 2 × 3/4 of 44,064 fp32 elements a step
    assert m.bytes_per_rank_per_step == pytest.approx(2 * dense * 3 / 4 * 4, rel=1e-9)


def test_hsdp_replicate_all_reduces_of_small_units_are_gradients(tmp_path):
    # HSDP 2 × 2 on 4 ranks in the NCCL dump format (each group's ranks listed), a model of 70 units of
    # 1,000 to 1,552 elements: each step gathers every unit on the shard group in the forward, then in the
    # backward gathers it again, reduce-scatters it there and all-reduces its shard (half) on the replicate
    # group, a group of the shard group's size. Each all-reduce is under 1/100 of what the step
    # reduce-scatters, as small beside the step as a clipping norm, but it reduces a shard a reduce-scatter
    # left: a gradient. Ψ = the units' sum, fsdp-hybrid
    import json

    units = 70
    shard = {0: "1", 1: "1", 2: "2", 3: "2"}
    replicate = {0: "3", 1: "4", 2: "3", 3: "4"}
    pg = {"1": "[0, 1]", "2": "[2, 3]", "3": "[0, 2]", "4": "[1, 3]"}
    sizes = [1000 + 8 * u for u in range(units)]  # distinct, so that each call names its unit
    for r in range(4):
        calls = []
        for _ in range(3):
            calls += [("all_gather", e // 2, e, shard[r]) for e in sizes]
            for e in reversed(sizes):
                calls += [("all_gather", e // 2, e, shard[r]), ("reduce_scatter", e, e // 2, shard[r]),
                          ("all_reduce", e // 2, e // 2, replicate[r])]
        entries = [{"record_id": i, "process_group": [g, "pg"], "collective_seq_id": i,
                    "profiling_name": f"nccl:{op}", "input_sizes": [[n]], "output_sizes": [[o]],
                    "input_dtypes": ["Float"], "state": "completed"} for i, (op, n, o, g) in enumerate(calls)]
        doc = {"version": "2.10", "entries": entries,
               "pg_config": {g: {"name": g, "desc": "pg", "ranks": ranks} for g, ranks in pg.items()}}
        (tmp_path / f"rank{r}.json").write_text(json.dumps(doc))
    ts = read_traces(str(tmp_path))
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert (m.psi, m.n, m.shard_size, m.steps) == (sum(sizes), 4, 2, 3)
    assert "fsdp-hybrid" in res.matches
    assert not any("count as scalar traffic" in n for n in m.notes)


def _marked_steps(sizes: list[int], steps: int = 3, ranks: int = 2):
    """A canonical table of ``ranks`` ranks, each marking ``steps`` steps of fp32 all-reduces of ``sizes``
    on the group of all of them (as a profiler trace's ProfilerStep marks them)."""
    import pandas as pd

    from zerocalc.traces.schema import CANONICAL_COLUMNS

    rows = [{"file": f"rank{r}", "rank": r, "step": s, "op": "all_reduce", "dtype": "fp32", "elem_bytes": 4,
             "in_nelems": n, "out_nelems": n, "group_size": ranks, "start_s": float(s * 100 + i)}
            for r in range(ranks) for s in range(1, steps + 1) for i, n in enumerate(sizes)]
    t = pd.DataFrame(rows)
    for col, dtype in CANONICAL_COLUMNS.items():
        t[col] = t[col].astype(dtype) if col in t else pd.Series([pd.NA] * len(t), dtype=dtype)
    return t[list(CANONICAL_COLUMNS)]


@pytest.mark.parametrize("sizes, sync", [
    ([1000, 500, 1000], "boundary"),  # unlike: one bucket size twice, another once
    ([1000, 500, 500, 1000], "boundary"),  # twice each: no multiple of 4
    ([1000] * 4 + [500] * 4, "every"),  # 4 times each: once a micro-batch
    ([1000, 500], "boundary"),  # once each
])
def test_given_k_the_gradient_calls_recurring_no_multiple_of_k_are_reduced_at_the_boundary(sizes, sync):
    # K = 4 given, nothing repeats back to back inside a marked step: each micro-batch reducing would send
    # each of its buckets once, so each call a multiple of 4 times a step; buckets that recur otherwise (a
    # model's equal layers in buckets of one size beside others: DeepSpeed ZeRO-1's buckets of
    # reduce_bucket_size beside the rest) are reduced once, at the boundary. Ψ is the step's either way
    m = measure(_marked_steps(sizes), micro_batches=4)
    assert (m.micro_batches, m.grad_sync) == (4, sync)
    assert m.psi == (sum(sizes) // 4 if sync == "every" else sum(sizes))
