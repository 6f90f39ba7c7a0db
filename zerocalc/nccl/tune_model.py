"""One (collective, algorithm, protocol) triple of NCCL's cost model: its latency and bandwidth, the body of
``ncclTopoTuneModel``'s loop (``src/graph/tuning.cc``), per release era (:mod:`zerocalc.nccl.model` holds
the triples' table, the enabled pairs, NCCL's choice and the run-time figures)."""

from __future__ import annotations

import math

from zerocalc.nccl.graph import Machine
from zerocalc.nccl.tables import (
    AMPERE,
    BLACKWELL,
    HOPPER,
    NET,
    NVLINK,
    PCI,
    VOLTA,
    Algorithm,
    Collective,
    Protocol,
    Release,
)

A, P, C = Algorithm, Protocol, Collective
_PROTO_INDEX = {P.LL: 0, P.LL128: 1, P.SIMPLE: 2}


def _log2i(n: int) -> int:
    return int(n).bit_length() - 1 if n > 0 else -1


def _cc_index(cc: int, release: Release) -> int:
    """The compute-capability row of the tables: v2.9.9-v2.14.3 ``compCap80`` (Ampere's row for sm80
    exactly, else Volta's); v2.15.5-v2.16.5 sm80 and sm90 exactly (Ampere, Hopper), else Volta; v2.17.1 on
    by range (``minCompCap >= 90`` Hopper, ``>= 80`` Ampere)."""
    if release.era <= 14:
        return AMPERE if cc == 80 else VOLTA
    if release.era <= 16:
        return AMPERE if cc == 80 else HOPPER if cc == 90 else VOLTA
    if cc >= 100 and len(release.per_ch_max_tree_bws) > BLACKWELL:
        return BLACKWELL
    return HOPPER if cc >= 90 else AMPERE if cc >= 80 else VOLTA


def _net_overhead_us(m: Machine) -> float:
    """``getNetOverhead``: 1 µs per network post on Intel, 2 on AMD (x86), else 1."""
    return 2.0 if m.cpu_vendor == "amd" else 1.0


def _tune_one(rel: Release, m: Machine, coll: Collective, a: Algorithm, p: Protocol) -> tuple[float, float]:
    """(latency µs, algorithm bandwidth GB/s) of one triple: the body of ``ncclTopoTuneModel``'s loop."""
    return _latency_us(rel, m, coll, a, p), _bandwidth_GBps(rel, m, coll, a, p)


def _nsteps(coll: Collective, nr: int) -> int:
    """Ring steps: 2(p−1) for all-reduce, p−1 for all-gather / reduce-scatter, p otherwise (tuning.cc)."""
    if coll == C.ALL_REDUCE:
        return 2 * (nr - 1)
    return nr - 1 if coll in (C.ALL_GATHER, C.REDUCE_SCATTER) else nr


def _caps(rel: Release, m: Machine, coll: Collective, ccx: int,
          idx2: int) -> tuple[float, float, float, float]:
    """``(llMaxBw, perChMaxTreeBw, Ring/LL128 and Tree/LL128 per-channel caps)`` of ``tuning.cc``: LL's row by
    GPU on one node, by CPU vendor across nodes; v2.9.9's LL128 cap per collective (``ll128MaxBwPerCh[coll]``,
    Ring and Tree alike), later releases' per GPU row and node count."""
    idx1 = ccx if m.n_nodes == 1 else (1 if m.cpu_vendor == "amd" else 0)
    if rel.ll128_max_bw_per_coll is not None:
        ring_ll128 = tree_ll128 = rel.ll128_max_bw_per_coll[coll]
    else:
        ring_ll128 = rel.per_ch_max_ring_ll128_bws[ccx][idx2]
        tree_ll128 = rel.per_ch_max_tree_ll128_bws[ccx][idx2]
    return rel.ll_max_bws[idx1][idx2], rel.per_ch_max_tree_bws[ccx][idx2], ring_ll128, tree_ll128


def _plain_tree(rel: Release, m: Machine) -> bool:
    """NCCL's tree is a plain one (``NCCL_TOPO_PATTERN_TREE``), whose bandwidth ``tuning.cc`` takes × 0.85
    (``if (a == NCCL_ALGO_TREE && comm->maxTreePattern == NCCL_TOPO_PATTERN_TREE) busBw *= .85``; v2.18.3 to
    v2.24.3 and v2.26.2 on read ``maxTreePattern``, v2.25.1 the graph's own pattern; v2.18.1 and earlier have
    no such factor): on nodes of one GPU, where ``search.cc`` makes every tree pattern the plain one (``if
    (ngpus == 1) ... graph->pattern = NCCL_TOPO_PATTERN_TREE``, v2.12-v2.30). On nodes of several GPUs the
    search finds the balanced tree (:mod:`zerocalc.nccl.graph` assumption 6)."""
    return m.n_nodes > 1 and m.n_ranks == m.n_nodes and rel.era >= 18 and rel.name != "2.18.1"


