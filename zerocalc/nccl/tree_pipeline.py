"""The chunk a Tree/LL128 all-reduce across nodes holds whole at each network hop.

NCCL prices a Tree all-reduce as ``latency + nBytes / bw`` (``ncclTopoGetAlgoTime``, ``src/graph/tuning.cc``),
a pipeline already full. Within a node LL128 forwards a chunk line by line (each 128-byte line carries its
own flag), but a network hop moves it a step at a time: the network proxy posts a step to the NIC only once
the GPU has written the whole step and moved its tail past it (``sendProxyProgress``,
``src/transport/net.cc``: ``*recvTail > tail`` for LL128 with GPUDirect RDMA, every line's flag checked
when the buffer is in host memory; one ``isend`` of the step, v2.8.4-v2.30.7), and the receiving GPU sees
the step only once the proxy's ``irecv`` of it has completed (``recvProxyProgress``). A Tree/LL128 chunk is
one step (``chunkSteps = sliceSteps = 1`` for every algorithm but Ring/Simple, ``calcCollChunking``,
``src/enqueue.cc``), so each network hop on a chunk's way up the tree of nodes and back down holds it whole
once, where the pipeline NCCL prices passes it on as it comes. A call pays that for its first chunk on
``2 · ceil(log2 nNodes)`` hops up and down (the binary trees of ``src/graph/trees.cc``:
:func:`zerocalc.nccl.nvls_pipeline.nvls_tree_hops`), every channel's chunk at once, ``nChannels · chunk``
bytes (the whole call when it is smaller), at the rate a link carries: the bus bandwidth, twice a Tree's
algorithm bandwidth (``ncclTopoTuneModel``: ``bandwidths = busBw · ratio``, ``ratio = .5`` for every
algorithm but Ring).

``calcCollChunking`` sizes the chunk from the call (v2.7.3-v2.30.7; earlier, the step whole): from the
LL128 step, ``NCCL_LL128_BUFFSIZE / NCCL_STEPS`` = 120 x 640 x 8 x 8 / 8 = 614400 bytes of lines
(``DEFAULT_LL128_BUFFSIZE``, ``src/init.cc``; 576000 of data, 120 of each 128 bytes), halved while
``nBytes / (nChannels · chunk) < nstepsLL128 · 64 / ppn`` and the chunk is above 128 KiB, then while
``< nstepsLL128 · 16 / ppn`` and above 32 KiB, with ``nstepsLL128 = 1 + log2i(nNodes) + 0.1 · ppn`` and
``ppn = nRanks / nNodes``. The releases before 2.20 halve the line bytes (and move 120/128 of them as
data), 2.20 on the data bytes.

The bundled multi-node all-reduce sweeps show it where their Tree/LL128 rows fall short of NCCL's time: 2
nodes of 8 A100 over RoCE (OCI OKE, priced at 2.30.7) at 256 KiB-1 MiB at 0.79-0.82x of it, 0.87-0.89x
with the fill (2-8 MiB 0.90-0.95x, 0.97-1.04x); 8 nodes of 8 H100 (2.30.7) at 1-2 MiB 0.79-0.83x,
0.87-0.94x; two AWS p5 (NCCL 2.20.3, 2.22.3), at NCCL's time already, 0.81-1.09x, 0.83-1.11x. Over eleven
such files (54 rows, ``tests/test_nccl_tree_pipeline.py``; ABCI's V100 nodes, whose NICs sit on the CPUs,
run no LL128 across nodes) the median goes from 0.80x to 0.87x and the rows within 0.8-1.25x from 25 to 35.
The fill is a part of what the slow ones lack, not the whole: two AWS p4d / p4de (EFA) stay at 0.4-0.7x from
1 to 16 MiB, and ABCI's 2 A100 nodes at 0.53-0.73x, where their time beyond NCCL's grows with the size, not
with the chunk. A run-time figure: NCCL chooses with its own estimate
(:meth:`zerocalc.nccl.model.Tuning.choose`).
"""

from __future__ import annotations

from zerocalc.nccl.nvls_pipeline import nvls_tree_hops
from zerocalc.nccl.release import Algorithm, Collective, Protocol, Release
from zerocalc.nccl.tune_model import _log2i

A, C, P = Algorithm, Collective, Protocol

LL128_STEP_BYTES = 120 * 640 * 8
"""One LL128 step: ``NCCL_LL128_ELEMS_PER_THREAD`` (120) x ``NCCL_LL128_MAX_NTHREADS`` (640) x 8-byte
elements, ``DEFAULT_LL128_BUFFSIZE / NCCL_STEPS`` (``src/init.cc``, ``src/include/device.h``, v2.5-v2.30)."""


def fill_priced(coll: Collective, algo: Algorithm, proto: Protocol, n_nodes: int) -> bool:
    """Whether a call is timed with its chunk held at each network hop: a Tree/LL128 all-reduce across
    nodes (module docstring)."""
    return coll == C.ALL_REDUCE and algo == A.TREE and proto == P.LL128 and n_nodes > 1


def tree_ll128_chunk_bytes(rel: Release, n_bytes: float, n_channels: int, n_nodes: int,
                           n_ranks: int) -> float:
    """``calcCollChunking``'s Tree/LL128 chunk for an all-reduce of ``n_bytes``, in data bytes (module
    docstring)."""
    data = LL128_STEP_BYTES * 15 // 16
    if rel.era <= 6:  # v2.5.x-v2.6.4: the step, never halved
        return float(data)
    chunk = data if rel.era >= 20 else LL128_STEP_BYTES
    ppn = n_ranks / n_nodes
    steps = 1 + _log2i(n_nodes) + 0.1 * ppn
    n, ch = int(n_bytes), max(1, n_channels)
    while n // (ch * chunk) < steps * 64 / ppn and chunk > 131072:
        chunk //= 2
    while n // (ch * chunk) < steps * 16 / ppn and chunk > 32768:
        chunk //= 2
    return float(chunk) if rel.era >= 20 else chunk * 15 / 16


def tree_ll128_fill_us(rel: Release, n_bytes: float, bw_GBps: float, n_channels: int, n_nodes: int,
                       n_ranks: int) -> float:
    """The µs a Tree/LL128 all-reduce of ``n_bytes`` on ``n_channels`` channels spends holding its first
    chunk at each network hop, at ``bw_GBps`` of algorithm bandwidth: ``2 · ceil(log2 nNodes)`` times
    ``nChannels · chunk`` bytes, at most the call (module docstring); 0 on one node or without bandwidth."""
    if n_nodes <= 1 or not 0 < bw_GBps < float("inf") or n_channels <= 0 or n_bytes <= 0:
        return 0.0
    loop = n_channels * tree_ll128_chunk_bytes(rel, n_bytes, n_channels, n_nodes, n_ranks)
    return nvls_tree_hops(n_nodes) * min(float(n_bytes), loop) / (1000.0 * 2.0 * bw_GBps)
