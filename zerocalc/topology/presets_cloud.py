"""The cloud presets: Google Cloud's A3 Mega and A3 High (GPUDirect-TCPXO and -TCPX, with the NCCL
environment each plugin's releases set) and AWS's p4d, p4de, p5, p5e, p5en, p6-b200 and p6-b300 (EFA through
aws-ofi-nccl), each figure citing its page or source file. :mod:`zerocalc.topology.presets` holds them among
the other presets, in its order (:data:`GCP_PRESETS` after the HGX boards, :data:`AWS_PRESETS` after the
one-GPU DGX Spark).
"""

from __future__ import annotations

from zerocalc.nccl.net_socket import VM_SOCKET_HOP_US
from zerocalc.topology.hgx import hgx8 as _hgx8
from zerocalc.topology.machine import PRESET_NET_US, PRESET_NVLINK_US, Link, NcclEnv, Topology

_NVLINK_US, _NET_US = PRESET_NVLINK_US, PRESET_NET_US

_TCPXO_NOTES = ("GoogleCloudPlatform/container-engine-accelerators, gpudirect-tcpxo/README.md "
                "(GPUDirect-TCPXO release notes: each release's NCCL configs and its NCCL)")
_TCPXO_TUNER = "Google's tuner plugin libnccl-tuner.so with a3plus_tuner_config.textproto"
#: GPUDirect-TCPXO's flows an NCCL connection spreads its requests over, each whole on one, round robin
#: (google/nccl-plugin-gpudirect-tcpxo ``const_params.h`` ``kFastrakNumFlows``, default 2, and
#: ``nccl_shim.cc`` ``GetRequest``), and the NCCL_BUFFSIZE that sizes a ring step's messages: both as every
#: release's NCCL configs in GCP's notes set them (NCCL_FASTRAK_NUM_FLOWS=2, NCCL_BUFFSIZE=8388608, Apr 17
#: 2024 to Jan 9 2026, and the plugin's ``tcpxo_scripts/nccl-env-profile.sh``); :mod:`zerocalc.nccl.tcp_flows`
_TCPXO_FLOWS, _TCPXO_BUFFSIZE = 2, 8 << 20
#: No wire latency is timed for TCPXO (no ``net_wire_latency_us``, unlike A3 High's TCPX below): its data
#: path is not the guest's kernel TCP stack that a GCE VM's TCP round trip (``VM_SOCKET_HOP_US``) measures,
#: but "a custom RDMA offload on our IPUs" (google/nccl-plugin-gpudirect-tcpxo README.md), each request
#: handed to the host's offload engine over shared-memory queues (the plugin's ``dxs/client``;
#: NCCL_FASTRAK_USE_LLCM=1 in every profile), and Google publishes no latency for it (its
#: ``tcpxo_prober`` measures round trips between GPU NICs and prints none).
#: The NCCL environment GCP's GPUDirect-TCPXO profile (nccl-env-profile.sh) sets, by the NCCL its plugin
#: installer ships: 2.21.5 with installers v1.0.3-v1.0.7 (Jun-Nov 2024); 2.23 by default with v1.0.9-v1.0.11
#: (May-Jun 2025; v1.0.8, Feb 2025, still had NCCL_PROTO=Simple); 2.26.5 with v1.0.12 (Aug 2025) and 2.28.7
#: with v1.0.14-v1.0.15 (Nov 2025-Jan 2026), which drop NCCL_ALGO and NCCL_NVLS_ENABLE=0 for NVLS Tree.
#: Every one of those releases sets NCCL_MIN_NCHANNELS=4. Its other variables are not carried here: NCCL's
#: model reads none of them (NCCL_BUFFSIZE, NCCL_P2P_*_CHUNKSIZE and NCCL_NVLSTREE_MAX_CHUNKSIZE size chunks
#: in enqueue.cc and the p2p path; NCCL_CROSS_NIC and NCCL_NET_GDR_LEVEL shape the graph search, which
#: zerocalc derives from the preset's figures; tuning.cc reads none of them at 2.21.5, 2.26.2 or 2.30.7);
#: NCCL_FASTRAK_* belong to the network plugin (google/nccl-plugin-gpudirect-tcpxo const_params.h), whose
#: only figures NCCL's model reads are a NIC's speed and latency (nccl_shim.cc getProperties); and
#: NCCL_DYNAMIC_CHUNK_SIZE is read by neither NCCL (v2.21.5, v2.30.7) nor the plugin's published source.
#: NCCL_BUFFSIZE and NCCL_FASTRAK_NUM_FLOWS time the run's ring steps instead (the preset's
#: ``nccl_buffsize`` and ``net_flows``, above).
#: The last profile stands for the releases after 2.28 too: it is the plugin's (google/
#: nccl-plugin-gpudirect-tcpxo ``tcpxo_scripts/nccl-env-profile.sh``, unchanged from v1.0.12, Aug 21 2025,
#: to v1.0.17, Jun 26 2026), reads no NCCL version and sets the same variables whatever NCCL the workload
#: loads, as GPUDirect-TCPX's configs do (below). Google qualifies it with NCCL 2.28.7 alone (the plugin's
#: README, "Supported Version"); no release of it names 2.29 or 2.30.
_TCPXO_ENV = (
    NcclEnv("2.21", "2.21", algo="Ring,Tree", proto="Simple", nvls_enable=False, min_nchannels=4,
            tuner=_TCPXO_TUNER,
            source=_TCPXO_NOTES + ", releases of Jun 27 2024 (v1.0.3) to Nov 27 2024 (v1.0.7), NCCL 2.21.5"),
    NcclEnv("2.22", "2.23", algo="Ring,Tree", proto="Simple,LL128", nvls_enable=False, min_nchannels=4,
            tuner=_TCPXO_TUNER,
            source=_TCPXO_NOTES + ", releases of May 01 2025 (v1.0.9-1) and Jun 27 2025 (v1.0.11), "
                   "NCCL 2.23"),
    NcclEnv("2.26", "2.30", proto="Simple,LL128", min_nchannels=4,
            tuner=_TCPXO_TUNER,
            source=_TCPXO_NOTES + ", releases of Aug 21 2025 (v1.0.12, NCCL 2.26.5) to Jan 9 2026 (v1.0.15, "
                   "NCCL 2.28.7); for later NCCL, the plugin's own profile (google/"
                   "nccl-plugin-gpudirect-tcpxo tcpxo_scripts/nccl-env-profile.sh, the same v1.0.12 to "
                   "v1.0.17), which reads no NCCL version"),
)


