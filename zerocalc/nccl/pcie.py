"""The ring NCCL's search finds on one node of GPUs joined by PCIe alone (no NVLink).

NCCL builds a tree of the node's PCI devices (``src/graph/topo.cc``): each GPU hangs from a PCIe switch
or a CPU root port by a link of its PCIe width × speed (x16: 12, 24, 48 GB/s for gen 3, 4, 5), the
switches from a CPU socket, and the sockets are joined by one SMP link (``ncclTopoGetInterCpuBw``).
Every link carries a bandwidth in each direction, and the search (``src/graph/search.cc``
``ncclTopoCompute``) takes off each channel's bandwidth from every link its ring crosses
(``followPath``), so GPUs that share a link share its bandwidth. Modelled here, each a rule of those
files (v2.9.9 to v2.30.7 unless said):

1. Paths (``src/graph/paths.cc``): two GPUs under one switch talk through it (``PATH_PIX``) when they
   can use PCIe peer-to-peer; otherwise their traffic is diverted through the CPU (``addInterStep``:
   GPU → switch → CPU → switch → GPU, a ``PATH_PHB`` path), as it is between GPUs of different
   switches or root ports of one socket (``PATH_PHB``) and across sockets (``PATH_SYS``, through the
   SMP link). Peer-to-peer is refused when the driver refuses it (``ncclTopoCheckP2p`` reads NVML's
   P2P status, "P2P is disabled between connected GPUs": GeForce cards) or under
   ``NCCL_P2P_DISABLE=1``; NCCL then moves data through host memory (its SHM transport,
   ``via SHM/direct/direct`` in its INFO lines) over the same links. NCCL's default P2P level
   (``ncclTopoCheckP2p``: ``PATH_PXB`` on Intel and ARM; on AMD ``PATH_SYS`` before 2.23, and from 2.23
   for two GPUs alone, ``PATH_PXB`` for more) changes the transport of PHB and SYS paths, not the links
   they cross: a hop past it goes through host memory like one the driver refuses
   (:func:`ring_via_host`), which the search's figures do not see but the kernels' steps do
   (:func:`host_staged_slowdown`).
2. Intel root complexes: a path through an Intel CPU of type PHB costs 6/5 of its bandwidth on
   every PCI link (``INTEL_P2P_OVERHEAD``, ``topo.h``; ``followPath``).
3. The SMP link: NCCL's figure by CPU (``topo.h``): Intel Skylake and later 9 GB/s up to 2.17, 10 from
   2.18 (``SKL_QPI_BW``; Sapphire and Emerald Rapids 22 and 40 from 2.26 are given by ``smp_GBps``);
   AMD 16 from 2.19 (``AMD_BW``), unbounded before (``LOC_BW``); ARM 6.
4. The ring visits the GPUs in PCI order (socket by socket, switch by switch), crossing each socket
   boundary once each way; every channel is that ring.
5. The search (``ncclTopoCompute``, pattern RING): from the fastest speed of the release's intra-node
   array no faster than the best GPU-to-GPU path (``maxBw``), keep as many channels of a speed as the
   links hold; go down the array while no solution is found, and on past one while the next speed is
   more than 0.49 of the best found, keeping the best total (``ncclTopoCompareGraphs``), stopping once
   it reaches the GPU's own PCI bandwidth (``totalBw``); then ``ncclTopoDupChannels`` and the second
   pass, which raises the speed while the links hold the same channels. No ring at all: one channel
   at 0.1 GB/s ("Could not find a path", NCCL's fallback), which NCCL tunes with, while the ring it
   falls back to runs at what its links give (:attr:`PcieRing.run_bw`): on Blackwell, whose arrays stop
   at 19 GB/s (``sm100SpeedArrayIntra``, taken for compute capability 10.0 and up, RTX 50 included),
   four GPUs of a switch without peer-to-peer (48 / 4.8 = 10 GB/s) already fall back.

What NCCL's figures leave out, timed here (NCCL still chooses with its own):

- a broadcast or a reduce runs as a chain, not the ring NCCL prices (below);
- a ring through host memory (:func:`host_staged_slowdown`): the kernel's first send and last receive of
  each loop each use one direction of the links alone.

NCCL prices a broadcast or a reduce on that ring, but those run as a chain from the root
(``src/device/broadcast.h``, ``reduce.h``: the rank before the root only receives), so the hop into
the root carries nothing; where the ring's bottleneck is a link that hop shares, the chain runs
faster than NCCL's figure (:attr:`PcieRing.chain_speedup`; the choice stays NCCL's).

The evidence that the search is so: NVIDIA/nccl-tests issue 307, 8 GeForce RTX 4090 on two Intel
sockets, 4 under one PCIe switch each (its ``PCI[24.0]`` switch uplinks and ``10.0/SYS`` paths), NCCL
prints ``Pattern 4, crossNic 0, nChannels 1, bw 5.000000/5.000000, type SYS/PIX`` (tests).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from zerocalc.nccl.tables import Collective

#: ``INTEL_P2P_OVERHEAD(bw) = bw*6/5`` (``src/graph/topo.h``).
INTEL_OVERHEAD = 6.0 / 5.0
#: NCCL's fallback graph when no ring fits (``search.cc``: ``bwIntra = bwInter = 0.1``).
FALLBACK_GBPS = 0.1


@dataclass(frozen=True)
class PcieLayout:
    """The communicator's GPUs on one PCIe-only node, as NCCL's topology holds them."""

    gpus: int
    per_socket: int  # GPUs one socket holds (the node's GPUs over its sockets)
    per_switch: int  # GPUs under one PCIe switch (1: CPU root ports)
    p2p: bool  # PCIe peer-to-peer between GPUs of one switch
    intel: bool  # the CPU is Intel x86 (the PHB overhead applies)
    pci_GBps: float  # a GPU's link and a switch's uplink, each direction
    smp_GBps: float  # the link between two sockets, each direction
    #: NCCL's P2P level lets peer-to-peer cross the CPU (``PATH_SYS``: AMD, module docstring rule 1);
    #: else it stops at ``PATH_PXB``, GPUs under one switch
    p2p_past_cpu: bool = False
    #: ... and across the sockets (``PATH_SYS``); ``None``: as :attr:`p2p_past_cpu` (a level of ``PATH_PHB``,
    #: ``NCCL_P2P_LEVEL=PHB``, crosses a socket's CPU but not the SMP link)
    p2p_past_socket: bool | None = None

    def socket(self, i: int) -> int:
        return i // self.per_socket

    def switch(self, i: int) -> tuple[int, int]:
        return self.socket(i), (i % self.per_socket) // self.per_switch


def p2p_past_cpu(cpu_vendor: str, era: int, gpus: int) -> bool:
    """Whether NCCL's default P2P level lets peer-to-peer cross the CPU (``PATH_SYS``) rather than stop at
    ``PATH_PXB`` (``src/graph/paths.cc`` ``ncclTopoCheckP2p``): on AMD x86 up to 2.22 ("In general, use
    P2P whenever we can", Intel, Zhaoxin and ARM set ``PATH_PXB``), and from 2.23 on AMD for two GPUs
    alone ("Allow P2P between pairs of GPUs on AMD systems"; v2.23.4 to v2.30.7)."""
    return cpu_vendor == "amd" and (era < 23 or gpus <= 2)


def smp_GBps(cpu_vendor: str, era: int) -> float:
    """NCCL's SMP-link bandwidth for the vendor at a release of ``era`` (module docstring, rule 3)."""
    if cpu_vendor == "intel":
        return 9.0 if era <= 17 else 10.0
    if cpu_vendor == "amd":
        return 16.0 if era >= 19 else 5000.0
    return 6.0


@dataclass(frozen=True)
class PcieRing:
    """The ring graph: channels and per-channel bandwidth (GB/s), and how much faster a broadcast or
    reduce chain runs than NCCL prices it (≥ 1)."""

    n_channels: int
    bw: float
    chain_speedup: float = 1.0
    found: bool = True
    #: the bandwidth a channel of the ring moves at on its links (GB/s): NCCL's fallback graph's 0.1 GB/s
    #: is a figure for its tuning alone, its kernels run the ring at what the links give
    run_bw: float | None = None


def hop_via_host(lay: PcieLayout, src: int, dst: int) -> bool:
    """Whether NCCL moves ``src`` → ``dst`` through host memory (its SHM transport) rather than by PCIe
    peer-to-peer: the driver refuses peer-to-peer, or the path (``PATH_PIX`` under one switch,
    ``PATH_PHB`` through a CPU, ``PATH_SYS`` across sockets) is past NCCL's P2P level (rule 1)."""
    same_switch = lay.per_switch > 1 and lay.switch(src) == lay.switch(dst)
    if not lay.p2p or same_switch:
        return not lay.p2p
    if lay.socket(src) != lay.socket(dst) and lay.p2p_past_socket is not None:
        return not lay.p2p_past_socket
    return not lay.p2p_past_cpu


def ring_via_host(lay: PcieLayout) -> bool:
    """Every hop of the ring goes through host memory (:func:`hop_via_host`): the ring's steps are the
    SHM transport's (:func:`host_staged_slowdown`)."""
    g = lay.gpus
    return g > 1 and all(hop_via_host(lay, i, (i + 1) % g) for i in range(g))


def _hop_loads(lay: PcieLayout, src: int, dst: int) -> dict[tuple, float]:
    """Link (a hashable name, one direction) → bandwidth one unit of data from ``src`` to ``dst`` takes
    off it (rules 1-2)."""
    same_switch = lay.per_switch > 1 and lay.switch(src) == lay.switch(dst)
    if same_switch and lay.p2p:
        return {("gpu-up", src): 1.0, ("gpu-down", dst): 1.0}
    cross = lay.socket(src) != lay.socket(dst)
    f = INTEL_OVERHEAD if lay.intel and not cross else 1.0  # PHB through an Intel CPU; not SYS
    out = {("gpu-up", src): f, ("gpu-down", dst): f}
    if lay.per_switch > 1:
        out[("switch-up", lay.switch(src))] = f
        out[("switch-down", lay.switch(dst))] = f
    if cross:
        out[("smp", lay.socket(src), lay.socket(dst))] = 1.0
    return out


def _loads(lay: PcieLayout, hops: list[tuple[int, int]]) -> dict[tuple, float]:
    total: dict[tuple, float] = defaultdict(float)
    for a, b in hops:
        for link, f in _hop_loads(lay, a, b).items():
            total[link] += f
    return total


def _cap(lay: PcieLayout, link: tuple) -> float:
    return lay.smp_GBps if link[0] == "smp" else lay.pci_GBps


def _channels(lay: PcieLayout, loads: dict[tuple, float], speed: float, max_channels: int) -> int:
    """Channels of ``speed`` the links hold (NCCL rounds each subtraction to 1e-3: ``SUB_ROUND``)."""
    n = max_channels
    for link, f in loads.items():
        n = min(n, math.floor(_cap(lay, link) / (f * speed) + 1e-6))
    return max(n, 0)


def _path_bw(lay: PcieLayout, a: int, b: int) -> float:
    """A path's bandwidth (the least of its links', ``paths.cc``), for ``maxBw``."""
    return min(_cap(lay, link) for link in _hop_loads(lay, a, b))


def search(lay: PcieLayout, speeds: tuple[float, ...], max_channels: int) -> PcieRing:
    """NCCL's ring graph on this layout (module docstring, rule 5), before ``ncclTopoDupChannels``."""
    g = lay.gpus
    hops = [(i, (i + 1) % g) for i in range(g)]
    loads = _loads(lay, hops)
    max_bw = max(_path_bw(lay, a, b) for a in range(g) for b in range(g) if a != b)
    total_bw = lay.pci_GBps
    idx = next((i for i, s in enumerate(speeds) if s <= max_bw and s <= total_bw), len(speeds) - 1)
    best: tuple[int, float] | None = None
    while True:  # pass 1
        s = speeds[idx]
        n = _channels(lay, loads, s, max_channels)
        if n >= 1 and (best is None or n * s > best[0] * best[1]):
            best = (n, s)
        if best is not None and best[0] * best[1] >= total_bw:
            break
        if idx < len(speeds) - 1 and (best is None or speeds[idx + 1] / best[1] > .49):
            idx += 1
            continue
        break
    if best is None:
        return PcieRing(1, FALLBACK_GBPS, found=False,
                        run_bw=min(lay.pci_GBps, 1.0 / _bottleneck(lay, loads)))
    n, s = best
    for faster in reversed([x for x in speeds if x > s]):  # pass 2: the same channels, faster
        if _channels(lay, loads, faster, max_channels) >= n:
            s = faster
    chain = [(i, (i + 1) % g) for i in range(g - 1)]  # a chain from rank 0: the hop into it is idle
    return PcieRing(n, s, _bottleneck(lay, loads) / _bottleneck(lay, _loads(lay, chain)))


def hop_GBps(lay: PcieLayout, hops: list[tuple[int, int]]) -> float:
    """The rate (GB/s) each of ``hops`` moves at when all carry the same bytes at once through the PCI
    tree: the busiest link's bandwidth over its load (rules 1-3). The point-to-point model's bandwidth
    of a rank's PCIe messages on one node (:mod:`zerocalc.nccl.p2p`)."""
    return 1.0 / _bottleneck(lay, _loads(lay, hops)) if hops else math.inf


def node_chain(lay: PcieLayout) -> list[tuple[int, int]]:
    """The GPU-to-GPU hops of a ring that enters a node at its first GPU from the network and leaves from
    its last (``search.cc``: NET n → GPU a → GPU b → … → GPU x → NET n, the PCI order first): ``g − 1`` hops,
    no hop back into the first GPU."""
    return [(i, i + 1) for i in range(lay.gpus - 1)]


def chain_channels(lay: PcieLayout, speed: float, max_channels: int) -> int:
    """Channels of ``speed`` (GB/s) the links of a node's chain (:func:`node_chain`) hold, every channel
    the same chain (NCCL's ``sameChannels``), subtracting each channel's bandwidth from every link the
    chain crosses as ``followPath`` does (rules 1-3): on several nodes, the node's share of the ring's
    links that NCCL's search counts the same way as on one."""
    return _channels(lay, _loads(lay, node_chain(lay)), speed, max_channels)


def _bottleneck(lay: PcieLayout, loads: dict[tuple, float]) -> float:
    return max((f / _cap(lay, link) for link, f in loads.items()), default=0.0) or 1.0


def host_staged_slowdown(coll: Collective, n_ranks: int, channels: int) -> float:
    """How much longer the bandwidth term of a Ring/Simple all-gather, reduce-scatter or all-reduce takes
    than NCCL prices it when every hop of the ring goes through host memory (NCCL's SHM transport: no
    PCIe peer-to-peer between the GPUs), on ``channels`` channels; 1 for other collectives.

    Each channel's kernel runs one loop per chunk as a sequence of primitives (``src/device/all_gather.h``,
    ``reduce_scatter.h``, ``all_reduce.h`` ``runRing``, v2.30.7; the same sequence in v2.12.12 and v2.19.4,
    under ``src/collectives/device/`` before 2.19): all-gather ``directSend``, N − 2
    ``directRecvCopyDirectSend``, ``directRecv`` (N primitives); reduce-scatter ``send``, N − 2
    ``recvReduceSend``, ``recvReduceCopy`` (N); all-reduce ``directSend``, N − 2
    ``directRecvReduceDirectSend``, ``directRecvReduceCopyDirectSend``, N − 2 ``directRecvCopyDirectSend``,
    ``directRecv`` (2N − 1). A
    primitive that receives and sends moves its chunk both ways over PCIe at once (reads from the host
    buffer, writes to the next one); the first (send only: GPU → host) and the last (receive only: host →
    GPU) use one direction and leave the other idle, where NCCL's model (``nsteps`` = N − 1, 2(N − 1)
    steps of full duplex) counts none. With P2P the receive reads the GPU's own memory and leaves the
    link to the send, which is why this is the SHM path's alone. One channel alone pays one step for the
    two: ``P / (P − 1)`` the time, ``P`` the primitives; the other channels' traffic fills the idle
    direction for the rest, so the extra step counts ``1 / channels`` of its time (an assumption, the
    channels running independently of each other)::

        slowdown = 1 + 1 / (channels · (P − 1))

    Simple alone: LL (and LL128, off by default over PCIe) moves each 8-byte word with its flag, and NCCL
    prices Ring/LL at half the link or less (``busBw * .5``, capped by ``llMaxBw``), so a direction it
    leaves idle is not the bandwidth it runs at; the sweeps' LL rows (to 32 KiB, latency-bound) are within
    0.88-1.17 of NCCL's figure without it.

    Evidence: the five sweeps of two RTX 2080 Ti under one PCIe 3.0 switch without P2P (SHM, 2 channels,
    the bundled ``*_perf-2xRTX2080Ti-pcie3-shm.txt``): at 4-512 MiB NCCL's figure is 0.64-0.68 of the time
    an all-gather takes and 0.80-0.81 of an all-reduce's (1 / 1.5 and 1 / 1.25 by this rule), while
    the alltoall (separate send and receive warps, ``src/device/sendrecv.h``) and the broadcast and reduce
    chains (each rank only sends, only receives or does both at once) have no idle step and run at NCCL's
    figure or faster."""
    if coll in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER):
        p = n_ranks
    elif coll == Collective.ALL_REDUCE:
        p = 2 * n_ranks - 1
    else:
        return 1.0
    if n_ranks < 2:
        return 1.0
    return 1.0 + 1.0 / (max(1, channels) * (p - 1))
