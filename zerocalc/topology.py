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
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from zerocalc.errors import ConfigError, UnknownNameError

GB = 1e9


@dataclass(frozen=True)
class Link:
    """One link class: per-message latency (s) and bandwidth (bytes/s, one direction)."""

    alpha_s: float
    bw_Bps: float

    def __post_init__(self) -> None:
        for name, v in (("alpha_s", self.alpha_s), ("bw_Bps", self.bw_Bps)):
            ok = isinstance(v, int | float) and math.isfinite(v) and v >= 0
            if not ok or (name == "bw_Bps" and v == 0):
                raise ConfigError(f"must be a finite {'positive' if name == 'bw_Bps' else 'non-negative'} "
                                  f"number, got {v!r}", option=name)

    @classmethod
    def from_units(cls, alpha_us: float, bw_GBps: float) -> Link:
        """From µs and GB/s (1 GB = 1e9 bytes)."""
        return cls(alpha_s=float(alpha_us) / 1e6, bw_Bps=float(bw_GBps) * GB)


IN_NETWORK_REDUCTIONS: tuple[str, ...] = ("nvls", "sharp")
"""Kinds of in-network reduction: ``nvls`` = NVLink SHARP in the NVSwitch (NVSwitch 3 / H100 and
later; NCCL's NVLS and NVLS Tree algorithms), ``sharp`` = InfiniBand SHARP in the network switches
(NCCL's CollNet Direct / Chain, with the SHARP plugin)."""
CPU_VENDORS: tuple[str, ...] = ("intel", "amd", "arm")

# Optional hardware fields, their TOML type and meaning (one table for the dataclass, the TOML
# reader and the error that names a missing one).
HARDWARE_FIELDS: dict[str, str] = {
    "gpu": "GPU model, e.g. 'H100 SXM5'",
    "compute_capability": "CUDA compute capability × 10 (80 A100, 90 H100/H200, 100 B200)",
    "nvlink_gen": "NVLink generation (0: no NVLink, GPUs talk over PCIe)",
    "nvlinks_per_gpu": "NVLink links per GPU",
    "nvswitch_gen": "NVSwitch generation joining the GPUs of a node (0: none)",
    "pcie_gen": "PCIe generation of the GPU and NIC slots",
    "nics_per_node": "network adapters per node used by NCCL",
    "nic_Gbps": "speed of one NIC, Gb/s, one direction",
    "cpu_vendor": "host CPU vendor: intel, amd or arm",
    "in_network_reduction": "kinds of in-network reduction available: [] or some of nvls, sharp",
    "net_latency_us": "latency the network plugin adds per network hop, µs (NCCL's latencyInter; 0 for IB)",
}


@dataclass(frozen=True)
class Calibration:
    """One fitted α-β pair for NCCL's model: ``time = alpha_us + bytes / bw_GBps`` for collective
    ``op`` on ``ranks`` ranks when NCCL picks ``algorithm``/``protocol`` (``'any'``: the sweep-wide
    fit used for pairs without their own), as ``zerocalc fit --out`` writes it."""

    op: str
    ranks: int
    algorithm: str
    protocol: str
    alpha_us: float
    bw_GBps: float
    nccl_version: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.ranks, bool) or not isinstance(self.ranks, int) or self.ranks < 1:
            raise ConfigError(f"ranks must be a whole number ≥ 1, got {self.ranks!r}",
                              option="nccl_calibration")
        for key, positive in (("alpha_us", False), ("bw_GBps", True)):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0 \
                    or (positive and v == 0):
                raise ConfigError(f"{key} must be {'positive' if positive else 'non-negative'}, got {v!r}",
                                  option="nccl_calibration")


_CALIBRATION_KEYS = ("op", "ranks", "algorithm", "protocol", "alpha_us", "bw_GBps", "nccl_version")


@dataclass(frozen=True)
class NcclEnv:
    """The NCCL environment a cluster's vendor profile sets for NCCL versions ``min_version`` to
    ``max_version`` (inclusive; ``"2.21"`` covers every 2.21.x): ``NCCL_ALGO`` / ``NCCL_PROTO`` lists
    (:mod:`zerocalc.nccl.env` grammar), ``NCCL_NVLS_ENABLE``, and the tuner plugin it loads, named
    (``tuner``: what the profile loads, priced only when its rules are given with ``--nccl-tuner``).
    NCCL's model applies the profile of the version it prices unless the user gives
    ``--nccl-algo`` / ``--nccl-proto`` (:func:`zerocalc.nccl.env.settings`)."""

    min_version: str
    max_version: str
    algo: str | None = None
    proto: str | None = None
    nvls_enable: bool | None = None
    tuner: str = ""
    source: str = ""


