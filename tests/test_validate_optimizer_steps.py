"""Optimizer steps from the profiler's optimizer annotations where the markers mark micro-batches, and marked
steps without a backward pass; each expectation derived by hand from the rule it tests."""

import numpy as np

from zerocalc.validate.columns import Codes
from zerocalc.validate.optimizer_steps import optimizer_grouped, without_backward

NAN = np.nan


def _meta(optimizer, first_last, passes):
    return {"optimizer_steps": optimizer, "profiler_steps": first_last, "backward_passes": passes}


def test_k_marked_steps_ending_in_an_optimizer_step_make_one():
    # 12 marked micro-batches #1-#12, the optimizer stepping in #3, #7, #11: whole optimizer steps #4-#7 and
    # #8-#11; #1-#3 lack the one before #1 (the profiler's warm-up), #12 the rest of its own
    step = np.array([1, 3, 4, 5, 7, 8, 11, 12, NAN])
    files = Codes(np.zeros(len(step), dtype=np.int64), ("r0",))
    meta = {"r0": _meta([3, 7, 11], [1, 12], {p: 1 for p in range(1, 13)})}
    out, k, left_out = optimizer_grouped(step, files, meta)
    np.testing.assert_array_equal(out, [NAN, NAN, 7, 7, 7, 11, 11, NAN, NAN])
    assert (k, left_out) == (4, 3)  # #1, #3, #12 hold calls and are left out


def test_markers_of_optimizer_steps_or_uneven_ones_are_kept():
    step = np.array([1.0, 2.0, 3.0])
    files = Codes(np.zeros(3, dtype=np.int64), ("r0",))
    every = {"r0": _meta([1, 2, 3], [1, 3], {1: 1, 2: 1, 3: 1})}  # one marked step an optimizer step
    assert optimizer_grouped(step, files, every) is None
    uneven = {"r0": _meta([2, 4, 7], [1, 7], {p: 1 for p in range(1, 8)})}  # an overflow's skipped step
    assert optimizer_grouped(step, files, uneven) is None
    once = {"r0": _meta([4], [1, 4], {p: 1 for p in range(1, 5)})}  # one optimizer step: no K to see
    assert optimizer_grouped(step, files, once) is None
    # a marked step without a backward pass between them: an evaluation, not a micro-batch
    evaluated = {"r0": _meta([2, 4], [1, 4], {1: 1, 2: 1, 4: 1})}
    assert optimizer_grouped(step, files, evaluated) is None
    # a file that names no optimizer step, beside one that does
    two = Codes(np.array([0, 0, 1]), ("r0", "r1"))
    meta = {"r0": _meta([2, 4], [1, 4], {p: 1 for p in range(1, 5)}), "r1": {}}
    assert optimizer_grouped(step, two, meta) is None
    assert optimizer_grouped(step, files, None) is None


def test_marked_steps_without_a_backward_pass_are_told_where_others_run_one():
    step = np.array([1, 1, 2, 3, 3, 4, NAN])
    files = Codes(np.array([0, 0, 0, 0, 0, 1, 1]), ("r0", "r1"))
    meta = {"r0": {"backward_passes": {1: 1, 2: 1}}, "r1": {}}  # r1 counts none: nothing said of it
    mask, steps, calls = without_backward(step, files, meta)
    np.testing.assert_array_equal(mask, [False, False, False, True, True, False, False])
    assert (steps, calls) == (1, 2)
