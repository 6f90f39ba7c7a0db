"""The host's part of an nccl-tests call when one thread drives several GPUs (``-g G``): the thread's floor
per call, the stagger of its kernel launches, the work it writes per channel before NCCL 2.22 and the
point-to-point tasks it schedules, with the figures they rest on.

Pure: numbers of GPUs, ranks, channels and launch-mode flags in, seconds and notes out.
:func:`zerocalc.validate.sweep.compare_sweep` prices a ``-g G`` sweep with them, and
:mod:`zerocalc.validate.rccl` reads :func:`default_launch_mode` for rccl-tests.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from zerocalc.nccl.p2p import P2pOp

HOST_US_PER_GPU = 3.96
"""Host time (µs) one nccl-tests thread spends per GPU it drives, per collective: the least-squares slope of
the all-reduce times posted in NVIDIA/nccl-tests issue 123 (DGX-A100, ``NCCL_ALGO=Ring
NCCL_MAX_NCHANNELS=1 all_reduce_perf -b 8 -e 128 -g G``, G = 2…8: 10, 13.76, 16.88, 20.8, 25.2, 29.5,
33.7 µs), against which NCCL's own model of that ring rises by 2 × 0.6 µs per GPU (Ring/LL NVLink hop,
``tuning.cc``). See :func:`host_floor_s`."""

HOST_US_PER_CHANNEL = 0.206
"""Host time (µs) one nccl-tests thread spends per GPU it drives and per channel a collective runs on beyond
the first, before NCCL 2.22 (``-g G``): until v2.21.5 a collective's work is one 512-byte ``ncclWork`` per
channel it is launched on, which the host writes into that communicator's work FIFO in pinned host memory
before the launch (``src/enqueue.cc``: v2.8-v2.12 ``ncclSaveKernel`` → ``getNextOp`` per channel, v2.13-v2.21
``uploadWork``'s loop over the plan's channels, ``NCCL_WORK_SIZE`` 512 in ``device.h``); from v2.22.3 the
call's work is one ``ncclDevWorkColl`` in the kernel's arguments (``ncclDevWorkStorageTypeArgs``), whatever
its channels. The issue-123 figure (:data:`HOST_US_PER_GPU`) is of one channel (``NCCL_MAX_NCHANNELS=1``).
The figure: the least-squares slope, one intercept per sweep, of the out-of-place time against the channels
launched less one (:mod:`zerocalc.nccl.launch`'s loop: 1 to 16 of 24 on an HGX A100, 1 to 8 of 12 on a
DGX-1), over the rows of 8 KiB and up that NCCL launches on fewer than all channels, of seven ``-g 8`` sweeps
of three hosts (``tests/data/traces``): the five SuperBench collectives (8 A100-SXM4-40GB, nccl-tests before
v2.13), the DGX-1 V100 all-reduce (likewise) and the A100-SXM4-80GB all-reduce at NCCL 2.19.3: 1.646 µs per
channel for 8 GPUs, 0.206 µs per GPU (each sweep alone 0.165-0.268). See :func:`host_channels_s`."""

ONE_GPU_US_PER_CHANNEL = 1.37
"""Time (µs) a collective takes per channel it is launched on beyond the first, up to NCCL 2.12, where each
GPU has a thread of its own (``-g 1``: ``mpirun -np N``, ``-t N``). Up to v2.12.12 each channel has a work
FIFO of its own in pinned host memory (``src/channel.cc``: ``ncclCudaHostCalloc(&channel->workFifo,
NCCL_MAX_OPS)``), into which the host writes the call's ``ncclWork`` channel by channel (``src/enqueue.cc``
``getNextOp``) and from which each channel's block reads it (NVIDIA/nccl issue 868, v2.12.12: the device
FIFO "is the Host one"); v2.13.4 replaced them with one FIFO heap per communicator, uploaded once per
launch plan (``uploadWork``). The figure: the least-squares slope, one intercept per sweep, of the
out-of-place time against the channels launched less one, over the rows on which
:mod:`zerocalc.nccl.launch`'s loop leaves each launched channel the same bytes (from ``nRanks`` × 8 × 512
bytes, Ring/LL's threshold, to the last size launched on fewer than all channels: 32-512 KiB on 1-16 of 24
channels of 8 A100, 16-128 KiB on 1-8 of 12 of 4 V100 of a DGX-1), so that NCCL's own time is one time per
sweep, of the two one-node ``-g 1`` sweeps bundled from before 2.13 (``tests/data/traces``: ABCI's 8
A100-SXM4-40GB and 4 V100-SXM2-16GB, NCCL 2.8.4, one process per GPU): 1.40 and 1.18 µs each, 1.37
together. The multi-node ``-g 1`` runs of 2.9.9 (2 p4d) and 2.12.12 (16 CoreWeave A100 nodes) rise by
1.4-1.8 µs per channel over NCCL's time on 2 to 8 channels. Later releases do not show it: NCCL 2.30.7 on 8
A100-SXM4-80GB (``mpirun -np 8``) keeps one time from 32 to 512 KiB, 1 to 16 channels (27.6-31.9 µs), and
2 p5 nodes at 2.20.3 take within 10% of 2.22.3's in-place times from 128 KiB to 32 MiB, all on 16
channels, where 15 × 1.37 = 21 µs would be 5-20% of them (bundled). A
thread driving 8 GPUs pays 1.65 µs per channel up to 2.21 (8 × :data:`HOST_US_PER_CHANNEL`, SuperBench's
and the DGX-1's runs at 2.12.12 among those it is fitted on), not eight times this figure: which of host
and kernel bears the cost these sweeps do not tell, and a ``-g G`` sweep keeps the figure it was fitted
with. See :func:`one_gpu_channels_s`."""

HOST_US_PER_CALL = 3.3
"""Host time (µs) one nccl-tests thread spends per call whatever the number G of GPUs it drives (``-g G``),
on top of G × :data:`HOST_US_PER_GPU`: the group's own work once per call (``src/group.cc``
``ncclGroupEndInternal`` / ``groupLaunch`` around the per-communicator ``doLaunches`` loop) and nccl-tests'
own loop around it (``src/common.cu`` ``startColl``: ``ncclGroupStart``, the G calls, ``ncclGroupEnd``).
One figure fitted across hosts, not a host's own: each run's floor, the least over its collectives of the
median out-of-place time of its sizes from 1 B to 8 KiB, less G × 3.96 µs, for the fourteen one-host runs
of ``-g 2`` to ``-g 8`` on NVIDIA GPUs bundled with sizes that small (``tests/data/traces``: 2 H100
bare metal 5.71, 2 RTX 2080 Ti 2.02, 2 V100-PCIe 3.30, 2 RTX 4090 in Docker 2.36 and under Kubernetes
4.32, 4 RTX 4090 4.74, 4 RTX 5090 -0.03, 4 H100 in a VM 8.45, 8 A100 at OCI 0.34, SuperBench's 8 A100
2.99, 8 A100-80GB at NCCL 2.19.3 4.89 and another at 2.30.7 7.49, 8 H100 at 2.26.2 3.20, a DGX-1 V100
16.93) and the issue-123 DGX-A100 (the mean of its seven times less G × 3.96, 1.61): their median, 3.30.
That the floor is the host's and not NCCL's shows where one host ran several collectives: SuperBench's
five ``-g 8`` collectives all take 34.7-35.6 µs at their smallest sizes where NCCL prices them at 4.1
(broadcast, reduce) to 10.2 µs (all-reduce). Hosts differ by their CPU and launch path (a VM's, a
container's): the fifteen figures run from -0.03 to 16.93 µs, none tied to an NCCL release or a GPU
generation (the 8 H100 run's 3.20 sits among the A100 runs'). See :func:`host_floor_s`."""

LAUNCH_STAGGER_US_PER_GPU = 2.76
"""Time (µs) by which one nccl-tests thread's launch of each further GPU's kernel delays that GPU's start
(``-g G``): the same issue-123 times less NCCL's own model of each run, per GPU. NCCL prices that ring
(Ring/LL, one channel, G ranks on NVLink) at a base latency plus 2 (G - 1) hops of 0.6 µs (``tuning.cc``:
``baseLat`` + ``nsteps`` × ``hwLat[NVLINK][RING][LL]``, 2.19 to 2.30), so of the 3.96 µs the posted times
rise per GPU, 2 × 0.6 = 1.2 µs are NCCL's ring and 3.96 - 1.2 = 2.76 µs the launch. See
:func:`launch_stagger_s`."""

P2P_HOST_US_PER_TASK = 0.43
"""Host time (µs) one nccl-tests thread spends per point-to-point task beyond the one task per GPU of a
collective (``-g G``, default launch mode): each ``ncclSend`` / ``ncclRecv`` a test issues is one task
(``ncclEnqueueCheck`` → ``p2pTaskAppend``, one per peer, ``ncclAlltoAll`` / ``ncclGather`` /
``ncclScatter`` of NCCL 2.28+ likewise, v2.30.7 ``src/enqueue.cc``), which the thread appends and
``ncclLaunchPrepare`` schedules into the plan of its communicator before any of the G kernels is launched
(``src/group.cc`` ``doLaunches``: every communicator's ``ncclLaunchPrepare``, then the launches), so a
call with more tasks than GPUs costs the thread that much more host time (:func:`p2p_tasks`). The figure:
the least-squares slope through the origin of two hosts' ``alltoall_perf -g G`` floors over their own
collectives', against the extra tasks, each floor the median out-of-place time of the sizes from 1 B to
4 KiB (``tests/data/traces``): 8 A100-SXM4-40GB under one thread (microsoft/superbenchmark's logs),
alltoall 87.015 µs over the five collectives' 34.94 µs, 8 × 2 × 8 - 8 = 120 extra tasks; 2 GeForce RTX
2080 Ti (``-g 2``), 13.0 µs over 11.33 µs, 2 × 2 × 2 - 2 = 6 extra: (52.075 × 120 + 1.67 × 6) /
(120² + 6²) = 0.434 µs (each host alone 0.434 and 0.278 µs).
See :func:`p2p_host_floor_s`."""
GROUP_LAUNCH_BEFORE = (2, 9)
"""The first NCCL release whose default launch of a process's several ranks is one kernel launch per GPU in
turn (``NCCL_LAUNCH_MODE`` PARALLEL): up to v2.8.4 a communicator whose process holds more than one of its
ranks (``intraRanks > 1``, ranks of one host and one pid, ``src/init.cc``) defaults to GROUP (v2.8.4
``comm->launchMode = ncclComm::GROUP``, PARALLEL only when ``intraRanks == 1`` or asked for), in which
the last of the process's ranks to check in launches every rank's kernel with one
``cudaLaunchCooperativeKernelMultiDevice`` call (``src/enqueue.cc`` ``ncclBarrierEnqueue`` →
``ncclLaunchCooperativeKernelMultiDevice``, flags ``NoPreSync | NoPostSync``, on GPUs that report
``cudaDevAttrCooperativeMultiDeviceLaunch``); v2.9.9 defaults to PARALLEL (GROUP only when asked for)."""


def group_launch(version: tuple[int, ...] | None) -> bool:
    """NCCL ``version`` launches a ``-g G`` process's G kernels together by default (before
    :data:`GROUP_LAUNCH_BEFORE`), so no GPU's start waits on the launch of the others; ``None``: not
    known, priced as the later releases."""
    return version is not None and tuple(version[:2]) < GROUP_LAUNCH_BEFORE


def default_launch_mode(gpus_per_thread: int | None, agg_iters: int | None, graph: int | None) -> bool:
    """Several GPUs per thread in nccl-tests' default launch mode: ``-g G`` with G > 1, no ``-a A`` above 1,
    no ``-G`` (see :func:`host_floor_s`)."""
    return bool(gpus_per_thread) and gpus_per_thread > 1 and (agg_iters or 1) <= 1 and (graph or 0) <= 0


def host_floor_s(gpus_per_thread: int | None, agg_iters: int | None = None,
                 graph: int | None = None) -> float | None:
    """The least time per collective of a thread that drives ``gpus_per_thread`` GPUs (nccl-tests ``-g``),
    :data:`HOST_US_PER_CALL` + ``gpus_per_thread`` × :data:`HOST_US_PER_GPU`; ``None`` for one GPU per
    thread, when unknown, and
    outside nccl-tests' default launch mode (``agg_iters`` above 1 or ``graph`` above 0, below).

    nccl-tests (``src/common.cu`` ``BenchTime``) times ``iters`` calls issued back to back and divides by
    ``iters``, each call one ``ncclGroupStart`` / one collective per GPU / ``ncclGroupEnd``; NCCL prepares
    and launches the G kernels one after the other from that thread (``src/group.cc`` ``doLaunches``: per
    communicator ``cudaSetDevice`` and ``ncclLaunchPrepare``, then per communicator the kernel launch), so
    no call is shorter than the thread's group of G launches: a call's part,
    :data:`HOST_US_PER_CALL`, and each GPU's, :data:`HOST_US_PER_GPU`. Each posted issue-123 time is above
    G × 3.96 µs, and within 0.8-1.25× of the floor with the call's part added (that host is faster per call
    than the median of the hosts the part is fitted on, by 1.7 µs). Under the call's own time,
    :func:`launch_stagger_s` plus NCCL's, this floor binds where NCCL prices a call under
    G × 1.2 + 6.06 µs. nccl-tests' other launch modes
    change the host's part: ``-a A`` puts A calls in one group (one launch per GPU for all A), ``-G``
    replays the iterations as CUDA graphs (no NCCL launch on the host at all); the file's header line
    prints both (``agg iters: A``, ``graph: G``), and under either neither launch term is priced (the
    issue-123 figure is of the default mode). Blocking launches (``-z``) are not printed and are taken
    to be the default. A call priced by a fitted calibration (``zerocalc fit --out``) is not floored: its
    α-β, fitted to the host's own times, holds the host's part."""
    if not default_launch_mode(gpus_per_thread, agg_iters, graph):
        return None
    return (HOST_US_PER_CALL + gpus_per_thread * HOST_US_PER_GPU) * 1e-6


def host_channels_s(gpus_per_thread: int | None, channels: int | None, era: int,
                    agg_iters: int | None = None, graph: int | None = None) -> float:
    """What a collective launched on ``channels`` channels adds to the thread's floor (:func:`host_floor_s`)
    before NCCL 2.22 (``era`` below 22): G × (channels - 1) × :data:`HOST_US_PER_CHANNEL`, the host writing
    one work struct per channel and GPU; 0 from 2.22 (one work struct per call), where the channels are not
    known (``None``: a calibrated call, whose fitted α-β holds the host's time), and wherever
    :func:`host_floor_s` is ``None``."""
    if era >= 22 or not channels or not default_launch_mode(gpus_per_thread, agg_iters, graph):
        return 0.0
    return gpus_per_thread * (channels - 1) * HOST_US_PER_CHANNEL * 1e-6


def one_gpu_channels_s(gpus_per_thread: int | None, channels: int | None, version: tuple[int, ...] | None,
                       agg_iters: int | None = None, graph: int | None = None) -> float:
    """What a collective launched on ``channels`` channels adds to NCCL's time up to NCCL 2.12 (``version``
    below 2.13; ``None``: not known, nothing) where each GPU has a thread of its own (``gpus_per_thread``
    1): (channels - 1) × :data:`ONE_GPU_US_PER_CHANNEL`; 0 from 2.13 (whose formulas share 2.12's
    ``era``), where the channels are not known (``None``: a calibrated call), for ``-g G`` above 1
    (:func:`host_channels_s` prices it there) or not stated, and outside nccl-tests' default launch mode
    (``-a`` above 1, ``-G``: the figure is of the default mode)."""
    if (version is None or tuple(version[:2]) >= (2, 13) or not channels or gpus_per_thread != 1
            or (agg_iters or 1) > 1 or (graph or 0) > 0):
        return 0.0
    return (channels - 1) * ONE_GPU_US_PER_CHANNEL * 1e-6


def one_gpu_channels_note(rows: Sequence[Mapping]) -> str:
    """What :func:`one_gpu_channels_s` added to a sweep's rows (``channel_work_s``), or "" where nothing."""
    added = [r for r in rows if (r.get("channel_work_s") or 0) > 0]
    if not added:
        return ""
    most = max(added, key=lambda r: r["channel_work_s"])
    n = most["launch_channels"]
    return (f"up to NCCL 2.12 each channel a collective runs on has a work FIFO of its own in pinned host "
            f"memory (src/channel.cc, NVIDIA/nccl issue 868): with one GPU per thread each channel beyond "
            f"the first adds "
            f"{ONE_GPU_US_PER_CHANNEL:g} µs to NCCL's time, {n - 1} × {ONE_GPU_US_PER_CHANNEL:g} = "
            f"{most['channel_work_s'] * 1e6:.1f} µs on {n} channels (fitted to two one-node sweeps of NCCL "
            f"2.8.4, one process per GPU)")


def channels_note(gpus_per_thread: int | None, era: int, rows: Sequence[Mapping],
                  agg_iters: int | None = None, graph: int | None = None) -> str:
    """What :func:`host_channels_s` did to a sweep's floor, or "" where it added nothing."""
    most = max((r.get("launch_channels") or 0 for r in rows), default=0)
    if host_channels_s(gpus_per_thread, most, era, agg_iters, graph) <= 0:
        return ""
    g = gpus_per_thread
    return (f"before NCCL 2.22 a collective's work is one 512-byte struct per channel it runs on, which the "
            f"host writes for each GPU before the launch (src/enqueue.cc): the thread's floor grows by {g} × "
            f"{HOST_US_PER_CHANNEL:g} µs per channel beyond the first, {g} × {most - 1} × "
            f"{HOST_US_PER_CHANNEL:g} = {host_channels_s(g, most, era, agg_iters, graph) * 1e6:.1f} µs on "
            f"{most} channels (fitted to seven -g 8 sweeps of three hosts)")


def p2p_tasks(op: P2pOp, n_ranks: int, gpus_per_thread: int) -> int:
    """The sends and receives (NCCL tasks) the busiest nccl-tests thread issues per call of ``op`` for the
    ``gpus_per_thread`` GPUs it drives among ``n_ranks`` (``src/<test>.cu`` ``RunColl``, wrapped for ``-g``
    in one group by ``common.cu``): ``alltoall_perf`` a send and a receive to every rank, itself included
    (2n per GPU); ``sendrecv_perf`` one of each (2); ``gather_perf`` / ``scatter_perf`` one per GPU and n
    more on the root's GPU (the first thread's, root 0); ``hypercube_perf`` a send and a receive per
    dimension (2 log2 n, its groups nested in the thread's one)."""
    g, n = gpus_per_thread, n_ranks
    if op == P2pOp.ALL_TO_ALL:
        return g * 2 * n
    if op == P2pOp.SENDRECV:
        return g * 2
    if op in (P2pOp.GATHER, P2pOp.SCATTER):
        return g + n
    return g * 2 * max(1, math.ceil(math.log2(max(n, 2))))


def p2p_host_floor_s(op: P2pOp, n_ranks: int, gpus_per_thread: int | None, agg_iters: int | None = None,
                     graph: int | None = None) -> float | None:
    """:func:`host_floor_s` of a point-to-point test: the thread's :data:`HOST_US_PER_CALL` + G ×
    :data:`HOST_US_PER_GPU` (one task per GPU, as a collective) plus :data:`P2P_HOST_US_PER_TASK` for each
    further task of the call (:func:`p2p_tasks`); ``None`` where :func:`host_floor_s` is."""
    floor = host_floor_s(gpus_per_thread, agg_iters, graph)
    if floor is None:
        return None
    extra = p2p_tasks(op, n_ranks, gpus_per_thread) - gpus_per_thread
    return floor + max(extra, 0) * P2P_HOST_US_PER_TASK * 1e-6


def launch_stagger_s(gpus_per_thread: int | None, agg_iters: int | None = None,
                     graph: int | None = None, version: tuple[int, ...] | None = None) -> float | None:
    """How much later than the first the last of a thread's ``gpus_per_thread`` kernels starts,
    (G - 1) × :data:`LAUNCH_STAGGER_US_PER_GPU`, which a call adds to NCCL's time; ``None`` where
    :func:`host_floor_s` is (one GPU per thread, ``-a``, ``-G``).

    Why an addition: NCCL launches the G kernels of a call in turn (``doLaunches``, :func:`host_floor_s`),
    and none of its algorithms completes before every rank's kernel runs (a ring step waits for its
    peer), so a call lasts from the first launch to the last plus what ``ncclTopoGetAlgoTime`` prices for
    one rank's call. The posted issue-123 times are that sum at every G (:data:`LAUNCH_STAGGER_US_PER_GPU`),
    and the public ``-g 8`` sweeps on NVSwitch A100s show it where NCCL's time exceeds the floor: between
    256 KiB and 32 MiB they measure 0.51-0.76 of the larger of the floor and NCCL's time (OCI
    BM.GPU4.8, NCCL of horovod's CUDA 11.3 image; an A100-SXM4-80GB host at NCCL 2.19.3; another
    A100-SXM4-80GB host whose ``mpirun -np 8`` run of the same sweep is 4-47 µs faster from 2 to 16 MiB,
    the stagger being 19.3 µs), and within 0.5-2x at every size with the stagger added. What nccl-tests'
    back-to-back calls would let the GPUs overlap of it, those sweeps do not show.

    NCCL before 2.9 (``version``, :func:`group_launch`) launches the G kernels in one multi-device call:
    no stagger (0.0; the thread's floor, :func:`host_floor_s`, stays). On one node of 4 V100-PCIe under
    NCCL 2.8.3 (``-g 4``, ``tests/data/traces``), from 16 KiB to 2 MiB, where NCCL's time exceeds the floor,
    NCCL's time alone is 1.02-1.41x the measured one, with the 8.3 µs stagger added 1.05-1.79x."""
    if not default_launch_mode(gpus_per_thread, agg_iters, graph):
        return None
    if group_launch(version):
        return 0.0
    return (gpus_per_thread - 1) * LAUNCH_STAGGER_US_PER_GPU * 1e-6


def launch_note(gpus_per_thread: int | None, agg_iters: int | None = None, graph: int | None = None,
                version: tuple[int, ...] | None = None) -> str:
    """What a sweep run with several GPUs per thread (nccl-tests ``-g G``, G > 1) is priced with, or ""
    (:func:`launch_stagger_s`, :func:`host_floor_s`)."""
    if not gpus_per_thread or gpus_per_thread <= 1:
        return ""
    floor = host_floor_s(gpus_per_thread, agg_iters, graph)
    stagger = launch_stagger_s(gpus_per_thread, agg_iters, graph, version)
    if floor is None or stagger is None:
        mode = " and ".join(m for m, on in ((f"-a {agg_iters} (calls aggregated into one group)",
                                             (agg_iters or 1) > 1),
                                            (f"-G {graph} (iterations replayed as CUDA graphs)",
                                             (graph or 0) > 0)) if on)
        return (f"one thread drives {gpus_per_thread} GPUs (nccl-tests -g {gpus_per_thread}) under {mode}: "
                f"the host's launches are not those of the default mode, so no launch time is priced")
    g = gpus_per_thread
    if group_launch(version):
        return (f"one thread drives {g} GPUs (nccl-tests -g {g}): NCCL before 2.9 launches their kernels "
                f"together (launch mode GROUP, one cudaLaunchCooperativeKernelMultiDevice call, src/init.cc "
                f"and src/enqueue.cc v2.8.4), so no launch stagger is priced; each call is priced no less "
                f"than the thread's {HOST_US_PER_CALL:g} + {g} × {HOST_US_PER_GPU:g} µs = "
                f"{floor * 1e6:.1f} µs; rows marked 'host' are priced at that floor")
    return (f"one thread drives {g} GPUs (nccl-tests -g {g}): NCCL launches their kernels one after the "
            f"other from it, so each call is priced at NCCL's time plus the last kernel's delay, "
            f"{g - 1} × {LAUNCH_STAGGER_US_PER_GPU:g} µs = {stagger * 1e6:.1f} µs, and no less than the "
            f"thread's {HOST_US_PER_CALL:g} + {g} × {HOST_US_PER_GPU:g} µs = {floor * 1e6:.1f} µs (the "
            f"stagger and the per-GPU figure from the -g 2…8 latencies in NVIDIA/nccl-tests issue 123, the "
            f"per-call figure the median of fifteen -g runs' floors); rows marked 'host' are priced at "
            f"that floor")
