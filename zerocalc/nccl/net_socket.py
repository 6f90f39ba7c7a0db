"""NCCL's socket transport between hosts: what NCCL knows of it, and what a step through it costs on VMs.

NCCL falls back to its own TCP transport where no RDMA network is found or wanted (``NCCL_IB_DISABLE=1``,
``NCCL_NET=Socket``, a cloud VM without EFA or GPUDirect-TCPX/O, a Kubernetes pod network). What its source
says of it (``src/transport/net_socket.cc``, v2.5.6 to v2.30.7):

1. **No latency figure.** ``ncclNetSocketGetProperties`` sets ``props->latency = 0`` ("Not set"): NCCL's
   tuning (``src/graph/tuning.cc``) prices a socket hop with its network hop alone (``hwLat[NCCL_HW_NET]``),
   as it does InfiniBand's.
2. **Host memory only.** ``ptrSupport = NCCL_PTR_HOST``: the proxy stages every step through host memory
   (no GPUDirect RDMA; :func:`zerocalc.topology.stated.over_sockets`).
3. **The NIC's speed** is ``/sys/class/net/<dev>/speed``, else 10 Gb/s ("Could not get speed from %s.
   Defaulting to 10 Gbps.", ``ncclNetSocketGetSpeed``): a VM's virtual NIC reports none.
4. **Helper threads by NIC vendor** (``ncclNetSocketGetNsockNthread``, :data:`SOCKET_THREADS`): an AWS ENA
   (PCI vendor ``0x1d0f``) gets 2 threads × 8 sockets a connection, a GCP gVNIC (``0x1ae0``) 4 × 1, any
   other NIC none: the proxy thread itself moves the data over the control socket. With helpers, a message
   is cut into tasks of ``max(64 KiB, size / nSocks)`` (:data:`MIN_TASK_BYTES`; ``MIN_CHUNKSIZE``, from
   v2.23 ``NCCL_SOCKET_MIN_TASKSIZE``), each handed to a helper that sleeps on a condition variable until
   one comes (``persistentSocketThread``), and its size goes first on the control socket.

What a step costs on a VM (:data:`VM_SOCKET_HOP_US`): each step of a ring or tree across hosts is one
message from one host's proxy to the other's, through both hosts' TCP stacks and the cloud's virtual
network (the hypervisor's or the NIC card's virtual switch): the one-way latency of a TCP message between
two VMs, half the round trip that ``netperf TCP_RR`` measures. Cloud vendors publish no such figure ("low
latency" only); public measurements between VMs of one zone put the round trip at 72-115 µs: a flood ping
between two GCE ``n1-highmem-8`` VMs of us-central1-a averaged 72 µs (tech.zarmory.com, "Quick test for GCP
inter-zone networking", Dec 2017); ``netperf TCP_RR`` runs between two GCE VMs had median round trips of
90-115 µs, 99 µs the median of the nine the page prints whole (gist BenTheElder/8ad343913fbe876e219a, "gce
netperf", Aug 2015).
zerocalc takes 99 µs, 49.5 µs a step, for hosts that are VMs (their GPUs on PCI bus 0, as a hypervisor
presents passthrough devices: :func:`on_vm`), and NCCL's hop alone for hosts that are not (a bare-metal
NIC, the kernel's TCP path of a few µs: two OpenShift pods of L40S hosts over a ConnectX-7 NIC take 12 µs
for an 8-byte all-reduce of two network steps, ``all_reduce_perf-2xL40S-2pods-socket-nccl2.27.3.txt``).
It is a time figure only, the topology's ``net_wire_latency_us``: NCCL chooses with the 0 it is told.
A topology file states the hosts' own with ``net_wire_latency_us`` (and their NIC's rate with
``nic_Gbps``).
"""

from __future__ import annotations

from collections.abc import Sequence

#: NCCL's helper threads and sockets per thread for a connection over a NIC of this PCI vendor, by default
#: (``NCCL_SOCKET_NTHREADS`` and ``NCCL_NSOCKS_PERTHREAD`` unset; ``ncclNetSocketGetNsockNthread``,
#: ``src/transport/net_socket.cc`` v2.5.6 to v2.30.7: "0x1d0f" AWS, "0x1ae0" GCP); any other vendor:
#: ``(0, 1)``, no helper sockets.
SOCKET_THREADS: dict[str, tuple[int, int]] = {"0x1d0f": (2, 8), "0x1ae0": (4, 1)}

