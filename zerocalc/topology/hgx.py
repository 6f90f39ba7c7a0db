"""The 8-GPU HGX node the DGX H100/H200/B200/B300, the export HGX H800 / H20 boards and the cloud
machines built on them (:mod:`zerocalc.topology.presets`, :mod:`zerocalc.topology.presets_cloud`) share:
:func:`hgx8`, one builder for the presets to state only what differs."""

from __future__ import annotations

from typing import Any

from zerocalc.topology.machine import PRESET_NET_US, PRESET_NVLINK_US, Link, Topology

_NVLINK_US, _NET_US = PRESET_NVLINK_US, PRESET_NET_US


def hgx8(name: str, title: str, nvlink_GBps: float, *, source: str, nic_Gbps: float,
          cpu_vendor: str = "intel", nvlinks: int = 18, nics: int = 8, pcie_gen: int = 5,
          **hardware: Any) -> Topology:
    """A node of 8 SXM GPUs on NVSwitches with NVLink SHARP (18 NVLinks per GPU unless ``nvlinks``
    says fewer), one NIC per GPU unless ``nics`` says fewer (``nic_Gbps`` each, the node's network
    bandwidth their sum), PCIe 5.0 unless ``pcie_gen`` says otherwise and (unless told) Intel hosts: the
    DGX H100/H200/B200/B300, their cloud variants and the HGX H800 / H20 boards (each preset's ``source``
    cites its datasheet)."""
    return Topology(
        name, title, 8,
        Link.from_units(_NVLINK_US, nvlink_GBps), Link.from_units(_NET_US, nics * nic_Gbps / 8),
        source=source, nvlinks_per_gpu=nvlinks, pcie_gen=pcie_gen, nics_per_node=nics, nic_Gbps=nic_Gbps,
        cpu_vendor=cpu_vendor, in_network_reduction=("nvls",), **hardware,
    )
