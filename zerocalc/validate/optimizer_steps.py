"""Optimizer steps from the profiler's optimizer annotations, where the step markers mark micro-batches.

The PyTorch profiler wraps every ``torch.optim.Optimizer.step`` in an annotation
``Optimizer.step#<Class>.step`` (``torch/optim/optimizer.py``, ``profile_hook_step``), under DeepSpeed's and
FSDP's optimizers too. A loop that calls ``prof.step()`` after every micro-batch (DeepSpeed's
``engine.backward(loss); engine.step(); prof.step()``, or any loop with the profiler in its inner loop)
marks micro-batches; the marked steps that hold an optimizer step then come every K-th, and an optimizer
step is such a marked step and the K - 1 before it, whatever collectives they hold. A marked step that runs
no backward pass where the others run some is an evaluation's, or a forward alone (:func:`without_backward`).
"""

from __future__ import annotations

import numpy as np

from zerocalc.validate.accounting import _plural
from zerocalc.validate.columns import Codes


def optimizer_marked(marked: np.ndarray, files: Codes, meta: dict | None, steps: int | None
                     ) -> tuple[np.ndarray | None, tuple[int, int, int] | None, list[str]]:
    """Each call's marked step (``marked``, NaN where unmarked; None returned: read the trace as
    unmarked), as the marked step that ends its optimizer step where the markers mark micro-batches and
    the profiler's optimizer annotations say which (:func:`optimizer_grouped`), with (K, marked steps left
    out, marked steps) — (1, 0, marked steps) where those annotations say each marked step is an optimizer
    step (:func:`optimizer_in_each`), so that the steps are not regrouped — and the notes. The calls of
    marked steps that run no backward pass where others do (:func:`without_backward`) are taken as
    unmarked: one-off. Where ``--steps`` (``steps``) is the number of marked steps, each is a step as
    marked; where it is not, and the steps are the optimizer's (a trace without ProfilerStep:
    :func:`~zerocalc.traces.kineto_backward.optimizer_spans`), the trace's steps are found as it repeats, as
    in one without markers."""
    n_marked = len(np.unique(marked[~np.isnan(marked)]))
    if steps is not None and steps == n_marked:
        return marked, None, []  # each marked step a step, as --steps says
    if steps is not None and spanned_by_optimizer(meta):
        return None, None, []  # steps the optimizer's, not as many as --steps: found as the trace repeats
    forward_only, n_forward, n_calls = without_backward(marked, files, meta)
    notes = []
    if forward_only.any() and not forward_only[~np.isnan(marked)].all():
        marked = np.where(forward_only, np.nan, marked)
        notes.append(f"{_plural(n_forward, 'marked step')} a rank run no backward pass, while the others do "
                     f"(an evaluation's, a forward alone, profiled as steps of their own): their "
                     f"{_plural(n_calls, 'call')} a rank count as one-off")
    grouped = optimizer_grouped(marked, files, meta)
    if grouped is None:
        each = optimizer_in_each(marked, files, meta)
        return marked, (1, 0, len(np.unique(marked[~np.isnan(marked)]))) if each else None, notes
    return grouped[0], (*grouped[1:], len(np.unique(marked[~np.isnan(marked)]))), notes


def spanned_by_optimizer(meta: dict | None) -> bool:
    """Whether every file's steps are the optimizer's spans (it marks no ProfilerStep:
    ``meta[file]["steps_from"]``)."""
    spans = [m.get("steps_from") == "optimizer" for m in (meta or {}).values() if isinstance(m, dict)]
    return bool(spans) and all(spans)


