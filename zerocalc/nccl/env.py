"""``NCCL_ALGO`` / ``NCCL_PROTO``: which algorithms and protocols the user lets NCCL choose.

The grammar is ``parseList`` of ``src/graph/tuning.cc`` (v2.30.7; v2.19 reads the part without
prefixes): a comma-separated list of names (case-insensitive; ``^`` first = all but these),
optionally per collective after a prefix, entries separated by ``;``, only the first without a
prefix: ``NCCL_ALGO="ring,collnetdirect;allreduce:tree,collnetdirect;broadcast:ring"``,
``NCCL_PROTO="^LL128;allreduce:LL128"``. Names are NCCL's (``init.cc``: ``ncclAlgoStr``,
``ncclProtoStr``, ``ncclFuncStr``). A bad list is a :class:`ConfigError` naming the variable.
"""

from __future__ import annotations

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