def _bandwidth_pre28(rel: Release, m: Machine, coll: Collective, a: Algorithm, p: Protocol) -> float:
    """:func:`_bandwidth_GBps` of v2.5.x to v2.7.8 (``tuning.cc``; the constants and how the releases differ:
    :mod:`zerocalc.nccl.release_tables_pre28`)."""
    nr, nn, ppn = m.n_ranks, m.n_nodes, m.ppn
    g = m.graphs[a]
    speed = g.bw_intra if nn <= 2 or a == A.COLLNET_DIRECT else g.bw_inter
    if rel.era <= 5:
        speed = float(int(speed))  # v2.5.x: ``int speed = graphs[a]->speedIntra``
    bus = g.n_channels * speed
    sm80 = m.compute_capability == 80  # compCap80: sm80 exactly
    if sm80:
        bus = min(bus * rel.ampere_bus_scale, rel.bus_bw_cap.get(AMPERE, math.inf))
    idx2 = nn - 1 if nn <= 2 else 2
    if a == A.RING and p == P.LL:
        bus *= 1 / 4 if (rel.era <= 6 or nn > 1 or coll in (C.ALL_REDUCE, C.REDUCE)) else 1 / 3
    if a == A.RING and p == P.LL128:
        if rel.ll128_max_bw_total is not None:  # v2.5-v2.6: × 120/128, capped on the whole
            bus = min(bus * 120.0 / 128.0, rel.ll128_max_bw_total[coll])
        else:
            bus = min(bus * (0.7 if ppn < 2 else 0.92), rel.ll128_max_bw_per_coll[coll] * g.n_channels)
    if a == A.TREE:
        bus = min(bus * rel.tree_bus_factor, rel.tree_max_bws[1 if (sm80 and p == P.LL128) else 0][idx2])
    if a == A.TREE and p == P.LL:
        bus /= rel.tree_ll_divisor
    if a == A.TREE and p == P.LL128:
        if rel.ll128_max_bw_total is not None:  # v2.5-v2.6: × 7/9, no cap
            bus *= 7.0 / 9.0
        else:
            bus = min(bus * (7.0 / 9.0 if nn == 1 else rel.tree_ll128_inter_factor),
                      rel.ll128_max_bw_per_coll[coll] * g.n_channels * 7.0 / 9.0)
    if a == A.COLLNET_DIRECT:
        bus = bus * .9 if p == P.SIMPLE else 0.0  # CollNet: × 0.9; LL ÷ 6 and no LL128 (not priced)
    return bus * (nr / _nsteps(coll, nr) if a == A.RING else .5)


def _bandwidth_GBps(rel: Release, m: Machine, coll: Collective, a: Algorithm, p: Protocol) -> float:
    """Bus bandwidth (channels × per-channel, protocol/algorithm factors, caps) → algorithm bandwidth."""
    if rel.era <= 7:
        return _bandwidth_pre28(rel, m, coll, a, p)
    new = rel.era >= 23  # v2.23.4's formulas on; 2.20-2.22 keep 2.19's but where they say otherwise
    nr, nn, ppn = m.n_ranks, m.n_nodes, m.ppn
    ccx = _cc_index(m.compute_capability, rel)
    idx2 = nn - 1 if nn <= 2 else 2
    ll_max, per_ch_tree, per_ch_ring_ll128, per_ch_tree_ll128 = _caps(rel, m, coll, ccx, idx2)
    # v2.17.1 prices NVLS on the ring graph ("we only need the NVSwitch speed for NVLS")
    g = m.graphs[A.RING if (a == A.NVLS and rel.era <= 17) else a]
    nsteps = _nsteps(coll, nr)
    collnet = a in (A.COLLNET_DIRECT, A.COLLNET_CHAIN)
    bw = g.bw_intra if nn <= 2 or collnet else g.bw_inter
    if a in (A.NVLS, A.NVLS_TREE) and rel.era >= 19:  # v2.17.1, v2.18.x: NVLS's bandwidth as any other's
        bw = _nvls_channel_bw(rel, g, coll, a, ccx, idx2, nn, ppn)
    bus = g.n_channels * bw
    # "Various model refinements"
    if ccx in rel.bus_bw_cap:  # v2.9.9-v2.17.1: 235 GB/s on Ampere (v2.17.1: 370 on Hopper), every algorithm
        bus = min(bus, rel.bus_bw_cap[ccx])
    if a == A.RING and p == P.LL:
        f = 0.5 if rel.era >= 21 else (1 / 4 if (nn > 1 or coll in (C.ALL_REDUCE, C.REDUCE)) else 1 / 3)
        bus = min(ll_max, bus * f)
    if a == A.RING and p == P.LL128:
        bus = min(bus * (0.7 if (not new and ppn < 2) else 0.92), g.n_channels * per_ch_ring_ll128)
    if a == A.TREE and (coll == C.ALL_REDUCE or not new):
        bus = min(bus * .92, g.n_channels * per_ch_tree)
    if a == A.TREE and p == P.LL:
        bus = min(bus / 3.8, ll_max)
    if a == A.TREE and p == P.LL128:
        f = 7.0 / 9.0 if nn == 1 else rel.tree_ll128_inter_factor
        bus = min(bus * f, g.n_channels * per_ch_tree_ll128)
    if a == A.TREE and _plain_tree(rel, m):
        bus *= .85
    if a == A.PAT:
        bus *= rel.pat_bw_factor
    if collnet and p != P.SIMPLE:
        bus = 0.0
    if rel.era <= 9 and a == A.COLLNET_DIRECT:
        bus *= .9  # v2.9.9's one CollNet: × 0.9
    if a == A.COLLNET_DIRECT and p == P.SIMPLE and rel.era <= 12:
        pass  # v2.9.9-v2.12.12's one CollNet: no GPU/NIC ratio (CollNet Direct's arrives in v2.14.3)
    elif a == A.COLLNET_DIRECT and p == P.SIMPLE:
        if rel.era >= 27 and coll in (C.ALL_GATHER, C.REDUCE_SCATTER):  # v2.27.3 on
            bus = ppn * min(g.bw_intra, g.bw_inter * 0.9)
        elif rel.era >= 20 and coll in (C.ALL_GATHER, C.REDUCE_SCATTER):  # 2.20-2.26: 1/8-ppn interpolated
            w = (ppn - 1) / 7
            bus = ppn * bw * (w * 0.85 + (1 - w) * 0.95)
        else:
            factor = ppn / g.n_channels
            factor -= (factor - 1) / 2
            bus /= factor
            if m.compute_capability >= 90 and rel.era >= 18:  # v2.18.1 on
                bus *= .85
    if a == A.COLLNET_CHAIN and p == P.SIMPLE and rel.era <= 17:
        bus *= .75  # v2.14.3-v2.17.1
    if (rel.era >= 20 and a in (A.NVLS, A.COLLNET_DIRECT) and coll in (C.ALL_GATHER, C.REDUCE_SCATTER)
            and nn > 1):
        bus = 0.0  # needs a CollNet plugin with iallgather/ireducescatter and 1 GPU per NIC head
    # bus → algorithm bandwidth
    if new:
        if not (a != A.RING and coll in (C.ALL_GATHER, C.REDUCE_SCATTER)):
            nvls_ratio = nr / nsteps if rel.nvls_efficiency_model else 5.0 / 6.0
            bus *= nr / nsteps if a == A.RING else nvls_ratio if a in (A.NVLS, A.NVLS_TREE) else .5
    elif not (rel.era >= 20 and a == A.COLLNET_DIRECT and coll in (C.ALL_GATHER, C.REDUCE_SCATTER)):
        nvls_ratio = rel.nvls_bus_ratio  # v2.17.1, v2.18.1: NVLS × 0.75
        if a == A.NVLS_TREE and rel.era == 18:  # v2.18.x: 0.7 · nNodes / (2 (nNodes − 1))
            nvls_ratio = .70 * nn / (2 * (nn - 1)) if nn > 1 else 0.0
        bus *= nr / nsteps if a == A.RING else nvls_ratio if a in (A.NVLS, A.NVLS_TREE) else .5
    return bus


