"""check on real gloo runs: each checks as the scheme that ran, with Ψ given and inferred, N = the
data-parallel group, every call priced at its own dtype and group.

Expected values are the runs' counts (tests/data/traces/real-runs/README.md, expected.json), and bytes
are that arithmetic under the ring accounting: a rank sends 2(p-1)/p of an all-reduce's vector and
(p-1)/p of an all-gather's or reduce-scatter's (Thakur, Rabenseifner & Gropp 2005).
"""

import gzip
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from zerocalc.errors import TraceMismatchError
from zerocalc.traces import read_traces
from zerocalc.validate import check

RUNS = Path(__file__).parent / "data" / "traces" / "real-runs"
PSI = 24_768 + 30_880 + 15_456  # the three layers (README: Ψ = 71,104)

#: case → (scheme that ran, N, HSDP shard size, bytes per rank per step from the README's counts)
CASES = {
    # 6 bf16 all-gathers of 2Ψ in all and 3 fp32 reduce-scatters of Ψ, on 4
    "fsdp2-mixed-bf16-fp32": ("fsdp-full-shard", 4, None, 2 * PSI * 3 / 4 * 2 + PSI * 3 / 4 * 4),
    # fp32 on the shard group of 2: all-gathers of 2Ψ, reduce-scatters of Ψ; the shards' all-reduce of Ψ/2
    # on the replicate group of 2
    "hsdp-2x2": ("fsdp-hybrid", 4, 2, 2 * PSI / 2 * 4 + PSI / 2 * 4 + PSI / 2 * 2 * 1 / 2 * 4),
    # one fp32 all-reduce of Ψ on the data-parallel group of 2 (world 4)
    "ddp-subgroup-dp2-of-4": ("dp", 2, None, PSI * 2 * 1 / 2 * 4),
    # one bf16 all-reduce of Ψ on 4
    "ddp-bf16": ("dp", 4, None, PSI * 2 * 3 / 4 * 2),
    # fp16 all-reduce of Ψ (compress hook), fp32 broadcasts of the shards (Ψ in all, one root each)
    "ddp-zero-ro-fp16-hook": ("torch-zero1", 4, None, PSI * 2 * 3 / 4 * 2 + PSI * 3 / 4 * 4),
    # FSDP1 over gloo gathers with c10d::allgather_ into a list (no output size on the op): each unit's flat
    # parameter gathered in forward and again in backward, 2Ψ, and Ψ reduce-scattered, fp32 on 4
    "fsdp1-full-shard": ("fsdp-full-shard", 4, None, 2 * PSI * 3 / 4 * 4 + PSI * 3 / 4 * 4),
    # the same gathers in bf16 (MixedPrecision param_dtype), the reduce-scatters in fp32
    "fsdp1-mixed-bf16-fp32": ("fsdp-full-shard", 4, None, 2 * PSI * 3 / 4 * 2 + PSI * 3 / 4 * 4),
    # HYBRID_SHARD on shard groups of 2: as hsdp-2x2
    "fsdp1-hybrid-2x2": ("fsdp-hybrid", 4, 2, 2 * PSI / 2 * 4 + PSI / 2 * 4 + PSI / 2 * 2 * 1 / 2 * 4),
    # SHARD_GRAD_OP inside the shard group of 2: one all-gather of Ψ (the forward's, kept for the backward),
    # the reduce-scatters of Ψ and the shards' all-reduce on the replicate group as in hsdp-2x2
    "hsdp-2x2-no-reshard": ("fsdp-hybrid", 4, 2, PSI / 2 * 4 + PSI / 2 * 4 + PSI / 2 * 2 * 1 / 2 * 4),
    "fsdp1-hybrid-zero2-2x2": ("fsdp-hybrid", 4, 2, PSI / 2 * 4 + PSI / 2 * 4 + PSI / 2 * 2 * 1 / 2 * 4),
    # the same two runs under torch 2.4.1: the same calls (README), so the same reading
    "torch2.4-ddp-zero-ro-fp16-hook": ("torch-zero1", 4, None, PSI * 2 * 3 / 4 * 2 + PSI * 3 / 4 * 4),
    "torch2.4-fsdp1-hybrid-2x2": ("fsdp-hybrid", 4, 2,
                                  2 * PSI / 2 * 4 + PSI / 2 * 4 + PSI / 2 * 2 * 1 / 2 * 4),
    # HSDP and DeepSpeed ZeRO-3 under torch 2.14.1 (DeepSpeed 0.19.8): the same calls as under torch 2.13
    "torch2.14-hsdp-2x2": ("fsdp-hybrid", 4, 2, 2 * PSI / 2 * 4 + PSI / 2 * 4 + PSI / 2 * 2 * 1 / 2 * 4),
    # Hugging Face Trainer's DDP: one fp32 all-reduce of Ψ on 4, after its two gathers of the step's item
    # count (one element a rank, before the forward): one micro-batch, not two
    "hf-trainer-ddp": ("dp", 4, None, PSI * 2 * 3 / 4 * 4),
}


@pytest.fixture(scope="module")
def traces():
    return {c: read_traces(RUNS / c) for c in CASES}


def _world(case):
    e = json.loads((RUNS / case / "expected.json").read_text())
    return {v["world_size"] for v in e["ranks"].values()}


def _checks_as_dp(case: str, psi: int = PSI):
    """check on a kept run that all-reduces its fp32 gradients on the world: Ψ, N = the world, the run's
    profiled steps, dp first, and 2(N-1)/N of Ψ a step (ring accounting); the measurement."""
    run = json.loads((RUNS / case / "run.json").read_text())
    n = run["world_size"]
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert (m.psi, m.n, m.steps) == (psi, n, run["steps_profiled"])
    assert res.matches[0] == "dp"
    assert m.bytes_per_rank_per_step == pytest.approx(2 * psi * (n - 1) / n * 4, rel=1e-9)
    return m


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("psi_given", [False, True])
def test_real_run_checks_as_the_scheme_that_ran(traces, case, psi_given):
    scheme, n, shard, nbytes = CASES[case]
    ts = traces[case]
    res = check(ts.table, meta=ts.meta, psi=PSI if psi_given else None)
    m = res.measurement
    assert m.psi == PSI and m.psi_trace == PSI
    assert m.n == n and {m.world_size} == _world(case) and m.shard_size == shard
    assert m.micro_batches == 1
    assert m.bytes_per_rank_per_step == pytest.approx(nbytes, rel=1e-9)
    assert scheme in res.matches
    c = next(c for c in res.comparisons if c.scheme == scheme)
    assert c.pattern_match and c.ratio == pytest.approx(1, abs=0.01)


@pytest.mark.parametrize("case", ["hsdp-2x2-no-reshard", "fsdp1-hybrid-zero2-2x2"])
def test_hsdp_with_the_forward_gather_kept_reads_as_hybrid_at_that_option(traces, case):
    # no scheme gathers Ψ once on the shard group: fsdp-hybrid does with its forward gather kept for the
    # backward, the option these runs set (run.json), so it is their match, at that option
    res = check(traces[case].table, meta=traces[case].meta)
    assert res.matches == ("fsdp-hybrid",)
    d = res.as_dict()
    regime = d["matches_reuse_regime"]["fsdp-hybrid"]
    assert regime["reuse_distance"] is None
    assert "_HYBRID_SHARD_ZERO2" in regime["regime"] and "reshard_after_forward=False" in regime["regime"]
    assert d["matches_if_parameters_kept_for_backward"] == []
    hybrid = next(c for c in d["schemes"] if c["scheme"] == "fsdp-hybrid")
    got = {(e["op"], e["group"]): e["elements_over_psi"] for e in hybrid["predicted_pattern"]}
    assert got == pytest.approx({("all_gather", 2): 1.0, ("reduce_scatter", 2): 1.0, ("all_reduce", 2): 0.5})
    # where a scheme matches as it stands the option is not needed: FULL_SHARD's HSDP, and a plain
    # reshard_after_forward=False, which fsdp-shard-grad-op prices (fsdp-hybrid stays a kept-for-backward
    # note)
    plain = check(traces["hsdp-2x2"].table, meta=traces["hsdp-2x2"].meta).as_dict()
    assert plain["matches"] == ["fsdp-hybrid"] and plain["matches_reuse_regime"] == {}
    flat = read_traces(RUNS / "fsdp2-no-reshard")
    flat = check(flat.table, meta=flat.meta).as_dict()
    assert "fsdp-shard-grad-op" in flat["matches"] and "fsdp-hybrid" not in flat["matches"]
    assert "fsdp-hybrid" in flat["matches_if_parameters_kept_for_backward"]


@pytest.mark.parametrize("case", ["hsdp-2x4-mixed-bf16-fp32-ga2", "hsdp-2x4-mixed-bf16-fp32-ga2-log-loss"])
def test_hsdp_whose_shard_and_replicate_groups_differ_in_size_spans_the_world(case):
    # HSDP on 8 ranks, shard groups of 4 and replicate groups of 2 (run.json), bf16 gathers and fp32
    # reductions, 2 micro-batches synchronised in the last. Counted (count_calls.py): each layer's shard
    # gathered 4 times a step in bf16 (group 4 from shapes), its gradient reduce-scattered once (group 4)
    # and its shard all-reduced once; no all-reduce states its group over gloo, and the rank's process
    # groups (pg_config) are the world (8), the replicate group (2) and the shard group (4). The all-reduces
    # ran on the gloo threads that gathered nothing: not the shard group's, so the replicate group's.
    # Before, without the loss's all-reduce, they were taken to span the world and N read 4 x 8 = 32 on 8
    # ranks. The log-loss run all-reduces a one-element loss after each step on the world, on threads made
    # before the others (the world's): it stays on the world
    run = json.loads((RUNS / case / "run.json").read_text())
    rank0 = json.loads((RUNS / case / "expected.json").read_text())["ranks"]["0"]
    assert sorted(g["pg_size"] for g in rank0["pg_config"]) == [2, 4, 8]
    calls = rank0["steps"]["ProfilerStep#1"]["c10d"]
    gathered = sum(c["in_elems"] * c["group_size_from_shapes"] * c["calls"] for c in calls
                   if c["op"] == "c10d::_allgather_base_")
    scattered = sum(c["in_elems"] * c["calls"] for c in calls if c["op"] == "c10d::_reduce_scatter_base_")
    shards = sum(c["in_elems"] * c["calls"] for c in calls
                 if c["op"] == "c10d::allreduce_" and c["in_elems"] > 1)
    losses = sum(c["calls"] for c in calls if c["op"] == "c10d::allreduce_" and c["in_elems"] == 1)
    assert (gathered, scattered, shards, losses) == (4 * PSI, PSI, PSI / 4, int(case.endswith("log-loss")))
    ts = read_traces(RUNS / case)
    ar = ts.table[(ts.table["op"] == "all_reduce") & (ts.table["in_nelems"] > 1)]
    replicate = {r: ",".join(map(str, g)) for g in run["groups"]["replicate"] for r in g}
    assert (ar["group_size"] == 2).all() and (ar["group_ranks"] == ar["rank"].map(replicate)).all()
    loss = ts.table[(ts.table["op"] == "all_reduce") & (ts.table["in_nelems"] == 1)]
    assert len(loss) == 8 * run["steps_profiled"] * losses and (loss["group_size"] == run["world_size"]).all()
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert (m.psi, m.n, m.world_size, m.shard_size) == (PSI, 8, run["world_size"], 4)
    assert "replicate groups of 2" in m.n_how and "also has groups" not in m.n_how
    assert (m.micro_batches, m.grad_sync) == (run["micro_batches"], "boundary")
    # ring accounting: (p-1)/p of a gather (bf16) or reduce-scatter (fp32) on 4, 2(p-1)/p of the shards'
    # all-reduce (fp32) on 2
    assert m.bytes_per_rank_per_step == pytest.approx(
        gathered * 3 / 4 * 2 + scattered * 3 / 4 * 4 + shards * 2 * 1 / 2 * 4, rel=1e-9)
    assert res.matches == ("fsdp-hybrid",)


def test_hsdp_beside_a_metric_all_reduce_on_the_world_names_the_world_apart():
    # HSDP 2 x 2 and, after each step, 16 elements (the per-sample losses, padded) all-reduced over the world
    # of 4 (run.json). Counted (count_calls.py): hsdp-2x2's calls and one all-reduce of 16 a step. Its thread
    # names the world (4 ranks), so the replicate group's all-reduces of shards are HSDP's and the world's
    # reported apart: N's sentence names the groups of 4, where it said 'other groups of 2 (tensor
    # parallelism's)' and 'also has groups of 2 ranks'
    case = "hsdp-2x2-metrics-all-reduce"
    run = json.loads((RUNS / case / "run.json").read_text())
    step = json.loads((RUNS / case / "expected.json").read_text())["ranks"]["0"]["steps"]["ProfilerStep#1"]
    metric = [c for c in step["c10d"] if c["op"] == "c10d::allreduce_" and c["in_elems"] == 16]
    assert [c["calls"] for c in metric] == [1]
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert (m.psi, m.n, m.shard_size) == (PSI, run["world_size"], 2)
    assert "the all-reduces on the rank's other groups of 4 are reported apart" in m.n_how
    assert "tensor parallelism" not in m.n_how and "also has groups" not in m.n_how
    apart = f"all-reduce on {run['world_size']} ranks ×{run['world_size'] * run['steps_profiled']}"
    assert any(apart in n for n in m.notes)
    assert res.matches == ("fsdp-hybrid",)


def test_tensor_and_data_parallel_groups_of_two_sizes_by_hand_over_gloo():
    # tp2-dp2's code on 8 ranks: tensor-parallel groups of 2 (made first), data-parallel groups of 4
    # (run.json). Counted (count_calls.py): every call an all-reduce, none sized by its shapes; one in the
    # forward (inside ReduceFromTP), the others the gradients, one a tensor, summing to the rank's
    # parameters. The gloo threads that ran them are the tensor-parallel group's, then the data-parallel
    # group's (groups start their threads as they are made, in pg_config's order): before, no thread was
    # placed, every call spanned the world and N read 8
    case = "tp2-dp4"
    run = json.loads((RUNS / case / "run.json").read_text())
    rank0 = json.loads((RUNS / case / "expected.json").read_text())["ranks"]["0"]
    assert sorted(g["pg_size"] for g in rank0["pg_config"]) == [2, 4, 8]
    step = rank0["steps"]["ProfilerStep#1"]
    assert {c["op"] for c in step["c10d"]} == {"c10d::allreduce_"}
    forward = {int(k.split()[1]) for k in step.get("forward_reductions", {})}
    grads = sum(c["in_elems"] * c["calls"] for c in step["c10d"] if c["in_elems"] not in forward)
    assert grads == run["psi_per_rank"]
    ts = read_traces(RUNS / case)
    dp = {r: ",".join(map(str, g)) for g in run["groups"]["dp"] for r in g}
    tp = {r: ",".join(map(str, g)) for g in run["groups"]["tp"] for r in g}
    rows = ts.table
    fwd = rows["forward_op"].notna()
    assert (rows.loc[fwd, "group_ranks"] == rows.loc[fwd, "rank"].map(tp)).all()
    assert (rows.loc[~fwd, "group_ranks"] == rows.loc[~fwd, "rank"].map(dp)).all()
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert (m.psi, m.n, m.world_size) == (grads, 4, run["world_size"])
    assert m.bytes_per_rank_per_step == pytest.approx(grads * 2 * 3 / 4 * 4, rel=1e-9)
    assert res.matches[0] == "dp"


