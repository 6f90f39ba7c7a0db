"""Which (collective, algorithm, protocol) triples NCCL prices at a release, and why it leaves one out on a
machine: the topology, the defaults of ``src/graph/tuning.cc`` (LL128 by GPU and path, the CUDA 11.8 build's
2-rank exception), ``NCCL_ALGO`` / ``NCCL_PROTO`` and ``NCCL_NVLS_ENABLE``. :mod:`zerocalc.nccl.model` prices
the triples these functions keep."""

from __future__ import annotations

from collections.abc import Mapping

from zerocalc.nccl.graph import Machine
from zerocalc.nccl.tables import Algorithm, Collective, Protocol, Release

A, P, C = Algorithm, Protocol, Collective


def applies(rel: Release, coll: Collective, a: Algorithm, p: Protocol) -> bool:
    """The (collective, algorithm, protocol) triples NCCL prices at this release."""
    if a not in rel.algorithms:
        return False
    if coll in (C.BROADCAST, C.REDUCE) and a != A.RING:
        return False
    if coll in (C.ALL_GATHER, C.REDUCE_SCATTER):
        # v2.18.x prices Ring alone for them (tuning.cc), v2.17.1 and v2.19.4 NVLS too
        allowed = {A.RING} | ({A.NVLS} if rel.era != 18 else set()) | (
            {A.PAT, A.COLLNET_DIRECT} if rel.era >= 20 else set())
        if a not in allowed:
            return False
    if coll == C.ALL_REDUCE and a == A.PAT:
        return False
    if a in (A.NVLS, A.NVLS_TREE, A.PAT, A.COLLNET_DIRECT, A.COLLNET_CHAIN) and p != P.SIMPLE:
        return False
    return True


def _ll128_gpus(rel: Release) -> tuple[int, ...]:
    """GPUs (compute capability) LL128 is on by default for, in ``tuning.cc``: v2.5.x-v2.6.4 sm70 alone;
    v2.7.3-v2.14.3 sm70 and sm80
    (``(minCompCap == 70 && maxCompCap == 70) || (… 80 …)``); v2.15.5 to v2.21.5 also sm90 (``switch
    (minCompCap)``; the CUDA 11.8 build's exception for 2-rank Ring all-reduce on sm90, v2.15.5 on:
    :func:`_cuda_11_8_pair`); v2.25.1 also Blackwell (100, 120). v2.27.3 on takes any from 70 (not called)."""
    if rel.era <= 6:
        return (70,)  # v2.5.x-v2.6.4: "only on Volta+NVLink" (minCompCap == 70 && maxCompCap == 70)
    if rel.era <= 14:
        return (70, 80)
    return (70, 80, 90) if rel.era < 25 else (70, 80, 90, 100, 120)


def _cuda_11_8_pair(rel: Release, m: Machine, coll: Collective, a: Algorithm) -> bool:
    """``tuning.cc``, v2.15.5 to v2.30.7: LL128's default leaves out a Ring all-reduce of 2 ranks on sm90 when
    NCCL was built with CUDA 11.8 (``CUDART_VERSION == 11080 && c == ncclFuncAllReduce && a ==
    NCCL_ALGO_RING && comm->nRanks == 2``, in its ``case 90``, from v2.27.3 in its ``minCompCap == 90``
    test); ``Machine.cuda_build`` is the build the run's version line states."""
    return (rel.era >= 15 and m.compute_capability == 90 and m.cuda_build == (11, 8)
            and coll == C.ALL_REDUCE and a == A.RING and m.n_ranks == 2)


def _algo_env_applies(rel: Release, coll: Collective, a: Algorithm) -> bool:
    """Whether ``NCCL_ALGO`` can leave ``a`` out for ``coll``: v2.5.x-v2.6.4 for any collective;
    v2.7.3-v2.16.5 only for all-reduce ("Only
    disable algo for Allreduce since others only have one"); v2.17.1 and v2.18.x not Ring for other
    collectives ("Never disable ring for non-allreduce operations"); later releases, as modelled, any."""
    if rel.era <= 6:
        return True  # v2.5.x-v2.6.4: ``algoEnable[a] == 0`` zeroes the algorithm for every collective
    if rel.era <= 16:
        return coll == C.ALL_REDUCE
    if rel.era in (17, 18):
        return coll == C.ALL_REDUCE or a != A.RING
    return True

