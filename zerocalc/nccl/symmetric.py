"""NCCL's symmetric kernels inside one NVLink domain: the kernel NCCL picks for a call on symmetrically
registered buffers, and the time its own model gives it; for a profiler trace, the kernel a GPU kernel's
symbol names (:func:`kernel_of`) and that kernel's time (:func:`kernel_time_s`).

From NCCL 2.27 a buffer registered with ``ncclCommWindowRegister(..., NCCL_WIN_COLL_SYMMETRIC)`` (what
nccl-tests ``-R 2`` / ``--local_register 2`` does to its send and receive buffers, ``src/common.cu``
``SYMMETRIC_REGISTER``) lets an all-reduce, all-gather or reduce-scatter run on a *symmetric kernel*
instead of the legacy (algorithm, protocol) kernels of ``tuning.cc``. Each has its own cost model:
``queryModel`` in ``src/symmetric.cc`` (v2.27.3-v2.27.7), ``queryModel_lsa`` in ``src/sym_kernels.cc``
(v2.28.3-v2.30.7; the LSA kernels, over NVLink load/store). The constants and formulas are the same in
every release from v2.27.3 to v2.30.7; what changes is when NCCL runs them (:func:`pick`):

* v2.27: one collective alone in its group, a communicator of one node whose GPUs all reach each other
  by CUDA P2P (``comm->symmetricSupport``, ``init.cc``; ``ncclPrepareTasks``, ``enqueue.cc``); the kernel
  picked always runs ("For now just always use symmetric if available").
* v2.28: the calls of a group on the same (collective, op, type) share one kernel, each call's count
  rounded up to a 1 KiB cell (``NCCL_SYM_KERNEL_CELL_SIZE``, ``sym_kernels.h``), LL kernels only for a
  group of one call (``ncclSymkPickKernel``; ``ncclMakeSymmetricTaskList``, ``scheduler/symmetric_sched.cc``).
* v2.29.2-v2.29.3: an LL kernel picked for registered buffers falls back to the legacy kernels where one
  thread drives several GPUs, or where the legacy model's own choice is not LL (``symmetric_sched.cc``).
* v2.29.7 on: registered send and receive buffers never fall back; the multimem (NVLS) kernels need more
  than 2 ranks (``hasLsaMultimem``); from v2.30.3 an average runs them too (``ncclDevSumPostDiv``).

Left out: the GIN (network) kernels of v2.29+ (``queryModel_gin``: a group spanning more than one LSA
team), the TMA kernels of v2.30 (``NCCL_SYM_TMA_ENABLE``, off by default), ``NCCL_SYM_KERNEL``,
``NCCL_SYM_CTAS`` and ``NCCL_MIN_CTAS`` / ``NCCL_MAX_CTAS`` (the defaults, 1 and 64, are used), and
buffers registered on one side only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from zerocalc.nccl.tables import Collective

SYMK_FIRST = (2, 27, 0)
"""The first NCCL with symmetric kernels (``src/symmetric.cc``, v2.27.3; nccl-tests ``-R 2`` asks for it
from NCCL 2.27, ``src/common.cu``)."""

CELL_BYTES = 1024
"""``NCCL_SYM_KERNEL_CELL_SIZE`` (``src/include/sym_kernels.h``, v2.28.3-v2.30.7): each call's count is
rounded up to a whole cell before the model is queried (``ncclMakeSymmetricTaskList``)."""

MAX_BLOCKS = 64
"""``ncclSymMaxBlocks`` / ``ncclSymkMaxBlocks`` (``symmetric.h`` v2.27, ``sym_kernels.h`` v2.28-v2.30);
``comm->config.maxCTAs`` defaults to ``MAXCHANNELS``, 64, and ``minCTAs`` to 1 (``init.cc``)."""

LL_BUS_FACTOR = 9.0
"""``LL_BusFactor``: "2X the bytes, plus some processing, plus no unrolling" (``queryModel``)."""

SM_PENALTY = 0.025
"""``smPenalty``: "2.5% percent increase in time per SM", weighing kernels (``ncclSymkPickKernel``)."""

GIB_PER_S = (1 << 30) / 1e6
"""``GBps`` in ``queryModel``: bytes per µs of one GiB/s."""

LL_BYTES_LIMIT = 2 << 30
"""LL kernels "use 32-bit ints to track element counts": none once the call's bus bytes reach 2 GiB, and
no symmetric kernel at all from 32 × that (``ncclSymkMask``; ``ncclSymPickKernel`` in v2.27)."""


@dataclass(frozen=True)
class Kernel:
    """One LSA symmetric kernel: its NCCL name, collective and kind."""

    name: str
    collective: Collective
    ll: bool = False
    stmc: bool = False  # multimem store: needs NVLS (kernelMask_STMC)
    ldmc: bool = False  # multimem load-reduce: NVLS and a type NVLS reduces (kernelMask_LDMC)

    @property
    def protocol(self) -> str:
        """The kernel's own name after its collective (``AGxLL_R``, ``LDMC``): its protocol field."""
        return self.name.split("_", 1)[1]


