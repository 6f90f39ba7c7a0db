"""DeepSpeed ZeRO-3 on a model past stage3_max_reuse_distance: the backward gathers part of the parameters
again, and the check reads that share from the trace.

Expected values are the real runs' counts (tests/data/traces/real-runs/README.md, expected.json, counted by
count_calls.py from the traces with plain json/gzip: a step's ``backward_gathers`` are its all-gathers nested
in a node of the backward) and the DeepSpeed comms log's lines (deepspeed-comms-gloo/README row), priced
under the ring accounting: a rank sends (p-1)/p of an all-gather's or reduce-scatter's vector (Thakur,
Rabenseifner & Gropp 2005).
"""

import re
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from real_runs import gathered_and_scattered
from typer.testing import CliRunner

from zerocalc.cli import app
from zerocalc.traces import read_traces
from zerocalc.validate import check
from zerocalc.validate.frozen import pass_gathers, pass_recomputed
from zerocalc.validate.regather import recomputed_share, regathered_share

DATA = Path(__file__).parent / "data" / "traces"
RUNS = DATA / "real-runs"
MLP_PSI = 24_768 + 30_880 + 15_456  # the MLP's three layers (README: Ψ = 71,104)
GPT2_PSI = 219_712  # HF_GPT2_3 (run.json's model.psi)

#: run → (Ψ, micro-batches a step)
PAST = {"ds-zero3-past-reuse-distance-ga2": (MLP_PSI, 2), "ds-zero3-gpt2-past-reuse-distance": (GPT2_PSI, 1)}


def _backward_counted(case: str) -> list[tuple[Counter, int]]:
    """Per rank and step as count_calls.py counted them: the elements all-gathered and reduce-scattered, and
    the elements gathered in the backward (a call's shard times the 4 ranks)."""
    out = []
    for s, per in gathered_and_scattered(case):
        back = sum(int(g.split(" ")[1]) * 4 for g in s.get("backward_gathers", []))
        out.append((per, back))
    return out


@pytest.mark.parametrize("case", sorted(PAST))
@pytest.mark.parametrize("given", [False, True])
def test_a_model_past_the_reuse_distance_checks_as_zero3_with_the_share_it_gathers_again(case, given):
    psi, k = PAST[case]
    counted = _backward_counted(case)
    backward = {b for _, b in counted}
    assert len(backward) == 1  # every rank, every step alike
    back = backward.pop()
    for per, b in counted:  # the forward gathers Ψ a micro-batch, the backward part of it again
        assert per["all_gather"] - b == k * psi and 0 < b < k * psi
        assert per["reduce_scatter"] == k * psi
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta, psi=psi if given else None)
    m = res.measurement
    assert (m.psi, m.n, m.micro_batches) == (psi, 4, k)
    assert m.gathered_in_backward == pytest.approx(back, rel=1e-12)
    # before: no scheme (DeepSpeed's formula, Max(0, Ψ - D/2), gives none at the default 1e9 and 2Ψ at 0)
    assert res.matches == ("deepspeed-zero3",)
    c = next(c for c in res.comparisons if c.scheme == "deepspeed-zero3")
    share = back / (k * psi)
    assert c.regathered_share == pytest.approx(share, rel=1e-12)
    assert c.ratio == pytest.approx(1.0, rel=1e-9)
    sent = (k * psi + back + k * psi) * 3 / 4 * 4  # gathered and reduce-scattered, 3/4 of it sent, fp32
    assert c.predicted_bytes_per_rank_per_step == pytest.approx(sent, rel=1e-9)
    assert f"{share:.3g}Ψ gathered again in backward" in c.reuse_regime
    note = next(n for n in res.notes if "gathered again in the backward each micro-batch" in n)
    assert f"({back / k:,.0f} elements)" in note and "as its nodes show" in note
    d = res.as_dict()
    rec = next(s for s in d["schemes"] if s["scheme"] == "deepspeed-zero3")
    assert rec["share_gathered_again_in_backward"] == pytest.approx(share, rel=1e-12)
    # the formula's distance for that share is not the run's (26,000 or 10,000 elements): none is said
    assert d["matches_reuse_regime"]["deepspeed-zero3"] == {"reuse_distance": None, "regime": c.reuse_regime}


