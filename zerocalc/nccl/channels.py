"""How many channels an NCCL communicator runs: ``ncclTopoPostset`` (``src/graph/connect.cc``).

NCCL's cost model prices an algorithm with its *graph's* channels (``graphs[a]->nChannels`` in
``ncclTopoTuneModel``), but two of its terms read the communicator's channel count
``comm->nChannels``, which the post-set step derives from the graphs:

- the "plateau effect of ring" (``ncclTopoGetAlgoTime``, ``src/graph/tuning.cc``, v2.19.4 to
  v2.30.7): Ring/Simple all-reduce across nodes pays 1.4× its latency (1.9× before sm80) once
  ``nBytes / (comm->nChannels · nRanks) ≥ 64``;
- a tuner plugin's channel count (``getCollInfo``'s ``nChannels``): v2.19-v2.21 price it as
  ``bw / comm->nChannels × nChannels`` (same function).

The steps of ``ncclTopoPostset``, in its order, at the releases of :mod:`zerocalc.nccl.tables`
(v2.9.9 to v2.17.1 have steps 1, 2 and 5 only; v2.17.1 also bounds the count by the communicator's
CTA limits, ``NCCL_MIN_CTAS`` / ``NCCL_MAX_CTAS``, not modelled):

1. ``comm->nChannels = min(treeGraph.nChannels, ringGraph.nChannels)`` (``src/init.cc``), then
   doubled, at most ``MAXCHANNELS`` ("Duplication should be complete now": each ring and tree is
   run twice);
2. with CollNet (InfiniBand SHARP) and a CollNet graph (CollNet Direct's before v2.22.3, then CollNet
   Chain's) whose ``bwIntra > bwInter`` on more than one GPU per node: ``min(MAXCHANNELS, n + n/2)``;
3. "Use 4 compute channels per search channel to reach peak BW on <8 PPN": on several nodes whose
   ring graph has ``bwIntra > 45`` GB/s, doubled again (from v2.18.1) — v2.18.1 to v2.19.4: on sm90
   while ``2n ≤ MAXCHANNELS``; v2.20.3 to v2.24.3: on sm90 while ``n < 16``; v2.25.1 to v2.30.7: on sm90
   and later while ``n < 16``;
4. v2.26.2 to v2.30.7: doubled again below 16 channels on several nodes when the network plugin
   delivers data to host bounce buffers the GPU unpacks (``NCCL_NET_DEVICE_UNPACK``, e.g. GCP's
   GPUDirect-TCPXO; ``NCCL_UNPACK_DOUBLE_NCHANNELS`` default 1) — zerocalc's topologies do not say
   which plugin runs, so this step is taken as absent;
5. ``NCCL_MAX_NCHANNELS`` caps the count and ``NCCL_MIN_NCHANNELS`` raises it by copying channels
   (``copyChannels``; ``ncclMinNchannels`` / ``ncclMaxNchannels``, MAXCHANNELS at most); the result
   is ``comm->collChannels``, the channels Ring and Tree collectives start from (``enqueue.cc``);
6. v2.20.3 to v2.27.7, with NVLink SHARP: the count is raised to ``comm->nvlsChannels``
   (``NCCL_NVLS_NCHANNELS``: 16; from v2.25.1: 16 on sm90, 32 on sm100, from v2.27.3 24 on sm100 within one
   node or multi-node NVLink domain; ``src/transport/nvls.cc``),
   "Support maximal channel usage for aggregation"; v2.18.x, v2.19.4 and v2.28.3 on do not raise it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from zerocalc.nccl.graph import Machine
from zerocalc.nccl.tables import Algorithm, Release


@dataclass(frozen=True)
class CommChannels:
    """``comm->nChannels`` and ``comm->collChannels`` after ``ncclTopoPostset``, and the steps that made
    them (for notes)."""

    n_channels: int
    coll_channels: int
    steps: tuple[str, ...] = ()
    #: the count before ``NCCL_MAX_NCHANNELS`` cut it (0: not cut)
    uncapped: int = 0


def nvls_channels(m: Machine, release: Release) -> int:
    """``comm->nvlsChannels`` as step 6 raises ``comm->nChannels`` to it (module docstring): 16, from v2.25.1
    32 on sm100 (``src/transport/nvls.cc``), from v2.27.3 24 on sm100 within one node or one multi-node
    NVLink domain ("a reduced number of channels for single node/MNNVL domain on Blackwell",
    ``NVLS_NCHANNELS_SM100_NVL``); 0 without NVLink SHARP."""
    return _nvls_count(m, release) if m.nvls else 0


def _nvls_count(m: Machine, release: Release) -> int:
    """``comm->nvlsChannels`` where NVLS runs (:func:`nvls_channels`)."""
    if release.era >= 27 and m.compute_capability >= 100 and m.n_nodes == 1:
        return 24
    return 32 if (release.era >= 25 and m.compute_capability >= 100) else 16


def comm_channels(m: Machine, release: Release, *, min_channels: int | None = None,
                  max_channels: int | None = None, nvls: bool = False,
                  nvls_count: int | None = None) -> CommChannels:
    """The communicator's channels on machine ``m`` at ``release`` (module docstring, steps 1-6).

    ``min_channels`` / ``max_channels``: ``NCCL_MIN_NCHANNELS`` / ``NCCL_MAX_NCHANNELS`` (None: unset);
    ``nvls``: NVLink SHARP is in use (``comm->nvlsSupport``); ``nvls_count``: ``comm->nvlsChannels`` as a
    log states it (``"%d nvls channels"``), step 6's count in place of :func:`nvls_channels`.
    """
    era, most = release.era, release.max_channels
    ring, tree = m.graphs[Algorithm.RING], m.graphs[Algorithm.TREE]
    steps = []
    n = min(ring.n_channels, tree.n_channels)
    n = min(most, 2 * n)
    steps.append(f"{n} (graph's {min(ring.n_channels, tree.n_channels)} doubled)")
    collnet = m.graphs[Algorithm.COLLNET_CHAIN if era >= 22 else Algorithm.COLLNET_DIRECT]
    if m.collnet and collnet.bw_intra > collnet.bw_inter and m.n_ranks > m.n_nodes:
        n = min(most, n + n // 2)
        steps.append(f"{n} (CollNet)")
    cc = m.compute_capability
    if m.n_nodes > 1 and ring.bw_intra > 45.0 and (
            (era in (18, 19) and cc == 90 and 2 * n <= most) or (20 <= era <= 24 and cc == 90 and n < 16)
            or (era >= 25 and cc >= 90 and n < 16)):
        n *= 2
        steps.append(f"{n} (4 compute channels per search channel)")
    lo = max(0, min(most, min_channels)) if min_channels is not None else 0
    hi = max(1, min(most, max_channels)) if max_channels is not None else most
    uncapped = 0
    if n > hi:
        uncapped, n = n, hi
        steps.append(f"{n} (NCCL_MAX_NCHANNELS)")
    if n < lo:
        n = lo
        steps.append(f"{n} (NCCL_MIN_NCHANNELS)")
    coll = n
    if nvls and 20 <= era <= 27:
        raise_to = nvls_count if nvls_count else _nvls_count(m, release)
        if n < raise_to:
            n = raise_to
            steps.append(f"{n} (NVLS channels)")
    return CommChannels(n, coll, tuple(steps), uncapped if coll < uncapped else 0)


def stated_graph_channels(m: Machine, release: Release, stated: int, *, min_channels: int | None = None,
                          max_channels: int | None = None, nvls: bool = False,
                          nvls_count: int | None = None) -> int | None:
    """The Ring and Tree graphs' channels under which ``ncclTopoPostset`` makes ``stated`` the
    communicator's ``comm->nChannels`` on ``m`` (:func:`comm_channels`, the same
    bounds and NVLS), ``None`` where no count does (the stated one is then not priced).

    NCCL prints ``comm->nChannels`` (``"%d coll channels, ..."``, :mod:`zerocalc.traces.nccl_info`), not the
    graph search's count; the post-set steps (doubling, CollNet's and sm90's steps, the bounds, the NVLS
    raise) are inverted by trying each graph count, the one nearest the derived graph's winning where several
    give the stated count (a bound or the NVLS raise hides the graph's). The graph's per-channel bandwidths
    (``bwIntra`` / ``bwInter``) stay the derived ones: the line states no bandwidth, and
    ``ncclTopoTuneModel`` prices ``nChannels × bw`` per graph (``src/graph/tuning.cc``)."""
    ring, tree = m.graphs[Algorithm.RING], m.graphs[Algorithm.TREE]
    derived = min(ring.n_channels, tree.n_channels)
    fits = [g for g in range(1, release.max_channels // 2 + 1)
            if comm_channels(replace(m, graphs={**m.graphs, Algorithm.RING: replace(ring, n_channels=g),
                                                Algorithm.TREE: replace(tree, n_channels=g)}), release,
                             min_channels=min_channels, max_channels=max_channels,
                             nvls=nvls, nvls_count=nvls_count).n_channels == stated]
    return min(fits, key=lambda g: (abs(g - derived), g)) if fits else None
