"""aws-ofi-nccl's tuner plugin (``nccl_ofi_tuner``): the algorithm and protocol it makes NCCL run.

aws/aws-ofi-nccl, the libfabric network plugin NCCL runs over EFA on AWS, ships a tuner plugin from
v1.9.0 (``src/tuner/``). Which one, and what it answers for a call (``getCollInfo``: collective, bytes,
``nvlsSupport``, ``numPipeOps``), depends on the release:

- **v1.9.0-v1.9.2, a cost model** (``src/tuner/nccl_ofi_model.c``, ``nccl_ofi_tuner.c``,
  ``include/nccl_ofi_tuner.h``): on more than 2 nodes it prices all-reduce with its own Hockney model
  ``cost = latency × numPipeOps + bytes / bw`` (µs, bytes/µs) for Tree and Ring × LL/LL128/Simple and,
  where NCCL reports NVLS support, NVLS Tree/Simple, and returns the least (the first on a tie, in NCCL's
  index order), :func:`model_costs_us`. On 16 nodes × 128 ranks with NVLS it forces NVLS Tree/Simple for
  3-5 GiB (exclusive-inclusive). On 2 nodes or fewer, and for every other collective, it returns nothing
  and NCCL's own model chooses ("Skip runs smaller than 2 nodes and fallback to NCCL's internal tunings").
- **v1.10.0-v1.12.1, regions** (``src/tuner/nccl_ofi_tuner.c``, ``nccl_ofi_regions.c``, the same files in
  v1.10.0-v1.11.1): the point ``(bytes, ranks)`` tested against polygons, per ranks-per-node shape,
  :mod:`zerocalc.nccl.ofi_regions`; the first region holding the point (inside or on an edge) names the
  pair, none leaves NCCL's choice. All-reduce only to v1.11.1; v1.12 adds all-gather and reduce-scatter
  regions for 1 rank per node and NCCL's cost-table API (v3). It applies on any number of nodes.
- **v1.13.0-v1.21.1, per platform** (``src/tuner/nccl_ofi_tuner.c`` ``nccl_ofi_tuner_init``, C++ from
  v1.15.0): the plugin reads the EC2 instance type and answers only on the platforms it knows
  (p5.48xlarge and p5e.48xlarge, p5en.48xlarge; p6-b200 from v1.16.0, p6-b300 from v1.18.0), else "is
  not available for platform ..., Fall back to NCCL's tuner"; where it answers it prefers its regions
  to its model (unless ``OFI_NCCL_TUNER_TYPE`` forces one, which zerocalc does not read). From v1.14.0
  both leave 2 nodes or fewer to NCCL ("the regions are not well defined at two nodes"). The p5/p5e
  regions of v1.13.0-v1.21.1 are v1.12's, point for point (``region_init_internal_p5_p5e``), extended
  to the nearer edge from v1.13.2 and tested in log2 space from v1.19.0 (:mod:`zerocalc.nccl.ofi_regions`).
  zerocalc does not model the p5en and p6 regions: such a release, platform and communicator is refused
  (``--ofi-tuner``) or priced with NCCL's own choice and a note saying so (a file's INFO lines).

To v1.12.1 the tuner is not platform-gated: each answers alike on any machine NCCL loads it on. None of
the modelled answers sets ``nChannels`` (v1.16.0 on set it for Tree/LL128 on p6 only, v1.21.0 on a chunk
size with one rank per node on p5en only), so NCCL launches the call on its own channels.

How NCCL loads it: from v1.9.0 to v1.15.x the tuner is its own library, ``libnccl-ofi-tuner.so``
(``src/Makefile.am``), which NCCL loads only when ``NCCL_TUNER_PLUGIN`` names it (NCCL
``src/misc/tuner.cc``); from v1.16.0 ("build: Enable tuner by default") it is also in the net plugin
library, which NCCL 2.21 and later open for a tuner when ``NCCL_TUNER_PLUGIN`` is unset. The v1.9-v1.11
tuners export ``ncclTunerPlugin_v1`` (NCCL 2.19-2.20) and ``ncclTunerPlugin_v2`` (2.21, and 2.22 on
through NCCL's v2 wrapper, which makes the pair's cost 0 in the cost table unless NCCL ignores that pair,
``src/plugin/tuner/tuner_v2.cc``); v1.12 also ``ncclTunerPlugin_v3``, which NCCL 2.22 on takes first.
Their v1 ``init`` refuses to load when ``NCCL_ALGO`` or ``NCCL_PROTO``
is set ("The tuner plugin can not be loaded when explicitly choosing an algorithm or protocol").
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from zerocalc.errors import ConfigError
from zerocalc.nccl.release import Algorithm, Collective, Protocol

OPTION = "--ofi-tuner"
#: The plugin's name, as NCCL's ``Using tuner plugin: '%s'`` prints it (``ncclTunerPlugin_v*.name``).
PLUGIN_NAME = "nccl_ofi_tuner"

A, P = Algorithm, Protocol

#: The releases zerocalc models, first and last (inclusive), with the kind of tuner each range ships.
MODELLED = (((1, 9, 0), (1, 9, 2), "model"), ((1, 10, 0), (1, 12, 1), "regions"),
            ((1, 13, 0), (1, 21, 1), "platform"))
#: From this release both of the plugin's tuners leave 2 nodes or fewer to NCCL (commit b70a787b,
#: "Default to nccl internal tuner on two nodes").
FIRST_TWO_NODE_FALLBACK = (1, 14, 0)
#: The EC2 platforms the plugin knows, by zerocalc preset (``aws-p5`` → ``p5.48xlarge``), and the first
#: release that knows each (``nccl_ofi_tuner_init``'s ``strcmp(platform_type, ...)``).
PLATFORMS = {"p5": (1, 13, 0), "p5e": (1, 13, 0), "p5en": (1, 13, 0), "p6-b200": (1, 16, 0),
             "p6-b300": (1, 18, 0)}
#: The first release whose tuner exports the cost-table entry ``ncclTunerPlugin_v3``
#: (``include/nccl_ofi_tuner.h``, v1.12.0-aws).
FIRST_V3 = (1, 12, 0)
FIRST = (1, 9, 0)

# --- v1.9.x cost model: include/nccl_ofi_tuner.h, v1.9.0-aws to v1.9.2-aws -------------------------------
#: ``OFI_NCCL_TUNER_NUM_CHANNELS`` default: the channels the model's bandwidth counts (it never sets them).
MODEL_CHANNELS = 8
#: ``OFI_NCCL_TUNER_NET_LATENCY`` default, µs per network hop ("different from the network plugin's param
#: for net latency by design").
MODEL_NET_LATENCY_US = 20.0
#: ``OFI_NCCL_TUNER_NET_COMP_OVERHEAD`` default, µs added to a Simple network hop (EFA's completion cost).
MODEL_NET_COMP_OVERHEAD_US = 3.0
#: ``NCCL_OFI_TUNER_INTERNODE_BW``: 12.5 GiB/s per EFA rail in bytes/µs; ``NCCL_OFI_TUNER_NET_NUM_RAILS``.
MODEL_INTERNODE_BW = 12.5 * 1024 * 1024 * 1024 * 1e-6
MODEL_NUM_RAILS = 4
#: ``NCCL_OFI_TUNER_INTRANODE_BW``: 20 GiB/s per NVLink (SM90), bytes/µs.
MODEL_INTRANODE_BW = 20.0 * 1024 * 1024 * 1024 * 1e-6
#: ``nccl_nvlink_lat[algo][proto]`` (NCCL's ``hwLat`` for NVLink), µs; the pairs the model prices.
MODEL_NVLINK_LAT_US = {
    (A.TREE, P.LL): 0.6, (A.TREE, P.LL128): 1.25, (A.TREE, P.SIMPLE): 28.0,
    (A.RING, P.LL): 0.6, (A.RING, P.LL128): 1.9, (A.RING, P.SIMPLE): 3.4,
    (A.NVLS_TREE, P.SIMPLE): 23.0,
}
#: ``compute_cost``'s protocol penalties on bandwidth: LL 8 bytes for 4 of data, LL128 120 of 128.
MODEL_PROTO_BW = {P.LL: 0.5, P.LL128: 0.9375, P.SIMPLE: 1.0}
#: ``get_coll_info``'s NVLS Tree override: 16 nodes, 128 ranks, (3 GiB, 5 GiB] bytes.
MODEL_NVLS_TREE_OVERRIDE = (16, 128, 3 * 1024 ** 3, 5 * 1024 ** 3)


@dataclass(frozen=True)
class OfiTuner:
    """One aws-ofi-nccl release's tuner: ``version`` as parsed, ``text`` as stated, ``kind`` (``model``,
    ``regions`` or ``platform``: see the module docstring) and, for a ``platform`` release, the EC2
    platform it runs on (a key of :data:`PLATFORMS`; ``None``: one it does not know, or not said)."""

    version: tuple[int, int, int]
    text: str
    kind: str
    platform: str | None = None

    @property
    def name(self) -> str:
        return f"aws-ofi-nccl {self.text}"

    @property
    def source(self) -> str:
        """The files of the plugin's release that hold what it answers."""
        path = {"model": "src/tuner/nccl_ofi_model.c", "regions": "src/tuner/nccl_ofi_tuner.c"}.get(
            self.kind, "src/tuner/nccl_ofi_regions.c" if self.version < (1, 15, 0) else
            "src/tuner/nccl_ofi_regions.cpp")
        return f"{path} (v{self.text})"

    def coverage(self, n_nodes: int, platform_known: bool = True) -> tuple[bool | None, str]:
        """Whether zerocalc knows what the tuner does on ``n_nodes`` nodes of its :attr:`platform`:
        ``(True, '')`` its rules apply (:func:`ofi_choice`); ``(False, why)`` it leaves every call to
        NCCL; ``(None, why)`` not modelled. ``platform_known``: the machine is one whose EC2 platform
        zerocalc can tell (an AWS preset); else a ``platform`` release is not modelled past 2 nodes."""
        if self.kind != "platform":
            return True, ""
        if n_nodes <= 2 and self.version >= FIRST_TWO_NODE_FALLBACK:
            return False, "it leaves 2 nodes or fewer to NCCL"
        if not platform_known:
            return None, ("it answers by the EC2 instance type, which this topology does not name (an AWS "
                          "preset does)")
        first = PLATFORMS.get(self.platform or "")
        if first is None or self.version < first:
            return False, (f"it does not know platform {self.platform} (\"NCCL_OFI_TUNER is not available "
                           f"for platform\")")
        if self.platform not in ("p5", "p5e"):
            return None, f"its {self.platform} regions are not modelled"
        return True, ""