def test_deepspeed_autotp_beside_zero1_reads_as_zero1_on_the_data_parallel_group():
    # DeepSpeed AutoTP training (tensor parallelism 2 of a one-layer Llama) with ZeRO-1 on data-parallel
    # groups of 2, 2 micro-batches a step. Counted (count_calls.py), every rank, every step: one all-reduce
    # of 69,824 elements (the rank's half of the model's split layers, and the rest whole) and one
    # all-gather of its half back (group 2 from shapes), at the boundary; in the forward passes, the
    # tensor-parallel group's all-reduces of RowParallel's outputs and all-gathers of the output head's
    # logits, and in the backward the all-reduces of the same shape (activations and their gradients)
    case = "ds-autotp2-zero1-ga2"
    run = json.loads((RUNS / case / "run.json").read_text())
    step = json.loads((RUNS / case / "expected.json").read_text())["ranks"]["0"]["steps"]["ProfilerStep#1"]
    big = max(c["in_elems"] for c in step["c10d"])
    calls = {(c["op"], c["in_elems"]): c["calls"] for c in step["c10d"]}
    assert calls[("c10d::allreduce_", big)] == calls[("c10d::_allgather_base_", big // 2)] == 1
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert (m.psi, m.n, m.world_size) == (big, 2, run["world_size"])
    assert (m.micro_batches, m.grad_sync) == (run["micro_batches"], "boundary")
    # ring accounting on 2: the all-reduce sends Ψ, the all-gather Ψ/2 (fp32)
    assert m.bytes_per_rank_per_step == pytest.approx(big * 4 + big / 2 * 4, rel=1e-9)
    assert res.matches[0] == "deepspeed-zero1"
    assert any("activations of model parallelism" in n for n in m.notes)


def test_deepspeed_ulysses_beside_zero2_reduces_the_whole_model_over_every_rank():
    # DeepSpeed Ulysses sequence parallelism 2 beside ZeRO-2 on 4 ranks. Counted (count_calls.py), every
    # rank, every step: the attention's all-to-alls on the sequence group (group 2 from pg_config), an
    # all-reduce of the whole model (sequence parallelism splits tokens, not parameters) and its all-gather
    # back from quarters (group 4 from shapes): ZeRO over all 4 ranks
    case = "ds-ulysses2-zero2"
    run = json.loads((RUNS / case / "run.json").read_text())
    step = json.loads((RUNS / case / "expected.json").read_text())["ranks"]["0"]["steps"]["ProfilerStep#1"]
    calls = {(c["op"], c["in_elems"]): c for c in step["c10d"]}
    psi = max(e for op, e in calls if op == "c10d::allreduce_")
    assert calls[("c10d::_allgather_base_", psi // 4)]["group_size_from_shapes"] == 4
    a2a = sum(c["calls"] for (op, _), c in calls.items() if op == "c10d::alltoall_base_")
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert (m.psi, m.n, m.micro_batches) == (psi, run["world_size"], 1)
    # ring accounting on 4, fp32: the all-reduce 2 x 3/4 of Ψ, the all-gather 3/4
    assert m.bytes_per_rank_per_step == pytest.approx(psi * 2 * 3 / 4 * 4 + psi * 3 / 4 * 4, rel=1e-9)
    assert any(f"all-to-all on 2 ranks ×{a2a * 4 * run['steps_profiled']}" in n for n in m.notes)
    # DeepSpeed's ZeRO-1 and ZeRO-2 send alike (an all-reduce of the bucket, then the gather)
    assert set(res.matches) == {"deepspeed-zero1", "deepspeed-zero2"}


def test_mixed_precision_prices_each_side_at_its_dtype(traces):
    res = check(traces["fsdp2-mixed-bf16-fp32"].table, meta=traces["fsdp2-mixed-bf16-fp32"].meta)
    m = res.measurement
    assert (m.param_dtype, m.grad_dtype) == ("bf16", "fp32")
    d = res.as_dict()
    fsdp = next(s for s in d["schemes"] if s["scheme"] == "fsdp-full-shard")
    got = {(e["op"], e["group"], e["dtype"]): round(e["elements_over_psi"], 6)
           for e in fsdp["measured_pattern"]}
    assert got == {("all_gather", 4, "bf16"): 2.0, ("reduce_scatter", 4, "fp32"): 1.0}
    # the ZeRO-1/2 pattern (one gather of Ψ) is not what ran: the trace gathers 2Ψ elements
    assert not {"zero1", "zero2", "fsdp-shard-grad-op"} & set(res.matches)
    assert d["world_size"] == 4 and d["micro_batches"] == 1 and "micro_batches_how" in d and "grad_sync" in d


def test_hsdp_psi_given_is_accepted_and_n_is_the_product_of_its_groups(traces):
    # the issue: the check took every collective to span the world and inferred Ψ = 1.5× the truth
    res = check(traces["hsdp-2x2"].table, meta=traces["hsdp-2x2"].meta, psi=PSI)
    assert res.measurement.dp_group_sizes == (2,) and "HSDP" in res.measurement.n_how
    assert res.matches == ("fsdp-hybrid",)


def test_schemes_the_trace_cannot_tell_apart_are_not_ranked(traces):
    res = check(traces["fsdp2-mixed-bf16-fp32"].table, meta=traces["fsdp2-mixed-bf16-fp32"].meta)
    tied = [set(g) for g in res.indistinguishable]
    assert {"zero3", "fsdp-full-shard"} <= tied[0]
    # tied schemes keep the scheme list's order, whatever their step boundary looks like
    # (DeepSpeed ZeRO-3 at reuse distance 0 sends this too: every parameter gathered again in backward)
    order = ("zero3", "deepspeed-zero3", "fsdp-full-shard", "fsdp-hybrid")
    assert list(res.matches) == [s for s in order if s in res.matches]


def test_one_process_driving_two_gpus_is_two_ranks():
    # nccl-debug/single-process-2gpu-tensorflow.txt (NCCL issue #203): one process (gpu1:13135) drives
    # [dev 0] and [dev 1], one communicator of nranks=2 each; device 0 logs all-reduces of 64, 237,184 and
    # 386,560 float32 elements, device 1 the same and one of 8,192 (the file's header and lines)
    log = Path(__file__).parent / "data" / "traces" / "nccl-debug" / "single-process-2gpu-tensorflow.txt"
    ts = read_traces(log)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert m.ranks == (0, 1) and m.n == 2
    per_rank = m.calls.groupby("rank")["full_elements"].apply(sorted).to_dict()
    assert per_rank == {0: [64, 237_184, 386_560], 1: [64, 8_192, 237_184, 386_560]}
    assert "dp" in res.matches


#: case → (micro-batches, gradient-sync mode the trace shows) as the README counts them: the repeated
#: micro-batch block, and gradient reductions in every block or only in the last (None: nothing repeats)
MICRO = {
    "ddp-ga4-sync-every": (4, "every"),  # forward / all-reduce of Ψ, four times
    "ds-zero2-ga4": (4, "every"),  # an all-reduce of Ψ after each micro-batch's backward
    # the same in 5 buckets a micro-batch, two of them (2,160 and 192 elements) next to nothing beside the
    # step: gradients still, not norms
    "ds-zero2-ga4-small-buckets": (4, "every"),
    # the same, one ProfilerStep per micro-batch: every 4th holds the optimizer's all-gather
    "ds-zero2-ga4-step-per-micro-batch": (4, "every"),
    "ds-zero3-ga4": (4, "every"),  # gathers and a reduce-scatter of Ψ in each micro-batch
    "torch2.14-ds-zero3-ga4": (4, "every"),  # the same run under torch 2.14.1
    # the same run under DeepSpeed 0.15.4: a reduce-scatter of Ψ in each micro-batch, but the first gathers
    # Ψ and the later ones all but layers.0 (kept gathered from one micro-batch's backward to the next's
    # forward): 4 blocks that reduce alike, the first gathering more
    "deepspeed0.15.4-ds-zero3-ga4": (4, "every"),
    "deepspeed0.15.4-ds-zero3-past-reuse-distance-ga2": (2, "every"),
    # ZeRO-Offload (the optimizer states, and stage 3's parameters, in host memory): the same collectives
    "ds-zero2-offload-ga4": (4, "every"),
    "ds-zero3-offload-ga4": (4, "every"),
    "fsdp2-ga4-sync-every": (4, "every"),
    "fsdp2-ga4-no-sync": (4, "boundary"),  # gathers in every micro-batch, reduce-scatters in the last only
    # 4 forwards send nothing, one all-reduce at the boundary: K from the 4 backward passes a step runs
    "ds-zero1-ga4": (4, "boundary"),
    "ds-zero1-ga4-bf16": (4, "boundary"),  # BF16_Optimizer: one bf16 all-reduce of Ψ at the boundary
    # an fp32 model, communication_data_type bf16: ZeRO-2's bf16 all-reduce of Ψ a micro-batch, ZeRO-3's
    # fp32 gathers and bf16 reduce-scatter of Ψ a micro-batch
    "ds-zero2-ga4-comm-bf16": (4, "every"),
    "ds-zero3-ga4-comm-bf16": (4, "every"),
    # 11 buckets at the boundary, one size 4 times (the equal layers' biases) beside sizes once: not a sign
    # of 4 reductions; reduced in every micro-batch, each would recur a multiple of 4 times
    "ds-zero1-ga4-6-layers-small-buckets": (4, "boundary"),
    "ddp-ga4-no-sync": (4, "boundary"),
    "torch2.4-ddp-ga4-no-sync": (4, "boundary"),  # the same run under torch 2.4.1
    # the same under torch.compile: one CompiledFunctionBackward node a micro-batch's backward
    "ddp-compiled-ga4-no-sync": (4, "boundary"),
    # the same, a layer under reentrant checkpointing: the nested backward in its backward is no pass
    "ddp-ga4-no-sync-reentrant-checkpoint": (4, "boundary"),
    # the same with one ProfilerStep a micro-batch: a step is the marked steps up to one that holds calls
    "ddp-ga4-no-sync-step-per-micro-batch": (4, "boundary"),
    "ds-zero1-ga4-step-per-micro-batch": (4, "boundary"),
    # no ProfilerStep at all: the steps run from one optimizer step's end to the next's
    "ds-zero1-ga4-without-profiler-steps": (4, "boundary"),
    "fsdp2-ga4-sync-every-without-profiler-steps": (4, "every"),
    # every marked step alike: the optimizer's annotations in every 4th group them
    "ddp-ga4-sync-every-step-per-micro-batch": (4, "every"),
    # FSDP1 FULL_SHARD: gathers in every micro-batch, reduce-scatters in the last
    "fsdp1-ga4-no-sync": (4, "boundary"),
    # FSDP1 SHARD_GRAD_OP under no_sync(): one gather of Ψ in the first micro-batch, kept; a reduce-scatter
    # in the last: nothing repeats, the backward passes tell K
    "fsdp1-shard-grad-op-ga4-no-sync": (4, "boundary"),
    "fsdp1-hybrid-zero2-2x2-ga4-no-sync": (4, "boundary"),
    # GPipe by hand, 2 micro-batches: each stage's sends and receives differ by micro-batch, its
    # data-parallel all-reduce follows the last backward
    "pp2-dp2": (2, "boundary"),
    "ds-pipe2-dp2-zero1-ga4": (4, "boundary"),
    # Hugging Face Trainer: each step opens with two gathers of one element a rank (its item count) before
    # the micro-batches, a block of scalars repeated twice that is not two micro-batches
    "hf-trainer-ddp": (1, None),
    "hf-trainer-ddp-ga4": (4, "boundary"),  # Accelerate's no_sync() on the first 3: K from the passes
    "hf-trainer-ds-zero2-ga4": (4, "every"),  # the engine's all-reduce of Ψ after each backward
    # Lightning's profiler steps after each training_step: a marked step is one backward and the next
    # forward; the all-reduce at the 4th, with the optimizer's step (no_sync() on the first 3)
    "lightning-ddp-ga4": (4, "boundary"),
    # the same with the loss all-reduced every micro-batch (sync_dist=True), after a barrier
    "lightning-ddp-ga4-sync-dist": (4, "boundary"),
}

#: Ψ of the runs on the 6-layer model (README: 20,640 + 4 × 25,760 + 15,456), the others' PSI
PSI_OF = {"ds-zero1-ga4-6-layers-small-buckets": 139_136}

#: the cases whose collectives repeat nothing inside a step: K is read from the backward passes alone
FROM_BACKWARD_PASSES = {"ds-zero1-ga4", "ds-zero1-ga4-bf16", "ds-zero1-ga4-6-layers-small-buckets",
                        "ddp-ga4-no-sync", "torch2.4-ddp-ga4-no-sync", "ddp-compiled-ga4-no-sync",
                        "ddp-ga4-no-sync-reentrant-checkpoint",
                        "ddp-ga4-no-sync-step-per-micro-batch", "ds-zero1-ga4-step-per-micro-batch",
                        "ds-zero1-ga4-without-profiler-steps",
                        "fsdp1-shard-grad-op-ga4-no-sync", "fsdp1-hybrid-zero2-2x2-ga4-no-sync", "pp2-dp2",
                        "ds-pipe2-dp2-zero1-ga4", "hf-trainer-ddp-ga4",
                        "lightning-ddp-ga4", "lightning-ddp-ga4-sync-dist"}


@pytest.mark.parametrize("case", list(MICRO))
def test_micro_batches_and_gradient_sync_read_from_the_trace(case):
    k, sync = MICRO[case]
    ts = read_traces(RUNS / case)
    m = check(ts.table, meta=ts.meta).measurement
    assert (m.micro_batches, m.grad_sync) == (k, sync)
    assert m.n == (2 if case in ("pp2-dp2", "ds-pipe2-dp2-zero1-ga4") else 4)
    if case.startswith("pp2") or case.startswith("ds-pipe2"):
        return  # Ψ: a stage's own parameters
    psi = PSI_OF.get(case, PSI)
    assert m.psi == psi  # Ψ per gradient reduction, not per optimizer step
    assert ("backward passes" in m.micro_batches_how) == (case in FROM_BACKWARD_PASSES)
    if case in FROM_BACKWARD_PASSES:
        # given, K is taken and said so, beside what the trace runs
        m2 = check(ts.table, meta=ts.meta, micro_batches=2).measurement
        assert m2.micro_batches == 2 and m2.micro_batches_how == (
            "K = 2: from --micro-batches (the trace's steps run 4 backward passes each)")
        # reduced in each of 4 micro-batches: read as 2, each reduces 2Ψ
        assert m2.psi == (psi if sync == "boundary" else psi * k // 2)


#: case → (scheme that ran, --micro-batches where given): README's runs
RAN = {
    "ddp-ga4-sync-every": ("dp", None),
    "ddp-ga4-no-sync": ("dp", None),
    "torch2.4-ddp-ga4-no-sync": ("dp", None),
    "ddp-ga4-no-sync-reentrant-checkpoint": ("dp", None),
    "ddp-ga4-no-sync-step-per-micro-batch": ("dp", None),
    "ddp-compiled-ga4-no-sync": ("dp", None),
    "ddp-ga4-sync-every-step-per-micro-batch": ("dp", None),
    "ds-zero1-ga4-step-per-micro-batch": ("deepspeed-zero1", None),
    "ds-zero1-ga4-without-profiler-steps": ("deepspeed-zero1", None),
    "fsdp2-ga4-sync-every-without-profiler-steps": ("fsdp-full-shard", None),
    "ds-zero1-ga4": ("deepspeed-zero1", None),
    "ds-zero2-ga4": ("deepspeed-zero2", None),
    "ds-zero2-ga4-step-per-micro-batch": ("deepspeed-zero2", None),
    "ds-zero2-ga4-bf16": ("deepspeed-zero2", None),
    "ds-zero1-ga4-bf16": ("deepspeed-zero1", None),
    "ds-zero2-ga4-comm-bf16": ("deepspeed-zero2", None),
    "ds-zero3-ga4-comm-bf16": ("deepspeed-zero3", None),
    "ds-zero1-ga4-6-layers-small-buckets": ("deepspeed-zero1", None),
    "ds-zero2-ga4-small-buckets": ("deepspeed-zero2", None),
    "ds-zero3-ga4": ("deepspeed-zero3", None),
    "ds-zero2-offload-ga4": ("deepspeed-zero2", None),
    "ds-zero3-offload-ga4": ("deepspeed-zero3", None),
    "fsdp2-ga4-sync-every": ("fsdp-full-shard", None),
    "fsdp2-ga4-no-sync": ("fsdp-full-shard", None),
    "fsdp1-ga4-no-sync": ("fsdp-full-shard", None),
    "hf-trainer-ddp-ga4": ("dp", None),
    "hf-trainer-ds-zero2-ga4": ("deepspeed-zero2", None),
    "lightning-ddp-ga4": ("dp", None),
    "lightning-ddp-ga4-sync-dist": ("dp", None),
}


@pytest.mark.parametrize("case", list(RAN))
def test_gradient_accumulation_runs_check_as_the_implementation_that_ran(case):
    scheme, k = RAN[case]
    ts = read_traces(RUNS / case)
    for psi in (None, PSI_OF.get(case, PSI)):
        res = check(ts.table, meta=ts.meta, psi=psi, micro_batches=k)
        assert res.measurement.micro_batches == 4 and res.measurement.n == 4
        assert scheme in res.matches, (case, res.matches)
        c = next(c for c in res.comparisons if c.scheme == scheme)
        assert c.ratio == pytest.approx(1, abs=0.01)
    # ZeRO-1 reduces at the boundary, ZeRO-2 in every micro-batch: 4 micro-batches tell them apart
    if scheme in ("deepspeed-zero1", "deepspeed-zero2"):
        other = {"deepspeed-zero1": "deepspeed-zero2", "deepspeed-zero2": "deepspeed-zero1"}[scheme]
        assert other not in res.matches


def test_deepspeed_gradient_buckets_small_beside_the_step_are_gradients():
    """DeepSpeed ZeRO-2 all-reduces each micro-batch's gradients in buckets of reduce_bucket_size and
    gathers the updated parameters on the same group: a last bucket of 192 elements, under 1/64 of what the
    step reduces, is part of Ψ, not a vector of norms (which a sharded step's all-reduces beside its
    reduce-scatters would be). The bytes are the README's counts (ring accounting)."""
    case = "ds-zero2-ga4-small-buckets"
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert (m.psi, m.micro_batches) == (PSI, 4)
    rows = json.loads((RUNS / case / "expected.json").read_text())["per_step_all_ranks"]["ProfilerStep#1"]
    reduced = sum(r["calls"] * r["in_elems"] for r in rows
                  if r["op"] == "c10d::allreduce_" and r["in_elems"] > 1)
    gathered = sum(r["calls"] * r["out_elems"] for r in rows if r["op"] == "c10d::_allgather_base_")
    assert (reduced, gathered) == (4 * PSI, PSI)
    p = 4  # the world, every call's group
    assert m.bytes_per_rank_per_step == pytest.approx((reduced * 2 + gathered) * (p - 1) / p * 4, rel=1e-9)
    assert not any("next to nothing" in n for n in res.notes)
    assert res.matches[0] == "deepspeed-zero2"


def _counted_step_bytes(case: str) -> tuple[float, dict[str, float]]:
    """Bytes per rank of one optimizer step's gradient and parameter collectives, and the elements
    per op (over Ψ), from the run's expected.json (counted from the traces by count_calls.py): a rank
    of a group of p sends (p-1)/p of an all-gather's output and of a reduce-scatter's input
    (Thakur et al. 2005); 1-element scalars (the loss/overflow all-reduce) left out."""
    e = json.loads((RUNS / case / "expected.json").read_text())
    rows = e["per_step_all_ranks"]["ProfilerStep#1"]
    width = {"float": 4}
    nbytes, elems = 0.0, {}
    for r in rows:
        if r["in_elems"] == 1:
            continue
        full = max(r["in_elems"], r["out_elems"])
        p = r["group_size_from_shapes"]
        nbytes += r["calls"] * full * (p - 1) / p * width[r["dtype"]]
        elems[r["op"]] = elems.get(r["op"], 0.0) + r["calls"] * full / PSI
    return nbytes, elems


@pytest.mark.parametrize("psi", [None, PSI])
def test_deepspeed_zero3_with_reuse_distance_zero_matches_and_says_so(psi):
    # README: stage3_max_reuse_distance 0, no prefetch: every layer gathered again in backward, so per
    # micro-batch 2Ψ gathered and Ψ reduce-scattered, 4 micro-batches: the textbook ZeRO-3 pattern, and
    # DeepSpeed ZeRO-3's at reuse distance 0 (its default 1e9 keeps the forward gather)
    nbytes, elems = _counted_step_bytes("ds-zero3-ga4-reuse0-prefetch0")
    assert elems == {"c10d::_allgather_base_": 8.0, "c10d::_reduce_scatter_base_": 4.0}
    ts = read_traces(RUNS / "ds-zero3-ga4-reuse0-prefetch0")
    res = check(ts.table, meta=ts.meta, psi=psi)
    assert res.measurement.psi == PSI and res.measurement.micro_batches == 4
    assert res.measurement.bytes_per_rank_per_step == pytest.approx(nbytes, rel=1e-9)
    assert {"deepspeed-zero3", "zero3", "fsdp-full-shard"} <= set(res.matches)
    ds = next(c for c in res.comparisons if c.scheme == "deepspeed-zero3")
    assert ds.pattern_match and ds.ratio == pytest.approx(1, abs=0.01) and ds.reuse_distance == 0
    assert ds.predicted_bytes_per_rank_per_step == pytest.approx(nbytes, rel=1e-9)
    assert "every parameter gathered again in backward" in ds.reuse_regime
    d = res.as_dict()
    assert d["matches_if_parameters_gathered_again_in_backward"] == ["deepspeed-zero3"]  # kept (contract)
    assert d["matches_reuse_regime"]["deepspeed-zero3"]["reuse_distance"] == 0
    rec = next(s for s in d["schemes"] if s["scheme"] == "deepspeed-zero3")
    assert rec["reuse_distance"] == 0 and rec["pattern_match"]
    assert any("stage3_max_reuse_distance = 0" in t for t in res.notes)
    # the trace cannot tell these apart: none is ranked above the others
    assert any({"deepspeed-zero3", "zero3", "fsdp-full-shard"} <= set(g) for g in res.indistinguishable)


def test_deepspeed_zero3_reuse_regime_given_prices_that_regime_only():
    ts = read_traces(RUNS / "ds-zero3-ga4-reuse0-prefetch0")
    # told the run kept its parameters (DeepSpeed's default reuse distance), deepspeed-zero3 cannot match
    res = check(ts.table, meta=ts.meta, reuse_distance=1e9)
    assert "deepspeed-zero3" not in res.matches and "zero3" in res.matches
    assert not res.as_dict()["matches_if_parameters_gathered_again_in_backward"]
    res0 = check(ts.table, meta=ts.meta, reuse_distance=0)
    assert "deepspeed-zero3" in res0.matches


@pytest.mark.parametrize("case", ["ds-zero3-ga4", "torch2.14-ds-zero3-ga4",  # under torch 2.13 and 2.14.1
                                  "ds-zero3-offload-ga4"])  # and with the optimizer and parameters offloaded
def test_deepspeed_zero3_with_parameters_kept_keeps_its_verdict(case):
    # README ds-zero3-ga4: one gather of Ψ and one reduce-scatter of Ψ per micro-batch, 4 micro-batches
    nbytes, elems = _counted_step_bytes(case)
    assert elems == {"c10d::_allgather_base_": 4.0, "c10d::_reduce_scatter_base_": 4.0}
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    assert "deepspeed-zero3" in res.matches and "zero3" not in res.matches
    ds = next(c for c in res.comparisons if c.scheme == "deepspeed-zero3")
    assert ds.predicted_bytes_per_rank_per_step == pytest.approx(nbytes, rel=1e-9)
    assert ds.reuse_distance >= 2 * PSI and "parameters kept for backward" in ds.reuse_regime
    assert not res.as_dict()["matches_if_parameters_gathered_again_in_backward"]
    # told reuse distance 0, the run's single gather per micro-batch is not DeepSpeed ZeRO-3's
    assert "deepspeed-zero3" not in check(ts.table, meta=ts.meta, reuse_distance=0).matches


@pytest.mark.parametrize("psi", [None, PSI])
def test_fsdp2_without_reshard_after_forward_checks_as_shard_grad_op(psi):
    # FSDP2 fully_shard(reshard_after_forward=False) keeps the unsharded parameters from the forward to
    # the backward (torch.distributed.fsdp.fully_shard docstring: no all-gather in backward), which is
    # FSDP1's SHARD_GRAD_OP: README fsdp2-no-reshard counts one gather of Ψ and one reduce-scatter of Ψ
    nbytes, elems = _counted_step_bytes("fsdp2-no-reshard")
    assert elems == {"c10d::_allgather_base_": 1.0, "c10d::_reduce_scatter_base_": 1.0}
    ts = read_traces(RUNS / "fsdp2-no-reshard")
    res = check(ts.table, meta=ts.meta, psi=psi)
    m = res.measurement
    assert m.psi == PSI and m.n == 4 and m.micro_batches == 1
    assert m.bytes_per_rank_per_step == pytest.approx(nbytes, rel=1e-9)
    assert "fsdp-shard-grad-op" in res.matches
    c = next(c for c in res.comparisons if c.scheme == "fsdp-shard-grad-op")
    assert c.pattern_match and c.ratio == pytest.approx(1, abs=0.01)
    # the schemes that re-gather in backward do not match; with the gather kept they would
    assert not {"zero3", "fsdp-full-shard", "fsdp-hybrid"} & set(res.matches)
    assert {"zero3", "fsdp-full-shard"} <= set(res.reused)


def test_step_markers_of_micro_batches_make_optimizer_steps():
    # ProfilerStep#1-#12 are micro-batches; the optimizer steps at #3, #7 and #11 (count_calls.py: those
    # three hold the all-gather), so #4-#7 and #8-#11 are the two whole optimizer steps, #1-#3 and #12 parts
    case = "ds-zero2-ga4-step-per-micro-batch"
    steps = json.loads((RUNS / case / "expected.json").read_text())["ranks"]["0"]["steps"]
    gathers = [k for k, s in steps.items() if any(r["op"] == "c10d::_allgather_base_" for r in s["c10d"])]
    assert gathers == ["ProfilerStep#3", "ProfilerStep#7", "ProfilerStep#11"] and len(steps) == 12
    ts = read_traces(RUNS / case)
    m = check(ts.table, meta=ts.meta).measurement
    assert m.steps == 2 and "which mark micro-batches" in m.steps_how and "4 marked step(s)" in m.steps_how
    assert any("give --steps 12" in n for n in m.notes)
    # given as marked, the steps stay the markers' (each then a micro-batch, its calls unlike the others')
    assert check(ts.table, meta=ts.meta, steps=12).measurement.steps == 12


def test_pipeline_stages_check_as_data_parallel_per_stage_with_their_sends_apart():
    # pipeline of 2 × data parallel of 2, over gloo: each stage all-reduces its own gradients on its
    # group of 2; counted from the traces (count_calls.py): stage 0 (ranks 0, 1) all-reduces 24,576 + 192
    # + 30,720 + 160 elements, stage 1 (ranks 2, 3) 15,360 + 96, per step; and each rank sends 2 and
    # receives 2 activations (or their gradients) of 8 × 160 a step
    case = "pp2-dp2"
    run = json.loads((RUNS / case / "run.json").read_text())
    steps = json.loads((RUNS / case / "expected.json").read_text())["ranks"]
    per_rank = {int(r): sum(c["calls"] * c["in_elems"] for c in s["steps"]["ProfilerStep#1"]["c10d"]
                            if c["op"] == "c10d::allreduce_") for r, s in steps.items()}
    assert per_rank == {0: 55_648, 1: 55_648, 2: 15_456, 3: 15_456}
    assert sorted(set(per_rank.values()), reverse=True) == run["pipeline"]["psi_per_stage"]
    p2p = sum(c["calls"] for s in steps.values() for step in s["steps"].values() for c in step["c10d"]
              if c["op"] in ("c10d::send", "c10d::recv_"))
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    # each rank's Ψ is its stage's: the check's is their mean over the ranks, Ψ / pp, and it says they vary
    assert m.psi == sum(per_rank.values()) / 4 == PSI / 2 and m.n == 2 and m.world_size == 4
    assert any("vary between 15,456 and 55,648" in n for n in m.notes)
    # a ring all-reduce on 2 sends half the vector twice: Ψ × 4 B on every rank, on the mean
    assert m.bytes_per_rank_per_step == pytest.approx(PSI / 2 * 4)
    assert "dp" in res.matches
    assert any(f"recv on 4 ranks ×{p2p // 2}" in n and f"send on 4 ranks ×{p2p // 2}" in n for n in m.notes)


@pytest.mark.parametrize("case, scheme, apart", [
    ("tp2-dp2", "dp", "all-reduce on 2 ranks ×12"),
    ("fsdp2-tp2", "fsdp-full-shard", "all-reduce on 2 ranks ×12"),
    ("fsdp2-tp2-sp", "fsdp-full-shard", "all-gather on 2 ranks ×24, reduce-scatter on 2 ranks ×12"),
])
def test_tensor_parallel_group_of_the_data_parallel_size_is_reported_apart(case, scheme, apart):
    # tensor parallel 2 × data parallel 2 over gloo: every call is on a group of 2. Counted (count_calls.py):
    # each rank's step reduces 43,360 gradient elements on its data-parallel group (the all-reduces, or
    # FSDP2's reduce-scatters, of parameter-sized tensors), the parameters a tensor-parallel rank holds
    # (run.json psi_per_rank); its tensor-parallel calls move activations (8 × 160 all-reduced, or with
    # sequence parallelism two all-gathers and a reduce-scatter a step): 4 ranks × 3 steps of each
    run = json.loads((RUNS / case / "run.json").read_text())
    steps = json.loads((RUNS / case / "expected.json").read_text())["ranks"]
    gradients = ("c10d::_reduce_scatter_base_",) if "fsdp2" in case else ("c10d::allreduce_",)
    grads = {sum(c["calls"] * c["in_elems"] for c in step["c10d"]
                 if c["op"] in gradients and c["in_elems"] != 8 * 160)
             for s in steps.values() for step in s["steps"].values()}
    assert grads == {run["psi_per_rank"]} == {43_360}
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert m.psi == m.psi_trace == run["psi_per_rank"] and m.n == 2 and m.world_size == 4
    assert any(f"reported apart: {apart}" in n for n in m.notes)
    assert scheme in res.matches
    c = next(c for c in res.comparisons if c.scheme == scheme)
    assert c.pattern_match and c.ratio == pytest.approx(1, abs=0.01)


def test_pipeline_schedules_keep_fsdp2s_backward_gathers_across_micro_batches():
    # PyTorch's pipeline schedule with FSDP2 on each stage's data-parallel group of 2, 2 micro-batches a step.
    # Counted (count_calls.py): every rank gathers each of its layers 3 times a step (K + 1, K = 2) and
    # reduce-scatters it once; stage 0 reduces 55,648 elements, stage 1 15,456
    case = "pp2-fsdp2"
    run = json.loads((RUNS / case / "run.json").read_text())
    steps = json.loads((RUNS / case / "expected.json").read_text())["ranks"]
    for s in steps.values():
        for step in s["steps"].values():
            gathers = {c["in_elems"]: c["calls"] for c in step["c10d"] if c["op"] == "c10d::_allgather_base_"}
            assert set(gathers.values()) == {run["micro_batches"] + 1}
    per_rank = {int(r): sum(c["calls"] * c["in_elems"] for c in s["steps"]["ProfilerStep#1"]["c10d"]
                            if c["op"] == "c10d::_reduce_scatter_base_") for r, s in steps.items()}
    assert per_rank == {0: 55_648, 1: 55_648, 2: 15_456, 3: 15_456}
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert m.psi == sum(per_rank.values()) / 4 and (m.micro_batches, m.grad_sync) == (2, "boundary")
    fsdp = next(c for c in res.comparisons if c.scheme == "fsdp-full-shard")
    assert not fsdp.pattern_match and fsdp.matches_if_kept_across_micro_batches
    assert any("3 gathers of the parameters a step in place of 4" in n for n in res.notes)
    # FSDP2 without a pipeline (set_requires_gradient_sync(False) alone) gathers in every backward: 2K
    ts = read_traces(RUNS / "fsdp2-ga4-no-sync")
    res = check(ts.table, meta=ts.meta)
    assert "fsdp-full-shard" in res.matches
    assert not any(c.matches_if_kept_across_micro_batches for c in res.comparisons)


@pytest.mark.parametrize("case", ["pp2-fsdp2-1f1b-ga4", "pp2-fsdp2-interleaved-1f1b-ga4"])
def test_pipeline_schedules_that_alternate_forward_and_backward_count_micro_batches_by_backward_passes(case):
    # Schedule1F1B and ScheduleInterleaved1F1B with FSDP2, 4 micro-batches a step. Counted (count_calls.py):
    # every rank gathers each of its layers 5 times a step (K + 1) and reduce-scatters it once, yet the
    # calls that open a step repeat twice (the warm-up's forwards), not once per micro-batch. The
    # profiler's autograd node events count 4 backward passes a step, which give K
    run = json.loads((RUNS / case / "run.json").read_text())
    k = run["micro_batches"]
    ranks = json.loads((RUNS / case / "expected.json").read_text())["ranks"]
    reduced = {}
    for r, s in ranks.items():
        for step in s["steps"].values():
            gathers = Counter()
            for c in step["c10d"]:
                if c["op"] == "c10d::_allgather_base_":
                    gathers[c["in_elems"]] += c["calls"]
            scatters = {c["in_elems"]: c["calls"] for c in step["c10d"]
                        if c["op"] == "c10d::_reduce_scatter_base_"}
            # each layer's shard (half its reduce-scatter's input on the group of 2) gathered K + 1 times
            assert gathers == {e // 2: (k + 1) * n for e, n in scatters.items()}
            reduced[int(r)] = sum(e * n for e, n in scatters.items())
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert m.psi == sum(reduced.values()) / 4
    assert (m.micro_batches, m.grad_sync) == (k, "boundary")
    assert "backward passes" in m.micro_batches_how
    fsdp = next(c for c in res.comparisons if c.scheme == "fsdp-full-shard")
    assert not fsdp.pattern_match and fsdp.matches_if_kept_across_micro_batches
    assert any(f"{k + 1} gathers of the parameters a step in place of {2 * k}" in n for n in res.notes)


def test_an_evaluation_inside_every_second_marked_step_is_one_off():
    # FSDP2 evaluating after every 2nd step, inside its ProfilerStep. Counted (count_calls.py): steps 2 and 4
    # hold all of steps 1 and 3's calls and more: the evaluation's 3 gathers and a 16-element all-reduce,
    # twice, but for the gather of layers.2 (3,864 elements a rank) that steps 1 and 3 make once more. Those
    # are an evaluation's, not the optimizer's after 2 micro-batches (as DeepSpeed's markers would be):
    # every step reduce-scatters all of Ψ
    case = "fsdp2-eval-every-2"
    run = json.loads((RUNS / case / "run.json").read_text())
    ranks = json.loads((RUNS / case / "expected.json").read_text())["ranks"]
    steps = ranks["0"]["steps"]
    calls = {k: Counter({(c["op"], c["in_elems"]): c["calls"] for c in s["c10d"]}) for k, s in steps.items()}
    more = calls["ProfilerStep#2"] - calls["ProfilerStep#1"]
    assert not calls["ProfilerStep#1"] - calls["ProfilerStep#2"]
    assert more == Counter({("c10d::_allgather_base_", 6192): 2, ("c10d::_allgather_base_", 7720): 2,
                            ("c10d::_allgather_base_", 3864): 1, ("c10d::allreduce_", 16): 2})
    for s in calls.values():
        scattered = sum(n * c for (op, n), c in s.items() if op == "c10d::_reduce_scatter_base_")
        assert scattered == run["model"]["psi"]
    # in time order: steps 2 and 4 end with the evaluation, every call after their last reduce-scatter (2
    # batches of 3 gathers and a loss all-reduce); steps 1 and 3 hold the calls before it and one gather more
    evaluation = again = 0
    for r in ranks.values():
        seq = {k: s["c10d_sequence"] for k, s in r["steps"].items()}
        for k in ("ProfilerStep#2", "ProfilerStep#4"):
            last = max(i for i, c in enumerate(seq[k]) if c.startswith("c10d::_reduce_scatter_base_"))
            own, tail = seq[k][:last + 1], seq[k][last + 1:]
            assert [c.split()[0] for c in tail] == (["c10d::_allgather_base_"] * 3 + ["c10d::allreduce_"]) * 2
            evaluation += len(tail)
            after = Counter(seq[f"ProfilerStep#{int(k[-1]) - 1}"])
            assert not Counter(own) - after
            again += sum((after - Counter(own)).values())
    assert (evaluation, again) == (4 * 2 * 8, 4 * 2 * 1)
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert (m.psi, m.steps, m.micro_batches) == (run["model"]["psi"], 4, 1)
    # one-off: the evaluation, and the gather each step after one makes again: a step is FSDP's own
    assert "every 2nd also holds an evaluation" in m.steps_how
    assert f"{evaluation} calls in all" in m.steps_how and f"({again} in all" in m.steps_how
    assert "fsdp-full-shard" in res.matches


def test_an_evaluation_every_third_step_and_the_gathers_the_step_after_it_sends_again_are_one_off():
    # the same FSDP2 run evaluating after every 3rd step (0, 3, 6), 6 steps profiled. Counted
    # (count_calls.py): three kinds of step, the plain one (2 and 5), the one after an evaluation (1 and 4)
    # holding the plain one's calls and 1 gather more, and the evaluating one (3 and 6) holding the plain
    # one's and, after its last reduce-scatter, the evaluation's 8 calls
    case = "fsdp2-eval-every-3"
    run = json.loads((RUNS / case / "run.json").read_text())
    evaluation = again = 0
    for r in json.loads((RUNS / case / "expected.json").read_text())["ranks"].values():
        seq = {int(k.split("#")[1]): s["c10d_sequence"] for k, s in r["steps"].items()}
        assert sorted(seq) == [1, 2, 3, 4, 5, 6]
        for plain, after, evaluating in ((2, 1, 3), (5, 4, 6)):
            last = max(i for i, c in enumerate(seq[evaluating]) if "reduce_scatter" in c)
            assert seq[evaluating][:last + 1] == seq[plain]
            evaluation += len(seq[evaluating]) - last - 1
            more = Counter(seq[after]) - Counter(seq[plain])
            assert not Counter(seq[plain]) - Counter(seq[after])
            assert list(more) == ["c10d::_allgather_base_ float 3864->15456"]
            again += more.total()
    assert (evaluation, again) == (4 * 2 * 8, 4 * 2 * 1)
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert (m.psi, m.steps, m.micro_batches) == (run["model"]["psi"], 6, 1)
    assert "every 3rd also holds an evaluation" in m.steps_how and f"{evaluation} calls in all" in m.steps_how
    assert f"({again} in all" in m.steps_how
    assert "fsdp-full-shard" in res.matches


def test_an_evaluation_whose_gathers_the_next_step_uses_counts_them_in_that_step():
    # DeepSpeed ZeRO-3, 4 micro-batches, evaluating after every 2nd step. Counted (count_calls.py): steps
    # 2 and 4 gather the parameters (17,776 → 71,104) before each of their 4 forwards and reduce-scatter
    # after each backward, close with a 1-element all-reduce, then evaluate: one gather and two 16-element
    # all-reduces. Steps 1 and 3, after an evaluation, hold the same calls less their first gather: the
    # evaluation's serves their first forward. So a step is 4 gathers and 4 reduce-scatters of Ψ
    case = "ds-zero3-ga4-eval-every-2"
    run = json.loads((RUNS / case / "run.json").read_text())
    psi = run["model"]["psi"]
    for r in json.loads((RUNS / case / "expected.json").read_text())["ranks"].values():
        seq = {int(k.split("#")[1]): s["c10d_sequence"] for k, s in r["steps"].items()}
        gather = f"c10d::_allgather_base_ float {psi // 4}->{psi}"
        scatter = f"c10d::_reduce_scatter_base_ float {psi}->{psi // 4}"
        for evaluating, after in ((2, 1), (4, 3)):
            own, evaluation = seq[evaluating][:9], seq[evaluating][9:]
            assert Counter(own[:8]) == {gather: 4, scatter: 4} and own[8] == "c10d::allreduce_ double 1->1"
            assert evaluation == [gather] + ["c10d::allreduce_ float 16->16"] * 2
            assert Counter(seq[after]) == Counter(own) - Counter({gather: 1})
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert (m.psi, m.micro_batches, m.grad_sync) == (psi, 4, "every")
    # step 1 follows the warm-up's evaluation, which the trace does not hold: one-off, so 3 steps count
    assert m.steps == 3 and "so 3 steps count" in m.steps_how
    assert "deepspeed-zero3" in res.matches
    # ring accounting: each of the 8 calls sends (n - 1)/n of Ψ fp32 elements a rank
    assert m.bytes_per_rank_per_step == pytest.approx(8 * 3 / 4 * psi * 4, rel=1e-9)


def test_an_evaluation_inside_a_marked_micro_batch_is_one_off_and_its_gather_counts_in_the_next_step():
    # DeepSpeed ZeRO-3 in its own loop, a ProfilerStep per micro-batch, evaluating after every 2nd optimizer
    # step inside that micro-batch's ProfilerStep. Counted (count_calls.py): every micro-batch gathers the
    # parameters before its forward and reduce-scatters after its backward, the optimizer's micro-batches
    # (3, 7, 11, 15) close with a 1-element all-reduce, 7 and 15 then evaluate (a gather and two
    # 16-element all-reduces), and the micro-batches after them (8, 16) gather nothing
    case = "ds-zero3-ga4-step-per-micro-batch-eval-every-2"
    psi = json.loads((RUNS / case / "run.json").read_text())["model"]["psi"]
    gather = f"c10d::_allgather_base_ float {psi // 4}->{psi}"
    scatter = f"c10d::_reduce_scatter_base_ float {psi}->{psi // 4}"
    for r in json.loads((RUNS / case / "expected.json").read_text())["ranks"].values():
        seq = {int(k.split("#")[1]): s["c10d_sequence"] for k, s in r["steps"].items()}
        for m in range(2, 17):
            closing = ["c10d::allreduce_ double 1->1"] if m % 4 == 3 else []
            evaluation = [gather] + ["c10d::allreduce_ float 16->16"] * 2 if m in (7, 15) else []
            opening = [] if m in (8, 16) else [gather]
            assert seq[m] == opening + [scatter] + closing + evaluation
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    # the optimizer steps whole in the trace: micro-batches 4-7, 8-11, 12-15
    assert (m.psi, m.steps, m.micro_batches, m.grad_sync) == (psi, 3, 4, "every")
    assert "every 2nd also holds an evaluation" in m.steps_how and "deepspeed-zero3" in res.matches
    assert m.bytes_per_rank_per_step == pytest.approx(8 * 3 / 4 * psi * 4, rel=1e-9)


def test_an_evaluation_whose_gathers_serve_the_next_step_under_shard_grad_op():
    # FSDP1 SHARD_GRAD_OP evaluating after every 2nd step. Counted (count_calls.py): steps 2 and 4 gather
    # the 3 units before their forward, reduce-scatter the 3 gradients, then evaluate: the 3 gathers again
    # and two 16-element all-reduces; steps 1 and 3, after an evaluation, reduce-scatter alone (nothing
    # freed what the evaluation gathered). The gathers are the step's own, none of the others' steps
    case = "fsdp1-shard-grad-op-eval-every-2"
    psi = json.loads((RUNS / case / "run.json").read_text())["model"]["psi"]
    for r in json.loads((RUNS / case / "expected.json").read_text())["ranks"].values():
        seq = {int(k.split("#")[1]): s["c10d_sequence"] for k, s in r["steps"].items()}
        gathers, scatters = seq[2][:3], seq[2][3:6]
        assert all(c.startswith("c10d::allgather_") for c in gathers)
        assert sum(int(c.split()[-1].split("->")[0]) for c in scatters) == psi
        for evaluating, after in ((2, 1), (4, 3)):
            assert seq[evaluating] == gathers + scatters + gathers + ["c10d::allreduce_ float 16->16"] * 2
            assert seq[after] == scatters
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    # the first step, after the warm-up's evaluation, lacks the gathers: one-off; 3 steps count, each
    # gathering Ψ and reduce-scattering Ψ
    assert (m.psi, m.steps, m.micro_batches) == (psi, 3, 1)
    assert "fsdp-shard-grad-op" in res.matches
    assert m.bytes_per_rank_per_step == pytest.approx(2 * 3 / 4 * psi * 4, rel=1e-9)


def test_what_the_steps_after_an_evaluation_of_its_own_gather_again_is_one_off():
    # FSDP2 trained two steps, then evaluated in a ProfilerStep of its own, 3 times. Counted
    # (count_calls.py): the evaluations (3, 6, 9) run no forward pass with a loss and no reduction; the
    # steps after them (4, 7) hold the others' calls and one gather more (layers.2, 3,864 elements a rank)
    # before their last reduce-scatter
    case = "fsdp2-eval-own-steps"
    psi = json.loads((RUNS / case / "run.json").read_text())["model"]["psi"]
    again = 0
    for r in json.loads((RUNS / case / "expected.json").read_text())["ranks"].values():
        steps = {int(k.split("#")[1]): s for k, s in r["steps"].items()}
        assert [k for k, s in steps.items() if s["loss_calls"] == 0] == [3, 6, 9]
        for k in (4, 7):
            seq, plain = steps[k]["c10d_sequence"], steps[1]["c10d_sequence"]
            more = Counter(seq) - Counter(plain)
            gather = "c10d::_allgather_base_ float 3864->15456"
            assert not Counter(plain) - Counter(seq) and list(more) == [gather]
            last = max(i for i, c in enumerate(seq) if "reduce_scatter" in c)
            assert max(i for i, c in enumerate(seq) if c == gather) < last
            again += more.total()
        assert all(steps[k]["c10d_sequence"] == steps[1]["c10d_sequence"] for k in (2, 5, 8))
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert (m.psi, m.steps, m.micro_batches) == (psi, 6, 1)
    assert f"({again} calls in all: gathers again" in m.steps_how and "evaluation (the" not in m.steps_how
    assert "fsdp-full-shard" in res.matches


def test_one_evaluation_in_a_short_profile_is_one_off():
    # FSDP2 evaluating every 3rd step, 4 steps profiled: one evaluation among them. Counted
    # (count_calls.py): step 3 holds step 2's calls, then after its last reduce-scatter the evaluation's 8
    # calls; steps 1 and 4, each after an evaluation, hold step 2's calls and one gather more
    case = "fsdp2-one-evaluation"
    psi = json.loads((RUNS / case / "run.json").read_text())["model"]["psi"]
    evaluation = again = 0
    for r in json.loads((RUNS / case / "expected.json").read_text())["ranks"].values():
        seq = {int(k.split("#")[1]): s["c10d_sequence"] for k, s in r["steps"].items()}
        assert seq[3][:len(seq[2])] == seq[2]
        evaluation += len(seq[3]) - len(seq[2])
        for after in (1, 4):
            more = Counter(seq[after]) - Counter(seq[2])
            assert not Counter(seq[2]) - Counter(seq[after])
            assert list(more) == ["c10d::_allgather_base_ float 3864->15456"]
            again += more.total()
    assert (evaluation, again) == (4 * 8, 4 * 2)
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert (m.psi, m.steps, m.micro_batches) == (psi, 4, 1)
    assert f"one also holds an evaluation (the forward's calls again, and small all-reduces: {evaluation} " \
           "calls in all)" in m.steps_how and f"({again} in all" in m.steps_how
    assert "fsdp-full-shard" in res.matches


def _elements_per_step(case: str) -> list[tuple[int, Counter]]:
    """Each rank's each step in the run's expected.json (counted from the traces by count_calls.py): its
    forward passes, and the elements it moved per (c10d op, group size from the shapes, None where the op
    records no output) above 1 element: an all-gather's output (its input × the world of 4 where the op
    records no output: FSDP1's gather into a list), any other call's input."""
    out = []
    for r in json.loads((RUNS / case / "expected.json").read_text())["ranks"].values():
        for step in r["steps"].values():
            per = Counter()
            for c in step["c10d"]:
                gather = "allgather" in c["op"]
                size = (c["out_elems"] or c["in_elems"] * 4) if gather else c["in_elems"]
                if size > 1:
                    per[(c["op"], c["group_size_from_shapes"])] += c["calls"] * size
            out.append((step["loss_calls"], per))
    return out


@pytest.mark.parametrize("psi", [None, PSI])
def test_fsdp1_shard_grad_op_keeps_its_gather_across_no_sync_micro_batches(psi):
    # FSDP1 SHARD_GRAD_OP, 4 micro-batches, no_sync() on the first 3. Counted (count_calls.py): every step on
    # every rank holds 4 forward passes, one gather of each unit (Ψ in all) and one reduce-scatter of it: the
    # gathered parameters stay through the no_sync() micro-batches (FSDP2 gathers again in each)
    case = "fsdp1-shard-grad-op-ga4-no-sync"
    assert json.loads((RUNS / case / "run.json").read_text())["micro_batches"] == 4
    for passes, per in _elements_per_step(case):
        assert passes == 4
        assert per == {("c10d::allgather_", None): PSI, ("c10d::_reduce_scatter_base_", 4): PSI}
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta, psi=psi, micro_batches=4)
    m = res.measurement
    assert (m.psi, m.n, m.micro_batches, m.grad_sync) == (PSI, 4, 4, "boundary")
    # ring accounting: (p-1)/p of Ψ gathered and of Ψ reduce-scattered, fp32
    assert m.bytes_per_rank_per_step == pytest.approx(2 * PSI * 3 / 4 * 4, rel=1e-9)
    sgo = next(c for c in res.comparisons if c.scheme == "fsdp-shard-grad-op")
    assert not sgo.pattern_match and sgo.matches_if_kept_across_micro_batches and sgo.gathers_if_kept == 1
    assert res.kept == ("fsdp-shard-grad-op",)
    assert any("1 gather of the parameters a step in place of 4" in n and "no_sync()" in n for n in res.notes)
    d = res.as_dict()
    assert d["matches_if_parameters_kept_across_micro_batches"] == ["fsdp-shard-grad-op"]
    rec = next(s for s in d["schemes"] if s["scheme"] == "fsdp-shard-grad-op")
    assert rec["gathers_if_kept_across_micro_batches"] == 1
    # FULL_SHARD under no_sync() gathers in every forward and backward: 2K, as the scheme models
    ts = read_traces(RUNS / "fsdp1-ga4-no-sync")
    res = check(ts.table, meta=ts.meta)
    assert "fsdp-full-shard" in res.matches and not res.kept


def test_groups_of_one_rank_beside_the_world_leave_the_world_as_every_call_s_group():
    # hsdp-4x1: replicate 4 x shard 1 (run.json), so each rank's pg_config holds the world and groups of one
    # rank; the all-reduces record no group (gloo), and the only group they can run on is the world's
    run = json.loads((RUNS / "hsdp-4x1" / "run.json").read_text())
    assert run["groups"]["replicate"] == [[0, 1, 2, 3]] and all(len(g) == 1 for g in run["groups"]["shard"])
    ts = read_traces(RUNS / "hsdp-4x1")
    assert set(ts.table["group_size"]) == {4} and set(ts.table["group_from"]) == {"pg_config"}
    m = check(ts.table, meta=ts.meta).measurement
    assert m.n == 4 and "no call records its group" not in m.n_how
    with pytest.raises(TraceMismatchError, match="--n 2 contradicts"):
        check(ts.table, meta=ts.meta, n=2)


@pytest.mark.parametrize("psi", [None, PSI])
def test_fsdp1_hybrid_zero2_keeps_its_gather_across_no_sync_micro_batches(psi):
    # FSDP1 _HYBRID_SHARD_ZERO2, 4 micro-batches, no_sync() on the first 3. Counted (count_calls.py): every
    # step holds 4 forward passes, one gather of each unit's shard on its shard group of 2 (Ψ/2 in), then one
    # reduce-scatter of Ψ on it and the all-reduce of each shard on the replicate group of 2
    case = "fsdp1-hybrid-zero2-2x2-ga4-no-sync"
    for passes, per in _elements_per_step(case):
        assert passes == 4
        # the gathers' inputs, Ψ/2 (the helper counts a list gather's input × 4)
        assert per == {("c10d::allgather_", None): PSI / 2 * 4, ("c10d::_reduce_scatter_base_", 2): PSI,
                       ("c10d::allreduce_", None): PSI / 2}
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta, psi=psi)
    m = res.measurement
    assert (m.psi, m.n, m.shard_size, m.micro_batches, m.grad_sync) == (PSI, 4, 2, 4, "boundary")
    # ring accounting on groups of 2: half of Ψ gathered, half of Ψ reduce-scattered, all of Ψ/2 all-reduced
    assert m.bytes_per_rank_per_step == pytest.approx(3 * PSI / 2 * 4, rel=1e-9)
    # fsdp-hybrid gathers 2K = 8 times a step; the run once: the forward's gather kept for the backward (the
    # option) and through the no_sync() micro-batches
    assert res.matches == () and res.kept == ("fsdp-hybrid",)
    hybrid = next(c for c in res.comparisons if c.scheme == "fsdp-hybrid")
    assert hybrid.gathers_if_kept == 1
    assert any(n.startswith("fsdp-hybrid sends") and "in place of 8" in n and "_HYBRID_SHARD_ZERO2" in n
               for n in res.notes)


@pytest.mark.parametrize("psi", [None, PSI])
def test_zero3_with_hpz_reads_its_micro_batches_and_names_the_secondary_partition(psi):
    # DeepSpeed ZeRO-3 with zero_hpz_partition_size 2, 4 micro-batches. Counted (count_calls.py): every step
    # on every rank gathers the whole model once on the world of 4, then once on its group of 2 before each
    # later forward, and reduce-scatters Ψ in every micro-batch
    case = "ds-zero3-hpz2-ga4"
    assert json.loads((RUNS / case / "run.json").read_text())["micro_batches"] == 4
    for passes, per in _elements_per_step(case):
        assert passes == 4
        assert per == {("c10d::_allgather_base_", 4): PSI, ("c10d::_allgather_base_", 2): 3 * PSI,
                       ("c10d::_reduce_scatter_base_", 4): 4 * PSI}
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta, psi=psi)
    m = res.measurement
    # the gathers on groups of 2 gather what the first one on 4 did: [gather, reduce-scatter] is one
    # micro-batch, 4 times; Ψ is one micro-batch's reduction, not the step's 4Ψ
    assert (m.psi, m.psi_trace, m.n, m.micro_batches, m.grad_sync) == (PSI, PSI, 4, 4, "every")
    assert "repeated 4 times" in m.micro_batches_how
    # on the world of 4 (ring accounting): 3/4 of Ψ gathered once and of 4Ψ reduce-scattered, fp32
    assert m.bytes_per_rank_per_step == pytest.approx((PSI + 4 * PSI) * 3 / 4 * 4, rel=1e-9)
    assert res.secondary_partition == ("deepspeed-zero3",)
    assert any("zero_hpz_partition_size = 2" in n and "(3Ψ a step)" in n for n in res.notes)
    assert res.as_dict()["matches_with_secondary_partition"] == ["deepspeed-zero3"]
    # reductions in every micro-batch: not FSDP1's SHARD_GRAD_OP under no_sync()
    assert not res.kept


def test_zero3_before_0_19_3_with_hpz_keeps_the_first_layer_beside_its_secondary_copy():
    # the same run under DeepSpeed 0.15.4. Counted (count_calls.py): every step on every rank gathers the
    # whole model once on the world of 4, then before each later forward all but layers.0 (46,336) on its
    # group of 2, and reduce-scatters Ψ in every micro-batch. Before: "every parameter persistent", all of
    # Ψ said kept across the micro-batches, the secondary copy not named
    case = "deepspeed0.15.4-ds-zero3-hpz2-ga4"
    first = json.loads((RUNS / case / "run.json").read_text())["model"]["psi_per_layer"][0]
    for passes, per in _elements_per_step(case):
        assert passes == 4
        assert per == {("c10d::_allgather_base_", 4): PSI, ("c10d::_allgather_base_", 2): 3 * (PSI - first),
                       ("c10d::_reduce_scatter_base_", 4): 4 * PSI}
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    assert (res.measurement.psi, res.measurement.micro_batches) == (PSI, 4)
    assert res.secondary_partition == ("deepspeed-zero3",)
    ds = next(c for c in res.comparisons if c.scheme == "deepspeed-zero3")
    assert ds.persistent_share == pytest.approx(first / PSI, rel=1e-9)
    assert any("zero_hpz_partition_size = 2" in n and f"({3 * (PSI - first) / PSI:.3g}Ψ a step)" in n
               for n in res.notes)
    assert any("34.8% of Ψ (24,768 elements) gathered once a step" in n and "before 0.19.3" in n
               for n in res.notes)
    assert not any("every parameter" in n for n in res.notes)


@pytest.mark.parametrize("psi", [None, PSI])
def test_fsdp2_resharding_to_a_smaller_group_names_its_backward_gathers(psi):
    # FSDP2 fully_shard(reshard_after_forward=2) on 4 ranks. Counted (count_calls.py): every step on every
    # rank gathers Ψ on the world of 4 in the forward, Ψ again on its group of 2 in the backward, and
    # reduce-scatters Ψ on 4
    case = "fsdp2-reshard-to-2"
    for _, per in _elements_per_step(case):
        assert per == {("c10d::_allgather_base_", 4): PSI, ("c10d::_allgather_base_", 2): PSI,
                       ("c10d::_reduce_scatter_base_", 4): PSI}
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta, psi=psi)
    m = res.measurement
    assert (m.psi, m.n, m.micro_batches) == (PSI, 4, 1)
    # the data-parallel group's calls alone: 3/4 of Ψ gathered and of Ψ reduce-scattered, fp32
    assert m.bytes_per_rank_per_step == pytest.approx(2 * PSI * 3 / 4 * 4, rel=1e-9)
    assert res.secondary_partition == ("fsdp-full-shard",)
    assert any("reshard_after_forward = 2" in n and "(1Ψ a step)" in n for n in res.notes)
    assert res.as_dict()["matches_with_secondary_partition"] == ["fsdp-full-shard"]
    # ZeRO++'s note is for a ZeRO-3 run: its priced gathers (Ψ, kept for backward) are not these
    assert not any("hpZ" in n for n in res.notes)


@pytest.mark.parametrize("psi", [None, PSI])
def test_zero3_at_deepspeeds_defaults_keeps_a_small_models_parameters_whole(psi):
    # DeepSpeed ZeRO-3 with its default config on this model, 4 micro-batches. Counted (count_calls.py): every
    # step on every rank reduce-scatters Ψ in each micro-batch and gathers Ψ once, after the last (every
    # parameter has fewer than the default 1e5 persistence threshold's elements: run.json)
    case = "ds-zero3-defaults-ga4"
    run = json.loads((RUNS / case / "run.json").read_text())
    assert max(run["model"]["psi_per_layer"]) < 100_000 and run["deepspeed_config"]["zero_optimization"] == {
        "stage": 3}
    for passes, per in _elements_per_step(case):
        assert passes == 4
        assert per == {("c10d::_allgather_base_", 4): PSI, ("c10d::_reduce_scatter_base_", 4): 4 * PSI}
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta, psi=psi)
    m = res.measurement
    assert (m.psi, m.n, m.micro_batches, m.grad_sync) == (PSI, 4, 4, "every")
    # 3/4 of Ψ gathered once and of 4Ψ reduce-scattered, fp32
    assert m.bytes_per_rank_per_step == pytest.approx(5 * PSI * 3 / 4 * 4, rel=1e-9)
    ds = next(c for c in res.comparisons if c.scheme == "deepspeed-zero3")
    assert not ds.pattern_match and ds.gathers_if_kept == 1 and res.kept == ("deepspeed-zero3",)
    assert any("every parameter persistent" in n and "stage3_param_persistence_threshold" in n
               for n in res.notes)
    # the textbook ZeRO-2 pattern on the wire; FSDP1's no_sync() regime is not claimed (gradients reduced
    # in every micro-batch)
    assert "zero2" in res.matches and "fsdp-shard-grad-op" not in res.kept


def test_gathers_from_a_secondary_copy_read_as_the_whole_groups():
    # by hand: a step's all-gather of 100 elements on 4; apart, one of 100 on 2 (the same vector from a copy
    # in a group of 2), one of 50 on 2 (another vector: tensor parallelism's activations) and one of 100 on 3
    # (3 does not divide 4)
    import numpy as np

    from zerocalc.validate.columns import Codes
    from zerocalc.validate.micro_batches import secondary_gathers

    ops = Codes(np.array([0, 1, 0, 0, 0]), ("all_gather", "reduce_scatter"))
    gs = np.array([4, 4, 2, 2, 3])
    full = np.array([100.0, 400.0, 100.0, 50.0, 100.0])
    step = np.array([True, True, False, False, False])
    mask, mapped = secondary_gathers(ops, gs, full, step, ~step)
    assert mask.tolist() == [False, False, True, False, False]
    assert mapped.tolist() == [4, 4, 4, 2, 3] and gs.tolist() == [4, 4, 2, 2, 3]


@pytest.mark.parametrize("psi", [None, 230_496])
def test_zero3_at_deepspeeds_defaults_with_some_parameters_persistent(psi):
    # ZeRO-3 at its defaults on Linear(128, 1024) - ReLU - Linear(1024, 96), 4 micro-batches. Counted
    # (count_calls.py): every step on every rank gathers layers.0's weight (131,072) before each forward, and
    # the persistent rest (98,304 + 1,024 + 96 = 99,424: at most 1e5 elements each) once after the last;
    # it reduce-scatters Ψ = 230,496 in every micro-batch
    case = "ds-zero3-defaults-mixed-ga4"
    run = json.loads((RUNS / case / "run.json").read_text())
    total = run["model"]["psi"]
    persistent = sum(n for n in [1024 * 96, 1024, 96] if n <= 100_000)
    assert total == 230_496 and persistent == 99_424
    for passes, per in _elements_per_step(case):
        assert passes == 4
        assert per == {("c10d::_allgather_base_", 4): 4 * 131_072 + persistent,
                       ("c10d::_reduce_scatter_base_", 4): 4 * total}
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta, psi=psi)
    m = res.measurement
    assert (m.psi, m.n, m.micro_batches, m.grad_sync) == (total, 4, 4, "every")
    ds = next(c for c in res.comparisons if c.scheme == "deepspeed-zero3")
    assert not ds.pattern_match and ds.persistent_share == pytest.approx(persistent / total, rel=1e-9)
    assert ds.gathers_if_kept == 0 and res.kept == ("deepspeed-zero3",)
    assert any("43.1% of Ψ (99,424 elements) persistent" in n for n in res.notes)
    rec = next(s for s in res.as_dict()["schemes"] if s["scheme"] == "deepspeed-zero3")
    assert rec["persistent_share"] == pytest.approx(persistent / total, rel=1e-9)
    # every parameter persistent (the other run) is the share 1
    ts = read_traces(RUNS / "ds-zero3-defaults-ga4")
    ds = next(c for c in check(ts.table, meta=ts.meta).comparisons if c.scheme == "deepspeed-zero3")
    assert ds.persistent_share == 1 and ds.gathers_if_kept == 1


