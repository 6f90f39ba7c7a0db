"""The pipeline an NVLS Tree all-reduce fills before it runs at its bandwidth.

NCCL prices an NVLS Tree all-reduce as ``latency + nBytes / bw`` (``ncclTopoGetAlgoTime``,
``src/graph/tuning.cc``). The kernel moves the data in chunks through a chain of store-and-forward stages
(``RunWorkColl<ncclFuncAllReduce, …, NCCL_ALGO_NVLS_TREE, NCCL_PROTO_SIMPLE>``, ``src/device/all_reduce.h``,
v2.19-v2.30): each head GPU's chunk is scattered to the NVLink SHARP buffer, reduced there
(``multimem``), sent up the tree of nodes through the head's NIC, reduced again at each level, sent back
down, multicast and gathered. A stage hands a chunk on only when the whole chunk (one ``NCCL_STEPS`` slot:
Simple, ``chunkSteps = sliceSteps = 1`` for every algorithm but Ring, ``enqueue.cc``) is in, so the last
chunk of a call crosses each stage behind the one before it. The call takes ``latency + nBytes / bw`` plus
the time its pipeline takes to fill and drain, counted in loops: a loop is the chunk every head of every
channel has in flight, ``nChannels · nHeads · chunkSize`` bytes (``calcCollChunking``'s ``loopSize``), the
whole call when it is smaller, and every channel of a head shares the head's NIC, so a loop crosses a node's
first hop up and its last hop down whole. A call of one loop pays one loop more, as the loop goes up and
comes back down where NCCL's bandwidth has the two directions overlap (2 nodes: twice the NIC's bandwidth,
``tuning.cc`` "Handle 2 node case of NVLSTree"); a call of two loops or more pays two, the first loop
going up with nothing yet to send down and the last coming down behind it. A hop in between (a tree of
more than two nodes, ``2 · ceil(log2 nNodes)`` hops on its longest path, the binary trees of
``src/graph/trees.cc``) forwards channel by channel, ``1 / nChannels`` of a loop behind.

``calcCollChunking`` (``src/enqueue.cc``) sizes the chunk from the call: it starts at ``comm->nvlsChunkSize``
(``NCCL_NVLS_CHUNKSIZE``, 128 KiB, v2.21.5 on, ``src/transport/nvls.cc``; before, the Simple step,
``NCCL_BUFFSIZE / NCCL_STEPS``: 512 KiB), capped at 64 KiB from 4 nodes (``NCCL_NVLSTREE_MAX_CHUNKSIZE``'s
default), then halves where the call is small against ``concurrentOps = nChannels · nHeads`` chunks:
to 256 KiB below 32 · concurrentOps · chunk bytes, 128 KiB below 16×, 64 KiB below 4×, 32 KiB below 1×
(v2.19.3-v2.30.7). The channels are ``comm->nvlsChannels`` (``enqueue.cc``: "NVLS should not need more than
16 channels"), the heads the NVLS graph's channels, one a GPU of the node.

The bundled sweeps of two Hopper nodes of 8 GPUs show it: the measured time less NCCL's latency (66.8 µs,
v2.30.7's figures) and ``nBytes`` at its bandwidth (246 GB/s), in loops, is 1.5-1.6 at the calls of one loop
(4 and 8 MiB), 1.9 at two (16 MiB) and 2.0-2.1 at 4-16 loops (32-256 MiB) on two DGX H100 under NCCL 2.30.7
(``all_reduce_perf-16xH100-2nodes-infiniband.txt``); 0.6-0.9, 1.4 and 1.7-2.0 on two Dell XE9680 under
2.26.2 (``all_reduce_perf-16xH100-2nodes-ib-nccl2.26.2.txt``, NVIDIA/nccl-tests issue 309); 0.1-0.8, 1.6
and 1.4-1.6 on two H200 hosts over RoCE under 2.30.4 (``-g 8``, less the launch stagger). On four and
eight nodes (chunk 64 KiB, 8 MiB loops; ``all_reduce_perf-32xH100-4nodes-ib-nccl2.26.2.txt``,
``-32xH100-4of8nodes-ib.txt``, ``-64xH100-8nodes-ib.txt``) the calls of four loops and more leave 1.1, 1.8
and 4.7 loops: the clusters differ, and the 2.1-2.4 loops counted here stand between them.

The kernel and the chunking are the same on Blackwell. Across GB200 / GB300 NVL72 racks (a node an
NVLink domain of 16-18 hosts, NCCL's MNNVL clique) the loop is large: 32 channels (``NVLS_NCHANNELS_SM100``
across nodes, ``src/transport/nvls.cc`` v2.25.1-v2.30.7) x 32 heads (``NCCL_MAX_NVLS_ARITY``, one NIC and
its GPU each) x 128 KiB = 128 MiB on two and three racks, two loops about 0.58 ms at NCCL's 462 GB/s. OCI's
bundled cross-rack runs (oracle-quickstart/oci-gpu-quickstarts, NVLS on) spend more than that beyond NCCL's
rate: fitted from their two sizes, 1.3 ms and 429 GB/s on 2 racks of GB200 (NCCL 2.27.3, 4-8 GiB), 1.6 ms
and 405 GB/s on 3 (2.27.3), 1.8 ms and 387 GB/s on 2 racks of GB300 (2.28.7, 8-16 GiB): the fill is part of
the gap, the rest a slower rate than NCCL's, which is not priced. Across HGX B200 nodes (32 channels x 8
heads: 8-32 MiB loops) the two bundled pairs, timed at the rate their NVLink and NICs hold
(:func:`zerocalc.nccl.model.nvls_link_graphs`), show it too: 2 DGX B200 under 2.26.2 (Lambda,
dstackai/dstack ``examples/clusters/lambda``) measure 0.20-0.25 ms beyond NCCL's 66.8 µs and 409.6 GB/s from
128 to 512 MiB, where two loops of 32 MiB take 0.16 ms; 2 GCP A4 VMs (dstack's A4 example) 0.22 ms at
256 MiB, more above it, where their rate (370 GB/s from 4 to 8 GiB) falls below 409.6.
"""

