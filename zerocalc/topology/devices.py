"""The preset an nccl-tests run's own lines describe: GPU model, network and ranks per host → a preset.

nccl-tests prints one line per rank before its table (``src/common.cu``, "Using devices"): ``#  Rank  0
Group  0 Pid 6899 on HOST device 0 [0000:04:00] NVIDIA H100 80GB HBM3``, the last cells being the CUDA
device name (``cudaDeviceProp.name``, the name ``nvidia-smi`` prints). :func:`preset_for_devices` maps
that name to the kind of node that holds such GPUs, the network the file shows to the cloud or fabric
it ran on, and the host names to the nodes: ranks per host become the node's GPUs when they differ
from the preset's 8.

GPU names (as nvidia-smi and nccl-tests print them: ``NVIDIA A100-SXM4-40GB`` in NVIDIA/nccl-tests issue
119 and NVIDIA/nccl issue 583, ``NVIDIA A100-SXM4-80GB`` in nccl-tests issue 149, ``NVIDIA H100 80GB HBM3``
in the bundled ``all_reduce_perf-16xH100-2nodes.txt`` and nccl-tests issues 294 and 309, ``NVIDIA H200``
in the public outputs of Azure's and OCI's H200 nodes):

* ``A100-SXM…`` (NVIDIA's drivers before 2021 print it without ``NVIDIA``): the SXM4 module of HGX/DGX
  A100 boards → ``dgx-a100``; on AWS, ``aws-p4d`` (40 GB) or ``aws-p4de`` (80 GB); ``A100-SXM-64GB``, the
  custom A100 of Leonardo's Booster nodes (CINECA's hardware overview: 4 a node; ``NVIDIA A100-SXM-64GB`` in
  NVIDIA/nccl-tests issue 331, NV4 between each pair), → ``leonardo-booster``, whose NVLink mesh gives a pair
  4 links, not the NVSwitch board's 12 a GPU;
* ``NVIDIA H100`` alone (no memory or form after it: the 64 and 94 GB HBM2e SXM5 modules of NVIDIA's HGX H100
  4-GPU board, as Snellius's gpu_h100 nodes print it in the bundled ``*-8xH100-snellius-*`` runs) →
  ``hgx-h100-4gpu`` (4 on an NVLink mesh, no NVSwitch); more than 4 a host is refused (no such board);
* ``H100 80GB HBM3`` (the SXM5 module) → ``dgx-h100``; on AWS ``aws-p5``; over GCP's GPUDirect-TCPX
  (an INFO line naming ``GPUDirectTCPX``) ``gcp-a3-high``; over GCP's GPUDirect-TCPXO ``gcp-a3-mega``,
  and so at an A3 Mega VM's PCI slots on every host when no line names the network
  (:data:`zerocalc.topology.slots.GCP_A3_MEGA_SLOTS`);
* ``H200`` without ``NVL`` or ``PCIe`` after it (the SXM module; the PCIe card is ``NVIDIA H200 NVL``)
  → ``dgx-h200``; on AWS ``aws-p5e``
  (p5e and p5en hold the same GPUs and 3,200 Gb/s of EFA; p5en's EFAv3 reports 35 µs to NCCL, p5e's 75:
  the device lines cannot tell them apart, and the first line says so, unless aws-ofi-nccl's INFO line
  names the instance, ``NET/OFI Running on p5en.48xlarge platform``: then ``aws-p5en``);
* ``B200`` → ``dgx-b200``; on AWS ``aws-p6-b200`` (p6-b200.48xlarge, AWS's one 8-B200 instance);
* ``B300`` (``NVIDIA B300 SXM6 AC`` as the CUDA device name of HGX / DGX B300 boards' SXM6 module reads,
  ``NVIDIA B300`` on other drivers; not ``GB300``, the Grace superchip's) → ``dgx-b300``; on AWS
  ``aws-p6-b300`` (p6-b300.48xlarge);
* the export parts (NVIDIA's A800 / H800 datasheets, the HGX H20 product brief; names as nvidia-smi and
  nccl-tests print them: ``NVIDIA A800-SXM4-80GB``, ``NVIDIA H800``, ``NVIDIA H20``, in public nccl-tests
  outputs of A800, H800 and H20 nodes): ``A800-SXM…`` → ``hgx-a800`` (8 NVLink3 links, not the A100's
  12: it must not fall to ``dgx-a100``), ``H800`` (the SXM5 module) → ``hgx-h800`` (8 NVLink4 links),
  ``H20`` (also ``H20-3e``) → ``hgx-h20`` (18 links, the H100's); their PCIe cards (``H800 PCIe``,
  ``A800 80GB PCIe``) are PCIe cards below;
* ``GB200`` / ``GB300`` (the GPUs of a Grace Blackwell superchip: ``NVIDIA GB200`` in the device lines of
  public GB200 NVL72 runs, OCI's and CoreWeave's) → ``gb200-nvl72`` / ``gb300-nvl72``: the hosts (compute
  trays of 4) of one rack are one NVLink domain, one node to NCCL (:func:`nodes_of`);
* ``GH200`` (``NVIDIA GH200 480GB``, ``NVIDIA GH200 120GB`` as the Alps and Olivia runs print it) →
  ``gh200``, 4 per node; a run with one per host gets nodes of one GPU and one NIC;
* ``GB10`` (``NVIDIA GB10``, as the device lines of public DGX Spark pairs print it: the bundled
  ``all_gather_perf-2xGB10-*`` sweeps) → ``dgx-spark``, one GPU a host, the hosts joined by the network;
* ``AMD Instinct MI300X`` / ``AMD Instinct MI325X`` (the marketing name rccl-tests prints, as
  ``rocminfo`` does: ROCm/rccl-tests issue 146, the bundled rccl-tests sweeps) → ``amd-mi300x`` /
  ``amd-mi325x``, AMD's 8-GPU OAM platform, priced by RCCL's model (:mod:`zerocalc.nccl.rccl`); ``AMD
  Instinct MI355X`` / ``MI350X`` (gfx950, the same platform) → ``amd-mi355x`` / ``amd-mi350x``;
  ``AMD Instinct MI250X`` (each GCD of an MI250X, as rccl-tests prints it on HPE's EX235a nodes:
  crickett-hpe/hpc-ai-envs PR 21) → ``amd-mi250x``, the EX235a node of Frontier and LUMI-G (8 GCDs, 4
  Slingshot NICs; aws-ofi-rccl's ``NET/OFI`` lines name the ``cxi`` provider, read as Slingshot); the
  name some ROCm releases give PCI device 0x740c, ``AMD Instinct MI250X / MI250``, is read the same way,
  and a plain ``MI250`` (the 2-socket OAM servers, whose rome models carry other tunings) is refused;
  ``AMD Instinct MI300A`` → ``amd-mi300a``, the EX255a node of LLNL's El Capitan (4 APUs, 4 Slingshot
  NICs);
* ``Tesla V100-SXM2-…`` (the SXM2 module, ``nvidia-smi topo -m`` NV1/NV2 links in the bundled
  ``all_reduce_perf-8xV100-SXM2-16GB-dgx1-g8.txt``) → ``dgx-1-v100``, the hybrid cube-mesh of DGX-1 and
  the clouds' 8-GPU V100 shapes;
* ``A100-SXM4-40GB`` and ``Tesla V100-SXM2-16GB`` at an ABCI 2.0 compute node's PCI slots on every host,
  with no network line or InfiniBand's → ``abci-a`` / ``abci-v`` (:data:`zerocalc.topology.slots.SLOT_NODES`);
* a PCIe card (:data:`PCIE_CARDS`: the name says PCIe, or a GeForce / RTX / workstation / L-series part)
  → the PCIe box of its generation (``pcie-gen3``, ``pcie-gen4``, ``pcie-gen5``), with the card's own
  name and compute capability in place of the preset's, and no PCIe peer-to-peer for GeForce and TITAN
  cards (:data:`NO_P2P_CARDS`); the first line says the layout assumed. The NVL cards (H100 NVL, H200
  NVL) come with NVLink bridges (:data:`NVL_BRIDGES`): a run of more GPUs a host than one bridge joins is
  priced on the PCIe box, saying so; one that fits a bridge group is refused.

The network (:data:`zerocalc.traces.nccl_tests.NETWORK_EVIDENCE`): NCCL's INFO lines, when the file has
them, are strong evidence (``NET/OFI`` → AWS EFA, unless its provider is ``cxi``: HPE Slingshot;
``NET/IB`` → InfiniBand or RoCE, ``FasTrak`` → GCP TCPXO, ``GPUDirectTCPX`` → GCP TCPX, ``NET/Socket`` →
TCP sockets); host names are a hint (:data:`HOST_HINTS`: EC2's ``ip-10-…``, OCI's ``inst-…``, GKE's
``gke-…``) used only when no INFO line names the network. PCIe cards across hosts over TCP sockets are
priced on their box with one NIC of NCCL's socket figure (:func:`over_sockets`). A network no preset of
that GPU describes (sockets between NVLink nodes, or GCP's TCPX with other GPUs than H100) across hosts is
refused, as are GPUs no preset describes, several GPU models, ranks sharing one GPU and hosts with
different rank counts: the caller is told to give ``--topology``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

from zerocalc.errors import ConfigError
from zerocalc.nccl.net_socket import ONE_GPU_VMS_WORDS, VM_SOCKET_HOP_US, on_vm, one_gpu_vms
from zerocalc.topology.machine import Link, Topology, nvlink_mesh_peers
from zerocalc.topology.pcie_cards import (  # noqa: F401  (re-exported: check and the tests import them here)
    NO_P2P_CARDS,
    NVL_BRIDGES,
    PCIE_CARDS,
    PCIE_PRESET,
    PcieCard,
    pcie_box,
    pcie_card,
    pcie_layout_words,
)
from zerocalc.topology.presets import PRESETS, TOPOLOGY_NAMES
from zerocalc.topology.slots import by_slots
from zerocalc.topology.stated import (  # noqa: F401  (re-exported: check and the tests import them here)
    SOCKET_NIC_GBPS,
    gdr_unstated_note,
    host_memory_note,
    on_own_host_bridges,
    over_sockets,
    socket_nic_note,
    with_stated_gdr,
    with_stated_nics,
    with_stated_p2p,
)

#: (pattern of the CUDA device name, the kind of node), first match wins (module docstring).
GPU_KINDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bA100-SXM-64GB", re.I), "a100-64"),
    (re.compile(r"\bA100-SXM\S*-80GB", re.I), "a100-80"),
    (re.compile(r"\bA100-SXM", re.I), "a100-40"),
    (re.compile(r"\bA800-SXM", re.I), "a800"),
    (re.compile(r"\bH100\b.*\bHBM3\b|\bH100[- ]SXM", re.I), "h100"),
    (re.compile(r"^(?:NVIDIA )?H100$", re.I), "h100-4gpu"),
    (re.compile(r"\bH800\b(?!.*\b(?:PCIe|NVL)\b)", re.I), "h800"),
    (re.compile(r"\bH20\b(?!.*\b(?:PCIe|NVL)\b)", re.I), "h20"),
    (re.compile(r"\bH200\b(?!.*\b(?:PCIe|NVL)\b)", re.I), "h200"),
    (re.compile(r"\bB200$", re.I), "b200"),
    (re.compile(r"\bB300\b", re.I), "b300"),
    (re.compile(r"\bV100-SXM2", re.I), "v100-sxm2"),
    (re.compile(r"\bGB200\b", re.I), "gb200"),
    (re.compile(r"\bGB300\b", re.I), "gb300"),
    (re.compile(r"\bGH200\b", re.I), "gh200"),
    (re.compile(r"\bGB10\b", re.I), "gb10"),
    (re.compile(r"\bMI300X\b", re.I), "mi300x"),
    (re.compile(r"\bMI325X\b", re.I), "mi325x"),
    (re.compile(r"\bMI355X\b", re.I), "mi355x"),
    (re.compile(r"\bMI350X\b", re.I), "mi350x"),
    (re.compile(r"\bMI250X\b", re.I), "mi250x"),
    (re.compile(r"\bMI300A\b", re.I), "mi300a"),
)

#: The AWS presets of each GPU kind, by the EC2 instance type aws-ofi-nccl names on its ``NET/OFI Running
#: on %s platform`` INFO line (the type it reads from ``/sys/devices/virtual/dmi/id/product_name``,
#: aws/aws-ofi-nccl ``src/platform-aws.c`` v1.6.0 on; ``P4d`` in the plugin's releases of 2021): p5e and p5en
#: hold the same H200 GPUs, which the device lines cannot tell apart, but not the same network (p5en: EFAv3,
#: 35 µs reported to NCCL, Intel hosts; AWS's P5 page). Other sizes of a family (``p5.4xlarge``: one H100
#: and 100 Gb/s of EFA) are no preset's and leave the GPU's own.
_AWS_INSTANCE_PRESETS: dict[str, dict[str, str]] = {
    "a100-40": {"p4d.24xlarge": "aws-p4d", "p4d": "aws-p4d"},
    "a100-80": {"p4de.24xlarge": "aws-p4de"},
    "h100": {"p5.48xlarge": "aws-p5"},
    "h200": {"p5e.48xlarge": "aws-p5e", "p5en.48xlarge": "aws-p5en"},
    "b200": {"p6-b200.48xlarge": "aws-p6-b200"},
    "b300": {"p6-b300.48xlarge": "aws-p6-b300"},
}

#: kind of node → network → preset (``None``: the network says nothing of the machine).
_PRESET_FOR: dict[str, dict[str | None, str]] = {
    "a100-40": {None: "dgx-a100", "ib": "dgx-a100", "efa": "aws-p4d"},
    "a100-80": {None: "dgx-a100", "ib": "dgx-a100", "efa": "aws-p4de"},
    "a100-64": {None: "leonardo-booster", "ib": "leonardo-booster"},
    "h100": {None: "dgx-h100", "ib": "dgx-h100", "efa": "aws-p5", "tcpxo": "gcp-a3-mega",
             "tcpx": "gcp-a3-high"},
    "h100-4gpu": {None: "hgx-h100-4gpu", "ib": "hgx-h100-4gpu"},
    "h200": {None: "dgx-h200", "ib": "dgx-h200", "efa": "aws-p5e"},
    "b200": {None: "dgx-b200", "ib": "dgx-b200", "efa": "aws-p6-b200"},
    "b300": {None: "dgx-b300", "ib": "dgx-b300", "efa": "aws-p6-b300"},
    "a800": {None: "hgx-a800", "ib": "hgx-a800"},
    "h800": {None: "hgx-h800", "ib": "hgx-h800"},
    "h20": {None: "hgx-h20", "ib": "hgx-h20"},
    "v100-sxm2": {None: "dgx-1-v100", "ib": "dgx-1-v100"},
    "gb200": {None: "gb200-nvl72", "ib": "gb200-nvl72"},
    "gb300": {None: "gb300-nvl72", "ib": "gb300-nvl72"},
    "gh200": {None: "gh200", "ib": "gh200", "slingshot": "gh200"},
    "gb10": {None: "dgx-spark", "ib": "dgx-spark"},
    "mi300x": {None: "amd-mi300x", "ib": "amd-mi300x"},
    "mi325x": {None: "amd-mi325x", "ib": "amd-mi325x"},
    "mi355x": {None: "amd-mi355x", "ib": "amd-mi355x"},
    "mi350x": {None: "amd-mi350x", "ib": "amd-mi350x"},
    "mi250x": {None: "amd-mi250x", "ib": "amd-mi250x", "slingshot": "amd-mi250x", "efa": "amd-mi250x"},
    "mi300a": {None: "amd-mi300a", "ib": "amd-mi300a", "slingshot": "amd-mi300a", "efa": "amd-mi300a"},
}


#: Host-name patterns of clouds (a hint, weaker than INFO lines): EC2's default host names
#: (``ip-10-0-1-23``, AWS EC2 User Guide "EC2 instance hostname types": IP-based names), OCI's
#: instance names (``inst-xxxxx-…``, the OCI console's default display names, as in the bundled OCI
#: sweep), GKE's node names (``gke-CLUSTER-POOL-…``).
HOST_HINTS: tuple[tuple[re.Pattern[str], str, str | None], ...] = (
    (re.compile(r"^ip-\d{1,3}-\d{1,3}-\d{1,3}-\d{1,3}(?:\.|$)"), "AWS EC2", "efa"),
    (re.compile(r"^inst-"), "OCI", None),
    (re.compile(r"^gke-"), "GCP (GKE)", None),
)

#: The networks the INFO lines name, in words.
NETWORK_NAMES = {"efa": "AWS EFA (aws-ofi-nccl)", "ib": "InfiniBand/RoCE (NCCL's IB transport)",
                 "socket": "TCP sockets (NCCL's socket transport)", "tcpxo": "GCP GPUDirect-TCPXO",
                 "tcpx": "GCP GPUDirect-TCPX",
                 "slingshot": "HPE Slingshot (aws-ofi-nccl over libfabric's cxi provider)"}


def _refuse(why: str) -> ConfigError:
    return ConfigError(f"{why}; give --topology (one of {', '.join(TOPOLOGY_NAMES)}, or a TOML file)",
                       option="--topology")


def gpu_kind(name: str) -> str | None:
    """The kind of node (:data:`GPU_KINDS`) a CUDA device name's GPU sits in, ``None`` for a PCIe card or
    a GPU no preset describes."""
    return next((k for rx, k in GPU_KINDS if rx.search(name.strip())), None)


def preset_for_gpu(name: str) -> str | None:
    """The preset whose node holds GPUs of this CUDA device name (no network evidence), or ``None``."""
    kind = gpu_kind(name)
    if kind is not None:
        return _PRESET_FOR[kind][None]
    card = pcie_card(name)
    return PCIE_PRESET.get(card.pcie_gen) if card else None



def _network(network: Mapping[str, Sequence], hosts: Mapping[str, int], where: str
             ) -> tuple[str | None, str]:
    """The network the run's lines show and the words that say why (``None``, ``""``: nothing shown)."""
    kinds = list(network)
    if kinds:
        if len(kinds) > 1 and "socket" in kinds:
            kinds.remove("socket")  # a plugin or IB next to a socket line: the socket one is bootstrap's
        if "slingshot" in kinds and "efa" in kinds:
            kinds.remove("efa")  # aws-ofi-nccl's own lines, on every libfabric fabric: its provider says cxi
        if len(kinds) > 1:
            raise _refuse(f"{where}: its NCCL lines name several networks "
                          f"({', '.join(f'line {network[k][0]}: {NETWORK_NAMES[k]}' for k in kinds)})")
        (kind,) = kinds
        return kind, f"network {NETWORK_NAMES[kind]} from line {network[kind][0]}"
    for rx, cloud, kind in HOST_HINTS:
        named = [h for h in hosts if rx.search(h)]
        if named and len(named) == len(hosts):
            return kind, f"host names {named[0]}… ({cloud}, a hint: no NCCL INFO line names the network)"
    return None, ""