def test_zero3_before_0_19_3_keeps_the_first_layer_gathered_across_micro_batches():
    # ds-zero3-ga4 run under DeepSpeed 0.15.4 (stage3_param_persistence_threshold 0: nothing persistent).
    # Counted (count_calls.py): every step on every rank reduce-scatters Ψ in each of its 4 micro-batches and
    # gathers Ψ before the first, then 46,336 (layers 1 and 2) before each later one, nothing after the last
    # reduction: layers.0's 24,768, the module the backward uses last, stay gathered for the next forward
    case = "deepspeed0.15.4-ds-zero3-ga4"
    run = json.loads((RUNS / case / "run.json").read_text())
    assert run["deepspeed"] == "0.15.4"
    assert run["deepspeed_config"]["zero_optimization"]["stage3_param_persistence_threshold"] == 0
    first = run["model"]["psi_per_layer"][0]
    assert first == 24_768
    for passes, per in _elements_per_step(case):
        assert passes == 4
        assert per == {("c10d::_allgather_base_", 4): PSI + 3 * (PSI - first),
                       ("c10d::_reduce_scatter_base_", 4): 4 * PSI}
    steps = json.loads((RUNS / case / "expected.json").read_text())["ranks"]["0"]["steps"].values()
    for s in steps:  # nothing gathered after the step's last reduce-scatter
        order = s["timeline"]
        last = max(i for i, c in enumerate(order) if c.startswith("c10d::_reduce_scatter_base_"))
        assert not any(c.startswith("c10d::_allgather_base_") for c in order[last:])
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert (m.psi, m.n, m.micro_batches, m.grad_sync) == (PSI, 4, 4, "every")
    assert "the first gathers more than the 3 after it (alike), which do not gather" in m.micro_batches_how
    ds = next(c for c in res.comparisons if c.scheme == "deepspeed-zero3")
    assert ds.persistent_share == pytest.approx(first / PSI, rel=1e-9) and res.kept == ("deepspeed-zero3",)
    note = next(n for n in res.notes if n.startswith("deepspeed-zero3 sends exactly this pattern"))
    assert "34.8% of Ψ (24,768 elements) gathered once a step" in note and "persistent:" not in note
    assert "the first micro-batch after the optimizer step gathers them" in note and "before 0.19.3" in note
    # the same share read from DeepSpeed 0.19.8's persistent parameters (gathered after the last reduction)
    # keeps its words
    ts = read_traces(RUNS / "ds-zero3-defaults-mixed-ga4")
    res = check(ts.table, meta=ts.meta)
    assert any("43.1% of Ψ (99,424 elements) persistent: parameters of at most" in n for n in res.notes)


