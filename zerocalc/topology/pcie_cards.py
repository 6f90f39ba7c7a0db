"""PCIe GPU cards: which CUDA device names are PCIe cards, their PCIe generation and compute capability,
which come with NVLink bridges or without peer-to-peer, and the PCIe box preset a run of them is priced on
(:func:`pcie_box`). :mod:`zerocalc.topology.devices` maps a run's device lines to these when no NVLink
node's GPU matches.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from zerocalc.nccl.net_socket import VM_SOCKET_HOP_US
from zerocalc.topology.machine import Topology
from zerocalc.topology.pci_buses import on_own_root_ports
from zerocalc.topology.presets import PRESETS
from zerocalc.topology.stated import SOCKET_NIC_GBPS, on_own_host_bridges, over_sockets


@dataclass(frozen=True)
class PcieCard:
    """A PCIe GPU: its PCIe generation and CUDA compute capability × 10."""

    pattern: re.Pattern[str]
    pcie_gen: int
    compute_capability: int


#: PCIe cards (NVIDIA's product pages for the PCIe generation of each card; NVIDIA's CUDA GPUs page for
#: compute capability): the H100 PCIe / NVL, H200 NVL and H800 PCIe (PCIe Gen5 x16, 9.0), GeForce RTX 50
#: and RTX PRO Blackwell (Gen5 x16, 12.0), GeForce RTX 40 / RTX 6000 Ada / L4 / L40 / L40S (Gen4 x16, 8.9),
#: GeForce RTX 30 / RTX A-series / A10 / A10G (AWS g5) / A40 (Gen4 x16, 8.6), A100 / A800 PCIe and A30
#: (Gen4 x16, 8.0); the L20 (Gen4 x16, 8.9) and the A2 / A16 (Gen4, 8.6) of the same families. PCIe Gen3
#: x16, the ``pcie-gen3`` box: V100 / V100S PCIe, TITAN V and Quadro GV100 (7.0); T4, GeForce RTX 20 / GTX
#: 16, TITAN RTX, Quadro RTX and the T-series workstation cards (7.5); the Pascal cards, P100 PCIe and
#: Quadro GP100 (6.0), P40 / P4, Quadro P-series, GeForce GTX 10 and TITAN X / Xp (6.1). Names as
#: nvidia-smi prints them (``Tesla V100S-PCIE-32GB``, ``Tesla P100-PCIE-16GB``, ``NVIDIA RTX 4000 SFF Ada
#: Generation``); an NVIDIA name matching none is refused, naming ``--topology``. The NVL cards' NVLink
#: bridges: :data:`NVL_BRIDGES`.
#: A GeForce RTX number (``RTX 4090``), not the Quadro RTX 4000 / 5000 (Turing, 7.5, Gen3) nor the RTX 4000 /
#: 5000 Ada Generation (8.9, Gen4) that read alike
_GEFORCE = r"(?<!Quadro )\bRTX "
#: The RTX 6000D (``NVIDIA RTX 6000D``; first announced as RTX PRO 6000D): the China-market derivative of the
#: RTX PRO 6000 Blackwell (GB202 with 156 of its SMs, 84 GB of GDDR7 on a 448-bit bus; its server card
#: carries the RTX PRO 6000 Blackwell Server Edition's passive cooler: Geekbench listing and board teardown
#: as reported by Tom's Hardware and weeklypost.kr article 10587, Nov 2025), priced as that card: Gen5 x16,
#: compute capability 12.0
_RTX_6000D = r"\bRTX (?:PRO )?6000D\b"
PCIE_CARDS: tuple[PcieCard, ...] = (
    PcieCard(re.compile(r"\bH(?:[128]00|20)\b.*\b(?:PCIe|NVL)\b", re.I), 5, 90),
    PcieCard(re.compile(rf"{_GEFORCE}50\d0\b(?!(?: SFF)? Ada)|\bRTX PRO \d+ Blackwell\b|{_RTX_6000D}", re.I),
             5, 120),
    PcieCard(re.compile(rf"{_GEFORCE}40\d0\b|\bRTX \d+(?: SFF)? Ada\b|\bL4\b|\bL(?:20|40S?)\b", re.I), 4, 89),
    PcieCard(re.compile(rf"{_GEFORCE}30\d0\b|\bRTX A\d+\b|\bA(?:2|10G?|16|40)\b", re.I), 4, 86),
    PcieCard(re.compile(r"\bA[18]00\b.*\bPCIe\b|\bA[18]00-PCIE|\bA30\b", re.I), 4, 80),
    PcieCard(re.compile(r"\bV100S?-PCIE|\bTITAN V\b|\bQuadro GV100\b", re.I), 3, 70),
    PcieCard(re.compile(r"\bT4\b|\bRTX 20\d0\b|\bGTX 16\d0\b|\bTITAN RTX\b|\bQuadro RTX \d+\b"
                        r"|\bT(?:400|600|1000)\b", re.I), 3, 75),
    PcieCard(re.compile(r"\bP100-PCIE|\bQuadro GP100\b", re.I), 3, 60),
    PcieCard(re.compile(r"\bTesla P(?:4|40)\b|\bQuadro P\d+\b|\bGTX 10\d0\b|\bTITAN Xp?\b", re.I), 3, 61),
)
#: The PCIe box preset of each PCIe generation.
PCIE_PRESET = {3: "pcie-gen3", 4: "pcie-gen4", 5: "pcie-gen5"}
#: PCIe cards sold with NVLink bridges, and the most GPUs one bridge set joins: the H100 NVL in pairs (three
#: bridges, 600 GB/s bidirectional between the two; NVIDIA H100 NVL product brief PB-11773-001), the H200
#: NVL in 2- or 4-way groups (900 GB/s per GPU; NVIDIA H200 NVL product brief). A run of more GPUs a host
#: than a group holds spans several groups: each of NCCL's rings then crosses PCIe between them, and the
#: slowest link sets a ring's speed (search.cc: a channel runs at one speed over every hop), so it is priced
#: on the PCIe box (every hop PCIe: the crossings' switches and CPU links carry more than the bridged run
#: sends through them, so the price is an upper bound on its time). A run that fits in one group may sit on
#: one bridge, or across PCIe: the file does not tell which GPUs a bridge joins (``nvidia-smi topo -m``
#: does, not nccl-tests), nor the H200 NVL's 2- or 4-way build; and what a bridge carries is not pinned by a
#: public sweep (a bridged H100 PCIe pair moves 116 GB/s, NVIDIA/nccl issue 1161, about half of NCCL's
#: 12 × 20.6 GB/s): such a run is refused, naming ``--topology``.
NVL_BRIDGES: tuple[tuple[re.Pattern[str], int], ...] = (
    (re.compile(r"\bH100 NVL\b", re.I), 2),
    (re.compile(r"\bH200 NVL\b", re.I), 4),
)
#: Cards whose driver refuses PCIe peer-to-peer: GeForce and TITAN (``nvidia-smi topo -p2p`` prints
#: ``NS``, "not supported", for two RTX 2080 Ti in the bundled AutoDL sweeps' page; NCCL connects
#: RTX 4090s ``via SHM/direct/direct``, tinygrad/open-gpu-kernel-modules issue 45, whose patched
#: driver exists to enable it). NCCL then moves their data through host memory (:mod:`zerocalc.nccl.pcie`).
NO_P2P_CARDS = re.compile(r"\bGeForce\b|\bTITAN\b", re.I)


def pcie_card(name: str) -> PcieCard | None:
    """The PCIe card this CUDA device name is, or ``None``."""
    return next((c for c in PCIE_CARDS if c.pattern.search(name.strip())), None)


def pcie_layout_words(topo: Topology) -> str:
    """How a PCIe preset's GPUs sit, in words (the first line of ``check`` says what was assumed)."""
    per = topo.gpus_per_pcie_switch or 1
    where = "each GPU on a host bridge of its own" if per == 1 else f"{per} GPUs per PCIe switch"
    n = topo.cpu_sockets or 1
    return (f"{n} {topo.cpu_vendor or ''} socket{'s' if n != 1 else ''}, {where}, the run's GPUs the node's "
            "first").replace("  ", " ")


