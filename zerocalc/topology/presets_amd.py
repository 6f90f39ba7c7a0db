"""AMD Instinct platforms as presets: the 8-GPU OAM boards (MI300X, MI325X, MI350X, MI355X), the HPE Cray
EX235a node of 4 MI250X (8 GCDs) and the EX255a node of 4 MI300A APUs, each figure citing its data sheet or
centre page. Their GPUs run RCCL, priced by :mod:`zerocalc.nccl.rccl`; :mod:`zerocalc.topology.presets`
lists them with the NVIDIA machines.
"""

from __future__ import annotations

from zerocalc.topology.machine import PRESET_NET_US, PRESET_NVLINK_US, Link, Topology


def _amd_oam8(name: str, gpu: str, source: str, *, arch: str = "gfx942", link_GBps: float = 64.0) -> Topology:
    """AMD's 8-GPU OAM platform (gfx942: MI300X, MI325X; gfx950: MI350X, MI355X): every GPU joined to each
    of its 7 peers by one Infinity Fabric (xGMI) link, ``link_GBps`` each way at peak (gfx942: 64 GB/s,
    7 × 64 = 448 GB/s per GPU; gfx950: 76.8 GB/s, half the 153.6 GB/s AMD's MI355X data sheet gives per
    link both ways), PCIe Gen5 x16 from each GPU to the host and to its NIC, one 400 Gb/s NIC per GPU.
    RCCL prices a link at 48 GB/s on both (what is left after protocol and error-correction overheads;
    ``topo.h`` ``GFX94X_XGMI_WIDTH`` / ``GFX95X_XGMI_WIDTH``; :mod:`zerocalc.nccl.rccl`), which its model
    reads instead of the links here. The host CPU is not fixed by the platform (OEMs ship it with
    AMD EPYC or Intel Xeon hosts): AMD EPYC is assumed; it changes only RCCL's network overhead per ring
    step across nodes (2 µs on AMD, 1 on Intel, ``tuning.cc`` ``getNetOverhead``)."""
    width = "GFX94X_XGMI_WIDTH" if arch == "gfx942" else "GFX95X_XGMI_WIDTH"
    return Topology(
        name, f"AMD Instinct {gpu} platform: 8 GPUs fully connected by xGMI + 8×400 Gb/s NICs", 8,
        Link.from_units(PRESET_NVLINK_US, 7 * link_GBps), Link.from_units(PRESET_NET_US, 8 * 400 / 8),
        source=source + f"; xGMI links rated {link_GBps:g} GB/s each way, 48 as RCCL counts them (ROCm "
               f"blog on RCCL and xGMI, Mar 2025; RCCL topo.h {width}); 8 × 400 Gb/s NICs (RCCL's 8-NIC "
               "rome models); AMD EPYC hosts assumed",
        gpu=gpu, gpu_arch=arch, pcie_gen=5, nics_per_node=8, nic_Gbps=400.0, cpu_vendor="amd",
        in_network_reduction=(),
    )


def _amd_mi300a() -> Topology:
    """An HPE Cray EX255a node of LLNL's El Capitan, Tuolumne and RZAdams (LLNL's El Capitan systems page):
    4 AMD Instinct MI300A APUs (gfx942 GPU and Zen 4 CPU cores sharing 128 GB of HBM3), each its own socket
    and NUMA domain, every APU "fully connected to its peers using two AMD Infinity Fabric links with
    256GB/s of bandwidth" (a pair's two links, 64 GB/s each way each: 6 × 64 = 384 GB/s per APU), one HPE
    Slingshot-11 NIC of 200 Gb/s per APU. RCCL prices a link at 48 GB/s (``GFX94X_XGMI_WIDTH``) and matches
    this node to ``rome_model_80`` (no tuning option: model 0; :mod:`zerocalc.nccl.rccl`)."""
    return Topology(
        "amd-mi300a", "HPE Cray EX255a (El Capitan): 4 MI300A APUs, 2 xGMI links a pair + 4×200 Gb/s "
        "Slingshot-11", 4,
        Link.from_units(PRESET_NVLINK_US, 6 * 64.0), Link.from_units(PRESET_NET_US, 4 * 200 / 8),
        source="LLNL El Capitan systems page (4 MI300A a node, each its own socket, fully connected by two "
               "Infinity Fabric links a pair, 256 GB/s); AMD MI300A data sheet (xGMI 128 GB/s a link both "
               "ways); 4 Slingshot-11 200 Gb/s NICs, one per APU (RCCL rome_model_80: 4 GPUs, 4 NICs); "
               "RCCL topo.h GFX94X_XGMI_WIDTH 48 GB/s",
        gpu="MI300A", gpu_arch="gfx942", pcie_gen=5, nics_per_node=4, nic_Gbps=200.0, cpu_vendor="amd",
        in_network_reduction=(),
    )