#: The name drivers without the GPU's own name give it (``NVIDIA Graphics Device``: CoreWeave's GB200 NVL72
#: runs, coreweave/nccl-tests README, Feb-May 2025).
UNNAMED_GPU = "NVIDIA Graphics Device"


def gpus_named_by_info(gpus: Mapping[str, int], info: Mapping[str, Sequence] | None
                       ) -> tuple[dict[str, int], str]:
    """``gpus`` with an unnamed GPU (:data:`UNNAMED_GPU`) taken for a GB200 where the run's NCCL INFO lines
    say its node is a multi-node NVLink domain (``info``: kind → ``(value, line)``,
    :mod:`zerocalc.traces.nccl_info`: ``MNNVL 1`` on NCCL's ``nRanks … localRanks … MNNVL`` line,
    ``src/init.cc`` v2.20-v2.30), and the words for it; unchanged (and no words) otherwise, where the
    unnamed GPU stays refused naming ``--topology``. Multi-node NVLink joins hosts through NVLink switch
    trays (GB200 / GB300 NVL72, GH200 NVL32); of those only early GB200 drivers leave the GPU unnamed (the
    GH200 and GB300 runs bundled name theirs), so the rack is a GB200 NVL72."""
    mnnvl = (info or {}).get("mnnvl")
    if set(gpus) != {UNNAMED_GPU} or not mnnvl or not mnnvl[0]:
        return dict(gpus), ""
    return ({"NVIDIA GB200": gpus[UNNAMED_GPU]},
            f"{UNNAMED_GPU} taken for a GB200: its NCCL INFO line {mnnvl[1]} says MNNVL 1, a multi-node "
            "NVLink domain, which early GB200 drivers leave unnamed; ")


