"""TCP networks whose NCCL connections spread their messages over several flows: the rate a ring step gets.

On InfiniBand or RoCE a network message has its connection's whole rate. A TCP-based transport does not
work so: each NCCL connection is several TCP flows, and a message rides one flow (or, in NCCL's own socket
transport, pieces of at least 64 KiB ride several), so a step of few messages uses few of its flows and,
each flow being a like share of the connection's rate, gets that share of the rate NCCL prices.

- **GCP GPUDirect-TCPXO** (A3 Mega; google/nccl-plugin-gpudirect-tcpxo, ``tcpdirect_plugin/fastrak_offload``):
  each NCCL connection opens ``NCCL_FASTRAK_NUM_FLOWS`` flows ("Number of flows per NCCL-level connection",
  ``kFastrakNumFlows``, default 2, at most 8, ``const_params.h``; Google's ``nccl-env-profile.sh`` sets 2),
  and ``nccl_shim.cc`` (``GetRequest``) schedules each request, whole, on one flow
  (``dxs_socks[curr_flow_group_base]``), the next request on the next flow, round robin ("Send and recv
  must have coherent current flow ID. Round robin."). The topology's ``net_flows``.
- **GCP GPUDirect-TCPX** (A3 High; google/nccl-plugin-gpudirecttcpx ``src/net_tcpx.cc``): each NCCL
  connection opens ``NCCL_NSOCKS_PERTHREAD × NCCL_SOCKET_NTHREADS`` data sockets (``connect.cc``, at most
  8; GCP's configs 4 × 1), and ``tcpxTest`` cuts each request into pieces of at most
  ``NCCL_DYNAMIC_CHUNK_SIZE`` bytes (default 128 KiB, ``flags.cc``; GCP's configs 512 KiB), each piece on
  the next socket with a free task slot (``FlowMapperRR``, ``MAX_TASKS`` = 6 a socket): a message of one
  piece rides one flow, a larger one several. The topology's ``net_flow_piece``.
- **NCCL's socket transport** (``src/transport/net_socket.cc``, v2.11-v2.30) splits a message into tasks of
  ``max(64 KiB, size / nSocks)`` over its ``nSocks`` sockets (``MIN_CHUNKSIZE``, from v2.23
  ``NCCL_SOCKET_MIN_TASKSIZE``): a message of 64 KiB or less rides one socket. Not priced: with its
  defaults on a NIC of no known vendor NCCL opens no helper sockets (``autoNt = 0``: the message goes on
  the control socket, one flow, all of the rate), and on AWS (2 threads × 8 sockets) and GCP (4 × 1) no
  source states what one socket carries against the NIC.

What a ring step sends (NCCL's Simple protocol, ``src/device/prims_simple.h``, v2.12-v2.30): a Ring
all-reduce, all-gather or reduce-scatter chunk of ``c`` bytes (the call's bytes over its channels and ranks,
at most ``NCCL_BUFFSIZE / NCCL_STEPS × 4``, ``ALLREDUCE_CHUNKSTEPS``) goes in ``SlicePerChunk`` = 2 slices
(``*_CHUNKSTEPS / *_SLICESTEPS``) of ``max(c / 2, sliceSize / 32)`` bytes, ``sliceSize`` being
``NCCL_BUFFSIZE / NCCL_STEPS × SLICESTEPS``: a chunk of at most ``NCCL_BUFFSIZE / 128`` bytes (32 KiB at
NCCL's 4 MiB, 64 KiB under TCPXO's 8 MiB profile, ``nccl_buffsize``) is one message, a larger one two.
Each message is one network request of the connection's proxy (``src/transport/net.cc``). The ring's next
step waits on this one (its data are the previous rank's), so a step's messages are all the connection
has in flight: ``min(net_flows, messages)`` flows carry it, at that share of the connection's rate.

What zerocalc charges (:func:`ring_flow_scale`): a Ring/Simple call across nodes runs its bandwidth at
``min(bwIntra, share · bwInter) / min(bwIntra, bwInter)`` of NCCL's, ``share`` = flows used / flows (the
step's messages, or with ``net_flow_piece`` their pieces, at most the connection's flows), the
graph's per-channel figures being NCCL's (a channel's connection has the NIC's share NCCL prices it).
Tree is left as NCCL prices it: its chunks follow one another down the tree with ``NCCL_STEPS`` slots in
flight, filling every flow. LL and LL128 are left too (no bundled TCPXO sweep runs a ring on them at sizes
where a step is the bandwidth). A time figure only: NCCL chooses with its own.

Seen on 2 GCP A3 Mega nodes (16 H100, NCCL 2.21.5 under Google's profile, 16 channels; the bundled
``all_reduce_perf-16xH100-2nodes.txt``): from 4 to 16 MiB, chunks of 16-64 KiB, one message a step, a step
took 12-32 µs, ~2.4 GB/s a channel, half of what NCCL prices; at 32 and 64 MiB (128 and 256 KiB, two
messages) 35-42 µs, the flat step of two flows.
"""

