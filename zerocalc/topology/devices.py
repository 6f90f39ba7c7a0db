"""The preset an nccl-tests run's own ``# Rank`` lines describe: GPU model → preset, ranks per host → node.

nccl-tests prints one line per rank before its table (``src/common.cu``, "Using devices"): ``#  Rank  0
Group  0 Pid 6899 on HOST device 0 [0000:04:00] NVIDIA H100 80GB HBM3``, the last cells being the CUDA
device name (``cudaDeviceProp.name``, the name ``nvidia-smi`` prints). :func:`preset_for_devices` maps
that name to the preset whose node holds such GPUs, and the host names to the nodes: ranks per host
become the node's GPUs when they differ from the preset's 8.

Which names map where (the names as nvidia-smi and nccl-tests print them: ``NVIDIA A100-SXM4-40GB``
in NVIDIA/nccl-tests issue 119 and NVIDIA/nccl issue 583, ``NVIDIA A100-SXM4-80GB`` in nccl-tests issue
149, ``NVIDIA H100 80GB HBM3`` in the bundled ``all_reduce_perf-16xH100-2nodes.txt`` and nccl-tests
issues 294 and 309, ``NVIDIA H200`` in the public outputs of Azure's and OCI's H200 nodes):

* ``A100-SXM…`` (``NVIDIA A100-SXM4-40GB``, ``-80GB``; NVIDIA's drivers before 2021 print it without
  ``NVIDIA``): the SXM4 module of HGX/DGX A100 boards → ``dgx-a100``;
* ``A100…PCIe`` (``NVIDIA A100-PCIE-40GB``, ``NVIDIA A100 80GB PCIe``) → ``pcie-gen4`` (whose GPUs are
  A100 PCIe);
* ``H100 80GB HBM3`` (the SXM5 module; the PCIe card is ``NVIDIA H100 PCIe``, the NVL card ``NVIDIA H100
  NVL``) → ``dgx-h100``;
* ``H200`` alone (the SXM module; the PCIe card is ``NVIDIA H200 NVL``) → ``dgx-h200``;
* ``B200`` → ``dgx-b200``.

Every other name (H100 PCIe/NVL, H800, H20, GH200/GB200, V100, consumer cards) has no preset: the
caller is told to give ``--topology``. A file whose runs name no device, or several models, too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace

from zerocalc.errors import ConfigError
from zerocalc.topology.machine import Link, Topology
from zerocalc.topology.presets import PRESETS, TOPOLOGY_NAMES

#: (pattern of the CUDA device name, preset), first match wins (module docstring).
GPU_PRESETS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bA100-SXM", re.I), "dgx-a100"),
    (re.compile(r"\bA100\b.*\bPCIe\b|\bA100-PCIE", re.I), "pcie-gen4"),
    (re.compile(r"\bH100\b.*\bHBM3\b|\bH100[- ]SXM", re.I), "dgx-h100"),
    (re.compile(r"\bH200$", re.I), "dgx-h200"),
    (re.compile(r"\bB200$", re.I), "dgx-b200"),
)


def _refuse(why: str) -> ConfigError:
    return ConfigError(f"{why}; give --topology (one of {', '.join(TOPOLOGY_NAMES)}, or a TOML file)",
                       option="--topology")


def preset_for_gpu(name: str) -> str | None:
    """The preset whose node holds GPUs of this CUDA device name, or ``None``."""
    return next((preset for rx, preset in GPU_PRESETS if rx.search(name.strip())), None)


def preset_for_devices(gpus: Mapping[str, int], hosts: Mapping[str, int], *,
                       where: str) -> tuple[Topology, str]:
    """The preset the ``# Rank`` lines of a run describe, and how it was chosen (a sentence).

    ``gpus``: device name → ranks; ``hosts``: host name → ranks (as
    :func:`zerocalc.traces.nccl_tests.parse` lists them per run). With ranks per host other than the
    preset's GPUs per node, the node is taken to hold that many (the preset's NICs scaled with them:
    every multi-GPU preset has one NIC per GPU, or one per node). Raises :class:`ConfigError` naming
    ``--topology`` when the lines name no GPU, several models, one no preset describes, or hosts with
    different rank counts."""
    if not gpus:
        raise _refuse(f"{where} names no GPU (no '#  Rank … device …' lines) to choose a topology from")
    if len(gpus) > 1:
        raise _refuse(f"{where} names several GPU models ({', '.join(gpus)})")
    (gpu,) = gpus
    name = preset_for_gpu(gpu)
    if name is None:
        raise _refuse(f"{where}: no preset describes its GPUs ({gpu})")
    topo = PRESETS[name]
    per_host = set(hosts.values())
    if len(per_host) > 1:
        raise _refuse(f"{where}: its hosts run different numbers of ranks "
                      f"({', '.join(f'{h} {k}' for h, k in hosts.items())})")
    (k,) = per_host
    if k > topo.gpus_per_node:
        raise _refuse(f"{where}: {k} ranks per host, more than the {topo.gpus_per_node} GPUs of a "
                      f"{name} node")
    plural = "s" if len(hosts) != 1 else ""
    how = f"from the file's device lines: {gpu}, {k} per host, {len(hosts)} host{plural}"
    if k != topo.gpus_per_node and len(hosts) > 1:
        nics = topo.nics_per_node
        if nics is not None and nics == topo.gpus_per_node:
            nics = k
            inter = Link(topo.inter.alpha_s, topo.inter.bw_Bps * k / topo.gpus_per_node)
            topo = replace(topo, inter=inter)
        topo = replace(topo, gpus_per_node=k, nics_per_node=nics)
        how += f" (nodes of {k} GPUs and {nics} NICs)"
    return topo, how