_AR, _AG, _RS = Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER

KERNELS = (
    Kernel("AllReduce_AGxLL_R", _AR, ll=True),
    Kernel("AllReduce_AGxLLMC_R", _AR, ll=True, stmc=True),
    Kernel("AllReduce_RSxLD_AGxST", _AR),
    Kernel("AllReduce_RSxLDMC_AGxSTMC", _AR, stmc=True, ldmc=True),
    Kernel("AllGather_LL", _AG, ll=True),
    Kernel("AllGather_LLMC", _AG, ll=True, stmc=True),
    Kernel("AllGather_ST", _AG),
    Kernel("AllGather_STMC", _AG, stmc=True),
    Kernel("ReduceScatter_LL", _RS, ll=True),
    Kernel("ReduceScatter_LD", _RS),
    Kernel("ReduceScatter_LDMC", _RS, stmc=True, ldmc=True),
)
"""The LSA kernels in NCCL's id order (``enum ncclSymkKernelId``), which breaks ties (``popFirstOneBit``)."""


@dataclass(frozen=True)
class Choice:
    """The symmetric kernel NCCL picks, its time (s, NCCL's estimate) and thread blocks."""

    kernel: Kernel
    time_s: float
    blocks: int


def softmin(x: float, ceiling: float, softness: float) -> float:
    """A smooth ``min(x, ceiling)`` (``softmin``, ``sym_kernels.cc``)."""
    return ceiling - softness * math.log1p((math.exp(ceiling / softness) - 1) * math.exp(-x / softness))


def softplus(x: float, softness: float) -> float:
    """A smooth ``max(0, x)`` (``softplus``, ``sym_kernels.cc``)."""
    z = x / softness
    return x if z >= 100.0 else softness * math.log1p(math.exp(z))


def model_us(bus_bytes: float, base_lat_us: float, n_sms: int, sm_bw: float, bus_multiplier: float,
             peak_bw: float) -> float:
    """``model()``: ``baseLat + softplus(busBytes / bw - 1, 1)`` µs, ``bw = softmin(nSMs · smBw ·
    busMultiplier, peakBw, smBw)`` in bytes/µs."""
    bw = softmin(n_sms * sm_bw * bus_multiplier, peak_bw, sm_bw)
    return base_lat_us + softplus(bus_bytes / bw - 1, 1)