from __future__ import annotations

import math

from zerocalc.nccl.release import Algorithm, Collective, Protocol

A, P, C = Algorithm, Protocol, Collective

#: NCCL's buffer slots a connection (``NCCL_STEPS``, ``src/include/device.h``) and its Simple buffer by
#: default (``DEFAULT_BUFFSIZE``, 4 MiB, ``src/init.cc``), v2.12-v2.30
NCCL_STEPS, DEFAULT_BUFFSIZE = 8, 1 << 22
#: Ring/Simple: steps a chunk spans and steps a slice spans (``ALLREDUCE_CHUNKSTEPS`` = NCCL_STEPS / 2,
#: ``ALLREDUCE_SLICESTEPS`` = NCCL_STEPS / 4, the same for all-gather and reduce-scatter,
#: ``src/include/collectives.h``): 2 slices a chunk
CHUNK_STEPS, SLICE_STEPS = 4, 2
#: ``prims_simple.h``: a slice is at least ``sliceSize / 32`` (``max(divUp(nelem, 16 * SlicePerChunk) * 16,
#: sliceSize / 32)``)
SLICE_FLOOR_DIV = 32


def ring_slices(n_bytes: float, channels: int, n_ranks: int, buffsize: int | None) -> list[int]:
    """The bytes of each network message one Ring/Simple step of a channel sends: its chunk whole where it
    fits the slice floor (``NCCL_BUFFSIZE / 128``), else two slices of at least that floor (see module)."""
    buff = buffsize or DEFAULT_BUFFSIZE
    step = buff // NCCL_STEPS
    chunk = min(step * CHUNK_STEPS, math.ceil(n_bytes / (max(1, channels) * max(1, n_ranks))))
    floor = step * SLICE_STEPS // SLICE_FLOOR_DIV
    if chunk <= floor:
        return [chunk]
    first = max(math.ceil(chunk / 2), floor)
    return [first, chunk - first]


def ring_messages(n_bytes: float, channels: int, n_ranks: int, buffsize: int | None) -> int:
    """The network messages one Ring/Simple step of a channel sends: 1 where its chunk fits the slice floor
    (``NCCL_BUFFSIZE / 128``), else 2 (see module)."""
    return len(ring_slices(n_bytes, channels, n_ranks, buffsize))


def ring_step_flows(n_bytes: float, channels: int, n_ranks: int, buffsize: int | None,
                    piece: int | None) -> int:
    """The flow sends one Ring/Simple step of a channel makes: one a message where each rides whole on one
    flow (``piece`` unset, TCPXO), else each message cut into pieces of at most ``piece`` bytes (TCPX's
    NCCL_DYNAMIC_CHUNK_SIZE), one flow each."""
    sizes = ring_slices(n_bytes, channels, n_ranks, buffsize)
    return len(sizes) if not piece else sum(max(1, math.ceil(b / piece)) for b in sizes)


def ring_flow_scale(flows: int | None, buffsize: int | None, coll: Collective, algo: Algorithm,
                    proto: Protocol, n_bytes: float, channels: int, n_ranks: int, n_nodes: int,
                    bw_intra: float, bw_inter: float, piece: int | None = None) -> float:
    """The share of NCCL's bandwidth a call runs at on a network of ``flows`` flows a connection: below 1 for
    a Ring/Simple all-reduce, all-gather or reduce-scatter across nodes whose steps use fewer flows than
    the connection has; 1 otherwise (``flows`` unset or 1, one node, another algorithm or protocol).
    ``piece``: the largest piece of a message one flow carries (unset: a message whole on one flow)."""
    if not flows or flows <= 1 or n_nodes <= 1 or algo != A.RING or proto != P.SIMPLE:
        return 1.0
    if coll not in (C.ALL_REDUCE, C.ALL_GATHER, C.REDUCE_SCATTER) or n_bytes <= 0 or bw_inter <= 0:
        return 1.0
    used = min(flows, ring_step_flows(n_bytes, channels, n_ranks, buffsize, piece))
    share = used / flows
    full = min(bw_intra, bw_inter) if bw_intra > 0 else bw_inter
    slowed = min(bw_intra, share * bw_inter) if bw_intra > 0 else share * bw_inter
    return slowed / full