def preset_for_devices(gpus: Mapping[str, int], hosts: Mapping[str, int], *, where: str,
                       network: Mapping[str, Sequence] | None = None,
                       shared_devices: Sequence[Sequence] = (),
                       group_size: int | None = None,
                       instance: Sequence | None = None,
                       root_bus_hosts: Sequence[str] = (),
                       bus_ids: Mapping[str, Sequence[str]] | None = None,
                       pci_buses: Mapping[str, Sequence[int]] | None = None) -> tuple[Topology, str]:
    """The preset the lines of a run describe, and how it was chosen (a sentence).

    ``gpus``: device name → ranks; ``hosts``: host name → ranks; ``network``: kind → (line, text) of
    the INFO or launch lines that name the network; ``shared_devices``: (host, bus id, ranks) of GPUs
    several ranks ran on (as :func:`zerocalc.traces.nccl_tests.parse` lists them per run). With ranks
    per host other than the preset's GPUs per node, the node is taken to hold that many (the preset's
    NICs scaled with them when it has one per GPU), unless the lines list fewer ranks than
    ``group_size`` (an excerpt): then they tell the GPU and network, not the node, which stays the
    preset's. ``instance``: ``(EC2 instance type, line)`` where aws-ofi-nccl's INFO lines name it (``NET/OFI
    Running on p5en.48xlarge platform``), which tells apart the AWS machines of one GPU (p5e, p5en) on EFA.
    ``root_bus_hosts``: the hosts whose every GPU the lines put on PCI bus 0; where that is every host, a
    PCIe card's GPUs each sit on a host bridge of their own (:func:`on_own_host_bridges`).
    ``bus_ids``: host → its ranks' GPU bus ids; H100s at a GCP A3 Mega VM's slots on every host, with no
    line naming the network, pick ``gcp-a3-mega`` (:func:`zerocalc.topology.slots.on_gcp_a3_mega`).
    ``pci_buses``: host → its ranks' GPU bus numbers; where every host's are the same and far apart, a
    PCIe card's GPUs each sit on a root port of their own (:mod:`zerocalc.topology.pci_buses`); where every
    host's are an AWS EC2 p4d / p4de / p5 instance's and no line names the network, that instance's preset
    (:func:`zerocalc.topology.slots.on_aws_slots`).
    Raises :class:`ConfigError` naming ``--topology``
    when the lines name no GPU, several models, one no preset describes, ranks sharing a GPU, a network
    no preset of that GPU has, or hosts with different rank counts."""
    gpu, mixed = _named_gpu(gpus, hosts, shared_devices, where)
    net, net_how = _network(network or {}, hosts, where)
    own_roots = bool(hosts) and all(h in root_bus_hosts for h in hosts)
    ports = [list(pci_buses.get(h) or ()) for h in hosts] if pci_buses and hosts else []
    ports = ports[0] if ports and all(p == ports[0] for p in ports) else []
    if net is None and len(hosts) > 1 and one_gpu_vms(hosts, ports):
        net, net_how = "socket", ONE_GPU_VMS_WORDS
    topo, gpu_how = _preset(gpu, net, len(hosts), where, net_how, instance, mixed, own_roots, ports)
    topo, gpu_how = by_slots(gpu, gpu_kind(gpu), net, mixed, topo, gpu_how, bus_ids, pci_buses)
    if mixed is not None:
        gpu_how += ("; several models: their least PCIe generation and compute capability, the slowest "
                    "card setting NCCL's ring")
    listed = sum(hosts.values())
    if group_size is not None and listed < group_size:
        told = (f"{listed} of its {group_size} ranks listed" if listed
                else f"its {group_size} ranks listed without their hosts")
        how = f"from the file's device lines: {gpu}, {told} (nodes as {topo.name}'s){gpu_how}"
        return topo, how + (f"; {net_how}" if net_how else "")
    per_host = set(hosts.values())
    if len(per_host) > 1:
        raise _refuse(f"{where}: its hosts run different numbers of ranks "
                      f"({', '.join(f'{h} {k}' for h, k in hosts.items())})")
    (k,) = per_host
    most = topo.gpus_per_host or topo.gpus_per_node
    if k > most and (mixed is not None or pcie_card(gpu) is not None) and not topo.nvlink_gen:
        # a PCIe box holds as many cards as its slots: its layout (sockets, GPUs to a switch) with k GPUs
        topo, most = replace(topo, gpus_per_node=k), k
        gpu_how += f"; {k} cards a host, the box's sockets and switches holding {k} GPUs"
    if k > most:
        what = "host" if topo.mnnvl else "node"
        raise _refuse(f"{where}: {k} ranks per host, more than the {most} GPUs of a {topo.name} {what}")
    bridge = next((n for rx, n in NVL_BRIDGES if rx.search(gpu)), None)
    if bridge is not None and 2 <= k <= bridge:
        raise _refuse(f"{where}: {k} {gpu} a host may share one NVLink bridge set or cross PCIe, which the "
                      "file does not tell (nor what the bridge carries)")
    if bridge is not None and k > bridge:
        gpu_how += (f"; NVLink bridges join at most {bridge} of its {k} GPUs a host, so NCCL's rings cross "
                    "PCIe between them and PCIe sets their speed: priced on PCIe alone")
    plural = "s" if len(hosts) != 1 else ""
    how = f"from the file's device lines: {gpu}, {k} per host, {len(hosts)} host{plural}{gpu_how}"
    if net_how:
        how += f"; {net_how}"
    if k != topo.gpus_per_node and len(hosts) > 1:
        topo, nodes = nodes_of(topo, k)
        how += f" ({nodes})"
    return topo, how