def test_zero3_before_0_19_3_at_its_defaults_keeps_some_persistent_and_the_first_layer():
    # ds-zero3-defaults-mixed-ga4 under DeepSpeed 0.15.4: Linear(128, 1024) - ReLU - Linear(1024, 96) at
    # ZeRO-3's defaults, 4 micro-batches. Counted (count_calls.py): every step on every rank gathers
    # layers.0's weight (131,072, past the 1e5 persistence threshold) once, before the first micro-batch,
    # reduce-scatters Ψ = 230,496 in each, and gathers the persistent rest (99,424) after the last: Ψ
    # gathered once a step, but not all of it persistent (0.19.8 gathers the weight in every micro-batch)
    case = "deepspeed0.15.4-ds-zero3-defaults-mixed-ga4"
    total, weight, persistent = 230_496, 128 * 1024, 1024 + 1024 * 96 + 96
    assert json.loads((RUNS / case / "run.json").read_text())["model"]["psi"] == total == weight + persistent
    for passes, per in _elements_per_step(case):
        assert passes == 4
        assert per == {("c10d::_allgather_base_", 4): weight + persistent,
                       ("c10d::_reduce_scatter_base_", 4): 4 * total}
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    from zerocalc.validate.regimes import gathered_after_reductions

    assert gathered_after_reductions(res.measurement) == persistent
    ds = next(c for c in res.comparisons if c.scheme == "deepspeed-zero3")
    assert ds.persistent_share == 1 and res.kept == ("deepspeed-zero3",)
    note = next(n for n in res.notes if n.startswith("deepspeed-zero3 sends exactly this pattern"))
    assert "every parameter persistent" not in note
    assert f"{persistent:,} of those elements gathered after the optimizer step" in note
    assert f"the other {weight:,} the parameters of the modules the backward uses last" in note


