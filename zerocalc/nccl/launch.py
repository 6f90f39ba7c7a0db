"""The channels and threads NCCL launches for one call: the loop after its choice (``src/enqueue.cc``).

NCCL prices a pair with all of its graph's channels (``ncclTopoTuneModel``, :mod:`zerocalc.nccl.model`)
and chooses with that time; it then launches the chosen pair on fewer channels when the call is small.
After the choice, ``getAlgoInfo`` (v2.9.9 to v2.19.4), ``getChannnelThreadInfo`` (v2.20 to v2.21) or
``topoGetAlgoInfo`` (v2.22 on) start from the communicator's channels ``nc`` and the pair's thread count
``nt = comm->maxThreads[algorithm][protocol]`` and, for Ring and Tree (any algorithm but CollNet Direct,
NVLS and NVLS Tree)::

    while (nBytes < nc * nt * threadThreshold) { if (nc >= 2) nc--; else break; }
    while (nBytes < nc * nt * threadThreshold) { if (nt % 128 == 0) nt /= 2; else break; }

(before v2.20 one loop: ``nc--`` while ``nc >= 2``, then ``nt /= 2`` while ``nt % 128 == 0``: the same
counts). ``nBytes`` is ``ncclFuncMaxSendRecvCount`` × the type's size: the whole buffer of an all-reduce,
the gathered buffer of an all-gather or reduce-scatter (nccl-tests' ``size``). The constants, the same at
every release from v2.8.3 to v2.30.7 (``src/include/device.h``, ``devcomm.h`` before 2.19;
``src/graph/tuning.cc``):

- ``threadThresholds``: ``NCCL_LL_THREAD_THRESHOLD`` 8, ``NCCL_LL128_THREAD_THRESHOLD`` 8,
  ``NCCL_SIMPLE_THREAD_THRESHOLD`` 64 for every algorithm, Ring/LL's × ``nRanks``, CollNet's Simple 512
  (INFO ``threadThresholds 8/8/64 | 128/8/64 | …`` on 16 ranks, aws/aws-ofi-nccl issue 65);
  ``NCCL_THREAD_THRESHOLDS`` ("Tree LL, LL128, Simple, Ring LL, LL128, Simple", six numbers, a negative
  one keeps the default) replaces Tree's and Ring's;
- ``maxThreads``: LL ``NCCL_LL_MAX_NTHREADS`` 512, LL128 ``NCCL_LL128_MAX_NTHREADS`` 640, Simple
  ``NCCL_SIMPLE_MAX_NTHREADS`` 512, Ring/Simple 256 when the ring graph's ``bwIntra × nChannels`` is at most
  ``PCI_BW`` (12 GB/s, ``topo.h``); ``NCCL_NTHREADS`` (LL and Simple; a multiple of 32, 64 at least, the
  protocol's maximum at most) and ``NCCL_LL128_NTHREADS`` (160 to 640) replace them.

``nc`` starts from ``comm->nChannels`` (v2.9.9 to v2.19.4 and from v2.22.3, where NCCL_MAX_NCHANNELS has
already cut it; from v2.21.5 on it is raised to the NVLS channels on NVLS machines) or
``comm->collChannels`` (v2.20.3 to v2.21.5): :class:`zerocalc.nccl.channels.CommChannels`.

From v2.22.3 the planner (``scheduleCollTasksToPlan``) then spreads a call's traffic over at most those
``nc`` channels in cells of ``MinTrafficPerChannel`` bytes of traffic, so a call of ``T`` bytes of traffic
runs on ``min(nc, ceil(T / cell))`` channels: traffic = bytes × ``ncclFuncTrafficPerByte`` (2 for
all-reduce, 1 for broadcast and reduce; all-gather and reduce-scatter: the gathered buffer), × 4 for LL
from v2.26.2; the cell is 512 bytes in v2.22.3 (16-byte cells, a channel's share at least 512), 16 KiB from
v2.23.4, 32 KiB from v2.29.2. (v2.20-v2.21 split a call's count by an alignment, 4 KiB a channel for LL
and Simple and 9.6 KiB for LL128 at full threads, below the loop's own 4-32 KiB: not modelled.)

What the launch changes in the call's time (:func:`channel_share`): the bandwidth term runs on the ``nc``
of the communicator's ``C`` collective channels it launches, ``min(nc, C) / C`` of them (the graph's
channels are duplicated into the communicator's by ``ncclTopoPostset``, each copy carrying an equal share),
priced by NCCL's own bandwidth formula on that share of the graph's channels: per-channel figures scale,
caps on the whole (``llMaxBw``) stay (:meth:`zerocalc.nccl.model.Tuning.time_s`). Under
``NCCL_MAX_NCHANNELS`` the cut's own share multiplies in (:meth:`~zerocalc.nccl.model.Tuning.capped_scale`).
Ring and Tree only (:data:`TIMED`); a tuner's channel count replaces the loop's (priced as before). The
threads are reported, not timed: NCCL's per-channel bandwidths are figures for full thread blocks, and NCCL
halves the threads only once the call runs on one channel, where its bytes per thread are below the
threshold and the latency term rules.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from zerocalc.nccl.tables import Algorithm, Collective, Protocol

A, P, C = Algorithm, Protocol, Collective

WARP_SIZE = 32
LL_MAX_NTHREADS = 512
LL128_MAX_NTHREADS = 640
SIMPLE_MAX_NTHREADS = 512
MAX_NTHREADS = 640
PCI_BW_GBPS = 12.0
THREAD_THRESHOLD = {P.LL: 8, P.LL128: 8, P.SIMPLE: 64}
COLLNET_THREAD_THRESHOLD = 512

#: the algorithms whose channels the loop reduces and whose bandwidth the model prices on the graph's
#: channels that the communicator duplicates (Ring, Tree); CollNet Chain and PAT run the same loop
#: but on channels of their own (reported, not timed)
TIMED = (A.RING, A.TREE)


@dataclass(frozen=True)
class LaunchEnv:
    """What a run's environment sets of the launch (``None``: NCCL's default): ``NCCL_THREAD_THRESHOLDS``'s
    six numbers (Tree LL/LL128/Simple, Ring LL/LL128/Simple; a negative one keeps the default),
    ``NCCL_NTHREADS`` (LL and Simple) and ``NCCL_LL128_NTHREADS``."""

    thresholds: tuple[int, ...] | None = None
    nthreads: int | None = None
    ll128_nthreads: int | None = None


def parse_thresholds(text: str) -> tuple[int, ...]:
    """``NCCL_THREAD_THRESHOLDS`` as ``tuning.cc`` reads it (``sscanf(str, "%ld %ld %ld %ld %ld %ld")``):
    the leading whole numbers, up to six; those it does not give stay -2 (the default kept)."""
    out: list[int] = []
    for word in text.split()[:6]:
        m = re.match(r"[+-]?\d+", word)
        if m is None:
            break
        out.append(int(m[0]))
        if m.end() < len(word):  # "%ld" stops at the first character that is not the number's
            break
    return tuple(out + [-2] * (6 - len(out)))


@dataclass(frozen=True)
class Launch:
    """The channels of one call (``info->nMaxChannels``; from v2.22.3 the planner's count), its threads
    after the loop (before the sync warps each release adds for Simple, and v2.23.4 on's full blocks for
    Tree and PAT), and the channels the loop started from."""

    channels: int
    threads: int
    start: int

    @property
    def reduced(self) -> bool:
        return self.channels < self.start


def thread_threshold(algo: Algorithm, proto: Protocol, n_ranks: int,
                     env: tuple[int, ...] | None = None) -> int:
    """``comm->threadThresholds[algo][proto]`` (module docstring); ``env``: ``NCCL_THREAD_THRESHOLDS``'s
    six numbers (Tree LL/LL128/Simple, Ring LL/LL128/Simple), a negative one keeping the default."""
    if algo in (A.COLLNET_DIRECT, A.COLLNET_CHAIN) and proto == P.SIMPLE:
        return COLLNET_THREAD_THRESHOLD
    t = THREAD_THRESHOLD[proto] * (n_ranks if (algo == A.RING and proto == P.LL) else 1)
    if env is not None and algo in (A.TREE, A.RING):
        v = env[(0 if algo == A.TREE else 3) + list(P).index(proto)]
        if v >= 0:
            t = v
    return t


def max_threads(algo: Algorithm, proto: Protocol, ring_bw_GBps: float, *, nthreads: int | None = None,
                ll128_nthreads: int | None = None) -> int:
    """``comm->maxThreads[algo][proto]`` (``tuning.cc``): ``ring_bw_GBps`` is the ring graph's
    ``bwIntra × nChannels``; ``nthreads`` / ``ll128_nthreads``: ``NCCL_NTHREADS`` /
    ``NCCL_LL128_NTHREADS``."""
    if proto == P.LL128:
        return _nthreads(ll128_nthreads, LL128_MAX_NTHREADS // 4, LL128_MAX_NTHREADS, LL128_MAX_NTHREADS)
    if proto == P.LL:
        return _nthreads(nthreads, 2 * WARP_SIZE, LL_MAX_NTHREADS, LL_MAX_NTHREADS)
    if algo == A.RING:
        default = 256 if ring_bw_GBps <= PCI_BW_GBPS else SIMPLE_MAX_NTHREADS
        return _nthreads(nthreads, 2 * WARP_SIZE, SIMPLE_MAX_NTHREADS, default)
    if algo == A.TREE:
        return _nthreads(nthreads, 2 * WARP_SIZE, SIMPLE_MAX_NTHREADS, SIMPLE_MAX_NTHREADS)
    return 0 if algo == A.PAT else MAX_NTHREADS  # PAT: never set (0), so the loop keeps its channels


def _nthreads(env: int | None, lo: int, hi: int, default: int) -> int:
    """``getNthreads``: the environment's count when positive (the maximum when not a multiple of 32,
    clamped to [lo, hi]), else the default."""
    if env is None or env <= 0:
        return default
    if env % WARP_SIZE:
        return hi
    return min(hi, max(lo, env))


def cell_bytes(version: tuple[int, int, int]) -> int:
    """``MinTrafficPerChannel`` of ``scheduleCollTasksToPlan`` (0 before v2.22, which has no planner)."""
    if version < (2, 22, 0):
        return 0
    if version < (2, 23, 0):
        return 512
    return 16 << 10 if version < (2, 29, 0) else 32 << 10


def traffic_bytes(coll: Collective, proto: Protocol, n_bytes: int, version: tuple[int, int, int]) -> int:
    """A call's ``trafficBytes`` (v2.22.3 on): ``count × size × ncclFuncTrafficPerByte``, × 4 for LL from
    v2.26.2; ``n_bytes`` is NCCL's ``nBytes`` (all-gather / reduce-scatter: the gathered buffer, which is
    ``count × size × nRanks``)."""
    t = 2 * n_bytes if coll == C.ALL_REDUCE else n_bytes
    return 4 * t if (proto == P.LL and version >= (2, 26, 0)) else t


def launch(coll: Collective, algo: Algorithm, proto: Protocol, n_bytes: int, n_ranks: int, start: int,
           version: tuple[int, int, int], *, ring_bw_GBps: float = math.inf,
           thresholds: tuple[int, ...] | None = None, nthreads: int | None = None,
           ll128_nthreads: int | None = None) -> Launch:
    """The channels and threads NCCL ``version`` launches a call of ``n_bytes`` on (module docstring):
    ``start`` is the count the loop starts from (``comm->nChannels`` or ``collChannels``); CollNet Direct,
    NVLS and NVLS Tree keep it (their own rules are not modelled here)."""
    nt = max_threads(algo, proto, ring_bw_GBps, nthreads=nthreads, ll128_nthreads=ll128_nthreads)
    nc = start
    if algo in (A.COLLNET_DIRECT, A.NVLS, A.NVLS_TREE):
        return Launch(nc, nt, start)
    threshold = thread_threshold(algo, proto, n_ranks, thresholds)
    while n_bytes < nc * nt * threshold and nc >= 2:
        nc -= 1
    while n_bytes < nc * nt * threshold and nt % 128 == 0:
        nt //= 2
    cell = cell_bytes(version)
    if cell:
        nc = max(1, min(nc, math.ceil(traffic_bytes(coll, proto, n_bytes, version) / cell)))
    return Launch(nc, nt, start)


def channel_share(run: Launch, coll_channels: int) -> float:
    """The share of its channels' bandwidth a launch runs on: ``min(nc, C) / C``, ``C`` the communicator's
    collective channels (``collChannels``, after any ``NCCL_MAX_NCHANNELS`` cut, whose own share
    :meth:`zerocalc.nccl.model.Tuning.capped_scale` multiplies in)."""
    c = max(coll_channels, 1)
    return min(run.channels, c) / c
