"""HPE Slingshot through aws-ofi-nccl and libfabric's cxi provider: the rendezvous a network message pays.

On Slingshot, NCCL's network plugin is aws-ofi-nccl over libfabric's ``cxi`` provider; the plugin uses its
SENDRECV protocol there (tagged sends and receives; by default its RDMA protocol is taken only where it joins
several NICs into one device, ``src/nccl_ofi_net.cpp``, aws/aws-ofi-nccl of Aug 2026) and reports no latency
to NCCL (``props->latency`` is ``OFI_NCCL_NET_LATENCY``, default 0, ``include/nccl_ofi_param.h``; only its AWS
platform code sets one), so NCCL chooses as on InfiniBand. The wire does not behave so: libfabric's cxi
provider (``man/fi_cxi.7.md``, "Messaging") sends a message of at most ``FI_CXI_RDZV_THRESHOLD`` +
``FI_CXI_RDZV_GET_MIN`` bytes eagerly and a larger one by rendezvous: the header goes first and, once it is
matched to a receive, the rest "is pulled from the source using an RDMA Get operation" -- a read, where NCCL's
InfiniBand transport writes into a buffer the receiver posted beforehand. A read-based rendezvous adds a round
trip: "Using RDMA_READ would mean adding a round trip of latency, i.e. multiplying the network latency by 3 in
our critical path" (NCCL's maintainer, NVIDIA/nccl issue 609). The defaults are 2048 and 2049 bytes
(``CXIP_RDZV_THRESHOLD``, ``rdzv_get_min``, ``prov/cxi``: :data:`EAGER_BYTES`; the newest tree's
``cxip/common.h`` puts the threshold at 16384); HPE's and the sites' recommended settings set
``FI_CXI_RDZV_THRESHOLD``, ``FI_CXI_RDZV_GET_MIN`` and ``FI_CXI_RDZV_EAGER_SIZE`` to 0 (every message a
rendezvous: HPE's ``shs-ccl-docs`` ``ccl_env.sh`` as Sigma2's Olivia documentation quotes it,
``hpc_machines/olivia/nccl.md``; CSCS's Alps container defaults, ``docs/clusters/daint.md``), which a file
does not show.

What zerocalc charges (:func:`rendezvous_us`): each network message of a call larger than the eager
limit (its bytes on the wire: LL carries 8 bytes of data in a 16-byte line, LL128 120 in 128) waits one
round trip more, two network hops at NCCL's own figure for one (``hwLat[NET][Ring][LL]``, 2.7 µs from
v2.12 to v2.30, ``src/graph/tuning.cc``), as many times as the call's messages follow one another on its
path: a channel's messages are NCCL's proxy steps (``proxyOp->nsteps``, ``src/enqueue.cc``
``calcCollChunking``; a Ring/Simple chunk goes in ``chunkSteps / sliceSteps`` = 2 slices), and

- a Tree all-reduce sends its ``nsteps`` chunks up and down the tree, the last one behind the first's
  ``2 log2i(nNodes)`` network hops: ``nsteps + 2 log2i(nNodes) − 1``;
- a Ring all-reduce, all-gather or reduce-scatter waits at every step on its slowest hop, the network's
  (the pacing of :func:`zerocalc.nccl.tune_model.ring_run_latency_us`): its ``nsteps``;

never more than ``NCCL_STEPS`` (8) messages for each network connection on the path (``2 log2i(nNodes)``
for a Tree, ``nNodes`` for a Ring): a connection has ``NCCL_STEPS`` buffer slots, and once they all hold
messages in flight a further message's round trip overlaps the transfers ahead of it, the call's pace
being then the link's, NCCL's bandwidth term. The chunk sizes are NCCL's: the protocol's buffer
(``DEFAULT_LL_BUFFSIZE``, ``DEFAULT_LL128_BUFFSIZE``, ``DEFAULT_BUFFSIZE``, ``src/init.cc``) over
``NCCL_STEPS``, LL's halved and LL128's at 15/16, the Tree/LL128 chunk halved while the call has few of
them (``nstepsLL128``, v2.12-v2.30) and, to v2.19, the Tree/Simple one by the tree's depth. A time figure
only: NCCL chooses with its own (:meth:`zerocalc.nccl.model.Tuning.choose`).

Which runs: a topology whose ``net_eager_bytes`` is set (the ``gh200`` preset: HPE's Cray EX254n nodes on
Slingshot 11; the ``aws-*`` presets, whose EFA waits alike past 8 KiB, :mod:`zerocalc.nccl.ofi_efa`), unless
the run's NCCL INFO lines name another network; lines naming cxi or EFA set it on an NVIDIA topology
without it (:func:`zerocalc.validate.sweep_info.network_as_stated`).

Seen on 2 nodes of 4 GH200 (CSCS's Santis and Alps, Sigma2's Olivia; tests/data/traces/README.md): from 2 to
4 KiB, one channel of LL lines going from 4096 to 8192 bytes on the wire, Santis's time steps up 10.4 µs
where NCCL's estimate grows 1.2 µs; from 4 KiB to 8 MiB the runs took up to 3.4x NCCL's estimate, from 64
MiB they match it. With the round trips: every size within 0.5-2x on Santis and Alps, medians 0.83-0.92x.
"""

from __future__ import annotations

import math

from zerocalc.nccl.release import NET, Algorithm, Collective, Protocol, Release
from zerocalc.nccl.tune_model import _log2i
from zerocalc.topology.presets import CXI_EAGER_BYTES

A, P, C = Algorithm, Protocol, Collective