def _bus(k: Kernel, n_bytes: int, n_ranks: int, blackwell: bool) -> tuple[float, float, int]:
    """(busBytes, busMultiplier, max blocks) of ``k`` on ``n_bytes`` (``queryModel_lsa``'s switch); the
    multimem kernels run on at most ``divUp(16 (sm < 100) or 32, nRanks)`` blocks."""
    nvls_blocks = -(-(32 if blackwell else 16) // n_ranks)
    if k.ll:
        return n_ranks * n_bytes * LL_BUS_FACTOR, (1.1 if k.stmc else 1.0), MAX_BLOCKS  # "To beat non-MC LL"
    if k.name == "AllReduce_RSxLD_AGxST":
        return float(2 * n_bytes * (n_ranks - 1) // n_ranks), 1.0, MAX_BLOCKS  # size_t arithmetic
    if k.name == "AllReduce_RSxLDMC_AGxSTMC":
        return float(n_bytes // n_ranks + n_bytes), float(n_ranks), nvls_blocks
    # AllGather_ST / STMC, ReduceScatter_LD / LDMC: "Wrong. Should be nRanks*nBytes but we want to beat
    # non-MC." for the multimem ones
    if k.stmc:
        return float((n_ranks - 1) * n_bytes), 0.55 * n_ranks, nvls_blocks
    return float((n_ranks - 1) * n_bytes), 1.0, MAX_BLOCKS


def _constants(k: Kernel, blackwell: bool) -> tuple[float, float, float]:
    """(baseLat µs, smBw, peakBw bytes/µs) of ``k``: ``cudaArch < 1000`` (Hopper and earlier) or not."""
    is_ar, is_ag = k.collective is _AR, k.collective is _AG
    if not blackwell:
        base = 4.5 if k.ll else 7.8
        sm_bw = (65 if is_ar else 44) * GIB_PER_S
        peak = (480 if k.name == "AllReduce_RSxLDMC_AGxSTMC" else 320) * GIB_PER_S
    else:
        base = (8.5 if is_ag else 11.0) if k.ll else (19.5 if is_ar else 13.0)
        sm_bw = 55 * GIB_PER_S
        peak = (1000 if k.name == "AllReduce_RSxLDMC_AGxSTMC" else 600) * GIB_PER_S
    return base, sm_bw, peak


def query(k: Kernel, n_bytes: int, n_ranks: int, blackwell: bool) -> tuple[float, int]:
    """``queryModel_lsa``: the time (µs) of ``k`` on ``n_bytes`` per rank, on the fewest blocks within
    2.5 % of its time on the most it may use, and those blocks."""
    bus_bytes, mult, max_blocks = _bus(k, n_bytes, n_ranks, blackwell)
    max_blocks = min(max_blocks, MAX_BLOCKS)
    base, sm_bw, peak = _constants(k, blackwell)
    best = model_us(bus_bytes, base, max_blocks, sm_bw, mult, peak)
    for bn in range(1, max_blocks):
        t = model_us(bus_bytes, base, bn, sm_bw, mult, peak)
        if t <= 1.025 * best:
            return t, bn
    return best, max_blocks


FLOAT_TYPES = ("fp32", "fp16", "bf16", "fp8e4m3", "fp8e5m2")
"""Types NCCL's symmetric all-reduce and reduce-scatter are built for: floats but fp64
(``ncclSymkImplemented``); an all-gather runs on any type."""

_MINMAX = ("sum", "min", "max")
LDMC_TYPES = {"fp32": ("sum",), "fp64": ("sum",), "fp16": _MINMAX, "bf16": _MINMAX, "fp8e4m3": _MINMAX,
              "fp8e5m2": _MINMAX}
"""Types (and reductions) a multimem load-reduce kernel takes (``hasLDMC`` in ``ncclSymkMask``; fp8 only
on compute capability 10.0 and later); the integer types are left out, as no symmetric reduction runs them."""


@dataclass(frozen=True)
class Call:
    """One nccl-tests call as NCCL's symmetric path sees it: the collective, nccl-tests' ``size`` (the
    all-reduce's buffer, the all-gather's output, the reduce-scatter's input), ranks, the GPUs' compute
    capability, whether NVLS (multimem) is usable (``comm->nvlsSupport``), the element type and reduction
    (canonical, ``None``: nccl-tests' default fp32 / sum), the calls a group holds (nccl-tests ``-a``) and
    whether one thread drives several GPUs (``-g`` above 1)."""

    collective: Collective
    size_bytes: int
    n_ranks: int
    compute_capability: int
    nvls: bool
    dtype: str | None = None
    redop: str | None = None
    group_calls: int = 1
    one_thread_multi_gpu: bool = False


def per_rank_bytes(call: Call) -> int:
    """NCCL's ``nElts · typeSize``: the all-reduce's buffer, one rank's part of the others."""
    return call.size_bytes if call.collective is _AR else call.size_bytes // call.n_ranks


def unsupported(call: Call, version: tuple[int, int, int]) -> str | None:
    """Why NCCL ``version`` runs ``call`` on no symmetric kernel whatever its size, else ``None``
    (``ncclSymkImplemented``; the reductions symmetric kernels take)."""
    if version < SYMK_FIRST:
        return f"NCCL {'.'.join(map(str, version))} has no symmetric kernels (from 2.27)"
    if call.collective not in (_AR, _AG, _RS):
        return f"NCCL has no symmetric kernel for {call.collective.value}"
    if call.collective is _AG or call.n_ranks < 2:
        return None if call.n_ranks >= 2 else "a group of one rank"
    dtype, redop = call.dtype or "fp32", call.redop or "sum"
    ops = ("sum", "avg") if version >= (2, 30, 3) else ("sum",)  # ncclDevSumPostDiv from v2.30.3
    if dtype not in FLOAT_TYPES or redop not in ops:
        return (f"NCCL's symmetric {call.collective.value} takes float types but fp64 and "
                f"{' or '.join(ops)} (ncclSymkImplemented), not {dtype} {redop}")
    return None


def candidates(call: Call, version: tuple[int, int, int]) -> list[Kernel]:
    """The kernels NCCL weighs for ``call`` (``ncclSymkMask``, ``ncclSymkPickKernel``): the collective's,
    the multimem ones only with NVLS (from v2.29.7 on more than 2 ranks) and a type it reduces, no LL
    kernel from 2 GiB of bus bytes or for a group of several calls, none at all from 64 GiB."""
    multimem = call.nvls and (call.n_ranks > 2 or version < (2, 29, 7))
    dtype, redop = call.dtype or "fp32", call.redop or "sum"
    ldmc = multimem and (redop in LDMC_TYPES.get(dtype, ()) or (redop == "avg" and version >= (2, 30, 3)))
    ldmc = ldmc and (not dtype.startswith("fp8") or call.compute_capability >= 100)
    bus = call.size_bytes
    if bus >= 32 * LL_BYTES_LIMIT:
        return []
    out = [k for k in KERNELS if k.collective is call.collective and (multimem or not k.stmc)
           and (ldmc or not k.ldmc)]
    if bus >= LL_BYTES_LIMIT or call.group_calls > 1:
        out = [k for k in out if not k.ll]
    return out


def pick(call: Call, version: tuple[int, int, int]) -> Choice | None:
    """The kernel NCCL ``version`` picks for ``call`` and its time per call, or ``None`` where it has none
    (:func:`unsupported`, no candidate). Each kernel's time (:func:`query`) weighed by 2.5 % per block,
    the least kept (``ncclSymkPickKernel``); from v2.28 on the group's calls summed, each rounded up to
    :data:`CELL_BYTES`, and the kernel's time shared among them. Whether NCCL then runs it or its legacy
    kernels is :func:`falls_back`'s."""
    if unsupported(call, version) is not None:
        return None
    n_bytes, calls = per_rank_bytes(call), 1
    if version >= (2, 28, 0):  # the group's calls on one kernel (v2.27 runs a lone call only: falls_back)
        calls = call.group_calls
        n_bytes = -(-n_bytes // CELL_BYTES) * CELL_BYTES * calls
    blackwell = call.compute_capability >= 100
    best: tuple[float, float, int, Kernel] | None = None  # (weighed µs, µs, blocks, kernel)
    for k in candidates(call, version):
        t, blocks = query(k, n_bytes, call.n_ranks, blackwell)
        if best is None or t * (1 + SM_PENALTY * blocks) < best[0]:  # ties: the lower kernel id
            best = (t * (1 + SM_PENALTY * blocks), t, blocks, k)
    return None if best is None else Choice(best[3], best[1] * 1e-6 / calls, best[2])


def falls_back(call: Call, choice: Choice, version: tuple[int, int, int], legacy_ll: bool) -> str | None:
    """Why NCCL ``version`` runs ``call`` on its legacy kernels although ``choice`` was picked, else
    ``None``. v2.27: a group of more than one collective (``ncclPrepareTasks``). v2.29.2-v2.29.3: an LL
    kernel where one thread drives several GPUs or the legacy model picks a protocol other than LL
    (``legacy_ll``: it picks LL) (``ncclMakeSymmetricTaskList``); from v2.29.7 registered buffers keep
    the symmetric kernel."""
    if version < (2, 28, 0) and call.group_calls > 1:
        return "NCCL 2.27 runs a symmetric kernel only for a group of one collective (nccl-tests -a 1)"
    if (2, 29, 0) <= version < (2, 29, 7) and choice.kernel.ll:
        if call.one_thread_multi_gpu:
            return (f"NCCL {'.'.join(map(str, version))} falls back from a symmetric LL kernel where one "
                    "thread drives several GPUs")
        if not legacy_ll:
            return (f"NCCL {'.'.join(map(str, version))} falls back from a symmetric LL kernel where its "
                    "legacy model picks another protocol")
    return None


#: The prefix of a symmetric kernel's symbol by release: ``ncclSymDevKernel_`` in v2.27.3-v2.27.7,
#: ``ncclSymkDevKernel_`` from v2.28.3 (``kernel_cname``, ``src/device/symmetric/generate.py``), each
#: ``<prefix><collective>_<kernel>`` and, for a reduction, ``_<op>_<type>`` (``sum_bf16``).
SYMBOL_PREFIXES = ("ncclSymDevKernel_", "ncclSymkDevKernel_")
_REDS = ("sum", "avg")  # all_reds, generate.py v2.27.3-v2.30.7 (avg from v2.30.3)
_TYS = ("f32", "f16", "bf16", "f8e4m3", "f8e5m2")  # all_tys, the same releases


def kernel_of(symbol: str) -> str | None:
    """The symmetric kernel a GPU kernel's symbol names (``AllReduce_RSxLD_AGxST`` of
    ``ncclSymkDevKernel_AllReduce_RSxLD_AGxST_sum_bf16(ncclSymkDevWorkArgs4K)``), ``None`` for any other
    symbol. Every kernel of ``generate.py``'s list is read, the TMA and network (GIN) ones of v2.29-v2.30
    too (``AllGather_RailRing_LsaSTMC``), though :data:`KERNELS` times the LSA ones alone."""
    name = str(symbol or "").split("(")[0]
    prefix = next((p for p in SYMBOL_PREFIXES if name.startswith(p)), None)
    if prefix is None:
        return None
    parts = name[len(prefix):].split("_")
    if len(parts) > 3 and parts[-2] in _REDS and parts[-1] in _TYS:
        parts = parts[:-2]
    if len(parts) < 2 or parts[0] not in ("AllReduce", "AllGather", "ReduceScatter"):
        return None
    return "_".join(parts)


def kernel_time_s(kernel_name: str, call: Call, version: tuple[int, int, int]) -> float | None:
    """NCCL ``version``'s model of ``call`` on the kernel named ``kernel_name`` (one that ran: no choice
    among kernels, :func:`pick`'s reading of the call's bytes and blocks), seconds; ``None`` for a kernel
    :data:`KERNELS` does not hold or one of another collective."""
    k = next((k for k in KERNELS if k.name == kernel_name), None)
    if k is None or k.collective is not call.collective:
        return None
    n_bytes = per_rank_bytes(call)
    if version >= (2, 28, 0):
        n_bytes = -(-n_bytes // CELL_BYTES) * CELL_BYTES
    t, _ = query(k, n_bytes, call.n_ranks, call.compute_capability >= 100)
    return t * 1e-6