def test_zero3_before_0_19_3_past_its_reuse_distance_keeps_the_first_layer_too():
    # ds-zero3-past-reuse-distance-ga2 under DeepSpeed 0.15.4 (README): counted (count_calls.py), each step's
    # first micro-batch gathers 126,752 elements before its reduce-scatter (Ψ, then layers.1 and layers.0
    # again in the backward: 55,648), the second 101,984 (all of that but layers.0's 24,768, kept from the
    # first's backward). Before: "gathered and never reduced, or tied", 5,952 read as frozen in the forward
    case = "deepspeed0.15.4-ds-zero3-past-reuse-distance-ga2"
    layers = json.loads((RUNS / case / "run.json").read_text())["model"]["psi_per_layer"]
    again, kept = layers[1] + layers[0], layers[0]
    for r in json.loads((RUNS / case / "expected.json").read_text())["ranks"].values():
        for step in r["steps"].values():
            blocks, gathered = [], 0
            for call in step["timeline"]:
                op, _, elems = call.partition(" ")
                if op == "c10d::_allgather_base_":
                    gathered += int(elems) * 4  # a rank's shard of a vector gathered on 4
                elif op == "c10d::_reduce_scatter_base_":
                    blocks.append(gathered)
                    gathered = 0
            assert blocks == [PSI + again, PSI + again - kept] == [126_752, 101_984]
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    ds = next(c for c in res.comparisons if c.scheme == "deepspeed-zero3")
    assert ds.regathered_share == pytest.approx(again / PSI, rel=1e-9)
    assert ds.persistent_share == pytest.approx(kept / PSI, rel=1e-9)
    assert res.kept == ("deepspeed-zero3",) and not res.frozen
    note = next(n for n in res.notes if n.startswith("deepspeed-zero3 sends exactly this pattern"))
    assert "34.8% of Ψ (24,768 elements) gathered once a step" in note
    assert "0.783Ψ (55,648 elements) of the parameters gathered again" in note
    assert "the first micro-batch gathers 1.78Ψ, each later one 1.43Ψ" in note
    assert not any("never reduced" in n for n in res.notes)
    # its Flight Recorder dump (no nodes of the backward to read) reads the same, where the share gathered
    # again alone would be the two micro-batches' mean (0.608Ψ)
    ts = read_traces(RUNS.parent / "flight-recorder" / case)
    res = check(ts.table, meta=ts.meta)
    ds = next(c for c in res.comparisons if c.scheme == "deepspeed-zero3")
    assert (res.measurement.psi, res.measurement.micro_batches) == (PSI, 2)
    assert ds.regathered_share == pytest.approx(again / PSI, rel=1e-9)
    assert ds.persistent_share == pytest.approx(kept / PSI, rel=1e-9)
    assert res.kept == ("deepspeed-zero3",) and "deepspeed-zero3" not in res.matches


def test_zero3_before_0_19_3_reads_the_same_from_its_comms_log():
    # the same model and config under DeepSpeed 0.15.4, its comms logger verbose (deepspeed-comms-gloo,
    # README): each step after the first gathers 69.44 KB, then 45.25 KB before each of 3 later micro-batches,
    # a 277.75 KB reduce-scatter in each of the 4, an 8-byte norm at the end; the logger's sizes are a rank's
    # bytes (a gather's partition, a reduce-scatter's whole), fp32
    log = RUNS.parent / "deepspeed-comms-gloo" / "zero3-ga4-deepspeed0.15.4-verbose.log"
    ops = re.findall(r"comm op: (\w+) \| .*? msg size: ([\d.]+) ?(K?B)", log.read_text())
    step = [(op, v + " " + u) for op, v, u in ops][-9:]
    assert step == [("all_gather_into_tensor", "69.44 KB"), ("reduce_scatter_tensor", "277.75 KB")] + [
        ("all_gather_into_tensor", "45.25 KB"), ("reduce_scatter_tensor", "277.75 KB")] * 3 + [
        ("all_reduce", "8.0 B")]
    ts = read_traces(log)
    res = check(ts.table, meta=ts.meta, dtype="fp32")
    m = res.measurement
    assert (m.psi, m.micro_batches, m.grad_sync) == (round(277.75 * 1024 / 4), 4, "every")
    ds = next(c for c in res.comparisons if c.scheme == "deepspeed-zero3")
    # the share kept: what the later gathers leave out of the first's, to the logger's 2 decimals of KB
    assert ds.persistent_share == pytest.approx(1 - 45.25 / 69.44, abs=1e-3)
    assert any("the first micro-batch after the optimizer step gathers them" in n for n in res.notes)


def test_elements_gathered_after_a_steps_last_reduction():
    # counted (count_calls.py, README): DeepSpeed 0.19.8 at its defaults gathers its persistent parameters'
    # 99,424 elements after the last reduce-scatter of each step; 0.15.4 with none persistent, nothing there;
    # FSDP2 (fsdp2-mixed-bf16-fp32) gathers layers.0's 24,768 after the last-but-one reduce-scatter and
    # nothing after the last
    from zerocalc.validate.regimes import gathered_after_reductions

    for case, after in (("ds-zero3-defaults-mixed-ga4", 99_424), ("deepspeed0.15.4-ds-zero3-ga4", 0),
                        ("fsdp2-mixed-bf16-fp32", 0)):
        ts = read_traces(RUNS / case)
        assert gathered_after_reductions(check(ts.table, meta=ts.meta).measurement) == after, case


#: HSDP runs with the replicate all-reduce in the last micro-batch alone, and their micro-batches a step
ALL_REDUCE_LAST = [("hsdp-2x2-ga4-all-reduce-last", 4), ("hsdp-2x2-ga2-all-reduce-last", 2)]


@pytest.mark.parametrize("psi", [None, PSI])
@pytest.mark.parametrize(("case", "k"), ALL_REDUCE_LAST)
def test_hsdp_all_reducing_in_the_last_micro_batch_alone(case, k, psi):
    # HSDP 2 x 2, k micro-batches, set_requires_all_reduce(False) on the first k - 1. Counted
    # (count_calls.py): every step on every rank gathers 2kΨ and reduce-scatters kΨ on its shard group of 2,
    # and all-reduces its half of Ψ once (the group of 2 the op does not name). With 2 micro-batches nothing
    # repeats back to back before the last's all-reduces: before, K = 2 from the backward passes, read as
    # micro-batches that send nothing before the boundary, Ψ read as 2Ψ and no scheme
    for passes, per in _elements_per_step(case):
        assert passes == k
        assert per == {("c10d::_allgather_base_", 2): 2 * k * PSI,
                       ("c10d::_reduce_scatter_base_", 2): k * PSI, ("c10d::allreduce_", None): PSI / 2}
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta, psi=psi)
    m = res.measurement
    # before: N = 2 with the all-reduces reported apart as another group's; K = 4 with Ψ from one micro-batch
    assert (m.psi, m.n, m.shard_size, m.micro_batches, m.grad_sync) == (PSI, 4, 2, k, "every")
    # ring accounting on groups of 2: half of 2kΨ gathered, of kΨ reduce-scattered, and twice half of Ψ/2
    assert m.bytes_per_rank_per_step == pytest.approx((2 * k * PSI / 2 + k * PSI / 2 + PSI / 2) * 4, rel=1e-9)
    hybrid = next(c for c in res.comparisons if c.scheme == "fsdp-hybrid")
    assert not hybrid.pattern_match and hybrid.matches_if_all_reduced_once
    assert res.all_reduced_once == ("fsdp-hybrid",)
    assert any("set_requires_all_reduce(False)" in n and f"in place of {k}" in n for n in res.notes)
    assert res.as_dict()["matches_if_all_reduced_once"] == ["fsdp-hybrid"]
    # HSDP that all-reduces in every micro-batch (hsdp-2x2, one micro-batch) sets no such flag
    ts = read_traces(RUNS / "hsdp-2x2")
    assert not check(ts.table, meta=ts.meta).all_reduced_once


@pytest.mark.parametrize(("case", "k"), ALL_REDUCE_LAST)
def test_hsdp_all_reducing_in_the_last_micro_batch_alone_without_step_markers(case, k):
    # the same calls with the profiler's step markers dropped, as a trace that marks no steps (an NCCL log)
    # shows them: the steps are found as repeated blocks, and inside each the last micro-batch is the block
    # once more with the all-reduces, which a step of its own would not be: k micro-batches, Ψ as before
    import numpy as np

    ts = read_traces(RUNS / case)
    table = ts.table.assign(step=np.nan)
    res = check(table, meta=ts.meta)
    m = res.measurement
    assert (m.psi, m.n, m.steps, m.micro_batches) == (PSI, 4, 2, k)
    assert res.all_reduced_once == ("fsdp-hybrid",)


ROOT_UNIT = 160 * 96 + 96  # layers.2, left in the root (run.json root_unit_elements)


@pytest.mark.parametrize("psi", [None, PSI])
def test_fsdp1_root_unit_is_kept_from_the_forward_to_the_backward(psi):
    # FSDP1 FULL_SHARD with layers.2 in the root unit. Counted (count_calls.py): every step on every rank
    # gathers each unit in the forward and the two inner ones again in the backward (Ψ + Ψ - 15,456), and
    # reduce-scatters Ψ
    case = "fsdp1-root-holds-last"
    assert json.loads((RUNS / case / "run.json").read_text())["root_unit_elements"] == ROOT_UNIT
    for passes, per in _elements_per_step(case):
        assert passes == 1
        assert per == {("c10d::allgather_", None): 2 * PSI - ROOT_UNIT,
                       ("c10d::_reduce_scatter_base_", 4): PSI}
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta, psi=psi)
    m = res.measurement
    assert (m.psi, m.n, m.micro_batches) == (PSI, 4, 1)
    # ring accounting: 3/4 of what was gathered and of Ψ reduce-scattered, fp32
    assert m.bytes_per_rank_per_step == pytest.approx((3 * PSI - ROOT_UNIT) * 3 / 4 * 4, rel=1e-9)
    # before: no scheme; now every scheme that gathers twice a micro-batch, with the root's share kept
    assert not res.matches
    assert res.partly_kept == ("zero3", "fsdp-full-shard", "fsdp-hybrid")
    full = next(c for c in res.comparisons if c.scheme == "fsdp-full-shard")
    assert not full.pattern_match and full.kept_for_backward_share == pytest.approx(ROOT_UNIT / PSI, rel=1e-9)
    assert any("21.7% of Ψ (15,456 elements) kept" in n and "_post_forward_reshard" in n for n in res.notes)
    d = res.as_dict()
    assert d["matches_if_some_parameters_kept_for_backward"] == ["zero3", "fsdp-full-shard", "fsdp-hybrid"]
    rec = next(s for s in d["schemes"] if s["scheme"] == "fsdp-full-shard")
    assert rec["share_kept_for_backward"] == pytest.approx(ROOT_UNIT / PSI, rel=1e-9)
    # every unit resharded (fsdp1-full-shard) matches as priced, with no share
    ts = read_traces(RUNS / "fsdp1-full-shard")
    res = check(ts.table, meta=ts.meta)
    assert "fsdp-full-shard" in res.matches and not res.partly_kept


@pytest.mark.parametrize("marked", [True, False])
def test_fsdp2_root_module_at_the_default_reshard_is_kept_in_every_micro_batch(marked):
    # FSDP2 with layers.2 in the root module, reshard_after_forward at its default, 4 micro-batches,
    # gradients synchronised in the last. Counted (count_calls.py): every step on every rank gathers
    # 4(2Ψ - 15,456) and reduce-scatters Ψ once, after the last backward's gathers
    import numpy as np

    case = "fsdp2-default-root-holds-last-ga4"
    for passes, per in _elements_per_step(case):
        assert passes == 4
        assert per == {("c10d::_allgather_base_", 4): 4 * (2 * PSI - ROOT_UNIT),
                       ("c10d::_reduce_scatter_base_", 4): PSI}
    ts = read_traces(RUNS / case)
    # without the step markers, as an NCCL log shows the calls: the block of gathers repeated 4 times and
    # then the reductions alone is a step of 4 micro-batches (before: K = 1, and no scheme)
    res = check(ts.table if marked else ts.table.assign(step=np.nan), meta=ts.meta)
    m = res.measurement
    assert (m.psi, m.n, m.steps, m.micro_batches, m.grad_sync) == (PSI, 4, 2, 4, "boundary")
    assert m.bytes_per_rank_per_step == pytest.approx((4 * (2 * PSI - ROOT_UNIT) + PSI) * 3 / 4 * 4, rel=1e-9)
    # zero3 reduces in every micro-batch: not this run
    assert res.partly_kept == ("fsdp-full-shard", "fsdp-hybrid")
    full = next(c for c in res.comparisons if c.scheme == "fsdp-full-shard")
    assert full.kept_for_backward_share == pytest.approx(ROOT_UNIT / PSI, rel=1e-9)
    assert any("(1.78Ψ gathered a micro-batch in place of 2Ψ)" in n for n in res.notes)


