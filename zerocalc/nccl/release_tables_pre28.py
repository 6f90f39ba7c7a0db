"""NCCL's tuning constants before 2.8: one :class:`~zerocalc.nccl.release.Release` per modelled release of
2.5, 2.6 and 2.7, every number copied from NCCL's sources at the tag named (GitHub NVIDIA/nccl):

- ``src/graph/tuning.cc`` (``ncclSetThresholds`` in v2.5.x, ``ncclTopoSetThresholds`` in v2.6.4,
  ``ncclTopoTuneModel`` from v2.7.3): ``baseLat``, ``hwLat`` (NVLink, PCI, network), the LL128 caps
  (``ll128MaxBw`` on the whole bus bandwidth in v2.5-v2.6, ``ll128MaxBwPerCh`` a channel from v2.7.3), the
  Tree caps (``maxTreeBw``, on the whole bus bandwidth), and ``treeCorrectionFactor`` (22 sizes, 64 B to
  128 MiB; in ``src/enqueue.cc`` in v2.5.x);
- ``src/graph/search.cc``: the speeds the search tries (``speedArray`` from v2.6.4; v2.5.x starts at
  ``system->maxWidth`` and lowers it by 3 GB/s a try, integers) and, from v2.7.3, ``speedIntra >= 25``'s
  channel duplication (as v2.8-v2.16);
- ``src/graph/topo.h`` / ``topo.cc``: 18 GB/s a Pascal NVLink, 21 any later (``PASCAL_NVLINK_WIDTH``,
  ``VOLTA_NVLINK_WIDTH``; A100 takes Volta's), 12 GB/s a PCIe link and a NIC in v2.5.x (``PCI_WIDTH``,
  ``NET_WIDTH``);
- ``src/include/devcomm.h``: ``MAXCHANNELS`` 32.

How their formulas differ from v2.8.3's (``era`` 5, 6, 7 in :mod:`zerocalc.nccl.tune_model` and
:mod:`zerocalc.nccl.model`):

- v2.7 (v2.7.5 to v2.7.8 identical in every file named; v2.7.0-v2.7.3: :data:`V2_7_3`): v2.8.3's formulas
  but no LL caps (``llMaxBws`` arrives in v2.8.3), Tree at ``min(busBw · 0.9, maxTreeBw)`` with
  ``maxTreeBw`` 110 GB/s on 1-2 nodes and 80 on more (130 and 105 for LL128 on sm80), Tree/LL128 capped at
  ``ll128MaxBwPerCh · nChannels · 7/9``, a Tree/Simple network hop of 50 µs (v2.8.3: 28), a Tree/LL128
  NVLink hop of 1.2 µs (1.25), the all-reduce LL128 cap 16.7 GB/s a channel (16.9), and its own Tree
  correction rows;
- v2.6 (v2.6.4): Ring at ``nsteps`` hops of one link class (the network's on several nodes, whatever
  step crosses it; no ``nInterSteps``, no LL ×1.8), no "plateau effect of ring", Ring/LL at ¼ of the bus
  bandwidth whatever the collective, Ring/LL128 ``min(busBw · 120/128, ll128MaxBw)``, Tree/LL ÷ 3,
  Tree/LL128 × 7/9 uncapped, no Ampere terms, LL128 by default on sm70 only, ``NCCL_ALGO`` removing an
  algorithm from every collective, the search's first speed at most one NVLink's bandwidth;
- v2.5 (v2.5.7; v2.5.6 the same tables): v2.6's but Tree alone and Ring (no CollNet), Tree capped at 90
  GB/s on one node and 70 on more, integer speeds from one NVLink's width down by 3 GB/s, a NIC or PCIe
  link counted 12 GB/s.

NCCL 2.4 and earlier have no cost model to transcribe (no ``tuning.cc``: ``enqueue.cc`` takes Tree for an
all-reduce up to ``treeThreshold``, a closed formula of ``init.cc``'s ``ncclTreeThreshold`` in rough ring
and tree speeds, and LL below a size its thread counts set), so :mod:`zerocalc.nccl.tables` refuses them.
"""