_ENV_KEYS = {"min_version": "min_version", "max_version": "max_version", "NCCL_ALGO": "algo",
             "NCCL_PROTO": "proto", "NCCL_NVLS_ENABLE": "nvls_enable", "tuner": "tuner", "source": "source"}


@dataclass(frozen=True)
class Topology:
    """A two-level machine. ``inter.bw_Bps`` is per NODE (all its NICs together).

    The hardware fields (``compute_capability`` … ``in_network_reduction``, see
    :data:`HARDWARE_FIELDS`) are ``None`` when unknown; ``in_network_reduction`` is a tuple of
    :data:`IN_NETWORK_REDUCTIONS` (empty: none).
    """

    name: str
    title: str
    gpus_per_node: int
    intra: Link
    inter: Link
    gamma_s_per_byte: float = 0.0
    source: str = ""
    gpu: str | None = None
    compute_capability: int | None = None
    nvlink_gen: int | None = None
    nvlinks_per_gpu: int | None = None
    nvswitch_gen: int | None = None
    pcie_gen: int | None = None
    nics_per_node: int | None = None
    nic_Gbps: float | None = None
    cpu_vendor: str | None = None
    in_network_reduction: tuple[str, ...] | None = None
    net_latency_us: float | None = None
    nccl_calibration: tuple[Calibration, ...] = ()
    nccl_env: tuple[NcclEnv, ...] = ()
    nccl_tuner: str | None = None  # a tuner configuration file (TOML key; the CLI reads it)

    def __post_init__(self) -> None:
        if not isinstance(self.gpus_per_node, int) or self.gpus_per_node < 1:
            raise ConfigError(f"must be a whole number ≥ 1, got {self.gpus_per_node!r}",
                              option="gpus_per_node")
        for key in ("compute_capability", "nvlink_gen", "nvlinks_per_gpu", "nvswitch_gen", "pcie_gen",
                    "nics_per_node"):
            v = getattr(self, key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise ConfigError(f"must be a whole number ≥ 0, got {v!r}", option=key)
        if self.nic_Gbps is not None and (isinstance(self.nic_Gbps, bool)
                                          or not isinstance(self.nic_Gbps, int | float)
                                          or not math.isfinite(self.nic_Gbps) or self.nic_Gbps <= 0):
            raise ConfigError(f"must be a positive number, got {self.nic_Gbps!r}", option="nic_Gbps")
        if self.cpu_vendor is not None and self.cpu_vendor not in CPU_VENDORS:
            raise ConfigError(f"must be one of {', '.join(CPU_VENDORS)}, got {self.cpu_vendor!r}",
                              option="cpu_vendor")
        if self.in_network_reduction is not None:
            bad = [k for k in self.in_network_reduction if k not in IN_NETWORK_REDUCTIONS]
            if bad:
                raise ConfigError(f"unknown kind {bad[0]!r} (known: {', '.join(IN_NETWORK_REDUCTIONS)})",
                                  option="in_network_reduction")

    @property
    def in_network_reduction_kind(self) -> str | None:
        """The in-network reduction this machine offers: ``'nvls'``, ``'sharp'``, ``'nvls+sharp'``
        or ``None`` (none, or not stated)."""
        kinds = [k for k in IN_NETWORK_REDUCTIONS if k in (self.in_network_reduction or ())]
        return "+".join(kinds) or None

    @property
    def nvls(self) -> bool:
        """NVLink SHARP (reduction in the NVSwitch) is available."""
        return "nvls" in (self.in_network_reduction or ())

    @property
    def sharp(self) -> bool:
        """InfiniBand SHARP (reduction in the network switches, NCCL's CollNet) is available."""
        return "sharp" in (self.in_network_reduction or ())

    def hardware(self) -> dict[str, Any]:
        """The hardware fields as a TOML-shaped mapping (unknown ones left out)."""
        out: dict[str, Any] = {}
        for key in HARDWARE_FIELDS:
            v = getattr(self, key)
            if v is not None:
                out[key] = list(v) if isinstance(v, tuple) else v
        return out

    def values(self) -> dict[str, float]:
        """Numbers for the link symbols, keyed by symbol name."""
        return {
            "alpha_intra": self.intra.alpha_s,
            "alpha_inter": self.inter.alpha_s,
            "bw_intra": self.intra.bw_Bps,
            "bw_inter": self.inter.bw_Bps,
            "gamma": self.gamma_s_per_byte,
        }

    def with_overrides(
        self,
        *,
        intra_alpha_us: float | None = None,
        intra_bw_GBps: float | None = None,
        inter_alpha_us: float | None = None,
        inter_bw_GBps: float | None = None,
    ) -> Topology:
        """A copy with some link figures replaced (user flags), in µs and GB/s.

        A bad figure is a :class:`ConfigError` naming the flag and the value as the user gave it
        (``--intra-bw-GBps: must be positive, got -3``).
        """
        given = {"--intra-alpha-us": intra_alpha_us, "--intra-bw-GBps": intra_bw_GBps,
                 "--inter-alpha-us": inter_alpha_us, "--inter-bw-GBps": inter_bw_GBps}
        for flag, v in given.items():
            if v is None:
                continue
            bw = flag.endswith("GBps")
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) \
                    or v < 0 or (bw and v == 0):
                raise ConfigError(f"must be {'positive' if bw else 'non-negative'}, got {v:g}"
                                  if isinstance(v, int | float) else f"must be a number, got {v!r}",
                                  option=flag)
        intra = Link.from_units(
            self.intra.alpha_s * 1e6 if intra_alpha_us is None else intra_alpha_us,
            self.intra.bw_Bps / GB if intra_bw_GBps is None else intra_bw_GBps,
        )
        inter = Link.from_units(
            self.inter.alpha_s * 1e6 if inter_alpha_us is None else inter_alpha_us,
            self.inter.bw_Bps / GB if inter_bw_GBps is None else inter_bw_GBps,
        )
        changed = (intra, inter) != (self.intra, self.inter)
        return replace(self, intra=intra, inter=inter,
                       name=self.name + ("+custom" if changed else ""))


