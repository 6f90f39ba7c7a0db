"""RCCL's point-to-point ops (all-to-all, sendrecv, gather, scatter, hypercube), timed as data moves.

**What runs.** ``ncclAllToAll`` (ROCm/rccl ``src/collectives.cc``, ``ncclAllToAll_impl``) runs, in this
order: an MSCCL program loaded for the communicator (``mscclAvailable``:
``tools/msccl-algorithms/alltoall-8n-*.xml``, one node of 8 GPUs, out-of-place, 0 to 45088768 B); the pivot
all-to-all where the rome model enables it (``pivotA2AEnabled``: ``rome_model_56`` alone, 16 GPUs of 4 CPUs,
none of the machines priced here); else ``ncclGroupStart``, one ``ncclSend`` and one ``ncclRecv`` per rank,
``ncclGroupEnd``: NCCL's point-to-point path, which RCCL's ``tuning.cc`` does not price (it tables its five
collectives). rccl-tests' ``alltoall_perf`` (nccl-tests' ``src/alltoall.cu``) has every rank send
``size / n`` to each rank.

**Time** (:func:`all_to_all_us`), the grouped sends:

* latency: one Ring/Simple step of RCCL's table, ``baseLat`` + the hop of the slowest link the call crosses
  (``hwLat``: xGMI on one node, the network across nodes, a steering network hop above
  :data:`zerocalc.nccl.rccl_net.STEERING_HOP_US` taken at 2.20.5's model 5 figure as
  :mod:`zerocalc.nccl.rccl_net` does); a message of at most ``NCCL_P2P_LL_THRESHOLD`` on one node goes LL
  (× ``p2pnChannelsPerPeer`` after the NCCL 2.23 merge, :func:`channels_per_peer`) and takes LL's. The
  sends to all peers are posted in one group and overlap: no per-peer proxy time is added
  (``getNetOverhead`` is RCCL's figure for a ring's network step);
* transfer: the larger of the rank's bytes to the other GPUs of its node over its xGMI links (``(ppn − 1) ×
  size / n`` over the ``totalBw`` RCCL's graphs carry, :attr:`zerocalc.nccl.rccl.RcclTuning.total_bw_GBps`:
  each peer on its own links on the fully connected 8-GPU and MI300A nodes; LL's 16-byte line carries 8
  bytes of data) and its bytes to the other nodes' ranks, ``(n − ppn) × size / n``, over its share of its
  node's NICs at their line rate (:attr:`zerocalc.nccl.rccl.RcclTuning.net_GBps` / ``ppn``).

MSCCL's one-node programs are not read: those calls are priced as the grouped sends, and a note says so.

**The other rccl-tests point-to-point ops** (:func:`p2p_op_us`): rccl-tests' ``sendrecv_perf``,
``gather_perf``, ``scatter_perf`` and ``hypercube_perf`` (``src/sendrecv.cu`` … ``src/hypercube.cu``, as
nccl-tests' own) call ``ncclSend`` / ``ncclRecv`` in a group: every rank sends ``size`` to rank + 1 and
receives as much from rank − 1; the root receives (gather) or sends (scatter) ``size / n`` from or to
each rank; log2(n) groups in turn, group k exchanging ``2^k · size / n`` with rank ^ 2^k (hypercube). They
are priced as the all-to-all's grouped sends are, per group of concurrent messages, the busiest rank setting
the time:

* latency: the same Ring step of RCCL's table (protocol, slowest link class of the group), once per group;
* protocol: Simple as soon as a message of the group crosses the network (RCCL's p2p network connections
  carry no LL buffers by default, as NCCL's: ``NCCL_ALLOC_P2P_NET_LL_BUFFERS`` 0); on one node LL for a
  message of at most ``NCCL_P2P_LL_THRESHOLD`` (16 KiB: ``addP2pToPlan`` compares each part with it, and a
  part is at least ``p2pChunkSize / 8`` = 64 KiB on one node, ROCm/rccl ``src/enqueue.cc``, tag
  ``rocm-6.2.0`` and develop of Oct 2024), or, in the releases after the NCCL 2.23 merge (the tables of
  2.25 on), at most ``p2pnChannelsPerPeer`` × 16 KiB (``thresholdLL = nChannelsMax ×
  NCCL_P2P_LL_THRESHOLD``), :func:`channels_per_peer`;
* transfer: a message to a GPU of the node over the path between the two (:func:`pair_GBps`: the xGMI
  links joining them × ``ncclTopoXGMISpeed``; an MI250X node's pairs from ``rome_model_73``'s link matrix,
  through the host where two GCDs share no link),
  no faster than the rank's share of all its xGMI links (``totalBw``); a message to another node over the
  rank's own NIC (RCCL's ``NCCL_PXN_DISABLE`` defaults to 1, ROCm/rccl ``src/graph/paths.cc``: no relay
  through a peer GPU's NIC) at its line rate, or over its share of the node's NICs where every rank of the
  node sends across at once (hypercube's groups across nodes); LL carries 8 data bytes per 16-byte line.

Not priced: the work-per-channel cap of a p2p channel (RCCL publishes no figure for one workgroup's copy
rate), RCCL's copy of a rank's own block, ``RCCL_P2P_BATCH_ENABLE`` (off by default) and the local copy
hypercube's first step makes.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from zerocalc.errors import ConfigError
from zerocalc.nccl.p2p import P2P_LL_THRESHOLD
from zerocalc.nccl.release import Algorithm, Protocol

if TYPE_CHECKING:
    from zerocalc.nccl.rccl import RcclTuning

A, P = Algorithm, Protocol

#: MSCCL's all-to-all programs of RCCL 2.20.5 to 2.26.6: one node of 8 GPUs, out-of-place calls of at most
#: this many bytes (``tools/msccl-algorithms/alltoall-8n-7mb-43mb.xml`` ``maxBytes``; the four others cover
#: 0 to 7340032 B).
MSCCL_ALL_TO_ALL_MAX_BYTES = 45088768


def all_to_all_us(tuning: RcclTuning, n_bytes: int) -> tuple[float, Protocol, bool]:
    """One ``alltoall_perf`` call of ``n_bytes`` (its ``size``) on ``tuning``'s communicator: its time (µs),
    its protocol and whether the nodes' NICs, not the xGMI links, bound it (module docstring)."""
    n = tuning.n_ranks
    ppn = n // tuning.n_nodes
    per_peer = n_bytes / n
    across = tuning.n_nodes > 1
    proto = _protocol(tuning, int(per_peer), across)
    share = 0.5 if proto == P.LL else 1.0
    links_us = (ppn - 1) * per_peer / (1000.0 * tuning.total_bw_GBps * share) if ppn > 1 else 0.0
    nic_us = 0.0
    if across and tuning.net_GBps:
        nic_us = (n - ppn) * per_peer / (1000.0 * tuning.net_GBps / ppn)
    return _step_latency_us(tuning, proto, across) + max(links_us, nic_us), proto, nic_us > links_us


