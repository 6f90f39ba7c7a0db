"""``NCCL_ALGO`` / ``NCCL_PROTO``: which algorithms and protocols the user lets NCCL choose.

The grammar is ``parseList`` of ``src/graph/tuning.cc`` (v2.30.7; v2.19 reads the part without
prefixes): a comma-separated list of names (case-insensitive; ``^`` first = all but these),
optionally per collective after a prefix, entries separated by ``;``, only the first without a
prefix: ``NCCL_ALGO="ring,collnetdirect;allreduce:tree,collnetdirect;broadcast:ring"``,
``NCCL_PROTO="^LL128;allreduce:LL128"``. Names are NCCL's (``init.cc``: ``ncclAlgoStr``,
``ncclProtoStr``, ``ncclFuncStr``). A bad list is a :class:`ConfigError` naming the variable.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from zerocalc.errors import ConfigError
from zerocalc.nccl.tables import Algorithm, Collective, Protocol

FUNC_NAMES = {"broadcast": Collective.BROADCAST, "reduce": Collective.REDUCE,
              "allgather": Collective.ALL_GATHER,
              "reducescatter": Collective.REDUCE_SCATTER, "allreduce": Collective.ALL_REDUCE}


def parse_list(text: str, kind: type[StrEnum], option: str) -> dict[Collective, set]:
    """The enabled members of ``kind`` (:class:`Algorithm` or :class:`Protocol`) per collective."""
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


def restrictions(algo: str | None, proto: str | None) -> tuple[dict | None, dict | None]:
    """``(algo_enable, proto_enable)`` for :func:`zerocalc.nccl.model.tune` (``None``: not set)."""
    return (parse_list(algo, Algorithm, "NCCL_ALGO") if algo else None,
            parse_list(proto, Protocol, "NCCL_PROTO") if proto else None)


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
    restrictions (``None``: NCCL's defaults), ``NCCL_NVLS_ENABLE`` and notes saying where they came from."""

    algo_enable: dict | None
    proto_enable: dict | None
    nvls_enable: bool = True
    notes: tuple[str, ...] = ()


def settings(topo, version: str, algo: str | None, proto: str | None, *,
             tuner_given: bool = False) -> Settings:
    """The environment NCCL runs with at ``version`` on ``topo``: the user's ``NCCL_ALGO`` /
    ``NCCL_PROTO`` when given, else the topology's vendor profile for that version
    (:func:`profile_for`), else NCCL's defaults. A profile naming a tuner plugin the user did not give
    (``--nccl-tuner``) is said in a note: its choices are not priced."""
    env = profile_for(topo, version)
    if env is None or algo is not None or proto is not None:
        a, p = restrictions(algo, proto)
        return Settings(a, p, True, ())
    a, p = restrictions(env.algo, env.proto)
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
    return Settings(a, p, env.nvls_enable is not False, tuple(notes))


def channel_limits(topo, version: str) -> tuple[int | None, int | None]:
    """``(NCCL_MIN_NCHANNELS, NCCL_MAX_NCHANNELS)`` of ``topo``'s profile for NCCL ``version``
    (:func:`profile_for`; ``None``: unset). Each environment variable is its own: unlike the profile's
    ``NCCL_ALGO`` / ``NCCL_PROTO``, which the user's replace, these stand when the user gives
    ``--nccl-algo`` / ``--nccl-proto``."""
    env = profile_for(topo, version)
    return (None, None) if env is None else (env.min_nchannels, env.max_nchannels)
