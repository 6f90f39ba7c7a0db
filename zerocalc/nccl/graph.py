"""What NCCL's topology search would hand its cost model, derived from a :class:`Topology`.

NCCL's ``ncclTopoTuneModel`` (``src/graph/tuning.cc``) reads, per algorithm, a *graph* found by
the search of ``src/graph/search.cc``: its number of channels, the bandwidth of one channel inside
a node (``bwIntra``) and between nodes (``bwInter``), the link type inside a node (NVLink or PCI)
and between GPU and NIC, and the network's own latency (``latencyInter``). zerocalc has no PCI tree
to search, so it derives the same numbers from the topology's datasheet figures. Assumptions (each
a simplification of the search, not a fitted number):

1. A GPU's bandwidth inside a node is NCCL's own figure: NVLink links × NCCL's per-link bandwidth
   for the GPU generation (``topo.h``: 20 GB/s on sm80, 20.6 on sm90, 40.1 on sm100), the links to
   the NVSwitches counting as one aggregated link as NCCL builds them; without NVLink, the PCIe
   link (``topo.cc``: width × GT/s / 80 → 12, 24, 48, 96 GB/s for x16 gen 3–6). On one node without
   NVLink the ring is searched through the PCI tree (switches, CPU sockets, peer-to-peer or not:
   :mod:`zerocalc.nccl.pcie`).
2. One NIC's bandwidth is ``nic_Gbps / 8`` GB/s (``topo.cc``: ``mbps / 8000``) and the path to it
   is capped by the GPU's PCIe link (GPUDirect RDMA through a PCIe switch).
3. The search's first pass takes the fastest speed of the release's speed array that fits the
   bottleneck (``maxBw``) and then as many channels as the bandwidth holds
   (``totalBw``; for non-ring patterns ``× g/(g-1)``, as search.cc does): one node → the GPU's
   intra bandwidth, slower speeds tried while the channels fall short of it (:func:`_ring_search`);
   several nodes → one channel per NIC (more when a NIC holds several), the node's NVLink capping the
   sum; on PCIe-only nodes of several GPUs the speed and channels are also those the node's chain of
   GPUs holds through its PCI tree (``NET → GPU a → … → GPU x → NET``, each hop's ``followPath`` load:
   :func:`zerocalc.nccl.pcie.chain_channels`), so two GPUs of two sockets get NCCL's SMP-link figure
   (10 GB/s on Intel) where their NIC would allow more. Channels are then duplicated as
   ``ncclTopoDupChannels`` does
   (same total bandwidth; the rule per release at :func:`_dup`). Before v2.10.3 one speed array
   serves both searches; before v2.16.5 there are no sm90 arrays; before v2.18 sm90 takes sm80's
   NVLink bandwidth (21 GB/s a link in v2.8-v2.9, 22 in v2.10-v2.17); before v2.7.3 the first speed is
   at most one NVLink's (:func:`first_speed_cap_GBps`) and v2.5.x counts a NIC 12 GB/s. The search's fallbacks
   (cross-NIC rings, lower speeds after a timeout,
   PCI switch routing) are not modelled.
4. Tree (and CollNet) graphs start from the ring's channels; on several nodes the second pass
   raises ``bwIntra`` while it stays below ``2 × bwInter`` and the NVLink holds it (search.cc's
   "increase bwIntra for trees (2 nodes or collnet)"), from the speed of ``bwInter`` also where the
   ring's channels were duplicated: ``init.cc`` searches the tree with ``minChannels = maxChannels =
   ringGraph->nChannels`` (after ``ncclTopoDupChannels``), so its first pass finds those channels at the
   duplicated speed (2 GPUs of a DGX H100 and their 2 NICs: 4 × 24 GB/s) and its second pass raises
   ``bwIntra`` from there (to 48), which ``ncclTopoTuneModel`` reads on 2 nodes (v2.18.1-v2.30; before,
   ``minChannels`` 1 and the duplication after pass 2 leave a doubled graph's ``bwIntra`` at ``bwInter``).
   Each raise must fit every hop of the node's chain, one GPU's path to the next carrying ``bwIntra`` once a
   channel (``followPath``): 4 GPUs of a DGX H100 stop at 8 × 45 (8 × 48 > 18 × 20.6 GB/s).
   The CollNet graph is the tree graph: v2.21.5
   ``init.cc`` searches it with the ring's channel count (``minChannels = maxChannels =
   ringGraph.nChannels``) and a tree pattern, and search.cc's only CollNet-specific test keeps NICs
   without ``collSupport`` out, which a topology with SHARP does not have.
5. The NVLS graph has one channel per GPU of the node (at most ``NCCL_MAX_NVLS_ARITY``); on one
   node each channel takes ``bwIntra`` on every GPU's NVSwitch link, each way, and twice on its head's
   (``ncclTopoSearchTryNvls``, v2.18.1-v2.30.7), so ``bwIntra`` is the first speed whose
   ``(channels + 1)`` copies fit one GPU's NVLink: 8 × 40 GB/s on 8 H100 (9 × 40 ≤ 18 × 20.6 < 9 × 50;
   NCCL 2.19.4 prints "nChannels 8, bw 40.000000/60.000000", NVIDIA/nccl issue 1197), 8 × 80 on 8 B200,
   16 × 40 on 16 GPUs of an NVL72; its ``bwInter`` is raised up to ``2 × bwIntra`` (search.cc's NVLS
   pass 2). Across nodes whose GPUs each have a NIC, each channel is one NIC and its GPU, and the same
   link rule holds (the search's NIC speeds): 8 × 40/48 on HGX H100 / H200 nodes of 8 NICs (40/40 in
   v2.18.x, whose pass 2 has no ``bwInter`` step); with fewer NICs than GPUs, the NICs' share.
6. The NIC sits under the GPU's PCIe switch on NVLink machines (path PXB: LL128 allowed) and
   behind the CPU on PCIe-only machines; the Tree pattern is the balanced tree (no 0.85 factor) but
   on nodes of one GPU, where NCCL's search makes it the plain tree
   (:func:`zerocalc.nccl.tune_model._plain_tree`);
   the network plugin reports no extra latency (``latencyInter`` 0, as NCCL's IB and socket
   transports do) unless the topology gives ``net_latency_us``.
7. Without GPUDirect RDMA (``gpudirect_rdma`` false: a NIC the GPU reaches only through the CPU, or
   no peer-memory module) NCCL sends the network's data through host memory: ``ncclTopoCheckGdr``
   refuses GDR past ``NCCL_NET_GDR_LEVEL`` (default PXB) and ``ncclTopoComputePaths`` then routes the
   GPU-NIC path through the GPU's local CPU (``addInterStep``, ``src/graph/paths.cc`` v2.12-v2.30),
   its type PHB, under which ``ncclTopoTuneModel`` leaves LL128 off (``typeInter <= PATH_PXB``, or
   ``PATH_PXN`` on sm90, ``src/graph/tuning.cc``). The path's bandwidth is still the PCIe links',
   so NCCL prices and chooses as before; the run gets :data:`HOST_RELAY_SHARE` of it
   (``Graph.run_scale``), NVIDIA's figure (NVIDIA/nccl issue 412, 2023: about 24 GB/s bus bandwidth
   per 200 Gb/s NIC near the GPU with GDR, "if the NIC is attached to the CPU getting 16 GB/s is
   normal").
8. A communicator of some of a node's GPUs (nccl-tests ``-g 2``, ``CUDA_VISIBLE_DEVICES=0,1``) holds only
   their NVLinks: NCCL's system has a node for each of the communicator's GPUs alone, and an NVLink to a
   GPU outside it is dropped (``ncclTopoAddNvLinks``: no ``remote`` GPU node, no link; ``src/graph/topo.cc``
   v2.12-v2.30), while every link to an NVSwitch stays (one NVS node). On NVSwitches a sub-group's
   channels are the whole node's; on a full mesh without NVSwitch (a GPU's links split evenly over the
   node's other GPUs, as GH200's 18, 6 to each of three) ``g`` GPUs keep ``g - 1`` peers' links, the
   search's ``maxBw`` one peer's and ``totalBw`` those ``g - 1`` (``ncclTopoSearchInit``,
   :func:`comm_nvlink_GBps`). A partial mesh (DGX-1's cube-mesh) is left at the node's figure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from zerocalc.errors import ConfigError
from zerocalc.nccl.pcie import PcieLayout, chain_channels, hop_GBps, node_chain, p2p_past_cpu, ring_via_host
from zerocalc.nccl.pcie import search as pcie_search
from zerocalc.nccl.pcie import smp_GBps as pcie_smp_GBps
from zerocalc.nccl.tables import Algorithm, Release
from zerocalc.topology import Link, Topology, nvlink_mesh_peers, require

_NEEDED_BY = "NCCL's cost model"
REQUIRED_FIELDS = ("compute_capability", "nvlink_gen", "nvswitch_gen", "pcie_gen", "nics_per_node",
                   "nic_Gbps", "cpu_vendor", "in_network_reduction")
"""Hardware fields NCCL's model needs (``nvlinks_per_gpu`` too when ``nvlink_gen`` > 0)."""
HOST_RELAY_SHARE = 16.0 / 24.0
"""The share of its GPUDirect RDMA rate a network path gets through host memory: NVIDIA's 16 GB/s
through the CPU against 24 GB/s near the GPU on a 200 Gb/s NIC (NVIDIA/nccl issue 412; assumption 7)."""
PCIE_GBPS_X16 = {3: 12.0, 4: 24.0, 5: 48.0, 6: 96.0}
"""NCCL's PCIe x16 bandwidth per generation: ``topo.cc`` ``kvDictPciGen`` (8, 16, 32, 64 GT/s →
60, 120, 240, 480) × width 16 / 80."""