#: The least task a message is cut into over the helper sockets (``MIN_CHUNKSIZE``, 64 KiB,
#: ``src/transport/net_socket.cc`` v2.5.6-v2.22; ``NCCL_SOCKET_MIN_TASKSIZE``'s default from v2.23).
MIN_TASK_BYTES = 64 * 1024

#: The round trip of a small TCP message between two VMs of one zone, µs: the median of the ``netperf
#: TCP_RR`` runs' median round trips between two GCE VMs (the nine the page prints whole: 90, 91, 92, 92, 99,
#: 100, 105, 109, 115 µs; gist BenTheElder/8ad343913fbe876e219a, Aug 2015; a flood ping between two GCE
#: n1-highmem-8 VMs of one zone averaged 72 µs, tech.zarmory.com, Dec 2017). Cloud vendors publish none.
VM_TCP_ROUND_TRIP_US = 99.0

#: One step of NCCL's socket transport between two VMs, µs: a message one way, half the round trip.
VM_SOCKET_HOP_US = VM_TCP_ROUND_TRIP_US / 2


def socket_threads(vendor: str) -> tuple[int, int]:
    """``(threads, sockets per thread)`` NCCL's socket transport opens by default for a connection over a
    NIC of PCI ``vendor`` (``"0x1d0f"``: AWS ENA, ``"0x1ae0"``: GCP gVNIC; :data:`SOCKET_THREADS`)."""
    return SOCKET_THREADS.get(vendor.strip().lower(), (0, 1))


def socket_tasks(n_bytes: int, n_socks: int) -> int:
    """The tasks NCCL's socket transport cuts a message of ``n_bytes`` into over ``n_socks`` helper sockets:
    pieces of ``max(MIN_TASK_BYTES, ceil(n_bytes / n_socks))``; one (the control socket) without helpers."""
    if n_socks <= 0 or n_bytes <= 0:
        return 1
    task = max(MIN_TASK_BYTES, -(-n_bytes // n_socks))
    return -(-n_bytes // task)


def on_vm(buses: Sequence[int | None]) -> bool:
    """Whether a host's GPUs, by their PCI bus numbers, are a VM's: every one on bus 0, the root bus, where no
    bare-metal server puts a GPU (each is behind a root port or switch, on a bus of its own) and hypervisors
    present passthrough devices (EC2 ``[0x00]``, GCE ``[0000:00:04]``, Azure ``[0001:00:00]``; as
    :func:`zerocalc.topology.stated.on_own_host_bridges` reads them)."""
    return bool(buses) and all(b == 0 for b in buses)


#: What :func:`one_gpu_vms` assumes, in the words ``check`` prints.
ONE_GPU_VMS_WORDS = ("one GPU a host on PCI bus 0, VMs of one GPU, whose clouds give them no RDMA network: "
                     "TCP sockets (NCCL's socket transport) assumed, a hint: no NCCL line names the network")


def one_gpu_vms(hosts: dict[str, int], buses: Sequence[int | None]) -> bool:
    """Whether a run's hosts are VMs of one GPU each (every host one rank, its GPU on PCI bus 0:
    :func:`on_vm`), which a file naming no network is taken to join by NCCL's socket transport: the clouds
    put their RDMA networks on their 8-GPU machines (GCP: GPUDirect-TCPX/TCPXO and RDMA on the A3 and A4
    ``-8g`` types; Azure: InfiniBand on the ND series), and a one-GPU VM (GCE N1 with a V100 or T4, A2
    ``-1g``, G2; EC2 p3.2xlarge, g4dn, g5; Azure NC) has a virtual NIC alone (gVNIC or virtio-net, ENA,
    accelerated networking). EC2's own host names are read first (an EFA hint, as some g4dn/g5 sizes have
    EFA): this is for files whose hosts are named otherwise (pods, containers)."""
    return bool(hosts) and set(hosts.values()) == {1} and list(buses) == [0]
