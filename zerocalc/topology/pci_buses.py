"""Where a PCIe box's GPUs sit, read off the PCI bus numbers of a run's ``#  Rank`` lines.

nccl-tests prints each rank's GPU by its PCI id (``[0x1a]`` before 2.10, the bus alone; ``[0000:1a:00]``
after). Two facts of PCI bus numbering tell, from those numbers alone, something of the PCIe tree NCCL
builds (``src/graph/topo.cc``, :mod:`zerocalc.nccl.pcie`):

1. A PCIe switch's ports take the bus numbers right after its own: firmware and the OS number buses
   depth first, each bridge's secondary buses one contiguous range (PCI-to-PCI Bridge Architecture
   Specification 1.2, "Bus Number Registers"; Linux ``pci_scan_bridge``), so the GPUs of one switch sit
   on neighbouring buses: ``4e``, ``4f``, ``50``, ``51`` under one ``PCI[24.0]`` switch and ``ce`` to
   ``d1`` under another in NCCL's own topology dump of 8 GeForce RTX 4090 (NVIDIA/nccl-tests issue 307);
   ``b4``, ``b5`` for two RTX 2080 Ti that ``nvidia-smi topo -m`` shows ``PIX`` (the bundled AutoDL
   sweeps). GPUs at least :data:`APART` buses from one another are not under one switch: each has a
   root port of the CPU to itself, the common build of workstation and GPU-server boards without
   switches: four RTX 5090 at ``01``, ``21``, ``41``, ``61`` of an AMD EPYC Genoa host (NVIDIA/nccl-tests
   issue 287), eight RTX 4090 at ``16``, ``27``, ``38``, ``5a``, ``98``, ``a8``, ``b8``, ``d8``
   (NVIDIA/nccl issue 1530), and at ``01``, ``25``, ``41`` … ``e1`` (NVIDIA/nccl-tests issue 270).
2. A two-socket x86 server gives each socket half of the 256 buses of PCI segment 0, the second from
   :data:`SECOND_SOCKET_BUS` (NCCL's dump in NVIDIA/nccl-tests issue 307: ``4e``-``51`` under
   ``CPU/0-0``, ``ce``-``d1`` under ``CPU/0-1``; AMD EPYC 2P firmware likewise numbers socket 1 from
   ``0x80``). Where a run's GPUs each have a root port and take the two halves in rank order, half
   each, the two-socket preset's layout puts them so (a socket each for two GPUs); on one half alone,
   one socket; any other order keeps the preset's.

Bus 0 for every GPU (a VM's passthrough GPUs) is :func:`zerocalc.topology.stated.on_own_host_bridges`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from zerocalc.topology.machine import Topology

#: Buses two GPUs are at least apart when neither is under the other's switch (rule 1): a switch's GPUs
#: take neighbouring buses (four GPUs of one switch within 4, issue 307's dump).
APART = 0x10
#: The first bus of a two-socket server's second socket (rule 2).
SECOND_SOCKET_BUS = 0x80


def own_root_ports(buses: Sequence[int | None]) -> bool:
    """Whether these GPUs of one host (their PCI bus numbers, rank order) each sit on a root port of their
    own (rule 1): two or more, every bus read and none 0, each pair at least :data:`APART` apart."""
    if len(buses) < 2 or any(b is None or b == 0 for b in buses):
        return False
    nums = sorted(b for b in buses if b is not None)
    return all(b - a >= APART for a, b in zip(nums, nums[1:], strict=False))


def on_own_root_ports(topo: Topology, buses: Sequence[int]) -> tuple[Topology, str]:
    """``topo`` (a PCIe preset) with each of the run's GPUs on a root port of its own and, on a two-socket
    preset, the sockets the buses put them on (rule 2), and the words for it; ``topo`` unchanged where the
    buses do not say so (:func:`own_root_ports`) or the preset has NVLink."""
    if topo.nvlink_gen != 0 or not own_root_ports(buses):
        return topo, ""
    k = len(buses)
    listed = "/".join(f"{b:02x}" for b in buses)
    topo = replace(topo, gpus_per_pcie_switch=1)
    words = f"as their PCI buses ({listed}) are far apart: no PCIe switch shared"
    if (topo.cpu_sockets or 1) != 2:
        return topo, words
    second = [b >= SECOND_SOCKET_BUS for b in buses]
    if not any(second) or all(second):
        return replace(topo, cpu_sockets=1), words + ", on one socket (one half of the buses)"
    if k % 2 == 0 and second == [False] * (k // 2) + [True] * (k // 2):
        return (replace(topo, gpus_per_node=k),
                words + f", {k // 2} a socket (buses below and from {SECOND_SOCKET_BUS:#x})")
    return topo, words
