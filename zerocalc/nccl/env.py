"""``NCCL_ALGO`` / ``NCCL_PROTO``: which algorithms and protocols the user lets NCCL choose.

The grammar is ``parseList`` of ``src/graph/tuning.cc`` (v2.30.7; v2.19 reads the part without
prefixes): a comma-separated list of names (case-insensitive; ``^`` first = all but these),
optionally per collective after a prefix, entries separated by ``;``, only the first without a
prefix: ``NCCL_ALGO="ring,collnetdirect;allreduce:tree,collnetdirect;broadcast:ring"``,
``NCCL_PROTO="^LL128;allreduce:LL128"``. Names are NCCL's (``init.cc``: ``ncclAlgoStr``,
``ncclProtoStr``, ``ncclFuncStr``). A bad list is a :class:`ConfigError` naming the variable.

Before 2.24 (v2.9.9-v2.23.4 ``parseList(str, elems, nelems, list)``) the list is one for every collective:
split on commas alone, ``^`` first = all but these, and a name NCCL does not know is skipped without a
word (``strcasecmp`` against each, no match, no error). ``allreduce:ring`` is then one unknown name: a
list of nothing but unknown names enables no algorithm, and NCCL fails the call ("no algorithm/protocol
available"). :func:`parse_list` with ``version`` reads it so (:func:`skipped_names` says what was skipped).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from zerocalc.errors import ConfigError, TraceFormatError
from zerocalc.nccl.launch import LaunchEnv, parse_thresholds
from zerocalc.nccl.tables import Algorithm, Collective, Protocol

FUNC_NAMES = {"broadcast": Collective.BROADCAST, "reduce": Collective.REDUCE,
              "allgather": Collective.ALL_GATHER,
              "reducescatter": Collective.REDUCE_SCATTER, "allreduce": Collective.ALL_REDUCE}


#: The first release whose ``parseList`` reads per-collective entries (``allreduce:tree;broadcast:ring``)
#: and refuses an unknown name (v2.24.3 ``src/graph/tuning.cc``; v2.23.4 has the flat list).
PREFIXED_LISTS = (2, 24)


def _flat_grammar(version: str | None) -> bool:
    from zerocalc.nccl.tables import parse_version

    return version is not None and parse_version(version)[:2] < PREFIXED_LISTS


def skipped_names(text: str, kind: type[StrEnum], version: str | None) -> list[str]:
    """The names of ``text`` that NCCL ``version`` skips (before 2.24: any it does not know; none after,
    where :func:`parse_list` refuses them)."""
    if not text or not _flat_grammar(version):
        return []
    members = {m.value.lower() for m in kind}
    return [n for n in _flat_names(text) if n.lower() not in members]


def _flat_names(text: str) -> list[str]:
    """The names of a list as NCCL before 2.24 splits it: on commas alone, after a leading ``^``."""
    return str(text).removeprefix("^").split(",")


def _parse_flat(text: str, kind: type[StrEnum], option: str, version: str) -> dict[Collective, set]:
    """NCCL before 2.24's one list for every collective (see the module's text)."""
    negate = str(text).startswith("^")
    chosen = {m for m in kind for n in _flat_names(text) if n.lower() == m.value.lower()}
    if not negate and not chosen:
        raise ConfigError(f"NCCL {version} reads {text!r} as one list for every collective (entries per "
                          "collective came in 2.24) and knows none of its names, so it enables nothing "
                          "and fails every call ('no algorithm/protocol available')", option=option)
    return {c: set(kind) - chosen if negate else set(chosen) for c in Collective}


def parse_list(text: str, kind: type[StrEnum], option: str,
               version: str | None = None) -> dict[Collective, set]:
    """The enabled members of ``kind`` (:class:`Algorithm` or :class:`Protocol`) per collective, as NCCL
    ``version`` reads the list (``None``: as the latest does)."""
    if _flat_grammar(version) and str(text).strip():
        return _parse_flat(text, kind, option, str(version))
    members = {m.value.lower(): m for m in kind}
    enabled: dict[Collective, set] = {c: set(kind) for c in Collective}
    entries = [e for e in str(text).split(";")]
    if not any(e.strip() for e in entries):
        raise ConfigError("empty list", option=option)
    for i, entry in enumerate(entries):
        prefix, sep, items = entry.partition(":")
        if not sep:
            if i > 0:
                raise ConfigError(f"all entries except the first must have a prefix: {text!r}", option=option)
            prefix, items = "", entry
        items = items.strip()
        negate = items.startswith("^")
        names = [n.strip().lower() for n in items.lstrip("^").split(",") if n.strip()]
        chosen = set()
        for n in names:
            if n not in members:
                known = ", ".join(m.value for m in kind)
                raise ConfigError(f"unknown name {n!r} in {text!r} (known: {known})",
                                  option=option)
            chosen.add(members[n])
        if prefix.strip():
            key = prefix.strip().lower()
            if key not in FUNC_NAMES:
                raise ConfigError(f"unknown collective {prefix.strip()!r} in {text!r} "
                                  "(known: Broadcast, Reduce, AllGather, ReduceScatter, AllReduce)",
                                  option=option)
            targets = [FUNC_NAMES[key]]
        else:
            targets = list(Collective)
        for c in targets:
            enabled[c] = set(kind) - chosen if negate else chosen
    return enabled


def restrictions(algo: str | None, proto: str | None,
                 version: str | None = None) -> tuple[dict | None, dict | None]:
    """``(algo_enable, proto_enable)`` for :func:`zerocalc.nccl.model.tune` (``None``: not set), as NCCL
    ``version`` reads the lists (``None``: the latest)."""
    return (parse_list(algo, Algorithm, "NCCL_ALGO", version) if algo else None,
            parse_list(proto, Protocol, "NCCL_PROTO", version) if proto else None)


def _version_key(text: str, *, upper: bool) -> tuple[int, int, float]:
    from zerocalc.nccl.tables import parse_version

    major, minor, patch = parse_version(text)
    has_patch = str(text).strip().lstrip("v").count(".") >= 2
    return major, minor, patch if has_patch or not upper else float("inf")


def profile_for(topo, version: str):
    """The :class:`zerocalc.topology.NcclEnv` of ``topo`` covering NCCL ``version`` (the last listed
    when several do), or ``None``."""
    v = _version_key(version, upper=False)
    found = None
    for env in getattr(topo, "nccl_env", ()) or ():
        try:
            lo, hi = _version_key(env.min_version, upper=False), _version_key(env.max_version, upper=True)
        except ConfigError as exc:
            raise ConfigError(f"topology {topo.name!r}: [[nccl_env]] {exc.message}",
                              option="--topology") from None
        if lo <= v <= hi:
            found = env
    return found


@dataclass(frozen=True)
class Settings:
    """What NCCL's model is told of the run's environment: the ``NCCL_ALGO`` / ``NCCL_PROTO``
    restrictions (``None``: NCCL's defaults), ``NCCL_NVLS_ENABLE``, the channel bounds
    (``NCCL_MIN_NCHANNELS`` / ``NCCL_MAX_NCHANNELS``; ``None``: unset) and notes saying where they
    came from."""

    algo_enable: dict | None
    proto_enable: dict | None
    nvls_enable: bool = True
    notes: tuple[str, ...] = ()
    min_channels: int | None = None
    max_channels: int | None = None
    #: ``NCCL_THREAD_THRESHOLDS`` / ``NCCL_NTHREADS`` / ``NCCL_LL128_NTHREADS`` (:mod:`zerocalc.nccl.launch`)
    launch: LaunchEnv = LaunchEnv()
    #: what the point-to-point path reads (:data:`STATED_P2P`, :func:`zerocalc.nccl.p2p.p2p_comm`'s keyword
    #: of each), for a point-to-point sweep; empty otherwise
    p2p: tuple[tuple[str, int], ...] = ()


#: Variables a run's own lines may set that NCCL's cost model reads (``NCCL_MIN_NRINGS`` /
#: ``NCCL_MAX_NRINGS`` are the older names of the channel bounds, read first and overridden by the
#: ``NCHANNELS`` ones: ``src/graph/connect.cc`` ``ncclMinNchannels``, v2.19-v2.30).
STATED_MODELLED = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_NVLS_ENABLE", "NCCL_MIN_NRINGS", "NCCL_MAX_NRINGS",
                   "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_THREAD_THRESHOLDS", "NCCL_NTHREADS",
                   "NCCL_LL128_NTHREADS")
#: Variables that change what a run does but that NCCL's cost model does not price: said in a note
#: (``NCCL_P2P_DISABLE`` / ``NCCL_P2P_LEVEL`` are priced on a node without NVLink, where they change the
#: PCI paths NCCL searches: :func:`zerocalc.topology.devices.with_stated_p2p`).
STATED_UNPRICED = ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_SHM_DISABLE", "NCCL_COLLNET_ENABLE",
                   "NCCL_NET_GDR_LEVEL",
                   "NCCL_NET_GDR_READ", "NCCL_TUNER_PLUGIN", "NCCL_CROSS_NIC")
#: Variables a sweep's topology reads (:func:`zerocalc.topology.stated.with_stated_nics`: a node's NICs)
STATED_TOPOLOGY = ("NCCL_IB_HCA",)
#: Variables the point-to-point path reads (``ncclTopoComputeP2pChannels`` / ``ncclTopoGetNchannels``,
#: ``src/graph/paths.cc``; the p2p step, ``computeBuffSizes``, ``src/init.cc``; PXN, ``ncclTopoGetNetDev``,
#: ``src/graph/search.cc``), priced in a point-to-point
#: sweep (:mod:`zerocalc.nccl.p2p`) and said unpriced in a collective's (NCCL's cost model does not read
#: them), with :func:`~zerocalc.nccl.p2p.p2p_comm`'s keyword.
STATED_P2P = (("NCCL_NCHANNELS_PER_NET_PEER", "per_net_peer"), ("NCCL_MIN_P2P_NCHANNELS", "min_p2p"),
              ("NCCL_MAX_P2P_NCHANNELS", "max_p2p"), ("NCCL_P2P_NET_CHUNKSIZE", "net_chunk"),
              ("NCCL_P2P_NVL_CHUNKSIZE", "nvl_chunk"), ("NCCL_P2P_PCI_CHUNKSIZE", "pci_chunk"),
              ("NCCL_BUFFSIZE", "buffsize"), ("NCCL_PXN_DISABLE", "pxn_disable"),
              ("NCCL_P2P_PXN_LEVEL", "pxn_level"))


def settings(topo, version: str, algo: str | None, proto: str | None, *,
             tuner_given: bool = False, stated: Mapping[str, Sequence] | None = None,
             where: str = "", info: Mapping[str, Any] | None = None, p2p: bool = False) -> Settings:
    """The environment NCCL runs with at ``version`` on ``topo``: the user's ``NCCL_ALGO`` /
    ``NCCL_PROTO`` when given, else what the run's own lines set (``stated``: variable → ``(value,
    line)``, :mod:`zerocalc.traces.launch_env`; each variable on its own) over the topology's vendor
    profile for that version (:func:`profile_for`), else NCCL's defaults. ``NCCL_NVLS_ENABLE``, the
    channel bounds and the launch's thread settings (``NCCL_THREAD_THRESHOLDS``, ``NCCL_NTHREADS``,
    ``NCCL_LL128_NTHREADS``: :mod:`zerocalc.nccl.launch`) the file sets stand in every case, as the
    profile's bounds do. A profile naming a tuner
    plugin the user did not give (``--nccl-tuner``) is said in a note: its choices are not priced. A value
    the file sets that NCCL would not take is a :class:`TraceFormatError` naming ``where`` and its line.
    ``info``: what the run's NCCL INFO lines state (:mod:`zerocalc.traces.nccl_info`); its
    ``thread_thresholds`` (NCCL's ``threadThresholds`` line: the values in effect, after any
    ``NCCL_THREAD_THRESHOLDS``) are the launch's thresholds where present. ``p2p``: the sweep is of a
    point-to-point test, whose path reads :data:`STATED_P2P` (priced, ``Settings.p2p``); else those are said
    unpriced. An entry of ``stated`` at line :data:`zerocalc.nccl.env_given.GIVEN` is the user's
    (``--nccl-env``): priced as the file's are, said in notes of its own."""
    stated = dict(stated or {})
    env = profile_for(topo, version)
    lo, hi = channel_limits(topo, version)
    notes: list[str] = []
    nvls = True
    if algo is not None or proto is not None:
        a_txt, p_txt = algo, proto
        given = [f"NCCL_{k}={v}" for k, v in (("ALGO", algo), ("PROTO", proto)) if v is not None]
        notes.append(f"priced under {', '.join(given)}, as --nccl-algo / --nccl-proto or zerocalc's own "
                     "environment sets it")
        replaced = [f"{k}={stated[k][0]}" for k in ("NCCL_ALGO", "NCCL_PROTO") if k in stated]
        if replaced:
            notes.append(f"the file's {', '.join(replaced)} replaced by --nccl-algo / --nccl-proto")
    else:
        a_txt, p_txt = (env.algo, env.proto) if env is not None else (None, None)
        if env is not None:
            nvls = env.nvls_enable is not False
            notes += _profile_notes(topo, env, tuner_given)
        a_txt = stated["NCCL_ALGO"][0] if "NCCL_ALGO" in stated else a_txt
        p_txt = stated["NCCL_PROTO"][0] if "NCCL_PROTO" in stated else p_txt
    try:
        a, p = restrictions(a_txt, p_txt, version)
    except ConfigError as exc:
        key = exc.option if exc.option in stated and algo is None and proto is None else None
        if key is None:
            raise
        raise TraceFormatError(where, stated[key][1], f"{key}={stated[key][0]}: {exc.message}") from None
    for var, txt, kind in (("NCCL_ALGO", a_txt, Algorithm), ("NCCL_PROTO", p_txt, Protocol)):
        if skipped := skipped_names(txt, kind, version):
            notes.append(f"{var}={txt}: NCCL {version} skips {', '.join(map(repr, skipped))}, names it does "
                         "not know (its parseList, before 2.24, neither reads per-collective entries nor "
                         "refuses a name)")
    if "NCCL_NVLS_ENABLE" in stated:
        nvls = _stated_int(stated, "NCCL_NVLS_ENABLE", where) != 0
    for key, attr in (("NCCL_MIN_NRINGS", "lo"), ("NCCL_MAX_NRINGS", "hi"),
                      ("NCCL_MIN_NCHANNELS", "lo"), ("NCCL_MAX_NCHANNELS", "hi")):
        if key in stated:
            v = _stated_int(stated, key, where)
            lo, hi = (v, hi) if attr == "lo" else (lo, v)
    thresholds = stated.get("NCCL_THREAD_THRESHOLDS")
    told = (info or {}).get("thread_thresholds")
    if told:  # NCCL's own line: the thresholds it runs with, whatever set them
        tree, ring = ("/".join(map(str, told[0][i:i + 3])) for i in (0, 3))
        notes.append(f"NCCL's threadThresholds line (line {told[1]}) priced: Tree {tree}, Ring {ring} "
                     "(LL/LL128/Simple)")
    launch = LaunchEnv(
        tuple(int(v) for v in told[0][:6]) if told else
        parse_thresholds(str(thresholds[0])) if thresholds is not None else None,
        _stated_int(stated, "NCCL_NTHREADS", where) if "NCCL_NTHREADS" in stated else None,
        _stated_int(stated, "NCCL_LL128_NTHREADS", where) if "NCCL_LL128_NTHREADS" in stated else None)
    p2p_read = tuple((kw, _lenient_int(stated[k][0])) for k, kw in STATED_P2P
                     if p2p and k in stated and _lenient_int(stated[k][0]) is not None)
    notes += _stated_notes(topo, stated, algo is not None or proto is not None, p2p_read)
    return Settings(a, p, nvls, tuple(notes), lo, hi, launch, p2p_read)