def test_deepspeeds_comms_log_of_such_a_run_reads_the_same_share():
    # the log's steady micro-batches (after the first step's): gathers of 24.0 KB, 192 B, 30.16 KB, 15.09 KB
    # (the forward: Ψ/4 a rank), 30.16 and 24.19 KB (the backward again), a 277.75 KB reduce-scatter (Ψ)
    log = DATA / "deepspeed-comms-gloo" / "zero3-ga2-past-reuse-distance-verbose.log"
    sizes = re.findall(r"comm op: (\w+) \| .*? msg size: ([\d.]+) (K?B)", log.read_text())
    kb = [(op, float(v) * (1024 if u == "KB" else 1)) for op, v, u in sizes]
    rs = [i for i, (op, _) in enumerate(kb) if op == "reduce_scatter_tensor"]
    micro = kb[rs[-2] + 1:rs[-1] + 1]  # the last micro-batch: from after the one before's reduce-scatter
    gathers = [b for op, b in micro if op == "all_gather_into_tensor"]
    assert [round(b) for b in gathers] == [24_576, 192, 30_884, 15_452, 30_884, 24_771]
    back_bytes = sum(gathers[4:])  # the two gathered again, a rank's shards of 4 bytes an element
    ts = read_traces(log)
    res = check(ts.table, meta=ts.meta, dtype="fp32")
    assert res.measurement.gathered_in_backward is None  # the log does not say which ran in the backward
    assert res.matches == ("deepspeed-zero3",)
    c = next(c for c in res.comparisons if c.scheme == "deepspeed-zero3")
    # the logger rounds its sizes to 2 decimals of KB: the share within that
    assert c.regathered_share == pytest.approx(back_bytes / 4 * 4 / MLP_PSI, rel=1e-3)
    note = next(n for n in res.notes if "gathered again in the backward" in n)
    assert "as DeepSpeed's are;" in note and "marks no backward pass" in note


def test_fsdp_that_keeps_its_root_for_the_backward_is_not_read_as_zero3():
    # FSDP1 keeps its root unit gathered from the forward to the backward: the forward gathers Ψ, the backward
    # the rest again, as in a ZeRO-3 past its reuse distance, but FSDP gathers the units it reduces
    ts = read_traces(RUNS / "fsdp1-root-holds-last")
    res = check(ts.table, meta=ts.meta)
    assert "deepspeed-zero3" not in res.matches and not any(c.regathered_share for c in res.comparisons)
    assert "fsdp-full-shard" in res.partly_kept


def test_without_the_backwards_nodes_the_gathers_past_psi_read_as_the_backwards():
    # the same run with the nodes of the backward not recorded (as a Flight Recorder dump or an NCCL log of
    # those calls would show them): every rank gathers alike, 1.78Ψ a micro-batch (README: 55,648 elements
    # again in the backward), read as the run with its nodes reads, the note saying what else sends it
    ts = read_traces(RUNS / "ds-zero3-past-reuse-distance-ga2")
    meta = {f: {k: v for k, v in m.items() if k != "backward_passes"} for f, m in ts.meta.items()}
    res = check(ts.table.drop(columns=["backward_op"]), meta=meta, micro_batches=2)
    assert res.measurement.gathered_in_backward is None
    assert res.matches == ("deepspeed-zero3",)
    c = next(c for c in res.comparisons if c.scheme == "deepspeed-zero3")
    assert c.regathered_share == pytest.approx(55_648 / MLP_PSI, rel=1e-9)
    note = next(n for n in res.notes if "gathered again in the backward" in n)
    assert "marks no backward pass" in note and "tied weight" in note


PKEYS = {("all_gather", 4): 100.0, ("reduce_scatter", 4): 100.0}  # every parameter kept: Ψ = 100 gathered


