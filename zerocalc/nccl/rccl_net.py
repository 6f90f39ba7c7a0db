"""RCCL across nodes: the protocol its tables force by size, and the time of the pair it runs.

**Choice.** RCCL picks the algorithm and protocol of least estimated time in its table
(:meth:`zerocalc.nccl.rccl.RcclTuning.choose`). From RCCL 2.25 (ROCm/rccl after the NCCL 2.23 merge; CHANGELOG
2.25.1: "LL/LL128 usage ranges for AR, AG, and RS are part of the tuning models")
``rcclUpdateCollectiveProtocol`` (``src/misc/rccl_wrap.cc``) then replaces the protocol on two nodes or more,
unless ``NCCL_PROTO`` is set: Simple, LL where the size per rank lies in the tuning model's LL range
``(min, max]`` (``llProtoRanges``), LL128 where it lies in the LL128 range and LL128 is enabled (for an
all-reduce on more than 2 nodes the LL128 maximum × 3.8). The size per rank is the call's bytes over its
ranks for all-gather and reduce-scatter (``rcclGetSizePerRank``), the call's bytes otherwise. The algorithm
stays the table's.

**Time.** Across nodes RCCL's table is what RCCL chooses by, not how long a call takes: its bandwidth ratios
and size corrections are set per algorithm to steer the choice (2.21.5's model 5 gives Tree/Simple 0.11 of the
xGMI bandwidth on 2 nodes and 0.59 on more, corrections down to 0.1, a 320 µs network hop to Ring/Simple where
2.20.5's held 19.8 µs), so the one-node rule (the table's time) prices a 16 MiB all-reduce on two MI355X nodes
at 9× the measured time. zerocalc times the pair RCCL runs as its data moves (:func:`wire_time_us`):

* latency: RCCL's own (``baseLat`` + hops of ``hwLat``,
  :attr:`zerocalc.nccl.rccl.RcclEntry.timed_latency_us`), two figures replaced: a network hop above
  :data:`STEERING_HOP_US` taken at 2.20.5's model 5 figure for the same pair, and LL128's hops taken from
  ``tuning_model_0`` (models 5 and 6 copy LL's hops into their LL128 entries; model 0 is RCCL's one table
  whose LL128 hops differ from LL's, as NCCL's own do);
* bandwidth: for LL128 and Simple the bus bandwidth RCCL's rome-model graphs carry (``totalBw``, every
  GPU's xGMI links: the graphs' ``bwIntra = bwInter``) × the protocol's payload share
  (:data:`PAYLOAD_SHARE`) × the algorithm's bus-to-algorithm ratio of ``tuning.cc`` (a ring ``p / nsteps``,
  a tree 1/2); for LL RCCL's table bandwidth without its size corrections (bus ratios 0.06-0.08 in 2.21.5 on,
  20-27 GB/s, the ceiling NCCL's own table sets LL across nodes: ``llMaxBws`` 19-39 GB/s). No call takes
  less than the bytes a node sends on its NICs at their line rate
  (:func:`zerocalc.nccl.rccl.network_floor_us`, the protocol's flags crossing too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zerocalc.nccl.release import Algorithm, Collective, Protocol

if TYPE_CHECKING:
    from zerocalc.nccl.rccl import RcclTuning

A, P, C = Algorithm, Protocol, Collective

#: A network hop (µs) past every physical one of RCCL's tables (9.5-25 µs in models 0, 3 and 5 of 2.20.5):
#: 2.21.5's model 5 and model 6 carry 320 for Ring/Simple, a figure that steers RCCL's choice away from it.
STEERING_HOP_US = 100.0

#: The share of the bytes a protocol moves that is the call's data: LL's 16-byte line carries two 4-byte
#: data words with two 4-byte flags (``union ncclLLFifoLine``, ``src/include/device.h``); RCCL's LL128 line
#: is 64 bytes with one 8-byte flag word (``NCCL_LL128_LINESIZE 64``, ``NCCL_LL128_DATAELEMS =
#: LINEELEMS - 1``, ROCm/rccl ``src/include/device.h``: 7/8, where NCCL's 128-byte line carries 15/16);
#: Simple sends the data alone.
PAYLOAD_SHARE = {P.LL: 0.5, P.LL128: 7.0 / 8.0, P.SIMPLE: 1.0}

#: ``rcclUpdateCollectiveProtocol``: the LL128 maximum of an all-reduce on more than 2 nodes is scaled
#: ("Tree has special behavior at 2 nodes", ``src/misc/rccl_wrap.cc``).
LL128_ALL_REDUCE_BEYOND_2_NODES = 3.8


def size_per_rank(coll: Collective, n_bytes: int, n_ranks: int) -> int:
    """``rcclGetSizePerRank``: all-gather and reduce-scatter compare a rank's share, others the call."""
    if coll in (C.ALL_GATHER, C.REDUCE_SCATTER):
        return n_bytes // n_ranks
    return n_bytes


def forced_protocol(tuning: RcclTuning, coll: Collective, n_bytes: int) -> Protocol | None:
    """The protocol ``rcclUpdateCollectiveProtocol`` sets for this call (module docstring), ``None`` where it
    leaves the table's: one node, ``NCCL_PROTO`` set, or a tuning model without ``llProtoRanges``."""
    ranges = tuning.model.proto_ranges
    if tuning.n_nodes < 2 or tuning.user_proto or not ranges or coll not in ranges:
        return None
    (ll_min, ll_max), (ll128_min, ll128_max) = ranges[coll]
    if ll_max == 0 and ll128_max == 0:  # RCCL_LL_LIMITS_UNDEFINED (0, src/include/rccl_common.h)
        return None
    size = size_per_rank(coll, n_bytes, tuning.n_ranks)
    proto = P.SIMPLE
    if ll_min < size <= ll_max:
        proto = P.LL
    if tuning.ll128:
        if coll == C.ALL_REDUCE and tuning.n_nodes > 2:
            ll128_max = ll128_max * LL128_ALL_REDUCE_BEYOND_2_NODES
        if ll128_min < size <= ll128_max:
            proto = P.LL128
    return proto


def wire_time_us(tuning: RcclTuning, coll: Collective, a: Algorithm, p: Protocol,
                 n_bytes: int) -> tuple[float, bool]:
    """The time (µs) of ``n_bytes`` run as ``a``/``p`` across nodes (module docstring) and whether the nodes'
    NICs, not the xGMI links, bound it."""
    from zerocalc.nccl.rccl import _nsteps, network_floor_us

    e = tuning.entries[(coll, a, p)]
    share = PAYLOAD_SHARE[p]
    if p == P.LL and e.bandwidth_GBps > 0:
        algbw = e.bandwidth_GBps
    else:
        nsteps, _ = _nsteps(coll, tuning.n_ranks, tuning.n_nodes)
        algbw = tuning.total_bw_GBps * share * (tuning.n_ranks / nsteps if a == A.RING else 0.5)
    links_us = n_bytes / (1000.0 * algbw)
    floor = network_floor_us(tuning, coll, a, n_bytes)
    nic_us = floor / share if floor is not None else 0.0
    return e.timed_latency_us + max(links_us, nic_us), nic_us > links_us
