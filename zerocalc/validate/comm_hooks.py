"""A DDP comm hook that reduces the gradients compressed, and Ψ from what DDP hands it.

DDP copies each gradient into its bucket before the bucket is reduced (``copy_grad_to_bucket`` in
``torch/csrc/distributed/c10d/reducer.cpp``); a profiler trace recorded with shapes names each copy's
gradient (:data:`zerocalc.traces.kineto_events.DDP_BUCKET_COPIES`; the file's
``meta["ddp_bucket_elements"]``, the elements copied over the trace). Without a hook, or with one that only
casts (``fp16_compress_hook``: half the bytes, as many elements), the gradient reductions carry as many
elements as DDP copied. A hook that compresses reduces fewer: PowerSGD (``powerSGD_hook``) all-reduces
the tensors it leaves whole, then for each weight of n × m elements the rank-r factors P (n × r) and Q
(m × r). Ψ read from those calls would be the factors' count, not the model's.

Where the gradient reductions a trace file records carry less than half the elements DDP copied into
its buckets in it (the median over the files that record both), Ψ is the model's: the trace's Ψ scaled
by what DDP copied over what the reductions carry (:func:`compressed`). What the calls carry then stays
what is measured, and no exact scheme sends so little: the check says so.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from zerocalc.validate.columns import Codes, group_sums
from zerocalc.validate.folded import weighted_median
from zerocalc.validate.infer import RTOL

#: Reductions carrying less than this share of what DDP copied into its buckets: a compressing hook.
COMPRESSED_BELOW = 0.5


class Compressed(NamedTuple):
    """A compressing comm hook's trace: Ψ of the gradients DDP hands it per reduction, and the share of
    them its gradient reductions carry."""

    psi: int
    share: float


def compressed(meta: dict | None, files: Codes | None, grad: np.ndarray, full: np.ndarray,
               psi_trace: int | None, w: np.ndarray | None) -> Compressed | None:
    """The gradients of a compressing DDP comm hook (:class:`Compressed`), or None where the trace's files
    record no bucket copies, or the gradient reductions ``grad`` carry half of what was copied or more."""
    if meta is None or files is None or psi_trace is None or not grad.any():
        return None
    copied = np.array([float((meta.get(name) or {}).get("ddp_bucket_elements") or 0) for name in files.names])
    if not copied.any():
        return None
    codes = files.codes[grad]
    known = codes >= 0
    carried = full[grad][known] * (1.0 if w is None else w[grad][known])
    reduced = group_sums(codes[known].astype(np.int64), len(files.names), {"e": carried})["e"].to_numpy()
    both = (copied > 0) & (reduced > 0)
    if not both.any():
        return None
    share = weighted_median(reduced[both] / copied[both], None)
    if share >= COMPRESSED_BELOW:
        return None
    return Compressed(int(round(psi_trace / share)), share)


def priced(hook: Compressed | None, psi: int | None, psi_trace: int, syncs: int,
           n: int) -> tuple[int, str, str] | None:
    """Ψ a compressing hook's trace is priced with (what DDP hands it; ``--psi`` ``psi`` where it says so
    within :data:`~.infer.RTOL`), how it was found, and the note beside it; None without such a hook, or
    where ``--psi`` says otherwise (then checked against the calls as ever)."""
    if hook is None or psi is not None and abs(psi - hook.psi) > RTOL * hook.psi:
        return None
    return hook.psi, psi_sentence(hook, psi_trace, syncs, psi is not None), below_exact(hook, psi_trace, n)


def psi_sentence(hook: Compressed, psi_trace: int, syncs: int, given: bool) -> str:
    """How Ψ was found, for the user."""
    per = "each reduction" if syncs > 1 else "the step"
    return (f"Ψ = {hook.psi:,}: {'from --psi: ' if given else ''}the gradient elements DDP copies into its "
            f"buckets for {per} (the trace's torch::distributed::reducer copies), of which its gradient "
            f"reductions carry {psi_trace:,} ({hook.share:.2%}): a comm hook reduces them compressed "
            "(PowerSGD's low-rank factors), and what a hook sends from a future's callback on another thread "
            "(gloo's) the profiler may not record")


def below_exact(hook: Compressed, psi_trace: int, n: int) -> str:
    """What the hook's traffic is beside the exact schemes', for the user."""
    least = (n - 1) * hook.psi // n
    return (f"a compressing comm hook: its gradient reductions carry {psi_trace:,} elements where any exact "
            f"scheme reduces Ψ = {hook.psi:,} gradients, which moves at least (N-1)/N·Ψ = {least:,} elements "
            "per rank (Patarasuk & Yuan 2009): no scheme here matches, and the update is approximate "
            "(PowerSGD's, for one: it keeps the error it leaves out and adds it back the next step)")