def pcie_box(gpu: str, card: PcieCard, n_hosts: int, net: str | None, *, vm: bool = False,
             own_roots: bool = False, buses: Sequence[int] = ()) -> tuple[Topology, str]:
    """The PCIe box of ``card``'s generation with these GPUs (``gpu``: their name), and the words the first
    line of ``check`` adds: the card's facts and the layout assumed. ``vm``: the GPUs sit in VMs;
    ``own_roots`` / ``buses``: as :func:`zerocalc.topology.devices.preset_for_devices` reads them (each GPU
    on PCI bus 0, or a host's GPU bus numbers in rank order); ``net``: ``"socket"`` across hosts puts the
    hosts on NCCL's socket transport (:func:`zerocalc.topology.stated.over_sockets`)."""
    topo = PRESETS[PCIE_PRESET[card.pcie_gen]]
    p2p = not NO_P2P_CARDS.search(gpu)
    topo = replace(topo, gpu=gpu, compute_capability=card.compute_capability, gpu_p2p=p2p)
    no_p2p = "" if p2p else ", no PCIe peer-to-peer between GeForce cards (SHM through host memory)"
    if own_roots:
        topo, roots = on_own_host_bridges(topo)
        no_p2p += f", {roots}" if roots else ""
    elif buses:
        topo, ports = on_own_root_ports(topo, buses)
        no_p2p += f", {ports}" if ports else ""
    sockets = ""
    if n_hosts > 1 and net == "socket":
        topo = over_sockets(topo, vm=vm)
        sockets = (f"; across hosts NCCL's socket transport, through host memory, on one NIC of "
                   f"{SOCKET_NIC_GBPS:g} Gb/s a node"
                   + (f", VMs (GPUs on PCI bus 0): {VM_SOCKET_HOP_US:g} µs a TCP step" if vm else ""))
    return topo, (f" (a PCIe {card.pcie_gen}.0 card, compute capability {card.compute_capability / 10:g}: "
                  f"{topo.name} with these GPUs; assumed: {pcie_layout_words(topo)}{no_p2p}{sockets})")
