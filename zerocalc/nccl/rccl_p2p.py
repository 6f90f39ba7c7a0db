"""RCCL's all-to-all: one send and one receive to every rank, timed as its data moves.

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
  (:func:`zerocalc.nccl.p2p.protocol`) and takes LL's. The sends to all peers are posted in one group and
  overlap: no per-peer proxy time is added (``getNetOverhead`` is RCCL's figure for a ring's network step);
* transfer: the larger of the rank's bytes to the other GPUs of its node over its xGMI links (``(ppn − 1) ×
  size / n`` over the ``totalBw`` RCCL's graphs carry, :attr:`zerocalc.nccl.rccl.RcclTuning.total_bw_GBps`:
  each peer on its own links on the fully connected 8-GPU and MI300A nodes; LL's 16-byte line carries 8
  bytes of data) and its bytes to the other nodes' ranks, ``(n − ppn) × size / n``, over its share of its
  node's NICs at their line rate (:attr:`zerocalc.nccl.rccl.RcclTuning.net_GBps` / ``ppn``).

MSCCL's one-node programs are not read: those calls are priced as the grouped sends, and a note says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
    from zerocalc.nccl.rccl import BASE_LAT_US, V2_20
    from zerocalc.nccl.rccl_net import STEERING_HOP_US

    n = tuning.n_ranks
    ppn = n // tuning.n_nodes
    per_peer = n_bytes / n
    across = tuning.n_nodes > 1
    proto = P.LL if not across and per_peer <= P2P_LL_THRESHOLD else P.SIMPLE
    pi = (P.LL, P.LL128, P.SIMPLE).index(proto)
    hw = tuning.model.hw_lat
    hop = hw["xgmi"][A.RING][pi]
    if across:
        hop = hw["net"][A.RING][pi]
        if hop > STEERING_HOP_US:
            hop = V2_20.model.hw_lat["net"][A.RING][pi]
    share = 0.5 if proto == P.LL else 1.0
    links_us = (ppn - 1) * per_peer / (1000.0 * tuning.total_bw_GBps * share) if ppn > 1 else 0.0
    nic_us = 0.0
    if across and tuning.net_GBps:
        nic_us = (n - ppn) * per_peer / (1000.0 * tuning.net_GBps / ppn)
    return BASE_LAT_US[A.RING][pi] + hop + max(links_us, nic_us), proto, nic_us > links_us


def msccl_all_to_all(tuning: RcclTuning, n_bytes: int, in_place: bool) -> bool:
    """Whether RCCL would run this call with one of its one-node MSCCL all-to-all programs (not read)."""
    return tuning.msccl and not in_place and 0 < n_bytes <= MSCCL_ALL_TO_ALL_MAX_BYTES
