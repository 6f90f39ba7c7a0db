"""NCCL's tuning constants, one :class:`~zerocalc.nccl.release.Release` per modelled release.

Every number here is copied from NCCL's sources at the release named (GitHub NVIDIA/nccl):

- ``src/graph/tuning.cc``: base latencies (``baseLat``), per-hop latencies per link class
  (``hwLat``: NVLink, PCI, network), the LL bandwidth cap (``llMaxBws``), the per-channel caps of
  Ring/LL128, Tree, Tree/LL128 and NVLS Tree (``perChMax*Bws``), the NVLS efficiency
  (``nvlsEfficiency``) and the Tree correction factors (``treeCorrectionFactor``);
- ``src/graph/search.cc``: the bandwidths the topology search may give a channel
  (``speedArrayIntra``/``Inter``, ``sm90…``, ``sm100…``);
- ``src/graph/topo.h``: NCCL's bandwidth of one NVLink link per GPU generation (``SM80_NVLINK_BW``…);
- ``src/include/device.h`` (``devcomm.h`` before 2.19): ``MAXCHANNELS`` and ``NCCL_MAX_NVLS_ARITY``.

Modelled releases: **2.9** (v2.9.9), **2.10** (v2.10.3), **2.12** (v2.12.12), **2.14** (v2.14.3),
**2.15** (v2.15.5), **2.16** (v2.16.5), **2.17** (v2.17.1), **2.18** (v2.18.6) and **2.18.1** (v2.18.1),
**2.19** (v2.19.4; ``tuning.cc`` is byte-identical from v2.19.1 to v2.19.4), **2.20** (v2.20.5), **2.21**
(v2.21.5: 2.19's with the changes listed at ``V2_21``), **2.22** (v2.22.3), **2.23** (v2.23.4), **2.24**
(v2.24.3), **2.26** (v2.26.2; identical from v2.26.2 to v2.26.6), **2.27** (v2.27.7; **2.27.3** and
**2.27.5** for its earlier patches), **2.28** (v2.28.9; **2.28.3**, **2.28.7**), **2.29** (v2.29.7;
**2.29.3**), and **2.30** (v2.30.7, the latest release in the NVIDIA/nccl repository at the time of
writing); each later table says how it differs from its neighbour. 2.26 has 2.30's algorithms and
formulas but the older NVLS / NVLS Tree bandwidth (``min(bwIntra, bwInter)``, × 5/6; no ``nvlsEfficiency``, no
``perChMaxNVLSTreeBws``), NVLS Tree's 14 µs network hop, Blackwell caps of twice Hopper's, and neither
2.27's NVLS / CollNet Direct all-gather and reduce-scatter bandwidth nor its LL128 rule. The
releases before 2.18 (each table says how it differs from the next) have Tree, Ring and CollNet (one
CollNet algorithm before 2.14, priced here as CollNet Direct, whose formulas it had; Direct and Chain
from 2.14), NVLS from 2.17 (one node only), no NVLS Tree, no PAT; their formulas differ from 2.19's
where :mod:`zerocalc.nccl.model` says (``era``).


Which release a version gets: :mod:`zerocalc.nccl.tables`.
"""

from __future__ import annotations

from dataclasses import replace

from zerocalc.nccl.release import AMPERE, HOPPER, Algorithm, Collective, Release

_A = Algorithm
_TREE_CORRECTION_19 = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9),
)
_SPEED_INTRA_DEFAULT = (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0)
_SPEED_INTER_DEFAULT = (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0,
                        2.4, 1.2, 0.24, 0.12)
_SM90_INTER = (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2,
               0.24, 0.12)

_SPEEDS_2_9 = (42.0, 30.0, 24.0, 21.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2, 0.24,
               0.12)
"""v2.9.9 ``search.cc`` ``speedArray``: one array for searches inside a node and across nodes."""

