"""The modelled NCCL release a version maps to (:func:`release_for`), and the table of every modelled
release by name (:data:`RELEASES`; the tables in :mod:`zerocalc.nccl.release_tables`, their vocabulary
in :mod:`zerocalc.nccl.release`, both re-exported here).

Which table a version gets (:func:`release_for`), by the files the model reads (``tuning.cc``,
``search.cc``'s speed arrays and channel duplication, ``topo.h``'s NVLink bandwidth, ``device.h``'s
``MAXCHANNELS`` and NVLS arity, ``connect.cc``'s ``ncclTopoPostset``, ``enqueue.cc``'s algorithm
rules) at each tag:

- 2.5.x → 2.5 (v2.5.6 and v2.5.7: the same tables, ``search.cc`` and ``topo.h``), 2.6.x → 2.6 (one tag,
  v2.6.4), 2.7.0-2.7.3 → 2.7.3, 2.7.5 on → 2.7 (v2.7.5, v2.7.6 and v2.7.8 identical in ``tuning.cc``,
  ``search.cc``, ``topo.h`` and ``devcomm.h``): :mod:`zerocalc.nccl.release_tables_pre28`;
- 2.8.x → 2.9 (v2.8.3/v2.8.4 ``tuning.cc`` differs from v2.9.9's only in CollNet's LL/LL128 rows, which
  zerocalc does not price; ``search.cc``'s speed array, ``topo.h``'s NVLink bandwidths, ``devcomm.h``'s
  limits and ``getAlgoInfo``'s channel/thread loop are v2.9.9's). Three v2.8 differences outside the
  tables: its default launch mode for a process holding several ranks is GROUP, one multi-device launch
  (``src/init.cc``; priced, :func:`zerocalc.validate.host_launch.group_launch`); and, not modelled, its
  ``ncclTopoCheckP2p`` allows P2P through an Intel CPU newer than Broadwell (``PATH_PHB``; v2.9.9
  ``PATH_PXB``, ``src/graph/paths.cc``) at ``INTEL_P2P_OVERHEAD`` 12/9 (v2.9.9 6/5, ``topo.h``), which
  change only PCIe GPUs on different root ports of one Intel socket; 2.9.x its own (v2.9.6 to v2.9.9
  identical);
- 2.10.x, 2.11.x → 2.10 (v2.10.3 and v2.11.4: identical ``tuning.cc``, speeds and NVLink bandwidth);
- 2.12.x, 2.13.x → 2.12 (v2.12.7 to v2.13.4 identical);
- 2.14.x its own;
- 2.15.x and 2.16.0-2.16.4 → 2.15 (v2.15.1 to v2.16.5 share ``tuning.cc`` but for v2.15.1's LL128 rule,
  the same on Hopper; v2.16.2's ``search.cc`` is v2.15.5's); 2.16.5 on → 2.16 (sm90 speed arrays and
  the sm90 channel duplication rule of ``search.cc``);
- 2.17.x its own;
- 2.18.0-2.18.2 → 2.18.1; 2.18.3 on → 2.18 (v2.18.3, v2.18.5 and v2.18.6: identical ``tuning.cc``, speed
  arrays, ``topo.h``, ``devcomm.h`` limits and ``ncclTopoPostset``; they differ in ``search.cc``'s NIC
  order only). v2.18.1's p2p channel halving on several nodes (``enqueue.cc``, removed in v2.18.3) is not
  modelled: its p2p is priced as 2.19's;
- 2.19.x its own (v2.19.3 and v2.19.4: identical in every file listed; v2.19.1 lacks 22 GB/s in the sm90
  inter speeds, which moves only a network path between 22 and 24 GB/s, and duplicates channels by the
  same rule, inline);
- 2.20.x → 2.20 (v2.20.3 and v2.20.5: identical but for a blank line in ``search.cc``);
- 2.21.x its own;
- 2.22.x → 2.22, 2.23.x → 2.23, 2.24.x → 2.24 (one tag each in the NVIDIA/nccl repository);
- 2.25.x → 2.26, the same tables: v2.25.1 against v2.26.2 has identical ``tuning.cc`` tables, speed arrays,
  ``topo.h``, ``device.h`` (MAXCHANNELS 64, NVLS arity 32), NVLS channels and ``enqueue.cc`` algorithm
  rules; its ``tuning.cc`` lacks only v2.26.2's sm60 test for PAT (which the model applies to both) and
  reads the tree pattern of the graph instead of ``maxTreePattern`` (the model assumes a balanced tree),
  and its ``ncclTopoPostset`` splits cross-NIC rings on another flag, which the model does not read;
- 2.26.x its own;
- 2.27.0-2.27.3 → 2.27.3, 2.27.4-2.27.6 → 2.27.5, 2.27.7 on → 2.27 (v2.27.7). The three tags share
  ``tuning.cc``'s tables and formulas (v2.27.3's LL128 path rule reads the C2C path type, which zerocalc
  does not model), ``connect.cc``, ``device.h`` and the algorithm rules; they differ only on Blackwell:
  ``search.cc``'s sm100 inter speeds (v2.27.3: 47.9, 45, 42, …; v2.27.5: 48, 45.1, 42, …; v2.27.7: 96,
  48, 45.1, …) and v2.27.3's 40.0 GB/s per sm100 NVLink (``topo.h``; 40.1 from v2.27.5);
- 2.28.0-2.28.6 → 2.28.3, 2.28.7-2.28.8 → 2.28.7, 2.28.9 on → 2.28 (the tags differ in NVLS Tree's network
  hop and Blackwell caps, each table says which);
- 2.29.0-2.29.6 → 2.29.3 (v2.29.2 and v2.29.3: identical ``tuning.cc``, ``search.cc``, ``topo.h``,
  ``device.h``, ``enqueue.cc``, ``connect.cc``); 2.29.7 on → 2.29;
- 2.30.x and any later 2.y → 2.30.

A version of a line with a table of its own gets that table and no note; any other gets a note naming
the table (release and tag) and why. Versions before 2.5 are refused
(:class:`~zerocalc.errors.ConfigError` naming 2.5 as the oldest modelled): NCCL 2.4 has no cost model
(no ``tuning.cc``; ``enqueue.cc`` takes Tree for an all-reduce up to ``NCCL_TREE_THRESHOLD`` or
``init.cc``'s rough ``ncclTreeThreshold`` and LL below a thread-count threshold), so any time given to it
would be another release's guess. Text that is not a 2.x version (3.0, words) is refused too.
"""

