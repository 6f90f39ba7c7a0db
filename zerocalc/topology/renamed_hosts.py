"""Ranks a run's device lines put on one GPU of one host, where the run's NCCL cannot have run them so:
hosts whose names the file replaced (or containers each with a host identity of its own).

nccl-tests prints each rank's host and GPU bus id (``#  Rank  8 … on xxxxxx device  0 [0000:19:00] …``).
NCCL up to 2.29 refuses a communicator with two ranks on one GPU of one host: ``initTransportsRank``
(``src/init.cc``, v2.9.9 to v2.29.7) compares every rank's ``hostHash`` and ``busId`` and fails with
"Duplicate GPU detected : rank %d and rank %d both on CUDA device %lx" (``ncclInvalidUsage``); 2.30
allows it under ``NCCL_MULTI_RANK_GPU_ENABLE=1``. A rank's host is its ``hostHash``: the host name
and boot id, or ``NCCL_HOSTID`` where set (``getHostHash``, ``src/misc/utils.cc``, v2.29.7). So a file
that states an NCCL below 2.30 and ran, yet lists two ranks on one host name and bus id, ran them on
hosts NCCL told apart: hosts whose names the file replaced (posts often mask them with one placeholder),
or processes given hosts of their own by ``NCCL_HOSTID``; NCCL then joins them by its network, as it does
hosts. :func:`hosts_apart` reads such a run as that many hosts, each with the GPUs the name lists once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The first NCCL release that runs several ranks of a communicator on one GPU (``src/init.cc`` v2.30.3:
#: "Multiple Ranks are using the same GPU/Partition. Set NCCL_MULTI_RANK_GPU_ENABLE=1 …"); every earlier
#: release refuses it ("Duplicate GPU detected").
MULTI_RANK_GPU_NCCL = (2, 30)


def _before_multi_rank(version: str | None) -> bool:
    """Whether ``version`` (an NCCL version the file states, ``2.26.2``) is older than
    :data:`MULTI_RANK_GPU_NCCL`; ``False`` when unknown or unreadable."""
    try:
        major, minor = (int(x) for x in str(version or "").split(".")[:2])
    except ValueError:
        return False
    return (major, minor) < MULTI_RANK_GPU_NCCL


def hosts_apart(run: Mapping[str, Any], stated_version: str | None) -> tuple[dict, str] | None:
    """``run`` (:func:`zerocalc.traces.nccl_tests.parse`'s run) with the hosts its ranks must have been on,
    and a sentence saying so; ``None`` where it lists no rank sharing a GPU, its NCCL is unstated or
    runs several ranks on one GPU (2.30 on), it names AMD GPUs (RCCL), or a host's ranks do not repeat its
    GPUs evenly (each bus id ``m`` times: ``m`` hosts of those GPUs)."""
    shared = run.get("shared_devices") or ()
    if not shared or not _before_multi_rank(stated_version):
        return None
    if any("AMD" in g for g in run.get("gpus") or {}):
        return None
    hosts, bus_ids = run.get("hosts") or {}, run.get("bus_ids") or {}
    split_hosts: dict[str, int] = {}
    split_buses: dict[str, list[str]] = {}
    for host, count in hosts.items():
        buses = bus_ids.get(host) or []
        distinct = list(dict.fromkeys(buses))
        if len(buses) != count or not distinct or any(buses.count(b) != len(buses) // len(distinct)
                                                      for b in distinct):
            return None
        m = len(buses) // len(distinct)
        for i in range(m):
            name = host if m == 1 else f"{host} ({i + 1} of {m})"
            split_hosts[name], split_buses[name] = len(distinct), distinct
    ranks = ", ".join(map(str, shared[0][2]))
    how = (f"ranks {ranks} share one host name and GPU ({shared[0][0]}, {shared[0][1]}), which NCCL "
           f"{stated_version} refuses in one communicator (src/init.cc, 'Duplicate GPU detected') unless "
           "it told their hosts apart (their names replaced in the file, or NCCL_HOSTID): read as "
           f"{len(split_hosts)} hosts of {' or '.join(str(v) for v in sorted(set(split_hosts.values())))} "
           f"GPU{'s' * (max(split_hosts.values()) > 1)}")
    return {**run, "hosts": split_hosts, "bus_ids": split_buses, "shared_devices": []}, how