@dataclass(frozen=True)
class Graph:
    """One algorithm's graph as ``ncclTopoTuneModel`` reads it (bandwidths in GB/s)."""

    n_channels: int
    bw_intra: float
    bw_inter: float
    nvlink: bool  # typeIntra == LINK_NVL
    latency_inter_us: float = 0.0
    #: how much faster a broadcast or reduce runs than NCCL prices it on this graph (a chain leaves the
    #: ring's hop into the root idle; :mod:`zerocalc.nccl.pcie`); 1 but on shared PCIe links
    chain_speedup: float = 1.0
    #: how much faster every call runs than NCCL prices it on this graph: NCCL's fallback graph (no
    #: ring found, 0.1 GB/s) against the rate its ring's links give (:mod:`zerocalc.nccl.pcie`), a network
    #: path through host memory (:data:`HOST_RELAY_SHARE`, assumption 7); else 1
    run_scale: float = 1.0
    #: every hop of the ring goes through host memory (NCCL's SHM transport: no PCIe peer-to-peer between
    #: the GPUs), where a ring's first send and last receive leave a direction idle
    #: (:func:`zerocalc.nccl.pcie.host_staged_slowdown`)
    host_staged: bool = False
    #: time only: the NVLS graph's bwIntra its GPUs' NVSwitch links hold, where NCCL's search across nodes
    #: stopped lower, at the speed the heads' NICs take (:func:`nvls_net_speeds`); ``None``: the same
    run_bw_intra: float | None = None