from __future__ import annotations

import math
from dataclasses import replace

from zerocalc.nccl.release import AMPERE, Algorithm, Collective, Release

_A, _C = Algorithm, Collective
_INF3 = (math.inf, math.inf, math.inf)
_NO_CAP = (_INF3, _INF3)  # no llMaxBws / perChMaxTreeBws before v2.8.3
#: The per-channel caps v2.8.3 brings, none before it (and no NVLS): the same in every pre-2.8 table
_NO_CAPS = dict(ll_max_bws=_NO_CAP, per_ch_max_ring_ll128_bws=(), per_ch_max_tree_ll128_bws=(),
                per_ch_max_tree_bws=_NO_CAP, per_ch_max_nvls_tree_bws=None, nvls_efficiency=None)

_SPEEDS_2_7 = (42.0, 24.0, 21.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2, 0.24, 0.12)
"""v2.7.3-v2.7.8 ``search.cc`` ``speedArray`` (v2.8.3 adds 30)."""

#: v2.7.8 (= v2.7.5, v2.7.6): ``tuning.cc`` as the module docstring says; one CollNet algorithm (here
#: :attr:`Algorithm.COLLNET_DIRECT`); 21 GB/s a Volta or Ampere NVLink (``topo.cc`` ``VOLTA_NVLINK_WIDTH``).
V2_7 = Release(
    name="2.7", tag="v2.7.8-1",
    algorithms=(_A.TREE, _A.RING, _A.COLLNET_DIRECT),
    base_lat_us={_A.TREE: (4.4, 4.4, 0.0), _A.RING: (3.6, 10.0, 8.4), _A.COLLNET_DIRECT: (4.4, 4.4, 0.0)},
    hw_lat_us=(
        {_A.TREE: (.52, 1.2, 28), _A.RING: (.47, 1.9, 3.4), _A.COLLNET_DIRECT: (.5, 1.2, 4.0)},
        {_A.TREE: (1.0, 1.9, 28), _A.RING: (1.0, 2.5, 5.7), _A.COLLNET_DIRECT: (1.0, 1.9, 5.5)},
        {_A.TREE: (5.0, 8.5, 50), _A.RING: (2.7, 4.0, 9.6), _A.COLLNET_DIRECT: (5.0, 5.0, 10.7)},
    ),
    **_NO_CAPS,
    tree_correction=(
        (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0),
        (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .5, .6, .6, .7, .7, .8, .9, .9, 1.0),
        (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .5, .5, .6, .6, .7, .8, .9),
    ),
    nvlink_bw_per_link={60: 18.0, 70: 21.0},
    speed_intra={0: _SPEEDS_2_7},
    speed_inter={0: _SPEEDS_2_7},
    max_channels=32,
    max_nvls_arity=0,
    nvls_efficiency_model=False,
    era=7,
    bus_bw_cap={AMPERE: 235.0},
    ll128_max_bw_per_coll={_C.BROADCAST: 18.8, _C.REDUCE: 12.0, _C.ALL_GATHER: 18.3, _C.REDUCE_SCATTER: 15.2,
                           _C.ALL_REDUCE: 16.7},
    tree_ll128_inter_factor=0.915,
    tree_bus_factor=0.9,
    tree_max_bws=((110.0, 110.0, 80.0), (130.0, 130.0, 105.0)),
)

#: v2.7.3 (the table of 2.7.0 to 2.7.3): v2.7.8's but (tuning.cc) ``busBw *= 0.92`` on sm80 exactly where
#: v2.7.5 on caps it at 235 GB/s; (search.cc) duplicated channels halve their speed (v2.7.5 on: divide by
#: ``DIVUP(dupChannels, nChannels)``, the same but where ``maxChannels`` stops the doubling).
V2_7_3 = replace(V2_7, name="2.7.3", tag="v2.7.3-1", bus_bw_cap={}, ampere_bus_scale=0.92)