def msccl_all_to_all(tuning: RcclTuning, n_bytes: int, in_place: bool) -> bool:
    """Whether RCCL would run this call with one of its one-node MSCCL all-to-all programs (not read)."""
    return tuning.msccl and not in_place and 0 < n_bytes <= MSCCL_ALL_TO_ALL_MAX_BYTES


#: The rccl-tests point-to-point ops :func:`p2p_op_us` prices (nccl-tests' names,
#: :class:`zerocalc.nccl.p2p.P2pOp`).
P2P_OPS = ("sendrecv", "gather", "scatter", "hypercube")

#: xGMI link units between the 8 GCDs of an HPE Cray EX235a node (4 MI250X: OLCF's Frontier, LUMI-G), GCD i
#: at the i-th of bus 0xc1000 … 0xde000: ROCm/rccl ``src/graph/rome_models.cc`` ``rome_model_73``
#: ``connMatrix`` (tag ``rocm-6.2.0``); 0 where two GCDs share no link.
MI250X_CONN = (
    (0, 4, 1, 0, 0, 0, 2, 0), (4, 0, 0, 1, 0, 1, 0, 0), (1, 0, 0, 4, 2, 0, 0, 0), (0, 1, 4, 0, 0, 0, 0, 1),
    (0, 0, 2, 0, 0, 4, 1, 0), (0, 1, 0, 0, 4, 0, 0, 1), (2, 0, 0, 0, 1, 0, 0, 4), (0, 0, 0, 1, 0, 1, 4, 0),
)


