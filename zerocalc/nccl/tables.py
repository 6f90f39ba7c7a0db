"""NCCL's tuning constants, one table per modelled release, and the release a version maps to.

Every number here is copied from NCCL's sources at the release named (GitHub NVIDIA/nccl):

- ``src/graph/tuning.cc``: base latencies (``baseLat``), per-hop latencies per link class
  (``hwLat``: NVLink, PCI, network), the LL bandwidth cap (``llMaxBws``), the per-channel caps of
  Ring/LL128, Tree, Tree/LL128 and NVLS Tree (``perChMax*Bws``), the NVLS efficiency
  (``nvlsEfficiency``) and the Tree correction factors (``treeCorrectionFactor``);
- ``src/graph/search.cc``: the bandwidths the topology search may give a channel
  (``speedArrayIntra``/``Inter``, ``sm90…``, ``sm100…``);
- ``src/graph/topo.h``: NCCL's bandwidth of one NVLink link per GPU generation (``SM80_NVLINK_BW``…);
- ``src/include/device.h``: ``MAXCHANNELS`` and ``NCCL_MAX_NVLS_ARITY``.

Modelled releases: **2.19** (v2.19.4; ``tuning.cc`` is byte-identical from v2.19.1 to v2.19.4),
**2.21** (v2.21.5: 2.19's with the changes listed at ``V2_21``), **2.26** (v2.26.2; identical from
v2.26.2 to v2.26.6) and **2.30** (v2.30.7, the latest release in the NVIDIA/nccl repository at the
time of writing). 2.26 has 2.30's algorithms and formulas but the older NVLS / NVLS Tree bandwidth
(``min(bwIntra, bwInter)``, × 5/6; no ``nvlsEfficiency``, no ``perChMaxNVLSTreeBws``), NVLS Tree's
14 µs network hop and Blackwell caps of twice Hopper's.

Which table a version gets (:func:`release_for`): 2.19.x, 2.21.x, 2.26.x and 2.30.x their own; any
other 2.y.z with y ≥ 18 the nearest modelled release by the shape of its tables, with a note saying
so: y = 18 → 2.19, 20 ≤ y ≤ 22 → 2.21 (2.18–2.22 keep 2.19's Tree/Simple latency of 0 base + 28 µs
per hop);
23 ≤ y ≤ 27 → 2.26 (v2.23.4 first has the later Tree/Simple 8.4 µs base + 4 µs per hop and
Ring-step count; ``nvlsEfficiency`` first appears in v2.28.3); y ≥ 28 → 2.30. Versions before
2.18 (no NVLS, other tables) and text that is not a version are refused with a
:class:`~zerocalc.errors.ConfigError`.

Indices: algorithms in NCCL's order (Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree,
PAT), protocols (LL, LL128, Simple), link classes (NVLink, PCI, network), compute-capability rows
(Volta, Ampere, Hopper, Blackwell), node-count columns (1 node, 2 nodes, more).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from enum import StrEnum

from zerocalc.errors import ConfigError


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
    """The constants of one NCCL release's cost model (see the module docstring for the files)."""

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
    era: int = 30  # which release's formulas apply: 19, 21, 26 or 30 (see zerocalc.nccl.model)

    @property
    def source(self) -> str:
        return f"NVIDIA/nccl {self.tag}: src/graph/tuning.cc, src/graph/search.cc, src/graph/topo.h"


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
)

RELEASES: dict[str, Release] = {r.name: r for r in (V2_19, V2_21, V2_26, V2_30)}
LATEST = V2_30

_VERSION = re.compile(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?(?:-\d+)?(?:\+\S*)?\s*$")


def parse_version(text: str) -> tuple[int, int, int]:
    """``(2, 19, 3)`` from ``2.19.3``, ``v2.19.3-1``, ``2.19.3+cuda12.2`` or ``2.19``.

    Anything else is a :class:`ConfigError` naming ``--nccl-version``.
    """
    m = _VERSION.match(str(text))
    if not m:
        raise ConfigError(f"not an NCCL version: {text!r} (expected e.g. 2.19.3 or 2.30.7)",
                          option="--nccl-version")
    return int(m[1]), int(m[2]), int(m[3] or 0)


def release_for(version: str) -> tuple[Release, str | None]:
    """The modelled release for an NCCL version, and a note when it is not that release's own.

    See the module docstring for the rule; versions before 2.18 are refused.
    """
    major, minor, patch = parse_version(version)
    if major != 2 or minor < 18:
        raise ConfigError(f"NCCL {major}.{minor}.{patch} is not modelled (modelled: 2.18 and later, "
                          f"tables of {', '.join(RELEASES)})", option="--nccl-version")
    own = f"{major}.{minor}"
    if own in RELEASES:
        return RELEASES[own], None
    release = V2_19 if minor <= 19 else V2_21 if minor <= 22 else V2_26 if minor <= 27 else V2_30
    return release, (f"NCCL {major}.{minor}.{patch}: priced with the tables of NCCL {release.name} "
                     f"({release.tag}), the nearest modelled release")