_VERSION = re.compile(r"v?(\d+)\.(\d+)\.(\d+)(?:[-.+][0-9A-Za-z.-]+)?")


def parse_ofi_version(text: str, option: str = OPTION) -> tuple[int, int, int]:
    """``(major, minor, patch)`` of an aws-ofi-nccl release as it prints it (``1.9.2-aws``, ``v1.14.0``)."""
    m = _VERSION.fullmatch(str(text).strip())
    if m is None:
        raise ConfigError(f"an aws-ofi-nccl release is X.Y.Z (1.9.2, 1.11.0-aws), got {text!r}",
                          option=option)
    return int(m[1]), int(m[2]), int(m[3])


def ofi_tuner(text: str, option: str = OPTION) -> OfiTuner:
    """The tuner of aws-ofi-nccl release ``text``; a :class:`ConfigError` for a release with no tuner
    (before v1.9.0) or one zerocalc does not model (see the module docstring)."""
    v = parse_ofi_version(text, option)
    shown = str(text).strip().lstrip("v")
    if v < FIRST:
        raise ConfigError(f"aws-ofi-nccl {shown} ships no tuner plugin (its first is in v1.9.0)",
                          option=option)
    for lo, hi, kind in MODELLED:
        if lo <= v <= hi:
            return OfiTuner(v, shown, kind)
    raise ConfigError(f"aws-ofi-nccl {shown}'s tuner is not modelled: zerocalc models v1.9.0-v1.21.1 "
                      f"(the newest it has read)", option=option)


