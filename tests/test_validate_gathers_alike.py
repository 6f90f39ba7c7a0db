"""Gathers alike back to back that are no micro-batches: units of one size (a model's equal blocks) or one
unit gathered for its forward and again for its backward, where the trace's backward passes say how many
micro-batches a step runs.

Expected values are the real runs' counts (tests/data/traces/real-runs/README.md, expected.json, counted by
count_calls.py with plain json/gzip: the c10d calls of each rank and step, and its forward passes, one
loss each), priced under the ring accounting: a rank sends (p-1)/p of an all-gather's or a
reduce-scatter's vector (Thakur, Rabenseifner & Gropp 2005).
"""

from collections import Counter
from pathlib import Path

import pytest
from real_runs import gathered_and_scattered

from zerocalc.traces import read_traces
from zerocalc.validate import check
from zerocalc.validate.micro_batches import _k_and_how
from zerocalc.validate.step_blocks import (
    WIDER_FIRST,
    _alike_then_reductions,
    _blocks,
    _two_with_more_reductions,
    _wider_first_block,
)

RUNS = Path(__file__).parent / "data" / "traces" / "real-runs"
EQUAL = 3 * (128 * 128 + 128) + 128 * 96 + 96  # EQUAL_LAYERS: 61,920
PSI = 24_768 + 30_880 + 15_456  # LAYERS: 71,104


def _counted(case: str) -> list[tuple[int, Counter]]:
    """Per rank and step: its forward passes and the elements it all-gathers and reduce-scatters."""
    return [(s["loss_calls"], per) for s, per in gathered_and_scattered(case)]


@pytest.mark.parametrize(("case", "psi", "scheme"), [
    # three units of one size open the step: before, K = 3 and no scheme
    ("fsdp2-equal-layers", EQUAL, "fsdp-full-shard"),
    # one unit, gathered for the forward and again for the backward: before, K = 2 and fsdp-shard-grad-op
    ("fsdp2-one-unit", PSI, "fsdp-full-shard"),
    # DeepSpeed ZeRO-3 releasing every parameter after its module: before, K = 3 and no scheme
    ("ds-zero3-reuse0-equal-layers", EQUAL, "deepspeed-zero3"),
])
def test_gathers_alike_opening_a_step_of_one_backward_are_one_micro_batch(case, psi, scheme):
    for passes, per in _counted(case):  # counted: one forward pass; 2Ψ gathered, Ψ reduce-scattered
        assert passes == 1 and per == {"all_gather": 2 * psi, "reduce_scatter": psi}
    ts = read_traces(RUNS / case)
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    assert (m.psi, m.n, m.micro_batches) == (psi, 4, 1)
    assert "backward passes" in m.micro_batches_how and "reduces no gradient" in m.micro_batches_how
    assert m.bytes_per_rank_per_step == pytest.approx(3 * psi * 3 / 4 * 4, rel=1e-9)
    assert scheme in res.matches and "zero3" in res.matches


def test_gathers_alike_opening_a_step_of_two_micro_batches_are_two():
    # counted: 2 forward passes a step; each gathers the 4 units for its forward and its backward (4Ψ in
    # all), the gradients reduce-scattered once, in the last (set_requires_gradient_sync(False) before)
    for passes, per in _counted("fsdp2-equal-layers-ga2-no-sync"):
        assert passes == 2 and per == {"all_gather": 4 * EQUAL, "reduce_scatter": EQUAL}
    ts = read_traces(RUNS / "fsdp2-equal-layers-ga2-no-sync")
    res = check(ts.table, meta=ts.meta)
    m = res.measurement
    # before: K = 3, and the backward's gathers read as kept across the micro-batches
    assert (m.micro_batches, m.grad_sync) == (2, "boundary")
    assert m.bytes_per_rank_per_step == pytest.approx(5 * EQUAL * 3 / 4 * 4, rel=1e-9)
    assert res.matches == ("fsdp-full-shard", "fsdp-hybrid") and not res.kept


@pytest.mark.parametrize(("reduces", "k"), [(False, 2), (True, 3)])
def test_a_block_that_reduces_stands_against_fewer_backward_passes(reduces, k):
    # by hand: a block repeated 3 times in steps of 2 backward passes. Gathers alike are the passes'; a block
    # that reduces stands (under DDP's Join, a rank that joined early shadows the others' all-reduces
    # without a backward of its own)
    assert _k_and_how(None, 3, True, 2, False, reduces=reduces)[0] == k