_TCPX_NOTES = ("GoogleCloudPlatform/container-engine-accelerators, gpudirect-tcpx/README.md "
               "(GPUDirect-TCPX release notes: each release's NCCL configs and its NCCL)")
#: GPUDirect-TCPX (A3 High): each NCCL connection opens NCCL_NSOCKS_PERTHREAD × NCCL_SOCKET_NTHREADS data
#: sockets (google/nccl-plugin-gpudirecttcpx ``src/connect.cc``, at most ``MAX_SOCKETS`` = 8, ``macro.h``),
#: 4 × 1 in every release's NCCL configs in GCP's notes (Feb 15 2024, v3.1.9, NCCL 2.19.3; Jun 22 2026,
#: v3.1.12, NCCL 2.19.4) and in GKE's and dstack's A3 High nccl-tests; ``net_tcpx.cc`` (``tcpxTest``) cuts
#: each request into pieces of at most ``NCCL_DYNAMIC_CHUNK_SIZE`` bytes (default 128 KiB, ``flags.cc``;
#: 524288 in the same configs), each piece on the next free socket (``flow_mapper->pickFlow()``); the
#: configs' NCCL_BUFFSIZE=4194304 is NCCL's default. :mod:`zerocalc.nccl.tcp_flows`
_TCPX_FLOWS, _TCPX_PIECE, _TCPX_BUFFSIZE = 4, 512 << 10, 4 << 20
#: GPUDirect-TCPX moves each request as TCP between two GCE VMs (the gVNIC's kernel TCP stack, the payload
#: written to GPU memory; google/nccl-plugin-gpudirecttcpx ``src/net_tcpx.cc``), and under the plugin's
#: receiver sync (``kRecvSync``, on by default, ``flags.cc``) a send starts only once the receiver's posted
#: receive has crossed the control socket (``socketSend(comm->ctrl_fd, &idx, ...)`` on the receiving side,
#: ``socketRecv`` before the send goes active). Each network step therefore takes a TCP message's one-way
#: trip between two VMs (:data:`zerocalc.nccl.net_socket.VM_SOCKET_HOP_US`, half the published round trip
#: between GCE VMs of one zone), where the plugin tells NCCL 0: the preset's ``net_wire_latency_us``, a time
#: figure (NCCL chooses with its 0); :func:`zerocalc.nccl.tune_model.ring_run_latency_us` paces the ring.
_TCPX_WIRE_US = VM_SOCKET_HOP_US
#: The NCCL environment GCP's GPUDirect-TCPX configs set (the notes above; GKE's ``gpudirect-tcpx/
#: nccl-config.yaml`` ``run-nccl.sh``; dstackai/dstack ``examples/clusters/a3high/README.md``):
#: NCCL_ALGO=Ring, NCCL_PROTO=Simple with the plugin installer's NCCL 2.19 (release of Feb 15 2024, v3.1.9;
#: the release of Jun 22 2026, v3.1.12, allows Ring,Tree). No NCCL_MIN/MAX_NCHANNELS. The configs are the
#: plugin's, set whatever NCCL loads it (the installer ships only 2.19), so they stand for every modelled
#: release from the installer's 2.19 on. Its other variables are the plugin's (NCCL_GPUDIRECTTCPX_*) or
#: shape chunks and the graph search, as for TCPXO above.
_TCPX_ENV = (
    NcclEnv("2.19", "2.30", algo="Ring", proto="Simple",
            source=_TCPX_NOTES + ", release of Feb 15 2024 (v3.1.9, NCCL 2.19.3); GKE's gpudirect-tcpx/"
                   "nccl-config.yaml"),
)


