"""The machine: :class:`Link` tiers and the :class:`Topology` type with its hardware facts.

See :mod:`zerocalc.topology` for what a topology holds and its units.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from zerocalc.errors import ConfigError

GB = 1e9
#: The textbook α of every preset's tiers (µs): NVLink, PCIe and network hops
PRESET_NVLINK_US, PRESET_PCI_US, PRESET_NET_US = 3.4, 5.7, 14.0


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
#: The PCIe path types NCCL_P2P_LEVEL names that let peer-to-peer cross PCIe (``src/graph/topo.cc``
#: ``topoPathTypeStr``, nearest first): a level further apart than a pair's path sends it through host memory
P2P_LEVELS: tuple[str, ...] = ("PIX", "PXB", "PHB", "SYS")
GPU_ARCHS: tuple[str, ...] = ("gfx90a", "gfx942", "gfx950")
"""AMD GPU architectures RCCL's model prices (:mod:`zerocalc.nccl.rccl`): gfx90a (MI250X), gfx942 (MI300X,
MI325X), gfx950 (MI350X, MI355X)."""

# Optional hardware fields, their TOML type and meaning (one table for the dataclass, the TOML
# reader and the error that names a missing one).
HARDWARE_FIELDS: dict[str, str] = {
    "gpu": "GPU model, e.g. 'H100 SXM5'",
    "gpu_arch": "AMD GPU architecture (gfx target: gfx90a for MI250X, gfx942 for MI300X and MI325X, gfx950 "
                "for MI350X and MI355X): the GPUs run RCCL, "
                "priced by RCCL's cost model; unset for NVIDIA GPUs",
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
    "net_wire_latency_us": "the network's own small-message latency per hop, µs, where the plugin reports "
                           "another figure to steer NCCL's choice: calls are timed with it, NCCL still "
                           "chooses with net_latency_us (unset: the same)",
    "net_eager_bytes": "the largest message the network sends eagerly; a larger one waits on the receiver, "
                       "a round trip more (libfabric's cxi provider on HPE Slingshot: 4097 by default; "
                       "aws-ofi-nccl on AWS EFA: 8192); unset: every message is written into a posted "
                       "buffer (InfiniBand, RoCE)",
    "net_flows": "TCP flows one NCCL network connection spreads its messages over, each message whole on one "
                 "(GCP GPUDirect-TCPXO: NCCL_FASTRAK_NUM_FLOWS, 2 by default), each flow a like share of the "
                 "connection's rate; unset: a message has the connection's whole rate (InfiniBand, RoCE, "
                 "EFA)",
    "net_flow_piece": "the largest piece of a message one flow carries, bytes: a larger message is cut into "
                      "pieces on several flows (GCP GPUDirect-TCPX: NCCL_DYNAMIC_CHUNK_SIZE); unset: each "
                      "message whole on one flow (TCPXO)",
    "nccl_buffsize": "NCCL_BUFFSIZE the machine's NCCL runs with (bytes; its vendor's profile), which sizes "
                     "the Simple protocol's slices; unset: NCCL's 4 MiB",
    "cpu_sockets": "CPU sockets (NUMA nodes) a node's GPUs are split over, in order, joined by the SMP link "
                   "(QPI/UPI, Infinity Fabric); NCCL's search prices a ring crossing it (PCIe-only nodes)",
    "gpus_per_pcie_switch": "GPUs under one PCIe switch, sharing its x16 link to the CPU (1: each GPU on a "
                            "CPU root port of its own; PCIe-only nodes)",
    "gpu_p2p": "GPUs reach each other by PCIe peer-to-peer (false: the driver refuses it, as on GeForce "
               "cards, or NCCL_P2P_DISABLE=1; NCCL then goes through host memory, its SHM transport)",
    "p2p_level": "the farthest PCIe path NCCL lets peer-to-peer cross (NCCL_P2P_LEVEL): PIX or PXB, GPUs "
                 "under one PCIe switch; PHB, through a CPU too; SYS, across CPU sockets too (unset: NCCL's "
                 "default, PXB, or SYS on AMD: src/graph/paths.cc ncclTopoCheckP2p; PCIe-only nodes)",
    "smp_GBps": "NCCL's bandwidth of the link between two CPU sockets, GB/s (unset: NCCL's figure for "
                "cpu_vendor, topo.h)",
    "gpudirect_rdma": "the NICs read and write GPU memory directly (GPUDirect RDMA: the NIC under the GPU's "
                      "PCIe switch); false: NCCL relays the network's data through host memory (a NIC "
                      "behind the CPU, a VM or pod given a NIC apart from its GPU, no peer-memory module); "
                      "unset: true",
    "gpus_per_host": "GPUs per host where a node is an NVLink domain spanning several hosts (multi-node "
                     "NVLink, as GB200/GB300 NVL72 racks of 4-GPU compute trays: NCCL 2.20.3 and later join "
                     "the hosts of one NVLink clique into one node, MNNVL); unset: a node is one host",
    "nic_via_c2c": "the NICs hang off the host CPU's PCIe and the GPU reaches them over NVLink-C2C (Grace "
                   "Hopper, GB200): NCCL's path PHB to its NIC before 2.27, P2C from 2.27.3 (unset: false)",
}


@dataclass(frozen=True)
class Calibration:
    """One fitted α-β pair for NCCL's model: ``time = alpha_us + bytes / bw_GBps`` for collective
    ``op`` on ``ranks`` ranks when NCCL picks ``algorithm``/``protocol`` (``'any'``: the sweep-wide
    fit used for pairs without their own), as ``zerocalc fit --out`` writes it. ``dtype`` / ``redop``: the
    element type (canonical, :mod:`zerocalc.dtypes`) and nccl-tests reduction of the series it was fitted
    on, where the fit saw several series of one collective and group size (nccl-tests ``-d all`` /
    ``-o all``): NCCL chooses by type and reduction (:mod:`zerocalc.nccl.datatype`) and the kernels'
    rates differ by type; empty: any type (:func:`series_calibration`). ``nodes`` / ``ranks_per_node``: the
    shape the sweep stated it ran on (its ``# Rank`` lines' hosts, or NCCL's INFO lines), NCCL choosing and
    timing by nodes as well as ranks; 0: not stated (and every calibration written before shapes were
    kept), any shape of ``ranks`` ranks (:func:`shape_calibration`)."""

    op: str
    ranks: int
    algorithm: str
    protocol: str
    alpha_us: float
    bw_GBps: float
    nccl_version: str = ""
    dtype: str = ""
    redop: str = ""
    nodes: int = 0
    ranks_per_node: int = 0
    #: > 0: the pair is priced by the library's own model × this (a pair the sweep picked at too few sizes
    #: for a fit of its own: :func:`zerocalc.validate.sweep.fit_calibration`), ``alpha_us`` and ``bw_GBps``
    #: then 0 and unused; 0: the α-β pair prices it
    model_scale: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.ranks, bool) or not isinstance(self.ranks, int) or self.ranks < 1:
            raise ConfigError(f"ranks must be a whole number ≥ 1, got {self.ranks!r}",
                              option="nccl_calibration")
        for key in ("nodes", "ranks_per_node"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ConfigError(f"{key} must be a whole number ≥ 0, got {v!r}", option="nccl_calibration")
        if (self.nodes == 0) != (self.ranks_per_node == 0) or (
                self.nodes and not (self.nodes - 1) * self.ranks_per_node < self.ranks
                <= self.nodes * self.ranks_per_node):
            raise ConfigError(f"nodes and ranks_per_node must both be 0 (a key left out is 0) or hold the "
                              f"{self.ranks} ranks (ranks filling nodes of ranks_per_node), got nodes = "
                              f"{self.nodes}, ranks_per_node = {self.ranks_per_node}",
                              option="nccl_calibration")
        scaled = _positive(self.model_scale, "model_scale", zero_ok=True) > 0
        for key, positive in (("alpha_us", False), ("bw_GBps", not scaled)):
            v = _positive(getattr(self, key), key, zero_ok=not positive)
            if scaled and v:
                raise ConfigError(f"give model_scale or alpha_us and bw_GBps, not both: a pair is priced "
                                  f"by the model scaled or by a line (got model_scale = "
                                  f"{self.model_scale!r}, {key} = {v!r})", option="nccl_calibration")


    def time_s(self, n_bytes: float, model_s: float) -> float:
        """The calibrated time of a call of ``n_bytes``, the library's own model pricing it at ``model_s``:
        ``alpha_us + bytes / bw_GBps``, or ``model_s × model_scale`` where the pair is scaled."""
        if self.model_scale:
            return model_s * self.model_scale
        return self.alpha_us / 1e6 + n_bytes / (self.bw_GBps * 1e9)


def _positive(v, key: str, *, zero_ok: bool) -> float:
    """``v`` when a finite number > 0 (≥ 0 with ``zero_ok``), else a :class:`ConfigError` naming ``key``."""
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0 \
            or (not zero_ok and v == 0):
        raise ConfigError(f"{key} must be {'non-negative' if zero_ok else 'positive'}, got {v!r}",
                          option="nccl_calibration")
    return v


_CALIBRATION_KEYS = ("op", "ranks", "algorithm", "protocol", "alpha_us", "bw_GBps", "nccl_version", "dtype",
                     "redop", "nodes", "ranks_per_node", "model_scale")


def series_redop(redop: str | None) -> str:
    """nccl-tests' reduction as a calibration keys it: lower case, ``''`` where the table has none
    (``none`` / ``-``, a collective that does not reduce)."""
    r = str(redop or "").strip().lower()
    return "" if r in ("-", "none") else r


def calibrated_version(fits: tuple[Calibration, ...]) -> str | None:
    """The NCCL (or RCCL) version ``zerocalc fit --out`` calibrated ``fits`` at, where they name one: the
    release a check or table on that topology prices at when nothing else states one (a calibration's α-β
    pairs are the pairs that release chose); None where they name none or several."""
    versions = {f.nccl_version for f in fits if f.nccl_version}
    return versions.pop() if len(versions) == 1 else None


def series_calibration(fits: tuple[Calibration, ...], dtype: str | None,
                       redop: str | None) -> tuple[Calibration, ...]:
    """The pairs of ``fits`` that price a series of ``dtype`` under ``redop``, per collective and group
    size: those fitted on that type and reduction; else those fitted for any type (``dtype`` empty); else
    all of them (a type the fit did not see: the nearest calibration there is)."""
    key = (dtype or "", series_redop(redop))
    out: list[Calibration] = []
    for group in dict.fromkeys((c.op, c.ranks, c.nodes, c.ranks_per_node) for c in fits):
        mine = [c for c in fits if (c.op, c.ranks, c.nodes, c.ranks_per_node) == group]
        own = [c for c in mine if c.dtype and (c.dtype, c.redop) == key]
        out += own or [c for c in mine if not c.dtype] or mine
    return tuple(out)


def placement(gpus_per_node: int, ranks: int) -> tuple[int, int]:
    """``(nodes, ranks per node)`` of ``ranks`` ranks filling nodes of ``gpus_per_node`` GPUs, as NCCL's
    model places them (:func:`zerocalc.nccl.graph.machine`)."""
    return -(-ranks // gpus_per_node), min(gpus_per_node, ranks)


def shape_words(shape: tuple[int, int]) -> str:
    """``2 nodes × 8 ranks``: a shape as notes name it."""
    nodes, per_node = shape
    return f"{nodes} node{'' if nodes == 1 else 's'} × {per_node} rank{'' if per_node == 1 else 's'}"


def shape_calibration(fits: tuple[Calibration, ...], op: str, ranks: int,
                      shape: tuple[int, int]) -> tuple[tuple[Calibration, ...], str]:
    """The pairs of ``fits`` that price ``op`` on ``ranks`` ranks placed as ``shape`` (nodes, ranks per
    node), the others of ``fits`` kept as they are, and a note where the shape changed what prices it.
    Among those fitted for ``op`` on ``ranks`` ranks: those fitted on ``shape``; else those that state no
    shape (an older calibration, or a sweep that did not state its hosts); else none, and the note names the
    shape and those the fits hold: NCCL's choices and times differ by nodes at one rank count (2 × 8 and
    4 × 4 run other graphs), so a fit of one shape does not price another, which the library's own model
    (NCCL's, RCCL's) prices instead."""
    mine = [c for c in fits if (c.op, c.ranks) == (op, ranks)]
    rest = tuple(c for c in fits if (c.op, c.ranks) != (op, ranks))
    same = [c for c in mine if c.nodes and (c.nodes, c.ranks_per_node) == tuple(shape)]
    unstated = [c for c in mine if not c.nodes]
    if same or unstated or not mine:
        return rest + tuple(same or unstated), ""
    held = ", ".join(shape_words(s) for s in sorted({(c.nodes, c.ranks_per_node) for c in mine}))
    return rest, (f"the topology's calibration of {op} on {ranks} ranks was fitted on {held}, not "
                  f"{shape_words(shape)}: priced by the library's own model, uncalibrated")


@dataclass(frozen=True)
class NcclEnv:
    """The NCCL environment a cluster's vendor profile sets for NCCL versions ``min_version`` to
    ``max_version`` (inclusive; ``"2.21"`` covers every 2.21.x): ``NCCL_ALGO`` / ``NCCL_PROTO`` lists
    (:mod:`zerocalc.nccl.env` grammar), ``NCCL_NVLS_ENABLE``, ``NCCL_MIN_NCHANNELS`` /
    ``NCCL_MAX_NCHANNELS`` (the communicator's channels, :mod:`zerocalc.nccl.channels`), and the tuner
    plugin it loads, named (``tuner``: what the profile loads, priced only when its rules are given with
    ``--nccl-tuner``). NCCL's model applies the profile's ``NCCL_ALGO`` / ``NCCL_PROTO`` /
    ``NCCL_NVLS_ENABLE`` for the version it prices unless the user gives ``--nccl-algo`` /
    ``--nccl-proto`` (:func:`zerocalc.nccl.env.settings`); its channel counts stand either way
    (:func:`zerocalc.nccl.env.channel_limits`)."""

    min_version: str
    max_version: str
    algo: str | None = None
    proto: str | None = None
    nvls_enable: bool | None = None
    tuner: str = ""
    source: str = ""
    min_nchannels: int | None = None
    max_nchannels: int | None = None


_ENV_KEYS = {"min_version": "min_version", "max_version": "max_version", "NCCL_ALGO": "algo",
             "NCCL_PROTO": "proto", "NCCL_NVLS_ENABLE": "nvls_enable", "tuner": "tuner", "source": "source",
             "NCCL_MIN_NCHANNELS": "min_nchannels", "NCCL_MAX_NCHANNELS": "max_nchannels"}


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
    gpu_arch: str | None = None
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
    net_wire_latency_us: float | None = None
    net_eager_bytes: int | None = None
    net_flows: int | None = None
    nccl_buffsize: int | None = None
    net_flow_piece: int | None = None
    cpu_sockets: int | None = None
    gpus_per_pcie_switch: int | None = None
    gpu_p2p: bool | None = None
    p2p_level: str | None = None
    smp_GBps: float | None = None
    gpudirect_rdma: bool | None = None
    gpus_per_host: int | None = None
    nic_via_c2c: bool | None = None
    nccl_calibration: tuple[Calibration, ...] = ()
    nccl_env: tuple[NcclEnv, ...] = ()
    nccl_tuner: str | None = None  # a tuner configuration file (TOML key; the CLI reads it)

    def __post_init__(self) -> None:
        if not isinstance(self.gpus_per_node, int) or self.gpus_per_node < 1:
            raise ConfigError(f"must be a whole number ≥ 1, got {self.gpus_per_node!r}",
                              option="gpus_per_node")
        for key in ("compute_capability", "nvlink_gen", "nvlinks_per_gpu", "nvswitch_gen", "pcie_gen",
                    "nics_per_node", "net_eager_bytes"):
            v = getattr(self, key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise ConfigError(f"must be a whole number ≥ 0, got {v!r}", option=key)
        for key in ("cpu_sockets", "gpus_per_pcie_switch", "gpus_per_host", "net_flows", "nccl_buffsize",
                    "net_flow_piece"):
            v = getattr(self, key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ConfigError(f"must be a whole number ≥ 1, got {v!r}", option=key)
        if self.nvlink_gen and self.nvlinks_per_gpu == 0:
            raise ConfigError(f"must be ≥ 1 where nvlink_gen is {self.nvlink_gen} (a machine without NVLink "
                              "has nvlink_gen = 0), got 0", option="nvlinks_per_gpu")
        if self.gpus_per_host is not None and self.gpus_per_host > self.gpus_per_node:
            raise ConfigError(f"must be at most gpus_per_node ({self.gpus_per_node}), "
                              f"got {self.gpus_per_host}", option="gpus_per_host")
        for key in ("nic_Gbps", "smp_GBps"):
            v = getattr(self, key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)
                                  or not math.isfinite(v) or v <= 0):
                raise ConfigError(f"must be a positive number, got {v!r}", option=key)
        if self.gpu_arch is not None and self.gpu_arch not in GPU_ARCHS:
            raise ConfigError(f"must be one of {', '.join(GPU_ARCHS)}, got {self.gpu_arch!r}",
                              option="gpu_arch")
        for key in ("gpu_p2p", "gpudirect_rdma", "nic_via_c2c"):
            v = getattr(self, key)
            if v is not None and not isinstance(v, bool):
                raise ConfigError(f"must be true or false, got {v!r}", option=key)
        if self.p2p_level is not None and self.p2p_level not in P2P_LEVELS:
            raise ConfigError(f"must be one of {', '.join(P2P_LEVELS)}, got {self.p2p_level!r}",
                              option="p2p_level")
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

    def with_gpus_per_node(self, g: int) -> Topology:
        """The same machine with nodes of ``g`` GPUs (the GPUs of one group a node holds): a host of an
        NVLink domain holds at most the node's ``g`` (an NVL72 rack's 4-GPU hosts, 2 of whose GPUs are one
        data-parallel group's under tp = 4, are a node of 2 on one host)."""
        host = self.gpus_per_host
        return replace(self, gpus_per_node=g, gpus_per_host=None if host is None else min(host, g))

    @property
    def mnnvl(self) -> bool:
        """A node is an NVLink domain of several hosts (``gpus_per_host`` below ``gpus_per_node``)."""
        return self.gpus_per_host is not None and self.gpus_per_host < self.gpus_per_node

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


def require(topo: Topology, key: str, needed_by: str) -> Any:
    """The hardware field ``key`` of ``topo``; a :class:`ConfigError` naming it when unknown.

    ``needed_by`` says what needs it (``"NCCL's cost model"``).
    """
    v = getattr(topo, key)
    if v is None:
        raise ConfigError(f"topology {topo.name!r} does not give {key} ({HARDWARE_FIELDS[key]}), "
                          f"which {needed_by} needs; add it to the TOML file", option="--topology")
    return v


def require_all(topo: Topology, keys: tuple[str, ...], needed_by: str) -> None:
    """A :class:`ConfigError` naming every one of the hardware fields ``keys`` that ``topo`` lacks, so a
    TOML file is completed in one edit, not one key a run; nothing when it gives them all."""
    missing = [k for k in keys if getattr(topo, k) is None]
    if len(missing) == 1:
        require(topo, missing[0], needed_by)
    if missing:
        raise ConfigError(f"topology {topo.name!r} does not give {', '.join(missing)}, which {needed_by} "
                          "needs; add them to the TOML file", option="--topology")


def nvlink_mesh_peers(topo: Topology) -> int | None:
    """The other GPUs of a node whose NVLinks form a full mesh without NVSwitch: every GPU's
    ``nvlinks_per_gpu`` split evenly over the node's other GPUs (GH200's 18 links, 6 to each of three);
    ``None`` on NVSwitches, without NVLink, on nodes of 2 GPUs and where the links do not split evenly
    (DGX-1's hybrid cube-mesh: 6 links over 7 peers)."""
    k, links = topo.gpus_per_node, topo.nvlinks_per_gpu
    if (topo.nvswitch_gen or 0) > 0 or not (topo.nvlink_gen or 0) or not links or k < 3 or links % (k - 1):
        return None
    return k - 1