_NVLINK_US, _PCI_US, _NET_US = 3.4, 5.7, 14.0

_TCPXO_NOTES = ("GoogleCloudPlatform/container-engine-accelerators, gpudirect-tcpxo/README.md "
                "(GPUDirect-TCPXO release notes: each release's NCCL configs and its NCCL)")
_TCPXO_TUNER = "Google's tuner plugin libnccl-tuner.so with a3plus_tuner_config.textproto"
#: The NCCL environment GCP's GPUDirect-TCPXO profile (nccl-env-profile.sh) sets, by the NCCL its plugin
#: installer ships: 2.21.5 with installers v1.0.3-v1.0.7 (Jun-Nov 2024); 2.23 by default with v1.0.9-v1.0.11
#: (May-Jun 2025; v1.0.8, Feb 2025, still had NCCL_PROTO=Simple); 2.26.5 with v1.0.12 (Aug 2025) and 2.28.7
#: with v1.0.14-v1.0.15 (Nov 2025-Jan 2026), which drop NCCL_ALGO and NCCL_NVLS_ENABLE=0 for NVLS Tree.
_TCPXO_ENV = (
    NcclEnv("2.21", "2.21", algo="Ring,Tree", proto="Simple", nvls_enable=False, tuner=_TCPXO_TUNER,
            source=_TCPXO_NOTES + ", releases of Jun 27 2024 (v1.0.3) to Nov 27 2024 (v1.0.7), NCCL 2.21.5"),
    NcclEnv("2.22", "2.23", algo="Ring,Tree", proto="Simple,LL128", nvls_enable=False, tuner=_TCPXO_TUNER,
            source=_TCPXO_NOTES + ", releases of May 01 2025 (v1.0.9-1) and Jun 27 2025 (v1.0.11), "
                   "NCCL 2.23"),
    NcclEnv("2.26", "2.28", proto="Simple,LL128", tuner=_TCPXO_TUNER,
            source=_TCPXO_NOTES + ", releases of Aug 21 2025 (v1.0.12, NCCL 2.26.5) to Jan 9 2026 (v1.0.15, "
                   "NCCL 2.28.7)"),
)

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
        Topology(
            "dgx-h100", "NVIDIA DGX H100: NVLink4 + 8×400 Gb/s NDR InfiniBand", 8,
            Link.from_units(_NVLINK_US, 450.0), Link.from_units(_NET_US, 8 * 50.0),
            source="NVIDIA DGX H100 datasheet / H100 SXM datasheet: NVLink4 900 GB/s per GPU "
                   "bidirectional (450 GB/s each way, 18 links); 4 third-generation NVSwitches (NVLink "
                   "SHARP); 8× ConnectX-7 NDR 400 Gb/s (50 GB/s) per node; PCIe 5.0; 2× Intel Xeon "
                   "Platinum 8480C",
            gpu="H100 SXM5", compute_capability=90, nvlink_gen=4, nvlinks_per_gpu=18, nvswitch_gen=3,
            pcie_gen=5, nics_per_node=8, nic_Gbps=400.0, cpu_vendor="intel", in_network_reduction=("nvls",),
        ),
        Topology(
            "dgx-h200", "NVIDIA DGX H200: NVLink4 + 8×400 Gb/s NDR InfiniBand", 8,
            Link.from_units(_NVLINK_US, 450.0), Link.from_units(_NET_US, 8 * 50.0),
            source="NVIDIA DGX H200 datasheet: 8× H200 SXM 141 GB, NVLink4 900 GB/s per GPU "
                   "bidirectional (18 links), 4 third-generation NVSwitches; 8× ConnectX-7 400 Gb/s "
                   "(4 OSFP ports); PCIe 5.0; 2× Intel Xeon Platinum 8480C",
            gpu="H200 SXM", compute_capability=90, nvlink_gen=4, nvlinks_per_gpu=18, nvswitch_gen=3,
            pcie_gen=5, nics_per_node=8, nic_Gbps=400.0, cpu_vendor="intel", in_network_reduction=("nvls",),
        ),
        Topology(
            "dgx-b200", "NVIDIA DGX B200: NVLink5 + 8×400 Gb/s InfiniBand", 8,
            Link.from_units(_NVLINK_US, 900.0), Link.from_units(_NET_US, 8 * 50.0),
            source="NVIDIA DGX B200 datasheet: 8× B200, NVLink5 1.8 TB/s per GPU bidirectional "
                   "(18 links × 50 GB/s each way), 2 NVLink switch chips (fourth-generation NVSwitch); "
                   "8× single-port ConnectX-7 VPI 400 Gb/s; PCIe 5.0; 2× Intel Xeon Platinum 8570",
            gpu="B200 SXM", compute_capability=100, nvlink_gen=5, nvlinks_per_gpu=18, nvswitch_gen=4,
            pcie_gen=5, nics_per_node=8, nic_Gbps=400.0, cpu_vendor="intel", in_network_reduction=("nvls",),
        ),
        Topology(
            "gcp-a3-mega", "Google Cloud A3 Mega: 8× H100 NVLink4 + 8×200 Gb/s GPUDirect-TCPXO", 8,
            Link.from_units(_NVLINK_US, 450.0), Link.from_units(_NET_US, 8 * 25.0),
            source="Google Cloud a3-megagpu-8g: 8× H100 80 GB (HGX H100: NVLink4 18 links, third-generation "
                   "NVSwitch), 8 GPU NICs × 200 Gb/s (GPUDirect-TCPXO; 1,800 Gb/s with the host NIC); "
                   "Intel Xeon (Sapphire Rapids) hosts; PCIe 5.0; the TCPXO plugin reports no network "
                   "latency (google/nccl-plugin-gpudirect-tcpxo nccl_shim.cc: props.latency = 0, NCCL's "
                   "latencyInter in tuning.cc via topo.cc and search.cc, 2.19 to 2.30)",
            gpu="H100 SXM5", compute_capability=90, nvlink_gen=4, nvlinks_per_gpu=18, nvswitch_gen=3,
            pcie_gen=5, nics_per_node=8, nic_Gbps=200.0, cpu_vendor="intel", in_network_reduction=("nvls",),
            net_latency_us=0.0, nccl_env=_TCPXO_ENV,
        ),
        Topology(
            "pcie-gen4", "8 GPUs on PCIe 4.0 x16, one 200 Gb/s HDR NIC per node", 8,
            Link.from_units(_PCI_US, 31.5), Link.from_units(_NET_US, 25.0),
            source="PCI-SIG PCIe 4.0: 16 GT/s × 16 lanes × 128/130 = 31.5 GB/s each way; "
                   "ConnectX-6 HDR 200 Gb/s = 25 GB/s; GPUs taken as A100 PCIe (no NVLink bridge)",
            gpu="A100 PCIe", compute_capability=80, nvlink_gen=0, nvlinks_per_gpu=0, nvswitch_gen=0,
            pcie_gen=4, nics_per_node=1, nic_Gbps=200.0, cpu_vendor="intel", in_network_reduction=(),
        ),
        Topology(
            "ethernet-100g", "Commodity cluster: 8 PCIe 4.0 GPUs per node, one 100 GbE NIC per node", 8,
            Link.from_units(_PCI_US, 31.5), Link.from_units(_NET_US, 12.5),
            source="IEEE 802.3 100GBASE: 100 Gb/s = 12.5 GB/s per node; PCIe 4.0 x16 31.5 GB/s; "
                   "NCCL network hop latency (RoCE/IB) as the α, TCP sockets are slower; "
                   "GPUs taken as A100 PCIe",
            gpu="A100 PCIe", compute_capability=80, nvlink_gen=0, nvlinks_per_gpu=0, nvswitch_gen=0,
            pcie_gen=4, nics_per_node=1, nic_Gbps=100.0, cpu_vendor="intel", in_network_reduction=(),
        ),
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