#: What NCCL's model reads of AWS's EFA network, from the aws-ofi-nccl plugin NCCL loads for it
#: (aws/aws-ofi-nccl, ``src/platform-aws.cpp`` platform table and ``src/nccl_ofi_rdma.cpp``; v1.16):
#: the latency it reports to NCCL (``props->latency``, NCCL's ``latencyInter`` in tuning.cc) is 75 µs on
#: p4d, p4de, p5 and p5e and 35 µs on p5en (since its commit 2496e7d, May 2025, "based on empirical
#: search"; 75 µs before and on unknown platforms); p4d/p4de use its SENDRECV protocol, one NCCL
#: device per EFA NIC; p5/p5e/p5en its RDMA protocol, which joins the NICs of a GPU's PCIe switch into
#: one NCCL device whose speed is their sum (``port_speed *= max_group_size``).
#:
#: That reported latency steers NCCL's choice; it is not what the wire takes. AWS's own model of the
#: network in the same plugin (its tuner, ``src/tuner/nccl_ofi_model.cpp`` ``model_platform_params``,
#: v1.16.0; ``include/nccl_ofi_tuner.h`` ``tuner_net_latency`` since v1.8.1, "different from the
#: network plugin's param for net latency by design") puts a network hop at 20 µs on p5 and p5e and
#: 18 µs on p5en ("2 nodes, 8B RDMA w/imm lat"), so calls are timed with those
#: (``net_wire_latency_us``). p4d/p4de have no such figure (the tuner models P5 only) and keep 75 µs.
#:
#: A network message above 8 KiB waits on a message of the receiver before its payload moves (the RDMA
#: protocol's control message, the SENDRECV protocol's read by libfabric's EFA provider): the
#: ``net_eager_bytes`` of every AWS preset (:mod:`zerocalc.nccl.ofi_efa`, ``EAGER_BYTES``: aws-ofi-nccl's
#: ``OFI_NCCL_EAGER_MAX_SIZE`` default, ``include/nccl_ofi_param.h``).
#:
#: p6-b200 and p6-b300 (aws-ofi-nccl v1.21.1 ``platform-aws.cpp``: the ``p5en/p6-b200`` and ``p6-b300``
#: entries, and the ``p-series`` entry that took both from v1.15.0) report 35 µs and use the RDMA protocol;
#: the tuner's model has no P6 parameters (``model_platform_params`` holds P5/P5e and P5en only), so no
#: wire figure is given and calls are timed with the 35 µs, as p4d keeps its 75.
_EFA_PLUGIN = "aws-ofi-nccl platform-aws.cpp: net latency 75 µs (p5en 35)"
_EFA_WIRE = "its tuner model (nccl_ofi_model.cpp): wire 20 µs (p5en 18)"
_EFA_LATENCY_US, _EFA_V3_LATENCY_US = 75.0, 35.0
_EFA_P5_WIRE_US, _EFA_P5EN_WIRE_US = 20.0, 18.0
EFA_EAGER_BYTES = 8192
_EFA_P6 = ("aws-ofi-nccl v1.21.1 platform-aws.cpp: net latency 35 µs, RDMA protocol (no wire figure: its "
           "tuner's model has no P6 parameters)")


