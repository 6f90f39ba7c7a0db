"""What NCCL's choice of algorithm knows of a call's data type and reduction.

NCCL's cost model prices bytes, not element types: ``ncclTopoGetAlgoTime`` (``src/graph/tuning.cc``) reads
no datatype, and a tuner plugin is not told one (``getCollInfo`` of tuner API v2-v6 gets the collective,
its bytes and the cost table, ``src/include/plugin/tuner/``). Two tests of ``src/enqueue.cc`` read it
before the least-time pick, and change the pair a reduction runs on:

* **NVLS and NVLS Tree reduce in the NVSwitch, for the types it adds.** ``nvlsSupport`` is
  ``comm->nvlsSupport && ncclNvlsSupported(op, type)`` (``src/include/device.h``, v2.19.3-v2.30.7; the macro
  ``NCCL_NVLS_SUPPORTS`` of v2.17.1-v2.18.x tests the same set): a sum of int32, uint32, int64, uint64,
  half, bfloat16, float or double; a min or max of those but float and double. An int8, uint8 or fp8
  reduction, a product, an average (``ncclDevSumPostDiv`` / ``ncclDevPreMulSum``, ``hostToDevRedOp``) and a
  pre-multiplied sum get neither NVLS algorithm, and run on Ring or Tree (CollNet where the network has it).
  An all-gather runs as int8 before v2.19 (:func:`zerocalc.nccl.enabled.disabled_reason`), on the caller's
  type in v2.19-v2.21 (the test applies), and is exempt from v2.22.3
  (``|| aggBeg->func == ncclFuncAllGather``).
* **An fp8 reduction's Ring is relegated at more than 8 ranks.** ``updateCollCostTable`` multiplies Ring's
  time by 1024 for ``ncclFloat8e4m3`` / ``ncclFloat8e5m2`` when ``comm->nRanks > 8`` ("Relegate fp8
  reduction trees of sufficient depth that they incur precision loss", v2.24.3-v2.30.7; v2.24 brought the
  fp8 types): NCCL chooses another algorithm where one can run (Tree, PAT, NVLS cannot), Ring where none
  can. The call still runs at Ring's own speed: the factor is the choice's alone (``Entry.choice_scale``).
  All-gather and broadcast run as int8 from v2.22.3 (``taskAppend``), so only reductions are relegated.

On a 2-node 16-H200 RoCE run under NCCL 2.30.4 (``nccl-tests -d all``, 10-40 GiB) a float, half or
bfloat16 sum reaches a bus bandwidth of 482-487 GB/s on NVLS Tree, int8 and uint8 390 GB/s (Ring), fp8
361-364 GB/s (Tree).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from zerocalc.nccl.tables import Algorithm, Collective, Release
from zerocalc.topology.machine import series_redop

A, C = Algorithm, Collective

#: NVLink SHARP's types per reduction (``ncclNvlsSupported``, ``src/include/device.h``, v2.19.3-v2.30.7;
#: ``NCCL_NVLS_SUPPORTS`` in v2.17.1-v2.18.x: types 2-9 for sum, all but float (7) and double (8) for
#: max / min); canonical names of :mod:`zerocalc.dtypes`.
NVLS_TYPES: Final[dict[str, frozenset[str]]] = {
    "sum": frozenset({"int32", "uint32", "int64", "uint64", "fp16", "bf16", "fp32", "fp64"}),
    "max": frozenset({"int32", "uint32", "int64", "uint64", "fp16", "bf16"}),
    "min": frozenset({"int32", "uint32", "int64", "uint64", "fp16", "bf16"}),
}
#: The fp8 types (``ncclFloat8e4m3``, ``ncclFloat8e5m2``, ``nccl.h``, v2.24.3 on).
FP8: Final[frozenset[str]] = frozenset({"fp8e4m3", "fp8e5m2"})
#: ``updateCollCostTable``'s factor on an fp8 reduction's Ring time and the ranks above which it applies.
FP8_RING_FACTOR: Final[float] = 1024.0
FP8_RING_RANKS: Final[int] = 8
#: The collectives that reduce (the ones whose type the two tests read from v2.22.3 on).
REDUCING: Final[frozenset[Collective]] = frozenset({C.ALL_REDUCE, C.REDUCE_SCATTER, C.REDUCE})


def _redop(redop: str | None) -> str:
    """nccl-tests' reduction name (``sum prod max min avg mulsum``); a table without one ran a sum."""
    return series_redop(redop) or "sum"


def nvls_reduces(rel: Release, coll: Collective, dtype: str | None, redop: str | None) -> bool:
    """Whether NCCL ``rel`` lets NVLS / NVLS Tree run ``coll`` of ``dtype`` under ``redop`` (``True`` when
    the type is unknown: the model then stays as it was)."""
    if dtype is None or coll not in REDUCING | {C.ALL_GATHER}:
        return True
    if coll == C.ALL_GATHER:  # exempt from v2.22.3; before v2.19 it never has NVLS (enabled.disabled_reason)
        return rel.era >= 22 or rel.era < 19 or dtype in NVLS_TYPES["sum"]
    return dtype in NVLS_TYPES.get(_redop(redop), frozenset())


def ring_relegated(rel: Release, coll: Collective, dtype: str | None, n_ranks: int) -> bool:
    """Whether NCCL ``rel``'s cost table multiplies Ring's time by :data:`FP8_RING_FACTOR` for the call."""
    return rel.era >= 24 and dtype in FP8 and coll in REDUCING and n_ranks > FP8_RING_RANKS


def for_type(tuning, coll: Collective, dtype: str | None, redop: str | None):
    """``tuning`` (:class:`zerocalc.nccl.model.Tuning`) with the pairs of ``coll`` NCCL chooses among for
    a call of ``dtype`` under ``redop``: NVLS / NVLS Tree left out where :func:`nvls_reduces` says so, Ring
    relegated where :func:`ring_relegated` does; and the note that says what changed (``None``: nothing)."""
    rel, m = tuning.release, tuning.machine
    entries, said = dict(tuning.entries), []
    no_nvls = not nvls_reduces(rel, coll, dtype, redop)
    relegate = ring_relegated(rel, coll, dtype, m.n_ranks)
    what = f"{dtype} {_redop(redop)}" if coll in REDUCING else str(dtype)
    for (c, a, p), e in tuning.entries.items():
        if c != coll:
            continue
        if no_nvls and a in (A.NVLS, A.NVLS_TREE) and e.enabled:
            why = f"NVLink SHARP does not reduce {what}"
            entries[(c, a, p)] = replace(e, enabled=False, why_disabled=why)
            if not said:
                said.append(f"{what}: NVLS and NVLS Tree left out, as NCCL leaves them out of a call whose "
                            f"type and reduction NVLink SHARP does not reduce (ncclNvlsSupported, "
                            f"src/include/device.h: a sum of 16-64-bit types, a min or max of integers and "
                            f"half / bfloat16)")
        if relegate and a == A.RING:
            entries[(c, a, p)] = replace(e, choice_scale=FP8_RING_FACTOR)
    if relegate:
        said.append(f"{what} on {m.n_ranks} ranks: NCCL multiplies Ring's time by {FP8_RING_FACTOR:g} when "
                    f"it chooses (src/enqueue.cc, 'Relegate fp8 reduction trees', v2.24.3 on), so another "
                    f"algorithm runs it where one can; priced at that algorithm's time")
    if entries == tuning.entries:
        return tuning, None
    return replace(tuning, entries=entries), "; ".join(said)