_TOP_KEYS = ("name", "title", "gpus_per_node", "gamma_s_per_byte", "intra", "inter", "source",
             *HARDWARE_FIELDS, "nccl_calibration", "nccl_env", "nccl_tuner")
_TIER_KEYS = ("alpha_us", "bw_GBps")


def _number(table: Mapping[str, Any], key: str, fail, *, positive: bool) -> float:
    if key not in table:
        fail(f"missing key {key!r}")
    v = table[key]
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0 \
            or (positive and v == 0):
        fail(f"{key} must be {'positive' if positive else 'non-negative'}, got {v!r}")
    return float(v)


def topology_from_mapping(data: Mapping[str, Any], *, where: str = "topology",
                          option: str | None = None) -> Topology:
    """A topology from a parsed TOML document (the CLI reads the file)::

        name = "my-cluster"          # optional
        title = "..."                # optional
        source = "..."               # optional
        gpus_per_node = 8
        gamma_s_per_byte = 0.0       # optional
        # optional hardware facts NCCL's model reads (see HARDWARE_FIELDS):
        compute_capability = 90
        nvlink_gen = 4
        nvlinks_per_gpu = 18
        nvswitch_gen = 3
        pcie_gen = 5
        nics_per_node = 8
        nic_Gbps = 400
        cpu_vendor = "intel"
        in_network_reduction = ["nvls"]
        [intra]                      # one GPU's link inside a node, one direction
        alpha_us = 3.4
        bw_GBps = 300
        [inter]                      # the whole node's injection bandwidth, one direction
        alpha_us = 14
        bw_GBps = 200
        # optional: a tuner plugin's rules (NCCL's example tuner CSV, relative to this file) and the
        # provider's NCCL environment per NCCL release (see NcclEnv)
        # nccl_tuner = "rules.csv"             (a top-level key, before the tables)
        [[nccl_env]]
        min_version = "2.21"
        max_version = "2.21"
        NCCL_ALGO = "Ring,Tree"
        NCCL_PROTO = "Simple"
        NCCL_NVLS_ENABLE = 0
        source = "..."

    Any other key, at the top or in a tier, is refused by name (a misspelt ``bw_GBPS`` would
    otherwise be ignored). Every error is a :class:`ConfigError` for ``option`` whose message
    starts with ``where`` (the file name): ``--topology: lab.toml: [intra] bw_GBps must be
    positive, got 0``.
    """
    def fail(message: str, tier: str | None = None):
        raise ConfigError(f"{where}: {'[' + tier + '] ' if tier else ''}{message}", option=option)

    if not isinstance(data, Mapping):
        fail("expected a table")
    unknown = sorted(set(data) - set(_TOP_KEYS))
    if unknown:
        fail(f"unknown keys: {', '.join(map(repr, unknown))} (known: {', '.join(_TOP_KEYS)})")
    tiers = {}
    for tier in ("intra", "inter"):
        t = data.get(tier)
        if not isinstance(t, Mapping):
            fail(f"missing table [{tier}] with alpha_us and bw_GBps")
        bad = sorted(set(t) - set(_TIER_KEYS))
        if bad:
            fail(f"unknown keys: {', '.join(map(repr, bad))} (known: {', '.join(_TIER_KEYS)})", tier)

        def fail_tier(message: str, tier: str = tier):
            fail(message, tier)

        tiers[tier] = Link.from_units(_number(t, "alpha_us", fail_tier, positive=False),
                                      _number(t, "bw_GBps", fail_tier, positive=True))
    g = data.get("gpus_per_node")
    if isinstance(g, bool) or not isinstance(g, int) or g < 1:
        fail(f"gpus_per_node must be a whole number ≥ 1, got {g!r}")
    gamma = _number(data, "gamma_s_per_byte", fail, positive=False) if "gamma_s_per_byte" in data else 0.0
    name = str(data.get("name", "custom"))
    hardware = {key: _hardware_value(key, data[key], fail) for key in HARDWARE_FIELDS if key in data}
    calibration = _calibration(data.get("nccl_calibration", []), fail)
    env = _nccl_env(data.get("nccl_env", []), fail)
    tuner = data.get("nccl_tuner")
    if tuner is not None and (not isinstance(tuner, str) or not tuner.strip()):
        fail(f"nccl_tuner must be a file name (a tuner configuration, see --nccl-tuner), got {tuner!r}")
    try:
        return Topology(name, str(data.get("title", name)), g, tiers["intra"], tiers["inter"], gamma,
                        str(data.get("source", where)), **hardware, nccl_calibration=calibration,
                        nccl_env=env, nccl_tuner=tuner)
    except ConfigError as exc:
        fail(f"{exc.option}: {exc.message}")