def optimizer_grouped(step: np.ndarray, files: Codes, meta: dict | None
                      ) -> tuple[np.ndarray, int, int] | None:
    """Each call's marked step (``step``, NaN where unmarked) as the marked step that ends its optimizer step,
    NaN for a call of an optimizer step the trace holds in part (before the first whole one, after the
    last), with K and the marked steps (of calls) so left out; None unless every file whose calls are marked
    names its optimizer steps (``meta[file]["optimizer_steps"]``, :mod:`zerocalc.traces.kineto_calls`), at
    least two, every K-th marked step, K ≥ 2 the same in every file, and each marked step of theirs runs a
    backward pass (``meta[file]["backward_passes"]``: not an evaluation's). An optimizer step is whole where
    its K marked steps are all in the file (``meta[file]["profiler_steps"]``: its first and last)."""
    held, marked, used = _held(step, files, meta)
    first = [((meta or {}).get(name, {}).get("profiler_steps") or [-np.inf])[0] for name in files.names]
    if not len(used) or any(not held[f] or len(held[f]) < 2 for f in used.tolist()):
        return None
    gaps = {b - a for f in used.tolist() for a, b in zip(held[f], held[f][1:], strict=False)}
    if len(gaps) != 1 or (k := gaps.pop()) < 2:
        return None
    for f in used.tolist():  # a micro-batch runs a backward: a marked step of an evaluation runs none
        passes = (meta or {}).get(files.names[f], {}).get("backward_passes") or {}
        if any(p not in passes for end in held[f] for p in range(end - k + 1, end + 1) if p >= first[f]):
            return None
    out = np.full(len(step), np.nan)
    left_out = 0  # the most of one file (a rank's, or one profiling window's)
    for f in used.tolist():
        ends = np.asarray(held[f], dtype=np.float64)
        at = np.flatnonzero(marked & (files.codes == f))
        p = step[at]
        j = np.minimum(np.searchsorted(ends, p, side="left"), len(ends) - 1)
        # an optimizer step is whole where all its k marked steps are in the file (a profiler's warm-up
        # steps are not)
        whole = (p <= ends[j]) & (p > ends[j] - k) & (ends[j] - k + 1 >= first[f])
        out[at[whole]] = ends[j][whole]
        left_out = max(left_out, len(np.unique(p[~whole])))
    return out, k, left_out


def optimizer_in_each(step: np.ndarray, files: Codes, meta: dict | None) -> bool:
    """Whether every file whose calls are marked names its optimizer steps
    (``meta[file]["optimizer_steps"]``), at least two, and each of its marked steps that holds calls holds
    one: the markers mark optimizer steps, whatever else some of them hold (Hugging Face Trainer's logging
    gathers, every ``logging_steps``-th)."""
    held, marked, used = _held(step, files, meta)
    return bool(len(used)) and all(
        held[f] and len(held[f]) >= 2
        and set(np.unique(step[marked & (files.codes == f)]).tolist()) <= set(held[f])
        for f in used.tolist())


def _held(step: np.ndarray, files: Codes, meta: dict | None) -> tuple[list, np.ndarray, np.ndarray]:
    """Each file's marked steps that hold an optimizer step (``meta[file]["optimizer_steps"]``, None where
    it names none), which calls are marked, and the files those calls are in."""
    held = [(meta or {}).get(name, {}).get("optimizer_steps") for name in files.names]
    marked = ~np.isnan(step) & (files.codes >= 0)
    return held, marked, np.unique(files.codes[marked])


def without_backward(step: np.ndarray, files: Codes, meta: dict | None) -> tuple[np.ndarray, int, int]:
    """The calls in marked steps that run no backward pass, in the files whose other marked steps run some
    (``meta[file]["backward_passes"]``): an evaluation's, a forward alone, profiled as a step of its own;
    with the most such marked steps of one file, and the most of their calls."""
    out = np.zeros(len(step), dtype=bool)
    most = calls = 0
    marked = ~np.isnan(step) & (files.codes >= 0)
    for f in np.unique(files.codes[marked]).tolist():
        passes = (meta or {}).get(files.names[f], {}).get("backward_passes")
        if not passes:
            continue
        at = np.flatnonzero(marked & (files.codes == f))
        none = ~np.isin(step[at], np.fromiter(passes, dtype=np.float64))
        out[at[none]] = True
        most, calls = max(most, len(np.unique(step[at[none]]))), max(calls, int(none.sum()))
    return out, most, calls
