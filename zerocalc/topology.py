"""Links and tiers: a two-level machine of nodes × GPUs per node, with presets.

A :class:`Topology` gives the numbers for the link symbols of :mod:`zerocalc.symbols`:
α and bandwidth inside a node (one GPU's link, one direction) and between nodes (the whole
node's injection bandwidth, one direction; a rank's share when all G GPUs send at once is
``inter.bw_Bps / G``). A flat (one link class) machine is a topology whose two tiers are equal.
Units inside: seconds and bytes/second; GB = 1e9 bytes. Constructors convert from the
user-facing units (µs, GB/s) once.

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


@dataclass(frozen=True)
class Topology:
    """A two-level machine. ``inter.bw_Bps`` is per NODE (all its NICs together)."""

    name: str
    title: str
    gpus_per_node: int
    intra: Link
    inter: Link
    gamma_s_per_byte: float = 0.0
    source: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.gpus_per_node, int) or self.gpus_per_node < 1:
            raise ConfigError(f"must be a whole number ≥ 1, got {self.gpus_per_node!r}",
                              option="gpus_per_node")

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

PRESETS: dict[str, Topology] = {
    t.name: t
    for t in (
        Topology(
            "dgx-a100", "NVIDIA DGX A100: NVLink3 + 8×200 Gb/s HDR InfiniBand", 8,
            Link.from_units(_NVLINK_US, 300.0), Link.from_units(_NET_US, 8 * 25.0),
            source="NVIDIA DGX A100 datasheet / A100 datasheet: NVLink3 600 GB/s per GPU "
                   "bidirectional (300 GB/s each way); 8× ConnectX-6 HDR 200 Gb/s (25 GB/s) per node",
        ),
        Topology(
            "dgx-h100", "NVIDIA DGX H100: NVLink4 + 8×400 Gb/s NDR InfiniBand", 8,
            Link.from_units(_NVLINK_US, 450.0), Link.from_units(_NET_US, 8 * 50.0),
            source="NVIDIA DGX H100 datasheet / H100 SXM datasheet: NVLink4 900 GB/s per GPU "
                   "bidirectional (450 GB/s each way); 8× ConnectX-7 NDR 400 Gb/s (50 GB/s) per node",
        ),
        Topology(
            "pcie-gen4", "8 GPUs on PCIe 4.0 x16, one 200 Gb/s HDR NIC per node", 8,
            Link.from_units(_PCI_US, 31.5), Link.from_units(_NET_US, 25.0),
            source="PCI-SIG PCIe 4.0: 16 GT/s × 16 lanes × 128/130 = 31.5 GB/s each way; "
                   "ConnectX-6 HDR 200 Gb/s = 25 GB/s",
        ),
        Topology(
            "ethernet-100g", "Commodity cluster: 8 PCIe 4.0 GPUs per node, one 100 GbE NIC per node", 8,
            Link.from_units(_PCI_US, 31.5), Link.from_units(_NET_US, 12.5),
            source="IEEE 802.3 100GBASE: 100 Gb/s = 12.5 GB/s per node; PCIe 4.0 x16 31.5 GB/s; "
                   "NCCL network hop latency (RoCE/IB) as the α, TCP sockets are slower",
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
        raise UnknownNameError("topology", str(name), TOPOLOGY_NAMES) from None


_TOP_KEYS = ("name", "title", "gpus_per_node", "gamma_s_per_byte", "intra", "inter", "source")
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
        [intra]                      # one GPU's link inside a node, one direction
        alpha_us = 3.4
        bw_GBps = 300
        [inter]                      # the whole node's injection bandwidth, one direction
        alpha_us = 14
        bw_GBps = 200

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
    return Topology(name, str(data.get("title", name)), g, tiers["intra"], tiers["inter"], gamma,
                    str(data.get("source", where)))
