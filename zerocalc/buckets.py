"""The calls an implementation cuts a phase into by default: ``--bucket implementation``.

NCCL picks its algorithm and protocol per call, so a phase run as many bucket-sized calls is priced per
call (:func:`zerocalc.nccl.steps.phase_calls`). ``--bucket SIZE`` gives every phase one bucket size;
``--bucket implementation`` gives each gradient reduction the default bucket of the implementation that
runs it, and leaves the other phases one call:

- PyTorch DDP (``dp``; the gradient all-reduce of ``torch-zero1``, ZeroRedundancyOptimizer under DDP):
  ``bucket_cap_mb`` 25 by default, ``bucket_cap_mb * 1024 * 1024`` bytes of gradients a bucket
  (``torch/nn/parallel/distributed.py``). Its first bucket is smaller (``_DEFAULT_FIRST_BUCKET_BYTES``,
  1 MiB) and buckets close on whole parameters: priced as equal calls of at most 25 MiB.
- DeepSpeed ZeRO-1 / 2 / 3 (``deepspeed-zero1``, ``deepspeed-zero2``, ``deepspeed-zero2-reduce``,
  ``deepspeed-zero3``): ``reduce_bucket_size`` 5e8 elements by default
  (``deepspeed/runtime/zero/config.py``), the elements one gradient reduction carries
  (``stage_1_and_2.py``'s IPG bucket, stage 3's reduce-scatter), at the gradients' wire width. The
  ZeRO paper's stages (``zero1``, ``zero2``, ``zero3``) too: DeepSpeed is their implementation, and the
  paper reduces a partition's gradients in buckets (§5.2, "bucketization"), so a plan that moves from
  DeepSpeed's all-reduce to the paper's reduce-scatter keeps DeepSpeed's buckets on both sides.

Left one call per phase: DeepSpeed ZeRO-1/2's parameter all-gather (one ``all_gather_into_tensor`` per
parameter group, ``all_gather_dp_groups`` in ``deepspeed/runtime/utils.py``), ZeroRedundancyOptimizer's
broadcasts (one per owner with ``parameters_as_bucket_view``, else one per parameter), and the gathers of
ZeRO-3, FSDP and ZeRO++, which follow the model's modules (per submodule, per wrapped unit), shapes the
model does not know; the #4582 proposal reduces no gradients.
"""

from __future__ import annotations

from zerocalc.schemes import Collective, Phase, Side

#: ``--bucket``'s word for the implementations' own buckets
IMPLEMENTATION = "implementation"
#: PyTorch DDP's ``bucket_cap_mb`` default (25), in bytes as DDP sizes it (``* 1024 * 1024``)
DDP_BUCKET_BYTES = 25 * 1024 * 1024
#: DeepSpeed ZeRO's ``reduce_bucket_size`` default, elements
DEEPSPEED_REDUCE_BUCKET_ELEMENTS = 500_000_000

_DDP = frozenset({"dp", "torch-zero1"})
_DEEPSPEED = frozenset({"deepspeed-zero1", "deepspeed-zero2", "deepspeed-zero2-reduce", "deepspeed-zero3",
                        "zero1", "zero2", "zero3"})
_REDUCING = frozenset({Collective.ALL_REDUCE, Collective.REDUCE_SCATTER, Collective.REDUCE})


def implementation_bucket(scheme: str, phase: Phase, width: float) -> float | None:
    """The largest call, in bytes, that ``scheme``'s implementation makes of ``phase`` by default at
    ``width`` bytes per element (module docstring); ``None``: one call of the phase's whole vector."""
    if phase.side is not Side.GRAD or phase.collective not in _REDUCING:
        return None
    if scheme in _DDP and phase.collective is Collective.ALL_REDUCE:
        return float(DDP_BUCKET_BYTES)
    if scheme in _DEEPSPEED:
        return float(DEEPSPEED_REDUCE_BUCKET_ELEMENTS * width)
    return None


def parse_bucket(text: str, option: str = "--bucket") -> float | str:
    """``--bucket``: a size with its unit (:func:`zerocalc.units.parse_bytes`) or ``implementation``."""
    if str(text).strip().lower() == IMPLEMENTATION:
        return IMPLEMENTATION
    from zerocalc.units import parse_bytes

    return float(parse_bytes(text, option))


def words() -> str:
    """What ``--bucket implementation`` prices, in a few words (for notes and the plan's header)."""
    return ("each gradient reduction in its implementation's default buckets (DDP's 25 MiB, DeepSpeed's "
            "reduce_bucket_size of 5e8 elements), other phases one call (--bucket implementation)")