def _p6(gpu: str, nic_Gbps: float, pcie_gen: int, source: str, efa: str = "EFA") -> Topology:
    """AWS p6-b200.48xlarge / p6-b300.48xlarge: an HGX board of 8 Blackwell GPUs on NVLink5 switches
    (1,800 GB/s GPU peer-to-peer, 18 links, NVLink SHARP), EFA through aws-ofi-nccl's RDMA protocol (one
    NCCL device a GPU of ``nic_Gbps``), Intel hosts (:data:`_EFA_P6`)."""
    name = f"aws-p6-{gpu.lower()}"
    return _hgx8(
        name, f"AWS {name.removeprefix('aws-')}.48xlarge: 8× {gpu} NVLink5 + {8 * nic_Gbps:,.0f} Gb/s {efa} "
        f"(8 NCCL devices × {nic_Gbps:g} Gb/s)", 900.0, source=source + "; " + _EFA_P6,
        gpu=f"{gpu} SXM", compute_capability={"B200": 100, "B300": 103}[gpu], nvlink_gen=5, nvswitch_gen=4,
        nic_Gbps=nic_Gbps, pcie_gen=pcie_gen, net_latency_us=_EFA_V3_LATENCY_US,
        net_eager_bytes=EFA_EAGER_BYTES,
    )


def _p4(name: str, gpu_gb: int) -> Topology:
    """AWS p4d.24xlarge / p4de.24xlarge: an HGX A100 board (8 A100-SXM4 on 6 NVSwitches, NVLink3 600 GB/s
    per GPU), 4× 100 Gb/s EFA, PCIe 4.0, 2× Intel Xeon Platinum 8275CL (Cascade Lake)."""
    inst = f"{name.removeprefix('aws-')}.24xlarge"
    return Topology(
        name, f"AWS {inst}: 8× A100-SXM4-{gpu_gb}GB NVLink3 + 4×100 Gb/s EFA", 8,
        Link.from_units(_NVLINK_US, 300.0), Link.from_units(_NET_US, 4 * 100 / 8),
        source=f"AWS EC2 P4 page ({inst}: 8× A100 {gpu_gb} GB, NVSwitch 600 GB/s GPU peer-to-peer, "
               "4× 100 Gb/s EFA, Intel Xeon 8275CL); A100 SXM4 datasheet (NVLink3, 12 links); PCIe 4.0; "
               f"{_EFA_PLUGIN}",
        gpu=f"A100 SXM4 {gpu_gb}GB", compute_capability=80, nvlink_gen=3, nvlinks_per_gpu=12, nvswitch_gen=2,
        pcie_gen=4, nics_per_node=4, nic_Gbps=100.0, cpu_vendor="intel", in_network_reduction=(),
        net_latency_us=_EFA_LATENCY_US, net_eager_bytes=EFA_EAGER_BYTES,
    )