def _nvls_channel_bw(rel: Release, g, coll: Collective, a: Algorithm, ccx: int, idx2: int, nn: int,
                     ppn: int) -> float:
    """One NVLS / NVLS Tree channel's bandwidth in ``ncclTopoTuneModel`` from v2.19 (before the
    "model refinements"): the efficiency model of v2.28.3 on, else the releases' min of the graph's speeds."""
    if rel.nvls_efficiency_model:
        intra_bw = g.bw_intra * rel.nvls_efficiency[ccx] * (g.n_channels - 1) / g.n_channels
        intra_bw *= 2.0 if coll == C.ALL_REDUCE else (ppn - 1) / ppn
        inter_bw = g.bw_inter * (2 if nn <= 2 and a == A.NVLS_TREE else 1)
        cap = rel.per_ch_max_nvls_tree_bws[ccx][idx2] if a == A.NVLS_TREE else math.inf
        return min(intra_bw, inter_bw, cap)
    if a == A.NVLS and coll != C.ALL_REDUCE and rel.era >= 27:  # v2.27.x: all-gather, reduce-scatter
        return min(g.bw_intra * (ppn - 1) / ppn, g.bw_inter * 0.9)
    if a == A.NVLS:
        return min(g.bw_intra, g.bw_inter)
    return min(g.bw_intra, g.bw_inter if nn <= 2 else g.bw_inter / 2)


def _hop_latencies_us(rel: Release, m: Machine, a: Algorithm, p: Protocol) -> tuple[float, float]:
    """``(intraLat, interLat)`` of ``ncclTopoTuneModel``: one hop within a node (NVLink or PCI) and one across
    the network, with the plugin's ``latencyInter`` as each release adds it."""
    g = m.graphs[a]
    pi = _PROTO_INDEX[p]
    intra_lat = rel.hw_lat_us[NVLINK if g.nvlink else PCI][a][pi]
    if rel.era <= 17:
        inter_lat = rel.hw_lat_us[NET][a][pi]
        # v2.12.12-v2.17.1: the plugin's latency replaces the hop (earlier: not read; timed so, see tune)
        if (rel.era >= 12 or m.wire_hops) and g.latency_inter_us:
            inter_lat = g.latency_inter_us
        if m.n_nodes > 1 and p == P.LL and rel.era >= 7:  # v2.7.3-v2.17.1
            intra_lat *= 1.8
    else:
        if rel.era >= 23 and m.ppn == 1:
            inter_lat = rel.hw_lat_us[NET][A.TREE][pi]
        else:
            inter_lat = rel.hw_lat_us[NET][a][pi]
        flush = p == P.SIMPLE and not (m.wire_time and m.relayed)  # no flush through host memory
        inter_lat += g.latency_inter_us * (2 if flush else 1)
    return intra_lat, inter_lat