def _named_gpu(gpus: Mapping[str, int], hosts: Mapping[str, int], shared_devices: Sequence[Sequence],
               where: str) -> tuple[str, PcieCard | None]:
    """The GPU the device lines name (models joined by `` + ``) and, where they name several, the mixed
    PCIe card they make (:func:`mixed_pcie_card`, else None); refused (``--topology``) where they name
    none, several of no one box, or ranks sharing a GPU."""
    if not gpus and hosts:
        raise _refuse(f"{where} names no GPU (its '#  Rank … device …' lines leave the device name empty) "
                      "to choose a topology from")
    if not gpus:
        raise _refuse(f"{where} names no GPU (no '#  Rank … device …' lines) to choose a topology from")
    mixed = mixed_pcie_card(list(gpus)) if len(gpus) > 1 else None
    if len(gpus) > 1 and mixed is None:
        raise _refuse(f"{where} names several GPU models ({', '.join(gpus)})")
    gpu = " + ".join(gpus)
    if shared_devices:
        host, bus, ranks = shared_devices[0]
        raise _refuse(f"{where}: ranks {', '.join(map(str, ranks))} share one {gpu} (host {host}, "
                      f"bus {bus}); no preset describes several ranks per GPU")
    return gpu, mixed


def nodes_of(topo: Topology, k: int) -> tuple[Topology, str]:
    """``topo`` with nodes of ``k`` GPUs, as a run with ``k`` ranks on each host sees them, and the words
    for it: NCCL's topology holds the GPUs of the communicator's ranks on a node and all its NICs, and its
    graph search takes the NICs nearest each GPU first (``src/graph/search.cc``), so ``k`` GPUs use their
    share of the node's NICs: ``nics × k / gpus``, at least one (one per GPU on nodes with one per GPU),
    the node's network bandwidth scaled alike. On a full NVLink mesh without NVSwitch (GH200's: 18 links, 6
    to each of three peers; :func:`zerocalc.topology.machine.nvlink_mesh_peers`) ``k`` GPUs also keep only
    the links among them, ``k - 1`` peers' (NCCL drops an NVLink to a GPU outside its system:
    ``ncclTopoAddNvLinks``, ``src/graph/topo.cc``; :mod:`zerocalc.nccl.graph` assumption 8).

    A node that is an NVLink domain of several hosts (``topo.mnnvl``: an NVL72 rack) stays one node:
    NCCL (v2.20.3 on) joins the GPUs of one NVLink clique, whatever their hosts, into one node of its
    topology (``src/init.cc`` ``ncclMnnvlCheck``, ``src/graph/topo.cc``), so ``k`` ranks on each host
    make a domain of its hosts × ``k`` GPUs, their NICs scaled alike."""
    if topo.mnnvl and k <= (topo.gpus_per_host or k):
        hosts = topo.gpus_per_node // (topo.gpus_per_host or 1)
        words = (f"one NVLink domain of {hosts} hosts × {_count(k, 'GPU')} (multi-node NVLink: NCCL's "
                 "clique is one node)")
        if k == topo.gpus_per_host:
            return topo, words
        return _scaled(topo, hosts * k, k), words
    topo, nics = _nic_share(topo, k)
    words = f"nodes of {_count(k, 'GPU')} and {_count(nics, 'NIC')}"
    peers = nvlink_mesh_peers(topo)
    if peers is not None and 2 <= k < topo.gpus_per_node:
        links = topo.nvlinks_per_gpu // peers * (k - 1)
        topo = replace(topo, nvlinks_per_gpu=links)
        words += f", {_count(links, 'NVLink')} a GPU (to its {_count(k - 1, 'peer')} of the mesh)"
    return replace(topo, gpus_per_node=k, nics_per_node=nics, gpus_per_host=None), words