def test_share_kept_for_backward_by_hand():
    # by hand, Ψ = 100, k = 2 micro-batches, 4 gathers priced (forward and backward in each): 2kΨ = 400
    # gathered and 200 reduce-scattered a step
    from zerocalc.validate.regimes import kept_for_backward_share

    pred = {("all_gather", 4): 400.0, ("reduce_scatter", 4): 200.0}
    phases = [("all_gather", 4, 4, 100.0), ("reduce_scatter", 4, 2, 100.0)]
    # 25 elements kept in each micro-batch: 2(200 - 25) = 350 gathered, q = 0.25
    assert kept_for_backward_share({("all_gather", 4): 350.0, ("reduce_scatter", 4): 200.0}, pred, phases, 2,
                                   100.0) == pytest.approx(0.25)
    # nothing kept, or everything (the regime that halves the gathers), or other reductions: no share
    for gathered, scattered in ((400.0, 200.0), (200.0, 200.0), (350.0, 100.0), (450.0, 200.0)):
        meas = {("all_gather", 4): gathered, ("reduce_scatter", 4): scattered}
        assert kept_for_backward_share(meas, pred, phases, 2, 100.0) == 0.0
    # a scheme that gathers once a micro-batch (priced kΨ) has no such share
    once = [("all_gather", 4, 2, 100.0), ("reduce_scatter", 4, 2, 100.0)]
    priced_once = {("all_gather", 4): 200.0, ("reduce_scatter", 4): 200.0}
    meas = {("all_gather", 4): 150.0, ("reduce_scatter", 4): 200.0}
    assert kept_for_backward_share(meas, priced_once, once, 2, 100.0) == 0.0


def test_a_block_without_reductions_then_reductions_alone_is_micro_batches_only_when_it_gathers_them():
    # by hand, one step found without markers: codes 1 and 3 are gathers, 2 a reduce-scatter
    from zerocalc.validate.step_blocks import step_blocks

    # [gather 60, gather 40] x 3, then the reduce-scatter of 100 (what one block gathers): 3 micro-batches
    codes, grad = [1, 3, 1, 3, 1, 3, 2], [False] * 6 + [True]
    elems = [60.0, 40.0] * 3 + [100.0]
    assert step_blocks(codes, grad, [True] * 7, elems) == (3, "boundary", 1, True)
    # one layer's gather of 100 x 3 (a model of equal layers, kept for backward), then its reductions of
    # 300: one micro-batch, which a trace without markers cannot be sure of
    codes, grad, elems = [1, 1, 1, 2, 2, 2], [False] * 3 + [True] * 3, [100.0] * 6
    assert step_blocks(codes, grad, [True] * 6, elems)[3] is False
    # other calls with data after the repeats (a training micro-batch after evaluations): not sure either
    codes, grad = [1, 3, 1, 3, 1, 3, 1, 2], [False] * 7 + [True]
    assert step_blocks(codes, grad, [True] * 8, [60.0, 40.0] * 3 + [60.0, 100.0])[3] is False


def test_no_share_kept_for_backward_is_read_off_ranks_that_gather_unlike():
    # an NCCL debug log (its source: tests/data/traces/README.md) of 2 ranks, one with two all-gathers of
    # 2,097,152 elements and one with one, and one reduce-scatter each: 1.5 gathers a rank on average, which
    # no module's parameters kept for backward make
    ts = read_traces(Path(__file__).parent / "data" / "traces" / "nccl-debug" /
                     "tp-allgather-reducescatter-2ranks.txt")
    res = check(ts.table, meta=ts.meta)
    assert any("ranks differ in their calls" in n for n in res.measurement.notes)
    assert not res.partly_kept and not any(c.kept_for_backward_share for c in res.comparisons)


MOE_DENSE, MOE_EXPERTS = 44_064, 123_584  # run.json: l0, the gate and l2; each rank's 2 experts


@pytest.mark.parametrize("psi", [None, MOE_DENSE + MOE_EXPERTS])
def test_deepspeed_moe_prices_the_dense_parameters_and_the_experts_each_on_its_group(psi):
    # DeepSpeed ZeRO-2 with an MoE layer of 4 experts, expert parallelism 2, 4 micro-batches. Counted
    # (count_calls.py): every step on every rank all-reduces 44,064 and 123,584 elements in each micro-batch
    # (the op names no group), exchanges tokens by 16 all-to-alls of 6,144, and after the optimizer step
    # all-gathers 44,064 on 4 and 123,584 on 2 (the groups from the shapes)
    case = "ds-moe-ep2-zero2-ga4"
    run = json.loads((RUNS / case / "run.json").read_text())
    assert (run["model"]["dense_psi"], run["model"]["expert_psi_per_rank"]) == (MOE_DENSE, MOE_EXPERTS)
    ts = _moe_run_counted(case)
    # over gloo no all-reduce names its group: each is placed by the worker thread that ran it (the
    # data-parallel group's second worker ran no gather, so only the order of the threads places it)
    ar = ts.table[(ts.table.op == "all_reduce") & (ts.table.in_nelems > 1)]
    assert set(ar.loc[ar.in_nelems == MOE_DENSE, "group_size"]) == {4}
    assert set(ar.loc[ar.in_nelems == MOE_EXPERTS, "group_size"]) == {2}
    # before: N = 2 and Ψ the experts' alone, the dense all-reduces reported apart, no scheme
    res = _checks_as_moe_zero2(ts, psi)
    m = res.measurement
    assert any("all-to-all on 2 ranks" in n for n in m.notes)
    d = res.as_dict()
    assert d["expert_parallel"] == {"expert_data_parallel_size": 2, "expert_parallel_size": 2,
                                    "expert_psi": MOE_EXPERTS, "dense_psi": MOE_DENSE}
    # --n 2 takes the expert-data-parallel group alone, as before
    m2 = check(ts.table, meta=ts.meta, n=2).measurement
    assert (m2.n, m2.expert_size) == (2, None)


@pytest.mark.parametrize("psi", [None, MOE_DENSE + MOE_EXPERTS])
def test_deepspeed_moe_in_small_buckets_places_each_bucket_on_its_group(psi):
    # the same run with reduce and gather buckets of 20,000: counted (count_calls.py), each micro-batch
    # all-reduces the dense gradients in 4 buckets (18,528, 960, 22,032, 2,544: 44,064) and the experts' in
    # 8 (192, 160 and 30,720 twice each expert: 123,584); after the step the same two all-gathers. Two
    # threads of a group ran no gather: their buckets' groups come from the sibling thread that runs the
    # same buckets, or from the order of the threads, where the guess pg_config makes (the sub-groups'
    # size, 2) is kept for the most elements a placement allows. Before, some experts' buckets were on
    # no group and some dense ones on groups of 2: buckets reported apart, no scheme consistent
    case = "ds-moe-ep2-zero2-ga4-small-buckets"
    dense, experts = [18_528, 960, 22_032, 2_544], [192, 160, 30_720, 30_720] * 2
    assert (sum(dense), sum(experts)) == (MOE_DENSE, MOE_EXPERTS)
    ts = _moe_run_counted(case)
    ar = ts.table[(ts.table.op == "all_reduce") & (ts.table.in_nelems > 1)]
    assert set(ar.loc[ar.in_nelems.isin(dense), "group_size"]) == {4}
    assert set(ar.loc[ar.in_nelems.isin(experts), "group_size"]) == {2}
    assert ar.group.notna().all()
    _checks_as_moe_zero2(ts, psi)


def _moe_run_counted(case: str):
    """The MoE run's traces, after its counts (count_calls.py): each step 4 micro-batches, all-reducing
    the dense gradients and the experts' in each, 16 all-to-alls of 6,144, and after the optimizer step
    the dense partitions gathered on 4 and the experts' on 2."""
    for passes, per in _elements_per_step(case):
        assert passes == 4
        assert per == {("c10d::allreduce_", None): 4 * (MOE_DENSE + MOE_EXPERTS),
                       ("c10d::alltoall_base_", None): 16 * 6144,
                       ("c10d::_allgather_base_", 4): MOE_DENSE, ("c10d::_allgather_base_", 2): MOE_EXPERTS}
    return read_traces(RUNS / case)


def _checks_as_moe_zero2(ts, psi):
    """check on a run of DeepSpeed ZeRO-2 with the MoE layer, 4 micro-batches each all-reducing the dense
    gradients on 4 and the experts' on 2: Ψ, N, K, the bytes (ring accounting, fp32: 2(p-1)/p of each
    all-reduce's vector, (p-1)/p of each all-gather's) and deepspeed-zero2 alone consistent."""
    res = check(ts.table, meta=ts.meta, psi=psi)
    m = res.measurement
    assert (m.psi, m.expert_psi, m.n, m.expert_size, m.micro_batches, m.grad_sync) == (
        MOE_DENSE + MOE_EXPERTS, MOE_EXPERTS, 4, 2, 4, "every")
    assert m.bytes_per_rank_per_step == pytest.approx(
        (4 * MOE_DENSE * 2 * 3 / 4 + 4 * MOE_EXPERTS * 2 * 1 / 2 + MOE_DENSE * 3 / 4 + MOE_EXPERTS / 2) * 4,
        rel=1e-9)
    assert res.matches == ("deepspeed-zero2",)
    return res


def test_expert_parallelism_needs_its_all_to_all_on_the_groups_between():
    # by hand: gradient reductions on groups of 8 and 2 (2 divides 8); the all-to-all's group tells
    import numpy as np

    from zerocalc.validate.columns import Codes
    from zerocalc.validate.groups import _experts

    names = ("all_reduce", "all_to_all")
    gs = np.array([8, 2, 4])
    full = np.array([1000.0, 3000.0, 500.0])
    grad = np.array([True, True, False])
    assert _experts(Codes(np.array([0, 0, 1]), names), gs, full, grad) == (8, 2)
    # no all-to-all, or one on a group of 2 (not 8 / 2), or a scalar one: not expert parallelism (tensor or
    # pipeline parallelism beside data parallelism)
    assert _experts(Codes(np.array([0, 0, 0]), names), gs, full, grad) is None
    assert _experts(Codes(np.array([0, 0, 1]), names), np.array([8, 2, 2]), full, grad) is None
    assert _experts(Codes(np.array([0, 0, 1]), names), gs, np.array([1000.0, 3000.0, 1.0]), grad) is None
    # 3 does not divide 8
    assert _experts(Codes(np.array([0, 0, 1]), names), np.array([8, 3, 4]), full, grad) is None


def test_fsdp2_with_expert_parallelism_shards_the_experts_on_their_group():
    # FSDP2 with expert parallelism 2 as torchtitan composes them (the experts fully_shard on their group of
    # 2, the dense layers and the root on 4). Counted (count_calls.py): every step on every rank gathers the
    # dense parameters twice on 4 (forward and backward) and the rank's experts twice on 2, reduce-scatters
    # each once on its group, and exchanges tokens by 4 all-to-alls of 6,144
    case = "fsdp2-expert-parallel-2"
    run = json.loads((RUNS / case / "run.json").read_text())
    assert (run["model"]["dense_psi"], run["model"]["expert_psi_per_rank"]) == (MOE_DENSE, MOE_EXPERTS)
    for passes, per in _elements_per_step(case):
        assert passes == 1
        assert per == {("c10d::_allgather_base_", 4): 2 * MOE_DENSE,
                       ("c10d::_allgather_base_", 2): 2 * MOE_EXPERTS,
                       ("c10d::_reduce_scatter_base_", 4): MOE_DENSE,
                       ("c10d::_reduce_scatter_base_", 2): MOE_EXPERTS,
                       ("c10d::alltoall_base_", None): 4 * 6144}
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    # before: N = 2 and Ψ the experts' alone, read as fsdp-shard-grad-op
    assert (m.psi, m.expert_psi, m.n, m.expert_size, m.micro_batches) == (
        MOE_DENSE + MOE_EXPERTS, MOE_EXPERTS, 4, 2, 1)
    # ring accounting, fp32: (p-1)/p of each gathered and reduce-scattered vector, on its group
    assert m.bytes_per_rank_per_step == pytest.approx((3 * MOE_DENSE * 3 / 4 + 3 * MOE_EXPERTS / 2) * 4,
                                                      rel=1e-9)
    assert "fsdp-full-shard" in res.matches and "fsdp-shard-grad-op" not in res.matches


def test_psi_of_the_dense_parameters_alone_is_refused_with_what_the_trace_reduces():
    from zerocalc.errors import TraceMismatchError

    ts = read_traces(RUNS / "fsdp2-expert-parallel-2")
    said = r"167,648 elements per step \(44,064 of dense parameters and 123,584 of the rank's experts"
    with pytest.raises(TraceMismatchError, match=said):
        check(ts.table, meta=ts.meta, psi=MOE_DENSE)


def test_hsdp_beside_tensor_parallelism_on_a_3d_mesh():
    # HSDP (replicate 2 x shard 2) beside tensor parallelism 2 on 8 ranks. Counted (count_calls.py): every
    # step on every rank gathers its 43,360 tensor-parallel parameters twice on its shard group of 2 and
    # reduce-scatters them once, all-reduces the 21,680 of its shards, and all-reduces layers.1's output
    # (1,280) once: both all-reduces name no group (run.json: three groups of 2 on every rank)
    case = "hsdp-2x2-tp2"
    run = json.loads((RUNS / case / "run.json").read_text())
    psi = run["psi_per_rank"]
    assert (run["world_size"], psi) == (8, 43_360)
    for passes, per in _elements_per_step(case):
        assert passes == 1
        assert per == {("c10d::_allgather_base_", 2): 2 * psi, ("c10d::_reduce_scatter_base_", 2): psi,
                       ("c10d::allreduce_", None): psi / 2 + 8 * 160}
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    # before: N = 2, the replicate all-reduces reported apart with the tensor-parallel one
    assert (m.psi, m.n, m.shard_size, m.dp_group_sizes) == (psi, 4, 2, (2,))
    assert "8 ranks in all" in m.n_how
    # the tensor-parallel all-reduce runs in the forward (counted: expected.json's forward_reductions): it is
    # reported apart as an activation's, and so never weighed against the replicate group's all-reduces
    assert any("reported apart as activations" in n and "all-reduce of 1,280 elements ×16" in n
               for n in m.notes)
    # ring accounting on groups of 2: half of 2Ψ gathered, of Ψ reduce-scattered, twice half of Ψ/2
    assert m.bytes_per_rank_per_step == pytest.approx((psi + psi / 2 + psi / 2) * 4, rel=1e-9)
    assert res.matches == ("fsdp-hybrid",)
    assert any("all-reduce on 2 ranks ×16" in n for n in m.notes)  # 1 a step, 2 steps, 8 ranks


def test_an_evaluation_only_run_is_refused_as_no_training_step():
    # DDP's model evaluated, no training. Counted (count_calls.py): every step (an evaluation batch) on every
    # rank, one forward and two 1-element all-reduces (the loss and a metric), nothing else
    from zerocalc.errors import TraceMismatchError

    case = "ddp-eval-only"
    for passes, per in _elements_per_step(case):
        assert passes == 1 and per == {}  # nothing above one element
    ts = read_traces(RUNS / case)
    # before: "no gradient collective … to infer Ψ from: give --psi", as if Ψ were what is missing
    said = r"its 24 collective\(s\) are all scalars of at most 8 elements .* no training step to check"
    with pytest.raises(TraceMismatchError, match=said):
        check(ts.table, meta=ts.meta)
    # with Ψ given, the two scalars of each step are no micro-batches (before: K = 2)
    res = check(ts.table, meta=ts.meta, psi=PSI)
    m = res.measurement
    assert (m.micro_batches, m.bytes_per_rank_per_step, res.matches) == (1, 0.0, ())


def test_calls_that_record_bytes_alone_are_no_scalars_for_that_refusal():
    # DeepSpeed's comms-logging tutorial output (tests/data/traces/README.md): its calls record a size in
    # bytes, no elements (reduce_scatter_tensor of 678.86 MB, all_gather_into_tensor of 6.0 MB). On the
    # groups of 2 that --n 2 asks for, no gradient collective runs, and Ψ is what is missing, not a step
    from zerocalc.errors import TraceMismatchError

    ts = read_traces(Path(__file__).parent / "data" / "traces" / "deepspeed-comms" / "tutorial-examples.txt")
    with pytest.raises(TraceMismatchError, match="--psi") as err:
        check(ts.table, meta=ts.meta, n=2)
    assert "all scalars" not in str(err.value)


