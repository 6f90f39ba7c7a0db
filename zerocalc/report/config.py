"""What a report is about (:class:`ReportConfig`) and what it shows (:class:`ReportData`).

Also the few words every section uses to name the configuration: the topology's name and label,
and the one-line summary of the configuration.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from zerocalc.errors import ConfigError
from zerocalc.topology import Topology

if TYPE_CHECKING:
    import pandas as pd

    from zerocalc.nccl.ofi_tuner import OfiTuner
    from zerocalc.nccl.tuner import TunerConfig

#: Called with one line of progress at each stage of a long computation.
Progress = Callable[[str], None]


@dataclass(frozen=True)
class ReportConfig:
    """The cluster and model the report is about (the CLI's options), and where its traces come from."""

    psi: float = 7.5e9
    n: int = 64
    gpus_per_node: int = 8
    topology: str | Topology = "dgx-a100"  # a preset name or a Topology (e.g. read from a TOML file)
    comm_dtype: str = "fp16"
    k: float = 12.0
    traces: tuple[Path, ...] = ()  # empty: the real traces bundled with zerocalc
    feasibility_n: int = 4
    feasibility_steps: int = 20
    seed: int = 0
    #: memory of one GPU in bytes (``--gpu-memory``); None: the topology's, where it gives one
    gpu_memory_bytes: float | None = None
    #: tuner plugin rules (``--nccl-tuner``, or the topology TOML's ``nccl_tuner``): the schemes are also
    #: priced with NCCL's cost model, by itself and under these rules (section "volume_table")
    nccl_tuner: TunerConfig | None = None
    #: aws-ofi-nccl's tuner plugin of a release (``--ofi-tuner``), on the topology's EC2 platform: the schemes
    #: are also priced with NCCL's cost model, by itself and under the pairs this plugin returns (section
    #: "volume_table"); NCCL loads one tuner plugin, so not with ``nccl_tuner``
    ofi_tuner: OfiTuner | None = None
    #: NCCL's cost model as the CLI's ``--nccl-version``, ``--nccl-algo``, ``--nccl-proto`` and ``--nccl-env``
    #: (variable → value pairs, :func:`zerocalc.nccl.env_given.parse_given`) set it, as ``zerocalc table``
    #: prices under them: any of them given, the schemes are also priced with NCCL's model (section
    #: "volume_table"; :attr:`nccl_priced`)
    nccl_version: str | None = None
    nccl_algo: str | None = None
    nccl_proto: str | None = None
    nccl_env: tuple[tuple[str, str], ...] = ()
    #: how the implementation plan's time is priced (``--time-model``): ``"nccl"`` (NCCL's cost model under
    #: ``nccl_version`` / ``nccl_algo`` / ``nccl_proto``), ``"ring"`` (the α-β model), ``None`` (NCCL's
    #: where the topology gives what it needs; :func:`zerocalc.feasibility.plan_pricing`)
    plan_time_model: str | None = None
    #: the largest collective call (``--bucket``, bytes): NCCL's model prices each phase in equal calls no
    #: larger, in the volume table and the plan; ``None``: one call per phase; ``"implementation"``: each
    #: implementation's own buckets (:mod:`zerocalc.buckets`)
    bucket_bytes: float | str | None = None
    #: micro-batches per optimizer step of the run under review (``--micro-batches``, gradient accumulation):
    #: the volume table, the simulation, the verdict and the plan count each scheme's collectives at its
    #: implementation's cadence (:mod:`zerocalc.schemes`)
    micro_batches: int = 1
    #: the wire dtypes of the parameter- and gradient-side collectives under mixed precision
    #: (``--param-dtype`` / ``--grad-dtype``; ``None``: ``comm_dtype``): the volume table, page 1 and the plan
    #: price each side at its own width, the figures at ``comm_dtype``
    param_dtype: str | None = None
    grad_dtype: str | None = None
    #: tensor- and pipeline-parallel degrees of the run under review (``--tp`` / ``--pp``): ``n`` is then the
    #: run's GPUs, and the volume table, the equivalences, the verdict and the plan are of its data-parallel
    #: group, N = n/(tp·pp) ranks holding Ψ/(tp·pp) each, laid out as ``zerocalc table --tp --pp`` lays it
    #: (:func:`zerocalc.evaluate.data_parallel_layout`), as is figure 2 (time against Ψ); figures 1 and 3
    #: (bytes and memory against N) price data parallelism over N GPUs
    tp: int = 1
    pp: int = 1

    def __post_init__(self) -> None:
        """Refuse an impossible cluster at once (:class:`ConfigError` naming the CLI option)."""
        import math
        from numbers import Integral, Real

        if not (isinstance(self.psi, Real) and math.isfinite(self.psi) and self.psi > 0):
            raise ConfigError(f"must be a positive number of parameters, got {self.psi!r}", option="--psi")
        for value, option in ((self.n, "--n"), (self.gpus_per_node, "--gpus-per-node"),
                              (self.micro_batches, "--micro-batches"), (self.tp, "--tp"), (self.pp, "--pp")):
            if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
                raise ConfigError(f"must be a whole number ≥ 1, got {value!r}", option=option)
        if self.tp * self.pp > 1:
            from zerocalc.evaluate import data_parallel_layout

            data_parallel_layout(self.n, self.gpus_per_node, self.tp, self.pp)  # a ConfigError if not one
        if not (isinstance(self.k, Real) and math.isfinite(self.k) and self.k >= 0):
            raise ConfigError(f"must be a number ≥ 0, got {self.k!r}", option="--k")
        from zerocalc.dtypes import canonical_dtype

        for value, option in ((self.param_dtype, "--param-dtype"), (self.grad_dtype, "--grad-dtype")):
            if value is not None:
                canonical_dtype(value, option=option)
        if self.nccl_tuner is not None and self.ofi_tuner is not None:
            raise ConfigError("NCCL loads one tuner plugin: give --nccl-tuner or --ofi-tuner, not both",
                              option="--ofi-tuner")
        if self.nccl_env:  # checked as --nccl-env is (a bad entry is a ConfigError naming the option)
            from zerocalc.nccl.env_given import parse_given

            parse_given([f"{k}={v}" for k, v in self.nccl_env], self.nccl_algo, self.nccl_proto)
        from zerocalc.buckets import IMPLEMENTATION

        bucket = None if self.bucket_bytes == IMPLEMENTATION else self.bucket_bytes
        for value, option in ((self.gpu_memory_bytes, "--gpu-memory"), (bucket, "--bucket")):
            if value is not None and not (isinstance(value, Real) and math.isfinite(value) and value > 0):
                raise ConfigError(f"must be a positive number of bytes, got {value!r}", option=option)

    @property
    def dp_n(self) -> int:
        """The data-parallel degree N: ``n`` GPUs over tp·pp."""
        return self.n // (self.tp * self.pp)

    @property
    def n_words(self) -> str:
        """N in words: ``N = 64``, or under tensor / pipeline parallelism ``N = 8, the data-parallel group of
        64 GPUs at tp = 8, pp = 1``."""
        if self.tp * self.pp == 1:
            return f"N = {self.n}"
        return f"N = {self.dp_n}, the data-parallel group of {self.n} GPUs at tp = {self.tp}, pp = {self.pp}"

    @property
    def gpus_words(self) -> str:
        """The run in words: ``64 GPUs``, or under tensor / pipeline parallelism ``64 GPUs at tp = 8, pp = 1
        (data-parallel groups of N = 8)``."""
        if self.tp * self.pp == 1:
            return f"{self.n} GPUs"
        return f"{self.n} GPUs at tp = {self.tp}, pp = {self.pp} (data-parallel groups of N = {self.dp_n})"

    @property
    def wire_words(self) -> str:
        """The wire dtype in words: ``fp16``, or under mixed precision ``bf16 parameters / fp32
        gradients``."""
        if self.param_dtype is None and self.grad_dtype is None:
            return self.comm_dtype
        param, grad = self.param_dtype or self.comm_dtype, self.grad_dtype or self.comm_dtype
        return f"{param} parameters / {grad} gradients"

    @property
    def nccl_priced(self) -> bool:
        """Whether the schemes are also priced with NCCL's cost model: an NCCL option or a tuner given, or a
        topology calibrated on the cluster's own sweeps (``zerocalc fit --out``)."""
        from zerocalc.topology import get_topology

        given = (self.nccl_version, self.nccl_algo, self.nccl_proto, self.nccl_tuner, self.ofi_tuner,
                 self.bucket_bytes)
        return any(x is not None for x in given) or bool(self.nccl_env) or bool(
            get_topology(self.topology).nccl_calibration)

    @property
    def gpu_memory(self) -> float | None:
        """Bytes of one GPU's memory: ``gpu_memory_bytes``, else the topology's (None: not known)."""
        if self.gpu_memory_bytes is not None:
            return float(self.gpu_memory_bytes)
        from zerocalc.topology import get_topology

        mem = getattr(get_topology(self.topology), "gpu_memory_bytes", None)
        return None if mem is None else float(mem)


#: The report's default configuration (the committed PDF's).
DEFAULT_CONFIG = ReportConfig()


@dataclass
class ReportData:
    """Everything the PDF shows, computed from the public API; each figure's DataFrame is kept."""

    config: ReportConfig
    table: pd.DataFrame
    bytes_vs_n: pd.DataFrame
    time_vs_psi: pd.DataFrame
    memory_vs_n: pd.DataFrame
    memory_points: pd.DataFrame  # ZeRO Table 1 cells overlaid on figure 3; empty unless Ψ and K match
    derivations: list[dict[str, object]]
    identities: list[tuple[str, bool]]
    extra: dict[str, object] = field(default_factory=dict)


def topology_name(config: ReportConfig) -> str:
    t = config.topology
    return t.name if isinstance(t, Topology) else str(t)


def custom_topology(config: ReportConfig) -> Topology | None:
    """The report's topology when it is not a preset (read from a TOML file)."""
    from zerocalc.topology import PRESETS

    t = config.topology
    return t if isinstance(t, Topology) and PRESETS.get(t.name) != t else None


def figure_topologies(config: ReportConfig) -> list[str | Topology]:
    """Figure 2's panels: the report's own topology when it is not a preset, then each preset whose
    links differ from every earlier preset's (the figure prices the links alone; see
    :func:`same_links_as`)."""
    from zerocalc.topology import PRESETS

    custom = custom_topology(config)
    return [*([custom] if custom is not None else []), *[n for n in PRESETS if n not in same_links_as()]]


def figure_gpus_per_node(config: ReportConfig, topo: str | Topology) -> int:
    """The node size figure 2 prices a panel with: the report's own (``--gpus-per-node``) on the report's
    topology, each other preset's own node (4 GPUs on gh200, a 72-GPU NVLink domain on an NVL72 rack):
    a preset priced with another machine's node size would join its GPUs by links it does not have. The
    model prices whole nodes: where the preset's node size does not divide N, the largest node fill that
    does (N = 256 on NVL72 racks: 4 racks of 64), as a job of N GPUs on such machines places them."""
    from zerocalc.topology import PRESETS

    if isinstance(topo, Topology) or topo == topology_name(config) or topo not in PRESETS:
        return config.gpus_per_node
    return node_fill(PRESETS[topo].gpus_per_node, config.n, config.tp, config.pp)


def node_fill(gpus_per_node: int, n: int, tp: int = 1, pp: int = 1) -> int:
    """The GPUs a node of ``gpus_per_node`` holds of a job of ``n``: all ``n`` below a node, else the
    largest fill that divides ``n`` (whole nodes: 128 GPUs on 72-GPU NVL72 racks run as 2 of 64) and lays
    out ``tp`` x ``pp`` with whole nodes for the data-parallel groups
    (:func:`zerocalc.evaluate.data_parallel_layout`: 12 GPUs at pp = 2 on 4-GPU nodes run as 3 a node)."""
    from zerocalc.errors import ConfigError
    from zerocalc.evaluate import data_parallel_layout

    for d in range(min(gpus_per_node, n), 0, -1):
        if n % d:
            continue
        try:
            data_parallel_layout(n, d, tp, pp)
        except ConfigError:
            continue
        return d
    return 1  # a node of one GPU lays out any tp x pp that divides n (the report's own N was checked)


def same_links_as() -> dict[str, str]:
    """Each preset whose node size and two α-β links equal an earlier preset's → that preset (the
    cloud variants of a DGX: same textbook time, drawn once in figure 2)."""
    from zerocalc.topology import PRESETS

    seen: dict[tuple, str] = {}
    out: dict[str, str] = {}
    for name, t in PRESETS.items():
        key = (t.gpus_per_node, t.intra, t.inter)
        if key in seen:
            out[name] = seen[key]
        else:
            seen[key] = name
    return out


def topology_label(topo: str | Topology) -> str:
    """A topology's name; a custom one that shares a preset's name is told apart from it."""
    from zerocalc.topology import PRESETS

    if not isinstance(topo, Topology):
        return str(topo)
    return topo.name if PRESETS.get(topo.name, topo) == topo else f"{topo.name} (custom)"


def config_line(config: ReportConfig, nccl: bool = True) -> str:
    """The configuration in one line, with what NCCL's cost model was priced under where it was
    (:func:`nccl_words`; not with ``nccl`` false, for what the α-β model alone prices)."""
    nccl = nccl_words(config) if nccl else ""
    k = config.micro_batches
    where = (f"N = {config.n} GPUs ({config.gpus_per_node} per node)" if config.tp * config.pp == 1 else
             f"{config.n} GPUs ({config.gpus_per_node} per node) at tp = {config.tp}, pp = {config.pp}: "
             f"data-parallel groups of N = {config.dp_n} ranks holding Ψ/{config.tp * config.pp} each (the "
             "volume table, the equivalences, the verdict, the plan and figure 2; figures 1 and 3 price "
             "data parallelism over N GPUs)")
    return (f"Ψ = {config.psi:,.0f} parameters, {where}, "
            f"topology {topology_name(config)}, {config.comm_dtype} communication"
            + ("" if config.wire_words == config.comm_dtype else
               f" ({config.wire_words} in the volume table, the plan and figure 2)") + f", K = {config.k:g} "
            "bytes of optimizer state per parameter"
            + (f", {k} micro-batches per optimizer step" if k > 1 else "") + (f"; {nccl}" if nccl else ""))


def nccl_words(config: ReportConfig) -> str:
    """What NCCL's cost model prices the schemes under (``''`` where the report does not price with it):
    ``NCCL's cost model: NCCL 2.21.5 under NCCL_ALGO=Ring, NCCL_PROTO=Simple``; the version as
    :func:`zerocalc.nccl_pricing.price_rows` takes it (given, else the one the topology's calibration was
    fitted at, else the latest modelled), RCCL's on AMD GPUs
    (:func:`zerocalc.rccl_pricing.price_rows_rccl`)."""
    if not config.nccl_priced:
        return ""
    from zerocalc.topology import get_topology
    from zerocalc.topology.machine import calibrated_version

    topo = get_topology(config.topology)
    lib = "NCCL" if topo.gpu_arch is None else "RCCL"
    fitted = calibrated_version(topo.nccl_calibration) if lib == "NCCL" else None
    if config.nccl_version:
        version = config.nccl_version
    elif fitted:
        version = f"{fitted} (its calibration's)"
    elif lib == "RCCL":
        from zerocalc.nccl.rccl import rccl_default_for

        version = f"{rccl_default_for(topo.gpu_arch).name} (the default for {topo.gpu_arch})"
    else:
        from zerocalc.nccl import LATEST

        version = f"{LATEST.tag.lstrip('v').split('-')[0]} (the latest modelled)"
    env = [f"NCCL_ALGO={config.nccl_algo}" if config.nccl_algo is not None else "",
           f"NCCL_PROTO={config.nccl_proto}" if config.nccl_proto is not None else "",
           *(f"{k}={v}" for k, v in config.nccl_env)]
    env = [e for e in env if e]
    bucket = ""
    if config.bucket_bytes is not None:
        from zerocalc.buckets import IMPLEMENTATION
        from zerocalc.units import format_bytes

        bucket = (", each gradient reduction in its implementation's default buckets"
                  if config.bucket_bytes == IMPLEMENTATION else
                  f", calls of at most {format_bytes(config.bucket_bytes)}")
    return f"{lib}'s cost model: {lib} {version}" + (f" under {', '.join(env)}" if env else "") + bucket

