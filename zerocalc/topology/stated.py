"""What a run's own lines state of its data's path, and what its price cannot know where they are silent.

A topology a run's lines picked (:mod:`zerocalc.topology.devices`) is changed here by what those lines
say: NCCL's TCP socket transport between hosts (:func:`over_sockets`), PCIe peer-to-peer on or off and
how far apart (:func:`with_stated_p2p`, NCCL_P2P_LEVEL), each GPU on a host bridge of its own
(:func:`on_own_host_bridges`), GPUDirect RDMA on or off (:func:`with_stated_gdr`); and the notes ``check``
prints where a rate is the hosts' and no line states it (:func:`socket_nic_note`,
:func:`gdr_unstated_note`, :func:`host_memory_note`)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

from zerocalc.nccl.env_given import where_set
from zerocalc.nccl.net_socket import VM_SOCKET_HOP_US
from zerocalc.topology.machine import P2P_LEVELS, Link, Topology

#: The speed NCCL gives a NIC of its socket transport whose link reports none (a VM's or container's
#: virtual NIC: ``/sys/class/net/<dev>/speed`` unreadable or not positive): "Could not get speed from
#: %s. Defaulting to 10 Gbps." (``src/transport/net_socket.cc``, ``ncclNetSocketGetSpeed``, v2.9 to
#: v2.30.7).
SOCKET_NIC_GBPS = 10.0


def over_sockets(topo: Topology, vm: bool = False) -> Topology:
    """A PCIe box's nodes joined by NCCL's TCP socket transport: one NIC of :data:`SOCKET_NIC_GBPS` (the
    file states no link speed; NCCL's own figure for a NIC that reports none) and no GPUDirect RDMA (the
    socket transport moves host memory alone: ``ptrSupport = NCCL_PTR_HOST``, ``net_socket.cc``); NCCL is
    told no network latency (``props->latency = 0``). ``vm``: the hosts are VMs (their GPUs on PCI bus 0,
    :func:`zerocalc.nccl.net_socket.on_vm`): each network step also takes a TCP message's one-way trip
    between two VMs (:data:`zerocalc.nccl.net_socket.VM_SOCKET_HOP_US`, the topology's
    ``net_wire_latency_us``, a time figure: NCCL still chooses with its 0)."""
    wire = VM_SOCKET_HOP_US if vm else None
    return replace(topo, nics_per_node=1, nic_Gbps=SOCKET_NIC_GBPS, gpudirect_rdma=False,
                   net_latency_us=0.0, net_wire_latency_us=wire,
                   inter=Link(alpha_s=topo.inter.alpha_s, bw_Bps=SOCKET_NIC_GBPS / 8 * 1e9))


def socket_nic_note(topo: Topology, ranks: int, network: Mapping[str, Sequence] | None) -> str:
    """What the price of a PCIe box's run across hosts over TCP sockets cannot know ('' otherwise): the
    rate and latency of the hosts' network (their NICs, the TCP stack, NCCL's proxy threads), which
    nccl-tests output never states: priced at :data:`SOCKET_NIC_GBPS` and NCCL's network hop, with a VM's
    TCP trip where the hosts are VMs. For the preset the file's lines chose (:func:`over_sockets`, where
    they state the socket transport or are VMs of one GPU naming no network), not a topology the user
    gave."""
    kinds = set(network or {})
    if kinds not in ({"socket"}, set()) or ranks <= topo.gpus_per_node or topo.nic_Gbps != SOCKET_NIC_GBPS \
            or topo.gpudirect_rdma is not False or topo.net_latency_us != 0:
        return ""  # the socket transport of :func:`over_sockets`, stated or assumed (a VM of one GPU)
    vm = topo.net_wire_latency_us
    hop = (f"NCCL's network hop latency and {vm:g} µs a step for a TCP message between two VMs (half a "
           "published round trip between VMs of one zone, zerocalc.nccl.net_socket)" if vm else
           "NCCL's network hop latency (bare-metal hosts: a VM's hosts take tens of µs more a step)")
    return (f"across hosts over TCP sockets the rate and latency are the hosts' (their NICs, the TCP stack, "
            f"NCCL's proxy threads), which the file does not state: priced at {SOCKET_NIC_GBPS:g} Gb/s, "
            f"NCCL's figure for a NIC that reports no speed (src/transport/net_socket.cc), and {hop}; "
            "--topology with a TOML of the hosts' NIC (nic_Gbps, net_wire_latency_us) prices a faster or "
            "slower link")


def with_stated_p2p(topo: Topology, stated: Mapping[str, Sequence] | None,
                    info: Mapping[str, Sequence] | None = None) -> tuple[Topology, str]:
    """``topo`` (a node without NVLink) with or without PCIe peer-to-peer as the run's lines say, and the
    words for it. NCCL's INFO lines, when the file has them, say what ran (``info``: kind → ``(value,
    line)``, :mod:`zerocalc.traces.nccl_info`): channels ``via P2P/…`` only, peer-to-peer (a GeForce card
    on a driver that allows it); ``via SHM/…`` only, none. Else the launch lines: no peer-to-peer under
    ``NCCL_P2P_DISABLE=1``, or ``NCCL_P2P_LEVEL`` below ``PIX`` (``LOC``, ``NVL``, or the old ``0``)
    (``src/graph/paths.cc`` ``ncclGetLevel`` / ``ncclTopoCheckP2p``: a pair further apart than the level
    goes through the CPU); a level of ``PIX`` to ``SYS`` replaces NCCL's default (``PXB``; ``SYS`` on AMD)
    as ``p2p_level`` (:func:`p2p_level_of`); INFO lines of P2P alone, every pair through, ``SYS``.
    ``stated``: variable → ``(value, line, ...)``
    (:mod:`zerocalc.traces.launch_env`)."""
    stated, info = stated or {}, info or {}
    if topo.nvlink_gen != 0:
        return topo, ""  # NVLink nodes: NCCL's model of their P2P is not PCIe's (see nccl.env)
    p2p, shm = info.get("intra_p2p"), info.get("intra_shm")
    if (p2p is None) != (shm is None):
        on = p2p is not None
        line = (p2p or shm)[1]
        how = "PCIe peer-to-peer" if on else "through host memory"
        # every channel printed P2P: whatever path its GPUs are apart, NCCL's level let it through
        level = "SYS" if on and topo.p2p_level is None else topo.p2p_level
        return replace(topo, gpu_p2p=on, p2p_level=level), (f"NCCL's INFO lines connect the GPUs via "
                                                            f"{'P2P' if on else 'SHM'} (line {line}): {how}")
    for key, off in (("NCCL_P2P_DISABLE", lambda v: v.strip() == "1"),
                     ("NCCL_P2P_LEVEL", lambda v: v.strip().upper() in ("LOC", "NVL", "0"))):
        if key in stated and off(str(stated[key][0])) and topo.gpu_p2p is not False:
            return replace(topo, gpu_p2p=False), (f"{key}={stated[key][0]}{where_set(stated[key][1])}: no "
                                                  "PCIe peer-to-peer, NCCL goes through host memory")
    level = p2p_level_of(str(stated["NCCL_P2P_LEVEL"][0])) if "NCCL_P2P_LEVEL" in stated else None
    if level and topo.gpu_p2p is not False and topo.p2p_level is None:
        how = {"PIX": "under one PCIe switch", "PXB": "under PCIe switches", "PHB": "through a CPU",
               "SYS": "across CPU sockets"}[level]
        value, line = stated["NCCL_P2P_LEVEL"][:2]
        words = (f"NCCL_P2P_LEVEL={value}{where_set(line)}: in place of NCCL's default level, PCIe "
                 f"peer-to-peer {how}; past it through host memory")
        return replace(topo, p2p_level=level), words
    return topo, ""


#: NCCL_P2P_LEVEL's old numbers (``src/graph/paths.cc`` ``levelsOldToNew``: 0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 and
#: up SYS) and the names between PXB and PHB, which for two GPUs' PCIe path are PXB
_OLD_LEVELS = {"1": "PIX", "2": "PXB", "3": "PHB", "P2C": "PXB", "PXN": "PXB"}


def p2p_level_of(value: str) -> str | None:
    """The PCIe P2P level (one of ``P2P_LEVELS``) NCCL takes from ``NCCL_P2P_LEVEL=value``, ``None`` where it
    allows no PCIe peer-to-peer or ignores the value (``src/graph/paths.cc`` ``ncclGetLevel``, v2.12-v2.30:
    a path type's name as NCCL spells it, upper case, or an old number, its first digit read)."""
    v = value.strip()
    if v in P2P_LEVELS:
        return v
    if v in _OLD_LEVELS:
        return _OLD_LEVELS[v]
    digits = v[:len(v) - len(v.lstrip("0123456789"))]
    if digits:
        return "SYS" if int(digits) >= 4 else _OLD_LEVELS.get(str(int(digits)))
    return None


def on_own_host_bridges(topo: Topology) -> tuple[Topology, str]:
    """``topo`` (a PCIe-only node) with each GPU on a host bridge of its own, and the words for it: what a
    run's device lines state where every GPU of a host sits on PCI bus 0 (``[0x00]``; ``[0001:00:00]``,
    ``[0002:00:00]``), the root bus of a PCI domain: no PCIe switch is between a GPU and the CPU, as a
    hypervisor presents passthrough GPUs (an Azure ``Standard_NC12s_v3`` VM: two V100 PCIe ``NODE`` apart
    in its ``nvidia-smi topo -m``, the bundled ``*-2xV100-PCIe-azure-nc12sv3-*`` sweeps' page). NCCL's
    path between two such GPUs crosses the CPU (``PATH_PHB``, ``src/graph/paths.cc``), past its default
    P2P level on Intel and ARM (``PATH_PXB``, ``ncclTopoCheckP2p``): NCCL goes through host memory
    (:func:`zerocalc.nccl.pcie.hop_via_host`)."""
    if topo.nvlink_gen != 0 or topo.gpus_per_pcie_switch == 1:
        return topo, ""
    how = "P2P" if topo.cpu_vendor == "amd" else "its P2P level stops short of it: SHM through host memory"
    return replace(topo, gpus_per_pcie_switch=1), ("as the device lines put each GPU on PCI bus 0 (a VM's "
                                                   "passthrough GPUs); NCCL's path between two crosses "
                                                   f"the CPU ({how})")


def with_stated_gdr(topo: Topology, stated: Mapping[str, Sequence] | None,
                    info: Mapping[str, Sequence] | None = None) -> tuple[Topology, str]:
    """``topo`` with or without GPUDirect RDMA (``gpudirect_rdma``) as the run's lines say, and the words
    for it. NCCL's INFO lines, when the file has them (``info``: kind → ``(value, line)``,
    :mod:`zerocalc.traces.nccl_info`): network channels ``via NET/…/GDRDMA`` only, GDR; ``via NET/…``
    without it only (or ``GPU Direct RDMA Disabled``), through host memory. Else the launch lines:
    ``NCCL_NET_GDR_LEVEL=LOC`` (or the old ``0``), "never use GPU Direct RDMA" (NCCL's environment
    documentation; ``src/graph/paths.cc`` ``ncclTopoCheckGdr``); its other levels depend on the PCI
    distance, which the file does not state. A topology that already says so is left as it is.
    ``stated``: variable → ``(value, line, ...)`` (:mod:`zerocalc.traces.launch_env`)."""
    stated, info = stated or {}, info or {}
    gdr, host = info.get("net_gdr"), info.get("net_host")
    if (gdr is None) != (host is None):
        on = gdr is not None
        line = (gdr or host)[1]
        if topo.gpudirect_rdma is None or topo.gpudirect_rdma != on:
            how = "GPUDirect RDMA" if on else "through host memory (no GPUDirect RDMA)"
            words = (f"NCCL's INFO lines connect the nodes {'with' if on else 'without'} GDRDMA "
                     f"(line {line}): {how}")
            return replace(topo, gpudirect_rdma=on), words
        return topo, ""
    level = stated.get("NCCL_NET_GDR_LEVEL")
    never = level is not None and str(level[0]).strip().upper() in ("LOC", "0")
    if never and topo.gpudirect_rdma is not False:
        words = f"NCCL_NET_GDR_LEVEL={level[0]}{where_set(level[1])}: no GPUDirect RDMA"
        return replace(topo, gpudirect_rdma=False), f"{words}, the network goes through host memory"
    return topo, ""


def stated_hcas(value: str) -> int | None:
    """How many network devices ``NCCL_IB_HCA=value`` names, ``None`` where the value does not say: a list
    of devices, each ``name[:port]``, optionally after ``=`` (exact match); ``^`` (exclude) and a bare
    prefix (``mlx5``, ``mlx5_``: every device whose name starts so) name no count; without ``=`` an entry
    is a prefix too (``mlx5_1`` also matches ``mlx5_10``), so the count is the least it names (NCCL's
    environment documentation, NCCL_IB_HCA; ``src/misc/utils.cc`` ``parseStringList`` / ``matchIfList``,
    v2.12-v2.30: each comma-separated entry one device, ``:port`` one of its ports). A launch line's shell
    quoting and escaped commas (``mlx5_0\\,mlx5_1``) are the shell's, not the value's."""
    v = value.strip().strip("\"'").replace("\\", "").lstrip("=")
    if not v or v.startswith("^"):
        return None
    names = [e.strip() for e in v.split(",") if e.strip()]
    devices = [e.split(":")[0] for e in names]
    if not names or not all(re.search(r"\d$", d) and not re.fullmatch(r"mlx\d", d) for d in devices):
        return None  # a driver's prefix (mlx5: every ConnectX device) names no count
    return len(set(names))


def at_most_hcas(value: str) -> int | None:
    """The most network devices ``NCCL_IB_HCA=value`` can select, ``None`` where the value does not bound
    them: the count of :func:`stated_hcas` where each entry matches one device alone, an exact list
    (``=`` first) or entries numbered 0 (``mlx5_0``: no device is numbered ``0n``); an entry such as
    ``mlx5_1`` is a prefix that also selects ``mlx5_10``, ``mlx5_11`` (``matchIfList``)."""
    v = value.strip().strip("\"'").replace("\\", "")
    k = stated_hcas(v)
    if k is None:
        return None
    devices = [e.strip().split(":")[0] for e in v.lstrip("=").split(",") if e.strip()]
    return k if v.startswith("=") or all(re.search(r"\D0$", d) for d in devices) else None


def with_stated_nics(topo: Topology, stated: Mapping[str, Sequence] | None,
                     ranks: int) -> tuple[Topology, str]:
    """A PCIe box whose nodes the run joins, with as many NICs a node as its ``NCCL_IB_HCA`` names
    (:func:`stated_hcas`; at most one a GPU of the node) where the box assumes fewer, and the words for
    it. The PCIe boxes state one NIC a node (:mod:`zerocalc.topology.presets`), an assumption the run's
    own list of devices replaces; each NIC keeps the box's speed, which the list does not state. An NVLink
    preset keeps the NICs its data sheet states unless the list selects fewer (:func:`at_most_hcas`: a run
    on one rail, ``NCCL_IB_HCA=mlx5_0``, or an exact list), which NCCL then uses alone (NCCL's environment
    documentation: only the listed devices); not where a network plugin moves the data (``aws-`` / ``gcp-``
    presets). A run over TCP sockets is priced with one (:func:`over_sockets`, applied after this)."""
    hca = (stated or {}).get("NCCL_IB_HCA")
    if hca is None or ranks <= topo.gpus_per_node:
        return topo, ""
    if topo.nvlink_gen != 0:
        k = None if topo.name.startswith(("aws-", "gcp-")) else at_most_hcas(str(hca[0]))
        if k is None or k >= topo.nics_per_node:
            return topo, ""
        return replace(topo, nics_per_node=k), (f"NCCL_IB_HCA selects {k} network device{'s' * (k > 1)}"
                                                f"{where_set(hca[1])}: NCCL uses {k} of the preset's "
                                                f"{topo.nics_per_node} NICs a node")
    k = stated_hcas(str(hca[0]))
    if k is None or min(k, topo.gpus_per_node) <= topo.nics_per_node:
        return topo, ""
    k = min(k, topo.gpus_per_node)
    return replace(topo, nics_per_node=k), (f"NCCL_IB_HCA names {k} network devices{where_set(hca[1])}: {k} "
                                            f"NICs a node of {topo.nic_Gbps:g} Gb/s each (the box's speed)")


def gdr_unstated_note(topo: Topology, ranks: int) -> str:
    """What the price of a run on nodes of one NVLink GPU assumes of its NIC when no line states it (''
    otherwise): GPUDirect RDMA. Such a node is a slice of a machine (a VM or a pod given one GPU and one NIC),
    where the NIC may not be the one under the GPU's PCIe switch; NCCL then goes through host memory
    (:func:`with_stated_gdr`, :mod:`zerocalc.nccl.graph` assumption 7), which the file's rows alone do not
    tell from a slower network."""
    if topo.gpus_per_node != 1 or ranks <= 1 or topo.gpudirect_rdma is not None or not topo.nvlink_gen:
        return ""
    return ("nodes of one GPU: priced with GPUDirect RDMA (its NIC under its PCIe switch); a VM or pod given "
            "a NIC apart from its GPU goes through host memory, about 2/3 of that rate and no LL128 "
            "(NVIDIA/nccl issue 412): a topology TOML with gpudirect_rdma = false prices that")


def host_memory_note(topo: Topology, ranks: int) -> str:
    """What the price of GPUs of one PCIe node without peer-to-peer (refused by the driver, or past NCCL's
    P2P level between GPUs each on a host bridge of its own, Intel or ARM:
    :func:`zerocalc.nccl.pcie.p2p_past_cpu`) cannot know ('' otherwise): through host memory (NCCL's SHM
    transport) each GPU's rate is its host's, the lanes its slot or riser gives it and the CPU's root
    complex and memory, which nccl-tests output never states; the model prices the links NCCL's
    search counts (:mod:`zerocalc.nccl.pcie`), which bound it from above. NCCL's maintainers say so of
    PCIe systems: "the performance you get is usually determined by the bandwidth your CPU and memory can
    deliver" (NVIDIA/nccl issue 1639: eight RTX 5090 on two Xeon 8480+, 28 GB/s of bus bandwidth, 35 on
    four); the bundled runs go from 2.2 GB/s (two RTX 4090 of one PCIe switch) to 27 (four RTX 5090, each
    on a root port of an EPYC host)."""
    past_cpu = topo.p2p_level in ("PHB", "SYS") if topo.p2p_level else topo.cpu_vendor == "amd"
    via_host = topo.gpu_p2p is False or (topo.gpus_per_pcie_switch == 1 and not past_cpu)
    if topo.nvlink_gen != 0 or not via_host or not 1 < ranks <= topo.gpus_per_node:
        return ""
    return ("through host memory each GPU moves data at its host's rate (the lanes of its slot or riser, the "
            "CPU's root complex and memory), which the file does not state: priced at the PCIe links NCCL's "
            "search counts, an upper bound on it")