def _hardware_value(key: str, v: Any, fail) -> Any:
    """One hardware field from TOML, checked for its type (range checks are the dataclass's)."""
    if key in ("gpu", "cpu_vendor"):
        if not isinstance(v, str):
            fail(f"{key} must be a string, got {v!r}")
        return v.lower() if key == "cpu_vendor" else v
    if key == "in_network_reduction":
        if isinstance(v, str):
            v = [v] if v else []
        if not isinstance(v, list) or not all(isinstance(k, str) for k in v):
            fail(f"{key} must be a list of names ({', '.join(IN_NETWORK_REDUCTIONS)}), got {v!r}")
        return tuple(dict.fromkeys(k.lower() for k in v))
    if key in ("nic_Gbps", "net_latency_us"):
        if key == "net_latency_us" and isinstance(v, int | float) and not isinstance(v, bool) and v == 0:
            return 0.0
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
            fail(f"{key} must be a positive number, got {v!r}")
        return float(v)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        fail(f"{key} must be a whole number ≥ 0, got {v!r}")
    return v


def _calibration(items: Any, fail) -> tuple[Calibration, ...]:
    """``[[nccl_calibration]]`` tables → :class:`Calibration` (every key required, none unknown)."""
    if not isinstance(items, list):
        fail("nccl_calibration must be an array of tables ([[nccl_calibration]])")
    out = []
    for i, t in enumerate(items, 1):
        where = f"[[nccl_calibration]] #{i}"
        if not isinstance(t, Mapping):
            fail(f"{where} must be a table")
        unknown = sorted(set(t) - set(_CALIBRATION_KEYS))
        missing = [k for k in _CALIBRATION_KEYS[:6] if k not in t]
        if unknown or missing:
            what = (f"unknown keys {', '.join(map(repr, unknown))}" if unknown
                    else f"missing key {missing[0]!r}")
            fail(f"{where}: {what} (keys: {', '.join(_CALIBRATION_KEYS)})")
        try:
            out.append(Calibration(str(t["op"]), t["ranks"], str(t["algorithm"]), str(t["protocol"]),
                                   t["alpha_us"], t["bw_GBps"], str(t.get("nccl_version", ""))))
        except ConfigError as exc:
            fail(f"{where}: {exc.message}")
    return tuple(out)


