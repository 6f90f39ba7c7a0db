"""Links and tiers: a two-level machine of nodes × GPUs per node, with presets.

A :class:`Topology` gives the numbers for the link symbols of :mod:`zerocalc.symbols`:
α and bandwidth inside a node (one GPU's link, one direction) and between nodes (the whole
node's injection bandwidth, one direction; a rank's share when all G GPUs send at once is
``inter.bw_Bps / G``). A flat (one link class) machine is a topology whose two tiers are equal.
Units inside: seconds and bytes/second; GB = 1e9 bytes. Constructors convert from the
user-facing units (µs, GB/s) once.

Beside the two α-β tiers a topology carries the hardware facts NCCL's own cost model
(:mod:`zerocalc.nccl`) reads from its topology search: the GPU's compute capability, how
the GPUs of a node are joined (NVLink generation and links per GPU, NVSwitch generation, or
PCIe only), the NICs of a node and their speed, the host CPU's vendor, and which kinds of
in-network reduction the machine offers (``"nvls"``: NVLink SHARP in an NVSwitch 3 or later
with Hopper or later GPUs; ``"sharp"``: InfiniBand SHARP in the network switches, NCCL's
CollNet). These are optional: a topology without them still prices the textbook algorithms,
and the NCCL model names the first field it misses.

Latencies are NCCL's own per-hop figures for the Ring algorithm with the Simple protocol
(the one used for the large messages of a training step): ``src/graph/tuning.cc``
``hwLat`` (NVLink 3.4 µs, network 14 µs in v2.30.7; PCI 5.7 µs). NCCL's base latency
(8.4 µs per call for Ring/Simple) is left out.

The type is in :mod:`zerocalc.topology.machine`, the presets in :mod:`zerocalc.topology.presets`,
reading and writing TOML in :mod:`zerocalc.topology.mapping`; every name imports from here.
"""

from zerocalc.topology.machine import (
    CPU_VENDORS,
    GB,
    HARDWARE_FIELDS,
    IN_NETWORK_REDUCTIONS,
    Calibration,
    Link,
    NcclEnv,
    Topology,
    nvlink_mesh_peers,
    placement,
    require,
    series_calibration,
    series_redop,
    shape_calibration,
    shape_words,
)
from zerocalc.topology.mapping import topology_from_mapping, topology_to_mapping, topology_to_toml
from zerocalc.topology.presets import DEFAULT_TOPOLOGY, PRESETS, TOPOLOGY_NAMES, get_topology

__all__ = [
    "CPU_VENDORS",
    "DEFAULT_TOPOLOGY",
    "GB",
    "HARDWARE_FIELDS",
    "IN_NETWORK_REDUCTIONS",
    "PRESETS",
    "TOPOLOGY_NAMES",
    "Calibration",
    "Link",
    "NcclEnv",
    "Topology",
    "get_topology",
    "nvlink_mesh_peers",
    "require",
    "placement",
    "series_calibration",
    "shape_calibration",
    "shape_words",
    "series_redop",
    "topology_from_mapping",
    "topology_to_mapping",
    "topology_to_toml",
]