from __future__ import annotations

import re

from zerocalc.errors import ConfigError
from zerocalc.nccl.release import (  # noqa: F401  (re-exported)
    ALGORITHMS,
    AMPERE,
    BLACKWELL,
    HOPPER,
    NET,
    NVLINK,
    PCI,
    PROTOCOLS,
    VOLTA,
    Algorithm,
    Collective,
    Protocol,
    Release,
    Row3,
)
from zerocalc.nccl.release_tables import (  # noqa: F401  (re-exported)
    V2_9,
    V2_10,
    V2_12,
    V2_14,
    V2_15,
    V2_16,
    V2_17,
    V2_18,
    V2_18_1,
    V2_19,
    V2_20,
    V2_21,
    V2_22,
    V2_23,
    V2_24,
    V2_26,
    V2_27,
    V2_27_3,
    V2_27_5,
    V2_28,
    V2_28_3,
    V2_28_7,
    V2_29,
    V2_29_3,
    V2_30,
)
from zerocalc.nccl.release_tables_pre28 import V2_5, V2_6, V2_7, V2_7_3  # noqa: F401  (re-exported)

RELEASES: dict[str, Release] = {r.name: r for r in (V2_5, V2_6, V2_7_3, V2_7, V2_9, V2_10, V2_12, V2_14,
                                                     V2_15, V2_16, V2_17, V2_18_1, V2_18, V2_19, V2_20, V2_21,
                                                     V2_22, V2_23, V2_24, V2_26, V2_27_3, V2_27_5, V2_27,
                                                     V2_28_3, V2_28_7, V2_28, V2_29_3, V2_29, V2_30)}
OLDEST = V2_5
OLDEST_MINOR = 5  # 2.5.x: the first release with a cost model (module docstring)
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

    See the module docstring for the rule; versions before 2.8 are refused. The note names the table a
    version gets and why.
    """
    major, minor, patch = parse_version(version)
    if major != 2 or minor < OLDEST_MINOR:
        why = ("; NCCL 2.4 and earlier have no cost model (no tuning.cc: Tree up to NCCL_TREE_THRESHOLD, LL "
               "below a thread-count threshold) for zerocalc to transcribe") if major == 2 else (
            f"; NCCL {major} is no release of NCCL 2, whose src/graph/tuning.cc zerocalc transcribes")
        within = "" if major == 2 else "NCCL 2, "  # 3.0 is not 'later' than 2.5 in what is modelled
        raise ConfigError(f"NCCL {major}.{minor}.{patch} is not modelled (modelled: {within}"
                          f"2.{OLDEST_MINOR} and later, tables of {', '.join(RELEASES)}; --nccl-version "
                          f"prices a file as one of them){why}", option="--nccl-version")
    release = _nearest(minor, patch)
    line = f"{major}.{minor}"
    if release.name == line or release.name.startswith(line + "."):
        return release, None  # the line's own table (one per patch range where the patches differ)
    if minor == 8:
        why = "the same tables but for CollNet's LL/LL128 rows, which are not priced"
    elif release.era < 19 or minor in _SAME_AS:
        why = "the same tables"
    else:
        why = "the nearest modelled release"
    return release, (f"NCCL {major}.{minor}.{patch}: priced with the tables of NCCL {release.name} "
                     f"({release.tag}), {why}")


#: lines with no table of their own whose model inputs equal their table's (module docstring)
_SAME_AS: dict[int, Release] = {25: V2_26}


def _nearest(minor: int, patch: int) -> Release:
    """The table of a 2.``minor``.``patch`` (module docstring)."""
    if minor <= 7:
        return V2_5 if minor == 5 else V2_6 if minor == 6 else V2_7_3 if patch <= 3 else V2_7
    if minor <= 17:
        if minor <= 13:
            return V2_9 if minor <= 9 else V2_10 if minor <= 11 else V2_12
        if minor == 15 or (minor == 16 and patch < 5):
            return V2_15
        return V2_14 if minor == 14 else V2_16 if minor == 16 else V2_17
    if minor in _SAME_AS:
        return _SAME_AS[minor]
    if minor == 18:
        return V2_18 if patch >= 3 else V2_18_1
    if minor == 27:
        return V2_27 if patch >= 7 else V2_27_5 if patch >= 4 else V2_27_3
    if minor == 28:
        return V2_28 if patch >= 9 else V2_28_7 if patch >= 7 else V2_28_3
    if minor == 29:
        return V2_29 if patch >= 7 else V2_29_3
    if minor >= 30:
        return V2_30
    own = RELEASES.get(f"2.{minor}")
    if own is not None:
        return own
    raise AssertionError(minor)  # pragma: no cover - every line from 2.18 to 2.29 is listed above