def run_nodes(topo: Topology, n: int, k: int | None) -> tuple[Topology, str]:
    """The nodes a run of ``n`` ranks, ``k`` a node (``--gpus-per-node``; ``None``: the topology's), has
    on ``topo``, as ``check`` prices a file listing its ranks so, and the words for it ('' where ``topo``
    stands):
    ``k`` fewer than a node's GPUs, their share of its NICs (:func:`nodes_of`; on a multi-node NVLink rack,
    a domain of ``k / gpus_per_host`` hosts); on such a rack, more ranks than one domain holds without
    ``k``, spread evenly over the fewest domains (:func:`zerocalc.topology.domains.spread`). A node given
    more GPUs than the topology's, or a ``k`` the rack's hosts do not make up, stands as given."""
    from zerocalc.topology.domains import spread

    if k is None or k == topo.gpus_per_node:
        shaped = spread(topo, n, None) if k is None and topo.mnnvl and n % topo.gpus_per_node else None
        return shaped if shaped is not None else (topo, "")
    if k < 1 or k > topo.gpus_per_node or k >= n:  # a bad k is refused where the table is evaluated
        return topo, ""
    per_host = topo.gpus_per_host
    if topo.mnnvl and per_host:
        if k % per_host:
            return topo, ""
        return _scaled(topo, k, per_host), (f"NVLink domains of {k // per_host} hosts × {per_host} GPUs and "
                                            "their NICs (--gpus-per-node)")
    shaped, words = nodes_of(topo, k)
    return shaped, f"{words}, a run's share of each node (--gpus-per-node)"


