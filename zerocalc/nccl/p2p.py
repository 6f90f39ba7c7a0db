"""Time of NCCL's point-to-point operations: the nccl-tests ops outside NCCL's tuning model.

NCCL prices only its five collectives (``ncclTopoTuneModel``, :mod:`zerocalc.nccl.model`); ``ncclSend`` /
``ncclRecv`` have no cost table, and neither have ``ncclAlltoAll`` / ``ncclGather`` / ``ncclScatter``
(NCCL 2.28+), which ``ncclEnqueueCheck`` turns into the same grouped sends and receives (v2.30.7
``src/enqueue.cc``: one ``p2pTaskAppend`` per peer). nccl-tests runs (``src/<test>.cu``, ``RunColl``):

- ``alltoall_perf``: every rank sends ``size / n`` to each rank and receives as much, in one
  ``ncclGroupStart/End`` (n − 1 sends and n − 1 receives over links, and a local copy);
- ``sendrecv_perf``: every rank sends ``size`` to rank + 1 and receives ``size`` from rank − 1;
- ``gather_perf`` / ``scatter_perf``: the root receives (sends) ``size / n`` from (to) every rank;
- ``hypercube_perf``: log2(n) groups in turn, group k exchanging ``2^k · size / n`` with rank ^ 2^k.

The model, per rank and per group of concurrent messages (the busiest rank sets the time):

1. **Channels** (``src/graph/paths.cc`` ``ncclTopoComputeP2pChannels``): ``p2pnChannels`` = the
   communicator's channels (:mod:`zerocalc.nccl.channels`) rounded up to a power of two;
   ``p2pnChannelsPerPeer`` = the fewest channels any peer asks for, rounded up to a power of two and at
   most ``p2pnChannels``: an NVLink peer 2 per NVLink link of the path (``2 · path bw / ncclTopoNVLinkBw``),
   a PCIe peer 2, a network peer 1 before 2.12 (``ncclTopoGetNchannels``, v2.8-v2.11), then
   ``NCCL_NCHANNELS_PER_NET_PEER``: 2 in 2.12–2.19, in 2.20–2.28 (its default -1 from v2.20.3) 2 halved
   while ``2 · nRanks > 4 · p2pnChannels`` (at least the NICs the GPU needs), from 2.29 enough channels of
   ``NCCL_P2P_PER_CHANNEL_NET_BW`` = 14 GB/s to carry the GPU's NICs; from 2.29, on several nodes, halved
   while ``perPeer · ceil(peers / 8) > p2pnChannels`` (``NCCL_MAX_DEV_WORK_P2P_PER_BATCH`` = 8; peers =
   nRanks in 2.29, the communicator's ``maxP2pPeers`` in 2.30, which nccl-tests' ``sendrecv_perf`` sets
   to 2 when built against NCCL 2.30+, ``src/sendrecv.cu`` ``SendRecvInitCommConfig``).
2. **Protocol and split of one message** (``addP2pToPlan`` / ``scheduleP2pTasksToPlan``, v2.26.2 to
   v2.30.7 ``src/enqueue.cc``; the older releases' differences at :func:`protocol` and
   :func:`message_channels`): LL when the message is at most ``perPeer × NCCL_P2P_LL_THRESHOLD``
   (16 KiB), else Simple, and Simple over the network (no LL buffers there by default); its step is
   ``p2pChunkSize`` (``src/init.cc``: 128 KiB across nodes ``NCCL_P2P_NET_CHUNKSIZE``, 512 KiB on one
   all-NVLink node ``NCCL_P2P_NVL_CHUNKSIZE``, 128 KiB over PCIe) for Simple and 64 KiB for LL (its
   512 KiB buffer / ``NCCL_STEPS`` 8); the message starts on
   ``min(nChannelsMin, ceil(bytes / minPart))`` channels (``nChannelsMin`` = perPeer halved while
   ``nChannelsMin · nRanks > p2pnChannels``) and doubles them, up to perPeer, while a part exceeds
   ``maxPart`` (minPart/maxPart = step/2 and step across nodes, step/8 and 32 steps on one node).
3. **Bandwidth** (GB/s): a channel moves at most one NVLink link's bandwidth as NCCL counts it
   (``ncclTopoNVLinkBw``, ``src/graph/topo.h``: 20 on sm80, 20.6 on sm90, the unit ``paths.cc`` sizes
   a peer's channels in), the PCIe link's over PCIe, and ``NCCL_P2P_PER_CHANNEL_NET_BW`` = 14 GB/s over the
   network (v2.29.2+ ``paths.cc``, NCCL's own figure for one network channel, used for every release);
   a rank's messages share its links: its NVLink bandwidth inside the node (:func:`zerocalc.nccl.graph.
   intra_bw_GBps`; on one PCIe-only node, what the node's messages at once leave it on the PCI tree's
   shared links: a switch's uplink, the SMP link, host memory when peer-to-peer is off,
   :func:`zerocalc.nccl.pcie.hop_GBps`) and its share of the node's NICs across nodes
   (``nics_per_node × nic_Gbps / 8`` over the node's ranks; through host memory, ``gpudirect_rdma`` false,
   :data:`zerocalc.nccl.graph.HOST_RELAY_SHARE` of what the collectives' ring graph gives a NIC,
   :func:`host_path_GBps`; in gather and scatter, where the root's node
   peers exchange with it over NVLink or PCIe alone, the root's own NICs, and for a scatter under PXN
   every NIC of its node, the bytes PXN relays over NVLink added to the root's NVLink load:
   :func:`root_net`), and the ``p2pnChannels`` channels. LL carries 4 data bytes per 8-byte line (half).
   The group's transfer time is the largest of: each message over its channels, each link class's bytes
   over the rank's bandwidth on it, and all messages' channel time spread over ``p2pnChannels``; plus,
   with Simple, one step of the pipeline's fill (step 5).
4. **Latency** (µs, no published p2p figure): ``tuning.cc``'s Ring base latency of the protocol plus one
   Ring hop of the slowest link class the group uses (``hwLat``: NVLink, PCI or network, with the
   network's own latency, ``latencyInter``: the topology's ``net_wire_latency_us`` where it gives one,
   else ``net_latency_us``, once: tuning.cc adds it a second time to a Simple collective's network step
   for "the flush extra latency", but the flush of a GPUDirect receive is a read the receiving proxy
   posts on its own NIC, ``iflush``, ``src/transport/net.cc`` ``recvProxyProgress``, v2.18.3 to v2.30.7,
   not a network crossing; a 64 B scatter from a p4d root to 15 ranks, 8 of them across EFA, takes 89 µs
   where twice EFA's 75 µs would pass 150: the bundled NCCL 2.18.3 sweep), times the waves the messages
   need: NCCL puts up to 8 sends and 8 receives of a group into one work of one channel, which runs them at
   once (``NCCL_MAX_WORK_ELEMENTS_P2P`` 16, "8 send/recv per round per CTA", v2.18.3 to v2.21.5
   ``src/enqueue.cc``; ``NCCL_MAX_DEV_WORK_P2P_PER_BATCH`` 8 from v2.22.3), so waves of 8 messages per
   channel on ``p2pnChannels`` channels; plus, per network message, the proxy's network overhead as
   tuning.cc charges a Ring network step (``getNetOverhead``: 1 µs on Intel hosts, 2 on AMD; × 3 for
   Simple): the proxy thread posts each peer's transfers one after another, a PXN send's the proxy of the
   GPU it relays through (:func:`root_net`).
5. **Pipeline fill** (Simple): a message's part on a channel moves one step (``p2pChunkSize``) at a time
   through the connection's buffer, by two groups of the channel's warps (``src/device/sendrecv.h``
   ``runSend`` / ``runRecv``: a ``directSend`` / ``directRecv`` per chunk, the block's warps split into
   send and receive warps; the same per-chunk loop in v2.12.12): the send warps copy a step in and post it
   after a fence (``prims_simple.h`` ``postPeer``), the receive warps wait for the post (``waitPeer``)
   before they copy it out. The two copies overlap step by step, so a part of k steps takes k + 1 step
   times: the first step is sent with nothing yet to receive (:func:`step_fill_us`: one step, or the part
   when smaller, at one channel's rate, on top of the transfer). LL has no such wait: each 8-byte line
   carries its own flag and the receiver takes it as it lands (``prims_ll.h`` ``readLL``). Seen on one
   node of 8 and of 4 H100 (NCCL 2.29.2, one process per GPU, the bundled ``five-tests-*`` logs):
   alltoall at 32 MiB (a peer's 4 or 8 MiB on 4 or 8 channels: two 512 KiB steps a channel) took 124.8
   and 109.9 µs, where the transfer and latency alone are 0.73x and 0.72x of that, 25 µs short a node:
   a 512 KiB step at 20.6 GB/s is 25.5 µs (with it: 0.93x, 0.96x; at 2 GiB and more, 64 steps a channel,
   0.93-0.96x either way); sendrecv on the same nodes (8-16 steps a channel at 32 MiB) moves 18.6-19.9
   GB/s a channel, 0.96-0.99x without the step, 1.05-1.07x with it.

``NCCL_ALGO``, ``NCCL_PROTO`` and tuner plugins are not applied: NCCL reads them when it tunes
collectives (``tuning.cc``, ``getCollInfo``), and its p2p path picks LL or Simple by size and
connection alone (``addP2pToPlan``).

Left out: the local copy of a rank's own block (alltoall, hypercube), PXN routing of inter-node
traffic through a peer GPU where every rank of the node sends across nodes (it moves the same bytes through
the same NICs), the channels NCCL gives each group of up to 8 peers (``ncclChannelComputeBase``, v2.18.3;
``ncclP2pChannelBaseForRound`` from v2.22.3: one channel base per peer node across nodes; here every
message spreads over all ``p2pnChannels``), NCCL's copy-engine and
symmetric-memory (``NCCL_CTA_POLICY``) and device-API paths, buffer registration (``-R``), rail-optimised
or oversubscribed fabrics (every NIC is taken to reach every other at its speed), and congestion between
the nodes' NICs beyond each NIC's own speed. Releases before 2.14 (one p2p step of ``NCCL_BUFFSIZE / 8``
for every transport) are priced with the rules of 2.14–2.19. ``alltoallv_perf`` (uneven counts) is
recognised but not priced.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import StrEnum

from zerocalc.errors import ConfigError, UnpricedOpError
from zerocalc.nccl.graph import (
    HOST_RELAY_SHARE,
    PCIE_GBPS_X16,
    Graph,
    as_nccl_sees_it,
    comm_nvlink_GBps,
    intra_bw_GBps,
    machine,
    pcie_layout,
)
from zerocalc.nccl.pcie import PcieLayout, hop_GBps
from zerocalc.nccl.tables import NET, NVLINK, PCI, Algorithm, Protocol, Release, parse_version
from zerocalc.topology import Topology, require

_NEEDED_BY = "the point-to-point model"

ALGORITHM = "P2P"
"""The ``algorithm`` a sweep row priced here carries (NCCL runs p2p outside its algorithm table)."""


class P2pOp(StrEnum):
    """The point-to-point patterns nccl-tests times (values as the sweep check reports them)."""

    ALL_TO_ALL = "all_to_all"
    SENDRECV = "sendrecv"
    GATHER = "gather"
    SCATTER = "scatter"
    HYPERCUBE = "hypercube"


#: nccl-tests test (``<test>_perf``) → the pattern priced here.
NCCL_TESTS_P2P: dict[str, P2pOp] = {
    "alltoall": P2pOp.ALL_TO_ALL, "sendrecv": P2pOp.SENDRECV, "gather": P2pOp.GATHER,
    "scatter": P2pOp.SCATTER, "hypercube": P2pOp.HYPERCUBE,
}
#: nccl-tests tests recognised but not priced, with why.
UNPRICED: dict[str, str] = {
    "alltoallv": "alltoallv_perf sends an uneven count to each peer (nccl-tests src/alltoallv.cu), which "
                 "its count column does not tell",
}

P2P_LL_THRESHOLD = 16384
"""``NCCL_P2P_LL_THRESHOLD`` (bytes per channel, ``src/enqueue.cc``)."""
NET_CHANNEL_GBPS = 14.0
"""``NCCL_P2P_PER_CHANNEL_NET_BW`` (GB/s, v2.29.2+ ``src/graph/paths.cc``)."""
P2P_CHUNK_NET = 1 << 17
P2P_CHUNK_NVL = 1 << 19
P2P_CHUNK_PCI = 1 << 17
"""``NCCL_P2P_NET_CHUNKSIZE`` / ``NVL`` / ``PCI`` (``src/init.cc``)."""
LL_STEP = (1 << 19) // 8
"""LL step: the LL buffer (``DEFAULT_LL_BUFFSIZE``: 8 lines × 512 threads × 8 steps × 16 bytes) over
``NCCL_STEPS`` (8)."""
P2P_PER_BATCH = 8
"""``NCCL_MAX_DEV_WORK_P2P_PER_BATCH`` (``src/include/device.h``)."""

_LINK_INDEX = {"nvl": NVLINK, "pci": PCI, "net": NET}


def _pow2_up(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1, n))))


@dataclass(frozen=True)
class RootNet:
    """A root's network across nodes in gather and scatter (:func:`root_net`)."""

    #: GB/s it sends at (scatter)
    send_GBps: float
    #: GB/s it receives at (gather)
    receive_GBps: float
    #: the proxy threads that post its sends (one per process; several under PXN)
    send_proxies: int = 1
    #: the share of its sends across nodes that PXN first moves over NVLink to the GPU of their NIC
    relayed: float = 0.0