@pytest.mark.parametrize(("gathered", "backward", "units", "alike", "share"), [
    (160.0, 60.0, False, False, 0.6),  # the forward gathers Ψ, the backward 0.6Ψ again
    (160.0, 50.0, False, False, 0.0),  # the forward gathers 1.1Ψ: not each parameter once
    (160.0, 60.0, True, False, 0.0),  # gathers of the reduced vectors: FSDP's
    (160.0, None, False, False, 0.0),  # no split shown, and the ranks gather unlike (an excerpt, activations)
    (160.0, None, False, True, 0.6),  # no split shown, every rank gathering alike: past Ψ, the backward's
    (160.0, None, True, True, 0.0),  # no split shown, gathers of the reduced vectors
    (200.0, 100.0, False, False, 0.0),  # every parameter gathered again: reuse distance 0's regime
    (101.0, 1.0, False, False, 0.0),  # within the tolerance of Ψ: the regime that keeps them
])
def test_the_share_read_from_the_gathers(gathered, backward, units, alike, share):
    mkeys = {("all_gather", 4): gathered, ("reduce_scatter", 4): 100.0}
    got = regathered_share(mkeys, PKEYS, 1, 100.0, backward, lambda: units, lambda: alike)
    assert got == pytest.approx(share)


def test_the_share_needs_the_other_calls_alike():
    mkeys = {("all_gather", 4): 160.0, ("reduce_scatter", 4): 90.0}
    assert regathered_share(mkeys, PKEYS, 1, 100.0, 60.0, lambda: False, lambda: True) == 0.0
    mkeys = {("all_gather", 4): 160.0, ("all_reduce", 4): 100.0}
    assert regathered_share(mkeys, PKEYS, 1, 100.0, 60.0, lambda: False, lambda: True) == 0.0


#: run → Ψ, what its gradient reductions reduce
BEYOND = {"ds-zero3-lora-r4-past-reuse-distance": 3_712,  # LoRA's adapters (README: 3,712 of 74,816)
          "ds-zero3-gpt2-tied-past-reuse-distance": 186_944}  # GPT-2, the output layer the embedding's


def _read_by_pass(case: str, psi: int):
    """A run of one micro-batch a step whose gradient reductions reduce ``psi``, as counted (every rank, every
    step alike: the step's all-gathered and reduce-scattered elements, those gathered in the backward, and
    so those in the forward, more than Ψ) and as checked."""
    counted = _backward_counted(case)
    per, back = counted[0]
    assert all((p, b) == (per, back) for p, b in counted)  # every rank, every step alike
    forward = per["all_gather"] - back
    assert per["reduce_scatter"] == psi and forward > psi and back > 0
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert (m.psi, m.micro_batches, m.gathered_in_backward) == (psi, 1, back)
    return res, per, back, forward


@pytest.mark.parametrize("case", sorted(BEYOND))
def test_parameters_gathered_and_never_reduced_past_the_reuse_distance_are_named(case):
    psi = BEYOND[case]
    res, per, back, forward = _read_by_pass(case, psi)
    assert back <= forward
    # before: no scheme; now deepspeed-zero3, what it gathers past one gather of Ψ named, by pass
    assert not res.matches and res.frozen == ("deepspeed-zero3",)
    assert res.frozen_elements == per["all_gather"] - psi
    c = next(c for c in res.comparisons if c.scheme == "deepspeed-zero3")
    assert c.frozen_how == "pass" and c.reuse_distance is None
    note = next(n for n in res.notes if "never reduced, on a model past" in n)
    assert f"{per['all_gather'] - psi:,} elements a step" in note
    assert f"{forward - psi:,} of them in the forward" in note and f"{back:,} in the backward again" in note
    assert "tied input and output embeddings" in note


def test_lora_within_the_reuse_distance_reads_as_before():
    # ds-zero3-lora-r4-ga4: every parameter kept for the backward (nothing gathered in it), read by unit
    ts = read_traces(RUNS / "ds-zero3-lora-r4-ga4")
    res = check(ts.table, meta=ts.meta)
    assert res.measurement.gathered_in_backward == 0
    assert "deepspeed-zero3" in res.frozen
    assert next(c for c in res.comparisons if c.scheme == "deepspeed-zero3").frozen_how == "unit"