def _latency_us(rel: Release, m: Machine, coll: Collective, a: Algorithm, p: Protocol) -> float:
    """Base latency + hops × per-hop latency of the link class (NVLink, PCI, network)."""
    new = rel.era >= 23  # v2.23.4's formulas on; 2.20-2.22's latencies are 2.19's (tuning.cc)
    nr, nn = m.n_ranks, m.n_nodes
    g = m.graphs[a]
    nsteps = _nsteps(coll, nr)
    pi = _PROTO_INDEX[p]
    intra_hw = NVLINK if g.nvlink else PCI
    hw = intra_hw if nn == 1 else NET
    lat = rel.base_lat_us[a][pi]
    intra_lat, inter_lat = _hop_latencies_us(rel, m, a, p)
    if a == A.RING:
        step = rel.hw_lat_us[hw][a][pi]
        if rel.era <= 6 and coll not in (C.REDUCE, C.BROADCAST):
            # v2.5.x-v2.6.4: every step at one link class's hop, the network's on several nodes
            lat += nsteps * (inter_lat if nn > 1 else step)
        elif coll in (C.REDUCE, C.BROADCAST):
            # sameChannels assumed: the ring graph NCCL finds on NVSwitch nodes with a NIC per GPU replays
            # one GPU order on every channel ("Pattern 4, ... type NVL/PIX, sameChannels 1" on 2 H100 nodes
            # of 8 NICs, NVIDIA/nccl issue 1197, NCCL 2.19.4)
            lat += step
        else:
            net_overhead = 0.0
            if nn > 1 and rel.era >= 18:  # getNetOverhead: v2.18.1 on
                net_overhead = _net_overhead_us(m) * (3 if p == P.SIMPLE else 1)
            intra_lat = max(intra_lat, net_overhead)
            if new:
                n_inter = 0 if nn == 1 else 2 * (nn - 1) if coll == C.ALL_REDUCE else nn - 1
            elif rel.era <= 10:  # v2.9.9, v2.10.3: 2(nNodes − 1) network steps for all-reduce
                n_inter = 2 * (nn - 1) if coll == C.ALL_REDUCE else \
                    nn - 1 if coll in (C.ALL_GATHER, C.REDUCE_SCATTER) else nn
            else:
                n_inter = (2 * nn if nn > 1 else 0) if coll == C.ALL_REDUCE else \
                    nn - 1 if coll in (C.ALL_GATHER, C.REDUCE_SCATTER) else nn
            lat += (nsteps - n_inter) * intra_lat + n_inter * inter_lat
    elif a == A.TREE:
        if coll == C.ALL_REDUCE or not new:
            lat += 2 * ((nr // nn - 1) * intra_lat + _log2i(nn) * inter_lat)
    elif a == A.COLLNET_DIRECT and rel.era <= 9:  # v2.9.9's one CollNet
        lat += 2 * (nr // nn - 1) * intra_lat + inter_lat
    elif a == A.COLLNET_DIRECT:  # arity serialization 0.5 µs before v2.19.4, then 0.4
        arity = 0.5 if rel.era <= 18 else 0.4
        lat += 2 * (min(1, nr // nn - 1) * intra_lat + (nr // nn - 1) * arity) + inter_lat
    elif a == A.COLLNET_CHAIN:  # v2.14.3-v2.17.1: no network hop
        lat += 2 * (nr // nn - 1) * intra_lat + (inter_lat if rel.era >= 18 else 0.0)
    elif a == A.NVLS and rel.era <= 17:
        pass  # v2.17.1: the base latency alone (40 µs)
    elif a == A.NVLS and rel.era == 18:  # v2.18.x: base + the network hop's table value
        lat += rel.hw_lat_us[NET][a][pi] if nn > 1 else 0.0
    elif a == A.NVLS_TREE and rel.era == 18:  # v2.18.x: base + 2 (nNodes − 1) network hops
        lat += 2 * (nn - 1) * rel.hw_lat_us[NET][a][pi]
    elif a == A.NVLS:
        lat = intra_lat + (inter_lat if nn > 1 else 0.0)
    elif a == A.NVLS_TREE:
        lat += intra_lat + 2 * _log2i(nn) * inter_lat
    elif a == A.PAT and coll in (C.ALL_GATHER, C.REDUCE_SCATTER):
        lat += _log2i(nn) * (inter_lat / 3.5) + nr * 2.8
    return lat


AMPERE_LL128_RUN_SHARE = 0.68
"""The share of NCCL's own Ring/LL128 bandwidth a Ring/LL128 call runs at on one node of NVLink A100s (sm80),
where ``ncclTopoTuneModel`` prices it at ``min(busBw × 0.92, nChannels × perChMaxRingLL128Bw)``, 220.8 GB/s
of bus bandwidth on the 12 channels × 20 GB/s of an HGX A100 (``tuning.cc`` v2.19-v2.30; v2.9.9-v2.17.1 the
235 GB/s Ampere cap × 0.92). The figure: the median, over every pair of consecutive sizes that NCCL runs on
Ring/LL128 in seven public one-node sweeps of four hosts (``tests/data/traces``: OCI BM.GPU4.8's all-reduce,
``-g 8``; two all-reduces of one A100-SXM4-80GB host, ``-g 8`` and ``-np 8``; another A100-SXM4-80GB host's
all-reduce at NCCL 2.19.3, ``-g 8``; Microsoft SuperBench's all-reduce, all-gather and reduce-scatter, 8
A100-SXM4-40GB, ``-g 8``), of the measured marginal bus bandwidth (the size step over the time step) over
NCCL's: 16 pairs from 2 to 16 MiB, median 0.679 (quartiles 0.60 and 0.80). The same sweeps' Ring/Simple
rows of 1 GiB and more are within 0.92-1.0x of NCCL's time, and the DGX-1 V100 all-reduce's LL128 pairs run
at NCCL's own Volta figure, so neither the links nor LL128 on other GPUs are held to it. NCCL chooses with
its own figures (:meth:`zerocalc.nccl.model.Tuning.choose`); the call runs at this share
(:func:`ll128_run_share`)."""


def ll128_run_share(m: Machine, a: Algorithm, p: Protocol) -> float:
    """The share of NCCL's bandwidth a call of ``(a, p)`` runs at on ``m`` for the protocol's own rate:
    :data:`AMPERE_LL128_RUN_SHARE` for Ring/LL128 on one node of NVLink sm80 GPUs, else 1 (a run-time figure:
    NCCL chooses with its own)."""
    ampere = 80 <= m.compute_capability < 90
    if a == A.RING and p == P.LL128 and ampere and m.n_nodes == 1 and m.graphs[A.RING].nvlink:
        return AMPERE_LL128_RUN_SHARE
    return 1.0


AMPERE_LL_HOP_US = 1.02
"""The time (µs) a Ring/LL hop takes on one node of NVSwitch A100s (sm80), where NCCL's table charges 0.47
(``hwLat[NVLINK][RING][LL]``, ``tuning.cc`` v2.8.4-v2.17.1, base latency 3.6) or 0.6 (v2.18.1-v2.30.7, base
6.6). A measured reading, labelled as such: the all-reduces of 8 A100-SXM4 on one node with one process per
GPU (``mpirun -np 8``, so no launch terms) in ``tests/data/traces``, ABCI's at NCCL 2.8.4
(``all_reduce_perf-8xA100-SXM4-40GB-abci-1node-nccl2.8.4``) and the thanos host's
(``all_reduce_perf-8xA100-SXM4-80GB-np8-thanos``, priced at 2.30.7). Their sizes of 4 to 256 B (one channel
of Ring/LL) run at a median of 17.3 and 21.55 µs, where NCCL's time is its base latency and 14 hops of the
table's: (17.3 − 3.6) / 14 = 0.98 and (21.55 − 6.6) / 14 = 1.07 µs a hop, 1.02 their mean. The two releases'
tables differ in both terms; the measured hop does not. The ``-g 8`` sweeps of such nodes (the thanos
host's, Microsoft SuperBench's at 2.12.12, an A100-SXM4-80GB host's at 2.19.3) keep their median sizes
within 0.8-1.25x with it. One node of 8 H100 (AWS p5, ``all_reduce_perf-8xH100-p5-aws-batch-tagged``, one
process per GPU, 2.30.7) runs its sizes up to 256 B at a median of NCCL's own 15.0 µs (0.6 a hop), so Hopper
keeps the table, as does the DGX-1's V100 cube-mesh (sm70, no NVSwitch). A run-time figure: NCCL chooses
with its own (:func:`ampere_ll_latency_us`)."""


def ampere_ll_latency_us(rel: Release, m: Machine, coll: Collective, p: Protocol) -> float | None:
    """The latency a Ring/LL call runs with on one node of NVLink A100s (sm80): NCCL's own
    (:func:`_latency_us`) with each hop it charges (``nsteps``; one for broadcast and reduce) at
    :data:`AMPERE_LL_HOP_US` in place of the table's; ``None`` for other protocols, GPUs and node counts."""
    ampere = 80 <= m.compute_capability < 90
    if p != P.LL or not ampere or m.n_nodes != 1 or not m.graphs[A.RING].nvlink:
        return None
    return _ll_hops_at(rel, m, coll, p, AMPERE_LL_HOP_US)


def _ll_hops_at(rel: Release, m: Machine, coll: Collective, p: Protocol, hop_us: float) -> float:
    """NCCL's Ring latency on one node with each hop it charges (``nsteps``; one for broadcast and reduce)
    at ``hop_us`` where its table charges less."""
    table = rel.hw_lat_us[NVLINK][A.RING][_PROTO_INDEX[p]]
    hops = 1 if coll in (C.BROADCAST, C.REDUCE) else _nsteps(coll, m.n_ranks)
    return _latency_us(rel, m, coll, A.RING, p) + hops * max(0.0, hop_us - table)


NVL72_LL_HOP_US = 1.64
"""The time (µs) a Ring/LL hop takes in a multi-node NVLink domain of Blackwell GPUs (sm100 and later: a
GB200 / GB300 NVL72 rack, one node to NCCL), where NCCL's table charges 0.6 (``hwLat[NVLINK][RING][LL]``,
``tuning.cc`` v2.18.1-v2.30.7, base latency 6.6). A measured reading, labelled as such, from the four
sweeps in ``tests/data/traces`` whose calls run Ring/LL in such a domain: two of 8 GB200 on 2 GCP A4X hosts
(``all_gather_perf-8xGB200-gcp-a4x-2nodes-imex-collapsed``,
``all_gather_perf-8xGB200-gcp-a4x-gke-default-jobset-collapsed``; no version stated, priced at 2.30.7), and
OCI's GB300 all-reduces at NCCL 2.28.7 on 2 hosts (8 GPUs,
``all_reduce_perf-8xGB300-oci-2nodes-1rack-16sizes-nccl2.28.7``) and on one host (4 GPUs,
``all_reduce_perf-4xGB300-oci-1node-16sizes-nccl2.28.7``). Each size NCCL runs on Ring/LL whose bytes
take at most half its latency at NCCL's LL rate (1 KiB-1 MiB, 512 KiB-1 MiB and 512 KiB): (measured − 6.6
− bytes at that rate) / nsteps; the files' medians 2.13, 1.73, 1.27 and 1.42 µs a hop, 1.64 their mean
(each file's within 0.77-1.30x of it; the rows 1.21-2.28). The GB200 all-gathers sit above it, the
GB300 all-reduces below; the data do not tell the GPU from the provider, release or collective. Crossing
hosts costs nothing more: OCI's GB300s take 1.27 µs a hop over 2 hosts, 1.42 on one. HGX B200 / B300 nodes
(NVSwitch in the host) and Hopper keep the table: no bundled one-node sweep of theirs runs Ring/LL, and
one node of 8 H100 runs NCCL's own 0.6 (:data:`AMPERE_LL_HOP_US`). A run-time figure: NCCL chooses with
its own (:func:`nvl72_ll_latency_us`)."""


def nvl72_ll_latency_us(rel: Release, m: Machine, coll: Collective, p: Protocol) -> float | None:
    """The latency a Ring/LL call runs with in a multi-node NVLink domain of Blackwell GPUs (``m.mnnvl``,
    sm100 and later, one node to NCCL): NCCL's own with each hop it charges at :data:`NVL72_LL_HOP_US`;
    ``None`` for other protocols, GPUs, domains and node counts."""
    if p != P.LL or m.compute_capability < 100 or not m.mnnvl or m.n_nodes != 1 \
            or not m.graphs[A.RING].nvlink:
        return None
    return _ll_hops_at(rel, m, coll, p, NVL72_LL_HOP_US)


def ring_run_latency_us(rel: Release, m: Machine, coll: Collective, p: Protocol,
                        share: float = 1.0) -> float | None:
    """The latency a Ring all-gather or reduce-scatter across nodes runs with: every one of its ``nRanks − 1``
    steps at the slowest hop of the ring, ``base + nsteps · max(intraLat, hwLat[NET])``, where NCCL's estimate
    (:func:`_latency_us`) charges the network hop to its ``nInterSteps`` (``nNodes − 1``) alone and the NVLink
    / PCI hop to the rest; never less than NCCL's estimate; on one node (every hop alike)
    :func:`ampere_ll_latency_us` or :func:`nvl72_ll_latency_us`; ``None`` with one GPU a node (every step
    crosses the network already) and for other collectives. A run-time figure: NCCL chooses with its own
    (:meth:`zerocalc.nccl.model.Tuning.choose`).

    Why: a ring is a pipeline whose ranks forward each step once the previous rank's data lands, on
    ``NCCL_STEPS`` = 8 buffer slots a connection (a Simple chunk takes 4 of them: ``ALLGATHER_CHUNKSTEPS``,
    ``REDUCESCATTER_CHUNKSTEPS``, ``src/include/collectives.h``); a rank whose outgoing hop is the network
    holds its neighbours to that hop's pace once the slots fill, so every step, not only those that cross the
    network, waits on it. NCCL's own ``tuning.cc`` (v2.18.1 on: "Inter-node rings still have to launch
    nsteps * net overhead") charges every step of such a ring the network's per-step overhead, and a
    maintainer says ring latency "increases linearly with the communicator size" (NVIDIA/nccl issue 1712).
    Seen on 10 nodes of 8 H100 (80 ranks, NCCL 2.29.2): all-gather and reduce-scatter from 32 MiB to 2 GiB
    measured at 0.43-0.84x of NCCL's estimate, 2.6-6 µs a step more on LL128 and 8-11 µs on Simple than it
    charges, against ``interLat − intraLat`` = 2.1 and 10.6 µs (v2.29 tables); on the same nodes with 4 GPUs
    each (40 ranks) at its smallest size (0.74-0.81x); on 2 GCP A3 Mega nodes (16 ranks, TCPXO) at 8-32 MiB
    (0.53-0.78x, 4-5 µs a step more on LL128).

    All-reduce is left to NCCL's estimate: ``ncclTopoGetAlgoTime`` already raises a Ring all-reduce's latency
    across nodes by its "plateau effect of ring" factor (× 1.4 on sm80 and later), and the bundled multi-node
    Ring all-reduce sweeps (4 nodes of 8 H100 under NCCL 2.26.2 from 256 MiB, within 0.96-1.0x) are met with
    it; charging its 2 (nRanks − 1) steps at the network hop on top would price them 1.05-1.46x.

    The pace is the hop's own figure in NCCL's tables (``hwLat[NCCL_HW_NET]``), without the latency the
    network plugin reports (``latencyInter``): the sweeps above ran where it is 0 (InfiniBand, TCPXO), and
    what a plugin reports steers NCCL's choice (AWS EFA's 75 µs), so it is not charged to every step; NCCL's
    estimate, which charges it to the steps that cross the network, stays the floor (charged to every step,
    a 16-rank p5 all-gather of 8 MiB would take 400 µs where NCCL estimates 90). On Simple the pace is at
    least the wire's own one-way latency where the network states one (the topology's
    ``net_wire_latency_us``, on the wire's timing run): a Simple chunk holds 4 of a connection's 8 slots
    (two slices of ``*_SLICESTEPS`` = 2, each slice one network request), so two chunks are in flight, and a
    slot comes back only once the receiver has posted its receive and the sender has learnt it (NCCL's IB
    transport: the receiver's FIFO entry; GPUDirect-TCPX: the posted receive's index on the control socket,
    ``kRecvSync``, google/nccl-plugin-gpudirecttcpx ``net_tcpx.cc``), one trip back for each trip out: two
    chunks a round trip, a chunk a one-way trip (:func:`_wire_paced_us`: the wire's excess over the table's
    hop in proportion to the channels the call runs, ``share``). LL and LL128 (a step one slot, eight in
    flight) keep the table's pace, as does a network reached through host memory: the one zerocalc gives a
    wire latency there, NCCL's socket transport, sends without the receiver's word (``ncclNetSocketIsend``
    takes the request at once and ``ncclNetSocketTest`` sends its size, then its data,
    ``src/transport/net_socket.cc``). Seen on 2 GCP A3 High VMs (16 ranks, TCPX, whose wire is TCP between
    VMs, 49.5 µs one way): all-gathers of 1-8 MiB took 785-1007 µs, 52-67 µs a step, where the table's 14 µs
    a step gives 0.26-0.49x.

    A Ring broadcast or reduce across nodes: NCCL's estimate charges it one hop of its table
    (``baseLat + hwLat``, ``tuning.cc``, every release), never the plugin's ``latencyInter``; the chain
    crosses the network ``nNodes − 1`` times, each crossing the wire's latency (the topology's
    ``net_wire_latency_us``, on the wire's timing run): charged on top where the network states one (two
    VMs over NCCL's socket transport, :mod:`zerocalc.nccl.net_socket`: an 8-byte broadcast of two V100
    hosts, nccl-tests issue 82, took 45.8 µs where NCCL's estimate is 18)."""
    if m.n_nodes == 1:  # one node: every hop alike, but for an A100's or an NVL72 domain's Ring/LL hop
        lat = ampere_ll_latency_us(rel, m, coll, p)
        return lat if lat is not None else nvl72_ll_latency_us(rel, m, coll, p)
    wire = _ring_wire_us(m)
    if coll in (C.BROADCAST, C.REDUCE) and m.n_nodes > 1 and wire:
        return _latency_us(rel, m, coll, A.RING, p) + (m.n_nodes - 1) * wire
    if m.n_nodes <= 1 or m.ppn <= 1 or coll not in (C.ALL_GATHER, C.REDUCE_SCATTER):
        return None
    paced = rel.hw_lat_us[NET][A.RING][_PROTO_INDEX[p]]  # the network hop's own cost, without the plugin's
    paced = _wire_paced_us(rel, m, p, share) or paced  # wire latency, unless the wire paces a Simple step
    return max(_latency_us(rel, m, coll, A.RING, p), _every_step_us(rel, m, coll, p, paced))


def _every_step_us(rel: Release, m: Machine, coll: Collective, p: Protocol, paced: float) -> float:
    """A Ring call's latency with every one of its steps at the slower of the hop inside a node (NCCL's
    ``getNetOverhead`` from v2.18.1: 3× on Simple) and ``paced`` across nodes:
    ``baseLat + nsteps · max(intraLat, paced)``."""
    intra_lat, _ = _hop_latencies_us(rel, m, A.RING, p)
    if rel.era >= 18:  # getNetOverhead: v2.18.1 on
        intra_lat = max(intra_lat, _net_overhead_us(m) * (3 if p == P.SIMPLE else 1))
    return rel.base_lat_us[A.RING][_PROTO_INDEX[p]] + _nsteps(coll, m.n_ranks) * max(intra_lat, paced)


def _ring_wire_us(m: Machine) -> float:
    """The wire's one-way latency a Ring hop across nodes is timed with (the topology's, on the wire's timing
    run), 0 where there is none."""
    return m.graphs[A.RING].latency_inter_us if A.RING in m.graphs and m.wire_time else 0.0


def _wire_paced_us(rel: Release, m: Machine, p: Protocol, share: float = 1.0) -> float | None:
    """A Ring/Simple step's pace across a network whose wire is slower than NCCL's hop: the table's hop
    (``hwLat[NET]``) plus the wire's one-way latency beyond it in proportion to ``share``, the part of the
    communicator's channels the call runs on (:func:`zerocalc.nccl.launch.channel_share`, a tuner's count);
    ``None`` where the wire is not slower, for LL / LL128, through host memory, off the wire's timing run, and
    on a release that reads no plugin latency (before 2.12), whose run charges the reported figure as NCCL
    2.12-2.17 count it (``wire_hops``), not a wire the topology states.

    The proportion: each channel the call runs is a connection of its own whose requests pass the plugin
    one after another on the rank's one proxy thread (NCCL progresses every channel's network
    connections from one thread a GPU, ``src/proxy.cc``), so a call on few channels waits on few of them,
    as a Ring all-reduce's plateau latency grows with its channels on TCPXO (:func:`zerocalc.nccl.model.
    ring_plateau`). Seen on 2 GCP A3 High VMs (16 ranks, TCPX; skypilot-org/skypilot
    ``examples/gcp_gpu_direct_tcpx``, its README's all-reduce busbw table): 22-29 µs a step at 16-32 KiB
    (one channel launched), 37 at 64 KiB (two), 43 at 128 KiB (four), 47-50 from 256 KiB (all eight);
    priced 18.4, 22.9, 31.8 and 49.5."""
    wire = _ring_wire_us(m)
    table = rel.hw_lat_us[NET][A.RING][_PROTO_INDEX[p]]
    if p != P.SIMPLE or m.relayed or m.wire_hops or wire <= table:
        return None
    return table + (wire - table) * min(1.0, max(0.0, share))


def ring_wire_floor_us(rel: Release, m: Machine, coll: Collective, p: Protocol,
                       share: float = 1.0) -> float | None:
    """The least latency a Ring/Simple all-reduce across nodes runs with where the network's wire is slower
    than NCCL's hop: ``base + 2 (nRanks − 1) · pace`` (:func:`_wire_paced_us`), every step paced as
    :func:`ring_run_latency_us` paces an all-gather's; ``None`` elsewhere. A floor on the time NCCL's own
    estimate gives with its plateau factor, not a term on top of it
    (:meth:`zerocalc.nccl.model.Tuning.run_time_s`). Seen on 2 GCP A3 High VMs (16 ranks, TCPX, Ring/Simple,
    8 channels; skypilot-org/skypilot ``examples/gcp_gpu_direct_tcpx`` README): 256 KiB-8 MiB took
    1.40-1.71 ms, 47-57 µs a step, where NCCL's estimate with the wire on its two network steps is 0.79-1.42
    ms."""
    if coll != C.ALL_REDUCE or m.n_nodes <= 1:
        return None
    paced = _wire_paced_us(rel, m, p, share)
    return None if paced is None else _every_step_us(rel, m, coll, p, paced)


def tree_run_latency_us(rel: Release, m: Machine, coll: Collective, a: Algorithm,
                        p: Protocol) -> float | None:
    """The latency a Tree or NVLS Tree call across a number of nodes that is not a power of two runs with:
    NCCL's own (:func:`_latency_us`) with ``2 · ceil(log2 nNodes)`` network hops where it counts
    ``2 · log2i(nNodes)`` (the floor); a Tree/LL all-reduce across NVLink A100 nodes with its NVLink hops at
    the A100's (:func:`ampere_tree_ll_hops_us`); ``None`` where neither applies (1, 2, 4, 8, … nodes, other
    algorithms). A run-time figure: NCCL chooses with its own (:meth:`zerocalc.nccl.model.Tuning.choose`).

    Source: the trees NCCL builds across nodes (``ncclGetBtree`` / ``ncclGetDtree``, ``src/graph/trees.cc``,
    unchanged from v2.4 to v2.30): node 0 roots a binary tree whose first child is the largest power of two
    below ``nNodes``, so the deepest node is ``ceil(log2 nNodes)`` levels down (10 nodes: 0 → 8 → 4 → 2 → 1,
    four levels, where ``log2i(10)`` = 3); the second tree, mirrored (even count) or shifted by one (odd),
    is as deep. ``ncclTopoTuneModel`` prices a Tree all-reduce's latency as
    ``2 · ((nRanks/nNodes − 1) · intraLat + log2i(nNodes) · interLat)`` and an NVLS Tree's as
    ``intraLat + 2 · log2i(nNodes) · interLat`` (v2.19 on; v2.18 counts ``2 (nNodes − 1)`` hops, left as it
    is), one level short up and down on such counts."""
    hops = ampere_tree_ll_hops_us(rel, m, coll, a, p)
    deeper = _deeper_tree_latency_us(rel, m, coll, a, p)
    if hops is None and deeper is None:
        return None
    return (deeper if deeper is not None else _latency_us(rel, m, coll, a, p)) + (hops or 0.0)


def ampere_tree_ll_hops_us(rel: Release, m: Machine, coll: Collective, a: Algorithm,
                           p: Protocol) -> float | None:
    """What a Tree/LL all-reduce across nodes of NVLink A100s (sm80) spends on its NVLink hops beyond NCCL's
    table: the ``2 · (nRanks/nNodes − 1)`` hops of the chain up and down each node
    (``ncclTopoTuneModel``'s Tree latency) at :data:`AMPERE_LL_HOP_US`, the LL hop one-node A100 rings
    run at, where NCCL charges its ``intraLat`` (``hwLat[NVLINK][TREE][LL]``: 0.6 µs from v2.18, the ring's
    figure; before, 0.52 × 1.8 = 0.94, already near it); ``None`` elsewhere. A run-time figure: NCCL chooses
    with its own.

    The chain is the same NVLink LL hop as the ring's. Two nodes of 8 A100, under NCCL's 25.2 µs
    (v2.18-v2.30), run their sizes up to 512 B at 35-39 µs: ALCF Sophia over InfiniBand (NCCL 2.22.3),
    OCI's OKE pair and OCI's BM.GPU4.8 pair over RoCE. The 14 hops at 1.02 µs add 5.9 µs."""
    ampere = 80 <= m.compute_capability < 90
    if a != A.TREE or p != P.LL or coll != C.ALL_REDUCE or not ampere or m.n_nodes <= 1 \
            or not m.graphs[A.TREE].nvlink:
        return None
    intra_lat, _ = _hop_latencies_us(rel, m, a, p)
    return 2 * (m.ppn - 1) * max(0.0, AMPERE_LL_HOP_US - intra_lat)


def _deeper_tree_latency_us(rel: Release, m: Machine, coll: Collective, a: Algorithm,
                            p: Protocol) -> float | None:
    """NCCL's latency with the tree's deepest path where it counts ``log2i`` levels (above)."""
    nn = int(m.n_nodes)
    if nn <= 2 or a not in (A.TREE, A.NVLS_TREE):
        return None
    extra = (nn - 1).bit_length() - _log2i(nn)  # ceil(log2 nn) − floor(log2 nn)
    if extra == 0 or (a == A.NVLS_TREE and (rel.era == 18 or coll != C.ALL_REDUCE)):
        return None
    if a == A.TREE and not (coll == C.ALL_REDUCE or rel.era < 23):
        return None
    _, inter_lat = _hop_latencies_us(rel, m, a, p)
    return _latency_us(rel, m, coll, a, p) + 2 * extra * inter_lat