#: libfabric's cxi provider: the largest message it sends eagerly by default, ``CXIP_RDZV_THRESHOLD`` (2048)
#: + ``rdzv_get_min`` (2049, "Avoid single packet Gets"), ``prov/cxi`` (ofiwg/libfabric); a larger one goes
#: by rendezvous (``man/fi_cxi.7.md``, ``FI_CXI_RDZV_GET_MIN``).
EAGER_BYTES = CXI_EAGER_BYTES
NCCL_STEPS = 8
#: NCCL's buffer of one connection per protocol, bytes (``src/init.cc``, v2.12-v2.30):
#: ``NCCL_LL_LINES_PER_THREAD`` 8 × ``NCCL_LL_MAX_NTHREADS`` 512 × ``NCCL_STEPS`` × 16-byte lines;
#: ``NCCL_LL128_ELEMS_PER_THREAD`` 120 × ``NCCL_LL128_MAX_NTHREADS`` 640 × ``NCCL_STEPS`` × 8 bytes; 4 MiB.
BUFFSIZE = {P.LL: 8 * 512 * NCCL_STEPS * 16, P.LL128: 120 * 640 * NCCL_STEPS * 8, P.SIMPLE: 1 << 22}
#: bytes on the wire per byte of data: an LL line holds 8 bytes of data in 16, an LL128 line 120 in 128
WIRE = {P.LL: 2.0, P.LL128: 128 / 120, P.SIMPLE: 1.0}
#: a Ring/Simple all-reduce, all-gather or reduce-scatter chunk: ``*_CHUNKSTEPS`` (4) steps sent in slices
#: of ``*_SLICESTEPS`` (2) (``src/include/collectives.h``)
RING_SIMPLE_CHUNK_STEPS, RING_SIMPLE_SLICES = 4, 2


def chunk_bytes(rel: Release, algo: Algorithm, proto: Protocol, n_bytes: int, n_channels: int,
                n_ranks: int, n_nodes: int) -> int:
    """The data bytes of one chunk, as ``calcCollChunking`` (``src/enqueue.cc``) sizes it."""
    steps = RING_SIMPLE_CHUNK_STEPS if algo == A.RING and proto == P.SIMPLE else 1
    chunk = BUFFSIZE[proto] // NCCL_STEPS * steps
    if proto == P.LL:
        chunk //= 2
    elif proto == P.LL128:
        chunk = chunk // 16 * 15  # NCCL_LL128_LINEELEMS 16 → NCCL_LL128_DATAELEMS 15
    per = max(1, n_channels)
    if algo == A.TREE and proto == P.LL128:
        ppn = n_ranks / n_nodes
        steps_ll128 = 1 + _log2i(n_nodes) + 0.1 * ppn
        while n_bytes // (per * chunk) < steps_ll128 * 64 / ppn and chunk > 131072:
            chunk //= 2
        while n_bytes // (per * chunk) < steps_ll128 * 16 / ppn and chunk > 32768:
            chunk //= 2
    elif algo == A.TREE and proto == P.SIMPLE and rel.era <= 19:
        depth = n_ranks // n_nodes - 1 + _log2i(n_nodes)  # tree.depth, src/graph/connect.cc
        for floor, times in ((131072, 8), (65536, 4), (32768, 1)):
            while n_bytes // (per * chunk) < depth * times and chunk > floor:
                chunk //= 2
    return chunk


def network_messages(rel: Release, coll: Collective, algo: Algorithm, proto: Protocol, n_bytes: int,
                     n_channels: int, n_ranks: int, n_nodes: int, eager_bytes: int) -> int:
    """The call's network messages in a row on its path, each a rendezvous (0 where its messages go
    eagerly, on one node, or for an algorithm other than Ring and Tree): see the module."""
    if n_nodes <= 1 or algo not in (A.RING, A.TREE) or n_bytes <= 0:
        return 0
    per = max(1, n_channels)
    chunk = chunk_bytes(rel, algo, proto, n_bytes, per, n_ranks, n_nodes)
    if algo == A.TREE:
        if coll != C.ALL_REDUCE:
            return 0
        first = min(chunk, math.ceil(n_bytes / per))
        hops = 2 * _log2i(n_nodes)
        steps = math.ceil(n_bytes / (per * chunk)) + hops - 1
    else:
        if coll == C.ALL_REDUCE:
            per_loop, chunks = 2 * (n_ranks - 1), n_ranks
        elif coll in (C.ALL_GATHER, C.REDUCE_SCATTER):
            per_loop, chunks = n_ranks - 1, n_ranks
        else:  # broadcast, reduce: a chain, not modelled
            return 0
        first = min(chunk, math.ceil(n_bytes / (per * chunks)))
        loops = math.ceil(n_bytes / (per * chunks * chunk))
        slices = RING_SIMPLE_SLICES if proto == P.SIMPLE else 1
        hops = n_nodes
        steps = per_loop * loops * slices
    if first * WIRE[proto] <= eager_bytes:
        return 0
    return min(steps, NCCL_STEPS * hops)


def round_trip_us(rel: Release) -> float:
    """One network round trip: twice NCCL's own latency of a network hop (``hwLat[NET][Ring][LL]``)."""
    return 2 * rel.hw_lat_us[NET][A.RING][0]


def rendezvous_us(rel: Release, coll: Collective, algo: Algorithm, proto: Protocol, n_bytes: float,
                  n_channels: int, n_ranks: int, n_nodes: int, eager_bytes: int | None) -> float:
    """The time (µs) a call waits on the rendezvous of its network messages (0 where ``eager_bytes`` is
    ``None``: a network that writes every message into a posted buffer)."""
    if eager_bytes is None:
        return 0.0
    m = network_messages(rel, coll, algo, proto, int(n_bytes), n_channels, n_ranks, n_nodes, eager_bytes)
    return m * round_trip_us(rel)