def test_the_pass_reading_needs_the_backward_shown_and_no_more_than_twice_the_forward_again():
    ts = read_traces(RUNS / "ds-zero3-lora-r4-past-reuse-distance")
    m = check(ts.table, meta=ts.meta).measurement
    gathered, back = 108_384, 33_568  # counted (README): 74,816 in the forward, 33,568 in the backward
    mkeys = {("all_gather", 4): gathered, ("reduce_scatter", 4): 3_712}
    kept = {("all_gather", 4): 3_712, ("reduce_scatter", 4): 3_712}  # every parameter gathered once
    assert pass_gathers(m, mkeys, kept) == (gathered - 3_712, back)
    assert pass_gathers(replace(m, gathered_in_backward=None), mkeys, kept) == (0.0, 0.0)
    assert pass_gathers(replace(m, gathered_in_backward=0.0), mkeys, kept) == (0.0, 0.0)  # read by unit
    # a backward of 60,000 past its forward of 48,384, under twice it: activation checkpointing's recompute
    more = replace(m, gathered_in_backward=60_000.0)
    assert pass_gathers(more, mkeys, kept) == (gathered - 3_712, 60_000.0)
    assert pass_gathers(replace(m, gathered_in_backward=80_000.0), mkeys, kept) == (0.0, 0.0)  # > 2 × 28,384
    assert pass_gathers(m, {**mkeys, ("reduce_scatter", 4): 3_000}, kept) == (0.0, 0.0)


@pytest.mark.parametrize("case", ["ds-zero3-gpt2-past-reuse-distance-reentrant-checkpoint",
                                  "ds-zero3-gpt2-past-reuse-distance-non-reentrant-checkpoint"])
def test_activation_checkpointing_past_the_reuse_distance_gathers_more_than_psi_in_the_backward(case):
    counted = _backward_counted(case)
    per, back = counted[0]
    assert all((p, b) == (per, back) for p, b in counted)
    # counted: the forward gathers Ψ, the backward more (blocks again for the recompute and their backward)
    assert per["all_gather"] - back == GPT2_PSI and GPT2_PSI < back < 2 * GPT2_PSI
    assert per["reduce_scatter"] == GPT2_PSI
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert (m.psi, m.micro_batches, m.gathered_in_backward) == (GPT2_PSI, 1, back)
    # before: no scheme; no recompute's gather is reported apart (none of them pairs with the backward's)
    assert not res.matches and res.recomputed == ("deepspeed-zero3",) and not res.frozen
    assert m.recompute_elements == 0
    c = next(c for c in res.comparisons if c.scheme == "deepspeed-zero3")
    assert c.recomputed_share == pytest.approx(back / GPT2_PSI, rel=1e-12)
    note = next(n for n in res.notes if "recompute of activation checkpointing" in n)
    assert f"({back:,} elements)" in note
    d = res.as_dict()
    assert d["matches_if_recomputed_in_backward"] == ["deepspeed-zero3"]
    rec = next(s for s in d["schemes"] if s["scheme"] == "deepspeed-zero3")
    assert rec["share_gathered_in_backward_with_recompute"] == pytest.approx(back / GPT2_PSI, rel=1e-12)


#: run → Ψ (the gradients reduced: the whole model with tied embeddings, the adapters under LoRA); each run's
#: blocks under non-reentrant activation checkpointing, peft's LoRA of rank 4 on every Conv1D (README)
CHECKPOINTED = {"ds-zero3-gpt2-tied-past-reuse-distance-non-reentrant-checkpoint": 186_944,
                "ds-zero3-gpt2-lora-r4-past-reuse-distance-non-reentrant-checkpoint": 12_288,
                "ds-zero3-gpt2-lora-r4-non-reentrant-checkpoint": 12_288}