@dataclass(frozen=True)
class P2pComm:
    """What a communicator sets up for point-to-point (module docstring, steps 1 and 3)."""

    n_ranks: int
    ranks_per_node: int
    n_nodes: int
    version: tuple[int, int, int]
    release: Release
    p2p_channels: int
    per_peer: int
    chunk_bytes: int
    #: link class ("nvl", "pci", "net") → (one channel's GB/s, the rank's GB/s on that class)
    bw: dict[str, tuple[float, float]]
    #: the network's own latency per hop (µs; ``latencyInter`` in tuning.cc)
    net_latency_us: float
    #: ``getNetOverhead`` (µs per network post, tuning.cc)
    net_overhead_us: float = 1.0
    #: one node of GPUs joined by PCIe alone: its PCI tree (:mod:`zerocalc.nccl.pcie`), whose shared
    #: links (a switch's uplink, the SMP link, host memory) bound a rank's PCIe messages; ``None`` else
    pci_layout: PcieLayout | None = None
    #: across nodes, a root's network when the rest of its node leaves it idle, as in gather and scatter
    #: (:func:`root_net`); ``None`` on one node
    root_net: RootNet | None = None

    @property
    def intra(self) -> str:
        return "nvl" if "nvl" in self.bw else "pci"


def p2p_comm(topo: Topology, n_ranks: int, release: Release, version: str, comm_channels: int, *,
             max_peers: int | None = None, per_net_peer: int | None = None, min_p2p: int | None = None,
             max_p2p: int | None = None, net_chunk: int | None = None, nvl_chunk: int | None = None,
             pci_chunk: int | None = None, buffsize: int | None = None, pxn_disable: int | None = None,
             pxn_level: int | None = None, ring: Graph | None = None) -> P2pComm:
    """The p2p setup of ``n_ranks`` ranks on ``topo`` (ranks fill nodes of ``gpus_per_node``) under NCCL
    ``version`` (``release`` its tables), ``comm_channels`` being ``comm->nChannels``; ``max_peers``: the
    communicator's ``maxP2pPeers`` (NCCL 2.30+ config; ``None``: all ranks). ``per_net_peer``:
    ``NCCL_NCHANNELS_PER_NET_PEER`` (from v2.12: a network peer's channels in place of the default rule,
    and from v2.29 no halving to fit the peers in a batch, ``ncclTopoGetNchannels`` /
    ``ncclTopoComputeP2pChannels``); ``min_p2p`` / ``max_p2p``: ``NCCL_MIN_P2P_NCHANNELS`` /
    ``NCCL_MAX_P2P_NCHANNELS``, which bound ``comm->nChannels`` before it is rounded to ``p2pnChannels``
    (v2.8-v2.30); ``net_chunk`` / ``nvl_chunk`` / ``pci_chunk``: ``NCCL_P2P_NET_CHUNKSIZE`` /
    ``NVL`` / ``PCI`` (from v2.14), the step of each transport's p2p path; ``buffsize``: ``NCCL_BUFFSIZE``,
    whose eighth caps the step (``NCCL_STEPS``; ``computeBuffSizes``, ``src/init.cc`` v2.16-v2.30);
    ``pxn_disable`` / ``pxn_level``: ``NCCL_PXN_DISABLE`` / ``NCCL_P2P_PXN_LEVEL`` (:func:`root_net`);
    ``None``: unset. ``ring``: the communicator's Ring graph as its collectives are tuned (a channel count
    an INFO line states applied, :func:`zerocalc.nccl.model.tune`), read through host memory
    (:func:`host_path_GBps`); ``None``: the one :func:`zerocalc.nccl.graph.machine` derives."""
    if not isinstance(n_ranks, int) or n_ranks < 2:
        raise ConfigError(f"point-to-point needs at least 2 ranks, got {n_ranks!r}", option="ranks")
    if release.era <= 6:  # ncclSend / ncclRecv arrive in v2.7.3 (src/nccl.h.in; none in v2.6.4)
        raise UnpricedOpError(f"NCCL {version} has no point-to-point operations (ncclSend / ncclRecv arrive "
                              "in NCCL 2.7)", option="--nccl-version")
    v = parse_version(version)
    topo = as_nccl_sees_it(topo, release)
    cc = require(topo, "compute_capability", _NEEDED_BY)
    g = min(topo.gpus_per_node, n_ranks)
    n_nodes = math.ceil(n_ranks / topo.gpus_per_node)
    nvlink = require(topo, "nvlink_gen", _NEEDED_BY) > 0
    intra = intra_bw_GBps(topo, release)
    if nvlink:
        per_link = release.nvlink_bw_per_link.get(cc) or release.nvlink_bw_per_link[
            max((k for k in release.nvlink_bw_per_link if k <= cc), default=80)]
        peer, intra = comm_nvlink_GBps(topo, release, g)  # a few GPUs of a full mesh: their links alone
        bw = {"nvl": (per_link, intra)}
        asks = [2 * max(1, int(peer / per_link + 1e-9))] if g > 1 else []
    else:
        bw = {"pci": (intra, intra)}
        asks = [2] if g > 1 else []
    p2p_pre = max(comm_channels if max_p2p is None else min(comm_channels, max_p2p),
                  1 if min_p2p is None else min_p2p)
    p2p_channels = _pow2_up(p2p_pre)
    if n_nodes > 1:
        nics = require(topo, "nics_per_node", _NEEDED_BY)
        nic = require(topo, "nic_Gbps", _NEEDED_BY) / 8.0
        gen = require(topo, "pcie_gen", _NEEDED_BY)
        path = min(nic, PCIE_GBPS_X16.get(gen, nic))
        relayed = topo.gpudirect_rdma is False
        # the rate a NIC carries: through host memory the Ring graph's bound too (the channels' ask below
        # reads NCCL's path, ncclTopoGetLocalNetCountByBw)
        moved = host_path_GBps(path, nics, ring or machine(topo, n_ranks, release).graphs[Algorithm.RING]) \
            if relayed else path
        bw["net"] = (NET_CHANNEL_GBPS, nics * moved / g * (HOST_RELAY_SHARE if relayed else 1.0))
        pxn = v >= (2, 12) and nvlink and not relayed and not pxn_disable \
            and pxn_level != 0 and getattr(topo, "gpu_arch", None) is None  # RCCL: PXN_DISABLE 1
        root = root_net(nics, moved, g, pxn=pxn, host_relay=relayed)
        asks.append(_net_peer_ask(v, per_net_peer, p2p_pre, n_ranks, max(1, nics // g), path))
    per_peer = _pow2_up(min([p2p_pre, *asks]) if v < (2, 29) else min(asks or [p2p_pre]))
    if v >= (2, 29) and n_nodes > 1 and not (per_net_peer and per_net_peer > 0):
        peers = n_ranks if v < (2, 30) or max_peers is None else max_peers
        while per_peer * math.ceil(peers / P2P_PER_BATCH) > p2p_channels and per_peer > 1:
            per_peer //= 2
    per_peer = min(per_peer, p2p_channels)
    chunk = P2P_CHUNK_NET if n_nodes > 1 else P2P_CHUNK_NVL if nvlink else P2P_CHUNK_PCI
    told = (net_chunk if n_nodes > 1 else nvl_chunk if nvlink else pci_chunk) if v >= (2, 14) else None
    chunk = told if told and told > 0 else chunk
    if buffsize and buffsize > 0 and chunk * 8 > buffsize:  # "not larger than coll chunksize"
        chunk = buffsize // 8
    wire = topo.net_wire_latency_us if topo.net_wire_latency_us is not None else topo.net_latency_us
    layout = pcie_layout(topo, g, release) if not nvlink and n_nodes == 1 and g > 1 else None
    return P2pComm(n_ranks, g, n_nodes, v, release, p2p_channels, per_peer, chunk, bw, float(wire or 0.0),
                   2.0 if require(topo, "cpu_vendor", _NEEDED_BY) == "amd" else 1.0, layout,
                   root if n_nodes > 1 else None)


def host_path_GBps(path: float, nics: int, ring: Graph) -> float:
    """One NIC's rate through host memory (no GPUDirect RDMA), before
    :data:`~zerocalc.nccl.graph.HOST_RELAY_SHARE`: the lesser of the NIC's path (``path``, GB/s) and its
    share of the node's network as NCCL's Ring graph holds it (``nChannels × bwInter`` over the ``nics``).

    Point-to-point goes through the same host memory as a collective: without GDR a p2p network
    connection's buffers are a shared pool in pinned host memory (``sharedNetBuffersInit`` with ``cuda``
    = ``useGdr`` = 0: ``ncclCudaHostCalloc``; the ``/Shared`` of the INFO line ``via NET/IB/1/Shared``),
    as a ring's Simple buffers are (``NCCL_NET_MAP_ADD_POINTER`` in host memory unless ``useGdr``;
    ``src/transport/net.cc``, v2.26.2), and the GPU writes its sends into them and reads its receives from
    them over the PCIe path ``ncclTopoComputePaths`` routes through the GPU's CPU (``addInterStep``,
    ``src/graph/paths.cc`` v2.12-v2.30), the path NCCL's graph search sized the Ring graph on. The bound is
    that path's, one per NIC whatever channels use it: the collective model prices it at
    :data:`~zerocalc.nccl.graph.HOST_RELAY_SHARE` of the Ring graph's rate (``Graph.run_scale``), and a
    channel count an INFO line states (``2 coll channels``: one graph channel, doubled by
    ``ncclTopoPostset``) is how a run shows NCCL found that path slower than the topology's NIC."""
    return min(path, ring.n_channels * ring.bw_inter / max(1, nics))


def _net_peer_ask(v: tuple[int, ...], per_net_peer: int | None, p2p_pre: int, n_ranks: int, nics_per_gpu: int,
                  path: float) -> int:
    """The channels a network peer asks for (``ncclTopoGetNchannels`` / ``ncclTopoComputeP2pChannels``,
    v2.8-v2.30) before the rounding and the batch halving of :func:`p2p_comm`."""
    if v < (2, 12):
        return 1
    if per_net_peer is not None and per_net_peer > 0:  # -1: the default rule (v2.20-v2.28)
        return per_net_peer
    if v < (2, 20):
        return 2
    if v < (2, 29):
        c = 2
        while c * n_ranks > p2p_pre * 4 and c > 1:
            c //= 2
        return max(nics_per_gpu, c)
    return max(nics_per_gpu, math.ceil(int(nics_per_gpu * path) / NET_CHANNEL_GBPS))


def root_net(nics: int, nic_GBps: float, gpus: int, *, pxn: bool, host_relay: bool = False) -> RootNet:
    """A root's network across nodes in gather and scatter, where the other
    ranks of its node exchange with the root alone, over NVLink or PCIe, and leave the node's ``nics``
    NICs (``nic_GBps`` each, what the GPU's path to one carries) to it.

    A network connection's NIC (``ncclTopoGetNetDev``, ``src/graph/search.cc``, v2.12.7 to v2.30.7): the
    NICs nearest the GPU (``ncclTopoGetLocalNet``: ``max(1, nics // gpus)`` of them, or the one NIC it
    shares with ``gpus / nics`` GPUs when the node has fewer NICs than GPUs); with PXN
    (``NCCL_P2P_PXN_LEVEL`` default 2, from v2.12.7) a send goes out through the NIC nearest the GPU of
    the peer's local index on the sender's node, relayed over NVLink through that GPU's proxy
    (``proxyRank``; the INFO lines' ``NET/…/1(2)``: NIC 1 through rank 2), so a root's sends to the peers
    of another node leave through every NIC of its node, posted by the proxy threads of the GPUs
    nearest them (``min(nics, gpus)``). A receive always takes the receiver's own NICs
    (``net.cc`` ``recvSetup`` asks for the NIC of its own rank; ``paths.cc`` enables PXN "in the
    GPU->NIC direction" only), so a gather's root takes in its data on its own NICs, as do the senders of
    each other node, whose PXN send picks the NIC of the root's local index. PXN is off under
    ``NCCL_PXN_DISABLE=1`` or ``NCCL_P2P_PXN_LEVEL=0``, before v2.12.7, without NVLink between the GPUs and
    without GPUDirect RDMA (``ncclTopoGetPxnRanks``), and in RCCL, whose ``NCCL_PXN_DISABLE`` defaults to
    1 (ROCm/rccl ``src/graph/paths.cc``; ROCm/rccl issue 1209): then a root sends on its own NICs too,
    and through host memory (``host_relay``) at :data:`zerocalc.nccl.graph.HOST_RELAY_SHARE` of their
    rate."""
    own_nics = max(1, nics // max(1, gpus))
    send_nics = nics if pxn else own_nics
    relay = HOST_RELAY_SHARE if host_relay else 1.0
    return RootNet(send_nics * nic_GBps * relay, own_nics * nic_GBps * relay, min(nics, gpus) if pxn else 1,
                   1.0 - own_nics / nics if pxn and nics > own_nics else 0.0)


def protocol(comm: P2pComm, n_bytes: int, kind: str = "nvl") -> Protocol:
    """The protocol of one message of ``n_bytes`` over link class ``kind``: LL up to ``perPeer ×
    NCCL_P2P_LL_THRESHOLD`` bytes, Simple above (``addP2pToPlan``, v2.26.2 to v2.30.7); the releases
    modelled by 2.19's and 2.21's tables decide per chunk (``bytes <= NCCL_P2P_LL_THRESHOLD``, v2.19.4 /
    v2.21.5 ``src/enqueue.cc``), and a message's chunks are at least ``step / 8`` (64 KiB) there, so only
    a message of at most 16 KiB goes LL. Over the network always Simple: a p2p network connection has LL
    buffers only under ``NCCL_ALLOC_P2P_NET_LL_BUFFERS=1`` (default 0; ``src/transport/net.cc``, v2.19.4
    to v2.30.7), and LL needs them (``conn->buffs[NCCL_PROTO_LL] != nullptr``)."""
    if kind == "net":
        return Protocol.SIMPLE
    threshold = P2P_LL_THRESHOLD if comm.release.era <= 21 else comm.per_peer * P2P_LL_THRESHOLD
    return Protocol.LL if n_bytes <= threshold else Protocol.SIMPLE


def message_channels(comm: P2pComm, n_bytes: int, kind: str = "nvl") -> int:
    """The channels one message of ``n_bytes`` is split over (module step 2): ``addP2pToPlan`` from
    v2.26.2; v2.21.5's ``calcP2pChunkSize`` cuts the same parts as chunks, one channel each; v2.19.4's
    parts are at least ``step / 8`` on several nodes too, and it halves the starting channels
    (``nChannelsMin``) and the most (``nChannelsMax``, while ``nChannelsMax · nRanks > 4 · p2pnChannels``)
    on one node only (``scheduleP2pTasksToPlan``)."""
    if n_bytes <= 0:
        return 1
    step = LL_STEP if protocol(comm, n_bytes, kind) == Protocol.LL else comm.chunk_bytes
    multi = comm.n_nodes > 1
    old = comm.release.era <= 19
    min_part = step // 2 if multi and not old else step // 8
    max_part = step if multi else step * 32
    c_max = c_min = comm.per_peer
    if not (old and multi):
        while c_min * comm.n_ranks > comm.p2p_channels and c_min > 1:
            c_min //= 2
    if old and not multi:
        while c_max * comm.n_ranks > comm.p2p_channels * 4 and c_max > 1:
            c_max //= 2
    c = min(c_min, math.ceil(n_bytes / min_part))
    part = max(min_part, math.ceil(n_bytes / c))
    while part > max_part and c <= c_max // 2:
        c *= 2
        part = math.ceil(n_bytes / c)
    return c


@dataclass(frozen=True)
class P2pTime:
    """One call's predicted time and the protocol its messages use."""

    time_s: float
    protocol: Protocol
    latency_us: float
    transfer_us: float


def step_fill_us(comm: P2pComm, n_bytes: int, channels: int, channel_GBps: float) -> float:
    """The pipeline's fill of a Simple message of ``n_bytes`` on ``channels`` channels (module step 5): one
    step (``p2pChunkSize``, or the message's part on a channel when smaller) at one channel's rate, µs."""
    return min(math.ceil(n_bytes / max(1, channels)), comm.chunk_bytes) / (channel_GBps * 1e3)


def group_time(comm: P2pComm, messages: list[tuple[int, str]],
               hops: list[tuple[int, int]] | tuple = (), proxies: int = 1, relayed: int = 0) -> P2pTime:
    """One rank's group of concurrent messages ``(bytes, link class)`` (module steps 2–4); ``hops``: the
    (sender, receiver) GPU pairs of the whole node's group at once, whose load on a PCIe node's shared
    links bounds the rank's PCIe bandwidth (:func:`zerocalc.nccl.pcie.hop_GBps`, each of the rank's PCIe
    messages at that rate); ``proxies``: the proxy threads that post the rank's network messages (more
    than its own under PXN, :func:`root_net`), each posting its share one after another; ``relayed``:
    bytes PXN moves over the node's own links (NVLink) on their way to another GPU's NIC, on top of the
    messages' own."""
    if not messages:
        return P2pTime(0.0, Protocol.SIMPLE, 0.0, 0.0)
    protos = [protocol(comm, b, k) for b, k in messages]
    proto = Protocol.LL if all(p == Protocol.LL for p in protos) else Protocol.SIMPLE
    per_msg, per_link, chan_us, fill = 0.0, {}, 0.0, 0.0
    for (b, kind), p in zip(messages, protos, strict=True):
        eff = 0.5 if p == Protocol.LL else 1.0
        ch_bw, link_bw = comm.bw[kind]
        if kind == "pci" and comm.pci_layout is not None and hops:
            n_pci = sum(1 for _, k in messages if k == "pci")
            link_bw = min(link_bw, n_pci * hop_GBps(comm.pci_layout, list(hops)))
        c = message_channels(comm, b, kind)
        per_msg = max(per_msg, b / (c * ch_bw * eff * 1e3))
        if p == Protocol.SIMPLE:
            fill = max(fill, step_fill_us(comm, b, c, ch_bw))
        per_link[kind] = per_link.get(kind, 0.0) + b / (link_bw * eff * 1e3)
        chan_us += b / (ch_bw * eff * 1e3)
    if relayed:
        per_link[comm.intra] = per_link.get(comm.intra, 0.0) + relayed / (comm.bw[comm.intra][1] * 1e3)
    transfer = max(per_msg, *per_link.values(), chan_us / comm.p2p_channels) + fill
    pi = {Protocol.LL: 0, Protocol.LL128: 1, Protocol.SIMPLE: 2}[proto]
    rel = comm.release
    hop = max(rel.hw_lat_us[_LINK_INDEX[k]][Algorithm.RING][pi] for _, k in messages)
    if any(k == "net" for _, k in messages):
        hop = max(hop, rel.hw_lat_us[NET][Algorithm.RING][pi] + comm.net_latency_us)
    waves = math.ceil(math.ceil(len(messages) / P2P_PER_BATCH) / comm.p2p_channels)
    posts = math.ceil(sum(1 for _, k in messages if k == "net") / max(1, proxies))
    latency = (rel.base_lat_us[Algorithm.RING][pi] + hop * waves
               + posts * comm.net_overhead_us * (3 if proto == Protocol.SIMPLE else 1))
    return P2pTime((latency + transfer) * 1e-6, proto, latency, transfer)


def _peers(comm: P2pComm) -> tuple[int, int]:
    """(peers inside the node, peers on other nodes) of the busiest rank."""
    return comm.ranks_per_node - 1, comm.n_ranks - comm.ranks_per_node


def op_time(comm: P2pComm, op: P2pOp, size_bytes: int) -> P2pTime:
    """The time of one nccl-tests call of ``op`` whose ``size`` column is ``size_bytes`` (module
    docstring for what each test sends)."""
    n = comm.n_ranks
    if op == P2pOp.SENDRECV:
        kinds = {comm.intra} if comm.n_nodes == 1 else {comm.intra, "net"}
        if comm.ranks_per_node == 1:
            kinds = {"net"}
        ring = [(i, (i + 1) % comm.ranks_per_node) for i in range(comm.ranks_per_node)]
        times = [group_time(comm, [(size_bytes, k)], ring) for k in sorted(kinds)]
        return max(times, key=lambda t: t.time_s)
    if op == P2pOp.HYPERCUBE:
        if n & (n - 1):
            raise ConfigError(f"hypercube_perf exchanges with rank ^ 2^k: {n} ranks is not a power of two",
                              option="ranks")
        block = size_bytes // n
        g = comm.ranks_per_node
        steps = [group_time(comm, [(block * mask, comm.intra if mask < g else "net")],
                            [(i, i ^ mask) for i in range(g) if i ^ mask < g])
                 for mask in (1 << k for k in range(int(math.log2(n))))]
        last = steps[-1]
        return P2pTime(sum(s.time_s for s in steps), last.protocol, sum(s.latency_us for s in steps),
                       sum(s.transfer_us for s in steps))
    intra, inter = _peers(comm)
    m = size_bytes // n
    proxies, relayed = 1, 0
    if op in (P2pOp.GATHER, P2pOp.SCATTER) and comm.root_net is not None:
        root = comm.root_net
        rate = root.send_GBps if op == P2pOp.SCATTER else root.receive_GBps
        if op == P2pOp.SCATTER:
            proxies, relayed = root.send_proxies, int(root.relayed * m * inter)
        comm = replace(comm, bw={**comm.bw, "net": (comm.bw["net"][0], rate)})
    g = comm.ranks_per_node
    hops = ([(i, j) for i in range(g) for j in range(g) if i != j] if op == P2pOp.ALL_TO_ALL
            else [(j, 0) for j in range(1, g)] if op == P2pOp.GATHER else [(0, j) for j in range(1, g)])
    return group_time(comm, [(m, comm.intra)] * intra + [(m, "net")] * inter, hops, proxies, relayed)