def _nccl_env(items: Any, fail) -> tuple[NcclEnv, ...]:
    """``[[nccl_env]]`` tables → :class:`NcclEnv` (versions required, no unknown key; the lists'
    grammar is checked where the model reads them)."""
    if not isinstance(items, list):
        fail("nccl_env must be an array of tables ([[nccl_env]])")
    out = []
    for i, t in enumerate(items, 1):
        where = f"[[nccl_env]] #{i}"
        if not isinstance(t, Mapping):
            fail(f"{where} must be a table")
        unknown = sorted(set(t) - set(_ENV_KEYS))
        missing = [k for k in ("min_version", "max_version") if k not in t]
        if unknown or missing:
            what = (f"unknown keys {', '.join(map(repr, unknown))}" if unknown
                    else f"missing key {missing[0]!r}")
            fail(f"{where}: {what} (keys: {', '.join(_ENV_KEYS)})")
        kw: dict[str, Any] = {}
        for key, attr in _ENV_KEYS.items():
            if key not in t:
                continue
            v = t[key]
            if key == "NCCL_NVLS_ENABLE":
                if isinstance(v, bool) or v not in (0, 1):
                    fail(f"{where}: NCCL_NVLS_ENABLE must be 0 or 1, got {v!r}")
                v = bool(v)
            elif not isinstance(v, str):
                fail(f"{where}: {key} must be a string, got {v!r}")
            kw[attr] = v
        out.append(NcclEnv(**kw))
    return tuple(out)