from __future__ import annotations

import math

from zerocalc.nccl.release import Algorithm, Collective, Protocol, Release
from zerocalc.nccl.tune_model import _PROTO_INDEX, _log2i

A, C, P = Algorithm, Collective, Protocol

NVLS_CHUNK_SIZE = 128 * 1024
"""``NCCL_NVLS_CHUNKSIZE``'s default (``src/transport/nvls.cc``, v2.21.5-v2.30.7)."""

SIMPLE_BUFFSIZE = 4 * 1024 * 1024
"""``NCCL_BUFFSIZE``'s default, the Simple protocol's buffer (``DEFAULT_BUFFSIZE``, ``src/init.cc``)."""

NCCL_STEPS = 8
"""Slots of a connection's buffer (``src/include/device.h``)."""


def fill_priced(coll: Collective, algo: Algorithm, n_nodes: int, compute_capability: int) -> bool:
    """Whether a call is timed with its pipeline's fill: an all-reduce on Hopper (sm90) or Blackwell
    (sm100+), with NVLS Tree across nodes or with NVLS in one NVLink domain, one host or an NVL72 rack
    (NCCL's one node; :func:`nvls_tree_fill_us`, :func:`nvls_fill_us`). On Blackwell NVLS Tree's fill
    takes the place of NCCL's ``treeCorrectionFactor`` (:func:`nvls_tree_run_correction`)."""
    if coll != C.ALL_REDUCE or compute_capability < 90:
        return False
    return (algo == A.NVLS_TREE and n_nodes > 1) or (algo == A.NVLS and n_nodes == 1)


def nvls_tree_chunk_bytes(rel: Release, n_bytes: float, n_channels: int, n_heads: int, n_nodes: int,
                          buffsize: int | None = None) -> int:
    """``calcCollChunking``'s NVLS Tree chunk for an all-reduce of ``n_bytes`` (module docstring)."""
    start = NVLS_CHUNK_SIZE if rel.era >= 21 else (buffsize or SIMPLE_BUFFSIZE) // NCCL_STEPS
    chunk = min(start, 65536) if n_nodes >= 4 else start
    ops = n_channels * n_heads
    for times, above in ((32, 262144), (16, 131072), (4, 65536), (1, 32768)):
        if n_bytes < times * ops * chunk and chunk > above:
            chunk = above
    return chunk


def nvls_tree_hops(n_nodes: int) -> int:
    """Network hops on the longest path up and down NCCL's tree of ``n_nodes`` nodes: ``2 · ceil(log2)``."""
    return 2 * (n_nodes - 1).bit_length() if n_nodes > 1 else 0


def nvls_tree_fill_loops(n_nodes: int, n_channels: int, loops: float) -> float:
    """Loops an NVLS Tree call of ``loops`` loops takes to fill and drain its pipeline (module docstring):
    one a loop up to two, the first hop up and the last hop down, plus ``1 / nChannels`` of one for every
    hop between them; 0 on one node."""
    if n_nodes <= 1:
        return 0.0
    return min(2.0, max(1.0, loops)) + (nvls_tree_hops(n_nodes) - 2) / n_channels