@dataclass(frozen=True)
class Machine:
    """The communicator NCCL tunes for: ranks, nodes, GPU generation, CPU vendor and graphs."""

    n_ranks: int
    n_nodes: int
    compute_capability: int
    cpu_vendor: str
    nvls: bool  # NVLink SHARP usable (NVSwitch 3+, sm90+)
    collnet: bool  # InfiniBand SHARP (CollNet) usable
    nvswitch: bool
    ll128_path_ok: bool  # NVLink inside, a NIC NCCL reaches at most through PXB / PXN (P2C from 2.27)
    graphs: dict[Algorithm, Graph]
    #: time only: a network hop pays the graphs' ``latency_inter_us`` even at a release whose model
    #: does not read it (before 2.12; see :func:`zerocalc.nccl.model.tune`)
    wire_hops: bool = False
    #: time only: the network's data lands in host memory (no GPUDirect RDMA), so a Simple receive is never
    #: flushed (``src/transport/net.cc`` flushes only with ``useGdr`` and ``needFlush``, v2.12-v2.30) and its
    #: wire latency is paid once, where NCCL's estimate adds it twice ("Also add the flush extra latency",
    #: ``tuning.cc`` v2.18.1 on); used for the wire's timing run (:func:`zerocalc.nccl.model.tune`)
    relayed: bool = False
    #: time only: this machine times the network's own latency (the wire's run), not NCCL's choice
    wire_time: bool = False
    #: the CUDA release the NCCL library was built with (``CUDART_VERSION``: ``(11, 8)``), where stated
    cuda_build: tuple[int, int] | None = None
    #: time only: the largest message the network sends eagerly, a larger one paying a rendezvous round
    #: trip (the topology's ``net_eager_bytes``; :mod:`zerocalc.nccl.ofi_cxi`); ``None``: none does
    net_eager_bytes: int | None = None
    #: time only: TCP flows a network connection spreads its messages over, each message whole on one, and
    #: the NCCL_BUFFSIZE that sizes a ring step's messages (the topology's ``net_flows`` and
    #: ``nccl_buffsize``; :mod:`zerocalc.nccl.tcp_flows`); ``None``: a message has the connection's rate
    net_flows: int | None = None
    nccl_buffsize: int | None = None
    #: the largest piece of a message one flow carries (the topology's ``net_flow_piece``, GCP TCPX)
    net_flow_piece: int | None = None
    #: time only: the node is a multi-node NVLink domain's GPUs (the topology's ``mnnvl``: a GB200 / GB300
    #: NVL72 rack), whose Ring/LL hop is timed with its own figure (:mod:`zerocalc.nccl.tune_model`)
    mnnvl: bool = False

    @property
    def ppn(self) -> float:
        return self.n_ranks / self.n_nodes