@pytest.mark.parametrize("case", sorted(CHECKPOINTED))
def test_frozen_or_tied_parameters_under_activation_checkpointing_read_by_pass(case):
    psi = CHECKPOINTED[case]
    res, per, back, forward = _read_by_pass(case, psi)
    m = res.measurement
    assert back <= 2 * forward  # counted: the backward up to twice the forward
    recompute = back > forward  # more than the forward: the past-distance runs, not the one within it
    assert recompute == ("past-reuse-distance" in case)
    # before: no scheme; now deepspeed-zero3 by pass, with the recompute named where the backward says so
    assert not res.matches and res.frozen == ("deepspeed-zero3",)
    assert res.frozen_elements == per["all_gather"] - psi
    assert pass_recomputed(m, res.frozen_elements) == recompute
    assert res.recomputed == (("deepspeed-zero3",) if recompute else ())
    note = next(n for n in res.notes if "never reduced, on a model past" in n)
    assert f"{forward - psi:,} of them in the forward" in note and f"{back:,} in the backward again" in note
    assert ("more than the forward: parameters gathered for activation checkpointing's recompute" in note) \
        == recompute
    d = res.as_dict()
    assert d["matches_with_frozen_parameters"] == ["deepspeed-zero3"]
    assert d["matches_if_recomputed_in_backward"] == (["deepspeed-zero3"] if recompute else [])
    text = CliRunner().invoke(app, ["check", str(RUNS / case)]).stdout
    verdict = next(line for line in text.splitlines() if line.startswith("consistent with the trace"))
    assert verdict.count("deepspeed-zero3") == 1  # one reading, the recompute inside it
    assert ("and gathered again for activation checkpointing's recompute (see the note above)" in verdict) \
        == recompute


@pytest.mark.parametrize(("gathered", "backward", "units", "share"), [
    (230.0, 130.0, False, 1.3),  # the forward Ψ, the backward 1.3Ψ
    (230.0, 130.0, True, 0.0),  # gathers of the reduced vectors: FSDP's
    (230.0, None, False, 0.0),  # where they ran not shown
    (230.0, 120.0, False, 0.0),  # the forward 1.1Ψ
    (160.0, 60.0, False, 0.0),  # the backward under Ψ: regathered_share's
    (310.0, 210.0, False, 0.0),  # the backward over 2Ψ
])
def test_the_recompute_share_read_from_the_gathers(gathered, backward, units, share):
    mkeys = {("all_gather", 4): gathered, ("reduce_scatter", 4): 100.0}
    assert recomputed_share(mkeys, PKEYS, 1, 100.0, backward, lambda: units) == pytest.approx(share)


@pytest.mark.parametrize(("case", "reading"), [("ds-zero3-gpt2-past-reuse-distance", "matches"),
                                               ("ds-zero3-lora-r4-past-reuse-distance", "frozen"),
                                               ("ds-zero3-gpt2-past-reuse-distance-non-reentrant-checkpoint",
                                                "recomputed")])
def test_a_reuse_distance_given_reads_the_same(case, reading):
    # a distance under every run's 2Ψ (the runs': 26,000 or 10,000 elements, README): the formula prices
    # none of these runs at it, and the readings from the trace stand
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta, reuse_distance=5_000)
    assert getattr(res, reading) == ("deepspeed-zero3",)


def test_an_nccl_log_whose_gathers_exceed_psi_is_not_read_as_zero3_past_its_distance():
    # nccl-debug/tp-allgather-reducescatter-2ranks.txt: 1.5Ψ gathered for a reduce-scatter of Ψ on 2 ranks
    # (tensor-parallel calls, the ranks' calls unequal: rank 0 gathers once, rank 1 twice); an NCCL log shows
    # no backward, and gathers unlike by rank are no data-parallel partitions, so the totals are not read so
    ts = read_traces(DATA / "nccl-debug" / "tp-allgather-reducescatter-2ranks.txt")
    res = check(ts.table, meta=ts.meta)
    assert res.measurement.gathered_in_backward is None
    assert not res.matches and not any(c.regathered_share or c.recomputed_share for c in res.comparisons)