def _step(calls: str, sizes: dict[str, int]) -> tuple[list, list, list, list, list]:
    """A step's calls by hand: each letter a call (upper case a gather of its unit, ``r``+unit a
    reduce-scatter of its whole, ``x``+unit an all-reduce of its shard on another group), as
    :func:`_blocks` takes them: codes, gradient reductions, data, elements, reduce-scatters."""
    toks = calls.split()
    names: dict[str, int] = {}
    codes = [names.setdefault(t, len(names)) for t in toks]
    grad = [t[0] in "rx" for t in toks]
    elems = [float(sizes[t[-1]] // (4 if t[0] == "x" else 1)) for t in toks]
    return codes, grad, [True] * len(toks), elems, [t[0] == "r" for t in toks]


MB = "A B C C B A"  # a micro-batch of 3 units that reduces nothing: forward, then backward (reshard after it)


@pytest.mark.parametrize(("calls", "k"), [
    # HSDP, 2 micro-batches, the second reducing (each unit's reduce-scatter, then its shard's all-reduce)
    # among its backward's gathers: two micro-batches reduced at the boundary
    (f"{MB} A B C C B rC xC A rB xB rA xA", 2),
    # units of one size: the block of one call repeats, and still two micro-batches; or four
    ("A A A D D A A A A A A D D A rD A rA A rA rA", 2),
    ("A A A D D A A A " * 3 + "A A A D D A rD A rA A rA rA", 4),
    # one unit, gathered for the forward and again for the backward: blocks of the one call gather no more
    # than the step reduces, blocks of two do (the step's blocks read as 4 before this reading: 4
    # micro-batches keeping the unit from forward to backward send the same calls)
    ("A A A A rA", 2),
    # a reduction before the first micro-batch's gathers are done: no micro-batch reduces nothing
    ("A B C C rC B A A B C C B rB A rA", None),
    # halves unlike: no micro-batches alike
    (f"{MB} A B C B C rC rB A rA", None),
    # 4 micro-batches found from another phase (a trace without markers, steps found from its end): the
    # reductions come after 2 of them, and a whole micro-batch's gathers after the first reduction
    (f"{MB} {MB} A B C C B rC A rB rA {MB}", None),
    # one micro-batch of units of one size, gathered in the forward and again in the backward
    ("A A A A A rA A rA A rA", None),
    # 2 micro-batches whose units are kept from forward to backward gather Ψ a block, no more than the step
    # reduces: not told from one micro-batch of units of one size here (a profiler trace's passes tell them)
    ("A B C A B C rC rB rA", None),
])
def test_micro_batches_alike_with_the_reductions_in_the_last(calls, k):
    step = _step(calls, {"A": 1000, "B": 800, "C": 600, "D": 500})
    assert _alike_then_reductions(*step) == k
    if k and calls != "A A A A rA":  # and so the step's blocks read, where nothing else reads surely
        assert _blocks(*step)[::3] == (k, True) and _blocks(*step)[1] == "boundary"


@pytest.mark.parametrize(("calls", "two"), [
    # HSDP, 2 micro-batches reduce-scattering in each, the replicate all-reduces in the second alone
    ("A B C C B rC A rB rA A B C C B rC xC A rB xB rA xA", True),
    # units of one size (a block of one call repeats at the start)
    ("A A A D D A rD A rA A rA rA A A A D D A rD xD A rA xA A rA xA rA xA", True),
    # one micro-batch of HSDP: its all-reduces follow its reduce-scatters, no block before them
    ("A B C C B rC xC A rB xB rA xA", False),
    # 2 micro-batches alike, no reductions of the last's own: found by the blocks' repeat, not here
    ("A B C C B rC A rB rA A B C C B rC A rB rA", False),
])
def test_two_micro_batches_that_reduce_each_the_last_once_more(calls, two):
    step = _step(calls, {"A": 1000, "B": 800, "C": 600, "D": 500})
    assert _two_with_more_reductions(*step[:3]) is two
    if two:
        assert _blocks(*step)[:2] == (2, "every") and _blocks(*step)[3]


@pytest.mark.parametrize(("calls", "k"), [
    # DeepSpeed ZeRO-3 before 0.19.3, 4 micro-batches: the first gathers the whole model (W), the later ones
    # all but the layer the backward used last (R), each reduce-scatters Ψ (P), then a scalar (s)
    ("W rP R rP R rP R rP s", 4),
    ("W rP R rP", 2),
    # past the reuse distance: the first gathers (1 + r)Ψ, less than 2Ψ; the second a different set
    ("A B C B A rP D C D B rP", 2),
    # one micro-batch of 3 equal layers, each reduced alone after its backward gather: the first block holds
    # the whole forward's gathers, 3 times what a block reduces or more
    ("E E E E rE E rE E rE", None),
    # the later blocks unlike
    ("W rP R rP D rP", None),
    # the first gathers less than a block reduces
    ("R rP W rP W rP", None),
    # blocks alike from the first: found by their repeat, not here
    ("W rP W rP W rP", None),
])
def test_micro_batches_whose_first_gathers_more(calls, k):
    step = _step(calls, {"W": 1000, "P": 1000, "R": 650, "A": 400, "B": 300, "C": 300, "D": 350, "E": 300,
                         "s": 1})
    step = (step[0], step[1], [t != "s" for t in calls.split()], step[3], step[4])
    assert _wider_first_block(*step) == k
    if k:
        assert _blocks(*step)[:2] == (k, WIDER_FIRST) and _blocks(*step)[3]


def test_k_from_the_passes_where_each_micro_batch_reduces_but_no_block_repeats():
    # by hand: a marked step of 4 backward passes, no block repeated, the gradient reductions 4 times (or 8:
    # two buckets a micro-batch): each micro-batch reduces, the calls around the reductions differ; once a
    # step (or not a multiple of 4), the micro-batches before the boundary send nothing
    for recur in (4, 8):
        k, how = _k_and_how(None, 1, True, 4, False, recur=recur)
        assert k == 4 and how.endswith(
            f"the gradient reductions recur in each ({recur} times a step), but no block of collectives "
            "repeats alike: the calls around them differ from one micro-batch to the next")
    for recur in (None, 1, 6):
        k, how = _k_and_how(None, 1, True, 4, False, recur=recur)
        assert k == 4 and how.endswith("the micro-batches before the boundary send nothing")
