"""The preset machines (DGX-1 with V100, DGX A100/H100/H200/B200/B300, ABCI 2.0's A and V compute nodes, the
export HGX A800/H800/H20 boards, GB200 and GB300 NVL72 racks, 4-GPU GH200 nodes, the one-GPU DGX Spark (GB10),
GCP A3 Mega and A3 High, AWS p4d/p4de/p5/p5e/p5en/p6-b200/p6-b300, PCIe 3.0, 4.0 and 5.0 boxes, an Ethernet
cluster and AMD's MI300X and MI325X platforms), each figure citing its datasheet, and :func:`get_topology` to
pick one by name. The cloud machines are built in :mod:`zerocalc.topology.presets_cloud`, AMD's in
:mod:`zerocalc.topology.presets_amd`, the 8-GPU HGX node they share in :mod:`zerocalc.topology.hgx`.
"""

from __future__ import annotations

from typing import Any

from zerocalc.errors import UnknownNameError
from zerocalc.topology.hgx import hgx8 as _hgx8
from zerocalc.topology.machine import (
    PRESET_NET_US,
    PRESET_NVLINK_US,
    PRESET_PCI_US,
    Link,
    Topology,
)
from zerocalc.topology.presets_amd import AMD_PRESETS
from zerocalc.topology.presets_cloud import AWS_PRESETS, EFA_EAGER_BYTES, GCP_PRESETS  # noqa: F401

_NVLINK_US, _PCI_US, _NET_US = PRESET_NVLINK_US, PRESET_PCI_US, PRESET_NET_US


#: How the GPUs of the PCIe presets sit (:mod:`zerocalc.nccl.pcie`): the common 8-GPU PCIe server, two
#: Intel Xeon Scalable sockets (NCCL's Skylake-class SMP link), each with one PCIe switch holding 4 GPUs
#: (x16 uplink): the layout NCCL's own topology dump shows for 8 GeForce RTX 4090 in NVIDIA/nccl-tests
#: issue 307 (two ``PCI[24.0]`` switches of 4 GPUs, ``10.0/SYS`` between the sockets), the switch
#: ``nvidia-smi topo -m`` shows (``PIX``) for two RTX 2080 Ti of an 8-GPU rental node
#: (Anthony-Hoo/Anthony-Hoo.github.io, the bundled AutoDL sweeps). A run's GPUs are the node's first.
#: PCIe peer-to-peer is taken to work (data-center cards); GeForce cards are given none
#: (:mod:`zerocalc.topology.devices`).
_PCIE_LAYOUT: dict[str, Any] = {"cpu_sockets": 2, "gpus_per_pcie_switch": 4, "gpu_p2p": True}


def _pcie_box(gen: int, pcie_GBps: float, nic_Gbps: float, gpu: str, cc: int, source: str) -> Topology:
    """``pcie-gen<gen>``: 8 GPUs on PCIe ``gen`` x16 (no NVLink), laid out as :data:`_PCIE_LAYOUT`, one
    NIC of ``nic_Gbps`` per node."""
    nic = {100.0: "100 Gb/s EDR", 200.0: "200 Gb/s HDR", 400.0: "400 Gb/s NDR"}[nic_Gbps]
    return Topology(
        f"pcie-gen{gen}",
        f"8 GPUs on PCIe {gen}.0 x16 (2 sockets, 4 per PCIe switch), one {nic} NIC per node",
        8, Link.from_units(_PCI_US, pcie_GBps), Link.from_units(_NET_US, nic_Gbps / 8),
        source=source + "; layout: " + _PCIE_LAYOUT_SOURCE,
        gpu=gpu, compute_capability=cc, nvlink_gen=0, nvlinks_per_gpu=0, nvswitch_gen=0,
        pcie_gen=gen, nics_per_node=1, nic_Gbps=nic_Gbps, cpu_vendor="intel", in_network_reduction=(),
        **_PCIE_LAYOUT,
    )


_PCIE_LAYOUT_SOURCE = ("2 Intel sockets, 4 GPUs per PCIe switch (NCCL's topology of 8 RTX 4090 in NVIDIA/"
                       "nccl-tests issue 307)")


#: Why a hybrid cube-mesh prices as its 6 NVLinks per GPU (by hand, from NCCL's ring search rules,
#: ``src/graph/search.cc``): in the DGX-1 mesh (``nvidia-smi topo -m`` of the bundled V100 sweep) the
#: doubled links (NV2) close the ring 0-3-2-1-7-4-5-6 and the single ones (NV1) the ring 0-1-3-5-7-6-4-2;
#: at 20 GB/s a channel (NCCL's sm70 NVLink figure, ``topo.h``) the NV2 ring holds 2 channels each way and
#: the NV1 ring 1, 6 channels in all, more than the 2 of 40 GB/s, so NCCL keeps 6 × 20 = 120 GB/s, what a
#: node of 6 links per GPU gives. Point-to-point between the pairs no NVLink joins is not modelled.
_CUBE_MESH = ("the 6 channels of 20 GB/s NCCL's ring search finds on the cube-mesh's two rings of links "
              "(search.cc, topo.h)")

