"""What the PCI slots of a run's GPUs say of its machine: a one-GPU slice of a Google Cloud RDMA VM, a
Google Cloud A3 Mega VM (:func:`on_gcp_a3_mega`), an AWS EC2 p4d / p4de / p5 instance
(:func:`aws_instance_by_slots`), or an ABCI 2.0 compute node (:func:`on_node_slots`).

nccl-tests prints each rank's GPU with its PCI bus id (``#  Rank  0 … device  0 [0000:cc:00] NVIDIA H200``,
since 2.10). Google Cloud's two RDMA machine types, ``a3-ultragpu-8g`` (A3 Ultra: 8 H200) and
``a4-highgpu-8g`` (A4: 8 B200), each with eight ConnectX-7 400 Gb/s RoCE NICs, one per GPU, show their eight
GPUs to the guest at the same eight slots (:data:`GCP_RDMA_VM_SLOTS`), where the other H200 hosts of the
public runs bundled here put none (``1b 3c 4b 5c 9a bb cd dc``, the two hosts of
``all_reduce_perf-16xH200-2nodes-g8-roce-nccl2.30.4.txt``).

A run of one rank on each of several such VMs is a slice of each: a GKE pod given one GPU by the device
plugin and an RDMA NIC by a claim of its own (kubernetes-sigs/dranet's A3 Ultra examples claim the NIC by
name, ``gpu1rdma0`` or ``gpu2rdma0``, and the GPU apart). Google's gIB NCCL profile sets
``NCCL_NET_GDR_LEVEL=PIX`` (its ``set_nccl_env.sh``, whose variables GoogleCloudPlatform/PerfKitBenchmarker's
``perfkitbenchmarker/data/nvidia_hpl/a4.dockerfile`` copies):
GPUDirect RDMA only for a NIC under the GPU's own PCIe switch; any other NIC is reached through host memory
(``ncclTopoCheckGdr``, ``src/graph/paths.cc``). An A4 VM's ``nvidia-smi topo -m`` (dranet's
``site/content/docs/user/gke-rdma.md`` at commit 71857bc002501cb2bd880e7244bb3665679ddaa1, lines 411-427)
puts two GPUs and two NICs under each switch (``PIX``), the other NICs ``NODE`` or ``SYS`` away: a NIC
claimed without regard to the GPU is one of its switch's two in two cases of eight. The file names neither
the NIC nor the path, so :func:`with_gcp_slice` prices such a slice through host memory
(:mod:`zerocalc.nccl.graph` assumption 7) and says so; a topology TOML with ``gpudirect_rdma = true``
prices a slice whose claim aligned its NIC with its GPU (dranet's A4 example, ``pcieRoot``)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from zerocalc.topology.machine import Topology
from zerocalc.topology.presets import PRESETS

#: The PCI bus numbers (domain 0000) of the eight GPUs of an A3 Ultra and of an A4 VM, as nccl-tests lists
#: them on whole VMs: 16 H200 ranks on two ``a3-ultragpu-8g`` (skypilot-org/skypilot,
#: ``examples/gcp_gpu_direct_tcpx/README.md``, both runs; the bundled
#: ``all_gather_perf-16xH200-gcp-a3ultra-nccl2.26.6.txt``) and 16 B200 ranks on two ``a4-highgpu-8g``
#: (kubernetes-sigs/dranet at commit 71857bc002501cb2bd880e7244bb3665679ddaa1,
#: ``site/content/docs/user/gke-rdma.md``, lines 354-369): ``8f 90 96 97 c4 c5 cb cc`` on every host.
GCP_RDMA_VM_SLOTS = frozenset({"8f", "90", "96", "97", "c4", "c5", "cb", "cc"})

#: The PCI bus numbers (domain 0000) of the eight H100 GPUs of a Google Cloud A3 Mega VM (``a3-megagpu-8g``),
#: as nccl-tests lists them on whole VMs: the bundled ``all_reduce_perf-16xH100-2nodes.txt`` (hosts
#: ``ztan-mig-*`` of a repository that builds A3 Mega clusters) has ``04 05 0b 0c 84 85 8b 8c`` on both hosts.
#: The VM's eight GPUDirect-TCPXO NICs sit beside them, two to each pair of GPUs: Google's A3 Mega scripts
#: name them ``enp6s0,enp7s0,enp13s0,enp14s0,enp134s0,enp135s0,enp141s0,enp142s0`` (PCI buses 06 07 0d 0e
#: 86 87 8d 8e; GoogleCloudPlatform/cluster-toolkit ``examples/machine-learning/a3-megagpu-8g/nccl-tests/
#: run-nccl-tests.sh``, ``NCCL_FASTRAK_IFNAME``; dstackai/dstack ``examples/clusters/a3mega/README.md``).
#: A3 High (``a3-highgpu-8g``, four GPUDirect-TCPX NICs) is another layout: its NICs are the PCI functions
#: ``0000:06:00.0 0000:0c:00.0 0000:86:00.0 0000:8c:00.0`` (the same toolkit's
#: ``examples/machine-learning/a3-highgpu-8g/nccl-tests/run-nccl-tests.sh``, ``gpu_bdfs``), where this layout
#: has GPUs at ``0c`` and ``8c``; so these slots pick A3 Mega, not A3 High. No other H100 host of the public
#: runs bundled here uses them (Dell XE9680 ``19 3b 4c 5d 9b bb cb db``; ``1b 43 52 61 9d c3 d1 df``; AWS
#: p5 ``53 64 75 86 97 a8 b9 ca``; OCI ``0f 2d 44 5b 89 a8 c0 d8``).
GCP_A3_MEGA_SLOTS = frozenset({"04", "05", "0b", "0c", "84", "85", "8b", "8c"})

#: The PCI bus numbers (domain 0) of the eight A100 GPUs of an AWS EC2 p4d / p4de instance (``p4d.24xlarge``,
#: 40 GB; ``p4de.24xlarge``, 80 GB), as nccl-tests lists them: two GPUs on each of four buses, ``10 10 20 20
#: 90 90 a0 a0`` (devices ``1c`` and ``1d`` of each in the full bus id), each bus's PCIe root holding one of
#: the instance's four EFA NICs as well. So in the bundled runs whose aws-ofi-nccl INFO lines name
#: ``p4d.24xlarge`` (``all_reduce_perf-16xA100-SXM4-40GB-p4d-dlami-efa-truncated-nccl2.23.4.txt``,
#: ``scatter_perf-16xA100-40GB-p4d-2nodes-srun-nccl2.18.3.out``, ``P4d``:
#: ``all_reduce_perf-16xA100-p4d-2nodes-tagged-nccl2.9.9.log``) and in the p4de run of
#: aws-samples/aws-hpc-tutorials (``all_reduce_perf-16xA100-80GB-p4de-2nodes-efa-simple.txt``). Other A100
#: hosts put each GPU on a bus of its own (DGX A100 ``07 0f 47 4e 87 90 b7 bd``).
AWS_P4_BUSES = frozenset({0x10, 0x20, 0x90, 0xA0})

#: The PCI bus numbers (domain 0) of the eight H100 GPUs of an AWS EC2 p5 instance (``p5.48xlarge``), one GPU
#: on each: ``53 64 75 86 97 a8 b9 ca``, in the bundled runs whose aws-ofi-nccl INFO lines name
#: ``p5.48xlarge`` (``all_reduce_perf-16xH100-p5-info-tagged-nccl2.22.3-run1.log.gz``, ``-run2``,
#: ``all_reduce_perf-16xH100-p5-info-tuner-nccl2.20.3.log.gz``); no other H100 host bundled uses them.
AWS_P5_BUSES = frozenset({0x53, 0x64, 0x75, 0x86, 0x97, 0xA8, 0xB9, 0xCA})

#: GPU kind (:data:`zerocalc.topology.devices.GPU_KINDS`) → (the buses of the instance that holds it, the
#: instance, its preset, whether its GPUs go two to a bus).
AWS_SLOT_INSTANCES = {"a100-40": (AWS_P4_BUSES, "p4d.24xlarge", "aws-p4d", True),
                      "a100-80": (AWS_P4_BUSES, "p4de.24xlarge", "aws-p4de", True),
                      "h100": (AWS_P5_BUSES, "p5.48xlarge", "aws-p5", False)}


def aws_instance_by_slots(kind: str | None, pci_buses: Mapping[str, Sequence[int]] | None) -> str | None:
    """The EC2 instance (``p4d.24xlarge``) whose GPU slots every host of two or more lists for GPUs of
    ``kind``, or ``None``. ``pci_buses``: host → its ranks' GPU bus numbers, rank order. On p4d / p4de each
    host with two or more GPUs must list two on one bus (the instance's pairs; elsewhere each GPU has a bus of
    its own), on p5 each GPU a bus of its own."""
    if kind not in AWS_SLOT_INSTANCES or not pci_buses or len(pci_buses) < 2:
        return None
    buses, instance, _, paired = AWS_SLOT_INSTANCES[kind]
    for host in pci_buses.values():
        if not host or any(b not in buses for b in host):
            return None
        repeated = len(set(host)) < len(host)
        if (paired and (len(host) < 2 or not repeated)) or (not paired and repeated):
            return None
    return instance


def on_aws_slots(kind: str | None, topo: Topology, how: str, pci_buses: Mapping[str, Sequence[int]] | None
                 ) -> tuple[Topology, str]:
    """``topo`` and ``how`` (the sentence saying how it was chosen) as they are, unless the GPUs of every
    host sit at an AWS EC2 instance's slots (:func:`aws_instance_by_slots`): then that instance's preset
    (its network EFA) and ``how`` with the words for it. For a run whose lines name no network."""
    ec2 = aws_instance_by_slots(kind, pci_buses)
    if ec2 is None:
        return topo, how
    _, _, name, paired = AWS_SLOT_INSTANCES[str(kind)]
    buses = " ".join(f"{b:02x}" for b in next(iter((pci_buses or {}).values())))
    pairs = "two GPUs to a bus" if paired else "one GPU to a bus"
    return PRESETS[name], how + (f"; its GPUs' PCI buses ({buses} on every host, {pairs}) are an AWS "
                                 f"{ec2}'s, whose network is EFA: {name}")


#: The preset a GCP RDMA VM's GPUs pick (:mod:`zerocalc.topology.devices`) → the VM, in words.
GCP_RDMA_VMS = {"dgx-h200": "A3 Ultra (a3-ultragpu-8g)", "dgx-b200": "A4 (a4-highgpu-8g)"}


def slot(bus_id: str) -> str | None:
    """The bus number of a bus id in domain 0 (``0000:cc:00`` → ``cc``), ``None`` for another domain."""
    parts = bus_id.lower().split(":")
    if len(parts) != 3 or parts[0].strip("0"):
        return None
    return parts[1]


def _all_at(bus_ids: Mapping[str, Sequence[str]], slots: frozenset[str]) -> bool:
    """Every listed GPU of two or more hosts sits at one of ``slots``."""
    seen = [slot(b) for ids in bus_ids.values() for b in ids]
    return len(bus_ids) >= 2 and bool(seen) and all(s in slots for s in seen)


def on_gcp_rdma_vms(bus_ids: Mapping[str, Sequence[str]]) -> bool:
    """Every listed GPU of two or more hosts sits at a slot of :data:`GCP_RDMA_VM_SLOTS`."""
    return _all_at(bus_ids, GCP_RDMA_VM_SLOTS)


def on_gcp_a3_mega(bus_ids: Mapping[str, Sequence[str]] | None) -> bool:
    """Every listed GPU of two or more hosts sits at a slot of :data:`GCP_A3_MEGA_SLOTS`, each on a bus of its
    own as device 0 (``0000:04:00``): the run's hosts are GCP A3 Mega VMs. GPUs that share a bus as devices
    of one PCI bridge (``0000:04:00``, ``0000:04:02``, … on each of four Dell XE9680 VMs, NVIDIA/nccl-tests
    issue 309) are another machine."""
    ids = bus_ids or {}
    for host in ids.values():
        buses = [b.lower().split(":") for b in host]
        if any(len(b) != 3 or b[2] != "00" for b in buses) or len({b[1] for b in buses}) != len(buses):
            return False
    return _all_at(ids, GCP_A3_MEGA_SLOTS)


def with_gcp_slice(topo: Topology, bus_ids: Mapping[str, Sequence[str]] | None, ranks: int
                   ) -> tuple[Topology, str]:
    """``topo`` through host memory (``gpudirect_rdma`` false) where it is the preset of a GCP RDMA VM cut
    to nodes of one GPU, its ranks' GPUs at that VM's slots on every host (``bus_ids``: host → bus ids, as
    :mod:`zerocalc.traces.nccl_tests` lists them) and no line states the path; and the words for it. Any
    other topology, or one whose path is stated, is returned as it is, with no words."""
    if (topo.gpudirect_rdma is not None or topo.gpus_per_node != 1 or ranks <= 1
            or topo.name not in GCP_RDMA_VMS or not on_gcp_rdma_vms(bus_ids or {})):
        return topo, ""
    return replace(topo, gpudirect_rdma=False), (
        f"one GPU of a GCP {GCP_RDMA_VMS[topo.name]} VM on each host (its GPUs' PCI slots): a slice whose "
        "NIC is its own only where its claim aligns them; through host memory (no GPUDirect RDMA)")


def gcp_slice_note(how: str) -> str:
    """The note ``check`` prints for a sweep :func:`with_gcp_slice` priced through host memory ('' when it
    did not)."""
    if not how:
        return ""
    return ("one GPU per GCP A3 Ultra / A4 VM: under Google's gIB profile (NCCL_NET_GDR_LEVEL=PIX) NCCL uses "
            "GPUDirect RDMA only for the NIC under the GPU's own PCIe switch, and the file does not say "
            "which NIC the slice was given: priced through host memory, 2/3 of the network rate and no "
            "LL128 (NVIDIA/nccl issue 412); a topology TOML with gpudirect_rdma = true prices a slice given "
            "its GPU's own NIC")


@dataclass(frozen=True)
class SlotNode:
    """A machine whose GPUs of one model sit at its own PCI slots: the device name's pattern, the bus
    numbers of its GPUs in device order, its preset and its name in words."""

    gpu: re.Pattern[str]
    slots: tuple[int, ...]
    preset: str
    words: str


#: The two kinds of ABCI 2.0 compute node (AIST; aistabci/abci-docs ``en/docs/system-overview.md`` and its
#: block diagrams ``en/docs/img/compute-node-{a,v}-diagram.png``), as nccl-tests lists their GPUs in
#: aistabci/abci2.0benchmark at commit f0aa27f (the bundled ``*-abci-*-nccl2.8.4.txt`` sweeps, every host):
#:
#: * Compute Node (A), ``A100-SXM4-40GB`` (``NVIDIA A100-SXM4-40GB`` on later drivers, the bundled
#:   ``all_reduce_perf-16xA100-SXM4-40GB-abci-2nodes-collnet-sharp-nccl2.8.txt`` from ABCI's user guide):
#:   ``27 2a 51 57 9e a4 c7 ca``, two GPUs under each of four PCIe switches, each switch with one of the
#:   node's four HDR NICs (the diagram), where a DGX A100 lists ``07 0f 47 4e 87 90 b7 bd`` (eight NICs) and
#:   OCI's BM.GPU4.8 ``0f 15 51 54 8d 92 d6 da``. The same slots hold 80 GB A100s in CoreWeave's HGX
#:   nodes (the bundled ``all_reduce_perf-128xA100-80GB-coreweave-16nodes-ib.txt``) and in the hosts
#:   ``a100-43`` / ``a100-44`` of ``mpirun-all_reduce-named-over-alltoall-rows-16xA100-2nodes.txt``: a
#:   board layout other machines share, so only the 40 GB part, ABCI's, is told by them.
#: * Compute Node (V), ``Tesla V100-SXM2-16GB``: ``3d 3e b1 b2``, a pair under a PCIe switch on each
#:   socket (the diagram; buses from 0x80 are the second socket's), where a DGX-1 lists ``4f 50 5f 60 b1
#:   b2 db dc`` (the bundled ``all_reduce_perf-8xV100-SXM2-16GB-dgx1-g8.txt``) and OCI's BM.GPU3.8 ``61 62
#:   67 69 89 8a 8f 91``.
SLOT_NODES: tuple[SlotNode, ...] = (
    SlotNode(re.compile(r"\bA100-SXM4-40GB\b", re.I), (0x27, 0x2A, 0x51, 0x57, 0x9E, 0xA4, 0xC7, 0xCA),
             "abci-a", "ABCI 2.0 Compute Node (A)"),
    SlotNode(re.compile(r"\bV100-SXM2-16GB\b", re.I), (0x3D, 0x3E, 0xB1, 0xB2), "abci-v",
             "ABCI 2.0 Compute Node (V)"),
)


def node_by_slots(gpu: str, pci_buses: Mapping[str, Sequence[int]] | None) -> SlotNode | None:
    """The machine of :data:`SLOT_NODES` whose GPUs of this device name sit where every host lists its
    ranks' GPUs, or ``None``. ``pci_buses``: host → its ranks' GPU bus numbers, rank order. Each host's
    buses must be distinct slots of the node and hold its first GPU's: all the node's GPUs, or some of
    them with GPU 0 among them (a node's GPUs other than GPU 0 may be another machine's too, as the V
    node's ``b1 b2`` are a DGX-1's, and stay as they were)."""
    node = next((n for n in SLOT_NODES if n.gpu.search(gpu)), None)
    if node is None or not pci_buses:
        return None
    for buses in pci_buses.values():
        if (not buses or len(set(buses)) != len(buses) or any(b not in node.slots for b in buses)
                or node.slots[0] not in buses):
            return None
    return node


def on_node_slots(gpu: str, topo: Topology, how: str, pci_buses: Mapping[str, Sequence[int]] | None
                  ) -> tuple[Topology, str]:
    """``topo`` and ``how`` as they are, unless the run's GPUs sit at the slots of a machine of
    :data:`SLOT_NODES` on every host (:func:`node_by_slots`): then its preset, and ``how`` with the words
    for it. For a run whose lines name no network, or InfiniBand."""
    node = node_by_slots(gpu, pci_buses)
    if node is None or topo.name == node.preset:
        return topo, how
    listed = {" ".join(f"{b:02x}" for b in buses) for buses in (pci_buses or {}).values()}
    where = f"{next(iter(listed))} on every host" if len(listed) == 1 else "the node's on every host"
    return PRESETS[node.preset], how + (f"; an {node.words} (its GPUs' PCI slots: {where}, not a "
                                        f"{topo.name}'s): {node.preset}")


def by_slots(gpu: str, kind: str | None, net: str | None, mixed, topo: Topology, how: str,
             bus_ids: Mapping[str, Sequence[str]] | None, pci_buses: Mapping[str, Sequence[int]] | None
             ) -> tuple[Topology, str]:
    """``topo`` and ``how`` (the preset a run's device lines name, ``gpu`` its device name and ``kind`` its
    kind, ``net`` the network its lines name, ``mixed`` set where they name several models), or the
    machine its GPUs' PCI slots name: a GCP A3 Mega VM's H100s with no network named
    (:func:`on_gcp_a3_mega`), an AWS EC2 instance's with none named (:func:`on_aws_slots`), an ABCI 2.0
    node's on InfiniBand or none named (:func:`on_node_slots`)."""
    if net is None and topo.name == "dgx-h100" and on_gcp_a3_mega(bus_ids):
        topo, how = PRESETS["gcp-a3-mega"], how + (
            f"; its GPUs' PCI slots ({' '.join(sorted(GCP_A3_MEGA_SLOTS))} on every host) are a GCP A3 Mega "
            "VM's (a3-megagpu-8g, GPUDirect-TCPXO; A3 High puts NICs at 0c and 8c): gcp-a3-mega")
    if net is None:  # no line names the network: an EC2 instance's GPU slots may
        topo, how = on_aws_slots(kind, topo, how, pci_buses)
    if net in (None, "ib") and mixed is None:  # ABCI's nodes, on InfiniBand, by their GPUs' slots
        topo, how = on_node_slots(gpu, topo, how, pci_buses)
    return topo, how