#: run → (Ψ, micro-batches a step, the share of Ψ gathered again in the backward, as the same run without hpZ
#: gathers it again: ds-zero3-gpt2-past-reuse-distance, ds-zero3-past-reuse-distance-ga2)
HPZ = {"ds-zero3-gpt2-hpz2-past-reuse-distance": (GPT2_PSI, 1, 186_944),
       "ds-zero3-hpz2-past-reuse-distance-ga2": (MLP_PSI, 2, 55_648)}


def _by_group(step: dict) -> tuple[Counter, int]:
    """A step as count_calls.py counted it: the elements all-gathered per group size (a call's whole
    vector), and the elements gathered in the backward, each of those calls one of a group of 2 (its shard
    a size only the groups of 2 gather, checked)."""
    per: Counter = Counter()
    for row in step["c10d"]:
        if "allgather" in row["op"]:
            per[row["group_size_from_shapes"]] += row["out_elems"] * row["calls"]
    sizes = {p: {row["in_elems"] for row in step["c10d"]
                 if "allgather" in row["op"] and row["group_size_from_shapes"] == p} for p in (2, 4)}
    back = [int(g.split(" ")[1]) for g in step.get("backward_gathers", [])]
    assert all(b in sizes[2] and b not in sizes[4] for b in back)
    return per, 2 * sum(back)


@pytest.mark.parametrize("case", sorted(HPZ))
def test_zero3_with_hpz_past_the_reuse_distance_gathers_again_from_the_secondary_copy(case):
    psi, k, again = HPZ[case]
    counted = [_by_group(s) for s, _per in gathered_and_scattered(case)]
    per, back = counted[0]
    assert all(c == counted[0] for c in counted)  # every rank, every step alike
    # counted: Ψ gathered on the world of 4 (the first forward), the rest on groups of 2 (the secondary
    # copy): the backward's k times the share gathered again, the later micro-batches' forwards Ψ each
    assert per[4] == psi and back == k * again and per[2] == back + (k - 1) * psi
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert (m.psi, m.micro_batches, m.n) == (psi, k, 4)
    assert m.gathered_in_backward == 0 and m.apart_gathered_in_backward == back
    # before: the gathers on groups of 2 set apart and the rest read as deepspeed-zero3 keeping every
    # parameter for the backward (or none); now ZeRO++'s secondary partition past the reuse distance
    assert res.secondary_partition == ("deepspeed-zero3",) and "deepspeed-zero3" not in res.matches
    assert not any("deepspeed-zero3" in g for g in res.indistinguishable)
    c = next(c for c in res.comparisons if c.scheme == "deepspeed-zero3")
    assert c.regathered_share == pytest.approx(again / psi, rel=1e-12)
    note = next(n for n in res.notes if "zero_hpz_partition_size = 2" in n)
    assert f"({per[2] / psi:.3g}Ψ a step)" in note and f"{again / psi:.3g}Ψ a micro-batch" in note
    assert any(f"({again:,} elements)" in n and "gathered again in the backward" in n for n in res.notes)
    d = res.as_dict()
    assert d["matches_with_secondary_partition"] == ["deepspeed-zero3"]
    rec = next(s for s in d["schemes"] if s["scheme"] == "deepspeed-zero3")
    assert rec["share_gathered_again_in_backward"] == pytest.approx(again / psi, rel=1e-12)