def loaded_api(ofi: OfiTuner, nccl_version: str, restricted: bool) -> int:
    """The tuner API the NCCL ``nccl_version`` loads ``ofi`` with (:func:`zerocalc.nccl.tuner.tuner_api`); a
    :class:`ConfigError` naming ``--ofi-tuner`` where it cannot: NCCL before 2.19 loads no tuner plugin, and
    the plugin's v1 ``init`` refuses to load under ``NCCL_ALGO`` / ``NCCL_PROTO`` (``restricted``; module
    docstring)."""
    from zerocalc.nccl.tuner import tuner_api

    try:
        api = tuner_api(nccl_version)
    except ConfigError as exc:
        raise ConfigError(exc.message, option=OPTION) from None
    if api == 1 and restricted:
        raise ConfigError(f"{ofi.name}'s tuner refuses to load under NCCL_ALGO / NCCL_PROTO with NCCL "
                          f"{nccl_version}'s tuner API v1 (its init_v1 returns ncclInvalidArgument)",
                          option=OPTION)
    return api


def require_coverage(ofi: OfiTuner, n_nodes: int) -> bool:
    """Whether ``ofi``'s rules apply to a communicator on ``n_nodes`` nodes (``False``: it leaves every call
    to NCCL, :meth:`OfiTuner.coverage`); a :class:`ConfigError` naming ``--ofi-tuner`` where zerocalc does
    not model what it does there."""
    covered, why = ofi.coverage(n_nodes, ofi.platform is not None)
    if covered is None:
        raise ConfigError(f"{ofi.name}'s tuner on {n_nodes} nodes: {why}", option=OPTION)
    return covered


def platform_of_instance(instance_type: str) -> str:
    """The platform key of an EC2 instance type as aws-ofi-nccl reads it (``p5en.48xlarge`` → ``p5en``)."""
    return str(instance_type).lower().split(".")[0]


