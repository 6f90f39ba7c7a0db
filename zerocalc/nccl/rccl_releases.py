"""RCCL's per-release tables: the tuning models of ``tuning.cc`` (per-link latencies, bandwidth ratios,
size corrections) and the MSCCL all-reduce programs each modelled release ships, with the release a
version maps to. The model that reads them is :mod:`zerocalc.nccl.rccl` (its docstring gives the
sources and what each model applies to)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from zerocalc.errors import ConfigError
from zerocalc.nccl.release import Algorithm, Collective, Protocol

A, P, C = Algorithm, Protocol, Collective
#: A protocol size range ``(min, max]`` of ``llProtoRanges``, in bytes per rank (``rcclGetSizePerRank``).
Range = tuple[int, int]


@dataclass(frozen=True)
class TuningModel:
    """One ``rcclTuningModel`` entry, Tree and Ring rows (the others are never enabled on AMD GPUs)."""

    #: ``hwLat`` (µs): link kind (``"xgmi"`` = RCCL's NVLINK row, ``"net"``) → algorithm → (LL, LL128, Simple)
    hw_lat: Mapping[str, Mapping[Algorithm, tuple[float, float, float]]]
    #: ``bwRatio``: [1-2 nodes, more] → algorithm → (LL, LL128, Simple)
    bw_ratio: tuple[
        Mapping[Algorithm, tuple[float, float, float]], Mapping[Algorithm, tuple[float, float, float]]
    ]
    tree_correction: tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]
    ring_correction: tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]
    #: the float the C struct holds just before ``treeCorrectionFactor[0][0]``: ``bwRatio[1]``'s last
    #: algorithm's Simple entry (0: NVLS Tree). Below 64 B ``log2i(nBytes >> 6)`` is -1 and RCCL reads
    #: ``[p][-1]``, the entry before the row (the previous row's last, or that float for LL).
    before_tree: float = 0.0
    #: ``llProtoRanges`` (RCCL from 2.25, after the NCCL 2.23 merge): per collective the LL and LL128 size
    #: ranges ``(min, max]`` in bytes per rank that ``rcclUpdateCollectiveProtocol`` forces across nodes
    #: (:func:`zerocalc.nccl.rccl_net.forced_protocol`); ``None``: the model sets none
    proto_ranges: Mapping[Collective, tuple[Range, Range]] | None = None


@dataclass(frozen=True)
class MscclProgram:
    """One MSCCL all-reduce program of ``tools/msccl-algorithms/`` (its ``<algo>`` element's attributes)."""

    file: str
    protocol: Protocol
    n_channels: int
    chunks_per_loop: int
    in_place: bool
    min_bytes: int
    max_bytes: int
    #: steps of one exchange with every peer at once (2 for "allpairs": reduce-scatter, all-gather);
    #: ``None``: not timed (module docstring)
    steps: int | None = 2


@dataclass(frozen=True)
class RcclRelease:
    """One modelled RCCL release: its tuning model 5 (gfx942, 8 GPUs) and its 8-GPU all-reduce MSCCL
    programs."""

    name: str
    rocm: str
    source: str
    model: TuningModel
    msccl_all_reduce: tuple[MscclProgram, ...] = field(default_factory=tuple)
    #: whether MSCCL runs a communicator one process holds several ranks of (rccl-tests ``-g G`` above 1):
    #: 2.20.5's ``mscclCommCompatible`` (``src/misc/msccl/msccl_lifecycle.cc``, tag ``rocm-6.2.0``) turns
    #: MSCCL off when two ranks share a host and a process; 2.21.5 returns true first while
    #: ``RCCL_MSCCL_ENABLE_SINGLE_PROCESS`` (default 1) is set (branch ``release-staging/rocm-rel-6.3``;
    #: CHANGELOG 2.21.5, "Enabled MSCCL for single-process multi-threaded contexts")
    msccl_single_process: bool = True
    #: whether the 8-GPU rome models with NICs (``rome_model_81`` / ``84``) enable LL128 across nodes
    #: (``options`` ``ll128Enabled=1``: ROCm/rccl develop after the NCCL 2.23 merge, with CHANGELOG 2.25.1
    #: "Enabled LL128 protocol on gfx950"); off in 2.20.5 and 2.21.5, whose options carry no such flag
    ll128_across_nodes: bool = False
    #: the first RCCL version (major, minor) whose tables these are (:func:`rccl_release_for`)
    first: tuple[int, int] = (0, 0)

    @property
    def version(self) -> tuple[int, int, int]:
        a, b, c = self.name.split(".")
        return int(a), int(b), int(c)


def _rows(text: str) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    """Three 27-entry rows (LL, LL128, Simple) of a correction table, as ``tuning.cc`` prints them."""
    rows = tuple(tuple(float(x) for x in line.split()) for line in text.strip().split("|"))
    if len(rows) != 3 or any(len(r) != 27 for r in rows):
        raise ValueError("a correction table holds 3 rows of 27 factors")
    return rows  # type: ignore[return-value]


_ZERO = " 0" * 27
_CORR_20 = TuningModel(
    hw_lat={"xgmi": {A.TREE: (0.8, 0.0, 2.5), A.RING: (0.8, 0.0, 3.6)},
            "net": {A.TREE: (12.5, 0.0, 22.4), A.RING: (9.5, 0.0, 19.8)}},
    bw_ratio=({A.TREE: (0.41, 0.0, 1.0), A.RING: (0.41, 0.0, 1.0)},
              {A.TREE: (0.41, 0.0, 0.86), A.RING: (0.41, 0.0, 1.0)}),
    tree_correction=_rows(
        ".1 .1 .1 .1 .1 1 1 .8 .1 .4 .5 1 .6 .4 .6 .1 .3 .4 .4 .3 .2 .2 .2 .2 .2 .2 .2 |" + _ZERO + "|"
        ".1 .1 .1 .1 .1 .1 .1 .1 1 1 1 .4 1 1 1 .2 .7 1 1 1 .8 .7 .7 .8 .8 .8 .9"),
    ring_correction=_rows(
        ".1 .1 .1 .1 .1 .1 .1 1 .1 .2 .2 .1 .5 .8 1 .2 .4 .5 .4 .4 .3 .2 .2 .2 .2 .2 .2 |" + _ZERO + "|"
        ".1 .1 .1 .1 .1 .1 .1 .1 .1 .7 .1 .1 .1 .1 .1 1 1 1 .9 1 1 1 1 1 1 1 1"),
)
_CORR_21 = TuningModel(
    hw_lat={"xgmi": {A.TREE: (0.9, 0.0, 2.3), A.RING: (0.8, 0.0, 2.1)},
            "net": {A.TREE: (10.5, 0.0, 25.0), A.RING: (9.5, 0.0, 320.0)}},
    bw_ratio=({A.TREE: (0.06, 0.0, 0.11), A.RING: (0.08, 0.0, 1.0)},
              {A.TREE: (0.06, 0.0, 0.59), A.RING: (0.08, 0.0, 1.0)}),
    tree_correction=_rows(
        ".1 .1 .1 .1 .1 .1 1 1 1 1 1 .6 1 .9 1 1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 |" + _ZERO + "|"
        ".1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .7 1 1 1 1 1 1 1 1 1 1 .8"),
    ring_correction=_rows(
        ".1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 1 .2 1 .4 .4 .1 .2 .2 .1 .1 .1 .1 .1 .1 .1 .1 |" + _ZERO + "|"
        ".1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .8 1 1 1"),
)

#: ``tuning_model_0``, the model of a topology no rome model matches (``system->tuning`` left at 0), alike in
#: 2.20.5 and 2.21.5.
MODEL_0 = TuningModel(
    hw_lat={"xgmi": {A.TREE: (0.8, 1.4, 2.5), A.RING: (0.8, 2.2, 3.6)},
            "net": {A.TREE: (11.8, 18.2, 20.8), A.RING: (9.5, 19.8, 15.1)}},
    bw_ratio=({A.TREE: (0.04, 0.22, 0.91), A.RING: (0.04, 0.34, 1.0)},
              {A.TREE: (0.04, 0.22, 0.95), A.RING: (0.04, 0.34, 1.0)}),
    tree_correction=_rows(
        ".1 .2 .1 .1 .9 .3 .4 .1 .2 .4 .2 .1 .3 .3 .2 .2 .2 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 |"
        ".1 .3 1 .1 .5 1 .9 1 1 1 .3 .1 .4 .5 .5 .4 .4 .3 .3 .2 .2 .2 .2 .2 .2 .2 .2 |"
        ".2 1 .1 .1 .7 .2 .4 .1 .1 .3 .4 .3 .6 .8 1 1 1 1 .9 .8 .8 .8 .8 .8 .9 .9 .9"),
    ring_correction=_rows(
        ".1 .1 .1 .1 .1 .2 .4 .2 .3 .5 .3 .1 .5 .5 .3 .2 .2 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 |"
        ".1 .1 .1 .1 .1 .1 .1 .1 .1 .3 1 1 1 1 1 1 .8 .7 .5 .4 .4 .3 .3 .3 .3 .3 .3 |"
        "1 .8 .2 1 1 .3 1 .1 .1 .2 .2 .1 .5 1 .8 .8 1 .9 1 1 1 1 1 1 1 1 1"),
)

#: ``tuning_model_3``, the model of ``rome_model_74`` (8 gfx90a GCDs of 4 MI250X + 4 NICs, HPE Cray EX235a:
#: ``options = "tuning=3"``), alike in 2.20.5, 2.21.5 and ROCm/rccl develop after the NCCL 2.23 merge. With
#: every rank on one node the NICs are trimmed and ``rome_model_73`` matches, which sets no tuning (model 0).
MODEL_3 = TuningModel(
    hw_lat={"xgmi": {A.TREE: (0.8, 0.0, 2.5), A.RING: (0.8, 0.0, 3.6)},
            "net": {A.TREE: (12.5, 0.0, 22.4), A.RING: (9.5, 0.0, 19.8)}},
    bw_ratio=({A.TREE: (0.20, 0.0, 1.75), A.RING: (0.20, 0.0, 1.0)},
              {A.TREE: (0.20, 0.0, 0.96), A.RING: (0.20, 0.0, 1.0)}),
    tree_correction=_rows(
        ".1 .1 .1 .1 .1 .1 1 1 .2 1 .9 1 .6 .4 .6 .4 .3 .3 .3 .3 .3 .2 .2 .2 .2 .2 .2 |" + _ZERO + "|"
        "1 1 1 1 1 1 .1 .1 .1 .2 1 .8 1 1 1 1 1 1 1 1 1 .8 .7 .8 .9 .7 .7"),
    ring_correction=_rows(
        ".1 .1 .1 .1 .1 .3 .1 .2 .1 .4 .4 .2 .2 .3 .7 .5 .4 .3 .3 .3 .3 .2 .2 .2 .2 .2 .2 |" + _ZERO + "|"
        ".1 .1 .1 .1 .1 .1 .1 .5 1 .1 .3 .1 .1 .1 .2 .2 .2 .3 .4 .7 1 1 1 1 1 1 1"),
)

#: The hop latencies and bandwidth ratios tuning models 5 and 6 share after ROCm/rccl's NCCL 2.23 merge
#: (2.21.5's, LL128's entries copied from LL's).
_LAT_POST_2_23 = {"xgmi": {A.TREE: (0.9, 0.9, 2.3), A.RING: (0.8, 0.8, 2.1)},
                  "net": {A.TREE: (10.5, 10.5, 25.0), A.RING: (9.5, 9.5, 320.0)}}
_RATIO_POST_2_23 = ({A.TREE: (0.06, 0.06, 0.11), A.RING: (0.08, 0.08, 1.0)},
                    {A.TREE: (0.06, 0.06, 0.59), A.RING: (0.08, 0.08, 1.0)})

#: ``tuning_model_6``, gfx950's (MI355X, MI350X): ``rome_models.cc`` sets ``system->tuning = 6`` when the
#: GPUs of a matched 8-GPU xGMI model are gfx950 (ROCm/rccl develop after the NCCL 2.23 merge). Model 5's
#: hop latencies and bandwidth ratios (LL128's entries copied from LL's, LL128 staying off: see
#: :func:`rccl_tune`), its own correction factors.
MODEL_6 = TuningModel(
    hw_lat=_LAT_POST_2_23, bw_ratio=_RATIO_POST_2_23,
    tree_correction=_rows(
        ".1 .1 .1 .1 .1 .1 1 1 1 1 1 .6 1 .9 1 1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 |"
        ".1 .1 .1 .1 .1 .1 1 1 1 1 1 .6 1 .9 1 1 1 1 1 2 .1 .1 .1 .1 .1 .1 .1 |"
        ".1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .7 1 .1 .1 .1 .9 .9 .7 .8 .6 .6 .6"),
    ring_correction=_rows(
        ".1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 1 .2 1 .4 .4 .1 .2 .2 .1 .1 .1 .1 .1 .1 .1 .1 |"
        ".1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 1 .2 1 .4 .4 .1 .2 .1 .1 .1 .1 .1 .1 .1 .1 .1 |"
        ".1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 1 .8 .8 1 1"),
    # llProtoRanges (ReduceScatter, AllGather, AllReduce, Reduce, Broadcast): LL (min, max], LL128 (min, max]
    proto_ranges={C.REDUCE_SCATTER: ((0, 131071), (131071, 4194304)),
                  C.ALL_GATHER: ((0, 7), (7, 8388608)),
                  C.ALL_REDUCE: ((0, 131071), (131071, 17660227)),
                  C.REDUCE: ((0, 16383), (16383, 16777216)),
                  C.BROADCAST: ((0, 2048), (2048, 16777216))},
)

#: ``tuning_model_5`` of ROCm/rccl develop after the NCCL 2.23 merge (the tables of RCCL 2.25 on, ROCm 7.0:
#: CHANGELOG 2.25.1, "LL/LL128 usage ranges for AR, AG, and RS are part of the tuning models"): 2.21.5's
#: hop latencies and bandwidth ratios with LL128's entries copied from LL's, its Tree/Simple and
#: Ring/Simple corrections changed above 64 MiB (ROCm/rccl PR 1624, "Tree->Ring switching point"), and
#: ``llProtoRanges`` for ReduceScatter, AllGather and AllReduce (its Reduce and Broadcast rows left zero,
#: ``RCCL_LL_LIMITS_UNDEFINED``: the table's protocol stands).
_CORR_26 = TuningModel(
    hw_lat=_LAT_POST_2_23, bw_ratio=_RATIO_POST_2_23,
    tree_correction=_rows(
        ".1 .1 .1 .1 .1 .1 1 1 1 1 1 .6 1 .9 1 1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 |"
        ".1 .1 .1 .1 .1 .1 1 1 1 1 1 .6 1 .9 1 1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 |"
        ".1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .7 1 1 1 1 1 .7 .7 .5 .6 .6 .6"),
    ring_correction=_rows(
        ".1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 1 .2 1 .4 .4 .1 .2 .2 .1 .1 .1 .1 .1 .1 .1 .1 |"
        ".1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 1 .2 1 .4 .4 .1 .2 .2 .1 .1 .1 .1 .1 .1 .1 .1 |"
        ".1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 .1 1 .8 1 1 1"),
    proto_ranges={C.REDUCE_SCATTER: ((0, 655360), (131072, 3211264)),
                  C.ALL_GATHER: ((0, 98304), (98304, 5046272)),
                  C.ALL_REDUCE: ((0, 1048576), (1048576, 9437184))},
)

_MSCCL = "tools/msccl-algorithms/allreduce-allpairs-8n-"
_ALLPAIRS_COMMON = (
    MscclProgram(_MSCCL + "ll-64tb-op.xml", P.LL, 8, 512, False, 65537, 524287),
    MscclProgram(_MSCCL + "ll-64tb.xml", P.LL, 8, 512, True, 65537, 524287),
    MscclProgram(_MSCCL + "simple-op.xml", P.SIMPLE, 8, 512, False, 524288, 16777216),
    MscclProgram(_MSCCL + "simple.xml", P.SIMPLE, 8, 512, True, 524288, 11534336),
    MscclProgram(_MSCCL + "simple_2.xml", P.SIMPLE, 8, 512, True, 14680065, 16777216),
)
V2_20 = RcclRelease(
    "2.20.5",
    "6.2",
    "ROCm/rccl tag rocm-6.2.0 (RCCL 2.20.5): src/graph/tuning.cc tuning_model_5, tools/msccl-algorithms",
    _CORR_20,
    (
        MscclProgram(_MSCCL + "ll-1pass-op.xml", P.LL, 2, 16, False, 0, 25599, steps=None),
        MscclProgram(_MSCCL + "ll-1pass.xml", P.LL, 4, 32, True, 0, 25599, steps=None),
        MscclProgram(_MSCCL + "ll-32tb-op.xml", P.LL, 4, 256, False, 25600, 65536),
        MscclProgram(_MSCCL + "ll-32tb.xml", P.LL, 4, 256, True, 25600, 65536),
        *_ALLPAIRS_COMMON,
    ),
    msccl_single_process=False,
    first=(2, 20),
)
V2_21 = RcclRelease(
    "2.21.5",
    "6.3",
    "ROCm/rccl branch release-staging/rocm-rel-6.3 (RCCL 2.21.5): src/graph/tuning.cc "
    "tuning_model_5, tools/msccl-algorithms",
    _CORR_21,
    (
        MscclProgram(_MSCCL + "ll-32tb-op.xml", P.LL, 4, 256, False, 0, 65536),
        MscclProgram(_MSCCL + "ll-32tb.xml", P.LL, 4, 256, True, 0, 65536),
        *_ALLPAIRS_COMMON,
    ),
    first=(2, 21),
)
V2_26 = RcclRelease(
    "2.26.6",
    "7.0",
    "ROCm/rccl develop after the NCCL 2.23 merge (the tables of RCCL 2.25 on, ROCm 7.0): src/graph/tuning.cc "
    "tuning_model_5 with llProtoRanges, src/misc/rccl_wrap.cc rcclUpdateCollectiveProtocol",
    _CORR_26,
    V2_21.msccl_all_reduce,  # one node: 2.21.5's programs and rules, not read again for this release
    ll128_across_nodes=True,
    first=(2, 25),
)
RCCL_RELEASES: tuple[RcclRelease, ...] = (V2_20, V2_21, V2_26)
#: the release a file that states no RCCL version is priced with: 2.21.5, the latest whose one-node MSCCL
#: programs were read (2.26.6 keeps them unread)
RCCL_LATEST = V2_21
#: the first modelled release that builds for a GPU architecture later than :data:`RCCL_LATEST`'s: gfx950
#: (MI350X, MI355X) from RCCL 2.26.6 for ROCm 7.0.0 (ROCm/rccl ``CHANGELOG.md``, "RCCL 2.26.6 for ROCm
#: 7.0.0", Added: "Added new GPU target `gfx950`"), so no RCCL 2.21.5 (ROCm 6.3) ran on one
FIRST_RELEASE_FOR_ARCH: dict[str, RcclRelease] = {"gfx950": V2_26}


def rccl_default_for(arch: str | None) -> RcclRelease:
    """The release a file that states no RCCL version is priced with on GPUs of ``arch``: :data:`RCCL_LATEST`,
    unless that release predates the architecture (:data:`FIRST_RELEASE_FOR_ARCH`): then the first modelled
    release that builds for it."""
    first = FIRST_RELEASE_FOR_ARCH.get(arch or "")
    return first if first is not None and first.version > RCCL_LATEST.version else RCCL_LATEST


def rccl_release_for(version: str | None) -> tuple[RcclRelease, str | None]:
    """The modelled RCCL release for an RCCL version (``x.y.z``, as rccl-tests prints it: ``RCCL version :
    x.y.z-…``): the release of its major.minor, else the latest whose tables begin at or before it
    (:attr:`RcclRelease.first`; before 2.20 the earliest), with a note (``None``: the file states none,
    priced with :data:`RCCL_LATEST`)."""
    if not version:
        return RCCL_LATEST, (
            f"no RCCL version stated: priced with RCCL {RCCL_LATEST.name}'s tables "
            f"(ROCm {RCCL_LATEST.rocm}, the latest whose one-node MSCCL programs are modelled)"
        )
    try:
        parts = tuple(int(x) for x in version.strip().split("-")[0].split(".")[:3])
    except ValueError:
        raise ConfigError(
            f"not an RCCL version: {version!r} (expected x.y.z)", option="--nccl-version"
        ) from None
    if len(parts) < 2:
        raise ConfigError(f"not an RCCL version: {version!r} (expected x.y.z)", option="--nccl-version")
    for rel in RCCL_RELEASES:
        if rel.version[:2] == parts[:2]:
            return rel, None
    earlier = [r for r in RCCL_RELEASES if r.first <= parts[:2]]
    rel = earlier[-1] if earlier else RCCL_RELEASES[0]
    which = "the latest modelled before it" if earlier else "the earliest modelled"
    return rel, (
        f"RCCL {version}: its tables are not modelled; priced with RCCL {rel.name}'s "
        f"(ROCm {rel.rocm}, {which})"
    )