def _stated_notes(topo, stated: Mapping[str, Sequence], replaced: bool, p2p_read) -> list[str]:
    """The notes naming the variables a sweep's lines set that are priced and those that are not, the
    file's and ``--nccl-env``'s apart (:mod:`zerocalc.nccl.env_given`: a variable of neither list it
    gives is said unpriced too; ``NCCL_IB_HCA`` is read by the topology,
    :func:`zerocalc.topology.stated.with_stated_nics`). ``replaced``: ``--nccl-algo`` / ``--nccl-proto``
    given, whose note says so."""
    from zerocalc.nccl.env_given import GIVEN, where_set

    p2p_keys = {kw: k for k, kw in STATED_P2P}
    read = [k for k in (*STATED_MODELLED, *(p2p_keys[kw] for kw, _ in p2p_read)) if k in stated
            and not (k in ("NCCL_ALGO", "NCCL_PROTO") and replaced)]
    pcie_only = getattr(topo, "nvlink_gen", None) == 0
    unpriced = [k for k in (*STATED_UNPRICED, *(k for k, kw in STATED_P2P if kw not in dict(p2p_read)))
                if k in stated and not (pcie_only and k in ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL"))]
    known = {*STATED_MODELLED, *STATED_UNPRICED, *p2p_keys.values(), *STATED_TOPOLOGY}
    unpriced += sorted(k for k, v in stated.items() if v[1] == GIVEN and k not in known)
    lib = "RCCL" if getattr(topo, "gpu_arch", None) is not None else "NCCL"  # AMD GPUs: RCCL's model
    notes = []
    for given, who in ((False, "the file sets"), (True, "--nccl-env sets")):
        mine = [f"{k}={stated[k][0]}" + ("" if given else where_set(stated[k][1])) for k in read
                if (stated[k][1] == GIVEN) == given]
        if mine:
            notes.append(f"NCCL environment {who}, priced: {', '.join(mine)}")
    for given, who in ((False, "the file also sets"), (True, "--nccl-env also sets")):
        mine = [f"{k}={stated[k][0]}" for k in unpriced if (stated[k][1] == GIVEN) == given]
        if mine:
            notes.append(f"{who} {', '.join(mine)}, which {lib}'s cost model does not price")
    return notes


def _lenient_int(value) -> int | None:
    """A variable's whole number as NCCL reads it (``strtoll`` base 0: decimal, ``0x`` hex, ``0`` octal;
    :func:`zerocalc.nccl.env_given.nccl_int`), ``None`` for anything else (the variable is then said
    unpriced)."""
    from zerocalc.nccl.env_given import nccl_int

    return nccl_int(str(value))


def _stated_int(stated: Mapping[str, Sequence], key: str, where: str) -> int:
    """The whole number a run's line sets ``key`` to, read as NCCL reads it (:func:`_lenient_int`); a
    value NCCL would not read as one is a :class:`~zerocalc.errors.TraceFormatError` naming the line."""
    value, line = stated[key][0], stated[key][1]
    number = _lenient_int(value)
    if number is None:
        raise TraceFormatError(where, line, f"{key}={value}: NCCL reads a whole number here (strtoll base 0: "
                                            "4, 0x4, 04; within 64 bits)")
    return number


def _profile_notes(topo, env, tuner_given: bool) -> list[str]:
    """What a topology's vendor profile sets, and the tuner it loads that is not priced."""
    parts = [f"NCCL_ALGO={env.algo}" if env.algo else "", f"NCCL_PROTO={env.proto}" if env.proto else "",
             "NCCL_NVLS_ENABLE=0" if env.nvls_enable is False else "",
             f"NCCL_MIN_NCHANNELS={env.min_nchannels}" if env.min_nchannels is not None else "",
             f"NCCL_MAX_NCHANNELS={env.max_nchannels}" if env.max_nchannels is not None else ""]
    span = env.min_version if env.min_version == env.max_version else f"{env.min_version}-{env.max_version}"
    notes = [f"{topo.name}'s NCCL environment for NCCL {span}: "
             f"{' '.join(x for x in parts if x) or 'NCCL defaults'} ({env.source})"]
    if env.tuner and not tuner_given:
        notes.append(f"that environment also loads {env.tuner}, whose rules are not published: not priced "
                     "(--nccl-tuner gives a tuner's rules)")
    return notes


def channel_limits(topo, version: str) -> tuple[int | None, int | None]:
    """``(NCCL_MIN_NCHANNELS, NCCL_MAX_NCHANNELS)`` of ``topo``'s profile for NCCL ``version``
    (:func:`profile_for`; ``None``: unset). Each environment variable is its own: unlike the profile's
    ``NCCL_ALGO`` / ``NCCL_PROTO``, which the user's replace, these stand when the user gives
    ``--nccl-algo`` / ``--nccl-proto``."""
    env = profile_for(topo, version)
    return (None, None) if env is None else (env.min_nchannels, env.max_nchannels)