#: How NCCL sees an export part's cut NVLink (by hand from its sources): it counts a GPU's active NVLinks
#: from NVML, each adding one to its peer's ``count`` (``src/graph/xml.cc`` ``ncclTopoGetXmlFromGpu``, up to
#: 12 links on sm80 and 18 on sm90, v2.21.5), and ``topo.cc`` prices the peer link at ``count`` × its
#: per-generation figure (``src/graph/topo.h`` ``ncclTopoNVLinkBw``: 20 GB/s on sm80, 20.6 on sm90 from
#: v2.20), so the A800's and H800's 8 links give 160 and 164.8 GB/s where the A100's 12 and the H100's
#: 18 give 240 and 370.8: fewer NVLink channels at the same per-channel speeds. NCCL's own topology dump
#: of an H800 node prints that figure ("=== System : maxBw 164.8 totalBw 164.8 ===").
_EXPORT_LINKS = ("NCCL counts the active links from NVML and prices each at its sm80/sm90 figure (xml.cc, "
                 "topo.cc, topo.h): "
                 "8 links = 160 GB/s on sm80, 164.8 on sm90")


#: The NVL72 racks (NVIDIA's GB200 NVL72 and GB300 NVL72 pages; DGX GB200 user guide): 18 compute trays of 2
#: superchips (4 Blackwell GPUs and 2 Grace CPUs each), every GPU's 18 NVLink5 links (1.8 TB/s both ways)
#: on the rack's 9 NVLink switch trays: one NVLink domain of 72 GPUs across 18 hosts. NCCL joins the GPUs of
#: one NVLink clique into one node of its topology (multi-node NVLink, from v2.20.3: ``src/init.cc``
#: ``ncclMnnvlCheck`` when its ranks span hosts, ``src/graph/topo.cc`` fusing the clique's topologies,
#: ``nNodes`` counted from the rings' first ranks), so a rack prices as one node of 72 (``gpus_per_host``
#: 4), NVLS included (``src/transport/nvls.cc``: NVLS over the clique). Between racks, each tray's
#: NICs, one per GPU.
_NVL72 = ("one NVLink domain of 72 GPUs over 18 compute trays of 4 (NCCL's MNNVL clique: one node of its "
          "topology from v2.20.3, init.cc ncclMnnvlCheck and topo.cc)")


def _nvl72(name: str, title: str, *, source: str, gpu: str, cc: int, nic_Gbps: float, pcie_gen: int,
           nic_via_c2c: bool | None = None) -> Topology:
    """An NVL72 rack as one node of 72 GPUs on NVLink5 switches (900 GB/s each way per GPU, 18 links),
    NVLink SHARP, 4 GPUs per host (compute tray), one NIC of ``nic_Gbps`` per GPU, Grace (Arm) hosts."""
    return Topology(
        name, title, 72,
        Link.from_units(_NVLINK_US, 900.0), Link.from_units(_NET_US, 72 * nic_Gbps / 8),
        source=source + "; " + _NVL72,
        gpu=gpu, compute_capability=cc, nvlink_gen=5, nvlinks_per_gpu=18, nvswitch_gen=4,
        pcie_gen=pcie_gen, nics_per_node=72, nic_Gbps=nic_Gbps, cpu_vendor="arm",
        in_network_reduction=("nvls",), gpus_per_host=4, nic_via_c2c=nic_via_c2c,
    )


#: A GH200 node as HPE builds it (Cray EX254n: CSCS's Alps and Sigma2's Olivia documentation, "four
#: Grace-Hopper modules and four corresponding network interface cards" per node, HPE Slingshot 11): each
#: GH200's 18 NVLink4 links (NVIDIA GH200 datasheet: 900 GB/s both ways) join it to the other three, 6 to
#: each, with no NVSwitch. Priced by its 18 links: on that mesh NCCL's ring search (search.cc, the sm90
#: speeds) finds the 6 directed Hamiltonian rings of 4 GPUs, each link in two of them, at 60 GB/s a channel
#: (2 × 60 within a pair's 6 × 20.6 GB/s), the 6 channels of 60 GB/s the 18 links give through a switch.
#: NVIDIA's HGX A100 4-GPU baseboard (NVIDIA technical blog "Introducing NVIDIA HGX A100", 2020: "HGX A100
#: 4-GPU connected with NVLink", no NVSwitch): each A100's 12 NVLink3 links (25 GB/s each way) split 4 to
#: each of the three other GPUs, 100 GB/s each way a pair; ``nvidia-smi topo -m`` prints NV4 between every
#: pair (NVIDIA/nccl-tests issue 331, on a Leonardo Booster node).
_A100_4GPU = ("HGX A100 4-GPU board: 12 NVLink3 links per GPU, 4 to each of the other three (NV4 in "
              "nvidia-smi topo -m), no NVSwitch; NCCL's figure is 20 GB/s a link (topo.h SM80_NVLINK_BW), "
              "80 GB/s a pair")

