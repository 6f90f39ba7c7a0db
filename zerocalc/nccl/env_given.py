"""``--nccl-env NCCL_X=V``: the NCCL environment a user states for a run whose output does not show it.

A sweep is priced under the variables its own lines set (:mod:`zerocalc.traces.launch_env`), but most
pasted nccl-tests output holds no launch line and no NCCL INFO line, while the job script that ran it set
them. Each ``--nccl-env`` sets one variable as if the run's own lines had set it, stronger than them (the
user corrects the file): it is then priced, or said unpriced, as those are (:func:`zerocalc.nccl.env.
settings`, :func:`zerocalc.topology.stated.with_stated_p2p` and the others reading a sweep's ``nccl_env``).
What NCCL's INFO lines state it ran with (its channels, its ``threadThresholds``) still stands.

- Repeat the option for several variables; a value is everything after the first ``=`` and is never split
  (``NCCL_ALGO`` lists hold commas: ``--nccl-env NCCL_ALGO=Ring,Tree``). Of one name given twice the last
  stands, as a shell's last assignment does.
- An empty value (``NCCL_X=``) unsets a variable the file sets: NCCL reads an empty variable as unset
  (``ncclLoadParam``, ``src/misc/param.cc`` v2.30.7: only ``strlen(str) > 0`` is read; an empty
  ``NCCL_ALGO`` / ``NCCL_PROTO`` list enables everything, ``parseList``, ``src/graph/tuning.cc``).
- The name is NCCL's: ``NCCL_`` and upper-case letters, digits or ``_`` (NCCL reads no other).
- A modelled variable's value must be one NCCL takes: the whole numbers NCCL reads with ``ncclLoadParam``
  (``strtoll(str, nullptr, 0)``: decimal, ``0x`` hex, ``0`` octal, within 64 bits, past which NCCL says
  "Invalid value" and keeps its default; text after the number, which NCCL drops silently, is refused as
  not the number the user meant), ``NCCL_ALGO`` / ``NCCL_PROTO`` lists as ``parseList`` reads them, and up
  to six decimal whole numbers for ``NCCL_THREAD_THRESHOLDS`` (``sscanf("%ld %ld %ld %ld %ld %ld")``).
- ``--nccl-algo`` / ``--nccl-proto`` (which also read the shell's ``NCCL_ALGO`` / ``NCCL_PROTO``) and an
  ``--nccl-env`` of the same variable are refused together: one run has one value.

Anything else is a :class:`ConfigError` naming ``--nccl-env``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from zerocalc.errors import ConfigError

#: the "line" of a variable ``--nccl-env`` sets, in a sweep's ``nccl_env`` (variable → ``[value, line]``)
GIVEN = "--nccl-env"
OPTION = "--nccl-env"

_NAME = re.compile(r"NCCL_[A-Z0-9_]*[A-Z0-9]")
#: ``strtoll(str, nullptr, 0)`` read in full: leading blanks, a sign, then hex, octal or decimal digits
_STRTOLL = re.compile(r"\s*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)\s*")
_INT64 = (-(2 ** 63), 2 ** 63 - 1)


def nccl_int(text: str) -> int | None:
    """The whole number NCCL's ``ncclLoadParam`` reads from ``text`` when it is written in full as one
    (``None`` otherwise, or past 64 bits, where NCCL keeps its default)."""
    m = _STRTOLL.fullmatch(text)
    if m is None:
        return None
    digits = m[2]
    value = int(digits, 16) if digits[:2].lower() == "0x" else int(digits, 8) if digits[0] == "0" else \
        int(digits)
    value = -value if m[1] == "-" else value
    return value if _INT64[0] <= value <= _INT64[1] else None


def _integer_variables() -> set[str]:
    from zerocalc.nccl.env import STATED_MODELLED, STATED_P2P

    return {k for k in STATED_MODELLED if k not in ("NCCL_ALGO", "NCCL_PROTO", "NCCL_THREAD_THRESHOLDS")} \
        | {k for k, _ in STATED_P2P}


def parse_given(entries: Sequence[str] | None, nccl_algo: str | None = None,
                nccl_proto: str | None = None) -> dict[str, str]:
    """``--nccl-env`` entries as variable → value (``''``: unset), checked as the module docstring says;
    ``nccl_algo`` / ``nccl_proto``: ``--nccl-algo`` / ``--nccl-proto``, refused beside the same variable."""
    out: dict[str, str] = {}
    integers = _integer_variables()
    for entry in entries or ():
        name, sep, value = str(entry).partition("=")
        name = name.strip()
        if not sep:
            raise ConfigError(f"{entry!r}: give NCCL_NAME=VALUE", option=OPTION)
        if not name:
            raise ConfigError(f"{entry!r}: empty variable name (give NCCL_NAME=VALUE)", option=OPTION)
        if not _NAME.fullmatch(name):
            raise ConfigError(f"{entry!r}: {name!r} is not an NCCL variable (NCCL reads NCCL_ and upper-case "
                              "letters, digits or _)", option=OPTION)
        out[name] = _checked(name, value, integers)
    for name, flag, given in (("NCCL_ALGO", "--nccl-algo", nccl_algo),
                              ("NCCL_PROTO", "--nccl-proto", nccl_proto)):
        if name in out and given is not None:
            raise ConfigError(f"{name} given twice: {flag} {given} (or the shell's {name}) and --nccl-env "
                              f"{name}={out[name]}; give one", option=OPTION)
    return out


def _checked(name: str, value: str, integers: set[str]) -> str:
    """``value`` as the sweep's lines would carry it: a whole number written in decimal (NCCL's reading of
    it), a list checked by NCCL's grammar, anything else as given."""
    from zerocalc.nccl.env import restrictions

    if value == "":
        return value
    if name in integers:
        v = nccl_int(value)
        if v is None:
            raise ConfigError(f"{name}={value}: NCCL reads a whole number here (strtoll base 0: 4, 0x4, 04; "
                              "within 64 bits)", option=OPTION)
        return str(v)
    if name in ("NCCL_ALGO", "NCCL_PROTO"):
        try:
            restrictions(value if name == "NCCL_ALGO" else None, value if name == "NCCL_PROTO" else None)
        except ConfigError as exc:
            raise ConfigError(f"{name}={value}: {exc.message}", option=OPTION) from None
    if name == "NCCL_THREAD_THRESHOLDS":
        words = value.split()
        if not 1 <= len(words) <= 6 or not all(re.fullmatch(r"[+-]?\d+", w) for w in words):
            raise ConfigError(f"{name}={value}: NCCL reads up to six decimal whole numbers here (sscanf "
                              "\"%ld %ld %ld %ld %ld %ld\": Tree then Ring, LL/LL128/Simple)", option=OPTION)
    return value