#: The Infinity Fabric link between the CPU and each GCD of an HPE Cray EX235a node, GB/s each way (OLCF
#: Frontier user guide: "The CPU is connected to each GCD via Infinity Fabric CPU-GPU, allowing a peak
#: host-to-device (H2D) and device-to-host (D2H) bandwidth of 36+36 GB/s"): the path RCCL's topology gives
#: two GCDs that share no xGMI link runs GCD -> CPU -> GCD over two such links.
MI250X_HOST_GBPS = 36.0


def pair_GBps(tuning: RcclTuning, i: int, j: int) -> float:
    """The bandwidth (GB/s) of the path from local GPU ``i`` to local GPU ``j``: on an MI250X node (8 gfx90a
    GCDs) the xGMI links :data:`MI250X_CONN` puts between them × 36 GB/s (``MI200_XGMI_WIDTH``), or, for two
    GCDs without a link, the host's (:data:`MI250X_HOST_GBPS`: RCCL's ``paths.cc`` builds no path through a
    GPU, "Disallow GPUs as intermediate steps", so such a pair's path crosses the CPU); on the fully
    connected nodes (gfx942, gfx950, fewer GPUs a node) ``totalBw`` over the peers, each on its own links."""
    from zerocalc.nccl.rccl import XGMI_GBPS

    ppn = tuning.n_ranks // tuning.n_nodes
    if tuning.arch == "gfx90a" and ppn == 8:
        links = MI250X_CONN[i % 8][j % 8]
        return links * XGMI_GBPS["gfx90a"] if links else MI250X_HOST_GBPS
    return tuning.total_bw_GBps / max(1, ppn - 1)


def channels_per_peer(tuning: RcclTuning) -> int:
    """``p2pnChannelsPerPeer`` on one node (ROCm/rccl ``src/graph/paths.cc``, ``ncclTopoGetNchannels`` and
    ``ncclTopoComputeP2pChannels``): each xGMI peer asks 4 channels per link of its path on gfx942 / gfx950
    (2 on others: ``max(1, path bw / ncclTopoXGMISpeed)`` links), the fewest asked rounded up to a power of
    two, then doubled on one node of gfx942 / gfx950 ("Doubling P2P channels per peer on single node")."""
    from zerocalc.nccl.rccl import _GFX94_LIKE, XGMI_GBPS

    ppn = tuning.n_ranks // tuning.n_nodes
    per_link = 4 if tuning.arch in _GFX94_LIKE else 2
    asks = [per_link * max(1, int(pair_GBps(tuning, i, j) / XGMI_GBPS[tuning.arch] + 1e-9))
            for i in range(ppn) for j in range(ppn) if i != j] or [per_link]
    per_peer = 1 << max(0, math.ceil(math.log2(min(asks))))
    return per_peer * (2 if tuning.arch in _GFX94_LIKE and tuning.n_nodes == 1 else 1)


def _protocol(tuning: RcclTuning, msg_bytes: int, across: bool) -> Protocol:
    """A group's protocol (module docstring): Simple across nodes, else LL up to RCCL's threshold."""
    from zerocalc.nccl.rccl import V2_26

    if across:
        return P.SIMPLE
    threshold = P2P_LL_THRESHOLD
    if tuning.release.version >= V2_26.version:
        threshold *= channels_per_peer(tuning)
    return P.LL if msg_bytes <= threshold else P.SIMPLE


def _step_latency_us(tuning: RcclTuning, proto: Protocol, across: bool) -> float:
    """One Ring step of RCCL's table: ``baseLat`` + the xGMI or network hop (a steering network hop taken at
    2.20.5's model 5 figure, :data:`zerocalc.nccl.rccl_net.STEERING_HOP_US`)."""
    from zerocalc.nccl.rccl import BASE_LAT_US, V2_20
    from zerocalc.nccl.rccl_net import STEERING_HOP_US

    pi = (P.LL, P.LL128, P.SIMPLE).index(proto)
    hw = tuning.model.hw_lat
    hop = hw["xgmi"][A.RING][pi]
    if across:
        hop = hw["net"][A.RING][pi]
        if hop > STEERING_HOP_US:
            hop = V2_20.model.hw_lat["net"][A.RING][pi]
    return BASE_LAT_US[A.RING][pi] + hop


def _nic_GBps(tuning: RcclTuning, nics: int | None, all_ranks: bool) -> float:
    """A rank's network bandwidth: its own NIC's line rate (one NIC a GPU at most: ``net_GBps`` counts
    ``min(NICs, GPUs)``), or, where every rank of its node sends across at once, its share of them."""
    ppn = tuning.n_ranks // tuning.n_nodes
    if not tuning.net_GBps:
        raise ConfigError("the topology names no NICs: RCCL's point-to-point across nodes needs them",
                          option="--topology")
    if all_ranks:
        return tuning.net_GBps / ppn
    return tuning.net_GBps / max(1, min(nics or ppn, ppn))