def platform_of(topology_name: str) -> str | None:
    """The EC2 platform (a key of :data:`PLATFORMS`, or another ``aws-`` preset's family such as ``p4d``)
    of a zerocalc AWS preset name (``aws-p5e`` → ``p5e``), ``None`` for any other topology."""
    name = str(topology_name).lower()
    if not name.startswith("aws-"):
        return None
    return name.removeprefix("aws-").split("_")[0]


def model_costs_us(coll: Collective, n_bytes: int, n_nodes: int, n_ranks: int, nvls_support: bool,
                   pipe_ops: int = 1) -> dict[tuple[Algorithm, Protocol], float]:
    """``nccl_ofi_tuner_compute_cost`` (v1.9.x) of each pair ``get_coll_info`` prices, µs, in NCCL's
    index order (Tree, Ring, NVLS Tree; LL, LL128, Simple); empty for a collective it has no model of.

    Ring: ``2(n-1)`` steps, ``2·nodes`` of them on the network; Tree: ``2(n/nodes - 1)`` NVLink hops and
    ``2·log2(nodes)`` network hops; NVLS Tree: ``2(nvlink + log2(nodes)·net)``. A network hop is 20 µs
    (+3 µs for Simple); bandwidth: Ring 4 rails × 12.5 GiB/s × 8 channels, Tree half that, NVLS Tree
    ``min(NVLink, rails / 2) × 8``, then × 0.5 (LL) or × 0.9375 (LL128).
    """
    if coll != Collective.ALL_REDUCE:
        return {}
    rails_bw = MODEL_INTERNODE_BW * MODEL_NUM_RAILS
    out = {}
    for (a, p), p2p in MODEL_NVLINK_LAT_US.items():
        if a == A.NVLS_TREE and not nvls_support:
            continue
        net = MODEL_NET_LATENCY_US + (MODEL_NET_COMP_OVERHEAD_US if p == P.SIMPLE else 0.0)
        if a == A.RING:
            steps, inter = 2 * (n_ranks - 1), 2 * n_nodes
            latency = inter * net + (steps - inter) * p2p
            bw = rails_bw * MODEL_CHANNELS
        elif a == A.NVLS_TREE:
            latency = 2 * (p2p + math.log2(n_nodes) * net)
            bw = min(MODEL_INTRANODE_BW, rails_bw / 2) * MODEL_CHANNELS
        else:
            latency = 2 * (n_ranks // n_nodes - 1) * p2p + 2 * math.log2(n_nodes) * net
            bw = rails_bw * MODEL_CHANNELS / 2
        bw *= MODEL_PROTO_BW[p]
        out[(a, p)] = latency * pipe_ops + n_bytes / bw
    return out


def _model_choice(coll: Collective, n_bytes: int, n_nodes: int, n_ranks: int,
                  nvls_support: bool, pipe_ops: int) -> tuple[Algorithm, Protocol] | None:
    """``nccl_ofi_tuner_get_coll_info`` of v1.9.x."""
    if n_nodes <= 2:
        return None
    nodes, ranks, lo, hi = MODEL_NVLS_TREE_OVERRIDE
    if coll == Collective.ALL_REDUCE and n_nodes == nodes and n_ranks == ranks and nvls_support \
            and lo < n_bytes <= hi:
        return A.NVLS_TREE, P.SIMPLE
    best = None
    for pair, cost in model_costs_us(coll, n_bytes, n_nodes, n_ranks, nvls_support, pipe_ops).items():
        if best is None or cost < best[1]:
            best = (pair, cost)
    return best[0] if best else None


def ofi_choice(tuner: OfiTuner, coll: Collective, n_bytes: int, n_nodes: int, n_ranks: int,
               nvls_support: bool, pipe_ops: int = 1, tuner_api: int = 2,
               usable: Callable[[Algorithm, Protocol], bool] | None = None
               ) -> tuple[Algorithm, Protocol] | None:
    """The pair ``tuner`` returns for one call (``None``: it leaves NCCL's own choice) to an NCCL of tuner
    API ``tuner_api``. ``nvls_support``: what NCCL passes as ``nvlsSupport`` (NVLS usable for this call);
    ``usable``: whether NCCL prices a pair (not ``NCCL_ALGO_PROTO_IGNORE``), which a v3 plugin reads from
    the cost table; nccl-tests calls run one operation per group (``numPipeOps`` 1)."""
    if tuner.kind == "model":
        return _model_choice(coll, int(n_bytes), n_nodes, n_ranks, nvls_support, pipe_ops)
    from zerocalc.nccl.ofi_regions import region_choice

    applies, _ = tuner.coverage(n_nodes)
    if not applies:
        return None
    v3 = tuner_api >= 3 and tuner.version >= FIRST_V3
    return region_choice(tuner.version, coll, int(n_bytes), n_nodes, n_ranks, nvls_support,
                         usable if v3 else None)