def _speeds(table: dict[int, tuple[float, ...]], cc: int) -> tuple[float, ...]:
    key = max((k for k in table if k <= cc), default=0)
    return table[key]


def _first_fitting(speeds: tuple[float, ...], max_bw: float, total_bw: float, min_channels: int = 1) -> float:
    """search.cc: the first speed ≤ maxBw whose minChannels copies fit totalBw (else the slowest)."""
    for s in speeds:
        if s <= max_bw and s * min_channels <= total_bw:
            return s
    return speeds[-1]


def nvls_net_speeds(speeds: tuple[float, ...], link_bw: float, heads: int,
                    nic_bw: float, raise_inter: bool = True) -> tuple[float, float]:
    """``(bwIntra, bwInter)`` of NCCL's NVLS graph across nodes, each of its ``heads`` channels headed by a
    GPU with a NIC of its own of ``nic_bw`` GB/s, every GPU's NVSwitch link ``link_bw`` GB/s each way.

    Source: ``src/graph/search.cc`` (v2.18.1-v2.30.7). ``ncclTopoSearchRecNet`` takes one NIC a channel
    and its local GPU as the head (no GPU twice), the NIC holding ``bwInter`` (``net->net.bw < bw``:
    skipped); ``ncclTopoSearchTryNvls`` follows NVS→GPU and GPU→NVS for every GPU at ``bwIntra``, twice
    for the channel's head, so ``heads`` channels load each GPU's link with ``(heads + 1) · bwIntra``; pass 1
    starts both at one speed of ``sm100SpeedArrayInter`` / ``sm90SpeedArrayInter`` (a search with NICs),
    the first that fits; pass 2 then raises ``bwInter`` alone, a speed at a time, while the NICs hold it
    and it is below ``2 · bwIntra`` ("NVLS && tmpGraph.bwInter < tmpGraph.bwIntra*2"). Before v2.19.3
    (``raise_inter`` false: v2.18.x) there is no such step: its pass 2 tries a faster bwIntra alone and
    ``ncclTopoCompareGraphs`` keeps an NVLS graph only for more channels, so pass 1's speed stays both."""
    fits = [s for s in speeds if s * (heads + 1) <= link_bw + 1e-9 and s <= nic_bw + 1e-9]
    s = fits[0] if fits else speeds[-1]
    inter = s
    if not raise_inter:
        return s, s
    for c in reversed(speeds[:speeds.index(s)]):  # the faster speeds, slowest first
        if c > nic_bw + 1e-9:
            break
        inter = c
        if c >= 2 * s - 1e-9:
            break
    return s, inter


def _ring_search(speeds: tuple[float, ...], max_bw: float, total_bw: float, max_channels: int
                 ) -> tuple[float, int]:
    """search.cc ``ncclTopoCompute`` pass 1 on one node (v2.8-v2.30, its "Decrease bw until we find a
    solution"): from the first speed ≤ ``max_bw``, as many channels as ``total_bw`` holds; while that
    falls short of ``total_bw`` and of ``max_channels``, the next slower speed is tried as long as it is
    more than 0.49 of the best graph's, and kept only when its channels carry more (``ncclTopoCompareGraphs``:
    ``nChannels × bwIntra`` strictly above). On 8 NVLink4 links (H800, 164.8 GB/s at 20.6 a link) 60 GB/s
    holds 2 channels (120), 50 holds 3 (150), 40 holds 4 (160): NCCL keeps 4 × 40, where the first speed
    alone would give 2 × 60. Returns (speed, channels)."""
    i = next((k for k, s in enumerate(speeds) if s <= max_bw), len(speeds) - 1)
    best: tuple[float, int] | None = None
    while True:
        s = speeds[i]
        n = min(max_channels, int(total_bw / s + 1e-9))
        if n >= 1 and (best is None or n * s > best[0] * best[1] + 1e-9):
            best = (s, n)
        if best is not None and (best[1] * best[0] >= total_bw - 1e-9 or best[1] >= max_channels):
            break
        if i < len(speeds) - 1 and (best is None or speeds[i + 1] / best[0] > .49):
            i += 1
            continue
        break
    return best if best is not None else (speeds[-1], 1)