def _group_us(tuning: RcclTuning, msgs: list[tuple[int, int | None]], rank: int, nics: int | None,
              all_ranks: bool = False) -> tuple[float, Protocol, bool]:
    """One rank's group of concurrent messages ``(bytes, local peer or None across nodes)``: its time (µs),
    protocol and whether the network bounds it (module docstring)."""
    if not msgs:
        return 0.0, P.SIMPLE, False
    across = any(peer is None for _, peer in msgs)
    proto = _protocol(tuning, max(b for b, _ in msgs), across)
    share = 0.5 if proto == P.LL else 1.0
    local = [(b, peer) for b, peer in msgs if peer is not None]
    links_us = max([b / (1000.0 * pair_GBps(tuning, rank, peer) * share) for b, peer in local]
                   + [sum(b for b, _ in local) / (1000.0 * tuning.total_bw_GBps * share)])
    net_bytes = sum(b for b, peer in msgs if peer is None)
    nic_us = net_bytes / (1000.0 * _nic_GBps(tuning, nics, all_ranks)) if net_bytes else 0.0
    return _step_latency_us(tuning, proto, across) + max(links_us, nic_us), proto, nic_us > links_us


def p2p_op_us(tuning: RcclTuning, op: str, n_bytes: int, nics: int | None = None, *, merged: bool = False
              ) -> tuple[float, Protocol, bool]:
    """One rccl-tests call of ``op`` (:data:`P2P_OPS`) whose ``size`` column is ``n_bytes`` on ``tuning``'s
    communicator (ranks filling nodes in order, root 0), ``nics`` the NICs of a node: its time (µs), the
    protocol of its last group and whether the nodes' NICs bound it (module docstring). ``merged``: one
    thread drives several GPUs (rccl-tests ``-g`` above 1), whose ``startColl`` wraps the call in its own
    ``ncclGroupStart`` / ``ncclGroupEnd`` (``src/common.cu``), so hypercube's log2(n) groups nest in it and
    run as one group (RCCL, as NCCL, launches a nested group's operations at the outermost
    ``ncclGroupEnd``): every exchange at once, one latency."""
    n = tuning.n_ranks
    ppn = n // tuning.n_nodes

    def peer(src: int, dst: int) -> int | None:  # the local index of dst, None on another node
        return dst % ppn if src // ppn == dst // ppn else None

    if op == "sendrecv":  # the slowest rank of the ring sets the time
        groups = [_group_us(tuning, [(n_bytes, peer(r, (r + 1) % n))], r % ppn, nics) for r in range(n)]
        return max(groups, key=lambda g: g[0])
    m = n_bytes // n
    if op in ("gather", "scatter"):  # the root's group: its node's peers over xGMI, the rest over its NIC
        root = _group_us(tuning, [(m, peer(0, r)) for r in range(1, n)], 0, nics)
        # another node's ranks each exchange m with the root at once, on their node's NICs
        other = _group_us(tuning, [(m, None)], 0, nics, all_ranks=True) if tuning.n_nodes > 1 else root
        return max(root, other, key=lambda g: g[0])
    if op == "hypercube":
        if n & (n - 1):
            raise ConfigError(f"hypercube_perf exchanges with rank ^ 2^k: {n} ranks is not a power of two",
                              option="ranks")
        masks = [1 << k for k in range(int(math.log2(n)))]
        if merged:
            return max((_group_us(tuning, [(m * mask, peer(r, r ^ mask)) for mask in masks], r % ppn, nics,
                                  all_ranks=True) for r in range(n)), key=lambda g: g[0])
        total, proto, bound = 0.0, P.SIMPLE, False
        for k in range(len(masks)):
            mask = 1 << k
            t, proto, b = max((_group_us(tuning, [(m * mask, peer(r, r ^ mask))], r % ppn, nics,
                                         all_ranks=mask >= ppn) for r in range(n)), key=lambda g: g[0])
            total, bound = total + t, bound or b
        return total, proto, bound
    raise ConfigError(f"{op} is not one of RCCL's point-to-point ops priced here ({', '.join(P2P_OPS)})",
                      option="op")