def test_deepspeeds_pipeline_engine_checks_per_stage_with_its_sends_apart():
    # DeepSpeed's PipelineModule in 2 stages x data parallelism 2, ZeRO-1, 4 micro-batches by train_batch.
    # Counted (count_calls.py): each step, stage 0 (ranks 0, 1) all-reduces its 24,768 gradient elements
    # once and all-gathers them back from its shard, stage 1 (ranks 2, 3) its 46,336; each rank sends 4 and
    # receives 4 activations (or their gradients) of 8 x 192, one a micro-batch each way; the rest are
    # scalars (a 2-element broadcast of the loss, 1-element all-reduces)
    case = "ds-pipe2-dp2-zero1-ga4"
    run = json.loads((RUNS / case / "run.json").read_text())
    stage_psi = dict(zip((0, 1), run["pipeline"]["psi_per_stage"], strict=True))
    assert stage_psi == {0: 24_768, 1: 46_336}
    for r in range(4):
        stage = 0 if r in run["pipeline"]["stages"][0] else 1
        counted = json.loads((RUNS / case / "expected.json").read_text())["ranks"][str(r)]["steps"]
        for step in counted.values():
            elems = {(c["op"], c["in_elems"]): c["calls"] for c in step["c10d"] if c["in_elems"] > 8}
            assert elems == {("c10d::allreduce_", stage_psi[stage]): 1,
                             ("c10d::_allgather_base_", stage_psi[stage] // 2): 1,
                             ("c10d::send", 8 * 192): 4, ("c10d::recv_", 8 * 192): 4}
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    # each rank's Ψ is its stage's: the check's the median over ranks, (24,768 + 46,336) / 2
    assert (m.psi, m.n, m.world_size) == (35_552, 2, 4)
    assert any("vary between 24,768 and 46,336" in n for n in m.notes)
    # on groups of 2 (ring accounting): an all-reduce sends half the vector twice, a gather half once
    assert m.bytes_per_rank_per_step == pytest.approx(35_552 * 3 / 2 * 4)
    # 4 backward passes a step (run.json's micro-batches), the gradients reduced once: ZeRO-1's boundary
    # reduction, not ZeRO-2's reduction in every micro-batch
    assert (m.micro_batches, m.grad_sync) == (run["micro_batches"], "boundary") == (4, "boundary")
    assert res.matches == ("deepspeed-zero1",)
    assert any("recv on 4 ranks ×32" in n and "send on 4 ranks ×32" in n for n in m.notes)


@pytest.mark.parametrize("case", ["ds-zero3-ga4", "ds-zero3-ga4-reuse0-prefetch0", "ds-zero3-hpz2-ga4"])
def test_deepspeed_zero3_micro_batches_show_without_step_markers(case):
    # the same calls with the profiler's step markers dropped, as an NCCL log shows them. Counted
    # (count_calls.py): every step on every rank is 4 blocks, each gathering the model and reduce-scattering
    # its Ψ gradients, then one 1-element all-reduce (DeepSpeed's once a step). A block that gathers what it
    # reduces is a whole forward and backward, so 4 of them closed by a scalar are 4 micro-batches, not one
    # micro-batch of 4Ψ. Before: K = 1 and Ψ = 4 × 71,104
    import numpy as np

    run = json.loads((RUNS / case / "run.json").read_text())
    steps = json.loads((RUNS / case / "expected.json").read_text())["per_step_all_ranks"]
    for calls in steps.values():
        scalars = [c for c in calls if c["in_elems"] == 1]
        assert len(scalars) == 1 and scalars[0]["calls"] == 1
        reductions = {c["calls"] for c in calls if c["op"] == "c10d::_reduce_scatter_base_"}
        assert reductions == {run["micro_batches"]}
    ts = read_traces(RUNS / case)
    res = check(ts.table.assign(step=np.nan), meta=ts.meta)
    m = res.measurement
    assert (m.psi, m.n, m.steps, m.micro_batches, m.grad_sync) == (PSI, 4, len(steps), run["micro_batches"],
                                                                     "every")
    assert "it marks no optimizer steps" in m.micro_batches_how
    assert "deepspeed-zero3" in res.matches + res.kept + res.secondary_partition


@pytest.mark.parametrize("marked", [True, False])
def test_fsdp2_clipping_norms_all_reduced_are_not_gradients(marked):
    # FSDP2 on 6 layers, 4 micro-batches, clip_grad_norm_ before each optimizer step. Counted
    # (count_calls.py): every step on every rank gathers 8Ψ and reduce-scatters 4Ψ, then all-reduces
    # 12 elements, one norm per parameter tensor. Before, those 12 were read as a gradient all-reduce: Ψ
    # 139,139, and no scheme matched, FSDP having no all-reduce; without step markers, also K = 1 and Ψ 4×
    import numpy as np

    case = "fsdp2-6-layers-ga4-clip"
    run = json.loads((RUNS / case / "run.json").read_text())
    psi, k = run["model"]["psi"], run["micro_batches"]
    for passes, per in _elements_per_step(case):
        assert passes == k
        assert per == {("c10d::_allgather_base_", 4): 2 * k * psi,
                       ("c10d::_reduce_scatter_base_", 4): k * psi,
                       ("c10d::allreduce_", None): 2 * len(run["model"]["layers"])}
    ts = read_traces(RUNS / case)
    res = check(ts.table if marked else ts.table.assign(step=np.nan), meta=ts.meta)
    m = res.measurement
    assert (m.psi, m.n, m.micro_batches, m.grad_sync) == (psi, 4, k, "every")
    assert "fsdp-full-shard" in res.matches
    assert any("all-reduces of 12 elements" in n and "clip_grad_norm_" in n for n in m.notes)
    # on the world of 4 (ring accounting), fp32: 3/4 of the 8Ψ gathered and of the 4Ψ reduce-scattered
    assert m.bytes_per_rank_per_step == pytest.approx(12 * psi * 3 / 4 * 4, rel=1e-9)


def test_ddps_map_of_used_parameters_is_not_gradients():
    # DDP with find_unused_parameters=True on 6 layers. Counted (count_calls.py): every step on every rank
    # all-reduces Ψ fp32 gradient elements, then 12 int32 elements (the map of used parameters, one per
    # parameter tensor). Before, the 12 were read as gradients: Ψ 139,148
    case = "ddp-6-layers-find-unused"
    run = json.loads((RUNS / case / "run.json").read_text())
    psi = run["model"]["psi"]
    for r in json.loads((RUNS / case / "expected.json").read_text())["ranks"].values():
        for step in r["steps"].values():
            got = sorted((c["dtype"], c["in_elems"], c["calls"]) for c in step["c10d"])
            assert got == [("float", psi, 1), ("int", 2 * len(run["model"]["layers"]), 1)]
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert (m.psi, m.n, m.micro_batches) == (psi, 4, 1)
    assert res.matches[0] == "dp" and m.grad_dtype == "fp32"
    assert any("reductions of integers (int32: 12 elements)" in n for n in m.notes)
    # on the world of 4 (ring accounting), fp32: 2 × 3/4 of Ψ
    assert m.bytes_per_rank_per_step == pytest.approx(2 * psi * 3 / 4 * 4, rel=1e-9)


@pytest.mark.parametrize("marked", [True, False])
def test_a_checkpoint_every_second_step_is_not_an_optimizer_step(marked):
    # FSDP2, one micro-batch, a checkpoint saved after every 2nd step inside its ProfilerStep. Counted
    # (count_calls.py): every step gathers 2Ψ and reduce-scatters Ψ; every 2nd also holds the save plan's
    # object collectives, among them a broadcast of bytes. Before, read as 3 optimizer steps of 2
    # micro-batches (the extra calls taken for the optimizer's)
    import numpy as np

    case = "fsdp2-checkpoint-every-2"
    for r in json.loads((RUNS / case / "expected.json").read_text())["ranks"].values():
        steps = r["steps"]
        more = {name for name, step in steps.items()
                if any(c["dtype"] == "unsigned char" for c in step["c10d"])}
        assert more == {"ProfilerStep#2", "ProfilerStep#4", "ProfilerStep#6"}
    ts = read_traces(RUNS / case)
    res = check(ts.table if marked else ts.table.assign(step=np.nan), meta=ts.meta)
    m = res.measurement
    assert (m.psi, m.n, m.steps, m.micro_batches) == (PSI, 4, len(steps), 1)
    assert "pickled objects" in m.steps_how and "fsdp-full-shard" in res.matches
    # per step on the world of 4 (ring accounting), fp32: 3/4 of the 2Ψ gathered and of the Ψ reduce-scattered
    assert m.bytes_per_rank_per_step == pytest.approx(3 * PSI * 3 / 4 * 4, rel=1e-9)


def test_three_d_parallelism_reports_tensor_parallelism_apart_by_its_worker_threads():
    # pipeline 2 × FSDP2 2 × tensor parallelism 2 on 8 ranks, 2 micro-batches a step. Counted
    # (count_calls.py): a stage-0 rank gathers each of its layers' halves K + 1 = 3 times a step,
    # reduce-scatters 27,904 elements once and all-reduces 1,280 on its tensor-parallel group once a
    # micro-batch; a stage-1 rank gathers layer 2 3 times and reduce-scatters 15,456 once. Every rank has
    # three groups of 2, and over gloo the all-reduce names none: before, it was read as a gradient
    # reduction in every micro-batch (Ψ 11,480, K = 2 "every"); its worker threads run no FSDP call
    case = "pp2-fsdp2-tp2"
    run = json.loads((RUNS / case / "run.json").read_text())
    stage0, stage1 = run["pipeline"]["psi_per_stage_rank"]
    ranks = json.loads((RUNS / case / "expected.json").read_text())["ranks"]
    for r, s in ranks.items():
        for step in s["steps"].values():
            got = Counter()
            for c in step["c10d"]:
                if c["op"] != "c10d::_allgather_base_":
                    got[c["op"]] += c["calls"] * c["in_elems"]
            tp = {"c10d::allreduce_": 2 * 1280} if int(r) < 4 else {}
            assert got == {"c10d::_reduce_scatter_base_": stage0 if int(r) < 4 else stage1, **tp,
                           "c10d::send": 2 * 1280, "c10d::recv_": 2 * 1280}
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert m.psi == (stage0 + stage1) / 2 and (m.n, m.micro_batches, m.grad_sync) == (2, 2, "boundary")
    assert any("all-reduce on 2 ranks ×16" in n for n in m.notes)  # 2 a step on each of 4 ranks, 2 steps
    fsdp = next(c for c in res.comparisons if c.scheme == "fsdp-full-shard")
    assert fsdp.matches_if_kept_across_micro_batches


def test_a_loss_gathered_from_every_rank_is_scalar_traffic():
    # DDP on 16 ranks, the loss gathered from every rank after each step to be logged. Counted
    # (count_calls.py): every step on every rank all-reduces Ψ fp32 elements and all-gathers 1 element a
    # rank into 16. Before, those 16 elements were data: an all-gather DDP does not have, no scheme matched
    case = "ddp-16-ranks-loss-gather"
    for r in json.loads((RUNS / case / "expected.json").read_text())["ranks"].values():
        for step in r["steps"].values():
            gathers = [c for c in step["c10d"] if c["op"] == "c10d::_allgather_base_"]
            assert [(c["in_elems"], c["out_elems"], c["calls"]) for c in gathers] == [(1, 16, 1)]
    # 2 × 15/16 of Ψ fp32 elements a step: the gathered losses are scalar traffic
    _checks_as_dp(case)


@pytest.mark.parametrize("case, one_bucket", [("ddp-buckets-from-first-step", {"ProfilerStep#0"}),
                                              ("ddp-static-graph-buckets", {"ProfilerStep#1"})])
@pytest.mark.parametrize("psi_given", [False, True])
def test_ddps_one_bucket_before_it_rebuilds_its_buckets_is_the_same_gradients(case, one_bucket, psi_given):
    # DDP with small buckets, profiled from before it rebuilds them. Counted (count_calls.py): in the first
    # profiled step one fp32 all-reduce of all Ψ; in the others several whose elements add up to the same Ψ,
    # after two int broadcasts of the new buckets. Before, no call signature was in every step, every call
    # was read as one-off and the check refused the trace (no gradient collective)
    run = json.loads((RUNS / case / "run.json").read_text())
    psi = run["model"]["psi"]
    for r in json.loads((RUNS / case / "expected.json").read_text())["ranks"].values():
        for name, step in r["steps"].items():
            floats = [c["in_elems"] for c in step["c10d"] for _ in range(c["calls"]) if c["dtype"] == "float"]
            assert sum(floats) == psi and (len(floats) == 1) == (name in one_bucket)
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta, psi=psi if psi_given else None)
    m = res.measurement
    assert (m.psi, m.psi_trace, m.n, m.steps, m.micro_batches) == (psi, psi, 4, 3, 1)
    assert res.matches[0] == "dp"
    assert any("other buckets" in n for n in m.notes)
    # 2 × 3/4 of Ψ fp32 elements a step on the world of 4 (ring accounting)
    assert m.bytes_per_rank_per_step == pytest.approx(2 * psi * 3 / 4 * 4, rel=1e-9)