GCP_PRESETS: tuple[Topology, ...] = (
    _hgx8(
        "gcp-a3-mega", "Google Cloud A3 Mega: 8× H100 NVLink4 + 8×200 Gb/s GPUDirect-TCPXO", 450.0,
        source="Google Cloud a3-megagpu-8g: 8× H100 80 GB (HGX H100: NVLink4 18 links, third-generation "
               "NVSwitch), 8 GPU NICs × 200 Gb/s (GPUDirect-TCPXO; 1,800 Gb/s with the host NIC); "
               "Intel Xeon (Sapphire Rapids) hosts; PCIe 5.0; the TCPXO plugin reports no network "
               "latency (google/nccl-plugin-gpudirect-tcpxo nccl_shim.cc: props.latency = 0, NCCL's "
               "latencyInter in tuning.cc via topo.cc and search.cc, 2.19 to 2.30)",
        gpu="H100 SXM5", compute_capability=90, nvlink_gen=4, nvswitch_gen=3, nic_Gbps=200.0,
        net_latency_us=0.0, nccl_env=_TCPXO_ENV, net_flows=_TCPXO_FLOWS, nccl_buffsize=_TCPXO_BUFFSIZE,
    ),
    _hgx8(
        "gcp-a3-high", "Google Cloud A3 High: 8× H100 NVLink4 + 4×200 Gb/s GPUDirect-TCPX", 450.0,
        source="Google Cloud a3-highgpu-8g: 8× H100 80 GB (HGX H100: NVLink4 18 links, third-generation "
               "NVSwitch), 4 GPU NICs × 200 Gb/s (gVNIC, GPUDirect-TCPX; 1,000 Gb/s over five NICs with "
               "the host's: dstackai/dstack examples/clusters/a3high/README.md; GKE's four "
               "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME devices eth1-eth4), one NIC to each pair of GPUs; "
               "Intel Xeon (Sapphire Rapids) hosts; PCIe 5.0; the TCPX plugin reports no network latency "
               "(google/nccl-plugin-gpudirecttcpx net_tcpx.cc tcpxGetProperties: props->latency = 0)",
        gpu="H100 SXM5", compute_capability=90, nvlink_gen=4, nvswitch_gen=3, nic_Gbps=200.0, nics=4,
        net_latency_us=0.0, nccl_env=_TCPX_ENV, net_flows=_TCPX_FLOWS, nccl_buffsize=_TCPX_BUFFSIZE,
        net_flow_piece=_TCPX_PIECE, net_wire_latency_us=_TCPX_WIRE_US,
    ),
)
AWS_PRESETS: tuple[Topology, ...] = (
    _p4("aws-p4d", 40),
    _p4("aws-p4de", 80),
    _hgx8(
        "aws-p5", "AWS p5.48xlarge: 8× H100 NVLink4 + 3,200 Gb/s EFA (8 NCCL devices × 400 Gb/s)", 450.0,
        source="AWS EC2 P5 page (p5.48xlarge: 8× H100 80 GB, NVSwitch 900 GB/s, 32× 100 Gb/s EFAv2 "
               "grouped 4 per GPU by the plugin's RDMA protocol, AMD EPYC 7R13, PCIe Gen5 switches); "
               "H100 SXM datasheet (NVLink4, 18 links, NVSwitch 3, NVLink SHARP); " + _EFA_PLUGIN + "; "
               + _EFA_WIRE,
        gpu="H100 SXM5", compute_capability=90, nvlink_gen=4, nvswitch_gen=3, nic_Gbps=400.0,
        cpu_vendor="amd", net_latency_us=_EFA_LATENCY_US, net_wire_latency_us=_EFA_P5_WIRE_US,
        net_eager_bytes=EFA_EAGER_BYTES,
    ),
    _hgx8(
        "aws-p5e", "AWS p5e.48xlarge: 8× H200 NVLink4 + 3,200 Gb/s EFA (8 NCCL devices × 400 Gb/s)",
        450.0,
        source="AWS EC2 P5 page (p5e.48xlarge: 8× H200 141 GB, NVSwitch 900 GB/s, 3,200 Gb/s EFA, AMD "
               "EPYC 7R13); as aws-p5 otherwise; " + _EFA_PLUGIN + "; " + _EFA_WIRE,
        gpu="H200 SXM", compute_capability=90, nvlink_gen=4, nvswitch_gen=3, nic_Gbps=400.0,
        cpu_vendor="amd", net_latency_us=_EFA_LATENCY_US, net_wire_latency_us=_EFA_P5_WIRE_US,
        net_eager_bytes=EFA_EAGER_BYTES,
    ),
    _hgx8(
        "aws-p5en", "AWS p5en.48xlarge: 8× H200 NVLink4 + 3,200 Gb/s EFAv3 (8 NCCL devices × 400 Gb/s)",
        450.0,
        source="AWS EC2 P5 page (p5en.48xlarge: 8× H200 141 GB, NVSwitch 900 GB/s, 16× 200 Gb/s EFAv3, "
               "Intel Xeon Sapphire Rapids, PCIe Gen5 CPU-GPU); as aws-p5 otherwise; " + _EFA_PLUGIN
               + "; " + _EFA_WIRE,
        gpu="H200 SXM", compute_capability=90, nvlink_gen=4, nvswitch_gen=3, nic_Gbps=400.0,
        net_latency_us=_EFA_V3_LATENCY_US, net_wire_latency_us=_EFA_P5EN_WIRE_US,
        net_eager_bytes=EFA_EAGER_BYTES,
    ),
    _p6("B200", 400.0, 5,
        "AWS EC2 P6 page (p6-b200.48xlarge: 8× B200, 1,440 GB HBM3e, NVLink 1,800 GB/s GPU peer-to-peer, "
        "3,200 Gb/s EFAv4 as 8× 400 Gb/s, one NIC a GPU (aws-ofi-nccl nccl_ofi_gin_gdaki_dev.h: "
        "\"p6-b200 has 1\"), Intel Xeon Emerald Rapids, PCIe Gen5 CPU-GPU); DGX B200 datasheet (NVLink5, "
        "NVSwitch 4, NVLink SHARP)", efa="EFAv4"),
    _p6("B300", 800.0, 6,
        "AWS EC2 P6 page (p6-b300.48xlarge: 8× B300, 2.1 TB HBM3e, NVLink 1,800 GB/s GPU peer-to-peer, "
        "6,400 Gb/s EFA, Intel Xeon); 800 Gb/s a GPU (the node's 6,400 over 8 GPUs: aws-ofi-nccl's RDMA "
        "protocol joins the NICs of a GPU's PCIe switch into one NCCL device) is more than PCIe Gen5 x16 "
        "carries (63 GB/s), so the GPU-NIC path is taken as the B300's PCIe Gen6 (HGX B300 page); "
        "compute capability 10.3, priced by NCCL as 10.0 (see dgx-b300)"),
)