def nvls_tree_fill_us(rel: Release, n_bytes: float, bw_GBps: float, n_channels: int, n_heads: int,
                      n_nodes: int, buffsize: int | None = None) -> float:
    """The µs an NVLS Tree all-reduce of ``n_bytes`` under NCCL ``rel`` spends filling its pipeline at
    ``bw_GBps`` of algorithm bandwidth: :func:`nvls_tree_fill_loops` loops of ``nChannels · nHeads · chunk``
    bytes, at most the call (module docstring); 0 on one node or without bandwidth."""
    if n_nodes <= 1 or not 0 < bw_GBps < math.inf or n_channels <= 0 or n_heads <= 0:
        return 0.0
    chunk = nvls_tree_chunk_bytes(rel, n_bytes, n_channels, n_heads, n_nodes, buffsize)
    loop = float(n_channels * n_heads * chunk)
    fill = nvls_tree_fill_loops(n_nodes, n_channels, n_bytes / loop)
    return fill * min(float(n_bytes), loop) / (1000.0 * bw_GBps)


def nvls_chunk_bytes(n_bytes: float, n_channels: int, n_heads: int) -> int:
    """``calcCollChunking``'s NVLS chunk for a one-node all-reduce of ``n_bytes`` (``src/enqueue.cc``,
    v2.19.3-v2.30.7): the Simple step (``NCCL_BUFFSIZE / NCCL_STEPS``, 512 KiB) capped at
    ``comm->nvlsChunkSize`` (128 KiB: ``NCCL_NVLS_CHUNKSIZE``, a fixed 131072 before v2.21.5), then 64 KiB
    below 64 · concurrentOps · chunk bytes, 32 KiB below 8×, 16 KiB below 2×
    (``concurrentOps = nChannels · nHeads``)."""
    chunk = NVLS_CHUNK_SIZE
    ops = n_channels * n_heads
    for times, above in ((64, 65536), (8, 32768), (2, 16384)):
        if n_bytes < times * ops * chunk and chunk > above:
            chunk = above
    return chunk


def nvls_fill_us(n_bytes: float, bw_GBps: float, n_channels: int, n_heads: int) -> float:
    """The µs a one-node NVLS all-reduce of ``n_bytes`` spends filling its pipeline at ``bw_GBps``: the
    kernel (``RunWorkColl<ncclFuncAllReduce, …, NCCL_ALGO_NVLS, NCCL_PROTO_SIMPLE>``, ``all_reduce.h``)
    scatters each loop of ``nChannels · nHeads · chunk`` bytes (:func:`nvls_chunk_bytes`; the whole call
    when it is smaller) into the NVLink SHARP buffers, reduces and multicasts it there, and gathers it
    back, a stage on either side of the switch's reduction: the first loop scattered with nothing yet to
    gather and the last gathered with nothing left to scatter, one loop more for a call of one loop, two
    from two loops (:func:`nvls_tree_fill_loops`' first and last on two nodes).

    The bundled one-node Hopper sweep run a process a GPU (``all_reduce_perf-8xH100-p5-aws-batch-tagged.txt``,
    8 H100 of an AWS p5, NCCL 2.30.7) shows it: the measured time less NCCL's 25 µs latency and ``nBytes`` at
    its 272 GB/s, in loops, is 1.4 at 2 MiB (one loop of 2 MiB), 1.9-2.4 at 4-16 MiB (two to four loops of
    2-4 MiB) and 1.8-2.4 at 64-128 MiB (8-16 loops of 8 MiB), where NCCL's time alone is 0.66-0.87x.

    The kernel is the same on Blackwell and across an NVL72 rack, which NCCL joins into one node (MNNVL).
    OCI's GB300 rack runs (NCCL 2.28.7, 24 nvlsChannels) show it, in loops beyond NCCL's time (25 µs and
    ``nBytes`` at its 411-466 GB/s): 3-5 loops from 8 MiB to 4 GiB on 64 GPUs (32 heads;
    ``all_reduce_perf-64xGB300-oci-16nodes-1rack-16sizes-nccl2.28.7.txt``), where NCCL's time alone is
    0.41-0.95x; 2.6-5.9 loops from 4 to 64 MiB on 8 GPUs of two hosts (8 heads; ``-8xGB300-oci-2nodes-1rack-
    16sizes``, 0.60-0.67x alone); 6-9 loops of 96 MiB from 512 MiB to 8 GiB on a 72-GPU GB200 rack under
    2.26.2 (``-72xGB200-nvl72-1rack``, 0.65-0.92x alone). The fill's two loops are a part of that; the rest
    is not priced."""
    if not 0 < bw_GBps < math.inf or n_channels <= 0 or n_heads <= 0:
        return 0.0
    loop = float(n_channels * n_heads * nvls_chunk_bytes(n_bytes, n_channels, n_heads))
    return min(2.0, max(1.0, n_bytes / loop)) * min(float(n_bytes), loop) / (1000.0 * bw_GBps)


