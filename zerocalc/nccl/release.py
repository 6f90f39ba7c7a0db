"""NCCL's cost-model vocabulary: its algorithms, protocols and collectives in NCCL's index order, the
index constants of its tables, and :class:`Release`, the constants of one release's model (the tables
themselves in :mod:`zerocalc.nccl.release_tables`, a version → table in :mod:`zerocalc.nccl.tables`).

Indices: algorithms in NCCL's order (Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree,
PAT), protocols (LL, LL128, Simple), link classes (NVLink, PCI, network), compute-capability rows
(Volta, Ampere, Hopper, Blackwell), node-count columns (1 node, 2 nodes, more).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Algorithm(StrEnum):
    """NCCL's collective algorithms, in NCCL's index order (``src/include/device.h``)."""

    TREE = "Tree"
    RING = "Ring"
    COLLNET_DIRECT = "CollNetDirect"
    COLLNET_CHAIN = "CollNetChain"
    NVLS = "NVLS"
    NVLS_TREE = "NVLSTree"
    PAT = "PAT"


class Protocol(StrEnum):
    """NCCL's protocols: LL (8-byte lines, 4 of data), LL128 (120 of 128 bytes), Simple."""

    LL = "LL"
    LL128 = "LL128"
    SIMPLE = "Simple"


class Collective(StrEnum):
    """The collectives NCCL's tuning model prices (``ncclFunc_t``)."""

    BROADCAST = "broadcast"
    REDUCE = "reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_REDUCE = "all_reduce"


ALGORITHMS = tuple(Algorithm)
PROTOCOLS = tuple(Protocol)
NVLINK, PCI, NET = 0, 1, 2
VOLTA, AMPERE, HOPPER, BLACKWELL = 0, 1, 2, 3

Row3 = tuple[float, float, float]


@dataclass(frozen=True)
class Release:
    """The constants of one NCCL release's cost model (the files: :mod:`zerocalc.nccl.release_tables`)."""

    name: str
    tag: str
    algorithms: tuple[Algorithm, ...]
    base_lat_us: dict[Algorithm, Row3]
    hw_lat_us: tuple[dict[Algorithm, Row3], dict[Algorithm, Row3], dict[Algorithm, Row3]]
    ll_max_bws: tuple[Row3, ...]
    per_ch_max_ring_ll128_bws: tuple[Row3, ...]
    per_ch_max_tree_ll128_bws: tuple[Row3, ...]
    per_ch_max_tree_bws: tuple[Row3, ...]
    per_ch_max_nvls_tree_bws: tuple[Row3, ...] | None
    nvls_efficiency: tuple[float, ...] | None
    tree_correction: tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]
    nvlink_bw_per_link: dict[int, float]
    speed_intra: dict[int, tuple[float, ...]]
    speed_inter: dict[int, tuple[float, ...]]
    max_channels: int
    max_nvls_arity: int
    nvls_efficiency_model: bool = True  # NVLS bandwidth via nvlsEfficiency (2.28+), else min(intra, inter)
    era: int = 30  # the minor version whose formulas apply: 5-7, 9, 10, 12, 14-24, 26-30 (nccl.model)
    #: before 2.19, a cap on every bus bandwidth per compute-capability row (``tuning.cc``: 235 GB/s on
    #: Ampere, 370 on Hopper from 2.17); none from 2.19
    bus_bw_cap: dict[int, float] = field(default_factory=dict)
    #: v2.9.9's LL128 per-channel cap per collective (``ll128MaxBwPerCh[NCCL_NUM_FUNCTIONS]``), Ring and
    #: Tree alike; ``None`` from 2.10 (the per-row tables above)
    ll128_max_bw_per_coll: dict[Collective, float] | None = None
    #: Tree/LL128's bus factor on several nodes: 0.915 in v2.9.9, 120/128 from v2.10.3
    tree_ll128_inter_factor: float = 120.0 / 128.0
    #: NVLS's bus → algorithm bandwidth ratio before ``nvlsEfficiency``: 0.75 in v2.17.1 and v2.18.1, 5/6 from
    #: v2.18.3 (``tuning.cc``)
    nvls_bus_ratio: float = 5.0 / 6.0
    #: PAT's bus bandwidth factor: 0.85 in v2.23.4, 0.75 from v2.24.3 (``tuning.cc``)
    pat_bw_factor: float = 0.75
    #: the release whose ``search.cc`` channel duplication rule applies when not ``era``'s (0: ``era``'s):
    #: v2.18.1 keeps v2.17.1's
    search_era: int = 0
    #: the fewest GPUs of a node NCCL runs NVLS on (``src/transport/nvls.cc`` ``ncclNvlsInit``): 2 in v2.17.1
    #: (``localRanks <= 1`` → none), 3 from v2.18.1 to v2.28.6 (``gpuCount <= 2``; on a multi-node NVLink
    #: clique its size, v2.21.5-v2.24.3), 2 again from v2.28.7 (``gpuCount < 2``)
    nvls_min_gpus: int = 3
    #: before v2.8.3 (:mod:`zerocalc.nccl.release_tables_pre28`): the Tree bus bandwidth factor (0.9;
    #: 0.92 from v2.8.3) and the Tree caps on the whole bus bandwidth (``maxTreeBw``: rows default and
    #: LL128 on sm80 exactly, columns 1 node, 2 nodes, more), where later releases cap per channel
    #: (``perChMaxTreeBws``)
    tree_bus_factor: float = 0.92
    tree_max_bws: tuple[Row3, Row3] | None = None
    #: v2.5.x-v2.6.x: Ring/LL128's cap on the whole bus bandwidth per collective (``ll128MaxBw``)
    ll128_max_bw_total: dict[Collective, float] | None = None
    #: Tree/LL's bus bandwidth divisor: 3 before v2.7.3, 3.8 after (``tuning.cc``)
    tree_ll_divisor: float = 3.8
    #: v2.7.0-v2.7.3: ``busBw *= 0.92`` on sm80 exactly (v2.7.5 on: the 235 GB/s cap, ``bus_bw_cap``)
    ampere_bus_scale: float = 1.0
    #: v2.5.x-v2.6.x: the search's first speed is at most one NVLink's bandwidth (``getMaxWidth``: a path of
    #: NVLinks counts one link's width; v2.5.x ``system->maxWidth`` is one link's width)
    search_speed_per_link: bool = False
    #: v2.5.x: every network interface and PCIe link counts 12 GB/s (``NET_WIDTH``, "100Gbit", and
    #: ``PCI_WIDTH``, ``topo.h``), whatever its speed
    net_width_GBps: float | None = None

    @property
    def dup_era(self) -> int:
        """The era of ``ncclTopoDupChannels``' rule (:func:`zerocalc.nccl.graph._dup`)."""
        return self.search_era or self.era

    @property
    def source(self) -> str:
        return f"NVIDIA/nccl {self.tag}: src/graph/tuning.cc, src/graph/search.cc, src/graph/topo.h"