#: ABCI's V node puts its NICs on the CPUs, its GPUs under PCIe switches: NCCL's path from a GPU to a NIC is
#: PHB, past NCCL's GPUDirect RDMA level (PXB by default; ``NCCL_NET_GDR_LEVEL=2``, which ABCI's benchmark
#: scripts set, is PXB in NCCL's old numbering: ``levelsOldToNew``, ``src/graph/paths.cc`` v2.8.4), so NCCL
#: relays the network's data through host memory and leaves LL128 off across nodes (``typeInter <=
#: PATH_PXB``, ``src/graph/tuning.cc``): :mod:`zerocalc.nccl.graph` assumption 7.
_NIC_ON_CPU = ("NCCL's GPU-NIC path is PHB, past its GPUDirect RDMA level (PXB; NCCL_NET_GDR_LEVEL=2 in "
               "ABCI's benchmark scripts, PXB in NCCL's old numbering, paths.cc v2.8.4): through host "
               "memory, no LL128 across nodes")

#: NVIDIA's HGX H100 4-GPU baseboard (NVIDIA technical blog "Introducing NVIDIA HGX H100", 2022: a 4-GPU and
#: an 8-GPU board, the 8-GPU one's GPUs on four NVSwitches; NVIDIA's list of confidential-computing GPUs names
#: the 4-GPU board's 64 GB HBM2e, 80 GB HBM3 and 94 GB HBM2e builds): each H100 SXM5's 18 NVLink4 links (H100
#: datasheet: 900 GB/s both ways) go straight to the other three GPUs, 6 to each (300 GB/s a pair both ways),
#: no NVSwitch, the GH200 board's mesh (JSC's JUPITER configuration page: 300 GB/s between pairs). NCCL prices
#: a link at 20.6 GB/s on sm90 (``src/graph/topo.h`` ``SM90_NVLINK_BW``, v2.20 on), 6 × 20.6 = 123.6 GB/s a
#: pair. On a Snellius gpu_h100 node NCCL 2.22.3 prints ``NVLS multicast support is not available`` on every
#: GPU (no NVSwitch) and lays its 24 channels over the 6 directed rings of the 4 GPUs (``Channel 00/24 : 0 1
#: 2 3`` to ``05/24 : 0 3 2 1``, repeating: odissei-benchmarks/nccl-tests ``runs/1node/all_reduce.log``), the
#: rings a full, even mesh gives (:data:`_GH200_MESH`).
_H100_4GPU = ("HGX H100 4-GPU board: 18 NVLink4 links per GPU, 6 to each of the other three, no NVSwitch (no "
              "NVLS); NCCL's figure is 20.6 GB/s a link (topo.h SM90_NVLINK_BW), 123.6 GB/s a pair; NCCL's "
              "own channels on such a node run the mesh's 6 rings of 4 (odissei-benchmarks/nccl-tests "
              "runs/1node/all_reduce.log)")

_GH200_MESH = ("18 NVLink4 links per GPU, 6 to each of the other three (no NVSwitch): the 6 rings of 60 GB/s "
               "NCCL's search finds on the mesh, as 18 links give")

#: Slingshot through aws-ofi-nccl and libfabric's cxi provider: a message above the provider's eager limit
#: (``CXIP_RDZV_THRESHOLD`` 2048 + ``rdzv_get_min`` 2049 bytes by default, ofiwg/libfabric ``prov/cxi``) goes
#: by a read-based rendezvous (``man/fi_cxi.7.md``), a round trip more (:mod:`zerocalc.nccl.ofi_cxi`).
CXI_EAGER_BYTES = 2048 + 2049

#: GH200 and GB200 reach their NICs through the Grace CPU: NCCL's maintainers (NVIDIA/nccl issue 1579, Jan
#: 2025: on GH200/GB200 "the NIC was accessed through a CPU") and NCCL's NCCL_NET_GDR_C2C ("a NIC attached to
#: a CPU (i.e. distance PHB) where the CPU is connected to the GPU via a C2C interconnect", env.html), which
#: CoreWeave's and OCI's GB200 jobs set, as Olivia's and Alps's GH200 jobs set NCCL_NET_GDR_LEVEL=PHB.
_C2C_NIC = ("NICs on the Grace CPU's PCIe, reached over NVLink-C2C (NVIDIA/nccl issue 1579; NCCL's "
            "NCCL_NET_GDR_C2C: distance PHB)")