#: v2.9.9 (and 2.8.x, whose ``tuning.cc`` differs only in CollNet's LL/LL128 rows). One CollNet algorithm
#: (here :attr:`Algorithm.COLLNET_DIRECT`), LL128 capped per collective, Ampere's caps only for sm80
#: exactly (``compCap80``), 21 GB/s per NVLink (``topo.h`` ``SM80_NVLINK_WIDTH``; sm90 takes it too, as
#: ``cudaCompCap >= 80``), one speed array.
V2_9 = Release(
    name="2.9", tag="v2.9.9-1",
    algorithms=(_A.TREE, _A.RING, _A.COLLNET_DIRECT),
    base_lat_us={_A.TREE: (4.4, 4.4, 0.0), _A.RING: (3.6, 10.0, 8.4), _A.COLLNET_DIRECT: (4.4, 4.4, 0.0)},
    hw_lat_us=(
        {_A.TREE: (.52, 1.25, 28), _A.RING: (.47, 1.9, 3.4), _A.COLLNET_DIRECT: (.5, 1.2, 4.0)},
        {_A.TREE: (1.0, 1.9, 28), _A.RING: (1.0, 2.5, 5.7), _A.COLLNET_DIRECT: (1.0, 1.9, 5.5)},
        {_A.TREE: (5.0, 8.5, 28), _A.RING: (2.7, 4.0, 9.6), _A.COLLNET_DIRECT: (5.0, 5.0, 10.7)},
    ),
    # rows: Volta-N1/Intel-N2/Intel-N4, Ampere-N1/AMD-N2/AMD-N4
    ll_max_bws=((39.0, 39.0, 20.4), (87.7, 22.5, 19.0)),
    per_ch_max_ring_ll128_bws=(),  # per collective: ll128_max_bw_per_coll
    per_ch_max_tree_ll128_bws=(),
    per_ch_max_tree_bws=((26.5, 18.5, 10.0), (24.0, 22.5, 16.0)),
    per_ch_max_nvls_tree_bws=None,
    nvls_efficiency=None,
    tree_correction=(
        _TREE_CORRECTION_19[0],
        (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .5, .6, .6, .7, .7, .8, .9, .9, .92, .92),
        _TREE_CORRECTION_19[2],
    ),
    nvlink_bw_per_link={60: 18.0, 70: 21.0, 80: 21.0, 86: 12.0, 90: 21.0},
    speed_intra={0: _SPEEDS_2_9},
    speed_inter={0: _SPEEDS_2_9},
    max_channels=32,
    max_nvls_arity=0,  # no NVLS
    nvls_efficiency_model=False,
    era=9,
    bus_bw_cap={AMPERE: 235.0},
    ll128_max_bw_per_coll={Collective.BROADCAST: 18.8, Collective.REDUCE: 12.0, Collective.ALL_GATHER: 18.3,
                           Collective.REDUCE_SCATTER: 15.2, Collective.ALL_REDUCE: 16.9},
    tree_ll128_inter_factor=0.915,
)

_LL128_20 = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0))
_SPEED_INTRA_2_10 = (44.0, 30.0, 22.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0)

#: v2.10.3 (= v2.11.4): 2.9's but (tuning.cc) LL128 capped at 20 GB/s per channel whatever the collective,
#: Tree/LL128 across nodes × 120/128, CollNet's NVLink and PCI hops 8 µs and its bandwidth no longer × 0.9,
#: its latency with a 0.5 µs arity term, Ampere's Tree caps 23.6 / 17.8 on 2 / more nodes, Tree/LL128's
#: correction row as 2.19's; (search.cc) separate intra- and inter-node speed arrays; (topo.h) 22 GB/s
#: per NVLink on sm70 and sm80 (sm90 too).
V2_10 = replace(
    V2_9, name="2.10", tag="v2.10.3-1",
    hw_lat_us=({**V2_9.hw_lat_us[0], _A.COLLNET_DIRECT: (.5, 1.2, 8.0)},
               {**V2_9.hw_lat_us[1], _A.COLLNET_DIRECT: (1.0, 1.9, 8.0)}, V2_9.hw_lat_us[2]),
    per_ch_max_ring_ll128_bws=_LL128_20,
    per_ch_max_tree_ll128_bws=_LL128_20,
    per_ch_max_tree_bws=((26.5, 18.5, 10.0), (24.0, 23.6, 17.8)),
    tree_correction=_TREE_CORRECTION_19,
    nvlink_bw_per_link={60: 18.0, 70: 22.0, 80: 22.0, 86: 12.0, 90: 22.0},
    speed_intra={0: _SPEED_INTRA_2_10},
    speed_inter={0: (48.0, 30.0, 24.0, 22.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2,
                     0.24, 0.12)},
    era=10,
    ll128_max_bw_per_coll=None,
    tree_ll128_inter_factor=120.0 / 128.0,
)

#: v2.12.12 (= v2.12.7 to v2.13.4): 2.10's tables but Ring/Simple's network hop 28 µs (was 9.6); formulas:
#: all-reduce Ring counts 2·nNodes network steps (was 2·(nNodes − 1)), the network plugin's latency replaces
#: the network hop when it reports one (``latencyInter``).
V2_12 = replace(
    V2_10, name="2.12", tag="v2.12.12-1",
    hw_lat_us=(*V2_10.hw_lat_us[:2], {**V2_10.hw_lat_us[2], _A.RING: (2.7, 4.0, 28)}),
    era=12,
)

