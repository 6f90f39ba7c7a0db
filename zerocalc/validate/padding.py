"""FSDP's padding in the Ψ its reduce-scatters carry, and the gradients' own count beside it.

FSDP2 shards each parameter on its first dimension and pads that dimension to a multiple of the shard
ranks (``_get_dim0_padded_size``), so a unit's all-gathers and reduce-scatters carry more elements than its
parameters have where the ranks do not divide a width (191 rows on 4 ranks: 192). Ψ read from the calls is
then the padded count, a little above the model's. A profiler trace recorded with shapes says how much:
FSDP2 copies a unit's gradients into its reduce-scatter input with ``aten::_chunk_cat`` (``out`` the input,
viewed as (shard ranks, padded shard)), whose ``Input Dims`` hold the gradients' own shapes beside the
padded input's (:func:`zerocalc.traces.kineto_events.chunk_cat_sizes`; the file's ``meta["fsdp_padding"]``).

FSDP1 pads each flat parameter to a multiple of the ranks (``FlatParamHandle``), and before each
reduce-scatter pads the flat gradient with ``F.pad`` where the ranks do not divide it
(``_get_reduce_scatter_tensors``): its ``aten::pad`` records the flat gradient's own elements and the
padding (:func:`zerocalc.traces.kineto_events.pad_sizes`; ``meta["fsdp1_padding"]``, only of the sizes the
file reduce-scatters). A reduce-scatter of a size no pad names is its flat gradient's own.

Each reduce-scatter of a step's gradient reductions is read as the gradients its input holds, by its size;
the count is given only where every one of them is a size the traces' copies name (or, for FSDP1, a size it
did not pad), and no size names two counts.
"""

from __future__ import annotations

import numpy as np

from zerocalc.validate import infer
from zerocalc.validate.columns import Codes

#: The file metadata keys of the (padded, own) pairs: FSDP2's copy-ins (``aten::_chunk_cat``), and FSDP1's
#: flat gradients padded before their reduce-scatter (``aten::pad``, only where the ranks do not divide one).
FSDP2_KEY, FSDP1_KEY = "fsdp_padding", "fsdp1_padding"


def own_sizes(meta: dict | None, files: Codes | None, key: str = FSDP2_KEY) -> dict[int, int]:
    """Padded → own elements of the units the trace files reduce-scatter (``meta[file][key]``); empty where
    none records any or a padded size stands for two counts."""
    if meta is None or files is None:
        return {}
    seen: dict[int, set[int]] = {}
    for name in files.names:
        for padded, own in (meta.get(name) or {}).get(key) or ():
            seen.setdefault(int(padded), set()).add(int(own))
    if any(len(v) > 1 for v in seen.values()):
        return {}
    return {p: next(iter(v)) for p, v in seen.items()}


def psi_without_padding(meta: dict | None, files: Codes | None, grad: np.ndarray, ops: Codes,
                        full: np.ndarray, rank: np.ndarray, step_id: np.ndarray, syncs: int,
                        shard_only: bool, w: np.ndarray | None) -> int | None:
    """Ψ as :func:`~.infer.psi_in_trace` reads it from the gradient reductions ``grad``, each reduce-scatter
    counted as the gradients' own elements (:func:`own_sizes`); None where a reduction is not a reduce-scatter
    (under HSDP the replicate all-reduces are left out, as for Ψ: ``shard_only``) or is of a size no copy
    names. FSDP1 pads only the flat gradients the ranks do not divide: a size it names no padding of is its
    own."""
    sizes = own_sizes(meta, files)
    fsdp1 = not sizes and bool(sizes := own_sizes(meta, files, FSDP1_KEY))
    rs = ops.eq("reduce_scatter")
    if shard_only:
        grad = grad & rs
    if not sizes or not grad.any() or (grad & ~rs).any():
        return None
    own = [sizes.get(int(x), int(x) if fsdp1 else None) for x in full[grad]]
    if None in own:
        return None
    mapped = full.astype(float, copy=True)
    mapped[grad] = own
    psi, _ = infer.psi_in_trace(grad, ops, mapped, rank, step_id, syncs=syncs, w=w)
    return psi


def padding_sentence(psi_trace: int, own: int, shard: int, fsdp1: bool = False) -> str:
    """What of the Ψ the trace reduces is FSDP2's padding (FSDP1's: ``fsdp1``), for the user."""
    if own == psi_trace:
        return ""
    if fsdp1:
        return (f"; {own:,} of them the gradients' own, {psi_trace - own:,} FSDP1's padding (each flat "
                f"parameter padded to a multiple of the {shard} ranks it is sharded over; the flat "
                "gradients' sizes in the trace's aten::pad before their reduce-scatters)")
    return (f"; {own:,} of them the gradients' own, {psi_trace - own:,} FSDP2's padding (each parameter's "
            f"first dimension padded to a multiple of the {shard} ranks it is sharded over; the gradients' "
            "shapes in the trace's aten::_chunk_cat, FSDP2's reduce-scatter copy-in)")


def pads_fsdp1(meta: dict | None, files: Codes | None) -> bool:
    """Whether the padding :func:`psi_without_padding` reads is FSDP1's (no FSDP2 copy-in recorded)."""
    return not own_sizes(meta, files) and bool(own_sizes(meta, files, FSDP1_KEY))