#: How NCCL sees a DGX Spark's network: the ConnectX-7 sits on the GB10's CPU PCIe as two PCIe Gen5 x4
#: endpoints, so one QSFP port is two RDMA devices (``rocep1s0f1`` and ``roceP2p1s0f1``; the ``enp1s0f1np1``
#: and ``enP2p1s0f1np1`` interfaces), each carrying about half of the port's 200 Gb/s (NVIDIA's NCCL playbook
#: for DGX Spark, NVIDIA/dgx-spark-playbooks ``nvidia/nccl/README.md``, Dec 2025: "two PCIe Gen5 x4
#: endpoints (~100 Gbps each), so NCCL must use both to saturate the link", expected bus bandwidth 20-24
#: GB/s; the same repository's issue 102 and PR 103; ib_write_bw 98 Gb/s on each, 196 both at once, in the
#: bundled DGX Spark sweeps' source; NCCL's own figure for a Gen5 x4 link, ``topo.cc`` 32 GT/s → 240 × 4 /
#: 80, is 12 GB/s). A ring across Sparks uses both devices, 25 GB/s a node, as the sweeps that name no
#: ``NCCL_IB_HCA`` and those that name both show (21-24 GB/s bus bandwidth at 1-16 GB). The GPU reaches
#: the NIC over NVLink-C2C through the CPU (NCCL's P2C path from 2.27.3). GPUDirect RDMA or not, the
#: network's data live in the same LPDDR5x, so no host-memory relay share is taken (graph.py assumption 7
#: is a discrete GPU's PCIe crossing). What a run gets is set by the user's network settings, which
#: nccl-tests' table does not state: ``NCCL_IB_HCA`` naming one device (about 13.5 GB/s) or NCCL falling
#: back to TCP sockets (about 3 GB/s) moves less than this prices.
_SPARK_NIC = ("Its port is two PCIe Gen5 x4 endpoints, two RDMA devices of ~100 Gb/s each to NCCL "
              "(NVIDIA's NCCL playbook for DGX Spark, NVIDIA/dgx-spark-playbooks nvidia/nccl/README.md); "
              "NIC on the CPU's PCIe, reached over NVLink-C2C; the rate assumes NCCL uses both devices (an "
              "NCCL_IB_HCA of one, or TCP sockets, moves less)")