def nvls_tree_run_correction(t, coll: Collective, algo: Algorithm, n_bytes: float) -> float:
    """The share of its bandwidth an NVLS Tree all-reduce of ``n_bytes`` runs at where NCCL's own estimate
    leaves it out (``t``: a :class:`zerocalc.nccl.model.Tuning`): NCCL's ``treeCorrectionFactor`` (Simple
    row, powers of two from 64 B, 1 past the row's end), which NCCL itself applies to NVLS Tree on Blackwell
    (sm100+) from v2.29.2 (``ncclTopoGetAlgoTime``: "Trees are not perfectly sticking to the model for medium
    sizes"); 1 for anything else, and 1 where the release's own estimate already holds the factor (Blackwell
    from 2.29 on x86 hosts, ``zerocalc.nccl.model._algo_time_us``; NCCL leaves it out on Arm hosts such as
    Grace, so there it is applied here). A run-time figure: NCCL chooses without it
    (:meth:`zerocalc.nccl.model.Tuning.choose`).

    Sources: on Blackwell, NCCL's own v2.29.2 change, which describes the hardware and so times calls under
    earlier releases too (2 DGX B200, NCCL 2.26.2, NVIDIA/nccl-tests issue 309: 1-32 MiB measured at
    0.49-0.62x of the uncorrected model). Hopper (sm90) runs without it: its mid-size sag (8-128 MiB at
    0.70-0.83x of the uncorrected model on 2 and 4 Dell XE9680, NVIDIA/nccl-tests issue 309, NCCL 2.26.2) is
    the pipeline's fill, which :func:`nvls_tree_fill_us` prices from NCCL's chunking and which holds past
    the factor's row, where the factor is 1 (2 DGX H100 under 2.30.7: 64 MiB-1 GiB at
    0.86-0.98x of the uncorrected model). On Blackwell NVLS Tree (:func:`fill_priced`) the fill now takes
    the factor's place as on Hopper, and the factor is taken back out of a release's estimate that holds it
    (the reciprocal here): a call is timed alike on Grace and x86 hosts, by its pipeline, not the table."""
    m = t.machine
    if algo != A.NVLS_TREE or coll != C.ALL_REDUCE or m.compute_capability < 100:
        return 1.0
    held = estimate_correction(t.release, m, coll, algo, n_bytes)
    if fill_priced(coll, algo, m.n_nodes, m.compute_capability):
        return 1.0 / held  # the fill in its place, taken out of NCCL's estimate where that holds it
    return 1.0 if held != 1.0 else _tree_factor(t.release, n_bytes)


def _tree_factor(rel: Release, n_bytes: float) -> float:
    """``treeCorrectionFactor``'s Simple entry for ``n_bytes`` (powers of two from 64 B; 1 past the row)."""
    row = rel.tree_correction[_PROTO_INDEX[P.SIMPLE]]
    log_size = _log2i(int(n_bytes) >> 6)
    return row[log_size] if 0 <= log_size < len(row) else 1.0


def estimate_correction(rel: Release, m, coll: Collective, algo: Algorithm, n_bytes: float) -> float:
    """The ``treeCorrectionFactor`` NCCL's own estimate puts on an NVLS Tree all-reduce's bandwidth: from
    v2.29.2 on Blackwell (sm100+) on x86 hosts only (``ncclTopoGetAlgoTime``: ``comm->minCompCap >= 100
    && comm->cpuArch == NCCL_TOPO_CPU_ARCH_X86``); 1 elsewhere (``m``: a
    :class:`zerocalc.nccl.graph.Machine`)."""
    if (rel.era >= 29 and algo == A.NVLS_TREE and coll == C.ALL_REDUCE and m.compute_capability >= 100
            and m.cpu_vendor != "arm"):
        return _tree_factor(rel, n_bytes)
    return 1.0