_TREE_CORRECTION_2_6 = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .5, .5, .6, .7, .8, .9, .9, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .8, .7, .7, .7, .6, .6, .7, .7, .8, .8, .9, .9, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .5, .5, .6, .6, .7, .8, .9),
)
_LL128_MAX_BW_2_6 = {_C.BROADCAST: 113.0, _C.REDUCE: 72.0, _C.ALL_GATHER: 110.0, _C.REDUCE_SCATTER: 91.0,
                     _C.ALL_REDUCE: 100.0}

#: v2.6.4 (``tuning.cc`` ``ncclTopoSetThresholds``), as the module docstring says; (search.cc) ``speedArray``
#: from 24 GB/s, the first speed at most one NVLink's width; no channel duplication in the search.
V2_6 = Release(
    name="2.6", tag="v2.6.4-1",
    algorithms=(_A.TREE, _A.RING, _A.COLLNET_DIRECT),
    base_lat_us={_A.TREE: (4.4, 4.4, 0.0), _A.RING: (3.6, 3.6, 8.4), _A.COLLNET_DIRECT: (4.4, 4.4, 0.0)},
    hw_lat_us=(
        {_A.TREE: (.5, 1.9, 28), _A.RING: (.4, 2.5, 5.7), _A.COLLNET_DIRECT: (.5, 1.9, 4.0)},
        {_A.TREE: (1.0, 1.9, 28), _A.RING: (1.0, 2.5, 5.7), _A.COLLNET_DIRECT: (1.0, 1.9, 5.5)},
        {_A.TREE: (5.0, 7.5, 50), _A.RING: (.9, 2.5, 6.6), _A.COLLNET_DIRECT: (5.0, 5.0, 10.7)},
    ),
    **_NO_CAPS,
    tree_correction=_TREE_CORRECTION_2_6,
    nvlink_bw_per_link={60: 18.0, 70: 21.0},
    speed_intra={0: _SPEEDS_2_7[1:]},
    speed_inter={0: _SPEEDS_2_7[1:]},
    max_channels=32,
    max_nvls_arity=0,
    nvls_efficiency_model=False,
    era=6,
    tree_bus_factor=0.9,
    tree_max_bws=((110.0, 110.0, 80.0), (110.0, 110.0, 80.0)),
    ll128_max_bw_total=_LL128_MAX_BW_2_6,
    tree_ll_divisor=3.0,
    search_speed_per_link=True,
)

#: v2.5.7 (= v2.5.6: ``tuning.cc`` differs only in parsing ``NCCL_THREAD_THRESHOLDS``): v2.6.4's latencies,
#: LL128 caps and Tree correction (``enqueue.cc``) but Tree and Ring only, Tree capped at 90 GB/s on one node
#: and 70 on more; (search.cc) integer speeds from one link's width (``system->maxWidth``: 21 on Volta, 18
#: on Pascal, 12 without NVLink) down 3 GB/s a try, a tree's ``speedIntra`` then up 3 a try to at most twice
#: ``speedInter``; (topo.cc) 12 GB/s a NIC (``NET_WIDTH``).
_SPEEDS_2_5 = (24.0, 21.0, 18.0, 15.0, 12.0, 9.0, 6.0, 3.0)  # 24: the trees' pass 2 (+3 up to 2 × speedInter)
V2_5 = replace(
    V2_6, name="2.5", tag="v2.5.7-1", algorithms=(_A.TREE, _A.RING),
    base_lat_us={a: v for a, v in V2_6.base_lat_us.items() if a != _A.COLLNET_DIRECT},
    hw_lat_us=tuple({a: v for a, v in row.items() if a != _A.COLLNET_DIRECT} for row in V2_6.hw_lat_us),
    speed_intra={0: _SPEEDS_2_5}, speed_inter={0: _SPEEDS_2_5},
    era=5, tree_max_bws=((90.0, 70.0, 70.0), (90.0, 70.0, 70.0)), net_width_GBps=12.0,
)