def topology_to_mapping(topo: Topology) -> dict[str, Any]:
    """A topology as the TOML-shaped mapping :func:`topology_from_mapping` reads back."""
    out: dict[str, Any] = {"name": topo.name, "title": topo.title, "source": topo.source,
                           "gpus_per_node": topo.gpus_per_node}
    if topo.gamma_s_per_byte:
        out["gamma_s_per_byte"] = topo.gamma_s_per_byte
    out.update(topo.hardware())
    for tier, link in (("intra", topo.intra), ("inter", topo.inter)):
        out[tier] = {"alpha_us": link.alpha_s * 1e6, "bw_GBps": link.bw_Bps / GB}
    if topo.nccl_tuner:
        out["nccl_tuner"] = topo.nccl_tuner
    if topo.nccl_calibration:
        out["nccl_calibration"] = [{k: getattr(c, k) for k in _CALIBRATION_KEYS}
                                   for c in topo.nccl_calibration]
    if topo.nccl_env:
        out["nccl_env"] = [{key: (int(v) if isinstance(v, bool) else v) for key, attr in _ENV_KEYS.items()
                            if (v := getattr(e, attr)) not in (None, "")} for e in topo.nccl_env]
    return out


def require(topo: Topology, key: str, needed_by: str) -> Any:
    """The hardware field ``key`` of ``topo``; a :class:`ConfigError` naming it when unknown.

    ``needed_by`` says what needs it (``"NCCL's cost model"``).
    """
    v = getattr(topo, key)
    if v is None:
        raise ConfigError(f"topology {topo.name!r} does not give {key} ({HARDWARE_FIELDS[key]}), "
                          f"which {needed_by} needs; add it to the TOML file", option="--topology")
    return v


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ("inf" if v > 0 else "nan")
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"no TOML form for {v!r}")


def topology_to_toml(topo: Topology, header: str = "") -> str:
    """The TOML text of :func:`topology_to_mapping` (read back by :func:`topology_from_mapping`);
    ``header`` becomes comment lines at the top."""
    data = topology_to_mapping(topo)
    lines = [f"# {h}" for h in header.splitlines()]
    tables = {k: v for k, v in data.items() if isinstance(v, Mapping)}
    arrays = {k: v for k, v in data.items() if isinstance(v, list) and v and isinstance(v[0], Mapping)}
    for k, v in data.items():
        if k not in tables and k not in arrays:
            lines.append(f"{k} = {_toml_value(v)}")
    for k, v in tables.items():
        lines += ["", f"[{k}]", *(f"{kk} = {_toml_value(vv)}" for kk, vv in v.items())]
    for k, items in arrays.items():
        for item in items:
            lines += ["", f"[[{k}]]", *(f"{kk} = {_toml_value(vv)}" for kk, vv in item.items())]
    return "\n".join(lines) + "\n"