def _amd_mi250x() -> Topology:
    """An HPE Cray EX235a node, OLCF's Frontier and CSC's LUMI-G (OLCF Frontier user guide, "Node types";
    LUMI documentation, "GPU nodes - LUMI-G"): one 64-core AMD EPYC 7A53 "Trento", 4 AMD Instinct MI250X,
    each two GCDs that the software sees as 8 GPUs (gfx90a), joined by Infinity Fabric: the two GCDs of one
    MI250X by 4 links (200 GB/s), GCDs of different MI250X by 1 or 2 (50 or 100 GB/s), each GCD's 7 links
    4 + 2 + 1 at 50 GB/s = 350 GB/s; 4 HPE Slingshot-11 NICs of 200 Gb/s (25 GB/s), one on each MI250X.
    RCCL prices an MI200 xGMI link at 36 GB/s (``topo.h`` ``MI200_XGMI_WIDTH``) and this node's GCDs by
    ``rome_models.cc`` ``rome_model_73`` / ``74`` (:mod:`zerocalc.nccl.rccl`); the network plugin
    (aws-ofi-rccl over libfabric's cxi provider) reports no latency to it."""
    return Topology(
        "amd-mi250x",
        "HPE Cray EX235a (Frontier, LUMI-G): 4 MI250X = 8 GCDs on xGMI + 4×200 Gb/s Slingshot-11", 8,
        Link.from_units(PRESET_NVLINK_US, 7 * 50.0), Link.from_units(PRESET_NET_US, 4 * 200 / 8),
        source="OLCF Frontier user guide (EX235a node: 4 MI250X, 8 GCDs; GCD pairs on one MI250X 200 GB/s, "
               "across MI250X 50-100 GB/s; 4 Slingshot-11 200 Gb/s NICs attached to the MI250X); LUMI "
               "documentation (LUMI-G: the same node); AMD EPYC 7A53 host; RCCL topo.h MI200_XGMI_WIDTH 36 "
               "GB/s; rome_models.cc rome_model_73/74",
        gpu="MI250X", gpu_arch="gfx90a", pcie_gen=4, nics_per_node=4, nic_Gbps=200.0, cpu_vendor="amd",
        in_network_reduction=(),
    )


AMD_PRESETS: tuple[Topology, ...] = (
    _amd_oam8("amd-mi300x", "MI300X",
              "AMD Instinct MI300X platform data sheet: 8 OAM (192 GB HBM3), Infinity Fabric mesh, "
              "128 GB/s bidirectional per GPU pair, PCIe Gen5"),
    _amd_oam8("amd-mi325x", "MI325X",
              "AMD Instinct MI325X platform data sheet: 8 OAM (256 GB HBM3E), the MI300X platform's "
              "mesh (the same gfx942 die), PCIe Gen5"),
    _amd_oam8("amd-mi350x", "MI350X",
              "AMD Instinct MI350 series data sheet: MI350X, 8 OAM (288 GB HBM3E, gfx950), Infinity "
              "Fabric mesh, 7 links of 153.6 GB/s both ways per GPU, PCIe Gen5",
              arch="gfx950", link_GBps=76.8),
    _amd_oam8("amd-mi355x", "MI355X",
              "AMD Instinct MI350 series data sheet: MI355X, 8 OAM (288 GB HBM3E, gfx950), Infinity "
              "Fabric mesh, 7 links of 153.6 GB/s both ways per GPU, PCIe Gen5",
              arch="gfx950", link_GBps=76.8),
    _amd_mi250x(),
    _amd_mi300a(),
)
