"""Steps on both sides of an interruption, read from call sequences written out by hand
(:mod:`zerocalc.validate.interrupted`): each call a code, its bytes, whether it carries data and whether it
is a reduction. The expected steps are those the sequences were written with."""

import numpy as np

from zerocalc.validate.interrupted import interrupted_steps
from zerocalc.validate.repeats import AGAIN

# codes: 1-3 a layer's gather, 4-6 a layer's gradient reduction, 7 a 16-element loss all-reduce,
# 8 a 1-element flag, 9 a checkpoint's pickled object
BYTES = {1: 400.0, 2: 600.0, 3: 500.0, 4: 1600.0, 5: 2400.0, 6: 2000.0, 7: 64.0, 8: 4.0, 9: 128.0}
STEP = [1, 2, 3, 3, 6, 2, 5, 1, 4]  # a forward's gathers, then the backward's gathers and reductions
EVAL = [1, 2, 3, 7]  # a forward under no_grad, its loss all-reduced
AFTER = [1, 2, 3, 3, 6, 2, 5, 1, 3, 4]  # the step after an evaluation: layer 3 gathered once more


def _read(calls):
    sig = np.array(calls, dtype=np.int64)
    load = np.array([BYTES[c] for c in calls])
    carries = load > 16
    reduces = np.isin(sig, [4, 5, 6]) & carries
    return interrupted_steps(sig, load, carries, reduces)


def test_steps_on_both_sides_of_one_evaluation():
    calls = STEP + STEP + EVAL + AFTER + STEP + STEP
    out = _read(calls)
    assert out is not None and out.steps == 5 and out.period == len(STEP)
    labels = out.labels
    # the evaluation's 4 calls between steps 2 and 3, one-off; the step after it: its own 9 and the gather
    # sent again (the 9th of its 10 calls)
    at = 2 * len(STEP)
    assert (labels[at:at + len(EVAL)] == -1).all()
    after = labels[at + len(EVAL):at + len(EVAL) + len(AFTER)]
    assert (after[[0, 1, 2, 3, 4, 5, 6, 7, 9]] == 2).all() and after[8] == AGAIN
    assert out.breaks == ((2, len(EVAL), 1, 0),)
    assert np.bincount(labels[labels >= 0]).tolist() == [9] * 5


def test_an_evaluation_that_lends_its_gathers_to_the_step_after():
    # DeepSpeed ZeRO-3 keeps what the evaluation's forward gathered: the step after gathers nothing in its
    # forward, and the evaluation's 3 gathers count in it
    kept = STEP[3:]
    calls = STEP + STEP + EVAL + kept + STEP + STEP
    out = _read(calls)
    assert out is not None and out.steps == 5
    assert np.bincount(out.labels[out.labels >= 0]).tolist() == [9] * 5
    at = 2 * len(STEP)
    assert out.labels[at:at + 3].tolist() == [2, 2, 2] and out.labels[at + 3] == -1  # the loss: one-off
    assert out.breaks == ((2, 1, 0, 3),)


def test_no_interruption_or_too_few_steps_or_gradients_between_are_no_reading():
    assert _read(STEP * 5) is None  # nothing between the steps: a repeating run's reading
    assert _read(STEP + EVAL + STEP) is None  # 2 steps
    # between two steps, a reduction that no step explains: not an evaluation
    assert _read(STEP + STEP + [1, 2, 3, 5, 7] + STEP + STEP) is None


def test_a_checkpoint_between_steps_at_no_regular_interval():
    save = [9, 9, 8]  # calls of a kind no step sends, carrying no gradients
    calls = STEP + save + STEP + STEP + STEP + save + STEP
    out = _read(calls)
    assert out is not None and out.steps == 5
    assert [b[:2] for b in out.breaks] == [(1, 3), (4, 3)]


def test_a_lent_call_out_of_the_step_order_is_found_before_the_step():
    # the evaluation gathers layer 3 alone; the step after keeps it and gathers layers 1 and 2 first, so
    # the block is no subsequence of the calls: the lent gather is the latest of its kind before the step
    short = [1, 2, 3, 6, 2, 5, 1, 4]  # STEP without its second gather of layer 3
    calls = STEP + STEP + [3, 7] + short + STEP + STEP
    out = _read(calls)
    assert out is not None and out.steps == 5
    at = 2 * len(STEP)
    assert out.labels[at] == 2 and out.labels[at + 1] == -1  # the lent gather in step 3, the loss one-off
    assert out.breaks == ((2, 1, 0, 1),)
    assert np.bincount(out.labels[out.labels >= 0]).tolist() == [9] * 5