def _dup(n: int, bw_intra: float, bw_inter: float, cc: int, max_channels: int,
         era: int = 30) -> tuple[int, float, float]:
    """``ncclTopoDupChannels``: double the channels at half the bandwidth, when fast enough, up to the
    graph's ``maxChannels`` (the ring's: ``MAXCHANNELS/2``, ``init.cc`` v2.9.9 to v2.19.4). The rule
    (``search.cc``): v2.9.9-v2.16.2 from 25 GB/s a channel; v2.16.5-v2.18.1 from 25 GB/s up to sm80 and
    from 50 GB/s on sm90 (none later); v2.18.3 on from 25 GB/s, but not on sm80+ below 50 GB/s with more
    than 4 channels (``Release.dup_era``)."""
    if era <= 15:
        keep = bw_intra < 25.0
    elif era <= 17:
        keep = not ((cc <= 80 and bw_intra >= 25.0) or (cc <= 90 and bw_intra >= 50.0))
    else:
        keep = bw_intra < 25.0 or (cc > 80 and bw_intra < 50.0 and n > 4)
    if keep:
        return n, bw_intra, bw_inter
    dup = min(2 * n, max_channels)
    f = math.ceil(dup / n)
    return dup, bw_intra / f, bw_inter / f


def intra_bw_GBps(topo: Topology, release: Release) -> float:
    """A GPU's bandwidth inside a node as NCCL counts it (assumption 1)."""
    cc = require(topo, "compute_capability", _NEEDED_BY)
    if require(topo, "nvlink_gen", _NEEDED_BY) > 0:
        links = require(topo, "nvlinks_per_gpu", _NEEDED_BY)
        per_link = release.nvlink_bw_per_link.get(cc) or release.nvlink_bw_per_link[
            max((k for k in release.nvlink_bw_per_link if k <= cc), default=80)]
        return links * per_link
    return _pcie(topo)


def first_speed_cap_GBps(topo: Topology, release: Release) -> float:
    """The most a channel's first speed may be before v2.7.3 (``Release.search_speed_per_link``): one NVLink's
    bandwidth (v2.6.4 ``search.cc`` ``getMaxWidth`` counts an NVLink path at one link's width; v2.5.x
    ``topo.cc`` sets ``system->maxWidth`` to one link's width); no cap otherwise (``inf``)."""
    if not release.search_speed_per_link or require(topo, "nvlink_gen", _NEEDED_BY) <= 0:
        return math.inf
    cc = require(topo, "compute_capability", _NEEDED_BY)
    return release.nvlink_bw_per_link[max((k for k in release.nvlink_bw_per_link if k <= cc), default=70)]


def comm_nvlink_GBps(topo: Topology, release: Release, g: int) -> tuple[float, float]:
    """``(maxBw, totalBw)`` NCCL's search starts from on a communicator of ``g`` GPUs of one node of ``topo``
    (assumption 8): its fastest path to another GPU and a GPU's NVLink bandwidth. Both are the node's
    :func:`intra_bw_GBps` on NVSwitches (the links to the NVSwitch stay whatever the GPUs) and on a whole
    node; on ``g`` of a full mesh's ``k`` GPUs (``2 <= g < k``), one peer's links and ``g - 1`` peers'."""
    intra = intra_bw_GBps(topo, release)
    peers = nvlink_mesh_peers(topo)
    if peers is None or g < 2 or g >= topo.gpus_per_node:
        return intra, intra
    pair = intra / peers
    return pair, pair * (g - 1)