def _scaled(topo: Topology, g: int, per_host: int) -> Topology:
    """``topo``'s NVLink domain with ``g`` GPUs, ``per_host`` on each host, and the NICs of those GPUs."""
    topo, nics = _nic_share(topo, g)
    return replace(topo, gpus_per_node=g, gpus_per_host=per_host, nics_per_node=nics)


def _nic_share(topo: Topology, g: int) -> tuple[Topology, int | None]:
    """``topo`` with the network bandwidth of ``g`` of its node's GPUs, and their NICs: ``nics × g /
    gpus``, at least one (:func:`nodes_of`); ``None`` where the node does not say its NICs."""
    nics = topo.nics_per_node
    if nics is None:
        return topo, None
    share = max(1, nics * g // topo.gpus_per_node)
    if share != nics:
        topo = replace(topo, inter=Link(topo.inter.alpha_s, topo.inter.bw_Bps * share / nics))
    return topo, share


def _count(n: int | None, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def nodes_as_listed(topo: Topology, hosts: Mapping[str, int], group_size: int | None) -> tuple[Topology, str]:
    """A given topology (``--topology``) with nodes of the GPUs the run's device lines list on each host,
    when every rank is listed, every host runs ``k`` of them and ``k`` is fewer than the topology's GPUs
    per node, on several hosts; else ``topo`` as given. The sentence says which (JSON ``topology_how``).

    NCCL builds its communicator from the ranks' GPUs alone: 10 ranks on 10 hosts of 8-GPU DGX H100s is
    10 nodes of one GPU (a ring through ten NICs), not a node and a quarter."""
    listed = sum(hosts.values())
    per_host = set(hosts.values())
    if (len(hosts) < 2 or len(per_host) != 1 or (group_size is not None and listed != group_size)
            or next(iter(per_host)) >= topo.gpus_per_node):
        return topo, "given (--topology)"
    (k,) = per_host
    topo, nodes = nodes_of(topo, k)
    return topo, (f"given (--topology); {nodes}, as the file's device lines list {_count(k, 'rank')} on "
                  f"each of {len(hosts)} hosts")


def mixed_pcie_card(names: Sequence[str]) -> PcieCard | None:
    """The card NCCL's model runs a communicator of several PCIe card models at, or ``None`` where a name is
    not a PCIe card (:data:`PCIE_CARDS`) or has NVLink bridges: the least PCIe generation (the box whose
    links the slowest GPU's x16 sets: NCCL's search runs every channel at one speed over each hop, the
    slowest link binding, ``src/graph/search.cc``) and the least compute capability (NCCL takes the
    communicator's ``ccMin`` for its speed arrays and tuning: ``ncclTopoGetCompCap``, ``search.cc`` and
    ``tuning.cc``, v2.12-v2.30)."""
    cards = [pcie_card(n) for n in names]
    if any(c is None for c in cards) or any(rx.search(n) for n in names for rx, _ in NVL_BRIDGES) \
            or any(rx.search(n.strip()) for n in names for rx, _ in GPU_KINDS):
        return None
    gen = min(c.pcie_gen for c in cards)
    return PcieCard(cards[0].pattern, gen, min(c.compute_capability for c in cards))


def _preset(gpu: str, net: str | None, n_hosts: int, where: str, net_how: str,
            instance: Sequence | None = None, card: PcieCard | None = None,
            own_roots: bool = False, buses: Sequence[int] = ()) -> tuple[Topology, str]:
    """The preset for this GPU on this network, and what to add to the sentence (a PCIe card's facts).
    ``instance``: ``(EC2 instance type, line)`` as aws-ofi-nccl's INFO line states it, which picks the AWS
    preset of that instance where the GPU has several (:data:`_AWS_INSTANCE_PRESETS`); ``card``: the card
    to price several models at (:func:`mixed_pcie_card`), ``gpu`` their names; ``own_roots``: a PCIe
    card's GPUs each on PCI bus 0 (:func:`on_own_host_bridges`); ``buses``: a host's GPU bus numbers, rank
    order (:func:`zerocalc.topology.pci_buses.on_own_root_ports`)."""
    kind = None if card is not None else gpu_kind(gpu)
    card = card or (pcie_card(gpu) if kind is None else None)
    if kind is None and card is None:
        raise _refuse(f"{where}: no preset describes its GPUs ({gpu})")
    if kind is None and card is not None and card.pcie_gen not in PCIE_PRESET:
        raise _refuse(f"{where}: no preset describes a PCIe {card.pcie_gen}.0 box ({gpu})")
    vm = own_roots or on_vm(buses)
    if n_hosts > 1 and net is not None and (kind is None or net not in _PRESET_FOR[kind]):
        if kind is None and net in ("ib", "socket"):
            pass  # a PCIe box's preset has an InfiniBand NIC; over sockets, :func:`over_sockets`
        elif net == "socket" and vm and list(buses) == [0]:
            pass  # a VM given one GPU: a GPU and a virtual NIC, nothing of the machine's NVLink or RDMA
        else:
            hint = " (ethernet-100g: a 100 GbE cluster of PCIe 4.0 GPUs)" if net == "socket" else ""
            raise _refuse(f"{where}: {net_how}, which no preset of {gpu} describes{hint}")
    if kind is not None:
        table = _PRESET_FOR[kind]
        name = table.get(net if n_hosts > 1 or net in ("efa", "tcpxo", "tcpx") else None, table[None])
        extra = ""
        stated = _instance_preset(kind, instance) if net == "efa" else None
        if stated is not None:
            name = stated
            extra = f" ({instance[0]} by aws-ofi-nccl's line {instance[1]}: {name})"
        elif name == "aws-p5e":
            extra = " (p5e or p5en: the file cannot tell them apart; --topology aws-p5en for EFAv3)"
        if stated is None and net == "efa" and instance and instance[0] and name.startswith("aws-"):
            other = next((t[str(instance[0]).strip().lower()] for t in _AWS_INSTANCE_PRESETS.values()
                          if str(instance[0]).strip().lower() in t), None)
            what = (f"{other}'s, a machine of other GPUs than the device lines'" if other else
                    "which no preset describes")
            extra += (f" (aws-ofi-nccl's line {instance[1]} names {instance[0]}, {what}: priced as {name}'s "
                      "GPUs and NICs; --topology for its own)")
        if net == "socket" and n_hosts > 1:
            extra += (f" (a VM of one GPU: across hosts NCCL's socket transport, through host memory, on one "
                      f"NIC of {SOCKET_NIC_GBPS:g} Gb/s a node, {VM_SOCKET_HOP_US:g} µs a TCP step)")
            return over_sockets(PRESETS[name], vm=True), extra
        if kind == "h100-4gpu":
            extra = (" (a plain 'H100', no '80GB HBM3' as the 8-GPU boards' module prints: the 64/94 GB SXM5 "
                     "module of the HGX H100 4-GPU board, an NVLink mesh without NVSwitch)")
        if name == "dgx-spark" and n_hosts > 1:
            extra = (" (priced with NCCL on both RDMA devices of the ConnectX-7 port, 200 Gb/s a Spark: "
                     "an NCCL_IB_HCA naming one, or TCP sockets, moves less, which the file's lines do not "
                     "state)")
        return PRESETS[name], extra
    assert card is not None
    return pcie_box(gpu, card, n_hosts, net, vm=vm, own_roots=own_roots, buses=buses)


def _instance_preset(kind: str, instance: Sequence | None) -> str | None:
    """The AWS preset of the EC2 instance aws-ofi-nccl names (``p5en.48xlarge`` → ``aws-p5en``), where it is
    one that holds GPUs of ``kind``; ``None`` where no line names one, or it names another machine."""
    if not instance or not instance[0]:
        return None
    return _AWS_INSTANCE_PRESETS.get(kind, {}).get(str(instance[0]).strip().lower())