#: v2.14.3: 2.12's but CollNet split into Direct and Chain (tuning.cc: both 4.4 / 4.4 / 0 base, Simple
#: hops 8 µs on NVLink and PCI, 10.7 on the network; Direct's bandwidth over its GPU/NIC ratio, Chain's
#: × 0.75; Direct off without NVSwitch) and Ring/Simple's network hop back to 9.6 µs.
V2_14 = replace(
    V2_12, name="2.14", tag="v2.14.3-1",
    algorithms=(_A.TREE, _A.RING, _A.COLLNET_DIRECT, _A.COLLNET_CHAIN),
    base_lat_us={**V2_12.base_lat_us, _A.COLLNET_CHAIN: (4.4, 4.4, 0.0)},
    hw_lat_us=(
        {_A.TREE: (.52, 1.25, 28), _A.RING: (.47, 1.9, 3.4), _A.COLLNET_DIRECT: (0, 0, 8.0),
         _A.COLLNET_CHAIN: (0, 0, 8.0)},
        {_A.TREE: (1.0, 1.9, 28), _A.RING: (1.0, 2.5, 5.7), _A.COLLNET_DIRECT: (0, 0, 8.0),
         _A.COLLNET_CHAIN: (0, 0, 8.0)},
        {_A.TREE: (5.0, 8.5, 28), _A.RING: (2.7, 4.0, 9.6), _A.COLLNET_DIRECT: (0, 0, 10.7),
         _A.COLLNET_CHAIN: (0, 0, 10.7)},
    ),
    era=14,
)

#: v2.15.5 (tuning.cc identical to v2.16.5): 2.14's but a Hopper row (sm90 exactly) in every table, with
#: Ampere's numbers, and LL128 on by default on Hopper; (search.cc) 28 GB/s in the inter-node speeds.
V2_15 = replace(
    V2_14, name="2.15", tag="v2.15.5-1",
    ll_max_bws=(*V2_14.ll_max_bws, (87.7, 22.5, 19.0)),
    per_ch_max_ring_ll128_bws=(*_LL128_20, (20.0, 20.0, 20.0)),
    per_ch_max_tree_ll128_bws=(*_LL128_20, (20.0, 20.0, 20.0)),
    per_ch_max_tree_bws=(*V2_14.per_ch_max_tree_bws, (24.0, 23.6, 17.8)),
    speed_inter={0: (48.0, 30.0, 28.0, 24.0, 22.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4,
                     1.2, 0.24, 0.12)},
    era=15,
)

#: v2.16.5: 2.15's tuning.cc; (search.cc) the first sm90 speed arrays and channel duplication on sm90 only
#: from 50 GB/s a channel.
V2_16 = replace(
    V2_15, name="2.16", tag="v2.16.5-1",
    speed_intra={**V2_15.speed_intra, 90: (66.0, 33.0, 24.0, 20.0, 15.0, 12.0, 6.0, 3.0)},
    speed_inter={**V2_15.speed_inter,
                 90: (48.0, 45.0, 30.0, 24.0, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12)},
    era=16,
)

#: v2.17.1: 2.16's search but (tuning.cc) NVLS (one node, Simple only: 40 µs base, the ring graph's
#: bandwidth × 0.75), Hopper's LL128 cap 36.7 GB/s a channel and Tree caps 38.7 / 41.4 / 33.0, bus bandwidth
#: capped at 370 GB/s on Hopper, compute capabilities by range (sm86 Ampere's rows, sm90+ Hopper's), the
#: ring plateau × 1.5 on Hopper, LL128 over PXN on Hopper; (devcomm.h) NCCL_MAX_NVLS_ARITY 8.
V2_17 = replace(
    V2_16, name="2.17", tag="v2.17.1-1",
    algorithms=(*V2_16.algorithms, _A.NVLS),
    base_lat_us={**V2_16.base_lat_us, _A.NVLS: (0, 0, 40.0)},
    hw_lat_us=tuple({**row, _A.NVLS: (0, 0, 0)} for row in V2_16.hw_lat_us),
    per_ch_max_ring_ll128_bws=(*_LL128_20, (36.7, 36.7, 36.7)),
    per_ch_max_tree_ll128_bws=(*_LL128_20, (36.7, 36.7, 36.7)),
    per_ch_max_tree_bws=(*V2_16.per_ch_max_tree_bws[:2], (38.7, 41.4, 33.0)),
    max_nvls_arity=8,
    era=17,
    bus_bw_cap={AMPERE: 235.0, HOPPER: 370.0},
    nvls_bus_ratio=0.75,
    nvls_min_gpus=2,
)