@pytest.mark.parametrize("marked", [True, False])
def test_deepspeed_zero3_first_step_is_a_warm_up(marked):
    # DeepSpeed ZeRO-3 profiled from its first optimizer step. Counted (count_calls.py): the steps after the
    # first gather all of Ψ and reduce-scatter Ψ in each of 4 micro-batches; the first also gathers each
    # layer alone in its first micro-batch and broadcasts long ints. Before, the marked trace's first step
    # was partly counted in the step: no scheme matched
    case = "ds-zero3-ga4-from-first-step"
    run = json.loads((RUNS / case / "run.json").read_text())
    for r in json.loads((RUNS / case / "expected.json").read_text())["ranks"].values():
        steps = r["steps"]
        later = [sorted((c["op"], c["in_elems"], c["calls"]) for c in steps[f"ProfilerStep#{k}"]["c10d"])
                 for k in (1, 2)]
        assert later[0] == later[1] == [("c10d::_allgather_base_", PSI // 4, 4),
                                        ("c10d::_reduce_scatter_base_", PSI, 4), ("c10d::allreduce_", 1, 1)]
        first = Counter(c["op"] for c in steps["ProfilerStep#0"]["c10d"])
        assert first["c10d::broadcast_"] > 0 and first["c10d::_allgather_base_"] > 1
    ts = read_traces(RUNS / case)
    res = check(ts.table if marked else ts.table.assign(step=float("nan")), meta=ts.meta)
    m = res.measurement
    assert (m.psi, m.n, m.steps, m.micro_batches) == (PSI, 4, run["steps_profiled"] - 1, run["micro_batches"])
    assert "deepspeed-zero3" in res.matches
    # each micro-batch: 3/4 of Ψ gathered and of Ψ reduce-scattered, fp32 on 4 (ring accounting)
    assert m.bytes_per_rank_per_step == pytest.approx(4 * 2 * PSI * 3 / 4 * 4, rel=1e-9)


def test_a_profiler_schedule_that_repeats_is_one_run_in_several_files_a_rank(tmp_path):
    # DDP profiled by a schedule with repeat=2 through tensorboard_trace_handler: two files a rank. Counted
    # (count_calls.py): steps 2, 3 in one, 6, 7 in the other, each all-reducing Ψ fp32 elements. Before,
    # refused as several runs
    import shutil

    case = "ddp-profiler-windows"
    ranks = json.loads((RUNS / case / "expected.json").read_text())["ranks"]
    assert {tuple(r["steps"]) for r in ranks.values()} == {
        ("ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#6", "ProfilerStep#7")}
    assert any("windows of one profiler" in n for n in _checks_as_dp(case).notes)
    # two runs' files of one rank number their steps alike: still refused as several runs
    for case, name in (("ddp-bf16", "rank0.json.gz"), ("ddp-ga4-sync-every", "rank0.1.pt.trace.json.gz")):
        shutil.copy(RUNS / case / "rank0.json.gz", tmp_path / name)
    ts = read_traces(tmp_path)
    with pytest.raises(TraceMismatchError, match="appears in 2 files"):
        check(ts.table, meta=ts.meta)


@pytest.mark.parametrize("psi_given", [False, True])
def test_a_trace_profiled_without_record_shapes_is_refused_for_its_missing_sizes(psi_given):
    # DDP profiled with record_shapes left False. Counted (count_calls.py): every step's all-reduce, no size
    # on any call. Before, refused as having no gradient collective ("give --psi"), and with --psi measured
    # at 0 bytes
    case = "ddp-no-record-shapes"
    calls = 0
    for r in json.loads((RUNS / case / "expected.json").read_text())["ranks"].values():
        for step in r["steps"].values():
            assert {c["in_elems"] for c in step["c10d"]} == {None}
            calls += sum(c["calls"] for c in step["c10d"])
    ts = read_traces(RUNS / case)
    with pytest.raises(TraceMismatchError, match=f"none of the trace's {calls} collective calls records its "
                                                 "size.*record_shapes=True"):
        check(ts.table, meta=ts.meta, psi=PSI if psi_given else None)


@pytest.mark.parametrize("marked", [True, False])
def test_fsdp2_keeping_each_backwards_gathers_for_the_next_forward_reads_its_micro_batches(marked):
    # FSDP2, 4 micro-batches, set_requires_gradient_sync(False) and set_reshard_after_backward(False) on the
    # first 3. Counted (count_calls.py): each layer gathered K + 1 = 5 times a step (the first forward, then
    # every backward), reduce-scattered once. Before, K = 1 and no scheme matched
    case = "fsdp2-ga4-no-sync-keep-after-backward"
    run = json.loads((RUNS / case / "run.json").read_text())
    k = run["micro_batches"]
    for r in json.loads((RUNS / case / "expected.json").read_text())["ranks"].values():
        for step in r["steps"].values():
            calls = {(c["op"], c["in_elems"]): c["calls"] for c in step["c10d"]}
            assert calls == {**{("c10d::_allgather_base_", e // 4): k + 1 for e in (24_768, 30_880, 15_456)},
                             **{("c10d::_reduce_scatter_base_", e): 1 for e in (24_768, 30_880, 15_456)}}
    ts = read_traces(RUNS / case)
    res = check(ts.table if marked else ts.table.assign(step=float("nan")), meta=ts.meta)
    m = res.measurement
    assert (m.psi, m.n, m.micro_batches, m.grad_sync) == (PSI, 4, k, "boundary")
    assert f"one forward's gathers, then {k} backward blocks" in m.micro_batches_how
    fsdp = next(c for c in res.comparisons if c.scheme == "fsdp-full-shard")
    assert fsdp.matches_if_kept_across_micro_batches
    assert any(f"{k + 1} gathers of the parameters a step in place of {2 * k}" in n for n in res.notes)
    # per step: 3/4 of the (K + 1)Ψ gathered and of the Ψ reduce-scattered, fp32 on 4 (ring accounting)
    assert m.bytes_per_rank_per_step == pytest.approx((k + 2) * PSI * 3 / 4 * 4, rel=1e-9)


def test_deepspeed_zero3_first_step_is_a_warm_up_before_the_step_that_checks_its_order():
    # DeepSpeed ZeRO-3, one micro-batch a step, profiled from its first step. Counted (count_calls.py):
    # ProfilerStep#1 and #2 gather Ψ at once and reduce-scatter Ψ, #1 after long-int broadcasts (DeepSpeed
    # checking its recorded order); #0 gathers each layer alone and never Ψ at once. Before, only the
    # reduce-scatter counted in the step (the whole gathers missing from #0) and no scheme matched
    case = "ds-zero3-from-first-step"
    for r in json.loads((RUNS / case / "expected.json").read_text())["ranks"].values():
        steps = r["steps"]
        whole = {name: sum(c["calls"] for c in s["c10d"] if c["op"] == "c10d::_allgather_base_"
                           and c["out_elems"] == PSI) for name, s in steps.items()}
        assert whole == {"ProfilerStep#0": 0, "ProfilerStep#1": 1, "ProfilerStep#2": 1}
        assert any(c["op"] == "c10d::broadcast_" for c in steps["ProfilerStep#1"]["c10d"])
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert (m.psi, m.n, m.steps, m.micro_batches) == (PSI, 4, 2, 1)
    assert "deepspeed-zero3" in res.matches and "warm-up" in m.steps_how
    # 3/4 of Ψ gathered and of Ψ reduce-scattered, fp32 on 4 (ring accounting)
    assert m.bytes_per_rank_per_step == pytest.approx(2 * PSI * 3 / 4 * 4, rel=1e-9)


def test_a_group_of_one_rank_is_not_guessed_for_calls_that_name_none():
    # HSDP on replicate 4 x shard 1. Counted (count_calls.py): each step all-reduces each unit's gradients
    # whole, Ψ in all, on the replicate dimension (the world); pg_config lists the default group and a
    # shard group of 1. Before, the all-reduces were put on the group of 1: N = 1, nothing to compare
    case = "hsdp-4x1"
    for r in json.loads((RUNS / case / "expected.json").read_text())["ranks"].values():
        assert sorted(g["pg_size"] for g in r["pg_config"]) == [1, 4]
        for step in r["steps"].values():
            assert {c["op"] for c in step["c10d"]} == {"c10d::allreduce_"}
            assert sum(c["calls"] * c["in_elems"] for c in step["c10d"]) == PSI
    _checks_as_dp(case)


@pytest.mark.parametrize("marked", [True, False])
def test_hsdp_micro_batches_reduce_scatter_what_they_gather_without_markers(marked):
    # HSDP 2 x 2, 2 micro-batches each reducing, clipped. Counted (count_calls.py): per micro-batch each unit
    # reduce-scattered on the shard group and its shard all-reduced on the replicate group; the 12 norms
    # all-reduced once a step. Before, unmarked: K = 1 and Ψ 2× (a block reduced more than it gathered)
    case = "hsdp-2x2-6-layers-ga2-clip"
    run = json.loads((RUNS / case / "run.json").read_text())
    psi, k = run["model"]["psi"], run["micro_batches"]
    for r in json.loads((RUNS / case / "expected.json").read_text())["ranks"].values():
        for step in r["steps"].values():
            scattered = sum(c["calls"] * c["in_elems"] for c in step["c10d"]
                            if c["op"] == "c10d::_reduce_scatter_base_")
            assert scattered == k * psi
    ts = read_traces(RUNS / case)
    res = check(ts.table if marked else ts.table.assign(step=float("nan")), meta=ts.meta)
    m = res.measurement
    assert (m.psi, m.micro_batches, m.grad_sync, m.shard_size) == (psi, k, "every", 2)
    assert res.matches[0] == "fsdp-hybrid"


@pytest.mark.parametrize("case", ["ddp-ga4-no-sync-step-per-micro-batch", "ds-zero1-ga4-step-per-micro-batch",
                                  "ddp-ga4-sync-every-step-per-micro-batch"])
def test_a_profiler_stepped_every_micro_batch_gives_optimizer_steps_and_their_micro_batches(case):
    # README: one ProfilerStep a micro-batch, 12 profiled; the optimizer steps (and the gradients are
    # reduced) in 3 of them, the others hold no collective; ddp's first holds DDP's two bucket-order
    # broadcasts alone (7 and 1 int elements). The optimizer steps whole in the trace: ddp's profile begins
    # with an optimizer step's first micro-batch (#4-#7, #8-#11, #12-#15); DeepSpeed's with its second (#1-#3
    # lack the first, #12 is the next one's first): #4-#7 and #8-#11
    run = json.loads((RUNS / case / "run.json").read_text())
    assert (run["steps_profiled"], run["micro_batches"]) == (12, 4)
    counted = json.loads((RUNS / case / "expected.json").read_text())["per_step_all_ranks"]
    holding = {k for k, rows in counted.items() if any(r["in_elems"] == PSI for r in rows)}
    every = "sync-every" in case  # the gradients all-reduced in every micro-batch, or in the 4th alone
    assert len(counted) == 12 and len(holding) == (12 if every else 3)
    whole = 3 if case.startswith("ddp") else 2
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert (m.steps, m.micro_batches, m.grad_sync, m.psi) == (whole, 4, "every" if every else "boundary", PSI)
    assert "Optimizer.step#" in m.steps_how and "so 4 make one optimizer step" in m.steps_how
    with pytest.raises(TraceMismatchError, match=f"micro-batches of {whole} optimizer step"):
        check(ts.table, meta=ts.meta, steps=whole + 10)
    assert ("1 marked step(s) a rank, of an optimizer step held in part" in m.steps_how) == (whole == 2)
    one_off = m.categories.set_index("category").loc["one_off"]
    if every:
        assert one_off["calls_per_rank_per_step"] == 0
    elif case.startswith("ddp"):
        # the bucket-order broadcasts, once
        assert one_off["calls_per_rank_per_step"] == 2 and one_off["per"] == "rank (whole trace)"
    else:
        # ZeRO-1's boundary calls of the optimizer step held in part: all-reduces of Ψ and of 1, a gather
        assert one_off["calls_per_rank_per_step"] == 3


def test_micro_batch_markers_without_the_optimizers_annotations_read_the_same(tmp_path):
    # the DDP run with its Optimizer.step# annotations taken out (an optimizer of one's own, which the
    # profiler does not annotate): its steps are the marked steps up to each that holds calls, the first,
    # of small calls alone, one-off; the micro-batches the backward passes since the step before
    case = "ddp-ga4-no-sync-step-per-micro-batch"
    for path in sorted((RUNS / case).glob("rank*.json.gz")):
        doc = json.loads(gzip.decompress(path.read_bytes()))
        doc["traceEvents"] = [e for e in doc["traceEvents"]
                              if not e.get("name", "").startswith("Optimizer.step#")]
        (tmp_path / path.name).write_bytes(gzip.compress(json.dumps(doc).encode()))
    ts = read_traces(tmp_path)
    assert not any("optimizer_steps" in meta for meta in ts.meta.values())
    m = check(ts.table, meta=ts.meta).measurement
    assert (m.steps, m.micro_batches, m.grad_sync, m.psi) == (3, 4, "boundary", PSI)
    assert "small calls alone" in m.steps_how and "one-off (2 calls a rank)" in m.steps_how
    assert "the profiler marks every micro-batch" in m.micro_batches_how


def test_evaluation_batches_profiled_as_steps_of_their_own_are_set_apart():
    # README: 8 marked steps, training (one all-reduce of Ψ) in #1, #2, #5, #6, evaluation (two 1-element
    # all-reduces, no backward) in #3, #4, #7, #8; the check refused it before ("no gradient collective")
    case = "ddp-eval-own-steps"
    run = json.loads((RUNS / case / "run.json").read_text())
    counted = json.loads((RUNS / case / "expected.json").read_text())["per_step_all_ranks"]
    trained = {k for k, rows in counted.items() if any(r["in_elems"] == PSI for r in rows)}
    evaluated = {f"ProfilerStep#{s}" for s in run["evaluation_steps"]}
    assert trained == set(counted) - evaluated and len(trained) == 4
    assert all([r["in_elems"] for r in counted[k]] == [1] and counted[k][0]["calls"] == 2 for k in evaluated)
    ts = read_traces(RUNS / case)
    for steps in (None, 4):
        res = check(ts.table, meta=ts.meta, steps=steps)
        m = res.measurement
        assert (m.steps, m.psi, m.n, m.micro_batches) == (4, PSI, 4, 1)
        assert res.matches == ("dp",)
        assert m.bytes_per_rank_per_step == pytest.approx(2 * PSI * 3 / 4 * 4, rel=1e-9)
        assert any("4 marked steps a rank run no backward pass" in n and "their 8 calls a rank" in n
                   for n in m.notes)
    # each marked step a step, as --steps 8 says: the evaluation's steps lack the gradients, refused so
    with pytest.raises(TraceMismatchError, match="no gradient collective"):
        check(ts.table, meta=ts.meta, steps=8)


@pytest.mark.parametrize("case", ["ds-zero1-ga4-without-profiler-steps",
                                  "fsdp2-ga4-sync-every-without-profiler-steps"])
def test_a_profile_without_profiler_steps_takes_the_optimizers_steps(case):
    # README: 3 optimizer steps profiled with no ProfilerStep; count_calls.py's spans from one optimizer
    # step's end to the next's: 2, each holding 4 forward passes
    run = json.loads((RUNS / case / "run.json").read_text())
    counted = json.loads((RUNS / case / "expected.json").read_text())
    spans = {k for r in counted["ranks"].values() for k in r["steps"]}
    assert spans == {"OptimizerStep#1", "OptimizerStep#2"} and run["steps_profiled"] == 3
    assert {s["loss_calls"] for r in counted["ranks"].values() for s in r["steps"].values()} == {4}
    ts = read_traces(RUNS / case)
    m = check(ts.table, meta=ts.meta).measurement
    assert (m.steps, m.micro_batches, m.psi, m.n) == (2, run["micro_batches"], PSI, 4)
    assert "from the optimizer's steps (the trace marks no ProfilerStep" in m.steps_how
    # --steps 3, not the optimizer's 2: the steps found as the trace repeats, as without any marker
    m3 = check(ts.table, meta=ts.meta, steps=3).measurement
    assert m3.steps == 3 and "from --steps" in m3.steps_how


def test_scalars_repeated_at_a_step_opening_are_not_micro_batches_where_the_passes_are_counted():
    # by hand, Hugging Face Trainer's step (real-runs/hf-trainer-*, README): code 0 its gather of one
    # element, twice, before the forward; 1 the gradient all-reduce of Ψ; 2 an int all-reduce of 6
    from zerocalc.validate.step_blocks import step_blocks

    codes, grad, data, elems = [0, 0, 1, 2], [False, False, True, False], [False, False, True, False], [
        4.0, 4.0, 71104.0, 6.0]
    # read alone the opening pair repeats twice, and is taken for two micro-batches
    assert step_blocks(codes, grad, data, elems)[:2] == (2, "boundary")
    # where the trace counts the backward passes, they tell the micro-batches: nothing repeats here
    assert step_blocks(codes, grad, data, elems, passes=1)[:2] == (1, None)
    # DeepSpeed ZeRO-2 under Trainer: after the pair, the all-reduce of Ψ in each of 4 micro-batches, then
    # two scalars (3) and the updated partitions' gathers (4, 5)
    codes = [0, 0, 1, 1, 1, 1, 3, 3, 4, 5]
    grad = [False, False, True, True, True, True, False, False, False, False]
    data = [False, False, True, True, True, True, False, False, True, True]
    elems = [4.0, 4.0] + [71104.0] * 4 + [1.0, 1.0, 70656.0, 448.0]
    assert step_blocks(codes, grad, data, elems, passes=4) == (4, "every", 4, True)
    # a block with data is read as before, passes or not
    codes, grad, data = [1, 3, 1, 3, 1, 3, 2], [False] * 6 + [True], [True] * 7
    elems = [60.0, 40.0] * 3 + [100.0]
    assert step_blocks(codes, grad, data, elems, passes=3) == (3, "boundary", 1, True)


def test_a_flag_broadcast_every_batch_is_scalar_traffic_not_buffers():
    # real-runs/lightning-ddp-ga4 (README): Lightning broadcasts one int64 (its SIGTERM flag) from rank 0
    # every batch, and nothing else a model holds: a flag, not buffers. ResNet-50's DDP broadcasts its
    # BatchNorm statistics, fp32 vectors beside int64 counters: buffers (tests/test_validate.py).
    ts = read_traces(RUNS / "lightning-ddp-ga4")
    m = check(ts.table, meta=ts.meta).measurement
    assert m.steps == 1  # the first optimizer step began in the profiler's warm-up
    cats = m.categories.set_index("category")
    assert cats.at["buffers", "calls_per_rank_per_step"] == 0
    # the steady step runs from the end of the first Optimizer.step# annotation to the end of the second:
    # its broadcasts, counted from rank 0's file (plain json), each sending (p-1)/p of its vector
    trace = json.loads(gzip.decompress((RUNS / "lightning-ddp-ga4" / "rank0.json.gz").read_bytes()))
    ev = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    lo, hi = sorted(e["ts"] + e["dur"] for e in ev if e["name"].startswith("Optimizer.step#"))
    calls = [e for e in ev if e["name"] == "c10d::broadcast_" and lo < e["ts"] < hi]
    assert len(calls) == 6
    # README's counts: ProfilerStep#4 ends the first optimizer step with the all-reduce, then a flag
    # (long int, 8 B) and DDP's bucket order after its first iteration (int 7 and int 1, 4 B each);
    # ProfilerStep#5-#7 a flag each: (4 × 8 + 7 × 4 + 4) B, each broadcast sending 3/4 of its vector
    assert cats.at["scalar", "calls_per_rank_per_step"] == 6
    assert cats.at["scalar", "bytes_per_rank_per_step"] == pytest.approx((4 * 8 + 7 * 4 + 4) * 3 / 4)


def test_marked_steps_each_holding_the_optimizer_step_are_optimizer_steps_whatever_some_add():
    # real-runs/hf-trainer-gpt2-ddp-ga2-log-every-2 (README): Hugging Face Trainer logging every 2nd step,
    # a GPT-2 of Ψ = 86,976; every marked step holds an Optimizer.step# annotation and one fp32 all-reduce
    # of Ψ after its 2nd backward, every 2nd also the two logging gathers of one element: 4 optimizer steps
    # of 2 micro-batches each, not 2 of 4 (every 2nd holding more calls, as a micro-batch loop's would)
    case = "hf-trainer-gpt2-ddp-ga2-log-every-2"
    psi = 86_976
    run = json.loads((RUNS / case / "run.json").read_text())
    assert run["model"]["psi"] == psi and run["steps_profiled"] == 4 and run["micro_batches"] == 2
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert (m.steps, m.psi, m.n, m.micro_batches, m.grad_sync) == (4, psi, 4, 2, "boundary")
    assert m.bytes_per_rank_per_step == pytest.approx(2 * psi * 3 / 4 * 4)
    assert res.matches[0] == "dp"


def test_a_scheme_that_gathers_nothing_has_no_gathers_to_keep():
    # by hand: dp all-reduces Ψ = 100 in each of K = 2 micro-batches, no all-gather; measured, one
    # all-reduce of 100 (no_sync() on the first): no kept-gather regime reads it (the option of keeping the
    # forward gather prices 2K gathers where there are none)
    from zerocalc.validate.regimes import kept_gathers

    phases = [("all_reduce", 4, 2, 100.0)]
    for option in (False, True):
        assert kept_gathers({("all_reduce", 4): 100.0}, {("all_reduce", 4): 200.0}, phases, 2, "boundary",
                            option) == 0


def test_barriers_with_worker_annotations_leave_the_other_calls_paired():
    # real-runs/lightning-ddp-ga4-sync-dist (README): every micro-batch a barrier, then the loss all-reduced;
    # torch 2.13's gloo annotates the barrier's work too (gloo:barrier, counted from rank 0's file below).
    # The other calls still take their element type from their gloo annotations: fp32 gradients, and
    # the int64 flag and the int32 bucket order broadcast
    trace = json.loads(gzip.decompress((RUNS / "lightning-ddp-ga4-sync-dist" / "rank0.json.gz").read_bytes()))
    names = Counter(e["name"] for e in trace["traceEvents"] if e.get("ph") == "X")
    assert names["c10d::barrier"] == names["gloo:barrier"] == 8
    ts = read_traces(RUNS / "lightning-ddp-ga4-sync-dist")
    matched = [m["gloo_matched"] for m in ts.meta.values() if isinstance(m, dict) and "gloo_matched" in m]
    assert matched and all(matched)
    m = check(ts.table, meta=ts.meta).measurement
    assert m.grad_dtype == "fp32" and m.psi == PSI


def test_scalars_opening_a_step_once_are_set_aside_where_the_passes_confirm_the_blocks_after_them():
    # real-runs/hf-trainer-gpt2-ds-zero3-ga2-eval-every-2 (README): DeepSpeed ZeRO-3 under Trainer, 2
    # micro-batches a step each gathering the parameters and reduce-scattering Ψ = 86,976; every step opens
    # with the item count's gather (one element), every 2nd also with the logging's two and an evaluation
    # between its first micro-batch's gathers and forward. The evaluation keeps those steps from repeating;
    # the others repeat once the opening gather is set aside, as the 2 backward passes a step confirm
    case = "hf-trainer-gpt2-ds-zero3-ga2-eval-every-2"
    run = json.loads((RUNS / case / "run.json").read_text())
    assert run["model"]["psi"] == 86_976 and run["micro_batches"] == 2
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert (m.steps, m.psi, m.n, m.micro_batches, m.grad_sync) == (4, 86_976, 4, 2, "every")
    assert "deepspeed-zero3" in res.matches


def test_a_scalar_opening_each_micro_batch_is_not_set_aside():
    # by hand: a loop whose 2 micro-batches each open with a scalar (code 0), gather (1) and reduce (2):
    # the block [0, 1, 2] repeats twice as it stands, which the passes confirm; set aside, the opening
    # scalar would leave [1, 2, 0, 1, 2], no longer two blocks alike
    from zerocalc.validate.step_blocks import step_blocks

    codes, grad = [0, 1, 2, 0, 1, 2], [False, False, True, False, False, True]
    data, elems = [False, True, True, False, True, True], [1.0, 400.0, 100.0, 1.0, 400.0, 100.0]
    assert step_blocks(codes, grad, data, elems, passes=2)[:2] == (2, "every")


def _step_calls(case: str) -> list[tuple]:
    """One optimizer step's calls of every rank, from the run's expected.json (counted from the traces by
    count_calls.py): (op, dtype, elements in, out, calls), the 1-element scalars left out."""
    rows = json.loads((RUNS / case / "expected.json").read_text())["per_step_all_ranks"]["ProfilerStep#1"]
    return sorted((r["op"], r["dtype"], r["in_elems"], r["out_elems"], r["calls"]) for r in rows
                  if r["in_elems"] > 1)


@pytest.mark.parametrize(("offloaded", "twin", "ring_psi"), [
    # 4 all-reduces of Ψ (2 · 3/4 each) and an all-gather of Ψ (3/4) on 4 ranks
    ("ds-zero2-offload-ga4", "ds-zero2-ga4", 4 * 2 * 3 / 4 + 3 / 4),
    # 4 all-gathers and 4 reduce-scatters of Ψ (3/4 each)
    ("ds-zero3-offload-ga4", "ds-zero3-ga4", 8 * 3 / 4),
])
def test_zero_offload_sends_what_the_stage_sends_and_checks_so(offloaded, twin, ring_psi):
    # README: the offloaded runs count their twins' collectives call for call (what goes to host memory and
    # back is no collective), so they check as the twins do, at the same bytes
    assert _step_calls(offloaded) == _step_calls(twin)
    got = [check(ts.table, meta=ts.meta) for ts in map(read_traces, (RUNS / offloaded, RUNS / twin))]
    assert got[0].measurement.bytes_per_rank_per_step == pytest.approx(ring_psi * PSI * 4)
    assert got[0].matches == got[1].matches and got[0].matches
    assert got[0].measurement.micro_batches == got[1].measurement.micro_batches == 4


#: c10d's element types in count_calls.py's words → bytes and zerocalc's name
_WIDTHS = {"float": (4, "fp32"), "c10::BFloat16": (2, "bf16"), "double": (8, "fp64")}


@pytest.mark.parametrize(("case", "scheme"), [("ds-zero2-ga4-comm-bf16", "deepspeed-zero2"),
                                              ("ds-zero3-ga4-comm-bf16", "deepspeed-zero3")])
def test_deepspeed_communication_data_type_prices_each_side_at_its_type(case, scheme):
    """DeepSpeed's communication_data_type bf16 on an fp32 model: the gradients reduced in bf16, the
    parameters gathered in fp32 (README). check reads the two sides' types apart and its bytes a step are the
    counted calls' under the ring accounting, each at its own width."""
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert (m.param_dtype, m.grad_dtype) == ("fp32", "bf16") and res.matches[0] == scheme
    rows = json.loads((RUNS / case / "expected.json").read_text())["per_step_all_ranks"]["ProfilerStep#1"]
    p, sent, pattern = 4, 0.0, Counter()
    for r in rows:
        width, name = _WIDTHS[r["dtype"]]
        if r["in_elems"] == 1:
            continue  # the step's scalars (a loss or overflow flag), not the step's traffic
        op, elems = {"c10d::allreduce_": ("all_reduce", r["in_elems"]),
                     "c10d::_allgather_base_": ("all_gather", r["out_elems"]),
                     "c10d::_reduce_scatter_base_": ("reduce_scatter", r["in_elems"])}[r["op"]]
        sent += r["calls"] * elems * width * (2 if op == "all_reduce" else 1) * (p - 1) / p
        pattern[(op, p, name)] += r["calls"] * elems / PSI
    assert m.bytes_per_rank_per_step == pytest.approx(sent, rel=1e-9)
    got = next(s for s in res.as_dict()["schemes"] if s["scheme"] == scheme)["measured_pattern"]
    assert {(e["op"], e["group"], e["dtype"]): e["elements_over_psi"] for e in got} == pytest.approx(pattern)