def test_zero3_with_hpz_past_the_reuse_distance_under_checkpointing_gathers_more_than_psi_in_the_backward():
    case = "ds-zero3-gpt2-hpz2-past-reuse-distance-non-reentrant-checkpoint"
    counted = [_by_group(s) for s, _per in gathered_and_scattered(case)]
    per, back = counted[0]
    assert all(c == counted[0] for c in counted)
    # counted: Ψ on the world of 4 in the forward; the backward's, more than Ψ, all on the groups of 2
    assert per[4] == GPT2_PSI and per[2] == back and GPT2_PSI < back < 2 * GPT2_PSI
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert (m.psi, m.micro_batches, m.gathered_in_backward) == (GPT2_PSI, 1, 0)
    assert m.apart_gathered_in_backward == back
    assert res.secondary_partition == ("deepspeed-zero3",) and res.recomputed == ("deepspeed-zero3",)
    assert "deepspeed-zero3" not in res.matches
    c = next(c for c in res.comparisons if c.scheme == "deepspeed-zero3")
    assert c.recomputed_share == pytest.approx(back / GPT2_PSI, rel=1e-12) and not c.regathered_share
    assert any("zero_hpz_partition_size = 2" in n and "activation checkpointing's recompute" in n
               for n in res.notes)
    assert any(f"({back:,} elements)" in n for n in res.notes)
    text = CliRunner().invoke(app, ["check", str(RUNS / case)]).stdout
    verdict = next(line for line in text.splitlines() if line.startswith("consistent with the trace"))
    assert verdict.count("deepspeed-zero3") == 1
    assert "smaller groups, and gathered again for activation checkpointing's recompute" in verdict


def test_zero3_with_hpz_and_tied_embeddings_past_the_reuse_distance_reads_by_pass():
    case, psi, k = "ds-zero3-gpt2-tied-hpz2-past-reuse-distance-ga2", 186_944, 2
    counted = [_by_group(s) for s, _per in gathered_and_scattered(case)]
    per, back = counted[0]
    assert all(c == counted[0] for c in counted)
    total = per[4] + per[2]
    forward = total - back
    # counted: the forwards gather more than kΨ (the tied weight at each use), the backward part of it again
    assert forward > k * psi and 0 < back <= forward
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert (m.psi, m.micro_batches, m.n) == (psi, k, 4)
    # 2 blocks that end in a reduce-scatter of Ψ each, the second gathering less on the 4 ranks (the rest
    # from the secondary copy, reported apart); before: "no collective repeats inside a step: the
    # micro-batches before the boundary send nothing", beside "gradients reduced in every micro-batch"
    assert "the first gathers more than the one after it" in m.micro_batches_how
    assert "send nothing" not in m.micro_batches_how
    assert m.gathered_in_backward + m.apart_gathered_in_backward == back
    # before: "zero2; also deepspeed-zero3 with gathered parameters kept across the micro-batches"
    assert res.secondary_partition == ("deepspeed-zero3",) and res.frozen == ("deepspeed-zero3",)
    assert not res.kept and "deepspeed-zero3" not in res.matches
    assert res.frozen_elements == total - k * psi
    assert any("zero_hpz_partition_size = 2" in n and "never reduced, or tied, among them" in n
               for n in res.notes)
    note = next(n for n in res.notes if "never reduced, on a model past" in n)
    assert note.startswith("deepspeed-zero3 sends")  # named without the regime the calls left price
    assert f"{forward - k * psi:,} of them in the forward" in note
    assert f"{back:,} in the backward again" in note
    text = CliRunner().invoke(app, ["check", str(RUNS / case)]).stdout
    verdict = next(line for line in text.splitlines() if line.startswith("consistent with the trace"))
    assert verdict.count("deepspeed-zero3") == 1
    assert "smaller groups and some of them never reduced, or tied and gathered at each use" in verdict


def test_zero3_with_hpz_within_the_reuse_distance_reads_as_before():
    # ds-zero3-hpz2-ga4: nothing gathered in the backward; the secondary copy's gathers are the later
    # micro-batches' forwards, read as they were (tests/test_validate_real_runs.py)
    ts = read_traces(RUNS / "ds-zero3-hpz2-ga4")
    res = check(ts.table, meta=ts.meta)
    assert res.measurement.apart_gathered_in_backward == 0  # none of them ran in the backward
    c = next(c for c in res.comparisons if c.scheme == "deepspeed-zero3")
    assert res.secondary_partition == ("deepspeed-zero3",) and not c.regathered_share
    assert not any("past stage3_max_reuse_distance" in n for n in res.notes)