def _pcie(topo: Topology) -> float:
    gen = require(topo, "pcie_gen", _NEEDED_BY)
    if gen not in PCIE_GBPS_X16:
        raise ConfigError(f"pcie_gen {gen} is not one NCCL's model knows (3 to 6)", option="--topology")
    return PCIE_GBPS_X16[gen]


def pcie_layout(topo: Topology, g: int, release: Release) -> PcieLayout:
    """The ``g`` GPUs of a communicator on one node of ``topo`` as NCCL's PCI tree holds them
    (:mod:`zerocalc.nccl.pcie`): the first ``g`` of the node's GPUs, split over its ``cpu_sockets``
    (one when unset) in order, ``gpus_per_pcie_switch`` to a switch (1: root ports), with PCIe
    peer-to-peer unless ``gpu_p2p`` is false, as far as ``p2p_level`` (NCCL_P2P_LEVEL) or NCCL's default
    level lets it; the SMP link NCCL's own figure for the CPU unless
    ``smp_GBps`` gives it."""
    sockets = topo.cpu_sockets or 1
    vendor = require(topo, "cpu_vendor", _NEEDED_BY)
    level = topo.p2p_level  # NCCL_P2P_LEVEL: ncclGetUserP2pLevel overrides the default (paths.cc)
    past_cpu = p2p_past_cpu(vendor, release.era, g) if level is None else level in ("PHB", "SYS")
    return PcieLayout(
        gpus=g, per_socket=max(1, math.ceil(topo.gpus_per_node / sockets)),
        per_switch=topo.gpus_per_pcie_switch or 1, p2p=topo.gpu_p2p is not False, intel=vendor == "intel",
        pci_GBps=_pcie(topo), smp_GBps=topo.smp_GBps or pcie_smp_GBps(vendor, release.era),
        p2p_past_cpu=past_cpu, p2p_past_socket=None if level is None else level == "SYS")