V2_19 = Release(
    name="2.19", tag="v2.19.4-1",
    algorithms=(_A.TREE, _A.RING, _A.COLLNET_DIRECT, _A.COLLNET_CHAIN, _A.NVLS, _A.NVLS_TREE),
    base_lat_us={_A.TREE: (6.8, 14.0, 0.0), _A.RING: (6.6, 14.0, 8.4),
                 _A.COLLNET_DIRECT: (0, 0, 0), _A.COLLNET_CHAIN: (0, 0, 0),
                 _A.NVLS: (0, 0, 0), _A.NVLS_TREE: (0, 0, 0)},
    hw_lat_us=(
        {_A.TREE: (.6, 1.25, 28), _A.RING: (.6, 1.9, 3.4), _A.COLLNET_DIRECT: (0, 0, 3.7),
         _A.COLLNET_CHAIN: (0, 0, 2.8), _A.NVLS: (0, 0, 23), _A.NVLS_TREE: (0, 0, 23)},
        {_A.TREE: (1.0, 1.9, 28), _A.RING: (1.0, 2.5, 5.7), _A.COLLNET_DIRECT: (0, 0, 3.7),
         _A.COLLNET_CHAIN: (0, 0, 2.8), _A.NVLS: (0, 0, 0), _A.NVLS_TREE: (0, 0, 0)},
        {_A.TREE: (5.0, 8.5, 28), _A.RING: (2.7, 4.0, 14.0), _A.COLLNET_DIRECT: (0, 0, 31),
         _A.COLLNET_CHAIN: (0, 0, 30), _A.NVLS: (0, 0, 18), _A.NVLS_TREE: (0, 0, 14)},
    ),
    # rows: Volta-N1/Intel-N2/Intel-N4, Ampere-N1/AMD-N2/AMD-N4, Hopper-N1/AMD-N2/AMD-N4
    ll_max_bws=((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (87.7, 22.5, 19.0)),
    per_ch_max_ring_ll128_bws=((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 36.7)),
    per_ch_max_tree_ll128_bws=((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0)),
    per_ch_max_tree_bws=((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0)),
    per_ch_max_nvls_tree_bws=None,
    nvls_efficiency=None,
    tree_correction=_TREE_CORRECTION_19,
    nvlink_bw_per_link={60: 18.0, 70: 20.0, 80: 20.0, 86: 12.0, 90: 20.0},
    speed_intra={0: _SPEED_INTRA_DEFAULT, 90: (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 6.0, 3.0)},
    speed_inter={0: _SPEED_INTER_DEFAULT, 90: _SM90_INTER},
    max_channels=32,
    max_nvls_arity=8,
    nvls_efficiency_model=False,
    era=19,
)

#: v2.18.6 (= v2.18.3, v2.18.5): 2.19's caps, LL caps, Tree corrections, NVLink bandwidth, MAXCHANNELS 32 and
#: NVLS arity 8 but (tuning.cc) Tree/Simple hops 4 / 6 / 14 µs on NVLink / PCI / network (2.19: 28 each),
#: CollNet Direct hops 8 / 8 / 10.7 and Chain 4.75 / 8 / 14 (2.19: 3.7 / 3.7 / 31 and 2.8 / 2.8 / 30), NVLS
#: and NVLS Tree a 23 µs base with network hops 18 and 19 and no NVLink hop (2.19: base 0, hops 23 and
#: 18 / 14); (search.cc) sm90 speeds without 50 inside a node and without 22 across nodes; formulas (era 18,
#: :mod:`zerocalc.nccl.model`): NVLS latency base + one network hop, NVLS Tree base + 2 (nNodes − 1) network
#: hops, NVLS bandwidth the graph's (no ``min(bwIntra, bwInter)``), NVLS Tree's bus → algorithm ratio
#: 0.7 · nNodes / (2 (nNodes − 1)), NVLS for all-reduce only, CollNet Direct's arity term 0.5 µs, and
#: ``NCCL_ALGO`` never removing Ring from other collectives than all-reduce.
V2_18 = replace(
    V2_19, name="2.18", tag="v2.18.6-1",
    base_lat_us={**V2_19.base_lat_us, _A.COLLNET_DIRECT: (6.8, 14.0, 0), _A.COLLNET_CHAIN: (6.8, 14.0, 0),
                 _A.NVLS: (0, 0, 23.0), _A.NVLS_TREE: (0, 0, 23.0)},
    hw_lat_us=(
        {_A.TREE: (.6, 1.25, 4), _A.RING: (.6, 1.9, 3.4), _A.COLLNET_DIRECT: (0, 0, 8.0),
         _A.COLLNET_CHAIN: (0, 0, 4.75), _A.NVLS: (0, 0, 0), _A.NVLS_TREE: (0, 0, 0)},
        {_A.TREE: (1.0, 1.9, 6), _A.RING: (1.0, 2.5, 5.7), _A.COLLNET_DIRECT: (0, 0, 8.0),
         _A.COLLNET_CHAIN: (0, 0, 8.0), _A.NVLS: (0, 0, 0), _A.NVLS_TREE: (0, 0, 0)},
        {_A.TREE: (5.0, 8.5, 14), _A.RING: (2.7, 4.0, 14.0), _A.COLLNET_DIRECT: (0, 0, 10.7),
         _A.COLLNET_CHAIN: (0, 0, 14), _A.NVLS: (0, 0, 18), _A.NVLS_TREE: (0, 0, 19)},
    ),
    speed_intra={0: _SPEED_INTRA_DEFAULT, 90: (60.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 6.0, 3.0)},
    speed_inter={0: _SPEED_INTER_DEFAULT,
                 90: (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24,
                      0.12)},
    era=18,
)

#: v2.18.1: 2.18.6's but (tuning.cc) Tree/Simple hops 28 µs on every link (as 2.19), one LL128 cap a channel
#: per GPU row for Ring and Tree alike (Hopper 36.7 on any node count: Tree/LL128 36.7 where 2.18.6 has 29 on
#: more than 2 nodes), Hopper's Tree cap 33 on more than 2 nodes (2.18.6: 36), NVLS bus → algorithm × 0.75
#: (2.18.6: 5/6); (search.cc) sm90 inter speeds 48, 45, 42, 40, 30, 24, 15, 12, … and v2.17.1's channel
#: duplication (from 25 GB/s up to sm80, from 50 on sm90). The table of 2.18.0 to 2.18.2.
V2_18_1 = replace(
    V2_18, name="2.18.1", tag="v2.18.1-1",
    hw_lat_us=tuple({**row, _A.TREE: (*row[_A.TREE][:2], 28)} for row in V2_18.hw_lat_us),
    per_ch_max_tree_ll128_bws=V2_19.per_ch_max_ring_ll128_bws,
    per_ch_max_tree_bws=(*V2_19.per_ch_max_tree_bws[:2], (38.7, 41.4, 33.0)),
    speed_inter={0: _SPEED_INTER_DEFAULT,
                 90: (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12)},
    nvls_bus_ratio=0.75,
    search_era=17,
)

#: v2.20.5 (= v2.20.3): 2.19's tables but (topo.h) 20.6 GB/s per sm90 NVLink (as 2.21); formulas (era 20):
#: CollNet Direct all-gather / reduce-scatter priced as 2.21 prices them, ``ncclTopoPostset``'s "4 compute
#: channels" rule and NVLS channel raise of 2.21 (:mod:`zerocalc.nccl.channels`), p2p as 2.21
#: (:mod:`zerocalc.nccl.p2p`). It keeps 2.19's NVLS hop (23 µs), Hopper LL caps (87.7 / 22.5 / 19), Ring/LL
#: bandwidth (× 1/4, × 1/3), sm90 intra speeds (no 11) and NVLS arity 8.
V2_20 = replace(
    V2_19, name="2.20", tag="v2.20.5-1",
    nvlink_bw_per_link={**V2_19.nvlink_bw_per_link, 90: 20.6},
    era=20,
)

#: v2.21.5: 2.19's tables and formulas but (tuning.cc) NVLS / NVLS Tree NVLink hop 25 µs, Hopper's LL caps
#: 141 / 45 / 35 GB/s, Ring LL at half the bus bandwidth whatever the collective, CollNet Direct for
#: all-gather and reduce-scatter; (search.cc) 11 GB/s in the sm90 intra speeds; (topo.h) 20.6 GB/s per
#: sm90 NVLink; (device.h) NCCL_MAX_NVLS_ARITY 32, MAXCHANNELS 32.
V2_21 = replace(
    V2_19, name="2.21", tag="v2.21.5-1",
    hw_lat_us=({**V2_19.hw_lat_us[0], _A.NVLS: (0, 0, 25), _A.NVLS_TREE: (0, 0, 25)}, V2_19.hw_lat_us[1],
               V2_19.hw_lat_us[2]),
    ll_max_bws=(*V2_19.ll_max_bws[:2], (141.0, 45.0, 35.0)),
    nvlink_bw_per_link={**V2_19.nvlink_bw_per_link, 90: 20.6},
    speed_intra={0: _SPEED_INTRA_DEFAULT,
                 90: (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0)},
    max_nvls_arity=32,
    era=21,
)

V2_26 = Release(
    name="2.26", tag="v2.26.2-1",
    algorithms=tuple(Algorithm),
    base_lat_us={_A.TREE: (6.8, 14.0, 8.4), _A.RING: (6.6, 14.0, 8.4),
                 _A.COLLNET_DIRECT: (0, 0, 0), _A.COLLNET_CHAIN: (0, 0, 0),
                 _A.NVLS: (0, 0, 0), _A.NVLS_TREE: (0, 0, 0), _A.PAT: (8.0, 8.0, 8.0)},
    hw_lat_us=(
        {_A.TREE: (.6, 1.25, 4.0), _A.RING: (.6, 1.9, 3.4), _A.COLLNET_DIRECT: (0, 0, 3.7),
         _A.COLLNET_CHAIN: (0, 0, 2.8), _A.NVLS: (0, 0, 25), _A.NVLS_TREE: (0, 0, 25), _A.PAT: (0, 0, 4.0)},
        {_A.TREE: (1.0, 1.9, 4.0), _A.RING: (1.0, 2.5, 5.7), _A.COLLNET_DIRECT: (0, 0, 3.7),
         _A.COLLNET_CHAIN: (0, 0, 2.8), _A.NVLS: (0, 0, 0), _A.NVLS_TREE: (0, 0, 0), _A.PAT: (0, 0, 4.0)},
        {_A.TREE: (5.0, 8.5, 14), _A.RING: (2.7, 4.0, 14.0), _A.COLLNET_DIRECT: (0, 0, 31),
         _A.COLLNET_CHAIN: (0, 0, 30), _A.NVLS: (0, 0, 18), _A.NVLS_TREE: (0, 0, 14), _A.PAT: (0, 0, 14)},
    ),
    ll_max_bws=((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0), (2 * 141.0, 2 * 45.0, 2 * 35.0)),
    per_ch_max_ring_ll128_bws=((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 36.7),
                               (2 * 36.7, 2 * 36.7, 2 * 36.7)),
    per_ch_max_tree_ll128_bws=((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0),
                               (2 * 36.7, 2 * 36.7, 2 * 29.0)),
    per_ch_max_tree_bws=((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0),
                         (2 * 38.7, 2 * 41.4, 2 * 36.0)),
    per_ch_max_nvls_tree_bws=None,
    nvls_efficiency=None,
    tree_correction=_TREE_CORRECTION_19,
    nvlink_bw_per_link={60: 18.0, 70: 20.0, 80: 20.0, 86: 12.0, 90: 20.6, 100: 40.0},
    speed_intra={0: _SPEED_INTRA_DEFAULT,
                 90: (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
                 100: (90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0)},
    speed_inter={0: _SPEED_INTER_DEFAULT, 90: _SM90_INTER, 100: _SM90_INTER},
    max_channels=64,
    max_nvls_arity=32,
    nvls_efficiency_model=False,
    era=26,
)

#: v2.22.3: 2.21's tables (tuning.cc, search.cc, topo.h, device.h); formulas (era 22): p2p as 2.26 prices it
#: (``addP2pToPlan``, :mod:`zerocalc.nccl.p2p`), ``ncclTopoPostset`` reading the CollNet Chain graph
#: (:mod:`zerocalc.nccl.channels`), a tuner's channel count no longer priced.
V2_22 = replace(V2_21, name="2.22", tag="v2.22.3-1", era=22)

#: v2.24.3: 2.26's tuning.cc tables and formulas but no Blackwell rows (sm100 takes Hopper's, as its
#: ``compCapIndex``), LL128 on by default on sm70, sm80, sm90 only; (topo.h) no sm100 NVLink bandwidth (sm100
#: takes sm90's 20.6); (search.cc) no sm100 speed arrays; (device.h) MAXCHANNELS 32 (2.26: 64);
#: (connect.cc) "4 compute channels" on sm90 only (era 24).
V2_24 = replace(
    V2_26, name="2.24", tag="v2.24.3-1",
    ll_max_bws=V2_26.ll_max_bws[:3],
    per_ch_max_ring_ll128_bws=V2_26.per_ch_max_ring_ll128_bws[:3],
    per_ch_max_tree_ll128_bws=V2_26.per_ch_max_tree_ll128_bws[:3],
    per_ch_max_tree_bws=V2_26.per_ch_max_tree_bws[:3],
    nvlink_bw_per_link={k: v for k, v in V2_26.nvlink_bw_per_link.items() if k < 100},
    speed_intra={k: v for k, v in V2_26.speed_intra.items() if k < 100},
    speed_inter={k: v for k, v in V2_26.speed_inter.items() if k < 100},
    max_channels=32,
    era=24,
)

#: v2.23.4: 2.24.3's but PAT's bus bandwidth × 0.85 (2.24: × 0.75) and ``NCCL_ALGO`` / ``NCCL_PROTO`` without
#: per-collective prefixes (era 23).
V2_23 = replace(V2_24, name="2.23", tag="v2.23.4-1", pat_bw_factor=0.85, era=23)

_SM100_INTRA_27 = (90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0)
_SM100_INTER_27 = (96.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2,
                   0.24, 0.12)

#: v2.27.7: 2.26's tuning.cc tables but (topo.h) 40.1 GB/s per sm100 NVLink (was 40.0); (search.cc) sm100
#: intra speeds one step longer (…, 19, 18) and sm100 inter speeds from 96 GB/s (96, 48, 45.1, 42, …);
#: formulas (era 27, :mod:`zerocalc.nccl.model`): NVLS all-gather / reduce-scatter at
#: ``min(bwIntra · (ppn − 1)/ppn, bwInter · 0.9)`` (was ``min(bwIntra, bwInter)``), CollNet Direct
#: all-gather / reduce-scatter at ``ppn · min(bwIntra, bwInter · 0.9)`` (was the 1/8-ppn interpolation),
#: LL128 on by default on any GPU from sm70 (was a list: 70, 80, 90, 100, 120).
V2_27 = replace(
    V2_26, name="2.27", tag="v2.27.7-1",
    nvlink_bw_per_link={**V2_26.nvlink_bw_per_link, 100: 40.1},
    speed_intra={**V2_26.speed_intra, 100: _SM100_INTRA_27},
    speed_inter={**V2_26.speed_inter, 100: _SM100_INTER_27},
    era=27,
)

#: v2.27.5 (= v2.27.4 to v2.27.6 in its line): 2.27.7's but (search.cc) the sm100 inter speeds without 96
#: (48, 45.1, 42, …). The table of 2.27.4 to 2.27.6.
V2_27_5 = replace(V2_27, name="2.27.5", tag="v2.27.5-1",
                  speed_inter={**V2_27.speed_inter, 100: _SM100_INTER_27[1:]})

#: v2.27.3: 2.27.5's but (topo.h) 40.0 GB/s per sm100 NVLink (as 2.26) and (search.cc) sm100 inter speeds
#: from 47.9 (47.9, 45, 42, …). The table of 2.27.0 to 2.27.3.
V2_27_3 = replace(V2_27_5, name="2.27.3", tag="v2.27.3-1",
                  nvlink_bw_per_link={**V2_27.nvlink_bw_per_link, 100: 40.0},
                  speed_inter={**V2_27.speed_inter, 100: (47.9, *_SM90_INTER[1:])})

#: v2.30.7: 2.26's tables but (tuning.cc) NVLS Tree's network hop 20.9 µs (was 14), Blackwell's own
#: per-channel caps for Ring/LL128, Tree/LL128 and Tree (were twice Hopper's), NVLS Tree's per-channel
#: caps (``perChMaxNVLSTreeBws``, new) and ``nvlsEfficiency`` (new since v2.28.3), one more Tree
#: correction factor at the end of each row (1.0, 1.0, .9); (topo.h) 40.1 GB/s per sm100 NVLink (was
#: 40.0); (search.cc) the sm100 intra and inter speeds; NVLS bandwidth via ``nvlsEfficiency`` and
#: 2.30's formulas.
V2_30 = replace(
    V2_26, name="2.30", tag="v2.30.7-1",
    hw_lat_us=(*V2_26.hw_lat_us[:2], {**V2_26.hw_lat_us[2], _A.NVLS_TREE: (0, 0, 20.9)}),
    per_ch_max_ring_ll128_bws=(*V2_26.per_ch_max_ring_ll128_bws[:3], (40.0, 40.0, 40.0)),
    per_ch_max_tree_ll128_bws=(*V2_26.per_ch_max_tree_ll128_bws[:3], (55.6, 31.67, 20.0)),
    per_ch_max_tree_bws=(*V2_26.per_ch_max_tree_bws[:3], (70.0, 42.8, 24.0)),
    per_ch_max_nvls_tree_bws=((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (0.0, 57.7, 45.5), (0.0, 96.0, 80.0)),
    nvls_efficiency=(0.0, 0.0, 0.85, 0.74),
    tree_correction=tuple(row + (1.0 if i < 2 else .9,) for i, row in enumerate(_TREE_CORRECTION_19)),
    nvlink_bw_per_link={**V2_26.nvlink_bw_per_link, 100: 40.1},
    speed_intra={**V2_26.speed_intra,
                 100: (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0)},
    speed_inter={**V2_26.speed_inter,
                 100: (96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0,
                       6.0, 3.0, 2.4, 1.2, 0.24, 0.12)},
    nvls_efficiency_model=True,
    era=30,
    nvls_min_gpus=2,
)

#: v2.28.9: 2.30's tuning.cc but (tuning.cc) Blackwell's Ring/LL128 caps 73.4 / 34.6 / 73.4 GB/s a channel
#: (2.30: 40), NVLS Tree's Blackwell cap on more than 2 nodes 43.8 (2.30: 80.0), Tree correction rows of 23
#: factors and none applied to NVLS Tree (era 28: 2.29.2 first corrects NVLS Tree on Blackwell); (search.cc)
#: 2.27's sm100 speed arrays.
V2_28 = replace(
    V2_30, name="2.28", tag="v2.28.9-1",
    per_ch_max_ring_ll128_bws=(*V2_30.per_ch_max_ring_ll128_bws[:3], (2 * 36.7, 34.6, 2 * 36.7)),
    per_ch_max_nvls_tree_bws=(*V2_30.per_ch_max_nvls_tree_bws[:3], (0.0, 96.0, 43.8)),
    tree_correction=_TREE_CORRECTION_19,
    speed_intra=V2_27.speed_intra,
    speed_inter=V2_27.speed_inter,
    era=28,
)

#: v2.28.7: 2.28.9's but NVLS Tree's network hop 14 µs (v2.28.9: 20.9) and NVLS Tree's Blackwell cap on more
#: than 2 nodes 43.1 (v2.28.9: 43.8). The table of 2.28.7 and 2.28.8.
V2_28_7 = replace(
    V2_28, name="2.28.7", tag="v2.28.7-1",
    hw_lat_us=(*V2_28.hw_lat_us[:2], {**V2_28.hw_lat_us[2], _A.NVLS_TREE: (0, 0, 14.0)}),
    per_ch_max_nvls_tree_bws=(*V2_30.per_ch_max_nvls_tree_bws[:3], (0.0, 96.0, 43.1)),
)

#: v2.28.3: 2.28.7's but Blackwell's 2-node Ring/LL128 cap 2 · 36.7 GB/s a channel (v2.28.7: 34.6), and no
#: NVLS on nodes of 2 GPUs (``nvls.cc``: ``gpuCount <= 2``, v2.28.7 ``< 2``). The table of 2.28.0 to 2.28.6.
V2_28_3 = replace(V2_28_7, name="2.28.3", tag="v2.28.3-1",
                  per_ch_max_ring_ll128_bws=V2_26.per_ch_max_ring_ll128_bws, nvls_min_gpus=3)

#: v2.29.7: 2.30's tuning.cc and formulas but (tuning.cc) NVLS Tree's Blackwell cap on more than 2 nodes 43.8
#: (2.30: 80.0); (search.cc) sm100 inter speeds without 86 (96, 80, 48, 45.1, …).
V2_29 = replace(
    V2_30, name="2.29", tag="v2.29.7-1",
    per_ch_max_nvls_tree_bws=V2_28.per_ch_max_nvls_tree_bws,
    speed_inter={**V2_30.speed_inter,
                 100: (96.0, 80.0, *_SM100_INTER_27[1:])},
    era=29,
)

#: v2.29.3 (= v2.29.2): 2.29.7's but Blackwell's Ring/LL128 caps 34.5 / 34.6 / 34.5 GB/s a channel (v2.29.7:
#: 40) and sm100 inter speeds 2.27's (96, 48, 45.1, …). The table of 2.29.0 to 2.29.6.
V2_29_3 = replace(
    V2_29, name="2.29.3", tag="v2.29.3-1",
    per_ch_max_ring_ll128_bws=(*V2_30.per_ch_max_ring_ll128_bws[:3], (34.5, 34.6, 34.5)),
    speed_inter=V2_27.speed_inter,
)