#: Reasons :func:`disabled_reason` gives that are the user's environment, not the machine: a pair left out
#: for one of these still runs when a tuner plugin of API v1/v2 names it (see :mod:`zerocalc.nccl.tuner`).
CUDA_11_8_PAIR = "LL128 off by default for 2 ranks on sm90 under CUDA 11.8"
ENV_REASONS = ("NCCL_ALGO", "NCCL_PROTO", "LL128 off by default on this path",
               "LL128 off by default on this GPU", CUDA_11_8_PAIR)
NVLS_OFF = "NCCL_NVLS_ENABLE=0"


def disabled_reason(rel: Release, m: Machine, coll: Collective, a: Algorithm, p: Protocol,
              algo_enable: Mapping[Collective, set[Algorithm]] | None,
              proto_enable: Mapping[Collective, set[Protocol]] | None, nvls_enable: bool = True) -> str:
    """Why NCCL leaves the pair out ('' when it does not): topology, defaults, NCCL_ALGO/NCCL_PROTO,
    ``NCCL_NVLS_ENABLE=0`` (``nvlsSupport`` 0: no NVLS / NVLS Tree, ``src/transport/nvls.cc``)."""
    if a in (A.NVLS, A.NVLS_TREE) and not nvls_enable:
        return NVLS_OFF
    if proto_enable is not None and p not in proto_enable[coll]:
        return "NCCL_PROTO"
    if algo_enable is not None and a not in algo_enable[coll] and _algo_env_applies(rel, coll, a):
        return "NCCL_ALGO"
    if p == P.LL128 and proto_enable is None:
        # LL128 by default only over NVLink inside the node and a NIC near the GPU (tuning.cc)
        if not m.ll128_path_ok or m.compute_capability < 70:
            return "LL128 off by default on this path"
        if rel.era < 27 and m.compute_capability not in _ll128_gpus(rel):
            return "LL128 off by default on this GPU"
        if _cuda_11_8_pair(rel, m, coll, a):
            return CUDA_11_8_PAIR
    if a == A.NVLS_TREE and m.n_nodes == 1:
        return "NVLS Tree needs several nodes"
    if a in (A.NVLS, A.NVLS_TREE) and not m.nvls:
        return "no NVLink SHARP (NVSwitch 3 and sm90 or later)"
    if a == A.NVLS and rel.era <= 17 and m.n_nodes > 1:
        return "NVLS on one node only before NCCL 2.18"  # v2.17.1 src/transport/nvls.cc: nNodes > 1 → none
    if a in (A.NVLS, A.NVLS_TREE) and coll != C.ALL_REDUCE and m.ppn > rel.max_nvls_arity:
        return "more local ranks than NVLS arity"
    if a == A.NVLS and coll == C.ALL_GATHER and rel.era < 19:
        # before 2.19 an all-gather runs on int8 (info.h: datatype = ncclInt8), which NCCL_NVLS_SUPPORTS
        # leaves out (v2.17.1, v2.18.3 enqueue.cc); 2.19 exempts all-gather from that test
        return "NVLS all-gather from NCCL 2.19 on"
    if a == A.NVLS and coll in (C.ALL_GATHER, C.REDUCE_SCATTER) and m.n_nodes > 1 and rel.era == 19:
        # enqueue.cc, v2.19.4: "now we only support single-node NVLS allgather and reducescatter" (CollNet
        # or not; from 2.21 tuning.cc zeroes them across nodes itself: _bandwidth_GBps)
        return "NVLS all-gather / reduce-scatter on one node only"
    if a in (A.COLLNET_DIRECT, A.COLLNET_CHAIN) and not m.collnet:
        return "no CollNet (InfiniBand SHARP)"
    if a == A.NVLS and m.n_nodes > 1 and not m.collnet:
        return "NVLS across nodes needs CollNet"
    if a == A.COLLNET_DIRECT and not m.nvswitch and rel.era >= 14:  # the NVSwitch test arrives in v2.14.3
        return "CollNet Direct needs NVSwitch"
    if a in (A.COLLNET_DIRECT, A.COLLNET_CHAIN) and m.ppn > 8:
        return "CollNet with more than 8 local GPUs"
    if a == A.PAT and (m.n_nodes != m.n_ranks or m.compute_capability < 60):
        return "PAT needs one GPU per node"
    return ""