def _pcie_graph(topo: Topology, g: int, release: Release, cc: int) -> Graph:
    """The ring (and tree) graph of a PCIe-only node: NCCL's search through its PCI tree
    (:func:`zerocalc.nccl.pcie.search`), then ``ncclTopoDupChannels``."""
    layout = pcie_layout(topo, g, release)
    found = pcie_search(layout, _speeds(release.speed_intra, cc), release.max_channels // 2)
    n, bi, be = _dup(found.n_channels, found.bw, found.bw, cc, release.max_channels // 2, release.dup_era)
    scale = found.run_bw / found.bw if found.run_bw else 1.0
    return Graph(n, bi, be, False, chain_speedup=found.chain_speedup, run_scale=scale,
                 host_staged=ring_via_host(layout))


def as_nccl_sees_it(topo: Topology, release: Release) -> Topology:
    """``topo`` as NCCL's topology holds it at ``release``: a node that is an NVLink domain of several hosts
    (``topo.mnnvl``, an NVL72 rack) is one node from v2.20.3, where NCCL joins an NVLink clique's hosts
    (multi-node NVLink: ``src/init.cc`` ``ncclMnnvlCheck``, ``NCCL_MNNVL_ENABLE``; the clique's topologies
    fused in ``src/graph/topo.cc``, ``nNodes`` counted from the rings' first ranks); before it each host is
    a node (its GPUs and its share of the NICs) joined to the others by the network."""
    if not topo.mnnvl or release.era >= 20:
        return topo
    k = topo.gpus_per_host or topo.gpus_per_node
    nics = topo.nics_per_node
    if nics is not None:
        share = max(1, nics * k // topo.gpus_per_node)
        topo = replace(topo, inter=Link(topo.inter.alpha_s, topo.inter.bw_Bps * share / nics),
                       nics_per_node=share)
    return replace(topo, gpus_per_node=k, gpus_per_host=None)


def _nvls_graph(topo: Topology, release: Release, cc: int, g: int, n_nodes: int, intra: float, ring: Graph,
                lat_inter: float) -> Graph:
    """NVLS and NVLS Tree's graph on ``g`` GPUs a node of ``n_nodes``: one node's NVSwitch, an NVLink
    domain of many hosts or HGX nodes of a NIC a GPU (:func:`nvls_net_speeds`), or HGX nodes whose heads
    share fewer NICs (the ring's NIC share)."""
    nch = min(release.max_nvls_arity, g)
    if n_nodes == 1:
        speeds = _speeds(release.speed_intra, cc)
        total = intra * g / (g - 1) if g > 1 else intra
        # every channel takes bwIntra on each GPU's NVSwitch link, each way, twice on its head's (search.cc
        # ncclTopoSearchTryNvls, v2.18.1-v2.30.7), and all nch channels must fit: (nch + 1) x bwIntra
        s = _first_fitting(speeds, intra / (nch + 1) if nch > 1 else intra, total, nch)
        idx = speeds.index(s)
        inter = s
        while idx > 0 and inter < 2 * s:
            idx -= 1
            inter = speeds[idx]
        return Graph(nch, s, inter, True)
    if topo.mnnvl or require(topo, "nics_per_node", _NEEDED_BY) >= nch:
        # every head has a NIC of its own (an NVLink domain of many hosts; an HGX node of one NIC a GPU):
        # NCCL's own checks set the speeds (nvls_net_speeds): ncclTopoSearchRecNet takes a NIC and its
        # local GPU a channel, then ncclTopoSearchTryNvls loads each GPU's NVSwitch link as on one node
        # (search.cc v2.18.1-v2.30.7): 8 H100 with 8 NICs 8 x 40/48 (v2.18.x 40/40), not the NIC share 48/48
        nic_path = min(require(topo, "nic_Gbps", _NEEDED_BY) / 8.0, _pcie(topo))
        s, s_inter = nvls_net_speeds(_speeds(release.speed_inter, cc), intra, nch, nic_path,
                                     raise_inter=release.era >= 19)
        # the speed the GPUs' NVSwitch links alone hold (no NIC bound): a run-time figure where it is faster
        link, _ = nvls_net_speeds(_speeds(release.speed_inter, cc), intra, nch, math.inf, raise_inter=False)
        run = link if link > s and not topo.mnnvl else None
        return Graph(nch, s, s_inter, True, lat_inter, run_bw_intra=run)
    s_net = ring.bw_inter * ring.n_channels / nch  # the NICs' bandwidth shared by the NVLS heads
    s = _first_fitting(_speeds(release.speed_inter, cc), s_net, s_net * nch)
    return Graph(nch, s, s, True, lat_inter)


def machine(topo: Topology, n_ranks: int, release: Release) -> Machine:
    """The communicator of ``n_ranks`` ranks on ``topo`` (ranks fill nodes of ``gpus_per_node``; an NVLink
    domain of several hosts as :func:`as_nccl_sees_it`)."""
    if not isinstance(n_ranks, int) or n_ranks < 1:
        raise ConfigError(f"must be a whole number ≥ 1, got {n_ranks!r}", option="ranks")
    topo = as_nccl_sees_it(topo, release)
    cc = require(topo, "compute_capability", _NEEDED_BY)
    g = min(topo.gpus_per_node, n_ranks)
    n_nodes = math.ceil(n_ranks / topo.gpus_per_node)
    nvlink = require(topo, "nvlink_gen", _NEEDED_BY) > 0
    nvswitch = (require(topo, "nvswitch_gen", _NEEDED_BY) or 0) > 0
    intra = intra_bw_GBps(topo, release)
    max_ch = release.max_channels // 2
    lat_inter = float(getattr(topo, "net_latency_us", None) or 0.0)
    ring: Graph
    tree: Graph
    if n_nodes == 1 and not nvlink and g > 1:
        ring = tree = _pcie_graph(topo, g, release, cc)
    elif n_nodes == 1:
        peer_bw, gpu_bw = comm_nvlink_GBps(topo, release, g)
        first = min(peer_bw, first_speed_cap_GBps(topo, release))
        s, n = _ring_search(_speeds(release.speed_intra, cc), first, gpu_bw, max_ch)
        n, bi, be = _dup(n, s, s, cc, release.max_channels // 2, release.dup_era)
        ring = tree = Graph(n, bi, be, nvlink)
    else:
        nics = require(topo, "nics_per_node", _NEEDED_BY)
        nic = require(topo, "nic_Gbps", _NEEDED_BY) / 8.0
        path = release.net_width_GBps or min(nic, _pcie(topo))  # v2.5.x: NET_WIDTH whatever the NIC
        speeds = _speeds(release.speed_inter, cc)
        peer_bw, gpu_bw = comm_nvlink_GBps(topo, release, g) if nvlink else (intra, intra)
        node_cap = gpu_bw * g / (g - 1) if g > 1 else gpu_bw
        # a PCIe-only node's GPUs: its part of the ring crosses the PCI tree (assumption 3)
        lay = pcie_layout(topo, g, release) if not nvlink and g > 1 else None
        chain_bw = hop_GBps(lay, node_chain(lay)) if lay else math.inf
        first = min(path, peer_bw, chain_bw, first_speed_cap_GBps(topo, release))
        s = _first_fitting(speeds, first, node_cap)
        n = max(1, min(max_ch, nics * max(1, int(path // s + 1e-9)), int(node_cap // s + 1e-9) or 1,
                       chain_channels(lay, s, max_ch) if lay else max_ch))
        n, bi, be = _dup(n, s, s, cc, release.max_channels // 2, release.dup_era)
        ring = Graph(n, bi, be, nvlink, lat_inter)
        # the tree's own search (min = max = the ring's channels, after their duplication) then pass 2:
        # bwIntra up from bwInter's speed while < 2·bwInter and the NVLink holds it (assumption 4)
        # (before v2.18.1 the tree took minChannels 1: its pass 2 from the ring's undoubled speed, and
        # the duplication that followed it in ncclTopoCompute left bwIntra = bwInter where it doubled)
        tree_intra = bi
        own_search = release.era >= 18
        start = be if own_search else s
        idx = next((k for k, v in enumerate(speeds) if v <= start + 1e-9), len(speeds) - 1)
        # each channel crosses every hop of the node's chain once at bwIntra, so one GPU's path to the next
        # (peer_bw: its link to the NVSwitch, 18 × 20.6 GB/s on H100) must hold n × bwIntra (search.cc
        # followPath, v2.30.7: per link, without the g/(g-1) that only sets the first pass's start speed)
        while (idx > 0 and tree_intra < 2 * be and speeds[idx - 1] * n <= peer_bw
               and (own_search or bi == s) and speeds[idx - 1] <= chain_bw):
            idx -= 1
            tree_intra = speeds[idx]
        tree = Graph(n, tree_intra, be, nvlink, lat_inter)
    graphs = {Algorithm.RING: ring, Algorithm.TREE: tree, Algorithm.PAT: tree,
              Algorithm.COLLNET_DIRECT: tree, Algorithm.COLLNET_CHAIN: tree}
    nvls = (topo.nvls and nvswitch and (topo.nvswitch_gen or 0) >= 3 and cc >= 90
            and Algorithm.NVLS in release.algorithms  # NVLS from v2.17.1
            and g >= release.nvls_min_gpus  # nvls.cc: none on nodes of 1 (2.17, 2.28.7 on) or 2 GPUs
            # v2.20.x nvls.cc: "NVLS is not supported on MNNVL yet" (an NVLink domain spanning hosts)
            and not (release.era == 20 and topo.mnnvl and g > (topo.gpus_per_host or g)))
    if nvls:
        graphs[Algorithm.NVLS] = graphs[Algorithm.NVLS_TREE] = _nvls_graph(topo, release, cc, g, n_nodes,
                                                                           intra, ring, lat_inter)
    relayed = n_nodes > 1 and topo.gpudirect_rdma is False
    if relayed:  # assumption 7: through host memory, LL128 off, HOST_RELAY_SHARE of the rate
        graphs = {a: replace(gr, run_scale=gr.run_scale * HOST_RELAY_SHARE) for a, gr in graphs.items()}
    # LL128 by default only where the graphs' GPU-NIC path (typeInter) is at most PXB, or PXN on sm90 and
    # later (tuning.cc, v2.19-v2.30); a NIC on the host CPU reached over NVLink-C2C is PHB until NCCL gives
    # that path a type of its own, P2C, in v2.27.3 (paths.cc), which the test then admits
    c2c_phb = n_nodes > 1 and bool(topo.nic_via_c2c) and release.era < 27
    return Machine(n_ranks=n_ranks, n_nodes=n_nodes, compute_capability=cc,
                   cpu_vendor=require(topo, "cpu_vendor", _NEEDED_BY), nvls=bool(nvls),
                   collnet=topo.sharp and n_nodes > 1, nvswitch=nvswitch,
                   ll128_path_ok=nvlink and not relayed and not c2c_phb,
                   graphs=graphs, net_eager_bytes=topo.net_eager_bytes if n_nodes > 1 else None,
                   net_flows=topo.net_flows if n_nodes > 1 else None, nccl_buffsize=topo.nccl_buffsize,
                   net_flow_piece=topo.net_flow_piece, relayed=relayed, mnnvl=bool(topo.mnnvl))
