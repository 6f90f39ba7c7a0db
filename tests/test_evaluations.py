"""Evaluations inside marked steps (zerocalc.validate.evaluations), on one rank's calls written out by hand:
each call a code (0 a parameter gather, 1 a gradient reduce-scatter, 2 a 1-element all-reduce, 3 a
16-element loss all-reduce), each marked step a list of them in time order."""

import numpy as np

from zerocalc.validate.evaluations import evaluations

GATHER, SCATTER, FLAG, LOSS = 0, 1, 2, 3
# a step of 4 micro-batches as DeepSpeed ZeRO-3 sends it: a gather before each forward, a reduce-scatter
# after each backward, the overflow flag's all-reduce at the end
STEP = [GATHER, SCATTER] * 4 + [FLAG]
EVALUATION = [GATHER, LOSS, LOSS]


def _read(steps: dict[int, list[int]]):
    step_id = np.array([m for m, calls in steps.items() for _ in calls], dtype=np.int32)
    sig = np.array([c for calls in steps.values() for c in calls])
    light = np.isin(sig, [FLAG, LOSS])
    reduces = np.isin(sig, [SCATTER, FLAG, LOSS])
    return step_id, np.zeros(len(sig), dtype=np.int64), sig, light, reduces


def test_an_evaluation_every_third_step_lends_its_gather_to_the_step_after_it():
    # the parameters the evaluation gathered serve the next step's first forward, which gathers nothing:
    # steps 1 and 4 follow an evaluation (step 1 the warm-up's, outside the trace), 2 and 5 follow none,
    # 3 and 6 evaluate. By hand: step 3's evaluation is its 3 calls after the flag, its gather counted in
    # step 4 (which then holds STEP's calls); step 6's are all one-off (no step after it); step 1 lacks
    # the gather and no evaluation in the trace sent it: one-off, its 8 calls
    after = STEP[1:]
    step_id, rank, sig, light, reduces = _read({1: after, 2: STEP, 3: STEP + EVALUATION, 4: after,
                                                5: STEP, 6: STEP + EVALUATION})
    ev = evaluations(step_id, rank, sig, light, reduces=reduces)
    assert (ev.k, ev.calls, ev.lent, ev.first, ev.again) == (3, 2 + 3, 1, len(after), 0)
    for m in (2, 3, 4, 5, 6):
        assert sorted(sig[step_id == m].tolist()) == sorted(STEP), m
    assert not (step_id == 1).any()
    # the gather step 4 counts is the one step 3's evaluation sent: its first call, after steps 1 and 2
    # and step 3's own
    first_of_evaluation = len(after) + len(STEP) + len(STEP)
    assert sig[first_of_evaluation] == GATHER and step_id[first_of_evaluation] == 4
    assert (step_id[first_of_evaluation + 1:first_of_evaluation + 3] == -1).all()


def test_what_the_step_after_an_evaluation_gathers_again_is_one_off():
    # FSDP2's pattern: the evaluation leaves a module resharded and the step after it gathers it once more
    # in its backward. A step: 3 gathers, 3 reduce-scatters; after an evaluation, a 4th gather before the
    # last reduce-scatter. Every 2nd step evaluates 2 batches (a gather and a loss all-reduce each). By
    # hand: the 4 calls of each evaluation and 1 of each step after one are one-off
    step = [GATHER, SCATTER] * 3
    again = step[:-1] + [GATHER, SCATTER]
    evaluation = [GATHER, LOSS] * 2
    step_id, rank, sig, light, reduces = _read({1: again, 2: step + evaluation, 3: again,
                                                4: step + evaluation})
    ev = evaluations(step_id, rank, sig, light, reduces=reduces)
    assert (ev.k, ev.calls, ev.again, ev.lent, ev.first) == (2, 2 * 4, 2 * 1, 0, 0)
    for m in (1, 2, 3, 4):
        assert sig[step_id == m].tolist() == step, m


def test_more_gradient_reductions_in_every_second_step_are_no_evaluation():
    # every 2nd step reduce-scatters once more (a micro-batch more): not an evaluation's, nothing set apart
    step = [GATHER, SCATTER] * 2
    step_id, rank, sig, light, reduces = _read({1: step, 2: step + [GATHER, SCATTER, LOSS], 3: step,
                                                4: step + [GATHER, SCATTER, LOSS]})
    before = step_id.copy()
    assert evaluations(step_id, rank, sig, light, reduces=reduces) is None
    assert np.array_equal(step_id, before)


def test_one_evaluation_lends_its_gather_to_the_step_after_it():
    # a short profile holds one evaluation (step 2) between two steps after an evaluation (step 1 after
    # the warm-up's). By hand: step 2's evaluation is its 3 calls after the flag, its gather counted in
    # step 3; step 1 lacks the gather and no evaluation in the trace sent it: one-off, its 8 calls
    after = STEP[1:]
    step_id, rank, sig, light, reduces = _read({1: after, 2: STEP + EVALUATION, 3: after})
    ev = evaluations(step_id, rank, sig, light, reduces=reduces)
    assert (ev.k, ev.calls, ev.lent, ev.first, ev.again) == (0, 2, 1, len(after), 0)
    for m in (2, 3):
        assert sorted(sig[step_id == m].tolist()) == sorted(STEP), m
    assert not (step_id == 1).any()