PRESETS: dict[str, Topology] = {
    t.name: t
    for t in (
        Topology(
            "dgx-a100", "NVIDIA DGX A100: NVLink3 + 8×200 Gb/s HDR InfiniBand", 8,
            Link.from_units(_NVLINK_US, 300.0), Link.from_units(_NET_US, 8 * 25.0),
            source="NVIDIA DGX A100 datasheet / A100 datasheet: NVLink3 600 GB/s per GPU "
                   "bidirectional (300 GB/s each way, 12 links); 6 second-generation NVSwitches; "
                   "8× ConnectX-6 HDR 200 Gb/s (25 GB/s) per node; PCIe 4.0; 2× AMD EPYC 7742",
            gpu="A100 SXM4", compute_capability=80, nvlink_gen=3, nvlinks_per_gpu=12, nvswitch_gen=2,
            pcie_gen=4, nics_per_node=8, nic_Gbps=200.0, cpu_vendor="amd", in_network_reduction=(),
        ),
        _hgx8(
            "dgx-h100", "NVIDIA DGX H100: NVLink4 + 8×400 Gb/s NDR InfiniBand", 450.0,
            source="NVIDIA DGX H100 datasheet / H100 SXM datasheet: NVLink4 900 GB/s per GPU "
                   "bidirectional (450 GB/s each way, 18 links); 4 third-generation NVSwitches (NVLink "
                   "SHARP); 8× ConnectX-7 NDR 400 Gb/s (50 GB/s) per node; PCIe 5.0; 2× Intel Xeon "
                   "Platinum 8480C",
            gpu="H100 SXM5", compute_capability=90, nvlink_gen=4, nvswitch_gen=3, nic_Gbps=400.0,
        ),
        _hgx8(
            "dgx-h200", "NVIDIA DGX H200: NVLink4 + 8×400 Gb/s NDR InfiniBand", 450.0,
            source="NVIDIA DGX H200 datasheet: 8× H200 SXM 141 GB, NVLink4 900 GB/s per GPU "
                   "bidirectional (18 links), 4 third-generation NVSwitches; 8× ConnectX-7 400 Gb/s "
                   "(4 OSFP ports); PCIe 5.0; 2× Intel Xeon Platinum 8480C",
            gpu="H200 SXM", compute_capability=90, nvlink_gen=4, nvswitch_gen=3, nic_Gbps=400.0,
        ),
        _hgx8(
            "dgx-b200", "NVIDIA DGX B200: NVLink5 + 8×400 Gb/s InfiniBand", 900.0,
            source="NVIDIA DGX B200 datasheet: 8× B200, NVLink5 1.8 TB/s per GPU bidirectional "
                   "(18 links × 50 GB/s each way), 2 NVLink switch chips (fourth-generation NVSwitch); "
                   "8× single-port ConnectX-7 VPI 400 Gb/s; PCIe 5.0; 2× Intel Xeon Platinum 8570",
            gpu="B200 SXM", compute_capability=100, nvlink_gen=5, nvswitch_gen=4, nic_Gbps=400.0,
        ),
        _hgx8(
            "dgx-b300", "NVIDIA DGX B300: NVLink5 + 8×800 Gb/s ConnectX-8", 900.0,
            source="NVIDIA DGX B300 datasheet / HGX B300 page: 8× B300 (Blackwell Ultra SXM, 288 GB HBM3e), "
                   "NVLink5 1.8 TB/s per GPU bidirectional (18 links × 50 GB/s each way; 14.4 TB/s a node) "
                   "through 2 NVLink switch chips (fourth-generation NVSwitch, NVLink SHARP); 8× single-port "
                   "ConnectX-8 SuperNIC, up to 800 Gb/s InfiniBand/Ethernet each (one per GPU), whose PCIe "
                   "Gen6 switch joins GPU and NIC; 2× Intel Xeon 6776P; compute capability 10.3 (NVIDIA "
                   "CUDA GPUs page), which NCCL prices as 10.0 (topo.h ncclTopoNVLinkBw SM100_NVLINK_BW, "
                   "search.cc sm100 speed arrays, tuning.cc NCCL_BLACKWELL_COMPCAP_IDX and nvls.cc all test "
                   "≥ 100, 2.25-2.30)",
            gpu="B300 SXM6", compute_capability=103, nvlink_gen=5, nvswitch_gen=4, nic_Gbps=800.0,
            pcie_gen=6,
        ),
        Topology(
            "abci-a", "ABCI 2.0 Compute Node (A): 8× A100-SXM4-40GB on NVSwitch + 4×200 Gb/s HDR InfiniBand",
            8,
            Link.from_units(_NVLINK_US, 300.0), Link.from_units(_NET_US, 4 * 25.0),
            source="ABCI's system overview (AIST, docs.abci.ai, ABCI 2.0): Compute Node (A), 2× Intel Xeon "
                   "Platinum 8360Y, 8× NVIDIA A100 40 GB SXM4 joined by NVLink3 through NVSwitch (12 links, "
                   "300 GB/s each way a GPU, as the DGX A100's), 4× InfiniBand HDR 200 Gb/s a node (half the "
                   "DGX A100's 8); PCIe 4.0",
            gpu="A100 SXM4", compute_capability=80, nvlink_gen=3, nvlinks_per_gpu=12, nvswitch_gen=2,
            pcie_gen=4, nics_per_node=4, nic_Gbps=200.0, cpu_vendor="intel", in_network_reduction=(),
        ),
        Topology(
            "abci-v",
            "ABCI 2.0 Compute Node (V): 4× V100-SXM2-16GB, NVLink2 (2 links a pair) + 2×100 Gb/s EDR IB", 4,
            Link.from_units(_NVLINK_US, 150.0), Link.from_units(_NET_US, 2 * 100 / 8),
            source="ABCI's system overview (AIST, aistabci/abci-docs en/docs/system-overview.md, ABCI 2.0): "
                   "Compute Node (V), FUJITSU PRIMERGY CX2570 M4, 2× Intel Xeon Gold 6148, 4× NVIDIA V100 "
                   "for NVLink 16 GiB, 2× InfiniBand EDR 100 Gb/s; its block diagram (en/docs/img/"
                   "compute-node-v-diagram.png): every pair of GPUs joined by 2 NVLink2 links (NV2; a V100 "
                   "SXM2's 6 links, 25 GB/s each way a link, NVIDIA Tesla V100 datasheet), no NVSwitch; two "
                   "GPUs under a PCIe Gen3 switch on each socket, each EDR NIC on a CPU's own Gen3 x16 port. "
                   + _NIC_ON_CPU,
            gpu="V100 SXM2", compute_capability=70, nvlink_gen=2, nvlinks_per_gpu=6, nvswitch_gen=0,
            pcie_gen=3, nics_per_node=2, nic_Gbps=100.0, cpu_vendor="intel", in_network_reduction=(),
            gpudirect_rdma=False,
        ),
        Topology(
            "hgx-a800", "HGX A800 (export A100): 8× A800-SXM4 NVLink3 (8 links) + 8×200 Gb/s HDR", 8,
            Link.from_units(_NVLINK_US, 200.0), Link.from_units(_NET_US, 8 * 25.0),
            source="NVIDIA A800 40GB/80GB SXM datasheet: NVLink 400 GB/s per GPU bidirectional (the A100's "
                   "600 cut to 8 of its 12 NVLink3 links, 25 GB/s each way a link), compute capability 8.0, "
                   "PCIe 4.0, on the HGX A100 board's second-generation NVSwitches; network as dgx-a100's "
                   "(one 200 Gb/s HDR NIC per GPU), CPU taken as Intel. " + _EXPORT_LINKS,
            gpu="A800 SXM4", compute_capability=80, nvlink_gen=3, nvlinks_per_gpu=8, nvswitch_gen=2,
            pcie_gen=4, nics_per_node=8, nic_Gbps=200.0, cpu_vendor="intel", in_network_reduction=(),
        ),
        _hgx8(
            "hgx-h800", "HGX H800 (export H100): 8× H800 SXM5 NVLink4 (8 links) + 8×400 Gb/s InfiniBand",
            200.0, nvlinks=8,
            source="NVIDIA H800 SXM5 datasheet: NVLink 400 GB/s per GPU bidirectional (8 of the H100's 18 "
                   "NVLink4 links, 25 GB/s each way a link), compute capability 9.0, PCIe 5.0, on the HGX "
                   "board's third-generation NVSwitches (NVLink SHARP: NCCL logs 'NVLS multicast support is "
                   "available' on H800); DeepSeek-V3 technical report (arXiv 2412.19437) §3.1-3.2.2: H800 "
                   "nodes of 8 GPUs on NVLink and NVSwitch, 160 GB/s of NVLink measured one way (deepseek-ai/"
                   "DeepSeek-V3 issue 28) against 50 GB/s of InfiniBand per GPU (one 400 Gb/s NIC each). "
                   + _EXPORT_LINKS,
            gpu="H800 SXM5", compute_capability=90, nvlink_gen=4, nvswitch_gen=3, nic_Gbps=400.0,
        ),
        _hgx8(
            "hgx-h20", "HGX H20: 8× H20 NVLink4 (18 links) + 8×400 Gb/s InfiniBand/RoCE", 450.0,
            source="NVIDIA HGX H20 product brief: H20 (Hopper, compute capability 9.0, 96 GB HBM3; H20-3e "
                   "141 GB) with the H100's full NVLink, 900 GB/s per GPU bidirectional (18 NVLink4 links), "
                   "on third-generation NVSwitches, PCIe 5.0; its compute is cut, not its links, and NCCL's "
                   "model reads links, not FLOPs. 8× 400 Gb/s NICs per node (NVIDIA/nccl-tests issue 367: "
                   "an H20-3e cluster of 400G×8 RoCE)",
            gpu="H20", compute_capability=90, nvlink_gen=4, nvswitch_gen=3, nic_Gbps=400.0,
        ),
        *GCP_PRESETS,
        Topology(
            "dgx-1-v100", "NVIDIA DGX-1 with V100: NVLink2 hybrid cube-mesh + 4×100 Gb/s EDR InfiniBand", 8,
            Link.from_units(_NVLINK_US, 150.0), Link.from_units(_NET_US, 4 * 100 / 8),
            source="NVIDIA DGX-1 with Tesla V100 datasheet: 8× Tesla V100 SXM2 (16 or 32 GB) in an NVLink "
                   "hybrid cube-mesh, 300 GB/s of NVLink per GPU bidirectional (6 NVLink2 links × 25 GB/s "
                   "each way), no NVSwitch; 4× Mellanox ConnectX-4 EDR InfiniBand 100 Gb/s; 2× Intel Xeon "
                   "E5-2698 v4; PCIe 3.0. Priced by its 6 links per GPU, " + _CUBE_MESH,
            gpu="V100 SXM2", compute_capability=70, nvlink_gen=2, nvlinks_per_gpu=6, nvswitch_gen=0,
            pcie_gen=3, nics_per_node=4, nic_Gbps=100.0, cpu_vendor="intel", in_network_reduction=(),
        ),
        _nvl72(
            "gb200-nvl72",
            "NVIDIA GB200 NVL72: 72 B200 on NVLink5 switches (18 hosts of 4) + 400 Gb/s per GPU",
            source="NVIDIA GB200 NVL72 page and DGX GB200 user guide: 72 Blackwell GPUs and 36 Grace CPUs, "
                   "fifth-generation NVLink 1.8 TB/s per GPU both ways (18 links × 50 GB/s each way) through "
                   "the NVLink Switch System, 130 TB/s per rack; 4× ConnectX-7 400 Gb/s (PCIe Gen5) per "
                   "compute tray of 4 GPUs; Arm Neoverse V2 (Grace) hosts; " + _C2C_NIC,
            gpu="B200 (GB200 superchip)", cc=100, nic_Gbps=400.0, pcie_gen=5, nic_via_c2c=True,
        ),
        _nvl72(
            "gb300-nvl72",
            "NVIDIA GB300 NVL72: 72 B300 on NVLink5 switches (18 hosts of 4) + 800 Gb/s per GPU",
            source="NVIDIA GB300 NVL72 page: 72 Blackwell Ultra GPUs and 36 Grace CPUs, fifth-generation "
                   "NVLink 1.8 TB/s per GPU both ways, 130 TB/s per rack; ConnectX-8 SuperNIC 800 Gb/s per "
                   "GPU (PCIe Gen6); compute capability 10.3, which NCCL prices as 10.0 (topo.h "
                   "ncclTopoNVLinkBw, search.cc speed arrays and tuning.cc's Blackwell index all test ≥ 100)",
            gpu="B300 (GB300 superchip)", cc=103, nic_Gbps=800.0, pcie_gen=6,
        ),
        Topology(
            "gh200", "4× NVIDIA GH200 (NVLink4 mesh, no NVSwitch) + 4×200 Gb/s Slingshot 11", 4,
            Link.from_units(_NVLINK_US, 450.0), Link.from_units(_NET_US, 4 * 200 / 8),
            source="NVIDIA GH200 Grace Hopper Superchip datasheet: H100-class Hopper GPU, 18 NVLink4 links "
                   "(900 GB/s both ways), NVLink-C2C 900 GB/s to its Grace (Arm Neoverse V2) CPU, PCIe Gen5; "
                   "HPE Cray EX254n node as CSCS's Alps hardware page describes it: four GH200 modules and "
                   "four Slingshot 11 NICs (200 Gb/s each) per node; aws-ofi-nccl reports no network latency "
                   "off AWS (nccl_ofi_param.h NET_LATENCY default 0); " + _C2C_NIC + ". Priced by its "
                   + _GH200_MESH,
            gpu="H100 (GH200 superchip)", compute_capability=90, nvlink_gen=4, nvlinks_per_gpu=18,
            nvswitch_gen=0, pcie_gen=5, nics_per_node=4, nic_Gbps=200.0, cpu_vendor="arm",
            in_network_reduction=(), nic_via_c2c=True, net_eager_bytes=CXI_EAGER_BYTES,
        ),
        Topology(
            "leonardo-booster",
            "Leonardo Booster node: 4× A100 SXM 64 GB (NVLink3 mesh, no NVSwitch) + 4×100 Gb/s HDR100", 4,
            Link.from_units(_NVLINK_US, 300.0), Link.from_units(_NET_US, 4 * 100 / 8),
            source="CINECA's Leonardo hardware overview (leonardo-supercomputer.cineca.eu/hpc-system): "
                   "Booster node, a BullSequana X2135 Da Vinci blade, 1× Intel Xeon Platinum 8358 (Ice "
                   "Lake), 4× NVIDIA custom Ampere A100 64 GB, 2× dual-port HDR (400 Gb/s aggregated: 4 "
                   "ports of 100 Gb/s, mlx5_0 to mlx5_3 in NCCL's NET/IB line, NVIDIA/nccl-tests issue "
                   "331); " + _A100_4GPU,
            gpu="A100 SXM 64GB", compute_capability=80, nvlink_gen=3, nvlinks_per_gpu=12, nvswitch_gen=0,
            pcie_gen=4, nics_per_node=4, nic_Gbps=100.0, cpu_vendor="intel", in_network_reduction=(),
        ),
        Topology(
            "hgx-h100-4gpu",
            "NVIDIA HGX H100 4-GPU: 4× H100 SXM5 (NVLink4 mesh, no NVSwitch) + 4×200 Gb/s InfiniBand", 4,
            Link.from_units(_NVLINK_US, 450.0), Link.from_units(_NET_US, 4 * 200 / 8),
            source="NVIDIA H100 datasheet: H100 SXM5, 18 NVLink4 links (900 GB/s both ways), PCIe Gen5, "
                   "compute capability 9.0; the HGX H100 4-GPU board as HPC centres run it: SURF's Snellius "
                   "gpu_h100 (SURF's Snellius partitions page: 4 H100 GPUs and 64 cores a node; NCCL's "
                   "affinity masks in the runs below, ffffffff and ffffffff,00000000: 2 sockets of 32; "
                   "the CUDA device name 'NVIDIA H100'), whose 4 InfiniBand ports each read 'Rate: "
                   "200' in ibstat (odissei-benchmarks/nccl-tests "
                   "runs/2nodes/ib_speed.txt) and carry NCCL's NET/IB/1 to /4 between hosts in the same "
                   "repository's runs; KU Leuven's wICE gpu_h100 (4× H100 80 GB HBM3 with NVLink, 2× AMD "
                   "EPYC 9334: hpcleuven/VscDocumentation source/leuven/tier2_hardware/wice_hardware.rst); "
                   "BSC's MareNostrum 5 ACC (BullSequana XH3000, 4× H100 64 GB, 2× Intel Sapphire Rapids). "
                   "CPU taken as AMD: wICE's Genoa hosts, whose 2 sockets of 32 cores Snellius's masks "
                   "match (NCCL's network overhead is 2 µs a post on AMD, 1 on Intel: tuning.cc "
                   "getNetOverhead). " + _H100_4GPU,
            gpu="H100 SXM5 (4-GPU board)", compute_capability=90, nvlink_gen=4, nvlinks_per_gpu=18,
            nvswitch_gen=0, pcie_gen=5, nics_per_node=4, nic_Gbps=200.0, cpu_vendor="amd",
            in_network_reduction=(),
        ),
        Topology(
            "dgx-spark", "NVIDIA DGX Spark: one GB10 (Blackwell, unified memory) + ConnectX-7 200 Gb/s",
            1, Link.from_units(_PCI_US, 48.0), Link.from_units(_NET_US, 200 / 8),  # no peers: intra unused
            source="NVIDIA DGX Spark data sheet and user guide: one GB10 Grace Blackwell superchip (a "
                   "Blackwell GPU, compute capability 12.1 / sm_121, joined to a 20-core Arm CPU by "
                   "NVLink-C2C), 128 GB of unified LPDDR5x at 273 GB/s, no NVLink to other GPUs; a "
                   "ConnectX-7 SmartNIC of 200 Gb/s (two QSFP ports), two Sparks joined back to back by one "
                   "QSFP cable. " + _SPARK_NIC,
            gpu="GB10", compute_capability=121, nvlink_gen=0, nvlinks_per_gpu=0, nvswitch_gen=0,
            pcie_gen=5, nics_per_node=2, nic_Gbps=100.0, cpu_vendor="arm", in_network_reduction=(),
            nic_via_c2c=True,
        ),
        *AWS_PRESETS,
        _pcie_box(3, 15.75, 100.0, "V100 PCIe", 70,
                  "PCI-SIG PCIe 3.0: 8 GT/s × 16 lanes × 128/130 = 15.75 GB/s each way; ConnectX-4/5 "
                  "EDR 100 Gb/s = 12.5 GB/s; GPUs taken as V100 PCIe (PCIe Gen3 x16; V100 datasheet)"),
        _pcie_box(4, 31.5, 200.0, "A100 PCIe", 80,
                  "PCI-SIG PCIe 4.0: 16 GT/s × 16 lanes × 128/130 = 31.5 GB/s each way; "
                  "ConnectX-6 HDR 200 Gb/s = 25 GB/s; GPUs taken as A100 PCIe (no NVLink bridge)"),
        _pcie_box(5, 63.0, 400.0, "H100 PCIe", 90,
                  "PCI-SIG PCIe 5.0: 32 GT/s × 16 lanes × 128/130 = 63.0 GB/s each way; ConnectX-7 NDR "
                  "400 Gb/s = 50 GB/s; GPUs taken as H100 PCIe (PCIe Gen5 x16, no NVLink bridge; H100 "
                  "datasheet)"),
        Topology(
            "ethernet-100g", "Commodity cluster: 8 PCIe 4.0 GPUs per node, one 100 GbE NIC per node", 8,
            Link.from_units(_PCI_US, 31.5), Link.from_units(_NET_US, 12.5),
            source="IEEE 802.3 100GBASE: 100 Gb/s = 12.5 GB/s per node; PCIe 4.0 x16 31.5 GB/s; "
                   "NCCL network hop latency (RoCE/IB) as the α, TCP sockets are slower; "
                   "GPUs taken as A100 PCIe",
            gpu="A100 PCIe", compute_capability=80, nvlink_gen=0, nvlinks_per_gpu=0, nvswitch_gen=0,
            pcie_gen=4, nics_per_node=1, nic_Gbps=100.0, cpu_vendor="intel", in_network_reduction=(),
            **_PCIE_LAYOUT,
        ),
        *AMD_PRESETS,
    )
}
TOPOLOGY_NAMES: tuple[str, ...] = tuple(PRESETS)
DEFAULT_TOPOLOGY = "dgx-a100"


def get_topology(name: str | Topology) -> Topology:
    """The preset called ``name``; :class:`UnknownNameError` otherwise."""
    if isinstance(name, Topology):
        return name
    try:
        return PRESETS[name]
    except KeyError:
        pass
    try:  # names are case-insensitive: DGX-H100 is dgx-h100
        return PRESETS[str(name).strip().lower()]
    except KeyError:
        raise UnknownNameError("topology", str(name), TOPOLOGY_NAMES) from None