def with_given(stated: Mapping[str, Sequence] | None, given: Mapping[str, str]) -> tuple[dict, list[str]]:
    """A sweep's ``nccl_env`` (variable → ``[value, line]``) with ``given`` (:func:`parse_given`) set over
    it, each at line :data:`GIVEN`, an empty one removed; and the notes saying which of the file's values
    were replaced or unset."""
    env = {k: list(v) for k, v in (stated or {}).items()}
    notes: list[str] = []
    for name, value in given.items():
        old = env.get(name)
        was = f"the file's {name}={old[0]}{where_set(old[1])}" if old is not None else ""
        if value == "":
            env.pop(name, None)
            notes.append(f"{was} unset by --nccl-env {name}=" if old is not None else
                         f"--nccl-env {name}= unsets nothing: the file does not set {name}")
            continue
        if old is not None and str(old[0]) != value:
            notes.append(f"{was} replaced by --nccl-env {name}={value}")
        env[name] = [value, GIVEN]
    return env, notes


def where_set(line) -> str:
    """`` (line 12)``, `` (--nccl-env)``, or ``''`` (a report's own environment names no line): where a
    sweep's ``nccl_env`` entry was set, for a note."""
    if line is None:
        return ""
    return f" ({line})" if line == GIVEN else f" (line {line})"


def on_topology(topo, given: Mapping[str, str] | None) -> tuple[object, dict, list[str]]:
    """``--nccl-env``'s variables (:func:`parse_given`) for a command that prices the schemes on a topology it
    is given (``table``, ``report``), as ``check --topology`` prices a sweep under them: the variables as a
    sweep's ``nccl_env`` (variable → ``[value, line]``, line :data:`GIVEN`; an empty one unsets nothing, no
    file setting any here), ``topo`` with what its P2P and GDR variables change
    (:func:`zerocalc.topology.stated.with_stated_p2p`, :func:`~zerocalc.topology.stated.with_stated_gdr`),
    and the notes saying so; ``NCCL_IB_HCA`` leaves the given topology's NICs as they are (``check
    --topology`` reads it only on a preset the file's lines picked), which a note says."""
    from zerocalc.topology.stated import with_stated_gdr, with_stated_p2p

    stated = {name: [value, GIVEN] for name, value in (given or {}).items() if value != ""}
    notes = [f"--nccl-env {name}= unsets {name}, which nothing here sets"
             for name, value in (given or {}).items() if value == ""]
    if not stated:
        return topo, stated, notes
    topo, p2p_how = with_stated_p2p(topo, stated)
    topo, gdr_how = with_stated_gdr(topo, stated)
    notes += [how for how in (p2p_how, gdr_how) if how]
    if "NCCL_IB_HCA" in stated:
        notes.append(f"--nccl-env NCCL_IB_HCA={stated['NCCL_IB_HCA'][0]}: not priced, topology {topo.name}'s "
                     f"NICs stand (as check --topology prices them)")
    return topo, stated, notes
